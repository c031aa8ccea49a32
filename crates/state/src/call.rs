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
    /// What the caller asks for (the route it came to decides; a token
    /// count is `CountTokens`, answered by a chat pool, never billed).
    pub operation: switchyard_ir::Operation,
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
}

impl Call {
    /// What the request is, as the ledger and the logs name it.
    pub fn task(&self) -> &'static str {
        self.operation.as_str()
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
