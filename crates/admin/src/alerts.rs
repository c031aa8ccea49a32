//! The open alerts over the admin API (what the console shows): each
//! firing alert with its silence, what happened to alerts so far by kind,
//! and an operator's silences (audited, like every change).

use axum::extract::State;
use axum::response::Response;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use std::sync::atomic::Ordering;
use switchyard_state::governance::now_ms;
use switchyard_telemetry::alert::{Alert, AlertKind, Alerts};
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
    /// Silenced until then (Unix ms): nothing of it is sent meanwhile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub silenced_until: Option<u64>,
    /// Who silenced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub silenced_by: Option<String>,
}

impl AlertView {
    fn of(alerts: &Alerts, alert: Alert, now: u64) -> AlertView {
        let silence = alerts.silenced(alert.kind, &alert.subject, now);
        AlertView {
            kind: alert.kind.as_str(),
            silenced_until: silence.as_ref().map(|s| s.until),
            silenced_by: silence.map(|s| s.by),
            subject: alert.subject,
            at: alert.at,
            detail: alert.detail,
        }
    }
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
    /// Not sent: silenced by an operator.
    pub silenced: u64,
}

/// `GET /api/v1/admin/alerts`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AlertsView {
    /// Whether `alerts:` names a receiver (without one, alerts are still
    /// raised and listed here, and sent nowhere).
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
    let Some(alerts) = &admin.gateway.telemetry.alerts else {
        return Json(AlertsView { configured: false, open: Vec::new(), counts: Vec::new() });
    };
    let (configured, now) = (alerts.delivers(), now_ms());
    // A tenant admin sees the alerts about its subtree's keys and groups,
    // and none of the gateway's counts.
    if let Some(governance) = admin.gateway.governance.as_ref().filter(|_| actor.tenant().is_some()) {
        let open = alerts
            .open()
            .into_iter()
            .filter(|a| crate::tenancy::reaches_subject(governance, &actor, &a.subject))
            .map(|a| AlertView::of(alerts, a, now))
            .collect();
        return Json(AlertsView { configured, open, counts: Vec::new() });
    }
    if actor.tenant().is_some() {
        return Json(AlertsView { configured, open: Vec::new(), counts: Vec::new() });
    }
    let open = alerts.open().into_iter().map(|a| AlertView::of(alerts, a, now)).collect();
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
            silenced: stats.silenced[i].load(Ordering::Relaxed),
        })
        .collect();
    Json(AlertsView { configured, open, counts })
}

/// The longest silence: a week (an alert silenced for longer is one to
/// turn off in the config).
const MAX_SILENCE: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// The longest subject a silence names (an alert's own are far shorter).
const MAX_SUBJECT: usize = 512;

/// `POST /api/v1/admin/alerts/silences`: silence one alert for a while.
#[derive(Debug, Deserialize, ToSchema)]
pub struct SilenceBody {
    /// The alert's kind (`breaker_opened`, ...).
    pub kind: String,
    /// Its subject, as listed.
    pub subject: String,
    /// For how long (`30m`, `1h`, `1d`; at most 7d).
    #[serde(rename = "for")]
    pub duration: String,
}

/// `DELETE /api/v1/admin/alerts/silences`: end one alert's silence.
#[derive(Debug, Deserialize, ToSchema)]
pub struct UnsilenceBody {
    /// The alert's kind.
    pub kind: String,
    /// Its subject.
    pub subject: String,
}

/// A silence as it stands.
#[derive(Debug, Serialize, ToSchema)]
pub struct SilenceView {
    /// The alert's kind.
    pub kind: &'static str,
    /// Its subject.
    pub subject: String,
    /// Silenced until then (Unix ms; absent: not silenced now).
    pub until: Option<u64>,
    /// Who silenced it.
    pub by: Option<String>,
}

fn kind_of(name: &str) -> ApiResult<AlertKind> {
    AlertKind::from_name(name).ok_or_else(|| bad(format!("kind: `{name}` is not an alert kind")))
}

fn alerts_of(admin: &Admin) -> ApiResult<&Alerts> {
    admin.gateway.telemetry.alerts.as_ref().ok_or_else(|| bad("this gateway keeps no alerts"))
}

/// Silences an alert (kind and subject) for a while: it stays listed, and
/// nothing of it reaches the receiver until the silence ends. Audited with
/// the silence before and after.
#[utoipa::path(post, path = "/api/v1/admin/alerts/silences", request_body = SilenceBody, responses((status = 200, body = SilenceView), (status = 400)))]
pub(crate) async fn silence(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Json(body): Json<SilenceBody>,
) -> ApiResult<Response> {
    let alerts = alerts_of(&admin)?;
    let kind = kind_of(&body.kind)?;
    if body.subject.is_empty() || body.subject.len() > MAX_SUBJECT {
        return Err(bad(format!("subject: from 1 to {MAX_SUBJECT} bytes, as the alert lists it")));
    }
    let duration = switchyard_config::parse_duration(&body.duration).map_err(|e| bad(format!("for: {e}")))?;
    if duration.is_zero() || duration > MAX_SILENCE {
        return Err(bad("for: a silence lasts from 1s to 7d"));
    }
    let now = now_ms();
    let until = now.saturating_add(duration.as_millis() as u64);
    let before = alerts.silence(kind, &body.subject, until, &actor.audit_name(), now);
    let was = before
        .filter(|s| s.until > now)
        .map_or("not silenced".to_owned(), |s| format!("silenced until {}", utc_time(s.until)));
    let note = format!("{} {}: {was} -> silenced until {}", kind.as_str(), body.subject, utc_time(until));
    let view = SilenceView {
        kind: kind.as_str(),
        subject: body.subject.clone(),
        until: Some(until),
        by: Some(actor.audit_name()),
    };
    Ok(noted(Some(note), audited(&body.subject, Json(view))))
}

/// Ends an alert's silence: what it raises is sent again at once.
#[utoipa::path(delete, path = "/api/v1/admin/alerts/silences", request_body = UnsilenceBody, responses((status = 200, body = SilenceView), (status = 400)))]
pub(crate) async fn unsilence(State(admin): State<Admin>, Json(body): Json<UnsilenceBody>) -> ApiResult<Response> {
    let alerts = alerts_of(&admin)?;
    let kind = kind_of(&body.kind)?;
    let before = alerts.unsilence(kind, &body.subject).filter(|s| s.until > now_ms());
    let was = before.map_or("not silenced".to_owned(), |s| format!("silenced until {} by {}", utc_time(s.until), s.by));
    let note = format!("{} {}: {was} -> not silenced", kind.as_str(), body.subject);
    let view = SilenceView { kind: kind.as_str(), subject: body.subject.clone(), until: None, by: None };
    Ok(noted(Some(note), audited(&body.subject, Json(view))))
}
