//! A fleet's agent runs in Redis: one hash per (key, run id) holding the
//! run's spend, reservation, calls, tool calls, tokens, first call and
//! stopped state, with a time to live renewed by every call (an abandoned
//! run expires), and an index of the runs seen (a sorted set of hash
//! names by when each was last seen) for listing and kills. A call is
//! admitted by one script in one round trip (every limit and the stopped
//! state checked, the reservation held) and settled by one more; a kill
//! writes the stopped state, which every instance's next admission reads.
//! The arguments and answers are pure (`switchyard_governance::run_fleet`).

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;
use switchyard_governance::run::{CallKind, RunSpec, Stop};
use switchyard_governance::run_fleet::{admit_args, hash_name, read_admit, read_hash_name, settle_args, BadVerdict};
use switchyard_governance::NanoUsd;

use crate::counters::{Fleet, FleetError};

/// Namespace of every key Switchyard writes.
const PREFIX: &str = "switchyard";

/// The runs' index.
const INDEX: &str = "switchyard:runs";

/// How long a run nobody calls is kept: a run idle this long is forgotten
/// (its next call starts it afresh).
pub const RUN_TTL: Duration = Duration::from_secs(24 * 3600);

/// The most runs a listing or a kill reads from the index (the most
/// recently seen first).
pub const MAX_INDEXED: usize = 10_000;

/// How long one Redis call may take.
const CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// The scripts, hashed once (each call sends its SHA, and its text only
/// when Redis lost it).
static ADMIT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("run_admit.lua")));
static SETTLE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("run_settle.lua")));

/// Writes `killed` on a run whose hash still lives (a kill never makes
/// a hash without a time to live).
static KILL: LazyLock<Script> = LazyLock::new(|| Script::new(KILL_TEXT));
const KILL_TEXT: &str = "if redis.call('EXISTS', KEYS[1]) == 1 then \
    redis.call('HSET', KEYS[1], 'state', ARGV[1]) return 1 end return 0";

/// A run as Redis holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetRun {
    /// The caller's key id.
    pub owner: String,
    /// The run id.
    pub id: String,
    /// The group whose `runs:` applies.
    pub group: String,
    /// Its stopped state (empty: open).
    pub state: String,
    /// Its limits at its last call (JSON).
    pub limits: String,
    /// Spend settled, nano-USD.
    pub spent: NanoUsd,
    /// Spend reserved by calls in flight, nano-USD.
    pub reserved: NanoUsd,
    /// Tokens settled.
    pub tokens: u64,
    /// Model calls admitted.
    pub calls: u64,
    /// Tool calls admitted.
    pub tool_calls: u64,
    /// Calls in flight, fleet-wide.
    pub in_flight: u64,
    /// First call, Unix ms.
    pub started_ms: u64,
    /// Last call, Unix ms.
    pub last_ms: u64,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

async fn timed<T>(call: impl std::future::Future<Output = Result<T, redis::RedisError>>) -> Result<T, FleetError> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(answer) => Ok(answer?),
        Err(_) => Err(FleetError::Outage(redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut)))),
    }
}

