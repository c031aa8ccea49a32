//! `chat.completion.chunk` streams. The decoder fans OpenAI's flat deltas out
//! into IR block events; the encoder folds block events back into chunks,
//! a finish chunk, a usage chunk and `data: [DONE]`.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_codec::frame::{write_sse, SseEvent, SseHandler, SseStream};
use switchyard_codec::ir::{BlockStart, Delta, Protocol, StopReason, StreamEvent, Usage};
use switchyard_codec::{call_id, DecodeError, StreamEncoder};

use crate::error::{body as error_body, VendorError};
use crate::response::unix_seconds;
use crate::wire::{carried_signature, finish_from_stop_reason, stop_reason_from_finish, ExtraContent, WireUsage};

const DONE: &str = "[DONE]";

#[derive(Deserialize)]
struct WireChunk {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    created: Option<Value>,
    #[serde(default)]
    choices: Option<Vec<WireChunkChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    /// The tier serving the stream (on every chunk).
    #[serde(default)]
    service_tier: Option<String>,
    /// Present only on in-stream errors (`{"error": ...}`).
    #[serde(default)]
    error: Option<Value>,
    /// `"error"` on the flat error form some servers send.
    #[serde(default)]
    object: Option<String>,
}

#[derive(Deserialize)]
struct WireChunkChoice {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    delta: Option<WireDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    logprobs: Option<crate::response::WireLogprobs>,
}

#[derive(Deserialize)]
struct WireDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    reasoning_content: Option<Value>,
    #[serde(default)]
    reasoning: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCallDelta>>,
}

#[derive(Deserialize)]
struct WireToolCallDelta {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunctionDelta>,
    /// A Gemini thought signature, on the call's first fragment.
    #[serde(default)]
    extra_content: Option<Value>,
}

#[derive(Deserialize)]
struct WireFunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// The block the decoder has open.
#[derive(Debug, Clone, PartialEq)]
enum Open {
    Text,
    Thinking,
    Tool {
        /// The call's `index` on the wire, when the server sent one.
        wire_index: Option<u32>,
        id: String,
    },
}

/// Upstream chunk stream → IR events.
pub(crate) type ChunkDecoder = SseStream<Chunks>;

/// What the decoder knows across the chunks of one stream.
#[derive(Default)]
pub(crate) struct Chunks {
    started: bool,
    /// `[DONE]` or an error arrived; anything later is ignored.
    ended: bool,
    next_index: u32,
    open: Option<(u32, Open)>,
    /// Wire indexes of tool calls already closed.
    closed_tools: Vec<u32>,
    stop_reason: Option<StopReason>,
    finished: bool,
    refused: bool,
    usage: Option<Usage>,
    /// The bytes around the last text-only chunk's text ([`text_only`]).
    seen: switchyard_codec::scan::Around,
}

/// The text of a chunk that says nothing else: choice 0's `delta.content`
/// with no role, reasoning, refusal, tool call, finish reason, usage or
/// error beside it, read in one pass over the bytes (a fifth of a typed
/// parse). `None`: any other chunk (or any spelling this reader does not
/// follow, such as an escaped key), read in full.
///
/// The chunks of a stream differ only in their text: `seen` keeps the
/// bytes around the text of the last chunk read here, and a chunk with the
/// same bytes around one JSON string is that string (compared, not parsed).
fn text_only<'a>(data: &'a [u8], seen: &mut switchyard_codec::scan::Around) -> Option<std::borrow::Cow<'a, str>> {
    let raw = match seen.body(data) {
        Some(raw) => raw,
        None => {
            let (start, end) = text_span(data)?;
            seen.remember(data, start..end);
            &data[start..end]
        }
    };
    switchyard_codec::scan::string_body(raw)
}

/// Where the text of a text-only chunk is (the body of its string), read
/// in one pass.
fn text_span(data: &[u8]) -> Option<(usize, usize)> {
    let mut at = Cursor { bytes: data, at: 0 };
    let mut span = None;
    at.object(|at, key| match key {
        b"id" | b"created" | b"model" | b"system_fingerprint" | b"service_tier" | b"obfuscation" => {
            at.scalar().map(drop)
        }
        b"object" => (at.scalar()? == b"\"chat.completion.chunk\"").then_some(()),
        b"usage" => (at.scalar()? == b"null").then_some(()),
        b"choices" => {
            at.eat(b'[')?;
            at.object(|at, key| match key {
                b"index" => (at.scalar()? == b"0").then_some(()),
                b"logprobs" | b"finish_reason" => (at.scalar()? == b"null").then_some(()),
                b"delta" => at.object(|at, key| match key {
                    b"content" => {
                        let text = at.string()?;
                        let end = at.at - 1;
                        span = Some((end - text.len(), end));
                        (!text.iter().any(|&b| b < 0x20)).then_some(())
                    }
                    _ => None,
                }),
                _ => None,
            })?;
            at.eat(b']')
        }
        _ => None,
    })?;
    at.ws();
    (at.at == data.len()).then_some(span)?
}

