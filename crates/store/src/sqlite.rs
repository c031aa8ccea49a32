//! The single-node store: one SQLite file in WAL mode, migrations embedded
//! and applied at open (`PRAGMA user_version` records the schema). SQLite
//! calls block, so each runs on tokio's blocking pool, one at a time on the
//! one connection (writes are batched by the caller, reads are rare).

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::{params, Connection, OptionalExtension};
use switchyard_governance::KeyRecord;

use crate::kept::{
    BatchJob, BatchQueue, BatchState, ClaimedLine, KeptObject, LineCounts, LineOutcome, LineState, ObjectKind,
    ObjectStore, QueuedLine, ORPHAN_CHUNKS_MS, STAGED_BATCH_MS,
};
use crate::{
    from_json, to_json, AuditEntry, AuditLog, Charge, ConfigStore, ConfigVersion, ContentStore, GroupRecord,
    GroupStore, Idempotency, KeptContent, KeptPin, KeptSignature, KeyStore, Ledger, LedgerRow, PinStore, RowFilter,
    SignatureStore, StoreError, StoreFuture, StoredAudit, StoredRow, Tokens, Total, TotalsQuery, Written,
};

/// Prepared statements the connection keeps (the store runs about 30 kinds).
const STATEMENTS_KEPT: usize = 64;

/// The schema, in order; `user_version` is the count applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/sqlite/0001_init.sql"),
    include_str!("../migrations/sqlite/0002_ledger_entry.sql"),
    include_str!("../migrations/sqlite/0003_ledger_attempts.sql"),
    include_str!("../migrations/sqlite/0004_spend_hourly.sql"),
    include_str!("../migrations/sqlite/0005_audit_at.sql"),
    include_str!("../migrations/sqlite/0006_operations.sql"),
    include_str!("../migrations/sqlite/0007_call_signatures.sql"),
    include_str!("../migrations/sqlite/0008_ledger_notes.sql"),
    include_str!("../migrations/sqlite/0009_kept_content.sql"),
    include_str!("../migrations/sqlite/0010_cache_saved.sql"),
    include_str!("../migrations/sqlite/0011_end_user.sql"),
    include_str!("../migrations/sqlite/0012_config_versions.sql"),
    include_str!("../migrations/sqlite/0013_ingress.sql"),
    include_str!("../migrations/sqlite/0014_outcomes.sql"),
    include_str!("../migrations/sqlite/0015_kept.sql"),
    include_str!("../migrations/sqlite/0016_ledger_operation.sql"),
    include_str!("../migrations/sqlite/0017_kept_limits.sql"),
    include_str!("../migrations/sqlite/0018_refusals_counted.sql"),
    include_str!("../migrations/sqlite/0019_usage_kinds.sql"),
    include_str!("../migrations/sqlite/0020_charges.sql"),
    include_str!("../migrations/sqlite/0021_session_pins.sql"),
];

/// A store in one SQLite file.
#[derive(Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
}

fn unavailable(err: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(err.to_string())
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and brings its
    /// schema up to date.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let conn = Connection::open(path).map_err(|err| unavailable(format!("{}: {err}", path.display())))?;
        SqliteStore::init(conn)
    }

    /// Deletes ledger rows by id (a spool's rows once another store took them).
    pub fn delete_rows(&self, ids: Vec<i64>) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            {
                let mut delete = tx.prepare_cached("DELETE FROM ledger WHERE id = ?1").map_err(unavailable)?;
                for id in &ids {
                    delete.execute(params![id]).map_err(unavailable)?;
                }
            }
            tx.commit().map_err(unavailable)
        })
    }

    /// A private in-memory database (tests).
    pub fn in_memory() -> Result<SqliteStore, StoreError> {
        SqliteStore::init(Connection::open_in_memory().map_err(unavailable)?)
    }

    fn init(conn: Connection) -> Result<SqliteStore, StoreError> {
        conn.pragma_update(None, "journal_mode", "WAL").map_err(unavailable)?;
        // WAL with NORMAL sync: a crash of the process loses nothing
        // committed; a power loss may lose the last transactions.
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(unavailable)?;
        conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(unavailable)?;
        // Every statement the store runs stays prepared (rusqlite keeps 16 by
        // default; the store has about 30, and the ledger's 32-row insert is
        // dear to prepare again).
        conn.set_prepared_statement_cache_capacity(STATEMENTS_KEPT);
        let applied: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).map_err(unavailable)?;
        let applied = crate::applied_migrations(applied, MIGRATIONS.len())?;
        for (index, migration) in MIGRATIONS.iter().enumerate().skip(applied) {
            conn.execute_batch(&format!("BEGIN;\n{migration}\nPRAGMA user_version = {};\nCOMMIT;", index + 1))
                .map_err(|err| unavailable(format!("migration {}: {err}", index + 1)))?;
        }
        Ok(SqliteStore { conn: Arc::new(Mutex::new(conn)) })
    }

    /// Runs `f` on the connection on the blocking pool.
    fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        let conn = self.conn.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || f(&mut conn.lock().unwrap_or_else(PoisonError::into_inner)))
                .await
                .map_err(unavailable)?
        })
    }
}

fn conflict_or_unavailable(err: rusqlite::Error) -> StoreError {
    match err.sqlite_error_code() {
        Some(rusqlite::ErrorCode::ConstraintViolation) => StoreError::Conflict(err.to_string()),
        _ => unavailable(err),
    }
}

