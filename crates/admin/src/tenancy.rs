//! Tenant admins: an admin token (`admin.tenants`) or single sign-on
//! binding scoped to a group's subtree. At the door ([`door`]) a tenant
//! admin reaches only the routes that can be scoped to a subtree (keys,
//! groups, budgets, spend, usage, requests, audit, alerts, runs); everything
//! server-wide (config and its versions, lanes, MCP approval, the
//! playground, history, `/stats`, `/metrics`, erasing an end user's text)
//! is a 403 that names no object. Behind the door each route asks the
//! helpers here: an object outside the subtree is a 404 worded exactly as
//! one that does not exist (existence is not disclosed), a list holds only
//! the subtree, and a filter naming something outside finds nothing, as
//! one naming nothing does.
//!
//! A tenant admin reads its own group but never changes it (its budget,
//! limits and parent are the operator's), never moves a group out of its
//! subtree, never sets a budget above the nearest one over its group,
//! never sets a price (a group's markup or rate card: [`no_prices`]), and
//! hands its keys only the pools and MCP grants its tenancy lists.

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use switchyard_config::{Scope, Tenancy};
use switchyard_governance::KeyRecord;
use switchyard_store::GroupRecord;

use crate::shared::*;
use switchyard_state::governance::Governance;

/// The routes a tenant admin may reach, by template and method; every
/// other route of the admin listener is the gateway admin's alone.
/// (`tests/tenants.rs` walks every route `api::routes` registers.)
pub const TENANT_ROUTES: [(&str, &[Method]); 19] = [
    ("/api/v1/admin/keys", &[Method::GET, Method::POST]),
    ("/api/v1/admin/keys/{id}", &[Method::GET, Method::PATCH, Method::DELETE]),
    ("/api/v1/admin/keys/{id}/rotate", &[Method::POST]),
    ("/api/v1/admin/keys/{id}/suspension", &[Method::DELETE]),
    ("/api/v1/admin/keys/{id}/end-users/{user}", &[Method::PUT, Method::DELETE]),
    ("/api/v1/admin/groups", &[Method::GET, Method::POST]),
    ("/api/v1/admin/groups/{name}", &[Method::GET, Method::PATCH, Method::DELETE]),
    ("/api/v1/admin/groups/{name}/end-users/{user}", &[Method::PUT, Method::DELETE]),
    ("/api/v1/admin/spend", &[Method::GET]),
    ("/api/v1/admin/budgets", &[Method::GET]),
    ("/api/v1/admin/budgets/{bucket}", &[Method::GET]),
    ("/api/v1/admin/usage", &[Method::GET]),
    ("/api/v1/admin/requests", &[Method::GET]),
    ("/api/v1/admin/requests/{id}", &[Method::GET]),
    ("/api/v1/admin/audit", &[Method::GET]),
    ("/api/v1/admin/alerts", &[Method::GET]),
    ("/api/v1/admin/runs", &[Method::GET]),
    ("/api/v1/admin/runs/{id}/kill", &[Method::POST]),
    ("/api/v1/admin/openapi.json", &[Method::GET]),
];

/// Whether `path` is an instance of `template` (`{x}` matches one segment).
fn matches(template: &str, path: &str) -> bool {
    let (mut t, mut p) = (template.split('/'), path.split('/'));
    loop {
        match (t.next(), p.next()) {
            (None, None) => return true,
            (Some(t), Some(p)) if t.starts_with('{') && t.ends_with('}') && !p.is_empty() => {}
            (Some(t), Some(p)) if t == p => {}
            _ => return false,
        }
    }
}

/// Whether a tenant admin may send `method` to `path` (HEAD as GET).
pub fn tenant_may(method: &Method, path: &str) -> bool {
    let method = if method == Method::HEAD { &Method::GET } else { method };
    TENANT_ROUTES.iter().any(|(template, methods)| matches(template, path) && methods.contains(method))
}

/// The door's answer to a tenant admin on a route that is not scoped to a
/// subtree: a 403 that names the route, never an object.
pub(crate) fn door(group: &str, method: &Method, path: &str) -> ApiError {
    ApiError(
        StatusCode::FORBIDDEN,
        format!(
            "a tenant admin of `{group}` manages the keys, groups and budgets under it; \
             {method} {path} is the gateway admin's"
        ),
    )
}

impl Actor {
    /// The group a tenant admin administers (`None`: the whole gateway's
    /// admin, or a member, whose binding's group only places their keys).
    pub fn tenant(&self) -> Option<&str> {
        self.tenancy.as_ref().filter(|_| self.scope != Scope::Member).and_then(|t| t.group.as_deref())
    }

