//! Dropping whole events from an SSE stream that otherwise passes through
//! untouched. A metered stream whose caller did not ask for usage is sent
//! upstream asking for it (so it can be billed) and the event that only
//! carries usage is taken out again on the way back: the caller gets the
//! stream it asked for, still without a decode and re-encode of every
//! frame.
//!
//! Chunks that end on an event boundary and contain no event to drop leave
//! as they came (no copy). An event split across chunks waits for its end
//! (at most [`MAX_HELD`]; a longer one passes as it arrives).

use bytes::{Bytes, BytesMut};
use std::sync::LazyLock;

use memchr::memmem::Finder;

/// Held bytes of one unfinished event, at most.
pub const MAX_HELD: usize = 1 << 20;

/// Drops the SSE events a predicate picks.
pub struct EventFilter {
    /// Cheap pre-check: an event can only be dropped if it contains this.
    marker: Finder<'static>,
    drop: fn(&[u8]) -> bool,
    held: BytesMut,
    /// An event too long to hold is passing through: its rest follows as is.
    passing: bool,
}

impl std::fmt::Debug for EventFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventFilter").field("held", &self.held.len()).finish_non_exhaustive()
    }
}

impl EventFilter {
    /// A filter dropping the events that contain `marker` and for which
    /// `drop` (given the event's bytes) says so.
    pub fn new(marker: &'static [u8], drop: fn(&[u8]) -> bool) -> EventFilter {
        EventFilter { marker: Finder::new(marker), drop, held: BytesMut::new(), passing: false }
    }

    /// The caller's bytes for one upstream chunk.
    pub fn filter(&mut self, chunk: Bytes) -> Bytes {
        if self.passing {
            match event_end(&chunk) {
                None => return chunk,
                Some(next) => {
                    self.passing = false;
                    let (head, rest) = (chunk.slice(..next), chunk.slice(next..));
                    let tail = self.filter(rest);
                    return join(head, tail);
                }
            }
        }
        if self.held.is_empty() {
            // The common case: whole events, none to drop.
            let complete = last_event_end(&chunk);
            if complete == chunk.len() && self.marker.find(&chunk).is_none() {
                return chunk;
            }
            let out = self.keep(&chunk[..complete]);
            return self.hold(out, &chunk[complete..]);
        }
        self.held.extend_from_slice(&chunk);
        let joined = std::mem::take(&mut self.held).freeze();
        let complete = last_event_end(&joined);
        let out = self.keep(&joined[..complete]);
        self.hold(out, &joined[complete..])
    }

    /// The stream ended: what was held goes out as it is.
    pub fn finish(&mut self) -> Bytes {
        std::mem::take(&mut self.held).freeze()
    }

    /// Holds `rest` (an unfinished event) after `out`; an event too long to
    /// be one to drop is let through at once, and its rest after it.
    fn hold(&mut self, out: Bytes, rest: &[u8]) -> Bytes {
        self.held.extend_from_slice(rest);
        if self.held.len() <= MAX_HELD {
            return out;
        }
        self.passing = true;
        join(out, std::mem::take(&mut self.held).freeze())
    }

    /// The complete events of `bytes`, without the dropped ones.
    fn keep(&mut self, bytes: &[u8]) -> Bytes {
        let mut out = BytesMut::with_capacity(bytes.len());
        let mut start = 0;
        while let Some(next) = event_end(&bytes[start..]) {
            let event = &bytes[start..start + next];
            if !(self.marker.find(event).is_some() && (self.drop)(event)) {
                out.extend_from_slice(event);
            }
            start += next;
        }
        out.freeze()
    }
}

fn join(head: Bytes, tail: Bytes) -> Bytes {
    if tail.is_empty() {
        return head;
    }
    let mut out = BytesMut::with_capacity(head.len() + tail.len());
    out.extend_from_slice(&head);
    out.extend_from_slice(&tail);
    out.freeze()
}

static LF: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\n\n"));
static CRLF: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\r\n\r\n"));

