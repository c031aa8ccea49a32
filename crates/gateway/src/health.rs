//! Background health work: active probes of tripped lanes (opt-in per
//! provider) and the `/stats` lane-state view. A probe only runs while a
//! breaker is open; its success moves the breaker to half-open, where the
//! next real request is the single trial, so a probe never competes with it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::engine;
use crate::state::Gateway;

/// Starts one probe loop per provider that enabled `health_probe`.
pub fn spawn_probes(gateway: &Arc<Gateway>) {
    for (provider, config) in gateway.config.providers.iter().enumerate() {
        let Some(interval) = config.probe_interval else { continue };
        // A probe loop ends with its gateway: a config reload replaces it.
        let gateway = Arc::downgrade(gateway);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                let Some(gateway) = gateway.upgrade() else { return };
                probe_provider(&gateway, provider).await;
            }
        });
    }
}

/// Probes every lane of `provider` that has an open breaker in some pool.
pub async fn probe_provider(gateway: &Gateway, provider: usize) {
    for (index, lane) in gateway.lanes.iter().enumerate() {
        if lane.provider_index != provider {
            continue;
        }
        let open: Vec<(usize, usize)> = open_breakers(gateway, index);
        if open.is_empty() {
            continue;
        }
        let healthy = engine::probe(gateway, lane).await;
        tracing::info!(lane = %lane.name, healthy, "health probe");
        if healthy {
            for (pool, member) in open {
                gateway.pools[pool].breaker(member).record_probe_success();
            }
        }
    }
}

fn open_breakers(gateway: &Gateway, lane: usize) -> Vec<(usize, usize)> {
    let mut open = Vec::new();
    for (pool_index, pool) in gateway.pools.iter().enumerate() {
        for (member, &member_lane) in pool.members.iter().enumerate() {
            if member_lane == lane && pool.breaker(member).is_open() {
                open.push((pool_index, member));
            }
        }
    }
    open
}

/// The lane-state view: every pool's lanes with breaker state, reason, time
/// to recovery, in-flight requests, free permits and outcome counters.
pub fn stats(gateway: &Gateway) -> Value {
    let now = tokio::time::Instant::now().into_std();
    let mut pools = Vec::new();
    for pool in &gateway.pools {
        let mut lanes = Vec::new();
        for (member, &lane_index) in pool.members.iter().enumerate() {
            let lane = &gateway.lanes[lane_index];
            let snapshot = pool.breaker(member).snapshot(now);
            let counters = &pool.counters[member];
            lanes.push(json!({
                "lane": &*lane.name,
                "provider": &*lane.provider,
                "protocol": lane.protocol.as_str(),
                "weight": pool.weights[member],
                "breaker": snapshot.state.as_str(),
                "reason": snapshot.reason,
                "retry_in_ms": snapshot.retry_in.map(|d| d.as_millis() as u64),
                "trips": snapshot.trips,
                "in_flight": lane.in_flight.load(Ordering::Relaxed),
                "max_concurrent": lane.max_concurrent,
                "free_permits": lane.permits.as_ref().map(|p| p.available_permits()),
                "ok": counters.ok.load(Ordering::Relaxed),
                "upstream_failures": counters.upstream_failures.load(Ordering::Relaxed),
                "client_faults": counters.client_faults.load(Ordering::Relaxed),
                "rate_limited": counters.rate_limited.load(Ordering::Relaxed),
                "resting_ms": snapshot.resting.map(|d| d.as_millis() as u64),
                "latency_ms": lane.latency_ms(),
            }));
        }
        let routing: serde_json::Map<String, Value> = pool
            .routing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(policy, c)| (policy.to_string(), json!({"selections": c.selections, "rejections": c.rejections})))
            .collect();
        pools.push(json!({
            "pool": &*pool.name,
            "implicit": pool.implicit,
            "strategy": pool.strategy.as_str(),
            "routing": routing,
            "affinity_switches": pool.affinity_switches.load(Ordering::Relaxed),
            "lanes": lanes,
        }));
    }
    let mut out = json!({"pools": pools});
    if let Some(reloader) = gateway.reloader.get().and_then(std::sync::Weak::upgrade) {
        let (done, refused) = reloader.counts();
        out["config_reloads"] = json!({"done": done, "refused": refused});
    }
    if let Some(fleet) = &gateway.fleet_state {
        out["fleet_breakers"] = json!({
            "changes_sent": fleet.sent.load(Ordering::Relaxed),
            "changes_applied": fleet.applied.load(Ordering::Relaxed),
        });
    }
    if let Some(governance) = &gateway.governance {
        out["governance"] = governance_stats(governance);
    }
    out
}

/// Governance's figures: refusals by reason, reservations outstanding, the
/// ledger queue and writer.
fn governance_stats(governance: &crate::governance::Governance) -> Value {
    let refused: serde_json::Map<String, Value> = crate::governance::Refused::ALL
        .iter()
        .enumerate()
        .map(|(index, why)| (why.as_str().to_owned(), json!(governance.stats.refused[index].load(Ordering::Relaxed))))
        .collect();
    let ledger = governance.ledger.as_ref().map(|queue| {
        json!({
            "queue_depth": queue.depth(),
            "queue_full_waits": queue.stats.queue_full.load(Ordering::Relaxed),
            "rows_written": queue.stats.written.load(Ordering::Relaxed),
            "write_errors": queue.stats.write_errors.load(Ordering::Relaxed),
            "spooled": queue.stats.spooled.load(Ordering::Relaxed),
            "replayed": queue.stats.replayed.load(Ordering::Relaxed),
        })
    });
    let redis = governance.fleet.as_ref().map(|fleet| {
        json!({
            "up": fleet.up.load(Ordering::Relaxed),
            "errors": fleet.errors.load(Ordering::Relaxed),
            "local_admissions": fleet.local_admissions.load(Ordering::Relaxed),
            "pending_settlements": fleet.pending(),
        })
    });
    json!({
        "redis": redis,
        "mode": match governance.mode {
            switchyard_config::AuthMode::Open => "open",
            switchyard_config::AuthMode::Keys => "keys",
        },
        "keys": governance.key_count(),
        "reserved_usd": governance.reserved_usd(),
        "refused": refused,
        "ledger": ledger,
    })
}
