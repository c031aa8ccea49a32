//! Files, batches and stored responses over real TCP: a Responses
//! conversation continued over an Anthropic lane, then a Gemini lane,
//! through a restart and on a second instance (PostgreSQL); a batch larger
//! than its key's budget never overshoots it; two instances drain one
//! batch and no line runs twice; another key's objects are 404s.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code")]

use crate::common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use common::{admin_call, create_key, get_with, post, spawn, ADMIN_TOKEN};
use serde_json::{json, Value};
use switchyard_protocol::codec;
use switchyard_state::Gateway;
use tower_service::Service;

/// The vendor fake behind a door that writes down every request body (and
/// waits `delay` before answering, so concurrent claimers overlap).
async fn recording_upstream(delay: Duration) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mock = switchyard_gateway::server::mock_router(codec);
    let kept = seen.clone();
    let router = axum::Router::new().fallback(move |request: Request| {
        let seen = kept.clone();
        let mut mock = mock.clone();
        async move {
            let (parts, body) = request.into_parts();
            let bytes = axum::body::to_bytes(body, 1 << 24).await.unwrap();
            seen.lock().unwrap().push(String::from_utf8_lossy(&bytes).into_owned());
            tokio::time::sleep(delay).await;
            mock.call(Request::from_parts(parts, Body::from(bytes))).await.unwrap()
        }
    });
    (spawn(router).await, seen)
}

fn config(upstream: SocketAddr, storage: &str, extra: &str) -> String {
    let base = format!("http://{upstream}");
    format!(
        "auth: {{ mode: keys }}\nstorage: {{ {storage} }}\n\
         providers:\n  up-anthropic: {{ protocol: anthropic, base_url: \"{base}\" }}\n  \
         up-gemini: {{ protocol: gemini, base_url: \"{base}\" }}\n  up-openai: {{ protocol: openai, base_url: \"{base}\" }}\n\
         models:\n  lane-anthropic: {{ provider: up-anthropic, model: wire-anthropic }}\n  \
         lane-gemini: {{ provider: up-gemini, model: wire-gemini }}\n  lane-openai: {{ provider: up-openai, model: wire-openai }}\n\
         rate_card:\n  lane-anthropic: {{ input_utok: 1000000, output_utok: 1000000 }}\n  \
         lane-gemini: {{ input_utok: 1000000, output_utok: 1000000 }}\n  lane-openai: {{ input_utok: 1000000, output_utok: 1000000 }}\n\
         admin: {{ tokens: [{ADMIN_TOKEN}] }}\n{extra}"
    )
}

/// A governed gateway for `yaml` with its batch worker running.
async fn instance(yaml: &str) -> (SocketAddr, Arc<Gateway>) {
    let (addr, gateway) = common::governed(yaml).await;
    let data = switchyard_gateway::server::LiveRouter::new(switchyard_gateway::router(gateway.clone()));
    switchyard_gateway::batches::start(&gateway, data);
    (addr, gateway)
}

fn bearer(key: &Value) -> String {
    format!("Bearer {}", key["key"].as_str().unwrap())
}

async fn fresh_database() -> Option<String> {
    let Ok(url) = std::env::var("SWITCHYARD_TEST_POSTGRES_URL") else {
        assert!(std::env::var("CI").is_err(), "CI runs PostgreSQL: run the tests through scripts/test.sh");
        eprintln!(
            "SWITCHYARD_TEST_POSTGRES_URL is not set: PostgreSQL cases skipped (scripts/test.sh starts a server)"
        );
        return None;
    };
    let name = format!("kept_{}_{}", std::process::id(), fastrand::u32(..));
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    Some(format!("{}/{name}", url.rsplit_once('/').unwrap().0))
}

