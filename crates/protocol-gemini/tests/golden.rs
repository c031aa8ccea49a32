//! Golden tests: fixtures written from the Gemini API reference, read into
//! IR and compared with reviewed insta snapshots; streams decoded whole and
//! split at every byte boundary.

use proptest::prelude::*;
use serde_json::{json, Value};
use switchyard_codec::ir::{ErrorInfo, ErrorKind, StreamEvent};
use switchyard_codec::{Codec, Framing};
use switchyard_protocol_gemini::GeminiCodec;

#[expect(clippy::panic, reason = "a missing fixture fails the test loudly")]
fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|err| panic!("read {path}: {err}"))
}

#[expect(clippy::unwrap_used, reason = "fixtures are valid streams")]
fn decode(chunks: &[&[u8]]) -> Vec<StreamEvent> {
    GeminiCodec.decode_stream(chunks).unwrap()
}

const STREAMS: [&str; 4] =
    ["stream_text_tool.sse", "stream_text_tool_array.json", "stream_signature_last.sse", "stream_error.sse"];

#[test]
fn request_with_tools_images_system_thinking_and_turns() {
    let request = GeminiCodec.read_request(&fixture("request_multiturn.json")).unwrap();
    insta::assert_json_snapshot!("request_multiturn_ir", request);
}

#[test]
fn request_rewritten_for_the_same_protocol() {
    let request = GeminiCodec.read_request(&fixture("request_multiturn.json")).unwrap();
    let encoded = GeminiCodec.write_request(&request);
    assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
    let body: Value = serde_json::from_slice(&encoded.body).unwrap();
    insta::assert_json_snapshot!("request_multiturn_rewritten", body);
    // The rewrite reads back to the same IR.
    assert_eq!(GeminiCodec.read_request(&encoded.body).unwrap(), request);
}

#[test]
fn response_with_thinking_and_tool_calls() {
    let response = GeminiCodec.read_response(&fixture("response_tool_call.json")).unwrap();
    insta::assert_json_snapshot!("response_tool_call_ir", response);
    let encoded = GeminiCodec.write_response(&response);
    assert!(encoded.dropped.is_empty());
    assert_eq!(GeminiCodec.read_response(&encoded.body).unwrap(), response);
}

#[test]
fn stream_with_thinking_text_tool_call_and_usage() {
    let events = decode(&[&fixture("stream_text_tool.sse")]);
    insta::assert_json_snapshot!("stream_text_tool_events", events);
}

#[test]
fn both_framings_decode_to_the_same_events() {
    assert_eq!(decode(&[&fixture("stream_text_tool_array.json")]), decode(&[&fixture("stream_text_tool.sse")]));
}

#[test]
fn trailing_signature_chunk_closes_the_text() {
    let events = decode(&[&fixture("stream_signature_last.sse")]);
    insta::assert_json_snapshot!("stream_signature_last_events", events);
}

#[test]
fn in_stream_error_becomes_an_error_event() {
    let events = decode(&[&fixture("stream_error.sse")]);
    insta::assert_json_snapshot!("stream_error_events", events);
}

#[test]
fn every_split_point_gives_the_same_events() {
    for name in STREAMS {
        let bytes = fixture(name);
        let whole = decode(&[&bytes]);
        for cut in 0..=bytes.len() {
            let (head, tail) = bytes.split_at(cut);
            assert_eq!(decode(&[head, tail]), whole, "{name} cut at {cut}");
        }
        let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(decode(&bytewise), whole, "{name} byte by byte");
    }
}

#[test]
fn error_bodies() {
    let codec = GeminiCodec;
    let read = |status: u16, name: &str| {
        let raw = codec.extract_error(status, &fixture(name));
        json!({
            "status": raw.status,
            "kind": raw.kind,
            "vendor_type": raw.vendor_type,
            "vendor_code": raw.vendor_code,
            "message": raw.message,
        })
    };
    let bodies = json!({
        "context_length": read(400, "error_context_length.json"),
        "api_key": read(400, "error_api_key.json"),
        "rate_limit": read(429, "error_rate_limit.json"),
    });
    insta::assert_json_snapshot!("error_bodies", bodies);
}

