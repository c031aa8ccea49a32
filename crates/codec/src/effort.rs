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

/// An OpenAI-style level to write (`reasoning_effort`, `reasoning.effort`)
/// for a model with `capabilities`, from its protocol's `vocabulary`: only
/// the levels the model takes (an effort it takes none of is reported, not
/// sent: grok-4 refuses the field), the nearest one where the caller's is
/// missing; thinking off is `none` where the model turns it off (by its
/// facts, else where the protocol says `none`: `off_in_protocol`), else
/// reported.
pub fn openai_level(
    reasoning: &Reasoning,
    vocabulary: &[Effort],
    capabilities: &Capabilities,
    off_in_protocol: bool,
    dropped: &mut Vec<Dropped>,
) -> Option<&'static str> {
    if reasoning.is_off() {
        return match capabilities.efforts {
            Some(efforts) if efforts.takes_off() => Some("none"),
            None if off_in_protocol => Some("none"),
            Some(_) => {
                Dropped::push_once(dropped, Field::ReasoningOff, DropReason::Capability);
                None
            }
            None => {
                Dropped::push_once(dropped, Field::ReasoningOff, DropReason::Unsupported);
                None
            }
        };
    }
    let Some(efforts) = capabilities.efforts else {
        return level_to_write(reasoning, vocabulary, dropped).map(Effort::as_str);
    };
    let levels = efforts.within(vocabulary);
    if levels.is_empty() {
        if reasoning.effort.is_some() {
            Dropped::push_once(dropped, Field::ReasoningEffort, DropReason::Capability);
        }
        if reasoning.budget_tokens.is_some() {
            Dropped::push_once(dropped, Field::ReasoningBudget, DropReason::Capability);
        }
        return None;
    }
    level_to_write(reasoning, &levels, dropped).map(Effort::as_str)
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

/// Claude's smallest thinking budget.
pub const CLAUDE_MIN_BUDGET: u64 = 1024;

impl ClaudeThinking {
    /// Whether the model will think (`enabled` or `adaptive`).
    pub fn is_on(&self) -> bool {
        self.thinking
            .as_ref()
            .and_then(|t| t.get("type"))
            .and_then(Value::as_str)
            .is_some_and(|kind| kind != "disabled")
    }

    /// The budget to send, raised to Claude's minimum (and reported) when
    /// the caller's is smaller; 0 without a budget.
    pub fn least_budget(&mut self, dropped: &mut Vec<Dropped>) -> u64 {
        let Some(budget) = self.budget else { return 0 };
        if budget >= CLAUDE_MIN_BUDGET {
            return budget;
        }
        Dropped::push_once(dropped, Field::ReasoningBudget, DropReason::Converted);
        self.budget = Some(CLAUDE_MIN_BUDGET);
        if let Some(Value::Object(obj)) = self.thinking.as_mut() {
            obj.insert("budget_tokens".into(), json!(CLAUDE_MIN_BUDGET));
        }
        CLAUDE_MIN_BUDGET
    }
}

/// The output cap for a Claude request thinking on `budget`: the budget
/// counts inside it and must stay below it, so a cap at or under the budget
/// becomes the budget plus the cap (the answer keeps its room), reported.
pub fn claude_max_tokens(cap: Option<u64>, budget: u64, dropped: &mut Vec<Dropped>) -> Option<u64> {
    match cap {
        Some(cap) if budget > 0 && cap <= budget => {
            Dropped::push_once(dropped, Field::MaxTokens, DropReason::Converted);
            Some(budget.saturating_add(cap))
        }
        cap => cap,
    }
}

/// The sampling a Claude request may carry: while it thinks, no
/// temperature but 1, no `top_k`, and `top_p` only from 0.95; what goes is
/// reported.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClaudeSampling {
    /// `temperature`.
    pub temperature: Option<f64>,
    /// `top_p`.
    pub top_p: Option<f64>,
    /// `top_k`.
    pub top_k: Option<u64>,
}

