//! Responses streaming: the semantic SSE events (`response.created`,
//! `response.output_item.added`, `response.output_text.delta`, ...,
//! `response.completed`) decoded into and encoded from IR stream events.
//! There is no `[DONE]` sentinel: a terminal response event ends the stream.

mod decode;
mod encode;

pub(crate) use decode::ResponsesStreamDecoder;
pub(crate) use encode::ResponsesStreamEncoder;
