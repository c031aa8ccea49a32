//! What callers keep is bounded, over real TCP (issue 43, items 11 and
//! 12): an upload or a batch passes its key's rate limit, its storage
//! quota (`files.quota_per_key`, refused in the caller's protocol naming
//! it) and the body read timeout; a key whose batch lines are refused (a
//! spent budget, a rate limit) never stalls another key's batch.
//! (That no upload or batch is held whole in memory is measured on the
//! binary: `crates/switchyard/tests/memory.rs`.)
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{create_key, get_with, post};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BOUNDARY: &str = "limitsboundary";

fn bearer(key: &Value) -> String {
    format!("Bearer {}", key["key"].as_str().unwrap())
}

/// A form uploading `content` as a `purpose: user_data` file.
fn form(content: &[u8]) -> Vec<u8> {
    let mut form = format!(
        "--{BOUNDARY}\r\ncontent-disposition: form-data; name=\"purpose\"\r\n\r\nuser_data\r\n--{BOUNDARY}\r\n\
         content-disposition: form-data; name=\"file\"; filename=\"f.bin\"\r\ncontent-type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    form.extend_from_slice(content);
    form.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    form
}

async fn upload(addr: SocketAddr, key: &str, content: &[u8]) -> common::Reply {
    let content_type = format!("multipart/form-data; boundary={BOUNDARY}");
    post(addr, "/v1/files", &[("authorization", key), ("content-type", &content_type)], form(content)).await
}

fn text(reply: &common::Reply) -> String {
    String::from_utf8_lossy(&reply.body).into_owned()
}

/// A governed gateway on SQLite for `extra` config, with its batch worker.
async fn instance(extra: &str) -> (SocketAddr, std::sync::Arc<switchyard_gateway::Gateway>) {
    let path =
        std::env::temp_dir().join(format!("switchyard-kept-limits-{}-{}.db", std::process::id(), fastrand::u32(..)));
    let yaml = format!(
        "auth: {{ mode: keys }}\nstorage: {{ sqlite_path: \"{}\" }}\n\
         providers:\n  mock: {{ protocol: openai, base_url: \"mock://\" }}\n\
         models:\n  gpt: {{ provider: mock }}\n\
         rate_card:\n  gpt: {{ input_utok: 1000000, output_utok: 1000000 }}\n{extra}",
        path.display()
    );
    let (addr, gateway) = common::governed(&yaml).await;
    let data = switchyard_gateway::server::LiveRouter::new(switchyard_gateway::router(gateway.clone()));
    switchyard_gateway::batches::start(&gateway, data);
    (addr, gateway)
}

/// Sends `/v1/files` a form's head and part of its file, then stalls: what
/// comes back (status line and body), and how long it took.
async fn stalled_upload(addr: SocketAddr, key: &str) -> (String, Duration) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = form(b"");
    let request = format!(
        "POST /v1/files HTTP/1.1\r\nhost: x\r\nauthorization: {key}\r\n\
         content-type: multipart/form-data; boundary={BOUNDARY}\r\ncontent-length: {}\r\n\r\n",
        head.len() + 100_000
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    // The form up to the file's content, and a little of it: then nothing.
    let cut = head.len() - format!("\r\n--{BOUNDARY}--\r\n").len();
    stream.write_all(&head[..cut]).await.unwrap();
    stream.write_all(&[b'x'; 1000]).await.unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    answer.extend_from_slice(&buffer[..n]);
                    if answer.windows(4).any(|w| w == b"\r\n\r\n") && answer.ends_with(b"}") {
                        break;
                    }
                }
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no answer within 10 s: the upload was waited on past the read timeout");
    (String::from_utf8_lossy(&answer).into_owned(), started.elapsed())
}

