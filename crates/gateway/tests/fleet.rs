//! Two gateway instances sharing one real PostgreSQL (the server
//! `scripts/services.sh` starts) and a real Redis of the test's own: a key
//! made on one works on the other, a revocation on one is refused by the
//! other within a second, both write one ledger, a budget holds fleet-wide
//! under 400 concurrent requests, a rate limit of N holds as N, and Redis
//! killed mid-load behaves as `on_redis_error` says, then recovers.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use common::{admin_call, chat_body, create_key, fleet_state_gateway, governed, post, ADMIN_TOKEN};
use http::StatusCode;
use switchyard_protocol::ir::Protocol;

/// A new database on the test server, or `None` outside the test command.
pub(crate) async fn fresh_database() -> Option<String> {
    let Ok(url) = std::env::var("SWITCHYARD_TEST_POSTGRES_URL") else {
        assert!(std::env::var("CI").is_err(), "CI runs PostgreSQL: run the tests through scripts/test.sh");
        eprintln!("SWITCHYARD_TEST_POSTGRES_URL is not set: fleet cases skipped (scripts/test.sh starts a server)");
        return None;
    };
    let name = format!("fleet_{}_{}", std::process::id(), fastrand::u32(..));
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    Some(format!("{}/{name}", url.rsplit_once('/').unwrap().0))
}

/// A spool file of the test's own (the default sits beside the process).
pub(crate) fn spool_path() -> String {
    std::env::temp_dir()
        .join(format!("switchyard-spool-{}-{}.db", std::process::id(), fastrand::u32(..)))
        .display()
        .to_string()
}

fn config(database: &str) -> String {
    let spool = spool_path();
    format!(
        "auth: {{ mode: keys }}\nadmin: {{ tokens: [{ADMIN_TOKEN}] }}\nstorage: {{ postgres_url: \"{database}\", ledger_spool: \"{spool}\" }}\n\
         governance: {{ ledger_flush_interval: 100ms }}\n\
         providers:\n  fake: {{ protocol: openai, base_url: mock:// }}\nmodels:\n  m: {{ provider: fake }}\n\
         rate_card:\n  m: {{ input_utok: 1, output_utok: 1 }}\n"
    )
}

