//! ConverseStream events ↔ IR stream events. Bedrock sends the stop reason
//! (`messageStop`) before the usage (`metadata`, the last event); the
//! decoder holds the first until the second so that one `MessageDelta`
//! carries both, and the encoder writes them in Bedrock's order.

use serde::Deserialize;
use serde_json::{json, Value};
use switchyard_codec::ir::{BlockStart, Delta, Protocol, StopReason, StreamEvent, Usage};
use switchyard_codec::{signature, DecodeError, StreamDecoder, StreamEncoder};

use crate::error::{exception_frame, exception_message, stream_error};
use crate::eventstream::{header, write_frame, FrameReader};
use crate::wire::{
    service_tier_from_wire, service_tier_to_wire, stop_reason_from_wire, stop_reason_to_wire, usage_from_wire,
    usage_to_wire,
};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlockStartEvent {
    content_block_index: u64,
    #[serde(default)]
    start: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlockDeltaEvent {
    content_block_index: u64,
    #[serde(default)]
    delta: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlockStopEvent {
    content_block_index: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageStopEvent {
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    additional_model_response_fields: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetadataEvent {
    #[serde(default)]
    usage: Option<Value>,
    /// The tier that served the request (it prices it).
    #[serde(default)]
    service_tier: Option<Value>,
}

/// A Bedrock content block and the dense IR index it was given.
#[derive(Debug)]
struct VendorBlock {
    vendor: u64,
    index: u32,
    open: bool,
}

/// Decodes a ConverseStream body.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    frames: FrameReader,
    started: bool,
    blocks: Vec<VendorBlock>,
    next_index: u32,
    /// `messageStop` arrived: its stop reason and stop sequence.
    stop: Option<(Option<StopReason>, Option<String>)>,
    /// `metadata` arrived: its usage.
    usage: Option<Usage>,
    /// `MessageStop` or `Error` was emitted; later frames are ignored.
    ended: bool,
    /// The framing broke; the stream cannot be resynchronised.
    failed: Option<DecodeError>,
    /// A thought signature carried by the reasoning block just read, for
    /// the call that follows it (`switchyard_codec::signature`).
    carried: Option<String>,
}

impl StreamDecoder for Decoder {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        self.frames.push(chunk);
        loop {
            let step = match self.frames.next_frame() {
                Ok(Some(message)) => self.handle(&message, out),
                Ok(None) => return Ok(()),
                Err(err) => Err(err),
            };
            if let Err(err) = step {
                // The stream cannot be resynchronised; what it held goes.
                self.frames = FrameReader::default();
                self.failed = Some(err.clone());
                return Err(err);
            }
        }
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        if !self.ended {
            if self.stop.is_some() {
                // `messageStop` is Bedrock's end of message; only the
                // trailing usage report is missing.
                self.usage.get_or_insert_with(Usage::default);
                self.complete(out);
            } else if let Some(usage) = self.usage.take() {
                out.push(StreamEvent::MessageDelta { stop_reason: None, stop_sequence: None, usage });
            }
        }
        if self.frames.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::Frame("stream ended inside a frame".into()))
        }
    }
}

impl Decoder {
    fn handle(
        &mut self,
        message: &aws_smithy_types::event_stream::Message,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), DecodeError> {
        if self.ended {
            return Ok(());
        }
        let payload: &[u8] = message.payload();
        match header(message, ":message-type").unwrap_or("event") {
            "event" => self.event(header(message, ":event-type").unwrap_or_default(), payload, out),
            "exception" => {
                let exception = header(message, ":exception-type").unwrap_or("internalServerException");
                out.push(StreamEvent::Error(stream_error(exception, exception_message(payload))));
                self.ended = true;
                Ok(())
            }
            "error" => {
                let code = header(message, ":error-code").unwrap_or("internalServerException");
                let text = header(message, ":error-message").unwrap_or_default().to_owned();
                out.push(StreamEvent::Error(stream_error(code, text)));
                self.ended = true;
                Ok(())
            }
            // Other message types carry nothing for the reply.
            _ => Ok(()),
        }
    }

