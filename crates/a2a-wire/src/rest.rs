//! A2A's HTTP+JSON binding, as a2a-sdk 1.x's REST transport and server
//! speak it, translated to and from the JSON-RPC request the gateway
//! checks and relays (so one call path serves both bindings):
//!
//! - [`inbound`]: a caller's path (after `/a2a/{agent}`), query and body
//!   read as the A2A method they name and its JSON-RPC `params`. A2A 1.0's
//!   paths are `/message:send`, `/message:stream`, `/tasks/{id}` (GET),
//!   `/tasks/{id}:cancel`, `/tasks/{id}:subscribe` (GET or POST),
//!   `/tasks/{id}/pushNotificationConfigs[/{config}]`, `/tasks` (GET) and
//!   `/extendedAgentCard`, optionally under a `/{tenant}` segment; 0.3's
//!   are the same under `/v1` (its extended card is `/v1/card`; it has no
//!   listing).
//! - [`outbound`]: the inverse, for an agent that serves this binding
//!   only: the HTTP method, path (ids percent-encoded, so an id can never
//!   step out of its segment) and body to send it.
//! - [`error_body`] and [`status_of`]: a JSON-RPC error as the binding's
//!   error (`{ "error": { code, status, message, details } }`, a
//!   `google.rpc.Status`) with its HTTP status; [`rpc_error_of`] the
//!   inverse, for an agent's REST error.
//!
//! Bodies are A2A 1.0's JSON (the same messages JSON-RPC carries); 0.3's
//! REST bodies are its protobuf JSON, which `v03` converts.

use serde_json::{json, Map, Value};

pub use crate::path::{percent_encode, Outbound, Refused, MAX_SEGMENT_BYTES};
use crate::path::{segment, shown, Query};
use crate::rpc::{self, Method, Version};
use crate::v03;

/// One caller's request, read: what it asks and its JSON-RPC `params`.
#[derive(Debug, Clone, PartialEq)]
pub struct Inbound {
    /// The A2A method.
    pub method: Method,
    /// The version its path belongs to.
    pub version: Version,
    /// Its params, as a JSON-RPC request of that version carries them.
    pub params: Map<String, Value>,
}

/// Reads a request of this binding: `http` is its method, `path` what
/// follows `/a2a/{agent}` (still percent-encoded), `query` its query.
pub fn inbound(http: &str, path: &str, query: Option<&str>, body: &[u8]) -> Result<Inbound, Refused> {
    let (version, rest) = match path.strip_prefix("/v1/") {
        Some(rest) => (Version::V03, rest),
        None => (Version::V1, path.strip_prefix('/').unwrap_or(path)),
    };
    let mut segments = Vec::new();
    for raw in rest.split('/') {
        segments.push(segment(raw)?);
    }
    // A 1.0 path may start with the tenant the card's interface names.
    let mut tenant = None;
    if version == Version::V1
        && segments.len() > 1
        && !matches!(segments[0].as_str(), "tasks" | "message:send" | "message:stream" | "extendedAgentCard")
    {
        tenant = Some(segments.remove(0));
    }
    let names: Vec<&str> = segments.iter().map(String::as_str).collect();
    let not_found = || Refused::new(rpc::METHOD_NOT_FOUND, format!("no A2A HTTP+JSON route {http} {}", shown(path)));
    let (method, task, config) = match (http, names.as_slice()) {
        ("POST", ["message:send"]) => (Method::Send, None, None),
        ("POST", ["message:stream"]) => (Method::Stream, None, None),
        ("GET", ["tasks"]) if version == Version::V1 => (Method::ListTasks, None, None),
        ("GET", ["extendedAgentCard"]) if version == Version::V1 => (Method::ExtendedCard, None, None),
        ("GET", ["card"]) if version == Version::V03 => (Method::ExtendedCard, None, None),
        (_, ["tasks", task]) => match (http, task.rsplit_once(':')) {
            ("POST", Some((id, "cancel"))) => (Method::CancelTask, Some(id), None),
            ("GET" | "POST", Some((id, "subscribe"))) => (Method::Subscribe, Some(id), None),
            ("GET", _) => (Method::GetTask, Some(*task), None),
            _ => return Err(not_found()),
        },
        ("POST", ["tasks", task, "pushNotificationConfigs"]) => (Method::SetPush, Some(*task), None),
        ("GET", ["tasks", task, "pushNotificationConfigs"]) => (Method::ListPush, Some(*task), None),
        ("GET", ["tasks", task, "pushNotificationConfigs", config]) => (Method::GetPush, Some(*task), Some(*config)),
        ("DELETE", ["tasks", task, "pushNotificationConfigs", config]) => {
            (Method::DeletePush, Some(*task), Some(*config))
        }
        _ => return Err(not_found()),
    };
    if task.is_some_and(str::is_empty) {
        return Err(Refused::new(rpc::INVALID_REQUEST, "the path names an empty task id"));
    }
    let query = Query::read(query)?;
    let body = match (method, body.iter().all(u8::is_ascii_whitespace)) {
        (Method::Send | Method::Stream | Method::SetPush, true) => {
            return Err(Refused::new(rpc::INVALID_REQUEST, "this request needs a JSON object body"))
        }
        (Method::Send | Method::Stream | Method::SetPush | Method::CancelTask, false) => {
            match serde_json::from_slice::<Value>(body) {
                Ok(Value::Object(body)) => body,
                Ok(_) => return Err(Refused::new(rpc::INVALID_REQUEST, "the body must be a JSON object")),
                Err(_) => return Err(Refused::new(rpc::PARSE_ERROR, "the body is not JSON")),
            }
        }
        _ => Map::new(),
    };
    let params = match version {
        Version::V1 => params_v1(method, task, config, &query, body, tenant)?,
        Version::V03 => v03::params_of_rest(method, task, config, &query, body)?,
    };
    Ok(Inbound { method, version, params })
}

