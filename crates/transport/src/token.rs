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

/// Why no token could be had.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token endpoint could not be reached or refused.
    #[error("token endpoint {url}: {source}")]
    Exchange {
        /// The endpoint.
        url: String,
        /// What went wrong.
        source: HookError,
    },
    /// Its answer holds no usable token.
    #[error("token endpoint {url}: {message}")]
    Answer {
        /// The endpoint.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// The assertion could not be signed.
    #[error("signing the service account's assertion: {0}")]
    Sign(String),
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
        let url = self.auth.token_url().to_owned();
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
                let assertion = assertion(account, now)?;
                form_urlencoded::Serializer::new(String::new())
                    .append_pair("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer")
                    .append_pair("assertion", &assertion)
                    .finish()
            }
        };
        let body = Full::new(Bytes::from(form));
        let answer = self
            .client
            .post(&url, "application/x-www-form-urlencoded", body, EXCHANGE_TIMEOUT)
            .await
            .map_err(|source| TokenError::Exchange { url: url.clone(), source })?;
        let answer: Answer = serde_json::from_slice(&answer)
            .map_err(|err| TokenError::Answer { url: url.clone(), message: format!("not a token answer: {err}") })?;
        let mut bearer = HeaderValue::try_from(format!("Bearer {}", answer.access_token))
            .map_err(|_| TokenError::Answer { url: url.clone(), message: "the token is not a header value".into() })?;
        bearer.set_sensitive(true);
        let lifetime = answer.expires_in.unwrap_or(ASSERTION_LIFETIME);
        tracing::debug!(token_url = %url, lifetime, "egress token fetched");
        Ok(Held { bearer, refresh_at: refresh_at(now, lifetime) })
    }
}

/// The signed JWT a service account presents (RFC 7523 §2.1).
fn assertion(account: &switchyard_config::ServiceAccount, now: u64) -> Result<String, TokenError> {
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
        .map_err(|err| TokenError::Sign(err.to_string()))?;
    jsonwebtoken::encode(&header, &claims, &key).map_err(|err| TokenError::Sign(err.to_string()))
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
}
