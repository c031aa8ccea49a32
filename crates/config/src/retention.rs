//! The `retention:` block (the key kept text is sealed under, and how many
//! days it stays) and a group's `retention:` (what its requests keep). A
//! group that keeps text without a key is refused at boot: kept text is
//! never stored in the clear.

use serde::Deserialize;
pub use switchyard_guard::retention::Retention;

use crate::Issue;

/// The store's side of retention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionStore {
    /// What kept text is sealed under.
    pub key: SealKey,
    /// Kept text older than this many days is purged.
    pub days: u32,
}

/// A 256-bit key; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct SealKey(pub [u8; 32]);

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(<redacted>)")
    }
}

/// Days kept when `retention.days` is not set.
pub const DEFAULT_DAYS: u32 = 30;
/// The longest retention (ten years).
pub const MAX_DAYS: u64 = 3_650;

const KEY_FIX: &str = "set retention.key to 64 hex characters (32 random bytes, e.g. `openssl rand -hex 32`), \
     best from the environment: key: ${SWITCHYARD_RETENTION_KEY}";

/// `retention:` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRetention {
    pub key: Option<String>,
    pub days: Option<u64>,
}

/// The store's retention (`None`: no key, so no group may keep text).
pub(crate) fn store(raw: Option<&RawRetention>, issues: &mut Vec<Issue>) -> Option<RetentionStore> {
    let raw = raw?;
    let days = match raw.days {
        None => DEFAULT_DAYS,
        Some(days @ 1..=MAX_DAYS) => days as u32,
        Some(days) => {
            issues.push(Issue::new(
                "retention.days",
                format!("{days} days is out of range"),
                format!("use 1 to {MAX_DAYS}"),
            ));
            DEFAULT_DAYS
        }
    };
    let Some(text) = raw.key.as_deref() else {
        issues.push(Issue::new("retention.key", "kept text needs a key to be sealed under", KEY_FIX));
        return None;
    };
    match parse_key(text.trim()) {
        Some(key) => Some(RetentionStore { key: SealKey(key), days }),
        None => {
            // Never echo the value: it is meant to be a secret.
            issues.push(Issue::new("retention.key", "is not 64 hex characters", KEY_FIX));
            None
        }
    }
}

fn parse_key(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 {
        return None;
    }
    let mut key = [0u8; 32];
    for (at, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * at..2 * at + 2)?, 16).ok()?;
    }
    Some(key)
}

/// A group's `retention:` (`None`: as its parent's, else nothing kept).
pub(crate) fn group(
    name: &str,
    raw: Option<&str>,
    store: Option<&RetentionStore>,
    issues: &mut Vec<Issue>,
) -> Option<Retention> {
    let path = format!("groups.{name}.retention");
    let retention = match Retention::parse(raw?) {
        Some(retention) => retention,
        None => {
            issues.push(Issue::new(&path, format!("`{}` is not a retention", raw?), "use none, redacted or full"));
            return None;
        }
    };
    if retention != Retention::None && store.is_none() {
        issues.push(Issue::new(
            &path,
            format!("keeps text ({}) but retention.key is not set", retention.as_str()),
            KEY_FIX,
        ));
    }
    Some(retention)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_64_hex_characters_and_never_shown() {
        let mut issues = Vec::new();
        let raw = RawRetention { key: Some("ab".repeat(32)), days: Some(7) };
        let store = store(Some(&raw), &mut issues).unwrap();
        assert_eq!(store, RetentionStore { key: SealKey([0xab; 32]), days: 7 });
        assert!(!format!("{store:?}").contains("ab"), "{store:?}");
        assert!(issues.is_empty());
        for bad in ["abc", "zz".repeat(32).as_str(), ""] {
            let raw = RawRetention { key: Some(bad.to_owned()), days: None };
            let mut issues = Vec::new();
            assert_eq!(super::store(Some(&raw), &mut issues), None);
            assert_eq!(issues[0].path, "retention.key");
            assert!(bad.is_empty() || !issues[0].message.contains(bad));
        }
        let mut issues = Vec::new();
        super::store(Some(&RawRetention { key: Some("00".repeat(32)), days: Some(0) }), &mut issues);
        assert_eq!(issues[0].path, "retention.days");
    }

    #[test]
    fn a_group_that_keeps_text_needs_the_key() {
        let key = RetentionStore { key: SealKey([0; 32]), days: 1 };
        let mut issues = Vec::new();
        assert_eq!(group("g", Some("redacted"), Some(&key), &mut issues), Some(Retention::Redacted));
        assert_eq!(group("g", None, Some(&key), &mut issues), None);
        assert_eq!(group("g", Some("none"), None, &mut issues), Some(Retention::None));
        assert!(issues.is_empty());
        assert_eq!(group("g", Some("full"), None, &mut issues), Some(Retention::Full));
        assert_eq!(issues[0].path, "groups.g.retention");
        assert!(issues[0].fix.contains("openssl rand -hex 32"));
        group("g", Some("all"), Some(&key), &mut issues);
        assert_eq!(issues[1].fix, "use none, redacted or full");
    }
}
