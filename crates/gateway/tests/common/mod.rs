//! Shared harness for the gateway's integration tests: a gateway (and,
//! where wanted, the vendor fake) on real TCP ports chosen by the OS, a small
//! HTTP client, and the per-protocol request bodies a caller would send.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, LazyLock, Mutex};

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use switchyard_gateway::server::Settings;
use switchyard_gateway::Gateway;
use switchyard_protocol::codec;
use switchyard_protocol::ir::{Accumulator, Protocol, Response};

/// Starts a router on 127.0.0.1:0 with the default limits and returns its address.
pub async fn spawn(router: axum::Router) -> SocketAddr {
    spawn_with(router, Settings::plain(switchyard_config::Server::default())).await
}

/// Starts a router on 127.0.0.1:0 with `settings`.
pub async fn spawn_with(router: axum::Router, settings: Settings) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(switchyard_gateway::server::serve(listener, router, settings, std::future::pending()));
    addr
}

/// The admin listener of each gateway a test started, by data address.
static ADMINS: LazyLock<Mutex<HashMap<SocketAddr, SocketAddr>>> = LazyLock::new(Mutex::default);

/// The admin address of the gateway serving data at `addr`.
pub fn admin(addr: SocketAddr) -> SocketAddr {
    ADMINS.lock().unwrap()[&addr]
}

/// Starts a gateway for `yaml`.
pub async fn gateway(yaml: &str) -> SocketAddr {
    gateway_handle(yaml).await.0
}

/// The admin token every test gateway accepts (unless its config names its own).
pub const ADMIN_TOKEN: &str = "test-admin-token-0123456789";

/// Starts a gateway for `yaml` (data and admin listeners, as the binary
/// does) and keeps a handle on its state.
pub async fn gateway_handle(yaml: &str) -> (SocketAddr, Arc<Gateway>) {
    gateway_with_env(yaml, &|_| None).await
}

/// [`gateway_handle`] with the process environment `env` (the `${VAR}`s
/// and `OTEL_*` variables the config reads).
pub async fn gateway_with_env(yaml: &str, env: &dyn Fn(&str) -> Option<String>) -> (SocketAddr, Arc<Gateway>) {
    let yaml = if yaml.lines().any(|l| l.starts_with("admin:")) {
        yaml.to_owned()
    } else {
        format!("{yaml}\nadmin: {{ tokens: [{ADMIN_TOKEN}] }}\n")
    };
    let config = switchyard_config::load(&yaml, env).unwrap();
    let gateway =
        Arc::new(Gateway::new(config, codec).unwrap().with_mcp(switchyard_gateway::mcp_hub()).with_telemetry());
    switchyard_admin::scrape::spawn_export(&gateway);
    let settings = switchyard_gateway::server::data_settings(&gateway, Arc::default());
    let addr = spawn_with(switchyard_gateway::router(gateway.clone()), settings).await;
    let admin = spawn(switchyard_gateway::admin_router(gateway.clone())).await;
    ADMINS.lock().unwrap().insert(addr, admin);
    (addr, gateway)
}

/// Starts a gateway for `yaml` with governance as the binary builds it
/// (stores, ledger writer, caches), data and admin listeners.
pub async fn governed(yaml: &str) -> (SocketAddr, Arc<Gateway>) {
    let yaml = if yaml.lines().any(|l| l.starts_with("admin:")) {
        yaml.to_owned()
    } else {
        format!("{yaml}\nadmin: {{ tokens: [{ADMIN_TOKEN}] }}\n")
    };
    let gateway = governed_gateway(&yaml).await;
    let settings = switchyard_gateway::server::data_settings(&gateway, Arc::default());
    let addr = spawn_with(switchyard_gateway::router(gateway.clone()), settings).await;
    let admin = spawn(switchyard_gateway::admin_router(gateway.clone())).await;
    ADMINS.lock().unwrap().insert(addr, admin);
    (addr, gateway)
}

/// The gateway for `yaml` with governance as the binary builds it (stores,
/// ledger writer, caches), not yet serving.
async fn governed_gateway(yaml: &str) -> Arc<Gateway> {
    let config = switchyard_config::load(yaml, &|_| None).unwrap();
    let mut gateway = Gateway::new(config, codec).unwrap().with_mcp(switchyard_gateway::mcp_hub());
    let (governance, writer) =
        switchyard_state::governance::from_config(&gateway.config, gateway.prices()).await.unwrap().unwrap();
    // The writer runs for the test's life.
    std::mem::forget(writer);
    gateway = gateway.with_governance(governance).with_telemetry();
    Arc::new(gateway)
}

