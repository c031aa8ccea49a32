//! The ledger, written behind: settled requests queue their rows in a
//! bounded channel, and one task writes them in batches every flush
//! interval (or sooner when a batch fills). A full queue makes settlement
//! wait (backpressure on the requests that produce rows) and is counted;
//! nothing is dropped. A store that fails keeps the batch and retries.
//! On shutdown the queue is drained and flushed; after `kill -9`, at most
//! the rows settled in the last flush interval are lost.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use switchyard_store::{Ledger, LedgerRow};
use tokio::sync::mpsc;

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
    pub fn start(ledger: Arc<dyn Ledger>, capacity: usize, flush: Duration) -> (LedgerQueue, LedgerWriter) {
        let (tx, rx) = mpsc::channel(capacity);
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let stats = Arc::new(LedgerStats::default());
        let task = tokio::spawn(write_behind(ledger, rx, stopped, flush, stats.clone()));
        (LedgerQueue { tx, capacity, stats }, LedgerWriter { stop, task })
    }

    /// Queues a row; waits while the queue is full.
    pub async fn push(&self, row: LedgerRow) {
        match self.tx.try_send(row) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(row)) => {
                self.stats.queue_full.fetch_add(1, Ordering::Relaxed);
                let _ = self.tx.send(row).await;
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
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

async fn write_behind(
    ledger: Arc<dyn Ledger>,
    mut rx: mpsc::Receiver<LedgerRow>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    flush: Duration,
    stats: Arc<LedgerStats>,
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
                        write(&*ledger, &mut batch, &stats).await;
                    }
                }
                write(&*ledger, &mut batch, &stats).await;
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
        write(&*ledger, &mut batch, &stats).await;
    }
}

/// Writes `batch`, retrying with backoff until the store takes it.
async fn write(ledger: &dyn Ledger, batch: &mut Vec<LedgerRow>, stats: &LedgerStats) {
    if batch.is_empty() {
        return;
    }
    let mut backoff = Duration::from_millis(100);
    loop {
        match ledger.append(batch.clone()).await {
            Ok(()) => {
                stats.written.fetch_add(batch.len() as u64, Ordering::Relaxed);
                batch.clear();
                return;
            }
            Err(err) => {
                stats.write_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %err, rows = batch.len(), ?backoff, "ledger write failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}
