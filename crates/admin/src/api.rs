//! The admin API on the admin listener: virtual keys (create with the
//! secret shown once, rotate in place, revoke for good, change), the group
//! tree, spend derived from the ledger at today's prices, recent requests,
//! lanes with a manual breaker reset, and the audit log. Admin tokens are
//! compared in constant time; a read-only token may read everything and
//! change nothing; every mutation attempt is audited (who, what, outcome,
//! never a secret). Create and rotate take an `Idempotency-Key`. Lists page
//! with opaque cursors. The OpenAPI document is generated from this code.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use switchyard_config::Scope;
use switchyard_governance::key::secrets_match;
use switchyard_governance::KeyHash;
use switchyard_store::AuditEntry;
use utoipa::OpenApi;

use crate::alerts::*;
use crate::content::*;
use crate::end_users::*;
use crate::groups::*;
use crate::keys::*;
use crate::operations::*;
use crate::reports::*;
use crate::shared::*;
use crate::usage::*;
use crate::versions::*;

use switchyard_state::audit::Attempt;
use switchyard_state::governance::now_ms;
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
        .route("/api/v1/admin/keys/{id}/suspension", axum::routing::delete(lift_suspension))
        .route(
            "/api/v1/admin/keys/{id}/end-users/{user}",
            axum::routing::put(put_key_end_user).delete(delete_key_end_user),
        )
        .route(
            "/api/v1/admin/groups/{name}/end-users/{user}",
            axum::routing::put(put_group_end_user).delete(delete_group_end_user),
        )
        .route("/api/v1/admin/groups", post(create_group).get(list_groups))
        .route("/api/v1/admin/groups/{name}", get(get_group).patch(patch_group).delete(delete_group))
        .route("/api/v1/admin/spend", get(spend))
        .route("/api/v1/admin/budgets", get(crate::reports::budgets))
        .route("/api/v1/admin/budgets/{bucket}", get(crate::reports::budget))
        .route("/api/v1/admin/usage", get(usage))
        .route("/api/v1/admin/requests", get(requests))
        .route("/api/v1/admin/requests/{id}", get(request_detail))
        .route("/api/v1/admin/history", get(history))
        .route("/api/v1/admin/lanes", get(lanes))
        .route("/api/v1/admin/lanes/{pool}/{lane}", axum::routing::patch(patch_lane))
        .route("/api/v1/admin/lanes/{pool}/{lane}/reset", post(reset_lane))
        .route("/api/v1/admin/runs", get(crate::runs::list_runs))
        .route("/api/v1/admin/runs/{id}/kill", post(crate::runs::kill_run))
        .route("/api/v1/admin/sessions", get(crate::sessions::sessions))
        .route("/api/v1/admin/sockets", get(crate::sessions::sockets))
        .route("/api/v1/admin/audit", get(audit))
        .route("/api/v1/admin/alerts", get(alerts))
        .route("/api/v1/admin/alerts/silences", post(crate::alerts::silence).delete(crate::alerts::unsilence))
        .route("/api/v1/admin/reconciliation", get(crate::reconcile::reconciliation))
        .route("/api/v1/admin/mcp", get(crate::mcp::overview))
        .route("/api/v1/admin/mcp/tools/{name}/approval", post(crate::mcp::approve).delete(crate::mcp::unpin))
        .route("/api/v1/admin/users/{user}/content", axum::routing::delete(erase_user_content))
        .route("/api/v1/admin/config", get(running_config).post(apply_config))
        .route("/api/v1/admin/config/versions", get(versions))
        .route("/api/v1/admin/config/versions/{v}", get(version_detail))
        .route("/api/v1/admin/config/diff", get(diff_versions))
        .route("/api/v1/admin/config/rollback/{v}", post(rollback_config))
        .route("/api/v1/admin/config/validate", post(validate_config))
        .route("/api/v1/admin/config/reload", post(reload_config))
        .route("/api/v1/admin/openapi.json", get(openapi))
        .route("/api/v1/self/keys", get(crate::self_keys::list).post(crate::self_keys::create))
        .route("/api/v1/self/keys/{id}", axum::routing::delete(crate::self_keys::revoke))
        .route("/api/v1/self/keys/{id}/rotate", post(crate::self_keys::rotate))
        .with_state(state)
}
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
            actor = Some(Actor {
                name: token.name.clone(),
                scope: token.scope,
                subject: None,
                tenancy: token.tenancy.clone(),
            });
        }
    }
    let method = request.method().clone();
    let mutation = !matches!(method, Method::GET | Method::HEAD | Method::OPTIONS);
    let mut csrf_refused = false;
    if presented.is_none() {
        if let Some(sign_in) = signed_in(&gateway, request.headers()) {
            csrf_refused = mutation && !csrf_ok(request.headers(), &sign_in.csrf);
            actor = Some(Actor {
                name: sign_in.name,
                scope: sign_in.scope,
                subject: sign_in.subject,
                tenancy: sign_in.tenancy,
            });
        }
    }
    // A full-scope mutation takes one of its actor's changes this minute.
    let limited = match &actor {
        Some(actor) if mutation && matches!(actor.scope, Scope::Full | Scope::Member) && !csrf_refused => {
            gateway.admin_rate.take(&actor.name, gateway.config.admin.mutations_per_minute, now_ms()).err()
        }
        _ => None,
    };
    let action = format!("{method} {}", request.uri().path());
    let source = request.extensions().get::<switchyard_state::Peer>().map(|peer| peer.0);
    // Members reach their own keys and nothing else; only members have own keys.
    let own = request.uri().path().starts_with("/api/v1/self/");
    let member = actor.as_ref().is_some_and(|a| a.scope == Scope::Member);
    // A tenant admin reaches only the routes scoped to a subtree.
    let tenant_refused = actor
        .as_ref()
        .and_then(Actor::tenant)
        .filter(|_| !own && !crate::tenancy::tenant_may(&method, request.uri().path()));
    // Refused here (`Attempt::Refused`) or let through to the route.
    let (response, attempt) = match &actor {
        None => (
            ApiError(
                StatusCode::UNAUTHORIZED,
                "a valid admin token is required (Authorization: Bearer or X-Admin-Token)".into(),
            )
            .into_response(),
            Attempt::Refused,
        ),
        Some(actor) if member != own => {
            let message = if member {
                format!("`{}` is a member: members manage their own keys at /api/v1/self/keys", actor.name)
            } else {
                "self-serve keys are for members signed in through single sign-on".to_owned()
            };
            (ApiError(StatusCode::FORBIDDEN, message).into_response(), Attempt::Refused)
        }
        Some(_) if tenant_refused.is_some() => (
            crate::tenancy::door(tenant_refused.unwrap_or_default(), &method, request.uri().path()).into_response(),
            Attempt::Refused,
        ),
        Some(actor) if mutation && actor.scope.read_only() => (
            ApiError(StatusCode::FORBIDDEN, format!("token `{}` is read-only", actor.name)).into_response(),
            Attempt::Refused,
        ),
        Some(_) if csrf_refused => (
            ApiError(
                StatusCode::FORBIDDEN,
                "the console's anti-CSRF token is missing or wrong: reload the page and try again".into(),
            )
            .into_response(),
            Attempt::Refused,
        ),
        Some(actor) if limited.is_some() => {
            let wait = limited.unwrap_or(1);
            let mut response = ApiError(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "token `{}` made more than {} changes this minute (admin.mutations_per_minute); retry in {wait}s",
                    actor.name, gateway.config.admin.mutations_per_minute
                ),
            )
            .into_response();
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from(wait));
            (response, Attempt::Refused)
        }
        Some(actor) => {
            request.extensions_mut().insert(actor.clone());
            (next.run(request).await, Attempt::Admitted)
        }
    };
    if mutation {
        // A tenant admin is named with its group.
        let actor = actor.as_ref().map_or_else(|| "unauthenticated".to_owned(), Actor::audit_name);
        let target = response.extensions().get::<AuditTarget>().map(|t| t.0.clone());
        let action = match response.extensions().get::<AuditNote>() {
            Some(note) => format!("{action} ({})", note.0),
            None => action,
        };
        let outcome = response.status().as_u16();
        audit_entry(&gateway, source, &actor, action, target, outcome, attempt).await;
    }
    response
}

