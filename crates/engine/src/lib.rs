//! The forwarding engine: from a caller's request (already framed by an
//! ingress) to the response it gets back. Walks the pool's candidates in
//! routing order, skipping lanes that are tripped, at their cap, already
//! tried or too small; turns the request into the lane's protocol (byte
//! passthrough when the protocols match); sends it; classifies failures
//! (`switchyard_health`) into lane and request effects; and turns the answer
//! back, streams frame by frame. Failover happens only before the first
//! byte reaches the caller. Streams are relayed by `relay`.

pub mod probe;
mod relay;
pub mod routing;
pub mod settle;
mod translation;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use switchyard_codec::tap::UsageTap;
use switchyard_codec::{scan, Codec, Credentials, Outbound};
use switchyard_config::Endpoint;
use switchyard_health::{effects, normalize, Admission, LaneEffect, RequestEffect, StatusClass, Unavailable};
use switchyard_ir::{ErrorInfo, ErrorKind, Protocol, Request, Usage};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use crate::routing::Plan;
use crate::settle::Record;
use relay::{StreamRelay, Tally};
use switchyard_state::call::{Call, Slot};
use switchyard_state::governance::Denied;
use switchyard_state::{Counters, Gateway, Lane};
use switchyard_telemetry::trace::genai_provider;
use switchyard_transport::{full_body, TransportError, UpstreamBody, UpstreamRequest, UpstreamResponse};
use switchyard_transport::{mock, BoxError};

// Header names built at compile time (a name built at run time is parsed each time).
const SERVER_TIMING: HeaderName = HeaderName::from_static("server-timing");
const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
const X_AMZN_ERRORTYPE: HeaderName = HeaderName::from_static("x-amzn-errortype");
const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
const X_SWITCHYARD_BILLING: HeaderName = HeaderName::from_static("x-switchyard-billing");
const X_SWITCHYARD_LANE: HeaderName = HeaderName::from_static("x-switchyard-lane");
const X_SWITCHYARD_PROVIDER: HeaderName = HeaderName::from_static("x-switchyard-provider");
const X_SWITCHYARD_ROUTE_POLICY: HeaderName = HeaderName::from_static("x-switchyard-route-policy");
const X_SWITCHYARD_ROUTE_TARGET: HeaderName = HeaderName::from_static("x-switchyard-route-target");
const X_SWITCHYARD_SESSION: HeaderName = HeaderName::from_static("x-switchyard-session");

/// The body type of every response the engine writes.
pub type ResponseBody = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

/// Largest upstream body read whole (non-streamed replies and error bodies).
const MAX_UPSTREAM_BODY: usize = 64 << 20;

/// One candidate: a lane and the wire model to ask it for.
struct Candidate<'a> {
    lane: &'a Lane,
    lane_index: usize,
    wire_model: &'a str,
    lane_header: HeaderValue,
    slot: Slot,
}

impl Candidate<'_> {
    /// The wire model, shared (an ad-hoc lane's model from the path is
    /// the one copy made).
    fn wire_model_arc(&self) -> Arc<str> {
        if *self.lane.wire_model == *self.wire_model {
            self.lane.wire_model.clone()
        } else {
            Arc::from(self.wire_model)
        }
    }
}

/// Reports a try's outcome to the lane's breaker and counters.
#[derive(Clone)]
pub(crate) struct Health {
    gateway: Arc<Gateway>,
    slot: Slot,
}

impl Health {
    fn success(&self) {
        let pool = &self.gateway.pools[self.slot.pool];
        let closed = pool.breaker(self.slot.member).record_success(now());
        Counters::bump(&pool.counters[self.slot.member].ok);
        if let (true, Some(shared)) = (closed, &self.gateway.fleet_state) {
            shared.closed(&pool.name, &self.gateway.lanes[pool.members[self.slot.member]].name);
        }
    }

    /// Tells the fleet this instance opened the lane's breaker.
    fn share_trip(&self, reason: &str) {
        let Some(shared) = &self.gateway.fleet_state else { return };
        let pool = &self.gateway.pools[self.slot.pool];
        let open_for = pool.breaker(self.slot.member).retry_in(now()).unwrap_or_default();
        shared.tripped(&pool.name, &self.gateway.lanes[pool.members[self.slot.member]].name, open_for, reason);
    }

    pub(crate) fn apply(&self, effect: LaneEffect, reason: &str, retry_after: Option<Duration>) {
        let slot = self.slot;
        let pool = &self.gateway.pools[slot.pool];
        match effect {
            // Not a verdict on the lane: a half-open trial is released by its guard.
            LaneEffect::None => Counters::bump(&pool.counters[slot.member].client_faults),
            LaneEffect::Failure => {
                let tripped = pool.breaker(slot.member).record_failure(now(), reason, retry_after, fastrand::f64());
                Counters::bump(&pool.counters[slot.member].upstream_failures);
                if tripped {
                    self.share_trip(reason);
                }
                if let (true, Some(metrics)) = (tripped, self.gateway.metrics()) {
                    metrics.trip(metrics.place(Some(slot.pool), Some(slot.member)), false);
                }
            }
            LaneEffect::Trip => {
                pool.breaker(slot.member).record_hard_down(now(), reason, fastrand::f64());
                Counters::bump(&pool.counters[slot.member].upstream_failures);
                self.share_trip(reason);
                if let Some(metrics) = self.gateway.metrics() {
                    metrics.trip(metrics.place(Some(slot.pool), Some(slot.member)), true);
                }
            }
            LaneEffect::Rest => {
                pool.breaker(slot.member).record_rate_limited(now(), retry_after);
                Counters::bump(&pool.counters[slot.member].rate_limited);
            }
        }
    }
}

