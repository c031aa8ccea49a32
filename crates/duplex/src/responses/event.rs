//! The Responses socket's events as bytes: a `response.create` read into
//! the Responses request it stands for (its own members cut out, `stream`
//! set; never parsed into a tree), a conversation put before its input,
//! and the server events the gateway writes itself (errors, a warm-up's
//! response). Pure: no I/O.

use std::borrow::Cow;

use switchyard_codec::scan;
use switchyard_ir::{ErrorInfo, ErrorKind};

/// A `response.create`, read.
#[derive(Debug, PartialEq)]
pub(crate) struct Create {
    /// The Responses request it stands for (`stream: true`).
    pub(crate) body: Vec<u8>,
    /// The lane of the socket it runs on (`stream_id`): turns of one
    /// lane run in order, and its events echo it.
    pub(crate) stream_id: Option<String>,
    /// `generate: false`: a warm-up that keeps its input and generates
    /// nothing (Codex's prewarm).
    pub(crate) generate: bool,
    /// The response it goes on from.
    pub(crate) previous: Option<String>,
}

/// The client events a socket knows.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Kind<'a> {
    /// `response.create`: a turn.
    Create,
    /// `response.processed`: Codex says it has a response (nothing to do).
    Processed,
    /// Anything else, by its type.
    Other(Cow<'a, str>),
}

/// The type of a client event, or why it has none.
pub(crate) fn kind(event: &[u8]) -> Result<Kind<'_>, ErrorInfo> {
    let raw = scan::top_level_value(event, "type").map_err(|err| invalid(format!("the event is not JSON: {err}")))?;
    let Some(raw) = raw else {
        return Err(param(
            invalid("the event has no `type`; send {\"type\": \"response.create\", ...}".into()),
            "type",
        ));
    };
    let name = raw
        .strip_prefix(b"\"")
        .and_then(|r| r.strip_suffix(b"\""))
        .and_then(scan::string_body)
        .ok_or_else(|| param(invalid("`type` must be a string".into()), "type"))?;
    Ok(match &*name {
        "response.create" => Kind::Create,
        "response.processed" => Kind::Processed,
        _ => Kind::Other(name),
    })
}

/// An event of a type the socket does not take, named with what it does take.
pub(crate) fn unsupported(name: &str) -> ErrorInfo {
    let shown: String = name.chars().take(64).collect();
    let mut info = ErrorInfo::new(
        ErrorKind::InvalidRequest,
        format!("`{shown}` is not supported on this socket: send `response.create` (one Responses request per event)"),
    );
    info.param = Some("type".into());
    info.code = Some("unsupported_event".into());
    info
}

/// Reads a `response.create` into the request it stands for.
pub(crate) fn read_create(event: &[u8]) -> Result<Create, ErrorInfo> {
    let top = scan::scan_request(event, &["stream_id", "generate", "previous_response_id", "background"])
        .map_err(|err| invalid(err.to_string()))?;
    let value = |at: usize| top.found[at].map(|(start, end)| &event[start as usize..end as usize]);
    let stream_id = match value(0) {
        None | Some(b"null") => None,
        Some(raw) => {
            Some(string(raw).ok_or_else(|| param(invalid("`stream_id` must be a string".into()), "stream_id"))?)
        }
    };
    if stream_id.as_ref().is_some_and(|id| id.len() > 256) {
        return Err(param(invalid("`stream_id` is longer than 256 bytes".into()), "stream_id"));
    }
    let generate = match value(1) {
        None | Some(b"null" | b"true") => true,
        Some(b"false") => false,
        Some(_) => return Err(param(invalid("`generate` must be a boolean".into()), "generate")),
    };
    let previous =
        match value(2) {
            None | Some(b"null") => None,
            Some(raw) => Some(string(raw).ok_or_else(|| {
                param(invalid("`previous_response_id` must be a string".into()), "previous_response_id")
            })?),
        };
    if value(3) == Some(b"true") {
        return Err(param(
            invalid("`background` is not available on a socket: its response streams here as it is made".into()),
            "background",
        ));
    }
    let mut body = event.to_vec();
    for member in ["type", "stream_id", "generate", "background"] {
        if let Some(cut) = scan::without_member(&body, member).map_err(|err| invalid(err.to_string()))? {
            body = cut;
        }
    }
    body = match value_span(&body, "stream")? {
        Some(span) => scan::splice(&body, span, b"true"),
        None => insert_first(&body, b"\"stream\":true"),
    };
    Ok(Create { body, stream_id, generate, previous })
}

