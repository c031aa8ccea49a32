//! The audit log ([`AuditLog`]).

use super::{col, column, unavailable, PostgresStore};
use crate::{AuditEntry, AuditLog, StoreFuture, StoredAudit};

impl AuditLog for PostgresStore {
    fn record(&self, entry: AuditEntry) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            let outcome = i32::from(entry.outcome);
            client
                .execute(
                    include_str!("audit/record.sql"),
                    &[&entry.at_ms, &entry.actor, &entry.action, &entry.target, &outcome],
                )
                .await
                .map_err(unavailable)?;
            Ok(())
        })
    }

    fn purge(&self, before_ms: i64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            client.execute(include_str!("audit/purge.sql"), &[&before_ms]).await.map_err(unavailable)
        })
    }

    fn entries(&self, before: Option<i64>, limit: usize) -> StoreFuture<'_, Vec<StoredAudit>> {
        Box::pin(async move {
            let client = self.client().await?;
            let limit = column(limit as u64);
            let rows =
                client.query(include_str!("audit/entries.sql"), &[&before, &limit]).await.map_err(unavailable)?;
            rows.iter()
                .map(|row| {
                    Ok(StoredAudit {
                        id: col(row, 0)?,
                        entry: AuditEntry {
                            at_ms: col(row, 1)?,
                            actor: col(row, 2)?,
                            action: col(row, 3)?,
                            target: col(row, 4)?,
                            outcome: u16::try_from(col::<i32>(row, 5)?).unwrap_or(0),
                        },
                    })
                })
                .collect()
        })
    }
}
