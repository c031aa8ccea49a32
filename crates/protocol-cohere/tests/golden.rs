//! Golden fixtures written from Cohere's published v2 chat reference: each is
//! read into the IR and checked against a reviewed insta snapshot, and the
//! streams are checked to decode the same however they are split.

#![expect(clippy::unwrap_used, clippy::panic, reason = "test helpers fail loudly")]

use proptest::prelude::*;
use serde_json::Value;
use switchyard_codec::ir::{self, StreamEvent};
use switchyard_codec::Codec;
use switchyard_protocol_cohere::CohereCodec;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

fn decode_chunks(chunks: &[&[u8]]) -> Vec<StreamEvent> {
    CohereCodec.decode_stream(chunks).unwrap()
}

fn encode(events: &[StreamEvent]) -> Vec<u8> {
    CohereCodec.encode_stream(CohereCodec.default_framing(), events)
}

#[test]
fn request_with_tools_images_system_thinking_and_history() {
    let request = CohereCodec.read_request(&fixture("request_tools_images_multiturn.json")).unwrap();
    insta::assert_json_snapshot!("request_tools_images_multiturn", request);

    // A same-protocol hop keeps everything (image `detail` aside, which the
    // IR does not model) and is stable.
    let written = CohereCodec.write_request(&request);
    assert!(written.dropped.is_empty(), "{:?}", written.dropped);
    let body: Value = serde_json::from_slice(&written.body).unwrap();
    insta::assert_json_snapshot!("request_tools_images_multiturn_written", body);
    assert_eq!(CohereCodec.read_request(&written.body).unwrap(), request);
}

#[test]
fn response_with_thinking_plan_and_tool_calls() {
    let response = CohereCodec.read_response(&fixture("response_tool_call.json")).unwrap();
    insta::assert_json_snapshot!("response_tool_call", response);
    let written = CohereCodec.write_response(&response);
    assert!(written.dropped.is_empty(), "{:?}", written.dropped);
    assert_eq!(CohereCodec.read_response(&written.body).unwrap(), response);
}

#[test]
fn response_with_citations() {
    let response = CohereCodec.read_response(&fixture("response_text_citations.json")).unwrap();
    insta::assert_json_snapshot!("response_text_citations", response);
    let written = CohereCodec.write_response(&response);
    let body: Value = serde_json::from_slice(&written.body).unwrap();
    let original: Value = serde_json::from_slice(&fixture("response_text_citations.json")).unwrap();
    assert_eq!(body["message"]["citations"], original["message"]["citations"]);
}

#[test]
fn stream_with_tool_plan_and_two_tool_calls() {
    let events = decode_chunks(&[&fixture("stream_tool_call.sse")]);
    insta::assert_json_snapshot!("stream_tool_call", events);
    let mut accumulator = ir::Accumulator::new();
    for event in &events {
        accumulator.push(event);
    }
    assert!(accumulator.is_finished());
    insta::assert_json_snapshot!("stream_tool_call_accumulated", accumulator.into_response());
}

#[test]
fn stream_with_thinking_text_citation_and_usage() {
    let events = decode_chunks(&[&fixture("stream_text.sse")]);
    insta::assert_json_snapshot!("stream_text", events);
}

#[test]
fn streams_reencode_to_the_same_events() {
    for name in ["stream_tool_call.sse", "stream_text.sse"] {
        let events = decode_chunks(&[&fixture(name)]);
        let again = decode_chunks(&[&encode(&events)]);
        assert_eq!(again, events, "{name}");
    }
}

#[test]
fn streams_decode_the_same_split_at_every_byte() {
    for name in ["stream_tool_call.sse", "stream_text.sse"] {
        let bytes = fixture(name);
        let whole = decode_chunks(&[&bytes]);
        for cut in 0..=bytes.len() {
            let (head, tail) = bytes.split_at(cut);
            assert_eq!(decode_chunks(&[head, tail]), whole, "{name} cut at {cut}");
        }
    }
}

proptest! {
    #[test]
    fn streams_decode_the_same_in_random_pieces(
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..24),
        text in any::<bool>(),
    ) {
        let bytes = fixture(if text { "stream_text.sse" } else { "stream_tool_call.sse" });
        let mut points: Vec<usize> = cuts.iter().map(|cut| cut.index(bytes.len() + 1)).collect();
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut last = 0;
        for point in points {
            chunks.push(&bytes[last..point]);
            last = point;
        }
        chunks.push(&bytes[last..]);
        prop_assert_eq!(decode_chunks(&chunks), decode_chunks(&[&bytes]));
    }
}

#[test]
fn error_bodies() {
    let context = CohereCodec.extract_error(400, &fixture("error_context_length.json"));
    insta::assert_json_snapshot!("error_context_length", context.to_error_info());
    let rate = CohereCodec.extract_error(429, &fixture("error_rate_limit.json"));
    insta::assert_json_snapshot!("error_rate_limit", rate.to_error_info());
}
