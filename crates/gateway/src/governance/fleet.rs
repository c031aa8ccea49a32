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
use tokio::sync::mpsc;

/// Namespace of every key Switchyard writes.
const PREFIX: &str = "switchyard";

/// How long one Redis call may take before it counts as Redis being away.
const CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// Settlements kept for Redis's return, at most.
const MAX_PENDING: usize = 100_000;

/// Settlements sent in one pipelined round trip, at most.
const SETTLE_BATCH: usize = 64;

const ADMIT_SCRIPT: &str = concat!(include_str!("fleet_prelude.lua"), include_str!("fleet_admit.lua"));
const SETTLE_SCRIPT: &str = concat!(include_str!("fleet_prelude.lua"), include_str!("fleet_settle.lua"));

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
    /// Settlements on their way (one task sends them in pipelined batches).
    settlements: mpsc::Sender<Settlement>,
}

/// One settlement for the shared counters.
#[derive(Debug, Clone)]
pub struct Settlement {
    /// The chain's bucket names.
    pub keys: Arc<[String]>,
    /// The script's arguments.
    pub args: Vec<i64>,
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
    /// Redis was away at the last call; a background check brings it back.
    #[error("redis is unreachable")]
    Away,
}

impl Fleet {
    /// Connects to `url`; fails when Redis cannot be reached at boot.
    pub async fn connect(url: &str, on_error: OnRedisError) -> Result<Arc<Fleet>, FleetError> {
        let client = redis::Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CALL_TIMEOUT))
            .set_response_timeout(Some(CALL_TIMEOUT))
            .set_number_of_retries(1);
        let mut redis = ConnectionManager::new_with_config(client, config).await?;
        for code in [ADMIT_SCRIPT, SETTLE_SCRIPT] {
            redis::cmd("SCRIPT").arg("LOAD").arg(code).query_async::<String>(&mut redis).await?;
        }
        let (settlements, queue) = mpsc::channel(MAX_PENDING);
        let fleet = Arc::new(Fleet {
            redis,
            admit: Script::new(ADMIT_SCRIPT),
            settle: Script::new(SETTLE_SCRIPT),
            on_error,
            up: AtomicBool::new(true),
            errors: AtomicU64::new(0),
            local_admissions: AtomicU64::new(0),
            pending: Mutex::new(Vec::new()),
            settlements,
        });
        tokio::spawn(reconcile(Arc::downgrade(&fleet)));
        tokio::spawn(send_settlements(Arc::downgrade(&fleet), queue));
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
        keys: &[String],
        chain: &[BucketId],
        buckets: &[SharedBucket],
        estimate: Estimate,
        now_ms: u64,
    ) -> Result<Option<Refusal>, FleetError> {
        // While Redis is away, requests do not each wait for it to time
        // out: the reconciler checks it in the background.
        if !self.up.load(Ordering::Relaxed) {
            return Err(FleetError::Away);
        }
        let mut command = redis::cmd("EVALSHA");
        command.arg(self.admit.get_hash()).arg(keys.len()).arg(keys);
        command.arg(admit_args(buckets, estimate, now_ms));
        let answer = self.run::<Vec<i64>>(&command, &[(&self.admit, ADMIT_SCRIPT)]).await;
        let result = answer.and_then(|answer| Ok(read_admit(&answer, chain)?));
        self.noted(result)
    }

    /// The settlement of a request on `chain`; `held` says whether Redis
    /// holds its reservation (false: admitted locally while Redis was away).
    pub fn settlement(
        keys: Arc<[String]>,
        buckets: &[SharedBucket],
        reserved: Estimate,
        cost: NanoUsd,
        tokens: u64,
        held: bool,
        now_ms: u64,
    ) -> Settlement {
        Settlement { keys, args: settle_args(buckets, reserved, cost, tokens, held, now_ms) }
    }

    /// Runs `command`; a server that lost the scripts (a restart) is sent
    /// them and the command again.
    async fn run<T: redis::FromRedisValue>(
        &self,
        command: &redis::Cmd,
        scripts: &[(&Script, &str)],
    ) -> Result<T, FleetError> {
        let mut redis = self.redis.clone();
        match command.query_async::<T>(&mut redis).await {
            Err(err) if lost_scripts(&err) => {
                for (_, code) in scripts {
                    redis::cmd("SCRIPT").arg("LOAD").arg(*code).query_async::<String>(&mut redis).await?;
                }
                Ok(command.query_async::<T>(&mut redis).await?)
            }
            other => Ok(other?),
        }
    }

    /// Applies `batch` in one round trip, all or nothing (MULTI/EXEC).
    async fn apply(&self, batch: &[Settlement]) -> Result<(), FleetError> {
        let mut pipe = redis::pipe();
        pipe.atomic();
        for settlement in batch {
            pipe.cmd("EVALSHA")
                .arg(self.settle.get_hash())
                .arg(settlement.keys.len())
                .arg(&settlement.keys)
                .arg(&settlement.args)
                .ignore();
        }
        let mut redis = self.redis.clone();
        let result = match pipe.query_async::<()>(&mut redis).await {
            Err(err) if lost_scripts(&err) => {
                let loaded =
                    redis::cmd("SCRIPT").arg("LOAD").arg(SETTLE_SCRIPT).query_async::<String>(&mut redis).await;
                match loaded {
                    Ok(_) => pipe.query_async::<()>(&mut redis).await,
                    Err(err) => Err(err),
                }
            }
            other => other,
        };
        self.noted(result.map_err(FleetError::from))
    }

    /// Settles in the background (batched with others); kept for Redis's
    /// return if it is away.
    pub fn settle(&self, settlement: Settlement) {
        if let Err(full) = self.settlements.try_send(settlement) {
            self.keep(full.into_inner());
        }
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

/// The names of a chain's buckets in Redis (computed once per cached key).
pub fn bucket_names(chain: &[BucketId]) -> Arc<[String]> {
    chain.iter().map(|id| bucket_key(PREFIX, id)).collect()
}

/// While Redis is away, checks it every tick; once it answers, applies the
/// settlements kept meanwhile.
async fn reconcile(fleet: std::sync::Weak<Fleet>) {
    let mut ticker = tokio::time::interval(Duration::from_millis(250));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Some(fleet) = fleet.upgrade() else { return };
        if !fleet.up.load(Ordering::Relaxed) {
            let mut redis = fleet.redis.clone();
            let pong = redis::cmd("PING").query_async::<String>(&mut redis).await.map(drop).map_err(FleetError::from);
            if fleet.noted(pong).is_err() {
                continue;
            }
        }
        let waiting = std::mem::take(&mut *fleet.pending.lock().unwrap_or_else(PoisonError::into_inner));
        if waiting.is_empty() {
            continue;
        }
        let mut chunks = waiting.chunks(SETTLE_BATCH);
        for chunk in chunks.by_ref() {
            if fleet.apply(chunk).await.is_err() {
                chunk.iter().cloned().for_each(|settlement| fleet.keep(settlement));
                break;
            }
        }
        chunks.flatten().cloned().for_each(|settlement| fleet.keep(settlement));
    }
}

/// The server does not know the scripts (it restarted, or was flushed).
fn lost_scripts(err: &redis::RedisError) -> bool {
    err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) || err.to_string().contains("NOSCRIPT")
}

/// Sends settlements as they come, in pipelined batches of what is waiting.
async fn send_settlements(fleet: std::sync::Weak<Fleet>, mut queue: mpsc::Receiver<Settlement>) {
    let mut batch = Vec::with_capacity(SETTLE_BATCH);
    while queue.recv_many(&mut batch, SETTLE_BATCH).await > 0 {
        let Some(fleet) = fleet.upgrade() else { return };
        // While Redis is away the reconciler sends them once it is back.
        if !fleet.up.load(Ordering::Relaxed) || fleet.apply(&batch).await.is_err() {
            batch.drain(..).for_each(|settlement| fleet.keep(settlement));
        }
        batch.clear();
    }
}
