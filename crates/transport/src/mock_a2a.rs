//! The vendor fake's A2A agent (`switchyard mock-upstream`): JSON-RPC at
//! `POST /a2a` (A2A 1.0's methods, what a2a-sdk 1.x sends, and 0.3's
//! `message/send` and `tasks/get` in 0.3's shapes), its card at
//! `GET /a2a/.well-known/agent-card.json`. Stateless and deterministic,
//! for tests of the A2A gateway: a message's task is `task-<messageId>`
//! (or the task it continues), answered completed with an artifact
//! `echo: <text>`; `contacts` is answered with an email address (for
//! guardrails on replies); a message whose metadata names `charge_usd`
//! reports that cost (`metadata.cost_usd`); `steal <task>` answers with
//! that task's id (an agent handing over another caller's task). What the
//! agent was sent of the run identity comes back in the task's metadata
//! (`run`, `a2a_task`).
//!
//! A second agent serves A2A 1.0's HTTP+JSON binding only, under
//! `/a2a-rest` (its card at `/a2a-rest/.well-known/agent-card.json`
//! names no JSON-RPC interface): [`respond_rest`] reads its paths as the
//! JSON-RPC agent's requests and answers in the binding's shapes (a
//! result as the body, an SSE event per result, errors as a
//! `google.rpc.Status`), with `binding: "HTTP+JSON"` and the path it was
//! called on in a task's metadata.

use serde_json::{json, Value};

/// What the fake answers: a content type and the body.
pub struct A2aReply {
    /// `application/json` or `text/event-stream`.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

/// The card of the fake served at `base` (`http://host:port`).
pub fn card(base: &str) -> Value {
    json!({
        "name": "Mock agent",
        "description": "Echoes what it is sent.",
        "version": "1.0.0",
        "supportedInterfaces": [
            {"url": format!("{base}/a2a"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": format!("{base}/a2a/rest"), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        ],
        "capabilities": {"streaming": true, "pushNotifications": true},
        "securitySchemes": {"agent-key": {"apiKeySecurityScheme": {"name": "x-agent-key", "location": "header"}}},
        "securityRequirements": [{"schemes": {"agent-key": {"list": []}}}],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "Echoes text.", "tags": ["echo"]}],
    })
}

/// Answers one POSTed request; `run` and `task` are the run identity
/// headers it came with.
pub fn respond(body: &[u8], run: Option<&str>, task_header: Option<&str>) -> A2aReply {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        return json_reply(json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "not JSON"}}));
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let method = request.get("method").and_then(Value::as_str).unwrap_or_default();
    let params = request.get("params").cloned().unwrap_or(Value::Null);
    let answer = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
    match method {
        "SendMessage" | "SendStreamingMessage" => {
            let message = &params["message"];
            let text = message["parts"][0]["text"].as_str().unwrap_or_default();
            let message_id = message["messageId"].as_str().unwrap_or("m");
            let task_id = match text.strip_prefix("steal ") {
                Some(stolen) => stolen.to_owned(),
                None => message["taskId"].as_str().map_or_else(|| format!("task-{message_id}"), str::to_owned),
            };
            let context = format!("ctx-{message_id}");
            let said = if text == "contacts" { "write to ops@example.com".to_owned() } else { format!("echo: {text}") };
            let mut metadata = json!({"run": run, "a2a_task": task_header});
            if let Some(charge) = message["metadata"]["charge_usd"].as_f64() {
                metadata["cost_usd"] = json!(charge);
            }
            let artifact = json!({"artifactId": "answer", "parts": [{"text": said}]});
            if method == "SendMessage" {
                return json_reply(answer(json!({"task": {
                    "id": task_id, "contextId": context,
                    "status": {"state": "TASK_STATE_COMPLETED"},
                    "artifacts": [artifact], "history": [message], "metadata": metadata,
                }})));
            }
            let events = [
                json!({"task": {"id": task_id, "contextId": context, "status": {"state": "TASK_STATE_SUBMITTED"}}}),
                json!({"statusUpdate": {"taskId": task_id, "contextId": context, "status": {"state": "TASK_STATE_WORKING"}}}),
                json!({"artifactUpdate": {"taskId": task_id, "contextId": context, "artifact": artifact, "lastChunk": true}}),
                json!({"statusUpdate": {"taskId": task_id, "contextId": context,
                    "status": {"state": "TASK_STATE_COMPLETED"}, "metadata": metadata}}),
            ];
            let mut body = Vec::new();
            for event in events {
                body.extend_from_slice(format!("data: {}\n\n", answer(event)).as_bytes());
            }
            A2aReply { content_type: "text/event-stream", body }
        }
        "GetTask" | "CancelTask" => {
            let task_id = params["id"].as_str().unwrap_or_default();
            let state = if method == "GetTask" { "TASK_STATE_COMPLETED" } else { "TASK_STATE_CANCELED" };
            json_reply(answer(json!({
                "id": task_id, "contextId": "ctx",
                "status": {"state": state},
                "artifacts": [{"artifactId": "answer", "parts": [{"text": format!("task {task_id}")}]}],
            })))
        }
        // A2A 0.3's names and shapes: a task is `{ "kind": "task", ... }`,
        // a text part `{ "kind": "text", "text" }`, states lower-case.
        "message/send" => {
            let message = &params["message"];
            let text = message["parts"][0]["text"].as_str().unwrap_or_default();
            let message_id = message["messageId"].as_str().unwrap_or("m");
            let said = if text == "contacts" { "write to ops@example.com".to_owned() } else { format!("echo: {text}") };
            json_reply(answer(json!({
                "kind": "task", "id": format!("task-{message_id}"), "contextId": format!("ctx-{message_id}"),
                "status": {"state": "completed"},
                "artifacts": [{"artifactId": "answer", "parts": [{"kind": "text", "text": said}]}],
                "metadata": {"run": run, "a2a_task": task_header},
            })))
        }
        "tasks/get" => json_reply(answer(json!({
            "kind": "task", "id": params["id"], "contextId": "ctx", "status": {"state": "completed"},
        }))),
        "CreateTaskPushNotificationConfig" | "GetTaskPushNotificationConfig" => {
            json_reply(answer(json!({"id": "config-1", "taskId": params["taskId"], "url": params["url"]})))
        }
        _ => json_reply(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}})),
    }
}

