//! Batch jobs and their lines ([`BatchQueue`]): staging, leases, claims
//! and outcomes.

use rusqlite::{params, Connection, OptionalExtension};

use super::{conflict_or_unavailable, unavailable, SqliteStore};
use crate::kept::{
    BatchJob, BatchQueue, BatchState, ClaimedLine, LineCounts, LineOutcome, LineState, QueuedLine, STAGED_BATCH_MS,
};
use crate::{StoreError, StoreFuture};

fn batch_job(row: &rusqlite::Row<'_>) -> rusqlite::Result<BatchJob> {
    Ok(BatchJob {
        id: row.get(0)?,
        owner: row.get(1)?,
        shape: row.get(2)?,
        endpoint: row.get(3)?,
        created_ms: row.get(4)?,
        expires_ms: row.get(5)?,
        cancelled_ms: row.get(6)?,
        total: row.get(7)?,
        meta: row.get(8)?,
    })
}

/// A job's lines counted by state.
fn line_counts(conn: &Connection, id: &str) -> Result<LineCounts, StoreError> {
    let mut query = conn.prepare_cached(include_str!("batches/line_counts.sql")).map_err(unavailable)?;
    let mut counts = LineCounts::default();
    let rows = query
        .query_map(params![id], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?, row.get::<_, i64>(2)?)))
        .map_err(unavailable)?;
    for row in rows {
        let (state, n, done) = row.map_err(unavailable)?;
        let state = LineState::from_code(state);
        counts.add(state, u32::try_from(n).unwrap_or(u32::MAX));
        if state.is_final() {
            counts.last_done_ms = counts.last_done_ms.max(Some(done));
        }
    }
    Ok(counts)
}

fn owned_batch(conn: &Connection, owner: &str, id: &str) -> Result<Option<BatchState>, StoreError> {
    let job = conn
        .prepare_cached(include_str!("batches/owned_batch.sql"))
        .map_err(unavailable)?
        .query_row(params![id, owner], batch_job)
        .optional()
        .map_err(unavailable)?;
    match job {
        Some(job) => Ok(Some(BatchState { counts: line_counts(conn, &job.id)?, job })),
        None => Ok(None),
    }
}

/// Stages `job` in `tx`.
fn stage(tx: &rusqlite::Transaction<'_>, job: &BatchJob) -> Result<(), StoreError> {
    tx.execute(
        include_str!("batches/stage.sql"),
        params![
            job.id,
            job.owner,
            job.shape,
            job.endpoint,
            job.created_ms,
            job.expires_ms,
            job.cancelled_ms,
            job.total,
            job.meta
        ],
    )
    .map_err(conflict_or_unavailable)?;
    Ok(())
}

/// Adds `lines` to staged job `id` in `tx`.
fn add_lines(tx: &rusqlite::Transaction<'_>, id: &str, lines: &[QueuedLine]) -> Result<(), StoreError> {
    let bytes: u64 = lines.iter().map(|line| line.body.len() as u64).sum();
    let staged = tx
        .prepare_cached(include_str!("batches/add_lines_update_batches.sql"))
        .map_err(unavailable)?
        .execute(params![id, i64::try_from(bytes).unwrap_or(i64::MAX)])
        .map_err(unavailable)?;
    if staged == 0 {
        return Err(StoreError::NotFound);
    }
    let mut insert =
        tx.prepare_cached(include_str!("batches/add_lines_insert_batch_lines.sql")).map_err(unavailable)?;
    for line in lines {
        insert.execute(params![id, line.index, line.custom_id, line.body]).map_err(conflict_or_unavailable)?;
    }
    Ok(())
}

/// Opens staged job `id` in `tx`; whether it was staged.
fn open(tx: &rusqlite::Transaction<'_>, id: &str, total: u32) -> Result<bool, StoreError> {
    let opened = tx
        .prepare_cached(include_str!("batches/open.sql"))
        .map_err(unavailable)?
        .execute(params![id, total])
        .map_err(unavailable)?;
    Ok(opened > 0)
}

/// Each owner with a claimable line, one line each a round (the owner
/// served least recently first, an owner's oldest job first): the first
/// `?2` of them at `?1`.
const CLAIMABLE: &str = include_str!("batches/claimable.sql");

