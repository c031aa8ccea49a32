//! The settle stage: what one request did, recorded once when it ends —
//! whatever the way it ends (answered, refused, failed, or abandoned by its
//! caller mid-stream). A [`Record`] is opened at ingress and filled along
//! the request path (the pool, the key and its reservation, the lane that
//! served, the usage, the first byte); finishing it settles the budget
//! reservation, queues the ledger row, counts the metrics, writes the
//! access line, ends the trace and feeds the request-log sinks. A record
//! dropped unfinished finishes itself (status 499, what was seen so far).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;
use switchyard_governance::money::Tokens;
use switchyard_ir::{Protocol, Usage};
use switchyard_store::LedgerRow;
use tokio::time::Instant;

use switchyard_state::call::Slot;
use switchyard_state::governance::{now_ms, Caller};
use switchyard_state::Gateway;
use switchyard_telemetry::access::{push_millis, Line};
use switchyard_telemetry::sink::SinkRecord;
use switchyard_telemetry::trace::{genai_provider, Summary, Trace};

const TRACEPARENT: http::HeaderName = http::HeaderName::from_static("traceparent");

/// One request, from ingress to settlement.
pub struct Record {
    gateway: Arc<Gateway>,
    ingress: Protocol,
    request_id: HeaderValue,
    started: Instant,
    started_ms: u64,
    pool: Option<usize>,
    /// The requested name's pool slot and lane that served (or last failed).
    served: Option<(Slot, usize, Arc<str>)>,
    caller: Option<Caller>,
    reservation: Option<switchyard_state::governance::Hold>,
    /// Governance admitted it (only admitted requests get a ledger row:
    /// refusals cost nothing, and a flood of them must not fill the store).
    admitted: bool,
    /// Estimated prompt tokens (billed when a caller leaves before usage).
    pub input_estimate: u64,
    failovers: u32,
    /// The ledger row's id, drawn by the gateway (never the caller's
    /// request id; see [`next_entry`]).
    entry: i64,
    /// The latest upstream attempt, and the ones before it (kept apart so
    /// the usual single attempt allocates nothing).
    last_attempt: Option<AttemptNote>,
    earlier_attempts: Vec<AttemptNote>,
    /// Attempts billed on rows of their own: a hedge's cancelled loser
    /// (its prompt), and the parts of a continued stream before the one
    /// serving now (their usage), each at its own lane's price.
    side: Vec<Side>,
    /// Guardrail decisions: (rule catalog id, on the reply).
    guardrails: Vec<(usize, bool)>,
    /// Answered from the response cache, saving this much (nano-USD).
    cache_saved: Option<u64>,
    /// The end user it was made for.
    end_user: Option<Box<str>>,
    /// Refused before anything was billed: the error's kind, for the
    /// request log's row.
    refusal: Option<switchyard_ir::ErrorKind>,
    ttfb: Option<Duration>,
    /// Time spent waiting for upstream answers (for `Server-Timing`).
    upstream: Duration,
    usage: Option<Usage>,
    /// Units its operation billed beyond tokens.
    units: u64,
    /// What it asked for (`chat`, `embed`, ..., `count_tokens`).
    operation: &'static str,
    estimated: bool,
    /// The upstream accepted the request and its answer never came whole
    /// (a body that timed out or broke): what it did is unknown, so the
    /// request is charged at its reservation.
    at_reservation: bool,
    stream: bool,
    stop_reason: Option<&'static str>,
    /// The trace, when this request is sampled.
    pub trace: Option<Trace>,
    request_body: Option<Bytes>,
    response_body: Option<Bytes>,
    /// What the caller's group keeps of the text (`retention:`).
    keeps: switchyard_config::Retention,
    /// The text kept for it.
    retained: Option<Retained>,
    done: bool,
}

/// A request's text its group's retention keeps.
#[derive(Debug)]
struct Retained {
    request: Bytes,
    user: Option<String>,
    reply: Option<Bytes>,
    stream: bool,
}

