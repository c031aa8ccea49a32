//! A local command speaking MCP on its stdin and stdout, one JSON-RPC
//! message per line. Spawned without a shell, with a cleared environment
//! holding only the variables the config names, on first use; one child
//! per server per instance, shared by every session (a stdio server is one
//! session by nature). Requests carry ids of this process's own, so
//! callers' ids never collide, and so do their progress tokens: a caller's
//! token goes to the child as the request's own id, and a notification
//! naming it goes to that request's caller alone, under the caller's token
//! again (two keys' callers that chose the same token never see each
//! other's progress). A child that exits three times
//! within a minute is quarantined for one: calls fail fast and a twin, if
//! any, serves.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio as Piped;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot};

use super::CallError;
use crate::rpc;

/// The longest line a child may write.
const MAX_LINE: usize = 16 << 20;
/// Exits within [`WINDOW`] that quarantine a child.
const EXITS: usize = 3;
const WINDOW: Duration = Duration::from_secs(60);
const QUARANTINE: Duration = Duration::from_secs(60);

/// What is run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its whole environment.
    pub env: Vec<(String, String)>,
}

/// One stdio server.
pub struct StdioServer {
    /// What it runs.
    pub spec: Spec,
    running: tokio::sync::Mutex<Option<Arc<Child>>>,
    health: Arc<Mutex<Health>>,
}

/// Exits and quarantine.
#[derive(Debug, Default)]
struct Health {
    exits: VecDeque<Instant>,
    quarantined_until: Option<Instant>,
    last_error: Option<String>,
}

/// A running child.
struct Child {
    stdin: mpsc::Sender<Vec<u8>>,
    pending: Mutex<HashMap<u64, Waiter>>,
    next: AtomicU64,
    alive: AtomicBool,
    pid: Option<u32>,
}

struct Waiter {
    answer: oneshot::Sender<Value>,
    events: Option<mpsc::Sender<Value>>,
    /// The caller's own progress token (the child was given the request's id).
    progress: Option<Value>,
}

/// A stdio server's state for the admin plane.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StdioState {
    /// The child's process id, while one runs.
    pub pid: Option<u32>,
    /// Quarantined for this many more seconds.
    pub quarantined_for_s: Option<u64>,
    /// Why it last failed.
    pub last_error: Option<String>,
}

impl StdioServer {
    /// A server that runs `spec` when first called.
    pub fn new(spec: Spec) -> StdioServer {
        StdioServer { spec, running: tokio::sync::Mutex::new(None), health: Arc::default() }
    }

    /// Whether calls fail fast now.
    pub fn quarantined(&self) -> bool {
        let health = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        health.quarantined_until.is_some_and(|until| Instant::now() < until)
    }

    /// Its state now.
    pub fn state(&self) -> StdioState {
        let pid = self
            .running
            .try_lock()
            .ok()
            .and_then(|r| r.as_ref().filter(|c| c.alive.load(Ordering::Relaxed)).and_then(|c| c.pid));
        let health = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        StdioState {
            pid,
            quarantined_for_s: health
                .quarantined_until
                .filter(|until| now < *until)
                .map(|until| (until - now).as_secs() + 1),
            last_error: health.last_error.clone(),
        }
    }

    /// Sends request `method` with `params` and waits for its answer
    /// (notifications for its progress token go to `events`).
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        events: Option<mpsc::Sender<Value>>,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let child = self.child(timeout).await?;
        child.call(method, params, events, timeout).await
    }

    /// The running child, spawned (and initialised) when there is none.
    async fn child(&self, timeout: Duration) -> Result<Arc<Child>, CallError> {
        let mut running = self.running.lock().await;
        if let Some(child) = running.as_ref().filter(|c| c.alive.load(Ordering::Relaxed)) {
            return Ok(child.clone());
        }
        if self.quarantined() {
            return Err(CallError::NotSent(format!("`{}` is quarantined: it kept exiting", self.spec.command)));
        }
        let child = spawn(&self.spec, self.health.clone()).map_err(|err| {
            let message = format!("`{}` could not start: {err}", self.spec.command);
            note_exit(&self.health, message.clone());
            CallError::NotSent(message)
        })?;
        let hello = child.call("initialize", super::client_hello(), None, timeout.min(Duration::from_secs(30))).await;
        match hello {
            Ok(answer) if answer.get("result").is_some() => {
                let note = rpc::notification("notifications/initialized", None);
                let mut line = serde_json::to_vec(&note).unwrap_or_default();
                line.push(b'\n');
                let _ = child.stdin.send(line).await;
            }
            _ => {
                child.alive.store(false, Ordering::Relaxed);
                return Err(CallError::NotSent(format!("`{}` did not answer initialize", self.spec.command)));
            }
        }
        *running = Some(child.clone());
        Ok(child)
    }
}

