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
                    .prepare_cached(
                        "INSERT INTO call_signatures (key, signature, expires_ms) VALUES (?1, ?2, ?3) \
                         ON CONFLICT (key) DO UPDATE SET signature = excluded.signature, expires_ms = excluded.expires_ms",
                    )
                    .map_err(unavailable)?;
                for entry in &kept {
                    upsert.execute(params![entry.key, entry.signature, entry.expires_ms]).map_err(unavailable)?;
                }
            }
            tx.execute("DELETE FROM call_signatures WHERE expires_ms <= ?1", params![now_ms]).map_err(unavailable)?;
            tx.commit().map_err(unavailable)
        })
    }

    fn find_signatures(&self, keys: Vec<String>, now_ms: i64) -> StoreFuture<'_, Vec<Option<String>>> {
        self.run(move |conn| {
            let mut find = conn
                .prepare_cached("SELECT signature FROM call_signatures WHERE key = ?1 AND expires_ms > ?2")
                .map_err(unavailable)?;
            keys.iter()
                .map(|key| find.query_row(params![key, now_ms], |row| row.get(0)).optional().map_err(unavailable))
                .collect()
        })
    }
}
