//! Runs: one agent run (a task, a session, a conversation) held to limits
//! of its own, whatever keys and pools its calls go through. A run is a
//! bucket that never refills: its spend (reserved at admission like a
//! budget, so it overshoots by no more than what calls in flight
//! under-reserved), its model calls, tool calls and tokens, and the wall
//! clock from its first call. A loop breaker watches the last calls'
//! fingerprints (a tool call's name and arguments, a model turn's body
//! without its volatile members): the same one `repeats` times in that
//! window trips it.
//!
//! A limit counts what passed: the call that reaches it runs to its end,
//! and the run then stays stopped; every later call is refused naming the
//! run and the limit. An operator's kill stops it the same way at once.
//!
//! Pure: time is passed in (milliseconds since the Unix epoch); the gateway
//! keeps one [`RunBook`] and a run's id comes from the request's headers.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Serialize;

use crate::money::NanoUsd;

/// Maps here are keyed by ids callers chose; foldhash with a random seed
/// keeps them cheap and unpredictable.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The longest run id a caller may send (bytes).
pub const MAX_RUN_ID: usize = 256;

/// The most runs one instance keeps: past it, the run seen least recently
/// with nothing in flight is forgotten (a stopped one first).
pub const MAX_RUNS: usize = 100_000;

/// How many of a run's last calls the loop breaker remembers.
pub const LOOP_WINDOW: usize = 32;

/// What a run may use, from its group's `runs:` (each limit optional).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct RunSpec {
    /// Spend, nano-USD.
    pub usd: Option<NanoUsd>,
    /// Model calls (every call through the engine: chat, embeddings…).
    pub calls: Option<u64>,
    /// Tool calls (MCP `tools/call` through `/mcp`).
    pub tool_calls: Option<u64>,
    /// Tokens, input plus output, as settled.
    pub tokens: Option<u64>,
    /// Milliseconds from the run's first call.
    pub wall_ms: Option<u64>,
    /// The same call this many times within the last [`LOOP_WINDOW`] calls
    /// trips the loop breaker (2 to [`LOOP_WINDOW`]).
    pub loop_repeats: Option<u32>,
}

/// A limit of a run, by its config name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// `usd`.
    Usd,
    /// `calls`.
    Calls,
    /// `tool_calls`.
    ToolCalls,
    /// `tokens`.
    Tokens,
    /// `wall`.
    Wall,
    /// `loop`: the loop breaker tripped.
    Loop,
}

impl Limit {
    /// Its config name.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Usd => "usd",
            Limit::Calls => "calls",
            Limit::ToolCalls => "tool_calls",
            Limit::Tokens => "tokens",
            Limit::Wall => "wall",
            Limit::Loop => "loop",
        }
    }
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// Calls are admitted.
    Open,
    /// A limit was reached (the loop breaker among them).
    Limited(Limit),
    /// An operator stopped it.
    Killed,
}

impl RunState {
    /// As the admin API says it: `open`, `limited(calls)`, `loop`, `killed`.
    pub fn name(self) -> String {
        match self {
            RunState::Open => "open".to_owned(),
            RunState::Limited(Limit::Loop) => "loop".to_owned(),
            RunState::Limited(limit) => format!("limited({})", limit.as_str()),
            RunState::Killed => "killed".to_owned(),
        }
    }
}

/// Why a run's call was refused: the run is stopped, and by what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// A limit (the loop breaker among them).
    Limit(Limit),
    /// The kill switch.
    Killed,
}

/// What a call is, for the run's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// A model call through the engine.
    Model,
    /// A tool call (MCP).
    Tool,
}

/// A run's id: its owner (the caller's key, so that another tenant naming
/// the same id holds another run) and the id its caller sent.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunKey {
    /// The caller's key id.
    pub owner: Arc<str>,
    /// The run id as sent (at most [`MAX_RUN_ID`] bytes).
    pub id: Arc<str>,
}

/// One run's counters.
#[derive(Debug, Clone)]
pub struct Run {
    /// Its spec when it was last admitted (a reload's new limits apply to
    /// the next call).
    pub spec: RunSpec,
    /// The group whose `runs:` applies (what a tenant admin's scope reads).
    pub group: Arc<str>,
    /// First call (ms).
    pub started_ms: u64,
    /// Last call (ms).
    pub last_ms: u64,
    /// Spend settled (nano-USD).
    pub spent: NanoUsd,
    /// Spend reserved by calls in flight.
    pub reserved: NanoUsd,
    /// Tokens settled.
    pub tokens: u64,
    /// Model calls admitted.
    pub calls: u64,
    /// Tool calls admitted.
    pub tool_calls: u64,
    /// Calls admitted and not yet settled.
    pub in_flight: u32,
    /// Where it stands.
    pub state: RunState,
    /// The last calls' fingerprints (the loop breaker's window).
    recent: VecDeque<u64>,
    /// Set by a kill: what a stream in flight watches to end at once.
    killed: Arc<AtomicBool>,
}

