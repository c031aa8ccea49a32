//! The usage tap of a same-protocol stream: the bytes pass through
//! untouched, and the tap only needs the reply's usage and whether it
//! finished. Decoding every frame for that would parse every delta; on SSE
//! streams the tap splits events by their blank lines (a byte search) and
//! hands the protocol's decoder only the events that can carry usage, a
//! terminator or an error. Other framings are decoded whole.
//!
//! Memory is bounded: the tap holds at most [`MAX_CARRY`] of an unfinished
//! event; a longer event goes to the decoder as it arrives (its rest too,
//! whatever it says), and the decoder's own caps end a stream whose event
//! never ends.

use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use switchyard_ir::StreamEvent;

use crate::{DecodeError, Framing, StreamDecoder};

/// What makes an SSE event worth decoding: usage, terminators and errors in
/// each protocol's wording. A quoted name is a JSON member name or string
/// (inside a JSON string every quote is escaped, so generated text can never
/// look like one); JSON allows whitespace around a colon, and servers write
/// it (`"finish_reason": "stop"`), so a marker never includes the colon.
/// A false match only costs a decode; a missed one loses usage or the end.
const MARKERS: [(&[u8], Wants); 7] = [
    (b"\"usage\"", Wants::Value),
    (b"\"usageMetadata\"", Wants::Value),
    (b"\"finish_reason\"", Wants::StringValue),
    (b"\"finishReason\"", Wants::Value),
    (b"\"error\"", Wants::Anything),
    (b"message_stop", Wants::Anything),
    (b"[DONE]", Wants::Anything),
];

/// All the markers, found in one pass over an event. One search per marker
/// (seven passes) was 11% of a 64-delta passthrough stream's instructions.
/// Leftmost-first matching lets the search use its SIMD prefilter (the
/// standard kind steps byte by byte, measured slower than seven passes).
/// No marker is a prefix of another, and two can only overlap where one's
/// closing quote opens the next, which JSON never writes (a member name is
/// followed by its colon): the leftmost matches are every marker that matters.
static SEARCH: LazyLock<Result<AhoCorasick, aho_corasick::BuildError>> = LazyLock::new(|| {
    AhoCorasick::builder()
        .match_kind(aho_corasick::MatchKind::LeftmostFirst)
        .build(MARKERS.iter().map(|(marker, _)| marker))
});

/// What must follow a marker for the event to matter.
#[derive(Clone, Copy)]
enum Wants {
    /// Nothing: the marker alone is enough.
    Anything,
    /// A member with a value other than `null` (OpenAI writes
    /// `"usage":null` in every chunk of a stream that asked for usage).
    Value,
    /// A member whose value is a string (`"finish_reason":null` is in every
    /// chunk; only the last one names a reason).
    StringValue,
}

impl Wants {
    /// Whether the bytes after a marker satisfy it.
    fn met_by(self, after: &[u8]) -> bool {
        let value = match self {
            Wants::Anything => return true,
            Wants::Value | Wants::StringValue => match after.trim_ascii_start().strip_prefix(b":") {
                Some(value) => value.trim_ascii_start(),
                None => return false,
            },
        };
        match self {
            Wants::StringValue => value.first() == Some(&b'"'),
            _ => !value.is_empty() && !value.starts_with(b"null"),
        }
    }
}

/// Whether the tap must decode `event`.
pub fn relevant(event: &[u8]) -> bool {
    // The automaton is built from constants; were it ever refused, every
    // event is decoded (slower, never wrong).
    let Ok(search) = &*SEARCH else { return true };
    search.find_iter(event).any(|found| MARKERS[found.pattern().as_usize()].1.met_by(&event[found.end()..]))
}

/// An SSE event longer than this without a blank line is decoded as it
/// arrives instead of being held whole.
pub const MAX_CARRY: usize = 1 << 20;

/// Reads usage and completion from a stream that passes through.
pub struct UsageTap {
    decoder: Box<dyn StreamDecoder>,
    filter: bool,
    carry: Vec<u8>,
    /// The start of the current event went to the decoder (it outgrew the
    /// carry): the rest of it must follow, or the decoder would join it to
    /// the next relevant event.
    streaming: bool,
}

impl UsageTap {
    /// A tap over `decoder` for a stream in `framing`.
    pub fn new(decoder: Box<dyn StreamDecoder>, framing: Framing) -> UsageTap {
        UsageTap { decoder, filter: framing == Framing::Sse, carry: Vec::new(), streaming: false }
    }