/// An idempotent key write inside one transaction.
fn write_key(
    conn: &mut Connection,
    scope: &str,
    record: KeyRecord,
    idempotency: Option<Idempotency>,
    write: impl FnOnce(&rusqlite::Transaction<'_>, KeyRecord) -> Result<KeyRecord, StoreError>,
) -> Result<Written, StoreError> {
    let tx = conn.transaction().map_err(unavailable)?;
    if let Some(idem) = &idempotency {
        tx.execute("DELETE FROM idempotency WHERE at_ms < ?1", params![idem.oldest_ms()]).map_err(unavailable)?;
        let earlier: Option<(String, String)> = tx
            .query_row(
                "SELECT fingerprint, key_id FROM idempotency WHERE scope = ?1 AND key = ?2",
                params![scope, idem.key],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()
            .map_err(unavailable)?;
        if let Some((fingerprint, id)) = earlier {
            if fingerprint != idem.fingerprint {
                return Err(StoreError::Conflict("the idempotency key was used for another request".into()));
            }
            let text: Option<String> = tx
                .query_row("SELECT record FROM keys WHERE id = ?1", params![id], |row| row.get(0))
                .optional()
                .map_err(unavailable)?;
            return text.map(|t| from_json(&t).map(Written::Replayed)).ok_or(StoreError::NotFound)?;
        }
    }
    let stored = write(&tx, record)?;
    if let Some(idem) = idempotency {
        tx.execute(
            "INSERT INTO idempotency (scope, key, fingerprint, key_id, at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![scope, idem.key, idem.fingerprint, stored.id, idem.at_ms],
        )
        .map_err(conflict_or_unavailable)?;
    }
    tx.commit().map_err(unavailable)?;
    Ok(Written::New(stored))
}

fn insert_key(tx: &rusqlite::Transaction<'_>, record: KeyRecord) -> Result<KeyRecord, StoreError> {
    let aws = record.aws.as_ref().map(|a| a.access_key_id.clone());
    tx.execute(
        "INSERT INTO keys (id, hash, aws_access_key_id, record) VALUES (?1, ?2, ?3, ?4)",
        params![record.id, record.hash.to_hex(), aws, to_json(&record)?],
    )
    .map_err(conflict_or_unavailable)?;
    Ok(record)
}

/// Replaces a stored key with `record` when the checks allow it (read and
/// written in one transaction).
fn replace_key(tx: &rusqlite::Transaction<'_>, record: KeyRecord) -> Result<KeyRecord, StoreError> {
    let text: Option<String> = tx
        .query_row("SELECT record FROM keys WHERE id = ?1", params![record.id], |row| row.get(0))
        .optional()
        .map_err(unavailable)?;
    let stored: KeyRecord = from_json(&text.ok_or(StoreError::NotFound)?)?;
    let next = crate::checked_write(&stored, record)?;
    let aws = next.aws.as_ref().map(|a| a.access_key_id.clone());
    tx.execute(
        "UPDATE keys SET hash = ?2, aws_access_key_id = ?3, record = ?4 WHERE id = ?1",
        params![next.id, next.hash.to_hex(), aws, to_json(&next)?],
    )
    .map_err(conflict_or_unavailable)?;
    Ok(next)
}

impl KeyStore for SqliteStore {
    fn create_key(&self, record: KeyRecord, idempotency: Option<Idempotency>) -> StoreFuture<'_, Written> {
        self.run(move |conn| write_key(conn, "create", record, idempotency, insert_key))
    }

    fn rotate_key(&self, record: KeyRecord, idempotency: Option<Idempotency>) -> StoreFuture<'_, Written> {
        let scope = format!("rotate:{}", record.id);
        self.run(move |conn| write_key(conn, &scope, record, idempotency, replace_key))
    }

    fn update_key(&self, record: KeyRecord) -> StoreFuture<'_, KeyRecord> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            let stored = replace_key(&tx, record)?;
            tx.commit().map_err(unavailable)?;
            Ok(stored)
        })
    }

    fn get_key(&self, id: &str) -> StoreFuture<'_, Option<KeyRecord>> {
        let id = id.to_owned();
        self.run(move |conn| {
            let text: Option<String> = conn
                .query_row("SELECT record FROM keys WHERE id = ?1", params![id], |row| row.get(0))
                .optional()
                .map_err(unavailable)?;
            text.map(|t| from_json(&t)).transpose()
        })
    }

    fn list_keys(&self, after: Option<&str>, limit: usize) -> StoreFuture<'_, Vec<KeyRecord>> {
        let after = after.unwrap_or("").to_owned();
        self.run(move |conn| {
            let mut statement =
                conn.prepare("SELECT record FROM keys WHERE id > ?1 ORDER BY id LIMIT ?2").map_err(unavailable)?;
            let texts = statement
                .query_map(params![after, limit as i64], |row| row.get::<_, String>(0))
                .map_err(unavailable)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(unavailable)?;
            texts.iter().map(|t| from_json(t)).collect()
        })
    }
}

impl GroupStore for SqliteStore {
    fn put_group(&self, group: GroupRecord) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            conn.execute(
                "INSERT INTO groups (name, record) VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET record = excluded.record",
                params![group.name, to_json(&group)?],
            )
            .map_err(unavailable)?;
            Ok(())
        })
    }

    fn delete_group(&self, name: &str) -> StoreFuture<'_, ()> {
        let name = name.to_owned();
        self.run(move |conn| match conn.execute("DELETE FROM groups WHERE name = ?1", params![name]) {
            Ok(0) => Err(StoreError::NotFound),
            Ok(_) => Ok(()),
            Err(err) => Err(unavailable(err)),
        })
    }

    fn list_groups(&self) -> StoreFuture<'_, Vec<GroupRecord>> {
        self.run(move |conn| {
            let mut statement = conn.prepare("SELECT record FROM groups ORDER BY name").map_err(unavailable)?;
            let texts = statement
                .query_map([], |row| row.get::<_, String>(0))
                .map_err(unavailable)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(unavailable)?;
            texts.iter().map(|t| from_json(t)).collect()
        })
    }
}

