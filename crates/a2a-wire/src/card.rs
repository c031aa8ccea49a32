//! An agent's card as callers of the gateway get it: every way to reach
//! the agent points at the gateway's JSON-RPC endpoint for it, and nothing
//! of the agent's own access is left to mislead a caller.
//!
//! - A2A 1.0 cards list `supportedInterfaces` (`url`, `protocolBinding`,
//!   `protocolVersion`, `tenant`): the JSON-RPC ones are kept with the
//!   gateway's URL, one per protocol version; the others (HTTP+JSON, gRPC)
//!   are dropped, as the gateway serves JSON-RPC only. None left: one is
//!   added.
//! - A2A 0.3 cards name `url` with `preferredTransport` and
//!   `additionalInterfaces` (`url`, `transport`): the same, in that shape.
//! - The agent's `securitySchemes` and requirements are its own
//!   credential's, which the gateway holds: callers are told to present a
//!   gateway key as a bearer token instead (skills' requirements go too).
//! - `signatures` signed the agent's card, which this no longer is.
//! - An extended card is not offered (it would name the agent's own URLs).

use serde_json::{json, Map, Value};

/// The name of the gateway's security scheme in a rewritten card.
pub const SCHEME: &str = "switchyard";

/// The most interfaces a rewritten card keeps.
const MAX_INTERFACES: usize = 8;

/// `card` rewritten to be reached at `endpoint` (the gateway's
/// `/a2a/{agent}`, absolute); `None` when it is not a JSON object.
pub fn rewrite(card: &Value, endpoint: &str) -> Option<Value> {
    let mut card = card.as_object()?.clone();
    let v1 = card.contains_key("supportedInterfaces") || !card.contains_key("url");
    if v1 {
        let mut kept: Vec<Value> = Vec::new();
        if let Some(Value::Array(interfaces)) = card.get("supportedInterfaces") {
            for interface in interfaces {
                let Some(interface) = interface.as_object() else { continue };
                let binding = interface.get("protocolBinding").and_then(Value::as_str).unwrap_or_default();
                if !binding.eq_ignore_ascii_case("JSONRPC") {
                    continue;
                }
                let version = interface.get("protocolVersion").cloned().unwrap_or(Value::Null);
                if kept.iter().any(|k| k.get("protocolVersion").cloned().unwrap_or(Value::Null) == version) {
                    continue;
                }
                let mut interface = interface.clone();
                interface.insert("url".into(), Value::String(endpoint.to_owned()));
                interface.insert("protocolBinding".into(), Value::String("JSONRPC".into()));
                kept.push(Value::Object(interface));
                if kept.len() == MAX_INTERFACES {
                    break;
                }
            }
        }
        if kept.is_empty() {
            kept.push(json!({ "url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "1.0" }));
        }
        card.insert("supportedInterfaces".into(), Value::Array(kept));
    }
    if card.contains_key("url") {
        card.insert("url".into(), Value::String(endpoint.to_owned()));
        card.insert("preferredTransport".into(), Value::String("JSONRPC".into()));
        let interfaces = card.get("additionalInterfaces").and_then(Value::as_array).map(|interfaces| {
            interfaces
                .iter()
                .filter(|i| {
                    i.get("transport").and_then(Value::as_str).is_some_and(|t| t.eq_ignore_ascii_case("JSONRPC"))
                })
                .take(1)
                .map(|_| json!({ "url": endpoint, "transport": "JSONRPC" }))
                .collect::<Vec<_>>()
        });
        match interfaces {
            Some(interfaces) => card.insert("additionalInterfaces".into(), Value::Array(interfaces)),
            None => card.remove("additionalInterfaces"),
        };
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
        assert_eq!(interfaces.len(), 2, "one JSON-RPC interface per version: {interfaces:?}");
        assert!(interfaces.iter().all(|i| i["url"] == AT && i["protocolBinding"] == "JSONRPC"));
        assert_eq!(interfaces[0]["tenant"], "t", "a tenant is the agent's routing: kept");
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
        assert_eq!(interfaces, json!([{"url": AT, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]));
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
        assert_eq!(rewritten["additionalInterfaces"], json!([{"url": AT, "transport": "JSONRPC"}]));
        assert_eq!(rewritten["security"], json!([{SCHEME: []}]));
        assert_eq!(rewritten["securitySchemes"][SCHEME]["scheme"], "bearer");
        assert_eq!(rewritten["supportsAuthenticatedExtendedCard"], false);
        assert!(rewritten.get("supportedInterfaces").is_none());
        assert!(!rewritten.to_string().contains("10.0.0.9"));
    }
}
