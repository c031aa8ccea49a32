//! Kept request and reply text ([`ContentStore`]).

use super::{col, unavailable, PostgresStore};
use crate::{ContentStore, KeptContent, StoreFuture};

impl ContentStore for PostgresStore {
    fn keep_content(&self, kept: Vec<KeptContent>) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            let statement =
                client.prepare_cached(include_str!("content/keep_content.sql")).await.map_err(unavailable)?;
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
            let row =
                client.query_opt(include_str!("content/find_content.sql"), &[&entry]).await.map_err(unavailable)?;
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
            client.execute(include_str!("content/erase_content.sql"), &[&user_tag]).await.map_err(unavailable)
        })
    }

    fn purge_content(&self, before_ms: i64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            client.execute(include_str!("content/purge_content.sql"), &[&before_ms]).await.map_err(unavailable)
        })
    }
}
