//! Reliability under injected faults, over real TCP. A fault-injecting
//! OpenAI-protocol upstream behaves by the wire model it is asked for
//! (`healthy`, `fail500`, `limited`, `context`, `hang`, `cut`, `slow`,
//! `switch`), counts the hits per model, and the tests assert the
//! invariants: a caller's mistake never touches lane health, a pool with one
//! healthy lane never fails a request, a tripped lane gets no traffic during
//! its cooldown and exactly one trial after it, and recovers.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use common::*;
use futures_util::StreamExt;
use switchyard_protocol::ir::Protocol;

#[derive(Default)]
struct Faults {
    hits: Mutex<HashMap<String, u32>>,
    /// While set, the `switch` model fails with 500s.
    switch_failing: AtomicBool,
    /// The `cache_*` models' prompt caches: (model, first message) seen.
    cached: Mutex<std::collections::HashSet<(String, String)>>,
    /// Requests a `cache_*` model answered from its cache.
    cache_hits: std::sync::atomic::AtomicU32,
}

impl Faults {
    fn hits(&self, model: &str) -> u32 {
        self.hits.lock().unwrap().get(model).copied().unwrap_or(0)
    }
}

fn openai_error(status: StatusCode, message: &str, code: &str) -> Response {
    let body = serde_json::json!({"error": {"message": message, "type": "server_error", "param": null, "code": code}});
    (status, [("content-type", "application/json")], body.to_string()).into_response()
}

fn healthy_reply(body: &[u8], stream: bool) -> Response {
    let reply = switchyard_transport::mock::respond(
        switchyard_protocol::codec(Protocol::OpenAi),
        None,
        stream,
        switchyard_protocol::Framing::Sse,
        body,
    );
    let mut response = Response::new(Body::new(reply.body));
    *response.status_mut() = reply.status;
    *response.headers_mut() = reply.headers;
    response
}

async fn fault_handler(State(faults): State<Arc<Faults>>, _headers: HeaderMap, body: Bytes) -> Response {
    let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let model = value["model"].as_str().unwrap_or_default().to_owned();
    let stream = value["stream"].as_bool().unwrap_or(false);
    let hit = {
        let mut hits = faults.hits.lock().unwrap();
        let hit = hits.entry(model.clone()).or_default();
        *hit += 1;
        *hit
    };
    if model.starts_with("cache_") {
        // A provider's prompt cache: the head it saw before is a cache read.
        let head = value["messages"][0].to_string();
        if !faults.cached.lock().unwrap().insert((model.clone(), head)) {
            faults.cache_hits.fetch_add(1, Ordering::SeqCst);
        }
    }
    match model.as_str() {
        // Odd hits fail, even ones serve: a transient fault a retry cures.
        "every_other" if hit % 2 == 1 => openai_error(StatusCode::INTERNAL_SERVER_ERROR, "blip", "server_error"),
        "limited_once" if hit % 2 == 1 => {
            let mut response = openai_error(StatusCode::TOO_MANY_REQUESTS, "slow down", "rate_limit_exceeded");
            response.headers_mut().insert("retry-after", "1".parse().unwrap());
            response
        }
        "fail500" => openai_error(StatusCode::INTERNAL_SERVER_ERROR, "boom", "server_error"),
        "limited" => {
            let mut response = openai_error(StatusCode::TOO_MANY_REQUESTS, "slow down", "rate_limit_exceeded");
            response.headers_mut().insert("retry-after", "7".parse().unwrap());
            response
        }
        "limited_date" => {
            let mut response = openai_error(StatusCode::TOO_MANY_REQUESTS, "slow down", "rate_limit_exceeded");
            let at = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(10));
            response.headers_mut().insert("retry-after", at.parse().unwrap());
            response
        }
        "quota" => {
            let body = serde_json::json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}});
            (StatusCode::TOO_MANY_REQUESTS, [("content-type", "application/json")], body.to_string()).into_response()
        }
        "context" => {
            let body = serde_json::json!({"error": {"message": "This model's maximum context length is 1000 tokens", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}});
            (StatusCode::BAD_REQUEST, [("content-type", "application/json")], body.to_string()).into_response()
        }
        "hang" => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            healthy_reply(&body, stream)
        }
        "slow" => {
            tokio::time::sleep(Duration::from_millis(300)).await;
            healthy_reply(&body, stream)
        }
        "switch" if faults.switch_failing.load(Ordering::SeqCst) => {
            openai_error(StatusCode::SERVICE_UNAVAILABLE, "down for maintenance", "server_error")
        }
        "switch" => {
            // A slow success, so that concurrent requests overlap the trial.
            tokio::time::sleep(Duration::from_millis(200)).await;
            healthy_reply(&body, stream)
        }
        "tail" | "tail_always" if stream && (model == "tail_always" || hit % 4 == 1) => {
            // A heavy-tailed first token: the head and the role chunk at
            // once, the content 800 ms later (one hit in four, or always).
            let reply = healthy_reply(&body, true);
            let whole = axum::body::to_bytes(reply.into_body(), usize::MAX).await.unwrap();
            let frames: Vec<Bytes> = whole.split_inclusive(|b| *b == b'\n').map(Bytes::copy_from_slice).collect();
            let role = Bytes::from_static(b"data: {\"id\":\"t\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n");
            let chunks = futures_util::stream::once(async move { Ok::<_, std::io::Error>(role) }).chain(
                futures_util::stream::once(async {
                    tokio::time::sleep(Duration::from_millis(800)).await;
                    Ok::<_, std::io::Error>(Bytes::new())
                })
                .chain(futures_util::stream::iter(frames.into_iter().map(Ok))),
            );
            let mut response = Response::new(Body::from_stream(chunks));
            response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
            response
        }
        "trickle" => {
            // A healthy stream that takes longer than the lane's whole-request timeout.
            let reply = healthy_reply(&body, true);
            let whole = axum::body::to_bytes(reply.into_body(), usize::MAX).await.unwrap();
            let frames: Vec<Bytes> = whole.split_inclusive(|b| *b == b'\n').map(Bytes::copy_from_slice).collect();
            let chunks = futures_util::stream::iter(frames).then(|frame| async move {
                tokio::time::sleep(Duration::from_millis(40)).await;
                Ok::<_, std::io::Error>(frame)
            });
            let mut response = Response::new(Body::from_stream(chunks));
            response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
            response
        }
        "hangbody" => {
            let chunks = futures_util::stream::pending::<Result<Bytes, std::io::Error>>();
            let mut response = Response::new(Body::from_stream(chunks));
            response.headers_mut().insert("content-type", "application/json".parse().unwrap());
            response
        }
        "cut" | "cut_tool" | "cut_thinking" => {
            // A frame of a real stream (text, a tool call's start, or
            // reasoning), then the connection breaks.
            let first = Bytes::from_static(match model.as_str() {
                "cut" => b"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"cut\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"par\"},\"finish_reason\":null}]}\n\n",
                "cut_tool" => b"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"cut\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_par\",\"type\":\"function\",\"function\":{\"name\":\"lookup\",\"arguments\":\"{\\\"q\\\":\"}}]},\"finish_reason\":null}]}\n\n",
                _ => b"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"cut\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"reasoning_content\":\"par\"},\"finish_reason\":null}]}\n\n",
            });
            let chunks = futures_util::stream::unfold(0, move |step| {
                let first = first.clone();
                async move {
                    match step {
                        0 => Some((Ok(first), 1)),
                        1 => {
                            // Let the headers and first frame reach the gateway before the break.
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            Some((Err(std::io::Error::other("connection reset")), 2))
                        }
                        _ => None,
                    }
                }
            });
            let mut response = Response::new(Body::from_stream(chunks));
            response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
            response
        }
        "stall_first" | "cut_first" | "error_first" => {
            // The role chunk comes at once; then no content: a stall, a
            // reset, or the vendor's in-stream error.
            let role = Bytes::from_static(b"data: {\"id\":\"abandoned\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n");
            let kind = model.clone();
            let chunks = futures_util::stream::unfold(0, move |step| {
                let (role, kind) = (role.clone(), kind.clone());
                async move {
                    match step {
                        0 => Some((Ok(role), 1)),
                        1 => {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            match kind.as_str() {
                                "stall_first" => {
                                    futures_util::future::pending::<()>().await;
                                    None
                                }
                                "cut_first" => Some((Err(std::io::Error::other("connection reset")), 2)),
                                _ => Some((Ok(Bytes::from_static(b"data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n")), 2)),
                            }
                        }
                        _ => None,
                    }
                }
            });
            let mut response = Response::new(Body::from_stream(chunks));
            response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
            response
        }
        "spent" | "low" => {
            // A success whose rate-limit headers say the lane is spent (its
            // reset in a second) or nearly so.
            let mut response = healthy_reply(&body, stream);
            let headers = response.headers_mut();
            headers.insert("x-ratelimit-limit-requests", "100".parse().unwrap());
            let remaining = if model == "spent" { "0" } else { "2" };
            headers.insert("x-ratelimit-remaining-requests", remaining.parse().unwrap());
            headers.insert("x-ratelimit-reset-requests", "1s".parse().unwrap());
            response
        }
        "nodone" | "nodone_close" => {
            // A Python-served backend: spaced JSON, a complete answer and its
            // usage, then no `[DONE]`; `nodone` also holds the connection open.
            let frames = [
                "data: {\"id\": \"c2\", \"object\": \"chat.completion.chunk\", \"created\": 0, \"model\": \"m\", \"choices\": [{\"index\": 0, \"delta\": {\"role\": \"assistant\", \"content\": \"whole answer\"}, \"finish_reason\": null}], \"usage\": null}\n\n",
                "data: {\"id\": \"c2\", \"object\": \"chat.completion.chunk\", \"created\": 0, \"model\": \"m\", \"choices\": [{\"index\": 0, \"delta\": {}, \"finish_reason\": \"stop\"}], \"usage\": null}\n\n",
                "data: {\"id\": \"c2\", \"object\": \"chat.completion.chunk\", \"created\": 0, \"model\": \"m\", \"choices\": [], \"usage\": {\"prompt_tokens\": 11, \"completion_tokens\": 2, \"total_tokens\": 13}}\n\n",
            ];
            let held = model == "nodone";
            let chunks =
                futures_util::stream::iter(frames.map(|f| Ok::<_, std::io::Error>(Bytes::from_static(f.as_bytes()))))
                    .chain(futures_util::stream::once(async move {
                        if held {
                            futures_util::future::pending::<()>().await;
                        }
                        Ok(Bytes::new())
                    }));
            let mut response = Response::new(Body::from_stream(chunks));
            response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
            response
        }
        _ => healthy_reply(&body, stream),
    }
}

