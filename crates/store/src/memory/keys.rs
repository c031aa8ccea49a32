//! Virtual keys ([`KeyStore`]): idempotent writes by scope and key.

use switchyard_governance::KeyRecord;

use super::{ready, Inner, MemoryStore};
use crate::{Idempotency, KeyStore, StoreError, StoreFuture, Written};

/// Applies an idempotent key write in `inner`; `write` returns what it stored.
fn write_key(
    inner: &mut Inner,
    scope: &str,
    record: KeyRecord,
    idempotency: Option<Idempotency>,
    write: impl FnOnce(&mut Inner, KeyRecord) -> Result<KeyRecord, StoreError>,
) -> Result<Written, StoreError> {
    if let Some(idem) = &idempotency {
        let oldest = idem.oldest_ms();
        inner.idempotency.retain(|_, (_, _, at)| *at >= oldest);
        if let Some((fingerprint, id, _)) = inner.idempotency.get(&(scope.to_owned(), idem.key.clone())) {
            if *fingerprint != idem.fingerprint {
                return Err(StoreError::Conflict("the idempotency key was used for another request".into()));
            }
            return inner.keys.get(id).cloned().map(Written::Replayed).ok_or(StoreError::NotFound);
        }
    }
    let id = record.id.clone();
    let stored = write(inner, record)?;
    if let Some(idem) = idempotency {
        inner.idempotency.insert((scope.to_owned(), idem.key), (idem.fingerprint, id, idem.at_ms));
    }
    Ok(Written::New(stored))
}

/// Replaces a stored key with `record` when the checks allow it.
fn replace_key(inner: &mut Inner, record: KeyRecord) -> Result<KeyRecord, StoreError> {
    let slot = inner.keys.get_mut(&record.id).ok_or(StoreError::NotFound)?;
    let stored = crate::checked_write(slot, record)?;
    *slot = stored.clone();
    Ok(stored)
}

impl KeyStore for MemoryStore {
    fn create_key(&self, record: KeyRecord, idempotency: Option<Idempotency>) -> StoreFuture<'_, Written> {
        ready(self.with(|inner| {
            write_key(inner, "create", record, idempotency, |inner, record| {
                if inner.keys.contains_key(&record.id) || inner.keys.values().any(|k| k.hash == record.hash) {
                    return Err(StoreError::Conflict(format!("key `{}` exists", record.id)));
                }
                inner.keys.insert(record.id.clone(), record.clone());
                Ok(record)
            })
        }))
    }

    fn rotate_key(&self, record: KeyRecord, idempotency: Option<Idempotency>) -> StoreFuture<'_, Written> {
        let scope = format!("rotate:{}", record.id);
        ready(self.with(|inner| write_key(inner, &scope, record, idempotency, replace_key)))
    }

    fn update_key(&self, record: KeyRecord) -> StoreFuture<'_, KeyRecord> {
        ready(self.with(|inner| replace_key(inner, record)))
    }

    fn get_key(&self, id: &str) -> StoreFuture<'_, Option<KeyRecord>> {
        ready(self.with(|inner| Ok(inner.keys.get(id).cloned())))
    }

    fn list_keys(&self, after: Option<&str>, limit: usize) -> StoreFuture<'_, Vec<KeyRecord>> {
        ready(self.with(|inner| {
            let start = after.map_or(std::ops::Bound::Unbounded, |a| std::ops::Bound::Excluded(a.to_owned()));
            Ok(inner.keys.range((start, std::ops::Bound::Unbounded)).take(limit).map(|(_, k)| k.clone()).collect())
        }))
    }
}
