//! `streamGenerateContent`: each chunk is a whole `GenerateContentResponse`
//! holding only the new parts. Two framings carry it: SSE
//! (`data: {...}\r\n\r\n`, with `?alt=sse`) and, without `alt=sse`, one
//! JSON array streamed element by element. The decoder picks the framing
//! from the first non-whitespace byte (`[` is the array).
//!
//! Decoding synthesises the IR block events: consecutive text parts extend
//! one text block, consecutive thought parts one thinking block (a
//! signature closes it, so the next thought opens a new one), a signature
//! on a non-thought part becomes a signature-only thinking block before it
//! (as in `parts`), and each `functionCall` part is a whole tool block
//! (start, one `ToolInput` with its arguments, stop). Empty text parts open
//! nothing.
//!
//! Termination: Gemini has no end event; the chunk with a `finishReason`
//! is the last one that carries content, and usage may still be refined by
//! later chunks. The decoder therefore records the finish reason and emits
//! `BlockStop`, `MessageDelta` (stop reason + the last usage reported) and
//! `MessageStop` when the upstream closes (`finish`). A stream that closes
//! without any finish reason (or prompt block) ends with no synthetic stop.
//! An `{"error": ...}` chunk becomes `StreamEvent::Error` and ends decoding.
//!
//! Encoding writes one chunk per text or thinking delta, one per finished
//! tool block, and a last chunk with the finish reason and the full usage.
//! The first chunk carries the usage known at `MessageStart` so that input
//! tokens arrive early, as Gemini's own chunks do.

use switchyard_codec::frame::{JsonArrayDecoder, SseDecoder};
use switchyard_codec::ir::{BlockStart, Delta, Protocol, StopReason, StreamEvent, Usage};
use switchyard_codec::json::{arguments_to_value, value_to_arguments};
use switchyard_codec::{json, DecodeError, Framing, StreamDecoder, StreamEncoder};

use crate::error::{body as error_body, stream_error_info};
use crate::parts::{reply_call_prefix, CallLedger, SKIP_SIGNATURE};
use crate::response::{
    first_candidate, format_rfc3339, non_empty, parse_rfc3339, stop_from_wire, stop_to_wire, usage_from_wire,
    usage_to_wire,
};
use crate::wire::{Candidate, Content, FunctionCall, GenerateContentResponse, Part};

/// Which framing the upstream chose.
enum Frames {
    /// Nothing but whitespace seen yet.
    Undecided,
    Sse(SseDecoder),
    Array(JsonArrayDecoder),
}

/// Decodes an upstream Gemini stream in either framing.
pub(crate) struct GeminiStreamDecoder {
    frames: Frames,
    state: DecodeState,
}

#[derive(Default)]
struct DecodeState {
    started: bool,
    ledger: CallLedger,
    next_index: u32,
    open: Option<(u32, OpenBlock)>,
    usage: Usage,
    finish: Option<String>,
    blocked: bool,
    saw_call: bool,
    ended: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum OpenBlock {
    Text,
    /// A thinking block; `sealed` once its signature arrived.
    Thinking {
        sealed: bool,
    },
}

impl GeminiStreamDecoder {
    pub(crate) fn new() -> GeminiStreamDecoder {
        GeminiStreamDecoder { frames: Frames::Undecided, state: DecodeState::default() }
    }
}

impl StreamDecoder for GeminiStreamDecoder {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        let mut chunk = chunk;
        if let Frames::Undecided = self.frames {
            let Some(start) = chunk.iter().position(|b| !b.is_ascii_whitespace()) else {
                return Ok(());
            };
            chunk = chunk.get(start..).unwrap_or_default();
            self.frames = if chunk.first() == Some(&b'[') {
                Frames::Array(JsonArrayDecoder::new())
            } else {
                Frames::Sse(SseDecoder::new())
            };
        }
        match &mut self.frames {
            Frames::Undecided => Ok(()),
            Frames::Sse(decoder) => {
                let mut events = Vec::new();
                let framed = decoder.feed(chunk, &mut events);
                // Events completed before a framing error still count.
                for event in events {
                    self.state.data(event.data.trim().as_bytes(), out)?;
                }
                framed
            }
            Frames::Array(decoder) => {
                let mut elements = Vec::new();
                let fed = decoder.feed(chunk, &mut elements);
                // Elements completed before a framing error still count.
                for element in elements {
                    self.state.data(&element, out)?;
                }
                fed
            }
        }
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        match &mut self.frames {
            Frames::Undecided => {}
            Frames::Sse(decoder) => {
                let mut events = Vec::new();
                decoder.finish(&mut events)?;
                for event in events {
                    self.state.data(event.data.trim().as_bytes(), out)?;
                }
            }
            Frames::Array(decoder) => decoder.finish()?,
        }
        self.state.finish(out);
        Ok(())
    }
}