/// The owners a claim served, in the order it first served them: each
/// takes a turn after every turn taken so far.
fn take_turns(tx: &rusqlite::Transaction<'_>, claimed: &[ClaimedLine]) -> Result<(), StoreError> {
    let last: i64 = tx
        .query_row(include_str!("batches/take_turns_select_batch_owners.sql"), [], |row| row.get(0))
        .map_err(unavailable)?;
    let mut turn =
        tx.prepare_cached(include_str!("batches/take_turns_insert_batch_owners.sql")).map_err(unavailable)?;
    for (n, owner) in crate::kept::served(claimed).into_iter().enumerate() {
        turn.execute(params![owner, last + 1 + n as i64]).map_err(unavailable)?;
    }
    Ok(())
}

impl BatchQueue for SqliteStore {
    fn submit_batch(&self, job: BatchJob, lines: Vec<QueuedLine>) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            stage(&tx, &job)?;
            add_lines(&tx, &job.id, &lines)?;
            open(&tx, &job.id, job.total)?;
            tx.commit().map_err(unavailable)
        })
    }

    fn stage_batch(&self, job: BatchJob) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            stage(&tx, &job)?;
            tx.commit().map_err(unavailable)
        })
    }

    fn stage_lines(&self, id: String, lines: Vec<QueuedLine>) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            add_lines(&tx, &id, &lines)?;
            tx.commit().map_err(unavailable)
        })
    }

    fn open_batch(&self, id: String, total: u32) -> StoreFuture<'_, bool> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            let opened = open(&tx, &id, total)?;
            tx.commit().map_err(unavailable)?;
            Ok(opened)
        })
    }

    fn batch(&self, owner: String, id: String) -> StoreFuture<'_, Option<BatchState>> {
        self.run(move |conn| owned_batch(conn, &owner, &id))
    }

    fn batches(&self, owner: String, limit: usize) -> StoreFuture<'_, Vec<BatchState>> {
        self.run(move |conn| {
            let jobs = {
                let mut query = conn.prepare_cached(include_str!("batches/batches.sql")).map_err(unavailable)?;
                let rows = query.query_map(params![owner, limit as i64], batch_job).map_err(unavailable)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(unavailable)?
            };
            jobs.into_iter().map(|job| Ok(BatchState { counts: line_counts(conn, &job.id)?, job })).collect()
        })
    }

    fn cancel_batch(&self, owner: String, id: String, now_ms: i64) -> StoreFuture<'_, Option<BatchState>> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            let changed = tx
                .execute(include_str!("batches/cancel_batch_update_batches.sql"), params![id, owner, now_ms])
                .map_err(unavailable)?;
            if changed > 0 {
                tx.execute(
                    include_str!("batches/cancel_batch_update_batch_lines.sql"),
                    params![id, LineState::Cancelled.code(), now_ms, LineState::Pending.code()],
                )
                .map_err(unavailable)?;
            }
            let state = owned_batch(&tx, &owner, &id)?;
            tx.commit().map_err(unavailable)?;
            Ok(state)
        })
    }

    fn claim_lines(
        &self,
        worker: String,
        now_ms: i64,
        lease_ms: i64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<ClaimedLine>> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            // Lines of expired jobs that never ran expire.
            tx.execute(include_str!("batches/claim_lines_expire.sql"), params![LineState::Expired.code(), now_ms])
                .map_err(unavailable)?;
            // A cancelled job's line whose claimer died never runs again.
            tx.execute(
                include_str!("batches/claim_lines_abandon_cancelled.sql"),
                params![LineState::Cancelled.code(), now_ms],
            )
            .map_err(unavailable)?;
            let picked = {
                let mut query = tx.prepare_cached(CLAIMABLE).map_err(unavailable)?;
                let rows = query
                    .query_map(params![now_ms, limit as i64], |row| {
                        Ok(ClaimedLine {
                            batch: row.get(0)?,
                            owner: row.get(1)?,
                            endpoint: row.get(2)?,
                            index: row.get(3)?,
                            custom_id: row.get(4)?,
                            body: row.get(5)?,
                            attempt: row.get::<_, u32>(6)?.saturating_add(1),
                        })
                    })
                    .map_err(unavailable)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(unavailable)?
            };
            {
                let mut claim =
                    tx.prepare_cached(include_str!("batches/claim_lines_lease.sql")).map_err(unavailable)?;
                for line in &picked {
                    claim
                        .execute(params![line.batch, line.index, worker, line.attempt, now_ms + lease_ms])
                        .map_err(unavailable)?;
                }
            }
            take_turns(&tx, &picked)?;
            tx.commit().map_err(unavailable)?;
            Ok(picked)
        })
    }

    fn renew_lines(&self, worker: String, now_ms: i64, lease_ms: i64) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            conn.execute(include_str!("batches/renew_lines.sql"), params![worker, now_ms + lease_ms])
                .map_err(unavailable)?;
            Ok(())
        })
    }

    fn finish_line(&self, worker: String, batch: String, attempt: u32, outcome: LineOutcome) -> StoreFuture<'_, bool> {
        self.run(move |conn| {
            let changed = conn
                .execute(
                    include_str!("batches/finish_line.sql"),
                    params![
                        batch,
                        outcome.index,
                        worker,
                        attempt,
                        outcome.state.code(),
                        outcome.status,
                        outcome.body,
                        outcome.done_ms
                    ],
                )
                .map_err(unavailable)?;
            Ok(changed > 0)
        })
    }

    fn release_line(
        &self,
        worker: String,
        batch: String,
        index: u32,
        attempt: u32,
        not_before_ms: i64,
    ) -> StoreFuture<'_, bool> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            let released = tx
                .execute(
                    include_str!("batches/release_line_update_batch_lines.sql"),
                    params![batch, index, worker, attempt, not_before_ms],
                )
                .map_err(unavailable)?;
            if released > 0 {
                tx.execute(include_str!("batches/release_line_insert_batch_owners.sql"), params![batch, not_before_ms])
                    .map_err(unavailable)?;
            }
            tx.commit().map_err(unavailable)?;
            Ok(released > 0)
        })
    }

    fn line_outcomes(&self, owner: String, id: String) -> StoreFuture<'_, Vec<LineOutcome>> {
        self.run(move |conn| {
            let mut query = conn.prepare_cached(include_str!("batches/line_outcomes.sql")).map_err(unavailable)?;
            let rows = query
                .query_map(params![id, owner], |row| {
                    Ok(LineOutcome {
                        index: row.get(0)?,
                        custom_id: row.get(1)?,
                        state: LineState::from_code(row.get(2)?),
                        status: row.get(3)?,
                        body: row.get::<_, Option<Vec<u8>>>(4)?.unwrap_or_default(),
                        done_ms: row.get(5)?,
                    })
                })
                .map_err(unavailable)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(unavailable)
        })
    }

    fn delete_batch(&self, owner: String, id: String) -> StoreFuture<'_, bool> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            let removed = tx
                .execute(include_str!("batches/delete_batch_delete_batches.sql"), params![id, owner])
                .map_err(unavailable)?;
            if removed > 0 {
                tx.execute(include_str!("batches/delete_batch_delete_batch_lines.sql"), params![id])
                    .map_err(unavailable)?;
            }
            tx.commit().map_err(unavailable)?;
            Ok(removed > 0)
        })
    }

    fn batch_bytes(&self, owner: String) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            let bytes: i64 = conn
                .prepare_cached(include_str!("batches/batch_bytes.sql"))
                .map_err(unavailable)?
                .query_row(params![owner], |row| row.get(0))
                .map_err(unavailable)?;
            Ok(bytes.max(0) as u64)
        })
    }

    fn purge_batches(&self, now_ms: i64) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            let before = now_ms - STAGED_BATCH_MS;
            tx.execute(include_str!("batches/purge_batches_delete_batch_lines.sql"), params![before])
                .map_err(unavailable)?;
            let removed = tx
                .execute(include_str!("batches/purge_batches_delete_batches.sql"), params![before])
                .map_err(unavailable)?;
            tx.execute(include_str!("batches/purge_batches_delete_batch_owners.sql"), []).map_err(unavailable)?;
            tx.commit().map_err(unavailable)?;
            Ok(removed as u64)
        })
    }
}
