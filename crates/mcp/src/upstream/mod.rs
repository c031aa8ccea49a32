//! The tool servers the gateway calls: streamable HTTP ([`http`]) and
//! local stdio children ([`stdio`]), and what a call's failure means for
//! a twin: not sent (any tool may go to the twin), or lost after it was
//! sent (only an idempotent tool may run again).

pub mod http;
pub mod stdio;

use serde_json::{json, Value};

/// Why a call to one server failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// It never reached the server (connection refused, quarantined,
    /// could not start): a twin may take it.
    #[error("not sent: {0}")]
    NotSent(String),
    /// Sent, but no answer came (timeout, connection lost, 5xx): only an
    /// idempotent tool may be sent again.
    #[error("no answer: {0}")]
    Lost(String),
    /// The server forgot the session: open another and send again.
    #[error("the server ended the session")]
    SessionGone,
    /// The server refused the exchange with this HTTP status.
    #[error("the server answered {0}")]
    Refused(u16),
}

impl CallError {
    /// Whether nothing reached the server.
    pub fn unsent(&self) -> bool {
        matches!(self, CallError::NotSent(_) | CallError::Refused(401..=404 | 429 | 503))
    }
}

/// A session opened with a server.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sent {
    /// The server's session id (none: it keeps no sessions).
    pub session: Option<String>,
    /// The protocol version agreed.
    pub version: String,
}

/// The gateway as a client names itself.
pub fn client_info() -> Value {
    json!({ "name": "switchyard", "version": env!("CARGO_PKG_VERSION") })
}

/// The `initialize` params the gateway sends as a client.
pub fn client_hello() -> Value {
    json!({
        "protocolVersion": crate::rpc::VERSIONS[0],
        "capabilities": {},
        "clientInfo": client_info(),
    })
}