/// A one-pass reader of the JSON shapes [`text_only`] accepts.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn ws(&mut self) {
        while matches!(self.bytes.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.ws();
        (self.bytes.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    /// A string's raw bytes between its quotes (escapes not resolved).
    fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.at;
        loop {
            let found = self.at + memchr::memchr2(b'"', b'\\', self.bytes.get(self.at..)?)?;
            if self.bytes[found] == b'\\' {
                self.at = found + 2;
            } else {
                self.at = found + 1;
                return Some(&self.bytes[start..found]);
            }
        }
    }

    /// A string (with its quotes), number, `true`, `false` or `null`.
    fn scalar(&mut self) -> Option<&'a [u8]> {
        self.ws();
        let start = self.at;
        if self.bytes.get(self.at) == Some(&b'"') {
            self.string()?;
            return Some(&self.bytes[start..self.at]);
        }
        while let Some(byte) = self.bytes.get(self.at) {
            match byte {
                b'0'..=b'9' | b'a'..=b'z' | b'-' | b'+' | b'.' | b'E' => self.at += 1,
                _ => break,
            }
        }
        (self.at > start).then(|| &self.bytes[start..self.at])
    }

    /// An object, each member's value read by `member` (given its raw key).
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        self.ws();
        if self.bytes.get(self.at) == Some(&b'}') {
            self.at += 1;
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            member(self, key)?;
            self.ws();
            match self.bytes.get(self.at)? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }
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
        // Most chunks of a reply carry only the next piece of text: read
        // without a parse into a struct (it costs a fifth as much).
        if self.started {
            if let Some(text) = text_only(data.as_bytes(), &mut self.seen) {
                if !text.is_empty() {
                    let index = self.ensure(Open::Text, BlockStart::Text, out);
                    out.push(StreamEvent::BlockDelta { index, delta: Delta::Text(text.into_owned()) });
                }
                return Ok(());
            }
        }
        // One typed parse per chunk; the error forms are rare enough to be
        // read again as a tree.
        let chunk: WireChunk = serde_json::from_str(data)?;
        if chunk.error.is_some() || chunk.object.as_deref() == Some("error") {
            let value: Value = serde_json::from_str(data)?;
            if let Some(error) = VendorError::from_value(&value) {
                out.push(StreamEvent::Error(error.to_error_info()));
                self.ended = true;
                return Ok(());
            }
        }
        if frame.event.as_deref() == Some("error") {
            out.push(StreamEvent::Error(
                VendorError { message: data.to_owned(), ..VendorError::default() }.to_error_info(),
            ));
            self.ended = true;
            return Ok(());
        }
        self.chunk(chunk, out)
    }

    fn start(&mut self, chunk: Option<&WireChunk>, out: &mut Vec<StreamEvent>) {
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

    fn chunk(&mut self, chunk: WireChunk, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        self.start(Some(&chunk), out);
        if let Some(usage) = &chunk.usage {
            self.usage.get_or_insert_with(Usage::default).merge(&usage.to_ir(chunk.service_tier.as_deref()));
        }
        // The IR models one reply; other choices (`n > 1`) are not kept.
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                self.delta(delta, out)?;
            }
            let tokens = choice.logprobs.map(crate::response::WireLogprobs::into_ir).unwrap_or_default();
            if !tokens.is_empty() {
                let index = self.ensure(Open::Text, BlockStart::Text, out);
                out.push(StreamEvent::BlockDelta { index, delta: Delta::Logprobs(tokens) });
            }
            if let Some(finish) = choice.finish_reason {
                self.close(out);
                self.finished = true;
                self.stop_reason = Some(stop_reason_from_finish(&finish));
            }
        }
        Ok(())
    }

    fn delta(&mut self, delta: WireDelta, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        for reasoning in [delta.reasoning_content, delta.reasoning] {
            if let Some(Value::String(text)) = reasoning {
                if !text.is_empty() {
                    let index = self.ensure(Open::Thinking, BlockStart::Thinking, out);
                    out.push(StreamEvent::BlockDelta { index, delta: Delta::Thinking(text) });
                }
            }
        }
        for text in [delta.content, delta.refusal.clone()].into_iter().flatten() {
            if !text.is_empty() {
                let index = self.ensure(Open::Text, BlockStart::Text, out);
                out.push(StreamEvent::BlockDelta { index, delta: Delta::Text(text) });
            }
        }
        if delta.refusal.is_some_and(|r| !r.is_empty()) {
            self.refused = true;
        }
        for call in delta.tool_calls.unwrap_or_default() {
            self.tool_call(call, out)?;
        }
        Ok(())
    }

    fn tool_call(&mut self, call: WireToolCallDelta, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        let continues = match (&self.open, call.index) {
            (Some((_, Open::Tool { wire_index, .. })), Some(index)) => *wire_index == Some(index),
            // Without an index, a fragment continues the open call unless it
            // names another one.
            (Some((_, Open::Tool { id, .. })), None) => call.id.as_ref().is_none_or(|c| c == id),
            _ => false,
        };
        let (name, arguments) = match call.function {
            Some(function) => (function.name, function.arguments),
            None => (None, None),
        };
        let index = if continues {
            self.open.as_ref().map(|(index, _)| *index).unwrap_or(0)
        } else {
            if let Some(wire_index) = call.index {
                if self.closed_tools.contains(&wire_index) {
                    return Err(DecodeError::Frame(format!(
                        "tool call {wire_index} continued after another block started"
                    )));
                }
            }
            // What the encoder minted reads back (`call_id`).
            let id = call_id::restore(call.id.as_deref().unwrap_or_default(), Protocol::OpenAi).into_owned();
            let signature = carried_signature(call.extra_content.as_ref());
            let start = BlockStart::ToolUse { id: id.clone(), name: name.unwrap_or_default(), signature };
            self.open_block(Open::Tool { wire_index: call.index, id }, start, out)
        };
        if let Some(arguments) = arguments {
            if !arguments.is_empty() {
                out.push(StreamEvent::BlockDelta { index, delta: Delta::ToolInput(arguments) });
            }
        }
        Ok(())
    }

    /// The index of an open block of `kind`, opening one if needed.
    fn ensure(&mut self, kind: Open, start: BlockStart, out: &mut Vec<StreamEvent>) -> u32 {
        match &self.open {
            Some((index, open)) if *open == kind => *index,
            _ => self.open_block(kind, start, out),
        }
    }

    fn open_block(&mut self, kind: Open, start: BlockStart, out: &mut Vec<StreamEvent>) -> u32 {
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        out.push(StreamEvent::BlockStart { index, block: start });
        self.open = Some((index, kind));
        index
    }

    fn close(&mut self, out: &mut Vec<StreamEvent>) {
        if let Some((index, open)) = self.open.take() {
            if let Open::Tool { wire_index: Some(wire_index), .. } = open {
                self.closed_tools.push(wire_index);
            }
            out.push(StreamEvent::BlockStop { index });
        }
    }

    /// Closes the reply: usage that trailed the finish reason lands in the
    /// `MessageDelta` before `MessageStop`.
    fn complete(&mut self, out: &mut Vec<StreamEvent>) {
        self.close(out);
        if self.finished || self.usage.is_some() {
            let stop_reason = if self.refused { Some(StopReason::Refusal) } else { self.stop_reason };
            out.push(StreamEvent::MessageDelta {
                stop_reason,
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
    model: &'a str,
    choices: Vec<OutChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<WireUsage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    service_tier: Option<&'static str>,
}

#[derive(Serialize)]
struct OutChoice<'a> {
    index: u32,
    delta: OutDelta<'a>,
    logprobs: Option<crate::response::OutLogprobs<'a>>,
    finish_reason: Option<&'static str>,
}

#[derive(Serialize, Default)]
struct OutDelta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    thinking_blocks: Vec<crate::thinking::OutThinking<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<OutToolCall<'a>>,
}

#[derive(Serialize)]
struct OutToolCall<'a> {
    index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    function: OutFunction<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    extra_content: Option<ExtraContent<&'a str>>,
}