/// Holds a half-open breaker's single trial. A try that ends without a
/// verdict on the lane — the caller's own mistake, a lane at its cap, or the
/// caller hanging up while the request is in flight (the future is dropped)
/// — releases the trial, so the next request can be it; otherwise the lane
/// would stay half-open with a trial nobody finishes.
struct TrialGuard {
    gateway: Arc<Gateway>,
    slot: Slot,
    armed: bool,
    /// The fleet's claim on the trial, given back when the try ends (its
    /// verdict, if any, reaches the other instances as a trip or a close).
    claimed: bool,
}

impl TrialGuard {
    /// The trial got its verdict (success or failure was recorded).
    fn settle(&mut self) {
        self.armed = false;
    }
}

impl Drop for TrialGuard {
    fn drop(&mut self) {
        let pool = &self.gateway.pools[self.slot.pool];
        if self.armed {
            pool.breaker(self.slot.member).release_trial();
        }
        if let (true, Some(fleet)) = (self.claimed, &self.gateway.fleet_state) {
            fleet.release_trial(&pool.name, &self.gateway.lanes[pool.members[self.slot.member]].name);
        }
    }
}

/// The instant the request path reads (tokio's, so tests can pause time).
fn now() -> std::time::Instant {
    Instant::now().into_std()
}

/// Counts a request in flight on a lane for as long as it lives.
pub(crate) struct InFlight {
    gateway: Arc<Gateway>,
    lane: usize,
}

