//! The ledger ([`Ledger`]): one row per request, its tokens, attempts and
//! settled charge, and the JSON columns every SQL backend stores them in.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{Notes, StoreFuture, Tokens, Total, TotalsQuery, REFUSED};

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
