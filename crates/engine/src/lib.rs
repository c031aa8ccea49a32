//! The request path as named stages, each a small module with one job,
//! from a caller's request (framed by an ingress of the HTTP surface) to
//! the response it gets back. A request is one [`exchange`] the engine
//! owns from its first step to its settlement:
//!
//! 1. [`authenticate`]: who is calling (header-borne keys before the body
//!    is read, signatures after);
//! 2. the pool named, the reply's shape decided and the request's
//!    [`filter`]s built (guardrails, the response cache, retention, ...);
//! 3. [`admit`]: the key may name the pool, and its chain has room for the
//!    request's bounded worst case, which is reserved;
//! 4. the filters' request hooks: they may rewrite the body, refuse, or
//!    answer in place of the upstream (a cache hit);
//! 5. [`plan`]: the pool's candidates in try order;
//! 6. the filters' `before_send` (a moderator's verdict), then [`attempt`]:
//!    per candidate, the lane gate ([`lane_gate`]: breaker, permit), the
//!    send ([`send`]) and one judgement of the answer ([`disposition`],
//!    [`exhausted`]);
//! 7. [`reply`] and [`relay`]: a whole reply, or the stream frame by frame,
//!    each through the filters' reply hooks;
//! 8. [`settle`]: the request's record settles once, however it ended.
//!
//! A stage that refuses ends the request with an answer in the caller's
//! protocol ([`answer`], [`render`]). A request that may be billed moves
//! onto a task of its own if its caller hangs up, so a hang-up never stops
//! its accounting: the upstream call finishes and settles (bounded by the
//! lane's timeouts), or is charged at its reservation.

pub mod admit;
mod answer;
pub mod attempt;
pub mod authenticate;
pub mod candidate;
pub mod disposition;
mod env;
mod exchange;
pub mod exhausted;
mod filter;
pub mod first_token;
mod identity;
pub mod lane_gate;
pub mod lane_health;
mod operation;
pub mod plan;
pub mod probe;
mod relay;
pub mod render;
pub mod reply;
mod run;
pub mod send;
pub mod settle;
mod signatures;
#[cfg(test)]
mod testing;
mod translation;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Response;
use switchyard_ir::{ErrorInfo, ErrorKind};
use switchyard_state::call::Call;
use switchyard_state::Gateway;

use exchange::{Exchange, Shape};
use filter::Flow;
pub use probe::probe;
use render::internal_error;
pub use render::{render_error, ResponseBody};
use reply::Answered;
use settle::Record;

/// Serves one call end to end through the stages. The request's record is
/// settled exactly once whatever the outcome (by the stream relay when the
/// answer is a stream). A request that may be billed is [`Detachable`]: if
/// the caller goes away, its stages move onto a task of their own, finish
/// the upstream call and settle what it cost.
pub fn forward(
    gateway: Arc<Gateway>,
    call: Call,
    record: Box<Record>,
) -> impl Future<Output = Response<ResponseBody>> + Send {
    let billed = gateway.governance.as_ref().is_some_and(|governance| governance.ledger.is_some());
    if billed {
        let mut record = record;
        let gone = record.watch_caller();
        futures_util::future::Either::Right(Detachable(Some(Box::pin(stages(gateway, call, record))), gone))
    } else {
        // Boxed too: the stages' future is kilobytes, and each layer that
        // awaits it inline moves all of it (three copies a request, 8 % of
        // a passthrough's instructions once it outgrew memcpy's vector loop).
        futures_util::future::Either::Left(Box::pin(stages(gateway, call, record)))
    }
}

/// A billed request's stages, boxed so that they can outlive their caller:
/// polled in place while the caller waits (no task, no hand-off), and moved
/// onto a task of their own when the caller goes away first, where they
/// run to their end and settle.
struct Detachable(
    Option<Pin<Box<dyn Future<Output = Response<ResponseBody>> + Send>>>,
    /// Its record's flag: set when the caller goes first.
    Arc<std::sync::atomic::AtomicBool>,
);

impl Future for Detachable {
    type Output = Response<ResponseBody>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(stages) = self.0.as_mut() else { return Poll::Ready(internal_error()) };
        let answer = std::task::ready!(stages.as_mut().poll(cx));
        self.0 = None;
        Poll::Ready(answer)
    }
}

impl Drop for Detachable {
    fn drop(&mut self) {
        let Some(stages) = self.0.take() else { return };
        // The caller hung up mid-request: the upstream call finishes (bounded
        // by the lane's timeouts) and settles as a 499, and its answer is
        // dropped.
        self.1.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            switchyard_tasks::work_on(&runtime, async move { drop(stages.await) });
        }
    }
}

