//! Stream framings shared by several protocols. Each decoder reassembles
//! frames split at any byte and never panics on arbitrary input.

mod json_array;
mod sse;

pub use json_array::JsonArrayDecoder;
pub use sse::{write_sse, SseDecoder, SseEvent};
