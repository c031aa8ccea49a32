//! What a lane's model accepts where the models of one protocol differ: the
//! lane's `capabilities:` in config, handed to the request writer.

use serde::{Deserialize, Serialize};

use crate::{Effort, Field};

/// What the target model takes beyond what every model of its protocol
/// takes. The default is the conservative common ground; a writer never
/// sends what the model is not said to take, and reports what that costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Capabilities {
    /// Takes adaptive thinking (Anthropic `thinking: {type: "adaptive"}`,
    /// Claude Opus 4.6 and later). Otherwise thinking without a budget is
    /// `enabled` with the budget its effort stands for.
    pub adaptive_thinking: bool,
    /// Takes an effort level (Anthropic `output_config.effort`, Bedrock
    /// `outputConfig.effort`). Otherwise an effort becomes a thinking budget.
    pub effort: bool,
    /// Takes `temperature` and `top_p` in one request. Claude Sonnet 4.5,
    /// Haiku 4.5 and Opus 4.1 and later refuse both at once: with `false`
    /// only the temperature is sent and `top_p` is reported.
    pub temperature_with_top_p: bool,
    /// The most output tokens a reply may have: a larger cap a caller asks
    /// for is lowered to it (and reported), instead of the vendor's 400.
    pub max_output: Option<u64>,
    /// Whether the model reasons at all: `Some(false)` takes no reasoning
    /// field (an effort or a budget asked of it is reported, not sent);
    /// `None`, unknown, sends what the caller asked.
    pub reasoning: Option<bool>,
    /// How the model continues an assistant message that ends the
    /// conversation (a stream carried on from the text a caller has), if
    /// it does.
    pub prefill: Prefill,
    /// Takes a system message inside the conversation (Claude Opus 4.8 and
    /// later on Anthropic and Bedrock). Otherwise a translated request's
    /// system message joins the system prompt, reported as moved; a
    /// same-protocol request still goes as it came.
    pub system_messages: bool,
    /// Takes the caller's Anthropic betas in its request body (Claude on
    /// Bedrock: `additionalModelRequestFields.anthropic_beta`, which
    /// Bedrock passes to the model; another model refuses the key).
    /// `None`: not said, and the Bedrock writer goes by the model's name.
    pub bedrock_betas: Option<bool>,
    /// The effort levels the model takes, where it takes fewer than its
    /// protocol's writer would send (o4-mini: low, medium, high; gpt-5.1
    /// also `none`, which is thinking off). `None`: its protocol's levels.
    pub efforts: Option<Efforts>,
    /// The sampling parameters the model refuses while it reasons (OpenAI's
    /// reasoning models: temperature, top_p and the penalties; xAI's: the
    /// penalties and stop): a translated request that has them while the
    /// model will reason goes without them, reported.
    pub refused_while_reasoning: Fields,
    /// Whether the model reasons when a request says nothing of reasoning
    /// (o-series and gpt-5 do; gpt-5.1 and Claude do not).
    pub thinks_by_default: bool,
    /// Whether the model takes audio input (OpenAI's audio models and
    /// Gemini do; gpt-4o, gpt-5 and Claude do not): `Some(false)` gets no
    /// audio block (each is reported, or refused under strict, instead of
    /// the vendor's 400); `None`, unknown, sends what the caller sent.
    pub audio_input: Option<bool>,
}

/// A set of effort levels, and whether thinking can be turned off (OpenAI's
/// `none`), as a model takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Efforts(u8);

impl Efforts {
    /// The bit that says thinking can be turned off.
    const OFF: u8 = 1 << 7;

    /// No level, and no way to turn thinking off.
    pub const NONE: Efforts = Efforts(0);

    /// The set of `levels`.
    pub fn of(levels: &[Effort]) -> Efforts {
        Efforts(levels.iter().fold(0, |bits, level| bits | 1 << *level as u8))
    }

    /// The same set, with thinking that can be turned off.
    pub fn with_off(self) -> Efforts {
        Efforts(self.0 | Efforts::OFF)
    }

    /// Whether `level` is one of them.
    pub fn takes(self, level: Effort) -> bool {
        self.0 & 1 << level as u8 != 0
    }

    /// Whether thinking can be turned off.
    pub fn takes_off(self) -> bool {
        self.0 & Efforts::OFF != 0
    }

    /// The levels of `vocabulary` (a protocol's) in this set, in order.
    pub fn within(self, vocabulary: &[Effort]) -> Vec<Effort> {
        vocabulary.iter().copied().filter(|level| self.takes(*level)).collect()
    }
}

/// A set of request [`Field`]s (at most 128: the table is closed and
/// smaller), for what a model refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Fields(u128);

