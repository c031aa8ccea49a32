//! Relaying a stream from the upstream to the caller: decode → filters →
//! encode → tally. On a same-protocol hop the bytes pass as they came (a
//! usage tap reads along, and only the filters' byte hooks see them);
//! otherwise each chunk is decoded, its events pass the request's filters
//! (innermost first), and the caller's encoder writes them. The first
//! frame leaves at once; frames that arrived together leave as one write.
//! A stream that fails ends with the caller protocol's own in-stream
//! error and counts against the lane, unless a filter carries it on
//! (`filter::continuation`). The relay owns the request's exchange for the
//! stream's life and settles its record once: when the stream ends, or
//! (its caller gone) when it is dropped.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;
use http::Response;
use http_body_util::BodyExt;
use switchyard_codec::tap::UsageTap;
use switchyard_codec::{DecodeError, StreamDecoder, StreamEncoder};
use switchyard_health::LaneEffect;
use switchyard_ir::{ErrorInfo, ErrorKind, Protocol, StreamEvent, Usage};
use switchyard_state::Gateway;
use switchyard_transport::{BoxError, UpstreamBody};
use tokio::time::Instant;

mod leave;
mod tally;

pub(crate) use tally::Tally;

use crate::env::Env;
use crate::exchange::Exchange;
use crate::filter::{add_usage, Ended, ReplyCx, Switched};
use crate::identity::log_done;
use crate::lane_health::Health;
use crate::render::ResponseBody;
use crate::reply::Guards;
use crate::settle::Estimated;

/// What a relay is built from: the upstream's stream and the lane that
/// sends it.
pub(crate) struct Relaying {
    pub(crate) upstream: UpstreamBody,
    /// Chunks read before the first content (the pre-content hold), sent
    /// before anything else.
    pub(crate) held: Vec<Bytes>,
    /// The bytes pass as they came (same protocol, framing and no filter
    /// reading events).
    pub(crate) same: bool,
    /// The lane's protocol.
    pub(crate) protocol: Protocol,
    pub(crate) health: Health,
    pub(crate) guards: Guards,
    pub(crate) lane: Arc<str>,
    pub(crate) wire_model: Arc<str>,
    pub(crate) idle: Duration,
    pub(crate) started: Instant,
}

/// An SSE data line: each one is about a token, for a hang-up's estimate.
static DATA_LINE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"data:"));

/// How long a stream whose answer is complete (its finish reason arrived)
/// waits for the terminator before it is finished without it: a backend
/// that never sends `[DONE]` must not hold the caller for `stream_idle` and
/// then turn a whole answer into an error.
pub(super) const TERMINATOR_GRACE: Duration = Duration::from_secs(2);

/// The same wait once the answer's usage has come too: nothing but the
/// terminator is left to arrive, and a well-behaved upstream sends it at
/// once.
const TERMINATOR_GRACE_AFTER_USAGE: Duration = Duration::from_millis(250);

/// Largest caller chunk built from upstream frames that arrived together.
const COALESCE_LIMIT: usize = 64 << 10;