async fn fault_upstream() -> (std::net::SocketAddr, Arc<Faults>) {
    let faults = Arc::new(Faults::default());
    let router = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(fault_handler))
        .with_state(faults.clone());
    (spawn(router).await, faults)
}

/// A config whose lanes are the fault upstream's models, plus `pools` YAML.
fn chaos_config(upstream: std::net::SocketAddr, pools: &str) -> String {
    let mut yaml = format!(
        "providers:\n  faulty: {{ protocol: openai, base_url: \"http://{upstream}\", timeouts: {{ response_headers: 300ms }} }}\nmodels:\n"
    );
    for model in [
        "healthy",
        "fail500",
        "limited",
        "limited_date",
        "hang",
        "slow",
        "switch",
        "cut",
        "hangbody",
        "nodone",
        "nodone_close",
        "every_other",
        "limited_once",
        "stall_first",
        "cut_first",
        "error_first",
        "spent",
        "low",
        "cache_a",
        "cache_b",
        "cache_c",
        "cache_d",
        "cut_tool",
        "cut_thinking",
        "tail",
        "tail_always",
    ] {
        yaml.push_str(&format!("  {model}: {{ provider: faulty }}\n"));
    }
    yaml.push_str("  context: { provider: faulty, context_window: 1000 }\n");
    yaml.push_str("  small: { provider: faulty, model: context, context_window: 500 }\n");
    yaml.push_str("  large: { provider: faulty, model: healthy, context_window: 100000 }\n");
    yaml.push_str("  capped: { provider: faulty, model: slow, max_concurrent: 1 }\n");
    yaml.push_str("pools:\n");
    yaml.push_str(pools);
    yaml
}

async fn chat(addr: std::net::SocketAddr, model: &str, text: &str) -> Reply {
    post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, model, text, false)).await
}

fn lane_stats<'a>(stats: &'a serde_json::Value, pool: &str, lane: &str) -> &'a serde_json::Value {
    let pool = stats["pools"].as_array().unwrap().iter().find(|p| p["pool"] == pool).unwrap();
    pool["lanes"].as_array().unwrap().iter().find(|l| l["lane"] == lane).unwrap()
}

#[tokio::test]
async fn a_callers_bad_request_never_changes_lane_state() {
    let (upstream, _faults) = fault_upstream().await;
    let addr = gateway(&chaos_config(
        upstream,
        "  one: { breaker: { consecutive_failures: 1 }, members: [{ model: healthy }] }\n",
    ))
    .await;
    for _ in 0..20 {
        let reply = chat(addr, "one", "oops [mock:status=400]").await;
        assert_eq!(reply.status, 400);
    }
    let stats = stats(addr).await;
    let lane = lane_stats(&stats, "one", "healthy");
    assert_eq!(lane["breaker"], "closed");
    assert_eq!(lane["client_faults"], 20);
    assert_eq!(lane["upstream_failures"], 0);
    assert_eq!(chat(addr, "one", "hello").await.status, 200);
}

