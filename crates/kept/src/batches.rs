//! Batch jobs in two shapes, one queue: OpenAI's (`/v1/batches`, lines
//! from an uploaded JSONL file, results as output and error files) and
//! Anthropic's (`/v1/messages/batches`, requests inline, results as JSONL
//! of `succeeded`/`errored`/`canceled`/`expired`). Either is read line by
//! line as it arrives, checked ([`Checked`]) and staged in parts
//! ([`Staged`]): never held whole. Each line runs through the pools as the
//! submitting key (see [`crate::worker`]); the job's state is read from its
//! lines, so every instance tells the same story.

pub mod anthropic;
pub mod openai;

use std::sync::Arc;

use axum::response::Response;
use switchyard_ir::Protocol;
use switchyard_state::Gateway;
use switchyard_store::{BatchJob, BatchState, QueuedLine};

use crate::door::Door;
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

/// Lines staged in one write at most (a part), and their bytes.
const PART_LINES: usize = 1_000;
const PART_BYTES: usize = 4 << 20;

/// What every shape asks of its lines, checked as they arrive (never all
/// held at once): ids unique and bounded, bodies that do not stream, at
/// most `max` lines. Ids are remembered as 128-bit keyed hashes, so the
/// memory this holds is 16 bytes a line, whatever the ids' length.
pub(crate) struct Checked {
    max: usize,
    count: usize,
    seen: std::collections::HashSet<u128>,
    keys: (std::hash::RandomState, std::hash::RandomState),
}

impl Checked {
    /// Lines to come, at most `max`.
    pub(crate) fn new(max: usize) -> Checked {
        let keys = (std::hash::RandomState::new(), std::hash::RandomState::new());
        Checked { max, count: 0, seen: std::collections::HashSet::new(), keys }
    }

    /// Checks the next line; how many came before it.
    pub(crate) fn check(&mut self, custom_id: &str, body: &[u8]) -> Result<usize, String> {
        use std::hash::BuildHasher;
        let index = self.count;
        if index == self.max {
            return Err(format!("the batch has more than {} requests (batches.max_lines)", self.max));
        }
        if custom_id.is_empty() || custom_id.len() > MAX_CUSTOM_ID {
            return Err(format!("request {index}: custom_id must be 1 to {MAX_CUSTOM_ID} bytes"));
        }
        if switchyard_codec::scan::top_level_value(body, "stream").ok().flatten() == Some(b"true".as_slice()) {
            return Err(format!("request {index} (`{custom_id}`): a batch line cannot stream"));
        }
        let hash = (u128::from(self.keys.0.hash_one(custom_id)) << 64) | u128::from(self.keys.1.hash_one(custom_id));
        if !self.seen.insert(hash) {
            return Err(format!("request {index}: custom_id `{custom_id}` is used twice"));
        }
        self.count += 1;
        Ok(index)
    }

    /// How many lines passed so far.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The lines are all in: there was at least one.
    pub(crate) fn finish(&self) -> Result<usize, String> {
        match self.count {
            0 => Err("the batch has no requests".into()),
            n => Ok(n),
        }
    }
}

/// A job staged in the store, its lines added in parts as they are read
/// (a batch is never held whole), opened to the workers once the last is
/// in. Dropped unopened (refused, cut short), it is discarded.
pub(crate) struct Staged {
    gateway: Arc<Gateway>,
    protocol: Protocol,
    job: BatchJob,
    part: Vec<QueuedLine>,
    part_bytes: usize,
    total: u32,
    opened: bool,
}

impl Staged {
    /// Stages `job`, or the caller's 503.
    pub(crate) async fn begin(gateway: &Arc<Gateway>, protocol: Protocol, job: BatchJob) -> Result<Staged, Response> {
        if let Err(err) = gateway.kept.batches.stage_batch(job.clone()).await {
            return Err(unavailable(gateway, protocol, &err));
        }
        let part = Vec::with_capacity(PART_LINES);
        Ok(Staged { gateway: gateway.clone(), protocol, job, part, part_bytes: 0, total: 0, opened: false })
    }

    /// Adds the next line (its bytes taken from the key's quota at `door`).
    pub(crate) async fn push(&mut self, door: &mut Door, custom_id: String, body: Vec<u8>) -> Result<(), Response> {
        if let Err(info) = door.take(body.len() as u64) {
            return Err(crate::error(&self.gateway, self.protocol, &info));
        }
        self.part_bytes += body.len();
        self.part.push(QueuedLine { index: self.total, custom_id, body });
        self.total += 1;
        if self.part.len() >= PART_LINES || self.part_bytes >= PART_BYTES {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), Response> {
        if self.part.is_empty() {
            return Ok(());
        }
        let part = std::mem::replace(&mut self.part, Vec::with_capacity(PART_LINES));
        self.part_bytes = 0;
        match self.gateway.kept.batches.stage_lines(self.job.id.clone(), part).await {
            Ok(()) => Ok(()),
            Err(err) => Err(unavailable(&self.gateway, self.protocol, &err)),
        }
    }

    /// Opens the job to its owner and the workers, and wakes this
    /// instance's worker: the job as it now is.
    pub(crate) async fn open(mut self) -> Result<BatchState, Response> {
        self.flush().await?;
        match self.gateway.kept.batches.open_batch(self.job.id.clone(), self.total).await {
            Ok(true) => {}
            Ok(false) => {
                let err = switchyard_store::StoreError::NotFound;
                return Err(unavailable(&self.gateway, self.protocol, &err));
            }
            Err(err) => return Err(unavailable(&self.gateway, self.protocol, &err)),
        }
        self.opened = true;
        self.gateway.kept.wake.notify_one();
        let counts = switchyard_store::LineCounts { pending: self.total, ..Default::default() };
        Ok(BatchState { job: BatchJob { total: self.total, ..self.job.clone() }, counts })
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if self.opened {
            return;
        }
        let (batches, owner, id) = (self.gateway.kept.batches.clone(), self.job.owner.clone(), self.job.id.clone());
        switchyard_tasks::work(async move {
            if let Err(err) = batches.delete_batch(owner, id).await {
                tracing::warn!(error = %err, "a batch refused part-way could not be discarded; the purge will");
            }
        });
    }
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
        let mut checked = Checked::new(2);
        assert_eq!(checked.check("a", b"{}"), Ok(0));
        assert!(checked.check("a", b"{}").unwrap_err().contains("twice"));
        assert!(checked.check("b", b"{\"stream\": true}").unwrap_err().contains("stream"));
        assert_eq!(checked.check("b", b"{\"stream\":false}"), Ok(1));
        assert!(checked.check("c", b"{}").unwrap_err().contains("max_lines"));
        assert!(checked.check("", b"{}").is_err());
        assert_eq!(checked.finish(), Ok(2));
        assert!(Checked::new(1).finish().is_err());
        assert!(Checked::new(5).check(&"x".repeat(MAX_CUSTOM_ID + 1), b"{}").is_err());
        assert_eq!(window_ms("24h"), Some(86_400_000));
        assert_eq!(window_ms("0h"), None);
        assert_eq!(window_ms("1d"), None);
    }
}
