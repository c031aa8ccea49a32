//! Virtual keys: the secret a caller presents, the hash a store keeps, and
//! the record that says what the key may do. Secrets are made from random
//! bytes the caller draws from the OS RNG (this module has no randomness of
//! its own); only [`KeyHash`] is ever stored, compared in constant time.

use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::admission::{Budget, Limits};

/// Every virtual key starts with this.
pub const KEY_PREFIX: &str = "sy-";

/// Characters of a secret shown as its visible prefix (`sy-` and five more).
pub const VISIBLE: usize = 8;

/// A new secret from 32 random bytes: `sy-` and 43 url-safe characters.
pub fn new_secret(random: &[u8; 32]) -> String {
    let mut secret = String::with_capacity(KEY_PREFIX.len() + 43);
    secret.push_str(KEY_PREFIX);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode_string(random, &mut secret);
    secret
}

/// The part of a secret that stays visible: enough to tell keys apart in a
/// list, never enough to use one.
pub fn visible_prefix(secret: &str) -> &str {
    secret.get(..VISIBLE).unwrap_or(secret)
}

/// True when `text` has the shape of a virtual key (the check before
/// hashing, so a vendor key a caller sends by mistake is named as such).
pub fn looks_like_key(text: &str) -> bool {
    text.len() >= KEY_PREFIX.len() + 32
        && text.starts_with(KEY_PREFIX)
        && text.bytes().skip(KEY_PREFIX.len()).all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// True when two secrets (admin tokens) are equal, in time that depends on
/// neither their contents nor their lengths (both are hashed first).
pub fn secrets_match(presented: &str, expected: &str) -> bool {
    KeyHash::of(presented).matches(&KeyHash::of(expected))
}

/// The SHA-256 of a secret. A lookup by hash is safe (an attacker cannot
/// choose a hash); the final comparison is constant-time all the same.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyHash(pub [u8; 32]);

impl KeyHash {
    /// The hash of `secret`.
    pub fn of(secret: &str) -> KeyHash {
        KeyHash(Sha256::digest(secret.as_bytes()).into())
    }

    /// Equal, in time that does not depend on where the bytes differ.
    pub fn matches(&self, other: &KeyHash) -> bool {
        self.0.ct_eq(&other.0).into()
    }

    /// Lowercase hex, as stores keep it.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses lowercase or uppercase hex.
    pub fn from_hex(text: &str) -> Option<KeyHash> {
        if text.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (index, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(index * 2..index * 2 + 2)?, 16).ok()?;
        }
        Some(KeyHash(out))
    }
}

impl std::fmt::Debug for KeyHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyHash({}…)", &self.to_hex()[..8])
    }
}

impl Serialize for KeyHash {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for KeyHash {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<KeyHash, D::Error> {
        let text = String::deserialize(deserializer)?;
        KeyHash::from_hex(&text).ok_or_else(|| serde::de::Error::custom("not a 64-character hex hash"))
    }
}

/// A minted AWS key pair for a Bedrock caller (SigV4 needs the secret
/// itself to check a signature, so unlike a virtual key it is kept).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AwsCredential {
    /// `AKSY` and 16 upper-case letters and digits, the shape AWS SDKs expect.
    pub access_key_id: String,
    /// 40 characters.
    pub secret_access_key: String,
}

impl std::fmt::Debug for AwsCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AwsCredential {{ access_key_id: {:?}, .. }}", self.access_key_id)
    }
}

/// Random bytes a minted AWS pair is made from: 16 for the access key id,
/// then 30 of its own for the secret (the id is public; it shares none of
/// the secret's bits).
pub const AWS_RANDOM_BYTES: usize = 16 + 30;

impl AwsCredential {
    /// A new pair from [`AWS_RANDOM_BYTES`] random bytes.
    pub fn new(random: &[u8; AWS_RANDOM_BYTES]) -> AwsCredential {
        const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
        let (id, secret) = random.split_at(16);
        let mut access_key_id = String::from("AKSY");
        access_key_id.extend(id.iter().map(|b| char::from(ALPHABET[usize::from(b % 32)])));
        let secret_access_key = base64::engine::general_purpose::STANDARD.encode(secret);
        AwsCredential { access_key_id, secret_access_key }
    }
}

