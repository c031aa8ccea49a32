//! Route-specific behaviour: path-named pools, the ad-hoc provider route,
//! both Gemini prefixes and framings, model rewriting and passthrough.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use common::*;
use switchyard_protocol::ir::Protocol;

#[tokio::test]
async fn anthropic_path_routes_name_the_pool_and_ignore_the_body_model() {
    let addr = gateway(&lanes_config("mock://")).await;
    let body = chat_body(Protocol::Anthropic, "ignored-model", "hi", false);
    let reply = post(addr, "/lane-openai/v1/messages", &[], body.clone()).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.headers["x-switchyard-lane"], "lane-openai");
    assert!(text_of(&decode(Protocol::Anthropic, false, &reply.body)).contains("[openai wire-openai]"));

    // The ad-hoc route is closed unless a provider opens it.
    let reply = post(addr, "/up-gemini/gemini-exp/v1/messages", &[], body).await;
    assert_eq!(reply.status, 404, "{}", String::from_utf8_lossy(&reply.body));
}

#[tokio::test]
async fn the_adhoc_route_is_opt_in_and_takes_the_engine_path() {
    let yaml = r#"
providers:
  any: { protocol: gemini, base_url: "mock://", adhoc: true }
  listed: { protocol: openai, base_url: "mock://", adhoc: [gpt-x] }
  closed: { protocol: openai, base_url: "mock://" }
"#;
    let addr = gateway(yaml).await;
    let body = chat_body(Protocol::Anthropic, "ignored", "hi", false);
    let reply = post(addr, "/any/gemini-exp/v1/messages", &[], body.clone()).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.headers["x-switchyard-lane"], "any/gemini-exp");
    assert!(text_of(&decode(Protocol::Anthropic, false, &reply.body)).contains("[gemini gemini-exp]"));
    let reply = post(addr, "/listed/gpt-x/v1/messages", &[], body.clone()).await;
    assert_eq!(reply.status, 200);
    assert!(text_of(&decode(Protocol::Anthropic, false, &reply.body)).contains("[openai gpt-x]"));
    for refused in ["/listed/gpt-y/v1/messages", "/closed/gpt-x/v1/messages", "/nobody/x/v1/messages"] {
        let reply = post(addr, refused, &[], body.clone()).await;
        assert_eq!(reply.status, 404, "{refused}");
    }
    // Ad-hoc lanes have breakers and counters like any other lane.
    let stats = stats(addr).await;
    let pools = stats["pools"].as_array().unwrap();
    let any = pools.iter().find(|p| p["pool"] == "any/*").unwrap();
    assert_eq!(any["lanes"][0]["ok"], 1);
    assert_eq!(any["lanes"][0]["breaker"], "closed");
    let listed = pools.iter().find(|p| p["pool"] == "listed/gpt-x").unwrap();
    assert_eq!(listed["lanes"][0]["ok"], 1);
}

#[tokio::test]
async fn gemini_under_both_prefixes_and_both_framings() {
    let addr = gateway(&lanes_config("mock://")).await;
    for prefix in ["/v1", "/v1beta"] {
        let body = chat_body(Protocol::Gemini, "", "hi", false);
        let reply = post(addr, &format!("{prefix}/models/lane-anthropic:generateContent"), &[], body.clone()).await;
        assert_eq!(reply.status, 200);
        assert!(text_of(&decode(Protocol::Gemini, false, &reply.body)).contains("you said: hi"));
        // Without alt=sse the stream is a JSON array, the SDK default.
        let reply =
            post(addr, &format!("{prefix}/models/lane-anthropic:streamGenerateContent"), &[], body.clone()).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.headers["content-type"], "application/json");
        assert_eq!(reply.body.first(), Some(&b'['));
        assert!(text_of(&decode(Protocol::Gemini, true, &reply.body)).contains("you said: hi"));
        let reply =
            post(addr, &format!("{prefix}/models/lane-anthropic:streamGenerateContent?alt=sse"), &[], body).await;
        assert_eq!(reply.headers["content-type"], "text/event-stream");
        assert!(text_of(&decode(Protocol::Gemini, true, &reply.body)).contains("you said: hi"));
    }
    // Same protocol, but the caller reads a JSON array while upstreams stream SSE.
    let reply = post(
        addr,
        "/v1beta/models/lane-gemini:streamGenerateContent",
        &[],
        chat_body(Protocol::Gemini, "", "hi", true),
    )
    .await;
    assert_eq!(reply.body.first(), Some(&b'['), "{}", String::from_utf8_lossy(&reply.body));
    assert!(text_of(&decode(Protocol::Gemini, true, &reply.body)).contains("you said: hi"));
    let reply = post(addr, "/v1beta/models/lane-anthropic:predict", &[], "{}").await;
    assert_eq!(reply.status, 404);
    // Counting is an action of its own; a body with nothing to count is the caller's 400.
    let reply = post(addr, "/v1beta/models/lane-anthropic:countTokens", &[], "{}").await;
    assert_eq!(reply.status, 400, "{}", String::from_utf8_lossy(&reply.body));
}

#[tokio::test]
async fn same_protocol_rewrites_only_the_model_and_echoes_headers() {
    let addr = gateway(&lanes_config("mock://")).await;
    let reply = post(
        addr,
        "/v1/chat/completions",
        &[("x-request-id", "req-42"), ("x-session-id", "s-1")],
        chat_body(Protocol::OpenAi, "mixed", "hi", false),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["x-request-id"], "req-42");
    assert_eq!(reply.headers["x-switchyard-session"], "s-1");
    assert!(reply.headers.contains_key("x-switchyard-billing"));
}

#[tokio::test]
async fn pools_spread_by_weight() {
    let yaml = format!("{}\n  weighted:\n    members:\n      - {{ model: lane-openai, weight: 3 }}\n      - {{ model: lane-cohere, weight: 1 }}\n", lanes_config("mock://"));
    let addr = gateway(&yaml).await;
    let mut openai = 0;
    for _ in 0..8 {
        let reply = post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "weighted", "hi", false)).await;
        if reply.headers["x-switchyard-lane"] == "lane-openai" {
            openai += 1;
        }
    }
    assert_eq!(openai, 6);
}

#[tokio::test]
async fn openai_callers_get_a_usage_chunk_only_when_they_ask() {
    let addr = gateway(&lanes_config("mock://")).await;
    for (options, expect_usage) in
        [(serde_json::Value::Null, false), (serde_json::json!({"include_usage": true}), true)]
    {
        let body = serde_json::json!({"model": "lane-anthropic", "stream": true, "stream_options": options,
            "messages": [{"role": "user", "content": "hi"}]});
        let reply = post(addr, "/v1/chat/completions", &[], body.to_string()).await;
        let text = String::from_utf8_lossy(&reply.body).to_string();
        assert_eq!(text.contains("\"choices\":[]"), expect_usage, "{text}");
        // The terminator, then the trailing comment that marks the usage.
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    }
}
