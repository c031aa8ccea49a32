//! The in-process store: the demo's default, and the reference the
//! conformance suite holds every other backend to. Nothing survives a
//! restart, and the ledger keeps only the newest [`MEMORY_LEDGER_ROWS`]
//! rows (older ones are dropped, so spend over longer spans undercounts:
//! configure `storage.sqlite_path` to keep them).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};

use switchyard_governance::KeyRecord;

use crate::kept::{
    BatchJob, BatchQueue, BatchState, ClaimedLine, KeptObject, LineCounts, LineOutcome, LineState, ObjectKind,
    ObjectStore, QueuedLine, ORPHAN_CHUNKS_MS, STAGED_BATCH_MS,
};
use crate::{
    AuditEntry, AuditLog, ConfigStore, ConfigVersion, ContentStore, GroupRecord, GroupStore, Idempotency, KeptContent,
    KeptSignature, KeyStore, Ledger, LedgerRow, RowFilter, SignatureStore, SpendBy, StoreError, StoreFuture,
    StoredAudit, StoredRow, Tokens, Total, TotalsQuery, Written,
};

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
    tokens.add(more);
}

impl Ledger for MemoryStore {
    fn append(&self, rows: std::sync::Arc<[LedgerRow]>) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            for row in rows.iter().cloned() {
                if row.entry != 0 && !inner.entries.insert(row.entry) {
                    continue;
                }
                inner.next_row += 1;
                let id = inner.next_row;
                if inner.ledger.len() == MEMORY_LEDGER_ROWS {
                    if let Some(old) = inner.ledger.pop_front() {
                        inner.entries.remove(&old.row.entry);
                    }
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
                .filter(|r| filter.operation.as_ref().is_none_or(|op| &r.row.operation == op))
                .filter(|r| filter.at_ms.is_none_or(|(from, to)| (from..to).contains(&r.row.at_ms)))
                .filter(|r| {
                    filter.groups.as_ref().is_none_or(|gs| r.row.group.as_ref().is_some_and(|g| gs.contains(g)))
                })
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
                    settled: crate::Settled::default(),
                });
                // A refusal is counted as many as it stands for, never as a request.
                let refused = row.refusals();
                total.requests += u64::from(row.operation != crate::REFUSED);
                add(&mut total.tokens, &row.tokens);
                total.saved_nano = total.saved_nano.saturating_add(row.notes.cache_saved_nano.unwrap_or(0));
                let seen = crate::Outcomes { cache_hits: row.notes.cache_hit(), guarded: row.notes.guarded(), refused };
                total.outcomes.add(&seen);
                let settled = crate::Settled {
                    cost_nano: row.charge.map_or(0, |c| c.cost_nano),
                    price_nano: row.charge.map_or(0, |c| c.price_nano),
                    unsettled: u64::from(row.charge.is_none()),
                };
                total.settled.add(&settled);
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

impl Inner {
    /// The range of `key`'s chunks.
    fn chunk_range(key: &ObjectKey) -> std::ops::RangeInclusive<(ObjectKey, u32)> {
        (key.clone(), 0)..=(key.clone(), u32::MAX)
    }

    /// Removes an object and its chunks; whether there was an object.
    fn remove_object(&mut self, key: &ObjectKey) -> bool {
        let chunks: Vec<(ObjectKey, u32)> = self.chunks.range(Self::chunk_range(key)).map(|(k, _)| k.clone()).collect();
        for chunk in chunks {
            if let Some((_, data)) = self.chunks.remove(&chunk) {
                if self.objects.contains_key(key) {
                    self.object_bytes = self.object_bytes.saturating_sub(data.len() as u64);
                }
            }
        }
        match self.objects.remove(key) {
            Some(object) => {
                self.object_bytes = self.object_bytes.saturating_sub(object.body.len() as u64);
                true
            }
            None => false,
        }
    }

