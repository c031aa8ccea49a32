//! The audit log ([`AuditLog`]): every admin mutation attempt, each text
//! bounded.

use serde::{Deserialize, Serialize};

use crate::StoreFuture;

/// One admin mutation attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When (Unix ms).
    pub at_ms: i64,
    /// Who: the admin token's name, never the token.
    pub actor: String,
    /// What (`POST /api/v1/admin/keys`).
    pub action: String,
    /// On what (a key id, a group name), when known.
    pub target: Option<String>,
    /// The status answered.
    pub outcome: u16,
}

/// The most an audit entry keeps of each of its texts (bytes): a longer
/// path, actor or target is cut, so no caller's request can make a row of
/// more than a few hundred bytes.
pub const AUDIT_TEXT_BYTES: usize = 256;

impl AuditEntry {
    /// The entry with each text cut to [`AUDIT_TEXT_BYTES`] (at a character
    /// boundary, marked with `…`).
    pub fn bounded(self) -> AuditEntry {
        AuditEntry {
            actor: cut(self.actor, AUDIT_TEXT_BYTES),
            action: cut(self.action, AUDIT_TEXT_BYTES),
            target: self.target.map(|t| cut(t, AUDIT_TEXT_BYTES)),
            ..self
        }
    }
}

fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max - '…'.len_utf8();
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// An audit entry with its position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredAudit {
    /// Increasing id (the cursor).
    pub id: i64,
    /// The entry.
    #[serde(flatten)]
    pub entry: AuditEntry,
}

/// Admin mutation attempts.
pub trait AuditLog: Send + Sync {
    /// Appends an entry.
    fn record(&self, entry: AuditEntry) -> StoreFuture<'_, ()>;
    /// Entries newest first, before `before`, at most `limit`.
    fn entries(&self, before: Option<i64>, limit: usize) -> StoreFuture<'_, Vec<StoredAudit>>;
    /// Removes the entries older than `before_ms`; returns how many.
    fn purge(&self, before_ms: i64) -> StoreFuture<'_, u64>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_audit_entry_keeps_a_few_hundred_bytes_of_each_text() {
        let long = AuditEntry {
            at_ms: 1,
            actor: "unauthenticated".into(),
            action: format!("POST /api/v1/admin/{}", "é".repeat(10_000)),
            target: Some("x".repeat(1_000)),
            outcome: 401,
        }
        .bounded();
        assert!(long.action.len() <= AUDIT_TEXT_BYTES && long.action.ends_with('…'), "{}", long.action.len());
        assert!(long.target.as_ref().is_some_and(|t| t.len() <= AUDIT_TEXT_BYTES));
        assert_eq!(long.actor, "unauthenticated");
    }
}
