//! What a try tells the lane it ran on: its outcome reaches the pool
//! member's breaker and counters (and, in a fleet, the other instances), a
//! half-open breaker's single trial is held for exactly one try, and the
//! lane counts the request in flight while it lives.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use switchyard_health::{Admission, LaneEffect};
use switchyard_state::call::Slot;
use switchyard_state::{Counters, Gateway};
use tokio::time::Instant;

/// Reports a try's outcome to the lane's breaker and counters.
#[derive(Clone)]
pub struct Health {
    pub(crate) gateway: Arc<Gateway>,
    pub(crate) slot: Slot,
}

impl Health {
    pub(crate) fn success(&self) {
        let pool = &self.gateway.pools[self.slot.pool];
        let closed = pool.breaker(self.slot.member).record_success(now());
        Counters::bump(&pool.counters[self.slot.member].ok);
        if let (true, Some(shared)) = (closed, &self.gateway.fleet_state) {
            shared.closed(&pool.name, &self.gateway.lanes[pool.members[self.slot.member]].name);
        }
    }

    /// Tells the fleet this instance opened the lane's breaker.
    fn share_trip(&self, reason: &str) {
        let Some(shared) = &self.gateway.fleet_state else { return };
        let pool = &self.gateway.pools[self.slot.pool];
        let open_for = pool.breaker(self.slot.member).retry_in(now()).unwrap_or_default();
        shared.tripped(&pool.name, &self.gateway.lanes[pool.members[self.slot.member]].name, open_for, reason);
    }

    pub(crate) fn apply(&self, effect: LaneEffect, reason: &str, retry_after: Option<Duration>) {
        let slot = self.slot;
        let pool = &self.gateway.pools[slot.pool];
        match effect {
            // Not a verdict on the lane: a half-open trial is released by its guard.
            LaneEffect::None => Counters::bump(&pool.counters[slot.member].client_faults),
            LaneEffect::Failure => {
                let tripped = pool.breaker(slot.member).record_failure(now(), reason, retry_after, fastrand::f64());
                Counters::bump(&pool.counters[slot.member].upstream_failures);
                if tripped {
                    self.share_trip(reason);
                }
                if let (true, Some(metrics)) = (tripped, self.gateway.metrics()) {
                    metrics.trip(metrics.place(Some(slot.pool), Some(slot.member)), false);
                }
            }
            LaneEffect::Trip => {
                pool.breaker(slot.member).record_hard_down(now(), reason, fastrand::f64());
                Counters::bump(&pool.counters[slot.member].upstream_failures);
                self.share_trip(reason);
                if let Some(metrics) = self.gateway.metrics() {
                    metrics.trip(metrics.place(Some(slot.pool), Some(slot.member)), true);
                }
            }
            LaneEffect::Rest => {
                pool.breaker(slot.member).record_rate_limited(now(), retry_after);
                Counters::bump(&pool.counters[slot.member].rate_limited);
            }
        }
    }
}

/// Holds a half-open breaker's single trial. A try that ends without a
/// verdict on the lane — the caller's own mistake, a lane at its cap, or the
/// caller hanging up while the request is in flight (the future is dropped)
/// — releases the trial, so the next request can be it; otherwise the lane
/// would stay half-open with a trial nobody finishes.
pub(crate) struct TrialGuard {
    gateway: Arc<Gateway>,
    slot: Slot,
    armed: bool,
    /// The fleet's claim on the trial, given back when the try ends (its
    /// verdict, if any, reaches the other instances as a trip or a close).
    claimed: bool,
}

impl TrialGuard {
    /// Holds `slot`'s trial when `admission` made this try it, and the
    /// fleet's claim on it when `claimed`.
    pub(crate) fn new(gateway: &Arc<Gateway>, slot: Slot, admission: Admission, claimed: bool) -> TrialGuard {
        TrialGuard { gateway: gateway.clone(), slot, armed: admission == Admission::Trial, claimed }
    }

    /// The trial got its verdict (success or failure was recorded).
    pub(crate) fn settle(&mut self) {
        self.armed = false;
    }
}

impl Drop for TrialGuard {
    fn drop(&mut self) {
        let pool = &self.gateway.pools[self.slot.pool];
        if self.armed {
            pool.breaker(self.slot.member).release_trial();
        }
        if let (true, Some(fleet)) = (self.claimed, &self.gateway.fleet_state) {
            fleet.release_trial(&pool.name, &self.gateway.lanes[pool.members[self.slot.member]].name);
        }
    }
}

/// The instant the request path reads (tokio's, so tests can pause time).
pub(crate) fn now() -> std::time::Instant {
    Instant::now().into_std()
}

/// Counts a request in flight on a lane for as long as it lives.
pub(crate) struct InFlight {
    gateway: Arc<Gateway>,
    lane: usize,
}

impl InFlight {
    pub(crate) fn new(gateway: &Arc<Gateway>, lane: usize) -> InFlight {
        gateway.lanes[lane].in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight { gateway: gateway.clone(), lane }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.gateway.lanes[self.lane].in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}
