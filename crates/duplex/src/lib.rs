//! The duplex surface: the routes where a caller opens a long-lived
//! socket, and the sessions that run on them.
//!
//! - [`responses`]: the Responses API over WebSocket (`GET /v1/responses`
//!   with an upgrade, Codex's first choice). Each `response.create` is one
//!   Responses request through the engine, to a lane of any protocol,
//!   admitted, filtered, settled and logged like an HTTP request; its
//!   stream comes back as the socket's events. Turns of one `stream_id`
//!   keep their order; `previous_response_id` resolves on the socket's own
//!   conversations first, then the kept store.
//! - [`realtime`]: OpenAI's Realtime API (`GET /v1/realtime?model=`,
//!   and `POST /v1/realtime/client_secrets` for the gateway's own
//!   short-lived secrets) relayed to lanes with `operation: realtime`;
//!   each `response.create` a generation admitted, screened and settled
//!   from its `response.done` usage on a ledger row of its own.
//! - [`live`]: Gemini Live (`BidiGenerateContent` over WebSocket)
//!   relayed to lanes with `operation: live`; each turn a generation
//!   admitted, screened and settled from its `usageMetadata` on a ledger
//!   row of its own. Live has no error message: a refusal is a 1008 close
//!   whose reason says why.
//! - `generation`, `upstream`, `screen`: what the Realtime and Live relays
//!   share (a generation as an exchange; the lane's own socket or the
//!   `mock://` fake; the guardrails that apply).
//! - [`door`]: what a socket passes before it is upgraded (the key, as the
//!   HTTP route reads it; the key's and the instance's open sockets).
//! - [`socket`]: a caller's socket as sessions use it: messages in,
//!   bounded in size, idle time and life; messages out through one writer;
//!   the gateway's word to finish (a reload, a stop).
//!
//! Every bound is `duplex:` in the config. A bad message is answered with
//! the protocol's error event, and the socket lives on (Live, which has
//! none, closes with the reason).

mod door;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod generation;
pub mod live;
pub mod realtime;
pub mod responses;
mod screen;
mod socket;
mod upstream;

use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;
use switchyard_state::Gateway;

/// The duplex routes, for the data router.
pub fn routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/v1/responses", get(responses::connect))
        .route("/v1/realtime", get(realtime::connect))
        .route("/v1/realtime/client_secrets", post(realtime::secret::mint))
        .route(
            "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent",
            get(live::connect_v1beta),
        )
        .route(
            "/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContent",
            get(live::connect_v1alpha),
        )
        // Where google-genai sends an ephemeral token.
        .route(
            "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContentConstrained",
            get(live::connect_v1beta),
        )
        .route(
            "/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContentConstrained",
            get(live::connect_v1alpha),
        )
        .route("/v1alpha/auth_tokens", post(live::token::mint))
}
