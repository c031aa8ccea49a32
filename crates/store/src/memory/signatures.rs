//! Tool-call signatures ([`SignatureStore`]), the oldest kept dropped first.

use super::{ready, MemoryStore, MEMORY_SIGNATURES};
use crate::{KeptSignature, SignatureStore, StoreFuture};

impl SignatureStore for MemoryStore {
    fn keep_signatures(&self, kept: Vec<KeptSignature>, now_ms: i64) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            for entry in kept {
                if inner.signatures.insert(entry.key.clone(), (entry.signature, entry.expires_ms)).is_none() {
                    inner.signature_order.push_back(entry.key);
                }
            }
            // Bounded: expired entries at the front go, then the oldest kept.
            while let Some(oldest) = inner.signature_order.front() {
                let expired = inner.signatures.get(oldest).is_none_or(|(_, expires)| *expires <= now_ms);
                if !expired && inner.signatures.len() <= MEMORY_SIGNATURES {
                    break;
                }
                if let Some(oldest) = inner.signature_order.pop_front() {
                    inner.signatures.remove(&oldest);
                }
            }
            Ok(())
        }))
    }

    fn find_signatures(&self, keys: Vec<String>, now_ms: i64) -> StoreFuture<'_, Vec<Option<String>>> {
        ready(self.with(|inner| {
            Ok(keys
                .iter()
                .map(|key| match inner.signatures.get(key) {
                    Some((signature, expires)) if *expires > now_ms => Some(signature.clone()),
                    _ => None,
                })
                .collect())
        }))
    }
}
