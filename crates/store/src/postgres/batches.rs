//! Batch jobs and their lines ([`BatchQueue`]): staging, leases, claims
//! and outcomes.

use super::{col, conflict_or_unavailable, int, unavailable, PostgresStore};
use crate::kept::{
    BatchJob, BatchQueue, BatchState, ClaimedLine, LineCounts, LineOutcome, LineState, QueuedLine, STAGED_BATCH_MS,
};
use crate::{StoreError, StoreFuture};

fn batch_job(row: &tokio_postgres::Row) -> Result<BatchJob, StoreError> {
    Ok(BatchJob {
        id: col(row, 0)?,
        owner: col(row, 1)?,
        shape: col(row, 2)?,
        endpoint: col(row, 3)?,
        created_ms: col(row, 4)?,
        expires_ms: col(row, 5)?,
        cancelled_ms: col(row, 6)?,
        total: u32::try_from(col::<i32>(row, 7)?).unwrap_or(0),
        meta: col(row, 8)?,
    })
}

async fn line_counts(client: &impl deadpool_postgres::GenericClient, id: &str) -> Result<LineCounts, StoreError> {
    let rows = client.query(include_str!("batches/line_counts.sql"), &[&id]).await.map_err(unavailable)?;
    let mut counts = LineCounts::default();
    for row in &rows {
        let state = LineState::from_code(i64::from(col::<i16>(row, 0)?));
        counts.add(state, u32::try_from(col::<i64>(row, 1)?).unwrap_or(u32::MAX));
        if state.is_final() {
            counts.last_done_ms = counts.last_done_ms.max(col::<Option<i64>>(row, 2)?);
        }
    }
    Ok(counts)
}

async fn owned_batch(
    client: &impl deadpool_postgres::GenericClient,
    owner: &str,
    id: &str,
) -> Result<Option<BatchState>, StoreError> {
    let row = client.query_opt(include_str!("batches/owned_batch.sql"), &[&id, &owner]).await.map_err(unavailable)?;
    let Some(row) = row else { return Ok(None) };
    let job = batch_job(&row)?;
    Ok(Some(BatchState { counts: line_counts(client, &job.id).await?, job }))
}

fn state_code(state: LineState) -> i16 {
    state.code() as i16
}

/// Stages `job` in `tx`.
async fn stage(tx: &deadpool_postgres::Transaction<'_>, job: &BatchJob) -> Result<(), StoreError> {
    let total = i32::try_from(job.total).unwrap_or(i32::MAX);
    tx.execute(
        include_str!("batches/stage.sql"),
        &[
            &job.id,
            &job.owner,
            &job.shape,
            &job.endpoint,
            &job.created_ms,
            &job.expires_ms,
            &job.cancelled_ms,
            &total,
            &job.meta,
        ],
    )
    .await
    .map_err(conflict_or_unavailable)?;
    Ok(())
}

/// Adds `lines` to staged job `id` in `tx`.
async fn add_lines(
    tx: &deadpool_postgres::Transaction<'_>,
    id: &str,
    lines: Vec<QueuedLine>,
) -> Result<(), StoreError> {
    let bytes: u64 = lines.iter().map(|line| line.body.len() as u64).sum();
    let staged = tx
        .execute(
            include_str!("batches/add_lines_update_batches.sql"),
            &[&id, &i64::try_from(bytes).unwrap_or(i64::MAX)],
        )
        .await
        .map_err(unavailable)?;
    if staged == 0 {
        return Err(StoreError::NotFound);
    }
    let mut indexes = Vec::with_capacity(lines.len());
    let mut custom_ids = Vec::with_capacity(lines.len());
    let mut bodies = Vec::with_capacity(lines.len());
    for line in lines {
        indexes.push(int(line.index));
        custom_ids.push(line.custom_id);
        bodies.push(line.body);
    }
    tx.execute(include_str!("batches/add_lines_insert_batch_lines.sql"), &[&id, &indexes, &custom_ids, &bodies])
        .await
        .map_err(conflict_or_unavailable)?;
    Ok(())
}

