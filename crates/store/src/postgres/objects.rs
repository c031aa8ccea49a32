//! Files and stored responses ([`ObjectStore`]): metadata rows and their
//! chunks.

use super::{col, int, unavailable, PostgresStore};
use crate::kept::{KeptObject, ObjectKind, ObjectStore, ORPHAN_CHUNKS_MS};
use crate::{StoreError, StoreFuture};

/// The columns of a kept object after its kind and owner.
const OBJECT_COLUMNS: &str = "id, created_ms, expires_ms, meta, size, chunks, user_tag";

/// An object from a row of [`OBJECT_COLUMNS`] (and its body, when asked).
fn object_of(kind: ObjectKind, owner: &str, row: &tokio_postgres::Row, body: bool) -> Result<KeptObject, StoreError> {
    Ok(KeptObject {
        kind,
        owner: owner.to_owned(),
        id: col(row, 0)?,
        created_ms: col(row, 1)?,
        expires_ms: col(row, 2)?,
        meta: col(row, 3)?,
        size: u64::try_from(col::<i64>(row, 4)?).unwrap_or(0),
        chunks: u32::try_from(col::<i32>(row, 5)?).unwrap_or(0),
        user_tag: col(row, 6)?,
        body: if body { col(row, 7)? } else { Vec::new() },
    })
}

impl ObjectStore for PostgresStore {
    fn put_object(&self, object: KeptObject) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            tx.execute(
                "INSERT INTO kept_objects (kind, owner, id, created_ms, expires_ms, meta, body, size, chunks, user_tag) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (kind, owner, id) DO UPDATE SET \
                 created_ms = EXCLUDED.created_ms, expires_ms = EXCLUDED.expires_ms, meta = EXCLUDED.meta, \
                 body = EXCLUDED.body, size = EXCLUDED.size, chunks = EXCLUDED.chunks, user_tag = EXCLUDED.user_tag",
                &[
                    &object.kind.as_str(),
                    &object.owner,
                    &object.id,
                    &object.created_ms,
                    &object.expires_ms,
                    &object.meta,
                    &object.body,
                    &i64::try_from(object.size).unwrap_or(i64::MAX),
                    &int(object.chunks),
                    &object.user_tag,
                ],
            )
            .await
            .map_err(unavailable)?;
            tx.execute(
                "DELETE FROM kept_chunks WHERE kind = $1 AND owner = $2 AND id = $3 AND seq >= $4",
                &[&object.kind.as_str(), &object.owner, &object.id, &int(object.chunks)],
            )
            .await
            .map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)
        })
    }

    fn put_chunk(
        &self,
        kind: ObjectKind,
        owner: String,
        id: String,
        seq: u32,
        at_ms: i64,
        data: Vec<u8>,
    ) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            client
                .execute(
                    "INSERT INTO kept_chunks (kind, owner, id, seq, at_ms, data) VALUES ($1, $2, $3, $4, $5, $6) \
                     ON CONFLICT (kind, owner, id, seq) DO UPDATE SET at_ms = EXCLUDED.at_ms, data = EXCLUDED.data",
                    &[&kind.as_str(), &owner, &id, &int(seq), &at_ms, &data],
                )
                .await
                .map_err(unavailable)?;
            Ok(())
        })
    }

    fn get_chunk(&self, kind: ObjectKind, owner: String, id: String, seq: u32) -> StoreFuture<'_, Option<Vec<u8>>> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT data FROM kept_chunks WHERE kind = $1 AND owner = $2 AND id = $3 AND seq = $4",
                    &[&kind.as_str(), &owner, &id, &int(seq)],
                )
                .await
                .map_err(unavailable)?;
            row.map(|row| col(&row, 0)).transpose()
        })
    }

    fn get_object(
        &self,
        kind: ObjectKind,
        owner: String,
        id: String,
        now_ms: i64,
    ) -> StoreFuture<'_, Option<KeptObject>> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    &format!(
                        "SELECT {OBJECT_COLUMNS}, body FROM kept_objects \
                         WHERE kind = $1 AND owner = $2 AND id = $3 AND (expires_ms IS NULL OR expires_ms > $4)"
                    ),
                    &[&kind.as_str(), &owner, &id, &now_ms],
                )
                .await
                .map_err(unavailable)?;
            row.map(|row| object_of(kind, &owner, &row, true)).transpose()
        })
    }

    fn list_objects(
        &self,
        kind: ObjectKind,
        owner: String,
        now_ms: i64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<KeptObject>> {
        Box::pin(async move {
            let client = self.client().await?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = client
                .query(
                    &format!(
                        "SELECT {OBJECT_COLUMNS} FROM kept_objects \
                         WHERE kind = $1 AND owner = $2 AND (expires_ms IS NULL OR expires_ms > $3) \
                         ORDER BY created_ms DESC, id DESC LIMIT $4"
                    ),
                    &[&kind.as_str(), &owner, &now_ms, &limit],
                )
                .await
                .map_err(unavailable)?;
            rows.iter().map(|row| object_of(kind, &owner, row, false)).collect()
        })
    }

    fn delete_object(&self, kind: ObjectKind, owner: String, id: String) -> StoreFuture<'_, bool> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            let removed = tx
                .execute(
                    "DELETE FROM kept_objects WHERE kind = $1 AND owner = $2 AND id = $3",
                    &[&kind.as_str(), &owner, &id],
                )
                .await
                .map_err(unavailable)?;
            tx.execute(
                "DELETE FROM kept_chunks WHERE kind = $1 AND owner = $2 AND id = $3",
                &[&kind.as_str(), &owner, &id],
            )
            .await
            .map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)?;
            Ok(removed > 0)
        })
    }

    fn purge_objects(&self, now_ms: i64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            tx.execute(
                "DELETE FROM kept_chunks c USING kept_objects o WHERE o.kind = c.kind AND o.owner = c.owner \
                 AND o.id = c.id AND o.expires_ms IS NOT NULL AND o.expires_ms <= $1",
                &[&now_ms],
            )
            .await
            .map_err(unavailable)?;
            let removed = tx
                .execute("DELETE FROM kept_objects WHERE expires_ms IS NOT NULL AND expires_ms <= $1", &[&now_ms])
                .await
                .map_err(unavailable)?;
            tx.execute(
                "DELETE FROM kept_chunks c WHERE c.at_ms <= $1 AND NOT EXISTS (SELECT 1 FROM kept_objects o \
                 WHERE o.kind = c.kind AND o.owner = c.owner AND o.id = c.id)",
                &[&(now_ms - ORPHAN_CHUNKS_MS)],
            )
            .await
            .map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)?;
            Ok(removed)
        })
    }

    fn erase_objects(&self, user_tag: String) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            tx.execute(
                "DELETE FROM kept_chunks c USING kept_objects o WHERE o.kind = c.kind AND o.owner = c.owner \
                 AND o.id = c.id AND o.user_tag = $1",
                &[&user_tag],
            )
            .await
            .map_err(unavailable)?;
            let removed =
                tx.execute("DELETE FROM kept_objects WHERE user_tag = $1", &[&user_tag]).await.map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)?;
            Ok(removed)
        })
    }

    fn object_bytes(&self, owner: String, now_ms: i64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_one(
                    "SELECT COALESCE(SUM(size), 0)::BIGINT FROM kept_objects \
                     WHERE owner = $1 AND (expires_ms IS NULL OR expires_ms > $2)",
                    &[&owner, &now_ms],
                )
                .await
                .map_err(unavailable)?;
            Ok(u64::try_from(col::<i64>(&row, 0)?).unwrap_or(0))
        })
    }
}
