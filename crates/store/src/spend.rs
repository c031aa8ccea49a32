//! Spend questions ([`TotalsQuery`] → [`Total`]): how one is split between
//! the hourly rollup and the ledger's rows, the rollup's sums of a batch of
//! rows, and the SQL columns both are summed from.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::{Charge, LedgerRow, Settled, Tokens, REFUSED};

/// One hour in milliseconds: the grain of the spend rollup.
pub const HOUR_MS: i64 = 3_600_000;

/// How a spend question over `[from_ms, to_ms)` is answered: the whole
/// hours inside it from the hourly rollup (`hours`, as hour numbers,
/// end exclusive), and the ragged edges from the ledger's rows (`rows`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpendPlan {
    pub hours: Option<(i64, i64)>,
    pub rows: Vec<(i64, i64)>,
}

pub(crate) fn spend_plan(from_ms: i64, to_ms: i64) -> SpendPlan {
    let first = from_ms.div_euclid(HOUR_MS) + i64::from(from_ms.rem_euclid(HOUR_MS) != 0);
    let end = to_ms.div_euclid(HOUR_MS);
    if from_ms >= to_ms || first >= end {
        return SpendPlan { hours: None, rows: vec![(from_ms, to_ms)] };
    }
    let rows = [(from_ms, first * HOUR_MS), (end * HOUR_MS, to_ms)].into_iter().filter(|(a, b)| a < b).collect();
    SpendPlan { hours: Some((first, end)), rows }
}

/// The rollup's key of a ledger row: hour, key, group ('' for none), lane,
/// model, operation (borrowed from the rows: a batch is summed without
/// copying).
pub(crate) type HourKey<'a> = (i64, &'a str, &'a str, &'a str, &'a str, &'a str);

/// The sums a spend line holds: requests, the four token kinds, units,
/// billed requests, what cache hits saved, then [`Outcomes`]' three, then
/// the six kinds billed apart (hour-long cache writes, reasoning, audio and
/// image in and out), then [`Settled`]'s three.
pub(crate) const SUMS: usize = 20;

