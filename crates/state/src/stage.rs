//! The seam where a concern joins the request path without editing it, in
//! the manner of Pingora's `ProxyHttp` phases: a [`Stage`] is called at the
//! named points of every request, in the order the gateway holds them
//! (`Gateway::stages`). Guardrails, caches and header stamps are stages;
//! the path's own steps (authenticate, admit, plan, attempt, relay,
//! settle) call them and never learn what they are. A gateway with no
//! stage pays one empty loop per point.

use std::future::Future;
use std::pin::Pin;

use switchyard_ir::ErrorInfo;

use crate::call::Call;

/// A stage's asynchronous work.
pub type StageFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a stage decides about a request before it is routed.
#[derive(Debug)]
pub enum Verdict {
    /// Go on to the next stage.
    Continue,
    /// End the request with this error, in the caller's protocol.
    Answer(ErrorInfo),
}

/// A whole answer a stage gives instead of routing (a cache's hit).
pub type Stored = http::Response<bytes::Bytes>;

/// A concern on the request path. Every point has a default that does
/// nothing, so a stage implements only the points it joins; a point that
/// returns `None` allocates nothing.
pub trait Stage: Send + Sync {
    /// Its name, for logs.
    fn name(&self) -> &'static str;

    /// Request policy, after admission and before routing: the stage may
    /// rewrite the call or end it.
    fn on_request<'a>(&'a self, call: &'a mut Call) -> Option<StageFuture<'a, Verdict>> {
        let _ = call;
        None
    }

    /// Cache lookup, after request policy: an answer that stands in for
    /// routing the request at all.
    fn lookup<'a>(&'a self, call: &'a Call) -> Option<StageFuture<'a, Option<Stored>>> {
        let _ = call;
        None
    }

    /// Response policy: the answer's head (status and headers), before it
    /// leaves for the caller, whatever produced it.
    fn on_response(&self, call: &Call, head: &mut http::response::Parts) {
        let _ = (call, head);
    }

    /// Cache store: a whole reply as the caller gets it.
    fn store(&self, call: &Call, reply: &bytes::Bytes) {
        let _ = (call, reply);
    }
}
