//! Alerts: what needs a person, sent to the operator's webhook. An alert
//! has a kind and a subject (`breaker_opened`, `pool "chat" / lane "a"`);
//! the same pair is sent at most once per dedup window while it stays
//! open, and once more when it resolves. Delivery is off the request path:
//! a bounded queue (full: dropped and counted) and one task that posts
//! each alert, retried with backoff, through the SSRF-guarded hook client.
//! The open alerts are kept for the console, with or without a webhook.
//! A receiver hears one `resolved` per firing it was sent (an alert that
//! fires again inside the dedup window, unsent, is resolved unsent too),
//! and nothing of an alert an operator silenced until the silence ends.

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

    /// The kind named `name` (its wire name).
    pub fn from_name(name: &str) -> Option<AlertKind> {
        AlertKind::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

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
    /// Not sent: an operator silenced them.
    pub silenced: [AtomicU64; AlertKind::ALL.len()],
}

fn index(kind: AlertKind) -> usize {
    AlertKind::ALL.iter().position(|k| *k == kind).unwrap_or(0)
}

/// The most open alerts kept (each a distinct kind and subject).
const MAX_OPEN: usize = 1_000;

/// An operator's silence of one alert (kind and subject).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Silence {
    /// Until when nothing of it is sent (Unix ms).
    pub until: u64,
    /// Who silenced it (the admin token's or account's name).
    pub by: String,
}

/// Dedup state and the open alerts.
#[derive(Debug, Default)]
struct Book {
    /// When each (kind, subject) was last sent firing (Unix ms).
    sent_at: HashMap<(AlertKind, String), u64>,
    /// The alerts firing now.
    open: HashMap<(AlertKind, String), Alert>,
    /// The open alerts whose firing the receiver was sent: each is owed
    /// one `resolved`, and only these.
    owed: std::collections::HashSet<(AlertKind, String)>,
    /// Silences, by alert (at most [`MAX_OPEN`]; ended ones go first).
    silences: HashMap<(AlertKind, String), Silence>,
}