impl InFlight {
    fn new(gateway: &Arc<Gateway>, lane: usize) -> InFlight {
        gateway.lanes[lane].in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight { gateway: gateway.clone(), lane }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.gateway.lanes[self.lane].in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What the failed tries add up to, for the exhaustion answer.
#[derive(Default)]
struct Exhaustion {
    last: Option<Failure>,
    rate_limited: Option<Failure>,
    /// Earliest recovery of a candidate skipped because it is down for faults.
    cooling: Option<Duration>,
    /// Earliest end of rest of a candidate skipped after a rate limit.
    resting: Option<Duration>,
    at_cap: bool,
    /// The pool's failover deadline passed.
    deadline: bool,
}

impl Exhaustion {
    fn skipped(&mut self, retry_in: Duration, cause: Unavailable) {
        let earliest = |current: Option<Duration>| Some(current.map_or(retry_in, |c| c.min(retry_in)));
        match cause {
            Unavailable::RateLimited => self.resting = earliest(self.resting),
            Unavailable::Cooling | Unavailable::TrialInFlight => self.cooling = earliest(self.cooling),
        }
    }
}

/// Why a try did not succeed.
enum Failure {
    /// No response arrived.
    Transport(TransportError),
    /// The upstream answered with an error.
    Upstream(Box<UpstreamFailure>),
}

/// An upstream's error answer, kept to relay if nothing better comes.
struct UpstreamFailure {
    lane_protocol: Protocol,
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    info: ErrorInfo,
    lane_header: HeaderValue,
    provider_header: HeaderValue,
}

/// Serves one call end to end: admit (governance), then attempt the
/// candidates. The request's record is settled whatever the outcome (by the
/// stream relay when the answer is a stream, by its drop when the caller
/// goes away first).
pub async fn forward(gateway: Arc<Gateway>, call: Call, mut record: Box<Record>) -> Response<ResponseBody> {
    let Some(pool) = gateway.resolve(&call.name) else {
        let response = error_response(&gateway, &call, &unknown_name(&call.name));
        record.finish(response.status().as_u16()).await;
        return response;
    };
    record.named(pool, call.stream);
    record.keep_request(&call.body);
    if let Err(denied) = admit(&gateway, &call, pool, &mut record).await {
        let mut response = error_response(&gateway, &call, &denied.info);
        if let Some(seconds) = denied.retry_after {
            response.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        record.finish(response.status().as_u16()).await;
        return response;
    }
    // A metered stream must carry usage. One that would not (an OpenAI
    // caller that did not ask for it) asks the upstream for it and hides it
    // from the caller again; a protocol that cannot do that is translated.
    let mut call = call;
    let codec = gateway.codec(call.ingress);
    let needs_usage = gateway.governance.as_ref().is_some_and(|g| g.ledger.is_some())
        && call.stream
        && !codec.stream_reports_usage(&call.body);
    if needs_usage {
        call.hide_usage = codec.stream_usage_filter().is_some();
        call.meter_stream = !call.hide_usage;
    }
    let mut record = Some(record);
    let mut response = attempt(&gateway, call, pool, &mut record).await;
    // A stream's record went with its relay; any other settles here.
    if let Some(record) = record {
        if let Some(timing) = record.server_timing() {
            response.headers_mut().insert(SERVER_TIMING, timing);
        }
        record.finish(response.status().as_u16()).await;
    }
    response
}

/// Governance's admission of a call: its key may name the pool, and its
/// chain has room for what the request may cost, which is reserved on the
/// record.
async fn admit(gateway: &Arc<Gateway>, call: &Call, pool: usize, record: &mut Record) -> Result<(), Denied> {
    let Some(governance) = &gateway.governance else {
        return Ok(());
    };
    let codec = gateway.codec(call.ingress);
    let input = switchyard_governance::estimate::input_tokens(&call.body, codec.media_members());
    let reservation = match &call.caller {
        None => None,
        Some(caller) => {
            // A lane without a price would serve a budgeted key for free.
            if let (true, Some(lane)) = (caller.key.budgeted, &gateway.pools[pool].unpriced) {
                let message = format!(
                    "`{}` can reach lane `{lane}`, which has no rate_card price, so API key {} (which has a USD budget) may not use it",
                    call.name, caller.key.record.prefix
                );
                return Err(Denied { info: ErrorInfo::new(ErrorKind::PermissionDenied, message), retry_after: None });
            }
            // What admission reads is read once, each member named once.
            let metered = codec.metered(&call.body).map_err(|err| Denied {
                info: ErrorInfo::new(ErrorKind::InvalidRequest, err.to_string()),
                retry_after: None,
            })?;
            let estimate = switchyard_governance::estimate::worst_case(
                input,
                metered.max_tokens,
                governance.default_max_tokens,
                metered.choices,
                &gateway.pools[pool].price_ceiling,
            );
            Some(governance.admit(caller, &call.name, estimate).await?)
        }
    };
    record.admitted(call.caller.clone(), reservation, input);
    Ok(())
}

/// Tries the plan's candidates in order until one answers.
async fn attempt(
    gateway: &Arc<Gateway>,
    mut call: Call,
    pool: usize,
    record: &mut Option<Box<Record>>,
) -> Response<ResponseBody> {
    let gateway = gateway.clone();
    let started = Instant::now();
    let mut translated: Option<Request> = None;
    let plan = match routing::plan(&gateway, &mut call, pool, &mut translated).await {
        Ok(plan) => plan,
        Err(info) => return error_response(&gateway, &call, &info),
    };
    let candidates = match candidates(&gateway, &call, &plan) {
        Ok(found) => found,
        Err(info) => return error_response(&gateway, &call, &info),
    };
    let deadline = plan.deadline;
    let mut hops: Vec<(usize, u32)> = Vec::new();
    let mut tried: Vec<usize> = Vec::new();
    let mut larger_than: Option<u64> = None;
    let mut exhaustion = Exhaustion::default();
    // Why the last attempt failed over, counted when the next one starts.
    let mut moved_on: Option<StatusClass> = None;
    let total = candidates.len();
    for (position, candidate) in candidates.iter().enumerate() {
        if Instant::now() >= deadline {
            exhaustion.deadline = true;
            break;
        }
        let lane = candidate.lane;
        let slot = candidate.slot;
        if tried.contains(&candidate.lane_index) {
            continue;
        }
        if let Some(min) = larger_than {
            if lane.context_window.is_none_or(|window| window <= min) {
                continue;
            }
        }
        let max_hops = gateway.pools[slot.pool].failover.max_hops;
        if hops.iter().find(|(p, _)| *p == slot.pool).map_or(0, |(_, n)| *n) >= max_hops {
            continue;
        }
        let admission = gateway.pools[slot.pool].breaker(slot.member).admit(now());
        if let Admission::Reject { retry_in, cause } = admission {
            exhaustion.skipped(retry_in, cause);
            continue;
        }
        // One instance of the fleet sends a half-open lane's trial.
        let mut claimed = false;
        if let (Admission::Trial, Some(shared)) = (&admission, &gateway.fleet_state) {
            let pool = &gateway.pools[slot.pool];
            let hold = lane.timeouts.request.min(deadline.saturating_duration_since(Instant::now()));
            if !shared.claim_trial(&pool.name, &lane.name, hold).await {
                pool.breaker(slot.member).release_trial();
                exhaustion.skipped(Duration::ZERO, Unavailable::TrialInFlight);
                continue;
            }
            claimed = true;
        }
        let health = Health { gateway: gateway.clone(), slot };
        let mut trial = TrialGuard { gateway: gateway.clone(), slot, armed: admission == Admission::Trial, claimed };
        let others_left = position + 1 < total;
        let queue = gateway.pools[slot.pool].queue_timeout.min(deadline.saturating_duration_since(Instant::now()));
        let Some(permit) = acquire(lane, others_left, queue).await else {
            exhaustion.at_cap = true;
            continue;
        };
        match hops.iter_mut().find(|(p, _)| *p == slot.pool) {
            Some(entry) => entry.1 += 1,
            None => hops.push((slot.pool, 1)),
        }
        tried.push(candidate.lane_index);
        if let (Some(cause), Some(metrics)) = (moved_on.take(), gateway.metrics()) {
            metrics.failover(metrics.place(Some(plan.pool), None), cause);
        }
        let prepared = match prepare(&gateway, &call, candidate, &mut translated) {
            Ok(prepared) => prepared,
            Err(info) => {
                return error_response(&gateway, &call, &info);
            }
        };
        let dropped_header = prepared.dropped_header.clone();
        let in_flight = InFlight::new(&gateway, candidate.lane_index);
        let sent = Instant::now();
        let trace = record.as_mut().and_then(|r| r.trace.as_mut());
        let traceparent = trace.and_then(|trace| {
            trace.begin_attempt(&lane.name, candidate.wire_model_arc(), genai_provider(lane.protocol))
        });
        // The failover deadline binds an attempt in flight too.
        let attempt = send(&gateway, lane, &call, candidate.wire_model, prepared, traceparent);
        let outcome = tokio::time::timeout_at(deadline, attempt).await;
        if let Some(record) = record.as_mut() {
            let took = sent.elapsed();
            record.waited(took);
            let failovers = hops.iter().map(|(_, n)| n).sum::<u32>().saturating_sub(1);
            record.serving(slot, candidate.lane_index, candidate.wire_model_arc(), failovers);
            let (status, failure) = match &outcome {
                Ok(Ok(upstream)) if upstream.status.is_success() => (upstream.status.as_u16(), None),
                Ok(Ok(upstream)) => (upstream.status.as_u16(), Some("upstream_error")),
                Ok(Err(_)) => (0, Some("unreachable")),
                Err(_) => (0, Some("deadline")),
            };
            record.attempted(candidate.lane_index, status, failure, took);
            if let Some(trace) = record.trace.as_mut() {
                trace.end_attempt(status, failure);
            }
        }
        let upstream = match outcome {
            Err(_) => {
                // The pool's budget ran out, not necessarily the lane's patience:
                // no verdict on the lane (the trial guard releases a trial).
                tracing::warn!(request_id = ?call.request_id, lane = %lane.name, "failover deadline reached mid-attempt");
                exhaustion.deadline = true;
                break;
            }
            Ok(Ok(upstream)) => upstream,
            Ok(Err(err)) => {
                let class = match err {
                    TransportError::HeadersTimeout(_) => StatusClass::Timeout,
                    TransportError::Connect(_) | TransportError::Io(_) => StatusClass::Network,
                };
                tracing::warn!(request_id = ?call.request_id, lane = %lane.name, error = %err, "upstream unreachable");
                health.apply(effects(class, false).0, &err.to_string(), None);
                trial.settle();
                if let Some(metrics) = gateway.metrics() {
                    metrics.attempt(candidate.lane_index, Some(class));
                }
                moved_on = Some(class);
                exhaustion.last = Some(Failure::Transport(err));
                continue;
            }
        };
        if upstream.status.is_success() {
            health.success();
            trial.settle();
            if let Some(metrics) = gateway.metrics() {
                metrics.attempt(candidate.lane_index, None);
            }
            lane.record_latency(sent.elapsed());
            lane.record_headroom(&upstream.headers);
            if let (Some(session), true) = (&plan.session, slot.pool == plan.pool) {
                routing::pin(&gateway, plan.pool, session, slot.member);
            }
            let policy = plan.policy.clone();
            let guards = (permit, in_flight);
            let mut response = success(&gateway, &call, candidate, upstream, guards, health, started, record).await;
            translation::annotate(response.headers_mut(), dropped_header);
            if let Some(policy) = policy {
                let headers = response.headers_mut();
                if let Ok(value) = HeaderValue::try_from(&*policy) {
                    headers.insert(X_SWITCHYARD_ROUTE_POLICY, value);
                }
                headers.insert(X_SWITCHYARD_ROUTE_TARGET, candidate.lane_header.clone());
            }
            return response;
        }
        let status = upstream.status;
        let headers = upstream.headers;
        let body = match tokio::time::timeout(lane.timeouts.request, collect(upstream.body)).await {
            Ok(Ok(body)) => body,
            Ok(Err(err)) => {
                health.apply(LaneEffect::Failure, &err, None);
                trial.settle();
                moved_on = Some(StatusClass::Network);
                exhaustion.last = Some(Failure::Transport(TransportError::Io(err)));
                continue;
            }
            Err(_) => {
                health.apply(LaneEffect::Failure, "error body timed out", None);
                trial.settle();
                moved_on = Some(StatusClass::Timeout);
                exhaustion.last = Some(Failure::Transport(TransportError::Io("error body timed out".into())));
                continue;
            }
        };
        let raw = gateway.codec(lane.protocol).extract_error(status.as_u16(), &body);
        let class = normalize(
            status.as_u16(),
            raw.kind,
            raw.vendor_type.as_deref(),
            raw.vendor_code.as_deref(),
            &lane.error_map,
        );
        let retry_after = retry_after(&headers);
        let (lane_effect, request_effect) = effects(class, lane.passthrough_credentials);
        if let Some(metrics) = gateway.metrics() {
            metrics.attempt(candidate.lane_index, Some(class));
        }
        moved_on = Some(class);
        tracing::info!(
            request_id = ?call.request_id, lane = %lane.name, status = status.as_u16(), class = class.as_str(),
            message = %raw.message, "upstream error"
        );
        let reason = format!("{} {}", status.as_u16(), class.as_str());
        health.apply(lane_effect, &reason, retry_after);
        if lane_effect != LaneEffect::None {
            trial.settle();
        }
        let failure = Failure::Upstream(Box::new(UpstreamFailure {
            lane_protocol: lane.protocol,
            status,
            headers,
            body,
            info: raw.to_error_info(),
            lane_header: candidate.lane_header.clone(),
            provider_header: lane.provider_header.clone(),
        }));
        match request_effect {
            RequestEffect::Relay => return failure_response(&gateway, &call, failure),
            RequestEffect::FailoverLarger => {
                larger_than = Some(lane.context_window.unwrap_or(0).max(larger_than.unwrap_or(0)));
                exhaustion.last = Some(failure);
            }
            RequestEffect::Failover if class == StatusClass::RateLimited => exhaustion.rate_limited = Some(failure),
            RequestEffect::Failover => exhaustion.last = Some(failure),
        }
    }
    exhausted(&gateway, &call, exhaustion)
}

/// The answer when no candidate served: the honest status for why.
fn exhausted(gateway: &Gateway, call: &Call, exhaustion: Exhaustion) -> Response<ResponseBody> {
    // A rate limit is the most useful thing to tell: the caller should back off.
    if let Some(failure) = exhaustion.rate_limited {
        return failure_response(gateway, call, failure);
    }
    if let Some(failure) = exhaustion.last {
        return failure_response(gateway, call, failure);
    }
    if exhaustion.deadline {
        let info = ErrorInfo::new(
            ErrorKind::Timeout,
            format!("no lane of `{}` answered within the pool's failover timeout", call.name),
        );
        return error_response(gateway, call, &info);
    }
    // Every lane left is resting after rate limits: that is a rate limit for
    // the caller too (SDKs back off on a 429; a 503 reads as an outage).
    // A lane down for faults makes it a 503.
    let unavailable = match (exhaustion.cooling, exhaustion.resting) {
        (None, Some(resting)) => Some((
            ErrorKind::RateLimit,
            resting,
            format!("every lane of `{}` is rate-limited upstream; retry in {}s", call.name, whole_seconds(resting)),
        )),
        (Some(cooling), resting) => {
            let wait = resting.map_or(cooling, |r| r.min(cooling));
            Some((
                ErrorKind::Unavailable,
                wait,
                format!(
                    "every lane of `{}` is cooling down after failures; retry in {}s",
                    call.name,
                    whole_seconds(wait)
                ),
            ))
        }
        (None, None) => None,
    };
    if let Some((kind, wait, message)) = unavailable {
        let mut response = error_response(gateway, call, &ErrorInfo::new(kind, message));
        if let Ok(value) = HeaderValue::try_from(whole_seconds(wait).to_string()) {
            response.headers_mut().insert(http::header::RETRY_AFTER, value);
        }
        return response;
    }
    let message = if exhaustion.at_cap {
        format!("every lane of `{}` is at its concurrency limit", call.name)
    } else {
        format!("no lane of `{}` could take the request", call.name)
    };
    let mut response = error_response(gateway, call, &ErrorInfo::new(ErrorKind::Unavailable, message));
    response.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// A wait as the whole seconds a `Retry-After` carries, at least one.
fn whole_seconds(wait: Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
}

/// An upstream's `Retry-After`: delay-seconds or an HTTP-date (RFC 9110
/// 10.2.3), at most a day.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    parse_retry_after(headers.get(http::header::RETRY_AFTER)?.to_str().ok()?, SystemTime::now())
}

fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    const DAY: f64 = 86_400.0;
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(DAY)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO).min(Duration::from_secs_f64(DAY)))
}

