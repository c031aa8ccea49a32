//! Anthropic's ingress: the Messages API and its token count, also under a
//! pool named in the path (`base_url = http://host/{pool}`) and an ad-hoc
//! `{provider}/{model}` prefix.

use switchyard_codec::ingress::{FramingFrom, Ingress, Key, Model, Route, Sample, Stream};
use switchyard_codec::Framing;
use switchyard_ir::Operation;

/// The paths Anthropic's SDKs post to.
pub static INGRESS: Ingress = Ingress {
    routes: &ROUTES,
    owns: |path| path.ends_with("/v1/messages") || path.ends_with("/v1/messages/count_tokens"),
    stream_endpoints: "",
    keeps_conversations: false,
    key: Key::header("x-api-key", "x-api-key"),
    sample: Sample { chat_path: "/v1/messages", headers: &[("anthropic-version", "2023-06-01")] },
    signing: switchyard_codec::lineage::Signing::reads(Some(switchyard_codec::lineage::Signer::Claude))
        .taking(switchyard_codec::lineage::Lineage { claude: true, openai_or_claude: true, gemini: false }),
    trace_system: "anthropic",
};

const ROUTES: [Route; 5] = [
    Route::body("/v1/messages", Operation::Chat),
    count(Route::body("/v1/messages/count_tokens", Operation::CountTokens)),
    Route { model: Model::Path, ..Route::body("/{name}/v1/messages", Operation::Chat) }.callers_only(),
    count(Route { model: Model::Path, ..Route::body("/{name}/v1/messages/count_tokens", Operation::CountTokens) })
        .callers_only(),
    Route { model: Model::Direct, ..Route::body("/{provider}/{model}/v1/messages", Operation::Chat) }.callers_only(),
];

/// A token count answers whole.
const fn count(route: Route) -> Route {
    Route { stream: Stream::Endpoint(false), framing: FramingFrom::Fixed(Framing::Sse), ..route }
}
