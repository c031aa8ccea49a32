//! The lane gate of an attempt: what a candidate must pass before it is
//! sent anything. Its breaker admits it (closed, or the single half-open
//! trial, which one instance of a fleet claims for all), and it takes a
//! concurrency permit: a lane at its cap is skipped while others remain,
//! else waited for up to the pool's `queue_timeout`.

use std::sync::Arc;
use std::time::Duration;

use switchyard_health::{Admission, Unavailable};
use switchyard_state::{Gateway, Lane};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use crate::candidate::Candidate;
use crate::exhausted::Exhaustion;
use crate::lane_health::{now, Health, TrialGuard};

/// A candidate that passed the gate: who hears its outcome, the trial it
/// may hold, and its permit.
pub(crate) struct Entry {
    pub(crate) health: Health,
    pub(crate) trial: TrialGuard,
    pub(crate) permit: Option<OwnedSemaphorePermit>,
}

/// Lets `candidate` through, or notes in `exhaustion` why not (resting,
/// cooling, its trial taken elsewhere, at its cap). `others_left`: later
/// candidates remain, so a lane at its cap is skipped rather than waited for.
pub(crate) async fn enter(
    gateway: &Arc<Gateway>,
    candidate: &Candidate<'_>,
    deadline: Instant,
    exhaustion: &mut Exhaustion,
    others_left: bool,
) -> Option<Entry> {
    let (lane, slot) = (candidate.lane, candidate.slot);
    let admission = gateway.pools[slot.pool].breaker(slot.member).admit(now());
    if let Admission::Reject { retry_in, cause } = admission {
        exhaustion.skipped(retry_in, cause);
        return None;
    }
    // One instance of the fleet sends a half-open lane's trial.
    let mut claimed = false;
    if let (Admission::Trial, Some(shared)) = (&admission, &gateway.fleet_state) {
        let pool = &gateway.pools[slot.pool];
        let hold = lane.timeouts.request.min(deadline.saturating_duration_since(Instant::now()));
        if !shared.claim_trial(&pool.name, &lane.name, hold).await {
            pool.breaker(slot.member).release_trial();
            exhaustion.skipped(Duration::ZERO, Unavailable::TrialInFlight);
            return None;
        }
        claimed = true;
    }
    let health = Health { gateway: gateway.clone(), slot };
    let trial = TrialGuard::new(gateway, slot, admission, claimed);
    let queue = gateway.pools[slot.pool].queue_timeout.min(deadline.saturating_duration_since(Instant::now()));
    let Some(permit) = acquire(lane, others_left, queue).await else {
        exhaustion.at_cap = true;
        return None;
    };
    Some(Entry { health, trial, permit })
}

async fn acquire(lane: &Lane, others_left: bool, queue: Duration) -> Option<Option<OwnedSemaphorePermit>> {
    let Some(permits) = &lane.permits else {
        return Some(None);
    };
    match permits.clone().try_acquire_owned() {
        Ok(permit) => Some(Some(permit)),
        Err(_) if others_left => None,
        Err(_) => match tokio::time::timeout(queue, permits.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Some(Some(permit)),
            _ => None,
        },
    }
}
