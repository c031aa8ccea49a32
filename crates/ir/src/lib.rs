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
//!   `reasoning_tokens` is a part of it, and so are audio and image output.
//!   Audio and image input, cache writes of either lifetime
//!   (`cache_write_1h_tokens` is the hour-long part of
//!   `cache_write_tokens`) and the tool-use prompt Gemini adds are parts of
//!   `input_tokens`. A writer says each kind its protocol has a field for
//!   and folds the rest into the totals.
//! - Tool-call arguments are JSON *text* (`ToolUse::input`), kept exactly as
//!   the caller or upstream sent it, because OpenAI-style protocols carry
//!   arguments as a string that is not guaranteed to be valid JSON.
//! - Floating point knobs are `f64` as received, never rounded or re-scaled.
//! - `Request::system` is the system prompt before the conversation; a
//!   message of [`Role::System`] is an instruction at its place in the
//!   conversation (Anthropic's and Bedrock's `system` messages, OpenAI's
//!   `system` or `developer` message after the first turn). A writer whose
//!   dialect has no such message carries its text in the closest form and
//!   reports the move as [`Field::SystemMessage`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

mod capabilities;
mod dropped;
mod image;
mod operation;
mod reasoning;
mod stream;
pub use capabilities::{Capabilities, Efforts, Fields, Prefill};
pub use dropped::{DropReason, Dropped, Field};
pub use image::{Image, ImageFormat, ImageRequest, ImageResponse};
pub use operation::{
    Document, EmbedRequest, EmbedResponse, Encoding, InputType, Operation, Quantized, Ranked, RerankRequest,
    RerankResponse, Truncate, Vector,
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

    /// [`Extra::for_target`] for the fields of a part of the request (a
    /// message, a tool): a loss is reported once per leaf under `under`
    /// (`messages.clear_at`, `tools.defer_loading`), however many parts had it.
    pub fn for_target_under(
        &self,
        target: Protocol,
        under: &str,
        dropped: &mut Vec<Dropped>,
    ) -> Option<&Map<String, Value>> {
        if self.fields.is_empty() {
            return None;
        }
        if self.origin == Some(target) {
            return Some(&self.fields);
        }
        self.report_under(under, dropped);
        None
    }

    /// Reports every field as lost, once per leaf under `under`, whatever
    /// the target (a part of the request a writer has no place for).
    pub fn report_under(&self, under: &str, dropped: &mut Vec<Dropped>) {
        let mut leaves = Vec::new();
        for (key, value) in &self.fields {
            dropped::leaf_paths(&format!("{under}.{key}"), value, &mut leaves);
        }
        for leaf in leaves {
            if !dropped.iter().any(|d| d.extra_path == leaf.extra_path) {
                dropped.push(leaf);
            }
        }
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
    /// The Anthropic betas the caller turned on (its `anthropic-beta`
    /// header, or Bedrock's `additionalModelRequestFields.anthropic_beta`),
    /// one name each, in order. A Claude lane on Bedrock takes them in its
    /// body; an Anthropic lane gets the caller's header as it came; other
    /// lanes report them ([`Field::Betas`]).
    pub betas: Vec<String>,
    /// Log probabilities of the output tokens, with this many likeliest
    /// alternatives at each place (0: the chosen token's alone): OpenAI's
    /// `logprobs` with `top_logprobs`, Gemini's `responseLogprobs` with
    /// `logprobs`, Cohere's `logprobs`. `None`: not asked.
    pub logprobs: Option<u32>,
    /// How many replies to generate (OpenAI `n`, Gemini `candidateCount`);
    /// `None` or 1: one.
    pub n: Option<u32>,
    /// Fields outside the modelled subset.
    pub extra: Extra,
}

impl Request {
    /// How many replies the request asks for beyond one (0 for one).
    pub fn extra_choices(&self) -> u32 {
        self.n.unwrap_or(1).saturating_sub(1)
    }

    /// Reports, for a lane whose protocol has neither, the log
    /// probabilities and the extra replies the request asks for.
    pub fn report_logprobs_and_n(&self, dropped: &mut Vec<Dropped>) {
        if let Some(top) = self.logprobs {
            Dropped::push_once(dropped, Field::Logprobs, DropReason::Unsupported);
            if top > 0 {
                Dropped::push_once(dropped, Field::TopLogprobs, DropReason::Unsupported);
            }
        }
        if self.extra_choices() > 0 {
            Dropped::push_once(dropped, Field::Choices, DropReason::Unsupported);
        }
    }

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
    /// The operator or the harness: an instruction at this place in the
    /// conversation (its text blocks, and tool changes as
    /// [`Block::Unmodelled`]).
    System,
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said, in order.
    pub content: Vec<Block>,
    /// The message's members outside the modelled subset (an Anthropic
    /// system message's `clear_at` and `output_config`): written back on a
    /// same-protocol hop, reported at `messages.<member>` on another.
    pub extra: Extra,
}

impl Message {
    /// A message of `content` and nothing else.
    pub fn new(role: Role, content: Vec<Block>) -> Message {
        Message { role, content, extra: Extra::new() }
    }

    /// A message of a single text block.
    pub fn text(role: Role, text: impl Into<String>) -> Message {
        Message::new(role, vec![Block::Text(TextBlock::new(text))])
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

/// Where the bytes of an image, audio or document are.
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
    /// Audio the model listens to (OpenAI Chat `input_audio`, a Gemini
    /// part of an `audio/*` MIME type, a Bedrock `audio` block). Its MIME
    /// type is the source's (`audio/wav`, `audio/mp3`); `codec::media`
    /// maps it to the formats the protocols name.
    Audio {
        /// Its bytes (or where they are: a vendor file URI, an S3 URI).
        source: MediaSource,
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
    /// A block of a type the IR does not model, as its protocol wrote it.
    Unmodelled(Unmodelled),
}

/// A content block the IR has no form for (Anthropic's server-tool calls
/// and results, search results, tool additions and removals): a lane of
/// `origin`'s protocol gets it back as it came, any other reports it at
/// `path` ([`Dropped::unmodelled`]), for the vendor's own validation is
/// the only judge of what it means.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unmodelled {
    /// The protocol that wrote it.
    pub origin: Protocol,
    /// Where the caller's protocol keeps it, by type
    /// (`messages.content.server_tool_use`): the report's path.
    pub path: String,
    /// The block as it came.
    pub value: Value,
    /// Members of the part before it that the IR does not model
    /// (`image_url.detail`, Gemini's `videoMetadata`), not a block of its
    /// own: `value` is an object a same-protocol writer merges into the
    /// part it wrote for the block before ([`Unmodelled::merge_into`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub beside: bool,
}

impl Unmodelled {
    /// Merges a `beside` block's members into `part`, object into object
    /// (`{"image_url": {"detail": "low"}}` joins the part's `image_url`).
    pub fn merge_into(members: &Value, part: &mut Map<String, Value>) {
        let Value::Object(members) = members else { return };
        for (key, member) in members {
            match (part.get_mut(key), member) {
                (Some(Value::Object(mine)), Value::Object(_)) => Unmodelled::merge_into(member, mine),
                _ => {
                    part.insert(key.clone(), member.clone());
                }
            }
        }
    }

    /// The block as `target` may write it: itself on a same-protocol hop;
    /// elsewhere nothing, and the loss is reported.
    pub fn for_target(&self, target: Protocol, dropped: &mut Vec<Dropped>) -> Option<&Value> {
        if self.origin == target {
            return Some(&self.value);
        }
        self.report(dropped);
        None
    }

    /// Reports the block as lost (once), whatever the target.
    pub fn report(&self, dropped: &mut Vec<Dropped>) {
        if !dropped.iter().any(|d| d.extra_path.as_deref() == Some(self.path.as_str())) {
            dropped.push(Dropped::unmodelled(self.path.clone()));
        }
    }
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
            Block::Image { .. }
            | Block::Audio { .. }
            | Block::Document { .. }
            | Block::RedactedThinking { .. }
            | Block::Unmodelled(_) => 0,
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Name.
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// JSON schema of its arguments.
    pub parameters: Value,
    /// Prompt-cache breakpoint after this tool.
    pub cache_control: Option<CacheControl>,
    /// The call's arguments must follow the schema exactly (OpenAI's and
    /// Anthropic's `strict`, Bedrock's `toolSpec.strict`).
    pub strict: Option<bool>,
    /// The tool's members outside the modelled subset (Anthropic's
    /// `defer_loading`, `input_examples`): written back on a same-protocol
    /// hop, reported at `tools.<member>` on another.
    pub extra: Extra,
}

impl Tool {
    /// A function tool and nothing more.
    pub fn function(name: impl Into<String>, description: Option<String>, parameters: Value) -> Tool {
        Tool { name: name.into(), description, parameters, ..Tool::default() }
    }
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

/// Token accounting: every kind a provider reports and bills. See the crate
/// docs for what each count includes: the input-side kinds (cache reads
/// and writes, audio and image input, tool-use prompts) are parts of
/// `input_tokens`, the output-side ones (reasoning, audio and image
/// output) parts of `output_tokens`; a count of zero is one the upstream
/// did not report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Usage {
    /// All prompt tokens, cached ones included.
    pub input_tokens: u64,
    /// All generated tokens, reasoning included.
    pub output_tokens: u64,
    /// Prompt tokens served from cache (part of `input_tokens`).
    pub cache_read_tokens: u64,
    /// Prompt tokens written to cache, whatever their lifetime (part of
    /// `input_tokens`).
    pub cache_write_tokens: u64,
    /// Of `cache_write_tokens`, those written to live an hour (Anthropic's
    /// `ephemeral_1h_input_tokens`); the rest live five minutes.
    pub cache_write_1h_tokens: u64,
    /// Reasoning tokens (part of `output_tokens`).
    pub reasoning_tokens: u64,
    /// Audio prompt tokens (part of `input_tokens`).
    pub audio_input_tokens: u64,
    /// Audio generated (part of `output_tokens`).
    pub audio_output_tokens: u64,
    /// Image prompt tokens (part of `input_tokens`).
    pub image_input_tokens: u64,
    /// Image tokens generated (part of `output_tokens`).
    pub image_output_tokens: u64,
    /// Prompt tokens the upstream's own tool use added (Gemini's
    /// `toolUsePromptTokenCount`; part of `input_tokens`).
    pub tool_prompt_tokens: u64,
    /// Web searches the upstream ran for the answer (Anthropic's
    /// `server_tool_use.web_search_requests`), billed per search.
    pub web_searches: u64,
    /// The service tier that served the request, when the upstream says.
    pub service_tier: Option<ServiceTier>,
}

/// The service tier a vendor served a request at (it prices them apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceTier {
    /// The standard tier (OpenAI `default`, Anthropic `standard`).
    Standard,
    /// Priority processing.
    Priority,
    /// Flex processing (slower, cheaper).
    Flex,
    /// OpenAI's scale tier.
    Scale,
    /// A batch (Anthropic reports batch requests so).
    Batch,
}

impl ServiceTier {
    /// Every tier, in a fixed order (a dense index for tables).
    pub const ALL: [ServiceTier; 5] =
        [ServiceTier::Standard, ServiceTier::Priority, ServiceTier::Flex, ServiceTier::Scale, ServiceTier::Batch];

    /// The config and ledger name.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceTier::Standard => "standard",
            ServiceTier::Priority => "priority",
            ServiceTier::Flex => "flex",
            ServiceTier::Scale => "scale",
            ServiceTier::Batch => "batch",
        }
    }

    /// The tier a vendor names (`default` and `standard` are the standard
    /// tier); `None` for a name no vendor bills apart.
    pub fn parse(name: &str) -> Option<ServiceTier> {
        Some(match name {
            "default" | "standard" | "on_demand" => ServiceTier::Standard,
            "priority" => ServiceTier::Priority,
            "flex" => ServiceTier::Flex,
            "scale" => ServiceTier::Scale,
            "batch" => ServiceTier::Batch,
            _ => return None,
        })
    }

    /// Its place in [`ServiceTier::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
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

    /// Cache writes that live five minutes (all but the hour-long ones).
    pub fn cache_write_5m_tokens(&self) -> u64 {
        self.cache_write_tokens.saturating_sub(self.cache_write_1h_tokens)
    }

    /// Whether the upstream reported anything at all (a served chat reply
    /// always has a prompt).
    pub fn reported(&self) -> bool {
        self.input_tokens != 0 || self.output_tokens != 0
    }

    /// The counts known before any output: the output side zeroed (a
    /// stream's first event).
    pub fn prompt_side(&self) -> Usage {
        Usage {
            output_tokens: 0,
            reasoning_tokens: 0,
            audio_output_tokens: 0,
            image_output_tokens: 0,
            web_searches: 0,
            ..*self
        }
    }

    /// Folds a later report into this one: a non-zero count replaces the
    /// earlier one (streams report cumulative figures, some in pieces).
    pub fn merge(&mut self, later: &Usage) {
        self.zip_with(later, |mine, theirs| if theirs != 0 { theirs } else { mine });
        if later.service_tier.is_some() {
            self.service_tier = later.service_tier;
        }
    }

    /// This and `other` added, count by count (two parts of one answer;
    /// the later part's service tier wins).
    pub fn added(mut self, other: &Usage) -> Usage {
        self.zip_with(other, u64::saturating_add);
        self.service_tier = other.service_tier.or(self.service_tier);
        self
    }

    fn zip_with(&mut self, other: &Usage, f: impl Fn(u64, u64) -> u64) {
        let mine = [
            &mut self.input_tokens,
            &mut self.output_tokens,
            &mut self.cache_read_tokens,
            &mut self.cache_write_tokens,
            &mut self.cache_write_1h_tokens,
            &mut self.reasoning_tokens,
            &mut self.audio_input_tokens,
            &mut self.audio_output_tokens,
            &mut self.image_input_tokens,
            &mut self.image_output_tokens,
            &mut self.tool_prompt_tokens,
            &mut self.web_searches,
        ];
        let theirs = [
            other.input_tokens,
            other.output_tokens,
            other.cache_read_tokens,
            other.cache_write_tokens,
            other.cache_write_1h_tokens,
            other.reasoning_tokens,
            other.audio_input_tokens,
            other.audio_output_tokens,
            other.image_input_tokens,
            other.image_output_tokens,
            other.tool_prompt_tokens,
            other.web_searches,
        ];
        for (slot, value) in mine.into_iter().zip(theirs) {
            *slot = f(*slot, value);
        }
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
    /// The log probabilities of the reply's tokens, when asked for (empty:
    /// none).
    pub logprobs: Vec<TokenLogprob>,
    /// The replies after the first, when several were asked for (`n`,
    /// `candidateCount`): the first is this response's own content, the
    /// choice at place `i` here is reply `i + 1`. Empty for one reply.
    pub choices: Vec<Choice>,
}

