//! A caller's socket as a session uses it. Messages in are bounded: one
//! larger than `duplex.max_message` is named to the session (which answers
//! with its protocol's error and goes on; the transport closes only past
//! twice that), a socket with no message either way for
//! `duplex.idle_timeout` is idle, one older than `duplex.max_duration` has
//! expired, and the process stopping tells it to finish. Messages out go
//! through one writer task, so a session's turns write side by side; a
//! caller that stops reading is closed after `server.write_timeout`, and
//! its session ends with it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use switchyard_state::Gateway;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// Close codes (RFC 6455 §7.4.1).
pub(crate) mod close {
    /// The session ended normally (its life, or idle).
    pub(crate) const NORMAL: u16 = 1000;
    /// The gateway stops.
    pub(crate) const GOING_AWAY: u16 = 1001;
    /// A message past the transport's hard limit.
    pub(crate) const TOO_BIG: u16 = 1009;
    /// The session cannot go on (its upstream ended).
    pub(crate) const INTERNAL: u16 = 1011;
}

/// Messages queued for a caller before its session waits.
const OUTBOX: usize = 64;

/// The transport's own limit is this many times `duplex.max_message`:
/// between the two, a message is read and refused; past it, the socket
/// closes (1009).
const HARD_LIMIT_FACTOR: usize = 2;

/// Bytes of queued messages the writer gathers before it writes them
/// without waiting for the queue to empty.
const WRITE_BATCH: usize = 16 << 10;

/// An upgrade with the transport's limits and small buffers: an idle
/// socket holds little (the write buffer grows only while messages leave,
/// to about [`WRITE_BATCH`]).
pub(crate) fn configure(upgrade: WebSocketUpgrade, gateway: &Gateway) -> WebSocketUpgrade {
    let most = usize::try_from(gateway.config.duplex.max_message).unwrap_or(usize::MAX);
    let hard = most.saturating_mul(HARD_LIMIT_FACTOR);
    upgrade.max_message_size(hard).max_frame_size(hard).read_buffer_size(4096).write_buffer_size(WRITE_BATCH)
}

/// What a session reads next.
pub(crate) enum Incoming {
    /// A text message.
    Text(Utf8Bytes),
    /// A binary message (Realtime and Responses send none; a Live client
    /// may send its JSON so).
    Binary(axum::body::Bytes),
    /// A message larger than `duplex.max_message` (its size), not kept.
    TooLarge(usize),
    /// A frame or message past the transport's hard limit: the socket
    /// closes with 1009.
    FarTooLarge,
    /// The caller closed, the connection failed, or the writer gave up on
    /// a caller that stopped reading.
    Closed,
    /// No message either way for `duplex.idle_timeout`.
    Idle,
    /// The socket has lived `duplex.max_duration`.
    Expired,
    /// The process stops: finish and close.
    Stopping,
}

/// A caller's socket: the reading half, and its outbox.
pub(crate) struct Socket {
    inbound: SplitStream<WebSocket>,
    out: Outbox,
    started: Instant,
    expires: Instant,
    idle: Duration,
    stopping: watch::Receiver<bool>,
    told_to_stop: bool,
    max_message: usize,
}

impl Socket {
    /// A session's socket on `gateway`.
    pub(crate) fn new(gateway: &Gateway, socket: WebSocket) -> Socket {
        let bounds = &gateway.config.duplex;
        let (sink, inbound) = socket.split();
        let started = Instant::now();
        let activity = Arc::new(AtomicU64::new(0));
        let (tx, rx) = mpsc::channel(OUTBOX);
        switchyard_tasks::work(write(sink, rx, gateway.config.server.write_timeout));
        Socket {
            inbound,
            out: Outbox { tx, activity, started },
            started,
            expires: started + bounds.max_duration,
            idle: bounds.idle_timeout,
            stopping: gateway.sockets.watch(),
            told_to_stop: false,
            max_message: usize::try_from(bounds.max_message).unwrap_or(usize::MAX),
        }
    }

    /// The writer's handle.
    pub(crate) fn outbox(&self) -> Outbox {
        self.out.clone()
    }

