//! Switchyard's durable records behind small traits, one per concern:
//! [`KeyStore`] (virtual keys, with idempotent create and rotate),
//! [`GroupStore`] (the budget tree), [`Ledger`] (tokens per request; spend
//! is derived from it when read, never stored) and [`AuditLog`] (every
//! admin mutation attempt), [`ContentStore`] (kept text, sealed, by a
//! retention). [`memory::MemoryStore`] is the in-process
//! default, [`sqlite::SqliteStore`] the single-node one and
//! [`postgres::PostgresStore`] a fleet's, which also announces every change
//! ([`ChangeFeed`]) so each instance's caches follow; [`Location`] is the
//! one place the storage config chooses among them, and one conformance
//! suite (`tests/conformance.rs`) runs over every backend. Each backend is a
//! folder of wings, one module per trait with its SQL beside it.
//!
//! The request path never waits on a store: keys are cached by the
//! gateway, counters live in memory, and ledger rows are written behind in
//! batches.

pub mod kept;
mod location;
pub mod memory;
pub mod postgres;
pub mod sqlite;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use kept::{
    BatchJob, BatchQueue, BatchState, ClaimedLine, KeptObject, LineCounts, LineOutcome, LineState, ObjectKind,
    ObjectStore, QueuedLine, MAX_CHUNK, ORPHAN_CHUNKS_MS, STAGED_BATCH_MS,
};
use serde::{Deserialize, Serialize};
pub use switchyard_governance::money::Tokens;
use switchyard_governance::{Budget, KeyRecord, Limits};

pub use location::Location;

/// What every store call returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Why a store call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// No such record.
    #[error("not found")]
    NotFound,
    /// The write conflicts with what is stored (a duplicate, a reused
    /// idempotency key with another request).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The record changed since it was read (another write came first):
    /// read it again and redo the change.
    #[error("the record changed since it was read")]
    Stale,
    /// The backend cannot be reached or failed.
    #[error("store unavailable: {0}")]
    Unavailable(String),
}

/// How long an idempotency key holds: a create or rotation sent again
/// within a day is answered by the first; after that the key is free (a
/// client that reuses one for a later rotation rotates).
pub const IDEMPOTENCY_TTL_MS: i64 = 24 * 3_600_000;

/// The write of `next` over `stored`, checked the same way by every store:
/// `next` must carry the version it read (`Stale` otherwise), and a revoked
/// key never changes again (revocation is final). Returns the record to
/// store, one version on.
pub(crate) fn checked_write(stored: &KeyRecord, next: KeyRecord) -> Result<KeyRecord, StoreError> {
    if stored.revoked_at.is_some() && (next.revoked_at != stored.revoked_at || next.hash != stored.hash) {
        return Err(StoreError::Conflict(format!("key `{}` is revoked; revocation is final", stored.id)));
    }
    if next.version != stored.version {
        return Err(StoreError::Stale);
    }
    Ok(KeyRecord { version: stored.version + 1, ..next })
}

/// A group: one bucket of the budget tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupRecord {
    /// Unique name.
    pub name: String,
    /// The group above it.
    pub parent: Option<String>,
    /// Its spending cap.
    pub budget: Option<Budget>,
    /// Its rate and concurrency limits.
    #[serde(default)]
    pub limits: Limits,
    /// What its requests keep of their text (`none`, `redacted`, `full`;
    /// unset: as its parent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<String>,
    /// Each end user's budget and limits inside the group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_users: Option<switchyard_governance::key::EndUserPolicy>,
    /// What its requests are charged above their cost (unset: as its
    /// parent's; none anywhere up: their cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub markup: Option<switchyard_governance::card::Markup>,
    /// Its own rate card (chargeback): what its requests on the lanes it
    /// names are charged, each entry as a `rate_card` entry is written
    /// (checked when written, read back when groups load), by lane name.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub rate_card: std::collections::BTreeMap<String, serde_json::Value>,
    /// Declared in the config file (changed there, not over the API).
    #[serde(default)]
    pub from_config: bool,
    /// When it was created (Unix seconds).
    pub created_at: i64,
}