/// Where the event after the first one in `bytes` starts.
fn event_end(bytes: &[u8]) -> Option<usize> {
    let lf = LF.find(bytes).map(|at| at + 2);
    // A CRLF boundary can only come before the first LF one if it is there
    // at all; most streams use LF alone.
    let crlf = match lf {
        Some(end) => CRLF.find(&bytes[..end.min(bytes.len())]).map(|at| at + 4),
        None => CRLF.find(bytes).map(|at| at + 4),
    };
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// How many bytes of `bytes` are complete events: up to the end of the
/// last blank line (a chunk usually ends with one).
fn last_event_end(bytes: &[u8]) -> usize {
    if bytes.ends_with(b"\n\n") || bytes.ends_with(b"\r\n\r\n") {
        return bytes.len();
    }
    let mut end = bytes.len();
    while let Some(at) = memchr::memrchr(b'\n', &bytes[..end]) {
        let before = &bytes[..at];
        if before.ends_with(b"\n") || before.ends_with(b"\n\r") {
            return at + 1;
        }
        end = at;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn usage_only(event: &[u8]) -> bool {
        memchr::memmem::find(event, b"\"choices\":[]").is_some()
    }

    fn filter() -> EventFilter {
        EventFilter::new(b"\"usage\":{", usage_only)
    }

    const STREAM: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n\
                          data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3}}\n\n\
                          data: [DONE]\n\n";
    const EXPECTED: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n\
                            data: [DONE]\n\n";

    #[test]
    fn the_usage_event_is_dropped_and_the_rest_passes_unchanged() {
        let mut f = filter();
        let out = f.filter(Bytes::from_static(STREAM.as_bytes()));
        assert_eq!(std::str::from_utf8(&out).unwrap(), EXPECTED);
        assert!(f.finish().is_empty());
    }

    #[test]
    fn a_chunk_without_a_dropped_event_is_not_copied() {
        let mut f = filter();
        let chunk = Bytes::from_static(b"data: {\"choices\":[{}]}\n\n");
        let out = f.filter(chunk.clone());
        assert_eq!(out.as_ptr(), chunk.as_ptr());
    }

    proptest! {
        /// However the stream is cut into chunks, the caller gets the same bytes.
        #[test]
        fn any_chunking_gives_the_same_stream(cuts in proptest::collection::vec(0usize..STREAM.len(), 0..8)) {
            let mut cuts = cuts;
            cuts.sort_unstable();
            cuts.dedup();
            let mut f = filter();
            let mut out = Vec::new();
            let mut at = 0;
            for cut in cuts.into_iter().chain(std::iter::once(STREAM.len())) {
                out.extend_from_slice(&f.filter(Bytes::copy_from_slice(&STREAM.as_bytes()[at..cut])));
                at = cut;
            }
            out.extend_from_slice(&f.finish());
            prop_assert_eq!(std::str::from_utf8(&out).unwrap(), EXPECTED);
        }
    }

    #[test]
    fn crlf_streams_split_anywhere_are_filtered_alike() {
        let stream = STREAM.replace("\n\n", "\r\n\r\n");
        let expected = EXPECTED.replace("\n\n", "\r\n\r\n");
        for cut in 0..stream.len() {
            let mut f = filter();
            let mut out = Vec::new();
            out.extend_from_slice(&f.filter(Bytes::copy_from_slice(&stream.as_bytes()[..cut])));
            out.extend_from_slice(&f.filter(Bytes::copy_from_slice(&stream.as_bytes()[cut..])));
            out.extend_from_slice(&f.finish());
            assert_eq!(std::str::from_utf8(&out).unwrap(), expected, "cut at {cut}");
        }
    }

    #[test]
    fn an_event_longer_than_the_cap_passes_whole() {
        let mut f = filter();
        let long = format!("data: {}", "x".repeat(MAX_HELD + 10));
        let mut out = Vec::new();
        out.extend_from_slice(&f.filter(Bytes::from(long.clone())));
        out.extend_from_slice(&f.filter(Bytes::from_static(b"y\n\ndata: {\"choices\":[],\"usage\":{}}\n\n")));
        out.extend_from_slice(&f.finish());
        assert_eq!(out, format!("{long}y\n\n").into_bytes());
    }
}
