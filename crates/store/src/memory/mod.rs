//! The in-process store: the demo's default, and the reference the
//! conformance suite holds every other backend to. Nothing survives a
//! restart, and the ledger keeps only the newest [`MEMORY_LEDGER_ROWS`]
//! rows (older ones are dropped, so spend over longer spans undercounts:
//! configure `storage.sqlite_path` to keep them).
//!
//! One wing a concern, as the SQL backends: each module below implements
//! one store trait; this module owns the records they share.

mod audit;
mod batches;
mod content;
mod groups;
mod keys;
mod ledger;
mod objects;
mod signatures;
mod versions;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use switchyard_governance::KeyRecord;

use crate::kept::{BatchJob, KeptObject, LineState, ObjectKind};
use crate::{ConfigVersion, GroupRecord, KeptContent, StoreError, StoreFuture, StoredAudit, StoredRow};

/// Ledger rows the memory store keeps.
pub const MEMORY_LEDGER_ROWS: usize = 1_000_000;

/// Files and stored responses the memory store keeps (the oldest kept go
/// first): an open gateway storing every Responses reply stays bounded.
pub const MEMORY_OBJECTS: usize = 50_000;

/// The bytes of files and stored responses the memory store keeps (the
/// oldest kept go first, as past [`MEMORY_OBJECTS`]).
pub const MEMORY_OBJECT_BYTES: u64 = 1 << 30;

/// Tool-call signatures the memory store keeps (the oldest kept go first).
pub const MEMORY_SIGNATURES: usize = 100_000;

#[derive(Default)]
struct Inner {
    keys: BTreeMap<String, KeyRecord>,
    /// (scope, idempotency key) → (fingerprint, key id, when).
    idempotency: HashMap<(String, String), (String, String, i64)>,
    groups: BTreeMap<String, GroupRecord>,
    ledger: std::collections::VecDeque<StoredRow>,
    next_row: i64,
    audit: Vec<StoredAudit>,
    /// Key → (signature, expiry ms), and the keys in the order kept.
    signatures: HashMap<String, (String, i64)>,
    signature_order: std::collections::VecDeque<String>,
    /// Kept text by ledger entry.
    content: BTreeMap<i64, KeptContent>,
    /// Config versions, oldest first.
    configs: Vec<ConfigVersion>,
    /// Ledger entries held (a row written twice is stored once).
    entries: std::collections::HashSet<i64>,
    /// Files and stored responses, the order they were kept in, and their
    /// bytes (with their chunks').
    objects: BTreeMap<ObjectKey, KeptObject>,
    object_order: std::collections::VecDeque<ObjectKey>,
    object_bytes: u64,
    /// Chunks of objects' content: (when written, the bytes).
    chunks: BTreeMap<(ObjectKey, u32), (i64, Vec<u8>)>,
    /// Batch jobs by id, and their lines by (job, index).
    batches: BTreeMap<String, Job>,
    lines: BTreeMap<(String, u32), Line>,
    /// Each owner's turn (the claim that last served it) and rest.
    owners: HashMap<String, Turn>,
}

/// An object's kind, owner and id.
type ObjectKey = (ObjectKind, String, String);

/// A batch job as the memory store holds it.
struct Job {
    job: BatchJob,
    /// Still taking lines: found by no one.
    staged: bool,
    /// The bytes of its lines.
    bytes: u64,
}

/// When an owner was last served, and until when it rests.
#[derive(Default, Clone, Copy)]
struct Turn {
    turn: i64,
    rest_until: i64,
}

/// A batch line as the memory store holds it.
struct Line {
    custom_id: String,
    body: Vec<u8>,
    state: LineState,
    not_before: i64,
    worker: Option<String>,
    attempt: u32,
    lease_until: i64,
    status: u16,
    result: Vec<u8>,
    done_ms: i64,
}

/// Everything in memory.
#[derive(Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> Result<T, StoreError>) -> Result<T, StoreError> {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

fn ready<'a, T: Send + 'a>(result: Result<T, StoreError>) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(result))
}
