//! Callers who prove who they are with an identity provider's token
//! instead of a virtual key (`auth.jwt`): which issuers are trusted, where
//! their signing keys are published, which audience a token must name, and
//! how a claim names the group whose budget and limits the caller draws on.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::spend::{budget, limits, RawBudget, RawLimits, Scope};
use crate::{check_outbound_url, duration_or, Issue};

/// A trusted issuer of callers' tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtIssuer {
    /// Names the callers it vouches for (`jwt:<name>:<group>` in the ledger).
    pub name: String,
    /// The `iss` its tokens carry.
    pub issuer: String,
    /// Where its signing keys are published (a JWKS document).
    pub jwks_url: String,
    /// Audiences a token may name (one of them is needed).
    pub audience: Vec<String>,
    /// The claim that names the caller's group.
    pub group_claim: String,
    /// A claim value → group name (`None`: the value is the group's name).
    pub groups: Option<BTreeMap<String, String>>,
    /// The claim kept as the request's end user.
    pub subject_claim: String,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: Duration,
    /// Pools its callers may name (`None`: every one).
    pub pools: Option<Vec<String>>,
    /// What of the MCP gateway its callers may use (`auth.jwt[i].mcp`, the
    /// grants of a key; empty: nothing).
    pub mcp: Vec<String>,
    /// The providers whose raw route its callers may take
    /// (`auth.jwt[i].passthrough`; empty: none).
    pub passthrough: Vec<String>,
}

/// Console sign-in through an OpenID Connect provider (`admin.oidc`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Oidc {
    /// The provider's issuer (discovery at `{issuer}/.well-known/openid-configuration`).
    pub issuer: String,
    /// The console's client id there.
    pub client_id: String,
    /// Its secret (`None`: a public client; PKCE protects the code either way).
    pub client_secret: Option<String>,
    /// Where the provider sends the browser back: this listener's
    /// `/ui/oidc/callback`, as the browser reaches it.
    pub redirect_url: String,
    /// Scopes asked for (`openid` always).
    pub scopes: Vec<String>,
    /// The claim shown as who signed in.
    pub name_claim: String,
    /// Claim values → a role; the first that matches wins.
    pub roles: Vec<RoleBinding>,
    /// The most a sign-in through this provider may be granted.
    pub max_role: Scope,
    /// Self-serve keys for members (`None`: the member role grants nothing).
    pub members: Option<Members>,
}

/// Self-serve keys (`admin.oidc.members`): each member's keys live in a
/// group of their own under `parent`, made on their first key from this
/// template.
#[derive(Debug, Clone, PartialEq)]
pub struct Members {
    /// The group each member's own group hangs under.
    pub parent: String,
    /// A member's group's budget.
    pub budget: Option<switchyard_governance::Budget>,
    /// A member's group's limits.
    pub limits: switchyard_governance::Limits,
    /// Keys one member may hold at once (revoked ones do not count).
    pub max_keys: u32,
    /// The MCP grants each key a member mints is given (empty: none).
    pub mcp: Vec<String>,
}

impl Eq for Members {}

/// One role binding: a claim (a string, or a list that contains `value`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleBinding {
    /// The claim read (`groups`, `roles`, `email`, ...).
    pub claim: String,
    /// The value it must have or contain.
    pub value: String,
    /// What it grants.
    pub role: Scope,
    /// Where it grants it: a group whose subtree an admin role administers
    /// (a tenant admin), or where a member's own group hangs; and the pools
    /// and MCP grants of the keys made under it (`None`: the whole gateway,
    /// and the members' template).
    pub tenancy: Option<std::sync::Arc<crate::Tenancy>>,
}

impl Oidc {
    /// The binding `claims` match first (`None`: none).
    pub fn binding_of(&self, claims: &serde_json::Value) -> Option<&RoleBinding> {
        self.roles.iter().find(|binding| match &claims[&binding.claim] {
            serde_json::Value::String(value) => *value == binding.value,
            serde_json::Value::Array(values) => values.iter().any(|v| v.as_str() == Some(binding.value.as_str())),
            _ => false,
        })
    }

    /// The role `claims` are granted, within the ceiling (`None`: none).
    pub fn role_of(&self, claims: &serde_json::Value) -> Option<Scope> {
        Some(self.binding_of(claims)?.role.at_most(self.max_role))
    }
}