/// One request, as the ledger keeps it: tokens by kind, and what they
/// cost and were charged as settled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerRow {
    /// A random id the gateway gives the row once: a batch written again
    /// after a lost commit acknowledgement stores each row once.
    #[serde(default)]
    pub entry: i64,
    /// When it finished (Unix milliseconds).
    pub at_ms: i64,
    /// The request id.
    pub request_id: String,
    /// The virtual key, when one was used.
    pub key_id: Option<String>,
    /// The key's group at the time.
    pub group: Option<String>,
    /// The pool the caller named.
    pub pool: String,
    /// The lane that served (or last failed).
    pub lane: String,
    /// The wire model.
    pub model: String,
    /// What it asked for: an operation (`chat`, `embed`, `rerank`, ...)
    /// or `count_tokens`.
    #[serde(default = "chat")]
    pub operation: String,
    /// Tokens by kind, and the units and requests it billed.
    pub tokens: Tokens,
    /// The status the caller got.
    pub status: u16,
    /// Total time in ms.
    pub latency_ms: u64,
    /// Time to first byte in ms, for streams.
    pub ttfb_ms: Option<u64>,
    /// Lanes tried before the one that answered.
    pub failovers: u32,
    /// True when the tokens are the gateway's estimate (the caller left
    /// before the upstream reported usage).
    pub estimated: bool,
    /// Every upstream attempt, in order, when there was more than one (a
    /// single attempt is the row's lane and status).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<Attempt>,
    /// A response-cache hit and what it saved, the guardrail decisions.
    #[serde(default, skip_serializing_if = "Notes::is_empty")]
    pub notes: Notes,
    /// The end user it was made for (the caller's own field or the
    /// operator's header, length-capped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_user: Option<String>,
    /// The caller's protocol (`openai`, `anthropic`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<String>,
    /// The caller asked for a stream.
    #[serde(default)]
    pub stream: bool,
    /// What it cost and what its tenant is charged, as settled (`None`: a
    /// row written before the ledger kept them, priced from its tokens
    /// when read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charge: Option<Charge>,
}

/// What a request cost and what its tenant is charged, in nano-USD, as
/// settled: the cost at the rate card in force then (its tier by input
/// size, a batch line's discount, the service tier's factor: what the
/// provider bills), the charge that cost and its group's markup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Charge {
    /// What the provider bills.
    pub cost_nano: u64,
    /// What the tenant is charged.
    pub price_nano: u64,
}

/// The settled figures of a spend line: the sums of its rows' charges and
/// how many rows (or, in the rollup, hours summed before the ledger kept
/// charges) had none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settled {
    /// Summed cost.
    pub cost_nano: u64,
    /// Summed charge.
    pub price_nano: u64,
    /// Rows without a settled charge (priced from tokens when read).
    pub unsettled: u64,
}

impl Settled {
    /// Adds `other`'s sums.
    pub fn add(&mut self, other: &Settled) {
        self.cost_nano = self.cost_nano.saturating_add(other.cost_nano);
        self.price_nano = self.price_nano.saturating_add(other.price_nano);
        self.unsettled = self.unsettled.saturating_add(other.unsettled);
    }
}

/// What else a ledger row records.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Notes {
    /// Answered from the response cache, saving this many nano-USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_saved_nano: Option<u64>,
    /// Guardrail decisions, `policy/rule/action/direction` (never the text).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guardrails: Vec<String>,
    /// A refusal at the door (a row of operation [`REFUSED`]): the error's
    /// kind (`authentication`, `rate_limit`, ...) and what was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refusal>,
    /// An MCP tool call (a row of operation `mcp`): its server and sizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolCall>,
    /// A request of the raw route (a row of operation `passthrough`): its
    /// method and path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passthrough: Option<RawCall>,
    /// Why the row's tokens are the gateway's estimate (the row is then
    /// `estimated`); absent when they are what the upstream reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated: Option<Estimated>,
    /// The service tier the upstream says served it (`standard`,
    /// `priority`, `flex`, `scale`, `batch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<String>,
    /// Web searches the upstream ran for it (billed per search by the
    /// vendor; not yet priced by the rate card).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web_searches: Option<u64>,
}

/// Why a ledger row's tokens are the gateway's estimate rather than what
/// the upstream reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Estimated {
    /// The upstream's answer reported no usage: the prompt as counted and
    /// the output as delivered.
    NoUsage,
    /// The caller left before the upstream reported usage: what was
    /// delivered until then.
    CallerLeft,
    /// A hedge's slower attempt, cancelled: the prompt it was sent.
    HedgeLoser,
    /// The upstream took the request and its answer broke before its
    /// usage: what was delivered, or the reservation when nothing was.
    AnswerBroken,
    /// A reason a later gateway wrote that this one does not know.
    #[serde(other)]
    Other,
}

impl Estimated {
    /// Its name, as rows and headers say it.
    pub fn as_str(self) -> &'static str {
        match self {
            Estimated::NoUsage => "no_usage",
            Estimated::CallerLeft => "caller_left",
            Estimated::HedgeLoser => "hedge_loser",
            Estimated::AnswerBroken => "answer_broken",
            Estimated::Other => "other",
        }
    }
}

/// An MCP tool call, prompt fetched or resource read (or an A2A agent's
/// call) as the ledger keeps it: sizes, never its arguments' or result's
/// text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The server that answered (or last failed).
    pub server: String,
    /// The arguments' size in bytes.
    pub bytes_in: u64,
    /// The result's size in bytes.
    pub bytes_out: u64,
    /// The JSON-RPC error code the caller got, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<i64>,
    /// A resource read: its URI as the caller named it (bounded), which
    /// the row's model (`resource:<server>`) leaves out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// An A2A call (a row of operation `a2a`): the task it created or
    /// named (bounded), which its row is found by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
}

/// A request of a provider's raw route, as its ledger row names it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RawCall {
    /// The method.
    pub method: String,
    /// The vendor's path it reached (no query), bounded.
    pub path: String,
}

