//! Golden tests: fixtures written from the published Responses API reference,
//! read into IR and checked against reviewed insta snapshots; the stream
//! fixtures also under every way of splitting them into chunks, and the
//! encoder's output against the event contract the official SDK enforces.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "helpers outside #[test] bodies fail loudly too; clippy exempts only the bodies"
)]

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use serde_json::{json, Value};
use switchyard_codec::ir::{self, ErrorKind, StreamEvent};
use switchyard_codec::Codec;
use switchyard_protocol_responses::ResponsesCodec;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|err| panic!("reading {path}: {err}"))
}

fn decode(chunks: &[&[u8]]) -> Vec<StreamEvent> {
    ResponsesCodec.decode_stream(chunks).unwrap()
}

fn encode(events: &[StreamEvent]) -> Vec<u8> {
    ResponsesCodec.encode_stream(ResponsesCodec.default_framing(), events)
}

#[test]
fn request_with_tools_images_files_reasoning_and_history() {
    let request = ResponsesCodec.read_request(&fixture("request_multiturn.json")).unwrap();
    insta::assert_json_snapshot!(request);
}

#[test]
fn request_fixture_survives_a_same_protocol_hop() {
    let body = fixture("request_multiturn.json");
    let original: Value = serde_json::from_slice(&body).unwrap();
    let request = ResponsesCodec.read_request(&body).unwrap();
    let encoded = ResponsesCodec.write_request(&request);
    assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
    let written: Value = serde_json::from_slice(&encoded.body).unwrap();
    for key in [
        "model",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_output_tokens",
        "temperature",
        "top_p",
        "text",
        "reasoning",
        "stream",
        "user",
        "metadata",
        "store",
        "include",
        "truncation",
    ] {
        assert_eq!(written[key], original[key], "{key}");
    }
    // Instructions and the developer message are both system text, written
    // back as one leading system message of two parts.
    assert!(written.get("instructions").is_none());
    assert_eq!(written["input"][0]["role"], json!("system"));
    assert_eq!(written["input"][0]["content"].as_array().map(Vec::len), Some(2));
    assert_eq!(written["input"].as_array().map(Vec::len), original["input"].as_array().map(Vec::len));
    assert_eq!(ResponsesCodec.read_request(&encoded.body).unwrap(), request);
}

#[test]
fn response_with_reasoning_text_and_a_tool_call() {
    let response = ResponsesCodec.read_response(&fixture("response_tool_call.json")).unwrap();
    insta::assert_json_snapshot!(response);
}

#[test]
fn stream_with_reasoning_text_tool_call_and_usage() {
    let events = decode(&[&fixture("stream_text_tool.sse")]);
    insta::assert_json_snapshot!(events);
}

#[test]
fn stream_error_event_ends_the_stream() {
    let events = decode(&[&fixture("stream_error.sse")]);
    insta::assert_json_snapshot!(events);
    let Some(StreamEvent::Error(error)) = events.last() else {
        panic!("no error event in {events:?}");
    };
    assert_eq!(error.kind, ErrorKind::RateLimit);
}

#[test]
fn stream_split_at_every_byte_decodes_the_same() {
    for name in ["stream_text_tool.sse", "stream_error.sse"] {
        let bytes = fixture(name);
        let whole = decode(&[&bytes]);
        for cut in 0..=bytes.len() {
            assert_eq!(decode(&[&bytes[..cut], &bytes[cut..]]), whole, "{name} cut at {cut}");
        }
    }
}

proptest! {
    #[test]
    fn stream_split_anywhere_decodes_the_same(cuts in proptest::collection::vec(0usize..7000, 0..12)) {
        let bytes = fixture("stream_text_tool.sse");
        let whole = decode(&[&bytes]);
        let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut last = 0;
        for point in points {
            chunks.push(&bytes[last..point]);
            last = point;
        }
        chunks.push(&bytes[last..]);
        prop_assert_eq!(decode(&chunks), whole);
    }
}

#[test]
fn error_bodies_are_classified() {
    let raw = ResponsesCodec.extract_error(400, &fixture("error_context_length.json"));
    assert_eq!(raw.kind, ErrorKind::ContextLength);
    assert_eq!(raw.vendor_type.as_deref(), Some("invalid_request_error"));
    assert_eq!(raw.vendor_code.as_deref(), Some("context_length_exceeded"));
    assert!(raw.message.starts_with("Your input exceeds the context window"));

    let raw = ResponsesCodec.extract_error(429, &fixture("error_rate_limit.json"));
    assert_eq!(raw.kind, ErrorKind::RateLimit);
    assert_eq!(raw.vendor_type.as_deref(), Some("tokens"));
    assert_eq!(raw.vendor_code.as_deref(), Some("rate_limit_exceeded"));
}

