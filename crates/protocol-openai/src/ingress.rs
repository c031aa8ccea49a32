//! OpenAI's ingress: the body names the model and the stream flag; its own
//! operations (moderations, images, audio) are asked of the lane at the
//! same path, audio as a multipart form.

use switchyard_codec::ingress::{Ingress, Key, Route, Sample};
use switchyard_ir::Operation;

/// The paths OpenAI's SDKs post to.
pub static INGRESS: Ingress = Ingress {
    routes: &ROUTES,
    owns: |path| switchyard_codec::ingress::is_route(&ROUTES, path),
    stream_endpoints: "",
    keeps_conversations: false,
    key: Key::BEARER,
    sample: Sample { chat_path: "/v1/chat/completions", headers: &[] },
    signing: switchyard_codec::lineage::Signing::reads(Some(switchyard_codec::lineage::Signer::Claude)),
    trace_system: "openai",
};

const ROUTES: [Route; 9] = [
    Route::body("/v1/chat/completions", Operation::Chat),
    // The legacy completions: asked of chat lanes.
    Route::body("/v1/completions", Operation::Completion),
    Route::body("/v1/embeddings", Operation::Embed),
    own("/v1/moderations", Operation::Moderation, false),
    own("/v1/images/generations", Operation::Image, false),
    own("/v1/audio/speech", Operation::Speech, false),
    own("/v1/audio/transcriptions", Operation::Transcription, true),
    own("/v1/audio/translations", Operation::Transcription, true),
    // Rerank in OpenAI's shape (as Jina and vLLM serve it): a lane's path;
    // callers rerank at Cohere's.
    Route::body("/v1/rerank", Operation::Rerank).vendor_only(),
];

/// One of OpenAI's own operations: answered whole, asked at the same path.
const fn own(path: &'static str, operation: Operation, form: bool) -> Route {
    let route = Route::body(path, operation);
    Route { stream: switchyard_codec::ingress::Stream::Endpoint(false), form, same_path: true, ..route }
}
