//! A pool's routing state: its members and weights, failover bounds and
//! fallbacks, one breaker and one set of counters per member, the strategy
//! and gates that order them, session pins, and the prices admission
//! reserves at.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use switchyard_config::{Affinity, BreakerPolicy, Failover, Hedge, Strategy};
use switchyard_governance::money::Price;
use switchyard_health::hedge::{Allowance, Latencies};
use switchyard_health::Breaker;
use switchyard_route::SmoothWeighted;

use crate::sessions::SessionTable;
use crate::Counters;

/// A pool's routing state.
pub struct PoolState {
    /// Config name (a model's name for implicit pools).
    pub name: Arc<str>,
    /// True for the one-member pool of a model named directly.
    pub implicit: bool,
    /// Lane index of each member.
    pub members: Vec<usize>,
    /// Weight of each member, as configured.
    pub weights: Vec<u32>,
    /// What an operator set on each member at run time (drained, a weight).
    pub controls: Vec<MemberControl>,
    /// Failover bounds.
    pub failover: Failover,
    /// Fallback pools (indexes).
    pub fallback: Vec<usize>,
    /// How long to wait for a permit when every member is at its cap.
    pub queue_timeout: Duration,
    /// One breaker per member; locks are held briefly, never across `.await`.
    pub breakers: Vec<Mutex<Breaker>>,
    /// The breakers' tuning.
    pub policy: BreakerPolicy,
    /// One set of counters per member.
    pub counters: Vec<Counters>,
    /// SWRR state; the lock is held only for the pick.
    pub weighted: Mutex<SmoothWeighted>,
    /// Ordering strategy.
    pub strategy: Strategy,
    /// The pool's own gates (indexes into `config.hooks`).
    pub gates: Vec<usize>,
    /// Session affinity settings.
    pub affinity: Option<Affinity>,
    /// Session pins (empty without affinity).
    pub sessions: Arc<SessionTable>,
    /// Routing counters per policy.
    pub routing: Mutex<HashMap<Arc<str>, RouteCounters>>,
    /// Sessions moved off their pinned lane.
    pub affinity_switches: AtomicU64,
    /// Pins that moved to another lane (the sum of the sessions' switch
    /// counts since boot).
    pub session_moves: AtomicU64,
    /// The dearest prices among the lanes a request may reach through this
    /// pool (fallbacks included): what admission reserves at.
    pub price_ceiling: Price,
    /// A lane the pool may reach that has no price: a key with a USD
    /// budget cannot use the pool (what that lane serves would cost nothing).
    pub unpriced: Option<Arc<str>>,
    /// What its members serve.
    pub operation: switchyard_ir::Operation,
    /// Hedging, when the pool asks for it.
    pub hedge: Option<Hedging>,
    /// How long its answers are cached (`None`: not cached).
    pub cache_ttl: Option<Duration>,
}

/// A hedging pool's settings and what it learned: its recent times to
/// first content and the extra attempts its traffic has earned. The lock
/// is held for a sample or a decision, never across `.await`.
#[derive(Debug)]
pub struct Hedging {
    /// The pool's `hedge:` settings.
    pub settings: Hedge,
    learned: Mutex<(Latencies, Allowance)>,
}

impl Hedging {
    /// A pool's hedging, nothing learned yet.
    pub fn new(settings: Hedge) -> Hedging {
        Hedging { settings, learned: Mutex::new((Latencies::default(), Allowance::default())) }
    }

    /// How long a hedgeable request waits for its first content before a
    /// second attempt may start (`None`: the pool's p95 is not known yet).
    /// The request earns its share of an extra attempt.
    pub fn trigger(&self) -> Option<Duration> {
        let mut learned = self.learned.lock().unwrap_or_else(PoisonError::into_inner);
        learned.1.earn(self.settings.max_extra);
        match self.settings.after {
            switchyard_config::HedgeAfter::Fixed(after) => Some(after),
            switchyard_config::HedgeAfter::P95 => learned.0.p95(),
        }
    }

    /// A late request asks to start its second attempt: whether the pool's
    /// share of extra attempts allows it.
    pub fn allow(&self) -> bool {
        self.learned.lock().unwrap_or_else(PoisonError::into_inner).1.spend()
    }

    /// A request's time from sending to its first content (its head, for
    /// a reply that is not streamed).
    pub fn record(&self, took: Duration) {
        self.learned.lock().unwrap_or_else(PoisonError::into_inner).0.record(took);
    }
}

