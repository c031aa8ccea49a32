//! What a listener counts (connections open, accepted and refused;
//! requests refused at the in-flight cap), read by `/stats` and `/metrics`.

use std::sync::atomic::{AtomicU64, AtomicUsize};

/// What a listener counts, for `/stats` and metrics.
#[derive(Debug, Default)]
pub struct ListenerStats {
    /// Connections open now.
    pub open: AtomicUsize,
    /// Connections accepted in all.
    pub accepted: AtomicU64,
    /// Connections answered with an overload error because the cap was reached.
    pub refused_connections: AtomicU64,
    /// Requests answered with an overload error because the in-flight cap was reached.
    pub refused_requests: AtomicU64,
}
