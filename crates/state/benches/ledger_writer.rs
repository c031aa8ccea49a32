//! The ledger writer's throughput: rows offered as fast as settlement can
//! offer them, written behind into a real SQLite file (the single node's
//! store, 32 rows a statement) until the last one is stored, and into the
//! test PostgreSQL when `SWITCHYARD_TEST_POSTGRES_URL` names one (a
//! fleet's store). What the writer's loop costs per row, and whether
//! gathering the next batch while one is written changes what it sustains.
#![allow(clippy::panic, reason = "a bench: a store that cannot be opened ends it")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use switchyard_state::governance::ledger::{LedgerQueue, Pacing};
use switchyard_store::postgres::PostgresStore;
use switchyard_store::sqlite::SqliteStore;
use switchyard_store::{Ledger, LedgerRow, Notes, Tokens};

const ROWS: i64 = 20_000;

fn row(entry: i64) -> LedgerRow {
    LedgerRow {
        entry,
        at_ms: 1_796_067_065_000 + entry,
        request_id: format!("req-{entry:012}"),
        key_id: Some("key-0123456789".into()),
        group: Some("team".into()),
        pool: "fast".into(),
        lane: "openai-gpt".into(),
        model: "gpt-4o-mini".into(),
        operation: "chat".into(),
        tokens: Tokens { input: 812, output: 230, requests: 1, ..Tokens::default() },
        status: 200,
        latency_ms: 412,
        ttfb_ms: Some(120),
        failovers: 0,
        estimated: false,
        attempts: Vec::new(),
        notes: Notes::default(),
        end_user: None,
        ingress: Some("openai".into()),
        stream: false,
        charge: None,
    }
}

/// Offers `ROWS` rows to a writer over `store` and waits for the last to
/// be stored.
async fn write_all(store: Arc<dyn Ledger>, round: u64) -> Duration {
    let pacing = Pacing { flush: Duration::from_millis(100), write_timeout: Duration::from_secs(10) };
    let (queue, writer) = LedgerQueue::start(store, 65_536, pacing, None);
    let started = Instant::now();
    for entry in 1..=ROWS {
        if let Some(wait) = queue.offer(row(round as i64 * ROWS + entry)) {
            wait.await;
        }
    }
    writer.finish().await;
    started.elapsed()
}

/// A number that differs between runs (the clock's nanoseconds).
fn fastrand_seed() -> u16 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos() as u16)
}

fn writer(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    let runtime = runtime.unwrap_or_else(|err| panic!("{err}"));
    let dir = std::env::temp_dir().join(format!("switchyard-ledger-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|err| panic!("{err}"));
    let mut group = c.benchmark_group("ledger_writer");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.sample_size(10);
    let mut round = 0;
    group.bench_function("sqlite_20k_rows", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                round += 1;
                let path = dir.join(format!("ledger-{round}.db"));
                let store = SqliteStore::open(&path).unwrap_or_else(|err| panic!("{err}"));
                total += runtime.block_on(write_all(Arc::new(store), round));
                let _ = std::fs::remove_file(&path);
            }
            total
        })
    });
    if let Ok(url) = std::env::var("SWITCHYARD_TEST_POSTGRES_URL") {
        let store = runtime.block_on(PostgresStore::connect(&url)).unwrap_or_else(|err| panic!("{err}"));
        let store: Arc<dyn Ledger> = Arc::new(store);
        // Entries of this run only (the server keeps the rows of runs before).
        round = u64::from(fastrand_seed()) << 20;
        group.bench_function("postgres_20k_rows", |b| {
            b.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    round += 1;
                    total += runtime.block_on(write_all(store.clone(), round));
                }
                total
            })
        });
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, writer);
criterion_main!(benches);
