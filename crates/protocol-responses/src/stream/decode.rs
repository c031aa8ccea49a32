//! Stream decoder: Responses SSE events → IR stream events.
//!
//! Each `output_text` or `refusal` content part is one IR text block, each
//! function call one tool-use block, each reasoning item one thinking block
//! (its summary parts joined as in a whole response) or, when it carries only
//! encrypted content, one redacted-thinking block. A reasoning item opens its
//! block lazily, because only its first summary part or its `done` event
//! tells which kind it is. `.done` and `output_item.done` events fill in text
//! an upstream sent without deltas, so terse compatible servers decode too.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use switchyard_codec::frame::{SseEvent, SseHandler, SseStream};
use switchyard_codec::ir::{self, BlockStart, Delta, StreamEvent};
use switchyard_codec::{signature, DecodeError};

use crate::error::stream_error;
use crate::items::{self, SUMMARY_SEPARATOR};
use crate::response::{read_output_item, stop_reason, usage_of, OutputSignals};
use crate::wire::text_of;

/// Responses SSE events → IR stream events.
pub(crate) type ResponsesStreamDecoder = SseStream<Events>;

/// Decoder state across the events of one stream.
#[derive(Default)]
pub(crate) struct Events {
    started: bool,
    ended: bool,
    blocks: Blocks,
    /// Output index → what is known of that item.
    items: BTreeMap<u64, Item>,
    signals: OutputSignals,
    /// A thought signature carried by the reasoning item just done, for the
    /// function call that follows it (`switchyard_codec::signature`).
    carried: Option<String>,
}

/// Hands out dense block indexes.
#[derive(Default)]
struct Blocks {
    next: u32,
}

impl Blocks {
    fn open(&mut self, out: &mut Vec<StreamEvent>, block: BlockStart) -> u32 {
        let index = self.next;
        self.next += 1;
        out.push(StreamEvent::BlockStart { index, block });
        index
    }
}

/// One IR block being filled.
#[derive(Debug, Clone, Copy)]
struct Open {
    index: u32,
    open: bool,
    /// Some text arrived as deltas (so `.done` text must not be repeated).
    streamed: bool,
}

impl Open {
    fn delta(&mut self, out: &mut Vec<StreamEvent>, delta: Delta) {
        if self.open {
            out.push(StreamEvent::BlockDelta { index: self.index, delta });
            self.streamed = true;
        }
    }

    fn close(&mut self, out: &mut Vec<StreamEvent>) {
        if self.open {
            out.push(StreamEvent::BlockStop { index: self.index });
            self.open = false;
        }
    }
}

/// What is known of one output item.
enum Item {
    /// Content index → text block.
    Message(BTreeMap<u64, Open>),
    FunctionCall(Open),
    Reasoning(Reasoning),
    /// A built-in tool item, or one already done: its events are ignored.
    Ignored,
}

/// A reasoning item: its block once opened, and its parts in order (summary
/// parts `s<n>`, raw reasoning parts `c<n>`), each with whether it streamed.
#[derive(Default)]
struct Reasoning {
    block: Option<Open>,
    parts: Vec<(String, bool)>,
}

fn index_of(map: &Map<String, Value>, key: &str) -> u64 {
    map.get(key).and_then(Value::as_u64).unwrap_or(0)
}

