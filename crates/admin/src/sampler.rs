//! The task that feeds the console's [`History`](switchyard_telemetry::history::History):
//! every [`SAMPLE_EVERY`] it reads the request path's metric atomics and
//! adds what grew since its last read.
//!
//! A config reload lays the metrics out anew and starts them at zero: each
//! gateway runs its own sampler, counting from zero, and all of them add to
//! the one history the gateways share (it lives in their shared telemetry),
//! so a reload loses at most the last interval of the gateway it replaced.

use std::sync::Arc;
use std::time::Duration;

use switchyard_state::Gateway;
use switchyard_telemetry::history::{lane_latencies, read, slots_since, Totals, SLOTS};

/// How often the sampler reads the counters.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(2);

/// The current Unix minute.
pub fn now_minute() -> i64 {
    (switchyard_state::governance::now_ms() / 60_000) as i64
}

/// Starts `gateway`'s sampler (when metrics are on): it ends with the
/// gateway, and a reload starts the next one.
pub fn spawn(gateway: &Arc<Gateway>) {
    if gateway.metrics().is_none() {
        return;
    }
    let weak = Arc::downgrade(gateway);
    switchyard_tasks::service("console sampler", async move {
        let mut before = Totals::default();
        let mut before_combos: Vec<u64> = Vec::new();
        let mut before_latency: Vec<[u64; SLOTS]> = Vec::new();
        let mut ticker = tokio::time::interval(SAMPLE_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let Some(gateway) = weak.upgrade() else { return };
            let minute = now_minute();
            let (now, combos) = read(&gateway.metrics, |lane| gateway.lanes.get(lane).and_then(|l| l.price));
            let history = &gateway.telemetry.history;
            history.add(minute, &now.since(&before));
            before_combos.resize(combos.len(), 0);
            let served = gateway
                .metrics
                .combos
                .iter()
                .zip(combos.iter().zip(&before_combos))
                .filter(|((_, lane), (now, before))| &**lane != "-" && now > before)
                .map(|((pool, lane), (now, before))| ((pool.clone(), lane.clone()), now - before));
            let latency = lane_latencies(&gateway.metrics);
            before_latency.resize(latency.len(), [0; SLOTS]);
            let observed = gateway
                .metrics
                .lanes
                .iter()
                .zip(latency.iter().zip(&before_latency))
                .map(|(lane, (now, before))| (lane.clone(), slots_since(now, before)));
            history.add_lanes(minute, served, observed);
            before = now;
            before_combos = combos;
            before_latency = latency;
        }
    });
}
