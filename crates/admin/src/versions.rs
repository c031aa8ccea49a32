//! The config as versioned documents over the admin API: the versions
//! (who, when, why), one version's text and its diff from the one before,
//! the diff between any two, a new version applied (validated first, with
//! `If-Match` on the current version's ETag: a lost update is a 412), and a
//! rollback (an old version's text applied as the newest). Every text
//! shown is redacted: secrets never appear. With `config.locked` the API
//! changes nothing: the file is the source; and a stdio MCP server's
//! command, args and env change only in the file (a 403 names them).

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use switchyard_state::ApplyError;
use switchyard_store::ConfigVersion;
use utoipa::ToSchema;

use crate::shared::*;

/// One version in the list.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionSummary {
    /// Its number.
    pub version: i64,
    /// When it was made (Unix ms).
    pub at_ms: i64,
    /// Who made it: an admin token's name, a console user, or `file`.
    pub author: String,
    /// Why.
    pub message: String,
    /// The newest version (what serves, unless a restart is pending).
    pub current: bool,
}

/// One version whole.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionView {
    /// Its number, time, author and message.
    #[serde(flatten)]
    pub summary: VersionSummary,
    /// Its text, secrets replaced by `<redacted>`.
    pub yaml: String,
    /// What changed from the version before (unified diff, redacted).
    pub diff: String,
}

/// `POST /api/v1/admin/config`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewVersion {
    /// The whole config file's text (YAML; `${VAR}` references stay as
    /// written, and kept verbatim, comments too). A `<redacted>` shown by
    /// `GET /api/v1/admin/config` and sent back at its path, unchanged,
    /// keeps the running secret; any other placeholder is a 400 naming its
    /// path. An empty config is a 400.
    pub yaml: String,
    /// Why (kept with the version).
    #[serde(default)]
    pub message: String,
}

/// `POST /api/v1/admin/config/rollback/{v}`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rollback {
    /// Why (default: "rollback to version v").
    #[serde(default)]
    pub message: Option<String>,
}

/// `GET .../versions` query.
#[derive(Debug, Deserialize)]
pub struct VersionsQuery {
    /// Versions older than this one.
    pub before: Option<i64>,
    /// At most this many (default 50, at most 500).
    pub limit: Option<usize>,
}

/// `GET .../diff` query.
#[derive(Debug, Deserialize)]
pub struct DiffQuery {
    /// The older version (default: the one before `to`).
    pub from: Option<i64>,
    /// The newer version (default: the newest).
    pub to: Option<i64>,
}

/// The longest message kept with a version.
const MAX_MESSAGE: usize = 1_000;

fn redacted(text: &str) -> String {
    switchyard_config::redacted(text).unwrap_or_else(|| "<not YAML>".to_owned())
}

/// A unified diff of two versions' redacted texts.
fn diff(from: Option<&ConfigVersion>, to: &ConfigVersion) -> String {
    let before = from.map(|v| redacted(&v.text)).unwrap_or_default();
    let after = redacted(&to.text);
    let name = |v: Option<&ConfigVersion>| v.map_or_else(|| "(none)".to_owned(), |v| format!("version {}", v.version));
    similar::TextDiff::from_lines(&before, &after)
        .unified_diff()
        .context_radius(3)
        .header(&name(from), &name(Some(to)))
        .to_string()
}

fn summary(version: &ConfigVersion, newest: i64) -> VersionSummary {
    VersionSummary {
        version: version.version,
        at_ms: version.at_ms,
        author: version.author.clone(),
        message: version.message.clone(),
        current: version.version == newest,
    }
}

async fn version(admin: &Admin, number: i64) -> ApiResult<ConfigVersion> {
    governance(admin)?
        .stores
        .configs
        .config_version(number)
        .await?
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("config version {number} does not exist")))
}

pub(crate) async fn newest_number(admin: &Admin) -> ApiResult<i64> {
    let versions = governance(admin)?.stores.configs.config_versions(None, 1).await?;
    Ok(versions.first().map_or(0, |v| v.version))
}

#[utoipa::path(get, path = "/api/v1/admin/config/versions",
    params(("before" = Option<i64>, Query), ("limit" = Option<usize>, Query)),
    responses((status = 200, body = [VersionSummary])))]