/// Puts request `id` in place of the caller's progress token in
/// `params._meta`, and gives the caller's token back (`None`: it sent
/// none).
fn own_progress_token(params: &mut Value, id: u64) -> Option<Value> {
    let meta = params.get_mut("_meta")?.as_object_mut()?;
    let token = meta.get_mut("progressToken")?;
    Some(std::mem::replace(token, Value::from(id)))
}

fn note_exit(health: &Mutex<Health>, why: String) {
    let mut health = health.lock().unwrap_or_else(PoisonError::into_inner);
    let now = Instant::now();
    health.exits.push_back(now);
    while health.exits.front().is_some_and(|at| now.duration_since(*at) > WINDOW) {
        health.exits.pop_front();
    }
    if health.exits.len() >= EXITS {
        health.quarantined_until = Some(now + QUARANTINE);
        health.exits.clear();
        tracing::warn!(why = %why, "an MCP stdio server keeps exiting: quarantined for {QUARANTINE:?}");
    }
    health.last_error = Some(why);
}

fn spawn(spec: &Spec, health: Arc<Mutex<Health>>) -> std::io::Result<Arc<Child>> {
    let mut process = Command::new(&spec.command)
        .args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Piped::piped())
        .stdout(Piped::piped())
        .stderr(Piped::piped())
        .kill_on_drop(true)
        .spawn()?;
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (process.stdin.take(), process.stdout.take(), process.stderr.take())
    else {
        return Err(std::io::Error::other("the child's pipes were not opened"));
    };
    let (lines, mut outgoing) = mpsc::channel::<Vec<u8>>(64);
    let child = Arc::new(Child {
        stdin: lines,
        pending: Mutex::default(),
        next: AtomicU64::new(1),
        alive: AtomicBool::new(true),
        pid: process.id(),
    });
    switchyard_tasks::service("mcp stdio writer", async move {
        while let Some(line) = outgoing.recv().await {
            if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                break;
            }
        }
    });
    let command = spec.command.clone();
    switchyard_tasks::service("mcp stdio stderr", async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(server = %command, "{line}");
        }
    });
    let reader = Arc::downgrade(&child);
    let command = spec.command.clone();
    switchyard_tasks::service("mcp stdio reader", async move {
        let mut stdout = BufReader::new(stdout);
        let mut line = Vec::new();
        loop {
            line.clear();
            match (&mut stdout).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) if line.len() > MAX_LINE => break,
                Ok(_) => {}
            }
            let Some(child) = reader.upgrade() else { break };
            let Ok(message) = serde_json::from_slice::<Value>(&line) else { continue };
            child.deliver(message).await;
        }
        let status = process.wait().await;
        if let Some(child) = reader.upgrade() {
            child.alive.store(false, Ordering::Relaxed);
            // Every caller still waiting learns the child is gone.
            child.pending.lock().unwrap_or_else(PoisonError::into_inner).clear();
        }
        let why = match status {
            Ok(status) => format!("`{command}` exited ({status})"),
            Err(err) => format!("`{command}` failed: {err}"),
        };
        note_exit(&health, why);
    });
    Ok(child)
}