/// A ledger entry id: this process's random 31-bit prefix above a 32-bit
/// sequence. Positive, so every store keeps it as it is; unique within the
/// process for 2³² rows, and across a fleet unless two processes draw the
/// same prefix. (64 random bits alone repeat by chance, about 5 % of the
/// time over 10⁹ rows, and a repeated entry is a row the store skips.)
fn next_entry() -> i64 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static PREFIX: std::sync::LazyLock<i64> =
        std::sync::LazyLock::new(|| i64::from(fastrand::u32(1..=i32::MAX as u32)));
    static SEQUENCE: AtomicU32 = AtomicU32::new(0);
    (*PREFIX << 32) | i64::from(SEQUENCE.fetch_add(1, Ordering::Relaxed))
}

/// One upstream attempt, as the record keeps it until the ledger row.
#[derive(Debug, Clone, Copy)]
struct AttemptNote {
    lane: usize,
    status: u16,
    failure: Option<&'static str>,
    ms: u64,
}

impl Record {
    /// Bills this request under `entry` instead of a fresh one: a request
    /// the gateway may make twice (a batch line run again after a crash)
    /// is stored, and billed, once.
    pub fn bill_once_as(&mut self, entry: i64) {
        self.entry = entry;
    }

    /// Opens the record of a request in `ingress` (continuing the caller's
    /// `traceparent`, when traces are on).
    /// Boxed: it travels from the handler through the engine into a stream's
    /// relay, and a pointer moves cheaper than the record.
    pub fn begin(
        gateway: &Arc<Gateway>,
        ingress: Protocol,
        request_id: HeaderValue,
        headers: &http::HeaderMap,
    ) -> Box<Record> {
        let trace = gateway.telemetry.tracer.as_ref().and_then(|tracer| tracer.begin(headers.get(TRACEPARENT)));
        Box::new(Record {
            gateway: gateway.clone(),
            ingress,
            request_id,
            started: Instant::now(),
            started_ms: now_ms(),
            pool: None,
            served: None,
            caller: None,
            reservation: None,
            admitted: false,
            input_estimate: 0,
            failovers: 0,
            entry: next_entry(),
            last_attempt: None,
            earlier_attempts: Vec::new(),
            side: Vec::new(),
            guardrails: Vec::new(),
            cache_saved: None,
            end_user: None,
            refusal: None,
            ttfb: None,
            upstream: Duration::ZERO,
            usage: None,
            units: 0,
            operation: "chat",
            estimated: false,
            at_reservation: false,
            stream: false,
            stop_reason: None,
            trace,
            request_body: None,
            response_body: None,
            keeps: switchyard_config::Retention::None,
            retained: None,
            done: false,
        })
    }

    /// The request's id (`x-request-id`).
    pub fn request_id(&self) -> &HeaderValue {
        &self.request_id
    }

    /// The request named gateway pool `pool` for `operation` (an
    /// operation's name, or `count_tokens`), streamed or not.
    pub fn named(&mut self, pool: usize, operation: &'static str, stream: bool) {
        self.pool = Some(pool);
        self.operation = operation;
        self.stream = stream;
    }

    /// The gateway refused the request for `kind` before anything was
    /// billed (`caller`: who, when known): the request log gets a row of
    /// its own (within governance's limit on such rows).
    pub fn refused_with(&mut self, caller: Option<Caller>, kind: switchyard_ir::ErrorKind) {
        if self.caller.is_none() {
            self.caller = caller;
        }
        self.refusal = Some(kind);
    }

    /// The request is made for `end_user` (its ledger row names them).
    pub fn for_end_user(&mut self, end_user: Option<Box<str>>) {
        self.end_user = end_user;
    }

