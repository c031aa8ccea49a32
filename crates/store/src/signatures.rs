//! Tool-call signatures ([`SignatureStore`]) kept for callers whose
//! protocol drops them.

use crate::StoreFuture;

/// A vendor's signature of a tool call (Gemini's `thoughtSignature`), kept
/// for a caller whose protocol drops it when it sends the call back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptSignature {
    /// Whose call and which: the caller's key id and the tool call's id.
    pub key: String,
    /// The signature, as the vendor sent it.
    pub signature: String,
    /// When it is forgotten (ms since the epoch).
    pub expires_ms: i64,
}

/// The longest signature kept (Gemini's are a few hundred bytes to a few
/// kilobytes; anything longer is not one).
pub const MAX_KEPT_SIGNATURE: usize = 64 << 10;

/// Tool-call signatures by key, each until it expires.
pub trait SignatureStore: Send + Sync {
    /// Keeps each signature under its key (a later one replaces it) and
    /// forgets those expired by `now_ms`.
    fn keep_signatures(&self, kept: Vec<KeptSignature>, now_ms: i64) -> StoreFuture<'_, ()>;
    /// The signature live at `now_ms` under each key, in the keys' order.
    fn find_signatures(&self, keys: Vec<String>, now_ms: i64) -> StoreFuture<'_, Vec<Option<String>>>;
}
