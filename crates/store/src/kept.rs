//! What the gateway keeps for its callers beyond the ledger: objects (an
//! uploaded file, a stored response), each owned by the key that made it
//! and found only by that key, and batch jobs with their lines, a durable
//! queue several instances drain together (a line is claimed with a lease
//! the claimer renews; one whose claimer died is claimed again once its
//! lease ends).

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

/// One object: its owner (the key id; empty on an open gateway), id,
/// small metadata (JSON, what a list shows) and body.
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
    /// The content (empty in a list).
    pub body: Vec<u8>,
}

/// Objects by owner.
pub trait ObjectStore: Send + Sync {
    /// Keeps an object (one of the same kind, owner and id is replaced).
    fn put_object(&self, object: KeptObject) -> StoreFuture<'_, ()>;
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
    /// Removes an object; whether there was one.
    fn delete_object(&self, kind: ObjectKind, owner: String, id: String) -> StoreFuture<'_, bool>;
    /// Removes every object expired by `now_ms`; how many.
    fn purge_objects(&self, now_ms: i64) -> StoreFuture<'_, u64>;
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
    /// One of an owner's jobs.
    fn batch(&self, owner: String, id: String) -> StoreFuture<'_, Option<BatchState>>;
    /// An owner's jobs, newest first, at most `limit`.
    fn batches(&self, owner: String, limit: usize) -> StoreFuture<'_, Vec<BatchState>>;
    /// Cancels a job: its pending lines are cancelled at once, running
    /// ones finish. The job as it now is.
    fn cancel_batch(&self, owner: String, id: String, now_ms: i64) -> StoreFuture<'_, Option<BatchState>>;
    /// Claims at most `limit` lines for `worker` until `now_ms + lease_ms`:
    /// pending lines, and running ones whose lease ended (their claimer is
    /// gone), oldest job first. Lines of expired jobs expire on the way.
    /// Two claimers never get the same line while its lease lasts.
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
    /// A job's ended lines, in input order.
    fn line_outcomes(&self, owner: String, id: String) -> StoreFuture<'_, Vec<LineOutcome>>;
    /// Removes a job and its lines; whether there was one.
    fn delete_batch(&self, owner: String, id: String) -> StoreFuture<'_, bool>;
}
