//! Stream encoder: IR stream events → the Responses SSE event sequence the
//! official SDKs accept (`responses.create(stream=True)` and the
//! `responses.stream()` helper, which checks that every content event
//! follows its `output_item.added` / `content_part.added`).
//!
//! Every event carries `type` and an increasing `sequence_number`. The
//! encoder keeps the items it has written, so that `.done` events carry the
//! full text and the terminal `response.completed` (or `response.incomplete`
//! for a token cap or filter) carries the whole output and usage.
//! Consecutive text blocks share one message item, as in a whole response.
//!
//! `StreamEvent::Error` becomes an `error` event (`{type, code, message,
//! param, sequence_number}`: the SDK yields it as `ResponseErrorEvent`
//! without raising) followed, once the response has started, by
//! `response.failed` carrying the items finished so far, so clients waiting
//! for a terminal response event see one.
//!
//! Memory is bounded: the output kept for those events is counted, and a
//! reply that grows past [`MAX_REPLY_BYTES`] ends with that same in-stream
//! error instead of growing without end.

use serde_json::{json, Map, Value};
use switchyard_codec::frame::{write_sse, MAX_REPLY_BYTES};
use switchyard_codec::ir::{BlockStart, Delta, ErrorInfo, ErrorKind, Protocol, StopReason, StreamEvent, Usage};
use switchyard_codec::{json as codec_json, StreamEncoder};

use crate::error::stream_code;
use crate::response::{function_call_item_id, item_id, response_object, status_for, ResponseParts};

/// Encoder state across events.
#[derive(Default)]
pub(crate) struct ResponsesStreamEncoder {
    sequence: u64,
    started: bool,
    finished: bool,
    id: String,
    model: String,
    created: Option<i64>,
    usage: Usage,
    stop_reason: Option<StopReason>,
    /// Items done so far, in output order.
    output: Vec<Value>,
    /// The item being written.
    item: Option<OpenItem>,
    /// The IR block being written, by index.
    block: Option<u32>,
    /// Bytes of text, arguments and signatures kept for the `.done` and
    /// terminal events.
    kept: usize,
}

/// An output item still being written.
enum OpenItem {
    Message { id: String, parts: Vec<String>, part_open: bool },
    FunctionCall { id: String, call_id: String, name: String, arguments: String },
    Reasoning { id: String, text: String, signature: Option<String>, summary_open: bool },
}

impl ResponsesStreamEncoder {
    /// Writes one event with the next sequence number.
    fn emit(&mut self, out: &mut Vec<u8>, kind: &str, fields: Value) {
        let mut data = Map::new();
        data.insert("type".into(), json!(kind));
        if let Value::Object(fields) = fields {
            data.extend(fields);
        }
        data.insert("sequence_number".into(), json!(self.sequence));
        self.sequence += 1;
        write_sse(out, Some(kind), &codec_json::to_vec(&Value::Object(data)));
    }

    fn output_index(&self) -> usize {
        self.output.len()
    }

    fn snapshot(&self, status: &str, incomplete_reason: Option<&str>, error: Option<Value>) -> Value {
        let usage = (status != "in_progress" || self.usage != Usage::default()).then_some(&self.usage);
        response_object(ResponseParts {
            id: &self.id,
            model: &self.model,
            created: self.created,
            status,
            incomplete_reason,
            error,
            output: if status == "in_progress" { Vec::new() } else { self.output.clone() },
            usage,
        })
    }

    /// `response.created` + `response.in_progress`, once.
    fn start(&mut self, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        let response = self.snapshot("in_progress", None, None);
        self.emit(out, "response.created", json!({"response": response}));
        self.emit(out, "response.in_progress", json!({"response": response}));
    }

