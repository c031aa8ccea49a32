//! JSON-RPC 2.0 as MCP uses it: one message per POST (batches were
//! dropped from the protocol), requests, notifications and responses told
//! apart by their members, the protocol versions this gateway speaks, and
//! the error codes it answers with. Pure: no I/O.

use serde_json::{json, Map, Value};

/// The protocol versions served, newest first: the current one and the
/// ones before it that clients still send.
pub const VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// The version answered to a client that asked for `asked`: the same when
/// served, else the newest (the client then decides whether to go on).
pub fn negotiate(asked: Option<&str>) -> &'static str {
    asked.and_then(|asked| VERSIONS.iter().find(|v| **v == asked)).copied().unwrap_or(VERSIONS[0])
}

/// The body is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// Not a JSON-RPC message.
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// The params are wrong (an unknown tool, a missing name).
pub const INVALID_PARAMS: i64 = -32602;
/// The gateway failed.
pub const INTERNAL_ERROR: i64 = -32603;
/// The caller's key may not call it (or the tool is withheld).
pub const FORBIDDEN: i64 = -32003;
/// A rate limit, concurrency limit or budget refused the call.
pub const LIMITED: i64 = -32029;
/// No server of the tool's name could be reached.
pub const UNAVAILABLE: i64 = -32050;

/// One incoming message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request, answered by id.
    Request {
        /// Its id (a string or a number).
        id: Value,
        /// The method.
        method: String,
        /// Its params (an object), if any.
        params: Map<String, Value>,
    },
    /// A notification: no answer.
    Notification {
        /// The method.
        method: String,
        /// Its params.
        params: Map<String, Value>,
    },
    /// A response to a request the server sent (none is sent here).
    Response,
}

/// Why a body is not a message: the error to answer with (id null).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The JSON-RPC code.
    pub code: i64,
    /// Why.
    pub message: &'static str,
}

/// Reads one message from a POST body.
pub fn parse(body: &[u8]) -> Result<Message, Unreadable> {
    let value: Value =
        serde_json::from_slice(body).map_err(|_| Unreadable { code: PARSE_ERROR, message: "the body is not JSON" })?;
    let Value::Object(mut message) = value else {
        return Err(Unreadable {
            code: INVALID_REQUEST,
            message: "send one JSON-RPC message per request (batches are not part of MCP)",
        });
    };
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Unreadable { code: INVALID_REQUEST, message: "jsonrpc must be \"2.0\"" });
    }
    let params = match message.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => return Err(Unreadable { code: INVALID_REQUEST, message: "params must be an object" }),
    };
    match (message.remove("method"), message.remove("id")) {
        (Some(Value::String(method)), Some(id @ (Value::String(_) | Value::Number(_)))) => {
            Ok(Message::Request { id, method, params })
        }
        (Some(Value::String(method)), None) => Ok(Message::Notification { method, params }),
        (None, Some(_)) if message.contains_key("result") || message.contains_key("error") => Ok(Message::Response),
        _ => Err(Unreadable { code: INVALID_REQUEST, message: "not a JSON-RPC request, notification or response" }),
    }
}

/// A success answer.
pub fn result(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error answer (`data` when there is more to say).
pub fn error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = json!({ "code": code, "message": message });
    if let (Some(data), Some(object)) = (data, error.as_object_mut()) {
        object.insert("data".into(), data);
    }
    json!({ "jsonrpc": "2.0", "id": id, "error": error })
}

/// A request to send upstream.
pub fn request(id: u64, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

/// A notification to send upstream.
pub fn notification(method: &str, params: Option<Value>) -> Value {
    match params {
        Some(params) => json!({ "jsonrpc": "2.0", "method": method, "params": params }),
        None => json!({ "jsonrpc": "2.0", "method": method }),
    }
}

/// What a server sent back on a request's stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Upstream {
    /// The answer (its `result` or `error` member as sent, whole).
    Answer(Value),
    /// A notification (progress, a log line) for the caller.
    Notification(Value),
    /// A request of the server's own (sampling, elicitation): not
    /// relayed by this gateway, answered with an error.
    Request(Value),
}

/// Sorts one message a server sent on a request's stream.
pub fn classify(message: Value) -> Upstream {
    let has = |key: &str| message.get(key).is_some();
    if has("method") && has("id") {
        Upstream::Request(message)
    } else if has("method") {
        Upstream::Notification(message)
    } else {
        Upstream::Answer(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_told_apart() {
        let request = parse(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#);
        assert_eq!(request, Ok(Message::Request { id: json!(7), method: "tools/list".into(), params: Map::new() }));
        let note = parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(matches!(note, Ok(Message::Notification { .. })));
        assert_eq!(parse(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#), Ok(Message::Response));
        assert_eq!(parse(b"[1]").map_err(|e| e.code), Err(INVALID_REQUEST));
        assert_eq!(parse(b"{").map_err(|e| e.code), Err(PARSE_ERROR));
        assert_eq!(parse(br#"{"jsonrpc":"1.0","id":1,"method":"x"}"#).map_err(|e| e.code), Err(INVALID_REQUEST));
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#).map_err(|e| e.code),
            Err(INVALID_REQUEST)
        );
        assert_eq!(parse(br#"{"jsonrpc":"2.0","id":null,"method":"x"}"#).map_err(|e| e.code), Err(INVALID_REQUEST));
    }

    #[test]
    fn versions_are_negotiated() {
        assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate(Some("1999-01-01")), VERSIONS[0]);
        assert_eq!(negotiate(None), VERSIONS[0]);
    }

    #[test]
    fn answers_have_their_shape() {
        let answer = error(&json!(1), LIMITED, "slow down", Some(json!({"retry_after": 2})));
        assert_eq!(answer["error"]["data"]["retry_after"], 2);
        assert_eq!(
            classify(json!({"jsonrpc":"2.0","method":"notifications/progress"})),
            Upstream::Notification(json!({"jsonrpc":"2.0","method":"notifications/progress"}))
        );
        assert!(matches!(classify(json!({"id":1,"method":"sampling/createMessage"})), Upstream::Request(_)));
        assert!(matches!(classify(json!({"id":1,"result":{}})), Upstream::Answer(_)));
    }
}