/// `body` (an object) with `member` (`"name":value`) as its first member.
fn insert_first(body: &[u8], member: &[u8]) -> Vec<u8> {
    let Some(open) = body.iter().position(|&b| b == b'{') else { return body.to_vec() };
    let rest = body[open + 1..].trim_ascii_start();
    let mut out = Vec::with_capacity(body.len() + member.len() + 1);
    out.extend_from_slice(&body[..=open]);
    out.extend_from_slice(member);
    if !rest.starts_with(b"}") {
        out.push(b',');
    }
    out.extend_from_slice(rest);
    out
}

/// The request's input as a list of items (a string input is the user
/// message it stands for; none is an empty list).
pub(crate) fn input_items(body: &[u8]) -> Result<Vec<u8>, ErrorInfo> {
    match scan::top_level_value(body, "input").map_err(|err| invalid(err.to_string()))? {
        Some(raw) if raw.first() == Some(&b'"') => {
            let text = string(raw).ok_or_else(|| param(invalid("`input` is not a valid string".into()), "input"))?;
            let item = serde_json::json!([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}]);
            Ok(serde_json::to_vec(&item).unwrap_or_else(|_| b"[]".to_vec()))
        }
        Some(raw) if raw.first() == Some(&b'[') => Ok(raw.to_vec()),
        _ => Ok(b"[]".to_vec()),
    }
}

/// `body` going on from `context` (the conversation a response ended
/// with): its input is the context and then its own items, and
/// `previous_response_id` is cut out (any lane reads the whole).
pub(crate) fn continue_from(body: &[u8], context: &[u8]) -> Result<Vec<u8>, ErrorInfo> {
    let own = input_items(body)?;
    let whole = scan::join_arrays(&[context, &own]);
    let body = match value_span(body, "input")? {
        Some(span) => scan::splice(body, span, &whole),
        None => {
            let mut member = b"\"input\":".to_vec();
            member.extend_from_slice(&whole);
            insert_first(body, &member)
        }
    };
    Ok(scan::without_member(&body, "previous_response_id").map_err(|err| invalid(err.to_string()))?.unwrap_or(body))
}

/// Where `key`'s top-level value is in `body`.
fn value_span(body: &[u8], key: &str) -> Result<Option<std::ops::Range<usize>>, ErrorInfo> {
    let value = scan::top_level_value(body, key).map_err(|err| invalid(err.to_string()))?;
    Ok(value.map(|raw| {
        let start = raw.as_ptr() as usize - body.as_ptr() as usize;
        start..start + raw.len()
    }))
}

/// The socket's `error` event for `error` (an HTTP error body's `error`
/// object, as the engine wrote it in the Responses shape) with `status`,
/// echoing `stream_id`, with `retry_after` as its `headers`.
pub(crate) fn error_event(status: u16, error: &[u8], stream_id: Option<&str>, retry_after: Option<&str>) -> String {
    let mut event = String::with_capacity(error.len() + 96);
    event.push_str("{\"type\":\"error\",\"status\":");
    event.push_str(&status.to_string());
    event.push_str(",\"error\":");
    event.push_str(std::str::from_utf8(error).unwrap_or("{}"));
    if let Some(after) = retry_after {
        event.push_str(",\"headers\":{\"retry-after\":");
        event.push_str(&serde_json::to_string(after).unwrap_or_default());
        event.push('}');
    }
    event.push('}');
    with_stream_id(event, stream_id)
}

/// The `error` object of an error body (`{"error": {...}}`), else one made
/// from `fallback`.
pub(crate) fn error_object(body: &[u8], fallback: &ErrorInfo) -> Vec<u8> {
    match scan::top_level_value(body, "error") {
        Ok(Some(error)) if error.first() == Some(&b'{') => error.to_vec(),
        _ => object_of(fallback),
    }
}

