//! The change feed: one LISTEN connection per instance turns other
//! instances' `NOTIFY`s into [`Change`]s, reconnecting with backoff.

use std::time::Duration;

use tokio::sync::broadcast;
use tokio_postgres::{AsyncMessage, NoTls};

use super::{PostgresStore, CONFIG_CHANNEL, GROUPS_CHANNEL, KEYS_CHANNEL};
use crate::{Change, ChangeFeed};

/// One connection that LISTENs for the other instances' changes, for the
/// life of the process; reconnects with backoff and asks for a resync.
pub(super) async fn listen(
    config: tokio_postgres::Config,
    changes: broadcast::Sender<Change>,
    ready: tokio::sync::oneshot::Sender<()>,
) {
    let mut ready = Some(ready);
    let mut backoff = Duration::from_millis(100);
    let mut connected_before = false;
    loop {
        match config.connect(NoTls).await {
            Ok((client, mut connection)) => {
                let statement = format!("LISTEN {KEYS_CHANNEL}; LISTEN {GROUPS_CHANNEL}; LISTEN {CONFIG_CHANNEL}");
                let subscribe = client.batch_execute(&statement);
                // The connection must be polled for the LISTEN to complete.
                let subscribed = tokio::select! {
                    result = subscribe => result.is_ok(),
                    _ = std::future::poll_fn(|cx| connection.poll_message(cx)) => false,
                };
                if subscribed {
                    backoff = Duration::from_millis(100);
                    if connected_before {
                        let _ = changes.send(Change::Resync);
                    }
                    connected_before = true;
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(());
                    }
                    while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                        let Ok(AsyncMessage::Notification(note)) = message else {
                            if message.is_err() {
                                break;
                            }
                            continue;
                        };
                        let change = match note.channel() {
                            KEYS_CHANNEL => Change::Key(note.payload().to_owned()),
                            CONFIG_CHANNEL => Change::Config(note.payload().parse().unwrap_or(0)),
                            _ => Change::Groups,
                        };
                        let _ = changes.send(change);
                    }
                }
                drop(client);
                tracing::warn!("postgres change feed lost its connection; reconnecting");
            }
            Err(err) => tracing::warn!(error = %err, ?backoff, "postgres change feed cannot connect; retrying"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

impl ChangeFeed for PostgresStore {
    fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }
}
