//! The alerts watcher: every [`WATCH_EVERY`] it reads what the gateway
//! already keeps (breakers, pool readiness, budget spend, the ledger
//! queue, Redis, the console's history of answers) and raises or resolves
//! alerts on their transitions. Off the request path: a gateway without
//! `alerts:` runs no watcher, and the request path pays nothing either way
//! (a key suspension, the one alert raised from a request, is raised where
//! the suspension is decided).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use switchyard_state::governance::now_ms;
use switchyard_state::Gateway;
use switchyard_telemetry::alert::{AlertKind, Alerts};

/// How often the watcher looks.
pub const WATCH_EVERY: Duration = Duration::from_secs(1);

/// Starts `gateway`'s watcher when alerts are configured: it ends with the
/// gateway, and a reload starts the next one.
pub fn spawn(gateway: &Arc<Gateway>) {
    if gateway.telemetry.alerts.is_none() {
        return;
    }
    let weak = Arc::downgrade(gateway);
    switchyard_tasks::service("alerts watcher", async move {
        let mut seen = Seen::default();
        let mut ticker = tokio::time::interval(WATCH_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let Some(gateway) = weak.upgrade() else { return };
            let Some(alerts) = gateway.telemetry.alerts.as_ref() else { return };
            watch(&gateway, alerts, &mut seen, now_ms());
        }
    });
}

/// What the watcher read last time, to tell growth from a standing count.
#[derive(Debug, Default)]
struct Seen {
    ledger_full: u64,
    ledger_errors: u64,
}

/// One look at everything the watcher alerts on.
fn watch(gateway: &Gateway, alerts: &Alerts, seen: &mut Seen, now: u64) {
    breakers(gateway, alerts, now);
    pools(gateway, alerts, now);
    if let Some(governance) = &gateway.governance {
        budgets(governance, alerts, now);
        budget_signals(governance, alerts, now);
        if let Some(ledger) = &governance.ledger {
            let full = ledger.stats.queue_full.load(Ordering::Relaxed);
            let errors = ledger.stats.write_errors.load(Ordering::Relaxed);
            let (depth, capacity) = (ledger.depth(), ledger.capacity().max(1));
            let degraded = depth * 5 >= capacity * 4 || full > seen.ledger_full || errors > seen.ledger_errors;
            let detail = format!(
                "{depth} of {capacity} ledger rows waiting; {} waits on a full queue and {} write errors since the last look",
                full - seen.ledger_full.min(full),
                errors - seen.ledger_errors.min(errors)
            );
            condition(alerts, AlertKind::LedgerDegraded, "ledger", degraded, detail, now);
            (seen.ledger_full, seen.ledger_errors) = (full, errors);
        }
        if let Some(fleet) = &governance.fleet {
            let away = !fleet.up.load(Ordering::Relaxed);
            let detail = match fleet.on_error {
                switchyard_config::OnRedisError::FailOpen => {
                    "Redis cannot be reached: each instance admits on its own counters (fail_open)"
                }
                switchyard_config::OnRedisError::FailClosed => {
                    "Redis cannot be reached: budgeted requests are refused (fail_closed)"
                }
            };
            condition(alerts, AlertKind::RedisDegraded, "redis", away, detail.to_owned(), now);
        }
    }
    error_rate(gateway, alerts, now);
}

/// Raises `kind` about `subject` when `firing` and it is not open yet;
/// resolves it when it no longer fires.
fn condition(alerts: &Alerts, kind: AlertKind, subject: &str, firing: bool, detail: String, now: u64) {
    match (firing, alerts.is_open(kind, subject)) {
        (true, false) => alerts.raise(kind, subject, detail, now),
        (false, true) => alerts.resolve(kind, subject, "back to normal".to_owned(), now),
        _ => {}
    }
}

fn breakers(gateway: &Gateway, alerts: &Alerts, now: u64) {
    let at = std::time::Instant::now();
    for (_, pool) in gateway.named_pools() {
        for (member, &lane) in pool.members.iter().enumerate() {
            // Half-open (a trial in flight, or due) is still open: the lane
            // serves again only once its breaker closes.
            let (open, reason) = {
                let snapshot = pool.breaker(member).snapshot(at);
                (snapshot.state != switchyard_health::breaker::BreakerState::Closed, snapshot.reason)
            };
            let subject = format!("pool `{}` lane `{}`", pool.name, gateway.lanes[lane].name);
            match (open, alerts.is_open(AlertKind::BreakerOpened, &subject)) {
                (true, false) => {
                    let why = reason.unwrap_or_else(|| "failures".to_owned());
                    alerts.raise(AlertKind::BreakerOpened, &subject, format!("breaker opened: {why}"), now);
                }
                // Told it closed only when told it opened (one end an episode).
                (false, true) => {
                    if !alerts.clear(AlertKind::BreakerOpened, &subject) {
                        continue;
                    }
                    alerts.notify(
                        AlertKind::BreakerClosed,
                        &subject,
                        "breaker closed: the lane serves again".into(),
                        now,
                    );
                }
                _ => {}
            }
        }
    }
}

