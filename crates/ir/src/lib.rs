//! The superset intermediate representation (IR) of an LLM exchange.
//!
//! Every protocol codec reads its wire format into these types and writes them
//! back out, so translation between any two of the six protocols is one reader
//! plus one writer, never a pairwise translator. The IR is a superset: anything
//! one protocol can say has a place here, and what a writer cannot express is
//! reported as [`Dropped`] instead of vanishing.
//!
//! Conventions that every codec keeps:
//! - `Usage::input_tokens` counts *all* prompt tokens, cached ones included;
//!   `cache_read_tokens` and `cache_write_tokens` are parts of it. A protocol
//!   that reports uncached input separately (Anthropic) adds them on read and
//!   subtracts them on write.
//! - `Usage::output_tokens` counts all generated tokens, reasoning included;
//!   `reasoning_tokens` is a part of it.
//! - Tool-call arguments are JSON *text* (`ToolUse::input`), kept exactly as
//!   the caller or upstream sent it, because OpenAI-style protocols carry
//!   arguments as a string that is not guaranteed to be valid JSON.
//! - Floating point knobs are `f64` as received, never rounded or re-scaled.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod capabilities;
mod dropped;
mod operation;
mod reasoning;
mod stream;
pub use capabilities::Capabilities;
pub use dropped::{DropReason, Dropped, Field};
pub use operation::{
    Document, EmbedRequest, EmbedResponse, Encoding, InputType, Operation, Ranked, RerankRequest, RerankResponse,
    Truncate, Vector,
};
pub use reasoning::{Effort, Reasoning, Thinking};
pub use stream::{events_from_response, Accumulator, BlockStart, Delta, StreamEvent};

/// The protocol a message was read from. Used to tag pass-through fields so
/// that they survive a same-protocol hop and are reported on a cross one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// OpenAI Chat Completions.
    #[serde(rename = "openai")]
    OpenAi,
    /// OpenAI Responses.
    Responses,
    /// Anthropic Messages.
    Anthropic,
    /// Gemini generateContent.
    Gemini,
    /// Cohere v2 chat.
    Cohere,
    /// AWS Bedrock Converse.
    Bedrock,
}

impl Protocol {
    /// All six protocols, in a fixed order (tests and tables iterate this).
    pub const ALL: [Protocol; 6] = [
        Protocol::OpenAi,
        Protocol::Responses,
        Protocol::Anthropic,
        Protocol::Gemini,
        Protocol::Cohere,
        Protocol::Bedrock,
    ];

