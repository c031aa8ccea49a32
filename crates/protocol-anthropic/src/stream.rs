//! Anthropic's SSE stream (`message_start`, `content_block_*`,
//! `message_delta`, `message_stop`, `ping`, `error`) to and from IR events.
//!
//! The IR grammar is Anthropic's own, so both directions are nearly one to
//! one. The differences handled here:
//! - usage: the wire splits uncached input from cache counts and reports
//!   cumulative figures field by field; the decoder keeps the running wire
//!   totals and emits IR totals, the encoder the reverse;
//! - block types the IR cannot hold (server-tool blocks) are skipped on
//!   decode and the remaining blocks renumbered densely;
//! - the SDK's accumulator *replaces* a thinking block's signature on each
//!   `signature_delta`, so the encoder gathers IR signature pieces and sends
//!   one `signature_delta` when the block closes;
//! - `citations_delta` has no IR delta and is not carried.

use serde_json::{json, Map, Value};
use switchyard_codec::frame::{write_sse, SseEvent, SseHandler, SseStream};
use switchyard_codec::ir::{BlockStart, Delta, ErrorInfo, Protocol, StopReason, StreamEvent, Usage};
use switchyard_codec::json::value_to_arguments;
use switchyard_codec::{DecodeError, StreamEncoder};

use crate::error::{kind_for_type, type_for_error};
use crate::response::{read_stop_reason, write_stop_reason};
use crate::wire::{put_reasoning, write_usage, WireUsage};

/// Decodes an Anthropic SSE stream.
pub(crate) type Decoder = SseStream<Events>;

/// What the decoder knows across the events of one stream.
#[derive(Debug, Default)]
pub(crate) struct Events {
    /// Wire block index → IR index, `None` for a skipped block.
    blocks: Vec<(u64, Option<u32>)>,
    next_index: u32,
    usage: WireUsage,
    /// The bytes around the last text delta's text, and its block's IR
    /// index: a delta with the same bytes around its text is read by
    /// comparing them (`scan::Around`).
    seen: switchyard_codec::scan::Around,
    seen_index: Option<u32>,
}

impl Events {
    fn ir_index(&self, wire: u64) -> Option<u32> {
        self.blocks.iter().rev().find(|(w, _)| *w == wire).and_then(|(_, ir)| *ir)
    }

