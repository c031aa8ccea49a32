//! `POST /v1/realtime/client_secrets`: the gateway mints its own
//! short-lived secret for the caller's key (`state::client_secrets`), so
//! a browser opens `/v1/realtime` with it and never holds the key, nor
//! the lane's credential. The body is OpenAI's: `expires_after.seconds`
//! (10 to 7200, 600 when unsaid) and `session` (its `model` binds the
//! secret to that model or pool, which must serve realtime and be one the
//! key may use). The answer is OpenAI's shape: `value`, `expires_at`,
//! `session`. A secret minted here is kept only as its hash, opens a
//! socket's handshake and nothing else, and is refused once expired; a key
//! holds at most `client_secrets::MAX_PER_KEY` alive (past it, a 429).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use serde::Deserialize;
use switchyard_ir::{ErrorInfo, ErrorKind};
use switchyard_state::client_secrets::{Grant, MintError, DEFAULT_TTL_S, MAX_TTL_S, MIN_TTL_S};
use switchyard_state::Gateway;

use super::PROTOCOL;

/// The largest body read.
const MAX_BODY: usize = 256 * 1024;

#[derive(Deserialize, Default)]
#[serde(default)]
struct Mint {
    expires_after: Option<ExpiresAfter>,
    session: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ExpiresAfter {
    #[serde(default)]
    anchor: Option<String>,
    seconds: u64,
}

/// The route.
pub async fn mint(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    match Box::pin(minted(&gateway, &parts, body)).await {
        Ok(response) => response,
        Err(info) => crate::door::refuse(&gateway, PROTOCOL, &parts.headers, info),
    }
}

async fn minted(gateway: &Arc<Gateway>, parts: &http::request::Parts, body: Body) -> Result<Response, ErrorInfo> {
    let client = parts.extensions.get::<switchyard_state::ClientName>();
    let caller = switchyard_engine::authenticate::caller(gateway, PROTOCOL, &parts.uri, &parts.headers, client, &[])?;
    let bytes = switchyard_transport::collect_limited(body, MAX_BODY)
        .await
        .map_err(|_| ErrorInfo::new(ErrorKind::RequestTooLarge, format!("the body is larger than {MAX_BODY} bytes")))?;
    let mint: Mint = if bytes.iter().all(u8::is_ascii_whitespace) {
        Mint::default()
    } else {
        serde_json::from_slice(&bytes)
            .map_err(|err| ErrorInfo::new(ErrorKind::InvalidRequest, format!("the body cannot be read: {err}")))?
    };
    let ttl = match &mint.expires_after {
        None => DEFAULT_TTL_S,
        Some(after) if after.anchor.as_deref().is_some_and(|a| a != "created_at") => {
            return Err(param("`expires_after.anchor` is `created_at`", "expires_after.anchor"));
        }
        Some(after) if !(MIN_TTL_S..=MAX_TTL_S).contains(&after.seconds) => {
            let message = format!("`expires_after.seconds` is from {MIN_TTL_S} to {MAX_TTL_S}");
            return Err(param(&message, "expires_after.seconds"));
        }
        Some(after) => after.seconds,
    };
    let mut session = mint.session.unwrap_or_else(|| serde_json::json!({ "type": "realtime" }));
    let model = match session.get("model") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(model)) => Some(model.clone()),
        Some(_) => return Err(param("`session.model` is a string", "session.model")),
    };
    if let Some(model) = &model {
        crate::generation::pool_serving(gateway, model, switchyard_ir::Operation::Realtime)?;
        if let Some(caller) = caller.as_ref().filter(|c| !c.key.record.may_use(model)) {
            let message = format!("API key {} may not use `{model}`", caller.key.record.prefix);
            return Err(ErrorInfo::new(ErrorKind::PermissionDenied, message));
        }
    }
    let now = switchyard_state::clock::now_ms();
    let expires_at_ms = now.saturating_add(ttl.saturating_mul(1000));
    let key_id = caller.as_ref().map(|c| c.key.id.to_string()).unwrap_or_default();
    let grant = Grant { key_id, model, expires_at_ms };
    let value = gateway.client_secrets.mint(grant, now).map_err(|err| match err {
        MintError::KeyFull => ErrorInfo::new(ErrorKind::RateLimit, err.to_string()),
        MintError::Full | MintError::Random => ErrorInfo::new(ErrorKind::Overloaded, err.to_string()).with_status(503),
    })?;
    if let Some(session) = session.as_object_mut() {
        session.entry("type").or_insert_with(|| "realtime".into());
        session.entry("object").or_insert_with(|| "realtime.session".into());
    }
    let answer = serde_json::json!({ "value": value, "expires_at": expires_at_ms / 1000, "session": session });
    let mut response = Response::new(Body::from(answer.to_string()));
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    // A secret is shown once: nothing between may keep it.
    response.headers_mut().insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    Ok(response)
}

fn param(message: &str, param: &str) -> ErrorInfo {
    let mut info = ErrorInfo::new(ErrorKind::InvalidRequest, message.to_owned());
    info.param = Some(param.into());
    info
}
