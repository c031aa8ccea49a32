//! The raw route's two bodies, both streamed as they come. The caller's
//! ([`Bounded`]) goes upstream under `server.body_limit` and
//! `server.body_read_timeout`, saying why it stopped when it trips
//! ([`Tripped`]). The upstream's ([`Metered`]) reaches the caller frame by
//! frame under the provider's `stream_idle` and `request` timeouts, while a
//! [`Meter`] reads the usage it states; when it ends (whole, broken, timed
//! out, or its caller gone) the request settles once, at that usage.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use switchyard_codec::tap::UsageTap;
use switchyard_codec::{Codec, Framing, StreamDecoder};
use switchyard_engine::settle::{Estimated, Record};
use switchyard_ir::{ErrorInfo, ErrorKind, StreamEvent, Usage};
use switchyard_state::Gateway;
use switchyard_transport::{BoxError, UpstreamBody};
use tokio::time::Sleep;

/// The most of a whole JSON reply kept to read its usage from: a reply
/// that states usage is small; past this, the reply passes unmetered.
pub(super) const MAX_METERED: usize = 1 << 20;

/// Why a caller's body stopped going upstream.
const TOO_LARGE: u8 = 1;
const TOO_SLOW: u8 = 2;

/// What a caller's streamed body tripped on, read after the send failed.
#[derive(Debug, Clone, Default)]
pub(super) struct Tripped(Arc<AtomicU8>);

impl Tripped {
    /// The caller's error, when its body tripped a bound.
    pub(super) fn why(&self) -> Option<ErrorInfo> {
        match self.0.load(Ordering::Relaxed) {
            TOO_LARGE => Some(ErrorInfo::new(ErrorKind::RequestTooLarge, "request body is larger than the limit")),
            TOO_SLOW => Some(
                ErrorInfo::new(ErrorKind::Timeout, "the request body did not arrive within the read timeout")
                    .with_status(408),
            ),
            _ => None,
        }
    }
}

/// A caller's body as it goes upstream: at most `limit` bytes, all within
/// `timeout` of the first poll.
pub(super) struct Bounded {
    inner: axum::body::Body,
    left: usize,
    deadline: Pin<Box<Sleep>>,
    tripped: Tripped,
}

impl Bounded {
    pub(super) fn new(inner: axum::body::Body, limit: usize, timeout: Duration) -> (Bounded, Tripped) {
        let tripped = Tripped::default();
        let deadline = Box::pin(tokio::time::sleep(timeout));
        (Bounded { inner, left: limit, deadline, tripped: tripped.clone() }, tripped)
    }

    fn trip(&self, why: u8, message: &'static str) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.tripped.0.store(why, Ordering::Relaxed);
        Poll::Ready(Some(Err(message.into())))
    }
}

