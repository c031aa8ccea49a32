//! The forwarding engine: from a caller's request (already framed by an
//! ingress) to the response it gets back. Picks lanes in routing order, turns
//! the request into the lane's protocol (byte passthrough when the protocols
//! match), sends it, and turns the answer back, streams frame by frame.
//! Failover happens only before the first byte reaches the caller.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use switchyard_codec::{scan, Codec, Framing, Outbound, StreamDecoder, StreamEncoder};
use switchyard_config::Endpoint;
use switchyard_ir::{
    Accumulator, Dropped, ErrorInfo, ErrorKind, Protocol, Request, StreamEvent, Usage,
};
use tokio::sync::OwnedSemaphorePermit;

use crate::state::{Gateway, Lane, Target};
use crate::transport::{
    full_body, TransportError, UpstreamBody, UpstreamRequest, UpstreamResponse,
};
use crate::{mock, BoxError};

/// The body type of every response the engine writes.
pub type ResponseBody = UnsyncBody;
type UnsyncBody = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

/// Largest upstream body read whole (non-streamed replies and error bodies).
const MAX_UPSTREAM_BODY: usize = 64 << 20;

/// How long a request waits for a permit when every candidate is at its cap.
const QUEUE_TIMEOUT: Duration = Duration::from_secs(30);

/// A caller's request as an ingress framed it.
pub struct Call {
    /// The caller's protocol.
    pub ingress: Protocol,
    /// The model or pool the caller named.
    pub name: String,
    /// An ad-hoc route straight to a provider's wire model.
    pub direct: Option<(usize, String)>,
    /// The request body as received.
    pub body: Bytes,
    /// Byte range of the body's `model` value, when the body carries one.
    pub model_span: Option<Range<usize>>,
    /// The caller wants a stream.
    pub stream: bool,
    /// The stream framing the caller reads.
    pub framing: Framing,
    /// `x-request-id` to echo.
    pub request_id: HeaderValue,
    /// `x-switchyard-session`, echoed when sent.
    pub session: Option<HeaderValue>,
}

/// One candidate: a lane and the wire model to ask it for.
struct Candidate<'a> {
    lane: &'a Lane,
    wire_model: &'a str,
    lane_header: HeaderValue,
}

/// Serves one call end to end.
pub async fn forward(gateway: Arc<Gateway>, call: Call) -> Response<ResponseBody> {
    let started = Instant::now();
    let candidates = match candidates(&gateway, &call) {
        Ok(list) => list,
        Err(info) => return error_response(&gateway, &call, &info, None),
    };
    let max_hops = match call
        .direct
        .as_ref()
        .map(|_| None)
        .unwrap_or_else(|| gateway.resolve(&call.name))
    {
        Some(Target::Pool(pool)) => gateway.pools[pool].failover.max_hops as usize,
        _ => 1,
    };
    let deadline = match gateway.resolve(&call.name) {
        Some(Target::Pool(pool)) if call.direct.is_none() => {
            Some(started + gateway.pools[pool].failover.timeout)
        }
        _ => None,
    };
    let mut translated: Option<Request> = None;
    let mut last_failure: Option<Failure> = None;
    let total = candidates.len();
    for (hop, candidate) in candidates.iter().enumerate().take(max_hops.max(1)) {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let remaining_after = total.min(max_hops) - hop - 1;
        let permit = match acquire(candidate.lane, remaining_after > 0).await {
            Some(permit) => permit,
            None if remaining_after > 0 => continue,
            None => {
                last_failure = Some(Failure::Gateway(
                    ErrorInfo::new(
                        ErrorKind::Overloaded,
                        "every lane is at its concurrency limit",
                    )
                    .with_status(503),
                ));
                break;
            }
        };
        let prepared = match prepare(&gateway, &call, candidate, &mut translated) {
            Ok(prepared) => prepared,
            Err(info) => return error_response(&gateway, &call, &info, None),
        };
        let lane = candidate.lane;
        let upstream = match send(&gateway, lane, &call, candidate.wire_model, prepared).await {
            Ok(upstream) => upstream,
            Err(err) => {
                tracing::warn!(request_id = ?call.request_id, lane = %lane.name, error = %err, "upstream unreachable");
                last_failure = Some(Failure::Transport(err));
                continue;
            }
        };
        if upstream.status.is_success() {
            return success(&gateway, &call, candidate, upstream, permit, started).await;
        }
        let status = upstream.status;
        let headers = upstream.headers.clone();
        let body = match collect(upstream.body).await {
            Ok(body) => body,
            Err(err) => {
                last_failure = Some(Failure::Transport(TransportError::Io(err)));
                continue;
            }
        };
        let raw = gateway
            .codec(lane.protocol)
            .extract_error(status.as_u16(), &body);
        tracing::info!(request_id = ?call.request_id, lane = %lane.name, status = status.as_u16(), kind = ?raw.kind, message = %raw.message, "upstream error");
        let retryable = status.is_server_error()
            || status == StatusCode::TOO_MANY_REQUESTS
            || status == StatusCode::REQUEST_TIMEOUT;
        let failure = Failure::Upstream {
            lane_protocol: lane.protocol,
            status,
            headers,
            body,
            info: raw.to_error_info(),
            candidate_header: (candidate.lane_header.clone(), lane.provider_header.clone()),
        };
        if !retryable {
            return failure_response(&gateway, &call, failure);
        }
        last_failure = Some(failure);
    }
    match last_failure {
        Some(failure) => failure_response(&gateway, &call, failure),
        None => error_response(
            &gateway,
            &call,
            &ErrorInfo::new(
                ErrorKind::Unavailable,
                format!("no lane of `{}` could take the request", call.name),
            ),
            None,
        ),
    }
}