    fn handle(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        if event.data.trim().is_empty() {
            return Ok(());
        }
        // Deltas are nearly every event: read them into a borrowed typed
        // shape instead of a JSON tree.
        if event.event.as_deref() == Some("content_block_delta") {
            let frame = event.data.trim().as_bytes();
            if let (Some(index), Some(raw)) = (self.seen_index, self.seen.body(frame)) {
                if let Some(text) = switchyard_codec::scan::string_body(raw).filter(|t| !t.is_empty()) {
                    out.push(StreamEvent::BlockDelta { index, delta: Delta::Text(text.into_owned()) });
                }
                return Ok(());
            }
            if let Ok(fast) = serde_json::from_str::<FastDelta<'_>>(&event.data) {
                if let (Some(span), Some(index)) = (text_span(frame, &fast), self.ir_index(fast.index)) {
                    self.seen.remember(frame, span);
                    self.seen_index = Some(index);
                }
                if let Some(delta) = fast.delta.into_delta() {
                    if let Some(index) = self.ir_index(fast.index) {
                        if !delta_is_empty(&delta) {
                            out.push(StreamEvent::BlockDelta { index, delta });
                        }
                    }
                    return Ok(());
                }
            }
        }
        let data: Value = serde_json::from_str(&event.data)?;
        let kind = data.get("type").and_then(Value::as_str).or(event.event.as_deref()).unwrap_or("");
        // Blocks open and close: a remembered delta's index may not hold.
        if kind != "content_block_delta" {
            self.seen_index = None;
        }
        match kind {
            "message_start" => self.message_start(&data, out),
            "content_block_start" => self.block_start(&data, out),
            "content_block_delta" => self.block_delta(&data, out),
            "content_block_stop" => {
                if let Some(index) = wire_index(&data).and_then(|w| self.ir_index(w)) {
                    out.push(StreamEvent::BlockStop { index });
                }
            }
            "message_delta" => {
                self.usage.merge(&WireUsage::read(data.get("usage")));
                let delta = data.get("delta");
                let field = |key: &str| delta.and_then(|d| d.get(key)).and_then(Value::as_str);
                out.push(StreamEvent::MessageDelta {
                    stop_reason: field("stop_reason").and_then(read_stop_reason),
                    stop_sequence: field("stop_sequence").map(str::to_owned),
                    usage: self.usage.to_ir(),
                });
            }
            "message_stop" => out.push(StreamEvent::MessageStop),
            "error" => out.push(StreamEvent::Error(read_stream_error(&data))),
            // `ping` and event types added later carry nothing for the IR.
            _ => {}
        }
        Ok(())
    }

    fn message_start(&mut self, data: &Value, out: &mut Vec<StreamEvent>) {
        let message = data.get("message");
        let text = |key: &str| message.and_then(|m| m.get(key)).and_then(Value::as_str).unwrap_or_default().to_owned();
        self.usage = WireUsage::read(message.and_then(|m| m.get("usage")));
        out.push(StreamEvent::MessageStart {
            id: text("id"),
            model: text("model"),
            created: None,
            usage: self.usage.to_ir(),
        });
    }

    fn block_start(&mut self, data: &Value, out: &mut Vec<StreamEvent>) {
        let Some(wire) = wire_index(data) else {
            return;
        };
        let block = data.get("content_block");
        let text = |key: &str| block.and_then(|b| b.get(key)).and_then(Value::as_str).unwrap_or_default().to_owned();
        let kind = block.and_then(|b| b.get("type")).and_then(Value::as_str);
        // What a start event may already carry (normally empty).
        let mut initial = Vec::new();
        let start = match kind {
            Some("text") => {
                initial.push(Delta::Text(text("text")));
                BlockStart::Text
            }
            Some("thinking") => {
                initial.push(Delta::Thinking(text("thinking")));
                initial.push(Delta::Signature(text("signature")));
                BlockStart::Thinking
            }
            Some("redacted_thinking") => BlockStart::RedactedThinking { data: text("data") },
            Some("tool_use") => {
                let input = block.and_then(|b| b.get("input"));
                if let Some(input) = input.filter(|i| !is_empty_object(i)) {
                    initial.push(Delta::ToolInput(value_to_arguments(input)));
                }
                // What the encoder wrote reads back (`call_id`).
                let (id, signature) = switchyard_codec::call_id::read(&text("id"), Protocol::Anthropic);
                BlockStart::ToolUse { id, name: text("name"), signature }
            }
            _ => {
                self.blocks.push((wire, None));
                return;
            }
        };
        let index = self.next_index;
        self.next_index += 1;
        self.blocks.push((wire, Some(index)));
        out.push(StreamEvent::BlockStart { index, block: start });
        for delta in initial {
            if !delta_is_empty(&delta) {
                out.push(StreamEvent::BlockDelta { index, delta });
            }
        }
    }

    fn block_delta(&mut self, data: &Value, out: &mut Vec<StreamEvent>) {
        let Some(index) = wire_index(data).and_then(|w| self.ir_index(w)) else {
            return;
        };
        let Some(delta) = data.get("delta") else {
            return;
        };
        let text = |key: &str| delta.get(key).and_then(Value::as_str).map(str::to_owned);
        let delta = match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => text("text").map(Delta::Text),
            Some("input_json_delta") => text("partial_json").map(Delta::ToolInput),
            Some("thinking_delta") => text("thinking").map(Delta::Thinking),
            Some("signature_delta") => text("signature").map(Delta::Signature),
            _ => None,
        };
        // Empty pieces (the opening `partial_json: ""`) carry nothing.
        if let Some(delta) = delta.filter(|d| !delta_is_empty(d)) {
            out.push(StreamEvent::BlockDelta { index, delta });
        }
    }
}

/// Where a text delta's text is in its frame (the body of its string),
/// when the text ends the frame (`…"text":"…"}}`, the vendor's shape) and
/// reads back as the text the typed parse found.
fn text_span(frame: &[u8], fast: &FastDelta<'_>) -> Option<std::ops::Range<usize>> {
    if fast.delta.kind != "text_delta" {
        return None;
    }
    let text = fast.delta.text.as_deref()?;
    const KEY: &[u8] = b"\"text\":\"";
    let start = memchr::memmem::find(frame, KEY)? + KEY.len();
    let end = frame.len().checked_sub(3)?;
    if end < start || &frame[end..] != b"\"}}" {
        return None;
    }
    (switchyard_codec::scan::string_body(&frame[start..end]).as_deref() == Some(text)).then_some(start..end)
}

