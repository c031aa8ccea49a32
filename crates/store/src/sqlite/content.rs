//! Kept request and reply text ([`ContentStore`]).

use rusqlite::{params, OptionalExtension};

use super::{unavailable, SqliteStore};
use crate::{ContentStore, KeptContent, StoreFuture};

impl ContentStore for SqliteStore {
    fn keep_content(&self, kept: Vec<KeptContent>) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            {
                let mut insert = tx
                    .prepare_cached(
                        "INSERT INTO kept_content (entry, at_ms, request_id, key_id, grp, user_tag, retention, sealed) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (entry) DO NOTHING",
                    )
                    .map_err(unavailable)?;
                for k in &kept {
                    insert
                        .execute(params![
                            k.entry,
                            k.at_ms,
                            k.request_id,
                            k.key_id,
                            k.group,
                            k.user_tag,
                            k.retention,
                            k.sealed
                        ])
                        .map_err(unavailable)?;
                }
            }
            tx.commit().map_err(unavailable)
        })
    }

    fn find_content(&self, entry: i64) -> StoreFuture<'_, Option<KeptContent>> {
        self.run(move |conn| {
            conn.prepare_cached(
                "SELECT entry, at_ms, request_id, key_id, grp, user_tag, retention, sealed FROM kept_content WHERE entry = ?1",
            )
            .map_err(unavailable)?
            .query_row(params![entry], |row| {
                Ok(KeptContent {
                    entry: row.get(0)?,
                    at_ms: row.get(1)?,
                    request_id: row.get(2)?,
                    key_id: row.get(3)?,
                    group: row.get(4)?,
                    user_tag: row.get(5)?,
                    retention: row.get(6)?,
                    sealed: row.get(7)?,
                })
            })
            .optional()
            .map_err(unavailable)
        })
    }

    fn erase_content(&self, user_tag: String) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            conn.execute("DELETE FROM kept_content WHERE user_tag = ?1", params![user_tag])
                .map(|n| n as u64)
                .map_err(unavailable)
        })
    }

    fn purge_content(&self, before_ms: i64) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            conn.execute("DELETE FROM kept_content WHERE at_ms < ?1", params![before_ms])
                .map(|n| n as u64)
                .map_err(unavailable)
        })
    }
}
