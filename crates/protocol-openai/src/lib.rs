//! The OpenAI Chat Completions codec: `/v1/chat/completions` requests,
//! replies, `chat.completion.chunk` streams and `{"error": {..}}` bodies.
//!
//! Module map:
//! - `request`: request reader and writer (messages, tools, knobs, extras).
//! - `response`: non-streamed reply reader and writer.
//! - `stream`: the chunk decoder (fans flat chunks out into IR block events)
//!   and encoder (folds block events back into chunks, then `[DONE]`).
//! - `error`: vendor error classification and the error body writer.
//! - `wire`: small pieces shared by the others (finish reasons, usage,
//!   data URLs, drop reporting).
//! - `completions`: the legacy Completions API (`/v1/completions`), a codec
//!   of its own handed out by [`Codec::completions`].
//!
//! Choices made where the protocol and the IR do not line up one to one:
//! - `max_tokens` and `max_completion_tokens` are both read (the latter wins);
//!   `max_completion_tokens` is written, because OpenAI's reasoning models
//!   reject `max_tokens`.
//! - `system` and `developer` messages are hoisted, in order, into
//!   `Request::system`; they are written back as one `system` message, which
//!   every OpenAI model accepts.
//! - A `refusal` is read as a text block with `StopReason::Refusal`, and a
//!   refusal reply is written back as `message.refusal`.
//! - Reasoning text that OpenAI-compatible servers send as
//!   `reasoning_content` (or `reasoning`) is read as a thinking block, and a
//!   reply's thinking is written there, streamed and not; signed and
//!   redacted reasoning (a Claude lane's) also goes in `thinking_blocks`
//!   and is read back from an assistant message (`thinking`). A request's
//!   thinking is not sent to an OpenAI lane, which has no field for it.
//! - `reasoning_effort` is an ordered level (`none` is thinking off); a
//!   level Chat Completions lacks is sent as its nearest one, a budget as
//!   the level it stands for, and both changes are reported.
//! - A tool call's thought signature (a Gemini upstream's) travels to the
//!   caller in `extra_content.google.thought_signature`, as on Google's own
//!   OpenAI-compatible endpoint, and is read back from there
//!   (`switchyard_codec::signature` explains the carriers).

mod completions;
mod embed;
mod error;
mod image;
pub mod ingress;
mod request;
mod rerank;
mod response;
mod stream;
mod thinking;
mod wire;

use std::sync::LazyLock;

use http::{HeaderName, HeaderValue};
use memchr::memmem::Finder;
use switchyard_codec::opaque::{Holds, Opaque, Place};
use switchyard_codec::{
    bearer_header, ir, AuthError, Codec, Credentials, DecodeError, Encoded, ErrorResponse, Framing, Outbound,
    RawUpstreamError, StreamDecoder, StreamEncoder,
};

/// The OpenAI Chat Completions codec.
pub struct OpenAiCodec;

/// Where a request of this protocol may hold audio (`may_hold_audio`).
static INPUT_AUDIO: switchyard_codec::media::Marker =
    switchyard_codec::media::Marker::new(|| switchyard_codec::media::marker(b"\"input_audio\""));

impl Codec for OpenAiCodec {
    fn protocol(&self) -> ir::Protocol {
        ir::Protocol::OpenAi
    }

    fn max_tokens_members(&self) -> &'static [&'static [&'static str]] {
        &[&["max_completion_tokens"], &["max_tokens"]]
    }

    fn choices_members(&self) -> &'static [&'static [&'static str]] {
        &[&["n"]]
    }

    fn rerank(&self) -> Option<&dyn switchyard_codec::rerank::RerankCodec> {
        Some(&rerank::OpenAiRerank)
    }

    fn image(&self) -> Option<&dyn switchyard_codec::image::ImageCodec> {
        Some(&image::OpenAiImage)
    }

