//! A2A 0.3's HTTP+JSON bodies, which are its protobuf's JSON
//! (`a2a_v0_3.proto`: a message's parts are `content`, roles and states
//! are enum names, a push config is named `tasks/{id}/pushNotificationConfigs/{config}`),
//! converted to and from 0.3's JSON-RPC shapes (`kind`-tagged, parts in
//! `parts`, states lower-case), which is what the gateway checks and
//! relays. a2a-sdk's 0.3 client writes proto field names (`message_id`),
//! its server camel case (`messageId`): both are read.

use serde_json::{json, Map, Value};

use crate::path::{percent_encode, Outbound, Query, Refused};
use crate::rpc::{self, Method};

/// 0.3's JSON-RPC task states and their proto names.
const STATES: [(&str, &str); 9] = [
    ("submitted", "TASK_STATE_SUBMITTED"),
    ("working", "TASK_STATE_WORKING"),
    ("completed", "TASK_STATE_COMPLETED"),
    ("failed", "TASK_STATE_FAILED"),
    ("canceled", "TASK_STATE_CANCELLED"),
    ("input-required", "TASK_STATE_INPUT_REQUIRED"),
    ("rejected", "TASK_STATE_REJECTED"),
    ("auth-required", "TASK_STATE_AUTH_REQUIRED"),
    ("unknown", "TASK_STATE_UNSPECIFIED"),
];

/// Member `camel` of `object`, or its proto field name `snake`.
fn field<'a>(object: &'a Value, camel: &str, snake: &str) -> Option<&'a Value> {
    object.get(camel).or_else(|| object.get(snake)).filter(|v| !v.is_null())
}

/// Copies `object`'s members named (camel case, proto name) in `names`
/// into `out` under their camel case names.
fn copy(out: &mut Map<String, Value>, object: &Value, names: &[(&str, &str)]) {
    for (camel, snake) in names {
        if let Some(value) = field(object, camel, snake) {
            out.insert((*camel).to_owned(), value.clone());
        }
    }
}

/// A proto part (`{ text }`, `{ file: { fileWithUri | fileWithBytes } }`,
/// `{ data: { data } }`) as 0.3's JSON-RPC part.
fn part_from_proto(part: &Value) -> Value {
    let mut out = Map::new();
    if let Some(text) = part.get("text") {
        out.insert("kind".into(), json!("text"));
        out.insert("text".into(), text.clone());
    } else if let Some(file) = part.get("file") {
        let mut inner = Map::new();
        copy(&mut inner, file, &[("mimeType", "mime_type"), ("name", "name")]);
        if let Some(uri) = field(file, "fileWithUri", "file_with_uri") {
            inner.insert("uri".into(), uri.clone());
        }
        if let Some(bytes) = field(file, "fileWithBytes", "file_with_bytes") {
            inner.insert("bytes".into(), bytes.clone());
        }
        out.insert("kind".into(), json!("file"));
        out.insert("file".into(), Value::Object(inner));
    } else if let Some(data) = part.get("data") {
        out.insert("kind".into(), json!("data"));
        out.insert("data".into(), data.get("data").cloned().unwrap_or(json!({})));
    }
    copy(&mut out, part, &[("metadata", "metadata")]);
    Value::Object(out)
}

fn part_to_proto(part: &Value) -> Value {
    let mut out = Map::new();
    match part.get("kind").and_then(Value::as_str) {
        Some("file") => {
            let file = part.get("file").cloned().unwrap_or(json!({}));
            let mut inner = Map::new();
            copy(&mut inner, &file, &[("mimeType", "mime_type"), ("name", "name")]);
            if let Some(uri) = file.get("uri") {
                inner.insert("fileWithUri".into(), uri.clone());
            }
            if let Some(bytes) = file.get("bytes") {
                inner.insert("fileWithBytes".into(), bytes.clone());
            }
            out.insert("file".into(), Value::Object(inner));
        }
        Some("data") => {
            out.insert("data".into(), json!({ "data": part.get("data").cloned().unwrap_or(json!({})) }));
        }
        _ => {
            out.insert("text".into(), part.get("text").cloned().unwrap_or(json!("")));
        }
    }
    copy(&mut out, part, &[("metadata", "metadata")]);
    Value::Object(out)
}

fn parts(list: Option<&Value>, each: fn(&Value) -> Value) -> Value {
    Value::Array(list.and_then(Value::as_array).map(|l| l.iter().map(each).collect()).unwrap_or_default())
}

const MESSAGE_FIELDS: [(&str, &str); 5] = [
    ("messageId", "message_id"),
    ("contextId", "context_id"),
    ("taskId", "task_id"),
    ("metadata", "metadata"),
    ("extensions", "extensions"),
];

