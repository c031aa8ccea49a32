//! Credentials a lane fetches instead of holding: OAuth 2.0 client
//! credentials (RFC 6749 §4.4; Entra ID for Azure OpenAI) and a Google
//! service account's signed assertion exchanged for an access token
//! (RFC 7523; Vertex AI). A token is kept until shortly before it expires
//! and fetched by one request at a time (the others wait for that fetch
//! and use its token); the exchange goes through the SSRF-guarded operator
//! client. The arithmetic of when to fetch again takes the time as an
//! argument and is tested without a clock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::HeaderValue;
use http_body_util::Full;
use serde::Deserialize;
use switchyard_config::EgressAuth;

use crate::hooks::{HookClient, HookError};

/// How long a token exchange may take.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest lifetime believed (a day), whatever the endpoint says.
const MAX_LIFETIME: u64 = 86_400;

/// The lifetime asked for a service account's assertion (Google's most).
const ASSERTION_LIFETIME: u64 = 3_600;

/// Why no token could be had. Its text reaches the data plane's caller
/// (in the answer of a request whose lane could not be authenticated), so
/// it names what went wrong and never the endpoint: a token URL's query
/// may carry a tenant or a signature. The operator's log has the host and
/// the detail ([`TokenSource::bearer`] logs them).
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token endpoint could not be reached, or refused.
    #[error("the provider's token endpoint {0}")]
    Exchange(Failure),
    /// Its answer holds no usable token.
    #[error("the provider's token endpoint answered without a usable token")]
    Answer,
    /// The assertion could not be signed.
    #[error("the service account's assertion could not be signed")]
    Sign,
}

/// How a token exchange failed, as the caller may be told it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// No answer in time.
    #[error("did not answer in time")]
    Timeout,
    /// Not reached (connect, resolve, the connection lost).
    #[error("could not be reached")]
    Unreachable,
    /// A non-2xx answer.
    #[error("answered {0}")]
    Status(u16),
    /// An answer past the size a token answer may have.
    #[error("answered with too much")]
    TooLarge,
}

impl From<&HookError> for Failure {
    fn from(err: &HookError) -> Failure {
        match err {
            HookError::Timeout(_) => Failure::Timeout,
            HookError::Transport(_) => Failure::Unreachable,
            HookError::Status(status) => Failure::Status(*status),
            HookError::TooLarge => Failure::TooLarge,
        }
    }
}

/// The host of `url` (what the operator's log names; never its path or
/// query).
fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    authority.rsplit_once('@').map_or(authority, |(_, host)| host)
}

/// A token endpoint's answer (RFC 6749 §5.1).
#[derive(Deserialize)]
struct Answer {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

/// A token and when to fetch the next one (Unix seconds).
#[derive(Clone)]
struct Held {
    bearer: HeaderValue,
    refresh_at: u64,
}

/// When a token that lives `lifetime` seconds from `now` should be
/// replaced: a tenth of its life early, at least 30 s and at most 5 min
/// (a token too short to keep is used once).
pub fn refresh_at(now: u64, lifetime: u64) -> u64 {
    let lifetime = lifetime.min(MAX_LIFETIME);
    let margin = (lifetime / 10).clamp(30, 300);
    now + lifetime.saturating_sub(margin)
}

/// A lane's fetched credential.
pub struct TokenSource {
    auth: EgressAuth,
    client: HookClient,
    held: tokio::sync::Mutex<Option<Held>>,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSource").field("token_url", &self.auth.token_url()).finish_non_exhaustive()
    }
}

impl TokenSource {
    /// A source for `auth`, nothing fetched yet.
    pub fn new(auth: EgressAuth) -> TokenSource {
        TokenSource { auth, client: HookClient::new(), held: tokio::sync::Mutex::new(None) }
    }

    /// The credential it fetches with.
    pub fn auth(&self) -> &EgressAuth {
        &self.auth
    }

    /// The `Authorization` value to send now: the held token while it is
    /// fresh, else a new one (one fetch at a time; waiters share it).
    pub async fn bearer(&self) -> Result<HeaderValue, TokenError> {
        let mut held = self.held.lock().await;
        let now = unix_now();
        if let Some(token) = held.as_ref().filter(|token| now < token.refresh_at) {
            return Ok(token.bearer.clone());
        }
        let fresh = self.fetch(now).await?;
        let bearer = fresh.bearer.clone();
        *held = Some(fresh);
        Ok(bearer)
    }