    /// Bytes the tap itself holds (the decoder's buffers aside).
    pub fn buffered(&self) -> usize {
        self.carry.capacity()
    }
}

impl StreamDecoder for UsageTap {
    /// Taps one chunk; appends the events of the relevant frames it completes.
    fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        if !self.filter {
            return self.decoder.feed(chunk, out);
        }
        if self.streaming {
            match event_end(chunk) {
                Some((_, next)) => {
                    self.streaming = false;
                    self.decoder.feed(&chunk[..next], out)?;
                    chunk = &chunk[next..];
                }
                None => return self.decoder.feed(chunk, out),
            }
        }
        if self.carry.is_empty() {
            let consumed = self.scan(chunk, out)?;
            self.carry.extend_from_slice(&chunk[consumed..]);
        } else {
            let mut joined = std::mem::take(&mut self.carry);
            joined.extend_from_slice(chunk);
            let consumed = self.scan(&joined, out)?;
            joined.drain(..consumed);
            self.carry = joined;
        }
        if self.carry.len() > MAX_CARRY {
            let carry = std::mem::take(&mut self.carry);
            self.streaming = true;
            self.decoder.feed(&carry, out)?;
        }
        Ok(())
    }

    /// The stream closed.
    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        if !self.carry.is_empty() {
            let carry = std::mem::take(&mut self.carry);
            self.decoder.feed(&carry, out)?;
        }
        self.decoder.finish(out)
    }

    fn answered(&self) -> bool {
        self.decoder.answered()
    }

    fn usage_seen(&self) -> bool {
        self.decoder.usage_seen()
    }
}

impl UsageTap {
    /// Feeds the relevant complete events of `bytes`; returns how many bytes
    /// were complete events.
    fn scan(&mut self, bytes: &[u8], out: &mut Vec<StreamEvent>) -> Result<usize, DecodeError> {
        let mut start = 0;
        while let Some((end, next)) = event_end(&bytes[start..]) {
            let event = &bytes[start..start + end];
            if relevant(event) {
                self.decoder.feed(&bytes[start..start + next], out)?;
            }
            start += next;
        }
        Ok(start)
    }
}