impl Events {
    fn handle(&mut self, frame: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        let data = frame.data.trim();
        if self.ended || data.is_empty() || data == "[DONE]" {
            return Ok(());
        }
        let value: Value = serde_json::from_str(data)?;
        let map =
            value.as_object().ok_or_else(|| DecodeError::Frame("stream event must be a json object".to_owned()))?;
        let kind = text_of(map, "type").or(frame.event.as_deref()).unwrap_or_default();
        let output_index = index_of(map, "output_index");
        match kind {
            "response.created" | "response.in_progress" | "response.queued" => {
                self.start(map.get("response").and_then(Value::as_object), out);
            }
            "response.output_item.added" => {
                self.start(None, out);
                if let Some(item) = map.get("item").and_then(Value::as_object) {
                    self.item_added(output_index, item, out);
                }
            }
            "response.content_part.added" | "response.content_part.done" => {
                self.start(None, out);
                let part = map.get("part").and_then(Value::as_object);
                let content_index = index_of(map, "content_index");
                let is_reasoning = part.and_then(|p| text_of(p, "type")) == Some("reasoning_text");
                if is_reasoning {
                    let key = format!("c{content_index}");
                    let text = part.and_then(|p| text_of(p, "text")).unwrap_or_default();
                    self.reasoning_text(output_index, &key, text, false, out);
                } else {
                    let (text, refusal) = part
                        .and_then(items::read_output_part)
                        .map(|(text, refusal)| (text.text, refusal))
                        .unwrap_or_default();
                    let done = kind == "response.content_part.done";
                    self.message_text(output_index, content_index, &text, refusal, done, out);
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                self.start(None, out);
                let delta = text_of(map, "delta").unwrap_or_default();
                let refusal = kind == "response.refusal.delta";
                let content_index = index_of(map, "content_index");
                let tokens = crate::response::read_logprobs(map.get("logprobs"));
                if let Some(part) = self.text_part(output_index, content_index, refusal, out) {
                    if !delta.is_empty() || tokens.is_empty() {
                        part.delta(out, Delta::Text(delta.to_owned()));
                    }
                    if !tokens.is_empty() {
                        part.delta(out, Delta::Logprobs(tokens));
                    }
                }
            }
            "response.output_text.done" | "response.refusal.done" => {
                self.start(None, out);
                let refusal = kind == "response.refusal.done";
                let text = text_of(map, if refusal { "refusal" } else { "text" }).unwrap_or_default();
                let content_index = index_of(map, "content_index");
                if let Some(part) = self.text_part(output_index, content_index, refusal, out) {
                    if !part.streamed && !text.is_empty() {
                        part.delta(out, Delta::Text(text.to_owned()));
                    }
                }
            }
            "response.function_call_arguments.delta" | "response.function_call_arguments.done" => {
                let done = kind.ends_with(".done");
                let text = text_of(map, if done { "arguments" } else { "delta" }).unwrap_or_default();
                if let Some(Item::FunctionCall(call)) = self.items.get_mut(&output_index) {
                    if !done || (!call.streamed && !text.is_empty()) {
                        call.delta(out, Delta::ToolInput(text.to_owned()));
                    }
                }
            }
            "response.reasoning_summary_part.added" | "response.reasoning_summary_part.done" => {
                self.start(None, out);
                let key = format!("s{}", index_of(map, "summary_index"));
                let text =
                    map.get("part").and_then(Value::as_object).and_then(|p| text_of(p, "text")).unwrap_or_default();
                self.reasoning_text(output_index, &key, text, false, out);
            }
            "response.reasoning_summary_text.delta"
            | "response.reasoning_summary_text.done"
            | "response.reasoning_text.delta"
            | "response.reasoning_text.done" => {
                self.start(None, out);
                let key = if kind.starts_with("response.reasoning_summary") {
                    format!("s{}", index_of(map, "summary_index"))
                } else {
                    format!("c{}", index_of(map, "content_index"))
                };
                let is_delta = kind.ends_with(".delta");
                let text = text_of(map, if is_delta { "delta" } else { "text" }).unwrap_or_default();
                self.reasoning_text(output_index, &key, text, is_delta, out);
            }
            "response.output_item.done" => {
                self.start(None, out);
                if let Some(item) = map.get("item").and_then(Value::as_object) {
                    self.item_done(output_index, item, out);
                }
            }
            "response.completed" | "response.incomplete" => {
                self.start(map.get("response").and_then(Value::as_object), out);
                self.complete(map.get("response").and_then(Value::as_object), out);
            }
            "response.failed" => {
                let error = map.get("response").and_then(|r| r.get("error")).and_then(Value::as_object);
                let code = error.and_then(|e| text_of(e, "code"));
                let message = error.and_then(|e| text_of(e, "message"));
                out.push(StreamEvent::Error(stream_error(code, message, None)));
                self.ended = true;
            }
            "error" => {
                // Some servers nest the fields under `error`.
                let fields = map.get("error").and_then(Value::as_object).unwrap_or(map);
                out.push(StreamEvent::Error(stream_error(
                    text_of(fields, "code"),
                    text_of(fields, "message"),
                    text_of(fields, "param"),
                )));
                self.ended = true;
            }
            _ => {}
        }
        Ok(())
    }

    /// Emits `MessageStart` once, from the response object when there is one.
    fn start(&mut self, response: Option<&Map<String, Value>>, out: &mut Vec<StreamEvent>) {
        if self.started {
            return;
        }
        self.started = true;
        let response = response.cloned().unwrap_or_default();
        out.push(StreamEvent::MessageStart {
            id: text_of(&response, "id").unwrap_or_default().to_owned(),
            model: text_of(&response, "model").unwrap_or_default().to_owned(),
            created: response
                .get("created_at")
                .and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|seconds| seconds as i64))),
            usage: usage_of(&response),
        });
    }

    fn item_added(&mut self, output_index: u64, item: &Map<String, Value>, out: &mut Vec<StreamEvent>) {
        let state = match text_of(item, "type") {
            Some("message") => Item::Message(BTreeMap::new()),
            Some("function_call") => {
                self.signals.tool_call = true;
                let call = items::read_function_call(item);
                let start = BlockStart::ToolUse { id: call.id, name: call.name, signature: self.carried.take() };
                let index = self.blocks.open(out, start);
                let mut open = Open { index, open: true, streamed: false };
                if !call.input.is_empty() {
                    open.delta(out, Delta::ToolInput(call.input));
                }
                Item::FunctionCall(open)
            }
            Some("reasoning") => Item::Reasoning(Reasoning::default()),
            _ => Item::Ignored,
        };
        self.items.insert(output_index, state);
    }

    /// The text block of a message part, opened on first sight.
    fn text_part(
        &mut self,
        output_index: u64,
        content_index: u64,
        refusal: bool,
        out: &mut Vec<StreamEvent>,
    ) -> Option<&mut Open> {
        let item = self.items.entry(output_index).or_insert_with(|| Item::Message(BTreeMap::new()));
        let Item::Message(parts) = item else {
            return None;
        };
        self.signals.refusal |= refusal;
        let blocks = &mut self.blocks;
        Some(parts.entry(content_index).or_insert_with(|| Open {
            index: blocks.open(out, BlockStart::Text),
            open: true,
            streamed: false,
        }))
    }

    /// `content_part.added` / `.done`: opens the part; the done event closes
    /// it, after supplying its text when none streamed.
    fn message_text(
        &mut self,
        output_index: u64,
        content_index: u64,
        text: &str,
        refusal: bool,
        done: bool,
        out: &mut Vec<StreamEvent>,
    ) {
        if let Some(part) = self.text_part(output_index, content_index, refusal, out) {
            if !part.streamed && !text.is_empty() {
                part.delta(out, Delta::Text(text.to_owned()));
            }
            if done {
                part.close(out);
            }
        }
    }

    /// A piece of reasoning text for part `key`: a new part after the first
    /// is preceded by the separator a whole response joins parts with. A
    /// `.done` or part event supplies text only when none streamed.
    fn reasoning_text(&mut self, output_index: u64, key: &str, text: &str, is_delta: bool, out: &mut Vec<StreamEvent>) {
        let item = self.items.entry(output_index).or_insert_with(|| Item::Reasoning(Reasoning::default()));
        let Item::Reasoning(reasoning) = item else {
            return;
        };
        let blocks = &mut self.blocks;
        let block = reasoning.block.get_or_insert_with(|| Open {
            index: blocks.open(out, BlockStart::Thinking),
            open: true,
            streamed: false,
        });
        let position = match reasoning.parts.iter().position(|(k, _)| k == key) {
            Some(position) => position,
            None => {
                if !reasoning.parts.is_empty() {
                    block.delta(out, Delta::Thinking(SUMMARY_SEPARATOR.to_owned()));
                }
                reasoning.parts.push((key.to_owned(), false));
                reasoning.parts.len() - 1
            }
        };
        let streamed = &mut reasoning.parts[position].1;
        if is_delta || (!*streamed && !text.is_empty()) {
            block.delta(out, Delta::Thinking(text.to_owned()));
            *streamed = true;
        }
    }

    /// `output_item.done`: closes the item's blocks, first supplying whatever
    /// the item holds that did not stream.
    fn item_done(&mut self, output_index: u64, item: &Map<String, Value>, out: &mut Vec<StreamEvent>) {
        let state = self.items.insert(output_index, Item::Ignored);
        let carried = text_of(item, "encrypted_content").and_then(signature::from_reasoning);
        if let (Some("reasoning"), Some(carried)) = (text_of(item, "type"), carried) {
            self.carried = Some(carried.to_owned());
            return;
        }
        match (text_of(item, "type"), state) {
            (Some("message"), Some(Item::Message(mut parts))) if !parts.is_empty() => {
                for part in parts.values_mut() {
                    part.close(out);
                }
            }
            (Some("function_call"), Some(Item::FunctionCall(mut call))) => {
                let arguments = text_of(item, "arguments").unwrap_or_default();
                if !call.streamed && !arguments.is_empty() {
                    call.delta(out, Delta::ToolInput(arguments.to_owned()));
                }
                call.close(out);
            }
            (Some("reasoning"), Some(Item::Reasoning(Reasoning { block: Some(mut block), .. }))) => {
                if let Some(signature) = text_of(item, "encrypted_content") {
                    block.delta(out, Delta::Signature(signature.to_owned()));
                }
                block.close(out);
            }
            (Some("message" | "function_call" | "reasoning"), _) => {
                // Nothing of the item streamed: emit it whole.
                let mut content = Vec::new();
                read_output_item(item, &mut content, &mut self.signals);
                for block in &content {
                    emit_block(&mut self.blocks, block, out);
                }
            }
            _ => {}
        }
    }

    /// A terminal `response.completed` / `response.incomplete`.
    fn complete(&mut self, response: Option<&Map<String, Value>>, out: &mut Vec<StreamEvent>) {
        for item in self.items.values_mut() {
            match item {
                Item::Message(parts) => parts.values_mut().for_each(|part| part.close(out)),
                Item::FunctionCall(call) => call.close(out),
                Item::Reasoning(Reasoning { block: Some(block), .. }) => block.close(out),
                Item::Reasoning(_) | Item::Ignored => {}
            }
        }
        let response = response.cloned().unwrap_or_default();
        let output = response.get("output").and_then(Value::as_array);
        if self.blocks.next == 0 {
            // No item events at all: the final response carries the output.
            let mut content = Vec::new();
            for item in output.into_iter().flatten().filter_map(Value::as_object) {
                read_output_item(item, &mut content, &mut self.signals);
            }
            signature::attach_carried(&mut content);
            for block in &content {
                emit_block(&mut self.blocks, block, out);
            }
        } else {
            let mut ignored = Vec::new();
            for item in output.into_iter().flatten().filter_map(Value::as_object) {
                read_output_item(item, &mut ignored, &mut self.signals);
            }
        }
        out.push(StreamEvent::MessageDelta {
            stop_reason: stop_reason(&response, self.signals),
            stop_sequence: None,
            usage: usage_of(&response),
        });
        out.push(StreamEvent::MessageStop);
        self.ended = true;
    }
}

