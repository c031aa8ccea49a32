//! The config's versions ([`ConfigStore`]).

use rusqlite::{params, OptionalExtension};

use super::{unavailable, SqliteStore};
use crate::{ConfigStore, ConfigVersion, StoreError, StoreFuture};

fn config_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<ConfigVersion> {
    Ok(ConfigVersion {
        version: row.get(0)?,
        at_ms: row.get(1)?,
        author: row.get(2)?,
        message: row.get(3)?,
        text: row.get(4)?,
    })
}

impl ConfigStore for SqliteStore {
    fn append_config(&self, after: i64, version: ConfigVersion) -> StoreFuture<'_, ConfigVersion> {
        self.run(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(unavailable)?;
            let newest: i64 = tx
                .query_row(include_str!("versions/append_config_select_config_versions.sql"), [], |row| row.get(0))
                .map_err(unavailable)?;
            if newest != after {
                return Err(StoreError::Stale);
            }
            let stored = ConfigVersion { version: newest + 1, ..version };
            tx.execute(
                include_str!("versions/append_config_insert_config_versions.sql"),
                params![stored.version, stored.at_ms, stored.author, stored.message, stored.text],
            )
            .map_err(unavailable)?;
            tx.commit().map_err(unavailable)?;
            Ok(stored)
        })
    }

    fn config_versions(&self, before: Option<i64>, limit: usize) -> StoreFuture<'_, Vec<ConfigVersion>> {
        self.run(move |conn| {
            let mut query = conn.prepare_cached(include_str!("versions/config_versions.sql")).map_err(unavailable)?;
            let rows = query.query_map(params![before, limit as i64], config_of).map_err(unavailable)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(unavailable)
        })
    }

    fn config_version(&self, version: i64) -> StoreFuture<'_, Option<ConfigVersion>> {
        self.run(move |conn| {
            conn.query_row(include_str!("versions/config_version.sql"), params![version], config_of)
                .optional()
                .map_err(unavailable)
        })
    }
}
