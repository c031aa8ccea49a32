//! Callers who present an identity provider's token instead of a virtual
//! key (`auth.jwt`): a company's workloads need no key of their own. The
//! token's issuer must be configured, its signature must verify against
//! the issuer's published keys (JWKS, fetched at boot, again every ten
//! minutes and when a token names a key not seen yet), its audience must be
//! one configured, `exp` and `nbf` hold within the leeway, a claim names
//! the group whose budget and limits the caller draws on, and it names its
//! subject: the request's end user (whatever the request says), and with
//! the issuer and group who owns what the caller keeps
//! ([`super::owner`]), so workloads of one group stay apart.
//!
//! A token verified once is remembered until it expires (a bounded cache
//! keyed by a hash of the whole token), so a workload's steady traffic pays
//! for one signature check, not one per request.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;
use base64::Engine;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use switchyard_config::JwtIssuer;
use switchyard_transport::hooks::HookClient;

/// How often an issuer's keys are fetched again.
const REFRESH_EVERY: Duration = Duration::from_secs(600);

/// The soonest an unknown key id fetches the keys again (a flood of
/// made-up key ids costs the identity provider one fetch per interval).
const REFETCH_AFTER_MS: u64 = 5_000;

/// Tokens remembered as verified.
const VERIFIED_KEPT: usize = 10_000;

/// A JWKS fetch's deadline.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// What a verified token says about its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The issuer (index into `auth.jwt`).
    pub issuer: usize,
    /// The groups its claim names, in order (the first one this gateway
    /// has is the caller's).
    pub groups: Vec<String>,
    /// Its subject.
    pub subject: Arc<str>,
    /// When the token expires (Unix seconds).
    pub expires: u64,
}

/// Why a token does not open the door.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtRefusal {
    /// Not a JWT at all.
    #[error("the bearer token is not a JWT: {0}")]
    Malformed(String),
    /// An `iss` no `auth.jwt` entry trusts.
    #[error("the token's issuer `{0}` is not trusted here")]
    UnknownIssuer(String),
    /// Signed with a key the issuer has not published (yet).
    #[error(
        "the token is signed with a key `{0}` its issuer has not published (the keys are fetched again; retry shortly)"
    )]
    UnknownKey(String),
    /// The signature, audience, expiry or algorithm is wrong.
    #[error("the token is not valid here: {0}")]
    Invalid(String),
    /// No claim names a group.
    #[error("the token's `{0}` claim names no group of this gateway")]
    NoGroup(String),
    /// No claim names the subject: the workload could not be told from
    /// the others of its group.
    #[error("the token has no `{0}` claim: a token must name its subject (the workload or user it stands for)")]
    NoSubject(String),
}

/// One trusted issuer and its published keys.
struct Issuer {
    config: JwtIssuer,
    keys: ArcSwap<JwkSet>,
    /// When its keys were last asked for (Unix ms).
    asked_ms: AtomicU64,
    /// Wakes its refresher early (a key id not seen yet).
    wanted: tokio::sync::Notify,
}

/// The trusted issuers (`auth.jwt`) and the tokens seen verified.
pub struct Issuers {
    list: Vec<Issuer>,
    /// By a hash of the token, with the token itself: a hit is the same
    /// token, compared whole, never a hash that happened to match.
    verified: Mutex<lru::LruCache<u64, (Box<str>, Verified), foldhash::fast::RandomState>>,
    hasher: foldhash::quality::RandomState,
    client: HookClient,
}

impl std::fmt::Debug for Issuers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.list.iter().map(|i| &i.config.name)).finish()
    }
}

/// Whether `token` has a JWT's shape (three base64url parts, a JSON header).
pub fn looks_like_jwt(token: &str) -> bool {
    token.starts_with("eyJ") && token.bytes().filter(|b| *b == b'.').count() == 2
}

/// The `iss` of a token, read before its signature is checked (only to
/// choose whose keys check it).
fn issuer_of(token: &str) -> Result<String, JwtRefusal> {
    let payload = token.split('.').nth(1).ok_or_else(|| JwtRefusal::Malformed("no payload".into()))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| JwtRefusal::Malformed("the payload is not base64url".into()))?;
    #[derive(serde::Deserialize)]
    struct Iss {
        iss: Option<String>,
    }
    let claims: Iss =
        serde_json::from_slice(&bytes).map_err(|_| JwtRefusal::Malformed("the payload is not a JSON object".into()))?;
    claims.iss.ok_or_else(|| JwtRefusal::Invalid("no `iss` claim".into()))
}

