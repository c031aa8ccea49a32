//! What the gateway keeps for its callers beyond the ledger: objects (an
//! uploaded file, a stored response), each owned by the key that made it
//! and found only by that key, and batch jobs with their lines, a durable
//! queue several instances drain together (a line is claimed with a lease
//! the claimer renews; one whose claimer died is claimed again once its
//! lease ends; owners take turns, so one tenant's long batch never stalls
//! another's).
//!
//! A file's content is kept in chunks written as the upload arrives (the
//! object is put, and found, only once every chunk is in), so no upload is
//! ever held whole; a batch may be staged in parts the same way, and is
//! claimed only once opened. What an owner keeps is counted
//! ([`ObjectStore::object_bytes`], [`BatchQueue::batch_bytes`]) against
//! its quota.

use serde::{Deserialize, Serialize};

use crate::StoreFuture;

/// What kind of object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    /// An uploaded file (`/v1/files`).
    File,
    /// A stored response (`/v1/responses` with `store`).
    Response,
    /// An MCP tool's approved schema digest (owner empty: the gateway's).
    ToolPin,
}

impl ObjectKind {
    /// Its name in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::File => "file",
            ObjectKind::Response => "response",
            ObjectKind::ToolPin => "tool_pin",
        }
    }
}

/// The largest chunk of an object's content a store is given at once.
pub const MAX_CHUNK: usize = 4 << 20;

/// How long chunks written for an object that was never put are kept
/// before a purge removes them (an upload cut short by a crash).
pub const ORPHAN_CHUNKS_MS: i64 = 24 * 3_600_000;

/// How long a staged batch that was never opened is kept before a purge
/// removes it (a submission cut short by a crash).
pub const STAGED_BATCH_MS: i64 = 3_600_000;

/// One object: its owner (the key id; empty on an open gateway), id,
/// small metadata (JSON, what a list shows) and content (whole in `body`,
/// or in `chunks` written before it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptObject {
    /// Its kind.
    pub kind: ObjectKind,
    /// The key that made it.
    pub owner: String,
    /// Its id, unique per owner and kind.
    pub id: String,
    /// When it was made (Unix ms).
    pub created_ms: i64,
    /// When it is forgotten (Unix ms), if ever.
    pub expires_ms: Option<i64>,
    /// Metadata as JSON.
    pub meta: String,
    /// The content when kept whole (empty in a list, and for content kept
    /// in chunks).
    pub body: Vec<u8>,
    /// The content's size in bytes, whole or in chunks: what the object
    /// counts against its owner's quota.
    pub size: u64,
    /// How many chunks ([`ObjectStore::put_chunk`], numbered from 0) hold
    /// the content; 0 when it is whole in `body`.
    pub chunks: u32,
    /// The end user it was made for, as a keyed tag (never the user's id):
    /// erased with them.
    pub user_tag: Option<String>,
}

/// Objects by owner.
pub trait ObjectStore: Send + Sync {
    /// Keeps an object (one of the same kind, owner and id is replaced, and
    /// chunks past its `chunks` are removed).
    fn put_object(&self, object: KeptObject) -> StoreFuture<'_, ()>;
    /// Keeps chunk `seq` of an object's content (at most [`MAX_CHUNK`]
    /// bytes), written at `at_ms`, ahead of the object: nothing finds it
    /// until [`put_object`](Self::put_object) names it.
    fn put_chunk(
        &self,
        kind: ObjectKind,
        owner: String,
        id: String,
        seq: u32,
        at_ms: i64,
        data: Vec<u8>,
    ) -> StoreFuture<'_, ()>;
    /// Chunk `seq` of an object's content.
    fn get_chunk(&self, kind: ObjectKind, owner: String, id: String, seq: u32) -> StoreFuture<'_, Option<Vec<u8>>>;
    /// The object, unless it expired by `now_ms`.
    fn get_object(
        &self,
        kind: ObjectKind,
        owner: String,
        id: String,
        now_ms: i64,
    ) -> StoreFuture<'_, Option<KeptObject>>;
    /// An owner's live objects of a kind, newest first, at most `limit`,
    /// without their bodies.
    fn list_objects(
        &self,
        kind: ObjectKind,
        owner: String,
        now_ms: i64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<KeptObject>>;
    /// Removes an object and its chunks (written ahead of it or not);
    /// whether there was an object.
    fn delete_object(&self, kind: ObjectKind, owner: String, id: String) -> StoreFuture<'_, bool>;
    /// Removes every object expired by `now_ms`, with its chunks, and the
    /// chunks of objects never put, written [`ORPHAN_CHUNKS_MS`] before
    /// `now_ms`; how many objects.
    fn purge_objects(&self, now_ms: i64) -> StoreFuture<'_, u64>;
    /// Removes every object made for the end user tagged `user_tag`; how many.
    fn erase_objects(&self, user_tag: String) -> StoreFuture<'_, u64>;
    /// The bytes of an owner's objects live at `now_ms`, of every kind.
    fn object_bytes(&self, owner: String, now_ms: i64) -> StoreFuture<'_, u64>;
}

/// A batch job as submitted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchJob {
    /// Its id.
    pub id: String,
    /// The key that submitted it.
    pub owner: String,
    /// Whose shape it speaks: `openai` or `anthropic`.
    pub shape: String,
    /// The route each line is sent to (`/v1/chat/completions`, ...).
    pub endpoint: String,
    /// When it was submitted (Unix ms).
    pub created_ms: i64,
    /// When its unfinished lines expire (Unix ms).
    pub expires_ms: i64,
    /// When it was cancelled.
    pub cancelled_ms: Option<i64>,
    /// How many lines.
    pub total: u32,
    /// The shape's other fields (input file, metadata, window), as JSON.
    pub meta: String,
}