    /// How the audit log names who acted: a tenant admin with its group.
    pub fn audit_name(&self) -> String {
        match self.tenant() {
            Some(group) => format!("{} (tenant admin of {group})", self.name),
            None => self.name.to_string(),
        }
    }
}

/// Whether `group` is `root` or below it (`None`: no group, outside every subtree).
pub(crate) fn within(groups: &[GroupRecord], root: &str, group: Option<&str>) -> bool {
    let mut at = group.map(str::to_owned);
    // A tree never loops (parents are checked), but a bound costs nothing.
    for _ in 0..=groups.len() {
        let Some(name) = at else { return false };
        if name == root {
            return true;
        }
        at = groups.iter().find(|g| g.name == name).and_then(|g| g.parent.clone());
    }
    false
}

/// The subtree a request may see: `None` for the gateway's admin, else the
/// tenant's groups (the scope its reads are filtered to).
pub(crate) fn subtree(governance: &Governance, actor: &Actor) -> Option<Vec<String>> {
    actor.tenant().map(|root| governance.subtree(root))
}

/// The 404 of a key outside the subtree: the words of a key that does not exist.
pub(crate) fn no_key(id: &str) -> ApiError {
    ApiError(StatusCode::NOT_FOUND, format!("key `{id}` does not exist"))
}

/// The 404 of a group outside the subtree: the words of one that does not exist.
pub(crate) fn no_group(name: &str) -> ApiError {
    ApiError(StatusCode::NOT_FOUND, format!("group `{name}` does not exist"))
}

/// Whether `actor` reaches key `record` (the gateway's admin reaches every one).
pub(crate) fn reaches_key(governance: &Governance, actor: &Actor, record: &KeyRecord) -> bool {
    actor.tenant().is_none_or(|root| within(&governance.groups(), root, record.group.as_deref()))
}

/// Refuses (404) a key `actor` does not reach: checked on the cached
/// record first, and again on the stored one a change reads (a key moved
/// meanwhile is caught there).
pub(crate) fn reach_key(governance: &Governance, actor: &Actor, id: &str) -> ApiResult<()> {
    if actor.tenant().is_none() {
        return Ok(());
    }
    match governance.key(id) {
        Some(key) if reaches_key(governance, actor, &key.record) => Ok(()),
        _ => Err(no_key(id)),
    }
}

/// Refuses (404) a group `actor` does not reach.
pub(crate) fn reach_group(governance: &Governance, actor: &Actor, name: &str) -> ApiResult<()> {
    match actor.tenant() {
        Some(root) if !within(&governance.groups(), root, Some(name)) => Err(no_group(name)),
        _ => Ok(()),
    }
}

/// Refuses a change to the tenant's own group (its cap, limits and place
/// are the operator's: a tenant admin never raises its own ceiling).
pub(crate) fn not_own_group(actor: &Actor, name: &str) -> ApiResult<()> {
    match actor.tenant() {
        Some(root) if root == name => Err(ApiError(
            StatusCode::FORBIDDEN,
            format!("group `{name}` is your tenancy's own: its budget, limits and place are the gateway admin's"),
        )),
        _ => Ok(()),
    }
}

/// Refuses a price a tenant admin sets — a `markup` or a `rate_card` (one
/// it clears too), on its own group or any below it: prices are the
/// gateway admin's. A price set below its own group's would lower what
/// its tenancy is charged, and an "only above" rule would not hold once
/// the operator raised the tenant's price or a key moved between its
/// groups; the groups a tenant admin makes take the nearest price above.
pub(crate) fn no_prices(actor: &Actor, field: Option<&str>) -> ApiResult<()> {
    match (actor.tenant(), field) {
        (Some(root), Some(field)) => Err(ApiError(
            StatusCode::FORBIDDEN,
            format!(
                "{field}: a group's price is the gateway admin's; the groups under `{root}` are charged at the \
                 nearest markup or rate card set on them or above"
            ),
        )),
        _ => Ok(()),
    }
}

/// The group a tenant admin's new key or group goes in: the one named,
/// when inside its subtree (a 404 otherwise, as for a group that does not
/// exist), else its own group. The gateway's admin names any or none.
pub(crate) fn placed(governance: &Governance, actor: &Actor, named: Option<String>) -> ApiResult<Option<String>> {
    let Some(root) = actor.tenant() else { return Ok(named) };
    let name = named.unwrap_or_else(|| root.to_owned());
    if within(&governance.groups(), root, Some(&name)) {
        Ok(Some(name))
    } else {
        Err(no_group(&name))
    }
}