/// Runs a spend query whose columns are value, lane, requests and the
/// four token sums.
fn sums(conn: &rusqlite::Connection, sql: &str, params: impl rusqlite::Params) -> Result<Vec<Total>, StoreError> {
    let mut statement = conn.prepare_cached(sql).map_err(unavailable)?;
    let count = |row: &rusqlite::Row<'_>, index: usize| -> rusqlite::Result<u64> {
        Ok(row.get::<_, Option<i64>>(index)?.unwrap_or(0).max(0) as u64)
    };
    let totals = statement
        .query_map(params, |row| {
            let mut counts = [0u64; crate::SUMS];
            for (slot, value) in counts.iter_mut().enumerate() {
                *value = count(row, 2 + slot)?;
            }
            Ok(Total::of_columns(row.get(0)?, row.get(1)?, counts))
        })
        .map_err(unavailable)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(unavailable)?;
    Ok(totals)
}

fn row_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredRow> {
    let count = |index: usize| -> rusqlite::Result<u64> { Ok(row.get::<_, i64>(index)?.max(0) as u64) };
    Ok(StoredRow {
        id: row.get(0)?,
        row: LedgerRow {
            at_ms: row.get(1)?,
            request_id: row.get(2)?,
            key_id: row.get(3)?,
            group: row.get(4)?,
            pool: row.get(5)?,
            lane: row.get(6)?,
            model: row.get(7)?,
            tokens: Tokens {
                input: count(8)?,
                output: count(9)?,
                cache_read: count(10)?,
                cache_write: count(11)?,
                cache_write_1h: count(26)?,
                reasoning: count(27)?,
                audio_input: count(28)?,
                audio_output: count(29)?,
                image_input: count(30)?,
                image_output: count(31)?,
                units: count(19)?,
                requests: count(20)?,
            },
            operation: row.get(21)?,
            status: row.get(12)?,
            latency_ms: count(13)?,
            ttfb_ms: row.get::<_, Option<i64>>(14)?.map(|t| t.max(0) as u64),
            failovers: row.get(15)?,
            estimated: row.get(16)?,
            entry: row.get(17)?,
            attempts: crate::attempts_of(row.get(18)?),
            notes: crate::notes_of(row.get(22)?),
            end_user: row.get(23)?,
            ingress: row.get(24)?,
            stream: row.get(25)?,
            charge: match (row.get::<_, Option<i64>>(32)?, row.get::<_, Option<i64>>(33)?) {
                (Some(cost), Some(price)) => {
                    Some(Charge { cost_nano: cost.max(0) as u64, price_nano: price.max(0) as u64 })
                }
                _ => None,
            },
        },
    })
}

const ROW_COLUMNS: &str = "id, at_ms, request_id, key_id, grp, pool, lane, model, input_tokens, output_tokens, \
     cache_read_tokens, cache_write_tokens, status, latency_ms, ttfb_ms, failovers, estimated, entry, attempts, units, \
     billed_requests, operation, notes, end_user, ingress, stream, cache_write_1h_tokens, reasoning_tokens, \
     audio_input_tokens, audio_output_tokens, image_input_tokens, image_output_tokens, cost_nano, price_nano";

/// The ledger's columns an append writes, in the order [`bind_row`] binds them.
const INSERT_COLUMNS: &str = "at_ms, request_id, key_id, grp, pool, lane, model, input_tokens, output_tokens, \
     cache_read_tokens, cache_write_tokens, status, latency_ms, ttfb_ms, failovers, estimated, entry, attempts, units, \
     billed_requests, operation, notes, saved_nano, end_user, ingress, stream, cache_hit, guarded, refused, \
     cache_write_1h_tokens, reasoning_tokens, audio_input_tokens, audio_output_tokens, image_input_tokens, \
     image_output_tokens, cost_nano, price_nano";

/// How many columns [`INSERT_COLUMNS`] names.
const INSERT_WIDTH: usize = count_columns(INSERT_COLUMNS);

/// The names in a comma-separated column list.
const fn count_columns(list: &str) -> usize {
    let bytes = list.as_bytes();
    let (mut count, mut at) = (1, 0);
    while at < bytes.len() {
        if bytes[at] == b',' {
            count += 1;
        }
        at += 1;
    }
    count
}

/// Ledger rows one statement inserts: a batch is cut into statements of
/// this many (`INSERT_WIDTH` × 32 = 1,120 parameters, far below SQLite's
/// 32,766), so the statement's own cost (reset, cursors, halt) is paid once
/// per 32 rows; the rest of a batch goes one row at a time.
const ROWS_PER_INSERT: usize = 32;

/// `INSERT` of `rows` ledger rows; one whose entry is already stored is skipped.
fn insert_sql(rows: usize) -> String {
    let one = format!("({})", vec!["?"; INSERT_WIDTH].join(", "));
    let values = vec![one.as_str(); rows].join(", ");
    format!("INSERT INTO ledger ({INSERT_COLUMNS}) VALUES {values} ON CONFLICT DO NOTHING")
}

static INSERT_ONE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| insert_sql(1));
static INSERT_MANY: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| insert_sql(ROWS_PER_INSERT));

