//! The ledger ([`Ledger`]): batched appends serialised across instances,
//! row queries and spend totals.

use super::{col, column, count, unavailable, PostgresStore};
use crate::{Ledger, LedgerRow, RowFilter, StoreError, StoreFuture, StoredRow, Tokens, Total, TotalsQuery};

/// Serialises ledger batches across instances (see `append`).
const LEDGER_LOCK: i64 = 0x5357_4c45_4447_4552; // "SWLEDGER"

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
            tx.execute(include_str!("ledger/append_lock.sql"), &[&LEDGER_LOCK]).await.map_err(unavailable)?;
            // The whole batch is one statement, each column an array: one
            // round trip, and the rollup's trigger runs once for it.
            let insert =
                tx.prepare_cached(include_str!("ledger/append_insert_ledger.sql")).await.map_err(unavailable)?;
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
            let row = client.query_one(include_str!("ledger/count.sql"), &[]).await.map_err(unavailable)?;
            Ok(count(col(&row, 0)?))
        })
    }
}
