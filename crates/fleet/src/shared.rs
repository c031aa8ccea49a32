//! Routing state a fleet shares (`storage.redis_url`): breakers and
//! session pins. Reads stay local: every instance keeps its own breakers
//! and session table on the request path.
//!
//! - Breakers: what changes them travels over Redis pub/sub. A trip on one
//!   instance opens that lane's breaker on every instance until the same
//!   moment, and a passed trial closes it everywhere. The half-open trial
//!   is claimed with `SET NX`, so one instance in the fleet sends it; that
//!   claim is a round trip only while a lane is half-open.
//! - Sessions: each pin is written to Redis in the background (with the
//!   pool's TTL); a session this instance has not seen is looked up there
//!   once, so a session stays on its lane whichever instance it reaches.
//! - MCP sessions: each one a key with a time to live, and each key's
//!   sessions counted in a sorted set, so a key's cap holds fleet-wide.
//! - Quotas: a lane whose upstream said it is nearly or wholly spent (its
//!   rate-limit headers) is told to the fleet on a channel of its own, at
//!   most once a second per lane, so every instance ranks it last or rests
//!   it until its reset, not only the one that read the headers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use serde::{Deserialize, Serialize};

const CHANNEL: &str = "switchyard:breakers";

/// Where learned upstream quotas travel (apart from breaker changes, which
/// an instance of an older version would misread them as).
const QUOTA_CHANNEL: &str = "switchyard:quotas";

/// An upstream's quota of one lane, as one instance read it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct QuotaEvent {
    instance: String,
    lane: String,
    /// The least share of its limits left.
    share: f64,
    /// How long the share holds (until its limit's reset).
    fresh_for_ms: u64,
    /// A limit is spent: rest the lane this long.
    rest_for_ms: Option<u64>,
}

/// How long a Redis call may take.
const CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// One breaker change, as published.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Event {
    /// The publishing instance (its own events are not applied twice).
    instance: String,
    pool: String,
    lane: String,
    /// Opened for this long; `None`: closed.
    open_for_ms: Option<u64>,
    reason: Option<String>,
}

/// The breakers the fleet's changes apply to (the serving gateway's).
pub trait Breakers: Send + Sync {
    /// Opens `lane` of `pool` until `until` (another instance tripped it).
    fn open_remotely(&self, pool: &str, lane: &str, until: std::time::Instant, reason: &str);
    /// Closes `lane` of `pool` (another instance's trial passed).
    fn close_remotely(&self, pool: &str, lane: &str);
    /// Another instance read `lane`'s upstream quota: `share` left for
    /// `fresh_for`, and a rest of `rest_for` when a limit is spent.
    fn quota_remotely(&self, lane: &str, share: f64, fresh_for: Duration, rest_for: Option<Duration>) {
        let _ = (lane, share, fresh_for, rest_for);
    }
}

/// The fleet's breaker channel.
pub struct FleetState {
    pub(crate) redis: ConnectionManager,
    instance: String,
    breakers: Mutex<Weak<dyn Breakers>>,
    /// Changes published by this instance.
    pub sent: AtomicU64,
    /// Changes from other instances applied here.
    pub applied: AtomicU64,
}

