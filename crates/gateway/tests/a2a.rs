//! The A2A gateway (`/a2a/{agent}`) over real TCP, in front of the vendor
//! fake's agent: the card rewritten to point here, a message sent and
//! streamed, a task read and cancelled, and what is refused (no grant, a
//! spent budget, another key's task, an agent handing over another key's
//! task, a push URL inside the network), each as a JSON-RPC error in A2A's
//! shape and a ledger row of operation `a2a`; the same over the HTTP+JSON
//! binding (1.0's and 0.3's paths), with its errors and statuses, hostile
//! paths and bodies, and an agent that serves only HTTP+JSON.
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

const FORBIDDEN: i64 = -32040;
const LIMITED: i64 = -32029;
const TASK_NOT_FOUND: i64 = -32001;

/// A governed gateway fronting the fake agent as `research`, its text
/// parts screened for email addresses.
async fn fronting(extra: &str) -> SocketAddr {
    let upstream = mock_upstream().await;
    let yaml = format!(
        "auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n\
         policies:\n  pii: {{ detect: [email], action: mask }}\n\
         agents:\n  research: {{ url: \"http://{upstream}/a2a\", policies: [pii]{extra} }}\n"
    );
    governed(&yaml).await.0
}

async fn key(addr: SocketAddr, spec: Value) -> String {
    create_key(addr, spec).await["key"].as_str().unwrap().to_owned()
}

/// One JSON-RPC call as `bearer`: the HTTP status and the answer (a
/// stream's events, each an answer, as an array).
async fn rpc(addr: SocketAddr, bearer: &str, method: &str, params: Value, extra: &[(&str, &str)]) -> (u16, Value) {
    let auth = format!("Bearer {bearer}");
    let mut headers = vec![("authorization", auth.as_str()), ("content-type", "application/json")];
    headers.extend_from_slice(extra);
    let body = json!({"jsonrpc": "2.0", "id": "req-1", "method": method, "params": params});
    let reply = post(addr, "/a2a/research", &headers, body.to_string()).await;
    let streamed = reply.headers.get("content-type").and_then(|v| v.to_str().ok()) == Some("text/event-stream");
    let answer = if streamed {
        let text = String::from_utf8(reply.body.to_vec()).unwrap();
        Value::Array(
            text.split("\n\n")
                .filter_map(|event| event.strip_prefix("data: "))
                .map(|data| serde_json::from_str(data).unwrap())
                .collect(),
        )
    } else {
        serde_json::from_slice(&reply.body).unwrap_or(Value::Null)
    };
    (reply.status.as_u16(), answer)
}

fn message(id: &str, text: &str) -> Value {
    json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]}})
}

