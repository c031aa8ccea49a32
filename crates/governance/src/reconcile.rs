//! Reconciliation: the ledger's tokens and cost for a provider, model and
//! day beside what the provider's own usage and cost reports say it
//! billed, and the drifts between them. Pure: the job that reads the
//! reports and the ledger passes both in.
//!
//! Money stays integer: a reported amount is read from its decimal text
//! (`amount`, never through a float) as pico-USD, a model's rows are
//! summed in `u128` and rounded once to nano-USD, the ledger's unit.
//!
//! A report names models as the provider served them (often a dated
//! snapshot, `gpt-4o-2024-08-06`), the ledger as lanes asked for them
//! (`gpt-4o`): a reported model is counted under the ledger's model it
//! equals, else the longest one it extends by `-…`, else under its own
//! name (traffic the gateway did not carry).

pub mod amount;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::NanoUsd;
use amount::PicoUsd;

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

/// The ledger's side of a model's day: its tokens and what they cost at
/// the operator's rate card.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Metered {
    /// Tokens by kind.
    pub tokens: Counted,
    /// Their cost as settled (nano-USD).
    pub cost_nano: NanoUsd,
}

impl Metered {
    /// Adds `other`.
    pub fn add(&mut self, other: &Metered) {
        self.tokens.add(&other.tokens);
        self.cost_nano = self.cost_nano.saturating_add(other.cost_nano);
    }
}

/// What a provider reports for one model and day, summed from its rows.
#[derive(Debug, Clone, Copy, Default)]
struct Reported {
    tokens: Counted,
    cost_pico: PicoUsd,
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
    /// The token drift's size passed the tolerance.
    pub over: bool,
    /// What the ledger's rows cost at the rate card (nano-USD).
    pub ledger_nano: NanoUsd,
    /// What the provider's cost report bills (nano-USD; `None`: the cost
    /// report was not read).
    pub reported_nano: Option<NanoUsd>,
    /// (billed − ledger) ÷ ledger cost, as `drift` (`None`: not read).
    pub cost_drift: Option<f64>,
    /// The cost drift's size passed the tolerance.
    pub cost_over: bool,
}

impl Line {
    /// Either drift passed the tolerance: the line alerts.
    pub fn alerting(&self) -> bool {
        self.over || self.cost_over
    }
}

