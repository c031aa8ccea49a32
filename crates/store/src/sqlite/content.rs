//! Kept request and reply text ([`ContentStore`]).

use rusqlite::{params, OptionalExtension};

use super::{unavailable, SqliteStore};
use crate::{ContentStore, KeptContent, StoreFuture};

impl ContentStore for SqliteStore {
    fn keep_content(&self, kept: Vec<KeptContent>) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            {
                let mut insert = tx.prepare_cached(include_str!("content/keep_content.sql")).map_err(unavailable)?;
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
            conn.prepare_cached(include_str!("content/find_content.sql"))
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
            conn.execute(include_str!("content/erase_content.sql"), params![user_tag])
                .map(|n| n as u64)
                .map_err(unavailable)
        })
    }

    fn purge_content(&self, before_ms: i64) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            conn.execute(include_str!("content/purge_content.sql"), params![before_ms])
                .map(|n| n as u64)
                .map_err(unavailable)
        })
    }
}
