//! The admin API on the admin listener: virtual keys (create with the
//! secret shown once, rotate in place, revoke for good, change), the group
//! tree, spend derived from the ledger at today's prices, recent requests,
//! lanes with a manual breaker reset, and the audit log. Admin tokens are
//! compared in constant time; a read-only token may read everything and
//! change nothing; every mutation attempt is audited (who, what, outcome,
//! never a secret). Create and rotate take an `Idempotency-Key`. Lists page
//! with opaque cursors. The OpenAPI document is generated from this code.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use switchyard_config::Scope;
use switchyard_governance::key::{new_secret, secrets_match, visible_prefix, AwsCredential, KeyState};
use switchyard_governance::money::usd;
use switchyard_governance::{BucketId, Budget, KeyHash, KeyRecord, Limits, Window};
use switchyard_store::{AuditEntry, GroupRecord, Idempotency, RowFilter, SpendBy, StoreError, TotalsQuery, Written};
use utoipa::{OpenApi, ToSchema};

use crate::sampler::now_minute;
use switchyard_state::governance::{now_ms, Governance};
use switchyard_state::sign_ins::{cookie_value, SignIn, COOKIE};
use switchyard_state::Gateway;
use switchyard_telemetry::history::{Point, Span};

/// The admin API's routes (merged into the admin listener's router).
pub fn routes(gateway: Arc<Gateway>) -> Router {
    let state = Admin { gateway, replays: Arc::new(Mutex::new(HashMap::new())) };
    Router::new()
        .route("/api/v1/admin/keys", post(create_key).get(list_keys))
        .route("/api/v1/admin/keys/{id}", get(get_key).patch(patch_key).delete(revoke_key))
        .route("/api/v1/admin/keys/{id}/rotate", post(rotate_key))
        .route("/api/v1/admin/groups", post(create_group).get(list_groups))
        .route("/api/v1/admin/groups/{name}", get(get_group).patch(patch_group).delete(delete_group))
        .route("/api/v1/admin/spend", get(spend))
        .route("/api/v1/admin/requests", get(requests))
        .route("/api/v1/admin/requests/{id}", get(request_detail))
        .route("/api/v1/admin/history", get(history))
        .route("/api/v1/admin/lanes", get(lanes))
        .route("/api/v1/admin/lanes/{pool}/{lane}/reset", post(reset_lane))
        .route("/api/v1/admin/audit", get(audit))
        .route("/api/v1/admin/config", get(running_config))
        .route("/api/v1/admin/config/validate", post(validate_config))
        .route("/api/v1/admin/config/reload", post(reload_config))
        .route("/api/v1/admin/openapi.json", get(openapi))
        .with_state(state)
}

/// The admin router's shared state.
#[derive(Clone)]
struct Admin {
    gateway: Arc<Gateway>,
    /// Full create/rotate responses (secret included) by idempotency key,
    /// for an hour, so a retried request gets the secret it missed. Only in
    /// memory: a secret is never written to a store.
    replays: Arc<Mutex<HashMap<(String, String), Replay>>>,
}

/// A kept answer: when, the request's fingerprint, the body.
type Replay = (Instant, String, Vec<u8>);

/// How long a create or rotate response can be replayed with its secret.
const REPLAY_FOR: Duration = Duration::from_secs(3600);

/// Who made an admin request (an extension set by [`require_token`]).
#[derive(Debug, Clone)]
pub struct Actor {
    /// The token's name.
    pub name: Arc<str>,
    /// Its scope.
    pub scope: Scope,
}

/// An admin API error: a status and a plain JSON body.
#[derive(Debug)]
struct ApiError(StatusCode, String);

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

fn bad(message: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, message.into())
}

type ApiResult<T> = Result<T, ApiError>;

/// The admin plane's token check and audit: every route but `/healthz`
/// needs a valid token (a header, or the console's session cookie);
/// mutations need a full-scope one, through the console also its anti-CSRF
/// token, and are audited, refused or not.
pub async fn require_token(State(gateway): State<Arc<Gateway>>, mut request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| request.headers().get("x-admin-token").and_then(|v| v.to_str().ok()))
        .map(str::trim);
    // Every configured token is compared (no early exit), in constant time.
    let mut actor = None;
    for token in &gateway.config.admin.tokens {
        if presented.is_some_and(|p| secrets_match(p, &token.token)) && actor.is_none() {
            actor = Some(Actor { name: token.name.clone(), scope: token.scope });
        }
    }
    let method = request.method().clone();
    let mutation = !matches!(method, Method::GET | Method::HEAD | Method::OPTIONS);
    let mut csrf_refused = false;
    if presented.is_none() {
        if let Some(sign_in) = signed_in(&gateway, request.headers()) {
            csrf_refused = mutation && !csrf_ok(request.headers(), &sign_in.csrf);
            actor = Some(Actor { name: sign_in.name, scope: sign_in.scope });
        }
    }
    let action = format!("{method} {}", request.uri().path());
    let source = request.extensions().get::<switchyard_state::Peer>().map(|peer| peer.0);
    let response = match &actor {
        None => ApiError(
            StatusCode::UNAUTHORIZED,
            "a valid admin token is required (Authorization: Bearer or X-Admin-Token)".into(),
        )
        .into_response(),
        Some(actor) if mutation && actor.scope == Scope::Read => {
            ApiError(StatusCode::FORBIDDEN, format!("token `{}` is read-only", actor.name)).into_response()
        }
        Some(_) if csrf_refused => ApiError(
            StatusCode::FORBIDDEN,
            "the console's anti-CSRF token is missing or wrong: reload the page and try again".into(),
        )
        .into_response(),
        Some(actor) => {
            request.extensions_mut().insert(actor.clone());
            next.run(request).await
        }
    };
    if mutation {
        let actor = actor.as_ref().map_or("unauthenticated", |a| &a.name);
        let target = response.extensions().get::<AuditTarget>().map(|t| t.0.clone());
        audit_entry(&gateway, source, actor, action, target, response.status().as_u16()).await;
    }
    response
}

/// Records an admin mutation attempt from `source` (when governance keeps
/// an audit log), through the log's one door (`switchyard_state::audit::record`).
pub(crate) async fn audit_entry(
    gateway: &Gateway,
    source: Option<std::net::IpAddr>,
    actor: &str,
    action: String,
    target: Option<String>,
    outcome: u16,
) {
    let Some(governance) = &gateway.governance else { return };
    let entry = AuditEntry { at_ms: now_ms() as i64, actor: actor.to_owned(), action, target, outcome };
    switchyard_state::audit::record(&governance.stores, &governance.audit_gate, entry, source).await;
}

/// The console session a request's cookie names, with the scope its admin
/// token has now (a token taken out of the config ends its sessions).
pub fn signed_in(gateway: &Gateway, headers: &HeaderMap) -> Option<SignIn> {
    let cookies = headers.get(axum::http::header::COOKIE)?.to_str().ok()?;
    let cookie = cookie_value(cookies, COOKIE)?;
    let mut sign_in = gateway.sign_ins.find(cookie, Instant::now())?;
    let mut current = None;
    for token in &gateway.config.admin.tokens {
        if KeyHash::of(&token.token).matches(&sign_in.token) && current.is_none() {
            current = Some((token.name.clone(), token.scope));
        }
    }
    let Some((name, scope)) = current else {
        gateway.sign_ins.close(cookie);
        return None;
    };
    (sign_in.name, sign_in.scope) = (name, scope);
    Some(sign_in)
}

