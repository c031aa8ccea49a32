//! Console sign-in through an OpenID Connect provider (`admin.oidc`): the
//! authorization code flow with PKCE (RFC 7636). A sign-in starts with a
//! random `state`, `nonce` and code verifier kept here (single use, ten
//! minutes, bounded), bound to the browser that started it (a random value
//! in a cookie of its own, kept here as a hash: an answer carried to
//! another browser, a login CSRF, is refused); the provider's answer is exchanged for an ID token at
//! its token endpoint, whose signature is checked against the provider's
//! published keys (discovered, and fetched again when a token names a key
//! not seen), whose issuer, audience, expiry and nonce must hold, and whose
//! claims grant a role through the configured bindings. Time is an argument
//! where it decides.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use base64::Engine;
use jsonwebtoken::jwk::JwkSet;
use switchyard_config::{Oidc, Scope};
use switchyard_transport::hooks::HookClient;

/// How long a started sign-in may take.
pub const PENDING_FOR: Duration = Duration::from_secs(600);
/// Sign-ins in progress kept at most (the oldest goes first).
const MAX_PENDING: usize = 1024;
/// How long the discovery document is kept.
const DISCOVERY_FOR: Duration = Duration::from_secs(3600);
/// Clock skew allowed on the ID token.
const LEEWAY: u64 = 60;
/// An exchange's deadline.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a sign-in fails.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// The provider could not be reached, or answered with an error.
    #[error("the identity provider: {0}")]
    Provider(String),
    /// The browser came back with a state this gateway did not start (or
    /// one that expired, or was used).
    #[error("this sign-in was not started here, expired or was already used; start again")]
    UnknownState,
    /// The answer came back to a browser other than the one that started
    /// the sign-in (its binding cookie is missing or another's).
    #[error("this sign-in was started in another browser; start again here")]
    OtherBrowser,
    /// The ID token does not hold.
    #[error("the ID token is not valid: {0}")]
    Token(String),
    /// The account has no role here.
    #[error("`{0}` has no role on this console (no role binding matches)")]
    NoRole(String),
    /// The OS random source failed.
    #[error("the OS random source failed")]
    Random,
}

/// What the provider publishes about itself (OpenID Connect Discovery 1.0).
#[derive(Debug, Clone, serde::Deserialize)]
struct Discovery {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
}

/// A sign-in in progress.
#[derive(Debug)]
struct Pending {
    nonce: String,
    verifier: String,
    started: Instant,
    /// The hash of the binding cookie of the browser that started it.
    browser: switchyard_governance::KeyHash,
}

/// Who signed in, and as what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    /// The name shown (the name claim, else `sub`).
    pub name: String,
    /// The provider's stable id for the account (`sub`): what a member's
    /// own keys hang on (a name claim such as an email may change hands).
    pub subject: String,
    /// The role granted.
    pub scope: Scope,
    /// The ID token's claims, which the role is read from again on every
    /// request of the session.
    pub claims: serde_json::Value,
}

/// The console's OpenID Connect client.
pub struct OidcClient {
    config: Oidc,
    client: HookClient,
    discovery: ArcSwapOption<(Discovery, Instant)>,
    keys: ArcSwapOption<JwkSet>,
    pending: Mutex<HashMap<String, Pending>>,
}

impl std::fmt::Debug for OidcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcClient").field("issuer", &self.config.issuer).finish_non_exhaustive()
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The S256 code challenge of `verifier` (RFC 7636 §4.2).
pub fn challenge(verifier: &str) -> String {
    b64(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref())
}

fn random_text() -> Result<String, OidcError> {
    crate::sign_ins::random::<32>().map(|bytes| b64(&bytes)).ok_or(OidcError::Random)
}

impl OidcClient {
    /// A client for `config`.
    pub fn new(config: Oidc) -> OidcClient {
        OidcClient {
            config,
            client: HookClient::new(),
            discovery: ArcSwapOption::empty(),
            keys: ArcSwapOption::empty(),
            pending: Mutex::new(HashMap::new()),
        }
    }

    /// Its settings.
    pub fn config(&self) -> &Oidc {
        &self.config
    }

    /// What the sessions it opens remember as their source: pointing
    /// `admin.oidc` elsewhere (or removing it) ends them.
    pub fn federation(&self) -> switchyard_governance::KeyHash {
        switchyard_governance::KeyHash::of(&format!("oidc:{}:{}", self.config.issuer, self.config.client_id))
    }

