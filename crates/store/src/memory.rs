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
    ObjectStore, QueuedLine,
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
    /// Files and stored responses.
    objects: BTreeMap<(ObjectKind, String, String), KeptObject>,
    object_order: std::collections::VecDeque<(ObjectKind, String, String)>,
    /// Batch jobs by id, and their lines by (job, index).
    batches: BTreeMap<String, BatchJob>,
    lines: BTreeMap<(String, u32), Line>,
}

/// A batch line as the memory store holds it.
struct Line {
    custom_id: String,
    body: Vec<u8>,
    state: LineState,
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
    tokens.input += more.input;
    tokens.output += more.output;
    tokens.cache_read += more.cache_read;
    tokens.cache_write += more.cache_write;
    tokens.units += more.units;
    tokens.requests += more.requests;
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

impl ObjectStore for MemoryStore {
    fn put_object(&self, object: KeptObject) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            let key = (object.kind, object.owner.clone(), object.id.clone());
            if inner.objects.insert(key.clone(), object).is_none() {
                inner.object_order.push_back(key);
            }
            while inner.objects.len() > MEMORY_OBJECTS {
                let Some(oldest) = inner.object_order.pop_front() else { break };
                inner.objects.remove(&oldest);
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
        ready(self.with(|inner| Ok(inner.objects.remove(&(kind, owner, id)).is_some())))
    }

    fn purge_objects(&self, now_ms: i64) -> StoreFuture<'_, u64> {
        ready(self.with(|inner| {
            let before = inner.objects.len();
            inner.objects.retain(|_, o| o.expires_ms.is_none_or(|at| at > now_ms));
            Ok((before - inner.objects.len()) as u64)
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

    fn owned(&self, owner: &str, id: &str) -> Option<&BatchJob> {
        self.batches.get(id).filter(|job| job.owner == owner)
    }
}

impl BatchQueue for MemoryStore {
    fn submit_batch(&self, job: BatchJob, lines: Vec<QueuedLine>) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            if inner.batches.contains_key(&job.id) {
                return Err(StoreError::Conflict(format!("batch {} exists", job.id)));
            }
            for line in lines {
                let stored = Line {
                    custom_id: line.custom_id,
                    body: line.body,
                    state: LineState::Pending,
                    worker: None,
                    attempt: 0,
                    lease_until: 0,
                    status: 0,
                    result: Vec::new(),
                    done_ms: 0,
                };
                inner.lines.insert((job.id.clone(), line.index), stored);
            }
            inner.batches.insert(job.id.clone(), job);
            Ok(())
        }))
    }

    fn batch(&self, owner: String, id: String) -> StoreFuture<'_, Option<BatchState>> {
        ready(self.with(|inner| Ok(inner.owned(&owner, &id).map(|job| inner.batch_state(job)))))
    }

    fn batches(&self, owner: String, limit: usize) -> StoreFuture<'_, Vec<BatchState>> {
        ready(self.with(|inner| {
            let mut jobs: Vec<&BatchJob> = inner.batches.values().filter(|job| job.owner == owner).collect();
            jobs.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then_with(|| b.id.cmp(&a.id)));
            Ok(jobs.into_iter().take(limit).map(|job| inner.batch_state(job)).collect())
        }))
    }

    fn cancel_batch(&self, owner: String, id: String, now_ms: i64) -> StoreFuture<'_, Option<BatchState>> {
        ready(self.with(|inner| {
            let Some(job) = inner.batches.get_mut(&id).filter(|job| job.owner == owner) else { return Ok(None) };
            job.cancelled_ms.get_or_insert(now_ms);
            for (_, line) in inner.lines.range_mut((id.clone(), 0)..=(id.clone(), u32::MAX)) {
                if line.state == LineState::Pending {
                    line.state = LineState::Cancelled;
                    line.done_ms = now_ms;
                }
            }
            Ok(inner.batches.get(&id).map(|job| inner.batch_state(job)))
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
            let mut jobs: Vec<BatchJob> = inner.batches.values().cloned().collect();
            jobs.sort_by(|a, b| a.created_ms.cmp(&b.created_ms).then_with(|| a.id.cmp(&b.id)));
            let mut claimed = Vec::new();
            for job in jobs {
                if job.cancelled_ms.is_some() {
                    // A cancelled job's line whose claimer died never runs again.
                    for (_, line) in inner.lines.range_mut((job.id.clone(), 0)..=(job.id.clone(), u32::MAX)) {
                        if line.state == LineState::Running && line.lease_until < now_ms {
                            line.state = LineState::Cancelled;
                            line.done_ms = now_ms;
                        }
                    }
                    continue;
                }
                let expired = job.expires_ms <= now_ms;
                for ((_, index), line) in inner.lines.range_mut((job.id.clone(), 0)..=(job.id.clone(), u32::MAX)) {
                    let open = line.state == LineState::Pending
                        || (line.state == LineState::Running && line.lease_until < now_ms);
                    if !open {
                        continue;
                    }
                    if expired {
                        line.state = LineState::Expired;
                        line.done_ms = now_ms;
                        continue;
                    }
                    if claimed.len() == limit {
                        break;
                    }
                    line.state = LineState::Running;
                    line.worker = Some(worker.clone());
                    line.attempt += 1;
                    line.lease_until = now_ms + lease_ms;
                    claimed.push(ClaimedLine {
                        batch: job.id.clone(),
                        owner: job.owner.clone(),
                        endpoint: job.endpoint.clone(),
                        index: *index,
                        custom_id: line.custom_id.clone(),
                        body: line.body.clone(),
                        attempt: line.attempt,
                    });
                }
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
            inner.batches.remove(&id);
            inner.lines.retain(|(batch, _), _| *batch != id);
            Ok(true)
        }))
    }
}
