//! What a lane's model accepts where the models of one protocol differ: the
//! lane's `capabilities:` in config, handed to the request writer.

use serde::{Deserialize, Serialize};

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
}

impl Default for Capabilities {
    fn default() -> Capabilities {
        Capabilities {
            adaptive_thinking: false,
            effort: false,
            temperature_with_top_p: true,
            max_output: None,
            reasoning: None,
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
    };
}