    /// The next message, or why there is none. `busy`: a generation is
    /// open, so the socket is not idle while it waits. Cancel-safe.
    pub(crate) async fn next(&mut self, busy: bool) -> Incoming {
        if !self.told_to_stop && *self.stopping.borrow_and_update() {
            self.told_to_stop = true;
            return Incoming::Stopping;
        }
        loop {
            let last = Duration::from_millis(self.out.activity.load(Ordering::Relaxed));
            let idle_at = self.started + last + self.idle;
            tokio::select! {
                message = self.inbound.next() => {
                    let message = match message {
                        Some(Ok(message)) => message,
                        Some(Err(err)) if far_too_large(&err) => return Incoming::FarTooLarge,
                        Some(Err(_)) | None => return Incoming::Closed,
                    };
                    match message {
                        Message::Text(text) => {
                            self.out.touch();
                            if text.len() > self.max_message {
                                return Incoming::TooLarge(text.len());
                            }
                            return Incoming::Text(text);
                        }
                        Message::Binary(bytes) => {
                            self.out.touch();
                            if bytes.len() > self.max_message {
                                return Incoming::TooLarge(bytes.len());
                            }
                            return Incoming::Binary(bytes);
                        }
                        // Answered by the transport; not activity.
                        Message::Ping(_) | Message::Pong(_) => {}
                        Message::Close(_) => return Incoming::Closed,
                    }
                }
                // The writer gave up (a caller that stopped reading).
                () = self.out.tx.closed() => return Incoming::Closed,
                () = tokio::time::sleep_until(idle_at), if !busy => {
                    let now = Duration::from_millis(self.out.activity.load(Ordering::Relaxed));
                    if now == last {
                        return Incoming::Idle;
                    }
                }
                () = tokio::time::sleep_until(self.expires) => return Incoming::Expired,
                changed = self.stopping.changed(), if !self.told_to_stop => {
                    if changed.is_err() || *self.stopping.borrow_and_update() {
                        self.told_to_stop = true;
                        return Incoming::Stopping;
                    }
                }
            }
        }
    }
}

/// Whether a read failed on the transport's size limit.
fn far_too_large(err: &axum::Error) -> bool {
    std::error::Error::source(err)
        .and_then(|inner| inner.downcast_ref::<tungstenite::Error>())
        .is_some_and(|err| matches!(err, tungstenite::Error::Capacity(_)))
}
/// A socket's writer: messages queue here and leave in order.
#[derive(Clone)]
pub(crate) struct Outbox {
    tx: mpsc::Sender<Message>,
    /// Milliseconds from the socket's start to its latest message either way.
    activity: Arc<AtomicU64>,
    started: Instant,
}

impl Outbox {
    fn touch(&self) {
        let at = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.activity.store(at, Ordering::Relaxed);
    }

    /// Sends `text`; false when the caller is gone.
    pub(crate) async fn text(&self, text: impl Into<Utf8Bytes>) -> bool {
        self.touch();
        self.tx.send(Message::Text(text.into())).await.is_ok()
    }

    /// Closes the socket with `code` and `reason` (after what is queued).
    pub(crate) async fn close(&self, code: u16, reason: &str) {
        // A close frame's reason is at most 123 bytes.
        let mut end = reason.len().min(123);
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        let frame = CloseFrame { code, reason: Utf8Bytes::from(&reason[..end]) };
        let _ = self.tx.send(Message::Close(Some(frame))).await;
    }
}

/// Writes queued messages in order, each burst (at most [`OUTBOX`]
/// messages) within `write_timeout`; stops at a close frame, a failed
/// write, or when every outbox is gone.
///
/// The messages already queued go out with the first in one flush: a
/// turn's events come in bursts (the engine hands its stream over a read
/// of the upstream at a time), and a flush of its own for each was a
/// system call per event where the same turn over HTTP takes one per
/// burst (half the socket turn's CPU, bench/results/wave4-duplex-2026-12-08.md).
/// A burst is bounded, so a caller reading steadily through a long stream
/// is never taken for one that stopped.
async fn write(mut sink: SplitSink<WebSocket, Message>, mut queue: mpsc::Receiver<Message>, write_timeout: Duration) {
    while let Some(first) = queue.recv().await {
        let burst = async {
            let mut next = Some(first);
            let mut written = 0;
            while let Some(message) = next.take() {
                let closing = matches!(message, Message::Close(_));
                sink.feed(message).await?;
                if closing {
                    sink.flush().await?;
                    return Ok(false);
                }
                written += 1;
                if written < OUTBOX {
                    next = queue.try_recv().ok();
                }
            }
            sink.flush().await?;
            Ok::<bool, axum::Error>(true)
        };
        match tokio::time::timeout(write_timeout, burst).await {
            Ok(Ok(true)) => {}
            _ => break,
        }
    }
    let _ = tokio::time::timeout(write_timeout, sink.close()).await;
}
