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
    /// A tenant admin's reach, or a member binding's placement
    /// (`crate::tenancy`); `None`: the whole gateway's admin.
    pub tenancy: Option<Arc<switchyard_config::Tenancy>>,
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

/// What a mutation changed that its path does not say (a group's price),
/// for the audit entry's action (`PATCH /api/v1/admin/groups/acme (markup 15% -> 20%)`).
#[derive(Debug, Clone)]
pub(crate) struct AuditNote(pub(crate) String);

/// `response` with `note` for its audit entry, when there is one.
pub(crate) fn noted(note: Option<String>, mut response: Response) -> Response {
    if let Some(note) = note {
        response.extensions_mut().insert(AuditNote(note));
    }
    response
}

/// A time for an audit note: `2026-12-07 18:40:00 UTC`.
pub(crate) fn utc_time(ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    format!("{} UTC", humantime::format_rfc3339_seconds(at).to_string().replace('T', " ").trim_end_matches('Z'))
}

/// Members a change note never shows the value of (a secret's name).
fn secret_member(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["key", "token", "secret", "password", "credential"].iter().any(|word| name.contains(word))
        && !name.ends_with("_id")
        && name != "prefix"
}

/// What changed between two views of a record, for its audit entry:
/// `limits.rpm: 60 -> 100000; name: "a" -> "b"` (members one level deep,
/// `skip`ped ones and unchanged ones left out, a secret's value never
/// shown). `None` when nothing shown changed.
pub(crate) fn change_note(before: &serde_json::Value, after: &serde_json::Value, skip: &[&str]) -> Option<String> {
    use serde_json::Value;
    fn shown(name: &str, value: &Value) -> String {
        match value {
            _ if secret_member(name) => "<redacted>".to_owned(),
            Value::Null => "none".to_owned(),
            other => other.to_string(),
        }
    }
    fn walk(path: &str, before: &Value, after: &Value, depth: usize, out: &mut Vec<String>) {
        match (before, after) {
            (Value::Object(a), Value::Object(b)) if depth < 2 => {
                let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
                names.sort();
                names.dedup();
                for name in names {
                    let next = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
                    walk(
                        &next,
                        a.get(name).unwrap_or(&Value::Null),
                        b.get(name).unwrap_or(&Value::Null),
                        depth + 1,
                        out,
                    );
                }
            }
            (a, b) if a != b => {
                let leaf = path.rsplit('.').next().unwrap_or(path);
                out.push(format!("{path}: {} -> {}", shown(leaf, a), shown(leaf, b)));
            }
            _ => {}
        }
    }
    let strip = |value: &Value| match value {
        Value::Object(map) => Value::Object(
            map.iter().filter(|(k, _)| !skip.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect(),
        ),
        other => other.clone(),
    };
    let mut out = Vec::new();
    walk("", &strip(before), &strip(after), 0, &mut out);
    (!out.is_empty()).then(|| out.join("; "))
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
    /// Shares of the cap (percent) whose crossing raises a
    /// `budget_warning`, once each a window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warn: Vec<f64>,
    /// What a request the budget cannot pay for gets instead of a refusal
    /// (absent: the refusal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_exhaust: Option<OnExhaustBody>,
}

/// Degrade, then refuse: the cheaper pool a spent budget sends requests to.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OnExhaustBody {
    /// The pool that serves instead (held at its prices on the same cap).
    pub downgrade: String,
    /// Downgrade already from this share of the cap spent (percent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<f64>,
    /// Downgrade too while the forecast says the budget runs out before
    /// its window ends.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forecast: bool,
}

/// Limits as the API reads and writes them.
///
/// Rates (`rps`, `rpm`, `tps`, `tpm`) refill evenly; quotas (`rph`, `rpd`,
/// `rpmo`, `tph`, `tpd`, `tpmo`, `usd_per_hour`, `usd_per_day`,
/// `usd_per_month`) count their calendar window (UTC) from zero.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsBody {
    /// Requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rps: Option<u64>,
    /// Requests per minute.
    pub rpm: Option<u64>,
    /// Requests per UTC hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rph: Option<u64>,
    /// Requests per UTC day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpd: Option<u64>,
    /// Requests per calendar month.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpmo: Option<u64>,
    /// Tokens (input plus output) per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tps: Option<u64>,
    /// Tokens (input plus output) per minute.
    pub tpm: Option<u64>,
    /// Tokens per UTC hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tph: Option<u64>,
    /// Tokens per UTC day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpd: Option<u64>,
    /// Tokens per calendar month.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpmo: Option<u64>,
    /// USD per UTC hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_hour: Option<f64>,
    /// USD per UTC day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_day: Option<f64>,
    /// USD per calendar month.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_month: Option<f64>,
    /// Requests in flight.
    pub concurrent: Option<u64>,
    /// The same limits for the requests that name a model or pool, inside
    /// this bucket (one level deep).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[schema(no_recursion)]
    pub per_model: std::collections::BTreeMap<String, LimitsBody>,
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
    let on_exhaust = body.on_exhaust.as_ref().map(|d| switchyard_governance::Downgrade {
        pool: d.downgrade.clone(),
        at: d.at,
        forecast: d.forecast,
    });
    let budget = Budget { usd: body.usd, window, warn: body.warn.clone(), on_exhaust };
    if let Some(wrong) = budget.out_of_range().into_iter().next() {
        return Err(bad(format!("{path}.{}: {}", wrong.key, wrong.problem)));
    }
    Ok(budget)
}

