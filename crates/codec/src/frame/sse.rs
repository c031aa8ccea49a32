//! Server-sent events (the WHATWG `text/event-stream` grammar): `event:` and
//! `data:` fields, LF, CRLF or CR line ends, multi-line data, comments.
//!
//! Memory is bounded: a line or an event's data longer than
//! [`MAX_EVENT_BYTES`] is a framing error, so an upstream that streams one
//! endless line costs at most that much before the stream fails cleanly.

use switchyard_ir::StreamEvent;

use super::MAX_EVENT_BYTES;
use crate::{DecodeError, StreamDecoder};

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, when present.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Incremental SSE parser.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of an incomplete line.
    line: Vec<u8>,
    /// The previous chunk ended with CR: a leading LF belongs to that line end.
    after_cr: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    /// A dispatched event's data buffer, given back (`recycle`) to hold the
    /// next event's: one allocation per stream, not per event.
    spare: Option<String>,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> SseDecoder {
        SseDecoder::default()
    }

    /// Consumes a chunk and appends every event it completes. Events
    /// completed before a line or an event grew past [`MAX_EVENT_BYTES`] are
    /// appended before that error is returned.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), DecodeError> {
        if chunk.is_empty() {
            // Nothing to read, and a pending CR must still meet its LF.
            return Ok(());
        }
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while let Some(pos) = memchr::memchr2(b'\n', b'\r', chunk) {
            let (line, rest) = chunk.split_at(pos);
            let is_cr = rest[0] == b'\r';
            chunk = &rest[1..];
            if is_cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            if self.line.is_empty() {
                self.process_line(line, out)?;
            } else {
                self.check_line(line.len())?;
                let mut whole = std::mem::take(&mut self.line);
                whole.extend_from_slice(line);
                let processed = self.process_line(&whole, out);
                whole.clear();
                self.line = whole;
                processed?;
            }
        }
        self.check_line(chunk.len())?;
        self.line.extend_from_slice(chunk);
        Ok(())
    }

    /// The stream closed: a pending event without its blank line is still
    /// dispatched (upstreams that close right after the last `data:` line).
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), DecodeError> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, out)?;
        }
        self.dispatch(out);
        Ok(())
    }

    /// Bytes held for an incomplete line and event.
    pub fn buffered(&self) -> usize {
        self.line.capacity() + self.data.capacity()
    }

    /// Refuses to hold a line longer than the cap, and lets go of what was
    /// held: the stream is over.
    /// Takes back a dispatched event's data buffer, to hold a later event's.
    pub fn recycle(&mut self, mut data: String) {
        if self.spare.is_none() && data.capacity() <= MAX_RECYCLED {
            data.clear();
            self.spare = Some(data);
        }
    }

    fn check_line(&mut self, more: usize) -> Result<(), DecodeError> {
        if self.line.len().saturating_add(more) > MAX_EVENT_BYTES {
            *self = SseDecoder::default();
            return Err(too_large("an sse line"));
        }
        Ok(())
    }

    fn process_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), DecodeError> {
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.data.len().saturating_add(value.len()) > MAX_EVENT_BYTES {
                    *self = SseDecoder::default();
                    return Err(too_large("an sse event"));
                }
                if self.has_data {
                    self.data.push('\n');
                }
                // Valid UTF-8 (every vendor's) is checked fast and copied;
                // only broken bytes take the replacing path.
                match std::str::from_utf8(value) {
                    Ok(text) => self.data.push_str(text),
                    Err(_) => self.data.push_str(&String::from_utf8_lossy(value)),
                }
                self.has_data = true;
            }
            b"event" => self.event = Some(String::from_utf8_lossy(value).into_owned()),
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if self.has_data || self.event.is_some() {
            let next = self.spare.take().unwrap_or_default();
            out.push(SseEvent { event: self.event.take(), data: std::mem::replace(&mut self.data, next) });
        }
        self.has_data = false;
        self.data.clear();
    }
}

/// The largest data buffer kept for reuse (a rare huge event's is freed).
const MAX_RECYCLED: usize = 64 << 10;

fn too_large(what: &str) -> DecodeError {
    DecodeError::Frame(format!("{what} is longer than the {MAX_EVENT_BYTES}-byte limit"))
}

/// What a protocol does with the events of its SSE stream.
pub trait SseHandler: Send {
    /// One dispatched event.
    fn event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError>;
    /// The stream closed, after its last event was handled.
    fn end(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        let _ = out;
        Ok(())
    }
    /// See [`StreamDecoder::answered`].
    fn answered(&self) -> bool {
        false
    }
    /// See [`StreamDecoder::usage_seen`].
    fn usage_seen(&self) -> bool {
        false
    }
}

/// The stream decoder of an SSE protocol: frames bytes into events and hands
/// each to the protocol's handler, whatever the chunking.
#[derive(Debug, Default)]
pub struct SseStream<H> {
    sse: SseDecoder,
    events: Vec<SseEvent>,
    /// The protocol's event handler.
    pub handler: H,
}

impl<H: SseHandler> SseStream<H> {
    /// A decoder handing events to `handler`.
    pub fn new(handler: H) -> SseStream<H> {
        SseStream { sse: SseDecoder::new(), events: Vec::new(), handler }
    }