fn unknown_name(name: &str) -> ErrorInfo {
    let message = if name.is_empty() {
        "the request names no model; set `model` to a model or pool (GET /v1/models lists them)".to_owned()
    } else {
        format!("model or pool `{name}` does not exist (GET /v1/models lists them)")
    };
    ErrorInfo::new(ErrorKind::NotFound, message)
}

/// The candidates in try order, from the routing plan.
fn candidates<'a>(gateway: &'a Gateway, call: &'a Call, plan: &Plan) -> Result<Vec<Candidate<'a>>, ErrorInfo> {
    plan.slots
        .iter()
        .map(|&slot| {
            let lane_index = gateway.pools[slot.pool].members[slot.member];
            let lane = &gateway.lanes[lane_index];
            match (&call.wire_model, lane.any_wire_model) {
                // An ad-hoc lane open to any model: the caller's path names it.
                (Some(wire_model), true) => {
                    let header = HeaderValue::try_from(format!("{}/{wire_model}", lane.provider))
                        .map_err(|_| ErrorInfo::new(ErrorKind::InvalidRequest, "model name is not printable ascii"))?;
                    Ok(Candidate { lane, lane_index, wire_model, lane_header: header, slot })
                }
                _ => Ok(Candidate {
                    lane,
                    lane_index,
                    wire_model: &lane.wire_model,
                    lane_header: lane.lane_header.clone(),
                    slot,
                }),
            }
        })
        .collect()
}

