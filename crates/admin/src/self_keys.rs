//! Self-serve keys (`/api/v1/self/keys`): a member signed in through single
//! sign-on mints, lists, rotates and revokes their own keys, and no one
//! else's. A member's keys live in a group of their own under
//! `admin.oidc.members.parent`, made on their first key from the template's
//! budget and limits, so what they spend is capped where an operator said;
//! each key gets the template's MCP grants (`members.mcp`; none without);
//! a member holds at most `max_keys` keys at once. The door (`api`) lets
//! members reach these routes only, and audits each change under the
//! member's name.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::{Extension, Json};
use serde::Deserialize;
use switchyard_governance::key::KeyRecord;
use switchyard_governance::KeyHash;
use switchyard_store::GroupRecord;

use crate::keys::{created, key_view, KeyView, KeyWithSecret};
use crate::shared::*;
use switchyard_governance::key::{new_secret, visible_prefix};
use switchyard_state::governance::now_ms;

/// `POST /api/v1/self/keys`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateOwnKey {
    /// What the key is for.
    pub name: String,
}

/// The member group of the account `member` (its provider's `sub`) under
/// `parent`: `parent-`, a readable part of the id, and a digest so two ids
/// never share a group.
pub fn member_group(parent: &str, member: &str) -> String {
    let readable: String = member
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let readable: String = readable.chars().take(40).collect();
    let digest = KeyHash::of(member).0;
    format!("{parent}-{readable}-{:02x}{:02x}{:02x}", digest[0], digest[1], digest[2])
}

/// The members' template, and the group the signed-in member's keys live
/// in (named by the account, never by a name claim that may change hands).
/// A binding with a group places it there instead of under the template's
/// parent (so that group's tenant admins see it), and a binding's pools and
/// MCP grants are its keys' in place of the template's.
fn members(admin: &Admin, actor: &Actor) -> ApiResult<(switchyard_config::Members, String)> {
    let mut template = admin
        .gateway
        .config
        .admin
        .oidc
        .as_ref()
        .and_then(|o| o.members.clone())
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, "self-serve keys are off (admin.oidc.members)".into()))?;
    let subject = actor.subject.as_deref().ok_or_else(|| {
        ApiError(StatusCode::FORBIDDEN, "self-serve keys are for members signed in through single sign-on".into())
    })?;
    if let Some(bound) = &actor.tenancy {
        if let Some(group) = &bound.group {
            template.parent = group.to_string();
        }
        if let Some(mcp) = &bound.mcp {
            template.mcp.clone_from(mcp);
        }
    }
    let group = member_group(&template.parent, subject);
    Ok((template, group))
}

/// The member's own group, made from the template when it is missing.
async fn own_group(admin: &Admin, actor: &Actor) -> ApiResult<String> {
    let governance = governance(admin)?;
    let (template, name) = members(admin, actor)?;
    if governance.groups().iter().any(|g| g.name == name) {
        return Ok(name);
    }
    if !governance.groups().iter().any(|g| g.name == template.parent) {
        return Err(ApiError(
            StatusCode::CONFLICT,
            format!(
                "group `{}`, where your keys' group goes, does not exist: ask an admin to make it",
                template.parent
            ),
        ));
    }
    let group = GroupRecord {
        name: name.clone(),
        parent: Some(template.parent.clone()),
        budget: template.budget,
        limits: template.limits,
        retention: None,
        end_users: None,
        markup: None,
        rate_card: Default::default(),
        from_config: false,
        created_at: (now_ms() / 1000) as i64,
    };
    governance.stores.groups.put_group(group).await?;
    governance.set_groups(governance.stores.groups.list_groups().await?).await?;
    Ok(name)
}

/// One of the member's own keys, or a 404 (another's key is not theirs to know of).
fn own_key(admin: &Admin, actor: &Actor, id: &str) -> ApiResult<KeyRecord> {
    let governance = governance(admin)?;
    let (_, group) = members(admin, actor)?;
    governance
        .key(id)
        .map(|key| key.record.clone())
        .filter(|record| record.group.as_deref() == Some(group.as_str()))
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("you have no key `{id}`")))
}