    /// Governance admitted the request for `caller`, holding `reservation`.
    pub fn admitted(
        &mut self,
        caller: Option<Caller>,
        reservation: Option<switchyard_state::governance::Hold>,
        input_estimate: u64,
    ) {
        if let (Some(_), Some(governance), Some(group)) = (
            &self.gateway.retention,
            &self.gateway.governance,
            caller.as_ref().and_then(|c| c.key.record.group.as_deref()),
        ) {
            self.keeps = governance.retention_of(group).unwrap_or_default();
        }
        self.caller = caller;
        self.reservation = reservation;
        self.admitted = true;
        self.input_estimate = input_estimate;
    }

    /// The request body, kept for the request log when it includes text.
    pub fn keep_request(&mut self, body: &Bytes) {
        if self.gateway.telemetry.keeps_text() {
            self.request_body = Some(body.clone());
        }
    }

    /// A whole reply's body, kept for the request log when it includes
    /// text, and for the group's retention.
    pub fn keep_response(&mut self, body: &Bytes) {
        if self.gateway.telemetry.keeps_text() {
            self.response_body = Some(body.clone());
        }
        if let Some(retained) = self.retained.as_mut() {
            retained.reply = Some(body.clone());
        }
    }

    /// The caller's group keeps its requests' text.
    pub fn retains(&self) -> bool {
        self.keeps != switchyard_config::Retention::None
    }

    /// The request as it goes upstream (after its guardrails), for the
    /// group's retention (with the end user admission read).
    pub fn retain_request(&mut self, body: &Bytes) {
        if self.retains() {
            let user = self.end_user.as_deref().map(str::to_owned);
            self.retained = Some(Retained { request: body.clone(), user, reply: None, stream: false });
        }
    }

    /// A stream's frames as the caller got them, for the group's retention.
    pub fn retain_stream(&mut self, frames: Bytes) {
        if let Some(retained) = self.retained.as_mut() {
            retained.reply = Some(frames);
            retained.stream = true;
        }
    }

    /// The lane at `slot` (lane index `lane`, wire model `wire_model`) is
    /// serving, after `failovers` lanes failed before it.
    pub fn serving(&mut self, slot: Slot, lane: usize, wire_model: Arc<str>, failovers: u32) {
        self.served = Some((slot, lane, wire_model));
        self.failovers = failovers;
    }

    /// An upstream attempt on lane `lane` ended with `status` (0: no
    /// answer) and, when the gateway moved on or gave up, `failure`.
    pub fn attempted(&mut self, lane: usize, status: u16, failure: Option<&'static str>, took: Duration) {
        let note = AttemptNote { lane, status, failure, ms: took.as_millis() as u64 };
        if let Some(previous) = self.last_attempt.replace(note) {
            self.earlier_attempts.push(previous);
        }
    }

    /// The last attempt, noted as answered, failed after all (`failure`):
    /// a stream's 2xx head whose content never came.
    pub fn last_attempt_failed(&mut self, failure: &'static str) {
        if let Some(note) = self.last_attempt.as_mut() {
            note.failure = Some(failure);
        }
    }

    /// An attempt on lane `lane` (asked for `wire_model`) that the gateway
    /// cancelled after sending it (the slower of a hedged pair): noted, and
    /// billed the prompt it was sent (the gateway's estimate, on a row of
    /// its own at that lane's price, status 499).
    pub fn cancelled(&mut self, lane: usize, wire_model: Arc<str>, took: Duration) {
        self.attempted(lane, 0, Some("hedge_cancelled"), took);
        if let Some(trace) = self.trace.as_mut() {
            if let Some(name) = self.gateway.lanes.get(lane).map(|l| l.name.clone()) {
                trace.end_attempt(&name, 0, Some("hedge_cancelled"));
            }
        }
        self.side.push(Side { lane, wire_model, usage: None, estimated: true, status: 499 });
    }

    /// A continued stream goes on on lane `lane` of `slot`: the part the
    /// serving lane streamed (`usage`; `estimated` when its upstream never
    /// said) is billed on a row of its own at that lane's price (status
    /// 206, a part of the answer), and the new lane serves the rest.
    pub fn continued_on(&mut self, slot: Slot, lane: usize, wire_model: Arc<str>, usage: Usage, estimated: bool) {
        if let Some((_, served, served_model)) = self.served.take() {
            self.side.push(Side { lane: served, wire_model: served_model, usage: Some(usage), estimated, status: 206 });
        }
        self.served = Some((slot, lane, wire_model));
    }

