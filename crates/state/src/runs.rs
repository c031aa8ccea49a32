//! Agent runs on the request path: which run a request belongs to (read
//! from its headers in a fixed order), which limits its key's groups give
//! runs (`groups.<g>.runs`, the nearest up the tree), and the admission
//! and settlement of a call on governance's [`RunBook`]. With no group
//! configuring `runs:` the gateway holds no [`RunSpecs`] and nothing here
//! is reached.
//!
//! A run belongs to the caller's key ([`RunKey`]): another key naming the
//! same id holds a run of its own, and a tenant admin reaches only the
//! runs of keys in its subtree.

use std::sync::{Arc, PoisonError};

use switchyard_governance::money::NanoUsd;
use switchyard_governance::run::{CallKind, Limit, RunBook, RunKey, RunSpec, RunState, RunView, Stop, MAX_RUN_ID};
use switchyard_governance::run_fleet::{read_state, state_text};
use switchyard_ir::{ErrorInfo, ErrorKind};

use crate::governance::{now_ms, Caller, Denied, Governance, Refused};

/// The headers a run's id is read from, first found first: an A2A task
/// (set by the gateway's A2A route when it forwards), an MCP session, the
/// coding agents' own session headers (Claude Code's, then Codex's), then
/// the caller's explicit `x-switchyard-run`. Older Codex releases name
/// their session `session_id`; current ones send `session-id` and
/// `thread-id` (on HTTP and on the Responses socket's handshake): both
/// spellings are read, so a Codex upgrade does not lose its runs. (Claude Code's
/// `metadata.user_id` session is read from the body after these, by the
/// engine.)
pub static RUN_HEADERS: [http::HeaderName; 8] = [
    http::HeaderName::from_static("x-switchyard-a2a-task"),
    http::HeaderName::from_static("mcp-session-id"),
    http::HeaderName::from_static("x-claude-code-session-id"),
    http::HeaderName::from_static("session_id"),
    http::HeaderName::from_static("session-id"),
    http::HeaderName::from_static("conversation_id"),
    http::HeaderName::from_static("thread-id"),
    http::HeaderName::from_static("x-switchyard-run"),
];

/// A run id a request sent that cannot be one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRunId {
    /// The header it came in.
    pub header: &'static str,
    /// What is wrong.
    pub problem: &'static str,
}

impl BadRunId {
    /// The caller's 400.
    pub fn info(&self) -> ErrorInfo {
        let message = format!("header `{}`: {} (a run id is 1 to {MAX_RUN_ID} bytes)", self.header, self.problem);
        let mut info = ErrorInfo::new(ErrorKind::InvalidRequest, message);
        info.param = Some(self.header.to_owned());
        info
    }
}

/// The run id `headers` name, by [`RUN_HEADERS`]' order: `Ok(None)` when
/// none does, an error when the first present is longer than
/// [`MAX_RUN_ID`] bytes or not visible ASCII.
pub fn run_id(headers: &http::HeaderMap) -> Result<Option<&str>, BadRunId> {
    // Named once (a constant's name is hashed, never parsed, per lookup).
    for header in &RUN_HEADERS {
        let Some(value) = headers.get(header) else { continue };
        let header = header.as_str();
        if value.len() > MAX_RUN_ID {
            return Err(BadRunId { header, problem: "too long" });
        }
        let Ok(text) = value.to_str() else {
            return Err(BadRunId { header, problem: "not visible ASCII" });
        };
        let text = text.trim();
        if !text.is_empty() {
            return Ok(Some(text));
        }
    }
    Ok(None)
}

/// A run id from text a request carried in its body (Claude Code's
/// session in `metadata.user_id`): the same bounds as a header's.
pub fn checked_run_id<'a>(text: &'a str, place: &'static str) -> Result<Option<&'a str>, BadRunId> {
    let text = text.trim();
    if text.len() > MAX_RUN_ID {
        return Err(BadRunId { header: place, problem: "too long" });
    }
    if text.bytes().any(|b| !(0x20..0x7f).contains(&b)) {
        return Err(BadRunId { header: place, problem: "not visible ASCII" });
    }
    Ok((!text.is_empty()).then_some(text))
}

/// The groups that configure `runs:` (built with the gateway from its
/// config; `None` on the gateway when no group does).
#[derive(Debug, Default)]
pub struct RunSpecs {
    own: std::collections::HashMap<String, RunSpec>,
}