/// The drift of `reported` from `ledger`.
pub fn drift(ledger: u64, reported: u64) -> f64 {
    match (ledger, reported) {
        (0, 0) => 0.0,
        (0, _) => 1.0,
        // The difference is taken exactly; only the ratio is a float.
        _ => (i128::from(reported) - i128::from(ledger)) as f64 / ledger as f64,
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

/// Compares one provider's day: a line per model any side names, ordered
/// by model. `reported` are the usage report's rows, `billed` the cost
/// report's (model, pico-USD; `None` when it was not read). `tolerance`
/// is a fraction (0.02 for 2 %).
pub fn compare(
    provider: &str,
    day: &str,
    ledger: &BTreeMap<String, Metered>,
    reported: &[(String, Counted)],
    billed: Option<&[(String, PicoUsd)]>,
    tolerance: f64,
) -> Vec<Line> {
    let mut sides: BTreeMap<String, (Metered, Reported)> =
        ledger.iter().map(|(model, metered)| (model.clone(), (*metered, Reported::default()))).collect();
    let name = |model: &str| matching(model, ledger.keys().map(String::as_str)).unwrap_or(model).to_owned();
    for (model, counted) in reported {
        sides.entry(name(model)).or_default().1.tokens.add(counted);
    }
    for (model, pico) in billed.unwrap_or_default() {
        let side = &mut sides.entry(name(model)).or_default().1;
        side.cost_pico = side.cost_pico.saturating_add(*pico);
    }
    sides
        .into_iter()
        .map(|(model, (ledger, reported))| {
            let drift = drift(ledger.tokens.total(), reported.tokens.total());
            let reported_nano = billed.map(|_| amount::nano(reported.cost_pico));
            let cost_drift = reported_nano.map(|billed| self::drift(ledger.cost_nano, billed));
            Line {
                provider: provider.to_owned(),
                model,
                day: day.to_owned(),
                ledger: ledger.tokens,
                reported: reported.tokens,
                drift,
                over: drift.abs() > tolerance,
                ledger_nano: ledger.cost_nano,
                reported_nano,
                cost_drift,
                cost_over: cost_drift.is_some_and(|d| d.abs() > tolerance),
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

    fn metered(input: u64, output: u64) -> Metered {
        Metered { tokens: counted(input, output), cost_nano: 0 }
    }

    #[test]
    fn drift_is_measured_on_input_and_output_against_the_ledger() {
        let ledger = BTreeMap::from([("gpt-4o".to_owned(), metered(10_000, 5_000))]);
        let reported = [("gpt-4o-2024-08-06".to_owned(), counted(10_300, 5_150))];
        let lines = compare("openai", "2026-12-07", &ledger, &reported, None, 0.02);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].model, "gpt-4o");
        assert!((lines[0].drift - 0.03).abs() < 1e-9, "{}", lines[0].drift);
        assert!(lines[0].over);
        assert_eq!((lines[0].reported_nano, lines[0].cost_drift, lines[0].cost_over), (None, None, false));
        let same = [("gpt-4o".to_owned(), counted(10_000, 5_000))];
        let exact = compare("openai", "2026-12-07", &ledger, &same, None, 0.02);
        assert_eq!(exact[0].drift, 0.0);
        assert!(!exact[0].over && !exact[0].alerting());
    }

    #[test]
    fn models_on_one_side_only_are_lines_of_their_own() {
        let ledger = BTreeMap::from([("gpt-4o".to_owned(), metered(100, 0))]);
        let reported = [("o3".to_owned(), counted(50, 0))];
        let lines = compare("openai", "d", &ledger, &reported, None, 0.02);
        assert_eq!(lines.len(), 2);
        assert_eq!((lines[0].model.as_str(), lines[0].drift), ("gpt-4o", -1.0));
        assert_eq!((lines[1].model.as_str(), lines[1].drift), ("o3", 1.0));
        assert!(lines.iter().all(|l| l.over));
    }

    #[test]
    fn cost_drift_is_the_billed_money_against_the_ledger_s_cost() {
        use amount::{parse, Unit};
        // $0.075 metered; the report bills $0.07725 in two rows (input and
        // output lines of the dated snapshot): +3 %, exactly.
        let ledger = BTreeMap::from([
            ("gpt-4o".to_owned(), Metered { tokens: counted(10_000, 5_000), cost_nano: 75_000_000 }),
            ("gpt-4o-mini".to_owned(), Metered { tokens: counted(1_000, 0), cost_nano: 150_000 }),
        ]);
        let usage = [
            ("gpt-4o-2024-08-06".to_owned(), counted(10_000, 5_000)),
            ("gpt-4o-mini-2024-07-18".to_owned(), counted(1_000, 0)),
        ];
        let billed = [
            ("gpt-4o-2024-08-06".to_owned(), parse("0.02575", Unit::Usd).unwrap()),
            ("gpt-4o-2024-08-06".to_owned(), parse("0.0515", Unit::Usd).unwrap()),
            ("gpt-4o-mini-2024-07-18".to_owned(), parse("1.5e-4", Unit::Usd).unwrap()),
            ("assistants api | file search".to_owned(), parse("0.000271", Unit::Usd).unwrap()),
        ];
        let lines = compare("openai", "d", &ledger, &usage, Some(&billed), 0.02);
        let models: Vec<&str> = lines.iter().map(|l| l.model.as_str()).collect();
        assert_eq!(models, ["assistants api | file search", "gpt-4o", "gpt-4o-mini"]);
        let gpt = &lines[1];
        assert_eq!((gpt.ledger_nano, gpt.reported_nano), (75_000_000, Some(77_250_000)));
        assert!((gpt.cost_drift.unwrap() - 0.03).abs() < 1e-12, "{:?}", gpt.cost_drift);
        assert!(gpt.cost_over && !gpt.over && gpt.alerting());
        let mini = &lines[2];
        assert_eq!((mini.reported_nano, mini.cost_drift, mini.cost_over), (Some(150_000), Some(0.0), false));
        // Money the gateway did not carry is a line of its own.
        let other = &lines[0];
        assert_eq!((other.ledger_nano, other.reported_nano, other.cost_drift), (0, Some(271_000), Some(1.0)));
        // A read report with no row for a metered model bills it nothing.
        let lines = compare("openai", "d", &ledger, &usage, Some(&[]), 0.02);
        assert_eq!((lines[0].reported_nano, lines[0].cost_drift), (Some(0), Some(-1.0)));
        // The rows are summed before the one rounding to nano-USD.
        let thirds = [("gpt-4o".to_owned(), 400), ("gpt-4o".to_owned(), 400)];
        assert_eq!(compare("openai", "d", &ledger, &[], Some(&thirds), 0.02)[0].reported_nano, Some(1));
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
