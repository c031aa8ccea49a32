//! Kept text over the admin API: one end user's erased across the store
//! (`DELETE /api/v1/admin/users/{user}/content`: the requests' text a
//! retention kept and the Responses conversations stored for them; audited
//! under the user's tag, never the id), and a request's kept text opened
//! for its detail.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;

use crate::shared::*;

#[utoipa::path(delete, path = "/api/v1/admin/users/{user}/content",
    responses((status = 200, description = "`{erased, responses}`: how many requests' kept text and stored Responses conversations of this end user were erased"),
        (status = 404, description = "no `retention:` in the config, or governance is off")))]
pub(crate) async fn erase_user_content(State(admin): State<Admin>, Path(user): Path<String>) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let retention =
        admin.gateway.retention.as_ref().ok_or_else(|| {
            ApiError(StatusCode::NOT_FOUND, "no text is kept: the config has no retention: block".into())
        })?;
    let tag = retention.user_tag(&user);
    let erased = governance.stores.content.erase_content(tag.clone()).await?;
    let responses = admin.gateway.kept.objects.erase_objects(tag.clone()).await?;
    tracing::info!(user_tag = %tag, erased, responses, "an end user's kept text erased by an operator");
    Ok(audited(&format!("user_tag:{tag}"), Json(serde_json::json!({ "erased": erased, "responses": responses }))))
}

/// The kept text of ledger entry `entry`, opened: `{retention, request,
/// reply}` (`None`: none kept, or it no longer opens under the key).
pub(crate) async fn kept_text(admin: &Admin, entry: i64) -> Option<serde_json::Value> {
    let retention = admin.gateway.retention.as_ref()?;
    let kept = admin.gateway.governance.as_ref()?.stores.content.find_content(entry).await.ok()??;
    match retention.open(&kept) {
        Ok(mut text) => {
            text["retention"] = serde_json::Value::String(kept.retention);
            Some(text)
        }
        Err(err) => {
            tracing::warn!(entry, error = %err, "kept text could not be opened");
            None
        }
    }
}
