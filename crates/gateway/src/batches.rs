//! The batch worker's way into the data plane: each line is sent through
//! the live data router (the one a reload swaps), so it takes the path a
//! caller's request takes.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::body::Body;
use http::{Request, Response};
use switchyard_state::Gateway;
use tower_service::Service;

use crate::server::LiveRouter;

/// Sends through the router serving now.
struct Live(LiveRouter);

impl switchyard_kept::worker::Dispatch for Live {
    fn send(&self, request: Request<Body>) -> Pin<Box<dyn Future<Output = Response<Body>> + Send + '_>> {
        let mut router = self.0.current();
        Box::pin(async move {
            match router.call(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        })
    }
}

/// Starts this process's batch worker over `data` (once per process: the
/// worker outlives reloads, reading the router and store current then),
/// and the purge of what callers' keeps outlived.
pub fn start(gateway: &Arc<Gateway>, data: LiveRouter) {
    switchyard_kept::worker::spawn(
        gateway.kept.clone(),
        gateway.config.kept.batches,
        gateway.codecs,
        Arc::new(Live(data)),
    );
    switchyard_kept::purge::spawn(gateway.kept.clone());
}
