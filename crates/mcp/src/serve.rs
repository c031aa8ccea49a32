//! `/mcp` and `/mcp/<name>` (that name's servers only), streamable HTTP:
//! a POST carries one message, in either era.
//!
//! - **Handshake** (2025-11-25 and before): `initialize` opens a session,
//!   admitted as a request on the key's limits and within the key's
//!   `mcp.sessions_per_key`; its id (`mcp-session-id`) is a sealed handle
//!   bound to the route, the caller, the route's servers and an expiry
//!   (`handles`). Every later message names it; one that does not open
//!   here (another key's, another route's, expired, altered) or that this
//!   gateway forgot is a 404, as the protocol has clients start over.
//!   DELETE ends a session.
//! - **Stateless** (2026-07-28, named by `mcp-protocol-version`): no
//!   session; each request carries its version, client info and
//!   capabilities (`rpc::envelope` checks them against the headers).
//!   `server/discover` names the revisions served. The servers a caller
//!   reaches that keep sessions are reached in a session the gateway holds
//!   for the route and caller.
//!
//! Notifications are taken with a 202. The listing methods gather the
//! names the key's grants reach and list what they grant of each, a page
//! at a time when `mcp.handles.page_size` says (the cursor a sealed
//! handle too); a tool call, a prompt fetched or a resource read runs on
//! its own task (`call`). No stream is offered on GET (405).

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use serde_json::{json, Map, Value};
use switchyard_config::mcp::Mcp;
use switchyard_governance::mcp_grant::Kind;
use switchyard_governance::Estimate;
use switchyard_mcp_wire::handle::Kind as HandleKind;
use switchyard_state::governance::Caller;
use switchyard_state::Gateway;

use crate::handles::{self, Bound, Scope};
use crate::hub::{hub_of, Failure, Hub};
use crate::names;
use crate::reply::json_answer;
use crate::rpc::{self, Era};
use crate::session::{self, Session, SessionError};
use crate::upstream::http::{METHOD_HEADER, NAME_HEADER, SESSION_HEADER, VERSION_HEADER};

/// The largest message a caller may POST.
const MAX_MESSAGE_BYTES: usize = 4 << 20;

/// Held sessions are not counted against `mcp.sessions_per_key`: there is
/// one per route and caller, and a stateless caller cannot end one.
const HELD_CAP: usize = 1 << 40;

/// The header a caller's own token for `passthrough` servers rides in
/// (its `Authorization` is its Switchyard key).
pub const PASSTHROUGH_HEADER: HeaderName = HeaderName::from_static("x-switchyard-mcp-authorization");

/// An error not tied to a request (`id` null).
fn refusal(status: StatusCode, code: i64, message: &str) -> Response {
    json_answer(status, &rpc::error(&Value::Null, code, message, None))
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
    end(gateway, Scope::all(), request).await
}

/// `DELETE /mcp/<name>`.
pub async fn delete_named(State(gateway): State<Arc<Gateway>>, Path(name): Path<String>, request: Request) -> Response {
    end(gateway, Scope::named(&name), request).await
}

/// `POST /mcp`: one message.
pub async fn post(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    serve(gateway, Scope::all(), request).await
}

/// `POST /mcp/<name>`: one message, reaching that name's servers only.
pub async fn post_named(State(gateway): State<Arc<Gateway>>, Path(name): Path<String>, request: Request) -> Response {
    serve(gateway, Scope::named(&name), request).await
}

/// The hub and config, or the answer that there is none for `scope`.
fn fronted<'a>(gateway: &'a Gateway, scope: &Scope) -> Result<(&'a Hub, &'a Mcp), Response> {
    let (Some(hub), Some(mcp)) = (hub_of(gateway), &gateway.config.mcp) else {
        return Err(refusal(
            StatusCode::NOT_FOUND,
            rpc::METHOD_NOT_FOUND,
            "this gateway fronts no MCP servers (add `mcp:` to its config)",
        ));
    };
    if !scope.exists(mcp) {
        let message = format!("no MCP route `{}`: it names no server or pool", scope.path);
        return Err(refusal(StatusCode::NOT_FOUND, rpc::METHOD_NOT_FOUND, &message));
    }
    Ok((hub, mcp))
}

/// What a message's handles are bound to, or the answer that they cannot
/// be.
fn bound(hub: &Hub, mcp: &Mcp, scope: &Scope, caller: Option<&Caller>) -> Result<Bound, Response> {
    hub.handles
        .bound(mcp, scope, caller)
        .map_err(|failure| refusal(StatusCode::SERVICE_UNAVAILABLE, failure.code, &failure.message))
}

