//! The `pools:` wing: what callers name, the lanes behind it and how they
//! are tried (strategy, failover, hedging, breaker, fallback pools,
//! affinity).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use switchyard_guard::PolicySpec;

use crate::hooks::PendingFallback;
use crate::issue::{list, Issue};
use crate::units::duration_or;
use crate::{guard, hooks, kept, translation, BreakerPolicy, Hook, Model, Operation, Strategy, Translation};

/// A named pool of lanes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPool {
    #[serde(default)]
    pub hooks: Vec<serde_yaml_ng::Value>,
    pub failover: Option<RawFailover>,
    /// `terminate`/`end` (default) or `continue`; also accepted inside `failover`.
    pub stream_failure: Option<String>,
    /// `cancel` (default) or `finish`: what a stream whose caller left does.
    pub on_disconnect: Option<String>,
    pub hedge: Option<RawHedge>,
    #[serde(default)]
    pub policies: Vec<String>,
    pub cache: Option<RawPoolCache>,
    #[serde(default)]
    pub fallback: Vec<String>,
    pub breaker: Option<RawBreaker>,
    pub affinity: Option<RawAffinity>,
    /// How long a request waits for a permit when every lane is at its cap.
    pub queue_timeout: Option<String>,
    /// `lenient` (default) or `strict`.
    pub translation: Option<String>,
    /// How batch lines for this pool run: `gateway` (Switchyard runs them).
    pub batch: Option<String>,
    pub members: Vec<RawMember>,
}

/// Circuit-breaker tuning.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBreaker {
    pub consecutive_failures: Option<u32>,
    pub failure_rate: Option<f64>,
    pub min_requests: Option<u32>,
    pub window: Option<String>,
    pub base_cooldown: Option<String>,
    pub max_cooldown: Option<String>,
    pub hard_down_cooldown: Option<String>,
    pub jitter: Option<f64>,
}

/// Failover bounds.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFailover {
    pub max_hops: Option<u32>,
    pub timeout: Option<String>,
    pub retries: Option<u32>,
    pub first_token: Option<String>,
    pub stream_failure: Option<String>,
    pub max_continuations: Option<u32>,
}

/// A pool's response cache.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPoolCache {
    pub ttl: Option<String>,
}

/// Hedging of a pool's late first tokens.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHedge {
    /// `p95` or a duration.
    pub after: Option<String>,
    /// A share of traffic: `10%` or `0.1`.
    pub max_extra: Option<serde_yaml_ng::Value>,
    /// Hedge requests that offer tools at any temperature too.
    pub with_tools: Option<bool>,
}

/// A pool member.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMember {
    pub model: String,
    pub weight: Option<u32>,
}

/// Session affinity of a pool.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAffinity {
    pub enabled: Option<bool>,
    pub header: Option<String>,
    pub ttl: Option<String>,
    pub prefix: Option<String>,
}

/// A pool member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// Index into `Config::models`.
    pub model: usize,
    /// Relative share of traffic.
    pub weight: u32,
}

/// Failover bounds of a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failover {
    /// Most lanes tried for one request.
    pub max_hops: u32,
    /// Budget for all tries together.
    pub timeout: Duration,
    /// Tries again on the same lane after a transient failure (a 5xx, a
    /// connection lost before headers, a 429) before failing over. Off (0)
    /// unless asked: a retry adds latency a failover would not.
    pub retries: u32,
    /// Longest wait from sending a streamed request to its first content
    /// before the next candidate takes over (unset: only `stream_idle`
    /// and the failover deadline bound it).
    pub first_token: Option<Duration>,
    /// How many times a stream that breaks after its first content may be
    /// continued by the next candidate (`stream_failure: continue`, up to
    /// `max_continuations`); 0, the default, ends it with the caller's
    /// in-stream error.
    pub continuations: u32,
    /// What a stream whose caller left does (`on_disconnect`).
    pub on_disconnect: OnDisconnect,
}

