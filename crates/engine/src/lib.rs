//! The request path as named stages, each a small module with one job,
//! from a caller's request (framed by an ingress of the HTTP surface) to
//! the response it gets back:
//!
//! 1. [`authenticate`]: who is calling (header-borne keys before the body
//!    is read, signatures after);
//! 2. [`admit`]: the key may name the pool, and its chain has room for the
//!    request's bounded worst case, which is reserved;
//! 3. [`policy`] (request): the gateway's stages may rewrite or end it;
//! 4. [`cache`] (lookup): a stage may answer it from what it kept;
//! 5. [`plan`]: the pool's candidates in try order;
//! 6. [`attempt`]: per candidate, the lane gate ([`lane_gate`]: breaker,
//!    permit), the send ([`send`]) and one judgement of the answer
//!    ([`disposition`], [`exhausted`]);
//! 7. [`reply`] and [`relay`]: a whole reply, or the stream frame by frame;
//! 8. [`policy`] (response): the stages see the answer's head;
//! 9. [`cache`] (store): a whole reply is offered to the stages;
//! 10. [`settle`]: the request's record settles once, however it ended.
//!
//! A stage that refuses ends the request with an answer in the caller's
//! protocol ([`render`]). A request that may be billed moves onto a task of
//! its own if its caller hangs up, so a hang-up never stops its accounting:
//! the upstream call finishes and settles (bounded by the lane's timeouts),
//! or is charged at its reservation.

pub mod admit;
pub mod attempt;
pub mod authenticate;
pub mod cache;
pub mod candidate;
pub mod continuation;
mod count;
pub mod disposition;
mod embed;
pub mod exhausted;
pub mod first_token;
mod guard;
mod identity;
pub mod lane_gate;
pub mod lane_health;
mod media;
mod operation;
pub mod plan;
pub mod policy;
pub mod probe;
mod read;
mod relay;
pub mod render;
pub mod reply;
mod rerank;
mod response_cache;
pub mod send;
pub mod settle;
mod signatures;
mod translation;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderValue, Response};
use switchyard_ir::{ErrorInfo, ErrorKind, Request};
use switchyard_state::call::Call;
use switchyard_state::Gateway;

pub use probe::probe;
use render::{error_response, internal_error, SERVER_TIMING};
pub use render::{render_error, ResponseBody};
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
        futures_util::future::Either::Right(Detachable(Some(Box::pin(stages(gateway, call, record)))))
    } else {
        futures_util::future::Either::Left(stages(gateway, call, record))
    }
}

/// A billed request's stages, boxed so that they can outlive their caller:
/// polled in place while the caller waits (no task, no hand-off), and moved
/// onto a task of their own when the caller goes away first, where they
/// run to their end and settle.
struct Detachable(Option<Pin<Box<dyn Future<Output = Response<ResponseBody>> + Send>>>);

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
        // by the lane's timeouts) and settles, and its answer is dropped.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { drop(stages.await) });
        }
    }
}

