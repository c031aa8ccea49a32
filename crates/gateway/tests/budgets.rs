//! Budgets that shape traffic, over real TCP: a spent budget with
//! `on_exhaust.downgrade` serves from its cheaper pool and says so, one
//! without it refuses with the caller's quota error, a per-model daily
//! token quota refuses only that model, and per-second and calendar
//! quotas are read from the config and the admin API, bounded.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

use common::*;
use serde_json::json;
use switchyard_protocol::codec;
use switchyard_protocol::ir::{ErrorKind, Protocol};

/// Two models on the fake, one dear and one cheap, and three groups: one
/// whose budget downgrades, one whose budget refuses, one with a daily
/// token quota on the dear model alone.
fn config() -> String {
    "providers:\n  fake: { protocol: openai, base_url: mock:// }\n\
     models:\n  premium: { provider: fake, model: wire-premium }\n  cheap: { provider: fake, model: wire-cheap }\n\
     rate_card:\n  premium: { input_utok: 1000, output_utok: 2000 }\n  cheap: { input_utok: 1, output_utok: 1 }\n\
     auth: { mode: keys }\n\
     governance: { ledger_flush_interval: 20ms }\n\
     groups:\n\
     \x20 acme: { budget: { usd: 1, window: 1d, warn: [80%, 95%], on_exhaust: { downgrade: cheap } } }\n\
     \x20 globex: { budget: { usd: 1, window: 1d } }\n\
     \x20 initech: { limits: { rps: 50, per_model: { premium: { tpd: 400 } } } }\n"
        .to_owned()
}

async fn ask(addr: std::net::SocketAddr, key: &str, model: &str, max_tokens: u64) -> Reply {
    let auth = format!("Bearer {key}");
    let body = json!({"model": model, "max_tokens": max_tokens, "messages": [{"role": "user", "content": "hello"}]});
    post(addr, "/v1/chat/completions", &[("authorization", &auth)], body.to_string()).await
}

fn text(reply: &Reply) -> String {
    String::from_utf8_lossy(&reply.body).into_owned()
}

#[tokio::test]
async fn a_spent_budget_downgrades_to_its_cheaper_pool_and_says_so() {
    let (addr, _) = governed(&config()).await;
    let acme = create_key(addr, json!({"name": "a", "group": "acme"})).await;
    let acme = acme["key"].as_str().unwrap();
    // $1 a day: the dear model's worst case (1000 tokens at $2,000 a
    // million) is $2, more than the budget holds; the cheap one's fits.
    let reply = ask(addr, acme, "premium", 1000).await;
    assert_eq!(reply.status, 200, "{}", text(&reply));
    assert_eq!(reply.headers["x-switchyard-route-policy"], "downgraded");
    assert_eq!(reply.headers["x-switchyard-downgrade"], "spent; bucket=group:acme; from=premium");
    let body: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(body["model"], "wire-cheap", "served by the cheaper pool: {body}");
    // A request the budget can pay for at the dear pool's prices is not
    // downgraded.
    let fits = ask(addr, acme, "premium", 10).await;
    assert_eq!(fits.status, 200, "{}", text(&fits));
    assert!(fits.headers.get("x-switchyard-downgrade").is_none());
    let body: serde_json::Value = serde_json::from_slice(&fits.body).unwrap();
    assert_eq!(body["model"], "wire-premium");
    // The ledger bills the downgraded request at the cheap lane.
    let rows = ledger_rows(addr, "", 2).await;
    let lanes: Vec<&str> = rows.iter().filter_map(|row| row["lane"].as_str()).collect();
    assert!(lanes.contains(&"cheap") && lanes.contains(&"premium"), "{rows:?}");

    // Without a downgrade the spent budget refuses, in the caller's
    // protocol's quota error.
    let globex = create_key(addr, json!({"name": "g", "group": "globex"})).await;
    let refused = ask(addr, globex["key"].as_str().unwrap(), "premium", 1000).await;
    assert_eq!(refused.status, 429, "{}", text(&refused));
    assert_eq!(codec(Protocol::OpenAi).extract_error(429, &refused.body).kind, ErrorKind::QuotaExceeded);
    assert!(text(&refused).contains("insufficient_quota"), "{}", text(&refused));
    assert!(refused.headers.get("x-switchyard-route-policy").is_none());
}

