//! `/mcp`, streamable HTTP: a POST carries one message. `initialize` opens
//! a session (its id in `mcp-session-id`, bound to the caller's key);
//! every later message names it, and a session this gateway does not know
//! (or another key's) is a 404, as the protocol has clients start over.
//! Notifications are taken with a 202. The listing methods gather every
//! name's servers; a call runs on its own task (`call`). No stream is
//! offered on GET (405); DELETE ends a session.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use serde_json::{json, Map, Value};
use switchyard_config::mcp::Mcp;
use switchyard_ir::Protocol;
use switchyard_state::governance::Caller;
use switchyard_state::Gateway;

use crate::hub::{hub_of, Failure, Hub};
use crate::names;
use crate::reply::json_answer;
use crate::rpc;
use crate::session::{self, Session};
use crate::upstream::http::{SESSION_HEADER, VERSION_HEADER};

/// The largest message a caller may POST.
const MAX_MESSAGE_BYTES: usize = 4 << 20;

/// The header a caller's own token for `passthrough` servers rides in
/// (its `Authorization` is its Switchyard key).
pub const PASSTHROUGH_HEADER: HeaderName = HeaderName::from_static("x-switchyard-mcp-authorization");

/// An error not tied to a request (`id` null).
fn refusal(status: StatusCode, code: i64, message: &str) -> Response {
    json_answer(status, &rpc::error(&Value::Null, code, message, None))
}

/// The caller, or the answer refusing it.
fn authenticate(gateway: &Gateway, request: &http::request::Parts) -> Result<Option<Caller>, Response> {
    let client = request.extensions.get::<switchyard_state::ClientName>().map(|name| &*name.0);
    switchyard_engine::authenticate::caller(gateway, Protocol::OpenAi, &request.uri, &request.headers, client, &[])
        .map_err(|info| {
            let status = StatusCode::from_u16(info.status).unwrap_or(StatusCode::UNAUTHORIZED);
            refusal(status, rpc::FORBIDDEN, &info.message)
        })
}

fn key_of(caller: Option<&Caller>) -> String {
    caller.map(|c| c.key.record.id.clone()).unwrap_or_default()
}

fn header<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `GET /mcp`: no server-initiated stream is offered.
pub async fn get() -> Response {
    let mut response = refusal(StatusCode::METHOD_NOT_ALLOWED, rpc::INVALID_REQUEST, "POST messages to /mcp");
    response.headers_mut().insert(http::header::ALLOW, HeaderValue::from_static("POST, DELETE"));
    response
}

/// `DELETE /mcp`: ends the caller's session.
pub async fn delete(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let (Some(hub), Some(mcp)) = (hub_of(&gateway), &gateway.config.mcp) else {
        return refusal(StatusCode::NOT_FOUND, rpc::METHOD_NOT_FOUND, "this gateway fronts no MCP servers");
    };
    let caller = match authenticate(&gateway, &parts) {
        Ok(caller) => caller,
        Err(refused) => return refused,
    };
    let Some(id) = header(&parts.headers, &SESSION_HEADER) else {
        return refusal(StatusCode::BAD_REQUEST, rpc::INVALID_REQUEST, "Bad Request: Missing session ID");
    };
    let fleet = gateway.fleet_state.as_deref();
    match hub.sessions.get(fleet, id, mcp.session_ttl).await {
        Ok(Some(session)) if session.key == key_of(caller.as_ref()) => match hub.sessions.end(fleet, id).await {
            Ok(()) => StatusCode::OK.into_response(),
            Err(err) => refusal(StatusCode::SERVICE_UNAVAILABLE, rpc::INTERNAL_ERROR, &err.to_string()),
        },
        Ok(_) => refusal(StatusCode::NOT_FOUND, rpc::INVALID_REQUEST, "Session not found"),
        Err(err) => refusal(StatusCode::SERVICE_UNAVAILABLE, rpc::INTERNAL_ERROR, &err.to_string()),
    }
}