fn message_from_proto(message: &Value) -> Value {
    let mut out = Map::new();
    out.insert("kind".into(), json!("message"));
    copy(&mut out, message, &MESSAGE_FIELDS);
    let role = match message.get("role").and_then(Value::as_str) {
        Some("ROLE_AGENT") => "agent",
        _ => "user",
    };
    out.insert("role".into(), json!(role));
    out.insert("parts".into(), parts(message.get("content"), part_from_proto));
    Value::Object(out)
}

fn message_to_proto(message: &Value) -> Value {
    let mut out = Map::new();
    copy(&mut out, message, &MESSAGE_FIELDS);
    let role = if message.get("role").and_then(Value::as_str) == Some("agent") { "ROLE_AGENT" } else { "ROLE_USER" };
    out.insert("role".into(), json!(role));
    out.insert("content".into(), parts(message.get("parts"), part_to_proto));
    Value::Object(out)
}

fn status(status: &Value, to_proto: bool) -> Value {
    let mut out = Map::new();
    copy(&mut out, status, &[("timestamp", "timestamp")]);
    let state = status.get("state").and_then(Value::as_str).unwrap_or_default();
    let named = STATES
        .iter()
        .find(|(rpc, proto)| if to_proto { *rpc == state } else { *proto == state })
        .map(|(rpc, proto)| if to_proto { *proto } else { *rpc });
    out.insert("state".into(), json!(named.unwrap_or(if to_proto { "TASK_STATE_UNSPECIFIED" } else { "unknown" })));
    if let Some(message) = status.get("message").or_else(|| status.get("update")).filter(|m| m.is_object()) {
        let message = if to_proto { message_to_proto(message) } else { message_from_proto(message) };
        out.insert("message".into(), message);
    }
    Value::Object(out)
}

fn artifact(artifact: &Value, to_proto: bool) -> Value {
    let mut out = Map::new();
    copy(
        &mut out,
        artifact,
        &[
            ("artifactId", "artifact_id"),
            ("name", "name"),
            ("description", "description"),
            ("metadata", "metadata"),
            ("extensions", "extensions"),
        ],
    );
    let each = if to_proto { part_to_proto } else { part_from_proto };
    out.insert("parts".into(), parts(artifact.get("parts"), each));
    Value::Object(out)
}

fn task(task: &Value, to_proto: bool) -> Value {
    let mut out = Map::new();
    if !to_proto {
        out.insert("kind".into(), json!("task"));
    }
    copy(&mut out, task, &[("id", "id"), ("contextId", "context_id"), ("metadata", "metadata")]);
    out.insert("status".into(), status(task.get("status").unwrap_or(&json!({})), to_proto));
    if let Some(list) = task.get("artifacts").and_then(Value::as_array) {
        out.insert("artifacts".into(), list.iter().map(|a| artifact(a, to_proto)).collect());
    }
    if let Some(list) = task.get("history").and_then(Value::as_array) {
        let each = if to_proto { message_to_proto } else { message_from_proto };
        out.insert("history".into(), list.iter().map(each).collect());
    }
    Value::Object(out)
}

const EVENT_FIELDS: [(&str, &str); 5] = [
    ("taskId", "task_id"),
    ("contextId", "context_id"),
    ("final", "final"),
    ("append", "append"),
    ("metadata", "metadata"),
];

/// A stream event (or a message's answer) of JSON-RPC as the proto's
/// `StreamResponse`.
fn event_to_proto(event: &Value) -> Value {
    match event.get("kind").and_then(Value::as_str) {
        Some("message") => json!({ "message": message_to_proto(event) }),
        Some("status-update") => {
            let mut out = Map::new();
            copy(&mut out, event, &EVENT_FIELDS);
            out.insert("status".into(), status(event.get("status").unwrap_or(&json!({})), true));
            json!({ "statusUpdate": out })
        }
        Some("artifact-update") => {
            let mut out = Map::new();
            copy(&mut out, event, &EVENT_FIELDS);
            copy(&mut out, event, &[("lastChunk", "last_chunk")]);
            out.insert("artifact".into(), artifact(event.get("artifact").unwrap_or(&json!({})), true));
            json!({ "artifactUpdate": out })
        }
        _ => json!({ "task": task(event, true) }),
    }
}