    /// The protocol's position in [`Protocol::ALL`] (a dense index for counters).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The config and log name of the protocol.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::OpenAi => "openai",
            Protocol::Responses => "responses",
            Protocol::Anthropic => "anthropic",
            Protocol::Gemini => "gemini",
            Protocol::Cohere => "cohere",
            Protocol::Bedrock => "bedrock",
        }
    }

    /// Parses a config name (`openai`, `responses`, ...).
    pub fn from_name(name: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Fields outside the modelled subset, tagged with the protocol they came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Extra {
    /// Where the fields were read; `None` when there are none.
    pub origin: Option<Protocol>,
    /// The raw fields, as received.
    pub fields: Map<String, Value>,
}

impl Extra {
    /// An empty set of extra fields.
    pub fn new() -> Extra {
        Extra::default()
    }

    /// Records one unmodelled field read from `origin`.
    pub fn insert(&mut self, origin: Protocol, key: String, value: Value) {
        self.origin = Some(origin);
        self.fields.insert(key, value);
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The fields a writer for `target` may emit: all of them on a same-protocol
    /// hop, none on a cross-protocol hop (those are reported in `dropped`,
    /// one per leaf: `generationConfig.candidateCount`, not the object).
    pub fn for_target(&self, target: Protocol, dropped: &mut Vec<Dropped>) -> Option<&Map<String, Value>> {
        if self.fields.is_empty() {
            return None;
        }
        if self.origin == Some(target) {
            return Some(&self.fields);
        }
        for (key, value) in &self.fields {
            dropped::leaf_paths(key, value, dropped);
        }
        None
    }
}

/// A chat request in canonical form.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// The model or pool as named by the caller (or the wire model on egress).
    pub model: String,
    /// System instructions, in order.
    pub system: Vec<TextBlock>,
    /// The conversation. Roles alternate freely; tool results travel as blocks.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    pub tools: Vec<Tool>,
    /// How the model must use the tools.
    pub tool_choice: Option<ToolChoice>,
    /// Whether several tool calls may come in one turn.
    pub parallel_tool_calls: Option<bool>,
    /// Output token cap.
    pub max_tokens: Option<u64>,
    /// Sampling temperature, exactly as sent.
    pub temperature: Option<f64>,
    /// Nucleus sampling, exactly as sent.
    pub top_p: Option<f64>,
    /// Top-k sampling.
    pub top_k: Option<u64>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Sampling seed.
    pub seed: Option<i64>,
    /// Frequency penalty.
    pub frequency_penalty: Option<f64>,
    /// Presence penalty.
    pub presence_penalty: Option<f64>,
    /// Structured output.
    pub response_format: Option<ResponseFormat>,
    /// Reasoning (thinking) controls.
    pub reasoning: Option<Reasoning>,
    /// Whether the caller wants a stream.
    pub stream: bool,
    /// The end user the request is made for.
    pub user: Option<String>,
    /// Free-form metadata the caller attached (string values).
    pub metadata: Map<String, Value>,
    /// Fields outside the modelled subset.
    pub extra: Extra,
}

impl Request {
    /// The text of the last user message's text blocks (used by the mock and
    /// by routing projections).
    pub fn last_user_text(&self) -> Option<String> {
        let message = self.messages.iter().rev().find(|m| m.role == Role::User)?;
        let mut text = String::new();
        for block in &message.content {
            if let Block::Text(t) = block {
                text.push_str(&t.text);
            }
        }
        Some(text)
    }

    /// Total characters of text across system and messages (routing signal).
    pub fn total_chars(&self) -> usize {
        let system: usize = self.system.iter().map(|b| b.text.chars().count()).sum();
        let messages: usize = self.messages.iter().flat_map(|m| m.content.iter()).map(Block::text_chars).sum();
        system + messages
    }
}

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The caller (tool results travel in user messages).
    User,
    /// The model.
    Assistant,
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said, in order.
    pub content: Vec<Block>,
}

impl Message {
    /// A message of a single text block.
    pub fn text(role: Role, text: impl Into<String>) -> Message {
        Message { role, content: vec![Block::Text(TextBlock::new(text))] }
    }
}

/// Prompt-cache marker (Anthropic `cache_control`, Bedrock `cachePoint`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheControl {
    /// Optional time to live as the vendor writes it (`5m`, `1h`).
    pub ttl: Option<String>,
}

/// A span of text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TextBlock {
    /// The text.
    pub text: String,
    /// Prompt-cache breakpoint after this block.
    pub cache_control: Option<CacheControl>,
    /// Citations as the source protocol wrote them (opaque JSON).
    pub citations: Vec<Value>,
}

impl TextBlock {
    /// Plain text with no markers.
    pub fn new(text: impl Into<String>) -> TextBlock {
        TextBlock { text: text.into(), cache_control: None, citations: Vec::new() }
    }
}

/// Where the bytes of an image or document are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MediaSource {
    /// Inline base64 data.
    Base64 {
        /// MIME type, e.g. `image/png`.
        media_type: String,
        /// Base64 text (standard alphabet).
        data: String,
    },
    /// A URL (http(s) or a vendor file URI).
    Url {
        /// The URL.
        url: String,
        /// MIME type when known.
        media_type: Option<String>,
    },
}

impl MediaSource {
    /// The MIME type when known.
    pub fn media_type(&self) -> Option<&str> {
        match self {
            MediaSource::Base64 { media_type, .. } => Some(media_type),
            MediaSource::Url { media_type, .. } => media_type.as_deref(),
        }
    }
}

/// A piece of message content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Block {
    /// Text.
    Text(TextBlock),
    /// An image.
    Image {
        /// Its bytes.
        source: MediaSource,
        /// Prompt-cache breakpoint after this block.
        cache_control: Option<CacheControl>,
    },
    /// A document (PDF or plain text file).
    Document {
        /// Its bytes.
        source: MediaSource,
        /// Display name or title.
        name: Option<String>,
        /// Prompt-cache breakpoint after this block.
        cache_control: Option<CacheControl>,
    },
    /// Visible reasoning.
    Thinking {
        /// The reasoning text.
        text: String,
        /// Integrity signature a later turn must send back.
        signature: Option<String>,
    },
    /// Reasoning the vendor encrypted.
    RedactedThinking {
        /// Opaque data a later turn must send back.
        data: String,
    },
    /// A call the model made.
    ToolUse(ToolUse),
    /// The result of a call, sent back by the caller.
    ToolResult(ToolResult),
}