/// One complete block as start, delta(s) and stop.
fn emit_block(blocks: &mut Blocks, block: &ir::Block, out: &mut Vec<StreamEvent>) {
    let (start, deltas) = match block {
        ir::Block::Text(text) => (BlockStart::Text, vec![Delta::Text(text.text.clone())]),
        ir::Block::Thinking { text, signature } => {
            let mut deltas = Vec::new();
            if !text.is_empty() {
                deltas.push(Delta::Thinking(text.clone()));
            }
            if let Some(signature) = signature {
                deltas.push(Delta::Signature(signature.clone()));
            }
            (BlockStart::Thinking, deltas)
        }
        ir::Block::RedactedThinking { data } => (BlockStart::RedactedThinking { data: data.clone() }, Vec::new()),
        ir::Block::ToolUse(call) => (
            BlockStart::ToolUse { id: call.id.clone(), name: call.name.clone(), signature: call.signature.clone() },
            if call.input.is_empty() { Vec::new() } else { vec![Delta::ToolInput(call.input.clone())] },
        ),
        _ => return,
    };
    let index = blocks.open(out, start);
    for delta in deltas {
        out.push(StreamEvent::BlockDelta { index, delta });
    }
    out.push(StreamEvent::BlockStop { index });
}

impl SseHandler for Events {
    fn event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        self.handle(event, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use switchyard_codec::StreamDecoder;

    fn decode(events: &[Value]) -> Vec<StreamEvent> {
        let mut bytes = Vec::new();
        for event in events {
            let kind = event["type"].as_str().unwrap_or_default();
            switchyard_codec::frame::write_sse(&mut bytes, Some(kind), event.to_string().as_bytes());
        }
        let mut decoder = ResponsesStreamDecoder::default();
        let mut out = Vec::new();
        decoder.feed(&bytes, &mut out).unwrap();
        decoder.finish(&mut out).unwrap();
        out
    }

    fn completed(output: Value) -> Value {
        json!({"type": "response.completed", "response": {"id": "r", "status": "completed", "output": output}})
    }

    #[test]
    fn items_sent_only_whole_still_decode() {
        let message = json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi", "annotations": []}]});
        let events = decode(&[
            json!({"type": "response.created", "response": {"id": "r", "model": "m"}}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": message}),
            completed(json!([message])),
        ]);
        assert_eq!(events[1], StreamEvent::BlockStart { index: 0, block: BlockStart::Text });
        assert_eq!(events[2], StreamEvent::BlockDelta { index: 0, delta: Delta::Text("hi".into()) });
        assert_eq!(events[3], StreamEvent::BlockStop { index: 0 });
        assert_eq!(events.len(), 6);
    }

    #[test]
    fn a_final_response_alone_supplies_the_blocks() {
        let call = json!({"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"});
        let events = decode(&[completed(json!([call]))]);
        assert!(matches!(events[0], StreamEvent::MessageStart { .. }));
        assert_eq!(
            events[1],
            StreamEvent::BlockStart {
                index: 0,
                block: BlockStart::ToolUse { id: "c".into(), name: "f".into(), signature: None }
            }
        );
        assert!(matches!(events[4], StreamEvent::MessageDelta { stop_reason: Some(ir::StopReason::ToolUse), .. }));
    }

    #[test]
    fn reasoning_with_only_encrypted_content_is_redacted() {
        let events = decode(&[
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs", "summary": []}}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "enc"}}),
        ]);
        assert_eq!(
            events[1],
            StreamEvent::BlockStart { index: 0, block: BlockStart::RedactedThinking { data: "enc".into() } }
        );
        assert_eq!(events[2], StreamEvent::BlockStop { index: 0 });
    }

    #[test]
    fn summary_parts_are_joined_like_a_whole_response() {
        let part = |index: u64, text: &str| json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "summary_index": index, "delta": text});
        let events = decode(&[
            json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "summary": []}}),
            part(0, "a"),
            part(1, "b"),
        ]);
        let deltas: Vec<&StreamEvent> = events.iter().filter(|e| matches!(e, StreamEvent::BlockDelta { .. })).collect();
        assert_eq!(deltas.len(), 3);
        assert_eq!(*deltas[1], StreamEvent::BlockDelta { index: 0, delta: Delta::Thinking(SUMMARY_SEPARATOR.into()) });
    }

    #[test]
    fn garbage_data_is_an_error_not_a_panic() {
        let mut decoder = ResponsesStreamDecoder::default();
        let mut out = Vec::new();
        assert!(decoder.feed(b"data: {nope\n\n", &mut out).is_err());
        let mut decoder = ResponsesStreamDecoder::default();
        assert!(decoder.feed(b"data: [1]\n\n", &mut out).is_err());
    }
}
