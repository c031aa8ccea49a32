//! `tools/call`: the key's grant, the tool's pin, the guardrails on its
//! arguments, admission on the key's chain (rate and concurrency limits,
//! a budget for a priced server), the call sent to the first server of
//! its name that can take it (a twin after a failure before dispatch; after
//! dispatch only for a tool marked idempotent), the guardrails on its
//! result, settlement and one ledger row. It runs on a task of its own so
//! a caller that leaves never leaves a hold unsettled or a call unaudited;
//! with a progress token and an event stream accepted, the server's
//! notifications reach the caller as they come.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::response::Response;
use http::{HeaderValue, StatusCode};
use serde_json::{json, Map, Value};
use switchyard_governance::Estimate;
use switchyard_guard::{Decision, Direction, Masks, Screen};
use switchyard_state::governance::{now_ms, Caller};
use switchyard_state::Gateway;
use switchyard_store::{LedgerRow, Notes, Tokens, ToolCall};
use tokio::sync::mpsc;

use crate::hub::hub_of;
use crate::hub::Failure;
use crate::names;
use crate::pin::{self, Standing};
use crate::reply::json_answer;
use crate::rpc;
use crate::session::Session;

/// Runs one `tools/call`; `stream`: answer as an event stream carrying
/// the server's notifications before the answer.
#[allow(clippy::too_many_arguments, reason = "one call's whole context, passed once")]
pub(crate) async fn call(
    gateway: Arc<Gateway>,
    caller: Option<Caller>,
    session_id: String,
    session: Session,
    id: Value,
    params: Map<String, Value>,
    passthrough: Option<HeaderValue>,
    stream: bool,
) -> Response {
    let (events, mut received) = mpsc::channel::<Value>(64);
    let task = tokio::spawn(async move {
        let sink = stream.then(|| events.clone());
        let opened = session.upstream.clone();
        let mut run = Run { gateway: &gateway, caller: caller.as_ref(), session, passthrough, started: Instant::now() };
        let answer = run.call(&id, params, sink).await;
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
    tokio::spawn(produce(tx));
    let frames = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
    Body::from_stream(frames)
}

struct Run<'a> {
    gateway: &'a Gateway,
    caller: Option<&'a Caller>,
    session: Session,
    passthrough: Option<HeaderValue>,
    started: Instant,
}

/// What the ledger row says.
#[derive(Default)]
struct Audit {
    route: String,
    server: String,
    tool: String,
    status: u16,
    error: Option<i64>,
    bytes_in: u64,
    bytes_out: u64,
    billed: bool,
    failovers: u32,
    decisions: Vec<String>,
}

impl Run<'_> {
    async fn keep_session(&self, session_id: &str) {
        let (Some(hub), Some(mcp)) = (hub_of(self.gateway), &self.gateway.config.mcp) else { return };
        let fleet = self.gateway.fleet_state.as_deref();
        if let Err(err) = hub.sessions.put(fleet, session_id, &self.session, mcp.session_ttl).await {
            tracing::warn!(error = %err, "an MCP session's server sessions could not be kept");
        }
    }

    /// The call's answer, with the caller's id; its row written.
    async fn call(&mut self, id: &Value, params: Map<String, Value>, events: Option<mpsc::Sender<Value>>) -> Value {
        let mut audit = Audit::default();
        let answer = match self.run(&mut audit, params, events).await {
            Ok(mut answer) => {
                answer["id"] = id.clone();
                answer
            }
            Err(failure) => {
                audit.error = Some(failure.code);
                rpc::error(id, failure.code, &failure.message, failure.data)
            }
        };
        if !audit.tool.is_empty() {
            self.write_row(audit);
        }
        answer
    }

    async fn run(
        &mut self,
        audit: &mut Audit,
        mut params: Map<String, Value>,
        events: Option<mpsc::Sender<Value>>,
    ) -> Result<Value, Failure> {
        let gateway = self.gateway;
        let (Some(hub), Some(mcp)) = (hub_of(gateway), &gateway.config.mcp) else {
            return Err(Failure::new(rpc::METHOD_NOT_FOUND, "this gateway fronts no MCP servers"));
        };
        let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let unknown = || Failure::new(rpc::INVALID_PARAMS, format!("Unknown tool: {name}"));
        let (route, tool) = names::split(&name).ok_or_else(unknown)?;
        let listed_route = mcp.routes().into_iter().find(|(r, _)| &**r == route).ok_or_else(unknown)?;
        let (route, members) = (&listed_route.0, &listed_route.1);
        audit.route = route.to_string();
        audit.tool = name.clone();
        audit.server = mcp.servers[members[0]].name.to_string();
        if let Some(caller) = self.caller.filter(|c| !c.key.record.may_call_tool(&name)) {
            audit.status = 403;
            let message = format!("API key {} may not call `{name}`", caller.key.record.prefix);
            return Err(Failure::new(rpc::FORBIDDEN, message));
        }
        let listed = hub.tool(gateway, mcp, &listed_route, tool, &mut self.session, self.passthrough.as_ref()).await;
        let (_, digest) = match listed {
            Ok(Some(found)) => found,
            Ok(None) => {
                audit.status = 404;
                return Err(unknown());
            }
            Err(failure) => {
                audit.status = 502;
                return Err(failure);
            }
        };
        let pins = hub.pins(gateway).await;
        let standing = pin::standing(pins.get(&name).map(String::as_str), &digest);
        if !standing.callable(mcp.require_approval) {
            audit.status = 403;
            let why = match standing {
                Standing::Changed => "its schema changed since it was approved",
                _ => "it has not been approved",
            };
            return Err(Failure::new(rpc::FORBIDDEN, format!("`{name}` is withheld: {why}")));
        }
        // The arguments, screened by `mcp.policies`.
        let screen = screen_of(gateway, mcp);
        let arguments = params.remove("arguments").unwrap_or_else(|| json!({}));
        let arguments_bytes = serde_json::to_vec(&arguments).unwrap_or_default();
        audit.bytes_in = arguments_bytes.len() as u64;
        let arguments = match &screen {
            Some(screen) => match screened(screen, &arguments_bytes, Direction::Request, &mut audit.decisions) {
                Ok(Some(masked)) => masked,
                Ok(None) => arguments,
                Err(blocked) => {
                    audit.status = 400;
                    return Err(Failure::new(rpc::INVALID_PARAMS, blocked));
                }
            },
            None => arguments,
        };
        params.insert("name".into(), Value::String(tool.to_owned()));
        params.insert("arguments".into(), arguments);
        // Admission: the key's chain, for the price of one call.
        let price = mcp.servers[members[0]].price_nano.unwrap_or(0);
        let hold = match (&gateway.governance, self.caller) {
            (Some(governance), Some(caller)) => {
                match governance.admit_on_chain(caller, Estimate::bounded(0, price), None).await {
                    Ok(hold) => Some((governance, hold)),
                    Err(denied) => {
                        audit.status = denied.info.status;
                        let data = denied.retry_after.map(|after| json!({ "retry_after": after }));
                        return Err(Failure { code: rpc::LIMITED, message: denied.info.message, data });
                    }
                }
            }
            _ => None,
        };
        let mut outcome = Err(Failure::new(rpc::UNAVAILABLE, format!("no server of `{route}` could take the call")));
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
                    "tools/call",
                    Value::Object(params.clone()),
                    events.clone(),
                )
                .await;
            match sent {
                Ok(answer) => {
                    cost = server.price_nano.unwrap_or(0);
                    outcome = Ok(answer);
                    break;
                }
                Err(err) => {
                    let again = err.unsent() || server.idempotent.iter().any(|t| t == tool);
                    tracing::warn!(server = %server.name, tool = %name, error = %err, retried = again, "an MCP tool call failed");
                    outcome = Err(Failure::new(rpc::UNAVAILABLE, format!("`{}`: {err}", server.name)));
                    if !again {
                        break;
                    }
                }
            }
        }
        if let Some((governance, hold)) = &hold {
            governance.settle(hold, 0, cost);
        }
        audit.billed = cost > 0;
        let mut answer = match outcome {
            Ok(answer) => answer,
            Err(failure) => {
                audit.status = 502;
                return Err(failure);
            }
        };
        // The result, screened on its way back.
        if let (Some(screen), Some(result)) = (&screen, answer.get("result")) {
            let bytes = serde_json::to_vec(result).unwrap_or_default();
            match screened(screen, &bytes, Direction::Response, &mut audit.decisions) {
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

    fn write_row(&self, audit: Audit) {
        let elapsed = self.started.elapsed().as_millis() as u64;
        tracing::info!(
            tool = %audit.tool, server = %audit.server, status = audit.status, ms = elapsed,
            bytes_in = audit.bytes_in, bytes_out = audit.bytes_out, "mcp tool call"
        );
        let Some(ledger) = self.gateway.governance.as_ref().and_then(|g| g.ledger.as_ref()) else { return };
        let record = self.caller.map(|c| &c.key.record);
        let row = LedgerRow {
            entry: fastrand::i64(1..i64::MAX),
            at_ms: now_ms() as i64,
            request_id: format!("mcp_{:032x}", fastrand::u128(..)),
            key_id: record.map(|r| r.id.clone()),
            group: record.and_then(|r| r.group.clone()),
            pool: audit.route,
            lane: crate::lane_name(&audit.server),
            model: audit.tool,
            operation: crate::OPERATION.to_owned(),
            tokens: Tokens { requests: u64::from(audit.billed), ..Tokens::default() },
            status: audit.status,
            latency_ms: elapsed,
            ttfb_ms: None,
            failovers: audit.failovers,
            estimated: false,
            attempts: Vec::new(),
            notes: Notes {
                guardrails: audit.decisions,
                tool: Some(ToolCall {
                    server: audit.server,
                    bytes_in: audit.bytes_in,
                    bytes_out: audit.bytes_out,
                    error: audit.error,
                }),
                ..Notes::default()
            },
            end_user: self.caller.and_then(|c| c.subject.as_deref().map(str::to_owned)),
            ingress: Some("mcp".to_owned()),
            stream: false,
        };
        ledger.push_detached(row);
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

/// Every prose string of `json` screened `direction`: the masked value,
/// `None` when nothing changed, or the refusal naming policy and rule.
fn screened(
    screen: &Screen,
    json: &[u8],
    direction: Direction,
    decisions: &mut Vec<String>,
) -> Result<Option<Value>, String> {
    if !screen.may_match(json) {
        return Ok(None);
    }
    let mut masks = Masks::default();
    let mut made: Vec<Decision> = Vec::new();
    let rewritten =
        switchyard_guard::json::rewrite_strings(json, |text| screen.screen(text, direction, &mut masks, &mut made));
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
        Ok(Ok(None)) | Err(_) => Ok(None),
        Ok(Err(blocked)) => Err(format!("blocked by guardrail policy `{}` (rule `{}`)", blocked.policy, blocked.rule)),
    }
}
