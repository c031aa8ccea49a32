//! Rate cards: the operator's `rate_card:` and a group's own, each entry
//! naming a lane there is and pricing it in its operation's units.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::governance::RawGroup;
use crate::issue::{list, Issue};
use crate::{card, facts, raw, Adhoc, AuthMode, Config, Group, Model, Operation, Provider};

/// Prices: USD per million tokens, and per unit of what an operation
/// bills beyond tokens; and what changes them (tiers by input size, a
/// batch discount, service-tier factors).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rate {
    /// Uncached input.
    pub input_utok: f64,
    /// Output.
    pub output_utok: f64,
    /// Cache reads (defaults to input).
    pub cache_read_utok: f64,
    /// Cache writes that live five minutes (defaults to input).
    pub cache_write_utok: f64,
    /// Cache writes that live an hour (absent: as five-minute writes).
    pub cache_write_1h_utok: Option<f64>,
    /// Reasoning tokens (absent: as output).
    pub reasoning_utok: Option<f64>,
    /// Audio input (absent: as input).
    pub audio_input_utok: Option<f64>,
    /// Audio output (absent: as output).
    pub audio_output_utok: Option<f64>,
    /// Image input (absent: as input).
    pub image_input_utok: Option<f64>,
    /// Image output (absent: as output).
    pub image_output_utok: Option<f64>,
    /// Per request.
    pub per_request_usd: f64,
    /// Per rerank search unit.
    pub per_search_unit_usd: f64,
    /// Per generated image.
    pub per_image_usd: f64,
    /// Per million characters of speech input.
    pub per_million_chars_usd: f64,
    /// Per minute of transcribed audio.
    pub per_minute_usd: f64,
    /// Tiers, the batch discount and service-tier factors.
    pub beyond: card::Beyond,
}

impl Rate {
    /// Its flat prices (what a request under every tier's threshold, served
    /// at the standard tier and not in a batch, costs).
    pub fn flat(&self) -> switchyard_governance::Price {
        switchyard_governance::Price {
            input_utok: self.input_utok,
            output_utok: self.output_utok,
            cache_read_utok: self.cache_read_utok,
            cache_write_utok: self.cache_write_utok,
            cache_write_1h_utok: self.cache_write_1h_utok,
            reasoning_utok: self.reasoning_utok,
            audio_input_utok: self.audio_input_utok,
            audio_output_utok: self.audio_output_utok,
            image_input_utok: self.image_input_utok,
            image_output_utok: self.image_output_utok,
            per_request_usd: self.per_request_usd,
            per_unit_usd: self.per_unit_usd(),
        }
    }

    /// The whole card: its flat prices and what changes them.
    pub fn card(&self) -> switchyard_governance::card::Card {
        switchyard_governance::card::Card {
            base: self.flat(),
            tiers: self.beyond.tiers.clone(),
            batch_discount: self.beyond.batch_discount,
            service_tiers: self.beyond.service_tiers,
        }
    }

    /// USD per billed unit of the lane's operation: a search unit, an
    /// image, a character of speech, a second of audio (config proves a row
    /// sets only its own operation's unit).
    pub fn per_unit_usd(&self) -> f64 {
        self.per_search_unit_usd + self.per_image_usd + self.per_million_chars_usd / 1e6 + self.per_minute_usd / 60.0
    }
}

/// Whether `name` is what a `rate_card` entry may price: a defined model,
/// or an ad-hoc lane (`provider/model` for one wire model, `provider/*`
/// for every one) a provider opened.
fn priceable(name: &str, models: &[Model], providers: &[Provider]) -> bool {
    models.iter().any(|m| &*m.name == name)
        || name.split_once('/').is_some_and(|(provider, wire)| {
            providers.iter().find(|p| &*p.name == provider).is_some_and(|p| match &p.adhoc {
                Adhoc::Off => false,
                Adhoc::Any => true,
                Adhoc::Models(models) => wire == "*" || models.iter().any(|m| &**m == wire),
            })
        })
}

/// One rate card entry (the operator's `rate_card.<name>`, or a group's)
/// at `path`: it names a lane there is, prices in its operation's units,
/// and its figures hold ([`card::entry`]).
fn rate_entry(
    name: &str,
    rate: &raw::RawRate,
    path: &str,
    models: &[Model],
    providers: &[Provider],
    issues: &mut Vec<Issue>,
) -> Rate {
    if !priceable(name, models, providers) {
        let model_names: Vec<&str> = models.iter().map(|m| &*m.name).collect();
        issues.push(Issue::new(
            path,
            format!("model `{name}` is not defined"),
            format!(
                "price a defined model ({}), or an ad-hoc lane as provider/model or provider/*",
                list(&model_names)
            ),
        ));
    }
    let operation = models.iter().find(|m| &*m.name == name).map_or(Operation::Chat, |m| m.operation);
    check_unit_prices(path, rate, operation, issues);
    card::entry(rate, path, issues)
}