/// A key's or group's budget and limits for each of its end users: a
/// default, and overrides by end user.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EndUserPolicy {
    /// Each end user's budget, unless overridden.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::admission::Budget>,
    /// Each end user's limits, unless overridden.
    #[serde(default)]
    pub limits: crate::admission::Limits,
    /// Budgets and limits of named end users, in place of the default.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub overrides: std::collections::BTreeMap<String, crate::admission::BucketSpec>,
}

/// The most end-user overrides one key or group keeps.
pub const MAX_END_USER_OVERRIDES: usize = 10_000;

impl EndUserPolicy {
    /// What `user`'s bucket enforces.
    pub fn spec_for(&self, user: &str) -> crate::admission::BucketSpec {
        self.overrides.get(user).cloned().unwrap_or_else(|| crate::admission::BucketSpec {
            budget: self.budget.clone(),
            limits: self.limits.clone(),
        })
    }
}

/// What a store keeps of a virtual key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// Stable id (`key_` and hex); survives rotation.
    pub id: String,
    /// Human name.
    pub name: String,
    /// The visible start of the current secret.
    pub prefix: String,
    /// The hash of the current secret.
    pub hash: KeyHash,
    /// The group whose budget tree the key draws on.
    pub group: Option<String>,
    /// Pools (and models) the key may name; `None`: every one.
    pub pools: Option<Vec<String>>,
    /// Guardrail policies its requests pass, in place of its group's or
    /// pool's (`None`: theirs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<Vec<String>>,
    /// The key's own budget.
    pub budget: Option<Budget>,
    /// The key's own limits.
    #[serde(default)]
    pub limits: Limits,
    /// When it stops working (Unix seconds).
    pub expires_at: Option<i64>,
    /// When it was revoked (final).
    pub revoked_at: Option<i64>,
    /// Operator's free-form data.
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// When it was created (Unix seconds).
    pub created_at: i64,
    /// When its secret last changed (Unix seconds).
    pub rotated_at: Option<i64>,
    /// The minted AWS pair, for Bedrock callers.
    pub aws: Option<AwsCredential>,
    /// Each end user's budget and limits inside this key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_users: Option<EndUserPolicy>,
    /// Suspended for abuse until then (Unix seconds): refused with a 403
    /// of its own until it passes or an admin lifts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspended_until: Option<i64>,
    /// How many times the record was written: a write carries the version
    /// it read, and a store refuses it when another write came between
    /// (two instances changing one key never lose either change).
    #[serde(default)]
    pub version: u64,
    /// What of the MCP gateway the key may see and use: tools
    /// (`files__*`, `tickets__read_*`), prompts (`prompt:tickets__*`),
    /// resources (`resource:files+file:///docs/*`), or whole servers
    /// (`tickets`, `*`); see [`crate::mcp_grant`]. `None` or empty: nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<Vec<String>>,
    /// The providers whose raw route (`/passthrough/{provider}/...`) the
    /// key may take, by name. `None` or empty: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passthrough: Option<Vec<String>>,
    /// The A2A agents (`/a2a/{agent}`) the key may call, by name, or `*`
    /// for every one. `None` or empty: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a2a: Option<Vec<String>>,
}

/// Why a presented key does not open the door.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    /// Usable.
    Active,
    /// Past its expiry.
    Expired,
    /// Revoked.
    Revoked,
    /// Suspended for abuse (until the time given).
    Suspended(i64),
}

impl KeyRecord {
    /// The key's state at `now` (Unix seconds).
    pub fn state(&self, now: i64) -> KeyState {
        if self.revoked_at.is_some() {
            KeyState::Revoked
        } else if self.expires_at.is_some_and(|at| now >= at) {
            KeyState::Expired
        } else if let Some(until) = self.suspended_until.filter(|&until| now < until) {
            KeyState::Suspended(until)
        } else {
            KeyState::Active
        }
    }