/// Why a request was refused before anything was billed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The error's kind.
    pub kind: String,
    /// The operation the caller asked for.
    pub operation: String,
    /// How many refusals the row stands for: 1, or past the request log's
    /// rows a minute, all of one minute alike (same key, pool, status, kind).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u64,
}

fn one() -> u64 {
    1
}

fn is_one(count: &u64) -> bool {
    *count == 1
}

/// The operation of a refusal's row: it is in the request log, never in
/// spend (the hourly rollup and spend questions leave it out).
pub const REFUSED: &str = "refused";

impl Notes {
    /// 1 when the row was answered from the response cache.
    pub fn cache_hit(&self) -> u64 {
        u64::from(self.cache_saved_nano.is_some())
    }

    /// The guardrail decisions made on the row.
    pub fn guarded(&self) -> u64 {
        self.guardrails.len() as u64
    }

    /// Nothing to note.
    pub fn is_empty(&self) -> bool {
        self.cache_saved_nano.is_none()
            && self.guardrails.is_empty()
            && self.refused.is_none()
            && self.tool.is_none()
            && self.passthrough.is_none()
            && self.estimated.is_none()
            && self.service_tier.is_none()
            && self.web_searches.is_none()
    }
}

fn chat() -> String {
    "chat".to_owned()
}

impl LedgerRow {
    /// How many refusals at the door the row counts (none unless it is of
    /// operation [`REFUSED`]; a row may stand for many alike).
    pub fn refusals(&self) -> u64 {
        match self.operation == REFUSED {
            true => self.notes.refused.as_ref().map_or(1, |refusal| refusal.count.max(1)),
            false => 0,
        }
    }
}

/// One upstream attempt of a request that tried more than one lane (or
/// whose only attempt failed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// The lane tried.
    pub lane: String,
    /// The upstream's status (absent: no answer).
    pub status: Option<u16>,
    /// Why the gateway moved on: `upstream_error`, `unreachable` or
    /// `deadline` (absent: this attempt answered).
    pub failure: Option<String>,
    /// How long it took (ms).
    pub ms: u64,
    /// What the upstream said when it failed: its error body or the
    /// transport's error, bounded and with secrets masked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One hour in milliseconds: the grain of the spend rollup.
pub const HOUR_MS: i64 = 3_600_000;

/// How a spend question over `[from_ms, to_ms)` is answered: the whole
/// hours inside it from the hourly rollup (`hours`, as hour numbers,
/// end exclusive), and the ragged edges from the ledger's rows (`rows`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpendPlan {
    pub hours: Option<(i64, i64)>,
    pub rows: Vec<(i64, i64)>,
}

pub(crate) fn spend_plan(from_ms: i64, to_ms: i64) -> SpendPlan {
    let first = from_ms.div_euclid(HOUR_MS) + i64::from(from_ms.rem_euclid(HOUR_MS) != 0);
    let end = to_ms.div_euclid(HOUR_MS);
    if from_ms >= to_ms || first >= end {
        return SpendPlan { hours: None, rows: vec![(from_ms, to_ms)] };
    }
    let rows = [(from_ms, first * HOUR_MS), (end * HOUR_MS, to_ms)].into_iter().filter(|(a, b)| a < b).collect();
    SpendPlan { hours: Some((first, end)), rows }
}

/// The rollup's key of a ledger row: hour, key, group ('' for none), lane,
/// model, operation (borrowed from the rows: a batch is summed without
/// copying).
pub(crate) type HourKey<'a> = (i64, &'a str, &'a str, &'a str, &'a str, &'a str);

/// The sums a spend line holds: requests, the four token kinds, units,
/// billed requests, what cache hits saved, then [`Outcomes`]' three, then
/// the six kinds billed apart (hour-long cache writes, reasoning, audio and
/// image in and out), then [`Settled`]'s three.
pub(crate) const SUMS: usize = 20;