/// A `content_block_delta` event, borrowed from the frame.
#[derive(serde::Deserialize)]
struct FastDelta<'a> {
    index: u64,
    #[serde(borrow)]
    delta: FastDeltaBody<'a>,
}

#[derive(serde::Deserialize)]
struct FastDeltaBody<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    text: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    partial_json: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    signature: Option<std::borrow::Cow<'a, str>>,
}

impl FastDeltaBody<'_> {
    /// The IR delta, or `None` for a delta type the fast path does not know.
    fn into_delta(self) -> Option<Delta> {
        match &*self.kind {
            "text_delta" => self.text.map(|t| Delta::Text(t.into_owned())),
            "input_json_delta" => self.partial_json.map(|t| Delta::ToolInput(t.into_owned())),
            "thinking_delta" => self.thinking.map(|t| Delta::Thinking(t.into_owned())),
            "signature_delta" => self.signature.map(|t| Delta::Signature(t.into_owned())),
            _ => None,
        }
    }
}

fn wire_index(data: &Value) -> Option<u64> {
    data.get("index").and_then(Value::as_u64)
}

fn is_empty_object(value: &Value) -> bool {
    value.as_object().is_some_and(Map::is_empty)
}

fn delta_is_empty(delta: &Delta) -> bool {
    match delta {
        Delta::Text(s) | Delta::Thinking(s) | Delta::Signature(s) | Delta::ToolInput(s) => s.is_empty(),
        Delta::Logprobs(tokens) => tokens.is_empty(),
    }
}

fn read_stream_error(data: &Value) -> ErrorInfo {
    let error = data.get("error");
    let field = |key: &str| error.and_then(|e| e.get(key)).and_then(Value::as_str);
    let vendor_type = field("type").unwrap_or("api_error");
    let message = field("message").unwrap_or_default().to_owned();
    // No HTTP status travels with an in-stream error; the type decides.
    let kind = kind_for_type(vendor_type, 500, &message);
    let mut info = ErrorInfo::new(kind, message);
    info.code = Some(vendor_type.to_owned());
    info
}

impl SseHandler for Events {
    fn event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        self.handle(event, out)
    }
}

/// Encodes IR events as the SSE stream the Anthropic SDKs parse.
#[derive(Debug, Default)]
pub(crate) struct Encoder {
    /// Usage so far, so `message_delta` can split input consistently.
    usage: Usage,
    /// Signature pieces of open thinking blocks, sent whole at block stop.
    signatures: Vec<(u32, String)>,
}

/// `n` in decimal, written into `digits` (a `u32` has at most 10).
fn decimal(mut n: u32, digits: &mut [u8; 10]) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &digits[at..];
        }
    }
}

fn frame(out: &mut Vec<u8>, event: &str, data: &Value) {
    write_sse(out, Some(event), &switchyard_codec::json::to_vec(data));
}

