//! Golden tests: fixtures written from the Bedrock Runtime API reference
//! (Converse, ConverseStream, error shapes), read into the IR and
//! snapshotted.

#![allow(clippy::unwrap_used, clippy::panic, reason = "test helpers outside #[test] functions fail loudly")]

use std::path::Path;

use aws_smithy_eventstream::frame::read_message_from;
use serde_json::{json, Value};
use switchyard_codec::ir::{Accumulator, StreamEvent};
use switchyard_codec::Codec;
use switchyard_protocol_bedrock::BedrockCodec;

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    std::fs::read(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

fn decode_whole(bytes: &[u8]) -> Vec<StreamEvent> {
    BedrockCodec.decode_stream(&[bytes]).unwrap()
}

#[test]
fn request_with_tools_images_documents_thinking_and_cache_points() {
    let request = BedrockCodec.read_request(&fixture("request_tools_images.json")).unwrap();
    assert!(request.model.is_empty(), "the model is in the path");
    insta::assert_json_snapshot!(request);
}

#[test]
fn request_is_written_back_in_converse_shape() {
    let request = BedrockCodec.read_request(&fixture("request_tools_images.json")).unwrap();
    let encoded = BedrockCodec.write_request(&request);
    assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
    let written: Value = serde_json::from_slice(&encoded.body).unwrap();
    let mut expected: Value = serde_json::from_slice(&fixture("request_tools_images.json")).unwrap();
    // The two canonicalisations: JSON tool results travel as JSON text, and
    // a successful status is the default and is left out.
    expected["messages"][2]["content"][0]["toolResult"] = json!({
        "toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
        "content": [{ "text": "{\"temperature\":18,\"conditions\":\"cloudy\"}" }],
    });
    assert_eq!(written, expected);
}

#[test]
fn response_with_a_tool_call() {
    let response = BedrockCodec.read_response(&fixture("response_tool_use.json")).unwrap();
    insta::assert_json_snapshot!(response);
}

#[test]
fn stream_fixture_holds_the_listed_frames() {
    let bytes = fixture("stream_text_tool.bin");
    let listing: Vec<Value> = serde_json::from_slice(&fixture("stream_text_tool.events.json")).unwrap();
    let mut rest: &[u8] = &bytes;
    for entry in &listing {
        let total = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        let message = read_message_from(&rest[..total]).unwrap();
        for header in message.headers() {
            let value = header.value().as_string().unwrap().as_str();
            assert_eq!(entry["headers"][header.name().as_str()], value);
        }
        let payload: Value = serde_json::from_slice(message.payload()).unwrap();
        assert_eq!(payload, entry["payload"]);
        rest = &rest[total..];
    }
    assert!(rest.is_empty());
}

#[test]
fn stream_with_reasoning_text_tool_call_and_usage() {
    let events = decode_whole(&fixture("stream_text_tool.bin"));
    insta::assert_json_snapshot!(events);
    let mut accumulator = Accumulator::new();
    for event in &events {
        accumulator.push(event);
    }
    assert!(accumulator.is_finished());
    assert_eq!(accumulator.usage().input_tokens, 393 + 2048);
}

#[test]
fn stream_with_an_exception() {
    let events = decode_whole(&fixture("stream_exception.bin"));
    insta::assert_json_snapshot!(events);
}

#[test]
fn error_bodies() {
    let cases = [(400, "error_context_length.json"), (429, "error_throttling.json"), (403, "error_access_denied.json")];
    let errors: Vec<Value> = cases
        .iter()
        .map(|(status, name)| {
            let raw = BedrockCodec.extract_error(*status, &fixture(name));
            json!({ "fixture": name, "vendor_type": raw.vendor_type, "info": raw.to_error_info() })
        })
        .collect();
    insta::assert_json_snapshot!(errors);
}

/// Converse's `AudioBlock` (the Bedrock Runtime API reference: `format`,
/// and `source` as bytes or an S3 location) reads as audio and is written
/// back in its own shape.
#[test]
fn request_with_audio_blocks() {
    use switchyard_codec::ir::{Block, MediaSource};
    let bytes = fixture("request_audio.json");
    let request = BedrockCodec.read_request(&bytes).unwrap();
    let content = &request.messages[0].content;
    assert!(
        matches!(&content[1], Block::Audio { source: MediaSource::Base64 { media_type, .. } } if media_type == "audio/mp3")
    );
    assert_eq!(
        content[2],
        Block::Audio {
            source: MediaSource::Url {
                url: "s3://recordings/call-42.wav".into(),
                media_type: Some("audio/wav".into())
            }
        }
    );
    let encoded = BedrockCodec.write_request(&request);
    assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
    let written: Value = serde_json::from_slice(&encoded.body).unwrap();
    let expected: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(written["messages"], expected["messages"]);
}