/// A console mutation echoes the session's anti-CSRF token in a header a
/// cross-site form cannot set, and (where the browser says) comes from the
/// console's own origin.
pub(crate) fn csrf_ok(headers: &HeaderMap, expected: &str) -> bool {
    let echoed = headers.get("x-csrf-token").and_then(|v| v.to_str().ok()).is_some_and(|v| secrets_match(v, expected));
    let same_origin =
        headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()).is_none_or(|site| site == "same-origin");
    echoed && same_origin
}

/// The record a mutation touched, for the audit entry.
#[derive(Debug, Clone)]
struct AuditTarget(String);

fn audited(target: &str, response: impl IntoResponse) -> Response {
    let mut response = response.into_response();
    response.extensions_mut().insert(AuditTarget(target.to_owned()));
    response
}

fn governance(admin: &Admin) -> ApiResult<&Arc<Governance>> {
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

/// `POST /api/v1/admin/keys`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKey {
    /// A name for people.
    pub name: String,
    /// The group whose budget tree the key draws on.
    pub group: Option<String>,
    /// Pools and models the key may name (absent: every one).
    pub pools: Option<Vec<String>>,
    /// The key's own budget.
    pub budget: Option<BudgetBody>,
    /// The key's own limits.
    pub limits: Option<LimitsBody>,
    /// When it stops working: RFC 3339 or Unix seconds.
    #[schema(value_type = Option<String>)]
    pub expires_at: Option<serde_json::Value>,
    /// Free-form data.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// Mint an AWS key pair for Bedrock callers.
    #[serde(default)]
    pub issue_aws_credential: bool,
}

/// `PATCH /api/v1/admin/keys/{id}`: absent fields stay; `null` clears.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchKey {
    /// New name.
    pub name: Option<String>,
    /// New group (`null`: none).
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<String>)]
    pub group: Option<Option<String>>,
    /// New allow-list (`null`: every pool).
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<Vec<String>>)]
    pub pools: Option<Option<Vec<String>>>,
    /// New budget (`null`: none).
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<BudgetBody>)]
    pub budget: Option<Option<BudgetBody>>,
    /// New limits.
    pub limits: Option<LimitsBody>,
    /// New expiry (`null`: never).
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<String>)]
    pub expires_at: Option<Option<serde_json::Value>>,
    /// New metadata (replaces the old).
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

fn double_option<'de, T: Deserialize<'de>, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
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

/// A key as the API shows it: never its secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyView {
    /// Stable id.
    pub id: String,
    /// Name.
    pub name: String,
    /// The visible start of the secret.
    pub prefix: String,
    /// `active`, `expired` or `revoked`.
    pub state: &'static str,
    /// Group.
    pub group: Option<String>,
    /// Allow-list.
    pub pools: Option<Vec<String>>,
    /// Own budget.
    pub budget: Option<BudgetBody>,
    /// Own limits.
    pub limits: LimitsBody,
    /// Expiry (Unix seconds).
    pub expires_at: Option<i64>,
    /// Revocation time (Unix seconds).
    pub revoked_at: Option<i64>,
    /// Creation time (Unix seconds).
    pub created_at: i64,
    /// Last rotation (Unix seconds).
    pub rotated_at: Option<i64>,
    /// Metadata.
    #[schema(value_type = Object)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// The minted AWS access key id (the secret is shown only at creation).
    pub aws_access_key_id: Option<String>,
    /// Live figures of the key's own bucket.
    pub usage: Option<UsageView>,
}

/// A create or rotate answer: the key and, this once, its secrets.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyWithSecret {
    /// The key.
    #[serde(flatten)]
    pub key: KeyView,
    /// The secret: shown once, never stored.
    #[serde(rename = "key")]
    pub secret: Option<String>,
    /// The minted AWS secret, once.
    pub aws_secret_access_key: Option<String>,
    /// True when this answers a retried request whose secret can no longer be shown.
    pub replayed: bool,
}

/// A page of keys.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyPage {
    /// The keys.
    pub data: Vec<KeyView>,
    /// Pass as `cursor` for the next page; absent on the last.
    pub next_cursor: Option<String>,
}

/// `POST /api/v1/admin/groups`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateGroup {
    /// Unique name.
    pub name: String,
    /// The group above.
    pub parent: Option<String>,
    /// Spending cap.
    pub budget: Option<BudgetBody>,
    /// Limits.
    pub limits: Option<LimitsBody>,
}

/// `PATCH /api/v1/admin/groups/{name}`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchGroup {
    /// New parent (`null`: a root).
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<String>)]
    pub parent: Option<Option<String>>,
    /// New budget (`null`: none).
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<BudgetBody>)]
    pub budget: Option<Option<BudgetBody>>,
    /// New limits.
    pub limits: Option<LimitsBody>,
}

/// A group as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupView {
    /// Name.
    pub name: String,
    /// Parent.
    pub parent: Option<String>,
    /// Budget.
    pub budget: Option<BudgetBody>,
    /// Limits.
    pub limits: LimitsBody,
    /// Declared in the config file (change it there).
    pub from_config: bool,
    /// Live figures of the group's bucket.
    pub usage: Option<UsageView>,
}

/// `GET /api/v1/admin/spend` query.
#[derive(Debug, Deserialize, ToSchema)]
pub struct SpendQuery {
    /// `key`, `group`, `model` or `lane`.
    pub by: Option<String>,
    /// From: RFC 3339 or Unix seconds (default: the start of this month, UTC).
    pub from: Option<String>,
    /// To, exclusive: RFC 3339 or Unix seconds (default: the end of this hour).
    pub to: Option<String>,
    /// `json` (the default) or `csv`.
    pub format: Option<String>,
}

/// One spend line: tokens and their price today.
#[derive(Debug, Serialize, ToSchema)]
pub struct SpendLine {
    /// The key id, group, model or lane (absent: requests without one).
    pub value: Option<String>,
    /// The key's name, when the lines are by key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Requests.
    pub requests: u64,
    /// Input tokens (cached included).
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cache reads.
    pub cache_read_tokens: u64,
    /// Cache writes.
    pub cache_write_tokens: u64,
    /// USD at the current rate card.
    pub usd: f64,
}

/// Spend over a range.
#[derive(Debug, Serialize, ToSchema)]
pub struct SpendReport {
    /// The dimension.
    pub by: String,
    /// From (Unix seconds).
    pub from: i64,
    /// To (Unix seconds).
    pub to: i64,
    /// One line per value, largest spend first. A group's line is its
    /// whole subtree (what its budget sees).
    pub data: Vec<SpendLine>,
    /// Total USD.
    pub total_usd: f64,
}

/// `GET /api/v1/admin/requests` query.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RequestsQuery {
    /// Only this key's.
    pub key: Option<String>,
    /// Only this pool's.
    pub pool: Option<String>,
    /// Only this lane's.
    pub lane: Option<String>,
    /// Only this status.
    pub status: Option<u16>,
    /// At most this many (default 50, at most 1000).
    pub limit: Option<usize>,
    /// From a previous page's `next_cursor`.
    pub cursor: Option<String>,
}