async fn acquire(lane: &Lane, others_left: bool, queue: Duration) -> Option<Option<OwnedSemaphorePermit>> {
    let Some(permits) = &lane.permits else {
        return Some(None);
    };
    match permits.clone().try_acquire_owned() {
        Ok(permit) => Some(Some(permit)),
        Err(_) if others_left => None,
        Err(_) => match tokio::time::timeout(queue, permits.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Some(Some(permit)),
            _ => None,
        },
    }
}

/// The upstream body and what was dropped translating it.
struct Prepared {
    body: Bytes,
    /// The `x-switchyard-dropped` value, when something was.
    dropped_header: Option<HeaderValue>,
}

fn prepare(
    gateway: &Gateway,
    call: &Call,
    candidate: &Candidate<'_>,
    translated: &mut Option<Request>,
) -> Result<Prepared, ErrorInfo> {
    let lane = candidate.lane;
    if call.passes_through_to(lane.protocol) {
        // Same protocol: the bytes go as they came, but for the model.
        let body = match &call.model_span {
            Some(span) if call.body.get(span.start + 1..span.end - 1) != Some(candidate.wire_model.as_bytes()) => {
                Bytes::from(scan::splice_model(&call.body, span.clone(), candidate.wire_model))
            }
            _ => call.body.clone(),
        };
        let body = match call.hide_usage {
            true => gateway.codec(lane.protocol).request_stream_usage(&body).map_or(body, Bytes::from),
            false => body,
        };
        return Ok(Prepared { body, dropped_header: None });
    }
    if translated.is_none() {
        let mut request = gateway.codec(call.ingress).read_request(&call.body).map_err(|err| err.to_error_info())?;
        request.stream = call.stream;
        *translated = Some(request);
    }
    let Some(request) = translated.as_mut() else {
        return Err(ErrorInfo::new(ErrorKind::Internal, "request was not translated"));
    };
    candidate.wire_model.clone_into(&mut request.model);
    let encoded =
        gateway.codec(lane.protocol).write_request_for(request, &translation::capabilities(gateway, candidate));
    if let Some(metrics) = gateway.metrics() {
        metrics.translation(call.ingress, lane.protocol, &encoded.dropped);
    }
    let dropped_header = translation::check(gateway, call, candidate, &encoded.dropped)?;
    Ok(Prepared { body: Bytes::from(encoded.body), dropped_header })
}

