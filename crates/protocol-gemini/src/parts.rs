//! Conversion between Gemini parts and IR blocks, shared by requests and
//! responses: thought signatures, tool-call id synthesis and result
//! matching, media, and function-response payloads.
//!
//! Thought signatures. Gemini attaches an opaque `thoughtSignature` to any
//! part (a thought, a text, a function call). A function call's signature
//! is the call's own (`ToolUse::signature`): callers of other protocols
//! carry it back (`switchyard_codec::signature`), and Gemini refuses a later
//! turn whose first call has none. A thought part is a `Thinking` block with
//! its own signature. A signature on another part (text, media) is read as a
//! `Thinking { text: "", signature }` block placed right before the part's
//! own block; the writer folds such a signature-only thinking block back
//! onto the next part it writes (or, with nothing after it, writes it as an
//! empty thought part).
//!
//! Tool-call ids. Gemini usually omits `functionCall.id`. The reader uses
//! the id when present and otherwise synthesises `<prefix><n>`, `n` being
//! the call's ordinal (in the conversation for requests, in the reply for
//! responses). A `functionResponse` without an id answers the earliest
//! unanswered call of the same name before it (then the latest call of
//! that name, then, with no call at all, its own name is used as the id).

use serde_json::{Map, Value};
use switchyard_codec::ir::{
    Block, DropReason, Dropped, Field, MediaSource, Protocol, TextBlock, ToolResult, ToolUse, Unmodelled,
};
use switchyard_codec::json::{arguments_to_value, value_to_arguments};
use switchyard_codec::media::parse_data_url;
use switchyard_codec::{call_id, DecodeError};

use crate::wire::{Blob, FileData, FunctionCall, FunctionResponse, FunctionResponsePart, Part};

pub(crate) use crate::wire::SKIP_SIGNATURE;

/// Tool calls seen so far, for id synthesis and result matching.
#[derive(Debug, Default)]
pub(crate) struct CallLedger {
    prefix: String,
    calls: Vec<Call>,
}

#[derive(Debug)]
struct Call {
    id: String,
    name: String,
    answered: bool,
}

impl CallLedger {
    /// A ledger whose synthesised ids read `<prefix><ordinal>`.
    pub(crate) fn new(prefix: impl Into<String>) -> CallLedger {
        CallLedger { prefix: prefix.into(), calls: Vec::new() }
    }

    /// The id of a new call: the wire id, or a synthesised one.
    pub(crate) fn call_id(&mut self, given: Option<&str>, name: &str) -> String {
        let id = match given {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ => format!("{}{}", self.prefix, self.calls.len()),
        };
        self.calls.push(Call { id: id.clone(), name: name.to_owned(), answered: false });
        id
    }

    /// The id of the call a result answers.
    pub(crate) fn result_id(&mut self, given: Option<&str>, name: &str) -> String {
        if let Some(id) = given.filter(|id| !id.is_empty()) {
            if let Some(call) = self.calls.iter_mut().rev().find(|c| c.id == id) {
                call.answered = true;
            }
            return id.to_owned();
        }
        if let Some(call) = self.calls.iter_mut().find(|c| !c.answered && c.name == name) {
            call.answered = true;
            return call.id.clone();
        }
        match self.calls.iter().rev().find(|c| c.name == name) {
            Some(call) => call.id.clone(),
            None => name.to_owned(),
        }
    }
}

/// Keeps only the characters an id may carry everywhere (Anthropic's
/// `^[a-zA-Z0-9_-]+$`), so a response id can seed tool-call ids.
pub(crate) fn id_safe(text: &str) -> String {
    text.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-').collect()
}

/// The id prefix for calls synthesised in a reply: unique per reply when
/// the reply has an id, so ids do not repeat across a conversation.
pub(crate) fn reply_call_prefix(response_id: &str) -> String {
    let safe = id_safe(response_id);
    if safe.is_empty() {
        "call_".to_owned()
    } else {
        format!("call_{safe}_")
    }
}

/// How strictly to read parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PartMode {
    /// A caller's request: a part with no payload we know is an error.
    Request,
    /// An upstream reply: unknown parts (future features) are skipped.
    Response,
}

