//! What Switchyard keeps for its callers, over any backend:
//!
//! - `files`: OpenAI's `/v1/files` (multipart upload under `files.max_bytes`,
//!   streamed to the store in chunks; list, get, content, delete), each
//!   file its uploader's alone (its owner: a key, or a token's or
//!   certificate's subject under the key they share);
//! - `batches`: OpenAI's `/v1/batches` and Anthropic's
//!   `/v1/messages/batches`, each in its own shape, their lines read as
//!   they arrive and queued in the store in parts;
//! - `door`: what an upload or a batch passes first (the key's rate and
//!   concurrency limits, its storage quota, the body read timeout);
//! - `worker`: the lines run through the data router as the key that
//!   submitted them (routing, breakers, failover, guardrails, cache,
//!   budgets: the path a caller's request takes), claimed under a lease so
//!   several instances drain one queue and a crashed one's lines run again;
//! - `responses`: the Responses API's `store` and `previous_response_id`
//!   (the conversation rebuilt for any lane protocol), and
//!   `GET`/`DELETE /v1/responses/{id}` with `input_items`, kept as long
//!   as the caller's group's retention allows, sealed under its key;
//! - `purge`: what expired, or was abandoned part-way, removed hourly.
//!
//! Another owner's object is a 404, never a 403: its existence is not told.
// A handler's refusal is its whole answer, passed straight back: boxing it
// buys nothing off the request path.
#![allow(clippy::result_large_err, reason = "an Err here is the handler's answer, returned as is")]

pub mod batches;
mod door;
pub mod files;
pub mod purge;
pub mod responses;
pub mod worker;

use std::sync::Arc;

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use switchyard_ir::{ErrorInfo, ErrorKind, Protocol};
use switchyard_state::governance::Caller;
use switchyard_state::Gateway;

/// The routes of files, batches and stored responses, for the data router.
pub fn routes() -> Router<Arc<Gateway>> {
    Router::new()
        .route("/v1/files", post(files::upload).get(files::list))
        .route("/v1/files/{id}", get(files::get).delete(files::delete))
        .route("/v1/files/{id}/content", get(files::content))
        .route("/v1/batches", post(batches::openai::create).get(batches::openai::list))
        .route("/v1/batches/{id}", get(batches::openai::get))
        .route("/v1/batches/{id}/cancel", post(batches::openai::cancel))
        .route("/v1/messages/batches", post(batches::anthropic::create).get(batches::anthropic::list))
        .route("/v1/messages/batches/{id}", get(batches::anthropic::get).delete(batches::anthropic::delete))
        .route("/v1/messages/batches/{id}/cancel", post(batches::anthropic::cancel))
        .route("/v1/messages/batches/{id}/results", get(batches::anthropic::results))
        .route("/v1/responses/{id}", get(responses::get).delete(responses::delete))
        .route("/v1/responses/{id}/input_items", get(responses::input_items))
}

/// Who a request acts for: its caller's owner (its key's id, or a token's
/// or a certificate's subject under the key they share:
/// `switchyard_state::governance::owner`; empty on an open gateway), or
/// the refusal in `protocol`.
pub(crate) fn owner(gateway: &Gateway, protocol: Protocol, parts: &Parts) -> Result<String, Response> {
    caller(gateway, protocol, parts).map(|caller| owner_of(caller.as_ref()))
}

/// The caller a request's headers name (`None` on an open gateway), or the
/// refusal in `protocol`.
pub(crate) fn caller(gateway: &Gateway, protocol: Protocol, parts: &Parts) -> Result<Option<Caller>, Response> {
    let client = parts.extensions.get::<switchyard_state::ClientName>();
    switchyard_engine::authenticate::caller(gateway, protocol, &parts.uri, &parts.headers, client, &[])
        .map_err(|info| error(gateway, protocol, &info))
}

/// Whose objects a caller makes and finds: its owner (its key's id, or a
/// token's or certificate's subject under the key they share; empty on an
/// open gateway).
pub(crate) fn owner_of(caller: Option<&Caller>) -> String {
    caller.map(|c| c.owner.to_string()).unwrap_or_default()
}

/// An error in `protocol`'s shape.
pub(crate) fn error(gateway: &Gateway, protocol: Protocol, info: &ErrorInfo) -> Response {
    switchyard_engine::render::render_error(gateway.codec(protocol), info).map(Body::new)
}

/// `protocol`'s 400 with `message` (naming `param` when given).
pub(crate) fn invalid(
    gateway: &Gateway,
    protocol: Protocol,
    message: impl Into<String>,
    param: Option<&str>,
) -> Response {
    let mut info = ErrorInfo::new(ErrorKind::InvalidRequest, message);
    info.param = param.map(str::to_owned);
    error(gateway, protocol, &info)
}

/// `protocol`'s 404 for `what`.
pub(crate) fn not_found(gateway: &Gateway, protocol: Protocol, what: &str) -> Response {
    error(gateway, protocol, &ErrorInfo::new(ErrorKind::NotFound, format!("{what} not found")))
}

/// A store failure, as the caller's 503.
pub(crate) fn unavailable(gateway: &Gateway, protocol: Protocol, err: &switchyard_store::StoreError) -> Response {
    tracing::warn!(error = %err, "the store failed a kept-object request");
    let info =
        ErrorInfo::new(ErrorKind::Overloaded, "the gateway's store is unavailable; retry shortly").with_status(503);
    error(gateway, protocol, &info)
}

/// A JSON answer.
pub(crate) fn json(status: StatusCode, value: &serde_json::Value) -> Response {
    let mut response = (status, serde_json::to_vec(value).unwrap_or_default()).into_response();
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// Milliseconds since the epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A new id: `prefix` and 24 random letters and digits.
pub(crate) fn new_id(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut id = String::with_capacity(prefix.len() + 24);
    id.push_str(prefix);
    for _ in 0..24 {
        id.push(char::from(ALPHABET[fastrand::usize(..ALPHABET.len())]));
    }
    id
}

/// Whether `text` could be an id this crate made (letters, digits, `_`,
/// `-`; at most 128 bytes): anything else is not looked up.
pub(crate) fn plausible_id(text: &str) -> bool {
    !text.is_empty() && text.len() <= 128 && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Unix seconds of `ms`.
pub(crate) fn seconds(ms: i64) -> i64 {
    ms.div_euclid(1000)
}
