//! What every admin route uses: the routes' shared state, the error they
//! answer with, the audit target a mutation names, entity tags and
//! `If-Match`, and the body shapes and parsers of budgets, limits, times and
//! pages.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use switchyard_config::Scope;
use switchyard_governance::money::usd;
use switchyard_governance::{BucketId, Budget, Limits, Window};
use switchyard_store::StoreError;
use utoipa::ToSchema;

use switchyard_state::governance::Governance;
use switchyard_state::Gateway;

/// The admin router's shared state.
#[derive(Clone)]
pub(crate) struct Admin {
    pub(crate) gateway: Arc<Gateway>,
    /// Full create/rotate responses (secret included) by idempotency key,
    /// for an hour, so a retried request gets the secret it missed. Only in
    /// memory: a secret is never written to a store.
    pub(crate) replays: Arc<Mutex<HashMap<(String, String), Replay>>>,
}

/// A kept answer: when, the request's fingerprint, the body.
pub(crate) type Replay = (Instant, String, Vec<u8>);

/// How long a create or rotate response can be replayed with its secret.
pub(crate) const REPLAY_FOR: Duration = Duration::from_secs(3600);

/// Who made an admin request (an extension set by [`require_token`]).
#[derive(Debug, Clone)]
pub struct Actor {
    /// The token's name.
    pub name: Arc<str>,
    /// Its scope.
    pub scope: Scope,
    /// A single sign-on's account id at its provider (`sub`).
    pub subject: Option<Arc<str>>,
}

/// An admin API error: a status and a plain JSON body.
#[derive(Debug)]
pub(crate) struct ApiError(pub(crate) StatusCode, pub(crate) String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"message": self.1, "status": self.0.as_u16()}});
        (self.0, Json(body)).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> ApiError {
        match err {
            StoreError::NotFound => ApiError(StatusCode::NOT_FOUND, "not found".into()),
            StoreError::Conflict(message) => ApiError(StatusCode::CONFLICT, message),
            StoreError::Stale => {
                ApiError(StatusCode::CONFLICT, "the record changed while this request was applied; retry".into())
            }
            StoreError::Unavailable(message) => {
                ApiError(StatusCode::SERVICE_UNAVAILABLE, format!("the store is unavailable: {message}"))
            }
        }
    }
}

pub(crate) fn bad(message: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, message.into())
}

pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// The record a mutation touched, for the audit entry.
#[derive(Debug, Clone)]
pub(crate) struct AuditTarget(pub(crate) String);

pub(crate) fn audited(target: &str, response: impl IntoResponse) -> Response {
    let mut response = response.into_response();
    response.extensions_mut().insert(AuditTarget(target.to_owned()));
    response
}

pub(crate) fn governance(admin: &Admin) -> ApiResult<&Arc<Governance>> {
    admin.gateway.governance.as_ref().ok_or_else(|| {
        ApiError(
            StatusCode::NOT_FOUND,
            "governance is off: set auth.mode: keys or storage: in the config to keep keys and a ledger".into(),
        )
    })
}

// ---------------------------------------------------------------- types --

/// A budget as the API reads and writes it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetBody {
    /// The cap, in USD.
    pub usd: f64,
    /// `1m`, `1h`, `1d`, `7d`, `1mo` (calendar, UTC) or `total`.
    pub window: String,
}

/// Limits as the API reads and writes them.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsBody {
    /// Requests per minute.
    pub rpm: Option<u64>,
    /// Tokens (input plus output) per minute.
    pub tpm: Option<u64>,
    /// Requests in flight.
    pub concurrent: Option<u64>,
}

pub(crate) fn double_option<'de, T: Deserialize<'de>, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// A bucket's live figures.
#[derive(Debug, Serialize, ToSchema)]
pub struct UsageView {
    /// Settled spend in the current budget window, USD.
    pub spent_usd: f64,
    /// Reserved by requests in flight, USD.
    pub reserved_usd: f64,
    /// What is left of the budget, USD (absent: no budget).
    pub budget_left_usd: Option<f64>,
    /// Share of requests per minute left.
    pub requests_headroom: Option<f64>,
    /// Share of tokens per minute left.
    pub tokens_headroom: Option<f64>,
    /// Requests in flight.
    pub in_flight: u64,
}

/// A page cursor query.
#[derive(Debug, Deserialize, ToSchema)]
pub struct PageQuery {
    /// At most this many (default 50, at most 1000).
    pub limit: Option<usize>,
    /// From a previous page's `next_cursor`.
    pub cursor: Option<String>,
}

// -------------------------------------------------------------- helpers --

pub(crate) fn budget_of(body: &BudgetBody, path: &str) -> ApiResult<Budget> {
    let window = Window::from_name(&body.window).ok_or_else(|| {
        bad(format!("{path}.window: `{}` is not a window; use 1m, 1h, 1d, 7d, 1mo or total", body.window))
    })?;
    if !body.usd.is_finite() || body.usd < 0.0 {
        return Err(bad(format!("{path}.usd: a budget is a finite amount, 0 or more")));
    }
    Ok(Budget { usd: body.usd, window })
}

