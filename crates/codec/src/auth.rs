//! Upstream authentication, in one place: the credentials config parses a
//! provider's keys into ([`Credentials`]), what a scheme may sign
//! ([`Outbound`]), and the header writers the codecs share. A codec's
//! `auth_headers` picks its scheme; AWS SigV4 lives with the Bedrock codec
//! because only Bedrock signs that way.
//!
//! To add a scheme: add a [`Credentials`] variant here; the compiler then
//! names every place that must say what it does with it (the writers below,
//! the Bedrock signer, the redacting `Debug`), and config's
//! `validate_provider` is where a provider's keys are parsed into it.

use std::time::SystemTime;

use http::{HeaderName, HeaderValue};
use switchyard_ir::Protocol;

/// The credentials a lane signs upstream calls with.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// No auth (mock and local backends).
    None,
    /// A static API key.
    ApiKey(String),
    /// AWS keys for SigV4.
    Aws {
        /// Access key id.
        access_key_id: String,
        /// Secret access key.
        secret_access_key: String,
        /// Session token for temporary credentials.
        session_token: Option<String>,
        /// Signing region.
        region: String,
    },
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Secrets never reach logs, even through Debug.
        match self {
            Credentials::None => f.write_str("None"),
            Credentials::ApiKey(_) => f.write_str("ApiKey(<redacted>)"),
            Credentials::Aws { region, .. } => write!(f, "Aws {{ region: {region:?}, .. }}"),
        }
    }
}

/// What an auth scheme may look at to sign an outbound call.
#[derive(Debug, Clone, Copy)]
pub struct Outbound<'a> {
    /// HTTP method.
    pub method: &'a str,
    /// Full URL.
    pub url: &'a str,
    /// The request body.
    pub body: &'a [u8],
    /// Signing time (passed in: codecs read no clock).
    pub time: SystemTime,
}

/// Why auth headers could not be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The credential kind does not fit the protocol.
    #[error("{protocol} lanes need {needed}")]
    WrongCredentials {
        /// The lane's protocol.
        protocol: Protocol,
        /// What it needs.
        needed: &'static str,
    },
    /// Signing failed.
    #[error("signing failed: {0}")]
    Signing(String),
    /// A key held bytes that cannot go in a header.
    #[error("credential is not a valid header value")]
    BadHeader,
}

/// The `Authorization: Bearer` header, shared by the OpenAI-style protocols.
pub fn bearer_header(
    protocol: Protocol,
    credentials: &Credentials,
) -> Result<Vec<(HeaderName, HeaderValue)>, AuthError> {
    match credentials {
        Credentials::None => Ok(Vec::new()),
        Credentials::ApiKey(key) => {
            let mut value = HeaderValue::try_from(format!("Bearer {key}")).map_err(|_| AuthError::BadHeader)?;
            value.set_sensitive(true);
            Ok(vec![(http::header::AUTHORIZATION, value)])
        }
        Credentials::Aws { .. } => Err(AuthError::WrongCredentials { protocol, needed: "an api_key" }),
    }
}

/// A single header carrying the key (`x-api-key`, `x-goog-api-key`).
pub fn key_header(
    protocol: Protocol,
    name: &'static str,
    credentials: &Credentials,
) -> Result<Vec<(HeaderName, HeaderValue)>, AuthError> {
    match credentials {
        Credentials::None => Ok(Vec::new()),
        Credentials::ApiKey(key) => {
            let mut value = HeaderValue::try_from(key.as_str()).map_err(|_| AuthError::BadHeader)?;
            value.set_sensitive(true);
            Ok(vec![(HeaderName::from_static(name), value)])
        }
        Credentials::Aws { .. } => Err(AuthError::WrongCredentials { protocol, needed: "an api_key" }),
    }
}
