//! What the MCP gateway reads from callers and servers: a POSTed message
//! and its 2026-07-28 envelope (against headers taken from the same
//! bytes), a server's message on a request's stream, namespaced names and
//! URIs, `mcp-name` header values, a handle a caller sends back (never
//! opened unless minted, and never twice the same), and the schema digest
//! of whatever a server lists as a tool.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_mcp_wire::handle::{self, Binding, Kind, Sealer};
use switchyard_mcp_wire::{names, pin, rpc};

fuzz_target!(|data: &[u8]| {
    if let Ok(rpc::Message::Request { id, method, params }) = rpc::parse(data) {
        // An answer to any request is a valid message of its own.
        let answer = rpc::error(&id, rpc::METHOD_NOT_FOUND, &method, None);
        assert!(matches!(rpc::parse(answer.to_string().as_bytes()), Ok(rpc::Message::Response)));
        // The envelope, with headers that agree with the body and with
        // ones taken from the body's bytes: refused or accepted, never a
        // panic; accepted only at the stateless revision.
        let text = std::str::from_utf8(data).unwrap_or_default();
        let agreeing = rpc::Headers { version: Some(rpc::STATELESS), method: Some(&method), name: None };
        for headers in [agreeing, rpc::Headers { version: Some(text), method: Some(text), name: Some(text) }] {
            if let Ok(version) = rpc::envelope(&method, &params, headers) {
                assert_eq!(version, rpc::STATELESS);
            }
        }
        let mut stripped = params.clone();
        rpc::strip_envelope(&mut stripped);
        rpc::stamp_envelope(&mut stripped, &serde_json::json!({"name": "fuzz"}));
        assert!(rpc::envelope(&method, &stripped, agreeing).is_ok() || rpc::name_member(&method).is_some());
        let tool = serde_json::Value::Object(params);
        let digest = pin::digest(&tool);
        assert_eq!(digest.len(), 64);
        assert_eq!(pin::digest(&tool), digest, "a digest is a function of the tool");
    }
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = rpc::classify(value);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        // Any name survives the header and comes back whole.
        assert_eq!(rpc::decode_header_value(&rpc::encode_header_value(text)).as_deref(), Some(text));
        let _ = rpc::decode_header_value(text);
        // A handle a caller made up never opens; one minted opens once
        // with its payload and not for another caller.
        if let Some(sealer) = Sealer::new(b"fuzzing secret, thirty-two bytes or more") {
            let servers = handle::servers_digest([("s", "http://s/mcp")]);
            let here = Binding { route: "/mcp", caller: "key", servers: &servers };
            assert!(sealer.open(Kind::Session, text, here, 0).is_err());
            // The gateway's payloads are short; a handle past 1 KiB is not opened.
            if data.len() <= 512 {
                let minted = sealer.seal(Kind::Cursor, here, 10, data, [3; 12]);
                assert_eq!(sealer.open(Kind::Cursor, &minted, here, 9).as_deref(), Ok(data));
                let other = Binding { caller: text, ..here };
                assert_eq!(sealer.open(Kind::Cursor, &minted, other, 9).is_ok(), text == "key");
            }
        }
        if let Some((route, own)) = names::split(text) {
            assert_eq!(names::namespaced(route, own), text);
        }
        if let Some((route, own)) = names::split_uri(text) {
            assert_eq!(names::resource_uri(route, own), text);
        }
    }
});
