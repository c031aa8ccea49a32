//! Golden tests: fixtures written from OpenAI's published API reference,
//! read into IR and compared with reviewed insta snapshots; plus the
//! any-split stream property over the fixture streams.

#![expect(clippy::unwrap_used, clippy::panic, reason = "test helpers outside #[test] fns fail loudly")]

use proptest::prelude::*;
use switchyard_codec::ir::StreamEvent;
use switchyard_codec::Codec;
use switchyard_protocol_openai::OpenAiCodec;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Decodes `input` fed as the given chunks.
fn decode_chunks(chunks: &[&[u8]]) -> Vec<StreamEvent> {
    OpenAiCodec.decode_stream(chunks).unwrap()
}

fn decode_whole(name: &str) -> Vec<StreamEvent> {
    decode_chunks(&[&fixture(name)])
}

#[test]
fn request_with_tools_images_system_and_turns() {
    let request = OpenAiCodec.read_request(&fixture("request_tools_images.json")).unwrap();
    insta::assert_json_snapshot!(request);
}

#[test]
fn response_with_a_tool_call() {
    let response = OpenAiCodec.read_response(&fixture("response_tool_call.json")).unwrap();
    insta::assert_json_snapshot!(response);
}

#[test]
fn stream_with_text_tool_calls_and_usage() {
    insta::assert_json_snapshot!(decode_whole("stream_text_tool_usage.sse"));
}

#[test]
fn stream_with_compatible_reasoning_content() {
    insta::assert_json_snapshot!(decode_whole("stream_reasoning_compat.sse"));
}

#[test]
fn stream_with_an_in_stream_error() {
    insta::assert_json_snapshot!(decode_whole("stream_error.sse"));
}

#[test]
fn error_bodies() {
    for (name, status) in [("error_context_length.json", 400), ("error_quota.json", 429)] {
        let raw = OpenAiCodec.extract_error(status, &fixture(name));
        let seen = serde_json::json!({
            "status": raw.status,
            "kind": raw.kind,
            "vendor_type": raw.vendor_type,
            "vendor_code": raw.vendor_code,
            "message": raw.message,
        });
        insta::assert_json_snapshot!(name, seen);
    }
}

#[test]
fn every_two_way_split_decodes_the_same() {
    for name in ["stream_text_tool_usage.sse", "stream_reasoning_compat.sse", "stream_error.sse"] {
        let input = fixture(name);
        let whole = decode_chunks(&[&input]);
        for cut in 0..=input.len() {
            assert_eq!(decode_chunks(&[&input[..cut], &input[cut..]]), whole, "{name} split at {cut}");
        }
    }
}

proptest! {
    #[test]
    fn any_split_decodes_the_same(cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12)) {
        let input = fixture("stream_text_tool_usage.sse");
        let whole = decode_chunks(&[&input]);
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(input.len() + 1)).collect();
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut last = 0;
        for point in points {
            chunks.push(&input[last..point]);
            last = point;
        }
        chunks.push(&input[last..]);
        prop_assert_eq!(decode_chunks(&chunks), whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut decoder = OpenAiCodec.stream_decoder();
        let mut events = Vec::new();
        let _ = decoder.feed(&bytes, &mut events);
        let _ = decoder.finish(&mut events);
        let _ = OpenAiCodec.read_request(&bytes);
        let _ = OpenAiCodec.read_response(&bytes);
        let _ = OpenAiCodec.extract_error(500, &bytes);
    }
}

/// OpenAI's audio guide's request ("Audio input to model"): an
/// `input_audio` part reads as audio of its format's MIME type, and goes
/// back to an OpenAI lane as it came (the lane's model takes audio).
#[test]
fn request_with_input_audio() {
    use switchyard_codec::ir::{Block, Capabilities, MediaSource};
    let bytes = fixture("request_input_audio.json");
    let request = OpenAiCodec.read_request(&bytes).unwrap();
    let content = &request.messages[0].content;
    assert_eq!(
        content[1],
        Block::Audio {
            source: MediaSource::Base64 {
                media_type: "audio/wav".into(),
                data: "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=".into(),
            }
        }
    );
    let audio_model = Capabilities { audio_input: Some(true), ..Capabilities::default() };
    let encoded = OpenAiCodec.write_request_for(&request, &audio_model);
    assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
    let written: serde_json::Value = serde_json::from_slice(&encoded.body).unwrap();
    let expected: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(written["messages"], expected["messages"]);
    assert_eq!(written["modalities"], expected["modalities"], "kept as the caller's own");
}
