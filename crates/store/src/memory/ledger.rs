//! The ledger ([`Ledger`]): the newest rows in a ring, spend summed from
//! them.

use std::collections::BTreeMap;

use super::{ready, MemoryStore, MEMORY_LEDGER_ROWS};
use crate::{Ledger, LedgerRow, RowFilter, SpendBy, StoreFuture, StoredRow, Tokens, Total, TotalsQuery};

/// The value of `row` in dimension `by`.
pub(crate) fn dimension(row: &LedgerRow, by: SpendBy) -> Option<String> {
    match by {
        SpendBy::Key => row.key_id.clone(),
        SpendBy::Group => row.group.clone(),
        SpendBy::Model => Some(row.model.clone()),
        SpendBy::Lane => Some(row.lane.clone()),
        SpendBy::Operation => Some(row.operation.clone()),
        SpendBy::User => row.end_user.clone(),
    }
}

fn add(tokens: &mut Tokens, more: &Tokens) {
    tokens.add(more);
}

impl Ledger for MemoryStore {
    fn append(&self, rows: std::sync::Arc<[LedgerRow]>) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            for row in rows.iter().cloned() {
                if row.entry != 0 && !inner.entries.insert(row.entry) {
                    continue;
                }
                inner.next_row += 1;
                let id = inner.next_row;
                if inner.ledger.len() == MEMORY_LEDGER_ROWS {
                    if let Some(old) = inner.ledger.pop_front() {
                        inner.entries.remove(&old.row.entry);
                    }
                }
                inner.ledger.push_back(StoredRow { id, row });
            }
            Ok(())
        }))
    }

    fn rows(&self, filter: RowFilter) -> StoreFuture<'_, Vec<StoredRow>> {
        ready(self.with(|inner| {
            Ok(inner
                .ledger
                .iter()
                .rev()
                .filter(|r| filter.before.is_none_or(|before| r.id < before))
                .filter(|r| filter.key.as_ref().is_none_or(|k| r.row.key_id.as_ref() == Some(k)))
                .filter(|r| filter.pool.as_ref().is_none_or(|p| &r.row.pool == p))
                .filter(|r| filter.lane.as_ref().is_none_or(|l| &r.row.lane == l))
                .filter(|r| filter.status.is_none_or(|(from, to)| (from..to).contains(&r.row.status)))
                .filter(|r| filter.end_user.as_ref().is_none_or(|u| r.row.end_user.as_ref() == Some(u)))
                .filter(|r| filter.request_id.as_ref().is_none_or(|id| &r.row.request_id == id))
                .filter(|r| filter.operation.as_ref().is_none_or(|op| &r.row.operation == op))
                .filter(|r| filter.at_ms.is_none_or(|(from, to)| (from..to).contains(&r.row.at_ms)))
                .filter(|r| {
                    filter.groups.as_ref().is_none_or(|gs| r.row.group.as_ref().is_some_and(|g| gs.contains(g)))
                })
                .take(filter.limit)
                .cloned()
                .collect())
        }))
    }

    fn totals(&self, query: TotalsQuery) -> StoreFuture<'_, Vec<Total>> {
        ready(self.with(|inner| {
            let mut sums: BTreeMap<(Option<String>, String), Total> = BTreeMap::new();
            for stored in &inner.ledger {
                let row = &stored.row;
                if row.at_ms < query.from_ms || row.at_ms >= query.to_ms {
                    continue;
                }
                if query.key.as_ref().is_some_and(|k| row.key_id.as_ref() != Some(k)) {
                    continue;
                }
                if query.groups.as_ref().is_some_and(|gs| !row.group.as_ref().is_some_and(|g| gs.contains(g))) {
                    continue;
                }
                if query.end_user.as_ref().is_some_and(|u| row.end_user.as_ref() != Some(u)) {
                    continue;
                }
                let value = dimension(row, query.by);
                let total = sums.entry((value.clone(), row.lane.clone())).or_insert_with(|| Total {
                    value,
                    lane: row.lane.clone(),
                    requests: 0,
                    tokens: Tokens::default(),
                    saved_nano: 0,
                    outcomes: crate::Outcomes::default(),
                    settled: crate::Settled::default(),
                });
                // A refusal is counted as many as it stands for, never as a request.
                let refused = row.refusals();
                total.requests += u64::from(row.operation != crate::REFUSED);
                add(&mut total.tokens, &row.tokens);
                total.saved_nano = total.saved_nano.saturating_add(row.notes.cache_saved_nano.unwrap_or(0));
                let seen = crate::Outcomes { cache_hits: row.notes.cache_hit(), guarded: row.notes.guarded(), refused };
                total.outcomes.add(&seen);
                let settled = crate::Settled {
                    cost_nano: row.charge.map_or(0, |c| c.cost_nano),
                    price_nano: row.charge.map_or(0, |c| c.price_nano),
                    unsettled: u64::from(row.charge.is_none()),
                };
                total.settled.add(&settled);
            }
            Ok(sums.into_values().collect())
        }))
    }

    fn count(&self) -> StoreFuture<'_, u64> {
        ready(self.with(|inner| Ok(inner.ledger.len() as u64)))
    }
}