/// The end of the first event in `bytes` (before its blank line) and where
/// the next event starts.
///
/// One pass over the line feeds up to the first blank line (`\n\n` or
/// `\r\n\r\n`): a buffer of many events is walked once in all, not once
/// per event per terminator.
fn event_end(bytes: &[u8]) -> Option<(usize, usize)> {
    for at in memchr::memchr_iter(b'\n', bytes) {
        match bytes.get(at + 1) {
            Some(b'\n') => return Some((at, at + 2)),
            Some(b'\r') if at > 0 && bytes[at - 1] == b'\r' && bytes.get(at + 2) == Some(&b'\n') => {
                return Some((at - 1, at + 3));
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{feed_until_error, SseEvent, SseHandler, SseStream, MAX_EVENT_BYTES};
    use proptest::prelude::*;
    use switchyard_ir::Delta;

    /// The one-pass search's verdict is the per-marker search's: every
    /// occurrence of every marker, each checked for what must follow it.
    /// The events are made of whole JSON tokens (as SSE data is): two
    /// markers could overlap only by sharing a quote, which tokens never do.
    fn relevant_marker_by_marker(event: &[u8]) -> bool {
        MARKERS.iter().any(|(marker, wants)| {
            memchr::memmem::find_iter(event, marker).any(|at| wants.met_by(&event[at + marker.len()..]))
        })
    }

    proptest! {
        #[test]
        fn one_pass_finds_what_seven_passes_found(
            parts in prop::collection::vec(prop_oneof![
                Just(&b"\"usage\""[..]), Just(&b"\"usageMetadata\""[..]), Just(&b"\"finish_reason\""[..]),
                Just(&b"\"finishReason\""[..]), Just(&b"\"error\""[..]), Just(&b"message_stop"[..]),
                Just(&b"[DONE]"[..]), Just(&b":"[..]), Just(&b" "[..]), Just(&b"null"[..]), Just(&b"\"stop\""[..]),
                Just(&b"{"[..]), Just(&b"}"[..]), Just(&b","[..]), Just(&b"\"a \\\"usage\\\" b\""[..]),
                Just(&b"data: "[..]), Just(&b"1"[..]), Just(&b"\"usage: [DONE]\""[..]),
            ], 0..24)
        ) {
            let event = parts.concat();
            prop_assert_eq!(relevant(&event), relevant_marker_by_marker(&event), "{}", String::from_utf8_lossy(&event));
        }
    }

    /// Every event's data as a text delta, so a test sees which events
    /// reached the decoder.
    #[derive(Default)]
    struct Echo;

    impl SseHandler for Echo {
        fn event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
            out.push(StreamEvent::BlockDelta { index: 0, delta: Delta::Text(event.data.clone()) });
            Ok(())
        }
    }

    fn tap() -> UsageTap {
        UsageTap::new(Box::new(SseStream::new(Echo)), Framing::Sse)
    }

    fn texts(events: &[StreamEvent]) -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::BlockDelta { delta: Delta::Text(t), .. } => Some(t.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn an_event_ends_at_its_first_blank_line_of_either_kind() {
        assert_eq!(event_end(b"data: a\n\ndata: b\n\n"), Some((7, 9)));
        assert_eq!(event_end(b"data: a\r\n\r\ndata: b\n\n"), Some((7, 11)));
        assert_eq!(event_end(b"data: a\n\r\n\r\n"), Some((8, 12)), "a line end, then a CRLF blank line");
        assert_eq!(event_end(b"event: x\ndata: a\n\n"), Some((16, 18)));
        assert_eq!(event_end(b"data: a\r\ndata: b\r\n"), None);
        assert_eq!(event_end(b"data: a\n"), None);
        assert_eq!(event_end(b"\n\n"), Some((0, 2)));
        assert_eq!(event_end(b""), None);
    }

    #[test]
    fn only_relevant_events_are_decoded() {
        let mut tap = tap();
        let mut out = Vec::new();
        tap.feed(b"data: {\"text\":\"a\"}\n\ndata: {\"usage\":1}\n\n", &mut out).unwrap();
        tap.finish(&mut out).unwrap();
        assert_eq!(texts(&out), vec!["{\"usage\":1}".to_owned()]);
    }

    #[test]
    fn markers_tolerate_json_whitespace_and_skip_empty_members() {
        for event in [
            &br#"data: {"choices":[{"delta":{},"finish_reason": "stop"}]}"#[..],
            br#"data: {"choices":[{"delta":{},"finish_reason"  :	"length"}]}"#,
            br#"data: {"usage" : {"prompt_tokens":1}}"#,
            br#"data: { "type" : "error", "error" : {} }"#,
            br#"data: {"type": "message_stop"}"#,
            br#"data: {"candidates":[{"finishReason" : "STOP"}]}"#,
            b"data:[DONE]",
            b"event:message_stop\ndata: {}",
        ] {
            assert!(relevant(event), "{}", String::from_utf8_lossy(event));
        }
        for event in [
            &br#"data: {"choices":[{"delta":{"content":"hi"},"finish_reason":null}],"usage":null}"#[..],
            br#"data: {"choices":[{"delta":{"content":"hi"},"finish_reason" : null}],"usage" : null}"#,
            br#"data: {"choices":[{"delta":{"content":"the \"usage\": field"}}]}"#,
        ] {
            assert!(!relevant(event), "{}", String::from_utf8_lossy(event));
        }
    }

    #[test]
    fn an_event_longer_than_the_carry_is_decoded_whole_and_the_next_one_clean() {
        // Before: the start of a long irrelevant event reached the decoder
        // and its end did not, so the decoder glued it to the usage event.
        let long = format!("data: {}\n\n", "x".repeat(MAX_CARRY + 10));
        let mut tap = tap();
        let mut out = Vec::new();
        let (head, tail) = long.as_bytes().split_at(MAX_CARRY + 5);
        tap.feed(head, &mut out).unwrap();
        tap.feed(tail, &mut out).unwrap();
        tap.feed(b"data: {\"usage\":7}\n\n", &mut out).unwrap();
        tap.finish(&mut out).unwrap();
        let seen = texts(&out);
        assert_eq!(seen.last().map(String::as_str), Some("{\"usage\":7}"), "{:?}", seen.len());
        assert_eq!(seen.len(), 2);
    }

    #[test]
    fn an_endless_event_fails_cleanly_with_bounded_memory() {
        let mut tap = tap();
        let mut out = Vec::new();
        tap.feed(b"data: ", &mut out).unwrap();
        let chunk = vec![b'x'; 64 * 1024];
        let bound = 2 * MAX_CARRY + chunk.len();
        let (failure, fed) = feed_until_error(&mut tap, &chunk, |t, c| t.feed(c, &mut out), |t| t.buffered(), bound);
        assert!(matches!(failure, DecodeError::Frame(_)));
        assert!(fed <= MAX_EVENT_BYTES + MAX_CARRY);
    }
}
