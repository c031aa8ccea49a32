//! Bedrock's ingress: the model in the path, streaming by endpoint
//! (`converse-stream`), AWS event-stream framing, and `InvokeModel`, whose
//! body says what it asks for.

use switchyard_codec::ingress::{Asks, FramingFrom, Ingress, Key, Model, Route, Sample, Serves, Stream};
use switchyard_codec::{scan, Framing};
use switchyard_ir::{ErrorInfo, ErrorKind, Operation};

/// The paths Bedrock's SDKs post to.
pub static INGRESS: Ingress = Ingress {
    routes: &ROUTES,
    owns: |path| path.starts_with("/model/"),
    stream_endpoints: "POST /model/{model}/converse streams nothing; POST /model/{model}/converse-stream streams",
    keeps_conversations: false,
    key: Key {
        header: "authorization",
        hint: "Authorization: Bearer (as a Bedrock API key), or a SigV4 signature made with the AWS key pair minted for your key",
    },
    sample: Sample { chat_path: "/model/{model}/converse", headers: &[] },
    signing: switchyard_codec::lineage::Signing::reads(Some(switchyard_codec::lineage::Signer::Claude))
        .taking(switchyard_codec::lineage::Lineage { claude: true, openai_or_claude: true, gemini: false }),
    trace_system: "aws.bedrock",
};

const ROUTES: [Route; 4] = [
    route("/model/{model}/converse", Asks::Op(Operation::Chat), false, Framing::EventStream),
    route("/model/{model}/converse-stream", Asks::Op(Operation::Chat), true, Framing::EventStream),
    route("/model/{model}/invoke", Asks::Body(invoked_operation), false, Framing::EventStream),
    // A token count answers whole.
    route("/model/{model}/count-tokens", Asks::Op(Operation::CountTokens), false, Framing::Sse),
];

const fn route(path: &'static str, asks: Asks, stream: bool, framing: Framing) -> Route {
    Route {
        path,
        asks,
        model: Model::Path,
        stream: Stream::Endpoint(stream),
        framing: FramingFrom::Fixed(framing),
        form: false,
        same_path: false,
        serves: Serves::Both,
    }
}

/// The operation an `InvokeModel` body asks for: `inputText` (Titan) or
/// `texts` (Cohere) embeds, `query` with `documents` reranks, `taskType`
/// (Nova Canvas, Titan Image) or `prompt` (Stability) makes images.
pub fn invoked_operation(body: &[u8]) -> Result<Operation, ErrorInfo> {
    let has = |key: &str| scan::top_level_value(body, key).ok().flatten().is_some();
    if has("inputText") || has("texts") {
        return Ok(Operation::Embed);
    }
    if has("query") && has("documents") {
        return Ok(Operation::Rerank);
    }
    if has("taskType") || has("prompt") {
        return Ok(Operation::Image);
    }
    Err(ErrorInfo::new(
        ErrorKind::InvalidRequest,
        "InvokeModel takes an embedding body (`inputText` for Titan, `texts` for Cohere), a rerank body \
         (`query` and `documents`) or an image body (`taskType` for Nova Canvas and Titan Image, `prompt` \
         for Stability); chat goes to /model/{model}/converse",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_says_what_invoke_asks() {
        assert_eq!(invoked_operation(br#"{"inputText":"hi"}"#).unwrap(), Operation::Embed);
        assert_eq!(invoked_operation(br#"{"texts":["a"],"input_type":"x"}"#).unwrap(), Operation::Embed);
        assert_eq!(invoked_operation(br#"{"query":"q","documents":["d"]}"#).unwrap(), Operation::Rerank);
        assert_eq!(invoked_operation(br#"{"taskType":"TEXT_IMAGE"}"#).unwrap(), Operation::Image);
        assert_eq!(invoked_operation(br#"{"prompt":"a cat"}"#).unwrap(), Operation::Image);
    }

    #[test]
    fn a_chat_a_lone_query_or_garbage_is_refused() {
        for body in
            [&br#"{"messages":[]}"#[..], br#"{"query":"q"}"#, b"\xff\x00{", b"", br#"{"nested":{"inputText":"x"}}"#]
        {
            let err = invoked_operation(body).unwrap_err();
            assert_eq!(err.kind, ErrorKind::InvalidRequest);
        }
    }
}