/// Sums `rows` by rollup key (requests, the four token kinds, units,
/// billed requests).
pub(crate) fn by_hour<'a>(rows: impl IntoIterator<Item = &'a LedgerRow>) -> HashMap<HourKey<'a>, [i64; SUMS]> {
    let mut sums: HashMap<HourKey<'a>, [i64; SUMS]> = HashMap::new();
    for row in rows {
        let key = (
            row.at_ms.div_euclid(HOUR_MS),
            row.key_id.as_deref().unwrap_or_default(),
            row.group.as_deref().unwrap_or_default(),
            row.lane.as_str(),
            row.model.as_str(),
            row.operation.as_str(),
        );
        let sum = sums.entry(key).or_default();
        let t = &row.tokens;
        let saved = row.notes.cache_saved_nano.unwrap_or(0);
        // A refusal is counted as many as it stands for, never as a
        // request (it billed nothing).
        let refused = row.refusals();
        let served = u64::from(row.operation != REFUSED);
        let (hit, guarded) = (row.notes.cache_hit(), row.notes.guarded());
        let row_sums = [
            served,
            t.input,
            t.output,
            t.cache_read,
            t.cache_write,
            t.units,
            t.requests,
            saved,
            hit,
            guarded,
            refused,
            t.cache_write_1h,
            t.reasoning,
            t.audio_input,
            t.audio_output,
            t.image_input,
            t.image_output,
            row.charge.map_or(0, |c| c.cost_nano),
            row.charge.map_or(0, |c| c.price_nano),
            u64::from(row.charge.is_none()),
        ];
        for (slot, n) in sum.iter_mut().zip(row_sums) {
            *slot = slot.saturating_add(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
    sums
}

/// The spend columns a totals query over the hourly rollup selects after
/// value, lane and requests.
pub(crate) const ROLLUP_SUMS: &str = "sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), \
     sum(cache_write_tokens), sum(units), sum(billed_requests), sum(saved_nano), sum(cache_hits), sum(guarded), \
     sum(refused), sum(cache_write_1h_tokens), sum(reasoning_tokens), sum(audio_input_tokens), \
     sum(audio_output_tokens), sum(image_input_tokens), sum(image_output_tokens), sum(cost_nano), sum(price_nano), \
     sum(unsettled)";

/// The same over ledger rows (a refusal is a row of its own operation,
/// which may stand for many).
pub(crate) const ROW_SUMS: &str = "sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), \
     sum(cache_write_tokens), sum(units), sum(billed_requests), sum(saved_nano), sum(cache_hit), sum(guarded), \
     sum(refused), sum(cache_write_1h_tokens), sum(reasoning_tokens), sum(audio_input_tokens), \
     sum(audio_output_tokens), sum(image_input_tokens), sum(image_output_tokens), sum(cost_nano), sum(price_nano), \
     count(*) - count(cost_nano)";

impl Total {
    /// A spend line from a query's columns: value, lane, then requests, the
    /// four token sums, units, billed requests and saved nano-USD (as the
    /// SQL stores return them).
    pub(crate) fn of_columns(
        value: Option<String>,
        lane: String,
        [requests, input, output, cache_read, cache_write, units, billed, saved_nano, cache_hits, guarded, refused, cache_write_1h, reasoning, audio_input, audio_output, image_input, image_output, cost_nano, price_nano, unsettled]: [u64;
            SUMS],
    ) -> Total {
        let tokens = Tokens {
            input,
            output,
            cache_read,
            cache_write,
            cache_write_1h,
            reasoning,
            audio_input,
            audio_output,
            image_input,
            image_output,
            units,
            requests: billed,
        };
        Total {
            value,
            lane,
            requests,
            tokens,
            saved_nano,
            outcomes: Outcomes { cache_hits, guarded, refused },
            settled: Settled { cost_nano, price_nano, unsettled },
        }
    }

    /// What the line cost and was charged: its settled sums, or, when some
    /// of its rows were written before the ledger kept charges, its tokens
    /// at `today`'s flat prices (cost and charge alike; `None`: unpriced).
    pub fn charge(&self, today: Option<&switchyard_governance::Price>) -> Charge {
        if self.settled.unsettled == 0 {
            return Charge { cost_nano: self.settled.cost_nano, price_nano: self.settled.price_nano };
        }
        let cost = today.map_or(0, |price| price.cost(&self.tokens));
        Charge { cost_nano: cost, price_nano: cost }
    }
}

impl LedgerRow {
    /// What the row cost and was charged: as settled, or (a row written
    /// before the ledger kept charges) its tokens at `today`'s flat prices.
    pub fn charged(&self, today: Option<&switchyard_governance::Price>) -> Charge {
        self.charge.unwrap_or_else(|| {
            let cost = today.map_or(0, |price| price.cost(&self.tokens));
            Charge { cost_nano: cost, price_nano: cost }
        })
    }
}

/// Adds up totals that answer parts of one question (the same value and
/// lane in two parts become one line), ordered by value, then lane.
pub(crate) fn merge_totals(parts: impl IntoIterator<Item = Total>) -> Vec<Total> {
    let mut merged: HashMap<(Option<String>, String), Total> = HashMap::new();
    for total in parts {
        match merged.entry((total.value.clone(), total.lane.clone())) {
            std::collections::hash_map::Entry::Occupied(mut entry) => {
                let line = entry.get_mut();
                line.requests += total.requests;
                line.tokens.add(&total.tokens);
                line.saved_nano = line.saved_nano.saturating_add(total.saved_nano);
                line.outcomes.add(&total.outcomes);
                line.settled.add(&total.settled);
            }
            std::collections::hash_map::Entry::Vacant(entry) => {
                entry.insert(total);
            }
        }
    }
    let mut out: Vec<Total> = merged.into_values().collect();
    out.sort_by(|a, b| a.value.cmp(&b.value).then_with(|| a.lane.cmp(&b.lane)));
    out
}

/// The attempts column: JSON, or nothing for a single attempt.
pub(crate) fn attempts_column(attempts: &[Attempt]) -> Option<String> {
    if attempts.is_empty() {
        None
    } else {
        serde_json::to_string(attempts).ok()
    }
}

/// The notes column: JSON, or nothing.
pub(crate) fn notes_column(notes: &Notes) -> Option<String> {
    (!notes.is_empty()).then(|| serde_json::to_string(notes).ok()).flatten()
}

/// The notes column read back (a corrupt one reads as none: it is detail).
pub(crate) fn notes_of(column: Option<String>) -> Notes {
    column.and_then(|text| serde_json::from_str(&text).ok()).unwrap_or_default()
}

/// The attempts column read back (a corrupt one reads as none: it is detail,
/// never money).
pub(crate) fn attempts_of(column: Option<String>) -> Vec<Attempt> {
    column.and_then(|text| serde_json::from_str(&text).ok()).unwrap_or_default()
}

/// A ledger row with its position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredRow {
    /// Increasing id (the cursor for pagination).
    pub id: i64,
    /// The row.
    #[serde(flatten)]
    pub row: LedgerRow,
}

/// Which recent rows to read, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowFilter {
    /// Only this key's.
    pub key: Option<String>,
    /// Only this pool's.
    pub pool: Option<String>,
    /// Only this lane's.
    pub lane: Option<String>,
    /// Only statuses in this range (`[from, to)`: one status, or a class
    /// such as 500..600).
    pub status: Option<(u16, u16)>,
    /// Only this end user's.
    pub end_user: Option<String>,
    /// Only the request with this id.
    pub request_id: Option<String>,
    /// Only rows of this operation (`chat`, `mcp`, ...).
    pub operation: Option<String>,
    /// Only rows finished in `[from, to)` (Unix ms).
    pub at_ms: Option<(i64, i64)>,
    /// Only rows of these groups (a tenant admin's subtree; empty: none).
    pub groups: Option<Vec<String>>,
    /// Only rows with a smaller id (the cursor).
    pub before: Option<i64>,
    /// At most this many.
    pub limit: usize,
}

