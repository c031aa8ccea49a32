//! What a rate card entry says beyond its flat prices: tiers by input size
//! (`tiers:`, long-context pricing), `batch_discount:` and
//! `service_tiers:`, each checked at boot with its fix; a group's
//! `markup:`; and the kinds a model's facts say it bills that its entry
//! leaves out (`switchyard check` warns of each).

use std::collections::BTreeMap;

use serde::Deserialize;
use switchyard_governance::card::{ppm, Markup, Ppm, Tier, MAX_FACTOR, MAX_MARKUP, MAX_TIERS};
use switchyard_governance::Price;
use switchyard_ir::ServiceTier;

use crate::raw::RawRate;
use crate::Issue;

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