    /// Guardrail decisions `screen` made (counted once each per request).
    pub fn guarded(&mut self, screen: &switchyard_guard::Screen, decisions: &[switchyard_guard::Decision]) {
        for decision in decisions {
            let id = (screen.rules[decision.rule].id, decision.direction == switchyard_guard::Direction::Response);
            if !self.guardrails.contains(&id) {
                self.guardrails.push(id);
            }
        }
    }

    /// Answered from the response cache: served by `lane` (through `pool`)
    /// when the answer was stored, at no cost (it saved `saved` nano-USD).
    pub fn cache_hit(&mut self, pool: usize, lane: usize, saved: u64) {
        let member = self.gateway.pools.get(pool).and_then(|p| p.members.iter().position(|&m| m == lane)).unwrap_or(0);
        let wire = self.gateway.lanes.get(lane).map(|l| l.wire_model.clone()).unwrap_or_else(|| Arc::from(""));
        self.served = Some((Slot { pool, member }, lane, wire));
        self.cache_saved = Some(saved);
        self.first_byte();
    }

    /// A guardrail decision by catalog id (a moderator's verdict).
    pub fn guarded_id(&mut self, id: usize, response: bool) {
        if !self.guardrails.contains(&(id, response)) {
            self.guardrails.push((id, response));
        }
    }

    /// What else the ledger row records: a cache hit's saving, the
    /// guardrail decisions (named from the config's catalog of rules).
    fn notes(&self, gateway: &Gateway) -> switchyard_store::Notes {
        let guardrails = self
            .guardrails
            .iter()
            .filter_map(|&(id, response)| {
                let (policy, rule, action) = gateway.metrics.guardrail_rules.get(id)?;
                let direction = if response { "response" } else { "request" };
                Some(format!("{policy}/{rule}/{action}/{direction}"))
            })
            .collect();
        switchyard_store::Notes { cache_saved_nano: self.cache_saved, guardrails, refused: None, tool: None }
    }

    /// Every attempt, for the ledger, when there was more than one.
    fn attempts(&self) -> Vec<switchyard_store::Attempt> {
        if self.earlier_attempts.is_empty() {
            return Vec::new();
        }
        self.earlier_attempts
            .iter()
            .chain(&self.last_attempt)
            .map(|note| switchyard_store::Attempt {
                lane: self.gateway.lanes.get(note.lane).map(|l| l.name.to_string()).unwrap_or_default(),
                status: (note.status != 0).then_some(note.status),
                failure: note.failure.map(str::to_owned),
                ms: note.ms,
            })
            .collect()
    }

    /// Time spent waiting for one upstream's answer.
    pub fn waited(&mut self, upstream: Duration) {
        self.upstream += upstream;
    }

    /// The `Server-Timing` value: the gateway's own time so far and the
    /// upstream's, so a caller can tell them apart.
    pub fn server_timing(&self) -> Option<HeaderValue> {
        let total = self.started.elapsed();
        let mut text = String::with_capacity(48);
        text.push_str("gateway;dur=");
        push_millis(&mut text, total.saturating_sub(self.upstream));
        text.push_str(", upstream;dur=");
        push_millis(&mut text, self.upstream);
        HeaderValue::from_maybe_shared(Bytes::from(text)).ok()
    }

    /// What the request used (`estimated`: the gateway's estimate, because
    /// the caller left before the upstream reported usage).
    pub fn record_usage(&mut self, usage: Usage, estimated: bool) {
        self.usage = Some(usage);
        self.estimated = estimated;
    }

    /// What the request used, as recorded so far.
    pub fn usage(&self) -> Usage {
        self.usage.unwrap_or_default()
    }