impl StreamEncoder for Encoder {
    fn encode(&mut self, event: &StreamEvent, out: &mut Vec<u8>) {
        match event {
            StreamEvent::MessageStart { id, model, usage, .. } => {
                self.usage = *usage;
                let message = json!({
                    "id": id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": null,
                    "stop_sequence": null,
                    "usage": write_usage(usage),
                });
                frame(out, "message_start", &json!({"type": "message_start", "message": message}));
            }
            StreamEvent::BlockStart { index, block } => {
                let content_block = match block {
                    BlockStart::Text => json!({"type": "text", "text": ""}),
                    BlockStart::Thinking => {
                        json!({"type": "thinking", "thinking": "", "signature": ""})
                    }
                    BlockStart::RedactedThinking { data } => {
                        json!({"type": "redacted_thinking", "data": data})
                    }
                    BlockStart::ToolUse { id, name, signature } => {
                        // As in a whole reply: the id in the caller's form,
                        // the call's signature riding in it.
                        let id = switchyard_codec::call_id::written(id, signature.as_deref(), Protocol::Anthropic);
                        json!({"type": "tool_use", "id": id, "name": name, "input": {}})
                    }
                };
                frame(
                    out,
                    "content_block_start",
                    &json!({"type": "content_block_start", "index": index, "content_block": content_block}),
                );
            }
            StreamEvent::BlockDelta { index, delta } => {
                // Deltas are most of a stream: written from a typed shape,
                // with no JSON tree in between.
                let (kind, key, text) = match delta {
                    Delta::Text(text) => ("text_delta", "text", text),
                    Delta::Thinking(text) => ("thinking_delta", "thinking", text),
                    Delta::ToolInput(json) => ("input_json_delta", "partial_json", json),
                    Delta::Signature(piece) => {
                        match self.signatures.iter_mut().find(|(i, _)| i == index) {
                            Some((_, sig)) => sig.push_str(piece),
                            None => self.signatures.push((*index, piece.clone())),
                        }
                        return;
                    }
                    // Messages have no log probabilities (never asked of it).
                    Delta::Logprobs(_) => return,
                };
                // Straight into the caller's bytes: the SSE framing, then the
                // data line (a JSON string has no raw newline to split).
                out.reserve(text.len() + 128);
                out.extend_from_slice(
                    b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":",
                );
                let mut digits = [0u8; 10];
                out.extend_from_slice(decimal(*index, &mut digits));
                out.extend_from_slice(b",\"delta\":{\"type\":\"");
                out.extend_from_slice(kind.as_bytes());
                out.extend_from_slice(b"\",\"");
                out.extend_from_slice(key.as_bytes());
                out.extend_from_slice(b"\":");
                switchyard_codec::json::write_str(out, text);
                out.extend_from_slice(b"}}\n\n");
            }
            StreamEvent::BlockStop { index } => {
                if let Some(pos) = self.signatures.iter().position(|(i, _)| i == index) {
                    let (_, signature) = self.signatures.swap_remove(pos);
                    frame(
                        out,
                        "content_block_delta",
                        &json!({"type": "content_block_delta", "index": index,
                            "delta": {"type": "signature_delta", "signature": signature}}),
                    );
                }
                frame(out, "content_block_stop", &json!({"type": "content_block_stop", "index": index}));
            }
            StreamEvent::MessageDelta { stop_reason, stop_sequence, usage } => {
                self.usage.merge(usage);
                frame(out, "message_delta", &message_delta(*stop_reason, stop_sequence.as_deref(), &self.usage));
            }
            StreamEvent::MessageStop => {
                frame(out, "message_stop", &json!({"type": "message_stop"}));
            }
            StreamEvent::Error(error) => {
                frame(
                    out,
                    "error",
                    &json!({"type": "error", "error": {"type": type_for_error(error), "message": error.message}}),
                );
            }
        }
    }

    /// Anthropic streams end with `message_stop` (or `error`); no closing
    /// bytes follow.
    fn finish(&mut self, _out: &mut Vec<u8>) {}
}

