//! The MCP gateway over the admin API (what the console's MCP page shows):
//! its servers and their state, every tool listed now with its schema
//! digest, its approved digest and whether callers see it; approving a
//! tool pins it to its schema now, and unpinning forgets that. Calls are
//! ledger rows of operation `mcp` (`/api/v1/admin/requests?operation=mcp`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::{Extension, Json};
use switchyard_state::mcp::ApprovalError;

use crate::shared::*;

fn hub(admin: &Admin) -> ApiResult<&std::sync::Arc<dyn switchyard_state::mcp::McpHub>> {
    admin.gateway.mcp.as_ref().ok_or_else(|| ApiError(StatusCode::NOT_FOUND, "this process runs no MCP gateway".into()))
}

fn refused(err: ApprovalError) -> ApiError {
    match err {
        ApprovalError::UnknownTool(_) => ApiError(StatusCode::NOT_FOUND, err.to_string()),
        ApprovalError::Store(_) => ApiError(StatusCode::SERVICE_UNAVAILABLE, err.to_string()),
    }
}

#[utoipa::path(get, path = "/api/v1/admin/mcp",
    responses((status = 200, description = "`servers` (name, transport, target, pool, idempotent tools, price, a stdio child's state), `tools` (name, digest, approved_digest, standing: approved, unreviewed or changed; listed), `errors` by name")))]
pub(crate) async fn overview(State(admin): State<Admin>) -> ApiResult<Json<serde_json::Value>> {
    let hub = hub(&admin)?;
    Ok(Json(hub.overview(&admin.gateway).await))
}

#[utoipa::path(post, path = "/api/v1/admin/mcp/tools/{name}/approval",
    responses((status = 200, description = "pinned to the schema listed now"), (status = 404)))]
pub(crate) async fn approve(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let hub = hub(&admin)?;
    let pinned = hub.approve(&admin.gateway, &name, &actor.name).await.map_err(refused)?;
    tracing::info!(tool = %name, by = %actor.name, "MCP tool approved");
    Ok(audited(&name, Json(pinned)))
}

#[utoipa::path(delete, path = "/api/v1/admin/mcp/tools/{name}/approval",
    responses((status = 200), (status = 404)))]
pub(crate) async fn unpin(State(admin): State<Admin>, Path(name): Path<String>) -> ApiResult<Response> {
    let hub = hub(&admin)?;
    if !hub.unpin(&admin.gateway, &name).await.map_err(refused)? {
        return Err(ApiError(StatusCode::NOT_FOUND, format!("`{name}` is not pinned")));
    }
    Ok(audited(&name, Json(serde_json::json!({ "name": name, "pinned": false }))))
}