/// Sums `rows` by rollup key (requests, the four token kinds, units,
/// billed requests).
pub(crate) fn by_hour<'a>(rows: impl IntoIterator<Item = &'a LedgerRow>) -> HashMap<HourKey<'a>, [i64; SUMS]> {
    let mut sums: HashMap<HourKey<'a>, [i64; SUMS]> = HashMap::new();
    for row in rows {
        let key = (
            row.at_ms.div_euclid(HOUR_MS),
            row.key_id.as_deref().unwrap_or_default(),
            row.group.as_deref().unwrap_or_default(),
            row.lane.as_str(),
            row.model.as_str(),
            row.operation.as_str(),
        );
        let sum = sums.entry(key).or_default();
        let t = &row.tokens;
        let saved = row.notes.cache_saved_nano.unwrap_or(0);
        // A refusal is counted as many as it stands for, never as a
        // request (it billed nothing).
        let refused = row.refusals();
        let served = u64::from(row.operation != REFUSED);
        let (hit, guarded) = (row.notes.cache_hit(), row.notes.guarded());
        let row_sums = [
            served,
            t.input,
            t.output,
            t.cache_read,
            t.cache_write,
            t.units,
            t.requests,
            saved,
            hit,
            guarded,
            refused,
            t.cache_write_1h,
            t.reasoning,
            t.audio_input,
            t.audio_output,
            t.image_input,
            t.image_output,
            row.charge.map_or(0, |c| c.cost_nano),
            row.charge.map_or(0, |c| c.price_nano),
            u64::from(row.charge.is_none()),
        ];
        for (slot, n) in sum.iter_mut().zip(row_sums) {
            *slot = slot.saturating_add(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
    sums
}

/// The spend columns a totals query over the hourly rollup selects after
/// value, lane and requests.
pub(crate) const ROLLUP_SUMS: &str = "sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), \
     sum(cache_write_tokens), sum(units), sum(billed_requests), sum(saved_nano), sum(cache_hits), sum(guarded), \
     sum(refused), sum(cache_write_1h_tokens), sum(reasoning_tokens), sum(audio_input_tokens), \
     sum(audio_output_tokens), sum(image_input_tokens), sum(image_output_tokens), sum(cost_nano), sum(price_nano), \
     sum(unsettled)";

/// The same over ledger rows (a refusal is a row of its own operation,
/// which may stand for many).
pub(crate) const ROW_SUMS: &str = "sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), \
     sum(cache_write_tokens), sum(units), sum(billed_requests), sum(saved_nano), sum(cache_hit), sum(guarded), \
     sum(refused), sum(cache_write_1h_tokens), sum(reasoning_tokens), sum(audio_input_tokens), \
     sum(audio_output_tokens), sum(image_input_tokens), sum(image_output_tokens), sum(cost_nano), sum(price_nano), \
     count(*) - count(cost_nano)";

impl Total {
    /// A spend line from a query's columns: value, lane, then requests, the
    /// four token sums, units, billed requests and saved nano-USD (as the
    /// SQL stores return them).
    pub(crate) fn of_columns(
        value: Option<String>,
        lane: String,
        [requests, input, output, cache_read, cache_write, units, billed, saved_nano, cache_hits, guarded, refused, cache_write_1h, reasoning, audio_input, audio_output, image_input, image_output, cost_nano, price_nano, unsettled]: [u64;
            SUMS],
    ) -> Total {
        let tokens = Tokens {
            input,
            output,
            cache_read,
            cache_write,
            cache_write_1h,
            reasoning,
            audio_input,
            audio_output,
            image_input,
            image_output,
            units,
            requests: billed,
        };
        Total {
            value,
            lane,
            requests,
            tokens,
            saved_nano,
            outcomes: Outcomes { cache_hits, guarded, refused },
            settled: Settled { cost_nano, price_nano, unsettled },
        }
    }

    /// What the line cost and was charged: its settled sums, or, when some
    /// of its rows were written before the ledger kept charges, its tokens
    /// at `today`'s flat prices (cost and charge alike; `None`: unpriced).
    pub fn charge(&self, today: Option<&switchyard_governance::Price>) -> Charge {
        if self.settled.unsettled == 0 {
            return Charge { cost_nano: self.settled.cost_nano, price_nano: self.settled.price_nano };
        }
        let cost = today.map_or(0, |price| price.cost(&self.tokens));
        Charge { cost_nano: cost, price_nano: cost }
    }
}

/// Adds up totals that answer parts of one question (the same value and
/// lane in two parts become one line), ordered by value, then lane.
pub(crate) fn merge_totals(parts: impl IntoIterator<Item = Total>) -> Vec<Total> {
    let mut merged: HashMap<(Option<String>, String), Total> = HashMap::new();
    for total in parts {
        match merged.entry((total.value.clone(), total.lane.clone())) {
            std::collections::hash_map::Entry::Occupied(mut entry) => {
                let line = entry.get_mut();
                line.requests += total.requests;
                line.tokens.add(&total.tokens);
                line.saved_nano = line.saved_nano.saturating_add(total.saved_nano);
                line.outcomes.add(&total.outcomes);
                line.settled.add(&total.settled);
            }
            std::collections::hash_map::Entry::Vacant(entry) => {
                entry.insert(total);
            }
        }
    }
    let mut out: Vec<Total> = merged.into_values().collect();
    out.sort_by(|a, b| a.value.cmp(&b.value).then_with(|| a.lane.cmp(&b.lane)));
    out
}

/// What spend is grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpendBy {
    /// Virtual key.
    Key,
    /// Group.
    Group,
    /// Wire model.
    Model,
    /// Lane.
    Lane,
    /// Operation (`chat`, `embed`, ..., `count_tokens`).
    Operation,
    /// End user (read from the rows: the hourly rollup does not keep it).
    User,
}

impl SpendBy {
    /// The ledger's (and the hourly rollup's) column for it.
    pub(crate) fn column(self) -> &'static str {
        match self {
            SpendBy::Key => "key_id",
            SpendBy::Group => "grp",
            SpendBy::Model => "model",
            SpendBy::Lane => "lane",
            SpendBy::Operation => "operation",
            SpendBy::User => "end_user",
        }
    }
}