impl DecodeState {
    fn data(&mut self, data: &[u8], out: &mut Vec<StreamEvent>) -> Result<(), DecodeError> {
        if self.ended || data.is_empty() {
            return Ok(());
        }
        let chunk: GenerateContentResponse = json::parse(data)?;
        if let Some(error) = &chunk.error {
            out.push(StreamEvent::Error(stream_error_info(error)));
            self.ended = true;
            return Ok(());
        }
        let usage = chunk.usage_metadata.as_ref().map(usage_from_wire);
        if !self.started {
            self.started = true;
            let id = chunk.response_id.clone().unwrap_or_default();
            self.ledger = CallLedger::new(reply_call_prefix(&id));
            let start_usage = usage.map(|u| u.prompt_side()).unwrap_or_default();
            out.push(StreamEvent::MessageStart {
                id,
                model: chunk.model_version.clone().unwrap_or_default(),
                created: chunk.create_time.as_deref().and_then(parse_rfc3339),
                usage: start_usage,
            });
        }
        if let Some(usage) = &usage {
            self.usage.merge(usage);
        }
        if chunk
            .prompt_feedback
            .as_ref()
            .and_then(|f| f.block_reason.as_deref())
            .is_some_and(|r| !r.is_empty() && r != "BLOCK_REASON_UNSPECIFIED")
        {
            self.blocked = true;
        }
        if let Some(candidate) = first_candidate(chunk.candidates) {
            if let Some(content) = candidate.content {
                for part in content.parts {
                    self.part(part, out);
                }
            }
            let tokens = candidate.logprobs_result.map(crate::wire::LogprobsResult::into_ir).unwrap_or_default();
            if !tokens.is_empty() {
                if !matches!(self.open, Some((_, OpenBlock::Text))) {
                    self.open_block(OpenBlock::Text, out);
                }
                out.push(StreamEvent::BlockDelta { index: self.open_index(), delta: Delta::Logprobs(tokens) });
            }
            if let Some(reason) = candidate.finish_reason.filter(|r| !r.is_empty()) {
                self.finish = Some(reason);
            }
        }
        Ok(())
    }

    fn part(&mut self, part: Part, out: &mut Vec<StreamEvent>) {
        let signature = part.thought_signature.filter(|s| !s.is_empty() && s != SKIP_SIGNATURE);
        if part.thought == Some(true) {
            let continues = matches!(self.open, Some((_, OpenBlock::Thinking { sealed: false })));
            if !continues {
                self.open_block(OpenBlock::Thinking { sealed: false }, out);
            }
            let index = self.open_index();
            if let Some(text) = part.text.filter(|t| !t.is_empty()) {
                out.push(StreamEvent::BlockDelta { index, delta: Delta::Thinking(text) });
            }
            if let Some(signature) = signature {
                out.push(StreamEvent::BlockDelta { index, delta: Delta::Signature(signature) });
                self.open = Some((index, OpenBlock::Thinking { sealed: true }));
            }
            return;
        }
        if let Some(call) = part.function_call {
            self.close_open(out);
            let id = self.ledger.call_id(call.id.as_deref(), &call.name);
            let input = match call.args {
                None | Some(serde_json::Value::Null) => "{}".to_owned(),
                Some(args) => value_to_arguments(&args),
            };
            let index = self.next_index;
            self.next_index += 1;
            // The call's signature is its own (see `parts`).
            let start = BlockStart::ToolUse { id, name: call.name, signature };
            out.push(StreamEvent::BlockStart { index, block: start });
            out.push(StreamEvent::BlockDelta { index, delta: Delta::ToolInput(input) });
            out.push(StreamEvent::BlockStop { index });
            self.saw_call = true;
            return;
        }
        if let Some(signature) = signature {
            self.open_block(OpenBlock::Thinking { sealed: true }, out);
            let index = self.open_index();
            out.push(StreamEvent::BlockDelta { index, delta: Delta::Signature(signature) });
        }
        let text = if let Some(text) = part.text {
            Some(text)
        } else if let Some(code) = part.executable_code {
            let language = code.language.unwrap_or_default().to_ascii_lowercase();
            let language = if language == "language_unspecified" { String::new() } else { language };
            Some(format!("```{language}\n{}\n```", code.code))
        } else {
            part.code_execution_result.and_then(|r| r.output)
        };
        if let Some(text) = text {
            if text.is_empty() {
                return;
            }
            if !matches!(self.open, Some((_, OpenBlock::Text))) {
                self.open_block(OpenBlock::Text, out);
            }
            out.push(StreamEvent::BlockDelta { index: self.open_index(), delta: Delta::Text(text) });
        }
        // Media in a streamed reply has no stream event; it is skipped.
    }

