//! One A2A request through the gateway's checks, in order: a method it
//! knows (both versions' names), the key's grant for the agent, the
//! methods it does not relay (listing tasks: the agent would list every
//! caller's; the extended card), the task the request names bound to this
//! key, the push URLs it asks the agent to call (public addresses only),
//! the agent's own rate, admission on the key's chain (budgets, rates,
//! concurrency; a message holds the agent's `price_per_task`), the
//! guardrails on the message's text parts; then the request sent to the
//! agent with the run identity, its answer (or each event of its stream)
//! read: the task it names bound to the key, text parts screened, the cost
//! it reports taken; and one ledger row (operation `a2a`). It runs on a
//! task of its own, so a caller that leaves never leaves a hold unsettled
//! or a call unrecorded (a stream is read on to its end, for its cost).
//!
//! Both bindings come through here: a caller's HTTP+JSON request arrives
//! already read as the JSON-RPC request it asks (`rest::inbound`), and its
//! answers (an answer, an error, each stream event) leave in its binding
//! ([`Binding`]). The agent is spoken to in the binding its card offers
//! (`hub::Upstream`): JSON-RPC, or HTTP+JSON with its answers read back
//! into JSON-RPC's, so every check above reads one shape.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Map, Value};
use switchyard_a2a_wire::message::{push_urls, reported_cost, rewrite_text_parts, task_of};
use switchyard_a2a_wire::rest;
use switchyard_a2a_wire::rpc::{self, Method, Request, Version};
use switchyard_codec::frame::SseDecoder;
use switchyard_config::agents::Agent;
use switchyard_engine::settle::{Record, ToolNote};
use switchyard_governance::Estimate;
use switchyard_guard::{Decision, Direction, Masks, Screen};
use switchyard_ir::ErrorKind;
use switchyard_state::governance::{Caller, Hold};
use switchyard_state::Gateway;
use switchyard_store::ToolCall;
use tokio::sync::{mpsc, oneshot};

use crate::answer::{json_answer, not_granted};
use crate::hub::{hub_of, Hub, Upstream};
use crate::run::Handoff;

/// The most an agent's whole answer (or one event of its stream) may hold.
const MAX_ANSWER_BYTES: usize = 16 << 20;
/// The longest task id a ledger row keeps.
const MAX_TASK_BYTES: usize = 256;
/// Headers of the caller's passed on to the agent (A2A's own).
const PASSED: [HeaderName; 2] = [HeaderName::from_static("a2a-version"), HeaderName::from_static("a2a-extensions")];

/// What the caller gets: one JSON-RPC answer (with the status the call
/// ended with, which HTTP+JSON answers with), or a stream's frames.
enum Reply {
    Json(Value, u16),
    Stream(mpsc::Receiver<Bytes>),
}

/// The binding a caller speaks, which its answers are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Binding {
    /// JSON-RPC: answers as they are, errors answered with 200.
    JsonRpc,
    /// HTTP+JSON of `version`, asking `method`: a result as the body, an
    /// error as a `google.rpc.Status` with its status.
    Rest(Version, Method),
}

impl Binding {
    /// A JSON-RPC answer as this binding's HTTP response.
    fn response(self, answer: &Value, held: u16) -> Response {
        let Binding::Rest(version, method) = self else {
            let mut response = json_answer(StatusCode::OK, answer);
            // A limit's wait, for HTTP clients as well as in the ErrorInfo.
            if let Some(after) = retry_after(answer) {
                response.headers_mut().insert(http::header::RETRY_AFTER, after);
            }
            return response;
        };
        match answer.get("error") {
            Some(error) => {
                let status = rest::status_of(error, held);
                let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let mut response = json_answer(code, &rest::error_body_in(version, error, status));
                if let Some(after) = retry_after(answer) {
                    response.headers_mut().insert(http::header::RETRY_AFTER, after);
                }
                response
            }
            None => {
                let result = answer.get("result").cloned().unwrap_or(Value::Null);
                json_answer(StatusCode::OK, &rest::body_of(version, method, result))
            }
        }
    }

