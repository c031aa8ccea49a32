//! Server-sent events (the WHATWG `text/event-stream` grammar): `event:` and
//! `data:` fields, LF, CRLF or CR line ends, multi-line data, comments.

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
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> SseDecoder {
        SseDecoder::default()
    }

    /// Consumes a chunk and appends every event it completes.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) {
        if chunk.is_empty() {
            // Nothing to read, and a pending CR must still meet its LF.
            return;
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
                self.process_line(line, out);
            } else {
                let mut whole = std::mem::take(&mut self.line);
                whole.extend_from_slice(line);
                self.process_line(&whole, out);
                whole.clear();
                self.line = whole;
            }
        }
        self.line.extend_from_slice(chunk);
    }

    /// The stream closed: a pending event without its blank line is still
    /// dispatched (upstreams that close right after the last `data:` line).
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, out);
        }
        self.dispatch(out);
    }

    fn process_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return;
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
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&String::from_utf8_lossy(value));
                self.has_data = true;
            }
            b"event" => self.event = Some(String::from_utf8_lossy(value).into_owned()),
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if self.has_data || self.event.is_some() {
            out.push(SseEvent { event: self.event.take(), data: std::mem::take(&mut self.data) });
        }
        self.has_data = false;
        self.data.clear();
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
    use proptest::prelude::*;

    fn decode_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.feed(chunk, &mut out);
        }
        decoder.finish(&mut out);
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
