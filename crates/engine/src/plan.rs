//! Orders a call's candidates: the pool's strategy (or the weighted floor),
//! then its gates (external hooks, fired concurrently and reconciled), then
//! session affinity, then the tripped members and the fallback pools. The
//! decisions themselves are pure (`switchyard_route`); this module gathers
//! the live signals, calls the hooks and keeps the counters.
//!
//! A pool with the weighted floor and no gates builds no projection and
//! calls nothing: it pays only for the SWRR pick.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use switchyard_codec::lineage::{self, Lineage};
use switchyard_codec::scan;
use switchyard_config::{Billing, OnError, PromptAccess, Strategy};
use switchyard_ir::{Block, ErrorInfo, ErrorKind, Request, Role};
use switchyard_route::hook::{self, Access, CandidateView, Decision, Grants, RequestView};
use switchyard_route::{apply_preference, rank, BillingRank, Projection, Signals};
use tokio::time::Instant;

use switchyard_state::call::{Call, Slot};
use switchyard_state::{Gateway, PoolState};
use switchyard_telemetry::metrics::HookOutcome;

/// The try order for one call.
#[derive(Debug)]
pub struct Plan {
    /// Candidates in try order.
    pub slots: Vec<Slot>,
    /// The strategy or hook that ordered them, when not the weighted floor.
    pub policy: Option<Arc<str>>,
    /// When failover must stop.
    pub deadline: Instant,
    /// The session to pin to whichever lane of the primary pool serves.
    pub session: Option<Session>,
    /// The primary pool.
    pub pool: usize,
    /// Fallback pools the caller's key may not use, skipped (admission
    /// runs on every hop, not only the first pool's).
    pub not_entitled: Vec<usize>,
    /// A budget sent the call to this cheaper pool: what the caller is
    /// told of why (`x-switchyard-downgrade`).
    pub downgrade: Option<http::HeaderValue>,
}

/// What a pin is keyed by: the caller's session header, or the hash of
/// its prompt's head (prompt-cache affinity), and how long it lasts.
#[derive(Debug, Clone)]
pub struct Session {
    /// The key (`prefix:` and a hash for a prompt prefix).
    pub id: String,
    /// How long the pin lasts after its last use.
    pub ttl: Duration,
}

/// How long a prefix pin lasts when the caller asked its provider for a
/// one-hour cache (Anthropic's `cache_control.ttl: 1h`).
const LONG_CACHE: Duration = Duration::from_secs(3600);

/// The session `call` belongs to in `state`'s affinity: its header, else
/// (with `affinity.prefix`) its prompt's head. Nothing is read when the
/// pool has no affinity, and no prefix is hashed unless asked for.
fn session_of(gateway: &Gateway, state: &PoolState, call: &Call) -> Option<Session> {
    let affinity = state.affinity.as_ref()?;
    if let Some(id) = call.headers.get(&*affinity.header).and_then(|v| v.to_str().ok()) {
        return Some(Session { id: id.to_owned(), ttl: affinity.ttl });
    }
    let window = affinity.prefix?;
    let prefix = gateway.codec_for(call.operation, call.ingress).prompt_prefix(&call.body)?;
    let ttl = if prefix.long { window.max(LONG_CACHE) } else { window };
    Some(Session { id: format!("prefix:{:016x}", prefix.hash), ttl })
}

/// Orders the candidates of the exchange's pool for its call (reading
/// the call's IR when a projection needs it). An `Err` is the caller's
/// answer (a hook's rejection, a malformed request a projection could not
/// read).
pub(crate) async fn plan(gateway: &Gateway, x: &mut crate::exchange::Exchange) -> Result<Plan, ErrorInfo> {
    let pool = x.pool;
    let (call, translated) = x.plan_parts();
    ordered(gateway, call, pool, translated).await
}

