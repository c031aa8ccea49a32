//! Continuing a stream that broke after its first content
//! (`failover: { stream_failure: continue }`): the next candidate is asked
//! to go on from the text the caller already has (`codec::continuation`:
//! a prefill where the lane takes one, else an instruction), and its events
//! are spliced into the caller's stream: no second message start, its first
//! text block merged into the caller's open one, the seam cut so no text
//! comes twice, later blocks numbered on, one terminator, usage of both
//! parts added. Only a stream of text so far is continued: never after a
//! tool call or reasoning began (a half tool call or signed thinking cannot
//! be resumed by another model).
//!
//! Reads: the call and its IR (when the stream starts), the events the
//! caller was sent. Writes: a continuation's events (spliced) and the
//! usage the caller is told (every part's, added).

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use switchyard_codec::continuation::{self, Joined, Mechanism, Seam, Step};
use switchyard_codec::StreamDecoder;
use switchyard_ir::{BlockStart, Delta, ErrorInfo, Prefill, Protocol, Request, StreamEvent, Usage};
use switchyard_state::call::{Call, Slot};
use switchyard_state::Gateway;
use switchyard_telemetry::metrics::ContinuationOutcome;
use switchyard_transport::UpstreamBody;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use super::{Filter, FilterFuture, ReplyCx, Serving};
use crate::candidate::Candidate;
use crate::exchange::Shape;
use crate::exhausted::Exhaustion;
use crate::lane_health::Health;
use crate::send::{send_to_lane, Outgoing};

/// A relayed stream's means to go on elsewhere, and what the caller has.
pub(crate) struct Continuation {
    /// The caller's request, as read.
    request: Request,
    /// The plan's candidates, in order (the serving lane among them).
    slots: Vec<Slot>,
    /// Lanes that served this stream.
    served: Vec<usize>,
    left: u32,
    /// How long a continuation may take to start (the pool's failover
    /// timeout, counted from the break).
    timeout: std::time::Duration,
    deadline: Instant,
    ingress: Protocol,
    headers: HeaderMap,
    request_id: HeaderValue,
    caller_key: Option<String>,
    /// The answer's text the caller has.
    text: String,
    /// Only text so far.
    text_only: bool,
    /// The caller's open text block.
    open_text: Option<u32>,
    /// The caller's next free block index.
    next_index: u32,
    /// The part being spliced in, when one is.
    splice: Option<Splice>,
}

/// What asking one lane to go on came to.
enum Asked {
    /// It went on: the caller's stream continues from it.
    Went(Switched),
    /// It refused the prefill (a 400 or 422 to an assistant turn last): it
    /// is asked again by instruction.
    RefusedPrefill,
    /// It refused or failed otherwise: the next lane is asked.
    Refused,
    /// The continuation's deadline passed.
    Deadline,
}

/// How the current continuation's events map onto the caller's stream.
struct Splice {
    /// The check of its seam: nothing of its first text reaches the caller
    /// before the seam is proven.
    seam: Seam,
    /// The caller's text block its first text block continues.
    merge_into: Option<u32>,
    /// Its block indexes → the caller's.
    map: Vec<(u32, u32)>,
    /// The caller's index of the block its first text goes to.
    text_index: Option<u32>,
}

/// A continuation whose seam could not be proven: the stream ends with the
/// caller's error instead of an answer repeated or altered.
pub(crate) fn unproven() -> ErrorInfo {
    ErrorInfo::new(
        switchyard_ir::ErrorKind::Internal,
        "the answer broke off and the lane asked to go on did not continue it where it stopped: \
         the answer is incomplete",
    )
    .with_status(502)
}

/// A lane that took the continuation on.
pub(crate) struct Switched {
    pub(crate) upstream: UpstreamBody,
    pub(crate) decoder: Box<dyn StreamDecoder>,
    pub(crate) health: Health,
    pub(crate) permit: Option<OwnedSemaphorePermit>,
    pub(crate) lane: Arc<str>,
    /// The lane's index, its plan slot and wire model, and how long it
    /// took to answer the continuation.
    pub(crate) lane_index: usize,
    pub(crate) slot: Slot,
    pub(crate) wire_model: Arc<str>,
    pub(crate) took: std::time::Duration,
}

