//! The attempt stage: the plan's candidates tried in order until one
//! answers, within the pool's failover bounds (`max_hops` per pool, the
//! failover deadline over all). Each candidate passes the lane gate
//! (`lane_gate`: its breaker, the fleet's trial claim, a permit), is sent
//! the request in its own protocol (`send`), and its answer is judged once
//! (`switchyard_health`): a success is answered (`reply`), a caller's fault
//! relayed, anything else tried on the next candidate (only a larger lane
//! after a context overflow). Failover happens only before the first byte
//! reaches the caller. A try is built (`ready`), sent and read to its first
//! content (`launch`, which touches nothing shared, so two can race: a
//! pool's `hedge`), then judged (`conclude`).

mod hedge;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use switchyard_health::{effects, normalize, LaneEffect, RequestEffect, StatusClass};
use switchyard_state::call::Call;
use switchyard_state::Gateway;
use switchyard_transport::{TransportError, UpstreamResponse};
use tokio::time::Instant;

use crate::candidate::{candidates, Candidate};
use crate::disposition::{failure_response, retry_after, Failure, UpstreamFailure};
use crate::exchange::{Exchange, Progress};
use crate::exhausted::{exhausted, Exhaustion};
use crate::lane_gate::{self, Entry};
use crate::lane_health::{Health, InFlight};
use crate::plan::Plan;
use crate::render::{error_response, X_SWITCHYARD_DOWNGRADE, X_SWITCHYARD_ROUTE_POLICY, X_SWITCHYARD_ROUTE_TARGET};
use crate::reply::Answered;
use crate::send::{collect, send, Sent};
use crate::settle::Record;
use crate::{first_token, plan, reply, translation};

/// What the tries so far add up to: the failover bounds spent, and why the
/// last one moved on.
struct Tries {
    deadline: Instant,
    /// Tries per pool (each pool has its own `max_hops`).
    hops: Vec<(usize, u32)>,
    /// Lanes tried (a lane in two pools is tried once).
    tried: Vec<usize>,
    /// After a context overflow, only lanes larger than this.
    larger_than: Option<u64>,
    exhaustion: Exhaustion,
    /// Why the last try failed over, counted when the next one starts.
    moved_on: Option<StatusClass>,
    /// The last upstream error answer's `Retry-After`, for a same-lane retry.
    retry_after: Option<Duration>,
    /// Candidates remain after the one trying now (a stream's frames
    /// before content are held only while one could take over).
    others_left: bool,
    /// Kept tool-call signatures were looked up (once, for the first
    /// Gemini lane tried).
    signatures_restored: bool,
    /// A hedged try was made (a request is hedged once).
    hedged: bool,
}

impl Tries {
    fn new(deadline: Instant) -> Tries {
        Tries {
            deadline,
            hops: Vec::new(),
            tried: Vec::new(),
            larger_than: None,
            exhaustion: Exhaustion::default(),
            moved_on: None,
            retry_after: None,
            others_left: false,
            signatures_restored: false,
            hedged: false,
        }
    }

    /// Whether `candidate` is out of bounds: its lane tried already, no
    /// larger than a lane that overflowed its context, or its pool out of hops.
    fn skips(&self, gateway: &Gateway, candidate: &Candidate<'_>) -> bool {
        if self.tried.contains(&candidate.lane_index) {
            return true;
        }
        if self.larger_than.is_some_and(|min| candidate.lane.context_window.is_none_or(|window| window <= min)) {
            return true;
        }
        let pool = candidate.slot.pool;
        let hops = self.hops.iter().find(|(p, _)| *p == pool).map_or(0, |(_, n)| *n);
        hops >= gateway.pools[pool].failover.max_hops
    }

    /// A try on `candidate` starts (`primary`: the pool the caller named).
    fn start(&mut self, gateway: &Gateway, candidate: &Candidate<'_>, primary: usize) {
        let pool = candidate.slot.pool;
        match self.hops.iter_mut().find(|(p, _)| *p == pool) {
            Some(entry) => entry.1 += 1,
            None => self.hops.push((pool, 1)),
        }
        self.tried.push(candidate.lane_index);
        if let (Some(cause), Some(metrics)) = (self.moved_on.take(), gateway.metrics()) {
            metrics.failover(metrics.place(Some(primary), None), cause);
        }
    }