/// What a stream whose caller went away does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDisconnect {
    /// The upstream stream is closed at once, so the generation stops; a
    /// whole answer still waiting for its usage is read on for it, briefly.
    #[default]
    Cancel,
    /// The upstream stream is read to its end (bounded by the lane's
    /// request timeout) for the exact usage, with no caller.
    Finish,
}

/// Most same-lane retries a pool may ask for.
pub const MAX_RETRIES: u32 = 10;

/// Most continuations of one stream a pool may ask for.
pub const MAX_CONTINUATIONS: u32 = 3;

impl Default for Failover {
    fn default() -> Failover {
        Failover {
            max_hops: 3,
            timeout: Duration::from_secs(60),
            retries: 0,
            first_token: None,
            continuations: 0,
            on_disconnect: OnDisconnect::Cancel,
        }
    }
}

/// A named pool of lanes.
#[derive(Debug, Clone)]
pub struct Pool {
    /// Config name.
    pub name: Arc<str>,
    /// Members in config order.
    pub members: Vec<Member>,
    /// Ordering strategy.
    pub strategy: Strategy,
    /// Failover bounds.
    pub failover: Failover,
    /// A second attempt when the first content is late, when enabled.
    pub hedge: Option<Hedge>,
    /// Guardrail policies its requests pass (indexes into
    /// `Config::policies`); a caller's group's policies replace them.
    pub policies: Vec<usize>,
    /// How long its answers are cached (`None`: not cached).
    pub cache_ttl: Option<Duration>,
    /// Pools tried in order when every member failed (indexes into `Config::pools`).
    pub fallback: Vec<usize>,
    /// Circuit-breaker tuning for this pool's lanes.
    pub breaker: BreakerPolicy,
    /// How long a request waits for a permit when every lane is at its cap.
    pub queue_timeout: Duration,
    /// The pool's own gates (indexes into `Config::hooks`).
    pub gates: Vec<usize>,
    /// Session affinity, when enabled.
    pub affinity: Option<Affinity>,
    /// What a lane that cannot carry the whole request does.
    pub translation: Translation,
    /// What its members serve (all the same one).
    pub operation: Operation,
}

/// Hedging: when a request's first content is later than `after`, a
/// second attempt starts on the next candidate; the first to bring content
/// is answered and the other cancelled.
#[derive(Debug, Clone, PartialEq)]
pub struct Hedge {
    /// When the second attempt starts.
    pub after: HedgeAfter,
    /// The extra attempts as a share of the pool's hedgeable requests (0 to 1).
    pub max_extra: f64,
    /// Requests that offer tools are hedged at any temperature too (by
    /// default only those without tools, or at temperature 0: two
    /// sampled tool plans are two different answers to pay for).
    pub with_tools: bool,
}

/// When a hedge starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HedgeAfter {
    /// After a fixed wait for the first content.
    Fixed(Duration),
    /// After the pool's recent 95th percentile of time to first content
    /// (no hedge until it has been measured).
    P95,
}

/// Default share of traffic hedges may add.
pub const DEFAULT_HEDGE_SHARE: f64 = 0.1;

/// Session affinity: a session header pins a session to the lane that served it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Affinity {
    /// The request header carrying the session id (lowercase).
    pub header: Arc<str>,
    /// How long a pin lasts after its last use.
    pub ttl: Duration,
    /// Prompt-cache affinity: requests without a session header that share
    /// a prompt prefix (system prompt, tools, first turn) go to the lane
    /// that served it for this long, the provider's cache lifetime (an hour
    /// where the caller asked its provider for one). Off unless set.
    pub prefix: Option<Duration>,
}

