//! A fleet's shared counters in Redis (`storage.redis_url`): budgets,
//! reservations, rates and concurrency of every bucket, admitted and settled
//! by two Lua scripts so a key's whole chain is checked and held in one
//! atomic step, one round trip per request. The arguments and the reading
//! of answers are pure (`switchyard_governance::fleet`); this module sends
//! them and decides what happens while Redis is away
//! (`storage.on_redis_error`).
//!
//! The bound: every admission holds its estimate on every bucket of its
//! chain before it runs, across all instances at once, so settled spend
//! passes a cap only by what requests in flight under-reserved, as on one
//! node. While Redis is away and `fail_open` admits on local counters,
//! each instance may also spend up to a cap on its own; what those
//! requests cost is added to Redis when it returns.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;
use switchyard_config::OnRedisError;
use switchyard_governance::fleet::{admit_args, bucket_key, read_admit, settle_args, SharedBucket};
use switchyard_governance::{BucketId, Estimate, NanoUsd, Refusal};

/// Namespace of every key Switchyard writes.
const PREFIX: &str = "switchyard";

/// How long one Redis call may take before it counts as Redis being away.
const CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// Settlements kept for Redis's return, at most.
const MAX_PENDING: usize = 100_000;

/// The fleet's counters and the client that reaches them.
pub struct Fleet {
    redis: ConnectionManager,
    admit: Script,
    settle: Script,
    /// What admission does while Redis is away.
    pub on_error: OnRedisError,
    /// Redis answered the last call.
    pub up: AtomicBool,
    /// Calls that failed.
    pub errors: AtomicU64,
    /// Requests admitted on local counters while Redis was away.
    pub local_admissions: AtomicU64,
    /// Settlements waiting for Redis.
    pending: Mutex<Vec<Settlement>>,
}

/// One settlement for the shared counters.
#[derive(Debug, Clone)]
pub struct Settlement {
    /// The chain's bucket names.
    pub keys: Vec<String>,
    /// The script's arguments.
    pub args: Vec<String>,
}

/// Why Redis could not be used.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// Connecting, sending or reading failed, or timed out.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// The script's answer made no sense.
    #[error(transparent)]
    Answer(#[from] switchyard_governance::fleet::BadAnswer),
}

impl Fleet {
    /// Connects to `url`; fails when Redis cannot be reached at boot.
    pub async fn connect(url: &str, on_error: OnRedisError) -> Result<Arc<Fleet>, FleetError> {
        let client = redis::Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CALL_TIMEOUT))
            .set_response_timeout(Some(CALL_TIMEOUT))
            .set_number_of_retries(1);
        let redis = ConnectionManager::new_with_config(client, config).await?;
        let fleet = Arc::new(Fleet {
            redis,
            admit: Script::new(include_str!("fleet_admit.lua")),
            settle: Script::new(include_str!("fleet_settle.lua")),
            on_error,
            up: AtomicBool::new(true),
            errors: AtomicU64::new(0),
            local_admissions: AtomicU64::new(0),
            pending: Mutex::new(Vec::new()),
        });
        tokio::spawn(reconcile(Arc::downgrade(&fleet)));
        Ok(fleet)
    }

    fn noted<T>(&self, result: Result<T, FleetError>) -> Result<T, FleetError> {
        match &result {
            Ok(_) => self.up.store(true, Ordering::Relaxed),
            Err(err) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                if self.up.swap(false, Ordering::Relaxed) {
                    tracing::warn!(error = %err, "redis is unreachable; admission follows storage.on_redis_error");
                }
            }
        }
        result
    }

    /// Admits `estimate` on `chain` for the whole fleet: `Ok(None)` admitted
    /// (the reservation is held in Redis), `Ok(Some(_))` refused.
    pub async fn admit(
        &self,
        chain: &[BucketId],
        buckets: &[SharedBucket],
        estimate: Estimate,
        now_ms: u64,
    ) -> Result<Option<Refusal>, FleetError> {
        let mut invocation = self.admit.prepare_invoke();
        for id in chain {
            invocation.key(bucket_key(PREFIX, id));
        }
        for arg in admit_args(buckets, estimate, now_ms) {
            invocation.arg(arg);
        }
        let mut redis = self.redis.clone();
        let answer = invocation.invoke_async::<Vec<i64>>(&mut redis).await.map_err(FleetError::from);
        let result = answer.and_then(|answer| Ok(read_admit(&answer, chain)?));
        self.noted(result)
    }

    /// The settlement of a request on `chain`; `held` says whether Redis
    /// holds its reservation (false: admitted locally while Redis was away).
    pub fn settlement(
        chain: &[BucketId],
        buckets: &[SharedBucket],
        reserved: Estimate,
        cost: NanoUsd,
        tokens: u64,
        held: bool,
        now_ms: u64,
    ) -> Settlement {
        Settlement {
            keys: chain.iter().map(|id| bucket_key(PREFIX, id)).collect(),
            args: settle_args(buckets, reserved, cost, tokens, held, now_ms),
        }
    }

    async fn apply(&self, settlement: &Settlement) -> Result<(), FleetError> {
        let mut invocation = self.settle.prepare_invoke();
        for key in &settlement.keys {
            invocation.key(key);
        }
        for arg in &settlement.args {
            invocation.arg(arg);
        }
        let mut redis = self.redis.clone();
        let result = invocation.invoke_async::<i64>(&mut redis).await.map(drop).map_err(FleetError::from);
        self.noted(result)
    }

    /// Settles in the background; kept for Redis's return if it is away.
    pub fn settle(self: &Arc<Self>, settlement: Settlement) {
        let fleet = self.clone();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            fleet.keep(settlement);
            return;
        };
        runtime.spawn(async move {
            if fleet.apply(&settlement).await.is_err() {
                fleet.keep(settlement);
            }
        });
    }

    fn keep(&self, settlement: Settlement) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if pending.len() < MAX_PENDING {
            pending.push(settlement);
        } else {
            tracing::warn!("a settlement for redis was dropped: {MAX_PENDING} are already waiting for it");
        }
    }

    /// Settlements waiting for Redis.
    pub fn pending(&self) -> usize {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// Applies the settlements kept while Redis was away, once it answers.
async fn reconcile(fleet: std::sync::Weak<Fleet>) {
    let mut ticker = tokio::time::interval(Duration::from_millis(250));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Some(fleet) = fleet.upgrade() else { return };
        let waiting = std::mem::take(&mut *fleet.pending.lock().unwrap_or_else(PoisonError::into_inner));
        if waiting.is_empty() {
            continue;
        }
        let mut left = waiting.into_iter();
        for settlement in left.by_ref() {
            if fleet.apply(&settlement).await.is_err() {
                fleet.keep(settlement);
                break;
            }
        }
        for settlement in left {
            fleet.keep(settlement);
        }
    }
}
