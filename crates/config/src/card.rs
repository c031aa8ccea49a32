//! What a rate card entry says beyond its flat prices: tiers by input size
//! (`tiers:`, long-context pricing), `batch_discount:` and
//! `service_tiers:`, each checked at boot with its fix (an entry of the
//! operator's card and of a group's own alike: [`entry`]); the form a
//! group's record keeps its card in ([`entry_json`], [`stored_entry`]); a
//! group's `markup:`; and the kinds a model's facts say it bills that its entry
//! leaves out (`switchyard check` warns of each).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Map};
use switchyard_governance::card::{ppm, Markup, Ppm, Tier, MAX_FACTOR, MAX_MARKUP, MAX_TIERS};
use switchyard_governance::Price;
use switchyard_ir::ServiceTier;

use crate::raw::RawRate;
use crate::{Issue, Rate};

/// A share or a factor: a number (`0.5`, `1.8`) or a percentage (`50%`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawFraction {
    Number(f64),
    Text(String),
}

impl RawFraction {
    /// Its value: a number as written, a percentage over 100.
    fn value(&self) -> Option<f64> {
        match self {
            RawFraction::Number(n) => Some(*n),
            RawFraction::Text(text) => {
                text.trim().strip_suffix('%').and_then(|n| n.trim().parse::<f64>().ok()).map(|n| n / 100.0)
            }
        }
    }
}

/// One tier of an entry: its threshold and the rates that change above it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTier {
    pub above_input_tokens: Option<u64>,
    pub input_utok: Option<f64>,
    pub output_utok: Option<f64>,
    pub cache_read_utok: Option<f64>,
    pub cache_write_utok: Option<f64>,
    pub cache_write_1h_utok: Option<f64>,
    pub reasoning_utok: Option<f64>,
    pub audio_input_utok: Option<f64>,
    pub audio_output_utok: Option<f64>,
    pub image_input_utok: Option<f64>,
    pub image_output_utok: Option<f64>,
}

/// The largest threshold a tier may name: past any context window sold.
pub const MAX_THRESHOLD: u64 = 100_000_000;

/// The most USD per million tokens a tier's rate may be (the flat card's
/// rates are bounded likewise by being finite; a tier's bound keeps its
/// products far inside `u128`).
const MAX_RATE: f64 = 1e6;

/// What an entry says beyond its flat prices.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Beyond {
    /// Tiers by input size, thresholds ascending.
    pub tiers: Vec<Tier>,
    /// The share off a line of a batch, in millionths.
    pub batch_discount: Ppm,
    /// Each service tier's factor, in millionths, by [`ServiceTier::index`].
    pub service_tiers: [Option<Ppm>; ServiceTier::ALL.len()],
}

