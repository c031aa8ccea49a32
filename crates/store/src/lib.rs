//! Switchyard's durable records behind small traits, one per concern:
//! [`KeyStore`] (virtual keys, with idempotent create and rotate),
//! [`GroupStore`] (the budget tree), [`Ledger`] (tokens per request; spend
//! is derived from it when read, never stored) and [`AuditLog`] (every
//! admin mutation attempt), [`ContentStore`] (kept text, sealed, by a
//! retention). [`memory::MemoryStore`] is the in-process
//! default, [`sqlite::SqliteStore`] the single-node one and
//! [`postgres::PostgresStore`] a fleet's, which also announces every change
//! ([`ChangeFeed`]) so each instance's caches follow; [`Location`] is the
//! one place the storage config chooses among them, and one conformance
//! suite (`tests/conformance.rs`) runs over every backend. Each backend is a
//! folder of wings, one module per trait with its SQL beside it.
//!
//! The request path never waits on a store: keys are cached by the
//! gateway, counters live in memory, and ledger rows are written behind in
//! batches.

mod audit;
mod content;
mod groups;
pub mod kept;
mod keys;
mod ledger;
mod location;
pub mod memory;
mod notes;
mod pins;
pub mod postgres;
mod signatures;
mod spend;
pub mod sqlite;
mod stores;
mod versions;

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;

pub use audit::*;
pub use content::*;
pub use groups::*;
pub use kept::{
    BatchJob, BatchQueue, BatchState, ClaimedLine, KeptObject, LineCounts, LineOutcome, LineState, ObjectKind,
    ObjectStore, QueuedLine, MAX_CHUNK, ORPHAN_CHUNKS_MS, STAGED_BATCH_MS,
};
pub use keys::*;
pub use ledger::*;
pub use location::Location;
pub use notes::*;
pub use pins::*;
pub use signatures::*;
pub use spend::*;
pub use stores::*;
pub use switchyard_governance::money::Tokens;
pub use versions::*;

/// What every store call returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Why a store call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No such record.
    #[error("not found")]
    NotFound,
    /// The write conflicts with what is stored (a duplicate, a reused
    /// idempotency key with another request).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The record changed since it was read (another write came first):
    /// read it again and redo the change.
    #[error("the record changed since it was read")]
    Stale,
    /// The backend cannot be reached or failed.
    #[error("store unavailable: {0}")]
    Unavailable(String),
}

/// How many of `known` migrations a database at schema version `applied`
/// already has; an error when it is newer than this binary.
pub(crate) fn applied_migrations(applied: i64, known: usize) -> Result<usize, StoreError> {
    let applied = usize::try_from(applied).unwrap_or(0);
    if applied > known {
        return Err(StoreError::Unavailable(format!(
            "the database has schema version {applied}, newer than this binary's {known}; run a newer switchyard"
        )));
    }
    Ok(applied)
}

pub(crate) fn to_json<T: Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|err| StoreError::Unavailable(err.to_string()))
}

pub(crate) fn from_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|err| StoreError::Unavailable(format!("corrupt record: {err}")))
}