#[tokio::test]
async fn one_healthy_lane_keeps_a_pool_answering() {
    let (upstream, faults) = fault_upstream().await;
    let pools =
        "  mixed: { failover: { max_hops: 3 }, members: [{ model: fail500 }, { model: hang }, { model: healthy }] }\n";
    let addr = gateway(&chaos_config(upstream, pools)).await;
    let mut failures = 0;
    for batch in 0..50 {
        let replies = futures_util::future::join_all(
            (0..20).map(|i| async move { chat(addr, "mixed", &format!("req {batch}-{i}")).await }),
        )
        .await;
        failures += replies.iter().filter(|r| r.status != 200).count();
    }
    assert_eq!(failures, 0, "1,000 requests with one healthy lane left must all succeed");
    assert_eq!(faults.hits("healthy"), 1000);
    // The failing lanes tripped within the first batch (20 requests may be in
    // flight before the fifth failure lands) and were left alone while
    // cooling down, but for single half-open trials.
    assert!(faults.hits("fail500") <= 25, "fail500 got {}", faults.hits("fail500"));
    assert!(faults.hits("hang") <= 25, "hang got {}", faults.hits("hang"));
    let stats = stats(addr).await;
    assert_eq!(lane_stats(&stats, "mixed", "fail500")["breaker"], "open");
    assert_eq!(lane_stats(&stats, "mixed", "hang")["breaker"], "open");
}

#[tokio::test]
async fn tripped_lane_gets_no_traffic_then_exactly_one_trial_then_recovers() {
    let (upstream, faults) = fault_upstream().await;
    let pools = "  pair:\n    breaker: { consecutive_failures: 1, base_cooldown: 700ms, jitter: 0 }\n    members: [{ model: switch }, { model: healthy }]\n";
    let addr = gateway(&chaos_config(upstream, pools)).await;
    faults.switch_failing.store(true, Ordering::SeqCst);
    // Until `switch` is tried once it may be picked; its first failure trips it.
    for i in 0..4 {
        assert_eq!(chat(addr, "pair", &format!("warm {i}")).await.status, 200);
    }
    assert_eq!(faults.hits("switch"), 1);
    let tripped = stats(addr).await;
    assert_eq!(lane_stats(&tripped, "pair", "switch")["breaker"], "open");
    // During the cooldown: no traffic at all.
    for i in 0..30 {
        assert_eq!(chat(addr, "pair", &format!("cooling {i}")).await.status, 200);
    }
    assert_eq!(faults.hits("switch"), 1, "a tripped lane received traffic during its cooldown");

    faults.switch_failing.store(false, Ordering::SeqCst);
    let retry_in = lane_stats(&stats(addr).await, "pair", "switch")["retry_in_ms"].as_u64().unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(retry_in + 50)).await;
    // After it: many concurrent requests, exactly one of which is the trial.
    let replies =
        futures_util::future::join_all((0..12).map(|i| async move { chat(addr, "pair", &format!("after {i}")).await }))
            .await;
    assert!(replies.iter().all(|r| r.status == 200));
    assert_eq!(faults.hits("switch"), 2, "half-open must admit exactly one trial");
    // The trial succeeded: the lane is closed and takes its share again.
    assert_eq!(lane_stats(&stats(addr).await, "pair", "switch")["breaker"], "closed");
    for i in 0..4 {
        chat(addr, "pair", &format!("recovered {i}")).await;
    }
    assert!(faults.hits("switch") >= 3, "a recovered lane takes traffic again");
}

#[tokio::test]
async fn rate_limits_rest_the_lane_and_answer_429_never_503() {
    let (upstream, faults) = fault_upstream().await;
    let addr = gateway(&chaos_config(
        upstream,
        "  lim: { breaker: { consecutive_failures: 1 }, members: [{ model: limited }] }\n",
    ))
    .await;
    let reply = chat(addr, "lim", "hi").await;
    assert_eq!(reply.status, 429);
    assert_eq!(reply.headers["retry-after"], "7");
    let stats = stats(addr).await;
    let lane = lane_stats(&stats, "lim", "limited");
    assert_eq!(lane["breaker"], "closed", "a rate limit is not a failure: {lane}");
    assert_eq!(lane["trips"], 0);
    assert!(lane["resting_ms"].as_u64().unwrap() >= 6_500, "the lane rests for its retry-after: {lane}");
    // Resting: the caller gets a rate limit in its own protocol, not an outage.
    for protocol in [Protocol::OpenAi, Protocol::Anthropic, Protocol::Gemini, Protocol::Bedrock] {
        let reply =
            post(addr, &ingress_path(protocol, "lim", false), &[], chat_body(protocol, "lim", "again", false)).await;
        assert_eq!(reply.status, 429, "{protocol}: {}", String::from_utf8_lossy(&reply.body));
        let kind = switchyard_protocol::codec(protocol).extract_error(reply.status.as_u16(), &reply.body).kind;
        assert_eq!(kind, switchyard_protocol::ir::ErrorKind::RateLimit, "{protocol}");
        let retry: u64 = reply.headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((6..=7).contains(&retry), "retry-after {retry}");
    }
    assert_eq!(faults.hits("limited"), 1, "a resting lane gets no traffic");
}

#[tokio::test]
async fn retry_after_as_an_http_date_rests_the_lane() {
    let (upstream, _faults) = fault_upstream().await;
    let addr = gateway(&chaos_config(upstream, "  lim: { members: [{ model: limited_date }] }\n")).await;
    let reply = chat(addr, "lim", "hi").await;
    assert_eq!(reply.status, 429);
    let stats = stats(addr).await;
    let lane = lane_stats(&stats, "lim", "limited_date");
    let resting = lane["resting_ms"].as_u64().unwrap();
    assert!((8_000..=10_000).contains(&resting), "rests until the date: {lane}");
}

#[tokio::test]
async fn a_lane_down_for_faults_makes_exhaustion_a_503() {
    let (upstream, _faults) = fault_upstream().await;
    let pools = "  mixed: { breaker: { consecutive_failures: 1 }, failover: { max_hops: 1 }, members: [{ model: limited }, { model: fail500 }] }\n";
    let addr = gateway(&chaos_config(upstream, pools)).await;
    // One request each (max_hops 1): one lane rests, the other trips.
    let first = chat(addr, "mixed", "one").await;
    let second = chat(addr, "mixed", "two").await;
    let mut statuses = [first.status.as_u16(), second.status.as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [429, 500]);
    let reply = chat(addr, "mixed", "three").await;
    assert_eq!(reply.status, 503, "{}", String::from_utf8_lossy(&reply.body));
    assert!(reply.headers.contains_key("retry-after"));
}