    /// The units its operation billed beyond tokens (search units, images,
    /// characters, seconds of audio).
    pub fn record_units(&mut self, units: u64) {
        self.units = units;
    }

    /// The upstream accepted the request but its answer never came whole:
    /// without usage, the request is charged at its reservation.
    pub fn charge_reservation(&mut self) {
        self.at_reservation = true;
    }

    /// Why the model stopped, when known.
    pub fn stop_reason(&mut self, reason: &'static str) {
        self.stop_reason = Some(reason);
    }

    /// The first byte of the answer's body reached the caller.
    pub fn first_byte(&mut self) {
        if self.ttfb.is_none() {
            self.ttfb = Some(self.started.elapsed());
        }
    }

    /// Whether this request holds a budget reservation (and so must be
    /// billed even for a stream its caller abandons).
    pub fn bills(&self) -> bool {
        self.reservation.is_some()
    }

    /// Estimated prompt tokens, for a request billed without usage.
    pub fn input_estimate(&self) -> u64 {
        self.input_estimate
    }

    /// Settles and records; waits while the ledger queue is full.
    pub async fn finish(mut self: Box<Self>, status: u16) {
        // Queued before the first await, so that this future holds neither
        // the rows nor a channel send: only the rare waits for room.
        for waiting in self.settle_queued(status) {
            waiting.await;
        }
    }

    /// Settles and queues the rows; returns the waits of those that found
    /// the queue full.
    fn settle_queued(&mut self, status: u16) -> Vec<switchyard_state::governance::ledger::Waiting> {
        let (row, cancelled) = self.settle(status);
        let Some(queue) = self.gateway.governance.as_ref().and_then(|g| g.ledger.as_ref()) else {
            return Vec::new();
        };
        row.into_iter().chain(cancelled).filter_map(|row| queue.offer(row)).collect()
    }

    /// The same from a context that cannot wait.
    pub fn finish_detached(mut self: Box<Self>, status: u16) {
        self.settle_detached(status);
    }

    /// Settles and queues the rows without waiting.
    fn settle_detached(&mut self, status: u16) {
        let (row, cancelled) = self.settle(status);
        if let Some(queue) = self.gateway.governance.as_ref().and_then(|g| g.ledger.as_ref()) {
            for row in row.into_iter().chain(cancelled) {
                queue.push_detached(row);
            }
        }
    }

    /// Everything but the ledger push; returns the ledger row, if any,
    /// and those of cancelled attempts.
    fn settle(&mut self, status: u16) -> (Option<LedgerRow>, Vec<LedgerRow>) {
        if std::mem::replace(&mut self.done, true) {
            return (None, Vec::new());
        }
        let gateway = self.gateway.clone();
        let total = self.started.elapsed();
        let bill = self.bill(&gateway);
        let side = self.side_bills(&gateway);
        if let (Some(governance), Some(reservation)) = (&gateway.governance, &self.reservation) {
            let (tokens, cost) = side.iter().fold((bill.tokens.total(), bill.cost), |(tokens, cost), c| {
                (tokens.saturating_add(c.tokens.total()), cost.saturating_add(c.cost))
            });
            // A hit is given back to the rate limits, unless the operator
            // counts hits (`cache.count_hits`).
            if self.cache_saved.is_some() && side.is_empty() && !gateway.config.cache.count_hits {
                governance.settle_hit(reservation);
            } else {
                governance.settle(reservation, tokens, cost);
            }
        }
        let names = Names {
            pool: self.pool.map(|p| gateway.pools[p].name.clone()),
            lane: bill.lane.map(|l| gateway.lanes[l].name.clone()),
            key: self.caller.as_ref().map(|c| c.key.id.clone()),
        };
        self.count(&gateway, status, total);
        self.log(&gateway, &bill, &names, status, total);
        self.end_trace(&gateway, &bill, &names, status);
        self.feed_sinks(&gateway, &bill, &names, status, total);
        let rows = side.into_iter().filter_map(|c| self.side_row(&gateway, c, &names)).collect();
        let row = self.ledger_row(&gateway, bill.tokens, &names, status);
        if let Some(row) = &row {
            self.hand_over_text(&gateway, row);
        }
        (row, rows)
    }