async fn send(
    gateway: &Gateway,
    lane: &Lane,
    call: &Call,
    wire_model: &str,
    prepared: Prepared,
    traceparent: Option<HeaderValue>,
) -> Result<UpstreamResponse, TransportError> {
    let outbound = Outgoing {
        wire_model,
        stream: call.stream,
        request_id: &call.request_id,
        caller_key: call.caller_key(),
        traceparent,
    };
    send_to_lane(gateway, lane, outbound, prepared.body).await
}

/// What an upstream call needs besides the lane and the body.
struct Outgoing<'a> {
    wire_model: &'a str,
    stream: bool,
    request_id: &'a HeaderValue,
    caller_key: Option<&'a str>,
    /// The attempt span's W3C trace context, when the request is traced.
    traceparent: Option<HeaderValue>,
}

async fn send_to_lane(
    gateway: &Gateway,
    lane: &Lane,
    out: Outgoing<'_>,
    body: Bytes,
) -> Result<UpstreamResponse, TransportError> {
    let codec = gateway.codec(lane.protocol);
    match &lane.endpoint {
        Endpoint::Mock => {
            let path_model = codec.model_in_path().then_some(out.wire_model);
            Ok(mock::respond(codec, path_model, out.stream, codec.default_framing(), &body))
        }
        Endpoint::Http(base) => {
            let url = format!("{base}{}", codec.upstream_path(out.wire_model, out.stream));
            let uri: Uri = url.parse().map_err(|_| TransportError::Connect(format!("`{url}` is not a valid url")))?;
            let mut headers = HeaderMap::with_capacity(8);
            headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            headers.insert(
                http::header::USER_AGENT,
                HeaderValue::from_static(concat!("switchyard/", env!("CARGO_PKG_VERSION"))),
            );
            headers.insert(X_REQUEST_ID, out.request_id.clone());
            if let Some(traceparent) = out.traceparent {
                headers.insert(TRACEPARENT, traceparent);
            }
            if out.stream {
                headers.insert(http::header::ACCEPT, HeaderValue::from_static(codec.default_framing().content_type()));
            }
            // The operator's headers may replace the defaults above (a
            // user agent); config refuses the ones that carry credentials
            // or framing, which the codec and transport own.
            for (name, value) in &lane.extra_headers {
                headers.insert(name.clone(), value.clone());
            }
            match &lane.static_auth {
                Some(auth) => headers.extend(auth.iter().map(|(n, v)| (n.clone(), v.clone()))),
                None => {
                    let caller;
                    let credentials = if lane.passthrough_credentials {
                        caller = out.caller_key.map_or(Credentials::None, |key| Credentials::ApiKey(key.to_owned()));
                        &caller
                    } else {
                        &lane.credentials
                    };
                    let signing = Outbound { method: "POST", url: &url, body: &body, time: SystemTime::now() };
                    let auth = codec
                        .auth_headers(credentials, &signing)
                        .map_err(|err| TransportError::Connect(format!("signing failed: {err}")))?;
                    headers.extend(auth);
                }
            }
            lane.transport.send(UpstreamRequest { uri, headers, body }, lane.timeouts.response_headers).await
        }
    }
}

/// Sends a one-token probe to `lane`; true when a 2xx reply arrived whole
/// within the lane's response-headers timeout (a probe whose body hangs is
/// not a healthy lane, and must not hang the probe loop).
pub async fn probe(gateway: &Gateway, lane: &Lane) -> bool {
    let request = switchyard_codec::probe_request(&lane.wire_model);
    let body = Bytes::from(gateway.codec(lane.protocol).write_request(&request).body);
    let request_id = HeaderValue::from_static("switchyard-health-probe");
    let out = Outgoing {
        wire_model: &lane.wire_model,
        stream: false,
        request_id: &request_id,
        caller_key: None,
        traceparent: None,
    };
    let exchange = async {
        let response = send_to_lane(gateway, lane, out, body).await.ok()?;
        let ok = response.status.is_success();
        // Read it whole: the connection goes back to the pool, and a body
        // that never comes is a failed probe.
        collect(response.body).await.ok()?;
        Some(ok)
    };
    tokio::time::timeout(lane.timeouts.response_headers, exchange).await.ok().flatten().unwrap_or(false)
}

