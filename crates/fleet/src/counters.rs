//! A fleet's shared counters in Redis (`storage.redis_url`): budgets,
//! reservations, rates and concurrency of every bucket, admitted and settled
//! by two Lua scripts so a key's whole chain is checked and held in one
//! atomic step, one round trip per request. The arguments and the reading
//! of answers are pure (`switchyard_governance::fleet`); this module sends
//! them, keeps the holds of this instance's requests leased, and decides
//! what happens while Redis is away (`storage.on_redis_error`).
//!
//! The bound: every admission holds its estimate on every bucket of its
//! chain before it runs, across all instances at once, so settled spend
//! passes a cap only by what requests in flight under-reserved, as on one
//! node. Every admission's answer carries each bucket's spend, which the
//! instance's own counters learn: while Redis is away and `fail_open`
//! admits on them, each instance spends at most what it last saw left of
//! a cap; what those requests cost is added to Redis when it returns. A
//! bucket Redis does not know (never seen, or lost in a restart) is seeded
//! from the instance's counters by whichever script meets it first, and
//! reported ([`Fleet::take_seeded`]) for the ledger to be read.
//!
//! Three things keep the shared counters honest:
//! - a hold is leased (`governance.hold_lease`) and renewed while its
//!   request lives, so an instance that dies gives its reservations and
//!   in-flight counts back when the lease runs out;
//! - a settlement is applied once (a marker set with it), so one sent
//!   again after a lost answer changes nothing, and one a script refuses is
//!   set aside alone, never retried with the rest of its batch;
//! - only an outage (no connection, a timeout) marks Redis as away; a
//!   script's error answers that one request and changes nothing for the
//!   others.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;
use switchyard_config::OnRedisError;
use switchyard_governance::fleet::{bucket_keys, hold_member, read_admit, settled_key, Seen};
use switchyard_governance::{BucketId, Estimate, Governor, NanoUsd, Refusal};
use tokio::sync::mpsc;

/// Namespace of every key Switchyard writes.
const PREFIX: &str = "switchyard";

/// How long one Redis call may take before it counts as Redis being away.
const CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// Settlements kept for Redis's return, at most.
const MAX_PENDING: usize = 100_000;

/// Settlements sent in one pipelined round trip, at most.
const SETTLE_BATCH: usize = 64;

/// How long a settlement's once-only marker is kept: longer than any retry
/// of a settlement whose answer was lost (the retry follows within seconds
/// of Redis answering again).
const MARKER: Duration = Duration::from_secs(600);

/// Buckets found unknown to Redis, waiting to be read from the ledger.
const MAX_SEEDED: usize = 1024;

const ADMIT_SCRIPT: &str = concat!(include_str!("fleet_prelude.lua"), include_str!("fleet_admit.lua"));
const SETTLE_SCRIPT: &str = concat!(include_str!("fleet_prelude.lua"), include_str!("fleet_settle.lua"));

/// Raises a bucket's spend in its window to what the ledger holds, never
/// lowers it, and leaves another window alone. KEYS[1] the bucket's
/// counters; ARGV[1] the window start (s), ARGV[2] the spend (nano-USD).
const RAISE_SCRIPT: &str = "local f = redis.call('HMGET', KEYS[1], 'ws', 'spent') \
    if f[1] and tonumber(f[1]) == tonumber(ARGV[1]) and tonumber(f[2] or 0) < tonumber(ARGV[2]) then \
    redis.call('HSET', KEYS[1], 'spent', ARGV[2]) return 1 end return 0";

/// The fleet's counters and the client that reaches them.
pub struct Fleet {
    pub(crate) redis: ConnectionManager,
    admit: Script,
    settle: Script,
    raise: Script,
    /// What admission does while Redis is away.
    pub on_error: OnRedisError,
    /// Redis answered the last call (a script's error counts as an answer).
    pub up: AtomicBool,
    /// Calls that failed.
    pub errors: AtomicU64,
    /// Settlements a script refused, set aside (each logged).
    pub refused_settlements: AtomicU64,
    /// Requests admitted on local counters while Redis was away.
    pub local_admissions: AtomicU64,
    /// Settlements waiting for Redis.
    pending: Mutex<Vec<Settlement>>,
    /// Settlements on their way (one task sends them in pipelined batches).
    settlements: mpsc::Sender<Settlement>,
    /// This instance's holds in Redis, renewed while their requests live.
    holds: Mutex<HashMap<u64, LiveHold>>,
    /// How long a hold outlives its last renewal.
    lease: Duration,
    /// Buckets a script found unknown to Redis and seeded from this
    /// instance's counters (a restart without persistence, an eviction):
    /// governance reads their spend from the ledger and raises them.
    seeded: mpsc::Sender<Vec<BucketId>>,
    seeded_rx: Mutex<Option<mpsc::Receiver<Vec<BucketId>>>>,
    /// This process's random high bits of every hold id.
    hold_prefix: u64,
    next_hold: AtomicU64,
    /// Admission by leased slices, once started (`storage.redis.lease`).
    pub(crate) leases: std::sync::OnceLock<crate::lease::Leases>,
}

