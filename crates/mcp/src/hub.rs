//! The hub: one per process, kept across reloads, reading the config
//! current at each message. It reaches the servers (their stdio children
//! and fetched tokens are kept here), lists each name's tools from the
//! first of its servers that answers, knows each tool's schema digest
//! and its pin, and runs the methods a caller's session sends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::HeaderValue;
use serde_json::{json, Map, Value};
use switchyard_config::mcp::{Mcp, McpAuth, McpProtocol, McpServer, McpTransport};
use switchyard_governance::mcp_grant::Kind;
use switchyard_state::governance::{now_ms, Caller};
use switchyard_state::Gateway;
use switchyard_store::{KeptObject, ObjectKind};
use switchyard_telemetry::alert::AlertKind;
use switchyard_transport::hooks::HookClient;
use switchyard_transport::token::TokenSource;
use tokio::sync::mpsc;

use crate::names;
use crate::pin::{self, Standing};
use crate::rpc;
use crate::session::Session;
use crate::upstream::http::{self as upstream_http, Post};
use crate::upstream::stdio::{Spec, StdioServer};
use crate::upstream::CallError;

/// How long a listing of a name's tools answers a call's pin check.
const LISTING_FRESH: Duration = Duration::from_secs(10);
/// How long pins read from the store are trusted (another instance's
/// approval shows here within this).
const PINS_FRESH: Duration = Duration::from_secs(2);
/// Pages of a server's list followed, at most.
const MAX_PAGES: usize = 20;

/// The MCP gateway of this process.
pub struct Hub {
    client: HookClient,
    stdio: Mutex<HashMap<Arc<str>, Arc<StdioServer>>>,
    tokens: Mutex<HashMap<Arc<str>, Arc<TokenSource>>>,
    /// The hub's own session with each server, for the admin plane's
    /// listing.
    own: tokio::sync::Mutex<Session>,
    /// Callers' sessions.
    pub(crate) sessions: crate::session::Sessions,
    /// What seals the handles minted for callers.
    pub(crate) handles: crate::handles::Handles,
    listed: Mutex<HashMap<Arc<str>, Listed>>,
    pins: Mutex<Pins>,
}

/// A name's tools as last listed.
#[derive(Clone)]
struct Listed {
    at: Instant,
    /// Each tool as its server named it, with its digest.
    tools: Arc<Vec<(Value, String)>>,
}

#[derive(Default)]
struct Pins {
    read_at: Option<Instant>,
    by_name: HashMap<String, String>,
}

/// A name callers see, and its servers in the order they are tried.
pub(crate) type Route = (Arc<str>, Vec<usize>);

/// A failed listing or call: the error to answer with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Failure {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl Failure {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Failure {
        Failure { code, message: message.into(), data: None }
    }
}

/// The hub this process runs, when there is one.
pub(crate) fn hub_of(gateway: &Gateway) -> Option<&Hub> {
    gateway.mcp.as_ref().and_then(|hub| hub.as_any().downcast_ref::<Hub>())
}

impl Default for Hub {
    fn default() -> Hub {
        Hub {
            client: HookClient::new(),
            stdio: Mutex::default(),
            tokens: Mutex::default(),
            own: tokio::sync::Mutex::default(),
            sessions: crate::session::Sessions::default(),
            handles: crate::handles::Handles::default(),
            listed: Mutex::default(),
            pins: Mutex::default(),
        }
    }
}

impl Hub {
    /// A hub with no server reached yet.
    pub fn new() -> Arc<Hub> {
        Arc::new(Hub::default())
    }

    /// The stdio server of `server`, started anew when its command changed.
    fn stdio_of(&self, server: &McpServer, spec: Spec) -> Arc<StdioServer> {
        let mut stdio = self.stdio.lock().unwrap_or_else(PoisonError::into_inner);
        match stdio.get(&server.name) {
            Some(running) if running.spec == spec => running.clone(),
            _ => {
                let fresh = Arc::new(StdioServer::new(spec));
                stdio.insert(server.name.clone(), fresh.clone());
                fresh
            }
        }
    }