/// A group's own rate card sent over the admin API (`path` its key in the
/// body): each entry checked against `config` (the running one) as the
/// config file's would be, or every problem with its fix.
pub fn group_rate_card(
    config: &Config,
    entries: &BTreeMap<String, serde_json::Value>,
    path: &str,
) -> Result<BTreeMap<Arc<str>, Rate>, Vec<Issue>> {
    let mut issues = Vec::new();
    let mut card = BTreeMap::new();
    for (name, value) in entries {
        let at = format!("{path}.{name}");
        match serde_json::from_value::<raw::RawRate>(value.clone()) {
            Ok(rate) => {
                let entry = rate_entry(name, &rate, &at, &config.models, &config.providers, &mut issues);
                card.insert(Arc::from(name.as_str()), entry);
            }
            Err(err) => issues.push(Issue::new(
                &at,
                format!("not a rate card entry: {err}"),
                "write the fields of a rate_card entry, e.g. {\"input_utok\": 3, \"output_utok\": 15}",
            )),
        }
    }
    if issues.is_empty() {
        Ok(card)
    } else {
        Err(issues)
    }
}

/// A row's unit prices are those its operation bills: a search unit for
/// rerank, an image, a million characters of speech, a minute of audio.
fn check_unit_prices(path: &str, rate: &raw::RawRate, operation: Operation, issues: &mut Vec<Issue>) {
    let units = [
        ("per_search_unit_usd", rate.per_search_unit_usd, Operation::Rerank),
        ("per_image_usd", rate.per_image_usd, Operation::Image),
        ("per_million_chars_usd", rate.per_million_chars_usd, Operation::Speech),
        ("per_minute_usd", rate.per_minute_usd, Operation::Transcription),
    ];
    for (key, value, bills) in units {
        if value.is_some() && bills != operation {
            issues.push(Issue::new(
                &format!("{path}.{key}"),
                format!("a {operation} lane bills no {key}; it prices {bills}"),
                "price the lane in the units its operation bills (tokens, per_request_usd, or its own unit)",
            ));
        }
    }
}

/// The operator's `rate_card:`, each entry checked like a group's.
pub(crate) fn card(
    raw: &BTreeMap<String, raw::RawRate>,
    models: &[Model],
    providers: &[Provider],
    issues: &mut Vec<Issue>,
) -> HashMap<Arc<str>, Rate> {
    let mut rate_card = HashMap::new();
    for (name, rate) in raw {
        let entry = rate_entry(name, rate, &format!("rate_card.{name}"), models, providers, issues);
        rate_card.insert(Arc::from(name.as_str()), entry);
    }
    rate_card
}

/// A group's own card: its tenant's price for the lanes it names, checked
/// like the operator's.
pub(crate) fn group_cards(
    groups: &mut [Group],
    raw: &BTreeMap<String, RawGroup>,
    models: &[Model],
    providers: &[Provider],
    issues: &mut Vec<Issue>,
) {
    for group in groups {
        let Some(entries) = raw.get(&*group.name).and_then(|g| g.rate_card.as_ref()) else { continue };
        for (name, rate) in entries {
            let path = format!("groups.{}.rate_card.{name}", group.name);
            let entry = rate_entry(name, rate, &path, models, providers, issues);
            group.rate_card.insert(Arc::from(name.as_str()), entry);
        }
    }
}

/// What a card leaves unpriced: a kind of price the model's vendor bills
/// that its entry leaves out is billed at another kind's rate (a long
/// prompt at the short one's); with keys, a lane with no entry costs
/// nothing against budgets.
pub(crate) fn unpriced(
    raw: &BTreeMap<String, raw::RawRate>,
    rate_card: &HashMap<Arc<str>, Rate>,
    models: &[Model],
    auth: AuthMode,
    warnings: &mut Vec<Issue>,
) {
    for model in models {
        let (Some(entry), Some(bills)) = (
            raw.get(&*model.name),
            model.fact.as_deref().and_then(|id| facts::snapshot().models.iter().find(|f| f.id == id)?.bills.as_ref()),
        ) else {
            continue;
        };
        for kind in card::unpriced_kinds(entry, bills) {
            warnings.push(Issue::new(
                &format!("rate_card.{}", model.name),
                format!(
                    "its model's vendor bills {kind} at a price of its own ({}'s pricing page), which the entry leaves out",
                    model.fact.as_deref().unwrap_or_default()
                ),
                format!("add {} from the vendor's pricing page", card::key_of(kind)),
            ));
        }
    }
    if auth == AuthMode::Keys {
        for model in models {
            if !rate_card.contains_key(&model.name) {
                warnings.push(Issue::new(
                    &format!("models.{}", model.name),
                    "the lane has no rate_card entry, so what it serves costs nothing against budgets",
                    format!("add rate_card.{} with input_utok and output_utok", model.name),
                ));
            }
        }
    }
}