    fn open_index(&self) -> u32 {
        self.open.map(|(index, _)| index).unwrap_or(0)
    }

    fn open_block(&mut self, kind: OpenBlock, out: &mut Vec<StreamEvent>) {
        self.close_open(out);
        let index = self.next_index;
        self.next_index += 1;
        out.push(StreamEvent::BlockStart {
            index,
            block: match kind {
                OpenBlock::Text => BlockStart::Text,
                OpenBlock::Thinking { .. } => BlockStart::Thinking,
            },
        });
        self.open = Some((index, kind));
    }

    fn close_open(&mut self, out: &mut Vec<StreamEvent>) {
        if let Some((index, _)) = self.open.take() {
            out.push(StreamEvent::BlockStop { index });
        }
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        if self.ended || (self.finish.is_none() && !self.blocked) {
            return;
        }
        self.close_open(out);
        let stop_reason = match self.finish.as_deref() {
            Some(reason) => stop_from_wire(reason, self.saw_call),
            None => Some(StopReason::ContentFilter),
        };
        out.push(StreamEvent::MessageDelta { stop_reason, stop_sequence: None, usage: self.usage });
        out.push(StreamEvent::MessageStop);
        self.ended = true;
    }
}

/// Encodes IR events as a Gemini stream in SSE or JSON-array framing.
pub(crate) struct GeminiStreamEncoder {
    array: bool,
    elements: usize,
    closed: bool,
    id: String,
    model: String,
    created: Option<i64>,
    start_usage: Usage,
    open: Option<EncodeBlock>,
    pending_signature: Option<String>,
    final_sent: bool,
    done: bool,
}

enum EncodeBlock {
    Text,
    Thinking {
        wrote_text: bool,
    },
    Tool {
        id: String,
        name: String,
        input: String,
        signature: Option<String>,
    },
    /// Redacted reasoning: Gemini has no form for it.
    Skipped,
}

impl GeminiStreamEncoder {
    /// `EventStream` is not a Gemini framing; SSE stands in for it.
    pub(crate) fn new(framing: Framing) -> GeminiStreamEncoder {
        GeminiStreamEncoder {
            array: framing == Framing::JsonArray,
            elements: 0,
            closed: false,
            id: String::new(),
            model: String::new(),
            created: None,
            start_usage: Usage::default(),
            open: None,
            pending_signature: None,
            final_sent: false,
            done: false,
        }
    }

    fn element(&mut self, json: &[u8], out: &mut Vec<u8>) {
        if self.array {
            out.extend_from_slice(if self.elements == 0 { b"[" } else { b",\r\n" });
            out.extend_from_slice(json);
        } else {
            out.extend_from_slice(b"data: ");
            out.extend_from_slice(json);
            out.extend_from_slice(b"\r\n\r\n");
        }
        self.elements += 1;
    }

    fn chunk(&mut self, parts: Vec<Part>, finish_reason: Option<&str>, usage: Option<Usage>, out: &mut Vec<u8>) {
        self.candidate_chunk(parts, finish_reason, usage, None, out);
    }

    fn candidate_chunk(
        &mut self,
        parts: Vec<Part>,
        finish_reason: Option<&str>,
        usage: Option<Usage>,
        logprobs_result: Option<crate::wire::LogprobsResult>,
        out: &mut Vec<u8>,
    ) {
        let usage = match usage {
            Some(usage) => Some(usage),
            None if self.elements == 0 && self.start_usage != Usage::default() => Some(self.start_usage),
            None => None,
        };
        let content = (!parts.is_empty()).then(|| Content { role: Some("model".to_owned()), parts });
        let wire = GenerateContentResponse {
            candidates: vec![Candidate {
                content,
                finish_reason: finish_reason.map(str::to_owned),
                index: Some(0),
                logprobs_result,
            }],
            usage_metadata: usage.as_ref().map(usage_to_wire),
            model_version: non_empty(&self.model),
            response_id: non_empty(&self.id),
            create_time: self.created.map(format_rfc3339),
            ..GenerateContentResponse::default()
        };
        let json = json::to_vec(&wire);
        self.element(&json, out);
    }

    fn text_part(&mut self, text: String, thought: bool) -> Part {
        Part {
            text: Some(text),
            thought: thought.then_some(true),
            thought_signature: if thought { None } else { self.pending_signature.take() },
            ..Part::default()
        }
    }

