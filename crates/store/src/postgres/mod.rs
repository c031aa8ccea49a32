//! A fleet's store: PostgreSQL through a connection pool (deadpool), the
//! schema migrated at connect under an advisory lock (instances booting
//! together apply it once). Every key or group write sends a `NOTIFY` in
//! its transaction; one listening connection per instance turns those into
//! [`Change`]s, so a revocation on one instance reaches every instance's
//! key cache within the notification's round trip. When that connection
//! drops it reconnects with backoff and announces [`Change::Resync`].
//!
//! Plain TCP only (`sslmode=disable`/`prefer`); a URL that requires TLS is
//! refused at connect with that message.
//!
//! One wing a concern: each module below implements one store trait
//! (its SQL beside the code that binds its parameters); this module owns
//! the pool, the connection helpers and the column conversions they share.

mod audit;
mod batches;
mod content;
mod feed;
mod groups;
mod keys;
mod ledger;
mod migrate;
mod objects;
mod signatures;
mod versions;

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::broadcast;
use tokio_postgres::NoTls;

use crate::{Change, StoreError};
use feed::listen;
use migrate::migrate;

/// The notification channels.
const KEYS_CHANNEL: &str = "switchyard_keys";
const GROUPS_CHANNEL: &str = "switchyard_groups";
const CONFIG_CHANNEL: &str = "switchyard_config";

/// Connections per instance: admin calls and batched ledger writes are few.
const POOL_SIZE: usize = 8;

/// How long a store call may wait for a connection or an answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// A store in one PostgreSQL database.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    changes: broadcast::Sender<Change>,
}

/// Column `index` of `row`, as `T`; a schema this binary does not expect is
/// an error, never a panic.
fn col<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a tokio_postgres::Row, index: usize) -> Result<T, StoreError> {
    row.try_get(index).map_err(|err| StoreError::Unavailable(format!("postgres: column {index}: {err}")))
}

fn unavailable(err: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(err.to_string())
}

fn conflict_or_unavailable(err: tokio_postgres::Error) -> StoreError {
    match err.code() {
        Some(code) if *code == tokio_postgres::error::SqlState::UNIQUE_VIOLATION => {
            StoreError::Conflict(err.to_string())
        }
        _ => unavailable(err),
    }
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:pass@host:port/db`), brings the
    /// schema up to date and starts listening for other instances' changes.
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        let config: tokio_postgres::Config =
            url.parse().map_err(|err| StoreError::Unavailable(format!("storage.postgres_url: {err}")))?;
        if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
            return Err(StoreError::Unavailable(
                "storage.postgres_url asks for TLS (sslmode=require), which this build does not speak; reach \
                 PostgreSQL over a private network or a local proxy with sslmode=disable"
                    .into(),
            ));
        }
        let manager =
            Manager::from_config(config.clone(), NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .wait_timeout(Some(CALL_TIMEOUT))
            .create_timeout(Some(CALL_TIMEOUT))
            .recycle_timeout(Some(CALL_TIMEOUT))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(unavailable)?;
        migrate(&pool).await?;
        let (changes, _) = broadcast::channel(1024);
        // Listening before the caller reads anything: a change made between
        // its first read and the subscription would otherwise be missed.
        let (subscribed, listening) = tokio::sync::oneshot::channel();
        switchyard_tasks::service("postgres listen", listen(config, changes.clone(), subscribed));
        match tokio::time::timeout(CALL_TIMEOUT, listening).await {
            Ok(Ok(())) => Ok(PostgresStore { pool, changes }),
            _ => Err(StoreError::Unavailable("postgres: the change feed could not LISTEN".into())),
        }
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool.get().await.map_err(|err| StoreError::Unavailable(format!("postgres: {err}")))
    }
}

/// A token count as a column (BIGINT).
fn column(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// A column as a token count.
fn count(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// An `INTEGER` column's value.
fn int(value: u32) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}
