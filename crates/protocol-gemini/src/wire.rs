//! Gemini wire types: the JSON shapes of `generateContent` contents, parts,
//! responses, usage and errors. Field names are camelCase on output; the
//! REST API also accepts snake_case, so every field takes a snake_case alias
//! on input.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The documented placeholder signature that makes Gemini 3 accept a
/// function call whose real signature is unknown (history from another
/// vendor). Written by the request writer, never surfaced by the reader.
pub(crate) const SKIP_SIGNATURE: &str = "skip_thought_signature_validator";

/// One turn: `{role, parts}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Content {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default)]
    pub parts: Vec<Part>,
}

/// One part of a turn. Exactly one payload field is set on the wire; the
/// reader tolerates several and takes them in a fixed order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Part {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought: Option<bool>,
    /// Base64 on the wire (Google's SDKs decode it): another vendor's
    /// signature rides it wrapped (`codec::signature::to_base64`).
    #[serde(
        default,
        alias = "thought_signature",
        skip_serializing_if = "Option::is_none",
        serialize_with = "signature_as_base64",
        deserialize_with = "signature_from_base64"
    )]
    pub thought_signature: Option<String>,
    #[serde(default, alias = "inline_data", skip_serializing_if = "Option::is_none")]
    pub inline_data: Option<Blob>,
    #[serde(default, alias = "file_data", skip_serializing_if = "Option::is_none")]
    pub file_data: Option<FileData>,
    #[serde(default, alias = "function_call", skip_serializing_if = "Option::is_none")]
    pub function_call: Option<FunctionCall>,
    #[serde(default, alias = "function_response", skip_serializing_if = "Option::is_none")]
    pub function_response: Option<FunctionResponse>,
    #[serde(default, alias = "executable_code", skip_serializing_if = "Option::is_none")]
    pub executable_code: Option<ExecutableCode>,
    #[serde(default, alias = "code_execution_result", skip_serializing_if = "Option::is_none")]
    pub code_execution_result: Option<CodeExecutionResult>,
    /// A caller's members the IR does not model (`videoMetadata`,
    /// `mediaResolution`, `partMetadata`, a `toolCall` part...), written
    /// back as they came on a same-protocol hop. Set by the request reader
    /// (`parts::take_unmodelled`), never deserialised: a reply's parts are
    /// read as they always were.
    #[serde(flatten, skip_deserializing, skip_serializing_if = "Map::is_empty")]
    pub kept: Map<String, Value>,
}

/// Inline bytes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Blob {
    #[serde(default, alias = "mime_type")]
    pub mime_type: String,
    #[serde(default)]
    pub data: String,
}

/// Bytes behind a URI (Files API, Cloud Storage, http).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FileData {
    #[serde(default, alias = "mime_type", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, alias = "file_uri")]
    pub file_uri: String,
}

/// A call the model made. `id` is optional and often absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FunctionCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
}

/// The caller's answer to a call, keyed by name (and `id` when present).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FunctionResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Value>,
    /// Media returned by the function (Gemini 3 multimodal results).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<FunctionResponsePart>,
}

/// A media part inside a function response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FunctionResponsePart {
    #[serde(default, alias = "inline_data", skip_serializing_if = "Option::is_none")]
    pub inline_data: Option<Blob>,
    #[serde(default, alias = "file_data", skip_serializing_if = "Option::is_none")]
    pub file_data: Option<FileData>,
}

/// Code the model wrote for the code-execution tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ExecutableCode {
    #[serde(default)]
    pub language: Option<String>,
    #[serde(default)]
    pub code: String,
}

/// The output of the code-execution tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct CodeExecutionResult {
    #[serde(default)]
    pub outcome: Option<String>,
    #[serde(default)]
    pub output: Option<String>,
}

