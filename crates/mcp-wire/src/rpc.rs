//! JSON-RPC 2.0 as MCP uses it: one message per POST (batches were
//! dropped from the protocol), requests, notifications and responses told
//! apart by their members, the protocol versions this gateway speaks (the
//! handshake revisions and the stateless one), and the error codes it
//! answers with. Pure: no I/O.

use serde_json::{json, Map, Value};

/// The handshake revisions served, newest first: a session opened with
/// `initialize`.
pub const VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// The stateless revision (SEP-2575 and the rest of 2026-07-28): no
/// `initialize`, no session; every request carries its version, client
/// info and capabilities in `params._meta`, and its method (and name) in
/// headers.
pub const STATELESS: &str = "2026-07-28";

/// Every revision served, oldest first (what `server/discover` lists).
pub const SUPPORTED: [&str; 4] = ["2025-03-26", "2025-06-18", "2025-11-25", STATELESS];

/// `params._meta` key: the request's protocol version (2026-07-28).
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `params._meta` key: the client's `Implementation` (2026-07-28).
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `params._meta` key: the client's capabilities (2026-07-28).
pub const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// The prefix of every `_meta` key the protocol reserves.
const META_RESERVED: &str = "io.modelcontextprotocol/";

/// The version answered to a client that asked for `asked` in
/// `initialize`: the same when served, else the newest handshake revision
/// (the client then decides whether to go on). The stateless revision is
/// never agreed this way: it has no handshake.
pub fn negotiate(asked: Option<&str>) -> &'static str {
    asked.and_then(|asked| VERSIONS.iter().find(|v| **v == asked)).copied().unwrap_or(VERSIONS[0])
}

/// Which era a request belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// `initialize`, then a session named in `mcp-session-id`.
    Handshake,
    /// 2026-07-28: each request stands alone.
    Stateless,
}

/// The era a POST's `mcp-protocol-version` header names: stateless for
/// any version that is not a handshake revision (an unknown one is then
/// refused by [`envelope`] with the versions served), handshake without
/// the header (an `initialize`, or a client of 2025-03-26).
pub fn era(version_header: Option<&str>) -> Era {
    match version_header {
        Some(version) if !VERSIONS.contains(&version) => Era::Stateless,
        _ => Era::Handshake,
    }
}

/// HTTP headers do not match the request body (2026-07-28).
pub const HEADER_MISMATCH: i64 = -32020;
/// The request's protocol version is not served (2026-07-28).
pub const UNSUPPORTED_VERSION: i64 = -32022;
/// A handle (session id, cursor) this gateway minted was refused: for
/// another key or route, altered, or expired.
pub const HANDLE_REFUSED: i64 = -32004;

/// What a stateless request's headers say of it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Headers<'a> {
    /// `mcp-protocol-version`.
    pub version: Option<&'a str>,
    /// `mcp-method`.
    pub method: Option<&'a str>,
    /// `mcp-name`, as sent (maybe `=?base64?…?=`).
    pub name: Option<&'a str>,
}

/// Why a stateless request is refused before it is read further.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// The JSON-RPC code.
    pub code: i64,
    /// Why.
    pub message: String,
    /// More, for an unsupported version: the versions served.
    pub data: Option<Value>,
}

