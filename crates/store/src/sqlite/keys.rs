//! Keys ([`KeyStore`]): idempotent creates and rotations in one
//! transaction each.

use rusqlite::{params, Connection, OptionalExtension};
use switchyard_governance::KeyRecord;

use super::{conflict_or_unavailable, unavailable, SqliteStore};
use crate::{from_json, to_json, Idempotency, KeyStore, StoreError, StoreFuture, Written};

/// An idempotent key write inside one transaction.
fn write_key(
    conn: &mut Connection,
    scope: &str,
    record: KeyRecord,
    idempotency: Option<Idempotency>,
    write: impl FnOnce(&rusqlite::Transaction<'_>, KeyRecord) -> Result<KeyRecord, StoreError>,
) -> Result<Written, StoreError> {
    let tx = conn.transaction().map_err(unavailable)?;
    if let Some(idem) = &idempotency {
        tx.execute(include_str!("keys/write_key_delete_idempotency.sql"), params![idem.oldest_ms()])
            .map_err(unavailable)?;
        let earlier: Option<(String, String)> = tx
            .query_row(include_str!("keys/write_key_select_idempotency.sql"), params![scope, idem.key], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .optional()
            .map_err(unavailable)?;
        if let Some((fingerprint, id)) = earlier {
            if fingerprint != idem.fingerprint {
                return Err(StoreError::Conflict("the idempotency key was used for another request".into()));
            }
            let text: Option<String> = tx
                .query_row(include_str!("keys/write_key_select_keys.sql"), params![id], |row| row.get(0))
                .optional()
                .map_err(unavailable)?;
            return text.map(|t| from_json(&t).map(Written::Replayed)).ok_or(StoreError::NotFound)?;
        }
    }
    let stored = write(&tx, record)?;
    if let Some(idem) = idempotency {
        tx.execute(
            include_str!("keys/write_key_insert_idempotency.sql"),
            params![scope, idem.key, idem.fingerprint, stored.id, idem.at_ms],
        )
        .map_err(conflict_or_unavailable)?;
    }
    tx.commit().map_err(unavailable)?;
    Ok(Written::New(stored))
}

fn insert_key(tx: &rusqlite::Transaction<'_>, record: KeyRecord) -> Result<KeyRecord, StoreError> {
    let aws = record.aws.as_ref().map(|a| a.access_key_id.clone());
    tx.execute(include_str!("keys/insert_key.sql"), params![record.id, record.hash.to_hex(), aws, to_json(&record)?])
        .map_err(conflict_or_unavailable)?;
    Ok(record)
}

/// Replaces a stored key with `record` when the checks allow it (read and
/// written in one transaction).
fn replace_key(tx: &rusqlite::Transaction<'_>, record: KeyRecord) -> Result<KeyRecord, StoreError> {
    let text: Option<String> = tx
        .query_row(include_str!("keys/replace_key_select_keys.sql"), params![record.id], |row| row.get(0))
        .optional()
        .map_err(unavailable)?;
    let stored: KeyRecord = from_json(&text.ok_or(StoreError::NotFound)?)?;
    let next = crate::checked_write(&stored, record)?;
    let aws = next.aws.as_ref().map(|a| a.access_key_id.clone());
    tx.execute(
        include_str!("keys/replace_key_update_keys.sql"),
        params![next.id, next.hash.to_hex(), aws, to_json(&next)?],
    )
    .map_err(conflict_or_unavailable)?;
    Ok(next)
}

impl KeyStore for SqliteStore {
    fn create_key(&self, record: KeyRecord, idempotency: Option<Idempotency>) -> StoreFuture<'_, Written> {
        self.run(move |conn| write_key(conn, "create", record, idempotency, insert_key))
    }

    fn rotate_key(&self, record: KeyRecord, idempotency: Option<Idempotency>) -> StoreFuture<'_, Written> {
        let scope = format!("rotate:{}", record.id);
        self.run(move |conn| write_key(conn, &scope, record, idempotency, replace_key))
    }

    fn update_key(&self, record: KeyRecord) -> StoreFuture<'_, KeyRecord> {
        self.run(move |conn| {
            let tx = conn.transaction().map_err(unavailable)?;
            let stored = replace_key(&tx, record)?;
            tx.commit().map_err(unavailable)?;
            Ok(stored)
        })
    }

    fn get_key(&self, id: &str) -> StoreFuture<'_, Option<KeyRecord>> {
        let id = id.to_owned();
        self.run(move |conn| {
            let text: Option<String> = conn
                .query_row(include_str!("keys/get_key.sql"), params![id], |row| row.get(0))
                .optional()
                .map_err(unavailable)?;
            text.map(|t| from_json(&t)).transpose()
        })
    }

    fn list_keys(&self, after: Option<&str>, limit: usize) -> StoreFuture<'_, Vec<KeyRecord>> {
        let after = after.unwrap_or("").to_owned();
        self.run(move |conn| {
            let mut statement = conn.prepare(include_str!("keys/list_keys.sql")).map_err(unavailable)?;
            let texts = statement
                .query_map(params![after, limit as i64], |row| row.get::<_, String>(0))
                .map_err(unavailable)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(unavailable)?;
            texts.iter().map(|t| from_json(t)).collect()
        })
    }
}
