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
        .fold(base, ingress_routes)
        .merge(switchyard_kept::routes())
        .merge(switchyard_mcp::routes())
        .merge(switchyard_duplex::routes())
        .merge(crate::passthrough::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(gateway)
}

/// A protocol's ingress routes: the contract's paths, and where each finds
/// the model and the stream flag. A new protocol fails to compile here, in
/// [`owns`] and in [`mock_routes`] until it says what its routes are.
fn ingress_routes(router: Router<Arc<Gateway>>, protocol: Protocol) -> Router<Arc<Gateway>> {
    let by_body = move |operation: Operation| {
        move |State(gateway): State<Arc<Gateway>>, request: Request| {
            handle(gateway, Ingress::body(protocol, operation), request)
        }
    };
    match protocol {
        Protocol::OpenAi => OPENAI_ROUTES.iter().fold(
            router
                .route("/v1/chat/completions", post(by_body(Operation::Chat)))
                // OpenAI's legacy completions: asked of chat lanes.
                .route("/v1/completions", post(by_body(Operation::Completion)))
                .route("/v1/embeddings", post(by_body(Operation::Embed))),
            |router, &(route, operation, form)| {
                let handler = move |State(gateway): State<Arc<Gateway>>, request: Request| {
                    handle(gateway, Ingress::openai(operation, route, form), request)
                };
                router.route(route, post(handler))
            },
        ),
        Protocol::Responses => router.route("/v1/responses", post(by_body(Operation::Chat))),
        Protocol::Anthropic => router
            .route("/v1/messages", post(by_body(Operation::Chat)))
            .route("/v1/messages/count_tokens", post(anthropic_count))
            .route("/{name}/v1/messages", post(anthropic_named))
            .route("/{name}/v1/messages/count_tokens", post(anthropic_named_count))
            .route("/{provider}/{model}/v1/messages", post(anthropic_direct)),
        // Vertex AI's express mode (an API key, no project) names models
        // under `publishers/google/`: google-genai's `generate_images` goes
        // only there.
        Protocol::Gemini => router
            .route("/v1/models/{*target}", post(gemini))
            .route("/v1beta/models/{*target}", post(gemini))
            .route("/v1/publishers/google/models/{*target}", post(gemini))
            .route("/v1beta1/publishers/google/models/{*target}", post(gemini)),
        Protocol::Cohere => router
            .route("/v2/chat", post(by_body(Operation::Chat)))
            .route("/v2/embed", post(by_body(Operation::Embed)))
            .route("/v2/rerank", post(by_body(Operation::Rerank)))
            .route("/v1/rerank", post(by_body(Operation::Rerank))),
        Protocol::Bedrock => router
            .route("/model/{model}/converse", post(bedrock))
            .route("/model/{model}/converse-stream", post(bedrock_stream))
            .route("/model/{model}/invoke", post(bedrock_invoke))
            .route("/model/{model}/count-tokens", post(bedrock_count)),
    }
}

/// OpenAI's own operations: each route, what it asks for, and whether its
/// body is a multipart form. The lane is asked at the same path.
const OPENAI_ROUTES: [(&str, Operation, bool); 5] = [
    ("/v1/moderations", Operation::Moderation, false),
    ("/v1/images/generations", Operation::Image, false),
    ("/v1/audio/speech", Operation::Speech, false),
    ("/v1/audio/transcriptions", Operation::Transcription, true),
    ("/v1/audio/translations", Operation::Transcription, true),
];