/// Reads `raw`'s tiers, discount and factors over its flat `base` (a kind
/// a tier leaves out keeps the base's rate), reporting each problem at
/// `path` with its fix.
pub(crate) fn beyond(raw: &RawRate, base: &Price, path: &str, issues: &mut Vec<Issue>) -> Beyond {
    let mut out = Beyond::default();
    if let Some(tiers) = &raw.tiers {
        if tiers.len() > MAX_TIERS {
            issues.push(Issue::new(
                &format!("{path}.tiers"),
                format!("{} tiers is more than the {MAX_TIERS} an entry may have", tiers.len()),
                "keep the tiers the provider's pricing page lists (Claude and Gemini have one, above 200000)",
            ));
        }
        let mut below = 0u64;
        for (index, tier) in tiers.iter().enumerate().take(MAX_TIERS) {
            let at = format!("{path}.tiers[{index}]");
            let Some(above) = tier.above_input_tokens else {
                issues.push(Issue::new(
                    &at,
                    "a tier names no above_input_tokens",
                    "give the input size above which the tier's rates apply, e.g. above_input_tokens: 200000",
                ));
                continue;
            };
            if above == 0 || above > MAX_THRESHOLD {
                issues.push(Issue::new(
                    &format!("{at}.above_input_tokens"),
                    format!("{above} is not a threshold"),
                    format!("write a number of input tokens above 0 and at most {MAX_THRESHOLD}, e.g. 200000"),
                ));
                continue;
            }
            if above <= below {
                issues.push(Issue::new(
                    &format!("{at}.above_input_tokens"),
                    format!("{above} does not ascend past the tier before it ({below})"),
                    "list the tiers from the lowest above_input_tokens up, each threshold higher than the last",
                ));
                continue;
            }
            below = above;
            let rates = [
                tier.input_utok,
                tier.output_utok,
                tier.cache_read_utok,
                tier.cache_write_utok,
                tier.cache_write_1h_utok,
                tier.reasoning_utok,
                tier.audio_input_utok,
                tier.audio_output_utok,
                tier.image_input_utok,
                tier.image_output_utok,
            ];
            if rates.iter().flatten().any(|v| !v.is_finite() || *v < 0.0 || *v > MAX_RATE) {
                issues.push(Issue::new(
                    &at,
                    "a tier's rates must be finite, not negative and at most 1000000",
                    "write USD per million tokens, e.g. input_utok: 6",
                ));
                continue;
            }
            if rates.iter().all(Option::is_none) {
                issues.push(Issue::new(
                    &at,
                    "the tier prices nothing",
                    "give the rates that change above the threshold, e.g. input_utok and output_utok",
                ));
                continue;
            }
            let or = |own: Option<f64>, base: Option<f64>| own.or(base);
            let price = Price {
                input_utok: tier.input_utok.unwrap_or(base.input_utok),
                output_utok: tier.output_utok.unwrap_or(base.output_utok),
                cache_read_utok: tier.cache_read_utok.unwrap_or(base.cache_read_utok),
                cache_write_utok: tier.cache_write_utok.unwrap_or(base.cache_write_utok),
                cache_write_1h_utok: or(tier.cache_write_1h_utok, base.cache_write_1h_utok),
                reasoning_utok: or(tier.reasoning_utok, base.reasoning_utok),
                audio_input_utok: or(tier.audio_input_utok, base.audio_input_utok),
                audio_output_utok: or(tier.audio_output_utok, base.audio_output_utok),
                image_input_utok: or(tier.image_input_utok, base.image_input_utok),
                image_output_utok: or(tier.image_output_utok, base.image_output_utok),
                ..*base
            };
            out.tiers.push(Tier { above_input_tokens: above, price });
        }
    }
    if let Some(raw) = &raw.batch_discount {
        match raw.value().filter(|v| (0.0..1.0).contains(v)).and_then(ppm) {
            Some(share) => out.batch_discount = share,
            None => issues.push(Issue::new(
                &format!("{path}.batch_discount"),
                "not a share off",
                "write the share a batch line is billed less, at least 0 and below 100%, e.g. 50% or 0.5",
            )),
        }
    }
    for (name, raw) in raw.service_tiers.iter().flatten() {
        let at = format!("{path}.service_tiers.{name}");
        let tier = match ServiceTier::parse(name) {
            Some(ServiceTier::Batch) => {
                issues.push(Issue::new(
                    &at,
                    "the batch tier is priced by the discount",
                    "write batch_discount instead",
                ));
                continue;
            }
            Some(tier) if tier.as_str() == name.as_str() => tier,
            _ => {
                issues.push(Issue::new(
                    &at,
                    format!("`{name}` is not a service tier"),
                    "name standard, priority, flex or scale",
                ));
                continue;
            }
        };
        match raw.value().and_then(ppm).filter(|f| *f > 0 && *f <= MAX_FACTOR) {
            Some(factor) => out.service_tiers[tier.index()] = Some(factor),
            None => issues.push(Issue::new(
                &at,
                "not a factor",
                "write what the tier's price is of the standard one, above 0 and at most 10, e.g. flex: 0.5, priority: 1.8",
            )),
        }
    }
    out
}