#[tokio::test]
async fn a_callers_own_rate_limit_never_touches_the_lane() {
    let (upstream, faults) = fault_upstream().await;
    let yaml = format!(
        "providers:\n  theirs: {{ protocol: openai, base_url: \"http://{upstream}\", upstream_credentials: passthrough }}\nmodels:\n  limited: {{ provider: theirs }}\n  quota: {{ provider: theirs }}\n"
    );
    let addr = gateway(&yaml).await;
    for model in ["limited", "quota"] {
        for _ in 0..3 {
            let reply = post(
                addr,
                "/v1/chat/completions",
                &[("authorization", "Bearer sk-caller")],
                chat_body(Protocol::OpenAi, model, "hi", false),
            )
            .await;
            assert_eq!(reply.status, 429, "{model}: relayed as the caller's own");
        }
        let stats = stats(addr).await;
        let lane = lane_stats(&stats, model, model);
        assert_eq!(lane["breaker"], "closed", "{lane}");
        assert!(lane["resting_ms"].is_null(), "{lane}");
    }
    assert_eq!(faults.hits("limited"), 3, "every call reached the upstream");
}

#[tokio::test]
async fn context_length_moves_to_a_larger_lane_without_penalty() {
    let (upstream, faults) = fault_upstream().await;
    let pools = "  sized: { hooks: [weighted], members: [{ model: small, weight: 100 }, { model: context, weight: 1 }, { model: large, weight: 1 }] }\n";
    let addr = gateway(&chaos_config(upstream, pools)).await;
    let reply = chat(addr, "sized", "a very long prompt").await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.headers["x-switchyard-lane"], "large");
    let stats = stats(addr).await;
    assert_eq!(lane_stats(&stats, "sized", "small")["breaker"], "closed");
    assert_eq!(lane_stats(&stats, "sized", "small")["upstream_failures"], 0);
    // `context` (window 1000) is larger than `small` (500), so it may be tried;
    // what matters is that `large` ends up serving and nobody is penalised.
    assert!(faults.hits("healthy") >= 1);
}

#[tokio::test]
async fn hung_backends_time_out_and_fail_over() {
    let (upstream, _faults) = fault_upstream().await;
    let addr = gateway(&chaos_config(
        upstream,
        "  h: { members: [{ model: hang, weight: 10 }, { model: healthy, weight: 1 }] }\n",
    ))
    .await;
    let started = std::time::Instant::now();
    let reply = chat(addr, "h", "hi").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["x-switchyard-lane"], "healthy");
    assert!(started.elapsed() < Duration::from_secs(5));
    let alone = gateway(&chaos_config(upstream, "  h: { members: [{ model: hang }] }\n")).await;
    assert_eq!(chat(alone, "h", "hi").await.status, 504);
}

#[tokio::test]
async fn a_stream_cut_midway_ends_with_the_callers_error_and_counts() {
    let (upstream, _faults) = fault_upstream().await;
    let addr = gateway(&chaos_config(upstream, "  c: { members: [{ model: cut }] }\n")).await;
    for ingress in [Protocol::OpenAi, Protocol::Anthropic] {
        let path = ingress_path(ingress, "c", true);
        let reply = post(addr, &path, &[], chat_body(ingress, "c", "hi", true)).await;
        assert_eq!(reply.status, 200);
        let text = String::from_utf8_lossy(&reply.body);
        assert!(text.contains("par"), "{ingress}: first frame relayed: {text}");
        assert!(text.contains("error"), "{ingress}: stream must end with an error event: {text}");
    }
    let stats = stats(addr).await;
    assert_eq!(lane_stats(&stats, "c", "cut")["upstream_failures"], 2);
}

#[tokio::test]
async fn a_complete_stream_without_its_terminator_is_finished_not_failed() {
    // Spaced JSON (`"finish_reason": "stop"`) and no `[DONE]`: before, the
    // tap missed the finish reason and the stream became an error after a
    // complete answer, charged to a healthy lane.
    let (upstream, _faults) = fault_upstream().await;
    let pools = "  held: { members: [{ model: nodone }] }\n  closed: { members: [{ model: nodone_close }] }\n";
    let addr = gateway(&chaos_config(upstream, pools)).await;
    for pool in ["held", "closed"] {
        for ingress in [Protocol::OpenAi, Protocol::Anthropic] {
            let started = std::time::Instant::now();
            let path = ingress_path(ingress, pool, true);
            let reply = post(addr, &path, &[], chat_body(ingress, pool, "hi", true)).await;
            assert!(started.elapsed() < Duration::from_secs(5), "{pool} {ingress}: finished promptly");
            assert_eq!(reply.status, 200);
            let text = String::from_utf8_lossy(&reply.body);
            assert!(text.contains("whole answer"), "{pool} {ingress}: {text}");
            assert!(!text.contains("error"), "{pool} {ingress}: a complete answer is no error: {text}");
            let terminator = if ingress == Protocol::OpenAi { "data: [DONE]" } else { "event: message_stop" };
            assert_eq!(text.matches(terminator).count(), 1, "{pool} {ingress}: one terminator: {text}");
            if ingress == Protocol::Anthropic {
                assert!(text.contains("\"output_tokens\":2"), "{pool}: usage carried: {text}");
            }
        }
    }
    let stats = stats(addr).await;
    for (pool, lane) in [("held", "nodone"), ("closed", "nodone_close")] {
        assert_eq!(lane_stats(&stats, pool, lane)["upstream_failures"], 0, "{lane}");
    }
}