/// Where a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LineState {
    /// Waiting to be claimed.
    Pending,
    /// Claimed by an instance, under a lease.
    Running,
    /// Answered with a 2xx.
    Succeeded,
    /// Answered with an error.
    Failed,
    /// Cancelled before it ran.
    Cancelled,
    /// Its batch expired before it ran.
    Expired,
}

impl LineState {
    /// Its number in the store.
    pub fn code(self) -> i64 {
        match self {
            LineState::Pending => 0,
            LineState::Running => 1,
            LineState::Succeeded => 2,
            LineState::Failed => 3,
            LineState::Cancelled => 4,
            LineState::Expired => 5,
        }
    }

    /// The state a stored number names.
    pub fn from_code(code: i64) -> LineState {
        match code {
            0 => LineState::Pending,
            1 => LineState::Running,
            2 => LineState::Succeeded,
            3 => LineState::Failed,
            4 => LineState::Cancelled,
            _ => LineState::Expired,
        }
    }

    /// Whether it is over.
    pub fn is_final(self) -> bool {
        !matches!(self, LineState::Pending | LineState::Running)
    }
}

/// A line as submitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedLine {
    /// Its place in the input (0-based).
    pub index: u32,
    /// The caller's id for it.
    pub custom_id: String,
    /// The request body.
    pub body: Vec<u8>,
}

/// A line claimed for running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedLine {
    /// Its batch.
    pub batch: String,
    /// The batch's owner.
    pub owner: String,
    /// The batch's endpoint.
    pub endpoint: String,
    /// Its place.
    pub index: u32,
    /// The caller's id for it.
    pub custom_id: String,
    /// The request body.
    pub body: Vec<u8>,
    /// How many times it was claimed, this one included.
    pub attempt: u32,
}

/// What a line came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineOutcome {
    /// Its place.
    pub index: u32,
    /// The caller's id for it.
    pub custom_id: String,
    /// Its final state.
    pub state: LineState,
    /// The HTTP status it got (0 when it never ran).
    pub status: u16,
    /// The answer's body.
    pub body: Vec<u8>,
    /// When it ended (Unix ms).
    pub done_ms: i64,
}

/// Lines by state, and when the last one ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LineCounts {
    /// Not yet claimed.
    pub pending: u32,
    /// Running.
    pub running: u32,
    /// Succeeded.
    pub succeeded: u32,
    /// Failed.
    pub failed: u32,
    /// Cancelled.
    pub cancelled: u32,
    /// Expired.
    pub expired: u32,
    /// When the last line ended.
    pub last_done_ms: Option<i64>,
}

impl LineCounts {
    /// Counts `state` once more.
    pub fn add(&mut self, state: LineState, n: u32) {
        let slot = match state {
            LineState::Pending => &mut self.pending,
            LineState::Running => &mut self.running,
            LineState::Succeeded => &mut self.succeeded,
            LineState::Failed => &mut self.failed,
            LineState::Cancelled => &mut self.cancelled,
            LineState::Expired => &mut self.expired,
        };
        *slot += n;
    }