    /// Finishes the open item (closing its open part or summary first).
    fn close_item(&mut self, out: &mut Vec<u8>) {
        self.close_text_part(out);
        let Some(item) = self.item.take() else {
            return;
        };
        let output_index = self.output_index();
        let done = match item {
            OpenItem::Message { id, parts, .. } => json!({
                "id": id,
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": parts.iter().map(|text| output_text(text)).collect::<Vec<_>>(),
            }),
            OpenItem::FunctionCall { id, call_id, name, arguments } => {
                self.emit(
                    out,
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": output_index, "name": name, "arguments": arguments}),
                );
                json!({
                    "id": id,
                    "type": "function_call",
                    "status": "completed",
                    "call_id": call_id,
                    "name": name,
                    "arguments": arguments,
                })
            }
            OpenItem::Reasoning { id, text, signature, summary_open } => {
                let mut summary = Vec::new();
                if summary_open {
                    let part = json!({"type": "summary_text", "text": text});
                    self.emit(
                        out,
                        "response.reasoning_summary_text.done",
                        json!({"item_id": id, "output_index": output_index, "summary_index": 0, "text": text}),
                    );
                    self.emit(
                        out,
                        "response.reasoning_summary_part.done",
                        json!({"item_id": id, "output_index": output_index, "summary_index": 0, "part": part}),
                    );
                    summary.push(part);
                }
                let mut item = json!({"id": id, "type": "reasoning", "summary": summary});
                if let (Some(signature), Some(map)) = (signature, item.as_object_mut()) {
                    map.insert("encrypted_content".into(), json!(signature));
                }
                item
            }
        };
        self.emit(out, "response.output_item.done", json!({"output_index": output_index, "item": done}));
        self.output.push(done);
    }

    /// Closes the open `output_text` part of the open message, if any.
    fn close_text_part(&mut self, out: &mut Vec<u8>) {
        let output_index = self.output_index();
        let Some(OpenItem::Message { id, parts, part_open }) = &mut self.item else {
            return;
        };
        if !*part_open {
            return;
        }
        *part_open = false;
        let id = id.clone();
        let content_index = parts.len().saturating_sub(1);
        let text = parts.last().cloned().unwrap_or_default();
        self.emit(
            out,
            "response.output_text.done",
            json!({"item_id": id, "output_index": output_index, "content_index": content_index, "text": text, "logprobs": []}),
        );
        self.emit(
            out,
            "response.content_part.done",
            json!({"item_id": id, "output_index": output_index, "content_index": content_index, "part": output_text(&text)}),
        );
    }

    fn block_start(&mut self, index: u32, block: &BlockStart, out: &mut Vec<u8>) {
        self.block = Some(index);
        if !matches!(block, BlockStart::Text) || !matches!(self.item, Some(OpenItem::Message { .. })) {
            self.close_item(out);
        }
        let output_index = self.output_index();
        match block {
            BlockStart::Text => {
                if self.item.is_none() {
                    let id = item_id("msg", &self.id, output_index);
                    self.emit(
                        out,
                        "response.output_item.added",
                        json!({"output_index": output_index, "item": {
                            "id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []
                        }}),
                    );
                    self.item = Some(OpenItem::Message { id, parts: Vec::new(), part_open: false });
                }
                self.close_text_part(out);
                if let Some(OpenItem::Message { id, parts, part_open }) = &mut self.item {
                    parts.push(String::new());
                    *part_open = true;
                    let fields = json!({"item_id": id, "output_index": output_index, "content_index": parts.len() - 1, "part": output_text("")});
                    self.emit(out, "response.content_part.added", fields);
                }
            }
            BlockStart::ToolUse { id: call_id, name, signature } => {
                if let Some(signature) = signature {
                    self.signature_carrier(signature, out);
                }
                // The caller gets the id in its own form, as in a whole reply.
                let call_id = switchyard_codec::call_id::mint(call_id, Protocol::Responses).into_owned();
                let call_id = &call_id;
                let output_index = self.output_index();
                let id = function_call_item_id(call_id);
                self.emit(
                    out,
                    "response.output_item.added",
                    json!({"output_index": output_index, "item": {
                        "id": id, "type": "function_call", "status": "in_progress",
                        "call_id": call_id, "name": name, "arguments": ""
                    }}),
                );
                self.item = Some(OpenItem::FunctionCall {
                    id,
                    call_id: call_id.clone(),
                    name: name.clone(),
                    arguments: String::new(),
                });
            }
            BlockStart::Thinking | BlockStart::RedactedThinking { .. } => {
                let id = item_id("rs", &self.id, output_index);
                let signature = match block {
                    BlockStart::RedactedThinking { data } => Some(data.clone()),
                    _ => None,
                };
                let mut item = json!({"id": id, "type": "reasoning", "summary": []});
                if let (Some(signature), Some(map)) = (&signature, item.as_object_mut()) {
                    map.insert("encrypted_content".into(), json!(signature));
                }
                self.emit(out, "response.output_item.added", json!({"output_index": output_index, "item": item}));
                self.item = Some(OpenItem::Reasoning { id, text: String::new(), signature, summary_open: false });
            }
        }
    }

