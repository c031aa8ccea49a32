//! Tool-call signatures kept for callers that drop them ([`SignatureStore`]).

use super::{col, unavailable, PostgresStore};
use crate::{KeptSignature, SignatureStore, StoreFuture};

impl SignatureStore for PostgresStore {
    fn keep_signatures(&self, kept: Vec<KeptSignature>, now_ms: i64) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            // One row per key (the last kept wins): an upsert may not touch a row twice.
            let latest: std::collections::BTreeMap<String, (String, i64)> =
                kept.into_iter().map(|entry| (entry.key, (entry.signature, entry.expires_ms))).collect();
            let mut keys = Vec::with_capacity(latest.len());
            let mut signatures = Vec::with_capacity(latest.len());
            let mut expiries = Vec::with_capacity(latest.len());
            for (key, (signature, expires_ms)) in latest {
                keys.push(key);
                signatures.push(signature);
                expiries.push(expires_ms);
            }
            client
                .execute(
                    include_str!("signatures/keep_signatures_insert_call_signatures.sql"),
                    &[&keys, &signatures, &expiries],
                )
                .await
                .map_err(unavailable)?;
            client
                .execute(include_str!("signatures/keep_signatures_delete_call_signatures.sql"), &[&now_ms])
                .await
                .map_err(unavailable)?;
            Ok(())
        })
    }

    fn find_signatures(&self, keys: Vec<String>, now_ms: i64) -> StoreFuture<'_, Vec<Option<String>>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client
                .query(include_str!("signatures/find_signatures.sql"), &[&keys, &now_ms])
                .await
                .map_err(unavailable)?;
            let mut found = std::collections::HashMap::with_capacity(rows.len());
            for row in &rows {
                found.insert(col::<String>(row, 0)?, col::<String>(row, 1)?);
            }
            Ok(keys.iter().map(|key| found.remove(key)).collect())
        })
    }
}
