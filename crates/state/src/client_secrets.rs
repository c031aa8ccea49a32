//! The gateway's own short-lived Realtime client secrets
//! (`POST /v1/realtime/client_secrets`): minted for a caller's key, so a
//! browser can open `/v1/realtime` without holding that key. A secret is
//! bound to the key that minted it (its pools, budgets and limits are the
//! key's, read again when the socket opens) and, when the mint named one,
//! to one model or pool. Only its SHA-256 is kept; it opens a Realtime
//! socket's handshake and nothing else (no HTTP route reads this store),
//! until it expires. The lane's own credential never leaves the gateway.
//!
//! Kept in this process (across reloads): in a fleet, a secret opens a
//! socket on the instance that minted it (a sticky load balancer, or one
//! instance for sockets).

use std::collections::HashMap;
use std::sync::Mutex;

use switchyard_governance::KeyHash;

/// What every minted secret starts with (so a caller's SDK, and the
/// handshake, tell it from a key).
pub const PREFIX: &str = "sy-ek-";

/// The shortest and longest life a caller may ask for (seconds), as
/// OpenAI's own `expires_after.seconds` bounds it.
pub const MIN_TTL_S: u64 = 10;
/// See [`MIN_TTL_S`].
pub const MAX_TTL_S: u64 = 7_200;
/// The life of a secret when the caller names none.
pub const DEFAULT_TTL_S: u64 = 600;

/// The most secrets held at once: past it, a mint is refused until some
/// expire (a key minting in a loop cannot grow the process without end).
pub const MAX_HELD: usize = 100_000;

/// A secret's grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The id of the key that minted it.
    pub key_id: String,
    /// The model or pool it may open a socket on (`None`: any the key may use).
    pub model: Option<String>,
    /// When it stops opening sockets (Unix ms).
    pub expires_at_ms: u64,
}

/// Why a secret does not open a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    /// Never minted here (or long forgotten).
    #[error("unknown client secret")]
    Unknown,
    /// Past its life.
    #[error("the client secret has expired; mint a new one")]
    Expired,
}

/// The most secrets one key holds alive at once: past it, that key's
/// mint is refused until some expire (one key cannot fill the store and
/// refuse every other key's).
pub const MAX_PER_KEY: usize = 1_000;

/// Why a mint was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MintError {
    /// [`MAX_HELD`] secrets are alive.
    #[error("too many client secrets are alive; retry when some expire")]
    Full,
    /// The key holds [`MAX_PER_KEY`] alive.
    #[error("this key holds {MAX_PER_KEY} client secrets alive; retry when some expire")]
    KeyFull,
    /// The system's randomness failed.
    #[error("no randomness for a client secret")]
    Random,
}

/// The secrets alive, by their hash.
#[derive(Debug, Default)]
pub struct ClientSecrets {
    held: Mutex<HashMap<[u8; 32], Grant>>,
}

impl ClientSecrets {
    /// Mints a secret for `grant` (its expiry already set by the caller
    /// from its clock); the secret, shown once.
    pub fn mint(&self, grant: Grant, now_ms: u64) -> Result<String, MintError> {
        let mut bytes = [0u8; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).map_err(|_| MintError::Random)?;
        let mut secret = String::with_capacity(PREFIX.len() + 64);
        secret.push_str(PREFIX);
        for byte in bytes {
            secret.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
            secret.push(char::from(b"0123456789abcdef"[usize::from(byte & 15)]));
        }
        let mut held = self.lock();
        let of_key = |held: &HashMap<[u8; 32], Grant>| held.values().filter(|g| g.key_id == grant.key_id).count();
        if held.len() >= MAX_HELD || of_key(&held) >= MAX_PER_KEY {
            // Forget the expired before refusing.
            held.retain(|_, grant| grant.expires_at_ms > now_ms);
            if held.len() >= MAX_HELD {
                return Err(MintError::Full);
            }
            if of_key(&held) >= MAX_PER_KEY {
                return Err(MintError::KeyFull);
            }
        }
        held.insert(KeyHash::of(&secret).0, grant);
        Ok(secret)
    }

    /// The grant of `secret` at `now_ms`; an expired one is forgotten.
    pub fn redeem(&self, secret: &str, now_ms: u64) -> Result<Grant, Unusable> {
        let hash = KeyHash::of(secret);
        let mut held = self.lock();
        let grant = held.get(&hash.0).ok_or(Unusable::Unknown)?;
        if grant.expires_at_ms <= now_ms {
            held.remove(&hash.0);
            return Err(Unusable::Expired);
        }
        Ok(grant.clone())
    }

    /// Secrets alive or not yet forgotten.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Grant>> {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(key: &str, expires_at_ms: u64) -> Grant {
        Grant { key_id: key.into(), model: Some("rt".into()), expires_at_ms }
    }

    #[test]
    fn a_secret_opens_until_it_expires_and_is_kept_only_as_a_hash() {
        let secrets = ClientSecrets::default();
        let secret = secrets.mint(grant("k1", 10_000), 1_000).unwrap();
        assert!(secret.starts_with(PREFIX) && secret.len() == PREFIX.len() + 64, "{secret}");
        assert_eq!(secrets.redeem(&secret, 9_999).unwrap(), grant("k1", 10_000));
        // The store holds no secret, only its hash.
        let held = format!("{:?}", secrets.held.lock().unwrap());
        assert!(!held.contains(&secret[PREFIX.len()..]), "{held}");
        // At its expiry, by the injected clock, it is refused and forgotten.
        assert_eq!(secrets.redeem(&secret, 10_000), Err(Unusable::Expired));
        assert_eq!(secrets.redeem(&secret, 10_001), Err(Unusable::Unknown));
        assert!(secrets.is_empty());
    }

    #[test]
    fn secrets_differ_and_a_guess_opens_nothing() {
        let secrets = ClientSecrets::default();
        let a = secrets.mint(grant("k1", 10_000), 0).unwrap();
        let b = secrets.mint(grant("k2", 10_000), 0).unwrap();
        assert_ne!(a, b);
        assert_eq!(secrets.redeem(&b, 1).unwrap().key_id, "k2");
        assert_eq!(secrets.redeem(&format!("{PREFIX}{}", "0".repeat(64)), 1), Err(Unusable::Unknown));
        assert_eq!(secrets.redeem(&a[..a.len() - 1], 1), Err(Unusable::Unknown));
    }

    #[test]
    fn a_full_store_forgets_the_expired_before_refusing() {
        let secrets = ClientSecrets::default();
        {
            let mut held = secrets.lock();
            for n in 0..MAX_HELD as u32 {
                let mut hash = [0u8; 32];
                hash[..4].copy_from_slice(&n.to_le_bytes());
                held.insert(hash, grant(&format!("k{n}"), if n == 0 { 5 } else { 1_000 }));
            }
        }
        // One expired at 5: room for one.
        assert!(secrets.mint(grant("k", 2_000), 10).is_ok());
        assert_eq!(secrets.mint(grant("k", 2_000), 10), Err(MintError::Full));
    }

    #[test]
    fn one_key_cannot_hold_more_than_its_share() {
        let secrets = ClientSecrets::default();
        for _ in 0..MAX_PER_KEY {
            secrets.mint(grant("greedy", 1_000), 0).unwrap();
        }
        assert_eq!(secrets.mint(grant("greedy", 1_000), 0), Err(MintError::KeyFull));
        // Another key mints; and once the greedy one's expire, so does it.
        assert!(secrets.mint(grant("other", 1_000), 0).is_ok());
        assert!(secrets.mint(grant("greedy", 5_000), 1_000).is_ok());
    }
}
