//! An agent's card as callers of the gateway get it: every way to reach
//! the agent points at the gateway's endpoint for it (JSON-RPC and
//! HTTP+JSON, both served at `/a2a/{agent}`), and nothing of the agent's
//! own access is left to mislead a caller; and which binding the gateway
//! speaks to the agent ([`upstream_binding`]).
//!
//! - A2A 1.0 cards list `supportedInterfaces` (`url`, `protocolBinding`,
//!   `protocolVersion`, `tenant`): for each protocol version (and tenant)
//!   the card offers over JSON-RPC or HTTP+JSON, the gateway's URL is
//!   listed over JSON-RPC, then over HTTP+JSON (JSON-RPC first: a client
//!   that takes the first interface it supports keeps the binding it had).
//!   gRPC ones are dropped, as the gateway does not serve gRPC. None
//!   left: 1.0 over both is added.
//! - A2A 0.3 cards name `url` with `preferredTransport` and
//!   `additionalInterfaces` (`url`, `transport`): `url` is the gateway's
//!   over JSON-RPC, and both bindings are listed as additional interfaces.
//! - The agent's `securitySchemes` and requirements are its own
//!   credential's, which the gateway holds: callers are told to present a
//!   gateway key as a bearer token instead (skills' requirements go too).
//! - `signatures` signed the agent's card, which this no longer is.
//! - An extended card is not offered (it would name the agent's own URLs).

use serde_json::{json, Map, Value};

/// The name of the gateway's security scheme in a rewritten card.
pub const SCHEME: &str = "switchyard";

/// The most interfaces a rewritten card lists.
const MAX_INTERFACES: usize = 8;
/// A2A's name of the JSON-RPC binding.
const JSONRPC: &str = "JSONRPC";
/// A2A's name of the HTTP+JSON binding.
const HTTP_JSON: &str = "HTTP+JSON";

/// The binding the gateway speaks to an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Served {
    /// JSON-RPC, at the agent's configured URL.
    JsonRpc,
    /// HTTP+JSON, under this base URL.
    Rest(String),
}

/// The binding to speak to the agent configured at `url` whose card is
/// `card`: JSON-RPC whenever the card offers it (or names no binding the
/// gateway speaks), else HTTP+JSON. Its base is the card's interface URL
/// when that is on the configured URL's origin, else the configured URL:
/// a card never sends the gateway to a host the operator did not name.
pub fn upstream_binding(card: &Value, url: &str) -> Served {
    let mut offered: Vec<(&str, Option<&str>)> = Vec::new();
    if let Some(Value::Array(interfaces)) = card.get("supportedInterfaces") {
        for interface in interfaces {
            let binding = interface.get("protocolBinding").and_then(Value::as_str).unwrap_or_default();
            offered.push((binding, interface.get("url").and_then(Value::as_str)));
        }
    }
    if card.get("url").is_some() {
        let preferred = card.get("preferredTransport").and_then(Value::as_str).unwrap_or(JSONRPC);
        offered.push((preferred, card.get("url").and_then(Value::as_str)));
        if let Some(Value::Array(interfaces)) = card.get("additionalInterfaces") {
            for interface in interfaces {
                let transport = interface.get("transport").and_then(Value::as_str).unwrap_or_default();
                offered.push((transport, interface.get("url").and_then(Value::as_str)));
            }
        }
    }
    if offered.iter().any(|(binding, _)| binding.eq_ignore_ascii_case(JSONRPC)) {
        return Served::JsonRpc;
    }
    match offered.iter().find(|(binding, _)| binding.eq_ignore_ascii_case(HTTP_JSON)) {
        Some((_, Some(at))) if origin(at).is_some() && origin(at) == origin(url) => {
            Served::Rest(at.trim_end_matches('/').to_owned())
        }
        Some(_) => Served::Rest(url.trim_end_matches('/').to_owned()),
        None => Served::JsonRpc,
    }
}

/// `scheme://authority` of `url`, lower-cased.
fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    Some(format!("{scheme}://{authority}").to_ascii_lowercase())
}