/// One reply of several (OpenAI's `choices[i]`, Gemini's `candidates[i]`)
/// after the first, which is the [`Response`] itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// Its content.
    pub content: Vec<Block>,
    /// Why its generation stopped.
    pub stop_reason: Option<StopReason>,
    /// Its tokens' log probabilities, when asked for.
    pub logprobs: Vec<TokenLogprob>,
}

/// A generated token's log probability, with the likeliest tokens at its
/// place (OpenAI `logprobs.content[]`, Gemini `chosenCandidates[]` with
/// `topCandidates[]`, Cohere `logprobs[]`, completions' parallel arrays).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    /// The token's text.
    pub token: String,
    /// Its log probability, as sent.
    pub logprob: f64,
    /// Its UTF-8 bytes, when the vendor gives them (OpenAI).
    pub bytes: Option<Vec<u8>>,
    /// Its id in the model's vocabulary, when the vendor gives it (Gemini,
    /// Cohere).
    pub id: Option<i64>,
    /// The likeliest tokens at this place, most likely first.
    pub top: Vec<TopLogprob>,
}

/// An alternative token at a place, with its log probability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TopLogprob {
    /// The token's text.
    pub token: String,
    /// Its log probability, as sent.
    pub logprob: f64,
    /// Its UTF-8 bytes, when the vendor gives them.
    pub bytes: Option<Vec<u8>>,
    /// Its id, when the vendor gives it.
    pub id: Option<i64>,
}