impl RunSpecs {
    /// The config's groups' `runs:`; `None` when no group has any.
    pub fn of_config(config: &switchyard_config::Config) -> Option<RunSpecs> {
        let own: std::collections::HashMap<String, RunSpec> =
            config.groups.iter().filter_map(|g| Some((g.name.to_string(), g.runs?))).collect();
        (!own.is_empty()).then_some(RunSpecs { own })
    }

    /// The limits of a run of `caller`: its key's group's `runs:`, else the
    /// nearest ancestor's (the store's tree, so a group made over the API
    /// under a configured one inherits); `None`: its runs are not tracked.
    pub fn for_caller(&self, governance: &Governance, caller: &Caller) -> Option<RunSpec> {
        let mut at = caller.key.record.group.as_deref()?;
        let groups = governance.group_tree();
        // A tree never loops (parents are checked), but a bound costs nothing.
        for _ in 0..=groups.len() {
            if let Some(spec) = self.own.get(at) {
                return Some(*spec);
            }
            at = groups.get(at)?.parent.as_deref()?;
        }
        None
    }
}

/// A call admitted on a run: what its settlement gives back.
#[derive(Debug, Clone)]
pub struct RunTicket {
    /// The run.
    pub key: RunKey,
    /// What admission reserved (nano-USD).
    pub reserved: NanoUsd,
    /// Set when the run is killed: a stream in flight ends at its next frame.
    pub killed: Arc<std::sync::atomic::AtomicBool>,
    /// Its limits at admission (a fleet's settlement checks spend and
    /// tokens against them).
    pub spec: RunSpec,
    /// Admitted on the fleet's counters in Redis (settled there).
    pub in_fleet: bool,
}

impl RunTicket {
    /// Whether its run was killed since it was admitted.
    pub fn is_killed(&self) -> bool {
        self.killed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The caller's error for a stream its run's kill ended.
    pub fn killed_error(&self) -> ErrorInfo {
        let mut info =
            ErrorInfo::new(ErrorKind::QuotaExceeded, format!("run `{}` is stopped: {}", self.key.id, Stop::Killed))
                .with_status(429);
        info.code = Some("insufficient_quota".to_owned());
        info
    }
}

/// The fleet's runs could not be read or stopped (Redis is away).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the fleet's runs cannot be reached right now (their store is unreachable); retry shortly")]
pub struct RunsUnavailable;

impl Governance {
    fn run_book(&self) -> std::sync::MutexGuard<'_, RunBook> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits one call of `kind` of run `id` by `caller` under `spec`,
    /// reserving `reserve`; the loop breaker counts `fingerprint`. A run
    /// that is stopped refuses with the caller's quota error (429) naming
    /// the run and the limit. In a fleet the run's counters and state are
    /// Redis's (one script call); the loop breaker's window stays this
    /// instance's, and a trip stops the run fleet-wide.
    pub async fn admit_run(
        &self,
        caller: &Caller,
        spec: RunSpec,
        id: &str,
        kind: CallKind,
        fingerprint: Option<u64>,
        reserve: NanoUsd,
    ) -> Result<RunTicket, Denied> {
        let key = RunKey { owner: caller.key.id.clone(), id: Arc::from(id) };
        let group: Arc<str> = Arc::from(caller.key.record.group.as_deref().unwrap_or_default());
        if let Some(fleet) = &self.fleet {
            let limits = serde_json::to_string(&spec).unwrap_or_default();
            let now = now_ms();
            match fleet.admit_run(&key.owner, id, &group, spec, &limits, kind, reserve, now).await {
                Ok(Ok(())) => return self.fleet_admitted(fleet, key, group, spec, kind, fingerprint, reserve).await,
                Ok(Err(stop)) => return Err(self.run_refusal(id, spec, stop)),
                Err(_) if fleet.on_error == switchyard_config::OnRedisError::FailClosed => {
                    let info = ErrorInfo::new(
                        ErrorKind::Unavailable,
                        "agent runs cannot be checked right now (their store is unreachable); retry shortly",
                    )
                    .with_status(503);
                    return Err(Denied::new(info, Some(1), false));
                }
                // Fail open: this instance's own book decides meanwhile.
                Err(_) => {}
            }
        }
        let mut book = self.run_book();
        let admitted = book.admit(&key, &group, spec, kind, fingerprint, reserve, now_ms());
        let killed = book.kill_flag(&key).unwrap_or_default();
        drop(book);
        match admitted {
            Ok(()) => Ok(RunTicket { key, reserved: reserve, killed, spec, in_fleet: false }),
            Err(stop) => Err(self.run_refusal(id, spec, stop)),
        }
    }

