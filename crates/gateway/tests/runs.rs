//! Agent runs over real TCP (`groups.<g>.runs`): a run's model-call cap,
//! USD cap, tool-call cap (MCP `tools/call` through `/mcp`) and loop
//! breaker each let the call that reaches them finish and refuse the next
//! with the caller's quota error naming the run and the limit; the kill
//! switch stops a run at once (a stream in flight ends with its protocol's
//! terminal error); another key naming the same run id holds a
//! run of its own; a run id past 256 bytes is the caller's 400; a tenant
//! admin lists and kills only its subtree's runs; a key whose groups set
//! no `runs:` is not tracked.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;
use crate::mcp::{code, McpClient, LIMITED};

use std::net::SocketAddr;

use common::*;
use serde_json::{json, Value};
use switchyard_protocol::ir::Protocol;

/// acme's tenant admin token.
const ACME: &str = "acme-runs-tenant-token-0123456789";

/// Priced lanes on the fake, keys required; `corp` configures runs and
/// `acme` inherits them, `loopy` has a loop breaker and a tool cap,
/// `spendy` a USD cap, `free` none; an MCP server fronted.
async fn world() -> SocketAddr {
    let upstream = mock_upstream().await;
    let mut yaml = lanes_config("mock://");
    yaml.push_str("rate_card:\n");
    for p in Protocol::ALL {
        yaml.push_str(&format!("  lane-{p}: {{ input_utok: 1000, output_utok: 2000 }}\n"));
    }
    yaml.push_str(&format!(
        "auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n\
         groups:\n  corp: {{ runs: {{ calls: 2, wall: 30m }} }}\n  acme: {{ parent: corp }}\n  \
         globex: {{ runs: {{ calls: 2 }} }}\n  \
         loopy: {{ runs: {{ tool_calls: 3, loop: {{ repeats: 3 }} }} }}\n  \
         spendy: {{ runs: {{ usd: 0.05 }} }}\n  free: {{}}\n\
         mcp:\n  servers:\n    mock: {{ url: \"http://{upstream}/mcp\" }}\n\
         admin:\n  tokens: [{ADMIN_TOKEN}]\n  tenants: [ {{ token: {ACME}, group: acme, name: acme-lead }} ]\n"
    ));
    governed(&yaml).await.0
}

async fn key_in(addr: SocketAddr, group: &str) -> (String, String) {
    let made = create_key(addr, json!({"name": format!("{group}-agent"), "group": group, "mcp": ["*"]})).await;
    (made["key"].as_str().unwrap().to_owned(), made["id"].as_str().unwrap().to_owned())
}

/// One chat call in `protocol` as `key` on run `run` (none: no run header).
async fn chat(addr: SocketAddr, protocol: Protocol, key: &str, run: Option<&str>, text: &str) -> Reply {
    let bearer = format!("Bearer {key}");
    let mut headers = vec![("authorization", bearer.as_str()), ("x-api-key", key)];
    if let Some(run) = run {
        headers.push(("x-switchyard-run", run));
    }
    let body = chat_body(protocol, &format!("lane-{protocol}"), text, false);
    post(addr, &ingress_path(protocol, &format!("lane-{protocol}"), false), &headers, body).await
}

fn text(reply: &Reply) -> String {
    String::from_utf8_lossy(&reply.body).into_owned()
}

/// The runs the gateway's admin (or `token`) lists.
async fn runs(addr: SocketAddr, token: &str) -> Vec<Value> {
    let reply = admin_call(addr, "GET", "/api/v1/admin/runs", Some(token), None).await;
    assert_eq!(reply.status, 200, "{}", text(&reply));
    let page: Value = serde_json::from_slice(&reply.body).unwrap();
    page["runs"].as_array().unwrap().clone()
}

fn run_of<'a>(runs: &'a [Value], id: &str, key: &str) -> &'a Value {
    runs.iter().find(|r| r["id"] == id && r["key"] == key).unwrap_or_else(|| panic!("no run {id} of {key}: {runs:?}"))
}