    /// The `Authorization` a server is sent.
    async fn authorization(
        &self,
        server: &McpServer,
        passthrough: Option<&HeaderValue>,
    ) -> Result<Option<HeaderValue>, CallError> {
        match &server.auth {
            McpAuth::None => Ok(None),
            McpAuth::Bearer(token) => HeaderValue::from_str(&format!("Bearer {token}"))
                .map(Some)
                .map_err(|_| CallError::NotSent("the bearer token is not a header value".into())),
            McpAuth::Passthrough => Ok(passthrough.cloned()),
            McpAuth::Fetched(auth) => {
                let source = {
                    let mut tokens = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
                    match tokens.get(&server.name) {
                        Some(source) if source.auth() == auth => source.clone(),
                        _ => {
                            let source = Arc::new(TokenSource::new(auth.clone()));
                            tokens.insert(server.name.clone(), source.clone());
                            source
                        }
                    }
                };
                source.bearer().await.map(Some).map_err(|err| CallError::NotSent(format!("no token: {err}")))
            }
        }
    }

    /// Sends request `method` to server `server` in `session` (its HTTP
    /// session opened when it has none, and again once when the server
    /// forgot it); the server's whole answer message comes back.
    pub(crate) async fn exchange(
        &self,
        server: &McpServer,
        session: &mut Session,
        passthrough: Option<&HeaderValue>,
        method: &str,
        params: Value,
        events: Option<mpsc::Sender<Value>>,
    ) -> Result<Value, CallError> {
        match &server.transport {
            McpTransport::Stdio { command, args, env } => {
                let spec = Spec { command: command.clone(), args: args.clone(), env: env.clone() };
                self.stdio_of(server, spec).call(method, params, events, server.timeout).await
            }
            McpTransport::Http { url } if server.protocol == McpProtocol::Stateless => {
                // 2026-07-28: no session; the request carries the
                // gateway's own envelope, its method and name repeated in
                // headers.
                let authorization = self.authorization(server, passthrough).await?;
                let Value::Object(mut params) = params else {
                    return Err(CallError::NotSent("params must be an object".into()));
                };
                rpc::stamp_envelope(&mut params, &crate::upstream::client_info());
                let name = rpc::name_member(method).and_then(|member| params.get(member)).and_then(Value::as_str);
                let name = name.map(str::to_owned);
                let message = rpc::request(fastrand::u64(1..1 << 53), method, Value::Object(params));
                let post = Post {
                    url,
                    message: &message,
                    session: None,
                    version: Some(rpc::STATELESS),
                    authorization,
                    timeout: server.timeout,
                    routing: Some((method, name.as_deref())),
                };
                match upstream_http::post(&self.client, post, events.as_ref()).await? {
                    (Some(answer), _) => Ok(answer),
                    (None, _) => Err(CallError::Lost("no answer".into())),
                }
            }
            McpTransport::Http { url } => {
                let authorization = self.authorization(server, passthrough).await?;
                let mut reopened = false;
                loop {
                    let sent = match session.upstream.get(&*server.name) {
                        Some(sent) => sent.clone(),
                        None => {
                            // Whatever goes wrong opening a session, the
                            // message itself was never sent.
                            let sent =
                                upstream_http::initialize(&self.client, url, authorization.clone(), server.timeout)
                                    .await
                                    .map_err(|err| match err {
                                        CallError::NotSent(_) => err,
                                        other => CallError::NotSent(format!("no session: {other}")),
                                    })?;
                            session.upstream.insert(server.name.to_string(), sent.clone());
                            sent
                        }
                    };
                    let message = rpc::request(fastrand::u64(1..1 << 53), method, params.clone());
                    let post = Post {
                        url,
                        message: &message,
                        session: sent.session.as_deref(),
                        version: Some(&sent.version),
                        authorization: authorization.clone(),
                        timeout: server.timeout,
                        routing: None,
                    };
                    match upstream_http::post(&self.client, post, events.as_ref()).await {
                        Ok((Some(answer), _)) => return Ok(answer),
                        Ok((None, _)) => return Err(CallError::Lost("no answer".into())),
                        Err(CallError::SessionGone) if !reopened => {
                            // The server restarted or forgot us: a new
                            // session, and the message once more (it was
                            // refused, so it never ran).
                            session.upstream.remove(&*server.name);
                            reopened = true;
                        }
                        Err(err) => return Err(err),
                    }
                }
            }
        }
    }

