//! Reasoning controls: whether the model thinks, how hard (an ordered
//! effort level) and with how many tokens (a budget), and the one mapping
//! between effort and budget every protocol that has only one of them uses.

use serde::{Deserialize, Serialize};

/// How hard a model should think, in ascending order. Each protocol takes a
/// subset (OpenAI: minimal to xhigh, Anthropic and Bedrock: low to max,
/// Gemini: minimal to high); [`Effort::nearest`] keeps the order when a
/// level has no exact counterpart. OpenAI's `none` is not a level: it is
/// [`Thinking::Off`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effort {
    /// OpenAI and Gemini `minimal`.
    Minimal,
    /// `low`.
    Low,
    /// `medium`.
    Medium,
    /// `high`.
    High,
    /// OpenAI, Anthropic and Bedrock `xhigh`.
    #[serde(rename = "xhigh")]
    XHigh,
    /// Anthropic and Bedrock `max`.
    Max,
}

impl Effort {
    /// Every level, lowest first.
    pub const ALL: [Effort; 6] =
        [Effort::Minimal, Effort::Low, Effort::Medium, Effort::High, Effort::XHigh, Effort::Max];

    /// The wire spelling every protocol shares.
    pub fn as_str(self) -> &'static str {
        match self {
            Effort::Minimal => "minimal",
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
            Effort::XHigh => "xhigh",
            Effort::Max => "max",
        }
    }

    /// Reads a level, in any letter case.
    pub fn parse(name: &str) -> Option<Effort> {
        Effort::ALL.into_iter().find(|level| level.as_str().eq_ignore_ascii_case(name))
    }

    /// The level of `supported` (a protocol's levels, any order) closest to
    /// this one; ties go to the higher level. Monotone: a higher level never
    /// maps below a lower one.
    pub fn nearest(self, supported: &[Effort]) -> Effort {
        let rank = |level: Effort| level as i32;
        supported.iter().copied().min_by_key(|level| ((rank(*level) - rank(self)).abs(), -rank(*level))).unwrap_or(self)
    }

    /// The thinking budget that stands for this level where a protocol
    /// takes only a budget.
    pub fn budget(self) -> u64 {
        match self {
            Effort::Minimal => 1024,
            Effort::Low => 2048,
            Effort::Medium => 8192,
            Effort::High => 16384,
            Effort::XHigh => 24576,
            Effort::Max => 32768,
        }
    }

    /// The level that stands for a thinking budget where a protocol takes
    /// only a level: the level whose [`Effort::budget`] is nearest (midpoints
    /// between neighbours go up), so `from_budget(e.budget()) == e`.
    pub fn from_budget(tokens: u64) -> Effort {
        let mut level = Effort::Minimal;
        for pair in Effort::ALL.windows(2) {
            let midpoint = (pair[0].budget() + pair[1].budget()) / 2;
            if tokens >= midpoint {
                level = pair[1];
            }
        }
        level
    }
}

impl std::fmt::Display for Effort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether the model thinks before answering.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Thinking {
    /// The caller did not say; an effort alone tunes the whole reply
    /// (Anthropic `output_config.effort` or Bedrock `outputConfig.effort`
    /// without a `thinking` setting).
    #[default]
    Unset,
    /// On. Without a budget the model decides how much (Anthropic
    /// `adaptive`, Gemini budget -1, an OpenAI reasoning effort).
    On,
    /// Off (Anthropic `disabled`, Gemini budget 0, OpenAI effort `none`).
    Off,
}

/// Reasoning controls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reasoning {
    /// Whether the model thinks.
    pub thinking: Thinking,
    /// How hard, as the caller's level.
    pub effort: Option<Effort>,
    /// A thinking-token budget.
    pub budget_tokens: Option<u64>,
}

impl Reasoning {
    /// Thinking on, with neither level nor budget.
    pub fn on() -> Reasoning {
        Reasoning { thinking: Thinking::On, ..Reasoning::default() }
    }

    /// Thinking off.
    pub fn off() -> Reasoning {
        Reasoning { thinking: Thinking::Off, ..Reasoning::default() }
    }

    /// Thinking on at an effort level.
    pub fn with_effort(effort: Effort) -> Reasoning {
        Reasoning { thinking: Thinking::On, effort: Some(effort), budget_tokens: None }
    }

    /// Thinking on with a token budget.
    pub fn with_budget(tokens: u64) -> Reasoning {
        Reasoning { thinking: Thinking::On, effort: None, budget_tokens: Some(tokens) }
    }

    /// True when thinking is explicitly off.
    pub fn is_off(&self) -> bool {
        self.thinking == Thinking::Off
    }

    /// The budget to use where a protocol only takes a budget: the caller's,
    /// else the one its effort stands for.
    pub fn budget_or_from_effort(&self) -> Option<u64> {
        self.budget_tokens.or_else(|| self.effort.map(Effort::budget))
    }

    /// The level to use where a protocol only takes a level: the caller's,
    /// else the one its budget stands for.
    pub fn effort_or_from_budget(&self) -> Option<Effort> {
        self.effort.or_else(|| self.budget_tokens.map(Effort::from_budget))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_in_any_case_and_print_their_wire_name() {
        for level in Effort::ALL {
            assert_eq!(Effort::parse(level.as_str()), Some(level));
            assert_eq!(Effort::parse(&level.as_str().to_ascii_uppercase()), Some(level));
        }
        assert_eq!(Effort::parse("none"), None);
        assert_eq!(serde_json::to_string(&Effort::XHigh).unwrap_or_default(), "\"xhigh\"");
    }

    #[test]
    fn nearest_keeps_the_order_in_every_vocabulary() {
        use Effort::*;
        let vocabularies: [&[Effort]; 3] =
            [&[Minimal, Low, Medium, High, XHigh], &[Low, Medium, High, XHigh, Max], &[Minimal, Low, Medium, High]];
        for supported in vocabularies {
            let mapped: Vec<Effort> = Effort::ALL.iter().map(|e| e.nearest(supported)).collect();
            assert!(mapped.windows(2).all(|w| w[0] <= w[1]), "{supported:?}: {mapped:?}");
            for level in supported {
                assert_eq!(level.nearest(supported), *level);
            }
        }
        assert_eq!(Minimal.nearest(&[Low, Medium, High, XHigh, Max]), Low);
        assert_eq!(Max.nearest(&[Minimal, Low, Medium, High]), High);
        assert_eq!(Max.nearest(&[Minimal, Low, Medium, High, XHigh]), XHigh);
    }

    #[test]
    fn budgets_and_levels_convert_both_ways_in_order() {
        for level in Effort::ALL {
            assert_eq!(Effort::from_budget(level.budget()), level);
        }
        let levels: Vec<Effort> = (0..40_000).step_by(250).map(Effort::from_budget).collect();
        assert!(levels.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(Effort::from_budget(0), Effort::Minimal);
        assert_eq!(Effort::from_budget(20_000), Effort::High);
        assert_eq!(Effort::from_budget(1_000_000), Effort::Max);
    }
}
