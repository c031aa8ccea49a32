//! The HTTP side of `/a2a/{agent}`: who calls (the caller's key, as every
//! route reads it), which agent, and the answers that are not the agent's.
//! `GET /a2a/{agent}/.well-known/agent-card.json` serves the agent's card
//! rewritten to point here (to a key granted the agent); `POST
//! /a2a/{agent}` takes one JSON-RPC request and hands it to `call`. An
//! error is a JSON-RPC error answered with 200, as A2A servers answer
//! theirs (the SDKs read a non-2xx as a transport failure), but for a
//! caller with no valid key (401) and an agent the config does not name
//! (404). Every other path under `/a2a/{agent}/` is the HTTP+JSON
//! binding's ([`rest`]): read as the JSON-RPC request it asks and handed
//! to the same `call`, its answers and refusals in that binding's shape
//! and statuses.

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::response::Response;
use http::StatusCode;
use serde_json::{json, Map, Value};
use switchyard_a2a_wire::{card, rest, rpc};
use switchyard_config::agents::Agent;
use switchyard_ir::Protocol;
use switchyard_state::governance::Caller;
use switchyard_state::Gateway;

use crate::answer::json_answer;
use crate::call::Binding;
use crate::hub::hub_of;

/// The largest request a caller may POST.
const MAX_REQUEST_BYTES: usize = 4 << 20;

/// The configured agent `name`, or the 404 saying there is none.
fn agent_of(gateway: &Gateway, name: &str) -> Result<Agent, Refusal> {
    let Some(agents) = &gateway.config.agents else {
        return Err(Refusal(
            StatusCode::NOT_FOUND,
            rpc::error(
                &Value::Null,
                rpc::METHOD_NOT_FOUND,
                "this gateway fronts no agents (add `agents:` to its config)",
            ),
        ));
    };
    agents.get(name).cloned().ok_or_else(|| {
        Refusal(StatusCode::NOT_FOUND, rpc::error(&Value::Null, rpc::METHOD_NOT_FOUND, &format!("no agent `{name}`")))
    })
}

/// A refusal before any call: its status and its JSON-RPC answer, given
/// in the caller's binding.
struct Refusal(StatusCode, Value);

impl Refusal {
    /// As JSON-RPC answers it.
    fn rpc(self) -> Response {
        json_answer(self.0, &self.1)
    }

    /// As the HTTP+JSON binding answers it, its status and message kept.
    fn rest(self) -> Response {
        json_answer(self.0, &rest::error_body(&self.1["error"], self.0.as_u16()))
    }
}

/// The caller, or the 401 refusing it.
fn authenticate(gateway: &Gateway, parts: &http::request::Parts) -> Result<Option<Caller>, Refusal> {
    let client = parts.extensions.get::<switchyard_state::ClientName>();
    switchyard_engine::authenticate::caller_of(
        gateway,
        Protocol::OpenAi,
        parts.method.as_str(),
        &parts.uri,
        &parts.headers,
        client,
        &[],
    )
    .map_err(|info| {
        let status = StatusCode::from_u16(info.status).unwrap_or(StatusCode::UNAUTHORIZED);
        let mut metadata = Map::new();
        metadata.insert("status".into(), Value::from(info.status));
        Refusal(status, rpc::refusal(&Value::Null, rpc::FORBIDDEN, &info.message, "UNAUTHENTICATED", metadata))
    })
}

/// Where callers reach `agent` here: the gateway's scheme, the host they
/// asked for (a host name, an address and a port only), and the path.
fn endpoint(gateway: &Gateway, parts: &http::request::Parts, agent: &str) -> Option<String> {
    let host = parts
        .headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| parts.uri.authority().map(|a| a.as_str()))?;
    let plain = !host.is_empty()
        && host.len() <= 255
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    let scheme = if gateway.config.server.tls.is_some() { "https" } else { "http" };
    plain.then(|| format!("{scheme}://{host}/a2a/{agent}"))
}

