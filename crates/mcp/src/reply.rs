//! How `/mcp` answers a message: one JSON-RPC message as JSON, with its
//! HTTP status (an event stream is `call`'s own).

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode};
use serde_json::Value;

/// `body` as a JSON answer with `status`.
pub(crate) fn json_answer(status: StatusCode, body: &Value) -> Response {
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