/// Ledger rows (the admin API's requests matching `query`), once the
/// writer flushed `at_least` of them.
pub async fn ledger_rows(addr: SocketAddr, query: &str, at_least: usize) -> Vec<serde_json::Value> {
    for _ in 0..200 {
        let reply =
            admin_call(addr, "GET", &format!("/api/v1/admin/requests?limit=1000&{query}"), Some(ADMIN_TOKEN), None)
                .await;
        let page: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        let rows = page["data"].as_array().unwrap().clone();
        if rows.len() >= at_least {
            return rows;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the ledger never held {at_least} rows for {query}");
}

/// Starts a gateway for `yaml` whose breakers are shared with the fleet
/// over the Redis at `redis`.
pub async fn fleet_state_gateway(yaml: &str, redis: &str) -> (SocketAddr, Arc<Gateway>) {
    let config = switchyard_config::load(yaml, &|_| None).unwrap();
    let shared = switchyard_fleet::shared::FleetState::connect(redis).await.unwrap();
    let gateway = Arc::new(
        Gateway::new(config, codec)
            .unwrap()
            .with_fleet_state(shared.clone())
            .with_mcp(switchyard_gateway::mcp_hub())
            .with_telemetry(),
    );
    shared.attach(Arc::downgrade(&gateway) as std::sync::Weak<dyn switchyard_fleet::shared::Breakers>);
    let settings = switchyard_gateway::server::data_settings(&gateway, Arc::default());
    let addr = spawn_with(switchyard_gateway::router(gateway.clone()), settings).await;
    (addr, gateway)
}

/// Calls the admin API of the gateway serving data at `addr`.
pub async fn admin_call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<serde_json::Value>,
) -> Reply {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut request = Request::builder().method(method).uri(format!("http://{}{path}", admin(addr)));
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let bytes = body.map_or_else(Bytes::new, |b| Bytes::from(b.to_string()));
    let response = client
        .request(request.header("content-type", "application/json").body(Full::new(bytes)).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Reply { status, headers, body }
}

/// Creates a virtual key through the admin API and returns its answer.
pub async fn create_key(addr: SocketAddr, spec: serde_json::Value) -> serde_json::Value {
    let reply = admin_call(addr, "POST", "/api/v1/admin/keys", Some(ADMIN_TOKEN), Some(spec)).await;
    assert_eq!(reply.status, 201, "{}", String::from_utf8_lossy(&reply.body));
    serde_json::from_slice(&reply.body).unwrap()
}

/// The admin plane's `/stats` of the gateway serving data at `addr`.
pub async fn stats(addr: SocketAddr) -> serde_json::Value {
    let reply = get_with(admin(addr), "/stats", &[("authorization", &format!("Bearer {ADMIN_TOKEN}"))]).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    serde_json::from_slice(&reply.body).unwrap()
}

/// Starts the vendor fake.
pub async fn mock_upstream() -> SocketAddr {
    spawn(switchyard_gateway::server::mock_router(codec)).await
}

/// A config with one lane per protocol named `lane-<protocol>`, reached at `base_url`.
pub fn lanes_config(base_url: &str) -> String {
    let mut yaml = String::from("providers:\n");
    for p in Protocol::ALL {
        yaml.push_str(&format!("  up-{p}: {{ protocol: {p}, base_url: \"{base_url}\" }}\n"));
    }
    yaml.push_str("models:\n");
    for p in Protocol::ALL {
        yaml.push_str(&format!("  lane-{p}: {{ provider: up-{p}, model: wire-{p} }}\n"));
    }
    yaml.push_str("pools:\n  mixed:\n    members:\n");
    for p in Protocol::ALL {
        yaml.push_str(&format!("      - {{ model: lane-{p} }}\n"));
    }
    yaml
}

/// What came back.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// POSTs `body` to `http://addr{path}`.
pub async fn post(addr: SocketAddr, path: &str, headers: &[(&str, &str)], body: impl Into<Bytes>) -> Reply {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut request = Request::post(format!("http://{addr}{path}"));
    if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("content-type")) {
        request = request.header("content-type", "application/json");
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client.request(request.body(Full::new(body.into())).unwrap()).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Reply { status, headers, body }
}

/// GETs `http://addr{path}`.
pub async fn get(addr: SocketAddr, path: &str) -> Reply {
    get_with(addr, path, &[]).await
}

/// GETs `http://addr{path}` with `headers`.
pub async fn get_with(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Reply {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut request = Request::get(format!("http://{addr}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client.request(request.body(Full::new(Bytes::new())).unwrap()).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Reply { status, headers, body }
}

/// The path a caller of `protocol` posts to for `model`.
pub fn ingress_path(protocol: Protocol, model: &str, stream: bool) -> String {
    match protocol {
        Protocol::OpenAi => "/v1/chat/completions".into(),
        Protocol::Responses => "/v1/responses".into(),
        Protocol::Anthropic => "/v1/messages".into(),
        Protocol::Cohere => "/v2/chat".into(),
        Protocol::Gemini if stream => {
            format!("/v1beta/models/{model}:streamGenerateContent?alt=sse")
        }
        Protocol::Gemini => format!("/v1beta/models/{model}:generateContent"),
        Protocol::Bedrock if stream => format!("/model/{model}/converse-stream"),
        Protocol::Bedrock => format!("/model/{model}/converse"),
    }
}

/// A plain chat request in `protocol`'s wire shape: a system prompt and `text`.
pub fn chat_body(protocol: Protocol, model: &str, text: &str, stream: bool) -> String {
    let body = match protocol {
        Protocol::OpenAi => serde_json::json!({
            "model": model, "stream": stream, "stream_options": if stream { serde_json::json!({"include_usage": true}) } else { serde_json::Value::Null },
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}],
        }),
        Protocol::Cohere => serde_json::json!({
            "model": model, "stream": stream,
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}],
        }),
        Protocol::Responses => {
            serde_json::json!({"model": model, "stream": stream, "instructions": "be brief", "input": text})
        }
        Protocol::Anthropic => serde_json::json!({
            "model": model, "stream": stream, "max_tokens": 256, "system": "be brief",
            "messages": [{"role": "user", "content": text}],
        }),
        Protocol::Gemini => serde_json::json!({
            "systemInstruction": {"parts": [{"text": "be brief"}]},
            "contents": [{"role": "user", "parts": [{"text": text}]}],
        }),
        Protocol::Bedrock => serde_json::json!({
            "system": [{"text": "be brief"}],
            "messages": [{"role": "user", "content": [{"text": text}]}],
        }),
    };
    body.to_string()
}

/// A request offering one tool, `get_weather(city)`.
pub fn tool_body(protocol: Protocol, model: &str, stream: bool) -> String {
    let schema =
        serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let body = match protocol {
        Protocol::OpenAi => serde_json::json!({
            "model": model, "stream": stream,
            "messages": [{"role": "user", "content": "weather in Paris?"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "description": "weather", "parameters": schema}}],
        }),
        Protocol::Cohere => serde_json::json!({
            "model": model, "stream": stream,
            "messages": [{"role": "user", "content": "weather in Paris?"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "description": "weather", "parameters": schema}}],
        }),
        Protocol::Responses => serde_json::json!({
            "model": model, "stream": stream, "input": "weather in Paris?",
            "tools": [{"type": "function", "name": "get_weather", "description": "weather", "parameters": schema}],
        }),
        Protocol::Anthropic => serde_json::json!({
            "model": model, "stream": stream, "max_tokens": 256,
            "messages": [{"role": "user", "content": "weather in Paris?"}],
            "tools": [{"name": "get_weather", "description": "weather", "input_schema": schema}],
        }),
        Protocol::Gemini => serde_json::json!({
            "contents": [{"role": "user", "parts": [{"text": "weather in Paris?"}]}],
            "tools": [{"functionDeclarations": [{"name": "get_weather", "description": "weather", "parameters": schema}]}],
        }),
        Protocol::Bedrock => serde_json::json!({
            "messages": [{"role": "user", "content": [{"text": "weather in Paris?"}]}],
            "toolConfig": {"tools": [{"toolSpec": {"name": "get_weather", "description": "weather", "inputSchema": {"json": schema}}}]},
        }),
    };
    body.to_string()
}

