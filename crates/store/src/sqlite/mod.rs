//! The single-node store: one SQLite file in WAL mode, migrations embedded
//! and applied at open (`PRAGMA user_version` records the schema). SQLite
//! calls block, so each runs on tokio's blocking pool, one at a time on the
//! one connection (writes are batched by the caller, reads are rare).
//!
//! One wing a concern: each module below implements one store trait
//! (its SQL beside the code that binds its parameters); this module owns
//! the connection, its setup and the error mapping they share.

mod audit;
mod batches;
mod content;
mod groups;
mod keys;
mod ledger;
mod migrate;
mod objects;
mod pins;
mod signatures;
mod versions;

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::Connection;

use crate::{StoreError, StoreFuture};
use migrate::migrate;

/// Prepared statements the connection keeps (the store runs about 30 kinds).
const STATEMENTS_KEPT: usize = 64;

/// A store in one SQLite file.
#[derive(Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
}

fn unavailable(err: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(err.to_string())
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and brings its
    /// schema up to date.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let conn = Connection::open(path).map_err(|err| unavailable(format!("{}: {err}", path.display())))?;
        SqliteStore::init(conn)
    }

    /// A private in-memory database (tests).
    pub fn in_memory() -> Result<SqliteStore, StoreError> {
        SqliteStore::init(Connection::open_in_memory().map_err(unavailable)?)
    }

    fn init(conn: Connection) -> Result<SqliteStore, StoreError> {
        conn.pragma_update(None, "journal_mode", "WAL").map_err(unavailable)?;
        // WAL with NORMAL sync: a crash of the process loses nothing
        // committed; a power loss may lose the last transactions.
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(unavailable)?;
        conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(unavailable)?;
        // Every statement the store runs stays prepared (rusqlite keeps 16 by
        // default; the store has about 30, and the ledger's 32-row insert is
        // dear to prepare again).
        conn.set_prepared_statement_cache_capacity(STATEMENTS_KEPT);
        migrate(&conn)?;
        Ok(SqliteStore { conn: Arc::new(Mutex::new(conn)) })
    }

    /// Runs `f` on the connection on the blocking pool.
    fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> StoreFuture<'_, T> {
        let conn = self.conn.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || f(&mut conn.lock().unwrap_or_else(PoisonError::into_inner)))
                .await
                .map_err(unavailable)?
        })
    }
}

fn conflict_or_unavailable(err: rusqlite::Error) -> StoreError {
    match err.sqlite_error_code() {
        Some(rusqlite::ErrorCode::ConstraintViolation) => StoreError::Conflict(err.to_string()),
        _ => unavailable(err),
    }
}