/// An `error` object for `info`.
pub(crate) fn object_of(info: &ErrorInfo) -> Vec<u8> {
    let value = serde_json::json!({
        "type": error_type(info.code.as_deref(), info.kind),
        "code": info.code,
        "message": info.message,
        "param": info.param,
    });
    serde_json::to_vec(&value).unwrap_or_default()
}

/// OpenAI's error type for a kind (codes that name their own class first).
pub(crate) fn error_type(code: Option<&str>, kind: ErrorKind) -> &'static str {
    match (code, kind) {
        (Some("insufficient_quota"), _) | (_, ErrorKind::QuotaExceeded) => "insufficient_quota",
        (
            _,
            ErrorKind::InvalidRequest | ErrorKind::ContextLength | ErrorKind::NotFound | ErrorKind::RequestTooLarge,
        ) => "invalid_request_error",
        (_, ErrorKind::Authentication) => "authentication_error",
        (_, ErrorKind::PermissionDenied) => "permission_error",
        (_, ErrorKind::RateLimit) => "rate_limit_error",
        _ => "server_error",
    }
}

/// An HTTP stream's flat `error` event (`code`, `message`, `param` at its
/// top) in the socket's shape, the error inside `error`, with its class.
pub(crate) fn nested_error(data: &str) -> Option<String> {
    let bytes = data.as_bytes();
    if scan::top_level_value(bytes, "error").ok().flatten().is_some() {
        return None;
    }
    let text = |key: &str| scan::first_string_member(bytes, key).map(str::to_owned);
    let (code, message, param) = (text("code"), text("message"), text("param"));
    let kind = match code.as_deref() {
        Some(c) if c.starts_with("invalid") || c == "context_length_exceeded" || c == "policy_violation" => {
            ErrorKind::InvalidRequest
        }
        Some("rate_limit_exceeded") => ErrorKind::RateLimit,
        Some("insufficient_quota") => ErrorKind::QuotaExceeded,
        _ => ErrorKind::Internal,
    };
    let sequence = scan::member_u64(bytes, &["sequence_number"]);
    let error = serde_json::json!({"type": error_type(code.as_deref(), kind), "code": code, "message": message.unwrap_or_default(), "param": param});
    let mut event = serde_json::json!({"type": "error", "error": error});
    if let (Some(sequence), Some(object)) = (sequence, event.as_object_mut()) {
        object.insert("sequence_number".into(), sequence.into());
    }
    Some(event.to_string())
}

/// `event` (a JSON object's text) with `"stream_id"` added, when there is one.
pub(crate) fn with_stream_id(mut event: String, stream_id: Option<&str>) -> String {
    let Some(id) = stream_id else { return event };
    if event.ends_with('}') {
        event.pop();
        event.push_str(",\"stream_id\":");
        event.push_str(&serde_json::to_string(id).unwrap_or_default());
        event.push('}');
    }
    event
}

/// A warm-up's two events (`generate: false`): its response created and
/// completed with no output and no usage.
pub(crate) fn warmup(id: &str, model: &str, created_at: i64) -> [String; 2] {
    let response = |status: &str| {
        serde_json::json!({
            "id": id, "object": "response", "created_at": created_at, "status": status, "model": model,
            "output": [], "parallel_tool_calls": true, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 0,
                      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 0},
        })
    };
    [
        serde_json::json!({"type": "response.created", "sequence_number": 0, "response": response("in_progress")})
            .to_string(),
        serde_json::json!({"type": "response.completed", "sequence_number": 1, "response": response("completed")})
            .to_string(),
    ]
}

/// A JSON string's text.
fn string(raw: &[u8]) -> Option<String> {
    serde_json::from_slice(raw).ok()
}

fn invalid(message: String) -> ErrorInfo {
    ErrorInfo::new(ErrorKind::InvalidRequest, message)
}