/// Reads a reply in `protocol`'s wire shape into IR (streams accumulated).
pub fn decode(protocol: Protocol, stream: bool, body: &[u8]) -> Response {
    let codec = codec(protocol);
    if !stream {
        return codec
            .read_response(body)
            .unwrap_or_else(|err| panic!("{protocol} reply unreadable: {err}: {}", String::from_utf8_lossy(body)));
    }
    let events = codec
        .decode_stream(&[body])
        .unwrap_or_else(|err| panic!("{protocol} stream unreadable: {err}: {}", String::from_utf8_lossy(body)));
    let mut accumulator = Accumulator::new();
    for event in &events {
        accumulator.push(event);
    }
    assert!(accumulator.error().is_none(), "{protocol} stream carried an error: {:?}", accumulator.error());
    assert!(accumulator.is_finished(), "{protocol} stream did not finish: {events:?}");
    accumulator.into_response()
}

/// The text blocks of a reply joined.
pub fn text_of(response: &Response) -> String {
    response
        .content
        .iter()
        .filter_map(|b| match b {
            switchyard_protocol::ir::Block::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect()
}

/// What a webhook receiver got: each JSON body posted to it.
pub type Received = Arc<Mutex<Vec<serde_json::Value>>>;

/// A webhook receiver on 127.0.0.1: its URL and what it received.
pub async fn webhook_receiver() -> (String, Received) {
    let got: Received = Arc::default();
    let sink = got.clone();
    let router = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: Bytes| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().push(serde_json::from_slice(&body).unwrap_or_default());
                StatusCode::OK
            }
        }),
    );
    let addr = spawn(router).await;
    (format!("http://{addr}/hook"), got)
}