/// The stages in order; each one that refuses answers the caller.
async fn stages(gateway: Arc<Gateway>, mut call: Call, mut record: Box<Record>) -> Response<ResponseBody> {
    let Some(pool) = gateway.resolve(&call.name) else {
        return refused(&gateway, &call, record, &unknown_name(&call.name), None).await;
    };
    let serves = gateway.pools[pool].operation;
    if serves != call.operation {
        return refused(&gateway, &call, record, &wrong_operation(&call, serves), None).await;
    }
    record.named(pool, call.task(), call.stream);
    if gateway.pools[pool].cache_ttl.is_some() {
        // Every reply of a caching pool says what the cache did: a request
        // refused before its lookup did not use it.
        call.cache = switchyard_state::call::CacheState::Bypass;
    }
    record.keep_request(&call.body);
    if let Err(denied) = admit::admit(&gateway, &call, pool, &mut record).await {
        if denied.own {
            admit::refused_for_conduct(&gateway, &call);
        }
        return refused(&gateway, &call, record, &denied.info, denied.retry_after).await;
    }
    // The moderators (if any) are asked while the request is routed; no
    // answer leaves before their verdict.
    let moderation = match guard::request(&gateway, &mut call, pool, &mut record).await {
        Ok(moderation) => moderation,
        Err(info) => {
            admit::refused_for_conduct(&gateway, &call);
            return refused(&gateway, &call, record, &info, None).await;
        }
    };
    record.retain_request(&call.body);
    if gateway.response_cache.is_some() {
        if let Some(hit) = response_cache::lookup(&gateway, &mut call, pool, &mut record).await {
            if let Err(info) = guard::verdict(moderation, &mut record).await {
                return refused(&gateway, &call, record, &info, None).await;
            }
            return finished(&gateway, &call, Some(record), hit).await;
        }
    }
    // Without stages, the policy and cache points are not even entered.
    if !gateway.stages.is_empty() {
        if let Err(info) = policy::request(&gateway, &mut call).await {
            return refused(&gateway, &call, record, &info, None).await;
        }
        if let Some(stored) = cache::lookup(&gateway, &call).await {
            if let Err(info) = guard::verdict(moderation, &mut record).await {
                return refused(&gateway, &call, record, &info, None).await;
            }
            return finished(&gateway, &call, Some(record), stored).await;
        }
    }
    meter_stream(&gateway, &mut call);
    call.continue_stream = call.stream
        && call.operation == switchyard_ir::Operation::Chat
        && !call.count_tokens
        && gateway.pools[pool].failover.continuations > 0;
    let mut translated: Option<Request> = None;
    let plan = match plan::plan(&gateway, &mut call, pool, &mut translated).await {
        Ok(plan) => plan,
        Err(info) => return refused(&gateway, &call, record, &info, None).await,
    };
    for &skipped in &plan.not_entitled {
        if let Some(&lane) = gateway.pools[skipped].members.first() {
            record.attempted(lane, 0, Some("not_entitled"), std::time::Duration::ZERO);
        }
    }
    if let Err(info) = guard::verdict(moderation, &mut record).await {
        return refused(&gateway, &call, record, &info, None).await;
    }
    let mut record = Some(record);
    let response = attempt::attempt(&gateway, &call, &plan, &mut translated, &mut record).await;
    // A stream's record went with its relay; any other settles here.
    finished(&gateway, &call, record, response).await
}

/// A metered stream must carry usage. One that would not (an OpenAI caller
/// that did not ask for it) asks the upstream for it and hides it from the
/// caller again; a protocol that cannot do that is translated.
fn meter_stream(gateway: &Gateway, call: &mut Call) {
    let codec = gateway.codec(call.ingress);
    let metered = gateway.governance.as_ref().is_some_and(|g| g.ledger.is_some());
    // Only chat streams.
    if metered && call.stream && !codec.stream_reports_usage(&call.body) {
        call.hide_usage = codec.stream_usage_filter().is_some();
        call.meter_stream = !call.hide_usage;
    }
}

/// An answer on its way out: the response policy sees its head, and the
/// record (unless a stream's relay took it) settles.
async fn finished(
    gateway: &Gateway,
    call: &Call,
    record: Option<Box<Record>>,
    response: Response<ResponseBody>,
) -> Response<ResponseBody> {
    let mut response = response;
    if let Some(status) = response_cache::status(call) {
        response.headers_mut().insert(response_cache::X_SWITCHYARD_CACHE, status);
    }
    if !gateway.stages.is_empty() {
        response = policy::response(gateway, call, response);
    }
    if let Some(record) = record {
        if let Some(timing) = record.server_timing() {
            response.headers_mut().insert(SERVER_TIMING, timing);
        }
        record.finish(response.status().as_u16()).await;
    }
    response
}

/// A stage's refusal, in the caller's protocol (with `Retry-After` when
/// waiting helps), settled.
async fn refused(
    gateway: &Gateway,
    call: &Call,
    mut record: Box<Record>,
    info: &ErrorInfo,
    retry_after: Option<u64>,
) -> Response<ResponseBody> {
    record.refused_with(call.caller.clone(), info.kind);
    let mut response = error_response(gateway, call, info);
    if let Some(status) = response_cache::status(call) {
        response.headers_mut().insert(response_cache::X_SWITCHYARD_CACHE, status);
    }
    if let Some(seconds) = retry_after {
        response.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    let response = policy::response(gateway, call, response);
    record.finish(response.status().as_u16()).await;
    response
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

    fn size_of_output4<F, A, B, C, D, Fut>(_: &F) -> usize
    where
        F: Fn(A, B, C, D) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    #[test]
    fn a_request_future_stays_small() {
        let stages = size_of_output(&super::stages);
        assert!(stages <= 7 << 10, "the stages' future is {stages} bytes (was 8,952 before rare paths were boxed)");
        let finished = size_of_output4(&super::finished);
        assert!(finished <= 512, "settling's future is {finished} bytes: is the ledger push awaited inline again?");
    }
}