    async fn fetch(&self, now: u64) -> Result<Held, TokenError> {
        let url = self.auth.token_url();
        let failed = |detail: &dyn std::fmt::Display| {
            tracing::warn!(token_host = %host_of(url), error = %detail, "egress token fetch failed");
        };
        let form = match &self.auth {
            EgressAuth::ClientCredentials { client_id, client_secret, scope, .. } => {
                let mut form = form_urlencoded::Serializer::new(String::new());
                form.append_pair("grant_type", "client_credentials")
                    .append_pair("client_id", client_id)
                    .append_pair("client_secret", client_secret);
                if let Some(scope) = scope {
                    form.append_pair("scope", scope);
                }
                form.finish()
            }
            EgressAuth::ServiceAccount(account) => {
                let assertion = assertion(account, now).inspect_err(|err| failed(err))?;
                form_urlencoded::Serializer::new(String::new())
                    .append_pair("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer")
                    .append_pair("assertion", &assertion)
                    .finish()
            }
        };
        let body = Full::new(Bytes::from(form));
        let answer = self.client.post(url, "application/x-www-form-urlencoded", body, EXCHANGE_TIMEOUT).await.map_err(
            |err| {
                failed(&err);
                TokenError::Exchange(Failure::from(&err))
            },
        )?;
        let answer: Answer = serde_json::from_slice(&answer).map_err(|err| {
            failed(&format!("not a token answer: {err}"));
            TokenError::Answer
        })?;
        let mut bearer = HeaderValue::try_from(format!("Bearer {}", answer.access_token)).map_err(|_| {
            failed(&"the token is not a header value");
            TokenError::Answer
        })?;
        bearer.set_sensitive(true);
        let lifetime = answer.expires_in.unwrap_or(ASSERTION_LIFETIME);
        tracing::debug!(token_host = %host_of(url), lifetime, "egress token fetched");
        Ok(Held { bearer, refresh_at: refresh_at(now, lifetime) })
    }
}

/// Why an assertion could not be signed (the operator's log only).
#[derive(Debug, thiserror::Error)]
#[error("signing the service account's assertion: {0}")]
struct SignError(String);

impl From<SignError> for TokenError {
    fn from(_: SignError) -> TokenError {
        TokenError::Sign
    }
}

/// The signed JWT a service account presents (RFC 7523 §2.1).
fn assertion(account: &switchyard_config::ServiceAccount, now: u64) -> Result<String, SignError> {
    #[derive(serde::Serialize)]
    struct Claims<'a> {
        iss: &'a str,
        scope: &'a str,
        aud: &'a str,
        iat: u64,
        exp: u64,
    }
    let claims = Claims {
        iss: &account.client_email,
        scope: &account.scope,
        aud: &account.token_uri,
        iat: now,
        exp: now + ASSERTION_LIFETIME,
    };
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = account.private_key_id.clone();
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(account.private_key.as_bytes())
        .map_err(|err| SignError(err.to_string()))?;
    jsonwebtoken::encode(&header, &claims, &key).map_err(|err| SignError(err.to_string()))
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_replaced_a_tenth_of_its_life_early_within_bounds() {
        // An hour: five minutes early.
        assert_eq!(refresh_at(1_000, 3_600), 1_000 + 3_300);
        // Ten minutes: a minute early.
        assert_eq!(refresh_at(1_000, 600), 1_000 + 540);
        // Two minutes: at least 30 s early.
        assert_eq!(refresh_at(1_000, 120), 1_000 + 90);
        // Too short to keep: fetched again next time.
        assert_eq!(refresh_at(1_000, 20), 1_000);
        // A year is believed as a day.
        assert_eq!(refresh_at(0, 365 * 86_400), 86_400 - 300);
    }

    #[test]
    fn a_failure_names_no_part_of_the_url_and_the_log_only_its_host() {
        for failure in [Failure::Timeout, Failure::Unreachable, Failure::Status(401), Failure::TooLarge] {
            let text = TokenError::Exchange(failure).to_string();
            assert!(!text.contains("http") && !text.contains('?'), "{text}");
        }
        assert_eq!(host_of("https://login.example/tenant/oauth2/token?sig=x"), "login.example");
        assert_eq!(host_of("http://user:pw@10.0.0.5:8443?sig=x"), "10.0.0.5:8443");
    }
}
