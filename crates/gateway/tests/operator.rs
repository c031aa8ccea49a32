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

use crate::common;

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
    admin_as(addr, ADMIN_TOKEN, method, path, headers, body.to_string()).await
}

/// An admin call by `token` with extra headers and a body sent as it is.
async fn admin_as(
    addr: std::net::SocketAddr,
    token: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: String,
) -> Reply {
    use http_body_util::BodyExt;
    let client: hyper_util::client::legacy::Client<_, http_body_util::Full<bytes::Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
    let mut request = http::Request::builder()
        .method(method)
        .uri(format!("http://{}{path}", admin(addr)))
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client.request(request.body(http_body_util::Full::new(body.into())).unwrap()).await.unwrap();
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

/// A governed gateway on SQLite that alerts `webhook`, its watcher and
/// sampler running, serving.
async fn alerting(
    webhook: &str,
    extra: &str,
) -> (std::net::SocketAddr, std::sync::Arc<switchyard_gateway::Gateway>, std::path::PathBuf) {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let db = std::env::temp_dir().join(format!("switchyard-alerts-{}-{}.db", std::process::id(), fastrand::u32(..)));
    let yaml = format!(
        "providers:\n  gone: {{ protocol: openai, base_url: \"http://{closed}\" }}\n  fake: {{ protocol: openai, base_url: \"mock://\" }}\n\
         models:\n  dead: {{ provider: gone }}\n  healthy: {{ provider: fake }}\n  failing: {{ provider: fake }}\n\
         pools:\n  flaky:\n    breaker: {{ consecutive_failures: 1, base_cooldown: 60s, jitter: 0 }}\n    members: [{{ model: dead }}]\n  \
         b: {{ members: [{{ model: healthy }}] }}\n  \
         errs:\n    breaker: {{ consecutive_failures: 1000, failure_rate: 1.0, min_requests: 1000 }}\n    members: [{{ model: failing }}]\n\
         rate_card:\n  dead: {{ input_utok: 1000, output_utok: 2000 }}\n  healthy: {{ input_utok: 1000, output_utok: 2000 }}\n  failing: {{ input_utok: 1000, output_utok: 2000 }}\n\
         auth: {{ mode: keys }}\nstorage: {{ sqlite_path: \"{}\" }}\n\
         governance: {{ ledger_flush_interval: 20ms, ledger_queue: 1, suspend: {{ after: 3, within: 1m, for: 10m }} }}\n\
         alerts: {{ webhook: \"{webhook}\", dedup: 5m, error_rate: {{ above: 0.5, min_requests: 5 }} }}\n{extra}",
        db.display()
    );
    let (addr, gateway) = governed(&yaml).await;
    switchyard_gateway::reload::start_tasks(&gateway);
    gateway.lifecycle.serving();
    (addr, gateway, db)
}

fn firing(kind: &'static str, subject: &'static str) -> impl Fn(&serde_json::Value) -> bool {
    move |v| v["kind"] == kind && v["state"] == "firing" && v["subject"].as_str().unwrap_or("").contains(subject)
}

fn resolved(kind: &'static str, subject: &'static str) -> impl Fn(&serde_json::Value) -> bool {
    move |v| v["kind"] == kind && v["state"] == "resolved" && v["subject"].as_str().unwrap_or("").contains(subject)
}

fn open_chat(model: &str, text: &str) -> String {
    chat_body(Protocol::OpenAi, model, text, false)
}

async fn chat_text(addr: std::net::SocketAddr, model: &str, key: &str, text: &str) -> Reply {
    let bearer = format!("Bearer {key}");
    post(addr, "/v1/chat/completions", &[("authorization", &bearer)], open_chat(model, text)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_alert_kind_reaches_the_webhook_once() {
    let (webhook, got) = webhook_receiver().await;
    let (addr, gateway, db) = alerting(&webhook, "").await;
    let key = create_key(addr, json!({"name": "ops"})).await;
    let secret = key["key"].as_str().unwrap().to_owned();

    // A lane's breaker opens: its pool has nothing left either.
    assert_ne!(chat_text(addr, "flaky", &secret, "hi").await.status, 200);
    let opened = received(&got, "breaker_opened", firing("breaker_opened", "`flaky` lane `dead`")).await;
    for member in ["kind", "subject", "at", "detail"] {
        assert!(!opened[member].is_null(), "{member} missing: {opened}");
    }
    received(&got, "pool_exhausted", firing("pool_exhausted", "`flaky`")).await;
    // An admin closes it: the breaker's close and the pool's recovery are told.
    let reset = admin_call(addr, "POST", "/api/v1/admin/lanes/flaky/dead/reset", Some(ADMIN_TOKEN), None).await;
    assert_eq!(reset.status, 200, "{}", String::from_utf8_lossy(&reset.body));
    received(&got, "breaker_closed", firing("breaker_closed", "`flaky` lane `dead`")).await;
    received(&got, "pool_exhausted resolved", resolved("pool_exhausted", "`flaky`")).await;
    // It trips again within the dedup window: not sent a second time.
    assert_ne!(chat_text(addr, "flaky", &secret, "hi").await.status, 200);
    let alerts = gateway.telemetry.alerts.as_ref().unwrap();
    for _ in 0..100 {
        if alerts.is_open(switchyard_telemetry::alert::AlertKind::BreakerOpened, "pool `flaky` lane `dead`") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(alerts.is_open(switchyard_telemetry::alert::AlertKind::BreakerOpened, "pool `flaky` lane `dead`"));

    // Most answers of the last minutes are 5xx.
    for _ in 0..6 {
        assert!(chat_text(addr, "errs", &secret, "[mock:status=500]").await.status.is_server_error());
    }
    received(&got, "error_rate", firing("error_rate", "gateway")).await;

    // A budget crosses 80 %, then 100 %.
    let spender = create_key(addr, json!({"name": "spender", "budget": {"usd": 100.0, "window": "1d"}})).await;
    let (spender_id, spender_secret) =
        (spender["id"].as_str().unwrap().to_owned(), spender["key"].as_str().unwrap().to_owned());
    let mut body: serde_json::Value = serde_json::from_str(&open_chat("b", "spend a little")).unwrap();
    body["max_tokens"] = json!(50);
    let bearer = format!("Bearer {spender_secret}");
    assert_eq!(post(addr, "/v1/chat/completions", &[("authorization", &bearer)], body.to_string()).await.status, 200);
    let mut spent = 0.0;
    for _ in 0..100 {
        let view = admin_call(addr, "GET", &format!("/api/v1/admin/keys/{spender_id}"), Some(ADMIN_TOKEN), None).await;
        let view: serde_json::Value = serde_json::from_slice(&view.body).unwrap();
        spent = view["usage"]["spent_usd"].as_f64().unwrap_or(0.0);
        if spent > 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(spent > 0.0);
    let patch = |usd: f64| json!({"budget": {"usd": usd, "window": "1d"}});
    let path = format!("/api/v1/admin/keys/{spender_id}");
    assert_eq!(admin_call(addr, "PATCH", &path, Some(ADMIN_TOKEN), Some(patch(spent / 0.85))).await.status, 200);
    received(&got, "budget 80%", firing("budget_threshold", "`spender`")).await;
    assert_eq!(admin_call(addr, "PATCH", &path, Some(ADMIN_TOKEN), Some(patch(spent))).await.status, 200);
    let full = received(&got, "budget 100%", |v| {
        v["kind"] == "budget_threshold" && v["subject"].as_str().unwrap_or("").contains("100%")
    })
    .await;
    assert!(full["subject"].as_str().unwrap().contains("spender"), "{full}");

    // The ledger cannot write: its queue fills.
    // Held until the alert arrives: how long the burst's rows take to reach
    // the writer depends on the machine's load (settlement also writes the
    // key's last use, which waits on the same lock).
    let (held, holding) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let locked = {
        let db = db.clone();
        std::thread::spawn(move || {
            let conn = rusqlite::Connection::open(&db).unwrap();
            conn.busy_timeout(Duration::from_secs(10)).unwrap();
            conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
            held.send(()).unwrap();
            let _ = released.recv_timeout(Duration::from_secs(30));
            conn.execute_batch("COMMIT").unwrap();
        })
    };
    // The burst starts once the lock is held, however loaded the machine.
    tokio::task::spawn_blocking(move || holding.recv().unwrap()).await.unwrap();
    let burst = (0..6).map(|i| {
        let secret = secret.clone();
        async move { chat_text(addr, "b", &secret, &format!("row {i}")).await.status }
    });
    let statuses = futures_util::future::join_all(burst).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    received(&got, "ledger_degraded", firing("ledger_degraded", "ledger")).await;
    release.send(()).unwrap();
    locked.join().unwrap();
    received(&got, "ledger_degraded resolved", resolved("ledger_degraded", "ledger")).await;

    // Each alert was sent firing once for its subject.
    let bodies = got.lock().unwrap().clone();
    for kind in ["breaker_opened", "pool_exhausted", "breaker_closed", "error_rate", "ledger_degraded"] {
        let mut subjects: Vec<&str> = bodies
            .iter()
            .filter(|v| v["kind"] == kind && v["state"] == "firing")
            .filter_map(|v| v["subject"].as_str())
            .collect();
        let all = subjects.len();
        subjects.sort_unstable();
        subjects.dedup();
        assert_eq!(subjects.len(), all, "{kind} sent twice for one subject: {bodies:?}");
    }
    // The console's open alerts come from the admin API.
    let open = admin_call(addr, "GET", "/api/v1/admin/alerts", Some(ADMIN_TOKEN), None).await;
    let open: serde_json::Value = serde_json::from_slice(&open.body).unwrap();
    assert!(open["open"].as_array().unwrap().iter().any(|a| a["kind"] == "breaker_opened"), "{open}");
    let _ = std::fs::remove_file(&db);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_refused_too_often_is_suspended_until_lifted() {
    let (webhook, got) = webhook_receiver().await;
    let (addr, _gateway, db) = alerting(&webhook, "").await;
    let key = create_key(addr, json!({"name": "abuser", "limits": {"rpm": 1}})).await;
    let (id, secret) = (key["id"].as_str().unwrap().to_owned(), key["key"].as_str().unwrap().to_owned());
    assert_eq!(chat_text(addr, "b", &secret, "one").await.status, 200);
    for _ in 0..3 {
        assert_eq!(chat_text(addr, "b", &secret, "more").await.status, 429);
    }
    // Suspended: a 403 of its own, whatever it asks.
    let mut suspended = None;
    for _ in 0..100 {
        let reply = chat_text(addr, "b", &secret, "again").await;
        if reply.status == 403 {
            suspended = Some(reply);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let suspended = suspended.expect("the key was never suspended");
    let body: serde_json::Value = serde_json::from_slice(&suspended.body).unwrap();
    assert_eq!(body["error"]["code"], "key_suspended", "{body}");
    let view = admin_call(addr, "GET", &format!("/api/v1/admin/keys/{id}"), Some(ADMIN_TOKEN), None).await;
    let view: serde_json::Value = serde_json::from_slice(&view.body).unwrap();
    assert_eq!(view["state"], "suspended");
    received(&got, "key_suspended", firing("key_suspended", "`abuser`")).await;

    // An admin lifts it: it is served again (its rate limit still applies).
    let lifted =
        admin_call(addr, "DELETE", &format!("/api/v1/admin/keys/{id}/suspension"), Some(ADMIN_TOKEN), None).await;
    assert_eq!(lifted.status, 200, "{}", String::from_utf8_lossy(&lifted.body));
    let after = chat_text(addr, "b", &secret, "back").await;
    assert_ne!(after.status, 403, "{}", String::from_utf8_lossy(&after.body));
    received(&got, "key_suspended resolved", resolved("key_suspended", "`abuser`")).await;
    let _ = std::fs::remove_file(&db);
}

#[tokio::test]
async fn end_users_have_their_own_limits_overrides_and_spend() {
    let mut yaml = lanes_config("mock://");
    yaml.push_str("rate_card:\n");
    for p in Protocol::ALL {
        yaml.push_str(&format!("  lane-{p}: {{ input_utok: 1000, output_utok: 2000 }}\n"));
    }
    yaml.push_str("auth: { mode: keys }\ngovernance: { ledger_flush_interval: 20ms }\n");
    let (addr, _) = governed(&yaml).await;
    let team = json!({"name": "team", "end_users": {"limits": {"rpm": 2}}});
    assert_eq!(admin_call(addr, "POST", "/api/v1/admin/groups", Some(ADMIN_TOKEN), Some(team)).await.status, 201);
    let key = create_key(addr, json!({"name": "app", "group": "team"})).await;
    let (id, secret) = (key["id"].as_str().unwrap().to_owned(), key["key"].as_str().unwrap().to_owned());
    let bearer = format!("Bearer {secret}");
    let as_user = |user: &'static str| {
        let mut body: serde_json::Value = serde_json::from_str(&open_chat("lane-openai", "hi")).unwrap();
        body["user"] = json!(user);
        body.to_string()
    };
    let ask = |body: String, header: Option<&'static str>| {
        let bearer = bearer.clone();
        async move {
            let mut headers = vec![("authorization", bearer.as_str())];
            if let Some(user) = header {
                headers.push(("x-switchyard-user", user));
            }
            post(addr, "/v1/chat/completions", &headers, body).await
        }
    };
    // Each end user has the group's two requests a minute.
    for _ in 0..2 {
        assert_eq!(ask(as_user("u1"), None).await.status, 200);
    }
    let refused = ask(as_user("u1"), None).await;
    assert_eq!(refused.status, 429, "{}", String::from_utf8_lossy(&refused.body));
    assert!(String::from_utf8_lossy(&refused.body).contains("end user `u1` of group `team`"));
    // The operator's header names the same end user, whatever the body says.
    assert_eq!(ask(as_user("u2"), Some("u1")).await.status, 429);
    assert_eq!(ask(as_user("u2"), None).await.status, 200);
    // An override names an id a request can carry (ids are cut to end_users.max_length).
    let long_id = format!("/api/v1/admin/groups/team/end-users/{}", "y".repeat(200));
    let refused = admin_call(addr, "PUT", &long_id, Some(ADMIN_TOKEN), Some(json!({"limits": {"rpm": 1}}))).await;
    assert_eq!(refused.status, 400, "{}", String::from_utf8_lossy(&refused.body));
    // An override gives one end user more.
    let more = json!({"limits": {"rpm": 100}});
    let put = admin_call(addr, "PUT", "/api/v1/admin/groups/team/end-users/u1", Some(ADMIN_TOKEN), Some(more)).await;
    assert_eq!(put.status, 200, "{}", String::from_utf8_lossy(&put.body));
    let view: serde_json::Value = serde_json::from_slice(&put.body).unwrap();
    assert_eq!(view["end_users"]["overrides"]["u1"]["limits"]["rpm"], 100, "{view}");
    assert_eq!(ask(as_user("u1"), None).await.status, 200);
    // A long id is cut to end_users.max_length.
    let long: &'static str = Box::leak("x".repeat(300).into_boxed_str());
    assert_eq!(ask(as_user("u3"), Some(long)).await.status, 200);

    // Spend by end user, for this key: five requests served, two refused
    // (every row written before the long id's is read).
    let rows = ledger_rows(addr, &format!("key={id}"), 7).await;
    assert!(rows.iter().any(|r| r["end_user"].as_str().is_some_and(|u| u.len() == 128)), "{rows:?}");
    let spend =
        admin_call(addr, "GET", &format!("/api/v1/admin/spend?by=user&key={id}"), Some(ADMIN_TOKEN), None).await;
    let spend: serde_json::Value = serde_json::from_slice(&spend.body).unwrap();
    let users: Vec<&str> = spend["data"].as_array().unwrap().iter().filter_map(|l| l["value"].as_str()).collect();
    assert!(users.contains(&"u1") && users.contains(&"u2"), "{spend}");
    let u1 = spend["data"].as_array().unwrap().iter().find(|l| l["value"] == "u1").unwrap();
    assert_eq!(u1["requests"], 3, "{spend}");
    let csv =
        admin_call(addr, "GET", &format!("/api/v1/admin/spend?by=user&key={id}&format=csv"), Some(ADMIN_TOKEN), None)
            .await;
    assert!(String::from_utf8_lossy(&csv.body).contains("u1"));
    // Removing the override puts u1 back under the default.
    let gone = admin_call(addr, "DELETE", "/api/v1/admin/groups/team/end-users/u1", Some(ADMIN_TOKEN), None).await;
    assert_eq!(gone.status, 200);
    assert_eq!(ask(as_user("u1"), None).await.status, 429);
}

/// A config with pools `p` (and `extra`), admin token and SQLite storage at `db`.
fn versioned_config(db: &std::path::Path, extra: &str) -> String {
    format!(
        "admin: {{ tokens: [{ADMIN_TOKEN}] }}\nstorage: {{ sqlite_path: \"{}\" }}\n\
         providers:\n  fake: {{ protocol: openai, base_url: mock://, api_key: sk-literal-secret-0123456789 }}\n\
         models:\n  a: {{ provider: fake }}\npools:\n  p: {{ members: [{{ model: a }}] }}\n{extra}",
        db.display()
    )
}

async fn admin_text(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: serde_json::Value,
) -> (u16, serde_json::Value, Option<String>) {
    let reply = admin_with(addr, method, path, headers, body).await;
    let etag = reply.headers.get("etag").map(|v| v.to_str().unwrap().to_owned());
    (reply.status.as_u16(), serde_json::from_slice(&reply.body).unwrap_or_default(), etag)
}

async fn open_status(addr: std::net::SocketAddr, model: &str) -> u16 {
    post(addr, "/v1/chat/completions", &[], open_chat(model, "hi")).await.status.as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_versions_apply_diff_and_roll_back_on_one_node() {
    let db = std::env::temp_dir().join(format!("switchyard-versions-{}-{}.db", std::process::id(), fastrand::u32(..)));
    let first = versioned_config(&db, "");
    let (addr, _reloader, file) = reloadable(&first).await;
    // The running file is version 1.
    let (status, running, etag) = admin_text(addr, "GET", "/api/v1/admin/config", &[], json!(null)).await;
    assert_eq!((status, etag.as_deref()), (200, Some("\"1\"")), "{running}");
    assert_eq!(open_status(addr, "q").await, 404);

    // A change without If-Match is refused; with it, it serves.
    let second = versioned_config(&db, "  q: { members: [{ model: a }] }\n");
    let change = json!({"yaml": second, "message": "add q"});
    let (status, _, _) = admin_text(addr, "POST", "/api/v1/admin/config", &[], change.clone()).await;
    assert_eq!(status, 428);
    let (status, applied, etag) =
        admin_text(addr, "POST", "/api/v1/admin/config", &[("if-match", "\"1\"")], change.clone()).await;
    assert_eq!(status, 200, "{applied}");
    assert_eq!((applied["version"].as_i64(), etag.as_deref()), (Some(2), Some("\"2\"")));
    assert_eq!(open_status(addr, "q").await, 200);
    assert_eq!(*file.lock().unwrap(), second, "the file holds the applied text");
    // A writer that read version 1 loses nothing: 412.
    let third = versioned_config(&db, "  r: { members: [{ model: a }] }\n");
    let stale = json!({"yaml": third, "message": "add r"});
    let (status, body, _) = admin_text(addr, "POST", "/api/v1/admin/config", &[("if-match", "\"1\"")], stale).await;
    assert_eq!(status, 412, "{body}");
    // An invalid one is refused with its problems, and nothing changes.
    let broken = json!({"yaml": "pools: { p: { members: [{ model: nope }] } }\n", "message": "broken"});
    let (status, body, _) = admin_text(addr, "POST", "/api/v1/admin/config", &[("if-match", "\"2\"")], broken).await;
    assert_eq!(status, 400, "{body}");

    // The versions, who made them, and the diff; secrets never appear.
    let (_, versions, _) = admin_text(addr, "GET", "/api/v1/admin/config/versions", &[], json!(null)).await;
    let versions = versions.as_array().unwrap().clone();
    assert_eq!(versions.iter().map(|v| v["version"].as_i64().unwrap()).collect::<Vec<_>>(), [2, 1]);
    assert_eq!((versions[0]["author"].as_str(), versions[0]["message"].as_str()), (Some("token-1"), Some("add q")));
    assert_eq!(versions[1]["author"], "file");
    let (_, diff, _) = admin_text(addr, "GET", "/api/v1/admin/config/diff?from=1&to=2", &[], json!(null)).await;
    let diff = diff["diff"].as_str().unwrap();
    let added: Vec<&str> = diff.lines().filter(|l| l.starts_with('+') && !l.starts_with("+++")).collect();
    // The texts are shown redacted, as written.
    assert_eq!(added, ["+  q: { members: [{ model: a }] }"], "the new pool, and only it: {diff}");
    assert!(!diff.lines().any(|l| l.starts_with('-') && !l.starts_with("---")), "nothing removed: {diff}");
    let (_, detail, _) = admin_text(addr, "GET", "/api/v1/admin/config/versions/2", &[], json!(null)).await;
    let whole = detail.to_string();
    assert!(!whole.contains("sk-literal-secret"), "a secret was shown: {whole}");
    assert!(detail["yaml"].as_str().unwrap().contains("<redacted>"), "{detail}");

    // Rollback: version 1's text becomes version 3.
    let (status, rolled, _) =
        admin_text(addr, "POST", "/api/v1/admin/config/rollback/1", &[("if-match", "\"2\"")], json!({})).await;
    assert_eq!(status, 200, "{rolled}");
    assert_eq!(rolled["version"], 3);
    assert_eq!(open_status(addr, "q").await, 404);
    let (_, versions, _) = admin_text(addr, "GET", "/api/v1/admin/config/versions", &[], json!(null)).await;
    assert_eq!(versions[0]["message"], "rollback to version 1");
    let _ = std::fs::remove_file(&db);
}

/// A config as an operator writes one: comments, a literal provider key,
/// an alert webhook whose path is its secret, a read-only token.
fn commented_config(db: &std::path::Path) -> String {
    format!(
        "# Platform gateway: edited by hand and through the console.\n\
         admin:\n  tokens: [{ADMIN_TOKEN}, {{ name: viewer, token: {READER_TOKEN}, scope: read }}]\n\
         storage: {{ sqlite_path: \"{}\" }}\n\
         providers:\n  # The vendor's key, rotated monthly.\n  \
         fake: {{ protocol: openai, base_url: \"mock://\", api_key: sk-literal-secret-0123456789 }}\n\
         models:\n  a: {{ provider: fake }}\n  b: {{ provider: fake }}\n\
         pools:\n  p:\n    members:\n      - {{ model: a, weight: 3 }} # the usual share\n      - {{ model: b, weight: 1 }}\n\
         alerts:\n  # Ops channel.\n  webhook: https://hooks.slack.example/services/T0/B0/WEBHOOKSECRETPATH\n",
        db.display()
    )
}

const READER_TOKEN: &str = "reader-token-0123456789abcdef";

/// Every literal secret of `commented_config`.
const SECRETS: [&str; 4] = ["sk-literal-secret-0123456789", "WEBHOOKSECRETPATH", READER_TOKEN, ADMIN_TOKEN];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_running_config_edited_and_sent_back_keeps_every_secret_and_comment() {
    let db = std::env::temp_dir().join(format!("switchyard-roundtrip-{}-{}.db", std::process::id(), fastrand::u32(..)));
    let original = commented_config(&db);
    let (addr, _reloader, file) = reloadable(&original).await;
    let (status, running, etag) = admin_text(addr, "GET", "/api/v1/admin/config", &[], json!(null)).await;
    assert_eq!((status, etag.as_deref()), (200, Some("\"1\"")), "{running}");
    let shown = running["yaml"].as_str().unwrap().to_owned();
    for secret in SECRETS {
        assert!(!shown.contains(secret), "{secret} shown: {shown}");
    }
    // The operator's own text, comments and all, but for the secrets.
    for line in ["# Platform gateway", "# The vendor's key", "# the usual share", "# Ops channel."] {
        assert!(shown.contains(line), "{line} missing: {shown}");
    }
    assert!(shown.contains("api_key: \"<redacted>\""), "{shown}");

    // One weight changed: validated, applied, and the file is the original
    // with that weight changed, every secret and comment kept.
    let edited = shown.replace("weight: 3", "weight: 5");
    let validate = |text: String| admin_as(addr, ADMIN_TOKEN, "POST", "/api/v1/admin/config/validate", &[], text);
    let reply = validate(edited.clone()).await;
    let answer: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!((reply.status.as_u16(), answer["valid"].as_bool()), (200, Some(true)), "{answer}");
    assert_eq!(answer["kept_secrets"], SECRETS.len(), "{answer}");
    assert!(!answer.to_string().contains("sk-literal"), "{answer}");
    let change = json!({"yaml": edited, "message": "weigh a up"});
    let (status, applied, _) = admin_text(addr, "POST", "/api/v1/admin/config", &[("if-match", "\"1\"")], change).await;
    assert_eq!(status, 200, "{applied}");
    let written = file.lock().unwrap().clone();
    assert_eq!(
        written,
        original.replace("weight: 3", "weight: 5"),
        "the file is the operator's text, one weight changed"
    );
    assert!(!written.contains("<redacted>"));
    // Both diffs show the one line, and no secret.
    let (_, diff, _) = admin_text(addr, "GET", "/api/v1/admin/config/diff?from=1&to=2", &[], json!(null)).await;
    let diff = diff["diff"].as_str().unwrap();
    let changed: Vec<&str> = diff
        .lines()
        .filter(|l| (l.starts_with('+') || l.starts_with('-')) && !l.starts_with("+++") && !l.starts_with("---"))
        .collect();
    assert_eq!(
        changed,
        ["-      - { model: a, weight: 3 } # the usual share", "+      - { model: a, weight: 5 } # the usual share"],
        "{diff}"
    );

    // A placeholder moved, a webhook sent elsewhere, a key's destination
    // changed beside it: each refused with its path, the file untouched.
    let (_, running, _) = admin_text(addr, "GET", "/api/v1/admin/config", &[], json!(null)).await;
    let shown = running["yaml"].as_str().unwrap().to_owned();
    let refused = [
        (
            shown.replace(
                "models:\n",
                "  other: { protocol: openai, base_url: \"mock://\", api_key: <redacted> }\nmodels:\n",
            ),
            "providers.other.api_key",
        ),
        (shown.replace("hooks.slack.example", "collector.attacker.example"), "alerts.webhook"),
        (shown.replace("base_url: \"mock://\"", "base_url: \"https://attacker.example\""), "providers.fake.api_key"),
    ];
    for (text, path) in refused {
        let reply = validate(text.clone()).await;
        let answer: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        assert_eq!(answer["valid"], false, "{answer}");
        assert_eq!(answer["problems"][0]["path"], path, "{answer}");
        let (status, body, _) =
            admin_text(addr, "POST", "/api/v1/admin/config", &[("if-match", "\"2\"")], json!({"yaml": text})).await;
        assert_eq!(status, 400, "{body}");
        assert!(body.to_string().contains(path), "{body}");
        assert_eq!(*file.lock().unwrap(), written);
    }
    // An empty config is refused, not served as nothing.
    for empty in ["", "# nothing but a comment\n"] {
        let (status, body, _) =
            admin_text(addr, "POST", "/api/v1/admin/config", &[("if-match", "\"2\"")], json!({"yaml": empty})).await;
        assert_eq!(status, 400, "{body}");
        let answer: serde_json::Value = serde_json::from_slice(&validate(empty.to_owned()).await.body).unwrap();
        assert_eq!(answer["valid"], false, "{answer}");
    }

    // A read-only token reads the redacted text and changes nothing, nor
    // has a candidate checked with the running secrets put back.
    let reader = |method: &'static str, path: &'static str, body: String| {
        admin_as(addr, READER_TOKEN, method, path, &[("if-match", "\"2\"")], body)
    };
    let seen = reader("GET", "/api/v1/admin/config", String::new()).await;
    assert_eq!(seen.status, 200);
    let seen = String::from_utf8(seen.body.to_vec()).unwrap();
    for secret in SECRETS {
        assert!(!seen.contains(secret), "{secret} shown to a reader");
    }
    let hijack = shown.replace("hooks.slack.example", "collector.attacker.example");
    assert_eq!(reader("POST", "/api/v1/admin/config", json!({"yaml": shown}).to_string()).await.status, 403);
    assert_eq!(reader("POST", "/api/v1/admin/config/validate", hijack).await.status, 403);
    assert_eq!(reader("POST", "/api/v1/admin/config/reload", String::new()).await.status, 403);
    assert_eq!(*file.lock().unwrap(), written);
    let (_, versions, _) = admin_text(addr, "GET", "/api/v1/admin/config/versions", &[], json!(null)).await;
    assert_eq!(versions.as_array().unwrap().len(), 2, "{versions}");
    let _ = std::fs::remove_file(&db);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_config_refuses_api_changes_and_records_the_file() {
    let db = std::env::temp_dir().join(format!("switchyard-locked-{}-{}.db", std::process::id(), fastrand::u32(..)));
    let yaml = versioned_config(&db, "config: { locked: true }\n");
    let (addr, reloader, file) = reloadable(&yaml).await;
    let change = json!({"yaml": versioned_config(&db, ""), "message": "unlock"});
    let (status, body, _) = admin_text(addr, "POST", "/api/v1/admin/config", &[("if-match", "\"1\"")], change).await;
    assert_eq!(status, 409, "{body}");
    // The file changes and is reloaded: that is a version too.
    *file.lock().unwrap() = versioned_config(&db, "config: { locked: true }\n  # edited\n");
    reloader.reload().await.unwrap();
    let (_, versions, _) = admin_text(addr, "GET", "/api/v1/admin/config/versions", &[], json!(null)).await;
    assert_eq!(versions.as_array().unwrap().len(), 2, "{versions}");
    assert_eq!(versions[0]["author"], "file");
    let _ = std::fs::remove_file(&db);
}

/// Which lane served each of `n` chats to pool `p`.
async fn served_by(addr: std::net::SocketAddr, n: usize) -> std::collections::HashMap<String, usize> {
    let mut seen = std::collections::HashMap::new();
    for _ in 0..n {
        let reply = post(addr, "/v1/chat/completions", &[], open_chat("p", "hi")).await;
        assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
        let lane = reply.headers["x-switchyard-lane"].to_str().unwrap().to_owned();
        *seen.entry(lane).or_default() += 1;
    }
    seen
}

async fn patch_lane(addr: std::net::SocketAddr, lane: &str, body: serde_json::Value) -> Reply {
    admin_call(addr, "PATCH", &format!("/api/v1/admin/lanes/p/{lane}"), Some(ADMIN_TOKEN), Some(body)).await
}

#[tokio::test]
async fn an_operator_drains_one_lane_and_weighs_another_across_a_reload() {
    let db = std::env::temp_dir().join(format!("switchyard-drain-{}-{}.db", std::process::id(), fastrand::u32(..)));
    let yaml = format!(
        "admin: {{ tokens: [{ADMIN_TOKEN}] }}\nstorage: {{ sqlite_path: \"{}\" }}\n\
         providers:\n  fake: {{ protocol: openai, base_url: \"mock://\" }}\n\
         models:\n  x: {{ provider: fake }}\n  y: {{ provider: fake }}\n  z: {{ provider: fake }}\n  v: {{ provider: fake }}\n\
         pools:\n  p: {{ members: [{{ model: x }}, {{ model: y }}, {{ model: z }}] }}\n  \
         q: {{ fallback: [p], members: [{{ model: v }}] }}\n",
        db.display()
    );
    let (addr, reloader, text) = reloadable(&yaml).await;
    let shares = |pairs: &[(&str, usize)]| pairs.iter().map(|(l, n)| (l.to_string(), *n)).collect();
    assert_eq!(served_by(addr, 30).await, shares(&[("x", 10), ("y", 10), ("z", 10)]));

    // Drained: x takes nothing; its share goes to the others.
    let drained = patch_lane(addr, "x", json!({"drained": true})).await;
    assert_eq!(drained.status, 200, "{}", String::from_utf8_lossy(&drained.body));
    assert_eq!(served_by(addr, 30).await, shares(&[("y", 15), ("z", 15)]));

    // Weighed: y takes two of every three.
    let weighed = patch_lane(addr, "y", json!({"weight": 2})).await;
    let view: serde_json::Value = serde_json::from_slice(&weighed.body).unwrap();
    assert_eq!((view["weight"].as_u64(), view["configured_weight"].as_u64()), (Some(2), Some(1)), "{view}");
    assert_eq!(served_by(addr, 30).await, shares(&[("y", 20), ("z", 10)]));

    // A reload keeps what the operator set.
    text.lock().unwrap().push_str("# touched\n");
    reloader.reload().await.unwrap();
    assert_eq!(served_by(addr, 30).await, shares(&[("y", 20), ("z", 10)]));
    let lanes = admin_call(addr, "GET", "/api/v1/admin/lanes", Some(ADMIN_TOKEN), None).await;
    let lanes: serde_json::Value = serde_json::from_slice(&lanes.body).unwrap();
    let pool = lanes.as_array().unwrap().iter().find(|p| p["pool"] == "p").unwrap();
    let lane = |name: &str| pool["lanes"].as_array().unwrap().iter().find(|l| l["lane"] == name).unwrap().clone();
    assert_eq!((lane("x")["drained"].as_bool(), lane("y")["weight"].as_u64()), (Some(true), Some(2)), "{pool}");

    // Out of bounds or unknown: refused, nothing changed.
    assert_eq!(patch_lane(addr, "y", json!({"weight": 0})).await.status, 400);
    assert_eq!(patch_lane(addr, "y", json!({"weight": 2_000_000})).await.status, 400);
    assert_eq!(patch_lane(addr, "y", json!({"speed": 1})).await.status, 400);
    assert_eq!(patch_lane(addr, "nope", json!({"drained": true})).await.status, 404);

    // A drained lane is skipped in a fallback pool too: q's own lane and
    // p's x drained, q's requests reach y or z only.
    let drain_q =
        admin_call(addr, "PATCH", "/api/v1/admin/lanes/q/v", Some(ADMIN_TOKEN), Some(json!({"drained": true}))).await;
    assert_eq!(drain_q.status, 200);
    for _ in 0..6 {
        let reply = post(addr, "/v1/chat/completions", &[], open_chat("q", "hi")).await;
        assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
        let lane = reply.headers["x-switchyard-lane"].to_str().unwrap();
        assert!(lane == "y" || lane == "z", "{lane}");
    }

    // Every lane drained: the pool has nothing to send to, and says so.
    for lane in ["y", "z"] {
        assert_eq!(patch_lane(addr, lane, json!({"drained": true})).await.status, 200);
    }
    let refused = post(addr, "/v1/chat/completions", &[], open_chat("p", "hi")).await;
    assert_eq!(refused.status, 503, "{}", String::from_utf8_lossy(&refused.body));

    // Undrained, weight back to the configured one: even shares again.
    for lane in ["x", "y", "z"] {
        assert_eq!(patch_lane(addr, lane, json!({"drained": false, "weight": null})).await.status, 200);
    }
    let seen = served_by(addr, 30).await;
    assert_eq!(seen.values().sum::<usize>(), 30);
    assert!(seen.values().all(|n| (9..=11).contains(n)), "{seen:?}");

    // Each change is in the audit log, named by its lane.
    let audit = admin_call(addr, "GET", "/api/v1/admin/audit?limit=100", Some(ADMIN_TOKEN), None).await;
    let audit: serde_json::Value = serde_json::from_slice(&audit.body).unwrap();
    let targets: Vec<&str> = audit["data"].as_array().unwrap().iter().filter_map(|e| e["target"].as_str()).collect();
    assert!(targets.contains(&"p/x") && targets.contains(&"p/y"), "{targets:?}");
}
