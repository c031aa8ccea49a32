//! The operator's control over real TCP: entitlement on every hop (a
//! fallback pool is admitted like the first), readiness for load
//! balancers through start, all lanes down and drain, limits on admin
//! mutations, lost updates refused with 412, abuse suspension and its
//! lifting, alerts received once by a webhook, and end users' spend and
//! budgets.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;
use switchyard_protocol::ir::Protocol;

/// A pool `a` whose one lane is down for good (nobody listens), falling
/// back to pool `b` on the vendor fake; both priced, keys required.
fn fallback_config(extra: &str) -> String {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    format!(
        "providers:\n  gone: {{ protocol: openai, base_url: \"http://{closed}\" }}\n  fake: {{ protocol: openai, base_url: \"mock://\" }}\n\
         models:\n  dead: {{ provider: gone }}\n  healthy: {{ provider: fake }}\n\
         pools:\n  a: {{ fallback: [b], members: [{{ model: dead }}] }}\n  b: {{ members: [{{ model: healthy }}] }}\n\
         rate_card:\n  dead: {{ input_utok: 1000, output_utok: 2000 }}\n  healthy: {{ input_utok: 1000, output_utok: 2000 }}\n\
         auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n{extra}"
    )
}

async fn chat_with(addr: std::net::SocketAddr, model: &str, key: &str) -> Reply {
    let bearer = format!("Bearer {key}");
    post(
        addr,
        &ingress_path(Protocol::OpenAi, model, false),
        &[("authorization", &bearer)],
        chat_body(Protocol::OpenAi, model, "hi", false),
    )
    .await
}

/// Ledger rows, once the writer flushed `at_least` of them.
async fn ledger_rows(addr: std::net::SocketAddr, query: &str, at_least: usize) -> Vec<serde_json::Value> {
    for _ in 0..200 {
        let reply =
            admin_call(addr, "GET", &format!("/api/v1/admin/requests?limit=1000&{query}"), Some(ADMIN_TOKEN), None)
                .await;
        let page: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        let rows = page["data"].as_array().unwrap().clone();
        if rows.len() >= at_least {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the ledger never held {at_least} rows for {query}");
}

#[tokio::test]
async fn a_key_limited_to_a_pool_is_never_served_by_its_fallback() {
    let (addr, _) = governed(&fallback_config("")).await;
    let narrow = create_key(addr, json!({"name": "narrow", "pools": ["a"]})).await;
    let narrow_id = narrow["id"].as_str().unwrap().to_owned();
    let narrow = narrow["key"].as_str().unwrap();
    let wide = create_key(addr, json!({"name": "wide", "pools": ["a", "b"]})).await;
    let wide = wide["key"].as_str().unwrap();

    // The key that may use both is served by the fallback.
    let served = chat_with(addr, "a", wide).await;
    assert_eq!(served.status, 200, "{}", String::from_utf8_lossy(&served.body));
    assert_eq!(served.headers["x-switchyard-lane"], "healthy");

    // The key limited to `a` is not, however often it asks.
    for _ in 0..3 {
        let refused = chat_with(addr, "a", narrow).await;
        assert_ne!(refused.status, 200, "{}", String::from_utf8_lossy(&refused.body));
        assert!(refused.headers.get("x-switchyard-lane").is_none_or(|lane| lane != "healthy"));
    }
    // And the skip is on its record.
    let rows = ledger_rows(addr, &format!("key={narrow_id}"), 3).await;
    let attempts = rows[0]["attempts"].as_array().unwrap();
    assert!(attempts.iter().any(|a| a["lane"] == "healthy" && a["failure"] == "not_entitled"), "{attempts:?}");
    assert!(attempts.iter().all(|a| a["lane"] != "healthy" || a["status"].is_null()), "{attempts:?}");
}

#[tokio::test]
async fn readyz_follows_start_lanes_down_and_drain() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let yaml = format!(
        "providers:\n  gone: {{ protocol: openai, base_url: \"http://{closed}\" }}\n  fake: {{ protocol: openai, base_url: \"mock://\" }}\n\
         models:\n  dead: {{ provider: gone }}\n  healthy: {{ provider: fake }}\n\
         pools:\n  down:\n    breaker: {{ consecutive_failures: 1, base_cooldown: 60s, jitter: 0 }}\n    members: [{{ model: dead }}]\n  \
         up: {{ members: [{{ model: healthy }}] }}\n"
    );
    let (addr, gateway) = gateway_handle(&yaml).await;
    let readyz = || async move {
        let reply = get(addr, "/readyz").await;
        (reply.status.as_u16(), serde_json::from_slice::<serde_json::Value>(&reply.body).unwrap())
    };
    // Listening, not yet serving.
    let (status, body) = readyz().await;
    assert_eq!((status, body["status"].as_str()), (503, Some("starting")), "{body}");
    gateway.lifecycle.serving();
    let (status, body) = readyz().await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["pools"]["down"], "ok");

    // The dead lane trips: its pool says why, the other still serves.
    assert_ne!(
        post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "down", "hi", false)).await.status,
        200
    );
    let (status, body) = readyz().await;
    assert_eq!(status, 200, "{body}");
    assert!(body["pools"]["down"].as_str().unwrap().starts_with("all 1 lanes are down"), "{body}");
    assert_eq!(body["pools"]["up"], "ok");

    // Every lane down: not ready, a reason per pool.
    {
        let up = gateway.pools.iter().position(|p| &*p.name == "up").unwrap();
        gateway.pools[up].breaker(0).record_rate_limited(std::time::Instant::now(), Some(Duration::from_secs(30)));
    }
    let (status, body) = readyz().await;
    assert_eq!((status, body["status"].as_str()), (503, Some("unavailable")), "{body}");
    assert!(body["pools"]["up"].as_str().unwrap().contains("down"), "{body}");

    // Draining: not ready whatever the lanes.
    gateway.lifecycle.draining();
    let (status, body) = readyz().await;
    assert_eq!((status, body["status"].as_str()), (503, Some("draining")), "{body}");
    // Liveness stays.
    assert_eq!(get(addr, "/healthz").await.status, 200);
}