    /// A call Redis admitted: this instance's book keeps only the loop
    /// breaker's window and the kill flag its streams watch (no limits);
    /// a loop it sees stops the run in Redis for every instance.
    #[expect(clippy::too_many_arguments, reason = "one call's every figure")]
    async fn fleet_admitted(
        &self,
        fleet: &switchyard_fleet::counters::Fleet,
        key: RunKey,
        group: Arc<str>,
        spec: RunSpec,
        kind: CallKind,
        fingerprint: Option<u64>,
        reserve: NanoUsd,
    ) -> Result<RunTicket, Denied> {
        let local = RunSpec { loop_repeats: spec.loop_repeats, ..RunSpec::default() };
        let print = fingerprint.filter(|_| spec.loop_repeats.is_some());
        // A block, not a drop: the guard must not live across an await.
        let (admitted, tripped, killed) = {
            let mut book = self.run_book();
            let admitted = book.admit(&key, &group, local, kind, print, 0, now_ms());
            // Redis holds the call in flight; the book holds nothing of it.
            book.settle(&key, 0, 0, 0, now_ms());
            let tripped = book.list_one(&key).is_some_and(|state| state == RunState::Limited(Limit::Loop));
            (admitted, tripped, book.kill_flag(&key).unwrap_or_default())
        };
        let ticket = RunTicket { key, reserved: reserve, killed, spec, in_fleet: true };
        if let Err(stop) = admitted {
            // Stopped here before (Redis forgot it): Redis's hold goes back.
            self.settle_run(&ticket, 0, 0);
            return Err(self.run_refusal(&ticket.key.id, spec, stop));
        }
        if tripped {
            let stopped = fleet.stop_run(&ticket.key.owner, &ticket.key.id, state_text(RunState::Limited(Limit::Loop)));
            if let Err(err) = stopped.await {
                tracing::warn!(error = %err, "a run's loop could not be told to the fleet; this instance refuses it");
            }
        }
        Ok(ticket)
    }

    fn run_refusal(&self, id: &str, spec: RunSpec, stop: Stop) -> Denied {
        let cap = match stop {
            Stop::Limit(Limit::Usd) => spec.usd.map(|c| format!(" of ${}", switchyard_governance::money::usd(c))),
            Stop::Limit(Limit::Calls) => spec.calls.map(|c| format!(" of {c} model calls")),
            Stop::Limit(Limit::ToolCalls) => spec.tool_calls.map(|c| format!(" of {c} tool calls")),
            Stop::Limit(Limit::Tokens) => spec.tokens.map(|c| format!(" of {c} tokens")),
            Stop::Limit(Limit::Wall) => spec.wall_ms.map(|c| format!(" of {}s", c / 1000)),
            Stop::Limit(Limit::Loop) => spec.loop_repeats.map(|c| format!(" (the same call {c} times)")),
            Stop::Killed => None,
        };
        let message = format!("run `{id}` is stopped: {stop}{}", cap.unwrap_or_default());
        let mut info = ErrorInfo::new(ErrorKind::QuotaExceeded, message).with_status(429);
        // The protocol's own quota error, as a spent budget's.
        info.code = Some("insufficient_quota".to_owned());
        Denied::new(self.refuse(Refused::Run, info), None, false)
    }

    /// Settles a call admitted on a run: it cost `cost` and used `tokens`.
    /// A fleet's run is settled in Redis in the background (one script
    /// call; a settlement Redis cannot take is logged, and the run's hold
    /// stays until the hash expires).
    pub fn settle_run(&self, ticket: &RunTicket, cost: NanoUsd, tokens: u64) {
        let now = now_ms();
        match (&self.fleet, ticket.in_fleet) {
            (Some(fleet), true) => {
                let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
                let (fleet, ticket) = (fleet.clone(), ticket.clone());
                switchyard_tasks::work_on(&runtime, async move {
                    let (key, spec) = (&ticket.key, ticket.spec);
                    let settled = fleet.settle_run(&key.owner, &key.id, spec, ticket.reserved, cost, tokens, now).await;
                    if let Err(err) = settled {
                        tracing::warn!(error = %err, run = %key.id, "a run's call could not be settled in the fleet");
                    }
                });
            }
            _ => self.run_book().settle(&ticket.key, ticket.reserved, cost, tokens, now),
        }
    }

