//! A completion's stream: `text_completion` chunks, each a piece of the one
//! choice's `text`; the last names its `finish_reason`; a `choices: []`
//! chunk carries usage when `stream_options.include_usage` asked; then
//! `data: [DONE]`. The decoder reads it into IR events (one text block);
//! the encoder writes IR events as it.

use serde::Serialize;
use serde_json::Value;
use switchyard_codec::frame::{write_sse, SseEvent, SseHandler, SseStream};
use switchyard_codec::ir::{BlockStart, Delta, StopReason, StreamEvent, Usage};
use switchyard_codec::{DecodeError, StreamEncoder};

use super::reply::{finish_of, CompletionLogprobs, OutChoice, WireCompletion, OBJECT};
use crate::error::{body as error_body, VendorError};
use crate::response::unix_seconds;
use crate::wire::{stop_reason_from_finish, WireUsage};

const DONE: &str = "[DONE]";

/// Upstream completion chunks → IR events.
pub(crate) type CompletionDecoder = SseStream<Chunks>;

/// What the decoder knows across one stream's chunks.
#[derive(Default)]
pub(crate) struct Chunks {
    started: bool,
    /// `[DONE]` or an error arrived; anything later is ignored.
    ended: bool,
    /// The text block is open.
    open: bool,
    finished: bool,
    stop_reason: Option<StopReason>,
    usage: Option<Usage>,
}

impl Chunks {
    fn frame(&mut self, frame: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        if self.ended {
            return Ok(());
        }
        let data = frame.data.trim();
        if data.is_empty() {
            return Ok(());
        }
        if data == DONE {
            self.start(None, out);
            self.complete(out);
            return Ok(());
        }
        let value: Value = serde_json::from_str(data)?;
        if let Some(error) = VendorError::from_value(&value) {
            out.push(StreamEvent::Error(error.to_error_info()));
            self.ended = true;
            return Ok(());
        }
        let chunk: WireCompletion = serde_json::from_value(value)?;
        self.start(Some(&chunk), out);
        if let Some(usage) = &chunk.usage {
            self.usage.get_or_insert_with(Usage::default).merge(&usage.to_ir(chunk.service_tier.as_deref()));
        }
        // The IR models one reply: other choices (`n`, several prompts) are not kept.
        for choice in chunk.choices.unwrap_or_default().into_iter().filter(|c| c.index.unwrap_or(0) == 0) {
            if let Some(text) = choice.text.filter(|text| !text.is_empty()) {
                if !self.open {
                    self.open = true;
                    out.push(StreamEvent::BlockStart { index: 0, block: BlockStart::Text });
                }
                out.push(StreamEvent::BlockDelta { index: 0, delta: Delta::Text(text) });
            }
            let tokens = choice.logprobs.map(CompletionLogprobs::into_ir).unwrap_or_default();
            if !tokens.is_empty() {
                if !self.open {
                    self.open = true;
                    out.push(StreamEvent::BlockStart { index: 0, block: BlockStart::Text });
                }
                out.push(StreamEvent::BlockDelta { index: 0, delta: Delta::Logprobs(tokens) });
            }
            if let Some(finish) = choice.finish_reason {
                self.close(out);
                self.finished = true;
                self.stop_reason = Some(stop_reason_from_finish(&finish));
            }
        }
        Ok(())
    }

    fn start(&mut self, chunk: Option<&WireCompletion>, out: &mut Vec<StreamEvent>) {
        if self.started {
            return;
        }
        self.started = true;
        out.push(StreamEvent::MessageStart {
            id: chunk.and_then(|c| c.id.clone()).unwrap_or_default(),
            model: chunk.and_then(|c| c.model.clone()).unwrap_or_default(),
            created: chunk.and_then(|c| c.created.as_ref()).and_then(unix_seconds),
            usage: Usage::default(),
        });
    }

    fn close(&mut self, out: &mut Vec<StreamEvent>) {
        if std::mem::take(&mut self.open) {
            out.push(StreamEvent::BlockStop { index: 0 });
        }
    }

    /// Ends the reply: usage that trailed the finish reason lands in the
    /// `MessageDelta` before `MessageStop`.
    fn complete(&mut self, out: &mut Vec<StreamEvent>) {
        self.close(out);
        if self.finished || self.usage.is_some() {
            out.push(StreamEvent::MessageDelta {
                stop_reason: self.stop_reason,
                stop_sequence: None,
                usage: self.usage.unwrap_or_default(),
            });
        }
        out.push(StreamEvent::MessageStop);
        self.ended = true;
    }
}

