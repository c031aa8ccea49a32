//! Virtual keys over the admin API: create (the secret shown once, an AWS
//! pair minted when asked), list, read, change, revoke for good and rotate
//! (the secret, the AWS pair, or both). Every change to a stored key goes
//! through governance's one read-modify-write door, which the store checks
//! (`Governance::change_key`); a rotation keeps its own, for its idempotency.
//! Create and rotate take an `Idempotency-Key`.

use std::sync::{Arc, PoisonError};
use std::time::Instant;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use switchyard_governance::key::{new_secret, visible_prefix, AwsCredential, KeyState};
use switchyard_governance::{BucketId, KeyHash, KeyRecord};
use switchyard_store::{Idempotency, StoreError, Written};
use utoipa::ToSchema;

use crate::shared::*;
use crate::tenancy;
use switchyard_state::governance::{now_ms, Governance};

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
    /// Guardrail policies (`policies:` in the config) its requests pass, in
    /// place of its group's or pool's (absent: theirs).
    pub policies: Option<Vec<String>>,
    /// What of the MCP gateway it may see and use: servers (`tickets`,
    /// `*`), tools (`files__*`), prompts (`prompt:tickets__*`), resources
    /// (`resource:files+file:///docs/*`). Absent: nothing.
    pub mcp: Option<Vec<String>>,
    /// Providers whose raw route (`/passthrough/{provider}/...`) it may
    /// take, each one that opens it. Absent: none.
    pub passthrough: Option<Vec<String>>,
    /// A2A agents (`/a2a/{agent}`) it may call, by name, or `*`. Absent:
    /// none.
    pub a2a: Option<Vec<String>>,
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
    /// Each end user's budget and limits inside the key.
    pub end_users: Option<crate::end_users::EndUsersBody>,
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
    /// New guardrail policies (`null`: its group's or pool's).
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<Vec<String>>)]
    pub policies: Option<Option<Vec<String>>>,
    /// New MCP grants (`null`: none, no tool, prompt or resource).
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<Vec<String>>)]
    pub mcp: Option<Option<Vec<String>>>,
    /// New raw-route grants (`null`: none).
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<Vec<String>>)]
    pub passthrough: Option<Option<Vec<String>>>,
    /// New A2A grants (`null`: none).
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<Vec<String>>)]
    pub a2a: Option<Option<Vec<String>>>,
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
    /// Each end user's budget and limits (`null`: none, overrides too;
    /// the overrides made over the API stay otherwise).
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<crate::end_users::EndUsersBody>)]
    pub end_users: Option<Option<crate::end_users::EndUsersBody>>,
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
    /// `active`, `expired`, `revoked` or `suspended`.
    pub state: &'static str,
    /// Suspended for abuse until then (Unix seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspended_until: Option<i64>,
    /// Group.
    pub group: Option<String>,
    /// Allow-list.
    pub pools: Option<Vec<String>>,
    /// Guardrail policies in place of its group's or pool's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policies: Option<Vec<String>>,
    /// MCP grants.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp: Option<Vec<String>>,
    /// Providers whose raw route it may take.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passthrough: Option<Vec<String>>,
    /// A2A agents it may call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a2a: Option<Vec<String>>,
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
    /// Why its requests are refused now whatever its own budget bar says:
    /// a budget or calendar quota used up on its chain (its own or a
    /// group's). Absent: nothing on the chain is used up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusing: Option<String>,
    /// The record's entity tag, as `ETag` carries it: a change sends it
    /// back in `If-Match`.
    pub etag: String,
    /// Each end user's budget and limits inside the key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_users: Option<crate::end_users::EndUsersView>,
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

pub(crate) fn key_view(governance: &Governance, record: &KeyRecord) -> KeyView {
    let state = match record.state((now_ms() / 1000) as i64) {
        KeyState::Active => "active",
        KeyState::Expired => "expired",
        KeyState::Revoked => "revoked",
        KeyState::Suspended(_) => "suspended",
    };
    KeyView {
        id: record.id.clone(),
        name: record.name.clone(),
        prefix: record.prefix.clone(),
        state,
        suspended_until: record.suspended_until.filter(|_| matches!(state, "suspended")),
        group: record.group.clone(),
        pools: record.pools.clone(),
        policies: record.policies.clone(),
        mcp: record.mcp.clone(),
        passthrough: record.passthrough.clone(),
        a2a: record.a2a.clone(),
        budget: record.budget.as_ref().map(budget_body),
        limits: limits_body(&record.limits),
        expires_at: record.expires_at,
        revoked_at: record.revoked_at,
        created_at: record.created_at,
        rotated_at: record.rotated_at,
        metadata: record.metadata.clone(),
        aws_access_key_id: record.aws.as_ref().map(|a| a.access_key_id.clone()),
        usage: usage_view(governance, &BucketId::Key(Arc::from(record.id.as_str()))),
        refusing: crate::shared::refusing(governance, &record.id),
        etag: record.version.to_string(),
        end_users: record.end_users.as_ref().map(crate::end_users::view_of),
    }
}