/// The part members the IR models (both spellings the REST API takes).
const MODELLED_MEMBERS: [&str; 16] = [
    "text",
    "thought",
    "thoughtSignature",
    "thought_signature",
    "inlineData",
    "inline_data",
    "fileData",
    "file_data",
    "functionCall",
    "function_call",
    "functionResponse",
    "function_response",
    "executableCode",
    "executable_code",
    "codeExecutionResult",
    "code_execution_result",
];

/// Takes out of a request's raw `contents` every part member the IR does
/// not model, to be put on the typed parts (`Part::kept`) once read: the
/// typed reader would skip them in silence.
pub(crate) fn take_unmodelled(contents: &mut Value) -> Vec<Vec<Map<String, Value>>> {
    let Some(contents) = contents.as_array_mut() else { return Vec::new() };
    contents
        .iter_mut()
        .map(|content| {
            let Some(parts) = content.get_mut("parts").and_then(Value::as_array_mut) else { return Vec::new() };
            parts
                .iter_mut()
                .map(|part| {
                    let Some(part) = part.as_object_mut() else { return Map::new() };
                    let unmodelled: Vec<String> =
                        part.keys().filter(|key| !MODELLED_MEMBERS.contains(&key.as_str())).cloned().collect();
                    unmodelled.into_iter().filter_map(|key| part.remove_entry(&key)).collect()
                })
                .collect()
        })
        .collect()
}

/// True when a part holds data the IR models (it stands as a part).
fn has_data(part: &Part) -> bool {
    part.text.is_some()
        || part.thought == Some(true)
        || part.inline_data.is_some()
        || part.file_data.is_some()
        || part.function_call.is_some()
        || part.function_response.is_some()
        || part.executable_code.is_some()
        || part.code_execution_result.is_some()
}

/// A part's unmodelled members as blocks: the part itself when it holds
/// nothing else (a `toolCall` part), else one block per member to go back
/// onto the part before it. Each reports at `contents.parts.<member>`.
fn unmodelled_blocks(kept: Map<String, Value>, alone: bool) -> Vec<Block> {
    let unmodelled = |key: &str, value: Value, beside: bool| {
        Block::Unmodelled(Unmodelled { origin: Protocol::Gemini, path: format!("contents.parts.{key}"), value, beside })
    };
    if alone {
        let key = kept.keys().next().cloned().unwrap_or_default();
        return vec![unmodelled(&key, Value::Object(kept), false)];
    }
    kept.into_iter()
        .map(|(key, value)| {
            let mut beside = Map::new();
            beside.insert(key.clone(), value);
            unmodelled(&key, Value::Object(beside), true)
        })
        .collect()
}

/// An `Unmodelled` block written back among `parts`: onto the part before
/// it when it was read beside that part's data, else as a part of its own.
fn write_unmodelled(block: &Unmodelled, value: &Value, parts: &mut Vec<Part>) {
    match (block.beside, parts.last_mut(), value) {
        (true, Some(last), _) => Unmodelled::merge_into(value, &mut last.kept),
        (true, None, _) => {}
        (false, _, Value::Object(part)) => parts.push(Part { kept: part.clone(), ..Part::default() }),
        (false, _, _) => {}
    }
}

/// Reads one content's parts into blocks. `at` names the content for errors.
pub(crate) fn parts_to_blocks(
    parts: Vec<Part>,
    ledger: &mut CallLedger,
    mode: PartMode,
    at: &str,
) -> Result<Vec<Block>, DecodeError> {
    let mut blocks = Vec::with_capacity(parts.len());
    for (position, mut part) in parts.into_iter().enumerate() {
        let kept = std::mem::take(&mut part.kept);
        if !kept.is_empty() {
            let alone = !has_data(&part) && part.thought_signature.is_none();
            if alone {
                blocks.extend(unmodelled_blocks(kept, true));
                continue;
            }
            let start = blocks.len();
            part_blocks(part, position, ledger, mode, at, &mut blocks)?;
            // Beside the part's data: they follow its blocks (a part that
            // gave none, an empty text, keeps them as a part of their own).
            blocks.extend(unmodelled_blocks(kept, blocks.len() == start));
            continue;
        }
        part_blocks(part, position, ledger, mode, at, &mut blocks)?;
    }
    Ok(blocks)
}