impl Child {
    async fn call(
        &self,
        method: &str,
        mut params: Value,
        events: Option<mpsc::Sender<Value>>,
        timeout: Duration,
    ) -> Result<Value, CallError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let progress = own_progress_token(&mut params, id);
        let (answer, answered) = oneshot::channel();
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).insert(id, Waiter { answer, events, progress });
        let mut line =
            serde_json::to_vec(&rpc::request(id, method, params)).map_err(|e| CallError::NotSent(e.to_string()))?;
        line.push(b'\n');
        if self.stdin.send(line).await.is_err() {
            self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
            return Err(CallError::NotSent("the server's stdin is closed".into()));
        }
        match tokio::time::timeout(timeout, answered).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(_)) => Err(CallError::Lost("the server exited before answering".into())),
            Err(_) => {
                self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
                Err(CallError::Lost(format!("no answer within {timeout:?}")))
            }
        }
    }

    /// One message from the child: an answer to its waiter, a notification
    /// to the caller whose progress token it names.
    async fn deliver(&self, message: Value) {
        match rpc::classify(message) {
            rpc::Upstream::Answer(answer) => {
                let id = answer.get("id").and_then(Value::as_u64);
                let waiter = id.and_then(|id| self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(&id));
                if let Some(waiter) = waiter {
                    let _ = waiter.answer.send(answer);
                }
            }
            rpc::Upstream::Notification(mut note) => {
                // The token the child was given is a pending request's id.
                let request = note.get("params").and_then(|p| p.get("progressToken")).and_then(Value::as_u64);
                let routed = request.and_then(|id| {
                    let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
                    let waiter = pending.get(&id)?;
                    Some((waiter.events.clone()?, waiter.progress.clone()?))
                });
                if let Some((events, token)) = routed {
                    note["params"]["progressToken"] = token;
                    let _ = events.send(note).await;
                }
            }
            rpc::Upstream::Request(request) => {
                // Sampling and elicitation are not relayed: refuse at once.
                let id = request.get("id").cloned().unwrap_or(Value::Null);
                let refusal = rpc::error(&id, rpc::METHOD_NOT_FOUND, "not offered through this gateway", None);
                let mut line = serde_json::to_vec(&refusal).unwrap_or_default();
                line.push(b'\n');
                let _ = self.stdin.send(line).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods, reason = "a test spawns its own tasks")]
    use super::*;

    /// A child whose stdin is the returned receiver: what the gateway
    /// writes to it, one line each.
    fn child() -> (Arc<Child>, mpsc::Receiver<Vec<u8>>) {
        let (stdin, written) = mpsc::channel(8);
        let child = Child {
            stdin,
            pending: Mutex::default(),
            next: AtomicU64::new(1),
            alive: AtomicBool::new(true),
            pid: None,
        };
        (Arc::new(child), written)
    }

    #[tokio::test]
    async fn each_callers_progress_reaches_that_caller_alone_under_its_own_token() {
        let (child, mut written) = child();
        let (a_events, mut a_seen) = mpsc::channel(8);
        let (b_events, mut b_seen) = mpsc::channel(8);
        // Two callers (two keys' sessions) that chose the same token.
        let params = serde_json::json!({"name": "count", "_meta": {"progressToken": 0}});
        let timeout = Duration::from_secs(5);
        let (a, b) = (child.clone(), child.clone());
        let (a_params, b_params) = (params.clone(), params);
        let a_call = tokio::spawn(async move { a.call("tools/call", a_params, Some(a_events), timeout).await });
        let b_call = tokio::spawn(async move { b.call("tools/call", b_params, Some(b_events), timeout).await });
        let mut sent = Vec::new();
        for _ in 0..2 {
            let line = written.recv().await.unwrap_or_default();
            sent.push(serde_json::from_slice::<Value>(&line).unwrap_or_default());
        }
        let tokens: Vec<&Value> = sent.iter().map(|m| &m["params"]["_meta"]["progressToken"]).collect();
        assert_ne!(tokens[0], tokens[1], "the child tells the two callers apart: {sent:?}");
        for message in &sent {
            assert_eq!(message["params"]["_meta"]["progressToken"], message["id"], "the request's own id");
        }
        // The child reports progress for one request: only its caller hears it.
        let note = |token: &Value, text: &str| {
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": token, "progress": 1, "message": text}})
        };
        child.deliver(note(&sent[0]["params"]["_meta"]["progressToken"], "first")).await;
        child.deliver(note(&sent[1]["params"]["_meta"]["progressToken"], "second")).await;
        child.deliver(note(&Value::from(999), "nobody's")).await;
        for message in &sent {
            child.deliver(serde_json::json!({"jsonrpc": "2.0", "id": message["id"], "result": {}})).await;
        }
        let (a_answer, b_answer) = (a_call.await, b_call.await);
        assert!(matches!(a_answer, Ok(Ok(_))) && matches!(b_answer, Ok(Ok(_))));
        let heard = |seen: &mut mpsc::Receiver<Value>| {
            let mut heard = Vec::new();
            while let Ok(note) = seen.try_recv() {
                heard.push(note);
            }
            heard
        };
        let (a_heard, b_heard) = (heard(&mut a_seen), heard(&mut b_seen));
        // Which spawned call wrote first is the scheduler's: match by id.
        let first_is_a = sent[0]["id"] == a_answer.ok().and_then(Result::ok).unwrap_or_default()["id"];
        let (first, second) = if first_is_a { (a_heard, b_heard) } else { (b_heard, a_heard) };
        assert_eq!(first.len(), 1, "{first:?}");
        assert_eq!(second.len(), 1, "{second:?}");
        assert_eq!(first[0]["params"]["message"], "first");
        assert_eq!(second[0]["params"]["message"], "second");
        assert_eq!(first[0]["params"]["progressToken"], 0, "the caller's own token again");
        assert_eq!(second[0]["params"]["progressToken"], 0);
    }

    #[test]
    fn three_exits_in_a_minute_quarantine() {
        let health = Mutex::new(Health::default());
        note_exit(&health, "one".into());
        note_exit(&health, "two".into());
        assert!(health.lock().unwrap_or_else(PoisonError::into_inner).quarantined_until.is_none());
        note_exit(&health, "three".into());
        assert!(health.lock().unwrap_or_else(PoisonError::into_inner).quarantined_until.is_some());
    }
}