#[tokio::test]
async fn degrade_then_refuse_when_even_the_cheaper_pool_cannot_be_paid_for() {
    let (addr, _) = governed(&config()).await;
    // The key may not use the cheaper pool: the spent budget's refusal stands.
    let limited = create_key(addr, json!({"name": "l", "group": "acme", "pools": ["premium"]})).await;
    let refused = ask(addr, limited["key"].as_str().unwrap(), "premium", 1000).await;
    assert_eq!(refused.status, 429, "{}", text(&refused));
    assert!(text(&refused).contains("budget of group `acme` is exhausted"), "{}", text(&refused));
    // A request too dear even for the cheaper pool: refused at its prices
    // (1,000,000 tokens at $1 a million is $1, and the budget holds $1
    // minus what the input costs).
    let acme = create_key(addr, json!({"name": "a", "group": "acme"})).await;
    let refused = ask(addr, acme["key"].as_str().unwrap(), "premium", 1_000_000).await;
    assert_eq!(refused.status, 429, "{}", text(&refused));
    assert_eq!(codec(Protocol::OpenAi).extract_error(429, &refused.body).kind, ErrorKind::QuotaExceeded);
}

#[tokio::test]
async fn a_per_model_daily_token_quota_refuses_only_that_model() {
    let (addr, _) = governed(&config()).await;
    let key = create_key(addr, json!({"name": "i", "group": "initech"})).await;
    let key = key["key"].as_str().unwrap();
    // Each request holds its input and 100 output tokens of the 400 a day
    // until it settles to what the fake used (a few tokens).
    let mut served = 0;
    let refused = loop {
        let reply = ask(addr, key, "premium", 390).await;
        if reply.status != 200 {
            break reply;
        }
        served += 1;
        assert!(served < 100, "the quota never refused");
    };
    assert!(served >= 1, "the first request fits the quota");
    assert_eq!(refused.status, 429, "{}", text(&refused));
    assert_eq!(codec(Protocol::OpenAi).extract_error(429, &refused.body).kind, ErrorKind::QuotaExceeded);
    assert!(text(&refused).contains("`premium` in group `initech` has used its quota"), "{}", text(&refused));
    assert!(refused.headers.contains_key("retry-after"), "until the next UTC day");
    // The other model is not limited by it.
    for _ in 0..5 {
        let reply = ask(addr, key, "cheap", 390).await;
        assert_eq!(reply.status, 200, "{}", text(&reply));
    }
    // The group's read shows the per-model quota's figures.
    let read = admin_call(addr, "GET", "/api/v1/admin/groups/initech", Some(ADMIN_TOKEN), None).await;
    let view: serde_json::Value = serde_json::from_slice(&read.body).unwrap();
    assert_eq!(view["limits"]["per_model"]["premium"]["tpd"], 400, "{view}");
    assert_eq!(view["limits"]["rps"], 50, "{view}");
}