/// `admin.oidc`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOidc {
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Option<String>,
    pub redirect_url: String,
    #[serde(default)]
    pub scopes: Vec<String>,
    pub name_claim: Option<String>,
    #[serde(default)]
    pub roles: Vec<RawRoleBinding>,
    pub max_role: Option<String>,
    pub members: Option<RawMembers>,
}

/// `admin.oidc.members`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMembers {
    pub parent: String,
    pub budget: Option<RawBudget>,
    #[serde(default)]
    pub limits: RawLimits,
    pub max_keys: Option<u32>,
    #[serde(default)]
    pub mcp: Vec<String>,
}

/// `admin.oidc.roles[i]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRoleBinding {
    pub claim: String,
    pub value: String,
    pub role: String,
    pub group: Option<String>,
    pub pools: Option<Vec<String>>,
    pub mcp: Option<Vec<String>>,
}

fn role(text: &str, key: &str, issues: &mut Vec<Issue>) -> Scope {
    match text {
        "full" => Scope::Full,
        "read_only" | "read" => Scope::Read,
        "read_text" => Scope::ReadText,
        "member" => Scope::Member,
        other => {
            issues.push(Issue::new(
                key,
                format!("`{other}` is not a role"),
                "use full, read_text, read_only or member",
            ));
            Scope::Read
        }
    }
}

/// A binding's reach: its group, and the pools and MCP grants of the keys
/// made under it (`None`: none of the three written).
fn tenancy(
    binding: &RawRoleBinding,
    role: Scope,
    at: &str,
    members: bool,
    issues: &mut Vec<Issue>,
) -> Option<std::sync::Arc<crate::Tenancy>> {
    if binding.group.is_none() && binding.pools.is_none() && binding.mcp.is_none() {
        return None;
    }
    if binding.group.is_none() && role != Scope::Member {
        issues.push(Issue::new(
            at,
            "pools and mcp bound without a group: they shape the keys a tenant admin or a member makes",
            "add group: <the group whose subtree the role administers>",
        ));
    }
    if role == Scope::Member && !members {
        issues.push(Issue::new(
            at,
            "a member binding with a group, pools or mcp, but self-serve keys are off",
            "add admin.oidc.members (the template members' own groups are made from)",
        ));
    }
    let group = binding.group.as_deref().map(|g| crate::governance::tenant_group(g, &format!("{at}.group"), issues));
    let mcp = binding.mcp.as_ref().map(|grants| crate::mcp::grants(grants, &format!("{at}.mcp"), issues));
    Some(std::sync::Arc::new(crate::Tenancy { group, pools: binding.pools.clone(), mcp }))
}

/// Reads `admin.oidc`.
pub(crate) fn oidc(raw: &RawOidc, issues: &mut Vec<Issue>) -> Oidc {
    if let Err(message) = check_outbound_url(&raw.issuer) {
        issues.push(Issue::new("admin.oidc.issuer", message, "use the provider's https issuer URL"));
    }
    let redirect_ok = (raw.redirect_url.starts_with("https://") || raw.redirect_url.starts_with("http://"))
        && raw.redirect_url.ends_with("/ui/oidc/callback");
    if !redirect_ok {
        issues.push(Issue::new(
            "admin.oidc.redirect_url",
            format!("`{}` is not this console's callback", raw.redirect_url),
            "write the admin listener's URL as browsers reach it, ending in /ui/oidc/callback",
        ));
    }
    if raw.client_id.trim().is_empty() {
        issues.push(Issue::new(
            "admin.oidc.client_id",
            "client_id is empty",
            "set the console's client id at the provider",
        ));
    }
    if raw.roles.is_empty() {
        issues.push(Issue::new(
            "admin.oidc.roles",
            "no role bindings: nobody who signs in could do anything",
            "bind a claim value to a role, e.g. { claim: groups, value: platform, role: full }",
        ));
    }
    let roles = raw
        .roles
        .iter()
        .enumerate()
        .map(|(index, binding)| {
            let at = format!("admin.oidc.roles[{index}]");
            let role = role(&binding.role, &format!("{at}.role"), issues);
            RoleBinding {
                claim: binding.claim.clone(),
                value: binding.value.clone(),
                role,
                tenancy: tenancy(binding, role, &at, raw.members.is_some(), issues),
            }
        })
        .collect();
    Oidc {
        issuer: raw.issuer.trim_end_matches('/').to_owned(),
        client_id: raw.client_id.clone(),
        client_secret: raw.client_secret.clone().filter(|s| !s.is_empty()),
        redirect_url: raw.redirect_url.clone(),
        scopes: if raw.scopes.is_empty() { vec!["email".into(), "profile".into()] } else { raw.scopes.clone() },
        name_claim: raw.name_claim.clone().unwrap_or_else(|| "email".to_owned()),
        roles,
        max_role: raw.max_role.as_deref().map_or(Scope::Full, |text| role(text, "admin.oidc.max_role", issues)),
        members: raw.members.as_ref().map(|members| Members {
            parent: members.parent.clone(),
            budget: members.budget.as_ref().and_then(|b| budget(b, "admin.oidc.members.budget", issues)),
            limits: limits(&members.limits, "admin.oidc.members.limits", issues),
            max_keys: match members.max_keys {
                None => 5,
                Some(n @ 1..=1000) => n,
                Some(n) => {
                    issues.push(Issue::new(
                        "admin.oidc.members.max_keys",
                        format!("{n} is out of range"),
                        "write 1 to 1000",
                    ));
                    5
                }
            },
            mcp: crate::mcp::grants(&members.mcp, "admin.oidc.members.mcp", issues),
        }),
    }
}