impl SseHandler for Chunks {
    fn event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        self.frame(event, out)
    }

    fn end(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        // A stream that finished its choice but lost `[DONE]` is complete.
        if !self.ended && self.finished {
            self.complete(out);
        }
        Ok(())
    }

    fn answered(&self) -> bool {
        self.finished && !self.ended
    }

    fn usage_seen(&self) -> bool {
        self.usage.is_some()
    }
}

#[derive(Serialize)]
struct OutChunk<'a> {
    id: &'a str,
    object: &'static str,
    created: i64,
    choices: Vec<OutChoice>,
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<WireUsage>,
}

/// IR events → completion chunks. Only text has a place in them: a
/// reply's reasoning or tool calls are not written.
#[derive(Default)]
pub(crate) struct CompletionEncoder {
    id: String,
    model: String,
    created: i64,
    /// The reply's text block (the first one opened).
    text_block: Option<u32>,
    stop_reason: Option<StopReason>,
    usage: Usage,
    ended: bool,
    /// Write the trailing `choices: []` usage chunk.
    usage_chunk: bool,
    /// Where the next token with a log probability starts in the text.
    token_offset: u64,
}

impl CompletionEncoder {
    /// An encoder that writes the usage chunk only when `usage_chunk`.
    pub(crate) fn with_usage_chunk(usage_chunk: bool) -> CompletionEncoder {
        CompletionEncoder { usage_chunk, ..CompletionEncoder::default() }
    }

    fn write_chunk(&self, choices: Vec<OutChoice>, usage: Option<WireUsage>, out: &mut Vec<u8>) {
        let chunk =
            OutChunk { id: &self.id, object: OBJECT, created: self.created, choices, model: &self.model, usage };
        write_sse(out, None, &switchyard_codec::json::to_vec(&chunk));
    }

    fn write_text(&self, text: String, finish_reason: Option<&'static str>, out: &mut Vec<u8>) {
        self.write_chunk(vec![OutChoice { text, index: 0, logprobs: None, finish_reason }], None, out);
    }
}

impl StreamEncoder for CompletionEncoder {
    fn encode(&mut self, event: &StreamEvent, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        match event {
            StreamEvent::MessageStart { id, model, created, usage } => {
                self.id.clone_from(id);
                self.model.clone_from(model);
                self.created = created.unwrap_or(0);
                self.usage.merge(usage);
            }
            StreamEvent::BlockStart { index, block: BlockStart::Text } => {
                self.text_block.get_or_insert(*index);
            }
            StreamEvent::BlockStart { .. } | StreamEvent::BlockStop { .. } => {}
            StreamEvent::BlockDelta { index, delta: Delta::Text(text) } => {
                if Some(*index) == self.text_block && !text.is_empty() {
                    self.write_text(text.clone(), None, out);
                }
            }
            StreamEvent::BlockDelta { index, delta: Delta::Logprobs(tokens) } => {
                if Some(*index) == self.text_block {
                    if let Some(logprobs) = CompletionLogprobs::from_ir(tokens, self.token_offset) {
                        self.token_offset += tokens.iter().map(|t| t.token.len() as u64).sum::<u64>();
                        let choice =
                            OutChoice { text: String::new(), index: 0, logprobs: Some(logprobs), finish_reason: None };
                        self.write_chunk(vec![choice], None, out);
                    }
                }
            }
            StreamEvent::BlockDelta { .. } => {}
            StreamEvent::MessageDelta { stop_reason, usage, .. } => {
                if stop_reason.is_some() {
                    self.stop_reason = *stop_reason;
                }
                self.usage.merge(usage);
            }
            StreamEvent::MessageStop => {
                // The last choice chunk always names a finish reason.
                let finish = finish_of(self.stop_reason.unwrap_or(StopReason::EndTurn));
                self.write_text(String::new(), Some(finish), out);
                if self.usage_chunk {
                    self.write_chunk(Vec::new(), Some(WireUsage::from_ir(&self.usage)), out);
                }
                write_sse(out, None, DONE.as_bytes());
                self.ended = true;
            }
            StreamEvent::Error(error) => {
                write_sse(out, None, &switchyard_codec::json::to_vec(&error_body(error)));
                self.ended = true;
            }
        }
    }

    /// `[DONE]` is written at `MessageStop`; a stream cut short stays
    /// visibly unterminated.
    fn finish(&mut self, _out: &mut Vec<u8>) {}
}
