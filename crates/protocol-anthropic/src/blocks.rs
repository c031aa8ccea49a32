//! Content blocks (text, image, document, thinking, tool use, tool result)
//! and media sources, read and written the same way in requests and replies.
//! The request block types of the Messages API the IR has no form for
//! ([`CARRIED`]) are read as they came (`Block::Unmodelled`); any other type
//! is refused, as the API refuses it.

use std::collections::HashMap;

use base64::Engine;
use serde_json::{json, Map, Value};
use switchyard_codec::ir::{
    Block, CacheControl, DropReason, Dropped, Field, MediaSource, Protocol, TextBlock, ToolResult, ToolUse, Unmodelled,
};
use switchyard_codec::json::{arguments_to_value, value_to_arguments};
use switchyard_codec::media::parse_data_url;
use switchyard_codec::{call_id, DecodeError};

use crate::wire::{
    as_array, as_object, at, join, opt_bool, opt_str, opt_value, put_cache_control, read_cache_control, req_str,
};

/// The request content-block types of the Messages API (and its betas) the
/// IR does not model: server tools' calls and results, search results,
/// uploads, compaction summaries, tool references, and a system message's
/// mid-conversation tool changes. They reach an Anthropic lane as they
/// came; another lane reports them.
pub(crate) const CARRIED: &[&str] = &[
    "advisor_tool_result",
    "browser_state",
    "fallback",
    "mcp_tool_listing",
    "search_result",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "tool_search_tool_result",
    "container_upload",
    "mcp_tool_use",
    "mcp_tool_result",
    "compaction",
    "tool_reference",
    "tool_addition",
    "tool_removal",
];

/// What to do with a block type the IR cannot hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unknown {
    /// Fail with an error naming the type (requests: sending a conversation
    /// upstream with a block silently missing would change its meaning).
    Reject,
    /// Leave it out (replies: server-tool blocks must not fail a whole reply).
    Skip,
}

/// Tool-use id → tool name, gathered from assistant turns so that tool
/// results can carry the name (Gemini keys results by name).
pub(crate) type ToolNames = HashMap<String, String>;

/// Reads one content block; `Ok(None)` is a skipped unknown block.
pub(crate) fn read_block(
    value: &Value,
    path: &str,
    unknown: Unknown,
    names: &ToolNames,
) -> Result<Option<Block>, DecodeError> {
    let obj = as_object(value, path)?;
    let kind = req_str(obj, "type", path)?;
    let block = match kind {
        "text" => Block::Text(read_text_block(obj, path)?),
        "image" => {
            Block::Image { source: read_source(obj, path, false)?, cache_control: read_cache_control(obj, path)? }
        }
        "document" => Block::Document {
            source: read_source(obj, path, true)?,
            name: opt_str(obj, "title", path)?.map(str::to_owned),
            cache_control: read_cache_control(obj, path)?,
        },
        "thinking" => {
            Block::Thinking { text: req_str(obj, "thinking", path)?.to_owned(), signature: read_signature(obj, path)? }
        }
        "redacted_thinking" => Block::RedactedThinking { data: req_str(obj, "data", path)?.to_owned() },
        "tool_use" => {
            // The id a caller was handed: the lane's, and a call's thought
            // signature riding in it (see `write_block`).
            let (id, signature) = call_id::read(req_str(obj, "id", path)?, Protocol::Anthropic);
            Block::ToolUse(ToolUse {
                id,
                name: req_str(obj, "name", path)?.to_owned(),
                input: read_input(obj),
                signature,
            })
        }
        "tool_result" => Block::ToolResult(read_tool_result(obj, path, names)?),
        carried if unknown == Unknown::Reject && CARRIED.contains(&carried) => Block::Unmodelled(Unmodelled {
            origin: Protocol::Anthropic,
            path: format!("messages.content.{carried}"),
            value: value.clone(),
            beside: false,
        }),
        other => match unknown {
            Unknown::Reject => {
                let param = join(path, "type");
                return Err(DecodeError::invalid(
                    param.clone(),
                    format!("{param} {other} is not a supported content block type"),
                ));
            }
            Unknown::Skip => return Ok(None),
        },
    };
    Ok(Some(block))
}

