//! The six protocol codecs behind one look-up: `codec(Protocol)` gives the
//! reader and writer for a protocol. Everything above this crate is
//! protocol-agnostic and reaches wire formats only through here.

pub use switchyard_codec::*;
pub use switchyard_ir as ir;

use switchyard_protocol_anthropic::AnthropicCodec;
use switchyard_protocol_bedrock::BedrockCodec;
use switchyard_protocol_cohere::CohereCodec;
use switchyard_protocol_gemini::GeminiCodec;
use switchyard_protocol_openai::OpenAiCodec;
use switchyard_protocol_responses::ResponsesCodec;

/// The codec of `protocol`.
pub fn codec(protocol: Protocol) -> &'static dyn Codec {
    match protocol {
        Protocol::OpenAi => &OpenAiCodec,
        Protocol::Responses => &ResponsesCodec,
        Protocol::Anthropic => &AnthropicCodec,
        Protocol::Gemini => &GeminiCodec,
        Protocol::Cohere => &CohereCodec,
        Protocol::Bedrock => &BedrockCodec,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_ir::Operation;

    /// Config trusts `Operation::served_by` to know at boot which lanes can
    /// serve an operation: every codec must agree with it.
    #[test]
    fn every_codec_has_the_operations_the_table_says() {
        for protocol in Protocol::ALL {
            assert_eq!(codec(protocol).embed().is_some(), Operation::Embed.served_by(protocol), "{protocol} embed");
            assert_eq!(codec(protocol).rerank().is_some(), Operation::Rerank.served_by(protocol), "{protocol} rerank");
            assert_eq!(codec(protocol).image().is_some(), Operation::Image.served_by(protocol), "{protocol} image");
        }
    }
}