/// The card of the HTTP+JSON-only agent served at `base`.
pub fn rest_card(base: &str) -> Value {
    let mut card = card(base);
    card["name"] = json!("Mock REST agent");
    card["supportedInterfaces"] =
        json!([{"url": format!("{base}/a2a-rest"), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]);
    card
}

/// Answers one request to the HTTP+JSON agent: `method` and `path` (after
/// `/a2a-rest`) as sent. The status and the reply.
pub fn respond_rest(method: &str, path: &str, body: &[u8], run: Option<&str>, task: Option<&str>) -> (u16, A2aReply) {
    let error = |status: u16, reason: &str, message: &str| {
        let body = json!({"error": {"code": status, "status": "NOT_FOUND", "message": message, "details": [
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "a2a-protocol.org"}]}});
        (status, json_reply(body))
    };
    let body: Value = if body.is_empty() { json!({}) } else { serde_json::from_slice(body).unwrap_or(Value::Null) };
    let (name, params) = match (method, path) {
        ("POST", "/message:send") => ("SendMessage", body),
        ("POST", "/message:stream") => ("SendStreamingMessage", body),
        ("POST", p) if p.starts_with("/tasks/") && p.ends_with(":cancel") => {
            ("CancelTask", json!({"id": p["/tasks/".len()..p.len() - ":cancel".len()]}))
        }
        ("GET", p) if p.starts_with("/tasks/") && !p["/tasks/".len()..].contains('/') => {
            ("GetTask", json!({"id": p["/tasks/".len()..]}))
        }
        _ => return error(404, "METHOD_NOT_FOUND", &format!("no route {method} {path}")),
    };
    if name == "GetTask" && params["id"] == "missing" {
        return error(404, "TASK_NOT_FOUND", "Task not found");
    }
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": name, "params": params});
    let reply = respond(request.to_string().as_bytes(), run, task);
    let mark = |result: &mut Value| {
        for at in ["/task/metadata", "/statusUpdate/metadata"] {
            if let Some(metadata) = result.pointer_mut(at).and_then(Value::as_object_mut) {
                metadata.insert("binding".into(), json!("HTTP+JSON"));
                metadata.insert("path".into(), json!(path));
            }
        }
    };
    if reply.content_type == "text/event-stream" {
        let text = String::from_utf8_lossy(&reply.body).into_owned();
        let mut body = Vec::new();
        for data in text.split("\n\n").filter_map(|event| event.strip_prefix("data: ")) {
            let mut answer: Value = serde_json::from_str(data).unwrap_or(Value::Null);
            mark(&mut answer["result"]);
            body.extend_from_slice(format!("data: {}\n\n", answer["result"]).as_bytes());
        }
        return (200, A2aReply { content_type: "text/event-stream", body });
    }
    let mut answer: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
    if answer.get("error").is_some() {
        return error(400, "INVALID_REQUEST", "refused");
    }
    mark(&mut answer["result"]);
    (200, json_reply(answer["result"].take()))
}

fn json_reply(body: Value) -> A2aReply {
    A2aReply { content_type: "application/json", body: body.to_string().into_bytes() }
}