/// One request from the ledger, priced today.
#[derive(Debug, Serialize, ToSchema)]
pub struct RequestView {
    /// Row id.
    pub id: i64,
    /// When it finished (Unix ms).
    pub at_ms: i64,
    /// Request id.
    pub request_id: String,
    /// Key id.
    pub key_id: Option<String>,
    /// Group.
    pub group: Option<String>,
    /// Pool named.
    pub pool: String,
    /// Lane that served.
    pub lane: String,
    /// Wire model.
    pub model: String,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cache reads.
    pub cache_read_tokens: u64,
    /// Cache writes.
    pub cache_write_tokens: u64,
    /// Status.
    pub status: u16,
    /// Total time (ms).
    pub latency_ms: u64,
    /// Time to first byte (ms).
    pub ttfb_ms: Option<u64>,
    /// Lanes tried before the one that answered.
    pub failovers: u32,
    /// Tokens estimated by the gateway (the caller left before usage came).
    pub estimated: bool,
    /// USD at the current rate card.
    pub usd: f64,
    /// Every upstream attempt in order, when there was more than one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<Object>)]
    pub attempts: Vec<switchyard_store::Attempt>,
}

/// A page of requests.
#[derive(Debug, Serialize, ToSchema)]
pub struct RequestPage {
    /// Newest first.
    pub data: Vec<RequestView>,
    /// For the next (older) page.
    pub next_cursor: Option<String>,
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

fn budget_of(body: &BudgetBody, path: &str) -> ApiResult<Budget> {
    let window = Window::from_name(&body.window).ok_or_else(|| {
        bad(format!("{path}.window: `{}` is not a window; use 1m, 1h, 1d, 7d, 1mo or total", body.window))
    })?;
    if !body.usd.is_finite() || body.usd < 0.0 {
        return Err(bad(format!("{path}.usd: a budget is a finite amount, 0 or more")));
    }
    Ok(Budget { usd: body.usd, window })
}

fn budget_body(budget: &Budget) -> BudgetBody {
    BudgetBody { usd: budget.usd, window: budget.window.as_str().to_owned() }
}

fn limits_of(body: &LimitsBody, path: &str) -> ApiResult<Limits> {
    for (name, value) in [("rpm", body.rpm), ("tpm", body.tpm), ("concurrent", body.concurrent)] {
        if value == Some(0) {
            return Err(bad(format!("{path}.{name}: a limit of 0 refuses everything; omit it for no limit")));
        }
    }
    Ok(Limits { rpm: body.rpm, tpm: body.tpm, concurrent: body.concurrent })
}

fn limits_body(limits: &Limits) -> LimitsBody {
    LimitsBody { rpm: limits.rpm, tpm: limits.tpm, concurrent: limits.concurrent }
}

/// A time given as RFC 3339 or Unix seconds.
fn parse_time(value: &serde_json::Value, path: &str) -> ApiResult<i64> {
    match value {
        serde_json::Value::Number(n) => n.as_i64().ok_or_else(|| bad(format!("{path}: not a Unix time"))),
        serde_json::Value::String(text) => parse_time_text(text, path),
        _ => Err(bad(format!("{path}: give RFC 3339 text or Unix seconds"))),
    }
}

fn parse_time_text(text: &str, path: &str) -> ApiResult<i64> {
    if let Ok(seconds) = text.parse::<i64>() {
        return Ok(seconds);
    }
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .map(|t| t.unix_timestamp())
        .map_err(|_| bad(format!("{path}: `{text}` is neither RFC 3339 nor Unix seconds")))
}

fn random<const N: usize>() -> ApiResult<[u8; N]> {
    switchyard_state::sign_ins::random()
        .ok_or_else(|| ApiError(StatusCode::INTERNAL_SERVER_ERROR, "the OS random source failed".into()))
}

fn usage_view(governance: &Governance, id: &BucketId) -> Option<UsageView> {
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

fn key_view(governance: &Governance, record: &KeyRecord) -> KeyView {
    let state = match record.state((now_ms() / 1000) as i64) {
        KeyState::Active => "active",
        KeyState::Expired => "expired",
        KeyState::Revoked => "revoked",
    };
    KeyView {
        id: record.id.clone(),
        name: record.name.clone(),
        prefix: record.prefix.clone(),
        state,
        group: record.group.clone(),
        pools: record.pools.clone(),
        budget: record.budget.as_ref().map(budget_body),
        limits: limits_body(&record.limits),
        expires_at: record.expires_at,
        revoked_at: record.revoked_at,
        created_at: record.created_at,
        rotated_at: record.rotated_at,
        metadata: record.metadata.clone(),
        aws_access_key_id: record.aws.as_ref().map(|a| a.access_key_id.clone()),
        usage: usage_view(governance, &BucketId::Key(Arc::from(record.id.as_str()))),
    }
}

/// The idempotency key and request fingerprint of a create or rotate.
fn idempotency(headers: &HeaderMap, what: &str, body: &[u8]) -> ApiResult<Option<Idempotency>> {
    let Some(key) = headers.get("idempotency-key") else { return Ok(None) };
    let key = key
        .to_str()
        .ok()
        .filter(|k| !k.is_empty() && k.len() <= 255)
        .ok_or_else(|| bad("Idempotency-Key must be 1 to 255 printable characters"))?;
    let mut material = what.as_bytes().to_vec();
    material.push(0);
    material.extend_from_slice(body);
    Ok(Some(Idempotency {
        key: key.to_owned(),
        fingerprint: KeyHash::of(&String::from_utf8_lossy(&material)).to_hex(),
        at_ms: now_ms() as i64,
    }))
}

fn checked_pools(admin: &Admin, pools: Option<Vec<String>>) -> ApiResult<Option<Vec<String>>> {
    if let Some(pools) = &pools {
        for pool in pools {
            if admin.gateway.resolve(pool).is_none() {
                return Err(bad(format!("pools: `{pool}` is neither a pool nor a model")));
            }
        }
    }
    Ok(pools)
}

fn checked_group(governance: &Governance, group: Option<String>) -> ApiResult<Option<String>> {
    if let Some(name) = &group {
        if !governance.groups().iter().any(|g| &g.name == name) {
            return Err(bad(format!("group: `{name}` does not exist")));
        }
    }
    Ok(group)
}

fn created(
    admin: &Admin,
    scope: &str,
    idem: &Option<Idempotency>,
    status: StatusCode,
    answer: &KeyWithSecret,
) -> Response {
    let body = serde_json::to_vec(answer).unwrap_or_default();
    if let Some(idem) = idem {
        let mut replays = admin.replays.lock().unwrap_or_else(PoisonError::into_inner);
        replays.retain(|_, (at, _, _)| at.elapsed() < REPLAY_FOR);
        replays.insert((scope.to_owned(), idem.key.clone()), (Instant::now(), idem.fingerprint.clone(), body.clone()));
    }
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static("application/json"));
    audited(&answer.key.id, response)
}

/// A replayed create or rotate: the full first answer while it is kept in
/// memory, else the key without its secret.
fn replayed(admin: &Admin, scope: &str, idem: &Idempotency, governance: &Governance, record: &KeyRecord) -> Response {
    let kept = admin
        .replays
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&(scope.to_owned(), idem.key.clone()))
        .filter(|(at, fingerprint, _)| at.elapsed() < REPLAY_FOR && *fingerprint == idem.fingerprint)
        .map(|(_, _, body)| body.clone());
    let mut response = match kept {
        Some(body) => (StatusCode::OK, body).into_response(),
        None => {
            let answer = KeyWithSecret {
                key: key_view(governance, record),
                secret: None,
                aws_secret_access_key: None,
                replayed: true,
            };
            (StatusCode::OK, serde_json::to_vec(&answer).unwrap_or_default()).into_response()
        }
    };
    response
        .headers_mut()
        .insert(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static("application/json"));
    response.headers_mut().insert("idempotent-replayed", axum::http::HeaderValue::from_static("true"));
    audited(&record.id, response)
}

