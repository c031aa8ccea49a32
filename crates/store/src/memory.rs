//! The in-process store: the demo's default, and the reference the
//! conformance suite holds every other backend to. Nothing survives a
//! restart, and the ledger keeps only the newest [`MEMORY_LEDGER_ROWS`]
//! rows (older ones are dropped, so spend over longer spans undercounts:
//! configure `storage.sqlite_path` to keep them).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use switchyard_governance::KeyRecord;

use crate::{
    AuditEntry, AuditLog, ConfigStore, ConfigVersion, ContentStore, GroupRecord, GroupStore, Idempotency, KeptContent,
    KeptSignature, KeyStore, Ledger, LedgerRow, RowFilter, SignatureStore, SpendBy, StoreError, StoreFuture,
    StoredAudit, StoredRow, Tokens, Total, TotalsQuery, Written,
};

/// Ledger rows the memory store keeps.
pub const MEMORY_LEDGER_ROWS: usize = 1_000_000;

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

impl GroupStore for MemoryStore {
    fn put_group(&self, group: GroupRecord) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            inner.groups.insert(group.name.clone(), group);
            Ok(())
        }))
    }

    fn delete_group(&self, name: &str) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| inner.groups.remove(name).map(|_| ()).ok_or(StoreError::NotFound)))
    }

    fn list_groups(&self) -> StoreFuture<'_, Vec<GroupRecord>> {
        ready(self.with(|inner| Ok(inner.groups.values().cloned().collect())))
    }
}

/// The value of `row` in dimension `by`.
pub(crate) fn dimension(row: &LedgerRow, by: SpendBy) -> Option<String> {
    match by {
        SpendBy::Key => row.key_id.clone(),
        SpendBy::Group => row.group.clone(),
        SpendBy::Model => Some(row.model.clone()),
        SpendBy::Lane => Some(row.lane.clone()),
        SpendBy::Operation => Some(row.operation.clone()),
        SpendBy::User => row.end_user.clone(),
    }
}

fn add(tokens: &mut Tokens, more: &Tokens) {
    tokens.input += more.input;
    tokens.output += more.output;
    tokens.cache_read += more.cache_read;
    tokens.cache_write += more.cache_write;
    tokens.units += more.units;
    tokens.requests += more.requests;
}

impl Ledger for MemoryStore {
    fn append(&self, rows: Vec<LedgerRow>) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            for row in rows {
                inner.next_row += 1;
                let id = inner.next_row;
                if inner.ledger.len() == MEMORY_LEDGER_ROWS {
                    inner.ledger.pop_front();
                }
                inner.ledger.push_back(StoredRow { id, row });
            }
            Ok(())
        }))
    }

    fn rows(&self, filter: RowFilter) -> StoreFuture<'_, Vec<StoredRow>> {
        ready(self.with(|inner| {
            Ok(inner
                .ledger
                .iter()
                .rev()
                .filter(|r| filter.before.is_none_or(|before| r.id < before))
                .filter(|r| filter.key.as_ref().is_none_or(|k| r.row.key_id.as_ref() == Some(k)))
                .filter(|r| filter.pool.as_ref().is_none_or(|p| &r.row.pool == p))
                .filter(|r| filter.lane.as_ref().is_none_or(|l| &r.row.lane == l))
                .filter(|r| filter.status.is_none_or(|(from, to)| (from..to).contains(&r.row.status)))
                .filter(|r| filter.end_user.as_ref().is_none_or(|u| r.row.end_user.as_ref() == Some(u)))
                .filter(|r| filter.request_id.as_ref().is_none_or(|id| &r.row.request_id == id))
                .filter(|r| filter.at_ms.is_none_or(|(from, to)| (from..to).contains(&r.row.at_ms)))
                .take(filter.limit)
                .cloned()
                .collect())
        }))
    }

    fn totals(&self, query: TotalsQuery) -> StoreFuture<'_, Vec<Total>> {
        ready(self.with(|inner| {
            let mut sums: BTreeMap<(Option<String>, String), Total> = BTreeMap::new();
            for stored in &inner.ledger {
                let row = &stored.row;
                if row.at_ms < query.from_ms || row.at_ms >= query.to_ms {
                    continue;
                }
                if query.key.as_ref().is_some_and(|k| row.key_id.as_ref() != Some(k)) {
                    continue;
                }
                if query.groups.as_ref().is_some_and(|gs| !row.group.as_ref().is_some_and(|g| gs.contains(g))) {
                    continue;
                }
                if query.end_user.as_ref().is_some_and(|u| row.end_user.as_ref() != Some(u)) {
                    continue;
                }
                let value = dimension(row, query.by);
                let total = sums.entry((value.clone(), row.lane.clone())).or_insert_with(|| Total {
                    value,
                    lane: row.lane.clone(),
                    requests: 0,
                    tokens: Tokens::default(),
                    saved_nano: 0,
                    outcomes: crate::Outcomes::default(),
                });
                // A refusal is counted as one, never as a request.
                let refused = u64::from(row.operation == crate::REFUSED);
                total.requests += 1 - refused;
                add(&mut total.tokens, &row.tokens);
                total.saved_nano = total.saved_nano.saturating_add(row.notes.cache_saved_nano.unwrap_or(0));
                let seen = crate::Outcomes { cache_hits: row.notes.cache_hit(), guarded: row.notes.guarded(), refused };
                total.outcomes.add(&seen);
            }
            Ok(sums.into_values().collect())
        }))
    }

    fn count(&self) -> StoreFuture<'_, u64> {
        ready(self.with(|inner| Ok(inner.ledger.len() as u64)))
    }
}

