//! The HTTP+JSON binding's path and query pieces, shared by `rest` (A2A
//! 1.0) and `v03` (0.3's protobuf JSON): a path segment read and written
//! so an id never steps out of its segment, the query decoded, and the
//! refusal and outbound request both build.

use serde_json::Value;

use crate::rpc;

/// The longest path segment (a task, config or tenant id) read.
pub const MAX_SEGMENT_BYTES: usize = 256;

/// A request this binding cannot serve: the HTTP status, A2A's reason and
/// what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The JSON-RPC code it stands for (what [`error_body`] renders).
    pub code: i64,
    /// What is wrong.
    pub message: String,
}

impl Refused {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Refused {
        Refused { code, message: message.into() }
    }
}

/// A path segment percent-decoded: visible text, never `.`, `..`, nor
/// holding a `/` or `\` (an id is one segment here and when passed on).
pub(crate) fn segment(raw: &str) -> Result<String, Refused> {
    let bad = |why: &str| Refused::new(rpc::INVALID_REQUEST, format!("the path segment `{}` {why}", shown(raw)));
    let decoded = percent_decode(raw).ok_or_else(|| bad("is not percent-encoded UTF-8"))?;
    if decoded.len() > MAX_SEGMENT_BYTES {
        return Err(bad("is too long"));
    }
    if decoded == "." || decoded == ".." {
        return Err(bad("is a relative step"));
    }
    if decoded.chars().any(|c| c == '/' || c == '\\' || c.is_control()) {
        return Err(bad("holds a slash or a control character"));
    }
    Ok(decoded)
}

/// At most 64 bytes of `text`, for messages.
pub(crate) fn shown(text: &str) -> &str {
    let mut end = text.len().min(64);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn percent_decode(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `text` percent-encoded but for RFC 3986's unreserved characters: safe
/// as one path segment or query value whatever it holds (`.` and `..`,
/// which a path would read as steps, are encoded whole).
pub fn percent_encode(text: &str) -> String {
    if text == "." || text == ".." {
        return text.replace('.', "%2E");
    }
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A request's query, decoded.
#[derive(Debug, Default)]
pub(crate) struct Query(Vec<(String, String)>);

impl Query {
    pub(crate) fn read(query: Option<&str>) -> Result<Query, Refused> {
        let mut pairs = Vec::new();
        for pair in query.unwrap_or_default().split('&').filter(|p| !p.is_empty()).take(32) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |s: &str| percent_decode(&s.replace('+', " "));
            match (decode(name), decode(value)) {
                (Some(name), Some(value)) => pairs.push((name, value)),
                _ => return Err(Refused::new(rpc::INVALID_REQUEST, "the query is not percent-encoded UTF-8")),
            }
        }
        Ok(Query(pairs))
    }

    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    pub(crate) fn number(&self, name: &str) -> Result<Option<i64>, Refused> {
        self.get(name)
            .map(|v| {
                v.parse::<i64>().map_err(|_| Refused::new(rpc::INVALID_PARAMS, format!("`{name}` is not a number")))
            })
            .transpose()
    }
}

/// A request to send an agent of this binding.
#[derive(Debug, Clone, PartialEq)]
pub struct Outbound {
    /// `GET`, `POST` or `DELETE`.
    pub http: &'static str,
    /// Its path and query, to append to the agent's base URL.
    pub path: String,
    /// Its JSON body, for the methods that have one.
    pub body: Option<Value>,
}
