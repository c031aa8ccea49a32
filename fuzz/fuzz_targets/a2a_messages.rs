//! What the A2A gateway reads from callers and agents: a POSTed request
//! (and the task and push URLs it names), an agent's card rewritten for
//! callers, and an agent's answer or stream event (text parts, the task it
//! names, the cost it reports).
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_a2a_wire::{card, message, rpc};

fuzz_target!(|data: &[u8]| {
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
