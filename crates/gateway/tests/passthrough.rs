//! The raw route, `/passthrough/{provider}/{path}`, over real TCP against a
//! fake vendor that records every request it gets: what reaches the vendor
//! (the operator's key, never the caller's; the path, query and body as
//! they came), what comes back (byte for byte; an event stream as it is
//! sent), what the ledger says (operation, path, the usage the reply
//! states, its cost), and everything an attacker tries that must never
//! reach the vendor (paths outside the allow-list, dot segments plain and
//! encoded, a key without the grant, another tenant's grant, a key past
//! its rate).
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

use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const OPERATOR_KEY: &str = "sk-operator-secret-0123456789";
const ANTHROPIC_KEY: &str = "sk-ant-operator-secret-0123456789";
const ACME: &str = "acme-tenant-token-0123456789";
const GOOGLE_KEY: &str = "google-operator-secret-0123456789";
const AWS_KEY_ID: &str = "AKIAOPERATOR000000001";
const AWS_SECRET: &str = "operator-aws-secret-0123456789abcdefghij";

/// A JSON reply with whitespace and a non-ASCII byte a re-serialiser would change.
const MODEL_REPLY: &[u8] = b"{ \"id\" : \"gpt-x\",  \"object\":\"model\" ,\"owned_by\":\"caf\xc3\xa9\"}\n";
/// A reply that states its usage, of a model the config prices.
const USAGE_REPLY: &[u8] = b"{\"id\":\"x-1\",\"object\":\"thing\",\"model\":\"fake-model\",\
    \"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":500,\"total_tokens\":1500}}";
/// An OpenAI-shaped event stream, its usage in its last chunk.
const STREAM_FIRST: &[u8] = b"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\
    \"model\":\"fake-model\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n";
const STREAM_REST: &[u8] = b"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\
    \"model\":\"fake-model\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
    data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake-model\",\
    \"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,\"total_tokens\":10}}\n\n\
    data: [DONE]\n\n";

/// One request the fake vendor got.
#[derive(Debug, Clone)]
struct Got {
    method: Method,
    /// Path and query, as sent.
    target: String,
    headers: HeaderMap,
    body: Bytes,
}

#[derive(Clone, Default)]
struct Vendor {
    got: Arc<Mutex<Vec<Got>>>,
    /// Lets a stream's second part go.
    release: Arc<tokio::sync::Notify>,
}

impl Vendor {
    fn got(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }
}

async fn vendor_answer(
    State(vendor): State<Vendor>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let target = uri.path_and_query().map_or_else(|| uri.path().to_owned(), ToString::to_string);
    vendor.got.lock().unwrap().push(Got { method, target, headers, body });
    let json = |body: &'static [u8]| {
        Response::builder()
            .header("content-type", "application/json")
            .header("set-cookie", "__cf_bm=vendor-cookie")
            .header("openai-organization", "org-operator")
            .header("x-ratelimit-remaining-requests", "99")
            .body(axum::body::Body::from(body))
            .unwrap()
    };
    match uri.path() {
        "/v1/experimental/complete" => json(USAGE_REPLY),
        "/v1/experimental/stream" => {
            let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::convert::Infallible>>(4);
            let release = vendor.release.clone();
            tokio::spawn(async move {
                let _ = tx.send(Ok(Bytes::from_static(STREAM_FIRST))).await;
                release.notified().await;
                let _ = tx.send(Ok(Bytes::from_static(STREAM_REST))).await;
            });
            let frames = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) });
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(axum::body::Body::from_stream(frames))
                .unwrap()
        }
        _ => json(MODEL_REPLY),
    }
}

/// The fake vendor on loopback.
async fn vendor() -> (SocketAddr, Vendor) {
    let vendor = Vendor::default();
    let router = axum::Router::new().fallback(vendor_answer).with_state(vendor.clone());
    (spawn(router).await, vendor)
}