/// An upstream ending seen while coalescing, handled on the next pull.
enum Pending {
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

/// Where the stream's frames come from now: the serving lane's body, its
/// decoder, and what the lane holds while it streams.
struct Source {
    upstream: UpstreamBody,
    held: Vec<Bytes>,
    decoder: Box<dyn StreamDecoder>,
    health: Health,
    guards: Guards,
    lane: Arc<str>,
    wire_model: Arc<str>,
    idle: Duration,
    /// What the upstream did after the frames coalesced into the last chunk.
    pending: Option<Pending>,
}

/// Where the relay stands.
#[derive(Default, Clone, Copy)]
struct Progress {
    /// The first caller chunk went out (it is never held back to coalesce).
    first_sent: bool,
    /// No more caller bytes will come.
    done: bool,
    /// The record was settled.
    settled: bool,
}

/// Pulls upstream frames and yields caller frames.
pub(crate) struct StreamRelay {
    gateway: Arc<Gateway>,
    x: Exchange,
    source: Source,
    /// The caller's encoder (`None`: a passthrough).
    encoder: Option<Box<dyn StreamEncoder>>,
    tally: Tally,
    events: Vec<StreamEvent>,
    progress: Progress,
    started: Instant,
}

/// The caller's response for a stream: `head` with the relay as its body,
/// which owns the exchange from here on.
pub(crate) fn start(
    gateway: Arc<Gateway>,
    mut x: Exchange,
    mut head: Response<()>,
    relaying: Relaying,
) -> Response<ResponseBody> {
    x.filters.head(head.headers_mut());
    let Relaying { upstream, held, same, protocol, health, guards, lane, wire_model, idle, started } = relaying;
    let operation = x.call.operation;
    let codec = gateway.codec_for(operation, protocol);
    let (decoder, encoder): (Box<dyn StreamDecoder>, _) = if same {
        (Box::new(UsageTap::new(codec.stream_decoder(), x.call.framing)), None)
    } else {
        let caller = gateway.codec_for(operation, x.call.ingress);
        (codec.stream_decoder(), Some(caller.stream_encoder_for(x.call.framing, &x.call.body)))
    };
    x.release_request();
    let relay = StreamRelay {
        gateway,
        x,
        source: Source { upstream, held, decoder, health, guards, lane, wire_model, idle, pending: None },
        encoder,
        tally: Tally::default(),
        events: Vec::new(),
        progress: Progress::default(),
        started,
    };
    let stream = futures_util::stream::unfold(Relayed(Some(relay)), |mut relayed| async move {
        let chunk = relayed.0.as_mut()?.next_chunk().await?;
        Some((Ok::<_, BoxError>(http_body::Frame::data(chunk)), relayed))
    });
    head.map(|()| http_body_util::StreamBody::new(stream).boxed_unsync())
}

/// The relay as the response body holds it: dropped before the stream
/// ended (its caller went away), it is abandoned ([`StreamRelay::abandon`]).
struct Relayed(Option<StreamRelay>);

impl Drop for Relayed {
    fn drop(&mut self) {
        if let Some(relay) = self.0.take() {
            relay.abandon();
        }
    }
}

impl StreamRelay {
    /// The caller's next chunk. Once the answer is whole (or the stream
    /// failed) the record settles, after the filters' end hooks (the last
    /// chunk's bytes are kept first, and the signed calls a stream
    /// announced are kept before its last chunk leaves).
    async fn next_chunk(&mut self) -> Option<Bytes> {
        let chunk = self.pull().await;
        if let Some(chunk) = &chunk {
            self.x.filters.sent(chunk);
        }
        if !self.progress.settled && (self.progress.done || self.tally.finished) {
            self.settle().await;
        }
        chunk
    }