/// [`plan`], over the call and its IR cache (`translated`).
async fn ordered(
    gateway: &Gateway,
    call: &mut Call,
    pool: usize,
    translated: &mut Option<Request>,
) -> Result<Plan, ErrorInfo> {
    let state = &gateway.pools[pool];
    let at = Instant::now().into_std();
    let usable: Vec<usize> = (0..state.members.len()).filter(|&m| state.takes_requests(m, at)).collect();
    let needs = state.strategy.needs();
    let needs_projection = needs.projection || !state.gates.is_empty();
    let projection =
        if needs_projection && !usable.is_empty() { Some(projection_of(gateway, call, translated)?) } else { None };
    // What the caller's key has left, read once, only where it is used.
    let headroom =
        if needs.headroom || !state.gates.is_empty() { Headroom::of(gateway, call) } else { Headroom::default() };
    let mut policy: Option<Arc<str>> = None;
    let ranked = rank_members(
        gateway,
        state,
        &usable,
        state.strategy,
        projection.as_ref().unwrap_or(&Projection::default()),
        &headroom,
    );
    let mut order = match ranked {
        Some(ranked) => {
            policy = Some(Arc::from(state.strategy.as_str()));
            ranked
        }
        None => weighted_order(state, &usable),
    };

    if let (false, Some(projection)) = (state.gates.is_empty() || usable.is_empty(), projection.as_ref()) {
        let gated = run_gates(gateway, call, pool, &usable, projection, translated.as_ref(), &headroom).await;
        apply_decision(gateway, (call, translated), pool, &usable, gated, (&mut order, &mut policy))?;
    }

    let session = session_of(gateway, state, call);
    if let (Some(fleet), Some(session)) = (&gateway.fleet_state, &session) {
        learn_session(gateway, fleet, state, session, at).await;
    }
    affinity(state, call, session.as_ref(), &mut order, &mut policy, at);
    // A lane whose upstream said it has next to nothing left goes after
    // every other, affinity or not: better another lane than its 429.
    let nearly_spent = |m: &usize| gateway.lanes[state.members[*m]].nearly_spent();
    if order.iter().any(nearly_spent) {
        // Stable: the order among the spent and among the rest stands.
        order.sort_by_key(nearly_spent);
    }
    if let Some(name) = &policy {
        count(state, name, |c| c.selections += 1);
    }
    let mut slots: Vec<Slot> = order.iter().map(|&member| Slot { pool, member }).collect();
    slots.extend(resting(state, &usable).map(|member| Slot { pool, member }));
    let not_entitled = fallback_slots(gateway, call, pool, at, &mut slots);
    pin_lineage(gateway, call, &mut slots, translated);
    let deadline = Instant::now() + state.failover.timeout;
    Ok(Plan { slots, policy, deadline, session, pool, not_entitled, downgrade: None })
}

/// Keeps only the lanes that can take the conversation's signed state back
/// (`codec::lineage`: Claude's thinking to Anthropic and Bedrock lanes,
/// Gemini's signatures to Gemini lanes), when the plan has one: such a
/// conversation never fails over to a lane that would reject it, and its
/// lanes' breakers answer for it when they are all down. A plan of one
/// protocol, a body with no signature marker, or a plan with no such lane
/// (the operator composed it so) is left as it is.
fn pin_lineage(gateway: &Gateway, call: &Call, slots: &mut Vec<Slot>, translated: &mut Option<Request>) {
    let protocol = |slot: &Slot| gateway.lanes[gateway.pools[slot.pool].members[slot.member]].protocol;
    let Some(first) = slots.first().map(protocol) else { return };
    if call.operation != switchyard_ir::Operation::Chat
        || slots.iter().all(|slot| protocol(slot) == first)
        || !lineage::may_be_signed(&call.body)
    {
        return;
    }
    // Read once: the send step writes the lanes' requests from the same IR.
    let Ok(request) = crate::exchange::read_once(gateway, call, translated) else { return };
    // Who signed what, and which lanes verify it: the protocols' tables say.
    let signing = |protocol| &gateway.codec(protocol).ingress().signing;
    let lineage = Lineage::of(request, signing(call.ingress));
    if !lineage.is_signed() || !slots.iter().any(|slot| lineage.accepts(signing(protocol(slot)))) {
        return;
    }
    let before = slots.len();
    slots.retain(|slot| lineage.accepts(signing(protocol(slot))));
    if slots.len() < before {
        tracing::debug!(
            request_id = ?call.request_id, ?lineage, kept = slots.len(), of = before,
            "conversation pinned to the lanes that can verify its signed state"
        );
    }
}