/// Why a try did not succeed.
enum Failure {
    /// No response arrived.
    Transport(TransportError),
    /// The upstream answered with an error.
    Upstream {
        lane_protocol: Protocol,
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
        info: ErrorInfo,
        candidate_header: (HeaderValue, HeaderValue),
    },
    /// The gateway gave up on its own.
    Gateway(ErrorInfo),
}

fn candidates<'a>(gateway: &'a Gateway, call: &'a Call) -> Result<Vec<Candidate<'a>>, ErrorInfo> {
    if let Some((provider, wire_model)) = &call.direct {
        let lane = gateway
            .direct_lanes
            .get(*provider)
            .ok_or_else(|| ErrorInfo::new(ErrorKind::NotFound, "unknown provider"))?;
        let header =
            HeaderValue::try_from(format!("{}/{}", lane.provider, wire_model)).map_err(|_| {
                ErrorInfo::new(
                    ErrorKind::InvalidRequest,
                    "model name is not printable ascii",
                )
            })?;
        return Ok(vec![Candidate {
            lane,
            wire_model,
            lane_header: header,
        }]);
    }
    let candidate = |index: usize| {
        let lane = &gateway.lanes[index];
        Candidate {
            lane,
            wire_model: &lane.wire_model,
            lane_header: lane.lane_header.clone(),
        }
    };
    match gateway.resolve(&call.name) {
        Some(Target::Lane(index)) => Ok(vec![candidate(index)]),
        Some(Target::Pool(pool)) => {
            let mut order = Vec::new();
            let mut seen = Vec::new();
            let mut queue = vec![pool];
            while let Some(next) = queue.first().copied() {
                queue.remove(0);
                if seen.contains(&next) {
                    continue;
                }
                seen.push(next);
                let state = &gateway.pools[next];
                let ranked = {
                    let mut weighted = state
                        .weighted
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    weighted.order(&state.weights, |_| true)
                };
                for member in ranked {
                    let lane = state.members[member];
                    if !order.contains(&lane) {
                        order.push(lane);
                    }
                }
                queue.extend(state.fallback.iter().copied());
            }
            Ok(order.into_iter().map(candidate).collect())
        }
        None => Err(ErrorInfo::new(
            ErrorKind::NotFound,
            if call.name.is_empty() {
                "the request names no model; set `model` to a model or pool (GET /v1/models lists them)".to_owned()
            } else {
                format!(
                    "model or pool `{}` does not exist (GET /v1/models lists them)",
                    call.name
                )
            },
        )),
    }
}

