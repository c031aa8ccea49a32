//! `tools/call`, `prompts/get` and `resources/read`, each through the same
//! checks: the key's grant for the tool, prompt or resource, the tool's
//! pin, the guardrails on its arguments, admission on the key's chain
//! (rate and concurrency limits; a budget for a priced server's tool
//! calls), the message sent to the first server of its name that can take
//! it (a twin after a failure before dispatch; after dispatch only for a
//! tool marked idempotent), the guardrails on what comes back, settlement
//! and one ledger row (operation `mcp`; its model the tool's name,
//! `prompt:<name>` or `resource:<server>` with the URI in its notes). It
//! runs on a task of its own so a caller that leaves never leaves a hold
//! unsettled or a call unaudited; with a progress token and an event stream
//! accepted, the server's notifications reach the caller as they come.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::response::Response;
use http::{HeaderValue, StatusCode};
use serde_json::{json, Map, Value};
use switchyard_codec::opaque::{Holds, Place};
use switchyard_engine::settle::{Record, ToolNote};
use switchyard_governance::mcp_grant::Kind;
use switchyard_governance::Estimate;
use switchyard_guard::{Decision, Direction, Masks, Screen};
use switchyard_state::governance::Caller;
use switchyard_state::Gateway;
use switchyard_store::ToolCall;
use tokio::sync::mpsc;

use crate::hub::hub_of;
use crate::hub::Failure;
use crate::names;
use crate::pin::{self, Standing};
use crate::reply::json_answer;
use crate::rpc;
use crate::session::Session;

/// The longest name or URI a ledger row keeps of what a caller named.
const MAX_NAMED: usize = 1_024;
/// The longest name or URI a caller may name (grants are globs matched
/// against it).
const MAX_ASKED: usize = 8_192;

/// What a caller asks a server for through the gateway's checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    /// `tools/call`.
    CallTool,
    /// `prompts/get`.
    GetPrompt,
    /// `resources/read`.
    ReadResource,
}

impl Method {
    /// The method `method` names, if it is one of these.
    pub(crate) fn of(method: &str) -> Option<Method> {
        match method {
            "tools/call" => Some(Method::CallTool),
            "prompts/get" => Some(Method::GetPrompt),
            "resources/read" => Some(Method::ReadResource),
            _ => None,
        }
    }

    fn rpc(self) -> &'static str {
        match self {
            Method::CallTool => "tools/call",
            Method::GetPrompt => "prompts/get",
            Method::ReadResource => "resources/read",
        }
    }

    /// The member naming what is asked for.
    fn field(self) -> &'static str {
        match self {
            Method::CallTool | Method::GetPrompt => "name",
            Method::ReadResource => "uri",
        }
    }

    fn kind(self) -> Kind {
        match self {
            Method::CallTool => Kind::Tool,
            Method::GetPrompt => Kind::Prompt,
            Method::ReadResource => Kind::Resource,
        }
    }

    /// What is asked for, in a message.
    fn noun(self) -> &'static str {
        match self {
            Method::CallTool => "tool",
            Method::GetPrompt => "prompt",
            Method::ReadResource => "resource",
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Method::CallTool => "call",
            Method::GetPrompt => "get",
            Method::ReadResource => "read",
        }
    }
}

/// Where a call came from: the one name its route reaches (`/mcp/<name>`;
/// `None`: every name) and its caller's era (a 2026-07-28 caller reads
/// its result with `resultType`).
pub(crate) struct Reached {
    pub only: Option<Arc<str>>,
    pub era: rpc::Era,
}

