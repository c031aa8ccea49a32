//! The raw route: `/{any method} /passthrough/{provider}/{*path}` reaches
//! the rest of a vendor's API — the endpoints Switchyard does not model —
//! through the gateway's governance instead of around it.
//!
//! Closed unless the operator opens it per provider
//! (`providers.<p>.passthrough: { paths, methods }`, an allow-list), and
//! then only for keys granted it (`passthrough: [<provider>]`). A request
//! passes, in order: its key, in the provider protocol's own scheme (a
//! bearer, `x-api-key`, `x-goog-api-key` or `?key=`, a SigV4 signature by a
//! minted pair); the key's grant (403); its path checked as it came
//! (`config::passthrough::check_path`: no dot, empty or encoded-separator
//! segment, 400), then matched against the allow-list (404) and its method
//! (405); its body's declared size (413); admission on the key's chain
//! (a spent budget, a rate, a quota or concurrency limit: the vendor's
//! refusal with `Retry-After`). Everything refused is answered in the
//! provider protocol's error shape.
//!
//! The upstream URL is the provider's `base_url` and the caller's path as it
//! came (the host is never the caller's), with its query (but a Gemini
//! caller's `key`). The caller's headers pass but for hop-by-hop ones, its
//! credentials, account selectors and the gateway's own (`headers`); the
//! provider's credential is added the way its lanes add theirs (`api_key`,
//! SigV4 over the forwarded request, a fetched token, the operator's
//! `headers`). Both bodies stream: the request under `server.body_limit`
//! and `server.body_read_timeout` (`body::Bounded`; only a SigV4 signature,
//! the caller's or the provider's, makes it be read whole first, as every
//! signed request is), the reply under the provider's `stream_idle` and
//! `request` timeouts, metered as it passes (`body::Metered`): usage read by
//! the protocol's codec from an event stream (`codec::tap::UsageTap`) or a
//! JSON reply (`Codec::read_usage`, on a copy of at most 1 MiB), settled
//! on one ledger row of operation `passthrough` when the reply ends, or
//! when its caller leaves.

mod body;
mod headers;

use std::sync::Arc;
use std::time::SystemTime;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::routing::any;
use axum::Router;
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use switchyard_codec::{Credentials, Outbound};
use switchyard_config::passthrough::check_path;
use switchyard_config::Endpoint;
use switchyard_engine::settle::{RawNote, Record};
use switchyard_ir::{ErrorInfo, ErrorKind, Protocol};
use switchyard_state::governance::Caller;
use switchyard_state::{Gateway, Lane};
use switchyard_transport::{full_body, RawRequest, TransportError};

use crate::server::{read_body, request_id};

/// Where the raw route starts.
pub(crate) const PREFIX: &str = "/passthrough/";

/// The longest path a ledger row keeps.
const MAX_KEPT_PATH: usize = 1_024;

/// The raw route.
pub(crate) fn routes() -> Router<Arc<Gateway>> {
    Router::new().route("/passthrough/{provider}/{*path}", any(passthrough))
}

/// The protocol of the provider whose raw route `path` is, when it opens
/// one (the listener's refusals are then in its shape).
pub(crate) fn protocol_of(providers: &[(Arc<str>, Protocol)], path: &str) -> Option<Protocol> {
    let rest = path.strip_prefix(PREFIX)?;
    let name = rest.split('/').next()?;
    providers.iter().find(|(provider, _)| **provider == *name).map(|(_, protocol)| *protocol)
}

async fn passthrough(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    // Boxed where it is made: the handler's future is large, and only this
    // route pays for it.
    Box::pin(serve(gateway, request)).await
}

