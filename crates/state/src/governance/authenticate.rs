//! Who is calling: the credential a request presents (a virtual key from
//! whichever header its SDK uses, or a SigV4 signature by a minted AWS
//! pair), checked against the key cache, and every refusal counted by a
//! bounded reason.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use switchyard_config::AuthMode;
use switchyard_governance::key::{looks_like_key, KeyState};
use switchyard_governance::sigv4::{self, Inbound, SigV4Error};
use switchyard_governance::KeyHash;
use switchyard_ir::{ErrorInfo, ErrorKind, Protocol};

use super::{now_ms, CachedKey, Caller, Governance, KeyIndex};

/// Why governance turned a request away (a bounded label set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No key presented.
    MissingKey,
    /// A key nobody issued, or a bad signature.
    InvalidKey,
    /// Past its expiry.
    ExpiredKey,
    /// Revoked.
    RevokedKey,
    /// The key may not name the pool.
    PoolNotAllowed,
    /// A budget on the chain is spent.
    Budget,
    /// Requests or tokens per second or minute.
    Rate,
    /// A quota of requests, tokens or USD an hour, a day or a month.
    Quota,
    /// Requests in flight.
    Concurrency,
    /// Suspended for abuse.
    Suspended,
    /// The request's agent run is past a limit, looping or killed.
    Run,
}

impl Refused {
    /// Every reason, in counter order.
    pub const ALL: [Refused; 11] = [
        Refused::MissingKey,
        Refused::InvalidKey,
        Refused::ExpiredKey,
        Refused::RevokedKey,
        Refused::PoolNotAllowed,
        Refused::Budget,
        Refused::Rate,
        Refused::Quota,
        Refused::Concurrency,
        Refused::Suspended,
        Refused::Run,
    ];

    /// The label.
    pub fn as_str(self) -> &'static str {
        match self {
            Refused::MissingKey => "missing_key",
            Refused::InvalidKey => "invalid_key",
            Refused::ExpiredKey => "expired_key",
            Refused::RevokedKey => "revoked_key",
            Refused::PoolNotAllowed => "pool_not_allowed",
            Refused::Budget => "budget",
            Refused::Rate => "rate",
            Refused::Quota => "quota",
            Refused::Concurrency => "concurrency",
            Refused::Suspended => "suspended",
            Refused::Run => "run",
        }
    }

    pub(super) fn index(self) -> usize {
        Refused::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

/// What a request presents to authenticate.
pub struct Presented<'a> {
    /// The caller's protocol (for the hint in a refusal).
    pub protocol: Protocol,
    /// Its headers.
    pub headers: &'a http::HeaderMap,
    /// Its query string.
    pub query: Option<&'a str>,
    /// What a SigV4 check needs, when the request is signed.
    pub inbound: Option<Inbound<'a>>,
    /// The verified client certificate, when the listener names callers
    /// by it (`server.tls.client_identity`).
    pub client: Option<&'a crate::ClientName>,
}

enum Credential<'a> {
    None,
    Key(&'a str),
    SigV4,
}

impl Presented<'_> {
    /// The key or token the request presents (not a signature's), where
    /// authentication reads it.
    pub fn token(&self) -> Option<&str> {
        match self.credential() {
            Credential::Key(token) => Some(token),
            Credential::None | Credential::SigV4 => None,
        }
    }

    fn credential(&self) -> Credential<'_> {
        if let Some(value) = self.headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
            if value.starts_with("AWS4-HMAC-SHA256") {
                return Credential::SigV4;
            }
            if let Some(token) = value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")) {
                return Credential::Key(token.trim());
            }
        }
        for name in ["x-api-key", "x-goog-api-key"] {
            if let Some(value) = self.headers.get(name).and_then(|v| v.to_str().ok()) {
                return Credential::Key(value.trim());
            }
        }
        if let Some(query) = self.query {
            if let Some(key) = query.split('&').find_map(|pair| pair.strip_prefix("key=")) {
                return Credential::Key(key);
            }
        }
        Credential::None
    }
}

impl Governance {
    /// A SigV4 refusal, with the AWS error type as its code.
    fn sigv4_refusal(&self, err: &SigV4Error) -> ErrorInfo {
        let code = match err {
            SigV4Error::UnknownAccessKey => "UnrecognizedClientException",
            SigV4Error::Missing | SigV4Error::Malformed(_) => "IncompleteSignatureException",
            SigV4Error::Stale(_) | SigV4Error::BodyHash | SigV4Error::Signature => "InvalidSignatureException",
        };
        let mut info = ErrorInfo::new(ErrorKind::Authentication, err.to_string());
        info.code = Some(code.to_owned());
        self.refuse(Refused::InvalidKey, info)
    }

