//! A hit, written for its caller: the head's headers (the lane that served
//! it when it was stored, `x-switchyard-cache: hit`, its `Age`) and its
//! body in the caller's protocol (a whole reply written once per protocol
//! and kept with the entry, an operation's reply as its caller got it or
//! written from its IR) or, for a stream, its events as they first came.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use switchyard_state::call::Call;
use switchyard_state::response_cache::{Cached, OperationReply};
use switchyard_state::Gateway;

use super::X_SWITCHYARD_CACHE;
use crate::filter::{StoodIn, StoodInReply};
use crate::render::{lane_headers, Whole, X_SWITCHYARD_BILLING};

/// An operation's cached reply for a caller that asked the same in
/// another protocol (or other bytes): written from its IR.
pub(super) fn operation_reply(gateway: &Gateway, call: &Call, cached: &Cached) -> Option<Whole> {
    match cached.operation.as_ref()? {
        OperationReply::Embed(response) => crate::operation::embed::write_cached(gateway, call, response),
        OperationReply::Rerank(response) => crate::operation::rerank::write_cached(gateway, call, response),
    }
}

/// A hit, in the caller's protocol (`written`: an operation's reply
/// written for this caller from its IR, in place of the reply as sent).
pub(super) fn answer(
    gateway: &Gateway,
    call: &Call,
    cached: &Cached,
    lane: Option<usize>,
    written: Option<Whole>,
    now_ms: u64,
) -> StoodIn {
    let codec = gateway.codec_for(call.operation, call.ingress);
    let lane = lane.and_then(|lane| gateway.lanes.get(lane));
    let mut headers = HeaderMap::new();
    if let Some(lane) = lane {
        lane_headers(&mut headers, &lane.lane_header, &lane.provider_header);
        headers.insert(X_SWITCHYARD_BILLING, HeaderValue::from_static(lane.billing.as_str()));
    }
    headers.insert(X_SWITCHYARD_CACHE, HeaderValue::from_static("hit"));
    let age = now_ms.saturating_sub(cached.stored_ms) / 1000;
    headers.insert(http::header::AGE, HeaderValue::from(age));
    let content_type = if call.stream { call.framing.content_type() } else { "application/json" };
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    let reply = if let Some(written) = written {
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.extend(written.headers);
        StoodInReply::Whole(written.body)
    } else if let Some(whole) = &cached.whole {
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in &whole.headers {
            if let (Ok(name), Ok(value)) = (HeaderName::try_from(name.as_str()), HeaderValue::try_from(value.as_str()))
            {
                headers.insert(name, value);
            }
        }
        StoodInReply::Whole(Bytes::from(whole.body.clone()))
    } else if call.stream {
        let events = cached.events.clone().unwrap_or_else(|| switchyard_ir::events_from_response(&cached.response));
        StoodInReply::Events(events)
    } else {
        let written = cached.encoded[call.ingress.index()]
            .get_or_init(|| Bytes::from(codec.write_response(&cached.response).body))
            .clone();
        StoodInReply::Whole(written)
    };
    StoodIn { headers, reply }
}
