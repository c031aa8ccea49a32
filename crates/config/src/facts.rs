//! Model facts from a bundled snapshot (`model_facts.json`): context
//! window, most output, and what a model takes where models of one
//! protocol differ (adaptive thinking, an effort level, temperature with
//! `top_p`). A model's own `context_window:` and `capabilities:` keys
//! override it field by field; a wire model the snapshot does not know
//! gets only what the config says. So context-length failover and the
//! translation's capabilities work without hand-written lists.
//!
//! Prices are deliberately not taken from it: a stale price would bill
//! silently, where an unpriced lane is refused to budgeted keys loudly.

use std::sync::OnceLock;

use serde::Deserialize;

/// The snapshot as bundled.
#[derive(Debug, Default, Deserialize)]
pub struct Snapshot {
    /// When it was taken (what boot reports).
    pub snapshot: String,
    /// Where its facts come from.
    pub source: String,
    /// One entry per model family, named as the vendor's API names it.
    pub models: Vec<Fact>,
}

/// What the snapshot knows of one model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fact {
    /// The model's id without a date, version or region (`claude-sonnet-4-5`).
    pub id: String,
    /// Context window in tokens.
    pub context_window: Option<u64>,
    /// The most output tokens a reply may have.
    pub max_output: Option<u64>,
    /// Whether it reasons (thinks) at all.
    pub reasoning: Option<bool>,
    /// Takes adaptive thinking.
    pub adaptive_thinking: Option<bool>,
    /// Takes an effort level.
    pub effort: Option<bool>,
    /// Takes `temperature` and `top_p` together.
    pub temperature_with_top_p: Option<bool>,
    /// Continues an assistant message that ends the conversation (Claude:
    /// Anthropic's "Prefill Claude's response" documentation).
    pub prefill: Option<bool>,
    /// Takes a system message inside the conversation (Anthropic's
    /// "Mid-conversation system messages" lists the Claude models).
    pub system_messages: Option<bool>,
    /// Takes the caller's Anthropic betas in its body on Bedrock
    /// (`additionalModelRequestFields.anthropic_beta`: AWS's Claude
    /// request parameters list it).
    pub bedrock_betas: Option<bool>,
    /// The effort levels it takes (`none`: thinking can be turned off),
    /// where fewer than its protocol's.
    pub efforts: Option<Vec<String>>,
    /// The sampling parameters it refuses while it reasons.
    pub refused_while_reasoning: Option<Vec<String>>,
    /// Whether it reasons when a request says nothing of reasoning.
    pub thinks_by_default: Option<bool>,
    /// Whether it takes audio input (the model's page lists its input
    /// modalities).
    pub audio_input: Option<bool>,
    /// The most images one call to it makes (an image model: Imagen 4
    /// makes 4, Nova Canvas 5, Stability's models 1); a caller's larger
    /// count is split into calls.
    pub max_images: Option<u32>,
    /// Whether it takes a negative prompt (an image model: Imagen after
    /// imagen-3.0-generate-002 does not, on the Gemini API).
    pub negative_prompt: Option<bool>,
    /// The kinds of price it bills beyond plain input and output, as its
    /// vendor's pricing page lists them (`cache_read`, `cache_write`,
    /// `cache_write_1h`, `reasoning`, `audio_input`, `long_context`,
    /// `batch`, `flex`, `priority`): `switchyard check` warns where its rate
    /// card entry leaves one out.
    pub bills: Option<Vec<String>>,
    /// Where each of these facts comes from, by the fact's name (`limits`
    /// for the context window, most output and whether it reasons, which
    /// the model's own page gives together): the vendor's page that says
    /// it. Every fact an entry states has one (a test holds it).
    #[serde(default)]
    pub sources: std::collections::BTreeMap<String, String>,
}

impl Fact {
    /// The facts this entry states, each by the name its source is kept
    /// under in `sources`.
    pub fn stated(&self) -> Vec<&'static str> {
        let flags = [
            ("limits", self.context_window.is_some() || self.max_output.is_some() || self.reasoning.is_some()),
            ("adaptive_thinking", self.adaptive_thinking.is_some()),
            ("effort", self.effort.is_some()),
            ("temperature_with_top_p", self.temperature_with_top_p.is_some()),
            ("prefill", self.prefill.is_some()),
            ("system_messages", self.system_messages.is_some()),
            ("bedrock_betas", self.bedrock_betas.is_some()),
            ("efforts", self.efforts.is_some()),
            ("refused_while_reasoning", self.refused_while_reasoning.is_some()),
            ("thinks_by_default", self.thinks_by_default.is_some()),
            ("audio_input", self.audio_input.is_some()),
            ("max_images", self.max_images.is_some()),
            ("negative_prompt", self.negative_prompt.is_some()),
            ("bills", self.bills.is_some()),
        ];
        flags.into_iter().filter(|(_, said)| *said).map(|(name, _)| name).collect()
    }
}

/// The bundled snapshot, read once. It is checked by a test: should it not
/// read, no model has facts (never a failed boot).
pub fn snapshot() -> &'static Snapshot {
    static SNAPSHOT: OnceLock<Snapshot> = OnceLock::new();
    SNAPSHOT.get_or_init(|| serde_json::from_str(include_str!("model_facts.json")).unwrap_or_default())
}

