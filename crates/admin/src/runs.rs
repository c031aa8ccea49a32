//! Agent runs as the operator sees them (`groups.<g>.runs`): each run with
//! its key, spend, calls, tool calls and state, and the kill switch that
//! stops one at once. Per instance (each instance lists the runs it
//! served). A tenant admin sees and kills only the runs of keys in its
//! subtree; a run outside it is a 404 worded as one that does not exist.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::shared::*;
use crate::tenancy::subtree;

/// One run.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunRow {
    /// The run id its caller sent.
    pub id: String,
    /// The caller's key id (runs are per key: another key's same id is another run).
    pub key: String,
    /// The key's group.
    pub group: String,
    /// `open`, `limited(<limit>)` (usd, calls, tool_calls, tokens, wall), `loop` or `killed`.
    pub state: String,
    /// Spend settled, USD.
    pub spent_usd: f64,
    /// Spend reserved by calls in flight, USD.
    pub reserved_usd: f64,
    /// Tokens settled.
    pub tokens: u64,
    /// Model calls.
    pub calls: u64,
    /// Tool calls (MCP).
    pub tool_calls: u64,
    /// Calls in flight.
    pub in_flight: u32,
    /// First call, Unix ms.
    pub started_ms: u64,
    /// Last call, Unix ms.
    pub last_seen_ms: u64,
    /// Its limits: `usd` (nano-USD), `calls`, `tool_calls`, `tokens`, `wall_ms`, `loop_repeats`.
    #[schema(value_type = Object)]
    pub limits: serde_json::Value,
}

/// `GET /api/v1/admin/runs`.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunsView {
    /// Last seen first.
    pub runs: Vec<RunRow>,
}

/// `GET /api/v1/admin/runs` query.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RunsQuery {
    /// Only runs in this state (`open`, `killed`, `loop`, `limited`: any limit).
    pub state: Option<String>,
    /// At most this many (default 200, at most 5000).
    pub limit: Option<usize>,
}

/// `POST /api/v1/admin/runs/{id}/kill` query.
#[derive(Debug, Deserialize, ToSchema)]
pub struct KillQuery {
    /// Only this key's run of that id (default: every key's in reach).
    pub key: Option<String>,
}

/// What a kill stopped.
#[derive(Debug, Serialize, ToSchema)]
pub struct Killed {
    /// The run id.
    pub id: String,
    /// How many runs (one per key naming the id) it stopped.
    pub killed: usize,
}

/// The runs this instance holds, last seen first.
#[utoipa::path(get, path = "/api/v1/admin/runs", params(("state" = Option<String>, Query), ("limit" = Option<usize>, Query)), responses((status = 200, body = RunsView)))]
pub(crate) async fn list_runs(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Query(query): Query<RunsQuery>,
) -> ApiResult<Json<RunsView>> {
    let governance = governance(&admin)?;
    let scope = subtree(governance, &actor);
    let limit = query.limit.unwrap_or(200).clamp(1, 5000);
    let runs = governance
        .runs(scope.as_deref())
        .into_iter()
        .filter(|run| match query.state.as_deref() {
            None => true,
            Some("limited") => run.state.starts_with("limited"),
            Some(state) => run.state == state,
        })
        .take(limit)
        .map(|run| RunRow {
            limits: serde_json::to_value(run.limits).unwrap_or_default(),
            id: run.id,
            key: run.key,
            group: run.group,
            state: run.state,
            spent_usd: run.spent_usd,
            reserved_usd: run.reserved_usd,
            tokens: run.tokens,
            calls: run.calls,
            tool_calls: run.tool_calls,
            in_flight: run.in_flight,
            started_ms: run.started_ms,
            last_seen_ms: run.last_seen_ms,
        })
        .collect();
    Ok(Json(RunsView { runs }))
}

/// Stops run `id` at once: its next call is refused with the caller's
/// quota error naming the run and the kill (a call in flight finishes).
#[utoipa::path(post, path = "/api/v1/admin/runs/{id}/kill", params(("id" = String, Path), ("key" = Option<String>, Query)), responses((status = 200, body = Killed), (status = 404)))]
pub(crate) async fn kill_run(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
    Query(query): Query<KillQuery>,
) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let scope = subtree(governance, &actor);
    let killed = governance.kill_run(&id, scope.as_deref(), query.key.as_deref());
    if killed == 0 {
        return Err(ApiError(StatusCode::NOT_FOUND, format!("run `{id}` does not exist")));
    }
    let note = Some(format!("killed {killed} run(s)"));
    Ok(noted(note, audited(&id, Json(Killed { id: id.clone(), killed }))))
}
