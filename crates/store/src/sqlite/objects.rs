//! Files and stored responses ([`ObjectStore`]): metadata rows and their
//! chunks.

use rusqlite::{params, OptionalExtension};

use super::{unavailable, SqliteStore};
use crate::kept::{KeptObject, ObjectKind, ObjectStore, ORPHAN_CHUNKS_MS};
use crate::StoreFuture;

/// An object from a row of its columns after its kind and owner (as
/// `objects/get_object.sql` selects them) (and its body, when asked).
fn object_of(kind: ObjectKind, owner: &str, row: &rusqlite::Row<'_>, body: bool) -> rusqlite::Result<KeptObject> {
    Ok(KeptObject {
        kind,
        owner: owner.to_owned(),
        id: row.get(0)?,
        created_ms: row.get(1)?,
        expires_ms: row.get(2)?,
        meta: row.get(3)?,
        size: row.get::<_, i64>(4)?.max(0) as u64,
        chunks: row.get(5)?,
        user_tag: row.get(6)?,
        body: if body { row.get(7)? } else { Vec::new() },
    })
}

impl ObjectStore for SqliteStore {
    fn put_object(&self, object: KeptObject) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            tx.prepare_cached(include_str!("objects/put_object_insert_kept_objects.sql"))
                .map_err(unavailable)?
                .execute(params![
                    object.kind.as_str(),
                    object.owner,
                    object.id,
                    object.created_ms,
                    object.expires_ms,
                    object.meta,
                    object.body,
                    i64::try_from(object.size).unwrap_or(i64::MAX),
                    object.chunks,
                    object.user_tag,
                ])
                .map_err(unavailable)?;
            tx.prepare_cached(include_str!("objects/put_object_delete_kept_chunks.sql"))
                .map_err(unavailable)?
                .execute(params![object.kind.as_str(), object.owner, object.id, object.chunks])
                .map_err(unavailable)?;
            tx.commit().map_err(unavailable)
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
        self.run(move |conn| {
            conn.prepare_cached(include_str!("objects/put_chunk.sql"))
                .map_err(unavailable)?
                .execute(params![kind.as_str(), owner, id, seq, at_ms, data])
                .map_err(unavailable)?;
            Ok(())
        })
    }

    fn get_chunk(&self, kind: ObjectKind, owner: String, id: String, seq: u32) -> StoreFuture<'_, Option<Vec<u8>>> {
        self.run(move |conn| {
            conn.prepare_cached(include_str!("objects/get_chunk.sql"))
                .map_err(unavailable)?
                .query_row(params![kind.as_str(), owner, id, seq], |row| row.get(0))
                .optional()
                .map_err(unavailable)
        })
    }

    fn get_object(
        &self,
        kind: ObjectKind,
        owner: String,
        id: String,
        now_ms: i64,
    ) -> StoreFuture<'_, Option<KeptObject>> {
        self.run(move |conn| {
            conn.prepare_cached(include_str!("objects/get_object.sql"))
                .map_err(unavailable)?
                .query_row(params![kind.as_str(), owner, id, now_ms], |row| object_of(kind, &owner, row, true))
                .optional()
                .map_err(unavailable)
        })
    }

    fn list_objects(
        &self,
        kind: ObjectKind,
        owner: String,
        now_ms: i64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<KeptObject>> {
        self.run(move |conn| {
            let mut query = conn.prepare_cached(include_str!("objects/list_objects.sql")).map_err(unavailable)?;
            let rows = query
                .query_map(params![kind.as_str(), owner, now_ms, limit as i64], |row| {
                    object_of(kind, &owner, row, false)
                })
                .map_err(unavailable)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(unavailable)
        })
    }

    fn delete_object(&self, kind: ObjectKind, owner: String, id: String) -> StoreFuture<'_, bool> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            let removed = tx
                .execute(
                    include_str!("objects/delete_object_delete_kept_objects.sql"),
                    params![kind.as_str(), owner, id],
                )
                .map_err(unavailable)?;
            tx.execute(include_str!("objects/delete_object_delete_kept_chunks.sql"), params![kind.as_str(), owner, id])
                .map_err(unavailable)?;
            tx.commit().map_err(unavailable)?;
            Ok(removed > 0)
        })
    }

    fn purge_objects(&self, now_ms: i64) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            tx.execute(include_str!("objects/purge_objects_delete_kept_chunks.sql"), params![now_ms])
                .map_err(unavailable)?;
            let removed = tx
                .execute(include_str!("objects/purge_objects_delete_kept_objects.sql"), params![now_ms])
                .map_err(unavailable)?;
            tx.execute(
                include_str!("objects/purge_objects_delete_kept_chunks_2.sql"),
                params![now_ms - ORPHAN_CHUNKS_MS],
            )
            .map_err(unavailable)?;
            tx.commit().map_err(unavailable)?;
            Ok(removed as u64)
        })
    }

    fn erase_objects(&self, user_tag: String) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            tx.execute(include_str!("objects/erase_objects_delete_kept_chunks.sql"), params![user_tag])
                .map_err(unavailable)?;
            let removed = tx
                .execute(include_str!("objects/erase_objects_delete_kept_objects.sql"), params![user_tag])
                .map_err(unavailable)?;
            tx.commit().map_err(unavailable)?;
            Ok(removed as u64)
        })
    }

    fn object_bytes(&self, owner: String, now_ms: i64) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            let bytes: i64 = conn
                .prepare_cached(include_str!("objects/object_bytes.sql"))
                .map_err(unavailable)?
                .query_row(params![owner, now_ms], |row| row.get(0))
                .map_err(unavailable)?;
            Ok(bytes.max(0) as u64)
        })
    }
}