/// The idempotency key and request fingerprint of a create or rotate.
pub(crate) fn idempotency(headers: &HeaderMap, what: &str, body: &[u8]) -> ApiResult<Option<Idempotency>> {
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

pub(crate) fn checked_pools(admin: &Admin, pools: Option<Vec<String>>) -> ApiResult<Option<Vec<String>>> {
    if let Some(pools) = &pools {
        for pool in pools {
            if admin.gateway.resolve(pool).is_none() {
                return Err(bad(format!("pools: `{pool}` is neither a pool nor a model")));
            }
        }
    }
    Ok(pools)
}

/// MCP grants: at most 256, each one of the shapes `mcp_grant` reads.
pub(crate) fn checked_mcp(grants: Option<Vec<String>>) -> ApiResult<Option<Vec<String>>> {
    use switchyard_governance::mcp_grant::{check, MAX_GRANTS};
    if let Some(grants) = &grants {
        if grants.len() > MAX_GRANTS {
            return Err(bad(format!("mcp: at most {MAX_GRANTS} grants")));
        }
        for grant in grants {
            check(grant).map_err(|message| bad(format!("mcp: {message}")))?;
        }
    }
    Ok(grants)
}

/// A2A grants: agent names or `*` (an agent the config does not declare
/// yet may be granted: a reload may add it).
pub(crate) fn checked_a2a(grants: Option<Vec<String>>) -> ApiResult<Option<Vec<String>>> {
    if let Some(grants) = &grants {
        switchyard_config::agents::check_grants(grants).map_err(|message| bad(format!("a2a: {message}")))?;
    }
    Ok(grants)
}

/// The most providers one key's raw-route grants name.
const MAX_PASSTHROUGH: usize = 64;

/// Raw-route grants: each a provider of the running config that opens
/// its raw route (`providers.<p>.passthrough`).
pub(crate) fn checked_passthrough(admin: &Admin, grants: Option<Vec<String>>) -> ApiResult<Option<Vec<String>>> {
    let Some(grants) = grants else { return Ok(None) };
    if grants.len() > MAX_PASSTHROUGH {
        return Err(bad(format!("passthrough: at most {MAX_PASSTHROUGH} providers")));
    }
    for name in &grants {
        let open = admin.gateway.config.providers.iter().any(|p| &*p.name == name.as_str() && p.passthrough.is_some());
        if !open {
            return Err(bad(format!(
                "passthrough: provider `{name}` does not open a raw route (providers.<p>.passthrough)"
            )));
        }
    }
    Ok(Some(grants))
}

pub(crate) fn checked_policies(admin: &Admin, policies: Option<Vec<String>>) -> ApiResult<Option<Vec<String>>> {
    if let Some(names) = &policies {
        for name in names {
            if !admin.gateway.config.policies.iter().any(|p| &*p.name == name.as_str()) {
                return Err(bad(format!("policies: `{name}` is not a policy of the config")));
            }
        }
    }
    Ok(policies)
}

pub(crate) fn checked_group(governance: &Governance, group: Option<String>) -> ApiResult<Option<String>> {
    if let Some(name) = &group {
        if !governance.groups().iter().any(|g| &g.name == name) {
            return Err(bad(format!("group: `{name}` does not exist")));
        }
    }
    Ok(group)
}

pub(crate) fn created(
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
pub(crate) fn replayed(
    admin: &Admin,
    scope: &str,
    idem: &Idempotency,
    governance: &Governance,
    record: &KeyRecord,
) -> Response {
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
pub(crate) async fn create_key(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let mut request: CreateKey = serde_json::from_slice(&body).map_err(|err| bad(format!("body: {err}")))?;
    let idem = idempotency(&headers, "create", &body)?;
    if request.name.trim().is_empty() {
        return Err(bad("name: give the key a name"));
    }
    let _write = governance.writes.lock().await;
    // A tenant admin's key goes in its subtree, within its tenancy's
    // pools, grants and budget.
    request.group = tenancy::placed(governance, &actor, request.group)?;
    request.pools = tenancy::pools_within(&actor, request.pools)?;
    tenancy::mcp_within(&actor, request.mcp.as_ref())?;
    tenancy::passthrough_within(&actor, request.passthrough.as_ref())?;
    tenancy::a2a_within(&actor, request.a2a.as_ref())?;
    tenancy::budget_within(governance, &actor, request.budget.as_ref())?;
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
        policies: checked_policies(&admin, request.policies)?,
        budget: request.budget.as_ref().map(|b| budget_of(b, "budget")).transpose()?,
        limits: request.limits.as_ref().map(|l| limits_of(l, "limits")).transpose()?.unwrap_or_default(),
        expires_at: request.expires_at.as_ref().map(|t| parse_time(t, "expires_at")).transpose()?,
        revoked_at: None,
        metadata: request.metadata.unwrap_or_default(),
        created_at: now,
        rotated_at: None,
        suspended_until: None,
        mcp: checked_mcp(request.mcp)?,
        passthrough: checked_passthrough(&admin, request.passthrough)?,
        a2a: checked_a2a(request.a2a)?,
        end_users: request.end_users.as_ref().map(|body| crate::end_users::policy_of(body, None)).transpose()?,
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
        // A replay answers only within the caller's reach: a tenant admin
        // never gets another's key (nor its secret) back by its request.
        Written::Replayed(record) if !tenancy::reaches_key(governance, &actor, &record) => Err(ApiError(
            StatusCode::CONFLICT,
            "this Idempotency-Key was used by another request; send a fresh one".into(),
        )),
        Written::Replayed(record) => match &idem {
            Some(idem) => Ok(replayed(&admin, "create", idem, governance, &record)),
            None => Err(ApiError(StatusCode::CONFLICT, "the key exists".into())),
        },
    }
}

#[utoipa::path(get, path = "/api/v1/admin/keys", params(("limit" = Option<usize>, Query), ("cursor" = Option<String>, Query)),
    responses((status = 200, body = KeyPage)))]