impl FleetState {
    /// Connects to `url` and starts following the other instances' changes.
    pub async fn connect(url: &str) -> Result<Arc<FleetState>, redis::RedisError> {
        let client = redis::Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CALL_TIMEOUT))
            .set_response_timeout(Some(CALL_TIMEOUT))
            .set_number_of_retries(1);
        let redis = ConnectionManager::new_with_config(client.clone(), config).await?;
        let shared = Arc::new(FleetState {
            redis,
            instance: format!("{:032x}", fastrand::u128(..)),
            breakers: Mutex::new(Weak::<Unattached>::new()),
            sent: AtomicU64::new(0),
            applied: AtomicU64::new(0),
        });
        let (ready, subscribed) = tokio::sync::oneshot::channel();
        switchyard_tasks::service("fleet subscriptions", follow(client, Arc::downgrade(&shared), ready));
        // Subscribed before the first request, so no trip goes unheard.
        let _ = tokio::time::timeout(Duration::from_secs(2), subscribed).await;
        Ok(shared)
    }

    /// The breakers the fleet's changes apply to: the serving gateway's, at
    /// boot and after every config reload.
    pub fn attach(&self, breakers: Weak<dyn Breakers>) {
        *self.breakers.lock().unwrap_or_else(PoisonError::into_inner) = breakers;
    }

    fn publish(self: &Arc<Self>, pool: &str, lane: &str, open_for: Option<Duration>, reason: Option<&str>) {
        let event = Event {
            instance: self.instance.clone(),
            pool: pool.to_owned(),
            lane: lane.to_owned(),
            open_for_ms: open_for.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            reason: reason.map(str::to_owned),
        };
        if let Ok(text) = serde_json::to_string(&event) {
            self.send(CHANNEL, text, "a breaker change");
        }
    }

    /// Publishes `text` on `channel` in the background, counted when sent.
    fn send(self: &Arc<Self>, channel: &'static str, text: String, what: &'static str) {
        let shared = self.clone();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        switchyard_tasks::work_on(&runtime, async move {
            let mut redis = shared.redis.clone();
            match redis::cmd("PUBLISH").arg(channel).arg(text).query_async::<i64>(&mut redis).await {
                Ok(_) => {
                    shared.sent.fetch_add(1, Ordering::Relaxed);
                }
                Err(err) => tracing::warn!(error = %err, "{what} could not be shared with the fleet"),
            }
        });
    }

    /// This instance tripped `lane` of `pool` for `open_for`.
    pub fn tripped(self: &Arc<Self>, pool: &str, lane: &str, open_for: Duration, reason: &str) {
        self.publish(pool, lane, Some(open_for), Some(reason));
    }

    /// This instance's trial of `lane` passed.
    pub fn closed(self: &Arc<Self>, pool: &str, lane: &str) {
        self.publish(pool, lane, None, None);
    }

    /// Tells the fleet what `lane`'s upstream said of its quota, in the
    /// background (the caller throttles it).
    pub fn quota(self: &Arc<Self>, lane: &str, share: f64, fresh_for: Duration, rest_for: Option<Duration>) {
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let event = QuotaEvent {
            instance: self.instance.clone(),
            lane: lane.to_owned(),
            share,
            fresh_for_ms: millis(fresh_for),
            rest_for_ms: rest_for.map(millis),
        };
        if let Ok(text) = serde_json::to_string(&event) {
            self.send(QUOTA_CHANNEL, text, "a lane's quota");
        }
    }

    /// Writes a session's pin in the background (`ttl`: the pool's).
    pub fn pin_session(self: &Arc<Self>, pool: &str, session: &str, lane: &str, ttl: Duration) {
        let key = session_key(pool, session);
        let (lane, millis) = (lane.to_owned(), u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1));
        let shared = self.clone();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        switchyard_tasks::work_on(&runtime, async move {
            let mut redis = shared.redis.clone();
            let written =
                redis::cmd("SET").arg(key).arg(lane).arg("PX").arg(millis).query_async::<()>(&mut redis).await;
            if let Err(err) = written {
                tracing::debug!(error = %err, "a session pin could not be shared with the fleet");
            }
        });
    }

    /// The lane another instance pinned `session` to, if any (one round
    /// trip, for a session this instance has not seen).
    pub async fn session_lane(&self, pool: &str, session: &str) -> Option<String> {
        let mut redis = self.redis.clone();
        redis::cmd("GET").arg(session_key(pool, session)).query_async::<Option<String>>(&mut redis).await.ok().flatten()
    }

    /// Keeps tool-call signatures (key, signature) for `ttl`, one round trip.
    pub async fn keep_signatures(&self, kept: &[(String, String)], ttl: Duration) -> Result<(), redis::RedisError> {
        let millis = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut pipe = redis::pipe();
        for (key, signature) in kept {
            pipe.cmd("SET").arg(signature_key(key)).arg(signature).arg("PX").arg(millis).ignore();
        }
        let mut redis = self.redis.clone();
        pipe.query_async::<()>(&mut redis).await
    }

    /// The signature kept under each key, in order (one round trip).
    pub async fn find_signatures(&self, keys: &[String]) -> Result<Vec<Option<String>>, redis::RedisError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut redis = self.redis.clone();
        let mut mget = redis::cmd("MGET");
        for key in keys {
            mget.arg(signature_key(key));
        }
        mget.query_async::<Vec<Option<String>>>(&mut redis).await
    }

    /// Opens MCP session `id` of key `key` with `record`, kept for `ttl`,
    /// unless the key holds `cap` live sessions already (false then). The
    /// count is the fleet's: each key's sessions are a sorted set in Redis
    /// scored by when each expires, so expired ones drop out as they go.
    pub async fn open_mcp_session(
        &self,
        id: &str,
        key: &str,
        record: Vec<u8>,
        ttl: Duration,
        cap: usize,
    ) -> Result<bool, redis::RedisError> {
        let mut redis = self.redis.clone();
        let opened = OPEN_MCP_SESSION
            .key(mcp_session_key(id))
            .key(mcp_sessions_of(key))
            .arg(record)
            .arg(millis(ttl))
            .arg(cap)
            .arg(id)
            .invoke_async::<i64>(&mut redis)
            .await?;
        Ok(opened == 1)
    }

    /// The MCP session `id`'s record, read again for `ttl` more (an active
    /// session stays, in its key's count too, when `key` opened it).
    /// `Err`: Redis could not answer.
    pub async fn mcp_session(&self, id: &str, key: &str, ttl: Duration) -> Result<Option<Vec<u8>>, redis::RedisError> {
        let mut redis = self.redis.clone();
        RENEW_MCP_SESSION
            .key(mcp_session_key(id))
            .key(mcp_sessions_of(key))
            .arg(millis(ttl))
            .arg(id)
            .invoke_async::<Option<Vec<u8>>>(&mut redis)
            .await
    }

    /// Writes the MCP session `id`'s record again, if it still lives (its
    /// time to live unchanged).
    pub async fn keep_mcp_session(&self, id: &str, record: Vec<u8>) -> Result<(), redis::RedisError> {
        let mut redis = self.redis.clone();
        redis::cmd("SET")
            .arg(mcp_session_key(id))
            .arg(record)
            .arg("XX")
            .arg("KEEPTTL")
            .query_async::<Option<String>>(&mut redis)
            .await
            .map(|_| ())
    }

    /// Forgets key `key`'s MCP session `id`.
    pub async fn end_mcp_session(&self, id: &str, key: &str) -> Result<(), redis::RedisError> {
        let mut redis = self.redis.clone();
        redis::pipe()
            .cmd("DEL")
            .arg(mcp_session_key(id))
            .ignore()
            .cmd("ZREM")
            .arg(mcp_sessions_of(key))
            .arg(id)
            .ignore()
            .query_async::<()>(&mut redis)
            .await
    }

    /// Binds A2A task `task` of agent `agent` to key `owner` for `ttl`,
    /// unless it is bound already: the owner it is bound to comes back
    /// (the first binding wins, so an agent naming another key's task in
    /// its answer cannot hand that task over).
    pub async fn bind_a2a_task(
        &self,
        agent: &str,
        task: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<String, redis::RedisError> {
        let mut redis = self.redis.clone();
        let key = a2a_task_key(agent, task);
        let (_, bound): (Option<String>, Option<String>) = redis::pipe()
            .cmd("SET")
            .arg(&key)
            .arg(owner)
            .arg("NX")
            .arg("PX")
            .arg(millis(ttl))
            .cmd("GET")
            .arg(&key)
            .query_async(&mut redis)
            .await?;
        Ok(bound.unwrap_or_else(|| owner.to_owned()))
    }

    /// The key A2A task `task` of agent `agent` is bound to, if any.
    pub async fn a2a_task_owner(&self, agent: &str, task: &str) -> Result<Option<String>, redis::RedisError> {
        let mut redis = self.redis.clone();
        redis::cmd("GET").arg(a2a_task_key(agent, task)).query_async::<Option<String>>(&mut redis).await
    }

    /// Claims the fleet's one half-open trial of `lane` for `hold`. False:
    /// another instance is sending it. When Redis cannot answer, this
    /// instance's own breaker decides (true).
    pub async fn claim_trial(&self, pool: &str, lane: &str, hold: Duration) -> bool {
        let key = trial_key(pool, lane);
        let mut redis = self.redis.clone();
        let millis = u64::try_from(hold.as_millis()).unwrap_or(u64::MAX).max(1);
        let claimed = redis::cmd("SET")
            .arg(&key)
            .arg(&self.instance)
            .arg("NX")
            .arg("PX")
            .arg(millis)
            .query_async::<Option<String>>(&mut redis)
            .await;
        match claimed {
            Ok(answer) => answer.is_some(),
            Err(err) => {
                tracing::debug!(error = %err, "trial claim not shared; this instance decides");
                true
            }
        }
    }

    /// Gives back this instance's claim on a trial that ended, so the next
    /// half-open period's trial can be claimed by any instance (a claim is
    /// otherwise held until it expires). In the background.
    pub fn release_trial(self: &Arc<Self>, pool: &str, lane: &str) {
        const RELEASE: &str =
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
        let key = trial_key(pool, lane);
        let shared = self.clone();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        switchyard_tasks::work_on(&runtime, async move {
            let mut redis = shared.redis.clone();
            let released = redis::cmd("EVAL")
                .arg(RELEASE)
                .arg(1)
                .arg(key)
                .arg(&shared.instance)
                .query_async::<i64>(&mut redis)
                .await;
            if let Err(err) = released {
                tracing::debug!(error = %err, "a trial claim could not be given back; it expires by itself");
            }
        });
    }

    fn apply(&self, event: &Event) {
        if event.instance == self.instance {
            return;
        }
        let Some(breakers) = self.breakers.lock().unwrap_or_else(PoisonError::into_inner).upgrade() else { return };
        match event.open_for_ms {
            Some(ms) => {
                let until = std::time::Instant::now() + Duration::from_millis(ms);
                let reason = format!("{} (tripped by another instance)", event.reason.as_deref().unwrap_or("failures"));
                breakers.open_remotely(&event.pool, &event.lane, until, &reason);
            }
            None => breakers.close_remotely(&event.pool, &event.lane),
        }
        self.applied.fetch_add(1, Ordering::Relaxed);
    }

    fn apply_quota(&self, event: &QuotaEvent) {
        if event.instance == self.instance || !event.share.is_finite() {
            return;
        }
        let Some(breakers) = self.breakers.lock().unwrap_or_else(PoisonError::into_inner).upgrade() else { return };
        let fresh_for = Duration::from_millis(event.fresh_for_ms.min(86_400_000));
        let rest_for = event.rest_for_ms.map(|ms| Duration::from_millis(ms.min(86_400_000)));
        breakers.quota_remotely(&event.lane, event.share.clamp(0.0, 1.0), fresh_for, rest_for);
        self.applied.fetch_add(1, Ordering::Relaxed);
    }
}

