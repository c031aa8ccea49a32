//! The v2 chat SSE stream: a decoder from Cohere events to IR stream events
//! and an encoder back.
//!
//! Cohere numbers content parts and tool calls in two separate index
//! sequences and sends the tool plan with no index at all; the IR has one
//! dense block sequence. The decoder gives each wire block the next IR index
//! as it opens, and the encoder gives each IR block the next index of its
//! wire kind.

use serde_json::{json, Value};
use switchyard_codec::frame::{write_sse, SseEvent, SseHandler, SseStream};
use switchyard_codec::ir::{BlockStart, Delta, ErrorInfo, ErrorKind, Protocol, StopReason, StreamEvent, Usage};
use switchyard_codec::{json as codec_json, mentions_context_length, DecodeError, StreamEncoder};

use crate::response::{finish_reason, read_usage, stop_reason, write_usage};

/// Where an open IR block came from on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WireSlot {
    /// A content part, by its content index.
    Content(i64),
    /// A tool call, by its tool-call index.
    Tool(i64),
    /// The tool plan (sent without an index).
    Plan,
}

/// What an open block accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Text,
    Thinking,
    ToolUse,
}

#[derive(Debug, Clone, Copy)]
struct OpenBlock {
    slot: WireSlot,
    index: u32,
    kind: BlockKind,
}

/// Cohere SSE bytes → IR stream events.
pub(crate) type Decoder = SseStream<Events>;

/// What the decoder knows across the events of one stream.
#[derive(Debug, Default)]
pub(crate) struct Events {
    started: bool,
    finished: bool,
    next_index: u32,
    open: Vec<OpenBlock>,
}

impl Events {
    fn frame(&mut self, frame: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        if self.finished {
            return Ok(());
        }
        let data = frame.data.trim();
        // Cohere's SDK treats `[DONE]` as the end; the API itself ends with
        // `message-end`.
        if data.is_empty() || data == "[DONE]" {
            return Ok(());
        }
        let event: Value =
            serde_json::from_str(data).map_err(|error| DecodeError::Json(format!("stream event: {error}")))?;
        let kind = event.get("type").and_then(Value::as_str).or(frame.event.as_deref()).unwrap_or_default();
        let index = event.get("index").and_then(Value::as_i64).unwrap_or(0);
        match kind {
            "message-start" if !self.started => {
                self.started = true;
                out.push(StreamEvent::MessageStart {
                    id: str_at(&event, "/id").to_owned(),
                    model: String::new(),
                    created: None,
                    usage: Usage::default(),
                });
            }
            // A repeated start adds nothing.
            "message-start" => {}
            "content-start" => {
                let content = event.pointer("/delta/message/content");
                let kind = match content.and_then(|c| c.get("type")).and_then(Value::as_str) {
                    Some("thinking") => BlockKind::Thinking,
                    _ => BlockKind::Text,
                };
                self.open(WireSlot::Content(index), kind, None, out);
                self.content_delta(WireSlot::Content(index), content, out);
            }
            "content-delta" => {
                let content = event.pointer("/delta/message/content");
                let slot = WireSlot::Content(index);
                if !self.is_open(slot) {
                    let thinking = content.and_then(|c| c.get("thinking")).is_some()
                        && content.and_then(|c| c.get("text")).is_none();
                    let kind = if thinking { BlockKind::Thinking } else { BlockKind::Text };
                    self.open(slot, kind, None, out);
                }
                self.content_delta(slot, content, out);
                if let Some(token) = event.get("logprobs").and_then(crate::response::read_logprob) {
                    if let Some(block) = self.find(slot) {
                        out.push(StreamEvent::BlockDelta { index: block.index, delta: Delta::Logprobs(vec![token]) });
                    }
                }
            }
            "content-end" => self.close(WireSlot::Content(index), out),
            "tool-plan-delta" => {
                if !self.is_open(WireSlot::Plan) {
                    self.open(WireSlot::Plan, BlockKind::Text, None, out);
                }
                let plan = str_at(&event, "/delta/message/tool_plan");
                if let Some(block) = self.find(WireSlot::Plan) {
                    if !plan.is_empty() {
                        out.push(StreamEvent::BlockDelta { index: block.index, delta: Delta::Text(plan.to_owned()) });
                    }
                }
            }
            "tool-call-start" => {
                let call = match event.pointer("/delta/message/tool_calls") {
                    // One call per event; tolerate a one-element list.
                    Some(Value::Array(calls)) => calls.first(),
                    other => other,
                };
                let field = |pointer: &str| {
                    call.and_then(|call| call.pointer(pointer)).and_then(Value::as_str).unwrap_or_default().to_owned()
                };
                // What the encoder wrote reads back (`call_id`).
                let (id, signature) = switchyard_codec::call_id::read(&field("/id"), Protocol::Cohere);
                let start = BlockStart::ToolUse { id, name: field("/function/name"), signature };
                let slot = WireSlot::Tool(index);
                self.open(slot, BlockKind::ToolUse, Some(start), out);
                self.tool_input(slot, &field("/function/arguments"), out);
            }
            "tool-call-delta" => {
                let slot = WireSlot::Tool(index);
                if !self.is_open(slot) {
                    self.open(slot, BlockKind::ToolUse, None, out);
                }
                let arguments = str_at(&event, "/delta/message/tool_calls/function/arguments");
                self.tool_input(slot, arguments, out);
            }
            "tool-call-end" => self.close(WireSlot::Tool(index), out),
            "message-end" => self.message_end(&event, out)?,
            // Citations have no IR stream event; debug events carry prompts.
            "citation-start" | "citation-end" | "debug" => {}
            "" => {
                // A bare `{"message": ...}` is how an error body would look
                // if one arrived inside the stream.
                if let Some(message) = event.get("message").and_then(Value::as_str) {
                    self.ensure_started(out);
                    self.close_all(out);
                    out.push(StreamEvent::Error(ErrorInfo::new(error_kind(message, None), message)));
                    self.finished = true;
                }
            }
            // Event types added later are skipped, as the SDK does.
            _ => {}
        }
        Ok(())
    }