/// A tenant admin's key taken out of every group: it would leave the subtree.
pub(crate) fn ungrouped() -> ApiError {
    ApiError(StatusCode::FORBIDDEN, "group: a tenant admin's keys stay in its subtree; name a group there".into())
}

/// A group's new parent set by a tenant admin: inside its subtree (a 404
/// otherwise), and never none (a root is the gateway admin's to make).
pub(crate) fn new_parent(governance: &Governance, actor: &Actor, parent: Option<&str>) -> ApiResult<()> {
    let Some(root) = actor.tenant() else { return Ok(()) };
    match parent {
        None => Err(ApiError(
            StatusCode::FORBIDDEN,
            format!("a tenant admin's groups stay under `{root}`: only the gateway admin makes a root group"),
        )),
        Some(parent) if !within(&governance.groups(), root, Some(parent)) => {
            Err(ApiError(StatusCode::NOT_FOUND, format!("parent: group `{parent}` does not exist")))
        }
        Some(_) => Ok(()),
    }
}

/// The nearest budget at or above the tenant's own group, in USD.
fn ceiling(governance: &Governance, root: &str) -> Option<(String, f64)> {
    let groups = governance.groups();
    let mut at = Some(root.to_owned());
    for _ in 0..=groups.len() {
        let group = groups.iter().find(|g| Some(&g.name) == at.as_ref())?;
        if let Some(budget) = &group.budget {
            return Some((group.name.clone(), budget.usd));
        }
        at = group.parent.clone();
    }
    None
}

/// Refuses a budget a tenant admin sets above the nearest budget over its
/// own group (a cap its subtree could never spend is a wrong figure).
pub(crate) fn budget_within(governance: &Governance, actor: &Actor, budget: Option<&BudgetBody>) -> ApiResult<()> {
    let (Some(root), Some(budget)) = (actor.tenant(), budget) else { return Ok(()) };
    match ceiling(governance, root) {
        Some((group, cap)) if budget.usd > cap => Err(ApiError(
            StatusCode::FORBIDDEN,
            format!("budget: ${} is above group `{group}`'s ${cap}; a tenant admin sets budgets within it", budget.usd),
        )),
        _ => Ok(()),
    }
}

/// The pools a tenant admin's key may name: within its tenancy's list (a
/// 403 past it); absent, the list itself.
pub(crate) fn pools_within(actor: &Actor, pools: Option<Vec<String>>) -> ApiResult<Option<Vec<String>>> {
    let Some(allowed) = tenancy_of(actor).and_then(|t| t.pools.as_ref()) else { return Ok(pools) };
    let Some(pools) = pools else { return Ok(Some(allowed.clone())) };
    match pools.iter().find(|pool| !allowed.contains(pool)) {
        Some(pool) => Err(ApiError(
            StatusCode::FORBIDDEN,
            format!("pools: `{pool}` is not among the pools your tenancy may grant ({})", allowed.join(", ")),
        )),
        None => Ok(Some(pools)),
    }
}

/// The MCP grants a tenant admin's key may carry: each one its tenancy
/// lists (a 403 past it).
pub(crate) fn mcp_within(actor: &Actor, grants: Option<&Vec<String>>) -> ApiResult<()> {
    let (Some(allowed), Some(grants)) = (tenancy_of(actor).and_then(|t| t.mcp.as_ref()), grants) else {
        return Ok(());
    };
    match grants.iter().find(|grant| !allowed.contains(grant)) {
        Some(grant) => Err(ApiError(
            StatusCode::FORBIDDEN,
            format!("mcp: `{grant}` is not among the grants your tenancy may give"),
        )),
        None => Ok(()),
    }
}

/// A tenant admin gives no raw-route grant: the route spends the
/// operator's own provider key on paths only the operator chose, so only
/// the gateway's admin grants it (a 403; clearing grants is allowed).
pub(crate) fn passthrough_within(actor: &Actor, grants: Option<&Vec<String>>) -> ApiResult<()> {
    match (actor.tenant(), grants) {
        (Some(_), Some(grants)) if !grants.is_empty() => Err(ApiError(
            StatusCode::FORBIDDEN,
            "passthrough: raw-route grants are given by the gateway's admin, not a tenant admin".to_owned(),
        )),
        _ => Ok(()),
    }
}