fn event_from_proto(event: &Value) -> Value {
    if let Some(found) = event.get("task") {
        return task(found, false);
    }
    if let Some(message) = event.get("message").or_else(|| event.get("msg")) {
        return message_from_proto(message);
    }
    if let Some(update) = field(event, "statusUpdate", "status_update") {
        let mut out = Map::new();
        out.insert("kind".into(), json!("status-update"));
        copy(&mut out, update, &EVENT_FIELDS);
        out.insert("status".into(), status(update.get("status").unwrap_or(&json!({})), false));
        return Value::Object(out);
    }
    if let Some(update) = field(event, "artifactUpdate", "artifact_update") {
        let mut out = Map::new();
        out.insert("kind".into(), json!("artifact-update"));
        copy(&mut out, update, &EVENT_FIELDS);
        copy(&mut out, update, &[("lastChunk", "last_chunk")]);
        out.insert("artifact".into(), artifact(update.get("artifact").unwrap_or(&json!({})), false));
        return Value::Object(out);
    }
    json!({})
}

/// 0.3's JSON-RPC push config (`{ taskId, pushNotificationConfig }`) as
/// the proto's (`{ name, pushNotificationConfig }`), and back.
fn push_to_proto(config: &Value) -> Value {
    let task = config.get("taskId").and_then(Value::as_str).unwrap_or_default();
    let inner = config.get("pushNotificationConfig").cloned().unwrap_or(json!({}));
    let id = inner.get("id").and_then(Value::as_str).unwrap_or_default();
    json!({ "name": format!("tasks/{task}/pushNotificationConfigs/{id}"), "pushNotificationConfig": inner })
}

fn push_from_proto(config: &Value) -> Value {
    let name = config.get("name").and_then(Value::as_str).unwrap_or_default();
    let task = name.strip_prefix("tasks/").and_then(|rest| rest.split('/').next()).unwrap_or_default();
    let inner = field(config, "pushNotificationConfig", "push_notification_config").cloned().unwrap_or(json!({}));
    json!({ "taskId": task, "pushNotificationConfig": inner })
}

/// A 0.3 request body's `configuration` as JSON-RPC's.
fn configuration_from_proto(configuration: &Value) -> Value {
    let mut out = Map::new();
    copy(
        &mut out,
        configuration,
        &[
            ("acceptedOutputModes", "accepted_output_modes"),
            ("historyLength", "history_length"),
            ("blocking", "blocking"),
        ],
    );
    if let Some(push) = field(configuration, "pushNotification", "push_notification") {
        out.insert("pushNotificationConfig".into(), push.clone());
    }
    Value::Object(out)
}

fn configuration_to_proto(configuration: &Value) -> Value {
    let mut out = Map::new();
    copy(
        &mut out,
        configuration,
        &[("acceptedOutputModes", "acceptedOutputModes"), ("historyLength", "historyLength"), ("blocking", "blocking")],
    );
    if let Some(push) = configuration.get("pushNotificationConfig") {
        out.insert("pushNotification".into(), push.clone());
    }
    Value::Object(out)
}

/// A 0.3 REST request's JSON-RPC params.
pub(crate) fn params_of_rest(
    method: Method,
    task: Option<&str>,
    config: Option<&str>,
    query: &Query,
    body: Map<String, Value>,
) -> Result<Map<String, Value>, Refused> {
    let body = Value::Object(body);
    let task = Value::from(task.unwrap_or_default());
    let params = match method {
        Method::Send | Method::Stream => {
            let message = field(&body, "request", "request").or_else(|| body.get("message"));
            let Some(message) = message.filter(|m| m.is_object()) else {
                return Err(Refused { code: rpc::INVALID_PARAMS, message: "a message request needs `request`".into() });
            };
            let mut params = json!({ "message": message_from_proto(message) });
            if let Some(configuration) = body.get("configuration").filter(|c| c.is_object()) {
                params["configuration"] = configuration_from_proto(configuration);
            }
            if let Some(metadata) = body.get("metadata") {
                params["metadata"] = metadata.clone();
            }
            params
        }
        Method::GetTask => match query.number("historyLength")? {
            Some(length) => json!({ "id": task, "historyLength": length }),
            None => json!({ "id": task }),
        },
        Method::CancelTask | Method::Subscribe | Method::ListPush => json!({ "id": task }),
        Method::SetPush => {
            let config = body.get("config").unwrap_or(&body);
            let inner = field(config, "pushNotificationConfig", "push_notification_config");
            json!({ "taskId": task, "pushNotificationConfig": inner.cloned().unwrap_or(json!({})) })
        }
        Method::GetPush | Method::DeletePush => {
            json!({ "id": task, "pushNotificationConfigId": config.unwrap_or_default() })
        }
        Method::ListTasks | Method::ExtendedCard => json!({}),
    };
    Ok(params.as_object().cloned().unwrap_or_default())
}

