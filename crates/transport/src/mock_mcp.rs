//! The vendor fake's MCP server (`POST /mcp` on `switchyard mock-upstream`):
//! deterministic, for benchmarks and tests of the MCP gateway, speaking
//! either revision ([`Revision`]): at `/mcp` the handshake (`initialize`
//! names a session; any is accepted after), at `/mcp/stateless` 2026-07-28
//! (no session; `server/discover`; every request must carry the
//! revision's envelope and headers, or it is refused as that revision's
//! servers refuse it, so a gateway that forgets them fails). Tools:
//! `echo` answers with its `text` argument, `delete_everything` says it did.
//! A prompt, `greet` (`who`); resources `mock://readme`, `mock://contacts`
//! (an email address in it) and `mock://secret`, and the template
//! `mock://notes/{id}`.

use serde_json::{json, Value};

/// What the fake answers: a status, a session id to send, and the body.
pub struct McpReply {
    /// 200, 202 for a notification, 400 for what is not a message.
    pub status: u16,
    /// The session id, on `initialize`'s answer.
    pub session: Option<&'static str>,
    /// The JSON body (empty for a 202).
    pub body: Vec<u8>,
}

/// Which revision the fake speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revision {
    /// `initialize`, then a session (2025-11-25 and before).
    Handshake,
    /// 2026-07-28: stateless.
    Stateless,
}

/// The stateless revision.
const STATELESS: &str = "2026-07-28";

/// What a POST's headers said, for the stateless revision's checks.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sent<'a> {
    /// `mcp-protocol-version`.
    pub version: Option<&'a str>,
    /// `mcp-method`.
    pub method: Option<&'a str>,
    /// `mcp-name`.
    pub name: Option<&'a str>,
}

/// Answers one POSTed message as `revision` speaks.
pub fn respond_as(revision: Revision, sent: Sent<'_>, body: &[u8]) -> McpReply {
    if revision == Revision::Handshake {
        return respond(body);
    }
    let Ok(message) = serde_json::from_slice::<Value>(body) else {
        return respond(body);
    };
    let Some(id) = message.get("id").cloned() else {
        return McpReply { status: 202, session: None, body: Vec::new() };
    };
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
    let meta = message.get("params").and_then(|p| p.get("_meta"));
    let version = meta.and_then(|m| m.get("io.modelcontextprotocol/protocolVersion")).and_then(Value::as_str);
    let capabilities = meta.and_then(|m| m.get("io.modelcontextprotocol/clientCapabilities"));
    let named = match method {
        "tools/call" | "prompts/get" => message["params"].get("name").and_then(Value::as_str),
        "resources/read" => message["params"].get("uri").and_then(Value::as_str),
        _ => None,
    };
    let refused = |code: i64, text: &str| {
        let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}});
        McpReply { status: 400, session: None, body: error.to_string().into_bytes() }
    };
    if version.is_none() || capabilities.is_none() {
        return refused(-32602, "params._meta is missing the protocol version or client capabilities");
    }
    if sent.version != version || sent.method != Some(method) || (named.is_some() && sent.name != named) {
        return refused(-32020, "the headers do not match the request");
    }
    if version != Some(STATELESS) {
        return refused(-32022, "Unsupported protocol version");
    }
    let mut reply = match method {
        "initialize" => return refused(-32022, "initialize is not part of 2026-07-28"),
        "server/discover" => answer(
            id,
            Ok(json!({
                "supportedVersions": [STATELESS],
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": {"name": "mock", "version": "1"},
                "ttlMs": 0,
                "cacheScope": "public",
            })),
            None,
        ),
        _ => respond(body),
    };
    // Every result names its type in this revision.
    if let Ok(mut answer) = serde_json::from_slice::<Value>(&reply.body) {
        if let Some(result) = answer.get_mut("result").and_then(Value::as_object_mut) {
            result.insert("resultType".into(), json!("complete"));
            reply.body = answer.to_string().into_bytes();
        }
    }
    reply.session = None;
    reply
}