    /// The bytes of `key`'s chunks.
    fn chunk_bytes(&self, key: &ObjectKey) -> u64 {
        self.chunks.range(Self::chunk_range(key)).map(|(_, (_, data))| data.len() as u64).sum()
    }
}

impl ObjectStore for MemoryStore {
    fn put_object(&self, object: KeptObject) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            let key = (object.kind, object.owner.clone(), object.id.clone());
            if let Some(old) = inner.objects.remove(&key) {
                inner.object_bytes = inner.object_bytes.saturating_sub(old.body.len() as u64 + inner.chunk_bytes(&key));
            } else {
                inner.object_order.push_back(key.clone());
            }
            let past: Vec<(ObjectKey, u32)> = inner
                .chunks
                .range((key.clone(), object.chunks)..=(key.clone(), u32::MAX))
                .map(|(k, _)| k.clone())
                .collect();
            for chunk in past {
                inner.chunks.remove(&chunk);
            }
            inner.object_bytes += object.body.len() as u64 + inner.chunk_bytes(&key);
            inner.objects.insert(key, object);
            while inner.objects.len() > MEMORY_OBJECTS || inner.object_bytes > MEMORY_OBJECT_BYTES {
                let Some(oldest) = inner.object_order.pop_front() else { break };
                inner.remove_object(&oldest);
            }
            if inner.object_order.len() > 2 * MEMORY_OBJECTS {
                let objects = &inner.objects;
                let kept: std::collections::VecDeque<_> =
                    inner.object_order.iter().filter(|k| objects.contains_key(*k)).cloned().collect();
                inner.object_order = kept;
            }
            Ok(())
        }))
    }

    fn put_chunk(
        &self,
        kind: ObjectKind,
        owner: String,
        id: String,
        seq: u32,
        at_ms: i64,
        data: Vec<u8>,
    ) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            inner.chunks.insert(((kind, owner, id), seq), (at_ms, data));
            Ok(())
        }))
    }

    fn get_chunk(&self, kind: ObjectKind, owner: String, id: String, seq: u32) -> StoreFuture<'_, Option<Vec<u8>>> {
        ready(self.with(|inner| Ok(inner.chunks.get(&((kind, owner, id), seq)).map(|(_, data)| data.clone()))))
    }

    fn get_object(
        &self,
        kind: ObjectKind,
        owner: String,
        id: String,
        now_ms: i64,
    ) -> StoreFuture<'_, Option<KeptObject>> {
        ready(self.with(|inner| {
            Ok(inner.objects.get(&(kind, owner, id)).filter(|o| o.expires_ms.is_none_or(|at| at > now_ms)).cloned())
        }))
    }

    fn list_objects(
        &self,
        kind: ObjectKind,
        owner: String,
        now_ms: i64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<KeptObject>> {
        ready(self.with(|inner| {
            let mut found: Vec<KeptObject> = inner
                .objects
                .values()
                .filter(|o| o.kind == kind && o.owner == owner && o.expires_ms.is_none_or(|at| at > now_ms))
                .map(|o| KeptObject { body: Vec::new(), ..o.clone() })
                .collect();
            found.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then_with(|| b.id.cmp(&a.id)));
            found.truncate(limit);
            Ok(found)
        }))
    }

    fn delete_object(&self, kind: ObjectKind, owner: String, id: String) -> StoreFuture<'_, bool> {
        ready(self.with(|inner| Ok(inner.remove_object(&(kind, owner, id)))))
    }

    fn purge_objects(&self, now_ms: i64) -> StoreFuture<'_, u64> {
        ready(self.with(|inner| {
            let expired: Vec<ObjectKey> = inner
                .objects
                .iter()
                .filter(|(_, o)| o.expires_ms.is_some_and(|at| at <= now_ms))
                .map(|(k, _)| k.clone())
                .collect();
            for key in &expired {
                inner.remove_object(key);
            }
            let objects = &inner.objects;
            inner.chunks.retain(|(key, _), (at, _)| objects.contains_key(key) || *at > now_ms - ORPHAN_CHUNKS_MS);
            Ok(expired.len() as u64)
        }))
    }

    fn erase_objects(&self, user_tag: String) -> StoreFuture<'_, u64> {
        ready(self.with(|inner| {
            let theirs: Vec<ObjectKey> = inner
                .objects
                .iter()
                .filter(|(_, o)| o.user_tag.as_deref() == Some(user_tag.as_str()))
                .map(|(k, _)| k.clone())
                .collect();
            for key in &theirs {
                inner.remove_object(key);
            }
            Ok(theirs.len() as u64)
        }))
    }

    fn object_bytes(&self, owner: String, now_ms: i64) -> StoreFuture<'_, u64> {
        ready(self.with(|inner| {
            Ok(inner
                .objects
                .values()
                .filter(|o| o.owner == owner && o.expires_ms.is_none_or(|at| at > now_ms))
                .map(|o| o.size)
                .sum())
        }))
    }
}

