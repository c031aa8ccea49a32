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

fn json_reply(body: Value) -> A2aReply {
    A2aReply { content_type: "application/json", body: body.to_string().into_bytes() }
}
