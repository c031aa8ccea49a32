//! Routing over real TCP: native strategies, session affinity, and external
//! gates served by real HTTP sidecars on port 0 (ordering, rejection,
//! restriction, rewriting, grants, and every failure mode falling back per
//! `on_error`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use common::*;
use switchyard_protocol::ir::Protocol;

/// A sidecar that answers every call with `reply` after `delay`, and keeps
/// the payloads it was sent.
#[derive(Clone)]
struct Sidecar {
    status: StatusCode,
    reply: String,
    delay: Duration,
    seen: Arc<Mutex<Vec<serde_json::Value>>>,
}

async fn sidecar_handler(State(sidecar): State<Sidecar>, body: Bytes) -> Response {
    if let Ok(payload) = serde_json::from_slice(&body) {
        sidecar.seen.lock().unwrap().push(payload);
    }
    tokio::time::sleep(sidecar.delay).await;
    (sidecar.status, [("content-type", "application/json")], sidecar.reply.clone()).into_response()
}

async fn sidecar(status: u16, reply: &str, delay_ms: u64) -> (SocketAddr, Arc<Mutex<Vec<serde_json::Value>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let state = Sidecar {
        status: StatusCode::from_u16(status).unwrap(),
        reply: reply.to_owned(),
        delay: Duration::from_millis(delay_ms),
        seen: seen.clone(),
    };
    let router = axum::Router::new().route("/route", axum::routing::post(sidecar_handler)).with_state(state);
    (spawn(router).await, seen)
}

/// Three mock lanes: `a` (tags eu, cheap), `b` (tags us, pricey), `c` (no tags, unpriced).
fn config(pools: &str, extra: &str) -> String {
    format!(
        r#"providers:
  m-openai: {{ protocol: openai, base_url: "mock://" }}
  m-anthropic: {{ protocol: anthropic, base_url: "mock://" }}
  m-gemini: {{ protocol: gemini, base_url: "mock://" }}
models:
  a: {{ provider: m-openai, tags: [eu], tier: small }}
  b: {{ provider: m-anthropic, tags: [us], tier: large, billing: subscription }}
  c: {{ provider: m-gemini, billing: free }}
rate_card:
  a: {{ input_utok: 0.15, output_utok: 0.6 }}
  b: {{ input_utok: 3.0, output_utok: 15.0 }}
{extra}
pools:
{pools}"#
    )
}

async fn ask(addr: SocketAddr, pool: &str, headers: &[(&str, &str)]) -> Reply {
    post(addr, "/v1/chat/completions", headers, chat_body(Protocol::OpenAi, pool, "route me", false)).await
}

fn lane(reply: &Reply) -> &str {
    reply.headers.get("x-switchyard-lane").map_or("", |v| v.to_str().unwrap())
}

#[tokio::test]
async fn native_strategies_order_by_their_signal() {
    let pools = "  cheap: { hooks: [cheapest], members: [{ model: b }, { model: c }, { model: a }] }\n  plan: { hooks: [billing], members: [{ model: a }, { model: c }, { model: b }] }\n  busy: { hooks: [least_busy], members: [{ model: a }, { model: b }] }\n  plain: { hooks: [weighted], members: [{ model: a }, { model: b }] }\n";
    let addr = gateway(&config(pools, "")).await;
    for _ in 0..3 {
        let reply = ask(addr, "cheap", &[]).await;
        assert_eq!(lane(&reply), "a");
        assert_eq!(reply.headers["x-switchyard-route-policy"], "cheapest");
        assert_eq!(reply.headers["x-switchyard-route-target"], "a");
    }
    let reply = ask(addr, "plan", &[]).await;
    assert_eq!(lane(&reply), "b", "subscription first");
    assert_eq!(reply.headers["x-switchyard-billing"], "subscription");
    assert_eq!(reply.headers["x-switchyard-route-policy"], "billing");
    assert_eq!(ask(addr, "busy", &[]).await.headers["x-switchyard-route-policy"], "least_busy");
    // `weighted` named explicitly is the default: no policy header.
    assert!(ask(addr, "plain", &[]).await.headers.get("x-switchyard-route-policy").is_none());
    let stats = stats(addr).await;
    let cheap = stats["pools"].as_array().unwrap().iter().find(|p| p["pool"] == "cheap").unwrap();
    assert_eq!(cheap["routing"]["cheapest"]["selections"], 3);
}