// ------------------------------------------------------------- handlers --

#[utoipa::path(post, path = "/api/v1/admin/keys", request_body = CreateKey,
    responses((status = 201, body = KeyWithSecret), (status = 200, description = "an idempotent replay", body = KeyWithSecret)),
    params(("Idempotency-Key" = Option<String>, Header, description = "a retried create with the same key mints nothing new")))]
async fn create_key(State(admin): State<Admin>, headers: HeaderMap, body: axum::body::Bytes) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let request: CreateKey = serde_json::from_slice(&body).map_err(|err| bad(format!("body: {err}")))?;
    let idem = idempotency(&headers, "create", &body)?;
    if request.name.trim().is_empty() {
        return Err(bad("name: give the key a name"));
    }
    let _write = governance.writes.lock().await;
    let secret = new_secret(&random::<32>()?);
    let aws = if request.issue_aws_credential { Some(new_aws_pair()?) } else { None };
    let now = (now_ms() / 1000) as i64;
    let record = KeyRecord {
        id: format!("key_{}", random::<8>()?.iter().map(|b| format!("{b:02x}")).collect::<String>()),
        name: request.name,
        prefix: visible_prefix(&secret).to_owned(),
        hash: KeyHash::of(&secret),
        group: checked_group(governance, request.group)?,
        pools: checked_pools(&admin, request.pools)?,
        budget: request.budget.as_ref().map(|b| budget_of(b, "budget")).transpose()?,
        limits: request.limits.as_ref().map(|l| limits_of(l, "limits")).transpose()?.unwrap_or_default(),
        expires_at: request.expires_at.as_ref().map(|t| parse_time(t, "expires_at")).transpose()?,
        revoked_at: None,
        metadata: request.metadata.unwrap_or_default(),
        created_at: now,
        rotated_at: None,
        aws: aws.clone(),
        version: 0,
    };
    match governance.stores.keys.create_key(record, idem.clone()).await? {
        Written::New(record) => {
            governance.cache(record.clone()).await?;
            let answer = KeyWithSecret {
                key: key_view(governance, &record),
                secret: Some(secret),
                aws_secret_access_key: aws.map(|a| a.secret_access_key),
                replayed: false,
            };
            Ok(created(&admin, "create", &idem, StatusCode::CREATED, &answer))
        }
        Written::Replayed(record) => match &idem {
            Some(idem) => Ok(replayed(&admin, "create", idem, governance, &record)),
            None => Err(ApiError(StatusCode::CONFLICT, "the key exists".into())),
        },
    }
}

#[utoipa::path(get, path = "/api/v1/admin/keys", params(("limit" = Option<usize>, Query), ("cursor" = Option<String>, Query)),
    responses((status = 200, body = KeyPage)))]
async fn list_keys(State(admin): State<Admin>, Query(page): Query<PageQuery>) -> ApiResult<Json<KeyPage>> {
    let governance = governance(&admin)?;
    let limit = page.limit.unwrap_or(50).clamp(1, 1000);
    let records = governance.stores.keys.list_keys(page.cursor.as_deref(), limit + 1).await?;
    let more = records.len() > limit;
    let data: Vec<KeyView> = records.iter().take(limit).map(|r| key_view(governance, r)).collect();
    let next_cursor = if more { data.last().map(|k| k.id.clone()) } else { None };
    Ok(Json(KeyPage { data, next_cursor }))
}

async fn stored_key(governance: &Governance, id: &str) -> ApiResult<KeyRecord> {
    governance
        .stores
        .keys
        .get_key(id)
        .await?
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("key `{id}` does not exist")))
}

#[utoipa::path(get, path = "/api/v1/admin/keys/{id}", responses((status = 200, body = KeyView), (status = 404)))]
async fn get_key(State(admin): State<Admin>, Path(id): Path<String>) -> ApiResult<Json<KeyView>> {
    let governance = governance(&admin)?;
    Ok(Json(key_view(governance, &stored_key(governance, &id).await?)))
}

/// Tries of a key change read again after another write came first.
const CHANGE_TRIES: usize = 8;

/// Applies `change` to key `id` as it is stored, and writes the result
/// only if nobody wrote the key since it was read (another instance, a
/// concurrent request): otherwise it is read again and `change` redone.
/// Every change to a stored key goes through here; a revoked key refuses
/// every change (the store checks it too).
async fn change_key(
    governance: &Governance,
    id: &str,
    mut change: impl FnMut(&mut KeyRecord) -> ApiResult<()>,
) -> ApiResult<KeyRecord> {
    for _ in 0..CHANGE_TRIES {
        let mut record = stored_key(governance, id).await?;
        if record.revoked_at.is_some() {
            return Err(ApiError(StatusCode::CONFLICT, format!("key `{id}` is revoked; revocation is final")));
        }
        change(&mut record)?;
        match governance.stores.keys.update_key(record).await {
            Ok(stored) => {
                governance.cache(stored.clone()).await?;
                return Ok(stored);
            }
            Err(StoreError::Stale) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(StoreError::Stale.into())
}

#[utoipa::path(patch, path = "/api/v1/admin/keys/{id}", request_body = PatchKey, responses((status = 200, body = KeyView)))]
async fn patch_key(State(admin): State<Admin>, Path(id): Path<String>, body: axum::body::Bytes) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let patch: PatchKey = serde_json::from_slice(&body).map_err(|err| bad(format!("body: {err}")))?;
    let _write = governance.writes.lock().await;
    let record = change_key(governance, &id, |record| {
        if let Some(name) = &patch.name {
            record.name.clone_from(name);
        }
        if let Some(group) = &patch.group {
            record.group = checked_group(governance, group.clone())?;
        }
        if let Some(pools) = &patch.pools {
            record.pools = checked_pools(&admin, pools.clone())?;
        }
        if let Some(budget) = &patch.budget {
            record.budget = budget.as_ref().map(|b| budget_of(b, "budget")).transpose()?;
        }
        if let Some(limits) = &patch.limits {
            record.limits = limits_of(limits, "limits")?;
        }
        if let Some(expires_at) = &patch.expires_at {
            record.expires_at = expires_at.as_ref().map(|t| parse_time(t, "expires_at")).transpose()?;
        }
        if let Some(metadata) = &patch.metadata {
            record.metadata.clone_from(metadata);
        }
        Ok(())
    })
    .await?;
    Ok(audited(&id, Json(key_view(governance, &record))))
}

#[utoipa::path(delete, path = "/api/v1/admin/keys/{id}", responses((status = 200, body = KeyView)))]
async fn revoke_key(State(admin): State<Admin>, Path(id): Path<String>) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let _write = governance.writes.lock().await;
    let at = (now_ms() / 1000) as i64;
    let record = match change_key(governance, &id, |record| {
        record.revoked_at = Some(at);
        Ok(())
    })
    .await
    {
        Ok(record) => record,
        // Revoking a revoked key changes nothing and says so.
        Err(ApiError(StatusCode::CONFLICT, _)) if stored_key(governance, &id).await?.revoked_at.is_some() => {
            stored_key(governance, &id).await?
        }
        Err(err) => return Err(err),
    };
    // Refused from the next request on, on this node (others hear the change).
    Ok(audited(&id, Json(key_view(governance, &record))))
}

