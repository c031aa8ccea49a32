//! Refusals at the door in the ledger: each is a row of operation
//! `refused` up to [`REFUSALS_LOGGED`] a minute (a flood of refusals cannot
//! fill the store), and past that the refusals of a minute that are alike
//! (same key, group, pool, lane, status, reason, operation, protocol) are
//! counted on one row, written with the next batch: every refusal is
//! counted, however many rows are written.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use switchyard_governance::rate::{Gcra, RateCheck};
use switchyard_store::LedgerRow;
use tokio::sync::Notify;

/// Refusals written as rows of their own a minute, at most.
pub const REFUSALS_LOGGED: u64 = 1_200;

/// Rows counting a minute's refusals kept at once; past it, refusals of
/// other keys and pools are counted on one row for their minute, status
/// and reason (counted still, named less).
const MAX_COUNTING: usize = 10_000;

/// What makes refusals alike: their minute and everything their row names.
type Alike = (i64, Option<String>, Option<String>, String, String, String, u16, String, String, Option<String>);

/// The rows-a-minute limit and the rows counting refusals past it.
pub(crate) struct RefusalRows {
    limit: Mutex<Gcra>,
    counting: Mutex<HashMap<Alike, LedgerRow>>,
    /// A refusal was counted: the writer makes sure a batch is due.
    pub(crate) counted: Notify,
    /// Refusals past the limit, counted on shared rows.
    pub(crate) past_limit: AtomicU64,
}

impl RefusalRows {
    pub(crate) fn new() -> RefusalRows {
        RefusalRows {
            limit: Mutex::new(Gcra::new(REFUSALS_LOGGED)),
            counting: Mutex::new(HashMap::new()),
            counted: Notify::new(),
            past_limit: AtomicU64::new(0),
        }
    }

    /// A refusal's row to queue, or `None` when it is past the limit and
    /// counted on its minute's row instead.
    pub(crate) fn admit(&self, row: LedgerRow, now_ms: u64) -> Option<LedgerRow> {
        {
            let mut limit = self.limit.lock().unwrap_or_else(PoisonError::into_inner);
            if limit.check(1, now_ms) == RateCheck::Room {
                limit.commit(1, now_ms);
                return Some(row);
            }
        }
        self.past_limit.fetch_add(1, Ordering::Relaxed);
        let refusals = row.refusals().max(1);
        let refusal = row.notes.refused.clone();
        let (kind, operation) = refusal.map_or((String::new(), String::new()), |r| (r.kind, r.operation));
        let mut alike: Alike = (
            row.at_ms.div_euclid(60_000),
            row.key_id.clone(),
            row.group.clone(),
            row.pool.clone(),
            row.lane.clone(),
            row.model.clone(),
            row.status,
            kind,
            operation,
            row.ingress.clone(),
        );
        let mut counting = self.counting.lock().unwrap_or_else(PoisonError::into_inner);
        if counting.len() >= MAX_COUNTING && !counting.contains_key(&alike) {
            alike.1 = None;
            alike.2 = None;
            alike.3 = "-".into();
            alike.4 = String::new();
            alike.5 = String::new();
            alike.9 = None;
        }
        let line = counting.entry(alike).or_insert_with_key(|alike| counting_row(alike, &row));
        line.at_ms = line.at_ms.max(row.at_ms);
        if let Some(refused) = line.notes.refused.as_mut() {
            refused.count = refused.count.saturating_add(refusals);
        }
        drop(counting);
        self.counted.notify_one();
        None
    }

    /// The rows counting refusals so far, to be written now (a later
    /// refusal of the same minute starts a row of its own).
    pub(crate) fn take(&self, into: &mut Vec<LedgerRow>) {
        let mut counting = self.counting.lock().unwrap_or_else(PoisonError::into_inner);
        into.extend(counting.drain().map(|(_, row)| row));
    }
}

/// A row counting refusals alike `alike`, at nought so far.
fn counting_row(alike: &Alike, first: &LedgerRow) -> LedgerRow {
    let (minute, key_id, group, pool, lane, model, status, kind, operation, ingress) = alike.clone();
    LedgerRow {
        // Drawn at random: a counting row is written once, and its entry
        // only has to differ from every other row's.
        entry: fastrand::i64(1..i64::MAX),
        at_ms: first.at_ms,
        request_id: format!("refusals-{minute}"),
        key_id,
        group,
        pool,
        lane,
        model,
        operation: switchyard_store::REFUSED.to_owned(),
        tokens: Default::default(),
        status,
        latency_ms: 0,
        ttfb_ms: None,
        failovers: 0,
        estimated: false,
        attempts: Vec::new(),
        notes: switchyard_store::Notes {
            refused: Some(switchyard_store::Refusal { kind, operation, count: 0 }),
            ..Default::default()
        },
        end_user: None,
        ingress,
        stream: false,
        // Settled at nought: a refusal is never spend.
        charge: Some(switchyard_store::Charge::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(at_ms: u64, key: &str) -> LedgerRow {
        LedgerRow {
            entry: fastrand::i64(1..i64::MAX),
            at_ms: at_ms as i64,
            request_id: "r".into(),
            key_id: Some(key.into()),
            group: None,
            pool: "p".into(),
            lane: String::new(),
            model: String::new(),
            operation: switchyard_store::REFUSED.into(),
            tokens: Default::default(),
            status: 429,
            latency_ms: 1,
            ttfb_ms: None,
            failovers: 0,
            estimated: false,
            attempts: Vec::new(),
            notes: switchyard_store::Notes {
                refused: Some(switchyard_store::Refusal {
                    kind: "rate_limit".into(),
                    operation: "chat".into(),
                    count: 1,
                }),
                ..Default::default()
            },
            end_user: Some("u".into()),
            ingress: Some("openai".into()),
            stream: false,
            charge: None,
        }
    }

    #[test]
    fn past_the_limit_refusals_are_counted_on_a_row_a_minute_and_none_is_lost() {
        let rows = RefusalRows::new();
        let now = 1_796_067_060_000;
        let mut written = Vec::new();
        for n in 0..5_000 {
            let key = if n % 2 == 0 { "a" } else { "b" };
            written.extend(rows.admit(refusal(now + n % 1000, key), now));
        }
        assert_eq!(written.len(), REFUSALS_LOGGED as usize, "the limit's rows, each its own");
        rows.take(&mut written);
        assert_eq!(written.len(), REFUSALS_LOGGED as usize + 2, "one counting row per key for the minute");
        let counted: u64 = written.iter().map(LedgerRow::refusals).sum();
        assert_eq!(counted, 5_000, "every refusal counted");
        assert_eq!(rows.past_limit.load(Ordering::Relaxed), 3_800);
        let counting = &written[REFUSALS_LOGGED as usize..];
        assert!(counting.iter().all(|row| row.end_user.is_none() && row.status == 429));
        let mut none = Vec::new();
        rows.take(&mut none);
        assert!(none.is_empty(), "taken once");
    }
}