/// The 0.3 REST request asking what JSON-RPC's `method` with `params` asks.
pub(crate) fn rest_of_params(method: Method, params: &Map<String, Value>) -> Result<Outbound, Refused> {
    let params = Value::Object(params.clone());
    let text = |name: &str| params.get(name).and_then(Value::as_str).map(percent_encode).unwrap_or_default();
    let raw_task = params.get("id").and_then(Value::as_str).unwrap_or_default();
    let (http, path, body) = match method {
        Method::Send | Method::Stream => {
            let mut body = json!({ "request": message_to_proto(params.get("message").unwrap_or(&json!({}))) });
            if let Some(configuration) = params.get("configuration").filter(|c| c.is_object()) {
                body["configuration"] = configuration_to_proto(configuration);
            }
            if let Some(metadata) = params.get("metadata") {
                body["metadata"] = metadata.clone();
            }
            let path = if method == Method::Send { "/v1/message:send" } else { "/v1/message:stream" };
            ("POST", path.to_owned(), Some(body))
        }
        Method::GetTask => {
            let query = params.get("historyLength").and_then(Value::as_i64);
            let query = query.map(|n| format!("?historyLength={n}")).unwrap_or_default();
            ("GET", format!("/v1/tasks/{}{query}", text("id")), None)
        }
        Method::CancelTask => {
            ("POST", format!("/v1/tasks/{}:cancel", text("id")), Some(json!({ "name": format!("tasks/{raw_task}") })))
        }
        Method::Subscribe => ("POST", format!("/v1/tasks/{}:subscribe", text("id")), None),
        Method::SetPush => {
            let task = params.get("taskId").and_then(Value::as_str).unwrap_or_default();
            let body = json!({ "parent": format!("tasks/{task}"), "config": push_to_proto(&params) });
            ("POST", format!("/v1/tasks/{}/pushNotificationConfigs", text("taskId")), Some(body))
        }
        Method::GetPush | Method::DeletePush => {
            let http = if method == Method::GetPush { "GET" } else { "DELETE" };
            let path = format!("/v1/tasks/{}/pushNotificationConfigs/{}", text("id"), text("pushNotificationConfigId"));
            (http, path, None)
        }
        Method::ListPush => ("GET", format!("/v1/tasks/{}/pushNotificationConfigs", text("id")), None),
        Method::ExtendedCard => ("GET", "/v1/card".to_owned(), None),
        Method::ListTasks => {
            return Err(Refused { code: rpc::UNSUPPORTED_OPERATION, message: "A2A 0.3 lists no tasks".into() })
        }
    };
    Ok(Outbound { http, path, body })
}

/// A 0.3 agent's REST answer as JSON-RPC's `result`.
pub(crate) fn result_of_rest(method: Method, body: Value) -> Value {
    match method {
        Method::Send | Method::Stream | Method::Subscribe => event_from_proto(&body),
        Method::GetTask | Method::CancelTask => task(&body, false),
        Method::SetPush | Method::GetPush => push_from_proto(&body),
        Method::ListPush => {
            let configs = body.get("configs").and_then(Value::as_array).cloned().unwrap_or_default();
            Value::Array(configs.iter().map(push_from_proto).collect())
        }
        Method::DeletePush => Value::Null,
        Method::ListTasks | Method::ExtendedCard => body,
    }
}

