//! The budget tree over the admin API: groups created, read, changed (a
//! parent never made its own descendant) and deleted (only when no key
//! draws on them), with their price for chargeback (a markup over cost and
//! a rate card of their own, set by the gateway admin alone).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use switchyard_governance::card::{ppm, Markup, MAX_MARKUP};
use switchyard_governance::BucketId;
use switchyard_store::GroupRecord;
use utoipa::ToSchema;

use crate::shared::*;
use crate::tenancy;
use switchyard_state::governance::{now_ms, Governance};

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
    /// What its keys' requests keep of their text: `none`, `redacted` or
    /// `full` (unset: as its parent's). Needs `retention:` in the config.
    pub retention: Option<String>,
    /// Each end user's budget and limits inside the group.
    pub end_users: Option<crate::end_users::EndUsersBody>,
    /// What its requests are charged above their cost, as a share (`0.15`:
    /// 15 %; at most 10; unset: as its parent's). The gateway admin's alone.
    pub markup: Option<f64>,
    /// Its own rate card: by lane (a model, `provider/model` or
    /// `provider/*`), an entry as the config's `rate_card:` takes; what its
    /// requests there are charged, whatever they cost. The gateway admin's alone.
    #[schema(value_type = Option<Object>)]
    pub rate_card: Option<BTreeMap<String, serde_json::Value>>,
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
    /// New retention (`null`: as its parent's).
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<String>)]
    pub retention: Option<Option<String>>,
    /// Each end user's budget and limits (`null`: none, overrides too).
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<crate::end_users::EndUsersBody>)]
    pub end_users: Option<Option<crate::end_users::EndUsersBody>>,
    /// New markup, a share (`null`: as its parent's).
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<f64>)]
    pub markup: Option<Option<f64>>,
    /// New rate card, replacing the old whole (`null` or `{}`: none).
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<Object>)]
    pub rate_card: Option<Option<BTreeMap<String, serde_json::Value>>>,
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
    /// What its requests are charged above their cost, as a share (unset:
    /// as its parent's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub markup: Option<f64>,
    /// Its own rate card, by lane: what its requests there are charged
    /// (each entry with every rate it prices at; unset: none of its own).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = Option<Object>)]
    pub rate_card: BTreeMap<String, serde_json::Value>,
    /// Declared in the config file (change it there).
    pub from_config: bool,
    /// What its keys' requests keep of their text (unset: as its parent's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention: Option<String>,
    /// Live figures of the group's bucket.
    pub usage: Option<UsageView>,
    /// The record's entity tag, as `ETag` carries it: a change sends it
    /// back in `If-Match`.
    pub etag: String,
    /// Each end user's budget and limits inside the group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_users: Option<crate::end_users::EndUsersView>,
}

pub(crate) fn group_view(governance: &Governance, group: &GroupRecord) -> GroupView {
    GroupView {
        name: group.name.clone(),
        parent: group.parent.clone(),
        budget: group.budget.as_ref().map(budget_body),
        limits: limits_body(&group.limits),
        markup: group.markup.map(|m| f64::from(m.0) / 1e6),
        rate_card: group.rate_card.clone(),
        from_config: group.from_config,
        retention: group.retention.clone(),
        usage: usage_view(governance, &BucketId::Group(Arc::from(group.name.as_str()))),
        etag: content_tag(group),
        end_users: group.end_users.as_ref().map(crate::end_users::view_of),
    }
}

#[utoipa::path(get, path = "/api/v1/admin/groups", responses((status = 200, body = [GroupView])))]
pub(crate) async fn list_groups(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
) -> ApiResult<Json<Vec<GroupView>>> {
    let governance = governance(&admin)?;
    let groups = governance.groups();
    // A tenant admin lists its subtree (its own group first in the tree's order).
    let seen = |g: &GroupRecord| actor.tenant().is_none_or(|root| tenancy::within(&groups, root, Some(&g.name)));
    Ok(Json(groups.iter().filter(|g| seen(g)).map(|g| group_view(governance, g)).collect()))
}

#[utoipa::path(get, path = "/api/v1/admin/groups/{name}", responses((status = 200, body = GroupView), (status = 404)))]
pub(crate) async fn get_group(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    tenancy::reach_group(governance, &actor, &name)?;
    let group = find_group(governance, &name)?;
    let mut view = group_view(governance, &group);
    view.usage = fleet_usage_view(governance, &BucketId::Group(Arc::from(group.name.as_str()))).await;
    Ok(tagged(&content_tag(&group), Json(view)))
}

pub(crate) fn find_group(governance: &Governance, name: &str) -> ApiResult<GroupRecord> {
    governance
        .groups()
        .into_iter()
        .find(|g| g.name == name)
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("group `{name}` does not exist")))
}

