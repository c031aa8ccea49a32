//! A successful answer on its way back: the response head (the lane that
//! served, its billing model, the caller's content type), then either the
//! whole reply (a passthrough's bytes as they came, only `usage` read; or
//! read and written again in the caller's protocol) or the stream, handed
//! to the relay (`relay`), which owns the request's record from then on.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::BodyExt;
use switchyard_codec::tap::UsageTap;
use switchyard_health::LaneEffect;
use switchyard_ir::{ErrorInfo, ErrorKind};
use switchyard_state::call::Call;
use switchyard_state::Gateway;
use switchyard_transport::{full_body, BoxError, UpstreamResponse};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use crate::candidate::Candidate;
use crate::identity::{fill_identity, log_done};
use crate::lane_health::{Health, InFlight};
use crate::relay::{StreamRelay, Tally};
use crate::render::{
    common_headers, error_response, internal_error, lane_headers, ResponseBody, SERVER_TIMING, X_SWITCHYARD_BILLING,
};
use crate::send::collect;
use crate::settle::Record;

/// What a successful try holds while its answer is relayed: the lane's
/// permit and its in-flight count.
pub(crate) type Guards = (Option<OwnedSemaphorePermit>, InFlight);

/// How many headers a successful reply usually carries.
const REPLY_HEADERS: usize = 12;

/// A lane's successful answer: its response, and the bodies of a split
/// request's other parts.
pub(crate) struct Answer {
    pub(crate) upstream: UpstreamResponse,
    pub(crate) more: Vec<(http::HeaderMap, Bytes)>,
    /// A stream's first chunks, read before its first content
    /// (`first_token`): the relay sends them first.
    pub(crate) held: Vec<Bytes>,
    /// The means to continue the stream elsewhere, when the pool does.
    pub(crate) continuation: Option<Box<crate::continuation::Continuation>>,
}

/// A successful try's answer: the head, then the whole reply or the stream.
#[expect(clippy::too_many_arguments, reason = "the one place a success is assembled")]
pub(crate) async fn success(
    gateway: &Arc<Gateway>,
    call: &Call,
    candidate: &Candidate<'_>,
    answer: Answer,
    guards: Guards,
    health: Health,
    started: Instant,
    record: &mut Option<Box<Record>>,
) -> Response<ResponseBody> {
    let Answer { upstream, more, held, continuation } = answer;
    let lane = candidate.lane;
    // A stream passes through only in the framing the caller reads (a Gemini
    // caller without `alt=sse` reads a JSON array; upstreams are asked for SSE).
    let same = call.passes_through_to(lane.protocol)
        && (!call.stream || gateway.codec(lane.protocol).default_framing() == call.framing);
    let mut builder = Response::builder().status(StatusCode::OK);
    if let Some(headers) = builder.headers_mut() {
        // Sized once for what a reply carries (the gateway's own headers and
        // the lane's), not grown from empty as they are added.
        headers.reserve(REPLY_HEADERS);
        common_headers(headers, call);
        lane_headers(headers, &candidate.lane_header, &lane.provider_header);
        headers.insert(X_SWITCHYARD_BILLING, HeaderValue::from_static(lane.billing.as_str()));
        let content_type = if call.stream { call.framing.content_type() } else { "application/json" };
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        if call.stream {
            headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        }
    }
    let body = if call.stream {
        // A stream's timing so far: the gateway's and the upstream's time to
        // the response head (its body is still to come).
        if let (Some(headers), Some(timing)) =
            (builder.headers_mut(), record.as_deref().and_then(Record::server_timing))
        {
            headers.insert(SERVER_TIMING, timing);
        }
        stream(gateway, call, candidate, (upstream, held, continuation), same, guards, health, started, record)
    } else if call.operation != switchyard_ir::Operation::Chat || call.count_tokens {
        match operation(gateway, call, candidate, upstream, more, started, record).await {
            Ok(whole) => {
                if matches!(call.cache, switchyard_state::call::CacheState::Miss(_)) {
                    let usage = record.as_deref().map(Record::usage).unwrap_or_default();
                    crate::response_cache::store_operation(gateway, call, candidate.lane_index, &whole, usage);
                }
                if let Some(headers) = builder.headers_mut() {
                    headers.extend(whole.headers);
                }
                full_body(whole.body)
            }
            Err(message) => return upstream_broke(gateway, call, candidate, &health, message),
        }
    } else {
        match whole(gateway, call, candidate, upstream, same, started, record).await {
            Ok(body) => full_body(body),
            Err(NotWhole::Broke(message)) => return upstream_broke(gateway, call, candidate, &health, message),
            // A guardrail refused the reply: the caller's 400, the call still billed.
            Err(NotWhole::Blocked(info)) => return crate::render::error_response(gateway, call, &info),
        }
    };
    builder.body(body).unwrap_or_else(|_| internal_error())
}