/// What spend is grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpendBy {
    /// Virtual key.
    Key,
    /// Group.
    Group,
    /// Wire model.
    Model,
    /// Lane.
    Lane,
    /// Operation (`chat`, `embed`, ..., `count_tokens`).
    Operation,
    /// End user (read from the rows: the hourly rollup does not keep it).
    User,
}

impl SpendBy {
    /// The ledger's (and the hourly rollup's) column for it.
    pub(crate) fn column(self) -> &'static str {
        match self {
            SpendBy::Key => "key_id",
            SpendBy::Group => "grp",
            SpendBy::Model => "model",
            SpendBy::Lane => "lane",
            SpendBy::Operation => "operation",
            SpendBy::User => "end_user",
        }
    }
}

/// A ledger sum: tokens by dimension value and lane, and what they cost
/// and were charged as settled (a line with rows from before the ledger
/// kept charges is priced by the reader, lane by lane, from its tokens).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Total {
    /// The dimension's value (`None`: rows without one, e.g. no key).
    pub value: Option<String>,
    /// The lane.
    pub lane: String,
    /// Requests.
    pub requests: u64,
    /// Tokens.
    pub tokens: Tokens,
    /// What response-cache hits saved (nano-USD, at the price the hit was
    /// served at).
    #[serde(default)]
    pub saved_nano: u64,
    /// What the content and governance stages decided on them.
    #[serde(default)]
    pub outcomes: Outcomes,
    /// What its rows cost and were charged, as settled.
    #[serde(default)]
    pub settled: Settled,
}

/// What a spend line's requests met on the way: cache hits, guardrail
/// decisions and refusals at the door (which are no requests, and spend
/// nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcomes {
    /// Answered from the response cache.
    pub cache_hits: u64,
    /// Guardrail decisions made (a request may have several).
    pub guarded: u64,
    /// Refused at the door (keys, limits, budgets, policies).
    pub refused: u64,
}

impl Outcomes {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Outcomes) {
        self.cache_hits = self.cache_hits.saturating_add(other.cache_hits);
        self.guarded = self.guarded.saturating_add(other.guarded);
        self.refused = self.refused.saturating_add(other.refused);
    }
}

/// A spend question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TotalsQuery {
    /// Group by.
    pub by: SpendBy,
    /// From (Unix ms, inclusive).
    pub from_ms: i64,
    /// To (Unix ms, exclusive).
    pub to_ms: i64,
    /// Only rows of this key.
    pub key: Option<String>,
    /// Only rows of these groups.
    pub groups: Option<Vec<String>>,
    /// Only rows of this end user.
    pub end_user: Option<String>,
}

impl TotalsQuery {
    /// Whether the question needs the rows alone: the hourly rollup keeps
    /// no end user.
    pub(crate) fn rows_only(&self) -> bool {
        self.by == SpendBy::User || self.end_user.is_some()
    }
}

/// One admin mutation attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When (Unix ms).
    pub at_ms: i64,
    /// Who: the admin token's name, never the token.
    pub actor: String,
    /// What (`POST /api/v1/admin/keys`).
    pub action: String,
    /// On what (a key id, a group name), when known.
    pub target: Option<String>,
    /// The status answered.
    pub outcome: u16,
}

/// The most an audit entry keeps of each of its texts (bytes): a longer
/// path, actor or target is cut, so no caller's request can make a row of
/// more than a few hundred bytes.
pub const AUDIT_TEXT_BYTES: usize = 256;

