//! Governance's series for `/metrics`: refusals by reason, spend by key and
//! group in their current windows, reservations outstanding, the fleet's
//! Redis and the ledger queue.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use switchyard_governance::BucketId;

use super::{now_ms, CachedKey, Governance, Refused};

/// Governance's series for `/metrics`: refusals by reason, spend by key and
/// group in their current budget windows, reservations outstanding, and the
/// ledger queue and writer.
pub fn encode_metrics(
    governance: &Governance,
    e: &mut prometheus_client::encoding::DescriptorEncoder,
) -> Result<(), std::fmt::Error> {
    use switchyard_telemetry::encode::{encode_counters, encode_gauges};
    encode_counters(
        e,
        "switchyard_governance_refusals",
        "Requests governance refused, by reason.",
        Refused::ALL.iter().enumerate().map(|(index, why)| {
            (vec![("reason", why.as_str())], governance.stats.refused[index].load(Ordering::Relaxed))
        }),
    )?;
    encode_counters(
        e,
        "switchyard_refusals_unlogged",
        "Refusals past the request log's limit of rows a minute, counted on one row per minute and reason.",
        std::iter::once((Vec::new(), governance.ledger.as_ref().map_or(0, |ledger| ledger.refusals_past_limit()))),
    )?;
    let now = now_ms();
    let keys: Vec<Arc<CachedKey>> = governance.keys.load().by_id.values().cloned().collect();
    let key_spend: Vec<(Arc<CachedKey>, f64)> = keys
        .into_iter()
        .filter_map(|key| {
            let view = governance.governor().view(&BucketId::Key(key.id.clone()), now)?;
            (view.spent > 0).then(|| (key, switchyard_governance::money::usd(view.spent)))
        })
        .collect();
    encode_gauges(
        e,
        "switchyard_key_spend_usd",
        "Spend of each key in its budget's current window (USD, derived from tokens at today's prices).",
        key_spend.iter().map(|(key, usd)| (vec![("key", &*key.id)], *usd)),
    )?;
    let groups = governance.groups();
    let group_spend: Vec<(&str, f64)> = groups
        .iter()
        .filter_map(|group| {
            let view = governance.governor().view(&BucketId::Group(Arc::from(group.name.as_str())), now)?;
            (view.spent > 0).then(|| (group.name.as_str(), switchyard_governance::money::usd(view.spent)))
        })
        .collect();
    encode_gauges(
        e,
        "switchyard_group_spend_usd",
        "Spend of each group's subtree in its budget's current window (USD).",
        group_spend.iter().map(|(name, usd)| (vec![("group", *name)], *usd)),
    )?;
    // Each watched budget's pace and, when it runs out before its window
    // ends, in how long.
    let outlooks = governance.budget_outlooks(now);
    let burning: Vec<(&str, f64)> = outlooks
        .iter()
        .filter_map(|o| Some((o.bucket.as_str(), switchyard_governance::money::usd(o.forecast?.per_hour))))
        .collect();
    encode_gauges(
        e,
        "switchyard_budget_burn_usd_per_hour",
        "Each budget's spend per hour over the last hour (bucket: key:<id> or group:<name>).",
        burning.iter().map(|(bucket, usd)| (vec![("bucket", *bucket)], *usd)),
    )?;
    let running_out: Vec<(&str, f64)> = outlooks
        .iter()
        .filter_map(|o| {
            let at = o.forecast?.exhausts_at_ms?;
            Some((o.bucket.as_str(), at.saturating_sub(now) as f64 / 1000.0))
        })
        .collect();
    encode_gauges(
        e,
        "switchyard_budget_exhausts_in_seconds",
        "Seconds until a budget runs out at its pace, for each forecast to run out before its window ends.",
        running_out.iter().map(|(bucket, seconds)| (vec![("bucket", *bucket)], *seconds)),
    )?;
    encode_gauges(
        e,
        "switchyard_reservations_usd",
        "Budget reserved by requests in flight, summed over every bucket (USD).",
        std::iter::once((Vec::new(), governance.reserved_usd())),
    )?;
    if let Some(fleet) = &governance.fleet {
        encode_gauges(
            e,
            "switchyard_fleet_redis_up",
            "1 when the fleet's Redis answered the last call, else 0 (admission follows storage.on_redis_error).",
            std::iter::once((Vec::new(), if fleet.up.load(Ordering::Relaxed) { 1.0 } else { 0.0 })),
        )?;
        encode_counters(
            e,
            "switchyard_fleet_local_admissions",
            "Requests admitted on this instance's own counters while Redis was away (fail_open).",
            std::iter::once((Vec::new(), fleet.local_admissions.load(Ordering::Relaxed))),
        )?;
        encode_gauges(
            e,
            "switchyard_fleet_pending_settlements",
            "Settlements waiting for Redis to come back.",
            std::iter::once((Vec::new(), fleet.pending() as f64)),
        )?;
    }
    let kept = &governance.content.stats;
    encode_counters(
        e,
        "switchyard_kept_text_written",
        "Requests whose text a group's retention kept, sealed and written.",
        std::iter::once((Vec::new(), kept.written.load(Ordering::Relaxed))),
    )?;
    encode_counters(
        e,
        "switchyard_kept_text_dropped",
        "Requests whose text retention should have kept but dropped (the writer's queue full, or the store failing).",
        std::iter::once((Vec::new(), kept.dropped.load(Ordering::Relaxed))),
    )?;
    if let Some(queue) = &governance.ledger {
        encode_gauges(
            e,
            "switchyard_ledger_queue_depth",
            "Ledger rows waiting to be written.",
            std::iter::once((Vec::new(), queue.depth() as f64)),
        )?;
        encode_counters(
            e,
            "switchyard_ledger_rows_written",
            "Ledger rows written to the store.",
            std::iter::once((Vec::new(), queue.stats.written.load(Ordering::Relaxed))),
        )?;
        encode_counters(
            e,
            "switchyard_ledger_queue_full",
            "Settlements that waited because the ledger queue was full.",
            std::iter::once((Vec::new(), queue.stats.queue_full.load(Ordering::Relaxed))),
        )?;
        encode_counters(
            e,
            "switchyard_ledger_write_errors",
            "Failed ledger writes (retried).",
            std::iter::once((Vec::new(), queue.stats.write_errors.load(Ordering::Relaxed))),
        )?;
    }
    Ok(())
}
