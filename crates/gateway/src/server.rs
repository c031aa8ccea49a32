//! The HTTP surface: the six ingress routes of the contract, the model list,
//! health, the admin listener and the vendor-fake server. Each ingress frames
//! the caller's request (body limit and read timeout, the connection's body
//! budget, content type, where the model and the stream flag are) and hands
//! it to the engine; every error written here is in the caller's own
//! protocol. `listener` owns sockets and connections.

mod conn_io;
pub mod listener;
mod models;
pub mod tls;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use switchyard_codec::ingress::{Asks, FramingFrom, Model, Route, Stream};
use switchyard_codec::{scan, Framing};
use switchyard_ir::{ErrorInfo, ErrorKind, Operation, Protocol};

pub use listener::{serve, ListenerStats, LiveRouter, Settings};
use listener::{ConnBudget, Refusal, Refuse};
use switchyard_engine;
use switchyard_engine::settle::Record;
use switchyard_state::call::Call;
use switchyard_state::Gateway;

/// The data-plane router: every protocol's ingress routes, the model list
/// and health.
pub fn router(gateway: Arc<Gateway>) -> Router {
    let base = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/v1/models", get(models::list))
        .route("/v1beta/models", get(models::list_gemini))
        // The same paths as Gemini's POST actions (the method tells them apart).
        .route("/v1/models/{*target}", get(models::get))
        .route("/v1beta/models/{*target}", get(models::get_gemini));
    Protocol::ALL
        .into_iter()
        .fold(base, |router, protocol| ingress_routes(router, gateway.codecs, protocol))
        .merge(switchyard_kept::routes())
        .merge(switchyard_mcp::routes())
        .merge(switchyard_a2a::routes())
        .merge(switchyard_duplex::routes())
        .merge(crate::passthrough::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(gateway)
}

/// A protocol's ingress routes, built from its table in the registry. A
/// route whose body names the model reads nothing of the path or query.
fn ingress_routes(router: Router<Arc<Gateway>>, codecs: crate::CodecFor, protocol: Protocol) -> Router<Arc<Gateway>> {
    let callers = codecs(protocol).ingress().routes.iter().filter(|route| route.serves.callers());
    callers.fold(router, |router, &route| {
        let handler = match (route.model, route.framing) {
            (Model::Body, FramingFrom::Fixed(_)) => {
                post(move |State(gateway): State<Arc<Gateway>>, request: Request| {
                    let entry = Entry { protocol, route, params: Vec::new(), query: None };
                    handle(gateway, entry, request)
                })
            }
            _ => post(
                move |State(gateway): State<Arc<Gateway>>,
                      Path(params): Path<Vec<String>>,
                      RawQuery(query): RawQuery,
                      request: Request| {
                    handle(gateway, Entry { protocol, route, params, query }, request)
                },
            ),
        };
        router.route(route.path, handler)
    })
}

/// The admin-plane router (its own loopback listener): the lane-state view
/// lives here, off the data plane, because topology and breaker reasons are
/// the operator's business.
pub fn admin_router(gateway: Arc<Gateway>) -> Router {
    let guarded = Router::new()
        .route("/v1/models", get(models::list))
        .route("/stats", get(stats))
        .route("/metrics", get(metrics))
        .with_state(gateway.clone())
        .merge(switchyard_admin::api::routes(gateway.clone()))
        .merge(crate::playground::routes(gateway.clone(), router(gateway.clone())))
        .layer(axum::middleware::from_fn_with_state(gateway.clone(), switchyard_admin::api::require_token));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(gateway.clone())
        .merge(switchyard_admin::console::routes(gateway))
        .merge(guarded)
        .fallback(switchyard_admin::api::not_found)
        .method_not_allowed_fallback(switchyard_admin::api::method_not_allowed)
}

/// The data listener's settings: the config's limits, with refusals
/// answered in the caller's protocol (told by the request's path).
pub fn data_settings(gateway: &Arc<Gateway>, stats: Arc<ListenerStats>) -> Settings {
    // `/metrics` reads the data listener's counters.
    let _ = gateway.listener_stats.set(stats.clone());
    let codecs = gateway.codecs;
    let raw_routes: Vec<(Arc<str>, Protocol)> = gateway
        .config
        .providers
        .iter()
        .filter(|p| p.passthrough.is_some())
        .map(|p| (p.name.clone(), p.protocol))
        .collect();
    let refuse: Refuse = Arc::new(move |parts: &http::request::Parts, refusal: Refusal| {
        let path = parts.uri.path();
        let protocol = crate::passthrough::protocol_of(&raw_routes, path).or_else(|| protocol_of(codecs, path));
        let Some(protocol) = protocol else {
            return listener::plain_refusal(refusal);
        };
        let message = match refusal {
            Refusal::Connections => "the gateway has too many open connections; retry shortly",
            Refusal::InFlight => "the gateway has too many requests in flight; retry shortly",
        };
        let info = ErrorInfo::new(ErrorKind::Overloaded, message).with_status(503);
        let mut response = switchyard_engine::render_error(codecs(protocol), &info).map(Body::new);
        response.headers_mut().insert(axum::http::header::RETRY_AFTER, HeaderValue::from_static("1"));
        response
    });
    let client_names = gateway.config.server.tls.as_ref().is_some_and(|tls| tls.client_identity.is_some());
    Settings { limits: gateway.config.server.clone(), refuse, stats, tls: None, peer: false, client_names }
}

/// The caller's protocol, from a data-plane path.
fn protocol_of(codecs: crate::CodecFor, path: &str) -> Option<Protocol> {
    Protocol::ALL.into_iter().find(|&protocol| (codecs(protocol).ingress().owns)(path))
}

async fn healthz() -> &'static str {
    "ok"
}