/// One request of the raw route, from its key to its reply's head (the
/// reply's body settles the record when it ends).
async fn serve(gateway: Arc<Gateway>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let mut body = Some(body);
    let Some((index, lane, path)) = route_of(&gateway, parts.uri.path()) else {
        return unknown(parts.uri.path());
    };
    let protocol = lane.protocol;
    let request_id = request_id(&parts.headers);
    let mut record = Record::begin(&gateway, protocol, request_id.clone(), &parts.headers);
    let kept_path = bounded(path);
    record.raw_route(RawNote {
        lane: lane.name.clone(),
        method: parts.method.clone(),
        path: kept_path,
        model: None,
        card: lane.card.clone(),
    });
    let reject = |record: Box<Record>, caller: Option<Caller>, info: ErrorInfo| {
        refuse(&gateway, protocol, record, caller, &info, None)
    };
    // Who is calling: a key on its headers before a byte of the body is
    // read; a signature, which covers the body, after it.
    let Some(governance) = &gateway.governance else {
        let info = ErrorInfo::new(ErrorKind::Authentication, "the raw route takes only a granted key");
        return reject(record, None, info);
    };
    let signed = switchyard_engine::authenticate::is_signed(&parts.headers);
    let client = parts.extensions.get::<switchyard_state::ClientName>();
    let mut whole = None;
    let caller = if signed {
        if let Err(info) = governance.check_signer(&parts.headers) {
            return reject(record, None, info);
        }
        let budget = parts.extensions.get::<crate::server::listener::ConnBudget>().cloned();
        match read_body(body.take().unwrap_or_default(), &gateway.config.server, budget.as_ref()).await {
            Ok((bytes, _charge)) => {
                let found = switchyard_engine::authenticate::caller_of(
                    &gateway,
                    protocol,
                    parts.method.as_str(),
                    &parts.uri,
                    &parts.headers,
                    client,
                    &bytes,
                );
                whole = Some(bytes);
                found
            }
            Err(info) => return reject(record, None, info),
        }
    } else {
        switchyard_engine::authenticate::caller_of(
            &gateway,
            protocol,
            parts.method.as_str(),
            &parts.uri,
            &parts.headers,
            client,
            &[],
        )
    };
    let caller = match caller {
        Ok(Some(caller)) => caller,
        Ok(None) => {
            let info = ErrorInfo::new(ErrorKind::Authentication, "the raw route takes only a granted key");
            return reject(record, None, info);
        }
        Err(info) => return reject(record, None, info),
    };
    // Its grant, before it learns anything of the allow-list.
    if let Err(denied) = governance.passthrough_grant(&caller, &lane.provider) {
        switchyard_engine::admit::conduct_refused(&gateway, Some(&caller));
        return reject(record, Some(caller), denied.info);
    }
    let Some(route) = gateway.config.providers[index].passthrough.as_ref() else {
        return reject(record, Some(caller), closed(&lane.provider));
    };
    if let Err(why) = check_path(path) {
        let info = ErrorInfo::new(ErrorKind::InvalidRequest, format!("{why}: the raw route sends a path as it came"));
        return reject(record, Some(caller), info);
    }
    if !route.allows_path(path) {
        let message = format!("`{path}` is not open on the raw route of `{}`", lane.provider);
        return reject(record, Some(caller), ErrorInfo::new(ErrorKind::NotFound, message));
    }
    if !route.allows_method(parts.method.as_str()) {
        let allow = route.methods.join(", ");
        let message = format!("`{path}` takes {allow} on the raw route of `{}`, not {}", lane.provider, parts.method);
        let info = ErrorInfo::new(ErrorKind::InvalidRequest, message).with_status(405);
        let mut response = refuse(&gateway, protocol, record, Some(caller), &info, None);
        *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        if let Ok(allow) = HeaderValue::try_from(allow) {
            response.headers_mut().insert(http::header::ALLOW, allow);
        }
        return response;
    }
    let limit = gateway.config.server.body_limit;
    if declared_length(&parts.headers).is_some_and(|length| length > limit as u64) {
        let message = format!("request body is larger than the {limit} byte limit");
        return reject(record, Some(caller), ErrorInfo::new(ErrorKind::RequestTooLarge, message));
    }
    // Admission on the key's chain: budgets, rates, quotas, concurrency.
    let end_user = end_user(&gateway, &caller, &parts.headers);
    let hold = match governance.admit_passthrough(&caller, end_user.as_deref()).await {
        Ok(hold) => hold,
        Err(denied) => {
            if denied.own {
                switchyard_engine::admit::conduct_refused(&gateway, Some(&caller));
            }
            return refuse(&gateway, protocol, record, Some(caller), &denied.info, denied.retry_after);
        }
    };
    record.for_end_user(end_user);
    record.admitted(Some(caller), Some(hold), 0);
    // A SigV4-signing provider signs the body: it is read whole, as every
    // signed request is. Every other body streams.
    let signs = matches!(lane.credentials, Credentials::Aws { .. });
    let (upstream_body, tripped) = match whole {
        Some(bytes) => (BodyToSend::Whole(bytes), None),
        None if signs => {
            let budget = parts.extensions.get::<crate::server::listener::ConnBudget>().cloned();
            match read_body(body.take().unwrap_or_default(), &gateway.config.server, budget.as_ref()).await {
                Ok((bytes, _charge)) => (BodyToSend::Whole(bytes), None),
                Err(info) => return answer_error(&gateway, protocol, record, &info),
            }
        }
        None => {
            let (bounded, tripped) =
                body::Bounded::new(body.take().unwrap_or_default(), limit, gateway.config.server.body_read_timeout);
            (BodyToSend::Stream(bounded), Some(tripped))
        }
    };
    let url = match upstream_url(lane, path, parts.uri.query()) {
        Ok(url) => url,
        Err(info) => return answer_error(&gateway, protocol, record, &info),
    };
    let signed_body = match &upstream_body {
        BodyToSend::Whole(bytes) => Some(bytes.clone()),
        BodyToSend::Stream(_) => None,
    };
    let headers =
        match upstream_headers(&gateway, lane, &parts.method, &url, &parts.headers, signed_body, &request_id).await {
            Ok(headers) => headers,
            Err(info) => return answer_error(&gateway, protocol, record, &info),
        };
    let body = match upstream_body {
        BodyToSend::Whole(bytes) => full_body(bytes),
        BodyToSend::Stream(bounded) => http_body_util::BodyExt::boxed_unsync(bounded),
    };
    let started = std::time::Instant::now();
    let sent = lane
        .transport
        .send_raw(
            RawRequest { method: parts.method.clone(), uri: url.0, headers, body },
            lane.timeouts.response_headers,
        )
        .await;
    record.waited(started.elapsed());
    let answer = match sent {
        Ok(answer) => answer,
        Err(err) => {
            let info = match tripped.as_ref().and_then(body::Tripped::why) {
                Some(info) => info,
                None => unanswered(&lane.provider, &err),
            };
            return answer_error(&gateway, protocol, record, &info);
        }
    };
    let status = answer.status;
    let mut reply_headers = answer.headers;
    headers::reply(&mut reply_headers);
    reply_headers.insert(crate::server::X_REQUEST_ID, request_id);
    reply_headers.insert(X_SWITCHYARD_PROVIDER, lane.provider_header.clone());
    let meter = match status.is_success() && parts.method != Method::HEAD {
        true => body::Meter::for_reply(gateway.codec(protocol), &reply_headers),
        false => body::Meter::None,
    };
    let metered = body::Metered::new(
        body::Settle { gateway: gateway.clone(), provider: index, record },
        answer.body,
        meter,
        status.as_u16(),
        &lane.timeouts,
    );
    let mut response = Response::new(Body::new(metered));
    *response.status_mut() = status;
    *response.headers_mut() = reply_headers;
    response
}