/// The alerts of a process (shared by every gateway a reload builds).
pub struct Alerts {
    /// Where alerts go; none without a webhook (they are only kept open).
    queue: Option<mpsc::Sender<Alert>>,
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
            queue: Some(queue),
            dedup_ms: config.dedup.as_millis() as u64,
            book: Mutex::new(Book::default()),
            stats,
            config: config.clone(),
        }
    }

    /// Alerts kept for the console without a receiver (no `alerts:` in
    /// the config): raised, resolved and silenced alike, sent nowhere.
    pub fn unsent() -> Alerts {
        let config = AlertConfig {
            webhook: String::new(),
            format: AlertFormat::Json,
            dedup: Duration::from_secs(300),
            queue: 1,
            budget_at: vec![80, 100],
            error_rate: 0.5,
            error_rate_min_requests: 20,
        };
        Alerts {
            queue: None,
            dedup_ms: config.dedup.as_millis() as u64,
            book: Mutex::new(Book::default()),
            stats: Arc::new(AlertStats::default()),
            config,
        }
    }

    /// Whether a webhook receives the alerts.
    pub fn delivers(&self) -> bool {
        self.queue.is_some()
    }

    /// Silences `kind` about `subject` until `until` (Unix ms), by `by`:
    /// nothing of it is sent meanwhile (it stays listed as open). Returns
    /// the silence it replaced.
    pub fn silence(&self, kind: AlertKind, subject: &str, until: u64, by: &str, now_ms: u64) -> Option<Silence> {
        let mut book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
        book.silences.retain(|_, s| s.until > now_ms);
        let key = (kind, subject.to_owned());
        if book.silences.len() >= MAX_OPEN && !book.silences.contains_key(&key) {
            if let Some(first) = book.silences.iter().min_by_key(|(_, s)| s.until).map(|(k, _)| k.clone()) {
                book.silences.remove(&first);
            }
        }
        book.silences.insert(key, Silence { until, by: by.to_owned() })
    }

    /// Ends the silence of `kind` about `subject` (returned, if there was one).
    pub fn unsilence(&self, kind: AlertKind, subject: &str) -> Option<Silence> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner).silences.remove(&(kind, subject.to_owned()))
    }

    /// The silence of `kind` about `subject` running at `now_ms`.
    pub fn silenced(&self, kind: AlertKind, subject: &str, now_ms: u64) -> Option<Silence> {
        let book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
        book.silences.get(&(kind, subject.to_owned())).filter(|s| s.until > now_ms).cloned()
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
            if book.silences.get(&key).is_some_and(|s| s.until > now_ms) {
                drop(book);
                self.stats.silenced[index(kind)].fetch_add(1, Ordering::Relaxed);
                return;
            }
            let fresh = book.sent_at.get(&key).is_none_or(|&at| now_ms.saturating_sub(at) >= self.dedup_ms);
            if fresh {
                if book.sent_at.len() >= MAX_OPEN * 4 {
                    let horizon = now_ms.saturating_sub(self.dedup_ms);
                    book.sent_at.retain(|_, at| *at >= horizon);
                }
                book.sent_at.insert(key.clone(), now_ms);
                if book.owed.len() >= MAX_OPEN * 4 {
                    let open: std::collections::HashSet<_> = book.open.keys().cloned().collect();
                    book.owed.retain(|k| open.contains(k));
                }
                book.owed.insert(key);
            }
            fresh
        };
        if send {
            self.offer(alert);
        } else {
            self.stats.deduplicated[index(kind)].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Ends an open `kind` about `subject`: the receiver is told once, if
    /// it was told it fired (an alert raised again inside the dedup window
    /// after a resolution, unsent, ends unsent: one `resolved` an episode).
    /// Nothing happens when it was not open.
    pub fn resolve(&self, kind: AlertKind, subject: &str, detail: String, now_ms: u64) {
        let owed = {
            let mut book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
            let key = (kind, subject.to_owned());
            let open = book.open.remove(&key).is_some();
            let owed = book.owed.remove(&key);
            open && owed && book.silences.get(&key).is_none_or(|s| s.until <= now_ms)
        };
        if owed {
            self.offer(Alert { kind, subject: subject.to_owned(), at: now_ms, detail, state: "resolved" });
        }
    }

    /// Sends a one-off `kind` about `subject` (deduplicated like any
    /// other, never kept open): an event rather than a condition.
    pub fn notify(&self, kind: AlertKind, subject: &str, detail: String, now_ms: u64) {
        self.raise(kind, subject, detail, now_ms);
        let _ = self.clear(kind, subject);
    }

    /// Forgets an open `kind` about `subject` without telling the receiver
    /// (another alert says it ended); true when the receiver was told it
    /// fired (and so is owed word of its end).
    pub fn clear(&self, kind: AlertKind, subject: &str) -> bool {
        let mut book = self.book.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (kind, subject.to_owned());
        book.open.remove(&key);
        book.owed.remove(&key)
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
        let Some(queue) = &self.queue else { return };
        if queue.try_send(alert).is_err() {
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

    fn deduplicated(alerts: &Alerts, kind: AlertKind) -> u64 {
        alerts.stats.deduplicated[index(kind)].load(Ordering::Relaxed)
    }

    #[tokio::test]
    async fn an_alert_flapping_inside_the_window_is_resolved_once() {
        // No receiver: what would be sent is what reaches `offer` with a queue.
        let (queue, mut rx) = mpsc::channel(64);
        let mut alerts = Alerts::unsent();
        alerts.queue = Some(queue);
        let subject = "pool `a`";
        alerts.raise(AlertKind::PoolExhausted, subject, "down".into(), 1_000);
        for at in [2_000, 4_000, 6_000] {
            alerts.resolve(AlertKind::PoolExhausted, subject, "back".into(), at);
            alerts.raise(AlertKind::PoolExhausted, subject, "down".into(), at + 1_000);
        }
        alerts.resolve(AlertKind::PoolExhausted, subject, "back".into(), 9_000);
        let mut states = Vec::new();
        while let Ok(alert) = rx.try_recv() {
            states.push(alert.state);
        }
        assert_eq!(states, ["firing", "resolved"], "one firing and one resolved an episode");
        assert_eq!(
            deduplicated(&alerts, AlertKind::PoolExhausted),
            3,
            "the raises inside the window were deduplicated"
        );
        // Past the window it fires, and resolves, again.
        alerts.raise(AlertKind::PoolExhausted, subject, "down".into(), 400_000);
        alerts.resolve(AlertKind::PoolExhausted, subject, "back".into(), 401_000);
        let again: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).map(|a| a.state).collect();
        assert_eq!(again, ["firing", "resolved"]);
    }

    #[tokio::test]
    async fn a_silenced_alert_is_listed_and_not_sent_until_its_silence_ends() {
        let (queue, mut rx) = mpsc::channel(64);
        let mut alerts = Alerts::unsent();
        alerts.queue = Some(queue);
        let subject = "pool `a` lane `b`";
        assert!(alerts.silence(AlertKind::BreakerOpened, subject, 60_000, "ops", 1_000).is_none());
        alerts.raise(AlertKind::BreakerOpened, subject, "opened".into(), 2_000);
        assert!(alerts.is_open(AlertKind::BreakerOpened, subject), "listed while silenced");
        assert_eq!(alerts.silenced(AlertKind::BreakerOpened, subject, 2_000).map(|s| s.by), Some("ops".to_owned()));
        alerts.resolve(AlertKind::BreakerOpened, subject, "closed".into(), 3_000);
        assert!(rx.try_recv().is_err(), "nothing of a silenced alert is sent");
        assert_eq!(alerts.stats.silenced[index(AlertKind::BreakerOpened)].load(Ordering::Relaxed), 1);
        // Once the silence ends it is sent again.
        alerts.raise(AlertKind::BreakerOpened, subject, "opened".into(), 61_000);
        assert_eq!(rx.try_recv().map(|a| a.state).ok(), Some("firing"));
        assert!(alerts.silenced(AlertKind::BreakerOpened, subject, 61_000).is_none());
        // Lifted early: sent at once.
        alerts.silence(AlertKind::ErrorRate, "gateway", 500_000, "ops", 62_000);
        assert!(alerts.unsilence(AlertKind::ErrorRate, "gateway").is_some());
        alerts.raise(AlertKind::ErrorRate, "gateway", "5xx".into(), 63_000);
        assert_eq!(rx.try_recv().map(|a| a.kind).ok(), Some(AlertKind::ErrorRate));
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
