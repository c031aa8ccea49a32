//! What the A2A gateway reads from callers and agents: a POSTed request
//! (and the task and push URLs it names), an agent's card rewritten for
//! callers, and an agent's answer or stream event (text parts, the task it
//! names, the cost it reports); and the HTTP+JSON binding's requests (a
//! method, a path, a query and a body read as the JSON-RPC request they
//! ask, and that request sent on to an agent of the binding), its answers
//! and errors both ways.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_a2a_wire::{card, message, rest, rpc};

/// The HTTP methods a caller may use, picked by the first byte.
const HTTP: [&str; 4] = ["GET", "POST", "DELETE", "PUT"];

fuzz_target!(|data: &[u8]| {
    // An HTTP+JSON request: `method byte, path \n query \n body`.
    if let Some((&pick, rest_of)) = data.split_first() {
        let mut lines = rest_of.splitn(3, |&b| b == b'\n');
        let path = lines.next().and_then(|p| std::str::from_utf8(p).ok()).unwrap_or("/");
        let query = lines.next().and_then(|q| std::str::from_utf8(q).ok());
        let body = lines.next().unwrap_or_default();
        if let Ok(read) = rest::inbound(HTTP[usize::from(pick) % HTTP.len()], path, query, body) {
            // What is sent on to an agent of the binding never steps out
            // of the segment an id is in.
            if let Ok(out) = rest::outbound(read.method, read.version, &read.params) {
                let path = out.path.split('?').next().unwrap_or_default();
                assert!(path.split('/').all(|segment| segment != ".." && segment != "."), "{path}");
            }
        }
        if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) {
            // Any answer converts both ways; any error gets a status.
            for version in [rpc::Version::V1, rpc::Version::V03] {
                let result = rest::result_of(version, rpc::Method::Stream, value.clone());
                let _ = rest::body_of(version, rpc::Method::Send, result);
            }
            let status = rest::status_of(&value, u16::from(pick) * 3);
            assert!((400..600).contains(&status), "{status}");
            let _ = rest::error_body(&value, status);
            let _ = rest::rpc_error_of(&value, status);
        }
    }
    if let Ok(request) = rpc::parse(data) {
        // An answer to any request is one of its own.
        let answer = rpc::error(&request.id, rpc::METHOD_NOT_FOUND, &request.method);
        assert_eq!(answer["id"], request.id);
        if let Some((method, version)) = rpc::Method::of(&request.method) {
            let _ = method.task(version, &request.params);
        }
        let _ = message::push_urls(&request.params);
    }
    if let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(data) {
        const AT: &str = "https://gw.example/a2a/agent";
        if let Some(rewritten) = card::rewrite(&value, AT) {
            // Every interface a rewritten card offers is the gateway's.
            for interface in rewritten["supportedInterfaces"].as_array().into_iter().flatten() {
                assert_eq!(interface["url"], AT);
            }
            if rewritten.get("url").is_some() {
                assert_eq!(rewritten["url"], AT);
            }
            assert!(rewritten.get("signatures").is_none());
        }
        let _ = message::task_of(&value);
        if let Some(cost) = message::reported_cost(&value) {
            assert!(cost <= (message::MAX_COST_USD * 1e9) as u64);
        }
        // Masking every text part leaves no text part unmasked.
        let masked: Result<(), ()> = message::rewrite_text_parts(&mut value, &mut |_| Ok(Some("x".to_owned())));
        assert!(masked.is_ok());
        let _: Result<(), ()> = message::rewrite_text_parts(&mut value, &mut |text| {
            assert_eq!(text, "x");
            Ok(None)
        });
    }
});
