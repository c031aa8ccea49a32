//! The send step of an attempt: the request made for one lane (the
//! caller's bytes as they came on a same-protocol hop, but for the model;
//! else read once into the IR and written in the lane's protocol with its
//! capabilities, what was dropped reported or refused), sent with the
//! lane's own credentials (never the caller's, unless the provider passes
//! them through), or answered in-process on a `mock://` lane.

use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Uri};
use switchyard_codec::{scan, Codec, Credentials, Outbound};
use switchyard_config::Endpoint;
use switchyard_ir::{DropReason, Dropped, Field, Protocol};
use switchyard_state::call::Call;
use switchyard_state::{Gateway, Lane, UpstreamUrl};
use switchyard_transport::{
    full_body, mock, mock_operation, TransportError, UpstreamBody, UpstreamRequest, UpstreamResponse,
};

use crate::render::{TRACEPARENT, X_REQUEST_ID};

/// Largest upstream body read whole (non-streamed replies and error bodies).
pub(crate) const MAX_UPSTREAM_BODY: usize = 64 << 20;

/// The upstream body and what was dropped translating it.
pub(crate) struct Prepared {
    pub(crate) body: Bytes,
    /// The `x-switchyard-dropped` value, when something was.
    pub(crate) dropped_header: Option<HeaderValue>,
    /// The upstream path, when the operation's endpoint is not chat's.
    pub(crate) path: Option<String>,
    /// The body's content type, when not JSON (a multipart form).
    pub(crate) content_type: Option<HeaderValue>,
    /// Further bodies of a request split into the lane's batch size,
    /// sent with the first; their answers come back in order.
    pub(crate) more: Vec<Bytes>,
}

impl Prepared {
    /// A chat body for the lane's own endpoint.
    pub(crate) fn chat(body: Bytes, dropped_header: Option<HeaderValue>) -> Prepared {
        Prepared { body, dropped_header, path: None, content_type: None, more: Vec::new() }
    }
}

/// What the lane answered: the first (or only) call's response, and the
/// bodies of the rest of a split request, all of them successes.
pub(crate) struct Sent {
    pub(crate) head: UpstreamResponse,
    pub(crate) more: Vec<(HeaderMap, Bytes)>,
}

/// The caller's body as it came, but for its `model`, which becomes the
/// lane's wire model.
pub(crate) fn as_came(call: &Call, wire_model: &str) -> Bytes {
    match &call.model_span {
        Some(span) if call.body.get(span.start + 1..span.end - 1) != Some(wire_model.as_bytes()) => {
            Bytes::from(scan::splice_model(&call.body, span.clone(), wire_model))
        }
        _ => call.body.clone(),
    }
}

/// The most parts of a split request in flight at once.
const SPLIT_CONCURRENCY: usize = 4;

pub(crate) async fn send(
    gateway: &Gateway,
    lane: &Lane,
    call: &Call,
    wire_model: &str,
    prepared: Prepared,
    traceparent: Option<HeaderValue>,
) -> Result<Sent, TransportError> {
    let Prepared { body, path, content_type, more, .. } = prepared;
    let outbound = Outgoing {
        wire_model,
        stream: call.stream,
        request_id: &call.request_id,
        caller_key: call.caller_key(),
        traceparent,
        operation: call.operation,
        path: path.as_deref(),
        content_type,
        caller: Some((&call.headers, call.ingress)),
    };
    if more.is_empty() {
        let head = send_to_lane(gateway, lane, outbound, body).await?;
        return Ok(Sent { head, more: Vec::new() });
    }
    // Boxed: a split request is rare, and its future is twice a plain send's.
    Box::pin(send_split(gateway, lane, outbound, body, more)).await
}

