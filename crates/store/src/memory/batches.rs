//! Batch jobs and their lines ([`BatchQueue`]): staging, leases, claims
//! and outcomes.

use std::collections::BTreeMap;

use super::{ready, Inner, Job, Line, MemoryStore};
use crate::kept::{
    BatchJob, BatchQueue, BatchState, ClaimedLine, LineCounts, LineOutcome, LineState, QueuedLine, STAGED_BATCH_MS,
};
use crate::{StoreError, StoreFuture};

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