/// The member of a method's params its `mcp-name` header repeats.
pub fn name_member(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// Checks a stateless request's envelope in the order the revision gives:
/// `_meta` carries the version and capabilities; the headers agree with
/// the body; the version is served. The version comes back.
pub fn envelope<'a>(method: &str, params: &'a Map<String, Value>, headers: Headers<'_>) -> Result<&'a str, Refusal> {
    let refuse = |code, message: String| Refusal { code, message, data: None };
    let Some(meta) = params.get("_meta").and_then(Value::as_object) else {
        return Err(refuse(
            INVALID_PARAMS,
            format!("params._meta must be an object carrying `{META_VERSION}` and `{META_CAPABILITIES}`"),
        ));
    };
    let missing: Vec<&str> = [META_VERSION, META_CAPABILITIES].into_iter().filter(|k| !meta.contains_key(*k)).collect();
    if !missing.is_empty() {
        return Err(refuse(INVALID_PARAMS, format!("params._meta is missing {}", missing.join(", "))));
    }
    let version = meta.get(META_VERSION).and_then(Value::as_str);
    if headers.version.is_none() || headers.version != version {
        return Err(refuse(HEADER_MISMATCH, "mcp-protocol-version does not match params._meta's version".into()));
    }
    if headers.method != Some(method) {
        return Err(refuse(HEADER_MISMATCH, "mcp-method does not match the request's method".into()));
    }
    if let Some(member) = name_member(method) {
        if let Some(named) = params.get(member).and_then(Value::as_str) {
            if headers.name.and_then(decode_header_value).as_deref() != Some(named) {
                return Err(refuse(HEADER_MISMATCH, format!("mcp-name does not match params.{member}")));
            }
        }
    }
    match version {
        Some(STATELESS) => Ok(STATELESS),
        Some(other) => Err(Refusal {
            code: UNSUPPORTED_VERSION,
            message: "Unsupported protocol version".into(),
            data: Some(json!({ "supported": [STATELESS], "requested": other })),
        }),
        None => Err(refuse(INVALID_PARAMS, format!("`{META_VERSION}` must be a string"))),
    }
}

/// `params` with the protocol's reserved `_meta` keys a caller sent
/// removed (they describe the caller's exchange with the gateway, not the
/// gateway's with a server); a `_meta` left empty goes too.
pub fn strip_envelope(params: &mut Map<String, Value>) {
    if let Some(Value::Object(meta)) = params.get_mut("_meta") {
        meta.retain(|key, _| !key.starts_with(META_RESERVED));
        if meta.is_empty() {
            params.remove("_meta");
        }
    }
}

/// `params` as the gateway sends them to a stateless server: its own
/// version, client info and (empty) capabilities in `_meta`, beside what
/// else `_meta` holds (a progress token).
pub fn stamp_envelope(params: &mut Map<String, Value>, client: &Value) {
    strip_envelope(params);
    // A `_meta` that is not an object carries nothing a server could read.
    if !params.get("_meta").is_some_and(Value::is_object) {
        params.insert("_meta".into(), Value::Object(Map::new()));
    }
    if let Some(Value::Object(meta)) = params.get_mut("_meta") {
        meta.insert(META_VERSION.into(), Value::String(STATELESS.into()));
        meta.insert(META_CLIENT_INFO.into(), client.clone());
        meta.insert(META_CAPABILITIES.into(), json!({}));
    }
}

/// Whether a method's result is cacheable in 2026-07-28 (it then names
/// `ttlMs` and `cacheScope`).
fn cacheable(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
    )
}

/// A result of `method` as a 2026-07-28 caller reads it: `resultType`
/// named, and a cacheable one marked private and stale at once (what one
/// key sees is its grants', never to be shared). What a server said of
/// these stays.
pub fn stamp_result(method: &str, result: &mut Value) {
    let Some(result) = result.as_object_mut() else { return };
    result.entry("resultType").or_insert_with(|| Value::String("complete".into()));
    if cacheable(method) {
        result.insert("cacheScope".into(), Value::String("private".into()));
        result.entry("ttlMs").or_insert(json!(0));
    }
}

/// An `mcp-name` header's value for `name`: as it is when it is visible
/// ASCII without edge spaces, else wrapped as `=?base64?…?=`.
pub fn encode_header_value(name: &str) -> String {
    let plain = name.bytes().all(|b| (0x20..0x7f).contains(&b))
        && name.trim() == name
        && !(name.starts_with("=?base64?") && name.ends_with("?="));
    if plain {
        return name.to_owned();
    }
    format!("=?base64?{}?=", base64_encode(name.as_bytes()))
}

