//! The commit point (`docs/guarantees.md`) over real TCP, in every caller
//! dialect: a stream that broke after its first content and whose
//! continuation cannot be proven ends with the caller's own terminal
//! error, never with a success ending. The vendor fake's `cut-` lane
//! breaks off (`[mock:cut=N]`); asked by instruction to go on, its
//! `restart-` lane starts its answer again in its own words (each lane's
//! answer names the lane) and its `unrelated-` lane answers something else.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

use common::*;
use switchyard_protocol::ir::Protocol;

const CONFIG: &str = "providers:\n  claude: { protocol: anthropic, base_url: \"mock://\" }\n  \
     gpt: { protocol: openai, base_url: \"mock://\" }\n\
     models:\n  cut-claude: { provider: claude }\n  restart-gpt: { provider: gpt }\n  \
     unrelated-gpt: { provider: gpt }\n\
     pools:\n  restart:\n    failover: { stream_failure: continue }\n    \
     breaker: { consecutive_failures: 100000, min_requests: 100000 }\n    \
     members: [{ model: cut-claude, weight: 1000000 }, { model: restart-gpt, weight: 1 }]\n  \
     unrelated:\n    failover: { stream_failure: continue }\n    \
     breaker: { consecutive_failures: 100000, min_requests: 100000 }\n    \
     members: [{ model: cut-claude, weight: 1000000 }, { model: unrelated-gpt, weight: 1 }]\n";

/// What a dialect's stream shows for its terminal error, and what only a
/// stream that ended whole carries.
fn contract(ingress: Protocol) -> (&'static str, &'static str) {
    match ingress {
        Protocol::OpenAi => ("\"error\"", "[DONE]"),
        Protocol::Responses => ("response.failed", "response.completed"),
        Protocol::Anthropic => ("event: error", "message_stop"),
        Protocol::Gemini => ("\"error\"", "finishReason"),
        Protocol::Cohere => ("\"finish_reason\":\"ERROR\"", "COMPLETE"),
        Protocol::Bedrock => ("exception", "messageStop"),
    }
}

/// Each dialect's own continuation that cannot be proven ends with its
/// terminal error after the broken lane's 12 bytes, with nothing of the
/// continuation relayed; each is counted `unrelated`. A restart that
/// repeats the answer word for word (`[mock:plain]`) is proven, counted
/// `restarted`, and read whole.
#[tokio::test]
async fn an_unprovable_continuation_ends_with_the_callers_error_in_every_dialect() {
    let addr = gateway(CONFIG).await;
    for ingress in Protocol::ALL {
        for pool in ["restart", "unrelated"] {
            let reply =
                post(addr, &ingress_path(ingress, pool, true), &[], chat_body(ingress, pool, "[mock:cut=12] hi", true))
                    .await;
            assert_eq!(reply.status, 200, "{ingress} {pool}");
            let text = String::from_utf8_lossy(&reply.body);
            let (error, whole) = contract(ingress);
            assert!(text.contains(error), "{ingress} {pool}: the terminal error: {text}");
            assert!(!text.contains(whole), "{ingress} {pool}: no success ending: {text}");
            assert!(text.contains("did not continue it where it stopped"), "{ingress} {pool}: {text}");
            for continued in ["gpt", "Sure!", "something else"] {
                assert!(!text.contains(continued), "{ingress} {pool}: the continuation was relayed: {text}");
            }
        }
    }
    let answer = "The quick brown fox jumps over the lazy dog, twice, then sleeps in the warm afternoon sun.";
    let asked = format!("[mock:plain] [mock:cut=60] {answer}");
    let reply = post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "restart", &asked, true)).await;
    let text = String::from_utf8_lossy(&reply.body);
    let pieces: String = text
        .split("\n\n")
        .filter_map(|frame| frame.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<serde_json::Value>(data).ok())
        .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(pieces, answer, "{text}");
    assert!(text.contains("[DONE]"), "{text}");
    let metrics = get_with(admin(addr), "/metrics", &[("authorization", &format!("Bearer {ADMIN_TOKEN}"))]).await;
    let metrics = String::from_utf8_lossy(&metrics.body);
    for counted in [
        format!("switchyard_stream_continuations_total{{outcome=\"unrelated\"}} {}", 2 * Protocol::ALL.len()),
        "switchyard_stream_continuations_total{outcome=\"restarted\"} 1".to_owned(),
    ] {
        assert!(metrics.contains(&counted), "{counted} in\n{metrics}");
    }
}