/// The audiences (`aud`: one string or a list) a token names, read
/// without checking its signature: only for a token [`Issuers::verify`]
/// has just accepted, where a resource asks whether the token was minted
/// for it (RFC 8707) beyond the gateway's own audiences. Empty when the
/// token cannot be read.
pub fn audiences(token: &str) -> Vec<String> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Aud {
        One(String),
        Many(Vec<String>),
    }
    #[derive(serde::Deserialize)]
    struct Claims {
        aud: Option<Aud>,
    }
    let Some(payload) = token.split('.').nth(1) else { return Vec::new() };
    let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')) else {
        return Vec::new();
    };
    match serde_json::from_slice::<Claims>(&bytes).ok().and_then(|claims| claims.aud) {
        Some(Aud::One(aud)) => vec![aud],
        Some(Aud::Many(auds)) => auds,
        None => Vec::new(),
    }
}

/// The algorithms a caller's token may use: asymmetric only (a shared
/// secret would let anyone holding the JWKS mint tokens).
const ALLOWED: [Algorithm; 8] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
];

/// Whether a token signed with `alg` may be checked at all.
pub(crate) fn accepted(alg: Algorithm) -> bool {
    ALLOWED.contains(&alg)
}

/// The published key that signed a token naming `kid`: without a key id,
/// the issuer must publish exactly one key.
pub(crate) fn signing_key<'a>(keys: &'a JwkSet, kid: Option<&str>) -> Option<&'a jsonwebtoken::jwk::Jwk> {
    match kid {
        Some(kid) => keys.find(kid),
        None if keys.keys.len() == 1 => keys.keys.first(),
        None => None,
    }
}

impl Issuers {
    /// The issuers of `config` (`None` without any).
    pub fn new(config: &[JwtIssuer]) -> Option<Arc<Issuers>> {
        if config.is_empty() {
            return None;
        }
        let list = config
            .iter()
            .map(|issuer| Issuer {
                config: issuer.clone(),
                keys: ArcSwap::from_pointee(JwkSet { keys: Vec::new() }),
                asked_ms: AtomicU64::new(0),
                wanted: tokio::sync::Notify::new(),
            })
            .collect();
        let kept = NonZeroUsize::new(VERIFIED_KEPT).unwrap_or(NonZeroUsize::MIN);
        Some(Arc::new(Issuers {
            list,
            verified: Mutex::new(lru::LruCache::with_hasher(kept, foldhash::fast::RandomState::default())),
            hasher: foldhash::quality::RandomState::default(),
            client: HookClient::new(),
        }))
    }

    /// The configured issuers, in order.
    pub fn configs(&self) -> impl Iterator<Item = &JwtIssuer> {
        self.list.iter().map(|issuer| &issuer.config)
    }

    /// Checks `token` at `now` (Unix seconds): who it vouches for.
    pub fn verify(&self, token: &str, now: u64) -> Result<Verified, JwtRefusal> {
        let digest = std::hash::BuildHasher::hash_one(&self.hasher, token);
        {
            let mut seen = self.verified.lock().unwrap_or_else(PoisonError::into_inner);
            match seen.get(&digest) {
                Some((seen_token, verified)) if **seen_token == *token && verified.expires > now => {
                    return Ok(verified.clone())
                }
                Some(_) => {
                    seen.pop(&digest);
                }
                None => {}
            }
        }
        let verified = self.check(token, now)?;
        self.verified.lock().unwrap_or_else(PoisonError::into_inner).put(digest, (Box::from(token), verified.clone()));
        Ok(verified)
    }

    fn check(&self, token: &str, now: u64) -> Result<Verified, JwtRefusal> {
        let header = jsonwebtoken::decode_header(token).map_err(|err| JwtRefusal::Malformed(err.to_string()))?;
        if !accepted(header.alg) {
            return Err(JwtRefusal::Invalid(format!("algorithm {:?} is not accepted", header.alg)));
        }
        let iss = issuer_of(token)?;
        let (index, issuer) = self
            .list
            .iter()
            .enumerate()
            .find(|(_, issuer)| issuer.config.issuer == iss)
            .ok_or(JwtRefusal::UnknownIssuer(iss))?;
        let keys = issuer.keys.load();
        let Some(jwk) = signing_key(&keys, header.kid.as_deref()) else {
            issuer.wanted.notify_one();
            return Err(JwtRefusal::UnknownKey(header.kid.unwrap_or_default()));
        };
        let key = DecodingKey::from_jwk(jwk).map_err(|err| JwtRefusal::Invalid(format!("its key: {err}")))?;
        let mut rules = Validation::new(header.alg);
        rules.set_issuer(&[&issuer.config.issuer]);
        rules.set_audience(&issuer.config.audience);
        rules.leeway = issuer.config.leeway.as_secs();
        rules.validate_nbf = true;
        rules.set_required_spec_claims(&["exp", "iss", "aud"]);
        let claims = jsonwebtoken::decode::<serde_json::Value>(token, &key, &rules)
            .map_err(|err| JwtRefusal::Invalid(err.to_string()))?
            .claims;
        let expires = claims["exp"].as_u64().unwrap_or(now);
        let groups = groups_of(&issuer.config, &claims);
        if groups.is_empty() {
            return Err(JwtRefusal::NoGroup(issuer.config.group_claim.clone()));
        }
        let subject = claims[&issuer.config.subject_claim]
            .as_str()
            .filter(|subject| !subject.trim().is_empty())
            .map(Arc::from)
            .ok_or_else(|| JwtRefusal::NoSubject(issuer.config.subject_claim.clone()))?;
        Ok(Verified { issuer: index, groups, subject, expires })
    }