/// How many times a pool's broken streams may be continued: `stream_failure`
/// on the pool (the contract's place) or inside `failover` (either, not both).
fn stream_continuations(path: &str, pool: &RawPool, issues: &mut Vec<Issue>) -> u32 {
    let nested = pool.failover.as_ref().and_then(|f| f.stream_failure.as_deref());
    if pool.stream_failure.is_some() && nested.is_some() {
        issues.push(Issue::new(
            &format!("{path}.failover.stream_failure"),
            "stream_failure is set twice",
            "keep the pool's stream_failure and remove the one inside failover",
        ));
    }
    let most_asked = pool.failover.as_ref().and_then(|f| f.max_continuations);
    match pool.stream_failure.as_deref().or(nested) {
        None | Some("end" | "terminate") => {
            if most_asked.is_some() {
                issues.push(Issue::new(
                    &format!("{path}.failover.max_continuations"),
                    "max_continuations applies only when streams are continued",
                    "add stream_failure: continue, or remove max_continuations",
                ));
            }
            0
        }
        Some("continue") => {
            let most = most_asked.unwrap_or(1);
            if most == 0 || most > MAX_CONTINUATIONS {
                issues.push(Issue::new(
                    &format!("{path}.failover.max_continuations"),
                    format!("{most} continuations of one stream"),
                    format!("set it from 1 to {MAX_CONTINUATIONS}"),
                ));
            }
            most.clamp(1, MAX_CONTINUATIONS)
        }
        Some(other) => {
            issues.push(Issue::new(
                &format!("{path}.stream_failure"),
                format!("`{other}` is not what to do with a stream that breaks"),
                "use terminate (the caller's in-stream error) or continue (the next lane goes on)",
            ));
            0
        }
    }
}

/// A pool's `hedge:` block.
fn validate_hedge(path: &str, raw: &RawHedge, issues: &mut Vec<Issue>) -> Hedge {
    let after = match raw.after.as_deref() {
        None | Some("p95") => HedgeAfter::P95,
        Some(text) => {
            HedgeAfter::Fixed(duration_or(Some(text), Duration::from_secs(2), &format!("{path}.after"), issues))
        }
    };
    let share = match &raw.max_extra {
        None => Some(DEFAULT_HEDGE_SHARE),
        Some(serde_yaml_ng::Value::Number(n)) => n.as_f64(),
        Some(serde_yaml_ng::Value::String(text)) => {
            text.trim().strip_suffix('%').and_then(|n| n.trim().parse::<f64>().ok()).map(|pct| pct / 100.0)
        }
        Some(_) => None,
    };
    let max_extra = match share {
        Some(share) if share.is_finite() && share > 0.0 && share <= 1.0 => share,
        _ => {
            issues.push(Issue::new(
                &format!("{path}.max_extra"),
                "max_extra must be a share of traffic above 0 and at most 100%",
                "write it as a percentage (10%) or a fraction (0.1)",
            ));
            DEFAULT_HEDGE_SHARE
        }
    };
    Hedge { after, max_extra, with_tools: raw.with_tools.unwrap_or(false) }
}

fn validate_breaker(path: &str, raw: Option<&RawBreaker>, issues: &mut Vec<Issue>) -> BreakerPolicy {
    let defaults = BreakerPolicy::default();
    let Some(raw) = raw else {
        return defaults;
    };
    let duration = |value: Option<&str>, default: Duration, key: &str, issues: &mut Vec<Issue>| {
        duration_or(value, default, &format!("{path}.{key}"), issues)
    };
    let base_cooldown = duration(raw.base_cooldown.as_deref(), defaults.base_cooldown, "base_cooldown", issues);
    let policy = BreakerPolicy {
        consecutive_failures: raw.consecutive_failures.unwrap_or(defaults.consecutive_failures),
        failure_rate: raw.failure_rate.unwrap_or(defaults.failure_rate),
        min_requests: raw.min_requests.unwrap_or(defaults.min_requests),
        window: duration(raw.window.as_deref(), defaults.window, "window", issues),
        base_cooldown,
        // Unsaid, the cap is never below the cooldown the operator chose.
        max_cooldown: duration(
            raw.max_cooldown.as_deref(),
            defaults.max_cooldown.max(base_cooldown),
            "max_cooldown",
            issues,
        ),
        hard_down_cooldown: duration(
            raw.hard_down_cooldown.as_deref(),
            defaults.hard_down_cooldown,
            "hard_down_cooldown",
            issues,
        ),
        jitter: raw.jitter.unwrap_or(defaults.jitter),
    };
    let mut problem =
        |key: &str, message: &str, fix: &str| issues.push(Issue::new(&format!("{path}.{key}"), message, fix));
    if policy.consecutive_failures == 0 {
        problem("consecutive_failures", "0 would trip without a failure", "set it to 1 or more");
    }
    if !(policy.failure_rate > 0.0 && policy.failure_rate <= 1.0) {
        problem("failure_rate", "failure_rate must be in (0, 1]", "write a share such as 0.5");
    }
    if !(0.0..=1.0).contains(&policy.jitter) {
        problem("jitter", "jitter must be in [0, 1]", "write a share such as 0.2");
    }
    if policy.window.is_zero() {
        problem("window", "the window must be longer than zero", "write e.g. 60s");
    }
    if policy.base_cooldown > policy.max_cooldown {
        problem(
            "base_cooldown",
            "base_cooldown is longer than max_cooldown",
            "raise max_cooldown or lower base_cooldown",
        );
    }
    policy
}