    fn embed(&self) -> Option<&dyn switchyard_codec::embed::EmbedCodec> {
        Some(&embed::OpenAiEmbed)
    }

    fn completions(&self) -> Option<&dyn Codec> {
        Some(&completions::CompletionsCodec)
    }

    fn metered_heads(&self) -> &'static [&'static str] {
        &["max_completion_tokens", "max_tokens", "n", "user"]
    }

    fn end_user_member(&self) -> &'static [&'static str] {
        &["user"]
    }

    fn prefix_shape(&self) -> Option<switchyard_codec::prefix::PrefixShape> {
        Some(switchyard_codec::prefix::PrefixShape { whole: &["tools"], turns: "messages" })
    }

    /// An `input_audio` part.
    fn may_hold_audio(&self, body: &[u8]) -> bool {
        switchyard_codec::media::holds(body, &INPUT_AUDIO)
    }

    fn media_members(&self) -> &'static [&'static str] {
        // image_url.url and file.file_data (data URLs), input_audio.data.
        &["url", "file_data", "data"]
    }

    fn opaque(&self) -> Opaque {
        const REQUEST: &[Place] = &[
            Place::at(&["messages", "content", "image_url", "url"], Holds::Media),
            Place::at(&["messages", "content", "input_audio", "data"], Holds::Media),
            Place::at(&["messages", "content", "file", "file_data"], Holds::Media),
            Place::at(&["messages", "tool_calls", "extra_content", "google", "thought_signature"], Holds::Signed),
            Place::when(&["messages", "thinking_blocks", "signature"], "type", &["thinking"], Holds::Signed),
            Place::when(&["messages", "thinking_blocks", "data"], "type", &["redacted_thinking"], Holds::Signed),
            // Claude's signature covers the thinking's text.
            Place::when(&["messages", "thinking_blocks", "thinking"], "type", &["thinking"], Holds::SignedText)
                .with("signature"),
        ];
        const REPLY: &[Place] = &[
            Place::at(&["choices", "message", "audio", "data"], Holds::Media),
            Place::at(
                &["choices", "message", "tool_calls", "extra_content", "google", "thought_signature"],
                Holds::Signed,
            ),
            Place::when(&["choices", "message", "thinking_blocks", "signature"], "type", &["thinking"], Holds::Signed),
            Place::when(
                &["choices", "message", "thinking_blocks", "data"],
                "type",
                &["redacted_thinking"],
                Holds::Signed,
            ),
            Place::when(
                &["choices", "message", "thinking_blocks", "thinking"],
                "type",
                &["thinking"],
                Holds::SignedText,
            )
            .with("signature"),
            // Embeddings as base64, images as base64.
            Place::at(&["data", "embedding"], Holds::Media),
            Place::at(&["data", "b64_json"], Holds::Media),
        ];
        Opaque { request: REQUEST, reply: REPLY }
    }

    fn past_reasoning(&self) -> Option<&'static switchyard_codec::opaque::PastReasoning> {
        Some(&thinking::PAST_REASONING)
    }

    fn read_request(&self, body: &[u8]) -> Result<ir::Request, DecodeError> {
        request::read(body)
    }

    fn write_request_for(&self, request: &ir::Request, capabilities: &ir::Capabilities) -> Encoded {
        request::write(request, capabilities)
    }

    fn parameter_path(&self, field: ir::Field) -> Option<&'static str> {
        wire::parameter_path(field)
    }

    fn read_response(&self, body: &[u8]) -> Result<ir::Response, DecodeError> {
        response::read(body)
    }

    fn read_usage(&self, body: &[u8]) -> Option<ir::Usage> {
        // Only the `usage` member is parsed: a passthrough needs nothing else.
        let raw = switchyard_codec::scan::top_level_value(body, "usage").ok()??;
        static SERVICE_TIER: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"service_tier\""));
        let tier = switchyard_codec::scan::first_string_member_by(body, &SERVICE_TIER);
        serde_json::from_slice::<wire::WireUsage>(raw).ok().map(|usage| usage.to_ir(tier))
    }

    fn read_stop_reason(&self, body: &[u8]) -> Option<ir::StopReason> {
        static FINISH_REASON: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"finish_reason\""));
        switchyard_codec::scan::first_string_member_by(body, &FINISH_REASON).map(wire::stop_reason_from_finish)
    }

    fn write_response(&self, response: &ir::Response) -> Encoded {
        response::write(response)
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(stream::ChunkDecoder::default())
    }

    /// OpenAI streams only as server-sent events, so every framing gets SSE.
    fn stream_encoder(&self, _framing: Framing) -> Box<dyn StreamEncoder> {
        Box::new(stream::ChunkEncoder::new())
    }

    fn stream_terminator(&self, _framing: Framing) -> Option<&'static [u8]> {
        Some(b"data: [DONE]\n\n")
    }

    fn stream_encoder_for(&self, _framing: Framing, request: &[u8]) -> Box<dyn StreamEncoder> {
        // Like OpenAI, send the trailing usage chunk (`choices: []`) only to a
        // caller that asked for it: clients that read `choices[0]` of every
        // chunk break on it otherwise.
        Box::new(stream::ChunkEncoder::with_usage_chunk(self.stream_reports_usage(request)))
    }

    fn stream_reports_usage(&self, request: &[u8]) -> bool {
        switchyard_codec::scan::top_level_value(request, "stream_options")
            .ok()
            .flatten()
            .and_then(|raw| serde_json::from_slice::<serde_json::Value>(raw).ok())
            .and_then(|options| options.get("include_usage").and_then(serde_json::Value::as_bool))
            .unwrap_or(false)
    }

    fn request_stream_usage(&self, request: &[u8]) -> Option<Vec<u8>> {
        stream::ask_for_usage(request)
    }

    fn stream_usage_filter(&self) -> Option<switchyard_codec::hide::EventFilter> {
        Some(stream::usage_chunk_filter())
    }

    fn ingress(&self) -> &'static switchyard_codec::ingress::Ingress {
        &ingress::INGRESS
    }

    fn model_in_path(&self) -> bool {
        false
    }

    fn path_action(&self, _stream: bool) -> &'static str {
        "chat/completions"
    }

    fn upstream_path(&self, _model: &str, _stream: bool) -> String {
        "/v1/chat/completions".to_owned()
    }

    fn auth_headers(
        &self,
        credentials: &Credentials,
        _outbound: &Outbound<'_>,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, AuthError> {
        bearer_header(ir::Protocol::OpenAi, credentials)
    }

    fn extract_error(&self, status: u16, body: &[u8]) -> RawUpstreamError {
        error::extract(status, body)
    }

    fn error_response(&self, error: &ir::ErrorInfo) -> ErrorResponse {
        error::response(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    #[test]
    fn path_and_auth() {
        assert_eq!(OpenAiCodec.upstream_path("gpt-4o", true), "/v1/chat/completions");
        assert_eq!(OpenAiCodec.upstream_path("gpt-4o", false), "/v1/chat/completions");
        let outbound = Outbound {
            method: "POST",
            url: "https://api.openai.com/v1/chat/completions",
            body: b"{}",
            time: SystemTime::UNIX_EPOCH,
        };
        let headers = OpenAiCodec.auth_headers(&Credentials::ApiKey("sk-test".into()), &outbound).unwrap();
        assert_eq!(headers.len(), 1);
        assert_eq!(headers[0].0, http::header::AUTHORIZATION);
        assert_eq!(headers[0].1.to_str().unwrap(), "Bearer sk-test");
        assert!(OpenAiCodec.auth_headers(&Credentials::None, &outbound).unwrap().is_empty());
        assert_eq!(OpenAiCodec.protocol(), ir::Protocol::OpenAi);
    }
}