/// Waits (at most 15 s) until `got` holds a body `wanted` accepts, and returns it.
pub async fn received(got: &Received, what: &str, wanted: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    for _ in 0..300 {
        if let Some(found) = got.lock().unwrap().iter().find(|v| wanted(v)) {
            return found.clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the webhook never received {what}: {:?}", got.lock().unwrap());
}

/// A governed gateway as the binary runs it, reloadable, its "file" held
/// in memory: its data address (its admin listener is `admin(addr)`), its
/// reloader and the file's text.
pub async fn reloadable(yaml: &str) -> (SocketAddr, Arc<switchyard_gateway::reload::Reloader>, Arc<Mutex<String>>) {
    use switchyard_gateway::reload::{Reloader, TextSource};
    use switchyard_gateway::server::LiveRouter;
    let text = Arc::new(Mutex::new(yaml.to_owned()));
    let gateway = governed_gateway(yaml).await;
    let data_router = LiveRouter::new(switchyard_gateway::router(gateway.clone()));
    let admin_router = LiveRouter::new(switchyard_gateway::admin_router(gateway.clone()));
    let source = Arc::new(TextSource { text: text.clone(), env: |_| None });
    let reloader = Reloader::new(gateway.clone(), data_router.clone(), admin_router.clone(), source);
    switchyard_gateway::reload::follow_versions(&reloader).await;
    let settings = switchyard_gateway::server::data_settings(&gateway, Arc::default());
    let addr = spawn_with_live(data_router, settings).await;
    let admin = spawn_with_live(admin_router, Settings::plain(switchyard_config::Server::default())).await;
    ADMINS.lock().unwrap().insert(addr, admin);
    (addr, reloader, text)
}

async fn spawn_with_live(router: switchyard_gateway::server::LiveRouter, settings: Settings) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(switchyard_gateway::server::serve(listener, router, settings, std::future::pending()));
    addr
}

/// The identity fixtures' signing key `kid` (P-256, PKCS#8): what a fake
/// identity provider signs callers' and users' tokens with.
pub fn identity_key(kid: &str) -> jsonwebtoken::EncodingKey {
    let pem = std::fs::read(format!("{}/tests/fixtures/identity/{kid}.pem", env!("CARGO_MANIFEST_DIR"))).unwrap();
    jsonwebtoken::EncodingKey::from_ec_pem(&pem).unwrap()
}

/// The JWKS document publishing the identity fixtures' key `kid`.
pub fn identity_jwks(kid: &str) -> serde_json::Value {
    let path = format!("{}/tests/fixtures/identity/jwks-{kid}.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Unix seconds now.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// Who the console document says is signed in (its session meta element).
pub async fn console_session(admin: SocketAddr, cookie: &str) -> serde_json::Value {
    let page = get_with(admin, "/ui/keys", &[("cookie", cookie)]).await;
    assert_eq!(page.status, 200);
    let html = String::from_utf8_lossy(&page.body).to_string();
    let start = html.find("<meta name=\"switchyard-session\" content=\"").unwrap() + 41;
    let content = &html[start..start + html[start..].find('"').unwrap()];
    serde_json::from_str(&content.replace("&quot;", "\"").replace("&amp;", "&")).unwrap()
}