pub(crate) fn read_text_block(obj: &Map<String, Value>, path: &str) -> Result<TextBlock, DecodeError> {
    let citations = match opt_value(obj, "citations") {
        Some(value) => as_array(value, &join(path, "citations"))?.to_vec(),
        None => Vec::new(),
    };
    Ok(TextBlock {
        text: req_str(obj, "text", path)?.to_owned(),
        cache_control: read_cache_control(obj, path)?,
        citations,
    })
}

/// An empty signature is the same as none: replies written for callers
/// carry `""` where the IR has no signature.
pub(crate) fn read_signature(obj: &Map<String, Value>, path: &str) -> Result<Option<String>, DecodeError> {
    Ok(opt_str(obj, "signature", path)?.filter(|s| !s.is_empty()).map(str::to_owned))
}

/// Tool input is an object on the wire and JSON text in the IR; an absent
/// input is the empty object.
pub(crate) fn read_input(obj: &Map<String, Value>) -> String {
    match opt_value(obj, "input") {
        Some(value) => value_to_arguments(value),
        None => "{}".to_owned(),
    }
}

fn read_tool_result(obj: &Map<String, Value>, path: &str, names: &ToolNames) -> Result<ToolResult, DecodeError> {
    let tool_use_id = call_id::read(req_str(obj, "tool_use_id", path)?, Protocol::Anthropic).0;
    let content_path = join(path, "content");
    let mut content = match opt_value(obj, "content") {
        None => Vec::new(),
        // An empty string carries nothing; it reads as no content.
        Some(Value::String(text)) if text.is_empty() => Vec::new(),
        Some(Value::String(text)) => vec![Block::text(text.clone())],
        Some(value) => {
            let items = as_array(value, &content_path)?;
            let mut blocks = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let item_path = at(&content_path, i);
                if let Some(block) = read_block(item, &item_path, Unknown::Reject, names)? {
                    blocks.push(block);
                }
            }
            blocks
        }
    };
    // The IR has no cache marker on a result; a breakpoint after the result
    // is the same prefix as one after its last part, so it moves there
    // (and moves back on write).
    if let Some(cc) = read_cache_control(obj, path)? {
        if content.is_empty() {
            content.push(Block::text(""));
        }
        if let Some(last) = content.last_mut() {
            set_cache_control(last, Some(cc));
        }
    }
    Ok(ToolResult {
        name: names.get(&tool_use_id).cloned(),
        tool_use_id,
        content,
        is_error: opt_bool(obj, "is_error", path)?.unwrap_or(false),
    })
}

fn cache_control_of(block: &Block) -> Option<&CacheControl> {
    match block {
        Block::Text(t) => t.cache_control.as_ref(),
        Block::Image { cache_control, .. } | Block::Document { cache_control, .. } => cache_control.as_ref(),
        _ => None,
    }
}

fn set_cache_control(block: &mut Block, cc: Option<CacheControl>) {
    match block {
        Block::Text(t) => t.cache_control = cc,
        Block::Image { cache_control, .. } | Block::Document { cache_control, .. } => {
            *cache_control = cc;
        }
        _ => {}
    }
}

/// Reads `source` of an image or document.
fn read_source(obj: &Map<String, Value>, path: &str, document: bool) -> Result<MediaSource, DecodeError> {
    let param = join(path, "source");
    let source =
        opt_value(obj, "source").ok_or_else(|| DecodeError::invalid(param.clone(), format!("{param} is required")))?;
    let source = as_object(source, &param)?;
    let kind = req_str(source, "type", &param)?;
    match kind {
        "base64" => Ok(MediaSource::Base64 {
            media_type: req_str(source, "media_type", &param)?.to_owned(),
            data: req_str(source, "data", &param)?.to_owned(),
        }),
        "url" => Ok(MediaSource::Url { url: req_str(source, "url", &param)?.to_owned(), media_type: None }),
        // A Files API id has no scheme, which is how the writer tells it
        // from a URL again.
        "file" => Ok(MediaSource::Url { url: req_str(source, "file_id", &param)?.to_owned(), media_type: None }),
        // Plain-text documents travel inline; the IR keeps media as base64.
        "text" if document => Ok(MediaSource::Base64 {
            media_type: opt_str(source, "media_type", &param)?.unwrap_or("text/plain").to_owned(),
            data: base64::engine::general_purpose::STANDARD.encode(req_str(source, "data", &param)?),
        }),
        other => {
            let type_param = join(&param, "type");
            Err(DecodeError::invalid(
                type_param.clone(),
                format!("{type_param} {other} is not a supported source type"),
            ))
        }
    }
}

