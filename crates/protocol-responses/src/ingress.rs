//! The Responses API's ingress: one path, the body names the model and the
//! stream flag, and its conversations may be kept by the gateway.

use switchyard_codec::ingress::{Ingress, Key, Route, Sample};
use switchyard_ir::Operation;

/// The path the Responses API's SDKs post to.
pub static INGRESS: Ingress = Ingress {
    routes: &ROUTES,
    owns: |path| switchyard_codec::ingress::is_route(&ROUTES, path),
    stream_endpoints: "",
    keeps_conversations: true,
    key: Key::BEARER,
    sample: Sample { chat_path: "/v1/responses", headers: &[] },
    signing: switchyard_codec::lineage::Signing::reads(Some(switchyard_codec::lineage::Signer::OpenAiOrClaude)).taking(
        switchyard_codec::lineage::Lineage { openai_or_claude: true, ..switchyard_codec::lineage::Lineage::NONE },
    ),
    trace_system: "openai",
};

const ROUTES: [Route; 1] = [Route::body("/v1/responses", Operation::Chat)];
