//! The schema: the migrations in order, applied at open (`PRAGMA
//! user_version` counts those applied).

use rusqlite::Connection;

use super::unavailable;
use crate::StoreError;

/// The schema, in order; `user_version` is the count applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/sqlite/0001_init.sql"),
    include_str!("../../migrations/sqlite/0002_ledger_entry.sql"),
    include_str!("../../migrations/sqlite/0003_ledger_attempts.sql"),
    include_str!("../../migrations/sqlite/0004_spend_hourly.sql"),
    include_str!("../../migrations/sqlite/0005_audit_at.sql"),
    include_str!("../../migrations/sqlite/0006_operations.sql"),
    include_str!("../../migrations/sqlite/0007_call_signatures.sql"),
    include_str!("../../migrations/sqlite/0008_ledger_notes.sql"),
    include_str!("../../migrations/sqlite/0009_kept_content.sql"),
    include_str!("../../migrations/sqlite/0010_cache_saved.sql"),
    include_str!("../../migrations/sqlite/0011_end_user.sql"),
    include_str!("../../migrations/sqlite/0012_config_versions.sql"),
    include_str!("../../migrations/sqlite/0013_ingress.sql"),
    include_str!("../../migrations/sqlite/0014_outcomes.sql"),
    include_str!("../../migrations/sqlite/0015_kept.sql"),
    include_str!("../../migrations/sqlite/0016_ledger_operation.sql"),
    include_str!("../../migrations/sqlite/0017_kept_limits.sql"),
    include_str!("../../migrations/sqlite/0018_refusals_counted.sql"),
    include_str!("../../migrations/sqlite/0019_usage_kinds.sql"),
    include_str!("../../migrations/sqlite/0020_charges.sql"),
    include_str!("../../migrations/sqlite/0021_session_pins.sql"),
];

/// Applies the migrations `conn` lacks, each in its own transaction with
/// the version it brings.
pub(super) fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let applied: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).map_err(unavailable)?;
    let applied = crate::applied_migrations(applied, MIGRATIONS.len())?;
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(applied) {
        conn.execute_batch(&format!("BEGIN;\n{migration}\nPRAGMA user_version = {};\nCOMMIT;", index + 1))
            .map_err(|err| unavailable(format!("migration {}: {err}", index + 1)))?;
    }
    Ok(())
}