async fn collect(body: UpstreamBody) -> Result<Bytes, String> {
    switchyard_transport::collect_limited(body, MAX_UPSTREAM_BODY).await.map_err(|err| err.to_string())
}

#[expect(clippy::too_many_arguments, reason = "the one place a success is assembled")]
async fn success(
    gateway: &Arc<Gateway>,
    call: &Call,
    candidate: &Candidate<'_>,
    upstream: UpstreamResponse,
    guards: (Option<OwnedSemaphorePermit>, InFlight),
    health: Health,
    started: Instant,
    record: &mut Option<Box<Record>>,
) -> Response<ResponseBody> {
    let lane = candidate.lane;
    // A stream passes through only in the framing the caller reads (a Gemini
    // caller without `alt=sse` reads a JSON array; upstreams are asked for SSE).
    let same = call.passes_through_to(lane.protocol)
        && (!call.stream || gateway.codec(lane.protocol).default_framing() == call.framing);
    let mut builder = Response::builder().status(StatusCode::OK);
    if let Some(headers) = builder.headers_mut() {
        common_headers(headers, call);
        lane_headers(headers, &candidate.lane_header, &lane.provider_header);
        headers.insert(X_SWITCHYARD_BILLING, HeaderValue::from_static(lane.billing.as_str()));
        let content_type = if call.stream { call.framing.content_type() } else { "application/json" };
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        if call.stream {
            headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        }
    }
    if !call.stream {
        let reading = Instant::now();
        let read = tokio::time::timeout(lane.timeouts.request, collect(upstream.body)).await;
        if let Some(record) = record.as_mut() {
            record.waited(reading.elapsed());
        }
        let body = match read {
            Ok(Ok(body)) => body,
            broken => {
                // The upstream took the request and may have done the work.
                if let Some(record) = record.as_mut() {
                    record.charge_reservation();
                }
                let message = match broken {
                    Ok(Err(err)) => format!("upstream body failed: {err}"),
                    _ => "upstream body timed out".to_owned(),
                };
                return upstream_broke(gateway, call, candidate, &health, message);
            }
        };
        if same {
            // Passthrough: the bytes go back as they came; only usage is read.
            let usage = gateway.codec(lane.protocol).read_usage(&body).unwrap_or_default();
            log_done(&call.request_id, &lane.name, &usage, started, false);
            if let Some(record) = record.as_mut() {
                record.record_usage(usage, false);
                record.keep_response(&body);
                record.first_byte();
                // Only a trace wants the finish reason.
                if record.trace.is_some() {
                    if let Some(reason) = gateway.codec(lane.protocol).read_stop_reason(&body) {
                        record.stop_reason(reason.as_str());
                    }
                }
            }
            return builder.body(full_body(body)).unwrap_or_else(|_| internal_error());
        }
        let mut response = match gateway.codec(lane.protocol).read_response(&body) {
            Ok(response) => response,
            Err(err) => {
                let message = format!("upstream reply could not be read: {err}");
                return upstream_broke(gateway, call, candidate, &health, message);
            }
        };
        log_done(&call.request_id, &lane.name, &response.usage, started, false);
        if let Some(record) = record.as_mut() {
            record.record_usage(response.usage, false);
            if let Some(reason) = response.stop_reason {
                record.stop_reason(reason.as_str());
            }
            record.first_byte();
        }
        fill_identity(
            &mut response.id,
            &mut response.model,
            &mut response.created,
            &call.request_id,
            candidate.wire_model,
        );
        let out = Bytes::from(gateway.codec(call.ingress).write_response(&response).body);
        if let Some(record) = record.as_mut() {
            record.keep_response(&out);
        }
        return builder.body(full_body(out)).unwrap_or_else(|_| internal_error());
    }
    // A stream's timing so far: the gateway's and the upstream's time to
    // the response head (its body is still to come).
    if let (Some(headers), Some(timing)) = (builder.headers_mut(), record.as_deref().and_then(Record::server_timing)) {
        headers.insert(SERVER_TIMING, timing);
    }
    let relay = StreamRelay {
        gateway: gateway.clone(),
        upstream: upstream.body,
        decoder: if same {
            Box::new(UsageTap::new(gateway.codec(lane.protocol).stream_decoder(), call.framing))
        } else {
            gateway.codec(lane.protocol).stream_decoder()
        },
        hide: if same && call.hide_usage { gateway.codec(lane.protocol).stream_usage_filter() } else { None },
        encoder: if same {
            None
        } else {
            Some(gateway.codec(call.ingress).stream_encoder_for(call.framing, &call.body))
        },
        ingress: call.ingress,
        framing: call.framing,
        tally: Tally::default(),
        first_sent: false,
        events: Vec::new(),
        idle: lane.timeouts.stream_idle,
        done: false,
        health,
        request_id: call.request_id.clone(),
        lane: lane.name.clone(),
        wire_model: candidate.wire_model_arc(),
        started,
        pending: None,
        record: record.take(),
        delivered_events: 0,
        _guards: guards,
    };
    let stream = futures_util::stream::unfold(relay, |mut relay| async move {
        let chunk = relay.next_chunk().await?;
        Some((Ok::<_, BoxError>(http_body::Frame::data(chunk)), relay))
    });
    builder.body(http_body_util::StreamBody::new(stream).boxed_unsync()).unwrap_or_else(|_| internal_error())
}