/// Which of a key's credentials a rotation replaces.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Rotate {
    /// The virtual key's secret and, when the key has one, its AWS pair.
    #[default]
    Both,
    /// The virtual key's secret only.
    Key,
    /// The AWS pair only (minted when the key has none).
    Aws,
}

/// The body of a rotation (optional).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RotateKey {
    /// What to replace (default `both`).
    #[serde(default)]
    pub rotate: Rotate,
}

fn new_aws_pair() -> ApiResult<AwsCredential> {
    Ok(AwsCredential::new(&random::<{ switchyard_governance::key::AWS_RANDOM_BYTES }>()?))
}

#[utoipa::path(post, path = "/api/v1/admin/keys/{id}/rotate", request_body = Option<RotateKey>,
    responses((status = 200, body = KeyWithSecret)),
    params(("Idempotency-Key" = Option<String>, Header, description = "a retried rotation with the same key rotates once")))]
async fn rotate_key(
    State(admin): State<Admin>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let what = if body.iter().all(u8::is_ascii_whitespace) {
        RotateKey::default()
    } else {
        serde_json::from_slice::<RotateKey>(&body).map_err(|err| bad(format!("body: {err}")))?
    };
    let scope = format!("rotate:{id}");
    let idem = idempotency(&headers, &scope, &body)?;
    let _write = governance.writes.lock().await;
    for _ in 0..CHANGE_TRIES {
        let mut record = stored_key(governance, &id).await?;
        if record.revoked_at.is_some() {
            return Err(ApiError(StatusCode::CONFLICT, format!("key `{id}` is revoked; revocation is final")));
        }
        let secret = match what.rotate {
            Rotate::Both | Rotate::Key => Some(new_secret(&random::<32>()?)),
            Rotate::Aws => None,
        };
        if let Some(secret) = &secret {
            record.hash = KeyHash::of(secret);
            record.prefix = visible_prefix(secret).to_owned();
        }
        let aws = match (what.rotate, &record.aws) {
            (Rotate::Aws, _) | (Rotate::Both, Some(_)) => Some(new_aws_pair()?),
            (Rotate::Key, _) | (Rotate::Both, None) => None,
        };
        if let Some(pair) = &aws {
            record.aws = Some(pair.clone());
        }
        record.rotated_at = Some((now_ms() / 1000) as i64);
        match governance.stores.keys.rotate_key(record, idem.clone()).await {
            Ok(Written::New(record)) => {
                // The old secrets stop with this swap.
                governance.cache(record.clone()).await?;
                let answer = KeyWithSecret {
                    key: key_view(governance, &record),
                    secret,
                    aws_secret_access_key: aws.map(|a| a.secret_access_key),
                    replayed: false,
                };
                return Ok(created(&admin, &scope, &idem, StatusCode::OK, &answer));
            }
            Ok(Written::Replayed(record)) => {
                return match &idem {
                    Some(idem) => Ok(replayed(&admin, &scope, idem, governance, &record)),
                    None => Err(ApiError(StatusCode::CONFLICT, "rotation conflict".into())),
                }
            }
            Err(StoreError::Stale) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(StoreError::Stale.into())
}

fn group_view(governance: &Governance, group: &GroupRecord) -> GroupView {
    GroupView {
        name: group.name.clone(),
        parent: group.parent.clone(),
        budget: group.budget.as_ref().map(budget_body),
        limits: limits_body(&group.limits),
        from_config: group.from_config,
        usage: usage_view(governance, &BucketId::Group(Arc::from(group.name.as_str()))),
    }
}

#[utoipa::path(get, path = "/api/v1/admin/groups", responses((status = 200, body = [GroupView])))]
async fn list_groups(State(admin): State<Admin>) -> ApiResult<Json<Vec<GroupView>>> {
    let governance = governance(&admin)?;
    Ok(Json(governance.groups().iter().map(|g| group_view(governance, g)).collect()))
}

#[utoipa::path(get, path = "/api/v1/admin/groups/{name}", responses((status = 200, body = GroupView), (status = 404)))]
async fn get_group(State(admin): State<Admin>, Path(name): Path<String>) -> ApiResult<Json<GroupView>> {
    let governance = governance(&admin)?;
    let group = find_group(governance, &name)?;
    Ok(Json(group_view(governance, &group)))
}

fn find_group(governance: &Governance, name: &str) -> ApiResult<GroupRecord> {
    governance
        .groups()
        .into_iter()
        .find(|g| g.name == name)
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("group `{name}` does not exist")))
}

/// Refuses a parent that does not exist or would close a loop.
fn checked_parent(governance: &Governance, name: &str, parent: Option<String>) -> ApiResult<Option<String>> {
    let Some(parent) = parent else { return Ok(None) };
    let groups = governance.groups();
    let mut at = Some(parent.clone());
    while let Some(current) = at {
        if current == name {
            return Err(bad(format!("parent: `{parent}` is below `{name}`; the tree would loop")));
        }
        let group = groups
            .iter()
            .find(|g| g.name == current)
            .ok_or_else(|| bad(format!("parent: `{current}` does not exist")))?;
        at = group.parent.clone();
    }
    Ok(Some(parent))
}

#[utoipa::path(post, path = "/api/v1/admin/groups", request_body = CreateGroup, responses((status = 201, body = GroupView)))]
async fn create_group(State(admin): State<Admin>, body: axum::body::Bytes) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let request: CreateGroup = serde_json::from_slice(&body).map_err(|err| bad(format!("body: {err}")))?;
    if request.name.trim().is_empty() {
        return Err(bad("name: give the group a name"));
    }
    let _write = governance.writes.lock().await;
    if governance.groups().iter().any(|g| g.name == request.name) {
        return Err(ApiError(StatusCode::CONFLICT, format!("group `{}` exists", request.name)));
    }
    let group = GroupRecord {
        parent: checked_parent(governance, &request.name, request.parent)?,
        budget: request.budget.as_ref().map(|b| budget_of(b, "budget")).transpose()?,
        limits: request.limits.as_ref().map(|l| limits_of(l, "limits")).transpose()?.unwrap_or_default(),
        from_config: false,
        created_at: (now_ms() / 1000) as i64,
        name: request.name,
    };
    governance.stores.groups.put_group(group.clone()).await?;
    governance.set_groups(governance.stores.groups.list_groups().await?).await?;
    Ok(audited(&group.name, (StatusCode::CREATED, Json(group_view(governance, &group)))))
}