/// Opens staged job `id` in `tx`; whether it was staged.
async fn open(tx: &deadpool_postgres::Transaction<'_>, id: &str, total: u32) -> Result<bool, StoreError> {
    let opened = tx.execute(include_str!("batches/open.sql"), &[&id, &int(total)]).await.map_err(unavailable)?;
    Ok(opened > 0)
}

impl BatchQueue for PostgresStore {
    fn submit_batch(&self, job: BatchJob, lines: Vec<QueuedLine>) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            stage(&tx, &job).await?;
            add_lines(&tx, &job.id, lines).await?;
            open(&tx, &job.id, job.total).await?;
            tx.commit().await.map_err(unavailable)
        })
    }

    fn stage_batch(&self, job: BatchJob) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            stage(&tx, &job).await?;
            tx.commit().await.map_err(unavailable)
        })
    }

    fn stage_lines(&self, id: String, lines: Vec<QueuedLine>) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            add_lines(&tx, &id, lines).await?;
            tx.commit().await.map_err(unavailable)
        })
    }

    fn open_batch(&self, id: String, total: u32) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            let opened = open(&tx, &id, total).await?;
            tx.commit().await.map_err(unavailable)?;
            Ok(opened)
        })
    }

    fn batch(&self, owner: String, id: String) -> StoreFuture<'_, Option<BatchState>> {
        Box::pin(async move {
            let client = self.client().await?;
            owned_batch(&client, &owner, &id).await
        })
    }

    fn batches(&self, owner: String, limit: usize) -> StoreFuture<'_, Vec<BatchState>> {
        Box::pin(async move {
            let client = self.client().await?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows =
                client.query(include_str!("batches/batches.sql"), &[&owner, &limit]).await.map_err(unavailable)?;
            let mut states = Vec::with_capacity(rows.len());
            for row in &rows {
                let job = batch_job(row)?;
                states.push(BatchState { counts: line_counts(&client, &job.id).await?, job });
            }
            Ok(states)
        })
    }

    fn cancel_batch(&self, owner: String, id: String, now_ms: i64) -> StoreFuture<'_, Option<BatchState>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            let changed = tx
                .execute(include_str!("batches/cancel_batch_update_batches.sql"), &[&id, &owner, &now_ms])
                .await
                .map_err(unavailable)?;
            if changed > 0 {
                tx.execute(
                    include_str!("batches/cancel_batch_update_batch_lines.sql"),
                    &[&id, &state_code(LineState::Cancelled), &now_ms, &state_code(LineState::Pending)],
                )
                .await
                .map_err(unavailable)?;
            }
            let state = owned_batch(&tx, &owner, &id).await?;
            tx.commit().await.map_err(unavailable)?;
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
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            tx.execute(include_str!("batches/claim_lines_expire.sql"), &[&state_code(LineState::Expired), &now_ms])
                .await
                .map_err(unavailable)?;
            // A cancelled job's line whose claimer died never runs again.
            tx.execute(
                include_str!("batches/claim_lines_abandon_cancelled.sql"),
                &[&state_code(LineState::Cancelled), &now_ms],
            )
            .await
            .map_err(unavailable)?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let until = now_ms.saturating_add(lease_ms);
            // Owners take turns: each owner's claimable lines ranked, one a
            // round, the owner served least recently first. Instances claim
            // side by side: a line another transaction holds is skipped,
            // never waited for (and checked again once locked).
            let rows = tx
                .query(include_str!("batches/claim_lines_lease.sql"), &[&now_ms, &limit, &worker, &until])
                .await
                .map_err(unavailable)?;
            let mut ranked = rows
                .iter()
                .map(|row| {
                    let line = ClaimedLine {
                        batch: col(row, 0)?,
                        owner: col(row, 1)?,
                        endpoint: col(row, 2)?,
                        index: u32::try_from(col::<i32>(row, 3)?).unwrap_or(0),
                        custom_id: col(row, 4)?,
                        body: col(row, 5)?,
                        attempt: u32::try_from(col::<i32>(row, 6)?).unwrap_or(0),
                    };
                    Ok(((col::<i64>(row, 7)?, col::<i64>(row, 8)?), line))
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            // The order the claim served them in: its turns follow it.
            ranked.sort_by(|(a, x), (b, y)| a.cmp(b).then_with(|| x.owner.cmp(&y.owner)));
            let claimed: Vec<ClaimedLine> = ranked.into_iter().map(|(_, line)| line).collect();
            let served: Vec<&str> = crate::kept::served(&claimed);
            if !served.is_empty() {
                tx.execute(include_str!("batches/claim_lines_insert_batch_owners.sql"), &[&served])
                    .await
                    .map_err(unavailable)?;
            }
            tx.commit().await.map_err(unavailable)?;
            Ok(claimed)
        })
    }

    fn renew_lines(&self, worker: String, now_ms: i64, lease_ms: i64) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            let until = now_ms.saturating_add(lease_ms);
            client.execute(include_str!("batches/renew_lines.sql"), &[&worker, &until]).await.map_err(unavailable)?;
            Ok(())
        })
    }

    fn finish_line(&self, worker: String, batch: String, attempt: u32, outcome: LineOutcome) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            let client = self.client().await?;
            let index = int(outcome.index);
            let attempt = int(attempt);
            let status = i32::from(outcome.status);
            let changed = client
                .execute(
                    include_str!("batches/finish_line.sql"),
                    &[
                        &batch,
                        &index,
                        &worker,
                        &attempt,
                        &state_code(outcome.state),
                        &status,
                        &outcome.body,
                        &outcome.done_ms,
                    ],
                )
                .await
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
        Box::pin(async move {
            let client = self.client().await?;
            let released = client
                .execute(
                    include_str!("batches/release_line.sql"),
                    &[&batch, &int(index), &worker, &int(attempt), &not_before_ms],
                )
                .await
                .map_err(unavailable)?;
            Ok(released > 0)
        })
    }

    fn line_outcomes(&self, owner: String, id: String) -> StoreFuture<'_, Vec<LineOutcome>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows =
                client.query(include_str!("batches/line_outcomes.sql"), &[&id, &owner]).await.map_err(unavailable)?;
            rows.iter()
                .map(|row| {
                    Ok(LineOutcome {
                        index: u32::try_from(col::<i32>(row, 0)?).unwrap_or(0),
                        custom_id: col(row, 1)?,
                        state: LineState::from_code(i64::from(col::<i16>(row, 2)?)),
                        status: u16::try_from(col::<i32>(row, 3)?).unwrap_or(0),
                        body: col::<Option<Vec<u8>>>(row, 4)?.unwrap_or_default(),
                        done_ms: col(row, 5)?,
                    })
                })
                .collect()
        })
    }

    fn delete_batch(&self, owner: String, id: String) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            let client = self.client().await?;
            let removed =
                client.execute(include_str!("batches/delete_batch.sql"), &[&id, &owner]).await.map_err(unavailable)?;
            Ok(removed > 0)
        })
    }

    fn batch_bytes(&self, owner: String) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            let row =
                client.query_one(include_str!("batches/batch_bytes.sql"), &[&owner]).await.map_err(unavailable)?;
            Ok(u64::try_from(col::<i64>(&row, 0)?).unwrap_or(0))
        })
    }

    fn purge_batches(&self, now_ms: i64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            // Lines go with their job (ON DELETE CASCADE).
            let removed = tx
                .execute(include_str!("batches/purge_batches_delete_batches.sql"), &[&(now_ms - STAGED_BATCH_MS)])
                .await
                .map_err(unavailable)?;
            tx.execute(include_str!("batches/purge_batches_delete_batch_owners.sql"), &[])
                .await
                .map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)?;
            Ok(removed)
        })
    }
}
