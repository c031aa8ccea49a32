//! OpenAI's batch API: `POST /v1/batches` from an uploaded JSONL file,
//! `GET /v1/batches[/{id}]`, `POST /v1/batches/{id}/cancel`; the output
//! and error files are `file-out_<id>` and `file-err_<id>`.

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{json, Value};
use switchyard_ir::Protocol;
use switchyard_state::Gateway;
use switchyard_store::{BatchJob, BatchState, LineState, ObjectKind};

use super::{check_lines, line_request_id, submit, window_ms, Line};
use crate::{invalid, json, new_id, not_found, owner, seconds, unavailable};

const PROTOCOL: Protocol = Protocol::OpenAi;

/// The endpoints a batch's lines may go to.
const ENDPOINTS: [&str; 3] = ["/v1/chat/completions", "/v1/responses", "/v1/embeddings"];

/// One line of an input file.
#[derive(Debug, Deserialize)]
struct InputLine {
    custom_id: String,
    method: String,
    url: String,
    body: Box<serde_json::value::RawValue>,
}

/// Reads an input file's lines: each a JSON request to one of
/// [`ENDPOINTS`], all to the same one.
fn read_lines(content: &[u8], max: usize) -> Result<(String, Vec<Line>), String> {
    let text = std::str::from_utf8(content).map_err(|_| "the file is not UTF-8 text".to_owned())?;
    let mut lines = Vec::new();
    let mut url: Option<String> = None;
    for (number, raw) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        if lines.len() == max {
            return Err(format!("the file has more than {max} requests (batches.max_lines)"));
        }
        let line: InputLine =
            serde_json::from_str(raw).map_err(|err| format!("line {}: not a batch request: {err}", number + 1))?;
        if line.method != "POST" {
            return Err(format!("line {}: method must be POST", number + 1));
        }
        if !ENDPOINTS.contains(&line.url.as_str()) {
            return Err(format!("line {}: url `{}` is not one of {ENDPOINTS:?}", number + 1, line.url));
        }
        if url.as_ref().is_some_and(|u| *u != line.url) {
            return Err(format!("line {}: every line must go to the same url", number + 1));
        }
        if !line.body.get().trim_start().starts_with('{') {
            return Err(format!("line {}: body must be a JSON object", number + 1));
        }
        url.get_or_insert(line.url);
        lines.push(Line { custom_id: line.custom_id, body: line.body.get().as_bytes().to_vec() });
    }
    check_lines(&lines, max)?;
    Ok((url.unwrap_or_default(), lines))
}

/// Checks an uploaded `purpose: batch` file.
pub(crate) fn check_jsonl(content: &[u8], max: usize) -> Result<(), String> {
    read_lines(content, max).map(|_| ())
}