async fn acquire(lane: &Lane, others_left: bool) -> Option<Option<OwnedSemaphorePermit>> {
    let Some(permits) = &lane.permits else {
        return Some(None);
    };
    match permits.clone().try_acquire_owned() {
        Ok(permit) => Some(Some(permit)),
        Err(_) if others_left => None,
        Err(_) => {
            match tokio::time::timeout(QUEUE_TIMEOUT, permits.clone().acquire_owned()).await {
                Ok(Ok(permit)) => Some(Some(permit)),
                _ => None,
            }
        }
    }
}

/// The upstream body and what was dropped translating it.
struct Prepared {
    body: Bytes,
    dropped: Vec<Dropped>,
}

fn prepare(
    gateway: &Gateway,
    call: &Call,
    candidate: &Candidate<'_>,
    translated: &mut Option<Request>,
) -> Result<Prepared, ErrorInfo> {
    let lane = candidate.lane;
    if lane.protocol == call.ingress {
        // Same protocol: the bytes go as they came, but for the model.
        let body = match &call.model_span {
            Some(span)
                if &call.body[span.start + 1..span.end - 1] != candidate.wire_model.as_bytes() =>
            {
                Bytes::from(scan::splice_model(
                    &call.body,
                    span.clone(),
                    candidate.wire_model,
                ))
            }
            _ => call.body.clone(),
        };
        return Ok(Prepared {
            body,
            dropped: Vec::new(),
        });
    }
    if translated.is_none() {
        let mut request = gateway
            .codec(call.ingress)
            .read_request(&call.body)
            .map_err(|err| err.to_error_info())?;
        request.stream = call.stream;
        *translated = Some(request);
    }
    let Some(request) = translated.as_mut() else {
        return Err(ErrorInfo::new(
            ErrorKind::Internal,
            "request was not translated",
        ));
    };
    candidate.wire_model.clone_into(&mut request.model);
    let encoded = gateway.codec(lane.protocol).write_request(request);
    Ok(Prepared {
        body: Bytes::from(encoded.body),
        dropped: encoded.dropped,
    })
}

async fn send(
    gateway: &Gateway,
    lane: &Lane,
    call: &Call,
    wire_model: &str,
    prepared: Prepared,
) -> Result<UpstreamResponse, TransportError> {
    if !prepared.dropped.is_empty() {
        let fields: Vec<&str> = prepared.dropped.iter().map(|d| d.field.as_str()).collect();
        tracing::info!(request_id = ?call.request_id, lane = %lane.name, from = %call.ingress, to = %lane.protocol, dropped = ?fields, "fields dropped in translation");
    }
    let codec = gateway.codec(lane.protocol);
    match &lane.endpoint {
        Endpoint::Mock => {
            let path_model =
                matches!(lane.protocol, Protocol::Gemini | Protocol::Bedrock).then_some(wire_model);
            Ok(mock::respond(
                codec,
                path_model,
                call.stream,
                codec.default_framing(),
                &prepared.body,
            ))
        }
        Endpoint::Http(base) => {
            let url = format!("{base}{}", codec.upstream_path(wire_model, call.stream));
            let uri: Uri = url
                .parse()
                .map_err(|_| TransportError::Connect(format!("`{url}` is not a valid url")))?;
            let mut headers = HeaderMap::with_capacity(8);
            headers.insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            headers.insert(
                http::header::USER_AGENT,
                HeaderValue::from_static(concat!("switchyard/", env!("CARGO_PKG_VERSION"))),
            );
            headers.insert(
                HeaderName::from_static("x-request-id"),
                call.request_id.clone(),
            );
            if call.stream {
                headers.insert(
                    http::header::ACCEPT,
                    HeaderValue::from_static(codec.default_framing().content_type()),
                );
            }
            match &lane.static_auth {
                Some(auth) => headers.extend(auth.iter().map(|(n, v)| (n.clone(), v.clone()))),
                None => {
                    let outbound = Outbound {
                        method: "POST",
                        url: &url,
                        body: &prepared.body,
                        time: SystemTime::now(),
                    };
                    let auth = codec
                        .auth_headers(&lane.credentials, &outbound)
                        .map_err(|err| TransportError::Connect(format!("signing failed: {err}")))?;
                    headers.extend(auth);
                }
            }
            gateway
                .transport
                .send(
                    UpstreamRequest {
                        uri,
                        headers,
                        body: prepared.body,
                    },
                    lane.timeouts.response_headers,
                )
                .await
        }
    }
}