/// `GET /a2a/{agent}/.well-known/agent-card.json`.
pub async fn card(State(gateway): State<Arc<Gateway>>, Path(name): Path<String>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let agent = match agent_of(&gateway, &name) {
        Ok(agent) => agent,
        Err(refused) => return refused.rpc(),
    };
    let caller = match authenticate(&gateway, &parts) {
        Ok(caller) => caller,
        Err(refused) => return refused.rpc(),
    };
    if caller.as_ref().is_some_and(|c| !c.key.record.may_call_agent(&agent.name)) {
        // Not granted: as though there were no such agent.
        return json_answer(
            StatusCode::NOT_FOUND,
            &rpc::error(&Value::Null, rpc::METHOD_NOT_FOUND, &format!("no agent `{name}`")),
        );
    }
    let Some(endpoint) = endpoint(&gateway, &parts, &agent.name) else {
        return json_answer(StatusCode::BAD_REQUEST, &rpc::error(&Value::Null, rpc::INVALID_REQUEST, "no plain Host"));
    };
    let Some(hub) = hub_of(&gateway) else {
        return json_answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            &rpc::error(&Value::Null, rpc::INTERNAL_ERROR, "no hub"),
        );
    };
    match hub.card(&agent).await.map(|read| card::rewrite(&read, &endpoint)) {
        Ok(Some(card)) => json_answer(StatusCode::OK, &card),
        Ok(None) => json_answer(
            StatusCode::BAD_GATEWAY,
            &rpc::error(&Value::Null, rpc::INVALID_AGENT_RESPONSE, "the agent's card is not an object"),
        ),
        Err(message) => json_answer(StatusCode::BAD_GATEWAY, &rpc::error(&Value::Null, rpc::INTERNAL_ERROR, &message)),
    }
}

/// Any other method and path under `/a2a/{agent}/`: the HTTP+JSON
/// binding's requests (1.0's, and 0.3's under `/v1`).
pub async fn rest(
    State(gateway): State<Arc<Gateway>>,
    Path((name, _)): Path<(String, String)>,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let agent = match agent_of(&gateway, &name) {
        Ok(agent) => agent,
        Err(refused) => return refused.rest(),
    };
    let caller = match authenticate(&gateway, &parts) {
        Ok(caller) => caller,
        Err(refused) => return refused.rest(),
    };
    let refuse = |status: StatusCode, code: i64, message: &str| {
        let error = json!({ "code": code, "message": message });
        json_answer(status, &rest::error_body(&error, status.as_u16()))
    };
    let Ok(body) = axum::body::to_bytes(body, MAX_REQUEST_BYTES).await else {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, rpc::INVALID_REQUEST, "the request is larger than 4 MiB");
    };
    // The path as sent (still percent-encoded): `Path` decodes it, which
    // would let `%2F` pass for a separator.
    let raw = parts.uri.path();
    let prefix = raw.find(&format!("/a2a/{name}/")).map(|at| at + 6 + name.len());
    let path = match prefix {
        Some(at) => &raw[at - 1..],
        None => return refuse(StatusCode::NOT_FOUND, rpc::METHOD_NOT_FOUND, "no such route"),
    };
    let inbound = match rest::inbound(parts.method.as_str(), path, parts.uri.query(), &body) {
        Ok(inbound) => inbound,
        Err(refused) => {
            let error = json!({ "code": refused.code, "message": refused.message });
            let status = rest::status_of(&error, 400);
            let code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
            let version = if path.starts_with("/v1/") { rpc::Version::V03 } else { rpc::Version::V1 };
            return json_answer(code, &rest::error_body_in(version, &error, status));
        }
    };
    let request = rpc::Request {
        id: Value::String("rest".into()),
        method: inbound.method.name(inbound.version).to_owned(),
        params: inbound.params,
    };
    let binding = Binding::Rest(inbound.version, inbound.method);
    crate::call::call(gateway, caller, agent, request, parts.headers, body.len(), binding).await
}

/// `POST /a2a/{agent}`: one request.
pub async fn post(State(gateway): State<Arc<Gateway>>, Path(name): Path<String>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let agent = match agent_of(&gateway, &name) {
        Ok(agent) => agent,
        Err(refused) => return refused.rpc(),
    };
    let caller = match authenticate(&gateway, &parts) {
        Ok(caller) => caller,
        Err(refused) => return refused.rpc(),
    };
    let Ok(body) = axum::body::to_bytes(body, MAX_REQUEST_BYTES).await else {
        return json_answer(
            StatusCode::PAYLOAD_TOO_LARGE,
            &rpc::error(&Value::Null, rpc::INVALID_REQUEST, "the request is larger than 4 MiB"),
        );
    };
    let request = match rpc::parse(&body) {
        Ok(request) => request,
        Err(unreadable) => {
            return json_answer(StatusCode::OK, &rpc::error(&Value::Null, unreadable.code, unreadable.message))
        }
    };
    crate::call::call(gateway, caller, agent, request, parts.headers, body.len(), Binding::JsonRpc).await
}