impl Continuation {
    /// The means for `call`, served by lane `serving` of a plan with
    /// `slots`, from the call's IR when the send step read it (else read
    /// here); `None` when the pool does not continue or the request cannot
    /// be read.
    pub(crate) fn of(
        gateway: &Gateway,
        call: &Call,
        read: Option<&Request>,
        slots: &[Slot],
        serving: usize,
    ) -> Option<Box<Continuation>> {
        let pool = slots.first()?.pool;
        let failover = gateway.pools[pool].failover;
        let left = failover.continuations;
        if left == 0 {
            return None;
        }
        let request = match read {
            Some(request) => request.clone(),
            None => {
                let codec = gateway.codec(call.ingress);
                let mut request = codec.read_request(&call.body).ok()?;
                // The caller's feature headers (Anthropic betas) go on too.
                codec.read_headers(&call.headers, &mut request);
                request
            }
        };
        Some(Box::new(Continuation {
            request,
            slots: slots.to_vec(),
            served: vec![serving],
            left,
            timeout: failover.timeout,
            deadline: Instant::now(),
            ingress: call.ingress,
            headers: call.headers.clone(),
            request_id: call.request_id.clone(),
            caller_key: call.caller_key().map(str::to_owned),
            text: String::new(),
            text_only: true,
            open_text: None,
            next_index: 0,
            splice: None,
        }))
    }

    /// Follows what the caller was sent (its own block indexes).
    pub(crate) fn observe(&mut self, events: &[StreamEvent]) {
        for event in events {
            match event {
                StreamEvent::BlockStart { index, block } => {
                    self.next_index = self.next_index.max(index + 1);
                    match block {
                        BlockStart::Text => self.open_text = Some(*index),
                        _ => self.text_only = false,
                    }
                }
                StreamEvent::BlockDelta { index, delta: Delta::Text(text) } if self.open_text == Some(*index) => {
                    self.text.push_str(text);
                }
                StreamEvent::BlockDelta { delta: Delta::Text(_), .. } => {}
                StreamEvent::BlockDelta { .. } => self.text_only = false,
                StreamEvent::BlockStop { index } if self.open_text == Some(*index) => self.open_text = None,
                _ => {}
            }
        }
    }

    /// Whether the stream may be continued now: text reached the caller,
    /// or (`withheld`) a screened stream held back all the text it had.
    pub(crate) fn eligible(&self, withheld: bool) -> bool {
        self.text_only && (!self.text.is_empty() || withheld) && self.left > 0
    }

    /// Asks the plan's next usable lane to go on, within the deadline.
    pub(crate) async fn next_lane(&mut self, gateway: &Arc<Gateway>) -> Option<Switched> {
        self.left = self.left.saturating_sub(1);
        self.deadline = Instant::now() + self.timeout;
        for slot in self.slots.clone() {
            if Instant::now() >= self.deadline {
                return None;
            }
            let lane_index = gateway.pools[slot.pool].members[slot.member];
            if self.served.contains(&lane_index) {
                continue;
            }
            self.served.push(lane_index);
            let lane = &gateway.lanes[lane_index];
            if lane.operation != switchyard_ir::Operation::Chat {
                continue;
            }
            let candidate = Candidate {
                lane,
                lane_index,
                wire_model: &lane.wire_model,
                lane_header: lane.lane_header.clone(),
                slot,
            };
            let mut unused = Exhaustion::default();
            let Some(entry) = crate::lane_gate::enter(gateway, &candidate, self.deadline, &mut unused, true).await
            else {
                continue;
            };
            // A lane that refuses the prefill is asked again at once by
            // instruction, and never sent a prefill again.
            let mut entry = Some(entry);
            let mut prefill = !lane.refuses_prefill.load(std::sync::atomic::Ordering::Relaxed);
            while let Some(admitted) = entry.take() {
                match self.ask(gateway, &candidate, admitted, prefill).await {
                    Asked::Went(switched) => return Some(switched),
                    Asked::RefusedPrefill => {
                        lane.refuses_prefill.store(true, std::sync::atomic::Ordering::Relaxed);
                        prefill = false;
                        let mut unused = Exhaustion::default();
                        entry = crate::lane_gate::enter(gateway, &candidate, self.deadline, &mut unused, true).await;
                    }
                    Asked::Refused => {}
                    Asked::Deadline => return None,
                }
            }
        }
        None
    }