/// The gates' reconciled decision applied: a rejection ends the request; an
/// order is preferred, a restriction filters by tags, a rewrite replaces
/// the body (and the IR read from it).
fn apply_decision(
    gateway: &Gateway,
    (call, translated): (&mut Call, &mut Option<Request>),
    pool: usize,
    usable: &[usize],
    (decision, orderer): (Decision, Option<Arc<str>>),
    (order, policy): (&mut Vec<usize>, &mut Option<Arc<str>>),
) -> Result<(), ErrorInfo> {
    let state = &gateway.pools[pool];
    if let Some((status, message)) = decision.reject {
        let name = orderer.unwrap_or_else(|| Arc::from("hook"));
        count(state, &name, |c| c.rejections += 1);
        tracing::info!(request_id = ?call.request_id, pool = %state.name, hook = %name, status, %message, "request rejected by a routing hook");
        let kind = ErrorKind::from_status(status);
        return Err(ErrorInfo::new(kind, message).with_status(status));
    }
    if let Some(preferred) = &decision.order {
        let preferred: Vec<usize> = preferred.iter().filter_map(|&position| usable.get(position).copied()).collect();
        *order = apply_preference(order, &preferred);
        *policy = orderer;
    }
    if let Some(restrict) = &decision.restrict {
        order.retain(|&member| hook::passes_restrict(restrict, &gateway.lanes[state.members[member]].tags));
        if order.is_empty() {
            return Err(ErrorInfo::new(
                ErrorKind::Unavailable,
                format!("no lane of `{}` carries the tags a routing hook asked for", state.name),
            ));
        }
    }
    if let Some(body) = decision.rewrite {
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        call.body = Bytes::from(bytes);
        call.model_span = scan::scan_top_level(&call.body).ok().and_then(|top| top.model_span);
        *translated = None;
    }
    Ok(())
}

/// The fallback pools' members, each pool's usable ones in weighted order,
/// its tripped ones after, appended to `slots`. A fallback pool is admitted
/// like the first one: a pool the caller's key may not use is skipped (its
/// lanes never serve the key), and returned so the record notes it.
/// (Budgets and limits are the key's chain's, held once; the hold was taken
/// at the dearest price of every reachable pool, fallbacks included.)
fn fallback_slots(
    gateway: &Gateway,
    call: &Call,
    pool: usize,
    at: std::time::Instant,
    slots: &mut Vec<Slot>,
) -> Vec<usize> {
    let mut not_entitled = Vec::new();
    for fallback in fallback_chain(gateway, pool) {
        let state = &gateway.pools[fallback];
        if call.caller.as_ref().is_some_and(|caller| !caller.key.record.may_use(&state.name)) {
            tracing::info!(
                request_id = ?call.request_id, pool = %state.name,
                "fallback pool skipped: the caller's key may not use it"
            );
            not_entitled.push(fallback);
            continue;
        }
        let usable: Vec<usize> = (0..state.members.len()).filter(|&m| state.takes_requests(m, at)).collect();
        let mut order = weighted_order(state, &usable);
        order.extend(resting(state, &usable));
        slots.extend(order.into_iter().map(|member| Slot { pool: fallback, member }));
    }
    not_entitled
}

/// Pins `session` to `member` of `pool` after it served.
pub fn pin(gateway: &Gateway, pool: usize, session: &Session, member: usize) {
    let state = &gateway.pools[pool];
    if state.affinity.is_none() {
        return;
    }
    if let Some(fleet) = &gateway.fleet_state {
        fleet.pin_session(&state.name, &session.id, &gateway.lanes[state.members[member]].name, session.ttl);
    }
    let pinned = state.sessions.pin_for(&session.id, member, Instant::now().into_std(), session.ttl);
    if pinned.moved {
        // The pinned lane failed and another one served: the session moves.
        state.affinity_switches.fetch_add(1, Ordering::Relaxed);
        state.session_moves.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(pool = %state.name, session = %session.id, reason = "pinned lane failed", "session moved off its pinned lane");
    }
    // A single node keeps the pin past a restart (written behind; a busy
    // session's unchanged pin about every ttl/8, not on every request).
    if let (Some(kept), true) = (&gateway.pins, pinned.note) {
        kept.note(&state.name, &session.id, &gateway.lanes[state.members[member]].name, session.ttl, pinned.switches);
    }
}