    /// A whole reasoning item carrying the next call's thought signature
    /// (`switchyard_codec::signature`): Responses call ids are too short.
    fn signature_carrier(&mut self, signature: &str, out: &mut Vec<u8>) {
        let output_index = self.output_index();
        let mut item = crate::items::signature_carrier(signature);
        item.insert("id".into(), json!(item_id("rs", &self.id, output_index)));
        let item = Value::Object(item);
        self.emit(out, "response.output_item.added", json!({"output_index": output_index, "item": item}));
        self.emit(out, "response.output_item.done", json!({"output_index": output_index, "item": item}));
        self.output.push(item);
    }

    fn block_delta(&mut self, index: u32, delta: &Delta, out: &mut Vec<u8>) {
        if self.block != Some(index) {
            return;
        }
        let output_index = self.output_index();
        let Some(item) = &mut self.item else {
            return;
        };
        match (item, delta) {
            (OpenItem::Message { id, parts, part_open: true }, Delta::Text(text)) => {
                if let Some(last) = parts.last_mut() {
                    last.push_str(text);
                }
                let fields = json!({"item_id": id, "output_index": output_index, "content_index": parts.len().saturating_sub(1), "delta": text, "logprobs": []});
                self.emit(out, "response.output_text.delta", fields);
            }
            (OpenItem::Message { id, parts, part_open: true }, Delta::Logprobs(tokens)) => {
                let logprobs = switchyard_codec::logprobs::write(tokens);
                let fields = json!({"item_id": id, "output_index": output_index, "content_index": parts.len().saturating_sub(1), "delta": "", "logprobs": logprobs});
                self.emit(out, "response.output_text.delta", fields);
            }
            (OpenItem::FunctionCall { id, arguments, .. }, Delta::ToolInput(more)) => {
                arguments.push_str(more);
                let fields = json!({"item_id": id, "output_index": output_index, "delta": more});
                self.emit(out, "response.function_call_arguments.delta", fields);
            }
            (OpenItem::Reasoning { id, text, summary_open, .. }, Delta::Thinking(more)) => {
                text.push_str(more);
                let id = id.clone();
                if !*summary_open {
                    *summary_open = true;
                    self.emit(
                        out,
                        "response.reasoning_summary_part.added",
                        json!({"item_id": id, "output_index": output_index, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
                    );
                }
                self.emit(
                    out,
                    "response.reasoning_summary_text.delta",
                    json!({"item_id": id, "output_index": output_index, "summary_index": 0, "delta": more}),
                );
            }
            (OpenItem::Reasoning { signature, .. }, Delta::Signature(more)) => {
                signature.get_or_insert_with(String::new).push_str(more);
            }
            _ => {}
        }
    }

    fn block_stop(&mut self, index: u32, out: &mut Vec<u8>) {
        if self.block != Some(index) {
            return;
        }
        self.block = None;
        match self.item {
            // The message stays open for a following text block.
            Some(OpenItem::Message { .. }) => self.close_text_part(out),
            Some(_) => self.close_item(out),
            None => {}
        }
    }

    /// The terminal response event.
    fn stop(&mut self, out: &mut Vec<u8>) {
        self.close_item(out);
        let (status, incomplete_reason) = status_for(self.stop_reason);
        let (kind, error) = match status {
            "incomplete" => ("response.incomplete", None),
            "failed" => (
                "response.failed",
                Some(json!({"code": "server_error", "message": "the model failed to generate a response"})),
            ),
            _ => ("response.completed", None),
        };
        let response = self.snapshot(status, incomplete_reason, error);
        self.emit(out, kind, json!({"response": response}));
        self.finished = true;
    }

    fn error(&mut self, error: &ErrorInfo, out: &mut Vec<u8>) {
        let code = stream_code(error).to_owned();
        self.emit(out, "error", json!({"code": code, "message": error.message, "param": error.param}));
        if self.started {
            // The open item is left unfinished: its `.done` events would
            // claim a completion that never happened.
            self.item = None;
            let failure = json!({"code": code, "message": error.message});
            let response = self.snapshot("failed", None, Some(failure));
            self.emit(out, "response.failed", json!({"response": response}));
        }
        self.finished = true;
    }
}

/// An `output_text` part.
fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": []})
}

/// The bytes of a delta the encoder keeps.
fn kept_bytes(event: &StreamEvent) -> usize {
    match event {
        StreamEvent::BlockDelta { delta, .. } => match delta {
            Delta::Text(text) | Delta::Thinking(text) | Delta::Signature(text) | Delta::ToolInput(text) => text.len(),
            // Written as they come, not kept.
            Delta::Logprobs(_) => 0,
        },
        StreamEvent::BlockStart { block: BlockStart::RedactedThinking { data }, .. } => data.len(),
        _ => 0,
    }
}

impl StreamEncoder for ResponsesStreamEncoder {
    fn encode(&mut self, event: &StreamEvent, out: &mut Vec<u8>) {
        if self.finished {
            return;
        }
        self.kept = self.kept.saturating_add(kept_bytes(event));
        if self.kept > MAX_REPLY_BYTES {
            let message = format!("the streamed reply is longer than the gateway's {MAX_REPLY_BYTES}-byte limit");
            self.error(&ErrorInfo::new(ErrorKind::Internal, message).with_status(502), out);
            return;
        }
        match event {
            StreamEvent::MessageStart { id, model, created, usage } => {
                if !self.started {
                    self.id.clone_from(id);
                    self.model.clone_from(model);
                    self.created = *created;
                    self.usage.merge(usage);
                }
                self.start(out);
            }
            StreamEvent::BlockStart { index, block } => {
                self.start(out);
                self.block_start(*index, block, out);
            }
            StreamEvent::BlockDelta { index, delta } => self.block_delta(*index, delta, out),
            StreamEvent::BlockStop { index } => self.block_stop(*index, out),
            StreamEvent::MessageDelta { stop_reason, usage, .. } => {
                if stop_reason.is_some() {
                    self.stop_reason = *stop_reason;
                }
                self.usage.merge(usage);
            }
            StreamEvent::MessageStop => {
                self.start(out);
                self.stop(out);
            }
            StreamEvent::Error(error) => self.error(error, out),
        }
    }