/// A2A 1.0's params: the body as it is (its messages are JSON-RPC's),
/// the path's ids and the query's numbers added.
fn params_v1(
    method: Method,
    task: Option<&str>,
    config: Option<&str>,
    query: &Query,
    body: Map<String, Value>,
    tenant: Option<String>,
) -> Result<Map<String, Value>, Refused> {
    let mut params = body;
    match method {
        Method::GetTask => {
            params.insert("id".into(), Value::from(task.unwrap_or_default()));
            if let Some(length) = query.number("historyLength")? {
                params.insert("historyLength".into(), Value::from(length));
            }
        }
        Method::CancelTask | Method::Subscribe => {
            params.insert("id".into(), Value::from(task.unwrap_or_default()));
        }
        Method::SetPush => {
            params.insert("taskId".into(), Value::from(task.unwrap_or_default()));
        }
        Method::GetPush | Method::DeletePush => {
            params.insert("taskId".into(), Value::from(task.unwrap_or_default()));
            params.insert("id".into(), Value::from(config.unwrap_or_default()));
        }
        Method::ListPush => {
            params.insert("taskId".into(), Value::from(task.unwrap_or_default()));
            if let Some(size) = query.number("pageSize")? {
                params.insert("pageSize".into(), Value::from(size));
            }
            if let Some(token) = query.get("pageToken") {
                params.insert("pageToken".into(), Value::from(token));
            }
        }
        Method::Send | Method::Stream | Method::ListTasks | Method::ExtendedCard => {}
    }
    if let Some(tenant) = tenant {
        params.insert("tenant".into(), Value::String(tenant));
    }
    Ok(params)
}