#[tokio::test]
async fn the_card_points_at_the_gateway_and_only_granted_keys_see_it() {
    let addr = fronting("").await;
    let granted = key(addr, json!({"name": "granted", "a2a": ["research"]})).await;
    let bare = key(addr, json!({"name": "bare"})).await;
    let path = "/a2a/research/.well-known/agent-card.json";
    let reply = get_with(addr, path, &[("authorization", &format!("Bearer {granted}"))]).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    let card: Value = serde_json::from_slice(&reply.body).unwrap();
    let at = format!("http://{addr}/a2a/research");
    // The agent's own two interfaces (JSON-RPC and HTTP+JSON) become the
    // gateway's, both bindings served there.
    assert_eq!(
        card["supportedInterfaces"],
        json!([
            {"url": at, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": at, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        ])
    );
    assert_eq!(card["name"], "Mock agent");
    assert!(card["securitySchemes"].get("agent-key").is_none() && card["securitySchemes"].get("switchyard").is_some());
    // Without the grant, or without a key: no agent.
    assert_eq!(get_with(addr, path, &[("authorization", &format!("Bearer {bare}"))]).await.status, 404);
    assert_eq!(get(addr, path).await.status, 401);
    assert_eq!(
        get_with(addr, "/a2a/nobody/.well-known/agent-card.json", &[("authorization", &format!("Bearer {granted}"))])
            .await
            .status,
        404
    );

    // Grants are set and read over the admin API; a grant that names no
    // agent shape is refused.
    let bad =
        admin_call(addr, "POST", "/api/v1/admin/keys", Some(ADMIN_TOKEN), Some(json!({"name": "x", "a2a": ["re*"]})))
            .await;
    assert_eq!(bad.status, 400, "{}", String::from_utf8_lossy(&bad.body));
    let created = create_key(addr, json!({"name": "later"})).await;
    let id = created["id"].as_str().unwrap();
    let patched = admin_call(
        addr,
        "PATCH",
        &format!("/api/v1/admin/keys/{id}"),
        Some(ADMIN_TOKEN),
        Some(json!({"a2a": ["research"]})),
    )
    .await;
    let view: Value = serde_json::from_slice(&patched.body).unwrap();
    assert_eq!(view["a2a"], json!(["research"]), "{view}");
    let later = created["key"].as_str().unwrap();
    assert_eq!(get_with(addr, path, &[("authorization", &format!("Bearer {later}"))]).await.status, 200);
}

#[tokio::test]
async fn send_stream_get_and_cancel_go_through_bound_to_their_key() {
    let addr = fronting("").await;
    let alice = key(addr, json!({"name": "alice", "a2a": ["research"]})).await;
    let bob = key(addr, json!({"name": "bob", "a2a": ["*"]})).await;

    // Sent: the task comes back, its text parts screened both ways, the
    // run identity carried to the agent.
    let run = [("x-switchyard-run", "run-42")];
    let (status, sent) = rpc(addr, &alice, "SendMessage", message("m1", "mail ana@example.com"), &run).await;
    assert_eq!(status, 200);
    let task = &sent["result"]["task"];
    assert_eq!(sent["id"], "req-1");
    assert_eq!(task["id"], "task-m1");
    let echoed = task["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(echoed.starts_with("echo: mail ") && !echoed.contains("ana@example.com"), "{echoed}");
    assert_eq!(task["metadata"]["run"], "run-42");
    let (_, contacts) = rpc(addr, &alice, "SendMessage", message("m2", "contacts"), &[]).await;
    let said = contacts["result"]["task"]["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(said.starts_with("write to ") && !said.contains("ops@example.com"), "{said}");

    // Streamed: every event relayed, the task bound from the first.
    let (_, events) = rpc(addr, &alice, "SendStreamingMessage", message("m3", "stream me"), &run).await;
    let events = events.as_array().unwrap();
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!(events[0]["result"]["task"]["id"], "task-m3");
    assert_eq!(events[2]["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"], "echo: stream me");
    assert_eq!(events[3]["result"]["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert!(events.iter().all(|e| e["id"] == "req-1"));

    // A message continuing a task carries the task to the agent as the run.
    let continuing = json!({"message": {"messageId": "m4", "taskId": "task-m1", "parts": [{"text": "more"}]}});
    let (_, continued) = rpc(addr, &alice, "SendMessage", continuing, &run).await;
    assert_eq!(continued["result"]["task"]["metadata"], json!({"run": "run-42", "a2a_task": "task-m1"}), "{continued}");

    // Read and cancelled by its owner; another key finds no such task,
    // and continuing it is refused too.
    let (_, read) = rpc(addr, &alice, "GetTask", json!({"id": "task-m1"}), &[]).await;
    assert_eq!(read["result"]["id"], "task-m1", "{read}");
    let (_, cancelled) = rpc(addr, &alice, "CancelTask", json!({"id": "task-m3"}), &[]).await;
    assert_eq!(cancelled["result"]["status"]["state"], "TASK_STATE_CANCELED", "{cancelled}");
    for (method, params) in [
        ("GetTask", json!({"id": "task-m1"})),
        ("CancelTask", json!({"id": "task-m1"})),
        ("SendMessage", json!({"message": {"messageId": "b1", "taskId": "task-m1", "parts": [{"text": "hi"}]}})),
        ("GetTask", json!({"id": "task-never-made"})),
    ] {
        let (status, answer) = rpc(addr, &bob, method, params, &[]).await;
        assert_eq!((status, answer["error"]["code"].as_i64()), (200, Some(TASK_NOT_FOUND)), "{method}: {answer}");
    }
    // An agent that answers bob with alice's task does not hand it over.
    let (_, stolen) = rpc(addr, &bob, "SendMessage", message("b2", "steal task-m1"), &[]).await;
    assert_eq!(stolen["error"]["code"], -32006, "{stolen}");
    assert!(!stolen.to_string().contains("echo"), "{stolen}");
    // Listing every caller's tasks is not relayed; a push URL inside the
    // network is refused, a public one passed on.
    let (_, listed) = rpc(addr, &alice, "ListTasks", json!({}), &[]).await;
    assert_eq!(listed["error"]["code"], -32004, "{listed}");
    for url in ["http://169.254.169.254/latest", "https://10.0.0.1/hook", "http://localhost:9/hook"] {
        let (_, pushed) =
            rpc(addr, &alice, "CreateTaskPushNotificationConfig", json!({"taskId": "task-m1", "url": url}), &[]).await;
        assert_eq!(pushed["error"]["code"], -32602, "{url}: {pushed}");
    }
    let public = json!({"taskId": "task-m1", "url": "https://93.184.215.14/hook"});
    let (_, pushed) = rpc(addr, &alice, "CreateTaskPushNotificationConfig", public, &[]).await;
    assert_eq!(pushed["result"]["url"], "https://93.184.215.14/hook", "{pushed}");

    // A ledger row per call, operation a2a, naming its task.
    let rows = ledger_rows(addr, "operation=a2a&key=alice", 6).await;
    let send = rows.iter().find(|r| r["notes"]["tool"]["task"] == "task-m2").unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!((send["pool"].as_str(), send["model"].as_str()), (Some("research"), Some("SendMessage")), "{send}");
    assert!(send["notes"]["tool"]["bytes_out"].as_u64().unwrap() > 100, "{send}");
    assert!(send.to_string().contains("pii/"), "the guardrail's decision on the reply is on the row: {send}");
    let streamed = rows.iter().find(|r| r["model"] == "SendStreamingMessage").unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(
        (streamed["notes"]["tool"]["task"].as_str(), streamed["stream"].as_bool()),
        (Some("task-m3"), Some(true)),
        "{streamed}"
    );
    assert_eq!(send["stream"], false, "{send}");
}

#[tokio::test]
async fn a2a_0_3_callers_are_served_as_well() {
    let addr = fronting("").await;
    let alice = key(addr, json!({"name": "alice", "a2a": ["research"]})).await;
    let bob = key(addr, json!({"name": "bob", "a2a": ["research"]})).await;
    let old = |id: &str, text: &str| json!({"message": {"kind": "message", "messageId": id, "role": "user", "parts": [{"kind": "text", "text": text}]}});
    let (_, sent) = rpc(addr, &alice, "message/send", old("o1", "mail ana@example.com"), &[]).await;
    assert_eq!(
        (sent["result"]["kind"].as_str(), sent["result"]["id"].as_str()),
        (Some("task"), Some("task-o1")),
        "{sent}"
    );
    let said = sent["result"]["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(
        said.starts_with("echo: mail ") && !said.contains("ana@example.com"),
        "text parts of 0.3 are screened: {said}"
    );
    let (_, contacts) = rpc(addr, &alice, "message/send", old("o2", "contacts"), &[]).await;
    assert!(!contacts.to_string().contains("ops@example.com"), "{contacts}");
    // The task a 0.3 answer names is bound to its key as a 1.0 one is.
    let (_, read) = rpc(addr, &alice, "tasks/get", json!({"id": "task-o1"}), &[]).await;
    assert_eq!(read["result"]["id"], "task-o1", "{read}");
    let (_, refused) = rpc(addr, &bob, "tasks/get", json!({"id": "task-o1"}), &[]).await;
    assert_eq!(refused["error"]["code"], TASK_NOT_FOUND, "{refused}");
    let (_, listed) = rpc(addr, &alice, "tasks/list", json!({}), &[]).await;
    assert_eq!(listed["error"]["code"], -32004, "{listed}");
    let push = json!({"taskId": "task-o1", "pushNotificationConfig": {"url": "http://127.0.0.1:9/hook"}});
    let (_, pushed) = rpc(addr, &alice, "tasks/pushNotificationConfig/set", push, &[]).await;
    assert_eq!(pushed["error"]["code"], -32602, "{pushed}");
}

#[tokio::test]
async fn a_key_without_the_grant_or_budget_is_refused_in_a2as_error_shape() {
    let addr = fronting(", price_per_task: 0.001").await;
    let bare = key(addr, json!({"name": "bare"})).await;
    let other = key(addr, json!({"name": "other", "a2a": ["writer"]})).await;
    for refused in [&bare, &other] {
        let (status, answer) = rpc(addr, refused, "SendMessage", message("x", "hi"), &[]).await;
        assert_eq!(status, 200);
        assert_eq!(answer["error"]["code"], FORBIDDEN, "{answer}");
        assert_eq!(answer["error"]["data"][0]["reason"], "PERMISSION_DENIED", "{answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains("may not call agent `research`"), "{answer}");
    }
    // A budget of one cent: the first task reports 5 cents, the next is refused.
    let spender =
        key(addr, json!({"name": "spender", "a2a": ["research"], "budget": {"usd": 0.01, "window": "1d"}})).await;
    let costly = json!({"message": {"messageId": "c1", "parts": [{"text": "work"}], "metadata": {"charge_usd": 0.05}}});
    let (_, first) = rpc(addr, &spender, "SendMessage", costly, &[]).await;
    assert_eq!(first["result"]["task"]["id"], "task-c1", "{first}");
    let rows = ledger_rows(addr, "operation=a2a&key=spender", 1).await;
    assert_eq!(rows[0]["cost_nano"], 50_000_000, "the agent's reported cost: {}", rows[0]);
    let mut refused = Value::Null;
    for _ in 0..50 {
        refused = rpc(addr, &spender, "SendStreamingMessage", message("c2", "more"), &[]).await.1;
        if refused.get("error").is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(refused["error"]["code"], LIMITED, "{refused}");
    let wait = refused["error"]["data"][0]["metadata"]["retry_after"].as_str().unwrap_or_else(|| panic!("{refused}"));
    let auth = format!("Bearer {spender}");
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": message("c3", "again")});
    let raw = post(addr, "/a2a/research", &[("authorization", auth.as_str())], body.to_string()).await;
    assert_eq!(
        raw.headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::parse::<u64>)
            .and_then(Result::ok)
            .map(|s| s > 0),
        Some(true),
        "{:?}",
        raw.headers
    );
    assert!(wait.parse::<u64>().is_ok_and(|s| s > 0), "{wait}");
    assert_eq!(refused["error"]["data"][0]["reason"], "QUOTA_EXCEEDED", "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("is exhausted"), "{refused}");
    let refusals = ledger_rows(addr, "operation=a2a&status=403", 2).await;
    assert!(refusals.len() >= 2, "{refusals:?}");
}

/// An agent that misbehaves by path: stalls, answers what is not JSON-RPC,
/// names a task id past any bound, fails with its own error, or stalls a
/// stream after its first event.
async fn hostile_agent() -> SocketAddr {
    use axum::routing::post;
    let sse = |body: String| {
        let mut response = axum::response::Response::new(axum::body::Body::from(body));
        response.headers_mut().insert("content-type", http::HeaderValue::from_static("text/event-stream"));
        response
    };
    let router = axum::Router::new()
        .route(
            "/stall",
            post(|| async {
                tokio::time::sleep(std::time::Duration::from_secs(30)).await;
                "{}"
            }),
        )
        .route("/garbage", post(|| async { "<html>not json</html>" }))
        .route(
            "/long-task",
            post(|| async { json!({"jsonrpc": "2.0", "id": "x", "result": {"task": {"id": "t".repeat(5000)}}}).to_string() }),
        )
        .route(
            "/fails",
            post(|| async {
                json!({"jsonrpc": "2.0", "id": "someone-else", "error": {"code": -32005, "message": "Incompatible content types"}})
                    .to_string()
            }),
        )
        .route(
            "/stream-stall",
            post(move || async move {
                let first = json!({"jsonrpc": "2.0", "id": "x", "result": {"task": {"id": "s1", "status": {"state": "TASK_STATE_WORKING"}}}});
                let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::convert::Infallible>>(1);
                tokio::spawn(async move {
                    let _ = tx.send(Ok(bytes::Bytes::from(format!("data: {first}\n\n")))).await;
                    tokio::time::sleep(std::time::Duration::from_secs(30)).await;
                    drop(tx);
                });
                let mut rx = rx;
                let body = axum::body::Body::from_stream(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)));
                let mut response = axum::response::Response::new(body);
                response.headers_mut().insert("content-type", http::HeaderValue::from_static("text/event-stream"));
                response
            }),
        )
        .route("/bad-stream", post(move || async move { sse("data: {not json\n\n".to_owned()) }));
    spawn(router).await
}

#[tokio::test]
async fn an_agent_that_stalls_or_lies_gets_no_further_than_an_error() {
    let agent = hostile_agent().await;
    let yaml = format!(
        "auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\nagents:\n{}",
        ["stall", "garbage", "long-task", "fails", "stream-stall", "bad-stream"]
            .iter()
            .map(|path| format!("  {path}: {{ url: \"http://{agent}/{path}\", timeout: 500ms }}\n"))
            .collect::<String>()
    );
    let addr = governed(&yaml).await.0;
    let caller = key(addr, json!({"name": "caller", "a2a": ["*"]})).await;
    let call = |agent: &'static str, method: &'static str| {
        let caller = caller.clone();
        async move {
            let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": message("h1", "hi")});
            let headers = [("authorization", format!("Bearer {caller}")), ("content-type", "application/json".into())];
            let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            let started = std::time::Instant::now();
            let reply = post(addr, &format!("/a2a/{agent}"), &headers, body.to_string()).await;
            (reply.status.as_u16(), String::from_utf8(reply.body.to_vec()).unwrap(), started.elapsed())
        }
    };
    let (status, body, took) = call("stall", "SendMessage").await;
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (status, answer["error"]["code"].as_i64(), answer["id"].as_i64()),
        (200, Some(-32603), Some(7)),
        "{body}"
    );
    assert!(took < std::time::Duration::from_secs(5), "bounded by the agent's timeout: {took:?}");
    let (_, body, _) = call("garbage", "SendMessage").await;
    assert!(body.contains("-32603") && !body.contains("<html>"), "{body}");
    let (_, body, _) = call("long-task", "SendMessage").await;
    assert!(body.contains("-32006") && !body.contains("ttttt"), "{body}");
    // The agent's own error passes, with the caller's id.
    let (_, body, _) = call("fails", "SendMessage").await;
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        answer,
        json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32005, "message": "Incompatible content types"}})
    );
    // A stream that stalls after its first event, or sends one that is
    // not JSON: what came is relayed, then an error event ends it.
    for (agent, first) in [("stream-stall", true), ("bad-stream", false)] {
        let (_, body, took) = call(agent, "SendStreamingMessage").await;
        let events: Vec<Value> = body
            .split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        assert_eq!(events.len(), 1 + usize::from(first), "{agent}: {body}");
        assert_eq!(events.last().unwrap()["error"]["code"], -32603, "{agent}: {body}");
        assert!(took < std::time::Duration::from_secs(5), "{agent}: {took:?}");
    }
    let rows = ledger_rows(addr, "operation=a2a&status=502", 5).await;
    assert!(rows.len() >= 5, "{rows:?}");
}

#[tokio::test]
async fn in_a_fleet_a_task_made_on_one_instance_is_its_keys_on_the_other() {
    let Ok(redis) = std::env::var("SWITCHYARD_TEST_REDIS_URL") else {
        eprintln!("SWITCHYARD_TEST_REDIS_URL is not set: the fleet case is skipped (scripts/test.sh starts Redis)");
        return;
    };
    let upstream = mock_upstream().await;
    let yaml = format!("agents:\n  research: {{ url: \"http://{upstream}/a2a\" }}\n");
    let (one, _) = fleet_state_gateway(&yaml, &redis).await;
    let (two, _) = fleet_state_gateway(&yaml, &redis).await;
    let call = |addr: SocketAddr, method: &'static str, params: Value| async move {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let reply = post(addr, "/a2a/research", &[("content-type", "application/json")], body.to_string()).await;
        serde_json::from_slice::<Value>(&reply.body).unwrap()
    };
    // Redis outlives a run: ids of this run's own.
    let id = format!("{:x}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos());
    let sent = call(one, "SendMessage", message(&id, "hi")).await;
    let task = format!("task-{id}");
    assert_eq!(sent["result"]["task"]["id"], task, "{sent}");
    let read = call(two, "GetTask", json!({"id": task})).await;
    assert_eq!(read["result"]["id"], task, "bound in Redis, read on the other instance: {read}");
    let unknown = call(two, "GetTask", json!({"id": format!("task-{id}-never")})).await;
    assert_eq!(unknown["error"]["code"], TASK_NOT_FOUND, "{unknown}");
}

/// An A2A message counts as a tool call of the caller's agent run (its
/// `x-switchyard-run`, by the runs' header order): past the run's cap the
/// next is refused in A2A's shape naming the run and the limit, while
/// another run of the same key and a call naming no run go on.
#[tokio::test]
async fn a_message_counts_on_its_callers_run() {
    let upstream = mock_upstream().await;
    let yaml = format!(
        "auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n\
         groups:\n  crew: {{ runs: {{ tool_calls: 2 }} }}\n\
         agents:\n  research: {{ url: \"http://{upstream}/a2a\" }}\n"
    );
    let addr = governed(&yaml).await.0;
    let agent = key(addr, json!({"name": "planner", "group": "crew", "a2a": ["research"]})).await;
    let run = [("x-switchyard-run", "plan-1")];
    for (n, text) in ["first", "second"].iter().enumerate() {
        let (status, answer) = rpc(addr, &agent, "SendMessage", message(&format!("m{n}"), text), &run).await;
        assert_eq!((status, answer.get("error")), (200, None), "{answer}");
    }
    let (_, refused) = rpc(addr, &agent, "SendMessage", message("m3", "third"), &run).await;
    assert_eq!(refused["error"]["code"], LIMITED, "{refused}");
    assert_eq!(refused["error"]["data"][0]["reason"], "QUOTA_EXCEEDED", "{refused}");
    let said = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("run `plan-1`") && said.contains("`tool_calls` limit"), "{said}");

    let other = [("x-switchyard-run", "plan-2")];
    let (_, fresh) = rpc(addr, &agent, "SendMessage", message("m4", "fourth"), &other).await;
    assert!(fresh.get("error").is_none(), "another run of the same key is its own: {fresh}");
    let (_, untracked) = rpc(addr, &agent, "SendMessage", message("m5", "fifth"), &[]).await;
    assert!(untracked.get("error").is_none(), "a call naming no run is not a run's: {untracked}");

    // A run id no run can have (257 bytes) is refused, not cut to another run's.
    let long = "r".repeat(257);
    let (_, bad) = rpc(addr, &agent, "SendMessage", message("m6", "sixth"), &[("x-switchyard-run", &long)]).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(bad["error"]["message"].as_str().unwrap_or_default().contains("x-switchyard-run"), "{bad}");

    let listed = admin_call(addr, "GET", "/api/v1/admin/runs", Some(ADMIN_TOKEN), None).await;
    let runs: Value = serde_json::from_slice(&listed.body).unwrap();
    let runs = runs["runs"].as_array().or(runs.as_array()).cloned().unwrap_or_default();
    let plan = runs.iter().find(|r| r["id"] == "plan-1").unwrap_or_else(|| panic!("{runs:?}"));
    assert_eq!((plan["tool_calls"].as_u64(), plan["state"].as_str()), (Some(2), Some("limited(tool_calls)")), "{plan}");
}

/// One HTTP+JSON call as `bearer` (none: no key): the status, the
/// content type, and the body read as JSON (a stream's events, each with
/// its `event:` name, as an array of `[name, data]`).
async fn rest(addr: SocketAddr, bearer: Option<&str>, method: &str, path: &str, body: &str) -> (u16, Value) {
    rest_with(addr, bearer, method, path, body, &[]).await
}

/// [`rest`] with `extra` headers.
async fn rest_with(
    addr: SocketAddr,
    bearer: Option<&str>,
    method: &str,
    path: &str,
    body: &str,
    extra: &[(&str, &str)],
) -> (u16, Value) {
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    let client: Client<_, Full<bytes::Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut request = http::Request::builder().method(method).uri(format!("http://{addr}{path}"));
    if let Some(bearer) = bearer {
        request = request.header("authorization", format!("Bearer {bearer}"));
    }
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let request = request
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(Full::new(bytes::Bytes::from(body.to_owned())))
        .unwrap();
    let response = client.request(request).await.unwrap();
    let status = response.status().as_u16();
    let streamed = response.headers().get("content-type").and_then(|v| v.to_str().ok()) == Some("text/event-stream");
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    if !streamed {
        return (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null));
    }
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let mut events = Vec::new();
    for event in text.split("\n\n").filter(|e| !e.trim().is_empty()) {
        let name = event.lines().find_map(|l| l.strip_prefix("event: ")).unwrap_or("message");
        let data = event.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
        events.push(json!([name, serde_json::from_str::<Value>(data).unwrap()]));
    }
    (status, Value::Array(events))
}

