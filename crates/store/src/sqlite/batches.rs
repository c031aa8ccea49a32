//! Batch jobs and their lines ([`BatchQueue`]): staging, leases, claims
//! and outcomes.

use rusqlite::{params, Connection, OptionalExtension};

use super::{conflict_or_unavailable, unavailable, SqliteStore};
use crate::kept::{
    BatchJob, BatchQueue, BatchState, ClaimedLine, LineCounts, LineOutcome, LineState, QueuedLine, STAGED_BATCH_MS,
};
use crate::{StoreError, StoreFuture};

const BATCH_COLUMNS: &str = "id, owner, shape, endpoint, created_ms, expires_ms, cancelled_ms, total, meta";

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
    let mut query = conn
        .prepare_cached("SELECT state, COUNT(*), MAX(done_ms) FROM batch_lines WHERE batch = ?1 GROUP BY state")
        .map_err(unavailable)?;
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
        .prepare_cached(&format!("SELECT {BATCH_COLUMNS} FROM batches WHERE id = ?1 AND owner = ?2 AND staged = 0"))
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
        &format!("INSERT INTO batches ({BATCH_COLUMNS}, staged) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 1)"),
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
        .prepare_cached("UPDATE batches SET bytes = bytes + ?2 WHERE id = ?1 AND staged = 1")
        .map_err(unavailable)?
        .execute(params![id, i64::try_from(bytes).unwrap_or(i64::MAX)])
        .map_err(unavailable)?;
    if staged == 0 {
        return Err(StoreError::NotFound);
    }
    let mut insert = tx
        .prepare_cached("INSERT INTO batch_lines (batch, idx, custom_id, body) VALUES (?1, ?2, ?3, ?4)")
        .map_err(unavailable)?;
    for line in lines {
        insert.execute(params![id, line.index, line.custom_id, line.body]).map_err(conflict_or_unavailable)?;
    }
    Ok(())
}

/// Opens staged job `id` in `tx`; whether it was staged.
fn open(tx: &rusqlite::Transaction<'_>, id: &str, total: u32) -> Result<bool, StoreError> {
    let opened = tx
        .prepare_cached("UPDATE batches SET staged = 0, total = ?2 WHERE id = ?1 AND staged = 1")
        .map_err(unavailable)?
        .execute(params![id, total])
        .map_err(unavailable)?;
    Ok(opened > 0)
}

/// Each owner with a claimable line, one line each a round (the owner
/// served least recently first, an owner's oldest job first): the first
/// `?2` of them at `?1`.
const CLAIMABLE: &str = "WITH open AS ( \
       SELECT l.batch, l.idx, b.owner, \
         ROW_NUMBER() OVER (PARTITION BY b.owner ORDER BY b.created_ms, l.batch, l.idx) AS nth \
       FROM batch_lines l JOIN batches b ON b.id = l.batch LEFT JOIN batch_owners o ON o.owner = b.owner \
       WHERE ((l.state = 0 AND l.not_before <= ?1) OR (l.state = 1 AND l.lease_until < ?1)) \
         AND b.cancelled_ms IS NULL AND b.staged = 0 AND COALESCE(o.rest_until, 0) <= ?1) \
     SELECT open.batch, open.owner, b.endpoint, open.idx, l.custom_id, l.body, l.attempt \
     FROM open JOIN batches b ON b.id = open.batch JOIN batch_lines l ON l.batch = open.batch AND l.idx = open.idx \
       LEFT JOIN batch_owners o ON o.owner = open.owner \
     WHERE open.nth <= ?2 \
     ORDER BY open.nth, COALESCE(o.turn, 0), open.owner LIMIT ?2";

