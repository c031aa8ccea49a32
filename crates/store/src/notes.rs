//! What else a ledger row records ([`Notes`]): cache savings, guardrail
//! decisions, refusals, tool and raw calls, and why tokens were estimated.

use serde::{Deserialize, Serialize};

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