/// Two providers on the fake (OpenAI's and Anthropic's protocols) with
/// raw routes, one without; a priced model of the first; two tenants.
fn config(at: SocketAddr) -> String {
    format!(
        "auth: {{ mode: keys }}\n\
         governance: {{ ledger_flush_interval: 20ms }}\n\
         groups:\n  acme: {{ budget: {{ usd: 100, window: 1mo }} }}\n  globex: {{ budget: {{ usd: 100, window: 1mo }} }}\n\
         providers:\n\
         \x20 fake:\n\
         \x20   protocol: openai\n\
         \x20   base_url: http://{at}\n\
         \x20   api_key: {OPERATOR_KEY}\n\
         \x20   headers: {{ openai-organization: org-operator }}\n\
         \x20   passthrough: {{ paths: [\"/v1/models/*\", \"/v1/fine_tuning/*\", \"/v1/experimental/*\"], methods: [GET, POST] }}\n\
         \x20 claude:\n\
         \x20   protocol: anthropic\n\
         \x20   base_url: http://{at}\n\
         \x20   api_key: {ANTHROPIC_KEY}\n\
         \x20   passthrough: {{ paths: [\"/v1/models/*\"] }}\n\
         \x20 aws:\n\
         \x20   protocol: bedrock\n\
         \x20   base_url: http://{at}\n\
         \x20   aws: {{ access_key_id: {AWS_KEY_ID}, secret_access_key: {AWS_SECRET}, region: us-east-1 }}\n\
         \x20   passthrough: {{ paths: [\"/async-invoke\", \"/async-invoke/*\"] }}\n\
         \x20 google:\n\
         \x20   protocol: gemini\n\
         \x20   base_url: http://{at}\n\
         \x20   api_key: {GOOGLE_KEY}\n\
         \x20   passthrough: {{ paths: [\"/v1beta/cachedContents\"] }}\n\
         \x20 plain: {{ protocol: openai, base_url: http://{at}, api_key: k }}\n\
         models:\n  fake-lane: {{ provider: fake, model: fake-model }}\n\
         rate_card:\n  fake-lane: {{ input_utok: 1, output_utok: 2 }}\n\
         admin:\n  tokens: [{ADMIN_TOKEN}]\n  tenants: [ {{ token: {ACME}, group: acme, name: acme-lead }} ]\n"
    )
}

/// A governed gateway in front of a fresh fake vendor.
async fn fronting() -> (SocketAddr, Vendor) {
    let (at, vendor) = vendor().await;
    let (addr, _) = governed(&config(at)).await;
    (addr, vendor)
}

/// A key made by the gateway's admin: its id and secret.
async fn key(addr: SocketAddr, spec: Value) -> (String, String) {
    let made = create_key(addr, spec).await;
    (made["id"].as_str().unwrap().to_owned(), made["key"].as_str().unwrap().to_owned())
}

/// Any request over HTTP/1.1: status, headers and the whole body.
async fn call(addr: SocketAddr, method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut request = http::Request::builder().method(method).uri(format!("http://{addr}{target}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client.request(request.body(Full::new(Bytes::copy_from_slice(body))).unwrap()).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Reply { status, headers, body }
}

/// A request written byte for byte on a socket (no client normalises its
/// path): the status the gateway answered and its body.
async fn raw(addr: SocketAddr, method: &str, target: &str, secret: &str) -> (u16, String) {
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "{method} {target} HTTP/1.1\r\nhost: gateway\r\nauthorization: Bearer {secret}\r\nconnection: close\r\n\r\n"
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer).to_string();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text)
}

fn bearer(secret: &str) -> String {
    format!("Bearer {secret}")
}

