//! What the budget tree and the admin plane's roles are made of, read the
//! same way wherever they appear (groups, a member's template, role
//! bindings): a budget, limits, and a scope.

use serde::Deserialize;
use switchyard_governance::{Budget, Downgrade, Limits, Window};

use crate::Issue;

/// An admin token's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Reads everything but kept conversation text; changes nothing.
    Read,
    /// Reads everything, kept conversation text too (a request's prompt
    /// and reply, kept by retention or by the request log); changes
    /// nothing.
    ReadText,
    /// Reads everything, kept text included, and changes.
    Full,
    /// A member signed in through single sign-on: manages their own keys
    /// (`/api/v1/self/keys`) and nothing else.
    Member,
}

impl Scope {
    /// Its place in the order of what a scope may do: member < read <
    /// read_text < full.
    fn rank(self) -> u8 {
        match self {
            Scope::Member => 0,
            Scope::Read => 1,
            Scope::ReadText => 2,
            Scope::Full => 3,
        }
    }

    /// The lesser of two scopes (a ceiling applied): member < read <
    /// read_text < full.
    pub fn at_most(self, ceiling: Scope) -> Scope {
        if self.rank() <= ceiling.rank() {
            self
        } else {
            ceiling
        }
    }

    /// Whether it reads kept conversation text (`read_text`, and `full`,
    /// which implies it).
    pub fn reads_text(self) -> bool {
        matches!(self, Scope::ReadText | Scope::Full)
    }

    /// Whether it only reads (`read`, `read_text`).
    pub fn read_only(self) -> bool {
        matches!(self, Scope::Read | Scope::ReadText)
    }

    /// Its name in the console and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::ReadText => "read_text",
            Scope::Full => "full",
            Scope::Member => "member",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBudget {
    pub usd: f64,
    pub window: String,
    /// Shares of the cap that warn: `[80%, 95%]`.
    #[serde(default)]
    pub warn: Vec<RawShare>,
    /// `refuse`, or `{ downgrade: <pool>, at?: 90%, forecast?: true }`.
    pub on_exhaust: Option<RawOnExhaust>,
}

/// A share of a cap: `80%`, or a number of percent.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawShare {
    Percent(f64),
    Text(String),
}

