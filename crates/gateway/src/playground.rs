//! The console's playground: one prompt sent, as a key, to a pool, in any
//! caller dialect, through the data plane's own router in-process (the
//! same stages a caller's request takes: authentication, admission,
//! routing, translation, billing). What comes back is what an operator
//! wants to see: the reply's text, the lane that answered, what the
//! translation dropped, the time and the cost.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::{HeaderValue, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use switchyard_ir::{Message, Protocol, Role};
use switchyard_state::Gateway;
use tower_service::Service;

/// `POST /api/v1/admin/playground`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prompt {
    /// The caller dialect: `openai`, `responses`, `anthropic`, `gemini`,
    /// `cohere` or `bedrock` (Converse, with the key as a bearer token, as
    /// Bedrock API keys are sent; SigV4 needs an AWS pair the console
    /// never holds).
    pub dialect: String,
    /// The pool or model named.
    pub pool: String,
    /// The user's message.
    pub prompt: String,
    /// The virtual key to send it as (needed under `auth: keys`).
    pub key: Option<String>,
    /// The most output tokens (default 256).
    pub max_tokens: Option<u64>,
}

/// The longest prompt the playground sends.
const MAX_PROMPT: usize = 64 * 1024;

fn refuse(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(serde_json::json!({"error": {"message": message.into()}}))).into_response()
}

/// The playground's route, sending through `data` (the data plane's
/// router for `gateway`).
pub fn routes(gateway: Arc<Gateway>, data: axum::Router) -> axum::Router {
    axum::Router::new()
        .route("/api/v1/admin/playground", axum::routing::post(send))
        .with_state(Playground { gateway, data })
}

/// What the playground sends with.
#[derive(Clone)]
struct Playground {
    gateway: Arc<Gateway>,
    data: axum::Router,
}

/// The dialects, as a refusal lists them (`a, b or c`).
fn dialects() -> String {
    let names: Vec<&str> = Protocol::ALL.iter().map(|p| p.as_str()).collect();
    match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Sends the prompt and answers with what came back.
async fn send(State(playground): State<Playground>, Json(prompt): Json<Prompt>) -> Response {
    let gateway = playground.gateway;
    let Some(protocol) = Protocol::from_name(&prompt.dialect) else {
        return refuse(StatusCode::BAD_REQUEST, format!("dialect: use {}", dialects()));
    };
    if prompt.prompt.is_empty() || prompt.prompt.len() > MAX_PROMPT {
        return refuse(StatusCode::BAD_REQUEST, format!("prompt: 1 to {MAX_PROMPT} bytes"));
    }
    let request = switchyard_ir::Request {
        model: prompt.pool.clone(),
        messages: vec![Message::text(Role::User, prompt.prompt.clone())],
        max_tokens: Some(prompt.max_tokens.unwrap_or(256).clamp(1, 32_768)),
        ..switchyard_ir::Request::default()
    };
    let codec = gateway.codec(protocol);
    let body = codec.write_request(&request).body;
    let shown = String::from_utf8_lossy(&body).into_owned();
    // Where and how the protocol's SDK would send it: its ingress table's
    // sample and key.
    let ingress = codec.ingress();
    let path = ingress.sample.path(&switchyard_codec::path_segment(&prompt.pool));
    let mut builder = Request::post(path).header("content-type", "application/json");
    for (name, value) in ingress.sample.headers {
        builder = builder.header(*name, *value);
    }
    if let Some(key) = prompt.key.as_deref().filter(|k| !k.is_empty()) {
        let value = match ingress.key.is_bearer() {
            true => HeaderValue::from_str(&format!("Bearer {key}")),
            false => HeaderValue::from_str(key),
        };
        let Ok(value) = value else {
            return refuse(StatusCode::BAD_REQUEST, "key: not a key");
        };
        builder = builder.header(ingress.key.header, value);
    }
    let Ok(request) = builder.body(axum::body::Body::from(body)) else {
        return refuse(StatusCode::BAD_REQUEST, "the request could not be built");
    };
    let started = Instant::now();
    let mut router = playground.data;
    let response = match router.call(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let status = response.status().as_u16();
    let (lane, dropped, request_id) = {
        let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        (header("x-switchyard-lane"), header("x-switchyard-dropped"), header("x-request-id"))
    };
    let bytes = match axum::body::to_bytes(response.into_body(), 16 << 20).await {
        Ok(bytes) => bytes,
        Err(err) => return refuse(StatusCode::BAD_GATEWAY, format!("the reply could not be read: {err}")),
    };
    let took_ms = started.elapsed().as_millis() as u64;
    let codec = gateway.codec(protocol);
    let (text, usage, error) = if (200..300).contains(&status) {
        match codec.read_response(&bytes) {
            Ok(reply) => (Some(reply_text(&reply)), Some(reply.usage), None),
            Err(err) => (None, None, Some(err.to_string())),
        }
    } else {
        (None, None, Some(codec.extract_error(status, &bytes).message))
    };
    let cost = match (&usage, lane.as_deref().and_then(|l| gateway.lanes.iter().find(|lane| &*lane.name == l))) {
        (Some(usage), Some(lane)) => lane.price.map(|price| {
            let tokens = switchyard_governance::money::Tokens {
                requests: 0,
                ..switchyard_governance::money::Tokens::served(usage, 0)
            };
            switchyard_governance::money::usd(price.cost(&tokens))
        }),
        _ => None,
    };
    Json(serde_json::json!({
        "status": status,
        "text": text,
        "error": error,
        "lane": lane,
        "dropped": dropped,
        "request_id": request_id,
        "took_ms": took_ms,
        "input_tokens": usage.as_ref().map(|u| u.input_tokens),
        "output_tokens": usage.as_ref().map(|u| u.output_tokens),
        "usd": cost,
        "request": shown,
    }))
    .into_response()
}

/// A reply's text blocks, joined.
fn reply_text(reply: &switchyard_ir::Response) -> String {
    reply
        .content
        .iter()
        .filter_map(|block| match block {
            switchyard_ir::Block::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("")
}