    /// What the continuation's call to a lane carries besides its body.
    fn outgoing<'s>(&'s self, wire_model: &'s str) -> Outgoing<'s> {
        Outgoing {
            wire_model,
            stream: true,
            request_id: &self.request_id,
            caller_key: self.caller_key.as_deref(),
            traceparent: None,
            operation: switchyard_ir::Operation::Chat,
            path: None,
            content_type: None,
            caller: Some((&self.headers, self.ingress)),
        }
    }

    /// Asks `candidate` (through its gate) to go on, by prefill when
    /// `prefill` allows and the lane takes one, else by instruction.
    async fn ask(
        &mut self,
        gateway: &Arc<Gateway>,
        candidate: &Candidate<'_>,
        entry: crate::lane_gate::Entry,
        prefill: bool,
    ) -> Asked {
        let (lane, lane_index) = (candidate.lane, candidate.lane_index);
        let capabilities = crate::translation::capabilities(gateway, candidate);
        // Prefill is the lane's capability (`capabilities.prefill`).
        let prefill = prefill && capabilities.prefill != Prefill::No;
        let (mut request, mechanism) = continuation::request(&self.request, &self.text, prefill);
        lane.wire_model.as_ref().clone_into(&mut request.model);
        // Fitted to the lane's model as any try's request is.
        let encoded = crate::translation::write_for_model(gateway.codec(lane.protocol), &mut request, &capabilities);
        let body = match mechanism {
            // An OpenAI-compatible server is told to continue the message.
            Mechanism::Prefill => {
                continuation::mark_prefill(&encoded.body, capabilities.prefill).unwrap_or(encoded.body)
            }
            Mechanism::Afresh | Mechanism::Instruction => encoded.body,
        };
        let out = self.outgoing(&lane.wire_model);
        let asked = Instant::now();
        let sent = tokio::time::timeout_at(self.deadline, send_to_lane(gateway, lane, out, Bytes::from(body)));
        let crate::lane_gate::Entry { health, mut trial, permit } = entry;
        match sent.await {
            Ok(Ok(upstream)) if upstream.status.is_success() => {
                // As for any try: a 2xx head is the lane's success.
                health.success();
                trial.settle();
                if let Some(metrics) = gateway.metrics() {
                    metrics.attempt(lane_index, None);
                }
                self.splice = Some(Splice {
                    seam: Seam::new(&self.text, mechanism),
                    merge_into: self.open_text,
                    map: Vec::new(),
                    text_index: self.open_text,
                });
                tracing::info!(
                    request_id = ?self.request_id, lane = %lane.name, ?mechanism,
                    "a broken stream goes on on another lane"
                );
                Asked::Went(Switched {
                    upstream: upstream.body,
                    decoder: gateway.codec(lane.protocol).stream_decoder(),
                    health,
                    permit,
                    lane: lane.name.clone(),
                    lane_index,
                    slot: candidate.slot,
                    wire_model: lane.wire_model.clone(),
                    took: asked.elapsed(),
                })
            }
            Ok(Ok(upstream)) => {
                // A refusal never masks the first failure: the lane is asked
                // again without a prefill, or the next lane is asked.
                let status = upstream.status;
                tracing::info!(request_id = ?self.request_id, lane = %lane.name, %status, ?mechanism, "a lane would not continue the stream");
                if status.is_server_error() {
                    health.apply(switchyard_health::LaneEffect::Failure, "continuation refused", None);
                }
                let refused_prefill = mechanism == Mechanism::Prefill
                    && matches!(status, http::StatusCode::BAD_REQUEST | http::StatusCode::UNPROCESSABLE_ENTITY);
                if refused_prefill {
                    Asked::RefusedPrefill
                } else {
                    Asked::Refused
                }
            }
            Ok(Err(err)) => {
                health.apply(switchyard_health::LaneEffect::Failure, &err.to_string(), None);
                Asked::Refused
            }
            Err(_) => Asked::Deadline,
        }
    }

