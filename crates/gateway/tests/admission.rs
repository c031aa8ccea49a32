//! What admission reads of a request, over real TCP: every member it reads
//! is named once (a body that names one twice is refused, as one naming
//! `model` twice is), every number is bounded and multiplied the way the
//! vendor bills it (`n`, `candidateCount`), and inline media counts as
//! media only in the protocol's own media members.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

use common::*;
use serde_json::json;
use switchyard_protocol::codec;
use switchyard_protocol::ir::{ErrorKind, Protocol};

/// Every protocol's lane, priced at $0.001 an input token and $0.002 an
/// output token, behind keys.
fn priced() -> String {
    let mut yaml = lanes_config("mock://");
    yaml.push_str("rate_card:\n");
    for p in Protocol::ALL {
        yaml.push_str(&format!("  lane-{p}: {{ input_utok: 1000, output_utok: 2000 }}\n"));
    }
    yaml.push_str("auth: { mode: keys }\ngovernance: { ledger_flush_interval: 20ms }\n");
    yaml
}

async fn send(addr: std::net::SocketAddr, protocol: Protocol, key: &str, body: String) -> Reply {
    let auth = format!("Bearer {key}");
    let headers: Vec<(&str, &str)> = match protocol {
        Protocol::Anthropic => vec![("x-api-key", key)],
        Protocol::Gemini => vec![("x-goog-api-key", key)],
        _ => vec![("authorization", auth.as_str())],
    };
    post(addr, &ingress_path(protocol, &format!("lane-{protocol}"), false), &headers, body).await
}

fn kind(protocol: Protocol, reply: &Reply) -> ErrorKind {
    codec(protocol).extract_error(reply.status.as_u16(), &reply.body).kind
}

#[tokio::test]
async fn a_member_admission_reads_named_twice_is_refused() {
    let (addr, _) = governed(&priced()).await;
    let key = create_key(addr, json!({"name": "k", "budget": {"usd": 10.0, "window": "1d"}})).await;
    let key = key["key"].as_str().unwrap();
    // Small first, large last: a scanner stopping at the first would
    // reserve for 1 token while the upstream, keeping the last, writes 100000.
    let twice = [
        (Protocol::OpenAi, r#"{"model":"lane-openai","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"max_tokens":100000}"#.to_owned()),
        (Protocol::OpenAi, r#"{"model":"lane-openai","n":1,"messages":[{"role":"user","content":"hi"}],"n":100}"#.to_owned()),
        (Protocol::Anthropic, r#"{"model":"lane-anthropic","max_tokens":1,"max_tokens":100000,"messages":[{"role":"user","content":"hi"}]}"#.to_owned()),
        (Protocol::Gemini, r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":1,"maxOutputTokens":100000}}"#.to_owned()),
        (Protocol::Gemini, r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":1},"generationConfig":{"maxOutputTokens":100000}}"#.to_owned()),
        (Protocol::Bedrock, r#"{"messages":[{"role":"user","content":[{"text":"hi"}]}],"inferenceConfig":{"maxTokens":1,"maxTokens":100000}}"#.to_owned()),
    ];
    for (protocol, body) in twice {
        let reply = send(addr, protocol, key, body.clone()).await;
        assert_eq!(reply.status, 400, "{protocol} {body}: {}", String::from_utf8_lossy(&reply.body));
        assert_eq!(kind(protocol, &reply), ErrorKind::InvalidRequest, "{protocol}");
        assert!(String::from_utf8_lossy(&reply.body).contains("more than once"), "{protocol}");
    }
    // Named once, each is served.
    let once = r#"{"model":"lane-openai","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}"#;
    assert_eq!(send(addr, Protocol::OpenAi, key, once.to_owned()).await.status, 200);
}

#[tokio::test]
async fn each_reply_asked_for_is_reserved_for() {
    let (addr, _) = governed(&priced()).await;
    // $10 fits one reply of 500 tokens ($1), not a hundred ($100).
    let key = create_key(addr, json!({"name": "k", "budget": {"usd": 10.0, "window": "1d"}})).await;
    let key = key["key"].as_str().unwrap();
    let openai = |n: u32| {
        format!(r#"{{"model":"lane-openai","max_tokens":500,"n":{n},"messages":[{{"role":"user","content":"hi"}}]}}"#)
    };
    let gemini = |n: u32| {
        format!(
            r#"{{"contents":[{{"role":"user","parts":[{{"text":"hi"}}]}}],"generationConfig":{{"maxOutputTokens":500,"candidateCount":{n}}}}}"#
        )
    };
    for (protocol, body) in [(Protocol::OpenAi, openai(100)), (Protocol::Gemini, gemini(100))] {
        let reply = send(addr, protocol, key, body).await;
        assert_eq!(
            kind(protocol, &reply),
            ErrorKind::QuotaExceeded,
            "{protocol}: {}",
            String::from_utf8_lossy(&reply.body)
        );
    }
    for (protocol, body) in [(Protocol::OpenAi, openai(1)), (Protocol::Gemini, gemini(1))] {
        let reply = send(addr, protocol, key, body).await;
        assert_eq!(reply.status, 200, "{protocol}: {}", String::from_utf8_lossy(&reply.body));
    }
}

#[tokio::test]
async fn text_is_reserved_as_text_and_media_only_in_media_members() {
    let (addr, _) = governed(&priced()).await;
    // $10 fits an image (2,000 tokens: $2) but not 300 KB of text (about
    // 100,000 tokens: $100).
    let key = create_key(addr, json!({"name": "k", "budget": {"usd": 10.0, "window": "1d"}})).await;
    let key = key["key"].as_str().unwrap();
    let words = vec!["lorem"; 50_000].join("-");
    let text = json!({"model": "lane-openai", "max_tokens": 10, "messages": [{"role": "user", "content": words}]});
    let reply = send(addr, Protocol::OpenAi, key, text.to_string()).await;
    assert_eq!(kind(Protocol::OpenAi, &reply), ErrorKind::QuotaExceeded, "{}", String::from_utf8_lossy(&reply.body));
    let image = json!({"model": "lane-openai", "max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{}", "QUJD".repeat(75_000))}},
    ]}]});
    let reply = send(addr, Protocol::OpenAi, key, image.to_string()).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
}