/// `POST /mcp`: one message.
pub async fn post(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let (Some(hub), Some(mcp)) = (hub_of(&gateway), &gateway.config.mcp) else {
        return refusal(
            StatusCode::NOT_FOUND,
            rpc::METHOD_NOT_FOUND,
            "this gateway fronts no MCP servers (add `mcp:` to its config)",
        );
    };
    let caller = match authenticate(&gateway, &parts) {
        Ok(caller) => caller,
        Err(refused) => return refused,
    };
    let body = match axum::body::to_bytes(body, MAX_MESSAGE_BYTES).await {
        Ok(body) => body,
        Err(_) => {
            return refusal(StatusCode::PAYLOAD_TOO_LARGE, rpc::INVALID_REQUEST, "the message is larger than 4 MiB")
        }
    };
    let message = match rpc::parse(&body) {
        Ok(message) => message,
        Err(unreadable) => return refusal(StatusCode::BAD_REQUEST, unreadable.code, unreadable.message),
    };
    let fleet = gateway.fleet_state.as_deref();
    let Some(session_id) = header(&parts.headers, &SESSION_HEADER).map(str::to_owned) else {
        return match message {
            rpc::Message::Request { id, method, params } if method == "initialize" => {
                let asked = params.get("protocolVersion").and_then(Value::as_str);
                let version = rpc::negotiate(asked);
                let session =
                    Session { key: key_of(caller.as_ref()), version: version.to_owned(), ..Session::default() };
                let Some(session_id) = session::new_id() else {
                    return refusal(
                        StatusCode::SERVICE_UNAVAILABLE,
                        rpc::INTERNAL_ERROR,
                        "no randomness for a session id",
                    );
                };
                if let Err(err) = hub.sessions.put(fleet, &session_id, &session, mcp.session_ttl).await {
                    return refusal(StatusCode::SERVICE_UNAVAILABLE, rpc::INTERNAL_ERROR, &err.to_string());
                }
                let result = json!({
                    "protocolVersion": version,
                    "capabilities": {
                        "tools": { "listChanged": false },
                        "prompts": { "listChanged": false },
                        "resources": { "listChanged": false, "subscribe": false },
                        "logging": {},
                    },
                    "serverInfo": { "name": "switchyard", "version": env!("CARGO_PKG_VERSION") },
                    "instructions": "Tools, prompts and resources of several servers, named `<server>__<name>`.",
                });
                let mut response = json_answer(StatusCode::OK, &rpc::result(&id, result));
                if let Ok(value) = HeaderValue::from_str(&session_id) {
                    response.headers_mut().insert(SESSION_HEADER, value);
                }
                response
            }
            // The stateless era's probe: not spoken here, so the client
            // falls back to `initialize`.
            rpc::Message::Request { id, method, .. } if method == "server/discover" => json_answer(
                StatusCode::OK,
                &rpc::error(&id, rpc::METHOD_NOT_FOUND, "server/discover is not offered; initialize instead", None),
            ),
            _ => refusal(StatusCode::BAD_REQUEST, rpc::INVALID_REQUEST, "Bad Request: Missing session ID"),
        };
    };
    if let Some(version) = header(&parts.headers, &VERSION_HEADER) {
        if !rpc::VERSIONS.contains(&version) {
            return refusal(
                StatusCode::BAD_REQUEST,
                rpc::INVALID_REQUEST,
                "Bad Request: unsupported mcp-protocol-version",
            );
        }
    }
    let session = match hub.sessions.get(fleet, &session_id, mcp.session_ttl).await {
        Ok(Some(session)) if session.key == key_of(caller.as_ref()) => session,
        Ok(_) => return refusal(StatusCode::NOT_FOUND, rpc::INVALID_REQUEST, "Session not found"),
        Err(err) => return refusal(StatusCode::SERVICE_UNAVAILABLE, rpc::INTERNAL_ERROR, &err.to_string()),
    };
    let (id, method, params) = match message {
        rpc::Message::Request { id, method, params } => (id, method, params),
        // Notifications (initialized, cancelled, progress) and answers
        // need nothing back.
        rpc::Message::Notification { .. } | rpc::Message::Response => return StatusCode::ACCEPTED.into_response(),
    };
    let passthrough = parts.headers.get(PASSTHROUGH_HEADER).cloned();
    let streams =
        header(&parts.headers, &http::header::ACCEPT).is_some_and(|accept| accept.contains("text/event-stream"));
    let call = Session_ { gateway: &gateway, hub, mcp, caller: caller.as_ref(), passthrough, id: session_id, session };
    match method.as_str() {
        "tools/call" => {
            let wants_progress = params.get("_meta").and_then(|m| m.get("progressToken")).is_some();
            crate::call::call(
                gateway.clone(),
                caller.clone(),
                call.id,
                call.session,
                id,
                params,
                call.passthrough,
                streams && wants_progress,
            )
            .await
        }
        _ => call.answer(&id, &method, &params).await,
    }
}

/// One message's view of its session.
struct Session_<'a> {
    gateway: &'a Gateway,
    hub: &'a Hub,
    mcp: &'a Mcp,
    caller: Option<&'a Caller>,
    passthrough: Option<HeaderValue>,
    id: String,
    session: Session,
}