async fn chat(addr: SocketAddr, key: &str) -> StatusCode {
    let auth = format!("Bearer {key}");
    post(addr, "/v1/chat/completions", &[("authorization", &auth)], chat_body(Protocol::OpenAi, "m", "hi", false))
        .await
        .status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_keys_revocations_and_the_ledger() {
    let Some(database) = fresh_database().await else { return };
    let (one, _) = governed(&config(&database)).await;
    let (two, _) = governed(&config(&database)).await;

    let created = create_key(one, serde_json::json!({"name": "shared"})).await;
    let (id, key) = (created["id"].as_str().unwrap(), created["key"].as_str().unwrap());
    // Every request served is one ledger row: counted as they come.
    let mut served = 1;
    let deadline = Instant::now() + Duration::from_secs(1);
    while chat(two, key).await != StatusCode::OK {
        assert!(Instant::now() < deadline, "a key made on one instance did not reach the other within 1 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(chat(one, key).await, StatusCode::OK);

    let revoked = admin_call(one, "DELETE", &format!("/api/v1/admin/keys/{id}"), Some(ADMIN_TOKEN), None).await;
    assert_eq!(revoked.status, StatusCode::OK);
    let at = Instant::now();
    loop {
        // A request the revocation has not reached yet is served, and billed.
        match chat(two, key).await {
            StatusCode::UNAUTHORIZED => break,
            StatusCode::OK => served += 1,
            _ => {}
        }
        assert!(
            at.elapsed() < Duration::from_secs(1),
            "a revocation on one instance was not refused by the other within 1 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Both instances' requests are in the one ledger.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let spend = admin_call(two, "GET", "/api/v1/admin/spend?by=key&from=0", Some(ADMIN_TOKEN), None).await;
        let body: serde_json::Value = serde_json::from_slice(&spend.body).unwrap();
        let requests: u64 = body["data"].as_array().unwrap().iter().map(|row| row["requests"].as_u64().unwrap()).sum();
        if requests == served + 1 {
            break;
        }
        assert!(Instant::now() < deadline, "ledger rows: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A Redis server of the test's own, on a fixed port so it can come back.
pub(crate) struct Redis {
    port: u16,
    child: Option<Child>,
}

impl Redis {
    pub(crate) fn start() -> Option<Redis> {
        let Ok(server) = std::env::var("SWITCHYARD_TEST_REDIS_SERVER") else {
            assert!(std::env::var("CI").is_err(), "CI runs Redis: run the tests through scripts/test.sh");
            eprintln!("SWITCHYARD_TEST_REDIS_SERVER is not set: Redis cases skipped (scripts/test.sh installs it)");
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut redis = Redis { port, child: None };
        redis.up(&server);
        Some(redis)
    }

    fn up(&mut self, server: &str) {
        let child = Command::new(server)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "redis did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    fn restart(&mut self) {
        self.up(&std::env::var("SWITCHYARD_TEST_REDIS_SERVER").unwrap());
    }

    /// Sends the server `signal` (`-STOP` freezes it, `-CONT` thaws it).
    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().unwrap().id().to_string();
        assert!(Command::new("kill").args([signal, &pid]).status().unwrap().success());
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Prices that make each request's reservation (its `max_tokens`) far
/// larger than what it costs, as in real traffic.
fn fleet_config(database: &str, redis: &str, on_error: &str) -> String {
    let spool = spool_path();
    format!(
        "auth: {{ mode: keys }}\nadmin: {{ tokens: [{ADMIN_TOKEN}] }}\n\
         storage: {{ postgres_url: \"{database}\", redis_url: \"{redis}\", on_redis_error: {on_error}, ledger_spool: \"{spool}\" }}\n\
         governance: {{ ledger_flush_interval: 100ms }}\n\
         providers:\n  fake: {{ protocol: openai, base_url: mock:// }}\nmodels:\n  m: {{ provider: fake }}\n\
         rate_card:\n  m: {{ input_utok: 1000, output_utok: 1000 }}\n"
    )
}

pub(crate) async fn ask(addr: SocketAddr, key: &str) -> (StatusCode, String) {
    let auth = format!("Bearer {key}");
    let body = serde_json::json!({"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "hello"}]});
    let reply = post(addr, "/v1/chat/completions", &[("authorization", &auth)], body.to_string()).await;
    (reply.status, String::from_utf8_lossy(&reply.body).into_owned())
}

/// The ledger's spend in USD, from the admin API of `addr`, once the rows
/// of `requests` requests are in.
pub(crate) async fn spend(addr: SocketAddr, requests: u64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = admin_call(addr, "GET", "/api/v1/admin/spend?by=key&from=0", Some(ADMIN_TOKEN), None).await;
        let body: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        let rows = body["data"].as_array().unwrap();
        let seen: u64 = rows.iter().map(|row| row["requests"].as_u64().unwrap()).sum();
        if seen >= requests {
            return rows.iter().map(|row| row["usd"].as_f64().unwrap()).sum();
        }
        assert!(Instant::now() < deadline, "ledger rows {seen} of {requests}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_holds_fleet_wide_under_400_concurrent_requests() {
    let (Some(database), Some(redis)) = (fresh_database().await, Redis::start()) else { return };
    let (one, _) = governed(&fleet_config(&database, &redis.url(), "fail_closed")).await;
    let (two, _) = governed(&fleet_config(&database, &redis.url(), "fail_closed")).await;
    // Each request reserves about $0.1 and costs about $0.01: a $1 budget
    // fits ten at once and a hundred in all.
    let created = create_key(one, serde_json::json!({"name": "capped", "budget": {"usd": 1.0, "window": "1d"}})).await;
    let key = created["key"].as_str().unwrap().to_owned();
    while ask(two, &key).await.0 == StatusCode::UNAUTHORIZED {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut calls = Vec::new();
    for n in 0..400 {
        let (addr, key) = (if n % 2 == 0 { one } else { two }, key.clone());
        calls.push(tokio::spawn(async move { ask(addr, &key).await }));
    }
    let (mut ok, mut refused) = (1, 0);
    for call in calls {
        let (status, body) = call.await.unwrap();
        match status {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                assert!(body.contains("insufficient_quota"), "{body}");
                refused += 1;
            }
            other => panic!("{other}: {body}"),
        }
    }
    assert!(refused > 0 && ok > 10, "{ok} served, {refused} refused");
    let spent = spend(one, ok).await;
    eprintln!("fleet budget: {ok} served, {refused} refused, ${spent:.4} spent of $1");
    assert!(spent <= 1.0, "the fleet spent ${spent} of a $1 budget ({ok} served)");
}

/// A per-model daily token quota holds fleet-wide under concurrent load:
/// each request holds its worst case (about 102 tokens) until it settles
/// to what it used (about 15), so the window never passes its cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_model_token_quota_holds_fleet_wide_under_400_concurrent_requests() {
    let (Some(database), Some(redis)) = (fresh_database().await, Redis::start()) else { return };
    let (one, _) = governed(&fleet_config(&database, &redis.url(), "fail_closed")).await;
    let (two, _) = governed(&fleet_config(&database, &redis.url(), "fail_closed")).await;
    let limits = serde_json::json!({"per_model": {"m": {"tpd": 1500}}});
    let created = create_key(one, serde_json::json!({"name": "quota", "limits": limits})).await;
    let key = created["key"].as_str().unwrap().to_owned();
    while ask(two, &key).await.0 == StatusCode::UNAUTHORIZED {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut calls = Vec::new();
    for n in 0..400 {
        let (addr, key) = (if n % 2 == 0 { one } else { two }, key.clone());
        calls.push(tokio::spawn(async move { ask(addr, &key).await }));
    }
    let (mut ok, mut refused) = (1, 0);
    for call in calls {
        let (status, body) = call.await.unwrap();
        match status {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                assert!(body.contains("has used its quota of 1500 tokens a day"), "{body}");
                refused += 1;
            }
            other => panic!("{other}: {body}"),
        }
    }
    assert!(refused > 0 && ok > 10, "{ok} served, {refused} refused");
    // $1,000 a million tokens: a token is $0.001.
    let tokens = (spend(one, ok).await * 1000.0).round();
    eprintln!("fleet tpd: {ok} served, {refused} refused, {tokens} tokens of 1500");
    assert!(tokens <= 1500.0, "the fleet used {tokens} tokens of a 1500-token quota ({ok} served)");
}

/// A daily request quota is exact fleet-wide (each request holds one and
/// settles one), and a per-second rate admits a burst of N and then N a
/// second across both instances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_quotas_and_per_second_rates_hold_across_instances() {
    let (Some(database), Some(redis)) = (fresh_database().await, Redis::start()) else { return };
    let (one, _) = governed(&fleet_config(&database, &redis.url(), "fail_closed")).await;
    let (two, _) = governed(&fleet_config(&database, &redis.url(), "fail_closed")).await;
    let daily = create_key(one, serde_json::json!({"name": "daily", "limits": {"rpd": 40}})).await;
    let second = create_key(one, serde_json::json!({"name": "second", "limits": {"rps": 5}})).await;
    let (daily, second) = (daily["key"].as_str().unwrap().to_owned(), second["key"].as_str().unwrap().to_owned());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut calls = Vec::new();
    for n in 0..200 {
        let (addr, key) = (if n % 2 == 0 { one } else { two }, daily.clone());
        calls.push(tokio::spawn(async move { ask(addr, &key).await }));
    }
    let mut served = 0;
    for call in calls {
        let (status, body) = call.await.unwrap();
        match status {
            StatusCode::OK => served += 1,
            StatusCode::TOO_MANY_REQUESTS => assert!(body.contains("quota of 40 requests a day"), "{body}"),
            other => panic!("{other}: {body}"),
        }
    }
    assert_eq!(served, 40, "40 a day across two instances, not 80");

    let started = Instant::now();
    let mut served = 0;
    for n in 0..40 {
        let (status, body) = ask(if n % 2 == 0 { one } else { two }, &second).await;
        match status {
            StatusCode::OK => served += 1,
            StatusCode::TOO_MANY_REQUESTS => assert!(body.contains("requests-per-second"), "{body}"),
            other => panic!("{other}: {body}"),
        }
    }
    let allowed = 5 + (started.elapsed().as_secs_f64() * 5.0).ceil() as u64;
    eprintln!("fleet rps: {served} served of 40 in {:?} (at most {allowed})", started.elapsed());
    assert!(served >= 5 && served <= allowed, "{served} served, at most {allowed} allowed");
}

/// The ledger's spend of key `id` in USD, once the rows of `requests`
/// of its requests are in.
async fn spend_of(addr: SocketAddr, id: &str, requests: u64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let path = format!("/api/v1/admin/spend?by=key&from=0&key={id}");
        let reply = admin_call(addr, "GET", &path, Some(ADMIN_TOKEN), None).await;
        let body: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        let rows = body["data"].as_array().unwrap();
        let seen: u64 = rows.iter().map(|row| row["requests"].as_u64().unwrap()).sum();
        if seen >= requests {
            return rows.iter().map(|row| row["usd"].as_f64().unwrap()).sum();
        }
        assert!(Instant::now() < deadline, "ledger rows {seen} of {requests}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A quota case: the key's limits, the requests it serves exactly, the
/// tokens and the USD it may use at most.
type QuotaCase = (serde_json::Value, Option<u64>, Option<f64>, Option<f64>);

/// Every window and unit of quota the issue added beyond `tpd`, `rpd` and
/// `rps` (those have their own tests above): hour, day and month, of
/// requests, tokens and USD, on the key and `per_model` inside it, each
/// under 160 concurrent requests split over two instances. A request
/// quota is exact; a token or USD quota never passes its cap (each request
/// holds its worst case until it settles, so a burst fits fewer than the
/// cap would settle to), as ARCHITECTURE.md states.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hour_day_and_month_quotas_of_requests_tokens_and_usd_hold_fleet_wide() {
    let (Some(database), Some(redis)) = (fresh_database().await, Redis::start()) else { return };
    let (one, _) = governed(&fleet_config(&database, &redis.url(), "fail_closed")).await;
    let (two, _) = governed(&fleet_config(&database, &redis.url(), "fail_closed")).await;
    // (limits, requests allowed exactly, tokens at most, USD at most); $1,000
    // a million tokens: a token is $0.001, a request about 15 tokens.
    let cases: [QuotaCase; 7] = [
        (serde_json::json!({"rph": 25}), Some(25), None, None),
        (serde_json::json!({"per_model": {"m": {"rpmo": 30}}}), Some(30), None, None),
        (serde_json::json!({"tph": 900}), None, Some(900.0), None),
        (serde_json::json!({"per_model": {"m": {"tpmo": 900}}}), None, Some(900.0), None),
        (serde_json::json!({"usd_per_hour": 0.5}), None, None, Some(0.5)),
        (serde_json::json!({"per_model": {"m": {"usd_per_day": 0.5}}}), None, None, Some(0.5)),
        (serde_json::json!({"usd_per_month": 0.5}), None, None, Some(0.5)),
    ];
    for (index, (limits, requests, tokens, usd)) in cases.into_iter().enumerate() {
        let created = create_key(one, serde_json::json!({"name": format!("quota-{index}"), "limits": limits})).await;
        let (id, key) = (created["id"].as_str().unwrap().to_owned(), created["key"].as_str().unwrap().to_owned());
        // The second instance hears of the key (its first success counts).
        let mut served = 0;
        loop {
            match ask(two, &key).await.0 {
                StatusCode::UNAUTHORIZED => tokio::time::sleep(Duration::from_millis(20)).await,
                StatusCode::OK => {
                    served += 1;
                    break;
                }
                other => panic!("{other}"),
            }
        }
        let mut calls = Vec::new();
        for n in 0..160 {
            let (addr, key) = (if n % 2 == 0 { one } else { two }, key.clone());
            calls.push(tokio::spawn(async move { ask(addr, &key).await }));
        }
        let mut refused = 0;
        for call in calls {
            let (status, body) = call.await.unwrap();
            match status {
                StatusCode::OK => served += 1,
                StatusCode::TOO_MANY_REQUESTS => {
                    assert!(body.contains("quota"), "{limits}: {body}");
                    refused += 1;
                }
                other => panic!("{limits}: {other}: {body}"),
            }
        }
        assert!(refused > 0, "{limits}: {served} served, none refused");
        let spent = spend_of(one, &id, served).await;
        let used = (spent * 1000.0).round();
        eprintln!("fleet quota {limits}: {served} served, {refused} refused, {used} tokens, ${spent:.4}");
        if let Some(requests) = requests {
            assert_eq!(served, requests, "{limits}: a request quota is exact across two instances");
        }
        if let Some(tokens) = tokens {
            assert!(used <= tokens && served > 1, "{limits}: {used} tokens of {tokens} ({served} served)");
        }
        if let Some(usd) = usd {
            assert!(spent <= usd && served > 1, "{limits}: ${spent} of ${usd} ({served} served)");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_of_n_holds_as_n_across_instances() {
    let (Some(database), Some(redis)) = (fresh_database().await, Redis::start()) else { return };
    let (one, _) = governed(&fleet_config(&database, &redis.url(), "fail_closed")).await;
    let (two, _) = governed(&fleet_config(&database, &redis.url(), "fail_closed")).await;
    let created = create_key(one, serde_json::json!({"name": "limited", "limits": {"rpm": 30}})).await;
    let key = created["key"].as_str().unwrap().to_owned();
    // The key reaches the second instance by its notification (milliseconds).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut served = 0;
    for n in 0..80 {
        let (status, body) = ask(if n % 2 == 0 { one } else { two }, &key).await;
        match status {
            StatusCode::OK => served += 1,
            StatusCode::TOO_MANY_REQUESTS => assert!(body.contains("requests-per-minute"), "{body}"),
            other => panic!("{other}: {body}"),
        }
    }
    assert_eq!(served, 30, "30 per minute across two instances, not 60");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_mid_load_follows_on_redis_error_and_recovers() {
    let (Some(database), Some(mut redis)) = (fresh_database().await, Redis::start()) else { return };
    let (open, open_gateway) = governed(&fleet_config(&database, &redis.url(), "fail_open")).await;
    let (closed, _) = governed(&fleet_config(&database, &redis.url(), "fail_closed")).await;
    let created = create_key(open, serde_json::json!({"name": "k", "budget": {"usd": 100.0, "window": "1d"}})).await;
    let key = created["key"].as_str().unwrap().to_owned();
    while ask(closed, &key).await.0 != StatusCode::OK {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    redis.kill();
    let started = Instant::now();
    let (status, body) = ask(closed, &key).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(started.elapsed() < Duration::from_secs(2), "a dead Redis costs a bounded wait, not a hang");
    let fleet = open_gateway.governance.as_ref().unwrap().fleet.clone().unwrap();
    assert_eq!(ask(open, &key).await.0, StatusCode::OK, "fail_open serves on local counters");
    assert!(!fleet.up.load(std::sync::atomic::Ordering::Relaxed));
    // Once Redis is known to be away, requests stop calling it: only the
    // background check does (every 250 ms).
    let errors = fleet.errors.load(std::sync::atomic::Ordering::Relaxed);
    let burst = Instant::now();
    for _ in 0..4 {
        assert_eq!(ask(open, &key).await.0, StatusCode::OK, "fail_open serves on local counters");
    }
    let checks = burst.elapsed().as_millis() as u64 / 250 + 1;
    let calls = fleet.errors.load(std::sync::atomic::Ordering::Relaxed) - errors;
    assert!(calls <= checks, "{calls} failed Redis calls for 4 requests in {:?}", burst.elapsed());
    let deadline = Instant::now() + Duration::from_secs(5);
    while fleet.pending() < 5 {
        assert!(Instant::now() < deadline, "what was served meanwhile waits for Redis: {}", fleet.pending());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    redis.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    // Calls that were waiting on the dead server may still fail after the
    // first success: recovery is all three, held together.
    while fleet.pending() > 0
        || !fleet.up.load(std::sync::atomic::Ordering::Relaxed)
        || ask(closed, &key).await.0 != StatusCode::OK
    {
        assert!(Instant::now() < deadline, "service did not recover by itself");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_tripped_by_one_instance_is_skipped_by_the_other_and_one_sends_the_trial() {
    let Some(redis) = Redis::start() else { return };
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let yaml = format!(
        "providers:\n  gone: {{ protocol: openai, base_url: \"http://{dead}\" }}\n  fake: {{ protocol: openai, base_url: mock:// }}\n\
         models:\n  dead: {{ provider: gone }}\n  live: {{ provider: fake }}\n\
         pools:\n  p:\n    breaker: {{ consecutive_failures: 2, base_cooldown: 30s }}\n    members: [{{ model: dead }}, {{ model: live }}]\n"
    );
    let (one, one_gateway) = fleet_state_gateway(&yaml, &redis.url()).await;
    let (_two, two_gateway) = fleet_state_gateway(&yaml, &redis.url()).await;
    let state = |gateway: &switchyard_gateway::Gateway| {
        let pool = &gateway.pools[gateway.resolve("p").unwrap()];
        pool.breaker(0).snapshot(std::time::Instant::now())
    };
    // Two failures on instance one trip `dead` there (round-robin puts it
    // first on every other request, which fails over to `live`).
    for _ in 0..4 {
        assert_eq!(open_chat(one, "p").await, StatusCode::OK);
    }
    assert_eq!(state(&one_gateway).state.as_str(), "open");
    let deadline = Instant::now() + Duration::from_secs(1);
    while state(&two_gateway).state.as_str() != "open" {
        assert!(Instant::now() < deadline, "instance two did not hear of the trip within 1 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let heard = state(&two_gateway);
    assert!(heard.reason.unwrap().contains("another instance"));
    let stats = switchyard_admin::stats::stats(&two_gateway);
    assert_eq!(stats["fleet_breakers"]["changes_applied"], 1, "{stats}");
    assert!(heard.retry_in.unwrap() > Duration::from_secs(20), "open until the same moment as on instance one");

    // The half-open trial is claimed once across the fleet.
    let (one_shared, two_shared) = (one_gateway.fleet_state.clone().unwrap(), two_gateway.fleet_state.clone().unwrap());
    assert!(one_shared.claim_trial("p", "live", Duration::from_secs(5)).await);
    assert!(!two_shared.claim_trial("p", "live", Duration::from_secs(5)).await, "one trial in the fleet");

    // A trial that passes on one instance closes the lane on the other.
    one_shared.closed("p", "dead");
    let deadline = Instant::now() + Duration::from_secs(1);
    while state(&two_gateway).state.as_str() != "closed" {
        assert!(Instant::now() < deadline, "instance two did not hear the lane closed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// An OpenAI upstream whose every answer says its request limit is spent
/// until a reset 30 s away.
async fn spent_upstream() -> SocketAddr {
    async fn answer(body: axum::body::Bytes) -> axum::response::Response {
        let codec = switchyard_protocol::codec(Protocol::OpenAi);
        let reply = switchyard_transport::mock::respond(codec, None, false, switchyard_protocol::Framing::Sse, &body);
        let mut response = axum::response::Response::new(axum::body::Body::new(reply.body));
        *response.headers_mut() = reply.headers;
        let headers = response.headers_mut();
        headers.insert("x-ratelimit-limit-requests", "100".parse().unwrap());
        headers.insert("x-ratelimit-remaining-requests", "0".parse().unwrap());
        headers.insert("x-ratelimit-reset-requests", "30s".parse().unwrap());
        response
    }
    common::spawn(axum::Router::new().route("/v1/chat/completions", axum::routing::post(answer))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_one_instance_learns_is_spent_rests_on_every_instance() {
    let Some(redis) = Redis::start() else { return };
    let upstream = spent_upstream().await;
    let yaml = format!(
        "providers:\n  quota: {{ protocol: openai, base_url: \"http://{upstream}\" }}\n  fake: {{ protocol: openai, base_url: mock:// }}\n\
         models:\n  spent: {{ provider: quota }}\n  live: {{ provider: fake }}\n\
         pools:\n  p:\n    members: [{{ model: spent, weight: 100 }}, {{ model: live }}]\n"
    );
    let (one, one_gateway) = fleet_state_gateway(&yaml, &redis.url()).await;
    let (two, two_gateway) = fleet_state_gateway(&yaml, &redis.url()).await;
    let usable = |gateway: &switchyard_gateway::Gateway| {
        gateway.pools[gateway.resolve("p").unwrap()].breaker(0).is_usable(std::time::Instant::now())
    };
    assert!(usable(&two_gateway));
    // Instance one's answer says the lane is spent: it rests there at once...
    assert_eq!(open_chat(one, "p").await, StatusCode::OK);
    assert!(!usable(&one_gateway));
    // ...and on instance two, which never asked it, within a second.
    let deadline = Instant::now() + Duration::from_secs(1);
    while usable(&two_gateway) {
        assert!(Instant::now() < deadline, "instance two did not hear the lane is spent within 1 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let spent = two_gateway.lanes.iter().find(|lane| &*lane.name == "spent").unwrap();
    assert!(spent.nearly_spent(), "the share is known on instance two");
    let reply = post(two, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "p", "hi", false)).await;
    assert_eq!((reply.status, reply.headers["x-switchyard-lane"].to_str().unwrap()), (StatusCode::OK, "live"));
}

async fn open_chat(addr: SocketAddr, model: &str) -> StatusCode {
    post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, model, "hi", false)).await.status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_stays_on_its_lane_across_instances() {
    let Some(redis) = Redis::start() else { return };
    let yaml = "providers:\n  fake: { protocol: openai, base_url: mock:// }\n  fake-claude: { protocol: anthropic, base_url: mock:// }\n\
                models:\n  a: { provider: fake }\n  b: { provider: fake-claude }\n\
                pools:\n  p:\n    members: [{ model: a }, { model: b }]\n";
    let (one, _) = fleet_state_gateway(yaml, &redis.url()).await;
    let (two, _) = fleet_state_gateway(yaml, &redis.url()).await;
    let lane = |reply: &common::Reply| reply.headers["x-switchyard-lane"].to_str().unwrap().to_owned();
    let body = chat_body(Protocol::OpenAi, "p", "hi", false);
    // Out of step: instance one's round-robin is one pick ahead of two's,
    // so without a shared pin every session would change lanes.
    assert_eq!(post(one, "/v1/chat/completions", &[], body.clone()).await.status, StatusCode::OK);
    for n in 0..6 {
        let session = format!("session-{n}");
        let first = post(one, "/v1/chat/completions", &[("x-session-id", &session)], body.clone()).await;
        assert_eq!(first.status, StatusCode::OK);
        let pinned = lane(&first);
        // The pin is written in the background: give it a moment.
        tokio::time::sleep(Duration::from_millis(50)).await;
        for _ in 0..3 {
            let next = post(two, "/v1/chat/completions", &[("x-session-id", &session)], body.clone()).await;
            assert_eq!(lane(&next), pinned, "{session} moved lanes between instances");
        }
    }
}

/// A PostgreSQL server of the test's own, so it can be killed and started
/// again (`-m immediate`: as a crash, without a clean shutdown).
struct Postgres {
    dir: std::path::PathBuf,
    bin: String,
    port: u16,
}

impl Postgres {
    fn start() -> Option<Postgres> {
        let Ok(bin) = std::env::var("SWITCHYARD_TEST_PG_BIN") else {
            assert!(std::env::var("CI").is_err(), "CI runs PostgreSQL: run the tests through scripts/test.sh");
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = std::env::temp_dir().join(format!("switchyard-pg-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let postgres = Postgres { dir, bin, port };
        if postgres.root() {
            Command::new("chown").arg("postgres").arg(&postgres.dir).status().unwrap();
        }
        let data = postgres.dir.join("data");
        let initdb = postgres
            .run(&format!("{}/initdb", postgres.bin), &["-D", data.to_str().unwrap(), "-A", "trust", "-U", "postgres"]);
        assert!(initdb.success(), "initdb failed");
        postgres.up();
        Some(postgres)
    }

    fn root(&self) -> bool {
        Command::new("id").arg("-u").output().is_ok_and(|out| out.stdout.starts_with(b"0"))
    }

    fn run(&self, program: &str, args: &[&str]) -> std::process::ExitStatus {
        let mut command = if self.root() {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--", program]);
            command
        } else {
            Command::new(program)
        };
        command.args(args).stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap()
    }

    fn pg_ctl(&self, args: &[&str]) -> std::process::ExitStatus {
        let data = self.dir.join("data");
        let mut all = vec!["-D", data.to_str().unwrap()];
        all.extend_from_slice(args);
        let program = format!("{}/pg_ctl", self.bin);
        self.run(&program, &all)
    }

    fn up(&self) {
        let options = format!("-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off", self.port, self.dir.display());
        let log = self.dir.join("server.log");
        assert!(self.pg_ctl(&["-l", log.to_str().unwrap(), "-w", "-o", &options, "start"]).success(), "postgres start");
    }

    fn kill(&self) {
        assert!(self.pg_ctl(&["-m", "immediate", "-w", "stop"]).success(), "postgres stop");
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.pg_ctl(&["-m", "immediate", "stop"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_killed_mid_load_loses_no_ledger_row() {
    let Some(postgres) = Postgres::start() else { return };
    let yaml = config(&postgres.url());
    let spool = spool_path_in(&yaml);
    let (addr, _) = governed(&yaml).await;
    let created = create_key(addr, serde_json::json!({"name": "load"})).await;
    let key = created["key"].as_str().unwrap().to_owned();
    let spooled = || {
        let store = switchyard_store::sqlite::SqliteStore::open(std::path::Path::new(&spool)).unwrap();
        async move { switchyard_store::Ledger::count(&store).await.unwrap() }
    };
    let mut served = 0u64;
    for n in 0..300 {
        if n == 100 {
            postgres.kill();
            // Keys are cached: serving goes on. Creating one needs the store.
            let refused = admin_call(
                addr,
                "POST",
                "/api/v1/admin/keys",
                Some(ADMIN_TOKEN),
                Some(serde_json::json!({"name": "late"})),
            )
            .await;
            assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
            assert!(String::from_utf8_lossy(&refused.body).contains("store is unavailable"));
        }
        if n == 200 {
            // What was served meanwhile is on local disk, so a crash now
            // would lose none of it: the next start replays the spool.
            let deadline = Instant::now() + Duration::from_secs(10);
            while spooled().await < 100 {
                assert!(Instant::now() < deadline, "rows served during the outage are not in the spool");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            postgres.up();
        }
        if chat(addr, &key).await == StatusCode::OK {
            served += 1;
        }
    }
    assert_eq!(served, 300, "the data plane served through the outage");
    let (client, connection) = tokio_postgres::connect(&postgres.url(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let rows: i64 = client.query_one("SELECT count(*) FROM ledger", &[]).await.unwrap().get(0);
        if rows as u64 == served && spooled().await == 0 {
            break;
        }
        assert!(rows as u64 <= served, "{rows} ledger rows for {served} requests: a row was written twice");
        assert!(Instant::now() < deadline, "{rows} of {served} ledger rows after PostgreSQL came back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = std::fs::remove_file(&spool);
}

/// The spool path `config` chose.
fn spool_path_in(yaml: &str) -> String {
    yaml.split("ledger_spool: \"").nth(1).and_then(|rest| rest.split('"').next()).unwrap().to_owned()
}

/// Counts the calls it fails with a 500.
async fn failing(State(hits): State<Arc<AtomicUsize>>) -> StatusCode {
    hits.fetch_add(1, Ordering::SeqCst);
    StatusCode::INTERNAL_SERVER_ERROR
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_trial_gives_its_claim_back_to_the_fleet() {
    let Some(redis) = Redis::start() else { return };
    let hits = Arc::new(AtomicUsize::new(0));
    let upstream = common::spawn(
        axum::Router::new().route("/v1/chat/completions", axum::routing::post(failing)).with_state(hits.clone()),
    )
    .await;
    let yaml = format!(
        "providers:\n  flaky: {{ protocol: openai, base_url: \"http://{upstream}\" }}\nmodels:\n  f: {{ provider: flaky }}\n\
         pools:\n  p:\n    breaker: {{ consecutive_failures: 1, base_cooldown: 300ms, max_cooldown: 300ms, jitter: 0 }}\n    members: [{{ model: f }}]\n"
    );
    let (one, _) = fleet_state_gateway(&yaml, &redis.url()).await;
    let (two, two_gateway) = fleet_state_gateway(&yaml, &redis.url()).await;
    let hit = || hits.load(Ordering::SeqCst);
    open_chat(one, "p").await; // trips `f` on one, and so on two
    assert_eq!(hit(), 1);
    let deadline = Instant::now() + Duration::from_secs(1);
    while two_gateway.pools[two_gateway.resolve("p").unwrap()].breaker(0).is_usable(std::time::Instant::now()) {
        assert!(Instant::now() < deadline, "instance two did not hear of the trip");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(350)).await;
    open_chat(one, "p").await; // one's trial: fails, trips again, gives the claim back
    assert_eq!(hit(), 2);
    tokio::time::sleep(Duration::from_millis(500)).await;
    open_chat(two, "p").await; // the next trial is two's to claim
    assert_eq!(hit(), 3, "the claim of a finished trial kept every later trial from the fleet");
}

/// A chat body with the raw JSON `max_tokens` text given (a number no
/// serde type would take, say).
async fn ask_with_max(addr: SocketAddr, key: &str, max_tokens: &str) -> (StatusCode, String) {
    let auth = format!("Bearer {key}");
    let body = format!(r#"{{"model":"m","max_tokens":{max_tokens},"messages":[{{"role":"user","content":"hi"}}]}}"#);
    let reply = post(addr, "/v1/chat/completions", &[("authorization", &auth)], body).await;
    (reply.status, String::from_utf8_lossy(&reply.body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_number_a_caller_sends_takes_redis_out_of_the_fleet() {
    let (Some(database), Some(redis)) = (fresh_database().await, Redis::start()) else { return };
    let (addr, gateway) = governed(&fleet_config(&database, &redis.url(), "fail_closed")).await;
    // No USD budget and no tpm: nothing on the key clamps the estimate.
    let wild = create_key(addr, serde_json::json!({"name": "wild"})).await["key"].as_str().unwrap().to_owned();
    let calm = create_key(addr, serde_json::json!({"name": "calm"})).await["key"].as_str().unwrap().to_owned();
    let fleet = gateway.governance.as_ref().unwrap().fleet.clone().unwrap();
    for max_tokens in ["1e18", "1000000000000000000", "18446744073709551615", "1.7976931348623157e308", "-5", "2.5"] {
        let (status, body) = ask_with_max(addr, &wild, max_tokens).await;
        assert!(status == StatusCode::OK || status.is_client_error(), "max_tokens {max_tokens}: {status} {body}");
        assert!(fleet.up.load(Ordering::Relaxed), "max_tokens {max_tokens} made the instance think Redis is away");
        let (status, body) = ask(addr, &calm).await;
        assert_eq!(status, StatusCode::OK, "another caller after max_tokens {max_tokens}: {body}");
    }
    assert_eq!(fleet.refused_settlements.load(Ordering::Relaxed), 0, "every settlement was an integer Redis takes");
}

/// A chat as end user `user` (OpenAI's `user` field).
async fn ask_as(addr: SocketAddr, key: &str, user: &str) -> (StatusCode, String) {
    let auth = format!("Bearer {key}");
    let body = serde_json::json!({"model": "m", "max_tokens": 10, "user": user, "messages": [{"role": "user", "content": "hi"}]});
    let reply = post(addr, "/v1/chat/completions", &[("authorization", &auth)], body.to_string()).await;
    (reply.status, String::from_utf8_lossy(&reply.body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_user_named_like_another_buckets_holds_changes_nothing_for_it() {
    let (Some(database), Some(redis)) = (fresh_database().await, Redis::start()) else { return };
    let yaml = format!(
        "{}groups:\n  bots: {{ end_users: {{ limits: {{ rpm: 1000 }} }} }}\n",
        fleet_config(&database, &redis.url(), "fail_closed")
    );
    let (addr, gateway) = governed(&yaml).await;
    let key =
        create_key(addr, serde_json::json!({"name": "bot", "group": "bots"})).await["key"].as_str().unwrap().to_owned();
    // One request as `alice:holds`, then `alice` and others whose names
    // carry the separators, each answered.
    for user in ["alice:holds", "alice", "alice", "group:bots:alice", "%41lice", "alice%3Aholds"] {
        let (status, body) = ask_as(addr, &key, user).await;
        assert_eq!(status, StatusCode::OK, "as {user}: {body}");
    }
    let fleet = gateway.governance.as_ref().unwrap().fleet.clone().unwrap();
    assert!(fleet.up.load(Ordering::Relaxed));
}

/// A fleet client of the test's own on `redis`, with a short lease.
pub(crate) async fn fleet_client(redis: &Redis, lease: Duration) -> Arc<switchyard_fleet::counters::Fleet> {
    switchyard_fleet::counters::Fleet::connect(&redis.url(), switchyard_config::OnRedisError::FailClosed, lease)
        .await
        .unwrap()
}

fn one_key_chain(id: &str) -> (Vec<switchyard_governance::BucketId>, Arc<[String]>) {
    let chain = vec![switchyard_governance::BucketId::Key(Arc::from(id))];
    let keys = switchyard_fleet::counters::bucket_names(&chain);
    (chain, keys)
}

/// An instance's governor holding one spec for each bucket of `chain`
/// (what the fleet's scripts are given is read from it).
fn governor(
    chain: &[switchyard_governance::BucketId],
    concurrent: Option<u64>,
    usd: Option<f64>,
) -> switchyard_governance::Governor {
    let budget = usd.map(|usd| switchyard_governance::Budget::new(usd, switchyard_governance::Window::Total));
    let limits = switchyard_governance::Limits { concurrent, ..Default::default() };
    let mut governor = switchyard_governance::Governor::new();
    for id in chain {
        let spec = switchyard_governance::BucketSpec { budget: budget.clone(), limits: limits.clone() };
        governor.set_spec(id.clone(), spec, 0);
    }
    governor
}

/// The admission script's arguments for `chain` from `governor`.
fn admit_args(
    governor: &mut switchyard_governance::Governor,
    fleet: &switchyard_fleet::counters::Fleet,
    chain: &[switchyard_governance::BucketId],
    estimate: switchyard_governance::Estimate,
    now: u64,
) -> Vec<i64> {
    governor.fleet_admit_args(chain, estimate, fleet.lease_end(now), now, false)
}

pub(crate) async fn field(redis: &Redis, key: &str, name: &str) -> i64 {
    let client = redis::Client::open(redis.url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("HGET").arg(key).arg(name).query_async::<Option<i64>>(&mut connection).await.unwrap().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holds_of_an_instance_that_died_come_back_after_their_lease() {
    use switchyard_fleet::counters::Admitted;
    let Some(redis) = Redis::start() else { return };
    let (chain, keys) = one_key_chain("lease");
    let mut buckets = governor(&chain, Some(1), None);
    let estimate = switchyard_governance::Estimate { tokens: 10, cost: 7 };
    let now = || switchyard_state::governance::now_ms();

    let dying = fleet_client(&redis, Duration::from_secs(1)).await;
    let hold = dying.new_hold();
    let args = admit_args(&mut buckets, &dying, &chain, estimate, now());
    assert!(matches!(dying.admit(&keys, &chain, args, estimate, hold).await.unwrap(), Admitted::Held(_)));
    // A living instance renews its holds: past two leases, the key is still busy.
    let other = fleet_client(&redis, Duration::from_secs(1)).await;
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let args = admit_args(&mut buckets, &other, &chain, estimate, now());
    let busy = other.admit(&keys, &chain, args, estimate, other.new_hold()).await.unwrap();
    assert!(matches!(busy, Admitted::Refused(_)), "a renewed hold lasts as long as its request: {busy:?}");

    // The instance dies (its renewals stop with it) without settling.
    drop(dying);
    let deadline = Instant::now() + Duration::from_secs(5);
    let admitted = loop {
        let args = admit_args(&mut buckets, &other, &chain, estimate, now());
        match other.admit(&keys, &chain, args, estimate, other.new_hold()).await.unwrap() {
            Admitted::Held(hold) => break hold,
            Admitted::Refused(_) => {
                assert!(Instant::now() < deadline, "a dead instance's hold never came back");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(field(&redis, &keys[0], "inflight").await, 1, "the dead hold was given back, the new one held");
    assert_eq!(field(&redis, &keys[0], "reserved").await, 7);
    // Settling the new hold leaves nothing held.
    let settlement = other.settlement(&keys, (&mut buckets, &chain), admitted, estimate, 3, 5, (true, false), now());
    other.settle(admitted, settlement);
    let deadline = Instant::now() + Duration::from_secs(5);
    while field(&redis, &keys[0], "inflight").await != 0 || field(&redis, &keys[0], "reserved").await != 0 {
        assert!(Instant::now() < deadline, "the settlement did not release its hold");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_applies_once_and_a_refused_one_stands_alone() {
    use switchyard_fleet::counters::Admitted;
    let Some(redis) = Redis::start() else { return };
    let fleet = fleet_client(&redis, Duration::from_secs(60)).await;
    let (chain, keys) = one_key_chain("once");
    let mut buckets = governor(&chain, None, Some(100.0));
    let estimate = switchyard_governance::Estimate { tokens: 10, cost: 1_000 };
    let now = switchyard_state::governance::now_ms();
    let args = admit_args(&mut buckets, &fleet, &chain, estimate, now);
    let Admitted::Held(hold) = fleet.admit(&keys, &chain, args, estimate, fleet.new_hold()).await.unwrap() else {
        panic!("refused")
    };
    let good = fleet.settlement(&keys, (&mut buckets, &chain), hold, estimate, 400, 8, (true, false), now);

    // A poison settlement: its bucket's name holds a string, so its script fails.
    let client = redis::Client::open(redis.url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let (_, bad_keys) = one_key_chain("poison");
    redis::cmd("SET").arg(&bad_keys[0]).arg("not a hash").query_async::<()>(&mut connection).await.unwrap();
    let poison =
        fleet.settlement(&bad_keys, (&mut buckets, &chain), fleet.new_hold(), estimate, 400, 8, (true, false), now);

    // The same settlement three times (a lost answer, a retried batch) and
    // the poison one among them.
    fleet.settle(hold, good.clone());
    fleet.settle(0, poison);
    fleet.settle(hold, good.clone());
    fleet.settle(hold, good);
    let deadline = Instant::now() + Duration::from_secs(5);
    while fleet.refused_settlements.load(Ordering::Relaxed) < 1 || field(&redis, &keys[0], "spent").await == 0 {
        assert!(Instant::now() < deadline, "settlements were not applied");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Give a retry loop time to show itself.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(field(&redis, &keys[0], "spent").await, 400, "applied once, not once per send");
    assert_eq!(field(&redis, &keys[0], "reserved").await, 0);
    assert_eq!(fleet.refused_settlements.load(Ordering::Relaxed), 1, "the poison one is set aside, once");
    assert_eq!(fleet.pending(), 0, "nothing is retried forever");
    assert!(fleet.up.load(Ordering::Relaxed), "a refused script is not an outage");
}

/// A Gemini call signature one instance kept is put back by another when
/// the caller's next turn (rebuilt from id, name and arguments) lands there.
#[tokio::test]
async fn a_call_signature_kept_by_one_instance_is_restored_by_another() {
    let Some(redis) = Redis::start() else { return };
    let yaml = "providers:\n  g: { protocol: gemini, base_url: mock:// }\n\
                models:\n  flash: { provider: g, model: gemini-3-flash }\n";
    let (one, _) = fleet_state_gateway(yaml, &redis.url()).await;
    let (two, _) = fleet_state_gateway(yaml, &redis.url()).await;
    let tools = serde_json::json!([{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]);
    let ask = serde_json::json!({"role": "user", "content": "look it up"});
    let first = serde_json::json!({"model": "flash", "messages": [ask], "tools": tools});
    let reply = post(one, "/v1/chat/completions", &[], serde_json::to_vec(&first).unwrap()).await;
    assert_eq!(reply.status, StatusCode::OK);
    let reply: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    let call = &reply["choices"][0]["message"]["tool_calls"][0];
    let rebuilt = serde_json::json!({"id": call["id"], "type": "function", "function": call["function"]});
    let result = serde_json::json!({"role": "tool", "tool_call_id": call["id"], "content": "found"});
    let assistant = serde_json::json!({"role": "assistant", "content": null, "tool_calls": [rebuilt]});
    let second = serde_json::json!({"model": "flash", "messages": [ask, assistant, result], "tools": tools});
    let reply = post(two, "/v1/chat/completions", &[], serde_json::to_vec(&second).unwrap()).await;
    let text = String::from_utf8_lossy(&reply.body);
    assert!(text.contains("(signed)"), "{text}");
}

/// A fleet shares one response cache through Redis: an answer one instance
/// served is a hit on the other, streamed or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_the_response_cache_over_redis() {
    let Some(redis) = Redis::start() else { return };
    let yaml = "providers:\n  fake: { protocol: openai, base_url: mock:// }\nmodels:\n  m: { provider: fake }\n\
                pools:\n  cached: { cache: { ttl: 1m }, members: [{ model: m }] }\n";
    let (one, _) = fleet_state_gateway(yaml, &redis.url()).await;
    let (two, _) = fleet_state_gateway(yaml, &redis.url()).await;
    for stream in [false, true] {
        // A stream and a whole reply share an entry: each round asks its own question.
        let question = if stream { "shared as a stream?" } else { "shared?" };
        let ask =
            |addr| post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "cached", question, stream));
        let first = ask(one).await;
        assert_eq!(first.headers.get("x-switchyard-cache").unwrap(), "miss");
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            // The store is written on a task of its own: the next lookup may
            // come before it lands.
            let reply = ask(two).await;
            assert_eq!(reply.status, StatusCode::OK);
            if reply.headers.get("x-switchyard-cache").unwrap() == "hit" {
                assert_eq!(reply.body, first.body, "stream {stream}: the same answer");
                break;
            }
            assert!(Instant::now() < deadline, "the other instance never found the answer (stream {stream})");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// In a fleet too, a cache hit is given back to the key's
/// requests-per-minute limit held in Redis; a miss counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_gives_cache_hits_back_to_the_rate_limit() {
    let (Some(database), Some(redis)) = (fresh_database().await, Redis::start()) else { return };
    let config = format!(
        "{}pools:\n  cached: {{ cache: {{ ttl: 1m }}, members: [{{ model: m }}] }}\n",
        fleet_config(&database, &redis.url(), "fail_closed")
    );
    let (addr, _) = governed(&config).await;
    let created = create_key(addr, serde_json::json!({"name": "limited", "limits": {"rpm": 2}})).await;
    let auth = format!("Bearer {}", created["key"].as_str().unwrap());
    let ask = |text: &'static str| {
        let auth = auth.clone();
        async move {
            let body = serde_json::json!({"model": "cached", "max_tokens": 100, "messages": [{"role": "user", "content": text}]});
            let reply = post(addr, "/v1/chat/completions", &[("authorization", &auth)], body.to_string()).await;
            // Settlement runs in the background: let it land before the next admission.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let cache = reply.headers.get("x-switchyard-cache").map(|v| v.to_str().unwrap().to_owned());
            (reply.status, cache.unwrap_or_default())
        }
    };
    assert_eq!(ask("hello").await, (StatusCode::OK, "miss".to_owned()));
    for _ in 0..4 {
        assert_eq!(ask("hello").await, (StatusCode::OK, "hit".to_owned()), "a hit is free of the fleet's rpm");
    }
    assert_eq!(ask("another").await.0, StatusCode::OK);
    assert_eq!(ask("a third").await.0, StatusCode::TOO_MANY_REQUESTS, "misses count: two a minute");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lost_and_found_is_alerted_and_resolved() {
    let (Some(database), Some(mut redis)) = (fresh_database().await, Redis::start()) else { return };
    let (webhook, got) = common::webhook_receiver().await;
    let yaml = format!(
        "{}alerts: {{ webhook: \"{webhook}\", dedup: 5m }}\n",
        fleet_config(&database, &redis.url(), "fail_open")
    );
    let (addr, gateway) = governed(&yaml).await;
    switchyard_gateway::reload::start_tasks(&gateway);
    let created = create_key(addr, serde_json::json!({"name": "k"})).await;
    let key = created["key"].as_str().unwrap().to_owned();
    assert_eq!(ask(addr, &key).await.0, StatusCode::OK);

    redis.kill();
    // A request finds Redis away (the instance goes on on its own counters).
    assert_eq!(ask(addr, &key).await.0, StatusCode::OK);
    let fired =
        common::received(&got, "redis_degraded", |v| v["kind"] == "redis_degraded" && v["state"] == "firing").await;
    assert!(fired["detail"].as_str().unwrap().contains("fail_open"), "{fired}");
    redis.restart();
    common::received(&got, "redis_degraded resolved", |v| v["kind"] == "redis_degraded" && v["state"] == "resolved")
        .await;
    let firing = got.lock().unwrap().iter().filter(|v| v["kind"] == "redis_degraded" && v["state"] == "firing").count();
    assert_eq!(firing, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_version_applied_on_one_instance_serves_on_the_other_within_two_seconds() {
    let Some(database) = fresh_database().await else { return };
    let yaml = |extra: &str| format!("{}pools:\n  p: {{ members: [{{ model: m }}] }}\n{extra}", config(&database));
    let (one, _one_reloader, _) = common::reloadable(&yaml("")).await;
    let (two, _two_reloader, two_file) = common::reloadable(&yaml("")).await;
    let open = |addr: SocketAddr, model: &'static str| async move {
        let key = create_key(addr, serde_json::json!({"name": format!("k-{model}")})).await;
        chat(addr, key["key"].as_str().unwrap()).await
    };
    assert_eq!(open(two, "m").await, StatusCode::OK);
    // One version: both instances read the same file at boot.
    let versions = admin_call(one, "GET", "/api/v1/admin/config/versions", Some(ADMIN_TOKEN), None).await;
    let versions: serde_json::Value = serde_json::from_slice(&versions.body).unwrap();
    assert_eq!(versions.as_array().unwrap().len(), 1, "{versions}");

    let next = yaml("  q: { members: [{ model: m }] }\n");
    let change = serde_json::json!({"yaml": next, "message": "add q"});
    let client: hyper_util::client::legacy::Client<_, http_body_util::Full<bytes::Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
    let request = http::Request::post(format!("http://{}/api/v1/admin/config", common::admin(one)))
        .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
        .header("if-match", "\"1\"")
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(change.to_string())))
        .unwrap();
    let applied = client.request(request).await.unwrap();
    assert_eq!(applied.status(), StatusCode::OK);
    let at = Instant::now();
    // The other instance serves it within 2 s, through the change feed.
    let key = create_key(two, serde_json::json!({"name": "q-caller"})).await;
    let secret = key["key"].as_str().unwrap().to_owned();
    loop {
        let auth = format!("Bearer {secret}");
        let status = post(
            two,
            "/v1/chat/completions",
            &[("authorization", &auth)],
            chat_body(Protocol::OpenAi, "q", "hi", false),
        )
        .await
        .status;
        if status == StatusCode::OK {
            break;
        }
        assert!(at.elapsed() < Duration::from_secs(2), "the other instance still answers {status} for the new pool");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(*two_file.lock().unwrap(), next, "its file holds the fleet's version");
    // Rolled back on the second: the first follows.
    let back = admin_call(two, "POST", "/api/v1/admin/config/rollback/1", Some(ADMIN_TOKEN), None).await;
    assert_eq!(back.status, StatusCode::OK, "{}", String::from_utf8_lossy(&back.body));
    let at = Instant::now();
    loop {
        let versions = admin_call(one, "GET", "/api/v1/admin/config", Some(ADMIN_TOKEN), None).await;
        if versions.headers.get("etag").is_some_and(|e| e == "\"3\"") {
            let running: serde_json::Value = serde_json::from_slice(&versions.body).unwrap();
            if !running["yaml"].as_str().unwrap_or("").contains("q:") {
                break;
            }
        }
        assert!(at.elapsed() < Duration::from_secs(2), "the first instance did not follow the rollback");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_mcp_sessions_are_capped_across_instances() {
    use crate::mcp::{code, McpClient, LIMITED};
    let Some(redis) = Redis::start() else { return };
    let upstream = common::mock_upstream().await;
    let yaml = format!("mcp:\n  sessions_per_key: 2\n  servers:\n    mock: {{ url: \"http://{upstream}/mcp\" }}\n");
    let (one, _) = fleet_state_gateway(&yaml, &redis.url()).await;
    let (two, _) = fleet_state_gateway(&yaml, &redis.url()).await;
    // One session on each instance: the key's two.
    let first = McpClient::open(one, None).await.unwrap();
    let mut second = McpClient::open(two, None).await.unwrap();
    for addr in [one, two] {
        let refused = McpClient::open(addr, None).await.err().expect("a third session of the key");
        assert_eq!((refused.status, code(&refused.answer)), (429, LIMITED), "{:?}", refused.answer);
    }
    assert_eq!(second.names("tools/list", "tools", "name").await, ["mock__echo", "mock__delete_everything"]);
    // Ended on one instance: room on the other.
    assert_eq!(first.end().await, 200);
    assert!(McpClient::open(two, None).await.is_ok());
}

/// How a test takes Redis away.
#[derive(Debug, Clone, Copy)]
enum RedisFault {
    /// `kill -9`: connections refused.
    Killed,
    /// `SIGSTOP`: connections hang until each call times out.
    Frozen,
}

/// Three `fail_open` instances and a key with a $0.50 cap it spends through
/// Redis; then Redis goes away and every instance is asked to serve more.
/// Each admits on its own counters only what it last saw left (the fleet's
/// spend in its last answer, and what it settled since): here nothing, as
/// all three saw the cap spent. (Counters that knew only what the ledger
/// held at boot served a whole cap each again: $1.50 over a $0.50 cap.)
async fn fail_open_serves_no_more_than_each_instance_saw_left(fault: RedisFault) {
    let (Some(database), Some(mut redis)) = (fresh_database().await, Redis::start()) else { return };
    let mut instances = Vec::new();
    for _ in 0..3 {
        instances.push(governed(&fleet_config(&database, &redis.url(), "fail_open")).await);
    }
    let addrs: Vec<SocketAddr> = instances.iter().map(|(addr, _)| *addr).collect();
    let cap = 0.5;
    let created =
        create_key(addrs[0], serde_json::json!({"name": "capped", "budget": {"usd": cap, "window": "1d"}})).await;
    let (id, key) = (created["id"].as_str().unwrap().to_owned(), created["key"].as_str().unwrap().to_owned());
    for (_, gateway) in &instances {
        let deadline = Instant::now() + Duration::from_secs(2);
        while gateway.governance.as_ref().unwrap().key(&id).is_none() {
            assert!(Instant::now() < deadline, "the key did not reach every instance");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // The cap is spent through Redis, on all three, until each refuses.
    let (mut served, mut refused_in_a_row) = (0u64, 0);
    for n in 0.. {
        match ask(addrs[n % 3], &key).await {
            (StatusCode::OK, _) => (served, refused_in_a_row) = (served + 1, 0),
            (StatusCode::TOO_MANY_REQUESTS, _) => refused_in_a_row += 1,
            (other, body) => panic!("{other}: {body}"),
        }
        if refused_in_a_row == 3 {
            break;
        }
        assert!(n < 400, "the cap was never reached");
    }
    let before = spend(addrs[0], served).await;

    match fault {
        RedisFault::Killed => redis.kill(),
        RedisFault::Frozen => redis.signal("-STOP"),
    }
    // Enough for each instance to spend a whole cap on its own.
    let mut during = 0u64;
    for n in 0..450 {
        match ask(addrs[n % 3], &key).await {
            (StatusCode::OK, _) => during += 1,
            (StatusCode::TOO_MANY_REQUESTS, _) => {}
            (other, body) => panic!("{fault:?}: {other}: {body}"),
        }
    }
    for (_, gateway) in &instances {
        let fleet = gateway.governance.as_ref().unwrap().fleet.clone().unwrap();
        assert!(!fleet.up.load(Ordering::Relaxed), "{fault:?}: every instance admitted on its own counters");
    }
    if let RedisFault::Frozen = fault {
        redis.signal("-CONT");
    }
    let after = spend(addrs[0], served + during).await;
    eprintln!(
        "fail_open, Redis {fault:?}: ${before:.4} spent of ${cap} before, {during} served after, ${after:.4} spent"
    );
    let instances = 3.0;
    assert!(after - cap <= (instances - 1.0) * cap, "{fault:?}: ${after} spent over a ${cap} cap on three instances");
    assert!(during <= 3, "{fault:?}: {during} served after the cap was spent and seen by every instance");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_with_redis_killed_serves_no_more_than_each_instance_saw_left() {
    fail_open_serves_no_more_than_each_instance_saw_left(RedisFault::Killed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_with_redis_frozen_serves_no_more_than_each_instance_saw_left() {
    fail_open_serves_no_more_than_each_instance_saw_left(RedisFault::Frozen).await;
}

/// Redis comes back empty (a restart without persistence): a bucket it no
/// longer knows is seeded from what the admitting instance knows and then
/// raised to what the ledger holds. The instance that admits first here
/// never served the key (its counters know nothing of the spend): without
/// the ledger it granted the whole budget again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_back_empty_is_seeded_from_the_ledger() {
    let (Some(database), Some(mut redis)) = (fresh_database().await, Redis::start()) else { return };
    let (one, _) = governed(&fleet_config(&database, &redis.url(), "fail_closed")).await;
    let (three, three_gateway) = governed(&fleet_config(&database, &redis.url(), "fail_closed")).await;
    let cap = 0.5;
    let created = create_key(one, serde_json::json!({"name": "capped", "budget": {"usd": cap, "window": "1d"}})).await;
    let (id, key) = (created["id"].as_str().unwrap().to_owned(), created["key"].as_str().unwrap().to_owned());
    let deadline = Instant::now() + Duration::from_secs(2);
    while three_gateway.governance.as_ref().unwrap().key(&id).is_none() {
        assert!(Instant::now() < deadline, "the key did not reach the other instance");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut served = 0u64;
    while ask(one, &key).await.0 == StatusCode::OK {
        served += 1;
        assert!(served < 200, "the cap was never reached");
    }
    let before = spend(one, served).await;

    redis.kill();
    redis.restart();
    let (mut after, mut refused) = (0u64, false);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !refused {
        match ask(three, &key).await {
            // A caller's pace: the ledger's answer (one query) lands between two requests.
            (StatusCode::OK, _) => {
                after += 1;
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            (StatusCode::TOO_MANY_REQUESTS, body) => {
                assert!(body.contains("insufficient_quota"), "{body}");
                refused = true;
            }
            // Redis not found back yet (fail_closed).
            (StatusCode::SERVICE_UNAVAILABLE, _) => tokio::time::sleep(Duration::from_millis(50)).await,
            (other, body) => panic!("{other}: {body}"),
        }
        assert!(Instant::now() < deadline, "never refused: {after} served");
    }
    let spent = spend(one, served + after).await;
    eprintln!("redis back empty: ${before:.4} spent before, {after} served after, ${spent:.4} in all of ${cap}");
    // Only what was admitted before the ledger's spend landed (one query).
    assert!(after <= 3, "{after} served on a spent key after Redis came back empty");
    assert!(spent <= cap, "${spent} spent of a ${cap} cap");
    let _ = three;
}

/// The admission script offers a budget's downgrade as the governor does:
/// spent (the request does not fit), past its `at` share, or forecast to
/// run out; a bucket that refuses outright wins; a quota refusal names its
/// quota; what the fleet spent comes back either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admission_script_offers_downgrades_and_names_quotas() {
    use switchyard_fleet::counters::Admitted;
    use switchyard_governance::{BucketId, BucketSpec, Budget, Downgrade, Estimate, Limits, Trigger, Window};
    let Some(redis) = Redis::start() else { return };
    let fleet = fleet_client(&redis, Duration::from_secs(60)).await;
    let group = BucketId::Group(Arc::from("acme"));
    let chain = vec![group.clone()];
    let keys = switchyard_fleet::counters::bucket_names(&chain);
    let mut governor = switchyard_governance::Governor::new();
    let on_exhaust = Some(Downgrade { pool: "cheap".into(), at: Some(50.0), forecast: true });
    let budget = Budget { on_exhaust, ..Budget::new(1.0, Window::Day) };
    let limits = Limits { rph: Some(3), ..Limits::default() };
    governor.set_spec(group.clone(), BucketSpec { budget: Some(budget), limits }, 0);
    let now = switchyard_state::governance::now_ms();
    let cost = |usd: f64| Estimate { tokens: 10, cost: switchyard_governance::money::from_usd(usd) };
    let admit = |governor: &mut switchyard_governance::Governor, estimate: Estimate, offer: bool| {
        let args = governor.fleet_admit_args(&chain, estimate, fleet.lease_end(now), now, offer);
        fleet.admit_seeing(&keys, &chain, args, estimate, fleet.new_hold())
    };
    // Too dear: spent, offered.
    let (answer, _) = admit(&mut governor, cost(2.0), true).await.unwrap();
    let Admitted::Refused(refused) = answer else { panic!("{answer:?}") };
    assert_eq!((refused.bucket.clone(), refused.downgrade), (group.clone(), Some(Trigger::Spent)));
    // Not offered: a plain refusal.
    let (answer, _) = admit(&mut governor, cost(2.0), false).await.unwrap();
    assert!(matches!(answer, Admitted::Refused(ref r) if r.downgrade.is_none()), "{answer:?}");
    // $0.60 held: past the 50% share, though $0.10 still fits.
    let (answer, _) = admit(&mut governor, cost(0.6), true).await.unwrap();
    assert!(matches!(answer, Admitted::Held(_)), "{answer:?}");
    let (answer, _) = admit(&mut governor, cost(0.1), true).await.unwrap();
    assert!(matches!(answer, Admitted::Refused(ref r) if r.downgrade == Some(Trigger::Threshold)), "{answer:?}");
    // The cheaper request, admitted without the offer, fits.
    let (answer, _) = admit(&mut governor, cost(0.1), false).await.unwrap();
    assert!(matches!(answer, Admitted::Held(_)), "{answer:?}");
    // Forecast short: offered from the first dollar on.
    governor.set_short(&group, true);
    let (answer, _) = admit(&mut governor, cost(0.01), true).await.unwrap();
    assert!(matches!(answer, Admitted::Refused(ref r) if r.downgrade == Some(Trigger::Forecast)), "{answer:?}");
    // Two held of three an hour: one more, then the quota.
    let (answer, _) = admit(&mut governor, cost(0.01), false).await.unwrap();
    assert!(matches!(answer, Admitted::Held(_)), "{answer:?}");
    let (answer, seen) = admit(&mut governor, cost(0.01), false).await.unwrap();
    let Admitted::Refused(refused) = answer else { panic!("{answer:?}") };
    let switchyard_governance::RefusalKind::Quota { quota, retry_in_ms: Some(_) } = refused.kind else {
        panic!("{refused:?}")
    };
    assert_eq!((quota.name(), quota.cap), ("rph", 3));
    assert_eq!(seen.spent, [Some(0)], "nothing settled yet");
    assert_eq!(field(&redis, &keys[0], "q1held").await, 3);
}

/// A settlement kept while Redis was away that reaches a Redis which lost
/// the bucket seeds it with the spend the instance knew before adding its
/// cost, and reports it (for the ledger to be read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_that_finds_its_bucket_lost_seeds_it() {
    let Some(redis) = Redis::start() else { return };
    let fleet = fleet_client(&redis, Duration::from_secs(60)).await;
    let mut seeded = fleet.take_seeded().unwrap();
    let (chain, keys) = one_key_chain("lost");
    let mut buckets = governor(&chain, None, Some(100.0));
    buckets.seed_spent(&chain[0], switchyard_governance::Window::Total.start(0), 700);
    let now = switchyard_state::governance::now_ms();
    let estimate = switchyard_governance::Estimate { tokens: 10, cost: 1_000 };
    let mut settlement =
        fleet.settlement(&keys, (&mut buckets, &chain), fleet.new_hold(), estimate, 40, 8, (false, false), now);
    settlement.chain = Some(chain.clone().into());
    fleet.settle(0, settlement);
    let reported = tokio::time::timeout(Duration::from_secs(5), seeded.recv()).await.unwrap().unwrap();
    assert_eq!(reported, chain);
    assert_eq!(field(&redis, &keys[0], "spent").await, 740, "the seed, then the cost");
    // Raised to the ledger's figure, never lowered.
    let window = switchyard_governance::Window::Total.start((now / 1000) as i64);
    assert!(fleet.raise_spent(&keys[0], window, 900).await.unwrap());
    assert!(!fleet.raise_spent(&keys[0], window, 800).await.unwrap());
    assert_eq!(field(&redis, &keys[0], "spent").await, 900);
}

/// A key's read shows the fleet's figures from Redis, not only what the
/// instance asked holds itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_read_shows_the_fleets_reservations() {
    use switchyard_fleet::counters::Admitted;
    let (Some(database), Some(redis)) = (fresh_database().await, Redis::start()) else { return };
    let (one, gateway) = governed(&fleet_config(&database, &redis.url(), "fail_closed")).await;
    let created = create_key(one, serde_json::json!({"name": "busy", "budget": {"usd": 10.0, "window": "1d"}})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let cached = gateway.governance.as_ref().unwrap().key(&id).unwrap();
    // Another instance holds $0.25 of it in flight.
    let other = fleet_client(&redis, Duration::from_secs(60)).await;
    let budget = switchyard_governance::Budget::new(10.0, switchyard_governance::Window::Day);
    let spec = switchyard_governance::BucketSpec { budget: Some(budget), limits: Default::default() };
    let mut buckets = switchyard_governance::Governor::new();
    buckets.set_spec(cached.chain[0].clone(), spec, 0);
    let estimate = switchyard_governance::Estimate { tokens: 10, cost: 250_000_000 };
    let now = switchyard_state::governance::now_ms();
    let args = admit_args(&mut buckets, &other, &cached.chain, estimate, now);
    let held = other.admit(&cached.fleet_keys, &cached.chain, args, estimate, other.new_hold()).await.unwrap();
    assert!(matches!(held, Admitted::Held(_)), "{held:?}");
    let read = admin_call(one, "GET", &format!("/api/v1/admin/keys/{id}"), Some(ADMIN_TOKEN), None).await;
    let view: serde_json::Value = serde_json::from_slice(&read.body).unwrap();
    assert_eq!(view["usage"]["in_flight"], 1, "{view}");
    assert_eq!(view["usage"]["reserved_usd"], 0.25, "{view}");
    assert_eq!(view["usage"]["budget_left_usd"], 9.75, "{view}");
}

/// Past the request log's 1,200 rows a minute per instance, refusals are
/// counted on one row per minute and reason: the spend report counts every
/// refusal the callers got, from both instances (rows alone counted 2,400).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_is_counted_past_the_request_logs_limit() {
    let Some(database) = fresh_database().await else { return };
    let (one, _) = governed(&config(&database)).await;
    let (two, _) = governed(&config(&database)).await;
    let created = create_key(one, serde_json::json!({"name": "flood", "limits": {"rpm": 1}})).await;
    let (id, key) = (created["id"].as_str().unwrap().to_owned(), created["key"].as_str().unwrap().to_owned());
    // (Refused as unknown until the key reaches instance two: refusals of no key.)
    while chat(two, &key).await == StatusCode::UNAUTHORIZED {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut callers = Vec::new();
    for caller in 0..8 {
        let key = key.clone();
        let addr = if caller % 2 == 0 { one } else { two };
        callers.push(tokio::spawn(async move {
            let mut statuses = Vec::new();
            for _ in 0..375 {
                statuses.push(chat(addr, &key).await);
            }
            statuses
        }));
    }
    let mut statuses = std::collections::BTreeMap::new();
    for caller in callers {
        for status in caller.await.unwrap() {
            *statuses.entry(status.as_u16()).or_insert(0u64) += 1;
        }
    }
    let refused = statuses.get(&429).copied().unwrap_or(0);
    assert!(refused > 2 * 1_200, "each instance refused more than it logs a minute: {statuses:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = admin_call(one, "GET", "/api/v1/admin/spend?by=key&from=0", Some(ADMIN_TOKEN), None).await;
        let body: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        let rows = body["data"].as_array().unwrap().iter().filter(|row| row["value"] == id.as_str());
        let counted: u64 = rows.map(|row| row["refused"].as_u64().unwrap()).sum();
        if counted == refused {
            break;
        }
        assert!(counted < refused, "{counted} refusals counted for {refused} answered");
        assert!(Instant::now() < deadline, "{counted} refusals counted for {refused} answered: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A fleet keeps each answer once (under its request's bytes, with a
/// pointer from its read request's key), its bytes as bytes, and all of
/// them within `cache.max_bytes`: a 1 MB request used to put 8 MB in Redis
/// (two copies, its bytes as JSON numbers) with no bound at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_cache_keeps_each_answer_once_within_its_bound() {
    let Some(redis) = Redis::start() else { return };
    let yaml = "cache: { max_bytes: 5MiB }\nproviders:\n  fake: { protocol: openai, base_url: mock:// }\n\
                models:\n  m: { provider: fake }\npools:\n  cached: { cache: { ttl: 1m }, members: [{ model: m }] }\n";
    let (one, _) = fleet_state_gateway(yaml, &redis.url()).await;
    let (two, _) = fleet_state_gateway(yaml, &redis.url()).await;
    let client = redis::Client::open(redis.url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let megabyte = |n: usize| format!("{n} {}", "x".repeat(1 << 20));
    for n in 0..5 {
        let body = chat_body(Protocol::OpenAi, "cached", &megabyte(n), false);
        let first = post(one, "/v1/chat/completions", &[], body.clone()).await;
        assert_eq!(first.headers.get("x-switchyard-cache").unwrap(), "miss");
        let deadline = Instant::now() + Duration::from_secs(5);
        while post(two, "/v1/chat/completions", &[], body.clone()).await.headers["x-switchyard-cache"] != "hit" {
            assert!(Instant::now() < deadline, "answer {n} never reached the other instance");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // What Redis holds: every key of the cache and its size.
        let keys: Vec<String> =
            redis::cmd("KEYS").arg("switchyard:cache:*").query_async(&mut connection).await.unwrap();
        let mut held = 0;
        let mut values = 0;
        for key in &keys {
            let kind: String = redis::cmd("TYPE").arg(key).query_async(&mut connection).await.unwrap();
            if kind == "string" && !key.ends_with(":bytes") {
                let length: usize = redis::cmd("STRLEN").arg(key).query_async(&mut connection).await.unwrap();
                held += length;
                values += usize::from(length > 1000);
                // The request's bytes once, and the reply (the fake echoes the prompt).
                assert!(length < (2 << 20) + 8192, "{key} holds {length} bytes for a 1 MiB request");
            }
        }
        eprintln!("fleet cache after answer {n}: {values} answers, {held} bytes in Redis");
        assert!(held <= 5 << 20, "{held} bytes in Redis over a 5 MiB bound");
        assert_eq!(values, (n + 1).min(2), "each answer once; the oldest go past the bound");
    }
    // The newest is still a hit; the first went past the bound.
    let newest =
        post(two, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "cached", &megabyte(4), false)).await;
    assert_eq!(newest.headers["x-switchyard-cache"], "hit");
    let first =
        post(two, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "cached", &megabyte(0), false)).await;
    assert_eq!(first.headers["x-switchyard-cache"], "miss");
}

/// [`fleet_config`] with groups whose agent runs are capped: `crew` by
/// spend ($0.3: about three calls' reservations at once), `steps` by model
/// calls (5).
fn runs_config(database: &str, redis: &str) -> String {
    let mut yaml = fleet_config(database, redis, "fail_closed");
    yaml.push_str("groups:\n  crew: { runs: { usd: 0.3 } }\n  steps: { runs: { calls: 5 } }\n");
    yaml
}

async fn ask_on_run(addr: SocketAddr, key: &str, run: &str) -> (StatusCode, String) {
    let auth = format!("Bearer {key}");
    let body = serde_json::json!({"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "hello"}]});
    let headers = [("authorization", auth.as_str()), ("x-switchyard-run", run)];
    let reply = post(addr, "/v1/chat/completions", &headers, body.to_string()).await;
    (reply.status, String::from_utf8_lossy(&reply.body).into_owned())
}

/// Run `id` of key id `key` as `addr` lists it, once no call of it is in
/// flight (settlement reaches Redis in the background).
async fn settled_run(addr: SocketAddr, id: &str, key: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = admin_call(addr, "GET", "/api/v1/admin/runs", Some(ADMIN_TOKEN), None).await;
        assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
        let page: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        let found = page["runs"].as_array().unwrap().iter().find(|r| r["id"] == id && r["key"] == key).cloned();
        if let Some(run) = found.filter(|run| run["in_flight"] == 0) {
            return run;
        }
        assert!(Instant::now() < deadline, "run {id} of {key} never settled: {page}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn key_in_group(one: SocketAddr, two: SocketAddr, group: &str) -> (String, String) {
    let made = create_key(one, serde_json::json!({"name": format!("{group}-agent"), "group": group})).await;
    let (key, id) = (made["key"].as_str().unwrap().to_owned(), made["id"].as_str().unwrap().to_owned());
    while ask(two, &key).await.0 == StatusCode::UNAUTHORIZED {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (key, id)
}

/// A run's USD cap holds across two instances: 60 concurrent calls split
/// between them (each reserving about $0.1 and costing about $0.01) on
/// one run, and calls alternating between them on another until one is
/// refused; the run's spend,
/// which both instances list alike from Redis, never passes the cap (its
/// calls in flight never under-reserved), and either instance's refusal
/// names the run and the limit. Another key's run of the same id is its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_usd_cap_holds_across_instances_and_another_keys_run_is_its_own() {
    let (Some(database), Some(redis)) = (fresh_database().await, Redis::start()) else { return };
    let (one, _) = governed(&runs_config(&database, &redis.url())).await;
    let (two, _) = governed(&runs_config(&database, &redis.url())).await;
    let (key, id) = key_in_group(one, two, "crew").await;
    // A burst on run `burst`: the reservations held fleet-wide admit only
    // what fits the cap at once, and the first refusal stops the run.
    let mut calls = Vec::new();
    for n in 0..60 {
        let (addr, key) = (if n % 2 == 0 { one } else { two }, key.clone());
        calls.push(tokio::spawn(async move { ask_on_run(addr, &key, "burst").await }));
    }
    let mut burst = 0;
    for call in calls {
        let (status, body) = call.await.unwrap();
        match status {
            StatusCode::OK => burst += 1,
            StatusCode::TOO_MANY_REQUESTS => assert!(body.contains("run `burst` is stopped"), "{body}"),
            other => panic!("{other}: {body}"),
        }
    }
    let run = settled_run(one, "burst", &id).await;
    let spent = run["spent_usd"].as_f64().unwrap();
    eprintln!("fleet run burst: {burst} of 60 served, ${spent:.4} spent of a $0.3 cap");
    assert!((1..=3).contains(&burst), "{burst} of 60 concurrent calls each reserving $0.1 served under $0.3");
    assert_eq!((run["calls"].as_u64(), run["state"].as_str()), (Some(burst), Some("limited(usd)")), "{run}");
    let mut served = 0;
    // Alternating one at a time until the run is spent.
    let mut n = 0;
    let refusal = loop {
        let addr = if n % 2 == 0 { one } else { two };
        let (status, body) = ask_on_run(addr, &key, "job").await;
        if status != StatusCode::OK {
            break (status, body);
        }
        assert_eq!(status, StatusCode::OK, "{body}");
        served += 1;
        n += 1;
        assert!(n < 100, "a $0.3 run never stopped");
    };
    assert_eq!(refusal.0, StatusCode::TOO_MANY_REQUESTS, "{}", refusal.1);
    assert!(refusal.1.contains("run `job` is stopped") && refusal.1.contains("`usd` limit of $0.3"), "{}", refusal.1);
    // The other instance refuses it too, naming the same run and limit.
    let addr = if n % 2 == 0 { two } else { one };
    let (status, body) = ask_on_run(addr, &key, "job").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(body.contains("run `job` is stopped") && body.contains("`usd` limit"), "{body}");
    let (run_one, run_two) = (settled_run(one, "job", &id).await, settled_run(two, "job", &id).await);
    assert_eq!(run_one, run_two, "both instances list the fleet's run");
    let spent = run_one["spent_usd"].as_f64().unwrap();
    eprintln!("fleet run: {served} served alternating, ${spent:.4} spent of a $0.3 cap");
    assert!(served > 10, "{served} calls alternating before a $0.3 run stopped");
    assert!(spent > 0.0 && spent <= 0.3, "the fleet's run spent ${spent} of $0.3");
    assert_eq!(run_one["calls"], served, "{run_one}");
    assert_eq!(run_one["reserved_usd"], 0.0, "{run_one}");
    // Another key naming the same run id holds a run of its own.
    let (other, other_id) = key_in_group(one, two, "crew").await;
    assert_eq!(ask_on_run(two, &other, "job").await.0, StatusCode::OK);
    assert_eq!(settled_run(one, "job", &other_id).await["calls"], 1);
}

/// A run's call cap holds across two instances alternating calls, and a
/// kill on one instance stops a run on the other at its next call (and
/// only that key's run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_call_cap_and_a_kill_hold_across_instances() {
    let (Some(database), Some(redis)) = (fresh_database().await, Redis::start()) else { return };
    let (one, _) = governed(&runs_config(&database, &redis.url())).await;
    let (two, _) = governed(&runs_config(&database, &redis.url())).await;
    let (key, id) = key_in_group(one, two, "steps").await;
    for n in 0..5 {
        let addr = if n % 2 == 0 { one } else { two };
        let (status, body) = ask_on_run(addr, &key, "capped").await;
        assert_eq!(status, StatusCode::OK, "call {n}: {body}");
    }
    for addr in [two, one] {
        let (status, body) = ask_on_run(addr, &key, "capped").await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
        assert!(body.contains("run `capped` is stopped: it reached its `calls` limit of 5 model calls"), "{body}");
    }
    let run = settled_run(two, "capped", &id).await;
    assert_eq!((run["calls"].as_u64(), run["state"].as_str()), (Some(5), Some("limited(calls)")), "{run}");

    // A kill on one instance: the other refuses the run's next call.
    let (other, other_id) = key_in_group(one, two, "steps").await;
    assert_eq!(ask_on_run(two, &key, "doomed").await.0, StatusCode::OK);
    assert_eq!(ask_on_run(one, &other, "doomed").await.0, StatusCode::OK);
    let path = format!("/api/v1/admin/runs/doomed/kill?key={id}");
    let killed = admin_call(one, "POST", &path, Some(ADMIN_TOKEN), None).await;
    assert_eq!(killed.status, 200, "{}", String::from_utf8_lossy(&killed.body));
    let (status, body) = ask_on_run(two, &key, "doomed").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(body.contains("run `doomed` is stopped: an operator killed it"), "{body}");
    assert_eq!(ask_on_run(one, &key, "doomed").await.0, StatusCode::TOO_MANY_REQUESTS);
    // The other key's run of that id was not in the kill's reach.
    assert_eq!(ask_on_run(two, &other, "doomed").await.0, StatusCode::OK);
    assert_eq!(settled_run(two, "doomed", &other_id).await["state"], "open");
    assert_eq!(settled_run(one, "doomed", &id).await["state"], "killed");
    let missing = admin_call(two, "POST", "/api/v1/admin/runs/nobody/kill", Some(ADMIN_TOKEN), None).await;
    assert_eq!(missing.status, 404);
}
