//! The Anthropic Messages API codec (`POST /v1/messages`): request and reply
//! bodies, the SSE stream, error bodies and `x-api-key` auth.
//!
//! Module map: `request` (request body), `response` (reply body and stop
//! reasons), `blocks` (content blocks shared by both), `stream` (SSE decoder
//! and encoder), `error` (error bodies), `wire` (JSON field readers, cache
//! control, usage).

mod blocks;
mod count;
mod error;
pub mod ingress;
mod request;
mod response;
mod stream;
mod wire;

use std::sync::LazyLock;

use http::{HeaderName, HeaderValue};
use memchr::memmem::Finder;
use switchyard_codec::opaque::{Holds, Opaque, Place};
use switchyard_codec::{
    ir, key_header, AuthError, Codec, Credentials, DecodeError, Encoded, ErrorResponse, Framing, Outbound,
    RawUpstreamError, StreamDecoder, StreamEncoder,
};

pub use request::SCHEMA_NAME;

/// The API version every call is pinned to (sent even without credentials,
/// because the API rejects calls that lack it).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The output cap written when a request has none: Anthropic requires
/// `max_tokens`, and other protocols let it be left out. A thinking budget
/// is added on top, since the budget is counted inside the cap.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The Anthropic codec.
pub struct AnthropicCodec;

impl Codec for AnthropicCodec {
    fn protocol(&self) -> ir::Protocol {
        ir::Protocol::Anthropic
    }

    fn max_tokens_members(&self) -> &'static [&'static [&'static str]] {
        &[&["max_tokens"]]
    }

