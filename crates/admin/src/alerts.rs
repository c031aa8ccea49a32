//! The open alerts over the admin API (what the console shows): each
//! firing alert, and what happened to alerts so far by kind.

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use std::sync::atomic::Ordering;
use utoipa::ToSchema;

use crate::shared::*;

/// One firing alert.
#[derive(Debug, Serialize, ToSchema)]
pub struct AlertView {
    /// `budget_threshold`, `breaker_opened`, `pool_exhausted`, `key_suspended`,
    /// `ledger_degraded`, `redis_degraded` or `error_rate`.
    pub kind: &'static str,
    /// Which one.
    pub subject: String,
    /// When it was raised (Unix ms).
    pub at: u64,
    /// What happened.
    pub detail: String,
}

/// What happened to alerts of one kind.
#[derive(Debug, Serialize, ToSchema)]
pub struct AlertCounts {
    /// The kind.
    pub kind: &'static str,
    /// Posted to the receiver.
    pub sent: u64,
    /// Not sent again within the dedup window.
    pub deduplicated: u64,
    /// Dropped from a full queue.
    pub dropped: u64,
    /// Never taken by the receiver.
    pub failed: u64,
}

/// `GET /api/v1/admin/alerts`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AlertsView {
    /// Whether `alerts:` names a receiver.
    pub configured: bool,
    /// The alerts firing now, newest first.
    pub open: Vec<AlertView>,
    /// Counts by kind.
    pub counts: Vec<AlertCounts>,
}

#[utoipa::path(get, path = "/api/v1/admin/alerts", responses((status = 200, body = AlertsView)))]
pub(crate) async fn alerts(
    State(admin): State<Admin>,
    axum::Extension(actor): axum::Extension<Actor>,
) -> Json<AlertsView> {
    use switchyard_telemetry::alert::AlertKind;
    let Some(alerts) = &admin.gateway.telemetry.alerts else {
        return Json(AlertsView { configured: false, open: Vec::new(), counts: Vec::new() });
    };
    // A tenant admin sees the alerts about its subtree's keys and groups,
    // and none of the gateway's counts.
    if let Some(governance) = admin.gateway.governance.as_ref().filter(|_| actor.tenant().is_some()) {
        let open = alerts
            .open()
            .into_iter()
            .filter(|a| crate::tenancy::reaches_subject(governance, &actor, &a.subject))
            .map(|a| AlertView { kind: a.kind.as_str(), subject: a.subject, at: a.at, detail: a.detail })
            .collect();
        return Json(AlertsView { configured: true, open, counts: Vec::new() });
    }
    if actor.tenant().is_some() {
        return Json(AlertsView { configured: true, open: Vec::new(), counts: Vec::new() });
    }
    let open = alerts
        .open()
        .into_iter()
        .map(|a| AlertView { kind: a.kind.as_str(), subject: a.subject, at: a.at, detail: a.detail })
        .collect();
    let stats = &alerts.stats;
    let counts = AlertKind::ALL
        .iter()
        .enumerate()
        .map(|(i, kind)| AlertCounts {
            kind: kind.as_str(),
            sent: stats.sent[i].load(Ordering::Relaxed),
            deduplicated: stats.deduplicated[i].load(Ordering::Relaxed),
            dropped: stats.dropped[i].load(Ordering::Relaxed),
            failed: stats.failed[i].load(Ordering::Relaxed),
        })
        .collect();
    Json(AlertsView { configured: true, open, counts })
}
