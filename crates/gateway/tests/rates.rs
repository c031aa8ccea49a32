//! Rate cards over real TCP: an Anthropic upstream reports usage, and the
//! ledger (SQLite) prices each request the way its vendor bills it. A
//! 250,000-token prompt (with an hour-long cache write) is priced at its
//! long-context tier, every token of it; a request the upstream served at
//! its priority tier at that tier's factor; a line of a batch at the
//! discount. A group's markup is charged apart from the cost: the row and
//! `GET /api/v1/admin/spend` show both, and the group's budget counts the
//! cost. A group's own rate card prices the lanes it names (its subgroups
//! too) at its own arithmetic while the cost stays the operator's; a group
//! made over the admin API is priced at the markup and card it was given;
//! and a tenant admin sets no price, on its own group or below.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::Response;
use common::*;
use serde_json::{json, Value};

/// What the fake reports for each wire model: `long` a 250,000-token
/// prompt (200,000 uncached, 50,000 written to the cache for an hour) and
/// 1,000 generated; `short` 1,000 in and 100 out at the standard tier;
/// `fast` the same at the priority tier.
fn usage(model: &str) -> Value {
    match model {
        "long" => json!({
            "input_tokens": 200_000, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 50_000,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 50_000},
            "output_tokens": 1_000, "service_tier": "standard"
        }),
        "fast" => json!({"input_tokens": 1_000, "output_tokens": 100, "service_tier": "priority"}),
        _ => json!({"input_tokens": 1_000, "output_tokens": 100, "service_tier": "standard"}),
    }
}

/// At the card below. The long prompt, every token at the tier's rates:
/// 200,000 × 6 + 50,000 × 12 (hour-long writes) + 1,000 × 22.5 µUSD.
const LONG_NANO: u64 = 1_200_000_000 + 600_000_000 + 22_500_000;
/// The same tokens at the base rates, which a flat card would have billed.
const LONG_AT_BASE_NANO: u64 = 600_000_000 + 300_000_000 + 15_000_000;
/// 1,000 × 3 + 100 × 15 µUSD.
const SHORT_NANO: u64 = 4_500_000;

async fn upstream() -> SocketAddr {
    let app = axum::Router::new().route(
        "/v1/messages",
        axum::routing::post(|body: Bytes| async move {
            let request: Value = serde_json::from_slice(&body).unwrap();
            let model = request["model"].as_str().unwrap().to_owned();
            let reply = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": "Priced."}], "stop_reason": "end_turn",
                "stop_sequence": null, "usage": usage(&model)});
            let mut response = Response::new(Body::from(reply.to_string()));
            response.headers_mut().insert("content-type", "application/json".parse().unwrap());
            response
        }),
    );
    spawn(app).await
}

fn config(upstream: SocketAddr, db: &std::path::Path) -> String {
    format!(
        "{}groups:\n  acme: {{ markup: 15%, budget: {{ usd: 100, window: 1mo }} }}\n  acme-eu: {{ parent: acme }}\n",
        lanes(upstream, db)
    )
}

/// The operator's card (what the provider bills) on the three lanes.
fn lanes(upstream: SocketAddr, db: &std::path::Path) -> String {
    let card =
        "{ input_utok: 3, output_utok: 15, cache_read_utok: 0.3, cache_write_utok: 3.75, cache_write_1h_utok: 6, \
                tiers: [ { above_input_tokens: 200000, input_utok: 6, output_utok: 22.5, cache_read_utok: 0.6, \
                cache_write_utok: 7.5, cache_write_1h_utok: 12 } ], batch_discount: 50%, \
                service_tiers: { priority: 1.8, flex: 0.5 } }";
    format!(
        "auth: {{ mode: keys }}\nstorage: {{ sqlite_path: \"{}\" }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n\
         providers:\n  claude: {{ protocol: anthropic, base_url: \"http://{upstream}\" }}\n\
         models:\n  long: {{ provider: claude }}\n  short: {{ provider: claude }}\n  fast: {{ provider: claude }}\n\
         rate_card:\n  long: {card}\n  short: {card}\n  fast: {card}\n",
        db.display()
    )
}

fn database(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-rates-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("ledger.db");
    let _ = std::fs::remove_file(&db);
    db
}