    /// The text the group keeps, to the content writer (which seals it),
    /// under the row's entry.
    fn hand_over_text(&mut self, gateway: &Gateway, row: &LedgerRow) {
        let (Some(retained), Some(retention), Some(governance)) =
            (self.retained.take(), &gateway.retention, &gateway.governance)
        else {
            return;
        };
        governance.content.push(switchyard_state::retention::Pending {
            retention: retention.clone(),
            codec: gateway.codec(self.ingress),
            captured: switchyard_state::retention::Captured {
                entry: row.entry,
                at_ms: row.at_ms,
                request_id: row.request_id.clone(),
                key_id: row.key_id.clone(),
                group: row.group.clone(),
                keeps: self.keeps,
                user: retained.user,
                request: retained.request,
                reply: retained.reply,
                stream: retained.stream,
            },
        });
    }

    /// What each side row cost: a cancelled attempt its prompt (the
    /// gateway's estimate), a continued stream's earlier part its usage,
    /// at its own lane's price. Their tokens reach the metrics here.
    fn side_bills(&self, gateway: &Gateway) -> Vec<SideBill> {
        self.side
            .iter()
            .map(|side| {
                let tokens = match &side.usage {
                    None => Tokens { input: self.input_estimate, requests: 1, ..Tokens::default() },
                    Some(usage) => billed(usage, 0),
                };
                if let (Some(usage), true) = (&side.usage, gateway.telemetry.metrics_on) {
                    gateway.metrics.tokens(side.lane, usage);
                }
                let cost = gateway.lanes.get(side.lane).and_then(|l| l.price).map_or(0, |p| p.cost(&tokens));
                SideBill { side: side.clone(), tokens, cost }
            })
            .collect()
    }

    /// The ledger row of a side bill: its lane, its tokens, its status.
    fn side_row(&self, gateway: &Gateway, bill: SideBill, names: &Names) -> Option<LedgerRow> {
        let mut row = self.ledger_row(gateway, bill.tokens, names, bill.side.status)?;
        row.entry = next_entry();
        row.lane = gateway.lanes.get(bill.side.lane).map(|l| l.name.to_string()).unwrap_or_default();
        row.model = bill.side.wire_model.to_string();
        row.estimated = bill.side.estimated;
        row.ttfb_ms = None;
        row.failovers = 0;
        row.attempts = Vec::new();
        row.notes = switchyard_store::Notes::default();
        Some(row)
    }

    /// What the request cost: the usage the reply reported at the serving
    /// lane's price, or (when the upstream took the request and its answer
    /// never came whole) the reservation.
    fn bill(&mut self, gateway: &Gateway) -> Bill {
        // A lane served it when usage came: only then are its units and
        // its request billed.
        let tokens = self.usage.as_ref().map_or_else(Tokens::default, |usage| billed(usage, self.units));
        let lane = self.served.as_ref().map(|(_, lane, _)| *lane);
        let cost = lane.and_then(|l| gateway.lanes[l].price).map_or(0, |p| p.cost(&tokens));
        let reserved = self.reservation.as_ref().map(|hold| hold.reservation.estimate);
        match (self.usage.is_none() && self.at_reservation, reserved) {
            // No usage came: the reservation is the most it can have cost.
            (true, Some(estimate)) => {
                self.estimated = true;
                let input = self.input_estimate.min(estimate.tokens);
                let tokens = Tokens { input, output: estimate.tokens - input, ..Tokens::default() };
                Bill { tokens, cost: estimate.cost, lane }
            }
            _ => Bill { tokens, cost, lane },
        }
    }