fn check_fallback_cycles(pools: &[Pool], issues: &mut Vec<Issue>) {
    // Depth-first search from each pool; a path that comes back to a pool on
    // the current stack is a cycle.
    fn visit(pools: &[Pool], at: usize, stack: &mut Vec<usize>) -> Option<Vec<usize>> {
        if let Some(start) = stack.iter().position(|&p| p == at) {
            let mut cycle = stack[start..].to_vec();
            cycle.push(at);
            return Some(cycle);
        }
        stack.push(at);
        for &next in &pools[at].fallback {
            if let Some(cycle) = visit(pools, next, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        None
    }
    let mut reported: BTreeMap<Vec<usize>, ()> = BTreeMap::new();
    for start in 0..pools.len() {
        if let Some(cycle) = visit(pools, start, &mut Vec::new()) {
            let mut key = cycle.clone();
            key.sort_unstable();
            key.dedup();
            if reported.insert(key, ()).is_none() {
                let names: Vec<&str> = cycle.iter().map(|&p| &*pools[p].name).collect();
                issues.push(Issue::new(
                    &format!("pools.{}.fallback", names[0]),
                    format!("fallback cycle: {}", names.join(" -> ")),
                    "remove one fallback so the chain ends",
                ));
            }
        }
    }
}

/// A pool's members, and its fallback pools', all serve one operation: a
/// caller on an embed route never lands on a chat lane.
fn check_pool_operations(pools: &[Pool], models: &[Model], issues: &mut Vec<Issue>) {
    for pool in pools {
        let mixed: Vec<String> = pool
            .members
            .iter()
            .filter_map(|m| models.get(m.model))
            .filter(|m| m.operation != pool.operation)
            .map(|m| format!("{} ({})", m.name, m.operation))
            .collect();
        if !mixed.is_empty() {
            issues.push(Issue::new(
                &format!("pools.{}.members", pool.name),
                format!("the pool serves {} but mixes in {}", pool.operation, mixed.join(", ")),
                "put lanes of one operation in a pool (a pool per operation)",
            ));
        }
        for &fallback in &pool.fallback {
            if let Some(other) = pools.get(fallback).filter(|other| other.operation != pool.operation) {
                issues.push(Issue::new(
                    &format!("pools.{}.fallback", pool.name),
                    format!("fallback `{}` serves {}, not {}", other.name, other.operation, pool.operation),
                    "fall back to a pool of the same operation",
                ));
            }
        }
    }
}

/// Every `pools:` entry, in name order (a pool's index is its place here),
/// its members found among `models`, its hooks added to `hooks`; then the
/// checks that span pools (fallback cycles, one operation per chain).
pub(crate) fn validate(
    raw: &BTreeMap<String, RawPool>,
    models: &[Model],
    policies: &[PolicySpec],
    hooks: &mut Vec<Hook>,
    pending: &mut Vec<PendingFallback>,
    issues: &mut Vec<Issue>,
) -> Vec<Pool> {
    let model_names: Vec<&str> = models.iter().map(|m| &*m.name).collect();
    let pool_names: Vec<&str> = raw.keys().map(String::as_str).collect();
    let known = Known { model_names: &model_names, pool_names: &pool_names, models, policies };
    let mut pools = Vec::new();
    for (name, pool) in raw {
        pools.push(self::pool(name, pool, known, hooks, pending, issues));
    }
    check_fallback_cycles(&pools, issues);
    check_pool_operations(&pools, models, issues);
    pools
}

/// What a pool may refer to: the lanes and pools by name, the policies.
#[derive(Clone, Copy)]
struct Known<'a> {
    model_names: &'a [&'a str],
    pool_names: &'a [&'a str],
    models: &'a [Model],
    policies: &'a [PolicySpec],
}

