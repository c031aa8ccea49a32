//! Translation settings: a model's `capabilities:` (what the lane's model
//! takes where the models of its protocol differ, handed to the request
//! writer) and a pool's `translation:` (`lenient`, the default: what a lane
//! cannot carry is dropped and reported; `strict`: such a request is
//! refused with a 400 naming the fields).

use serde::Deserialize;
use switchyard_ir::{Capabilities, Effort, Efforts, Field, Fields};

use crate::facts::Fact;
use crate::Issue;
use switchyard_ir::Prefill;

/// A model's capabilities; a key left out is the common ground.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawCapabilities {
    pub adaptive_thinking: Option<bool>,
    pub effort: Option<bool>,
    pub temperature_with_top_p: Option<bool>,
    pub max_output: Option<u64>,
    pub reasoning: Option<bool>,
    pub prefill: Option<serde_yaml_ng::Value>,
    pub system_messages: Option<bool>,
    pub bedrock_betas: Option<bool>,
    pub efforts: Option<Vec<String>>,
    pub refused_while_reasoning: Option<Vec<String>>,
    pub thinks_by_default: Option<bool>,
    pub audio_input: Option<bool>,
}

/// How a pool treats a request its lane's protocol cannot fully carry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Translation {
    /// Send what can be carried; report the rest (`x-switchyard-dropped`).
    #[default]
    Lenient,
    /// Refuse the request, naming what cannot be carried.
    Strict,
}

/// The sampling parameters a model may be said to refuse while it reasons,
/// by their names in `capabilities.refused_while_reasoning` and the facts.
const SAMPLING: [Field; 8] = [
    Field::Temperature,
    Field::TopP,
    Field::TopK,
    Field::FrequencyPenalty,
    Field::PresencePenalty,
    Field::Stop,
    Field::Seed,
    Field::Logprobs,
];

/// The effort levels `names` say (`none`: thinking can be turned off), or
/// the first name that is none of them.
pub(crate) fn efforts_of(names: &[String]) -> Result<Efforts, &str> {
    let mut levels = Vec::with_capacity(names.len());
    let mut off = false;
    for name in names {
        match (name.as_str(), Effort::parse(name)) {
            ("none", _) => off = true,
            (_, Some(level)) => levels.push(level),
            _ => return Err(name),
        }
    }
    let efforts = Efforts::of(&levels);
    Ok(if off { efforts.with_off() } else { efforts })
}

/// The sampling parameters `names` say, or the first name that is none of them.
pub(crate) fn sampling_of(names: &[String]) -> Result<Fields, &str> {
    let mut fields = Vec::with_capacity(names.len());
    for name in names {
        match SAMPLING.iter().find(|field| field.as_str() == name) {
            Some(field) => fields.push(*field),
            None => return Err(name),
        }
    }
    Ok(Fields::of(&fields))
}

/// What a model's `capabilities:` say of its reasoning (the effort levels
/// it takes, what it refuses while it reasons, whether it reasons unasked),
/// each key left out taken from the facts; a name that is no level or no
/// sampling parameter is an issue at its path.
pub(crate) fn reasoning_rules(
    raw: Option<&RawCapabilities>,
    fact: Option<&Fact>,
    path: &str,
    issues: &mut Vec<Issue>,
) -> (Option<Efforts>, Fields, bool) {
    let own_efforts = raw.and_then(|r| r.efforts.as_deref()).and_then(|names| match efforts_of(names) {
        Ok(efforts) => Some(efforts),
        Err(name) => {
            issues.push(Issue::new(
                &format!("{path}.efforts"),
                format!("`{name}` is not an effort level"),
                "list levels among none, minimal, low, medium, high, xhigh and max",
            ));
            None
        }
    });
    let own_refused =
        raw.and_then(|r| r.refused_while_reasoning.as_deref()).and_then(|names| match sampling_of(names) {
            Ok(fields) => Some(fields),
            Err(name) => {
                issues.push(Issue::new(
                &format!("{path}.refused_while_reasoning"),
                format!("`{name}` is not a sampling parameter"),
                "list parameters among temperature, top_p, top_k, frequency_penalty, presence_penalty, stop and seed",
            ));
                None
            }
        });
    let efforts = own_efforts.or_else(|| fact?.efforts.as_deref().and_then(|names| efforts_of(names).ok()));
    let refused = own_refused
        .or_else(|| fact?.refused_while_reasoning.as_deref().and_then(|names| sampling_of(names).ok()))
        .unwrap_or(Fields::NONE);
    let thinks = raw.and_then(|r| r.thinks_by_default).or(fact.and_then(|f| f.thinks_by_default)).unwrap_or(false);
    (efforts, refused, thinks)
}