/// What an operator set on one pool member at run time, over the admin
/// API: drained (it takes no new requests, not even as a last resort) or a
/// weight in place of the configured one. Kept across reloads while the
/// member stays in its pool; per instance.
#[derive(Debug, Default)]
pub struct MemberControl {
    drained: AtomicBool,
    /// 0: the configured weight.
    weight: AtomicU32,
}

impl MemberControl {
    /// Whether the member is drained.
    pub fn drained(&self) -> bool {
        self.drained.load(Ordering::Relaxed)
    }

    /// The operator's weight, when one is set.
    pub fn weight(&self) -> Option<u32> {
        Some(self.weight.load(Ordering::Relaxed)).filter(|w| *w > 0)
    }

    /// Drains the member or lets it take requests again.
    pub fn set_drained(&self, drained: bool) {
        self.drained.store(drained, Ordering::Relaxed);
    }

    /// Sets the operator's weight (`None`: back to the configured one).
    pub fn set_weight(&self, weight: Option<u32>) {
        self.weight.store(weight.unwrap_or(0), Ordering::Relaxed);
    }

    /// Takes over what was set on `other` (the same member before a reload).
    pub fn copy_from(&self, other: &MemberControl) {
        self.set_drained(other.drained());
        self.set_weight(other.weight());
    }
}

/// Per-policy routing counters of a pool.
#[derive(Debug, Default, Clone, Copy)]
pub struct RouteCounters {
    /// Requests ordered by this policy.
    pub selections: u64,
    /// Requests the policy rejected.
    pub rejections: u64,
}

impl PoolState {
    /// A pool with the weighted floor, no gates and default affinity.
    #[expect(clippy::too_many_arguments, reason = "one constructor for configured and implicit pools")]
    pub(crate) fn new(
        name: Arc<str>,
        implicit: bool,
        members: Vec<(usize, u32)>,
        failover: Failover,
        fallback: Vec<usize>,
        policy: BreakerPolicy,
        queue_timeout: Duration,
        epoch: Instant,
    ) -> PoolState {
        PoolState {
            name,
            implicit,
            weights: members.iter().map(|m| m.1).collect(),
            controls: members.iter().map(|_| MemberControl::default()).collect(),
            breakers: members.iter().map(|_| Mutex::new(Breaker::new(policy, epoch))).collect(),
            policy,
            counters: members.iter().map(|_| Counters::default()).collect(),
            weighted: Mutex::new(SmoothWeighted::new(members.len())),
            members: members.iter().map(|m| m.0).collect(),
            failover,
            fallback,
            queue_timeout,
            strategy: Strategy::Weighted,
            gates: Vec::new(),
            affinity: None,
            sessions: Arc::new(SessionTable::new(Duration::ZERO, 1)),
            routing: Mutex::new(HashMap::new()),
            affinity_switches: AtomicU64::new(0),
            session_moves: AtomicU64::new(0),
            price_ceiling: Price::default(),
            unpriced: None,
            operation: switchyard_ir::Operation::Chat,
            hedge: None,
            cache_ttl: None,
        }
    }

    /// The weight member `member` is chosen by now: 0 while drained, else
    /// the operator's weight or the configured one.
    pub fn live_weight(&self, member: usize) -> u32 {
        if self.is_drained(member) {
            0
        } else {
            self.weight(member)
        }
    }

    /// Member `member`'s weight, drained or not: the operator's, else the
    /// configured one.
    pub fn weight(&self, member: usize) -> u32 {
        self.controls.get(member).and_then(MemberControl::weight).unwrap_or(self.weights[member])
    }

    /// Whether member `member` may take a new request: not drained and its
    /// breaker lets it (`at`: now).
    pub fn takes_requests(&self, member: usize, at: Instant) -> bool {
        !self.controls.get(member).is_some_and(MemberControl::drained) && self.breaker(member).is_usable(at)
    }

    /// Whether an operator drained member `member`.
    pub fn is_drained(&self, member: usize) -> bool {
        self.controls.get(member).is_some_and(MemberControl::drained)
    }

    /// The breaker of member `member`.
    pub fn breaker(&self, member: usize) -> MutexGuard<'_, Breaker> {
        self.breakers[member].lock().unwrap_or_else(PoisonError::into_inner)
    }
}
