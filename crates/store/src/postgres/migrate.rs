//! The schema: the migrations in order, applied at connect under an
//! advisory lock so instances booting together apply each once.

use deadpool_postgres::Pool;

use super::{col, unavailable};
use crate::StoreError;

/// The schema, in order; `switchyard_schema.version` is the count applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/postgres/0001_init.sql"),
    include_str!("../../migrations/postgres/0002_ledger_attempts.sql"),
    include_str!("../../migrations/postgres/0003_spend_hourly.sql"),
    include_str!("../../migrations/postgres/0004_audit_at.sql"),
    include_str!("../../migrations/postgres/0005_operations.sql"),
    include_str!("../../migrations/postgres/0006_call_signatures.sql"),
    include_str!("../../migrations/postgres/0007_ledger_notes.sql"),
    include_str!("../../migrations/postgres/0008_kept_content.sql"),
    include_str!("../../migrations/postgres/0009_cache_saved.sql"),
    include_str!("../../migrations/postgres/0010_end_user.sql"),
    include_str!("../../migrations/postgres/0011_config_versions.sql"),
    include_str!("../../migrations/postgres/0012_refusals.sql"),
    include_str!("../../migrations/postgres/0013_ingress.sql"),
    include_str!("../../migrations/postgres/0014_outcomes.sql"),
    include_str!("../../migrations/postgres/0015_kept.sql"),
    include_str!("../../migrations/postgres/0016_ledger_operation.sql"),
    include_str!("../../migrations/postgres/0017_kept_limits.sql"),
    include_str!("../../migrations/postgres/0018_ledger_batches.sql"),
    include_str!("../../migrations/postgres/0019_usage_kinds.sql"),
    include_str!("../../migrations/postgres/0020_charges.sql"),
];

/// Serialises migrations across instances (`pg_advisory_xact_lock`).
const MIGRATION_LOCK: i64 = 0x5357_5943_4844;

/// Applies the migrations this database lacks, once across instances.
pub(super) async fn migrate(pool: &Pool) -> Result<(), StoreError> {
    let mut client = pool.get().await.map_err(|err| StoreError::Unavailable(format!("postgres: {err}")))?;
    let tx = client.transaction().await.map_err(unavailable)?;
    tx.execute(include_str!("migrate/migrate_lock.sql"), &[&MIGRATION_LOCK]).await.map_err(unavailable)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS switchyard_schema (version INTEGER NOT NULL)")
        .await
        .map_err(unavailable)?;
    let applied: i32 = tx
        .query_opt(include_str!("migrate/migrate_select_switchyard_schema.sql"), &[])
        .await
        .map_err(unavailable)?
        .map_or(Ok(0), |row| col(&row, 0))?;
    let applied = crate::applied_migrations(i64::from(applied), MIGRATIONS.len())?;
    for (index, migration) in MIGRATIONS.iter().enumerate().skip(applied) {
        tx.batch_execute(migration).await.map_err(|err| unavailable(format!("migration {}: {err}", index + 1)))?;
    }
    let version = i32::try_from(MIGRATIONS.len()).unwrap_or(i32::MAX);
    tx.execute(include_str!("migrate/migrate_delete_switchyard_schema.sql"), &[]).await.map_err(unavailable)?;
    tx.execute(include_str!("migrate/migrate_insert_switchyard_schema.sql"), &[&version]).await.map_err(unavailable)?;
    tx.commit().await.map_err(unavailable)
}