const X_SWITCHYARD_PROVIDER: http::HeaderName = http::HeaderName::from_static("x-switchyard-provider");

/// What goes upstream as the request body.
enum BodyToSend {
    /// Read whole (a signature covers it).
    Whole(bytes::Bytes),
    /// As it arrives.
    Stream(body::Bounded),
}

/// The provider a raw-route path names (by index), its route's lane, and
/// the vendor's path after it (as it came, percent-encoded).
fn route_of<'a>(gateway: &'a Gateway, raw: &'a str) -> Option<(usize, &'a Lane, &'a str)> {
    let rest = raw.strip_prefix(PREFIX)?;
    let (name, path) = rest.split_at(rest.find('/')?);
    let index = gateway.config.providers.iter().position(|p| &*p.name == name)?;
    let lane = gateway.passthrough.get(index)?.as_deref();
    match lane {
        Some(lane) => Some((index, lane, path)),
        // A provider that opens no raw route: as if it did not exist.
        None => None,
    }
}

/// No open raw route by that name: the gateway's plain not-found (a caller
/// learns nothing of which providers exist).
fn unknown(path: &str) -> Response {
    let name = path.strip_prefix(PREFIX).and_then(|rest| rest.split('/').next()).unwrap_or_default();
    let body = serde_json::json!({"error": {
        "message": format!("no raw route for `{}`: a provider opens one with providers.<name>.passthrough", bounded(name)),
        "type": "not_found_error", "param": null, "code": null,
    }});
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = StatusCode::NOT_FOUND;
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn closed(provider: &str) -> ErrorInfo {
    ErrorInfo::new(ErrorKind::NotFound, format!("provider `{provider}` opens no raw route"))
}

/// A refusal before anything was sent, in the provider's protocol
/// (recorded as a refusal: no spend; `Retry-After` when waiting helps).
fn refuse(
    gateway: &Gateway,
    protocol: Protocol,
    mut record: Box<Record>,
    caller: Option<Caller>,
    info: &ErrorInfo,
    retry_after: Option<u64>,
) -> Response {
    record.refused_with(caller, info.kind);
    let mut response = switchyard_engine::render_error(gateway.codec(protocol), info).map(Body::new);
    response.headers_mut().insert(crate::server::X_REQUEST_ID, record.request_id().clone());
    if let Some(seconds) = retry_after {
        response.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    record.finish_detached(response.status().as_u16());
    response
}

/// An admitted request that got no answer from upstream (or could not be
/// sent), in the provider's protocol; settled with nothing used.
fn answer_error(gateway: &Gateway, protocol: Protocol, mut record: Box<Record>, info: &ErrorInfo) -> Response {
    let mut response = switchyard_engine::render_error(gateway.codec(protocol), info).map(Body::new);
    response.headers_mut().insert(crate::server::X_REQUEST_ID, record.request_id().clone());
    record.finish_detached(response.status().as_u16());
    response
}

/// Why no answer came, in words a caller can act on (the upstream's
/// address is the operator's business).
fn unanswered(provider: &str, err: &TransportError) -> ErrorInfo {
    match err {
        TransportError::HeadersTimeout(after) => {
            ErrorInfo::new(ErrorKind::Timeout, format!("provider `{provider}` sent no answer within {after:?}"))
        }
        TransportError::Connect(_) | TransportError::Io(_) => {
            tracing::warn!(provider, error = %err, "a raw-route request got no answer");
            ErrorInfo::new(ErrorKind::Unavailable, format!("provider `{provider}` could not be reached"))
                .with_status(502)
        }
    }
}

/// The body's declared length, when it declares one.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(http::header::CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}

/// The end user a request is made for: a token caller's subject, else the
/// operator's header (`end_users.header`), cut to `end_users.max_length`.
fn end_user(gateway: &Gateway, caller: &Caller, headers: &HeaderMap) -> Option<Box<str>> {
    let config = &gateway.config.end_users;
    let named = match &caller.subject {
        Some(subject) => subject.as_ref(),
        None => headers.get(&config.header).and_then(|v| v.to_str().ok())?,
    };
    let named = named.trim();
    if named.is_empty() {
        return None;
    }
    Some(Box::from(bounded_to(named, config.max_length)))
}

/// The upstream URL: the provider's base and the caller's path as it came,
/// with its query (a Gemini caller's `key` taken out: it is the caller's
/// credential). Its authority is checked to be the base's: no path can
/// move the request to another host.
struct UpstreamUrl(Uri, String);

fn upstream_url(lane: &Lane, path: &str, query: Option<&str>) -> Result<UpstreamUrl, ErrorInfo> {
    let Endpoint::Http(base) = &lane.endpoint else {
        return Err(closed(&lane.provider));
    };
    let query = query.map(|query| match lane.protocol {
        Protocol::Gemini => {
            query.split('&').filter(|pair| pair.split('=').next() != Some("key")).collect::<Vec<_>>().join("&")
        }
        _ => query.to_owned(),
    });
    let text = match query.as_deref() {
        Some(query) if !query.is_empty() => format!("{base}{path}?{query}"),
        _ => format!("{base}{path}"),
    };
    let invalid = || ErrorInfo::new(ErrorKind::InvalidRequest, "the path and query do not make a URL");
    let uri: Uri = text.parse().map_err(|_| invalid())?;
    let base_uri: Uri = base.parse().map_err(|_| invalid())?;
    if uri.authority() != base_uri.authority() || uri.scheme() != base_uri.scheme() {
        return Err(invalid());
    }
    Ok(UpstreamUrl(uri, text))
}

/// The upstream request's headers: the caller's that may pass, the
/// gateway's request id, the operator's `headers`, then the provider's
/// credential (signed over method, URL and body where it signs, or a
/// fetched bearer), and the protocol's own caller headers as the caller
/// sent them (Anthropic's version and betas). `body`: the body, when it
/// was read whole (a signature covers it).
async fn upstream_headers(
    gateway: &Gateway,
    lane: &Lane,
    method: &Method,
    url: &UpstreamUrl,
    caller: &HeaderMap,
    body: Option<bytes::Bytes>,
    request_id: &HeaderValue,
) -> Result<HeaderMap, ErrorInfo> {
    let codec = gateway.codec(lane.protocol);
    let mut headers = headers::request(caller, &gateway.config.end_users.header);
    headers.insert(crate::server::X_REQUEST_ID, request_id.clone());
    for (name, value) in &lane.extra_headers {
        headers.insert(name.clone(), value.clone());
    }
    let failed = |what: String| {
        tracing::error!(provider = %lane.provider, error = %what, "a raw-route request could not be signed");
        ErrorInfo::new(ErrorKind::Internal, format!("the request to `{}` could not be authenticated", lane.provider))
            .with_status(502)
    };
    match &lane.static_auth {
        Some(auth) => {
            for (name, value) in auth {
                headers.insert(name.clone(), value.clone());
            }
        }
        None => {
            let bytes = body.as_deref().unwrap_or_default();
            let signing = Outbound { method: method.as_str(), url: &url.1, body: bytes, time: SystemTime::now() };
            let auth = codec.auth_headers(&lane.credentials, &signing).map_err(|err| failed(err.to_string()))?;
            for (name, value) in auth {
                headers.insert(name, value);
            }
        }
    }
    if let Some(token) = &lane.token {
        let bearer = Box::pin(token.bearer()).await.map_err(|err| failed(err.to_string()))?;
        headers.insert(http::header::AUTHORIZATION, bearer);
    }
    // Never those of the caller's account: the operator's key is the lane's.
    for own in codec.caller_headers().iter().filter(|own| !own.credential) {
        let mut values = caller.get_all(own.name).iter().peekable();
        if values.peek().is_none() {
            continue;
        }
        let Ok(name) = http::HeaderName::from_bytes(own.name.as_bytes()) else { continue };
        headers.remove(&name);
        for value in values {
            headers.append(name.clone(), value.clone());
        }
    }
    Ok(headers)
}

/// At most [`MAX_KEPT_PATH`] bytes of `text`.
fn bounded(text: &str) -> String {
    bounded_to(text, MAX_KEPT_PATH).to_owned()
}

/// At most `max` bytes of `text`, cut on a character boundary.
fn bounded_to(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_path_names_its_provider_by_its_first_segment() {
        let providers = vec![(Arc::from("openai"), Protocol::OpenAi), (Arc::from("claude"), Protocol::Anthropic)];
        assert_eq!(protocol_of(&providers, "/passthrough/claude/v1/models"), Some(Protocol::Anthropic));
        assert_eq!(protocol_of(&providers, "/passthrough/openai/v1/files"), Some(Protocol::OpenAi));
        assert_eq!(protocol_of(&providers, "/passthrough/other/v1/files"), None);
        assert_eq!(protocol_of(&providers, "/v1/chat/completions"), None);
    }

    #[test]
    fn a_kept_path_is_cut_on_a_character() {
        assert_eq!(bounded_to("aé", 2), "a");
        assert_eq!(bounded_to("abc", 10), "abc");
    }
}