/// A hold this instance has in Redis: the chain's keys and its member.
struct LiveHold {
    keys: Arc<[String]>,
    member: String,
}

/// One settlement for the shared counters.
#[derive(Debug, Clone)]
pub struct Settlement {
    /// Its marker, then the chain's keys.
    pub keys: Vec<String>,
    /// The script's numeric arguments.
    pub args: Vec<i64>,
    /// The hold's member, or `-` for a request admitted locally.
    pub member: String,
    /// Its chain, to be reported when the settlement finds a bucket Redis
    /// does not know (and seeds it).
    pub chain: Option<Arc<[BucketId]>>,
}

/// Why Redis could not be used.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// Connecting, sending or reading failed, or timed out: Redis is away.
    #[error("redis: {0}")]
    Outage(redis::RedisError),
    /// Redis answered with an error (a script refused its arguments): this
    /// call failed, and Redis is still there.
    #[error("redis refused the call: {0}")]
    Refused(redis::RedisError),
    /// The script's answer made no sense.
    #[error(transparent)]
    Answer(#[from] switchyard_governance::fleet::BadAnswer),
    /// Redis was away at the last call; a background check brings it back.
    #[error("redis is unreachable")]
    Away,
}

impl From<redis::RedisError> for FleetError {
    fn from(err: redis::RedisError) -> FleetError {
        if is_outage(&err) {
            FleetError::Outage(err)
        } else {
            FleetError::Refused(err)
        }
    }
}

impl FleetError {
    /// Whether this failure means Redis is away (rather than that one call
    /// was refused).
    pub fn is_outage(&self) -> bool {
        matches!(self, FleetError::Outage(_) | FleetError::Away)
    }
}

/// Redis is not there to answer: no connection, a timeout, or a server that
/// cannot serve yet. Any other error is an answer about that one call.
fn is_outage(err: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || matches!(
            err.kind(),
            ErrorKind::Server(
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::ReadOnly
            ) | ErrorKind::ClusterConnectionNotFound
        )
}

/// A bucket's shared figures in Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Figures {
    /// The budget window its spend belongs to (Unix s).
    pub window_start: i64,
    /// Settled spend in that window (nano-USD).
    pub spent: NanoUsd,
    /// Held by requests in flight across the fleet (nano-USD).
    pub reserved: NanoUsd,
    /// Requests in flight across the fleet.
    pub in_flight: u64,
}

/// What an admission in Redis said.
#[derive(Debug)]
pub enum Admitted {
    /// Admitted: Redis holds the reservation as this hold.
    Held(u64),
    /// Refused by a bucket.
    Refused(Refusal),
}