#[tokio::test]
async fn transient_failures_are_retried_on_the_same_lane_when_asked() {
    let (upstream, faults) = fault_upstream().await;
    let pools = "  retried: { failover: { retries: 2 }, members: [{ model: every_other }] }\n\
                 \x20 rested: { failover: { retries: 1 }, members: [{ model: limited_once }] }\n\
                 \x20 silent: { failover: { retries: 2, timeout: 5s }, members: [{ model: hang }] }\n\
                 \x20 bad: { failover: { retries: 2 }, members: [{ model: context }] }\n\
                 \x20 plain: { members: [{ model: fail500 }] }\n";
    let addr = gateway(&chaos_config(upstream, pools)).await;
    // A 500, then the same lane serves: the caller never sees the blip.
    for round in 1..=3 {
        let reply = chat(addr, "retried", "hi").await;
        assert_eq!(reply.status, 200, "round {round}");
        assert_eq!(faults.hits("every_other"), 2 * round);
    }
    // A 429 whose Retry-After is honoured before the retry.
    let started = std::time::Instant::now();
    let reply = chat(addr, "rested", "hi").await;
    assert_eq!(reply.status, 200);
    assert!(started.elapsed() >= Duration::from_millis(950), "waited {:?}", started.elapsed());
    assert_eq!(faults.hits("limited_once"), 2);
    // A silent lane is never retried in place, nor a fault of the request.
    assert_eq!(chat(addr, "silent", "hi").await.status, 504);
    assert_eq!(faults.hits("hang"), 1);
    assert_eq!(chat(addr, "bad", "hi").await.status, 400);
    assert_eq!(faults.hits("context"), 1);
    // Without `retries`, nothing changes: one try.
    assert_eq!(chat(addr, "plain", "hi").await.status, 500);
    assert_eq!(faults.hits("fail500"), 1);
    let reply = get_with(admin(addr), "/metrics", &[("authorization", &format!("Bearer {ADMIN_TOKEN}"))]).await;
    let metrics = String::from_utf8_lossy(&reply.body);
    assert!(
        metrics.contains("switchyard_same_lane_retries_total{lane=\"every_other\",cause=\"server_error\"} 3"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_stream_that_fails_before_content_moves_on_unseen() {
    let (upstream, faults) = fault_upstream().await;
    let pools = "  deadline: { failover: { first_token: 400ms }, members: [{ model: stall_first, weight: 100 }, { model: healthy }] }\n\
                 \x20 reset: { members: [{ model: cut_first, weight: 100 }, { model: healthy }] }\n\
                 \x20 error: { members: [{ model: error_first, weight: 100 }, { model: healthy }] }\n\
                 \x20 alone: { failover: { first_token: 300ms }, members: [{ model: stall_first }] }\n";
    let addr = gateway(&chaos_config(upstream, pools)).await;
    for ingress in [Protocol::OpenAi, Protocol::Anthropic] {
        for pool in ["deadline", "reset", "error"] {
            let started = std::time::Instant::now();
            let path = ingress_path(ingress, pool, true);
            let reply = post(addr, &path, &[], chat_body(ingress, pool, "hello there", true)).await;
            assert_eq!(reply.status, 200, "{pool} {ingress}");
            assert_eq!(reply.headers["x-switchyard-lane"], "healthy", "{pool} {ingress}");
            let text = String::from_utf8_lossy(&reply.body);
            assert!(text.contains("hello") && text.contains("there"), "{pool} {ingress}: {text}");
            assert!(!text.contains("error"), "{pool} {ingress}: {text}");
            // The abandoned lane's role chunk never reached the caller.
            assert!(!text.contains("abandoned"), "{pool} {ingress}: {text}");
            assert!(started.elapsed() < Duration::from_secs(3), "{pool} {ingress}: {:?}", started.elapsed());
        }
    }
    // With no other candidate the deadline still holds: the caller's own 504.
    let started = std::time::Instant::now();
    let reply = post(addr, "/v1/messages", &[], chat_body(Protocol::Anthropic, "alone", "hi", true)).await;
    assert_eq!(reply.status, 504, "{}", String::from_utf8_lossy(&reply.body));
    assert!(started.elapsed() < Duration::from_secs(2));
    let body: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(body["type"], "error", "Anthropic's error shape: {body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("first token"), "{body}");
    // Each abandoned stream counted against its lane.
    let stats = stats(addr).await;
    assert_eq!(lane_stats(&stats, "deadline", "stall_first")["upstream_failures"], 2);
    assert_eq!(lane_stats(&stats, "reset", "cut_first")["upstream_failures"], 2);
    assert_eq!(lane_stats(&stats, "error", "error_first")["upstream_failures"], 2);
    assert_eq!(faults.hits("stall_first"), 3);
}

#[tokio::test]
async fn a_lane_whose_upstream_says_it_is_spent_rests_before_it_ever_429s() {
    let (upstream, faults) = fault_upstream().await;
    let pools = "  steer: { members: [{ model: spent, weight: 100 }, { model: healthy }] }\n\
                 \x20 scarce: { members: [{ model: low, weight: 100 }, { model: healthy, weight: 1 }] }\n";
    let addr = gateway(&chaos_config(upstream, pools)).await;
    let lane = |reply: &Reply| reply.headers["x-switchyard-lane"].to_str().unwrap().to_owned();
    // It served, and said it has nothing left until its reset: it rests.
    assert_eq!(lane(&chat(addr, "steer", "one").await), "spent");
    for _ in 0..3 {
        let reply = chat(addr, "steer", "two").await;
        assert_eq!((reply.status.as_u16(), lane(&reply)), (200, "healthy".to_owned()));
    }
    assert_eq!(faults.hits("spent"), 1, "never asked while spent");
    // After its reset it serves again.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(lane(&chat(addr, "steer", "three").await), "spent");
    // Nearly spent (2 %): ranked after every other lane, whatever its weight.
    assert_eq!(lane(&chat(addr, "scarce", "one").await), "low");
    for _ in 0..3 {
        assert_eq!(lane(&chat(addr, "scarce", "two").await), "healthy");
    }
    assert_eq!(faults.hits("low"), 1);
}

/// 20 conversations of 4 turns each, one after another, over a 4-lane pool
/// whose upstream models a prompt cache per lane: with prompt-cache
/// affinity every later turn reads the cache its first turn wrote; without
/// it, weighted round-robin sends each turn to another lane.
#[tokio::test]
async fn prompt_cache_affinity_sends_a_conversation_back_to_its_cache() {
    let (upstream, faults) = fault_upstream().await;
    let members = "members: [{ model: cache_a }, { model: cache_b }, { model: cache_c }, { model: cache_d }]";
    let pools = format!("  sticky: {{ affinity: {{ prefix: 5m }}, {members} }}\n  spread: {{ {members} }}\n");
    let addr = gateway(&chaos_config(upstream, &pools)).await;
    let mut hits = Vec::new();
    for pool in ["spread", "sticky"] {
        let before = faults.cache_hits.load(Ordering::SeqCst);
        for conversation in 0..20 {
            let mut messages = vec![
                serde_json::json!({"role": "system", "content": format!("{pool} conversation {conversation}")}),
                serde_json::json!({"role": "user", "content": "turn 1"}),
            ];
            for turn in 1..=4 {
                let body = serde_json::json!({"model": pool, "messages": messages});
                let reply = post(addr, "/v1/chat/completions", &[], body.to_string().into_bytes()).await;
                assert_eq!(reply.status, 200);
                messages.push(serde_json::json!({"role": "assistant", "content": format!("answer {turn}")}));
                messages.push(serde_json::json!({"role": "user", "content": format!("turn {}", turn + 1)}));
            }
        }
        hits.push(faults.cache_hits.load(Ordering::SeqCst) - before);
    }
    eprintln!("cache reads of 80: without affinity {}, with {}", hits[0], hits[1]);
    // Without affinity the four turns of a conversation meet four lanes.
    assert!(hits[0] <= 10, "without affinity: {} cache reads of 80", hits[0]);
    assert_eq!(hits[1], 60, "with affinity every turn after the first reads the cache");
}

/// The cut-or-complete contract (`docs/protocols.md`) in every dialect: a
/// stream cut mid-text, mid-tool-call or mid-thinking ends with the
/// caller's own in-stream error and never with a terminator, and the lane
/// hears of each cut.
#[tokio::test]
async fn a_cut_stream_is_told_apart_from_a_complete_one_in_every_dialect() {
    let (upstream, _faults) = fault_upstream().await;
    let patient = "breaker: { consecutive_failures: 1000, min_requests: 1000 }";
    let pools = format!(
        "  text: {{ {patient}, members: [{{ model: cut }}] }}\n  tool: {{ {patient}, members: [{{ model: cut_tool }}] }}\n  thinking: {{ {patient}, members: [{{ model: cut_thinking }}] }}\n"
    );
    let addr = gateway(&chaos_config(upstream, &pools)).await;
    // What the caller's stream shows for a cut, and what only a complete one ends with.
    let contract = |ingress: Protocol| -> (&'static str, &'static str) {
        match ingress {
            Protocol::OpenAi => ("\"error\"", "[DONE]"),
            Protocol::Responses => ("response.failed", "response.completed"),
            Protocol::Anthropic => ("event: error", "message_stop"),
            Protocol::Gemini => ("\"error\"", "finishReason"),
            Protocol::Cohere => ("\"finish_reason\":\"ERROR\"", "COMPLETE"),
            Protocol::Bedrock => ("exception", "metadata"),
        }
    };
    for ingress in Protocol::ALL {
        for pool in ["text", "tool", "thinking"] {
            let path = ingress_path(ingress, pool, true);
            let reply = post(addr, &path, &[], chat_body(ingress, pool, "hi", true)).await;
            assert_eq!(reply.status, 200, "{ingress} {pool}");
            let text = String::from_utf8_lossy(&reply.body);
            let (cut, complete) = contract(ingress);
            assert!(text.contains(cut), "{ingress} {pool}: the cut is told: {text}");
            assert!(!text.contains(complete), "{ingress} {pool}: no terminator after a cut: {text}");
            // Text streams in every dialect; a partial tool call or
            // reasoning only where the dialect streams them (Gemini sends a
            // tool call whole, so a cut one is never shown half-made).
            if pool == "text" {
                assert!(text.contains("par"), "{ingress}: what came before the cut was relayed: {text}");
            }
        }
    }
    let stats = stats(addr).await;
    for (pool, lane) in [("text", "cut"), ("tool", "cut_tool"), ("thinking", "cut_thinking")] {
        assert_eq!(lane_stats(&stats, pool, lane)["upstream_failures"], 6, "{lane}: one failure per dialect");
    }
}

#[tokio::test]
async fn fallback_pools_and_connection_failures() {
    let (upstream, _faults) = fault_upstream().await;
    let pools = "  primary: { fallback: [backup], members: [{ model: fail500 }] }\n  backup: { members: [{ model: healthy }] }\n";
    let addr = gateway(&chaos_config(upstream, pools)).await;
    let reply = chat(addr, "primary", "hi").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["x-switchyard-lane"], "healthy");

    // A provider nobody listens on: connection refused, failover to the next.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let yaml = format!(
        "providers:\n  gone: {{ protocol: openai, base_url: \"http://{closed}\" }}\n  up: {{ protocol: openai, base_url: \"http://{upstream}\" }}\nmodels:\n  dead: {{ provider: gone }}\n  healthy: {{ provider: up }}\npools:\n  p: {{ members: [{{ model: dead, weight: 5 }}, {{ model: healthy }}] }}\n"
    );
    let addr = gateway(&yaml).await;
    let reply = chat(addr, "p", "hi").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["x-switchyard-lane"], "healthy");
    let alone = gateway(
        &yaml.replace("{ model: healthy }", "{ model: dead, weight: 1 }").replace("[{ model: dead, weight: 5 }, ", "["),
    )
    .await;
    assert_eq!(chat(alone, "p", "hi").await.status, 502);
}

#[tokio::test]
async fn a_lane_at_its_cap_is_skipped_when_another_is_free() {
    let (upstream, faults) = fault_upstream().await;
    let pools = "  cap: { members: [{ model: capped, weight: 100 }, { model: healthy, weight: 1 }] }\n";
    let addr = gateway(&chaos_config(upstream, pools)).await;
    let replies =
        futures_util::future::join_all((0..4).map(|i| async move { chat(addr, "cap", &format!("c{i}")).await })).await;
    assert!(replies.iter().all(|r| r.status == 200));
    let lanes: Vec<&str> = replies.iter().map(|r| r.headers["x-switchyard-lane"].to_str().unwrap()).collect();
    assert!(lanes.contains(&"healthy"), "{lanes:?}");
    assert!(faults.hits("slow") >= 1);
}

#[tokio::test]
async fn active_probes_recover_a_tripped_lane_before_its_cooldown_ends() {
    let (upstream, faults) = fault_upstream().await;
    let pools = "  pair:\n    breaker: { consecutive_failures: 1, base_cooldown: 60s, jitter: 0 }\n    members: [{ model: switch, weight: 5 }, { model: healthy }]\n";
    let yaml = chaos_config(upstream, pools).replace(
        "timeouts: { response_headers: 300ms }",
        "timeouts: { response_headers: 300ms }, health_probe: { interval: 100ms }",
    );
    let (addr, gateway) = gateway_handle(&yaml).await;
    faults.switch_failing.store(true, Ordering::SeqCst);
    assert_eq!(chat(addr, "pair", "trip it").await.status, 200);
    assert_eq!(lane_stats(&stats(addr).await, "pair", "switch")["breaker"], "open");
    // A probe of a still-failing backend changes nothing.
    switchyard_engine::probe::probe_provider(&gateway, 0).await;
    assert_eq!(lane_stats(&stats(addr).await, "pair", "switch")["breaker"], "open");
    // The backend comes back; without probes it would wait out 60 seconds.
    faults.switch_failing.store(false, Ordering::SeqCst);
    // One probe round (what the probe loop runs every `interval`).
    switchyard_engine::probe::probe_provider(&gateway, 0).await;
    assert_eq!(
        lane_stats(&stats(addr).await, "pair", "switch")["breaker"],
        "half_open",
        "a successful probe moves the breaker to half-open"
    );
    // The next real request is the single trial, and closes the breaker.
    let before = faults.hits("switch");
    let reply = chat(addr, "pair", "trial").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["x-switchyard-lane"], "switch");
    assert_eq!(faults.hits("switch"), before + 1);
    assert_eq!(lane_stats(&stats(addr).await, "pair", "switch")["breaker"], "closed");
}

