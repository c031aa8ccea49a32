//! Which backend serves the records: the one place where the `storage:`
//! section's fields choose PostgreSQL, SQLite or memory, and whether a
//! ledger spool goes beside it. The binary and the conformance suite open
//! their stores here, so a new backend is one variant and one arm.

use std::path::Path;
use std::sync::Arc;

use crate::memory::MemoryStore;
use crate::postgres::PostgresStore;
use crate::sqlite::SqliteStore;
use crate::{StoreError, Stores};

/// Where the records live, as `storage:` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location<'a> {
    /// `storage.postgres_url`: a fleet's shared database. Chosen whenever a
    /// URL is given (config validation refuses one beside `sqlite_path`);
    /// other instances' key, group and config writes arrive as changes.
    Postgres(&'a str),
    /// `storage.sqlite_path` alone: one node's file. Its session pins
    /// outlive a restart in the same file (a fleet shares pins through
    /// Redis instead).
    Sqlite(&'a Path),
    /// Neither: records last as long as the process (tests, a gateway that
    /// only counts admin tokens).
    Memory,
}

impl<'a> Location<'a> {
    /// The backend the storage fields ask for: the URL first, then the file,
    /// else memory.
    pub fn of(postgres_url: Option<&'a str>, sqlite_path: Option<&'a Path>) -> Location<'a> {
        match (postgres_url, sqlite_path) {
            (Some(url), _) => Location::Postgres(url),
            (None, Some(path)) => Location::Sqlite(path),
            (None, None) => Location::Memory,
        }
    }

    /// Opens the backend (PostgreSQL connected and migrated, SQLite opened
    /// and migrated) with every concern served by it.
    pub async fn open(self) -> Result<Stores, StoreError> {
        Ok(match self {
            Location::Postgres(url) => Stores::shared(PostgresStore::connect(url).await?),
            Location::Sqlite(path) => {
                let sqlite = SqliteStore::open(path)?;
                Stores::of(sqlite.clone()).with_pins(Arc::new(sqlite))
            }
            Location::Memory => Stores::of(MemoryStore::new()),
        })
    }

    /// The ledger spool at `path`: a local SQLite file where a fleet's
    /// ledger rows wait while PostgreSQL is away. Only a PostgreSQL store
    /// has one (a local file or memory is never away).
    pub fn spool(self, path: Option<&Path>) -> Result<Option<SqliteStore>, StoreError> {
        match (self, path) {
            (Location::Postgres(_), Some(path)) => SqliteStore::open(path).map(Some),
            _ => Ok(None),
        }
    }
}
