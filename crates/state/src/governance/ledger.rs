//! The ledger, written behind: settled requests queue their rows in a
//! bounded channel, and one task writes them in batches. A batch is
//! written a flush interval after its first row arrived (or sooner when it
//! fills), and the next one is gathered while it is written, so a row's
//! write starts at most the flush interval, or the write in flight, after
//! it arrived. A full queue
//! makes settlement wait (backpressure on the requests that produce rows)
//! and is counted; nothing is dropped. A write that fails, or takes longer
//! than the write timeout (a database hung on a lock, or frozen), is
//! retried with backoff; a fleet's writer has a spool instead (a local
//! SQLite file): the batch is written there at once, durable on local disk,
//! later batches go there directly while the store stays away, and a replay
//! task moves spooled rows over when it answers again (rows carry their
//! entry id, so a replay that repeats, or a timed-out write that committed
//! after all, stores nothing twice). On shutdown the queue is drained and
//! flushed; after `kill -9`, at most the rows settled in the last flush
//! interval and two writes (`max(flush, write) + write`, a write bounded
//! by its timeout) are lost.

mod refusals;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use switchyard_store::sqlite::SqliteStore;
use switchyard_store::{Ledger, LedgerRow, RowFilter, StoreError};
use tokio::sync::mpsc;
use tokio::time::Instant;

use refusals::RefusalRows;
pub use refusals::REFUSALS_LOGGED;

/// A row waiting for room in a full queue ([`LedgerQueue::offer`]).
pub type Waiting = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Rows written in one transaction at most.
const BATCH: usize = 1024;

/// How the writer paces its writes and how long one may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    /// How long a batch gathers after its first row (`governance.ledger_flush_interval`).
    pub flush: Duration,
    /// How long one write to the store may take before it counts as failed
    /// (`governance.ledger_write_timeout`): its rows go to the spool.
    pub write_timeout: Duration,
}

/// What the writer counts, for `/stats` and metrics.
#[derive(Debug, Default)]
pub struct LedgerStats {
    /// Rows written.
    pub written: AtomicU64,
    /// Times a settlement found the queue full and waited.
    pub queue_full: AtomicU64,
    /// Failed writes (retried, or spooled).
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
    refusals: Arc<RefusalRows>,
}

impl LedgerQueue {
    /// Starts the writer over `ledger`.
    pub fn start(
        ledger: Arc<dyn Ledger>,
        capacity: usize,
        pacing: Pacing,
        spool: Option<SqliteStore>,
    ) -> (LedgerQueue, LedgerWriter) {
        let (tx, rx) = mpsc::channel(capacity);
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let stats = Arc::new(LedgerStats::default());
        let target = Target {
            ledger,
            spool,
            stats: stats.clone(),
            write_timeout: pacing.write_timeout,
            away: Arc::new(AtomicBool::new(false)),
        };
        if target.spool.is_some() {
            switchyard_tasks::service("ledger replay", replay(target.clone()));
        }
        let refusals = Arc::new(RefusalRows::new());
        let task = switchyard_tasks::service(
            "ledger writer",
            write_behind(target, rx, stopped, refusals.clone(), pacing.flush),
        );
        (LedgerQueue { tx, capacity, stats, refusals }, LedgerWriter { stop, task })
    }

    /// A refusal's row past the rows-a-minute limit is counted on its
    /// minute's row instead of queued (`None`).
    fn limited(&self, row: LedgerRow) -> Option<LedgerRow> {
        match row.operation == switchyard_store::REFUSED {
            true => self.refusals.admit(row, crate::clock::now_ms()),
            false => Some(row),
        }
    }

    /// Refusals past the request log's rows a minute, counted on shared rows.
    pub fn refusals_past_limit(&self) -> u64 {
        self.refusals.past_limit.load(Ordering::Relaxed)
    }