pub(crate) async fn versions(
    State(admin): State<Admin>,
    Query(query): Query<VersionsQuery>,
) -> ApiResult<Json<Vec<VersionSummary>>> {
    let limit = query.limit.unwrap_or(50).clamp(1, 500);
    let newest = newest_number(&admin).await?;
    let listed = governance(&admin)?.stores.configs.config_versions(query.before, limit).await?;
    Ok(Json(listed.iter().map(|v| summary(v, newest)).collect()))
}

#[utoipa::path(get, path = "/api/v1/admin/config/versions/{v}", responses((status = 200, body = VersionView), (status = 404)))]
pub(crate) async fn version_detail(State(admin): State<Admin>, Path(number): Path<i64>) -> ApiResult<Response> {
    let this = version(&admin, number).await?;
    let before = governance(&admin)?.stores.configs.config_versions(Some(number), 1).await?;
    let newest = newest_number(&admin).await?;
    let view =
        VersionView { summary: summary(&this, newest), yaml: redacted(&this.text), diff: diff(before.first(), &this) };
    Ok(tagged(&number.to_string(), Json(view)))
}

#[utoipa::path(get, path = "/api/v1/admin/config/diff",
    params(("from" = Option<i64>, Query), ("to" = Option<i64>, Query)),
    responses((status = 200, description = "`from`, `to` and `diff`: a unified diff of the two versions' redacted texts"), (status = 404)))]
pub(crate) async fn diff_versions(
    State(admin): State<Admin>,
    Query(query): Query<DiffQuery>,
) -> ApiResult<Json<serde_json::Value>> {
    let to = match query.to {
        Some(to) => to,
        None => newest_number(&admin).await?,
    };
    let newer = version(&admin, to).await?;
    let older = match query.from {
        Some(from) => Some(version(&admin, from).await?),
        None => governance(&admin)?.stores.configs.config_versions(Some(to), 1).await?.into_iter().next(),
    };
    Ok(Json(serde_json::json!({
        "from": older.as_ref().map(|v| v.version),
        "to": to,
        "diff": diff(older.as_ref(), &newer),
    })))
}

/// A version applied: what was done, or why not in the API's terms.
async fn apply(admin: &Admin, text: String, after: i64, author: &str, message: String) -> ApiResult<Response> {
    let reloader = admin.gateway.reloader.get().and_then(std::sync::Weak::upgrade).ok_or_else(|| {
        ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "this process cannot apply a config (it was not started by `switchyard serve`)".into(),
        )
    })?;
    match reloader.apply(text, after, author.to_owned(), message).await {
        Ok(answer) => {
            let version = answer["version"].as_i64().unwrap_or_default();
            Ok(audited(&format!("config version {version}"), tagged(&version.to_string(), Json(answer))))
        }
        Err(ApplyError::Locked) => Err(ApiError(StatusCode::CONFLICT, ApplyError::Locked.to_string())),
        Err(ApplyError::Invalid(problems)) => {
            let listed: Vec<String> = problems.iter().map(ToString::to_string).collect();
            Err(ApiError(StatusCode::BAD_REQUEST, format!("the config is not valid: {}", listed.join("; "))))
        }
        Err(ApplyError::FileOnly(problems)) => {
            let listed: Vec<String> = problems.iter().map(ToString::to_string).collect();
            Err(ApiError(StatusCode::FORBIDDEN, format!("refused: {}", listed.join("; "))))
        }
        Err(stale @ ApplyError::Stale { .. }) => Err(ApiError(StatusCode::PRECONDITION_FAILED, stale.to_string())),
        Err(ApplyError::Store(message)) => Err(ApiError(StatusCode::SERVICE_UNAVAILABLE, message)),
    }
}

fn author(actor: &Actor) -> String {
    actor.name.to_string()
}

