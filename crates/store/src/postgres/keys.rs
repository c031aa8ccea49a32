//! Keys ([`KeyStore`]): idempotent creates and rotations, each write
//! announced on `switchyard_keys` in its transaction.

use switchyard_governance::KeyRecord;

use super::{col, conflict_or_unavailable, unavailable, PostgresStore, KEYS_CHANNEL};
use crate::{from_json, to_json, Idempotency, KeyStore, StoreError, StoreFuture, Written};

/// An idempotent key write inside one transaction, announced on commit.
async fn write_key(
    store: &PostgresStore,
    scope: &str,
    record: KeyRecord,
    idempotency: Option<Idempotency>,
    insert: bool,
) -> Result<Written, StoreError> {
    let mut client = store.client().await?;
    let tx = client.transaction().await.map_err(unavailable)?;
    if let Some(idem) = &idempotency {
        // Two instances retrying one create: the second waits on this row.
        tx.execute(include_str!("keys/write_key_lock.sql"), &[&scope, &idem.key]).await.map_err(unavailable)?;
        tx.execute(include_str!("keys/write_key_delete_idempotency.sql"), &[&idem.oldest_ms()])
            .await
            .map_err(unavailable)?;
        let earlier = tx
            .query_opt(include_str!("keys/write_key_select_idempotency.sql"), &[&scope, &idem.key])
            .await
            .map_err(unavailable)?;
        if let Some(row) = earlier {
            let (fingerprint, id): (String, String) = (col(&row, 0)?, col(&row, 1)?);
            if fingerprint != idem.fingerprint {
                return Err(StoreError::Conflict("the idempotency key was used for another request".into()));
            }
            let text: Option<String> = tx
                .query_opt(include_str!("keys/write_key_select_keys.sql"), &[&id])
                .await
                .map_err(unavailable)?
                .map(|row| col(&row, 0))
                .transpose()?;
            return text.map(|t| from_json(&t).map(Written::Replayed)).ok_or(StoreError::NotFound)?;
        }
    }
    let stored = store_key(&tx, record, insert).await?;
    if let Some(idem) = idempotency {
        tx.execute(
            include_str!("keys/write_key_insert_idempotency.sql"),
            &[&scope, &idem.key, &idem.fingerprint, &stored.id, &idem.at_ms],
        )
        .await
        .map_err(conflict_or_unavailable)?;
    }
    tx.commit().await.map_err(unavailable)?;
    Ok(Written::New(stored))
}

/// Inserts `record`, or replaces the stored one when the checks allow it
/// (the row locked for the transaction, so two instances' writes of one
/// key are ordered and the later one sees the earlier).
async fn store_key(
    tx: &deadpool_postgres::Transaction<'_>,
    record: KeyRecord,
    insert: bool,
) -> Result<KeyRecord, StoreError> {
    let record = if insert {
        record
    } else {
        let row = tx
            .query_opt(include_str!("keys/store_key_select_keys.sql"), &[&record.id])
            .await
            .map_err(unavailable)?
            .ok_or(StoreError::NotFound)?;
        let stored: KeyRecord = from_json(col::<&str>(&row, 0)?)?;
        crate::checked_write(&stored, record)?
    };
    let json = to_json(&record)?;
    let aws = record.aws.as_ref().map(|a| a.access_key_id.clone());
    let hash = record.hash.to_hex();
    let changed = if insert {
        tx.execute(include_str!("keys/store_key_insert_keys.sql"), &[&record.id, &hash, &aws, &json]).await
    } else {
        tx.execute(include_str!("keys/store_key_update_keys.sql"), &[&record.id, &hash, &aws, &json]).await
    }
    .map_err(conflict_or_unavailable)?;
    if changed == 0 {
        return Err(StoreError::NotFound);
    }
    // Delivered to every listener when the transaction commits.
    tx.execute(include_str!("keys/store_key_notify.sql"), &[&KEYS_CHANNEL, &record.id]).await.map_err(unavailable)?;
    Ok(record)
}

impl KeyStore for PostgresStore {
    fn create_key(&self, record: KeyRecord, idempotency: Option<Idempotency>) -> StoreFuture<'_, Written> {
        Box::pin(write_key(self, "create", record, idempotency, true))
    }

    fn rotate_key(&self, record: KeyRecord, idempotency: Option<Idempotency>) -> StoreFuture<'_, Written> {
        Box::pin(async move {
            let scope = format!("rotate:{}", record.id);
            write_key(self, &scope, record, idempotency, false).await
        })
    }

    fn update_key(&self, record: KeyRecord) -> StoreFuture<'_, KeyRecord> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            let stored = store_key(&tx, record, false).await?;
            tx.commit().await.map_err(unavailable)?;
            Ok(stored)
        })
    }

    fn get_key(&self, id: &str) -> StoreFuture<'_, Option<KeyRecord>> {
        let id = id.to_owned();
        Box::pin(async move {
            let client = self.client().await?;
            let row = client.query_opt(include_str!("keys/get_key.sql"), &[&id]).await.map_err(unavailable)?;
            row.map(|row| from_json(col::<&str>(&row, 0)?)).transpose()
        })
    }

    fn list_keys(&self, after: Option<&str>, limit: usize) -> StoreFuture<'_, Vec<KeyRecord>> {
        let after = after.unwrap_or("").to_owned();
        Box::pin(async move {
            let client = self.client().await?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows =
                client.query(include_str!("keys/list_keys.sql"), &[&after, &limit]).await.map_err(unavailable)?;
            rows.iter().map(|row| from_json(col::<&str>(row, 0)?)).collect()
        })
    }
}