impl Run {
    fn new(group: Arc<str>, spec: RunSpec, now_ms: u64) -> Run {
        Run {
            spec,
            group,
            started_ms: now_ms,
            last_ms: now_ms,
            spent: 0,
            reserved: 0,
            tokens: 0,
            calls: 0,
            tool_calls: 0,
            in_flight: 0,
            state: RunState::Open,
            recent: VecDeque::new(),
            killed: Arc::default(),
        }
    }

    /// Admits one call of `kind` that may cost `reserve` (nano-USD) at
    /// `now_ms`, whose `fingerprint` (if any) the loop breaker counts; or
    /// says why the run is stopped. A stopped run stays stopped.
    pub fn admit(
        &mut self,
        spec: RunSpec,
        kind: CallKind,
        fingerprint: Option<u64>,
        reserve: NanoUsd,
        now_ms: u64,
    ) -> Result<(), Stop> {
        self.spec = spec;
        self.last_ms = self.last_ms.max(now_ms);
        match self.state {
            RunState::Killed => return Err(Stop::Killed),
            RunState::Limited(limit) => return Err(Stop::Limit(limit)),
            RunState::Open => {}
        }
        if let Some(limit) = self.reached(kind, reserve, now_ms) {
            self.state = RunState::Limited(limit);
            return Err(Stop::Limit(limit));
        }
        match kind {
            CallKind::Model => self.calls += 1,
            CallKind::Tool => self.tool_calls += 1,
        }
        self.reserved = self.reserved.saturating_add(reserve);
        self.in_flight = self.in_flight.saturating_add(1);
        if let (Some(print), Some(repeats)) = (fingerprint, spec.loop_repeats) {
            if self.recent.len() == LOOP_WINDOW {
                self.recent.pop_front();
            }
            self.recent.push_back(print);
            let seen = self.recent.iter().filter(|p| **p == print).count();
            // This call runs (its turn finishes); the run is stopped after it.
            if seen >= repeats as usize {
                self.state = RunState::Limited(Limit::Loop);
            }
        }
        Ok(())
    }

    /// The limit a call of `kind` reserving `reserve` would pass, if any.
    fn reached(&self, kind: CallKind, reserve: NanoUsd, now_ms: u64) -> Option<Limit> {
        let spec = &self.spec;
        if spec.wall_ms.is_some_and(|wall| now_ms.saturating_sub(self.started_ms) >= wall) {
            return Some(Limit::Wall);
        }
        if spec.usd.is_some_and(|cap| {
            // As a budget: the call's worst case must fit beside what is
            // spent and reserved, so the run overshoots by no more than
            // what calls in flight under-reserved.
            self.spent.saturating_add(self.reserved).saturating_add(reserve) > cap || (self.spent >= cap)
        }) {
            return Some(Limit::Usd);
        }
        if spec.tokens.is_some_and(|cap| self.tokens >= cap) {
            return Some(Limit::Tokens);
        }
        match kind {
            CallKind::Model if spec.calls.is_some_and(|cap| self.calls >= cap) => Some(Limit::Calls),
            CallKind::Tool if spec.tool_calls.is_some_and(|cap| self.tool_calls >= cap) => Some(Limit::ToolCalls),
            _ => None,
        }
    }

    /// Settles a call admitted reserving `reserved`: it cost `cost` and
    /// used `tokens`. A run past its spend or tokens is stopped for the
    /// next call (this one has finished).
    pub fn settle(&mut self, reserved: NanoUsd, cost: NanoUsd, tokens: u64, now_ms: u64) {
        self.reserved = self.reserved.saturating_sub(reserved);
        self.in_flight = self.in_flight.saturating_sub(1);
        self.spent = self.spent.saturating_add(cost);
        self.tokens = self.tokens.saturating_add(tokens);
        self.last_ms = self.last_ms.max(now_ms);
        if self.state == RunState::Open {
            if self.spec.usd.is_some_and(|cap| self.spent >= cap) {
                self.state = RunState::Limited(Limit::Usd);
            } else if self.spec.tokens.is_some_and(|cap| self.tokens >= cap) {
                self.state = RunState::Limited(Limit::Tokens);
            }
        }
    }
}

