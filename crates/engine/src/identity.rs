//! What every answer carries that a protocol may lack: an id, a model and
//! a creation time stand in where the lane's protocol has none (Bedrock,
//! Cohere), and the line that says a request is done.

use http::HeaderValue;
use switchyard_ir::Usage;
use tokio::time::Instant;

/// Some protocols (Bedrock, Cohere) have no reply id, model or creation
/// time, and their callers' SDKs need them: the request id, the lane's wire
/// model and the current time stand in.
pub(crate) fn fill_identity(
    id: &mut String,
    model: &mut String,
    created: &mut Option<i64>,
    request_id: &HeaderValue,
    wire_model: &str,
    now_ms: u64,
) {
    if model.is_empty() {
        wire_model.clone_into(model);
    }
    if id.is_empty() {
        *id = format!("sy-{}", request_id.to_str().unwrap_or("reply"));
    }
    if created.is_none() {
        *created = i64::try_from(now_ms / 1000).ok();
    }
}

/// The per-request access line. Debug level: formatting a log line per
/// request was an eighth of the gateway's CPU on small replies; enable it
/// with `SWITCHYARD_LOG=info,switchyard_engine=debug`.
pub(crate) fn log_done(request_id: &HeaderValue, lane: &str, usage: &Usage, started: Instant, stream: bool) {
    tracing::debug!(
        request_id = ?request_id,
        lane,
        stream,
        input_tokens = usage.input_tokens,
        output_tokens = usage.output_tokens,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "request done"
    );
}
