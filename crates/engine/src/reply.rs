//! A successful answer on its way back: the response head (the lane that
//! served, its billing model, the caller's content type), then either the
//! whole reply or the stream. A whole reply takes one path whatever it is:
//! read within the lane's request timeout (a chat reply on a passthrough
//! as it came, only its usage read; else read into the IR, through the
//! reply filters' `on_reply`, and written in the caller's protocol; an
//! operation's by its own module), then through the filters' `on_whole`
//! as the caller gets it. A stream is handed back as its head and what its
//! relay needs (`relay::Relaying`); the exchange follows it there.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response};
use switchyard_health::LaneEffect;
use switchyard_ir::{ErrorInfo, ErrorKind, Operation};
use switchyard_transport::{full_body, UpstreamBody, UpstreamResponse};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use crate::attempt::Attempting;
use crate::candidate::Candidate;
use crate::env::Env;
use crate::exchange::Progress;
use crate::filter::{ReplyCx, Serving};
use crate::lane_health::{Health, InFlight};
use crate::operation::{Read, Reading};
use crate::relay::Relaying;
use crate::render::{
    common_headers, error_response, lane_headers, ResponseBody, Whole, SERVER_TIMING, X_SWITCHYARD_BILLING,
};
use crate::send::collect;
use crate::settle::Record;

/// What a successful try holds while its answer is relayed: the lane's
/// permit and its in-flight count.
pub(crate) type Guards = (Option<OwnedSemaphorePermit>, InFlight);

/// How many headers a successful reply usually carries.
const REPLY_HEADERS: usize = 12;

/// A lane's successful answer: its response, the bodies of a split
/// request's other parts, a stream's first chunks read before its first
/// content (`first_token`: the relay sends them first), and what the lane
/// holds while it is read.
pub(crate) struct Answer {
    pub(crate) upstream: UpstreamResponse,
    pub(crate) more: Vec<(HeaderMap, Bytes)>,
    pub(crate) held: Vec<Bytes>,
    pub(crate) guards: Guards,
    pub(crate) health: Health,
}

/// What a try answered the caller.
pub(crate) enum Answered {
    /// A whole answer (a success, a refusal, an error).
    Whole(Response<ResponseBody>),
    /// A stream: its head, and what its relay needs.
    Stream(Response<()>, Box<Relaying>),
}

impl Answered {
    /// The answer's headers.
    pub(crate) fn headers_mut(&mut self) -> &mut HeaderMap {
        match self {
            Answered::Whole(response) => response.headers_mut(),
            Answered::Stream(head, _) => head.headers_mut(),
        }
    }
}

/// A successful try's answer: the head, then the whole reply or the stream.
pub(crate) async fn success(
    request: &Attempting<'_>,
    progress: &mut Progress<'_>,
    candidate: &Candidate<'_>,
    answer: Answer,
) -> Answered {
    let (gateway, call) = (request.gateway, request.call);
    let lane = candidate.lane;
    // A stream passes through only in the framing the caller reads (a Gemini
    // caller without `alt=sse` reads a JSON array; upstreams are asked for SSE).
    let same = progress.passes_through_to(call, lane.protocol)
        && (!call.stream || gateway.codec_for(call.operation, lane.protocol).default_framing() == call.framing);
    progress.serving(&Serving {
        call,
        ir: None,
        slots: &request.plan.slots,
        lane: candidate.lane_index,
        upstream: Some(&answer.upstream.headers),
    });
    let mut head = Response::new(());
    let headers = head.headers_mut();
    // Sized once for what a reply carries (the gateway's own headers and
    // the lane's), not grown from empty as they are added.
    headers.reserve(REPLY_HEADERS);
    common_headers(headers, call);
    lane_headers(headers, &candidate.lane_header, &lane.provider_header);
    headers.insert(X_SWITCHYARD_BILLING, HeaderValue::from_static(lane.billing.as_str()));
    let content_type = if call.stream { call.framing.content_type() } else { "application/json" };
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    let Answer { upstream, more, held, guards, health } = answer;
    if call.stream {
        headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        // A stream's timing so far: the gateway's and the upstream's time to
        // the response head (its body is still to come).
        if let Some(timing) = progress.record.server_timing() {
            headers.insert(SERVER_TIMING, timing);
        }
        let relaying = Relaying {
            upstream: upstream.body,
            held,
            same,
            protocol: lane.protocol,
            health,
            guards,
            lane: lane.name.clone(),
            wire_model: candidate.wire_model_arc(),
            idle: lane.timeouts.stream_idle,
            started: request.started,
        };
        return Answered::Stream(head, Box::new(relaying));
    }
    let mut whole = match read(request, progress, candidate, upstream, more, same).await {
        Ok(whole) => whole,
        Err(message) => return Answered::Whole(upstream_broke(request, candidate, &health, message)),
    };
    let env = Env::of(gateway);
    let mut cx = ReplyCx { env, call, record: progress.record, part: switchyard_ir::Usage::default() };
    if let Err(info) = progress.filters.whole(&mut whole, &mut cx) {
        // A filter refused the reply: the caller's error, the call still billed.
        return Answered::Whole(error_response(gateway, call, &info));
    }
    // Audio is not text: only text replies go to the request log.
    if call.operation != Operation::Speech {
        progress.record.keep_response(&whole.body);
    }
    head.headers_mut().extend(whole.headers);
    Answered::Whole(head.map(|()| full_body(whole.body)))
}

