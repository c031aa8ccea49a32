//! Switchyard's A2A gateway: the agents `agents:` names, each behind
//! `/a2a/{agent}` (JSON-RPC, and the HTTP+JSON binding's paths under it)
//! with its card at `/a2a/{agent}/.well-known/agent-card.json`, rewritten
//! to point here.
//!
//! - `switchyard-a2a-wire` holds what is pure (requests and both
//!   versions' methods, card rewriting, what messages carry);
//! - `hub` is the process's state (the client, cards read, task owners,
//!   agents' rates), made on the first call to an agent;
//! - `serve` answers the HTTP routes, `call` runs one request under the
//!   key's grant, limits, guardrails and the ledger;
//! - `run` is the run identity a call carries to the agent.

// A handler's refusal is its whole answer, passed straight back.
#![allow(clippy::result_large_err, reason = "an Err here is the handler's answer, returned as is")]

mod answer;
mod call;
pub mod hub;
pub mod run;
pub mod serve;

use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;
use switchyard_state::Gateway;

pub use switchyard_a2a_wire::{card, message, rpc};

/// An agent call's operation in the ledger.
pub const OPERATION: &str = "a2a";

/// The ledger's lane of agent `agent`.
pub fn lane_name(agent: &str) -> String {
    format!("a2a:{agent}")
}

/// `/a2a/{agent}`, its HTTP+JSON paths and its card, for the data router.
pub fn routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/a2a/{agent}", post(serve::post))
        .route("/a2a/{agent}/.well-known/agent-card.json", get(serve::card))
        .route("/a2a/{agent}/{*path}", get(serve::rest).post(serve::rest).delete(serve::rest))
}