impl TokenLogprob {
    /// The token's bytes: the vendor's, else its text's.
    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_deref().unwrap_or(self.token.as_bytes())
    }
}

impl TopLogprob {
    /// The token's bytes: the vendor's, else its text's.
    pub fn bytes(&self) -> &[u8] {
        self.bytes.as_deref().unwrap_or(self.token.as_bytes())
    }
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

#[cfg(test)]
mod usage_tests {
    use super::*;

    #[test]
    fn a_later_report_replaces_what_it_carries_and_parts_add_up() {
        let start = Usage { input_tokens: 300, cache_write_tokens: 100, cache_write_1h_tokens: 60, ..Usage::default() };
        let mut seen = start;
        let end = Usage {
            output_tokens: 50,
            reasoning_tokens: 20,
            web_searches: 2,
            service_tier: Some(ServiceTier::Priority),
            ..Usage::default()
        };
        seen.merge(&end);
        assert_eq!((seen.input_tokens, seen.cache_write_1h_tokens, seen.output_tokens), (300, 60, 50));
        assert_eq!((seen.web_searches, seen.service_tier), (2, Some(ServiceTier::Priority)));
        assert_eq!(seen.cache_write_5m_tokens(), 40);
        assert_eq!(seen.prompt_side(), Usage { service_tier: Some(ServiceTier::Priority), ..start });
        let both = seen.added(&seen);
        assert_eq!((both.input_tokens, both.reasoning_tokens, both.web_searches), (600, 40, 4));
        assert!(!Usage::default().reported() && seen.reported());
    }

    #[test]
    fn service_tiers_read_by_every_vendor_name() {
        for tier in ServiceTier::ALL {
            assert_eq!(ServiceTier::parse(tier.as_str()), Some(tier));
            assert_eq!(ServiceTier::ALL[tier.index()], tier);
        }
        assert_eq!(ServiceTier::parse("default"), Some(ServiceTier::Standard));
        assert_eq!(ServiceTier::parse("auto"), None);
    }
}