impl Body for Bounded {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let size = frame.data_ref().map_or(0, Bytes::len);
                if size > this.left {
                    return this.trip(TOO_LARGE, "the request body is larger than the limit");
                }
                this.left -= size;
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(err))) => Poll::Ready(Some(Err(Box::new(err)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => this.trip(TOO_SLOW, "the request body did not arrive in time"),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// How a reply's usage is read as it passes.
pub(super) enum Meter {
    /// Not at all (an error, a HEAD, a body that is neither JSON nor a stream).
    None,
    /// A stream: only the events that can carry usage are decoded.
    Stream { tap: UsageTap, events: Vec<StreamEvent>, usage: Usage, model: Option<String> },
    /// A whole JSON reply: a copy, read when it ends.
    Json { copy: Vec<u8>, whole: bool },
}

impl Meter {
    /// The meter for a 2xx reply of `codec`'s protocol with `headers`: an
    /// event stream (SSE, or Bedrock's AWS event stream) is tapped, JSON
    /// copied, anything else passes unread.
    pub(super) fn for_reply(codec: &dyn Codec, headers: &HeaderMap) -> Meter {
        let content_type = headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .trim_start()
            .to_ascii_lowercase();
        let framing = if content_type.starts_with("text/event-stream") {
            Some(Framing::Sse)
        } else if content_type.starts_with("application/vnd.amazon.eventstream") {
            Some(Framing::EventStream)
        } else {
            None
        };
        match framing {
            Some(framing) => Meter::Stream {
                tap: UsageTap::new(codec.stream_decoder(), framing),
                events: Vec::new(),
                usage: Usage::default(),
                model: None,
            },
            None if content_type.starts_with("application/json") || content_type.contains("+json") => {
                Meter::Json { copy: Vec::new(), whole: true }
            }
            None => Meter::None,
        }
    }

    fn feed(&mut self, chunk: &[u8]) {
        match self {
            Meter::None => {}
            Meter::Stream { tap, events, usage, model } => {
                // A stream the protocol's decoder cannot read is not metered
                // (it still reaches the caller as it came).
                if tap.feed(chunk, events).is_err() {
                    *self = Meter::None;
                    return;
                }
                fold(events, usage, model);
            }
            Meter::Json { copy, whole } => {
                if *whole && copy.len() + chunk.len() <= MAX_METERED {
                    copy.extend_from_slice(chunk);
                } else {
                    *whole = false;
                    *copy = Vec::new();
                }
            }
        }
    }

    /// What the reply stated: its usage and the model it named.
    fn finish(&mut self, codec: &dyn Codec, ended: bool) -> (Option<Usage>, Option<String>) {
        match std::mem::replace(self, Meter::None) {
            Meter::None => (None, None),
            Meter::Stream { mut tap, mut events, mut usage, mut model } => {
                if ended && tap.finish(&mut events).is_ok() {
                    fold(&mut events, &mut usage, &mut model);
                }
                (Some(usage).filter(Usage::reported), model)
            }
            Meter::Json { copy, whole } => {
                if !whole || !ended {
                    return (None, None);
                }
                let usage = codec.read_usage(&copy).filter(Usage::reported);
                let model = switchyard_codec::scan::top_level_value(&copy, "model")
                    .ok()
                    .flatten()
                    .and_then(|raw| serde_json::from_slice::<String>(raw).ok());
                (usage, model)
            }
        }
    }
}

/// The usage and model the tapped events state (usage cumulative, as a
/// stream reports it), the events then let go.
fn fold(events: &mut Vec<StreamEvent>, usage: &mut Usage, model: &mut Option<String>) {
    for event in events.drain(..) {
        match event {
            StreamEvent::MessageStart { usage: stated, model: named, .. } => {
                usage.merge(&stated);
                if model.is_none() && !named.is_empty() {
                    *model = Some(named);
                }
            }
            StreamEvent::MessageDelta { usage: stated, .. } => usage.merge(&stated),
            _ => {}
        }
    }
}

/// What settles a raw-route request when its reply ends.
pub(super) struct Settle {
    pub(super) gateway: Arc<Gateway>,
    /// The provider (its index in the config).
    pub(super) provider: usize,
    pub(super) record: Box<Record>,
}

impl Settle {
    /// The price of the model a reply named: the card of that model's lane
    /// on this provider, else the route's own (`provider/*`).
    fn card_of(&self, model: Option<&str>) -> Option<switchyard_governance::card::Card> {
        let model = model?;
        self.gateway
            .lanes
            .iter()
            .find(|lane| lane.provider_index == self.provider && !lane.any_wire_model && *lane.wire_model == *model)
            .and_then(|lane| lane.card.clone())
    }
}

/// The upstream's reply on its way to the caller, metered; the request
/// settles once, when it ends or is dropped.
pub(super) struct Metered {
    inner: UpstreamBody,
    meter: Meter,
    settle: Option<Settle>,
    /// The status the caller got.
    status: u16,
    started: bool,
    idle: Duration,
    idle_timer: Pin<Box<Sleep>>,
    deadline: Pin<Box<Sleep>>,
}

impl Metered {
    pub(super) fn new(
        settle: Settle,
        inner: UpstreamBody,
        meter: Meter,
        status: u16,
        timeouts: &switchyard_config::Timeouts,
    ) -> Metered {
        Metered {
            inner,
            meter,
            settle: Some(settle),
            status,
            started: false,
            idle: timeouts.stream_idle,
            idle_timer: Box::pin(tokio::time::sleep(timeouts.stream_idle)),
            deadline: Box::pin(tokio::time::sleep(timeouts.request)),
        }
    }

    /// Settles at what the reply stated (`ended`: it came whole), else
    /// marked estimated for `why`, with `status` on its row.
    fn settle(&mut self, status: u16, ended: bool, why: Estimated) {
        let Some(mut settle) = self.settle.take() else { return };
        let codec = settle.gateway.codec(settle.record_protocol());
        let (usage, model) = self.meter.finish(codec, ended);
        match usage {
            Some(usage) => settle.record.record_usage(usage, None),
            None => settle.record.record_usage(Usage::default(), Some(why)),
        }
        let card = settle.card_of(model.as_deref());
        settle.record.raw_model(model, card);
        settle.record.finish_detached(status);
    }
}

impl Settle {
    fn record_protocol(&self) -> switchyard_ir::Protocol {
        self.gateway.config.providers[self.provider].protocol
    }
}

impl Body for Metered {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if this.settle.is_none() {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.meter.feed(data);
                    if !this.started {
                        this.started = true;
                        if let Some(settle) = this.settle.as_mut() {
                            settle.record.first_byte();
                        }
                    }
                }
                let next = tokio::time::Instant::now() + this.idle;
                this.idle_timer.as_mut().reset(next);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(err))) => {
                this.settle(502, false, Estimated::AnswerBroken);
                Poll::Ready(Some(Err(err)))
            }
            Poll::Ready(None) => {
                this.settle(this.status, true, Estimated::NoUsage);
                Poll::Ready(None)
            }
            Poll::Pending => {
                let late = this.deadline.as_mut().poll(cx).is_ready() || this.idle_timer.as_mut().poll(cx).is_ready();
                if !late {
                    return Poll::Pending;
                }
                this.settle(504, false, Estimated::AnswerBroken);
                Poll::Ready(Some(Err("the upstream's reply stalled past the provider's timeouts".into())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.settle.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        if self.settle.is_some() {
            // Never polled to its end: a reply without a body the server
            // did not read (a HEAD, a 204), or a caller that left.
            let ended = self.inner.is_end_stream();
            let status = if ended { self.status } else { 499 };
            let why = if ended { Estimated::NoUsage } else { Estimated::CallerLeft };
            self.settle(status, ended, why);
        }
    }
}