#[tokio::test]
async fn allowed_requests_reach_the_vendor_with_the_operators_key_as_they_came() {
    let (addr, vendor) = fronting().await;
    let (_, secret) = key(addr, json!({"name": "ana", "group": "acme", "passthrough": ["fake"]})).await;
    let auth = bearer(&secret);
    // A GET with a query, and headers that must stay behind.
    let got = call(
        addr,
        "GET",
        "/passthrough/fake/v1/models/gpt-x?limit=2&order=desc&after=a%3Ab",
        &[
            ("authorization", &auth),
            ("openai-organization", "org-someone-else"),
            ("cookie", "session=caller"),
            ("x-switchyard-user", "ana"),
            ("openai-beta", "assistants=v2"),
        ],
        b"",
    )
    .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(&got.body[..], MODEL_REPLY, "the reply byte for byte");
    assert_eq!(got.headers["x-switchyard-provider"], "fake");
    assert!(got.headers.contains_key("x-request-id"));
    assert_eq!(got.headers["x-ratelimit-remaining-requests"], "99", "the vendor's own headers come back");
    assert!(!got.headers.contains_key("set-cookie") && !got.headers.contains_key("openai-organization"));
    // A POST whose body the gateway must not touch.
    let body = b"{\"training_file\" : \"file-1\",\n  \"model\":\"gpt-4o-mini\", \"suffix\":\"caf\xc3\xa9\"}";
    let posted = call(
        addr,
        "POST",
        "/passthrough/fake/v1/fine_tuning/jobs",
        &[("authorization", &auth), ("content-type", "application/json"), ("idempotency-key", "k-1")],
        body,
    )
    .await;
    assert_eq!(posted.status, 200, "{}", String::from_utf8_lossy(&posted.body));
    assert_eq!(&posted.body[..], MODEL_REPLY);

    let seen = vendor.got();
    assert_eq!(seen.len(), 2, "{seen:?}");
    let (get, post) = (&seen[0], &seen[1]);
    assert_eq!((get.method.as_str(), get.target.as_str()), ("GET", "/v1/models/gpt-x?limit=2&order=desc&after=a%3Ab"));
    assert_eq!((post.method.as_str(), post.target.as_str()), ("POST", "/v1/fine_tuning/jobs"));
    assert_eq!(&post.body[..], body, "the body byte for byte");
    assert_eq!(post.headers["idempotency-key"], "k-1", "the vendor's own headers go");
    assert_eq!(get.headers["openai-beta"], "assistants=v2");
    for seen in [get, post] {
        assert_eq!(seen.headers["authorization"], bearer(OPERATOR_KEY), "the operator's key, not the caller's");
        assert_eq!(
            seen.headers["openai-organization"], "org-operator",
            "the operator's account, not the caller's pick"
        );
        assert!(!seen.headers.contains_key("cookie") && !seen.headers.contains_key("x-switchyard-user"));
        for (name, value) in &seen.headers {
            assert!(
                !value.as_bytes().windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{name} carries the caller's key"
            );
        }
    }
}