/// `card` rewritten to be reached at `endpoint` (the gateway's
/// `/a2a/{agent}`, absolute); `None` when it is not a JSON object.
pub fn rewrite(card: &Value, endpoint: &str) -> Option<Value> {
    let mut card = card.as_object()?.clone();
    let v1 = card.contains_key("supportedInterfaces") || !card.contains_key("url");
    if v1 {
        // Each (version, tenant) the card offers over a binding the gateway
        // serves, in the card's order.
        let mut offered: Vec<Map<String, Value>> = Vec::new();
        if let Some(Value::Array(interfaces)) = card.get("supportedInterfaces") {
            for interface in interfaces {
                let Some(interface) = interface.as_object() else { continue };
                let binding = interface.get("protocolBinding").and_then(Value::as_str).unwrap_or_default();
                if !binding.eq_ignore_ascii_case(JSONRPC) && !binding.eq_ignore_ascii_case(HTTP_JSON) {
                    continue;
                }
                let mut kept = interface.clone();
                kept.remove("protocolBinding");
                kept.insert("url".into(), Value::String(endpoint.to_owned()));
                if !offered.contains(&kept) && offered.len() < MAX_INTERFACES / 2 {
                    offered.push(kept);
                }
            }
        }
        if offered.is_empty() {
            let mut kept = Map::new();
            kept.insert("url".into(), Value::String(endpoint.to_owned()));
            kept.insert("protocolVersion".into(), Value::String("1.0".into()));
            offered.push(kept);
        }
        let mut listed = Vec::with_capacity(offered.len() * 2);
        for binding in [JSONRPC, HTTP_JSON] {
            for interface in &offered {
                let mut interface = interface.clone();
                interface.insert("protocolBinding".into(), Value::String(binding.into()));
                listed.push(Value::Object(interface));
            }
        }
        card.insert("supportedInterfaces".into(), Value::Array(listed));
    }
    if card.contains_key("url") {
        card.insert("url".into(), Value::String(endpoint.to_owned()));
        card.insert("preferredTransport".into(), Value::String(JSONRPC.into()));
        card.insert(
            "additionalInterfaces".into(),
            json!([{ "url": endpoint, "transport": JSONRPC }, { "url": endpoint, "transport": HTTP_JSON }]),
        );
    }
    // Access is the gateway's: a key as a bearer token.
    card.remove("signatures");
    card.remove("security");
    card.remove("securityRequirements");
    let mut schemes = Map::new();
    if v1 {
        schemes.insert(
            SCHEME.into(),
            json!({ "httpAuthSecurityScheme": { "scheme": "Bearer", "description": "a Switchyard API key" } }),
        );
        card.insert("securityRequirements".into(), json!([{ "schemes": { SCHEME: { "list": [] } } }]));
    } else {
        schemes.insert(
            SCHEME.into(),
            json!({ "type": "http", "scheme": "bearer", "description": "a Switchyard API key" }),
        );
        card.insert("security".into(), json!([{ SCHEME: [] }]));
    }
    card.insert("securitySchemes".into(), Value::Object(schemes));
    if let Some(Value::Array(skills)) = card.get_mut("skills") {
        for skill in skills.iter_mut().filter_map(Value::as_object_mut) {
            skill.remove("security");
            skill.remove("securityRequirements");
        }
    }
    if let Some(capabilities) = card.get_mut("capabilities").and_then(Value::as_object_mut) {
        capabilities.insert("extendedAgentCard".into(), Value::Bool(false));
    }
    if card.contains_key("supportsAuthenticatedExtendedCard") {
        card.insert("supportsAuthenticatedExtendedCard".into(), Value::Bool(false));
    }
    Some(Value::Object(card))
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: &str = "https://gw.example/a2a/research";

    #[test]
    fn a_v1_card_is_reached_through_the_gateway_over_json_rpc_only() {
        let card = json!({
            "name": "Research", "version": "2",
            "supportedInterfaces": [
                {"url": "http://10.0.0.9:9100/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
                {"url": "http://10.0.0.9:9100/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0", "tenant": "t"},
                {"url": "http://10.0.0.9:9101/", "protocolBinding": "jsonrpc", "protocolVersion": "1.0"},
                {"url": "http://10.0.0.9:9102/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                {"url": "10.0.0.9:9103", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            ],
            "capabilities": {"streaming": true, "pushNotifications": true, "extendedAgentCard": true},
            "securitySchemes": {"internal": {"apiKeySecurityScheme": {"name": "x-agent-key", "location": "header"}}},
            "securityRequirements": [{"schemes": {"internal": {"list": []}}}],
            "skills": [{"id": "s", "name": "s", "securityRequirements": [{"schemes": {"internal": {"list": []}}}]}],
            "signatures": [{"protected": "x", "signature": "y"}],
        });
        let rewritten = rewrite(&card, AT).unwrap_or_default();
        let text = rewritten.to_string();
        assert!(!text.contains("10.0.0.9") && !text.contains("internal"), "{text}");
        let interfaces = rewritten["supportedInterfaces"].as_array().cloned().unwrap_or_default();
        let listed: Vec<_> = interfaces
            .iter()
            .map(|i| (i["protocolBinding"].as_str(), i["protocolVersion"].as_str(), i["tenant"].as_str()))
            .collect();
        assert_eq!(
            listed,
            [
                (Some("JSONRPC"), Some("1.0"), None),
                (Some("JSONRPC"), Some("1.0"), Some("t")),
                (Some("JSONRPC"), Some("0.3"), None),
                (Some("HTTP+JSON"), Some("1.0"), None),
                (Some("HTTP+JSON"), Some("1.0"), Some("t")),
                (Some("HTTP+JSON"), Some("0.3"), None),
            ],
            "each version and tenant over both bindings, gRPC dropped: {interfaces:?}"
        );
        assert!(interfaces.iter().all(|i| i["url"] == AT));
        assert_eq!(rewritten["securitySchemes"][SCHEME]["httpAuthSecurityScheme"]["scheme"], "Bearer");
        assert_eq!(rewritten["securityRequirements"][0]["schemes"][SCHEME], json!({"list": []}));
        assert!(rewritten.get("signatures").is_none());
        assert_eq!(
            rewritten["capabilities"],
            json!({"streaming": true, "pushNotifications": true, "extendedAgentCard": false})
        );
        assert_eq!(rewritten["name"], "Research");
    }

    #[test]
    fn a_card_with_no_json_rpc_interface_gets_the_gateways() {
        let rewritten = rewrite(&json!({"name": "n", "supportedInterfaces": [{"protocolBinding": "GRPC"}, 7]}), AT);
        let interfaces = rewritten.map(|c| c["supportedInterfaces"].clone()).unwrap_or_default();
        assert_eq!(
            interfaces,
            json!([
                {"url": AT, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": AT, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            ])
        );
        assert!(rewrite(&json!(["not", "a", "card"]), AT).is_none());
    }

    #[test]
    fn a_v03_card_keeps_its_shape() {
        let card = json!({
            "name": "Old", "url": "http://10.0.0.9:9100/", "preferredTransport": "GRPC",
            "additionalInterfaces": [{"url": "http://10.0.0.9:9100/", "transport": "JSONRPC"}, {"url": "x", "transport": "GRPC"}],
            "securitySchemes": {"internal": {"type": "apiKey", "in": "header", "name": "k"}},
            "security": [{"internal": []}],
            "supportsAuthenticatedExtendedCard": true,
        });
        let rewritten = rewrite(&card, AT).unwrap_or_default();
        assert_eq!(rewritten["url"], AT);
        assert_eq!(rewritten["preferredTransport"], "JSONRPC");
        assert_eq!(
            rewritten["additionalInterfaces"],
            json!([{"url": AT, "transport": "JSONRPC"}, {"url": AT, "transport": "HTTP+JSON"}])
        );
        assert_eq!(rewritten["security"], json!([{SCHEME: []}]));
        assert_eq!(rewritten["securitySchemes"][SCHEME]["scheme"], "bearer");
        assert_eq!(rewritten["supportsAuthenticatedExtendedCard"], false);
        assert!(rewritten.get("supportedInterfaces").is_none());
        assert!(!rewritten.to_string().contains("10.0.0.9"));
    }

    #[test]
    fn the_agent_is_spoken_json_rpc_to_when_it_can_be_and_rest_on_its_own_origin() {
        let url = "http://10.0.0.9:9100/a2a";
        let both = json!({"supportedInterfaces": [
            {"url": "http://10.0.0.9:9100/rest", "protocolBinding": "HTTP+JSON"},
            {"url": "http://10.0.0.9:9100/a2a", "protocolBinding": "JSONRPC"}]});
        assert_eq!(upstream_binding(&both, url), Served::JsonRpc);
        let rest =
            json!({"supportedInterfaces": [{"url": "http://10.0.0.9:9100/rest/", "protocolBinding": "HTTP+JSON"}]});
        assert_eq!(upstream_binding(&rest, url), Served::Rest("http://10.0.0.9:9100/rest".into()));
        // A card naming another host is not followed there.
        let elsewhere =
            json!({"supportedInterfaces": [{"url": "http://169.254.169.254/", "protocolBinding": "HTTP+JSON"}]});
        assert_eq!(upstream_binding(&elsewhere, url), Served::Rest(url.into()));
        let v03 = json!({"url": "http://10.0.0.9:9100/v", "preferredTransport": "HTTP+JSON"});
        assert_eq!(upstream_binding(&v03, url), Served::Rest("http://10.0.0.9:9100/v".into()));
        assert_eq!(upstream_binding(&json!({"url": "http://10.0.0.9:9100/v"}), url), Served::JsonRpc, "0.3's default");
        assert_eq!(
            upstream_binding(&json!({"supportedInterfaces": [{"protocolBinding": "GRPC"}]}), url),
            Served::JsonRpc
        );
    }
}
