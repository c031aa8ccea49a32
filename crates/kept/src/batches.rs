//! Batch jobs in two shapes, one queue: OpenAI's (`/v1/batches`, lines
//! from an uploaded JSONL file, results as output and error files) and
//! Anthropic's (`/v1/messages/batches`, requests inline, results as JSONL
//! of `succeeded`/`errored`/`canceled`/`expired`). Each line runs through
//! the pools as the submitting key (see [`crate::worker`]); the job's
//! state is read from its lines, so every instance tells the same story.

pub mod anthropic;
pub mod openai;

use std::sync::Arc;

use axum::response::Response;
use switchyard_ir::Protocol;
use switchyard_state::Gateway;
use switchyard_store::{BatchJob, BatchState, QueuedLine};

use crate::unavailable;

/// The longest `custom_id` taken.
const MAX_CUSTOM_ID: usize = 512;

/// The request id a line runs under, and its row in the results: the job's
/// random part and the line's place.
pub(crate) fn line_request_id(batch: &str, index: u32) -> String {
    let random = batch.rsplit('_').next().unwrap_or(batch);
    format!("batch_req_{random}_{index}")
}

/// The ledger entry a line is billed under: drawn from the job id and the
/// line's place, below zero (the gateway's own entries are above), so a
/// line run twice is one row.
pub(crate) fn line_entry(batch: &str, index: u32) -> i64 {
    // FNV-1a over the id and the place: stable across processes and builds.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in batch.bytes().chain(index.to_le_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    -((hash >> 1) as i64) - 1
}

/// A line as read from the caller.
#[derive(Debug)]
pub(crate) struct Line {
    pub custom_id: String,
    pub body: Vec<u8>,
}

/// Checks what every shape asks of its lines: ids unique and bounded, each
/// body an object that does not stream, at most `max` lines.
pub(crate) fn check_lines(lines: &[Line], max: usize) -> Result<(), String> {
    if lines.is_empty() {
        return Err("the batch has no requests".into());
    }
    if lines.len() > max {
        return Err(format!(
            "the batch has {} requests; this gateway takes at most {max} (batches.max_lines)",
            lines.len()
        ));
    }
    let mut seen = std::collections::HashSet::with_capacity(lines.len());
    for (index, line) in lines.iter().enumerate() {
        if line.custom_id.is_empty() || line.custom_id.len() > MAX_CUSTOM_ID {
            return Err(format!("request {index}: custom_id must be 1 to {MAX_CUSTOM_ID} bytes"));
        }
        if !seen.insert(line.custom_id.as_str()) {
            return Err(format!("request {index}: custom_id `{}` is used twice", line.custom_id));
        }
        if switchyard_codec::scan::top_level_value(&line.body, "stream").ok().flatten() == Some(b"true".as_slice()) {
            return Err(format!("request {index} (`{}`): a batch line cannot stream", line.custom_id));
        }
    }
    Ok(())
}

/// Queues a job and its lines, and wakes this instance's worker.
pub(crate) async fn submit(
    gateway: &Arc<Gateway>,
    protocol: Protocol,
    job: BatchJob,
    lines: Vec<Line>,
) -> Result<BatchState, Response> {
    let queued = lines
        .into_iter()
        .enumerate()
        .map(|(index, line)| QueuedLine {
            index: u32::try_from(index).unwrap_or(u32::MAX),
            custom_id: line.custom_id,
            body: line.body,
        })
        .collect::<Vec<_>>();
    let total = u32::try_from(queued.len()).unwrap_or(u32::MAX);
    let job = BatchJob { total, ..job };
    if let Err(err) = gateway.kept.batches.submit_batch(job.clone(), queued).await {
        return Err(unavailable(gateway, protocol, &err));
    }
    gateway.kept.wake.notify_one();
    let counts = switchyard_store::LineCounts { pending: total, ..Default::default() };
    Ok(BatchState { job, counts })
}

/// A job of `owner`'s, or its 404 (`None` for an id this crate never made).
pub(crate) async fn find(
    gateway: &Gateway,
    protocol: Protocol,
    owner: &str,
    id: &str,
) -> Result<Option<BatchState>, Response> {
    if !crate::plausible_id(id) {
        return Ok(None);
    }
    gateway
        .kept
        .batches
        .batch(owner.to_owned(), id.to_owned())
        .await
        .map_err(|err| unavailable(gateway, protocol, &err))
}

/// Milliseconds in `window` (`24h`: OpenAI's only window; any whole
/// number of hours up to a week is taken).
pub(crate) fn window_ms(window: &str) -> Option<i64> {
    let hours: i64 = window.strip_suffix('h')?.parse().ok()?;
    (1..=168).contains(&hours).then_some(hours * 3_600_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lines_entry_is_stable_distinct_and_below_the_gateways_own() {
        let a = line_entry("batch_abc", 0);
        assert_eq!(a, line_entry("batch_abc", 0));
        assert_ne!(a, line_entry("batch_abc", 1));
        assert_ne!(a, line_entry("batch_abd", 0));
        assert!((0..10_000).all(|i| line_entry("batch_x", i) < 0));
        assert_eq!(line_request_id("batch_Ab3", 7), "batch_req_Ab3_7");
    }

    #[test]
    fn lines_are_unique_bounded_and_never_stream() {
        let line = |id: &str, body: &str| Line { custom_id: id.into(), body: body.as_bytes().to_vec() };
        assert!(check_lines(&[line("a", "{}"), line("b", "{\"stream\":false}")], 2).is_ok());
        assert!(check_lines(&[line("a", "{}"), line("a", "{}")], 5).unwrap_err().contains("twice"));
        assert!(check_lines(&[line("a", "{\"stream\": true}")], 5).unwrap_err().contains("stream"));
        assert!(check_lines(&[line("a", "{}"), line("b", "{}")], 1).unwrap_err().contains("max_lines"));
        assert!(check_lines(&[], 1).is_err());
        assert_eq!(window_ms("24h"), Some(86_400_000));
        assert_eq!(window_ms("0h"), None);
        assert_eq!(window_ms("1d"), None);
    }
}
