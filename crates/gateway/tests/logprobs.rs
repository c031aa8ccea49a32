//! Log probabilities and several replies across protocols over real TCP:
//! an OpenAI caller's `logprobs`, `top_logprobs` and `n` reach a Gemini
//! lane as `responseLogprobs`, `logprobs` and `candidateCount` and come
//! back as `choices[].logprobs.content`, whole and streamed; a Gemini
//! caller's reach an OpenAI lane; a lane without them reports them (and
//! refuses under strict); a reasoning model is not sent them; what OpenAI
//! refuses reaches the caller as OpenAI's 400.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use common::*;
use serde_json::{json, Value};

const CONFIG: &str = r#"
providers:
  gpt: { protocol: openai, base_url: "mock://" }
  gem: { protocol: gemini, base_url: "mock://" }
  co: { protocol: cohere, base_url: "mock://" }
  claude: { protocol: anthropic, base_url: "mock://" }
models:
  gpt: { provider: gpt, model: gpt-4o }
  o3: { provider: gpt, model: o3 }
  gemini: { provider: gem, model: gemini-2.5-flash }
  command: { provider: co, model: command-a-03-2025 }
  sonnet: { provider: claude, model: claude-sonnet-4-5 }
"#;

fn chat(model: &str, extra: Value) -> Vec<u8> {
    let mut body = json!({"model": model, "messages": [{"role": "user", "content": "say hi"}]});
    for (key, value) in extra.as_object().unwrap() {
        body[key] = value.clone();
    }
    serde_json::to_vec(&body).unwrap()
}

#[tokio::test]
async fn openai_logprobs_and_n_reach_a_gemini_lane_and_come_back() {
    let addr = gateway(CONFIG).await;
    let asked = json!({"logprobs": true, "top_logprobs": 2, "n": 2});
    let reply = post(addr, "/v1/chat/completions", &[], chat("gemini", asked)).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert!(!reply.headers.contains_key("x-switchyard-dropped"), "{:?}", reply.headers);
    let body: Value = serde_json::from_slice(&reply.body).unwrap();
    let choices = body["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 2, "{body}");
    assert_eq!(choices[1]["index"], 1);
    assert!(choices[1]["message"]["content"].as_str().unwrap().ends_with("(choice 1)"), "{body}");
    for choice in choices {
        let tokens = choice["logprobs"]["content"].as_array().unwrap();
        let text: String = tokens.iter().map(|t| t["token"].as_str().unwrap()).collect();
        assert_eq!(text, choice["message"]["content"].as_str().unwrap(), "the tokens make the text");
        assert!(tokens.iter().all(|t| t["logprob"].as_f64().unwrap() <= 0.0));
        assert_eq!(tokens[0]["top_logprobs"].as_array().unwrap().len(), 2);
        assert_eq!(tokens[0]["bytes"], json!(tokens[0]["token"].as_str().unwrap().as_bytes()));
    }
}

#[tokio::test]
async fn streamed_logprobs_cross_and_a_streamed_n_is_reported() {
    let addr = gateway(CONFIG).await;
    let asked = json!({"logprobs": true, "top_logprobs": 1, "stream": true});
    let reply = post(addr, "/v1/chat/completions", &[], chat("gemini", asked)).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    let text = String::from_utf8_lossy(&reply.body);
    let mut tokens = String::new();
    let mut content = String::new();
    for data in text.lines().filter_map(|line| line.strip_prefix("data: ")).filter(|d| *d != "[DONE]") {
        let chunk: Value = serde_json::from_str(data).unwrap();
        for choice in chunk["choices"].as_array().unwrap() {
            content.push_str(choice["delta"]["content"].as_str().unwrap_or_default());
            for token in choice["logprobs"]["content"].as_array().into_iter().flatten() {
                tokens.push_str(token["token"].as_str().unwrap());
                assert_eq!(token["top_logprobs"].as_array().unwrap().len(), 1);
            }
        }
    }
    assert!(!content.is_empty());
    assert_eq!(tokens, content, "every streamed token arrived: {text}");
    // Several streamed replies have no stream to come back in: reported.
    let asked = json!({"n": 2, "stream": true});
    let reply = post(addr, "/v1/chat/completions", &[], chat("gemini", asked)).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["x-switchyard-dropped"], "n");
}

#[tokio::test]
async fn a_gemini_callers_logprobs_and_candidates_reach_an_openai_lane() {
    let addr = gateway(CONFIG).await;
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "say hi"}]}],
        "generationConfig": {"responseLogprobs": true, "logprobs": 3, "candidateCount": 2}});
    let reply = post(addr, "/v1beta/models/gpt:generateContent", &[], serde_json::to_vec(&body).unwrap()).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert!(!reply.headers.contains_key("x-switchyard-dropped"));
    let body: Value = serde_json::from_slice(&reply.body).unwrap();
    let candidates = body["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 2, "{body}");
    let result = &candidates[1]["logprobsResult"];
    assert_eq!(result["topCandidates"][0]["candidates"].as_array().unwrap().len(), 3, "{body}");
    assert!(result["chosenCandidates"][0]["logProbability"].as_f64().unwrap() <= 0.0);
    // More alternatives than OpenAI takes: OpenAI's own 400 reaches the caller.
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "say hi"}]}],
        "generationConfig": {"responseLogprobs": true, "logprobs": 25}});
    let reply = post(addr, "/v1beta/models/gpt:generateContent", &[], serde_json::to_vec(&body).unwrap()).await;
    assert_eq!(reply.status, 400, "{}", String::from_utf8_lossy(&reply.body));
    assert!(String::from_utf8_lossy(&reply.body).contains("top_logprobs"));
}

#[tokio::test]
async fn lanes_without_them_report_and_strict_refuses() {
    let addr = gateway(CONFIG).await;
    let asked = json!({"logprobs": true, "top_logprobs": 2, "n": 2});
    let reply = post(addr, "/v1/chat/completions", &[], chat("sonnet", asked.clone())).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.headers["x-switchyard-dropped"], "logprobs, top_logprobs, n");
    let strict = [("x-switchyard-strict", "1")];
    let reply = post(addr, "/v1/chat/completions", &strict, chat("sonnet", asked)).await;
    assert_eq!(reply.status, 400, "{}", String::from_utf8_lossy(&reply.body));
    // Cohere gives the chosen tokens only: the alternatives are reported.
    let reply =
        post(addr, "/v1/chat/completions", &[], chat("command", json!({"logprobs": true, "top_logprobs": 2}))).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.headers["x-switchyard-dropped"], "top_logprobs");
    let body: Value = serde_json::from_slice(&reply.body).unwrap();
    assert!(!body["choices"][0]["logprobs"]["content"].as_array().unwrap().is_empty(), "{body}");
    // A reasoning model refuses them while it reasons: kept from it, reported.
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "say hi"}]}],
        "generationConfig": {"responseLogprobs": true}});
    let reply = post(addr, "/v1beta/models/o3:generateContent", &[], serde_json::to_vec(&body).unwrap()).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.headers["x-switchyard-dropped"], "generationConfig.responseLogprobs");
}