    /// Lists one name's `kind` (`tools`, `prompts`, `resources`,
    /// `resourceTemplates`) from the first of its servers that answers,
    /// following pages.
    pub(crate) async fn list(
        &self,
        mcp: &Mcp,
        members: &[usize],
        session: &mut Session,
        passthrough: Option<&HeaderValue>,
        method: &str,
        kind: &str,
    ) -> Result<(usize, Vec<Value>), Failure> {
        let mut last = Failure::new(rpc::UNAVAILABLE, "no server answered");
        for &index in members {
            let server = &mcp.servers[index];
            let mut items = Vec::new();
            let mut cursor: Option<Value> = None;
            let mut failed = None;
            for _ in 0..MAX_PAGES {
                let params = match &cursor {
                    Some(cursor) => json!({ "cursor": cursor }),
                    None => json!({}),
                };
                match self.exchange(server, session, passthrough, method, params, None).await {
                    Ok(answer) => {
                        if let Some(error) = answer.get("error") {
                            failed = Some(Failure {
                                code: error.get("code").and_then(Value::as_i64).unwrap_or(rpc::INTERNAL_ERROR),
                                message: error.get("message").and_then(Value::as_str).unwrap_or("failed").to_owned(),
                                data: None,
                            });
                            break;
                        }
                        let result = answer.get("result");
                        if let Some(Value::Array(page)) = result.and_then(|r| r.get(kind)) {
                            items.extend(page.iter().cloned());
                        }
                        cursor = result.and_then(|r| r.get("nextCursor")).filter(|c| !c.is_null()).cloned();
                        if cursor.is_none() {
                            break;
                        }
                    }
                    Err(err) => {
                        tracing::warn!(server = %server.name, error = %err, "an MCP server could not be listed");
                        failed = Some(Failure::new(rpc::UNAVAILABLE, format!("`{}`: {err}", server.name)));
                        break;
                    }
                }
            }
            match failed {
                None => return Ok((index, items)),
                // A method the server does not offer: it has none of them.
                Some(failure) if failure.code == rpc::METHOD_NOT_FOUND => return Ok((index, Vec::new())),
                Some(failure) => last = failure,
            }
        }
        Err(last)
    }

    /// The pins, read again when stale.
    pub(crate) async fn pins(&self, gateway: &Gateway) -> HashMap<String, String> {
        {
            let pins = self.pins.lock().unwrap_or_else(PoisonError::into_inner);
            if pins.read_at.is_some_and(|at| at.elapsed() < PINS_FRESH) {
                return pins.by_name.clone();
            }
        }
        let now = now_ms() as i64;
        let read = gateway.kept.objects.list_objects(ObjectKind::ToolPin, String::new(), now, 100_000).await;
        let mut pins = self.pins.lock().unwrap_or_else(PoisonError::into_inner);
        match read {
            Ok(objects) => {
                pins.by_name = objects
                    .into_iter()
                    .filter_map(|object| {
                        let meta: Value = serde_json::from_str(&object.meta).ok()?;
                        Some((object.id, meta.get("digest")?.as_str()?.to_owned()))
                    })
                    .collect();
                pins.read_at = Some(Instant::now());
            }
            // The last pins read stand while the store is away.
            Err(err) => tracing::warn!(error = %err, "MCP tool pins could not be read"),
        }
        pins.by_name.clone()
    }

    /// Lists `route`'s tools for `session`, remembers them with their
    /// digests, and raises an alert for each pinned tool whose schema
    /// changed.
    pub(crate) async fn tools_of(
        &self,
        gateway: &Gateway,
        mcp: &Mcp,
        (route, members): &Route,
        session: &mut Session,
        passthrough: Option<&HeaderValue>,
    ) -> Result<Arc<Vec<(Value, String)>>, Failure> {
        let (index, tools) = self.list(mcp, members, session, passthrough, "tools/list", "tools").await?;
        let tools: Arc<Vec<(Value, String)>> = Arc::new(
            tools
                .into_iter()
                .filter(|tool| tool.get("name").and_then(Value::as_str).is_some())
                .map(|tool| {
                    let digest = pin::digest(&tool);
                    (tool, digest)
                })
                .collect(),
        );
        let pins = self.pins(gateway).await;
        for (tool, digest) in tools.iter() {
            let name = names::namespaced(route, tool["name"].as_str().unwrap_or_default());
            if pin::standing(pins.get(&name).map(String::as_str), digest) == Standing::Changed {
                self.changed(gateway, &name, &mcp.servers[index].name);
            }
        }
        let listed = Listed { at: Instant::now(), tools: tools.clone() };
        self.listed.lock().unwrap_or_else(PoisonError::into_inner).insert(route.clone(), listed);
        Ok(tools)
    }

    /// A pinned tool changed: an alert (once while it stays open).
    fn changed(&self, gateway: &Gateway, name: &str, server: &str) {
        if let Some(alerts) = &gateway.telemetry.alerts {
            if !alerts.is_open(AlertKind::McpToolChanged, name) {
                tracing::warn!(tool = %name, %server, "an approved MCP tool's schema changed: withheld until approved again");
                let detail = format!("`{server}` changed the schema of `{name}` since it was approved; it is withheld until an admin approves it again");
                alerts.raise(AlertKind::McpToolChanged, name, detail, now_ms());
            }
        }
    }