impl AuditEntry {
    /// The entry with each text cut to [`AUDIT_TEXT_BYTES`] (at a character
    /// boundary, marked with `…`).
    pub fn bounded(self) -> AuditEntry {
        AuditEntry {
            actor: cut(self.actor, AUDIT_TEXT_BYTES),
            action: cut(self.action, AUDIT_TEXT_BYTES),
            target: self.target.map(|t| cut(t, AUDIT_TEXT_BYTES)),
            ..self
        }
    }
}

fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max - '…'.len_utf8();
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// An audit entry with its position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredAudit {
    /// Increasing id (the cursor).
    pub id: i64,
    /// The entry.
    #[serde(flatten)]
    pub entry: AuditEntry,
}

/// An idempotency key on a create or rotate: a retried request with the
/// same key and the same fingerprint, within [`IDEMPOTENCY_TTL_MS`], gets
/// the first outcome back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idempotency {
    /// The caller's `Idempotency-Key`.
    pub key: String,
    /// What the request asked (a hash of its method, path and body).
    pub fingerprint: String,
    /// When the request came (Unix ms): earlier records past the TTL are gone.
    pub at_ms: i64,
}

impl Idempotency {
    /// The oldest record time still honoured.
    pub(crate) fn oldest_ms(&self) -> i64 {
        self.at_ms.saturating_sub(IDEMPOTENCY_TTL_MS)
    }
}

/// What an idempotent write did.
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    /// It wrote this record.
    New(KeyRecord),
    /// An earlier request with the same idempotency key wrote this record.
    Replayed(KeyRecord),
}

/// Virtual keys.
pub trait KeyStore: Send + Sync {
    /// Creates a key (its id and hash must be new).
    fn create_key(&self, record: KeyRecord, idempotency: Option<Idempotency>) -> StoreFuture<'_, Written>;
    /// Replaces a key's secret (the old one stops at once), when the
    /// stored record is still the version `record` carries.
    fn rotate_key(&self, record: KeyRecord, idempotency: Option<Idempotency>) -> StoreFuture<'_, Written>;
    /// Replaces a key's record (changes, revocation) when the stored one is
    /// still the version `record` carries ([`StoreError::Stale`] otherwise;
    /// a revoked key never changes): returns what was stored.
    fn update_key(&self, record: KeyRecord) -> StoreFuture<'_, KeyRecord>;
    /// One key.
    fn get_key(&self, id: &str) -> StoreFuture<'_, Option<KeyRecord>>;
    /// Keys by id, after `after`, at most `limit`.
    fn list_keys(&self, after: Option<&str>, limit: usize) -> StoreFuture<'_, Vec<KeyRecord>>;
}

/// The budget tree.
pub trait GroupStore: Send + Sync {
    /// Creates or replaces a group.
    fn put_group(&self, group: GroupRecord) -> StoreFuture<'_, ()>;
    /// Deletes a group.
    fn delete_group(&self, name: &str) -> StoreFuture<'_, ()>;
    /// Every group.
    fn list_groups(&self) -> StoreFuture<'_, Vec<GroupRecord>>;
}

/// Tokens per request.
pub trait Ledger: Send + Sync {
    /// Appends rows (one batch, one transaction).
    fn append(&self, rows: Arc<[LedgerRow]>) -> StoreFuture<'_, ()>;
    /// Recent rows, newest first.
    fn rows(&self, filter: RowFilter) -> StoreFuture<'_, Vec<StoredRow>>;
    /// Token sums.
    fn totals(&self, query: TotalsQuery) -> StoreFuture<'_, Vec<Total>>;
    /// How many rows it holds.
    fn count(&self) -> StoreFuture<'_, u64>;
}

/// Admin mutation attempts.
pub trait AuditLog: Send + Sync {
    /// Appends an entry.
    fn record(&self, entry: AuditEntry) -> StoreFuture<'_, ()>;
    /// Entries newest first, before `before`, at most `limit`.
    fn entries(&self, before: Option<i64>, limit: usize) -> StoreFuture<'_, Vec<StoredAudit>>;
    /// Removes the entries older than `before_ms`; returns how many.
    fn purge(&self, before_ms: i64) -> StoreFuture<'_, u64>;
}

/// A vendor's signature of a tool call (Gemini's `thoughtSignature`), kept
/// for a caller whose protocol drops it when it sends the call back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptSignature {
    /// Whose call and which: the caller's key id and the tool call's id.
    pub key: String,
    /// The signature, as the vendor sent it.
    pub signature: String,
    /// When it is forgotten (ms since the epoch).
    pub expires_ms: i64,
}

/// The longest signature kept (Gemini's are a few hundred bytes to a few
/// kilobytes; anything longer is not one).
pub const MAX_KEPT_SIGNATURE: usize = 64 << 10;

/// Tool-call signatures by key, each until it expires.
pub trait SignatureStore: Send + Sync {
    /// Keeps each signature under its key (a later one replaces it) and
    /// forgets those expired by `now_ms`.
    fn keep_signatures(&self, kept: Vec<KeptSignature>, now_ms: i64) -> StoreFuture<'_, ()>;
    /// The signature live at `now_ms` under each key, in the keys' order.
    fn find_signatures(&self, keys: Vec<String>, now_ms: i64) -> StoreFuture<'_, Vec<Option<String>>>;
}