/// Runs one `method`; `stream`: answer as an event stream carrying the
/// server's notifications before the answer.
#[allow(clippy::too_many_arguments, reason = "one call's whole context, passed once")]
pub(crate) async fn call(
    gateway: Arc<Gateway>,
    caller: Option<Caller>,
    session_id: String,
    session: Session,
    id: Value,
    method: Method,
    params: Map<String, Value>,
    passthrough: Option<HeaderValue>,
    stream: bool,
    reached: Reached,
    run_id: Option<Box<str>>,
) -> Response {
    let (events, mut received) = mpsc::channel::<Value>(64);
    let task = switchyard_tasks::work(async move {
        let sink = stream.then(|| events.clone());
        let opened = session.upstream.clone();
        let mut run = Run {
            gateway: &gateway,
            caller: caller.as_ref(),
            session,
            passthrough,
            started: Instant::now(),
            only: reached.only,
            run_id,
        };
        let mut answer = run.call(&id, method, params, sink).await;
        if reached.era == rpc::Era::Stateless {
            if let Some(result) = answer.get_mut("result") {
                rpc::stamp_result(method.rpc(), result);
            }
        }
        // Written back only when the call opened a server session.
        if run.session.upstream != opened {
            run.keep_session(&session_id).await;
        }
        if stream {
            let _ = events.send(answer.clone()).await;
        }
        answer
    });
    if !stream {
        let answer =
            task.await.unwrap_or_else(|_| rpc::error(&Value::Null, rpc::INTERNAL_ERROR, "the call failed", None));
        return json_answer(StatusCode::OK, &answer);
    }
    let body = async_stream(move |tx: mpsc::Sender<Result<bytes::Bytes, std::convert::Infallible>>| async move {
        while let Some(message) = received.recv().await {
            let mut frame = Vec::new();
            switchyard_codec::frame::write_sse(&mut frame, Some("message"), message.to_string().as_bytes());
            let last = message.get("method").is_none();
            if tx.send(Ok(bytes::Bytes::from(frame))).await.is_err() || last {
                break;
            }
        }
    });
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// A body fed by `produce` through a channel.
fn async_stream<F, Fut>(produce: F) -> Body
where
    F: FnOnce(mpsc::Sender<Result<bytes::Bytes, std::convert::Infallible>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel(16);
    switchyard_tasks::work(produce(tx));
    let frames = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
    Body::from_stream(frames)
}

struct Run<'a> {
    gateway: &'a Arc<Gateway>,
    caller: Option<&'a Caller>,
    session: Session,
    passthrough: Option<HeaderValue>,
    started: Instant,
    /// The one name the caller's route reaches (`None`: every name).
    only: Option<Arc<str>>,
    /// The agent run a tool call belongs to (only read when a group
    /// configures `runs:`).
    run_id: Option<Box<str>>,
}

/// What the ledger row says.
#[derive(Default)]
struct Audit {
    route: String,
    server: String,
    /// The row's model: the tool's name, `prompt:<name>`, `resource:<route>`.
    model: String,
    /// A resource's URI as the caller named it.
    uri: Option<String>,
    status: u16,
    error: Option<i64>,
    bytes_in: u64,
    bytes_out: u64,
    billed: bool,
    /// What it cost (nano-USD).
    cost: u64,
    /// Its admission on the key's chain, settled with its row.
    hold: Option<switchyard_state::governance::Hold>,
    /// Its admission on its agent run, settled with its row.
    run: Option<Box<switchyard_state::runs::RunTicket>>,
    failovers: u32,
    decisions: Vec<String>,
}