    fn finish(&mut self, _out: &mut Vec<u8>) {
        // Responses streams end with their terminal event; there is no
        // closing sentinel to add.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_reply_ends_with_the_in_stream_error_and_bounded_memory() {
        let mut encoder = ResponsesStreamEncoder::default();
        let mut out = Vec::new();
        let start =
            StreamEvent::MessageStart { id: "r".into(), model: "m".into(), created: None, usage: Usage::default() };
        encoder.encode(&start, &mut out);
        encoder.encode(&StreamEvent::BlockStart { index: 0, block: BlockStart::Text }, &mut out);
        let delta = StreamEvent::BlockDelta { index: 0, delta: Delta::Text("x".repeat(64 * 1024)) };
        let mut sent = 0usize;
        while !encoder.finished {
            assert!(sent < 100 << 20, "no error after {sent} bytes");
            out.clear();
            encoder.encode(&delta, &mut out);
            sent += 64 * 1024;
        }
        let tail = String::from_utf8_lossy(&out);
        assert!(tail.contains("event: error"), "{}", &tail[..tail.len().min(300)]);
        assert!(tail.contains("event: response.failed"));
        assert!(sent <= MAX_REPLY_BYTES + 64 * 1024);
        // Nothing more is written or kept once the stream failed.
        out.clear();
        encoder.encode(&delta, &mut out);
        assert!(out.is_empty());
        assert!(encoder.item.is_none());
    }
}
