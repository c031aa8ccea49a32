//! Live config reload over real TCP: a reload under load fails no request,
//! a lane that survives keeps its breaker, a bad file is refused with every
//! problem while the running config keeps serving, and sections the process
//! is built around wait for a restart.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{chat_body, post, ADMIN_TOKEN};
use http::StatusCode;
use switchyard_gateway::reload::{Reloader, TextSource};
use switchyard_gateway::server::{serve, LiveRouter, Settings};
use switchyard_gateway::Gateway;
use switchyard_protocol::codec;
use switchyard_protocol::ir::Protocol;

/// A gateway as the binary runs it, whose "file" is `text`.
struct Running {
    data: SocketAddr,
    admin: SocketAddr,
    text: Arc<Mutex<String>>,
    reloader: Arc<Reloader>,
}

async fn start(yaml: &str) -> Running {
    let text = Arc::new(Mutex::new(yaml.to_owned()));
    let config = switchyard_config::load(yaml, &|_| None).unwrap();
    let gateway = Arc::new(Gateway::new(config, codec).unwrap().with_telemetry());
    let data_router = LiveRouter::new(switchyard_gateway::router(gateway.clone()));
    let admin_router = LiveRouter::new(switchyard_gateway::admin_router(gateway.clone()));
    let source = Arc::new(TextSource { text: text.clone(), env: |_| None });
    let reloader = Reloader::new(gateway.clone(), data_router.clone(), admin_router.clone(), source);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let data = listener.local_addr().unwrap();
    let settings = switchyard_gateway::server::data_settings(&gateway, Arc::default());
    tokio::spawn(serve(listener, data_router, settings, std::future::pending()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = listener.local_addr().unwrap();
    let plain = Settings::plain(switchyard_config::Server::default());
    tokio::spawn(serve(listener, admin_router, plain, std::future::pending()));
    Running { data, admin, text, reloader }
}

async fn reload(running: &Running, yaml: &str) -> (StatusCode, serde_json::Value) {
    *running.text.lock().unwrap() = yaml.to_owned();
    let reply =
        post(running.admin, "/api/v1/admin/config/reload", &[("authorization", &format!("Bearer {ADMIN_TOKEN}"))], "")
            .await;
    (reply.status, serde_json::from_slice(&reply.body).unwrap())
}

async fn chat(addr: SocketAddr, model: &str) -> StatusCode {
    post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, model, "hi", false)).await.status
}