#[utoipa::path(patch, path = "/api/v1/admin/groups/{name}", request_body = PatchGroup, responses((status = 200, body = GroupView)))]
async fn patch_group(
    State(admin): State<Admin>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let patch: PatchGroup = serde_json::from_slice(&body).map_err(|err| bad(format!("body: {err}")))?;
    let _write = governance.writes.lock().await;
    let mut group = find_group(governance, &name)?;
    if group.from_config {
        return Err(ApiError(
            StatusCode::CONFLICT,
            format!("group `{name}` is declared in the config file; change it there"),
        ));
    }
    if let Some(parent) = patch.parent {
        group.parent = checked_parent(governance, &name, parent)?;
    }
    if let Some(budget) = patch.budget {
        group.budget = budget.as_ref().map(|b| budget_of(b, "budget")).transpose()?;
    }
    if let Some(limits) = patch.limits {
        group.limits = limits_of(&limits, "limits")?;
    }
    governance.stores.groups.put_group(group.clone()).await?;
    governance.set_groups(governance.stores.groups.list_groups().await?).await?;
    Ok(audited(&name, Json(group_view(governance, &group))))
}

#[utoipa::path(delete, path = "/api/v1/admin/groups/{name}", responses((status = 204), (status = 409)))]
async fn delete_group(State(admin): State<Admin>, Path(name): Path<String>) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let _write = governance.writes.lock().await;
    let group = find_group(governance, &name)?;
    if group.from_config {
        return Err(ApiError(
            StatusCode::CONFLICT,
            format!("group `{name}` is declared in the config file; remove it there"),
        ));
    }
    if governance.groups().iter().any(|g| g.parent.as_deref() == Some(name.as_str())) {
        return Err(ApiError(
            StatusCode::CONFLICT,
            format!("group `{name}` has child groups; move or delete them first"),
        ));
    }
    if governance.records().iter().any(|k| k.group.as_deref() == Some(name.as_str()) && k.revoked_at.is_none()) {
        return Err(ApiError(
            StatusCode::CONFLICT,
            format!("keys still draw on group `{name}`; move or revoke them first"),
        ));
    }
    governance.stores.groups.delete_group(&name).await?;
    governance.set_groups(governance.stores.groups.list_groups().await?).await?;
    Ok(audited(&name, StatusCode::NO_CONTENT))
}

#[utoipa::path(get, path = "/api/v1/admin/spend",
    params(("by" = Option<String>, Query, description = "key, group, model or lane"), ("from" = Option<String>, Query), ("to" = Option<String>, Query),
        ("format" = Option<String>, Query, description = "json (the default) or csv")),
    responses((status = 200, body = SpendReport)))]
async fn spend(State(admin): State<Admin>, Query(query): Query<SpendQuery>) -> ApiResult<Response> {
    let csv = match query.format.as_deref() {
        None | Some("json") => false,
        Some("csv") => true,
        Some(other) => return Err(bad(format!("format: `{other}` is not json or csv"))),
    };
    let governance = governance(&admin)?;
    let by = match query.by.as_deref().unwrap_or("key") {
        "key" => SpendBy::Key,
        "group" => SpendBy::Group,
        "model" => SpendBy::Model,
        "lane" => SpendBy::Lane,
        other => return Err(bad(format!("by: `{other}` is not key, group, model or lane"))),
    };
    let now = (now_ms() / 1000) as i64;
    let from =
        query.from.as_deref().map(|t| parse_time_text(t, "from")).transpose()?.unwrap_or(Window::Month.start(now));
    // No row is later than now, so the default end is the next whole hour:
    // a range of whole hours is read from the hourly rollup alone.
    let to = query.to.as_deref().map(|t| parse_time_text(t, "to")).transpose()?.unwrap_or((now / 3600 + 1) * 3600);
    let ms = |seconds: i64, path: &str| {
        seconds.checked_mul(1000).ok_or_else(|| bad(format!("{path}: `{seconds}` is out of range")))
    };
    let (from_ms, to_ms) = (ms(from, "from")?, ms(to, "to")?);
    let totals = governance.stores.ledger.totals(TotalsQuery { by, from_ms, to_ms, key: None, groups: None }).await?;
    let mut lines: HashMap<Option<String>, SpendLine> = HashMap::new();
    let mut add = |value: Option<String>, total: &switchyard_store::Total| {
        let price = admin.gateway.price_of(&total.lane);
        let line = lines.entry(value.clone()).or_insert_with(|| SpendLine {
            name: (by == SpendBy::Key)
                .then(|| value.as_deref().and_then(|id| governance.key(id)).map(|k| k.record.name.clone()))
                .flatten(),
            value,
            requests: 0,
            input_tokens: 0,
            output_tokens: 0,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            usd: 0.0,
        });
        line.requests += total.requests;
        line.input_tokens += total.tokens.input;
        line.output_tokens += total.tokens.output;
        line.cache_read_tokens += total.tokens.cache_read;
        line.cache_write_tokens += total.tokens.cache_write;
        line.usd += price.map_or(0.0, |p| usd(p.cost(&total.tokens)));
    };
    let groups = governance.groups();
    for total in &totals {
        if by == SpendBy::Group {
            // A group's spend is its subtree's: credit the row's group and every ancestor.
            let mut at = total.value.clone();
            let mut seen = Vec::new();
            add(at.clone(), total);
            while let Some(name) = at.take() {
                seen.push(name.clone());
                at =
                    groups.iter().find(|g| g.name == name).and_then(|g| g.parent.clone()).filter(|p| !seen.contains(p));
                if at.is_some() {
                    add(at.clone(), total);
                }
            }
        } else {
            add(total.value.clone(), total);
        }
    }
    let mut data: Vec<SpendLine> = lines.into_values().collect();
    data.sort_by(|a, b| b.usd.total_cmp(&a.usd).then_with(|| a.value.cmp(&b.value)));
    let total_usd =
        totals.iter().map(|t| admin.gateway.price_of(&t.lane).map_or(0.0, |p| usd(p.cost(&t.tokens)))).sum();
    let by = match by {
        SpendBy::Key => "key",
        SpendBy::Group => "group",
        SpendBy::Model => "model",
        SpendBy::Lane => "lane",
    };
    let report = SpendReport { by: by.to_owned(), from, to, data, total_usd };
    if csv {
        let name = format!("attachment; filename=\"switchyard-spend-by-{by}-{from}-{to}.csv\"");
        let headers = [
            (axum::http::header::CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
            (axum::http::header::CONTENT_DISPOSITION, name),
        ];
        return Ok((headers, spend_csv(&report)).into_response());
    }
    Ok(Json(report).into_response())
}

/// A spend report as CSV (RFC 4180), one line per value (and, by key, the
/// key's name).
fn spend_csv(report: &SpendReport) -> String {
    use std::fmt::Write;
    // Text cells are quoted, with quotes doubled, and a leading formula
    // character defused, so a spreadsheet never runs a key's name.
    let cell = |text: &str| {
        let defused =
            if text.starts_with(['=', '+', '-', '@', '\t', '\r']) { format!("'{text}") } else { text.to_owned() };
        format!("\"{}\"", defused.replace('"', "\"\""))
    };
    let mut out =
        format!("{},name,requests,input_tokens,output_tokens,cache_read_tokens,cache_write_tokens,usd\r\n", report.by);
    for line in &report.data {
        let _ = write!(
            out,
            "{},{},{},{},{},{},{},{:.9}\r\n",
            cell(line.value.as_deref().unwrap_or("")),
            cell(line.name.as_deref().unwrap_or("")),
            line.requests,
            line.input_tokens,
            line.output_tokens,
            line.cache_read_tokens,
            line.cache_write_tokens,
            line.usd
        );
    }
    out
}

#[utoipa::path(get, path = "/api/v1/admin/requests",
    params(("key" = Option<String>, Query), ("pool" = Option<String>, Query), ("lane" = Option<String>, Query),
        ("status" = Option<u16>, Query), ("limit" = Option<usize>, Query), ("cursor" = Option<String>, Query)),
    responses((status = 200, body = RequestPage)))]