    fn message_end(&mut self, event: &Value, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        self.ensure_started(out);
        self.close_all(out);
        let delta = event.get("delta");
        let finish = delta.and_then(|delta| delta.get("finish_reason")).and_then(Value::as_str);
        let usage = read_usage(delta.and_then(|delta| delta.get("usage")))?;
        let error =
            delta.and_then(|delta| delta.get("error")).and_then(Value::as_str).filter(|message| !message.is_empty());
        match error {
            Some(message) => {
                // Usage first, so that what was generated is still metered.
                if usage != Usage::default() {
                    out.push(StreamEvent::MessageDelta {
                        stop_reason: Some(StopReason::Error),
                        stop_sequence: None,
                        usage,
                    });
                }
                out.push(StreamEvent::Error(ErrorInfo::new(error_kind(message, finish), message)));
            }
            None => {
                out.push(StreamEvent::MessageDelta {
                    stop_reason: finish.and_then(stop_reason),
                    stop_sequence: None,
                    usage,
                });
                out.push(StreamEvent::MessageStop);
            }
        }
        self.finished = true;
        Ok(())
    }

    /// Blocks never interleave in the IR grammar, so opening one closes any
    /// other (Cohere sends them one after another anyway).
    fn open(&mut self, slot: WireSlot, kind: BlockKind, start: Option<BlockStart>, out: &mut Vec<StreamEvent>) {
        self.ensure_started(out);
        self.close_all(out);
        let index = self.next_index;
        self.next_index += 1;
        let block = start.unwrap_or(match kind {
            BlockKind::Text => BlockStart::Text,
            BlockKind::Thinking => BlockStart::Thinking,
            BlockKind::ToolUse => BlockStart::ToolUse { id: String::new(), name: String::new(), signature: None },
        });
        self.open.push(OpenBlock { slot, index, kind });
        out.push(StreamEvent::BlockStart { index, block });
    }