#[utoipa::path(get, path = "/api/v1/self/keys", responses((status = 200, description = "the signed-in member's own keys")))]
pub(crate) async fn list(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
) -> ApiResult<Json<Vec<KeyView>>> {
    let governance = governance(&admin)?;
    let (_, group) = members(&admin, &actor)?;
    Ok(Json(governance.keys_in(&group).iter().map(|record| key_view(governance, record)).collect()))
}

#[utoipa::path(post, path = "/api/v1/self/keys", request_body = CreateOwnKey,
    responses((status = 201, body = KeyWithSecret), (status = 409, description = "the member holds max_keys keys already")))]
pub(crate) async fn create(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let (template, _) = members(&admin, &actor)?;
    let request: CreateOwnKey = serde_json::from_slice(&body).map_err(|err| bad(format!("body: {err}")))?;
    let name = request.name.trim();
    if name.is_empty() || name.len() > 200 {
        return Err(bad("name: 1 to 200 bytes"));
    }
    let _write = governance.writes.lock().await;
    let group = own_group(&admin, &actor).await?;
    let now = (now_ms() / 1000) as i64;
    let held = governance.keys_in(&group).iter().filter(|k| k.revoked_at.is_none()).count();
    if held >= template.max_keys as usize {
        return Err(ApiError(
            StatusCode::CONFLICT,
            format!("you hold {held} keys, the most a member may: revoke one first"),
        ));
    }
    let secret = new_secret(&random::<32>()?);
    let mut metadata = serde_json::Map::new();
    metadata.insert("owner".into(), serde_json::Value::String(actor.name.to_string()));
    metadata.insert("self_serve".into(), serde_json::Value::Bool(true));
    let record = KeyRecord {
        id: format!("key_{}", random::<8>()?.iter().map(|b| format!("{b:02x}")).collect::<String>()),
        name: name.to_owned(),
        prefix: visible_prefix(&secret).to_owned(),
        hash: KeyHash::of(&secret),
        group: Some(group),
        // The binding's pools (absent: every one).
        pools: actor.tenancy.as_ref().and_then(|bound| bound.pools.clone()),
        policies: None,
        budget: None,
        limits: Default::default(),
        expires_at: None,
        revoked_at: None,
        metadata,
        created_at: now,
        rotated_at: None,
        suspended_until: None,
        // The template's grants, copied: an admin may change them per key.
        mcp: Some(template.mcp.clone()),
        // The raw route is the operator's to grant.
        passthrough: None,
        // Agents too.
        a2a: None,
        end_users: None,
        aws: None,
        version: 0,
    };
    let record = match governance.stores.keys.create_key(record, None).await? {
        switchyard_store::Written::New(record) | switchyard_store::Written::Replayed(record) => record,
    };
    governance.cache(record.clone()).await?;
    let answer = KeyWithSecret {
        key: key_view(governance, &record),
        secret: Some(secret),
        aws_secret_access_key: None,
        replayed: false,
    };
    Ok(created(&admin, "self-create", &None, StatusCode::CREATED, &answer))
}

#[utoipa::path(post, path = "/api/v1/self/keys/{id}/rotate", responses((status = 200, body = KeyWithSecret), (status = 404)))]
pub(crate) async fn rotate(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    own_key(&admin, &actor, &id)?;
    let body = axum::body::Bytes::from_static(b"{\"rotate\":\"key\"}");
    crate::keys::rotate_key(State(admin), Extension(actor), Path(id), headers, body).await
}

#[utoipa::path(delete, path = "/api/v1/self/keys/{id}", responses((status = 200), (status = 404)))]
pub(crate) async fn revoke(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    own_key(&admin, &actor, &id)?;
    crate::keys::revoke_key(State(admin), Extension(actor), Path(id)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_member_has_a_group_of_their_own() {
        let ana = member_group("people", "00u1Ana.Lopez");
        assert!(ana.starts_with("people-00u1ana-lopez-"), "{ana}");
        assert_eq!(ana, member_group("people", "00u1Ana.Lopez"));
        // Ids that read the same still get their own group.
        assert_ne!(member_group("people", "u@1"), member_group("people", "u.1"));
        assert!(member_group("p", &"x".repeat(500)).len() < 60);
    }
}