#[tokio::test]
async fn a_caller_that_disconnects_cancels_the_upstream_call() {
    // An upstream that streams one frame every 20 ms, forever, and reports
    // when its body is dropped (its connection closed).
    struct Dropped(Option<tokio::sync::oneshot::Sender<()>>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            if let Some(tx) = self.0.take() {
                let _ = tx.send(());
            }
        }
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let guard = Arc::new(Mutex::new(Some(Dropped(Some(tx)))));
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || {
            let guard = guard.lock().unwrap().take();
            async move {
                let frames = futures_util::stream::unfold((0u64, guard), |(n, guard)| async move {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let chunk = format!("data: {{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"t{n} \"}},\"finish_reason\":null}}]}}\n\n");
                    Some((Ok::<_, std::io::Error>(Bytes::from(chunk)), (n + 1, guard)))
                });
                let mut response = Response::new(Body::from_stream(frames));
                response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
                response
            }
        }),
    );
    let upstream = spawn(router).await;
    let addr = gateway(&format!("providers:\n  up: {{ protocol: openai, base_url: \"http://{upstream}\" }}\nmodels:\n  endless: {{ provider: up }}\n")).await;
    // Read the first frames over a raw socket, then hang up.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = chat_body(Protocol::Anthropic, "endless", "go", true);
    let request = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("t2 ") {
        let mut buf = [0u8; 4096];
        let n = socket.read(&mut buf).await.unwrap();
        assert!(n > 0, "stream ended early");
        seen.extend_from_slice(&buf[..n]);
    }
    drop(socket);
    tokio::time::timeout(Duration::from_secs(5), rx).await.expect("the upstream call was not cancelled").unwrap();
}

