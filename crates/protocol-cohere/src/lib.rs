//! Switchyard's codec for Cohere's v2 Chat API (`POST /v2/chat`).
//!
//! Mapping decisions that are not obvious from the field names:
//! - `system` messages, wherever they stand, become IR `system` blocks; on
//!   write they are one leading system message.
//! - `tool` messages become `ToolResult` blocks in one IR user message
//!   (consecutive ones merge); on write each result is its own tool message,
//!   written before the rest of the user turn.
//! - `tool_plan` (the visible plan before tool calls) is an IR text block
//!   placed before the calls; on write, the text of an assistant turn that
//!   makes tool calls goes back into `tool_plan`.
//! - Cohere documents (`{data, id}`, in tool results) are IR documents of
//!   type `application/json` whose name is the document id.
//! - Citations stay opaque: read from the message, attached to the text
//!   block they point at, and written back only when they have Cohere's shape.
//! - The stream's content and tool-call index sequences are separate on the
//!   wire and one dense sequence in the IR; both directions remap.
//! - An in-stream error is a `message-end` whose delta carries
//!   `finish_reason: "ERROR"` and an `error` message (the only error form the
//!   v2 stream defines).

mod content;
pub(crate) mod embed;
mod error;
pub mod ingress;
mod request;
pub(crate) mod rerank;
mod response;
mod stream;

use http::{HeaderName, HeaderValue};
use switchyard_codec::opaque::{Holds, Opaque, Place};
use switchyard_codec::{
    bearer_header, ir, AuthError, Codec, Credentials, DecodeError, Encoded, ErrorResponse, Framing, Outbound,
    RawUpstreamError, StreamDecoder, StreamEncoder,
};

/// The Cohere v2 chat codec.
pub struct CohereCodec;

impl Codec for CohereCodec {
    fn protocol(&self) -> ir::Protocol {
        ir::Protocol::Cohere
    }

    fn max_tokens_members(&self) -> &'static [&'static [&'static str]] {
        &[&["max_tokens"]]
    }

    fn metered_heads(&self) -> &'static [&'static str] {
        &["max_tokens"]
    }

    fn prefix_shape(&self) -> Option<switchyard_codec::prefix::PrefixShape> {
        Some(switchyard_codec::prefix::PrefixShape { whole: &["tools"], turns: "messages" })
    }

    fn media_members(&self) -> &'static [&'static str] {
        // image_url.url (a data URL).
        &["url"]
    }

    fn opaque(&self) -> Opaque {
        const REQUEST: &[Place] = &[Place::at(&["messages", "content", "image_url", "url"], Holds::Media)];
        Opaque { request: REQUEST, reply: &[] }
    }

    fn read_request(&self, body: &[u8]) -> Result<ir::Request, DecodeError> {
        request::read(body)
    }

    fn write_request_for(&self, request: &ir::Request, capabilities: &ir::Capabilities) -> Encoded {
        request::write(request, capabilities)
    }

    fn parameter_path(&self, field: ir::Field) -> Option<&'static str> {
        request::parameter_path(field)
    }

    fn rerank(&self) -> Option<&dyn switchyard_codec::rerank::RerankCodec> {
        Some(&rerank::CohereRerank)
    }

    fn embed(&self) -> Option<&dyn switchyard_codec::embed::EmbedCodec> {
        Some(&embed::CohereEmbed)
    }

    fn read_response(&self, body: &[u8]) -> Result<ir::Response, DecodeError> {
        response::read(body)
    }

    fn read_stop_reason(&self, body: &[u8]) -> Option<ir::StopReason> {
        switchyard_codec::scan::first_string_member(body, "finish_reason").and_then(response::stop_reason)
    }

    fn write_response(&self, response: &ir::Response) -> Encoded {
        response::write(response)
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(stream::Decoder::default())
    }

    /// Cohere streams only as SSE, so every framing gets SSE.
    fn stream_encoder(&self, _framing: Framing) -> Box<dyn StreamEncoder> {
        Box::new(stream::Encoder::new())
    }

    fn ingress(&self) -> &'static switchyard_codec::ingress::Ingress {
        &ingress::INGRESS
    }

    fn model_in_path(&self) -> bool {
        false
    }

    fn path_action(&self, _stream: bool) -> &'static str {
        "chat"
    }

    fn upstream_path(&self, _model: &str, _stream: bool) -> String {
        "/v2/chat".to_owned()
    }

    fn auth_headers(
        &self,
        credentials: &Credentials,
        _outbound: &Outbound<'_>,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, AuthError> {
        bearer_header(ir::Protocol::Cohere, credentials)
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
        let codec = CohereCodec;
        assert_eq!(codec.upstream_path("command-a", true), "/v2/chat");
        assert_eq!(codec.upstream_path("command-a", false), "/v2/chat");
        let outbound = Outbound {
            method: "POST",
            url: "https://api.cohere.com/v2/chat",
            body: b"{}",
            time: SystemTime::UNIX_EPOCH,
        };
        let headers = codec.auth_headers(&Credentials::ApiKey("k1".into()), &outbound).unwrap();
        assert_eq!(headers.len(), 1);
        assert_eq!(headers[0].0, http::header::AUTHORIZATION);
        assert_eq!(headers[0].1, "Bearer k1");
        assert!(codec.auth_headers(&Credentials::None, &outbound).unwrap().is_empty());
        assert_eq!(codec.protocol(), ir::Protocol::Cohere);
        assert_eq!(codec.default_framing(), Framing::Sse);
    }
}