/// A session id that does not open here: 404, with why.
fn session_refused(refused: switchyard_mcp_wire::handle::Refused) -> Response {
    let message = format!("Session not found: the session id was refused ({refused})");
    json_answer(
        StatusCode::NOT_FOUND,
        &rpc::error(&Value::Null, rpc::HANDLE_REFUSED, &message, Some(handles::reason(refused))),
    )
}

/// The store's id of the session a handle names.
fn opened_session(bound: &Bound, handle: &str) -> Result<String, Response> {
    let payload = bound.open(HandleKind::Session, handle).map_err(session_refused)?;
    String::from_utf8(payload).map_err(|_| session_refused(switchyard_mcp_wire::handle::Refused::Forged))
}

async fn end(gateway: Arc<Gateway>, scope: Scope, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let (hub, mcp) = match fronted(&gateway, &scope) {
        Ok(found) => found,
        Err(refused) => return refused,
    };
    let caller = match crate::oauth::authenticate(&gateway, mcp, &scope, &parts) {
        Ok(caller) => caller,
        Err(refused) => return refused,
    };
    let Some(handle) = header(&parts.headers, &SESSION_HEADER) else {
        return refusal(StatusCode::BAD_REQUEST, rpc::INVALID_REQUEST, "Bad Request: Missing session ID");
    };
    let id = match bound(hub, mcp, &scope, caller.as_ref()).and_then(|bound| opened_session(&bound, handle)) {
        Ok(id) => id,
        Err(refused) => return refused,
    };
    let fleet = gateway.fleet_state.as_deref();
    let key = key_of(caller.as_ref());
    match hub.sessions.get(fleet, &id, &key, mcp.session_ttl).await {
        Ok(Some(session)) if session.key == key => match hub.sessions.end(fleet, &id, &key).await {
            Ok(()) => StatusCode::OK.into_response(),
            Err(err) => refusal(StatusCode::SERVICE_UNAVAILABLE, rpc::INTERNAL_ERROR, &err.to_string()),
        },
        Ok(_) => refusal(StatusCode::NOT_FOUND, rpc::INVALID_REQUEST, "Session not found"),
        Err(err) => refusal(StatusCode::SERVICE_UNAVAILABLE, rpc::INTERNAL_ERROR, &err.to_string()),
    }
}

async fn serve(gateway: Arc<Gateway>, scope: Scope, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let (hub, mcp) = match fronted(&gateway, &scope) {
        Ok(found) => found,
        Err(refused) => return refused,
    };
    let caller = match crate::oauth::authenticate(&gateway, mcp, &scope, &parts) {
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
    let bound = match bound(hub, mcp, &scope, caller.as_ref()) {
        Ok(bound) => bound,
        Err(refused) => return refused,
    };
    let headers = &parts.headers;
    let session_header = header(headers, &SESSION_HEADER);
    let probe = matches!(&message, rpc::Message::Request { method, .. } if method == "server/discover");
    let era = match rpc::era(header(headers, &VERSION_HEADER)) {
        // A probe without a session is the stateless era's, whatever its
        // headers say (the envelope check then says what is wrong).
        Era::Handshake if probe && session_header.is_none() => Era::Stateless,
        era => era,
    };
    let view = View { gateway: &gateway, hub, mcp, scope: &scope, caller: caller.as_ref(), bound, headers, era };
    match era {
        Era::Stateless => view.stateless(message).await,
        Era::Handshake => view.handshake(message, session_header).await,
    }
}

/// A message's view of the gateway: where it came, who sent it.
struct View<'a> {
    gateway: &'a Arc<Gateway>,
    hub: &'a Hub,
    mcp: &'a Mcp,
    scope: &'a Scope,
    caller: Option<&'a Caller>,
    bound: Bound,
    headers: &'a HeaderMap,
    era: Era,
}

