//! A fleet's store: PostgreSQL through a connection pool (deadpool), the
//! schema migrated at connect under an advisory lock (instances booting
//! together apply it once). Every key or group write sends a `NOTIFY` in
//! its transaction; one listening connection per instance turns those into
//! [`Change`]s, so a revocation on one instance reaches every instance's
//! key cache within the notification's round trip. When that connection
//! drops it reconnects with backoff and announces [`Change::Resync`].
//!
//! Plain TCP only (`sslmode=disable`/`prefer`); a URL that requires TLS is
//! refused at connect with that message.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use switchyard_governance::KeyRecord;
use tokio::sync::broadcast;
use tokio_postgres::{AsyncMessage, NoTls};

use crate::kept::{
    BatchJob, BatchQueue, BatchState, ClaimedLine, KeptObject, LineCounts, LineOutcome, LineState, ObjectKind,
    ObjectStore, QueuedLine, ORPHAN_CHUNKS_MS, STAGED_BATCH_MS,
};
use crate::{
    from_json, to_json, AuditEntry, AuditLog, Change, ChangeFeed, ConfigStore, ConfigVersion, ContentStore,
    GroupRecord, GroupStore, Idempotency, KeptContent, KeptSignature, KeyStore, Ledger, LedgerRow, RowFilter,
    SignatureStore, StoreError, StoreFuture, StoredAudit, StoredRow, Tokens, Total, TotalsQuery, Written,
};

/// The schema, in order; `switchyard_schema.version` is the count applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/postgres/0001_init.sql"),
    include_str!("../migrations/postgres/0002_ledger_attempts.sql"),
    include_str!("../migrations/postgres/0003_spend_hourly.sql"),
    include_str!("../migrations/postgres/0004_audit_at.sql"),
    include_str!("../migrations/postgres/0005_operations.sql"),
    include_str!("../migrations/postgres/0006_call_signatures.sql"),
    include_str!("../migrations/postgres/0007_ledger_notes.sql"),
    include_str!("../migrations/postgres/0008_kept_content.sql"),
    include_str!("../migrations/postgres/0009_cache_saved.sql"),
    include_str!("../migrations/postgres/0010_end_user.sql"),
    include_str!("../migrations/postgres/0011_config_versions.sql"),
    include_str!("../migrations/postgres/0012_refusals.sql"),
    include_str!("../migrations/postgres/0013_ingress.sql"),
    include_str!("../migrations/postgres/0014_outcomes.sql"),
    include_str!("../migrations/postgres/0015_kept.sql"),
    include_str!("../migrations/postgres/0016_ledger_operation.sql"),
    include_str!("../migrations/postgres/0017_kept_limits.sql"),
    include_str!("../migrations/postgres/0018_ledger_batches.sql"),
    include_str!("../migrations/postgres/0019_usage_kinds.sql"),
    include_str!("../migrations/postgres/0020_charges.sql"),
];

/// Serialises ledger batches across instances (see `append`).
const LEDGER_LOCK: i64 = 0x5357_4c45_4447_4552; // "SWLEDGER"

/// Serialises migrations across instances (`pg_advisory_xact_lock`).
const MIGRATION_LOCK: i64 = 0x5357_5943_4844;

/// The notification channels.
const KEYS_CHANNEL: &str = "switchyard_keys";
const GROUPS_CHANNEL: &str = "switchyard_groups";
const CONFIG_CHANNEL: &str = "switchyard_config";

/// Connections per instance: admin calls and batched ledger writes are few.
const POOL_SIZE: usize = 8;

/// How long a store call may wait for a connection or an answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// A store in one PostgreSQL database.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    changes: broadcast::Sender<Change>,
}

/// Column `index` of `row`, as `T`; a schema this binary does not expect is
/// an error, never a panic.
fn col<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a tokio_postgres::Row, index: usize) -> Result<T, StoreError> {
    row.try_get(index).map_err(|err| StoreError::Unavailable(format!("postgres: column {index}: {err}")))
}

fn unavailable(err: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(err.to_string())
}

