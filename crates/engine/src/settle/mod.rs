//! The settle stage: what one request did, recorded once when it ends —
//! whatever the way it ends (answered, refused, failed, or abandoned by its
//! caller mid-stream). A [`Record`] is opened at ingress and filled along
//! the request path (the pool, the key and its reservation, the lane that
//! served, the usage, the first byte); finishing it settles the budget
//! reservation, queues the ledger row, counts the metrics, writes the
//! access line, ends the trace and feeds the request-log sinks. A record
//! dropped unfinished finishes itself (status 499, what was seen so far).
//! Every ledger row the gateway writes is made here (`account`): chat,
//! operations, batch lines, MCP tool calls and raw-route requests settle
//! through a record.

mod account;
mod raw;
mod report;
mod tool;

pub use raw::RawNote;
pub use switchyard_store::Estimated;
pub use tool::ToolNote;

use account::Side;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;
use switchyard_governance::money::Tokens;
use switchyard_ir::{Protocol, Usage};
use tokio::time::Instant;

use switchyard_state::call::Slot;
use switchyard_state::governance::{now_ms, Caller};
use switchyard_state::Gateway;
use switchyard_telemetry::access::push_millis;
use switchyard_telemetry::trace::Trace;

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
    /// Why its usage is the gateway's estimate (`None`: the upstream's).
    estimated: Option<Estimated>,
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
    /// An MCP call's own row, when the record is one's.
    tool: Option<Box<ToolNote>>,
    /// The agent run it was admitted on (`groups.<g>.runs`), settled with it.
    run: Option<Box<switchyard_state::runs::RunTicket>>,
    /// A raw-route request's own row, when the record is one's.
    raw: Option<Box<RawNote>>,
    /// Set when the caller hung up before its answer was ready (a billed
    /// request's stages then run on their own): it settles as a 499.
    caller_gone: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// A line of one of the gateway's batches (its rate card entry's
    /// `batch_discount` prices it).
    batch_line: bool,
    /// What the upstream said of itself, for the request's receipt (only
    /// when receipts are on).
    said: Option<Box<Said>>,
    done: bool,
}

/// What the upstream said of itself: its id of the request and the model
/// that served it.
#[derive(Debug, Default)]
pub(crate) struct Said {
    pub(crate) id: Option<String>,
    pub(crate) model: Option<String>,
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
#[derive(Debug, Clone)]
struct AttemptNote {
    lane: usize,
    status: u16,
    failure: Option<&'static str>,
    ms: u64,
    /// What the upstream said when the attempt failed (bounded, secrets
    /// masked: [`error_excerpt`]); only a failure allocates it.
    error: Option<Box<str>>,
}

/// The most characters of an upstream's error kept on an attempt.
pub const MAX_ATTEMPT_ERROR: usize = 300;

/// An upstream's error as an attempt keeps it for the request log: trimmed,
/// cut at [`MAX_ATTEMPT_ERROR`] characters, every secret and personal
/// datum the retention redactor knows masked (a vendor may echo part of
/// the key it was sent).
pub fn error_excerpt(text: &str) -> Box<str> {
    static REDACTOR: std::sync::LazyLock<switchyard_guard::Screen> =
        std::sync::LazyLock::new(switchyard_guard::retention::redactor);
    // Masked before it is cut (a secret cut short is no longer one the
    // detectors know), over a bounded window of it.
    let window = |text: &str, chars: usize| match text.char_indices().nth(chars) {
        Some((at, _)) => text[..at].to_owned(),
        None => text.to_owned(),
    };
    let text = window(text.trim(), 4 * MAX_ATTEMPT_ERROR);
    let masked = switchyard_guard::retention::redact(&REDACTOR, text.as_bytes(), &[]);
    window(String::from_utf8_lossy(&masked).trim(), MAX_ATTEMPT_ERROR).into_boxed_str()
}

impl Record {
    /// Bills this request under `entry` instead of a fresh one: a request
    /// the gateway may make twice (a batch line run again after a crash)
    /// is stored, and billed, once.
    pub fn bill_once_as(&mut self, entry: i64) {
        self.entry = entry;
    }