#[derive(Serialize)]
struct OutFunction<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    arguments: &'a str,
}

/// What the encoder knows of an IR block.
#[derive(Clone, Copy)]
enum Kind {
    Text,
    /// Reasoning: its text in `reasoning_content` deltas; when signed, the
    /// whole block in one `thinking_blocks` delta at its stop.
    Thinking,
    /// Redacted reasoning, written whole at its start.
    Silent,
    Tool(u32),
}

/// IR events → OpenAI chunk stream.
#[derive(Default)]
pub(crate) struct ChunkEncoder {
    id: String,
    model: String,
    created: i64,
    blocks: Vec<(u32, Kind)>,
    tools: u32,
    stop_reason: Option<StopReason>,
    usage: Usage,
    ended: bool,
    /// The open reasoning block's text and signature (the signature comes
    /// last, and its `thinking_blocks` entry carries both).
    thinking: String,
    thinking_signature: String,
    /// Write the trailing `choices: []` usage chunk.
    usage_chunk: bool,
    /// Every chunk's opening up to its delta's members (`data: {"id":…,
    /// "choices":[{"index":0,"delta":{`), written once per stream: a text
    /// delta then costs the escaping of its text alone.
    head: Vec<u8>,
}

impl ChunkEncoder {
    /// An encoder that always writes the usage chunk (what an upstream
    /// asked with `include_usage`, which the writer always sets, sends).
    pub fn new() -> ChunkEncoder {
        ChunkEncoder::with_usage_chunk(true)
    }