/// The request of this binding that asks what `method` with `params`
/// (JSON-RPC's, of `version`) asks.
pub fn outbound(method: Method, version: Version, params: &Map<String, Value>) -> Result<Outbound, Refused> {
    if version == Version::V03 {
        return v03::rest_of_params(method, params);
    }
    let text = |name: &str| params.get(name).and_then(Value::as_str).map(percent_encode).unwrap_or_default();
    let tenant = params.get("tenant").and_then(Value::as_str).filter(|t| !t.is_empty());
    let prefix = tenant.map(|t| format!("/{}", percent_encode(t))).unwrap_or_default();
    let mut body = params.clone();
    body.remove("tenant");
    let (http, path, body) = match method {
        Method::Send => ("POST", "/message:send".to_owned(), Some(body)),
        Method::Stream => ("POST", "/message:stream".to_owned(), Some(body)),
        Method::GetTask => {
            let query = params.get("historyLength").and_then(Value::as_i64);
            let query = query.map(|n| format!("?historyLength={n}")).unwrap_or_default();
            ("GET", format!("/tasks/{}{query}", text("id")), None)
        }
        Method::CancelTask => ("POST", format!("/tasks/{}:cancel", text("id")), Some(body)),
        Method::Subscribe => ("POST", format!("/tasks/{}:subscribe", text("id")), None),
        Method::SetPush => ("POST", format!("/tasks/{}/pushNotificationConfigs", text("taskId")), Some(body)),
        Method::GetPush => ("GET", format!("/tasks/{}/pushNotificationConfigs/{}", text("taskId"), text("id")), None),
        Method::DeletePush => {
            ("DELETE", format!("/tasks/{}/pushNotificationConfigs/{}", text("taskId"), text("id")), None)
        }
        Method::ListPush => {
            let mut query = Vec::new();
            if let Some(size) = params.get("pageSize").and_then(Value::as_i64) {
                query.push(format!("pageSize={size}"));
            }
            if let Some(token) = params.get("pageToken").and_then(Value::as_str) {
                query.push(format!("pageToken={}", percent_encode(token)));
            }
            let query = if query.is_empty() { String::new() } else { format!("?{}", query.join("&")) };
            ("GET", format!("/tasks/{}/pushNotificationConfigs{query}", text("taskId")), None)
        }
        Method::ListTasks => ("GET", "/tasks".to_owned(), None),
        Method::ExtendedCard => ("GET", "/extendedAgentCard".to_owned(), None),
    };
    Ok(Outbound { http, path: format!("{prefix}{path}"), body: body.map(Value::Object) })
}

/// An agent's successful answer of this binding as JSON-RPC's `result`.
pub fn result_of(version: Version, method: Method, body: Value) -> Value {
    match version {
        Version::V1 => body,
        Version::V03 => v03::result_of_rest(method, body),
    }
}

/// JSON-RPC's `result` as this binding's answer body.
pub fn body_of(version: Version, method: Method, result: Value) -> Value {
    match version {
        Version::V1 => match result {
            // Deleting a config answers `{}` over this binding.
            Value::Null => json!({}),
            result => result,
        },
        Version::V03 => v03::rest_of_result(method, result),
    }
}