/// A model's capabilities: each key left out is what the bundled model
/// facts say of its wire model (`facts`), else the common ground
/// (`Capabilities::default`); its reasoning rules are [`reasoning_rules`]'.
pub(crate) fn capabilities(
    raw: Option<&RawCapabilities>,
    fact: Option<&Fact>,
    prefill: Prefill,
    (efforts, refused_while_reasoning, thinks_by_default): (Option<Efforts>, Fields, bool),
) -> Capabilities {
    let common = Capabilities::default();
    let max_output = raw.and_then(|r| r.max_output).or(fact.and_then(|f| f.max_output));
    let known = |pick: fn(&Fact) -> Option<bool>| fact.and_then(pick);
    let raw = |pick: fn(&RawCapabilities) -> Option<bool>| raw.and_then(pick);
    Capabilities {
        adaptive_thinking: raw(|r| r.adaptive_thinking)
            .or(known(|f| f.adaptive_thinking))
            .unwrap_or(common.adaptive_thinking),
        effort: raw(|r| r.effort).or(known(|f| f.effort)).unwrap_or(common.effort),
        temperature_with_top_p: raw(|r| r.temperature_with_top_p)
            .or(known(|f| f.temperature_with_top_p))
            .unwrap_or(common.temperature_with_top_p),
        max_output,
        reasoning: raw(|r| r.reasoning).or(known(|f| f.reasoning)),
        system_messages: raw(|r| r.system_messages).or(known(|f| f.system_messages)).unwrap_or(common.system_messages),
        bedrock_betas: raw(|r| r.bedrock_betas).or(known(|f| f.bedrock_betas)),
        audio_input: raw(|r| r.audio_input).or(known(|f| f.audio_input)),
        prefill,
        efforts,
        refused_while_reasoning,
        thinks_by_default,
    }
}

/// How a model continues an assistant message last: its own
/// `capabilities.prefill`, else its provider's `prefill`, else what the
/// model facts say (Claude does, wherever it is served), else its
/// protocol's default (Anthropic's models do; an OpenAI-compatible server
/// only when the operator says so).
pub(crate) fn prefill(
    own: Option<Prefill>,
    provider: Option<Prefill>,
    fact: Option<&Fact>,
    protocol: switchyard_ir::Protocol,
) -> Prefill {
    let by_fact = fact.and_then(|f| f.prefill).map(|takes| match (takes, protocol) {
        (true, switchyard_ir::Protocol::Anthropic | switchyard_ir::Protocol::Bedrock) => Prefill::Assistant,
        _ => Prefill::No,
    });
    own.or(provider).or(by_fact).unwrap_or(match protocol {
        switchyard_ir::Protocol::Anthropic => Prefill::Assistant,
        _ => Prefill::No,
    })
}