/// A 2xx whose body failed: the lane's fault, answered as a 502.
fn upstream_broke(
    gateway: &Gateway,
    call: &Call,
    candidate: &Candidate<'_>,
    health: &Health,
    message: String,
) -> Response<ResponseBody> {
    health.apply(LaneEffect::Failure, &message, None);
    let mut response = error_response(gateway, call, &ErrorInfo::new(ErrorKind::Internal, message).with_status(502));
    lane_headers(response.headers_mut(), &candidate.lane_header, &candidate.lane.provider_header);
    response
}

/// Some protocols (Bedrock, Cohere) have no reply id, model or creation
/// time, and their callers' SDKs need them: the request id, the lane's wire
/// model and the current time stand in.
pub(crate) fn fill_identity(
    id: &mut String,
    model: &mut String,
    created: &mut Option<i64>,
    request_id: &HeaderValue,
    wire_model: &str,
) {
    if model.is_empty() {
        wire_model.clone_into(model);
    }
    if id.is_empty() {
        *id = format!("sy-{}", request_id.to_str().unwrap_or("reply"));
    }
    if created.is_none() {
        let now = SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        *created = i64::try_from(now).ok();
    }
}

/// The per-request access line. Debug level: formatting a log line per
/// request was an eighth of the gateway's CPU on small replies; enable it
/// with `SWITCHYARD_LOG=info,switchyard_gateway::engine=debug`.
pub(crate) fn log_done(request_id: &HeaderValue, lane: &str, usage: &Usage, started: Instant, stream: bool) {
    tracing::debug!(
        request_id = ?request_id,
        lane,
        stream,
        input_tokens = usage.input_tokens,
        output_tokens = usage.output_tokens,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "request done"
    );
}

fn common_headers(headers: &mut HeaderMap, call: &Call) {
    headers.insert(X_REQUEST_ID, call.request_id.clone());
    if let Some(session) = &call.session {
        headers.insert(X_SWITCHYARD_SESSION, session.clone());
    }
}

fn lane_headers(headers: &mut HeaderMap, lane: &HeaderValue, provider: &HeaderValue) {
    headers.insert(X_SWITCHYARD_LANE, lane.clone());
    headers.insert(X_SWITCHYARD_PROVIDER, provider.clone());
}

fn failure_response(gateway: &Gateway, call: &Call, failure: Failure) -> Response<ResponseBody> {
    match failure {
        Failure::Transport(err) => {
            let (kind, status) = match err {
                TransportError::HeadersTimeout(_) => (ErrorKind::Timeout, 504),
                TransportError::Connect(_) | TransportError::Io(_) => (ErrorKind::Unavailable, 502),
            };
            error_response(gateway, call, &ErrorInfo::new(kind, err.to_string()).with_status(status))
        }
        Failure::Upstream(failure) => {
            let UpstreamFailure { lane_protocol, status, headers, body, info, lane_header, provider_header } = *failure;
            let mut response = if lane_protocol == call.ingress {
                // Same protocol: the vendor's own error bytes, status and type header.
                let mut builder = Response::builder().status(status);
                if let Some(out) = builder.headers_mut() {
                    let content_type = headers
                        .get(http::header::CONTENT_TYPE)
                        .cloned()
                        .unwrap_or(HeaderValue::from_static("application/json"));
                    out.insert(http::header::CONTENT_TYPE, content_type);
                    if let Some(kind) = headers.get("x-amzn-errortype") {
                        out.insert(X_AMZN_ERRORTYPE, kind.clone());
                    }
                }
                let mut response = builder.body(full_body(body)).unwrap_or_else(|_| internal_error());
                common_headers(response.headers_mut(), call);
                response
            } else {
                error_response(gateway, call, &info)
            };
            let out = response.headers_mut();
            lane_headers(out, &lane_header, &provider_header);
            if let Some(retry_after) = headers.get(http::header::RETRY_AFTER) {
                out.insert(http::header::RETRY_AFTER, retry_after.clone());
            }
            response
        }
    }
}

/// An error written by the gateway, in the caller's protocol.
fn error_response(gateway: &Gateway, call: &Call, info: &ErrorInfo) -> Response<ResponseBody> {
    let mut response = render_error(gateway.codec(call.ingress), info);
    common_headers(response.headers_mut(), call);
    response
}

/// Renders `info` as `codec`'s protocol error response.
pub fn render_error(codec: &dyn Codec, info: &ErrorInfo) -> Response<ResponseBody> {
    let rendered = codec.error_response(info);
    let mut builder =
        Response::builder().status(StatusCode::from_u16(rendered.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    if let Some(headers) = builder.headers_mut() {
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in rendered.headers {
            headers.insert(name, value);
        }
    }
    builder.body(full_body(rendered.body)).unwrap_or_else(|_| internal_error())
}

fn internal_error() -> Response<ResponseBody> {
    let mut response = Response::new(
        Full::new(Bytes::from_static(b"{\"error\":\"internal error\"}")).map_err(|never| match never {}).boxed_unsync(),
    );
    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after(" 1.5 ", now), Some(Duration::from_millis(1500)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", now), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now), Some(Duration::ZERO), "in the past");
        assert_eq!(parse_retry_after("99999999", now), Some(Duration::from_secs(86_400)));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);
    }
}
