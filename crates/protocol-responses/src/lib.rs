//! The OpenAI Responses codec (`POST /v1/responses`): requests, responses,
//! SSE streams and errors to and from the Switchyard IR.
//!
//! Module map: `request` (create body), `response` (response object, status
//! and usage conventions), `items` (assistant items shared by both),
//! `stream` (SSE decoder and encoder), `error` (error envelope), `wire`
//! (JSON accessors, media helpers, the parameter table).
//!
//! `reasoning.effort` is an ordered level (`none` is thinking off); a level
//! the API lacks is sent as its nearest one, a budget as the level it
//! stands for, and both are reported. A tool call's thought signature (a
//! Gemini upstream's) reaches the caller as a `reasoning` item right before
//! the `function_call`, its `encrypted_content` marked as a carrier; call ids
//! (at most 64 characters) cannot hold one. The reader puts it back on the
//! call (`switchyard_codec::signature`).

mod error;
pub mod ingress;
mod items;
mod request;
mod response;
mod stream;
mod wire;

use http::{HeaderName, HeaderValue};
use switchyard_codec::opaque::{Holds, Opaque, Place};
use switchyard_codec::{
    bearer_header, ir, AuthError, Codec, Credentials, DecodeError, Encoded, ErrorResponse, Framing, Outbound,
    RawUpstreamError, StreamDecoder, StreamEncoder,
};

/// The Responses codec.
pub struct ResponsesCodec;

impl Codec for ResponsesCodec {
    fn protocol(&self) -> ir::Protocol {
        ir::Protocol::Responses
    }

    fn max_tokens_members(&self) -> &'static [&'static [&'static str]] {
        &[&["max_output_tokens"]]
    }

    fn metered_heads(&self) -> &'static [&'static str] {
        &["max_output_tokens", "user"]
    }

    fn end_user_member(&self) -> &'static [&'static str] {
        &["user"]
    }

    fn prefix_shape(&self) -> Option<switchyard_codec::prefix::PrefixShape> {
        Some(switchyard_codec::prefix::PrefixShape { whole: &["instructions", "tools"], turns: "input" })
    }

    fn media_members(&self) -> &'static [&'static str] {
        // input_image.image_url and input_file.file_data (data URLs).
        &["image_url", "file_data"]
    }

    fn opaque(&self) -> Opaque {
        const REQUEST: &[Place] = &[
            Place::at(&["input", "content", "image_url"], Holds::Media),
            Place::at(&["input", "content", "file_data"], Holds::Media),
            // A function call's output as content parts.
            Place::at(&["input", "output", "image_url"], Holds::Media),
            Place::at(&["input", "output", "file_data"], Holds::Media),
            Place::when(&["input", "encrypted_content"], "type", &["reasoning"], Holds::Signed),
            // A reasoning item's texts beside its encrypted content: a
            // Claude signature the gateway gave covers them (`items`).
            Place::when(&["input", "summary", "text"], "type", &["reasoning"], Holds::SignedText)
                .with("encrypted_content")
                .up(1),
            Place::when(&["input", "content", "text"], "type", &["reasoning"], Holds::SignedText)
                .with("encrypted_content")
                .up(1),
        ];
        const REPLY: &[Place] = &[
            Place::when(&["output", "encrypted_content"], "type", &["reasoning"], Holds::Signed),
            Place::when(&["output", "summary", "text"], "type", &["reasoning"], Holds::SignedText)
                .with("encrypted_content")
                .up(1),
            Place::when(&["output", "content", "text"], "type", &["reasoning"], Holds::SignedText)
                .with("encrypted_content")
                .up(1),
            Place::when(&["output", "result"], "type", &["image_generation_call"], Holds::Media),
        ];
        Opaque { request: REQUEST, reply: REPLY }
    }

    fn read_request(&self, body: &[u8]) -> Result<ir::Request, DecodeError> {
        request::read_request(body)
    }

    fn write_request_for(&self, request: &ir::Request, capabilities: &ir::Capabilities) -> Encoded {
        request::write_request(request, capabilities)
    }

    fn parameter_path(&self, field: ir::Field) -> Option<&'static str> {
        wire::parameter_path(field)
    }

    fn read_response(&self, body: &[u8]) -> Result<ir::Response, DecodeError> {
        response::read_response(body)
    }

    fn write_response(&self, response: &ir::Response) -> Encoded {
        response::write_response(response)
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(stream::ResponsesStreamDecoder::default())
    }

    /// Responses streams only as SSE; other framings are written as SSE too.
    fn stream_encoder(&self, _framing: Framing) -> Box<dyn StreamEncoder> {
        Box::new(stream::ResponsesStreamEncoder::default())
    }

    fn ingress(&self) -> &'static switchyard_codec::ingress::Ingress {
        &ingress::INGRESS
    }

    fn model_in_path(&self) -> bool {
        false
    }

    fn path_action(&self, _stream: bool) -> &'static str {
        "responses"
    }

    fn upstream_path(&self, _model: &str, _stream: bool) -> String {
        "/v1/responses".to_owned()
    }

    fn auth_headers(
        &self,
        credentials: &Credentials,
        _outbound: &Outbound<'_>,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, AuthError> {
        bearer_header(ir::Protocol::Responses, credentials)
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

    #[test]
    fn endpoint_and_auth() {
        let codec = ResponsesCodec;
        assert_eq!(codec.upstream_path("gpt-5", true), "/v1/responses");
        let outbound = Outbound {
            method: "POST",
            url: "https://api.openai.com/v1/responses",
            body: b"{}",
            time: SystemTime::UNIX_EPOCH,
        };
        let headers = codec.auth_headers(&Credentials::ApiKey("sk-1".into()), &outbound).unwrap();
        assert_eq!(headers[0].0, http::header::AUTHORIZATION);
        assert_eq!(headers[0].1, "Bearer sk-1");
        assert!(codec.auth_headers(&Credentials::None, &outbound).unwrap().is_empty());
    }
}
