//! The authenticate stage: who is calling, from the credential its SDK
//! sends (a virtual key in `Authorization: Bearer`, `x-api-key`,
//! `x-goog-api-key` or `?key=`; or a SigV4 signature by a minted AWS
//! pair). A key carried in a header is checked before the body is read;
//! only a signature, which covers the body, waits for it. `None` on an open
//! data plane.
//!
//! A token from an identity provider is checked against the route it
//! opens (RFC 8707): with `/mcp` a protected resource (`mcp.oauth`), a
//! token whose audiences name only MCP resources (`/mcp`'s URI or a
//! route's under it) was minted for those and does not open the gateway's
//! other routes; `/mcp` checks its own audience (`mcp::oauth`).

use http::{HeaderMap, Uri};
use switchyard_governance::sigv4::Inbound;
use switchyard_ir::{ErrorInfo, Protocol};
use switchyard_state::governance::{Caller, Presented};
use switchyard_state::{ClientName, Gateway};

/// Whether the request is signed with SigV4 (its key is checked against
/// the body, so only after the body is read).
pub fn is_signed(headers: &HeaderMap) -> bool {
    headers.get(http::header::AUTHORIZATION).is_some_and(|v| v.as_bytes().starts_with(b"AWS4-HMAC-SHA256"))
}

/// Who is calling (governance's "authenticate" stage): `None` on an open
/// data plane. `client`: the verified client certificate, when the
/// listener names callers by it.
pub fn caller(
    gateway: &Gateway,
    protocol: Protocol,
    uri: &Uri,
    headers: &HeaderMap,
    client: Option<&ClientName>,
    body: &[u8],
) -> Result<Option<Caller>, ErrorInfo> {
    caller_of(gateway, protocol, "POST", uri, headers, client, body)
}

/// [`caller`] of a request made with `method` (a signature covers it; the
/// raw route takes any method).
pub fn caller_of(
    gateway: &Gateway,
    protocol: Protocol,
    method: &str,
    uri: &Uri,
    headers: &HeaderMap,
    client: Option<&ClientName>,
    body: &[u8],
) -> Result<Option<Caller>, ErrorInfo> {
    let Some(governance) = &gateway.governance else {
        return Ok(None);
    };
    let signed = is_signed(headers);
    let pairs: Vec<(&str, &[u8])> =
        if signed { headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())).collect() } else { Vec::new() };
    let inbound = signed.then(|| Inbound {
        method,
        path: uri.path(),
        query: uri.query(),
        headers: &pairs,
        authority: uri.authority().map(|a| a.as_str()),
        body,
    });
    let presented = Presented { protocol, headers, query: uri.query(), inbound, client };
    let caller = governance.authenticate(&presented)?;
    // Without `mcp.oauth` no token is bound to a resource: nothing to read.
    if let (Some(oauth), Some(caller)) = (gateway.config.mcp.as_ref().and_then(|m| m.oauth.as_ref()), &caller) {
        if caller.key.id.starts_with("jwt:") && !is_mcp_path(uri.path()) {
            let token = presented.token().unwrap_or_default();
            if !opens_other_routes(&gateway.config.jwt, &caller.key.id, token, &oauth.resource) {
                let message = format!(
                    "the token's audience names only the MCP resource ({}): it does not open this route (RFC 8707); \
                     ask the identity provider for a token for the gateway's audience",
                    oauth.resource
                );
                return Err(ErrorInfo::new(switchyard_ir::ErrorKind::Authentication, message));
            }
        }
    }
    Ok(caller)
}

/// Whether `path` is `/mcp` or a route under it (which check a token's
/// audience themselves).
fn is_mcp_path(path: &str) -> bool {
    path == "/mcp" || path.starts_with("/mcp/")
}

/// Whether `token`, which the issuer of key `key_id` (`jwt:<issuer>:<group>`)
/// vouched for, names one of that issuer's audiences that is not an MCP
/// resource (`resource` or a route under it).
fn opens_other_routes(issuers: &[switchyard_config::JwtIssuer], key_id: &str, token: &str, resource: &str) -> bool {
    let name = key_id.strip_prefix("jwt:").and_then(|rest| rest.split(':').next()).unwrap_or_default();
    let Some(issuer) = issuers.iter().find(|issuer| issuer.name == name) else { return false };
    let resource = resource.trim_end_matches('/');
    let is_mcp = |aud: &str| {
        let aud = aud.trim_end_matches('/');
        aud == resource || aud.strip_prefix(resource).is_some_and(|rest| rest.starts_with('/'))
    };
    switchyard_state::governance::jwt::audiences(token)
        .iter()
        .any(|aud| !is_mcp(aud) && issuer.audience.iter().any(|own| own == aud))
}

#[cfg(test)]
mod route_audience_tests {
    use super::*;

    /// A token's shape with `aud` (its signature is not what is read here).
    fn token(aud: serde_json::Value) -> String {
        const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let payload = serde_json::json!({ "iss": "https://idp.example", "aud": aud }).to_string();
        let mut encoded = String::new();
        for chunk in payload.as_bytes().chunks(3) {
            let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
            for i in 0..=chunk.len() {
                encoded.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            }
        }
        format!("e30.{encoded}.sig")
    }

    #[test]
    fn a_token_for_mcp_alone_opens_no_other_route() {
        let issuer = switchyard_config::JwtIssuer {
            name: "acme".into(),
            issuer: "https://idp.example".into(),
            jwks_url: "https://idp.example/jwks".into(),
            audience: vec!["switchyard".into(), "https://gw.example/mcp".into(), "https://gw.example/mcp/wiki".into()],
            group_claim: "team".into(),
            groups: None,
            subject_claim: "sub".into(),
            leeway: std::time::Duration::from_secs(30),
            pools: None,
            mcp: Vec::new(),
            passthrough: Vec::new(),
        };
        let issuers = [issuer];
        let opens = |aud: serde_json::Value| {
            opens_other_routes(&issuers, "jwt:acme:research", &token(aud), "https://gw.example/mcp")
        };
        assert!(opens(serde_json::json!("switchyard")));
        assert!(opens(serde_json::json!(["https://gw.example/mcp", "switchyard"])));
        assert!(!opens(serde_json::json!("https://gw.example/mcp")));
        assert!(!opens(serde_json::json!("https://gw.example/mcp/wiki")));
        assert!(!opens(serde_json::json!(["https://gw.example/mcp/", "https://other.example"])), "not its audience");
        assert!(!opens_other_routes(
            &issuers,
            "jwt:other:research",
            &token(serde_json::json!("switchyard")),
            "https://gw.example/mcp"
        ));
        assert!(
            is_mcp_path("/mcp")
                && is_mcp_path("/mcp/wiki")
                && !is_mcp_path("/mcpx")
                && !is_mcp_path("/v1/chat/completions")
        );
    }
}