/// Puts the lane `session` is pinned to first, when it is usable.
fn affinity(
    state: &PoolState,
    call: &Call,
    session: Option<&Session>,
    order: &mut Vec<usize>,
    policy: &mut Option<Arc<str>>,
    at: std::time::Instant,
) {
    let Some(session) = session else { return };
    let pinned = state.sessions.get(&session.id, at);
    if let Some(member) = pinned {
        if let Some(position) = order.iter().position(|&m| m == member) {
            order.remove(position);
            order.insert(0, member);
            *policy = Some(Arc::from("affinity"));
        } else {
            // Affinity is a preference: it never resurrects a tripped lane.
            state.affinity_switches.fetch_add(1, Ordering::Relaxed);
            let reason = if state.is_drained(member) {
                "lane is drained"
            } else if state.breaker(member).is_usable(at) {
                "excluded by a routing hook"
            } else {
                "lane is tripped"
            };
            // Session ids are the caller's data: not at info.
            tracing::info!(request_id = ?call.request_id, pool = %state.name, reason, "session moved off its pinned lane");
        }
    }
}

/// A session this instance has not seen may have been pinned by another
/// instance of the fleet: its pin is learned before affinity reads the table.
async fn learn_session(
    gateway: &Gateway,
    fleet: &switchyard_fleet::shared::FleetState,
    state: &PoolState,
    session: &Session,
    at: std::time::Instant,
) {
    if state.sessions.get(&session.id, at).is_some() {
        return;
    }
    let Some(lane) = fleet.session_lane(&state.name, &session.id).await else { return };
    if let Some(member) = state.members.iter().position(|&l| *gateway.lanes[l].name == *lane) {
        state.sessions.pin_for(&session.id, member, at, session.ttl);
    }
}

fn count(state: &PoolState, policy: &Arc<str>, update: impl FnOnce(&mut switchyard_state::RouteCounters)) {
    let mut counters = state.routing.lock().unwrap_or_else(PoisonError::into_inner);
    update(counters.entry(policy.clone()).or_default());
}

fn fallback_chain(gateway: &Gateway, pool: usize) -> Vec<usize> {
    let mut chain = Vec::new();
    let mut queue = std::collections::VecDeque::from(gateway.pools[pool].fallback.clone());
    while let Some(next) = queue.pop_front() {
        if next != pool && !chain.contains(&next) {
            chain.push(next);
            queue.extend(gateway.pools[next].fallback.iter().copied());
        }
    }
    chain
}

/// The members tried after `usable` ones: the tripped, which only tell the
/// exhaustion answer when they recover. A drained member is never tried.
fn resting<'a>(state: &'a PoolState, usable: &'a [usize]) -> impl Iterator<Item = usize> + 'a {
    (0..state.members.len()).filter(move |&m| !usable.contains(&m) && !state.is_drained(m))
}

fn weighted_order(state: &PoolState, usable: &[usize]) -> Vec<usize> {
    let mut weighted = state.weighted.lock().unwrap_or_else(PoisonError::into_inner);
    weighted.order_by(state.members.len(), |m| state.live_weight(m), |m| usable.contains(&m))
}

/// Ranks `members` (member indexes) by `ranking`; `None` when it abstains.
fn rank_members(
    gateway: &Gateway,
    state: &PoolState,
    members: &[usize],
    strategy: Strategy,
    projection: &Projection,
    headroom: &Headroom,
) -> Option<Vec<usize>> {
    if strategy == Strategy::Weighted {
        // The floor, not a ranking: no signals are gathered for it.
        return None;
    }
    // A lane whose upstream has not reported its rate limit yet counts as
    // untouched once another lane's has: it is tried, and so measured.
    let reported = members.iter().any(|&m| gateway.lanes[state.members[m]].upstream_headroom().is_some());
    let signals: Vec<Signals<'_>> = members
        .iter()
        .map(|&m| {
            let mut signal = signals(gateway, state.members[m], headroom);
            if reported && gateway.lanes[state.members[m]].upstream_headroom().is_none() {
                signal.rate_headroom = least(Some(1.0), headroom.rate);
            }
            signal
        })
        .collect();
    rank(strategy, projection, &signals).map(|order| order.into_iter().map(|position| members[position]).collect())
}