    /// Lanes that failed before the one trying now.
    fn failovers(&self) -> u32 {
        self.hops.iter().map(|(_, n)| n).sum::<u32>().saturating_sub(1)
    }

    /// A try failed over for `class`, leaving `failure`.
    fn moved_on(&mut self, class: StatusClass, failure: Failure) {
        self.moved_on = Some(class);
        self.retry_after = None;
        match (&failure, class) {
            (Failure::Upstream(_), StatusClass::RateLimited) => self.exhaustion.rate_limited = Some(failure),
            _ => self.exhaustion.last = Some(failure),
        }
    }
}

/// What one try came to.
enum Tried {
    /// The caller's answer.
    Answered(Answered),
    /// It failed over: the next candidate is tried.
    Next,
    /// The pool's failover deadline passed.
    Stop,
}

/// The request the try is for, as the stages before built it.
pub(crate) struct Attempting<'a> {
    pub(crate) gateway: &'a Arc<Gateway>,
    pub(crate) call: &'a Call,
    pub(crate) plan: &'a Plan,
    pub(crate) started: Instant,
}

/// Tries the plan's candidates in order until one answers; the honest
/// exhaustion answer when none does.
pub(crate) async fn attempt(gateway: &Arc<Gateway>, x: &mut Exchange, plan: &Plan) -> Answered {
    let (call, mut progress) = x.split();
    let request = Attempting { gateway, call, plan, started: Instant::now() };
    let candidates = match candidates(gateway, call, plan) {
        Ok(found) => found,
        Err(info) => return Answered::Whole(error_response(gateway, call, &info)),
    };
    let spec = crate::operation::of(call.operation);
    let mut tries = Tries::new(plan.deadline);
    let total = candidates.len();
    for (position, candidate) in candidates.iter().enumerate() {
        if Instant::now() >= tries.deadline {
            tries.exhaustion.deadline = true;
            break;
        }
        if tries.skips(gateway, candidate) {
            continue;
        }
        // A lane that cannot answer is not asked: the gateway answers for it.
        if let Some(answer) = spec.local(gateway, call, candidate, progress.record) {
            return Answered::Whole(answer);
        }
        let others_left = position + 1 < total;
        let Some(entry) =
            lane_gate::enter(gateway, candidate, tries.deadline, &mut tries.exhaustion, others_left).await
        else {
            continue;
        };
        tries.start(gateway, candidate, plan.pool);
        tries.others_left = others_left;
        let tried = match hedge::wanted(gateway, call, candidate, &tries) {
            Some(hedging) => {
                let rest = &candidates[position + 1..];
                // Boxed: a hedged race is rare, and inline it would double
                // the size of every request's future.
                Box::pin(hedge::race(&request, candidate, entry, rest, hedging, &mut progress, &mut tries)).await
            }
            None => on_lane(&request, candidate, entry, &mut progress, &mut tries).await,
        };
        match tried {
            Tried::Answered(response) => return response,
            Tried::Next => {}
            Tried::Stop => break,
        }
    }
    Answered::Whole(exhausted(gateway, call, tries.exhaustion))
}

/// Tries `candidate`, and again after a transient failure while its pool's
/// `failover.retries` and the failover deadline allow: after a backoff that
/// honours the upstream's `Retry-After`, through the lane gate again (a
/// breaker that tripped or a rest that outlasts the wait moves on).
async fn on_lane(
    request: &Attempting<'_>,
    candidate: &Candidate<'_>,
    mut entry: Entry,
    progress: &mut Progress<'_>,
    tries: &mut Tries,
) -> Tried {
    let gateway = request.gateway;
    let retries = gateway.pools[candidate.slot.pool].failover.retries;
    let mut retry = 0;
    loop {
        let tried = try_one(request, candidate, entry, progress, tries).await;
        // Every try that moves on says why (`Tries::moved_on`).
        let (Tried::Next, Some(class)) = (&tried, tries.moved_on) else { return tried };
        if retry >= retries || !switchyard_health::retry::retryable(class) {
            return tried;
        }
        let wait = switchyard_health::retry::backoff(retry, tries.retry_after, fastrand::f64());
        if Instant::now() + wait >= tries.deadline {
            return tried;
        }
        tracing::info!(
            request_id = ?request.call.request_id, lane = %candidate.lane.name, class = class.as_str(),
            wait_ms = wait.as_millis() as u64, "retrying on the same lane"
        );
        tokio::time::sleep(wait).await;
        retry += 1;
        let mut unused = Exhaustion::default();
        entry = match lane_gate::enter(gateway, candidate, tries.deadline, &mut unused, true).await {
            Some(entry) => entry,
            None => return Tried::Next,
        };
        if let Some(metrics) = gateway.metrics() {
            metrics.retry(candidate.lane_index, class);
        }
    }
}

