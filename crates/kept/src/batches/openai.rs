//! OpenAI's batch API: `POST /v1/batches` from an uploaded JSONL file
//! (read from the store chunk by chunk, line by line, never whole),
//! `GET /v1/batches[/{id}]`, `POST /v1/batches/{id}/cancel`; the output
//! and error files are `file-out_<id>` and `file-err_<id>`.

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{json, Value};
use switchyard_ir::{ErrorInfo, ErrorKind, Protocol};
use switchyard_state::Gateway;
use switchyard_store::{BatchJob, BatchState, LineState, ObjectKind};

use super::{line_request_id, window_ms, Checked, Staged};
use crate::door::{in_time, Door};
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

/// An input file's lines as its bytes arrive, each handed over whole: a
/// line is at most `max_line` bytes (a line is a request, bounded as a
/// request body is), and only the line being read is held.
pub(crate) struct Lines {
    partial: Vec<u8>,
    max_line: usize,
    number: usize,
}

impl Lines {
    /// Lines of at most `max_line` bytes.
    pub(crate) fn new(max_line: usize) -> Lines {
        Lines { partial: Vec::new(), max_line, number: 0 }
    }

    /// Hands `each` every line `chunk` completes (numbered from 1; blank
    /// lines skipped).
    pub(crate) fn feed(
        &mut self,
        chunk: &[u8],
        each: &mut impl FnMut(usize, &[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut rest = chunk;
        while let Some(at) = memchr::memchr(b'\n', rest) {
            let (line, after) = (&rest[..at], &rest[at + 1..]);
            if self.partial.is_empty() {
                self.number += 1;
                self.one(line, each)?;
            } else {
                self.grow(line)?;
                self.number += 1;
                let whole = std::mem::take(&mut self.partial);
                self.one(&whole, each)?;
                // Its room is kept for the next line that spans chunks.
                self.partial = whole;
                self.partial.clear();
            }
            rest = after;
        }
        self.grow(rest)
    }

    /// The file ended: its last line, if it had no line break.
    pub(crate) fn finish(&mut self, each: &mut impl FnMut(usize, &[u8]) -> Result<(), String>) -> Result<(), String> {
        if self.partial.is_empty() {
            return Ok(());
        }
        self.number += 1;
        let whole = std::mem::take(&mut self.partial);
        self.one(&whole, each)
    }

    fn grow(&mut self, bytes: &[u8]) -> Result<(), String> {
        if self.partial.len() + bytes.len() > self.max_line {
            return Err(format!(
                "line {}: longer than {} bytes (server.body_limit, the largest request)",
                self.number + 1,
                self.max_line
            ));
        }
        self.partial.extend_from_slice(bytes);
        Ok(())
    }

    fn one(&self, line: &[u8], each: &mut impl FnMut(usize, &[u8]) -> Result<(), String>) -> Result<(), String> {
        if line.len() > self.max_line {
            return Err(format!(
                "line {}: longer than {} bytes (server.body_limit, the largest request)",
                self.number, self.max_line
            ));
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        each(self.number, line)
    }
}

/// An input file's requests, checked line by line: each a JSON request to
/// one of [`ENDPOINTS`], all to the same one, ids and bodies as
/// [`Checked`] asks.
pub(crate) struct Input {
    url: Option<String>,
    checked: Checked,
}

impl Input {
    /// Requests to come, at most `max`.
    pub(crate) fn new(max: usize) -> Input {
        Input { url: None, checked: Checked::new(max) }
    }

    /// Line `number`: its custom id and body.
    fn line(&mut self, number: usize, raw: &[u8]) -> Result<(String, Vec<u8>), String> {
        let line: InputLine =
            serde_json::from_slice(raw).map_err(|err| format!("line {number}: not a batch request: {err}"))?;
        if line.method != "POST" {
            return Err(format!("line {number}: method must be POST"));
        }
        if !ENDPOINTS.contains(&line.url.as_str()) {
            return Err(format!("line {number}: url `{}` is not one of {ENDPOINTS:?}", line.url));
        }
        if self.url.as_ref().is_some_and(|u| *u != line.url) {
            return Err(format!("line {number}: every line must go to the same url"));
        }
        if !line.body.get().trim_start().starts_with('{') {
            return Err(format!("line {number}: body must be a JSON object"));
        }
        self.checked
            .check(&line.custom_id, line.body.get().as_bytes())
            .map_err(|err| format!("line {number}: {err}"))?;
        self.url.get_or_insert(line.url);
        Ok((line.custom_id, line.body.get().as_bytes().to_vec()))
    }

    /// The url every line goes to, once the file has ended.
    fn finish(&self) -> Result<String, String> {
        self.checked.finish()?;
        Ok(self.url.clone().unwrap_or_default())
    }
}

/// An uploaded `purpose: batch` file checked as it streams to the store:
/// the first fault is kept, and the rest of the file only counted.
pub(crate) struct FileCheck {
    lines: Lines,
    input: Input,
    fault: Option<String>,
}

impl FileCheck {
    /// A check of a file of at most `max` requests of at most `max_line`
    /// bytes each.
    pub(crate) fn new(max: usize, max_line: usize) -> FileCheck {
        FileCheck { lines: Lines::new(max_line), input: Input::new(max), fault: None }
    }

    /// The file's next bytes.
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        if self.fault.is_none() {
            let input = &mut self.input;
            if let Err(fault) = self.lines.feed(chunk, &mut |n, raw| input.line(n, raw).map(|_| ())) {
                self.fault = Some(fault);
            }
        }
    }

    /// The file ended: whether it is a batch's input.
    pub(crate) fn finish(mut self) -> Result<(), String> {
        if let Some(fault) = self.fault {
            return Err(fault);
        }
        let input = &mut self.input;
        self.lines.finish(&mut |n, raw| input.line(n, raw).map(|_| ()))?;
        self.input.finish().map(|_| ())
    }
}

/// The longest input line: a request body under `server.body_limit`, and
/// its line's own fields.
pub(crate) fn max_line(gateway: &Gateway) -> usize {
    gateway.config.server.body_limit.saturating_add(64 << 10)
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

/// `POST /v1/batches`: the input file read chunk by chunk from the store,
/// line by line, and staged in parts.
pub async fn create(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let mut door = match Door::enter(&gateway, PROTOCOL, &parts).await {
        Ok(door) => door,
        Err(refused) => return refused,
    };
    let read = async {
        axum::body::to_bytes(body, 64 << 10)
            .await
            .map_err(|_| ErrorInfo::new(ErrorKind::RequestTooLarge, "the request body is larger than 64 KiB"))
    };
    let bytes = match in_time(&gateway, read).await.and_then(|read| read) {
        Ok(bytes) => bytes,
        Err(info) => return crate::error(&gateway, PROTOCOL, &info),
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
    let owner = door.owner.clone();
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
    if purpose.as_deref() != Some("batch") {
        return invalid(&gateway, PROTOCOL, "the input file's purpose must be `batch`", Some("input_file_id"));
    }
    let created_ms = crate::now_ms();
    let meta = Meta {
        input_file_id: create.input_file_id.clone(),
        completion_window: create.completion_window,
        metadata: create.metadata,
    };
    let job = BatchJob {
        id: new_id("batch_"),
        owner,
        shape: "openai".into(),
        endpoint: create.endpoint.clone(),
        created_ms,
        expires_ms: created_ms.saturating_add(window),
        cancelled_ms: None,
        total: 0,
        meta: serde_json::to_string(&meta).unwrap_or_default(),
    };
    let mut staged = match Staged::begin(&gateway, PROTOCOL, job).await {
        Ok(staged) => staged,
        Err(response) => return response,
    };
    let refused = |message: String| invalid(&gateway, PROTOCOL, message, Some("input_file_id"));
    let mut lines = Lines::new(max_line(&gateway));
    let mut input = Input::new(gateway.config.kept.batches.max_lines);
    let mut read = Vec::new();
    // A file kept whole (before files were kept in chunks) is one chunk.
    let chunks = file.chunks.max(1);
    let mut whole = Some(file.body);
    for seq in 0..chunks {
        let chunk = match file.chunks {
            0 => whole.take().unwrap_or_default(),
            _ => {
                let (owner, id) = (door.owner.clone(), create.input_file_id.clone());
                match gateway.kept.objects.get_chunk(ObjectKind::File, owner, id, seq).await {
                    Ok(Some(chunk)) => chunk,
                    Ok(None) => return not_found(&gateway, PROTOCOL, &format!("file `{}`", create.input_file_id)),
                    Err(err) => return unavailable(&gateway, PROTOCOL, &err),
                }
            }
        };
        let endpoint = create.endpoint.as_str();
        let mut each = |n: usize, raw: &[u8]| {
            let (custom_id, body) = input.line(n, raw)?;
            if input.url.as_deref() != Some(endpoint) {
                let url = input.url.as_deref().unwrap_or_default();
                return Err(format!("the file's requests go to `{url}`, not the batch's endpoint `{endpoint}`"));
            }
            read.push((custom_id, body));
            Ok(())
        };
        let fed = lines.feed(&chunk, &mut each);
        let fed = if seq + 1 == chunks { fed.and_then(|()| lines.finish(&mut each)) } else { fed };
        if let Err(message) = fed {
            return refused(message);
        }
        for (custom_id, body) in read.drain(..) {
            if let Err(response) = staged.push(&mut door, custom_id, body).await {
                return response;
            }
        }
    }
    if let Err(message) = input.finish() {
        return refused(message);
    }
    match staged.open().await {
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

    /// A whole file's check, fed in chunks of `cut` bytes.
    fn check(file: &str, cut: usize, max: usize, max_line: usize) -> Result<(), String> {
        let mut check = FileCheck::new(max, max_line);
        for chunk in file.as_bytes().chunks(cut.max(1)) {
            check.feed(chunk);
        }
        check.finish()
    }

    #[test]
    fn an_input_file_is_requests_to_one_endpoint_however_it_is_cut() {
        let line = |id: &str, url: &str| {
            format!(r#"{{"custom_id":"{id}","method":"POST","url":"{url}","body":{{"model":"m","messages":[]}}}}"#)
        };
        let good = format!("{}\n\n{}\r\n", line("a", "/v1/chat/completions"), line("b", "/v1/chat/completions"));
        for cut in [1, 2, 7, 64, 4096] {
            assert_eq!(check(&good, cut, 10, 1 << 20), Ok(()), "cut {cut}");
            let no_last_break = good.trim_end();
            assert_eq!(check(no_last_break, cut, 10, 1 << 20), Ok(()), "cut {cut}");
        }
        let mixed = format!("{}\n{}", line("a", "/v1/chat/completions"), line("b", "/v1/embeddings"));
        assert!(check(&mixed, 5, 10, 1 << 20).unwrap_err().contains("same url"));
        assert!(check(&line("a", "/v1/completions"), 3, 10, 1 << 20).unwrap_err().contains("not one of"));
        assert!(check("not json", 3, 10, 1 << 20).unwrap_err().contains("line 1"));
        assert!(check(&format!("{}\n{}", line("a", "/v1/embeddings"), line("a", "/v1/embeddings")), 9, 10, 1 << 20)
            .unwrap_err()
            .contains("line 2: request 1: custom_id `a` is used twice"));
        assert!(check(&good, 9, 1, 1 << 20).unwrap_err().contains("max_lines"));
        assert!(check("\n\n", 1, 10, 1 << 20).unwrap_err().contains("no requests"));
        // A line past the longest request is refused as it grows, however cut.
        let long = line("a", "/v1/chat/completions");
        for cut in [1, 10, long.len()] {
            assert!(check(&long, cut, 10, long.len() - 1).unwrap_err().contains("longer than"), "cut {cut}");
        }
        assert_eq!(result_file("file-out_Ab"), Some(("batch_Ab".into(), false)));
        assert_eq!(result_file("file-err_Ab"), Some(("batch_Ab".into(), true)));
        assert_eq!(result_file("file-Ab"), None);
    }

    #[test]
    fn lines_hold_only_the_line_being_read() {
        let mut lines = Lines::new(100);
        let mut seen = Vec::new();
        let mut each = |n: usize, raw: &[u8]| {
            seen.push((n, raw.to_vec()));
            Ok(())
        };
        lines.feed(b"ab", &mut each).unwrap();
        lines.feed(b"c\nde\n\nf", &mut each).unwrap();
        assert!(lines.partial.capacity() <= 100);
        lines.finish(&mut each).unwrap();
        assert_eq!(seen, vec![(1, b"abc".to_vec()), (2, b"de".to_vec()), (4, b"f".to_vec())]);
    }
}