    /// The runs whose key's group is in `scope` (`None`: every run): the
    /// fleet's in a fleet (the most recently seen
    /// [`MAX_INDEXED`](switchyard_fleet::runs::MAX_INDEXED)), else this
    /// instance's.
    pub async fn runs(&self, scope: Option<&[String]>) -> Result<Vec<RunView>, RunsUnavailable> {
        let in_scope = |group: &str| scope.is_none_or(|groups| groups.iter().any(|g| g == group));
        let Some(fleet) = &self.fleet else {
            return Ok(self.run_book().list(|_, group| in_scope(group)));
        };
        let runs = fleet.runs(|_, _| true).await.map_err(|_| RunsUnavailable)?;
        Ok(runs.into_iter().filter(|run| in_scope(&run.group)).map(fleet_view).collect())
    }

    /// Kills run `id` of every key whose group is in `scope` (`None`: of
    /// every key), or of key `key` only: how many runs it stopped. In a
    /// fleet the stopped state is written in Redis, so every instance
    /// refuses the run's next call; a stream in flight here ends at once.
    pub async fn kill_run(
        &self,
        id: &str,
        scope: Option<&[String]>,
        key: Option<&str>,
    ) -> Result<usize, RunsUnavailable> {
        let owns = |owner: &str, group: &str| {
            key.is_none_or(|key| key == owner) && scope.is_none_or(|groups| groups.iter().any(|g| g == group))
        };
        let local = { self.run_book().kill(id, owns) };
        let Some(fleet) = &self.fleet else { return Ok(local) };
        let runs = fleet.runs(|owner, run| run == id && key.is_none_or(|key| key == owner)).await;
        let runs = runs.map_err(|_| RunsUnavailable)?;
        let mut killed = 0;
        for run in runs.iter().filter(|run| owns(&run.owner, &run.group)) {
            if fleet.stop_run(&run.owner, &run.id, state_text(RunState::Killed)).await.map_err(|_| RunsUnavailable)? {
                killed += 1;
            }
        }
        Ok(killed)
    }
}

/// A fleet's run as the admin API lists it.
fn fleet_view(run: switchyard_fleet::runs::FleetRun) -> RunView {
    let state = read_state(&run.state).unwrap_or(RunState::Open);
    RunView {
        id: run.id,
        key: run.owner,
        group: run.group,
        state: state.name(),
        spent_usd: switchyard_governance::money::usd(run.spent),
        reserved_usd: switchyard_governance::money::usd(run.reserved),
        tokens: run.tokens,
        calls: run.calls,
        tool_calls: run.tool_calls,
        in_flight: u32::try_from(run.in_flight).unwrap_or(u32::MAX),
        started_ms: run.started_ms,
        last_seen_ms: run.last_ms,
        limits: serde_json::from_str(&run.limits).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_id_comes_from_the_first_header_present_and_is_bounded() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(run_id(&headers), Ok(None));
        headers.insert("x-switchyard-run", "mine".parse().unwrap());
        assert_eq!(run_id(&headers), Ok(Some("mine")));
        headers.insert("thread-id", "codex-thread".parse().unwrap());
        assert_eq!(run_id(&headers), Ok(Some("codex-thread")));
        headers.insert("session-id", "codex-now".parse().unwrap());
        assert_eq!(run_id(&headers), Ok(Some("codex-now")));
        headers.insert("session_id", "codex".parse().unwrap());
        assert_eq!(run_id(&headers), Ok(Some("codex")));
        headers.insert("x-claude-code-session-id", "claude".parse().unwrap());
        headers.insert("mcp-session-id", "mcp".parse().unwrap());
        assert_eq!(run_id(&headers), Ok(Some("mcp")));
        headers.insert("x-switchyard-a2a-task", "task-1".parse().unwrap());
        assert_eq!(run_id(&headers), Ok(Some("task-1")));
        // Too long is refused, not cut (two callers' runs never merge).
        headers.insert("x-switchyard-a2a-task", "a".repeat(MAX_RUN_ID + 1).parse().unwrap());
        let bad = run_id(&headers).unwrap_err();
        assert_eq!(bad.header, "x-switchyard-a2a-task");
        assert_eq!(bad.info().status, 400);
        headers.insert("x-switchyard-a2a-task", http::HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap());
        assert_eq!(run_id(&headers).unwrap_err().problem, "not visible ASCII");
        // An empty one is as none.
        headers.insert("x-switchyard-a2a-task", "  ".parse().unwrap());
        assert_eq!(run_id(&headers), Ok(Some("mcp")));
        assert_eq!(checked_run_id(&"b".repeat(MAX_RUN_ID), "metadata.user_id").map(|s| s.map(str::len)), Ok(Some(256)));
        assert!(checked_run_id("x\ny", "metadata.user_id").is_err());
    }
}
