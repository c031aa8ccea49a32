//! The audit log ([`AuditLog`]).

use super::{ready, MemoryStore};
use crate::{AuditEntry, AuditLog, StoreFuture, StoredAudit};

impl AuditLog for MemoryStore {
    fn record(&self, entry: AuditEntry) -> StoreFuture<'_, ()> {
        ready(self.with(|inner| {
            let id = inner.audit.last().map_or(1, |last| last.id + 1);
            inner.audit.push(StoredAudit { id, entry });
            Ok(())
        }))
    }

    fn purge(&self, before_ms: i64) -> StoreFuture<'_, u64> {
        ready(self.with(|inner| {
            let before = inner.audit.len();
            inner.audit.retain(|e| e.entry.at_ms >= before_ms);
            Ok((before - inner.audit.len()) as u64)
        }))
    }

    fn entries(&self, before: Option<i64>, limit: usize) -> StoreFuture<'_, Vec<StoredAudit>> {
        ready(self.with(|inner| {
            Ok(inner.audit.iter().rev().filter(|e| before.is_none_or(|b| e.id < b)).take(limit).cloned().collect())
        }))
    }
}