/// One part's blocks, pushed onto `blocks`.
fn part_blocks(
    part: Part,
    position: usize,
    ledger: &mut CallLedger,
    mode: PartMode,
    at: &str,
    blocks: &mut Vec<Block>,
) -> Result<(), DecodeError> {
    let signature = part.thought_signature.filter(|s| !s.is_empty() && s != SKIP_SIGNATURE);
    if part.thought == Some(true) {
        blocks.push(Block::Thinking { text: part.text.unwrap_or_default(), signature });
        return Ok(());
    }
    let had_signature = signature.is_some();
    let field = format!("{at}.parts[{position}]");
    if let Some(call) = part.function_call {
        let mut call = read_call(call, ledger, &field)?;
        call.signature = signature;
        blocks.push(Block::ToolUse(call));
        return Ok(());
    }
    if let Some(signature) = signature {
        blocks.push(Block::Thinking { text: String::new(), signature: Some(signature) });
    }
    if let Some(text) = part.text {
        // Empty text parts carry nothing (Gemini ends streams with one
        // that only holds a signature); they are not kept as blocks.
        if !text.is_empty() {
            blocks.push(Block::text(text));
        }
    } else if let Some(blob) = part.inline_data {
        blocks.push(media_block(inline_source(blob, &field)?));
    } else if let Some(file) = part.file_data {
        blocks.push(media_block(file_source(file, &field)?));
    } else if let Some(response) = part.function_response {
        blocks.push(Block::ToolResult(read_function_response(response, ledger, &field)?));
    } else if let Some(code) = part.executable_code {
        // Code-execution output has no IR block; as text it stays
        // readable for the caller and for a later turn.
        let language = code.language.unwrap_or_default().to_ascii_lowercase();
        let language = if language == "language_unspecified" { String::new() } else { language };
        blocks.push(Block::text(format!("```{language}\n{}\n```", code.code)));
    } else if let Some(result) = part.code_execution_result {
        if let Some(output) = result.output.filter(|o| !o.is_empty()) {
            blocks.push(Block::text(output));
        }
    } else if mode == PartMode::Request && !had_signature {
        return Err(DecodeError::invalid(
            field,
            "a part must hold text, inlineData, fileData, functionCall or functionResponse",
        ));
    }
    Ok(())
}

fn inline_source(blob: Blob, field: &str) -> Result<MediaSource, DecodeError> {
    if blob.mime_type.is_empty() {
        return Err(DecodeError::invalid(format!("{field}.inlineData.mimeType"), "inlineData needs a mimeType"));
    }
    Ok(MediaSource::Base64 { media_type: blob.mime_type, data: blob.data })
}

fn file_source(file: FileData, field: &str) -> Result<MediaSource, DecodeError> {
    if file.file_uri.is_empty() {
        return Err(DecodeError::invalid(format!("{field}.fileData.fileUri"), "fileData needs a fileUri"));
    }
    Ok(MediaSource::Url { url: file.file_uri, media_type: file.mime_type.filter(|m| !m.is_empty()) })
}

/// Images stay images; any other MIME type (PDF, text, audio, video) is a
/// document, the IR's generic file block. A URI without a MIME type is
/// taken for an image, the common case for URLs from other protocols.
fn media_block(source: MediaSource) -> Block {
    let is_image = source.media_type().is_none_or(|m| m.to_ascii_lowercase().starts_with("image/"));
    if is_image {
        Block::Image { source, cache_control: None }
    } else {
        Block::Document { source, name: None, cache_control: None }
    }
}