/// A run as the admin API lists it.
#[derive(Debug, Clone, Serialize)]
pub struct RunView {
    /// The run id as sent.
    pub id: String,
    /// The caller's key id.
    pub key: String,
    /// The group whose `runs:` applies.
    pub group: String,
    /// `open`, `limited(<limit>)`, `loop` or `killed`.
    pub state: String,
    /// Spend settled, USD.
    pub spent_usd: f64,
    /// Spend reserved by calls in flight, USD.
    pub reserved_usd: f64,
    /// Tokens settled.
    pub tokens: u64,
    /// Model calls.
    pub calls: u64,
    /// Tool calls.
    pub tool_calls: u64,
    /// Calls in flight.
    pub in_flight: u32,
    /// First call, Unix ms.
    pub started_ms: u64,
    /// Last call, Unix ms.
    pub last_seen_ms: u64,
    /// Its limits.
    pub limits: RunSpec,
}

/// Every run an instance holds.
#[derive(Debug, Default)]
pub struct RunBook {
    runs: HashMap<RunKey, Run>,
}

impl RunBook {
    /// An empty book.
    pub fn new() -> RunBook {
        RunBook::default()
    }

    /// Admits one call of run `key` (of `group`, with `spec`): see
    /// [`Run::admit`]. A run new to the book starts now.
    #[expect(clippy::too_many_arguments, reason = "one call's every figure")]
    pub fn admit(
        &mut self,
        key: &RunKey,
        group: &Arc<str>,
        spec: RunSpec,
        kind: CallKind,
        fingerprint: Option<u64>,
        reserve: NanoUsd,
        now_ms: u64,
    ) -> Result<(), Stop> {
        if let Some(run) = self.runs.get_mut(key) {
            return run.admit(spec, kind, fingerprint, reserve, now_ms);
        }
        if self.runs.len() >= MAX_RUNS {
            self.evict();
        }
        let mut run = Run::new(group.clone(), spec, now_ms);
        let admitted = run.admit(spec, kind, fingerprint, reserve, now_ms);
        self.runs.insert(key.clone(), run);
        admitted
    }

    /// Settles a call of run `key` (see [`Run::settle`]); a run forgotten
    /// meanwhile has nothing to settle.
    pub fn settle(&mut self, key: &RunKey, reserved: NanoUsd, cost: NanoUsd, tokens: u64, now_ms: u64) {
        if let Some(run) = self.runs.get_mut(key) {
            run.settle(reserved, cost, tokens, now_ms);
        }
    }

    /// Stops run `id` of the keys `owns` accepts at once: every later call
    /// is refused. How many runs it stopped (one per owner naming `id`).
    pub fn kill(&mut self, id: &str, mut owns: impl FnMut(&str, &str) -> bool) -> usize {
        let mut killed = 0;
        for (key, run) in &mut self.runs {
            if &*key.id == id && owns(&key.owner, &run.group) {
                run.state = RunState::Killed;
                run.killed.store(true, Ordering::Relaxed);
                killed += 1;
            }
        }
        killed
    }

    /// Whether run `key` is killed.
    pub fn killed(&self, key: &RunKey) -> bool {
        self.runs.get(key).is_some_and(|run| run.state == RunState::Killed)
    }

    /// The flag a kill of run `key` sets (a stream in flight watches it,
    /// without the book's lock).
    pub fn kill_flag(&self, key: &RunKey) -> Option<Arc<AtomicBool>> {
        self.runs.get(key).map(|run| run.killed.clone())
    }

    /// The runs `shows` accepts (by key id and group), last seen first.
    pub fn list(&self, mut shows: impl FnMut(&str, &str) -> bool) -> Vec<RunView> {
        let mut views: Vec<RunView> = self
            .runs
            .iter()
            .filter(|(key, run)| shows(&key.owner, &run.group))
            .map(|(key, run)| RunView {
                id: key.id.to_string(),
                key: key.owner.to_string(),
                group: run.group.to_string(),
                state: run.state.name(),
                spent_usd: crate::money::usd(run.spent),
                reserved_usd: crate::money::usd(run.reserved),
                tokens: run.tokens,
                calls: run.calls,
                tool_calls: run.tool_calls,
                in_flight: run.in_flight,
                started_ms: run.started_ms,
                last_seen_ms: run.last_ms,
                limits: run.spec,
            })
            .collect();
        views.sort_by(|a, b| b.last_seen_ms.cmp(&a.last_seen_ms).then_with(|| a.id.cmp(&b.id)));
        views
    }