/// Binds `row` to the parameters after `before` (a multiple of [`INSERT_WIDTH`]).
fn bind_row(insert: &mut rusqlite::Statement<'_>, before: usize, row: &LedgerRow) -> rusqlite::Result<()> {
    let mut at = before;
    let mut bind = |value: &dyn rusqlite::ToSql| {
        at += 1;
        insert.raw_bind_parameter(at, value)
    };
    let t = &row.tokens;
    bind(&row.at_ms)?;
    bind(&row.request_id)?;
    bind(&row.key_id)?;
    bind(&row.group)?;
    bind(&row.pool)?;
    bind(&row.lane)?;
    bind(&row.model)?;
    bind(&(row.tokens.input as i64))?;
    bind(&(row.tokens.output as i64))?;
    bind(&(row.tokens.cache_read as i64))?;
    bind(&(row.tokens.cache_write as i64))?;
    bind(&row.status)?;
    bind(&(row.latency_ms as i64))?;
    bind(&row.ttfb_ms.map(|t| t as i64))?;
    bind(&row.failovers)?;
    bind(&row.estimated)?;
    bind(&row.entry)?;
    bind(&crate::attempts_column(&row.attempts))?;
    bind(&(row.tokens.units as i64))?;
    bind(&(row.tokens.requests as i64))?;
    bind(&row.operation)?;
    bind(&crate::notes_column(&row.notes))?;
    bind(&(row.notes.cache_saved_nano.unwrap_or(0).min(i64::MAX as u64) as i64))?;
    bind(&row.end_user)?;
    bind(&row.ingress)?;
    bind(&row.stream)?;
    bind(&(row.notes.cache_hit() as i64))?;
    bind(&(row.notes.guarded() as i64))?;
    bind(&(row.refusals().min(i64::MAX as u64) as i64))?;
    for kind in [t.cache_write_1h, t.reasoning, t.audio_input, t.audio_output, t.image_input, t.image_output] {
        bind(&i64::try_from(kind).unwrap_or(i64::MAX))?;
    }
    bind(&row.charge.map(|c| i64::try_from(c.cost_nano).unwrap_or(i64::MAX)))?;
    bind(&row.charge.map(|c| i64::try_from(c.price_nano).unwrap_or(i64::MAX)))?;
    Ok(())
}

/// Inserts `rows` one statement each, adding to `fresh` the ones stored
/// (not already there by their entry).
fn insert_each<'a>(
    one: &mut rusqlite::Statement<'_>,
    rows: &'a [LedgerRow],
    fresh: &mut Vec<&'a LedgerRow>,
) -> rusqlite::Result<()> {
    for row in rows {
        bind_row(one, 0, row)?;
        if one.raw_execute()? > 0 {
            fresh.push(row);
        }
    }
    Ok(())
}