/// Reads one rate card entry's figures (an operator's or a group's, from
/// the file or the admin API), reporting each problem at `path` with its
/// fix: finite rates, not negative, pricing something, and what it says
/// beyond its flat prices ([`beyond`]). A kind it leaves out takes its
/// side's rate (cache reads and writes the input's).
pub(crate) fn entry(rate: &RawRate, path: &str, issues: &mut Vec<Issue>) -> Rate {
    let values = [
        rate.input_utok,
        rate.output_utok,
        rate.cache_read_utok,
        rate.cache_write_utok,
        rate.cache_write_1h_utok,
        rate.reasoning_utok,
        rate.audio_input_utok,
        rate.audio_output_utok,
        rate.image_input_utok,
        rate.image_output_utok,
        rate.per_request_usd,
        rate.per_search_unit_usd,
        rate.per_image_usd,
        rate.per_million_chars_usd,
        rate.per_minute_usd,
    ];
    if values.iter().flatten().any(|v| !v.is_finite() || *v < 0.0) {
        issues.push(Issue::new(
            path,
            "prices must be finite and not negative",
            "write USD per million tokens, e.g. 0.15",
        ));
    }
    if values.iter().all(Option::is_none) {
        issues.push(Issue::new(
            path,
            "the row prices nothing",
            "give input_utok and output_utok (chat), input_utok (embed), or the unit price its operation bills",
        ));
    }
    let input = rate.input_utok.unwrap_or(0.0);
    let mut entry = Rate {
        input_utok: input,
        output_utok: rate.output_utok.unwrap_or(0.0),
        cache_read_utok: rate.cache_read_utok.unwrap_or(input),
        cache_write_utok: rate.cache_write_utok.unwrap_or(input),
        cache_write_1h_utok: rate.cache_write_1h_utok,
        reasoning_utok: rate.reasoning_utok,
        audio_input_utok: rate.audio_input_utok,
        audio_output_utok: rate.audio_output_utok,
        image_input_utok: rate.image_input_utok,
        image_output_utok: rate.image_output_utok,
        per_request_usd: rate.per_request_usd.unwrap_or(0.0),
        per_search_unit_usd: rate.per_search_unit_usd.unwrap_or(0.0),
        per_image_usd: rate.per_image_usd.unwrap_or(0.0),
        per_million_chars_usd: rate.per_million_chars_usd.unwrap_or(0.0),
        per_minute_usd: rate.per_minute_usd.unwrap_or(0.0),
        beyond: Beyond::default(),
    };
    entry.beyond = beyond(rate, &entry.flat(), path, issues);
    entry
}

/// An entry as a group's stored record keeps it: every rate it prices at,
/// written as a `rate_card` entry is (USD per million tokens; a tier with
/// each of its rates; the discount and factors as shares), so reading it
/// back ([`stored_entry`]) gives the same entry.
pub fn entry_json(rate: &Rate) -> serde_json::Value {
    let mut out = Map::new();
    put_kinds(&mut out, &rate.flat());
    let units = [
        ("per_request_usd", rate.per_request_usd),
        ("per_search_unit_usd", rate.per_search_unit_usd),
        ("per_image_usd", rate.per_image_usd),
        ("per_million_chars_usd", rate.per_million_chars_usd),
        ("per_minute_usd", rate.per_minute_usd),
    ];
    for (key, value) in units.into_iter().filter(|(_, value)| *value != 0.0) {
        out.insert(key.to_owned(), json!(value));
    }
    if !rate.beyond.tiers.is_empty() {
        let tiers = rate.beyond.tiers.iter().map(|tier| {
            let mut map = Map::new();
            map.insert("above_input_tokens".to_owned(), json!(tier.above_input_tokens));
            put_kinds(&mut map, &tier.price);
            serde_json::Value::Object(map)
        });
        out.insert("tiers".to_owned(), serde_json::Value::Array(tiers.collect()));
    }
    if rate.beyond.batch_discount != 0 {
        out.insert("batch_discount".to_owned(), json!(f64::from(rate.beyond.batch_discount) / 1e6));
    }
    let factors: Map<String, serde_json::Value> = ServiceTier::ALL
        .iter()
        .filter_map(|tier| {
            let factor = rate.beyond.service_tiers[tier.index()]?;
            Some((tier.as_str().to_owned(), json!(f64::from(factor) / 1e6)))
        })
        .collect();
    if !factors.is_empty() {
        out.insert("service_tiers".to_owned(), serde_json::Value::Object(factors));
    }
    serde_json::Value::Object(out)
}

