//! Relaying a stream from the upstream to the caller: verbatim on a
//! same-protocol hop (a usage tap reads along), decoded and re-encoded
//! otherwise. The first frame leaves at once; frames that arrived together
//! leave as one write. A stream that fails ends with the caller protocol's
//! own in-stream error and counts against the lane.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;
use http::HeaderValue;
use http_body_util::BodyExt;
use switchyard_codec::hide::EventFilter;
use switchyard_codec::{DecodeError, Framing, StreamDecoder, StreamEncoder};
use switchyard_health::LaneEffect;
use switchyard_ir::{BlockStart, ErrorInfo, ErrorKind, Protocol, StopReason, StreamEvent, Usage};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use crate::continuation::Continuation;
use crate::identity::{fill_identity, log_done};
use crate::lane_health::{Health, InFlight};
use crate::settle::Record;
use switchyard_state::Gateway;
use switchyard_telemetry::metrics::ContinuationOutcome;
use switchyard_transport::UpstreamBody;

/// What a relayed stream must know of its events: usage for metering, and
/// whether it ended (an `Accumulator` would also copy every delta's text).
#[derive(Default)]
pub(crate) struct Tally {
    usage: Usage,
    stop_reason: Option<StopReason>,
    finished: bool,
    failed: bool,
    /// Content deltas decoded (translated streams), for an estimate of what
    /// was delivered when the upstream never reports usage.
    deltas: u64,
}

impl Tally {
    fn push(&mut self, event: &StreamEvent) {
        match event {
            StreamEvent::MessageStart { usage, .. } => self.usage.merge(usage),
            StreamEvent::MessageDelta { usage, stop_reason, .. } => {
                self.usage.merge(usage);
                if stop_reason.is_some() {
                    self.stop_reason = *stop_reason;
                }
            }
            StreamEvent::MessageStop => self.finished = true,
            StreamEvent::Error(_) => self.failed = true,
            StreamEvent::BlockDelta { .. } => self.deltas += 1,
            StreamEvent::BlockStart { .. } | StreamEvent::BlockStop { .. } => {}
        }
    }

    fn ended(&self) -> bool {
        self.finished || self.failed
    }
}

/// `a` and `b` added, count by count.
fn add_usage(a: Usage, b: Usage) -> Usage {
    Usage {
        input_tokens: a.input_tokens.saturating_add(b.input_tokens),
        output_tokens: a.output_tokens.saturating_add(b.output_tokens),
        cache_read_tokens: a.cache_read_tokens.saturating_add(b.cache_read_tokens),
        cache_write_tokens: a.cache_write_tokens.saturating_add(b.cache_write_tokens),
        reasoning_tokens: a.reasoning_tokens.saturating_add(b.reasoning_tokens),
    }
}

/// An SSE data line: each one is about a token, for a hang-up's estimate.
static DATA_LINE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"data:"));

/// How long a stream whose answer is complete (its finish reason arrived)
/// waits for the terminator before it is finished without it: a backend
/// that never sends `[DONE]` must not hold the caller for `stream_idle` and
/// then turn a whole answer into an error.
const TERMINATOR_GRACE: Duration = Duration::from_secs(2);

/// The same wait once the answer's usage has come too: nothing but the
/// terminator is left to arrive, and a well-behaved upstream sends it at
/// once.
const TERMINATOR_GRACE_AFTER_USAGE: Duration = Duration::from_millis(250);

/// Largest caller chunk built from upstream frames that arrived together.
const COALESCE_LIMIT: usize = 64 << 10;

/// An upstream ending seen while coalescing, handled on the next pull.
pub(crate) enum Pending {
    End,
    Failed(String),
}

/// The caller's bytes for one pull: upstream chunks (passthrough, kept
/// without a copy when there is one) or re-encoded frames.
#[derive(Default)]
struct Out {
    passthrough: Vec<Bytes>,
    encoded: Vec<u8>,
}

impl Out {
    fn push_passthrough(&mut self, data: Bytes) {
        self.passthrough.push(data);
    }

    fn len(&self) -> usize {
        self.encoded.len() + self.passthrough.iter().map(Bytes::len).sum::<usize>()
    }

