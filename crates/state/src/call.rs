//! A caller's request as an ingress framed it, and where a candidate sits:
//! the values every stage of the request path reads. A leaf module, so
//! routing and the engine both depend on it and not on each other.

use std::ops::Range;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use switchyard_codec::Framing;
use switchyard_ir::Protocol;

use crate::governance::Caller;

/// A caller's request as an ingress framed it.
pub struct Call {
    /// The caller's protocol.
    pub ingress: Protocol,
    /// What the caller asks for (the route it came to decides).
    pub operation: switchyard_ir::Operation,
    /// The caller asks only for the token count of a chat request (a
    /// chat pool answers it, never billed).
    pub count_tokens: bool,
    /// The caller's route, for an operation sent to the same path upstream
    /// (OpenAI's own endpoints: `/v1/audio/translations`).
    pub route: Option<&'static str>,
    /// The model or pool the caller named.
    pub name: String,
    /// The wire model an ad-hoc caller named (`/{provider}/{model}/v1/messages`),
    /// sent to a provider's any-model ad-hoc lane.
    pub wire_model: Option<String>,
    /// The request body as received.
    pub body: Bytes,
    /// Byte range of the body's `model` value, when the body carries one.
    pub model_span: Option<Range<usize>>,
    /// Where the members admission reads are (`Codec::metered_heads`),
    /// found by the ingress scan when governance is on.
    pub metered: switchyard_codec::scan::Found,
    /// The caller wants a stream.
    pub stream: bool,
    /// The stream framing the caller reads.
    pub framing: Framing,
    /// `x-request-id` to echo.
    pub request_id: HeaderValue,
    /// The caller's request headers (session ids, passthrough credentials).
    pub headers: HeaderMap,
    /// The session id echoed as `x-switchyard-session`, when the caller sent one.
    pub session: Option<HeaderValue>,
    /// Who is calling, when governance authenticated a key.
    pub caller: Option<Caller>,
    /// The request is metered and its stream would not carry usage if
    /// passed through, and its protocol cannot ask for usage and hide it
    /// again: translate it even to a lane of the same protocol.
    pub meter_stream: bool,
    /// The pool continues a stream that breaks after its first content on
    /// another lane (`failover.stream_failure: continue`): the stream is
    /// decoded and re-encoded even on a same-protocol hop, so the caller's
    /// encoder can carry the next lane's events on.
    pub continue_stream: bool,
    /// The request is metered and its stream would not carry usage: a
    /// same-protocol lane is asked for usage and the caller's stream has it
    /// taken out again (`Codec::request_stream_usage`).
    pub hide_usage: bool,
    /// The guardrails its reply passes, when any look at replies (a stream
    /// is then decoded and re-encoded, to be screened as it comes).
    pub guard: Option<std::sync::Arc<Guarding>>,
    /// Where it stands with its pool's response cache.
    pub cache: CacheState,
    /// On a cache miss, what its raw key was made of (kept with the answer).
    pub cache_material: Vec<u8>,
}

/// A call and its pool's response cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheState {
    /// The pool caches nothing (or the request is not cacheable).
    #[default]
    Off,
    /// The caller asked not to use it (`Cache-Control: no-cache`,
    /// `no-store`), or the request was refused or unreadable before its
    /// lookup.
    Bypass,
    /// Answered from it.
    Hit,
    /// Not found: the answer is stored under this key when it ends whole
    /// (a stream is then decoded, to be kept event by event).
    Miss(crate::response_cache::CacheKeys),
}

/// A request's reply guardrails: the screen, and the placeholders its
/// request was given (a reply masks on from them).
#[derive(Debug)]
pub struct Guarding {
    /// The pool's or the caller's group's screen.
    pub screen: std::sync::Arc<switchyard_guard::Screen>,
    /// The request's placeholders so far.
    pub masks: std::sync::Mutex<switchyard_guard::Masks>,
}

impl Call {
    /// What the request is, as the ledger and the logs name it: its
    /// operation, or `count_tokens`.
    pub fn task(&self) -> &'static str {
        if self.count_tokens {
            "count_tokens"
        } else {
            self.operation.as_str()
        }
    }

    /// True when the request body may go to a lane of `protocol` as it came
    /// (same protocol, and nothing forces a translation of the request).
    pub fn sends_as_came_to(&self, protocol: Protocol) -> bool {
        protocol == self.ingress && !self.meter_stream && !self.continue_stream
    }

    /// True when, besides, the reply passes back as it came: a stream whose
    /// reply is screened or cached is decoded (and written again), though
    /// its request went as it came.
    pub fn passes_through_to(&self, protocol: Protocol) -> bool {
        let screened_stream = self.stream && (self.guard.is_some() || matches!(self.cache, CacheState::Miss(_)));
        self.sends_as_came_to(protocol) && !screened_stream
    }

    /// The caller's own API key from whichever header its SDK uses, for
    /// lanes configured with `upstream_credentials: passthrough`.
    pub fn caller_key(&self) -> Option<&str> {
        if let Some(bearer) = self.headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
            if let Some(token) = bearer.strip_prefix("Bearer ").or_else(|| bearer.strip_prefix("bearer ")) {
                return Some(token.trim());
            }
        }
        ["x-api-key", "x-goog-api-key"]
            .iter()
            .find_map(|name| self.headers.get(*name).and_then(|v| v.to_str().ok()).map(str::trim))
    }
}

/// Where a candidate sits: its pool and member slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Pool index.
    pub pool: usize,
    /// Member index in the pool.
    pub member: usize,
}
