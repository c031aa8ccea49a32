//! `/mcp`, streamable HTTP: a POST carries one message. `initialize` opens
//! a session (its id in `mcp-session-id`, bound to the caller's key),
//! admitted as a request on the key's limits and within the key's
//! `mcp.sessions_per_key`; every later message names it, and a session
//! this gateway does not know (or another key's) is a 404, as the protocol
//! has clients start over. Notifications are taken with a 202. The listing
//! methods gather the names the key's grants reach and list what they
//! grant of each; a tool call, a prompt fetched or a resource read runs on
//! its own task (`call`). No stream is offered on GET (405); DELETE ends a
//! session.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use serde_json::{json, Map, Value};
use switchyard_config::mcp::Mcp;
use switchyard_governance::mcp_grant::Kind;
use switchyard_governance::Estimate;
use switchyard_ir::Protocol;
use switchyard_state::governance::Caller;
use switchyard_state::Gateway;

use crate::hub::{hub_of, Failure, Hub};
use crate::names;
use crate::reply::json_answer;
use crate::rpc;
use crate::session::{self, Session, SessionError};
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
    let client = request.extensions.get::<switchyard_state::ClientName>();
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
    let key = key_of(caller.as_ref());
    match hub.sessions.get(fleet, id, &key, mcp.session_ttl).await {
        Ok(Some(session)) if session.key == key => match hub.sessions.end(fleet, id, &key).await {
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
                initialize(&gateway, hub, mcp, caller.as_ref(), &id, &params).await
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
    let key = key_of(caller.as_ref());
    let session = match hub.sessions.get(fleet, &session_id, &key, mcp.session_ttl).await {
        Ok(Some(session)) if session.key == key => session,
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
    match crate::call::Method::of(&method) {
        Some(asked) => {
            // A tool call's agent run, looked for only when a group tracks runs.
            let run_id = match (&gateway.runs, asked) {
                (Some(_), crate::call::Method::CallTool) => match switchyard_state::runs::run_id(&parts.headers) {
                    Ok(id) => id.map(Box::from),
                    Err(bad) => return refusal(StatusCode::BAD_REQUEST, rpc::INVALID_REQUEST, &bad.info().message),
                },
                _ => None,
            };
            let wants_progress = params.get("_meta").and_then(|m| m.get("progressToken")).is_some();
            crate::call::call(
                gateway.clone(),
                caller.clone(),
                call.id,
                call.session,
                id,
                asked,
                params,
                call.passthrough,
                streams && wants_progress,
                run_id,
            )
            .await
        }
        None => call.answer(&id, &method).await,
    }
}

/// `initialize`: admitted on the key's chain as a request (its rate
/// limits count it), then a session bound to the key, within the key's
/// `mcp.sessions_per_key`.
async fn initialize(
    gateway: &Gateway,
    hub: &Hub,
    mcp: &Mcp,
    caller: Option<&Caller>,
    id: &Value,
    params: &Map<String, Value>,
) -> Response {
    if let (Some(governance), Some(caller)) = (&gateway.governance, caller) {
        match governance.admit_on_chain(caller, Estimate::bounded(0, 0), None).await {
            Ok(hold) => governance.settle(&hold, 0, 0),
            Err(denied) => {
                let status = StatusCode::from_u16(denied.info.status).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
                let data = denied.retry_after.map(|after| json!({ "retry_after": after }));
                let mut response = json_answer(status, &rpc::error(id, rpc::LIMITED, &denied.info.message, data));
                if let Some(after) = denied.retry_after.and_then(|after| HeaderValue::from_str(&after.to_string()).ok())
                {
                    response.headers_mut().insert(http::header::RETRY_AFTER, after);
                }
                return response;
            }
        }
    }
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = rpc::negotiate(asked);
    let session = Session { key: key_of(caller), version: version.to_owned(), ..Session::default() };
    let Some(session_id) = session::new_id() else {
        return refusal(StatusCode::SERVICE_UNAVAILABLE, rpc::INTERNAL_ERROR, "no randomness for a session id");
    };
    let fleet = gateway.fleet_state.as_deref();
    match hub.sessions.open(fleet, &session_id, &session, mcp.session_ttl, mcp.sessions_per_key).await {
        Ok(()) => {}
        Err(full @ SessionError::KeyFull(_)) => {
            return json_answer(StatusCode::TOO_MANY_REQUESTS, &rpc::error(id, rpc::LIMITED, &full.to_string(), None))
        }
        Err(err) => return refusal(StatusCode::SERVICE_UNAVAILABLE, rpc::INTERNAL_ERROR, &err.to_string()),
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
    let mut response = json_answer(StatusCode::OK, &rpc::result(id, result));
    if let Ok(value) = HeaderValue::from_str(&session_id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
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
    /// Answers a request other than `initialize` and those `call` runs.
    async fn answer(mut self, id: &Value, method: &str) -> Response {
        let before = self.session.upstream.clone();
        let answer = match method {
            "ping" | "logging/setLevel" => Ok(rpc::result(id, json!({}))),
            "tools/list" => self.list_tools().await.map(|tools| rpc::result(id, json!({ "tools": tools }))),
            "prompts/list" => self
                .list(Kind::Prompt, "prompts/list", "prompts", "name")
                .await
                .map(|p| rpc::result(id, json!({ "prompts": p }))),
            "resources/list" => self
                .list(Kind::Resource, "resources/list", "resources", "uri")
                .await
                .map(|r| rpc::result(id, json!({ "resources": r }))),
            "resources/templates/list" => self
                .list(Kind::Resource, "resources/templates/list", "resourceTemplates", "uriTemplate")
                .await
                .map(|r| rpc::result(id, json!({ "resourceTemplates": r }))),
            _ => Err(Failure::new(rpc::METHOD_NOT_FOUND, format!("Method not found: {method}"))),
        };
        if self.session.upstream != before {
            let fleet = self.gateway.fleet_state.as_deref();
            if let Err(err) = self.hub.sessions.keep(fleet, &self.id, &self.session).await {
                tracing::warn!(error = %err, "an MCP session's server sessions could not be kept");
            }
        }
        let answer = answer.unwrap_or_else(|failure| rpc::error(id, failure.code, &failure.message, failure.data));
        json_answer(StatusCode::OK, &answer)
    }

    /// The names whose `kind` this caller may reach something of, with
    /// their servers.
    fn routes(&self, kind: Kind) -> Vec<(Arc<str>, Vec<usize>)> {
        self.mcp
            .routes()
            .into_iter()
            .filter(|(route, _)| self.caller.is_none_or(|c| c.key.record.may_reach_mcp(kind, route)))
            .collect()
    }

    async fn list_tools(&mut self) -> Result<Vec<Value>, Failure> {
        let mut tools = Vec::new();
        for listed_route in self.routes(Kind::Tool) {
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

    /// Every reachable name's `items` (of `kind`), each item's `field`
    /// namespaced: those the caller's grants reach (a resource template
    /// names no one resource: the server's are listed to a caller granted
    /// any resource of it).
    async fn list(&mut self, kind: Kind, method: &str, items: &str, field: &str) -> Result<Vec<Value>, Failure> {
        let mut listed_items = Vec::new();
        let caller = self.caller;
        let granted = |route: &str, own: &str| match field {
            "uriTemplate" => true,
            _ => caller.is_none_or(|c| c.key.record.may_use_mcp(kind, route, own)),
        };
        for (route, members) in self.routes(kind) {
            match self.hub.list(self.mcp, &members, &mut self.session, self.passthrough.as_ref(), method, items).await {
                Ok((_, listed)) => listed_items.extend(listed.into_iter().filter_map(|mut item| {
                    let own = item.get(field)?.as_str()?.to_owned();
                    if !granted(&route, &own) {
                        return None;
                    }
                    let shown = match kind {
                        Kind::Resource => names::resource_uri(&route, &own),
                        Kind::Tool | Kind::Prompt => names::namespaced(&route, &own),
                    };
                    item.as_object_mut()?.insert(field.to_owned(), Value::String(shown));
                    Some(item)
                })),
                Err(failure) => {
                    tracing::warn!(route = %route, error = %failure.message, "an MCP name's {items} are not listed")
                }
            }
        }
        Ok(listed_items)
    }
}
