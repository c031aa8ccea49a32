//! A streamable HTTP server: one POST per message through the SSRF-guarded
//! client, its answer read as one JSON message or as an event stream whose
//! notifications reach the caller as they come, until the answer to the
//! request sent. The server's session id rides on every message after
//! `initialize`; a 404 for it means the server forgot the session.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use switchyard_codec::frame::SseDecoder;
use switchyard_transport::hooks::HookClient;
use tokio::sync::mpsc;

use super::{CallError, Sent};
use crate::rpc;

/// The most one answer (or one event) may hold.
const MAX_ANSWER_BYTES: usize = 16 << 20;

/// `mcp-session-id`.
pub const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
/// `mcp-protocol-version`.
pub const VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `mcp-method` (2026-07-28: the request's method, repeated).
pub const METHOD_HEADER: HeaderName = HeaderName::from_static("mcp-method");
/// `mcp-name` (2026-07-28: the tool, prompt or resource named, repeated).
pub const NAME_HEADER: HeaderName = HeaderName::from_static("mcp-name");

/// One message to POST.
pub struct Post<'a> {
    /// The endpoint.
    pub url: &'a str,
    /// The message.
    pub message: &'a Value,
    /// The server's session, once it gave one.
    pub session: Option<&'a str>,
    /// The protocol version agreed with it, after `initialize`.
    pub version: Option<&'a str>,
    /// `Authorization`, when the server gets one.
    pub authorization: Option<HeaderValue>,
    /// For a stateless (2026-07-28) server: the method and the name the
    /// request carries, repeated in `mcp-method` and `mcp-name`.
    pub routing: Option<(&'a str, Option<&'a str>)>,
    /// How long the exchange may take.
    pub timeout: Duration,
}

/// POSTs `post.message`; a request's answer comes back (a notification's
/// is `None`), with the session id the server named, and every
/// notification on its stream goes to `events` first.
pub async fn post(
    client: &HookClient,
    post: Post<'_>,
    events: Option<&mpsc::Sender<Value>>,
) -> Result<(Option<Value>, Option<String>), CallError> {
    let body = serde_json::to_vec(post.message).map_err(|err| CallError::NotSent(err.to_string()))?;
    let mut request = Request::post(post.url)
        .header(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"))
        .header(http::header::ACCEPT, HeaderValue::from_static("application/json, text/event-stream"))
        .header(http::header::USER_AGENT, HeaderValue::from_static(concat!("switchyard/", env!("CARGO_PKG_VERSION"))))
        .body(Full::new(Bytes::from(body)))
        .map_err(|err| CallError::NotSent(err.to_string()))?;
    let headers = request.headers_mut();
    if let Some(session) = post.session.and_then(|s| HeaderValue::from_str(s).ok()) {
        headers.insert(SESSION_HEADER, session);
    }
    if let Some(version) = post.version.and_then(|v| HeaderValue::from_str(v).ok()) {
        headers.insert(VERSION_HEADER, version);
    }
    if let Some(authorization) = post.authorization {
        headers.insert(http::header::AUTHORIZATION, authorization);
    }
    if let Some((method, name)) = post.routing {
        if let Ok(method) = HeaderValue::from_str(method) {
            headers.insert(METHOD_HEADER, method);
        }
        if let Some(name) = name.and_then(|name| HeaderValue::from_str(&rpc::encode_header_value(name)).ok()) {
            headers.insert(NAME_HEADER, name);
        }
    }
    let exchange = async {
        let response = client.send(request, post.timeout).await.map_err(|err| match err {
            // A refused connection never reached the server.
            switchyard_transport::hooks::HookError::Transport(message) if message.starts_with("connect: ") => {
                CallError::NotSent(message)
            }
            other => CallError::Lost(other.to_string()),
        })?;
        let status = response.status();
        let session = response.headers().get(&SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
        if status == StatusCode::NOT_FOUND && post.session.is_some() {
            return Err(CallError::SessionGone);
        }
        let is_request = post.message.get("id").is_some();
        if status == StatusCode::ACCEPTED || !is_request {
            return match status.is_success() {
                true => Ok((None, session)),
                false => Err(CallError::Refused(status.as_u16())),
            };
        }
        let streamed = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut body = response.into_body();
        if !streamed {
            let bytes = read_all(&mut body).await?;
            // A 4xx or 5xx may still carry a JSON-RPC error: it is the answer.
            return match serde_json::from_slice::<Value>(&bytes) {
                Ok(answer) if answer.get("error").is_some() || status.is_success() => Ok((Some(answer), session)),
                _ if status.is_server_error() => Err(CallError::Lost(format!("answered {status}"))),
                _ => Err(CallError::Refused(status.as_u16())),
            };
        }
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|err| CallError::Lost(err.to_string()))?;
            let Ok(data) = frame.into_data() else { continue };
            decoder.feed(&data, &mut out).map_err(|err| CallError::Lost(err.to_string()))?;
            for event in out.drain(..) {
                if event.data.trim().is_empty() {
                    continue; // a priming event: nothing to read
                }
                let Ok(message) = serde_json::from_str::<Value>(&event.data) else { continue };
                match rpc::classify(message) {
                    rpc::Upstream::Answer(answer) => return Ok((Some(answer), session)),
                    rpc::Upstream::Notification(note) => {
                        if let Some(events) = events {
                            let _ = events.send(note).await;
                        }
                    }
                    // Requests of the server's own (sampling, elicitation)
                    // are not relayed: the server gets no answer and goes on.
                    rpc::Upstream::Request(_) => {}
                }
            }
        }
        Err(CallError::Lost("the stream ended before the answer".into()))
    };
    tokio::time::timeout(post.timeout, exchange)
        .await
        .map_err(|_| CallError::Lost(format!("no answer within {:?}", post.timeout)))?
}

async fn read_all(body: &mut hyper::body::Incoming) -> Result<Vec<u8>, CallError> {
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|err| CallError::Lost(err.to_string()))?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > MAX_ANSWER_BYTES {
                return Err(CallError::Lost(format!("an answer larger than {MAX_ANSWER_BYTES} bytes")));
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes)
}

/// Opens a session with the server at `url`: `initialize`, then
/// `notifications/initialized`. The session id (if it keeps sessions),
/// the version agreed and the server's answer come back.
pub async fn initialize(
    client: &HookClient,
    url: &str,
    authorization: Option<HeaderValue>,
    timeout: Duration,
) -> Result<Sent, CallError> {
    let hello = rpc::request(0, "initialize", super::client_hello());
    let post_hello = Post {
        url,
        message: &hello,
        session: None,
        version: None,
        authorization: authorization.clone(),
        timeout,
        routing: None,
    };
    let (answer, session) = post(client, post_hello, None).await?;
    let answer = answer.ok_or_else(|| CallError::Lost("initialize had no answer".into()))?;
    let Some(result) = answer.get("result") else {
        return Err(CallError::Refused(502));
    };
    let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or(rpc::VERSIONS[0]).to_owned();
    let note = rpc::notification("notifications/initialized", None);
    let ready = Post {
        url,
        message: &note,
        session: session.as_deref(),
        version: Some(&version),
        authorization,
        timeout,
        routing: None,
    };
    post(client, ready, None).await?;
    Ok(Sent { session, version })
}