/// Sends one Anthropic request for `model` as `key`: its ledger row.
async fn priced(addr: SocketAddr, key: &str, model: &str) -> Value {
    let body = json!({"model": model, "max_tokens": 2_000,
                      "messages": [{"role": "user", "content": "Read the whole contract."}]});
    let reply = post(addr, "/v1/messages", &[("x-api-key", key)], body.to_string()).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.headers["x-switchyard-usage"], "exact");
    let id = reply.headers["x-request-id"].to_str().unwrap().to_owned();
    ledger_rows(addr, &format!("request_id={id}"), 1).await.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_prompt_is_priced_at_its_tier_and_a_groups_markup_is_charged_apart_from_cost() {
    let up = upstream().await;
    let (addr, _) = governed(&config(up, &database("tiers"))).await;
    let tenant = create_key(addr, json!({"name": "tenant", "group": "acme-eu"})).await;
    let tenant = tenant["key"].as_str().unwrap().to_owned();
    let house = create_key(addr, json!({"name": "house"})).await;
    let house = house["key"].as_str().unwrap().to_owned();

    // 250,000 input tokens: above the tier's 200,000, so every one of them
    // (the hour-long cache writes at the tier's own rate) and the output are
    // priced at the tier; the group below acme is charged acme's 15 % more.
    let long = priced(addr, &tenant, "long").await;
    assert_eq!(long["input_tokens"], 250_000, "{long}");
    assert_eq!(long["cache_write_1h_tokens"], 50_000, "{long}");
    assert_eq!(long["cost_nano"], LONG_NANO, "{long}");
    assert_ne!(long["cost_nano"], LONG_AT_BASE_NANO, "not the base rates: {long}");
    assert_eq!(long["price_nano"], LONG_NANO * 115 / 100, "{long}");
    // Under the threshold, the base rates; served at priority, its factor.
    let short = priced(addr, &tenant, "short").await;
    assert_eq!((short["cost_nano"].as_u64(), short["price_nano"].as_u64()), (Some(SHORT_NANO), Some(5_175_000)));
    let fast = priced(addr, &tenant, "fast").await;
    assert_eq!(fast["notes"]["service_tier"], "priority", "{fast}");
    assert_eq!(fast["cost_nano"], SHORT_NANO * 9 / 5, "{fast}");
    // A key without a group is charged its cost.
    let plain = priced(addr, &house, "short").await;
    assert_eq!((plain["cost_nano"].as_u64(), plain["price_nano"].as_u64()), (Some(SHORT_NANO), Some(SHORT_NANO)));

    // Spend by group: the cost (what the provider bills) and the price
    // (what the tenant is charged) apart, exactly.
    let cost = LONG_NANO + SHORT_NANO + SHORT_NANO * 9 / 5;
    let spend = admin_call(addr, "GET", "/api/v1/admin/spend?by=group", Some(ADMIN_TOKEN), None).await;
    let spend: Value = serde_json::from_slice(&spend.body).unwrap();
    let acme = spend["data"].as_array().unwrap().iter().find(|line| line["value"] == "acme").unwrap().clone();
    assert_eq!(acme["cost_nano"], cost, "{spend}");
    assert_eq!(acme["price_nano"], LONG_NANO * 115 / 100 + 5_175_000 + 9_315_000, "{spend}");
    assert!((acme["price_usd"].as_f64().unwrap() - acme["price_nano"].as_f64().unwrap() / 1e9).abs() < 1e-12);
    assert_eq!(spend["total_usd"].as_f64().unwrap(), (cost + SHORT_NANO) as f64 / 1e9, "{spend}");
    // The group's budget counts the cost, never the markup.
    let group = admin_call(addr, "GET", "/api/v1/admin/groups/acme", Some(ADMIN_TOKEN), None).await;
    let group: Value = serde_json::from_slice(&group.body).unwrap();
    assert_eq!(group["markup"], 0.15, "{group}");
    let spent = group["usage"]["spent_usd"].as_f64().unwrap();
    assert!((spent - cost as f64 / 1e9).abs() < 1e-9, "{spent} against {cost} nano-USD: {group}");
}