    /// Fits a continuation's events into the caller's stream (before they
    /// are encoded): no second message start, its first text block merged
    /// into the caller's open one and held until its seam is proven, later
    /// blocks numbered on. Nothing while no continuation runs. `Err`: the
    /// seam could not be proven. `Ok(Some)`: how it joined, when decided
    /// now.
    pub(crate) fn splice(&mut self, events: &mut Vec<StreamEvent>) -> Result<Option<Joined>, ErrorInfo> {
        let Continuation { splice: Some(splice), next_index, .. } = self else { return Ok(None) };
        let before = splice.seam.joined();
        let mut out = Vec::with_capacity(events.len());
        for event in events.drain(..) {
            match event {
                StreamEvent::MessageStart { .. } => {}
                StreamEvent::BlockStart { index, block: BlockStart::Text } if splice.merge_into.is_some() => {
                    if let Some(open) = splice.merge_into.take() {
                        splice.map.push((index, open));
                    }
                }
                StreamEvent::BlockStart { index, block } => {
                    if !matches!(block, BlockStart::Text) {
                        splice.settle(&mut out)?;
                    }
                    splice.map.push((index, *next_index));
                    if matches!(block, BlockStart::Text) && splice.text_index.is_none() {
                        splice.text_index = Some(*next_index);
                    }
                    out.push(StreamEvent::BlockStart { index: *next_index, block });
                    *next_index += 1;
                }
                StreamEvent::BlockDelta { index, delta: Delta::Text(text) } if splice.seam.joined().is_none() => {
                    let index = ours(&splice.map, index);
                    splice.text_index.get_or_insert(index);
                    match splice.seam.push(&text) {
                        Step::Hold => {}
                        Step::Release(released) if released.is_empty() => {}
                        Step::Release(released) => {
                            out.push(StreamEvent::BlockDelta { index, delta: Delta::Text(released) })
                        }
                        Step::Refuse => return Err(unproven()),
                    }
                }
                StreamEvent::BlockDelta { index, delta } => {
                    splice.settle(&mut out)?;
                    out.push(StreamEvent::BlockDelta { index: ours(&splice.map, index), delta });
                }
                StreamEvent::BlockStop { index } => {
                    splice.settle(&mut out)?;
                    out.push(StreamEvent::BlockStop { index: ours(&splice.map, index) });
                }
                other => {
                    splice.settle(&mut out)?;
                    out.push(other);
                }
            }
        }
        *events = out;
        let joined = splice.seam.joined();
        Ok(if joined != before { joined } else { None })
    }
}

impl Splice {
    /// Decides a seam still held when its text ends (its block closes,
    /// another begins, the message ends): what it releases goes before
    /// the event that ended it.
    fn settle(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ErrorInfo> {
        if self.seam.joined().is_some() {
            return Ok(());
        }
        match self.seam.finish() {
            Step::Refuse => Err(unproven()),
            Step::Release(released) if !released.is_empty() => {
                if let Some(index) = self.text_index {
                    out.push(StreamEvent::BlockDelta { index, delta: Delta::Text(released) });
                }
                Ok(())
            }
            Step::Release(_) | Step::Hold => Ok(()),
        }
    }
}

/// The continuation filter: carries a stream that breaks mid-answer on.
pub(crate) struct Carry {
    gateway: Arc<Gateway>,
    /// The means, once a lane serves the stream.
    continuation: Option<Box<Continuation>>,
    /// Usage of the parts before the one streaming now.
    before: Usage,
}

impl Carry {
    /// Carrying, for a stream whose pool continues streams.
    pub(crate) fn of(gateway: &Arc<Gateway>, _call: &Call, shape: &Shape) -> Option<Carry> {
        shape.continue_stream.then(|| Carry { gateway: gateway.clone(), continuation: None, before: Usage::default() })
    }