    /// Fetches issuer `index`'s keys now.
    pub async fn refresh(&self, index: usize) -> Result<usize, String> {
        let Some(issuer) = self.list.get(index) else { return Ok(0) };
        issuer.asked_ms.store(crate::governance::now_ms(), Ordering::Relaxed);
        let body = self.client.get(&issuer.config.jwks_url, FETCH_TIMEOUT).await.map_err(|err| err.to_string())?;
        let keys: JwkSet = serde_json::from_slice(&body).map_err(|err| format!("not a JWKS document: {err}"))?;
        let count = keys.keys.len();
        issuer.keys.store(Arc::new(keys));
        Ok(count)
    }

    /// Keeps every issuer's keys fresh for as long as `issuers` lives:
    /// fetched now, every ten minutes, and when a token names a key not
    /// seen (at most every 5 s).
    pub fn spawn_refreshers(issuers: &Arc<Issuers>) {
        for index in 0..issuers.list.len() {
            let weak = Arc::downgrade(issuers);
            switchyard_tasks::service("jwks refresh", async move {
                loop {
                    let Some(issuers) = weak.upgrade() else { return };
                    let name = issuers.list[index].config.name.clone();
                    match issuers.refresh(index).await {
                        Ok(count) => tracing::debug!(issuer = %name, keys = count, "JWKS fetched"),
                        Err(err) => {
                            tracing::warn!(issuer = %name, error = %err, "JWKS could not be fetched; the keys held stay")
                        }
                    }
                    let asked = issuers.list[index].asked_ms.load(Ordering::Relaxed);
                    let wait = async {
                        issuers.list[index].wanted.notified().await;
                        // A burst of unknown key ids fetches once.
                        let since = crate::governance::now_ms().saturating_sub(asked);
                        tokio::time::sleep(Duration::from_millis(REFETCH_AFTER_MS.saturating_sub(since))).await;
                    };
                    let _ = tokio::time::timeout(REFRESH_EVERY, wait).await;
                }
            });
        }
    }
}

/// The groups `claims` name under `issuer`'s `group_claim` (a string or a
/// list of them), each through `groups` when the issuer maps them.
fn groups_of(issuer: &JwtIssuer, claims: &serde_json::Value) -> Vec<String> {
    let named = |value: &str| match &issuer.groups {
        Some(map) => map.get(value).cloned(),
        None => Some(value.to_owned()),
    };
    match &claims[&issuer.group_claim] {
        serde_json::Value::String(value) => named(value).into_iter().collect(),
        serde_json::Value::Array(values) => {
            values.iter().filter_map(serde_json::Value::as_str).filter_map(named).collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issuer(groups: Option<&[(&str, &str)]>) -> JwtIssuer {
        JwtIssuer {
            name: "corp".into(),
            issuer: "https://idp.example".into(),
            jwks_url: "https://idp.example/jwks".into(),
            audience: vec!["switchyard".into()],
            group_claim: "team".into(),
            groups: groups.map(|g| g.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()),
            subject_claim: "sub".into(),
            leeway: Duration::from_secs(60),
            pools: None,
            mcp: Vec::new(),
            passthrough: Vec::new(),
        }
    }

    #[test]
    fn a_claim_names_its_groups_directly_or_through_the_map() {
        let claims = serde_json::json!({"team": "research", "roles": ["a"]});
        assert_eq!(groups_of(&issuer(None), &claims), ["research"]);
        let mapped = issuer(Some(&[("research", "ml-platform")]));
        assert_eq!(groups_of(&mapped, &claims), ["ml-platform"]);
        // A list: every value, in order (through the map when set).
        let listed = serde_json::json!({"team": ["sales", "research"]});
        assert_eq!(groups_of(&issuer(None), &listed), ["sales", "research"]);
        assert_eq!(groups_of(&mapped, &listed), ["ml-platform"]);
        assert!(groups_of(&mapped, &serde_json::json!({"team": "sales"})).is_empty());
        assert!(groups_of(&issuer(None), &serde_json::json!({"team": 7})).is_empty());
        assert!(groups_of(&issuer(None), &serde_json::json!({})).is_empty());
    }

    #[test]
    fn only_a_jwt_is_read_as_one() {
        assert!(looks_like_jwt("eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0.c2ln"));
        assert!(!looks_like_jwt("sy-0123456789abcdef"));
        assert!(!looks_like_jwt("eyJhbGciOiJSUzI1NiJ9.only-two"));
        assert_eq!(issuer_of("eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0.c2ln"), Ok("x".into()));
        assert!(matches!(issuer_of("eyJhbGciOiJSUzI1NiJ9.!!!.c2ln"), Err(JwtRefusal::Malformed(_))));
    }
}