fn param(mut info: ErrorInfo, name: &str) -> ErrorInfo {
    info.param = Some(name.to_owned());
    info
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code: a failed unwrap is a failed test")]

    use super::*;

    #[test]
    fn a_create_is_its_request_streamed_without_the_sockets_members() {
        let event =
            br#"{"type":"response.create","model":"m","input":"hi","stream_id":"a","generate":true,"store":false}"#;
        let create = read_create(event).unwrap();
        assert_eq!(
            std::str::from_utf8(&create.body).unwrap(),
            r#"{"stream":true,"model":"m","input":"hi","store":false}"#
        );
        assert_eq!((create.stream_id.as_deref(), create.generate, create.previous), (Some("a"), true, None));
        let streamed = read_create(br#"{"type":"response.create","stream":false,"model":"m"}"#).unwrap();
        assert_eq!(std::str::from_utf8(&streamed.body).unwrap(), r#"{"stream":true,"model":"m"}"#);
        let warm =
            read_create(br#"{"type":"response.create","model":"m","generate":false,"previous_response_id":"r"}"#)
                .unwrap();
        assert_eq!((warm.generate, warm.previous.as_deref()), (false, Some("r")));
        assert_eq!(
            read_create(br#"{"type":"response.create","stream_id":7}"#).unwrap_err().param.as_deref(),
            Some("stream_id")
        );
        assert!(read_create(br#"{"type":"response.create","background":true}"#).is_err());
        assert!(read_create(b"{not json").is_err());
    }

    #[test]
    fn event_kinds_are_told_apart() {
        assert_eq!(kind(br#"{"type":"response.create"}"#).unwrap(), Kind::Create);
        assert_eq!(kind(br#"{"type":"response.processed","response_id":"r"}"#).unwrap(), Kind::Processed);
        assert_eq!(kind(br#"{"type":"response.steer"}"#).unwrap(), Kind::Other("response.steer".into()));
        assert!(kind(br#"{"model":"m"}"#).is_err() && kind(b"[1]").is_err() && kind(br#"{"type":1}"#).is_err());
        assert!(unsupported("response.steer").message.contains("`response.steer` is not supported"));
    }

    #[test]
    fn a_conversation_goes_before_the_input_and_the_id_goes() {
        let body = br#"{"stream":true,"model":"m","input":[{"type":"function_call_output","call_id":"c","output":"4"}],"previous_response_id":"r1"}"#;
        let context = br#"[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c"}]"#;
        let whole = continue_from(body, context).unwrap();
        assert_eq!(
            std::str::from_utf8(&whole).unwrap(),
            r#"{"stream":true,"model":"m","input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c"},{"type":"function_call_output","call_id":"c","output":"4"}]}"#
        );
        let text = continue_from(br#"{"model":"m","input":"next","previous_response_id":"r"}"#, b"[1]").unwrap();
        assert!(std::str::from_utf8(&text)
            .unwrap()
            .starts_with(r#"{"model":"m","input":[1,{"type":"message","role":"user""#));
        let none = continue_from(br#"{"model":"m","previous_response_id":"r"}"#, b"[1]").unwrap();
        assert_eq!(&none[..], br#"{"input":[1],"model":"m"}"#);
    }

    #[test]
    fn errors_take_the_sockets_shape() {
        let body = br#"{"error":{"message":"budget spent","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
        let fallback = ErrorInfo::new(ErrorKind::Internal, "x");
        let event = error_event(429, &error_object(body, &fallback), Some("s"), Some("3"));
        let value: serde_json::Value = serde_json::from_str(&event).unwrap();
        assert_eq!(value["type"], "error");
        assert_eq!(value["status"], 429);
        assert_eq!(value["error"]["code"], "insufficient_quota");
        assert_eq!(value["headers"]["retry-after"], "3");
        assert_eq!(value["stream_id"], "s");
        let flat = r#"{"type":"error","code":"policy_violation","message":"blocked","param":null,"sequence_number":4}"#;
        let nested: serde_json::Value = serde_json::from_str(&nested_error(flat).unwrap()).unwrap();
        assert_eq!(nested["error"]["type"], "invalid_request_error");
        assert_eq!(
            (nested["error"]["message"].as_str(), nested["sequence_number"].as_u64()),
            (Some("blocked"), Some(4))
        );
        assert!(nested_error(&event).is_none(), "already nested");
    }

    #[test]
    fn a_warmup_is_a_response_with_nothing_in_it() {
        let [created, completed] = warmup("resp_1", "m", 7);
        let completed: serde_json::Value = serde_json::from_str(&completed).unwrap();
        assert_eq!(
            (completed["type"].as_str(), completed["response"]["id"].as_str()),
            (Some("response.completed"), Some("resp_1"))
        );
        assert!(created.contains("\"in_progress\""));
    }
}