/// The owners a claim served, in the order it first served them: each
/// takes a turn after every turn taken so far.
fn take_turns(tx: &rusqlite::Transaction<'_>, claimed: &[ClaimedLine]) -> Result<(), StoreError> {
    let last: i64 =
        tx.query_row("SELECT COALESCE(MAX(turn), 0) FROM batch_owners", [], |row| row.get(0)).map_err(unavailable)?;
    let mut turn = tx
        .prepare_cached(
            "INSERT INTO batch_owners (owner, turn) VALUES (?1, ?2) \
             ON CONFLICT (owner) DO UPDATE SET turn = excluded.turn",
        )
        .map_err(unavailable)?;
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
                let mut query = conn
                    .prepare_cached(&format!(
                        "SELECT {BATCH_COLUMNS} FROM batches WHERE owner = ?1 AND staged = 0 \
                         ORDER BY created_ms DESC, id DESC LIMIT ?2"
                    ))
                    .map_err(unavailable)?;
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
                .execute(
                    "UPDATE batches SET cancelled_ms = COALESCE(cancelled_ms, ?3) \
                     WHERE id = ?1 AND owner = ?2 AND staged = 0",
                    params![id, owner, now_ms],
                )
                .map_err(unavailable)?;
            if changed > 0 {
                tx.execute(
                    "UPDATE batch_lines SET state = ?2, done_ms = ?3 WHERE batch = ?1 AND state = ?4",
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
            tx.execute(
                "UPDATE batch_lines SET state = ?1, done_ms = ?2 WHERE (state = 0 OR (state = 1 AND lease_until < ?2)) \
                 AND batch IN (SELECT id FROM batches WHERE expires_ms <= ?2 AND cancelled_ms IS NULL AND staged = 0)",
                params![LineState::Expired.code(), now_ms],
            )
            .map_err(unavailable)?;
            // A cancelled job's line whose claimer died never runs again.
            tx.execute(
                "UPDATE batch_lines SET state = ?1, done_ms = ?2 WHERE state = 1 AND lease_until < ?2 \
                 AND batch IN (SELECT id FROM batches WHERE cancelled_ms IS NOT NULL)",
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
                let mut claim = tx
                    .prepare_cached(
                        "UPDATE batch_lines SET state = 1, worker = ?3, attempt = ?4, lease_until = ?5 \
                         WHERE batch = ?1 AND idx = ?2",
                    )
                    .map_err(unavailable)?;
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
            conn.execute(
                "UPDATE batch_lines SET lease_until = ?2 WHERE state = 1 AND worker = ?1",
                params![worker, now_ms + lease_ms],
            )
            .map_err(unavailable)?;
            Ok(())
        })
    }

    fn finish_line(&self, worker: String, batch: String, attempt: u32, outcome: LineOutcome) -> StoreFuture<'_, bool> {
        self.run(move |conn| {
            let changed = conn
                .execute(
                    "UPDATE batch_lines SET state = ?5, status = ?6, result = ?7, done_ms = ?8 \
                     WHERE batch = ?1 AND idx = ?2 AND state = 1 AND worker = ?3 AND attempt = ?4",
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
                    "UPDATE batch_lines SET state = 0, worker = NULL, lease_until = 0, not_before = ?5 \
                     WHERE batch = ?1 AND idx = ?2 AND state = 1 AND worker = ?3 AND attempt = ?4",
                    params![batch, index, worker, attempt, not_before_ms],
                )
                .map_err(unavailable)?;
            if released > 0 {
                tx.execute(
                    "INSERT INTO batch_owners (owner, rest_until) SELECT owner, ?2 FROM batches WHERE id = ?1 \
                     ON CONFLICT (owner) DO UPDATE SET rest_until = MAX(rest_until, excluded.rest_until)",
                    params![batch, not_before_ms],
                )
                .map_err(unavailable)?;
            }
            tx.commit().map_err(unavailable)?;
            Ok(released > 0)
        })
    }

    fn line_outcomes(&self, owner: String, id: String) -> StoreFuture<'_, Vec<LineOutcome>> {
        self.run(move |conn| {
            let mut query = conn
                .prepare_cached(
                    "SELECT l.idx, l.custom_id, l.state, l.status, l.result, l.done_ms FROM batch_lines l \
                     JOIN batches b ON b.id = l.batch \
                     WHERE l.batch = ?1 AND b.owner = ?2 AND b.staged = 0 AND l.state >= 2 ORDER BY l.idx",
                )
                .map_err(unavailable)?;
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
                .execute("DELETE FROM batches WHERE id = ?1 AND owner = ?2 AND staged = 0", params![id, owner])
                .map_err(unavailable)?;
            if removed > 0 {
                tx.execute("DELETE FROM batch_lines WHERE batch = ?1", params![id]).map_err(unavailable)?;
            }
            tx.commit().map_err(unavailable)?;
            Ok(removed > 0)
        })
    }

    fn batch_bytes(&self, owner: String) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            let bytes: i64 = conn
                .prepare_cached("SELECT COALESCE(SUM(bytes), 0) FROM batches WHERE owner = ?1")
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
            tx.execute(
                "DELETE FROM batch_lines WHERE batch IN (SELECT id FROM batches WHERE staged = 1 AND created_ms <= ?1)",
                params![before],
            )
            .map_err(unavailable)?;
            let removed = tx
                .execute("DELETE FROM batches WHERE staged = 1 AND created_ms <= ?1", params![before])
                .map_err(unavailable)?;
            tx.execute("DELETE FROM batch_owners WHERE owner NOT IN (SELECT owner FROM batches)", [])
                .map_err(unavailable)?;
            tx.commit().map_err(unavailable)?;
            Ok(removed as u64)
        })
    }
}