/// A `prefill:` value of a provider or model of `protocol`.
pub(crate) fn read_prefill(
    raw: Option<&serde_yaml_ng::Value>,
    protocol: switchyard_ir::Protocol,
    path: &str,
    issues: &mut Vec<Issue>,
) -> Option<Prefill> {
    use switchyard_ir::Protocol::{Anthropic, Bedrock, OpenAi};
    let raw = raw?;
    let said = match raw {
        serde_yaml_ng::Value::Bool(false) => return Some(Prefill::No),
        serde_yaml_ng::Value::Bool(true) => match protocol {
            Anthropic | Bedrock => Some(Prefill::Assistant),
            // vLLM's way: the example every OpenAI-compatible server documents.
            OpenAi => Some(Prefill::ContinueFinalMessage),
            _ => None,
        },
        serde_yaml_ng::Value::String(how) => match (how.as_str(), protocol) {
            ("assistant", Anthropic | Bedrock) => Some(Prefill::Assistant),
            ("continue_final_message", OpenAi) => Some(Prefill::ContinueFinalMessage),
            ("prefix", OpenAi) => Some(Prefill::Prefix),
            _ => None,
        },
        _ => None,
    };
    if said.is_none() {
        issues.push(Issue::new(
            path,
            format!("a {protocol} model cannot be asked to continue an assistant message this way"),
            "use false, or true on an Anthropic, Bedrock or OpenAI-compatible provider \
             (continue_final_message for vLLM, prefix for DeepSeek and Mistral)",
        ));
    }
    said
}