fn rest_message(id: &str, text: &str) -> String {
    json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]}}).to_string()
}

#[tokio::test]
async fn the_http_json_binding_sends_streams_reads_and_cancels_under_the_same_checks() {
    let addr = fronting("").await;
    let alice = key(addr, json!({"name": "alice", "a2a": ["research"]})).await;
    let bob = key(addr, json!({"name": "bob", "a2a": ["research"]})).await;

    // The card offers both bindings at the gateway.
    let card =
        get_with(addr, "/a2a/research/.well-known/agent-card.json", &[("authorization", &format!("Bearer {alice}"))])
            .await;
    let card: Value = serde_json::from_slice(&card.body).unwrap();
    let at = format!("http://{addr}/a2a/research");
    assert_eq!(
        card["supportedInterfaces"],
        json!([
            {"url": at, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": at, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        ])
    );

    // Sent: the binding's body (no JSON-RPC envelope), text screened.
    let (status, sent) =
        rest(addr, Some(&alice), "POST", "/a2a/research/message:send", &rest_message("r1", "mail ana@example.com"))
            .await;
    assert_eq!(status, 200, "{sent}");
    assert!(sent.get("jsonrpc").is_none() && sent.get("result").is_none(), "{sent}");
    assert_eq!(sent["task"]["id"], "task-r1", "{sent}");
    let echoed = sent["task"]["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(echoed.starts_with("echo: mail ") && !echoed.contains("ana@example.com"), "{echoed}");

    // Streamed: each event the bare StreamResponse.
    let (status, events) =
        rest(addr, Some(&alice), "POST", "/a2a/research/message:stream", &rest_message("r2", "stream me")).await;
    assert_eq!(status, 200);
    let events = events.as_array().unwrap();
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!(
        events[0],
        json!(["message", {"task": {"id": "task-r2", "contextId": "ctx-r2", "status": {"state": "TASK_STATE_SUBMITTED"}}}])
    );
    assert_eq!(events[3][1]["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");

    // Read (with the query's history length), and cancelled, by the owner.
    let (status, read) = rest(addr, Some(&alice), "GET", "/a2a/research/tasks/task-r1?historyLength=2", "").await;
    assert_eq!((status, read["id"].as_str()), (200, Some("task-r1")), "{read}");
    let (status, cancelled) = rest(addr, Some(&alice), "POST", "/a2a/research/tasks/task-r2:cancel", "").await;
    assert_eq!((status, cancelled["status"]["state"].as_str()), (200, Some("TASK_STATE_CANCELED")), "{cancelled}");

    // Another key finds none of them: 404 in the binding's shape, with
    // A2A's reason (what the SDK maps to TaskNotFoundError). A task made
    // over JSON-RPC is the same task over HTTP+JSON.
    let (_, rpc_made) = rpc(addr, &alice, "SendMessage", message("r3", "hi"), &[]).await;
    assert_eq!(rpc_made["result"]["task"]["id"], "task-r3");
    for (method, path, body) in [
        ("GET", "/a2a/research/tasks/task-r1", String::new()),
        ("POST", "/a2a/research/tasks/task-r1:cancel", String::new()),
        ("POST", "/a2a/research/tasks/task-r3:subscribe", String::new()),
        ("GET", "/a2a/research/tasks/task-r3/pushNotificationConfigs", String::new()),
        ("DELETE", "/a2a/research/tasks/task-r3/pushNotificationConfigs/c1", String::new()),
        (
            "POST",
            "/a2a/research/message:send",
            json!({"message": {"messageId": "b1", "taskId": "task-r1", "parts": [{"text": "hi"}]}}).to_string(),
        ),
    ] {
        let (status, refused) = rest(addr, Some(&bob), method, path, &body).await;
        assert_eq!(status, 404, "{method} {path}: {refused}");
        assert_eq!(refused["error"]["status"], "NOT_FOUND", "{refused}");
        assert_eq!(refused["error"]["details"][0]["reason"], "TASK_NOT_FOUND", "{refused}");
    }
    let (status, own) = rest(addr, Some(&alice), "GET", "/a2a/research/tasks/task-r3", "").await;
    assert_eq!((status, own["id"].as_str()), (200, Some("task-r3")), "{own}");

    // Push configs: one inside the network is refused, a public one passed on.
    for url in ["http://169.254.169.254/latest", "http://127.0.0.1:9/hook", "http://[::1]/x"] {
        let body = json!({"taskId": "task-r1", "url": url}).to_string();
        let (status, refused) =
            rest(addr, Some(&alice), "POST", "/a2a/research/tasks/task-r1/pushNotificationConfigs", &body).await;
        assert_eq!(status, 400, "{url}: {refused}");
        assert_eq!(refused["error"]["details"][0]["reason"], "INVALID_PARAMS", "{refused}");
        assert!(refused["error"]["message"].as_str().unwrap().contains("push notification url refused"), "{refused}");
    }
    let body = json!({"url": "https://93.184.215.14/hook"}).to_string();
    let (status, pushed) =
        rest(addr, Some(&alice), "POST", "/a2a/research/tasks/task-r1/pushNotificationConfigs", &body).await;
    assert_eq!((status, pushed["taskId"].as_str()), (200, Some("task-r1")), "the path names the task: {pushed}");

    // Listing every caller's tasks and the extended card are not offered.
    let (status, listed) = rest(addr, Some(&alice), "GET", "/a2a/research/tasks", "").await;
    assert_eq!((status, listed["error"]["details"][0]["reason"].as_str()), (400, Some("UNSUPPORTED_OPERATION")));
    let (status, _) = rest(addr, Some(&alice), "GET", "/a2a/research/extendedAgentCard", "").await;
    assert_eq!(status, 400);

    // A row per call, as JSON-RPC's: the REST send is named by its method.
    let rows = ledger_rows(addr, "operation=a2a&key=alice", 8).await;
    let send = rows.iter().find(|r| r["notes"]["tool"]["task"] == "task-r1" && r["model"] == "SendMessage");
    let send = send.unwrap_or_else(|| panic!("{rows:?}"));
    assert!(send.to_string().contains("pii/"), "{send}");
    let streamed = rows.iter().find(|r| r["model"] == "SendStreamingMessage").unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(streamed["notes"]["tool"]["task"], "task-r2", "{streamed}");
}

#[tokio::test]
async fn http_json_refusals_and_hostile_requests_get_the_bindings_errors() {
    let addr = fronting(", price_per_task: 0.001").await;
    let bare = key(addr, json!({"name": "bare"})).await;
    let alice = key(addr, json!({"name": "alice", "a2a": ["research"]})).await;
    let send = "/a2a/research/message:send";

    // No key, no grant, no such agent.
    let (status, refused) = rest(addr, None, "POST", send, &rest_message("x", "hi")).await;
    assert_eq!((status, refused["error"]["status"].as_str()), (401, Some("UNAUTHENTICATED")), "{refused}");
    assert_eq!(refused["error"]["details"][0]["reason"], "UNAUTHENTICATED", "{refused}");
    let (status, refused) = rest(addr, Some("sy-not-a-key"), "POST", send, &rest_message("x", "hi")).await;
    assert_eq!(status, 401, "{refused}");
    assert!(
        refused["error"]["message"].as_str().unwrap().contains("invalid API key"),
        "the authenticator's: {refused}"
    );
    let (status, refused) = rest(addr, Some(&bare), "POST", send, &rest_message("x", "hi")).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["error"]["details"][0]["reason"], "PERMISSION_DENIED", "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("may not call agent `research`"), "{refused}");
    let (status, _) = rest(addr, Some(&alice), "POST", "/a2a/nobody/message:send", &rest_message("x", "hi")).await;
    assert_eq!(status, 404);

    // Hostile bodies and paths: refused before the agent is asked.
    let cases: [(&str, &str, String, u16, &str); 8] = [
        ("POST", send, "{\"message\": ".into(), 400, "INVALID_REQUEST"),
        ("POST", send, "[1, 2]".into(), 400, "INVALID_REQUEST"),
        ("POST", send, String::new(), 400, "INVALID_REQUEST"),
        ("GET", "/a2a/research/tasks/a%2F..%2Fadmin", String::new(), 400, "INVALID_REQUEST"),
        ("GET", "/a2a/research/tasks/..", String::new(), 400, "INVALID_REQUEST"),
        ("GET", "/a2a/research/tasks/../../admin", String::new(), 400, "INVALID_REQUEST"),
        ("PUT", "/a2a/research/tasks/t", String::new(), 405, ""),
        ("GET", "/a2a/research/nothing/here", String::new(), 404, "METHOD_NOT_FOUND"),
    ];
    for (method, path, body, want, reason) in cases {
        let (status, refused) = rest(addr, Some(&alice), method, path, &body).await;
        assert_eq!(status, want, "{method} {path}: {refused}");
        if !reason.is_empty() {
            assert_eq!(refused["error"]["details"][0]["reason"], reason, "{path}: {refused}");
        }
    }
    let huge = format!("{{\"message\": {{\"parts\": [{{\"text\": \"{}\"}}]}}}}", "a".repeat(10 << 20));
    let (status, refused) = rest(addr, Some(&alice), "POST", send, &huge).await;
    assert_eq!(status, 413, "{refused}");
    // None reached the agent: alice has no row of a call it answered.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let rows = ledger_rows(addr, "operation=a2a&key=alice", 0).await;
    assert!(rows.iter().all(|r| r["status"] != 200), "{rows:?}");

    // A budget of one cent: the first task reports 5 cents, the next is
    // refused with 429, the reason and a Retry-After's wait.
    let spender =
        key(addr, json!({"name": "spender", "a2a": ["research"], "budget": {"usd": 0.01, "window": "1d"}})).await;
    let costly = json!({"message": {"messageId": "c1", "parts": [{"text": "work"}], "metadata": {"charge_usd": 0.05}}});
    let (status, first) = rest(addr, Some(&spender), "POST", send, &costly.to_string()).await;
    assert_eq!((status, first["task"]["id"].as_str()), (200, Some("task-c1")), "{first}");
    let mut refused = (0, Value::Null);
    for _ in 0..50 {
        refused = rest(addr, Some(&spender), "POST", "/a2a/research/message:stream", &rest_message("c2", "more")).await;
        if refused.0 != 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (status, refused) = refused;
    assert_eq!(status, 429, "{refused}");
    assert_eq!(refused["error"]["status"], "RESOURCE_EXHAUSTED", "{refused}");
    assert_eq!(refused["error"]["details"][0]["reason"], "QUOTA_EXCEEDED", "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("is exhausted"), "{refused}");
}

#[tokio::test]
async fn an_agent_serving_only_http_json_is_spoken_to_in_it() {
    let upstream = mock_upstream().await;
    let yaml = format!(
        "auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n\
         policies:\n  pii: {{ detect: [email], action: mask }}\n\
         agents:\n  research: {{ url: \"http://{upstream}/a2a-rest\", policies: [pii] }}\n"
    );
    let addr = governed(&yaml).await.0;
    let alice = key(addr, json!({"name": "alice", "a2a": ["research"]})).await;
    let bob = key(addr, json!({"name": "bob", "a2a": ["research"]})).await;

    // A JSON-RPC caller: the agent is asked over HTTP+JSON, and its answer
    // comes back as JSON-RPC, screened, the run identity carried.
    let run = [("x-switchyard-run", "run-9")];
    let (status, sent) = rpc(addr, &alice, "SendMessage", message("h1", "contacts"), &run).await;
    assert_eq!(status, 200);
    let task = &sent["result"]["task"];
    assert_eq!(task["metadata"]["binding"], "HTTP+JSON", "{sent}");
    assert_eq!(task["metadata"]["path"], "/message:send", "{sent}");
    assert_eq!(task["metadata"]["run"], "run-9", "{sent}");
    let said = task["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(said.starts_with("write to ") && !said.contains("ops@example.com"), "{said}");
    let (_, events) = rpc(addr, &alice, "SendStreamingMessage", message("h2", "go"), &[]).await;
    let events = events.as_array().unwrap();
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!(events[3]["result"]["statusUpdate"]["metadata"]["binding"], "HTTP+JSON", "{events:?}");
    let (_, read) = rpc(addr, &alice, "GetTask", json!({"id": "task-h1"}), &[]).await;
    assert_eq!(read["result"]["id"], "task-h1", "{read}");

    // An HTTP+JSON caller too; another key still finds nothing.
    let (status, cancelled) = rest(addr, Some(&alice), "POST", "/a2a/research/tasks/task-h2:cancel", "").await;
    assert_eq!((status, cancelled["status"]["state"].as_str()), (200, Some("TASK_STATE_CANCELED")), "{cancelled}");
    let (status, _) = rest(addr, Some(&bob), "GET", "/a2a/research/tasks/task-h1", "").await;
    assert_eq!(status, 404);
    let (_, refused) = rpc(addr, &bob, "GetTask", json!({"id": "task-h1"}), &[]).await;
    assert_eq!(refused["error"]["code"], TASK_NOT_FOUND, "{refused}");

    // What the agent refuses comes back as A2A's error: a route it does
    // not serve is its 404, read back as method-not-found.
    let (_, unknown) =
        rpc(addr, &alice, "GetTaskPushNotificationConfig", json!({"taskId": "task-h1", "id": "c"}), &[]).await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
}

#[tokio::test]
async fn a2a_0_3_http_json_callers_speak_protobuf_json() {
    let addr = fronting("").await;
    let alice = key(addr, json!({"name": "alice", "a2a": ["research"]})).await;
    let bob = key(addr, json!({"name": "bob", "a2a": ["research"]})).await;
    // What a2a-sdk's 0.3 REST client sends: proto field names, `content`.
    let body =
        json!({"request": {"message_id": "v1", "role": "ROLE_USER", "content": [{"text": "mail ana@example.com"}]}});
    let (status, sent) = rest(addr, Some(&alice), "POST", "/a2a/research/v1/message:send", &body.to_string()).await;
    assert_eq!(status, 200, "{sent}");
    let task = &sent["task"];
    assert_eq!(
        (task["id"].as_str(), task["status"]["state"].as_str()),
        (Some("task-v1"), Some("TASK_STATE_COMPLETED")),
        "{sent}"
    );
    let said = task["artifacts"][0]["parts"][0]["text"].as_str().unwrap();
    assert!(said.starts_with("echo: mail ") && !said.contains("ana@example.com"), "{said}");
    let (status, read) = rest(addr, Some(&alice), "GET", "/a2a/research/v1/tasks/task-v1", "").await;
    assert_eq!((status, read["status"]["state"].as_str()), (200, Some("TASK_STATE_COMPLETED")), "{read}");
    let (status, refused) = rest(addr, Some(&bob), "GET", "/a2a/research/v1/tasks/task-v1", "").await;
    assert_eq!((status, refused["error"]["details"][0]["reason"].as_str()), (404, Some("TASK_NOT_FOUND")));
    assert_eq!(refused["type"], "TaskNotFoundError", "what 0.3's clients read: {refused}");
    let push = json!({"parent": "tasks/task-v1", "config": {"pushNotificationConfig": {"url": "http://10.0.0.1/x"}}});
    let (status, _) =
        rest(addr, Some(&alice), "POST", "/a2a/research/v1/tasks/task-v1/pushNotificationConfigs", &push.to_string())
            .await;
    assert_eq!(status, 400);
    let (status, _) = rest(addr, Some(&alice), "GET", "/a2a/research/v1/tasks", "").await;
    assert_eq!(status, 404, "0.3 lists no tasks");
}

#[tokio::test]
async fn an_http_json_message_counts_on_the_same_run_as_a_json_rpc_one() {
    let upstream = mock_upstream().await;
    let yaml = format!(
        "auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n\
         groups:\n  crew: {{ runs: {{ tool_calls: 2 }} }}\n\
         agents:\n  research: {{ url: \"http://{upstream}/a2a\" }}\n"
    );
    let addr = governed(&yaml).await.0;
    let agent = key(addr, json!({"name": "planner", "group": "crew", "a2a": ["research"]})).await;
    let run = [("x-switchyard-run", "plan-1")];
    let (_, first) = rpc(addr, &agent, "SendMessage", message("m1", "first"), &run).await;
    assert!(first.get("error").is_none(), "{first}");
    // Over HTTP+JSON: the run id reaches the agent, and the call counts.
    let send = "/a2a/research/message:send";
    let (status, second) = rest_with(addr, Some(&agent), "POST", send, &rest_message("m2", "second"), &run).await;
    assert_eq!((status, second["task"]["metadata"]["run"].as_str()), (200, Some("plan-1")), "{second}");
    let (status, refused) = rest_with(addr, Some(&agent), "POST", send, &rest_message("m3", "third"), &run).await;
    assert_eq!(status, 429, "{refused}");
    assert_eq!(refused["error"]["details"][0]["reason"], "QUOTA_EXCEEDED", "{refused}");
    let said = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("run `plan-1`") && said.contains("`tool_calls` limit"), "{said}");
    // A run id no run can have is the binding's 400, naming the header.
    let long = "r".repeat(257);
    let (status, bad) =
        rest_with(addr, Some(&agent), "POST", send, &rest_message("m4", "x"), &[("x-switchyard-run", &long)]).await;
    assert_eq!(status, 400, "{bad}");
    assert!(bad["error"]["message"].as_str().unwrap_or_default().contains("x-switchyard-run"), "{bad}");
}

/// An agent whose card offers HTTP+JSON only, misbehaving by its base
/// path: stalls, answers what is not JSON, answers 200 with a task id past
/// any bound, fails with A2A's error (a `google.rpc.Status`), or breaks a
/// stream with an error event that is not JSON.
async fn hostile_rest_agent() -> SocketAddr {
    use axum::routing::{get, post};
    let card = |base: &'static str| {
        get(move |headers: http::HeaderMap| async move {
            let host = headers.get("host").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
            axum::Json(json!({"name": base, "supportedInterfaces": [
                {"url": format!("http://{host}/{base}"), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]}))
        })
    };
    let sse = |body: &'static str| {
        let mut response = axum::response::Response::new(axum::body::Body::from(body));
        response.headers_mut().insert("content-type", http::HeaderValue::from_static("text/event-stream"));
        response
    };
    let mut router = axum::Router::new();
    for base in ["stall", "garbage", "long-task", "fails", "bad-stream"] {
        router = router.route(&format!("/{base}/.well-known/agent-card.json"), card(base));
    }
    let router = router
        .route(
            "/stall/message:send",
            post(|| async {
                tokio::time::sleep(std::time::Duration::from_secs(30)).await;
                "{}"
            }),
        )
        .route("/garbage/message:send", post(|| async { "<html>not json</html>" }))
        .route("/long-task/message:send", post(|| async { json!({"task": {"id": "t".repeat(5000)}}).to_string() }))
        .route(
            "/fails/message:send",
            post(|| async {
                let body = json!({"error": {"code": 400, "status": "FAILED_PRECONDITION", "message": "Incompatible content types",
                    "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "CONTENT_TYPE_NOT_SUPPORTED",
                        "domain": "a2a-protocol.org"}]}});
                (http::StatusCode::BAD_REQUEST, body.to_string())
            }),
        )
        .route(
            "/bad-stream/message:stream",
            post(move || async move {
                sse("data: {\"task\": {\"id\": \"s1\", \"status\": {\"state\": \"TASK_STATE_WORKING\"}}}\n\nevent: error\ndata: {not json\n\n")
            }),
        );
    spawn(router).await
}

#[tokio::test]
async fn an_http_json_agent_that_stalls_or_lies_gets_no_further_than_an_error() {
    let agent = hostile_rest_agent().await;
    let yaml = format!(
        "auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\nagents:\n{}",
        ["stall", "garbage", "long-task", "fails", "bad-stream"]
            .iter()
            .map(|base| format!("  {base}: {{ url: \"http://{agent}/{base}\", timeout: 500ms }}\n"))
            .collect::<String>()
    );
    let addr = governed(&yaml).await.0;
    let caller = key(addr, json!({"name": "caller", "a2a": ["*"]})).await;
    let send = |agent: &str| format!("/a2a/{agent}/message:send");
    let started = std::time::Instant::now();
    let (status, stalled) = rest(addr, Some(&caller), "POST", &send("stall"), &rest_message("h1", "hi")).await;
    assert_eq!((status, stalled["error"]["status"].as_str()), (502, Some("UNAVAILABLE")), "{stalled}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "bounded by the agent's timeout");
    let (status, garbage) = rest(addr, Some(&caller), "POST", &send("garbage"), &rest_message("h1", "hi")).await;
    assert_eq!(status, 502, "{garbage}");
    assert!(!garbage.to_string().contains("<html>"), "{garbage}");
    let (status, long) = rest(addr, Some(&caller), "POST", &send("long-task"), &rest_message("h1", "hi")).await;
    assert_eq!((status, long["error"]["details"][0]["reason"].as_str()), (502, Some("INVALID_AGENT_RESPONSE")));
    assert!(!long.to_string().contains("ttttt"), "{long}");
    // A2A's own error comes back as the code its reason names: over
    // JSON-RPC as -32005, over HTTP+JSON with its reason and status.
    let (_, failed) = rpc_to(addr, &caller, "fails", "SendMessage", message("h1", "hi")).await;
    assert_eq!(failed["error"]["code"], -32005, "{failed}");
    assert_eq!(failed["error"]["message"], "Incompatible content types", "{failed}");
    let (status, failed) = rest(addr, Some(&caller), "POST", &send("fails"), &rest_message("h1", "hi")).await;
    assert_eq!((status, failed["error"]["details"][0]["reason"].as_str()), (400, Some("CONTENT_TYPE_NOT_SUPPORTED")));
    // A stream whose error event is not JSON: what came is relayed, then
    // the binding's error event ends it.
    let (status, events) =
        rest(addr, Some(&caller), "POST", "/a2a/bad-stream/message:stream", &rest_message("h1", "hi")).await;
    assert_eq!(status, 200);
    let events = events.as_array().unwrap();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0][1]["task"]["id"], "s1");
    assert_eq!(events[1][0], "error", "{events:?}");
    assert_eq!(events[1][1]["error"]["code"], 502, "{events:?}");
}

/// A JSON-RPC call to agent `agent` as `bearer`.
async fn rpc_to(addr: SocketAddr, bearer: &str, agent: &str, method: &str, params: Value) -> (u16, Value) {
    let auth = format!("Bearer {bearer}");
    let body = json!({"jsonrpc": "2.0", "id": "req-1", "method": method, "params": params});
    let reply = post(addr, &format!("/a2a/{agent}"), &[("authorization", auth.as_str())], body.to_string()).await;
    (reply.status.as_u16(), serde_json::from_slice(&reply.body).unwrap_or(Value::Null))
}