    /// The request in the metrics.
    fn count(&self, gateway: &Gateway, status: u16, total: Duration) {
        if !gateway.telemetry.metrics_on {
            return;
        }
        for &(rule, response) in &self.guardrails {
            gateway.metrics.guardrail(rule, response);
        }
        let member = self.served.as_ref().filter(|(slot, _, _)| Some(slot.pool) == self.pool).map(|(s, _, _)| s.member);
        let place = gateway.metrics.place(self.pool, member);
        gateway.metrics.request(place, self.ingress, status, total, self.ttfb);
        if let (Some((_, lane, _)), Some(usage)) = (&self.served, &self.usage) {
            gateway.metrics.tokens(*lane, usage);
        }
    }

    /// The access line.
    fn log(&self, gateway: &Gateway, bill: &Bill, names: &Names, status: u16, total: Duration) {
        let Some(access) = &gateway.telemetry.access else { return };
        access.write(&Line {
            request_id: self.request_id.to_str().unwrap_or(""),
            key: names.key.as_deref().unwrap_or("-"),
            ingress: self.ingress.as_str(),
            pool: names.pool.as_deref().unwrap_or("-"),
            lane: names.lane.as_deref().unwrap_or("-"),
            status,
            stream: self.stream,
            input_tokens: bill.tokens.input,
            output_tokens: bill.tokens.output,
            usd: switchyard_governance::money::usd(bill.cost),
            ttfb: self.ttfb,
            total,
            failovers: self.failovers,
            estimated: self.estimated,
        });
    }

    /// The request's trace, when it is sampled.
    fn end_trace(&mut self, gateway: &Gateway, bill: &Bill, names: &Names, status: u16) {
        let (Some(trace), Some(tracer)) = (self.trace.take(), &gateway.telemetry.tracer) else { return };
        tracer.finish(
            trace,
            Summary {
                ingress: self.ingress.as_str(),
                operation: self.operation,
                pool: names.pool.clone(),
                lane: names.lane.clone(),
                provider: bill.lane.map(|l| genai_provider(gateway.lanes[l].protocol)),
                response_model: self.served.as_ref().map(|(_, _, wire)| wire.clone()),
                usage: self.usage.is_some().then_some((bill.tokens.input, bill.tokens.output)),
                finish_reason: self.stop_reason,
                failovers: self.failovers,
                status,
            },
        );
    }

    /// The newest requests' text (for the console) and the request-log sinks.
    fn feed_sinks(&mut self, gateway: &Gateway, bill: &Bill, names: &Names, status: u16, total: Duration) {
        let telemetry = &gateway.telemetry;
        // Only a request with a ledger row has a detail to show its text.
        let has_row = self.admitted && gateway.governance.as_ref().is_some_and(|g| g.ledger.is_some());
        if let (Some(recent), true) = (&telemetry.recent_text, has_row) {
            recent.keep(self.entry, self.request_body.as_ref(), self.response_body.as_ref());
        }
        let Some(sinks) = &telemetry.sinks else { return };
        let tokens = &bill.tokens;
        sinks.push(SinkRecord {
            at_ms: now_ms(),
            request_id: self.request_id.to_str().unwrap_or("").to_owned(),
            key_id: names.key.as_deref().map(str::to_owned),
            ingress: self.ingress.as_str(),
            pool: names.pool.as_deref().map(str::to_owned),
            lane: names.lane.as_deref().map(str::to_owned),
            model: self.served.as_ref().map(|(_, _, wire)| wire.to_string()),
            status,
            stream: self.stream,
            input_tokens: tokens.input,
            output_tokens: tokens.output,
            cache_read_tokens: tokens.cache_read,
            cache_write_tokens: tokens.cache_write,
            usd: switchyard_governance::money::usd(bill.cost),
            ttfb_ms: self.ttfb.map(millis),
            total_ms: millis(total),
            failovers: self.failovers,
            estimated: self.estimated,
            request_body: self.request_body.take(),
            response_body: self.response_body.take(),
        });
    }