fn conflict_or_unavailable(err: tokio_postgres::Error) -> StoreError {
    match err.code() {
        Some(code) if *code == tokio_postgres::error::SqlState::UNIQUE_VIOLATION => {
            StoreError::Conflict(err.to_string())
        }
        _ => unavailable(err),
    }
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:pass@host:port/db`), brings the
    /// schema up to date and starts listening for other instances' changes.
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        let config: tokio_postgres::Config =
            url.parse().map_err(|err| StoreError::Unavailable(format!("storage.postgres_url: {err}")))?;
        if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
            return Err(StoreError::Unavailable(
                "storage.postgres_url asks for TLS (sslmode=require), which this build does not speak; reach \
                 PostgreSQL over a private network or a local proxy with sslmode=disable"
                    .into(),
            ));
        }
        let manager =
            Manager::from_config(config.clone(), NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .wait_timeout(Some(CALL_TIMEOUT))
            .create_timeout(Some(CALL_TIMEOUT))
            .recycle_timeout(Some(CALL_TIMEOUT))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(unavailable)?;
        migrate(&pool).await?;
        let (changes, _) = broadcast::channel(1024);
        // Listening before the caller reads anything: a change made between
        // its first read and the subscription would otherwise be missed.
        let (subscribed, listening) = tokio::sync::oneshot::channel();
        switchyard_tasks::service("postgres listen", listen(config, changes.clone(), subscribed));
        match tokio::time::timeout(CALL_TIMEOUT, listening).await {
            Ok(Ok(())) => Ok(PostgresStore { pool, changes }),
            _ => Err(StoreError::Unavailable("postgres: the change feed could not LISTEN".into())),
        }
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|err| StoreError::Unavailable(format!("postgres: {err}")))
    }
}

/// Applies the migrations this database lacks, once across instances.
async fn migrate(pool: &Pool) -> Result<(), StoreError> {
    let mut client = pool.get().await.map_err(|err| StoreError::Unavailable(format!("postgres: {err}")))?;
    let tx = client.transaction().await.map_err(unavailable)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await.map_err(unavailable)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS switchyard_schema (version INTEGER NOT NULL)")
        .await
        .map_err(unavailable)?;
    let applied: i32 = tx
        .query_opt("SELECT version FROM switchyard_schema", &[])
        .await
        .map_err(unavailable)?
        .map_or(Ok(0), |row| col(&row, 0))?;
    let applied = crate::applied_migrations(i64::from(applied), MIGRATIONS.len())?;
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(applied) {
        tx.batch_execute(migration).await.map_err(|err| unavailable(format!("migration {}: {err}", index + 1)))?;
    }
    let version = i32::try_from(MIGRATIONS.len()).unwrap_or(i32::MAX);
    tx.execute("DELETE FROM switchyard_schema", &[]).await.map_err(unavailable)?;
    tx.execute("INSERT INTO switchyard_schema (version) VALUES ($1)", &[&version]).await.map_err(unavailable)?;
    tx.commit().await.map_err(unavailable)
}

/// One connection that LISTENs for the other instances' changes, for the
/// life of the process; reconnects with backoff and asks for a resync.
async fn listen(
    config: tokio_postgres::Config,
    changes: broadcast::Sender<Change>,
    ready: tokio::sync::oneshot::Sender<()>,
) {
    let mut ready = Some(ready);
    let mut backoff = Duration::from_millis(100);
    let mut connected_before = false;
    loop {
        match config.connect(NoTls).await {
            Ok((client, mut connection)) => {
                let statement = format!("LISTEN {KEYS_CHANNEL}; LISTEN {GROUPS_CHANNEL}; LISTEN {CONFIG_CHANNEL}");
                let subscribe = client.batch_execute(&statement);
                // The connection must be polled for the LISTEN to complete.
                let subscribed = tokio::select! {
                    result = subscribe => result.is_ok(),
                    _ = std::future::poll_fn(|cx| connection.poll_message(cx)) => false,
                };
                if subscribed {
                    backoff = Duration::from_millis(100);
                    if connected_before {
                        let _ = changes.send(Change::Resync);
                    }
                    connected_before = true;
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(());
                    }
                    while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                        let Ok(AsyncMessage::Notification(note)) = message else {
                            if message.is_err() {
                                break;
                            }
                            continue;
                        };
                        let change = match note.channel() {
                            KEYS_CHANNEL => Change::Key(note.payload().to_owned()),
                            CONFIG_CHANNEL => Change::Config(note.payload().parse().unwrap_or(0)),
                            _ => Change::Groups,
                        };
                        let _ = changes.send(change);
                    }
                }
                drop(client);
                tracing::warn!("postgres change feed lost its connection; reconnecting");
            }
            Err(err) => tracing::warn!(error = %err, ?backoff, "postgres change feed cannot connect; retrying"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

impl ChangeFeed for PostgresStore {
    fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }
}

/// An idempotent key write inside one transaction, announced on commit.
async fn write_key(
    store: &PostgresStore,
    scope: &str,
    record: KeyRecord,
    idempotency: Option<Idempotency>,
    insert: bool,
) -> Result<Written, StoreError> {
    let mut client = store.client().await?;
    let tx = client.transaction().await.map_err(unavailable)?;
    if let Some(idem) = &idempotency {
        // Two instances retrying one create: the second waits on this row.
        tx.execute("SELECT pg_advisory_xact_lock(hashtext($1 || ':' || $2))", &[&scope, &idem.key])
            .await
            .map_err(unavailable)?;
        tx.execute("DELETE FROM idempotency WHERE at_ms < $1", &[&idem.oldest_ms()]).await.map_err(unavailable)?;
        let earlier = tx
            .query_opt(
                "SELECT fingerprint, key_id FROM idempotency WHERE scope = $1 AND key = $2",
                &[&scope, &idem.key],
            )
            .await
            .map_err(unavailable)?;
        if let Some(row) = earlier {
            let (fingerprint, id): (String, String) = (col(&row, 0)?, col(&row, 1)?);
            if fingerprint != idem.fingerprint {
                return Err(StoreError::Conflict("the idempotency key was used for another request".into()));
            }
            let text: Option<String> = tx
                .query_opt("SELECT record FROM keys WHERE id = $1", &[&id])
                .await
                .map_err(unavailable)?
                .map(|row| col(&row, 0))
                .transpose()?;
            return text.map(|t| from_json(&t).map(Written::Replayed)).ok_or(StoreError::NotFound)?;
        }
    }
    let stored = store_key(&tx, record, insert).await?;
    if let Some(idem) = idempotency {
        tx.execute(
            "INSERT INTO idempotency (scope, key, fingerprint, key_id, at_ms) VALUES ($1, $2, $3, $4, $5)",
            &[&scope, &idem.key, &idem.fingerprint, &stored.id, &idem.at_ms],
        )
        .await
        .map_err(conflict_or_unavailable)?;
    }
    tx.commit().await.map_err(unavailable)?;
    Ok(Written::New(stored))
}

/// Inserts `record`, or replaces the stored one when the checks allow it
/// (the row locked for the transaction, so two instances' writes of one
/// key are ordered and the later one sees the earlier).
async fn store_key(
    tx: &deadpool_postgres::Transaction<'_>,
    record: KeyRecord,
    insert: bool,
) -> Result<KeyRecord, StoreError> {
    let record = if insert {
        record
    } else {
        let row = tx
            .query_opt("SELECT record FROM keys WHERE id = $1 FOR UPDATE", &[&record.id])
            .await
            .map_err(unavailable)?
            .ok_or(StoreError::NotFound)?;
        let stored: KeyRecord = from_json(col::<&str>(&row, 0)?)?;
        crate::checked_write(&stored, record)?
    };
    let json = to_json(&record)?;
    let aws = record.aws.as_ref().map(|a| a.access_key_id.clone());
    let hash = record.hash.to_hex();
    let changed = if insert {
        tx.execute(
            "INSERT INTO keys (id, hash, aws_access_key_id, record) VALUES ($1, $2, $3, $4)",
            &[&record.id, &hash, &aws, &json],
        )
        .await
    } else {
        tx.execute(
            "UPDATE keys SET hash = $2, aws_access_key_id = $3, record = $4 WHERE id = $1",
            &[&record.id, &hash, &aws, &json],
        )
        .await
    }
    .map_err(conflict_or_unavailable)?;
    if changed == 0 {
        return Err(StoreError::NotFound);
    }
    // Delivered to every listener when the transaction commits.
    tx.execute("SELECT pg_notify($1, $2)", &[&KEYS_CHANNEL, &record.id]).await.map_err(unavailable)?;
    Ok(record)
}

impl KeyStore for PostgresStore {
    fn create_key(&self, record: KeyRecord, idempotency: Option<Idempotency>) -> StoreFuture<'_, Written> {
        Box::pin(write_key(self, "create", record, idempotency, true))
    }

    fn rotate_key(&self, record: KeyRecord, idempotency: Option<Idempotency>) -> StoreFuture<'_, Written> {
        Box::pin(async move {
            let scope = format!("rotate:{}", record.id);
            write_key(self, &scope, record, idempotency, false).await
        })
    }

    fn update_key(&self, record: KeyRecord) -> StoreFuture<'_, KeyRecord> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            let stored = store_key(&tx, record, false).await?;
            tx.commit().await.map_err(unavailable)?;
            Ok(stored)
        })
    }

    fn get_key(&self, id: &str) -> StoreFuture<'_, Option<KeyRecord>> {
        let id = id.to_owned();
        Box::pin(async move {
            let client = self.client().await?;
            let row = client.query_opt("SELECT record FROM keys WHERE id = $1", &[&id]).await.map_err(unavailable)?;
            row.map(|row| from_json(col::<&str>(&row, 0)?)).transpose()
        })
    }

    fn list_keys(&self, after: Option<&str>, limit: usize) -> StoreFuture<'_, Vec<KeyRecord>> {
        let after = after.unwrap_or("").to_owned();
        Box::pin(async move {
            let client = self.client().await?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = client
                .query("SELECT record FROM keys WHERE id > $1 ORDER BY id LIMIT $2", &[&after, &limit])
                .await
                .map_err(unavailable)?;
            rows.iter().map(|row| from_json(col::<&str>(row, 0)?)).collect()
        })
    }
}

impl GroupStore for PostgresStore {
    fn put_group(&self, group: GroupRecord) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            tx.execute(
                "INSERT INTO groups (name, record) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET record = excluded.record",
                &[&group.name, &to_json(&group)?],
            )
            .await
            .map_err(unavailable)?;
            tx.execute("SELECT pg_notify($1, '')", &[&GROUPS_CHANNEL]).await.map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)
        })
    }

    fn delete_group(&self, name: &str) -> StoreFuture<'_, ()> {
        let name = name.to_owned();
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            if tx.execute("DELETE FROM groups WHERE name = $1", &[&name]).await.map_err(unavailable)? == 0 {
                return Err(StoreError::NotFound);
            }
            tx.execute("SELECT pg_notify($1, '')", &[&GROUPS_CHANNEL]).await.map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)
        })
    }

    fn list_groups(&self) -> StoreFuture<'_, Vec<GroupRecord>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client.query("SELECT record FROM groups ORDER BY name", &[]).await.map_err(unavailable)?;
            rows.iter().map(|row| from_json(col::<&str>(row, 0)?)).collect()
        })
    }
}

/// A token count as a column (BIGINT).
fn column(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// A column as a token count.
fn count(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// A spend line: value, lane, requests and the four token sums.
fn total_of(row: &tokio_postgres::Row) -> Result<Total, StoreError> {
    let mut counts = [0u64; crate::SUMS];
    for (slot, value) in counts.iter_mut().enumerate() {
        *value = count(col::<Option<i64>>(row, 2 + slot)?.unwrap_or(0));
    }
    Ok(Total::of_columns(col(row, 0)?, col(row, 1)?, counts))
}

fn row_of(row: &tokio_postgres::Row) -> Result<StoredRow, StoreError> {
    Ok(StoredRow {
        id: col(row, 0)?,
        row: LedgerRow {
            entry: col(row, 1)?,
            at_ms: col(row, 2)?,
            request_id: col(row, 3)?,
            key_id: col(row, 4)?,
            group: col(row, 5)?,
            pool: col(row, 6)?,
            lane: col(row, 7)?,
            model: col(row, 8)?,
            tokens: Tokens {
                input: count(col(row, 9)?),
                output: count(col(row, 10)?),
                cache_read: count(col(row, 11)?),
                cache_write: count(col(row, 12)?),
                cache_write_1h: count(col(row, 26)?),
                reasoning: count(col(row, 27)?),
                audio_input: count(col(row, 28)?),
                audio_output: count(col(row, 29)?),
                image_input: count(col(row, 30)?),
                image_output: count(col(row, 31)?),
                units: count(col(row, 19)?),
                requests: count(col(row, 20)?),
            },
            operation: col(row, 21)?,
            status: u16::try_from(col::<i32>(row, 13)?).unwrap_or(0),
            latency_ms: count(col(row, 14)?),
            ttfb_ms: col::<Option<i64>>(row, 15)?.map(count),
            failovers: u32::try_from(col::<i32>(row, 16)?).unwrap_or(0),
            estimated: col(row, 17)?,
            attempts: crate::attempts_of(col(row, 18)?),
            notes: crate::notes_of(col(row, 22)?),
            end_user: col(row, 23)?,
            ingress: col(row, 24)?,
            stream: col(row, 25)?,
            charge: match (col::<Option<i64>>(row, 32)?, col::<Option<i64>>(row, 33)?) {
                (Some(cost), Some(price)) => Some(crate::Charge { cost_nano: count(cost), price_nano: count(price) }),
                _ => None,
            },
        },
    })
}

const ROW_COLUMNS: &str = "id, entry, at_ms, request_id, key_id, grp, pool, lane, model, input_tokens, output_tokens, \
     cache_read_tokens, cache_write_tokens, status, latency_ms, ttfb_ms, failovers, estimated, attempts, units, \
     billed_requests, operation, notes, end_user, ingress, stream, cache_write_1h_tokens, reasoning_tokens, \
     audio_input_tokens, audio_output_tokens, image_input_tokens, image_output_tokens, cost_nano, price_nano";

/// The spend sums after value and lane, as BIGINT (a `sum` of BIGINT is NUMERIC).
const SUMS: &str = "sum(input_tokens)::BIGINT, sum(output_tokens)::BIGINT, sum(cache_read_tokens)::BIGINT, \
     sum(cache_write_tokens)::BIGINT, sum(units)::BIGINT, sum(billed_requests)::BIGINT, sum(saved_nano)::BIGINT";

/// [`Outcomes`](crate::Outcomes)' sums over the hourly rollup.
const ROLLUP_OUTCOMES: &str = "sum(cache_hits)::BIGINT, sum(guarded)::BIGINT, sum(refused)::BIGINT";

/// The same over ledger rows (a refusal is a row of its own operation).
const ROW_OUTCOMES: &str = "sum(cache_hit)::BIGINT, sum(guarded)::BIGINT, sum(refused)::BIGINT";

/// The sums of the token kinds billed apart (parts of input and output),
/// over the rollup and rows alike.
const KIND_SUMS: &str = "sum(cache_write_1h_tokens)::BIGINT, sum(reasoning_tokens)::BIGINT, \
     sum(audio_input_tokens)::BIGINT, sum(audio_output_tokens)::BIGINT, sum(image_input_tokens)::BIGINT, \
     sum(image_output_tokens)::BIGINT";

/// [`Settled`](crate::Settled)'s sums over the hourly rollup.
const ROLLUP_SETTLED: &str = "sum(cost_nano)::BIGINT, sum(price_nano)::BIGINT, sum(unsettled)::BIGINT";

/// The same over ledger rows (a row without a charge is unsettled).
const ROW_SETTLED: &str = "sum(cost_nano)::BIGINT, sum(price_nano)::BIGINT, (count(*) - count(cost_nano))::BIGINT";

/// A batch of ledger rows as the insert's 37 arrays, one per column.
#[derive(Default)]
struct Columns<'a> {
    entry: Vec<i64>,
    at_ms: Vec<i64>,
    request_id: Vec<&'a str>,
    key_id: Vec<Option<&'a str>>,
    group: Vec<Option<&'a str>>,
    pool: Vec<&'a str>,
    lane: Vec<&'a str>,
    model: Vec<&'a str>,
    /// Input, output, cache read and cache write tokens; latency; units;
    /// billed requests; what a hit saved; cache hit; guarded; refused;
    /// then the kinds billed apart, in [`Tokens::KINDS`] order.
    counts: [Vec<i64>; 17],
    status: Vec<i32>,
    ttfb: Vec<Option<i64>>,
    failovers: Vec<i32>,
    estimated: Vec<bool>,
    attempts: Vec<Option<String>>,
    operation: Vec<&'a str>,
    notes: Vec<Option<String>>,
    end_user: Vec<Option<&'a str>>,
    ingress: Vec<Option<&'a str>>,
    stream: Vec<bool>,
    cost: Vec<Option<i64>>,
    price: Vec<Option<i64>>,
}

impl<'a> Columns<'a> {
    fn of(rows: &'a [LedgerRow]) -> Columns<'a> {
        let mut columns = Columns::default();
        for row in rows {
            let t = &row.tokens;
            columns.entry.push(row.entry);
            columns.at_ms.push(row.at_ms);
            columns.request_id.push(&row.request_id);
            columns.key_id.push(row.key_id.as_deref());
            columns.group.push(row.group.as_deref());
            columns.pool.push(&row.pool);
            columns.lane.push(&row.lane);
            columns.model.push(&row.model);
            let counts = [
                t.input,
                t.output,
                t.cache_read,
                t.cache_write,
                row.latency_ms,
                t.units,
                t.requests,
                row.notes.cache_saved_nano.unwrap_or(0),
                row.notes.cache_hit(),
                row.notes.guarded(),
                row.refusals(),
                t.cache_write_1h,
                t.reasoning,
                t.audio_input,
                t.audio_output,
                t.image_input,
                t.image_output,
            ];
            for (column, count) in columns.counts.iter_mut().zip(counts) {
                column.push(self::column(count));
            }
            columns.status.push(i32::from(row.status));
            columns.ttfb.push(row.ttfb_ms.map(self::column));
            columns.failovers.push(i32::try_from(row.failovers).unwrap_or(i32::MAX));
            columns.estimated.push(row.estimated);
            columns.attempts.push(crate::attempts_column(&row.attempts));
            columns.operation.push(&row.operation);
            columns.notes.push(crate::notes_column(&row.notes));
            columns.end_user.push(row.end_user.as_deref());
            columns.ingress.push(row.ingress.as_deref());
            columns.stream.push(row.stream);
            columns.cost.push(row.charge.map(|c| self::column(c.cost_nano)));
            columns.price.push(row.charge.map(|c| self::column(c.price_nano)));
        }
        columns
    }

    /// The insert's parameters, in its column order.
    fn params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 37] {
        let [input, output, cache_read, cache_write, latency, units, requests, saved, cache_hit, guarded, refused, write_1h, reasoning, audio_in, audio_out, image_in, image_out] =
            &self.counts;
        [
            &self.entry,
            &self.at_ms,
            &self.request_id,
            &self.key_id,
            &self.group,
            &self.pool,
            &self.lane,
            &self.model,
            input,
            output,
            cache_read,
            cache_write,
            &self.status,
            latency,
            &self.ttfb,
            &self.failovers,
            &self.estimated,
            &self.attempts,
            units,
            requests,
            &self.operation,
            &self.notes,
            saved,
            &self.end_user,
            &self.ingress,
            &self.stream,
            cache_hit,
            guarded,
            refused,
            write_1h,
            reasoning,
            audio_in,
            audio_out,
            image_in,
            image_out,
            &self.cost,
            &self.price,
        ]
    }
}

impl Ledger for PostgresStore {
    fn append(&self, rows: std::sync::Arc<[LedgerRow]>) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            // One batch at a time across the fleet: the hourly rollup's
            // trigger locks its rows in the batch's order, and two batches
            // locking the same rows in different orders would deadlock.
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LEDGER_LOCK]).await.map_err(unavailable)?;
            // The whole batch is one statement, each column an array: one
            // round trip, and the rollup's trigger runs once for it.
            let insert = tx
                .prepare_cached(
                    "INSERT INTO ledger (entry, at_ms, request_id, key_id, grp, pool, lane, model, input_tokens, \
                     output_tokens, cache_read_tokens, cache_write_tokens, status, latency_ms, ttfb_ms, failovers, \
                     estimated, attempts, units, billed_requests, operation, notes, saved_nano, end_user, ingress, stream, \
                     cache_hit, guarded, refused, cache_write_1h_tokens, reasoning_tokens, audio_input_tokens, \
                     audio_output_tokens, image_input_tokens, image_output_tokens, cost_nano, price_nano) \
                     SELECT * FROM unnest($1::BIGINT[], $2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], \
                     $7::TEXT[], $8::TEXT[], $9::BIGINT[], $10::BIGINT[], $11::BIGINT[], $12::BIGINT[], $13::INTEGER[], \
                     $14::BIGINT[], $15::BIGINT[], $16::INTEGER[], $17::BOOLEAN[], $18::TEXT[], $19::BIGINT[], \
                     $20::BIGINT[], $21::TEXT[], $22::TEXT[], $23::BIGINT[], $24::TEXT[], $25::TEXT[], $26::BOOLEAN[], \
                     $27::BIGINT[], $28::BIGINT[], $29::BIGINT[], $30::BIGINT[], $31::BIGINT[], $32::BIGINT[], \
                     $33::BIGINT[], $34::BIGINT[], $35::BIGINT[], $36::BIGINT[], $37::BIGINT[]) \
                     ON CONFLICT (entry) DO NOTHING",
                )
                .await
                .map_err(unavailable)?;
            let batch = Columns::of(&rows);
            tx.execute(&insert, &batch.params()).await.map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)
        })
    }

    fn rows(&self, filter: RowFilter) -> StoreFuture<'_, Vec<StoredRow>> {
        Box::pin(async move {
            let client = self.client().await?;
            let sql = format!(
                "SELECT {ROW_COLUMNS} FROM ledger WHERE ($1::BIGINT IS NULL OR id < $1) AND ($2::TEXT IS NULL OR key_id = $2) \
                 AND ($3::TEXT IS NULL OR pool = $3) AND ($4::TEXT IS NULL OR lane = $4) \
                 AND ($5::INTEGER IS NULL OR (status >= $5 AND status < $7)) AND ($8::TEXT IS NULL OR end_user = $8) \
                 AND ($9::TEXT IS NULL OR request_id = $9) \
                 AND ($10::BIGINT IS NULL OR (at_ms >= $10 AND at_ms < $11)) \
                 AND ($12::TEXT IS NULL OR operation = $12) \
                 AND ($13::TEXT[] IS NULL OR grp = ANY($13)) ORDER BY id DESC LIMIT $6"
            );
            let (after, until) = (filter.at_ms.map(|r| r.0), filter.at_ms.map(|r| r.1));
            let from = filter.status.map(|s| i32::from(s.0));
            let to = filter.status.map(|s| i32::from(s.1));
            let limit = column(filter.limit as u64);
            let rows = client
                .query(
                    &sql,
                    &[
                        &filter.before,
                        &filter.key,
                        &filter.pool,
                        &filter.lane,
                        &from,
                        &limit,
                        &to,
                        &filter.end_user,
                        &filter.request_id,
                        &after,
                        &until,
                        &filter.operation,
                        &filter.groups,
                    ],
                )
                .await
                .map_err(unavailable)?;
            rows.iter().map(row_of).collect()
        })
    }

    fn totals(&self, query: TotalsQuery) -> StoreFuture<'_, Vec<Total>> {
        Box::pin(async move {
            let client = self.client().await?;
            let by = query.by.column();
            let mut plan = crate::spend_plan(query.from_ms, query.to_ms);
            if query.rows_only() {
                plan = crate::SpendPlan { hours: None, rows: vec![(query.from_ms, query.to_ms)] };
            }
            let mut parts = Vec::new();
            // Whole hours from the rollup ('' is its "none").
            if let Some((first, end)) = plan.hours {
                let sql = format!(
                    "SELECT NULLIF({by}, ''), lane, sum(requests)::BIGINT, {SUMS}, {ROLLUP_OUTCOMES}, {KIND_SUMS}, {ROLLUP_SETTLED} \
                     FROM spend_hourly WHERE hour >= $1 AND hour < $2 AND ($3::TEXT IS NULL OR key_id = $3) \
                     AND ($4::TEXT[] IS NULL OR grp = ANY($4)) GROUP BY {by}, lane"
                );
                let rows = client.query(&sql, &[&first, &end, &query.key, &query.groups]).await.map_err(unavailable)?;
                parts.extend(rows.iter().map(total_of).collect::<Result<Vec<_>, _>>()?);
            }
            // The ragged edges from the rows.
            let sql = format!(
                "SELECT {by}, lane, count(*) FILTER (WHERE operation <> 'refused'), {SUMS}, {ROW_OUTCOMES}, {KIND_SUMS}, {ROW_SETTLED} FROM ledger \
                 WHERE at_ms >= $1 AND at_ms < $2 AND ($3::TEXT IS NULL OR key_id = $3) \
                 AND ($4::TEXT[] IS NULL OR grp = ANY($4)) AND ($5::TEXT IS NULL OR end_user = $5) \
                 GROUP BY {by}, lane"
            );
            for (from, to) in plan.rows {
                let rows = client
                    .query(&sql, &[&from, &to, &query.key, &query.groups, &query.end_user])
                    .await
                    .map_err(unavailable)?;
                parts.extend(rows.iter().map(total_of).collect::<Result<Vec<_>, _>>()?);
            }
            Ok(crate::merge_totals(parts))
        })
    }

    fn count(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client.query_one("SELECT count(*) FROM ledger", &[]).await.map_err(unavailable)?;
            Ok(count(col(&row, 0)?))
        })
    }
}

impl AuditLog for PostgresStore {
    fn record(&self, entry: AuditEntry) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            let outcome = i32::from(entry.outcome);
            client
                .execute(
                    "INSERT INTO audit (at_ms, actor, action, target, outcome) VALUES ($1, $2, $3, $4, $5)",
                    &[&entry.at_ms, &entry.actor, &entry.action, &entry.target, &outcome],
                )
                .await
                .map_err(unavailable)?;
            Ok(())
        })
    }

    fn purge(&self, before_ms: i64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            client.execute("DELETE FROM audit WHERE at_ms < $1", &[&before_ms]).await.map_err(unavailable)
        })
    }

    fn entries(&self, before: Option<i64>, limit: usize) -> StoreFuture<'_, Vec<StoredAudit>> {
        Box::pin(async move {
            let client = self.client().await?;
            let limit = column(limit as u64);
            let rows = client
                .query(
                    "SELECT id, at_ms, actor, action, target, outcome FROM audit \
                     WHERE ($1::BIGINT IS NULL OR id < $1) ORDER BY id DESC LIMIT $2",
                    &[&before, &limit],
                )
                .await
                .map_err(unavailable)?;
            rows.iter()
                .map(|row| {
                    Ok(StoredAudit {
                        id: col(row, 0)?,
                        entry: AuditEntry {
                            at_ms: col(row, 1)?,
                            actor: col(row, 2)?,
                            action: col(row, 3)?,
                            target: col(row, 4)?,
                            outcome: u16::try_from(col::<i32>(row, 5)?).unwrap_or(0),
                        },
                    })
                })
                .collect()
        })
    }
}

impl SignatureStore for PostgresStore {
    fn keep_signatures(&self, kept: Vec<KeptSignature>, now_ms: i64) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            // One row per key (the last kept wins): an upsert may not touch a row twice.
            let latest: std::collections::BTreeMap<String, (String, i64)> =
                kept.into_iter().map(|entry| (entry.key, (entry.signature, entry.expires_ms))).collect();
            let mut keys = Vec::with_capacity(latest.len());
            let mut signatures = Vec::with_capacity(latest.len());
            let mut expiries = Vec::with_capacity(latest.len());
            for (key, (signature, expires_ms)) in latest {
                keys.push(key);
                signatures.push(signature);
                expiries.push(expires_ms);
            }
            client
                .execute(
                    "INSERT INTO call_signatures (key, signature, expires_ms) \
                     SELECT * FROM UNNEST($1::TEXT[], $2::TEXT[], $3::BIGINT[]) \
                     ON CONFLICT (key) DO UPDATE SET signature = EXCLUDED.signature, expires_ms = EXCLUDED.expires_ms",
                    &[&keys, &signatures, &expiries],
                )
                .await
                .map_err(unavailable)?;
            client
                .execute("DELETE FROM call_signatures WHERE expires_ms <= $1", &[&now_ms])
                .await
                .map_err(unavailable)?;
            Ok(())
        })
    }

    fn find_signatures(&self, keys: Vec<String>, now_ms: i64) -> StoreFuture<'_, Vec<Option<String>>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT key, signature FROM call_signatures WHERE key = ANY($1::TEXT[]) AND expires_ms > $2",
                    &[&keys, &now_ms],
                )
                .await
                .map_err(unavailable)?;
            let mut found = std::collections::HashMap::with_capacity(rows.len());
            for row in &rows {
                found.insert(col::<String>(row, 0)?, col::<String>(row, 1)?);
            }
            Ok(keys.iter().map(|key| found.remove(key)).collect())
        })
    }
}

impl ContentStore for PostgresStore {
    fn keep_content(&self, kept: Vec<KeptContent>) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            let statement = client
                .prepare_cached(
                    "INSERT INTO kept_content (entry, at_ms, request_id, key_id, grp, user_tag, retention, sealed) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (entry) DO NOTHING",
                )
                .await
                .map_err(unavailable)?;
            for k in &kept {
                client
                    .execute(
                        &statement,
                        &[&k.entry, &k.at_ms, &k.request_id, &k.key_id, &k.group, &k.user_tag, &k.retention, &k.sealed],
                    )
                    .await
                    .map_err(unavailable)?;
            }
            Ok(())
        })
    }

    fn find_content(&self, entry: i64) -> StoreFuture<'_, Option<KeptContent>> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT entry, at_ms, request_id, key_id, grp, user_tag, retention, sealed FROM kept_content \
                     WHERE entry = $1",
                    &[&entry],
                )
                .await
                .map_err(unavailable)?;
            row.map(|row| {
                Ok(KeptContent {
                    entry: col(&row, 0)?,
                    at_ms: col(&row, 1)?,
                    request_id: col(&row, 2)?,
                    key_id: col(&row, 3)?,
                    group: col(&row, 4)?,
                    user_tag: col(&row, 5)?,
                    retention: col(&row, 6)?,
                    sealed: col(&row, 7)?,
                })
            })
            .transpose()
        })
    }

    fn erase_content(&self, user_tag: String) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            client.execute("DELETE FROM kept_content WHERE user_tag = $1", &[&user_tag]).await.map_err(unavailable)
        })
    }

    fn purge_content(&self, before_ms: i64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            client.execute("DELETE FROM kept_content WHERE at_ms < $1", &[&before_ms]).await.map_err(unavailable)
        })
    }
}

fn config_of(row: &tokio_postgres::Row) -> Result<ConfigVersion, StoreError> {
    Ok(ConfigVersion {
        version: col(row, 0)?,
        at_ms: col(row, 1)?,
        author: col(row, 2)?,
        message: col(row, 3)?,
        text: col(row, 4)?,
    })
}

impl ConfigStore for PostgresStore {
    fn append_config(&self, after: i64, version: ConfigVersion) -> StoreFuture<'_, ConfigVersion> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            let newest: i64 = col(
                &tx.query_one("SELECT COALESCE(max(version), 0)::BIGINT FROM config_versions", &[])
                    .await
                    .map_err(unavailable)?,
                0,
            )?;
            if newest != after {
                return Err(StoreError::Stale);
            }
            let stored = ConfigVersion { version: newest + 1, ..version };
            // Two writers that read the same newest version meet at the
            // primary key: the second is stale.
            tx.execute(
                "INSERT INTO config_versions (version, at_ms, author, message, text) VALUES ($1, $2, $3, $4, $5)",
                &[&stored.version, &stored.at_ms, &stored.author, &stored.message, &stored.text],
            )
            .await
            .map_err(|err| match conflict_or_unavailable(err) {
                StoreError::Conflict(_) => StoreError::Stale,
                other => other,
            })?;
            tx.execute("SELECT pg_notify($1, $2)", &[&CONFIG_CHANNEL, &stored.version.to_string()])
                .await
                .map_err(unavailable)?;
            tx.commit().await.map_err(|err| match conflict_or_unavailable(err) {
                StoreError::Conflict(_) => StoreError::Stale,
                other => other,
            })?;
            Ok(stored)
        })
    }

    fn config_versions(&self, before: Option<i64>, limit: usize) -> StoreFuture<'_, Vec<ConfigVersion>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT version, at_ms, author, message, text FROM config_versions \
                     WHERE ($1::BIGINT IS NULL OR version < $1) ORDER BY version DESC LIMIT $2",
                    &[&before, &(limit as i64)],
                )
                .await
                .map_err(unavailable)?;
            rows.iter().map(config_of).collect()
        })
    }

    fn config_version(&self, version: i64) -> StoreFuture<'_, Option<ConfigVersion>> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT version, at_ms, author, message, text FROM config_versions WHERE version = $1",
                    &[&version],
                )
                .await
                .map_err(unavailable)?;
            row.as_ref().map(config_of).transpose()
        })
    }
}

/// The columns of a kept object after its kind and owner.
const OBJECT_COLUMNS: &str = "id, created_ms, expires_ms, meta, size, chunks, user_tag";

/// An object from a row of [`OBJECT_COLUMNS`] (and its body, when asked).
fn object_of(kind: ObjectKind, owner: &str, row: &tokio_postgres::Row, body: bool) -> Result<KeptObject, StoreError> {
    Ok(KeptObject {
        kind,
        owner: owner.to_owned(),
        id: col(row, 0)?,
        created_ms: col(row, 1)?,
        expires_ms: col(row, 2)?,
        meta: col(row, 3)?,
        size: u64::try_from(col::<i64>(row, 4)?).unwrap_or(0),
        chunks: u32::try_from(col::<i32>(row, 5)?).unwrap_or(0),
        user_tag: col(row, 6)?,
        body: if body { col(row, 7)? } else { Vec::new() },
    })
}

/// An `INTEGER` column's value.
fn int(value: u32) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

impl ObjectStore for PostgresStore {
    fn put_object(&self, object: KeptObject) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            tx.execute(
                "INSERT INTO kept_objects (kind, owner, id, created_ms, expires_ms, meta, body, size, chunks, user_tag) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (kind, owner, id) DO UPDATE SET \
                 created_ms = EXCLUDED.created_ms, expires_ms = EXCLUDED.expires_ms, meta = EXCLUDED.meta, \
                 body = EXCLUDED.body, size = EXCLUDED.size, chunks = EXCLUDED.chunks, user_tag = EXCLUDED.user_tag",
                &[
                    &object.kind.as_str(),
                    &object.owner,
                    &object.id,
                    &object.created_ms,
                    &object.expires_ms,
                    &object.meta,
                    &object.body,
                    &i64::try_from(object.size).unwrap_or(i64::MAX),
                    &int(object.chunks),
                    &object.user_tag,
                ],
            )
            .await
            .map_err(unavailable)?;
            tx.execute(
                "DELETE FROM kept_chunks WHERE kind = $1 AND owner = $2 AND id = $3 AND seq >= $4",
                &[&object.kind.as_str(), &object.owner, &object.id, &int(object.chunks)],
            )
            .await
            .map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)
        })
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
        Box::pin(async move {
            let client = self.client().await?;
            client
                .execute(
                    "INSERT INTO kept_chunks (kind, owner, id, seq, at_ms, data) VALUES ($1, $2, $3, $4, $5, $6) \
                     ON CONFLICT (kind, owner, id, seq) DO UPDATE SET at_ms = EXCLUDED.at_ms, data = EXCLUDED.data",
                    &[&kind.as_str(), &owner, &id, &int(seq), &at_ms, &data],
                )
                .await
                .map_err(unavailable)?;
            Ok(())
        })
    }

    fn get_chunk(&self, kind: ObjectKind, owner: String, id: String, seq: u32) -> StoreFuture<'_, Option<Vec<u8>>> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT data FROM kept_chunks WHERE kind = $1 AND owner = $2 AND id = $3 AND seq = $4",
                    &[&kind.as_str(), &owner, &id, &int(seq)],
                )
                .await
                .map_err(unavailable)?;
            row.map(|row| col(&row, 0)).transpose()
        })
    }

    fn get_object(
        &self,
        kind: ObjectKind,
        owner: String,
        id: String,
        now_ms: i64,
    ) -> StoreFuture<'_, Option<KeptObject>> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    &format!(
                        "SELECT {OBJECT_COLUMNS}, body FROM kept_objects \
                         WHERE kind = $1 AND owner = $2 AND id = $3 AND (expires_ms IS NULL OR expires_ms > $4)"
                    ),
                    &[&kind.as_str(), &owner, &id, &now_ms],
                )
                .await
                .map_err(unavailable)?;
            row.map(|row| object_of(kind, &owner, &row, true)).transpose()
        })
    }

    fn list_objects(
        &self,
        kind: ObjectKind,
        owner: String,
        now_ms: i64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<KeptObject>> {
        Box::pin(async move {
            let client = self.client().await?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = client
                .query(
                    &format!(
                        "SELECT {OBJECT_COLUMNS} FROM kept_objects \
                         WHERE kind = $1 AND owner = $2 AND (expires_ms IS NULL OR expires_ms > $3) \
                         ORDER BY created_ms DESC, id DESC LIMIT $4"
                    ),
                    &[&kind.as_str(), &owner, &now_ms, &limit],
                )
                .await
                .map_err(unavailable)?;
            rows.iter().map(|row| object_of(kind, &owner, row, false)).collect()
        })
    }

    fn delete_object(&self, kind: ObjectKind, owner: String, id: String) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            let removed = tx
                .execute(
                    "DELETE FROM kept_objects WHERE kind = $1 AND owner = $2 AND id = $3",
                    &[&kind.as_str(), &owner, &id],
                )
                .await
                .map_err(unavailable)?;
            tx.execute(
                "DELETE FROM kept_chunks WHERE kind = $1 AND owner = $2 AND id = $3",
                &[&kind.as_str(), &owner, &id],
            )
            .await
            .map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)?;
            Ok(removed > 0)
        })
    }

    fn purge_objects(&self, now_ms: i64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            tx.execute(
                "DELETE FROM kept_chunks c USING kept_objects o WHERE o.kind = c.kind AND o.owner = c.owner \
                 AND o.id = c.id AND o.expires_ms IS NOT NULL AND o.expires_ms <= $1",
                &[&now_ms],
            )
            .await
            .map_err(unavailable)?;
            let removed = tx
                .execute("DELETE FROM kept_objects WHERE expires_ms IS NOT NULL AND expires_ms <= $1", &[&now_ms])
                .await
                .map_err(unavailable)?;
            tx.execute(
                "DELETE FROM kept_chunks c WHERE c.at_ms <= $1 AND NOT EXISTS (SELECT 1 FROM kept_objects o \
                 WHERE o.kind = c.kind AND o.owner = c.owner AND o.id = c.id)",
                &[&(now_ms - ORPHAN_CHUNKS_MS)],
            )
            .await
            .map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)?;
            Ok(removed)
        })
    }

    fn erase_objects(&self, user_tag: String) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            tx.execute(
                "DELETE FROM kept_chunks c USING kept_objects o WHERE o.kind = c.kind AND o.owner = c.owner \
                 AND o.id = c.id AND o.user_tag = $1",
                &[&user_tag],
            )
            .await
            .map_err(unavailable)?;
            let removed =
                tx.execute("DELETE FROM kept_objects WHERE user_tag = $1", &[&user_tag]).await.map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)?;
            Ok(removed)
        })
    }

    fn object_bytes(&self, owner: String, now_ms: i64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_one(
                    "SELECT COALESCE(SUM(size), 0)::BIGINT FROM kept_objects \
                     WHERE owner = $1 AND (expires_ms IS NULL OR expires_ms > $2)",
                    &[&owner, &now_ms],
                )
                .await
                .map_err(unavailable)?;
            Ok(u64::try_from(col::<i64>(&row, 0)?).unwrap_or(0))
        })
    }
}

const BATCH_COLUMNS: &str = "id, owner, shape, endpoint, created_ms, expires_ms, cancelled_ms, total, meta";

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
    let rows = client
        .query("SELECT state, COUNT(*), MAX(done_ms) FROM batch_lines WHERE batch = $1 GROUP BY state", &[&id])
        .await
        .map_err(unavailable)?;
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
    let row = client
        .query_opt(
            &format!("SELECT {BATCH_COLUMNS} FROM batches WHERE id = $1 AND owner = $2 AND NOT staged"),
            &[&id, &owner],
        )
        .await
        .map_err(unavailable)?;
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
        &format!("INSERT INTO batches ({BATCH_COLUMNS}, staged) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, TRUE)"),
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
            "UPDATE batches SET bytes = bytes + $2 WHERE id = $1 AND staged",
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
    tx.execute(
        "INSERT INTO batch_lines (batch, idx, custom_id, body) \
         SELECT $1, * FROM UNNEST($2::INTEGER[], $3::TEXT[], $4::BYTEA[])",
        &[&id, &indexes, &custom_ids, &bodies],
    )
    .await
    .map_err(conflict_or_unavailable)?;
    Ok(())
}

/// Opens staged job `id` in `tx`; whether it was staged.
async fn open(tx: &deadpool_postgres::Transaction<'_>, id: &str, total: u32) -> Result<bool, StoreError> {
    let opened = tx
        .execute("UPDATE batches SET staged = FALSE, total = $2 WHERE id = $1 AND staged", &[&id, &int(total)])
        .await
        .map_err(unavailable)?;
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
            let rows = client
                .query(
                    &format!(
                        "SELECT {BATCH_COLUMNS} FROM batches WHERE owner = $1 AND NOT staged \
                         ORDER BY created_ms DESC, id DESC LIMIT $2"
                    ),
                    &[&owner, &limit],
                )
                .await
                .map_err(unavailable)?;
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
                .execute(
                    "UPDATE batches SET cancelled_ms = COALESCE(cancelled_ms, $3) \
                     WHERE id = $1 AND owner = $2 AND NOT staged",
                    &[&id, &owner, &now_ms],
                )
                .await
                .map_err(unavailable)?;
            if changed > 0 {
                tx.execute(
                    "UPDATE batch_lines SET state = $2, done_ms = $3 WHERE batch = $1 AND state = $4",
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
            tx.execute(
                "UPDATE batch_lines SET state = $1, done_ms = $2 WHERE (state = 0 OR (state = 1 AND lease_until < $2)) \
                 AND batch IN (SELECT id FROM batches WHERE expires_ms <= $2 AND cancelled_ms IS NULL AND NOT staged)",
                &[&state_code(LineState::Expired), &now_ms],
            )
            .await
            .map_err(unavailable)?;
            // A cancelled job's line whose claimer died never runs again.
            tx.execute(
                "UPDATE batch_lines SET state = $1, done_ms = $2 WHERE state = 1 AND lease_until < $2 \
                 AND batch IN (SELECT id FROM batches WHERE cancelled_ms IS NOT NULL)",
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
                .query(
                    "WITH open AS ( \
                       SELECT l.batch, l.idx, b.owner, COALESCE(o.turn, 0) AS turn, \
                         ROW_NUMBER() OVER (PARTITION BY b.owner ORDER BY b.created_ms, l.batch, l.idx) AS nth \
                       FROM batch_lines l JOIN batches b ON b.id = l.batch \
                         LEFT JOIN batch_owners o ON o.owner = b.owner \
                       WHERE ((l.state = 0 AND l.not_before <= $1) OR (l.state = 1 AND l.lease_until < $1)) \
                         AND b.cancelled_ms IS NULL AND NOT b.staged AND COALESCE(o.rest_until, 0) <= $1), \
                     picked AS ( \
                       SELECT l.batch, l.idx, open.nth, open.turn FROM batch_lines l \
                         JOIN open ON open.batch = l.batch AND open.idx = l.idx \
                       WHERE open.nth <= $2 \
                         AND ((l.state = 0 AND l.not_before <= $1) OR (l.state = 1 AND l.lease_until < $1)) \
                       ORDER BY open.nth, open.turn, open.owner LIMIT $2 FOR UPDATE OF l SKIP LOCKED) \
                     UPDATE batch_lines l SET state = 1, worker = $3, attempt = l.attempt + 1, lease_until = $4 \
                     FROM picked, batches b WHERE l.batch = picked.batch AND l.idx = picked.idx AND b.id = l.batch \
                     RETURNING l.batch, b.owner, b.endpoint, l.idx, l.custom_id, l.body, l.attempt, picked.nth, picked.turn",
                    &[&now_ms, &limit, &worker, &until],
                )
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
                tx.execute(
                    "INSERT INTO batch_owners (owner, turn) \
                     SELECT t.owner, (SELECT COALESCE(MAX(turn), 0) FROM batch_owners) + t.n \
                     FROM UNNEST($1::TEXT[]) WITH ORDINALITY AS t(owner, n) \
                     ON CONFLICT (owner) DO UPDATE SET turn = EXCLUDED.turn",
                    &[&served],
                )
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
            client
                .execute("UPDATE batch_lines SET lease_until = $2 WHERE state = 1 AND worker = $1", &[&worker, &until])
                .await
                .map_err(unavailable)?;
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
                    "UPDATE batch_lines SET state = $5, status = $6, result = $7, done_ms = $8 \
                     WHERE batch = $1 AND idx = $2 AND state = 1 AND worker = $3 AND attempt = $4",
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
                    "WITH released AS ( \
                       UPDATE batch_lines SET state = 0, worker = NULL, lease_until = 0, not_before = $5 \
                       WHERE batch = $1 AND idx = $2 AND state = 1 AND worker = $3 AND attempt = $4 RETURNING batch) \
                     INSERT INTO batch_owners (owner, rest_until) \
                       SELECT b.owner, $5 FROM batches b JOIN released r ON r.batch = b.id \
                     ON CONFLICT (owner) DO UPDATE \
                       SET rest_until = GREATEST(batch_owners.rest_until, EXCLUDED.rest_until)",
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
            let rows = client
                .query(
                    "SELECT l.idx, l.custom_id, l.state, l.status, l.result, l.done_ms FROM batch_lines l \
                     JOIN batches b ON b.id = l.batch \
                     WHERE l.batch = $1 AND b.owner = $2 AND NOT b.staged AND l.state >= 2 ORDER BY l.idx",
                    &[&id, &owner],
                )
                .await
                .map_err(unavailable)?;
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
            let removed = client
                .execute("DELETE FROM batches WHERE id = $1 AND owner = $2 AND NOT staged", &[&id, &owner])
                .await
                .map_err(unavailable)?;
            Ok(removed > 0)
        })
    }

    fn batch_bytes(&self, owner: String) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_one("SELECT COALESCE(SUM(bytes), 0)::BIGINT FROM batches WHERE owner = $1", &[&owner])
                .await
                .map_err(unavailable)?;
            Ok(u64::try_from(col::<i64>(&row, 0)?).unwrap_or(0))
        })
    }

    fn purge_batches(&self, now_ms: i64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            // Lines go with their job (ON DELETE CASCADE).
            let removed = tx
                .execute("DELETE FROM batches WHERE staged AND created_ms <= $1", &[&(now_ms - STAGED_BATCH_MS)])
                .await
                .map_err(unavailable)?;
            tx.execute(
                "DELETE FROM batch_owners o WHERE NOT EXISTS (SELECT 1 FROM batches b WHERE b.owner = o.owner)",
                &[],
            )
            .await
            .map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)?;
            Ok(removed)
        })
    }
}