/// A pool's `translation:` value.
pub(crate) fn translation(raw: Option<&str>, path: &str, issues: &mut Vec<Issue>) -> Translation {
    match raw {
        None | Some("lenient") => Translation::Lenient,
        Some("strict") => Translation::Strict,
        Some(other) => {
            issues.push(Issue::new(
                path,
                format!("`{other}` is not a translation mode"),
                "use lenient (drop and report what a lane cannot carry) or strict (refuse such requests)",
            ));
            Translation::Lenient
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn prefill_is_the_models_else_its_providers_else_the_facts_else_its_protocols() {
        let text = r#"
providers:
  claude: { protocol: anthropic, base_url: "mock://" }
  aws: { protocol: bedrock, base_url: "https://bedrock-runtime.us-east-1.amazonaws.com", aws: { access_key_id: a, secret_access_key: b } }
  vllm: { protocol: openai, base_url: "http://10.0.0.5:8000", prefill: true }
  mistral: { protocol: openai, base_url: "https://api.mistral.ai", prefill: prefix }
  openai: { protocol: openai, base_url: "https://api.openai.com" }
models:
  sonnet: { provider: claude }
  refuses: { provider: claude, capabilities: { prefill: false } }
  bedrock-claude: { provider: aws, model: anthropic.claude-sonnet-4-5-20250929-v1:0 }
  bedrock-llama: { provider: aws, model: meta.llama3-70b-instruct-v1:0 }
  llama: { provider: vllm, model: meta-llama/Llama-3.1-8B-Instruct }
  small: { provider: mistral, model: mistral-small-latest }
  gpt: { provider: openai, model: gpt-4o }
  gpt-vllm-off: { provider: vllm, capabilities: { prefill: false } }
"#;
        let config = load(text, &no_env).unwrap();
        let prefill = |name: &str| config.models[config.model_index(name).unwrap()].capabilities.prefill;
        assert_eq!(prefill("sonnet"), Prefill::Assistant, "an Anthropic lane by its protocol");
        assert_eq!(prefill("refuses"), Prefill::No, "the model's own word");
        assert_eq!(prefill("bedrock-claude"), Prefill::Assistant, "Claude on Bedrock by the facts");
        assert_eq!(prefill("bedrock-llama"), Prefill::No, "another Bedrock model does not");
        assert_eq!(prefill("llama"), Prefill::ContinueFinalMessage, "vLLM's way for `true`");
        assert_eq!(prefill("small"), Prefill::Prefix);
        assert_eq!(prefill("gpt"), Prefill::No);
        assert_eq!(prefill("gpt-vllm-off"), Prefill::No);
        let wrong = "providers:\n  g: { protocol: gemini, base_url: \"mock://\", prefill: true }\n\
                     models:\n  m: { provider: g }\n";
        let err = load(wrong, &no_env).unwrap_err().to_string();
        assert!(err.contains("providers.g.prefill"), "{err}");
        let wrong = "providers:\n  o: { protocol: openai, base_url: \"mock://\", prefill: assistant }\n\
                     models:\n  m: { provider: o }\n";
        assert!(load(wrong, &no_env).unwrap_err().to_string().contains("providers.o.prefill"));
    }

    #[test]
    fn capabilities_and_translation_are_read_with_defaults() {
        let text = r#"
providers:
  claude: { protocol: anthropic, base_url: "mock://" }
models:
  opus: { provider: claude, capabilities: { adaptive_thinking: true, effort: true, system_messages: true } }
  sonnet: { provider: claude, capabilities: { temperature_with_top_p: false } }
  plain: { provider: claude }
pools:
  exact: { translation: strict, members: [{ model: opus }] }
  loose: { members: [{ model: sonnet }] }
"#;
        let config = load(text, &no_env).unwrap();
        let model = |name: &str| config.models[config.model_index(name).unwrap()].capabilities;
        assert_eq!(
            model("opus"),
            Capabilities {
                adaptive_thinking: true,
                effort: true,
                temperature_with_top_p: true,
                max_output: None,
                reasoning: None,
                system_messages: true,
                prefill: Prefill::Assistant,
                ..Capabilities::default()
            }
        );
        let claude = Capabilities { prefill: Prefill::Assistant, ..Capabilities::default() };
        assert_eq!(model("sonnet"), Capabilities { temperature_with_top_p: false, ..claude });
        assert_eq!(model("plain"), claude);
        let pool = |name: &str| config.pools[config.pool_index(name).unwrap()].translation;
        assert_eq!(pool("exact"), Translation::Strict);
        assert_eq!(pool("loose"), Translation::Lenient);
    }

    #[test]
    fn the_bundled_facts_fill_what_a_model_leaves_out_field_by_field() {
        let text = r#"
providers:
  claude: { protocol: anthropic, base_url: "mock://" }
models:
  sonnet: { provider: claude, model: claude-sonnet-4-5-20250929 }
  mine: { provider: claude, model: claude-sonnet-4-5, context_window: 1000000, capabilities: { temperature_with_top_p: true, max_output: 1000 } }
  unknown: { provider: claude, model: wire-anthropic }
"#;
        let config = load(text, &no_env).unwrap();
        let model = |name: &str| &config.models[config.model_index(name).unwrap()];
        assert_eq!(model("sonnet").context_window, Some(200_000));
        assert_eq!(
            model("sonnet").capabilities,
            Capabilities {
                temperature_with_top_p: false,
                max_output: Some(64_000),
                reasoning: Some(true),
                prefill: Prefill::Assistant,
                bedrock_betas: Some(true),
                audio_input: Some(false),
                ..Capabilities::default()
            }
        );
        assert_eq!(model("mine").context_window, Some(1_000_000));
        assert_eq!(
            model("mine").capabilities,
            Capabilities {
                temperature_with_top_p: true,
                max_output: Some(1000),
                reasoning: Some(true),
                prefill: Prefill::Assistant,
                bedrock_betas: Some(true),
                audio_input: Some(false),
                ..Capabilities::default()
            }
        );
        assert_eq!(model("unknown").context_window, None);
        assert_eq!(
            model("unknown").capabilities,
            Capabilities { prefill: Prefill::Assistant, ..Capabilities::default() }
        );
        assert_eq!(config.model_facts.matched, 2);
    }

    /// What the facts say of the newer Claude models: Opus 4.8 on Bedrock
    /// takes system messages inside the conversation and the caller's
    /// betas, Sonnet 5 no system message, a Bedrock model that is no
    /// Claude is not said either way (its name decides), and the
    /// operator's word overrides the facts'.
    #[test]
    fn system_messages_and_bedrock_betas_come_from_the_facts() {
        let text = r#"
providers:
  aws: { protocol: bedrock, base_url: "mock://" }
  claude: { protocol: anthropic, base_url: "mock://" }
models:
  opus: { provider: aws, model: us.anthropic.claude-opus-4-8 }
  sonnet: { provider: claude, model: claude-sonnet-5 }
  nova: { provider: aws, model: amazon.nova-pro-v1:0 }
  profile: { provider: aws, model: my-profile, capabilities: { bedrock_betas: true, system_messages: true } }
  plain: { provider: aws, model: us.anthropic.claude-opus-4-8, capabilities: { bedrock_betas: false, system_messages: false } }
"#;
        let config = load(text, &no_env).unwrap();
        let model = |name: &str| config.models[config.model_index(name).unwrap()].capabilities;
        assert_eq!((model("opus").system_messages, model("opus").bedrock_betas), (true, Some(true)));
        assert_eq!(model("opus").prefill, Prefill::No, "Claude 4.6 and later take no prefill");
        assert!(!model("sonnet").system_messages);
        assert_eq!((model("nova").system_messages, model("nova").bedrock_betas), (false, None));
        assert_eq!((model("profile").system_messages, model("profile").bedrock_betas), (true, Some(true)));
        assert_eq!((model("plain").system_messages, model("plain").bedrock_betas), (false, Some(false)));
    }

    #[test]
    fn reasoning_rules_come_from_the_model_else_the_facts() {
        let text = r#"
providers:
  openai: { protocol: openai, base_url: "mock://" }
models:
  mini: { provider: openai, model: o4-mini-2025-04-16 }
  newer: { provider: openai, model: gpt-5.1 }
  mine: { provider: openai, model: o4-mini, capabilities: { efforts: [none, high], refused_while_reasoning: [stop], thinks_by_default: false } }
"#;
        let config = load(text, &no_env).unwrap();
        let model = |name: &str| config.models[config.model_index(name).unwrap()].capabilities;
        let mini = model("mini");
        assert_eq!(mini.efforts, Some(Efforts::of(&[Effort::Low, Effort::Medium, Effort::High])));
        assert!(mini.thinks_by_default && mini.refused_while_reasoning.has(Field::Temperature));
        assert!(!mini.refused_while_reasoning.has(Field::Stop));
        let newer = model("newer");
        assert!(newer.efforts.is_some_and(Efforts::takes_off) && !newer.thinks_by_default);
        let mine = model("mine");
        assert_eq!(mine.efforts, Some(Efforts::of(&[Effort::High]).with_off()));
        assert_eq!(mine.refused_while_reasoning, Fields::of(&[Field::Stop]));
        assert!(!mine.thinks_by_default);
        let wrong = "providers:\n  o: { protocol: openai, base_url: \"mock://\" }\nmodels:\n  \
                     m: { provider: o, capabilities: { efforts: [turbo], refused_while_reasoning: [logit_bias] } }\n";
        let err = load(wrong, &no_env).unwrap_err();
        let paths: Vec<&str> = err.0.iter().map(|issue| issue.path.as_str()).collect();
        assert_eq!(paths, ["models.m.capabilities.efforts", "models.m.capabilities.refused_while_reasoning"]);
    }

    #[test]
    fn bad_values_are_named_with_their_fix() {
        let text = r#"
providers:
  p: { protocol: anthropic, base_url: "mock://" }
models:
  m: { provider: p }
pools:
  a: { translation: exact, members: [{ model: m }] }
"#;
        let err = load(text, &no_env).unwrap_err();
        assert_eq!(err.0.len(), 1);
        assert_eq!(err.0[0].path, "pools.a.translation");
        assert!(err.0[0].fix.contains("strict"));
        let text = "providers:\n  p: { protocol: anthropic, base_url: \"mock://\" }\nmodels:\n  m: { provider: p, capabilities: { thinks: true } }\n";
        let err = load(text, &no_env).unwrap_err();
        assert!(err.0[0].path.starts_with("models.m.capabilities"), "{}", err.0[0]);
    }
}
