//! A caller's JSON-RPC request to an agent, the A2A method it names (by
//! A2A 1.0's name, `SendMessage`, or 0.3's, `message/send`), and answers
//! in JSON-RPC's shape with A2A's codes. A refusal of the gateway's own
//! carries a `google.rpc.ErrorInfo` in `data` (domain `switchyard`), as
//! A2A 1.0 does for its own errors: the SDKs read its `metadata`.

use serde_json::{json, Map, Value};

/// Not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// Not a JSON-RPC request.
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Bad parameters (a guardrail's block of a request too).
pub const INVALID_PARAMS: i64 = -32602;
/// The gateway could not reach the agent, or it answered unreadably.
pub const INTERNAL_ERROR: i64 = -32603;
/// A2A: no such task (also another key's task: the gateway does not say
/// that it exists).
pub const TASK_NOT_FOUND: i64 = -32001;
/// A2A: the operation is not offered (listing every caller's tasks).
pub const UNSUPPORTED_OPERATION: i64 = -32004;
/// A2A: the agent's answer could not be relayed (unreadable, a task bound
/// to another key, a guardrail's block of what it said).
pub const INVALID_AGENT_RESPONSE: i64 = -32006;
/// A2A: no extended card (the gateway publishes the agent's public one).
pub const EXTENDED_CARD_NOT_CONFIGURED: i64 = -32007;
/// The gateway's own: the key may not call this agent, or lacks a key.
/// (A2A leaves -32000 to -32099 beside its own codes to servers.)
pub const FORBIDDEN: i64 = -32040;
/// The gateway's own: refused by the key's budget, rate or concurrency
/// limits, or the agent's own rate.
pub const LIMITED: i64 = -32029;

/// The largest id a request may carry (a string id is echoed back).
const MAX_ID_BYTES: usize = 256;

/// What an A2A method does, whichever version named it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Sends a message; one answer (a task or a message).
    Send,
    /// Sends a message; answered as an event stream.
    Stream,
    /// Reads a task.
    GetTask,
    /// Cancels a task.
    CancelTask,
    /// Streams a task's updates again.
    Subscribe,
    /// Lists tasks (every caller's, as the agent sees one client).
    ListTasks,
    /// Sets a task's push notification config.
    SetPush,
    /// Reads one.
    GetPush,
    /// Lists a task's.
    ListPush,
    /// Deletes one.
    DeletePush,
    /// The authenticated extended card.
    ExtendedCard,
}

/// The A2A version a method name belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// 1.0 (`SendMessage`, what a2a-sdk 1.x sends).
    V1,
    /// 0.3 (`message/send`).
    V03,
}

impl Method {
    /// The method `name` is, in either version.
    pub fn of(name: &str) -> Option<(Method, Version)> {
        let found = match name {
            "SendMessage" => (Method::Send, Version::V1),
            "SendStreamingMessage" => (Method::Stream, Version::V1),
            "GetTask" => (Method::GetTask, Version::V1),
            "CancelTask" => (Method::CancelTask, Version::V1),
            "SubscribeToTask" => (Method::Subscribe, Version::V1),
            "ListTasks" => (Method::ListTasks, Version::V1),
            "CreateTaskPushNotificationConfig" => (Method::SetPush, Version::V1),
            "GetTaskPushNotificationConfig" => (Method::GetPush, Version::V1),
            "ListTaskPushNotificationConfigs" => (Method::ListPush, Version::V1),
            "DeleteTaskPushNotificationConfig" => (Method::DeletePush, Version::V1),
            "GetExtendedAgentCard" => (Method::ExtendedCard, Version::V1),
            "message/send" => (Method::Send, Version::V03),
            "message/stream" => (Method::Stream, Version::V03),
            "tasks/get" => (Method::GetTask, Version::V03),
            "tasks/cancel" => (Method::CancelTask, Version::V03),
            "tasks/resubscribe" => (Method::Subscribe, Version::V03),
            "tasks/list" => (Method::ListTasks, Version::V03),
            "tasks/pushNotificationConfig/set" => (Method::SetPush, Version::V03),
            "tasks/pushNotificationConfig/get" => (Method::GetPush, Version::V03),
            "tasks/pushNotificationConfig/list" => (Method::ListPush, Version::V03),
            "tasks/pushNotificationConfig/delete" => (Method::DeletePush, Version::V03),
            "agent/getAuthenticatedExtendedCard" => (Method::ExtendedCard, Version::V03),
            _ => return None,
        };
        Some(found)
    }