/// A request split into the lane's batch size: every part is sent (a few
/// at a time) and answered before the reply is built. The first part that
/// fails is the lane's answer, judged like any other.
async fn send_split(
    gateway: &Gateway,
    lane: &Lane,
    outbound: Outgoing<'_>,
    body: Bytes,
    more: Vec<Bytes>,
) -> Result<Sent, TransportError> {
    use futures_util::StreamExt;
    let rest = futures_util::stream::iter(more)
        .map(|part| {
            let outbound = outbound.clone();
            async move {
                let answer = send_to_lane(gateway, lane, outbound, part).await?;
                let body = tokio::time::timeout(lane.timeouts.request, collect(answer.body))
                    .await
                    .map_err(|_| TransportError::Io("a split part's body timed out".to_owned()))?
                    .map_err(TransportError::Io)?;
                Ok::<_, TransportError>((answer.status, answer.headers, body))
            }
        })
        .buffered(SPLIT_CONCURRENCY)
        .collect::<Vec<_>>();
    let (head, rest) = futures_util::future::join(send_to_lane(gateway, lane, outbound.clone(), body), rest).await;
    let head = head?;
    let mut parts = Vec::with_capacity(rest.len());
    for answer in rest {
        let (status, headers, body) = answer?;
        if !status.is_success() {
            return Ok(Sent { head: UpstreamResponse { status, headers, body: full_body(body) }, more: Vec::new() });
        }
        parts.push((headers, body));
    }
    Ok(Sent { head, more: parts })
}

/// What an upstream call needs besides the lane and the body.
#[derive(Clone)]
pub(crate) struct Outgoing<'a> {
    pub(crate) wire_model: &'a str,
    pub(crate) stream: bool,
    pub(crate) request_id: &'a HeaderValue,
    pub(crate) caller_key: Option<&'a str>,
    /// The attempt span's W3C trace context, when the request is traced.
    pub(crate) traceparent: Option<HeaderValue>,
    /// What the call asks the lane for.
    pub(crate) operation: switchyard_ir::Operation,
    /// The operation's upstream path, when not chat's.
    pub(crate) path: Option<&'a str>,
    /// The body's content type, when not JSON.
    pub(crate) content_type: Option<HeaderValue>,
    /// The caller's headers and protocol, for those that pass on
    /// ([`forward`]); `None` for the gateway's own calls.
    pub(crate) caller: Option<(&'a HeaderMap, Protocol)>,
}

pub(crate) async fn send_to_lane(
    gateway: &Gateway,
    lane: &Lane,
    out: Outgoing<'_>,
    body: Bytes,
) -> Result<UpstreamResponse, TransportError> {
    let codec = gateway.codec_for(out.operation, lane.protocol);
    let base = match &lane.endpoint {
        Endpoint::Mock => return Ok(mock_answer(codec, lane, &out, &body)),
        Endpoint::Http(base) => base,
    };
    // The lane's own model at its codec's path is built once per lane (a
    // legacy completion's codec has a path of its own).
    let own_path = out.operation != switchyard_ir::Operation::Completion;
    let fresh;
    let url = match (out.path, &lane.path_template) {
        (None, None) if own_path && out.wire_model == &*lane.wire_model => {
            let cell = &lane.upstream_url[usize::from(out.stream)];
            match cell.get() {
                Some(url) => url,
                None => {
                    let built = upstream_url(codec, lane, base, &out)?;
                    cell.get_or_init(|| built)
                }
            }
        }
        _ => {
            fresh = upstream_url(codec, lane, base, &out)?;
            &fresh
        }
    };
    let uri = url.uri.clone();
    // Claude on Vertex: the version in the body, the model in the path.
    let body = match &lane.anthropic_version {
        Some(version) => vertex_body(&body, version),
        None => body,
    };
    let headers = upstream_headers(codec, lane, out, &url.text, &body).await?;
    lane.transport.send(UpstreamRequest { uri, headers, body }, lane.timeouts.response_headers).await
}