    /// `route`'s tool `tool` as listed within [`LISTING_FRESH`] (listed
    /// again otherwise), with its digest; `None`: the server offers none
    /// of that name.
    pub(crate) async fn tool(
        &self,
        gateway: &Gateway,
        mcp: &Mcp,
        listed_route: &Route,
        tool: &str,
        session: &mut Session,
        passthrough: Option<&HeaderValue>,
    ) -> Result<Option<(Value, String)>, Failure> {
        let route = &listed_route.0;
        let fresh = {
            let listed = self.listed.lock().unwrap_or_else(PoisonError::into_inner);
            listed.get(route).filter(|l| l.at.elapsed() < LISTING_FRESH).map(|l| l.tools.clone())
        };
        let tools = match fresh {
            Some(tools) => tools,
            None => self.tools_of(gateway, mcp, listed_route, session, passthrough).await?,
        };
        Ok(tools.iter().find(|(t, _)| t.get("name").and_then(Value::as_str) == Some(tool)).cloned())
    }

    /// What a caller sees of `route`'s tools: each it may call, whose
    /// standing lets it be listed, under its namespaced name.
    pub(crate) fn visible(
        route: &str,
        tools: &[(Value, String)],
        pins: &HashMap<String, String>,
        caller: Option<&Caller>,
        require_approval: bool,
    ) -> Vec<Value> {
        tools
            .iter()
            .filter_map(|(tool, digest)| {
                let own = tool.get("name")?.as_str()?;
                let name = names::namespaced(route, own);
                let standing = pin::standing(pins.get(&name).map(String::as_str), digest);
                let granted = caller.is_none_or(|c| c.key.record.may_use_mcp(Kind::Tool, route, own));
                (standing.callable(require_approval) && granted).then(|| {
                    let mut tool = tool.clone();
                    if let Some(object) = tool.as_object_mut() {
                        object.insert("name".into(), Value::String(name));
                    }
                    tool
                })
            })
            .collect()
    }

    /// Every name's servers and tools, listed afresh in the hub's own
    /// session, for the admin plane.
    pub(crate) async fn overview_of(&self, gateway: &Gateway) -> Value {
        let Some(mcp) = &gateway.config.mcp else {
            return json!({ "configured": false, "servers": [], "tools": [] });
        };
        let servers: Vec<Value> = mcp
            .servers
            .iter()
            .map(|server| {
                let (transport, target, state) = match &server.transport {
                    McpTransport::Http { url } => ("http", switchyard_config::shown_url(url), Value::Null),
                    McpTransport::Stdio { command, args, env } => {
                        let spec = Spec { command: command.clone(), args: args.clone(), env: env.clone() };
                        let state = serde_json::to_value(self.stdio_of(server, spec).state()).unwrap_or(Value::Null);
                        ("stdio", command.clone(), state)
                    }
                };
                let pool = mcp.pools.iter().find(|p| p.members.iter().any(|&m| mcp.servers[m].name == server.name));
                json!({
                    "name": &*server.name,
                    "transport": transport,
                    "target": target,
                    "pool": pool.map(|p| &*p.name),
                    "idempotent": server.idempotent,
                    "protocol": match (&server.transport, server.protocol) {
                        (McpTransport::Http { .. }, McpProtocol::Stateless) => rpc::STATELESS,
                        _ => "handshake",
                    },
                    "price_per_call_usd": server.price_nano.map(|n| n as f64 / 1e9),
                    "state": state,
                })
            })
            .collect();
        let mut tools = Vec::new();
        let mut errors = Map::new();
        let pins = self.pins(gateway).await;
        let mut own = self.own.lock().await;
        for route in mcp.routes() {
            let listed = self.tools_of(gateway, mcp, &route, &mut own, None).await;
            let route = route.0;
            match listed {
                Ok(listed) => {
                    for (tool, digest) in listed.iter() {
                        let name =
                            names::namespaced(&route, tool.get("name").and_then(Value::as_str).unwrap_or_default());
                        let pinned = pins.get(&name);
                        let standing = pin::standing(pinned.map(String::as_str), digest);
                        tools.push(json!({
                            "name": name,
                            "route": &*route,
                            "description": tool.get("description"),
                            "digest": digest,
                            "approved_digest": pinned,
                            "standing": standing.as_str(),
                            "listed": standing.callable(mcp.require_approval),
                        }));
                    }
                }
                Err(failure) => {
                    errors.insert(route.to_string(), Value::String(failure.message));
                }
            }
        }
        json!({
            "configured": true,
            "require_approval": mcp.require_approval,
            "servers": servers,
            "tools": tools,
            "errors": errors,
        })
    }