/// The whole reply, read within the lane's request timeout and for the
/// caller by its operation's spec; a chat reply read into the IR passes the
/// filters' `on_reply` and is written in the caller's protocol.
async fn read(
    request: &Attempting<'_>,
    progress: &mut Progress<'_>,
    candidate: &Candidate<'_>,
    upstream: UpstreamResponse,
    more: Vec<(HeaderMap, Bytes)>,
    same: bool,
) -> Result<Whole, String> {
    let (gateway, call) = (request.gateway, request.call);
    let body = read_whole(candidate, upstream.body, progress.record).await?;
    let reading =
        Reading { gateway, call, candidate, headers: &upstream.headers, body, more, same, started: request.started };
    let mut response = match crate::operation::of(call.operation).read(reading, progress.record)? {
        Read::Whole(whole) => return Ok(whole),
        Read::Translated(response) => response,
    };
    let mut cx =
        ReplyCx { env: Env::of(gateway), call, record: progress.record, part: switchyard_ir::Usage::default() };
    progress.filters.reply(&mut response, candidate.lane.protocol, &mut cx).await;
    let out = Bytes::from(gateway.codec_for(call.operation, call.ingress).write_response(&response).body);
    let record = &mut *progress.record;
    record.record_reported(response.usage, || crate::settle::output_estimate(&response));
    if let Some(reason) = response.stop_reason {
        record.stop_reason(reason.as_str());
    }
    record.first_byte();
    Ok(Whole { body: out, headers: HeaderMap::new() })
}

/// The upstream's body, read whole within the lane's request timeout.
/// `Err`: it broke or timed out (the upstream took the request and may
/// have done the work: it is charged at its reservation).
async fn read_whole(candidate: &Candidate<'_>, body: UpstreamBody, record: &mut Record) -> Result<Bytes, String> {
    let reading = Instant::now();
    let read = tokio::time::timeout(candidate.lane.timeouts.request, collect(body)).await;
    record.waited(reading.elapsed());
    match read {
        Ok(Ok(body)) => Ok(body),
        broken => {
            record.charge_reservation();
            Err(match broken {
                Ok(Err(err)) => format!("upstream body failed: {err}"),
                _ => "upstream body timed out".to_owned(),
            })
        }
    }
}

/// A 2xx whose body failed: the lane's fault, answered as a 502.
fn upstream_broke(
    request: &Attempting<'_>,
    candidate: &Candidate<'_>,
    health: &Health,
    message: String,
) -> Response<ResponseBody> {
    health.apply(LaneEffect::Failure, &message, None);
    let info = ErrorInfo::new(ErrorKind::Internal, message).with_status(502);
    let mut response = error_response(request.gateway, request.call, &info);
    lane_headers(response.headers_mut(), &candidate.lane_header, &candidate.lane.provider_header);
    response
}