/// One try: the request sent to `candidate` in its protocol, within the
/// failover deadline, and its answer judged.
async fn try_one(
    request: &Attempting<'_>,
    candidate: &Candidate<'_>,
    entry: Entry,
    progress: &mut Progress<'_>,
    tries: &mut Tries,
) -> Tried {
    let hold = request.call.stream && (tries.others_left || first_token_limit(request.gateway, candidate).is_some());
    let ready = match ready(request, candidate, hold, progress, tries).await {
        Ok(ready) => ready,
        Err(answer) => return answer,
    };
    let launched = launch(request, candidate, ready, tries.deadline).await;
    conclude(request, candidate, entry, launched, progress, tries).await
}

/// A try's request, ready to send: its body in the lane's protocol, its
/// trace context, and whether its stream is held until its first content.
pub(super) struct Ready<'a> {
    prepared: crate::send::Prepared,
    traceparent: Option<HeaderValue>,
    hold: Option<first_token::Bounds<'a>>,
}

/// Builds `candidate`'s request (its kept call signatures restored first,
/// for a Gemini lane); a request the lane cannot take is answered at once.
async fn ready<'a>(
    request: &Attempting<'_>,
    candidate: &Candidate<'a>,
    hold: bool,
    progress: &mut Progress<'_>,
    tries: &mut Tries,
) -> Result<Ready<'a>, Tried> {
    let (gateway, call) = (request.gateway, request.call);
    let refused = |info| Tried::Answered(Answered::Whole(error_response(gateway, call, &info)));
    if !tries.signatures_restored && crate::signatures::wants(call, progress, candidate.lane) {
        tries.signatures_restored = true;
        if let Err(info) = crate::signatures::restore(gateway, call, candidate.lane_index, progress).await {
            return Err(refused(info));
        }
    }
    let prepared = crate::operation::of(call.operation).prepare(gateway, call, candidate, progress);
    let prepared = prepared.map_err(refused)?;
    let lane = candidate.lane;
    let traceparent = progress.record.trace.as_mut().and_then(|trace| {
        trace.begin_attempt(&lane.name, candidate.wire_model_arc(), gateway.codec(lane.protocol).ingress().trace_system)
    });
    let hold = hold.then(|| first_token::Bounds {
        until: None,
        first_token: first_token_limit(gateway, candidate),
        idle: lane.timeouts.stream_idle,
        error_map: &lane.error_map,
    });
    Ok(Ready { prepared, traceparent, hold })
}

/// What sending to one lane came to, before any verdict on it.
struct Launched {
    outcome: Result<Result<Sent, TransportError>, tokio::time::error::Elapsed>,
    /// When the request was sent.
    sent: Instant,
    /// From sending to the answer's head.
    took: Duration,
    /// A held stream's frames before its first content, or how it failed
    /// before it.
    held: Result<Vec<Bytes>, (StatusClass, String)>,
    in_flight: InFlight,
    /// The `x-switchyard-dropped` value of its request, when something was.
    dropped_header: Option<HeaderValue>,
}

impl Launched {
    /// The lane's answer reached its content: a 2xx head (and, for a held
    /// stream, its first content).
    fn reached_content(&self) -> bool {
        matches!(&self.outcome, Ok(Ok(sent)) if sent.head.status.is_success()) && self.held.is_ok()
    }
}