    /// A caller presenting an identity provider's token (`auth.jwt`):
    /// admitted as its issuer and group's in-memory key, its subject the
    /// end user and, with that key, the owner of what it keeps.
    fn authenticate_token(&self, index: &KeyIndex, token: &str) -> Result<Option<Caller>, ErrorInfo> {
        let Some(issuers) = &self.jwt else { return Ok(None) };
        let verified = issuers.verify(token, now_ms() / 1000).map_err(|refusal| {
            self.refuse(Refused::InvalidKey, ErrorInfo::new(ErrorKind::Authentication, refusal.to_string()))
        })?;
        let found = verified.groups.iter().find_map(|group| index.by_jwt.get(&(verified.issuer, group.clone())));
        let Some(key) = found else {
            let message =
                format!("the token names group `{}`, which this gateway does not have", verified.groups.join("`, `"));
            return Err(self.refuse(Refused::InvalidKey, ErrorInfo::new(ErrorKind::Authentication, message)));
        };
        let owner = super::owner::owner_id(&key.id, Some(&verified.subject));
        Ok(Some(Caller { key: key.clone(), subject: Some(verified.subject), owner }))
    }

    /// A caller named by its client certificate's common name: the key
    /// whose id it is (an id never changes and is never reused, where a
    /// name may be changed or shared), or the group's in-memory key
    /// (`cert:<group>`), shared by the group's certificates, each of which
    /// owns what it keeps by its whole subject.
    fn authenticate_certificate(
        &self,
        index: &KeyIndex,
        client: &crate::ClientName,
    ) -> Result<Option<Caller>, ErrorInfo> {
        let name = &*client.common_name;
        let found = match self.client_identity {
            Some(switchyard_config::ClientIdentity::Key) => index.by_id.get(name).cloned().map(Caller::of_key),
            Some(switchyard_config::ClientIdentity::Group) => index.by_cert.get(name).map(|key| Caller {
                owner: super::owner::owner_id(&key.id, Some(&client.subject)),
                key: key.clone(),
                subject: None,
            }),
            None => None,
        };
        let Some(caller) = found else {
            let message = format!("the client certificate's name `{name}` names no key (by its id) or group here");
            return Err(self.refuse(Refused::InvalidKey, ErrorInfo::new(ErrorKind::Authentication, message)));
        };
        match caller.key.record.state((now_ms() / 1000) as i64) {
            KeyState::Active => Ok(Some(caller)),
            _ => Err(self.refuse(
                Refused::RevokedKey,
                ErrorInfo::new(ErrorKind::Authentication, format!("the key `{name}` is not active")),
            )),
        }
    }

    /// The caller a request the gateway makes for a caller runs as (a
    /// batch line: [`crate::kept::Delegated`]), from its owner
    /// ([`super::owner`]): that key, while it is active, as that subject
    /// (a token's subject its end user again). A key revoked or expired
    /// since the batch was submitted stops its lines.
    pub fn delegated(&self, owner: &str) -> Result<Option<Caller>, ErrorInfo> {
        if self.mode == AuthMode::Open {
            return Ok(None);
        }
        let gone = || {
            let message = "the key that submitted this batch no longer exists";
            self.refuse(Refused::InvalidKey, ErrorInfo::new(ErrorKind::Authentication, message))
        };
        let (key_id, subject) = super::owner::parse(owner).ok_or_else(gone)?;
        let index = self.keys.load();
        let key = match &subject {
            None => index.by_id.get(key_id),
            Some(_) => index.in_memory.get(key_id),
        };
        let key = key.cloned().ok_or_else(gone)?;
        // A token's subject is its end user; a certificate's is not.
        let subject = subject.filter(|_| key.id.starts_with("jwt:")).map(Arc::from);
        let caller = Caller { owner: Arc::from(owner), key, subject };
        let key = &caller.key;
        match key.record.state((now_ms() / 1000) as i64) {
            KeyState::Active => Ok(Some(caller)),
            _ => Err(self.refuse(
                Refused::RevokedKey,
                ErrorInfo::new(ErrorKind::Authentication, format!("API key {} is no longer active", key.record.prefix)),
            )),
        }
    }

    /// Before a signed request's body is read: its `Authorization` header
    /// must parse and name an access key id a key holds, so a stranger's
    /// signature never makes the gateway read a body (up to the body
    /// limit) only to refuse it. The signature itself is checked against
    /// the body by [`Governance::authenticate`].
    pub fn check_signer(&self, headers: &http::HeaderMap) -> Result<(), ErrorInfo> {
        if self.mode == AuthMode::Open {
            return Ok(());
        }
        let value = headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let authorization = sigv4::parse_authorization(value).map_err(|err| self.sigv4_refusal(&err))?;
        if !self.keys.load().by_aws.contains_key(authorization.access_key_id) {
            return Err(self.sigv4_refusal(&SigV4Error::UnknownAccessKey));
        }
        Ok(())
    }