/// Where the fleet's claim on a lane's half-open trial is kept.
fn trial_key(pool: &str, lane: &str) -> String {
    format!("switchyard:trial:{pool}:{lane}")
}

/// Where an MCP session is kept.
fn mcp_session_key(id: &str) -> String {
    format!("switchyard:mcp:session:{id}")
}

/// Where key `key`'s MCP sessions are counted.
fn mcp_sessions_of(key: &str) -> String {
    format!("switchyard:mcp:sessions-of:{key}")
}

fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Opens a session under its key's cap. KEYS: the session, its key's set;
/// ARGV: the record, the TTL in ms, the cap, the session id. 1: opened.
static OPEN_MCP_SESSION: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        r"
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[4])
redis.call('PEXPIRE', KEYS[2], ttl)
return 1
",
    )
});

/// Reads a session and renews it, in its key's set too (a member only:
/// another key's set never gains it). KEYS: the session, the reader's
/// key's set; ARGV: the TTL in ms, the session id.
static RENEW_MCP_SESSION: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        r"
local record = redis.call('GET', KEYS[1])
if not record then
  redis.call('ZREM', KEYS[2], ARGV[2])
  return false
end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local ttl = tonumber(ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
if redis.call('ZADD', KEYS[2], 'XX', 'CH', now + ttl, ARGV[2]) == 1 then
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return record
",
    )
});