async fn collect(body: UpstreamBody) -> Result<Bytes, String> {
    crate::transport::collect_limited(body, MAX_UPSTREAM_BODY)
        .await
        .map_err(|err| err.to_string())
}

async fn success(
    gateway: &Arc<Gateway>,
    call: &Call,
    candidate: &Candidate<'_>,
    upstream: UpstreamResponse,
    permit: Option<OwnedSemaphorePermit>,
    started: Instant,
) -> Response<ResponseBody> {
    let lane = candidate.lane;
    let same = lane.protocol == call.ingress;
    let mut builder = Response::builder().status(StatusCode::OK);
    if let Some(headers) = builder.headers_mut() {
        common_headers(headers, call);
        headers.insert(
            HeaderName::from_static("x-switchyard-lane"),
            candidate.lane_header.clone(),
        );
        headers.insert(
            HeaderName::from_static("x-switchyard-provider"),
            lane.provider_header.clone(),
        );
        headers.insert(
            HeaderName::from_static("x-switchyard-billing"),
            HeaderValue::from_static(lane.billing.as_str()),
        );
        let content_type = if call.stream {
            call.framing.content_type()
        } else {
            "application/json"
        };
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static(content_type),
        );
        if call.stream {
            headers.insert(
                http::header::CACHE_CONTROL,
                HeaderValue::from_static("no-cache"),
            );
        }
    }
    if !call.stream {
        let body = match collect(upstream.body).await {
            Ok(body) => body,
            Err(err) => {
                let info =
                    ErrorInfo::new(ErrorKind::Internal, format!("upstream body failed: {err}"))
                        .with_status(502);
                return error_response(gateway, call, &info, Some(candidate));
            }
        };
        let response = match gateway.codec(lane.protocol).read_response(&body) {
            Ok(response) => response,
            Err(err) if same => {
                tracing::debug!(error = %err, "usage tap could not read a passthrough reply");
                switchyard_ir::Response::default()
            }
            Err(err) => {
                let info = ErrorInfo::new(
                    ErrorKind::Internal,
                    format!("upstream reply could not be read: {err}"),
                )
                .with_status(502);
                return error_response(gateway, call, &info, Some(candidate));
            }
        };
        log_done(call, lane, &response.usage, started, false);
        let out = if same {
            body
        } else {
            Bytes::from(gateway.codec(call.ingress).write_response(&response).body)
        };
        return builder
            .body(full_body(out))
            .unwrap_or_else(|_| internal_error());
    }
    let relay = StreamRelay {
        gateway: gateway.clone(),
        upstream: upstream.body,
        decoder: gateway.codec(lane.protocol).stream_decoder(),
        encoder: if same {
            None
        } else {
            Some(gateway.codec(call.ingress).stream_encoder(call.framing))
        },
        ingress: call.ingress,
        framing: call.framing,
        accumulator: Accumulator::new(),
        events: Vec::new(),
        idle: lane.timeouts.stream_idle,
        done: false,
        log: StreamLog {
            request_id: call.request_id.clone(),
            lane: lane.name.clone(),
            started,
        },
        _permit: permit,
    };
    let stream = futures_util::stream::unfold(relay, |mut relay| async move {
        let chunk = relay.next_chunk().await?;
        Some((Ok::<_, BoxError>(http_body::Frame::data(chunk)), relay))
    });
    builder
        .body(http_body_util::StreamBody::new(stream).boxed_unsync())
        .unwrap_or_else(|_| internal_error())
}

