//! OpenAI's legacy Completions API (`POST /v1/completions`): a codec of its
//! own, [`CompletionsCodec`], which `OpenAiCodec::completions` hands out.
//! A completion's caller is read and written with it, and so is an OpenAI
//! lane asked for one (the request then passes as it came, to its
//! `/v1/completions`); a lane of any other protocol gets it as a chat
//! request through the IR.
//!
//! - `request`: the request reader and writer. The prompt is one user
//!   message; `max_tokens` is 16 when the caller names none (OpenAI's
//!   default); what has no place in a chat request (`suffix`, `echo`,
//!   `best_of`, `logprobs`, `logit_bias`, `n` above 1) is kept in `extra`
//!   when it asks for something, so another protocol's writer reports it.
//!   A prompt of several strings or of token ids has no IR form: reading
//!   one is the caller's 400, and it reaches only an OpenAI lane.
//! - `reply`: the `text_completion` object, read and written.
//! - `stream`: its stream, chunks of the same object, then `[DONE]` (a
//!   trailing `choices: []` usage chunk when `stream_options.include_usage`
//!   asked, as in chat).
//!
//! Errors are OpenAI's `{"error": {..}}` bodies, as for chat.

mod reply;
mod request;
mod stream;

use http::{HeaderName, HeaderValue};
use switchyard_codec::{
    bearer_header, ir, AuthError, Codec, Credentials, DecodeError, Encoded, ErrorResponse, Framing, Outbound,
    RawUpstreamError, StreamDecoder, StreamEncoder,
};

/// The output cap OpenAI applies to a completion that names none.
pub const DEFAULT_MAX_TOKENS: u64 = 16;

/// The legacy Completions codec.
pub struct CompletionsCodec;

impl Codec for CompletionsCodec {
    fn protocol(&self) -> ir::Protocol {
        ir::Protocol::OpenAi
    }

    fn max_tokens_members(&self) -> &'static [&'static [&'static str]] {
        &[&["max_tokens"]]
    }

    fn default_max_tokens(&self) -> Option<u64> {
        Some(DEFAULT_MAX_TOKENS)
    }

    /// `best_of` candidates are generated (and billed) server-side, at
    /// least `n` of them.
    fn choices_members(&self) -> &'static [&'static [&'static str]] {
        &[&["n"], &["best_of"]]
    }

    fn metered_heads(&self) -> &'static [&'static str] {
        &["max_tokens", "n", "best_of", "user"]
    }

    fn end_user_member(&self) -> &'static [&'static str] {
        &["user"]
    }

    fn read_request(&self, body: &[u8]) -> Result<ir::Request, DecodeError> {
        request::read(body)
    }

    fn write_request_for(&self, request: &ir::Request, _capabilities: &ir::Capabilities) -> Encoded {
        request::write(request)
    }

    fn parameter_path(&self, field: ir::Field) -> Option<&'static str> {
        request::parameter_path(field)
    }

    fn read_response(&self, body: &[u8]) -> Result<ir::Response, DecodeError> {
        reply::read(body)
    }

    fn read_usage(&self, body: &[u8]) -> Option<ir::Usage> {
        crate::OpenAiCodec.read_usage(body)
    }

    fn read_stop_reason(&self, body: &[u8]) -> Option<ir::StopReason> {
        crate::OpenAiCodec.read_stop_reason(body)
    }

    fn write_response(&self, response: &ir::Response) -> Encoded {
        reply::write(response)
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(stream::CompletionDecoder::default())
    }

    fn stream_encoder(&self, _framing: Framing) -> Box<dyn StreamEncoder> {
        Box::new(stream::CompletionEncoder::with_usage_chunk(true))
    }

    fn stream_terminator(&self, _framing: Framing) -> Option<&'static [u8]> {
        Some(b"data: [DONE]\n\n")
    }

    fn stream_encoder_for(&self, _framing: Framing, request: &[u8]) -> Box<dyn StreamEncoder> {
        Box::new(stream::CompletionEncoder::with_usage_chunk(self.stream_reports_usage(request)))
    }

    fn stream_reports_usage(&self, request: &[u8]) -> bool {
        crate::OpenAiCodec.stream_reports_usage(request)
    }

    fn request_stream_usage(&self, request: &[u8]) -> Option<Vec<u8>> {
        crate::stream::ask_for_usage(request)
    }

    fn stream_usage_filter(&self) -> Option<switchyard_codec::hide::EventFilter> {
        Some(crate::stream::usage_chunk_filter())
    }

    fn ingress(&self) -> &'static switchyard_codec::ingress::Ingress {
        &crate::ingress::INGRESS
    }

    fn model_in_path(&self) -> bool {
        false
    }

    /// Azure's deployments name it `completions`, beside `chat/completions`.
    fn path_action(&self, _stream: bool) -> &'static str {
        "completions"
    }

    fn upstream_path(&self, _model: &str, _stream: bool) -> String {
        "/v1/completions".to_owned()
    }

    fn auth_headers(
        &self,
        credentials: &Credentials,
        _outbound: &Outbound<'_>,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, AuthError> {
        bearer_header(ir::Protocol::OpenAi, credentials)
    }

    fn extract_error(&self, status: u16, body: &[u8]) -> RawUpstreamError {
        crate::error::extract(status, body)
    }

    fn error_response(&self, error: &ir::ErrorInfo) -> ErrorResponse {
        crate::error::response(error)
    }
}

#[cfg(test)]
mod tests;