    fn event(&mut self, kind: &str, payload: &[u8], out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        match kind {
            "messageStart" => self.start(out),
            "contentBlockStart" => {
                let event: BlockStartEvent = serde_json::from_slice(payload)?;
                self.start(out);
                if let Some(tool) = event.start.get("toolUse") {
                    let text = |key: &str| tool.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
                    let signature = self.carried.take();
                    // What the encoder minted reads back (`call_id`).
                    let id = switchyard_codec::call_id::restore(&text("toolUseId"), Protocol::Bedrock).into_owned();
                    let block = BlockStart::ToolUse { id, name: text("name"), signature };
                    self.open(event.content_block_index, block, out);
                }
                // Other starts open their block with the first delta.
            }
            "contentBlockDelta" => {
                let event: BlockDeltaEvent = serde_json::from_slice(payload)?;
                self.start(out);
                self.delta(event.content_block_index, &event.delta, out);
            }
            "contentBlockStop" => {
                let event: BlockStopEvent = serde_json::from_slice(payload)?;
                if let Some(block) = self.blocks.iter_mut().find(|b| b.vendor == event.content_block_index && b.open) {
                    block.open = false;
                    out.push(StreamEvent::BlockStop { index: block.index });
                }
            }
            "messageStop" => {
                let event: MessageStopEvent = serde_json::from_slice(payload)?;
                self.start(out);
                let stop_sequence = event
                    .additional_model_response_fields
                    .as_ref()
                    .and_then(|fields| fields.get("stop_sequence"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let stop_reason = event.stop_reason.as_deref().and_then(stop_reason_from_wire);
                self.stop = Some((stop_reason, stop_sequence));
                if self.usage.is_some() {
                    self.complete(out);
                }
            }
            "metadata" => {
                let event: MetadataEvent = serde_json::from_slice(payload)?;
                let mut usage = event.usage.as_ref().map(usage_from_wire).unwrap_or_default();
                usage.service_tier = service_tier_from_wire(event.service_tier.as_ref());
                self.usage = Some(usage);
                if self.stop.is_some() {
                    self.complete(out);
                }
            }
            // Events added after this codec was written carry nothing it knows.
            _ => {}
        }
        Ok(())
    }

    /// Emits `MessageStart` once, before anything else.
    fn start(&mut self, out: &mut Vec<StreamEvent>) {
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

    /// Opens a block for a vendor index (closing any other open block, as
    /// the IR's blocks do not interleave) and returns its dense index.
    fn open(&mut self, vendor: u64, block: BlockStart, out: &mut Vec<StreamEvent>) -> u32 {
        self.close_all(out);
        let index = self.next_index;
        self.next_index += 1;
        self.blocks.retain(|b| b.vendor != vendor);
        self.blocks.push(VendorBlock { vendor, index, open: true });
        out.push(StreamEvent::BlockStart { index, block });
        index
    }

    /// The open block of a vendor index, opened as `block` if there is none
    /// (Bedrock sends no `contentBlockStart` for text and reasoning).
    fn block_for(&mut self, vendor: u64, block: BlockStart, out: &mut Vec<StreamEvent>) -> u32 {
        match self.blocks.iter().find(|b| b.vendor == vendor && b.open) {
            Some(open) => open.index,
            None => self.open(vendor, block, out),
        }
    }

    fn delta(&mut self, vendor: u64, delta: &Value, out: &mut Vec<StreamEvent>) {
        let text_of = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_owned);
        let (block, delta) = if let Some(text) = text_of(delta.get("text")) {
            (BlockStart::Text, Delta::Text(text))
        } else if let Some(tool) = delta.get("toolUse") {
            let input = text_of(tool.get("input")).unwrap_or_default();
            let start = BlockStart::ToolUse { id: String::new(), name: String::new(), signature: None };
            (start, Delta::ToolInput(input))
        } else if let Some(reasoning) = delta.get("reasoningContent") {
            if let Some(text) = text_of(reasoning.get("text")) {
                (BlockStart::Thinking, Delta::Thinking(text))
            } else if let Some(signature) = text_of(reasoning.get("signature")) {
                let open = self.blocks.iter().any(|b| b.vendor == vendor && b.open);
                if let (false, Some(carried)) = (open, signature::from_reasoning(&signature)) {
                    // The next call's signature, not reasoning of its own.
                    self.carried = Some(carried.to_owned());
                    return;
                }
                (BlockStart::Thinking, Delta::Signature(signature))
            } else if let Some(data) = text_of(reasoning.get("redactedContent")) {
                // Redacted reasoning is whole in its start event in the IR.
                if !self.blocks.iter().any(|b| b.vendor == vendor && b.open) {
                    self.open(vendor, BlockStart::RedactedThinking { data }, out);
                }
                return;
            } else {
                return;
            }
        } else {
            // Citation deltas have no IR form.
            return;
        };
        let index = self.block_for(vendor, block, out);
        out.push(StreamEvent::BlockDelta { index, delta });
    }

    fn close_all(&mut self, out: &mut Vec<StreamEvent>) {
        for block in self.blocks.iter_mut().filter(|b| b.open) {
            block.open = false;
            out.push(StreamEvent::BlockStop { index: block.index });
        }
    }

    /// Both `messageStop` and `metadata` are in: the message is complete.
    fn complete(&mut self, out: &mut Vec<StreamEvent>) {
        self.close_all(out);
        let (stop_reason, stop_sequence) = self.stop.take().unwrap_or_default();
        out.push(StreamEvent::MessageDelta {
            stop_reason,
            stop_sequence,
            usage: self.usage.take().unwrap_or_default(),
        });
        out.push(StreamEvent::MessageStop);
        self.ended = true;
    }
}

/// The kind of the block being encoded, to write an empty delta for a block
/// that had none (Bedrock has no start event for text and reasoning, so an
/// empty block would otherwise vanish).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpenKind {
    Text,
    Thinking,
    Other,
}

/// Encodes IR events as ConverseStream event-stream frames.
#[derive(Debug, Default)]
pub(crate) struct Encoder {
    start_usage: Usage,
    usage: Usage,
    stop_reason: Option<StopReason>,
    stop_sequence: Option<String>,
    /// The open block: wire index, kind, whether anything was written for it.
    open: Option<(u32, OpenKind, bool)>,
    /// Blocks written before the IR's: signature carriers, each one place
    /// ahead of the call it belongs to.
    shift: u32,
}

fn event(kind: &str, payload: &Value, out: &mut Vec<u8>) {
    event_bytes(kind, &switchyard_codec::json::to_vec(payload), out);
}

fn event_bytes(kind: &str, payload: &[u8], out: &mut Vec<u8>) {
    write_frame(
        &[(":event-type", kind), (":content-type", "application/json"), (":message-type", "event")],
        payload,
        out,
    );
}

/// A text-like delta (`{"contentBlockIndex":N,"delta":{...}}`), written
/// without a JSON tree: deltas are most of a stream.
fn text_delta(index: u32, prefix: &[u8], text: &str, suffix: &[u8], out: &mut Vec<u8>) {
    let mut payload = Vec::with_capacity(text.len() + 64);
    payload.extend_from_slice(b"{\"contentBlockIndex\":");
    payload.extend_from_slice(index.to_string().as_bytes());
    payload.extend_from_slice(b",\"delta\":");
    payload.extend_from_slice(prefix);
    payload.extend_from_slice(&switchyard_codec::json::to_vec(text));
    payload.extend_from_slice(suffix);
    payload.extend_from_slice(b"}");
    event_bytes("contentBlockDelta", &payload, out);
}

fn block_delta(index: u32, delta: Value, out: &mut Vec<u8>) {
    event("contentBlockDelta", &json!({ "contentBlockIndex": index, "delta": delta }), out);
}

impl StreamEncoder for Encoder {
    fn encode(&mut self, stream_event: &StreamEvent, out: &mut Vec<u8>) {
        match stream_event {
            StreamEvent::MessageStart { usage, .. } => {
                // Bedrock reports all usage at the end; input known now waits.
                self.start_usage = *usage;
                event("messageStart", &json!({ "role": "assistant" }), out);
            }
            StreamEvent::BlockStart { index, block } => {
                if let BlockStart::ToolUse { signature: Some(signature), .. } = block {
                    // A whole reasoning block carrying the call's signature,
                    // as in a whole reply: `toolUseId` is too short for it.
                    let carrier = index + self.shift;
                    let content = signature::in_reasoning(signature);
                    text_delta(carrier, b"{\"reasoningContent\":{\"signature\":", &content, b"}}", out);
                    event("contentBlockStop", &json!({ "contentBlockIndex": carrier }), out);
                    self.shift += 1;
                }
                let index = index + self.shift;
                self.open = Some(match block {
                    BlockStart::Text => (index, OpenKind::Text, false),
                    BlockStart::Thinking => (index, OpenKind::Thinking, false),
                    BlockStart::RedactedThinking { data } => {
                        block_delta(index, json!({ "reasoningContent": { "redactedContent": data } }), out);
                        (index, OpenKind::Other, true)
                    }
                    BlockStart::ToolUse { id, name, .. } => {
                        event(
                            "contentBlockStart",
                            &json!({
                                "contentBlockIndex": index,
                                // The caller gets the id in its own form.
                                "start": { "toolUse": {
                                    "toolUseId": switchyard_codec::call_id::mint(id, Protocol::Bedrock),
                                    "name": name,
                                } },
                            }),
                            out,
                        );
                        (index, OpenKind::Other, true)
                    }
                });
            }
            StreamEvent::BlockDelta { index, delta } => {
                let index = index + self.shift;
                match delta {
                    Delta::Text(text) => text_delta(index, b"{\"text\":", text, b"}", out),
                    Delta::Thinking(text) => text_delta(index, b"{\"reasoningContent\":{\"text\":", text, b"}}", out),
                    Delta::Signature(signature) => {
                        text_delta(index, b"{\"reasoningContent\":{\"signature\":", signature, b"}}", out)
                    }
                    Delta::ToolInput(input) => text_delta(index, b"{\"toolUse\":{\"input\":", input, b"}}", out),
                    // Converse has no log probabilities (never asked of it).
                    Delta::Logprobs(_) => return,
                }
                if let Some((open, _, written)) = &mut self.open {
                    if *open == index {
                        *written = true;
                    }
                }
            }
            StreamEvent::BlockStop { index } => {
                let index = index + self.shift;
                if let Some((open, kind, false)) = self.open {
                    if open == index {
                        match kind {
                            OpenKind::Text => block_delta(open, json!({ "text": "" }), out),
                            OpenKind::Thinking => {
                                block_delta(open, json!({ "reasoningContent": { "text": "" } }), out);
                            }
                            OpenKind::Other => {}
                        }
                    }
                }
                self.open = None;
                event("contentBlockStop", &json!({ "contentBlockIndex": index }), out);
            }
            StreamEvent::MessageDelta { stop_reason, stop_sequence, usage } => {
                if stop_reason.is_some() {
                    self.stop_reason = *stop_reason;
                }
                if stop_sequence.is_some() {
                    self.stop_sequence.clone_from(stop_sequence);
                }
                self.usage.merge(usage);
            }
            StreamEvent::MessageStop => {
                let mut stop = serde_json::Map::new();
                let reason = self.stop_reason.map_or("end_turn", stop_reason_to_wire);
                stop.insert("stopReason".into(), reason.into());
                if let Some(sequence) = &self.stop_sequence {
                    stop.insert("additionalModelResponseFields".into(), json!({ "stop_sequence": sequence }));
                }
                event("messageStop", &Value::Object(stop), out);
                let mut usage = self.start_usage;
                usage.merge(&self.usage);
                let mut metadata = json!({ "usage": usage_to_wire(&usage), "metrics": { "latencyMs": 0 } });
                if let Some(tier) = service_tier_to_wire(&usage) {
                    metadata["serviceTier"] = tier;
                }
                event("metadata", &metadata, out);
            }
            StreamEvent::Error(error) => out.extend_from_slice(&exception_frame(error)),
        }
    }

