//! The ledger ([`Ledger`]): multi-row inserts of a batch, row queries,
//! spend totals, and the spool's deletes.

use rusqlite::params;

use super::{unavailable, SqliteStore};
use crate::{Charge, Ledger, LedgerRow, RowFilter, StoreError, StoreFuture, StoredRow, Tokens, Total, TotalsQuery};

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
                        include_str!("ledger/append.sql"),
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
            conn.query_row(include_str!("ledger/count.sql"), [], |row| row.get::<_, i64>(0))
                .map(|n| n.max(0) as u64)
                .map_err(unavailable)
        })
    }
}

impl SqliteStore {
    /// Deletes ledger rows by id (a spool's rows once another store took them).
    pub fn delete_rows(&self, ids: Vec<i64>) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            {
                let mut delete = tx.prepare_cached(include_str!("ledger/delete_rows.sql")).map_err(unavailable)?;
                for id in &ids {
                    delete.execute(params![id]).map_err(unavailable)?;
                }
            }
            tx.commit().map_err(unavailable)
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
        let conn = rusqlite::Connection::open_in_memory().unwrap();
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
}
