//! The pre-content hold of a stream: after a 2xx head, the frames that
//! carry no content yet (`message_start`, a role chunk, pings) are held
//! while another candidate could still take over, and released the moment
//! the first content arrives (text, thinking or a tool call). A stream that
//! fails before it, ends before it, or misses the first-token deadline
//! (`failover.first_token`, or the lane's `timeouts.first_token`) costs the
//! caller nothing: the request moves on to the next candidate as if the
//! head had been an error, and the lane's breaker hears of it.
//!
//! Nothing is delayed when nothing fails: the frame that brings the first
//! content leaves with those held before it, as soon as it arrives.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use switchyard_codec::{Codec, Framing, StreamDecoder};
use switchyard_health::{normalize, ErrorMap, StatusClass};
use switchyard_ir::{BlockStart, ErrorInfo, StreamEvent};
use switchyard_transport::UpstreamBody;
use tokio::time::Instant;

/// Most bytes held before content: past it the stream is released as it
/// is (a reply that streams a long preamble is not held whole).
pub(crate) const MAX_HELD: usize = 256 << 10;

/// How the hold ended.
pub(crate) enum Held {
    /// Content (or the stream's end, or a reason to stop holding) arrived:
    /// these chunks go to the caller first, then the rest of the body.
    Released(Vec<Bytes>),
    /// The stream failed before content: the next candidate may take over.
    Failed {
        /// The failure's class, for the lane's breaker and the exhaustion answer.
        class: StatusClass,
        /// What happened.
        message: String,
    },
}

/// What bounds the hold.
pub(crate) struct Bounds<'a> {
    /// The first content must arrive by then (the first-token deadline);
    /// without one only `idle` bounds the wait: a reasoning model may think
    /// for minutes before its first event.
    pub(crate) until: Option<Instant>,
    /// The first-token limit `until` came from, for the message.
    pub(crate) first_token: Option<Duration>,
    /// Longest gap between two frames.
    pub(crate) idle: Duration,
    /// The lane's `error_map`: an in-stream error is classed as an error
    /// answer of the lane would be.
    pub(crate) error_map: &'a ErrorMap,
}

/// Reads `body` until its first content, holding what came before.
pub(crate) async fn hold(codec: &dyn Codec, body: &mut UpstreamBody, bounds: &Bounds<'_>) -> Held {
    let mut decoder = codec.stream_decoder();
    let sse = codec.default_framing() == Framing::Sse;
    let mut events = Vec::new();
    let mut held = Vec::new();
    let mut size = 0;
    loop {
        let idle_until = Instant::now() + bounds.idle;
        let until = bounds.until.map_or(idle_until, |deadline| deadline.min(idle_until));
        let frame = match tokio::time::timeout_at(until, body.frame()).await {
            Err(_) => {
                let message = match bounds.first_token {
                    Some(limit) if until != idle_until => format!("no first token within {limit:?}"),
                    _ => format!("upstream stream idle for more than {:?} before its first token", bounds.idle),
                };
                return Held::Failed { class: StatusClass::Timeout, message };
            }
            Ok(None) => {
                // An answer that ends without content (an empty reply) is
                // still an answer; a stream that just stops is not.
                events.clear();
                let _ = decoder.finish(&mut events);
                if let Some(StreamEvent::Error(info)) = events.iter().find(|e| matches!(e, StreamEvent::Error(_))) {
                    return failed_by(info, bounds.error_map);
                }
                if events.iter().any(|e| matches!(e, StreamEvent::MessageStop)) || decoder.answered() {
                    return Held::Released(held);
                }
                let message = "upstream stream ended before its first token".to_owned();
                return Held::Failed { class: StatusClass::Network, message };
            }
            Ok(Some(Err(err))) => {
                let message = format!("upstream stream failed before its first token: {err}");
                return Held::Failed { class: StatusClass::Network, message };
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else { continue };
        if data.is_empty() {
            continue;
        }
        size += data.len();
        let verdict = decode_until_content(&mut *decoder, &data, sse, &mut events);
        held.push(data);
        match verdict {
            Some(Verdict::Content) => return Held::Released(held),
            Some(Verdict::Error(info)) => return failed_by(&info, bounds.error_map),
            None if size > MAX_HELD => return Held::Released(held),
            None => {}
        }
    }
}

/// The upstream's own error before content, classed by the disposition
/// an error answer of the lane gets (`normalize` with its `error_map`).
fn failed_by(info: &ErrorInfo, error_map: &ErrorMap) -> Held {
    let class = normalize(info.status, info.kind, None, info.code.as_deref(), error_map);
    Held::Failed { class, message: format!("upstream stream error before its first token: {}", info.message) }
}

/// What the events of the hold so far say.
enum Verdict {
    /// Content arrived (or the frame could not be read: the relay's to
    /// judge, as it would have been without the hold).
    Content,
    /// The upstream's own error, before content.
    Error(ErrorInfo),
}

/// Feeds `data` to the decoder, one SSE event at a time when `sse`, and
/// stops at the first content: the hold decodes the stream's head, never
/// the rest of a chunk that already carries the answer.
fn decode_until_content(
    decoder: &mut dyn StreamDecoder,
    data: &[u8],
    sse: bool,
    events: &mut Vec<StreamEvent>,
) -> Option<Verdict> {
    let ends = sse.then(|| memchr::memmem::find_iter(data, b"\n\n").map(|at| at + 2)).into_iter().flatten();
    let mut start = 0;
    for end in ends.chain(std::iter::once(data.len())) {
        if end <= start {
            continue;
        }
        events.clear();
        if decoder.feed(&data[start..end], events).is_err() {
            return Some(Verdict::Content);
        }
        start = end;
        for event in events.iter() {
            match event {
                StreamEvent::Error(info) => return Some(Verdict::Error(info.clone())),
                event if is_content(event) => return Some(Verdict::Content),
                _ => {}
            }
        }
    }
    None
}

/// Whether `event` is the first thing a caller reads as the answer: a
/// delta of text, thinking or tool arguments, a tool call's start, or the
/// end of the reply.
fn is_content(event: &StreamEvent) -> bool {
    match event {
        StreamEvent::BlockDelta { .. } | StreamEvent::MessageStop => true,
        StreamEvent::BlockStart { block, .. } => !matches!(block, BlockStart::Text | BlockStart::Thinking),
        StreamEvent::MessageDelta { stop_reason, .. } => stop_reason.is_some(),
        _ => false,
    }
}
