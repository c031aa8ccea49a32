//! A pool's routing state: its members and weights, failover bounds and
//! fallbacks, one breaker and one set of counters per member, the strategy
//! and gates that order them, session pins, and the prices admission
//! reserves at.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
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
    /// Weight of each member.
    pub weights: Vec<u32>,
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
            price_ceiling: Price::default(),
            unpriced: None,
            operation: switchyard_ir::Operation::Chat,
            hedge: None,
            cache_ttl: None,
        }
    }

    /// The breaker of member `member`.
    pub fn breaker(&self, member: usize) -> MutexGuard<'_, Breaker> {
        self.breakers[member].lock().unwrap_or_else(PoisonError::into_inner)
    }
}