#[tokio::test]
async fn sessions_stick_to_their_lane() {
    let addr = gateway(&config("  pair: { members: [{ model: a }, { model: b }, { model: c }] }\n", "")).await;
    for session in ["s-1", "s-2", "s-3"] {
        let first = lane(&ask(addr, "pair", &[("x-session-id", session)]).await).to_owned();
        for _ in 0..10 {
            let reply = ask(addr, "pair", &[("x-session-id", session)]).await;
            assert_eq!(lane(&reply), first, "session {session} moved");
            assert_eq!(reply.headers["x-switchyard-session"], session);
        }
    }
    // Without a session the pool still spreads.
    let mut lanes = std::collections::HashSet::new();
    for _ in 0..6 {
        lanes.insert(lane(&ask(addr, "pair", &[]).await).to_owned());
    }
    assert_eq!(lanes.len(), 3);
}

#[tokio::test]
async fn affinity_never_resurrects_a_tripped_lane() {
    // The pinned lane starts failing: the session is re-routed and counted.
    let upstream = {
        let fail = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = fail.clone();
        let router = axum::Router::new().route(
            "/v1/chat/completions",
            axum::routing::post(move |body: Bytes| {
                let flag = flag.clone();
                async move {
                    if flag.load(std::sync::atomic::Ordering::SeqCst) {
                        return (
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "{\"error\":{\"message\":\"down\",\"type\":\"server_error\"}}",
                        )
                            .into_response();
                    }
                    let reply = switchyard_transport::mock::respond(
                        switchyard_protocol::codec(Protocol::OpenAi),
                        None,
                        false,
                        switchyard_protocol::Framing::Sse,
                        &body,
                    );
                    let mut response = Response::new(axum::body::Body::new(reply.body));
                    *response.headers_mut() = reply.headers;
                    response
                }
            }),
        );
        (spawn(router).await, fail)
    };
    let yaml = format!(
        "providers:\n  flaky: {{ protocol: openai, base_url: \"http://{}\" }}\n  ok: {{ protocol: anthropic, base_url: \"mock://\" }}\nmodels:\n  x: {{ provider: flaky }}\n  y: {{ provider: ok }}\npools:\n  p: {{ breaker: {{ consecutive_failures: 1 }}, members: [{{ model: x, weight: 10 }}, {{ model: y }}] }}\n",
        upstream.0
    );
    let addr = gateway(&yaml).await;
    assert_eq!(lane(&ask(addr, "p", &[("x-session-id", "conv")]).await), "x");
    upstream.1.store(true, std::sync::atomic::Ordering::SeqCst);
    let reply = ask(addr, "p", &[("x-session-id", "conv")]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(lane(&reply), "y", "failed over from the tripped lane");
    // x is now tripped: the session stays off it, and the switch is counted.
    let reply = ask(addr, "p", &[("x-session-id", "conv")]).await;
    assert_eq!(lane(&reply), "y");
    let stats = stats(addr).await;
    let pool = stats["pools"].as_array().unwrap().iter().find(|p| p["pool"] == "p").unwrap();
    assert!(pool["affinity_switches"].as_u64().unwrap() >= 1, "{pool}");
}

fn gate(url: &str, extra: &str) -> String {
    format!("{{ module: webrequest, settings: {{ url: \"{url}\" }}{extra} }}")
}

#[tokio::test]
async fn a_gate_orders_and_sees_only_what_it_was_granted() {
    let (hook, seen) = sidecar(200, r#"{"order": [2, 2, 9]}"#, 0).await;
    let url = format!("http://{hook}/route");
    let pools = format!(
        "  smart: {{ hooks: [{}], members: [{{ model: a }}, {{ model: b }}, {{ model: c }}] }}\n",
        gate(&url, ", name: sizer")
    );
    let addr = gateway(&config(&pools, "")).await;
    let reply = ask(addr, "smart", &[]).await;
    assert_eq!(lane(&reply), "c");
    assert_eq!(reply.headers["x-switchyard-route-policy"], "sizer");
    let payload = seen.lock().unwrap()[0].clone();
    assert_eq!(payload["request"]["pool"], "smart");
    assert_eq!(payload["request"]["ingress_protocol"], "openai");
    assert_eq!(payload["request"]["message_count"], 1, "the system prompt is not a message");
    assert!(payload["request"].get("messages").is_none(), "no prompt grant, no text: {payload}");
    assert!(payload["request"].get("user").is_none());
    assert_eq!(payload["candidates"][0]["model"], "a");
    assert_eq!(payload["candidates"][0]["tags"], serde_json::json!(["eu"]));
    assert_eq!(payload["candidates"][1]["cost_per_mtok"], 18.0);
    assert!(payload["candidates"][2].get("tags").is_none());

    let (hook, seen) = sidecar(200, "{}", 0).await;
    let pools = format!(
        "  smart: {{ hooks: [{}], members: [{{ model: a }}] }}\n",
        gate(&format!("http://{hook}/route"), ", prompt: ro, user: ro")
    );
    let addr = gateway(&config(&pools, "")).await;
    ask(addr, "smart", &[]).await;
    let payload = seen.lock().unwrap()[0].clone();
    assert_eq!(payload["request"]["system"], "be brief");
    assert_eq!(payload["request"]["messages"][0]["text"], "route me");
    assert!(payload["request"].get("body").is_none(), "only rw sees the body");
}

#[tokio::test]
async fn rejections_are_clamped_and_in_the_callers_protocol() {
    let (hook, _) = sidecar(200, r#"{"reject": {"status": 200, "message": "blocked: contains an SSN"}}"#, 0).await;
    let pools = format!(
        "  guarded: {{ hooks: [{}], members: [{{ model: a }}] }}\n",
        gate(&format!("http://{hook}/route"), ", name: pii")
    );
    let addr = gateway(&config(&pools, "")).await;
    let reply = ask(addr, "guarded", &[]).await;
    assert_eq!(reply.status, 400, "a hook cannot mint a success");
    let body: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(body["error"]["message"], "blocked: contains an SSN");
    let reply = post(addr, "/guarded/v1/messages", &[], chat_body(Protocol::Anthropic, "x", "hi", false)).await;
    assert_eq!(reply.status, 400);
    let body: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(body["type"], "error", "anthropic error shape: {body}");
    let stats = stats(addr).await;
    let pool = stats["pools"].as_array().unwrap().iter().find(|p| p["pool"] == "guarded").unwrap();
    assert_eq!(pool["routing"]["pii"]["rejections"], 2);
}

#[tokio::test]
async fn broken_hooks_fall_back_per_on_error_within_their_timeout() {
    let (slow, _) = sidecar(200, r#"{"order": [1]}"#, 2_000).await;
    let (garbage, _) = sidecar(200, "not json at all", 0).await;
    let (failing, _) = sidecar(500, r#"{"order": [1]}"#, 0).await;
    let (huge, _) = sidecar(200, &format!("{{\"order\": [1], \"pad\": \"{}\"}}", "x".repeat(100 << 10)), 0).await;
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    for (name, url) in [("slow", slow), ("garbage", garbage), ("failing", failing), ("huge", huge), ("dead", dead)] {
        let url = format!("http://{url}/route");
        // weighted: a broken hook is as if there were none; requests keep flowing.
        let pools = format!(
            "  p: {{ hooks: [{}], members: [{{ model: a }}, {{ model: b }}] }}\n",
            gate(&url, ", timeout_ms: 100, on_error: weighted")
        );
        let addr = gateway(&config(&pools, "")).await;
        for _ in 0..4 {
            let started = std::time::Instant::now();
            let reply = ask(addr, "p", &[]).await;
            assert_eq!(reply.status, 200, "{name}");
            assert!(reply.headers.get("x-switchyard-route-policy").is_none(), "{name}");
            assert!(started.elapsed() < Duration::from_millis(1500), "{name}: the timeout bounds the wait");
        }
        // first: config order.
        let pools = format!(
            "  p: {{ hooks: [{}], members: [{{ model: b }}, {{ model: a }}] }}\n",
            gate(&url, ", timeout_ms: 100, on_error: first")
        );
        let addr = gateway(&config(&pools, "")).await;
        assert_eq!(lane(&ask(addr, "p", &[]).await), "b", "{name}");
        // reject: a security gate fails closed.
        let pools = format!(
            "  p: {{ hooks: [{}], members: [{{ model: a }}] }}\n",
            gate(&url, ", timeout_ms: 100, on_error: reject")
        );
        let addr = gateway(&config(&pools, "")).await;
        assert_eq!(ask(addr, "p", &[]).await.status, 503, "{name}");
        // a strategy as the fallback.
        let pools = format!(
            "  p: {{ hooks: [{}], members: [{{ model: b }}, {{ model: a }}] }}\n",
            gate(&url, ", timeout_ms: 100, on_error: cheapest")
        );
        let addr = gateway(&config(&pools, "")).await;
        assert_eq!(lane(&ask(addr, "p", &[]).await), "a", "{name}");
    }
}

#[tokio::test]
async fn named_fallbacks_restricts_rewrites_and_globals() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let (backup, _) = sidecar(200, r#"{"order": [1]}"#, 0).await;
    let pools = format!(
        "  p: {{ hooks: [{}, {}], members: [{{ model: a }}, {{ model: b }}, {{ model: c }}] }}\n",
        gate(&format!("http://{dead}/route"), ", name: primary, timeout_ms: 100, on_error: backup"),
        gate("http://127.0.0.1:1/never", ", name: backup-slot, timeout_ms: 100"),
    );
    // `backup` must be a defined hook: define it globally (it also runs on every request).
    let extra = format!("global_hooks: [{}]", gate(&format!("http://{backup}/route"), ", name: backup, priority: -1"));
    let addr = gateway(&config(&pools, &extra)).await;
    let reply = ask(addr, "p", &[]).await;
    assert_eq!(lane(&reply), "b");

    let (restrict, _) = sidecar(200, r#"{"restrict": {"tags": ["us"]}}"#, 0).await;
    let pools = format!(
        "  p: {{ hooks: [{}], members: [{{ model: a, weight: 5 }}, {{ model: b }}, {{ model: c }}] }}\n",
        gate(&format!("http://{restrict}/route"), "")
    );
    let addr = gateway(&config(&pools, "")).await;
    for _ in 0..5 {
        assert_eq!(lane(&ask(addr, "p", &[]).await), "b", "restricted to us-tagged lanes");
    }

    let rewritten = serde_json::json!({"rewrite": {"body": {"model": "p", "messages": [{"role": "user", "content": "[redacted]"}]}}}).to_string();
    let (rewriter, _) = sidecar(200, &rewritten, 0).await;
    let pools = format!(
        "  p: {{ hooks: [{}], members: [{{ model: a }}] }}\n",
        gate(&format!("http://{rewriter}/route"), ", prompt: rw, rewrite: true")
    );
    let addr = gateway(&config(&pools, "")).await;
    let reply = ask(addr, "p", &[]).await;
    let text = String::from_utf8_lossy(&reply.body).to_string();
    assert!(text.contains("you said: [redacted]"), "{text}");
    // The same reply without the grant is a grant violation: on_error (nothing) applies.
    let pools = format!(
        "  p: {{ hooks: [{}], members: [{{ model: a }}] }}\n",
        gate(&format!("http://{rewriter}/route"), ", prompt: ro")
    );
    let addr = gateway(&config(&pools, "")).await;
    let text = String::from_utf8_lossy(&ask(addr, "p", &[]).await.body).to_string();
    assert!(text.contains("you said: route me"), "{text}");
}

#[tokio::test]
async fn gates_fire_concurrently_and_the_last_order_by_priority_wins() {
    let (first, _) = sidecar(200, r#"{"order": [0]}"#, 300).await;
    let (second, _) = sidecar(200, r#"{"order": [1]}"#, 300).await;
    let pools = format!(
        "  p: {{ hooks: [{}, {}], members: [{{ model: a }}, {{ model: b }}] }}\n",
        gate(&format!("http://{second}/route"), ", name: high, priority: 5, timeout_ms: 2000"),
        gate(&format!("http://{first}/route"), ", name: low, priority: 1, timeout_ms: 2000"),
    );
    let addr = gateway(&config(&pools, "")).await;
    let started = std::time::Instant::now();
    let reply = ask(addr, "p", &[]).await;
    assert!(
        started.elapsed() < Duration::from_millis(550),
        "two 300 ms gates run side by side: {:?}",
        started.elapsed()
    );
    assert_eq!(lane(&reply), "b");
    assert_eq!(reply.headers["x-switchyard-route-policy"], "high");
}

#[tokio::test]
async fn the_usage_strategy_prefers_the_lane_its_upstream_says_has_room() {
    // An OpenAI upstream that reports how much of its rate limit is left:
    // plenty for `roomy`, almost none for `tight`.
    let upstream = spawn(axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(|body: Bytes| async move {
            let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let remaining = if value["model"] == "roomy" { "900" } else { "10" };
            let reply = switchyard_transport::mock::respond(
                switchyard_protocol::codec(Protocol::OpenAi),
                None,
                false,
                switchyard_protocol::Framing::Sse,
                &body,
            );
            let mut response = Response::new(axum::body::Body::new(reply.body));
            *response.headers_mut() = reply.headers;
            response.headers_mut().insert("x-ratelimit-limit-requests", "1000".parse().unwrap());
            response.headers_mut().insert("x-ratelimit-remaining-requests", remaining.parse().unwrap());
            response
        }),
    ))
    .await;
    let yaml = format!(
        "providers:\n  up: {{ protocol: openai, base_url: \"http://{upstream}\" }}\nmodels:\n  tight: {{ provider: up }}\n  roomy: {{ provider: up }}\npools:\n  smart: {{ hooks: [usage], members: [{{ model: tight }}, {{ model: roomy }}] }}\n"
    );
    let addr = gateway(&yaml).await;
    let mut lanes = Vec::new();
    for i in 0..8 {
        let reply =
            post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "smart", &format!("q{i}"), false))
                .await;
        lanes.push(reply.headers["x-switchyard-lane"].to_str().unwrap().to_owned());
    }
    // Until both lanes have answered once, `usage` has no signal for one of
    // them; from then on the roomy lane is first.
    assert!(lanes[..2].contains(&"tight".to_owned()), "{lanes:?}");
    assert!(lanes[4..].iter().all(|l| l == "roomy"), "{lanes:?}");
}