#[utoipa::path(post, path = "/api/v1/admin/config", request_body = NewVersion,
    params(("If-Match" = String, Header, description = "the current version's ETag, from GET /api/v1/admin/config: a version made since is a 412")),
    responses((status = 200, description = "applied: pools, lanes, restart_required, warnings and the new `version` (its ETag too)"),
        (status = 400, description = "not valid: every problem"),
        (status = 403, description = "it adds or changes a stdio MCP server's command, args or env, which change only in the config file"),
        (status = 409, description = "config.locked"),
        (status = 412, description = "another version came first"), (status = 428, description = "If-Match missing")))]
pub(crate) async fn apply_config(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    let change: NewVersion = serde_json::from_slice(&body).map_err(|err| bad(format!("body: {err}")))?;
    if change.message.len() > MAX_MESSAGE {
        return Err(bad(format!("message: at most {MAX_MESSAGE} bytes")));
    }
    if switchyard_config::round_trip::is_empty(&change.yaml) {
        return Err(bad(format!("yaml: {}", empty_problem()["message"].as_str().unwrap_or_default())));
    }
    let newest = newest_number(&admin).await?;
    if !headers.contains_key(axum::http::header::IF_MATCH) {
        return Err(ApiError(
            StatusCode::PRECONDITION_REQUIRED,
            format!(
                "send If-Match with the current version's ETag (now \"{newest}\"), so a change made since is not lost"
            ),
        ));
    }
    // The store checks `newest` again as it appends: a version made between
    // this read and the write is a 412 too.
    check_if_match(&headers, &newest.to_string(), "the config")?;
    let after = newest;

    // Placeholders shown for secrets that come back where they were shown
    // keep the running secrets; any other is refused: the file never holds one.
    let restored =
        switchyard_config::round_trip::restored(&change.yaml, &admin.gateway.config.source).map_err(|issues| {
            let listed: Vec<String> = issues.iter().map(ToString::to_string).collect();
            bad(format!("the config is not valid: {}", listed.join("; ")))
        })?;
    apply(&admin, restored.text, after, &author(&actor), change.message).await.map_err(|ApiError(status, message)| {
        let message = scrubbed(serde_json::Value::String(message), &restored.secrets);
        ApiError(status, message.as_str().unwrap_or_default().to_owned())
    })
}

#[utoipa::path(post, path = "/api/v1/admin/config/rollback/{v}", request_body = Rollback,
    params(("If-Match" = Option<String>, Header, description = "the current version's ETag: a version made since is a 412")),
    responses((status = 200, description = "version v's text applied as the newest version"),
        (status = 403, description = "it would change a stdio MCP server's command, args or env"), (status = 404), (status = 409), (status = 412)))]
pub(crate) async fn rollback_config(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path(number): Path<i64>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    let rollback: Rollback = if body.is_empty() {
        Rollback::default()
    } else {
        serde_json::from_slice(&body).map_err(|err| bad(format!("body: {err}")))?
    };
    let target = version(&admin, number).await?;
    let newest = newest_number(&admin).await?;
    check_if_match(&headers, &newest.to_string(), "the config")?;
    let after = newest;
    let message = rollback.message.unwrap_or_else(|| format!("rollback to version {number}"));
    if message.len() > MAX_MESSAGE {
        return Err(bad(format!("message: at most {MAX_MESSAGE} bytes")));
    }
    apply(&admin, target.text, after, &author(&actor), message).await
}

/// What an empty candidate is refused for: it would serve nothing.
pub(crate) fn empty_problem() -> serde_json::Value {
    serde_json::json!({"path": "", "message": "the config is empty: applied, it would serve no pool and drop every setting",
        "fix": "send the whole config file (load the running config and edit it)"})
}

/// `answer` with every secret put back from the running config replaced
/// by the placeholder again (a message may quote a value).
pub(crate) fn scrubbed(answer: serde_json::Value, secrets: &[String]) -> serde_json::Value {
    if secrets.is_empty() {
        return answer;
    }
    let mut text = answer.to_string();
    for secret in secrets.iter().filter(|s| s.len() >= 4) {
        // As the JSON text writes it (quotes and backslashes escaped).
        let written = serde_json::to_string(secret).unwrap_or_default();
        let inner = written.trim_matches('"');
        text = text.replace(inner, switchyard_config::REDACTED);
    }
    serde_json::from_str(&text).unwrap_or(answer)
}
