//! Anthropic's Message Batches: `POST /v1/messages/batches` with requests
//! inline, `GET …[/{id}]`, `POST …/{id}/cancel`, `GET …/{id}/results`
//! (JSONL once the batch has ended) and `DELETE …/{id}` (an ended batch).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};
use switchyard_ir::Protocol;
use switchyard_state::Gateway;
use switchyard_store::{BatchJob, BatchState, LineState};

use super::{check_lines, submit, Line};
use crate::{invalid, json, new_id, not_found, owner, unavailable};

const PROTOCOL: Protocol = Protocol::Anthropic;

/// Anthropic's window: a batch's unfinished requests expire after a day.
const WINDOW_MS: i64 = 24 * 3_600_000;

/// The largest create body read (Anthropic's own limit is 256 MB).
const MAX_CREATE: usize = 256 * 1000 * 1000;

#[derive(Debug, Deserialize)]
struct Create {
    requests: Vec<BatchRequest>,
}

#[derive(Debug, Deserialize)]
struct BatchRequest {
    custom_id: String,
    params: Box<serde_json::value::RawValue>,
}

fn rfc3339(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_seconds(at).to_string()
}

/// `https://host/v1/messages/batches/{id}/results`, from the request's host.
fn results_url(parts: &axum::http::request::Parts, id: &str) -> String {
    let host = parts.headers.get(http::header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("localhost");
    let scheme = if parts.uri.scheme_str() == Some("https") { "https" } else { "http" };
    format!("{scheme}://{host}/v1/messages/batches/{id}/results")
}

/// A batch in Anthropic's shape.
fn batch_object(state: &BatchState, results: &str) -> Value {
    let job = &state.job;
    let counts = &state.counts;
    let ended = counts.done();
    let status = match (ended, job.cancelled_ms) {
        (true, _) => "ended",
        (false, Some(_)) => "canceling",
        (false, None) => "in_progress",
    };
    json!({
        "id": job.id,
        "type": "message_batch",
        "processing_status": status,
        "request_counts": {
            "processing": counts.pending + counts.running,
            "succeeded": counts.succeeded,
            "errored": counts.failed,
            "canceled": counts.cancelled,
            "expired": counts.expired,
        },
        "ended_at": if ended { counts.last_done_ms.or(job.cancelled_ms).map(rfc3339) } else { None },
        "created_at": rfc3339(job.created_ms),
        "expires_at": rfc3339(job.expires_ms),
        "archived_at": null,
        "cancel_initiated_at": job.cancelled_ms.map(rfc3339),
        "results_url": if ended { Some(results) } else { None },
    })
}

/// `POST /v1/messages/batches`.
pub async fn create(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let owner = match owner(&gateway, PROTOCOL, &parts) {
        Ok(owner) => owner,
        Err(refused) => return refused,
    };
    let Ok(bytes) = axum::body::to_bytes(body, MAX_CREATE).await else {
        return invalid(&gateway, PROTOCOL, "the batch is larger than 256 MB", None);
    };
    let create: Create = match serde_json::from_slice(&bytes) {
        Ok(create) => create,
        Err(err) => return invalid(&gateway, PROTOCOL, format!("not a message batch: {err}"), Some("requests")),
    };
    let mut lines = Vec::with_capacity(create.requests.len());
    for (index, request) in create.requests.into_iter().enumerate() {
        let valid = !request.custom_id.is_empty()
            && request.custom_id.len() <= 64
            && request.custom_id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid {
            let message = format!("requests.{index}.custom_id must be 1 to 64 letters, digits, `_` or `-`");
            return invalid(&gateway, PROTOCOL, message, None);
        }
        if !request.params.get().trim_start().starts_with('{') {
            return invalid(&gateway, PROTOCOL, format!("requests.{index}.params must be an object"), None);
        }
        lines.push(Line { custom_id: request.custom_id, body: request.params.get().as_bytes().to_vec() });
    }
    if let Err(message) = check_lines(&lines, gateway.config.kept.batches.max_lines) {
        return invalid(&gateway, PROTOCOL, message, Some("requests"));
    }
    let created_ms = crate::now_ms();
    let job = BatchJob {
        id: new_id("msgbatch_"),
        owner,
        shape: "anthropic".into(),
        endpoint: "/v1/messages".into(),
        created_ms,
        expires_ms: created_ms.saturating_add(WINDOW_MS),
        cancelled_ms: None,
        total: 0,
        meta: "{}".into(),
    };
    match submit(&gateway, PROTOCOL, job, lines).await {
        Ok(state) => json(StatusCode::OK, &batch_object(&state, &results_url(&parts, &state.job.id))),
        Err(response) => response,
    }
}

async fn owned(gateway: &Gateway, owner: &str, id: &str) -> Result<BatchState, Response> {
    match super::find(gateway, PROTOCOL, owner, id).await? {
        Some(state) if state.job.shape == "anthropic" => Ok(state),
        _ => Err(not_found(gateway, PROTOCOL, &format!("message batch `{id}`"))),
    }
}

/// `GET /v1/messages/batches/{id}`.
pub async fn get(State(gateway): State<Arc<Gateway>>, Path(id): Path<String>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let owner = match owner(&gateway, PROTOCOL, &parts) {
        Ok(owner) => owner,
        Err(refused) => return refused,
    };
    match owned(&gateway, &owner, &id).await {
        Ok(state) => json(StatusCode::OK, &batch_object(&state, &results_url(&parts, &id))),
        Err(response) => response,
    }
}

/// `GET /v1/messages/batches`.
pub async fn list(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let owner = match owner(&gateway, PROTOCOL, &parts) {
        Ok(owner) => owner,
        Err(refused) => return refused,
    };
    match gateway.kept.batches.batches(owner, 1_000).await {
        Ok(states) => {
            let data: Vec<Value> = states
                .iter()
                .filter(|s| s.job.shape == "anthropic")
                .map(|s| batch_object(s, &results_url(&parts, &s.job.id)))
                .collect();
            let first = data.first().map(|b| b["id"].clone());
            let last = data.last().map(|b| b["id"].clone());
            json(StatusCode::OK, &json!({"data": data, "has_more": false, "first_id": first, "last_id": last}))
        }
        Err(err) => unavailable(&gateway, PROTOCOL, &err),
    }
}

/// `POST /v1/messages/batches/{id}/cancel`.
pub async fn cancel(State(gateway): State<Arc<Gateway>>, Path(id): Path<String>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let owner = match owner(&gateway, PROTOCOL, &parts) {
        Ok(owner) => owner,
        Err(refused) => return refused,
    };
    if let Err(response) = owned(&gateway, &owner, &id).await {
        return response;
    }
    match gateway.kept.batches.cancel_batch(owner, id.clone(), crate::now_ms()).await {
        Ok(Some(state)) => json(StatusCode::OK, &batch_object(&state, &results_url(&parts, &id))),
        Ok(None) => not_found(&gateway, PROTOCOL, &format!("message batch `{id}`")),
        Err(err) => unavailable(&gateway, PROTOCOL, &err),
    }
}

/// `DELETE /v1/messages/batches/{id}`: only an ended batch.
pub async fn delete(State(gateway): State<Arc<Gateway>>, Path(id): Path<String>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let owner = match owner(&gateway, PROTOCOL, &parts) {
        Ok(owner) => owner,
        Err(refused) => return refused,
    };
    match owned(&gateway, &owner, &id).await {
        Ok(state) if !state.counts.done() => {
            invalid(&gateway, PROTOCOL, "a batch can be deleted once it has ended; cancel it first", None)
        }
        Ok(_) => match gateway.kept.batches.delete_batch(owner, id.clone()).await {
            Ok(_) => json(StatusCode::OK, &json!({"id": id, "type": "message_batch_deleted"})),
            Err(err) => unavailable(&gateway, PROTOCOL, &err),
        },
        Err(response) => response,
    }
}

/// `GET /v1/messages/batches/{id}/results`: one JSON line per request.
pub async fn results(State(gateway): State<Arc<Gateway>>, Path(id): Path<String>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let owner = match owner(&gateway, PROTOCOL, &parts) {
        Ok(owner) => owner,
        Err(refused) => return refused,
    };
    match owned(&gateway, &owner, &id).await {
        Ok(state) if !state.counts.done() => {
            return invalid(&gateway, PROTOCOL, "results are available once the batch has ended", None);
        }
        Ok(_) => {}
        Err(response) => return response,
    }
    let outcomes = match gateway.kept.batches.line_outcomes(owner, id).await {
        Ok(outcomes) => outcomes,
        Err(err) => return unavailable(&gateway, PROTOCOL, &err),
    };
    let mut out = Vec::new();
    for outcome in &outcomes {
        let body: Value = serde_json::from_slice(&outcome.body).unwrap_or(Value::Null);
        let result = match outcome.state {
            LineState::Succeeded => json!({"type": "succeeded", "message": body}),
            LineState::Failed => json!({"type": "errored", "error": body}),
            LineState::Cancelled => json!({"type": "canceled"}),
            _ => json!({"type": "expired"}),
        };
        out.extend_from_slice(
            &serde_json::to_vec(&json!({"custom_id": outcome.custom_id, "result": result})).unwrap_or_default(),
        );
        out.push(b'\n');
    }
    let mut response = (StatusCode::OK, Body::from(out)).into_response();
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/x-jsonl"));
    response
}
