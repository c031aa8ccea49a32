//! Reconciliation: the ledger's tokens for a provider, model and day beside
//! what the provider's own usage report says it billed, and the drift
//! between them. Pure: the job that reads the reports and the ledger
//! passes both in.
//!
//! A report names models as the provider served them (often a dated
//! snapshot, `gpt-4o-2024-08-06`), the ledger as lanes asked for them
//! (`gpt-4o`): a reported model is counted under the ledger's model it
//! equals, else the longest one it extends by `-…`, else under its own
//! name (traffic the gateway did not carry).

use std::collections::BTreeMap;

use serde::Serialize;

/// Tokens on one side of a comparison.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counted {
    /// Prompt tokens, cached and cache writes included.
    pub input: u64,
    /// Generated tokens.
    pub output: u64,
    /// Prompt tokens read from cache.
    pub cache_read: u64,
    /// Requests.
    pub requests: u64,
}

impl Counted {
    /// Input plus output: what the drift is measured on.
    pub fn total(&self) -> u64 {
        self.input.saturating_add(self.output)
    }

    /// Adds `other`.
    pub fn add(&mut self, other: &Counted) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.requests = self.requests.saturating_add(other.requests);
    }
}

/// One provider, model and day compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Line {
    /// The reconciled provider (`openai`, `anthropic`).
    pub provider: String,
    /// The model, as the ledger names it.
    pub model: String,
    /// The UTC day, `YYYY-MM-DD`.
    pub day: String,
    /// What the ledger holds.
    pub ledger: Counted,
    /// What the provider reports.
    pub reported: Counted,
    /// (reported − ledger) ÷ ledger over input and output tokens: 0.03 is
    /// 3 % more billed than metered; 1 when the ledger holds none and the
    /// provider reports some.
    pub drift: f64,
    /// The drift's size passed the tolerance.
    pub over: bool,
}

/// The drift of `reported` from `ledger`.
pub fn drift(ledger: u64, reported: u64) -> f64 {
    match (ledger, reported) {
        (0, 0) => 0.0,
        (0, _) => 1.0,
        _ => (reported as f64 - ledger as f64) / ledger as f64,
    }
}

/// The ledger's model `reported` is counted under: equal, else the
/// longest one it extends by `-`, else none.
pub fn matching<'a>(reported: &str, ledger: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut best: Option<&str> = None;
    for model in ledger {
        if model == reported {
            return Some(model);
        }
        let extends = reported.strip_prefix(model).is_some_and(|rest| rest.starts_with('-'));
        if extends && best.is_none_or(|b| b.len() < model.len()) {
            best = Some(model);
        }
    }
    best
}

/// Compares one provider's day: a line per model either side names,
/// ordered by model. `tolerance` is a fraction (0.02 for 2 %).
pub fn compare(
    provider: &str,
    day: &str,
    ledger: &BTreeMap<String, Counted>,
    reported: &[(String, Counted)],
    tolerance: f64,
) -> Vec<Line> {
    let mut sides: BTreeMap<String, (Counted, Counted)> =
        ledger.iter().map(|(model, counted)| (model.clone(), (*counted, Counted::default()))).collect();
    for (model, counted) in reported {
        let name = matching(model, ledger.keys().map(String::as_str)).unwrap_or(model).to_owned();
        sides.entry(name).or_default().1.add(counted);
    }
    sides
        .into_iter()
        .map(|(model, (ledger, reported))| {
            let drift = drift(ledger.total(), reported.total());
            Line {
                provider: provider.to_owned(),
                model,
                day: day.to_owned(),
                ledger,
                reported,
                drift,
                over: drift.abs() > tolerance,
            }
        })
        .collect()
}

/// The UTC day of `ms` as `YYYY-MM-DD`, and its start (Unix ms).
pub fn day_of(ms: i64) -> (String, i64) {
    let start = ms.div_euclid(86_400_000) * 86_400_000;
    let date = time::OffsetDateTime::from_unix_timestamp(start / 1000).map_or(time::Date::MIN, |at| at.date());
    (format!("{:04}-{:02}-{:02}", date.year(), u8::from(date.month()), date.day()), start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counted(input: u64, output: u64) -> Counted {
        Counted { input, output, requests: 1, ..Counted::default() }
    }

    #[test]
    fn drift_is_measured_on_input_and_output_against_the_ledger() {
        let ledger = BTreeMap::from([("gpt-4o".to_owned(), counted(10_000, 5_000))]);
        let reported = [("gpt-4o-2024-08-06".to_owned(), counted(10_300, 5_150))];
        let lines = compare("openai", "2026-12-07", &ledger, &reported, 0.02);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].model, "gpt-4o");
        assert!((lines[0].drift - 0.03).abs() < 1e-9, "{}", lines[0].drift);
        assert!(lines[0].over);
        let exact = compare("openai", "2026-12-07", &ledger, &[("gpt-4o".to_owned(), counted(10_000, 5_000))], 0.02);
        assert_eq!(exact[0].drift, 0.0);
        assert!(!exact[0].over);
    }

    #[test]
    fn models_on_one_side_only_are_lines_of_their_own() {
        let ledger = BTreeMap::from([("gpt-4o".to_owned(), counted(100, 0))]);
        let reported = [("o3".to_owned(), counted(50, 0))];
        let lines = compare("openai", "d", &ledger, &reported, 0.02);
        assert_eq!(lines.len(), 2);
        assert_eq!((lines[0].model.as_str(), lines[0].drift), ("gpt-4o", -1.0));
        assert_eq!((lines[1].model.as_str(), lines[1].drift), ("o3", 1.0));
        assert!(lines.iter().all(|l| l.over));
    }

    #[test]
    fn a_snapshot_counts_under_the_longest_model_it_extends() {
        let ledger = ["gpt-4o", "gpt-4o-mini"];
        assert_eq!(matching("gpt-4o-mini-2024-07-18", ledger), Some("gpt-4o-mini"));
        assert_eq!(matching("gpt-4o-2024-08-06", ledger), Some("gpt-4o"));
        assert_eq!(matching("gpt-4o", ledger), Some("gpt-4o"));
        assert_eq!(matching("gpt-4omni", ledger), None);
    }

    #[test]
    fn a_day_is_named_in_utc() {
        assert_eq!(day_of(0), ("1970-01-01".to_owned(), 0));
        assert_eq!(day_of(1_765_152_000_000 + 3_600_000).0, "2025-12-08");
    }
}