impl Block {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Block {
        Block::Text(TextBlock::new(text))
    }

    fn text_chars(&self) -> usize {
        match self {
            Block::Text(t) => t.text.chars().count(),
            Block::Thinking { text, .. } => text.chars().count(),
            Block::ToolUse(t) => t.input.chars().count(),
            Block::ToolResult(r) => r.content.iter().map(Block::text_chars).sum(),
            Block::Image { .. } | Block::Document { .. } | Block::RedactedThinking { .. } => 0,
        }
    }
}

/// A tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolUse {
    /// Call id, echoed by the result.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments as JSON text, exactly as produced.
    pub input: String,
    /// The opaque signature the vendor attached to this call (Gemini's
    /// `thoughtSignature`), which it wants back with the call on a later
    /// turn. Callers of other protocols carry it as their protocol allows
    /// (`codec::signature`).
    pub signature: Option<String>,
}

impl ToolUse {
    /// A call without a signature.
    pub fn new(id: impl Into<String>, name: impl Into<String>, input: impl Into<String>) -> ToolUse {
        ToolUse { id: id.into(), name: name.into(), input: input.into(), signature: None }
    }
}

/// The result of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The call this answers.
    pub tool_use_id: String,
    /// The tool's name when the protocol carries it (Gemini keys results by name).
    pub name: Option<String>,
    /// Result content: text, images, documents.
    pub content: Vec<Block>,
    /// The tool failed.
    pub is_error: bool,
}

impl ToolResult {
    /// The result's text blocks joined, for protocols whose results are strings.
    pub fn joined_text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let Block::Text(t) = block {
                out.push_str(&t.text);
            }
        }
        out
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Name.
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// JSON schema of its arguments.
    pub parameters: Value,
    /// Prompt-cache breakpoint after this tool.
    pub cache_control: Option<CacheControl>,
}

/// Tool-use policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// The model must call some tool.
    Any,
    /// The model must not call tools.
    None,
    /// The model must call this tool.
    Tool(String),
}

/// Structured output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ResponseFormat {
    /// Any JSON object.
    JsonObject,
    /// JSON matching a schema.
    JsonSchema {
        /// Schema name (OpenAI requires one).
        name: String,
        /// The schema.
        schema: Value,
        /// Strict adherence.
        strict: Option<bool>,
    },
}

/// Why generation stopped, normalised across protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Natural end of turn.
    EndTurn,
    /// The output token cap was hit.
    MaxTokens,
    /// A stop sequence matched.
    StopSequence,
    /// The model called a tool.
    ToolUse,
    /// Output was filtered for safety.
    ContentFilter,
    /// The model refused.
    Refusal,
    /// The turn was paused (Anthropic `pause_turn`).
    Pause,
    /// The context window was exhausted.
    ContextLength,
    /// An error ended generation.
    Error,
}

impl StopReason {
    /// A stable lowercase name (telemetry's finish reason).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxTokens => "max_tokens",
            StopReason::StopSequence => "stop_sequence",
            StopReason::ToolUse => "tool_use",
            StopReason::ContentFilter => "content_filter",
            StopReason::Refusal => "refusal",
            StopReason::Pause => "pause_turn",
            StopReason::ContextLength => "context_length",
            StopReason::Error => "error",
        }
    }
}

impl ResponseFormat {
    /// The name a JSON schema is read with from a protocol whose schemas
    /// have none (Anthropic, Gemini, Cohere); writers of those protocols
    /// report only a name other than this one as lost.
    pub const UNNAMED: &'static str = "response";
}