/// Readiness for load balancers: 200 while serving with some pool able to
/// serve; 503 while starting, draining or with no usable lane, with a
/// reason per pool either way.
async fn readyz(State(gateway): State<Arc<Gateway>>) -> Response {
    let readiness = switchyard_state::lifecycle::readiness(&gateway, std::time::Instant::now());
    let status = if readiness.ready() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, axum::Json(readiness)).into_response()
}

async fn stats(State(gateway): State<Arc<Gateway>>) -> Response {
    let body = switchyard_admin::stats::stats(&gateway);
    ([(axum::http::header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// `GET /metrics`: the Prometheus text exposition.
async fn metrics(State(gateway): State<Arc<Gateway>>) -> Response {
    let registry = switchyard_admin::scrape::registry(&gateway);
    let body = switchyard_admin::scrape::render(&registry);
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], body).into_response()
}

async fn not_found(uri: axum::http::Uri) -> Response {
    let body = serde_json::json!({"error": {"message": format!("no route for {}", uri.path()), "type": "not_found_error", "param": null, "code": null}});
    (StatusCode::NOT_FOUND, [(axum::http::header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// A known route called with the wrong method: an error in the route's own
/// protocol (an SDK reads it as its usual error), plain JSON elsewhere.
async fn method_not_allowed(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let path = request.uri().path();
    let (allow, mut response) = match protocol_of(gateway.codecs, path) {
        Some(protocol) => {
            let info =
                ErrorInfo::new(ErrorKind::InvalidRequest, format!("{path} takes POST, not {}", request.method()))
                    .with_status(405);
            ("POST", switchyard_engine::render_error(gateway.codec(protocol), &info).map(Body::new))
        }
        None => {
            let body = serde_json::json!({"error": {"message": format!("{path} takes GET, not {}", request.method()), "type": "invalid_request_error", "param": null, "code": null}});
            let headers = [(axum::http::header::CONTENT_TYPE, "application/json")];
            ("GET", (StatusCode::METHOD_NOT_ALLOWED, headers, body.to_string()).into_response())
        }
    };
    // Some protocols map every invalid request to 400; the method is wrong, whatever the protocol.
    *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
    response.headers_mut().insert(axum::http::header::ALLOW, HeaderValue::from_static(allow));
    response
}

/// Where the caller named its model or pool.
enum Named {
    /// The body's `model` field.
    Body,
    /// The path (the body's `model` is ignored).
    Path(String),
    /// An ad-hoc provider/model route.
    Direct { provider: String, model: String },
}

/// A request at one of a protocol's routes, before its path is read.
struct Entry {
    protocol: Protocol,
    route: Route,
    /// The route's path parameters, in order (none for a body-named route).
    params: Vec<String>,
    query: Option<String>,
}

/// What an ingress knows before reading the body.
struct Ingress {
    protocol: Protocol,
    /// What the route asks for (or how the body says it).
    asks: Asks,
    /// The body is a multipart form (audio), not JSON.
    form: bool,
    /// The route, when the lane is asked at the same path.
    route: Option<&'static str>,
    named: Named,
    /// The stream flag when the path decides it (Gemini, Bedrock).
    stream: Option<bool>,
    framing: Framing,
}

impl Entry {
    /// Reads the route's path and query: the name, and what an action asks
    /// (an unknown action is refused before anything else is read).
    fn ingress(self) -> Result<Ingress, ErrorInfo> {
        let Entry { protocol, route, mut params, query } = self;
        let mut asks = route.asks;
        let mut stream = match route.stream {
            Stream::Body | Stream::Action => None,
            Stream::Endpoint(stream) => Some(stream),
        };
        let mut last = || params.pop().unwrap_or_default();
        let named = match route.model {
            Model::Body => Named::Body,
            Model::Path => Named::Path(last()),
            Model::Direct => {
                let model = last();
                Named::Direct { provider: last(), model }
            }
            Model::Action(split) => {
                let target = last();
                let (model, action) = split(&target)?;
                asks = Asks::Op(action.operation);
                stream = Some(action.stream);
                Named::Path(model.to_owned())
            }
        };
        Ok(Ingress {
            protocol,
            asks,
            form: route.form,
            route: route.same_path.then_some(route.path),
            named,
            stream,
            framing: route.framing.framing(query.as_deref()),
        })
    }
}

pub(crate) fn request_id(headers: &HeaderMap) -> HeaderValue {
    headers.get(X_REQUEST_ID).filter(|v| !v.is_empty() && v.len() <= 200).cloned().unwrap_or_else(|| {
        // 32 hex digits of a random number, without a format string.
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut id = fastrand::u128(..);
        let mut digits = [0u8; 32];
        for digit in digits.iter_mut().rev() {
            *digit = HEX[(id & 0xf) as usize];
            id >>= 4;
        }
        HeaderValue::from_maybe_shared(Bytes::copy_from_slice(&digits)).unwrap_or(HeaderValue::from_static("unknown"))
    })
}

pub(crate) const X_REQUEST_ID: axum::http::HeaderName = axum::http::HeaderName::from_static("x-request-id");
const X_SESSION_ID: axum::http::HeaderName = axum::http::HeaderName::from_static("x-session-id");

/// An error before the engine runs, in the caller's protocol (recorded).
fn reject(gateway: &Gateway, protocol: Protocol, mut record: Box<Record>, info: ErrorInfo) -> Response {
    record.refused_with(None, info.kind);
    let mut response = switchyard_engine::render_error(gateway.codec(protocol), &info).map(Body::new);
    response.headers_mut().insert(X_REQUEST_ID, record.request_id().clone());
    record.finish_detached(response.status().as_u16());
    response
}

/// The session id the caller sent, in the header its pool's affinity reads
/// (`x-session-id` unless configured otherwise).
fn session_of(gateway: &Gateway, name: &str, headers: &HeaderMap) -> Option<HeaderValue> {
    match gateway.resolve(name).and_then(|pool| gateway.pools[pool].affinity.as_ref()) {
        Some(affinity) => headers.get(&*affinity.header).cloned(),
        None => headers.get(X_SESSION_ID).cloned(),
    }
}

/// Reads a request body under the body limit, the body read timeout and
/// the connection's body budget (all its HTTP/2 streams together). The
/// charge against the budget lasts as long as the returned guard.
pub(crate) async fn read_body(
    body: Body,
    limits: &switchyard_config::Server,
    budget: Option<&ConnBudget>,
) -> Result<(Bytes, Option<conn_io::BodyCharge>), ErrorInfo> {
    use http_body_util::BodyExt;
    let limit = limits.body_limit;
    let read = async {
        let mut body = body;
        let mut charge: Option<conn_io::BodyCharge> = None;
        let mut chunks: Vec<Bytes> = Vec::new();
        let mut total = 0usize;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|err| {
                ErrorInfo::new(ErrorKind::InvalidRequest, format!("request body could not be read: {err}"))
            })?;
            let Ok(data) = frame.into_data() else { continue };
            total += data.len();
            if total > limit {
                return Err(ErrorInfo::new(
                    ErrorKind::RequestTooLarge,
                    format!("request body is larger than the {limit} byte limit"),
                ));
            }
            if let Some(ConnBudget(state)) = budget {
                let charged = match &mut charge {
                    Some(charge) => charge.grow(data.len()),
                    None => state.charge_body(data.len()).map(|new| charge = Some(new)).is_some(),
                };
                if !charged {
                    return Err(ErrorInfo::new(
                        ErrorKind::Overloaded,
                        "this connection's requests hold too much body at once; retry, or spread requests over connections",
                    )
                    .with_status(503));
                }
            }
            chunks.push(data);
        }
        // One chunk (the common case) is kept without a copy.
        let body = match chunks.len() {
            0 => Bytes::new(),
            1 => chunks.pop().unwrap_or_default(),
            _ => Bytes::from(chunks.concat()),
        };
        Ok((body, charge))
    };
    match tokio::time::timeout(limits.body_read_timeout, read).await {
        Ok(result) => result,
        Err(_) => Err(ErrorInfo::new(
            ErrorKind::Timeout,
            format!("the request body did not arrive within {:?}", limits.body_read_timeout),
        )
        .with_status(408)),
    }
}

/// The ingress stage: the request framed into a [`Call`] (content type,
/// the key on its headers, the body under its limits, the top-level scan,
/// where the name is), then handed to the engine; a refusal is answered in
/// the caller's protocol and recorded.
fn handle(gateway: Arc<Gateway>, entry: Entry, request: Request) -> BoxFuture<'static, Response> {
    // Boxed here, where it is made: the request's future is kilobytes, and
    // the router's layers then move a pointer instead of the future (1.6 %
    // fewer instructions per passthrough request than awaiting it unboxed).
    Box::pin(handle_request(gateway, entry, request))
}

async fn handle_request(gateway: Arc<Gateway>, entry: Entry, request: Request) -> Response {
    let protocol = entry.protocol;
    let (parts, body) = request.into_parts();
    let request_id = request_id(&parts.headers);
    let mut record = Record::begin(&gateway, protocol, request_id.clone(), &parts.headers);
    let ingress = match entry.ingress() {
        Ok(ingress) => ingress,
        Err(info) => return reject(&gateway, protocol, record, info),
    };
    if let Some(delegated) = parts.extensions.get::<switchyard_state::kept::Delegated>() {
        record.batch_line(delegated.entry);
    }
    match frame(&gateway, ingress, parts, body, request_id).await {
        // The body's charge against its connection's budget lasts until the answer's head.
        Ok((mut call, _charge)) => {
            // Responses' stored conversations: continued before, kept after.
            let keep = if gateway.config.kept.responses.store
                && gateway.codec(protocol).ingress().keeps_conversations
                && call.operation != Operation::CountTokens
            {
                match switchyard_kept::responses::prepare(&gateway, &mut call).await {
                    Ok(keep) => keep,
                    Err(info) => return reject(&gateway, protocol, record, info),
                }
            } else {
                None
            };
            match keep {
                None => switchyard_engine::forward(gateway, call, record).await.map(Body::new),
                Some(keep) => {
                    let response = switchyard_engine::forward(gateway.clone(), call, record).await.map(Body::new);
                    switchyard_kept::responses::tap(&gateway, keep, response)
                }
            }
        }
        Err(info) => reject(&gateway, protocol, record, info),
    }
}

/// Frames a caller's request into a [`Call`] (with its body's charge
/// against the connection's budget), or the reason it cannot be.
async fn frame(
    gateway: &Gateway,
    ingress: Ingress,
    parts: axum::http::request::Parts,
    body: Body,
    request_id: HeaderValue,
) -> Result<(Call, Option<conn_io::BodyCharge>), ErrorInfo> {
    let protocol = ingress.protocol;
    let budget = parts.extensions.get::<ConnBudget>().cloned();
    let client = parts.extensions.get::<switchyard_state::ClientName>();
    let headers = parts.headers;
    if ingress.form {
        form_content_type(&headers)?;
    } else {
        json_content_type(&headers)?;
    }
    // A key carried in a header is checked before the body is read: an
    // unauthenticated caller never makes the gateway hold its body. Only a
    // SigV4 signature covers the body, and waits for it (its access key id
    // is looked up first).
    let governed = gateway.governance.is_some();
    let signed = governed && switchyard_engine::authenticate::is_signed(&headers);
    let mut caller = None;
    let delegated = parts.extensions.get::<switchyard_state::kept::Delegated>();
    match (&gateway.governance, delegated) {
        (Some(governance), Some(delegated)) => caller = governance.delegated(&delegated.owner)?,
        // A signature's access key id is looked up before the body is read.
        (Some(governance), None) if signed => governance.check_signer(&headers)?,
        (Some(_), None) => {
            caller = switchyard_engine::authenticate::caller(gateway, protocol, &parts.uri, &headers, client, &[])?;
        }
        (None, _) => {}
    }
    let (body, charge) = read_body(body, &gateway.config.server, budget.as_ref()).await?;
    let operation = match ingress.asks {
        Asks::Op(operation) => operation,
        Asks::Body(sniff) => sniff(&body)?,
        // Resolved from the path by `Entry::ingress`.
        Asks::Action => return Err(ErrorInfo::new(ErrorKind::Internal, "the route's action was not read")),
    };
    // With governance on, the one scan also finds what admission reads of a chat.
    let chat = operation.is_chat();
    let heads = if governed && chat { gateway.codec_for(operation, protocol).metered_heads() } else { &[] };
    let top = if ingress.form {
        form_top(&headers, &body)?
    } else {
        scan::scan_request(&body, heads).map_err(|err| ErrorInfo::new(ErrorKind::InvalidRequest, err.to_string()))?
    };
    if let (Some(by_path), Some(in_body)) = (ingress.stream, top.stream) {
        if by_path != in_body {
            return Err(stream_by_endpoint(gateway.codec(protocol).ingress().stream_endpoints, by_path));
        }
    }
    let (name, wire_model) = named(gateway, ingress.named, &top)?;
    if signed && delegated.is_none() {
        caller = switchyard_engine::authenticate::caller(gateway, protocol, &parts.uri, &headers, client, &body)?;
    }
    let session = session_of(gateway, &name, &headers);
    if session.as_ref().is_some_and(|s| s.len() > switchyard_state::sessions::MAX_SESSION_ID) {
        let limit = switchyard_state::sessions::MAX_SESSION_ID;
        return Err(ErrorInfo::new(ErrorKind::InvalidRequest, format!("the session id is longer than {limit} bytes")));
    }
    let call = Call {
        ingress: protocol,
        operation,
        route: ingress.route,
        name,
        wire_model,
        model_span: top.model_span.clone(),
        metered: top.found,
        stream: ingress.stream.or(top.stream).unwrap_or(false),
        framing: ingress.framing,
        request_id,
        session,
        caller,
        headers,
        body,
    };
    Ok((call, charge))
}

/// A form route's body must be a multipart form.
fn form_content_type(headers: &HeaderMap) -> Result<(), ErrorInfo> {
    let content_type = headers.get(axum::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    match switchyard_codec::form::boundary(content_type) {
        Ok(_) => Ok(()),
        Err(err) => Err(ErrorInfo::new(ErrorKind::InvalidRequest, err.to_string()).with_status(415)),
    }
}

/// The largest audio file OpenAI takes (25 MB).
const MAX_AUDIO_FILE: usize = 25 * 1000 * 1000;

/// What the gateway reads of an audio form: its `model` field, and that its
/// `file` is there and within the vendor's size.
fn form_top(headers: &HeaderMap, body: &[u8]) -> Result<scan::TopLevel<'static>, ErrorInfo> {
    use switchyard_codec::form;
    let content_type = headers.get(axum::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let invalid = |message: String| ErrorInfo::new(ErrorKind::InvalidRequest, message);
    let boundary = form::boundary(content_type).map_err(|err| invalid(err.to_string()))?;
    let parts = form::parts(body, boundary).map_err(|err| invalid(err.to_string()))?;
    let Some(file) = parts.iter().find(|p| p.name == "file") else {
        let mut info = invalid("the form has no `file`: attach the audio to transcribe".to_owned());
        info.param = Some("file".to_owned());
        return Err(info);
    };
    if file.value.len() > MAX_AUDIO_FILE {
        return Err(ErrorInfo::new(
            ErrorKind::RequestTooLarge,
            format!("the audio file is {} bytes; the most is {MAX_AUDIO_FILE} (25 MB)", file.value.len()),
        ));
    }
    let model = form::text_field(body, &parts, "model").map(|m| std::borrow::Cow::Owned(m.to_owned()));
    Ok(scan::TopLevel { model, model_span: None, stream: None, found: scan::Found::default() })
}

/// A body must be JSON when its type is given.
fn json_content_type(headers: &HeaderMap) -> Result<(), ErrorInfo> {
    let Some(content_type) = headers.get(axum::http::header::CONTENT_TYPE) else { return Ok(()) };
    let json = content_type
        .to_str()
        .is_ok_and(|ct| ct.trim_start().to_ascii_lowercase().starts_with("application/json") || ct.contains("+json"));
    if json {
        return Ok(());
    }
    Err(ErrorInfo::new(ErrorKind::InvalidRequest, "content-type must be application/json").with_status(415))
}

/// The pool name the caller gave (and an ad-hoc lane's wire model).
fn named(gateway: &Gateway, named: Named, top: &scan::TopLevel<'_>) -> Result<(String, Option<String>), ErrorInfo> {
    match named {
        Named::Body => match &top.model {
            Some(model) if !model.is_empty() => Ok((model.to_string(), None)),
            _ => {
                let mut info = ErrorInfo::new(
                    ErrorKind::InvalidRequest,
                    "`model` is required: name a model or pool (GET /v1/models lists them)",
                );
                info.param = Some("model".to_owned());
                Err(info)
            }
        },
        Named::Path(name) => Ok((name, None)),
        Named::Direct { provider, model } => match gateway.resolve_adhoc(&provider, &model) {
            Some(pool) => Ok((pool.to_string(), Some(model))),
            None => Err(ErrorInfo::new(
                ErrorKind::NotFound,
                format!("provider `{provider}` does not serve `{model}` on the ad-hoc route"),
            )),
        },
    }
}

/// A body whose `stream` contradicts the endpoint, in a protocol that
/// streams by endpoint: refused, as the vendor would, rather than ignored.
fn stream_by_endpoint(endpoints: &str, by_path: bool) -> ErrorInfo {
    let what = if by_path { "this endpoint streams" } else { "this endpoint does not stream" };
    let message = if endpoints.is_empty() {
        format!("`stream` is not a member of this request and {what}")
    } else {
        format!("`stream` is not a member of this request and {what}: {endpoints}")
    };
    let mut info = ErrorInfo::new(ErrorKind::InvalidRequest, message);
    info.param = Some("stream".to_owned());
    info
}

/// The vendor fake as an HTTP server: every protocol's upstream path,
/// answered by `mock::respond` (chat) and `mock_operation::respond` (the
/// other operations) (used by `switchyard mock-upstream`).
pub fn mock_router(codecs: crate::CodecFor) -> Router {
    /// What one fake route answers.
    #[derive(Clone, Copy)]
    struct Fake {
        protocol: Protocol,
        operation: Operation,
        count: bool,
        stream: Option<bool>,
        framing: Framing,
    }
    fn answer_typed(
        codecs: crate::CodecFor,
        fake: Fake,
        model: Option<String>,
        content_type: Option<&str>,
        body: Bytes,
    ) -> Response {
        let codec = crate::codec_for(codecs, fake.operation, fake.protocol);
        let reply = if fake.count {
            switchyard_transport::mock_operation::count(codec, &body)
        } else if fake.operation.is_chat() {
            let stream =
                fake.stream.unwrap_or_else(|| scan::scan_top_level(&body).ok().and_then(|t| t.stream).unwrap_or(false));
            switchyard_transport::mock::respond(codec, model.as_deref(), stream, fake.framing, &body)
        } else {
            switchyard_transport::mock_operation::respond(codec, fake.operation, model.as_deref(), content_type, &body)
        };
        let mut response = Response::new(Body::new(reply.body));
        *response.status_mut() = reply.status;
        *response.headers_mut() = reply.headers;
        response
    }
    // A collector too: OTLP/HTTP trace exports are accepted and discarded
    // (benchmarks trace to it).
    // An MCP server of each revision: `/mcp` keeps sessions, `/mcp/stateless`
    // speaks 2026-07-28.
    fn mcp_reply(revision: switchyard_transport::mock_mcp::Revision, headers: &HeaderMap, body: &Bytes) -> Response {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let sent = switchyard_transport::mock_mcp::Sent {
            version: header("mcp-protocol-version"),
            method: header("mcp-method"),
            name: header("mcp-name"),
        };
        let reply = switchyard_transport::mock_mcp::respond_as(revision, sent, body);
        let mut response = Response::new(Body::from(reply.body));
        *response.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK);
        let headers = response.headers_mut();
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(session) = reply.session {
            headers.insert("mcp-session-id", HeaderValue::from_static(session));
        }
        response
    }
    use switchyard_transport::mock_mcp::Revision;
    let base = Router::new()
        .route("/v1/traces", post(|| async { StatusCode::OK }))
        .route(
            "/mcp",
            post(|headers: HeaderMap, body: Bytes| async move { mcp_reply(Revision::Handshake, &headers, &body) }),
        )
        .route(
            "/mcp/stateless",
            post(|headers: HeaderMap, body: Bytes| async move { mcp_reply(Revision::Stateless, &headers, &body) }),
        );
    // An A2A agent too.
    let base = base
        .route(
            "/a2a",
            post(|headers: HeaderMap, body: Bytes| async move {
                let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
                let reply = switchyard_transport::mock_a2a::respond(
                    &body,
                    header("x-switchyard-run"),
                    header("x-switchyard-a2a-task"),
                );
                let mut response = Response::new(Body::from(reply.body));
                response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static(reply.content_type));
                response
            }),
        )
        .route(
            "/a2a-rest/.well-known/agent-card.json",
            get(|headers: HeaderMap| async move {
                let host = headers.get(http::header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("localhost");
                let card = switchyard_transport::mock_a2a::rest_card(&format!("http://{host}"));
                let mut response = Response::new(Body::from(card.to_string()));
                response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                response
            }),
        )
        .route(
            "/a2a-rest/{*path}",
            axum::routing::any(|method: http::Method, uri: http::Uri, headers: HeaderMap, body: Bytes| async move {
                let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
                let path = uri.path().strip_prefix("/a2a-rest").unwrap_or_default();
                let (status, reply) = switchyard_transport::mock_a2a::respond_rest(
                    method.as_str(),
                    path,
                    &body,
                    header("x-switchyard-run"),
                    header("x-switchyard-a2a-task"),
                );
                let mut response = Response::new(Body::from(reply.body));
                *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static(reply.content_type));
                response
            }),
        )
        .route(
            "/a2a/.well-known/agent-card.json",
            get(|headers: HeaderMap| async move {
                let host = headers.get(http::header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("localhost");
                let card = switchyard_transport::mock_a2a::card(&format!("http://{host}"));
                let mut response = Response::new(Body::from(card.to_string()));
                response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                response
            }),
        );
    // Each protocol's vendor-side paths, from its ingress table: the fake
    // reads a path as the gateway does (its model, action, framing and
    // `InvokeModel` body).
    let routes = move |router: Router, protocol: Protocol| -> Router {
        let vendor = codecs(protocol).ingress().routes.iter().filter(|route| route.serves.vendor());
        vendor.fold(router, |router, &route| {
            let handler = move |Path(params): Path<Vec<String>>,
                                RawQuery(query): RawQuery,
                                headers: HeaderMap,
                                body: Bytes| async move {
                let mut params = params;
                let mut model = match route.model {
                    Model::Body => None,
                    Model::Path | Model::Direct | Model::Action(_) => params.pop(),
                };
                let mut stream = match route.stream {
                    Stream::Endpoint(stream) => Some(stream),
                    Stream::Body | Stream::Action => None,
                };
                let mut operation = match route.asks {
                    Asks::Op(operation) => operation,
                    // A body the fake cannot place is answered as an embedding.
                    Asks::Body(sniff) => sniff(&body).unwrap_or(Operation::Embed),
                    Asks::Action => Operation::Chat,
                };
                if let (Model::Action(split), Some(target)) = (route.model, model.as_deref()) {
                    match split(target) {
                        Ok((name, action)) => {
                            model = Some(name.to_owned());
                            operation = action.operation;
                            stream = Some(action.stream);
                        }
                        Err(info) => return switchyard_engine::render_error(codecs(protocol), &info).map(Body::new),
                    }
                }
                let count = operation == Operation::CountTokens;
                let fake = Fake {
                    protocol,
                    operation: if count { Operation::Chat } else { operation },
                    count,
                    stream,
                    framing: route.framing.framing(query.as_deref()),
                };
                // OpenAI's own operations read their form's boundary.
                let content_type = route
                    .same_path
                    .then(|| headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()))
                    .flatten();
                answer_typed(codecs, fake, model, content_type, body)
            };
            router.route(route.path, post(handler))
        })
    };
    Protocol::ALL.into_iter().fold(base, routes).route("/healthz", get(healthz))
}