#[tokio::test]
async fn the_call_cap_lets_the_last_call_finish_and_refuses_the_next_in_the_callers_protocol() {
    let addr = world().await;
    // acme has no runs: of its own: corp's apply.
    let (key, id) = key_in(addr, "acme").await;
    for turn in 0..2 {
        let reply = chat(addr, Protocol::OpenAi, &key, Some("job-7"), &format!("turn {turn}")).await;
        assert_eq!(reply.status, 200, "{}", text(&reply));
    }
    let refused = chat(addr, Protocol::OpenAi, &key, Some("job-7"), "turn 2").await;
    assert_eq!(refused.status, 429, "{}", text(&refused));
    let error: Value = serde_json::from_slice(&refused.body).unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("run `job-7`") && message.contains("`calls` limit"), "{message}");
    assert_eq!(
        (error["error"]["type"].as_str(), error["error"]["code"].as_str()),
        (Some("insufficient_quota"), Some("insufficient_quota")),
        "{error}"
    );
    // The same run from an Anthropic caller: its own error shape, still refused.
    let anthropic = chat(addr, Protocol::Anthropic, &key, Some("job-7"), "turn 3").await;
    assert_eq!(anthropic.status, 429, "{}", text(&anthropic));
    let error: Value = serde_json::from_slice(&anthropic.body).unwrap();
    assert_eq!(error["type"], "error", "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("run `job-7`"), "{error}");
    // Another run of the same key, and calls naming no run, go on.
    assert_eq!(chat(addr, Protocol::OpenAi, &key, Some("job-8"), "hi").await.status, 200);
    for _ in 0..3 {
        assert_eq!(chat(addr, Protocol::OpenAi, &key, None, "no run").await.status, 200);
    }
    let listed = runs(addr, ADMIN_TOKEN).await;
    let run = run_of(&listed, "job-7", &id);
    assert_eq!(run["state"], "limited(calls)", "{run}");
    assert_eq!(run["calls"], 2, "{run}");
    assert_eq!(run["group"], "acme");
    assert!(run["spent_usd"].as_f64().unwrap() > 0.0, "{run}");
    assert_eq!(run["limits"]["wall_ms"], 1_800_000, "{run}");
    assert_eq!(run_of(&listed, "job-8", &id)["state"], "open");
    assert_eq!(listed.len(), 2, "calls without a run id hold no run: {listed:?}");
}

#[tokio::test]
async fn the_usd_cap_is_reserved_like_a_budget_and_never_overshot() {
    let addr = world().await;
    let (key, id) = key_in(addr, "spendy").await;
    let bearer = format!("Bearer {key}");
    let headers = [("authorization", bearer.as_str()), ("x-switchyard-run", "spender")];
    // A small maximum: each call's worst case is a few cents.
    let body = |n: u64| {
        json!({"model": "lane-openai", "max_tokens": 5, "messages": [{"role": "user", "content": format!("call {n}")}]})
            .to_string()
    };
    let mut served = 0;
    let refusal = loop {
        let reply = post(addr, "/v1/chat/completions", &headers, body(served)).await;
        if reply.status != 200 {
            break reply;
        }
        served += 1;
        assert!(served < 200, "a $0.05 run never stopped");
    };
    assert!(served >= 1, "the first call fits: {}", text(&refusal));
    assert_eq!(refusal.status, 429, "{}", text(&refusal));
    let error: Value = serde_json::from_slice(&refusal.body).unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("run `spender`") && message.contains("`usd` limit of $0.05"), "{error}");
    let listed = runs(addr, ADMIN_TOKEN).await;
    let run = run_of(&listed, "spender", &id);
    assert_eq!(run["state"], "limited(usd)", "{run}");
    let spent = run["spent_usd"].as_f64().unwrap();
    assert!(spent > 0.0 && spent <= 0.05, "spent {spent} of a $0.05 cap");
    assert_eq!(run["calls"], served, "{run}");
    // Stopped stays stopped, however small the next call.
    assert_eq!(post(addr, "/v1/chat/completions", &headers, body(0)).await.status, 429);
}

