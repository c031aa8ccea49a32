//! A JSON array streamed element by element (`[{..},\r\n{..}]`), as Gemini's
//! `streamGenerateContent` sends it without `alt=sse`. The decoder yields each
//! top-level element's bytes as soon as its closing brace arrives, and
//! holds at most [`MAX_EVENT_BYTES`] of an element.

use super::MAX_EVENT_BYTES;
use crate::DecodeError;

/// Incremental splitter of a streamed JSON array into its elements.
#[derive(Debug, Default)]
pub struct JsonArrayDecoder {
    /// Bytes of the element being read.
    element: Vec<u8>,
    depth: u32,
    in_string: bool,
    escaped: bool,
    opened: bool,
    closed: bool,
}

/// Nesting deeper than this is refused (a hostile upstream cannot make us
/// track unbounded depth).
const MAX_DEPTH: u32 = 512;

impl JsonArrayDecoder {
    /// A decoder before the opening `[`.
    pub fn new() -> JsonArrayDecoder {
        JsonArrayDecoder::default()
    }

    /// Consumes a chunk and appends each element it completes.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<Vec<u8>>) -> Result<(), DecodeError> {
        let result = self.split(chunk, out);
        if result.is_err() {
            // The stream is over; what was held goes.
            *self = JsonArrayDecoder::default();
        }
        result
    }

    /// Bytes held for an incomplete element.
    pub fn buffered(&self) -> usize {
        self.element.capacity()
    }

    fn split(&mut self, chunk: &[u8], out: &mut Vec<Vec<u8>>) -> Result<(), DecodeError> {
        for &byte in chunk {
            if self.depth == 0 {
                match byte {
                    b' ' | b'\t' | b'\r' | b'\n' => continue,
                    b'[' if !self.opened => self.opened = true,
                    b',' if self.opened && !self.closed => {}
                    b']' if self.opened && !self.closed => self.closed = true,
                    b'{' | b'[' if self.opened && !self.closed => {
                        self.depth = 1;
                        self.element.push(byte);
                    }
                    _ => return Err(DecodeError::Frame(format!("unexpected byte {byte:#04x} between array elements"))),
                }
                continue;
            }
            if self.element.len() >= MAX_EVENT_BYTES {
                return Err(DecodeError::Frame(format!(
                    "an array element is longer than the {MAX_EVENT_BYTES}-byte limit"
                )));
            }
            self.element.push(byte);
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if byte == b'\\' {
                    self.escaped = true;
                } else if byte == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match byte {
                b'"' => self.in_string = true,
                b'{' | b'[' => {
                    self.depth += 1;
                    if self.depth > MAX_DEPTH {
                        return Err(DecodeError::Frame("json nesting too deep".to_owned()));
                    }
                }
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        out.push(std::mem::take(&mut self.element));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The stream closed: an element cut short is an error.
    pub fn finish(&mut self) -> Result<(), DecodeError> {
        if self.depth != 0 {
            return Err(DecodeError::Frame("stream ended inside an array element".to_owned()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::feed_until_error;
    use proptest::prelude::*;

    fn split(chunks: &[&[u8]]) -> Result<Vec<Vec<u8>>, DecodeError> {
        let mut decoder = JsonArrayDecoder::new();
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.feed(chunk, &mut out)?;
        }
        decoder.finish()?;
        Ok(out)
    }

    #[test]
    fn splits_elements_with_strings_holding_braces() {
        let input = b"[{\"a\":\"}]\\\"{\"}\r\n,\r\n{\"b\":[1,{\"c\":2}]}\n]";
        let out = split(&[input]).unwrap_or_default();
        assert_eq!(out, vec![b"{\"a\":\"}]\\\"{\"}".to_vec(), b"{\"b\":[1,{\"c\":2}]}".to_vec()]);
    }

    #[test]
    fn rejects_garbage_and_truncation() {
        assert!(split(&[b"x"]).is_err());
        assert!(split(&[b"[{\"a\":1"]).is_err());
    }

    #[test]
    fn an_endless_element_fails_cleanly_with_bounded_memory() {
        let mut decoder = JsonArrayDecoder::new();
        let mut out = Vec::new();
        decoder.feed(b"[{\"text\": \"", &mut out).unwrap();
        let chunk = vec![b'a'; 64 * 1024];
        let (failure, fed) = feed_until_error(
            &mut decoder,
            &chunk,
            |d, c| d.feed(c, &mut out),
            JsonArrayDecoder::buffered,
            2 * MAX_EVENT_BYTES,
        );
        assert!(matches!(failure, DecodeError::Frame(_)));
        assert!(fed <= MAX_EVENT_BYTES);
        assert_eq!(decoder.buffered(), 0);
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_elements(cut in 0usize..40) {
            let input: &[u8] = b"[{\"t\":\"a,]\"},\n{\"t\":{\"u\":[]}}]";
            let cut = cut % (input.len() + 1);
            prop_assert_eq!(split(&[&input[..cut], &input[cut..]]).ok(), split(&[input]).ok());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = split(&[&bytes]);
        }
    }
}
