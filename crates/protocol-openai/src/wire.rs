//! Wire pieces shared by the request, response and stream modules: finish
//! reasons, the usage object, the thought-signature carrier, the parameter
//! table and drop reporting.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_codec::ir::{DropReason, Dropped, Effort, Field, ServiceTier, StopReason, Usage};

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

/// `prompt_tokens_details`: every part of `prompt_tokens` OpenAI counts
/// apart (its `text_tokens`, the rest, is left to the total).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct PromptDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
    /// Prompt tokens written to the cache (said only when some were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    #[serde(default)]
    pub audio_tokens: Option<u64>,
    /// Image tokens of the prompt (said only when some were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_tokens: Option<u64>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct CompletionDetails {
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
    #[serde(default)]
    pub audio_tokens: Option<u64>,
}

impl WireUsage {
    /// OpenAI's counts already follow the IR conventions: `prompt_tokens`
    /// includes cached, cache-written, audio and image tokens and
    /// `completion_tokens` includes reasoning and audio. The service tier
    /// is the reply's top-level `service_tier` (`tier`).
    pub fn to_ir(&self, tier: Option<&str>) -> Usage {
        let prompt = self.prompt_tokens_details.as_ref();
        let completion = self.completion_tokens_details.as_ref();
        Usage {
            input_tokens: self.prompt_tokens.unwrap_or(0),
            output_tokens: self.completion_tokens.unwrap_or(0),
            cache_read_tokens: prompt.and_then(|d| d.cached_tokens).unwrap_or(0),
            cache_write_tokens: prompt.and_then(|d| d.cache_write_tokens).unwrap_or(0),
            audio_input_tokens: prompt.and_then(|d| d.audio_tokens).unwrap_or(0),
            image_input_tokens: prompt.and_then(|d| d.image_tokens).unwrap_or(0),
            reasoning_tokens: completion.and_then(|d| d.reasoning_tokens).unwrap_or(0),
            audio_output_tokens: completion.and_then(|d| d.audio_tokens).unwrap_or(0),
            service_tier: tier.and_then(ServiceTier::parse),
            ..Usage::default()
        }
    }

    /// The wire usage of `usage`: cache writes and image tokens only when
    /// there are some (most replies have none, and OpenAI's own omit
    /// them); image output has no field and stays counted in
    /// `completion_tokens`.
    pub fn from_ir(usage: &Usage) -> WireUsage {
        let some = |count: u64| (count != 0).then_some(count);
        WireUsage {
            prompt_tokens: Some(usage.input_tokens),
            completion_tokens: Some(usage.output_tokens),
            total_tokens: Some(usage.total()),
            prompt_tokens_details: Some(PromptDetails {
                cached_tokens: Some(usage.cache_read_tokens),
                cache_write_tokens: some(usage.cache_write_tokens),
                audio_tokens: Some(usage.audio_input_tokens),
                image_tokens: some(usage.image_input_tokens),
            }),
            completion_tokens_details: Some(CompletionDetails {
                reasoning_tokens: Some(usage.reasoning_tokens),
                audio_tokens: Some(usage.audio_output_tokens),
            }),
        }
    }
}

/// The top-level `service_tier` a reply says it was served at (OpenAI's
/// names: `default`, `priority`, `flex`, `scale`); a batch has none.
pub(crate) fn service_tier_name(usage: &Usage) -> Option<&'static str> {
    match usage.service_tier? {
        ServiceTier::Standard => Some("default"),
        ServiceTier::Batch => None,
        tier => Some(tier.as_str()),
    }
}

/// Records that `field` could not be written, once per field.
pub(crate) fn report(dropped: &mut Vec<Dropped>, field: Field) {
    Dropped::push_once(dropped, field, DropReason::Unsupported);
}

/// The reasoning levels `reasoning_effort` takes (`none` is thinking off).
pub(crate) const EFFORTS: [Effort; 5] = [Effort::Minimal, Effort::Low, Effort::Medium, Effort::High, Effort::XHigh];

/// Where Chat Completions requests carry each parameter.
pub(crate) fn parameter_path(field: Field) -> Option<&'static str> {
    Some(match field {
        Field::MaxTokens => "max_completion_tokens",
        Field::Temperature => "temperature",
        Field::TopP => "top_p",
        Field::Stop => "stop",
        Field::Seed => "seed",
        Field::FrequencyPenalty => "frequency_penalty",
        Field::PresencePenalty => "presence_penalty",
        Field::JsonMode => "response_format",
        Field::JsonSchema => "response_format.json_schema",
        Field::JsonSchemaName => "response_format.json_schema.name",
        Field::JsonSchemaStrict => "response_format.json_schema.strict",
        Field::ReasoningEffort => "reasoning_effort",
        Field::ToolChoice => "tool_choice",
        Field::ParallelToolCalls => "parallel_tool_calls",
        Field::User => "user",
        Field::Metadata => "metadata",
        Field::StreamOptions => "stream_options",
        Field::Thinking => "messages.reasoning_content",
        Field::SystemMessage => "messages.system",
        Field::ToolStrict => "tools.function.strict",
        Field::Audio => "messages.content.input_audio",
        Field::Logprobs => "logprobs",
        Field::TopLogprobs => "top_logprobs",
        Field::Choices => "n",
        _ => return None,
    })
}

