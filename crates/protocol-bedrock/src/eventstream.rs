//! AWS event-stream framing (`application/vnd.amazon.eventstream`):
//! reassembles frames split at any byte and writes frames. Prelude and
//! message CRCs are checked and computed by `aws-smithy-eventstream`.

use aws_smithy_eventstream::frame::read_message_from;
use aws_smithy_types::event_stream::Message;
use aws_smithy_types::str_bytes::StrBytes;
use switchyard_codec::DecodeError;

/// The largest frame accepted: the limit every stream decoder holds to.
/// Bedrock's frames are a few kilobytes; the cap keeps a corrupt or hostile
/// length prefix from making the reader wait for (and buffer) gigabytes, so
/// the reader holds at most one frame plus the chunk that arrived.
pub const MAX_FRAME_BYTES: usize = switchyard_codec::frame::MAX_EVENT_BYTES;
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

    /// Bytes held.
    #[cfg(test)]
    pub(crate) fn buffered(&self) -> usize {
        self.buffer.capacity()
    }

    /// True when no partial frame is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.buffer.len() <= self.start
    }
}

/// Appends one frame with string headers and a payload.
///
/// Written by hand rather than through `aws_smithy_eventstream`'s `Message`
/// (which wants owned headers and an intermediate buffer): this runs once
/// per streamed delta. The layout is the event-stream spec's: total length,
/// headers length, prelude CRC32, headers (name length, name, type 7 =
/// string, value length, value), payload, message CRC32. The reader checks
/// every frame with the crate's decoder, and the tests read these frames
/// back with it.
pub(crate) fn write_frame(headers: &[(&'static str, &str)], payload: &[u8], out: &mut Vec<u8>) {
    let headers_len: usize = headers.iter().map(|(name, value)| 1 + name.len() + 1 + 2 + value.len()).sum();
    let total = 12 + headers_len + payload.len() + 4;
    let (Ok(total32), Ok(headers32)) = (u32::try_from(total), u32::try_from(headers_len)) else {
        return;
    };
    if headers.iter().any(|(name, value)| name.len() > 255 || value.len() > usize::from(u16::MAX)) {
        return;
    }
    let start = out.len();
    out.reserve(total);
    out.extend_from_slice(&total32.to_be_bytes());
    out.extend_from_slice(&headers32.to_be_bytes());
    let prelude_crc = crc32fast::hash(&out[start..start + 8]);
    out.extend_from_slice(&prelude_crc.to_be_bytes());
    for (name, value) in headers {
        out.push(name.len() as u8);
        out.extend_from_slice(name.as_bytes());
        out.push(7);
        out.extend_from_slice(&(value.len() as u16).to_be_bytes());
        out.extend_from_slice(value.as_bytes());
    }
    out.extend_from_slice(payload);
    let message_crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&message_crc.to_be_bytes());
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
    fn hand_written_frames_match_the_crates_writer() {
        use aws_smithy_eventstream::frame::write_message_to;
        use aws_smithy_types::event_stream::{Header, HeaderValue};
        use aws_smithy_types::str_bytes::StrBytes;
        let headers =
            [(":event-type", "contentBlockDelta"), (":content-type", "application/json"), (":message-type", "event")];
        let payload = br#"{"contentBlockIndex":0,"delta":{"text":"hi \u00e9"}}"#;
        let mut ours = Vec::new();
        write_frame(&headers, payload, &mut ours);
        let message = Message::new_from_parts(
            headers
                .iter()
                .map(|(n, v)| Header::new(*n, HeaderValue::String(StrBytes::from((*v).to_owned()))))
                .collect(),
            payload.to_vec(),
        );
        let mut theirs = Vec::new();
        write_message_to(&message, &mut theirs).unwrap();
        assert_eq!(ours, theirs);
    }

    #[test]
    fn frames_round_trip_across_any_split() {
        let mut bytes = Vec::new();
        write_frame(&[(":event-type", "a")], b"{}", &mut bytes);
        write_frame(&[(":event-type", "b")], b"[1]", &mut bytes);
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
        write_frame(&[(":event-type", "a")], b"{}", &mut bytes);
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let mut reader = FrameReader::default();
        reader.push(&bytes);
        assert!(matches!(reader.next_frame(), Err(DecodeError::Frame(_))));
    }
}