/// `request` brought within Claude's rules for thinking, as the writers
/// would bring it (without the report): what a generator of requests uses
/// to make ones a Claude writer sends unchanged.
pub fn within_claude_thinking_rules(mut request: switchyard_ir::Request) -> switchyard_ir::Request {
    let thinks = request
        .reasoning
        .as_ref()
        .is_some_and(|r| !r.is_off() && (r.thinking == Thinking::On || r.budget_tokens.is_some()));
    if !thinks {
        return request;
    }
    (request.temperature, request.top_p, request.top_k) = (None, None, None);
    if matches!(request.tool_choice, Some(switchyard_ir::ToolChoice::Any | switchyard_ir::ToolChoice::Tool(_))) {
        request.tool_choice = Some(switchyard_ir::ToolChoice::Auto);
    }
    let budget = request.reasoning.as_mut().and_then(|r| r.budget_tokens.as_mut()).map(|b| {
        *b = (*b).max(CLAUDE_MIN_BUDGET);
        *b
    });
    if let (Some(cap), Some(budget)) = (request.max_tokens.as_mut(), budget) {
        *cap = (*cap).max(budget + 1);
    }
    request
}

/// [`ClaudeSampling`] for a request that `thinks`.
pub fn claude_sampling(
    thinks: bool,
    (temperature, top_p, top_k): (Option<f64>, Option<f64>, Option<u64>),
    dropped: &mut Vec<Dropped>,
) -> ClaudeSampling {
    let kept = ClaudeSampling {
        temperature: temperature.filter(|&t| !thinks || t == 1.0),
        top_p: top_p.filter(|&p| !thinks || p >= 0.95),
        top_k: top_k.filter(|_| !thinks),
    };
    for (field, gone) in [
        (Field::Temperature, kept.temperature != temperature),
        (Field::TopP, kept.top_p != top_p),
        (Field::TopK, kept.top_k != top_k),
    ] {
        if gone {
            Dropped::push_once(dropped, field, DropReason::Capability);
        }
    }
    kept
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

    /// o4-mini takes low, medium and high: a 1,024-token budget is low,
    /// never `minimal`; a model that takes no level gets none; `none` only
    /// to a model that turns thinking off.
    #[test]
    fn a_model_gets_only_the_levels_it_takes() {
        use switchyard_ir::Efforts;
        let vocabulary = [Effort::Minimal, Effort::Low, Effort::Medium, Effort::High, Effort::XHigh];
        let o4_mini = Capabilities {
            efforts: Some(Efforts::of(&[Effort::Low, Effort::Medium, Effort::High])),
            ..Capabilities::default()
        };
        let mut dropped = Vec::new();
        let budget = Reasoning::with_budget(1024);
        assert_eq!(openai_level(&budget, &vocabulary, &Capabilities::default(), false, &mut dropped), Some("minimal"));
        assert_eq!(openai_level(&budget, &vocabulary, &o4_mini, false, &mut dropped), Some("low"));
        let minimal = Reasoning::with_effort(Effort::Minimal);
        dropped.clear();
        assert_eq!(openai_level(&minimal, &vocabulary, &o4_mini, false, &mut dropped), Some("low"));
        assert_eq!(dropped, vec![Dropped::new(Field::ReasoningEffort, DropReason::Converted)]);
        dropped.clear();
        assert_eq!(openai_level(&Reasoning::off(), &vocabulary, &o4_mini, true, &mut dropped), None);
        assert_eq!(dropped, vec![Dropped::new(Field::ReasoningOff, DropReason::Capability)]);
        let gpt_5_1 = Capabilities { efforts: Some(Efforts::of(&[Effort::Low]).with_off()), ..Capabilities::default() };
        assert_eq!(openai_level(&Reasoning::off(), &vocabulary, &gpt_5_1, false, &mut dropped), Some("none"));
        let grok_4 = Capabilities { efforts: Some(Efforts::NONE), ..Capabilities::default() };
        dropped.clear();
        assert_eq!(
            openai_level(&Reasoning::with_effort(Effort::High), &vocabulary, &grok_4, false, &mut dropped),
            None
        );
        assert_eq!(dropped, vec![Dropped::new(Field::ReasoningEffort, DropReason::Capability)]);
    }

    #[test]
    fn none_is_off_and_unknown_levels_are_refused() {
        assert_eq!(read_level("NONE", "reasoning_effort"), Ok(Reasoning::off()));
        assert_eq!(read_level("high", "reasoning_effort"), Ok(Reasoning::with_effort(Effort::High)));
        assert!(matches!(read_level("ultra", "x"), Err(DecodeError::Invalid { param: Some(p), .. }) if p == "x"));
    }
}
