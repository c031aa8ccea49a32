//! Alerts: what needs a person, sent to the operator's webhook. An alert
//! has a kind and a subject (`breaker_opened`, `pool "chat" / lane "a"`);
//! the same pair is sent at most once per dedup window while it stays
//! open, and once more when it resolves. Delivery is off the request path:
//! a bounded queue (full: dropped and counted) and one task that posts
//! each alert, retried with backoff, through the SSRF-guarded hook client.
//! The open alerts are kept for the console.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use serde::Serialize;
use switchyard_config::{AlertFormat, Alerts as AlertConfig};
use switchyard_transport::hooks::HookClient;
use tokio::sync::mpsc;

/// What an alert is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// A key's or group's spend crossed a threshold of its budget.
    BudgetThreshold,
    /// A budget's spend reached one of its own `warn` shares (once each a
    /// window).
    BudgetWarning,
    /// At its recent pace a budget runs out before its window ends (once a
    /// window).
    BudgetForecast,
    /// A lane's breaker opened in a pool.
    BreakerOpened,
    /// A lane's breaker closed again (sent as the opened alert's resolution too).
    BreakerClosed,
    /// No lane of a pool (nor of its fallbacks) can serve.
    PoolExhausted,
    /// A key was suspended for abuse.
    KeySuspended,
    /// The ledger's write-behind queue is filling or dropping rows.
    LedgerDegraded,
    /// The fleet's Redis cannot be reached.
    RedisDegraded,
    /// The share of 5xx answers passed its threshold.
    ErrorRate,
    /// An MCP server changed an approved tool's schema: it is withheld
    /// until approved again.
    McpToolChanged,
    /// A provider's usage report differs from the ledger past
    /// `reconcile.tolerance` (once per provider, model and day).
    ReconcileDrift,
}

impl AlertKind {
    /// Every kind, for metrics.
    pub const ALL: [AlertKind; 12] = [
        AlertKind::BudgetThreshold,
        AlertKind::BudgetWarning,
        AlertKind::BudgetForecast,
        AlertKind::BreakerOpened,
        AlertKind::BreakerClosed,
        AlertKind::PoolExhausted,
        AlertKind::KeySuspended,
        AlertKind::LedgerDegraded,
        AlertKind::RedisDegraded,
        AlertKind::ErrorRate,
        AlertKind::McpToolChanged,
        AlertKind::ReconcileDrift,
    ];

    /// Its name on the wire and in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::BudgetThreshold => "budget_threshold",
            AlertKind::BudgetWarning => "budget_warning",
            AlertKind::BudgetForecast => "budget_forecast",
            AlertKind::BreakerOpened => "breaker_opened",
            AlertKind::BreakerClosed => "breaker_closed",
            AlertKind::PoolExhausted => "pool_exhausted",
            AlertKind::KeySuspended => "key_suspended",
            AlertKind::LedgerDegraded => "ledger_degraded",
            AlertKind::RedisDegraded => "redis_degraded",
            AlertKind::ErrorRate => "error_rate",
            AlertKind::McpToolChanged => "mcp_tool_changed",
            AlertKind::ReconcileDrift => "reconcile_drift",
        }
    }
}

/// One alert as the receiver gets it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Alert {
    /// What it is about.
    pub kind: AlertKind,
    /// Which one (a key, a pool and lane, ...).
    pub subject: String,
    /// When it was raised (Unix ms).
    pub at: u64,
    /// What happened, for people.
    pub detail: String,
    /// `firing`, or `resolved` when it ended.
    pub state: &'static str,
}

/// What happened to alerts, for `/metrics` and `/stats`.
#[derive(Debug, Default)]
pub struct AlertStats {
    /// Posted to the receiver.
    pub sent: [AtomicU64; AlertKind::ALL.len()],
    /// Not sent again within the dedup window.
    pub deduplicated: [AtomicU64; AlertKind::ALL.len()],
    /// Dropped: the queue was full.
    pub dropped: [AtomicU64; AlertKind::ALL.len()],
    /// The receiver never took them (every try failed).
    pub failed: [AtomicU64; AlertKind::ALL.len()],
}