/// What the facts alone say `fact`'s models take on a lane of `protocol`
/// (no `capabilities:` of their own): the translation's view, for tables
/// and tests that name each drop's fact.
pub fn capabilities_of(fact: &Fact, protocol: switchyard_ir::Protocol) -> switchyard_ir::Capabilities {
    let mut issues = Vec::new();
    let rules = crate::translation::reasoning_rules(None, Some(fact), "", &mut issues);
    let prefill = crate::translation::prefill(None, None, Some(fact), protocol);
    crate::translation::capabilities(None, Some(fact), prefill, rules)
}

/// Region and vendor prefixes of Bedrock model ids (`us.anthropic.`).
const BEDROCK_PREFIXES: [&str; 14] = [
    "us.",
    "eu.",
    "apac.",
    "global.",
    "jp.",
    "au.",
    "anthropic.",
    "amazon.",
    "cohere.",
    "meta.",
    "mistral.",
    "openai.",
    "xai.",
    "stability.",
];

/// What the snapshot knows of `wire_model`, as a provider's API names it:
/// a dated or versioned id (`claude-sonnet-4-5-20250929`,
/// `anthropic.claude-sonnet-4-5-20250929-v1:0`, `models/gemini-2.5-pro`,
/// `command-a-03-2025`) finds its family's entry; a later model of the
/// family (`claude-opus-4-7`) does not find an earlier one's.
pub fn lookup(wire_model: &str) -> Option<&'static Fact> {
    lookup_in(snapshot(), wire_model)
}

fn lookup_in<'a>(snapshot: &'a Snapshot, wire_model: &str) -> Option<&'a Fact> {
    let lower = wire_model.to_ascii_lowercase();
    let mut name = lower.rsplit('/').next().unwrap_or(&lower);
    while let Some(rest) = BEDROCK_PREFIXES.iter().find_map(|prefix| name.strip_prefix(prefix)) {
        name = rest;
    }
    snapshot
        .models
        .iter()
        .filter(|fact| name.strip_prefix(fact.id.as_str()).is_some_and(is_variant_suffix))
        .max_by_key(|fact| fact.id.len())
}