/// What a batch keeps beyond the job.
#[derive(Debug, serde::Serialize, Deserialize)]
struct Meta {
    input_file_id: String,
    completion_window: String,
    #[serde(default)]
    metadata: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Create {
    input_file_id: String,
    endpoint: String,
    completion_window: String,
    #[serde(default)]
    metadata: Option<Value>,
}

/// `POST /v1/batches`.
pub async fn create(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let owner = match owner(&gateway, PROTOCOL, &parts) {
        Ok(owner) => owner,
        Err(refused) => return refused,
    };
    let Ok(bytes) = axum::body::to_bytes(body, 64 << 10).await else {
        return invalid(&gateway, PROTOCOL, "the request body is too large", None);
    };
    let create: Create = match serde_json::from_slice(&bytes) {
        Ok(create) => create,
        Err(err) => return invalid(&gateway, PROTOCOL, format!("not a batch request: {err}"), None),
    };
    let Some(window) = window_ms(&create.completion_window) else {
        return invalid(&gateway, PROTOCOL, "completion_window must be `24h`", Some("completion_window"));
    };
    if !ENDPOINTS.contains(&create.endpoint.as_str()) {
        let message = format!("endpoint `{}` is not one of {ENDPOINTS:?}", create.endpoint);
        return invalid(&gateway, PROTOCOL, message, Some("endpoint"));
    }
    let found = if crate::plausible_id(&create.input_file_id) {
        let (owner, id) = (owner.clone(), create.input_file_id.clone());
        match gateway.kept.objects.get_object(ObjectKind::File, owner, id, crate::now_ms()).await {
            Ok(found) => found,
            Err(err) => return unavailable(&gateway, PROTOCOL, &err),
        }
    } else {
        None
    };
    let Some(file) = found else {
        return not_found(&gateway, PROTOCOL, &format!("file `{}`", create.input_file_id));
    };
    let purpose = serde_json::from_str::<Value>(&file.meta).ok().and_then(|m| m["purpose"].as_str().map(str::to_owned));
    let content = file.body;
    if purpose.as_deref() != Some("batch") {
        return invalid(&gateway, PROTOCOL, "the input file's purpose must be `batch`", Some("input_file_id"));
    }
    let (url, lines) = match read_lines(&content, gateway.config.kept.batches.max_lines) {
        Ok(read) => read,
        Err(message) => return invalid(&gateway, PROTOCOL, message, Some("input_file_id")),
    };
    if url != create.endpoint {
        let message = format!("the file's requests go to `{url}`, not the batch's endpoint `{}`", create.endpoint);
        return invalid(&gateway, PROTOCOL, message, Some("endpoint"));
    }
    let created_ms = crate::now_ms();
    let meta = Meta {
        input_file_id: create.input_file_id,
        completion_window: create.completion_window,
        metadata: create.metadata,
    };
    let job = BatchJob {
        id: new_id("batch_"),
        owner,
        shape: "openai".into(),
        endpoint: create.endpoint,
        created_ms,
        expires_ms: created_ms.saturating_add(window),
        cancelled_ms: None,
        total: 0,
        meta: serde_json::to_string(&meta).unwrap_or_default(),
    };
    match submit(&gateway, PROTOCOL, job, lines).await {
        Ok(state) => json(StatusCode::OK, &batch_object(&state)),
        Err(response) => response,
    }
}

/// A batch object in OpenAI's shape.
fn batch_object(state: &BatchState) -> Value {
    let job = &state.job;
    let counts = &state.counts;
    let meta: Meta = serde_json::from_str(&job.meta).unwrap_or(Meta {
        input_file_id: String::new(),
        completion_window: "24h".into(),
        metadata: None,
    });
    let done = counts.done();
    let ended = counts.last_done_ms.map(seconds);
    let status = match (job.cancelled_ms, done) {
        (Some(_), false) => "cancelling",
        (Some(_), true) => "cancelled",
        (None, false) => "in_progress",
        (None, true) if counts.expired > 0 => "expired",
        (None, true) => "completed",
    };
    let failed = counts.failed + counts.expired + counts.cancelled;
    let random = job.id.strip_prefix("batch_").unwrap_or(&job.id);
    let output = (done && counts.succeeded > 0).then(|| format!("file-out_{random}"));
    let errors = (done && failed > 0).then(|| format!("file-err_{random}"));
    json!({
        "id": job.id,
        "object": "batch",
        "endpoint": job.endpoint,
        "errors": null,
        "input_file_id": meta.input_file_id,
        "completion_window": meta.completion_window,
        "status": status,
        "output_file_id": output,
        "error_file_id": errors,
        "created_at": seconds(job.created_ms),
        "in_progress_at": seconds(job.created_ms),
        "expires_at": seconds(job.expires_ms),
        "finalizing_at": if status == "completed" { ended } else { None },
        "completed_at": if status == "completed" { ended } else { None },
        "failed_at": null,
        "expired_at": if status == "expired" { ended } else { None },
        "cancelling_at": job.cancelled_ms.map(seconds),
        "cancelled_at": if status == "cancelled" { ended.or(job.cancelled_ms.map(seconds)) } else { None },
        "request_counts": {"total": job.total, "completed": counts.succeeded, "failed": failed},
        "metadata": meta.metadata,
    })
}

/// `GET /v1/batches/{id}`.
pub async fn get(State(gateway): State<Arc<Gateway>>, Path(id): Path<String>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let owner = match owner(&gateway, PROTOCOL, &parts) {
        Ok(owner) => owner,
        Err(refused) => return refused,
    };
    match super::find(&gateway, PROTOCOL, &owner, &id).await {
        Ok(Some(state)) if state.job.shape == "openai" => json(StatusCode::OK, &batch_object(&state)),
        Ok(_) => not_found(&gateway, PROTOCOL, &format!("batch `{id}`")),
        Err(response) => response,
    }
}

/// `POST /v1/batches/{id}/cancel`.
pub async fn cancel(State(gateway): State<Arc<Gateway>>, Path(id): Path<String>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let owner = match owner(&gateway, PROTOCOL, &parts) {
        Ok(owner) => owner,
        Err(refused) => return refused,
    };
    match super::find(&gateway, PROTOCOL, &owner, &id).await {
        Ok(Some(state)) if state.job.shape == "openai" => {}
        Ok(_) => return not_found(&gateway, PROTOCOL, &format!("batch `{id}`")),
        Err(response) => return response,
    }
    match gateway.kept.batches.cancel_batch(owner, id.clone(), crate::now_ms()).await {
        Ok(Some(state)) => json(StatusCode::OK, &batch_object(&state)),
        Ok(None) => not_found(&gateway, PROTOCOL, &format!("batch `{id}`")),
        Err(err) => unavailable(&gateway, PROTOCOL, &err),
    }
}

/// `GET /v1/batches`.
pub async fn list(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let owner = match owner(&gateway, PROTOCOL, &parts) {
        Ok(owner) => owner,
        Err(refused) => return refused,
    };
    match gateway.kept.batches.batches(owner, 1_000).await {
        Ok(states) => {
            let data: Vec<Value> = states.iter().filter(|s| s.job.shape == "openai").map(batch_object).collect();
            let first = data.first().map(|b| b["id"].clone());
            let last = data.last().map(|b| b["id"].clone());
            json(
                StatusCode::OK,
                &json!({"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": false}),
            )
        }
        Err(err) => unavailable(&gateway, PROTOCOL, &err),
    }
}

/// The batch an output (`file-out_…`) or error (`file-err_…`) file id names.
pub(crate) fn result_file(id: &str) -> Option<(String, bool)> {
    if let Some(random) = id.strip_prefix("file-out_") {
        return Some((format!("batch_{random}"), false));
    }
    id.strip_prefix("file-err_").map(|random| (format!("batch_{random}"), true))
}

/// A finished batch's output (or error) file: its lines in input order,
/// and when the batch was made. `None` for no such batch of `owner`'s.
pub(crate) async fn result_lines(
    gateway: &Gateway,
    owner: &str,
    batch: &str,
    errors: bool,
) -> Result<Option<(Vec<u8>, i64)>, Response> {
    let Some(state) = super::find(gateway, PROTOCOL, owner, batch).await? else { return Ok(None) };
    if state.job.shape != "openai" || !state.counts.done() {
        return Ok(None);
    }
    let outcomes = gateway
        .kept
        .batches
        .line_outcomes(owner.to_owned(), batch.to_owned())
        .await
        .map_err(|err| unavailable(gateway, PROTOCOL, &err))?;
    let mut out = Vec::new();
    for outcome in outcomes.iter().filter(|o| (o.state != LineState::Succeeded) == errors) {
        let id = line_request_id(batch, outcome.index);
        let body: Value = serde_json::from_slice(&outcome.body).unwrap_or(Value::Null);
        let line = match outcome.state {
            LineState::Succeeded | LineState::Failed => json!({
                "id": id,
                "custom_id": outcome.custom_id,
                "response": {"status_code": outcome.status, "request_id": id, "body": body},
                "error": null,
            }),
            LineState::Cancelled => json!({
                "id": id, "custom_id": outcome.custom_id, "response": null,
                "error": {"code": "batch_cancelled", "message": "the batch was cancelled before this request ran"},
            }),
            _ => json!({
                "id": id, "custom_id": outcome.custom_id, "response": null,
                "error": {"code": "batch_expired", "message": "the batch expired before this request ran"},
            }),
        };
        out.extend_from_slice(&serde_json::to_vec(&line).unwrap_or_default());
        out.push(b'\n');
    }
    Ok(Some((out, state.job.created_ms)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_file_is_requests_to_one_endpoint() {
        let line = |id: &str, url: &str| {
            format!(r#"{{"custom_id":"{id}","method":"POST","url":"{url}","body":{{"model":"m","messages":[]}}}}"#)
        };
        let good = format!("{}\n\n{}\n", line("a", "/v1/chat/completions"), line("b", "/v1/chat/completions"));
        let (url, lines) = read_lines(good.as_bytes(), 10).unwrap();
        assert_eq!((url.as_str(), lines.len()), ("/v1/chat/completions", 2));
        assert_eq!(lines[1].body, br#"{"model":"m","messages":[]}"#);
        let mixed = format!("{}\n{}", line("a", "/v1/chat/completions"), line("b", "/v1/embeddings"));
        assert!(read_lines(mixed.as_bytes(), 10).unwrap_err().contains("same url"));
        assert!(read_lines(line("a", "/v1/completions").as_bytes(), 10).unwrap_err().contains("not one of"));
        assert!(read_lines(b"not json", 10).unwrap_err().contains("line 1"));
        assert_eq!(result_file("file-out_Ab"), Some(("batch_Ab".into(), false)));
        assert_eq!(result_file("file-err_Ab"), Some(("batch_Ab".into(), true)));
        assert_eq!(result_file("file-Ab"), None);
    }
}
