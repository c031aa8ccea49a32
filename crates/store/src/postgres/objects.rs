//! Files and stored responses ([`ObjectStore`]): metadata rows and their
//! chunks.

use super::{col, int, unavailable, PostgresStore};
use crate::kept::{KeptObject, ObjectKind, ObjectStore, ORPHAN_CHUNKS_MS};
use crate::{StoreError, StoreFuture};

/// An object from a row of its columns after its kind and owner (as
/// `objects/get_object.sql` selects them) (and its body, when asked).
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
                include_str!("objects/put_object_insert_kept_objects.sql"),
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
                include_str!("objects/put_object_delete_kept_chunks.sql"),
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
                    include_str!("objects/put_chunk.sql"),
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
                .query_opt(include_str!("objects/get_chunk.sql"), &[&kind.as_str(), &owner, &id, &int(seq)])
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
                .query_opt(include_str!("objects/get_object.sql"), &[&kind.as_str(), &owner, &id, &now_ms])
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
                .query(include_str!("objects/list_objects.sql"), &[&kind.as_str(), &owner, &now_ms, &limit])
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
                .execute(include_str!("objects/delete_object_delete_kept_objects.sql"), &[&kind.as_str(), &owner, &id])
                .await
                .map_err(unavailable)?;
            tx.execute(include_str!("objects/delete_object_delete_kept_chunks.sql"), &[&kind.as_str(), &owner, &id])
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
            tx.execute(include_str!("objects/purge_objects_delete_kept_chunks.sql"), &[&now_ms])
                .await
                .map_err(unavailable)?;
            let removed = tx
                .execute(include_str!("objects/purge_objects_delete_kept_objects.sql"), &[&now_ms])
                .await
                .map_err(unavailable)?;
            tx.execute(include_str!("objects/purge_objects_delete_kept_chunks_2.sql"), &[&(now_ms - ORPHAN_CHUNKS_MS)])
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
            tx.execute(include_str!("objects/erase_objects_delete_kept_chunks.sql"), &[&user_tag])
                .await
                .map_err(unavailable)?;
            let removed = tx
                .execute(include_str!("objects/erase_objects_delete_kept_objects.sql"), &[&user_tag])
                .await
                .map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)?;
            Ok(removed)
        })
    }

    fn object_bytes(&self, owner: String, now_ms: i64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_one(include_str!("objects/object_bytes.sql"), &[&owner, &now_ms])
                .await
                .map_err(unavailable)?;
            Ok(u64::try_from(col::<i64>(&row, 0)?).unwrap_or(0))
        })
    }
}