/// `generationConfig`, with the fields the IR models pulled out and the rest kept.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GenerationConfigIn {
    #[serde(default, alias = "max_output_tokens")]
    pub max_output_tokens: Option<u64>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default, alias = "top_p")]
    pub top_p: Option<f64>,
    /// A float in some SDKs (`top_k: float`), an int32 in the API.
    #[serde(default, alias = "top_k")]
    pub top_k: Option<f64>,
    #[serde(default, alias = "stop_sequences")]
    pub stop_sequences: Option<Vec<String>>,
    #[serde(default)]
    pub seed: Option<i64>,
    #[serde(default, alias = "frequency_penalty")]
    pub frequency_penalty: Option<f64>,
    #[serde(default, alias = "presence_penalty")]
    pub presence_penalty: Option<f64>,
    #[serde(default, alias = "response_mime_type")]
    pub response_mime_type: Option<String>,
    #[serde(default, alias = "response_schema")]
    pub response_schema: Option<Value>,
    #[serde(default, alias = "response_json_schema")]
    pub response_json_schema: Option<Value>,
    #[serde(default, alias = "thinking_config")]
    pub thinking_config: Option<ThinkingConfigIn>,
    #[serde(default, alias = "candidate_count")]
    pub candidate_count: Option<u32>,
    #[serde(default, alias = "response_logprobs")]
    pub response_logprobs: Option<bool>,
    #[serde(default)]
    pub logprobs: Option<u32>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// `generationConfig.thinkingConfig`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ThinkingConfigIn {
    #[serde(default, alias = "thinking_budget")]
    pub thinking_budget: Option<i64>,
    #[serde(default, alias = "include_thoughts")]
    pub include_thoughts: Option<bool>,
    #[serde(default, alias = "thinking_level")]
    pub thinking_level: Option<String>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// One entry of `tools[].functionDeclarations`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FunctionDeclarationIn {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub parameters: Option<Value>,
    #[serde(default, alias = "parameters_json_schema")]
    pub parameters_json_schema: Option<Value>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// `toolConfig`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolConfigIn {
    #[serde(default, alias = "function_calling_config")]
    pub function_calling_config: Option<FunctionCallingConfigIn>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// `toolConfig.functionCallingConfig`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FunctionCallingConfigIn {
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default, alias = "allowed_function_names")]
    pub allowed_function_names: Option<Vec<String>>,
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

/// A whole reply, or one streamed chunk of it (same shape). A streamed
/// error arrives as `{"error": {...}}` in place of a chunk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GenerateContentResponse {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<Candidate>,
    #[serde(default, alias = "prompt_feedback", skip_serializing_if = "Option::is_none")]
    pub prompt_feedback: Option<PromptFeedback>,
    #[serde(default, alias = "usage_metadata", skip_serializing_if = "Option::is_none")]
    pub usage_metadata: Option<UsageMetadata>,
    #[serde(default, alias = "model_version", skip_serializing_if = "Option::is_none")]
    pub model_version: Option<String>,
    #[serde(default, alias = "response_id", skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    #[serde(default, alias = "create_time", skip_serializing_if = "Option::is_none")]
    pub create_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

/// One candidate reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Candidate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    #[serde(default, alias = "finish_reason", skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    /// The tokens' log probabilities, when `responseLogprobs` asked.
    #[serde(default, alias = "logprobs_result", skip_serializing_if = "Option::is_none")]
    pub logprobs_result: Option<LogprobsResult>,
}

/// `logprobsResult`: at each decoding step, the chosen token and the
/// likeliest ones (`topCandidates`, most likely first).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LogprobsResult {
    #[serde(default, alias = "top_candidates")]
    pub top_candidates: Vec<TopCandidates>,
    #[serde(default, alias = "chosen_candidates")]
    pub chosen_candidates: Vec<LogprobsCandidate>,
}

/// The likeliest tokens at one step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TopCandidates {
    #[serde(default)]
    pub candidates: Vec<LogprobsCandidate>,
}

/// A token and its log probability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LogprobsCandidate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, alias = "token_id", skip_serializing_if = "Option::is_none")]
    pub token_id: Option<i64>,
    #[serde(default, alias = "log_probability", skip_serializing_if = "Option::is_none")]
    pub log_probability: Option<f64>,
}