/// A session's (or a prompt prefix's) pin to a lane of a pool, kept so a
/// single node's pins outlive a restart (and with them the vendors' prompt
/// caches). Names, not indexes: a config changed in between maps them again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptPin {
    /// The pool.
    pub pool: String,
    /// The session id (the caller's header) or `prefix:` and a hash.
    pub session: String,
    /// The lane it is pinned to.
    pub lane: String,
    /// When the pin ends unless used again (ms since the epoch).
    pub expires_ms: i64,
    /// How many times the session's lane changed.
    pub switches: u32,
}

/// Session pins by pool and session, each until it expires.
pub trait PinStore: Send + Sync {
    /// Keeps each pin (a later one of the same pool and session replaces
    /// it) and forgets those expired by `now_ms`.
    fn keep_pins(&self, pins: Vec<KeptPin>, now_ms: i64) -> StoreFuture<'_, ()>;
    /// The pins live at `now_ms`, at most `per_pool` of each pool (the
    /// longest-lived); expired ones are dropped.
    fn live_pins(&self, now_ms: i64, per_pool: usize) -> StoreFuture<'_, Vec<KeptPin>>;
}

/// One request's kept text, sealed (retention `redacted` or `full`): the
/// store holds it as opaque bytes, found by the ledger row's entry, and
/// by its end user's tag (a keyed hash, never the user's id) to erase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptContent {
    /// The ledger row's entry.
    pub entry: i64,
    /// When it was kept (Unix ms): purged past the retention's days.
    pub at_ms: i64,
    /// The request id.
    pub request_id: String,
    /// The virtual key.
    pub key_id: Option<String>,
    /// The key's group.
    pub group: Option<String>,
    /// The end user's tag, when the request named one.
    pub user_tag: Option<String>,
    /// `redacted` or `full`.
    pub retention: String,
    /// The sealed text.
    pub sealed: Vec<u8>,
}

/// Kept request and reply text.
pub trait ContentStore: Send + Sync {
    /// Keeps records (an entry kept again is stored once).
    fn keep_content(&self, kept: Vec<KeptContent>) -> StoreFuture<'_, ()>;
    /// The record of ledger entry `entry`.
    fn find_content(&self, entry: i64) -> StoreFuture<'_, Option<KeptContent>>;
    /// Erases every record of the end user tagged `user_tag`; returns how many.
    fn erase_content(&self, user_tag: String) -> StoreFuture<'_, u64>;
    /// Removes the records kept before `before_ms`; returns how many.
    fn purge_content(&self, before_ms: i64) -> StoreFuture<'_, u64>;
}

/// One version of the config document, as written (its `${VAR}`
/// references unexpanded: secrets from the environment never reach it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigVersion {
    /// 1, 2, ... in the order they were made.
    pub version: i64,
    /// When (Unix ms).
    pub at_ms: i64,
    /// Who: an admin token's name, a console user, or `file`.
    pub author: String,
    /// Why, in the author's words.
    pub message: String,
    /// The YAML text.
    pub text: String,
}

/// The config as versioned documents.
pub trait ConfigStore: Send + Sync {
    /// Appends `version` as the one after `after` (the newest the writer
    /// read; 0 for none) and returns it numbered. [`StoreError::Stale`]
    /// when another version came first: a lost update is refused.
    fn append_config(&self, after: i64, version: ConfigVersion) -> StoreFuture<'_, ConfigVersion>;
    /// Versions older than `before` (all when `None`), newest first, at
    /// most `limit`.
    fn config_versions(&self, before: Option<i64>, limit: usize) -> StoreFuture<'_, Vec<ConfigVersion>>;
    /// One version.
    fn config_version(&self, version: i64) -> StoreFuture<'_, Option<ConfigVersion>>;
}

/// Every concern in one backend.
pub trait Backend:
    KeyStore + GroupStore + Ledger + AuditLog + SignatureStore + ContentStore + ConfigStore + ObjectStore + BatchQueue
{
}

impl<B> Backend for B where
    B: KeyStore
        + GroupStore
        + Ledger
        + AuditLog
        + SignatureStore
        + ContentStore
        + ConfigStore
        + ObjectStore
        + BatchQueue
{
}

/// A backend: every concern, usually served by one object.
#[derive(Clone)]
pub struct Stores {
    /// Keys.
    pub keys: Arc<dyn KeyStore>,
    /// Groups.
    pub groups: Arc<dyn GroupStore>,
    /// The ledger.
    pub ledger: Arc<dyn Ledger>,
    /// The audit log.
    pub audit: Arc<dyn AuditLog>,
    /// Tool-call signatures kept for callers that drop them.
    pub signatures: Arc<dyn SignatureStore>,
    /// Kept request and reply text.
    pub content: Arc<dyn ContentStore>,
    /// The config's versions.
    pub configs: Arc<dyn ConfigStore>,
    /// Files and stored responses.
    pub objects: Arc<dyn ObjectStore>,
    /// Batch jobs and their lines.
    pub batches: Arc<dyn BatchQueue>,
    /// Changes other instances make, when the store is shared.
    pub changes: Option<Arc<dyn ChangeFeed>>,
    /// Session pins kept across restarts: a single node's SQLite only (a
    /// fleet shares pins through Redis; memory keeps nothing past the
    /// process).
    pub pins: Option<Arc<dyn PinStore>>,
}