#[tokio::test]
async fn the_loop_breaker_stops_identical_model_turns_and_tool_calls() {
    let addr = world().await;
    let (key, id) = key_in(addr, "loopy").await;
    // The same turn three times (its volatile members aside): the third
    // runs, the run is stopped after it.
    for _ in 0..3 {
        let reply = chat(addr, Protocol::OpenAi, &key, Some("looper"), "same thing again").await;
        assert_eq!(reply.status, 200, "{}", text(&reply));
    }
    let refused = chat(addr, Protocol::OpenAi, &key, Some("looper"), "something else").await;
    assert_eq!(refused.status, 429, "{}", text(&refused));
    let error: Value = serde_json::from_slice(&refused.body).unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("run `looper` is stopped: its loop breaker tripped (the same call 3 times)"), "{error}");
    // Turns that differ never trip it.
    for turn in 0..6 {
        let reply = chat(addr, Protocol::OpenAi, &key, Some("worker"), &format!("step {turn}")).await;
        assert_eq!(reply.status, 200, "{}", text(&reply));
    }
    // MCP: the session is the run; the same tool call three times trips it.
    let mut client = McpClient::open(addr, Some(&key)).await.unwrap();
    for n in 0..3 {
        let called = client.request("tools/call", json!({"name": "mock__echo", "arguments": {"text": "again"}})).await;
        assert_eq!(code(&called), 0, "call {n}: {called}");
    }
    let stopped = client.request("tools/call", json!({"name": "mock__echo", "arguments": {"text": "new"}})).await;
    assert_eq!(code(&stopped), LIMITED, "{stopped}");
    assert!(stopped["error"]["message"].as_str().unwrap().contains("loop breaker"), "{stopped}");
    let listed = runs(addr, ADMIN_TOKEN).await;
    assert_eq!(run_of(&listed, "looper", &id)["state"], "loop");
    assert_eq!(run_of(&listed, "worker", &id)["state"], "open");
    let session = listed.iter().find(|r| r["tool_calls"] == 3).unwrap_or_else(|| panic!("{listed:?}"));
    assert_eq!(session["state"], "loop", "{session}");
}

#[tokio::test]
async fn tool_calls_through_mcp_have_their_cap_and_share_the_run_with_model_calls() {
    let addr = world().await;
    let (key, id) = key_in(addr, "loopy").await;
    let mut client = McpClient::open(addr, Some(&key)).await.unwrap();
    let session = client.session().to_owned();
    for n in 0..3 {
        let called =
            client.request("tools/call", json!({"name": "mock__echo", "arguments": {"text": format!("n{n}")}})).await;
        assert_eq!(code(&called), 0, "call {n}: {called}");
    }
    let capped = client.request("tools/call", json!({"name": "mock__echo", "arguments": {"text": "n9"}})).await;
    assert_eq!(code(&capped), LIMITED, "{capped}");
    let message = capped["error"]["message"].as_str().unwrap();
    assert!(message.contains(&format!("run `{session}`")) && message.contains("`tool_calls` limit"), "{message}");
    // A model call naming the MCP session is the same run (and refused: it is stopped).
    let bearer = format!("Bearer {key}");
    let body = chat_body(Protocol::OpenAi, "lane-openai", "hi", false);
    let headers = [("authorization", bearer.as_str()), ("mcp-session-id", session.as_str())];
    let reply = post(addr, "/v1/chat/completions", &headers, body).await;
    assert_eq!(reply.status, 429, "{}", text(&reply));
    let listed = runs(addr, ADMIN_TOKEN).await;
    let run = run_of(&listed, &session, &id);
    assert_eq!((run["tool_calls"].as_u64(), run["state"].as_str()), (Some(3), Some("limited(tool_calls)")), "{run}");
}