/// `admin_call` with extra headers.
async fn admin_with(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: serde_json::Value,
) -> Reply {
    use http_body_util::BodyExt;
    let client: hyper_util::client::legacy::Client<_, http_body_util::Full<bytes::Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
    let mut request = http::Request::builder()
        .method(method)
        .uri(format!("http://{}{path}", admin(addr)))
        .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response =
        client.request(request.body(http_body_util::Full::new(body.to_string().into())).unwrap()).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Reply { status, headers, body }
}

#[tokio::test]
async fn a_stale_if_match_is_a_412_never_a_silent_overwrite() {
    let (addr, _) = governed(&fallback_config("")).await;
    let key = create_key(addr, json!({"name": "k"})).await;
    let id = key["id"].as_str().unwrap();
    let read = admin_call(addr, "GET", &format!("/api/v1/admin/keys/{id}"), Some(ADMIN_TOKEN), None).await;
    let etag = read.headers["etag"].to_str().unwrap().to_owned();
    // Someone else changes it first.
    let first = admin_with(
        addr,
        "PATCH",
        &format!("/api/v1/admin/keys/{id}"),
        &[("if-match", &etag)],
        json!({"name": "first"}),
    )
    .await;
    assert_eq!(first.status, 200, "{}", String::from_utf8_lossy(&first.body));
    assert_ne!(first.headers["etag"].to_str().unwrap(), etag);
    // The write that read the old version is refused, and changes nothing.
    let stale = admin_with(
        addr,
        "PATCH",
        &format!("/api/v1/admin/keys/{id}"),
        &[("if-match", &etag)],
        json!({"name": "second"}),
    )
    .await;
    assert_eq!(stale.status, 412, "{}", String::from_utf8_lossy(&stale.body));
    let now = admin_call(addr, "GET", &format!("/api/v1/admin/keys/{id}"), Some(ADMIN_TOKEN), None).await;
    let now_body: serde_json::Value = serde_json::from_slice(&now.body).unwrap();
    assert_eq!(now_body["name"], "first");
    // With the current tag it goes through.
    let fresh = now.headers["etag"].to_str().unwrap().to_owned();
    let ok = admin_with(
        addr,
        "PATCH",
        &format!("/api/v1/admin/keys/{id}"),
        &[("if-match", &fresh)],
        json!({"name": "second"}),
    )
    .await;
    assert_eq!(ok.status, 200);

    // Groups the same way.
    let made = admin_call(addr, "POST", "/api/v1/admin/groups", Some(ADMIN_TOKEN), Some(json!({"name": "team"}))).await;
    assert_eq!(made.status, 201, "{}", String::from_utf8_lossy(&made.body));
    let read = admin_call(addr, "GET", "/api/v1/admin/groups/team", Some(ADMIN_TOKEN), None).await;
    let etag = read.headers["etag"].to_str().unwrap().to_owned();
    let budget = json!({"budget": {"usd": 5.0, "window": "1mo"}});
    assert_eq!(
        admin_with(addr, "PATCH", "/api/v1/admin/groups/team", &[("if-match", &etag)], budget).await.status,
        200
    );
    let stale =
        admin_with(addr, "PATCH", "/api/v1/admin/groups/team", &[("if-match", &etag)], json!({"budget": null})).await;
    assert_eq!(stale.status, 412);
}

#[tokio::test]
async fn admin_mutations_are_limited_per_token() {
    let (addr, _) = governed(&fallback_config(&format!(
        "admin: {{ mutations_per_minute: 3, tokens: [{ADMIN_TOKEN}, {{ name: other, token: other-token-0123456789 }}] }}\n"
    )))
    .await;
    for i in 0..3 {
        create_key(addr, json!({"name": format!("k{i}")})).await;
    }
    let limited = admin_call(addr, "POST", "/api/v1/admin/keys", Some(ADMIN_TOKEN), Some(json!({"name": "k4"}))).await;
    assert_eq!(limited.status, 429, "{}", String::from_utf8_lossy(&limited.body));
    let wait: u64 = limited.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=20).contains(&wait), "{wait}");
    // Reads are not limited; another token has its own allowance.
    assert_eq!(admin_call(addr, "GET", "/api/v1/admin/keys", Some(ADMIN_TOKEN), None).await.status, 200);
    let other =
        admin_call(addr, "POST", "/api/v1/admin/keys", Some("other-token-0123456789"), Some(json!({"name": "o"})))
            .await;
    assert_eq!(other.status, 201);
}
