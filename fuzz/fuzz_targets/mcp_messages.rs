//! What the MCP gateway reads from callers and servers: a POSTed message,
//! a server's message on a request's stream, namespaced names and URIs,
//! and the schema digest of whatever a server lists as a tool.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_mcp_wire::{names, pin, rpc};

fuzz_target!(|data: &[u8]| {
    if let Ok(rpc::Message::Request { id, method, params }) = rpc::parse(data) {
        // An answer to any request is a valid message of its own.
        let answer = rpc::error(&id, rpc::METHOD_NOT_FOUND, &method, None);
        assert!(matches!(rpc::parse(answer.to_string().as_bytes()), Ok(rpc::Message::Response)));
        let tool = serde_json::Value::Object(params);
        let digest = pin::digest(&tool);
        assert_eq!(digest.len(), 64);
        assert_eq!(pin::digest(&tool), digest, "a digest is a function of the tool");
    }
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = rpc::classify(value);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Some((route, own)) = names::split(text) {
            assert_eq!(names::namespaced(route, own), text);
        }
        if let Some((route, own)) = names::split_uri(text) {
            assert_eq!(names::resource_uri(route, own), text);
        }
    }
});
