//! Tool-call signatures kept for callers that drop them ([`SignatureStore`]).

use rusqlite::{params, OptionalExtension};

use super::{unavailable, SqliteStore};
use crate::{KeptSignature, SignatureStore, StoreFuture};

impl SignatureStore for SqliteStore {
    fn keep_signatures(&self, kept: Vec<KeptSignature>, now_ms: i64) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            {
                let mut upsert = tx
                    .prepare_cached(include_str!("signatures/keep_signatures_insert_call_signatures.sql"))
                    .map_err(unavailable)?;
                for entry in &kept {
                    upsert.execute(params![entry.key, entry.signature, entry.expires_ms]).map_err(unavailable)?;
                }
            }
            tx.execute(include_str!("signatures/keep_signatures_delete_call_signatures.sql"), params![now_ms])
                .map_err(unavailable)?;
            tx.commit().map_err(unavailable)
        })
    }

    fn find_signatures(&self, keys: Vec<String>, now_ms: i64) -> StoreFuture<'_, Vec<Option<String>>> {
        self.run(move |conn| {
            let mut find = conn.prepare_cached(include_str!("signatures/find_signatures.sql")).map_err(unavailable)?;
            keys.iter()
                .map(|key| find.query_row(params![key, now_ms], |row| row.get(0)).optional().map_err(unavailable))
                .collect()
        })
    }
}
