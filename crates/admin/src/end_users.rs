//! End users inside a key or group as the admin API reads and writes
//! them: each end user's default budget and limits (set with the key or
//! group), and overrides for named end users (the `PUT`/`DELETE
//! .../end-users/{user}` routes live with keys and groups). A change
//! reaches admission at once through the key cache; an end user's spend
//! is read by `GET /api/v1/admin/spend?by=user`.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use switchyard_governance::key::{EndUserPolicy, MAX_END_USER_OVERRIDES};
use switchyard_governance::BucketSpec;
use utoipa::ToSchema;

use crate::shared::*;

/// Each end user's budget and limits (a default, or one end user's override).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EndUsersBody {
    /// The budget of each end user.
    pub budget: Option<BudgetBody>,
    /// The limits of each end user.
    pub limits: Option<LimitsBody>,
}

/// A key's or group's end-user policy as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct EndUsersView {
    /// Each end user's budget, unless overridden.
    pub budget: Option<BudgetBody>,
    /// Each end user's limits, unless overridden.
    pub limits: LimitsBody,
    /// Named end users' own budgets and limits.
    pub overrides: BTreeMap<String, EndUsersBody>,
}

/// An override for end user `user`: its spec, for an id a request can
/// carry (admission cuts ids to `end_users.max_length`, so a longer one
/// would never match).
pub(crate) fn override_of(admin: &Admin, user: &str, body: &EndUsersBody) -> ApiResult<BucketSpec> {
    let longest = admin.gateway.config.end_users.max_length;
    if user.is_empty() || user.len() > longest {
        return Err(bad(format!("an end user's id is 1 to {longest} bytes (end_users.max_length)")));
    }
    spec_of(body, "body")
}

pub(crate) fn spec_of(body: &EndUsersBody, path: &str) -> ApiResult<BucketSpec> {
    Ok(BucketSpec {
        budget: body.budget.as_ref().map(|b| budget_of(b, &format!("{path}.budget"))).transpose()?,
        limits: body.limits.as_ref().map(|l| limits_of(l, &format!("{path}.limits"))).transpose()?.unwrap_or_default(),
    })
}

fn body_of(spec: &BucketSpec) -> EndUsersBody {
    EndUsersBody {
        budget: spec.budget.as_ref().map(budget_body),
        limits: (!spec.limits.is_empty()).then(|| limits_body(&spec.limits)),
    }
}

/// The policy a create or patch sets: `body`'s default, with the
/// overrides `before` had kept.
pub(crate) fn policy_of(body: &EndUsersBody, before: Option<&EndUserPolicy>) -> ApiResult<EndUserPolicy> {
    let spec = spec_of(body, "end_users")?;
    Ok(EndUserPolicy {
        budget: spec.budget,
        limits: spec.limits,
        overrides: before.map(|p| p.overrides.clone()).unwrap_or_default(),
    })
}

pub(crate) fn view_of(policy: &EndUserPolicy) -> EndUsersView {
    EndUsersView {
        budget: policy.budget.as_ref().map(budget_body),
        limits: limits_body(&policy.limits),
        overrides: policy.overrides.iter().map(|(user, spec)| (user.clone(), body_of(spec))).collect(),
    }
}

/// Sets (`Some`) or removes (`None`) `user`'s override in `policy`.
pub(crate) fn apply(policy: &mut Option<EndUserPolicy>, user: &str, spec: Option<BucketSpec>) -> ApiResult<()> {
    match spec {
        Some(spec) => {
            let policy = policy.get_or_insert_with(EndUserPolicy::default);
            if policy.overrides.len() >= MAX_END_USER_OVERRIDES && !policy.overrides.contains_key(user) {
                return Err(bad(format!("at most {MAX_END_USER_OVERRIDES} end-user overrides; remove one first")));
            }
            policy.overrides.insert(user.to_owned(), spec);
        }
        None => {
            let removed = policy.as_mut().and_then(|p| p.overrides.remove(user));
            if removed.is_none() {
                return Err(ApiError(StatusCode::NOT_FOUND, format!("end user `{user}` has no override here")));
            }
        }
    }
    Ok(())
}
