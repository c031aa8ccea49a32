//! The operator's sections: `alerts:` (the webhook that is told when
//! something needs a person), `end_users:` (where a request's end user is
//! read, and how long an id may be), `governance.suspend` (abuse
//! suspension) and `config:` (whether the API may change the config).

use std::time::Duration;

use serde::Deserialize;

use crate::{duration_or, ssrf, Issue};

/// Where alerts go and when they are sent again.
#[derive(Debug, Clone, PartialEq)]
pub struct Alerts {
    /// The receiver (SSRF-guarded: https, or http on loopback).
    pub webhook: String,
    /// The body's shape.
    pub format: AlertFormat,
    /// The same alert (kind and subject) is sent at most once per window.
    pub dedup: Duration,
    /// Alerts waiting for the receiver; past it they are dropped (counted).
    pub queue: usize,
    /// Budget thresholds, in percent of a cap (each crossing alerts once a window).
    pub budget_at: Vec<u8>,
    /// The share of 5xx answers over the last minute that alerts.
    pub error_rate: f64,
    /// The fewest requests in that minute for the error rate to count.
    pub error_rate_min_requests: u64,
}

/// An alert body's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AlertFormat {
    /// `{kind, subject, at, detail, state}`.
    #[default]
    Json,
    /// The same members plus `text`, which Slack-compatible receivers show.
    Slack,
}

/// Where a request's end user is read, beyond the caller's own field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndUsers {
    /// The header that names the end user (it wins over the body's field).
    pub header: http::HeaderName,
    /// The longest id kept, in bytes (a longer one is cut at a character).
    pub max_length: usize,
}

impl Default for EndUsers {
    fn default() -> EndUsers {
        EndUsers { header: http::HeaderName::from_static("x-switchyard-user"), max_length: 128 }
    }
}

/// Abuse suspension: a key refused this often for its own reasons (rate
/// limits, policy) within `within` is suspended for `duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Suspend {
    /// Refusals that suspend.
    pub after: u32,
    /// The window they are counted over.
    pub within: Duration,
    /// How long a suspension lasts (an admin may lift it sooner).
    pub duration: Duration,
}

/// `config:`: how the config may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConfigControl {
    /// GitOps: the file is the source; the API refuses changes.
    pub locked: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAlerts {
    pub webhook: String,
    pub format: Option<String>,
    pub dedup: Option<String>,
    pub queue: Option<usize>,
    pub budget_at: Option<Vec<u64>>,
    pub error_rate: Option<RawErrorRate>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawErrorRate {
    pub above: f64,
    pub min_requests: Option<u64>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEndUsers {
    pub header: Option<String>,
    pub max_length: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSuspend {
    pub after: u32,
    pub within: Option<String>,
    #[serde(rename = "for")]
    pub duration: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfigControl {
    pub locked: Option<bool>,
}

pub(crate) fn alerts(raw: Option<&RawAlerts>, issues: &mut Vec<Issue>) -> Option<Alerts> {
    let raw = raw?;
    if let Err(message) = ssrf::check_outbound_url(&raw.webhook) {
        issues.push(Issue::new("alerts.webhook", message, "use https://, or http:// on loopback"));
    }
    let format = match raw.format.as_deref() {
        None | Some("json") => AlertFormat::Json,
        Some("slack") => AlertFormat::Slack,
        Some(other) => {
            issues.push(Issue::new("alerts.format", format!("`{other}` is not a format"), "use json or slack"));
            AlertFormat::Json
        }
    };
    let dedup = duration_or(raw.dedup.as_deref(), Duration::from_secs(300), "alerts.dedup", issues);
    if dedup > Duration::from_secs(7 * 86_400) {
        issues.push(Issue::new("alerts.dedup", "longer than 7d", "write e.g. 5m"));
    }
    let queue = raw.queue.unwrap_or(1_000);
    if !(1..=1_000_000).contains(&queue) {
        issues.push(Issue::new("alerts.queue", format!("{queue} is out of range"), "write 1 to 1000000"));
    }
    let mut budget_at = Vec::new();
    for &at in raw.budget_at.as_deref().unwrap_or(&[80, 100]) {
        match u8::try_from(at) {
            Ok(at @ 1..=100) => budget_at.push(at),
            _ => issues.push(Issue::new(
                "alerts.budget_at",
                format!("{at}% is out of range"),
                "write percents from 1 to 100",
            )),
        }
    }
    budget_at.sort_unstable();
    budget_at.dedup();
    let (error_rate, error_rate_min_requests) = match &raw.error_rate {
        None => (0.5, 20),
        Some(rate) => {
            if !(rate.above > 0.0 && rate.above <= 1.0) {
                issues.push(Issue::new(
                    "alerts.error_rate.above",
                    "must be a share above 0 and at most 1",
                    "write e.g. 0.2",
                ));
            }
            (rate.above.clamp(f64::MIN_POSITIVE, 1.0), rate.min_requests.unwrap_or(20).max(1))
        }
    };
    Some(Alerts {
        webhook: raw.webhook.clone(),
        format,
        dedup,
        queue: queue.clamp(1, 1_000_000),
        budget_at,
        error_rate,
        error_rate_min_requests,
    })
}

pub(crate) fn end_users(raw: Option<&RawEndUsers>, issues: &mut Vec<Issue>) -> EndUsers {
    let mut end_users = EndUsers::default();
    let Some(raw) = raw else { return end_users };
    if let Some(header) = &raw.header {
        match http::HeaderName::from_bytes(header.as_bytes()) {
            Ok(name) => end_users.header = name,
            Err(_) => issues.push(Issue::new(
                "end_users.header",
                format!("`{header}` is not a header name"),
                "write e.g. x-switchyard-user",
            )),
        }
    }
    match raw.max_length {
        None => {}
        Some(length @ 1..=1024) => end_users.max_length = length,
        Some(length) => {
            issues.push(Issue::new("end_users.max_length", format!("{length} is out of range"), "write 1 to 1024"))
        }
    }
    end_users
}

pub(crate) fn suspend(raw: Option<&RawSuspend>, issues: &mut Vec<Issue>) -> Option<Suspend> {
    let raw = raw?;
    if raw.after == 0 {
        issues.push(Issue::new("governance.suspend.after", "0 refusals would suspend every key", "write e.g. 50"));
    }
    let within = duration_or(raw.within.as_deref(), Duration::from_secs(60), "governance.suspend.within", issues);
    let duration = duration_or(raw.duration.as_deref(), Duration::from_secs(900), "governance.suspend.for", issues);
    for (path, value) in [("governance.suspend.within", within), ("governance.suspend.for", duration)] {
        if value.is_zero() || value > Duration::from_secs(30 * 86_400) {
            issues.push(Issue::new(path, "must be between 1s and 30d", "write e.g. 15m"));
        }
    }
    Some(Suspend { after: raw.after.max(1), within, duration })
}

pub(crate) fn config_control(raw: &RawConfigControl) -> ConfigControl {
    ConfigControl { locked: raw.locked.unwrap_or(false) }
}
