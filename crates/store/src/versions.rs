//! The config as versioned documents ([`ConfigStore`]).

use serde::{Deserialize, Serialize};

use crate::StoreFuture;

/// One version of the config document, as written (its `${VAR}`
/// references unexpanded: secrets from the environment never reach it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigVersion {
    /// 1, 2, ... in the order they were made.
    pub version: i64,
    /// When (Unix ms).
    pub at_ms: i64,
    /// Who: an admin token's name, a console user, or `file`.
    pub author: String,
    /// Why, in the author's words.
    pub message: String,
    /// The YAML text.
    pub text: String,
}

/// The config as versioned documents.
pub trait ConfigStore: Send + Sync {
    /// Appends `version` as the one after `after` (the newest the writer
    /// read; 0 for none) and returns it numbered. [`StoreError::Stale`]
    /// when another version came first: a lost update is refused.
    fn append_config(&self, after: i64, version: ConfigVersion) -> StoreFuture<'_, ConfigVersion>;
    /// Versions older than `before` (all when `None`), newest first, at
    /// most `limit`.
    fn config_versions(&self, before: Option<i64>, limit: usize) -> StoreFuture<'_, Vec<ConfigVersion>>;
    /// One version.
    fn config_version(&self, version: i64) -> StoreFuture<'_, Option<ConfigVersion>>;
}