#[tokio::test]
async fn new_limits_out_of_range_are_refused_with_their_key_path() {
    // At boot: the key path of each, all at once.
    let yaml = format!(
        "{}\x20 bad: {{ budget: {{ usd: 1, window: 1d, warn: [150%], on_exhaust: {{ downgrade: nowhere }} }}, \
         limits: {{ tpd: 0, rps: 1125899906842625, usd_per_day: -1, per_model: {{ premium: {{ per_model: {{ cheap: {{ rpm: 1 }} }} }} }} }} }}\n",
        config()
    );
    let error = switchyard_config::load(&yaml, &|_| None).unwrap_err().to_string();
    for path in [
        "groups.bad.budget.warn[0]",
        "groups.bad.budget.on_exhaust.downgrade",
        "groups.bad.limits.tpd",
        "groups.bad.limits.rps",
        "groups.bad.limits.usd_per_day",
        "groups.bad.limits.per_model.premium.per_model",
    ] {
        assert!(error.contains(path), "{path} not named in: {error}");
    }
    // Over the admin API: a 400 naming the key.
    let (addr, _) = governed(&config()).await;
    for (body, path) in [
        (json!({"name": "x", "limits": {"tpd": 0}}), "limits.tpd"),
        (
            json!({"name": "x", "limits": {"per_model": {"premium": {"rps": 1_u64 << 51}}}}),
            "limits.per_model.premium.rps",
        ),
        (json!({"name": "x", "limits": {"usd_per_month": 1e13}}), "limits.usd_per_month"),
        (
            json!({"name": "x", "budget": {"usd": 1, "window": "1d", "on_exhaust": {"downgrade": "cheap", "at": 0}}}),
            "budget.on_exhaust.at",
        ),
    ] {
        let reply = admin_call(addr, "POST", "/api/v1/admin/keys", Some(ADMIN_TOKEN), Some(body)).await;
        assert_eq!(reply.status, 400, "{path}: {}", text(&reply));
        assert!(text(&reply).contains(path), "{path}: {}", text(&reply));
    }
    // In range, a key takes them and reads them back.
    let made = create_key(
        addr,
        json!({"name": "ok", "limits": {"rps": 5, "tpd": 1000, "per_model": {"premium": {"rph": 3}}},
               "budget": {"usd": 2, "window": "1mo", "warn": [80.0], "on_exhaust": {"downgrade": "cheap", "at": 90.0}}}),
    )
    .await;
    let id = made["id"].as_str().unwrap();
    let read = admin_call(addr, "GET", &format!("/api/v1/admin/keys/{id}"), Some(ADMIN_TOKEN), None).await;
    let view: serde_json::Value = serde_json::from_slice(&read.body).unwrap();
    assert_eq!(view["limits"]["per_model"]["premium"]["rph"], 3, "{view}");
    assert_eq!(view["budget"]["on_exhaust"], json!({"downgrade": "cheap", "at": 90.0}), "{view}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_warns_once_forecasts_once_and_its_read_says_when_it_runs_out() {
    let (webhook, got) = webhook_receiver().await;
    let yaml = format!("{}alerts: {{ webhook: \"{webhook}\", dedup: 5m }}\n", config());
    let (addr, gateway) = governed(&yaml).await;
    switchyard_gateway::reload::start_tasks(&gateway);
    let made =
        create_key(addr, json!({"name": "burner", "budget": {"usd": 1.0, "window": "total", "warn": [20.0]}})).await;
    let (id, key) = (made["id"].as_str().unwrap().to_owned(), made["key"].as_str().unwrap().to_owned());
    // About $0.02 a request: past 20% within the minute, a pace that runs
    // the dollar out within hours.
    let mut spent = 0.0;
    while spent < 0.25 {
        let reply = ask(addr, &key, "premium", 20).await;
        assert_eq!(reply.status, 200, "{}", text(&reply));
        let read = admin_call(addr, "GET", &format!("/api/v1/admin/keys/{id}"), Some(ADMIN_TOKEN), None).await;
        let view: serde_json::Value = serde_json::from_slice(&read.body).unwrap();
        spent = view["usage"]["spent_usd"].as_f64().unwrap();
    }
    let is = |kind: &'static str| {
        move |v: &serde_json::Value| v["kind"] == kind && v["subject"].as_str().unwrap_or("").contains("`burner`")
    };
    let warning = received(&got, "budget_warning", is("budget_warning")).await;
    assert!(warning["subject"].as_str().unwrap().contains("20%"), "{warning}");
    let forecast = received(&got, "budget_forecast", is("budget_forecast")).await;
    assert!(forecast["detail"].as_str().unwrap().contains("runs out in"), "{forecast}");
    // The per-bucket read and the spend read say when, at what pace.
    let read = admin_call(addr, "GET", &format!("/api/v1/admin/budgets/key:{id}"), Some(ADMIN_TOKEN), None).await;
    assert_eq!(read.status, 200, "{}", text(&read));
    let outlook: serde_json::Value = serde_json::from_slice(&read.body).unwrap();
    let burn = outlook["burn_usd_per_hour"].as_f64().unwrap();
    assert!(burn > 0.0, "{outlook}");
    let now = unix_now() as i64;
    let at = outlook["exhausts_at"].as_i64().unwrap();
    // What is left at the pace seen (the watch's last look, a tick behind).
    let expected =
        now + ((outlook["cap_usd"].as_f64().unwrap() - outlook["spent_usd"].as_f64().unwrap()) / burn * 3600.0) as i64;
    assert!((at - expected).abs() <= 10, "runs out at {at}, expected about {expected}: {outlook}");
    assert!(outlook["runs_out_in"].as_str().unwrap().contains(" m"), "{outlook}");
    let spend = admin_call(addr, "GET", "/api/v1/admin/spend", Some(ADMIN_TOKEN), None).await;
    let report: serde_json::Value = serde_json::from_slice(&spend.body).unwrap();
    let line = report["budgets"].as_array().unwrap().iter().find(|b| b["bucket"] == format!("key:{id}")).cloned();
    assert!(line.is_some_and(|b| b["exhausts_at"].is_i64() && b["burn_usd_per_hour"].is_f64()), "{report}");
    let missing = admin_call(addr, "GET", "/api/v1/admin/budgets/key:nobody", Some(ADMIN_TOKEN), None).await;
    assert_eq!(missing.status, 404);
    // And /metrics.
    let metrics = get_with(admin(addr), "/metrics", &[("authorization", &format!("Bearer {ADMIN_TOKEN}"))]).await;
    let metrics = text(&metrics);
    assert!(metrics.contains(&format!("switchyard_budget_exhausts_in_seconds{{bucket=\"key:{id}\"}}")), "{metrics}");
    // Each once: more spending and more looks in the same window tell nothing new.
    for _ in 0..3 {
        assert_eq!(ask(addr, &key, "premium", 20).await.status, 200);
    }
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let told = got.lock().unwrap().iter().filter(|v| is("budget_warning")(v) || is("budget_forecast")(v)).count();
    assert_eq!(told, 2, "{:?}", got.lock().unwrap());
}