    /// Pins tool `name` to the schema its server lists now.
    pub(crate) async fn approve_tool(
        &self,
        gateway: &Gateway,
        name: &str,
        by: &str,
    ) -> Result<Value, switchyard_state::mcp::ApprovalError> {
        use switchyard_state::mcp::ApprovalError;
        let unknown = || ApprovalError::UnknownTool(name.to_owned());
        let mcp = gateway.config.mcp.as_ref().ok_or_else(unknown)?;
        let (route, tool) = names::split(name).ok_or_else(unknown)?;
        let route = mcp.routes().into_iter().find(|(r, _)| &**r == route).ok_or_else(unknown)?;
        let listed = {
            let mut own = self.own.lock().await;
            self.tools_of(gateway, mcp, &route, &mut own, None).await.map_err(|f| ApprovalError::Store(f.message))?
        };
        let digest = listed
            .iter()
            .find(|(t, _)| t.get("name").and_then(Value::as_str) == Some(tool))
            .map(|(_, digest)| digest.clone())
            .ok_or_else(unknown)?;
        let at = now_ms();
        let meta = json!({ "digest": digest, "by": by, "at_ms": at });
        let object = KeptObject {
            kind: ObjectKind::ToolPin,
            owner: String::new(),
            id: name.to_owned(),
            created_ms: at as i64,
            expires_ms: None,
            meta: meta.to_string(),
            body: Vec::new(),
            size: 0,
            chunks: 0,
            user_tag: None,
        };
        gateway.kept.objects.put_object(object).await.map_err(|err| ApprovalError::Store(err.to_string()))?;
        self.forget_pins();
        if let Some(alerts) = &gateway.telemetry.alerts {
            if alerts.is_open(AlertKind::McpToolChanged, name) {
                alerts.resolve(AlertKind::McpToolChanged, name, format!("approved again by {by}"), at);
            }
        }
        Ok(json!({ "name": name, "digest": digest, "by": by, "at_ms": at }))
    }

    /// Unpins tool `name`.
    pub(crate) async fn unpin_tool(
        &self,
        gateway: &Gateway,
        name: &str,
    ) -> Result<bool, switchyard_state::mcp::ApprovalError> {
        let removed = gateway
            .kept
            .objects
            .delete_object(ObjectKind::ToolPin, String::new(), name.to_owned())
            .await
            .map_err(|err| switchyard_state::mcp::ApprovalError::Store(err.to_string()))?;
        self.forget_pins();
        Ok(removed)
    }

    fn forget_pins(&self) {
        self.pins.lock().unwrap_or_else(PoisonError::into_inner).read_at = None;
    }
}

impl switchyard_state::mcp::McpHub for Hub {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn overview<'a>(&'a self, gateway: &'a Gateway) -> switchyard_state::mcp::HubFuture<'a, Value> {
        Box::pin(self.overview_of(gateway))
    }

    fn approve<'a>(
        &'a self,
        gateway: &'a Gateway,
        name: &'a str,
        by: &'a str,
    ) -> switchyard_state::mcp::HubFuture<'a, Result<Value, switchyard_state::mcp::ApprovalError>> {
        Box::pin(self.approve_tool(gateway, name, by))
    }

    fn unpin<'a>(
        &'a self,
        gateway: &'a Gateway,
        name: &'a str,
    ) -> switchyard_state::mcp::HubFuture<'a, Result<bool, switchyard_state::mcp::ApprovalError>> {
        Box::pin(self.unpin_tool(gateway, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_sees_what_it_may_call_and_no_changed_tool() {
        let tools = vec![
            (json!({"name": "read", "inputSchema": {}}), "d1".to_owned()),
            (json!({"name": "close", "inputSchema": {}}), "d2".to_owned()),
            (json!({"name": "moved", "inputSchema": {}}), "d3".to_owned()),
        ];
        let pins: HashMap<String, String> =
            [("t__read".to_owned(), "d1".to_owned()), ("t__moved".to_owned(), "old".to_owned())].into();
        let names = |seen: Vec<Value>| {
            seen.iter().map(|t| t["name"].as_str().unwrap_or_default().to_owned()).collect::<Vec<_>>()
        };
        assert_eq!(names(Hub::visible("t", &tools, &pins, None, false)), ["t__read", "t__close"]);
        assert_eq!(names(Hub::visible("t", &tools, &pins, None, true)), ["t__read"]);
    }
}