fn config(pool_members: &str, extra: &str) -> String {
    format!(
        "admin: {{ tokens: [{ADMIN_TOKEN}] }}\nproviders:\n  fake: {{ protocol: openai, base_url: mock:// }}\n  fake-claude: {{ protocol: anthropic, base_url: mock:// }}\n\
         models:\n  a: {{ provider: fake }}\n  b: {{ provider: fake-claude }}\npools:\n  p:\n    members: [{pool_members}]\n{extra}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_reloads_under_load_fail_no_request() {
    let one = config("{ model: a }", "");
    let two = config("{ model: a }, { model: b }", "  q:\n    members: [{ model: b }]\n");
    let running = start(&one).await;
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(Mutex::new(Vec::new()));
    let mut clients = Vec::new();
    for _ in 0..8 {
        let (stop, served, failed, data) = (stop.clone(), served.clone(), failed.clone(), running.data);
        clients.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match chat(data, "p").await {
                    StatusCode::OK => served.fetch_add(1, Ordering::Relaxed),
                    other => {
                        failed.lock().unwrap().push(other);
                        0
                    }
                };
            }
        }));
    }
    for round in 0..20 {
        let (status, body) = reload(&running, if round % 2 == 0 { &two } else { &one }).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }
    assert!(failed.lock().unwrap().is_empty(), "failed requests: {:?}", failed.lock().unwrap());
    assert!(served.load(Ordering::Relaxed) >= 100, "only {} requests ran", served.load(Ordering::Relaxed));
    assert_eq!(running.reloader.done.load(Ordering::Relaxed), 20);
    // The last reload (round 19) served `one`: no pool `q`.
    assert_eq!(chat(running.data, "q").await, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_surviving_lane_keeps_its_breaker_and_a_bad_file_changes_nothing() {
    // A lane whose upstream refuses connections trips after two failures.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let extra = "  d:\n    breaker: { consecutive_failures: 2 }\n    members: [{ model: dead }]\n";
    let with_dead = |extra_pool: &str| {
        config("{ model: a }", &format!("{extra}{extra_pool}"))
            .replace("models:\n", "models:\n  dead: { provider: gone }\n")
            .replace(
                "providers:\n",
                &format!("providers:\n  gone: {{ protocol: openai, base_url: \"http://{dead}\" }}\n"),
            )
    };
    let running = start(&with_dead("")).await;
    for _ in 0..2 {
        assert_ne!(chat(running.data, "d").await, StatusCode::OK);
    }
    let breaker = |gateway: &Gateway| {
        let pool = &gateway.pools[gateway.resolve("d").unwrap()];
        pool.breaker(0).snapshot(std::time::Instant::now()).state
    };
    assert_eq!(breaker(&running.reloader.current()).as_str(), "open");

    let dialer = |gateway: &Gateway| {
        gateway.lanes[gateway.resolve("dead").map(|p| gateway.pools[p].members[0]).unwrap()].transport.clone()
    };
    let before = dialer(&running.reloader.current());
    let (status, body) = reload(&running, &with_dead("  q:\n    members: [{ model: b }]\n")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(Arc::ptr_eq(&before, &dialer(&running.reloader.current())), "a surviving lane keeps its connection pool");
    assert_eq!(chat(running.data, "q").await, StatusCode::OK, "the new pool serves");
    assert_eq!(breaker(&running.reloader.current()).as_str(), "open", "the surviving lane stays tripped");

    let bad =
        "providers:\n  fake: { protocol: openai, base_url: mock://, colour: red }\nmodels:\n  a: { provider: ghost }\n";
    let (status, body) = reload(&running, bad).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let problems = body["error"]["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 2, "{body}");
    assert!(problems.iter().any(|p| p["path"] == "models.a.provider"), "{body}");
    assert_eq!(chat(running.data, "q").await, StatusCode::OK, "the running config keeps serving");
    assert_eq!(running.reloader.refused.load(Ordering::Relaxed), 1);

    let moved = format!("listen: 127.0.0.1:1\n{}", with_dead(""));
    let (status, body) = reload(&running, &moved).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["outcome"]["restart_required"], serde_json::json!(["listen"]));
    assert_eq!(chat(running.data, "a").await, StatusCode::OK, "still on the running listener");
    // The console's config view says so.
    assert_eq!(running.reloader.current().restart_pending, ["listen"]);
}

#[tokio::test]
async fn a_reloaded_budget_tree_takes_effect() {
    let file = |usd: u32| {
        format!(
            "admin: {{ tokens: [{ADMIN_TOKEN}] }}\nauth: {{ mode: keys }}\nproviders:\n  fake: {{ protocol: openai, base_url: mock:// }}\n\
             models:\n  a: {{ provider: fake }}\ngroups:\n  team: {{ budget: {{ usd: {usd}, window: 1d }} }}\n"
        )
    };
    let text = Arc::new(Mutex::new(file(10)));
    let config = switchyard_config::load(&file(10), &|_| None).unwrap();
    let mut gateway = Gateway::new(config, codec).unwrap();
    let (governance, writer) =
        switchyard_state::governance::from_config(&gateway.config, Default::default()).await.unwrap().unwrap();
    std::mem::forget(writer);
    gateway = gateway.with_governance(governance.clone());
    let gateway = Arc::new(gateway);
    let data = LiveRouter::new(switchyard_gateway::router(gateway.clone()));
    let admin = LiveRouter::new(switchyard_gateway::admin_router(gateway.clone()));
    let reloader = Reloader::new(gateway, data, admin, Arc::new(TextSource { text: text.clone(), env: |_| None }));
    let budget =
        || governance.groups().iter().find(|g| g.name == "team").and_then(|g| g.budget.as_ref().map(|b| b.usd));
    assert_eq!(budget(), Some(10.0));
    *text.lock().unwrap() = file(25);
    let outcome = reloader.reload().await.unwrap();
    assert!(outcome.restart_required.is_empty(), "{outcome:?}");
    assert_eq!(budget(), Some(25.0), "the file's new budget is in force");
    assert!(Arc::ptr_eq(reloader.current().governance.as_ref().unwrap(), &governance), "keys and counters carry on");
}

#[tokio::test]
async fn a_token_taken_out_of_the_config_ends_its_console_sessions() {
    let second = "second-admin-token-0123456789";
    let both = |tokens: &str| {
        format!("admin: {{ tokens: [{tokens}] }}\nproviders:\n  fake: {{ protocol: openai, base_url: mock:// }}\nmodels:\n  a: {{ provider: fake }}\n")
    };
    let running = start(&both(&format!("{ADMIN_TOKEN}, {second}"))).await;
    let form = [("content-type", "application/x-www-form-urlencoded"), ("sec-fetch-site", "same-origin")];
    let signed = post(running.admin, "/ui/login", &form, format!("token={second}")).await;
    let cookie = signed.headers["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
    let console =
        |cookie: String| async move { common::get_with(running.admin, "/ui/", &[("cookie", &cookie)]).await.status };
    assert_eq!(console(cookie.clone()).await, StatusCode::OK);
    // The session survives a reload that keeps its token...
    let (status, body) = reload(&running, &both(&format!("{ADMIN_TOKEN}, {second}"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(console(cookie.clone()).await, StatusCode::OK);
    // ...and ends with one that takes it out.
    let (status, body) = reload(&running, &both(ADMIN_TOKEN)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(console(cookie).await, StatusCode::SEE_OTHER, "sent back to the login form");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_passes_the_boot_checks_on_the_config_that_will_serve() {
    // Running with `auth: keys`; the new file says `auth: open` (so it is
    // valid alone) and turns on caller credentials upstream. Auth is kept at
    // its running value, and keys with passthrough must be refused, as at boot.
    let keys = format!("{}auth: {{ mode: keys }}\n", config("{ model: a }", ""));
    let running = start(&keys).await;
    let passthrough = config("{ model: a }", "").replace(
        "fake: { protocol: openai, base_url: mock:// }",
        "fake: { protocol: openai, base_url: mock://, upstream_credentials: passthrough }",
    );
    assert!(passthrough.contains("passthrough") && switchyard_config::load(&passthrough, &|_| None).is_ok());
    let (status, body) = reload(&running, &format!("{passthrough}auth: {{ mode: open }}\n")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body.to_string().contains("upstream_credentials"), "{body}");
    let served = running.reloader.current();
    assert!(served.lanes.iter().all(|lane| !lane.passthrough_credentials), "the running config keeps serving");
}