    /// A JSON-RPC answer as one event of this binding's stream: the
    /// answer itself, or (HTTP+JSON) its result, or its error as an
    /// `error` event (with the status the call ended with, `held`).
    fn frame(self, answer: &Value, held: u16) -> Vec<u8> {
        let mut frame = Vec::new();
        match (self, answer.get("error")) {
            (Binding::JsonRpc, _) => {
                switchyard_codec::frame::write_sse(&mut frame, None, answer.to_string().as_bytes())
            }
            (Binding::Rest(version, _), Some(error)) => {
                let body = rest::error_body_in(version, error, rest::status_of(error, held));
                switchyard_codec::frame::write_sse(&mut frame, Some("error"), body.to_string().as_bytes());
            }
            (Binding::Rest(version, method), None) => {
                let result = answer.get("result").cloned().unwrap_or(Value::Null);
                let body = rest::body_of(version, method, result);
                switchyard_codec::frame::write_sse(&mut frame, None, body.to_string().as_bytes());
            }
        }
        frame
    }
}

/// The wait a refusal's ErrorInfo names, as a `Retry-After` value.
fn retry_after(answer: &Value) -> Option<HeaderValue> {
    let wait = answer["error"]["data"][0]["metadata"]["retry_after"].as_str();
    wait.and_then(|w| HeaderValue::from_str(w).ok())
}

/// Runs `request` to `agent` for `caller` on a task of its own.
pub(crate) async fn call(
    gateway: Arc<Gateway>,
    caller: Option<Caller>,
    agent: Agent,
    request: Request,
    headers: HeaderMap,
    bytes_in: usize,
    binding: Binding,
) -> Response {
    let (reply, replied) = oneshot::channel();
    switchyard_tasks::work(async move {
        let Some(hub) = hub_of(&gateway) else {
            let _ = reply.send(Reply::Json(rpc::error(&request.id, rpc::INTERNAL_ERROR, "no A2A hub"), 500));
            return;
        };
        let audit = Audit { bytes_in: bytes_in as u64, method: request.method.clone(), ..Audit::default() };
        let mut call = Call {
            gateway: &gateway,
            hub,
            caller: caller.as_ref(),
            agent: &agent,
            audit,
            started: Instant::now(),
            binding,
        };
        call.run(request, &headers, reply).await;
        call.write_row();
    });
    match replied.await {
        Ok(Reply::Json(answer, held)) => binding.response(&answer, held),
        Ok(Reply::Stream(frames)) => {
            let mut frames = frames;
            let body = futures_util::stream::poll_fn(move |cx| {
                frames.poll_recv(cx).map(|f| f.map(Ok::<_, std::convert::Infallible>))
            });
            let mut response = Response::new(Body::from_stream(body));
            let headers = response.headers_mut();
            headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
            headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            response
        }
        Err(_) => binding.response(&rpc::error(&Value::Null, rpc::INTERNAL_ERROR, "the call failed"), 500),
    }
}

/// What the ledger row says.
#[derive(Default)]
struct Audit {
    method: String,
    status: u16,
    error: Option<i64>,
    bytes_in: u64,
    bytes_out: u64,
    /// Nano-USD: reported by the agent, else the agent's price per task.
    cost: u64,
    /// The agent answered.
    billed: bool,
    task: Option<String>,
    /// The agent answered as an event stream.
    streamed: bool,
    hold: Option<Hold>,
    /// Its admission on the caller's agent run, settled with its row.
    run: Option<Box<switchyard_state::runs::RunTicket>>,
    decisions: Vec<String>,
}

struct Call<'a> {
    gateway: &'a Arc<Gateway>,
    hub: &'a Hub,
    caller: Option<&'a Caller>,
    agent: &'a Agent,
    audit: Audit,
    started: Instant,
    binding: Binding,
}

/// A request ready for the agent.
struct Prepared {
    method: Method,
    version: Version,
    /// The caller's id, which every answer carries back.
    id: Value,
    /// The JSON-RPC method as named.
    name: String,
    params: Map<String, Value>,
    /// The caller's A2A headers.
    passed: HeaderMap,
    handoff: Handoff,
}

/// A failure answered to the caller, with the row's status.
struct Failure {
    status: u16,
    answer: Value,
}