impl Stores {
    /// Every concern served by `backend`.
    pub fn of<B: Backend + 'static>(backend: B) -> Stores {
        let backend = Arc::new(backend);
        Stores {
            keys: backend.clone(),
            groups: backend.clone(),
            ledger: backend.clone(),
            audit: backend.clone(),
            signatures: backend.clone(),
            content: backend.clone(),
            configs: backend.clone(),
            objects: backend.clone(),
            batches: backend,
            changes: None,
            pins: None,
        }
    }

    /// The same stores, with pins kept in `pins`.
    pub fn with_pins(mut self, pins: Arc<dyn PinStore>) -> Stores {
        self.pins = Some(pins);
        self
    }

    /// A store other instances write too: its changes are announced.
    pub fn shared<B: Backend + ChangeFeed + 'static>(backend: B) -> Stores {
        let backend = Arc::new(backend);
        Stores {
            keys: backend.clone(),
            groups: backend.clone(),
            ledger: backend.clone(),
            audit: backend.clone(),
            signatures: backend.clone(),
            content: backend.clone(),
            configs: backend.clone(),
            objects: backend.clone(),
            batches: backend.clone(),
            changes: Some(backend),
            pins: None,
        }
    }
}

/// A change to the records, made by this instance or another one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The key with this id was created or changed.
    Key(String),
    /// The group tree changed.
    Groups,
    /// A config version was made (its number).
    Config(i64),
    /// Changes may have been missed (the feed reconnected): reread everything.
    Resync,
}

/// Announces changes to a store several instances share.
pub trait ChangeFeed: Send + Sync {
    /// Changes from now on.
    fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Change>;
}

/// How many of `known` migrations a database at schema version `applied`
/// already has; an error when it is newer than this binary.
pub(crate) fn applied_migrations(applied: i64, known: usize) -> Result<usize, StoreError> {
    let applied = usize::try_from(applied).unwrap_or(0);
    if applied > known {
        return Err(StoreError::Unavailable(format!(
            "the database has schema version {applied}, newer than this binary's {known}; run a newer switchyard"
        )));
    }
    Ok(applied)
}

pub(crate) fn to_json<T: Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|err| StoreError::Unavailable(err.to_string()))
}

pub(crate) fn from_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|err| StoreError::Unavailable(format!("corrupt record: {err}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spend_question_reads_whole_hours_from_the_rollup_and_edges_from_rows() {
        let h = HOUR_MS;
        // Inside one hour: rows only.
        assert_eq!(spend_plan(10, 20), SpendPlan { hours: None, rows: vec![(10, 20)] });
        assert_eq!(spend_plan(h / 2, h + h / 2), SpendPlan { hours: None, rows: vec![(h / 2, h + h / 2)] });
        // Aligned: the rollup alone.
        assert_eq!(spend_plan(0, 3 * h), SpendPlan { hours: Some((0, 3)), rows: vec![] });
        // Ragged on both sides.
        assert_eq!(
            spend_plan(h / 2, 3 * h + 5),
            SpendPlan { hours: Some((1, 3)), rows: vec![(h / 2, h), (3 * h, 3 * h + 5)] }
        );
        assert_eq!(spend_plan(5, 5), SpendPlan { hours: None, rows: vec![(5, 5)] });
    }

    #[test]
    fn parts_of_an_answer_merge_by_value_and_lane() {
        let total = |value: Option<&str>, lane: &str, n: u64| Total {
            value: value.map(str::to_owned),
            lane: lane.into(),
            requests: n,
            tokens: Tokens { input: n, output: 2 * n, ..Tokens::default() },
            saved_nano: n,
            outcomes: Outcomes { cache_hits: n, guarded: 2 * n, refused: 3 * n },
            settled: Settled { cost_nano: 5 * n, price_nano: 6 * n, unsettled: 0 },
        };
        let merged = merge_totals([total(Some("k"), "a", 1), total(None, "a", 4), total(Some("k"), "a", 2)]);
        assert_eq!(merged, vec![total(None, "a", 4), total(Some("k"), "a", 3)]);
    }

    #[test]
    fn an_audit_entry_keeps_a_few_hundred_bytes_of_each_text() {
        let long = AuditEntry {
            at_ms: 1,
            actor: "unauthenticated".into(),
            action: format!("POST /api/v1/admin/{}", "é".repeat(10_000)),
            target: Some("x".repeat(1_000)),
            outcome: 401,
        }
        .bounded();
        assert!(long.action.len() <= AUDIT_TEXT_BYTES && long.action.ends_with('…'), "{}", long.action.len());
        assert!(long.target.as_ref().is_some_and(|t| t.len() <= AUDIT_TEXT_BYTES));
        assert_eq!(long.actor, "unauthenticated");
    }
}