    /// How many runs it holds.
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    /// True when it holds none.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Forgets the run seen least recently with nothing in flight, a
    /// stopped one before an open one (a stopped run forgotten would
    /// start afresh, so open ones go last).
    fn evict(&mut self) {
        let victim = self
            .runs
            .iter()
            .filter(|(_, run)| run.in_flight == 0)
            .min_by_key(|(_, run)| (run.state == RunState::Open, run.last_ms))
            .map(|(key, _)| key.clone());
        if let Some(key) = victim {
            self.runs.remove(&key);
        }
    }
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stop::Limit(Limit::Loop) => f.write_str("its loop breaker tripped"),
            Stop::Limit(limit) => write!(f, "it reached its `{}` limit", limit.as_str()),
            Stop::Killed => f.write_str("an operator killed it"),
        }
    }
}

/// A 64-bit fingerprint of `parts` (the loop breaker's unit): FNV-1a,
/// stable across instances and restarts, each part's length mixed in so
/// that `("ab", "c")` and `("a", "bc")` differ.
pub fn fingerprint<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |byte: u8| {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    };
    for part in parts {
        for byte in (part.len() as u64).to_le_bytes() {
            eat(byte);
        }
        for &byte in part {
            eat(byte);
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(owner: &str, id: &str) -> RunKey {
        RunKey { owner: Arc::from(owner), id: Arc::from(id) }
    }

    fn group() -> Arc<str> {
        Arc::from("acme")
    }

    #[test]
    fn the_call_cap_lets_the_last_call_finish_and_refuses_the_next() {
        let spec = RunSpec { calls: Some(2), ..Default::default() };
        let mut book = RunBook::new();
        let run = key("k1", "r");
        assert_eq!(book.admit(&run, &group(), spec, CallKind::Model, None, 0, 1), Ok(()));
        assert_eq!(book.admit(&run, &group(), spec, CallKind::Model, None, 0, 2), Ok(()));
        // Tool calls are counted apart.
        assert_eq!(book.admit(&run, &group(), spec, CallKind::Tool, None, 0, 3), Ok(()));
        assert_eq!(book.admit(&run, &group(), spec, CallKind::Model, None, 0, 4), Err(Stop::Limit(Limit::Calls)));
        // Stopped stays stopped, named by the first limit reached.
        assert_eq!(book.admit(&run, &group(), spec, CallKind::Tool, None, 0, 5), Err(Stop::Limit(Limit::Calls)));
        let listed = book.list(|_, _| true);
        assert_eq!((listed[0].calls, listed[0].state.as_str()), (2, "limited(calls)"));
    }

    #[test]
    fn tool_calls_have_their_own_cap() {
        let spec = RunSpec { tool_calls: Some(1), calls: Some(10), ..Default::default() };
        let mut run = Run::new(group(), spec, 0);
        assert_eq!(run.admit(spec, CallKind::Tool, None, 0, 0), Ok(()));
        assert_eq!(run.admit(spec, CallKind::Tool, None, 0, 0), Err(Stop::Limit(Limit::ToolCalls)));
        assert_eq!(run.tool_calls, 1);
    }

    #[test]
    fn spend_is_reserved_like_a_budget_and_stops_the_run_once_reached() {
        let spec = RunSpec { usd: Some(100), ..Default::default() };
        let mut run = Run::new(group(), spec, 0);
        assert_eq!(run.admit(spec, CallKind::Model, None, 60, 0), Ok(()));
        // In flight: 60 reserved, 50 more does not fit.
        let mut other = run.clone();
        assert_eq!(other.admit(spec, CallKind::Model, None, 50, 0), Err(Stop::Limit(Limit::Usd)));
        // Settled under its reservation: room again.
        run.settle(60, 30, 10, 1);
        assert_eq!((run.spent, run.reserved, run.tokens, run.in_flight), (30, 0, 10, 0));
        assert_eq!(run.admit(spec, CallKind::Model, None, 70, 2), Ok(()));
        // That one cost more than the rest: the run is past its cap now.
        run.settle(70, 75, 0, 3);
        assert_eq!(run.state, RunState::Limited(Limit::Usd));
        assert_eq!(run.admit(spec, CallKind::Model, None, 0, 4), Err(Stop::Limit(Limit::Usd)));
    }

    #[test]
    fn tokens_and_wall_clock_stop_a_run() {
        let spec = RunSpec { tokens: Some(10), ..Default::default() };
        let mut run = Run::new(group(), spec, 0);
        assert_eq!(run.admit(spec, CallKind::Model, None, 0, 0), Ok(()));
        run.settle(0, 0, 10, 0);
        assert_eq!(run.admit(spec, CallKind::Tool, None, 0, 0), Err(Stop::Limit(Limit::Tokens)));

        let spec = RunSpec { wall_ms: Some(1000), ..Default::default() };
        let mut run = Run::new(group(), spec, 5000);
        assert_eq!(run.admit(spec, CallKind::Model, None, 0, 5999), Ok(()));
        assert_eq!(run.admit(spec, CallKind::Model, None, 0, 6000), Err(Stop::Limit(Limit::Wall)));
        assert_eq!(run.state.name(), "limited(wall)");
    }

    #[test]
    fn the_loop_breaker_trips_on_the_same_call_repeated_within_its_window() {
        let spec = RunSpec { loop_repeats: Some(3), ..Default::default() };
        let same = fingerprint([b"read_file".as_slice(), b"{\"path\":\"a\"}"]);
        let other = fingerprint([b"read_file".as_slice(), b"{\"path\":\"b\"}"]);
        assert_ne!(same, other);
        assert_ne!(fingerprint([b"ab".as_slice(), b"c"]), fingerprint([b"a".as_slice(), b"bc"]));
        let mut run = Run::new(group(), spec, 0);
        for print in [same, other, same] {
            assert_eq!(run.admit(spec, CallKind::Tool, Some(print), 0, 0), Ok(()));
        }
        assert_eq!(run.state, RunState::Open);
        // The third of the same runs; the run is stopped after it.
        assert_eq!(run.admit(spec, CallKind::Tool, Some(same), 0, 0), Ok(()));
        assert_eq!(run.state.name(), "loop");
        assert_eq!(run.admit(spec, CallKind::Model, Some(other), 0, 0), Err(Stop::Limit(Limit::Loop)));

        // Repeats that fell out of the window do not count.
        let mut run = Run::new(group(), spec, 0);
        for i in 0..(3 * LOOP_WINDOW as u64) {
            let print = if i % LOOP_WINDOW as u64 == 0 { same } else { i };
            assert_eq!(run.admit(spec, CallKind::Tool, Some(print), 0, 0), Ok(()), "call {i}");
        }
        // Without a loop spec nothing is remembered.
        let plain = RunSpec::default();
        let mut run = Run::new(group(), plain, 0);
        for _ in 0..10 {
            assert_eq!(run.admit(plain, CallKind::Tool, Some(same), 0, 0), Ok(()));
        }
        assert!(run.recent.is_empty());
    }

    #[test]
    fn a_run_is_its_owners_and_a_kill_reaches_only_runs_in_scope() {
        let spec = RunSpec { calls: Some(1), ..Default::default() };
        let mut book = RunBook::new();
        let (mine, theirs) = (key("k1", "shared"), key("k2", "shared"));
        assert_eq!(book.admit(&mine, &group(), spec, CallKind::Model, None, 0, 0), Ok(()));
        // Another key naming the same id holds a run of its own.
        assert_eq!(book.admit(&theirs, &Arc::from("other"), spec, CallKind::Model, None, 0, 0), Ok(()));
        assert_eq!(book.len(), 2);
        // A kill scoped to group `acme` stops only that key's run.
        assert_eq!(book.kill("shared", |_, group| group == "acme"), 1);
        assert!(book.killed(&mine));
        assert!(!book.killed(&theirs));
        assert!(book.kill_flag(&mine).unwrap().load(Ordering::Relaxed));
        assert!(!book.kill_flag(&theirs).unwrap().load(Ordering::Relaxed));
        assert_eq!(book.admit(&mine, &group(), spec, CallKind::Model, None, 0, 1), Err(Stop::Killed));
        let listed: Vec<String> = book.list(|_, group| group == "other").into_iter().map(|v| v.key).collect();
        assert_eq!(listed, ["k2"]);
        assert_eq!(book.kill("nobody", |_, _| true), 0);
    }

    #[test]
    fn a_full_book_forgets_a_stopped_idle_run_first() {
        let spec = RunSpec { calls: Some(1), ..Default::default() };
        let mut book = RunBook::new();
        for i in 0..MAX_RUNS as u64 {
            let run = key("k", &i.to_string());
            assert_eq!(book.admit(&run, &group(), spec, CallKind::Model, None, 0, i + 10), Ok(()));
            book.settle(&run, 0, 0, 0, i + 10);
        }
        // Run 7 is stopped; run 0 is the oldest but open.
        assert!(book.admit(&key("k", "7"), &group(), spec, CallKind::Model, None, 0, 1 << 40).is_err());
        assert_eq!(book.admit(&key("k", "new"), &group(), spec, CallKind::Model, None, 0, 1 << 40), Ok(()));
        assert_eq!(book.len(), MAX_RUNS);
        assert!(book.list(|_, _| true).iter().all(|v| v.id != "7"));
        assert!(book.list(|_, _| true).iter().any(|v| v.id == "0"));
    }
}