impl Inner {
    fn batch_state(&self, job: &BatchJob) -> BatchState {
        let mut counts = LineCounts::default();
        for (_, line) in self.lines.range((job.id.clone(), 0)..=(job.id.clone(), u32::MAX)) {
            counts.add(line.state, 1);
            if line.state.is_final() {
                counts.last_done_ms = counts.last_done_ms.max(Some(line.done_ms));
            }
        }
        BatchState { job: job.clone(), counts }
    }

    /// An owner's opened job.
    fn owned(&self, owner: &str, id: &str) -> Option<&BatchJob> {
        self.batches.get(id).filter(|stored| !stored.staged && stored.job.owner == owner).map(|stored| &stored.job)
    }

    fn stage(&mut self, job: BatchJob) -> Result<(), StoreError> {
        if self.batches.contains_key(&job.id) {
            return Err(StoreError::Conflict(format!("batch {} exists", job.id)));
        }
        self.batches.insert(job.id.clone(), Job { job, staged: true, bytes: 0 });
        Ok(())
    }

    fn add_lines(&mut self, id: &str, lines: Vec<QueuedLine>) -> Result<(), StoreError> {
        let stored = self.batches.get_mut(id).filter(|stored| stored.staged).ok_or(StoreError::NotFound)?;
        for line in lines {
            stored.bytes += line.body.len() as u64;
            let kept = Line {
                custom_id: line.custom_id,
                body: line.body,
                state: LineState::Pending,
                not_before: 0,
                worker: None,
                attempt: 0,
                lease_until: 0,
                status: 0,
                result: Vec::new(),
                done_ms: 0,
            };
            self.lines.insert((id.to_owned(), line.index), kept);
        }
        Ok(())
    }

    fn open(&mut self, id: &str, total: u32) -> bool {
        match self.batches.get_mut(id).filter(|stored| stored.staged) {
            Some(stored) => {
                stored.staged = false;
                stored.job.total = total;
                true
            }
            None => false,
        }
    }

    fn remove_batch(&mut self, id: &str) {
        self.batches.remove(id);
        let lines: Vec<(String, u32)> =
            self.lines.range((id.to_owned(), 0)..=(id.to_owned(), u32::MAX)).map(|(k, _)| k.clone()).collect();
        for line in lines {
            self.lines.remove(&line);
        }
    }
}