    fn into_bytes(self) -> Option<Bytes> {
        match self.passthrough.len() {
            0 => (!self.encoded.is_empty()).then(|| Bytes::from(self.encoded)),
            1 => self.passthrough.into_iter().next(),
            _ => Some(Bytes::from(self.passthrough.concat())),
        }
    }
}

/// Pulls upstream frames and yields caller frames: verbatim on a
/// same-protocol hop (the decoder only taps usage), re-encoded otherwise.
pub(crate) struct StreamRelay {
    pub(crate) gateway: Arc<Gateway>,
    pub(crate) upstream: UpstreamBody,
    /// Chunks read before the first content (the pre-content hold), sent
    /// before anything else.
    pub(crate) held: Vec<Bytes>,
    pub(crate) decoder: Box<dyn StreamDecoder>,
    pub(crate) encoder: Option<Box<dyn StreamEncoder>>,
    /// Takes out of a passthrough what was only asked for metering.
    pub(crate) hide: Option<EventFilter>,
    pub(crate) ingress: Protocol,
    pub(crate) framing: Framing,
    /// A Gemini lane's signed calls, kept for the caller before the
    /// stream's last chunk leaves (translated streams from Gemini only).
    pub(crate) signed: Option<SignedCalls>,
    pub(crate) tally: Tally,
    /// The first caller chunk went out (it is never held back to coalesce).
    pub(crate) first_sent: bool,
    pub(crate) events: Vec<StreamEvent>,
    pub(crate) idle: Duration,
    pub(crate) done: bool,
    pub(crate) health: Health,
    pub(crate) request_id: HeaderValue,
    pub(crate) lane: Arc<str>,
    pub(crate) wire_model: Arc<str>,
    pub(crate) started: Instant,
    /// What the upstream did after the frames coalesced into the last chunk.
    pub(crate) pending: Option<Pending>,
    /// The request's record, settled when the stream ends or is dropped.
    pub(crate) record: Option<Box<Record>>,
    /// SSE events passed through verbatim (each is about one token).
    pub(crate) delivered_events: u64,
    /// The means to go on elsewhere when the stream breaks mid-answer
    /// (`failover.stream_failure: continue`; translated streams only).
    pub(crate) continuation: Option<Box<Continuation>>,
    /// Usage of the parts before a continuation.
    pub(crate) usage_before: Usage,
    /// The reply's guardrails, when any look at replies.
    pub(crate) guard: Option<crate::guard::StreamGuard>,
    /// The stream's events as the caller gets them, kept for the response
    /// cache (stored only when the stream ends whole).
    pub(crate) caching: Option<Caching>,
    /// The frames as the caller got them, for its group's retention (at
    /// most [`KEPT_STREAM_BYTES`]); the record settles once the last is in.
    pub(crate) kept_frames: Option<Vec<u8>>,
    /// The record of a finished stream whose last frames are still to be kept.
    pub(crate) settling: Option<Box<Record>>,
    pub(crate) _guards: (Option<OwnedSemaphorePermit>, InFlight),
}

/// The most of a stream's frames its group's retention keeps.
pub(crate) const KEPT_STREAM_BYTES: usize = 1 << 20;

/// A stream kept for the response cache.
pub(crate) struct Caching {
    pub(crate) key: switchyard_state::response_cache::CacheKeys,
    pub(crate) raw: Vec<u8>,
    pub(crate) pool: usize,
    pub(crate) lane: usize,
    pub(crate) events: Vec<StreamEvent>,
}

/// The signed tool calls a stream from a Gemini lane announced, for the
/// caller's key.
pub(crate) struct SignedCalls {
    owner: Option<Arc<str>>,
    calls: Vec<(String, String)>,
}

impl SignedCalls {
    pub(crate) fn new(owner: Option<Arc<str>>) -> SignedCalls {
        SignedCalls { owner, calls: Vec::new() }
    }
}

