//! The usage tap of a same-protocol stream: the bytes pass through
//! untouched, and the tap only needs the reply's usage and whether it
//! finished. Decoding every frame for that would parse every delta; on SSE
//! streams the tap splits events by their blank lines (a byte search) and
//! hands the protocol's decoder only the events that can carry usage, a
//! terminator or an error. Other framings are decoded whole.

use std::sync::LazyLock;

use memchr::memmem::Finder;
use switchyard_ir::StreamEvent;

use crate::{DecodeError, Framing, StreamDecoder};

/// Substrings of the SSE events a tap must decode: usage, terminators and
/// errors in each protocol's wording. They are JSON *keys* (a quote, the
/// name, a quote and a colon) or event names: inside a JSON string every
/// quote is escaped, so generated text can never look like a key.
static MARKERS: LazyLock<Vec<Finder<'static>>> = LazyLock::new(|| {
    [
        &b"\"usage\":"[..],
        b"\"usageMetadata\":",
        b"\"finish_reason\":\"",
        b"\"finishReason\":",
        b"\"error\":",
        b"\"type\":\"error\"",
        b"data: [DONE]",
        b"data:[DONE]",
        b"event: message_stop",
        b"\"type\":\"message_stop\"",
    ]
    .into_iter()
    .map(Finder::new)
    .collect()
});

/// An SSE event longer than this without a blank line is decoded as it is.
const MAX_CARRY: usize = 1 << 20;

/// Reads usage and completion from a stream that passes through.
pub struct UsageTap {
    decoder: Box<dyn StreamDecoder>,
    filter: bool,
    carry: Vec<u8>,
}

impl UsageTap {
    /// A tap over `decoder` for a stream in `framing`.
    pub fn new(decoder: Box<dyn StreamDecoder>, framing: Framing) -> UsageTap {
        UsageTap { decoder, filter: framing == Framing::Sse, carry: Vec::new() }
    }
}

impl StreamDecoder for UsageTap {
    /// Taps one chunk; appends the events of the relevant frames it completes.
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        if !self.filter {
            return self.decoder.feed(chunk, out);
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
}

impl UsageTap {
    /// Feeds the relevant complete events of `bytes`; returns how many bytes
    /// were complete events.
    fn scan(&mut self, bytes: &[u8], out: &mut Vec<StreamEvent>) -> Result<usize, DecodeError> {
        let mut start = 0;
        while let Some((end, next)) = event_end(&bytes[start..]) {
            let event = &bytes[start..start + end];
            if MARKERS.iter().any(|marker| marker.find(event).is_some()) {
                self.decoder.feed(&bytes[start..start + next], out)?;
            }
            start += next;
        }
        Ok(start)
    }
}

/// The end of the first event in `bytes` (before its blank line) and where
/// the next event starts.
fn event_end(bytes: &[u8]) -> Option<(usize, usize)> {
    let lf = memchr::memmem::find(bytes, b"\n\n").map(|at| (at, at + 2));
    let crlf = memchr::memmem::find(bytes, b"\r\n\r\n").map(|at| (at, at + 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}