/// The stages in order; each one that refuses answers the caller.
async fn stages(gateway: Arc<Gateway>, call: Call, record: Box<Record>) -> Response<ResponseBody> {
    let Some(pool) = gateway.resolve(&call.name) else {
        let info = unknown_name(&call.name);
        return answer::refused_at_door(&gateway, &call, record, &info).await;
    };
    let serves = gateway.pools[pool].operation;
    if serves != call.operation.lane() {
        let info = wrong_operation(&call, serves);
        return answer::refused_at_door(&gateway, &call, record, &info).await;
    }
    let mut x = Exchange::new(call, record, pool);
    x.record.named(pool, x.call.task(), x.call.stream);
    x.shape = Shape::of(&gateway, &x.call, pool);
    x.filters = filter::build(&gateway, &x.call, pool, &x.shape);
    x.record.keep_request(&x.call.body);
    let downgraded = match admit::admit(&gateway, &x.call, pool, &mut x.record).await {
        Ok(downgraded) => downgraded,
        Err(denied) => {
            if denied.own {
                admit::refused_for_conduct(&gateway, &x.call);
            }
            return answer::refused(&gateway, &mut x, &denied.info, denied.retry_after).await;
        }
    };
    if let Some(downgraded) = &downgraded {
        // A budget sent the call to a cheaper pool: it is that pool's call.
        let pool = downgraded.pool;
        x.pool = pool;
        x.record.named(pool, x.call.task(), x.call.stream);
        x.shape = Shape::of(&gateway, &x.call, pool);
        x.filters = filter::build(&gateway, &x.call, pool, &x.shape);
    }
    match x.request_filters(&gateway).await {
        Flow::Continue => {}
        Flow::Refuse(refusal) => {
            if refusal.own {
                admit::refused_for_conduct(&gateway, &x.call);
            }
            return answer::refused(&gateway, &mut x, &refusal.info, None).await;
        }
        Flow::Answer(stood_in) => {
            if let Err(info) = x.filters.before_send(&x.call, &mut x.record).await {
                return answer::refused(&gateway, &mut x, &info, None).await;
            }
            return answer::stood_in(&gateway, x, stood_in).await;
        }
    }
    let mut plan = match plan::plan(&gateway, &mut x).await {
        Ok(plan) => plan,
        Err(info) => return answer::refused(&gateway, &mut x, &info, None).await,
    };
    if let Some(downgraded) = downgraded {
        plan.policy = Some(Arc::from("downgraded"));
        plan.downgrade = downgraded.header;
    }
    for &skipped in &plan.not_entitled {
        if let Some(&lane) = gateway.pools[skipped].members.first() {
            x.record.attempted(lane, 0, Some("not_entitled"), std::time::Duration::ZERO);
        }
    }
    if let Err(info) = x.filters.before_send(&x.call, &mut x.record).await {
        return answer::refused(&gateway, &mut x, &info, None).await;
    }
    match attempt::attempt(&gateway, &mut x, &plan).await {
        Answered::Whole(response) => answer::finished(&gateway, &mut x, response).await,
        // The stream's relay takes the exchange, and settles it.
        Answered::Stream(head, relaying) => relay::start(gateway, x, head, *relaying),
    }
}

/// A pool asked for what its lanes do not serve: the caller's not-found,
/// naming both operations.
fn wrong_operation(call: &Call, serves: switchyard_ir::Operation) -> ErrorInfo {
    let message = format!(
        "`{}` serves {serves}, not {}; name a model or pool that serves {} (GET /v1/models lists each one's operation)",
        call.name, call.operation, call.operation
    );
    ErrorInfo::new(ErrorKind::NotFound, message)
}

fn unknown_name(name: &str) -> ErrorInfo {
    let message = if name.is_empty() {
        "the request names no model; set `model` to a model or pool (GET /v1/models lists them)".to_owned()
    } else {
        format!("model or pool `{name}` does not exist (GET /v1/models lists them)")
    };
    ErrorInfo::new(ErrorKind::NotFound, message)
}

#[cfg(test)]
mod future_sizes {
    //! Every request holds these futures, and boxing one copies all of it:
    //! their sizes are memory per request (per open stream) and bytes moved.
    //! A rare path's future is boxed where it is awaited (a hedged race, a
    //! split send, a broken stream's failover, a full ledger queue); these
    //! bounds catch a change that puts one back on the common path.

    fn size_of_output<F, A, B, C, Fut>(_: &F) -> usize
    where
        F: Fn(A, B, C) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    #[test]
    fn a_request_future_stays_small() {
        let stages = size_of_output(&super::stages);
        assert!(stages <= 7 << 10, "the stages' future is {stages} bytes (was 8,952 before rare paths were boxed)");
        let finished = size_of_output(&super::answer::finished);
        assert!(finished <= 512, "settling's future is {finished} bytes: is the ledger push awaited inline again?");
    }
}
