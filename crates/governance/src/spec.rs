//! What a bucket enforces: its budget (a USD cap over a calendar window,
//! with the shares of it that warn and what happens once it is spent) and
//! its limits (rates over a second or a minute, quotas of requests, tokens
//! or USD over a calendar hour, day or month, concurrency, and the same per
//! model or pool a request names, inside the bucket).
//!
//! Rates and quotas differ on purpose: a rate (`rps`, `rpm`, `tps`, `tpm`)
//! is GCRA, a burst of N then an even refill, so no minute ever sees more
//! than twice N; a quota (`rph`, `tpd`, `usd_per_month`, ...) counts what
//! was used since its UTC window began, holds each request's estimate
//! until it settles (like a budget) and starts again at zero with the next
//! window, so a window sees at most its cap plus what requests in flight
//! under-reserved.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::money::NanoUsd;
use crate::window::Window;

/// A spending cap over a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// The cap, in USD.
    pub usd: f64,
    /// The window it applies to.
    pub window: Window,
    /// Shares of the cap (percent, above 0 and at most 100) whose crossing
    /// raises a `budget_warning`, once each a window (empty: the alerts'
    /// defaults).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warn: Vec<f64>,
    /// What a request the budget cannot pay for gets instead of a refusal
    /// (`None`: the refusal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_exhaust: Option<Downgrade>,
}

impl Budget {
    /// A budget of `usd` over `window` that warns at the alerts' defaults
    /// and refuses once spent.
    pub fn new(usd: f64, window: Window) -> Budget {
        Budget { usd, window, warn: Vec::new(), on_exhaust: None }
    }

    /// The cap in nano-USD.
    pub fn cap(&self) -> NanoUsd {
        crate::money::from_usd(self.usd)
    }

    /// The spend (nano-USD) from which requests are downgraded before the
    /// budget is spent (`downgrade.at`), when it says so.
    pub fn downgrade_from(&self) -> Option<NanoUsd> {
        let share = self.on_exhaust.as_ref()?.at?;
        Some((self.cap() as f64 * share / 100.0).floor().max(0.0) as NanoUsd)
    }
}

/// Degrade, then refuse: a budget that cannot pay for a request in the
/// pool it names sends it to a cheaper pool, held at that pool's prices
/// against the same cap, and refuses only when even that does not fit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Downgrade {
    /// The pool that serves instead.
    #[serde(rename = "downgrade")]
    pub pool: String,
    /// Downgrade already from this share of the cap spent (percent), not
    /// only once a request no longer fits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<f64>,
    /// Downgrade too while the bucket's forecast says the budget runs out
    /// before its window ends.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forecast: bool,
}

/// Why a request was downgraded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// The budget could not pay for it at its pool's prices.
    Spent,
    /// The budget passed its `downgrade.at` share.
    Threshold,
    /// The forecast says the budget runs out before its window ends.
    Forecast,
}

impl Trigger {
    /// Its name in headers and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Spent => "spent",
            Trigger::Threshold => "threshold",
            Trigger::Forecast => "forecast",
        }
    }
}

/// Rates, quotas and concurrency of a bucket, and of the models and pools
/// requests name inside it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Limits {
    /// Requests per second (a rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rps: Option<u64>,
    /// Requests per minute (a rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<u64>,
    /// Requests per UTC hour (a quota).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rph: Option<u64>,
    /// Requests per UTC day (a quota).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpd: Option<u64>,
    /// Requests per calendar month (a quota).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpmo: Option<u64>,
    /// Tokens (input plus output) per second (a rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tps: Option<u64>,
    /// Tokens per minute (a rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<u64>,
    /// Tokens per UTC hour (a quota).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tph: Option<u64>,
    /// Tokens per UTC day (a quota).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpd: Option<u64>,
    /// Tokens per calendar month (a quota).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpmo: Option<u64>,
    /// USD per UTC hour (a quota).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_hour: Option<f64>,
    /// USD per UTC day (a quota).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_day: Option<f64>,
    /// USD per calendar month (a quota).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_month: Option<f64>,
    /// Requests in flight at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrent: Option<u64>,
    /// The same limits for the requests that name a model or pool, inside
    /// this bucket (one level: an entry has no `per_model` of its own).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub per_model: BTreeMap<String, Limits>,
}

/// What a quota counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Requests admitted.
    Requests,
    /// Tokens, input plus output.
    Tokens,
    /// Spend, in nano-USD.
    Usd,
}

impl Metric {
    /// Its name in messages and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Requests => "requests",
            Metric::Tokens => "tokens",
            Metric::Usd => "usd",
        }
    }
}