#[tokio::test]
async fn the_usage_a_reply_states_is_its_rows_and_its_keys_spend() {
    let (addr, _vendor) = fronting().await;
    let (id, secret) = key(addr, json!({"name": "ana", "group": "acme", "passthrough": ["fake"]})).await;
    let auth = bearer(&secret);
    let stated =
        call(addr, "POST", "/passthrough/fake/v1/experimental/complete", &[("authorization", &auth)], b"{}").await;
    assert_eq!(stated.status, 200);
    assert_eq!(&stated.body[..], USAGE_REPLY);
    let unstated = call(addr, "GET", "/passthrough/fake/v1/models/gpt-x", &[("authorization", &auth)], b"").await;
    assert_eq!(unstated.status, 200);

    let rows = ledger_rows(addr, &format!("key={id}&operation=passthrough"), 2).await;
    let row = |path: &str| {
        rows.iter().find(|r| r["notes"]["passthrough"]["path"] == path).unwrap_or_else(|| panic!("{path}: {rows:?}"))
    };
    let billed = row("/v1/experimental/complete");
    assert_eq!(billed["operation"], "passthrough");
    assert_eq!(
        (billed["pool"].as_str(), billed["lane"].as_str()),
        (Some("passthrough:fake"), Some("passthrough:fake"))
    );
    assert_eq!(billed["notes"]["passthrough"]["method"], "POST");
    assert_eq!(billed["model"], "fake-model", "{billed}");
    assert_eq!((billed["input_tokens"].as_u64(), billed["output_tokens"].as_u64()), (Some(1000), Some(500)));
    assert_eq!(billed["estimated"], false);
    assert_eq!(billed["status"], 200);
    assert_eq!(billed["ingress"], "openai");
    // 1000 × 1 µUSD + 500 × 2 µUSD, at the card of the model the reply named.
    assert_eq!(billed["cost_nano"], 2_000_000, "{billed}");
    let free = row("/v1/models/gpt-x");
    assert_eq!((free["input_tokens"].as_u64(), free["output_tokens"].as_u64()), (Some(0), Some(0)));
    assert_eq!(free["estimated"], true);
    assert_eq!(free["notes"]["estimated"], "no_usage", "{free}");
    assert_eq!(free["notes"]["passthrough"]["method"], "GET");

    let spend = admin_call(addr, "GET", "/api/v1/admin/spend?by=key&from=0", Some(ADMIN_TOKEN), None).await;
    let spend: Value = serde_json::from_slice(&spend.body).unwrap();
    let line = spend["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["value"] == id.as_str())
        .unwrap_or_else(|| panic!("{spend}"));
    assert!((line["usd"].as_f64().unwrap() - 0.002).abs() < 1e-12, "{spend}");
}

#[tokio::test]
async fn an_event_stream_passes_as_it_is_sent_and_its_usage_is_billed() {
    let (addr, vendor) = fronting().await;
    let (id, secret) = key(addr, json!({"name": "ana", "group": "acme", "passthrough": ["fake"]})).await;
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let request = http::Request::get(format!("http://{addr}/passthrough/fake/v1/experimental/stream"))
        .header("authorization", bearer(&secret))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = client.request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    // The first event arrives while the vendor still holds the rest: nothing is buffered.
    let mut received = Vec::new();
    while received.len() < STREAM_FIRST.len() {
        let frame = tokio::time::timeout(Duration::from_secs(5), body.frame()).await.expect("the first event streams");
        received.extend_from_slice(&frame.unwrap().unwrap().into_data().unwrap());
    }
    assert_eq!(&received[..], STREAM_FIRST);
    vendor.release.notify_one();
    received.extend_from_slice(&body.collect().await.unwrap().to_bytes());
    assert_eq!(received, [STREAM_FIRST, STREAM_REST].concat(), "the stream byte for byte");

    let rows = ledger_rows(addr, &format!("key={id}&operation=passthrough"), 1).await;
    let row = &rows[0];
    assert_eq!(row["status"], 200);
    assert_eq!((row["input_tokens"].as_u64(), row["output_tokens"].as_u64()), (Some(7), Some(3)), "{row}");
    assert_eq!(row["estimated"], false);
    assert_eq!(row["model"], "fake-model");
    assert_eq!(row["cost_nano"], 7_000 + 6_000, "{row}");

    // A caller that leaves mid-stream: its row says so, with what was stated by then.
    let request = http::Request::get(format!("http://{addr}/passthrough/fake/v1/experimental/stream"))
        .header("authorization", bearer(&secret))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let mut body = client.request(request).await.unwrap().into_body();
    let first = tokio::time::timeout(Duration::from_secs(5), body.frame()).await.unwrap();
    assert!(first.is_some());
    drop(body);
    vendor.release.notify_one();
    let rows = ledger_rows(addr, &format!("key={id}&operation=passthrough"), 2).await;
    let left = rows.iter().find(|r| r["status"] == 499).unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(left["notes"]["estimated"], "caller_left", "{left}");
}

#[tokio::test]
async fn paths_outside_the_allow_list_and_disguised_paths_never_reach_the_vendor() {
    let (addr, vendor) = fronting().await;
    let (_, secret) = key(addr, json!({"name": "ana", "group": "acme", "passthrough": ["fake", "claude"]})).await;
    // Outside the list: the vendor's admin endpoints, a near miss, a prefix itself.
    for target in [
        "/passthrough/fake/v1/organization/admin_api_keys",
        "/passthrough/fake/v1/organization/users?limit=100",
        "/passthrough/fake/v1/fine_tuning",
        "/passthrough/fake/v1/files",
        "/passthrough/fake/V1/models/gpt-x",
        "/passthrough/fake/v1/models/",
    ] {
        let (status, text) = raw(addr, "GET", target, &secret).await;
        assert_eq!(status, 404, "{target}: {text}");
        assert!(text.contains("\"error\"") && text.contains("not open on the raw route"), "{target}: {text}");
    }
    // Dressed up to climb out of an allowed prefix.
    for target in [
        "/passthrough/fake/v1/models/../organization/admin_api_keys",
        "/passthrough/fake/v1/models/x/../../organization/admin_api_keys",
        "/passthrough/fake/v1/models/%2e%2e/organization/admin_api_keys",
        "/passthrough/fake/v1/models/%2E%2E/organization/admin_api_keys",
        "/passthrough/fake/v1/models/.%2e/organization/admin_api_keys",
        "/passthrough/fake/v1/models/x%2F..%2F..%2Forganization%2Fadmin_api_keys",
        "/passthrough/fake/v1/models/x%2f..%2f..%2forganization",
        "/passthrough/fake/v1/models/%252e%252e/organization",
        "/passthrough/fake/v1/models/..;/organization/admin_api_keys",
        "/passthrough/fake/v1/models/x%5c..%5c..%5corganization",
        "/passthrough/fake/v1/models/x\\..\\..\\organization",
        "/passthrough/fake/v1/models//../organization",
        "/passthrough/fake//v1/organization/admin_api_keys",
        "/passthrough/fake/./v1/organization/admin_api_keys",
        "/passthrough/fake/v1/models/x%00",
    ] {
        let (status, text) = raw(addr, "GET", target, &secret).await;
        assert_eq!(status, 400, "{target}: {text}");
        assert!(text.contains("invalid_request_error"), "{target}: {text}");
    }
    // A method the route does not open; a provider that opens none; one that does not exist.
    let (status, text) = raw(addr, "DELETE", "/passthrough/fake/v1/models/gpt-x", &secret).await;
    assert_eq!(status, 405, "{text}");
    assert!(text.to_ascii_lowercase().contains("allow: get, post"), "{text}");
    assert_eq!(raw(addr, "GET", "/passthrough/plain/v1/models/gpt-x", &secret).await.0, 404);
    assert_eq!(raw(addr, "GET", "/passthrough/nobody/v1/models/gpt-x", &secret).await.0, 404);
    // An Anthropic provider's refusal is in Anthropic's shape.
    let (status, text) = raw(addr, "GET", "/passthrough/claude/v1/organizations/me", &secret).await;
    assert_eq!(status, 404);
    assert!(text.contains("\"type\":\"error\"") && text.contains("not_found_error"), "{text}");
    assert!(vendor.got().is_empty(), "the vendor saw {:?}", vendor.got());
    // The route still works for what it opens.
    assert_eq!(raw(addr, "GET", "/passthrough/fake/v1/models/gpt-x", &secret).await.0, 200);
    assert_eq!(vendor.got().len(), 1);
}

#[tokio::test]
async fn only_a_granted_key_takes_the_route_each_refused_in_the_providers_shape() {
    let (addr, vendor) = fronting().await;
    let (_, ungranted) = key(addr, json!({"name": "bo", "group": "acme"})).await;
    // OpenAI's shape for a key without the grant, and for no key at all.
    let refused =
        call(addr, "GET", "/passthrough/fake/v1/models/gpt-x", &[("authorization", &bearer(&ungranted))], b"").await;
    assert_eq!(refused.status, 403);
    let error: Value = serde_json::from_slice(&refused.body).unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("raw route of `fake`"), "{error}");
    let anonymous = call(addr, "GET", "/passthrough/fake/v1/models/gpt-x", &[], b"").await;
    assert_eq!(anonymous.status, 401);
    // Anthropic's shape, the key in Anthropic's header.
    let refused = call(addr, "GET", "/passthrough/claude/v1/models/claude-x", &[("x-api-key", &ungranted)], b"").await;
    assert_eq!(refused.status, 403);
    let error: Value = serde_json::from_slice(&refused.body).unwrap();
    assert_eq!((error["type"].as_str(), error["error"]["type"].as_str()), (Some("error"), Some("permission_error")));
    // A granted key in Anthropic's header: the operator's key goes in its place.
    let (_, granted) = key(addr, json!({"name": "cy", "group": "acme", "passthrough": ["claude"]})).await;
    let passed = call(
        addr,
        "GET",
        "/passthrough/claude/v1/models/claude-x",
        &[("x-api-key", &granted), ("anthropic-version", "2023-06-01"), ("anthropic-beta", "files-api-2025-04-14")],
        b"",
    )
    .await;
    assert_eq!(passed.status, 200, "{}", String::from_utf8_lossy(&passed.body));
    let seen = vendor.got();
    assert_eq!(seen.len(), 1, "only the granted request reached the vendor: {seen:?}");
    assert_eq!(seen[0].headers["x-api-key"], ANTHROPIC_KEY);
    assert_eq!(seen[0].headers["anthropic-version"], "2023-06-01");
    assert_eq!(seen[0].headers["anthropic-beta"], "files-api-2025-04-14");
    // A Gemini caller's key in the query is its own: it stays behind.
    let (_, gemini) = key(addr, json!({"name": "di", "group": "acme", "passthrough": ["google"]})).await;
    let listed =
        call(addr, "GET", &format!("/passthrough/google/v1beta/cachedContents?key={gemini}&pageSize=2"), &[], b"")
            .await;
    assert_eq!(listed.status, 200, "{}", String::from_utf8_lossy(&listed.body));
    let seen = vendor.got();
    assert_eq!(seen[1].target, "/v1beta/cachedContents?pageSize=2");
    assert_eq!(seen[1].headers["x-goog-api-key"], GOOGLE_KEY);
    // Refusals are rows of their own, never spend.
    let rows = ledger_rows(addr, "operation=refused", 2).await;
    assert!(rows.iter().all(|r| r["notes"]["refused"]["operation"] == "passthrough"), "{rows:?}");
}