/// A retention an API caller set: one of the three names, and only on a
/// gateway with a key to seal kept text under.
fn checked_retention(admin: &Admin, retention: Option<String>) -> ApiResult<Option<String>> {
    let Some(name) = retention else { return Ok(None) };
    let keeps = switchyard_config::Retention::parse(&name)
        .ok_or_else(|| bad(format!("retention: `{name}` is not none, redacted or full")))?;
    if keeps != switchyard_config::Retention::None && admin.gateway.retention.is_none() {
        return Err(bad("retention: kept text needs a key to be sealed under; set retention.key in the config first"));
    }
    Ok(Some(name))
}

/// A markup an API caller set: a share of cost, at least 0 and at most
/// 10 (1,000 %), as the config's `markup:`.
fn checked_markup(markup: Option<f64>) -> ApiResult<Option<Markup>> {
    let Some(share) = markup else { return Ok(None) };
    match ppm(share).filter(|m| *m <= MAX_MARKUP) {
        Some(millionths) => Ok(Some(Markup(millionths))),
        None => Err(bad(format!(
            "markup: {share} is not a markup; write the share charged above cost, at least 0 and at most 10 (1000%), e.g. 0.15"
        ))),
    }
}

/// A group's rate card an API caller set, checked against the running
/// config as the file's would be (every problem named, with its fix), in
/// the form the record keeps.
fn checked_card(
    admin: &Admin,
    entries: Option<BTreeMap<String, serde_json::Value>>,
) -> ApiResult<BTreeMap<String, serde_json::Value>> {
    let Some(entries) = entries else { return Ok(BTreeMap::new()) };
    let card = switchyard_config::group_rate_card(&admin.gateway.config, &entries, "rate_card")
        .map_err(|issues| bad(issues.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")))?;
    Ok(card.iter().map(|(lane, rate)| (lane.to_string(), switchyard_config::card::entry_json(rate))).collect())
}

/// What a change did to a group's price, for its audit entry (`None`:
/// nothing): the markup before and after, the lanes its new card names.
fn price_note(before: &GroupRecord, after: &GroupRecord) -> Option<String> {
    let share = |m: Option<Markup>| m.map_or_else(|| "none".to_owned(), |m| format!("{}%", f64::from(m.0) / 1e4));
    let mut notes = Vec::new();
    if before.markup != after.markup {
        notes.push(format!("markup {} -> {}", share(before.markup), share(after.markup)));
    }
    if before.rate_card != after.rate_card {
        let lanes: Vec<&str> = after.rate_card.keys().map(String::as_str).collect();
        notes.push(match lanes.is_empty() {
            true => "rate_card none".to_owned(),
            false => format!("rate_card {}", lanes.join(", ")),
        });
    }
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// A tenant admin's parent outside its subtree: the words of one that does not exist.
fn parent_missing(parent: &str) -> ApiError {
    ApiError(StatusCode::NOT_FOUND, format!("parent: group `{parent}` does not exist"))
}

/// Refuses a parent that does not exist or would close a loop.
pub(crate) fn checked_parent(governance: &Governance, name: &str, parent: Option<String>) -> ApiResult<Option<String>> {
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
pub(crate) async fn create_group(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let mut request: CreateGroup = serde_json::from_slice(&body).map_err(|err| bad(format!("body: {err}")))?;
    if request.name.trim().is_empty() {
        return Err(bad("name: give the group a name"));
    }
    let _write = governance.writes.lock().await;
    // A tenant admin's group hangs in its subtree (under its own group
    // unless it names another there), within its budget.
    if actor.tenant().is_some() {
        tenancy::no_prices(&actor, request.markup.map(|_| "markup"))?;
        tenancy::no_prices(&actor, request.rate_card.as_ref().map(|_| "rate_card"))?;
        let named = request.parent.clone().unwrap_or_default();
        request.parent = tenancy::placed(governance, &actor, request.parent).map_err(|_| parent_missing(&named))?;
        tenancy::budget_within(governance, &actor, request.budget.as_ref())?;
        if let Some(end_users) = &request.end_users {
            tenancy::budget_within(governance, &actor, end_users.budget.as_ref())?;
        }
    }
    if governance.groups().iter().any(|g| g.name == request.name) {
        return Err(ApiError(StatusCode::CONFLICT, format!("group `{}` exists", request.name)));
    }
    let group = GroupRecord {
        parent: checked_parent(governance, &request.name, request.parent)?,
        budget: request.budget.as_ref().map(|b| budget_of(b, "budget")).transpose()?,
        limits: request.limits.as_ref().map(|l| limits_of(l, "limits")).transpose()?.unwrap_or_default(),
        retention: checked_retention(&admin, request.retention)?,
        end_users: request.end_users.as_ref().map(|body| crate::end_users::policy_of(body, None)).transpose()?,
        markup: checked_markup(request.markup)?,
        rate_card: checked_card(&admin, request.rate_card)?,
        from_config: false,
        created_at: (now_ms() / 1000) as i64,
        name: request.name,
    };
    governance.stores.groups.put_group(group.clone()).await?;
    governance.set_groups(governance.stores.groups.list_groups().await?).await?;
    let unpriced = GroupRecord { markup: None, rate_card: BTreeMap::new(), ..group.clone() };
    let response = audited(&group.name, (StatusCode::CREATED, Json(group_view(governance, &group))));
    Ok(noted(price_note(&unpriced, &group), response))
}

#[utoipa::path(patch, path = "/api/v1/admin/groups/{name}", request_body = PatchGroup, params(("If-Match" = Option<String>, Header, description = "the ETag a GET returned: a write that came between is a 412")), responses((status = 200, body = GroupView), (status = 412, description = "the group changed since it was read")))]
pub(crate) async fn patch_group(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let patch: PatchGroup = serde_json::from_slice(&body).map_err(|err| bad(format!("body: {err}")))?;
    let _write = governance.writes.lock().await;
    tenancy::reach_group(governance, &actor, &name)?;
    tenancy::not_own_group(&actor, &name)?;
    tenancy::no_prices(&actor, patch.markup.map(|_| "markup"))?;
    tenancy::no_prices(&actor, patch.rate_card.as_ref().map(|_| "rate_card"))?;
    // A tenant admin's group moves only inside its subtree, within its budget.
    if let Some(parent) = &patch.parent {
        tenancy::new_parent(governance, &actor, parent.as_deref())?;
    }
    tenancy::budget_within(governance, &actor, patch.budget.as_ref().and_then(Option::as_ref))?;
    if let Some(Some(end_users)) = &patch.end_users {
        tenancy::budget_within(governance, &actor, end_users.budget.as_ref())?;
    }
    let mut group = find_group(governance, &name)?;
    let original = group_view(governance, &group);
    check_if_match(&headers, &content_tag(&group), &format!("group `{name}`"))?;
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
    if let Some(retention) = patch.retention {
        group.retention = checked_retention(&admin, retention)?;
    }
    if let Some(end_users) = patch.end_users {
        group.end_users = match end_users {
            Some(body) => Some(crate::end_users::policy_of(&body, group.end_users.as_ref())?),
            None => None,
        };
    }
    let before = group.clone();
    if let Some(markup) = patch.markup {
        group.markup = checked_markup(markup)?;
    }
    if let Some(card) = patch.rate_card {
        group.rate_card = checked_card(&admin, card)?;
    }
    governance.stores.groups.put_group(group.clone()).await?;
    governance.set_groups(governance.stores.groups.list_groups().await?).await?;
    let view = group_view(governance, &group);
    // Budget, limits, parent and the rest before and after; prices by name.
    let settings = match (serde_json::to_value(&original), serde_json::to_value(&view)) {
        (Ok(a), Ok(b)) => change_note(&a, &b, &["usage", "etag", "markup", "rate_card", "from_config"]),
        _ => None,
    };
    let note = match (settings, price_note(&before, &group)) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    };
    let response = audited(&name, tagged(&content_tag(&group), Json(view)));
    Ok(noted(note, response))
}

#[utoipa::path(delete, path = "/api/v1/admin/groups/{name}", responses((status = 204), (status = 409)))]
pub(crate) async fn delete_group(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let _write = governance.writes.lock().await;
    tenancy::reach_group(governance, &actor, &name)?;
    tenancy::not_own_group(&actor, &name)?;
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

#[utoipa::path(put, path = "/api/v1/admin/groups/{name}/end-users/{user}", request_body = crate::end_users::EndUsersBody,
    responses((status = 200, body = GroupView), (status = 404)))]
pub(crate) async fn put_group_end_user(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path((name, user)): Path<(String, String)>,
    Json(body): Json<crate::end_users::EndUsersBody>,
) -> ApiResult<Response> {
    tenancy::reach_group(governance(&admin)?, &actor, &name)?;
    let spec = crate::end_users::override_of(&admin, &user, &body)?;
    tenancy::budget_within(governance(&admin)?, &actor, body.budget.as_ref())?;
    change_group_end_user(&admin, &actor, &name, &user, Some(spec)).await
}

#[utoipa::path(delete, path = "/api/v1/admin/groups/{name}/end-users/{user}",
    responses((status = 200, body = GroupView), (status = 404)))]
pub(crate) async fn delete_group_end_user(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path((name, user)): Path<(String, String)>,
) -> ApiResult<Response> {
    change_group_end_user(&admin, &actor, &name, &user, None).await
}

/// An override on a group (a config group's too: the file sets only the
/// default, and its overrides survive reloads).
async fn change_group_end_user(
    admin: &Admin,
    actor: &Actor,
    name: &str,
    user: &str,
    spec: Option<switchyard_governance::BucketSpec>,
) -> ApiResult<Response> {
    let governance = governance(admin)?;
    let _write = governance.writes.lock().await;
    tenancy::reach_group(governance, actor, name)?;
    let mut group = find_group(governance, name)?;
    crate::end_users::apply(&mut group.end_users, user, spec)?;
    governance.stores.groups.put_group(group.clone()).await?;
    governance.set_groups(governance.stores.groups.list_groups().await?).await?;
    Ok(audited(name, tagged(&content_tag(&group), Json(group_view(governance, &group)))))
}