impl Ledger for SqliteStore {
    fn append(&self, rows: std::sync::Arc<[LedgerRow]>) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            {
                let mut one = tx.prepare_cached(&INSERT_ONE).map_err(unavailable)?;
                // A row whose entry is already stored (a batch line run again) is not counted twice.
                let mut fresh = Vec::with_capacity(rows.len());
                let mut chunks = rows.chunks_exact(ROWS_PER_INSERT);
                if chunks.len() > 0 {
                    let mut many = tx.prepare_cached(&INSERT_MANY).map_err(unavailable)?;
                    let mut mark = tx.prepare_cached("SAVEPOINT ledger_rows").map_err(unavailable)?;
                    let mut release = tx.prepare_cached("RELEASE ledger_rows").map_err(unavailable)?;
                    let mut undo = tx.prepare_cached("ROLLBACK TO ledger_rows").map_err(unavailable)?;
                    for chunk in &mut chunks {
                        mark.execute([]).map_err(unavailable)?;
                        for (i, row) in chunk.iter().enumerate() {
                            bind_row(&mut many, i * INSERT_WIDTH, row).map_err(unavailable)?;
                        }
                        if many.raw_execute().map_err(unavailable)? < chunk.len() {
                            // Some entry was stored before: undone, and inserted
                            // row by row to learn which rows are new.
                            undo.execute([]).map_err(unavailable)?;
                            release.execute([]).map_err(unavailable)?;
                            insert_each(&mut one, chunk, &mut fresh).map_err(unavailable)?;
                        } else {
                            release.execute([]).map_err(unavailable)?;
                            fresh.extend(chunk);
                        }
                    }
                }
                insert_each(&mut one, chunks.remainder(), &mut fresh).map_err(unavailable)?;
                // The hourly rollup moves with the rows, in the same transaction.
                let mut upsert = tx
                    .prepare_cached(
                        "INSERT INTO spend_hourly (hour, key_id, grp, lane, model, operation, requests, input_tokens, \
                         output_tokens, cache_read_tokens, cache_write_tokens, units, billed_requests, saved_nano, \
                         cache_hits, guarded, refused, cache_write_1h_tokens, reasoning_tokens, audio_input_tokens, \
                         audio_output_tokens, image_input_tokens, image_output_tokens, cost_nano, price_nano, unsettled) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, \
                         ?20, ?21, ?22, ?23, ?24, ?25, ?26) \
                         ON CONFLICT (hour, key_id, grp, lane, model, operation) DO UPDATE SET \
                         requests = requests + excluded.requests, input_tokens = input_tokens + excluded.input_tokens, \
                         output_tokens = output_tokens + excluded.output_tokens, \
                         cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens, \
                         cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens, \
                         units = units + excluded.units, billed_requests = billed_requests + excluded.billed_requests, \
                         saved_nano = saved_nano + excluded.saved_nano, cache_hits = cache_hits + excluded.cache_hits, \
                         guarded = guarded + excluded.guarded, refused = refused + excluded.refused, \
                         cache_write_1h_tokens = cache_write_1h_tokens + excluded.cache_write_1h_tokens, \
                         reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens, \
                         audio_input_tokens = audio_input_tokens + excluded.audio_input_tokens, \
                         audio_output_tokens = audio_output_tokens + excluded.audio_output_tokens, \
                         image_input_tokens = image_input_tokens + excluded.image_input_tokens, \
                         image_output_tokens = image_output_tokens + excluded.image_output_tokens, \
                         cost_nano = cost_nano + excluded.cost_nano, price_nano = price_nano + excluded.price_nano, \
                         unsettled = unsettled + excluded.unsettled",
                    )
                    .map_err(unavailable)?;
                for ((hour, key, group, lane, model, operation), sums) in crate::by_hour(fresh) {
                    let [n, input, output, read, write, units, billed, saved, hits, guarded, refused, write_1h, reasoning, audio_in, audio_out, image_in, image_out, cost, price, unsettled] =
                        sums;
                    upsert
                        .execute(params![
                            hour, key, group, lane, model, operation, n, input, output, read, write, units, billed,
                            saved, hits, guarded, refused, write_1h, reasoning, audio_in, audio_out, image_in,
                            image_out, cost, price, unsettled
                        ])
                        .map_err(unavailable)?;
                }
            }
            tx.commit().map_err(unavailable)
        })
    }

    fn rows(&self, filter: RowFilter) -> StoreFuture<'_, Vec<StoredRow>> {
        self.run(move |conn| {
            let sql = format!(
                "SELECT {ROW_COLUMNS} FROM ledger WHERE (?1 IS NULL OR id < ?1) AND (?2 IS NULL OR key_id = ?2) \
                 AND (?3 IS NULL OR pool = ?3) AND (?4 IS NULL OR lane = ?4) \
                 AND (?5 IS NULL OR (status >= ?5 AND status < ?7)) AND (?8 IS NULL OR end_user = ?8) \
                 AND (?9 IS NULL OR request_id = ?9) AND (?10 IS NULL OR (at_ms >= ?10 AND at_ms < ?11)) \
                 AND (?12 IS NULL OR operation = ?12) \
                 AND (?13 IS NULL OR grp IN (SELECT value FROM json_each(?13))) ORDER BY id DESC LIMIT ?6"
            );
            let (after, until) = (filter.at_ms.map(|r| r.0), filter.at_ms.map(|r| r.1));
            let groups = filter.groups.as_ref().map(|gs| serde_json::to_string(gs).unwrap_or_default());
            let mut statement = conn.prepare_cached(&sql).map_err(unavailable)?;
            let (from, to) = (filter.status.map(|s| s.0), filter.status.map(|s| s.1));
            let rows = statement
                .query_map(
                    params![
                        filter.before,
                        filter.key,
                        filter.pool,
                        filter.lane,
                        from,
                        filter.limit as i64,
                        to,
                        filter.end_user,
                        filter.request_id,
                        after,
                        until,
                        filter.operation,
                        groups
                    ],
                    row_of,
                )
                .map_err(unavailable)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(unavailable)?;
            Ok(rows)
        })
    }

    fn totals(&self, query: TotalsQuery) -> StoreFuture<'_, Vec<Total>> {
        self.run(move |conn| {
            let column = query.by.column();
            let groups = query.groups.as_ref().map(|gs| serde_json::to_string(gs).unwrap_or_default());
            let mut plan = crate::spend_plan(query.from_ms, query.to_ms);
            if query.rows_only() {
                plan = crate::SpendPlan { hours: None, rows: vec![(query.from_ms, query.to_ms)] };
            }
            let mut parts = Vec::new();
            // Whole hours from the rollup ('' is its "none").
            if let Some((first, end)) = plan.hours {
                let sql = format!(
                    "SELECT NULLIF({column}, ''), lane, sum(requests), {} FROM spend_hourly WHERE hour >= ?1 \
                     AND hour < ?2 AND (?3 IS NULL OR key_id = ?3) \
                     AND (?4 IS NULL OR grp IN (SELECT value FROM json_each(?4))) GROUP BY {column}, lane",
                    crate::ROLLUP_SUMS
                );
                parts.extend(sums(conn, &sql, params![first, end, query.key, groups])?);
            }
            // The ragged edges from the rows.
            let sql = format!(
                "SELECT {column}, lane, sum(operation <> 'refused'), {} FROM ledger WHERE at_ms >= ?1 AND at_ms < ?2 \
                 AND (?3 IS NULL OR key_id = ?3) AND (?4 IS NULL OR grp IN (SELECT value FROM json_each(?4))) \
                 AND (?5 IS NULL OR end_user = ?5) GROUP BY {column}, lane",
                crate::ROW_SUMS
            );
            for (from, to) in plan.rows {
                parts.extend(sums(conn, &sql, params![from, to, query.key, groups, query.end_user])?);
            }
            Ok(crate::merge_totals(parts))
        })
    }

    fn count(&self) -> StoreFuture<'_, u64> {
        self.run(|conn| {
            conn.query_row("SELECT count(*) FROM ledger", [], |row| row.get::<_, i64>(0))
                .map(|n| n.max(0) as u64)
                .map_err(unavailable)
        })
    }
}

impl AuditLog for SqliteStore {
    fn record(&self, entry: AuditEntry) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            conn.execute(
                "INSERT INTO audit (at_ms, actor, action, target, outcome) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![entry.at_ms, entry.actor, entry.action, entry.target, entry.outcome],
            )
            .map_err(unavailable)?;
            Ok(())
        })
    }

    fn purge(&self, before_ms: i64) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            let removed =
                conn.execute("DELETE FROM audit WHERE at_ms < ?1", params![before_ms]).map_err(unavailable)?;
            Ok(removed as u64)
        })
    }

    fn entries(&self, before: Option<i64>, limit: usize) -> StoreFuture<'_, Vec<StoredAudit>> {
        self.run(move |conn| {
            let mut statement = conn
                .prepare_cached(
                    "SELECT id, at_ms, actor, action, target, outcome FROM audit WHERE (?1 IS NULL OR id < ?1) \
                     ORDER BY id DESC LIMIT ?2",
                )
                .map_err(unavailable)?;
            let entries = statement
                .query_map(params![before, limit as i64], |row| {
                    Ok(StoredAudit {
                        id: row.get(0)?,
                        entry: AuditEntry {
                            at_ms: row.get(1)?,
                            actor: row.get(2)?,
                            action: row.get(3)?,
                            target: row.get(4)?,
                            outcome: row.get(5)?,
                        },
                    })
                })
                .map_err(unavailable)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(unavailable)?;
            Ok(entries)
        })
    }
}

