//! What a translation could not carry: [`Dropped`], named by a [`Field`]
//! from a fixed table (a bounded metric label that never comes from caller
//! input) and, for unmodelled fields, by the leaf path the caller wrote.

use serde::{Deserialize, Serialize};

/// A parameter or feature a translation can lose. The table is closed:
/// `as_str` names are the `field` label of
/// `switchyard_translation_dropped_total`. Each codec says where its
/// protocol carries the request parameters (`Codec::parameter_path`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    /// Output token cap.
    MaxTokens,
    /// Sampling temperature.
    Temperature,
    /// Nucleus sampling.
    TopP,
    /// Top-k sampling.
    TopK,
    /// Stop sequences.
    Stop,
    /// Sampling seed.
    Seed,
    /// Frequency penalty.
    FrequencyPenalty,
    /// Presence penalty.
    PresencePenalty,
    /// JSON output without a schema.
    JsonMode,
    /// JSON output constrained by a schema.
    JsonSchema,
    /// The schema's name.
    JsonSchemaName,
    /// Strict schema adherence as an explicit flag.
    JsonSchemaStrict,
    /// A JSON Schema keyword the target's schema dialect has no word for.
    SchemaKeyword,
    /// Reasoning effort level.
    ReasoningEffort,
    /// Thinking-token budget.
    ReasoningBudget,
    /// Thinking explicitly off.
    ReasoningOff,
    /// Tool-use policy.
    ToolChoice,
    /// Several tool calls per turn allowed or not.
    ParallelToolCalls,
    /// The end user the request is made for.
    User,
    /// Free-form request metadata.
    Metadata,
    /// Stream options other than usage.
    StreamOptions,
    /// Prompt-cache markers.
    CacheControl,
    /// Citations on text.
    Citations,
    /// Thinking blocks in a conversation.
    Thinking,
    /// Encrypted thinking blocks.
    RedactedThinking,
    /// Thinking or tool calls in a user turn.
    MisplacedBlock,
    /// Documents (PDF, text files).
    Document,
    /// A document's name.
    DocumentName,
    /// Media referenced by URL.
    MediaUrl,
    /// Media of a type the target does not take.
    MediaType,
    /// Audio input, where the target protocol or model takes none.
    Audio,
    /// Images or documents inside a tool result.
    ToolResultMedia,
    /// A tool result's error flag.
    ToolResultError,
    /// A tool result's tool name.
    ToolResultName,
    /// Why a reply stopped, where the target has no such reason.
    StopReason,
    /// The stop sequence that ended a reply.
    StopSequence,
    /// Cache-write token count.
    CacheWriteTokens,
    /// Reasoning token count.
    ReasoningTokens,
    /// A reply's id.
    ReplyId,
    /// A reply's model.
    ReplyModel,
    /// A reply's creation time.
    ReplyCreated,
    /// An embedding's vector size.
    Dimensions,
    /// What embedded text is for (query or document).
    InputType,
    /// What to do with an input longer than the model takes.
    Truncate,
    /// A title for embedded documents.
    EmbedTitle,
    /// How vectors come back (float or base64).
    Encoding,
    /// How many rerank results to return.
    TopN,
    /// Whether rerank results carry their documents.
    ReturnDocuments,
    /// A system message inside the conversation, where the target has
    /// none: its text moved to the system prompt (`converted`).
    SystemMessage,
    /// A tool's strict schema adherence.
    ToolStrict,
    /// Anthropic betas the caller turned on.
    Betas,
    /// How many images to make.
    ImageCount,
    /// An image's width and height.
    ImageSize,
    /// An image's quality level.
    ImageQuality,
    /// Images as URLs rather than base64.
    ResponseFormat,
    /// OpenAI's image style (`vivid`, `natural`).
    ImageStyle,
    /// OpenAI's image background (`transparent`).
    ImageBackground,
    /// What an image should not show.
    NegativePrompt,
    /// An image's encoding (PNG, JPEG, WebP).
    OutputFormat,
    /// Whether an image may show people.
    PersonGeneration,
    /// How closely an image follows its prompt.
    CfgScale,
    /// Log probabilities of the output tokens.
    Logprobs,
    /// The likeliest alternatives at each output token.
    TopLogprobs,
    /// Several replies to one request (OpenAI `n`, Gemini `candidateCount`).
    Choices,
    /// A field outside the modelled subset, read from another protocol.
    Unmodelled,
}