    async fn pull(&mut self) -> Option<Bytes> {
        loop {
            if self.progress.done {
                return None;
            }
            // An operator killed the request's agent run: the stream ends
            // now with the caller's terminal error (checked per frame; a
            // request on no run reads one empty option).
            if let Some(killed) = self.x.record.run().filter(|run| run.is_killed()).map(|run| run.killed_error()) {
                return Some(self.end_with(killed));
            }
            if !self.source.held.is_empty() {
                let mut out = Out::default();
                for data in std::mem::take(&mut self.source.held) {
                    if let Err(message) = self.absorb(data, &mut out) {
                        match self.fail_over(message).await {
                            Some(bytes) => return Some(bytes),
                            None => continue,
                        }
                    }
                }
                self.progress.first_sent = true;
                match out.into_bytes() {
                    Some(bytes) => return Some(bytes),
                    None => continue,
                }
            }
            let first = match self.next_frame().await {
                Ok(frame) => frame,
                // The upstream ended (`None`: as it should, if its answer
                // is whole) or failed: finish, or go on elsewhere.
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
            let Ok(data) = first.into_data() else { continue };
            let mut out = Out::default();
            if let Err(message) = self.absorb(data, &mut out) {
                match self.fail_over(message).await {
                    Some(bytes) => return Some(bytes),
                    None => continue,
                }
            }
            // The first frame leaves at once: time to first token is what a
            // caller feels. Later frames that arrived together leave together.
            if std::mem::replace(&mut self.progress.first_sent, true) {
                self.coalesce(&mut out).await;
            }
            if let Some(bytes) = out.into_bytes() {
                return Some(bytes);
            }
        }
    }

    /// The upstream's next frame, within the idle timeout (shortened once
    /// the answer is complete and only its terminator is missing). `Err`:
    /// it ended (`None`) or failed.
    async fn next_frame(&mut self) -> Result<http_body::Frame<Bytes>, Option<String>> {
        match self.source.pending.take() {
            Some(Pending::End) => return Err(None),
            Some(Pending::Failed(message)) => return Err(Some(message)),
            None => {}
        }
        // A stream that is still producing is governed by the idle timeout
        // alone: the whole-request timeout bounds replies read whole, never
        // a live stream.
        let answered = self.answered();
        let usage_seen = self.tally.usage.output_tokens > 0 || self.source.decoder.usage_seen();
        let idle = match (answered, usage_seen) {
            (true, true) => self.source.idle.min(TERMINATOR_GRACE_AFTER_USAGE),
            (true, false) => self.source.idle.min(TERMINATOR_GRACE),
            (false, _) => self.source.idle,
        };
        match tokio::time::timeout(idle, self.source.upstream.frame()).await {
            Err(_) if answered => {
                tracing::debug!(request_id = ?self.x.call.request_id, lane = %self.source.lane, ?idle, "no terminator after a complete answer: finishing the stream");
                Err(None)
            }
            Err(_) => Err(Some(format!("upstream stream idle for more than {idle:?}"))),
            Ok(None) => Err(None),
            Ok(Some(Err(err))) => Err(Some(format!("upstream stream failed: {err}"))),
            Ok(Some(Ok(frame))) => Ok(frame),
        }
    }

    /// Frames that arrived together leave together: what is already here is
    /// drained without waiting, so a burst is one write, not one syscall
    /// (and one wake-up of the reader) per frame.
    async fn coalesce(&mut self, out: &mut Out) {
        let mut yielded = 0;
        while !self.progress.done && out.len() < COALESCE_LIMIT {
            match self.source.upstream.frame().now_or_never() {
                // The connection task hands body chunks over one at a time:
                // give it a few turns to pass on what it has buffered before
                // writing (one is not enough: the hand-off takes two
                // scheduler rounds). A stream that is really waiting for
                // tokens pays three yields, not a syscall per frame;
                // measured, 67 frames of a 64-delta reply leave as one write
                // instead of 67.
                None if yielded < 3 => {
                    yielded += 1;
                    tokio::task::yield_now().await;
                }
                None => break,
                Some(None) => {
                    self.source.pending = Some(Pending::End);
                    break;
                }
                Some(Some(Err(err))) => {
                    self.source.pending = Some(Pending::Failed(format!("upstream stream failed: {err}")));
                    break;
                }
                Some(Some(Ok(frame))) => {
                    yielded = 0;
                    if let Ok(data) = frame.into_data() {
                        if let Err(message) = self.absorb(data, out) {
                            self.source.pending = Some(Pending::Failed(message));
                            break;
                        }
                    }
                }
            }
        }
    }

    /// Taps one upstream chunk and adds the caller's bytes for it to `out`:
    /// the chunk itself on a passthrough (through the filters' byte hooks),
    /// its events through the filters and re-encoded otherwise.
    fn absorb(&mut self, data: Bytes, out: &mut Out) -> Result<(), String> {
        if data.is_empty() || self.progress.done {
            return Ok(());
        }
        self.events.clear();
        if let Err(err) = self.source.decoder.feed(&data, &mut self.events) {
            // A broken framing (an event past the size cap) ends even a
            // passthrough: what follows cannot be metered, and a caller's
            // SDK could not read it either. An odd event the tap could not
            // parse does not: the bytes still pass as they came.
            if self.encoder.is_some() || matches!(err, DecodeError::Frame(_)) {
                return Err(format!("upstream stream could not be read: {err}"));
            }
            tracing::debug!(error = %err, "usage tap could not read a passthrough stream");
        }
        if !self.progress.first_sent {
            self.x.record.first_byte();
        }
        for event in &self.events {
            self.tally.push(event);
        }
        if self.encoder.is_none() {
            if self.x.record.bills() {
                self.tally.delivered_events += DATA_LINE.find_iter(&data).count() as u64;
            }
            let data = self.x.filters.bytes(data);
            if !data.is_empty() {
                out.passthrough.push(data);
            }
            return Ok(());
        }
        self.filter_events();
        if let Some(encoder) = self.encoder.as_mut() {
            for event in &self.events {
                encoder.encode(event, &mut out.encoded);
            }
            if self.tally.ended() {
                encoder.finish(&mut out.encoded);
                self.progress.done = true;
            }
        }
        Ok(())
    }

    /// The decoded events through the filters; a refusal ends the stream
    /// with the caller's in-stream error after what was released.
    fn filter_events(&mut self) {
        let env = Env::of(&self.gateway);
        let Exchange { call, record, filters, .. } = &mut self.x;
        let mut cx = ReplyCx { env, call, record, part: self.tally.usage };
        if let Err(info) = filters.events(&mut self.events, &mut cx) {
            self.events.clear();
            self.events.push(StreamEvent::Error(info));
            self.tally.failed = true;
        }
    }

    /// The answer is complete and only the stream's terminator is missing.
    fn answered(&self) -> bool {
        self.tally.stop_reason.is_some() || self.source.decoder.answered()
    }

    /// The upstream closed, or went quiet after a complete answer. A stream
    /// that answered in full but lost its terminator is finished (the
    /// caller's protocol's terminator added to a passthrough), billed and
    /// not charged to the lane; anything shorter is a failure.
    fn end(&mut self) -> Result<Option<Bytes>, String> {
        self.progress.done = true;
        let terminated = self.tally.ended();
        let answered = self.answered();
        self.events.clear();
        let _ = self.source.decoder.finish(&mut self.events);
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
        let mut out = Vec::new();
        if self.encoder.is_some() {
            self.filter_events();
        }
        if let Some(encoder) = self.encoder.as_mut() {
            for event in &self.events {
                encoder.encode(event, &mut out);
            }
            encoder.finish(&mut out);
        } else {
            out.extend_from_slice(&self.x.filters.finish_bytes());
            if !terminated {
                // The upstream's terminator never came: the caller still gets one.
                let codec = self.gateway.codec_for(self.x.call.operation, self.x.call.ingress);
                out.extend_from_slice(codec.stream_terminator(self.x.call.framing).unwrap_or_default());
            }
        }
        Ok((!out.is_empty()).then(|| Bytes::from(out)))
    }

    /// The upstream failed mid-way: another lane goes on when a filter
    /// carries the stream on (`None`: pull on), else the caller gets its
    /// protocol's in-stream error. Boxed: a broken stream is rare, and its
    /// future (a continuation's whole attempt) inline would more than
    /// double what every open stream holds.
    async fn fail_over(&mut self, message: String) -> Option<Bytes> {
        Box::pin(self.failed(message)).await
    }

    async fn failed(&mut self, message: String) -> Option<Bytes> {
        self.source.health.apply(LaneEffect::Failure, &message, None);
        let Some(switched) = self.x.filters.carry_on().await else {
            tracing::warn!(request_id = ?self.x.call.request_id, lane = %self.source.lane, %message, "stream failed mid-way");
            return Some(self.end_with_error(message));
        };
        tracing::warn!(request_id = ?self.x.call.request_id, lane = %self.source.lane, %message, "stream broke mid-answer; continued elsewhere");
        self.switch_to(switched);
        None
    }

    /// Another lane goes on: the part before the break is billed at its
    /// own lane's price (its usage, or the estimate of it); the caller's
    /// stream reports every part's usage added.
    fn switch_to(&mut self, switched: Switched) {
        let mut part = self.tally.usage;
        let estimated = (part.output_tokens == 0).then_some(Estimated::AnswerBroken);
        if estimated.is_some() {
            part.output_tokens = self.tally.deltas;
        }
        if part.input_tokens == 0 {
            part.input_tokens = self.x.record.input_estimate();
        }
        self.tally.before = add_usage(self.tally.before, part);
        // The ledger's attempts show both: the lane that broke, the one that went on.
        let record = &mut self.x.record;
        record.last_attempt_failed("cut_mid_answer");
        record.continued_on(switched.slot, switched.lane_index, switched.wire_model.clone(), part, estimated);
        record.attempted(switched.lane_index, 200, None, switched.took);
        self.x.filters.restart(&part);
        self.tally.usage = Usage::default();
        self.tally.deltas = 0;
        self.tally.stop_reason = None;
        let source = &mut self.source;
        source.upstream = switched.upstream;
        source.decoder = switched.decoder;
        source.health = switched.health;
        source.guards.0 = switched.permit;
        source.lane = switched.lane;
        source.wire_model = switched.wire_model;
        source.pending = None;
        self.progress.done = false;
    }

    /// The caller's in-stream error, its lane already told.
    fn end_with_error(&mut self, message: String) -> Bytes {
        self.end_with(ErrorInfo::new(ErrorKind::Internal, message).with_status(502))
    }

    /// The stream ends with `info` as the caller's protocol's terminal error.
    fn end_with(&mut self, info: ErrorInfo) -> Bytes {
        self.progress.done = true;
        self.tally.failed = true;
        let mut out = Vec::new();
        let call = &self.x.call;
        let codec = self.gateway.codec_for(call.operation, call.ingress);
        let encoder = self.encoder.get_or_insert_with(|| codec.stream_encoder(call.framing));
        encoder.encode(&StreamEvent::Error(info), &mut out);
        encoder.finish(&mut out);
        Bytes::from(out)
    }

    /// The stream ended (whole, or failed): the filters' end hooks run, the
    /// record settles (its usage, or an estimate of what was delivered),
    /// then what an end hook awaits (a Gemini lane's signed calls kept)
    /// completes before the last chunk leaves.
    async fn settle(&mut self) {
        self.progress.settled = true;
        let whole = self.tally.finished && !self.tally.failed;
        let usage = add_usage(self.tally.before, self.tally.usage);
        log_done(&self.x.call.request_id, &self.source.lane, &usage, self.started, true);
        let env = Env::of(&self.gateway);
        let Exchange { call, record, filters, .. } = &mut self.x;
        let mut cx = ReplyCx { env, call, record, part: self.tally.usage };
        let awaited = filters.end(if whole { Ended::Whole } else { Ended::Damaged }, &mut cx);
        let record = &mut *cx.record;
        if whole {
            // The parts before a continuation are on the record already; a
            // stream whose upstream reported no usage is billed what it
            // delivered, marked so.
            let (usage, estimated) = match self.tally.usage.reported() {
                true => (self.tally.usage, None),
                false => self.tally.delivered(record.input_estimate(), Estimated::NoUsage),
            };
            record.record_usage(usage, estimated);
            if let Some(reason) = self.tally.stop_reason {
                record.stop_reason(reason.as_str());
            }
            record.finish_detached(200);
        } else {
            let (usage, estimated) = self.tally.delivered(record.input_estimate(), Estimated::AnswerBroken);
            record.record_usage(usage, estimated);
            record.finish_detached(502);
        }
        for hook in awaited {
            hook.await;
        }
    }
}