/// JSON-RPC's 0.3 `result` as the REST answer's body.
pub(crate) fn rest_of_result(method: Method, result: Value) -> Value {
    match method {
        Method::Send | Method::Stream | Method::Subscribe => event_to_proto(&result),
        Method::GetTask | Method::CancelTask => task(&result, true),
        Method::SetPush | Method::GetPush => push_to_proto(&result),
        Method::ListPush => {
            let configs = result.as_array().cloned().unwrap_or_default();
            json!({ "configs": configs.iter().map(push_to_proto).collect::<Vec<_>>() })
        }
        Method::DeletePush => json!({}),
        Method::ListTasks | Method::ExtendedCard => result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rest::inbound;
    use crate::rpc::Version;

    /// What a2a-sdk 1.3.0's 0.3 `CompatRestTransport` sends for
    /// `send_message` (proto field names), read as 0.3's JSON-RPC params.
    #[test]
    fn a_v03_message_is_read_from_its_proto_json() {
        let body = json!({"request": {"message_id": "m1", "context_id": "c1", "role": "ROLE_USER",
            "content": [{"text": "hi"}, {"file": {"file_with_uri": "https://f.example/a", "mime_type": "text/plain"}},
                        {"data": {"data": {"k": 1}}}]},
            "configuration": {"blocking": true, "push_notification": {"url": "https://hooks.example/x"}}});
        let read = inbound("POST", "/v1/message:send", None, body.to_string().as_bytes());
        let read = read.unwrap_or_else(|e| unreachable!("{e:?}"));
        assert_eq!((read.method, read.version), (Method::Send, Version::V03));
        assert_eq!(
            Value::Object(read.params),
            json!({"message": {"kind": "message", "messageId": "m1", "contextId": "c1", "role": "user", "parts": [
                {"kind": "text", "text": "hi"},
                {"kind": "file", "file": {"uri": "https://f.example/a", "mimeType": "text/plain"}},
                {"kind": "data", "data": {"k": 1}}]},
                "configuration": {"blocking": true, "pushNotificationConfig": {"url": "https://hooks.example/x"}}})
        );
        let push = inbound("GET", "/v1/tasks/t1/pushNotificationConfigs/c2", None, b"");
        assert_eq!(push.map(|r| Value::Object(r.params)), Ok(json!({"id": "t1", "pushNotificationConfigId": "c2"})));
        let card = inbound("GET", "/v1/card", None, b"");
        assert_eq!(card.map(|r| r.method), Ok(Method::ExtendedCard));
    }

    /// A 0.3 JSON-RPC task as a2a-sdk's `ToProto.task` + `MessageToDict`
    /// writes it, and back again unchanged.
    #[test]
    fn a_v03_task_round_trips_through_its_proto_json() {
        let rpc_task = json!({"kind": "task", "id": "t1", "contextId": "c1",
            "status": {"state": "canceled", "message": {"kind": "message", "messageId": "s", "role": "agent",
                "parts": [{"kind": "text", "text": "stopped"}]}},
            "artifacts": [{"artifactId": "a", "name": "answer", "parts": [{"kind": "text", "text": "echo: hi"}]}],
            "history": [{"kind": "message", "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}],
            "metadata": {"cost_usd": 0.5}});
        let proto = rest_of_result(Method::GetTask, rpc_task.clone());
        assert_eq!(
            proto,
            json!({"id": "t1", "contextId": "c1",
                "status": {"state": "TASK_STATE_CANCELLED", "message": {"messageId": "s", "role": "ROLE_AGENT",
                    "content": [{"text": "stopped"}]}},
                "artifacts": [{"artifactId": "a", "name": "answer", "parts": [{"text": "echo: hi"}]}],
                "history": [{"messageId": "m1", "role": "ROLE_USER", "content": [{"text": "hi"}]}],
                "metadata": {"cost_usd": 0.5}})
        );
        assert_eq!(result_of_rest(Method::GetTask, proto), rpc_task);
        let sent = rest_of_result(Method::Send, rpc_task.clone());
        assert_eq!(sent["task"]["status"]["state"], "TASK_STATE_CANCELLED");
        let update = json!({"kind": "status-update", "taskId": "t1", "contextId": "c1", "final": true,
            "status": {"state": "completed"}});
        let streamed = rest_of_result(Method::Stream, update.clone());
        assert_eq!(
            streamed,
            json!({"statusUpdate": {"taskId": "t1", "contextId": "c1", "final": true,
            "status": {"state": "TASK_STATE_COMPLETED"}}})
        );
        assert_eq!(result_of_rest(Method::Stream, streamed), update);
    }

    #[test]
    fn v03_push_configs_are_named_resources_over_rest() {
        let rpc_config =
            json!({"taskId": "t1", "pushNotificationConfig": {"id": "c2", "url": "https://hooks.example/x"}});
        let proto = rest_of_result(Method::GetPush, rpc_config.clone());
        assert_eq!(proto["name"], "tasks/t1/pushNotificationConfigs/c2");
        assert_eq!(result_of_rest(Method::GetPush, proto), rpc_config);
        let params = rpc_config.as_object().cloned().unwrap_or_default();
        let out = rest_of_params(Method::SetPush, &params).unwrap_or_else(|e| unreachable!("{e:?}"));
        assert_eq!(out.path, "/v1/tasks/t1/pushNotificationConfigs");
        assert_eq!(out.body.map(|b| b["parent"].clone()), Some(json!("tasks/t1")));
        let get = rest_of_params(Method::GetTask, &json!({"id": "a/b"}).as_object().cloned().unwrap_or_default());
        assert_eq!(get.map(|o| o.path), Ok("/v1/tasks/a%2Fb".to_owned()));
        assert!(rest_of_params(Method::ListTasks, &Map::new()).is_err());
    }
}
