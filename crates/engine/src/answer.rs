//! How an exchange ends when the engine writes the answer itself: a
//! refusal (in the caller's protocol, with `Retry-After` when waiting
//! helps), an answer a filter gave in place of the upstream (through the
//! filters before it), and a whole answer on its way out. Each passes the
//! filters' head hooks and settles the record; a stream settles in its
//! relay instead.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::BodyExt;
use switchyard_ir::{ErrorInfo, StreamEvent};
use switchyard_state::call::Call;
use switchyard_state::Gateway;
use switchyard_transport::{full_body, BoxError};

use crate::env::Env;
use crate::exchange::Exchange;
use crate::filter::{Ended, ReplyCx, StoodIn, StoodInReply};
use crate::render::{common_headers, error_response, ResponseBody, Whole, SERVER_TIMING};
use crate::settle::Record;

/// A refusal before the request had an exchange (no pool to name).
pub(crate) async fn refused_at_door(
    gateway: &Gateway,
    call: &Call,
    mut record: Box<Record>,
    info: &ErrorInfo,
) -> Response<ResponseBody> {
    record.refused_with(call.caller.clone(), info.kind);
    let response = error_response(gateway, call, info);
    record.finish(response.status().as_u16()).await;
    response
}

/// A stage's refusal, in the caller's protocol (with `Retry-After` when
/// waiting helps), settled.
pub(crate) async fn refused(
    gateway: &Gateway,
    x: &mut Exchange,
    info: &ErrorInfo,
    retry_after: Option<u64>,
) -> Response<ResponseBody> {
    x.record.refused_with(x.call.caller.clone(), info.kind);
    let mut response = error_response(gateway, &x.call, info);
    if let Some(seconds) = retry_after {
        response.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    x.filters.head(response.headers_mut());
    x.record.finish(response.status().as_u16()).await;
    response
}

/// A whole answer on its way out: the filters see its head, and the record
/// settles.
pub(crate) async fn finished(
    gateway: &Gateway,
    x: &mut Exchange,
    mut response: Response<ResponseBody>,
) -> Response<ResponseBody> {
    let _ = gateway;
    x.filters.head(response.headers_mut());
    if let Some(timing) = x.record.server_timing() {
        response.headers_mut().insert(SERVER_TIMING, timing);
    }
    x.record.finish(response.status().as_u16()).await;
    response
}

/// An answer a filter gave in place of the upstream, through the filters
/// before it: a whole reply's bytes through their `on_whole`, a stream's
/// events through their `on_events` and the caller's encoder, one chunk
/// per event as it first came.
pub(crate) async fn stood_in(gateway: &Gateway, mut x: Exchange, answer: StoodIn) -> Response<ResponseBody> {
    let StoodIn { headers, reply } = answer;
    let mut response = Response::new(());
    *response.status_mut() = StatusCode::OK;
    common_headers(response.headers_mut(), &x.call);
    response.headers_mut().extend(headers);
    let env = Env::of(gateway);
    let body = match reply {
        StoodInReply::Whole(body) => {
            let mut whole = Whole { body, headers: http::HeaderMap::new() };
            if let Err(info) = x.filter_whole(env, &mut whole) {
                let refusal = error_response(gateway, &x.call, &info);
                return finished(gateway, &mut x, refusal).await;
            }
            x.record.first_byte();
            x.record.keep_response(&whole.body);
            response.headers_mut().extend(whole.headers);
            full_body(whole.body)
        }
        StoodInReply::Events(events) => replay(gateway, &mut x, events).await,
    };
    finished(gateway, &mut x, response.map(|()| body)).await
}

/// A stream given in place of the upstream, written for the caller.
async fn replay(gateway: &Gateway, x: &mut Exchange, mut events: Vec<StreamEvent>) -> ResponseBody {
    let env = Env::of(gateway);
    let ended = match x.filter_events(env, &mut events) {
        Ok(()) => Ended::Whole,
        Err(info) => {
            events = vec![StreamEvent::Error(info)];
            Ended::Damaged
        }
    };
    let caller = gateway.codec_for(x.call.operation, x.call.ingress);
    let mut encoder = caller.stream_encoder_for(x.call.framing, &x.call.body);
    let mut chunks: Vec<Result<http_body::Frame<Bytes>, BoxError>> = Vec::with_capacity(events.len() + 1);
    for event in &events {
        let mut out = Vec::new();
        encoder.encode(event, &mut out);
        if !out.is_empty() {
            chunks.push(Ok(http_body::Frame::data(Bytes::from(out))));
        }
    }
    let mut tail = Vec::new();
    encoder.finish(&mut tail);
    if !tail.is_empty() {
        chunks.push(Ok(http_body::Frame::data(Bytes::from(tail))));
    }
    x.record.first_byte();
    for chunk in chunks.iter().flatten() {
        if let Some(data) = chunk.data_ref() {
            x.filters.sent(data);
        }
    }
    let Exchange { call, record, filters, .. } = x;
    let mut cx = ReplyCx { env, call, record, part: switchyard_ir::Usage::default() };
    for hook in filters.end(ended, &mut cx) {
        hook.await;
    }
    http_body_util::StreamBody::new(futures_util::stream::iter(chunks)).boxed_unsync()
}