    /// The ledger row of an admitted request, or of a refusal at the door
    /// (operation `refused`, never spend: see [`Record::refusal`]), when
    /// there is a ledger.
    fn ledger_row(&self, gateway: &Gateway, tokens: Tokens, names: &Names, status: u16) -> Option<LedgerRow> {
        let governance = gateway.governance.as_ref()?;
        governance.ledger.as_ref()?;
        let refused = match self.admitted {
            true => None,
            false => Some(self.refusal(governance, status)?),
        };
        let mut notes = self.notes(gateway);
        notes.refused.clone_from(&refused);
        Some(LedgerRow {
            entry: self.entry,
            at_ms: now_ms() as i64,
            request_id: self.request_id.to_str().unwrap_or("").to_owned(),
            key_id: names.key.as_deref().map(str::to_owned),
            group: self.caller.as_ref().and_then(|c| c.key.record.group.clone()),
            pool: names.pool.as_deref().unwrap_or("-").to_owned(),
            lane: names.lane.as_deref().unwrap_or("").to_owned(),
            model: self.served.as_ref().map(|(_, _, wire)| wire.to_string()).unwrap_or_default(),
            operation: if refused.is_some() { switchyard_store::REFUSED } else { self.operation }.to_owned(),
            tokens,
            status,
            latency_ms: now_ms().saturating_sub(self.started_ms),
            ttfb_ms: self.ttfb.map(|t| t.as_millis() as u64),
            failovers: self.failovers,
            estimated: self.estimated,
            attempts: self.attempts(),
            notes,
            end_user: self.end_user.as_deref().map(str::to_owned),
            ingress: Some(self.ingress.as_str().to_owned()),
            stream: self.stream,
        })
    }

    /// Why a request that was never admitted was refused, for its row in
    /// the request log: only a refusal the gateway made (a 4xx), and only
    /// within governance's limit of such rows a minute.
    fn refusal(
        &self,
        governance: &switchyard_state::governance::Governance,
        status: u16,
    ) -> Option<switchyard_store::Refusal> {
        let kind = self.refusal?;
        if !(400..500).contains(&status) || !governance.log_refusal(now_ms()) {
            return None;
        }
        Some(switchyard_store::Refusal {
            kind: serde_json::to_value(kind).ok()?.as_str()?.to_owned(),
            operation: self.operation.to_owned(),
        })
    }
}

/// An attempt billed on a row of its own.
#[derive(Debug, Clone)]
struct Side {
    lane: usize,
    wire_model: Arc<str>,
    /// What it used (`None`: a cancelled attempt, billed its prompt).
    usage: Option<Usage>,
    estimated: bool,
    /// The row's status: 499 cancelled, 206 a part of a continued answer.
    status: u16,
}

/// What a side row cost.
struct SideBill {
    side: Side,
    tokens: Tokens,
    cost: switchyard_governance::NanoUsd,
}

/// What a finished request cost, and the lane it is billed to.
struct Bill {
    tokens: Tokens,
    cost: switchyard_governance::NanoUsd,
    lane: Option<usize>,
}

/// The names a finished request is recorded under.
struct Names {
    pool: Option<Arc<str>>,
    lane: Option<Arc<str>>,
    key: Option<Arc<str>>,
}

impl Drop for Record {
    fn drop(&mut self) {
        if !self.done {
            // Nobody finished it: the caller went away before the answer was
            // complete (499, as nginx logs it).
            self.settle_detached(499);
        }
    }
}

/// What a lane that served `usage` (and `units` beyond tokens) bills: one
/// request's tokens by kind.
pub(crate) fn billed(usage: &Usage, units: u64) -> Tokens {
    Tokens {
        input: usage.input_tokens,
        output: usage.output_tokens,
        cache_read: usage.cache_read_tokens,
        cache_write: usage.cache_write_tokens,
        units,
        requests: 1,
    }
}

/// Milliseconds to the microsecond (what a log reader wants to see).
fn millis(duration: Duration) -> f64 {
    duration.as_micros() as f64 / 1000.0
}
