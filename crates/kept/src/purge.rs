//! What callers' keeps outlived, removed from the store now and every hour:
//! objects past their expiry (files, stored responses) with their chunks,
//! the chunks of uploads a crash cut short, and batches staged and never
//! opened. Until a purge runs, an expired object is already found by no one.

use std::time::Duration;

use switchyard_state::kept::KeptStores;

/// How often the purge runs.
const EVERY: Duration = Duration::from_secs(3600);

/// Starts the purge over `kept`; it runs for the life of the process.
pub fn spawn(kept: KeptStores) {
    switchyard_tasks::service("kept purge", async move {
        let mut ticker = tokio::time::interval(EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            purge(&kept, crate::now_ms()).await;
        }
    });
}

/// Removes what expired or was abandoned by `now_ms`.
pub async fn purge(kept: &KeptStores, now_ms: i64) {
    match kept.objects.purge_objects(now_ms).await {
        Ok(0) => {}
        Ok(removed) => tracing::info!(removed, "expired files and stored responses purged"),
        Err(err) => tracing::warn!(error = %err, "the purge of expired files and responses failed; retried in an hour"),
    }
    match kept.batches.purge_batches(now_ms).await {
        Ok(0) => {}
        Ok(removed) => tracing::info!(removed, "batches abandoned while they were submitted purged"),
        Err(err) => tracing::warn!(error = %err, "the purge of abandoned batches failed; retried in an hour"),
    }
}