impl Field {
    /// Every field, in declaration order (`ALL[f.index()] == f`).
    pub const ALL: [Field; 65] = [
        Field::MaxTokens,
        Field::Temperature,
        Field::TopP,
        Field::TopK,
        Field::Stop,
        Field::Seed,
        Field::FrequencyPenalty,
        Field::PresencePenalty,
        Field::JsonMode,
        Field::JsonSchema,
        Field::JsonSchemaName,
        Field::JsonSchemaStrict,
        Field::SchemaKeyword,
        Field::ReasoningEffort,
        Field::ReasoningBudget,
        Field::ReasoningOff,
        Field::ToolChoice,
        Field::ParallelToolCalls,
        Field::User,
        Field::Metadata,
        Field::StreamOptions,
        Field::CacheControl,
        Field::Citations,
        Field::Thinking,
        Field::RedactedThinking,
        Field::MisplacedBlock,
        Field::Document,
        Field::DocumentName,
        Field::MediaUrl,
        Field::MediaType,
        Field::Audio,
        Field::ToolResultMedia,
        Field::ToolResultError,
        Field::ToolResultName,
        Field::StopReason,
        Field::StopSequence,
        Field::CacheWriteTokens,
        Field::ReasoningTokens,
        Field::ReplyId,
        Field::ReplyModel,
        Field::ReplyCreated,
        Field::Dimensions,
        Field::InputType,
        Field::Truncate,
        Field::EmbedTitle,
        Field::Encoding,
        Field::TopN,
        Field::ReturnDocuments,
        Field::SystemMessage,
        Field::ToolStrict,
        Field::Betas,
        Field::ImageCount,
        Field::ImageSize,
        Field::ImageQuality,
        Field::ResponseFormat,
        Field::ImageStyle,
        Field::ImageBackground,
        Field::NegativePrompt,
        Field::OutputFormat,
        Field::PersonGeneration,
        Field::CfgScale,
        Field::Logprobs,
        Field::TopLogprobs,
        Field::Choices,
        Field::Unmodelled,
    ];

    /// The field's position in [`Field::ALL`] (a dense index for counters).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The request parameters, in the order of the docs' parameter table.
    pub const PARAMETERS: [Field; 23] = [
        Field::MaxTokens,
        Field::Temperature,
        Field::TopP,
        Field::TopK,
        Field::Stop,
        Field::Seed,
        Field::FrequencyPenalty,
        Field::PresencePenalty,
        Field::JsonMode,
        Field::JsonSchema,
        Field::JsonSchemaName,
        Field::JsonSchemaStrict,
        Field::ReasoningEffort,
        Field::ReasoningBudget,
        Field::ReasoningOff,
        Field::ToolChoice,
        Field::ParallelToolCalls,
        Field::ToolStrict,
        Field::User,
        Field::Metadata,
        Field::Logprobs,
        Field::TopLogprobs,
        Field::Choices,
    ];

    /// The fixed name: a metric label, and the path of a field the caller's
    /// protocol has no path for.
    pub fn as_str(self) -> &'static str {
        match self {
            Field::MaxTokens => "max_tokens",
            Field::Temperature => "temperature",
            Field::TopP => "top_p",
            Field::TopK => "top_k",
            Field::Stop => "stop",
            Field::Seed => "seed",
            Field::FrequencyPenalty => "frequency_penalty",
            Field::PresencePenalty => "presence_penalty",
            Field::JsonMode => "json_mode",
            Field::JsonSchema => "json_schema",
            Field::JsonSchemaName => "json_schema.name",
            Field::JsonSchemaStrict => "json_schema.strict",
            Field::SchemaKeyword => "schema_keyword",
            Field::ReasoningEffort => "reasoning.effort",
            Field::ReasoningBudget => "reasoning.budget_tokens",
            Field::ReasoningOff => "reasoning.off",
            Field::ToolChoice => "tool_choice",
            Field::ParallelToolCalls => "parallel_tool_calls",
            Field::User => "user",
            Field::Metadata => "metadata",
            Field::StreamOptions => "stream_options",
            Field::CacheControl => "cache_control",
            Field::Citations => "citations",
            Field::Thinking => "thinking",
            Field::RedactedThinking => "redacted_thinking",
            Field::MisplacedBlock => "misplaced_block",
            Field::Document => "document",
            Field::DocumentName => "document.name",
            Field::MediaUrl => "media.url",
            Field::MediaType => "media.media_type",
            Field::Audio => "audio",
            Field::ToolResultMedia => "tool_result.media",
            Field::ToolResultError => "tool_result.is_error",
            Field::ToolResultName => "tool_result.name",
            Field::StopReason => "stop_reason",
            Field::StopSequence => "stop_sequence",
            Field::CacheWriteTokens => "usage.cache_write_tokens",
            Field::ReasoningTokens => "usage.reasoning_tokens",
            Field::ReplyId => "id",
            Field::ReplyModel => "model",
            Field::ReplyCreated => "created",
            Field::Dimensions => "dimensions",
            Field::InputType => "input_type",
            Field::Truncate => "truncate",
            Field::EmbedTitle => "title",
            Field::Encoding => "encoding_format",
            Field::TopN => "top_n",
            Field::ReturnDocuments => "return_documents",
            Field::SystemMessage => "system_message",
            Field::ToolStrict => "tools.strict",
            Field::Betas => "anthropic_beta",
            Field::ImageCount => "n",
            Field::ImageSize => "size",
            Field::ImageQuality => "quality",
            Field::ResponseFormat => "response_format",
            Field::ImageStyle => "style",
            Field::ImageBackground => "background",
            Field::NegativePrompt => "negative_prompt",
            Field::OutputFormat => "output_format",
            Field::PersonGeneration => "person_generation",
            Field::CfgScale => "cfg_scale",
            Field::Logprobs => "logprobs",
            Field::TopLogprobs => "top_logprobs",
            Field::Choices => "n",
            Field::Unmodelled => "unmodelled",
        }
    }
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A field that a translation could not carry into the target protocol.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    /// What was lost, from the fixed table.
    pub field: Field,
    /// For an unmodelled field, its leaf path as the caller wrote it
    /// (`generationConfig.candidateCount`): caller input, for headers and
    /// logs only. Modelled fields take their path from `field` and the
    /// caller's protocol.
    pub extra_path: Option<String>,
    /// Why it was dropped.
    pub reason: DropReason,
}