/// What governance says the caller has left, for routing signals: the
/// least budget (USD) and rate headroom (a share) on its key's chain.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Headroom {
    budget: Option<f64>,
    rate: Option<f64>,
}

impl Headroom {
    fn of(gateway: &Gateway, call: &Call) -> Headroom {
        match (&gateway.governance, &call.caller) {
            (Some(governance), Some(caller)) => {
                let (budget, rate) = governance.headroom(caller);
                Headroom { budget, rate }
            }
            _ => Headroom::default(),
        }
    }
}

/// The smaller of two optional shares.
fn least(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn signals<'a>(gateway: &'a Gateway, lane_index: usize, headroom: &Headroom) -> Signals<'a> {
    let lane = &gateway.lanes[lane_index];
    let rate = gateway.config.rate_card.get(&lane.name);
    Signals {
        model: &lane.name,
        input_utok: rate.map(|r| r.input_utok),
        output_utok: rate.map(|r| r.output_utok),
        latency_ms: lane.latency_ms(),
        available_concurrency: lane.permits.as_ref().map(|p| p.available_permits() as u64),
        // The lane's own headroom as its upstream reports it, bounded by the
        // caller's key chain; without either, `usage` abstains.
        rate_headroom: least(lane.upstream_headroom(), headroom.rate),
        billing: match lane.billing {
            Billing::Subscription => BillingRank::Subscription,
            Billing::PayAsYouGo => BillingRank::PayAsYouGo,
            Billing::Free => BillingRank::Free,
        },
    }
}

fn projection_of(gateway: &Gateway, call: &Call, translated: &mut Option<Request>) -> Result<Projection, ErrorInfo> {
    if call.operation != switchyard_ir::Operation::Chat {
        // Not a conversation to answer: its size is what a strategy or hook can weigh.
        return Ok(Projection { total_chars: call.body.len(), ..Projection::default() });
    }
    if translated.is_none() {
        let mut request = gateway.codec(call.ingress).read_request(&call.body).map_err(|err| err.to_error_info())?;
        request.stream = call.stream;
        *translated = Some(request);
    }
    let Some(request) = translated.as_ref() else {
        return Err(ErrorInfo::new(ErrorKind::Internal, "request was not read"));
    };
    Ok(Projection {
        message_count: request.messages.len(),
        has_tools: !request.tools.is_empty(),
        total_chars: request.total_chars(),
        max_tokens: request.max_tokens,
        stream: call.stream,
    })
}

/// Fires every gate of the pool concurrently and reconciles their
/// decisions in priority order. Returns the decision and the name of the
/// gate whose order (or rejection) won.
async fn run_gates(
    gateway: &Gateway,
    call: &Call,
    pool: usize,
    usable: &[usize],
    projection: &Projection,
    request: Option<&Request>,
    headroom: &Headroom,
) -> (Decision, Option<Arc<str>>) {
    let state = &gateway.pools[pool];
    let views: Vec<CandidateView<'_>> = usable
        .iter()
        .map(|&member| {
            let lane = &gateway.lanes[state.members[member]];
            let signal = signals(gateway, state.members[member], headroom);
            CandidateView {
                model: &lane.name,
                tier: lane.tier.as_deref(),
                cost_per_mtok: signal.cost_per_mtok(),
                latency_ms: signal.latency_ms,
                available_concurrency: signal.available_concurrency,
                budget_remaining: headroom.budget,
                rate_headroom: signal.rate_headroom,
                tags: &lane.tags,
            }
        })
        .collect();
    let (system, messages) = request.map(flatten).unwrap_or_default();
    let view = RequestView {
        pool: &state.name,
        ingress_protocol: call.ingress.as_str(),
        projection,
        system,
        messages,
        end_user: request.and_then(|r| r.user.as_deref()),
        key: call.caller.as_ref().map(|c| (c.key.record.id.as_str(), c.key.record.name.as_str())),
        // Only a hook that may rewrite sees the body (a gate, or a fallback it
        // names): parse it only when one exists.
        body: gateway
            .config
            .hooks
            .iter()
            .any(|hook| hook.prompt == PromptAccess::ReadWrite)
            .then(|| serde_json::from_slice(&call.body).ok())
            .flatten(),
    };
    let runs = state.gates.iter().map(|&gate| run_gate(gateway, gate, &view, &views, usable, state, headroom));
    let results = futures_util::future::join_all(runs).await;
    let mut orderer = None;
    let mut rejecter = None;
    for (decision, name) in &results {
        if decision.order.is_some() {
            orderer = Some(name.clone());
        }
        if decision.reject.is_some() && rejecter.is_none() {
            rejecter = Some(name.clone());
        }
    }
    let decision = hook::reconcile(results.into_iter().map(|(decision, _)| decision));
    let winner = if rejecter.is_some() { rejecter } else { orderer };
    (decision, winner)
}