impl Call<'_> {
    fn key(&self) -> &str {
        self.caller.map_or("", |c| c.key.record.id.as_str())
    }

    async fn run(&mut self, request: Request, headers: &HeaderMap, reply: oneshot::Sender<Reply>) {
        match self.prepare(request, headers).await {
            Ok(prepared) => self.forward(prepared, reply).await,
            Err(failure) => {
                self.fail(&failure);
                let _ = reply.send(Reply::Json(failure.answer, failure.status));
            }
        }
    }

    fn fail(&mut self, failure: &Failure) {
        self.audit.status = failure.status;
        self.audit.error = failure.answer["error"]["code"].as_i64();
    }

    /// Every check before the agent is asked: the request to send it.
    async fn prepare(&mut self, request: Request, headers: &HeaderMap) -> Result<Prepared, Failure> {
        let Request { id, method: name, mut params } = request;
        let error = |status: u16, code: i64, message: &str| Failure { status, answer: rpc::error(&id, code, message) };
        let Some((method, version)) = Method::of(&name) else {
            return Err(error(404, rpc::METHOD_NOT_FOUND, &format!("Method not found: {}", bounded(&name, 64))));
        };
        if let Some(caller) = self.caller.filter(|c| !c.key.record.may_call_agent(&self.agent.name)) {
            return Err(Failure { status: 403, answer: not_granted(&id, caller, &self.agent.name) });
        }
        match method {
            Method::ListTasks => {
                return Err(error(
                    400,
                    rpc::UNSUPPORTED_OPERATION,
                    "listing tasks is not offered through the gateway (the agent would list every caller's): read each task by its id",
                ))
            }
            Method::ExtendedCard => {
                return Err(error(400, rpc::EXTENDED_CARD_NOT_CONFIGURED, "the gateway publishes the agent's public card only"))
            }
            _ => {}
        }
        let task = method.task(version, &params).map(str::to_owned);
        if let Some(task) = &task {
            self.audit.task = Some(bounded(task, MAX_TASK_BYTES));
            let owner = self
                .hub
                .owner(self.gateway, &self.agent.name, task)
                .await
                .map_err(|err| error(503, rpc::INTERNAL_ERROR, &err.to_string()))?;
            if owner.as_deref() != Some(self.key()) {
                // Another key's task, or one never created here: not found
                // (whether it exists is not this caller's to learn).
                return Err(error(404, rpc::TASK_NOT_FOUND, "Task not found"));
            }
        }
        let urls = push_urls(&params).map_err(|_| error(400, rpc::INVALID_PARAMS, "a push url must be a string"))?;
        for url in urls {
            if let Err(why) = check_push_url(url).await {
                return Err(error(400, rpc::INVALID_PARAMS, &format!("push notification url refused: {why}")));
            }
        }
        if method.sends() {
            if let Err(wait) = self.hub.take_rate(self.agent) {
                let mut metadata = Map::new();
                metadata.insert("agent".into(), Value::String(self.agent.name.to_string()));
                metadata.insert("retry_after".into(), Value::from(wait));
                let message = format!(
                    "agent `{}` takes at most {} messages a minute through this gateway; retry in {wait}s",
                    self.agent.name,
                    self.agent.rpm.unwrap_or(0)
                );
                return Err(Failure {
                    status: 429,
                    answer: rpc::refusal(&id, rpc::LIMITED, &message, "RATE_LIMITED", metadata),
                });
            }
        }
        if let (Some(governance), Some(caller)) = (&self.gateway.governance, self.caller) {
            let price = if method.sends() { self.agent.price_nano.unwrap_or(0) } else { 0 };
            match governance.admit_on_chain(caller, Estimate::bounded(0, price), None).await {
                Ok(hold) => self.audit.hold = Some(hold),
                Err(denied) => {
                    let reason = match denied.info.kind {
                        ErrorKind::QuotaExceeded => "QUOTA_EXCEEDED",
                        ErrorKind::RateLimit => "RATE_LIMITED",
                        ErrorKind::PermissionDenied => "PERMISSION_DENIED",
                        _ => "REFUSED",
                    };
                    let mut metadata = Map::new();
                    metadata.insert("agent".into(), Value::String(self.agent.name.to_string()));
                    if let Some(after) = denied.retry_after {
                        metadata.insert("retry_after".into(), Value::from(after));
                    }
                    let answer = rpc::refusal(&id, rpc::LIMITED, &denied.info.message, reason, metadata);
                    return Err(Failure { status: denied.info.status, answer });
                }
            }
        }
        if method.sends() {
            self.admit_run(headers, &params).await.map_err(|(status, code, message)| {
                let mut metadata = Map::new();
                metadata.insert("agent".into(), Value::String(self.agent.name.to_string()));
                let reason = if status == 429 { "QUOTA_EXCEEDED" } else { "INVALID_ARGUMENT" };
                Failure { status, answer: rpc::refusal(&id, code, &message, reason, metadata) }
            })?;
        }
        if let Some(screen) = self.screen() {
            if let Some(message) = params.get_mut("message") {
                if let Err(blocked) = screened(&screen, message, Direction::Request, &mut self.audit.decisions) {
                    return Err(error(400, rpc::INVALID_PARAMS, &blocked));
                }
            }
        }
        let handoff = Handoff::of(headers, task.as_deref());
        // What the agent is sent beside the body: the caller's A2A headers
        // (the run identity and the agent's credential are added in
        // `forward`).
        let mut passed = HeaderMap::new();
        for name in PASSED {
            if let Some(value) = headers.get(&name).filter(|v| v.len() <= 1024) {
                passed.insert(name, value.clone());
            }
        }
        Ok(Prepared { method, version, id, name, params, passed, handoff })
    }

    /// Admits a message on the caller's agent run, when its groups track
    /// runs and its headers name one (by the runs' stated order): it counts
    /// as one of the run's tool calls, fingerprinted by the agent and the
    /// message's parts for the loop breaker. A stopped run refuses it and
    /// the key's hold is given back. The agent's own calls through the
    /// gateway, under its own key, count on the run its task names.
    async fn admit_run(&mut self, headers: &HeaderMap, params: &Map<String, Value>) -> Result<(), (u16, i64, String)> {
        let (Some(specs), Some(governance), Some(caller)) = (&self.gateway.runs, &self.gateway.governance, self.caller)
        else {
            return Ok(());
        };
        let Some(spec) = specs.for_caller(governance, caller) else { return Ok(()) };
        let id = match switchyard_state::runs::run_id(headers) {
            Ok(Some(id)) => id,
            Ok(None) => return Ok(()),
            Err(bad) => return Err((400, rpc::INVALID_PARAMS, bad.info().message)),
        };
        let print = spec.loop_repeats.map(|_| {
            let parts = params.get("message").and_then(|m| m.get("parts"));
            let parts = parts.map(|p| serde_json::to_vec(p).unwrap_or_default()).unwrap_or_default();
            switchyard_governance::run::fingerprint([self.agent.name.as_bytes(), parts.as_slice()])
        });
        let price = self.agent.price_nano.unwrap_or(0);
        let kind = switchyard_governance::run::CallKind::Tool;
        match governance.admit_run(caller, spec, id, kind, print, price).await {
            Ok(ticket) => {
                self.audit.run = Some(Box::new(ticket));
                Ok(())
            }
            Err(denied) => {
                if let Some(hold) = self.audit.hold.take() {
                    governance.settle(&hold, 0, 0);
                }
                Err((denied.info.status, rpc::LIMITED, denied.info.message))
            }
        }
    }

    /// The screen of the agent's `policies`, compiled once per list.
    fn screen(&self) -> Option<Arc<Screen>> {
        if self.agent.policies.is_empty() {
            return None;
        }
        let names: Vec<String> =
            self.agent.policies.iter().map(|&i| self.gateway.config.policies[i].name.to_string()).collect();
        self.gateway.guardrails.for_key(&names)
    }

    /// Sends the request to the agent and relays its answer.
    async fn forward(&mut self, prepared: Prepared, reply: oneshot::Sender<Reply>) {
        let Prepared { method, version, id, name, params, passed, mut handoff } = prepared;
        let streams = method.streams();
        let upstream = self.hub.upstream(self.agent).await;
        let sent = match &upstream {
            Upstream::JsonRpc => {
                let body = rpc::request(&id, &name, params);
                self.send("POST", &self.agent.url, Some(&body), passed, &handoff, streams).await
            }
            Upstream::Rest(base) => match rest::outbound(method, version, &params) {
                Ok(out) => {
                    let mut passed = passed;
                    if version == Version::V1 && !passed.contains_key("a2a-version") {
                        // a2a-sdk's REST server reads no version as 0.3.
                        passed.insert(HeaderName::from_static("a2a-version"), HeaderValue::from_static("1.0"));
                    }
                    let url = format!("{}{}", base.trim_end_matches('/'), out.path);
                    self.send(out.http, &url, out.body.as_ref(), passed, &handoff, streams).await
                }
                Err(refused) => Err(refused.message),
            },
        };
        let response = match sent {
            Ok(response) => response,
            Err(message) => {
                let failure = Failure { status: 502, answer: rpc::error(&id, rpc::INTERNAL_ERROR, &message) };
                self.fail(&failure);
                let _ = reply.send(Reply::Json(failure.answer, failure.status));
                return;
            }
        };
        // An HTTP+JSON agent's answer, read as JSON-RPC's.
        let rest_version = matches!(upstream, Upstream::Rest(_)).then_some(version);
        self.audit.billed = true;
        let is_stream = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let status = response.status();
        let mut incoming = response.into_body();
        if !is_stream {
            let read = read_all(&mut incoming, self.deadline()).await;
            if let Ok(bytes) = &read {
                self.audit.bytes_out = bytes.len() as u64;
            }
            let answer = match (read, rest_version) {
                (Ok(bytes), None) => match serde_json::from_slice::<Value>(&bytes) {
                    Ok(answer) if answer.get("result").is_some() || answer.get("error").is_some() => Ok(answer),
                    _ => Err(format!("agent `{}` answered {status} with no JSON-RPC answer", self.agent.name)),
                },
                (Ok(bytes), Some(version)) => {
                    // Deleting a push config may answer nothing at all.
                    let body = match bytes.iter().all(u8::is_ascii_whitespace) {
                        true => Ok(Value::Null),
                        false => serde_json::from_slice::<Value>(&bytes),
                    };
                    match (body, status.is_success()) {
                        (Ok(body), true) => Ok(json!({ "result": rest::result_of(version, method, body) })),
                        (Ok(body), false) => Ok(json!({ "error": rest::rpc_error_of(&body, status.as_u16()) })),
                        (Err(_), _) => Err(format!("agent `{}` answered {status} with no JSON", self.agent.name)),
                    }
                }
                (Err(message), _) => Err(message),
            };
            let answer = match answer {
                Ok(answer) => self.relayed(&id, answer, method, &mut handoff).await,
                Err(message) => {
                    let failure = Failure { status: 502, answer: rpc::error(&id, rpc::INTERNAL_ERROR, &message) };
                    self.fail(&failure);
                    failure.answer
                }
            };
            let _ = reply.send(Reply::Json(answer, self.audit.status));
            return;
        }
        self.audit.streamed = true;
        let (frames, taken) = mpsc::channel::<Bytes>(16);
        if reply.send(Reply::Stream(taken)).is_err() {
            // The caller left before the stream began: read on for the cost.
            tracing::debug!(agent = %self.agent.name, "an A2A caller left before its stream began");
        }
        let mut decoder = SseDecoder::new();
        let mut events = Vec::new();
        let mut present = true;
        let deadline = self.deadline();
        self.audit.status = 200;
        loop {
            let frame = match tokio::time::timeout_at(deadline, incoming.frame()).await {
                Ok(Some(Ok(frame))) => frame,
                Ok(None) => break,
                Ok(Some(Err(err))) => {
                    self.end_stream(&frames, &mut present, &id, &format!("the agent's stream failed: {err}")).await;
                    return;
                }
                Err(_) => {
                    let message = format!("the agent's stream took longer than {:?}", self.agent.timeout);
                    self.end_stream(&frames, &mut present, &id, &message).await;
                    return;
                }
            };
            let Ok(data) = frame.into_data() else { continue };
            self.audit.bytes_out += data.len() as u64;
            if let Err(err) = decoder.feed(&data, &mut events) {
                self.end_stream(&frames, &mut present, &id, &format!("the agent's stream is unreadable: {err}")).await;
                return;
            }
            for event in events.drain(..) {
                if event.data.trim().is_empty() {
                    continue;
                }
                let Ok(answer) = serde_json::from_str::<Value>(&event.data) else {
                    self.end_stream(&frames, &mut present, &id, "the agent sent an event that is not JSON").await;
                    return;
                };
                let answer = match rest_version {
                    None => answer,
                    Some(_) if event.event.as_deref() == Some("error") => {
                        json!({ "error": rest::rpc_error_of(&answer, 500) })
                    }
                    Some(version) => json!({ "result": rest::result_of(version, method, answer) }),
                };
                let relayed = self.relayed(&id, answer, method, &mut handoff).await;
                let last = relayed.get("error").is_some();
                if present {
                    let frame = self.binding.frame(&relayed, self.audit.status);
                    present = frames.send(Bytes::from(frame)).await.is_ok();
                }
                if last {
                    return;
                }
            }
        }
    }

    /// Ends a stream with an error event (when the caller is still there).
    async fn end_stream(&mut self, frames: &mpsc::Sender<Bytes>, present: &mut bool, id: &Value, message: &str) {
        let failure = Failure { status: 502, answer: rpc::error(id, rpc::INTERNAL_ERROR, message) };
        self.fail(&failure);
        if *present {
            let frame = self.binding.frame(&failure.answer, failure.status);
            *present = frames.send(Bytes::from(frame)).await.is_ok();
        }
    }

    fn deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.started + self.agent.timeout)
    }

    /// Sends `body` to the agent at `url` with HTTP method `http`: the
    /// answer's head.
    async fn send(
        &self,
        http: &str,
        url: &str,
        body: Option<&Value>,
        passed: HeaderMap,
        handoff: &Handoff,
        streams: bool,
    ) -> Result<http::Response<hyper::body::Incoming>, String> {
        let bytes = match body {
            Some(body) => serde_json::to_vec(body).map_err(|err| err.to_string())?,
            None => Vec::new(),
        };
        let accept = if streams { "text/event-stream" } else { "application/json" };
        let method = http::Method::from_bytes(http.as_bytes()).map_err(|err| err.to_string())?;
        let mut request = http::Request::builder()
            .method(method)
            .uri(url)
            .header(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(http::header::ACCEPT, HeaderValue::from_static(accept))
            .header(
                http::header::USER_AGENT,
                HeaderValue::from_static(concat!("switchyard/", env!("CARGO_PKG_VERSION"))),
            )
            .body(Full::new(Bytes::from(bytes)))
            .map_err(|err| err.to_string())?;
        let headers = request.headers_mut();
        headers.extend(passed);
        headers.extend(handoff.headers());
        if let Some(bearer) = &self.agent.bearer {
            let value = HeaderValue::from_str(&format!("Bearer {bearer}"))
                .map_err(|_| "the agent's bearer is not a header value")?;
            headers.insert(http::header::AUTHORIZATION, value);
        }
        let left = self.agent.timeout.saturating_sub(self.started.elapsed()).max(Duration::from_millis(1));
        self.hub
            .client
            .send(request, left)
            .await
            .map_err(|err| format!("agent `{}` could not be reached: {err}", self.agent.name))
    }

    /// One answer of the agent's (a whole answer, or a stream's event) as
    /// the caller gets it: the caller's id, the task it names bound to the
    /// key (another key's refused), its text parts screened, its cost
    /// taken.
    async fn relayed(&mut self, id: &Value, answer: Value, method: Method, handoff: &mut Handoff) -> Value {
        if let Some(error) = answer.get("error") {
            self.audit.error = error.get("code").and_then(Value::as_i64);
            self.audit.status = 400;
            let error = match error {
                Value::Object(_) => error.clone(),
                _ => json!({ "code": rpc::INTERNAL_ERROR, "message": "the agent failed" }),
            };
            return json!({ "jsonrpc": "2.0", "id": id, "error": error });
        }
        let Some(mut result) = answer.get("result").cloned() else {
            return self.refused_answer(id, 502, rpc::INVALID_AGENT_RESPONSE, "the agent's answer has no result");
        };
        if let Some(task) = task_of(&result).map(str::to_owned) {
            if task.len() > MAX_TASK_BYTES {
                return self.refused_answer(id, 502, rpc::INVALID_AGENT_RESPONSE, "the agent named a task id too long");
            }
            match self.hub.bind(self.gateway, &self.agent.name, &task, self.key()).await {
                Ok(owner) if owner == self.key() => {}
                Ok(_) => {
                    tracing::warn!(agent = %self.agent.name, "an agent answered with another key's task");
                    let message = "the agent answered with a task of another caller's: not relayed";
                    return self.refused_answer(id, 502, rpc::INVALID_AGENT_RESPONSE, message);
                }
                Err(err) => return self.refused_answer(id, 503, rpc::INTERNAL_ERROR, &err.to_string()),
            }
            handoff.named(&task);
            self.audit.task.get_or_insert(task);
        }
        if let Some(screen) = self.screen() {
            if let Err(blocked) = screened(&screen, &mut result, Direction::Response, &mut self.audit.decisions) {
                return self.refused_answer(
                    id,
                    400,
                    rpc::INVALID_AGENT_RESPONSE,
                    &format!("the agent's answer was {blocked}"),
                );
            }
        }
        if method.sends() {
            if let Some(cost) = reported_cost(&result) {
                self.audit.cost = cost;
            }
        }
        self.audit.status = 200;
        self.audit.error = None;
        json!({ "jsonrpc": "2.0", "id": id, "result": result })
    }

    fn refused_answer(&mut self, id: &Value, status: u16, code: i64, message: &str) -> Value {
        let failure = Failure { status, answer: rpc::error(id, code, message) };
        self.fail(&failure);
        failure.answer
    }

    /// The one ledger row of this call, settling its hold.
    fn write_row(&mut self) {
        let audit = std::mem::take(&mut self.audit);
        if audit.method.is_empty() {
            return;
        }
        // A message the agent answered costs what it reported, else the
        // agent's price per task.
        let cost = match (audit.billed, audit.cost, Method::of(&audit.method)) {
            (true, 0, Some((method, _))) if method.sends() => self.agent.price_nano.unwrap_or(0),
            (true, cost, _) => cost,
            (false, _, _) => 0,
        };
        tracing::info!(
            agent = %self.agent.name, method = %audit.method, task = audit.task.as_deref().unwrap_or_default(),
            status = audit.status, ms = self.started.elapsed().as_millis() as u64, cost_nano = cost, "a2a"
        );
        let mut record = Record::begin_agent(self.gateway, self.caller.cloned(), audit.hold, audit.streamed);
        record.on_run(audit.run);
        record.tool_called(ToolNote {
            route: self.agent.name.to_string(),
            lane: Arc::from(crate::lane_name(&self.agent.name)),
            model: bounded(&audit.method, 64),
            cost_nano: cost,
            billed: audit.billed,
            failovers: 0,
            detail: ToolCall {
                server: self.agent.name.to_string(),
                bytes_in: audit.bytes_in,
                bytes_out: audit.bytes_out,
                error: audit.error,
                uri: None,
                task: audit.task.map(|t| bounded(&t, MAX_TASK_BYTES)),
            },
            decisions: audit.decisions,
        });
        record.finish_detached(if audit.status == 0 { 200 } else { audit.status });
    }
}

