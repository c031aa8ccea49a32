//! The `/stats` lane-state view: every pool's lanes with breaker state,
//! reason, time to recovery, in-flight requests, free permits and outcome
//! counters, the sockets open, and governance's figures.

use std::sync::atomic::Ordering;

use serde_json::{json, Value};
use switchyard_state::Gateway;

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
                "model": &*lane.wire_model,
                "provider": &*lane.provider,
                "protocol": lane.protocol.as_str(),
                "weight": pool.weight(member),
                "configured_weight": pool.weights[member],
                "drained": pool.is_drained(member),
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
            "failover": {
                "max_hops": pool.failover.max_hops,
                "timeout_ms": pool.failover.timeout.as_millis() as u64,
                "retries": pool.failover.retries,
                "first_token_ms": pool.failover.first_token.map(|d| d.as_millis() as u64),
            },
            "fallback": pool.fallback.iter().map(|&f| gateway.pools[f].name.to_string()).collect::<Vec<_>>(),
            "routing": routing,
            "affinity_switches": pool.affinity_switches.load(Ordering::Relaxed),
            // Sessions pinned now, and how many times pins moved lane
            // (`GET /api/v1/admin/sessions` lists them with their counts).
            "sessions": pool.affinity.as_ref().map(|_| json!({
                "pinned": pool.sessions.len(),
                "moves": pool.session_moves.load(Ordering::Relaxed),
            })),
            "lanes": lanes,
        }));
    }
    // Long-lived sockets (Responses over WebSocket) open on this instance.
    let mut out = json!({"pools": pools, "sockets": {"open": gateway.sockets.open_now()}});
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
    // A single node's pins, written behind to its SQLite.
    if let Some(pins) = &gateway.pins {
        out["session_pins"] = json!({
            "written": pins.stats.written.load(Ordering::Relaxed),
            "dropped": pins.stats.dropped.load(Ordering::Relaxed),
            "write_errors": pins.stats.write_errors.load(Ordering::Relaxed),
        });
    }
    out
}

/// Governance's figures: refusals by reason, reservations outstanding, the
/// ledger queue and writer.
fn governance_stats(governance: &switchyard_state::governance::Governance) -> Value {
    let refused: serde_json::Map<String, Value> = switchyard_state::governance::Refused::ALL
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
        "kept_text": {
            "written": governance.content.stats.written.load(Ordering::Relaxed),
            "dropped": governance.content.stats.dropped.load(Ordering::Relaxed),
        },
    })
}