impl SignatureStore for SqliteStore {
    fn keep_signatures(&self, kept: Vec<KeptSignature>, now_ms: i64) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            {
                let mut upsert = tx
                    .prepare_cached(
                        "INSERT INTO call_signatures (key, signature, expires_ms) VALUES (?1, ?2, ?3) \
                         ON CONFLICT (key) DO UPDATE SET signature = excluded.signature, expires_ms = excluded.expires_ms",
                    )
                    .map_err(unavailable)?;
                for entry in &kept {
                    upsert.execute(params![entry.key, entry.signature, entry.expires_ms]).map_err(unavailable)?;
                }
            }
            tx.execute("DELETE FROM call_signatures WHERE expires_ms <= ?1", params![now_ms]).map_err(unavailable)?;
            tx.commit().map_err(unavailable)
        })
    }

    fn find_signatures(&self, keys: Vec<String>, now_ms: i64) -> StoreFuture<'_, Vec<Option<String>>> {
        self.run(move |conn| {
            let mut find = conn
                .prepare_cached("SELECT signature FROM call_signatures WHERE key = ?1 AND expires_ms > ?2")
                .map_err(unavailable)?;
            keys.iter()
                .map(|key| find.query_row(params![key, now_ms], |row| row.get(0)).optional().map_err(unavailable))
                .collect()
        })
    }
}

impl PinStore for SqliteStore {
    fn keep_pins(&self, pins: Vec<KeptPin>, now_ms: i64) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            {
                let mut upsert = tx
                    .prepare_cached(
                        "INSERT INTO session_pins (pool, session, lane, expires_ms, switches) VALUES (?1, ?2, ?3, ?4, ?5) \
                         ON CONFLICT (pool, session) DO UPDATE SET lane = excluded.lane, \
                         expires_ms = excluded.expires_ms, switches = excluded.switches",
                    )
                    .map_err(unavailable)?;
                for pin in &pins {
                    upsert
                        .execute(params![pin.pool, pin.session, pin.lane, pin.expires_ms, i64::from(pin.switches)])
                        .map_err(unavailable)?;
                }
            }
            tx.execute("DELETE FROM session_pins WHERE expires_ms <= ?1", params![now_ms]).map_err(unavailable)?;
            tx.commit().map_err(unavailable)
        })
    }

    fn live_pins(&self, now_ms: i64, per_pool: usize) -> StoreFuture<'_, Vec<KeptPin>> {
        self.run(move |conn| {
            conn.execute("DELETE FROM session_pins WHERE expires_ms <= ?1", params![now_ms]).map_err(unavailable)?;
            let per_pool = i64::try_from(per_pool).unwrap_or(i64::MAX);
            // The longest-lived first, at most `per_pool` of each pool.
            let mut select = conn
                .prepare_cached(
                    "SELECT pool, session, lane, expires_ms, switches FROM ( \
                       SELECT *, ROW_NUMBER() OVER (PARTITION BY pool ORDER BY expires_ms DESC) AS rank \
                       FROM session_pins) WHERE rank <= ?1 ORDER BY pool, expires_ms DESC",
                )
                .map_err(unavailable)?;
            let pins = select
                .query_map(params![per_pool], |row| {
                    Ok(KeptPin {
                        pool: row.get(0)?,
                        session: row.get(1)?,
                        lane: row.get(2)?,
                        expires_ms: row.get(3)?,
                        switches: u32::try_from(row.get::<_, i64>(4)?).unwrap_or(u32::MAX),
                    })
                })
                .map_err(unavailable)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(unavailable)?;
            Ok(pins)
        })
    }
}

impl ContentStore for SqliteStore {
    fn keep_content(&self, kept: Vec<KeptContent>) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            {
                let mut insert = tx
                    .prepare_cached(
                        "INSERT INTO kept_content (entry, at_ms, request_id, key_id, grp, user_tag, retention, sealed) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (entry) DO NOTHING",
                    )
                    .map_err(unavailable)?;
                for k in &kept {
                    insert
                        .execute(params![
                            k.entry,
                            k.at_ms,
                            k.request_id,
                            k.key_id,
                            k.group,
                            k.user_tag,
                            k.retention,
                            k.sealed
                        ])
                        .map_err(unavailable)?;
                }
            }
            tx.commit().map_err(unavailable)
        })
    }

    fn find_content(&self, entry: i64) -> StoreFuture<'_, Option<KeptContent>> {
        self.run(move |conn| {
            conn.prepare_cached(
                "SELECT entry, at_ms, request_id, key_id, grp, user_tag, retention, sealed FROM kept_content WHERE entry = ?1",
            )
            .map_err(unavailable)?
            .query_row(params![entry], |row| {
                Ok(KeptContent {
                    entry: row.get(0)?,
                    at_ms: row.get(1)?,
                    request_id: row.get(2)?,
                    key_id: row.get(3)?,
                    group: row.get(4)?,
                    user_tag: row.get(5)?,
                    retention: row.get(6)?,
                    sealed: row.get(7)?,
                })
            })
            .optional()
            .map_err(unavailable)
        })
    }

    fn erase_content(&self, user_tag: String) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            conn.execute("DELETE FROM kept_content WHERE user_tag = ?1", params![user_tag])
                .map(|n| n as u64)
                .map_err(unavailable)
        })
    }

    fn purge_content(&self, before_ms: i64) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            conn.execute("DELETE FROM kept_content WHERE at_ms < ?1", params![before_ms])
                .map(|n| n as u64)
                .map_err(unavailable)
        })
    }
}

fn config_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<ConfigVersion> {
    Ok(ConfigVersion {
        version: row.get(0)?,
        at_ms: row.get(1)?,
        author: row.get(2)?,
        message: row.get(3)?,
        text: row.get(4)?,
    })
}