/// At most `MAX_NAMED` bytes of `text`, cut on a character boundary.
fn bounded(text: &str) -> String {
    let mut end = text.len().min(MAX_NAMED);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

impl Run<'_> {
    async fn keep_session(&self, session_id: &str) {
        let Some(hub) = hub_of(self.gateway) else { return };
        let fleet = self.gateway.fleet_state.as_deref();
        if let Err(err) = hub.sessions.keep(fleet, session_id, &self.session).await {
            tracing::warn!(error = %err, "an MCP session's server sessions could not be kept");
        }
    }

    /// The answer, with the caller's id; its row written.
    async fn call(
        &mut self,
        id: &Value,
        method: Method,
        params: Map<String, Value>,
        events: Option<mpsc::Sender<Value>>,
    ) -> Value {
        let mut audit = Audit::default();
        let answer = match self.run(&mut audit, method, params, events).await {
            Ok(mut answer) => {
                answer["id"] = id.clone();
                answer
            }
            Err(failure) => {
                audit.error = Some(failure.code);
                rpc::error(id, failure.code, &failure.message, failure.data)
            }
        };
        if !audit.model.is_empty() {
            self.write_row(audit);
        }
        answer
    }

    async fn run(
        &mut self,
        audit: &mut Audit,
        method: Method,
        mut params: Map<String, Value>,
        events: Option<mpsc::Sender<Value>>,
    ) -> Result<Value, Failure> {
        let gateway = self.gateway;
        let (Some(hub), Some(mcp)) = (hub_of(gateway), &gateway.config.mcp) else {
            return Err(Failure::new(rpc::METHOD_NOT_FOUND, "this gateway fronts no MCP servers"));
        };
        let (kind, field) = (method.kind(), method.field());
        let shown = params.get(field).and_then(Value::as_str).unwrap_or_default().to_owned();
        if shown.len() > MAX_ASKED {
            return Err(Failure::new(
                rpc::INVALID_PARAMS,
                format!("a {} is named in at most {MAX_ASKED} bytes", method.noun()),
            ));
        }
        let unknown = || Failure::new(rpc::INVALID_PARAMS, format!("Unknown {}: {shown}", method.noun()));
        let split = match kind {
            Kind::Resource => names::split_uri(&shown),
            Kind::Tool | Kind::Prompt => names::split(&shown),
        };
        let (route, own) = split.ok_or_else(unknown)?;
        // A name outside the caller's route is one it does not know.
        if self.only.as_deref().is_some_and(|only| only != route) {
            return Err(unknown());
        }
        let listed_route = mcp.routes().into_iter().find(|(r, _)| &**r == route).ok_or_else(unknown)?;
        let (route, members) = (&listed_route.0, &listed_route.1);
        audit.route = route.to_string();
        audit.server = mcp.servers[members[0]].name.to_string();
        audit.model = match kind {
            Kind::Tool => bounded(&shown),
            Kind::Prompt => bounded(&format!("{}{shown}", kind.prefix())),
            Kind::Resource => format!("{}{route}", kind.prefix()),
        };
        audit.uri = (kind == Kind::Resource).then(|| bounded(&shown));
        if let Some(caller) = self.caller.filter(|c| !c.key.record.may_use_mcp(kind, route, own)) {
            audit.status = 403;
            let message = format!("API key {} may not {} `{shown}`", caller.key.record.prefix, method.verb());
            return Err(Failure::new(rpc::FORBIDDEN, message));
        }
        if method == Method::CallTool {
            self.check_pin(audit, hub, mcp, &listed_route, own, &shown).await?;
        }
        // The arguments (a tool's, a prompt's), screened by `mcp.policies`.
        let screen = screen_of(gateway, mcp);
        let arguments = match (params.remove("arguments"), method) {
            (Some(arguments), _) => Some(arguments),
            (None, Method::CallTool) => Some(json!({})),
            (None, _) => None,
        };
        let mut print = None;
        if let Some(arguments) = arguments {
            let arguments_bytes = serde_json::to_vec(&arguments).unwrap_or_default();
            // The loop breaker's unit: the tool and its arguments as sent.
            print = Some(switchyard_governance::run::fingerprint([shown.as_bytes(), &arguments_bytes]));
            audit.bytes_in = arguments_bytes.len() as u64;
            let arguments = match &screen {
                Some(screen) => match screened(screen, &arguments_bytes, &[], Direction::Request, &mut audit.decisions)
                {
                    Ok(Some(masked)) => masked,
                    Ok(None) => arguments,
                    Err(blocked) => {
                        audit.status = 400;
                        return Err(Failure::new(rpc::INVALID_PARAMS, blocked));
                    }
                },
                None => arguments,
            };
            params.insert("arguments".into(), arguments);
        }
        params.insert(field.into(), Value::String(own.to_owned()));
        // The caller's own envelope (2026-07-28) is its exchange with the
        // gateway's, not the gateway's with the server.
        rpc::strip_envelope(&mut params);
        // Admission: the key's chain, for the price of a priced tool call.
        let price = match method {
            Method::CallTool => mcp.servers[members[0]].price_nano.unwrap_or(0),
            Method::GetPrompt | Method::ReadResource => 0,
        };
        audit.hold = match (&gateway.governance, self.caller) {
            (Some(governance), Some(caller)) => {
                match governance.admit_on_chain(caller, Estimate::bounded(0, price), None).await {
                    Ok(hold) => Some(hold),
                    Err(denied) => {
                        audit.status = denied.info.status;
                        let data = denied.retry_after.map(|after| json!({ "retry_after": after }));
                        return Err(Failure { code: rpc::LIMITED, message: denied.info.message, data });
                    }
                }
            }
            _ => None,
        };
        if method == Method::CallTool {
            self.admit_run(audit, price, print)?;
        }
        let mut outcome = Err(Failure::new(rpc::UNAVAILABLE, format!("no server of `{route}` could take it")));
        let mut cost = 0;
        for (n, &index) in members.iter().enumerate() {
            let server = &mcp.servers[index];
            audit.server = server.name.to_string();
            audit.failovers = n as u32;
            let sent = hub
                .exchange(
                    server,
                    &mut self.session,
                    self.passthrough.as_ref(),
                    method.rpc(),
                    Value::Object(params.clone()),
                    events.clone(),
                )
                .await;
            match sent {
                Ok(answer) => {
                    cost = if method == Method::CallTool { server.price_nano.unwrap_or(0) } else { 0 };
                    outcome = Ok(answer);
                    break;
                }
                Err(err) => {
                    let again =
                        err.unsent() || (method == Method::CallTool && server.idempotent.iter().any(|t| t == own));
                    tracing::warn!(server = %server.name, name = %shown, error = %err, retried = again, "an MCP {} failed", method.rpc());
                    outcome = Err(Failure::new(rpc::UNAVAILABLE, format!("`{}`: {err}", server.name)));
                    if !again {
                        break;
                    }
                }
            }
        }
        audit.cost = cost;
        audit.billed = cost > 0;
        let mut answer = match outcome {
            Ok(answer) => answer,
            Err(failure) => {
                audit.status = 502;
                return Err(failure);
            }
        };
        // What comes back, screened on its way to the caller.
        if let (Some(screen), Some(result)) = (&screen, answer.get("result")) {
            let bytes = serde_json::to_vec(result).unwrap_or_default();
            match screened(screen, &bytes, RESULT_MEDIA, Direction::Response, &mut audit.decisions) {
                Ok(Some(masked)) => answer["result"] = masked,
                Ok(None) => {}
                Err(blocked) => {
                    audit.status = 400;
                    audit.bytes_out = bytes.len() as u64;
                    return Err(Failure::new(rpc::FORBIDDEN, blocked));
                }
            }
        }
        audit.bytes_out =
            answer.get("result").or_else(|| answer.get("error")).map_or(0, |r| r.to_string().len() as u64);
        audit.status = match answer.get("error") {
            Some(error) => {
                audit.error = error.get("code").and_then(Value::as_i64);
                400
            }
            None => 200,
        };
        Ok(answer)
    }

    /// Admits a tool call on its agent run (when the caller's groups track
    /// runs and the request names one): a stopped run refuses it, and the
    /// key's hold is given back.
    fn admit_run(&self, audit: &mut Audit, price: u64, print: Option<u64>) -> Result<(), Failure> {
        let (Some(specs), Some(governance), Some(caller), Some(id)) =
            (&self.gateway.runs, &self.gateway.governance, self.caller, &self.run_id)
        else {
            return Ok(());
        };
        let Some(spec) = specs.for_caller(governance, caller) else { return Ok(()) };
        let kind = switchyard_governance::run::CallKind::Tool;
        match governance.admit_run(caller, spec, id, kind, print.filter(|_| spec.loop_repeats.is_some()), price) {
            Ok(ticket) => {
                audit.run = Some(Box::new(ticket));
                Ok(())
            }
            Err(denied) => {
                if let Some(hold) = audit.hold.take() {
                    governance.settle(&hold, 0, 0);
                }
                audit.status = denied.info.status;
                Err(Failure { code: rpc::LIMITED, message: denied.info.message, data: None })
            }
        }
    }

    /// A tool is called only as listed now, and only while its pin lets it.
    async fn check_pin(
        &mut self,
        audit: &mut Audit,
        hub: &crate::Hub,
        mcp: &switchyard_config::mcp::Mcp,
        listed_route: &crate::hub::Route,
        tool: &str,
        name: &str,
    ) -> Result<(), Failure> {
        let listed =
            hub.tool(self.gateway, mcp, listed_route, tool, &mut self.session, self.passthrough.as_ref()).await;
        let (_, digest) = match listed {
            Ok(Some(found)) => found,
            Ok(None) => {
                audit.status = 404;
                return Err(Failure::new(rpc::INVALID_PARAMS, format!("Unknown tool: {name}")));
            }
            Err(failure) => {
                audit.status = 502;
                return Err(failure);
            }
        };
        let pins = hub.pins(self.gateway).await;
        let standing = pin::standing(pins.get(name).map(String::as_str), &digest);
        if !standing.callable(mcp.require_approval) {
            audit.status = 403;
            let why = match standing {
                Standing::Changed => "its schema changed since it was approved",
                _ => "it has not been approved",
            };
            return Err(Failure::new(rpc::FORBIDDEN, format!("`{name}` is withheld: {why}")));
        }
        Ok(())
    }

    /// The one settlement of a call, a prompt fetched or a resource read:
    /// through the engine's record, as every request settles (its hold
    /// replaced by what it cost, one ledger row).
    fn write_row(&self, mut audit: Audit) {
        let elapsed = self.started.elapsed().as_millis() as u64;
        tracing::info!(
            name = %audit.model, uri = audit.uri.as_deref().unwrap_or_default(), server = %audit.server,
            status = audit.status, ms = elapsed, bytes_in = audit.bytes_in, bytes_out = audit.bytes_out, "mcp"
        );
        let mut record = Record::begin_tool(self.gateway, self.caller.cloned(), audit.hold.take());
        record.on_run(audit.run.take());
        record.tool_called(ToolNote {
            route: audit.route,
            lane: Arc::from(crate::lane_name(&audit.server)),
            model: audit.model,
            cost_nano: audit.cost,
            billed: audit.billed,
            failovers: audit.failovers,
            detail: ToolCall {
                server: audit.server,
                bytes_in: audit.bytes_in,
                bytes_out: audit.bytes_out,
                error: audit.error,
                uri: audit.uri,
                task: None,
            },
            decisions: audit.decisions,
        });
        record.finish_detached(audit.status);
    }
}

