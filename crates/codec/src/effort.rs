//! Reasoning effort as the writers of every protocol turn it into their own
//! terms: a level from the protocol's vocabulary (the nearest one when the
//! caller's is missing), or a budget where the protocol takes only budgets,
//! with each such change reported as `DropReason::Converted`; and Claude's
//! `thinking` plus effort, which Anthropic and Bedrock both write, chosen by
//! what the lane's model takes.

use serde_json::{json, Value};
use switchyard_ir::{Capabilities, DropReason, Dropped, Effort, Field, Reasoning, Thinking};

use crate::DecodeError;

/// An effort level a caller wrote in `field`; an unknown one is the
/// caller's mistake, named.
pub fn read_effort(text: &str, field: &str) -> Result<Effort, DecodeError> {
    Effort::parse(text).ok_or_else(|| {
        DecodeError::invalid(field, format!("{field} must be minimal, low, medium, high, xhigh or max, not `{text}`"))
    })
}

/// An OpenAI-style effort (`reasoning_effort`, `reasoning.effort`): `none` is
/// thinking off, any other level thinking on at that level.
pub fn read_level(text: &str, field: &str) -> Result<Reasoning, DecodeError> {
    if text.eq_ignore_ascii_case("none") {
        return Ok(Reasoning::off());
    }
    read_effort(text, field).map(Reasoning::with_effort)
}

/// A level to write for a protocol taking `levels`: the caller's level, or
/// the nearest one the protocol has; else the level the caller's budget
/// stands for. A budget beside a level has no place and is reported.
pub fn level_to_write(reasoning: &Reasoning, levels: &[Effort], dropped: &mut Vec<Dropped>) -> Option<Effort> {
    let effort = match (reasoning.effort, reasoning.budget_tokens) {
        (Some(effort), budget) => {
            if budget.is_some() {
                Dropped::push_once(dropped, Field::ReasoningBudget, DropReason::Unsupported);
            }
            effort
        }
        (None, Some(budget)) => {
            Dropped::push_once(dropped, Field::ReasoningBudget, DropReason::Converted);
            Effort::from_budget(budget)
        }
        (None, None) => return None,
    };
    let level = effort.nearest(levels);
    if level != effort {
        Dropped::push_once(dropped, Field::ReasoningEffort, DropReason::Converted);
    }
    Some(level)
}

/// A budget to write for a protocol (or model) taking only budgets: the
/// caller's, else the one its level stands for.
pub fn budget_to_write(reasoning: &Reasoning, dropped: &mut Vec<Dropped>) -> Option<u64> {
    if reasoning.budget_tokens.is_none() && reasoning.effort.is_some() {
        Dropped::push_once(dropped, Field::ReasoningEffort, DropReason::Converted);
    }
    reasoning.budget_or_from_effort()
}

/// The effort levels of Claude models (Anthropic `output_config.effort`,
/// Bedrock `outputConfig.effort`).
pub const CLAUDE_EFFORTS: [Effort; 5] = [Effort::Low, Effort::Medium, Effort::High, Effort::XHigh, Effort::Max];

/// Claude's reasoning controls for one request.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaudeThinking {
    /// The `thinking` object (`enabled` with a budget, `adaptive`,
    /// `disabled`), when thinking is said at all.
    pub thinking: Option<Value>,
    /// The effort level to send, for models that take one.
    pub effort: Option<Effort>,
    /// The budget in `thinking`, counted inside the output cap.
    pub budget: Option<u64>,
}

impl ClaudeThinking {
    /// Whether the model will think (`enabled` or `adaptive`).
    pub fn is_on(&self) -> bool {
        self.thinking
            .as_ref()
            .and_then(|t| t.get("type"))
            .and_then(Value::as_str)
            .is_some_and(|kind| kind != "disabled")
    }
}

/// Claude's `thinking` and effort for a model with `capabilities`: the
/// effort only to models that take one, adaptive thinking only to models
/// that take it, else thinking on is `enabled` with the budget the effort
/// stands for. Thinking `Unset` (an effort alone) says no `thinking`.
pub fn claude_thinking(
    reasoning: &Reasoning,
    capabilities: &Capabilities,
    dropped: &mut Vec<Dropped>,
) -> ClaudeThinking {
    let level = reasoning.effort.map(|effort| {
        let level = effort.nearest(&CLAUDE_EFFORTS);
        if level != effort {
            Dropped::push_once(dropped, Field::ReasoningEffort, DropReason::Converted);
        }
        level
    });
    let effort = level.filter(|_| capabilities.effort);
    let on = reasoning.thinking == Thinking::On || reasoning.budget_tokens.is_some();
    let (thinking, budget, effort_as_budget) = if reasoning.is_off() {
        (Some(json!({"type": "disabled"})), None, false)
    } else if !on {
        (None, None, false)
    } else if let Some(budget) = reasoning.budget_tokens {
        (Some(json!({"type": "enabled", "budget_tokens": budget})), Some(budget), false)
    } else if capabilities.adaptive_thinking {
        (Some(json!({"type": "adaptive"})), None, false)
    } else {
        // The budget the effort stands for says the effort too, if less exactly.
        let budget = reasoning.effort.map_or(Effort::Medium.budget(), Effort::budget);
        (Some(json!({"type": "enabled", "budget_tokens": budget})), Some(budget), level.is_some())
    };
    if level.is_some() && effort.is_none() {
        let reason = if effort_as_budget { DropReason::Converted } else { DropReason::Capability };
        Dropped::push_once(dropped, Field::ReasoningEffort, reason);
    }
    ClaudeThinking { thinking, effort, budget }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_budgets_convert_with_a_report() {
        let mut dropped = Vec::new();
        let levels = [Effort::Low, Effort::Medium, Effort::High];
        assert_eq!(level_to_write(&Reasoning::with_effort(Effort::High), &levels, &mut dropped), Some(Effort::High));
        assert!(dropped.is_empty());
        assert_eq!(level_to_write(&Reasoning::with_effort(Effort::Max), &levels, &mut dropped), Some(Effort::High));
        assert_eq!(dropped, vec![Dropped::new(Field::ReasoningEffort, DropReason::Converted)]);
        dropped.clear();
        assert_eq!(level_to_write(&Reasoning::with_budget(2048), &levels, &mut dropped), Some(Effort::Low));
        assert_eq!(dropped, vec![Dropped::new(Field::ReasoningBudget, DropReason::Converted)]);
        dropped.clear();
        assert_eq!(budget_to_write(&Reasoning::with_effort(Effort::Medium), &mut dropped), Some(8192));
        assert_eq!(dropped, vec![Dropped::new(Field::ReasoningEffort, DropReason::Converted)]);
        assert_eq!(level_to_write(&Reasoning::on(), &levels, &mut dropped), None);
    }

    #[test]
    fn none_is_off_and_unknown_levels_are_refused() {
        assert_eq!(read_level("NONE", "reasoning_effort"), Ok(Reasoning::off()));
        assert_eq!(read_level("high", "reasoning_effort"), Ok(Reasoning::with_effort(Effort::High)));
        assert!(matches!(read_level("ultra", "x"), Err(DecodeError::Invalid { param: Some(p), .. }) if p == "x"));
    }
}