    fn metered_heads(&self) -> &'static [&'static str] {
        &["max_tokens", "metadata"]
    }

    fn end_user_member(&self) -> &'static [&'static str] {
        &["metadata", "user_id"]
    }

    fn prefix_shape(&self) -> Option<switchyard_codec::prefix::PrefixShape> {
        Some(switchyard_codec::prefix::PrefixShape { whole: &["system", "tools"], turns: "messages" })
    }

    fn media_members(&self) -> &'static [&'static str] {
        // An image's or a document's base64 `source.data`.
        &["data"]
    }

    fn opaque(&self) -> Opaque {
        // A plain-text document's `source` (`"type": "text"`) is text.
        const REQUEST: &[Place] = &[
            Place::when(&["messages", "content", "source", "data"], "type", &["base64"], Holds::Media),
            Place::when(&["messages", "content", "content", "source", "data"], "type", &["base64"], Holds::Media),
            Place::when(&["messages", "content", "signature"], "type", &["thinking"], Holds::Signed),
            Place::when(&["messages", "content", "data"], "type", &["redacted_thinking"], Holds::Signed),
            // The signature covers the thinking's text.
            Place::when(&["messages", "content", "thinking"], "type", &["thinking"], Holds::SignedText)
                .with("signature"),
        ];
        const REPLY: &[Place] = &[
            Place::when(&["content", "signature"], "type", &["thinking"], Holds::Signed),
            Place::when(&["content", "data"], "type", &["redacted_thinking"], Holds::Signed),
            Place::when(&["content", "thinking"], "type", &["thinking"], Holds::SignedText).with("signature"),
        ];
        Opaque { request: REQUEST, reply: REPLY }
    }

    fn past_reasoning(&self) -> Option<&'static switchyard_codec::opaque::PastReasoning> {
        Some(&blocks::PAST_REASONING)
    }

    fn read_request(&self, body: &[u8]) -> Result<ir::Request, DecodeError> {
        request::read_request(body)
    }

    fn read_headers(&self, headers: &http::HeaderMap, request: &mut ir::Request) {
        request.betas = request::read_betas(headers);
    }

    fn write_request_for(&self, request: &ir::Request, capabilities: &ir::Capabilities) -> Encoded {
        request::write_request(request, capabilities)
    }

    fn parameter_path(&self, field: ir::Field) -> Option<&'static str> {
        request::parameter_path(field)
    }

    fn read_response(&self, body: &[u8]) -> Result<ir::Response, DecodeError> {
        response::read_response(body)
    }

    fn read_usage(&self, body: &[u8]) -> Option<ir::Usage> {
        // Only the `usage` member is parsed: a passthrough needs nothing else.
        let raw = switchyard_codec::scan::top_level_value(body, "usage").ok()??;
        let value: serde_json::Value = serde_json::from_slice(raw).ok()?;
        Some(wire::WireUsage::read(Some(&value)).to_ir())
    }

    fn read_stop_reason(&self, body: &[u8]) -> Option<ir::StopReason> {
        static STOP_REASON: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"stop_reason\""));
        switchyard_codec::scan::first_string_member_by(body, &STOP_REASON).and_then(response::read_stop_reason)
    }

    fn write_response(&self, response: &ir::Response) -> Encoded {
        response::write_response(response)
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(stream::Decoder::default())
    }

    /// Anthropic streams only as SSE, so the framing is not consulted.
    fn stream_encoder(&self, _framing: Framing) -> Box<dyn StreamEncoder> {
        Box::new(stream::Encoder::default())
    }

    fn stream_terminator(&self, _framing: Framing) -> Option<&'static [u8]> {
        Some(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
    }

    fn ingress(&self) -> &'static switchyard_codec::ingress::Ingress {
        &ingress::INGRESS
    }

    fn model_in_path(&self) -> bool {
        false
    }

    fn path_action(&self, stream: bool) -> &'static str {
        // Claude on Vertex AI.
        if stream {
            "streamRawPredict"
        } else {
            "rawPredict"
        }
    }

    fn upstream_path(&self, _model: &str, _stream: bool) -> String {
        // The model and the stream flag both travel in the body.
        "/v1/messages".to_owned()
    }

    fn auth_headers(
        &self,
        credentials: &Credentials,
        _outbound: &Outbound<'_>,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, AuthError> {
        let mut headers = key_header(ir::Protocol::Anthropic, "x-api-key", credentials)?;
        headers.push((HeaderName::from_static("anthropic-version"), HeaderValue::from_static(ANTHROPIC_VERSION)));
        Ok(headers)
    }

    fn caller_headers(&self) -> &'static [switchyard_codec::CallerHeader] {
        // Claude Code and the SDKs turn features on with betas, and may pin
        // a version of their own. The betas are read into the IR too
        // (`read_headers`): a Claude lane on Bedrock takes them in its body,
        // and the other writers report them. The SDKs' `workspace_id` and
        // `user_profile_id` are headers of the caller's own account.
        use switchyard_codec::CallerHeader;
        const HEADERS: [CallerHeader; 4] = [
            CallerHeader { name: "anthropic-beta", features: false, credential: false },
            CallerHeader { name: "anthropic-version", features: false, credential: false },
            CallerHeader { name: "anthropic-workspace-id", features: false, credential: true },
            CallerHeader { name: "anthropic-user-profile-id", features: false, credential: true },
        ];
        &HEADERS
    }

    fn count(&self) -> Option<&dyn switchyard_codec::count::CountCodec> {
        Some(&count::AnthropicCount)
    }

    fn extract_error(&self, status: u16, body: &[u8]) -> RawUpstreamError {
        error::extract_error(status, body)
    }

    fn error_response(&self, error: &ir::ErrorInfo) -> ErrorResponse {
        error::error_response(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    /// The SDKs' header params: betas and the version pass to an Anthropic
    /// lane as they came (the betas are read into the IR besides); the
    /// workspace and user profile ids are the caller's account's, and go
    /// only with the caller's own key.
    #[test]
    fn the_sdks_header_params_are_caller_headers() {
        let headers = AnthropicCodec.caller_headers();
        let of = |name: &str| headers.iter().find(|h| h.name == name).map(|h| (h.features, h.credential));
        assert_eq!(of("anthropic-beta"), Some((false, false)));
        assert_eq!(of("anthropic-version"), Some((false, false)));
        assert_eq!(of("anthropic-workspace-id"), Some((false, true)));
        assert_eq!(of("anthropic-user-profile-id"), Some((false, true)));
    }

    /// A past turn's signed thinking goes whole when asked; the turn in
    /// progress (its tool loop included) keeps its own, and a message of
    /// thinking alone is never emptied.
    #[test]
    fn a_past_turns_reasoning_goes_whole_and_the_turn_in_progress_keeps_its_own() {
        let past = AnthropicCodec.past_reasoning().unwrap();
        let thinking = |text: &str| serde_json::json!({"type": "thinking", "thinking": text, "signature": "s"});
        let body = serde_json::json!({"model": "m", "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [thinking("old"), {"type": "redacted_thinking", "data": "d"},
                {"type": "text", "text": "a"}]},
            {"role": "user", "content": "q2"},
            {"role": "assistant", "content": [thinking("now"), {"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "r"}]}]});
        let body = serde_json::to_vec(&body).unwrap();
        let (out, taken) = switchyard_codec::opaque::omit_past_reasoning(&body, past, &mut |_| true).unwrap();
        assert_eq!(taken, ["messages.1.content.0", "messages.1.content.1"]);
        let out: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(out["messages"][1]["content"], serde_json::json!([{"type": "text", "text": "a"}]));
        assert_eq!(out["messages"][3]["content"][0]["thinking"], "now", "the tool loop in progress is kept");
        // Only where asked; a thinking-only message is never emptied.
        assert!(switchyard_codec::opaque::omit_past_reasoning(&body, past, &mut |text| text == "now").is_none());
        let alone = serde_json::json!({"messages": [{"role": "user", "content": "q"},
            {"role": "assistant", "content": [thinking("old")]}, {"role": "user", "content": "q2"}]});
        let alone = serde_json::to_vec(&alone).unwrap();
        assert!(switchyard_codec::opaque::omit_past_reasoning(&alone, past, &mut |_| true).is_none());
    }

    fn outbound() -> Outbound<'static> {
        Outbound {
            method: "POST",
            url: "https://api.anthropic.com/v1/messages",
            body: b"{}",
            time: SystemTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn auth_sends_the_key_and_always_the_version() {
        let headers = AnthropicCodec.auth_headers(&Credentials::ApiKey("sk-ant-x".into()), &outbound()).unwrap();
        assert_eq!(headers.len(), 2);
        assert_eq!(headers[0].0, "x-api-key");
        assert_eq!(headers[0].1, "sk-ant-x");
        assert!(headers[0].1.is_sensitive());
        assert_eq!(headers[1].0, "anthropic-version");
        assert_eq!(headers[1].1, ANTHROPIC_VERSION);

        let headers = AnthropicCodec.auth_headers(&Credentials::None, &outbound()).unwrap();
        assert_eq!(headers.len(), 1);
        assert_eq!(headers[0].0, "anthropic-version");

        let aws = Credentials::Aws {
            access_key_id: "a".into(),
            secret_access_key: "s".into(),
            session_token: None,
            region: "us-east-1".into(),
        };
        assert!(matches!(AnthropicCodec.auth_headers(&aws, &outbound()), Err(AuthError::WrongCredentials { .. })));
    }

    #[test]
    fn path_is_fixed() {
        assert_eq!(AnthropicCodec.upstream_path("claude", true), "/v1/messages");
        assert_eq!(AnthropicCodec.protocol(), ir::Protocol::Anthropic);
        assert_eq!(AnthropicCodec.default_framing(), Framing::Sse);
    }
}