    /// A request that presents no key, told how its SDK sends one.
    fn missing_key(&self, protocol: Protocol) -> ErrorInfo {
        let hint = match protocol {
            Protocol::Anthropic => "x-api-key",
            Protocol::Gemini => "x-goog-api-key (or ?key=)",
            Protocol::Bedrock => {
                "Authorization: Bearer (as a Bedrock API key), or a SigV4 signature made with the AWS key pair minted for your key"
            }
            Protocol::OpenAi | Protocol::Responses | Protocol::Cohere => "Authorization: Bearer",
        };
        let message = format!("no API key: send your Switchyard key as {hint}");
        self.refuse(Refused::MissingKey, ErrorInfo::new(ErrorKind::Authentication, message))
    }

    pub(crate) fn refuse(&self, why: Refused, info: ErrorInfo) -> ErrorInfo {
        self.stats.refused[why.index()].fetch_add(1, Ordering::Relaxed);
        info
    }

    /// Who is calling. `None` on an open data plane; an error (in the
    /// caller's protocol once rendered) when keys are required and the
    /// request carries none that is valid.
    pub fn authenticate(&self, request: &Presented<'_>) -> Result<Option<Caller>, ErrorInfo> {
        if self.mode == AuthMode::Open {
            return Ok(None);
        }
        let index = self.keys.load();
        let key = match request.credential() {
            // No key presented: a verified client certificate may name one.
            Credential::None if self.client_identity.is_some() => {
                if let Some(client) = request.client {
                    return self.authenticate_certificate(&index, client);
                }
                return Err(self.missing_key(request.protocol));
            }
            Credential::None => return Err(self.missing_key(request.protocol)),
            Credential::Key(token) if self.jwt.is_some() && super::jwt::looks_like_jwt(token) => {
                return self.authenticate_token(&index, token);
            }
            Credential::Key(secret) => {
                let invalid = || {
                    let message = if looks_like_key(secret) {
                        "invalid API key"
                    } else {
                        "invalid API key: this gateway takes Switchyard keys (sy-...), not a vendor's"
                    };
                    self.refuse(Refused::InvalidKey, ErrorInfo::new(ErrorKind::Authentication, message))
                };
                let hash = KeyHash::of(secret);
                let key = index.by_hash.get(&hash).ok_or_else(invalid)?;
                if !key.record.hash.matches(&hash) {
                    return Err(invalid());
                }
                key.clone()
            }
            Credential::SigV4 => {
                let inbound = request.inbound.as_ref().ok_or_else(|| {
                    ErrorInfo::new(ErrorKind::Authentication, "a signed request needs its body and path")
                })?;
                let mut found = None;
                let verified = sigv4::verify(
                    inbound,
                    |access_key_id| {
                        let key = index.by_aws.get(access_key_id)?;
                        found = Some(key.clone());
                        key.record.aws.as_ref().map(|aws| aws.secret_access_key.clone())
                    },
                    (now_ms() / 1000) as i64,
                );
                match (verified, found) {
                    (Ok(_), Some(key)) => key,
                    (Ok(_), None) => return Err(self.sigv4_refusal(&SigV4Error::UnknownAccessKey)),
                    (Err(err), _) => return Err(self.sigv4_refusal(&err)),
                }
            }
        };
        self.active(key).map(Some)
    }

    /// The caller of the key with id `id` (a Realtime client secret's, at
    /// its socket's handshake), refused as its own credential would be:
    /// unknown, expired, revoked or suspended since.
    pub fn caller_by_key_id(&self, id: &str) -> Result<Caller, ErrorInfo> {
        let key = self.keys.load().by_id.get(id).cloned().ok_or_else(|| {
            let info = ErrorInfo::new(ErrorKind::Authentication, "the key this client secret was minted for is gone");
            self.refuse(Refused::InvalidKey, info)
        })?;
        self.active(key)
    }

    /// `key`'s caller when the key may call now.
    fn active(&self, key: Arc<CachedKey>) -> Result<Caller, ErrorInfo> {
        match key.record.state((now_ms() / 1000) as i64) {
            KeyState::Active => Ok(Caller::of_key(key)),
            KeyState::Expired => Err(self.refuse(
                Refused::ExpiredKey,
                ErrorInfo::new(ErrorKind::Authentication, format!("API key {} has expired", key.record.prefix)),
            )),
            KeyState::Revoked => Err(self.refuse(
                Refused::RevokedKey,
                ErrorInfo::new(ErrorKind::Authentication, format!("API key {} has been revoked", key.record.prefix)),
            )),
            KeyState::Suspended(until) => {
                let left = until.saturating_sub((now_ms() / 1000) as i64).max(1);
                let message = format!(
                    "API key {} is suspended for another {left}s (until Unix time {until}) after too many refused requests; an admin can lift it",
                    key.record.prefix
                );
                let mut info = ErrorInfo::new(ErrorKind::PermissionDenied, message).with_status(403);
                info.code = Some("key_suspended".to_owned());
                Err(self.refuse(Refused::Suspended, info))
            }
        }
    }
}