struct StreamLog {
    request_id: HeaderValue,
    lane: Arc<str>,
    started: Instant,
}

/// Pulls upstream frames and yields caller frames: verbatim on a
/// same-protocol hop (the decoder only taps usage), re-encoded otherwise.
struct StreamRelay {
    gateway: Arc<Gateway>,
    upstream: UpstreamBody,
    decoder: Box<dyn StreamDecoder>,
    encoder: Option<Box<dyn StreamEncoder>>,
    ingress: Protocol,
    framing: Framing,
    accumulator: Accumulator,
    events: Vec<StreamEvent>,
    idle: Duration,
    done: bool,
    log: StreamLog,
    _permit: Option<OwnedSemaphorePermit>,
}

impl StreamRelay {
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            if self.done {
                return None;
            }
            let frame = match tokio::time::timeout(self.idle, self.upstream.frame()).await {
                Err(_) => {
                    return Some(self.fail(format!(
                        "upstream stream idle for more than {:?}",
                        self.idle
                    )))
                }
                Ok(None) => return self.end(),
                Ok(Some(Err(err))) => {
                    return Some(self.fail(format!("upstream stream failed: {err}")))
                }
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if data.is_empty() {
                continue;
            }
            self.events.clear();
            if let Err(err) = self.decoder.feed(&data, &mut self.events) {
                if self.encoder.is_some() {
                    return Some(self.fail(format!("upstream stream could not be read: {err}")));
                }
                tracing::debug!(error = %err, "usage tap could not read a passthrough stream");
            }
            for event in &self.events {
                self.accumulator.push(event);
            }
            let Some(encoder) = self.encoder.as_mut() else {
                return Some(data);
            };
            let mut out = Vec::new();
            for event in &self.events {
                encoder.encode(event, &mut out);
            }
            if self.accumulator.is_finished() || self.accumulator.error().is_some() {
                encoder.finish(&mut out);
                self.done = true;
                self.log_end();
            }
            if !out.is_empty() {
                return Some(Bytes::from(out));
            }
        }
    }

    fn end(&mut self) -> Option<Bytes> {
        self.done = true;
        self.events.clear();
        let _ = self.decoder.finish(&mut self.events);
        for event in &self.events {
            self.accumulator.push(event);
        }
        let finished = self.accumulator.is_finished() || self.accumulator.error().is_some();
        let mut out = Vec::new();
        if let Some(encoder) = self.encoder.as_mut() {
            for event in &self.events {
                encoder.encode(event, &mut out);
            }
            if !finished {
                encoder.encode(
                    &StreamEvent::Error(
                        ErrorInfo::new(ErrorKind::Internal, "upstream stream ended early")
                            .with_status(502),
                    ),
                    &mut out,
                );
            }
            encoder.finish(&mut out);
        } else if !finished {
            return Some(self.fail("upstream stream ended early".to_owned()));
        }
        self.log_end();
        (!out.is_empty()).then(|| Bytes::from(out))
    }

    /// Ends the caller's stream with its protocol's in-stream error.
    fn fail(&mut self, message: String) -> Bytes {
        tracing::warn!(request_id = ?self.log.request_id, lane = %self.log.lane, %message, "stream failed mid-way");
        self.done = true;
        let info = ErrorInfo::new(ErrorKind::Internal, message).with_status(502);
        let mut out = Vec::new();
        let encoder = self.encoder.get_or_insert_with(|| {
            self.gateway
                .codec(self.ingress)
                .stream_encoder(self.framing)
        });
        encoder.encode(&StreamEvent::Error(info), &mut out);
        encoder.finish(&mut out);
        Bytes::from(out)
    }

    fn log_end(&self) {
        let usage = self.accumulator.usage();
        tracing::info!(
            request_id = ?self.log.request_id,
            lane = %self.log.lane,
            stream = true,
            input_tokens = usage.input_tokens,
            output_tokens = usage.output_tokens,
            elapsed_ms = self.log.started.elapsed().as_millis() as u64,
            "request done"
        );
    }
}

