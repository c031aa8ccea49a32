//! The `models:` wing: each lane (a provider and its wire model), with its
//! billing, operation, and the capabilities its model facts and config
//! give it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

use crate::issue::{list, Issue};
use crate::{facts, translation, Capabilities, Operation, Provider};

/// A lane: a provider plus the upstream's wire model.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    pub provider: String,
    pub model: Option<String>,
    pub context_window: Option<u64>,
    pub max_concurrent: Option<u32>,
    pub billing: Option<String>,
    pub tier: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// What the model takes where models of its protocol differ.
    pub capabilities: Option<translation::RawCapabilities>,
    /// What it serves: chat (the default), embed, rerank, moderation,
    /// image, speech or transcription.
    pub operation: Option<String>,
}

/// How a lane is paid for (routing prefers subscription, then pay-as-you-go, then free).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Billing {
    /// A flat-fee plan: zero marginal cost within quota.
    Subscription,
    /// Metered per token.
    PayAsYouGo,
    /// Free tier.
    Free,
}

impl Billing {
    /// The config and header name.
    pub fn as_str(self) -> &'static str {
        match self {
            Billing::Subscription => "subscription",
            Billing::PayAsYouGo => "pay_as_you_go",
            Billing::Free => "free",
        }
    }
}

/// A lane: a provider plus the upstream's wire model.
#[derive(Debug, Clone)]
pub struct Model {
    /// Config name (what callers and pools use).
    pub name: Arc<str>,
    /// Index into `Config::providers`.
    pub provider: usize,
    /// The model sent upstream.
    pub wire_model: Arc<str>,
    /// Context window in tokens, when known.
    pub context_window: Option<u64>,
    /// Concurrency cap.
    pub max_concurrent: Option<u32>,
    /// Billing model.
    pub billing: Billing,
    /// Free-form size label.
    pub tier: Option<Arc<str>>,
    /// Free-form labels.
    pub tags: Vec<Arc<str>>,
    /// What the model takes where models of its protocol differ.
    pub capabilities: Capabilities,
    /// What the lane serves.
    pub operation: Operation,
    /// The bundled model facts' entry its wire model found, if any.
    pub fact: Option<Arc<str>>,
}

/// Which bundled model facts a config uses (boot reports it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFacts {
    /// The snapshot's date.
    pub snapshot: &'static str,
    /// Models it knows.
    pub known: usize,
    /// The config's models it gave facts to.
    pub matched: usize,
}

/// Every `models:` entry, in name order: a model's index is its place here.
pub(crate) fn validate(
    raw: &BTreeMap<String, RawModel>,
    providers: &[Provider],
    issues: &mut Vec<Issue>,
) -> Vec<Model> {
    let provider_names: Vec<&str> = providers.iter().map(|p| &*p.name).collect();
    raw.iter().map(|(name, model)| self::model(name, model, &provider_names, providers, issues)).collect()
}

/// One lane at `models.<name>`: its provider found by name, its operation
/// one that provider's protocol serves, its capabilities from the config
/// over the bundled facts of its wire model.
fn model(
    name: &str,
    model: &RawModel,
    provider_names: &[&str],
    providers: &[Provider],
    issues: &mut Vec<Issue>,
) -> Model {
    let path = format!("models.{name}");
    let provider = provider_names.iter().position(|p| *p == model.provider).unwrap_or_else(|| {
        issues.push(Issue::new(
            &format!("{path}.provider"),
            format!("provider `{}` is not defined", model.provider),
            format!("define providers.{} or use one of: {}", model.provider, list(provider_names)),
        ));
        0
    });
    let billing = match model.billing.as_deref() {
        None | Some("pay_as_you_go") => Billing::PayAsYouGo,
        Some("subscription") => Billing::Subscription,
        Some("free") => Billing::Free,
        Some(other) => {
            issues.push(Issue::new(
                &format!("{path}.billing"),
                format!("`{other}` is not a billing model"),
                "use subscription, pay_as_you_go or free",
            ));
            Billing::PayAsYouGo
        }
    };
    if model.max_concurrent == Some(0) {
        issues.push(Issue::new(
            &format!("{path}.max_concurrent"),
            "max_concurrent is 0, so the lane could never serve",
            "remove it (unlimited) or set it to 1 or more",
        ));
    }
    if model.context_window == Some(0) {
        issues.push(Issue::new(
            &format!("{path}.context_window"),
            "context_window is 0",
            "remove it or give the model's window in tokens",
        ));
    }
    let operation = match model.operation.as_deref() {
        None => Operation::Chat,
        Some(text) => Operation::from_name(text).filter(|op| op.lane() == *op).unwrap_or_else(|| {
            issues.push(Issue::new(
                &format!("{path}.operation"),
                format!("`{text}` is not an operation a lane serves"),
                "use chat, embed, rerank, moderation, image, speech, transcription, realtime or live (chat lanes count tokens)",
            ));
            Operation::Chat
        }),
    };
    if let Some(protocol) = providers.get(provider).map(|p| p.protocol) {
        if !operation.served_by(protocol) {
            issues.push(Issue::new(
                &format!("{path}.operation"),
                format!("a {protocol} provider does not serve {operation}"),
                format!("serve {operation} from a provider of a protocol that has it, or change the operation"),
            ));
        }
    }
    if model.capabilities.as_ref().is_some_and(|c| c.max_output == Some(0)) {
        issues.push(Issue::new(
            &format!("{path}.capabilities.max_output"),
            "max_output is 0",
            "remove it or give the most output tokens the model allows",
        ));
    }
    let wire_model = model.model.as_deref().unwrap_or(name);
    let fact = facts::lookup(wire_model);
    let prefill = providers.get(provider).map_or(switchyard_ir::Prefill::No, |p| {
        let own = model.capabilities.as_ref().and_then(|c| c.prefill.as_ref());
        let own = translation::read_prefill(own, p.protocol, &format!("{path}.capabilities.prefill"), issues);
        translation::prefill(own, p.prefill, fact, p.protocol)
    });
    Model {
        name: Arc::from(name),
        provider,
        wire_model: Arc::from(wire_model),
        context_window: model.context_window.or(fact.and_then(|f| f.context_window)),
        max_concurrent: model.max_concurrent,
        billing,
        tier: model.tier.as_deref().map(Arc::from),
        tags: model.tags.iter().map(|t| Arc::from(t.as_str())).collect(),
        capabilities: translation::capabilities(
            model.capabilities.as_ref(),
            fact,
            prefill,
            translation::reasoning_rules(model.capabilities.as_ref(), fact, &format!("{path}.capabilities"), issues),
        ),
        fact: fact.map(|f| Arc::from(f.id.as_str())),
        operation,
    }
}

impl ModelFacts {
    /// How many of `models` the bundled facts know.
    pub(crate) fn of(models: &[Model]) -> ModelFacts {
        ModelFacts {
            snapshot: facts::snapshot().snapshot.as_str(),
            known: facts::snapshot().models.len(),
            matched: models.iter().filter(|model| model.fact.is_some()).count(),
        }
    }
}