async fn requests(State(admin): State<Admin>, Query(query): Query<RequestsQuery>) -> ApiResult<Json<RequestPage>> {
    let governance = governance(&admin)?;
    let limit = query.limit.unwrap_or(50).clamp(1, 1000);
    let before =
        query.cursor.as_deref().map(|c| c.parse::<i64>().map_err(|_| bad("cursor: not a cursor"))).transpose()?;
    let rows = governance
        .stores
        .ledger
        .rows(RowFilter { key: query.key, pool: query.pool, lane: query.lane, status: query.status, before, limit })
        .await?;
    let next_cursor = (rows.len() == limit).then(|| rows.last().map(|r| r.id.to_string())).flatten();
    let data = rows.into_iter().map(|stored| request_view(&admin.gateway, stored)).collect();
    Ok(Json(RequestPage { data, next_cursor }))
}

/// A ledger row priced at today's rate.
fn request_view(gateway: &Gateway, stored: switchyard_store::StoredRow) -> RequestView {
    let row = stored.row;
    let price = gateway.price_of(&row.lane);
    RequestView {
        id: stored.id,
        at_ms: row.at_ms,
        usd: price.map_or(0.0, |p| usd(p.cost(&row.tokens))),
        request_id: row.request_id,
        key_id: row.key_id,
        group: row.group,
        pool: row.pool,
        lane: row.lane,
        model: row.model,
        input_tokens: row.tokens.input,
        output_tokens: row.tokens.output,
        cache_read_tokens: row.tokens.cache_read,
        cache_write_tokens: row.tokens.cache_write,
        status: row.status,
        latency_ms: row.latency_ms,
        ttfb_ms: row.ttfb_ms,
        failovers: row.failovers,
        estimated: row.estimated,
        attempts: row.attempts,
    }
}

#[utoipa::path(get, path = "/api/v1/admin/requests/{id}",
    responses((status = 200, body = RequestView, description = "the row, with `text` (request and reply bodies) while the newest requests' text is kept: only with `telemetry.request_log.include_text`"), (status = 404)))]
async fn request_detail(State(admin): State<Admin>, Path(id): Path<i64>) -> ApiResult<Json<serde_json::Value>> {
    let governance = governance(&admin)?;
    let rows = governance
        .stores
        .ledger
        .rows(RowFilter { key: None, pool: None, lane: None, status: None, before: id.checked_add(1), limit: 1 })
        .await?;
    let stored = rows
        .into_iter()
        .find(|r| r.id == id)
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("request row {id} does not exist")))?;
    let entry = stored.row.entry;
    let mut view = serde_json::to_value(request_view(&admin.gateway, stored)).unwrap_or_default();
    // Its text, while the newest requests' text is kept (include_text).
    if let Some(text) = admin.gateway.telemetry.recent_text.as_ref().and_then(|recent| recent.find(entry)) {
        view["text"] = serde_json::to_value(text).unwrap_or_default();
    }
    Ok(Json(view))
}

/// `GET /api/v1/admin/history` query.
#[derive(Debug, Deserialize, ToSchema)]
pub struct HistoryQuery {
    /// `1h` (points of a minute, the default) or `1d` (points of 15 minutes).
    pub window: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/admin/history", params(("window" = Option<String>, Query, description = "1h or 1d")),
    responses((status = 200, body = Span)))]
async fn history(State(admin): State<Admin>, Query(query): Query<HistoryQuery>) -> ApiResult<Json<Span>> {
    let (minutes, step) = match query.window.as_deref().unwrap_or("1h") {
        "1h" => (60, 1),
        "1d" => (24 * 60, 15),
        other => return Err(bad(format!("window: `{other}` is not 1h or 1d"))),
    };
    Ok(Json(admin.gateway.telemetry.history.span(now_minute(), minutes, step)))
}

#[utoipa::path(get, path = "/api/v1/admin/config", responses((status = 200, description = "the config file's text as last loaded, secrets replaced by `<redacted>`, and `restart_pending`: sections it changes that keep their running values until a restart")))]
async fn running_config(State(admin): State<Admin>) -> Json<serde_json::Value> {
    let yaml = switchyard_config::redacted(&admin.gateway.config.source).unwrap_or_default();
    Json(serde_json::json!({
        "yaml": yaml,
        "metrics": admin.gateway.metrics().is_some(),
        "restart_pending": admin.gateway.restart_pending,
    }))
}

#[utoipa::path(post, path = "/api/v1/admin/config/validate", request_body(content = String, content_type = "application/yaml"),
    responses((status = 200, description = "`valid`, and every problem as `switchyard check` lists them; nothing is applied")))]
async fn validate_config(State(admin): State<Admin>, body: axum::body::Bytes) -> ApiResult<Json<serde_json::Value>> {
    let text = std::str::from_utf8(&body).map_err(|_| bad("body: the config must be UTF-8 text"))?;
    // The real environment, so the candidate is checked as it would run
    // (`load` never echoes a value it substituted).
    let env = |name: &str| std::env::var(name).ok();
    let issue = |i: &switchyard_config::Issue| serde_json::json!({"path": i.path, "message": i.message, "fix": i.fix});
    let answer = match switchyard_config::load(text, &env) {
        Ok(config) => {
            let warnings: Vec<_> = config.warnings.iter().map(issue).collect();
            match Gateway::new(config, admin.gateway.codecs) {
                Ok(_) => serde_json::json!({"valid": true, "problems": [], "warnings": warnings}),
                Err(err) => serde_json::json!({"valid": false, "warnings": warnings,
                    "problems": [{"path": "", "message": format!("valid but cannot be served: {err}"), "fix": "fix the file"}]}),
            }
        }
        Err(err) => {
            serde_json::json!({"valid": false, "problems": err.0.iter().map(issue).collect::<Vec<_>>(), "warnings": []})
        }
    };
    Ok(Json(answer))
}