/// Why a whole reply is not answered as it came.
enum NotWhole {
    /// The upstream's body broke after its 2xx head.
    Broke(String),
    /// A guardrail refused it.
    Blocked(switchyard_ir::ErrorInfo),
}

/// A whole reply, read within the lane's request timeout: the passthrough's
/// bytes as they came (only its usage read), or read and written again for
/// the caller; screened by the reply's guardrails, if any.
async fn whole(
    gateway: &Gateway,
    call: &Call,
    candidate: &Candidate<'_>,
    upstream: UpstreamResponse,
    same: bool,
    started: Instant,
    record: &mut Option<Box<Record>>,
) -> Result<Bytes, NotWhole> {
    let lane = candidate.lane;
    let body = read_whole(candidate, upstream.body, record).await.map_err(NotWhole::Broke)?;
    let codec = gateway.codec(lane.protocol);
    if same {
        // Passthrough: the bytes go back as they came; only usage is read.
        let usage = codec.read_usage(&body).unwrap_or_default();
        log_done(&call.request_id, &lane.name, &usage, started, false);
        if let Some(record) = record.as_mut() {
            record.record_usage(usage, false);
        }
        let body = crate::guard::reply(call, body, record).map_err(NotWhole::Blocked)?;
        if matches!(call.cache, switchyard_state::call::CacheState::Miss(_)) {
            if let Ok(response) = codec.read_response(&body) {
                crate::response_cache::store_whole(gateway, call, candidate.lane_index, response);
            }
        }
        if let Some(record) = record.as_mut() {
            record.keep_response(&body);
            record.first_byte();
            // Only a trace wants the finish reason.
            if record.trace.is_some() {
                if let Some(reason) = codec.read_stop_reason(&body) {
                    record.stop_reason(reason.as_str());
                }
            }
        }
        crate::cache::store(gateway, call, &body);
        return Ok(body);
    }
    let mut response = codec
        .read_response(&body)
        .map_err(|err| NotWhole::Broke(format!("upstream reply could not be read: {err}")))?;
    if lane.protocol == switchyard_ir::Protocol::Gemini {
        crate::signatures::keep(gateway, call, switchyard_codec::signature::signed_calls(&response.content)).await;
    }
    log_done(&call.request_id, &lane.name, &response.usage, started, false);
    fill_identity(&mut response.id, &mut response.model, &mut response.created, &call.request_id, candidate.wire_model);
    let out = Bytes::from(gateway.codec(call.ingress).write_response(&response).body);
    if let Some(record) = record.as_mut() {
        record.record_usage(response.usage, false);
        if let Some(reason) = response.stop_reason {
            record.stop_reason(reason.as_str());
        }
        record.first_byte();
    }
    let out = crate::guard::reply(call, out, record).map_err(NotWhole::Blocked)?;
    if matches!(call.cache, switchyard_state::call::CacheState::Miss(_)) {
        // Kept as the caller got it (masked), read back to IR.
        if let Ok(response) = gateway.codec(call.ingress).read_response(&out) {
            crate::response_cache::store_whole(gateway, call, candidate.lane_index, response);
        }
    }
    if let Some(record) = record.as_mut() {
        record.keep_response(&out);
    }
    crate::cache::store(gateway, call, &out);
    Ok(out)
}

/// An operation's whole reply, read within the lane's request timeout.
async fn operation(
    gateway: &Gateway,
    call: &Call,
    candidate: &Candidate<'_>,
    upstream: UpstreamResponse,
    more: Vec<(http::HeaderMap, Bytes)>,
    started: Instant,
    record: &mut Option<Box<Record>>,
) -> Result<crate::render::Whole, String> {
    let body = read_whole(candidate, upstream.body, record).await?;
    crate::operation::whole(gateway, call, candidate, (&upstream.headers, body), more, started, record)
}