/// `output_tokens` is required by the SDKs; input counts are sent only once
/// known, all three together so a reader's cumulative view stays consistent.
fn message_delta(stop_reason: Option<StopReason>, stop_sequence: Option<&str>, usage: &Usage) -> Value {
    let mut wire_usage = Map::new();
    if usage.input_tokens != 0 {
        if let Value::Object(full) = write_usage(usage) {
            wire_usage = full;
        }
    } else {
        wire_usage.insert("output_tokens".into(), json!(usage.output_tokens));
        put_reasoning(&mut wire_usage, usage);
        if usage.web_searches != 0 {
            wire_usage.insert("server_tool_use".into(), json!({"web_search_requests": usage.web_searches}));
        }
    }
    json!({
        "type": "message_delta",
        "delta": {"stop_reason": write_stop_reason(stop_reason), "stop_sequence": stop_sequence},
        "usage": wire_usage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_codec::ir::ErrorKind;
    use switchyard_codec::StreamDecoder;

    fn decode(bytes: &[u8]) -> Vec<StreamEvent> {
        let mut decoder = Decoder::default();
        let mut out = Vec::new();
        decoder.feed(bytes, &mut out).unwrap();
        decoder.finish(&mut out).unwrap();
        out
    }

    #[test]
    fn a_delta_is_written_as_the_vendor_writes_it() {
        let mut digits = [0u8; 10];
        for n in [0u32, 7, 10, 99, 12_345, u32::MAX] {
            assert_eq!(decimal(n, &mut digits), n.to_string().as_bytes());
        }
        let mut out = Vec::new();
        Encoder::default()
            .encode(&StreamEvent::BlockDelta { index: 12, delta: Delta::Text("a\"b\n".into()) }, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":12,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\\\"b\\n\"}}\n\n"
        );
    }

    #[test]
    fn text_deltas_read_by_their_surroundings_are_the_typed_reads() {
        let delta = |index: u32, text: &str| {
            let data =
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}});
            format!("event: content_block_delta\ndata: {data}\n\n")
        };
        let start = |index: u32, kind: &str| {
            let block = if kind == "text" {
                json!({"type": "text", "text": ""})
            } else {
                json!({"type": "tool_use", "id": "t", "name": "f", "input": {}})
            };
            let data = json!({"type": "content_block_start", "index": index, "content_block": block});
            format!("event: content_block_start\ndata: {data}\n\n")
        };
        let stop = |index: u32| {
            format!("event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":{index}}}\n\n")
        };
        let texts = ["Hi", " \"there\"", " é\n", "", "🚀 x\\y", " end"];
        let mut stream = start(0, "tool") + &stop(0) + &start(1, "text");
        for text in texts {
            stream += &delta(1, text);
        }
        stream += &stop(1);
        stream += &start(2, "text");
        stream += &delta(2, "after");
        let events = decode(stream.as_bytes());
        let got: Vec<(u32, String)> = events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::BlockDelta { index, delta: Delta::Text(t) } => Some((*index, t.clone())),
                _ => None,
            })
            .collect();
        let mut want: Vec<(u32, String)> =
            texts.iter().filter(|t| !t.is_empty()).map(|t| (1, (*t).to_owned())).collect();
        want.push((2, "after".to_owned()));
        assert_eq!(got, want);
    }

    #[test]
    fn server_tool_blocks_are_skipped_and_indexes_stay_dense() {
        let stream = concat!(
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"s\",\"name\":\"web_search\",\"input\":{}}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        );
        assert_eq!(
            decode(stream.as_bytes()),
            vec![
                StreamEvent::BlockStart { index: 0, block: BlockStart::Text },
                StreamEvent::BlockDelta { index: 0, delta: Delta::Text("hi".into()) },
                StreamEvent::BlockStop { index: 0 },
            ]
        );
    }

    #[test]
    fn in_stream_errors_become_error_events() {
        let stream = b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        let events = decode(stream);
        let [StreamEvent::Error(info)] = events.as_slice() else { panic!("{events:?}") };
        assert_eq!(info.kind, ErrorKind::Overloaded);
        assert_eq!(info.status, 529);
        assert_eq!(info.code.as_deref(), Some("overloaded_error"));
        let mut encoder = Encoder::default();
        let mut bytes = Vec::new();
        encoder.encode(&StreamEvent::Error(info.clone()), &mut bytes);
        assert_eq!(decode(&bytes), events);
    }

    #[test]
    fn message_delta_usage_keeps_earlier_cache_counts() {
        let stream = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":100,\"output_tokens\":1}}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":20}}\n\n",
        );
        let events = decode(stream.as_bytes());
        let StreamEvent::MessageDelta { usage, .. } = &events[1] else { panic!("{events:?}") };
        assert_eq!(usage.input_tokens, 110);
        assert_eq!(usage.cache_read_tokens, 100);
        assert_eq!(usage.output_tokens, 20);
    }

    #[test]
    fn signature_pieces_are_sent_once_at_block_stop() {
        let mut encoder = Encoder::default();
        let mut bytes = Vec::new();
        for event in [
            StreamEvent::BlockStart { index: 0, block: BlockStart::Thinking },
            StreamEvent::BlockDelta { index: 0, delta: Delta::Signature("ab".into()) },
            StreamEvent::BlockDelta { index: 0, delta: Delta::Thinking("x".into()) },
            StreamEvent::BlockDelta { index: 0, delta: Delta::Signature("cd".into()) },
            StreamEvent::BlockStop { index: 0 },
        ] {
            encoder.encode(&event, &mut bytes);
        }
        let events = decode(&bytes);
        assert_eq!(events[2], StreamEvent::BlockDelta { index: 0, delta: Delta::Signature("abcd".into()) });
    }

    #[test]
    fn garbage_data_is_a_decode_error() {
        let mut decoder = Decoder::default();
        let mut out = Vec::new();
        assert!(decoder.feed(b"data: {nope\n\n", &mut out).is_err());
    }
}
