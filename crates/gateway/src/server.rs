//! The HTTP surface: the six ingress routes of the contract, the model list,
//! health, the admin listener and the vendor-fake server. Each ingress frames
//! the caller's request (body limit, content type, where the model and the
//! stream flag are) and hands it to the engine; every error written here is
//! in the caller's own protocol.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use std::future::IntoFuture;
use switchyard_codec::{scan, Framing};
use switchyard_ir::{ErrorInfo, ErrorKind, Protocol};

use crate::call::Call;
use crate::engine;
use crate::state::Gateway;
use crate::transport::CollectError;

/// The data-plane router.
pub fn router(gateway: Arc<Gateway>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/v1/models", get(list_models))
        .route("/stats", get(stats))
        .route(
            "/v1/chat/completions",
            post(|State(gateway): State<Arc<Gateway>>, headers: HeaderMap, body: Body| {
                handle(gateway, Ingress::body(Protocol::OpenAi), headers, body)
            }),
        )
        .route(
            "/v1/responses",
            post(|State(gateway): State<Arc<Gateway>>, headers: HeaderMap, body: Body| {
                handle(gateway, Ingress::body(Protocol::Responses), headers, body)
            }),
        )
        .route(
            "/v1/messages",
            post(|State(gateway): State<Arc<Gateway>>, headers: HeaderMap, body: Body| {
                handle(gateway, Ingress::body(Protocol::Anthropic), headers, body)
            }),
        )
        .route("/{name}/v1/messages", post(anthropic_named))
        .route("/{provider}/{model}/v1/messages", post(anthropic_direct))
        .route("/v1/models/{*target}", post(gemini))
        .route("/v1beta/models/{*target}", post(gemini))
        .route(
            "/v2/chat",
            post(|State(gateway): State<Arc<Gateway>>, headers: HeaderMap, body: Body| {
                handle(gateway, Ingress::body(Protocol::Cohere), headers, body)
            }),
        )
        .route("/model/{model}/converse", post(bedrock))
        .route("/model/{model}/converse-stream", post(bedrock_stream))
        .fallback(not_found)
        .with_state(gateway)
}

/// The admin-plane router (its own loopback listener).
pub fn admin_router(gateway: Arc<Gateway>) -> Router {
    Router::new().route("/healthz", get(healthz)).route("/v1/models", get(list_models)).with_state(gateway)
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets
/// in-flight requests and streams finish for up to `drain`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    drain: Duration,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        // Nagle plus delayed ACK would add ~40 ms to every streamed frame.
        let _ = tcp.set_nodelay(true);
    });
    let (signalled_tx, signalled_rx) = tokio::sync::oneshot::channel::<()>();
    let server = axum::serve(listener, router).with_graceful_shutdown(async move {
        shutdown.await;
        let _ = signalled_tx.send(());
    });
    let server = std::pin::pin!(server.into_future());
    let drained = async move {
        if signalled_rx.await.is_ok() {
            tokio::time::sleep(drain).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        result = server => result,
        () = drained => {
            tracing::warn!(?drain, "drain timeout reached; closing remaining connections");
            Ok(())
        }
    }
}

async fn healthz() -> &'static str {
    "ok"
}

