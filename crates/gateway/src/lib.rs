//! Switchyard's I/O shell. The pure crates decide (config, codecs, routing);
//! this crate does the talking: the HTTP server and its ingress routes
//! (`server`), the forwarding engine (`engine`), upstream transports
//! (`transport`) and the deterministic vendor fake (`mock`).
//!
//! Only `server` knows axum. No lock is held across an `.await`.

pub mod audit;
pub mod call;
pub mod engine;
pub mod fleet_state;
pub mod governance;
pub mod health;
pub mod hooks;
pub mod mock;
pub mod reload;
pub mod routing;
pub mod server;
pub mod sessions;
pub mod settle;
pub mod sign_ins;
pub mod state;
pub mod telemetry;
pub mod transport;

pub use server::{admin_router, router};
pub use state::{CodecFor, Gateway};

/// Boxed error for bodies and transports.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
