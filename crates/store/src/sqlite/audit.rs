//! The audit log ([`AuditLog`]).

use rusqlite::params;

use super::{unavailable, SqliteStore};
use crate::{AuditEntry, AuditLog, StoreFuture, StoredAudit};

impl AuditLog for SqliteStore {
    fn record(&self, entry: AuditEntry) -> StoreFuture<'_, ()> {
        self.run(move |conn| {
            conn.execute(
                "INSERT INTO audit (at_ms, actor, action, target, outcome) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![entry.at_ms, entry.actor, entry.action, entry.target, entry.outcome],
            )
            .map_err(unavailable)?;
            Ok(())
        })
    }

    fn purge(&self, before_ms: i64) -> StoreFuture<'_, u64> {
        self.run(move |conn| {
            let removed =
                conn.execute("DELETE FROM audit WHERE at_ms < ?1", params![before_ms]).map_err(unavailable)?;
            Ok(removed as u64)
        })
    }

    fn entries(&self, before: Option<i64>, limit: usize) -> StoreFuture<'_, Vec<StoredAudit>> {
        self.run(move |conn| {
            let mut statement = conn
                .prepare_cached(
                    "SELECT id, at_ms, actor, action, target, outcome FROM audit WHERE (?1 IS NULL OR id < ?1) \
                     ORDER BY id DESC LIMIT ?2",
                )
                .map_err(unavailable)?;
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
