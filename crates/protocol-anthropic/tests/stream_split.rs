//! The stream decoder yields the same events however the bytes are chunked.

// Test helpers outside #[test] fns fail loudly on bad fixtures by design.
#![allow(clippy::unwrap_used, clippy::panic)]

use proptest::prelude::*;
use switchyard_codec::ir::StreamEvent;
use switchyard_codec::Codec;
use switchyard_protocol_anthropic::AnthropicCodec;

const FIXTURE: &[u8] = include_bytes!("fixtures/stream_thinking_text_tool.sse");

fn decode_chunks(chunks: &[&[u8]]) -> Vec<StreamEvent> {
    AnthropicCodec.decode_stream(chunks).unwrap()
}

#[test]
fn every_single_split_point_gives_the_whole_stream_events() {
    let whole = decode_chunks(&[FIXTURE]);
    assert!(whole.len() > 10);
    for cut in 0..=FIXTURE.len() {
        let (a, b) = FIXTURE.split_at(cut);
        assert_eq!(decode_chunks(&[a, b]), whole, "split at {cut}");
    }
}

#[test]
fn byte_at_a_time_gives_the_whole_stream_events() {
    let whole = decode_chunks(&[FIXTURE]);
    let bytes: Vec<&[u8]> = FIXTURE.chunks(1).collect();
    assert_eq!(decode_chunks(&bytes), whole);
}

#[test]
fn crlf_line_ends_give_the_same_events() {
    let crlf: Vec<u8> = String::from_utf8_lossy(FIXTURE).replace('\n', "\r\n").into_bytes();
    assert_eq!(decode_chunks(&[&crlf]), decode_chunks(&[FIXTURE]));
}

proptest! {
    #[test]
    fn random_splits_give_the_whole_stream_events(
        cuts in proptest::collection::vec(0usize..=FIXTURE.len(), 0..24)
    ) {
        let whole = decode_chunks(&[FIXTURE]);
        let mut points = cuts;
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut last = 0;
        for p in points {
            chunks.push(&FIXTURE[last..p]);
            last = p;
        }
        chunks.push(&FIXTURE[last..]);
        prop_assert_eq!(decode_chunks(&chunks), whole);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut decoder = AnthropicCodec.stream_decoder();
        let mut events = Vec::new();
        let _ = decoder.feed(&bytes, &mut events);
        let _ = decoder.finish(&mut events);
    }
}
