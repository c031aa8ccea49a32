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
use switchyard_codec::Codec;
use switchyard_health::StatusClass;
use switchyard_ir::{BlockStart, ErrorKind, StreamEvent};
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
pub(crate) struct Bounds {
    /// The first content must arrive by then (the first-token deadline);
    /// without one only `idle` bounds the wait: a reasoning model may think
    /// for minutes before its first event.
    pub(crate) until: Option<Instant>,
    /// The first-token limit `until` came from, for the message.
    pub(crate) first_token: Option<Duration>,
    /// Longest gap between two frames.
    pub(crate) idle: Duration,
}

/// Reads `body` until its first content, holding what came before.
pub(crate) async fn hold(codec: &dyn Codec, body: &mut UpstreamBody, bounds: &Bounds) -> Held {
    let mut decoder = codec.stream_decoder();
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
                let _ = decoder.finish(&mut events);
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
        events.clear();
        let decoded = decoder.feed(&data, &mut events);
        size += data.len();
        held.push(data);
        // A frame the decoder cannot read is the relay's to judge, as it
        // would have been without the hold.
        if decoded.is_err() || size > MAX_HELD {
            return Held::Released(held);
        }
        for event in &events {
            match event {
                StreamEvent::Error(info) => {
                    let class = match info.kind {
                        ErrorKind::RateLimit => StatusClass::RateLimited,
                        ErrorKind::Overloaded => StatusClass::Overloaded,
                        _ => StatusClass::ServerError,
                    };
                    let message = format!("upstream stream error before its first token: {}", info.message);
                    return Held::Failed { class, message };
                }
                event if is_content(event) => return Held::Released(held),
                _ => {}
            }
        }
    }
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
