//! The config as versioned documents, on the serving side: each change
//! recorded in governance's store (SQLite beside the file on one node,
//! PostgreSQL in a fleet), the file's own text recorded when it changes,
//! and a fleet's instances following the newest version through the
//! store's change feed. Which text wins at boot: the file's on one node
//! or with `config.locked` (GitOps: the file is the source), else a fleet
//! store's newest version.

use std::sync::Arc;

use switchyard_state::{ApplyError, Gateway};
use switchyard_store::{Change, ConfigVersion, StoreError};

use crate::reload::Reloader;

/// The newest recorded version, if any.
pub async fn newest(gateway: &Gateway) -> Result<Option<ConfigVersion>, StoreError> {
    let Some(governance) = &gateway.governance else { return Ok(None) };
    Ok(governance.stores.configs.config_versions(None, 1).await?.into_iter().next())
}

/// Records `text` as the version after `after`, by `author`.
pub async fn append(
    gateway: &Gateway,
    after: i64,
    text: &str,
    author: &str,
    message: &str,
) -> Result<ConfigVersion, ApplyError> {
    let Some(governance) = &gateway.governance else {
        return Err(ApplyError::Store(
            "config versions are kept by governance's store: configure admin tokens or storage".into(),
        ));
    };
    let version = ConfigVersion {
        version: 0,
        at_ms: switchyard_state::governance::now_ms() as i64,
        author: author.to_owned(),
        message: message.to_owned(),
        text: text.to_owned(),
    };
    match governance.stores.configs.append_config(after, version).await {
        Ok(stored) => Ok(stored),
        Err(StoreError::Stale) => {
            let newest = newest(gateway).await.ok().flatten().map_or(0, |v| v.version);
            Err(ApplyError::Stale { newest })
        }
        Err(err) => Err(ApplyError::Store(err.to_string())),
    }
}

/// Records `text` as a new version when it is not the newest one's (the
/// file read at boot or on a reload). A failure is logged: serving goes on.
pub async fn record_if_changed(gateway: &Gateway, text: &str, author: &str, message: &str) {
    if gateway.governance.is_none() {
        return;
    }
    for _ in 0..3 {
        let after = match newest(gateway).await {
            Ok(Some(newest)) if newest.text == text => return,
            Ok(newest) => newest.map_or(0, |v| v.version),
            Err(err) => {
                tracing::warn!(error = %err, "the config's versions cannot be read; this change is not recorded");
                return;
            }
        };
        match append(gateway, after, text, author, message).await {
            Ok(version) => {
                tracing::info!(version = version.version, author, "config version recorded");
                return;
            }
            Err(ApplyError::Stale { .. }) => continue,
            Err(err) => {
                tracing::warn!(error = %err, "the config's new version could not be recorded");
                return;
            }
        }
    }
}

/// At boot: the running text recorded, or (a fleet, unlocked) the store's
/// newest version served instead; then, in a fleet, every new version
/// another instance records is served here too.
pub async fn start(reloader: &Arc<Reloader>) {
    let gateway = reloader.current();
    let Some(governance) = gateway.governance.clone() else { return };
    let fleet = governance.stores.changes.is_some();
    let locked = gateway.config.control.locked;
    let running = gateway.config.source.to_string();
    match newest(&gateway).await {
        Ok(Some(newest)) if fleet && !locked && newest.text != running => follow(reloader, &newest).await,
        Ok(_) => record_if_changed(&gateway, &running, "file", "the file at boot").await,
        Err(err) => tracing::warn!(error = %err, "the config's versions cannot be read at boot"),
    }
    let (Some(feed), false) = (&governance.stores.changes, locked) else { return };
    let mut changes = feed.subscribe();
    let weak = Arc::downgrade(reloader);
    tokio::spawn(async move {
        loop {
            let change = changes.recv().await;
            let Some(reloader) = weak.upgrade() else { return };
            match change {
                Ok(Change::Config(_) | Change::Resync) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    let current = reloader.current();
                    if let Ok(Some(newest)) = newest(&current).await {
                        if newest.text != *current.config.source {
                            follow(&reloader, &newest).await;
                        }
                    }
                }
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    });
}

/// Serves a version another instance recorded.
async fn follow(reloader: &Arc<Reloader>, version: &ConfigVersion) {
    match reloader.apply(&version.text, None).await {
        Ok(_) => {
            tracing::info!(version = version.version, author = %version.author, "config version applied from the fleet")
        }
        Err(err) => {
            tracing::error!(version = version.version, error = %err, "a config version from the fleet cannot be served here; the running config stays")
        }
    }
}
