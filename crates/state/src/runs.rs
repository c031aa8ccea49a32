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
use switchyard_governance::run::{CallKind, RunBook, RunKey, RunSpec, RunView, Stop, MAX_RUN_ID};
use switchyard_ir::{ErrorInfo, ErrorKind};

use crate::governance::{now_ms, Caller, Denied, Governance, Refused};

/// The headers a run's id is read from, first found first: an A2A task
/// (set by the gateway's A2A route when it forwards), an MCP session, the
/// coding agents' own session headers (Claude Code's, then Codex's), then
/// the caller's explicit `x-switchyard-run`. (Claude Code's
/// `metadata.user_id` session is read from the body after these, by the
/// engine.)
pub static RUN_HEADERS: [http::HeaderName; 6] = [
    http::HeaderName::from_static("x-switchyard-a2a-task"),
    http::HeaderName::from_static("mcp-session-id"),
    http::HeaderName::from_static("x-claude-code-session-id"),
    http::HeaderName::from_static("session_id"),
    http::HeaderName::from_static("conversation_id"),
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

impl Governance {
    fn run_book(&self) -> std::sync::MutexGuard<'_, RunBook> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits one call of `kind` of run `id` by `caller` under `spec`,
    /// reserving `reserve`; the loop breaker counts `fingerprint`. A run
    /// that is stopped refuses with the caller's quota error (429) naming
    /// the run and the limit.
    pub fn admit_run(
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
        let mut book = self.run_book();
        let admitted = book.admit(&key, &group, spec, kind, fingerprint, reserve, now_ms());
        let killed = book.kill_flag(&key).unwrap_or_default();
        drop(book);
        match admitted {
            Ok(()) => Ok(RunTicket { key, reserved: reserve, killed }),
            Err(stop) => Err(self.run_refusal(id, spec, stop)),
        }
    }

    fn run_refusal(&self, id: &str, spec: RunSpec, stop: Stop) -> Denied {
        use switchyard_governance::run::Limit;
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
    pub fn settle_run(&self, ticket: &RunTicket, cost: NanoUsd, tokens: u64) {
        self.run_book().settle(&ticket.key, ticket.reserved, cost, tokens, now_ms());
    }

    /// The runs whose key's group is in `scope` (`None`: every run).
    pub fn runs(&self, scope: Option<&[String]>) -> Vec<RunView> {
        self.run_book().list(|_, group| scope.is_none_or(|groups| groups.iter().any(|g| g == group)))
    }

    /// Kills run `id` of every key whose group is in `scope` (`None`: of
    /// every key), or of key `key` only: how many runs it stopped.
    pub fn kill_run(&self, id: &str, scope: Option<&[String]>, key: Option<&str>) -> usize {
        self.run_book().kill(id, |owner, group| {
            key.is_none_or(|key| key == owner) && scope.is_none_or(|groups| groups.iter().any(|g| g == group))
        })
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