    fn count(&self, outcome: ContinuationOutcome) {
        if let Some(metrics) = self.gateway.metrics() {
            metrics.continuation(outcome);
        }
    }

    /// Asks the next lane to go on (`withheld`: a screen holds back text
    /// that never reached the caller).
    async fn carry_on(&mut self, withheld: bool) -> Option<Switched> {
        let continuation = self.continuation.as_mut()?;
        if !continuation.eligible(withheld) {
            self.count(ContinuationOutcome::NotEligible);
            return None;
        }
        let gateway = self.gateway.clone();
        let switched = continuation.next_lane(&gateway).await;
        self.count(match switched {
            Some(_) => ContinuationOutcome::Recovered,
            None => ContinuationOutcome::Failed,
        });
        switched
    }
}

impl Filter for Carry {
    fn name(&self) -> &'static str {
        "continuation"
    }

    fn on_serving(&mut self, serving: &Serving<'_>) {
        self.continuation = Continuation::of(&self.gateway, serving.call, serving.ir, serving.slots, serving.lane);
    }

    /// A continuation's events fit into the caller's stream after they are
    /// counted (its message start, dropped from the caller's stream, still
    /// brings its usage), and the usage the caller is told is the whole
    /// answer's: every part's, added.
    fn on_events(&mut self, events: &mut Vec<StreamEvent>, cx: &mut ReplyCx<'_>) -> Result<(), ErrorInfo> {
        let Some(continuation) = self.continuation.as_mut() else { return Ok(()) };
        let joined = continuation.splice(events).inspect_err(|_| {
            tracing::warn!(request_id = ?cx.call.request_id, "a continuation did not go on where the answer stopped; the stream ends with an error");
        });
        let outcome = match &joined {
            Err(_) => Some(ContinuationOutcome::Unrelated),
            Ok(Some(Joined::Anchored | Joined::Prefilled)) => Some(ContinuationOutcome::Extended),
            Ok(Some(Joined::Restarted)) => Some(ContinuationOutcome::Restarted),
            Ok(Some(Joined::Unrelated) | None) => None,
        };
        if let Some(outcome) = outcome {
            self.count(outcome);
        }
        joined?;
        if self.before != Usage::default() {
            let total = add_usage(self.before, cx.part);
            for event in events.iter_mut() {
                if let StreamEvent::MessageDelta { usage, .. } = event {
                    *usage = total;
                }
            }
        }
        Ok(())
    }

    fn on_delivered(&mut self, events: &[StreamEvent]) {
        if let Some(continuation) = self.continuation.as_mut() {
            continuation.observe(events);
        }
    }

    fn on_break<'a>(&'a mut self, withheld: bool) -> Option<FilterFuture<'a, Option<Switched>>> {
        Some(Box::pin(self.carry_on(withheld)))
    }

    fn on_restart(&mut self, part: &Usage) {
        self.before = add_usage(self.before, *part);
    }
}

/// `a` and `b` added, count by count.
pub(crate) fn add_usage(a: Usage, b: Usage) -> Usage {
    a.added(&b)
}

/// The caller's index of a continuation's block `theirs`.
fn ours(map: &[(u32, u32)], theirs: u32) -> u32 {
    map.iter().rev().find(|(t, _)| *t == theirs).map_or(theirs, |(_, o)| *o)
}

#[cfg(test)]
mod tests;