#[tokio::test]
async fn one_tenants_grant_opens_nothing_to_another() {
    let (addr, vendor) = fronting().await;
    let (_, acme) = key(addr, json!({"name": "acme-key", "group": "acme", "passthrough": ["fake"]})).await;
    let (globex_id, globex) =
        key(addr, json!({"name": "globex-key", "group": "globex", "passthrough": ["claude"]})).await;
    let to = |provider: &str| format!("/passthrough/{provider}/v1/models/m");
    assert_eq!(call(addr, "GET", &to("fake"), &[("authorization", &bearer(&globex))], b"").await.status, 403);
    assert_eq!(call(addr, "GET", &to("claude"), &[("x-api-key", &acme)], b"").await.status, 403);
    assert!(vendor.got().is_empty());
    // A tenant admin cannot hand out the route, to a new key or an old one.
    let made = admin_call(
        addr,
        "POST",
        "/api/v1/admin/keys",
        Some(ACME),
        Some(json!({"name": "sneaky", "group": "acme", "passthrough": ["fake"]})),
    )
    .await;
    assert_eq!(made.status, 403, "{}", String::from_utf8_lossy(&made.body));
    let made =
        admin_call(addr, "POST", "/api/v1/admin/keys", Some(ACME), Some(json!({"name": "plain", "group": "acme"})))
            .await;
    assert_eq!(made.status, 201, "{}", String::from_utf8_lossy(&made.body));
    let id = serde_json::from_slice::<Value>(&made.body).unwrap()["id"].as_str().unwrap().to_owned();
    let patched = admin_call(
        addr,
        "PATCH",
        &format!("/api/v1/admin/keys/{id}"),
        Some(ACME),
        Some(json!({"passthrough": ["fake"]})),
    )
    .await;
    assert_eq!(patched.status, 403, "{}", String::from_utf8_lossy(&patched.body));
    // And the gateway's admin grants only routes that exist.
    let bad = admin_call(
        addr,
        "PATCH",
        &format!("/api/v1/admin/keys/{globex_id}"),
        Some(ADMIN_TOKEN),
        Some(json!({"passthrough": ["plain"]})),
    )
    .await;
    assert_eq!(bad.status, 400, "{}", String::from_utf8_lossy(&bad.body));
    let read = admin_call(addr, "GET", &format!("/api/v1/admin/keys/{globex_id}"), Some(ADMIN_TOKEN), None).await;
    assert_eq!(serde_json::from_slice::<Value>(&read.body).unwrap()["passthrough"], json!(["claude"]));
}

