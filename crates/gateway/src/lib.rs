//! Switchyard's HTTP surface: the listeners (`server::listener`: the
//! accept loop, connection and in-flight caps, graceful drain; `conn_io`:
//! header, keep-alive and write-stall deadlines; `tls`), the ingress routes
//! of the six protocols and the model list (`server`), which frame a
//! caller's request and hand it to the engine (`switchyard_engine`), the
//! admin listener's router (the admin plane is `switchyard_admin`; the
//! console's playground is here, because it sends through the data
//! plane's router), and
//! live reload (`reload`), which swaps both routers under running
//! listeners, and the config's versions (`versions`: recorded, and
//! followed across a fleet), and `batches`, which starts the batch worker
//! over the data router (`switchyard_kept` holds files, batches and stored
//! responses).
//!
//! Only this crate and the admin plane know axum. No lock is held across an
//! `.await`.

pub mod batches;
pub mod playground;
pub mod reload;
pub mod server;
pub mod versions;

pub use server::{admin_router, router};
pub use switchyard_state::{codec_for, CodecFor, Gateway};

/// The process's MCP hub (`/mcp`), for `Gateway::with_mcp`: one per
/// process, kept across reloads.
pub fn mcp_hub() -> std::sync::Arc<dyn switchyard_state::mcp::McpHub> {
    switchyard_mcp::Hub::new()
}