async fn stats(State(gateway): State<Arc<Gateway>>) -> Response {
    let body = crate::health::stats(&gateway);
    ([(axum::http::header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

async fn list_models(State(gateway): State<Arc<Gateway>>) -> Response {
    let mut data = Vec::new();
    for model in &gateway.config.models {
        let provider = &gateway.config.providers[model.provider];
        data.push(
            serde_json::json!({"id": &*model.name, "object": "model", "created": 0, "owned_by": &*provider.name}),
        );
    }
    for pool in &gateway.config.pools {
        data.push(
            serde_json::json!({"id": &*pool.name, "object": "model", "created": 0, "owned_by": "switchyard-pool"}),
        );
    }
    let body = serde_json::json!({"object": "list", "data": data});
    ([(axum::http::header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

async fn not_found(uri: axum::http::Uri) -> Response {
    let body = serde_json::json!({"error": {"message": format!("no route for {}", uri.path()), "type": "not_found_error", "param": null, "code": null}});
    (StatusCode::NOT_FOUND, [(axum::http::header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
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
    named: Named,
    /// The stream flag when the path decides it (Gemini, Bedrock).
    stream: Option<bool>,
    framing: Framing,
}

impl Ingress {
    /// A protocol whose body names the model.
    fn body(protocol: Protocol) -> Ingress {
        Ingress { protocol, named: Named::Body, stream: None, framing: Framing::Sse }
    }
}

async fn anthropic_named(
    State(gateway): State<Arc<Gateway>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let ingress =
        Ingress { protocol: Protocol::Anthropic, named: Named::Path(name), stream: None, framing: Framing::Sse };
    handle(gateway, ingress, headers, body).await
}

async fn anthropic_direct(
    State(gateway): State<Arc<Gateway>>,
    Path((provider, model)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let ingress = Ingress {
        protocol: Protocol::Anthropic,
        named: Named::Direct { provider, model },
        stream: None,
        framing: Framing::Sse,
    };
    handle(gateway, ingress, headers, body).await
}

async fn gemini(
    State(gateway): State<Arc<Gateway>>,
    Path(target): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // axum cannot split on `:` inside a segment: the model and the action
    // share the last segment, split at its last colon.
    let Some((model, action)) = target.rsplit_once(':') else {
        return reject(
            &gateway,
            Protocol::Gemini,
            &headers,
            ErrorInfo::new(
                ErrorKind::NotFound,
                format!("`{target}` names no action; use MODEL:generateContent or MODEL:streamGenerateContent"),
            ),
        );
    };
    let stream = match action {
        "generateContent" => false,
        "streamGenerateContent" => true,
        other => {
            return reject(
                &gateway,
                Protocol::Gemini,
                &headers,
                ErrorInfo::new(
                    ErrorKind::NotFound,
                    format!("action `{other}` is not supported; use generateContent or streamGenerateContent"),
                ),
            );
        }
    };
    let sse = query.as_deref().is_some_and(|q| q.split('&').any(|pair| pair == "alt=sse"));
    let framing = if sse { Framing::Sse } else { Framing::JsonArray };
    let ingress =
        Ingress { protocol: Protocol::Gemini, named: Named::Path(model.to_owned()), stream: Some(stream), framing };
    handle(gateway, ingress, headers, body).await
}

async fn bedrock(state: State<Arc<Gateway>>, path: Path<String>, headers: HeaderMap, body: Body) -> Response {
    bedrock_ingress(state, path, false, headers, body).await
}

async fn bedrock_stream(state: State<Arc<Gateway>>, path: Path<String>, headers: HeaderMap, body: Body) -> Response {
    bedrock_ingress(state, path, true, headers, body).await
}

/// Bedrock names the model in the path and streams by endpoint (`converse-stream`).
async fn bedrock_ingress(
    State(gateway): State<Arc<Gateway>>,
    Path(model): Path<String>,
    stream: bool,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let ingress = Ingress {
        protocol: Protocol::Bedrock,
        named: Named::Path(model),
        stream: Some(stream),
        framing: Framing::EventStream,
    };
    handle(gateway, ingress, headers, body).await
}

fn request_id(headers: &HeaderMap) -> HeaderValue {
    headers.get("x-request-id").filter(|v| !v.is_empty() && v.len() <= 200).cloned().unwrap_or_else(|| {
        let id = format!("{:032x}", fastrand::u128(..));
        HeaderValue::from_str(&id).unwrap_or(HeaderValue::from_static("unknown"))
    })
}

/// An error before the engine runs, in the caller's protocol.
fn reject(gateway: &Gateway, protocol: Protocol, headers: &HeaderMap, info: ErrorInfo) -> Response {
    let mut response = engine::render_error(gateway.codec(protocol), &info).map(Body::new);
    response.headers_mut().insert("x-request-id", request_id(headers));
    response
}

/// The session id the caller sent, in the header its pool's affinity reads
/// (`x-session-id` unless configured otherwise).
fn session_of(gateway: &Gateway, name: &str, headers: &HeaderMap) -> Option<HeaderValue> {
    let header = gateway
        .resolve(name)
        .and_then(|pool| gateway.pools[pool].affinity.as_ref())
        .map_or("x-session-id", |a| &*a.header);
    headers.get(header).cloned()
}

async fn read_body(body: Body, limit: usize) -> Result<Bytes, ErrorInfo> {
    match crate::transport::collect_limited(body, limit).await {
        Ok(body) => Ok(body),
        Err(CollectError::TooLarge(_)) => Err(ErrorInfo::new(
            ErrorKind::RequestTooLarge,
            format!("request body is larger than the {limit} byte limit"),
        )),
        Err(err) => Err(ErrorInfo::new(ErrorKind::InvalidRequest, format!("request body could not be read: {err}"))),
    }
}

async fn handle(gateway: Arc<Gateway>, ingress: Ingress, headers: HeaderMap, body: Body) -> Response {
    let protocol = ingress.protocol;
    if let Some(content_type) = headers.get(axum::http::header::CONTENT_TYPE) {
        let json = content_type.to_str().is_ok_and(|ct| {
            ct.trim_start().to_ascii_lowercase().starts_with("application/json") || ct.contains("+json")
        });
        if !json {
            let info =
                ErrorInfo::new(ErrorKind::InvalidRequest, "content-type must be application/json").with_status(415);
            return reject(&gateway, protocol, &headers, info);
        }
    }
    let body = match read_body(body, gateway.config.server.body_limit).await {
        Ok(body) => body,
        Err(info) => return reject(&gateway, protocol, &headers, info),
    };
    let top = match scan::scan_top_level(&body) {
        Ok(top) => top,
        Err(err) => {
            return reject(&gateway, protocol, &headers, ErrorInfo::new(ErrorKind::InvalidRequest, err.to_string()))
        }
    };
    let (name, direct) = match ingress.named {
        Named::Body => match &top.model {
            Some(model) if !model.is_empty() => (model.to_string(), None),
            _ => {
                let mut info = ErrorInfo::new(
                    ErrorKind::InvalidRequest,
                    "`model` is required: name a model or pool (GET /v1/models lists them)",
                );
                info.param = Some("model".to_owned());
                return reject(&gateway, protocol, &headers, info);
            }
        },
        Named::Path(name) => (name, None),
        Named::Direct { provider, model } => match gateway.provider_index(&provider) {
            Some(index) => (format!("{provider}/{model}"), Some((index, model))),
            None => {
                return reject(
                    &gateway,
                    protocol,
                    &headers,
                    ErrorInfo::new(ErrorKind::NotFound, format!("provider `{provider}` does not exist")),
                );
            }
        },
    };
    let session = session_of(&gateway, &name, &headers);
    let call = Call {
        ingress: protocol,
        name,
        direct,
        model_span: top.model_span.clone(),
        stream: ingress.stream.or(top.stream).unwrap_or(false),
        framing: ingress.framing,
        request_id: request_id(&headers),
        session,
        headers,
        body,
    };
    engine::forward(gateway, call).await.map(Body::new)
}

/// The vendor fake as an HTTP server: every protocol's upstream path,
/// answered by `mock::respond` (used by `switchyard mock-upstream`).
pub fn mock_router(codecs: crate::CodecFor) -> Router {
    async fn fake(
        codecs: crate::CodecFor,
        protocol: Protocol,
        model: Option<String>,
        stream: Option<bool>,
        framing: Framing,
        body: Bytes,
    ) -> Response {
        let codec = codecs(protocol);
        let stream = stream.unwrap_or_else(|| scan::scan_top_level(&body).ok().and_then(|t| t.stream).unwrap_or(false));
        let reply = crate::mock::respond(codec, model.as_deref(), stream, framing, &body);
        let mut response = Response::new(Body::new(reply.body));
        *response.status_mut() = reply.status;
        *response.headers_mut() = reply.headers;
        response
    }
    Router::new()
        .route(
            "/v1/chat/completions",
            post(move |body: Bytes| fake(codecs, Protocol::OpenAi, None, None, Framing::Sse, body)),
        )
        .route(
            "/v1/responses",
            post(move |body: Bytes| fake(codecs, Protocol::Responses, None, None, Framing::Sse, body)),
        )
        .route(
            "/v1/messages",
            post(move |body: Bytes| fake(codecs, Protocol::Anthropic, None, None, Framing::Sse, body)),
        )
        .route("/v2/chat", post(move |body: Bytes| fake(codecs, Protocol::Cohere, None, None, Framing::Sse, body)))
        .route(
            "/v1beta/models/{*target}",
            post(move |Path(target): Path<String>, RawQuery(query): RawQuery, body: Bytes| async move {
                let (model, action) = target.rsplit_once(':').unwrap_or((&target, "generateContent"));
                let sse = query.as_deref().is_some_and(|q| q.contains("alt=sse"));
                let framing = if sse { Framing::Sse } else { Framing::JsonArray };
                fake(
                    codecs,
                    Protocol::Gemini,
                    Some(model.to_owned()),
                    Some(action == "streamGenerateContent"),
                    framing,
                    body,
                )
                .await
            }),
        )
        .route(
            "/model/{model}/converse",
            post(move |Path(model): Path<String>, body: Bytes| {
                fake(codecs, Protocol::Bedrock, Some(model), Some(false), Framing::EventStream, body)
            }),
        )
        .route(
            "/model/{model}/converse-stream",
            post(move |Path(model): Path<String>, body: Bytes| {
                fake(codecs, Protocol::Bedrock, Some(model), Some(true), Framing::EventStream, body)
            }),
        )
        .route("/healthz", get(healthz))
}