    /// The request is a line of one of the gateway's batches, billed once
    /// under `entry` and priced at its lane's batch discount.
    pub fn batch_line(&mut self, entry: i64) {
        self.bill_once_as(entry);
        self.batch_line = true;
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
            estimated: None,
            at_reservation: false,
            stream: false,
            stop_reason: None,
            trace,
            request_body: None,
            response_body: None,
            keeps: switchyard_config::Retention::None,
            retained: None,
            tool: None,
            run: None,
            raw: None,
            caller_gone: None,
            batch_line: false,
            said: None,
            done: false,
        })
    }

    /// Notes what the upstream that served said of itself (the first word
    /// of each stands).
    pub(crate) fn upstream_said(&mut self, id: Option<String>, model: Option<String>) {
        let said = self.said.get_or_insert_with(Box::default);
        if said.id.is_none() {
            said.id = id;
        }
        if said.model.is_none() {
            said.model = model;
        }
    }

    /// The flag a caller's hang-up sets: the request settles as a 499
    /// (nginx's "client closed request"), whatever answer it came to.
    pub(crate) fn watch_caller(&mut self) -> Arc<std::sync::atomic::AtomicBool> {
        self.caller_gone.get_or_insert_with(Default::default).clone()
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

    /// The request was admitted on an agent run (settled with it).
    pub fn on_run(&mut self, ticket: Option<Box<switchyard_state::runs::RunTicket>>) {
        self.run = ticket;
    }

    /// The agent run it was admitted on, if any.
    pub fn run(&self) -> Option<&switchyard_state::runs::RunTicket> {
        self.run.as_deref()
    }

    /// The request body, kept for the request log when it includes text.
    pub fn keep_request(&mut self, body: &Bytes) {
        if self.gateway.telemetry.keeps_text() {
            self.request_body = Some(body.clone());
        }
    }

    /// A whole reply's body, kept for the request log when it includes
    /// text.
    pub fn keep_response(&mut self, body: &Bytes) {
        if self.gateway.telemetry.keeps_text() {
            self.response_body = Some(body.clone());
        }
    }

    /// A whole reply as the caller got it, for the group's retention.
    pub fn retain_reply(&mut self, body: &Bytes) {
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

    /// The lane serving (or that last failed), by index.
    pub fn serving_lane(&self) -> Option<usize> {
        self.served.as_ref().map(|(_, lane, _)| *lane)
    }

    /// The wire model the serving lane was asked for.
    pub fn serving_wire_model(&self) -> Option<&str> {
        self.served.as_ref().map(|(_, _, wire)| &**wire)
    }

    /// The pool the request named, once resolved.
    pub fn pool(&self) -> Option<usize> {
        self.pool
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
        let note = AttemptNote { lane, status, failure, ms: took.as_millis() as u64, error: None };
        if let Some(previous) = self.last_attempt.replace(note) {
            self.earlier_attempts.push(previous);
        }
    }

    /// What the upstream said on the last attempt, which failed (`text`: a
    /// transport error, or its error body), kept bounded and masked.
    pub fn last_attempt_said(&mut self, text: &str) {
        if let Some(note) = self.last_attempt.as_mut() {
            note.error = Some(error_excerpt(text));
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
        self.side.push(Side { lane, wire_model, usage: None, estimated: Some(Estimated::HedgeLoser), status: 499 });
    }

    /// A continued stream goes on on lane `lane` of `slot`: the part the
    /// serving lane streamed (`usage`; `estimated` when its upstream never
    /// said) is billed on a row of its own at that lane's price (status
    /// 206, a part of the answer), and the new lane serves the rest.
    pub fn continued_on(
        &mut self,
        slot: Slot,
        lane: usize,
        wire_model: Arc<str>,
        usage: Usage,
        estimated: Option<Estimated>,
    ) {
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

    /// What the request used (`estimated`: the gateway's estimate, and
    /// why: the upstream reported none, the caller left first, ...).
    pub fn record_usage(&mut self, usage: Usage, estimated: Option<Estimated>) {
        self.usage = Some(usage);
        self.estimated = estimated;
    }

    /// What a whole answer's upstream reported, else (it reported nothing)
    /// the prompt as counted and `output_estimate`, marked estimated.
    pub fn record_reported(&mut self, usage: Usage, output_estimate: impl FnOnce() -> u64) {
        if usage.reported() {
            return self.record_usage(usage, None);
        }
        let estimate = Usage { input_tokens: self.input_estimate, output_tokens: output_estimate(), ..usage };
        self.record_usage(estimate, Some(Estimated::NoUsage));
    }

    /// Why its usage is the gateway's estimate, when it is (what the
    /// `x-switchyard-usage` header says).
    pub fn estimated(&self) -> Option<Estimated> {
        match self.at_reservation && self.usage.is_none() {
            true => Some(Estimated::AnswerBroken),
            false => self.estimated,
        }
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
    pub async fn finish(&mut self, status: u16) {
        // Queued before the first await, so that this future holds neither
        // the rows nor a channel send: only the rare waits for room.
        for waiting in self.settle_queued(status) {
            waiting.await;
        }
    }

    /// The same from a context that cannot wait.
    pub fn finish_detached(&mut self, status: u16) {
        self.settle_detached(status);
    }
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
    Tokens::served(usage, units)
}

/// The tokens a reply's content is estimated at (its text, counted as a
/// prompt's is), for a reply whose upstream reported no usage.
pub(crate) fn output_estimate(reply: &switchyard_ir::Response) -> u64 {
    serde_json::to_vec(&reply.content).map_or(0, |json| switchyard_governance::estimate::input_tokens(&json, &[]))
}

/// Milliseconds to the microsecond (what a log reader wants to see).
fn millis(duration: Duration) -> f64 {
    duration.as_micros() as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::{error_excerpt, MAX_ATTEMPT_ERROR};

    #[test]
    fn an_upstream_error_is_kept_bounded_and_without_the_secret_it_echoed() {
        let said = error_excerpt(
            r#" {"error":{"message":"Incorrect API key provided: sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789. Find your key at ...","type":"invalid_request_error"}} "#,
        );
        assert!(!said.contains("sk-proj-AbCdEf"), "{said}");
        assert!(said.starts_with(r#"{"error":{"message":"Incorrect API key provided: "#), "{said}");
        let long = "é".repeat(5_000);
        assert_eq!(error_excerpt(&long).chars().count(), MAX_ATTEMPT_ERROR);
        assert_eq!(&*error_excerpt("  upstream timed out \n"), "upstream timed out");
    }
}