#[tokio::test]
async fn a_key_past_its_rate_gets_the_vendors_429_and_the_vendor_nothing_more() {
    let (addr, vendor) = fronting().await;
    let (_, secret) =
        key(addr, json!({"name": "ana", "group": "acme", "passthrough": ["fake"], "limits": {"rpm": 1}})).await;
    let auth = bearer(&secret);
    let first = call(addr, "GET", "/passthrough/fake/v1/models/gpt-x", &[("authorization", &auth)], b"").await;
    assert_eq!(first.status, 200);
    let second = call(addr, "GET", "/passthrough/fake/v1/models/gpt-x", &[("authorization", &auth)], b"").await;
    assert_eq!(second.status, StatusCode::TOO_MANY_REQUESTS, "{}", String::from_utf8_lossy(&second.body));
    assert!(second.headers.contains_key("retry-after"));
    let error: Value = serde_json::from_slice(&second.body).unwrap();
    assert!(error["error"].is_object(), "OpenAI's error shape: {error}");
    assert_eq!(vendor.got().len(), 1);
}

#[tokio::test]
async fn a_body_past_the_limit_is_refused_declared_or_streamed() {
    let (at, vendor) = vendor().await;
    let config = config(at).replace("auth: { mode: keys }", "auth: { mode: keys }\nserver: { body_limit: 1KiB }");
    let (addr, _) = governed(&config).await;
    let (_, secret) = key(addr, json!({"name": "ana", "group": "acme", "passthrough": ["fake"]})).await;
    let target = "/passthrough/fake/v1/fine_tuning/jobs";
    // Declared: refused before anything is sent.
    let big = vec![b'x'; 4096];
    let refused = call(addr, "POST", target, &[("authorization", &bearer(&secret))], &big).await;
    assert_eq!(refused.status, 413, "{}", String::from_utf8_lossy(&refused.body));
    // Streamed without a length: cut where it passes the limit.
    let chunks =
        (0..8).map(|_| Ok::<_, std::convert::Infallible>(http_body::Frame::data(Bytes::from(vec![b'y'; 512]))));
    let body = http_body_util::StreamBody::new(futures_util::stream::iter(chunks));
    let client: Client<_, http_body_util::StreamBody<_>> = Client::builder(TokioExecutor::new()).build_http();
    let request = http::Request::post(format!("http://{addr}{target}"))
        .header("authorization", bearer(&secret))
        .body(body)
        .unwrap();
    let response = client.request(request).await.unwrap();
    assert_eq!(response.status(), 413);
    // A body within the limit still passes.
    let fits = call(addr, "POST", target, &[("authorization", &bearer(&secret))], &[b'z'; 512]).await;
    assert_eq!(fits.status, 200);
    let got = vendor.got();
    assert_eq!(got.len(), 1, "the vendor never got a whole request past the limit: {got:?}");
    assert_eq!(got[0].body.len(), 512);
}