fn pools(gateway: &Gateway, alerts: &Alerts, now: u64) {
    let readiness = switchyard_state::lifecycle::readiness(gateway, std::time::Instant::now());
    for (name, reason) in &readiness.pools {
        let subject = format!("pool `{name}`");
        condition(alerts, AlertKind::PoolExhausted, &subject, readiness.down.contains(name), reason.clone(), now);
    }
}

fn budgets(governance: &switchyard_state::governance::Governance, alerts: &Alerts, now: u64) {
    let thresholds = &alerts.config.budget_at;
    let mut crossed: HashMap<String, String> = HashMap::new();
    for switchyard_state::governance::BudgetUsage { who, spent, cap, window_start } in governance.budget_usage(now) {
        let percent = if cap == 0 { 100 } else { (u128::from(spent) * 100 / u128::from(cap)).min(1_000) as u64 };
        // The highest threshold crossed, once per window.
        if let Some(&at) = thresholds.iter().rev().find(|&&t| percent >= u64::from(t)) {
            // The window's start as a time people read (a Unix time is none).
            let began = crate::shared::utc_time(window_start.max(0) as u64 * 1000);
            let detail = format!(
                "{who} spent {percent}% of its budget (${:.4} of ${:.4}) in the window that began {began}",
                switchyard_governance::money::usd(spent),
                switchyard_governance::money::usd(cap)
            );
            crossed.insert(format!("{who} {at}% (window from {began})"), detail);
        }
    }
    for (subject, detail) in &crossed {
        if !alerts.is_open(AlertKind::BudgetThreshold, subject) {
            alerts.raise(AlertKind::BudgetThreshold, subject, detail.clone(), now);
        }
    }
    // A threshold no longer crossed (a new window, a raised cap) ends.
    for open in alerts.open() {
        if open.kind == AlertKind::BudgetThreshold && !crossed.contains_key(&open.subject) {
            alerts.resolve(AlertKind::BudgetThreshold, &open.subject, "below the threshold again".into(), now);
        }
    }
}

/// Tells the warnings and forecasts the budgets' watch made (each once a
/// window: the watch makes each once).
fn budget_signals(governance: &switchyard_state::governance::Governance, alerts: &Alerts, now: u64) {
    use switchyard_governance::forecast::{in_words, Signal};
    use switchyard_governance::money::usd;
    for signal in governance.take_budget_signals() {
        let (who, start) = (&signal.who, crate::shared::utc_time(signal.window_start.max(0) as u64 * 1000));
        let (spent, cap) = (usd(signal.spent), usd(signal.cap));
        match signal.signal {
            Signal::Warning(share) => {
                let subject = format!("{who} {share}% (window from {start})");
                let detail = format!("{who} spent ${spent:.4} of its ${cap:.4} budget: past its {share}% warning");
                alerts.notify(AlertKind::BudgetWarning, &subject, detail, now);
            }
            Signal::Forecast(at) => {
                let subject = format!("{who} (window from {start})");
                let detail = format!(
                    "{who} runs out in {} at its pace over the last hour (${spent:.4} of ${cap:.4} spent; at {})",
                    in_words(at.saturating_sub(now)),
                    crate::shared::utc_time(at)
                );
                alerts.notify(AlertKind::BudgetForecast, &subject, detail, now);
            }
        }
    }
}

fn error_rate(gateway: &Gateway, alerts: &Alerts, now: u64) {
    if gateway.metrics().is_none() {
        return;
    }
    // The minute so far and the one before it.
    let span = gateway.telemetry.history.span((now / 60_000) as i64, 2, 2);
    let point = &span.total;
    let config = &alerts.config;
    let firing = point.requests >= config.error_rate_min_requests && point.error_rate >= config.error_rate;
    let detail = format!(
        "{:.0}% of {} requests in the last two minutes were answered 5xx (threshold {:.0}%)",
        point.error_rate * 100.0,
        point.requests,
        config.error_rate * 100.0
    );
    condition(alerts, AlertKind::ErrorRate, "gateway", firing, detail, now);
}