    fn signature_part(signature: String) -> Part {
        Part { text: Some(String::new()), thought: Some(true), thought_signature: Some(signature), ..Part::default() }
    }

    /// A signature still waiting for a part goes out on its own.
    fn flush_signature(&mut self, out: &mut Vec<u8>) {
        if let Some(signature) = self.pending_signature.take() {
            self.chunk(vec![Self::signature_part(signature)], None, None, out);
        }
    }

    fn final_chunk(&mut self, stop: Option<StopReason>, usage: Usage, out: &mut Vec<u8>) {
        let parts = self.pending_signature.take().map(Self::signature_part).into_iter().collect();
        let mut total = self.start_usage;
        total.merge(&usage);
        // Without a finish reason Gemini readers never see the end.
        let reason = stop_to_wire(stop.unwrap_or(StopReason::EndTurn));
        self.chunk(parts, Some(reason), Some(total), out);
        self.final_sent = true;
    }
}

impl StreamEncoder for GeminiStreamEncoder {
    fn encode(&mut self, event: &StreamEvent, out: &mut Vec<u8>) {
        if self.done {
            return;
        }
        match event {
            StreamEvent::MessageStart { id, model, created, usage } => {
                self.id.clone_from(id);
                self.model.clone_from(model);
                self.created = *created;
                self.start_usage = *usage;
            }
            StreamEvent::BlockStart { block, .. } => {
                self.open = Some(match block {
                    BlockStart::Text => EncodeBlock::Text,
                    BlockStart::Thinking => EncodeBlock::Thinking { wrote_text: false },
                    BlockStart::ToolUse { id, name, signature } => EncodeBlock::Tool {
                        id: id.clone(),
                        name: name.clone(),
                        input: String::new(),
                        signature: signature.clone(),
                    },
                    BlockStart::RedactedThinking { .. } => EncodeBlock::Skipped,
                });
            }
            StreamEvent::BlockDelta { delta, .. } => match delta {
                Delta::Text(text) => {
                    if !text.is_empty() {
                        let part = self.text_part(text.clone(), false);
                        self.chunk(vec![part], None, None, out);
                    }
                }
                Delta::Thinking(text) => {
                    if !text.is_empty() {
                        self.flush_signature(out);
                        let part = self.text_part(text.clone(), true);
                        self.chunk(vec![part], None, None, out);
                        if let Some(EncodeBlock::Thinking { wrote_text }) = &mut self.open {
                            *wrote_text = true;
                        }
                    }
                }
                Delta::Signature(signature) => {
                    if matches!(self.open, Some(EncodeBlock::Thinking { wrote_text: true })) {
                        self.chunk(vec![Self::signature_part(signature.clone())], None, None, out);
                    } else {
                        // A signature-only block rides on the next part.
                        self.flush_signature(out);
                        self.pending_signature = Some(signature.clone());
                    }
                }
                Delta::ToolInput(more) => {
                    if let Some(EncodeBlock::Tool { input, .. }) = &mut self.open {
                        input.push_str(more);
                    }
                }
                Delta::Logprobs(tokens) => {
                    if let Some(result) = crate::wire::LogprobsResult::of(tokens) {
                        self.candidate_chunk(Vec::new(), None, None, Some(result), out);
                    }
                }
            },
            StreamEvent::BlockStop { .. } => {
                if let Some(EncodeBlock::Tool { id, name, input, signature }) = self.open.take() {
                    let pending = self.pending_signature.take();
                    let part = Part {
                        function_call: Some(FunctionCall {
                            id: Some(switchyard_codec::call_id::mint(&id, Protocol::Gemini).into_owned()),
                            name,
                            args: Some(arguments_to_value(&input)),
                        }),
                        thought_signature: signature.or(pending),
                        ..Part::default()
                    };
                    self.chunk(vec![part], None, None, out);
                }
            }
            StreamEvent::MessageDelta { stop_reason, usage, .. } => {
                if !self.final_sent {
                    self.final_chunk(*stop_reason, *usage, out);
                }
            }
            StreamEvent::MessageStop => {
                if !self.final_sent {
                    self.final_chunk(None, Usage::default(), out);
                }
                self.done = true;
            }
            StreamEvent::Error(error) => {
                let json = json::to_vec(&error_body(error));
                self.element(&json, out);
                self.done = true;
            }
        }
    }

    fn finish(&mut self, out: &mut Vec<u8>) {
        if self.array && !self.closed {
            if self.elements == 0 {
                out.push(b'[');
            }
            out.push(b']');
        }
        self.closed = true;
        self.done = true;
    }
}