    /// Queues a row now, or, when the queue is full, hands back the wait
    /// for room. The wait is boxed so that a settlement's future, which
    /// every request carries, holds no channel send (2 KiB) for the rare
    /// full queue.
    pub fn offer(&self, row: LedgerRow) -> Option<Waiting> {
        match self.tx.try_send(self.limited(row)?) {
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
        let Some(row) = self.limited(row) else { return };
        if let Err(mpsc::error::TrySendError::Full(row)) = self.tx.try_send(row) {
            self.stats.queue_full.fetch_add(1, Ordering::Relaxed);
            let tx = self.tx.clone();
            switchyard_tasks::work(async move {
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
    write_timeout: Duration,
    /// The store failed or timed out and the spool took the rows: later
    /// batches go straight to the spool until the replay finds the store
    /// answering again (none waits out the timeout meanwhile).
    away: Arc<AtomicBool>,
}

impl Target {
    /// Appends `rows` to the store, or fails once it has not answered
    /// within the write timeout.
    async fn append(&self, rows: Arc<[LedgerRow]>) -> Result<(), StoreError> {
        match tokio::time::timeout(self.write_timeout, self.ledger.append(rows)).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Unavailable(format!("no answer within {:?}", self.write_timeout))),
        }
    }
}

/// What woke the writer.
enum Woke {
    /// The write in flight ended.
    Wrote,
    /// Rows arrived (none: every sender is gone).
    Received(usize),
    /// The gathered batch is due.
    Due,
    /// A refusal was counted on a shared row: a batch must come.
    Counted,
    /// Shutdown.
    Stop,
}

/// The write in flight, if any; pending forever when there is none.
async fn in_flight(writing: &mut Option<Pin<Box<dyn Future<Output = ()> + Send>>>) {
    match writing {
        Some(write) => write.await,
        None => std::future::pending().await,
    }
}

/// Gathers rows into batches and writes each one a flush interval after
/// its first row arrived (or once it is full), one write at a time, the
/// next batch gathering meanwhile.
async fn write_behind(
    target: Target,
    mut rx: mpsc::Receiver<LedgerRow>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    refusals: Arc<RefusalRows>,
    flush: Duration,
) {
    let mut next: Vec<LedgerRow> = Vec::with_capacity(BATCH);
    // When `next` is due: its first row's arrival plus the flush interval.
    let mut due: Option<Instant> = None;
    let mut writing: Option<Pin<Box<dyn Future<Output = ()> + Send>>> = None;
    let (mut open, mut stopping) = (true, false);
    loop {
        let ready = next.len() >= BATCH || !open || due.is_some_and(|due| due <= Instant::now());
        if writing.is_none() && ready && (due.is_some() || !next.is_empty() || !open) {
            // The rows counting refusals so far go with the batch.
            refusals.take(&mut next);
            if !next.is_empty() {
                let rows: Arc<[LedgerRow]> = std::mem::replace(&mut next, Vec::with_capacity(BATCH)).into();
                writing = Some(Box::pin(write(target.clone(), rows)));
            }
            due = None;
        }
        if !open && writing.is_none() && next.is_empty() {
            return;
        }
        let room = BATCH.saturating_sub(next.len());
        let woke = tokio::select! {
            () = in_flight(&mut writing), if writing.is_some() => Woke::Wrote,
            received = rx.recv_many(&mut next, room), if open && room > 0 => Woke::Received(received),
            () = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if writing.is_none() && due.is_some() => Woke::Due,
            _ = &mut stop, if !stopping => Woke::Stop,
            () = refusals.counted.notified(), if open && due.is_none() => Woke::Counted,
        };
        match woke {
            Woke::Wrote => writing = None,
            Woke::Received(0) => open = false,
            Woke::Received(_) => {
                due.get_or_insert_with(|| Instant::now() + flush);
            }
            Woke::Due => {}
            Woke::Counted => due = Some(Instant::now() + flush),
            // Shutdown: what is queued now is written, then the task ends.
            Woke::Stop => {
                stopping = true;
                rx.close();
            }
        }
    }
}

/// Writes `rows` to the store; when the store fails or does not answer in
/// time, to the spool if there is one (straight there while the store is
/// known away), else to the store again with backoff until it takes them.
async fn write(target: Target, rows: Arc<[LedgerRow]>) {
    let stats = &target.stats;
    let mut backoff = Duration::from_millis(100);
    loop {
        let spooling = target.spool.is_some() && target.away.load(Ordering::Relaxed);
        let stored = match spooling {
            true => Err(StoreError::Unavailable("away".into())),
            false => target.append(rows.clone()).await,
        };
        let err = match stored {
            Ok(()) => {
                stats.written.fetch_add(rows.len() as u64, Ordering::Relaxed);
                return;
            }
            Err(err) => err,
        };
        if !spooling {
            stats.write_errors.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(spool) = &target.spool {
            match spool.append(rows.clone()).await {
                Ok(()) => {
                    stats.spooled.fetch_add(rows.len() as u64, Ordering::Relaxed);
                    if !target.away.swap(true, Ordering::Relaxed) {
                        tracing::warn!(error = %err, rows = rows.len(), "ledger store unreachable; rows go to the local spool until it answers");
                    }
                    return;
                }
                Err(spool_err) => {
                    // Neither takes them: the store is tried again first.
                    target.away.store(false, Ordering::Relaxed);
                    tracing::warn!(error = %spool_err, "the ledger spool cannot be written either; retrying");
                }
            }
        }
        tracing::warn!(error = %err, rows = rows.len(), ?backoff, "ledger write failed; retrying");
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Moves spooled rows to the store while there are any (rows a crashed
/// process left in the spool too, from its next start); the first batch
/// the store takes marks it back.
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
            if target.append(rows.into()).await.is_err() {
                break;
            }
            if target.away.swap(false, Ordering::Relaxed) {
                tracing::info!("the ledger store answers again; spooled rows move to it");
            }
            if spool.delete_rows(ids).await.is_err() {
                break;
            }
            target.stats.replayed.fetch_add(count, Ordering::Relaxed);
            target.stats.written.fetch_add(count, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use switchyard_store::memory::MemoryStore;
    use switchyard_store::{StoreFuture, StoredRow, Total, TotalsQuery};

    use super::*;

    fn row(entry: i64) -> LedgerRow {
        LedgerRow {
            entry,
            at_ms: 1,
            request_id: format!("r{entry}"),
            key_id: None,
            group: None,
            pool: "p".into(),
            lane: "l".into(),
            model: "m".into(),
            operation: "chat".into(),
            tokens: switchyard_store::Tokens::default(),
            status: 200,
            latency_ms: 1,
            ttfb_ms: None,
            failovers: 0,
            estimated: false,
            attempts: Vec::new(),
            notes: switchyard_store::Notes::default(),
            end_user: None,
            ingress: None,
            stream: false,
            charge: None,
        }
    }

    /// A store whose every write takes `latency` (or never ends while
    /// `hung`), noting when each row's write committed.
    struct Slow {
        inner: MemoryStore,
        latency: Duration,
        hung: AtomicBool,
        committed: Mutex<HashMap<i64, Instant>>,
    }

    impl Slow {
        fn new(latency: Duration) -> Arc<Slow> {
            Arc::new(Slow {
                inner: MemoryStore::new(),
                latency,
                hung: AtomicBool::new(false),
                committed: Mutex::new(HashMap::new()),
            })
        }
    }

    impl Ledger for Slow {
        fn append(&self, rows: Arc<[LedgerRow]>) -> StoreFuture<'_, ()> {
            Box::pin(async move {
                if self.hung.load(Ordering::SeqCst) {
                    std::future::pending::<()>().await;
                }
                tokio::time::sleep(self.latency).await;
                let at = Instant::now();
                self.committed.lock().unwrap().extend(rows.iter().map(|row| (row.entry, at)));
                self.inner.append(rows).await
            })
        }
        fn rows(&self, filter: RowFilter) -> StoreFuture<'_, Vec<StoredRow>> {
            self.inner.rows(filter)
        }
        fn totals(&self, query: TotalsQuery) -> StoreFuture<'_, Vec<Total>> {
            self.inner.totals(query)
        }
        fn count(&self) -> StoreFuture<'_, u64> {
            self.inner.count()
        }
    }

    /// A row waits at most the flush interval and the write in flight
    /// before its own write ends: rows that arrive while a batch is written
    /// are gathered meanwhile, not after it (the writer that gathered only
    /// between writes kept some `flush + 2 × write`: 1.6 s here).
    #[tokio::test(start_paused = true)]
    async fn a_row_is_durable_within_the_flush_interval_and_one_write() {
        let (flush, write) = (Duration::from_millis(1000), Duration::from_millis(300));
        let store = Slow::new(write);
        let pacing = Pacing { flush, write_timeout: Duration::from_secs(10) };
        let (queue, writer) = LedgerQueue::start(store.clone(), 65_536, pacing, None);
        let mut arrived = HashMap::new();
        // 100 rows a second for 10 s, each noted as it is queued.
        for entry in 1..=1000 {
            arrived.insert(entry, Instant::now());
            assert!(queue.offer(row(entry)).is_none());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        writer.finish().await;
        let committed = store.committed.lock().unwrap();
        assert_eq!(committed.len(), 1000);
        let longest = arrived.iter().map(|(entry, at)| committed[entry] - *at).max().unwrap();
        assert!(longest <= flush + write, "a row waited {longest:?} to be written (flush {flush:?}, write {write:?})");
        assert!(longest >= flush, "{longest:?}: batches gather for the flush interval");
    }

    fn spool_file() -> (SqliteStore, std::path::PathBuf) {
        let path =
            std::env::temp_dir().join(format!("switchyard-spool-test-{}-{}.db", std::process::id(), fastrand::u64(..)));
        (SqliteStore::open(&path).unwrap(), path)
    }

    /// A store that stops answering (a lock, a frozen server) is a store
    /// that is away: the batch goes to the spool once the write timeout
    /// passes, later ones go there at once, and the rows move over, once
    /// each, when it answers again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hung_store_is_timed_out_and_its_rows_spooled_then_replayed() {
        let store = Slow::new(Duration::ZERO);
        let (spool, path) = spool_file();
        let pacing = Pacing { flush: Duration::from_millis(20), write_timeout: Duration::from_millis(200) };
        let (queue, writer) = LedgerQueue::start(store.clone(), 64, pacing, Some(spool.clone()));
        assert!(queue.offer(row(1)).is_none());
        while queue.stats.written.load(Ordering::SeqCst) < 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        store.hung.store(true, Ordering::SeqCst);
        // Far more rows than the queue holds: none waits on the hung store
        // for longer than one timeout.
        let offered = tokio::time::timeout(Duration::from_secs(3), async {
            for entry in 2..=500 {
                if let Some(wait) = queue.offer(row(entry)) {
                    wait.await;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        assert!(offered.await.is_ok(), "settlement waited on the hung store: {:?}", queue.stats);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while queue.stats.spooled.load(Ordering::SeqCst) < 499 {
            assert!(std::time::Instant::now() < deadline, "rows were not spooled: {:?}", queue.stats);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(queue.stats.write_errors.load(Ordering::SeqCst), 1, "one timeout, then straight to the spool");
        store.hung.store(false, Ordering::SeqCst);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while store.inner.count().await.unwrap() < 500 || spool.count().await.unwrap() > 0 {
            assert!(std::time::Instant::now() < deadline, "the spool was not replayed: {:?}", queue.stats);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Back: the next rows go to the store itself.
        assert!(queue.offer(row(501)).is_none());
        writer.finish().await;
        assert_eq!(store.inner.count().await.unwrap(), 501);
        assert_eq!(spool.count().await.unwrap(), 0);
        let _ = std::fs::remove_file(&path);
    }
}
