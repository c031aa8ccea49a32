//! Callers who prove who they are with an identity provider's token
//! instead of a virtual key (`auth.jwt`): which issuers are trusted, where
//! their signing keys are published, which audience a token must name, and
//! how a claim names the group whose budget and limits the caller draws on.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

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
            }
        })
        .collect()
}