/// Writes each token kind `price` sets into `map`, by its entry key.
fn put_kinds(map: &mut Map<String, serde_json::Value>, price: &Price) {
    let kinds = [
        ("input_utok", Some(price.input_utok)),
        ("output_utok", Some(price.output_utok)),
        ("cache_read_utok", Some(price.cache_read_utok)),
        ("cache_write_utok", Some(price.cache_write_utok)),
        ("cache_write_1h_utok", price.cache_write_1h_utok),
        ("reasoning_utok", price.reasoning_utok),
        ("audio_input_utok", price.audio_input_utok),
        ("audio_output_utok", price.audio_output_utok),
        ("image_input_utok", price.image_input_utok),
        ("image_output_utok", price.image_output_utok),
    ];
    for (key, value) in kinds {
        if let Some(value) = value {
            map.insert(key.to_owned(), json!(value));
        }
    }
}

/// An entry a group's stored record keeps ([`entry_json`]), read back;
/// one that no longer reads is every problem, each with its fix.
pub fn stored_entry(value: &serde_json::Value) -> Result<Rate, Vec<Issue>> {
    let raw: RawRate = serde_json::from_value(value.clone()).map_err(|err| {
        vec![Issue::new("rate_card", format!("not a rate card entry: {err}"), "write it again over the admin API")]
    })?;
    let mut issues = Vec::new();
    let rate = entry(&raw, "rate_card", &mut issues);
    if issues.is_empty() {
        Ok(rate)
    } else {
        Err(issues)
    }
}

/// A group's `markup:` (at `path`), bounded.
pub(crate) fn markup(raw: &RawFraction, path: &str, issues: &mut Vec<Issue>) -> Option<Markup> {
    let bounded = raw.value().and_then(ppm).filter(|m| *m <= MAX_MARKUP);
    if bounded.is_none() {
        issues.push(Issue::new(
            path,
            "not a markup",
            "write the share charged above cost, at least 0 and at most 1000%, e.g. 15% or 0.15",
        ));
    }
    bounded.map(Markup)
}

/// A kind of price a model's facts may say it bills (`bills:`), and
/// whether an entry prices it.
pub(crate) fn unpriced_kinds(raw: &RawRate, bills: &[String]) -> Vec<&'static str> {
    let tiers =
        |name: &str| raw.service_tiers.as_ref().is_some_and(|t: &BTreeMap<String, RawFraction>| t.contains_key(name));
    let kinds: [(&str, bool); 9] = [
        ("cache_read", raw.cache_read_utok.is_some()),
        ("cache_write", raw.cache_write_utok.is_some()),
        ("cache_write_1h", raw.cache_write_1h_utok.is_some()),
        ("reasoning", raw.reasoning_utok.is_some()),
        ("audio_input", raw.audio_input_utok.is_some()),
        ("long_context", raw.tiers.as_ref().is_some_and(|t| !t.is_empty())),
        ("batch", raw.batch_discount.is_some()),
        ("flex", tiers("flex")),
        ("priority", tiers("priority")),
    ];
    kinds
        .into_iter()
        .filter(|(kind, priced)| !priced && bills.iter().any(|b| b == kind))
        .map(|(kind, _)| kind)
        .collect()
}

/// The key of the entry that prices each kind, for the warning's fix.
pub(crate) fn key_of(kind: &str) -> &'static str {
    match kind {
        "cache_read" => "cache_read_utok",
        "cache_write" => "cache_write_utok",
        "cache_write_1h" => "cache_write_1h_utok",
        "reasoning" => "reasoning_utok",
        "audio_input" => "audio_input_utok",
        "long_context" => "tiers: [{ above_input_tokens: .., input_utok: .., output_utok: .. }]",
        "batch" => "batch_discount",
        "flex" => "service_tiers: { flex: .. }",
        "priority" => "service_tiers: { priority: .. }",
        _ => "the kind's rate",
    }
}

/// Every kind a `bills:` fact may name.
pub const KINDS: [&str; 9] = [
    "cache_read",
    "cache_write",
    "cache_write_1h",
    "reasoning",
    "audio_input",
    "long_context",
    "batch",
    "flex",
    "priority",
];
