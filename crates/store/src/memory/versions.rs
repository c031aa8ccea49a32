//! The config's versions ([`ConfigStore`]).

use super::{ready, MemoryStore};
use crate::{ConfigStore, ConfigVersion, StoreError, StoreFuture};

impl ConfigStore for MemoryStore {
    fn append_config(&self, after: i64, version: ConfigVersion) -> StoreFuture<'_, ConfigVersion> {
        ready(self.with(|inner| {
            let newest = inner.configs.last().map_or(0, |v| v.version);
            if newest != after {
                return Err(StoreError::Stale);
            }
            let stored = ConfigVersion { version: newest + 1, ..version };
            inner.configs.push(stored.clone());
            Ok(stored)
        }))
    }

    fn config_versions(&self, before: Option<i64>, limit: usize) -> StoreFuture<'_, Vec<ConfigVersion>> {
        ready(self.with(|inner| {
            Ok(inner
                .configs
                .iter()
                .rev()
                .filter(|v| before.is_none_or(|b| v.version < b))
                .take(limit)
                .cloned()
                .collect())
        }))
    }

    fn config_version(&self, version: i64) -> StoreFuture<'_, Option<ConfigVersion>> {
        ready(self.with(|inner| Ok(inner.configs.iter().find(|v| v.version == version).cloned())))
    }
}