/// At most `max` bytes of `text`, cut on a character boundary.
fn bounded(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// A whole answer, at most [`MAX_ANSWER_BYTES`], by `deadline`.
async fn read_all(body: &mut hyper::body::Incoming, deadline: tokio::time::Instant) -> Result<Vec<u8>, String> {
    let read = async {
        let mut bytes = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|err| err.to_string())?;
            if let Ok(data) = frame.into_data() {
                if bytes.len() + data.len() > MAX_ANSWER_BYTES {
                    return Err(format!("the agent's answer is larger than {MAX_ANSWER_BYTES} bytes"));
                }
                bytes.extend_from_slice(&data);
            }
        }
        Ok(bytes)
    };
    tokio::time::timeout_at(deadline, read).await.map_err(|_| "the agent did not answer in time".to_owned())?
}

/// Every text part of `value` screened `direction`: masked in place, or
/// why it is blocked.
fn screened(
    screen: &Screen,
    value: &mut Value,
    direction: Direction,
    decisions: &mut Vec<String>,
) -> Result<(), String> {
    let mut masks = Masks::default();
    let mut made: Vec<Decision> = Vec::new();
    let outcome = rewrite_text_parts(value, &mut |text| screen.screen(text, direction, &mut masks, &mut made));
    for decision in &made {
        let named = screen.blocked(decision.rule);
        decisions.push(format!(
            "{}/{}/{}/{}",
            named.policy,
            named.rule,
            decision.action.as_str(),
            decision.direction.as_str()
        ));
    }
    outcome.map_err(|blocked| format!("blocked by guardrail policy `{}` (rule `{}`)", blocked.policy, blocked.rule))
}