#[tokio::test]
async fn a_trial_whose_caller_hangs_up_is_released_not_stuck() {
    let (upstream, faults) = fault_upstream().await;
    let pools = "  pair:\n    breaker: { consecutive_failures: 1, base_cooldown: 300ms, jitter: 0 }\n    members: [{ model: switch, weight: 100 }, { model: healthy }]\n";
    let addr = gateway(&chaos_config(upstream, pools)).await;
    faults.switch_failing.store(true, Ordering::SeqCst);
    assert_eq!(chat(addr, "pair", "trip").await.status, 200);
    faults.switch_failing.store(false, Ordering::SeqCst);
    let retry_in = lane_stats(&stats(addr).await, "pair", "switch")["retry_in_ms"].as_u64().unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(retry_in + 50)).await;
    // The trial goes to `switch`, which takes 200 ms; its caller hangs up first.
    {
        use tokio::io::AsyncWriteExt;
        let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
        let body = chat_body(Protocol::OpenAi, "pair", "impatient", false);
        let request = format!("POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len());
        socket.write_all(request.as_bytes()).await.unwrap();
        while faults.hits("switch") < 2 {
            tokio::task::yield_now().await;
        }
    }
    // The next request may be the trial again (the lane is not stuck half-open).
    let mut served_by_switch = false;
    for _ in 0..20 {
        let reply = chat(addr, "pair", "next").await;
        assert_eq!(reply.status, 200);
        if reply.headers["x-switchyard-lane"] == "switch" {
            served_by_switch = true;
            break;
        }
    }
    assert!(
        served_by_switch,
        "the abandoned trial was never released: {}",
        lane_stats(&stats(addr).await, "pair", "switch")
    );
    assert_eq!(lane_stats(&stats(addr).await, "pair", "switch")["breaker"], "closed");
}

#[tokio::test]
async fn a_stream_still_producing_outlives_the_whole_request_timeout() {
    let (upstream, _faults) = fault_upstream().await;
    let yaml = format!(
        "providers:\n  faulty: {{ protocol: openai, base_url: \"http://{upstream}\", timeouts: {{ request: 300ms, stream_idle: 2s }} }}\nmodels:\n  trickle: {{ provider: faulty }}\n"
    );
    let addr = gateway(&yaml).await;
    let started = std::time::Instant::now();
    let words = "one two three four five six seven eight nine ten eleven twelve";
    let reply = post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "trickle", words, true)).await;
    assert!(started.elapsed() > Duration::from_millis(300), "the stream took longer than `request`");
    let response = decode(Protocol::OpenAi, true, &reply.body);
    assert!(text_of(&response).contains("twelve"), "{}", text_of(&response));
    let stats = stats(addr).await;
    assert_eq!(lane_stats(&stats, "trickle", "trickle")["upstream_failures"], 0);
}

#[tokio::test]
async fn a_probe_whose_reply_hangs_fails_in_time() {
    let (upstream, _faults) = fault_upstream().await;
    let (_addr, gateway) = gateway_handle(&chaos_config(upstream, "  p: { members: [{ model: hangbody }] }\n")).await;
    let lane = gateway.lanes.iter().find(|l| &*l.name == "hangbody").unwrap();
    let started = std::time::Instant::now();
    assert!(!switchyard_engine::probe(&gateway, lane).await);
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
}

/// The text of an OpenAI Chat stream, and whether it ended with `[DONE]`.
fn chat_stream_text(body: &[u8]) -> (String, bool) {
    let text = String::from_utf8_lossy(body);
    let mut out = String::new();
    for data in text.split("\n\n").filter_map(|frame| frame.strip_prefix("data: ")) {
        if let Ok(chunk) = serde_json::from_str::<serde_json::Value>(data) {
            if let Some(piece) = chunk["choices"][0]["delta"]["content"].as_str() {
                out.push_str(piece);
            }
        }
    }
    (out, text.contains("data: [DONE]"))
}

