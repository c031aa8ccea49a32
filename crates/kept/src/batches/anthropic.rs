//! Anthropic's Message Batches: `POST /v1/messages/batches` with requests
//! inline (read request by request as the body arrives, never whole),
//! `GET …[/{id}]`, `POST …/{id}/cancel`, `GET …/{id}/results` (JSONL once
//! the batch has ended) and `DELETE …/{id}` (an ended batch).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};
use switchyard_ir::{ErrorInfo, ErrorKind, Protocol};
use switchyard_state::Gateway;
use switchyard_store::{BatchJob, BatchState, LineState};

use super::{Checked, Staged};
use crate::door::{in_time, Door};
use crate::{invalid, json, new_id, not_found, owner, unavailable};

const PROTOCOL: Protocol = Protocol::Anthropic;

/// Anthropic's window: a batch's unfinished requests expire after a day.
const WINDOW_MS: i64 = 24 * 3_600_000;

/// The largest create body read (Anthropic's own limit is 256 MB); it is
/// read request by request, never held whole.
const MAX_CREATE: usize = 256 * 1000 * 1000;

#[derive(Debug, Deserialize)]
struct BatchRequest {
    custom_id: String,
    params: Box<serde_json::value::RawValue>,
}

/// Where [`Requests`] is in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// Before `[`: `{"requests":` so far.
    Head,
    /// Inside the array, wanting a request or `]`.
    First,
    /// After a `,`: wanting a request.
    Next,
    /// After a request: wanting `,` or `]`.
    After,
    /// Inside a request.
    Request,
    /// After `]`: wanting `}`.
    Tail,
    /// After `}`: only whitespace.
    Done,
}

/// A create body, `{"requests": [{...}, ...]}`, split into its requests as
/// its bytes arrive: each handed over whole, at most `max` bytes (a request
/// is bounded as a request body is), and only the one being read is held.
/// Nothing else is taken: a body of another shape is refused as it comes.
struct Requests {
    at: At,
    head: Vec<u8>,
    request: Vec<u8>,
    depth: u32,
    in_string: bool,
    escaped: bool,
    max: usize,
    count: usize,
}

/// Nesting deeper than this is refused.
const MAX_DEPTH: u32 = 512;

/// What the body must look like.
const SHAPE: &str = "the body must be {\"requests\": [{\"custom_id\": ..., \"params\": {...}}, ...]}";

impl Requests {
    fn new(max: usize) -> Requests {
        Requests {
            at: At::Head,
            head: Vec::new(),
            request: Vec::new(),
            depth: 0,
            in_string: false,
            escaped: false,
            max,
            count: 0,
        }
    }

    /// Appends each request `chunk` completes to `out`.
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<Vec<u8>>) -> Result<(), String> {
        for &byte in chunk {
            let blank = matches!(byte, b' ' | b'\t' | b'\r' | b'\n');
            match self.at {
                At::Head if byte == b'[' => {
                    let head: Vec<u8> = self.head.iter().copied().filter(|b| !b.is_ascii_whitespace()).collect();
                    if head != b"{\"requests\":" {
                        return Err(SHAPE.into());
                    }
                    self.at = At::First;
                }
                At::Head if self.head.len() < 64 => self.head.push(byte),
                At::Head => return Err(SHAPE.into()),
                At::First | At::Next | At::After | At::Tail | At::Done if blank => {}
                At::First | At::Next if byte == b'{' => {
                    self.at = At::Request;
                    self.depth = 1;
                    self.request.clear();
                    self.request.push(byte);
                }
                At::First | At::After if byte == b']' => self.at = At::Tail,
                At::After if byte == b',' => self.at = At::Next,
                At::Tail if byte == b'}' => self.at = At::Done,
                At::Request => {
                    if self.request.len() >= self.max {
                        return Err(format!(
                            "requests.{} is longer than {} bytes (server.body_limit, the largest request)",
                            self.count, self.max
                        ));
                    }
                    self.request.push(byte);
                    if self.in_string {
                        if self.escaped {
                            self.escaped = false;
                        } else if byte == b'\\' {
                            self.escaped = true;
                        } else if byte == b'"' {
                            self.in_string = false;
                        }
                        continue;
                    }
                    match byte {
                        b'"' => self.in_string = true,
                        b'{' | b'[' => {
                            self.depth += 1;
                            if self.depth > MAX_DEPTH {
                                return Err(format!("requests.{} nests too deep", self.count));
                            }
                        }
                        b'}' | b']' => {
                            self.depth -= 1;
                            if self.depth == 0 {
                                out.push(std::mem::take(&mut self.request));
                                self.count += 1;
                                self.at = At::After;
                            }
                        }
                        _ => {}
                    }
                }
                _ => return Err(SHAPE.into()),
            }
        }
        Ok(())
    }

    /// The body ended: was it whole?
    fn finish(&self) -> Result<(), String> {
        match self.at {
            At::Done => Ok(()),
            _ => Err(format!("the body ended before it was whole: {SHAPE}")),
        }
    }
}