#[tokio::test]
async fn the_kill_switch_stops_a_run_at_once_and_only_that_run() {
    let addr = world().await;
    let (key, id) = key_in(addr, "globex").await;
    assert_eq!(chat(addr, Protocol::OpenAi, &key, Some("doomed"), "one").await.status, 200);
    assert_eq!(chat(addr, Protocol::OpenAi, &key, Some("spared"), "one").await.status, 200);
    let killed = admin_call(addr, "POST", "/api/v1/admin/runs/doomed/kill", Some(ADMIN_TOKEN), None).await;
    assert_eq!(killed.status, 200, "{}", text(&killed));
    assert_eq!(serde_json::from_slice::<Value>(&killed.body).unwrap()["killed"], 1);
    let refused = chat(addr, Protocol::OpenAi, &key, Some("doomed"), "two").await;
    assert_eq!(refused.status, 429, "{}", text(&refused));
    let error: Value = serde_json::from_slice(&refused.body).unwrap();
    assert!(
        error["error"]["message"].as_str().unwrap().contains("run `doomed` is stopped: an operator killed it"),
        "{error}"
    );
    assert_eq!(chat(addr, Protocol::OpenAi, &key, Some("spared"), "two").await.status, 200);
    let listed = runs(addr, ADMIN_TOKEN).await;
    assert_eq!(run_of(&listed, "doomed", &id)["state"], "killed");
    // An unknown run is a 404; the kill is in the audit log.
    let missing = admin_call(addr, "POST", "/api/v1/admin/runs/nobody/kill", Some(ADMIN_TOKEN), None).await;
    assert_eq!(missing.status, 404);
    let audit = admin_call(addr, "GET", "/api/v1/admin/audit", Some(ADMIN_TOKEN), None).await;
    assert!(text(&audit).contains("/api/v1/admin/runs/doomed/kill"), "{}", text(&audit));
}

#[tokio::test]
async fn another_keys_run_of_the_same_id_is_its_own() {
    let addr = world().await;
    let (mine, my_id) = key_in(addr, "globex").await;
    let (theirs, their_id) = key_in(addr, "globex").await;
    for _ in 0..2 {
        assert_eq!(chat(addr, Protocol::OpenAi, &mine, Some("shared"), "hi").await.status, 200);
    }
    assert_eq!(chat(addr, Protocol::OpenAi, &mine, Some("shared"), "hi").await.status, 429);
    // Their run of the same name is untouched by mine, and a kill aimed at
    // my key's run leaves theirs open.
    assert_eq!(chat(addr, Protocol::OpenAi, &theirs, Some("shared"), "hi").await.status, 200);
    let path = format!("/api/v1/admin/runs/shared/kill?key={my_id}");
    assert_eq!(admin_call(addr, "POST", &path, Some(ADMIN_TOKEN), None).await.status, 200);
    assert_eq!(chat(addr, Protocol::OpenAi, &theirs, Some("shared"), "hi").await.status, 200);
    let listed = runs(addr, ADMIN_TOKEN).await;
    assert_eq!(run_of(&listed, "shared", &my_id)["state"], "killed");
    assert_eq!(run_of(&listed, "shared", &their_id)["calls"], 2);
    assert_eq!(run_of(&listed, "shared", &their_id)["state"], "open");
}

