//! Kept request and reply text ([`ContentStore`]).

use super::{col, unavailable, PostgresStore};
use crate::{ContentStore, KeptContent, StoreFuture};

impl ContentStore for PostgresStore {
    fn keep_content(&self, kept: Vec<KeptContent>) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            let statement = client
                .prepare_cached(
                    "INSERT INTO kept_content (entry, at_ms, request_id, key_id, grp, user_tag, retention, sealed) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (entry) DO NOTHING",
                )
                .await
                .map_err(unavailable)?;
            for k in &kept {
                client
                    .execute(
                        &statement,
                        &[&k.entry, &k.at_ms, &k.request_id, &k.key_id, &k.group, &k.user_tag, &k.retention, &k.sealed],
                    )
                    .await
                    .map_err(unavailable)?;
            }
            Ok(())
        })
    }

    fn find_content(&self, entry: i64) -> StoreFuture<'_, Option<KeptContent>> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT entry, at_ms, request_id, key_id, grp, user_tag, retention, sealed FROM kept_content \
                     WHERE entry = $1",
                    &[&entry],
                )
                .await
                .map_err(unavailable)?;
            row.map(|row| {
                Ok(KeptContent {
                    entry: col(&row, 0)?,
                    at_ms: col(&row, 1)?,
                    request_id: col(&row, 2)?,
                    key_id: col(&row, 3)?,
                    group: col(&row, 4)?,
                    user_tag: col(&row, 5)?,
                    retention: col(&row, 6)?,
                    sealed: col(&row, 7)?,
                })
            })
            .transpose()
        })
    }

    fn erase_content(&self, user_tag: String) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            client.execute("DELETE FROM kept_content WHERE user_tag = $1", &[&user_tag]).await.map_err(unavailable)
        })
    }

    fn purge_content(&self, before_ms: i64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            client.execute("DELETE FROM kept_content WHERE at_ms < $1", &[&before_ms]).await.map_err(unavailable)
        })
    }
}