/// A push URL an agent may be asked to call: http or https to a public
/// address (a literal one, or a name every address of which is public).
/// The agent calls it, from inside its own network: a private, loopback,
/// link-local or metadata address is refused, as is a name resolving to
/// one when checked (a name that changes its answers later is the agent's
/// to guard against too).
pub(crate) async fn check_push_url(url: &str) -> Result<(), String> {
    let (scheme, rest) = url.split_once("://").ok_or("it is not an absolute url")?;
    if !scheme.eq_ignore_ascii_case("https") && !scheme.eq_ignore_ascii_case("http") {
        return Err(format!("`{scheme}` is not http or https"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') || authority.is_empty() {
        return Err("it has no plain host".into());
    }
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => {
            let (host, after) = bracketed.split_once(']').ok_or("it has no plain host")?;
            (host, after.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port: u16 = match port {
        Some(port) => port.parse().map_err(|_| "its port is not a number")?,
        None if scheme.eq_ignore_ascii_case("https") => 443,
        None => 80,
    };
    if let Ok(ip) = host.parse::<IpAddr>() {
        return match switchyard_config::is_public(ip) {
            true => Ok(()),
            false => Err(format!("`{host}` is a private, loopback, link-local or metadata address")),
        };
    }
    if host.eq_ignore_ascii_case("localhost") || host.to_ascii_lowercase().ends_with(".localhost") {
        return Err(format!("`{host}` is this network's own"));
    }
    let resolved = tokio::time::timeout(Duration::from_secs(5), tokio::net::lookup_host((host, port)))
        .await
        .map_err(|_| format!("`{host}` did not resolve in time"))?
        .map_err(|_| format!("`{host}` does not resolve"))?;
    let addresses: Vec<_> = resolved.collect();
    if addresses.is_empty() || addresses.iter().any(|a| !switchyard_config::is_public(a.ip())) {
        return Err(format!("`{host}` resolves to a private, loopback, link-local or metadata address"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn push_urls_reach_only_public_addresses() {
        for url in [
            "http://127.0.0.1:8080/hook",
            "https://169.254.169.254/latest/meta-data",
            "https://10.1.2.3/hook",
            "https://[::1]:443/hook",
            "https://[::ffff:192.168.0.1]/hook",
            "http://localhost/hook",
            "https://svc.localhost/hook",
            "https://user@93.184.215.14/hook",
            "ftp://93.184.215.14/hook",
            "https://93.184.215.14:notaport/hook",
            "hook",
        ] {
            assert!(check_push_url(url).await.is_err(), "{url}");
        }
        assert!(check_push_url("https://93.184.215.14/hook").await.is_ok());
        assert!(check_push_url("http://[2606:4700::1111]:8443/hook").await.is_ok());
    }

    #[test]
    fn text_parts_are_masked_and_blocked_by_the_agents_policies() {
        let spec = |action: switchyard_guard::Action| switchyard_guard::PolicySpec {
            name: Arc::from("pii"),
            action,
            request: true,
            response: true,
            literals: Vec::new(),
            regexes: Vec::new(),
            detect: vec!["email".into()],
            first_rule: 0,
            moderator: None,
            reversible: false,
        };
        let Ok(mask) = Screen::compile(&[spec(switchyard_guard::Action::Mask)]) else { unreachable!() };
        let mut message = json!({"messageId": "ops@example.com", "parts": [{"text": "write to ops@example.com"}]});
        let mut decisions = Vec::new();
        assert!(screened(&mask, &mut message, Direction::Request, &mut decisions).is_ok());
        let text = message["parts"][0]["text"].as_str().unwrap_or_default();
        assert!(!text.contains("ops@example.com") && text.starts_with("write to "), "{text}");
        assert_eq!(message["messageId"], "ops@example.com", "only text parts are screened");
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        let Ok(block) = Screen::compile(&[spec(switchyard_guard::Action::Block)]) else { unreachable!() };
        let mut message = json!({"parts": [{"text": "ops@example.com"}]});
        let refused = screened(&block, &mut message, Direction::Response, &mut Vec::new());
        assert!(refused.is_err_and(|why| why.contains("`pii`")));
    }
}