/// `auth.jwt[i]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawJwtIssuer {
    pub name: String,
    pub issuer: String,
    pub jwks_url: String,
    pub audience: RawAudience,
    pub group_claim: String,
    pub groups: Option<BTreeMap<String, String>>,
    pub subject_claim: Option<String>,
    pub leeway: Option<String>,
    pub pools: Option<Vec<String>>,
    #[serde(default)]
    pub mcp: Vec<String>,
    #[serde(default)]
    pub passthrough: Vec<String>,
}

/// One audience or several.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawAudience {
    One(String),
    Many(Vec<String>),
}

/// The most clock skew allowed: more would let an expired token live on.
const MAX_LEEWAY: Duration = Duration::from_secs(300);

/// Reads `auth.jwt`; `keys` says whether `auth.mode` is `keys`.
pub(crate) fn jwt_issuers(raw: &[RawJwtIssuer], keys: bool, issues: &mut Vec<Issue>) -> Vec<JwtIssuer> {
    if !raw.is_empty() && !keys {
        issues.push(Issue::new(
            "auth.jwt",
            "tokens are checked only when callers must prove who they are",
            "set auth.mode: keys",
        ));
    }
    let mut names: Vec<&str> = Vec::new();
    raw.iter()
        .enumerate()
        .map(|(index, issuer)| {
            let at = format!("auth.jwt[{index}]");
            if issuer.name.is_empty() || !issuer.name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)) {
                issues.push(Issue::new(
                    &format!("{at}.name"),
                    format!("`{}` is not a plain name", issuer.name),
                    "use letters, digits, - and _",
                ));
            }
            if names.contains(&issuer.name.as_str()) {
                issues.push(Issue::new(
                    &format!("{at}.name"),
                    format!("`{}` names two issuers", issuer.name),
                    "give each its own name",
                ));
            }
            names.push(&issuer.name);
            if let Err(message) = check_outbound_url(&issuer.jwks_url) {
                issues.push(Issue::new(&format!("{at}.jwks_url"), message, "use the issuer's https JWKS URL"));
            }
            let audience = match &issuer.audience {
                RawAudience::One(one) => vec![one.clone()],
                RawAudience::Many(many) => many.clone(),
            };
            if audience.is_empty() || audience.iter().any(String::is_empty) {
                issues.push(Issue::new(
                    &format!("{at}.audience"),
                    "no audience: any token the issuer ever minted would pass",
                    "name the audience your identity provider puts in tokens for Switchyard",
                ));
            }
            let leeway =
                duration_or(issuer.leeway.as_deref(), Duration::from_secs(60), &format!("{at}.leeway"), issues);
            if leeway > MAX_LEEWAY {
                issues.push(Issue::new(&format!("{at}.leeway"), "more than 5m of clock skew", "write 5m or less"));
            }
            JwtIssuer {
                name: issuer.name.clone(),
                issuer: issuer.issuer.clone(),
                jwks_url: issuer.jwks_url.clone(),
                audience,
                group_claim: issuer.group_claim.clone(),
                groups: issuer.groups.clone(),
                subject_claim: issuer.subject_claim.clone().unwrap_or_else(|| "sub".to_owned()),
                leeway: leeway.min(MAX_LEEWAY),
                pools: issuer.pools.clone(),
                mcp: crate::mcp::grants(&issuer.mcp, &format!("{at}.mcp"), issues),
                passthrough: issuer.passthrough.clone(),
            }
        })
        .collect()
}
