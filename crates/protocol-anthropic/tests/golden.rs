//! Golden tests: fixtures written from the published Messages API reference,
//! read into IR and checked against reviewed snapshots.

// Test helpers outside #[test] fns fail loudly on bad fixtures by design.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::path::PathBuf;

use serde_json::{json, Value};
use switchyard_codec::ir::{Accumulator, Capabilities, StreamEvent};
use switchyard_codec::Codec;
use switchyard_protocol_anthropic::AnthropicCodec;

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn decode_stream(bytes: &[u8]) -> Vec<StreamEvent> {
    AnthropicCodec.decode_stream(&[bytes]).unwrap()
}

#[test]
fn request_with_tools_images_documents_and_thinking() {
    let ir = AnthropicCodec.read_request(&fixture("request_tools_images_thinking.json")).unwrap();
    insta::assert_json_snapshot!(ir);
}

#[test]
fn request_with_tools_images_documents_and_thinking_writes_back_the_same_wire() {
    let body = fixture("request_tools_images_thinking.json");
    let ir = AnthropicCodec.read_request(&body).unwrap();
    let encoded = AnthropicCodec.write_request(&ir);
    assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
    let written: Value = serde_json::from_slice(&encoded.body).unwrap();
    let mut original: Value = serde_json::from_slice(&body).unwrap();
    // Canonicalisations in this fixture: a tool result whose only part is
    // plain text is written as a string.
    original["messages"][2]["content"][0]["content"] = json!("15 degrees");
    // Sampling knobs are f64 in the IR, so an integer `1` is written `1.0`.
    original["temperature"] = json!(1.0);
    assert_eq!(written, original);
}

#[test]
fn request_with_sampling_and_structured_output() {
    let body = fixture("request_sampling_structured.json");
    let ir = AnthropicCodec.read_request(&body).unwrap();
    insta::assert_json_snapshot!(ir);
    // The fixture's model (Opus 4.6) takes adaptive thinking and an effort.
    let written: Value =
        serde_json::from_slice(&AnthropicCodec.write_request_for(&ir, &Capabilities::ALL).body).unwrap();
    assert_eq!(written, serde_json::from_slice::<Value>(&body).unwrap());
}

#[test]
fn response_with_a_tool_call() {
    let ir = AnthropicCodec.read_response(&fixture("response_tool_use.json")).unwrap();
    insta::assert_json_snapshot!(ir);
}

#[test]
fn stream_with_thinking_text_and_a_tool_call() {
    let events = decode_stream(&fixture("stream_thinking_text_tool.sse"));
    insta::assert_json_snapshot!(events);
    let mut acc = Accumulator::new();
    for event in &events {
        acc.push(event);
    }
    assert!(acc.is_finished());
    // The streamed reply folds into what the non-streamed call returns.
    insta::assert_json_snapshot!("stream_accumulated", acc.into_response());
}

#[test]
fn stream_ending_in_an_error() {
    let events = decode_stream(&fixture("stream_error.sse"));
    insta::assert_json_snapshot!(events);
}

fn raw_error(status: u16, name: &str) -> Value {
    let raw = AnthropicCodec.extract_error(status, &fixture(name));
    json!({
        "status": raw.status,
        "kind": raw.kind,
        "vendor_type": raw.vendor_type,
        "vendor_code": raw.vendor_code,
        "message": raw.message,
    })
}

#[test]
fn error_bodies() {
    insta::assert_json_snapshot!("error_overloaded", raw_error(529, "error_overloaded.json"));
    insta::assert_json_snapshot!("error_prompt_too_long", raw_error(400, "error_prompt_too_long.json"));
}

/// Claude Code's requests, captured from the CLI itself (2.1.332, pinned in
/// `tests/agents/package-lock.json`; `tests/sdk/agent_capture.py` captures
/// them again): the first request of `claude -p`, and the second turn of a
/// tool loop. Their shape: a `system` message at `messages[1]` with its own
/// `output_config`, adaptive thinking with `display`, `context_management`,
/// `output_config.effort`, a deferred tool, a signed thinking block sent
/// back, a tool result with a cache marker, betas in `anthropic-beta`.
#[test]
fn claude_codes_requests_are_read_and_written_back_as_they_came() {
    use switchyard_codec::ir::{Block, Effort, Role, Thinking};
    for name in ["claude_code_first_request.json", "claude_code_tool_loop_request.json"] {
        let body = fixture(name);
        let ir = AnthropicCodec.read_request(&body).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(ir.messages[1].role, Role::System, "{name}");
        assert_eq!(ir.messages[1].extra.fields["output_config"], json!({"effort": "medium"}), "{name}");
        let reasoning = ir.reasoning.clone().unwrap();
        assert_eq!((reasoning.thinking, reasoning.effort), (Thinking::On, Some(Effort::Medium)), "{name}");
        assert!(ir.extra.fields.contains_key("context_management"), "{name}");
        assert!(ir.user.as_deref().is_some_and(|user| user.contains("session_id")), "{name}");
        let deferred: Vec<&str> =
            ir.tools.iter().filter(|t| t.extra.fields.contains_key("defer_loading")).map(|t| t.name.as_str()).collect();
        assert_eq!(deferred, ["DeferredToolPlaceholder"], "{name}");
        if name.contains("tool_loop") {
            let roles: Vec<Role> = ir.messages.iter().map(|m| m.role).collect();
            assert_eq!(roles, [Role::User, Role::System, Role::Assistant, Role::User]);
            assert!(matches!(
                &ir.messages[2].content[..],
                [Block::Thinking { signature: Some(_), .. }, Block::ToolUse(_)]
            ));
            assert!(matches!(&ir.messages[3].content[..], [Block::ToolResult(_)]));
        }
        // Claude Code's model takes adaptive thinking and an effort: what was
        // read is written back, member for member, and nothing is lost.
        let encoded = AnthropicCodec.write_request_for(&ir, &Capabilities::ALL);
        assert!(encoded.dropped.is_empty(), "{name}: {:?}", encoded.dropped);
        let written: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(written, serde_json::from_slice::<Value>(&body).unwrap(), "{name}");
    }
    // Its betas, every one read into the IR.
    let headers = String::from_utf8(fixture("claude_code_headers.txt")).unwrap();
    let mut map = http::HeaderMap::new();
    for line in headers.lines() {
        let (name, value) = line.split_once(": ").unwrap();
        map.append(http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
    }
    let mut ir = AnthropicCodec.read_request(&fixture("claude_code_first_request.json")).unwrap();
    AnthropicCodec.read_headers(&map, &mut ir);
    assert!(ir.betas.iter().any(|beta| beta.starts_with("mid-conversation-tool-changes")), "{:?}", ir.betas);
    assert_eq!(ir.betas.len(), map["anthropic-beta"].to_str().unwrap().split(',').count());
}