pub(crate) async fn list_keys(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Query(page): Query<PageQuery>,
) -> ApiResult<Json<KeyPage>> {
    let governance = governance(&admin)?;
    let limit = page.limit.unwrap_or(50).clamp(1, 1000);
    let records = match actor.tenant() {
        None => governance.stores.keys.list_keys(page.cursor.as_deref(), limit + 1).await?,
        // A tenant admin's page is of its subtree's keys, in the store's
        // order (by id), read from the cache every key is held in.
        Some(_) => {
            let after = page.cursor.as_deref().unwrap_or("");
            let mut records: Vec<KeyRecord> = governance
                .records()
                .into_iter()
                .filter(|r| r.id.as_str() > after && tenancy::reaches_key(governance, &actor, r))
                .collect();
            records.sort_by(|a, b| a.id.cmp(&b.id));
            records.truncate(limit + 1);
            records
        }
    };
    let more = records.len() > limit;
    let data: Vec<KeyView> = records.iter().take(limit).map(|r| key_view(governance, r)).collect();
    let next_cursor = if more { data.last().map(|k| k.id.clone()) } else { None };
    Ok(Json(KeyPage { data, next_cursor }))
}

pub(crate) async fn stored_key(governance: &Governance, id: &str) -> ApiResult<KeyRecord> {
    governance
        .stores
        .keys
        .get_key(id)
        .await?
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("key `{id}` does not exist")))
}

#[utoipa::path(get, path = "/api/v1/admin/keys/{id}", responses((status = 200, body = KeyView), (status = 404)))]
pub(crate) async fn get_key(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    tenancy::reach_key(governance, &actor, &id)?;
    let record = stored_key(governance, &id).await?;
    if !tenancy::reaches_key(governance, &actor, &record) {
        return Err(tenancy::no_key(&id));
    }
    let mut view = key_view(governance, &record);
    view.usage = fleet_usage_view(governance, &BucketId::Key(Arc::from(record.id.as_str()))).await;
    Ok(tagged(&record.version.to_string(), Json(view)))
}

/// Tries of a rotation read again after another write came first.
const ROTATE_TRIES: usize = 8;