#[tokio::test]
async fn an_upload_passes_its_keys_quota_rate_limit_and_read_timeout() {
    let (addr, _) =
        instance("files: { max_bytes: 1MB, quota_per_key: 3MB }\nserver: { body_read_timeout: 1s }\n").await;
    let keeper = bearer(&create_key(addr, json!({"name": "keeper"})).await);
    let file = vec![b'a'; 900_000];
    // Three files fit the quota; a fourth would pass it.
    let mut ids = Vec::new();
    for _ in 0..3 {
        let reply = upload(addr, &keeper, &file).await;
        assert_eq!(reply.status, 200, "{}", text(&reply));
        ids.push(serde_json::from_slice::<Value>(&reply.body).unwrap()["id"].as_str().unwrap().to_owned());
    }
    let refused = upload(addr, &keeper, &file).await;
    assert_eq!(refused.status, 413, "{}", text(&refused));
    let error: Value = serde_json::from_slice(&refused.body).unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("keeps 2700000 bytes") && message.contains("files.quota_per_key"), "{error}");
    // An Anthropic batch is counted too, and refused in Anthropic's shape.
    let x_api_key = keeper.trim_start_matches("Bearer ");
    let params =
        json!({"model": "gpt", "max_tokens": 8, "messages": [{"role": "user", "content": "y".repeat(200_000)}]});
    let requests: Vec<Value> = (0..3).map(|n| json!({"custom_id": format!("r{n}"), "params": params})).collect();
    let batch = post(
        addr,
        "/v1/messages/batches",
        &[("x-api-key", x_api_key), ("anthropic-version", "2023-06-01")],
        json!({"requests": requests}).to_string(),
    )
    .await;
    assert_eq!(batch.status, 413, "{}", text(&batch));
    let error: Value = serde_json::from_slice(&batch.body).unwrap();
    assert_eq!(error["type"], "error", "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("files.quota_per_key"), "{error}");
    // What the refusals wrote is gone: one file deleted makes room for one more.
    let client: hyper_util::client::legacy::Client<_, http_body_util::Full<bytes::Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
    let delete = http::Request::delete(format!("http://{addr}/v1/files/{}", ids[0]))
        .header("authorization", &keeper)
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    assert_eq!(client.request(delete).await.unwrap().status(), 200);
    let again = upload(addr, &keeper, &file).await;
    assert_eq!(again.status, 200, "{}", text(&again));
    // Each key has its own quota.
    let other = bearer(&create_key(addr, json!({"name": "other"})).await);
    assert_eq!(upload(addr, &other, &file).await.status, 200);

    // Uploads are requests of their key: its rate limit counts them.
    let limited = bearer(&create_key(addr, json!({"name": "limited", "limits": {"rpm": 2}})).await);
    assert_eq!(upload(addr, &limited, b"one").await.status, 200);
    assert_eq!(upload(addr, &limited, b"two").await.status, 200);
    let third = upload(addr, &limited, b"three").await;
    assert_eq!(third.status, 429, "{}", text(&third));
    assert!(third.headers.contains_key("retry-after"), "{:?}", third.headers);

    // An upload that stops arriving is answered within the read timeout.
    let (answer, took) = stalled_upload(addr, &other).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_read_timeout"), "{answer}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// `n` chat lines for an OpenAI batch file.
fn batch_file(n: usize) -> String {
    (0..n)
        .map(|i| {
            json!({"custom_id": format!("c{i}"), "method": "POST", "url": "/v1/chat/completions",
                   "body": {"model": "gpt", "max_tokens": 5, "messages": [{"role": "user", "content": format!("line {i}")}]}})
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Uploads a batch file of `n` lines and starts its batch: the batch's id.
async fn start_batch(addr: SocketAddr, key: &str, n: usize) -> String {
    let content_type = format!("multipart/form-data; boundary={BOUNDARY}");
    let mut body = format!(
        "--{BOUNDARY}\r\ncontent-disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--{BOUNDARY}\r\n\
         content-disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n\r\n"
    );
    body.push_str(&batch_file(n));
    body.push_str(&format!("\r\n--{BOUNDARY}--\r\n"));
    let file = post(addr, "/v1/files", &[("authorization", key), ("content-type", &content_type)], body).await;
    assert_eq!(file.status, 200, "{}", text(&file));
    let file: Value = serde_json::from_slice(&file.body).unwrap();
    let create = json!({"input_file_id": file["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"});
    let batch = post(addr, "/v1/batches", &[("authorization", key)], create.to_string()).await;
    assert_eq!(batch.status, 200, "{}", text(&batch));
    serde_json::from_slice::<Value>(&batch.body).unwrap()["id"].as_str().unwrap().to_owned()
}

async fn batch(addr: SocketAddr, key: &str, id: &str) -> Value {
    serde_json::from_slice(&get_with(addr, &format!("/v1/batches/{id}"), &[("authorization", key)]).await.body).unwrap()
}

#[tokio::test]
async fn a_spent_budget_or_a_rate_limited_key_never_stalls_another_keys_batch() {
    let (addr, _) = instance("batches: { concurrency: 2 }\n").await;
    // $1 a token: a line's estimate is far past this budget, refused at
    // admission with the quota error and a `Retry-After` (the day's end).
    let spent = bearer(&create_key(addr, json!({"name": "spent", "budget": {"usd": 0.5, "window": "1d"}})).await);
    // Three requests a minute (its upload, its batch, one line): the second
    // line on is refused with a wait.
    let limited = bearer(&create_key(addr, json!({"name": "limited", "limits": {"rpm": 3}})).await);
    let other = bearer(&create_key(addr, json!({"name": "other"})).await);
    // Check that a spent budget's refusal says to wait: what stalled the worker.
    let asked = post(
        addr,
        "/v1/chat/completions",
        &[("authorization", &spent)],
        json!({"model": "gpt", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}).to_string(),
    )
    .await;
    assert_eq!(asked.status, 429, "{}", text(&asked));
    assert!(asked.headers.contains_key("retry-after") && text(&asked).contains("insufficient_quota"));
    // Their batches first, then another key's one-line batch.
    let spent_batch = start_batch(addr, &spent, 20).await;
    let limited_batch = start_batch(addr, &limited, 20).await;
    let started = Instant::now();
    let small = start_batch(addr, &other, 1).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let state = batch(addr, &other, &small).await;
        if state["status"] == "completed" {
            assert_eq!(state["request_counts"]["completed"], 1, "{state}");
            break;
        }
        assert!(Instant::now() < deadline, "the other key's one-line batch is stuck: {state}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(10), "the one-line batch took {waited:?}");
    // The spent budget's lines were each recorded at once, failed.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let state = batch(addr, &spent, &spent_batch).await;
        if state["status"] == "completed" {
            assert_eq!(state["request_counts"]["failed"], 20, "{state}");
            break;
        }
        assert!(Instant::now() < deadline, "the spent budget's lines were waited on: {state}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The rate-limited key's lines wait in the queue: its first ran, none failed.
    let state = batch(addr, &limited, &limited_batch).await;
    assert_eq!(state["status"], "in_progress", "{state}");
    assert_eq!(state["request_counts"]["failed"], 0, "{state}");
    assert!(state["request_counts"]["completed"].as_u64().unwrap() >= 1, "{state}");
}