/// The screen of `mcp.policies`, compiled once per list.
fn screen_of(gateway: &Gateway, mcp: &switchyard_config::mcp::Mcp) -> Option<Arc<Screen>> {
    if mcp.policies.is_empty() {
        return None;
    }
    let names: Vec<String> = mcp.policies.iter().map(|&i| gateway.config.policies[i].name.to_string()).collect();
    gateway.guardrails.for_key(&names)
}

/// Where a tool's result holds media (MCP's image and audio content, a
/// resource's blob): screened as the text it decodes to, when it is text.
const RESULT_MEDIA: &[Place] = &[
    Place::when(&["content", "data"], "type", &["image", "audio"], Holds::Media),
    Place::at(&["content", "resource", "blob"], Holds::Media),
];

/// Every string of `json` (media at `places` read as the text it encodes)
/// screened `direction`: the masked value, `None` when nothing changed, or
/// the refusal naming policy and rule (or saying the JSON could not be read).
fn screened(
    screen: &Screen,
    json: &[u8],
    places: &[Place],
    direction: Direction,
    decisions: &mut Vec<String>,
) -> Result<Option<Value>, String> {
    if !screen.may_match(json, places) {
        return Ok(None);
    }
    let mut masks = Masks::default();
    let mut made: Vec<Decision> = Vec::new();
    let rewritten = switchyard_guard::json::screen(screen, json, places, direction, &mut masks, &mut made);
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
    match rewritten {
        Ok(Ok(Some(bytes))) => Ok(serde_json::from_slice(&bytes).ok()),
        Ok(Ok(None)) => Ok(None),
        Err(malformed) => Err(format!("could not be read for guardrail policies ({malformed})")),
        Ok(Err(blocked)) => Err(format!("blocked by guardrail policy `{}` (rule `{}`)", blocked.policy, blocked.rule)),
    }
}