impl View<'_> {
    async fn handshake(self, message: rpc::Message, session_header: Option<&str>) -> Response {
        let Some(handle) = session_header else {
            return match message {
                rpc::Message::Request { id, method, params } if method == "initialize" => {
                    if let Err(limited) = self.admit(&id).await {
                        return limited;
                    }
                    self.initialize(&id, &params).await
                }
                _ => refusal(StatusCode::BAD_REQUEST, rpc::INVALID_REQUEST, "Bad Request: Missing session ID"),
            };
        };
        if let Some(version) = header(self.headers, &VERSION_HEADER) {
            if !rpc::VERSIONS.contains(&version) {
                return refusal(
                    StatusCode::BAD_REQUEST,
                    rpc::INVALID_REQUEST,
                    "Bad Request: unsupported mcp-protocol-version",
                );
            }
        }
        let session_id = match opened_session(&self.bound, handle) {
            Ok(id) => id,
            Err(refused) => return refused,
        };
        let fleet = self.gateway.fleet_state.as_deref();
        let key = key_of(self.caller);
        let session = match self.hub.sessions.get(fleet, &session_id, &key, self.mcp.session_ttl).await {
            Ok(Some(session)) if session.key == key => session,
            Ok(_) => return refusal(StatusCode::NOT_FOUND, rpc::INVALID_REQUEST, "Session not found"),
            Err(err) => return refusal(StatusCode::SERVICE_UNAVAILABLE, rpc::INTERNAL_ERROR, &err.to_string()),
        };
        match message {
            rpc::Message::Request { id, method, params } => self.request(session_id, session, id, method, params).await,
            // Notifications (initialized, cancelled, progress) and answers
            // need nothing back.
            rpc::Message::Notification { .. } | rpc::Message::Response => StatusCode::ACCEPTED.into_response(),
        }
    }

    async fn stateless(self, message: rpc::Message) -> Response {
        let (id, method, params) = match message {
            rpc::Message::Request { id, method, params } => (id, method, params),
            // The revision defines no notification a client sends over
            // HTTP: taken and dropped, as its servers do.
            rpc::Message::Notification { .. } | rpc::Message::Response => {
                return StatusCode::ACCEPTED.into_response();
            }
        };
        let sent = rpc::Headers {
            version: header(self.headers, &VERSION_HEADER),
            method: header(self.headers, &METHOD_HEADER),
            name: header(self.headers, &NAME_HEADER),
        };
        if let Err(refused) = rpc::envelope(&method, &params, sent) {
            return json_answer(
                StatusCode::BAD_REQUEST,
                &rpc::error(&id, refused.code, &refused.message, refused.data),
            );
        }
        match method.as_str() {
            "server/discover" => {
                if let Err(limited) = self.admit(&id).await {
                    return limited;
                }
                let mut result = json!({
                    "supportedVersions": rpc::SUPPORTED,
                    "capabilities": capabilities(),
                    "serverInfo": server_info(),
                    "instructions": INSTRUCTIONS,
                });
                rpc::stamp_result("server/discover", &mut result);
                json_answer(StatusCode::OK, &rpc::result(&id, result))
            }
            "initialize" => json_answer(
                StatusCode::BAD_REQUEST,
                &rpc::error(
                    &id,
                    rpc::UNSUPPORTED_VERSION,
                    "initialize is not part of 2026-07-28 (send no mcp-protocol-version header to open a session)",
                    Some(json!({ "supported": rpc::VERSIONS, "requested": rpc::STATELESS })),
                ),
            ),
            _ => {
                let (held_id, session) = match self.held().await {
                    Ok(held) => held,
                    Err(refused) => return refused,
                };
                self.request(held_id, session, id, method, params).await
            }
        }
    }

    /// The session the gateway holds for this route and caller with the
    /// servers that keep sessions (a stateless caller has none to name).
    async fn held(&self) -> Result<(String, Session), Response> {
        let fleet = self.gateway.fleet_state.as_deref();
        let key = key_of(self.caller);
        let owner = self.caller.map(|c| &*c.owner).unwrap_or_default();
        let id = session::held_id(&self.scope.path, owner);
        match self.hub.sessions.get(fleet, &id, &key, self.mcp.session_ttl).await {
            Ok(Some(session)) if session.key == key => return Ok((id, session)),
            Ok(_) => {}
            Err(err) => return Err(refusal(StatusCode::SERVICE_UNAVAILABLE, rpc::INTERNAL_ERROR, &err.to_string())),
        }
        let session = Session { key, version: rpc::STATELESS.to_owned(), ..Session::default() };
        match self.hub.sessions.open(fleet, &id, &session, self.mcp.session_ttl, HELD_CAP).await {
            Ok(()) => Ok((id, session)),
            Err(err) => Err(refusal(StatusCode::SERVICE_UNAVAILABLE, rpc::INTERNAL_ERROR, &err.to_string())),
        }
    }

    /// A request in `session`: a call through `call`, the rest answered here.
    async fn request(
        self,
        session_id: String,
        session: Session,
        id: Value,
        method: String,
        params: Map<String, Value>,
    ) -> Response {
        let passthrough = self.headers.get(PASSTHROUGH_HEADER).cloned();
        let streams =
            header(self.headers, &http::header::ACCEPT).is_some_and(|accept| accept.contains("text/event-stream"));
        match crate::call::Method::of(&method) {
            Some(asked) => {
                // A tool call's agent run, looked for only when a group tracks runs.
                let run_id = match (&self.gateway.runs, asked) {
                    (Some(_), crate::call::Method::CallTool) => match switchyard_state::runs::run_id(self.headers) {
                        Ok(id) => id.map(Box::from),
                        Err(bad) => return refusal(StatusCode::BAD_REQUEST, rpc::INVALID_REQUEST, &bad.info().message),
                    },
                    _ => None,
                };
                let wants_progress = params.get("_meta").and_then(|m| m.get("progressToken")).is_some();
                let to = crate::call::Reached { only: self.scope.only.clone(), era: self.era };
                crate::call::call(
                    self.gateway.clone(),
                    self.caller.cloned(),
                    session_id,
                    session,
                    id,
                    asked,
                    params,
                    passthrough,
                    streams && wants_progress,
                    to,
                    run_id,
                )
                .await
            }
            None => {
                let call = Session_ {
                    gateway: self.gateway,
                    hub: self.hub,
                    mcp: self.mcp,
                    scope: self.scope,
                    caller: self.caller,
                    bound: &self.bound,
                    era: self.era,
                    passthrough,
                    id: session_id,
                    session,
                };
                call.answer(&id, &method, &params).await
            }
        }
    }

    /// `initialize` and `server/discover` are admitted on the key's chain
    /// as a request (its rate limits count them).
    async fn admit(&self, id: &Value) -> Result<(), Response> {
        let (Some(governance), Some(caller)) = (&self.gateway.governance, self.caller) else { return Ok(()) };
        match governance.admit_on_chain(caller, Estimate::bounded(0, 0), None).await {
            Ok(hold) => {
                governance.settle(&hold, 0, 0);
                Ok(())
            }
            Err(denied) => {
                let status = StatusCode::from_u16(denied.info.status).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
                let data = denied.retry_after.map(|after| json!({ "retry_after": after }));
                let mut response = json_answer(status, &rpc::error(id, rpc::LIMITED, &denied.info.message, data));
                if let Some(after) = denied.retry_after.and_then(|after| HeaderValue::from_str(&after.to_string()).ok())
                {
                    response.headers_mut().insert(http::header::RETRY_AFTER, after);
                }
                Err(response)
            }
        }
    }

    /// `initialize`: a session bound to the key, within the key's
    /// `mcp.sessions_per_key`, named by a sealed handle.
    async fn initialize(&self, id: &Value, params: &Map<String, Value>) -> Response {
        let asked = params.get("protocolVersion").and_then(Value::as_str);
        let version = rpc::negotiate(asked);
        let session = Session { key: key_of(self.caller), version: version.to_owned(), ..Session::default() };
        let minted =
            session::new_id().and_then(|inner| Some((self.bound.mint(HandleKind::Session, inner.as_bytes())?, inner)));
        let Some((handle, session_id)) = minted else {
            return refusal(StatusCode::SERVICE_UNAVAILABLE, rpc::INTERNAL_ERROR, "no randomness for a session id");
        };
        let fleet = self.gateway.fleet_state.as_deref();
        match self
            .hub
            .sessions
            .open(fleet, &session_id, &session, self.mcp.session_ttl, self.mcp.sessions_per_key)
            .await
        {
            Ok(()) => {}
            Err(full @ SessionError::KeyFull(_)) => {
                return json_answer(
                    StatusCode::TOO_MANY_REQUESTS,
                    &rpc::error(id, rpc::LIMITED, &full.to_string(), None),
                )
            }
            Err(err) => return refusal(StatusCode::SERVICE_UNAVAILABLE, rpc::INTERNAL_ERROR, &err.to_string()),
        }
        let result = json!({
            "protocolVersion": version,
            "capabilities": capabilities(),
            "serverInfo": server_info(),
            "instructions": INSTRUCTIONS,
        });
        let mut response = json_answer(StatusCode::OK, &rpc::result(id, result));
        if let Ok(value) = HeaderValue::from_str(&handle) {
            response.headers_mut().insert(SESSION_HEADER, value);
        }
        response
    }
}