/// One quota of a bucket: at most `cap` of `metric` per calendar `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    /// What it counts.
    pub metric: Metric,
    /// Its window: an hour, a day or a month.
    pub window: Window,
    /// The most a window holds (nano-USD for [`Metric::Usd`]).
    pub cap: u64,
}

impl Quota {
    /// Its short name (`tpd`, `rph`, `usd_per_month`): the limit's config
    /// key, and its counters' names in a fleet's store.
    pub fn name(self) -> &'static str {
        match (self.metric, self.window) {
            (Metric::Requests, Window::Hour) => "rph",
            (Metric::Requests, Window::Day) => "rpd",
            (Metric::Requests, _) => "rpmo",
            (Metric::Tokens, Window::Hour) => "tph",
            (Metric::Tokens, Window::Day) => "tpd",
            (Metric::Tokens, _) => "tpmo",
            (Metric::Usd, Window::Hour) => "usd_per_hour",
            (Metric::Usd, Window::Day) => "usd_per_day",
            (Metric::Usd, _) => "usd_per_month",
        }
    }

    /// What a request holding `estimate` takes of it.
    pub fn amount(self, tokens: u64, cost: NanoUsd) -> u64 {
        match self.metric {
            Metric::Requests => 1,
            Metric::Tokens => tokens,
            Metric::Usd => cost,
        }
    }
}

impl Limits {
    /// True when no limit is set.
    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    /// Its quotas (calendar windows), in a fixed order.
    pub fn quotas(&self) -> impl Iterator<Item = Quota> + '_ {
        let usd = |v: Option<f64>| v.map(crate::money::from_usd);
        [
            (Metric::Requests, Window::Hour, self.rph),
            (Metric::Requests, Window::Day, self.rpd),
            (Metric::Requests, Window::Month, self.rpmo),
            (Metric::Tokens, Window::Hour, self.tph),
            (Metric::Tokens, Window::Day, self.tpd),
            (Metric::Tokens, Window::Month, self.tpmo),
            (Metric::Usd, Window::Hour, usd(self.usd_per_hour)),
            (Metric::Usd, Window::Day, usd(self.usd_per_day)),
            (Metric::Usd, Window::Month, usd(self.usd_per_month)),
        ]
        .into_iter()
        .filter_map(|(metric, window, cap)| Some(Quota { metric, window, cap: cap? }))
    }

    /// The limits without their per-model entries (what one bucket counts).
    pub fn own(&self) -> Limits {
        Limits { per_model: BTreeMap::new(), ..self.clone() }
    }
}

/// The most a count limit may be: every sum a fleet's script forms from
/// it stays an exact integer.
pub const MAX_LIMIT: u64 = 1 << 50;

/// The most a USD figure (a budget, a USD quota) may be: exact in nano-USD
/// and far past any real spend.
pub const MAX_USD: f64 = 1e12;

/// A limit or budget out of range: its key (relative to the limits or the
/// budget) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfRange {
    /// The key, e.g. `tpd`, `per_model.gpt-4o.rps`, `on_exhaust.at`.
    pub key: String,
    /// What is wrong, and the range.
    pub problem: String,
}

impl Limits {
    /// Each limit out of range: a count of 0 (it refuses everything) or
    /// past [`MAX_LIMIT`], a USD quota not above 0 or past [`MAX_USD`], a
    /// `per_model` entry with its own `per_model`.
    pub fn out_of_range(&self) -> Vec<OutOfRange> {
        let mut found = Vec::new();
        self.check_into("", &mut found);
        found
    }

    fn check_into(&self, prefix: &str, found: &mut Vec<OutOfRange>) {
        let counts = [
            ("rps", self.rps),
            ("rpm", self.rpm),
            ("rph", self.rph),
            ("rpd", self.rpd),
            ("rpmo", self.rpmo),
            ("tps", self.tps),
            ("tpm", self.tpm),
            ("tph", self.tph),
            ("tpd", self.tpd),
            ("tpmo", self.tpmo),
            ("concurrent", self.concurrent),
        ];
        for (key, value) in counts {
            let problem = match value {
                Some(0) => "a limit of 0 refuses everything: omit it for no limit, or set 1 or more".to_owned(),
                Some(n) if n > MAX_LIMIT => format!("{n} is more than a limit can count: at most 2^50"),
                _ => continue,
            };
            found.push(OutOfRange { key: format!("{prefix}{key}"), problem });
        }
        let usd = [
            ("usd_per_hour", self.usd_per_hour),
            ("usd_per_day", self.usd_per_day),
            ("usd_per_month", self.usd_per_month),
        ];
        for (key, value) in usd {
            if value.is_some_and(|usd| !(usd.is_finite() && usd > 0.0 && usd <= MAX_USD)) {
                let problem = "a USD quota is more than 0 and at most 10^12: omit it for no limit".to_owned();
                found.push(OutOfRange { key: format!("{prefix}{key}"), problem });
            }
        }
        for (name, scoped) in &self.per_model {
            let scoped_prefix = format!("{prefix}per_model.{name}.");
            if !scoped.per_model.is_empty() {
                let problem = "per_model limits hold no per_model of their own".to_owned();
                found.push(OutOfRange { key: format!("{scoped_prefix}per_model"), problem });
            }
            scoped.check_into(&scoped_prefix, found);
        }
    }
}