    /// Its JSON-RPC name in `version`.
    pub fn name(self, version: Version) -> &'static str {
        let (v1, v03) = match self {
            Method::Send => ("SendMessage", "message/send"),
            Method::Stream => ("SendStreamingMessage", "message/stream"),
            Method::GetTask => ("GetTask", "tasks/get"),
            Method::CancelTask => ("CancelTask", "tasks/cancel"),
            Method::Subscribe => ("SubscribeToTask", "tasks/resubscribe"),
            Method::ListTasks => ("ListTasks", "tasks/list"),
            Method::SetPush => ("CreateTaskPushNotificationConfig", "tasks/pushNotificationConfig/set"),
            Method::GetPush => ("GetTaskPushNotificationConfig", "tasks/pushNotificationConfig/get"),
            Method::ListPush => ("ListTaskPushNotificationConfigs", "tasks/pushNotificationConfig/list"),
            Method::DeletePush => ("DeleteTaskPushNotificationConfig", "tasks/pushNotificationConfig/delete"),
            Method::ExtendedCard => ("GetExtendedAgentCard", "agent/getAuthenticatedExtendedCard"),
        };
        match version {
            Version::V1 => v1,
            Version::V03 => v03,
        }
    }

    /// Whether the agent answers it as an event stream.
    pub fn streams(self) -> bool {
        matches!(self, Method::Stream | Method::Subscribe)
    }

    /// Whether it sends a message (what a task's price is held for).
    pub fn sends(self) -> bool {
        matches!(self, Method::Send | Method::Stream)
    }

    /// The task it names in `params`, for the methods bound to one task
    /// (a message continuing a task names it too). 1.0 names a push
    /// config's task `taskId` throughout; 0.3 names it `id` but when
    /// setting one.
    pub fn task(self, version: Version, params: &Map<String, Value>) -> Option<&str> {
        let field = match (self, version) {
            (Method::Send | Method::Stream, _) => {
                return params.get("message").and_then(|m| m.get("taskId")).and_then(Value::as_str)
            }
            (Method::GetTask | Method::CancelTask | Method::Subscribe, _) => "id",
            (Method::SetPush, _) | (Method::GetPush | Method::ListPush | Method::DeletePush, Version::V1) => "taskId",
            (Method::GetPush | Method::ListPush | Method::DeletePush, Version::V03) => "id",
            (Method::ListTasks | Method::ExtendedCard, _) => return None,
        };
        params.get(field).and_then(Value::as_str)
    }
}

/// A caller's request, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Its id (a string or a number).
    pub id: Value,
    /// The method as named.
    pub method: String,
    /// Its params (an object; absent: empty).
    pub params: Map<String, Value>,
}

/// Why a body is not a request: the error code and message to answer with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The JSON-RPC code.
    pub code: i64,
    /// What is wrong.
    pub message: &'static str,
}

/// Reads one request. A notification (no id) is refused: every A2A method
/// is answered.
pub fn parse(body: &[u8]) -> Result<Request, Unreadable> {
    let value: Value =
        serde_json::from_slice(body).map_err(|_| Unreadable { code: PARSE_ERROR, message: "the body is not JSON" })?;
    let Value::Object(mut message) = value else {
        return Err(Unreadable { code: INVALID_REQUEST, message: "send one JSON-RPC request per HTTP request" });
    };
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Unreadable { code: INVALID_REQUEST, message: "jsonrpc must be \"2.0\"" });
    }
    let params = match message.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => return Err(Unreadable { code: INVALID_PARAMS, message: "params must be an object" }),
    };
    let id = match message.remove("id") {
        Some(Value::String(id)) if id.len() <= MAX_ID_BYTES => Value::String(id),
        Some(id @ Value::Number(_)) => id,
        Some(Value::String(_)) => return Err(Unreadable { code: INVALID_REQUEST, message: "the id is too long" }),
        _ => return Err(Unreadable { code: INVALID_REQUEST, message: "a request needs a string or number id" }),
    };
    match message.remove("method") {
        Some(Value::String(method)) => Ok(Request { id, method, params }),
        _ => Err(Unreadable { code: INVALID_REQUEST, message: "a request needs a method" }),
    }
}

/// A request to send an agent.
pub fn request(id: &Value, method: &str, params: Map<String, Value>) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