/// Sends `ready` to `candidate` within the failover deadline and, for a
/// held stream, reads it up to its first content (under the first-token
/// deadline, counted from the send). Touches no shared state of the
/// request, so two launches can race (`hedge`).
async fn launch(request: &Attempting<'_>, candidate: &Candidate<'_>, ready: Ready<'_>, deadline: Instant) -> Launched {
    let (gateway, call) = (request.gateway, request.call);
    let in_flight = InFlight::new(gateway, candidate.lane_index);
    let sent = Instant::now();
    let lane = candidate.lane;
    let dropped_header = ready.prepared.dropped_header.clone();
    // The failover deadline binds an attempt in flight too.
    let sending = send(gateway, lane, call, candidate.wire_model, ready.prepared, ready.traceparent);
    let mut outcome = tokio::time::timeout_at(deadline, sending).await;
    let took = sent.elapsed();
    let mut held = Ok(Vec::new());
    if let (Ok(Ok(answer)), Some(mut bounds)) = (&mut outcome, ready.hold) {
        if answer.head.status.is_success() {
            bounds.until = bounds.first_token.map(|limit| sent + limit);
            let codec = gateway.codec_for(call.operation, lane.protocol);
            held = match first_token::hold(codec, &mut answer.head.body, &bounds).await {
                first_token::Held::Released(chunks) => Ok(chunks),
                first_token::Held::Failed { class, message } => Err((class, message)),
            };
        }
    }
    Launched { outcome, sent, took, held, in_flight, dropped_header }
}

/// Judges what a launch came to: a success is answered, a caller's fault
/// relayed, anything else moves on (the lane's breaker hears of it).
async fn conclude(
    request: &Attempting<'_>,
    candidate: &Candidate<'_>,
    entry: Entry,
    launched: Launched,
    progress: &mut Progress<'_>,
    tries: &mut Tries,
) -> Tried {
    let (gateway, call) = (request.gateway, request.call);
    let lane = candidate.lane;
    let Launched { outcome, sent, took, held, in_flight, dropped_header } = launched;
    note_attempt(progress.record, candidate, &outcome, took, tries.failovers());
    let Entry { health, mut trial, permit } = entry;
    match outcome {
        Err(_) => {
            // The pool's budget ran out, not necessarily the lane's patience:
            // no verdict on the lane (the trial guard releases a trial).
            tracing::warn!(request_id = ?call.request_id, lane = %lane.name, "failover deadline reached mid-attempt");
            progress.record.last_attempt_said("no answer before the pool's failover deadline");
            tries.exhaustion.deadline = true;
            Tried::Stop
        }
        Ok(Err(err)) => {
            let class = match err {
                TransportError::HeadersTimeout(_) => StatusClass::Timeout,
                TransportError::Connect(_) | TransportError::Io(_) => StatusClass::Network,
            };
            tracing::warn!(request_id = ?call.request_id, lane = %lane.name, error = %err, "upstream unreachable");
            let message = err.to_string();
            progress.record.last_attempt_said(&message);
            lost(gateway, candidate, (&health, &mut trial), tries, class, &message, Failure::Transport(err))
        }
        Ok(Ok(Sent { head: upstream, more })) if upstream.status.is_success() => {
            let held = match held {
                Ok(held) => held,
                Err((class, message)) => {
                    tracing::warn!(request_id = ?call.request_id, lane = %lane.name, %message, "stream failed before content");
                    progress.record.last_attempt_failed("before_content");
                    progress.record.last_attempt_said(&message);
                    let failure = Failure::BeforeContent(class, message.clone());
                    return lost(gateway, candidate, (&health, &mut trial), tries, class, &message, failure);
                }
            };
            health.success();
            trial.settle();
            let answer = reply::Answer { upstream, more, held, guards: (permit, in_flight), health };
            let mut answered = answered(request, candidate, answer, sent, progress).await;
            translation::annotate(answered.headers_mut(), dropped_header);
            Tried::Answered(answered)
        }
        Ok(Ok(Sent { head: upstream, .. })) => {
            let judged = judge(gateway, call, candidate, upstream, &health, tries).await;
            if !judged.said.is_empty() {
                progress.record.last_attempt_said(&judged.said);
            }
            if judged.settles_trial {
                trial.settle();
            }
            judged.tried
        }
    }
}

