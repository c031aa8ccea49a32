//! The MCP gateway (`/mcp`) over real TCP, in front of the vendor fake's
//! MCP server: what a key's grants reach (nothing without them; tools,
//! prompts and resources each by their own grants), what a prompt fetched
//! or a resource read goes through (admission, a ledger row, the
//! guardrails on what comes back), how many sessions one key may hold, and
//! the config's MCP credentials and commands as the admin API shows and
//! takes them. `McpClient` is what the other modules speak MCP with.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use std::net::SocketAddr;

use common::*;
use serde_json::{json, Value};

/// The JSON-RPC codes the gateway answers refusals with.
pub const FORBIDDEN: i64 = -32003;
pub const LIMITED: i64 = -32029;

/// An `initialize` refused: its status, headers and JSON-RPC answer.
#[derive(Debug)]
pub struct Refused {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub answer: Value,
}

/// A caller's MCP session over plain HTTP.
pub struct McpClient {
    addr: SocketAddr,
    headers: Vec<(String, String)>,
    session: String,
    next: u64,
}

impl McpClient {
    /// `initialize` as `bearer` (none: no key): the session, or the reply
    /// that refused it.
    pub async fn open(addr: SocketAddr, bearer: Option<&str>) -> Result<McpClient, Refused> {
        let mut headers = vec![("accept".to_owned(), "application/json, text/event-stream".to_owned())];
        if let Some(bearer) = bearer {
            headers.push(("authorization".to_owned(), format!("Bearer {bearer}")));
        }
        let hello = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
        let sent: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let reply = post(addr, "/mcp", &sent, hello.to_string()).await;
        let Some(session) = reply.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned) else {
            let answer = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
            return Err(Refused { status: reply.status.as_u16(), headers: reply.headers, answer });
        };
        assert_eq!(reply.status, 200);
        Ok(McpClient { addr, headers, session, next: 1 })
    }

    /// The session id the gateway gave it.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// One request: its whole JSON-RPC answer.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let message = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        let mut sent: Vec<(&str, &str)> = self.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        sent.push(("mcp-session-id", &self.session));
        let reply = post(self.addr, "/mcp", &sent, message.to_string()).await;
        assert_eq!(reply.status, 200, "{method}: {}", String::from_utf8_lossy(&reply.body));
        serde_json::from_slice(&reply.body).unwrap()
    }

    /// The names a listing gave (`tools/list` → `tools` → `name`).
    pub async fn names(&mut self, method: &str, items: &str, field: &str) -> Vec<String> {
        let answer = self.request(method, json!({})).await;
        let listed = answer["result"][items].as_array().unwrap_or_else(|| panic!("{method}: {answer}"));
        listed.iter().map(|item| item[field].as_str().unwrap().to_owned()).collect()
    }

    /// `DELETE /mcp`: its status.
    pub async fn end(self) -> u16 {
        let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http::<http_body_util::Full<bytes::Bytes>>();
        let mut request =
            http::Request::delete(format!("http://{}/mcp", self.addr)).header("mcp-session-id", &self.session);
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let response = client.request(request.body(http_body_util::Full::default()).unwrap()).await.unwrap();
        response.status().as_u16()
    }
}

/// The error code of an answer (0: it succeeded).
pub fn code(answer: &Value) -> i64 {
    answer["error"]["code"].as_i64().unwrap_or(0)
}

/// A governed gateway fronting the vendor fake's MCP server as `mock`,
/// its results screened for email addresses; `extra` under `mcp:`.
async fn fronting(extra: &str) -> SocketAddr {
    let upstream = mock_upstream().await;
    let yaml = format!(
        "auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n\
         policies:\n  pii: {{ detect: [email], action: mask }}\n\
         mcp:\n  policies: [pii]\n{extra}  servers:\n    mock: {{ url: \"http://{upstream}/mcp\" }}\n"
    );
    governed(&yaml).await.0
}