    /// True when the key may name `pool`.
    pub fn may_use(&self, pool: &str) -> bool {
        self.pools.as_ref().is_none_or(|pools| pools.iter().any(|p| p == pool))
    }

    /// True when the key's `mcp` grants reach `item` (the server's own
    /// name or URI for it) of kind `kind` on MCP server (or pool) `server`.
    /// No grants: nothing.
    pub fn may_use_mcp(&self, kind: crate::mcp_grant::Kind, server: &str, item: &str) -> bool {
        self.mcp.as_deref().is_some_and(|grants| crate::mcp_grant::grants(grants, kind, server, item))
    }

    /// True when the key may take `provider`'s raw route. No grants: none.
    pub fn may_pass_through(&self, provider: &str) -> bool {
        self.passthrough.as_deref().is_some_and(|granted| granted.iter().any(|p| p == provider))
    }

    /// True when the key may call A2A agent `agent`. No grants: none.
    pub fn may_call_agent(&self, agent: &str) -> bool {
        self.a2a.as_deref().is_some_and(|granted| granted.iter().any(|a| a == agent || a == "*"))
    }

    /// True when the key's `mcp` grants reach anything of kind `kind` on
    /// MCP server (or pool) `server`.
    pub fn may_reach_mcp(&self, kind: crate::mcp_grant::Kind, server: &str) -> bool {
        self.mcp.as_deref().is_some_and(|grants| crate::mcp_grant::reaches(grants, kind, server))
    }
}