impl Dropped {
    /// A modelled field the target cannot carry.
    pub fn new(field: Field, reason: DropReason) -> Dropped {
        Dropped { field, extra_path: None, reason }
    }

    /// A modelled field the target has no way to say.
    pub fn unsupported(field: Field) -> Dropped {
        Dropped::new(field, DropReason::Unsupported)
    }

    /// An unmodelled field from another protocol, at its leaf path.
    pub fn unmodelled(path: String) -> Dropped {
        Dropped { field: Field::Unmodelled, extra_path: Some(path), reason: DropReason::CrossProtocolExtra }
    }

    /// Adds `field` once (a writer meets the same loss in many blocks).
    pub fn push_once(dropped: &mut Vec<Dropped>, field: Field, reason: DropReason) {
        if !dropped.iter().any(|d| d.field == field && d.extra_path.is_none()) {
            dropped.push(Dropped::new(field, reason));
        }
    }
}

/// Why a field did not survive a translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The target protocol has no way to say it.
    Unsupported,
    /// Carried in another form that loses the caller's exact value (an
    /// effort level as a token budget, a level the target lacks as its
    /// nearest one).
    Converted,
    /// The target model cannot take it (the lane's capabilities say so).
    Capability,
    /// An unmodelled field from another protocol; only same-protocol hops keep those.
    CrossProtocolExtra,
}

/// The leaf paths of an unmodelled value under `key`: objects are walked
/// (to a bounded depth), anything else is a leaf.
pub(crate) fn leaf_paths(key: &str, value: &serde_json::Value, out: &mut Vec<Dropped>) {
    fn walk(path: String, value: &serde_json::Value, depth: u32, out: &mut Vec<Dropped>) {
        match value {
            serde_json::Value::Object(members) if !members.is_empty() && depth < 8 => {
                for (key, member) in members {
                    walk(format!("{path}.{key}"), member, depth + 1, out);
                }
            }
            _ => out.push(Dropped::unmodelled(path)),
        }
    }
    walk(key.to_owned(), value, 0, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_listed_at_its_index() {
        for (index, field) in Field::ALL.iter().enumerate() {
            assert_eq!(field.index(), index, "{field:?}");
        }
    }
    use serde_json::json;

    #[test]
    fn unmodelled_values_are_reported_at_their_leaves() {
        let mut out = Vec::new();
        leaf_paths(
            "generationConfig",
            &json!({"candidateCount": 2, "thinkingConfig": {"includeThoughts": false}, "empty": {}}),
            &mut out,
        );
        leaf_paths("safetySettings", &json!([{"category": "x"}]), &mut out);
        let paths: Vec<&str> = out.iter().filter_map(|d| d.extra_path.as_deref()).collect();
        assert_eq!(
            paths,
            [
                "generationConfig.candidateCount",
                "generationConfig.thinkingConfig.includeThoughts",
                "generationConfig.empty",
                "safetySettings"
            ]
        );
        assert!(out.iter().all(|d| d.field == Field::Unmodelled));
    }

    #[test]
    fn parameters_have_distinct_names() {
        let mut names: Vec<&str> = Field::PARAMETERS.iter().map(|f| f.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Field::PARAMETERS.len());
    }
}