    /// An encoder that writes the usage chunk only when `usage_chunk`.
    pub fn with_usage_chunk(usage_chunk: bool) -> ChunkEncoder {
        ChunkEncoder { usage_chunk, ..ChunkEncoder::default() }
    }

    fn kind(&self, index: u32) -> Option<Kind> {
        self.blocks.iter().rev().find(|(i, _)| *i == index).map(|(_, kind)| *kind)
    }

    /// A delta of one text member, as [`ChunkEncoder::write_delta`] would
    /// write it (byte for byte), without serialising the rest again.
    fn write_text(&mut self, member: &str, text: &str, out: &mut Vec<u8>) {
        if self.head.is_empty() {
            let mut head = Vec::with_capacity(96 + self.id.len() + self.model.len());
            head.extend_from_slice(b"data: {\"id\":");
            switchyard_codec::json::write_str(&mut head, &self.id);
            head.extend_from_slice(b",\"object\":\"chat.completion.chunk\",\"created\":");
            head.extend_from_slice(self.created.to_string().as_bytes());
            head.extend_from_slice(b",\"model\":");
            switchyard_codec::json::write_str(&mut head, &self.model);
            head.extend_from_slice(b",\"choices\":[{\"index\":0,\"delta\":{\"");
            self.head = head;
        }
        out.extend_from_slice(&self.head);
        out.extend_from_slice(member.as_bytes());
        out.extend_from_slice(b"\":");
        switchyard_codec::json::write_str(out, text);
        out.extend_from_slice(b"},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
    }

    fn write_delta(&self, delta: OutDelta<'_>, out: &mut Vec<u8>) {
        self.write_choice(delta, None, out);
    }

    fn write_choice(&self, delta: OutDelta<'_>, finish_reason: Option<&'static str>, out: &mut Vec<u8>) {
        self.write_chunk(vec![OutChoice { index: 0, delta, logprobs: None, finish_reason }], None, out);
    }

    fn write_chunk(&self, choices: Vec<OutChoice<'_>>, usage: Option<WireUsage>, out: &mut Vec<u8>) {
        let chunk = OutChunk {
            id: &self.id,
            object: "chat.completion.chunk",
            created: self.created,
            model: &self.model,
            choices,
            usage,
            service_tier: crate::wire::service_tier_name(&self.usage),
        };
        write_sse(out, None, &switchyard_codec::json::to_vec(&chunk));
    }
}

impl StreamEncoder for ChunkEncoder {
    fn encode(&mut self, event: &StreamEvent, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        match event {
            StreamEvent::MessageStart { id, model, created, usage } => {
                self.id.clone_from(id);
                self.model.clone_from(model);
                self.created = created.unwrap_or(0);
                self.head.clear();
                self.usage.merge(usage);
                // OpenAI opens with the role, so clients see a first byte early.
                self.write_delta(OutDelta { role: Some("assistant"), content: Some(""), ..OutDelta::default() }, out);
            }
            StreamEvent::BlockStart { index, block } => {
                let kind = match block {
                    BlockStart::Text => Kind::Text,
                    BlockStart::Thinking => {
                        self.thinking.clear();
                        self.thinking_signature.clear();
                        Kind::Thinking
                    }
                    BlockStart::RedactedThinking { data } => {
                        let redacted = vec![crate::thinking::OutThinking::RedactedThinking { data }];
                        self.write_delta(OutDelta { thinking_blocks: redacted, ..OutDelta::default() }, out);
                        Kind::Silent
                    }
                    BlockStart::ToolUse { id, name, signature } => {
                        let tool = self.tools;
                        self.tools += 1;
                        let id = call_id::mint(id, Protocol::OpenAi);
                        self.write_delta(
                            OutDelta {
                                tool_calls: vec![OutToolCall {
                                    index: tool,
                                    id: Some(&id),
                                    kind: Some("function"),
                                    function: OutFunction { name: Some(name), arguments: "" },
                                    extra_content: ExtraContent::of(signature.as_deref()),
                                }],
                                ..OutDelta::default()
                            },
                            out,
                        );
                        Kind::Tool(tool)
                    }
                };
                self.blocks.push((*index, kind));
            }
            StreamEvent::BlockDelta { index, delta } => match (self.kind(*index), delta) {
                (Some(Kind::Text), Delta::Text(text)) if !text.is_empty() => self.write_text("content", text, out),
                (Some(Kind::Text), Delta::Logprobs(tokens)) if !tokens.is_empty() => {
                    let logprobs = crate::response::OutLogprobs::of(tokens);
                    let choice = OutChoice { index: 0, delta: OutDelta::default(), logprobs, finish_reason: None };
                    self.write_chunk(vec![choice], None, out);
                }
                (Some(Kind::Thinking), Delta::Thinking(text)) if !text.is_empty() => {
                    self.thinking.push_str(text);
                    self.write_text("reasoning_content", text, out)
                }
                (Some(Kind::Thinking), Delta::Signature(signature)) => self.thinking_signature.push_str(signature),
                (Some(Kind::Tool(tool)), Delta::ToolInput(arguments)) if !arguments.is_empty() => self.write_delta(
                    OutDelta {
                        tool_calls: vec![OutToolCall {
                            index: tool,
                            id: None,
                            kind: None,
                            function: OutFunction { name: None, arguments },
                            extra_content: None,
                        }],
                        ..OutDelta::default()
                    },
                    out,
                ),
                _ => {}
            },
            StreamEvent::BlockStop { index } => {
                if matches!(self.kind(*index), Some(Kind::Thinking)) && !self.thinking_signature.is_empty() {
                    let (thinking, signature) =
                        (std::mem::take(&mut self.thinking), std::mem::take(&mut self.thinking_signature));
                    let signed =
                        vec![crate::thinking::OutThinking::Thinking { thinking: &thinking, signature: &signature }];
                    self.write_delta(OutDelta { thinking_blocks: signed, ..OutDelta::default() }, out);
                }
            }
            StreamEvent::MessageDelta { stop_reason, usage, .. } => {
                if stop_reason.is_some() {
                    self.stop_reason = *stop_reason;
                }
                self.usage.merge(usage);
            }
            StreamEvent::MessageStop => {
                // OpenAI always names a finish reason on the last choice chunk.
                let finish = finish_from_stop_reason(self.stop_reason.unwrap_or(StopReason::EndTurn));
                self.write_choice(OutDelta::default(), Some(finish), out);
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

/// `request` (a streaming Chat request) with `stream_options.include_usage`
/// set, other bytes as they were; `None` when it is not a JSON object.
pub(crate) fn ask_for_usage(request: &[u8]) -> Option<Vec<u8>> {
    let options = switchyard_codec::scan::top_level_value(request, "stream_options").ok()?;
    match options {
        None => {
            // Insert the member first: nothing else moves.
            let open = request.iter().position(|b| !b.is_ascii_whitespace())?;
            if request[open] != b'{' {
                return None;
            }
            let rest = &request[open + 1..];
            let empty = rest.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'}');
            let mut out = Vec::with_capacity(request.len() + 40);
            out.extend_from_slice(&request[..=open]);
            out.extend_from_slice(br#""stream_options":{"include_usage":true}"#);
            if !empty {
                out.push(b',');
            }
            out.extend_from_slice(rest);
            Some(out)
        }
        Some(raw) => {
            // Rare: the caller sent other stream options; rewrite that value.
            let mut value: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(raw).ok()?;
            value.insert("include_usage".to_owned(), serde_json::Value::Bool(true));
            let start = raw.as_ptr() as usize - request.as_ptr() as usize;
            let mut out = Vec::with_capacity(request.len() + 24);
            out.extend_from_slice(&request[..start]);
            serde_json::to_writer(&mut out, &value).ok()?;
            out.extend_from_slice(&request[start + raw.len()..]);
            Some(out)
        }
    }
}

/// Drops the chunk OpenAI sends only for usage (`"choices": []` with a
/// `usage`), which a caller that did not ask for it must not see.
pub(crate) fn usage_chunk_filter() -> switchyard_codec::hide::EventFilter {
    switchyard_codec::hide::EventFilter::new(b"\"usage\"", |event| {
        let Some(at) = memchr::memmem::find(event, b"\"choices\"") else { return false };
        let rest = event[at + 9..].trim_ascii_start();
        let Some(rest) = rest.strip_prefix(b":") else { return false };
        let Some(rest) = rest.trim_ascii_start().strip_prefix(b"[") else { return false };
        rest.trim_ascii_start().starts_with(b"]")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_chunk_of_plain_text_takes_the_fast_path() {
        let chunk = |choices: &str, extra: &str| {
            format!(
                r#"{{"id":"c","object":"chat.completion.chunk","created":1,"model":"m"{extra},"choices":{choices}}}"#
            )
        };
        let plain = chunk(r#"[{"index":0,"delta":{"content":"Hi \"you\""},"logprobs":null,"finish_reason":null}]"#, "");
        assert_eq!(
            text_only(plain.as_bytes(), &mut switchyard_codec::scan::Around::default()).as_deref(),
            Some("Hi \"you\"")
        );
        let with_usage = chunk(r#"[{"index":0,"delta":{"content":"x"},"finish_reason":null}]"#, r#","usage":null"#);
        assert_eq!(
            text_only(with_usage.as_bytes(), &mut switchyard_codec::scan::Around::default()).as_deref(),
            Some("x")
        );
        // Read around the bytes seen last: the same head and tail around one string.
        let mut seen = switchyard_codec::scan::Around::default();
        assert!(text_only(plain.as_bytes(), &mut seen).is_some());
        let next = plain.replace(r#"Hi \"you\""#, r#"a\\b \u00e9"#);
        assert_eq!(seen.body(next.as_bytes()), Some(&br#"a\\b \u00e9"#[..]));
        assert_eq!(text_only(next.as_bytes(), &mut seen).as_deref(), Some("a\\b é"));
        // A bare quote between them is not one string: read in full (and here refused).
        let forged = plain.replace(r#"Hi \"you\""#, r#"x"},"finish_reason":"stop","y":{"z":""#);
        assert_eq!(seen.body(forged.as_bytes()), None);
        assert_eq!(text_only(forged.as_bytes(), &mut seen), None);
        let cut = plain.replace(r#"Hi \"you\""#, r#"x\"#);
        assert_eq!(seen.body(cut.as_bytes()), None, "an escape cut at the end");
        // Any text, however it is escaped, reads back as itself.
        for said in ["plain", "é and 🚀", "quote \" slash \\ line\n tab\t", "\u{1}\u{7f}", "</script>", ""] {
            let content = serde_json::to_string(said).unwrap();
            let spaced = format!(
                r#"{{ "id" : "c" , "choices" : [ {{ "index" : 0 , "delta" : {{ "content" : {content} }} }} ] }}"#
            );
            assert_eq!(
                text_only(spaced.as_bytes(), &mut switchyard_codec::scan::Around::default()).as_deref(),
                Some(said),
                "{spaced}"
            );
        }
        for other in [
            chunk(r#"[{"index":0,"delta":{"role":"assistant","content":"x"}}]"#, ""),
            chunk(r#"[{"index":0,"delta":{"content":"x"}}]"#, r#","extra":{"a":1}"#),
            format!("{} trailing", chunk(r#"[{"index":0,"delta":{"content":"x"}}]"#, "")),
            r#"{"choices":[{"index":0,"delta":{"content":"x"#.to_owned(),
            chunk(r#"[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]"#, ""),
            chunk(r#"[{"index":1,"delta":{"content":"x"}}]"#, ""),
            chunk(r#"[{"index":0,"delta":{"content":"x"}},{"index":1,"delta":{"content":"y"}}]"#, ""),
            chunk(r#"[{"index":0,"delta":{"refusal":"no"}}]"#, ""),
            chunk(r#"[{"index":0,"delta":{"content":null}}]"#, ""),
            chunk(r#"[{"index":0,"delta":{"tool_calls":[]}}]"#, ""),
            chunk(r#"[{"index":0,"delta":{"content":"x","reasoning_content":"y"}}]"#, ""),
            chunk(r#"[{"index":0,"delta":{"content":"x"}}]"#, r#","usage":{"prompt_tokens":1}"#),
            chunk(r#"[]"#, ""),
            r#"{"object":"error","message":"x"}"#.to_owned(),
            r#"{"error":{"message":"x"}}"#.to_owned(),
        ] {
            assert_eq!(text_only(other.as_bytes(), &mut switchyard_codec::scan::Around::default()), None, "{other}");
            // Nor after a plain chunk with the same head was read.
            let mut seen = switchyard_codec::scan::Around::default();
            assert!(text_only(plain.as_bytes(), &mut seen).is_some());
            assert_eq!(text_only(other.as_bytes(), &mut seen), None, "{other}");
        }
    }

    #[test]
    fn reasoning_streams_as_reasoning_content_and_signed_blocks_whole_at_their_stop() {
        let events = switchyard_codec::ir::events_from_response(&switchyard_codec::ir::Response {
            content: vec![
                switchyard_codec::ir::Block::Thinking { text: "hmm".into(), signature: Some("EqQB".into()) },
                switchyard_codec::ir::Block::RedactedThinking { data: "EmwK".into() },
                switchyard_codec::ir::Block::text("hi"),
            ],
            stop_reason: Some(StopReason::EndTurn),
            ..switchyard_codec::ir::Response::default()
        });
        let mut encoder = ChunkEncoder::new();
        let mut out = Vec::new();
        for event in &events {
            encoder.encode(event, &mut out);
        }
        let deltas: Vec<serde_json::Value> = std::str::from_utf8(&out)
            .unwrap()
            .split("\n\n")
            .filter_map(|frame| frame.strip_prefix("data: "))
            .filter_map(|data| serde_json::from_str::<serde_json::Value>(data).ok())
            .filter_map(|chunk| chunk["choices"].get(0).map(|choice| choice["delta"].clone()))
            .collect();
        let has = |delta: serde_json::Value| deltas.contains(&delta);
        assert!(has(serde_json::json!({"reasoning_content": "hmm"})), "{deltas:?}");
        assert!(has(
            serde_json::json!({"thinking_blocks": [{"type": "thinking", "thinking": "hmm", "signature": "EqQB"}]})
        ));
        assert!(has(serde_json::json!({"thinking_blocks": [{"type": "redacted_thinking", "data": "EmwK"}]})));
        assert!(has(serde_json::json!({"content": "hi"})));
    }

    proptest::proptest! {
        /// A text delta written by the fast path is byte for byte what the
        /// serialiser writes.
        #[test]
        fn text_deltas_are_written_as_the_serialiser_would(
            id in "\\PC{0,20}", model in "\\PC{0,20}", created in proptest::num::i64::ANY, text in "\\PC{1,40}"
        ) {
            let mut encoder = ChunkEncoder { id, model, created, ..ChunkEncoder::default() };
            let mut fast = Vec::new();
            encoder.write_text("content", &text, &mut fast);
            encoder.write_text("reasoning_content", &text, &mut fast);
            let mut slow = Vec::new();
            encoder.write_delta(OutDelta { content: Some(&text), ..OutDelta::default() }, &mut slow);
            encoder.write_delta(OutDelta { reasoning_content: Some(&text), ..OutDelta::default() }, &mut slow);
            proptest::prop_assert_eq!(String::from_utf8_lossy(&fast), String::from_utf8_lossy(&slow));
        }
    }

    #[test]
    fn usage_is_asked_for_without_moving_other_bytes() {
        let asked = ask_for_usage(br#"{"model":"m","stream":true}"#).unwrap();
        assert_eq!(asked, br#"{"stream_options":{"include_usage":true},"model":"m","stream":true}"#);
        let asked = ask_for_usage(br#" { "stream_options" : {"include_obfuscation":false}, "stream":true}"#).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&asked).unwrap();
        assert_eq!(value["stream_options"], serde_json::json!({"include_obfuscation": false, "include_usage": true}));
        assert_eq!(ask_for_usage(b"{}").unwrap(), br#"{"stream_options":{"include_usage":true}}"#);
        assert!(ask_for_usage(b"[1]").is_none());
    }

    #[test]
    fn the_usage_chunk_is_hidden_however_it_is_spaced() {
        let mut filter = usage_chunk_filter();
        let stream = "data: {\"choices\":[{\"delta\":{\"content\":\"usage\"}}]}\n\n\
                      data: {\"choices\": [ ], \"usage\": {\"prompt_tokens\": 1}}\n\n\
                      data: [DONE]\n\n";
        let out = filter.filter(bytes::Bytes::from(stream));
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "data: {\"choices\":[{\"delta\":{\"content\":\"usage\"}}]}\n\ndata: [DONE]\n\n"
        );
    }
    use switchyard_codec::ir::{ErrorInfo, ErrorKind};
    use switchyard_codec::StreamDecoder;

    fn decode(input: &[u8]) -> Result<Vec<StreamEvent>, DecodeError> {
        let mut decoder = ChunkDecoder::default();
        let mut out = Vec::new();
        decoder.feed(input, &mut out)?;
        decoder.finish(&mut out)?;
        Ok(out)
    }

    #[test]
    fn usage_after_finish_lands_before_stop() {
        let input = concat!(
            "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n",
            "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n",
            "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n",
            "data: [DONE]\n\n",
        );
        let events = decode(input.as_bytes()).unwrap();
        assert_eq!(events.len(), 6);
        assert_eq!(
            events[4],
            StreamEvent::MessageDelta {
                stop_reason: Some(StopReason::MaxTokens),
                stop_sequence: None,
                usage: Usage { input_tokens: 3, output_tokens: 1, ..Usage::default() }
            }
        );
        assert_eq!(events[5], StreamEvent::MessageStop);
    }

    #[test]
    fn missing_done_completes_only_after_a_finish_reason() {
        let cut = "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n";
        let events = decode(cut.as_bytes()).unwrap();
        assert!(!events.contains(&StreamEvent::MessageStop));
        let finished = "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}";
        let events = decode(finished.as_bytes()).unwrap();
        assert_eq!(events.last(), Some(&StreamEvent::MessageStop));
    }

    #[test]
    fn in_stream_errors_end_the_stream() {
        let input = "data: {\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\ndata: [DONE]\n\n";
        let events = decode(input.as_bytes()).unwrap();
        assert_eq!(events.len(), 1);
        assert!(
            matches!(&events[0], StreamEvent::Error(e) if e.kind == ErrorKind::Internal && e.message == "The server had an error")
        );
        assert!(matches!(decode(b"data: {oops\n\n"), Err(DecodeError::Json(_))));
    }

    #[test]
    fn interleaved_tool_calls_are_a_frame_error() {
        let input = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"b\",\"function\":{\"name\":\"g\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"}}]}}]}\n\n",
        );
        assert!(matches!(decode(input.as_bytes()), Err(DecodeError::Frame(_))));
    }

    #[test]
    fn encoder_writes_error_without_done() {
        let mut encoder = ChunkEncoder::new();
        let mut out = Vec::new();
        encoder.encode(&StreamEvent::Error(ErrorInfo::new(ErrorKind::Overloaded, "busy")), &mut out);
        encoder.encode(&StreamEvent::MessageStop, &mut out);
        encoder.finish(&mut out);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "data: {\"error\":{\"message\":\"busy\",\"type\":\"server_error\",\"param\":null,\"code\":\"server_is_overloaded\"}}\n\n"
        );
        let events = decode(text.as_bytes()).unwrap();
        assert!(matches!(&events[0], StreamEvent::Error(e) if e.kind == ErrorKind::Overloaded));
    }

    /// A chunk's `logprobs` (OpenAI's streamed `chat.completion.chunk`
    /// with `logprobs: true`) is an IR `Logprobs` delta after its text,
    /// and written back as a chunk of its own.
    #[test]
    fn streamed_logprobs_decode_and_encode() {
        let chunk = r#"data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"logprobs":{"content":[{"token":"Hi","logprob":-0.5,"bytes":[72,105],"top_logprobs":[]}],"refusal":null},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}

data: [DONE]

"#;
        use switchyard_codec::Codec;
        let events = crate::OpenAiCodec.decode_stream(&[chunk.as_bytes()]).unwrap();
        let tokens: Vec<&switchyard_codec::ir::TokenLogprob> = events
            .iter()
            .filter_map(|event| match event {
                StreamEvent::BlockDelta { delta: Delta::Logprobs(tokens), .. } => Some(tokens),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(tokens.len(), 1);
        assert_eq!((tokens[0].token.as_str(), tokens[0].logprob), ("Hi", -0.5));
        let written = crate::OpenAiCodec.encode_stream(switchyard_codec::Framing::Sse, &events);
        let text = String::from_utf8(written).unwrap();
        assert!(text.contains(r#""logprobs":{"content":[{"token":"Hi","logprob":-0.5,"bytes":[72,105],"top_logprobs":[]}],"refusal":null}"#), "{text}");
    }
}