    async fn discovery(&self) -> Result<Discovery, OidcError> {
        if let Some(held) = self.discovery.load_full() {
            if held.1.elapsed() < DISCOVERY_FOR {
                return Ok(held.0.clone());
            }
        }
        let url = format!("{}/.well-known/openid-configuration", self.config.issuer.trim_end_matches('/'));
        let body = self
            .client
            .get(&url, EXCHANGE_TIMEOUT)
            .await
            .map_err(|err| OidcError::Provider(format!("{url}: {err}")))?;
        let found: Discovery = serde_json::from_slice(&body)
            .map_err(|err| OidcError::Provider(format!("{url}: not a discovery document: {err}")))?;
        if found.issuer.trim_end_matches('/') != self.config.issuer.trim_end_matches('/') {
            return Err(OidcError::Provider(format!("{url} names issuer `{}`", found.issuer)));
        }
        for endpoint in [&found.authorization_endpoint, &found.token_endpoint, &found.jwks_uri] {
            switchyard_config::check_outbound_url(endpoint).map_err(OidcError::Provider)?;
        }
        self.discovery.store(Some(Arc::new((found.clone(), Instant::now()))));
        Ok(found)
    }

    /// Starts a sign-in at `now` for the browser holding `browser` (the
    /// value of its binding cookie): the provider's authorization URL to
    /// send the browser to.
    pub async fn start(&self, browser: &str, now: Instant) -> Result<String, OidcError> {
        let discovery = self.discovery().await?;
        let (state, nonce, verifier) = (random_text()?, random_text()?, random_text()?);
        let mut url = form_urlencoded::Serializer::new(String::new());
        let scopes: Vec<&str> = std::iter::once("openid")
            .chain(self.config.scopes.iter().map(String::as_str).filter(|s| *s != "openid"))
            .collect();
        url.append_pair("response_type", "code")
            .append_pair("client_id", &self.config.client_id)
            .append_pair("redirect_uri", &self.config.redirect_url)
            .append_pair("scope", &scopes.join(" "))
            .append_pair("state", &state)
            .append_pair("nonce", &nonce)
            .append_pair("code_challenge", &challenge(&verifier))
            .append_pair("code_challenge_method", "S256");
        let location = format!(
            "{}{}{}",
            discovery.authorization_endpoint,
            separator(&discovery.authorization_endpoint),
            url.finish()
        );
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.retain(|_, p| now.saturating_duration_since(p.started) < PENDING_FOR);
        if pending.len() >= MAX_PENDING {
            if let Some(oldest) = pending.iter().min_by_key(|(_, p)| p.started).map(|(k, _)| k.clone()) {
                pending.remove(&oldest);
            }
        }
        let browser = switchyard_governance::KeyHash::of(browser);
        pending.insert(state, Pending { nonce, verifier, started: now, browser });
        Ok(location)
    }