fn read_call(call: FunctionCall, ledger: &mut CallLedger, field: &str) -> Result<ToolUse, DecodeError> {
    if call.name.is_empty() {
        return Err(DecodeError::invalid(format!("{field}.functionCall.name"), "functionCall needs a name"));
    }
    // An id the caller was handed reads back as the lane's.
    let given = call.id.as_deref().map(|id| call_id::restore(id, Protocol::Gemini));
    let id = ledger.call_id(given.as_deref(), &call.name);
    let input = match call.args {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(args) => value_to_arguments(&args),
    };
    Ok(ToolUse { id, name: call.name, input, signature: None })
}

/// `response` conventions (Gemini's FunctionResponse docs): an `output`
/// key holds the result, an `error` key a failure; any other object is the
/// result itself.
fn read_function_response(
    response: FunctionResponse,
    ledger: &mut CallLedger,
    field: &str,
) -> Result<ToolResult, DecodeError> {
    if response.name.is_empty() {
        return Err(DecodeError::invalid(format!("{field}.functionResponse.name"), "functionResponse needs a name"));
    }
    let given = response.id.as_deref().map(|id| call_id::restore(id, Protocol::Gemini));
    let tool_use_id = ledger.result_id(given.as_deref(), &response.name);
    let (text, is_error) = match response.response {
        None | Some(Value::Null) => (String::new(), false),
        Some(Value::Object(object)) => response_object_text(object),
        Some(other) => (value_to_arguments(&other), false),
    };
    let mut content = Vec::new();
    if !text.is_empty() {
        content.push(Block::text(text));
    }
    for (position, part) in response.parts.into_iter().enumerate() {
        let at = format!("{field}.functionResponse.parts[{position}]");
        if let Some(blob) = part.inline_data {
            content.push(media_block(inline_source(blob, &at)?));
        } else if let Some(file) = part.file_data {
            content.push(media_block(file_source(file, &at)?));
        }
    }
    Ok(ToolResult { tool_use_id, name: Some(response.name), content, is_error })
}

fn response_object_text(object: Map<String, Value>) -> (String, bool) {
    if object.len() == 1 {
        if let Some((key, value)) = object.iter().next() {
            let is_error = key == "error";
            if is_error || key == "output" || key == "content" {
                let text = match value {
                    Value::String(s) => s.clone(),
                    other => value_to_arguments(other),
                };
                return (text, is_error);
            }
        }
    }
    (value_to_arguments(&Value::Object(object)), false)
}

/// The `response` object a tool result is written as: a JSON-object result
/// travels as itself, any other text as `{"output": text}`, and a failure
/// as `{"error": ...}`.
pub(crate) fn result_response(result: &ToolResult) -> Value {
    let text = result.joined_text();
    let parsed = match serde_json::from_str::<Value>(&text) {
        Ok(value @ Value::Object(_)) => Some(value),
        _ => None,
    };
    let key = if result.is_error { "error" } else { "output" };
    match parsed {
        Some(object) if !result.is_error => object,
        Some(object) => single(key, object),
        None => single(key, Value::String(text)),
    }
}

fn single(key: &str, value: Value) -> Value {
    let mut map = Map::new();
    map.insert(key.to_owned(), value);
    Value::Object(map)
}

/// Records a dropped field once per message written.
pub(crate) fn drop_once(dropped: &mut Vec<Dropped>, field: Field) {
    Dropped::push_once(dropped, field, DropReason::Unsupported);
}

/// How to write blocks.
pub(crate) struct WriteParts<'a> {
    /// Write `functionCall.id` (responses), in a caller's form
    /// (`call_id::mint`). The generateContent request schema has no such
    /// field and rejects it, so requests never do.
    pub call_ids: bool,
    /// Where unexpressible fields are reported.
    pub dropped: &'a mut Vec<Dropped>,
    /// Calls written so far (id, name), for naming tool results.
    pub calls: &'a mut Vec<(String, String)>,
}