/// What a spent budget does.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawOnExhaust {
    Word(String),
    Downgrade(RawDowngrade),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDowngrade {
    pub downgrade: String,
    pub at: Option<RawShare>,
    pub forecast: Option<bool>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLimits {
    pub rps: Option<u64>,
    pub rpm: Option<u64>,
    pub rph: Option<u64>,
    pub rpd: Option<u64>,
    pub rpmo: Option<u64>,
    pub tps: Option<u64>,
    pub tpm: Option<u64>,
    pub tph: Option<u64>,
    pub tpd: Option<u64>,
    pub tpmo: Option<u64>,
    pub usd_per_hour: Option<f64>,
    pub usd_per_day: Option<f64>,
    pub usd_per_month: Option<f64>,
    pub concurrent: Option<u64>,
    #[serde(default)]
    pub per_model: std::collections::BTreeMap<String, RawLimits>,
}

/// The most a count limit may be: every sum a fleet's script forms from it
/// stays an exact integer.
pub(crate) const MAX_LIMIT: u64 = 1 << 50;

/// The most a USD figure (a budget, a USD quota) may be: about 10⁶ times
/// the world's yearly spend on anything, and exact in nano-USD.
pub(crate) const MAX_USD: f64 = 1e12;

/// A share in percent, above 0 and at most 100 (`path` names it).
pub(crate) fn share(raw: &RawShare, path: &str, issues: &mut Vec<Issue>) -> Option<f64> {
    let value = match raw {
        RawShare::Percent(n) => Some(*n),
        RawShare::Text(text) => text.trim().strip_suffix('%').and_then(|n| n.trim().parse::<f64>().ok()),
    };
    match value {
        Some(n) if n.is_finite() && n > 0.0 && n <= 100.0 => Some(n),
        _ => {
            issues.push(Issue::new(
                path,
                "not a share of the cap",
                "write a percentage above 0 and at most 100%, e.g. 80%",
            ));
            None
        }
    }
}

/// Validates a budget (`path` names it).
pub(crate) fn budget(raw: &RawBudget, path: &str, issues: &mut Vec<Issue>) -> Option<Budget> {
    let window = Window::from_name(&raw.window).or_else(|| {
        issues.push(Issue::new(
            &format!("{path}.window"),
            format!("`{}` is not a window", raw.window),
            "use 1m, 1h, 1d, 7d, 1mo or total",
        ));
        None
    })?;
    if !raw.usd.is_finite() || raw.usd < 0.0 || raw.usd > MAX_USD {
        issues.push(Issue::new(
            &format!("{path}.usd"),
            "a budget must be a finite amount, 0 or more (at most 10^12)",
            "write USD, e.g. 100",
        ));
        return None;
    }
    let mut warn: Vec<f64> = raw
        .warn
        .iter()
        .enumerate()
        .filter_map(|(index, raw)| share(raw, &format!("{path}.warn[{index}]"), issues))
        .collect();
    warn.sort_by(f64::total_cmp);
    warn.dedup();
    let on_exhaust = match &raw.on_exhaust {
        None => None,
        Some(RawOnExhaust::Word(word)) if word == "refuse" => None,
        Some(RawOnExhaust::Word(word)) => {
            issues.push(Issue::new(
                &format!("{path}.on_exhaust"),
                format!("`{word}` is not what a spent budget can do"),
                "write refuse (the default), or { downgrade: <a cheaper pool> }",
            ));
            None
        }
        Some(RawOnExhaust::Downgrade(raw)) => Some(Downgrade {
            pool: raw.downgrade.clone(),
            at: raw.at.as_ref().and_then(|at| share(at, &format!("{path}.on_exhaust.at"), issues)),
            forecast: raw.forecast.unwrap_or(false),
        }),
    };
    Some(Budget { usd: raw.usd, window, warn, on_exhaust })
}

/// Validates limits (`path` names them); a `per_model` entry is checked
/// the same way, and holds no `per_model` of its own.
pub(crate) fn limits(raw: &RawLimits, path: &str, issues: &mut Vec<Issue>) -> Limits {
    let counts = [
        ("rps", raw.rps),
        ("rpm", raw.rpm),
        ("rph", raw.rph),
        ("rpd", raw.rpd),
        ("rpmo", raw.rpmo),
        ("tps", raw.tps),
        ("tpm", raw.tpm),
        ("tph", raw.tph),
        ("tpd", raw.tpd),
        ("tpmo", raw.tpmo),
        ("concurrent", raw.concurrent),
    ];
    for (key, value) in counts {
        match value {
            Some(0) => issues.push(Issue::new(
                &format!("{path}.{key}"),
                "a limit of 0 refuses everything",
                "remove it (no limit) or set 1 or more",
            )),
            Some(n) if n > MAX_LIMIT => issues.push(Issue::new(
                &format!("{path}.{key}"),
                format!("{n} is more than any limit can count"),
                "remove it (no limit) or write at most 2^50",
            )),
            _ => {}
        }
    }
    for (key, value) in
        [("usd_per_hour", raw.usd_per_hour), ("usd_per_day", raw.usd_per_day), ("usd_per_month", raw.usd_per_month)]
    {
        if let Some(usd) = value {
            if !usd.is_finite() || usd <= 0.0 || usd > MAX_USD {
                issues.push(Issue::new(
                    &format!("{path}.{key}"),
                    "a USD quota must be more than 0 (and at most 10^12)",
                    "remove it (no limit) or write USD, e.g. 25",
                ));
            }
        }
    }
    let mut per_model = std::collections::BTreeMap::new();
    for (name, scoped) in &raw.per_model {
        let scoped_path = format!("{path}.per_model.{name}");
        if !scoped.per_model.is_empty() {
            issues.push(Issue::new(
                &format!("{scoped_path}.per_model"),
                "per_model limits hold no per_model of their own",
                "move the entry up to the bucket's per_model",
            ));
        }
        per_model.insert(name.clone(), limits(scoped, &scoped_path, issues));
    }
    Limits {
        rps: raw.rps,
        rpm: raw.rpm,
        rph: raw.rph,
        rpd: raw.rpd,
        rpmo: raw.rpmo,
        tps: raw.tps,
        tpm: raw.tpm,
        tph: raw.tph,
        tpd: raw.tpd,
        tpmo: raw.tpmo,
        usd_per_hour: raw.usd_per_hour,
        usd_per_day: raw.usd_per_day,
        usd_per_month: raw.usd_per_month,
        concurrent: raw.concurrent,
        per_model,
    }
}

/// The names a budget's downgrade and its limits' `per_model` entries
/// give (each a pool or a model callers may name), with their key paths.
pub(crate) fn named_pools<'a>(
    path: &str,
    budget: Option<&'a Budget>,
    limits: &'a Limits,
) -> impl Iterator<Item = (String, &'a str)> + 'a {
    let downgrade = budget
        .and_then(|b| b.on_exhaust.as_ref())
        .map(|d| (format!("{path}.budget.on_exhaust.downgrade"), d.pool.as_str()));
    let path = path.to_owned();
    downgrade
        .into_iter()
        .chain(limits.per_model.keys().map(move |name| (format!("{path}.limits.per_model.{name}"), name.as_str())))
}
