//! The config as versioned documents, on the serving side: each change
//! recorded in governance's store (SQLite beside the file on one node,
//! PostgreSQL in a fleet), and the file's own text recorded when it
//! changes. (Serving the fleet's newest version, at boot and on the change
//! feed, is the reloader's: `reload::follow_versions`.)

use switchyard_state::{ApplyError, Gateway};
use switchyard_store::{ConfigVersion, StoreError};

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
