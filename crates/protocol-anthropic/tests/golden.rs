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