    fn content_delta(&mut self, slot: WireSlot, content: Option<&Value>, out: &mut Vec<StreamEvent>) {
        let (Some(block), Some(content)) = (self.find(slot), content) else {
            return;
        };
        let field = |key: &str| content.get(key).and_then(Value::as_str);
        let delta = match block.kind {
            BlockKind::Thinking => {
                field("thinking").or_else(|| field("text")).map(|text| Delta::Thinking(text.to_owned()))
            }
            BlockKind::Text => field("text").or_else(|| field("thinking")).map(|text| Delta::Text(text.to_owned())),
            BlockKind::ToolUse => None,
        };
        if let Some(delta) = delta.filter(|delta| !matches!(delta, Delta::Text(t) | Delta::Thinking(t) if t.is_empty()))
        {
            out.push(StreamEvent::BlockDelta { index: block.index, delta });
        }
    }

    fn tool_input(&mut self, slot: WireSlot, arguments: &str, out: &mut Vec<StreamEvent>) {
        if arguments.is_empty() {
            return;
        }
        if let Some(block) = self.find(slot) {
            out.push(StreamEvent::BlockDelta { index: block.index, delta: Delta::ToolInput(arguments.to_owned()) });
        }
    }

    fn ensure_started(&mut self, out: &mut Vec<StreamEvent>) {
        if !self.started {
            self.started = true;
            out.push(StreamEvent::MessageStart {
                id: String::new(),
                model: String::new(),
                created: None,
                usage: Usage::default(),
            });
        }
    }

    fn find(&self, slot: WireSlot) -> Option<OpenBlock> {
        self.open.iter().find(|block| block.slot == slot).copied()
    }

    fn is_open(&self, slot: WireSlot) -> bool {
        self.find(slot).is_some()
    }

    fn close(&mut self, slot: WireSlot, out: &mut Vec<StreamEvent>) {
        if let Some(position) = self.open.iter().position(|block| block.slot == slot) {
            let block = self.open.remove(position);
            out.push(StreamEvent::BlockStop { index: block.index });
        }
    }

    fn close_all(&mut self, out: &mut Vec<StreamEvent>) {
        self.open.sort_by_key(|block| block.index);
        for block in self.open.drain(..) {
            out.push(StreamEvent::BlockStop { index: block.index });
        }
    }
}

impl SseHandler for Events {
    fn event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        self.frame(event, out)
    }
}

/// The string at a JSON pointer, or empty.
fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// The class of an in-stream error, from its message and finish reason.
fn error_kind(message: &str, finish_reason: Option<&str>) -> ErrorKind {
    if finish_reason == Some("TIMEOUT") {
        ErrorKind::Timeout
    } else if mentions_context_length(message) {
        ErrorKind::ContextLength
    } else {
        ErrorKind::Internal
    }
}

/// The wire block an IR block was written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WireBlock {
    Text(u32),
    Thinking(u32),
    Tool(u32),
    /// Redacted reasoning: Cohere has no form for it.
    Skipped,
}

/// IR stream events → Cohere SSE bytes, ending with `message-end`.
#[derive(Debug, Default)]
pub(crate) struct Encoder {
    started: bool,
    ended: bool,
    blocks: Vec<(u32, WireBlock)>,
    next_content: u32,
    next_tool: u32,
    stop_reason: Option<StopReason>,
    usage: Usage,
}

impl Encoder {
    pub(crate) fn new() -> Encoder {
        Encoder::default()
    }

    fn start(&mut self, id: &str, out: &mut Vec<u8>) {
        self.started = true;
        let delta = json!({"message": {"role": "assistant"}});
        let event = if id.is_empty() {
            json!({"type": "message-start", "delta": delta})
        } else {
            json!({"type": "message-start", "id": id, "delta": delta})
        };
        frame(out, "message-start", &event);
    }

