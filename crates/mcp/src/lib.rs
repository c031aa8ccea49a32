//! Switchyard's MCP gateway: one endpoint, `/mcp` (streamable HTTP), in
//! front of the tool servers `mcp:` names.
//!
//! - `rpc`, `names` and `pin` (from `switchyard-mcp-wire`) are pure:
//!   JSON-RPC messages and versions, how servers' names become one
//!   catalogue's, and tool schema digests;
//! - `upstream` reaches the servers (streamable HTTP through the
//!   SSRF-guarded client; stdio children with a cleared environment,
//!   quarantined when they keep exiting);
//! - `session` keeps callers' sessions (Redis in a fleet, so a session's
//!   messages may land on any instance), and those the gateway holds with
//!   servers for stateless (2026-07-28) callers;
//! - `handles` seals what the gateway hands callers (session ids,
//!   cursors) to the route, caller, servers and expiry they were minted
//!   for; `oauth` is `/mcp` as an OAuth protected resource (RFC 9728
//!   metadata, the RFC 8707 audience of a caller's token);
//! - `hub` is the process's hub (listings, pins, the admin view);
//! - `serve` answers `/mcp`, and `call` runs a `tools/call`,
//!   `prompts/get` or `resources/read` under the key's grants, limits,
//!   price, guardrails and the ledger.

// A handler's refusal is its whole answer, passed straight back.
#![allow(clippy::result_large_err, reason = "an Err here is the handler's answer, returned as is")]

pub mod call;
pub mod handles;
pub mod hub;
pub mod oauth;
pub mod reply;
pub mod serve;
pub mod session;
pub mod upstream;

use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;
use switchyard_state::Gateway;

pub use hub::Hub;
pub use switchyard_mcp_wire::{names, pin, rpc};

/// A tool call's (a prompt's, a resource read's) operation in the ledger.
pub const OPERATION: &str = "mcp";

/// The ledger's lane of MCP server `server` (what its price is found by).
pub fn lane_name(server: &str) -> String {
    format!("mcp:{server}")
}

/// `/mcp`, `/mcp/<name>` and their protected-resource metadata, for the
/// data router.
pub fn routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/mcp", post(serve::post).get(serve::get).delete(serve::delete))
        .route("/mcp/{name}", post(serve::post_named).get(serve::get).delete(serve::delete_named))
        .route(oauth::METADATA_PATH, get(oauth::metadata))
        .route(concat!("/.well-known/oauth-protected-resource", "/mcp"), get(oauth::metadata))
        .route(concat!("/.well-known/oauth-protected-resource", "/mcp/{name}"), get(oauth::metadata_named))
}