/// A tool call's `extra_content`, where Google's OpenAI-compatible endpoint
/// puts a Gemini thought signature (`extra_content.google.thought_signature`):
/// the carrier of `ToolUse::signature` for OpenAI callers, whose 40-character
/// ids cannot hold one.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ExtraContent<S> {
    pub google: GoogleExtra<S>,
}

/// The `google` member of `extra_content`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct GoogleExtra<S> {
    pub thought_signature: S,
}

impl<'a> ExtraContent<&'a str> {
    /// The carrier of a call's signature, when it has one.
    pub(crate) fn of(signature: Option<&'a str>) -> Option<ExtraContent<&'a str>> {
        signature.map(|thought_signature| ExtraContent { google: GoogleExtra { thought_signature } })
    }
}

/// The signature in a tool call's `extra_content`, when one is there.
pub(crate) fn carried_signature(extra_content: Option<&Value>) -> Option<String> {
    let signature = extra_content?.get("google")?.get("thought_signature")?.as_str()?;
    (!signature.is_empty()).then(|| signature.to_owned())
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
    fn signatures_ride_in_extra_content() {
        let written = serde_json::to_value(ExtraContent::of(Some("c2ln"))).unwrap_or_default();
        assert_eq!(written, serde_json::json!({"google": {"thought_signature": "c2ln"}}));
        assert_eq!(carried_signature(Some(&written)), Some("c2ln".to_owned()));
        assert_eq!(carried_signature(Some(&serde_json::json!({"google": {}}))), None);
    }

    /// The usage of a Chat Completions reply as OpenAI's API reference
    /// shows it (an audio model's, served at the flex tier).
    #[test]
    fn usage_reads_every_kind_openai_reports() {
        let wire: WireUsage = serde_json::from_value(serde_json::json!({
            "prompt_tokens": 1117, "completion_tokens": 946, "total_tokens": 2063,
            "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 60},
            "completion_tokens_details": {"reasoning_tokens": 512, "audio_tokens": 300,
                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
        }))
        .unwrap();
        let usage = wire.to_ir(Some("flex"));
        assert_eq!((usage.input_tokens, usage.cache_read_tokens, usage.audio_input_tokens), (1117, 1024, 60));
        assert_eq!((usage.output_tokens, usage.reasoning_tokens, usage.audio_output_tokens), (946, 512, 300));
        assert_eq!(usage.service_tier, Some(ServiceTier::Flex));
        assert_eq!(service_tier_name(&usage), Some("flex"));
        assert_eq!(wire.to_ir(Some("default")).service_tier, Some(ServiceTier::Standard));
        assert_eq!(wire.to_ir(Some("auto")).service_tier, None, "auto is a request's choice, not a tier served");
        // Written back, every kind OpenAI has a field for is said.
        let back = serde_json::to_value(WireUsage::from_ir(&usage)).unwrap();
        assert_eq!(back["prompt_tokens_details"], serde_json::json!({"cached_tokens": 1024, "audio_tokens": 60}));
        assert_eq!(
            back["completion_tokens_details"],
            serde_json::json!({"reasoning_tokens": 512, "audio_tokens": 300})
        );
    }

    /// `prompt_tokens_details` as the pinned SDK's `PromptTokensDetails`
    /// types it: cache writes and image tokens are parts of the prompt,
    /// kept apart and said back.
    #[test]
    fn usage_reads_cache_writes_and_images_of_the_prompt() {
        let details = serde_json::json!({"cached_tokens": 4000, "cache_write_tokens": 1200, "audio_tokens": 600,
            "image_tokens": 500, "text_tokens": 7900});
        let wire: WireUsage = serde_json::from_value(serde_json::json!({
            "prompt_tokens": 9000, "completion_tokens": 10, "total_tokens": 9010, "prompt_tokens_details": details
        }))
        .unwrap();
        let usage = wire.to_ir(None);
        assert_eq!((usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens), (9000, 4000, 1200));
        assert_eq!((usage.audio_input_tokens, usage.image_input_tokens), (600, 500));
        assert_eq!(usage.cache_write_1h_tokens, 0, "OpenAI says no lifetime");
        let back = serde_json::to_value(WireUsage::from_ir(&usage)).unwrap();
        assert_eq!(
            back["prompt_tokens_details"],
            serde_json::json!({"cached_tokens": 4000, "cache_write_tokens": 1200, "audio_tokens": 600, "image_tokens": 500})
        );
    }

    #[test]
    fn report_dedupes() {
        let mut dropped = Vec::new();
        report(&mut dropped, Field::TopK);
        report(&mut dropped, Field::TopK);
        assert_eq!(dropped.len(), 1);
    }
}
