//! The stream decoder under every chunking and under hostile input: a
//! fixture decodes the same whole or split anywhere, and arbitrary bytes
//! give an error, never a panic.

#![allow(clippy::unwrap_used, clippy::panic, reason = "test helpers outside #[test] functions fail loudly")]

use std::path::Path;

use proptest::prelude::*;
use switchyard_codec::ir::StreamEvent;
use switchyard_codec::{Codec, DecodeError};
use switchyard_protocol_bedrock::BedrockCodec;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)).unwrap()
}

/// Decodes `bytes` fed in pieces ending at `cuts` (sorted offsets).
fn decode_split(bytes: &[u8], cuts: &[usize]) -> Result<Vec<StreamEvent>, DecodeError> {
    let mut decoder = BedrockCodec.stream_decoder();
    let mut events = Vec::new();
    let mut from = 0;
    for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
        let cut = cut.clamp(from, bytes.len());
        decoder.feed(&bytes[from..cut], &mut events)?;
        from = cut;
    }
    decoder.finish(&mut events)?;
    Ok(events)
}

#[test]
fn every_byte_boundary_gives_the_same_events() {
    for name in ["stream_text_tool.bin", "stream_exception.bin"] {
        let bytes = fixture(name);
        let whole = decode_split(&bytes, &[]).unwrap();
        for cut in 0..=bytes.len() {
            assert_eq!(decode_split(&bytes, &[cut]).unwrap(), whole, "{name} split at {cut}");
        }
    }
}

#[test]
fn one_byte_at_a_time_gives_the_same_events() {
    let bytes = fixture("stream_text_tool.bin");
    let cuts: Vec<usize> = (1..bytes.len()).collect();
    assert_eq!(decode_split(&bytes, &cuts).unwrap(), decode_split(&bytes, &[]).unwrap());
}

#[test]
fn a_frame_declaring_a_huge_length_fails_without_waiting() {
    let mut decoder = BedrockCodec.stream_decoder();
    let mut events = Vec::new();
    // 0x7fffffff bytes declared: rejected at the prelude.
    let prelude = [0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0];
    assert!(matches!(decoder.feed(&prelude, &mut events), Err(DecodeError::Frame(_))));
    assert!(events.is_empty());
}

proptest! {
    #[test]
    fn random_splits_give_the_same_events(mut cuts in proptest::collection::vec(0usize..3000, 0..40)) {
        let bytes = fixture("stream_text_tool.bin");
        cuts.sort_unstable();
        prop_assert_eq!(decode_split(&bytes, &cuts).unwrap(), decode_split(&bytes, &[]).unwrap());
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..2048),
        mut cuts in proptest::collection::vec(0usize..2048, 0..8),
    ) {
        cuts.sort_unstable();
        let _ = decode_split(&bytes, &cuts);
    }

    #[test]
    fn corrupted_fixtures_never_panic(
        flips in proptest::collection::vec((0usize..2796, any::<u8>()), 1..6),
        truncate in proptest::option::of(0usize..2796),
    ) {
        let mut bytes = fixture("stream_text_tool.bin");
        for (position, mask) in flips {
            let position = position % bytes.len();
            bytes[position] ^= mask;
        }
        if let Some(length) = truncate {
            bytes.truncate(length);
        }
        let _ = decode_split(&bytes, &[]);
    }
}

/// A well-formed frame around any event type and payload, so that the
/// event handling (not only the framing) meets hostile input.
fn frame(message_type: &str, event_type: &str, payload: Vec<u8>) -> Vec<u8> {
    use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
    use aws_smithy_types::str_bytes::StrBytes;
    let header =
        |name: &'static str, value: &str| Header::new(name, HeaderValue::String(StrBytes::from(value.to_owned())));
    let message = Message::new_from_parts(
        vec![
            header(":message-type", message_type),
            header(":event-type", event_type),
            header(":exception-type", event_type),
        ],
        payload,
    );
    let mut out = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&message, &mut out).unwrap();
    out
}

fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        Just(br#"{"contentBlockIndex":0,"delta":{"text":"a"}}"#.to_vec()),
        Just(br#"{"contentBlockIndex":18446744073709551615,"delta":{"toolUse":{"input":7}}}"#.to_vec()),
        Just(br#"{"contentBlockIndex":1,"start":{"toolUse":{}}}"#.to_vec()),
        Just(br#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"redactedContent":"QQ=="}}}"#.to_vec()),
        Just(br#"{"stopReason":"max_tokens","additionalModelResponseFields":{"stop_sequence":1}}"#.to_vec()),
        Just(br#"{"usage":{"inputTokens":-1,"outputTokens":"x"}}"#.to_vec()),
        Just(br#"{"contentBlockIndex":-1}"#.to_vec()),
        Just(b"null".to_vec()),
    ]
}

proptest! {
    #[test]
    fn well_framed_nonsense_never_panics(
        frames in proptest::collection::vec(
            (
                prop_oneof![Just("event"), Just("exception"), Just("error"), Just("other")],
                prop_oneof![
                    Just("messageStart"), Just("contentBlockStart"), Just("contentBlockDelta"),
                    Just("contentBlockStop"), Just("messageStop"), Just("metadata"),
                    Just("throttlingException"), Just("somethingElse"),
                ],
                payload(),
            ),
            0..12,
        ),
    ) {
        let bytes: Vec<u8> = frames
            .into_iter()
            .flat_map(|(message_type, event_type, payload)| frame(message_type, event_type, payload))
            .collect();
        let _ = decode_split(&bytes, &[]);
    }
}