#[test]
fn error_response_is_the_openai_envelope() {
    let mut info = ir::ErrorInfo::new(ErrorKind::NotFound, "no pool named x");
    info.param = Some("model".into());
    let written = ResponsesCodec.error_response(&info);
    assert_eq!(written.status, 404);
    let body: Value = serde_json::from_slice(&written.body).unwrap();
    assert_eq!(
        body,
        json!({"error": {"message": "no pool named x", "type": "not_found_error", "param": "model", "code": "not_found"}})
    );
}

/// Parses encoder output into (sse event name, data) pairs.
fn sse_events(bytes: &[u8]) -> Vec<(String, Value)> {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    text.split("\n\n")
        .filter(|frame| !frame.is_empty())
        .map(|frame| {
            let mut name = String::new();
            let mut data = Value::Null;
            for line in frame.lines() {
                if let Some(rest) = line.strip_prefix("event: ") {
                    name = rest.to_owned();
                } else if let Some(rest) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(rest).unwrap();
                }
            }
            (name, data)
        })
        .collect()
}

/// The contract of the SDK's `ResponseStreamState`: `response.created`
/// first; content events only for items and parts already added; sequence
/// numbers counting up; a terminal response carrying every done item.
fn assert_sdk_contract(bytes: &[u8]) {
    let events = sse_events(bytes);
    assert_eq!(events[0].0, "response.created");
    let mut items: HashMap<u64, String> = HashMap::new();
    let mut parts: HashSet<(u64, u64)> = HashSet::new();
    let mut done_items = 0;
    for (position, (name, data)) in events.iter().enumerate() {
        assert_eq!(data["type"].as_str(), Some(name.as_str()));
        assert_eq!(data["sequence_number"].as_u64(), Some(position as u64));
        let output_index = data["output_index"].as_u64().unwrap_or(u64::MAX);
        match name.as_str() {
            "response.output_item.added" => {
                let kind = data["item"]["type"].as_str().unwrap().to_owned();
                assert!(items.insert(output_index, kind).is_none());
            }
            "response.content_part.added" => {
                assert_eq!(items.get(&output_index).map(String::as_str), Some("message"));
                parts.insert((output_index, data["content_index"].as_u64().unwrap()));
            }
            "response.output_text.delta" | "response.output_text.done" => {
                assert!(parts.contains(&(output_index, data["content_index"].as_u64().unwrap())));
                assert!(data["logprobs"].is_array());
            }
            "response.function_call_arguments.delta" | "response.function_call_arguments.done" => {
                assert_eq!(items.get(&output_index).map(String::as_str), Some("function_call"));
            }
            "response.reasoning_summary_part.added" | "response.reasoning_summary_text.delta" => {
                assert_eq!(items.get(&output_index).map(String::as_str), Some("reasoning"));
            }
            "response.output_item.done" => done_items += 1,
            "response.completed" | "response.incomplete" => {
                assert_eq!(position, events.len() - 1);
                let output = data["response"]["output"].as_array().unwrap();
                assert_eq!(output.len(), done_items);
                assert!(data["response"]["usage"].is_object());
            }
            _ => {}
        }
    }
}

#[test]
fn encoded_fixture_stream_keeps_the_sdk_contract_and_decodes_back() {
    let events = decode(&[&fixture("stream_text_tool.sse")]);
    let bytes = encode(&events);
    assert_sdk_contract(&bytes);
    assert_eq!(decode(&[&bytes]), events);
    insta::assert_snapshot!(String::from_utf8(bytes).unwrap());
}

#[test]
fn encoded_error_is_an_error_event_then_a_failed_response() {
    let events = vec![
        StreamEvent::MessageStart {
            id: "resp_1".into(),
            model: "m".into(),
            created: Some(1),
            usage: ir::Usage::default(),
        },
        StreamEvent::Error(ir::ErrorInfo::new(ErrorKind::Overloaded, "try later")),
    ];
    let sse = sse_events(&encode(&events));
    let names: Vec<&str> = sse.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["response.created", "response.in_progress", "error", "response.failed"]);
    assert_eq!(
        sse[2].1,
        json!({"type": "error", "code": "overloaded", "message": "try later", "param": null, "sequence_number": 2})
    );
    assert_eq!(sse[3].1["response"]["status"], json!("failed"));
}

#[test]
fn max_tokens_ends_with_response_incomplete() {
    let response = ir::Response {
        logprobs: Vec::new(),
        choices: Vec::new(),
        id: "resp_1".into(),
        model: "m".into(),
        created: Some(1),
        content: vec![ir::Block::text("cut")],
        stop_reason: Some(ir::StopReason::MaxTokens),
        stop_sequence: None,
        usage: ir::Usage::default(),
    };
    let bytes = encode(&ir::events_from_response(&response));
    assert_sdk_contract(&bytes);
    let sse = sse_events(&bytes);
    let (name, data) = sse.last().unwrap();
    assert_eq!(name, "response.incomplete");
    assert_eq!(data["response"]["incomplete_details"], json!({"reason": "max_output_tokens"}));
}