impl ConfigStore for SqliteStore {
    fn append_config(&self, after: i64, version: ConfigVersion) -> StoreFuture<'_, ConfigVersion> {
        self.run(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(unavailable)?;
            let newest: i64 = tx
                .query_row("SELECT COALESCE(max(version), 0) FROM config_versions", [], |row| row.get(0))
                .map_err(unavailable)?;
            if newest != after {
                return Err(StoreError::Stale);
            }
            let stored = ConfigVersion { version: newest + 1, ..version };
            tx.execute(
                "INSERT INTO config_versions (version, at_ms, author, message, text) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![stored.version, stored.at_ms, stored.author, stored.message, stored.text],
            )
            .map_err(unavailable)?;
            tx.commit().map_err(unavailable)?;
            Ok(stored)
        })
    }

    fn config_versions(&self, before: Option<i64>, limit: usize) -> StoreFuture<'_, Vec<ConfigVersion>> {
        self.run(move |conn| {
            let mut query = conn
                .prepare_cached(
                    "SELECT version, at_ms, author, message, text FROM config_versions \
                     WHERE (?1 IS NULL OR version < ?1) ORDER BY version DESC LIMIT ?2",
                )
                .map_err(unavailable)?;
            let rows = query.query_map(params![before, limit as i64], config_of).map_err(unavailable)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(unavailable)
        })
    }

    fn config_version(&self, version: i64) -> StoreFuture<'_, Option<ConfigVersion>> {
        self.run(move |conn| {
            conn.query_row(
                "SELECT version, at_ms, author, message, text FROM config_versions WHERE version = ?1",
                params![version],
                config_of,
            )
            .optional()
            .map_err(unavailable)
        })
    }
}

/// The columns of a kept object after its kind and owner.
const OBJECT_COLUMNS: &str = "id, created_ms, expires_ms, meta, size, chunks, user_tag";

/// An object from a row of [`OBJECT_COLUMNS`] (and its body, when asked).
fn object_of(kind: ObjectKind, owner: &str, row: &rusqlite::Row<'_>, body: bool) -> rusqlite::Result<KeptObject> {
    Ok(KeptObject {
        kind,
        owner: owner.to_owned(),
        id: row.get(0)?,
        created_ms: row.get(1)?,
        expires_ms: row.get(2)?,
        meta: row.get(3)?,
        size: row.get::<_, i64>(4)?.max(0) as u64,
        chunks: row.get(5)?,
        user_tag: row.get(6)?,
        body: if body { row.get(7)? } else { Vec::new() },
    })
}