/// Answers one POSTed message (the handshake revision).
pub fn respond(body: &[u8]) -> McpReply {
    let Ok(message) = serde_json::from_slice::<Value>(body) else {
        let error = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "not JSON"}});
        return McpReply { status: 400, session: None, body: error.to_string().into_bytes() };
    };
    let Some(id) = message.get("id").cloned() else {
        return McpReply { status: 202, session: None, body: Vec::new() };
    };
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let (result, session) = match method {
        "initialize" => (
            Ok(json!({
                "protocolVersion": params.get("protocolVersion").cloned().unwrap_or(json!("2025-11-25")),
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": {"name": "mock", "version": "1"},
            })),
            Some("mock-session"),
        ),
        "tools/list" => (
            Ok(json!({"tools": [{
                "name": "echo",
                "description": "Answers with its text.",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            }, {
                "name": "delete_everything",
                "description": "Deletes everything.",
                "inputSchema": {"type": "object", "properties": {}},
            }]})),
            None,
        ),
        "tools/call" => {
            let name = params.get("name").and_then(Value::as_str);
            let text = match name {
                Some("echo") => params.get("arguments").and_then(|a| a.get("text")).cloned().unwrap_or(json!("")),
                Some("delete_everything") => json!("deleted everything"),
                _ => return answer(id, Err((-32602, "Unknown tool")), None),
            };
            (Ok(json!({"content": [{"type": "text", "text": text}], "isError": false})), None)
        }
        "prompts/list" => {
            (Ok(json!({"prompts": [{"name": "greet", "arguments": [{"name": "who", "required": true}]}]})), None)
        }
        "prompts/get" if params.get("name").and_then(Value::as_str) == Some("greet") => {
            let who = params.get("arguments").and_then(|a| a.get("who")).and_then(Value::as_str).unwrap_or("you");
            let text = format!("Hello, {who}!");
            (Ok(json!({"messages": [{"role": "user", "content": {"type": "text", "text": text}}]})), None)
        }
        "prompts/get" => (Err((-32602, "Unknown prompt")), None),
        "resources/list" => (
            Ok(
                json!({"resources": RESOURCES.iter().map(|(uri, _)| json!({"uri": uri, "name": uri})).collect::<Vec<_>>()}),
            ),
            None,
        ),
        "resources/templates/list" => {
            (Ok(json!({"resourceTemplates": [{"uriTemplate": "mock://notes/{id}", "name": "note"}]})), None)
        }
        "resources/read" => {
            let uri = params.get("uri").and_then(Value::as_str).unwrap_or_default();
            let text = match (RESOURCES.iter().find(|(known, _)| *known == uri), uri.strip_prefix("mock://notes/")) {
                (Some((_, text)), _) => (*text).to_owned(),
                (None, Some(note)) => format!("note {note}"),
                (None, None) => return answer(id, Err((-32602, "Unknown resource")), None),
            };
            (Ok(json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]})), None)
        }
        _ => (Err((-32601, "Method not found")), None),
    };
    answer(id, result, session)
}

/// The fake's resources: URI and text.
const RESOURCES: [(&str, &str); 3] = [
    ("mock://readme", "readme of mock"),
    ("mock://contacts", "write to ops@example.com"),
    ("mock://secret", "the secret plans"),
];

fn answer(id: Value, result: Result<Value, (i64, &str)>, session: Option<&'static str>) -> McpReply {
    let answer = match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, text)) => json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}}),
    };
    McpReply { status: 200, session, body: answer.to_string().into_bytes() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stateless_fake_refuses_what_its_revision_refuses() {
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},
            "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        let sent = Sent { version: Some("2026-07-28"), method: Some("tools/call"), name: Some("echo") };
        let read = |reply: McpReply| {
            (reply.status, reply.session, serde_json::from_slice::<Value>(&reply.body).unwrap_or_default())
        };
        let (status, session, answer) = read(respond_as(Revision::Stateless, sent, call));
        assert_eq!((status, session), (200, None));
        assert_eq!(answer["result"]["content"][0]["text"], "hi");
        assert_eq!(answer["result"]["resultType"], "complete");
        let (status, _, answer) = read(respond_as(Revision::Stateless, Sent { name: Some("other"), ..sent }, call));
        assert_eq!((status, answer["error"]["code"].as_i64()), (400, Some(-32020)));
        let bare = br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
        let listing = Sent { method: Some("tools/list"), name: None, ..sent };
        let (status, _, answer) = read(respond_as(Revision::Stateless, listing, bare));
        assert_eq!((status, answer["error"]["code"].as_i64()), (400, Some(-32602)));
        let hello = br#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        let (status, session, answer) =
            read(respond_as(Revision::Stateless, Sent { method: Some("initialize"), name: None, ..sent }, hello));
        assert_eq!((status, session, answer["error"]["code"].as_i64()), (400, None, Some(-32022)));
    }

    #[test]
    fn the_fake_echoes_and_names_a_session() {
        let hello =
            respond(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#);
        assert_eq!((hello.status, hello.session), (200, Some("mock-session")));
        assert!(String::from_utf8_lossy(&hello.body).contains("2025-06-18"));
        assert_eq!(respond(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).status, 202);
        let echo = respond(br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi there"}}}"#);
        let echo: Value = serde_json::from_slice(&echo.body).unwrap_or_default();
        assert_eq!(echo["result"]["content"][0]["text"], "hi there");
        assert_eq!(echo["id"], "a");
        let unknown = respond(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope"}}"#);
        assert!(String::from_utf8_lossy(&unknown.body).contains("-32602"));
        let read = |body: &[u8]| serde_json::from_slice::<Value>(&respond(body).body).unwrap_or_default();
        let greeted = read(
            br#"{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"greet","arguments":{"who":"Ada"}}}"#,
        );
        assert_eq!(greeted["result"]["messages"][0]["content"]["text"], "Hello, Ada!");
        let contacts =
            read(br#"{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"mock://contacts"}}"#);
        assert_eq!(contacts["result"]["contents"][0]["text"], "write to ops@example.com");
        let note = read(br#"{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"mock://notes/7"}}"#);
        assert_eq!(note["result"]["contents"][0]["text"], "note 7");
        let listed = read(br#"{"jsonrpc":"2.0","id":6,"method":"resources/list"}"#);
        assert_eq!(listed["result"]["resources"].as_array().map(Vec::len), Some(3));
    }
}