fn index(kind: AlertKind) -> usize {
    AlertKind::ALL.iter().position(|k| *k == kind).unwrap_or(0)
}

/// The most open alerts kept (each a distinct kind and subject).
const MAX_OPEN: usize = 1_000;

/// Dedup state and the open alerts.
#[derive(Debug, Default)]
struct Book {
    /// When each (kind, subject) was last sent firing (Unix ms).
    sent_at: HashMap<(AlertKind, String), u64>,
    /// The alerts firing now.
    open: HashMap<(AlertKind, String), Alert>,
}

/// The alerts of a process (shared by every gateway a reload builds).
pub struct Alerts {
    queue: mpsc::Sender<Alert>,
    dedup_ms: u64,
    book: Mutex<Book>,
    /// Counters.
    pub stats: Arc<AlertStats>,
    /// The thresholds and rates the watcher reads.
    pub config: AlertConfig,
}

impl Alerts {
    /// Starts delivery to `config.webhook` through `client`.
    pub fn start(config: &AlertConfig, client: &HookClient) -> Alerts {
        let (queue, rx) = mpsc::channel(config.queue);
        let stats = Arc::new(AlertStats::default());
        switchyard_tasks::service("alert delivery", deliver(config.clone(), rx, client.clone(), stats.clone()));
        Alerts {
            queue,
            dedup_ms: config.dedup.as_millis() as u64,
            book: Mutex::new(Book::default()),
            stats,
            config: config.clone(),
        }
    }

    /// Raises `kind` about `subject` at `now_ms`: sent unless the same was
    /// sent within the dedup window; kept open until resolved.
    pub fn raise(&self, kind: AlertKind, subject: &str, detail: String, now_ms: u64) {
        let alert = Alert { kind, subject: subject.to_owned(), at: now_ms, detail, state: "firing" };
        let key = (kind, subject.to_owned());
        let send = {
            let mut book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
            if book.open.len() >= MAX_OPEN && !book.open.contains_key(&key) {
                // The oldest open alert makes room.
                if let Some(oldest) = book.open.iter().min_by_key(|(_, a)| a.at).map(|(k, _)| k.clone()) {
                    book.open.remove(&oldest);
                }
            }
            book.open.insert(key.clone(), alert.clone());
            let fresh = book.sent_at.get(&key).is_none_or(|&at| now_ms.saturating_sub(at) >= self.dedup_ms);
            if fresh {
                if book.sent_at.len() >= MAX_OPEN * 4 {
                    let horizon = now_ms.saturating_sub(self.dedup_ms);
                    book.sent_at.retain(|_, at| *at >= horizon);
                }
                book.sent_at.insert(key, now_ms);
            }
            fresh
        };
        if send {
            self.offer(alert);
        } else {
            self.stats.deduplicated[index(kind)].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Ends an open `kind` about `subject`: the receiver is told once.
    /// Nothing happens when it was not open.
    pub fn resolve(&self, kind: AlertKind, subject: &str, detail: String, now_ms: u64) {
        let was_open = {
            let mut book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
            book.open.remove(&(kind, subject.to_owned())).is_some()
        };
        if was_open {
            self.offer(Alert { kind, subject: subject.to_owned(), at: now_ms, detail, state: "resolved" });
        }
    }

    /// Sends a one-off `kind` about `subject` (deduplicated like any
    /// other, never kept open): an event rather than a condition.
    pub fn notify(&self, kind: AlertKind, subject: &str, detail: String, now_ms: u64) {
        self.raise(kind, subject, detail, now_ms);
        self.clear(kind, subject);
    }

    /// Forgets an open `kind` about `subject` without telling the receiver
    /// (another alert says it ended).
    pub fn clear(&self, kind: AlertKind, subject: &str) {
        self.book.lock().unwrap_or_else(PoisonError::into_inner).open.remove(&(kind, subject.to_owned()));
    }

    /// Whether `kind` about `subject` is open.
    pub fn is_open(&self, kind: AlertKind, subject: &str) -> bool {
        self.book.lock().unwrap_or_else(PoisonError::into_inner).open.contains_key(&(kind, subject.to_owned()))
    }

    /// The alerts firing now, newest first.
    pub fn open(&self) -> Vec<Alert> {
        let mut open: Vec<Alert> =
            self.book.lock().unwrap_or_else(PoisonError::into_inner).open.values().cloned().collect();
        open.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| a.subject.cmp(&b.subject)));
        open
    }

