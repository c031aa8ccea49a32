//! Readiness for load balancers: the process's phase (starting, serving,
//! draining), kept across reloads, and what each pool can serve now. A
//! load balancer polls `/readyz`; `/healthz` stays liveness.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

use serde::Serialize;

use crate::Gateway;

/// Where the process is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Listening, not yet serving (stores, caches and tasks starting).
    Starting,
    /// Serving.
    Serving,
    /// A stop was asked for: in-flight requests finish, new ones should
    /// go elsewhere.
    Draining,
}

/// The process's phase, shared by every gateway a reload builds.
#[derive(Debug)]
pub struct Lifecycle(AtomicU8);

impl Default for Lifecycle {
    fn default() -> Lifecycle {
        Lifecycle(AtomicU8::new(Phase::Starting as u8))
    }
}

impl Lifecycle {
    /// The phase now.
    pub fn phase(&self) -> Phase {
        match self.0.load(Ordering::Acquire) {
            0 => Phase::Starting,
            1 => Phase::Serving,
            _ => Phase::Draining,
        }
    }

    /// Everything has started: ready for traffic (never after a drain began).
    pub fn serving(&self) {
        let _ =
            self.0.compare_exchange(Phase::Starting as u8, Phase::Serving as u8, Ordering::AcqRel, Ordering::Acquire);
    }

    /// A stop was asked for.
    pub fn draining(&self) {
        self.0.store(Phase::Draining as u8, Ordering::Release);
    }
}

/// The `/readyz` answer: whether to send traffic, and why per pool.
#[derive(Debug, Clone, Serialize)]
pub struct Readiness {
    /// `ready`, `starting`, `draining` or `unavailable`.
    pub status: &'static str,
    /// Each pool a caller names: `ok`, or why it cannot serve now.
    pub pools: std::collections::BTreeMap<String, String>,
    /// The pools that cannot serve now (their reasons are in `pools`).
    #[serde(skip)]
    pub down: std::collections::BTreeSet<String>,
}

impl Readiness {
    /// Whether a load balancer should send traffic.
    pub fn ready(&self) -> bool {
        self.status == "ready"
    }
}

/// What `gateway` can serve now: ready while serving and some pool has a
/// lane that is neither cooling after faults nor resting after a rate limit
/// (itself or through a fallback pool).
pub fn readiness(gateway: &Gateway, now: Instant) -> Readiness {
    let mut pools = std::collections::BTreeMap::new();
    let mut down = std::collections::BTreeSet::new();
    for (index, pool) in gateway.named_pools() {
        let reason = match own_reason(gateway, index, now) {
            None => "ok".to_owned(),
            Some(own) => match pool.fallback.iter().find(|&&f| own_reason(gateway, f, now).is_none()) {
                Some(&fallback) => format!("ok through fallback `{}` ({own})", gateway.pools[fallback].name),
                None => {
                    down.insert(pool.name.to_string());
                    own
                }
            },
        };
        pools.insert(pool.name.to_string(), reason);
    }
    let any = pools.len() > down.len();
    let status = match gateway.lifecycle.phase() {
        Phase::Starting => "starting",
        Phase::Draining => "draining",
        Phase::Serving if any => "ready",
        Phase::Serving => "unavailable",
    };
    Readiness { status, pools, down }
}

/// Why pool `index` cannot serve by its own lanes now (`None`: it can).
fn own_reason(gateway: &Gateway, index: usize, now: Instant) -> Option<String> {
    let pool = &gateway.pools[index];
    if pool.members.is_empty() {
        return Some("no lanes".to_owned());
    }
    let mut soonest: Option<std::time::Duration> = None;
    for member in 0..pool.members.len() {
        match pool.breaker(member).retry_in(now) {
            None => return None,
            Some(wait) => soonest = Some(soonest.map_or(wait, |s| s.min(wait))),
        }
    }
    let secs = soonest.map_or(0, |s| s.as_secs().max(1));
    Some(format!("all {} lanes are down (tripped or resting); the first may be tried in {secs}s", pool.members.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drain_is_never_undone_by_a_late_start() {
        let life = Lifecycle::default();
        assert_eq!(life.phase(), Phase::Starting);
        life.serving();
        assert_eq!(life.phase(), Phase::Serving);
        life.draining();
        life.serving();
        assert_eq!(life.phase(), Phase::Draining);
    }
}