impl Budget {
    /// Each part of the budget out of range: the cap (0 to [`MAX_USD`]),
    /// a warning or downgrade share (above 0, at most 100).
    pub fn out_of_range(&self) -> Vec<OutOfRange> {
        let mut found = Vec::new();
        if !(self.usd.is_finite() && self.usd >= 0.0 && self.usd <= MAX_USD) {
            found.push(OutOfRange { key: "usd".into(), problem: "a budget is 0 or more USD, at most 10^12".into() });
        }
        let share = |n: f64| n.is_finite() && n > 0.0 && n <= 100.0;
        for (index, warn) in self.warn.iter().enumerate() {
            if !share(*warn) {
                found.push(OutOfRange {
                    key: format!("warn[{index}]"),
                    problem: "a share is above 0 and at most 100 (percent)".into(),
                });
            }
        }
        if let Some(at) = self.on_exhaust.as_ref().and_then(|d| d.at).filter(|at| !share(*at)) {
            found.push(OutOfRange {
                key: "on_exhaust.at".into(),
                problem: format!("{at} is not a share above 0 and at most 100 (percent)"),
            });
        }
        found
    }
}

/// What a bucket enforces.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BucketSpec {
    /// Spending cap.
    pub budget: Option<Budget>,
    /// Rate and concurrency limits.
    #[serde(default)]
    pub limits: Limits,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_read_and_write_the_config_names() {
        let limits: Limits = serde_json::from_value(serde_json::json!({
            "rps": 10, "rpm": 600, "tpd": 2_000_000, "usd_per_month": 5.5,
            "per_model": {"gpt-4o": {"tpd": 500_000}}
        }))
        .unwrap();
        assert_eq!(limits.rps, Some(10));
        assert_eq!(limits.per_model["gpt-4o"].tpd, Some(500_000));
        let quotas: Vec<(&str, u64)> = limits.quotas().map(|q| (q.name(), q.cap)).collect();
        assert_eq!(quotas, [("tpd", 2_000_000), ("usd_per_month", 5_500_000_000)]);
        assert!(limits.own().per_model.is_empty());
        // What an older record holds still reads.
        let old: Limits = serde_json::from_value(serde_json::json!({"rpm": 5, "tpm": null, "concurrent": 2})).unwrap();
        assert_eq!((old.rpm, old.concurrent, old.tpd), (Some(5), Some(2), None));
        let budget: Budget = serde_json::from_value(serde_json::json!({
            "usd": 10.0, "window": "1mo", "warn": [80.0, 95.0],
            "on_exhaust": {"downgrade": "cheap", "at": 90.0}
        }))
        .unwrap();
        assert_eq!(budget.on_exhaust.as_ref().unwrap().pool, "cheap");
        assert_eq!(budget.downgrade_from(), Some(9_000_000_000));
        let plain: Budget = serde_json::from_value(serde_json::json!({"usd": 1.0, "window": "1d"})).unwrap();
        assert_eq!(plain, Budget::new(1.0, Window::Day));
        assert_eq!(serde_json::to_value(&plain).unwrap(), serde_json::json!({"usd": 1.0, "window": "1d"}));
    }

    #[test]
    fn out_of_range_names_each_key() {
        let limits: Limits = serde_json::from_value(serde_json::json!({
            "rps": 0, "tpd": 1_u64 << 51, "usd_per_day": -1.0, "rpm": 5,
            "per_model": {"gpt-4o": {"tpd": 0, "per_model": {"x": {"rpm": 1}}}}
        }))
        .unwrap();
        let keys: Vec<String> = limits.out_of_range().into_iter().map(|o| o.key).collect();
        assert_eq!(keys, ["rps", "tpd", "usd_per_day", "per_model.gpt-4o.per_model", "per_model.gpt-4o.tpd"]);
        let budget = Budget {
            warn: vec![80.0, 0.0],
            on_exhaust: Some(Downgrade { pool: "p".into(), at: Some(101.0), forecast: false }),
            ..Budget::new(f64::INFINITY, Window::Day)
        };
        let keys: Vec<String> = budget.out_of_range().into_iter().map(|o| o.key).collect();
        assert_eq!(keys, ["usd", "warn[1]", "on_exhaust.at"]);
        assert!(Budget::new(5.0, Window::Day).out_of_range().is_empty());
    }
}