/// One turn of a conversation: its answer's id once it is stored.
async fn turn(addr: SocketAddr, key: &str, model: &str, text: &str, previous: Option<&str>, stream: bool) -> String {
    // The members admission reads come after `input`: a continued turn's
    // rewritten body must be scanned again for them.
    let mut body = json!({"model": model, "input": text, "stream": stream, "max_output_tokens": 64, "user": "ada"});
    if let Some(previous) = previous {
        body["previous_response_id"] = json!(previous);
    }
    let reply = post(addr, "/v1/responses", &[("authorization", key)], body.to_string()).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    let response: Value = if stream {
        let text = String::from_utf8_lossy(&reply.body).into_owned();
        let completed =
            text.lines().filter_map(|l| l.strip_prefix("data: ")).find(|d| d.contains("response.completed")).unwrap();
        serde_json::from_str::<Value>(completed).unwrap()["response"].clone()
    } else {
        serde_json::from_slice(&reply.body).unwrap()
    };
    let id = response["id"].as_str().unwrap().to_owned();
    // Kept behind the answer: wait until it can be read back.
    for _ in 0..100 {
        if get_with(addr, &format!("/v1/responses/{id}"), &[("authorization", key)]).await.status == 200 {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("response {id} was never stored");
}

#[tokio::test]
async fn a_conversation_continues_over_anthropic_then_gemini_through_a_restart_and_a_second_instance() {
    let Some(database) = fresh_database().await else { return };
    let (upstream, seen) = recording_upstream(Duration::ZERO).await;
    let yaml = config(upstream, &format!("postgres_url: \"{database}\""), "");
    let (first, _) = instance(&yaml).await;
    let key = create_key(first, json!({"name": "codex"})).await;
    let key_id = key["id"].as_str().unwrap().to_owned();
    let key = bearer(&key);
    let asked = |n: usize| seen.lock().unwrap()[n].clone();
    // Turns 1 and 2 on an Anthropic lane.
    let one = turn(first, &key, "lane-anthropic", "turn one", None, false).await;
    let two = turn(first, &key, "lane-anthropic", "turn two", Some(&one), true).await;
    let sent = asked(1);
    assert!(sent.contains("turn one") && sent.contains("turn two") && sent.contains("you said: turn one"), "{sent}");
    // "Restart": a new instance on the same store continues on a Gemini lane.
    let (restarted, _) = instance(&yaml).await;
    let three = turn(restarted, &key, "lane-gemini", "turn three", Some(&two), false).await;
    let sent = asked(2);
    assert!(["turn one", "turn two", "turn three", "you said: turn two"].iter().all(|t| sent.contains(t)), "{sent}");
    assert!(sent.contains("contents"), "a Gemini request: {sent}");
    // A second instance continues what the first kept.
    let (second, _) = instance(&yaml).await;
    let four = turn(second, &key, "lane-gemini", "turn four", Some(&three), true).await;
    let five = turn(restarted, &key, "lane-anthropic", "turn five", Some(&four), false).await;
    let sent = asked(4);
    for text in ["turn one", "turn two", "turn three", "turn four", "turn five", "you said: turn four"] {
        assert!(sent.contains(text), "turn five's request lacks `{text}`: {sent}");
    }
    // Every turn, continued or not, was admitted for its end user.
    let rows = common::ledger_rows(first, &format!("key={key_id}"), 5).await;
    assert!(rows.iter().all(|row| row["end_user"] == "ada"), "{rows:?}");
    // Read back, with this turn's input; gone once deleted; another key sees nothing.
    let got = get_with(second, &format!("/v1/responses/{five}"), &[("authorization", &key)]).await;
    let got: Value = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(got["previous_response_id"], json!(four));
    let items = get_with(first, &format!("/v1/responses/{five}/input_items"), &[("authorization", &key)]).await;
    let items: Value = serde_json::from_slice(&items.body).unwrap();
    assert_eq!(items["data"][0]["content"][0]["text"], "turn five", "{items}");
    // Every item used to generate it, newest first: the five inputs and the
    // four earlier answers, as OpenAI lists a continued response's.
    let texts = |page: &Value| -> Vec<String> {
        page["data"].as_array().unwrap().iter().map(|i| i["content"][0]["text"].as_str().unwrap().to_owned()).collect()
    };
    let said = texts(&items);
    assert_eq!(said.len(), 9, "{items}");
    for (n, turn) in ["five", "four", "three", "two", "one"].iter().enumerate() {
        assert_eq!(said[2 * n], format!("turn {turn}"), "{said:?}");
    }
    assert!(said[1].contains("you said: turn four") && said[7].contains("you said: turn one"), "{said:?}");
    assert_eq!((items["has_more"].clone(), items["first_id"].clone()), (json!(false), items["data"][0]["id"].clone()));
    let ascending = texts(&listed(first, &key, &five, "order=asc").await);
    assert_eq!(ascending, said.iter().rev().cloned().collect::<Vec<_>>());
    // Two at a time, each page after the last one's last id, walks them all.
    let (mut walked, mut after) = (Vec::new(), String::new());
    loop {
        let page = listed(first, &key, &five, &format!("limit=2{after}")).await;
        assert!(page["data"].as_array().unwrap().len() <= 2);
        walked.extend(texts(&page));
        if page["has_more"] == json!(false) {
            break;
        }
        after = format!("&after={}", page["last_id"].as_str().unwrap());
    }
    assert_eq!(walked, said);
    let bad = get_with(first, &format!("/v1/responses/{five}/input_items?limit=0"), &[("authorization", &key)]).await;
    assert_eq!(bad.status, 400);
    let stranger = bearer(&create_key(first, json!({"name": "stranger"})).await);
    assert_eq!(get_with(first, &format!("/v1/responses/{five}"), &[("authorization", &stranger)]).await.status, 404);
    let theirs = get_with(first, &format!("/v1/responses/{five}/input_items"), &[("authorization", &stranger)]).await;
    assert_eq!(theirs.status, 404, "another key's response lists nothing");
    let borrowed = post(
        first,
        "/v1/responses",
        &[("authorization", &stranger)],
        json!({"model": "lane-openai", "input": "x", "previous_response_id": five}).to_string(),
    )
    .await;
    assert_eq!(borrowed.status, 400, "another key's response is not found");
    let client: hyper_util::client::legacy::Client<_, http_body_util::Full<bytes::Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
    let delete = http::Request::delete(format!("http://{first}/v1/responses/{five}"))
        .header("authorization", &key)
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    assert_eq!(client.request(delete).await.unwrap().status(), 200);
    assert_eq!(get_with(second, &format!("/v1/responses/{five}"), &[("authorization", &key)]).await.status, 404);
}

/// A page of `id`'s input items for `query`.
async fn listed(addr: SocketAddr, key: &str, id: &str, query: &str) -> Value {
    let page = get_with(addr, &format!("/v1/responses/{id}/input_items?{query}"), &[("authorization", key)]).await;
    assert_eq!(page.status, 200, "{}", String::from_utf8_lossy(&page.body));
    serde_json::from_slice(&page.body).unwrap()
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

fn line(n: usize, model: &str) -> String {
    json!({"custom_id": format!("line-{n}"), "method": "POST", "url": "/v1/chat/completions",
           "body": {"model": model, "max_tokens": 20, "messages": [{"role": "user", "content": format!("line {n}")}]}})
    .to_string()
}

/// Polls a batch until it is over.
async fn finished(addr: SocketAddr, key: &str, id: &str) -> Value {
    for _ in 0..600 {
        let reply = get_with(addr, &format!("/v1/batches/{id}"), &[("authorization", key)]).await;
        let batch: Value = serde_json::from_slice(&reply.body).unwrap();
        if ["completed", "cancelled", "expired", "failed"].contains(&batch["status"].as_str().unwrap_or("")) {
            return batch;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("batch {id} never finished");
}

fn file_lines(body: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(body).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[tokio::test]
async fn a_batch_larger_than_its_keys_budget_never_overshoots_it() {
    let (upstream, seen) = recording_upstream(Duration::from_millis(5)).await;
    let dir = std::env::temp_dir().join(format!("switchyard-kept-{}-{}", std::process::id(), fastrand::u32(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let yaml = config(upstream, &format!("sqlite_path: \"{}\"", dir.join("s.db").display()), "");
    let (addr, _) = instance(&yaml).await;
    // $1 a token: a line reserves its prompt and 20 output tokens, and spends about 15.
    let budget = 100.0;
    let key = create_key(addr, json!({"name": "batcher", "budget": {"usd": budget, "window": "total"}})).await;
    let key_id = key["id"].as_str().unwrap().to_owned();
    let key = bearer(&key);
    let lines: Vec<String> = (0..20).map(|n| line(n, "lane-anthropic")).collect();
    let id = start_batch(addr, &key, &lines).await;
    let batch = finished(addr, &key, &id).await;
    let (done, failed) =
        (batch["request_counts"]["completed"].as_u64().unwrap(), batch["request_counts"]["failed"].as_u64().unwrap());
    assert_eq!(done + failed, 20, "{batch}");
    assert!(done >= 1 && failed >= 1, "some lines fit the budget and some do not: {batch}");
    assert_eq!(seen.lock().unwrap().len() as u64, done, "a refused line never reached the upstream");
    // What the key spent, by the ledger, is within its budget.
    let rows = common::ledger_rows(addr, &format!("key={key_id}"), done as usize).await;
    let spent: u64 = rows
        .iter()
        .filter(|r| r["status"] == 200)
        .map(|r| r["input_tokens"].as_u64().unwrap() + r["output_tokens"].as_u64().unwrap())
        .sum();
    assert!(spent as f64 <= budget, "spent ${spent} of ${budget}");
    // Each line's answer is in its file, by custom_id, once.
    let out = get_with(
        addr,
        &format!("/v1/files/{}/content", batch["output_file_id"].as_str().unwrap()),
        &[("authorization", &key)],
    )
    .await;
    let errors = get_with(
        addr,
        &format!("/v1/files/{}/content", batch["error_file_id"].as_str().unwrap()),
        &[("authorization", &key)],
    )
    .await;
    let (out, errors) = (file_lines(&out.body), file_lines(&errors.body));
    assert_eq!((out.len() as u64, errors.len() as u64), (done, failed));
    assert!(out.iter().all(|l| l["response"]["status_code"] == 200
        && l["response"]["body"]["choices"][0]["message"]["content"].as_str().unwrap().contains("you said: line")));
    assert!(errors.iter().all(|l| l["response"]["status_code"].as_u64().unwrap() >= 400), "{errors:?}");
    let mut ids: Vec<String> = out.iter().chain(&errors).map(|l| l["custom_id"].as_str().unwrap().to_owned()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 20);
    // Another key finds neither the batch nor its files.
    let stranger = bearer(&create_key(addr, json!({"name": "stranger"})).await);
    assert_eq!(get_with(addr, &format!("/v1/batches/{id}"), &[("authorization", &stranger)]).await.status, 404);
    let file = batch["output_file_id"].as_str().unwrap();
    assert_eq!(get_with(addr, &format!("/v1/files/{file}/content"), &[("authorization", &stranger)]).await.status, 404);
}

#[tokio::test]
async fn a_revoked_keys_lines_are_refused() {
    let (upstream, seen) = recording_upstream(Duration::ZERO).await;
    let yaml = config(upstream, "", "");
    // The worker starts after the key is revoked: every line runs as a revoked key.
    let (addr, gateway) = common::governed(&yaml).await;
    let key = create_key(addr, json!({"name": "leaver"})).await;
    let key_id = key["id"].as_str().unwrap().to_owned();
    let key = bearer(&key);
    let id = start_batch(addr, &key, &[line(0, "lane-openai"), line(1, "lane-openai")]).await;
    let revoked = admin_call(addr, "DELETE", &format!("/api/v1/admin/keys/{key_id}"), Some(ADMIN_TOKEN), None).await;
    assert!(revoked.status.is_success(), "{}", String::from_utf8_lossy(&revoked.body));
    let data = switchyard_gateway::server::LiveRouter::new(switchyard_gateway::router(gateway.clone()));
    switchyard_gateway::batches::start(&gateway, data);
    // The revoked key cannot read its batch either; the store shows its lines failed.
    for _ in 0..200 {
        let state = gateway.kept.batches.batch(key_id.clone(), id.clone()).await.unwrap().unwrap();
        if state.counts.done() {
            assert_eq!(state.counts.failed, 2, "{state:?}");
            let outcomes = gateway.kept.batches.line_outcomes(key_id.clone(), id.clone()).await.unwrap();
            assert!(outcomes.iter().all(|o| o.status == 401), "{outcomes:?}");
            assert!(seen.lock().unwrap().is_empty(), "no line reached the upstream");
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the revoked key's batch never ended");
}

#[tokio::test]
async fn two_instances_drain_one_batch_and_no_line_runs_twice() {
    let Some(database) = fresh_database().await else { return };
    let (upstream, seen) = recording_upstream(Duration::from_millis(40)).await;
    let yaml = config(upstream, &format!("postgres_url: \"{database}\""), "batches: { concurrency: 4 }\n");
    let lines_total = 120;
    let (first, one) = instance(&yaml).await;
    let (second, two) = instance(&yaml).await;
    assert_ne!(one.kept.worker, two.kept.worker);
    let key = bearer(&create_key(first, json!({"name": "fleet-batcher"})).await);
    let lines: Vec<String> =
        (0..lines_total).map(|n| line(n, if n % 2 == 0 { "lane-openai" } else { "lane-gemini" })).collect();
    let id = start_batch(first, &key, &lines).await;
    // The second instance reports the same batch.
    let batch = finished(second, &key, &id).await;
    assert_eq!(batch["request_counts"]["completed"], lines_total, "{batch}");
    // Both instances ran lines of it.
    let (store, connection) = tokio_postgres::connect(&database, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let workers: i64 = store
        .query_one("SELECT COUNT(DISTINCT worker) FROM batch_lines WHERE batch = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(workers, 2, "both instances drained the batch");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), lines_total, "each line reached the upstream once");
    for n in 0..lines_total {
        let asked = seen.iter().filter(|body| body.contains(&format!("\"line {n}\""))).count();
        assert_eq!(asked, 1, "line {n} ran {asked} times");
    }
}