    /// Finishes the sign-in `state` with the provider's `code`, at `now`,
    /// in the browser holding `browser` (its binding cookie's value, when
    /// it sent one): only the browser that started a sign-in finishes it.
    pub async fn finish(
        &self,
        state: &str,
        code: &str,
        browser: Option<&str>,
        now: Instant,
    ) -> Result<Signed, OidcError> {
        let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(state);
        let pending = pending
            .filter(|p| now.saturating_duration_since(p.started) < PENDING_FOR)
            .ok_or(OidcError::UnknownState)?;
        if !browser.is_some_and(|browser| pending.browser.matches(&switchyard_governance::KeyHash::of(browser))) {
            return Err(OidcError::OtherBrowser);
        }
        let discovery = self.discovery().await?;
        // Built before any await: the serializer is not Send.
        let form = {
            let mut form = form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "authorization_code")
                .append_pair("code", code)
                .append_pair("redirect_uri", &self.config.redirect_url)
                .append_pair("client_id", &self.config.client_id)
                .append_pair("code_verifier", &pending.verifier);
            if let Some(secret) = &self.config.client_secret {
                form.append_pair("client_secret", secret);
            }
            form.finish()
        };
        let answer = self
            .client
            .post(
                &discovery.token_endpoint,
                "application/x-www-form-urlencoded",
                http_body_util::Full::new(bytes::Bytes::from(form)),
                EXCHANGE_TIMEOUT,
            )
            .await
            .map_err(|err| OidcError::Provider(format!("token endpoint: {err}")))?;
        #[derive(serde::Deserialize)]
        struct Tokens {
            id_token: String,
        }
        let tokens: Tokens = serde_json::from_slice(&answer)
            .map_err(|err| OidcError::Provider(format!("token endpoint: no ID token: {err}")))?;
        let claims = self.verify(&discovery, &tokens.id_token).await?;
        if claims["nonce"].as_str() != Some(pending.nonce.as_str()) {
            return Err(OidcError::Token("its nonce is not this sign-in's".into()));
        }
        let subject = claims["sub"]
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| OidcError::Token("no `sub` claim".into()))?;
        let name = claims[&self.config.name_claim].as_str().unwrap_or(subject).to_owned();
        let scope = self.config.role_of(&claims).ok_or_else(|| OidcError::NoRole(name.clone()))?;
        let subject = subject.to_owned();
        Ok(Signed { name, subject, scope, claims })
    }

    async fn verify(&self, discovery: &Discovery, token: &str) -> Result<serde_json::Value, OidcError> {
        let header = jsonwebtoken::decode_header(token).map_err(|err| OidcError::Token(err.to_string()))?;
        if !crate::governance::jwt::accepted(header.alg) {
            return Err(OidcError::Token(format!("algorithm {:?} is not accepted (asymmetric only)", header.alg)));
        }
        let find = |keys: &JwkSet| crate::governance::jwt::signing_key(keys, header.kid.as_deref()).cloned();
        let held = self.keys.load_full();
        let jwk = match held.as_deref().and_then(find) {
            Some(jwk) => jwk,
            None => {
                // Not seen yet: the provider may have rotated its keys.
                let body = self
                    .client
                    .get(&discovery.jwks_uri, EXCHANGE_TIMEOUT)
                    .await
                    .map_err(|err| OidcError::Provider(format!("JWKS: {err}")))?;
                let keys: JwkSet =
                    serde_json::from_slice(&body).map_err(|err| OidcError::Provider(format!("JWKS: {err}")))?;
                let jwk = find(&keys);
                self.keys.store(Some(Arc::new(keys)));
                jwk.ok_or_else(|| {
                    OidcError::Token(format!(
                        "signed with key `{}`, which the provider does not publish",
                        header.kid.clone().unwrap_or_default()
                    ))
                })?
            }
        };
        let key = jsonwebtoken::DecodingKey::from_jwk(&jwk).map_err(|err| OidcError::Token(err.to_string()))?;
        let mut rules = jsonwebtoken::Validation::new(header.alg);
        rules.set_issuer(&[discovery.issuer.as_str()]);
        rules.set_audience(&[self.config.client_id.as_str()]);
        rules.leeway = LEEWAY;
        rules.validate_nbf = true;
        jsonwebtoken::decode::<serde_json::Value>(token, &key, &rules)
            .map(|data| data.claims)
            .map_err(|err| OidcError::Token(err.to_string()))
    }
}

fn separator(url: &str) -> char {
    if url.contains('?') {
        '&'
    } else {
        '?'
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_code_challenge_is_rfc_7636s() {
        // RFC 7636, appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    fn settings(roles: Vec<switchyard_config::RoleBinding>) -> Oidc {
        Oidc {
            issuer: "https://idp.example".into(),
            client_id: "c".into(),
            client_secret: None,
            redirect_url: "https://gw.example/ui/oidc/callback".into(),
            scopes: Vec::new(),
            name_claim: "email".into(),
            roles,
            max_role: Scope::Full,
            members: None,
        }
    }

    #[test]
    fn sign_ins_are_started_and_finished_from_any_task() {
        fn send<T: Send>(_: T) {}
        let client = OidcClient::new(settings(Vec::new()));
        send(client.start("b", Instant::now()));
        send(client.finish("s", "c", Some("b"), Instant::now()));
    }

    #[test]
    fn a_binding_grants_its_role_within_the_ceiling() {
        use switchyard_config::RoleBinding;
        let binding =
            |value: &str, role| RoleBinding { claim: "groups".into(), value: value.into(), role, tenancy: None };
        let mut oidc = settings(vec![binding("platform", Scope::Full), binding("sre", Scope::Read)]);
        let claims = |groups: serde_json::Value| serde_json::json!({"groups": groups});
        assert_eq!(oidc.role_of(&claims(serde_json::json!(["sre", "platform"]))), Some(Scope::Full));
        assert_eq!(oidc.role_of(&claims(serde_json::json!("sre"))), Some(Scope::Read));
        assert_eq!(oidc.role_of(&claims(serde_json::json!(["sales"]))), None);
        oidc.max_role = Scope::Read;
        assert_eq!(oidc.role_of(&claims(serde_json::json!(["platform"]))), Some(Scope::Read));
        // A ceiling never raises: a member stays a member.
        oidc.roles.push(binding("staff", Scope::Member));
        assert_eq!(oidc.role_of(&claims(serde_json::json!(["staff"]))), Some(Scope::Member));
    }
}