pub(crate) fn budget_body(budget: &Budget) -> BudgetBody {
    BudgetBody { usd: budget.usd, window: budget.window.as_str().to_owned() }
}

pub(crate) fn limits_of(body: &LimitsBody, path: &str) -> ApiResult<Limits> {
    for (name, value) in [("rpm", body.rpm), ("tpm", body.tpm), ("concurrent", body.concurrent)] {
        if value == Some(0) {
            return Err(bad(format!("{path}.{name}: a limit of 0 refuses everything; omit it for no limit")));
        }
    }
    Ok(Limits { rpm: body.rpm, tpm: body.tpm, concurrent: body.concurrent })
}

pub(crate) fn limits_body(limits: &Limits) -> LimitsBody {
    LimitsBody { rpm: limits.rpm, tpm: limits.tpm, concurrent: limits.concurrent }
}

/// A time given as RFC 3339 or Unix seconds.
pub(crate) fn parse_time(value: &serde_json::Value, path: &str) -> ApiResult<i64> {
    match value {
        serde_json::Value::Number(n) => n.as_i64().ok_or_else(|| bad(format!("{path}: not a Unix time"))),
        serde_json::Value::String(text) => parse_time_text(text, path),
        _ => Err(bad(format!("{path}: give RFC 3339 text or Unix seconds"))),
    }
}

pub(crate) fn parse_time_text(text: &str, path: &str) -> ApiResult<i64> {
    if let Ok(seconds) = text.parse::<i64>() {
        return Ok(seconds);
    }
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .map(|t| t.unix_timestamp())
        .map_err(|_| bad(format!("{path}: `{text}` is neither RFC 3339 nor Unix seconds")))
}

pub(crate) fn random<const N: usize>() -> ApiResult<[u8; N]> {
    switchyard_state::sign_ins::random()
        .ok_or_else(|| ApiError(StatusCode::INTERNAL_SERVER_ERROR, "the OS random source failed".into()))
}

pub(crate) fn usage_view(governance: &Governance, id: &BucketId) -> Option<UsageView> {
    let view = governance.bucket(id)?;
    Some(UsageView {
        spent_usd: usd(view.spent),
        reserved_usd: usd(view.reserved),
        budget_left_usd: view.budget_left.map(usd),
        requests_headroom: view.requests_headroom,
        tokens_headroom: view.tokens_headroom,
        in_flight: view.in_flight,
    })
}

/// A record's entity tag: `"<tag>"`, strong (the record's stored version,
/// or a hash of what it holds).
pub(crate) fn etag(tag: &str) -> axum::http::HeaderValue {
    axum::http::HeaderValue::from_str(&format!("\"{tag}\"")).unwrap_or(axum::http::HeaderValue::from_static("\"\""))
}

/// A record's tag from what it holds (for records without a version).
pub(crate) fn content_tag(record: &impl serde::Serialize) -> String {
    let json = serde_json::to_string(record).unwrap_or_default();
    switchyard_governance::KeyHash::of(&json).to_hex()[..16].to_owned()
}

/// Refuses a write whose `If-Match` names another version of the record
/// than the stored one (`current`): a lost update is a 412, never a silent
/// overwrite. Without `If-Match` the write goes ahead (`*` matches any).
pub(crate) fn check_if_match(headers: &HeaderMap, current: &str, what: &str) -> ApiResult<()> {
    let Some(value) = headers.get(axum::http::header::IF_MATCH) else { return Ok(()) };
    let value = value.to_str().map_err(|_| bad("If-Match must be printable"))?;
    let matches = value
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || tag.trim_start_matches("W/").trim_matches('"') == current);
    if matches {
        Ok(())
    } else {
        Err(ApiError(
            StatusCode::PRECONDITION_FAILED,
            format!("{what} changed since you read it (If-Match {value}, now \"{current}\"); read it again and retry"),
        ))
    }
}

/// `response` with the record's entity tag.
pub(crate) fn tagged(tag: &str, response: impl IntoResponse) -> Response {
    let mut response = response.into_response();
    response.headers_mut().insert(axum::http::header::ETAG, etag(tag));
    response
}

/// A spend dimension by its API name.
pub(crate) fn spend_by(name: &str) -> ApiResult<switchyard_store::SpendBy> {
    use switchyard_store::SpendBy;
    Ok(match name {
        "key" => SpendBy::Key,
        "group" => SpendBy::Group,
        "model" => SpendBy::Model,
        "lane" => SpendBy::Lane,
        "operation" => SpendBy::Operation,
        "user" => SpendBy::User,
        other => return Err(bad(format!("by: `{other}` is not key, group, user, model, lane or operation"))),
    })
}

/// The name of the key whose id is `value`, when a line is by key.
pub(crate) fn key_name(governance: &Governance, by: switchyard_store::SpendBy, value: Option<&str>) -> Option<String> {
    (by == switchyard_store::SpendBy::Key)
        .then(|| value.and_then(|id| governance.key(id)).map(|k| k.record.name.clone()))?
}
