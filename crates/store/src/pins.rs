//! Session pins ([`PinStore`]) kept across a single node's restarts.

use crate::StoreFuture;

/// A session's (or a prompt prefix's) pin to a lane of a pool, kept so a
/// single node's pins outlive a restart (and with them the vendors' prompt
/// caches). Names, not indexes: a config changed in between maps them again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptPin {
    /// The pool.
    pub pool: String,
    /// The session id (the caller's header) or `prefix:` and a hash.
    pub session: String,
    /// The lane it is pinned to.
    pub lane: String,
    /// When the pin ends unless used again (ms since the epoch).
    pub expires_ms: i64,
    /// How many times the session's lane changed.
    pub switches: u32,
}

/// Session pins by pool and session, each until it expires.
pub trait PinStore: Send + Sync {
    /// Keeps each pin (a later one of the same pool and session replaces
    /// it) and forgets those expired by `now_ms`.
    fn keep_pins(&self, pins: Vec<KeptPin>, now_ms: i64) -> StoreFuture<'_, ()>;
    /// The pins live at `now_ms`, at most `per_pool` of each pool (the
    /// longest-lived); expired ones are dropped.
    fn live_pins(&self, now_ms: i64, per_pool: usize) -> StoreFuture<'_, Vec<KeptPin>>;
}