    fn ensure_started(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            self.start("", out);
        }
    }

    fn block_start(&mut self, index: u32, block: &BlockStart, out: &mut Vec<u8>) {
        self.ensure_started(out);
        let wire = match block {
            BlockStart::Text | BlockStart::Thinking => {
                let content_index = self.next_content;
                self.next_content += 1;
                let (wire, content) = if *block == BlockStart::Text {
                    (WireBlock::Text(content_index), json!({"type": "text", "text": ""}))
                } else {
                    (WireBlock::Thinking(content_index), json!({"type": "thinking", "thinking": ""}))
                };
                frame(
                    out,
                    "content-start",
                    &json!({"type": "content-start", "index": content_index,
                        "delta": {"message": {"content": content}}}),
                );
                wire
            }
            BlockStart::ToolUse { id, name, signature } => {
                let tool_index = self.next_tool;
                self.next_tool += 1;
                // As in a whole reply: the id in the caller's form, the
                // call's signature riding in it.
                let id = switchyard_codec::call_id::written(id, signature.as_deref(), Protocol::Cohere);
                frame(
                    out,
                    "tool-call-start",
                    &json!({"type": "tool-call-start", "index": tool_index,
                        "delta": {"message": {"tool_calls": {"id": id, "type": "function",
                            "function": {"name": name, "arguments": ""}}}}}),
                );
                WireBlock::Tool(tool_index)
            }
            BlockStart::RedactedThinking { .. } => WireBlock::Skipped,
        };
        self.blocks.push((index, wire));
    }

    fn block_delta(&mut self, index: u32, delta: &Delta, out: &mut Vec<u8>) {
        let Some(&(_, wire)) = self.blocks.iter().find(|(open, _)| *open == index) else {
            return;
        };
        match (wire, delta) {
            (WireBlock::Text(content_index), Delta::Text(text)) if !text.is_empty() => frame(
                out,
                "content-delta",
                &json!({"type": "content-delta", "index": content_index,
                    "delta": {"message": {"content": {"text": text}}}}),
            ),
            (WireBlock::Text(content_index), Delta::Logprobs(tokens)) => {
                for token in tokens {
                    frame(
                        out,
                        "content-delta",
                        &json!({"type": "content-delta", "index": content_index,
                            "delta": {"message": {"content": {"text": ""}}},
                            "logprobs": crate::response::write_logprob(token)}),
                    );
                }
            }
            (WireBlock::Thinking(content_index), Delta::Thinking(text)) if !text.is_empty() => {
                frame(
                    out,
                    "content-delta",
                    &json!({"type": "content-delta", "index": content_index,
                        "delta": {"message": {"content": {"thinking": text}}}}),
                );
            }
            (WireBlock::Tool(tool_index), Delta::ToolInput(arguments)) if !arguments.is_empty() => {
                frame(
                    out,
                    "tool-call-delta",
                    &json!({"type": "tool-call-delta", "index": tool_index,
                        "delta": {"message": {"tool_calls": {"function": {"arguments": arguments}}}}}),
                );
            }
            // Signatures and empty pieces have no Cohere form.
            _ => {}
        }
    }

    fn block_stop(&mut self, index: u32, out: &mut Vec<u8>) {
        let Some(position) = self.blocks.iter().position(|(open, _)| *open == index) else {
            return;
        };
        let (_, wire) = self.blocks.remove(position);
        match wire {
            WireBlock::Text(content_index) | WireBlock::Thinking(content_index) => {
                frame(out, "content-end", &json!({"type": "content-end", "index": content_index}))
            }
            WireBlock::Tool(tool_index) => {
                frame(out, "tool-call-end", &json!({"type": "tool-call-end", "index": tool_index}))
            }
            WireBlock::Skipped => {}
        }
    }

    /// Closes what is open and writes `message-end`, the stream's last event.
    fn end(&mut self, error: Option<&str>, out: &mut Vec<u8>) {
        self.ensure_started(out);
        let open: Vec<u32> = self.blocks.iter().map(|(index, _)| *index).collect();
        for index in open {
            self.block_stop(index, out);
        }
        let mut delta = json!({
            "finish_reason": if error.is_some() { "ERROR" } else { finish_reason(self.stop_reason) },
        });
        if let Some(message) = error {
            delta["error"] = Value::from(message);
        }
        delta["usage"] = write_usage(&self.usage);
        frame(out, "message-end", &json!({"type": "message-end", "delta": delta}));
        self.ended = true;
    }
}

