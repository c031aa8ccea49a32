//! An MCP call (a tool called, a prompt fetched, a resource read) settled
//! as every request is: through a [`Record`], so its hold is replaced by
//! what it cost and it is one ledger row (operation `mcp`, lane
//! `mcp:<server>`), written by the same settlement as chat, operations and
//! batch lines.

use std::sync::Arc;

use http::HeaderValue;
use switchyard_state::governance::{Caller, Hold};
use switchyard_state::Gateway;
use switchyard_store::ToolCall;

use super::Record;

/// What the ledger row of an MCP call says beyond a request's own.
#[derive(Debug, Clone, Default)]
pub struct ToolNote {
    /// The name the caller called it by (the row's pool).
    pub route: String,
    /// The row's lane (`mcp:<server>`).
    pub lane: Arc<str>,
    /// The row's model: the tool's name, `prompt:<name>`, `resource:<route>`.
    pub model: String,
    /// What it cost (nano-USD): a priced server's price per call.
    pub cost_nano: u64,
    /// A server answered it (it counts as a request).
    pub billed: bool,
    /// Servers that failed before the one that answered.
    pub failovers: u32,
    /// The server, sizes, the JSON-RPC error, a resource's URI.
    pub detail: ToolCall,
    /// The guardrail decisions of `mcp.policies`, named.
    pub decisions: Vec<String>,
}

impl Record {
    /// The record of an MCP call by `caller`, holding `hold` (its admission
    /// on the key's chain) when it was admitted.
    pub fn begin_tool(gateway: &Arc<Gateway>, caller: Option<Caller>, hold: Option<Hold>) -> Box<Record> {
        let id = format!("mcp_{:032x}", fastrand::u128(..));
        let request_id = HeaderValue::try_from(id).unwrap_or(HeaderValue::from_static("mcp"));
        let mut record = Record::begin(gateway, switchyard_ir::Protocol::OpenAi, request_id, &http::HeaderMap::new());
        record.operation = "mcp";
        record.end_user = caller.as_ref().and_then(|c| c.subject.as_deref().map(Box::from));
        record.caller = caller;
        record.reservation = hold;
        // A call's row is its own, refused or not: the caller's key made it.
        record.admitted = true;
        record
    }

    /// The record of an A2A agent's call by `caller` (operation `a2a`, its
    /// row's lane `a2a:<agent>`), holding `hold` when it was admitted. It
    /// settles as an MCP call does: a [`ToolNote`] says what it came to.
    /// `stream`: the agent answered as an event stream.
    pub fn begin_agent(
        gateway: &Arc<Gateway>,
        caller: Option<Caller>,
        hold: Option<Hold>,
        stream: bool,
    ) -> Box<Record> {
        let mut record = Record::begin_tool(gateway, caller, hold);
        record.stream = stream;
        let id = format!("a2a_{:032x}", fastrand::u128(..));
        record.request_id = HeaderValue::try_from(id).unwrap_or(HeaderValue::from_static("a2a"));
        record.operation = "a2a";
        record
    }

    /// The call's hold, once admitted after the record began.
    pub fn hold(&mut self, hold: Hold) {
        self.reservation = Some(hold);
    }

    /// What the call came to, for its ledger row.
    pub fn tool_called(&mut self, note: ToolNote) {
        self.tool = Some(Box::new(note));
    }
}
