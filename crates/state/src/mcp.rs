//! The seam between the MCP gateway (`switchyard-mcp`, which serves `/mcp`
//! and holds the upstream sessions and children) and the admin plane,
//! which shows its servers, tools, approvals and calls without importing
//! it. One hub per process, kept across reloads; it reads the config
//! current when each request comes.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;

/// What an admin call on the hub returns: a JSON body, or why not.
pub type HubFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// An MCP tool's approval could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    /// No server offers a tool of that name now.
    #[error("no MCP server offers `{0}` now")]
    UnknownTool(String),
    /// The store could not keep it.
    #[error("{0}")]
    Store(String),
}

/// The MCP hub as the rest of the gateway sees it.
pub trait McpHub: Send + Sync + Any {
    /// For the crate that serves `/mcp`: itself.
    fn as_any(&self) -> &dyn Any;
    /// Servers (transport, state, quarantine, last error) and their tools
    /// (schema digest, the approved one, whether withheld), listed afresh.
    fn overview<'a>(&'a self, gateway: &'a crate::Gateway) -> HubFuture<'a, serde_json::Value>;
    /// Pins tool `name` (`<server>__<tool>`) to the schema it has now.
    fn approve<'a>(
        &'a self,
        gateway: &'a crate::Gateway,
        name: &'a str,
        by: &'a str,
    ) -> HubFuture<'a, Result<serde_json::Value, ApprovalError>>;
    /// Unpins tool `name`: whether it was pinned.
    fn unpin<'a>(&'a self, gateway: &'a crate::Gateway, name: &'a str) -> HubFuture<'a, Result<bool, ApprovalError>>;
}