/// A try that reached no answer (no response, or a stream that failed
/// before its content): the lane's breaker hears of it, its trial is spent,
/// and the request moves on.
fn lost(
    gateway: &Gateway,
    candidate: &Candidate<'_>,
    (health, trial): (&Health, &mut crate::lane_health::TrialGuard),
    tries: &mut Tries,
    class: StatusClass,
    message: &str,
    failure: Failure,
) -> Tried {
    health.apply(effects(class, false).0, message, None);
    trial.settle();
    if let Some(metrics) = gateway.metrics() {
        metrics.attempt(candidate.lane_index, Some(class));
    }
    tries.moved_on(class, failure);
    Tried::Next
}

/// A stream's first-token deadline: the lane's `timeouts.first_token`,
/// else the pool's `failover.first_token`. A stream's frames before its
/// first content are held under it, or while another candidate could still
/// take over.
fn first_token_limit(gateway: &Gateway, candidate: &Candidate<'_>) -> Option<Duration> {
    candidate.lane.timeouts.first_token.or(gateway.pools[candidate.slot.pool].failover.first_token)
}

/// Notes a finished attempt on the record (the lane that answered or last
/// failed, its status, why it moved on) and in its trace.
fn note_attempt(
    record: &mut Record,
    candidate: &Candidate<'_>,
    outcome: &Result<Result<Sent, TransportError>, tokio::time::error::Elapsed>,
    took: Duration,
    failovers: u32,
) {
    record.waited(took);
    record.serving(candidate.slot, candidate.lane_index, candidate.wire_model_arc(), failovers);
    let (status, failure) = match outcome {
        Ok(Ok(sent)) if sent.head.status.is_success() => (sent.head.status.as_u16(), None),
        Ok(Ok(sent)) => (sent.head.status.as_u16(), Some("upstream_error")),
        Ok(Err(_)) => (0, Some("unreachable")),
        Err(_) => (0, Some("deadline")),
    };
    record.attempted(candidate.lane_index, status, failure, took);
    if let Some(trace) = record.trace.as_mut() {
        trace.end_attempt(&candidate.lane.name, status, failure);
    }
}

/// A 2xx head: the lane learns its latency and headroom, a session is
/// pinned to it, and the answer is built, named by the policy that ordered
/// the candidates.
async fn answered(
    request: &Attempting<'_>,
    candidate: &Candidate<'_>,
    answer: reply::Answer,
    sent: Instant,
    progress: &mut Progress<'_>,
) -> Answered {
    let (gateway, plan, lane, slot) = (request.gateway, request.plan, candidate.lane, candidate.slot);
    let health = &answer.health;
    let took = sent.elapsed();
    if let Some(metrics) = gateway.metrics() {
        metrics.attempt(candidate.lane_index, None);
        metrics.upstream_latency(candidate.lane_index, took);
    }
    lane.record_latency(took);
    if let Some(quota) = lane.record_quota(&answer.upstream.headers, std::time::SystemTime::now()) {
        if let Some(rest) = quota.rest {
            // Spent (or asked to pause) on a success: rest before it ever 429s.
            health.apply(LaneEffect::Rest, "upstream rate limit spent", Some(rest));
        }
        share_quota(gateway, lane, &quota);
    }
    if let (Some(session), true) = (&plan.session, slot.pool == plan.pool) {
        plan::pin(gateway, plan.pool, session, slot.member);
    }
    let mut response = reply::success(request, progress, candidate, answer).await;
    if let Some(policy) = &plan.policy {
        let headers = response.headers_mut();
        if let Ok(value) = HeaderValue::try_from(&**policy) {
            headers.insert(X_SWITCHYARD_ROUTE_POLICY, value);
        }
        headers.insert(X_SWITCHYARD_ROUTE_TARGET, candidate.lane_header.clone());
        if let Some(why) = &plan.downgrade {
            headers.insert(X_SWITCHYARD_DOWNGRADE, why.clone());
        }
    }
    response
}