impl BatchQueue for MemoryStore {
    fn submit_batch(&self, job: BatchJob, lines: Vec<QueuedLine>) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            let (id, total) = (job.id.clone(), job.total);
            inner.stage(job)?;
            inner.add_lines(&id, lines)?;
            inner.open(&id, total);
            Ok(())
        }))
    }

    fn stage_batch(&self, job: BatchJob) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| inner.stage(job)))
    }

    fn stage_lines(&self, id: String, lines: Vec<QueuedLine>) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| inner.add_lines(&id, lines)))
    }

    fn open_batch(&self, id: String, total: u32) -> StoreFuture<'_, bool> {
        ready(self.with(|inner| Ok(inner.open(&id, total))))
    }

    fn batch(&self, owner: String, id: String) -> StoreFuture<'_, Option<BatchState>> {
        ready(self.with(|inner| Ok(inner.owned(&owner, &id).map(|job| inner.batch_state(job)))))
    }

    fn batches(&self, owner: String, limit: usize) -> StoreFuture<'_, Vec<BatchState>> {
        ready(self.with(|inner| {
            let mut jobs: Vec<&BatchJob> = inner
                .batches
                .values()
                .filter(|stored| !stored.staged && stored.job.owner == owner)
                .map(|stored| &stored.job)
                .collect();
            jobs.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then_with(|| b.id.cmp(&a.id)));
            Ok(jobs.into_iter().take(limit).map(|job| inner.batch_state(job)).collect())
        }))
    }

    fn cancel_batch(&self, owner: String, id: String, now_ms: i64) -> StoreFuture<'_, Option<BatchState>> {
        ready(self.with(|inner| {
            let Some(stored) = inner.batches.get_mut(&id).filter(|s| !s.staged && s.job.owner == owner) else {
                return Ok(None);
            };
            stored.job.cancelled_ms.get_or_insert(now_ms);
            for (_, line) in inner.lines.range_mut((id.clone(), 0)..=(id.clone(), u32::MAX)) {
                if line.state == LineState::Pending {
                    line.state = LineState::Cancelled;
                    line.done_ms = now_ms;
                }
            }
            Ok(inner.owned(&owner, &id).map(|job| inner.batch_state(job)))
        }))
    }

    fn claim_lines(
        &self,
        worker: String,
        now_ms: i64,
        lease_ms: i64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<ClaimedLine>> {
        ready(self.with(|inner| {
            let mut jobs: Vec<BatchJob> =
                inner.batches.values().filter(|stored| !stored.staged).map(|stored| stored.job.clone()).collect();
            jobs.sort_by(|a, b| a.created_ms.cmp(&b.created_ms).then_with(|| a.id.cmp(&b.id)));
            // Each owner's claimable lines, oldest job first, at most `limit`.
            let mut open: BTreeMap<String, Vec<(usize, u32)>> = BTreeMap::new();
            for (at, job) in jobs.iter().enumerate() {
                let lines = inner.lines.range_mut((job.id.clone(), 0)..=(job.id.clone(), u32::MAX));
                if job.cancelled_ms.is_some() {
                    // A cancelled job's line whose claimer died never runs again.
                    for (_, line) in lines {
                        if line.state == LineState::Running && line.lease_until < now_ms {
                            line.state = LineState::Cancelled;
                            line.done_ms = now_ms;
                        }
                    }
                    continue;
                }
                let expired = job.expires_ms <= now_ms;
                let rests = inner.owners.get(&job.owner).is_some_and(|turn| turn.rest_until > now_ms);
                let theirs = open.entry(job.owner.clone()).or_default();
                for ((_, index), line) in lines {
                    let claimable = (line.state == LineState::Pending && line.not_before <= now_ms)
                        || (line.state == LineState::Running && line.lease_until < now_ms);
                    if expired && (line.state == LineState::Pending || claimable) {
                        line.state = LineState::Expired;
                        line.done_ms = now_ms;
                    } else if claimable && !rests && theirs.len() < limit {
                        theirs.push((at, *index));
                    }
                }
            }
            // Owners least recently served first; one line each a round.
            let mut owners: Vec<(i64, String)> = open
                .iter()
                .filter(|(_, lines)| !lines.is_empty())
                .map(|(owner, _)| (inner.owners.get(owner).map_or(0, |turn| turn.turn), owner.clone()))
                .collect();
            owners.sort();
            let mut picked = Vec::new();
            'rounds: for round in 0..limit {
                for (_, owner) in &owners {
                    if picked.len() == limit {
                        break 'rounds;
                    }
                    if let Some(&(at, index)) = open[owner].get(round) {
                        picked.push((at, index));
                    }
                }
            }
            let mut claimed = Vec::with_capacity(picked.len());
            for (at, index) in picked {
                let job = &jobs[at];
                let Some(line) = inner.lines.get_mut(&(job.id.clone(), index)) else { continue };
                line.state = LineState::Running;
                line.worker = Some(worker.clone());
                line.attempt += 1;
                line.lease_until = now_ms + lease_ms;
                claimed.push(ClaimedLine {
                    batch: job.id.clone(),
                    owner: job.owner.clone(),
                    endpoint: job.endpoint.clone(),
                    index,
                    custom_id: line.custom_id.clone(),
                    body: line.body.clone(),
                    attempt: line.attempt,
                });
            }
            let last = inner.owners.values().map(|turn| turn.turn).max().unwrap_or(0);
            for (n, owner) in crate::kept::served(&claimed).into_iter().enumerate() {
                inner.owners.entry(owner.to_owned()).or_default().turn = last + 1 + n as i64;
            }
            Ok(claimed)
        }))
    }

    fn renew_lines(&self, worker: String, now_ms: i64, lease_ms: i64) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            for line in inner.lines.values_mut() {
                if line.state == LineState::Running && line.worker.as_deref() == Some(worker.as_str()) {
                    line.lease_until = now_ms + lease_ms;
                }
            }
            Ok(())
        }))
    }

    fn finish_line(&self, worker: String, batch: String, attempt: u32, outcome: LineOutcome) -> StoreFuture<'_, bool> {
        ready(self.with(|inner| {
            let Some(line) = inner.lines.get_mut(&(batch, outcome.index)) else { return Ok(false) };
            if line.state != LineState::Running
                || line.worker.as_deref() != Some(worker.as_str())
                || line.attempt != attempt
            {
                return Ok(false);
            }
            line.state = outcome.state;
            line.status = outcome.status;
            line.result = outcome.body;
            line.done_ms = outcome.done_ms;
            Ok(true)
        }))
    }

    fn release_line(
        &self,
        worker: String,
        batch: String,
        index: u32,
        attempt: u32,
        not_before_ms: i64,
    ) -> StoreFuture<'_, bool> {
        ready(self.with(|inner| {
            let Some(owner) = inner.batches.get(&batch).map(|stored| stored.job.owner.clone()) else {
                return Ok(false);
            };
            let Some(line) = inner.lines.get_mut(&(batch, index)) else { return Ok(false) };
            if line.state != LineState::Running
                || line.worker.as_deref() != Some(worker.as_str())
                || line.attempt != attempt
            {
                return Ok(false);
            }
            line.state = LineState::Pending;
            line.worker = None;
            line.lease_until = 0;
            line.not_before = not_before_ms;
            let turn = inner.owners.entry(owner).or_default();
            turn.rest_until = turn.rest_until.max(not_before_ms);
            Ok(true)
        }))
    }

    fn line_outcomes(&self, owner: String, id: String) -> StoreFuture<'_, Vec<LineOutcome>> {
        ready(self.with(|inner| {
            if inner.owned(&owner, &id).is_none() {
                return Ok(Vec::new());
            }
            Ok(inner
                .lines
                .range((id.clone(), 0)..=(id.clone(), u32::MAX))
                .filter(|(_, line)| line.state.is_final())
                .map(|((_, index), line)| LineOutcome {
                    index: *index,
                    custom_id: line.custom_id.clone(),
                    state: line.state,
                    status: line.status,
                    body: line.result.clone(),
                    done_ms: line.done_ms,
                })
                .collect())
        }))
    }

    fn delete_batch(&self, owner: String, id: String) -> StoreFuture<'_, bool> {
        ready(self.with(|inner| {
            if inner.owned(&owner, &id).is_none() {
                return Ok(false);
            }
            inner.remove_batch(&id);
            Ok(true)
        }))
    }

    fn batch_bytes(&self, owner: String) -> StoreFuture<'_, u64> {
        ready(self.with(|inner| {
            Ok(inner.batches.values().filter(|stored| stored.job.owner == owner).map(|stored| stored.bytes).sum())
        }))
    }

    fn purge_batches(&self, now_ms: i64) -> StoreFuture<'_, u64> {
        ready(self.with(|inner| {
            let abandoned: Vec<String> = inner
                .batches
                .values()
                .filter(|stored| stored.staged && stored.job.created_ms <= now_ms - STAGED_BATCH_MS)
                .map(|stored| stored.job.id.clone())
                .collect();
            for id in &abandoned {
                inner.remove_batch(id);
            }
            let batches = &inner.batches;
            inner.owners.retain(|owner, _| batches.values().any(|stored| stored.job.owner == *owner));
            Ok(abandoned.len() as u64)
        }))
    }
}
