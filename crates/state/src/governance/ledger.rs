//! The ledger, written behind: settled requests queue their rows in a
//! bounded channel, and one task writes them in batches every flush
//! interval (or sooner when a batch fills). A full queue makes settlement
//! wait (backpressure on the requests that produce rows) and is counted;
//! nothing is dropped. A store that fails keeps the batch and retries; a
//! fleet's writer has a spool instead (a local SQLite file): a batch
//! PostgreSQL refuses is written there at once, durable on local disk, and
//! a replay task moves spooled rows over when PostgreSQL answers again
//! (rows carry their entry id, so a replay that repeats stores nothing
//! twice). On shutdown the queue is drained and flushed; after `kill -9`,
//! at most the rows settled in the last flush interval are lost.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use switchyard_store::sqlite::SqliteStore;
use switchyard_store::{Ledger, LedgerRow, RowFilter};
use tokio::sync::mpsc;

/// A row waiting for room in a full queue ([`LedgerQueue::offer`]).
pub type Waiting = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Rows written in one transaction at most.
const BATCH: usize = 1024;

/// What the writer counts, for `/stats` and metrics.
#[derive(Debug, Default)]
pub struct LedgerStats {
    /// Rows written.
    pub written: AtomicU64,
    /// Times a settlement found the queue full and waited.
    pub queue_full: AtomicU64,
    /// Failed writes (retried).
    pub write_errors: AtomicU64,
    /// Rows written to the spool while the store was away.
    pub spooled: AtomicU64,
    /// Spooled rows moved to the store since.
    pub replayed: AtomicU64,
}

/// The sending side, held by the gateway.
#[derive(Clone)]
pub struct LedgerQueue {
    tx: mpsc::Sender<LedgerRow>,
    capacity: usize,
    /// Counters.
    pub stats: Arc<LedgerStats>,
}

impl LedgerQueue {
    /// Starts the writer over `ledger`.
    pub fn start(
        ledger: Arc<dyn Ledger>,
        capacity: usize,
        flush: Duration,
        spool: Option<SqliteStore>,
    ) -> (LedgerQueue, LedgerWriter) {
        let (tx, rx) = mpsc::channel(capacity);
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let stats = Arc::new(LedgerStats::default());
        let target = Target { ledger, spool, stats: stats.clone() };
        if target.spool.is_some() {
            tokio::spawn(replay(target.clone()));
        }
        let task = tokio::spawn(write_behind(target, rx, stopped, flush));
        (LedgerQueue { tx, capacity, stats }, LedgerWriter { stop, task })
    }

    /// Queues a row now, or, when the queue is full, hands back the wait
    /// for room. The wait is boxed so that a settlement's future, which
    /// every request carries, holds no channel send (2 KiB) for the rare
    /// full queue.
    pub fn offer(&self, row: LedgerRow) -> Option<Waiting> {
        match self.tx.try_send(row) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => None,
            Err(mpsc::error::TrySendError::Full(row)) => {
                self.stats.queue_full.fetch_add(1, Ordering::Relaxed);
                let tx = self.tx.clone();
                Some(Box::pin(async move {
                    let _ = tx.send(row).await;
                }))
            }
        }
    }

    /// Queues a row from a context that cannot wait (a drop): a full queue
    /// hands it to a task that waits instead.
    pub fn push_detached(&self, row: LedgerRow) {
        if let Err(mpsc::error::TrySendError::Full(row)) = self.tx.try_send(row) {
            self.stats.queue_full.fetch_add(1, Ordering::Relaxed);
            let tx = self.tx.clone();
            tokio::spawn(async move {
                let _ = tx.send(row).await;
            });
        }
    }

    /// Rows waiting to be written.
    pub fn depth(&self) -> usize {
        self.capacity - self.tx.capacity()
    }

    /// The most rows that can wait.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// The writer task; [`LedgerWriter::finish`] flushes what is queued and stops it.
pub struct LedgerWriter {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl LedgerWriter {
    /// Writes every row queued so far, then stops (at shutdown, once
    /// requests have drained).
    pub async fn finish(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// Where the writer puts rows: the store, and a fleet's spool.
#[derive(Clone)]
struct Target {
    ledger: Arc<dyn Ledger>,
    spool: Option<SqliteStore>,
    stats: Arc<LedgerStats>,
}

async fn write_behind(
    target: Target,
    mut rx: mpsc::Receiver<LedgerRow>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    flush: Duration,
) {
    let mut batch: Vec<LedgerRow> = Vec::with_capacity(BATCH);
    let mut closed = false;
    while !closed {
        // Wait for the first row, then gather what arrives within the flush
        // interval (or until the batch is full).
        tokio::select! {
            row = rx.recv() => match row {
                Some(row) => batch.push(row),
                None => closed = true,
            },
            _ = &mut stop => {
                // Shutdown: take what is queued now, write it, and stop.
                while let Ok(row) = rx.try_recv() {
                    batch.push(row);
                    if batch.len() == BATCH {
                        write(&target, &mut batch).await;
                    }
                }
                write(&target, &mut batch).await;
                return;
            }
        }
        let deadline = tokio::time::Instant::now() + flush;
        while !closed && batch.len() < BATCH {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(row)) => batch.push(row),
                Ok(None) => closed = true,
                Err(_) => break,
            }
        }
        write(&target, &mut batch).await;
    }
}

/// Writes `batch` to the store; when the store fails, to the spool if
/// there is one, else again with backoff until the store takes it.
async fn write(target: &Target, batch: &mut Vec<LedgerRow>) {
    if batch.is_empty() {
        return;
    }
    // Shared, not cloned: a retry or the spool takes the same rows.
    let rows: Arc<[LedgerRow]> = std::mem::take(batch).into();
    let stats = &target.stats;
    let mut backoff = Duration::from_millis(100);
    loop {
        match target.ledger.append(rows.clone()).await {
            Ok(()) => {
                stats.written.fetch_add(rows.len() as u64, Ordering::Relaxed);
                return;
            }
            Err(err) => {
                stats.write_errors.fetch_add(1, Ordering::Relaxed);
                if let Some(spool) = &target.spool {
                    match spool.append(rows.clone()).await {
                        Ok(()) => {
                            stats.spooled.fetch_add(rows.len() as u64, Ordering::Relaxed);
                            tracing::warn!(error = %err, rows = rows.len(), "ledger store unreachable; rows spooled to local disk");
                            return;
                        }
                        Err(spool_err) => {
                            tracing::warn!(error = %spool_err, "the ledger spool cannot be written either; retrying");
                        }
                    }
                }
                tracing::warn!(error = %err, rows = rows.len(), ?backoff, "ledger write failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Moves spooled rows to the store while there are any (rows a crashed
/// process left in the spool too, from its next start).
async fn replay(target: Target) {
    let Some(spool) = &target.spool else { return };
    let mut ticker = tokio::time::interval(Duration::from_millis(500));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        loop {
            let filter = RowFilter { limit: BATCH, ..RowFilter::default() };
            let Ok(stored) = spool.rows(filter).await else { break };
            if stored.is_empty() {
                break;
            }
            let ids: Vec<i64> = stored.iter().map(|s| s.id).collect();
            let rows: Vec<LedgerRow> = stored.into_iter().map(|s| s.row).collect();
            let count = rows.len() as u64;
            if target.ledger.append(rows.into()).await.is_err() {
                break;
            }
            if spool.delete_rows(ids).await.is_err() {
                break;
            }
            target.stats.replayed.fetch_add(count, Ordering::Relaxed);
            target.stats.written.fetch_add(count, Ordering::Relaxed);
        }
    }
}