const INSTRUCTIONS: &str = "Tools, prompts and resources of several servers, named `<server>__<name>`.";

fn capabilities() -> Value {
    json!({
        "tools": { "listChanged": false },
        "prompts": { "listChanged": false },
        "resources": { "listChanged": false, "subscribe": false },
        "logging": {},
    })
}

fn server_info() -> Value {
    json!({ "name": "switchyard", "version": env!("CARGO_PKG_VERSION") })
}

/// One message's view of its session.
struct Session_<'a> {
    gateway: &'a Gateway,
    hub: &'a Hub,
    mcp: &'a Mcp,
    scope: &'a Scope,
    caller: Option<&'a Caller>,
    bound: &'a Bound,
    era: Era,
    passthrough: Option<HeaderValue>,
    id: String,
    session: Session,
}

/// Each list's tag in its cursors (a cursor of one list is refused by
/// another).
fn list_tag(method: &str) -> u8 {
    match method {
        "tools/list" => 1,
        "prompts/list" => 2,
        "resources/list" => 3,
        _ => 4,
    }
}

impl Session_<'_> {
    /// Answers a request other than `initialize` and those `call` runs.
    async fn answer(mut self, id: &Value, method: &str, params: &Map<String, Value>) -> Response {
        let before = self.session.upstream.clone();
        let listed = match method {
            "ping" | "logging/setLevel" => Ok(None),
            "tools/list" => self.list_tools().await.map(|tools| Some(("tools", tools))),
            "prompts/list" => {
                self.list(Kind::Prompt, "prompts/list", "prompts", "name").await.map(|p| Some(("prompts", p)))
            }
            "resources/list" => {
                self.list(Kind::Resource, "resources/list", "resources", "uri").await.map(|r| Some(("resources", r)))
            }
            "resources/templates/list" => self
                .list(Kind::Resource, "resources/templates/list", "resourceTemplates", "uriTemplate")
                .await
                .map(|r| Some(("resourceTemplates", r))),
            _ => Err(Failure::new(rpc::METHOD_NOT_FOUND, format!("Method not found: {method}"))),
        };
        if self.session.upstream != before {
            let fleet = self.gateway.fleet_state.as_deref();
            if let Err(err) = self.hub.sessions.keep(fleet, &self.id, &self.session).await {
                tracing::warn!(error = %err, "an MCP session's server sessions could not be kept");
            }
        }
        let cursor = params.get("cursor").and_then(Value::as_str);
        let answer = listed.and_then(|listed| match listed {
            None => Ok(json!({})),
            Some((items, all)) => self.page(method, items, all, cursor),
        });
        let answer = match answer {
            Ok(mut result) => {
                if self.era == Era::Stateless {
                    rpc::stamp_result(method, &mut result);
                }
                rpc::result(id, result)
            }
            Err(failure) => rpc::error(id, failure.code, &failure.message, failure.data),
        };
        json_answer(StatusCode::OK, &answer)
    }

    /// One page of a listing: from the offset `cursor` carries (a handle
    /// minted for this list, route and caller), `mcp.handles.page_size`
    /// long, with the next page's cursor when there is more.
    fn page(&self, method: &str, items: &str, mut all: Vec<Value>, cursor: Option<&str>) -> Result<Value, Failure> {
        let tag = list_tag(method);
        let start = match cursor {
            None => 0,
            Some(cursor) => {
                let refused = |refused| Failure {
                    code: rpc::INVALID_PARAMS,
                    message: format!("Invalid cursor: the cursor was refused ({refused})"),
                    data: Some(handles::reason(refused)),
                };
                let payload = self.bound.open(HandleKind::Cursor, cursor).map_err(refused)?;
                handles::cursor_offset(tag, &payload)
                    .ok_or_else(|| refused(switchyard_mcp_wire::handle::Refused::OtherKind))?
            }
        };
        let end = self.mcp.handles.page_size.map_or(all.len(), |size| all.len().min(start.saturating_add(size)));
        let start = start.min(end);
        let rest = all.split_off(end);
        let page: Vec<Value> = all.drain(start..).collect();
        let mut result = Map::new();
        result.insert(items.to_owned(), Value::Array(page));
        if !rest.is_empty() {
            let next = self
                .bound
                .mint(HandleKind::Cursor, &handles::cursor_payload(tag, end))
                .ok_or_else(|| Failure::new(rpc::INTERNAL_ERROR, "no randomness for a cursor"))?;
            result.insert("nextCursor".into(), Value::String(next));
        }
        Ok(Value::Object(result))
    }

    /// The names whose `kind` this caller may reach something of on this
    /// route, with their servers.
    fn routes(&self, kind: Kind) -> Vec<(Arc<str>, Vec<usize>)> {
        self.scope
            .routes(self.mcp)
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