impl StreamRelay {
    /// The caller's next chunk. The last one waits until the signed calls
    /// the stream announced are kept, so the caller's next turn finds them.
    pub(crate) async fn next_chunk(&mut self) -> Option<Bytes> {
        let chunk = self.pull().await;
        if let Some(frames) = self.kept_frames.as_mut() {
            if let Some(chunk) = chunk.as_ref().filter(|c| frames.len() + c.len() <= KEPT_STREAM_BYTES) {
                frames.extend_from_slice(chunk);
            }
            if let Some(mut record) = self.settling.take() {
                record.retain_stream(Bytes::from(std::mem::take(frames)));
                record.finish_detached(200);
            }
        }
        if self.done {
            if let Some(signed) = self.signed.take().filter(|signed| !signed.calls.is_empty()) {
                let calls = signed.calls.iter().map(|(id, signature)| (id.as_str(), signature.as_str()));
                // Boxed: only a Gemini lane's translated stream gets here.
                Box::pin(crate::signatures::keep_for(&self.gateway, signed.owner.as_deref(), calls)).await;
            }
        }
        chunk
    }

    async fn pull(&mut self) -> Option<Bytes> {
        loop {
            if self.done {
                return None;
            }
            if !self.held.is_empty() {
                let mut out = Out::default();
                for data in std::mem::take(&mut self.held) {
                    if let Err(message) = self.absorb(data, &mut out) {
                        match self.fail_over(message).await {
                            Some(bytes) => return Some(bytes),
                            None => continue,
                        }
                    }
                }
                self.first_sent = true;
                match out.into_bytes() {
                    Some(bytes) => return Some(bytes),
                    None => continue,
                }
            }
            let ended = match self.pending.take() {
                Some(Pending::End) => Err(None),
                Some(Pending::Failed(message)) => Err(Some(message)),
                None => {
                    // A stream that is still producing is governed by the idle
                    // timeout alone: the whole-request timeout bounds replies
                    // read whole, never a live stream.
                    let answered = self.answered();
                    let usage_seen = self.tally.usage.output_tokens > 0 || self.decoder.usage_seen();
                    let idle = match (answered, usage_seen) {
                        (true, true) => self.idle.min(TERMINATOR_GRACE_AFTER_USAGE),
                        (true, false) => self.idle.min(TERMINATOR_GRACE),
                        (false, _) => self.idle,
                    };
                    match tokio::time::timeout(idle, self.upstream.frame()).await {
                        Err(_) if answered => {
                            tracing::debug!(request_id = ?self.request_id, lane = %self.lane, ?idle, "no terminator after a complete answer: finishing the stream");
                            Err(None)
                        }
                        Err(_) => Err(Some(format!("upstream stream idle for more than {idle:?}"))),
                        Ok(None) => Err(None),
                        Ok(Some(Err(err))) => Err(Some(format!("upstream stream failed: {err}"))),
                        Ok(Some(Ok(frame))) => Ok(frame),
                    }
                }
            };
            // The upstream ended (`None`: as it should, if its answer is
            // whole) or failed: finish, or go on elsewhere.
            let first = match ended {
                Ok(frame) => frame,
                Err(failure) => {
                    let message = match failure {
                        Some(message) => message,
                        None => match self.end() {
                            Ok(out) => return out,
                            Err(message) => message,
                        },
                    };
                    match self.fail_over(message).await {
                        Some(bytes) => return Some(bytes),
                        None => continue,
                    }
                }
            };
            let Ok(data) = first.into_data() else {
                continue;
            };
            let mut out = Out::default();
            if let Err(message) = self.absorb(data, &mut out) {
                match self.fail_over(message).await {
                    Some(bytes) => return Some(bytes),
                    None => continue,
                }
            }
            // Frames that arrived together leave together: drain what is
            // already here without waiting, so a burst is one write, not one
            // syscall (and one wake-up of the reader) per frame.
            let mut yielded = 0;
            // The first frame leaves at once: time to first token is what a
            // caller feels. Later frames that arrived together leave together.
            let coalesce = self.first_sent;
            self.first_sent = true;
            while coalesce && !self.done && out.len() < COALESCE_LIMIT {
                match self.upstream.frame().now_or_never() {
                    // The connection task hands body chunks over one at a
                    // time: give it a few turns to pass on what it has
                    // buffered before writing (one is not enough: the hand-off
                    // takes two scheduler rounds). A stream that is really
                    // waiting for tokens pays three yields, not a syscall per
                    // frame; measured, 67 frames of a 64-delta reply leave as
                    // one write instead of 67.
                    None if yielded < 3 => {
                        yielded += 1;
                        tokio::task::yield_now().await;
                    }
                    None => break,
                    Some(None) => {
                        self.pending = Some(Pending::End);
                        break;
                    }
                    Some(Some(Err(err))) => {
                        self.pending = Some(Pending::Failed(format!("upstream stream failed: {err}")));
                        break;
                    }
                    Some(Some(Ok(frame))) => {
                        yielded = 0;
                        if let Ok(data) = frame.into_data() {
                            if let Err(message) = self.absorb(data, &mut out) {
                                self.pending = Some(Pending::Failed(message));
                                break;
                            }
                        }
                    }
                }
            }
            if let Some(bytes) = out.into_bytes() {
                return Some(bytes);
            }
        }
    }