/// A stream cut mid-answer at every byte of its text is continued by the
/// next lane, by prefill (Claude) or by instruction (another protocol, or
/// after a lane that refuses prefill): the caller's text is the uncut
/// answer, once, with one terminator.
#[tokio::test]
async fn a_stream_cut_anywhere_mid_answer_is_continued_seamlessly() {
    let yaml = "providers:\n  claude: { protocol: anthropic, base_url: \"mock://\" }\n  \
                gpt: { protocol: openai, base_url: \"mock://\" }\n\
                models:\n  cut-claude: { provider: claude }\n  claude: { provider: claude }\n  \
                noprefill-claude: { provider: claude }\n  gpt: { provider: gpt }\n\
                pools:\n  prefill:\n    failover: { stream_failure: continue }\n    breaker: { consecutive_failures: 100000, failure_rate: 1.0 }\n    \
                members: [{ model: cut-claude, weight: 1000000 }, { model: claude, weight: 1 }]\n  \
                instruction:\n    failover: { stream_failure: continue, max_hops: 5 }\n    breaker: { consecutive_failures: 100000, failure_rate: 1.0 }\n    \
                members: [{ model: cut-claude, weight: 1000000 }, { model: noprefill-claude, weight: 1000 }, { model: gpt, weight: 1 }]\n  \
                ends:\n    breaker: { consecutive_failures: 100000, failure_rate: 1.0 }\n    \
                members: [{ model: cut-claude, weight: 1000000 }, { model: claude, weight: 1 }]\n";
    let addr = gateway(yaml).await;
    let answer = "The quick brown fox, naïve, jumps over the lazy dog.";
    for pool in ["prefill", "instruction"] {
        for cut in 1..answer.len() {
            let text = format!("[mock:plain] [mock:cut={cut}] {answer}");
            let body = chat_body(Protocol::OpenAi, pool, &text, true);
            let reply = post(addr, "/v1/chat/completions", &[], body).await;
            assert_eq!(reply.status, 200);
            let (got, done) = chat_stream_text(&reply.body);
            assert_eq!(got, answer, "{pool}, cut after {cut} bytes");
            assert!(done, "{pool}, cut after {cut}: one terminator");
        }
    }
    // Without `stream_failure: continue` the cut is the caller's error.
    let body = chat_body(Protocol::OpenAi, "ends", &format!("[mock:plain] [mock:cut=10] {answer}"), true);
    let reply = post(addr, "/v1/chat/completions", &[], body).await;
    let (got, done) = chat_stream_text(&reply.body);
    assert!(!done && answer.starts_with(&got) && got.len() < answer.len(), "{got:?}");
    let metrics = get_with(admin(addr), "/metrics", &[("authorization", &format!("Bearer {ADMIN_TOKEN}"))]).await;
    let metrics = String::from_utf8_lossy(&metrics.body);
    let recovered =
        format!("switchyard_stream_continuations_total{{outcome=\"recovered\"}} {}", 2 * (answer.len() - 1));
    assert!(metrics.contains(&recovered), "{recovered} in\n{metrics}");
}

/// Reads one counter of the gateway's `/metrics`.
async fn counter(addr: std::net::SocketAddr, series: &str) -> u64 {
    let metrics = get_with(admin(addr), "/metrics", &[("authorization", &format!("Bearer {ADMIN_TOKEN}"))]).await;
    let metrics = String::from_utf8_lossy(&metrics.body);
    metrics.lines().find_map(|line| line.strip_prefix(series).and_then(|rest| rest.trim().parse().ok())).unwrap_or(0)
}

/// Streams over a lane whose first token is late one time in four: with
/// hedging each late one is answered by the other lane near the hedge's
/// trigger; without it the caller waits out the tail. The hedges are
/// counted, the late lane's breaker hears nothing, and the loser is
/// cancelled.
#[tokio::test]
async fn hedging_cuts_the_tail_of_a_slow_first_token() {
    let (upstream, faults) = fault_upstream().await;
    let members = "members: [{ model: tail, weight: 100 }, { model: healthy, weight: 1 }]";
    let pools =
        format!("  hedged: {{ hedge: {{ after: 100ms, max_extra: 100% }}, {members} }}\n  plain: {{ {members} }}\n");
    let addr = gateway(&chaos_config(upstream, &pools)).await;
    let mut slowest = Vec::new();
    for pool in ["plain", "hedged"] {
        let mut times = Vec::new();
        for n in 0..16 {
            let started = std::time::Instant::now();
            let body = chat_body(Protocol::OpenAi, pool, &format!("question {n}"), true);
            let reply = post(addr, "/v1/chat/completions", &[], body).await;
            assert_eq!(reply.status, 200);
            let (text, done) = chat_stream_text(&reply.body);
            assert!(done && !text.is_empty(), "{pool}: a whole answer");
            times.push(started.elapsed());
        }
        times.sort();
        slowest.push(times[times.len() - 1]);
    }
    eprintln!("slowest of 16 streams: without hedging {:?}, with {:?}", slowest[0], slowest[1]);
    assert!(slowest[0] >= Duration::from_millis(800), "without hedging the tail shows: {:?}", slowest[0]);
    assert!(slowest[1] < Duration::from_millis(600), "with hedging it is cut: {:?}", slowest[1]);
    // 32 requests reached the tail lane; each late one (hits 1, 5, 9, ...)
    // was answered by the hedge.
    assert_eq!(faults.hits("tail"), 32);
    let won = counter(addr, "switchyard_hedges_total{pool=\"hedged\",outcome=\"hedge_won\"}").await;
    assert_eq!(won, 4, "one hedge per late first token");
    let stats = stats(addr).await;
    assert_eq!(lane_stats(&stats, "hedged", "tail")["upstream_failures"], 0, "a cancelled loser is no failure");
}

/// The extra attempts stay within the pool's share of its traffic, and a
/// request offering tools at a sampling temperature is never hedged.
#[tokio::test]
async fn hedges_are_capped_at_their_share_and_spare_sampled_tool_calls() {
    let (upstream, _faults) = fault_upstream().await;
    let pools = "  share: { hedge: { after: 50ms, max_extra: 10% }, members: [{ model: tail_always, weight: 100 }, { model: healthy, weight: 1 }] }\n  \
                 tools: { hedge: { after: 50ms, max_extra: 100% }, members: [{ model: tail_always, weight: 100 }, { model: healthy, weight: 1 }] }\n";
    let addr = gateway(&chaos_config(upstream, pools)).await;
    // 30 late streams at once: each earns a tenth of a hedge.
    let calls = (0..30).map(|n| {
        let body = chat_body(Protocol::OpenAi, "share", &format!("question {n}"), true);
        post(addr, "/v1/chat/completions", &[], body)
    });
    for reply in futures_util::future::join_all(calls).await {
        assert_eq!(reply.status, 200);
    }
    let series = |outcome: &str| format!("switchyard_hedges_total{{pool=\"share\",outcome=\"{outcome}\"}}");
    let started = counter(addr, &series("hedge_won")).await + counter(addr, &series("primary_won")).await;
    let denied = counter(addr, &series("denied")).await;
    assert_eq!((started, denied), (3, 27), "10% of 30 late requests hedged");
    // Tools at temperature 1: not hedged; at temperature 0: hedged.
    let tool = serde_json::json!({"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}});
    for (temperature, hedged) in [(1.0, 0), (0.0, 1)] {
        let body = serde_json::json!({"model": "tools", "stream": true, "temperature": temperature, "tools": [tool],
            "messages": [{"role": "user", "content": "hi"}]});
        let reply = post(addr, "/v1/chat/completions", &[], body.to_string().into_bytes()).await;
        assert_eq!(reply.status, 200);
        let won = counter(addr, "switchyard_hedges_total{pool=\"tools\",outcome=\"hedge_won\"}").await;
        assert_eq!(won, hedged, "temperature {temperature}");
    }
}
