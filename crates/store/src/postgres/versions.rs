//! The config's versions ([`ConfigStore`]), each append announced on
//! `switchyard_config`.

use super::{col, conflict_or_unavailable, unavailable, PostgresStore, CONFIG_CHANNEL};
use crate::{ConfigStore, ConfigVersion, StoreError, StoreFuture};

fn config_of(row: &tokio_postgres::Row) -> Result<ConfigVersion, StoreError> {
    Ok(ConfigVersion {
        version: col(row, 0)?,
        at_ms: col(row, 1)?,
        author: col(row, 2)?,
        message: col(row, 3)?,
        text: col(row, 4)?,
    })
}

impl ConfigStore for PostgresStore {
    fn append_config(&self, after: i64, version: ConfigVersion) -> StoreFuture<'_, ConfigVersion> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            let newest: i64 = col(
                &tx.query_one(include_str!("versions/append_config_select_config_versions.sql"), &[])
                    .await
                    .map_err(unavailable)?,
                0,
            )?;
            if newest != after {
                return Err(StoreError::Stale);
            }
            let stored = ConfigVersion { version: newest + 1, ..version };
            // Two writers that read the same newest version meet at the
            // primary key: the second is stale.
            tx.execute(
                include_str!("versions/append_config_insert_config_versions.sql"),
                &[&stored.version, &stored.at_ms, &stored.author, &stored.message, &stored.text],
            )
            .await
            .map_err(|err| match conflict_or_unavailable(err) {
                StoreError::Conflict(_) => StoreError::Stale,
                other => other,
            })?;
            tx.execute(
                include_str!("versions/append_config_notify.sql"),
                &[&CONFIG_CHANNEL, &stored.version.to_string()],
            )
            .await
            .map_err(unavailable)?;
            tx.commit().await.map_err(|err| match conflict_or_unavailable(err) {
                StoreError::Conflict(_) => StoreError::Stale,
                other => other,
            })?;
            Ok(stored)
        })
    }

    fn config_versions(&self, before: Option<i64>, limit: usize) -> StoreFuture<'_, Vec<ConfigVersion>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client
                .query(include_str!("versions/config_versions.sql"), &[&before, &(limit as i64)])
                .await
                .map_err(unavailable)?;
            rows.iter().map(config_of).collect()
        })
    }

    fn config_version(&self, version: i64) -> StoreFuture<'_, Option<ConfigVersion>> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_opt(include_str!("versions/config_version.sql"), &[&version])
                .await
                .map_err(unavailable)?;
            row.as_ref().map(config_of).transpose()
        })
    }
}