/// The inverse of [`encode_header_value`]; `None` for a sentinel that is
/// not canonical base64 of UTF-8.
pub fn decode_header_value(value: &str) -> Option<String> {
    let Some(payload) = value.strip_prefix("=?base64?").and_then(|v| v.strip_suffix("?=")) else {
        return Some(value.to_owned());
    };
    let bytes = base64_decode(payload)?;
    let text = String::from_utf8(bytes).ok()?;
    // Non-canonical base64 never matches a body by accident.
    (base64_encode(text.as_bytes()) == payload).then_some(text)
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
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
        // The stateless revision has no handshake to agree it in.
        assert_eq!(negotiate(Some(STATELESS)), VERSIONS[0]);
        assert_eq!(era(None), Era::Handshake);
        assert_eq!(era(Some("2025-11-25")), Era::Handshake);
        assert_eq!(era(Some("2025-03-26")), Era::Handshake);
        assert_eq!(era(Some(STATELESS)), Era::Stateless);
        assert_eq!(era(Some("2099-01-01")), Era::Stateless, "refused by the envelope check with the versions served");
    }

    fn stateless(method: &str, extra: Value) -> Map<String, Value> {
        let mut params = json!({"_meta": {META_VERSION: STATELESS, META_CAPABILITIES: {}, META_CLIENT_INFO: {"name": "t", "version": "1"}}});
        if let (Some(params), Value::Object(extra)) = (params.as_object_mut(), extra) {
            params.extend(extra);
        }
        let _ = method;
        params.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_stateless_envelope_is_checked_in_order() {
        let headers = |method| Headers { version: Some(STATELESS), method: Some(method), name: None };
        let listing = stateless("tools/list", json!({}));
        assert_eq!(envelope("tools/list", &listing, headers("tools/list")), Ok(STATELESS));
        // No _meta, or one missing its capabilities.
        fn code(r: Result<&str, Refusal>) -> Result<&str, i64> {
            r.map_err(|r| r.code)
        }
        assert_eq!(code(envelope("tools/list", &Map::new(), headers("tools/list"))), Err(INVALID_PARAMS));
        let mut partial = listing.clone();
        partial["_meta"].as_object_mut().map(|m| m.remove(META_CAPABILITIES));
        assert_eq!(code(envelope("tools/list", &partial, headers("tools/list"))), Err(INVALID_PARAMS));
        // Headers that disagree with the body.
        let wrong_version = Headers { version: Some("2025-11-25"), ..headers("tools/list") };
        assert_eq!(code(envelope("tools/list", &listing, wrong_version)), Err(HEADER_MISMATCH));
        assert_eq!(code(envelope("tools/list", &listing, headers("tools/call"))), Err(HEADER_MISMATCH));
        let call = stateless("tools/call", json!({"name": "t__read"}));
        assert_eq!(code(envelope("tools/call", &call, headers("tools/call"))), Err(HEADER_MISMATCH), "no mcp-name");
        let named = Headers { name: Some("t__read"), ..headers("tools/call") };
        assert_eq!(envelope("tools/call", &call, named), Ok(STATELESS));
        let other = Headers { name: Some("t__close"), ..headers("tools/call") };
        assert_eq!(code(envelope("tools/call", &call, other)), Err(HEADER_MISMATCH));
        // A version not served: named, with the one that is.
        let mut future = listing.clone();
        future["_meta"][META_VERSION] = json!("2099-01-01");
        let refused = envelope("tools/list", &future, Headers { version: Some("2099-01-01"), ..headers("tools/list") });
        let refused = refused.err().unwrap_or_else(|| Refusal { code: 0, message: String::new(), data: None });
        assert_eq!(refused.code, UNSUPPORTED_VERSION);
        assert_eq!(refused.data, Some(json!({"supported": [STATELESS], "requested": "2099-01-01"})));
    }

    #[test]
    fn header_values_round_trip_and_envelopes_are_replaced() {
        for name in ["t__read", "files+file:///a b", " edge", "caf\u{e9}", "=?base64?x?="] {
            assert_eq!(decode_header_value(&encode_header_value(name)).as_deref(), Some(name));
        }
        assert_eq!(encode_header_value("t__read"), "t__read");
        assert_eq!(decode_header_value("=?base64?not base64?="), None);
        let mut params = json!({"name": "read", "_meta": {META_VERSION: "2099-01-01", "progressToken": 7}})
            .as_object()
            .cloned()
            .unwrap_or_default();
        stamp_envelope(&mut params, &json!({"name": "switchyard"}));
        assert_eq!(params["_meta"][META_VERSION], STATELESS);
        assert_eq!(params["_meta"]["progressToken"], 7, "the caller's progress token stays");
        strip_envelope(&mut params);
        assert_eq!(params["_meta"], json!({"progressToken": 7}));
        let mut odd = json!({"_meta": 5}).as_object().cloned().unwrap_or_default();
        stamp_envelope(&mut odd, &json!({}));
        assert_eq!(odd["_meta"][META_VERSION], STATELESS, "a `_meta` that is no object is replaced");
        let mut result = json!({"tools": [], "ttlMs": 5000, "cacheScope": "public"});
        stamp_result("tools/list", &mut result);
        assert_eq!(result, json!({"tools": [], "ttlMs": 5000, "cacheScope": "private", "resultType": "complete"}));
        let mut called = json!({"content": []});
        stamp_result("tools/call", &mut called);
        assert_eq!(called, json!({"content": [], "resultType": "complete"}));
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