impl LogprobsResult {
    /// The IR's tokens: each chosen one with the step's likeliest.
    pub(crate) fn into_ir(self) -> Vec<switchyard_codec::ir::TokenLogprob> {
        use switchyard_codec::ir::{TokenLogprob, TopLogprob};
        let mut tops = self.top_candidates.into_iter();
        self.chosen_candidates
            .into_iter()
            .map(|chosen| TokenLogprob {
                token: chosen.token.unwrap_or_default(),
                logprob: chosen.log_probability.unwrap_or(0.0),
                bytes: None,
                id: chosen.token_id,
                top: tops
                    .next()
                    .map(|top| top.candidates)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|top| TopLogprob {
                        token: top.token.unwrap_or_default(),
                        logprob: top.log_probability.unwrap_or(0.0),
                        bytes: None,
                        id: top.token_id,
                    })
                    .collect(),
            })
            .collect()
    }

    /// Gemini's form of the IR's tokens; `None` when there are none.
    pub(crate) fn of(tokens: &[switchyard_codec::ir::TokenLogprob]) -> Option<LogprobsResult> {
        if tokens.is_empty() {
            return None;
        }
        let candidate = |token: &str, id: Option<i64>, logprob: f64| LogprobsCandidate {
            token: Some(token.to_owned()),
            token_id: id,
            log_probability: Some(logprob),
        };
        Some(LogprobsResult {
            top_candidates: tokens
                .iter()
                .map(|token| TopCandidates {
                    candidates: token.top.iter().map(|top| candidate(&top.token, top.id, top.logprob)).collect(),
                })
                .collect(),
            chosen_candidates: tokens.iter().map(|token| candidate(&token.token, token.id, token.logprob)).collect(),
        })
    }
}

/// Why a prompt was refused before any candidate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PromptFeedback {
    #[serde(default, alias = "block_reason", skip_serializing_if = "Option::is_none")]
    pub block_reason: Option<String>,
}

/// `usageMetadata`. `promptTokenCount` already includes cached tokens.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UsageMetadata {
    #[serde(default, alias = "prompt_token_count", skip_serializing_if = "Option::is_none")]
    pub prompt_token_count: Option<u64>,
    #[serde(default, alias = "candidates_token_count", skip_serializing_if = "Option::is_none")]
    pub candidates_token_count: Option<u64>,
    #[serde(default, alias = "total_token_count", skip_serializing_if = "Option::is_none")]
    pub total_token_count: Option<u64>,
    #[serde(default, alias = "cached_content_token_count", skip_serializing_if = "Option::is_none")]
    pub cached_content_token_count: Option<u64>,
    #[serde(default, alias = "thoughts_token_count", skip_serializing_if = "Option::is_none")]
    pub thoughts_token_count: Option<u64>,
    #[serde(default, alias = "tool_use_prompt_token_count", skip_serializing_if = "Option::is_none")]
    pub tool_use_prompt_token_count: Option<u64>,
    /// The prompt's tokens by modality (`TEXT`, `IMAGE`, `AUDIO`, ...).
    #[serde(default, alias = "prompt_tokens_details", skip_serializing_if = "Vec::is_empty")]
    pub prompt_tokens_details: Vec<ModalityTokenCount>,
    /// The candidates' tokens by modality.
    #[serde(default, alias = "candidates_tokens_details", skip_serializing_if = "Vec::is_empty")]
    pub candidates_tokens_details: Vec<ModalityTokenCount>,
}

/// One modality's share of a count (`ModalityTokenCount`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ModalityTokenCount {
    #[serde(default)]
    pub modality: String,
    #[serde(default, alias = "token_count")]
    pub token_count: u64,
}

impl ModalityTokenCount {
    /// The tokens of `modality` among `details`.
    pub(crate) fn of(details: &[ModalityTokenCount], modality: &str) -> u64 {
        details.iter().filter(|d| d.modality == modality).map(|d| d.token_count).fold(0, u64::saturating_add)
    }
}

/// `{"error": {...}}`: the Google RPC status shape.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ErrorEnvelope {
    pub error: ErrorBody,
}

/// The error itself: HTTP code, message, canonical status name, details.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ErrorBody {
    /// A number from Google; some proxies send a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<Value>,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<Value>,
}

fn signature_as_base64<S: serde::Serializer>(signature: &Option<String>, out: S) -> Result<S::Ok, S::Error> {
    match signature {
        Some(signature) => out.serialize_str(&switchyard_codec::signature::to_base64(signature, SKIP_SIGNATURE)),
        None => out.serialize_none(),
    }
}

fn signature_from_base64<'de, D: serde::Deserializer<'de>>(input: D) -> Result<Option<String>, D::Error> {
    let text: Option<String> = Option::deserialize(input)?;
    Ok(text.map(|text| match switchyard_codec::signature::from_base64(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(signature) => signature,
    }))
}