// Each field is one bit of a `u128`: the table must stay within it.
const _: () = assert!(Field::ALL.len() <= 128);

impl Fields {
    /// The empty set.
    pub const NONE: Fields = Fields(0);

    /// The set of `fields`.
    pub fn of(fields: &[Field]) -> Fields {
        Fields(fields.iter().fold(0, |bits, field| bits | 1 << field.index()))
    }

    /// Whether `field` is in it.
    pub fn has(self, field: Field) -> bool {
        self.0 & 1 << field.index() != 0
    }

    /// Whether it is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// Whether and how a model continues an assistant message last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Prefill {
    /// It does not (a continuation asks it by instruction).
    #[default]
    No,
    /// It continues an assistant message last as it is (Claude).
    Assistant,
    /// An OpenAI-compatible server that continues it when asked
    /// `continue_final_message: true, add_generation_prompt: false` (vLLM).
    ContinueFinalMessage,
    /// An OpenAI-compatible server that continues an assistant message
    /// marked `prefix: true` (DeepSeek, Mistral).
    Prefix,
}

impl Default for Capabilities {
    fn default() -> Capabilities {
        Capabilities {
            adaptive_thinking: false,
            effort: false,
            temperature_with_top_p: true,
            max_output: None,
            reasoning: None,
            system_messages: false,
            bedrock_betas: None,
            prefill: Prefill::No,
            efforts: None,
            refused_while_reasoning: Fields::NONE,
            thinks_by_default: false,
            audio_input: None,
        }
    }
}

impl Capabilities {
    /// Everything a current model of any protocol takes (tests and tables
    /// of what each protocol can carry at best).
    pub const ALL: Capabilities = Capabilities {
        adaptive_thinking: true,
        effort: true,
        temperature_with_top_p: true,
        max_output: None,
        reasoning: None,
        system_messages: true,
        bedrock_betas: None,
        prefill: Prefill::Assistant,
        efforts: None,
        refused_while_reasoning: Fields::NONE,
        thinks_by_default: false,
        audio_input: Some(true),
    };

    /// Whether the model may be sent audio: not when it is known to take
    /// none, in which case the loss is reported once.
    pub fn sends_audio(&self, dropped: &mut Vec<crate::Dropped>) -> bool {
        if self.audio_input == Some(false) {
            crate::Dropped::push_once(dropped, Field::Audio, crate::DropReason::Capability);
            return false;
        }
        true
    }

    /// Whether a request with `reasoning` makes this model reason (as far
    /// as the writer can say it): a model that does not reason never; one
    /// asked to think (a level, a budget, on) does; one told not to only
    /// where it can be turned off; one told nothing, as it does by default.
    pub fn will_reason(&self, reasoning: Option<&crate::Reasoning>) -> bool {
        if self.reasoning != Some(true) {
            return false;
        }
        match reasoning {
            None => self.thinks_by_default,
            Some(r) if r.is_off() => !self.efforts.is_some_and(Efforts::takes_off) && self.thinks_by_default,
            Some(r) => {
                r.effort.is_some()
                    || r.budget_tokens.is_some()
                    || r.thinking == crate::Thinking::On
                    || self.thinks_by_default
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Reasoning;

    #[test]
    fn sets_hold_what_they_were_made_of() {
        let efforts = Efforts::of(&[Effort::Low, Effort::Medium, Effort::High]);
        assert!(efforts.takes(Effort::Low) && !efforts.takes(Effort::Minimal) && !efforts.takes_off());
        assert!(efforts.with_off().takes_off());
        assert_eq!(efforts.within(&Effort::ALL), [Effort::Low, Effort::Medium, Effort::High]);
        let fields = Fields::of(&[Field::Temperature, Field::Unmodelled]);
        assert!(fields.has(Field::Temperature) && fields.has(Field::Unmodelled) && !fields.has(Field::TopP));
        assert!(Fields::NONE.is_empty() && !fields.is_empty());
    }

    #[test]
    fn a_model_reasons_when_asked_or_by_default() {
        let o_series = Capabilities { reasoning: Some(true), thinks_by_default: true, ..Capabilities::default() };
        assert!(o_series.will_reason(None));
        assert!(o_series.will_reason(Some(&Reasoning::off())), "o-series cannot be turned off");
        let gpt_5_1 = Capabilities {
            reasoning: Some(true),
            efforts: Some(Efforts::of(&[Effort::Low]).with_off()),
            ..Capabilities::default()
        };
        assert!(!gpt_5_1.will_reason(None) && !gpt_5_1.will_reason(Some(&Reasoning::off())));
        assert!(gpt_5_1.will_reason(Some(&Reasoning::with_budget(1024))));
        assert!(!Capabilities::default().will_reason(Some(&Reasoning::on())), "unknown: the writer decides");
    }
}