/// Whether a reply or a request is being written: they differ only in how a
/// thinking block without a signature is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Request,
    Response,
}

/// Writes one block, or `None` (with a `dropped` entry) when Anthropic
/// cannot take it. A call's thought signature (a Gemini upstream's) is
/// folded into its id in a reply to the caller, who echoes the id with the
/// call and its result (`switchyard_codec::signature`); Anthropic ids have
/// no length limit, and the fold keeps to their `[a-zA-Z0-9_-]` pattern.
pub(crate) fn write_block(block: &Block, target: Target, dropped: &mut Vec<Dropped>) -> Option<Value> {
    let mut obj = Map::new();
    match block {
        Block::Text(text) => return Some(write_text_block(text)),
        Block::Image { source, cache_control } => {
            obj.insert("type".into(), json!("image"));
            obj.insert("source".into(), write_source(source, false));
            put_cache_control(&mut obj, cache_control.as_ref());
        }
        Block::Document { source, name, cache_control } => {
            obj.insert("type".into(), json!("document"));
            obj.insert("source".into(), write_source(source, true));
            if let Some(name) = name {
                obj.insert("title".into(), json!(name));
            }
            put_cache_control(&mut obj, cache_control.as_ref());
        }
        Block::Thinking { text, signature } => {
            // Anthropic verifies signatures on thinking sent back to it;
            // reasoning from another vendor has none and would be rejected.
            if signature.is_none() && target == Target::Request {
                Dropped::push_once(dropped, Field::Thinking, DropReason::Unsupported);
                return None;
            }
            obj.insert("type".into(), json!("thinking"));
            obj.insert("thinking".into(), json!(text));
            obj.insert("signature".into(), json!(signature.as_deref().unwrap_or("")));
        }
        Block::RedactedThinking { data } => {
            obj.insert("type".into(), json!("redacted_thinking"));
            obj.insert("data".into(), json!(data));
        }
        Block::ToolUse(call) => {
            // A caller gets the id in its own form, the call's signature
            // riding in it; a lane gets its own id back.
            let id = match target {
                Target::Response => call_id::written(&call.id, call.signature.as_deref(), Protocol::Anthropic),
                Target::Request => std::borrow::Cow::Borrowed(call.id.as_str()),
            };
            obj.insert("type".into(), json!("tool_use"));
            obj.insert("id".into(), json!(id));
            obj.insert("name".into(), json!(call.name));
            obj.insert("input".into(), arguments_to_value(&call.input));
        }
        Block::ToolResult(result) => {
            return Some(write_tool_result(result, target, dropped));
        }
        Block::Unmodelled(block) => return block.for_target(Protocol::Anthropic, dropped).cloned(),
    }
    Some(Value::Object(obj))
}

pub(crate) fn write_text_block(text: &TextBlock) -> Value {
    let mut obj = Map::new();
    obj.insert("type".into(), json!("text"));
    obj.insert("text".into(), json!(text.text));
    if !text.citations.is_empty() {
        obj.insert("citations".into(), Value::Array(text.citations.clone()));
    }
    put_cache_control(&mut obj, text.cache_control.as_ref());
    Value::Object(obj)
}

/// True for a text block with nothing but text: such content may be written
/// as a bare string.
pub(crate) fn is_plain_text(block: &Block) -> Option<&str> {
    match block {
        Block::Text(t) if t.cache_control.is_none() && t.citations.is_empty() => Some(&t.text),
        _ => None,
    }
}

fn write_tool_result(result: &ToolResult, target: Target, dropped: &mut Vec<Dropped>) -> Value {
    let mut obj = Map::new();
    obj.insert("type".into(), json!("tool_result"));
    obj.insert("tool_use_id".into(), json!(result.tool_use_id));
    // The last part's cache marker goes back on the result (see read).
    let mut content = result.content.clone();
    let hoisted = content.last().and_then(cache_control_of).cloned();
    if hoisted.is_some() {
        if let Some(last) = content.last_mut() {
            set_cache_control(last, None);
        }
    }
    match content.as_slice() {
        [] => {}
        [only] if is_plain_text(only).is_some_and(str::is_empty) => {}
        [only] if is_plain_text(only).is_some() => {
            obj.insert("content".into(), json!(is_plain_text(only)));
        }
        parts => {
            let mut items = Vec::with_capacity(parts.len());
            for part in parts {
                match part {
                    Block::Text(_) | Block::Image { .. } | Block::Document { .. } | Block::Unmodelled(_) => {
                        items.extend(write_block(part, target, dropped));
                    }
                    _ => Dropped::push_once(dropped, Field::MisplacedBlock, DropReason::Unsupported),
                }
            }
            obj.insert("content".into(), Value::Array(items));
        }
    }
    if result.is_error {
        obj.insert("is_error".into(), json!(true));
    }
    put_cache_control(&mut obj, hoisted.as_ref());
    Value::Object(obj)
}