/// Whether a data-plane path is one of `protocol`'s ingress routes (an
/// error the listener or router writes itself is then in that protocol).
fn owns(protocol: Protocol, path: &str) -> bool {
    match protocol {
        Protocol::OpenAi => {
            matches!(path, "/v1/chat/completions" | "/v1/completions" | "/v1/embeddings")
                || OPENAI_ROUTES.iter().any(|r| r.0 == path)
        }
        Protocol::Responses => path == "/v1/responses",
        Protocol::Anthropic => path.ends_with("/v1/messages") || path.ends_with("/v1/messages/count_tokens"),
        Protocol::Gemini => {
            path.starts_with("/v1/models/")
                || path.starts_with("/v1beta/models/")
                || path.starts_with("/v1/publishers/google/models/")
                || path.starts_with("/v1beta1/publishers/google/models/")
        }
        Protocol::Cohere => matches!(path, "/v2/chat" | "/v2/embed" | "/v2/rerank" | "/v1/rerank"),
        Protocol::Bedrock => path.starts_with("/model/"),
    }
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
        let protocol = crate::passthrough::protocol_of(&raw_routes, path).or_else(|| protocol_of(path));
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
fn protocol_of(path: &str) -> Option<Protocol> {
    Protocol::ALL.into_iter().find(|&protocol| owns(protocol, path))
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
    let (allow, mut response) = match protocol_of(path) {
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

/// What an ingress knows before reading the body.
struct Ingress {
    protocol: Protocol,
    /// What the route asks for; `None`: the body says (Bedrock `InvokeModel`).
    operation: Option<Operation>,
    /// The body is a multipart form (audio), not JSON.
    form: bool,
    /// The route, when the lane is asked at the same path.
    route: Option<&'static str>,
    named: Named,
    /// The stream flag when the path decides it (Gemini, Bedrock).
    stream: Option<bool>,
    framing: Framing,
}

impl Ingress {
    /// A protocol whose body names the model.
    fn body(protocol: Protocol, operation: Operation) -> Ingress {
        Ingress {
            protocol,
            operation: Some(operation),
            form: false,
            route: None,
            named: Named::Body,
            stream: None,
            framing: Framing::Sse,
        }
    }

    /// A route whose path names the model, answering whole.
    fn path(protocol: Protocol, operation: Option<Operation>, model: String, framing: Framing) -> Ingress {
        let named = Named::Path(model);
        Ingress { protocol, operation, form: false, route: None, named, stream: Some(false), framing }
    }

    /// A token-count route (of a chat request; answered whole).
    fn count(protocol: Protocol, named: Named) -> Ingress {
        let operation = Some(Operation::CountTokens);
        let framing = Framing::Sse;
        Ingress { protocol, operation, form: false, route: None, named, stream: Some(false), framing }
    }

    /// One of OpenAI's own routes, sent to the same path upstream.
    fn openai(operation: Operation, route: &'static str, form: bool) -> Ingress {
        Ingress { form, route: Some(route), stream: Some(false), ..Ingress::body(Protocol::OpenAi, operation) }
    }
}

async fn anthropic_count(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    handle(gateway, Ingress::count(Protocol::Anthropic, Named::Body), request).await
}

/// `base_url = http://host/{pool}`: the pool in the path, the body's `model` ignored.
async fn anthropic_named_count(
    State(gateway): State<Arc<Gateway>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    handle(gateway, Ingress::count(Protocol::Anthropic, Named::Path(name)), request).await
}

async fn bedrock_count(State(gateway): State<Arc<Gateway>>, Path(model): Path<String>, request: Request) -> Response {
    handle(gateway, Ingress::count(Protocol::Bedrock, Named::Path(model)), request).await
}

async fn anthropic_named(State(gateway): State<Arc<Gateway>>, Path(name): Path<String>, request: Request) -> Response {
    let ingress = Ingress {
        protocol: Protocol::Anthropic,
        operation: Some(Operation::Chat),
        form: false,
        route: None,
        named: Named::Path(name),
        stream: None,
        framing: Framing::Sse,
    };
    handle(gateway, ingress, request).await
}

async fn anthropic_direct(
    State(gateway): State<Arc<Gateway>>,
    Path((provider, model)): Path<(String, String)>,
    request: Request,
) -> Response {
    let ingress = Ingress {
        protocol: Protocol::Anthropic,
        operation: Some(Operation::Chat),
        form: false,
        route: None,
        named: Named::Direct { provider, model },
        stream: None,
        framing: Framing::Sse,
    };
    handle(gateway, ingress, request).await
}

async fn gemini(
    State(gateway): State<Arc<Gateway>>,
    Path(target): Path<String>,
    RawQuery(query): RawQuery,
    request: Request,
) -> Response {
    // axum cannot split on `:` inside a segment: the model and the action
    // share the last segment, split at its last colon.
    let Some((model, action)) = target.rsplit_once(':') else {
        return reject(
            &gateway,
            Protocol::Gemini,
            Record::begin(&gateway, Protocol::Gemini, request_id(request.headers()), request.headers()),
            ErrorInfo::new(
                ErrorKind::NotFound,
                format!("`{target}` names no action; use MODEL:generateContent or MODEL:streamGenerateContent"),
            ),
        );
    };
    if action == "countTokens" {
        return handle(gateway, Ingress::count(Protocol::Gemini, Named::Path(model.to_owned())), request).await;
    }
    let (operation, stream) = match action {
        "generateContent" => (Operation::Chat, false),
        "streamGenerateContent" => (Operation::Chat, true),
        "embedContent" | "batchEmbedContents" => (Operation::Embed, false),
        // Imagen's image generation.
        "predict" => (Operation::Image, false),
        other => {
            return reject(
                &gateway,
                Protocol::Gemini,
                Record::begin(&gateway, Protocol::Gemini, request_id(request.headers()), request.headers()),
                ErrorInfo::new(
                    ErrorKind::NotFound,
                    format!(
                        "action `{other}` is not supported; use generateContent, streamGenerateContent, \
                         countTokens, embedContent, batchEmbedContents or predict"
                    ),
                ),
            );
        }
    };
    let sse = query.as_deref().is_some_and(|q| q.split('&').any(|pair| pair == "alt=sse"));
    let framing = if sse { Framing::Sse } else { Framing::JsonArray };
    let mut ingress = Ingress::path(Protocol::Gemini, Some(operation), model.to_owned(), framing);
    ingress.stream = Some(stream);
    handle(gateway, ingress, request).await
}

async fn bedrock(state: State<Arc<Gateway>>, path: Path<String>, request: Request) -> Response {
    bedrock_ingress(state, path, false, request).await
}

async fn bedrock_stream(state: State<Arc<Gateway>>, path: Path<String>, request: Request) -> Response {
    bedrock_ingress(state, path, true, request).await
}

/// Bedrock names the model in the path and streams by endpoint (`converse-stream`).
async fn bedrock_ingress(
    State(gateway): State<Arc<Gateway>>,
    Path(model): Path<String>,
    stream: bool,
    request: Request,
) -> Response {
    let mut ingress = Ingress::path(Protocol::Bedrock, Some(Operation::Chat), model, Framing::EventStream);
    ingress.stream = Some(stream);
    handle(gateway, ingress, request).await
}

/// Bedrock `InvokeModel`: the body says what it asks for (see
/// [`invoked_operation`]).
async fn bedrock_invoke(State(gateway): State<Arc<Gateway>>, Path(model): Path<String>, request: Request) -> Response {
    let ingress = Ingress::path(Protocol::Bedrock, None, model, Framing::EventStream);
    handle(gateway, ingress, request).await
}

/// The operation an `InvokeModel` body asks for: `inputText` (Titan) or
/// `texts` (Cohere) embeds, `query` with `documents` reranks, `taskType`
/// (Nova Canvas, Titan Image) or `prompt` (Stability) makes images.
fn invoked_operation(body: &[u8]) -> Result<Operation, ErrorInfo> {
    let has = |key: &str| scan::top_level_value(body, key).ok().flatten().is_some();
    if has("inputText") || has("texts") {
        return Ok(Operation::Embed);
    }
    if has("query") && has("documents") {
        return Ok(Operation::Rerank);
    }
    if has("taskType") || has("prompt") {
        return Ok(Operation::Image);
    }
    Err(ErrorInfo::new(
        ErrorKind::InvalidRequest,
        "InvokeModel takes an embedding body (`inputText` for Titan, `texts` for Cohere), a rerank body \
         (`query` and `documents`) or an image body (`taskType` for Nova Canvas and Titan Image, `prompt` \
         for Stability); chat goes to /model/{model}/converse",
    ))
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
fn handle(gateway: Arc<Gateway>, ingress: Ingress, request: Request) -> BoxFuture<'static, Response> {
    // Boxed here, where it is made: the request's future is kilobytes, and
    // the router's layers then move a pointer instead of the future (1.6 %
    // fewer instructions per passthrough request than awaiting it unboxed).
    Box::pin(handle_request(gateway, ingress, request))
}

async fn handle_request(gateway: Arc<Gateway>, ingress: Ingress, request: Request) -> Response {
    let protocol = ingress.protocol;
    let (parts, body) = request.into_parts();
    let request_id = request_id(&parts.headers);
    let mut record = Record::begin(&gateway, protocol, request_id.clone(), &parts.headers);
    if let Some(delegated) = parts.extensions.get::<switchyard_state::kept::Delegated>() {
        record.batch_line(delegated.entry);
    }
    match frame(&gateway, ingress, parts, body, request_id).await {
        // The body's charge against its connection's budget lasts until the answer's head.
        Ok((mut call, _charge)) => {
            // Responses' stored conversations: continued before, kept after.
            let keep = if protocol == Protocol::Responses
                && gateway.config.kept.responses.store
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
    let operation = match ingress.operation {
        Some(operation) => operation,
        None => invoked_operation(&body)?,
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
            return Err(stream_by_endpoint(protocol, by_path));
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
fn stream_by_endpoint(protocol: Protocol, by_path: bool) -> ErrorInfo {
    let endpoints = match protocol {
        Protocol::Bedrock => {
            "POST /model/{model}/converse streams nothing; POST /model/{model}/converse-stream streams"
        }
        _ => "POST .../models/{model}:generateContent answers whole; :streamGenerateContent streams",
    };
    let what = if by_path { "this endpoint streams" } else { "this endpoint does not stream" };
    let mut info = ErrorInfo::new(
        ErrorKind::InvalidRequest,
        format!("`stream` is not a member of this request and {what}: {endpoints}"),
    );
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
    fn answer(codecs: crate::CodecFor, fake: Fake, model: Option<String>, body: Bytes) -> Response {
        answer_typed(codecs, fake, model, None, body)
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
    let routes = move |router: Router, protocol: Protocol| -> Router {
        let fake = move |operation: Operation, stream: Option<bool>, framing: Framing| Fake {
            protocol,
            operation,
            count: false,
            stream,
            framing,
        };
        let by_body = move |operation: Operation| {
            let fake = fake(operation, None, Framing::Sse);
            post(move |body: Bytes| async move { answer(codecs, fake, None, body) })
        };
        let by_path = move |fake: Fake| {
            post(move |Path(model): Path<String>, body: Bytes| async move { answer(codecs, fake, Some(model), body) })
        };
        match protocol {
            Protocol::OpenAi => OPENAI_ROUTES.iter().fold(
                router
                    .route("/v1/chat/completions", by_body(Operation::Chat))
                    .route("/v1/completions", by_body(Operation::Completion))
                    .route("/v1/embeddings", by_body(Operation::Embed))
                    .route("/v1/rerank", by_body(Operation::Rerank)),
                |router, &(route, operation, _)| {
                    let fake = fake(operation, Some(false), Framing::Sse);
                    router.route(
                        route,
                        post(move |headers: HeaderMap, body: Bytes| async move {
                            let content_type = headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
                            answer_typed(codecs, fake, None, content_type, body)
                        }),
                    )
                },
            ),
            Protocol::Responses => router.route("/v1/responses", by_body(Operation::Chat)),
            Protocol::Anthropic => router.route("/v1/messages", by_body(Operation::Chat)).route(
                "/v1/messages/count_tokens",
                post(move |body: Bytes| async move {
                    answer(codecs, Fake { count: true, ..fake(Operation::Chat, Some(false), Framing::Sse) }, None, body)
                }),
            ),
            Protocol::Cohere => router
                .route("/v2/chat", by_body(Operation::Chat))
                .route("/v2/embed", by_body(Operation::Embed))
                .route("/v2/rerank", by_body(Operation::Rerank)),
            Protocol::Gemini => {
                let gemini =
                    post(move |Path(target): Path<String>, RawQuery(query): RawQuery, body: Bytes| async move {
                        let (model, action) = target.rsplit_once(':').unwrap_or((&target, "generateContent"));
                        let sse = query.as_deref().is_some_and(|q| q.contains("alt=sse"));
                        let framing = if sse { Framing::Sse } else { Framing::JsonArray };
                        let (operation, stream) = match action {
                            "batchEmbedContents" | "embedContent" => (Operation::Embed, false),
                            "predict" => (Operation::Image, false),
                            other => (Operation::Chat, other == "streamGenerateContent"),
                        };
                        let fake = Fake { count: action == "countTokens", ..fake(operation, Some(stream), framing) };
                        answer(codecs, fake, Some(model.to_owned()), body)
                    });
                router
                    .route("/v1beta/models/{*target}", gemini.clone())
                    .route("/v1beta1/publishers/google/models/{*target}", gemini)
            }
            Protocol::Bedrock => router
                .route("/model/{model}/converse", by_path(fake(Operation::Chat, Some(false), Framing::EventStream)))
                .route(
                    "/model/{model}/converse-stream",
                    by_path(fake(Operation::Chat, Some(true), Framing::EventStream)),
                )
                .route(
                    "/model/{model}/count-tokens",
                    by_path(Fake { count: true, ..fake(Operation::Chat, Some(false), Framing::EventStream) }),
                )
                .route(
                    "/model/{model}/invoke",
                    post(move |Path(model): Path<String>, body: Bytes| async move {
                        let operation = invoked_operation(&body).unwrap_or(Operation::Embed);
                        answer(codecs, fake(operation, Some(false), Framing::EventStream), Some(model), body)
                    }),
                ),
        }
    };
    Protocol::ALL.into_iter().fold(base, routes).route("/healthz", get(healthz))
}
