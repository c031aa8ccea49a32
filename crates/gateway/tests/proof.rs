//! Money proven afterwards, over real TCP: reconciliation against fakes of
//! OpenAI's organization usage and costs API and Anthropic's usage and
//! cost reports (their documented shapes), which also serve the day's
//! traffic and report what they served (OpenAI 3 % more tokens, Anthropic
//! 3 % more money); and receipts of that traffic, a chain that verifies
//! until a receipt is changed, removed or moved.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::Json;
use serde_json::{json, Value};
use switchyard_protocol::ir::Protocol;

use crate::common::*;

const OPENAI_ADMIN: &str = "sk-admin-openai-test";
const ANTHROPIC_ADMIN: &str = "sk-ant-admin-test";
/// Each chat reply's usage.
const OAI_IN: u64 = 1_000;
const OAI_OUT: u64 = 500;
const ANT_IN: u64 = 800;
const ANT_OUT: u64 = 200;

/// What the fake served, and what its report requests asked.
#[derive(Default)]
struct Served {
    openai: AtomicU64,
    anthropic: AtomicU64,
    queries: Mutex<Vec<String>>,
}

/// A vendor fake at one address: OpenAI's chat completions and usage API,
/// Anthropic's messages and usage report.
async fn vendor() -> (String, Arc<Served>) {
    let served = Arc::new(Served::default());
    let router = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(openai_chat))
        .route("/v1/messages", axum::routing::post(anthropic_messages))
        .route("/v1/organization/usage/completions", axum::routing::get(openai_usage))
        .route("/v1/organizations/usage_report/messages", axum::routing::get(anthropic_usage))
        .route("/v1/organization/costs", axum::routing::get(openai_costs))
        .route("/v1/organizations/cost_report", axum::routing::get(anthropic_costs))
        .with_state(served.clone());
    let addr = spawn(router).await;
    (format!("http://{addr}"), served)
}