/// The upstream's body, read whole within the lane's request timeout.
/// `Err`: it broke or timed out (the upstream took the request and may
/// have done the work: it is charged at its reservation).
async fn read_whole(
    candidate: &Candidate<'_>,
    body: switchyard_transport::UpstreamBody,
    record: &mut Option<Box<Record>>,
) -> Result<Bytes, String> {
    let reading = Instant::now();
    let read = tokio::time::timeout(candidate.lane.timeouts.request, collect(body)).await;
    if let Some(record) = record.as_mut() {
        record.waited(reading.elapsed());
    }
    match read {
        Ok(Ok(body)) => Ok(body),
        broken => {
            if let Some(record) = record.as_mut() {
                record.charge_reservation();
            }
            Err(match broken {
                Ok(Err(err)) => format!("upstream body failed: {err}"),
                _ => "upstream body timed out".to_owned(),
            })
        }
    }
}

/// The stream's body: a relay that pulls the upstream's frames and yields
/// the caller's, and settles the record when the stream ends.
#[expect(clippy::too_many_arguments, reason = "what a relay is built from")]
fn stream(
    gateway: &Arc<Gateway>,
    call: &Call,
    candidate: &Candidate<'_>,
    (upstream, held, continuation): (UpstreamResponse, Vec<Bytes>, Option<Box<crate::continuation::Continuation>>),
    same: bool,
    guards: Guards,
    health: Health,
    started: Instant,
    record: &mut Option<Box<Record>>,
) -> ResponseBody {
    let lane = candidate.lane;
    let codec = gateway.codec(lane.protocol);
    let relay_record = record.take();
    let keeps_text = relay_record.as_ref().is_some_and(|r| r.retains());
    let relay = StreamRelay {
        gateway: gateway.clone(),
        upstream: upstream.body,
        held,
        decoder: if same {
            Box::new(UsageTap::new(codec.stream_decoder(), call.framing))
        } else {
            codec.stream_decoder()
        },
        hide: if same && call.hide_usage { codec.stream_usage_filter() } else { None },
        encoder: if same {
            None
        } else {
            Some(gateway.codec(call.ingress).stream_encoder_for(call.framing, &call.body))
        },
        ingress: call.ingress,
        framing: call.framing,
        signed: (!same && lane.protocol == switchyard_ir::Protocol::Gemini)
            .then(|| crate::relay::SignedCalls::new(call.caller.as_ref().map(|caller| caller.key.id.clone()))),
        tally: Tally::default(),
        first_sent: false,
        events: Vec::new(),
        idle: lane.timeouts.stream_idle,
        done: false,
        health,
        request_id: call.request_id.clone(),
        lane: lane.name.clone(),
        wire_model: candidate.wire_model_arc(),
        started,
        pending: None,
        record: relay_record,
        delivered_events: 0,
        // Only a re-encoded stream can be carried on by another lane.
        continuation: continuation.filter(|_| !same),
        usage_before: switchyard_ir::Usage::default(),
        guard: crate::guard::StreamGuard::of(call),
        kept_frames: keeps_text.then(Vec::new),
        settling: None,
        caching: match call.cache {
            switchyard_state::call::CacheState::Miss(key) => Some(crate::relay::Caching {
                key,
                raw: call.cache_material.clone(),
                pool: candidate.slot.pool,
                lane: candidate.lane_index,
                events: Vec::new(),
            }),
            _ => None,
        },
        _guards: guards,
    };
    let stream = futures_util::stream::unfold(relay, |mut relay| async move {
        let chunk = relay.next_chunk().await?;
        Some((Ok::<_, BoxError>(http_body::Frame::data(chunk)), relay))
    });
    http_body_util::StreamBody::new(stream).boxed_unsync()
}

/// A 2xx whose body failed: the lane's fault, answered as a 502.
fn upstream_broke(
    gateway: &Gateway,
    call: &Call,
    candidate: &Candidate<'_>,
    health: &Health,
    message: String,
) -> Response<ResponseBody> {
    health.apply(LaneEffect::Failure, &message, None);
    let mut response = error_response(gateway, call, &ErrorInfo::new(ErrorKind::Internal, message).with_status(502));
    lane_headers(response.headers_mut(), &candidate.lane_header, &candidate.lane.provider_header);
    response
}