/// Tells the fleet of a lane its upstream says is nearly or wholly spent,
/// so every instance ranks it last or rests it (at most once a second).
fn share_quota(gateway: &Gateway, lane: &switchyard_state::Lane, quota: &switchyard_health::quota::Quota) {
    let (Some(fleet), Some(share), Some(fresh_for)) = (&gateway.fleet_state, quota.share, quota.fresh_for) else {
        return;
    };
    if share < switchyard_health::quota::NEAR_ZERO && lane.may_share_quota(switchyard_state::clock::now_ms()) {
        fleet.quota(&lane.name, share, fresh_for, quota.rest);
    }
}

/// An upstream error answer, judged.
struct Judged {
    tried: Tried,
    /// The answer was a verdict on the lane (a half-open trial is spent).
    settles_trial: bool,
    /// What the upstream said (its error body, or why it could not be read).
    said: String,
}

/// Reads an upstream's error answer and judges it once: the lane effect
/// feeds its breaker, the request effect relays it (the caller's own fault)
/// or fails over (to a larger lane after a context overflow).
async fn judge(
    gateway: &Gateway,
    call: &Call,
    candidate: &Candidate<'_>,
    upstream: UpstreamResponse,
    health: &Health,
    tries: &mut Tries,
) -> Judged {
    let lane = candidate.lane;
    let (status, headers) = (upstream.status, upstream.headers);
    let body = match tokio::time::timeout(lane.timeouts.request, collect(upstream.body)).await {
        Ok(Ok(body)) => body,
        broken => {
            let (class, message) = match broken {
                Ok(Err(err)) => (StatusClass::Network, err),
                _ => (StatusClass::Timeout, "error body timed out".to_owned()),
            };
            health.apply(LaneEffect::Failure, &message, None);
            let said = message.clone();
            tries.moved_on(class, Failure::Transport(TransportError::Io(message)));
            return Judged { tried: Tried::Next, settles_trial: true, said };
        }
    };
    let raw = gateway.codec_for(call.operation, lane.protocol).extract_error(status.as_u16(), &body);
    let class =
        normalize(status.as_u16(), raw.kind, raw.vendor_type.as_deref(), raw.vendor_code.as_deref(), &lane.error_map);
    let (lane_effect, request_effect) = effects(class, lane.passthrough_credentials);
    if let Some(metrics) = gateway.metrics() {
        metrics.attempt(candidate.lane_index, Some(class));
    }
    tracing::info!(
        request_id = ?call.request_id, lane = %lane.name, status = status.as_u16(), class = class.as_str(),
        message = %raw.message, "upstream error"
    );
    let waited = retry_after(&headers);
    health.apply(lane_effect, &format!("{} {}", status.as_u16(), class.as_str()), waited);
    // Cut (and masked) again when noted; this bounds the copy.
    let said = switchyard_codec::body_excerpt(&body[..body.len().min(4 * crate::settle::MAX_ATTEMPT_ERROR)]);
    let failure = upstream_failure(candidate, status, headers, body, raw.to_error_info());
    let settles_trial = lane_effect != LaneEffect::None;
    let tried = match request_effect {
        RequestEffect::Relay => Tried::Answered(Answered::Whole(failure_response(gateway, call, failure))),
        RequestEffect::FailoverLarger => {
            tries.larger_than = Some(lane.context_window.unwrap_or(0).max(tries.larger_than.unwrap_or(0)));
            tries.moved_on(class, failure);
            Tried::Next
        }
        RequestEffect::Failover => {
            tries.moved_on(class, failure);
            Tried::Next
        }
    };
    tries.retry_after = waited;
    Judged { tried, settles_trial, said }
}

fn upstream_failure(
    candidate: &Candidate<'_>,
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    info: switchyard_ir::ErrorInfo,
) -> Failure {
    Failure::Upstream(Box::new(UpstreamFailure {
        lane_protocol: candidate.lane.protocol,
        status,
        headers,
        body,
        info,
        lane_header: candidate.lane_header.clone(),
        provider_header: candidate.lane.provider_header.clone(),
    }))
}