/// Records an admin mutation attempt from `source` (when governance keeps
/// an audit log), through the log's one door (`switchyard_state::audit::record`):
/// one refused at the door counts against its source's budget of refused rows.
pub(crate) async fn audit_entry(
    gateway: &Gateway,
    source: Option<std::net::IpAddr>,
    actor: &str,
    action: String,
    target: Option<String>,
    outcome: u16,
    attempt: Attempt,
) {
    let Some(governance) = &gateway.governance else { return };
    let entry = AuditEntry { at_ms: now_ms() as i64, actor: actor.to_owned(), action, target, outcome };
    switchyard_state::audit::record(&governance.stores, &governance.audit_gate, entry, source, attempt).await;
}

/// The console session a request's cookie names, with the scope its admin
/// token has now (a token taken out of the config ends its sessions).
pub fn signed_in(gateway: &Gateway, headers: &HeaderMap) -> Option<SignIn> {
    let cookies = headers.get(axum::http::header::COOKIE)?.to_str().ok()?;
    let cookie = cookie_value(cookies, COOKIE)?;
    let mut sign_in = gateway.sign_ins.find(cookie, Instant::now())?;
    // A single sign-on session lives while its provider is configured and
    // a role binding still matches its claims: its role is read again from
    // the bindings and ceiling now, never above the one it signed in with
    // (a lowered binding or `max_role` lowers it, a removed one ends it).
    if let Some(oidc) = gateway.oidc.as_ref().filter(|o| o.federation().matches(&sign_in.token)) {
        let role = sign_in.claims.as_deref().and_then(|claims| oidc.config().role_of(claims));
        let Some(role) = role else {
            gateway.sign_ins.close(cookie);
            return None;
        };
        sign_in.scope = role.at_most(sign_in.scope);
        sign_in.tenancy = sign_in
            .claims
            .as_deref()
            .and_then(|claims| oidc.config().binding_of(claims))
            .and_then(|binding| binding.tenancy.clone());
        return Some(sign_in);
    }
    let mut current = None;
    for token in &gateway.config.admin.tokens {
        if KeyHash::of(&token.token).matches(&sign_in.token) && current.is_none() {
            current = Some((token.name.clone(), token.scope, token.tenancy.clone()));
        }
    }
    let Some((name, scope, tenancy)) = current else {
        gateway.sign_ins.close(cookie);
        return None;
    };
    (sign_in.name, sign_in.scope, sign_in.tenancy) = (name, scope, tenancy);
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

/// The admin API's OpenAPI document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Switchyard admin API",
        description = "Keys, groups, spend, requests, lanes and audit on the admin listener. Authenticate with `Authorization: Bearer <admin token>` or `X-Admin-Token`."
    ),
    paths(
        crate::keys::create_key,
        crate::keys::list_keys,
        crate::keys::get_key,
        crate::keys::patch_key,
        crate::keys::revoke_key,
        crate::keys::rotate_key,
        crate::keys::lift_suspension,
        crate::keys::put_key_end_user,
        crate::keys::delete_key_end_user,
        crate::groups::put_group_end_user,
        crate::groups::delete_group_end_user,
        crate::groups::list_groups,
        crate::groups::get_group,
        crate::groups::create_group,
        crate::groups::patch_group,
        crate::groups::delete_group,
        crate::reports::spend,
        crate::reports::budgets,
        crate::reports::budget,
        crate::usage::usage,
        crate::reports::requests,
        crate::reports::request_detail,
        crate::reports::history,
        crate::operations::lanes,
        crate::operations::reset_lane,
        crate::operations::patch_lane,
        crate::sessions::sessions,
        crate::sessions::sockets,
        crate::self_keys::list,
        crate::self_keys::create,
        crate::self_keys::rotate,
        crate::self_keys::revoke,
        crate::operations::running_config,
        crate::operations::validate_config,
        crate::operations::reload_config,
        crate::operations::playground,
        crate::versions::apply_config,
        crate::versions::versions,
        crate::versions::version_detail,
        crate::versions::diff_versions,
        crate::versions::rollback_config,
        crate::operations::audit,
        crate::content::erase_user_content,
        crate::alerts::alerts,
        crate::alerts::silence,
        crate::alerts::unsilence,
        crate::reconcile::reconciliation,
        crate::mcp::overview,
        crate::mcp::approve,
        crate::mcp::unpin,
        crate::runs::list_runs,
        crate::runs::kill_run
    ),
    components(schemas(
        CreateKey,
        PatchKey,
        crate::operations::PatchLane,
        crate::sessions::PoolSessions,
        crate::runs::RunRow,
        crate::runs::RunsView,
        crate::runs::Killed,
        crate::sessions::SessionView,
        crate::sessions::SocketView,
        crate::sessions::SocketsView,
        crate::self_keys::CreateOwnKey,
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
        crate::reports::BudgetOutlookView,
        crate::reports::BudgetsView,
        RequestView,
        RequestPage,
        Span,
        Point,
        AlertsView,
        SilenceBody,
        UnsilenceBody,
        SilenceView,
        crate::reconcile::ReconcileView,
        crate::reconcile::ReconcileLine,
        crate::reconcile::ReconcileRun,
        UsageReport,
        UsageSeries,
        crate::usage::Steps,
        EndUsersBody,
        VersionSummary,
        VersionView,
        NewVersion,
        Rollback,
        EndUsersView,
        AlertView,
        AlertCounts
    ))
)]
pub(crate) struct ApiDoc;

pub(crate) async fn openapi() -> Response {
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
    fn the_openapi_document_lists_every_route() {
        let doc = ApiDoc::openapi();
        // Every route `routes` registers (read from this file, so a route
        // added without its document fails here), but the document's own.
        let source = include_str!("api.rs");
        let registered: Vec<&str> = source
            .split(".route(\n")
            .flat_map(|part| part.split(".route("))
            .skip(1)
            .filter_map(|rest| rest.trim_start().strip_prefix('"')?.split('"').next())
            .filter(|path| path.starts_with("/api/v1/admin/") && *path != "/api/v1/admin/openapi.json")
            .collect();
        assert!(registered.len() >= 20, "{registered:?}");
        for path in registered {
            assert!(doc.paths.paths.contains_key(path), "{path} is routed but not in the OpenAPI document");
        }
    }
}