fn log_done(call: &Call, lane: &Lane, usage: &Usage, started: Instant, stream: bool) {
    tracing::info!(
        request_id = ?call.request_id,
        lane = %lane.name,
        stream,
        input_tokens = usage.input_tokens,
        output_tokens = usage.output_tokens,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "request done"
    );
}

fn common_headers(headers: &mut HeaderMap, call: &Call) {
    headers.insert(
        HeaderName::from_static("x-request-id"),
        call.request_id.clone(),
    );
    if let Some(session) = &call.session {
        headers.insert(
            HeaderName::from_static("x-switchyard-session"),
            session.clone(),
        );
    }
}

fn failure_response(gateway: &Gateway, call: &Call, failure: Failure) -> Response<ResponseBody> {
    match failure {
        Failure::Transport(err) => {
            let status = match err {
                TransportError::HeadersTimeout(_) => 504,
                TransportError::Connect(_) | TransportError::Io(_) => 502,
            };
            let kind = if status == 504 {
                ErrorKind::Timeout
            } else {
                ErrorKind::Unavailable
            };
            error_response(
                gateway,
                call,
                &ErrorInfo::new(kind, err.to_string()).with_status(status),
                None,
            )
        }
        Failure::Gateway(info) => error_response(gateway, call, &info, None),
        Failure::Upstream {
            lane_protocol,
            status,
            headers,
            body,
            info,
            candidate_header,
        } => {
            let retry_after = headers.get(http::header::RETRY_AFTER).cloned();
            let mut response = if lane_protocol == call.ingress {
                // Same protocol: the vendor's own error bytes, status and type headers.
                let mut builder = Response::builder().status(status);
                if let Some(out) = builder.headers_mut() {
                    out.insert(
                        http::header::CONTENT_TYPE,
                        headers
                            .get(http::header::CONTENT_TYPE)
                            .cloned()
                            .unwrap_or(HeaderValue::from_static("application/json")),
                    );
                    if let Some(kind) = headers.get("x-amzn-errortype") {
                        out.insert(HeaderName::from_static("x-amzn-errortype"), kind.clone());
                    }
                }
                builder
                    .body(full_body(body))
                    .unwrap_or_else(|_| internal_error())
            } else {
                error_response(gateway, call, &info, None)
            };
            let out = response.headers_mut();
            common_headers(out, call);
            out.insert(
                HeaderName::from_static("x-switchyard-lane"),
                candidate_header.0,
            );
            out.insert(
                HeaderName::from_static("x-switchyard-provider"),
                candidate_header.1,
            );
            if let Some(retry_after) = retry_after {
                out.insert(http::header::RETRY_AFTER, retry_after);
            }
            response
        }
    }
}

/// An error written by the gateway, in the caller's protocol.
fn error_response(
    gateway: &Gateway,
    call: &Call,
    info: &ErrorInfo,
    candidate: Option<&Candidate<'_>>,
) -> Response<ResponseBody> {
    let mut response = render_error(gateway.codec(call.ingress), info);
    common_headers(response.headers_mut(), call);
    if let Some(candidate) = candidate {
        let headers = response.headers_mut();
        headers.insert(
            HeaderName::from_static("x-switchyard-lane"),
            candidate.lane_header.clone(),
        );
        headers.insert(
            HeaderName::from_static("x-switchyard-provider"),
            candidate.lane.provider_header.clone(),
        );
    }
    response
}

/// Renders `info` as `codec`'s protocol error response.
pub fn render_error(codec: &dyn Codec, info: &ErrorInfo) -> Response<ResponseBody> {
    let rendered = codec.error_response(info);
    let mut builder = Response::builder()
        .status(StatusCode::from_u16(rendered.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    if let Some(headers) = builder.headers_mut() {
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        for (name, value) in rendered.headers {
            headers.insert(name, value);
        }
    }
    builder
        .body(full_body(rendered.body))
        .unwrap_or_else(|_| internal_error())
}

fn internal_error() -> Response<ResponseBody> {
    let mut response = Response::new(
        Full::new(Bytes::from_static(b"{\"error\":\"internal error\"}"))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    response
}
