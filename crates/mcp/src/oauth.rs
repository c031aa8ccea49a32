//! `/mcp` as an OAuth 2.1 protected resource (`mcp.oauth`): its metadata
//! (RFC 9728) at `/.well-known/oauth-protected-resource/mcp` (and
//! `…/mcp/<name>` for a route of one name), a 401 pointing at it in
//! `WWW-Authenticate` (`resource_metadata`), and the audience of a
//! caller's token (RFC 8707): a token from an identity provider
//! (`auth.jwt`) opens `/mcp` only when its `aud` names this resource (the
//! route's own URI or `/mcp`'s), so a token minted for another resource,
//! or for the gateway's model routes alone, is refused here. A virtual key
//! is the gateway's own credential and names no audience. Without
//! `mcp.oauth` none of this runs.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Response;
use http::{HeaderValue, StatusCode};
use serde_json::{json, Value};
use switchyard_config::mcp::{Mcp, McpOauth};
use switchyard_ir::Protocol;
use switchyard_state::governance::Caller;
use switchyard_state::Gateway;

use crate::handles::Scope;
use crate::reply::json_answer;
use crate::rpc;

/// Where the metadata of a resource at a host's root lives (RFC 9728 §3);
/// a resource with a path has it appended.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// `GET /.well-known/oauth-protected-resource[/mcp]`.
pub async fn metadata(State(gateway): State<Arc<Gateway>>) -> Response {
    metadata_of(&gateway, &Scope::all())
}

/// `GET /.well-known/oauth-protected-resource/mcp/<name>`.
pub async fn metadata_named(State(gateway): State<Arc<Gateway>>, Path(name): Path<String>) -> Response {
    metadata_of(&gateway, &Scope::named(&name))
}

fn metadata_of(gateway: &Gateway, scope: &Scope) -> Response {
    let Some((mcp, oauth)) = gateway.config.mcp.as_ref().and_then(|mcp| Some((mcp, mcp.oauth.as_ref()?))) else {
        let body = json!({ "error": "not_found", "error_description": "/mcp is not an OAuth protected resource here (mcp.oauth)" });
        return json_answer(StatusCode::NOT_FOUND, &body);
    };
    if !scope.exists(mcp) {
        let body = json!({ "error": "not_found", "error_description": format!("no MCP route `{}`", scope.path) });
        return json_answer(StatusCode::NOT_FOUND, &body);
    }
    let mut body = json!({
        "resource": resource_of(oauth, scope),
        "authorization_servers": oauth.authorization_servers,
        "bearer_methods_supported": ["header"],
        "resource_name": "Switchyard MCP gateway",
    });
    if !oauth.scopes.is_empty() {
        body["scopes_supported"] = json!(oauth.scopes);
    }
    json_answer(StatusCode::OK, &body)
}

/// The resource URI of `scope`: `mcp.oauth.resource`, or it and `/<name>`.
fn resource_of(oauth: &McpOauth, scope: &Scope) -> String {
    match &scope.only {
        None => oauth.resource.clone(),
        Some(name) => format!("{}/{name}", oauth.resource.trim_end_matches('/')),
    }
}

/// Where `scope`'s metadata is: the resource's origin, the well-known
/// path, the resource's path (RFC 9728 §3.1).
fn metadata_url(oauth: &McpOauth, scope: &Scope) -> String {
    let resource = resource_of(oauth, scope);
    let after_scheme = resource.find("://").map_or(0, |at| at + 3);
    let path_at = resource[after_scheme..].find('/').map_or(resource.len(), |at| after_scheme + at);
    let (origin, path) = resource.split_at(path_at);
    let path = path.split(['?', '#']).next().unwrap_or_default();
    format!("{origin}{METADATA_PATH}{}", path.trim_end_matches('/'))
}

/// A 401 (or the status given) with `WWW-Authenticate` naming the
/// metadata (and `error` when a token was refused).
fn unauthorized(
    status: StatusCode,
    message: &str,
    oauth: Option<(&McpOauth, &Scope)>,
    error: Option<&str>,
) -> Response {
    let mut response = json_answer(status, &rpc::error(&Value::Null, rpc::FORBIDDEN, message, None));
    if let (StatusCode::UNAUTHORIZED, Some((oauth, scope))) = (status, oauth) {
        let mut challenge = String::from("Bearer ");
        if let Some(error) = error {
            let description = message.replace(['"', '\\'], "'");
            challenge.push_str(&format!("error=\"{error}\", error_description=\"{description}\", "));
        }
        challenge.push_str(&format!("resource_metadata=\"{}\"", metadata_url(oauth, scope)));
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(http::header::WWW_AUTHENTICATE, value);
        }
    }
    response
}

/// The caller of a message on `scope`, or the answer refusing it.
pub(crate) fn authenticate(
    gateway: &Gateway,
    mcp: &Mcp,
    scope: &Scope,
    request: &http::request::Parts,
) -> Result<Option<Caller>, Response> {
    let client = request.extensions.get::<switchyard_state::ClientName>();
    let oauth = mcp.oauth.as_ref().map(|oauth| (oauth, scope));
    let caller =
        switchyard_engine::authenticate::caller(gateway, Protocol::OpenAi, &request.uri, &request.headers, client, &[])
            .map_err(|info| {
                let status = StatusCode::from_u16(info.status).unwrap_or(StatusCode::UNAUTHORIZED);
                unauthorized(status, &info.message, oauth, None)
            })?;
    if let (Some((oauth, scope)), Some(caller)) = (oauth, &caller) {
        if caller.key.id.starts_with("jwt:") {
            // The token where authentication found it: the bearer, or the
            // key headers some SDKs send it in.
            let header = |name: &str| request.headers.get(name).and_then(|v| v.to_str().ok());
            let token = header("authorization")
                .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
                .or_else(|| header("x-api-key"))
                .or_else(|| header("x-goog-api-key"))
                .map(str::trim)
                .unwrap_or_default();
            let audiences = switchyard_state::governance::jwt::audiences(token);
            let own = resource_of(oauth, scope);
            if !audiences.iter().any(|aud| *aud == own || *aud == oauth.resource) {
                let message = format!("the token's audience does not name this MCP resource ({own})");
                return Err(unauthorized(
                    StatusCode::UNAUTHORIZED,
                    &message,
                    Some((oauth, scope)),
                    Some("invalid_token"),
                ));
            }
        }
    }
    Ok(caller)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_url_inserts_the_well_known_path() {
        let oauth =
            McpOauth { resource: "https://gw.example/mcp".into(), authorization_servers: vec![], scopes: vec![] };
        assert_eq!(metadata_url(&oauth, &Scope::all()), "https://gw.example/.well-known/oauth-protected-resource/mcp");
        assert_eq!(
            metadata_url(&oauth, &Scope::named("tickets")),
            "https://gw.example/.well-known/oauth-protected-resource/mcp/tickets"
        );
        assert_eq!(resource_of(&oauth, &Scope::named("tickets")), "https://gw.example/mcp/tickets");
        let root = McpOauth { resource: "http://127.0.0.1:8080".into(), ..oauth };
        assert_eq!(metadata_url(&root, &Scope::all()), "http://127.0.0.1:8080/.well-known/oauth-protected-resource");
    }
}