/// Writes blocks as parts. See the module docs for how signatures fold.
pub(crate) fn blocks_to_parts(blocks: &[Block], ctx: &mut WriteParts<'_>) -> Vec<Part> {
    let mut parts = Vec::with_capacity(blocks.len());
    let mut pending: Option<String> = None;
    for block in blocks {
        match block {
            Block::Text(text) => {
                note_text_markers(text, ctx.dropped);
                if text.text.is_empty() {
                    continue;
                }
                parts.push(Part {
                    text: Some(text.text.clone()),
                    thought_signature: pending.take(),
                    ..Part::default()
                });
            }
            Block::Image { source, cache_control } => {
                if cache_control.is_some() {
                    drop_once(ctx.dropped, Field::CacheControl);
                }
                let mut part = media_part(source);
                part.thought_signature = pending.take();
                parts.push(part);
            }
            Block::Document { source, name, cache_control } => {
                if cache_control.is_some() {
                    drop_once(ctx.dropped, Field::CacheControl);
                }
                if name.is_some() {
                    drop_once(ctx.dropped, Field::DocumentName);
                }
                let mut part = media_part(source);
                part.thought_signature = pending.take();
                parts.push(part);
            }
            Block::Thinking { text, signature } => {
                if let Some(earlier) = pending.take() {
                    parts.push(signature_part(earlier));
                }
                if text.is_empty() && signature.is_some() {
                    pending.clone_from(signature);
                    continue;
                }
                parts.push(Part {
                    text: Some(text.clone()),
                    thought: Some(true),
                    thought_signature: signature.clone(),
                    ..Part::default()
                });
            }
            Block::RedactedThinking { .. } => drop_once(ctx.dropped, Field::RedactedThinking),
            Block::Unmodelled(block) => {
                if let Some(value) = block.for_target(switchyard_codec::ir::Protocol::Gemini, ctx.dropped) {
                    write_unmodelled(block, value, &mut parts);
                }
            }
            Block::ToolUse(call) => {
                ctx.calls.push((call.id.clone(), call.name.clone()));
                parts.push(Part {
                    function_call: Some(FunctionCall {
                        id: ctx.call_ids.then(|| call_id::mint(&call.id, Protocol::Gemini).into_owned()),
                        name: call.name.clone(),
                        args: Some(arguments_to_value(&call.input)),
                    }),
                    // The call's own signature; one that came before it as a
                    // signature-only thinking block belongs to it too.
                    thought_signature: call.signature.clone().or(pending.take()),
                    ..Part::default()
                });
                pending = None;
            }
            Block::ToolResult(result) => {
                let name = result.name.clone().unwrap_or_else(|| {
                    ctx.calls
                        .iter()
                        .rev()
                        .find(|(id, _)| *id == result.tool_use_id)
                        .map(|(_, name)| name.clone())
                        // With no call to name it, the id is the best guess
                        // (readers of name-keyed protocols use names as ids).
                        .unwrap_or_else(|| result.tool_use_id.clone())
                });
                let mut media = Vec::new();
                for block in &result.content {
                    match block {
                        Block::Text(text) => note_text_markers(text, ctx.dropped),
                        Block::Image { source, .. } | Block::Document { source, .. } => {
                            let part = media_part(source);
                            media.push(FunctionResponsePart {
                                inline_data: part.inline_data,
                                file_data: part.file_data,
                            });
                        }
                        Block::Unmodelled(block) => {
                            block.for_target(switchyard_codec::ir::Protocol::Gemini, ctx.dropped);
                        }
                        _ => drop_once(ctx.dropped, Field::MisplacedBlock),
                    }
                }
                parts.push(Part {
                    function_response: Some(FunctionResponse {
                        id: ctx.call_ids.then(|| call_id::mint(&result.tool_use_id, Protocol::Gemini).into_owned()),
                        name,
                        response: Some(result_response(result)),
                        parts: media,
                    }),
                    thought_signature: pending.take(),
                    ..Part::default()
                });
            }
        }
    }
    if let Some(signature) = pending {
        parts.push(signature_part(signature));
    }
    parts
}

fn note_text_markers(text: &TextBlock, dropped: &mut Vec<Dropped>) {
    if text.cache_control.is_some() {
        drop_once(dropped, Field::CacheControl);
    }
    if !text.citations.is_empty() {
        drop_once(dropped, Field::Citations);
    }
}

/// A signature with no part to ride on: an empty thought part.
fn signature_part(signature: String) -> Part {
    Part { text: Some(String::new()), thought: Some(true), thought_signature: Some(signature), ..Part::default() }
}