/// One pool at `pools.<name>`.
fn pool(
    name: &str,
    pool: &RawPool,
    known: Known<'_>,
    all_hooks: &mut Vec<Hook>,
    pending: &mut Vec<PendingFallback>,
    issues: &mut Vec<Issue>,
) -> Pool {
    let path = format!("pools.{name}");
    if known.model_names.contains(&name) {
        issues.push(Issue::new(
            &path,
            format!("`{name}` is both a model and a pool"),
            "rename the pool or the model: callers name either",
        ));
    }
    if pool.members.is_empty() {
        issues.push(Issue::new(
            &format!("{path}.members"),
            "a pool needs at least one member",
            "list members: [{ model: NAME }]",
        ));
    }
    let members = self::members(&path, pool, known.model_names, issues);
    let (strategy, gates) = hooks::parse_list(&format!("{path}.hooks"), &pool.hooks, false, all_hooks, pending, issues);
    let affinity = self::affinity(&path, pool.affinity.as_ref(), issues);
    let failover = self::failover(&path, pool, issues);
    let hedge = pool.hedge.as_ref().map(|raw| validate_hedge(&format!("{path}.hedge"), raw, issues));
    let mut fallback = Vec::new();
    for (index, target) in pool.fallback.iter().enumerate() {
        match known.pool_names.iter().position(|p| p == target) {
            Some(found) => fallback.push(found),
            None => issues.push(Issue::new(
                &format!("{path}.fallback[{index}]"),
                format!("pool `{target}` is not defined"),
                format!("name a defined pool: {}", list(known.pool_names)),
            )),
        }
    }
    let breaker = validate_breaker(&format!("{path}.breaker"), pool.breaker.as_ref(), issues);
    let queue_timeout =
        duration_or(pool.queue_timeout.as_deref(), Duration::from_secs(30), &format!("{path}.queue_timeout"), issues);
    let operation =
        members.first().and_then(|m: &Member| known.models.get(m.model)).map_or(Operation::Chat, |m| m.operation);
    let attached = guard::attached(&format!("{path}.policies"), &pool.policies, known.policies, issues);
    let cache_ttl = pool
        .cache
        .as_ref()
        .map(|c| duration_or(c.ttl.as_deref(), Duration::from_secs(300), &format!("{path}.cache.ttl"), issues));
    let built = Pool {
        cache_ttl,
        policies: attached,
        name: Arc::from(name),
        operation,
        members,
        strategy,
        failover,
        hedge,
        fallback,
        breaker,
        queue_timeout,
        gates,
        affinity,
        translation: translation::translation(pool.translation.as_deref(), &format!("{path}.translation"), issues),
    };
    kept::pool_batch(pool.batch.as_deref(), &format!("{path}.batch"), issues);
    built
}