#[utoipa::path(get, path = "/api/v1/admin/lanes", responses((status = 200, description = "every pool's lanes with breaker state")))]
async fn lanes(State(admin): State<Admin>) -> Json<serde_json::Value> {
    let mut pools = crate::stats::stats(&admin.gateway)["pools"].take();
    // Each lane's share of its pool's traffic over the last minutes.
    let served = admin.gateway.telemetry.history.lane_counts(now_minute());
    for pool in pools.as_array_mut().into_iter().flatten() {
        let name: Arc<str> = Arc::from(pool["pool"].as_str().unwrap_or_default());
        let Some(lanes) = pool["lanes"].as_array_mut() else { continue };
        let counts: Vec<u64> = lanes
            .iter()
            .map(|lane| {
                let lane: Arc<str> = Arc::from(lane["lane"].as_str().unwrap_or_default());
                served.get(&(name.clone(), lane)).copied().unwrap_or(0)
            })
            .collect();
        let total: u64 = counts.iter().sum();
        for (lane, count) in lanes.iter_mut().zip(counts) {
            lane["recent_requests"] = count.into();
            lane["share"] = if total == 0 { serde_json::Value::Null } else { (count as f64 / total as f64).into() };
        }
    }
    Json(pools)
}

#[utoipa::path(post, path = "/api/v1/admin/lanes/{pool}/{lane}/reset", responses((status = 200), (status = 404)))]
async fn reset_lane(State(admin): State<Admin>, Path((pool, lane)): Path<(String, String)>) -> ApiResult<Response> {
    let target = format!("{pool}/{lane}");
    let state = admin
        .gateway
        .resolve(&pool)
        .map(|index| &admin.gateway.pools[index])
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("pool `{pool}` does not exist")))?;
    let member = state
        .members
        .iter()
        .position(|&l| *admin.gateway.lanes[l].name == *lane)
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("pool `{pool}` has no lane `{lane}`")))?;
    state.breaker(member).reset();
    tracing::info!(pool = %pool, lane = %lane, "breaker reset by an operator");
    Ok(audited(&target, Json(serde_json::json!({"pool": pool, "lane": lane, "breaker": "closed"}))))
}

#[utoipa::path(post, path = "/api/v1/admin/config/reload",
    responses((status = 200, description = "the file was valid and is now served; `restart_required` names changed sections that keep their running values"),
        (status = 422, description = "the file was refused, with every problem as `switchyard check` lists them; the running config keeps serving"),
        (status = 404, description = "this gateway was not started by the binary (no file to read)")))]
async fn reload_config(State(admin): State<Admin>) -> ApiResult<Response> {
    let reloader = admin.gateway.reloader.get().and_then(std::sync::Weak::upgrade).ok_or_else(|| {
        ApiError(
            StatusCode::NOT_FOUND,
            "this gateway has no config file to reload (it was not started by the binary)".into(),
        )
    })?;
    match reloader.reload().await {
        Ok(outcome) => Ok(audited("config", Json(serde_json::json!({"reloaded": true, "outcome": outcome})))),
        Err(issues) => {
            let problems: Vec<serde_json::Value> = issues
                .iter()
                .map(|issue| serde_json::json!({"path": issue.path, "message": issue.message, "fix": issue.fix}))
                .collect();
            let body = serde_json::json!({"error": {
                "message": "the config was refused; the running config keeps serving",
                "status": 422,
                "problems": problems,
            }});
            Ok(audited("config", (StatusCode::UNPROCESSABLE_ENTITY, Json(body))))
        }
    }
}

#[utoipa::path(get, path = "/api/v1/admin/audit", params(("limit" = Option<usize>, Query), ("cursor" = Option<String>, Query)),
    responses((status = 200, description = "admin mutation attempts, newest first")))]
async fn audit(State(admin): State<Admin>, Query(page): Query<PageQuery>) -> ApiResult<Json<serde_json::Value>> {
    let governance = governance(&admin)?;
    let limit = page.limit.unwrap_or(50).clamp(1, 1000);
    let before =
        page.cursor.as_deref().map(|c| c.parse::<i64>().map_err(|_| bad("cursor: not a cursor"))).transpose()?;
    let entries = governance.stores.audit.entries(before, limit).await?;
    let next_cursor = (entries.len() == limit).then(|| entries.last().map(|e| e.id.to_string())).flatten();
    Ok(Json(serde_json::json!({"data": entries, "next_cursor": next_cursor})))
}

/// The admin API's OpenAPI document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Switchyard admin API",
        description = "Keys, groups, spend, requests, lanes and audit on the admin listener. Authenticate with `Authorization: Bearer <admin token>` or `X-Admin-Token`."
    ),
    paths(
        create_key,
        list_keys,
        get_key,
        patch_key,
        revoke_key,
        rotate_key,
        list_groups,
        get_group,
        create_group,
        patch_group,
        delete_group,
        spend,
        requests,
        request_detail,
        history,
        lanes,
        reset_lane,
        running_config,
        validate_config,
        reload_config,
        audit
    ),
    components(schemas(
        CreateKey,
        PatchKey,
        RotateKey,
        Rotate,
        KeyView,
        KeyWithSecret,
        KeyPage,
        UsageView,
        BudgetBody,
        LimitsBody,
        CreateGroup,
        PatchGroup,
        GroupView,
        SpendLine,
        SpendReport,
        RequestView,
        RequestPage,
        Span,
        Point
    ))
)]
struct ApiDoc;

async fn openapi() -> Response {
    match ApiDoc::openapi().to_json() {
        Ok(json) => ([(axum::http::header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(err) => ApiError(StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response(),
    }
}

/// The admin plane's fallback: plain JSON, never an empty body.
pub async fn not_found(uri: axum::http::Uri) -> Response {
    ApiError(StatusCode::NOT_FOUND, format!("no admin route for {}", uri.path())).into_response()
}

/// A 405 on the admin plane, in plain JSON.
pub async fn method_not_allowed(body: Body) -> Response {
    drop(body);
    ApiError(StatusCode::METHOD_NOT_ALLOWED, "method not allowed on this admin route".into()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spend_csv_quotes_and_defuses_every_text_cell() {
        let line = |value: &str, name: Option<&str>| SpendLine {
            value: Some(value.to_owned()),
            name: name.map(str::to_owned),
            requests: 2,
            input_tokens: 3,
            output_tokens: 4,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            usd: 0.5,
        };
        let report = SpendReport {
            by: "key".into(),
            from: 0,
            to: 1,
            data: vec![line("key_1", Some("=cmd|' /C calc'!A0")), line("say \"hi\"", None)],
            total_usd: 1.0,
        };
        let csv = spend_csv(&report);
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert_eq!(lines[0], "key,name,requests,input_tokens,output_tokens,cache_read_tokens,cache_write_tokens,usd");
        assert_eq!(lines[1], "\"key_1\",\"'=cmd|' /C calc'!A0\",2,3,4,0,0,0.500000000");
        assert_eq!(lines[2], "\"say \"\"hi\"\"\",\"\",2,3,4,0,0,0.500000000");
    }

    #[test]
    fn the_openapi_document_lists_every_route() {
        let doc = ApiDoc::openapi().to_json().unwrap_or_default();
        for path in [
            "/api/v1/admin/keys",
            "/api/v1/admin/keys/{id}/rotate",
            "/api/v1/admin/groups/{name}",
            "/api/v1/admin/spend",
            "/api/v1/admin/lanes/{pool}/{lane}/reset",
        ] {
            assert!(doc.contains(path), "{path} missing");
        }
    }
}