    /// Taps one upstream chunk and adds the caller's bytes for it to `out`:
    /// the chunk itself on a passthrough, its re-encoded events otherwise.
    fn absorb(&mut self, data: Bytes, out: &mut Out) -> Result<(), String> {
        if data.is_empty() || self.done {
            return Ok(());
        }
        self.events.clear();
        if let Err(err) = self.decoder.feed(&data, &mut self.events) {
            // A broken framing (an event past the size cap) ends even a
            // passthrough: what follows cannot be metered, and a caller's
            // SDK could not read it either. An odd event the tap could not
            // parse does not: the bytes still pass as they came.
            if self.encoder.is_some() || matches!(err, DecodeError::Frame(_)) {
                return Err(format!("upstream stream could not be read: {err}"));
            }
            tracing::debug!(error = %err, "usage tap could not read a passthrough stream");
        }
        if !self.first_sent {
            if let Some(record) = self.record.as_mut() {
                record.first_byte();
            }
        }
        for event in &self.events {
            self.tally.push(event);
        }
        // A continuation's events fit into the caller's stream after they
        // are counted (its message start, dropped from the caller's
        // stream, still brings its usage), and the usage the caller is told
        // is the whole answer's: every part's, added.
        if let Some(continuation) = self.continuation.as_mut() {
            continuation.splice(&mut self.events);
            if self.usage_before != Usage::default() {
                let total = add_usage(self.usage_before, self.tally.usage);
                for event in &mut self.events {
                    if let StreamEvent::MessageDelta { usage, .. } = event {
                        *usage = total;
                    }
                }
            }
        }
        self.guard_events();
        for event in &mut self.events {
            if let (
                StreamEvent::BlockStart { block: BlockStart::ToolUse { id, signature: Some(signature), .. }, .. },
                Some(signed),
            ) = (&*event, self.signed.as_mut())
            {
                signed.calls.push((id.clone(), signature.clone()));
            }
            if let (StreamEvent::MessageStart { id, model, created, .. }, true) = (event, self.encoder.is_some()) {
                fill_identity(id, model, created, &self.request_id, &self.wire_model);
            }
        }
        let Some(encoder) = self.encoder.as_mut() else {
            if self.record.as_deref().is_some_and(Record::bills) {
                self.delivered_events += DATA_LINE.find_iter(&data).count() as u64;
            }
            if self.tally.finished {
                self.log_end();
            }
            let data = match self.hide.as_mut() {
                Some(hide) => hide.filter(data),
                None => data,
            };
            if !data.is_empty() {
                out.push_passthrough(data);
            }
            return Ok(());
        };
        for event in &self.events {
            encoder.encode(event, &mut out.encoded);
        }
        if let Some(continuation) = self.continuation.as_mut() {
            continuation.observe(&self.events);
        }
        if self.tally.ended() {
            encoder.finish(&mut out.encoded);
            self.done = true;
            self.log_end();
        }
        Ok(())
    }

