//! The AWS Bedrock Runtime Converse codec: `Converse` and `ConverseStream`
//! bodies ↔ IR, event-stream framing, SigV4 / API-key auth and Bedrock's
//! error shapes.
//!
//! Bedrock names the model in the URL path (`/model/{modelId}/converse`),
//! so the reader leaves `Request::model` empty and the writer never puts it
//! in the body. Streams are `application/vnd.amazon.eventstream` frames.

mod auth;
mod content;
mod count;
mod embed;
mod error;
mod eventstream;
mod image;
pub mod ingress;
mod request;
mod rerank;
mod response;
mod stream;
mod wire;

use http::{HeaderName, HeaderValue};
use switchyard_codec::opaque::{Holds, Opaque, Place};
use switchyard_codec::{
    ir, AuthError, Codec, Credentials, DecodeError, Encoded, ErrorResponse, Framing, Outbound, RawUpstreamError,
    StreamDecoder, StreamEncoder,
};

pub use error::{exception_frame, ERROR_TYPE_HEADER};
pub use eventstream::MAX_FRAME_BYTES;
pub use switchyard_codec::aws::region_from_host;

/// The Bedrock Converse codec.
pub struct BedrockCodec;

/// Where a request of this protocol may hold audio (`may_hold_audio`).
static AUDIO_BLOCK: switchyard_codec::media::Marker =
    switchyard_codec::media::Marker::new(|| switchyard_codec::media::marker(b"\"audio\""));

impl Codec for BedrockCodec {
    fn protocol(&self) -> ir::Protocol {
        ir::Protocol::Bedrock
    }

    fn max_tokens_members(&self) -> &'static [&'static [&'static str]] {
        &[&["inferenceConfig", "maxTokens"]]
    }