fn a2a_task_key(agent: &str, task: &str) -> String {
    format!("switchyard:a2a-task:{agent}:{task}")
}

fn signature_key(key: &str) -> String {
    format!("switchyard:signature:{key}")
}

/// Where a session's pin is kept (ids are at most 256 bytes: refused
/// longer at ingress).
fn session_key(pool: &str, session: &str) -> String {
    format!("switchyard:session:{pool}:{session}")
}

/// Breakers before a gateway is attached: changes go nowhere.
struct Unattached;

impl Breakers for Unattached {
    fn open_remotely(&self, _: &str, _: &str, _: std::time::Instant, _: &str) {}
    fn close_remotely(&self, _: &str, _: &str) {}
}

/// Follows the channel for the life of the process, resubscribing after
/// Redis comes back.
async fn follow(client: redis::Client, shared: Weak<FleetState>, ready: tokio::sync::oneshot::Sender<()>) {
    let mut ready = Some(ready);
    let mut backoff = Duration::from_millis(100);
    loop {
        match client.get_async_pubsub().await {
            Ok(mut pubsub) => {
                if pubsub.subscribe(&[CHANNEL, QUOTA_CHANNEL]).await.is_ok() {
                    backoff = Duration::from_millis(100);
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(());
                    }
                    let mut messages = pubsub.on_message();
                    while let Some(message) = messages.next().await {
                        let Some(shared) = shared.upgrade() else { return };
                        let Ok(text) = message.get_payload::<String>() else { continue };
                        if message.get_channel_name() == QUOTA_CHANNEL {
                            if let Ok(event) = serde_json::from_str::<QuotaEvent>(&text) {
                                shared.apply_quota(&event);
                            }
                        } else if let Ok(event) = serde_json::from_str::<Event>(&text) {
                            shared.apply(&event);
                        }
                    }
                }
            }
            Err(err) => tracing::debug!(error = %err, "breaker channel: redis unreachable; retrying"),
        }
        if shared.strong_count() == 0 {
            return;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}