/// A tenant admin gives no A2A grant: an agent is the operator's, reached
/// with the operator's credential, so only the gateway's admin grants it
/// (a 403; clearing grants is allowed).
pub(crate) fn a2a_within(actor: &Actor, grants: Option<&Vec<String>>) -> ApiResult<()> {
    match (actor.tenant(), grants) {
        (Some(_), Some(grants)) if !grants.is_empty() => Err(ApiError(
            StatusCode::FORBIDDEN,
            "a2a: agent grants are given by the gateway's admin, not a tenant admin".to_owned(),
        )),
        _ => Ok(()),
    }
}

/// A tenant admin's tenancy (`None` for the gateway's admin and members).
fn tenancy_of(actor: &Actor) -> Option<&Arc<Tenancy>> {
    actor.tenant().and(actor.tenancy.as_ref())
}

/// Whether a budget's bucket (`key:<id>`, `group:<name>`) is in `actor`'s reach.
pub(crate) fn reaches_bucket(governance: &Governance, actor: &Actor, bucket: &str) -> bool {
    let Some(root) = actor.tenant() else { return true };
    let groups = governance.groups();
    if let Some(id) = bucket.strip_prefix("key:") {
        return governance.key(id).is_some_and(|key| within(&groups, root, key.record.group.as_deref()));
    }
    bucket.strip_prefix("group:").is_some_and(|name| within(&groups, root, Some(name)))
}

/// Whether an alert's subject names something in `actor`'s reach: it is,
/// or begins with, how the alerts name one of its subtree's keys
/// (`key `name` (id)`) or groups (`group `name``).
pub(crate) fn reaches_subject(governance: &Governance, actor: &Actor, subject: &str) -> bool {
    let Some(root) = actor.tenant() else { return true };
    let groups = governance.groups();
    let keys = governance.records();
    let mut names = keys
        .iter()
        .filter(|key| within(&groups, root, key.group.as_deref()))
        .map(switchyard_state::governance::suspension_subject)
        .chain(groups.iter().filter(|g| within(&groups, root, Some(&g.name))).map(|g| format!("group `{}`", g.name)));
    names.any(|who| subject == who || subject.strip_prefix(who.as_str()).is_some_and(|rest| rest.starts_with(' ')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(name: &str, parent: Option<&str>) -> GroupRecord {
        GroupRecord {
            name: name.into(),
            parent: parent.map(str::to_owned),
            budget: None,
            limits: Default::default(),
            retention: None,
            end_users: None,
            from_config: false,
            markup: None,
            rate_card: Default::default(),
            created_at: 0,
        }
    }

    #[test]
    fn a_subtree_is_its_root_and_what_hangs_below() {
        let groups =
            [group("corp", None), group("acme", Some("corp")), group("team", Some("acme")), group("globex", None)];
        assert!(within(&groups, "acme", Some("acme")));
        assert!(within(&groups, "acme", Some("team")));
        assert!(!within(&groups, "acme", Some("corp")), "the parent is outside");
        assert!(!within(&groups, "acme", Some("globex")));
        assert!(!within(&groups, "acme", Some("nosuch")));
        assert!(!within(&groups, "acme", None), "a key without a group is nobody's tenancy's");
    }

    #[test]
    fn route_templates_match_one_segment_per_placeholder() {
        assert!(tenant_may(&Method::GET, "/api/v1/admin/keys/key_1"));
        assert!(tenant_may(&Method::HEAD, "/api/v1/admin/groups"));
        assert!(tenant_may(&Method::PUT, "/api/v1/admin/groups/acme/end-users/u1"));
        assert!(!tenant_may(&Method::GET, "/api/v1/admin/keys/"), "an empty segment is no id");
        assert!(!tenant_may(&Method::GET, "/api/v1/admin/keys/a/b"));
        assert!(!tenant_may(&Method::POST, "/api/v1/admin/spend"));
        for (method, path) in [
            (Method::GET, "/api/v1/admin/config"),
            (Method::POST, "/api/v1/admin/config/reload"),
            (Method::GET, "/api/v1/admin/lanes"),
            (Method::POST, "/api/v1/admin/mcp/tools/t/approval"),
            (Method::GET, "/api/v1/admin/history"),
            (Method::GET, "/metrics"),
            (Method::POST, "/api/v1/admin/playground"),
            (Method::DELETE, "/api/v1/admin/users/u/content"),
        ] {
            assert!(!tenant_may(&method, path), "{method} {path}");
        }
    }
}