impl Fleet {
    /// Connects to `url`; fails when Redis cannot be reached at boot.
    pub async fn connect(url: &str, on_error: OnRedisError, lease: Duration) -> Result<Arc<Fleet>, FleetError> {
        let client = redis::Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CALL_TIMEOUT))
            .set_response_timeout(Some(CALL_TIMEOUT))
            .set_number_of_retries(1);
        let mut redis = ConnectionManager::new_with_config(client, config).await?;
        for code in [ADMIT_SCRIPT, SETTLE_SCRIPT, crate::lease::LEASE_SCRIPT] {
            redis::cmd("SCRIPT").arg("LOAD").arg(code).query_async::<String>(&mut redis).await?;
        }
        let (settlements, queue) = mpsc::channel(MAX_PENDING);
        let (seeded, seeded_rx) = mpsc::channel(MAX_SEEDED);
        let fleet = Arc::new(Fleet {
            redis,
            admit: Script::new(ADMIT_SCRIPT),
            settle: Script::new(SETTLE_SCRIPT),
            raise: Script::new(RAISE_SCRIPT),
            seeded,
            seeded_rx: Mutex::new(Some(seeded_rx)),
            on_error,
            up: AtomicBool::new(true),
            errors: AtomicU64::new(0),
            refused_settlements: AtomicU64::new(0),
            local_admissions: AtomicU64::new(0),
            pending: Mutex::new(Vec::new()),
            settlements,
            holds: Mutex::new(HashMap::new()),
            lease,
            hold_prefix: u64::from(fastrand::u32(..)) << 32,
            next_hold: AtomicU64::new(0),
            leases: std::sync::OnceLock::new(),
        });
        switchyard_tasks::service("fleet reconcile", reconcile(Arc::downgrade(&fleet)));
        switchyard_tasks::service("fleet settlements", send_settlements(Arc::downgrade(&fleet), queue));
        switchyard_tasks::service("fleet hold renewal", renew_holds(Arc::downgrade(&fleet)));
        Ok(fleet)
    }

    pub(crate) fn noted<T>(&self, result: Result<T, FleetError>) -> Result<T, FleetError> {
        match &result {
            Ok(_) => self.up.store(true, Ordering::Relaxed),
            Err(err) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                if err.is_outage() {
                    if self.up.swap(false, Ordering::Relaxed) {
                        tracing::warn!(error = %err, "redis is unreachable; admission follows storage.on_redis_error");
                    }
                } else {
                    // Redis answered: it is there, whatever this one call said.
                    self.up.store(true, Ordering::Relaxed);
                    tracing::error!(error = %err, "a fleet script refused a call; that request alone is affected");
                }
            }
        }
        result
    }

    /// A new hold id: this process's prefix above a sequence.
    pub fn new_hold(&self) -> u64 {
        self.hold_prefix | (self.next_hold.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff)
    }

    /// The end of a lease that starts at `now_ms`.
    pub fn lease_end(&self, now_ms: u64) -> u64 {
        now_ms.saturating_add(self.lease.as_millis() as u64)
    }

    /// Admits `estimate` on `chain` for the whole fleet as hold `hold`,
    /// with the admission script's arguments `args`
    /// ([`Governor::fleet_admit_args`], leased to [`Fleet::lease_end`]):
    /// held in Redis under a lease this instance renews until the hold is
    /// settled, or refused.
    pub async fn admit(
        &self,
        keys: &Arc<[String]>,
        chain: &[BucketId],
        args: Vec<i64>,
        estimate: Estimate,
        hold: u64,
    ) -> Result<Admitted, FleetError> {
        Ok(self.admit_seeing(keys, chain, args, estimate, hold).await?.0)
    }

    /// [`Fleet::admit`], with what the fleet had spent on each bucket (for
    /// this instance's own counters to learn). A bucket Redis did not know
    /// is reported to [`Fleet::take_seeded`]'s receiver.
    pub async fn admit_seeing(
        &self,
        keys: &Arc<[String]>,
        chain: &[BucketId],
        args: Vec<i64>,
        estimate: Estimate,
        hold: u64,
    ) -> Result<(Admitted, Seen), FleetError> {
        // While Redis is away, requests do not each wait for it to time
        // out: the reconciler checks it in the background.
        if !self.up.load(Ordering::Relaxed) {
            return Err(FleetError::Away);
        }
        let member = hold_member(hold, estimate);
        let command = evalsha(&self.admit, keys, &args, &member);
        let answer = self.run::<Vec<i64>>(&command, &[(&self.admit, ADMIT_SCRIPT)]).await;
        let result = answer.and_then(|answer| Ok(read_admit(&answer, chain)?));
        let (refusal, seen) = self.noted(result)?;
        if !seen.seeded.is_empty() {
            self.report_seeded(seen.seeded.iter().filter_map(|&i| chain.get(i).cloned()).collect());
        }
        match refusal {
            Some(refusal) => Ok((Admitted::Refused(refusal), seen)),
            None => {
                let live = LiveHold { keys: keys.clone(), member };
                self.holds.lock().unwrap_or_else(PoisonError::into_inner).insert(hold, live);
                Ok((Admitted::Held(hold), seen))
            }
        }
    }

    pub(crate) fn report_seeded(&self, buckets: Vec<BucketId>) {
        if self.seeded.try_send(buckets).is_err() {
            tracing::warn!("buckets redis did not know wait to be read from the ledger: {MAX_SEEDED} already do");
        }
    }

    /// The buckets scripts found unknown to Redis and seeded from this
    /// instance's counters, for their spend to be read from the ledger
    /// (taken once).
    pub fn take_seeded(&self) -> Option<mpsc::Receiver<Vec<BucketId>>> {
        self.seeded_rx.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// Raises the spend of the bucket whose counters are `counters` in the
    /// window starting `window_start` (Unix s) to `spent`, if Redis holds
    /// less (never lowers it).
    pub async fn raise_spent(&self, counters: &str, window_start: i64, spent: NanoUsd) -> Result<bool, FleetError> {
        let mut command = self.raise.prepare_invoke();
        command.key(counters).arg(window_start).arg(spent.min(switchyard_governance::fleet::SCRIPT_MAX as u64));
        let mut redis = self.redis.clone();
        let raised = command.invoke_async::<i64>(&mut redis).await.map_err(FleetError::from);
        self.noted(raised).map(|raised| raised == 1)
    }

    /// A bucket's shared figures as Redis holds them now: its window start,
    /// settled spend, reservations and requests in flight (`None`: Redis
    /// does not know it).
    pub async fn figures(&self, counters: &str) -> Result<Option<Figures>, FleetError> {
        if !self.up.load(Ordering::Relaxed) {
            return Err(FleetError::Away);
        }
        let mut redis = self.redis.clone();
        let read = redis::cmd("HMGET")
            .arg(counters)
            .arg(&["ws", "spent", "reserved", "inflight"][..])
            .query_async::<[Option<i64>; 4]>(&mut redis)
            .await
            .map_err(FleetError::from);
        let [ws, spent, reserved, inflight] = self.noted(read)?;
        let count = |n: Option<i64>| n.and_then(|n| u64::try_from(n).ok()).unwrap_or(0);
        Ok(ws.map(|window_start| Figures {
            window_start,
            spent: count(spent),
            reserved: count(reserved),
            in_flight: count(inflight),
        }))
    }

    /// The settlement of hold `hold` on `chain`, its seeds read from
    /// `governor` before it counts this cost (`refund_request`: a cache
    /// hit, given back to request limits): `held` says whether Redis holds
    /// its reservation (false: admitted locally while Redis was away).
    #[expect(clippy::too_many_arguments, reason = "a settlement's every figure")]
    pub fn settlement(
        &self,
        keys: &[String],
        (governor, chain): (&mut Governor, &[BucketId]),
        hold: u64,
        reserved: Estimate,
        cost: NanoUsd,
        tokens: u64,
        (held, refund_request): (bool, bool),
        now_ms: u64,
    ) -> Settlement {
        let member = match held {
            true => hold_member(hold, reserved),
            false => "-".to_owned(),
        };
        let mut all = Vec::with_capacity(keys.len() + 1);
        all.push(settled_key(PREFIX, hold));
        all.extend(keys.iter().cloned());
        let args = governor.fleet_settle_args(
            chain,
            reserved,
            cost,
            tokens,
            refund_request,
            MARKER.as_millis() as u64,
            now_ms,
        );
        Settlement { keys: all, args, member, chain: None }
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

    /// Applies `batch` in one round trip. Each settlement stands alone: the
    /// ones applied (or applied before) are done, the ones a script refused
    /// are set aside, and the ones left when Redis went away come back.
    async fn apply(&self, batch: Vec<Settlement>) -> Vec<Settlement> {
        let mut pipe = redis::Pipeline::with_capacity(batch.len());
        pipe.ignore_errors();
        for settlement in &batch {
            pipe.add_command(evalsha(&self.settle, &settlement.keys, &settlement.args, &settlement.member));
        }
        let mut redis = self.redis.clone();
        let answers = match pipe.query_async::<Vec<redis::RedisResult<i64>>>(&mut redis).await {
            Ok(answers) if answers.iter().any(|a| a.as_ref().is_err_and(lost_scripts)) => {
                let loaded =
                    redis::cmd("SCRIPT").arg("LOAD").arg(SETTLE_SCRIPT).query_async::<String>(&mut redis).await;
                match loaded {
                    // Sent again whole: the ones already applied skip on their marker.
                    Ok(_) => pipe.query_async::<Vec<redis::RedisResult<i64>>>(&mut redis).await,
                    Err(err) => Err(err),
                }
            }
            other => other,
        };
        let answers = match self.noted(answers.map_err(FleetError::from)) {
            Ok(answers) => answers,
            Err(_) => return batch,
        };
        let mut again = Vec::new();
        let mut answers = answers.into_iter();
        for settlement in batch {
            match answers.next() {
                // A bucket Redis did not know was seeded (it lost it).
                Some(Ok(2)) => {
                    if let Some(chain) = &settlement.chain {
                        self.report_seeded(chain.to_vec());
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(err)) if !is_outage(&err) => {
                    self.refused_settlements.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(error = %err, keys = ?settlement.keys, "a settlement was refused by redis and set aside");
                }
                // Not answered: sent again later (its marker makes that safe).
                Some(Err(_)) | None => again.push(settlement),
            }
        }
        again
    }

    /// Settles in the background (batched with others); kept for Redis's
    /// return if it is away. Its hold is no longer renewed.
    pub fn settle(&self, hold: u64, settlement: Settlement) {
        self.holds.lock().unwrap_or_else(PoisonError::into_inner).remove(&hold);
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

    /// Waits until the settlements queued have left for Redis (shutdown;
    /// the caller bounds the wait).
    pub async fn flush(&self) {
        while self.settlements.capacity() < self.settlements.max_capacity() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The last batch taken off the queue is answered within one call.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    /// Settlements waiting for Redis.
    pub fn pending(&self) -> usize {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Holds this instance keeps leased.
    pub fn live_holds(&self) -> usize {
        self.holds.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

/// `EVALSHA` of `script` over `keys`, with `args` and then `member`: its
/// buffers sized once from the arguments, not grown while they are added
/// (growing them was a sixth of a fleet request's extra instructions).
fn evalsha(script: &Script, keys: &[String], args: &[i64], member: &str) -> redis::Cmd {
    /// The longest an `i64` is as text.
    const DIGITS: usize = 20;
    let count = 4 + keys.len() + args.len();
    let bytes = "EVALSHA".len()
        + script.get_hash().len()
        + DIGITS
        + keys.iter().map(String::len).sum::<usize>()
        + args.len() * DIGITS
        + member.len();
    let mut command = redis::Cmd::with_capacity(count, bytes);
    command.arg("EVALSHA").arg(script.get_hash()).arg(keys.len()).arg(keys).arg(args).arg(member);
    command
}

/// The names of a chain's buckets in Redis, two per bucket (its counters,
/// then its holds), computed once per cached key.
pub fn bucket_names(chain: &[BucketId]) -> Arc<[String]> {
    chain.iter().flat_map(|id| bucket_keys(PREFIX, id)).collect()
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
        let mut waiting = std::mem::take(&mut *fleet.pending.lock().unwrap_or_else(PoisonError::into_inner));
        while !waiting.is_empty() {
            let rest = waiting.split_off(waiting.len().min(SETTLE_BATCH));
            let again = fleet.apply(waiting).await;
            if !again.is_empty() {
                // Redis went away again: keep the rest for its return.
                again.into_iter().chain(rest).for_each(|settlement| fleet.keep(settlement));
                break;
            }
            waiting = rest;
        }
    }
}

/// Renews the lease of every hold this instance has, a third of a lease
/// apart, in one pipelined round trip (`ZADD XX`: a hold a reclaim already
/// gave back stays given back).
async fn renew_holds(fleet: std::sync::Weak<Fleet>) {
    let Some(every) = fleet.upgrade().map(|f| f.lease / 3) else { return };
    let mut ticker = tokio::time::interval(every.max(Duration::from_millis(100)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Some(fleet) = fleet.upgrade() else { return };
        if !fleet.up.load(Ordering::Relaxed) {
            continue;
        }
        let lease_end = unix_ms().saturating_add(fleet.lease.as_millis() as u64);
        let mut pipe = redis::pipe();
        {
            let holds = fleet.holds.lock().unwrap_or_else(PoisonError::into_inner);
            if holds.is_empty() {
                continue;
            }
            for live in holds.values() {
                for holds_key in live.keys.iter().skip(1).step_by(2) {
                    pipe.cmd("ZADD").arg(holds_key).arg("XX").arg(lease_end).arg(&live.member).ignore();
                }
            }
        }
        let mut redis = fleet.redis.clone();
        let renewed = pipe.query_async::<()>(&mut redis).await.map_err(FleetError::from);
        let _ = fleet.noted(renewed);
    }
}

/// The server does not know the scripts (it restarted, or was flushed).
pub(crate) fn lost_scripts(err: &redis::RedisError) -> bool {
    err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) || err.to_string().contains("NOSCRIPT")
}

/// Sends settlements as they come, in pipelined batches of what is waiting.
async fn send_settlements(fleet: std::sync::Weak<Fleet>, mut queue: mpsc::Receiver<Settlement>) {
    let mut batch = Vec::with_capacity(SETTLE_BATCH);
    while queue.recv_many(&mut batch, SETTLE_BATCH).await > 0 {
        let Some(fleet) = fleet.upgrade() else { return };
        let taken = std::mem::replace(&mut batch, Vec::with_capacity(SETTLE_BATCH));
        // While Redis is away the reconciler sends them once it is back.
        let again = if fleet.up.load(Ordering::Relaxed) { fleet.apply(taken).await } else { taken };
        again.into_iter().for_each(|settlement| fleet.keep(settlement));
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