async fn key(addr: SocketAddr, spec: Value) -> String {
    create_key(addr, spec).await["key"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_key_without_mcp_grants_reaches_no_tool_prompt_or_resource() {
    let addr = fronting("").await;
    let bare = key(addr, json!({"name": "no-grants"})).await;
    let everything = key(addr, json!({"name": "everything", "mcp": ["*"]})).await;

    let mut client = McpClient::open(addr, Some(&bare)).await.unwrap();
    assert!(client.names("tools/list", "tools", "name").await.is_empty());
    assert!(client.names("prompts/list", "prompts", "name").await.is_empty());
    assert!(client.names("resources/list", "resources", "uri").await.is_empty());
    assert!(client.names("resources/templates/list", "resourceTemplates", "uriTemplate").await.is_empty());
    let deleted = client.request("tools/call", json!({"name": "mock__delete_everything", "arguments": {}})).await;
    assert_eq!(code(&deleted), FORBIDDEN, "{deleted}");
    let prompt = client.request("prompts/get", json!({"name": "mock__greet", "arguments": {"who": "Ada"}})).await;
    assert_eq!(code(&prompt), FORBIDDEN, "{prompt}");
    let read = client.request("resources/read", json!({"uri": "mock+mock://readme"})).await;
    assert_eq!(code(&read), FORBIDDEN, "{read}");

    // Granted everything: all of it.
    let mut granted = McpClient::open(addr, Some(&everything)).await.unwrap();
    assert_eq!(granted.names("tools/list", "tools", "name").await, ["mock__echo", "mock__delete_everything"]);
    assert_eq!(granted.names("prompts/list", "prompts", "name").await, ["mock__greet"]);
    let called = granted.request("tools/call", json!({"name": "mock__delete_everything", "arguments": {}})).await;
    assert_eq!(called["result"]["content"][0]["text"], "deleted everything", "{called}");

    // The refusals are the key's ledger rows.
    let rows = ledger_rows(addr, "operation=mcp&status=403", 3).await;
    let refused: Vec<&str> = rows.iter().map(|r| r["model"].as_str().unwrap()).collect();
    assert!(refused.contains(&"mock__delete_everything"), "{refused:?}");
    assert!(refused.contains(&"prompt:mock__greet") && refused.contains(&"resource:mock"), "{refused:?}");
}

#[tokio::test]
async fn prompts_and_resources_have_their_own_grants_limits_rows_and_guardrails() {
    let addr = fronting("").await;
    // A grant of one tool of the server opens none of its prompts or resources.
    let tools_only = key(addr, json!({"name": "tools-only", "mcp": ["mock__echo"]})).await;
    let mut client = McpClient::open(addr, Some(&tools_only)).await.unwrap();
    assert_eq!(client.names("tools/list", "tools", "name").await, ["mock__echo"]);
    assert!(client.names("prompts/list", "prompts", "name").await.is_empty());
    assert!(client.names("resources/list", "resources", "uri").await.is_empty());
    let read = client.request("resources/read", json!({"uri": "mock+mock://secret"})).await;
    assert_eq!(code(&read), FORBIDDEN, "{read}");
    let prompt = client.request("prompts/get", json!({"name": "mock__greet", "arguments": {"who": "x"}})).await;
    assert_eq!(code(&prompt), FORBIDDEN, "{prompt}");
    // A name is bounded before any grant is matched against it.
    let long = client.request("resources/read", json!({"uri": format!("mock+mock://{}", "x".repeat(9_000))})).await;
    assert_eq!(code(&long), -32602, "{}", &long.to_string()[..200]);

    // Granted one prompt and two resources, five requests a minute
    // (`initialize` is the first).
    let grants = json!(["prompt:mock__greet", "resource:mock+mock://readme", "resource:mock+mock://contacts"]);
    let reader = key(addr, json!({"name": "reader", "mcp": grants, "limits": {"rpm": 5}})).await;
    let mut client = McpClient::open(addr, Some(&reader)).await.unwrap();
    assert!(client.names("tools/list", "tools", "name").await.is_empty());
    assert_eq!(client.names("prompts/list", "prompts", "name").await, ["mock__greet"]);
    assert_eq!(
        client.names("resources/list", "resources", "uri").await,
        ["mock+mock://readme", "mock+mock://contacts"]
    );
    assert_eq!(
        client.names("resources/templates/list", "resourceTemplates", "uriTemplate").await,
        ["mock+mock://notes/{id}"]
    );
    let greeted = client.request("prompts/get", json!({"name": "mock__greet", "arguments": {"who": "Ada"}})).await;
    assert_eq!(greeted["result"]["messages"][0]["content"]["text"], "Hello, Ada!", "{greeted}");
    let readme = client.request("resources/read", json!({"uri": "mock+mock://readme"})).await;
    assert_eq!(readme["result"]["contents"][0]["text"], "readme of mock", "{readme}");
    // `mcp.policies` on what a read returns.
    let contacts = client.request("resources/read", json!({"uri": "mock+mock://contacts"})).await;
    let text = contacts["result"]["contents"][0]["text"].as_str().unwrap_or_default().to_owned();
    assert!(!text.contains("ops@example.com") && text.starts_with("write to "), "{contacts}");
    let secret = client.request("resources/read", json!({"uri": "mock+mock://secret"})).await;
    assert_eq!(code(&secret), FORBIDDEN, "a resource not granted: {secret}");
    let note = client.request("resources/read", json!({"uri": "mock+mock://notes/1"})).await;
    assert_eq!(code(&note), FORBIDDEN, "a template grants no read: {note}");
    // The fifth admitted request of the minute passes; the sixth is limited.
    assert_eq!(code(&client.request("resources/read", json!({"uri": "mock+mock://readme"})).await), 0);
    let limited = client.request("resources/read", json!({"uri": "mock+mock://readme"})).await;
    assert_eq!(code(&limited), LIMITED, "{limited}");
    assert!(limited["error"]["data"]["retry_after"].as_u64().unwrap_or(0) >= 1, "{limited}");

    // Each is a ledger row of operation `mcp`, as a tool call is.
    let rows = ledger_rows(addr, "operation=mcp&key=reader", 7).await;
    let row = |model: &str, status: u64| {
        rows.iter()
            .find(|r| r["model"] == model && r["status"] == status)
            .unwrap_or_else(|| panic!("{model} {status}: {rows:?}"))
    };
    let prompt_row = row("prompt:mock__greet", 200);
    assert_eq!((prompt_row["pool"].as_str(), prompt_row["lane"].as_str()), (Some("mock"), Some("mcp:mock")));
    assert!(prompt_row["notes"]["tool"]["bytes_in"].as_u64().unwrap() > 0, "{prompt_row}");
    let screened = rows
        .iter()
        .find(|r| r["notes"]["tool"]["uri"] == "mock+mock://contacts")
        .unwrap_or_else(|| panic!("the contacts read: {rows:?}"));
    assert_eq!((screened["model"].as_str(), screened["status"].as_u64()), (Some("resource:mock"), Some(200)));
    assert!(screened["notes"]["guardrails"].to_string().contains("pii/email/mask/response"), "{screened}");
    let refused: Vec<&Value> = rows.iter().filter(|r| r["model"] == "resource:mock" && r["status"] == 403).collect();
    let uris: Vec<&str> = refused.iter().map(|r| r["notes"]["tool"]["uri"].as_str().unwrap()).collect();
    assert_eq!(uris.len(), 2, "{refused:?}");
    assert!(uris.contains(&"mock+mock://secret") && uris.contains(&"mock+mock://notes/1"), "{uris:?}");
    row("resource:mock", 429);
}

#[tokio::test]
async fn a_key_holds_a_bounded_number_of_sessions_and_initialize_counts_against_its_limits() {
    let addr = fronting("  sessions_per_key: 2\n").await;
    let busy = key(addr, json!({"name": "busy", "mcp": ["*"]})).await;
    let other = key(addr, json!({"name": "other", "mcp": ["*"]})).await;
    let first = McpClient::open(addr, Some(&busy)).await.unwrap();
    let _second = McpClient::open(addr, Some(&busy)).await.unwrap();
    let Err(full) = McpClient::open(addr, Some(&busy)).await else { panic!("a third session of one key") };
    assert_eq!(full.status, 429);
    let answer = full.answer;
    assert_eq!(code(&answer), LIMITED);
    assert!(answer["error"]["message"].as_str().unwrap().contains("mcp.sessions_per_key"), "{answer}");
    // Another key is not held back; an ended session makes room.
    let mut others = McpClient::open(addr, Some(&other)).await.unwrap();
    assert_eq!(others.names("tools/list", "tools", "name").await.len(), 2);
    assert_eq!(first.end().await, 200);
    assert!(McpClient::open(addr, Some(&busy)).await.is_ok());

    // `initialize` is a request on the key's limits.
    let slow = key(addr, json!({"name": "slow", "mcp": ["*"], "limits": {"rpm": 1}})).await;
    assert!(McpClient::open(addr, Some(&slow)).await.is_ok());
    let Err(limited) = McpClient::open(addr, Some(&slow)).await else {
        panic!("a second initialize within the minute")
    };
    assert_eq!(limited.status, 429);
    assert!(limited.headers.contains_key("retry-after"));
    assert_eq!(code(&limited.answer), LIMITED, "{:?}", limited.answer);
}

/// A reloadable gateway whose file names stdio and HTTP MCP servers with
/// literal credentials; versions kept in SQLite.
fn versioned(db: &std::path::Path, marker: &std::path::Path, extra: &str) -> String {
    format!(
        "admin: {{ tokens: [{ADMIN_TOKEN}, {{ name: viewer, token: viewer-token-0123456789, scope: read }}] }}\n\
         storage: {{ sqlite_path: \"{}\" }}\nauth: {{ mode: keys }}\n\
         mcp:\n  servers:\n    \
         files: {{ command: /bin/sh, args: [-c, \"touch {}; exec cat\", --token=argv-secret-1], env: {{ FILES_TOKEN: env-secret-2 }} }}\n    \
         tickets: {{ url: \"http://127.0.0.1:9/mcp\", auth: {{ bearer: bearer-secret-3 }} }}\n{extra}",
        db.display(),
        marker.display()
    )
}

async fn as_admin(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: &str,
    etag: Option<&str>,
    body: Value,
) -> (u16, Value) {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let mut request = http::Request::builder()
        .method(method)
        .uri(format!("http://{}{path}", admin(addr)))
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json");
    if let Some(etag) = etag {
        request = request.header("if-match", etag);
    }
    let response =
        client.request(request.body(http_body_util::Full::new(body.to_string().into())).unwrap()).await.unwrap();
    let status = response.status().as_u16();
    let body = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

/// A directory of the test's own, removed when it drops.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let dir = std::env::temp_dir().join(format!("switchyard-mcp-{}-{}", std::process::id(), fastrand::u32(..)));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_token_never_sees_mcp_credentials_in_the_config_its_versions_or_diffs() {
    let scratch = Scratch::new();
    let (db, marker) = (scratch.path("versions.db"), scratch.path("marker"));
    let (addr, _reloader, _file) = reloadable(&versioned(&db, &marker, "")).await;
    // A second version, its bearer changed (an HTTP server's credential may change over the API).
    let second = versioned(&db, &marker, "").replace("bearer-secret-3", "bearer-secret-4");
    let (status, applied) =
        as_admin(addr, "POST", "/api/v1/admin/config", ADMIN_TOKEN, Some("\"1\""), json!({"yaml": second})).await;
    assert_eq!(status, 200, "{applied}");
    let viewer = "viewer-token-0123456789";
    let mut seen = String::new();
    for path in [
        "/api/v1/admin/config",
        "/api/v1/admin/config/versions/1",
        "/api/v1/admin/config/versions/2",
        "/api/v1/admin/config/diff?from=1&to=2",
    ] {
        let (status, body) = as_admin(addr, "GET", path, viewer, None, Value::Null).await;
        assert_eq!(status, 200, "{path}: {body}");
        seen.push_str(&body.to_string());
    }
    for secret in ["argv-secret-1", "env-secret-2", "bearer-secret-3", "bearer-secret-4", "touch "] {
        assert!(!seen.contains(secret), "{secret} shown to a read-only token: {seen}");
    }
    assert!(seen.contains("command: /bin/sh") && seen.contains("<redacted>"), "{seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_command_never_comes_from_the_admin_api() {
    let scratch = Scratch::new();
    let (db, marker, evil) = (scratch.path("versions.db"), scratch.path("marker"), scratch.path("evil"));
    let first = versioned(&db, &marker, "");
    let (addr, reloader, file) = reloadable(&first).await;
    let everything = key(addr, json!({"name": "everything", "mcp": ["*"]})).await;

    // A new stdio server posted as a version: refused, named, nothing written or run.
    let added = first.replace(
        "    tickets:",
        &format!("    evil: {{ command: /bin/sh, args: [-c, \"touch {}; exec cat\"] }}\n    tickets:", evil.display()),
    );
    let (status, refused) =
        as_admin(addr, "POST", "/api/v1/admin/config", ADMIN_TOKEN, Some("\"1\""), json!({"yaml": added})).await;
    assert_eq!(status, 403, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("mcp.servers.evil") && message.contains("config file"), "{refused}");
    assert_eq!(*file.lock().unwrap(), first, "the file is untouched");
    // A candidate validated says so first.
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let headers = [("authorization", auth.as_str()), ("content-type", "application/yaml")];
    let validated = post(admin(addr), "/api/v1/admin/config/validate", &headers, added.clone()).await;
    let validated: Value = serde_json::from_slice(&validated.body).unwrap();
    assert_eq!(validated["valid"], false, "{validated}");
    assert_eq!(validated["problems"][0]["path"], "mcp.servers.evil", "{validated}");
    let mut client = McpClient::open(addr, Some(&everything)).await.unwrap();
    client.request("tools/list", json!({})).await;
    assert!(!evil.exists(), "the posted command ran");
    // Its arguments or environment changed: refused too.
    for changed in [first.replace("--token=argv-secret-1", "--token=other"), first.replace("env-secret-2", "other")] {
        let (status, refused) =
            as_admin(addr, "POST", "/api/v1/admin/config", ADMIN_TOKEN, Some("\"1\""), json!({"yaml": changed})).await;
        assert_eq!(status, 403, "{refused}");
    }
    // Anything else still changes over the API.
    let other = first.replace("http://127.0.0.1:9/mcp", "http://127.0.0.1:10/mcp");
    let (status, applied) =
        as_admin(addr, "POST", "/api/v1/admin/config", ADMIN_TOKEN, Some("\"1\""), json!({"yaml": other})).await;
    assert_eq!(status, 200, "{applied}");

    // The file changes the command (it may), and a rollback to the old one is refused.
    let edited = other.replace("exec cat", "exec cat -u");
    *file.lock().unwrap() = edited.clone();
    reloader.reload().await.unwrap();
    let (status, refused) =
        as_admin(addr, "POST", "/api/v1/admin/config/rollback/1", ADMIN_TOKEN, Some("\"3\""), json!({})).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(*file.lock().unwrap(), edited);
}
