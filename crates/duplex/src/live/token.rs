//! Gemini's ephemeral tokens, as the gateway's own client secrets
//! (`state::client_secrets`): `POST /v1alpha/auth_tokens`
//! (google-genai's `client.auth_tokens.create`) with the caller's key
//! mints `auth_tokens/sy-ek-…`, bound to that key and, when
//! `bidiGenerateContentSetup.model` names one, to that model or pool (which
//! must serve live, and be one the key may use). Its life is
//! `newSessionExpireTime` (the window to open a session: 60 s when unsaid,
//! 10 s to 2 h); a session it opened lives by the `duplex:` bounds (an
//! `expireTime` is refused: the gateway does not end sessions by it).
//! It opens a Live socket only, given as google-genai gives it
//! (`Authorization: Token auth_tokens/…` on
//! `BidiGenerateContentConstrained`) or in `?access_token=`; the HTTP API
//! refuses it, and the lane's credential is never in it. What the gateway
//! does not enforce is refused at the mint rather than ignored: a setup
//! that locks more than its model (`fieldMask`, instructions, config), and
//! more than one `uses` counted (a token opens sessions until it expires).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use serde::Deserialize;
use switchyard_ir::{ErrorInfo, ErrorKind, Operation};
use switchyard_state::client_secrets::{Grant, MintError, MAX_TTL_S, MIN_TTL_S};
use switchyard_state::Gateway;

use super::PROTOCOL;

/// The name prefix Gemini gives its tokens (google-genai sends a token so
/// named as a `Token` credential).
pub(crate) const NAME_PREFIX: &str = "auth_tokens/";

/// A token's window to open a session when the caller names none (Gemini's).
const DEFAULT_TTL_S: u64 = 60;

/// The largest body read.
const MAX_BODY: usize = 64 * 1024;

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Mint {
    uses: Option<u64>,
    expire_time: Option<String>,
    new_session_expire_time: Option<String>,
    bidi_generate_content_setup: Option<serde_json::Map<String, serde_json::Value>>,
    field_mask: Option<serde_json::Value>,
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
        .map_err(|_| invalid(format!("the body is larger than {MAX_BODY} bytes")).with_status(413))?;
    let mint: Mint = if bytes.iter().all(u8::is_ascii_whitespace) {
        Mint::default()
    } else {
        serde_json::from_slice(&bytes).map_err(|err| invalid(format!("the body cannot be read: {err}")))?
    };
    if mint.uses.is_some_and(|uses| uses > 1) {
        return Err(invalid("`uses` is 1: a gateway token opens sessions until it expires, uncounted".into()));
    }
    if mint.expire_time.is_some() {
        return Err(invalid(
            "`expireTime` is not enforced: a session lives by the gateway's duplex.max_duration".into(),
        ));
    }
    if mint.field_mask.is_some() {
        return Err(invalid("`fieldMask` is not enforced by the gateway: a token binds its model only".into()));
    }
    let now = switchyard_state::clock::now_ms();
    let now_s = i64::try_from(now / 1000).unwrap_or(i64::MAX);
    let ttl = match &mint.new_session_expire_time {
        None => DEFAULT_TTL_S,
        Some(at) => {
            let at = time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
                .map_err(|_| invalid(format!("`newSessionExpireTime` is an RFC 3339 time, not `{at}`")))?;
            u64::try_from(at.unix_timestamp().saturating_sub(now_s))
                .ok()
                .filter(|ttl| (MIN_TTL_S..=MAX_TTL_S).contains(ttl))
                .ok_or_else(|| {
                    invalid(format!("`newSessionExpireTime` is from {MIN_TTL_S} s to {MAX_TTL_S} s from now"))
                })?
        }
    };
    let model = match mint.bidi_generate_content_setup {
        None => None,
        Some(setup) => {
            let Some(serde_json::Value::String(model)) = setup.get("model") else {
                return Err(invalid("`bidiGenerateContentSetup.model` is required".into()));
            };
            if setup.len() > 1 {
                return Err(invalid("the gateway binds a token to its model only: lock no other setup field".into()));
            }
            let model = model.strip_prefix("models/").unwrap_or(model).to_owned();
            crate::generation::pool_serving(gateway, &model, Operation::Live)?;
            if let Some(caller) = caller.as_ref().filter(|c| !c.key.record.may_use(&model)) {
                let message = format!("API key {} may not use `{model}`", caller.key.record.prefix);
                return Err(ErrorInfo::new(ErrorKind::PermissionDenied, message));
            }
            Some(model)
        }
    };
    let expires_at_ms = now.saturating_add(ttl.saturating_mul(1000));
    let key_id = caller.as_ref().map(|c| c.key.id.to_string()).unwrap_or_default();
    let value = gateway.client_secrets.mint(Grant { key_id, model, expires_at_ms }, now).map_err(|err| match err {
        MintError::KeyFull => ErrorInfo::new(ErrorKind::RateLimit, err.to_string()),
        MintError::Full | MintError::Random => ErrorInfo::new(ErrorKind::Overloaded, err.to_string()).with_status(503),
    })?;
    let expires = time::OffsetDateTime::from_unix_timestamp(i64::try_from(expires_at_ms / 1000).unwrap_or(i64::MAX))
        .ok()
        .and_then(|at| at.format(&time::format_description::well_known::Rfc3339).ok());
    let answer = serde_json::json!({ "name": format!("{NAME_PREFIX}{value}"), "newSessionExpireTime": expires });
    let mut response = Response::new(Body::from(answer.to_string()));
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    // A token is shown once: nothing between may keep it.
    response.headers_mut().insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    Ok(response)
}

/// The token a Live handshake carries, if any: `Authorization: Token …`
/// (google-genai), else `?access_token=`; with or without its
/// `auth_tokens/` name.
pub(crate) fn presented(parts: &http::request::Parts) -> Option<String> {
    let header = parts
        .headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Token "))
        .map(|v| v.trim().to_owned());
    let token = header.or_else(|| {
        form_urlencoded::parse(parts.uri.query()?.as_bytes())
            .find(|(name, _)| name == "access_token")
            .map(|(_, value)| value.into_owned())
    })?;
    Some(token.strip_prefix(NAME_PREFIX).map_or_else(|| token.clone(), str::to_owned))
}

fn invalid(message: String) -> ErrorInfo {
    ErrorInfo::new(ErrorKind::InvalidRequest, message)
}