/// A Bedrock caller signs with its minted pair (over the gateway's path);
/// the gateway checks it and signs what it forwards with the operator's
/// pair, over the vendor's path, query and body.
#[tokio::test]
async fn bedrock_requests_are_signed_again_with_the_operators_pair() {
    use switchyard_protocol::ir::Protocol;
    let (addr, vendor) = fronting().await;
    let made =
        create_key(addr, json!({"name": "ana", "group": "acme", "passthrough": ["aws"], "issue_aws_credential": true}))
            .await;
    let (access_key_id, secret) = (
        made["aws_access_key_id"].as_str().unwrap().to_owned(),
        made["aws_secret_access_key"].as_str().unwrap().to_owned(),
    );
    let signed = |method: &'static str, target: &str, body: &[u8], secret: &str| {
        let credentials = switchyard_protocol::Credentials::Aws {
            access_key_id: access_key_id.clone(),
            secret_access_key: secret.to_owned(),
            session_token: None,
            region: "us-east-1".into(),
        };
        let url = format!("http://{addr}{target}");
        let time = std::time::SystemTime::now();
        let outbound = switchyard_protocol::Outbound { method, url: &url, body, time };
        let headers = switchyard_protocol::codec(Protocol::Bedrock).auth_headers(&credentials, &outbound).unwrap();
        headers.iter().map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned())).collect::<Vec<_>>()
    };
    let send = |method: &'static str, target: &'static str, body: &'static [u8], secret: String| {
        let headers = signed(method, target, body, &secret);
        async move {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            call(addr, method, target, &headers, body).await
        }
    };
    let listed = send("GET", "/passthrough/aws/async-invoke?maxResults=2", b"", secret.clone()).await;
    assert_eq!(listed.status, 200, "{}", String::from_utf8_lossy(&listed.body));
    let body: &'static [u8] = b"{\"modelId\":\"amazon.nova-reel-v1:0\",\"modelInput\":{}}";
    let started = send("POST", "/passthrough/aws/async-invoke", body, secret.clone()).await;
    assert_eq!(started.status, 200, "{}", String::from_utf8_lossy(&started.body));
    // A signature by another secret: Bedrock's refusal, and nothing sent.
    let forged =
        send("GET", "/passthrough/aws/async-invoke", b"", "not-the-secret-000000000000000000000000".into()).await;
    assert_eq!(forged.status, 403, "{}", String::from_utf8_lossy(&forged.body));
    assert!(forged.headers.contains_key("x-amzn-errortype"));

    let got = vendor.got();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0].target, "/async-invoke?maxResults=2");
    assert_eq!(&got[1].body[..], body);
    for seen in &got {
        let authorization = seen.headers["authorization"].to_str().unwrap();
        assert!(authorization.contains(&format!("Credential={AWS_KEY_ID}/")), "{authorization}");
        assert!(!authorization.contains(&access_key_id), "the caller's pair stays behind");
        let (path, query) = seen.target.split_once('?').map_or((seen.target.as_str(), None), |(p, q)| (p, Some(q)));
        let pairs: Vec<(&str, &[u8])> = seen.headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())).collect();
        let inbound = switchyard_governance::sigv4::Inbound {
            method: seen.method.as_str(),
            path,
            query,
            headers: &pairs,
            authority: None,
            body: &seen.body,
        };
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        let verified = switchyard_governance::sigv4::verify(&inbound, |_| Some(AWS_SECRET.to_owned()), now);
        assert_eq!(verified, Ok(AWS_KEY_ID), "the vendor can check the operator's signature");
    }
}