impl StreamEncoder for Encoder {
    fn encode(&mut self, event: &StreamEvent, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        match event {
            StreamEvent::MessageStart { id, usage, .. } => {
                self.usage.merge(usage);
                if !self.started {
                    self.start(id, out);
                }
            }
            StreamEvent::BlockStart { index, block } => self.block_start(*index, block, out),
            StreamEvent::BlockDelta { index, delta } => self.block_delta(*index, delta, out),
            StreamEvent::BlockStop { index } => self.block_stop(*index, out),
            StreamEvent::MessageDelta { stop_reason, usage, .. } => {
                if stop_reason.is_some() {
                    self.stop_reason = *stop_reason;
                }
                self.usage.merge(usage);
            }
            StreamEvent::MessageStop => self.end(None, out),
            StreamEvent::Error(error) => self.end(Some(&error.message), out),
        }
    }

    /// `message-end` already closed a complete stream; one cut short is left
    /// for the caller to end with an error event.
    fn finish(&mut self, _out: &mut Vec<u8>) {}
}

/// One SSE frame with Cohere's `event:` line.
fn frame(out: &mut Vec<u8>, kind: &str, event: &Value) {
    write_sse(out, Some(kind), &codec_json::to_vec(event));
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_codec::StreamDecoder;

    fn decode(bytes: &[u8]) -> Vec<StreamEvent> {
        let mut decoder = Decoder::default();
        let mut out = Vec::new();
        decoder.feed(bytes, &mut out).unwrap();
        decoder.finish(&mut out).unwrap();
        out
    }

    fn encode(events: &[StreamEvent]) -> Vec<u8> {
        let mut encoder = Encoder::new();
        let mut out = Vec::new();
        for event in events {
            encoder.encode(event, &mut out);
        }
        encoder.finish(&mut out);
        out
    }

    #[test]
    fn remaps_separate_wire_indexes_to_one_dense_sequence() {
        let stream = concat!(
            "event: message-start\ndata: {\"type\":\"message-start\",\"id\":\"m1\",\"delta\":{\"message\":{\"role\":\"assistant\"}}}\n\n",
            "event: content-start\ndata: {\"type\":\"content-start\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"type\":\"thinking\",\"thinking\":\"\"}}}}\n\n",
            "event: content-delta\ndata: {\"type\":\"content-delta\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"thinking\":\"hmm\"}}}}\n\n",
            "event: content-end\ndata: {\"type\":\"content-end\",\"index\":0}\n\n",
            "event: tool-plan-delta\ndata: {\"type\":\"tool-plan-delta\",\"delta\":{\"message\":{\"tool_plan\":\"I will\"}}}\n\n",
            "event: tool-call-start\ndata: {\"type\":\"tool-call-start\",\"index\":0,\"delta\":{\"message\":{\"tool_calls\":{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}}}}\n\n",
            "event: tool-call-delta\ndata: {\"type\":\"tool-call-delta\",\"index\":0,\"delta\":{\"message\":{\"tool_calls\":{\"function\":{\"arguments\":\"{}\"}}}}}\n\n",
            "event: tool-call-end\ndata: {\"type\":\"tool-call-end\",\"index\":0}\n\n",
            "event: message-end\ndata: {\"type\":\"message-end\",\"delta\":{\"finish_reason\":\"TOOL_CALL\",\"usage\":{\"tokens\":{\"input_tokens\":9,\"output_tokens\":4}}}}\n\n",
        );
        let events = decode(stream.as_bytes());
        let indexes: Vec<u32> = events
            .iter()
            .filter_map(|event| match event {
                StreamEvent::BlockStart { index, .. } => Some(*index),
                _ => None,
            })
            .collect();
        assert_eq!(indexes, vec![0, 1, 2]);
        assert_eq!(events[4], StreamEvent::BlockStart { index: 1, block: BlockStart::Text });
        assert_eq!(events.last(), Some(&StreamEvent::MessageStop), "{events:?}");

        // And back: the thinking and plan text are content 0 and 1, the call is tool 0.
        let bytes = encode(&events);
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.contains("\"type\":\"content-start\",\"index\":1"), "{text}");
        assert!(text.contains("\"type\":\"tool-call-start\",\"index\":0"), "{text}");
        assert!(text.ends_with("\"output_tokens\":4}}}}\n\n"), "{text}");
    }

    #[test]
    fn message_end_with_error_is_an_error_event() {
        let stream = concat!(
            "data: {\"type\":\"message-start\",\"id\":\"m1\"}\n\n",
            "data: {\"type\":\"content-start\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"type\":\"text\",\"text\":\"Hi\"}}}}\n\n",
            "data: {\"type\":\"message-end\",\"delta\":{\"finish_reason\":\"ERROR\",\"error\":\"internal failure\",\"usage\":{\"tokens\":{\"input_tokens\":3,\"output_tokens\":1}}}}\n\n",
            "data: {\"type\":\"content-start\",\"index\":1}\n\n",
        );
        let events = decode(stream.as_bytes());
        assert_eq!(
            events[1..],
            [
                StreamEvent::BlockStart { index: 0, block: BlockStart::Text },
                StreamEvent::BlockDelta { index: 0, delta: Delta::Text("Hi".into()) },
                StreamEvent::BlockStop { index: 0 },
                StreamEvent::MessageDelta {
                    stop_reason: Some(StopReason::Error),
                    stop_sequence: None,
                    usage: Usage { input_tokens: 3, output_tokens: 1, ..Usage::default() }
                },
                StreamEvent::Error(ErrorInfo::new(ErrorKind::Internal, "internal failure")),
            ]
        );
    }

    #[test]
    fn encoder_error_form_and_nothing_after_the_end() {
        let bytes = encode(&[
            StreamEvent::MessageStart { id: "x".into(), model: "m".into(), created: None, usage: Usage::default() },
            StreamEvent::BlockStart { index: 0, block: BlockStart::Text },
            StreamEvent::Error(ErrorInfo::new(ErrorKind::Overloaded, "upstream overloaded")),
            StreamEvent::MessageStop,
        ]);
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(
            text,
            concat!(
                "event: message-start\ndata: {\"type\":\"message-start\",\"id\":\"x\",\"delta\":{\"message\":{\"role\":\"assistant\"}}}\n\n",
                "event: content-start\ndata: {\"type\":\"content-start\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"type\":\"text\",\"text\":\"\"}}}}\n\n",
                "event: content-end\ndata: {\"type\":\"content-end\",\"index\":0}\n\n",
                "event: message-end\ndata: {\"type\":\"message-end\",\"delta\":{\"finish_reason\":\"ERROR\",\"error\":\"upstream overloaded\",\"usage\":{\"billed_units\":{\"input_tokens\":0,\"output_tokens\":0},\"tokens\":{\"input_tokens\":0,\"output_tokens\":0}}}}\n\n",
            )
        );
    }

    #[test]
    fn tolerates_missing_starts_done_and_bare_errors() {
        let events = decode(
            b"data: {\"type\":\"content-delta\",\"index\":0,\"delta\":{\"message\":{\"content\":{\"text\":\"a\"}}}}\n\ndata: [DONE]\n\n",
        );
        assert_eq!(events.len(), 3);
        assert!(matches!(events[0], StreamEvent::MessageStart { .. }));
        let events = decode(b"data: {\"message\":\"too many tokens in prompt\"}\n\n");
        assert_eq!(
            events[1],
            StreamEvent::Error(ErrorInfo::new(ErrorKind::ContextLength, "too many tokens in prompt"))
        );
        let mut decoder = Decoder::default();
        assert!(decoder.feed(b"data: {oops\n\n", &mut Vec::new()).is_err());
    }
}