/// Uploads `lines` as a batch file and starts a chat batch: its id.
async fn start_batch(addr: SocketAddr, key: &str, lines: &[String]) -> String {
    let boundary = "switchyardboundary";
    let mut form = format!(
        "--{boundary}\r\ncontent-disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--{boundary}\r\n\
         content-disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\ncontent-type: application/jsonl\r\n\r\n"
    );
    form.push_str(&lines.join("\n"));
    form.push_str(&format!("\r\n--{boundary}--\r\n"));
    let content_type = format!("multipart/form-data; boundary={boundary}");
    let file = post(addr, "/v1/files", &[("authorization", key), ("content-type", &content_type)], form).await;
    assert_eq!(file.status, 200, "{}", String::from_utf8_lossy(&file.body));
    let file: Value = serde_json::from_slice(&file.body).unwrap();
    let batch = json!({"input_file_id": file["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"});
    let batch = post(addr, "/v1/batches", &[("authorization", key)], batch.to_string()).await;
    assert_eq!(batch.status, 200, "{}", String::from_utf8_lossy(&batch.body));
    serde_json::from_slice::<Value>(&batch.body).unwrap()["id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_of_a_batch_is_priced_at_the_discount() {
    let up = upstream().await;
    let (addr, gateway) = governed(&config(up, &database("batch"))).await;
    let data = switchyard_gateway::server::LiveRouter::new(switchyard_gateway::router(gateway.clone()));
    switchyard_gateway::batches::start(&gateway, data);
    let key = create_key(addr, json!({"name": "nightly", "group": "acme"})).await;
    let key_id = key["id"].as_str().unwrap().to_owned();
    let bearer = format!("Bearer {}", key["key"].as_str().unwrap());
    let lines: Vec<String> = (0..2)
        .map(|n| {
            json!({"custom_id": format!("line-{n}"), "method": "POST", "url": "/v1/chat/completions",
                   "body": {"model": "short", "max_tokens": 20, "messages": [{"role": "user", "content": "summarise"}]}})
            .to_string()
        })
        .collect();
    let id = start_batch(addr, &bearer, &lines).await;
    let mut rows = Vec::new();
    for _ in 0..400 {
        rows = ledger_rows(addr, &format!("key={key_id}"), 0).await;
        if rows.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(rows.len(), 2, "batch {id}: {rows:?}");
    for row in &rows {
        // Half of 4,500,000, and the group's markup on that.
        assert_eq!(row["cost_nano"], SHORT_NANO / 2, "{row}");
        assert_eq!(row["price_nano"], SHORT_NANO / 2 * 115 / 100, "{row}");
    }
    // The same request sent directly is priced in full.
    let direct = priced(addr, key["key"].as_str().unwrap(), "short").await;
    assert_eq!(direct["cost_nano"], SHORT_NANO, "{direct}");
}

/// globex's tenant admin token.
const GLOBEX_LEAD: &str = "globex-tenant-token-0123456789";

/// globex's own card at the fake's usage: `short` 1,000 × 5 + 100 × 25
/// µUSD; `long` above its 200,000 tier, 200,000 × 8 + 50,000 × 16 (hour-long
/// writes) + 1,000 × 30 µUSD.
const GLOBEX_SHORT_NANO: u64 = 7_500_000;
const GLOBEX_LONG_NANO: u64 = 1_600_000_000 + 800_000_000 + 30_000_000;

/// Sends `body` to the admin API as `token`: the status and the JSON answer.
async fn admin_json(addr: SocketAddr, method: &str, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
    let reply = admin_call(addr, method, path, Some(token), body).await;
    (reply.status.as_u16(), serde_json::from_slice(&reply.body).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_groups_own_rate_card_prices_what_it_names_and_a_tenant_admin_sets_no_price() {
    let up = upstream().await;
    let yaml = format!(
        "{}groups:\n  globex:\n    markup: 50%\n    budget: {{ usd: 100, window: 1mo }}\n    rate_card:\n      \
         short: {{ input_utok: 5, output_utok: 25 }}\n      long: {{ input_utok: 4, output_utok: 20, cache_write_1h_utok: 8, \
         tiers: [ {{ above_input_tokens: 200000, input_utok: 8, output_utok: 30, cache_write_1h_utok: 16 }} ] }}\n  \
         globex-lab: {{ parent: globex }}\n\
         admin:\n  tokens: [{ADMIN_TOKEN}]\n  tenants: [ {{ token: {GLOBEX_LEAD}, group: globex, name: globex-lead }} ]\n",
        lanes(up, &database("cards"))
    );
    let (addr, _) = governed(&yaml).await;
    let key = |group: &'static str| async move {
        create_key(addr, json!({"name": group, "group": group})).await["key"].as_str().unwrap().to_owned()
    };
    let (globex, lab) = (key("globex").await, key("globex-lab").await);

    // globex's card prices the lanes it names at its own arithmetic (its
    // long-context tier too), whatever they cost; the cost is the
    // operator's card, as for everyone.
    let short = priced(addr, &globex, "short").await;
    assert_eq!(
        (short["cost_nano"].as_u64(), short["price_nano"].as_u64()),
        (Some(SHORT_NANO), Some(GLOBEX_SHORT_NANO))
    );
    let long = priced(addr, &globex, "long").await;
    assert_eq!((long["cost_nano"].as_u64(), long["price_nano"].as_u64()), (Some(LONG_NANO), Some(GLOBEX_LONG_NANO)));
    // A lane the card does not name: globex's markup over its cost.
    let fast = priced(addr, &globex, "fast").await;
    assert_eq!(fast["cost_nano"], SHORT_NANO * 9 / 5, "{fast}");
    assert_eq!(fast["price_nano"], SHORT_NANO * 9 / 5 * 3 / 2, "{fast}");
    // A subgroup that sets no price of its own inherits the card.
    let inherited = priced(addr, &lab, "short").await;
    assert_eq!(inherited["price_nano"], GLOBEX_SHORT_NANO, "{inherited}");
    assert_eq!(inherited["cost_nano"], SHORT_NANO, "{inherited}");

    // Spend shows cost and price apart: globex's line (its subtree) is
    // charged its card's prices, as JSON and as CSV.
    let cost = SHORT_NANO * 2 + LONG_NANO + SHORT_NANO * 9 / 5;
    let price = GLOBEX_SHORT_NANO * 2 + GLOBEX_LONG_NANO + SHORT_NANO * 9 / 5 * 3 / 2;
    let (_, spend) = admin_json(addr, "GET", "/api/v1/admin/spend?by=group", ADMIN_TOKEN, None).await;
    let line = spend["data"].as_array().unwrap().iter().find(|l| l["value"] == "globex").unwrap().clone();
    assert_eq!((line["cost_nano"].as_u64(), line["price_nano"].as_u64()), (Some(cost), Some(price)), "{spend}");
    let csv = admin_call(addr, "GET", "/api/v1/admin/spend?by=group&format=csv", Some(ADMIN_TOKEN), None).await;
    let csv = String::from_utf8_lossy(&csv.body).to_string();
    let row = csv.lines().find(|l| l.starts_with("\"globex\",")).unwrap_or_else(|| panic!("{csv}"));
    let cells: Vec<&str> = row.split(',').collect();
    assert_eq!(
        (cells[8], cells[13]),
        (&*format!("{:.9}", cost as f64 / 1e9), &*format!("{:.9}", price as f64 / 1e9)),
        "{csv}"
    );
    // The group read shows its card as it prices (every rate it names).
    let (_, read) = admin_json(addr, "GET", "/api/v1/admin/groups/globex", ADMIN_TOKEN, None).await;
    assert_eq!(read["markup"], 0.5, "{read}");
    assert_eq!(
        read["rate_card"]["short"],
        json!({"input_utok": 5.0, "output_utok": 25.0, "cache_read_utok": 5.0, "cache_write_utok": 5.0}),
        "{read}"
    );
    assert_eq!(read["rate_card"]["long"]["tiers"][0]["cache_write_1h_utok"], 16.0, "{read}");

    // A group made over the admin API with a markup is priced at it; a
    // card given later prices what it names; a card that does not check
    // is refused with every problem and its fix, and changes nothing.
    let (status, made) =
        admin_json(addr, "POST", "/api/v1/admin/groups", ADMIN_TOKEN, Some(json!({"name": "initech", "markup": 0.25})))
            .await;
    assert_eq!((status, made["markup"].as_f64()), (201, Some(0.25)), "{made}");
    let initech = key("initech").await;
    let marked = priced(addr, &initech, "short").await;
    assert_eq!(
        (marked["cost_nano"].as_u64(), marked["price_nano"].as_u64()),
        (Some(SHORT_NANO), Some(SHORT_NANO * 5 / 4))
    );
    let wrong = json!({"rate_card": {"short": {"input_utok": -1}, "gpt-4o": {"input_utok": 1}}, "markup": 20});
    let (status, refused) = admin_json(addr, "PATCH", "/api/v1/admin/groups/initech", ADMIN_TOKEN, Some(wrong)).await;
    assert!(status == 400 && refused.to_string().contains("markup: 20 is not a markup"), "{refused}");
    let (status, refused) = admin_json(
        addr,
        "PATCH",
        "/api/v1/admin/groups/initech",
        ADMIN_TOKEN,
        Some(json!({"rate_card": {"short": {"input_utok": -1}, "gpt-4o": {"input_utok": 1}}})),
    )
    .await;
    let error = refused.to_string();
    assert_eq!(status, 400, "{refused}");
    assert!(
        error.contains("rate_card.gpt-4o: model `gpt-4o` is not defined")
            && error.contains("fix: price a defined model"),
        "{error}"
    );
    assert!(error.contains("rate_card.short: prices must be finite and not negative"), "{error}");
    let card = json!({"rate_card": {"short": {"input_utok": 6, "output_utok": 30}}});
    let (status, changed) = admin_json(addr, "PATCH", "/api/v1/admin/groups/initech", ADMIN_TOKEN, Some(card)).await;
    assert_eq!((status, changed["markup"].as_f64()), (200, Some(0.25)), "{changed}");
    let carded = priced(addr, &initech, "short").await;
    assert_eq!((carded["cost_nano"].as_u64(), carded["price_nano"].as_u64()), (Some(SHORT_NANO), Some(9_000_000)));
    let still_marked = priced(addr, &initech, "fast").await;
    assert_eq!(still_marked["price_nano"], SHORT_NANO * 9 / 5 * 5 / 4, "{still_marked}");

    // globex's tenant admin reads its prices but sets none: not on its own
    // group, not on a group it makes, not on one below it (a clear too);
    // what it makes takes globex's card.
    let lead =
        |method: &'static str, path: &'static str, body: Value| admin_json(addr, method, path, GLOBEX_LEAD, Some(body));
    let (status, own) = admin_json(addr, "GET", "/api/v1/admin/groups/globex", GLOBEX_LEAD, None).await;
    assert_eq!((status, own["rate_card"]["short"]["input_utok"].as_f64()), (200, Some(5.0)), "{own}");
    let attempts = [
        ("PATCH", "/api/v1/admin/groups/globex", json!({"markup": 0})),
        ("POST", "/api/v1/admin/groups", json!({"name": "globex-cheap", "markup": 0})),
        ("POST", "/api/v1/admin/groups", json!({"name": "globex-cheap", "rate_card": {"short": {"input_utok": 0.01}}})),
        ("PATCH", "/api/v1/admin/groups/globex-lab", json!({"rate_card": null})),
    ];
    for (method, path, body) in attempts {
        let (status, refused) = lead(method, path, body.clone()).await;
        assert_eq!(status, 403, "{method} {path} {body}: {refused}");
    }
    let (status, refused) = lead("PATCH", "/api/v1/admin/groups/globex-lab", json!({"markup": 0})).await;
    assert!(
        status == 403 && refused.to_string().contains("markup: a group's price is the gateway admin's"),
        "{refused}"
    );
    let (status, team) = lead("POST", "/api/v1/admin/groups", json!({"name": "globex-team"})).await;
    assert_eq!((status, team.get("markup"), team.get("rate_card")), (201, None, None), "{team}");
    let teammate = key("globex-team").await;
    assert_eq!(priced(addr, &teammate, "short").await["price_nano"], GLOBEX_SHORT_NANO);
    let (status, _) = lead("PATCH", "/api/v1/admin/groups/globex-team", json!({"markup": 0})).await;
    assert_eq!(status, 403);
    assert_eq!(priced(addr, &teammate, "short").await["price_nano"], GLOBEX_SHORT_NANO, "the refusal changed nothing");

    // The audit log records each price change with what changed, and each
    // refused attempt.
    let (_, audit) = admin_json(addr, "GET", "/api/v1/admin/audit?limit=1000", ADMIN_TOKEN, None).await;
    let entries = audit["data"].as_array().unwrap();
    let action = |entry: &Value| entry["action"].as_str().unwrap_or_default().to_owned();
    let actions: Vec<String> = entries.iter().map(action).collect();
    assert!(actions.contains(&"POST /api/v1/admin/groups (markup none -> 25%)".to_owned()), "{actions:?}");
    assert!(actions.contains(&"PATCH /api/v1/admin/groups/initech (rate_card short)".to_owned()), "{actions:?}");
    let refused =
        entries.iter().filter(|e| e["outcome"] == 403 && e["actor"] == "globex-lead (tenant admin of globex)");
    assert_eq!(refused.count(), 6, "{audit}");
}