pub(crate) fn budget_body(budget: &Budget) -> BudgetBody {
    BudgetBody {
        usd: budget.usd,
        window: budget.window.as_str().to_owned(),
        warn: budget.warn.clone(),
        on_exhaust: budget.on_exhaust.as_ref().map(|d| OnExhaustBody {
            downgrade: d.pool.clone(),
            at: d.at,
            forecast: d.forecast,
        }),
    }
}

pub(crate) fn limits_of(body: &LimitsBody, path: &str) -> ApiResult<Limits> {
    let limits = limits_from(body);
    if let Some(wrong) = limits.out_of_range().into_iter().next() {
        return Err(bad(format!("{path}.{}: {}", wrong.key, wrong.problem)));
    }
    Ok(limits)
}

fn limits_from(body: &LimitsBody) -> Limits {
    Limits {
        rps: body.rps,
        rpm: body.rpm,
        rph: body.rph,
        rpd: body.rpd,
        rpmo: body.rpmo,
        tps: body.tps,
        tpm: body.tpm,
        tph: body.tph,
        tpd: body.tpd,
        tpmo: body.tpmo,
        usd_per_hour: body.usd_per_hour,
        usd_per_day: body.usd_per_day,
        usd_per_month: body.usd_per_month,
        concurrent: body.concurrent,
        per_model: body.per_model.iter().map(|(name, scoped)| (name.clone(), limits_from(scoped))).collect(),
    }
}

pub(crate) fn limits_body(limits: &Limits) -> LimitsBody {
    LimitsBody {
        rps: limits.rps,
        rpm: limits.rpm,
        rph: limits.rph,
        rpd: limits.rpd,
        rpmo: limits.rpmo,
        tps: limits.tps,
        tpm: limits.tpm,
        tph: limits.tph,
        tpd: limits.tpd,
        tpmo: limits.tpmo,
        usd_per_hour: limits.usd_per_hour,
        usd_per_day: limits.usd_per_day,
        usd_per_month: limits.usd_per_month,
        concurrent: limits.concurrent,
        per_model: limits.per_model.iter().map(|(name, scoped)| (name.clone(), limits_body(scoped))).collect(),
    }
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
    governance.bucket(id).map(|view| usage_of(&view))
}

/// A bucket's figures for the whole fleet (every instance's spend,
/// reservations and requests in flight, from Redis), for a read of one
/// key or group; this instance's without a fleet.
pub(crate) async fn fleet_usage_view(governance: &Governance, id: &BucketId) -> Option<UsageView> {
    governance.fleet_bucket(id).await.map(|view| usage_of(&view))
}

fn usage_of(view: &switchyard_governance::admission::BucketView) -> UsageView {
    UsageView {
        spent_usd: usd(view.spent),
        reserved_usd: usd(view.reserved),
        budget_left_usd: view.budget_left.map(usd),
        requests_headroom: view.requests_headroom,
        tokens_headroom: view.tokens_headroom,
        in_flight: view.in_flight,
    }
}

/// Why key `id`'s requests are refused now for money or a quota: the
/// first bucket of its chain (its own, its group's, then the parents')
/// whose budget is spent or one of whose calendar quotas is used up.
pub(crate) fn refusing(governance: &Governance, id: &str) -> Option<String> {
    let key = governance.key(id)?;
    key.chain.iter().find_map(|bucket| {
        let view = governance.bucket(bucket)?;
        let whose = match bucket {
            BucketId::Key(_) => "its own".to_owned(),
            BucketId::Group(name) => format!("group {name}'s"),
            BucketId::EndUser { .. } | BucketId::Scoped { .. } => return None,
        };
        if view.budget_left == Some(0) {
            return Some(format!("{whose} budget is spent"));
        }
        let quota = view.quotas.iter().find(|q| q.used.saturating_add(q.held) >= q.cap)?;
        Some(format!("{whose} {} quota is used up", quota.name))
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

#[cfg(test)]
mod tests {
    use super::change_note;
    use serde_json::json;

    #[test]
    fn a_change_note_names_each_changed_member_before_and_after_and_never_a_secret() {
        let before =
            json!({"name": "a", "limits": {"rpm": 60, "tpm": null}, "usage": {"spent_usd": 1.0}, "api_key": "sk-old"});
        let after = json!({"name": "b", "limits": {"rpm": 100000, "tpm": null}, "usage": {"spent_usd": 2.0}, "api_key": "sk-new"});
        let note = change_note(&before, &after, &["usage"]).unwrap();
        assert_eq!(note, r#"api_key: <redacted> -> <redacted>; limits.rpm: 60 -> 100000; name: "a" -> "b""#);
        assert!(!note.contains("sk-"));
        assert_eq!(change_note(&before, &before, &[]), None);
    }
}