/// `*` matches any run of bytes; everything else matches itself. Linear
/// in practice: the last star is the only one backtracked to.
pub fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_have_their_shape_and_hash_stably() {
        let secret = new_secret(&[7u8; 32]);
        assert_eq!(secret.len(), 46);
        assert!(looks_like_key(&secret));
        assert_eq!(visible_prefix(&secret).len(), 8);
        assert!(!looks_like_key("sk-proj-abc"));
        let hash = KeyHash::of(&secret);
        assert!(hash.matches(&KeyHash::of(&secret)));
        assert!(!hash.matches(&KeyHash::of(&new_secret(&[8u8; 32]))));
        assert_eq!(KeyHash::from_hex(&hash.to_hex()), Some(hash));
        assert!(!format!("{hash:?}").contains(&hash.to_hex()), "Debug shows only a prefix of the hash");
    }

    #[test]
    fn a_key_takes_only_the_raw_routes_granted_to_it() {
        let record = |granted: Option<Vec<&str>>| KeyRecord {
            passthrough: granted.map(|g| g.into_iter().map(str::to_owned).collect()),
            ..serde_json::from_value(serde_json::json!({
                "id": "key_1", "name": "n", "prefix": "sy", "hash": KeyHash::of("s").to_hex(), "group": null,
                "pools": null, "budget": null, "expires_at": null, "revoked_at": null, "created_at": 0,
                "rotated_at": null, "aws": null
            }))
            .unwrap_or_else(|e| unreachable!("{e}"))
        };
        assert!(!record(None).may_pass_through("openai"), "a key stored before grants existed takes none");
        assert!(!record(Some(vec![])).may_pass_through("openai"));
        assert!(record(Some(vec!["openai"])).may_pass_through("openai"));
        assert!(!record(Some(vec!["openai"])).may_pass_through("claude"));
        assert!(!record(Some(vec!["*"])).may_pass_through("openai"), "a grant names a provider, never a glob");
    }

    #[test]
    fn a_key_calls_only_the_agents_granted_to_it() {
        let record = |granted: Option<Vec<&str>>| KeyRecord {
            a2a: granted.map(|g| g.into_iter().map(str::to_owned).collect()),
            ..serde_json::from_value(serde_json::json!({
                "id": "key_1", "name": "n", "prefix": "sy", "hash": KeyHash::of("s").to_hex(), "group": null,
                "pools": null, "budget": null, "expires_at": null, "revoked_at": null, "created_at": 0,
                "rotated_at": null, "aws": null
            }))
            .unwrap_or_else(|e| unreachable!("{e}"))
        };
        assert!(!record(None).may_call_agent("research"), "a key stored before grants existed calls none");
        assert!(!record(Some(vec![])).may_call_agent("research"));
        assert!(record(Some(vec!["research"])).may_call_agent("research"));
        assert!(!record(Some(vec!["research"])).may_call_agent("research-2"));
        assert!(record(Some(vec!["*"])).may_call_agent("writer"));
    }

    #[test]
    fn a_key_without_mcp_grants_reaches_nothing() {
        use crate::mcp_grant::Kind;
        assert!(glob(b"files__*", b"files__read"));
        assert!(glob(b"*__read_*", b"tickets__read_queue"));
        assert!(!glob(b"tickets__read_*", b"tickets__close"));
        assert!(glob(b"a*b*c", b"axxbyyc"));
        assert!(!glob(b"a*b*c", b"axxbyy"));
        let record = |grants: Option<Vec<&str>>| KeyRecord {
            mcp: grants.map(|g| g.into_iter().map(str::to_owned).collect()),
            ..serde_json::from_value(serde_json::json!({
                "id": "key_1", "name": "n", "prefix": "sy", "hash": KeyHash::of("s").to_hex(), "group": null,
                "pools": null, "budget": null, "expires_at": null, "revoked_at": null, "created_at": 0,
                "rotated_at": null, "aws": null
            }))
            .unwrap_or_else(|e| unreachable!("{e}"))
        };
        let unset = record(None);
        assert!(!unset.may_use_mcp(Kind::Tool, "files", "delete_everything"));
        assert!(!unset.may_reach_mcp(Kind::Tool, "files"));
        let none = record(Some(vec![]));
        assert!(!none.may_use_mcp(Kind::Tool, "files", "read") && !none.may_reach_mcp(Kind::Resource, "files"));
        let some = record(Some(vec!["files__*", "tickets__read_*"]));
        assert!(some.may_use_mcp(Kind::Tool, "files", "delete"));
        assert!(some.may_use_mcp(Kind::Tool, "tickets", "read_queue"));
        assert!(!some.may_use_mcp(Kind::Tool, "tickets", "close_ticket"));
        assert!(!some.may_use_mcp(Kind::Prompt, "files", "greeting"));
        assert!(some.may_reach_mcp(Kind::Tool, "tickets") && !some.may_reach_mcp(Kind::Tool, "wiki"));
        let bare = record(Some(vec!["tickets"]));
        assert!(bare.may_use_mcp(Kind::Tool, "tickets", "close") && !bare.may_use_mcp(Kind::Tool, "ticketsx", "close"));
    }

    #[test]
    fn an_aws_pairs_id_reveals_nothing_of_its_secret() {
        // Change only the id's bytes: the secret stays; only the secret's: the id stays.
        let mut random = [7u8; AWS_RANDOM_BYTES];
        let base = AwsCredential::new(&random);
        random[..16].fill(9);
        let other_id = AwsCredential::new(&random);
        assert_ne!(base.access_key_id, other_id.access_key_id);
        assert_eq!(base.secret_access_key, other_id.secret_access_key);
        random[16..].fill(11);
        let other_secret = AwsCredential::new(&random);
        assert_eq!(other_id.access_key_id, other_secret.access_key_id);
        assert_ne!(other_id.secret_access_key, other_secret.secret_access_key);
    }

    #[test]
    fn aws_pairs_have_the_shapes_sdks_expect() {
        let pair = AwsCredential::new(&[200u8; AWS_RANDOM_BYTES]);
        assert_eq!(pair.access_key_id.len(), 20);
        assert!(pair.access_key_id.starts_with("AKSY"));
        assert!(pair.access_key_id.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()));
        assert_eq!(pair.secret_access_key.len(), 40);
        assert!(!format!("{pair:?}").contains(&pair.secret_access_key));
    }
}