    /// Screens the events about to be encoded by the reply's guardrails
    /// (held text is released at its block's end); a blocking rule ends
    /// the stream with the caller's refusal after what was released.
    fn guard_events(&mut self) {
        if let Some(guard) = self.guard.as_mut() {
            if let Err(info) = guard.screen(&mut self.events, self.record.as_deref_mut()) {
                tracing::info!(request_id = ?self.request_id, lane = %self.lane, "a guardrail refused the reply mid-stream");
                self.events.clear();
                self.events.push(StreamEvent::Error(info));
                self.tally.failed = true;
            }
        }
        if let Some(caching) = self.caching.as_mut() {
            caching.events.extend(self.events.iter().cloned());
        }
    }

    /// The answer is complete and only the stream's terminator is missing.
    fn answered(&self) -> bool {
        self.tally.stop_reason.is_some() || self.decoder.answered()
    }

    /// The upstream closed, or went quiet after a complete answer. A stream
    /// that answered in full but lost its terminator is finished (the
    /// caller's protocol's terminator added to a passthrough), billed and
    /// not charged to the lane; anything shorter is a failure.
    fn end(&mut self) -> Result<Option<Bytes>, String> {
        self.done = true;
        let terminated = self.tally.ended();
        let answered = self.answered();
        self.events.clear();
        let _ = self.decoder.finish(&mut self.events);
        for event in &self.events {
            self.tally.push(event);
        }
        if !self.tally.ended() && answered {
            self.events.push(StreamEvent::MessageStop);
            self.tally.finished = true;
        }
        if !self.tally.ended() {
            return Err("upstream stream ended before its last event".to_owned());
        }
        self.guard_events();
        let mut out = Vec::new();
        if let Some(encoder) = self.encoder.as_mut() {
            for event in &self.events {
                encoder.encode(event, &mut out);
            }
            encoder.finish(&mut out);
        } else {
            if let Some(hide) = self.hide.as_mut() {
                out.extend_from_slice(&hide.finish());
            }
            if !terminated {
                // The upstream's terminator never came: the caller still gets one.
                out.extend_from_slice(
                    self.gateway.codec(self.ingress).stream_terminator(self.framing).unwrap_or_default(),
                );
            }
        }
        if !terminated {
            self.log_end();
        }
        Ok((!out.is_empty()).then(|| Bytes::from(out)))
    }

    /// The upstream failed mid-way: another lane goes on when the pool
    /// continues streams and this one may be (`None`: pull on), else the
    /// caller gets its protocol's in-stream error.
    /// [`Self::failed`], boxed: a broken stream is rare, and its future
    /// (a continuation's whole attempt) inline would more than double what
    /// every open stream holds.
    async fn fail_over(&mut self, message: String) -> Option<Bytes> {
        Box::pin(self.failed(message)).await
    }

    async fn failed(&mut self, message: String) -> Option<Bytes> {
        let Some(continuation) = self.continuation.as_mut() else {
            return Some(self.fail(message));
        };
        // A screened stream may have held back all its text: to the caller
        // it has none yet, and the next lane answers afresh.
        let withheld = self.guard.as_ref().is_some_and(crate::guard::StreamGuard::holds);
        if !continuation.eligible(withheld) {
            self.count_continuation(ContinuationOutcome::NotEligible);
            return Some(self.fail(message));
        }
        tracing::warn!(request_id = ?self.request_id, lane = %self.lane, %message, "stream broke mid-answer; continuing elsewhere");
        self.health.apply(LaneEffect::Failure, &message, None);
        let Some(switched) = continuation.next_lane(&self.gateway).await else {
            self.count_continuation(ContinuationOutcome::Failed);
            return Some(self.end_with_error(message));
        };
        // What the part before the break cost: its usage, or the estimate
        // of it. It is billed at its own lane's price; the caller's stream
        // reports every part's usage added.
        let mut part = self.tally.usage;
        let estimated = part.output_tokens == 0;
        if estimated {
            part.output_tokens = self.tally.deltas;
        }
        if part.input_tokens == 0 {
            part.input_tokens = self.record.as_ref().map_or(0, |record| record.input_estimate());
        }
        self.usage_before = add_usage(self.usage_before, part);
        // The ledger's attempts show both: the lane that broke, the one that went on.
        if let Some(record) = self.record.as_mut() {
            record.last_attempt_failed("cut_mid_answer");
            record.continued_on(switched.slot, switched.lane_index, switched.wire_model.clone(), part, estimated);
            record.attempted(switched.lane_index, 200, None, switched.took);
        }
        if let Some(guard) = self.guard.as_mut() {
            guard.drop_held();
        }
        self.tally.usage = Usage::default();
        self.tally.deltas = 0;
        self.tally.stop_reason = None;
        self.upstream = switched.upstream;
        self.decoder = switched.decoder;
        self.health = switched.health;
        self._guards.0 = switched.permit;
        self.lane = switched.lane;
        self.pending = None;
        self.done = false;
        self.count_continuation(ContinuationOutcome::Recovered);
        None
    }