#[tokio::test]
async fn a_run_id_out_of_bounds_is_the_callers_400_and_a_key_without_runs_is_never_tracked() {
    let addr = world().await;
    let (key, _) = key_in(addr, "globex").await;
    let long = "r".repeat(257);
    let refused = chat(addr, Protocol::OpenAi, &key, Some(&long), "hi").await;
    assert_eq!(refused.status, 400, "{}", text(&refused));
    let error: Value = serde_json::from_slice(&refused.body).unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("x-switchyard-run"), "{error}");
    let anthropic = chat(addr, Protocol::Anthropic, &key, Some(&long), "hi").await;
    assert_eq!(anthropic.status, 400, "{}", text(&anthropic));
    assert_eq!(serde_json::from_slice::<Value>(&anthropic.body).unwrap()["error"]["type"], "invalid_request_error");
    // 256 bytes is a run id.
    assert_eq!(chat(addr, Protocol::OpenAi, &key, Some(&"r".repeat(256)), "hi").await.status, 200);
    // A group without runs: (none up its tree either) tracks nothing,
    // whatever the request says, a long id included.
    let (free, _) = key_in(addr, "free").await;
    for _ in 0..4 {
        assert_eq!(chat(addr, Protocol::OpenAi, &free, Some(&long), "hi").await.status, 200);
    }
    let listed = runs(addr, ADMIN_TOKEN).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    // The coding agents' own headers name runs too (Codex's `session_id`
    // before `x-switchyard-run`).
    let bearer = format!("Bearer {key}");
    let body = chat_body(Protocol::OpenAi, "lane-openai", "hi", false);
    let headers = [("authorization", bearer.as_str()), ("session_id", "codex-1"), ("x-switchyard-run", "other")];
    assert_eq!(post(addr, "/v1/chat/completions", &headers, body).await.status, 200);
    let listed = runs(addr, ADMIN_TOKEN).await;
    assert!(listed.iter().any(|r| r["id"] == "codex-1"), "{listed:?}");
    assert!(!listed.iter().any(|r| r["id"] == "other"), "{listed:?}");
    // Current Codex (0.171) sends `session-id` and `thread-id` instead: the
    // session is the run.
    let body = chat_body(Protocol::OpenAi, "lane-openai", "hi", false);
    let headers = [("authorization", bearer.as_str()), ("session-id", "codex-2"), ("thread-id", "thread-2")];
    assert_eq!(post(addr, "/v1/chat/completions", &headers, body).await.status, 200);
    let listed = runs(addr, ADMIN_TOKEN).await;
    assert!(listed.iter().any(|r| r["id"] == "codex-2"), "{listed:?}");
    assert!(!listed.iter().any(|r| r["id"] == "thread-2"), "{listed:?}");
    // Claude Code: its session header, else its session inside
    // `metadata.user_id` (JSON text); one past 256 bytes there is a 400 too.
    let claude = |user_id: String| {
        json!({"model": "lane-anthropic", "max_tokens": 16, "metadata": {"user_id": user_id},
            "messages": [{"role": "user", "content": "hi"}]})
        .to_string()
    };
    let headers = [("x-api-key", key.as_str()), ("anthropic-version", "2023-06-01")];
    let inside = json!({"device_id": "d", "session_id": "claude-session-1"}).to_string();
    assert_eq!(post(addr, "/v1/messages", &headers, claude(inside)).await.status, 200);
    let with_header = [headers[0], headers[1], ("x-claude-code-session-id", "claude-header-1")];
    let inside = json!({"session_id": "claude-session-2"}).to_string();
    assert_eq!(post(addr, "/v1/messages", &with_header, claude(inside)).await.status, 200);
    let long = json!({"session_id": "s".repeat(300)}).to_string();
    let refused = post(addr, "/v1/messages", &headers, claude(long)).await;
    assert_eq!(refused.status, 400, "{}", text(&refused));
    assert!(text(&refused).contains("metadata.user_id"), "{}", text(&refused));
    let ids: Vec<String> = runs(addr, ADMIN_TOKEN).await.iter().map(|r| r["id"].as_str().unwrap().to_owned()).collect();
    assert!(ids.contains(&"claude-session-1".to_owned()) && ids.contains(&"claude-header-1".to_owned()), "{ids:?}");
    assert!(!ids.contains(&"claude-session-2".to_owned()), "{ids:?}");
}

#[tokio::test]
async fn a_tenant_admin_lists_and_kills_only_its_subtrees_runs() {
    let addr = world().await;
    let (acme, acme_id) = key_in(addr, "acme").await;
    let (globex, globex_id) = key_in(addr, "globex").await;
    assert_eq!(chat(addr, Protocol::OpenAi, &acme, Some("task"), "hi").await.status, 200);
    assert_eq!(chat(addr, Protocol::OpenAi, &globex, Some("task"), "hi").await.status, 200);
    assert_eq!(chat(addr, Protocol::OpenAi, &globex, Some("globex-only"), "hi").await.status, 200);
    let seen = runs(addr, ACME).await;
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["key"], acme_id.as_str());
    assert!(!serde_json::to_string(&seen).unwrap().contains(&globex_id));
    // A run only globex has: a 404 worded as one that does not exist.
    let hidden = admin_call(addr, "POST", "/api/v1/admin/runs/globex-only/kill", Some(ACME), None).await;
    let missing = admin_call(addr, "POST", "/api/v1/admin/runs/nobody/kill", Some(ACME), None).await;
    assert_eq!((hidden.status.as_u16(), missing.status.as_u16()), (404, 404));
    assert_eq!(text(&hidden).replace("globex-only", "X"), text(&missing).replace("nobody", "X"));
    // A run id both have: acme's is killed, globex's is not.
    let killed = admin_call(addr, "POST", "/api/v1/admin/runs/task/kill", Some(ACME), None).await;
    assert_eq!(killed.status, 200, "{}", text(&killed));
    assert_eq!(serde_json::from_slice::<Value>(&killed.body).unwrap()["killed"], 1);
    assert_eq!(chat(addr, Protocol::OpenAi, &acme, Some("task"), "hi").await.status, 429);
    assert_eq!(chat(addr, Protocol::OpenAi, &globex, Some("task"), "hi").await.status, 200);
    let all = runs(addr, ADMIN_TOKEN).await;
    assert_eq!(run_of(&all, "task", &globex_id)["state"], "open");
    assert_eq!(run_of(&all, "task", &globex_id)["calls"], 2);
    assert_eq!(run_of(&all, "task", &acme_id)["state"], "killed");
}

