//! Virtual keys ([`KeyStore`]): idempotent creates and rotations, and the
//! version check every backend applies to a write over a stored record.

use switchyard_governance::KeyRecord;

use crate::{StoreError, StoreFuture};

/// How long an idempotency key holds: a create or rotation sent again
/// within a day is answered by the first; after that the key is free (a
/// client that reuses one for a later rotation rotates).
pub const IDEMPOTENCY_TTL_MS: i64 = 24 * 3_600_000;

/// The write of `next` over `stored`, checked the same way by every store:
/// `next` must carry the version it read (`Stale` otherwise), and a revoked
/// key never changes again (revocation is final). Returns the record to
/// store, one version on.
pub(crate) fn checked_write(stored: &KeyRecord, next: KeyRecord) -> Result<KeyRecord, StoreError> {
    if stored.revoked_at.is_some() && (next.revoked_at != stored.revoked_at || next.hash != stored.hash) {
        return Err(StoreError::Conflict(format!("key `{}` is revoked; revocation is final", stored.id)));
    }
    if next.version != stored.version {
        return Err(StoreError::Stale);
    }
    Ok(KeyRecord { version: stored.version + 1, ..next })
}

/// An idempotency key on a create or rotate: a retried request with the
/// same key and the same fingerprint, within [`IDEMPOTENCY_TTL_MS`], gets
/// the first outcome back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idempotency {
    /// The caller's `Idempotency-Key`.
    pub key: String,
    /// What the request asked (a hash of its method, path and body).
    pub fingerprint: String,
    /// When the request came (Unix ms): earlier records past the TTL are gone.
    pub at_ms: i64,
}

impl Idempotency {
    /// The oldest record time still honoured.
    pub(crate) fn oldest_ms(&self) -> i64 {
        self.at_ms.saturating_sub(IDEMPOTENCY_TTL_MS)
    }
}

/// What an idempotent write did.
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    /// It wrote this record.
    New(KeyRecord),
    /// An earlier request with the same idempotency key wrote this record.
    Replayed(KeyRecord),
}

/// Virtual keys.
pub trait KeyStore: Send + Sync {
    /// Creates a key (its id and hash must be new).
    fn create_key(&self, record: KeyRecord, idempotency: Option<Idempotency>) -> StoreFuture<'_, Written>;
    /// Replaces a key's secret (the old one stops at once), when the
    /// stored record is still the version `record` carries.
    fn rotate_key(&self, record: KeyRecord, idempotency: Option<Idempotency>) -> StoreFuture<'_, Written>;
    /// Replaces a key's record (changes, revocation) when the stored one is
    /// still the version `record` carries ([`StoreError::Stale`] otherwise;
    /// a revoked key never changes): returns what was stored.
    fn update_key(&self, record: KeyRecord) -> StoreFuture<'_, KeyRecord>;
    /// One key.
    fn get_key(&self, id: &str) -> StoreFuture<'_, Option<KeyRecord>>;
    /// Keys by id, after `after`, at most `limit`.
    fn list_keys(&self, after: Option<&str>, limit: usize) -> StoreFuture<'_, Vec<KeyRecord>>;
}