    fn count_continuation(&self, outcome: ContinuationOutcome) {
        if let Some(metrics) = self.gateway.metrics() {
            metrics.continuation(outcome);
        }
    }

    /// Usage of the whole answer: the parts before a continuation and the
    /// one streaming now.
    fn usage(&self) -> Usage {
        add_usage(self.usage_before, self.tally.usage)
    }

    /// Ends the caller's stream with its protocol's in-stream error, and
    /// counts the failure against the lane.
    fn fail(&mut self, message: String) -> Bytes {
        tracing::warn!(request_id = ?self.request_id, lane = %self.lane, %message, "stream failed mid-way");
        self.health.apply(LaneEffect::Failure, &message, None);
        self.end_with_error(message)
    }

    /// The caller's in-stream error, its lane already told.
    fn end_with_error(&mut self, message: String) -> Bytes {
        self.done = true;
        self.tally.failed = true;
        let info = ErrorInfo::new(ErrorKind::Internal, message).with_status(502);
        let mut out = Vec::new();
        let encoder = self.encoder.get_or_insert_with(|| self.gateway.codec(self.ingress).stream_encoder(self.framing));
        encoder.encode(&StreamEvent::Error(info), &mut out);
        encoder.finish(&mut out);
        Bytes::from(out)
    }

    fn log_end(&mut self) {
        // A stream that ended whole is kept for the response cache; a cut
        // or refused one never is.
        if let (Some(caching), true) = (self.caching.take(), self.tally.finished && !self.tally.failed) {
            crate::response_cache::store_stream(
                &self.gateway,
                &caching.key,
                &caching.raw,
                caching.pool,
                caching.lane,
                caching.events,
            );
        }
        let usage = self.usage();
        log_done(&self.request_id, &self.lane, &usage, self.started, true);
        if let Some(mut record) = self.record.take() {
            // The parts before a continuation are on the record already.
            record.record_usage(self.tally.usage, false);
            if let Some(reason) = self.tally.stop_reason {
                record.stop_reason(reason.as_str());
            }
            if self.kept_frames.is_some() {
                // Settled with the last frames, once they are out.
                self.settling = Some(record);
            } else {
                record.finish_detached(200);
            }
        }
    }
}

impl Drop for StreamRelay {
    /// A stream that did not end (the caller hung up, or it failed) is billed
    /// for what was delivered: the usage seen so far, or else an estimate
    /// from the prompt and the deltas that reached the caller.
    fn drop(&mut self) {
        let frames = self.kept_frames.take().map(Bytes::from);
        if let Some(mut record) = self.settling.take() {
            record.retain_stream(frames.unwrap_or_default());
            record.finish_detached(200);
            return;
        }
        let Some(mut record) = self.record.take() else { return };
        if let Some(frames) = frames {
            record.retain_stream(frames);
        }
        let mut usage = self.tally.usage;
        let estimated = usage.output_tokens == 0;
        if estimated {
            usage.output_tokens = self.tally.deltas.max(self.delivered_events);
            if usage.input_tokens == 0 {
                usage.input_tokens = record.input_estimate();
            }
        }
        let status = if self.tally.failed { 502 } else { 499 };
        record.record_usage(usage, estimated);
        record.finish_detached(status);
    }
}