/// The in-process fake's answer on a `mock://` lane (it sees the caller
/// headers a real upstream would).
fn mock_answer(codec: &dyn Codec, lane: &Lane, out: &Outgoing<'_>, body: &Bytes) -> UpstreamResponse {
    let path_model = codec.model_in_path().then_some(out.wire_model);
    if !out.operation.is_chat() {
        let content_type = out.content_type.as_ref().and_then(|v| v.to_str().ok());
        return mock_operation::respond(codec, out.operation, path_model, content_type, body);
    }
    let mut headers = HeaderMap::new();
    if let Some((caller_headers, ingress)) = out.caller {
        forward(&mut headers, caller_headers, ingress, codec, lane);
    }
    mock::respond_to(codec, path_model, out.stream, codec.default_framing(), body, &headers)
}

/// The upstream URL of a call: the operation's own path, the provider's
/// path template, or the codec's path for the model.
fn upstream_url(codec: &dyn Codec, lane: &Lane, base: &str, out: &Outgoing<'_>) -> Result<UpstreamUrl, TransportError> {
    let text = match (out.path, &lane.path_template) {
        (Some(path), _) => format!("{base}{path}"),
        (None, Some(template)) => format!("{base}{}", template.render(out.wire_model, codec.path_action(out.stream))),
        (None, None) => format!("{base}{}", codec.upstream_path(out.wire_model, out.stream)),
    };
    match text.parse::<Uri>() {
        Ok(uri) => Ok(UpstreamUrl { uri, text: text.into() }),
        Err(_) => Err(TransportError::Connect(format!("`{text}` is not a valid url"))),
    }
}

/// The upstream request's headers: framing, the gateway's own, the
/// operator's, the lane's credentials (signed over `url` and `body` where
/// the protocol signs) or a fetched bearer, and the caller headers the
/// lane may have.
async fn upstream_headers(
    codec: &dyn Codec,
    lane: &Lane,
    out: Outgoing<'_>,
    url: &str,
    body: &Bytes,
) -> Result<HeaderMap, TransportError> {
    let mut headers = HeaderMap::with_capacity(8);
    let content_type = out.content_type.unwrap_or(HeaderValue::from_static("application/json"));
    headers.insert(http::header::CONTENT_TYPE, content_type);
    headers
        .insert(http::header::USER_AGENT, HeaderValue::from_static(concat!("switchyard/", env!("CARGO_PKG_VERSION"))));
    headers.insert(X_REQUEST_ID, out.request_id.clone());
    if let Some(traceparent) = out.traceparent {
        headers.insert(TRACEPARENT, traceparent);
    }
    if out.stream {
        headers.insert(http::header::ACCEPT, HeaderValue::from_static(codec.default_framing().content_type()));
    }
    // The operator's headers may replace the defaults above (a user agent);
    // config refuses the ones that carry credentials or framing, which the
    // codec and transport own.
    for (name, value) in &lane.extra_headers {
        headers.insert(name.clone(), value.clone());
    }
    match &lane.static_auth {
        Some(auth) => headers.extend(auth.iter().map(|(n, v)| (n.clone(), v.clone()))),
        None => {
            let caller;
            let credentials = if lane.passthrough_credentials {
                caller = out.caller_key.map_or(Credentials::None, |key| Credentials::ApiKey(key.to_owned()));
                &caller
            } else {
                &lane.credentials
            };
            let signing = Outbound { method: "POST", url, body, time: SystemTime::now() };
            let auth = codec
                .auth_headers(credentials, &signing)
                .map_err(|err| TransportError::Connect(format!("signing failed: {err}")))?;
            headers.extend(auth);
        }
    }
    if let Some(token) = &lane.token {
        // Boxed: the fetch's state is large, and unboxed it would grow every
        // send's future (and what each request copies).
        let bearer = Box::pin(token.bearer()).await.map_err(|err| TransportError::Connect(err.to_string()))?;
        headers.insert(http::header::AUTHORIZATION, bearer);
    }
    if let Some((caller_headers, ingress)) = out.caller {
        forward(&mut headers, caller_headers, ingress, codec, lane);
    }
    Ok(headers)
}

