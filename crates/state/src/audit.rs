//! The admin audit log's one door: every entry is bounded before it is
//! stored (`AuditEntry::bounded`: a few hundred bytes a row, whatever path
//! a caller sends); attempts the admin plane's door refused (no valid
//! token, and just as well a valid one that may not: a read-only token's
//! mutation, a missing anti-CSRF token, a mutation over its token's rate)
//! and console sign-ins are recorded at most [`REFUSED_PER_MINUTE`] a
//! minute from one source (the rest are counted, and the next row written
//! for that source says how many); what passes the door is bounded by its
//! token's mutation rate; entries older than `admin.audit_retention` are
//! purged every hour. So no caller, however many requests it sends, grows
//! the log faster than a bounded rate.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError, Weak};
use std::time::Duration;

use switchyard_store::{AuditEntry, AuditLog, Stores};

/// Refused attempts and sign-ins from one source written to the log per
/// minute, at most.
pub const REFUSED_PER_MINUTE: u32 = 30;

/// Sources tracked at once; past it the stale ones are forgotten.
const SOURCES: usize = 4096;

/// How often the retention purge runs.
const PURGE_EVERY: Duration = Duration::from_secs(3600);

/// The per-source budget of refused attempts the log records.
#[derive(Default)]
pub struct AuditGate {
    sources: Mutex<HashMap<Option<IpAddr>, Window>>,
    /// Refused attempts not written (over their source's budget).
    pub suppressed: AtomicU64,
}

#[derive(Clone, Copy)]
struct Window {
    minute: i64,
    written: u32,
    suppressed: u32,
}

impl AuditGate {
    /// Whether a refused attempt from `source` at `now_ms` is written:
    /// `None` when its source spent this minute's budget, else how many of
    /// its earlier attempts were left out (for the row to say).
    pub fn refused(&self, source: Option<IpAddr>, now_ms: u64) -> Option<u32> {
        let minute = (now_ms / 60_000) as i64;
        let mut sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        if sources.len() >= SOURCES && !sources.contains_key(&source) {
            sources.retain(|_, window| window.minute == minute);
        }
        let window = sources.entry(source).or_insert(Window { minute, written: 0, suppressed: 0 });
        let left_out = if window.minute == minute {
            0
        } else {
            let before = window.suppressed;
            *window = Window { minute, written: 0, suppressed: 0 };
            before
        };
        if window.written >= REFUSED_PER_MINUTE {
            window.suppressed += 1;
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        window.written += 1;
        Some(left_out)
    }
}

/// What became of an audited attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// Refused at the door, before its route: its source's budget of rows
    /// applies.
    Refused,
    /// A console sign-in (no mutation rate bounds those): its source's
    /// budget of rows applies.
    SignIn,
    /// Let through to its route (bounded by its token's mutation rate).
    Admitted,
}

/// Writes `entry` (bounded), unless it is a refused attempt over its
/// source's budget.
pub async fn record(
    stores: &Stores,
    gate: &AuditGate,
    mut entry: AuditEntry,
    source: Option<IpAddr>,
    attempt: Attempt,
) {
    if attempt != Attempt::Admitted {
        let Some(left_out) = gate.refused(source, entry.at_ms.max(0) as u64) else { return };
        if left_out > 0 {
            entry.action = format!("{} (and {left_out} attempts before it not recorded)", entry.action);
        }
    }
    if let Err(err) = stores.audit.record(entry.bounded()).await {
        tracing::warn!(error = %err, "audit entry could not be stored");
    }
}

/// Purges entries older than `retention` from `log`, now and every hour,
/// for as long as the log lives.
pub fn spawn_purge(log: Weak<dyn AuditLog>, retention: Duration) {
    switchyard_tasks::service("audit purge", async move {
        let mut ticker = tokio::time::interval(PURGE_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let Some(log) = log.upgrade() else { return };
            let before = crate::clock::now_ms().saturating_sub(retention.as_millis() as u64) as i64;
            match log.purge(before).await {
                Ok(0) => {}
                Ok(removed) => tracing::info!(removed, "audit entries past their retention purged"),
                Err(err) => tracing::warn!(error = %err, "audit retention purge failed; retried in an hour"),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_writes_a_bounded_number_of_refused_attempts_a_minute() {
        let gate = AuditGate::default();
        let loud = Some(IpAddr::from([10, 0, 0, 1]));
        let quiet = Some(IpAddr::from([10, 0, 0, 2]));
        let minute = 1_796_067_060_000;
        for _ in 0..REFUSED_PER_MINUTE {
            assert_eq!(gate.refused(loud, minute), Some(0));
        }
        assert_eq!(gate.refused(loud, minute + 1), None);
        assert_eq!(gate.refused(loud, minute + 2), None);
        assert_eq!(gate.refused(quiet, minute + 3), Some(0), "another source has its own budget");
        assert_eq!(
            gate.refused(loud, minute + 60_000),
            Some(2),
            "the next minute's first row counts what was left out"
        );
        assert_eq!(gate.suppressed.load(Ordering::Relaxed), 2);
    }
}