/// Base64 becomes `inlineData`; a `data:` URL too (Gemini fetches no data
/// URLs); any other URL becomes `fileData`.
fn media_part(source: &MediaSource) -> Part {
    match source {
        MediaSource::Base64 { media_type, data } => {
            Part { inline_data: Some(Blob { mime_type: media_type.clone(), data: data.clone() }), ..Part::default() }
        }
        MediaSource::Url { url, media_type } => match parse_data_url(url) {
            Some((mime, data)) => Part {
                inline_data: Some(Blob { mime_type: mime.to_owned(), data: data.to_owned() }),
                ..Part::default()
            },
            None => Part {
                file_data: Some(FileData { mime_type: media_type.clone(), file_uri: url.clone() }),
                ..Part::default()
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unanswered_calls_match_in_order_then_latest() {
        let mut ledger = CallLedger::new("call_");
        let a = ledger.call_id(None, "f");
        let b = ledger.call_id(None, "f");
        let c = ledger.call_id(Some("given"), "g");
        assert_eq!((a.as_str(), b.as_str(), c.as_str()), ("call_0", "call_1", "given"));
        assert_eq!(ledger.result_id(None, "f"), "call_0");
        assert_eq!(ledger.result_id(None, "f"), "call_1");
        assert_eq!(ledger.result_id(None, "f"), "call_1");
        assert_eq!(ledger.result_id(None, "nobody"), "nobody");
        assert_eq!(ledger.result_id(Some("x"), "g"), "x");
    }

    #[test]
    fn response_objects_follow_output_and_error_keys() {
        let ok =
            ToolResult { tool_use_id: "t".into(), name: None, content: vec![Block::text("sunny")], is_error: false };
        assert_eq!(result_response(&ok), serde_json::json!({"output": "sunny"}));
        let json = ToolResult { content: vec![Block::text(r#"{"temp":21}"#)], ..ok.clone() };
        assert_eq!(result_response(&json), serde_json::json!({"temp": 21}));
        let failed = ToolResult { is_error: true, ..ok };
        assert_eq!(result_response(&failed), serde_json::json!({"error": "sunny"}));
    }

    #[test]
    fn data_urls_become_inline_data() {
        let part = media_part(&MediaSource::Url { url: "data:image/png;base64,AAAA".into(), media_type: None });
        assert_eq!(part.inline_data, Some(Blob { mime_type: "image/png".into(), data: "AAAA".into() }));
    }

    #[test]
    fn a_call_signature_stays_on_its_call_and_the_placeholder_is_not_surfaced() {
        let parts = vec![
            Part {
                function_call: Some(FunctionCall { id: None, name: "f".into(), args: None }),
                thought_signature: Some("sig".into()),
                ..Part::default()
            },
            Part { text: Some(String::new()), thought_signature: Some(SKIP_SIGNATURE.into()), ..Part::default() },
        ];
        let mut ledger = CallLedger::new("call_");
        let blocks = parts_to_blocks(parts, &mut ledger, PartMode::Request, "contents[0]").unwrap_or_default();
        let mut call = ToolUse::new("call_0", "f", "{}");
        call.signature = Some("sig".into());
        assert_eq!(blocks, vec![Block::ToolUse(call)]);
    }

    #[test]
    fn a_signature_on_a_text_part_becomes_a_thinking_block_and_folds_back() {
        let parts = vec![Part { text: Some("hi".into()), thought_signature: Some("sig".into()), ..Part::default() }];
        let mut ledger = CallLedger::new("call_");
        let blocks = parts_to_blocks(parts.clone(), &mut ledger, PartMode::Request, "c").unwrap_or_default();
        assert_eq!(
            blocks,
            vec![Block::Thinking { text: String::new(), signature: Some("sig".into()) }, Block::text("hi")]
        );
        let mut dropped = Vec::new();
        let mut calls = Vec::new();
        let written =
            blocks_to_parts(&blocks, &mut WriteParts { call_ids: false, dropped: &mut dropped, calls: &mut calls });
        assert_eq!(written, parts);
    }
}
