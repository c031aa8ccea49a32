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

    /// The route's path with each parameter filled in as a caller would.
    fn concrete(path: &str) -> String {
        path.split('/')
            .map(|segment| match segment {
                "{*target}" => "gemini-2.5-flash:generateContent",
                s if s.starts_with('{') => "some-model",
                s => s,
            })
            .collect::<Vec<_>>()
            .join("/")
    }

    /// Each table says each thing once: an action route reads its model,
    /// operation and stream flag from the action together; a path-named
    /// route has a parameter to read it from.
    #[test]
    fn every_ingress_table_is_coherent() {
        use switchyard_codec::ingress::{Asks, Model, Stream};
        for protocol in Protocol::ALL {
            let ingress = codec(protocol).ingress();
            assert!(!ingress.routes.is_empty(), "{protocol} has no routes");
            for route in ingress.routes {
                let action = matches!(route.model, Model::Action(_));
                assert_eq!(action, matches!(route.asks, Asks::Action), "{protocol} {}", route.path);
                assert_eq!(action, matches!(route.stream, Stream::Action), "{protocol} {}", route.path);
                let params = route.path.matches('{').count();
                let wanted = match route.model {
                    Model::Body => 0,
                    Model::Path | Model::Action(_) => 1,
                    Model::Direct => 2,
                };
                assert_eq!(params, wanted, "{protocol} {}", route.path);
                assert!(route.path.starts_with('/'), "{protocol} {}", route.path);
            }
        }
    }

    /// An error the listener writes itself is in the caller's protocol: each
    /// caller path is owned by its protocol and by no other.
    #[test]
    fn every_caller_path_is_owned_by_its_protocol_alone() {
        for protocol in Protocol::ALL {
            for route in codec(protocol).ingress().routes.iter().filter(|r| r.serves.callers()) {
                let path = concrete(route.path);
                let owners: Vec<Protocol> =
                    Protocol::ALL.into_iter().filter(|&p| (codec(p).ingress().owns)(&path)).collect();
                assert_eq!(owners, [protocol], "{path}");
            }
        }
    }

    /// The playground's sample is a caller path of its own protocol alone,
    /// and its key goes in a header the gateway reads a key from (the
    /// credential `state::governance::authenticate` looks for).
    #[test]
    fn every_sample_and_key_is_one_the_gateway_answers() {
        for protocol in Protocol::ALL {
            let ingress = codec(protocol).ingress();
            let path = ingress.sample.path("some-model");
            assert!(!path.contains('{'), "{protocol}: {path} keeps a parameter");
            let owners: Vec<Protocol> =
                Protocol::ALL.into_iter().filter(|&p| (codec(p).ingress().owns)(&path)).collect();
            assert_eq!(owners, [protocol], "{protocol}: {path}");
            assert!(
                ["authorization", "x-api-key", "x-goog-api-key"].contains(&ingress.key.header),
                "{protocol}: the gateway reads no key from {}",
                ingress.key.header
            );
            assert!(
                ingress.key.hint.to_ascii_lowercase().contains(ingress.key.header),
                "{protocol}: {}",
                ingress.key.hint
            );
            let system = ingress.trace_system;
            assert!(!system.is_empty() && system.bytes().all(|b| b.is_ascii_lowercase() || b == b'.'), "{system}");
        }
    }

    /// The completions codec answers at OpenAI's paths: it shares their table.
    #[test]
    fn the_completions_codec_shares_openais_table() {
        let openai = codec(Protocol::OpenAi);
        let completions = openai.completions().map(|c| c.ingress());
        assert!(completions.is_some_and(|table| std::ptr::eq(table, openai.ingress())));
    }

    /// The lineage pin, as the protocols' tables set it (the rules moved
    /// here from `codec::lineage` with the facts).
    mod lineage {
        use super::*;
        use switchyard_codec::lineage::{Lineage, Signing};
        use switchyard_ir::{Block, Message, Request, Role, ToolUse};

        fn signing(protocol: Protocol) -> &'static Signing {
            &codec(protocol).ingress().signing
        }

        fn turn(block: Block) -> Request {
            Request { messages: vec![Message::new(Role::Assistant, vec![block])], ..Request::default() }
        }

        #[test]
        fn signed_thinking_pins_to_the_vendor_that_signed_it() {
            let thinking = Block::Thinking { text: "t".into(), signature: Some("EqQB".into()) };
            let claude = Lineage::of(&turn(thinking.clone()), signing(Protocol::Anthropic));
            assert!(claude.accepts(signing(Protocol::Anthropic)) && claude.accepts(signing(Protocol::Bedrock)));
            assert!(!claude.accepts(signing(Protocol::Gemini)) && !claude.accepts(signing(Protocol::OpenAi)));
            let gemini = Lineage::of(&turn(thinking.clone()), signing(Protocol::Gemini));
            assert!(gemini.accepts(signing(Protocol::Gemini)) && !gemini.accepts(signing(Protocol::Anthropic)));
            let either = Lineage::of(&turn(thinking), signing(Protocol::Responses));
            assert!(either.accepts(signing(Protocol::Responses)) && either.accepts(signing(Protocol::Bedrock)));
            assert!(!either.accepts(signing(Protocol::OpenAi)) && !either.accepts(signing(Protocol::Cohere)));
        }

        #[test]
        fn a_signed_call_pins_to_gemini_and_plain_history_pins_nothing() {
            let mut call = ToolUse::new("call_1", "f", "{}");
            call.signature = Some("c2ln".into());
            let lineage = Lineage::of(&turn(Block::ToolUse(call)), signing(Protocol::OpenAi));
            assert_eq!(lineage, Lineage { gemini: true, ..Lineage::default() });
            let plain = Lineage::of(&turn(Block::text("hi")), signing(Protocol::Anthropic));
            assert!(!plain.is_signed() && plain.accepts(signing(Protocol::Cohere)));
            // Claude's and Gemini's both: no lane takes them all.
            let both = Lineage { claude: true, gemini: true, ..Lineage::default() };
            assert!(Protocol::ALL.iter().all(|p| !both.accepts(signing(*p))));
        }
    }
}
