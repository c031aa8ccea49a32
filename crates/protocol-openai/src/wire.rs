//! Wire pieces shared by the request, response and stream modules: finish
//! reasons, the usage object, data URLs and drop reporting.

use serde::{Deserialize, Serialize};
use switchyard_codec::ir::{DropReason, Dropped, StopReason, Usage};

/// Reads a `finish_reason`. Values from OpenAI-compatible servers that OpenAI
/// does not define still ended the turn, so they read as `EndTurn`.
pub(crate) fn stop_reason_from_finish(finish: &str) -> StopReason {
    match finish {
        "length" => StopReason::MaxTokens,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "content_filter" => StopReason::ContentFilter,
        _ => StopReason::EndTurn,
    }
}

/// Writes a `finish_reason`. OpenAI has no reason for a matched stop
/// sequence, a pause, a refusal (that travels in `refusal`) or an error.
pub(crate) fn finish_from_stop_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::MaxTokens | StopReason::ContextLength => "length",
        StopReason::ToolUse => "tool_calls",
        StopReason::ContentFilter => "content_filter",
        StopReason::EndTurn
        | StopReason::StopSequence
        | StopReason::Refusal
        | StopReason::Pause
        | StopReason::Error => "stop",
    }
}

/// The `usage` object of replies and chunks.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    #[serde(default)]
    pub total_tokens: Option<u64>,
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct PromptDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct CompletionDetails {
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

impl WireUsage {
    /// OpenAI's counts already follow the IR conventions: `prompt_tokens`
    /// includes cached tokens and `completion_tokens` includes reasoning.
    pub fn to_ir(&self) -> Usage {
        Usage {
            input_tokens: self.prompt_tokens.unwrap_or(0),
            output_tokens: self.completion_tokens.unwrap_or(0),
            cache_read_tokens: self.prompt_tokens_details.as_ref().and_then(|d| d.cached_tokens).unwrap_or(0),
            cache_write_tokens: 0,
            reasoning_tokens: self.completion_tokens_details.as_ref().and_then(|d| d.reasoning_tokens).unwrap_or(0),
        }
    }

    /// The wire usage of `usage`. Cache writes have no OpenAI field; they stay
    /// counted in `prompt_tokens`, as the IR counts them in `input_tokens`.
    pub fn from_ir(usage: &Usage) -> WireUsage {
        WireUsage {
            prompt_tokens: Some(usage.input_tokens),
            completion_tokens: Some(usage.output_tokens),
            total_tokens: Some(usage.total()),
            prompt_tokens_details: Some(PromptDetails { cached_tokens: Some(usage.cache_read_tokens) }),
            completion_tokens_details: Some(CompletionDetails { reasoning_tokens: Some(usage.reasoning_tokens) }),
        }
    }
}

/// Records that `field` could not be written, once per field.
pub(crate) fn report(dropped: &mut Vec<Dropped>, field: &str) {
    if !dropped.iter().any(|d| d.field == field) {
        dropped.push(Dropped::new(field, DropReason::Unsupported));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_reasons_round_trip_where_openai_has_them() {
        for reason in [StopReason::EndTurn, StopReason::MaxTokens, StopReason::ToolUse, StopReason::ContentFilter] {
            assert_eq!(stop_reason_from_finish(finish_from_stop_reason(reason)), reason);
        }
        assert_eq!(stop_reason_from_finish("function_call"), StopReason::ToolUse);
        assert_eq!(stop_reason_from_finish("eos"), StopReason::EndTurn);
    }

    #[test]
    fn report_dedupes() {
        let mut dropped = Vec::new();
        report(&mut dropped, "top_k");
        report(&mut dropped, "top_k");
        assert_eq!(dropped.len(), 1);
    }
}