    fn finish(&mut self, _out: &mut Vec<u8>) {
        // An event stream ends with its last frame; there is no terminator.
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eventstream::MAX_FRAME_BYTES;
    use switchyard_codec::ir::{ErrorInfo, ErrorKind};

    fn frame(kind: &str, payload: Value) -> Vec<u8> {
        let mut out = Vec::new();
        event(kind, &payload, &mut out);
        out
    }

    fn decode(bytes: &[u8]) -> Vec<StreamEvent> {
        let mut decoder = Decoder::default();
        let mut out = Vec::new();
        decoder.feed(bytes, &mut out).unwrap();
        decoder.finish(&mut out).unwrap();
        out
    }

    #[test]
    fn text_without_block_start_is_opened_and_stop_waits_for_usage() {
        let mut bytes = frame("messageStart", json!({ "role": "assistant", "p": "abc" }));
        bytes.extend(frame("contentBlockDelta", json!({ "contentBlockIndex": 0, "delta": { "text": "hi" } })));
        bytes.extend(frame("contentBlockStop", json!({ "contentBlockIndex": 0 })));
        bytes.extend(frame("messageStop", json!({ "stopReason": "end_turn" })));
        bytes.extend(frame("metadata", json!({ "usage": { "inputTokens": 3, "outputTokens": 1, "totalTokens": 4 }, "metrics": { "latencyMs": 5 } })));
        let events = decode(&bytes);
        assert_eq!(events.len(), 6);
        assert_eq!(events[1], StreamEvent::BlockStart { index: 0, block: BlockStart::Text });
        assert_eq!(
            events[4],
            StreamEvent::MessageDelta {
                stop_reason: Some(StopReason::EndTurn),
                stop_sequence: None,
                usage: Usage { input_tokens: 3, output_tokens: 1, ..Usage::default() },
            }
        );
        assert_eq!(events[5], StreamEvent::MessageStop);
    }

    /// The `metadata` event's `serviceTier` is the tier that served the
    /// stream: read into its usage and written back beside it.
    #[test]
    fn the_service_tier_of_the_metadata_event_is_kept() {
        let usage = json!({ "inputTokens": 3, "outputTokens": 1, "totalTokens": 4 });
        let mut bytes = frame("messageStop", json!({ "stopReason": "end_turn" }));
        bytes.extend(frame(
            "metadata",
            json!({ "usage": usage, "metrics": { "latencyMs": 5 },
            "serviceTier": { "type": "priority" } }),
        ));
        let events = decode(&bytes);
        let delta = events.iter().find_map(|event| match event {
            StreamEvent::MessageDelta { usage, .. } => Some(*usage),
            _ => None,
        });
        let expected = Usage {
            input_tokens: 3,
            output_tokens: 1,
            service_tier: Some(switchyard_codec::ir::ServiceTier::Priority),
            ..Usage::default()
        };
        assert_eq!(delta, Some(expected));
        let mut encoder = Encoder::default();
        let mut written = Vec::new();
        for event in &events {
            encoder.encode(event, &mut written);
        }
        let again = decode(&written);
        assert_eq!(again, events, "written as Bedrock writes it, read back the same");
        let text = String::from_utf8_lossy(&written);
        assert!(text.contains(r#""serviceTier":{"type":"priority"}"#), "{text}");
    }

    #[test]
    fn sparse_vendor_indexes_become_dense() {
        let mut bytes = frame("contentBlockDelta", json!({ "contentBlockIndex": 3, "delta": { "text": "a" } }));
        bytes.extend(frame(
            "contentBlockStart",
            json!({ "contentBlockIndex": 7, "start": { "toolUse": { "toolUseId": "t", "name": "f" } } }),
        ));
        bytes.extend(frame("messageStop", json!({ "stopReason": "tool_use" })));
        let events = decode(&bytes);
        assert_eq!(
            events,
            vec![
                StreamEvent::MessageStart {
                    id: String::new(),
                    model: String::new(),
                    created: None,
                    usage: Usage::default()
                },
                StreamEvent::BlockStart { index: 0, block: BlockStart::Text },
                StreamEvent::BlockDelta { index: 0, delta: Delta::Text("a".into()) },
                StreamEvent::BlockStop { index: 0 },
                StreamEvent::BlockStart {
                    index: 1,
                    block: BlockStart::ToolUse { id: "t".into(), name: "f".into(), signature: None }
                },
                StreamEvent::BlockStop { index: 1 },
                StreamEvent::MessageDelta {
                    stop_reason: Some(StopReason::ToolUse),
                    stop_sequence: None,
                    usage: Usage::default()
                },
                StreamEvent::MessageStop,
            ]
        );
    }

    #[test]
    fn exceptions_become_errors_and_back() {
        let error = ErrorInfo::new(ErrorKind::RateLimit, "slow down");
        let mut encoder = Encoder::default();
        let mut bytes = Vec::new();
        encoder.encode(&StreamEvent::Error(error), &mut bytes);
        let events = decode(&bytes);
        let [StreamEvent::Error(info)] = events.as_slice() else { panic!("one error expected: {events:?}") };
        assert_eq!(info.kind, ErrorKind::RateLimit);
        assert_eq!(info.status, 429);
        assert_eq!(info.message, "slow down");
        assert_eq!(info.code.as_deref(), Some("throttlingException"));
    }

    #[test]
    fn garbage_is_an_error_that_sticks() {
        let mut decoder = Decoder::default();
        let mut out = Vec::new();
        assert!(decoder.feed(&[0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9], &mut out).is_err());
        assert!(decoder.feed(b"more", &mut out).is_err());
        assert!(decoder.finish(&mut out).is_err());
    }

    #[test]
    fn a_frame_that_never_ends_fails_cleanly_with_bounded_memory() {
        let mut decoder = Decoder::default();
        let mut out = Vec::new();
        // A prelude declaring the largest frame allowed, then 100 MB of
        // filler in 64 KiB chunks: the frame completes at the cap, fails its
        // CRC, and nothing more is held.
        let declared = u32::try_from(MAX_FRAME_BYTES).unwrap();
        let mut prelude = declared.to_be_bytes().to_vec();
        prelude.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        decoder.feed(&prelude, &mut out).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        let mut fed = prelude.len();
        let failure = loop {
            assert!(fed < 100 << 20, "no error after {fed} bytes");
            if let Err(err) = decoder.feed(&chunk, &mut out) {
                break err;
            }
            fed += chunk.len();
            assert!(decoder.frames.buffered() <= 2 * MAX_FRAME_BYTES, "{} bytes held", decoder.frames.buffered());
        };
        assert!(matches!(failure, DecodeError::Frame(_)), "{failure:?}");
        assert!(fed <= MAX_FRAME_BYTES);
        assert_eq!(decoder.frames.buffered(), 0);
    }

    #[test]
    fn truncated_stream_is_a_frame_error_at_finish() {
        let bytes = frame("messageStart", json!({ "role": "assistant" }));
        let mut decoder = Decoder::default();
        let mut out = Vec::new();
        decoder.feed(&bytes[..bytes.len() - 1], &mut out).unwrap();
        assert!(matches!(decoder.finish(&mut out), Err(DecodeError::Frame(_))));
    }
}