impl AuditLog for MemoryStore {
    fn record(&self, entry: AuditEntry) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            let id = inner.audit.last().map_or(1, |last| last.id + 1);
            inner.audit.push(StoredAudit { id, entry });
            Ok(())
        }))
    }

    fn purge(&self, before_ms: i64) -> StoreFuture<'_, u64> {
        ready(self.with(|inner| {
            let before = inner.audit.len();
            inner.audit.retain(|e| e.entry.at_ms >= before_ms);
            Ok((before - inner.audit.len()) as u64)
        }))
    }

    fn entries(&self, before: Option<i64>, limit: usize) -> StoreFuture<'_, Vec<StoredAudit>> {
        ready(self.with(|inner| {
            Ok(inner.audit.iter().rev().filter(|e| before.is_none_or(|b| e.id < b)).take(limit).cloned().collect())
        }))
    }
}

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

impl ConfigStore for MemoryStore {
    fn append_config(&self, after: i64, version: ConfigVersion) -> StoreFuture<'_, ConfigVersion> {
        ready(self.with(|inner| {
            let newest = inner.configs.last().map_or(0, |v| v.version);
            if newest != after {
                return Err(StoreError::Stale);
            }
            let stored = ConfigVersion { version: newest + 1, ..version };
            inner.configs.push(stored.clone());
            Ok(stored)
        }))
    }

    fn config_versions(&self, before: Option<i64>, limit: usize) -> StoreFuture<'_, Vec<ConfigVersion>> {
        ready(self.with(|inner| {
            Ok(inner
                .configs
                .iter()
                .rev()
                .filter(|v| before.is_none_or(|b| v.version < b))
                .take(limit)
                .cloned()
                .collect())
        }))
    }

    fn config_version(&self, version: i64) -> StoreFuture<'_, Option<ConfigVersion>> {
        ready(self.with(|inner| Ok(inner.configs.iter().find(|v| v.version == version).cloned())))
    }
}

impl ContentStore for MemoryStore {
    fn keep_content(&self, kept: Vec<KeptContent>) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            for record in kept {
                inner.content.entry(record.entry).or_insert(record);
            }
            Ok(())
        }))
    }

    fn find_content(&self, entry: i64) -> StoreFuture<'_, Option<KeptContent>> {
        ready(self.with(|inner| Ok(inner.content.get(&entry).cloned())))
    }

    fn erase_content(&self, user_tag: String) -> StoreFuture<'_, u64> {
        ready(self.with(|inner| {
            let before = inner.content.len();
            inner.content.retain(|_, record| record.user_tag.as_deref() != Some(user_tag.as_str()));
            Ok((before - inner.content.len()) as u64)
        }))
    }

    fn purge_content(&self, before_ms: i64) -> StoreFuture<'_, u64> {
        ready(self.with(|inner| {
            let before = inner.content.len();
            inner.content.retain(|_, record| record.at_ms >= before_ms);
            Ok((before - inner.content.len()) as u64)
        }))
    }
}
