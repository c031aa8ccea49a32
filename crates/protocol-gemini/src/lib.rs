//! The Gemini codec: `generateContent` / `streamGenerateContent` (REST,
//! v1beta) read into and written from the Switchyard IR.
//!
//! Map of the crate:
//! - `wire`: the JSON shapes (camelCase out, camelCase or snake_case in).
//! - `parts`: parts ↔ blocks, shared by requests, replies and streams —
//!   thought signatures, tool-call id synthesis, function-response payloads.
//! - `request`, `response`: the two bodies, with usage and stop mappings.
//! - `stream`: the SSE / JSON-array stream decoder and encoder.
//! - `error`: Google RPC error bodies, both ways.
//!
//! Gemini keys the model in the URL path (`/v1beta/models/{model}:...`),
//! so bodies carry none. What Gemini cannot say is reported in
//! `Encoded::dropped`; what the IR does not model travels in `extra`.

mod count;
mod embed;
mod error;
mod image;
pub mod ingress;
mod parts;
mod request;
mod response;
mod schema;
mod stream;
mod wire;

use http::{HeaderName, HeaderValue};
use switchyard_codec::opaque::{Holds, Opaque, Place};
use switchyard_codec::{
    ir, key_header, AuthError, Codec, Credentials, DecodeError, Encoded, ErrorResponse, Framing, Outbound,
    RawUpstreamError, StreamDecoder, StreamEncoder,
};

/// The Gemini codec.
pub struct GeminiCodec;

/// Where a request of this protocol may hold audio (`may_hold_audio`).
static AUDIO_MIME: switchyard_codec::media::Marker =
    switchyard_codec::media::Marker::new(|| switchyard_codec::media::marker(b"\"audio/"));

impl Codec for GeminiCodec {
    fn protocol(&self) -> ir::Protocol {
        ir::Protocol::Gemini
    }

    fn max_tokens_members(&self) -> &'static [&'static [&'static str]] {
        &[&["generationConfig", "maxOutputTokens"], &["generation_config", "max_output_tokens"]]
    }

    fn choices_members(&self) -> &'static [&'static [&'static str]] {
        &[&["generationConfig", "candidateCount"], &["generation_config", "candidate_count"]]
    }

