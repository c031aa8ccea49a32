//! Stream framings shared by several protocols. Each decoder reassembles
//! frames split at any byte, never panics on arbitrary input, and holds at
//! most [`MAX_EVENT_BYTES`] of one frame.

mod json_array;
mod sse;

pub use json_array::JsonArrayDecoder;
pub use sse::{write_sse, SseDecoder, SseEvent, SseHandler, SseStream};

/// The largest single event, line, array element or binary frame a stream
/// decoder holds. Generous: one event may carry a whole tool call's
/// arguments or a generated image in base64, which run to a few MiB; past
/// this, the stream fails with a framing error instead of buffering what an
/// upstream (or a hostile one) keeps sending.
pub const MAX_EVENT_BYTES: usize = 16 << 20;

/// The largest whole reply a stream encoder accumulates (the Responses
/// encoder repeats the output in its terminal event). The same bound as a
/// non-streamed reply read whole.
pub const MAX_REPLY_BYTES: usize = 64 << 20;

/// Test support: feeds `chunk` to `decoder` over and over, up to 100 MB,
/// until `feed` fails, checking after each chunk that `held` stays within
/// `bound`. Returns the error and how many bytes were fed before it.
#[cfg(test)]
pub(crate) fn feed_until_error<D>(
    decoder: &mut D,
    chunk: &[u8],
    mut feed: impl FnMut(&mut D, &[u8]) -> Result<(), crate::DecodeError>,
    held: impl Fn(&D) -> usize,
    bound: usize,
) -> (crate::DecodeError, usize) {
    let mut fed = 0usize;
    loop {
        assert!(fed < 100 << 20, "no error after {fed} bytes");
        if let Err(err) = feed(decoder, chunk) {
            return (err, fed);
        }
        fed += chunk.len();
        assert!(held(decoder) <= bound, "{} bytes held", held(decoder));
    }
}