/// A pool's members: each a defined model, listed once, with a weight.
fn members(path: &str, pool: &RawPool, model_names: &[&str], issues: &mut Vec<Issue>) -> Vec<Member> {
    let mut members = Vec::new();
    for (index, member) in pool.members.iter().enumerate() {
        let member_path = format!("{path}.members[{index}]");
        let Some(model) = model_names.iter().position(|m| *m == member.model) else {
            issues.push(Issue::new(
                &format!("{member_path}.model"),
                format!("model `{}` is not defined", member.model),
                format!("define models.{} or use one of: {}", member.model, list(model_names)),
            ));
            continue;
        };
        let weight = member.weight.unwrap_or(1);
        if weight == 0 {
            issues.push(Issue::new(
                &format!("{member_path}.weight"),
                "weight 0 would never be chosen",
                "remove the member or give it a weight of 1 or more",
            ));
        }
        if members.iter().any(|m: &Member| m.model == model) {
            issues.push(Issue::new(
                &member_path,
                format!("model `{}` is listed twice", member.model),
                "list each model once and raise its weight instead",
            ));
        }
        members.push(Member { model, weight });
    }
    members
}

/// Session affinity, on unless turned off: the header that names a session
/// and how long its pins last.
fn affinity(path: &str, affinity: Option<&RawAffinity>, issues: &mut Vec<Issue>) -> Option<Affinity> {
    match affinity {
        Some(RawAffinity { enabled: Some(false), .. }) => None,
        raw_affinity => {
            let header = raw_affinity.and_then(|a| a.header.clone()).unwrap_or_else(|| "x-session-id".to_owned());
            if header.is_empty() || !header.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
                issues.push(Issue::new(
                    &format!("{path}.affinity.header"),
                    format!("`{header}` is not a header name"),
                    "use e.g. x-session-id",
                ));
            }
            let ttl = duration_or(
                raw_affinity.and_then(|a| a.ttl.as_deref()),
                Duration::from_secs(1800),
                &format!("{path}.affinity.ttl"),
                issues,
            );
            let prefix = raw_affinity.and_then(|a| a.prefix.as_deref()).map(|text| {
                duration_or(Some(text), Duration::from_secs(300), &format!("{path}.affinity.prefix"), issues)
            });
            Some(Affinity { header: Arc::from(header.to_ascii_lowercase().as_str()), ttl, prefix })
        }
    }
}

/// How a pool's request goes on when a lane fails: hops, retries, its
/// deadlines, a caller who leaves, a stream that breaks.
fn failover(path: &str, pool: &RawPool, issues: &mut Vec<Issue>) -> Failover {
    let failover = match &pool.failover {
        None => Failover::default(),
        Some(raw_failover) => {
            let max_hops = raw_failover.max_hops.unwrap_or(3);
            if max_hops == 0 {
                issues.push(Issue::new(
                    &format!("{path}.failover.max_hops"),
                    "max_hops 0 would never try a lane",
                    "set it to 1 or more",
                ));
            }
            let timeout = duration_or(
                raw_failover.timeout.as_deref(),
                Duration::from_secs(60),
                &format!("{path}.failover.timeout"),
                issues,
            );
            let retries = raw_failover.retries.unwrap_or(0);
            if retries > MAX_RETRIES {
                issues.push(Issue::new(
                    &format!("{path}.failover.retries"),
                    format!("{retries} retries on one lane would hold a caller through a long outage"),
                    format!("set it to {MAX_RETRIES} or fewer; failover to another lane is the remedy beyond that"),
                ));
            }
            let first_token = raw_failover
                .first_token
                .as_deref()
                .map(|text| duration_or(Some(text), timeout, &format!("{path}.failover.first_token"), issues));
            Failover { max_hops, timeout, retries, first_token, ..Failover::default() }
        }
    };
    let on_disconnect = match pool.on_disconnect.as_deref() {
        None | Some("cancel") => OnDisconnect::Cancel,
        Some("finish") => OnDisconnect::Finish,
        Some(other) => {
            issues.push(Issue::new(
                &format!("{path}.on_disconnect"),
                format!("`{other}` is not what a stream whose caller left does"),
                "use cancel (stop the upstream at once) or finish (read it to its end for exact usage)",
            ));
            OnDisconnect::Cancel
        }
    };
    let continuations = stream_continuations(path, pool, issues);
    Failover { continuations, on_disconnect, ..failover }
}