    fn metered_heads(&self) -> &'static [&'static str] {
        &["inferenceConfig", "requestMetadata"]
    }

    fn end_user_member(&self) -> &'static [&'static str] {
        &["requestMetadata", "user"]
    }

    fn prefix_shape(&self) -> Option<switchyard_codec::prefix::PrefixShape> {
        Some(switchyard_codec::prefix::PrefixShape { whole: &["system", "toolConfig"], turns: "messages" })
    }

    /// An `audio` content block.
    fn may_hold_audio(&self, body: &[u8]) -> bool {
        switchyard_codec::media::holds(body, &AUDIO_BLOCK)
    }

    fn media_members(&self) -> &'static [&'static str] {
        // image, document and audio `source.bytes` (base64).
        &["bytes"]
    }

    fn opaque(&self) -> Opaque {
        const REQUEST: &[Place] = &[
            Place::at(&["messages", "content", "image", "source", "bytes"], Holds::Media),
            Place::at(&["messages", "content", "document", "source", "bytes"], Holds::Media),
            Place::at(&["messages", "content", "video", "source", "bytes"], Holds::Media),
            Place::at(&["messages", "content", "audio", "source", "bytes"], Holds::Media),
            Place::at(&["messages", "content", "toolResult", "content", "image", "source", "bytes"], Holds::Media),
            Place::at(&["messages", "content", "toolResult", "content", "document", "source", "bytes"], Holds::Media),
            Place::at(&["messages", "content", "reasoningContent", "reasoningText", "signature"], Holds::Signed),
            Place::at(&["messages", "content", "reasoningContent", "redactedContent"], Holds::Signed),
            // The signature covers the reasoning's text ("include the text
            // and its signature unmodified").
            Place::at(&["messages", "content", "reasoningContent", "reasoningText", "text"], Holds::SignedText)
                .with("signature"),
        ];
        const REPLY: &[Place] = &[
            Place::at(&["output", "message", "content", "image", "source", "bytes"], Holds::Media),
            Place::at(
                &["output", "message", "content", "reasoningContent", "reasoningText", "signature"],
                Holds::Signed,
            ),
            Place::at(&["output", "message", "content", "reasoningContent", "redactedContent"], Holds::Signed),
            Place::at(
                &["output", "message", "content", "reasoningContent", "reasoningText", "text"],
                Holds::SignedText,
            )
            .with("signature"),
        ];
        Opaque { request: REQUEST, reply: REPLY }
    }

    fn past_reasoning(&self) -> Option<&'static switchyard_codec::opaque::PastReasoning> {
        Some(&content::PAST_REASONING)
    }

    fn read_request(&self, body: &[u8]) -> Result<ir::Request, DecodeError> {
        request::read_request(body)
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

    fn read_stop_reason(&self, body: &[u8]) -> Option<ir::StopReason> {
        switchyard_codec::scan::first_string_member(body, "stopReason").and_then(wire::stop_reason_from_wire)
    }

    fn write_response(&self, response: &ir::Response) -> Encoded {
        response::write_response(response)
    }

    fn stream_decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(stream::Decoder::default())
    }

    /// ConverseStream has one framing; every `framing` gets event-stream
    /// frames (an SSE or JSON-array Converse stream does not exist).
    fn stream_encoder(&self, _framing: Framing) -> Box<dyn StreamEncoder> {
        Box::new(stream::Encoder::default())
    }

    fn default_framing(&self) -> Framing {
        Framing::EventStream
    }

    fn ingress(&self) -> &'static switchyard_codec::ingress::Ingress {
        &ingress::INGRESS
    }

    fn model_in_path(&self) -> bool {
        true
    }

    fn rerank(&self) -> Option<&dyn switchyard_codec::rerank::RerankCodec> {
        Some(&rerank::BedrockRerank)
    }

    fn image(&self) -> Option<&dyn switchyard_codec::image::ImageCodec> {
        Some(&image::BedrockImage)
    }

    fn embed(&self) -> Option<&dyn switchyard_codec::embed::EmbedCodec> {
        Some(&embed::BedrockEmbed)
    }

    fn path_action(&self, stream: bool) -> &'static str {
        if stream {
            "converse-stream"
        } else {
            "converse"
        }
    }

    fn upstream_path(&self, model: &str, stream: bool) -> String {
        let action = if stream { "converse-stream" } else { "converse" };
        // ARNs and inference profiles hold `:` and `/`, which must not split
        // the path. SigV4 signs this path with each segment encoded once
        // more, as AWS does for every service but S3.
        format!("/model/{}/{action}", switchyard_codec::path_segment(model))
    }

    fn auth_headers(
        &self,
        credentials: &Credentials,
        outbound: &Outbound<'_>,
    ) -> Result<Vec<(HeaderName, HeaderValue)>, AuthError> {
        auth::auth_headers(credentials, outbound)
    }

    fn count(&self) -> Option<&dyn switchyard_codec::count::CountCodec> {
        Some(&count::BedrockCount)
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

    #[test]
    fn model_ids_are_one_path_segment() {
        assert_eq!(
            BedrockCodec.upstream_path("anthropic.claude-3-haiku-20240307-v1:0", false),
            "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
        );
        assert_eq!(
            BedrockCodec.upstream_path(
                "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.meta.llama3-2-1b-instruct-v1:0",
                true
            ),
            "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.meta.llama3-2-1b-instruct-v1%3A0/converse-stream"
        );
    }

    #[test]
    fn caller_text_in_a_model_id_cannot_change_the_path_or_query() {
        for model in ["m#frag", "m?x=1", "../../v1/other", "m%2F..%2Fx", "m/converse-stream?"] {
            let path = BedrockCodec.upstream_path(model, false);
            let segments: Vec<&str> = path.split('/').collect();
            assert_eq!(segments.len(), 4, "{model}: {path}");
            assert_eq!((segments[1], segments[3]), ("model", "converse"), "{model}: {path}");
            assert!(!path.contains(['?', '#']), "{model}: {path}");
        }
        assert_eq!(BedrockCodec.upstream_path("m%2Fx", true), "/model/m%252Fx/converse-stream");
    }

    #[test]
    fn streams_are_event_streams() {
        assert_eq!(BedrockCodec.default_framing(), Framing::EventStream);
    }
}