/// An error answer of A2A's own (or JSON-RPC's) code.
pub fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// An error answer of the gateway's own: `reason` (`PERMISSION_DENIED`,
/// `QUOTA_EXCEEDED`, `RATE_LIMITED`, ...) and `metadata` in a
/// `google.rpc.ErrorInfo` of domain `switchyard`, as A2A 1.0 carries the
/// details of its own errors.
pub fn refusal(id: &Value, code: i64, message: &str, reason: &str, metadata: Map<String, Value>) -> Value {
    // ErrorInfo's metadata is a map of strings.
    let metadata: Map<String, Value> = metadata
        .into_iter()
        .map(|(k, v)| {
            let text = match v {
                Value::String(text) => text,
                other => other.to_string(),
            };
            (k, Value::String(text))
        })
        .collect();
    json!({ "jsonrpc": "2.0", "id": id, "error": {
        "code": code,
        "message": message,
        "data": [{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": "switchyard",
            "metadata": metadata,
        }],
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_read_and_anything_else_refused_with_its_code() {
        let read = parse(br#"{"jsonrpc":"2.0","id":"a","method":"SendMessage","params":{"message":{}}}"#);
        let read = read.unwrap_or_else(|e| unreachable!("{e:?}"));
        assert_eq!((read.id, read.method.as_str()), (json!("a"), "SendMessage"));
        assert!(read.params.contains_key("message"));
        let code = |body: &[u8]| parse(body).err().map(|e| e.code);
        assert_eq!(code(b"{"), Some(PARSE_ERROR));
        assert_eq!(code(br#"[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]"#), Some(INVALID_REQUEST));
        assert_eq!(code(br#"{"jsonrpc":"1.0","id":1,"method":"GetTask"}"#), Some(INVALID_REQUEST));
        assert_eq!(code(br#"{"jsonrpc":"2.0","method":"GetTask"}"#), Some(INVALID_REQUEST), "a notification");
        assert_eq!(code(br#"{"jsonrpc":"2.0","id":{},"method":"GetTask"}"#), Some(INVALID_REQUEST));
        assert_eq!(code(br#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}"#), Some(INVALID_PARAMS));
        assert_eq!(code(br#"{"jsonrpc":"2.0","id":1,"method":7}"#), Some(INVALID_REQUEST));
        let long = format!(r#"{{"jsonrpc":"2.0","id":"{}","method":"GetTask"}}"#, "i".repeat(300));
        assert_eq!(code(long.as_bytes()), Some(INVALID_REQUEST));
    }

    #[test]
    fn both_versions_name_the_same_methods_and_their_tasks() {
        assert_eq!(Method::of("SendMessage"), Some((Method::Send, Version::V1)));
        assert_eq!(Method::of("message/stream"), Some((Method::Stream, Version::V03)));
        assert_eq!(Method::of("tasks/cancel"), Some((Method::CancelTask, Version::V03)));
        assert_eq!(Method::of("sendmessage"), None);
        for name in ["SendMessage", "tasks/pushNotificationConfig/list", "GetExtendedAgentCard", "tasks/resubscribe"] {
            let (method, version) = Method::of(name).unwrap_or_else(|| unreachable!("{name}"));
            assert_eq!(method.name(version), name, "a name reads back as itself");
        }
        let params = |v: Value| v.as_object().cloned().unwrap_or_default();
        let continuing = params(json!({"message": {"taskId": "t1"}}));
        assert_eq!(Method::Send.task(Version::V1, &continuing), Some("t1"));
        assert_eq!(Method::GetTask.task(Version::V1, &params(json!({"id": "t2"}))), Some("t2"));
        let push = params(json!({"taskId": "t3", "id": "config-1"}));
        assert_eq!(Method::GetPush.task(Version::V1, &push), Some("t3"));
        assert_eq!(Method::GetPush.task(Version::V03, &params(json!({"id": "t4"}))), Some("t4"));
        assert_eq!(Method::SetPush.task(Version::V03, &params(json!({"taskId": "t5"}))), Some("t5"));
        assert_eq!(Method::ListTasks.task(Version::V1, &push), None);
    }

    #[test]
    fn a_refusal_carries_an_error_info_of_strings() {
        let mut metadata = Map::new();
        metadata.insert("retry_after".into(), json!(3));
        metadata.insert("agent".into(), json!("research"));
        let answer = refusal(&json!(1), LIMITED, "budget exhausted", "BUDGET_EXHAUSTED", metadata);
        let info = &answer["error"]["data"][0];
        assert_eq!(info["@type"], "type.googleapis.com/google.rpc.ErrorInfo");
        assert_eq!(info["reason"], "BUDGET_EXHAUSTED");
        assert_eq!(info["metadata"]["retry_after"], "3");
        assert_eq!(info["metadata"]["agent"], "research");
        assert_eq!(answer["error"]["code"], LIMITED);
    }
}
