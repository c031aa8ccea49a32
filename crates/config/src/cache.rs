//! The `cache:` section: the response cache's store (its bound and whose
//! answers share entries).

use serde::Deserialize;

use crate::issue::Issue;
use crate::units::size_or;

/// The response cache's store.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCacheStore {
    pub max_bytes: Option<serde_yaml_ng::Value>,
    /// `key` (default) or `group`.
    pub scope: Option<String>,
    /// Hits count against requests-per-minute limits.
    pub count_hits: Option<bool>,
}

/// The response cache's store: its bound and whose answers share entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheStore {
    /// Most bytes held (least recently used answers go first).
    pub max_bytes: u64,
    /// Entries are shared by the callers of one group, not only one key.
    pub by_group: bool,
    /// A hit counts against requests-per-minute limits (by default it is
    /// given back: a hit costs nothing against budgets or rate limits).
    pub count_hits: bool,
}

/// Default bound of the response cache.
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;

/// The top-level `cache:` block.
pub(crate) fn store(raw: Option<&RawCacheStore>, issues: &mut Vec<Issue>) -> CacheStore {
    let Some(raw) = raw else {
        return CacheStore { max_bytes: DEFAULT_CACHE_BYTES, by_group: false, count_hits: false };
    };
    let max_bytes = size_or(raw.max_bytes.as_ref(), DEFAULT_CACHE_BYTES, 16 << 30, "cache.max_bytes", issues);
    let by_group = match raw.scope.as_deref() {
        None | Some("key") => false,
        Some("group") => true,
        Some(other) => {
            issues.push(Issue::new(
                "cache.scope",
                format!("`{other}` is not a cache scope"),
                "use key (the default: each key its own entries) or group (a group's keys share them)",
            ));
            false
        }
    };
    CacheStore { max_bytes, by_group, count_hits: raw.count_hits.unwrap_or(false) }
}
