//! Files and stored responses ([`ObjectStore`]): metadata rows and their
//! chunks.

use rusqlite::{params, OptionalExtension};

use super::{unavailable, SqliteStore};
use crate::kept::{KeptObject, ObjectKind, ObjectStore, ORPHAN_CHUNKS_MS};
use crate::StoreFuture;

/// The columns of a kept object after its kind and owner.
const OBJECT_COLUMNS: &str = "id, created_ms, expires_ms, meta, size, chunks, user_tag";

/// An object from a row of [`OBJECT_COLUMNS`] (and its body, when asked).
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
            tx.prepare_cached(
                "INSERT INTO kept_objects (kind, owner, id, created_ms, expires_ms, meta, body, size, chunks, user_tag) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (kind, owner, id) DO UPDATE SET \
                 created_ms = excluded.created_ms, expires_ms = excluded.expires_ms, meta = excluded.meta, \
                 body = excluded.body, size = excluded.size, chunks = excluded.chunks, user_tag = excluded.user_tag",
            )
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
            tx.prepare_cached("DELETE FROM kept_chunks WHERE kind = ?1 AND owner = ?2 AND id = ?3 AND seq >= ?4")
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
            conn.prepare_cached(
                "INSERT INTO kept_chunks (kind, owner, id, seq, at_ms, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                 ON CONFLICT (kind, owner, id, seq) DO UPDATE SET at_ms = excluded.at_ms, data = excluded.data",
            )
            .map_err(unavailable)?
            .execute(params![kind.as_str(), owner, id, seq, at_ms, data])
            .map_err(unavailable)?;
            Ok(())
        })
    }

    fn get_chunk(&self, kind: ObjectKind, owner: String, id: String, seq: u32) -> StoreFuture<'_, Option<Vec<u8>>> {
        self.run(move |conn| {
            conn.prepare_cached("SELECT data FROM kept_chunks WHERE kind = ?1 AND owner = ?2 AND id = ?3 AND seq = ?4")
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
            conn.prepare_cached(&format!(
                "SELECT {OBJECT_COLUMNS}, body FROM kept_objects \
                 WHERE kind = ?1 AND owner = ?2 AND id = ?3 AND (expires_ms IS NULL OR expires_ms > ?4)"
            ))
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
            let mut query = conn
                .prepare_cached(&format!(
                    "SELECT {OBJECT_COLUMNS} FROM kept_objects \
                     WHERE kind = ?1 AND owner = ?2 AND (expires_ms IS NULL OR expires_ms > ?3) \
                     ORDER BY created_ms DESC, id DESC LIMIT ?4"
                ))
                .map_err(unavailable)?;
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
                    "DELETE FROM kept_objects WHERE kind = ?1 AND owner = ?2 AND id = ?3",
                    params![kind.as_str(), owner, id],
                )
                .map_err(unavailable)?;
            tx.execute(
                "DELETE FROM kept_chunks WHERE kind = ?1 AND owner = ?2 AND id = ?3",
                params![kind.as_str(), owner, id],
            )
            .map_err(unavailable)?;
            tx.commit().map_err(unavailable)?;
            Ok(removed > 0)
        })
    }

    fn purge_objects(&self, now_ms: i64) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            tx.execute(
                "DELETE FROM kept_chunks WHERE EXISTS (SELECT 1 FROM kept_objects o WHERE o.kind = kept_chunks.kind \
                 AND o.owner = kept_chunks.owner AND o.id = kept_chunks.id AND o.expires_ms IS NOT NULL AND o.expires_ms <= ?1)",
                params![now_ms],
            )
            .map_err(unavailable)?;
            let removed = tx
                .execute("DELETE FROM kept_objects WHERE expires_ms IS NOT NULL AND expires_ms <= ?1", params![now_ms])
                .map_err(unavailable)?;
            tx.execute(
                "DELETE FROM kept_chunks WHERE at_ms <= ?1 AND NOT EXISTS (SELECT 1 FROM kept_objects o \
                 WHERE o.kind = kept_chunks.kind AND o.owner = kept_chunks.owner AND o.id = kept_chunks.id)",
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
            tx.execute(
                "DELETE FROM kept_chunks WHERE EXISTS (SELECT 1 FROM kept_objects o WHERE o.kind = kept_chunks.kind \
                 AND o.owner = kept_chunks.owner AND o.id = kept_chunks.id AND o.user_tag = ?1)",
                params![user_tag],
            )
            .map_err(unavailable)?;
            let removed =
                tx.execute("DELETE FROM kept_objects WHERE user_tag = ?1", params![user_tag]).map_err(unavailable)?;
            tx.commit().map_err(unavailable)?;
            Ok(removed as u64)
        })
    }

    fn object_bytes(&self, owner: String, now_ms: i64) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            let bytes: i64 = conn
                .prepare_cached(
                    "SELECT COALESCE(SUM(size), 0) FROM kept_objects \
                     WHERE owner = ?1 AND (expires_ms IS NULL OR expires_ms > ?2)",
                )
                .map_err(unavailable)?
                .query_row(params![owner, now_ms], |row| row.get(0))
                .map_err(unavailable)?;
            Ok(bytes.max(0) as u64)
        })
    }
}