#[test]
fn written_errors_are_google_rpc_statuses() {
    let info = ErrorInfo::new(ErrorKind::NotFound, "no model or pool named gpt-9");
    let written = GeminiCodec.error_response(&info);
    assert_eq!(written.status, 404);
    assert!(written.headers.is_empty());
    let body: Value = serde_json::from_slice(&written.body).unwrap();
    assert_eq!(body, json!({"error": {"code": 404, "message": "no model or pool named gpt-9", "status": "NOT_FOUND"}}));
}

#[test]
fn encoder_writes_both_framings() {
    let response = GeminiCodec.read_response(&fixture("response_tool_call.json")).unwrap();
    let events = switchyard_codec::ir::events_from_response(&response);
    for (framing, name) in [(Framing::Sse, "sse"), (Framing::JsonArray, "array")] {
        let mut encoder = GeminiCodec.stream_encoder(framing);
        let mut bytes = Vec::new();
        for event in &events {
            encoder.encode(event, &mut bytes);
        }
        encoder.finish(&mut bytes);
        if framing == Framing::Sse {
            // Gemini's own frame ends; insta normalises them in the snapshot.
            assert!(bytes.starts_with(b"data: {"));
            assert!(bytes.ends_with(b"}\r\n\r\n"));
        }
        let text = String::from_utf8(bytes.clone()).unwrap();
        insta::assert_snapshot!(format!("encoded_stream_{name}"), text);
        let mut accumulator = switchyard_codec::ir::Accumulator::new();
        for event in decode(&[&bytes]) {
            accumulator.push(&event);
        }
        assert!(accumulator.is_finished());
        assert_eq!(accumulator.into_response(), response);
    }
}

#[test]
fn array_framing_is_valid_json() {
    let events = decode(&[&fixture("stream_text_tool.sse")]);
    let mut encoder = GeminiCodec.stream_encoder(Framing::JsonArray);
    let mut bytes = Vec::new();
    for event in &events {
        encoder.encode(event, &mut bytes);
    }
    encoder.finish(&mut bytes);
    let parsed: Vec<Value> = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(parsed.len(), 5);
    let mut empty = GeminiCodec.stream_encoder(Framing::JsonArray);
    let mut bytes = Vec::new();
    empty.finish(&mut bytes);
    empty.finish(&mut bytes);
    assert_eq!(bytes, b"[]");
}

proptest! {
    #[test]
    fn random_splits_give_the_same_events(
        which in 0usize..STREAMS.len(),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let bytes = fixture(STREAMS[which]);
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

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut decoder = GeminiCodec.stream_decoder();
        let mut events = Vec::new();
        let _ = decoder.feed(&bytes, &mut events);
        let _ = decoder.finish(&mut events);
        let _ = GeminiCodec.read_request(&bytes);
        let _ = GeminiCodec.read_response(&bytes);
        let _ = GeminiCodec.extract_error(500, &bytes);
    }
}

/// The audio guide's parts (Gemini API, "Audio understanding"): inline
/// bytes and an uploaded file of an `audio/*` type read as audio, not as
/// documents, and are written back as they came.
#[test]
fn request_with_audio_parts() {
    use switchyard_codec::ir::{Block, MediaSource};
    let bytes = fixture("request_audio.json");
    let request = GeminiCodec.read_request(&bytes).unwrap();
    let content = &request.messages[0].content;
    assert_eq!(
        content[1],
        Block::Audio {
            source: MediaSource::Base64 {
                media_type: "audio/mp3".into(),
                data: "SUQzBAAAAAAAI1RTU0UAAAAPAAADTGF2ZjU4Ljc2LjEwMAAAAAAAAAAAAAAA".into(),
            }
        }
    );
    assert_eq!(
        content[2],
        Block::Audio {
            source: MediaSource::Url {
                url: "https://generativelanguage.googleapis.com/v1beta/files/sample-audio".into(),
                media_type: Some("audio/mp3".into()),
            }
        }
    );
    let encoded = GeminiCodec.write_request(&request);
    assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
    let written: Value = serde_json::from_slice(&encoded.body).unwrap();
    assert_eq!(
        written["contents"][0]["parts"],
        json!([
            {"text": "Describe this audio clip"},
            {"inlineData": {"mimeType": "audio/mp3", "data": "SUQzBAAAAAAAI1RTU0UAAAAPAAADTGF2ZjU4Ljc2LjEwMAAAAAAAAAAAAAAA"}},
            {"fileData": {"mimeType": "audio/mp3", "fileUri": "https://generativelanguage.googleapis.com/v1beta/files/sample-audio"}}
        ])
    );
}