    /// Whether every line is over.
    pub fn done(&self) -> bool {
        self.pending == 0 && self.running == 0
    }
}

/// A job and where its lines are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchState {
    /// The job.
    pub job: BatchJob,
    /// Its lines by state.
    pub counts: LineCounts,
}

/// Batch jobs and their lines: a queue in the store.
pub trait BatchQueue: Send + Sync {
    /// Submits a job with its lines (one transaction).
    fn submit_batch(&self, job: BatchJob, lines: Vec<QueuedLine>) -> StoreFuture<'_, ()>;
    /// Stages a job whose lines come in parts: it is not found, listed or
    /// claimed until [`open_batch`](Self::open_batch) (a conflict when
    /// the id is taken).
    fn stage_batch(&self, job: BatchJob) -> StoreFuture<'_, ()>;
    /// Adds lines to a staged job ([`crate::StoreError::NotFound`] for a job that
    /// is not staged).
    fn stage_lines(&self, id: String, lines: Vec<QueuedLine>) -> StoreFuture<'_, ()>;
    /// Opens a staged job of `total` lines to its owner and the workers;
    /// whether it was staged.
    fn open_batch(&self, id: String, total: u32) -> StoreFuture<'_, bool>;
    /// One of an owner's jobs.
    fn batch(&self, owner: String, id: String) -> StoreFuture<'_, Option<BatchState>>;
    /// An owner's jobs, newest first, at most `limit`.
    fn batches(&self, owner: String, limit: usize) -> StoreFuture<'_, Vec<BatchState>>;
    /// Cancels a job: its pending lines are cancelled at once, running
    /// ones finish. The job as it now is.
    fn cancel_batch(&self, owner: String, id: String, now_ms: i64) -> StoreFuture<'_, Option<BatchState>>;
    /// Claims at most `limit` lines for `worker` until `now_ms + lease_ms`:
    /// pending lines not held back past `now_ms` (their own not-before
    /// time, or their owner's rest), and running ones whose lease ended
    /// (their claimer is gone). Owners take turns: each owner with lines
    /// gets one before any gets a second, the owner served least recently
    /// first (across claims and claimers), and an owner's lines go oldest
    /// job first. Lines of expired jobs expire on the way. Two claimers
    /// never get the same line while its lease lasts.
    fn claim_lines(
        &self,
        worker: String,
        now_ms: i64,
        lease_ms: i64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<ClaimedLine>>;
    /// Extends the lease of every line `worker` runs.
    fn renew_lines(&self, worker: String, now_ms: i64, lease_ms: i64) -> StoreFuture<'_, ()>;
    /// Records a claimed line's outcome, when `worker` still holds that
    /// claim (`attempt`); whether it did.
    fn finish_line(&self, worker: String, batch: String, attempt: u32, outcome: LineOutcome) -> StoreFuture<'_, bool>;
    /// Gives a claimed line back to the queue, not to be claimed before
    /// `not_before_ms`, nor any other line of its owner (a refusal that
    /// asked to wait: the owner rests), when `worker` still holds that
    /// claim (`attempt`); whether it did.
    fn release_line(
        &self,
        worker: String,
        batch: String,
        index: u32,
        attempt: u32,
        not_before_ms: i64,
    ) -> StoreFuture<'_, bool>;
    /// A job's ended lines, in input order.
    fn line_outcomes(&self, owner: String, id: String) -> StoreFuture<'_, Vec<LineOutcome>>;
    /// Removes a job and its lines; whether there was one.
    fn delete_batch(&self, owner: String, id: String) -> StoreFuture<'_, bool>;
    /// The bytes of an owner's jobs' lines, as submitted (staged ones too).
    fn batch_bytes(&self, owner: String) -> StoreFuture<'_, u64>;
    /// Removes jobs staged [`STAGED_BATCH_MS`] before `now_ms` and never
    /// opened, with their lines; how many.
    fn purge_batches(&self, now_ms: i64) -> StoreFuture<'_, u64>;
}

/// The owners of `claimed` (in the order a claim served them), each once,
/// by the last line it got: the owner a claim served last takes the last
/// turn, so one served more lines waits longest for its next.
pub(crate) fn served(claimed: &[ClaimedLine]) -> Vec<&str> {
    let mut owners: Vec<&str> = Vec::new();
    for line in claimed {
        owners.retain(|owner| *owner != line.owner);
        owners.push(&line.owner);
    }
    owners
}
