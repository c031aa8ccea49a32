//! Kept request and reply text ([`ContentStore`]), sealed.

use crate::StoreFuture;

/// One request's kept text, sealed (retention `redacted` or `full`): the
/// store holds it as opaque bytes, found by the ledger row's entry, and
/// by its end user's tag (a keyed hash, never the user's id) to erase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptContent {
    /// The ledger row's entry.
    pub entry: i64,
    /// When it was kept (Unix ms): purged past the retention's days.
    pub at_ms: i64,
    /// The request id.
    pub request_id: String,
    /// The virtual key.
    pub key_id: Option<String>,
    /// The key's group.
    pub group: Option<String>,
    /// The end user's tag, when the request named one.
    pub user_tag: Option<String>,
    /// `redacted` or `full`.
    pub retention: String,
    /// The sealed text.
    pub sealed: Vec<u8>,
}

/// Kept request and reply text.
pub trait ContentStore: Send + Sync {
    /// Keeps records (an entry kept again is stored once).
    fn keep_content(&self, kept: Vec<KeptContent>) -> StoreFuture<'_, ()>;
    /// The record of ledger entry `entry`.
    fn find_content(&self, entry: i64) -> StoreFuture<'_, Option<KeptContent>>;
    /// Erases every record of the end user tagged `user_tag`; returns how many.
    fn erase_content(&self, user_tag: String) -> StoreFuture<'_, u64>;
    /// Removes the records kept before `before_ms`; returns how many.
    fn purge_content(&self, before_ms: i64) -> StoreFuture<'_, u64>;
}
