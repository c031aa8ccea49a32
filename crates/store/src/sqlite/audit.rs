//! The audit log ([`AuditLog`]).

use rusqlite::params;

use super::{unavailable, SqliteStore};
use crate::{AuditEntry, AuditLog, StoreFuture, StoredAudit};

impl AuditLog for SqliteStore {
    fn record(&self, entry: AuditEntry) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            conn.execute(
                include_str!("audit/record.sql"),
                params![entry.at_ms, entry.actor, entry.action, entry.target, entry.outcome],
            )
            .map_err(unavailable)?;
            Ok(())
        })
    }

    fn purge(&self, before_ms: i64) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            let removed = conn.execute(include_str!("audit/purge.sql"), params![before_ms]).map_err(unavailable)?;
            Ok(removed as u64)
        })
    }

    fn entries(&self, before: Option<i64>, limit: usize) -> StoreFuture<'_, Vec<StoredAudit>> {
        self.run(move |conn| {
            let mut statement = conn.prepare_cached(include_str!("audit/entries.sql")).map_err(unavailable)?;
            let entries = statement
                .query_map(params![before, limit as i64], |row| {
                    Ok(StoredAudit {
                        id: row.get(0)?,
                        entry: AuditEntry {
                            at_ms: row.get(1)?,
                            actor: row.get(2)?,
                            action: row.get(3)?,
                            target: row.get(4)?,
                            outcome: row.get(5)?,
                        },
                    })
                })
                .map_err(unavailable)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(unavailable)?;
            Ok(entries)
        })
    }
}