async fn openai_chat(State(served): State<Arc<Served>>) -> ([(&'static str, String); 1], Json<Value>) {
    let n = served.openai.fetch_add(1, Ordering::SeqCst);
    let reply = json!({
        "id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 1, "model": "gpt-4o-2024-08-06",
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": "hi" }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": OAI_IN, "completion_tokens": OAI_OUT, "total_tokens": OAI_IN + OAI_OUT }
    });
    ([("x-request-id", format!("req_oai_{n}"))], Json(reply))
}

async fn anthropic_messages(State(served): State<Arc<Served>>) -> ([(&'static str, String); 1], Json<Value>) {
    let n = served.anthropic.fetch_add(1, Ordering::SeqCst);
    let reply = json!({
        "id": format!("msg_{n}"), "type": "message", "role": "assistant", "model": "claude-sonnet-4-20250514",
        "content": [{ "type": "text", "text": "hi" }], "stop_reason": "end_turn", "stop_sequence": null,
        "usage": { "input_tokens": ANT_IN, "output_tokens": ANT_OUT }
    });
    ([("request-id", format!("req_ant_{n}"))], Json(reply))
}

/// Today's UTC day start (Unix seconds).
fn today() -> u64 {
    unix_now() / 86_400 * 86_400
}

/// OpenAI's usage page: one bucket a day, today's reporting 3 % more
/// tokens than were served.
async fn openai_usage(
    State(served): State<Arc<Served>>,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, axum::http::StatusCode> {
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Bearer {OPENAI_ADMIN}")) {
        return Err(axum::http::StatusCode::UNAUTHORIZED);
    }
    served.queries.lock().unwrap().push(format!("openai {query:?}"));
    let has = |k: &str, v: &str| query.iter().any(|(a, b)| a == k && b == v);
    assert!(has("bucket_width", "1d") && has("group_by", "model"), "{query:?}");
    let start: u64 = query.iter().find(|(k, _)| k == "start_time").unwrap().1.parse().unwrap();
    let n = served.openai.load(Ordering::SeqCst);
    let mut data = Vec::new();
    let mut day = start;
    while day <= today() {
        let results = match day == today() {
            true => vec![json!({
                "object": "organization.usage.completions.result",
                "input_tokens": n * OAI_IN * 103 / 100, "output_tokens": n * OAI_OUT * 103 / 100,
                "input_cached_tokens": 0, "input_audio_tokens": 0, "output_audio_tokens": 0,
                "num_model_requests": n, "project_id": null, "user_id": null, "api_key_id": null,
                "model": "gpt-4o-2024-08-06", "batch": null
            })],
            false => Vec::new(),
        };
        data.push(json!({ "object": "bucket", "start_time": day, "end_time": day + 86_400, "results": results }));
        day += 86_400;
    }
    Ok(Json(json!({ "object": "page", "data": data, "has_more": false, "next_page": null })))
}

/// Anthropic's usage report: exactly what was served.
async fn anthropic_usage(
    State(served): State<Arc<Served>>,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, axum::http::StatusCode> {
    let key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
    if key != Some(ANTHROPIC_ADMIN) || headers.get("anthropic-version").is_none() {
        return Err(axum::http::StatusCode::UNAUTHORIZED);
    }
    served.queries.lock().unwrap().push(format!("anthropic {query:?}"));
    let has = |k: &str, v: &str| query.iter().any(|(a, b)| a == k && b == v);
    assert!(has("bucket_width", "1d") && has("group_by[]", "model"), "{query:?}");
    assert!(query.iter().any(|(k, v)| k == "starting_at" && v.ends_with("T00:00:00Z")), "{query:?}");
    let n = served.anthropic.load(Ordering::SeqCst);
    let day = time_of(today());
    let next = time_of(today() + 86_400);
    Ok(Json(json!({
        "data": [{
            "starting_at": day, "ending_at": next,
            "results": [{
                "api_key_id": null, "workspace_id": null, "service_tier": "standard", "context_window": "0-200k",
                "model": "claude-sonnet-4-20250514",
                "uncached_input_tokens": n * ANT_IN,
                "cache_creation": { "ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0 },
                "cache_read_input_tokens": 0, "output_tokens": n * ANT_OUT,
                "server_tool_use": { "web_search_requests": 0 }
            }]
        }],
        "has_more": false,
        "next_page": null
    })))
}

/// `units` millionths as a decimal's text (`25000` → `0.025000`).
fn millionths(units: u64) -> String {
    format!("{}.{:06}", units / 1_000_000, units % 1_000_000)
}

/// OpenAI's costs by line item, in two pages: today's input line on the
/// first, its output line and a row in euros (left out) on the second.
/// Dollars as JSON numbers: exactly the rate card's, `gpt`'s $2.50 and
/// $10 per million tokens.
async fn openai_costs(
    State(served): State<Arc<Served>>,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, axum::http::StatusCode> {
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Bearer {OPENAI_ADMIN}")) {
        return Err(axum::http::StatusCode::UNAUTHORIZED);
    }
    served.queries.lock().unwrap().push(format!("openai-costs {query:?}"));
    let has = |k: &str, v: &str| query.iter().any(|(a, b)| a == k && b == v);
    assert!(has("bucket_width", "1d") && has("group_by", "line_item"), "{query:?}");
    let n = served.openai.load(Ordering::SeqCst);
    let dollars = |micro: u64| serde_json::from_str::<Value>(&millionths(micro)).unwrap();
    let row = |value: Value, currency: &str, item: &str| {
        json!({ "object": "organization.costs.result", "amount": { "value": value, "currency": currency },
                "line_item": item, "project_id": null })
    };
    let bucket = |day: u64, results: Vec<Value>| json!({ "object": "bucket", "start_time": day, "end_time": day + 86_400, "results": results });
    if has("page", "page_2") {
        let results = vec![
            row(dollars(n * OAI_OUT * 10), "usd", "gpt-4o-2024-08-06, output"),
            row(json!(0.5), "eur", "gpt-4o-2024-08-06, output"),
        ];
        return Ok(Json(
            json!({ "object": "page", "data": [bucket(today(), results)], "has_more": false, "next_page": null }),
        ));
    }
    let start: u64 = query.iter().find(|(k, _)| k == "start_time").unwrap().1.parse().unwrap();
    let mut data = Vec::new();
    let mut day = start;
    while day <= today() {
        let results = match day == today() {
            // $2.50 per million: 2.5 millionths of a dollar a token.
            true => vec![row(dollars(n * OAI_IN * 5 / 2), "usd", "gpt-4o-2024-08-06, input")],
            false => Vec::new(),
        };
        data.push(bucket(day, results));
        day += 86_400;
    }
    Ok(Json(json!({ "object": "page", "data": data, "has_more": true, "next_page": "page_2" })))
}

/// Anthropic's cost report by description: cents as decimal strings, 3 %
/// over the rate card's $3 and $15 per million tokens, and a negative row
/// (left out).
async fn anthropic_costs(
    State(served): State<Arc<Served>>,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, axum::http::StatusCode> {
    let key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
    if key != Some(ANTHROPIC_ADMIN) || headers.get("anthropic-version").is_none() {
        return Err(axum::http::StatusCode::UNAUTHORIZED);
    }
    served.queries.lock().unwrap().push(format!("anthropic-costs {query:?}"));
    let has = |k: &str, v: &str| query.iter().any(|(a, b)| a == k && b == v);
    assert!(has("bucket_width", "1d") && has("group_by[]", "description"), "{query:?}");
    assert!(query.iter().any(|(k, v)| k == "starting_at" && v.ends_with("T00:00:00Z")), "{query:?}");
    let n = served.anthropic.load(Ordering::SeqCst);
    let row = |cents: String, description: &str, token_type: &str| {
        json!({ "currency": "USD", "amount": cents, "workspace_id": null, "description": description,
                "cost_type": "tokens", "context_window": "0-200k", "model": "claude-sonnet-4-20250514",
                "service_tier": "standard", "token_type": token_type })
    };
    // $3 per million is 0.0003 cents a token, $15 is 0.0015; each 3 % more,
    // in millionths of a cent.
    let results = vec![
        row(millionths(n * ANT_IN * 300 * 103 / 100), "Claude Sonnet 4 Usage - Input Tokens", "uncached_input_tokens"),
        row(millionths(n * ANT_OUT * 1_500 * 103 / 100), "Claude Sonnet 4 Usage - Output Tokens", "output_tokens"),
        row("-12.5".to_owned(), "Claude Sonnet 4 Usage - Output Tokens", "output_tokens"),
    ];
    Ok(Json(json!({
        "data": [{ "starting_at": time_of(today()), "ending_at": time_of(today() + 86_400), "results": results }],
        "has_more": false,
        "next_page": null
    })))
}

/// `secs` as RFC 3339 (a whole day).
fn time_of(secs: u64) -> String {
    let days = secs / 86_400;
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T00:00:00Z")
}

/// A governed gateway with both lanes on the fake, reconciliation against
/// it, alerts to `webhook`, and receipts into `receipts`.
async fn proving(
    vendor: &str,
    webhook: &str,
    receipts: &std::path::Path,
) -> (std::net::SocketAddr, Arc<switchyard_gateway::Gateway>) {
    let db = std::env::temp_dir().join(format!("switchyard-proof-{}-{}.db", std::process::id(), fastrand::u32(..)));
    let yaml = format!(
        "providers:\n  oai: {{ protocol: openai, base_url: \"{vendor}\" }}\n  ant: {{ protocol: anthropic, base_url: \"{vendor}\" }}\n\
         models:\n  gpt: {{ provider: oai, model: gpt-4o }}\n  claude: {{ provider: ant, model: claude-sonnet-4 }}\n\
         rate_card:\n  gpt: {{ input_utok: 2.5, output_utok: 10 }}\n  claude: {{ input_utok: 3, output_utok: 15 }}\n\
         auth: {{ mode: keys }}\nstorage: {{ sqlite_path: \"{}\" }}\n\
         governance: {{ ledger_flush_interval: 20ms }}\n\
         alerts: {{ webhook: \"{webhook}\", dedup: 1s }}\n\
         reconcile:\n  tolerance: 2%\n  every: 1h\n  \
         openai: {{ admin_key: {OPENAI_ADMIN}, base_url: \"{vendor}\", providers: [oai] }}\n  \
         anthropic: {{ admin_key: {ANTHROPIC_ADMIN}, base_url: \"{vendor}\", providers: [ant] }}\n\
         receipts: {{ key: receipts-secret-0123456789, path: \"{}\", chain: gw-test }}\n",
        db.display(),
        receipts.display()
    );
    governed(&yaml).await
}

/// A day's traffic: `n` requests to each lane.
async fn traffic(addr: std::net::SocketAddr, n: usize) {
    let key = create_key(addr, json!({ "name": "proof" })).await;
    let bearer = format!("Bearer {}", key["key"].as_str().unwrap());
    for i in 0..n {
        for model in ["gpt", "claude"] {
            let body = chat_body(Protocol::OpenAi, model, &format!("question {i}"), false);
            let reply = post(addr, "/v1/chat/completions", &[("authorization", &bearer)], body).await;
            assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
        }
    }
    ledger_rows(addr, "", 2 * n).await;
}

fn drift_alerts(got: &Received) -> Vec<Value> {
    got.lock().unwrap().iter().filter(|v| v["kind"] == "reconcile_drift").cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciliation_reports_token_and_cost_drift_and_alerts_once() {
    let (vendor, served) = vendor().await;
    let (webhook, got) = webhook_receiver().await;
    let receipts =
        std::env::temp_dir().join(format!("switchyard-receipts-{}-{}.jsonl", std::process::id(), fastrand::u32(..)));
    let (addr, gateway) = proving(&vendor, &webhook, &receipts).await;
    traffic(addr, 10).await;

    // The job, with its clock given: now, then an hour on (the same day
    // unless the test runs at midnight).
    let now = switchyard_state::governance::now_ms();
    switchyard_admin::reconcile::run(&gateway, now).await;
    let reply = admin_call(addr, "GET", "/api/v1/admin/reconciliation", Some(ADMIN_TOKEN), None).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    let view: Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(view["configured"], true);
    let lines = view["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 2, "{view:#}");
    let line = |provider: &str| lines.iter().find(|l| l["provider"] == provider).unwrap().clone();
    let openai = line("openai");
    assert_eq!(openai["model"], "gpt-4o");
    assert_eq!(openai["ledger_tokens"], 10 * (OAI_IN + OAI_OUT));
    assert_eq!(openai["reported_tokens"], 10 * (OAI_IN + OAI_OUT) * 103 / 100);
    assert!((openai["drift"].as_f64().unwrap() - 0.03).abs() < 1e-9, "{openai}");
    assert_eq!(openai["over"], true);
    // Its money agrees: 10 × $0.0075 at the rate card, billed over two pages.
    assert_eq!(
        (openai["ledger_nano"].as_u64(), openai["provider_nano"].as_u64()),
        (Some(75_000_000), Some(75_000_000))
    );
    assert_eq!((openai["ledger_usd"].as_f64(), openai["cost_drift"].as_f64()), (Some(0.075), Some(0.0)));
    assert_eq!(openai["cost_over"], false);
    let anthropic = line("anthropic");
    assert_eq!(anthropic["model"], "claude-sonnet-4");
    assert_eq!(anthropic["ledger_tokens"], 10 * (ANT_IN + ANT_OUT));
    assert_eq!(anthropic["drift"], 0.0);
    assert_eq!(anthropic["over"], false);
    // Its money does not: 10 × $0.0054 metered, $0.05562 billed.
    assert_eq!(
        (anthropic["ledger_nano"].as_u64(), anthropic["provider_nano"].as_u64()),
        (Some(54_000_000), Some(55_620_000))
    );
    assert!((anthropic["cost_drift"].as_f64().unwrap() - 0.03).abs() < 1e-12, "{anthropic}");
    assert_eq!(anthropic["cost_over"], true);
    let runs = view["runs"].as_array().unwrap();
    assert!(runs.iter().all(|r| r["error"].is_null() && r["cost_error"].is_null()), "{view:#}");
    // The hostile rows were left out and counted: a row in euros, a negative one.
    let run = |provider: &str| runs.iter().find(|r| r["provider"] == provider).unwrap()["skipped"].clone();
    assert_eq!(run("openai"), json!({ "negative": 0, "malformed": 0, "huge": 0, "currency": 1 }));
    assert_eq!(run("anthropic"), json!({ "negative": 1, "malformed": 0, "huge": 0, "currency": 0 }));
    let queries = served.queries.lock().unwrap().clone();
    assert!(queries.iter().any(|q| q.starts_with("openai")) && queries.iter().any(|q| q.starts_with("anthropic")));
    // Both cost reports were read, OpenAI's to its second page.
    assert!(queries.iter().any(|q| q.starts_with("anthropic-costs")), "{queries:?}");
    assert!(queries.iter().any(|q| q.starts_with("openai-costs") && q.contains("page_2")), "{queries:?}");

    // Each drift alerts once, saying which drifted: not again on the next
    // run, nor past the alerts' dedup window.
    let subject = |v: &Value, start: &str| v["subject"].as_str().is_some_and(|s| s.starts_with(start));
    let tokens =
        received(&got, "OpenAI's drift alert", |v| v["kind"] == "reconcile_drift" && subject(v, "openai / gpt-4o / "))
            .await;
    let detail = tokens["detail"].as_str().unwrap();
    assert!(detail.starts_with("tokens: openai reports ") && !detail.contains("cost:"), "{tokens}");
    let cost = received(&got, "Anthropic's drift alert", |v| {
        v["kind"] == "reconcile_drift" && subject(v, "anthropic / claude-sonnet-4 / ")
    })
    .await;
    assert_eq!(
        cost["detail"], "cost: anthropic bills $0.05562 where the ledger holds $0.054 (+3.00%) (tolerance 2.00%)",
        "{cost}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    switchyard_admin::reconcile::run(&gateway, now + 3_600_000).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(drift_alerts(&got).len(), 2, "{:?}", got.lock().unwrap());

    // And `/metrics` says it.
    let metrics = get_with(admin(addr), "/metrics", &[("authorization", &format!("Bearer {ADMIN_TOKEN}"))]).await;
    let text = String::from_utf8_lossy(&metrics.body);
    let series =
        text.lines().find(|l| l.starts_with("switchyard_reconcile_drift_ratio{") && l.contains("gpt-4o")).unwrap();
    assert!(series.ends_with(" 0.03") || series.contains(" 0.0300"), "{series}");
    let cost_series = |model: &str| {
        text.lines()
            .find(|l| l.starts_with("switchyard_reconcile_cost_drift_ratio{") && l.contains(model))
            .unwrap_or_else(|| panic!("no cost drift series for {model}: {text}"))
            .to_owned()
    };
    assert!(cost_series("claude-sonnet-4").ends_with(" 0.03"), "{}", cost_series("claude-sonnet-4"));
    assert!(cost_series("gpt-4o").ends_with(" 0.0"), "{}", cost_series("gpt-4o"));
    let skipped = text
        .lines()
        .find(|l| l.starts_with("switchyard_reconcile_cost_rows_skipped_total{") && l.contains("currency"))
        .unwrap();
    // One row in euros on each of the two runs.
    assert!(skipped.contains("openai") && skipped.ends_with(" 2"), "{skipped}");
    let _ = std::fs::remove_file(&receipts);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_settled_request_has_a_receipt_and_the_chain_finds_a_change() {
    use switchyard_governance::receipt::verify;
    let (vendor, _served) = vendor().await;
    let (webhook, _got) = webhook_receiver().await;
    let receipts =
        std::env::temp_dir().join(format!("switchyard-receipts-{}-{}.jsonl", std::process::id(), fastrand::u32(..)));
    let (addr, gateway) = proving(&vendor, &webhook, &receipts).await;
    traffic(addr, 3).await;
    let queue = gateway.governance.as_ref().unwrap().receipts.clone().unwrap();
    // Written, and sealed within a second.
    let mut text = String::new();
    for _ in 0..300 {
        text = std::fs::read_to_string(&receipts).unwrap();
        if text.lines().filter(|l| l.starts_with(r#"{"receipt""#)).count() == 6
            && text.lines().last().is_some_and(|l| l.starts_with(r#"{"seal""#))
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let all: Vec<&str> = text.lines().collect();
    let verified = verify(all.iter().copied(), Some(&queue.public_key)).unwrap();
    assert_eq!((verified.links, verified.sealed, verified.chain.as_deref()), (6, 6, Some("gw-test")));
    let lines: Vec<&str> = all.iter().copied().filter(|l| l.starts_with(r#"{"receipt""#)).collect();

    // Each receipt carries the entry's tokens, price, lane, and what the
    // upstream said of itself.
    let receipts_of: Vec<Value> =
        lines.iter().map(|l| serde_json::from_str::<Value>(l).unwrap()["receipt"].clone()).collect();
    let gpt = receipts_of.iter().find(|r| r["lane"] == "gpt").unwrap();
    assert_eq!(gpt["model"], "gpt-4o");
    assert_eq!(gpt["upstream_model"], "gpt-4o-2024-08-06");
    assert!(gpt["upstream_id"].as_str().unwrap().starts_with("req_oai_"), "{gpt}");
    assert_eq!((gpt["tokens"]["input"].as_u64(), gpt["tokens"]["output"].as_u64()), (Some(OAI_IN), Some(OAI_OUT)));
    // 1,000 × $2.50/M + 500 × $10/M = $0.0075.
    assert_eq!(gpt["cost_nano"], 7_500_000);
    let claude = receipts_of.iter().find(|r| r["lane"] == "claude").unwrap();
    assert_eq!(claude["upstream_model"], "claude-sonnet-4-20250514");
    assert!(claude["upstream_id"].as_str().unwrap().starts_with("req_ant_"), "{claude}");
    // The ledger's rows and the receipts name the same entries.
    let rows = ledger_rows(addr, "", 6).await;
    let request_ids: std::collections::HashSet<&str> = rows.iter().filter_map(|r| r["request_id"].as_str()).collect();
    assert!(receipts_of.iter().all(|r| request_ids.contains(r["request_id"].as_str().unwrap())));

    // A receipt's tokens changed: found at its link.
    let tampered: Vec<String> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| if i == 3 { l.replacen(r#""output":"#, r#""output":1"#, 1) } else { (*l).to_owned() })
        .collect();
    let broken = verify(tampered.iter().map(String::as_str), Some(&queue.public_key)).unwrap_err();
    assert_eq!((broken.line, broken.link), (4, 4), "{broken}");
    // The same change with every hash after it recomputed: the seal finds it.
    let mut head = switchyard_governance::receipt::Head::genesis();
    let mut rewritten: Vec<String> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let mut receipt: switchyard_governance::receipt::Receipt =
            serde_json::from_value(serde_json::from_str::<Value>(l).unwrap()["receipt"].clone()).unwrap();
        receipt.prev = head.hash.clone();
        if i == 3 {
            receipt.tokens.output += 1;
        }
        let (text, hash) = switchyard_governance::receipt::line(&receipt);
        rewritten.push(text);
        head = switchyard_governance::receipt::Head { seq: receipt.seq, hash };
    }
    rewritten.push((*all.last().unwrap()).to_owned());
    let broken = verify(rewritten.iter().map(String::as_str), Some(&queue.public_key)).unwrap_err();
    assert!(broken.why.contains("does not match them"), "{broken}");
    // A link removed, and a pair swapped.
    let mut removed: Vec<&str> = lines.clone();
    removed.remove(2);
    assert_eq!(verify(removed, None).unwrap_err().link, 3);
    let mut swapped: Vec<&str> = lines.clone();
    swapped.swap(4, 5);
    assert_eq!(verify(swapped, None).unwrap_err().link, 5);
    let _ = std::fs::remove_file(&receipts);
}