impl Fleet {
    /// Admits one call of `kind` on run `id` of key `owner` (of `group`,
    /// under `spec`) reserving `reserve`, for the whole fleet: `Ok(Ok(()))`
    /// admitted and held, `Ok(Err(stop))` refused by the run's state.
    /// `Err`: Redis could not answer (`storage.on_redis_error` decides).
    #[expect(clippy::too_many_arguments, reason = "one call's every figure")]
    pub async fn admit_run(
        &self,
        owner: &str,
        id: &str,
        group: &str,
        spec: RunSpec,
        limits: &str,
        kind: CallKind,
        reserve: NanoUsd,
        now_ms: u64,
    ) -> Result<Result<(), Stop>, FleetError> {
        if !self.up.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(FleetError::Away);
        }
        let mut invocation = ADMIT.key(hash_name(PREFIX, owner, id));
        invocation.key(INDEX);
        invocation.arg(admit_args(spec, kind, reserve, now_ms, millis(RUN_TTL))).arg(group).arg(limits);
        let mut redis = self.redis.clone();
        let answer = timed(invocation.invoke_async::<String>(&mut redis)).await;
        let verdict = answer.and_then(|text| read_admit(&text).map_err(bad));
        self.noted(verdict)
    }

    /// Settles a call of run `id` of key `owner` admitted reserving
    /// `reserved`: it cost `cost` and used `tokens` (one round trip).
    #[expect(clippy::too_many_arguments, reason = "one call's every figure")]
    pub async fn settle_run(
        &self,
        owner: &str,
        id: &str,
        spec: RunSpec,
        reserved: NanoUsd,
        cost: NanoUsd,
        tokens: u64,
        now_ms: u64,
    ) -> Result<bool, FleetError> {
        let mut invocation = SETTLE.key(hash_name(PREFIX, owner, id));
        invocation.arg(settle_args(spec, reserved, cost, tokens, now_ms, millis(RUN_TTL)));
        let mut redis = self.redis.clone();
        let settled = timed(invocation.invoke_async::<i64>(&mut redis)).await.map(|n| n == 1);
        self.noted(settled)
    }

    /// Writes `state` (`killed`, or a limit's name) on run `id` of key
    /// `owner` if it still lives: whether it did.
    pub async fn stop_run(&self, owner: &str, id: &str, state: &str) -> Result<bool, FleetError> {
        let mut redis = self.redis.clone();
        let mut invocation = KILL.key(hash_name(PREFIX, owner, id));
        invocation.arg(state);
        let stopped = timed(invocation.invoke_async::<i64>(&mut redis)).await.map(|n| n == 1);
        self.noted(stopped)
    }

    /// The runs the fleet holds, the most recently seen first, at most
    /// [`MAX_INDEXED`] (those `wanted` accepts by owner and id are read:
    /// one round trip for the index, one pipelined for their hashes).
    pub async fn runs(&self, mut wanted: impl FnMut(&str, &str) -> bool) -> Result<Vec<FleetRun>, FleetError> {
        let mut redis = self.redis.clone();
        let cutoff = now_ms().saturating_sub(millis(RUN_TTL));
        let names: Vec<String> = timed(
            redis::cmd("ZRANGE")
                .arg(INDEX)
                .arg("+inf")
                .arg(cutoff)
                .arg("BYSCORE")
                .arg("REV")
                .arg("LIMIT")
                .arg(0)
                .arg(MAX_INDEXED)
                .query_async(&mut redis),
        )
        .await?;
        let named: Vec<(String, String, String)> = names
            .into_iter()
            .filter_map(|name| {
                let (owner, id) = read_hash_name(PREFIX, &name)?;
                wanted(owner, id).then(|| (owner.to_owned(), id.to_owned(), name.clone()))
            })
            .collect();
        if named.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for (_, _, name) in &named {
            pipe.cmd("HMGET")
                .arg(name)
                .arg(&["group", "state", "limits", "spent", "reserved", "tokens", "calls", "tools", "inflight"])
                .arg(&["started", "last"]);
        }
        let rows: Vec<Vec<Option<String>>> = timed(pipe.query_async(&mut redis)).await?;
        let runs = named.into_iter().zip(rows).filter_map(|((owner, id, _), row)| read_run(owner, id, &row)).collect();
        self.noted(Ok(runs))
    }
}

/// A run from its hash's fields in [`Fleet::runs`]' order; `None` when the
/// hash expired after the index named it.
fn read_run(owner: String, id: String, row: &[Option<String>]) -> Option<FleetRun> {
    let text = |i: usize| row.get(i).cloned().flatten();
    let number = |i: usize| text(i).and_then(|t| t.parse::<u64>().ok()).unwrap_or(0);
    // Every live hash has its first call written.
    text(9)?;
    Some(FleetRun {
        owner,
        id,
        group: text(0).unwrap_or_default(),
        state: text(1).unwrap_or_default(),
        limits: text(2).unwrap_or_default(),
        spent: number(3),
        reserved: number(4),
        tokens: number(5),
        calls: number(6),
        tool_calls: number(7),
        in_flight: number(8),
        started_ms: number(9),
        last_ms: number(10),
    })
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn bad(err: BadVerdict) -> FleetError {
    FleetError::Refused(redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, "run verdict", err.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_read_back_fills_every_figure_and_skips_an_expired_one() {
        let row: Vec<Option<String>> = ["acme", "usd", "{}", "70", "5", "9", "2", "1", "1", "100", "200"]
            .iter()
            .map(|s| Some((*s).to_owned()))
            .collect();
        let run = read_run("k".into(), "r".into(), &row).unwrap();
        assert_eq!(
            (run.spent, run.reserved, run.tokens, run.calls, run.tool_calls, run.in_flight),
            (70, 5, 9, 2, 1, 1)
        );
        assert_eq!((run.started_ms, run.last_ms, run.state.as_str()), (100, 200, "usd"));
        assert_eq!(read_run("k".into(), "r".into(), &vec![None; 11]), None);
    }
}