impl ObjectStore for SqliteStore {
    fn put_object(&self, object: KeptObject) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            tx.prepare_cached(
                "INSERT INTO kept_objects (kind, owner, id, created_ms, expires_ms, meta, body, size, chunks, user_tag) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (kind, owner, id) DO UPDATE SET \
                 created_ms = excluded.created_ms, expires_ms = excluded.expires_ms, meta = excluded.meta, \
                 body = excluded.body, size = excluded.size, chunks = excluded.chunks, user_tag = excluded.user_tag",
            )
            .map_err(unavailable)?
            .execute(params![
                object.kind.as_str(),
                object.owner,
                object.id,
                object.created_ms,
                object.expires_ms,
                object.meta,
                object.body,
                i64::try_from(object.size).unwrap_or(i64::MAX),
                object.chunks,
                object.user_tag,
            ])
            .map_err(unavailable)?;
            tx.prepare_cached("DELETE FROM kept_chunks WHERE kind = ?1 AND owner = ?2 AND id = ?3 AND seq >= ?4")
                .map_err(unavailable)?
                .execute(params![object.kind.as_str(), object.owner, object.id, object.chunks])
                .map_err(unavailable)?;
            tx.commit().map_err(unavailable)
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
        self.run(move |conn| {
            conn.prepare_cached(
                "INSERT INTO kept_chunks (kind, owner, id, seq, at_ms, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                 ON CONFLICT (kind, owner, id, seq) DO UPDATE SET at_ms = excluded.at_ms, data = excluded.data",
            )
            .map_err(unavailable)?
            .execute(params![kind.as_str(), owner, id, seq, at_ms, data])
            .map_err(unavailable)?;
            Ok(())
        })
    }

    fn get_chunk(&self, kind: ObjectKind, owner: String, id: String, seq: u32) -> StoreFuture<'_, Option<Vec<u8>>> {
        self.run(move |conn| {
            conn.prepare_cached("SELECT data FROM kept_chunks WHERE kind = ?1 AND owner = ?2 AND id = ?3 AND seq = ?4")
                .map_err(unavailable)?
                .query_row(params![kind.as_str(), owner, id, seq], |row| row.get(0))
                .optional()
                .map_err(unavailable)
        })
    }

    fn get_object(
        &self,
        kind: ObjectKind,
        owner: String,
        id: String,
        now_ms: i64,
    ) -> StoreFuture<'_, Option<KeptObject>> {
        self.run(move |conn| {
            conn.prepare_cached(&format!(
                "SELECT {OBJECT_COLUMNS}, body FROM kept_objects \
                 WHERE kind = ?1 AND owner = ?2 AND id = ?3 AND (expires_ms IS NULL OR expires_ms > ?4)"
            ))
            .map_err(unavailable)?
            .query_row(params![kind.as_str(), owner, id, now_ms], |row| object_of(kind, &owner, row, true))
            .optional()
            .map_err(unavailable)
        })
    }

    fn list_objects(
        &self,
        kind: ObjectKind,
        owner: String,
        now_ms: i64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<KeptObject>> {
        self.run(move |conn| {
            let mut query = conn
                .prepare_cached(&format!(
                    "SELECT {OBJECT_COLUMNS} FROM kept_objects \
                     WHERE kind = ?1 AND owner = ?2 AND (expires_ms IS NULL OR expires_ms > ?3) \
                     ORDER BY created_ms DESC, id DESC LIMIT ?4"
                ))
                .map_err(unavailable)?;
            let rows = query
                .query_map(params![kind.as_str(), owner, now_ms, limit as i64], |row| {
                    object_of(kind, &owner, row, false)
                })
                .map_err(unavailable)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(unavailable)
        })
    }

    fn delete_object(&self, kind: ObjectKind, owner: String, id: String) -> StoreFuture<'_, bool> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            let removed = tx
                .execute(
                    "DELETE FROM kept_objects WHERE kind = ?1 AND owner = ?2 AND id = ?3",
                    params![kind.as_str(), owner, id],
                )
                .map_err(unavailable)?;
            tx.execute(
                "DELETE FROM kept_chunks WHERE kind = ?1 AND owner = ?2 AND id = ?3",
                params![kind.as_str(), owner, id],
            )
            .map_err(unavailable)?;
            tx.commit().map_err(unavailable)?;
            Ok(removed > 0)
        })
    }

    fn purge_objects(&self, now_ms: i64) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            tx.execute(
                "DELETE FROM kept_chunks WHERE EXISTS (SELECT 1 FROM kept_objects o WHERE o.kind = kept_chunks.kind \
                 AND o.owner = kept_chunks.owner AND o.id = kept_chunks.id AND o.expires_ms IS NOT NULL AND o.expires_ms <= ?1)",
                params![now_ms],
            )
            .map_err(unavailable)?;
            let removed = tx
                .execute("DELETE FROM kept_objects WHERE expires_ms IS NOT NULL AND expires_ms <= ?1", params![now_ms])
                .map_err(unavailable)?;
            tx.execute(
                "DELETE FROM kept_chunks WHERE at_ms <= ?1 AND NOT EXISTS (SELECT 1 FROM kept_objects o \
                 WHERE o.kind = kept_chunks.kind AND o.owner = kept_chunks.owner AND o.id = kept_chunks.id)",
                params![now_ms - ORPHAN_CHUNKS_MS],
            )
            .map_err(unavailable)?;
            tx.commit().map_err(unavailable)?;
            Ok(removed as u64)
        })
    }

    fn erase_objects(&self, user_tag: String) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            tx.execute(
                "DELETE FROM kept_chunks WHERE EXISTS (SELECT 1 FROM kept_objects o WHERE o.kind = kept_chunks.kind \
                 AND o.owner = kept_chunks.owner AND o.id = kept_chunks.id AND o.user_tag = ?1)",
                params![user_tag],
            )
            .map_err(unavailable)?;
            let removed =
                tx.execute("DELETE FROM kept_objects WHERE user_tag = ?1", params![user_tag]).map_err(unavailable)?;
            tx.commit().map_err(unavailable)?;
            Ok(removed as u64)
        })
    }

    fn object_bytes(&self, owner: String, now_ms: i64) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            let bytes: i64 = conn
                .prepare_cached(
                    "SELECT COALESCE(SUM(size), 0) FROM kept_objects \
                     WHERE owner = ?1 AND (expires_ms IS NULL OR expires_ms > ?2)",
                )
                .map_err(unavailable)?
                .query_row(params![owner, now_ms], |row| row.get(0))
                .map_err(unavailable)?;
            Ok(bytes.max(0) as u64)
        })
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The insert names as many columns as a row binds: a row bound into the
    /// last place of a full statement fills it exactly.
    #[test]
    fn a_ledger_insert_binds_every_column_it_names() {
        assert_eq!(INSERT_WIDTH, 37);
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(&format!("CREATE TABLE ledger (id INTEGER PRIMARY KEY, {INSERT_COLUMNS});")).unwrap();
        let mut many = conn.prepare(&INSERT_MANY).unwrap();
        assert_eq!(many.parameter_count(), INSERT_WIDTH * ROWS_PER_INSERT);
        let row = LedgerRow {
            entry: 1,
            at_ms: 1,
            request_id: "r".into(),
            key_id: None,
            group: None,
            pool: "p".into(),
            lane: "l".into(),
            model: "m".into(),
            operation: "chat".into(),
            tokens: Tokens::default(),
            status: 200,
            latency_ms: 1,
            ttfb_ms: None,
            failovers: 0,
            estimated: false,
            attempts: Vec::new(),
            notes: crate::Notes::default(),
            end_user: None,
            ingress: None,
            stream: false,
            charge: None,
        };
        bind_row(&mut many, (ROWS_PER_INSERT - 1) * INSERT_WIDTH, &row).unwrap();
        assert!(bind_row(&mut many, (ROWS_PER_INSERT - 1) * INSERT_WIDTH + 1, &row).is_err(), "one place past the end");
    }

    fn pin(pool: &str, session: &str, lane: &str, expires_ms: i64, switches: u32) -> KeptPin {
        KeptPin { pool: pool.into(), session: session.into(), lane: lane.into(), expires_ms, switches }
    }

    #[tokio::test]
    async fn pins_are_replaced_expire_and_come_back_longest_lived_first_per_pool() {
        let store = SqliteStore::in_memory().unwrap();
        store
            .keep_pins(
                vec![
                    pin("chat", "s1", "a", 5_000, 0),
                    pin("chat", "s2", "a", 9_000, 0),
                    pin("eu", "s1", "b", 2_000, 0),
                ],
                1_000,
            )
            .await
            .unwrap();
        // A later pin of the same pool and session replaces it; one expired by now goes.
        store.keep_pins(vec![pin("chat", "s1", "b", 8_000, 1)], 2_500).await.unwrap();
        let live = store.live_pins(3_000, 10).await.unwrap();
        assert_eq!(live, vec![pin("chat", "s2", "a", 9_000, 0), pin("chat", "s1", "b", 8_000, 1)]);
        // At most `per_pool` of each pool, the longest-lived.
        assert_eq!(store.live_pins(3_000, 1).await.unwrap(), vec![pin("chat", "s2", "a", 9_000, 0)]);
        // Expired at read: dropped, and gone from the table.
        assert_eq!(store.live_pins(8_500, 10).await.unwrap(), vec![pin("chat", "s2", "a", 9_000, 0)]);
        assert!(store.live_pins(9_000, 10).await.unwrap().is_empty());
    }
}