    fn metered_heads(&self) -> &'static [&'static str] {
        &["generationConfig", "generation_config"]
    }

    fn prefix_shape(&self) -> Option<switchyard_codec::prefix::PrefixShape> {
        Some(switchyard_codec::prefix::PrefixShape { whole: &["systemInstruction", "tools"], turns: "contents" })
    }

    /// A part whose `mimeType` is `audio/*`.
    fn may_hold_audio(&self, body: &[u8]) -> bool {
        switchyard_codec::media::holds(body, &AUDIO_MIME)
    }

    fn media_members(&self) -> &'static [&'static str] {
        // inlineData.data (inline_data.data in snake case).
        &["data"]
    }

    fn opaque(&self) -> Opaque {
        // Every member also answers to its snake_case name.
        const REQUEST: &[Place] = &[
            Place::at(&["contents", "parts", "inlineData", "data"], Holds::Media),
            Place::at(&["contents", "parts", "inline_data", "data"], Holds::Media),
            Place::at(&["contents", "parts", "functionResponse", "parts", "inlineData", "data"], Holds::Media),
            Place::at(&["contents", "parts", "function_response", "parts", "inline_data", "data"], Holds::Media),
            Place::at(&["contents", "parts", "thoughtSignature"], Holds::Signed),
            Place::at(&["contents", "parts", "thought_signature"], Holds::Signed),
            // A part's signature is taken to cover its text.
            Place::at(&["contents", "parts", "text"], Holds::SignedText).with("thoughtSignature"),
            Place::at(&["contents", "parts", "text"], Holds::SignedText).with("thought_signature"),
        ];
        const REPLY: &[Place] = &[
            Place::at(&["candidates", "content", "parts", "inlineData", "data"], Holds::Media),
            Place::at(&["candidates", "content", "parts", "thoughtSignature"], Holds::Signed),
            Place::at(&["candidates", "content", "parts", "text"], Holds::SignedText).with("thoughtSignature"),
        ];
        Opaque { request: REQUEST, reply: REPLY }
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

    fn image(&self) -> Option<&dyn switchyard_codec::image::ImageCodec> {
        Some(&image::GeminiImage)
    }

    fn embed(&self) -> Option<&dyn switchyard_codec::embed::EmbedCodec> {
        Some(&embed::GeminiEmbed)
    }

    fn read_response(&self, body: &[u8]) -> Result<ir::Response, DecodeError> {
        response::read(body)
    }

    fn write_response(&self, response: &ir::Response) -> Encoded {
        response::write(response)
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(stream::GeminiStreamDecoder::new())
    }

    fn stream_encoder(&self, framing: Framing) -> Box<dyn StreamEncoder> {
        Box::new(stream::GeminiStreamEncoder::new(framing))
    }

    /// SSE (`alt=sse`) is what the official SDKs request.
    fn default_framing(&self) -> Framing {
        Framing::Sse
    }

    /// A bare model name goes under `models/`; a resource name with its
    /// collection (`models/x`, `tunedModels/y`) keeps it. The id is one
    /// percent-encoded segment, so no `/`, `?`, `#`, `:` or `%` in it can
    /// change the upstream path, action or query.
    fn ingress(&self) -> &'static switchyard_codec::ingress::Ingress {
        &ingress::INGRESS
    }

    fn model_in_path(&self) -> bool {
        true
    }

    fn path_action(&self, stream: bool) -> &'static str {
        if stream {
            "streamGenerateContent?alt=sse"
        } else {
            "generateContent"
        }
    }

    fn upstream_path(&self, model: &str, stream: bool) -> String {
        let name = model.trim_start_matches('/');
        let (collection, id) = match name.split_once('/') {
            Some((collection @ ("models" | "tunedModels"), id)) => (collection, id),
            _ => ("models", name),
        };
        let id = switchyard_codec::path_segment(id);
        if stream {
            format!("/v1beta/{collection}/{id}:streamGenerateContent?alt=sse")
        } else {
            format!("/v1beta/{collection}/{id}:generateContent")
        }
    }

    fn auth_headers(
        &self,
        credentials: &Credentials,
        _outbound: &Outbound<'_>,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, AuthError> {
        key_header(ir::Protocol::Gemini, "x-goog-api-key", credentials)
    }

    fn count(&self) -> Option<&dyn switchyard_codec::count::CountCodec> {
        Some(&count::GeminiCount)
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
    fn paths_put_the_model_in_the_url() {
        let codec = GeminiCodec;
        assert_eq!(codec.upstream_path("gemini-2.5-flash", false), "/v1beta/models/gemini-2.5-flash:generateContent");
        assert_eq!(
            codec.upstream_path("gemini-2.5-flash", true),
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(codec.upstream_path("tunedModels/mine", false), "/v1beta/tunedModels/mine:generateContent");
        assert_eq!(
            codec.upstream_path("models/gemini-2.5-pro", false),
            "/v1beta/models/gemini-2.5-pro:generateContent"
        );
    }

    #[test]
    fn caller_text_in_a_model_name_cannot_change_the_path_or_query() {
        let cases = [
            ("m#frag", "m%23frag"),
            ("m?key=stolen", "m%3Fkey%3Dstolen"),
            ("m%2F..%2Fcached", "m%252F..%252Fcached"),
            ("../../v1/files", "..%2F..%2Fv1%2Ffiles"),
            ("models/../../files", "..%2F..%2Ffiles"),
            ("m:countTokens", "m%3AcountTokens"),
        ];
        for (model, id) in cases {
            assert_eq!(
                GeminiCodec.upstream_path(model, true),
                format!("/v1beta/models/{id}:streamGenerateContent?alt=sse"),
                "{model}"
            );
            assert_eq!(GeminiCodec.upstream_path(model, false), format!("/v1beta/models/{id}:generateContent"));
        }
    }

    #[test]
    fn auth_uses_the_goog_api_key_header() {
        let outbound = Outbound {
            method: "POST",
            url: "https://generativelanguage.googleapis.com/v1beta/models/m:generateContent",
            body: b"{}",
            time: SystemTime::UNIX_EPOCH,
        };
        let headers = GeminiCodec.auth_headers(&Credentials::ApiKey("k".into()), &outbound).unwrap();
        assert_eq!(headers.len(), 1);
        assert_eq!(headers[0].0.as_str(), "x-goog-api-key");
        assert_eq!(headers[0].1, "k");
        assert!(GeminiCodec.auth_headers(&Credentials::None, &outbound).unwrap().is_empty());
    }
}
