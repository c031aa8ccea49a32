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

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use switchyard_codec::continuation::{self, Mechanism};
use switchyard_codec::StreamDecoder;
use switchyard_ir::{BlockStart, Delta, Protocol, Request, StreamEvent};
use switchyard_state::call::{Call, Slot};
use switchyard_state::Gateway;
use switchyard_transport::UpstreamBody;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use crate::candidate::Candidate;
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
    mechanism: Mechanism,
    /// The text the caller had when it began.
    so_far: String,
    /// The caller's text block its first text block continues.
    merge_into: Option<u32>,
    /// Its block indexes → the caller's.
    map: Vec<(u32, u32)>,
    /// The seam was cut (on its first text).
    seamed: bool,
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
        if !call.continue_stream || left == 0 {
            return None;
        }
        let request = match read {
            Some(request) => request.clone(),
            None => gateway.codec(call.ingress).read_request(&call.body).ok()?,
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
        let (mut request, mechanism) = continuation::request(&self.request, &self.text, lane.protocol, prefill);
        lane.wire_model.as_ref().clone_into(&mut request.model);
        let capabilities = crate::translation::capabilities(gateway, candidate);
        // Fitted to the lane's model as any try's request is.
        let encoded = crate::translation::write_for_model(gateway.codec(lane.protocol), &mut request, &capabilities);
        let out = Outgoing {
            wire_model: &lane.wire_model,
            stream: true,
            request_id: &self.request_id,
            caller_key: self.caller_key.as_deref(),
            traceparent: None,
            operation: switchyard_ir::Operation::Chat,
            count_tokens: false,
            path: None,
            content_type: None,
            caller: Some((&self.headers, self.ingress)),
        };
        let asked = Instant::now();
        let sent = tokio::time::timeout_at(self.deadline, send_to_lane(gateway, lane, out, Bytes::from(encoded.body)));
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
                    mechanism,
                    so_far: self.text.clone(),
                    merge_into: self.open_text,
                    map: Vec::new(),
                    seamed: false,
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
    /// are counted or encoded); nothing while no continuation runs.
    pub(crate) fn splice(&mut self, events: &mut Vec<StreamEvent>) {
        let Continuation { splice: Some(splice), next_index, .. } = self else { return };
        events.retain_mut(|event| match event {
            StreamEvent::MessageStart { .. } => false,
            StreamEvent::BlockStart { index, block } => {
                if let (BlockStart::Text, Some(open)) = (&*block, splice.merge_into) {
                    splice.merge_into = None;
                    splice.map.push((*index, open));
                    return false;
                }
                splice.map.push((*index, *next_index));
                *index = *next_index;
                *next_index += 1;
                true
            }
            StreamEvent::BlockDelta { index, delta } => {
                *index = ours(&splice.map, *index);
                match delta {
                    Delta::Text(text) if !splice.seamed => {
                        splice.seamed = true;
                        let kept = continuation::seam(&splice.so_far, text, splice.mechanism);
                        if kept.len() != text.len() {
                            *text = kept.to_owned();
                        }
                        !text.is_empty()
                    }
                    _ => true,
                }
            }
            StreamEvent::BlockStop { index } => {
                *index = ours(&splice.map, *index);
                true
            }
            _ => true,
        });
    }
}

/// The caller's index of a continuation's block `theirs`.
fn ours(map: &[(u32, u32)], theirs: u32) -> u32 {
    map.iter().rev().find(|(t, _)| *t == theirs).map_or(theirs, |(_, o)| *o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_ir::BlockStart;

    fn continuation() -> Continuation {
        Continuation {
            request: Request::default(),
            slots: Vec::new(),
            served: Vec::new(),
            left: 1,
            timeout: std::time::Duration::from_secs(1),
            deadline: Instant::now(),
            ingress: Protocol::OpenAi,
            headers: HeaderMap::new(),
            request_id: HeaderValue::from_static("r"),
            caller_key: None,
            text: String::new(),
            text_only: true,
            open_text: None,
            next_index: 0,
            splice: None,
        }
    }

    fn text(index: u32, text: &str) -> StreamEvent {
        StreamEvent::BlockDelta { index, delta: Delta::Text(text.into()) }
    }

    #[test]
    fn only_a_stream_of_text_so_far_may_be_continued() {
        let mut plain = continuation();
        assert!(!plain.eligible(false), "nothing delivered yet");
        assert!(plain.eligible(true), "nothing delivered, but a screen held text back: answered afresh");
        plain.observe(&[StreamEvent::BlockStart { index: 0, block: BlockStart::Text }, text(0, "Hello")]);
        assert!(plain.eligible(false));
        for disqualifier in [
            BlockStart::ToolUse { id: "c".into(), name: "f".into(), signature: None },
            BlockStart::Thinking,
            BlockStart::RedactedThinking { data: "x".into() },
        ] {
            let mut stream = continuation();
            stream.observe(&[StreamEvent::BlockStart { index: 0, block: BlockStart::Text }, text(0, "Hi")]);
            stream.observe(&[StreamEvent::BlockStart { index: 1, block: disqualifier.clone() }]);
            assert!(!stream.eligible(false), "{disqualifier:?}");
        }
        plain.left = 0;
        assert!(!plain.eligible(false), "its continuations are spent");
    }

    #[test]
    fn a_continuations_blocks_join_the_callers_stream() {
        let mut stream = continuation();
        stream.observe(&[StreamEvent::BlockStart { index: 0, block: BlockStart::Text }, text(0, "Hello ")]);
        stream.splice = Some(Splice {
            mechanism: Mechanism::Prefill,
            so_far: "Hello ".into(),
            merge_into: stream.open_text,
            map: Vec::new(),
            seamed: false,
        });
        let mut events = vec![
            StreamEvent::MessageStart { id: "m".into(), model: "x".into(), created: None, usage: Default::default() },
            StreamEvent::BlockStart { index: 0, block: BlockStart::Text },
            text(0, " world"),
            StreamEvent::BlockStop { index: 0 },
            StreamEvent::BlockStart { index: 1, block: BlockStart::Text },
            text(1, "!"),
        ];
        stream.splice(&mut events);
        assert_eq!(
            events,
            [
                text(0, "world"),
                StreamEvent::BlockStop { index: 0 },
                StreamEvent::BlockStart { index: 1, block: BlockStart::Text },
                text(1, "!"),
            ]
        );
    }
}