/// [`Governance::change_key`] (the one door every change to a stored key
/// goes through) in the admin API's terms: 404, 409 when revoked.
///
/// A tenant admin's change reaches only a key of its subtree, checked on
/// the cached record and again on the stored one the change reads: any
/// other is a 404, as one that does not exist.
pub(crate) async fn change_key(
    governance: &Governance,
    actor: &Actor,
    id: &str,
    mut change: impl FnMut(&mut KeyRecord) -> ApiResult<()>,
) -> ApiResult<KeyRecord> {
    use switchyard_state::governance::KeyChange;
    tenancy::reach_key(governance, actor, id)?;
    let scoped = |record: &mut KeyRecord| {
        if !tenancy::reaches_key(governance, actor, record) {
            return Err(tenancy::no_key(id));
        }
        change(record)
    };
    governance.change_key(id, scoped).await.map_err(|err| match err {
        KeyChange::Missing => ApiError(StatusCode::NOT_FOUND, format!("key `{id}` does not exist")),
        KeyChange::Revoked => ApiError(StatusCode::CONFLICT, format!("key `{id}` is revoked; revocation is final")),
        KeyChange::Refused(err) => err,
        KeyChange::Store(err) => err.into(),
    })
}

#[utoipa::path(patch, path = "/api/v1/admin/keys/{id}", request_body = PatchKey, params(("If-Match" = Option<String>, Header, description = "the ETag a GET returned: a write that came between is a 412")), responses((status = 200, body = KeyView), (status = 412, description = "the key changed since it was read")))]
pub(crate) async fn patch_key(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let mut patch: PatchKey = serde_json::from_slice(&body).map_err(|err| bad(format!("body: {err}")))?;
    let _write = governance.writes.lock().await;
    // A tenant admin moves a key only within its subtree (none is its own
    // group), and gives it only its tenancy's pools, grants and budget.
    if actor.tenant().is_some() {
        tenancy::reach_key(governance, &actor, &id)?;
        match patch.group.take() {
            Some(None) => return Err(tenancy::ungrouped()),
            Some(group) => patch.group = Some(tenancy::placed(governance, &actor, group)?),
            None => {}
        }
        if let Some(pools) = patch.pools.take() {
            patch.pools = Some(tenancy::pools_within(&actor, pools)?);
        }
        tenancy::mcp_within(&actor, patch.mcp.as_ref().and_then(Option::as_ref))?;
        tenancy::passthrough_within(&actor, patch.passthrough.as_ref().and_then(Option::as_ref))?;
        tenancy::a2a_within(&actor, patch.a2a.as_ref().and_then(Option::as_ref))?;
        tenancy::budget_within(governance, &actor, patch.budget.as_ref().and_then(Option::as_ref))?;
    }
    let mut before = None;
    let record = change_key(governance, &actor, &id, |record| {
        // The version the caller read, if it said: a write that came
        // between is a 412 (the read-modify-write retry never hides it).
        check_if_match(&headers, &record.version.to_string(), &format!("key `{id}`"))?;
        before = Some(key_view(governance, record));
        if let Some(name) = &patch.name {
            record.name.clone_from(name);
        }
        if let Some(group) = &patch.group {
            record.group = checked_group(governance, group.clone())?;
        }
        if let Some(pools) = &patch.pools {
            record.pools = checked_pools(&admin, pools.clone())?;
        }
        if let Some(policies) = &patch.policies {
            record.policies = checked_policies(&admin, policies.clone())?;
        }
        if let Some(mcp) = &patch.mcp {
            record.mcp = checked_mcp(mcp.clone())?;
        }
        if let Some(passthrough) = &patch.passthrough {
            record.passthrough = checked_passthrough(&admin, passthrough.clone())?;
        }
        if let Some(a2a) = &patch.a2a {
            record.a2a = checked_a2a(a2a.clone())?;
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
        if let Some(end_users) = &patch.end_users {
            record.end_users = match end_users {
                Some(body) => Some(crate::end_users::policy_of(body, record.end_users.as_ref())?),
                None => None,
            };
        }
        Ok(())
    })
    .await?;
    let view = key_view(governance, &record);
    let note = before.and_then(|before| key_change_note(&before, &view));
    Ok(noted(note, audited(&id, tagged(&record.version.to_string(), Json(view)))))
}

/// What a key change changed, for its audit entry (live figures and
/// bookkeeping left out).
fn key_change_note(before: &KeyView, after: &KeyView) -> Option<String> {
    let (Ok(before), Ok(after)) = (serde_json::to_value(before), serde_json::to_value(after)) else { return None };
    change_note(
        &before,
        &after,
        &["usage", "refusing", "etag", "state", "created_at", "rotated_at", "revoked_at", "prefix", "id"],
    )
}

/// Lifts a key's abuse suspension (it serves again at once, on every
/// instance of a fleet), and ends its alert.
#[utoipa::path(delete, path = "/api/v1/admin/keys/{id}/suspension", responses((status = 200, body = KeyView), (status = 404)))]
pub(crate) async fn lift_suspension(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let _write = governance.writes.lock().await;
    let mut before = None;
    let record = change_key(governance, &actor, &id, |record| {
        before = record.suspended_until;
        record.suspended_until = None;
        Ok(())
    })
    .await?;
    let note = match before {
        Some(until) => format!("suspended until {} -> not suspended", utc_time((until.max(0) as u64) * 1000)),
        None => "was not suspended".to_owned(),
    };
    if let Some(alerts) = &admin.gateway.telemetry.alerts {
        let subject = switchyard_state::governance::suspension_subject(&record);
        alerts.resolve(
            switchyard_telemetry::alert::AlertKind::KeySuspended,
            &subject,
            "lifted by an admin".into(),
            now_ms(),
        );
    }
    Ok(noted(Some(note), audited(&id, tagged(&record.version.to_string(), Json(key_view(governance, &record))))))
}

#[utoipa::path(delete, path = "/api/v1/admin/keys/{id}", responses((status = 200, body = KeyView)))]
pub(crate) async fn revoke_key(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let _write = governance.writes.lock().await;
    let at = (now_ms() / 1000) as i64;
    let record = match change_key(governance, &actor, &id, |record| {
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

pub(crate) fn new_aws_pair() -> ApiResult<AwsCredential> {
    Ok(AwsCredential::new(&random::<{ switchyard_governance::key::AWS_RANDOM_BYTES }>()?))
}

#[utoipa::path(post, path = "/api/v1/admin/keys/{id}/rotate", request_body = Option<RotateKey>,
    responses((status = 200, body = KeyWithSecret)),
    params(("Idempotency-Key" = Option<String>, Header, description = "a retried rotation with the same key rotates once")))]
pub(crate) async fn rotate_key(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    tenancy::reach_key(governance, &actor, &id)?;
    let what = if body.iter().all(u8::is_ascii_whitespace) {
        RotateKey::default()
    } else {
        serde_json::from_slice::<RotateKey>(&body).map_err(|err| bad(format!("body: {err}")))?
    };
    let scope = format!("rotate:{id}");
    let idem = idempotency(&headers, &scope, &body)?;
    let _write = governance.writes.lock().await;
    for _ in 0..ROTATE_TRIES {
        let mut record = stored_key(governance, &id).await?;
        if !tenancy::reaches_key(governance, &actor, &record) {
            return Err(tenancy::no_key(&id));
        }
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

#[utoipa::path(put, path = "/api/v1/admin/keys/{id}/end-users/{user}", request_body = crate::end_users::EndUsersBody,
    responses((status = 200, body = KeyView), (status = 404)))]
pub(crate) async fn put_key_end_user(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path((id, user)): Path<(String, String)>,
    Json(body): Json<crate::end_users::EndUsersBody>,
) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    tenancy::reach_key(governance, &actor, &id)?;
    let spec = crate::end_users::override_of(&admin, &user, &body)?;
    tenancy::budget_within(governance, &actor, body.budget.as_ref())?;
    let _write = governance.writes.lock().await;
    let record = change_key(governance, &actor, &id, |record| {
        crate::end_users::apply(&mut record.end_users, &user, Some(spec.clone()))
    })
    .await?;
    Ok(audited(&id, tagged(&record.version.to_string(), Json(key_view(governance, &record)))))
}

#[utoipa::path(delete, path = "/api/v1/admin/keys/{id}/end-users/{user}",
    responses((status = 200, body = KeyView), (status = 404)))]
pub(crate) async fn delete_key_end_user(
    State(admin): State<Admin>,
    Extension(actor): Extension<Actor>,
    Path((id, user)): Path<(String, String)>,
) -> ApiResult<Response> {
    let governance = governance(&admin)?;
    let _write = governance.writes.lock().await;
    let record =
        change_key(governance, &actor, &id, |record| crate::end_users::apply(&mut record.end_users, &user, None))
            .await?;
    Ok(audited(&id, tagged(&record.version.to_string(), Json(key_view(governance, &record)))))
}