/// Calls one gate, following its `on_error` chain (proven finite at boot).
async fn run_gate(
    gateway: &Gateway,
    gate: usize,
    view: &RequestView<'_>,
    candidates: &[CandidateView<'_>],
    usable: &[usize],
    state: &PoolState,
    headroom: &Headroom,
) -> (Decision, Arc<str>) {
    let mut current = gate;
    loop {
        let hook = &gateway.config.hooks[current];
        let grants = Grants {
            prompt: match hook.prompt {
                PromptAccess::No => Access::No,
                PromptAccess::ReadOnly => Access::ReadOnly,
                PromptAccess::ReadWrite => Access::ReadWrite,
            },
            user: hook.user,
        };
        let payload = serde_json::to_vec(&hook::payload(view, candidates, grants)).unwrap_or_default();
        let called = gateway.hooks.call(&hook.url, payload, hook.timeout).await;
        let parsed = match called {
            Ok(reply) => hook::parse_reply(&reply, grants).map_err(|err| (HookOutcome::InvalidReply, err.to_string())),
            Err(err) => Err((HookOutcome::of(&err), err.to_string())),
        };
        if let Some(metrics) = gateway.metrics() {
            metrics.hook_call(current, parsed.as_ref().map_or_else(|(outcome, _)| *outcome, |_| HookOutcome::Ok));
        }
        let failure = match parsed {
            Ok(decision) => return (decision, hook.name.clone()),
            Err((_, failure)) => failure,
        };
        tracing::warn!(hook = %hook.name, error = %failure, on_error = ?hook.on_error, "routing hook failed");
        let decision = match hook.on_error {
            OnError::Nothing | OnError::Weighted => Decision::abstain(),
            OnError::First => Decision { order: Some((0..usable.len()).collect()), ..Decision::default() },
            OnError::Reject => Decision {
                reject: Some((503, format!("routing hook `{}` is unavailable and fails closed", hook.name))),
                ..Decision::default()
            },
            OnError::Strategy(strategy) => {
                let order = rank_members(gateway, state, usable, strategy, view.projection, headroom);
                // Positions into `usable`, as a hook's order would be.
                let order =
                    order.map(|members| members.iter().filter_map(|m| usable.iter().position(|u| u == m)).collect());
                Decision { order, ..Decision::default() }
            }
            OnError::Hook(next) => {
                current = next;
                continue;
            }
        };
        return (decision, hook.name.clone());
    }
}

/// System text and `(role, text)` per message, for `prompt` grants; images
/// and other binary blocks are skipped.
fn flatten(request: &Request) -> (Option<String>, Vec<(&'static str, String)>) {
    let system = (!request.system.is_empty())
        .then(|| request.system.iter().map(|b| b.text.as_str()).collect::<Vec<_>>().join("\n"));
    let messages = request
        .messages
        .iter()
        .map(|message| {
            let role = match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::System => "system",
            };
            let mut text = String::new();
            for block in &message.content {
                match block {
                    Block::Text(t) => text.push_str(&t.text),
                    Block::ToolResult(result) => text.push_str(&result.joined_text()),
                    _ => {}
                }
            }
            (role, text)
        })
        .collect();
    (system, messages)
}