/// An OpenAI upstream whose stream drips one word every 100 ms, 50 words,
/// then `[DONE]`.
async fn dripping_upstream() -> SocketAddr {
    use futures_util::StreamExt;
    let stream = || async {
        let words = futures_util::stream::iter(0..50).then(|n| async move {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let chunk = json!({"id": "d", "object": "chat.completion.chunk", "created": 0, "model": "drip",
                "choices": [{"index": 0, "delta": {"content": format!("w{n} ")}, "finish_reason": null}]});
            Ok::<_, std::io::Error>(bytes::Bytes::from(format!("data: {chunk}\n\n")))
        });
        let done = futures_util::stream::iter([Ok(bytes::Bytes::from_static(b"data: [DONE]\n\n"))]);
        let mut response = axum::response::Response::new(axum::body::Body::from_stream(words.chain(done)));
        response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
        response
    };
    spawn(axum::Router::new().route("/v1/chat/completions", axum::routing::post(stream))).await
}

#[tokio::test]
async fn a_kill_ends_a_stream_in_flight_with_the_callers_terminal_error() {
    use http_body_util::BodyExt;
    let upstream = dripping_upstream().await;
    let yaml = format!(
        "providers:\n  drip: {{ protocol: openai, base_url: \"http://{upstream}\" }}\nmodels:\n  dripping: {{ provider: drip }}\n\
         auth: {{ mode: keys }}\ngroups:\n  agents: {{ runs: {{ calls: 10 }} }}\n"
    );
    let (addr, _) = governed(&yaml).await;
    let (key, id) = key_in(addr, "agents").await;
    let body = json!({"model": "dripping", "stream": true, "messages": [{"role": "user", "content": "talk"}]});
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let request = http::Request::post(format!("http://{addr}/v1/chat/completions"))
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .header("x-switchyard-run", "streaming")
        .body(http_body_util::Full::new(bytes::Bytes::from(body.to_string())))
        .unwrap();
    let response = client.request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut seen = Vec::new();
    // A few words in, the operator kills the run.
    while !String::from_utf8_lossy(&seen).contains("w2 ") {
        let frame = body.frame().await.unwrap().unwrap();
        seen.extend_from_slice(&frame.into_data().unwrap_or_default());
    }
    let path = format!("/api/v1/admin/runs/streaming/kill?key={id}");
    assert_eq!(admin_call(addr, "POST", &path, Some(ADMIN_TOKEN), None).await.status, 200);
    let started = std::time::Instant::now();
    while let Some(frame) = body.frame().await {
        seen.extend_from_slice(&frame.unwrap().into_data().unwrap_or_default());
    }
    let text = String::from_utf8_lossy(&seen);
    // Ended at the next word, not the fiftieth: an error event, no [DONE].
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "{text}");
    assert!(!text.contains("w40 ") && !text.contains("[DONE]"), "{text}");
    let last = text.trim_end().rsplit("\n\n").next().unwrap();
    assert!(last.contains("\"error\"") && last.contains("run `streaming` is stopped: an operator killed it"), "{text}");
    // And its next call is refused.
    let bearer = format!("Bearer {key}");
    let again = json!({"model": "dripping", "messages": [{"role": "user", "content": "again"}]});
    let headers = [("authorization", bearer.as_str()), ("x-switchyard-run", "streaming")];
    assert_eq!(post(addr, "/v1/chat/completions", &headers, again.to_string()).await.status, 429);
}
