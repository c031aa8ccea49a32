//! AWS event-stream framing (`application/vnd.amazon.eventstream`):
//! reassembles frames split at any byte and writes frames. Prelude and
//! message CRCs are checked and computed by `aws-smithy-eventstream`.

use aws_smithy_eventstream::frame::{read_message_from, write_message_to};
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use aws_smithy_types::str_bytes::StrBytes;
use switchyard_codec::DecodeError;

/// The largest frame accepted. Bedrock's frames are a few kilobytes; the cap
/// keeps a corrupt length prefix from making the reader wait for (and
/// buffer) gigabytes.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;
/// Total length, headers length, prelude CRC.
const PRELUDE_BYTES: usize = 12;
/// A prelude and a message CRC, with no headers and no payload.
const MIN_FRAME_BYTES: usize = 16;

/// Incremental frame reader.
#[derive(Debug, Default)]
pub(crate) struct FrameReader {
    buffer: Vec<u8>,
    /// Bytes of `buffer` already consumed (dropped on the next push, so a
    /// chunk of many frames costs one copy, not one per frame).
    start: usize,
}

impl FrameReader {
    /// Appends received bytes.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        if self.start > 0 {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        self.buffer.extend_from_slice(chunk);
    }

    /// The next complete frame, if the buffer holds one.
    pub(crate) fn next_frame(&mut self) -> Result<Option<Message>, DecodeError> {
        let pending = self.buffer.get(self.start..).unwrap_or_default();
        let Some(prelude) = pending.get(..PRELUDE_BYTES) else {
            return Ok(None);
        };
        let declared = u32::from_be_bytes([prelude[0], prelude[1], prelude[2], prelude[3]]);
        let total = usize::try_from(declared).unwrap_or(usize::MAX);
        if !(MIN_FRAME_BYTES..=MAX_FRAME_BYTES).contains(&total) {
            return Err(DecodeError::Frame(format!(
                "frame length {declared} is outside {MIN_FRAME_BYTES}..={MAX_FRAME_BYTES}"
            )));
        }
        let Some(frame) = pending.get(..total) else {
            return Ok(None);
        };
        let message = read_message_from(frame).map_err(|err| DecodeError::Frame(err.to_string()))?;
        self.start += total;
        Ok(Some(message))
    }

    /// True when no partial frame is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.buffer.len() <= self.start
    }
}

/// Appends one frame with string headers and a payload.
pub(crate) fn write_frame(headers: &[(&'static str, &str)], payload: Vec<u8>, out: &mut Vec<u8>) {
    let headers = headers
        .iter()
        .map(|(name, value)| Header::new(*name, HeaderValue::String(StrBytes::from((*value).to_owned()))))
        .collect();
    let message = Message::new_from_parts(headers, payload);
    // Writing fails only for a payload over 4 GiB or a header value over
    // 32 KiB, which no event here comes near; the frame is then left out
    // rather than written half.
    let mut frame = Vec::new();
    if write_message_to(&message, &mut frame).is_ok() {
        out.extend_from_slice(&frame);
    }
}

/// A string header of a frame.
pub(crate) fn header<'a>(message: &'a Message, name: &str) -> Option<&'a str> {
    message
        .headers()
        .iter()
        .find(|header| header.name().as_str() == name)
        .and_then(|header| header.value().as_string().ok())
        .map(StrBytes::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_across_any_split() {
        let mut bytes = Vec::new();
        write_frame(&[(":event-type", "a")], b"{}".to_vec(), &mut bytes);
        write_frame(&[(":event-type", "b")], b"[1]".to_vec(), &mut bytes);
        for split in 0..=bytes.len() {
            let mut reader = FrameReader::default();
            let mut names = Vec::new();
            for part in [&bytes[..split], &bytes[split..]] {
                reader.push(part);
                while let Some(message) = reader.next_frame().unwrap() {
                    names.push(header(&message, ":event-type").unwrap().to_owned());
                }
            }
            assert_eq!(names, ["a", "b"]);
            assert!(reader.is_empty());
        }
    }

    #[test]
    fn absurd_lengths_fail_at_the_prelude() {
        let mut reader = FrameReader::default();
        reader.push(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(matches!(reader.next_frame(), Err(DecodeError::Frame(_))));
        let mut reader = FrameReader::default();
        reader.push(&[0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(matches!(reader.next_frame(), Err(DecodeError::Frame(_))));
    }

    #[test]
    fn corrupt_crc_is_an_error() {
        let mut bytes = Vec::new();
        write_frame(&[(":event-type", "a")], b"{}".to_vec(), &mut bytes);
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let mut reader = FrameReader::default();
        reader.push(&bytes);
        assert!(matches!(reader.next_frame(), Err(DecodeError::Frame(_))));
    }
}