    fn drain(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        for event in self.events.drain(..) {
            let handled = self.handler.event(&event, out);
            self.sse.recycle(event.data);
            handled?;
        }
        Ok(())
    }
}

impl<H: SseHandler> StreamDecoder for SseStream<H> {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        // Events completed before a framing error still count.
        let framed = self.sse.feed(chunk, &mut self.events);
        self.drain(out)?;
        framed
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        let framed = self.sse.finish(&mut self.events);
        self.drain(out)?;
        framed?;
        self.handler.end(out)
    }

    fn answered(&self) -> bool {
        self.handler.answered()
    }

    fn usage_seen(&self) -> bool {
        self.handler.usage_seen()
    }
}

/// Appends one SSE frame. `data` must not contain line breaks (JSON written
/// by serde never does).
pub fn write_sse(out: &mut Vec<u8>, event: Option<&str>, data: &[u8]) {
    if let Some(event) = event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(event.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::feed_until_error;
    use proptest::prelude::*;

    fn decode_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.feed(chunk, &mut out).unwrap_or_default();
        }
        decoder.finish(&mut out).unwrap_or_default();
        out
    }

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent { event: event.map(str::to_owned), data: data.to_owned() }
    }

    #[test]
    fn parses_fields_comments_and_multiline_data() {
        let input = b": keep-alive\nevent: message_start\ndata: {\"a\":1}\n\ndata: one\ndata: two\n\n";
        assert_eq!(decode_all(&[input]), vec![ev(Some("message_start"), "{\"a\":1}"), ev(None, "one\ntwo")]);
    }

    #[test]
    fn accepts_crlf_and_cr_line_ends() {
        assert_eq!(
            decode_all(&[b"data: a\r\n\r\ndata: b\r\rdata:c\n\n"]),
            vec![ev(None, "a"), ev(None, "b"), ev(None, "c")]
        );
    }

    #[test]
    fn crlf_split_between_chunks_is_one_line_end() {
        assert_eq!(decode_all(&[b"data: a\r", b"\n\r", b"\n"]), vec![ev(None, "a")]);
    }

    #[test]
    fn an_empty_chunk_between_cr_and_lf_changes_nothing() {
        // Found by the split proptest: cuts at the same point give an empty chunk.
        assert_eq!(decode_all(&[b"event: a\r", b"", b"\ndata: x\n\n"]), vec![ev(Some("a"), "x")]);
    }

    #[test]
    fn dispatches_a_trailing_event_without_blank_line() {
        assert_eq!(decode_all(&[b"data: [DONE]"]), vec![ev(None, "[DONE]")]);
    }

    #[test]
    fn writer_output_reads_back() {
        let mut buf = Vec::new();
        write_sse(&mut buf, Some("ping"), b"{}");
        write_sse(&mut buf, None, b"x");
        assert_eq!(decode_all(&[&buf]), vec![ev(Some("ping"), "{}"), ev(None, "x")]);
    }

    #[test]
    fn an_endless_line_fails_cleanly_with_bounded_memory() {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        let chunk = vec![b'x'; 64 * 1024];
        decoder.feed(b"data: ", &mut out).unwrap();
        // 100 MB in 64 KiB chunks: the error must come long before.
        let (failure, fed) = feed_until_error(
            &mut decoder,
            &chunk,
            |d, c| d.feed(c, &mut out),
            SseDecoder::buffered,
            2 * MAX_EVENT_BYTES,
        );
        assert!(matches!(failure, DecodeError::Frame(_)), "{failure:?}");
        assert!(fed <= MAX_EVENT_BYTES);
        assert!(decoder.buffered() < MAX_EVENT_BYTES, "the buffers are released");
        assert!(out.is_empty());
    }

    #[test]
    fn an_endless_event_of_short_lines_fails_cleanly() {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        let line = format!("data: {}\n", "y".repeat(1000));
        let chunk = line.repeat(64);
        let (failure, fed) = feed_until_error(
            &mut decoder,
            chunk.as_bytes(),
            |d, c| d.feed(c, &mut out),
            SseDecoder::buffered,
            2 * MAX_EVENT_BYTES,
        );
        assert!(matches!(failure, DecodeError::Frame(_)));
        assert!(fed <= MAX_EVENT_BYTES + chunk.len());
    }

    #[test]
    fn events_before_the_limit_are_kept() {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        let mut input = b"data: first\n\ndata: ".to_vec();
        input.extend(std::iter::repeat_n(b'z', MAX_EVENT_BYTES + 1));
        assert!(decoder.feed(&input, &mut out).is_err());
        assert_eq!(out, vec![ev(None, "first")]);
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_events(cuts in proptest::collection::vec(0usize..200, 0..8)) {
            let input: &[u8] = b"event: a\r\ndata: {\"x\": \"\xc3\xa9\"}\r\n\r\n: c\ndata: 1\ndata: 2\n\nevent: b\rdata: z\r\r";
            let whole = decode_all(&[input]);
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (input.len() + 1)).collect();
            points.sort_unstable();
            let mut chunks = Vec::new();
            let mut last = 0;
            for p in points { chunks.push(&input[last..p]); last = p; }
            chunks.push(&input[last..]);
            prop_assert_eq!(decode_all(&chunks), whole);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_all(&[&bytes]);
        }
    }
}