    fn offer(&self, alert: Alert) {
        let kind = alert.kind;
        if self.queue.try_send(alert).is_err() {
            self.stats.dropped[index(kind)].fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The body a receiver gets.
fn body(format: AlertFormat, alert: &Alert) -> Vec<u8> {
    match format {
        AlertFormat::Json => serde_json::to_vec(alert).unwrap_or_default(),
        AlertFormat::Slack => {
            let mut value = serde_json::to_value(alert).unwrap_or_default();
            let text =
                format!("[switchyard] {} {}: {} — {}", alert.state, alert.kind.as_str(), alert.subject, alert.detail);
            if let Some(object) = value.as_object_mut() {
                object.insert("text".into(), serde_json::Value::String(text));
            }
            serde_json::to_vec(&value).unwrap_or_default()
        }
    }
}

/// Posts each alert in turn, up to four tries with backoff (0.5 s, 1 s, 2 s).
async fn deliver(config: AlertConfig, mut rx: mpsc::Receiver<Alert>, client: HookClient, stats: Arc<AlertStats>) {
    while let Some(alert) = rx.recv().await {
        let payload = Bytes::from(body(config.format, &alert));
        let mut delivered = false;
        for attempt in 0..4u32 {
            let sent = client
                .post(&config.webhook, "application/json", Full::new(payload.clone()), Duration::from_secs(10))
                .await;
            if sent.is_ok() {
                delivered = true;
                break;
            }
            if attempt < 3 {
                tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
            }
        }
        let counter = if delivered { &stats.sent } else { &stats.failed };
        counter[index(alert.kind)].fetch_add(1, Ordering::Relaxed);
        if !delivered {
            let url = switchyard_config::shown_url(&config.webhook);
            tracing::warn!(%url, kind = alert.kind.as_str(), "alert webhook unreachable; alert dropped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> AlertConfig {
        AlertConfig {
            webhook: "http://localhost:9/alerts".into(),
            format: AlertFormat::Json,
            dedup: Duration::from_secs(60),
            queue: 16,
            budget_at: vec![80, 100],
            error_rate: 0.5,
            error_rate_min_requests: 20,
        }
    }

    #[tokio::test]
    async fn the_same_alert_is_sent_once_a_window_and_resolves_once() {
        let alerts = Alerts::start(&config(), &HookClient::new());
        alerts.raise(AlertKind::PoolExhausted, "pool `a`", "down".into(), 1_000);
        alerts.raise(AlertKind::PoolExhausted, "pool `a`", "down".into(), 2_000);
        assert_eq!(alerts.stats.deduplicated[index(AlertKind::PoolExhausted)].load(Ordering::Relaxed), 1);
        assert!(alerts.is_open(AlertKind::PoolExhausted, "pool `a`"));
        assert_eq!(alerts.open().len(), 1);
        alerts.resolve(AlertKind::PoolExhausted, "pool `a`", "back".into(), 3_000);
        alerts.resolve(AlertKind::PoolExhausted, "pool `a`", "back".into(), 3_500);
        assert!(alerts.open().is_empty());
        // Past the window it is sent again.
        alerts.raise(AlertKind::PoolExhausted, "pool `a`", "down".into(), 62_000);
        assert_eq!(alerts.stats.deduplicated[index(AlertKind::PoolExhausted)].load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_slack_body_carries_text_beside_the_members() {
        let alert = Alert {
            kind: AlertKind::KeySuspended,
            subject: "key `k`".into(),
            at: 5,
            detail: "refused 50 times".into(),
            state: "firing",
        };
        let value: serde_json::Value = serde_json::from_slice(&body(AlertFormat::Slack, &alert)).unwrap();
        assert_eq!(value["kind"], "key_suspended");
        assert!(value["text"].as_str().unwrap().contains("key `k`"));
    }
}