/// Token accounting. See the crate docs for what each count includes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// All prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// All generated tokens, reasoning included.
    pub output_tokens: u64,
    /// Prompt tokens served from cache (part of `input_tokens`).
    pub cache_read_tokens: u64,
    /// Prompt tokens written to cache (part of `input_tokens`).
    pub cache_write_tokens: u64,
    /// Reasoning tokens (part of `output_tokens`).
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Input plus output.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// Prompt tokens that were neither read from nor written to cache.
    pub fn uncached_input(&self) -> u64 {
        self.input_tokens.saturating_sub(self.cache_read_tokens).saturating_sub(self.cache_write_tokens)
    }

    /// Folds a later report into this one: a non-zero count replaces the
    /// earlier one (streams report cumulative figures, some in pieces).
    pub fn merge(&mut self, later: &Usage) {
        fn take(mine: &mut u64, theirs: u64) {
            if theirs != 0 {
                *mine = theirs;
            }
        }
        take(&mut self.input_tokens, later.input_tokens);
        take(&mut self.output_tokens, later.output_tokens);
        take(&mut self.cache_read_tokens, later.cache_read_tokens);
        take(&mut self.cache_write_tokens, later.cache_write_tokens);
        take(&mut self.reasoning_tokens, later.reasoning_tokens);
    }
}

/// A complete (non-streamed) model reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// The vendor's response id.
    pub id: String,
    /// The model that served it.
    pub model: String,
    /// Unix seconds when it was created, when the protocol says.
    pub created: Option<i64>,
    /// The assistant's content.
    pub content: Vec<Block>,
    /// Why generation stopped.
    pub stop_reason: Option<StopReason>,
    /// The stop sequence that matched.
    pub stop_sequence: Option<String>,
    /// Token accounting.
    pub usage: Usage,
}

/// The class of an error, as every protocol can express it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Malformed or invalid request.
    InvalidRequest,
    /// Missing or bad credentials.
    Authentication,
    /// Credentials lack permission.
    PermissionDenied,
    /// Unknown model, pool or route.
    NotFound,
    /// The body is over the size limit.
    RequestTooLarge,
    /// Too many requests.
    RateLimit,
    /// Budget, quota or billing exhausted.
    QuotaExceeded,
    /// The prompt is longer than the model's context window.
    ContextLength,
    /// The backend is overloaded.
    Overloaded,
    /// The backend took too long.
    Timeout,
    /// No backend is available.
    Unavailable,
    /// Anything else on the server side.
    Internal,
}

impl ErrorKind {
    /// The HTTP status a gateway-written error of this kind carries by default.
    pub fn default_status(self) -> u16 {
        match self {
            ErrorKind::InvalidRequest | ErrorKind::ContextLength => 400,
            ErrorKind::Authentication => 401,
            ErrorKind::PermissionDenied => 403,
            ErrorKind::NotFound => 404,
            ErrorKind::RequestTooLarge => 413,
            ErrorKind::RateLimit | ErrorKind::QuotaExceeded => 429,
            ErrorKind::Overloaded => 529,
            ErrorKind::Timeout => 504,
            ErrorKind::Unavailable => 503,
            ErrorKind::Internal => 500,
        }
    }

    /// The kind a bare HTTP status implies.
    pub fn from_status(status: u16) -> ErrorKind {
        match status {
            401 => ErrorKind::Authentication,
            402 => ErrorKind::QuotaExceeded,
            403 => ErrorKind::PermissionDenied,
            404 => ErrorKind::NotFound,
            408 | 504 => ErrorKind::Timeout,
            413 => ErrorKind::RequestTooLarge,
            429 => ErrorKind::RateLimit,
            503 => ErrorKind::Unavailable,
            529 => ErrorKind::Overloaded,
            400..=499 => ErrorKind::InvalidRequest,
            _ => ErrorKind::Internal,
        }
    }
}

/// An error to show a caller, in protocol-neutral terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// Its class.
    pub kind: ErrorKind,
    /// HTTP status to answer with.
    pub status: u16,
    /// Human-readable message (lowercase, no trailing period, for our own).
    pub message: String,
    /// The vendor's own error type or code, when relaying an upstream error.
    pub code: Option<String>,
    /// The request parameter at fault, when known.
    pub param: Option<String>,
}

impl ErrorInfo {
    /// An error of `kind` with its default status.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ErrorInfo {
        ErrorInfo { kind, status: kind.default_status(), message: message.into(), code: None, param: None }
    }

    /// The same error with another status.
    pub fn with_status(mut self, status: u16) -> ErrorInfo {
        self.status = status;
        self
    }
}

#[cfg(test)]
mod protocol_tests {
    use super::*;

    #[test]
    fn every_protocol_is_listed_at_its_index() {
        for (index, protocol) in Protocol::ALL.iter().enumerate() {
            assert_eq!(protocol.index(), index, "{protocol:?}");
            assert_eq!(Protocol::from_name(protocol.as_str()), Some(*protocol));
        }
    }
}