/// Passes on the caller headers the lane may have, replacing the
/// gateway's own value of each: those its protocol's callers send
/// (`Codec::caller_headers`, when the caller speaks it; those of the
/// caller's account only with the caller's own key) and those the
/// operator listed (`forward_headers`). No other caller header goes
/// upstream.
fn forward(headers: &mut HeaderMap, caller: &HeaderMap, ingress: Protocol, codec: &dyn Codec, lane: &Lane) {
    let own = if ingress == lane.protocol { codec.caller_headers() } else { &[] };
    let own = own.iter().filter(|header| !header.credential || lane.passthrough_credentials);
    let names = own.map(|header| header.name).chain(lane.forward_headers.iter().map(HeaderName::as_str));
    for name in names {
        let mut values = caller.get_all(name).iter().peekable();
        if values.peek().is_none() {
            continue;
        }
        let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else { continue };
        headers.remove(&name);
        for value in values {
            headers.append(name.clone(), value.clone());
        }
    }
}

/// What a lane loses of the caller's own headers, reported with what the
/// translation dropped: a lane of another protocol its feature headers,
/// any lane but one sending the caller's own key of its protocol the
/// headers of the caller's account ([`forward`]). A lane's
/// `forward_headers` may still pass one on.
pub(crate) fn lost_headers(gateway: &Gateway, call: &Call, lane: &Lane) -> Vec<Dropped> {
    let same = call.ingress == lane.protocol;
    let lost_on_lane = |header: &&switchyard_codec::CallerHeader| match same {
        true => header.credential && !lane.passthrough_credentials,
        false => header.features || header.credential,
    };
    let own = gateway.codec(call.ingress).caller_headers();
    if !own.iter().any(|header| lost_on_lane(&header)) {
        return Vec::new();
    }
    // The caller's names are walked once and compared by length first: a
    // lookup by `&str` parses and hashes the name, and most requests carry
    // none of these headers.
    call.headers
        .keys()
        .filter_map(|name| {
            let name = name.as_str();
            own.iter().filter(lost_on_lane).find(|header| header.name.len() == name.len() && header.name == name)
        })
        .filter(|header| !lane.forward_headers.iter().any(|kept| kept.as_str() == header.name))
        .map(|header| Dropped {
            field: Field::Unmodelled,
            extra_path: Some(header.name.to_owned()),
            reason: DropReason::Unsupported,
        })
        .collect()
}

pub(crate) async fn collect(body: UpstreamBody) -> Result<Bytes, String> {
    switchyard_transport::collect_limited(body, MAX_UPSTREAM_BODY).await.map_err(|err| err.to_string())
}

/// An Anthropic body as Claude on Vertex AI takes it: `anthropic_version`
/// in the body, no `model` (the path names it). A body that is not a JSON
/// object goes as it is (the upstream says what is wrong with it).
fn vertex_body(body: &Bytes, version: &str) -> Bytes {
    let Ok(serde_json::Value::Object(mut object)) = serde_json::from_slice::<serde_json::Value>(body) else {
        return body.clone();
    };
    object.shift_remove("model");
    // First, where Vertex's reference writes it.
    object.shift_insert(0, "anthropic_version".to_owned(), serde_json::Value::String(version.to_owned()));
    serde_json::to_vec(&object).map_or_else(|_| body.clone(), Bytes::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vertex_claude_body_carries_its_version_and_no_model() {
        let body = Bytes::from_static(br#"{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[]}"#);
        let sent = vertex_body(&body, "vertex-2023-10-16");
        assert_eq!(&sent[..], br#"{"anthropic_version":"vertex-2023-10-16","max_tokens":8,"messages":[]}"#);
        // Not an object: as it came.
        let odd = Bytes::from_static(b"[1]");
        assert_eq!(vertex_body(&odd, "v"), odd);
    }
}