/// What may follow a family's id in one of its models' ids: nothing, a
/// date or build (`-20250929`, `-03-2025`, `-001`: two digits or more), a
/// version (`-v1`, `-1:0`, `@20240620`, `:0`), or a release channel.
fn is_variant_suffix(rest: &str) -> bool {
    if rest.is_empty() || rest.starts_with('@') || rest.starts_with(':') {
        return true;
    }
    let Some(rest) = rest.strip_prefix('-') else { return false };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    digits >= 2
        || (digits == 1 && rest.as_bytes().get(1) == Some(&b':'))
        || (rest.starts_with('v') && rest.as_bytes().get(1).is_some_and(u8::is_ascii_digit))
        || ["latest", "preview", "exp"].iter().any(|channel| rest.starts_with(channel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_snapshot_reads_and_names_each_family_once() {
        let snapshot = snapshot();
        assert!(!snapshot.snapshot.is_empty() && snapshot.models.len() > 30, "{snapshot:?}");
        let mut ids: Vec<&str> = snapshot.models.iter().map(|fact| fact.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), snapshot.models.len(), "an id is listed twice");
        // Every text model's limits are known; an image model's are its images.
        let text = snapshot.models.iter().filter(|fact| fact.max_images.is_none());
        assert!(text.clone().all(|fact| fact.context_window.is_some() && fact.max_output.is_some()));
        assert!(text.count() > 30);
    }

    /// Every fact an entry states names the page it comes from (and no
    /// source names a fact the entry does not state), and reads as the
    /// config would read it.
    #[test]
    fn every_fact_names_its_source() {
        for fact in &snapshot().models {
            let stated = fact.stated();
            for name in &stated {
                let source = fact.sources.get(*name);
                assert!(source.is_some(), "{}: `{name}` has no source", fact.id);
                assert!(source.is_some_and(|s| s.starts_with("https://")), "{}: {name}: {source:?}", fact.id);
            }
            for name in fact.sources.keys() {
                assert!(stated.contains(&name.as_str()), "{}: a source for `{name}`, which it does not state", fact.id);
            }
            if let Some(names) = &fact.efforts {
                assert!(crate::translation::efforts_of(names).is_ok(), "{}: {names:?}", fact.id);
            }
            if let Some(names) = &fact.refused_while_reasoning {
                assert!(crate::translation::sampling_of(names).is_ok(), "{}: {names:?}", fact.id);
            }
            // A kind a model bills is one a rate card entry can price.
            for kind in fact.bills.iter().flatten() {
                assert!(crate::card::KINDS.contains(&kind.as_str()), "{}: {kind}", fact.id);
            }
        }
    }

    /// The check itself: an entry that states a fact without its source,
    /// or a source without its fact, fails it.
    #[test]
    fn a_fact_without_its_source_is_caught() {
        let read = |text: &str| serde_json::from_str::<Fact>(text).unwrap();
        let unsourced =
            read(r#"{"id": "m", "context_window": 1000, "prefill": true, "sources": {"limits": "https://x"}}"#);
        let missing: Vec<&str> =
            unsourced.stated().into_iter().filter(|name| !unsourced.sources.contains_key(*name)).collect();
        assert_eq!(missing, ["prefill"]);
        let stray = read(r#"{"id": "m", "sources": {"system_messages": "https://x"}}"#);
        assert!(stray.stated().is_empty() && !stray.sources.is_empty());
    }

    /// Claude models that take a system message inside the conversation,
    /// as Anthropic's page lists them, and Claude on Bedrock's betas.
    #[test]
    fn claude_facts_say_system_messages_and_bedrock_betas() {
        let fact = |wire: &str| lookup(wire).unwrap_or_else(|| panic!("{wire}"));
        for wire in ["claude-opus-4-8", "claude-opus-5", "claude-fable-5", "claude-mythos-5", "claude-fable-5-1"] {
            assert_eq!(fact(wire).system_messages, Some(true), "{wire}");
        }
        assert_eq!(fact("claude-sonnet-5").system_messages, Some(false), "not on Sonnet 5");
        assert_eq!(fact("claude-sonnet-4-5-20250929").system_messages, None, "older: the common ground");
        assert_eq!(fact("us.anthropic.claude-haiku-4-5-20251001-v1:0").bedrock_betas, Some(true));
        assert_eq!(fact("amazon.nova-pro-v1:0").bedrock_betas, None);
        assert_eq!(fact("claude-opus-4-6").prefill, Some(false), "Claude 4.6 refuses a prefill");
        assert_eq!(lookup("claude-opus-5-5"), None, "a later model is not Opus 5");
    }

    /// Which models take audio input, as their pages list their input
    /// modalities: OpenAI's audio models and Gemini do; gpt-4o, gpt-5, the
    /// o-series, Claude, Command and Nova 1 do not.
    #[test]
    fn audio_input_is_the_audio_models_and_geminis() {
        let audio = |wire: &str| lookup(wire).and_then(|fact| fact.audio_input);
        for wire in ["gpt-4o-audio-preview", "gpt-4o-audio-preview-2025-06-03", "gpt-4o-mini-audio-preview-2024-12-17"]
        {
            assert_eq!(audio(wire), Some(true), "{wire}");
        }
        for wire in ["models/gemini-2.5-flash", "gemini-2.0-flash-lite-001", "gemini-3-pro-preview"] {
            assert_eq!(audio(wire), Some(true), "{wire}");
        }
        for wire in ["gpt-4o", "gpt-4o-mini-2024-07-18", "gpt-5", "o4-mini", "claude-sonnet-4-5", "command-a-03-2025"] {
            assert_eq!(audio(wire), Some(false), "{wire}");
        }
        assert_eq!(audio("us.anthropic.claude-opus-4-8"), Some(false), "Claude on Bedrock");
        assert_eq!(audio("amazon.nova-pro-v1:0"), Some(false));
        assert_eq!(audio("openai.gpt-oss-120b-1:0"), None, "not said: the lane sends what the caller sent");
    }

    #[test]
    fn a_wire_model_finds_its_family_whatever_the_provider_calls_it() {
        let id = |wire: &str| lookup(wire).map(|fact| fact.id.as_str());
        assert_eq!(id("claude-sonnet-4-5"), Some("claude-sonnet-4-5"));
        assert_eq!(id("claude-sonnet-4-5-20250929"), Some("claude-sonnet-4-5"));
        assert_eq!(id("us.anthropic.claude-sonnet-4-5-20250929-v1:0"), Some("claude-sonnet-4-5"));
        assert_eq!(id("claude-opus-4-1-20250805"), Some("claude-opus-4-1"));
        assert_eq!(id("claude-opus-4-20250514"), Some("claude-opus-4"));
        assert_eq!(id("models/gemini-2.5-flash-lite"), Some("gemini-2.5-flash-lite"));
        assert_eq!(id("gemini-2.5-flash-preview-05-20"), Some("gemini-2.5-flash"));
        assert_eq!(id("gpt-4o-mini-2024-07-18"), Some("gpt-4o-mini"));
        assert_eq!(id("GPT-4o"), Some("gpt-4o"));
        assert_eq!(id("command-a-03-2025"), Some("command-a"));
        assert_eq!(id("amazon.nova-pro-v1:0"), Some("nova-pro-v1"));
        assert_eq!(id("openai.gpt-oss-120b-1:0"), Some("gpt-oss-120b"));
        assert_eq!(id("gpt-5.1-2025-11-13"), Some("gpt-5.1"));
        assert_eq!(id("gpt-5-pro"), Some("gpt-5-pro"));
        assert_eq!(id("o4-mini-2025-04-16"), Some("o4-mini"));
        // A later model of a family is not an earlier one.
        assert_eq!(id("claude-opus-4-7"), None);
        assert_eq!(id("gpt-4o-audio-mini"), None);
        assert_eq!(id("wire-openai"), None);
    }
}
