//! Cohere's ingress: v2 chat, embed and rerank (and v1's rerank), the body
//! naming the model and the stream flag.

use switchyard_codec::ingress::{Ingress, Key, Route, Sample};
use switchyard_ir::Operation;

/// The paths Cohere's SDKs post to.
pub static INGRESS: Ingress = Ingress {
    routes: &ROUTES,
    owns: |path| switchyard_codec::ingress::is_route(&ROUTES, path),
    stream_endpoints: "",
    keeps_conversations: false,
    key: Key::BEARER,
    sample: Sample { chat_path: "/v2/chat", headers: &[] },
    // Its readers keep no signature.
    signing: switchyard_codec::lineage::Signing::reads(None),
    trace_system: "cohere",
};

const ROUTES: [Route; 4] = [
    Route::body("/v2/chat", Operation::Chat),
    Route::body("/v2/embed", Operation::Embed),
    Route::body("/v2/rerank", Operation::Rerank),
    Route::body("/v1/rerank", Operation::Rerank).callers_only(),
];