/// Writes an image or document source. `data:` URLs become inline base64
/// (Anthropic fetches only http(s) URLs), scheme-less ids are Files API ids,
/// and plain-text documents go inline as text.
fn write_source(source: &MediaSource, document: bool) -> Value {
    match source {
        MediaSource::Base64 { media_type, data } => {
            if document && media_type == "text/plain" {
                if let Some(text) = decode_utf8_base64(data) {
                    return json!({"type": "text", "media_type": "text/plain", "data": text});
                }
            }
            json!({"type": "base64", "media_type": media_type, "data": data})
        }
        MediaSource::Url { url, .. } => {
            if let Some((media_type, data)) = parse_data_url(url) {
                if document && media_type == "text/plain" {
                    if let Some(text) = decode_utf8_base64(data) {
                        return json!({"type": "text", "media_type": "text/plain", "data": text});
                    }
                }
                json!({"type": "base64", "media_type": media_type, "data": data})
            } else if url.contains(':') {
                json!({"type": "url", "url": url})
            } else {
                json!({"type": "file", "file_id": url})
            }
        }
    }
}

fn decode_utf8_base64(data: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(data).ok()?;
    String::from_utf8(bytes).ok()
}

/// What Anthropic lets go of a past turn's reasoning
/// (`switchyard_codec::opaque::PastReasoning`): its thinking and redacted
/// thinking blocks.
pub(crate) static PAST_REASONING: switchyard_codec::opaque::PastReasoning =
    switchyard_codec::opaque::PastReasoning { opens_turn, signed_texts, strip: strip_reasoning };

/// A user message that is not only tool results: a turn's first.
fn opens_turn(message: &Value) -> bool {
    if message.get("role").and_then(Value::as_str) != Some("user") {
        return false;
    }
    match message.get("content") {
        Some(Value::Array(blocks)) => {
            blocks.is_empty() || !blocks.iter().all(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        }
        _ => true,
    }
}

/// The texts of an assistant message's signed thinking blocks.
fn signed_texts(message: &Value) -> Vec<&str> {
    let blocks = message.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("thinking"))
        .filter(|b| b.get("signature").and_then(Value::as_str).is_some_and(|s| !s.is_empty()))
        .filter_map(|b| b.get("thinking").and_then(Value::as_str))
        .collect()
}