/// A ledger sum: tokens by dimension value and lane, and what they cost
/// and were charged as settled (a line with rows from before the ledger
/// kept charges is priced by the reader, lane by lane, from its tokens).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Total {
    /// The dimension's value (`None`: rows without one, e.g. no key).
    pub value: Option<String>,
    /// The lane.
    pub lane: String,
    /// Requests.
    pub requests: u64,
    /// Tokens.
    pub tokens: Tokens,
    /// What response-cache hits saved (nano-USD, at the price the hit was
    /// served at).
    #[serde(default)]
    pub saved_nano: u64,
    /// What the content and governance stages decided on them.
    #[serde(default)]
    pub outcomes: Outcomes,
    /// What its rows cost and were charged, as settled.
    #[serde(default)]
    pub settled: Settled,
}

/// What a spend line's requests met on the way: cache hits, guardrail
/// decisions and refusals at the door (which are no requests, and spend
/// nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcomes {
    /// Answered from the response cache.
    pub cache_hits: u64,
    /// Guardrail decisions made (a request may have several).
    pub guarded: u64,
    /// Refused at the door (keys, limits, budgets, policies).
    pub refused: u64,
}

impl Outcomes {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Outcomes) {
        self.cache_hits = self.cache_hits.saturating_add(other.cache_hits);
        self.guarded = self.guarded.saturating_add(other.guarded);
        self.refused = self.refused.saturating_add(other.refused);
    }
}

/// A spend question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TotalsQuery {
    /// Group by.
    pub by: SpendBy,
    /// From (Unix ms, inclusive).
    pub from_ms: i64,
    /// To (Unix ms, exclusive).
    pub to_ms: i64,
    /// Only rows of this key.
    pub key: Option<String>,
    /// Only rows of these groups.
    pub groups: Option<Vec<String>>,
    /// Only rows of this end user.
    pub end_user: Option<String>,
}

impl TotalsQuery {
    /// Whether the question needs the rows alone: the hourly rollup keeps
    /// no end user.
    pub(crate) fn rows_only(&self) -> bool {
        self.by == SpendBy::User || self.end_user.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Settled;

    #[test]
    fn a_spend_question_reads_whole_hours_from_the_rollup_and_edges_from_rows() {
        let h = HOUR_MS;
        // Inside one hour: rows only.
        assert_eq!(spend_plan(10, 20), SpendPlan { hours: None, rows: vec![(10, 20)] });
        assert_eq!(spend_plan(h / 2, h + h / 2), SpendPlan { hours: None, rows: vec![(h / 2, h + h / 2)] });
        // Aligned: the rollup alone.
        assert_eq!(spend_plan(0, 3 * h), SpendPlan { hours: Some((0, 3)), rows: vec![] });
        // Ragged on both sides.
        assert_eq!(
            spend_plan(h / 2, 3 * h + 5),
            SpendPlan { hours: Some((1, 3)), rows: vec![(h / 2, h), (3 * h, 3 * h + 5)] }
        );
        assert_eq!(spend_plan(5, 5), SpendPlan { hours: None, rows: vec![(5, 5)] });
    }

    #[test]
    fn parts_of_an_answer_merge_by_value_and_lane() {
        let total = |value: Option<&str>, lane: &str, n: u64| Total {
            value: value.map(str::to_owned),
            lane: lane.into(),
            requests: n,
            tokens: Tokens { input: n, output: 2 * n, ..Tokens::default() },
            saved_nano: n,
            outcomes: Outcomes { cache_hits: n, guarded: 2 * n, refused: 3 * n },
            settled: Settled { cost_nano: 5 * n, price_nano: 6 * n, unsettled: 0 },
        };
        let merged = merge_totals([total(Some("k"), "a", 1), total(None, "a", 4), total(Some("k"), "a", 2)]);
        assert_eq!(merged, vec![total(None, "a", 4), total(Some("k"), "a", 3)]);
    }
}