/// Why a create was refused part-way.
enum Refused {
    /// The caller's fault, in its words.
    Invalid(String),
    /// The answer as it stands (the store failed, the quota is passed).
    Answer(Response),
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

/// `POST /v1/messages/batches`: the body read request by request as it
/// arrives, each checked and staged in parts.
pub async fn create(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let mut door = match Door::enter(&gateway, PROTOCOL, &parts).await {
        Ok(door) => door,
        Err(refused) => return refused,
    };
    let created_ms = crate::now_ms();
    let job = BatchJob {
        id: new_id("msgbatch_"),
        owner: door.owner.clone(),
        shape: "anthropic".into(),
        endpoint: "/v1/messages".into(),
        created_ms,
        expires_ms: created_ms.saturating_add(WINDOW_MS),
        cancelled_ms: None,
        total: 0,
        meta: "{}".into(),
    };
    let mut staged = match Staged::begin(&gateway, PROTOCOL, job).await {
        Ok(staged) => staged,
        Err(response) => return response,
    };
    match in_time(&gateway, receive(&gateway, &mut door, &mut staged, body)).await {
        Ok(Ok(())) => {}
        Ok(Err(Refused::Invalid(message))) => return invalid(&gateway, PROTOCOL, message, Some("requests")),
        Ok(Err(Refused::Answer(response))) => return response,
        Err(info) => return crate::error(&gateway, PROTOCOL, &info),
    }
    match staged.open().await {
        Ok(state) => json(StatusCode::OK, &batch_object(&state, &results_url(&parts, &state.job.id))),
        Err(response) => response,
    }
}

/// Reads a create body into `staged`, request by request.
async fn receive(gateway: &Gateway, door: &mut Door, staged: &mut Staged, body: Body) -> Result<(), Refused> {
    use http_body_util::BodyExt;
    let max = crate::batches::openai::max_line(gateway);
    let mut requests = Requests::new(max);
    let mut checked = Checked::new(gateway.config.kept.batches.max_lines);
    let mut read = 0usize;
    let mut whole = Vec::new();
    let mut body = body;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|err| Refused::Invalid(format!("the body could not be read: {err}")))?;
        let Ok(data) = frame.into_data() else { continue };
        read += data.len();
        if read > MAX_CREATE {
            let info = ErrorInfo::new(ErrorKind::RequestTooLarge, "the batch is larger than 256 MB");
            return Err(Refused::Answer(crate::error(gateway, PROTOCOL, &info)));
        }
        requests.feed(&data, &mut whole).map_err(Refused::Invalid)?;
        for raw in whole.drain(..) {
            let index = checked.count();
            let request: BatchRequest = serde_json::from_slice(&raw)
                .map_err(|err| Refused::Invalid(format!("requests.{index}: not a batch request: {err}")))?;
            let valid = !request.custom_id.is_empty()
                && request.custom_id.len() <= 64
                && request.custom_id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !valid {
                return Err(Refused::Invalid(format!(
                    "requests.{index}.custom_id must be 1 to 64 letters, digits, `_` or `-`"
                )));
            }
            if !request.params.get().trim_start().starts_with('{') {
                return Err(Refused::Invalid(format!("requests.{index}.params must be an object")));
            }
            let params = request.params.get().as_bytes();
            checked.check(&request.custom_id, params).map_err(Refused::Invalid)?;
            staged.push(door, request.custom_id, params.to_vec()).await.map_err(Refused::Answer)?;
        }
    }
    requests.finish().map_err(Refused::Invalid)?;
    checked.finish().map_err(Refused::Invalid)?;
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The requests of `body` fed in chunks of `cut` bytes.
    fn split(body: &[u8], cut: usize, max: usize) -> Result<Vec<Vec<u8>>, String> {
        let mut requests = Requests::new(max);
        let mut out = Vec::new();
        for chunk in body.chunks(cut.max(1)) {
            requests.feed(chunk, &mut out)?;
        }
        requests.finish()?;
        Ok(out)
    }

    #[test]
    fn a_create_body_splits_into_its_requests_however_it_is_cut() {
        let body = br#" { "requests" : [ {"custom_id":"a","params":{"t":"}]\"{"}} ,
            {"custom_id":"b","params":{"n":[1,{"m":2}]}} ] }
        "#;
        for cut in [1, 2, 3, 10, body.len()] {
            let out = split(body, cut, 1 << 20).unwrap();
            assert_eq!(out.len(), 2, "cut {cut}");
            assert_eq!(out[0], br#"{"custom_id":"a","params":{"t":"}]\"{"}}"#.to_vec());
            assert!(out[1].ends_with(br#"{"m":2}]}}"#));
        }
        assert_eq!(split(br#"{"requests":[]}"#, 4, 100).unwrap().len(), 0);
    }

    #[test]
    fn a_body_of_another_shape_is_refused_as_it_comes() {
        for bad in [
            &br#"{"other":[{}]}"#[..],
            br#"[{}]"#,
            br#"{"requests":[{},]}"#,
            br#"{"requests":[,{}]}"#,
            br#"{"requests":[{}{}]}"#,
            br#"{"requests":[1]}"#,
            br#"{"requests":[{}]} x"#,
            br#"{"requests":[{}]"#,
            br#"{"requests":[{"a":1"#,
        ] {
            assert!(split(bad, 3, 1 << 20).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        let long = format!(r#"{{"requests":[{{"custom_id":"a","params":{{"t":"{}"}}}}]}}"#, "x".repeat(100));
        let err = split(long.as_bytes(), 7, 64).unwrap_err();
        assert!(err.contains("requests.0 is longer than 64 bytes"), "{err}");
        // A head that never reaches its array is refused once past any real one.
        assert!(split(&[b' '; 100], 1, 1 << 20).is_err());
    }
}