/// Takes an assistant message's thinking and redacted thinking blocks out;
/// none when nothing else would remain.
fn strip_reasoning(message: &mut Value) -> Vec<String> {
    let Some(blocks) = message.get_mut("content").and_then(Value::as_array_mut) else { return Vec::new() };
    let reasoning = |b: &Value| matches!(b.get("type").and_then(Value::as_str), Some("thinking" | "redacted_thinking"));
    if blocks.iter().all(reasoning) {
        return Vec::new();
    }
    let taken =
        blocks.iter().enumerate().filter(|(_, b)| reasoning(b)).map(|(at, _)| format!("content.{at}")).collect();
    blocks.retain(|b| !reasoning(b));
    taken
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(value: Value) -> Result<Option<Block>, DecodeError> {
        read_block(&value, "b", Unknown::Reject, &ToolNames::new())
    }

    #[test]
    fn data_urls_become_base64_and_file_ids_file_sources() {
        let image = Block::Image {
            source: MediaSource::Url { url: "data:image/png;base64,AAAA".into(), media_type: None },
            cache_control: None,
        };
        let mut dropped = Vec::new();
        let out = write_block(&image, Target::Request, &mut dropped).unwrap();
        assert_eq!(out["source"], json!({"type": "base64", "media_type": "image/png", "data": "AAAA"}));
        let file = Block::Image {
            source: MediaSource::Url { url: "file_011CNha8iCJcU1wXNR6q4V8w".into(), media_type: None },
            cache_control: None,
        };
        let out = write_block(&file, Target::Request, &mut dropped).unwrap();
        assert_eq!(out["source"]["type"], "file");
        assert_eq!(read(out).unwrap(), Some(file));
    }

    #[test]
    fn text_documents_round_trip_through_base64() {
        let doc = json!({"type": "document", "title": "notes",
            "source": {"type": "text", "media_type": "text/plain", "data": "héllo"}});
        let block = read(doc.clone()).unwrap().unwrap();
        let Block::Document { source, .. } = &block else { panic!("not a document") };
        assert_eq!(source.media_type(), Some("text/plain"));
        let mut dropped = Vec::new();
        assert_eq!(write_block(&block, Target::Request, &mut dropped).unwrap(), doc);
    }

    #[test]
    fn tool_result_cache_control_moves_to_last_part_and_back() {
        let wire = json!({"type": "tool_result", "tool_use_id": "t1", "content": "42",
            "is_error": true, "cache_control": {"type": "ephemeral"}});
        let block = read(wire.clone()).unwrap().unwrap();
        let Block::ToolResult(result) = &block else { panic!("not a result") };
        assert!(result.is_error);
        assert!(matches!(&result.content[0], Block::Text(t) if t.cache_control.is_some()));
        let mut dropped = Vec::new();
        assert_eq!(write_block(&block, Target::Request, &mut dropped).unwrap(), wire);
    }

    #[test]
    fn unsigned_thinking_is_dropped_from_requests_only() {
        let block = Block::Thinking { text: "hmm".into(), signature: None };
        let mut dropped = Vec::new();
        assert!(write_block(&block, Target::Request, &mut dropped).is_none());
        assert_eq!(dropped[0].field, Field::Thinking);
        let out = write_block(&block, Target::Response, &mut dropped).unwrap();
        assert_eq!(out["signature"], "");
        assert_eq!(read(out).unwrap(), Some(block));
    }

    #[test]
    fn a_call_signature_rides_in_the_reply_id_and_reads_back_off_it() {
        let mut call = ToolUse::new("call_0", "f", "{}");
        call.signature = Some("CiQB0e2Kb7LlVw==".into());
        let block = Block::ToolUse(call.clone());
        let mut dropped = Vec::new();
        let reply = write_block(&block, Target::Response, &mut dropped).unwrap();
        let id = reply["id"].as_str().unwrap().to_owned();
        // Minted in Anthropic's form (`toolu_`, `c` for the lane's `call_`).
        assert!(id.starts_with("toolu_c0") && id.len() > "toolu_c0".len(), "{id}");
        assert!(id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'), "{id}");
        assert_eq!(read(reply).unwrap(), Some(block));
        let result = read(json!({"type": "tool_result", "tool_use_id": id, "content": "ok"})).unwrap().unwrap();
        assert!(matches!(result, Block::ToolResult(r) if r.tool_use_id == "call_0"));
        // Upstream requests carry the plain id: the signature means nothing there.
        let request = write_block(&Block::ToolUse(call), Target::Request, &mut dropped).unwrap();
        assert_eq!(request["id"], "call_0");
        assert!(dropped.is_empty());
    }

    /// A request block of a type the API has and the IR does not model goes
    /// back to an Anthropic lane as it came and is reported elsewhere; a type
    /// the API does not have is refused, as the API refuses it; a reply
    /// skips both.
    #[test]
    fn unmodelled_blocks_are_carried_unknown_ones_refused() {
        let wire = json!({"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}});
        let Some(Block::Unmodelled(block)) = read(wire.clone()).unwrap() else { panic!("not carried") };
        assert_eq!(block.path, "messages.content.server_tool_use");
        let mut dropped = Vec::new();
        assert_eq!(write_block(&Block::Unmodelled(block.clone()), Target::Request, &mut dropped), Some(wire.clone()));
        assert!(dropped.is_empty());
        assert_eq!(block.for_target(Protocol::OpenAi, &mut dropped), None);
        assert_eq!(dropped, vec![Dropped::unmodelled("messages.content.server_tool_use".into())]);

        let made_up = json!({"type": "hologram", "data": "x"});
        let err = read(made_up.clone()).unwrap_err();
        assert_eq!(err.to_string(), "b.type hologram is not a supported content block type");
        for skipped in [wire, made_up] {
            assert_eq!(read_block(&skipped, "b", Unknown::Skip, &ToolNames::new()).unwrap(), None);
        }
    }
}