impl Session_<'_> {
    /// Answers a request other than `tools/call`.
    async fn answer(mut self, id: &Value, method: &str, params: &Map<String, Value>) -> Response {
        let before = self.session.upstream.clone();
        let answer = match method {
            "ping" | "logging/setLevel" => Ok(rpc::result(id, json!({}))),
            "tools/list" => self.list_tools().await.map(|tools| rpc::result(id, json!({ "tools": tools }))),
            "prompts/list" => {
                self.list("prompts/list", "prompts", "name").await.map(|p| rpc::result(id, json!({ "prompts": p })))
            }
            "resources/list" => self
                .list("resources/list", "resources", "uri")
                .await
                .map(|r| rpc::result(id, json!({ "resources": r }))),
            "resources/templates/list" => self
                .list("resources/templates/list", "resourceTemplates", "uriTemplate")
                .await
                .map(|r| rpc::result(id, json!({ "resourceTemplates": r }))),
            "prompts/get" => self.forward(id, method, params, "name").await,
            "resources/read" => self.forward(id, method, params, "uri").await,
            _ => Err(Failure::new(rpc::METHOD_NOT_FOUND, format!("Method not found: {method}"))),
        };
        if self.session.upstream != before {
            let fleet = self.gateway.fleet_state.as_deref();
            if let Err(err) = self.hub.sessions.put(fleet, &self.id, &self.session, self.mcp.session_ttl).await {
                tracing::warn!(error = %err, "an MCP session's server sessions could not be kept");
            }
        }
        let answer = answer.unwrap_or_else(|failure| rpc::error(id, failure.code, &failure.message, failure.data));
        json_answer(StatusCode::OK, &answer)
    }

    /// The names this caller may reach, with their servers.
    fn routes(&self) -> Vec<(Arc<str>, Vec<usize>)> {
        self.mcp
            .routes()
            .into_iter()
            .filter(|(route, _)| self.caller.is_none_or(|c| c.key.record.may_reach_server(route)))
            .collect()
    }

    async fn list_tools(&mut self) -> Result<Vec<Value>, Failure> {
        let mut tools = Vec::new();
        for listed_route in self.routes() {
            let listed = self
                .hub
                .tools_of(self.gateway, self.mcp, &listed_route, &mut self.session, self.passthrough.as_ref())
                .await;
            let route = listed_route.0;
            match listed {
                Ok(listed) => {
                    let pins = self.hub.pins(self.gateway).await;
                    tools.extend(Hub::visible(&route, &listed, &pins, self.caller, self.mcp.require_approval));
                }
                // One server away leaves the others' tools listed.
                Err(failure) => {
                    tracing::warn!(route = %route, error = %failure.message, "an MCP name's tools are not listed")
                }
            }
        }
        Ok(tools)
    }

    /// Every reachable name's `kind`, each item's `field` namespaced.
    async fn list(&mut self, method: &str, kind: &str, field: &str) -> Result<Vec<Value>, Failure> {
        let mut items = Vec::new();
        for (route, members) in self.routes() {
            match self.hub.list(self.mcp, &members, &mut self.session, self.passthrough.as_ref(), method, kind).await {
                Ok((_, listed)) => items.extend(listed.into_iter().filter_map(|mut item| {
                    let own = item.get(field)?.as_str()?.to_owned();
                    let shown = match field {
                        "name" => names::namespaced(&route, &own),
                        _ => names::resource_uri(&route, &own),
                    };
                    item.as_object_mut()?.insert(field.to_owned(), Value::String(shown));
                    Some(item)
                })),
                Err(failure) => {
                    tracing::warn!(route = %route, error = %failure.message, "an MCP name's {kind} are not listed")
                }
            }
        }
        Ok(items)
    }

    /// `prompts/get` or `resources/read`: to the server the namespaced
    /// `field` names, with its own name for it; a twin takes it when the
    /// first could not be reached.
    async fn forward(
        &mut self,
        id: &Value,
        method: &str,
        params: &Map<String, Value>,
        field: &str,
    ) -> Result<Value, Failure> {
        let shown = params.get(field).and_then(Value::as_str).unwrap_or_default();
        let split = match field {
            "name" => names::split(shown),
            _ => names::split_uri(shown),
        };
        let unknown = || Failure::new(rpc::INVALID_PARAMS, format!("Unknown {field}: {shown}"));
        let (route, own) = split.ok_or_else(unknown)?;
        let (_, members) = self.routes().into_iter().find(|(r, _)| &**r == route).ok_or_else(unknown)?;
        let mut params = params.clone();
        params.insert(field.to_owned(), Value::String(own.to_owned()));
        let mut last = Failure::new(rpc::UNAVAILABLE, format!("no server of `{route}` answered"));
        for index in members {
            let server = &self.mcp.servers[index];
            match self
                .hub
                .exchange(
                    server,
                    &mut self.session,
                    self.passthrough.as_ref(),
                    method,
                    Value::Object(params.clone()),
                    None,
                )
                .await
            {
                Ok(mut answer) => {
                    answer["id"] = id.clone();
                    return Ok(answer);
                }
                Err(err) if err.unsent() => last = Failure::new(rpc::UNAVAILABLE, format!("`{}`: {err}", server.name)),
                Err(err) => return Err(Failure::new(rpc::UNAVAILABLE, format!("`{}`: {err}", server.name))),
            }
        }
        Err(last)
    }
}
