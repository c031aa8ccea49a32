//! The answers both the card and the call paths give: a JSON body with its
//! status, and the refusal of a key not granted an agent.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode};
use serde_json::{Map, Value};
use switchyard_a2a_wire::rpc;
use switchyard_state::governance::Caller;

/// `body` as JSON with `status`.
pub(crate) fn json_answer(status: StatusCode, body: &Value) -> Response {
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// The refusal of a key not granted `agent`.
pub(crate) fn not_granted(id: &Value, caller: &Caller, agent: &str) -> Value {
    let mut metadata = Map::new();
    metadata.insert("agent".into(), Value::String(agent.to_owned()));
    let message = format!("API key {} may not call agent `{agent}`", caller.key.record.prefix);
    rpc::refusal(id, rpc::FORBIDDEN, &message, "PERMISSION_DENIED", metadata)
}