/// What each A2A and JSON-RPC error is over this binding: the JSON-RPC
/// code, the HTTP status, the `google.rpc.Status` code name, A2A's reason
/// (as a2a-sdk's `A2A_ERROR_MAPPING` has them) and the error's name, which
/// 0.3's REST clients read from a top-level `type`.
const ERRORS: [(i64, u16, &str, &str, &str); 14] = [
    (rpc::TASK_NOT_FOUND, 404, "NOT_FOUND", "TASK_NOT_FOUND", "TaskNotFoundError"),
    (-32002, 400, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE", "TaskNotCancelableError"),
    (-32003, 400, "FAILED_PRECONDITION", "PUSH_NOTIFICATION_NOT_SUPPORTED", "PushNotificationNotSupportedError"),
    (rpc::UNSUPPORTED_OPERATION, 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION", "UnsupportedOperationError"),
    (-32005, 400, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED", "ContentTypeNotSupportedError"),
    (rpc::INVALID_AGENT_RESPONSE, 502, "INTERNAL", "INVALID_AGENT_RESPONSE", "InvalidAgentResponseError"),
    (
        rpc::EXTENDED_CARD_NOT_CONFIGURED,
        400,
        "FAILED_PRECONDITION",
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
        "ExtendedAgentCardNotConfiguredError",
    ),
    (-32008, 400, "FAILED_PRECONDITION", "EXTENSION_SUPPORT_REQUIRED", "ExtensionSupportRequiredError"),
    (-32009, 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED", "VersionNotSupportedError"),
    (rpc::INVALID_PARAMS, 400, "INVALID_ARGUMENT", "INVALID_PARAMS", "InvalidParamsError"),
    (rpc::INVALID_REQUEST, 400, "INVALID_ARGUMENT", "INVALID_REQUEST", "InvalidRequestError"),
    (rpc::PARSE_ERROR, 400, "INVALID_ARGUMENT", "INVALID_REQUEST", "JSONParseError"),
    (rpc::METHOD_NOT_FOUND, 404, "NOT_FOUND", "METHOD_NOT_FOUND", "MethodNotFoundError"),
    (rpc::INTERNAL_ERROR, 500, "INTERNAL", "INTERNAL_ERROR", "InternalError"),
];

/// The `google.rpc.Status` code name of HTTP status `status`.
fn status_name(status: u16) -> &'static str {
    match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        402 | 429 => "RESOURCE_EXHAUSTED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        413 => "INVALID_ARGUMENT",
        502..=504 => "UNAVAILABLE",
        _ => "INTERNAL",
    }
}

/// The HTTP status a JSON-RPC `error` is answered with over this binding.
/// `held` is the status the gateway gave its own refusal (401, 403, 429,
/// 502, 503); an A2A error takes its binding's own.
pub fn status_of(error: &Value, held: u16) -> u16 {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(rpc::INTERNAL_ERROR);
    match code {
        rpc::FORBIDDEN => {
            if matches!(held, 401 | 403) {
                held
            } else {
                403
            }
        }
        rpc::LIMITED => {
            if (400..500).contains(&held) {
                held
            } else {
                429
            }
        }
        rpc::INTERNAL_ERROR if matches!(held, 502..=504) => held,
        code => ERRORS.iter().find(|e| e.0 == code).map_or(500, |e| e.1),
    }
}

/// A JSON-RPC `error` as this binding's error body, answered with
/// `status`: its message, and its details (the gateway's own
/// `ErrorInfo`, or one of A2A's domain naming the error's reason, which
/// the SDKs map back to their own errors).
pub fn error_body(error: &Value, status: u16) -> Value {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(rpc::INTERNAL_ERROR);
    let message = error.get("message").and_then(Value::as_str).unwrap_or("the call failed");
    let known = ERRORS.iter().find(|e| e.0 == code);
    let details = match error.get("data") {
        Some(Value::Array(details))
            if details.iter().any(|d| d.get("@type").and_then(Value::as_str) == Some(ERROR_INFO)) =>
        {
            Value::Array(details.clone())
        }
        _ => {
            let reason = known.map_or("INTERNAL_ERROR", |e| e.3);
            json!([{ "@type": ERROR_INFO, "reason": reason, "domain": A2A_DOMAIN, "metadata": {} }])
        }
    };
    let name = match known {
        Some(known) if code != rpc::INTERNAL_ERROR => known.2,
        _ => status_name(status),
    };
    json!({ "error": { "code": status, "status": name, "message": message, "details": details } })
}

/// [`error_body`] in `version`'s flavour: 0.3's REST clients read the
/// error's name from a top-level `type` (and its `message` beside it),
/// 1.0's the `google.rpc.Status`; a 0.3 answer carries both.
pub fn error_body_in(version: Version, error: &Value, status: u16) -> Value {
    let mut body = error_body(error, status);
    if version == Version::V03 {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(rpc::INTERNAL_ERROR);
        if let Some(known) = ERRORS.iter().find(|e| e.0 == code) {
            body["type"] = Value::from(known.4);
        }
        body["message"] = body["error"]["message"].clone();
    }
    body
}

/// The `@type` of a `google.rpc.ErrorInfo`.
const ERROR_INFO: &str = "type.googleapis.com/google.rpc.ErrorInfo";
/// The domain of A2A's own errors.
const A2A_DOMAIN: &str = "a2a-protocol.org";

/// An agent's error of this binding (its body, answered with `status`)
/// as a JSON-RPC `error`: the code its reason names (else its status's),
/// its message, its details as `data`.
pub fn rpc_error_of(body: &Value, status: u16) -> Value {
    let error = body.get("error");
    let details = error.and_then(|e| e.get("details")).and_then(Value::as_array);
    let reason = details
        .and_then(|d| d.iter().find(|d| d.get("@type").and_then(Value::as_str) == Some(ERROR_INFO)))
        .and_then(|info| info.get("reason"))
        .and_then(Value::as_str);
    let code = reason.and_then(|reason| ERRORS.iter().find(|e| e.3 == reason)).map(|e| e.0).unwrap_or(match status {
        404 => rpc::TASK_NOT_FOUND,
        400 => rpc::INVALID_PARAMS,
        _ => rpc::INTERNAL_ERROR,
    });
    let message = error.and_then(|e| e.get("message")).and_then(Value::as_str);
    let message = message.map_or_else(|| format!("the agent answered {status}"), |m| shown_long(m).to_owned());
    let mut out = json!({ "code": code, "message": message });
    if let Some(details) = details {
        out["data"] = Value::Array(details.iter().take(8).cloned().collect());
    }
    out
}

/// At most 1 KiB of an agent's message.
fn shown_long(text: &str) -> &str {
    let mut end = text.len().min(1024);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request (method, path, query, body) and the method and params it is read as.
    type Case = (&'static str, &'static str, Option<&'static str>, &'static str, Method, Value);

    fn read(http: &str, path: &str, query: Option<&str>, body: &str) -> Result<Inbound, Refused> {
        inbound(http, path, query, body.as_bytes())
    }

    /// The paths and bodies a2a-sdk 1.3.0's `RestTransport` sends
    /// (`client/transports/rest.py`), read as the JSON-RPC params its
    /// `JsonRpcTransport` would have sent for the same call.
    #[test]
    fn each_v1_route_is_read_as_its_json_rpc_request() {
        let message = r#"{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]},"configuration":{"returnImmediately":true}}"#;
        let sent = read("POST", "/message:send", None, message).unwrap_or_else(|e| unreachable!("{e:?}"));
        assert_eq!((sent.method, sent.version), (Method::Send, Version::V1));
        assert_eq!(Value::Object(sent.params), serde_json::from_str::<Value>(message).unwrap_or_default());
        let cases: [Case; 10] = [
            ("POST", "/message:stream", None, r#"{"message":{}}"#, Method::Stream, json!({"message": {}})),
            (
                "GET",
                "/tasks/t-1",
                Some("historyLength=3"),
                "",
                Method::GetTask,
                json!({"id": "t-1", "historyLength": 3}),
            ),
            ("POST", "/tasks/t-1:cancel", None, r#"{"id":"t-1"}"#, Method::CancelTask, json!({"id": "t-1"})),
            ("POST", "/tasks/t-1:cancel", None, "", Method::CancelTask, json!({"id": "t-1"})),
            ("GET", "/tasks/t-1:subscribe", None, "", Method::Subscribe, json!({"id": "t-1"})),
            ("POST", "/tasks/t%3A1:subscribe", None, "", Method::Subscribe, json!({"id": "t:1"})),
            (
                "POST",
                "/tasks/t-1/pushNotificationConfigs",
                None,
                r#"{"taskId":"t-1","url":"https://hooks.example/a"}"#,
                Method::SetPush,
                json!({"taskId": "t-1", "url": "https://hooks.example/a"}),
            ),
            (
                "GET",
                "/tasks/t-1/pushNotificationConfigs/c-2",
                None,
                "",
                Method::GetPush,
                json!({"taskId": "t-1", "id": "c-2"}),
            ),
            (
                "GET",
                "/tasks/t-1/pushNotificationConfigs",
                Some("pageSize=5&pageToken=a%20b"),
                "",
                Method::ListPush,
                json!({"taskId": "t-1", "pageSize": 5, "pageToken": "a b"}),
            ),
            (
                "DELETE",
                "/tasks/t-1/pushNotificationConfigs/c-2",
                None,
                "",
                Method::DeletePush,
                json!({"taskId": "t-1", "id": "c-2"}),
            ),
        ];
        for (http, path, query, body, method, params) in cases {
            let read = read(http, path, query, body).unwrap_or_else(|e| unreachable!("{path}: {e:?}"));
            assert_eq!((read.method, Value::Object(read.params)), (method, params), "{http} {path}");
        }
        assert_eq!(read("GET", "/tasks", None, "").map(|r| r.method), Ok(Method::ListTasks));
        assert_eq!(read("GET", "/extendedAgentCard", None, "").map(|r| r.method), Ok(Method::ExtendedCard));
        // Under a tenant, the path it names.
        let tenanted = read("GET", "/acme/tasks/t-1", None, "").unwrap_or_else(|e| unreachable!("{e:?}"));
        assert_eq!(Value::Object(tenanted.params), json!({"id": "t-1", "tenant": "acme"}));
    }

    #[test]
    fn hostile_paths_and_bodies_are_refused_with_their_code() {
        let code = |http: &str, path: &str, query: Option<&str>, body: &str| {
            read(http, path, query, body).err().map(|e| e.code)
        };
        assert_eq!(code("GET", "/tasks/..", None, ""), Some(rpc::INVALID_REQUEST));
        assert_eq!(code("GET", "/tasks/%2E%2E", None, ""), Some(rpc::INVALID_REQUEST));
        assert_eq!(code("GET", "/tasks/a%2Fb", None, ""), Some(rpc::INVALID_REQUEST));
        assert_eq!(code("GET", "/tasks/a%5Cb", None, ""), Some(rpc::INVALID_REQUEST));
        assert_eq!(code("GET", "/tasks/a%00b", None, ""), Some(rpc::INVALID_REQUEST));
        assert_eq!(code("GET", "/tasks/%ff", None, ""), Some(rpc::INVALID_REQUEST));
        assert_eq!(code("GET", "/tasks/%4", None, ""), Some(rpc::INVALID_REQUEST));
        assert_eq!(code("GET", &format!("/tasks/{}", "t".repeat(300)), None, ""), Some(rpc::INVALID_REQUEST));
        assert_eq!(code("GET", "/tasks/../../admin", None, ""), Some(rpc::INVALID_REQUEST));
        assert_eq!(code("GET", "/tasks/:cancel", None, ""), None, "a task named `:cancel` is read");
        assert_eq!(code("POST", "/tasks/:cancel", None, ""), Some(rpc::INVALID_REQUEST), "no task id");
        assert_eq!(code("POST", "/message:send", None, "{"), Some(rpc::PARSE_ERROR));
        assert_eq!(code("POST", "/message:send", None, "[1]"), Some(rpc::INVALID_REQUEST));
        assert_eq!(code("POST", "/message:send", None, ""), Some(rpc::INVALID_REQUEST));
        assert_eq!(code("GET", "/message:send", None, ""), Some(rpc::METHOD_NOT_FOUND));
        assert_eq!(code("PUT", "/tasks/t", None, ""), Some(rpc::METHOD_NOT_FOUND));
        assert_eq!(code("GET", "/tasks/t", Some("historyLength=lots"), ""), Some(rpc::INVALID_PARAMS));
        assert_eq!(code("GET", "/v1/tasks", None, ""), Some(rpc::METHOD_NOT_FOUND), "0.3 has no listing");
        assert_eq!(code("GET", "/", None, ""), Some(rpc::METHOD_NOT_FOUND));
    }

    /// Every path of up to four segments drawn from the tricky ones, with
    /// every method: what is read is sent on with no step out of a
    /// segment, and no id it names holds a separator.
    #[test]
    fn no_path_read_steps_out_when_sent_on() {
        const SEGMENTS: [&str; 14] = [
            "tasks",
            "v1",
            "..",
            ".",
            "%2E%2E",
            "%2e",
            "a%2Fb",
            "t:cancel",
            "t:subscribe",
            "pushNotificationConfigs",
            "message:send",
            "card",
            "%",
            "",
        ];
        let mut read = 0;
        for count in 1..=4u32 {
            for mut pick in 0..SEGMENTS.len().pow(count) {
                let mut path = String::new();
                for _ in 0..count {
                    path.push('/');
                    path.push_str(SEGMENTS[pick % SEGMENTS.len()]);
                    pick /= SEGMENTS.len();
                }
                for http in ["GET", "POST", "DELETE"] {
                    let Ok(inbound) = inbound(http, &path, None, b"{}") else { continue };
                    read += 1;
                    for name in ["id", "taskId", "tenant"] {
                        let id = inbound.params.get(name).and_then(Value::as_str).unwrap_or_default();
                        assert!(!id.contains('/') && id != ".." && id != ".", "{http} {path}: {id}");
                    }
                    if let Ok(out) = outbound(inbound.method, inbound.version, &inbound.params) {
                        assert!(out.path.split('/').all(|s| s != ".." && s != "."), "{http} {path}: {}", out.path);
                    }
                }
            }
        }
        assert!(read > 100, "the walk reads paths too: {read}");
    }

    #[test]
    fn outbound_requests_keep_every_id_inside_its_segment() {
        let params = |v: Value| v.as_object().cloned().unwrap_or_default();
        let get = outbound(Method::GetTask, Version::V1, &params(json!({"id": "../../admin", "historyLength": 2})));
        assert_eq!(get.map(|o| (o.http, o.path)), Ok(("GET", "/tasks/..%2F..%2Fadmin?historyLength=2".to_owned())));
        let push = outbound(Method::DeletePush, Version::V1, &params(json!({"taskId": "t 1", "id": "c/2"})));
        assert_eq!(push.map(|o| o.path), Ok("/tasks/t%201/pushNotificationConfigs/c%2F2".to_owned()));
        let sent = outbound(Method::Send, Version::V1, &params(json!({"message": {"parts": []}, "tenant": "acme"})));
        let sent = sent.unwrap_or_else(|e| unreachable!("{e:?}"));
        assert_eq!((sent.http, sent.path.as_str()), ("POST", "/acme/message:send"));
        assert_eq!(sent.body, Some(json!({"message": {"parts": []}})), "the tenant is the path's");
        // A tenant or an id a body (or an agent) names is a segment too.
        let stepping = outbound(Method::Send, Version::V1, &params(json!({"tenant": "..", "message": {}})));
        assert_eq!(stepping.map(|o| o.path), Ok("/%2E%2E/message:send".to_owned()));
        let dot = outbound(Method::GetTask, Version::V1, &params(json!({"id": "."})));
        assert_eq!(dot.map(|o| o.path), Ok("/tasks/%2E".to_owned()));
        let cancel = outbound(Method::CancelTask, Version::V1, &params(json!({"id": "t"})));
        assert_eq!(cancel.map(|o| (o.path, o.body)), Ok(("/tasks/t:cancel".to_owned(), Some(json!({"id": "t"})))));
    }

    /// The error bodies a2a-sdk's `build_rest_error_payload` writes, and
    /// what its `_parse_rest_error` reads back.
    #[test]
    fn errors_take_the_bindings_shape_and_status() {
        let not_found = json!({"code": rpc::TASK_NOT_FOUND, "message": "Task not found"});
        assert_eq!(status_of(&not_found, 404), 404);
        assert_eq!(
            error_body(&not_found, 404),
            json!({"error": {"code": 404, "status": "NOT_FOUND", "message": "Task not found", "details": [
                {"@type": ERROR_INFO, "reason": "TASK_NOT_FOUND", "domain": A2A_DOMAIN, "metadata": {}}
            ]}})
        );
        let mut metadata = Map::new();
        metadata.insert("agent".into(), json!("research"));
        let refusal = rpc::refusal(&Value::Null, rpc::LIMITED, "budget spent", "QUOTA_EXCEEDED", metadata);
        let error = &refusal["error"];
        assert_eq!(status_of(error, 429), 429);
        assert_eq!(status_of(error, 0), 429, "a limit is a 429 even when no status was held");
        let body = error_body(error, 429);
        assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED");
        assert_eq!(body["error"]["details"][0]["reason"], "QUOTA_EXCEEDED");
        assert_eq!(body["error"]["details"][0]["domain"], "switchyard");
        let forbidden = json!({"code": rpc::FORBIDDEN, "message": "no"});
        assert_eq!(
            (status_of(&forbidden, 403), status_of(&forbidden, 401), status_of(&forbidden, 200)),
            (403, 401, 403)
        );
        assert_eq!(error_body(&forbidden, 401)["error"]["status"], "UNAUTHENTICATED");
        let unreachable = json!({"code": rpc::INTERNAL_ERROR, "message": "agent down"});
        assert_eq!((status_of(&unreachable, 502), status_of(&unreachable, 400)), (502, 500));
        assert_eq!(error_body(&unreachable, 502)["error"]["status"], "UNAVAILABLE");
        // An agent's REST error back to JSON-RPC: by its reason, else its status.
        let agent = json!({"error": {"code": 400, "status": "FAILED_PRECONDITION", "message": "done already",
            "details": [{"@type": ERROR_INFO, "reason": "TASK_NOT_CANCELABLE", "domain": A2A_DOMAIN}]}});
        assert_eq!(rpc_error_of(&agent, 400)["code"], -32002);
        assert_eq!(rpc_error_of(&agent, 400)["message"], "done already");
        assert_eq!(rpc_error_of(&json!("garbage"), 404)["code"], rpc::TASK_NOT_FOUND);
        assert_eq!(rpc_error_of(&json!({"error": 7}), 503)["code"], rpc::INTERNAL_ERROR);
        // 0.3's clients read the error's name (a2a-sdk's 0.3
        // `CompatRestTransport._handle_http_error`).
        let old = error_body_in(Version::V03, &not_found, 404);
        assert_eq!(
            (old["type"].as_str(), old["message"].as_str()),
            (Some("TaskNotFoundError"), Some("Task not found"))
        );
        assert_eq!(old["error"]["details"][0]["reason"], "TASK_NOT_FOUND");
        assert!(error_body_in(Version::V1, &not_found, 404).get("type").is_none());
        assert!(
            error_body_in(Version::V03, &forbidden, 403).get("type").is_none(),
            "the gateway's own has no A2A name"
        );
    }
}
