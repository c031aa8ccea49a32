//! Converse `ContentBlock` unions ↔ IR blocks, shared by requests and
//! responses. A `cachePoint` block marks the block before it, which is how
//! the IR's `cache_control` travels on Bedrock.

use base64::Engine as _;
use serde_json::{json, Value};
use switchyard_codec::ir::{
    Block, CacheControl, DropReason, Dropped, Field, MediaSource, Protocol, TextBlock, ToolResult, ToolUse, Unmodelled,
};
use switchyard_codec::json::{arguments_to_value, value_to_arguments};
use switchyard_codec::media::parse_data_url;
use switchyard_codec::{call_id, signature, DecodeError};

use crate::wire::{
    array, audio_format, audio_media_type, document_format, document_media_type, drop_field, field, image_format,
    image_media_type, object, opt_str, req, req_str, string, Object,
};

/// Which message blocks belong to. Read: a caller's request is held to the
/// protocol (an unsupported block is an error), an upstream reply is read
/// leniently (a block type added after this codec was written is skipped).
/// Written: a reply to the caller carries each call's thought signature in
/// a `reasoningContent` block right before the call (`toolUseId` is at most
/// 64 characters, too short for one; see `switchyard_codec::signature`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Request,
    Response,
}

/// Reads a `content` array.
pub(crate) fn read_blocks(items: &[Value], path: &str, mode: Mode) -> Result<Vec<Block>, DecodeError> {
    let mut blocks = Vec::with_capacity(items.len());
    for (position, item) in items.iter().enumerate() {
        let path = format!("{path}[{position}]");
        let block = object(item, &path)?;
        if let Some(point) = field(block, "cachePoint") {
            let cache = read_cache_point(point, &format!("{path}.cachePoint"))?;
            if !attach_cache(&mut blocks, cache) {
                // After a block the IR gives no marker (reasoning, a tool
                // call, audio): a Bedrock lane gets the point back where it
                // stood, another reports it.
                blocks.push(Block::Unmodelled(Unmodelled {
                    origin: Protocol::Bedrock,
                    path: "messages.content.cachePoint".to_owned(),
                    value: item.clone(),
                    beside: false,
                }));
            }
            continue;
        }
        if let Some(block) = read_block(block, &path, mode)? {
            blocks.push(block);
        }
    }
    signature::attach_carried(&mut blocks);
    Ok(blocks)
}

/// Reads a `cachePoint` body (`type` is always `default`; `ttl` is optional).
pub(crate) fn read_cache_point(value: &Value, path: &str) -> Result<CacheControl, DecodeError> {
    let point = object(value, path)?;
    Ok(CacheControl { ttl: opt_str(point, "ttl", path)?.map(str::to_owned) })
}

/// The wire `cachePoint` block for a marker.
pub(crate) fn cache_point(cache: &CacheControl) -> Value {
    let mut point = Object::new();
    point.insert("type".into(), "default".into());
    if let Some(ttl) = &cache.ttl {
        point.insert("ttl".into(), ttl.clone().into());
    }
    json!({ "cachePoint": point })
}

/// Puts a cache marker on the block it follows. A tool result carries it on
/// its last content block, the only place the IR has for it. False when
/// that block has no marker in the IR (reasoning, a tool call, audio) or
/// nothing precedes the point.
fn attach_cache(blocks: &mut [Block], cache: CacheControl) -> bool {
    let Some(mut target) = blocks.last_mut() else {
        return false;
    };
    if let Block::ToolResult(result) = target {
        match result.content.last_mut() {
            Some(last) => target = last,
            None => return false,
        }
    }
    match target {
        Block::Text(text) => text.cache_control = Some(cache),
        Block::Image { cache_control, .. } | Block::Document { cache_control, .. } => {
            *cache_control = Some(cache);
        }
        _ => return false,
    }
    true
}

fn read_block(block: &Object, path: &str, mode: Mode) -> Result<Option<Block>, DecodeError> {
    if let Some(text) = field(block, "text") {
        return Ok(Some(Block::text(string(text, &format!("{path}.text"))?)));
    }
    if let Some(value) = field(block, "json") {
        // Tool results may be JSON; the IR carries them as JSON text.
        return Ok(Some(Block::text(value_to_arguments(value))));
    }
    if let Some(image) = field(block, "image") {
        return read_image(image, &format!("{path}.image")).map(Some);
    }
    if let Some(document) = field(block, "document") {
        return read_document(document, &format!("{path}.document")).map(Some);
    }
    if let Some(audio) = field(block, "audio") {
        return read_audio(audio, &format!("{path}.audio")).map(Some);
    }
    if let Some(tool_use) = field(block, "toolUse") {
        return read_tool_use(tool_use, &format!("{path}.toolUse")).map(Some);
    }
    if let Some(result) = field(block, "toolResult") {
        return read_tool_result(result, &format!("{path}.toolResult"), mode).map(Some);
    }
    if let Some(reasoning) = field(block, "reasoningContent") {
        return read_reasoning(reasoning, &format!("{path}.reasoningContent")).map(Some);
    }
    if let Some(cited) = field(block, "citationsContent") {
        return read_citations(cited, &format!("{path}.citationsContent")).map(Some);
    }
    if let Some(guard) = field(block, "guardContent") {
        // Guarded text stays text: the model still sees it; only the
        // guardrail's narrower scope is lost.
        let guard_path = format!("{path}.guardContent");
        let guard = object(guard, &guard_path)?;
        if let Some(text) = field(guard, "text") {
            let text_path = format!("{guard_path}.text");
            let text = object(text, &text_path)?;
            return Ok(Some(Block::text(req_str(text, "text", &text_path)?)));
        }
    }
    match mode {
        Mode::Response => Ok(None),
        Mode::Request => {
            let kind = block.keys().next().map_or("(empty)", String::as_str);
            // Converse blocks the IR has no form for: a Bedrock lane gets
            // them back as they came, another reports them.
            if CARRIED.contains(&kind) {
                return Ok(Some(Block::Unmodelled(Unmodelled {
                    origin: Protocol::Bedrock,
                    path: format!("messages.content.{kind}"),
                    value: Value::Object(block.clone()),
                    beside: false,
                })));
            }
            Err(DecodeError::invalid(path, format!("content block type `{kind}` is not supported")))
        }
    }
}

/// The request `ContentBlock` members of Converse the IR does not model.
const CARRIED: [&str; 4] = ["video", "searchResult", "toolAddition", "toolRemoval"];

fn read_image(value: &Value, path: &str) -> Result<Block, DecodeError> {
    let image = object(value, path)?;
    let media_type = image_media_type(req_str(image, "format", path)?);
    let source = read_source(image, path, media_type)?;
    Ok(Block::Image { source, cache_control: None })
}

/// An `audio` block: its `format` and inline bytes or an S3 location.
fn read_audio(value: &Value, path: &str) -> Result<Block, DecodeError> {
    let audio = object(value, path)?;
    let media_type = audio_media_type(req_str(audio, "format", path)?);
    Ok(Block::Audio { source: read_source(audio, path, media_type)? })
}

fn read_document(value: &Value, path: &str) -> Result<Block, DecodeError> {
    let document = object(value, path)?;
    let format = opt_str(document, "format", path)?;
    let source_path = format!("{path}.source");
    let source = object(req(document, "source", path)?, &source_path)?;
    // Text sources are plain text unless the format says otherwise.
    let is_text = field(source, "text").is_some() || field(source, "content").is_some();
    let media_type = match format {
        Some(format) => document_media_type(format),
        None if is_text => "text/plain".to_owned(),
        None => "application/octet-stream".to_owned(),
    };
    let source = if let Some(text) = field(source, "text") {
        let text = string(text, &format!("{source_path}.text"))?;
        MediaSource::Base64 { media_type, data: base64::engine::general_purpose::STANDARD.encode(text) }
    } else if let Some(parts) = field(source, "content") {
        let parts_path = format!("{source_path}.content");
        let mut text = String::new();
        for (position, part) in array(parts, &parts_path)?.iter().enumerate() {
            let part_path = format!("{parts_path}[{position}]");
            text.push_str(req_str(object(part, &part_path)?, "text", &part_path)?);
        }
        MediaSource::Base64 { media_type, data: base64::engine::general_purpose::STANDARD.encode(text) }
    } else {
        read_source(document, path, media_type)?
    };
    Ok(Block::Document { source, name: opt_str(document, "name", path)?.map(str::to_owned), cache_control: None })
}

/// Reads `source` as inline bytes (base64 in JSON) or an S3 location.
fn read_source(parent: &Object, path: &str, media_type: String) -> Result<MediaSource, DecodeError> {
    let path = format!("{path}.source");
    let source = object(
        field(parent, "source").ok_or_else(|| DecodeError::invalid(&path, format!("{path} is required")))?,
        &path,
    )?;
    if let Some(bytes) = field(source, "bytes") {
        return Ok(MediaSource::Base64 { media_type, data: string(bytes, &format!("{path}.bytes"))?.to_owned() });
    }
    if let Some(location) = field(source, "s3Location") {
        let location_path = format!("{path}.s3Location");
        let location = object(location, &location_path)?;
        return Ok(MediaSource::Url {
            url: req_str(location, "uri", &location_path)?.to_owned(),
            media_type: Some(media_type),
        });
    }
    Err(DecodeError::invalid(&path, format!("{path} must hold bytes or s3Location")))
}

fn read_tool_use(value: &Value, path: &str) -> Result<Block, DecodeError> {
    let tool_use = object(value, path)?;
    Ok(Block::ToolUse(ToolUse::new(
        // An id the caller was handed reads back as the lane's.
        call_id::restore(req_str(tool_use, "toolUseId", path)?, Protocol::Bedrock),
        req_str(tool_use, "name", path)?,
        field(tool_use, "input").map_or_else(|| "{}".to_owned(), value_to_arguments),
    )))
}

fn read_tool_result(value: &Value, path: &str, mode: Mode) -> Result<Block, DecodeError> {
    let result = object(value, path)?;
    let content = match field(result, "content") {
        Some(content) => {
            let content_path = format!("{path}.content");
            read_blocks(array(content, &content_path)?, &content_path, mode)?
        }
        None => Vec::new(),
    };
    Ok(Block::ToolResult(ToolResult {
        tool_use_id: call_id::restore(req_str(result, "toolUseId", path)?, Protocol::Bedrock).into_owned(),
        name: None,
        content,
        is_error: opt_str(result, "status", path)? == Some("error"),
    }))
}

fn read_reasoning(value: &Value, path: &str) -> Result<Block, DecodeError> {
    let reasoning = object(value, path)?;
    if let Some(text) = field(reasoning, "reasoningText") {
        let text_path = format!("{path}.reasoningText");
        let text = object(text, &text_path)?;
        return Ok(Block::Thinking {
            text: opt_str(text, "text", &text_path)?.unwrap_or_default().to_owned(),
            signature: opt_str(text, "signature", &text_path)?.map(str::to_owned),
        });
    }
    if let Some(data) = field(reasoning, "redactedContent") {
        return Ok(Block::RedactedThinking { data: string(data, &format!("{path}.redactedContent"))?.to_owned() });
    }
    Err(DecodeError::invalid(path, format!("{path} must hold reasoningText or redactedContent")))
}

fn read_citations(value: &Value, path: &str) -> Result<Block, DecodeError> {
    let cited = object(value, path)?;
    let mut text = String::new();
    if let Some(parts) = field(cited, "content") {
        let parts_path = format!("{path}.content");
        for part in array(parts, &parts_path)? {
            if let Some(piece) = part.get("text").and_then(Value::as_str) {
                text.push_str(piece);
            }
        }
    }
    let citations = match field(cited, "citations") {
        Some(citations) => array(citations, &format!("{path}.citations"))?.to_vec(),
        None => Vec::new(),
    };
    Ok(Block::Text(TextBlock { text, cache_control: None, citations }))
}

/// Writes a `content` array, with a `cachePoint` after each marked block
/// and, in a reply, a signature carrier before each signed call.
/// `audio_input` is the model's `Capabilities::audio_input`: with
/// `Some(false)` an audio block is reported, not written.
pub(crate) fn write_blocks(
    blocks: &[Block],
    mode: Mode,
    audio_input: Option<bool>,
    dropped: &mut Vec<Dropped>,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(blocks.len());
    for block in blocks {
        if let (Mode::Response, Block::ToolUse(call)) = (mode, block) {
            if let Some(signature) = &call.signature {
                out.push(signature_carrier(signature));
            }
            // A caller gets the id in its own form.
            out.push(write_tool_use(call, &call_id::mint(&call.id, Protocol::Bedrock)));
            continue;
        }
        if let (Block::Audio { .. }, Some(false)) = (block, audio_input) {
            Dropped::push_once(dropped, Field::Audio, DropReason::Capability);
            continue;
        }
        let Some(value) = write_block(block, dropped) else {
            continue;
        };
        out.push(value);
        if let Some(cache) = block_cache(block) {
            out.push(cache_point(cache));
        }
    }
    out
}

/// The `reasoningContent` block that carries a call's thought signature.
pub(crate) fn signature_carrier(signature: &str) -> Value {
    json!({ "reasoningContent": { "reasoningText": { "text": "", "signature": signature::in_reasoning(signature) } } })
}

/// The cache marker that goes after `block` on the wire.
fn block_cache(block: &Block) -> Option<&CacheControl> {
    match block {
        Block::Text(text) => text.cache_control.as_ref(),
        Block::Image { cache_control, .. } | Block::Document { cache_control, .. } => cache_control.as_ref(),
        Block::ToolResult(result) => result.content.last().and_then(block_cache),
        _ => None,
    }
}

fn write_block(block: &Block, dropped: &mut Vec<Dropped>) -> Option<Value> {
    Some(match block {
        Block::Text(text) if text.citations.is_empty() => json!({ "text": text.text }),
        Block::Text(text) => json!({
            "citationsContent": {
                "content": [{ "text": text.text }],
                "citations": text.citations,
            }
        }),
        Block::Image { source, .. } => {
            let (format, source) = write_source(source, image_format, dropped)?;
            json!({ "image": { "format": format, "source": source } })
        }
        Block::Audio { source } => {
            let (format, source) = write_source(source, audio_format, dropped)?;
            json!({ "audio": { "format": format, "source": source } })
        }
        Block::Document { source, name, .. } => {
            let (format, source) = write_source(source, document_format, dropped)?;
            // Bedrock requires a name; the IR's is optional.
            let name = name.as_deref().filter(|name| !name.is_empty()).unwrap_or("document");
            json!({ "document": { "format": format, "name": name, "source": source } })
        }
        Block::Thinking { text, signature } => {
            let mut reasoning = Object::new();
            reasoning.insert("text".into(), text.clone().into());
            if let Some(signature) = signature {
                reasoning.insert("signature".into(), signature.clone().into());
            }
            json!({ "reasoningContent": { "reasoningText": reasoning } })
        }
        Block::RedactedThinking { data } => {
            json!({ "reasoningContent": { "redactedContent": data } })
        }
        Block::ToolUse(call) => write_tool_use(call, &call.id),
        Block::ToolResult(result) => write_tool_result(result, dropped),
        Block::Unmodelled(block) => block.for_target(Protocol::Bedrock, dropped)?.clone(),
    })
}

/// A `toolUse` block under `id` (the call's own for a lane, minted for a
/// caller).
fn write_tool_use(call: &ToolUse, id: &str) -> Value {
    json!({
        "toolUse": {
            "toolUseId": id,
            "name": call.name,
            "input": arguments_to_value(&call.input),
        }
    })
}

fn write_tool_result(result: &ToolResult, dropped: &mut Vec<Dropped>) -> Value {
    // A result's tool name is not reported: Converse keys results by id,
    // and the name follows from the call.
    let last = result.content.len().saturating_sub(1);
    let mut content = Vec::with_capacity(result.content.len());
    for (position, block) in result.content.iter().enumerate() {
        match block {
            Block::Text(_) | Block::Image { .. } | Block::Document { .. } | Block::Unmodelled(_) => {}
            _ => {
                drop_field(dropped, Field::MisplacedBlock);
                continue;
            }
        }
        // Only the last block's marker has a place (after the result).
        if position != last && block_cache(block).is_some() {
            drop_field(dropped, Field::CacheControl);
        }
        let value = match block {
            // Citations cannot be sent inside a tool result.
            Block::Text(text) => json!({ "text": text.text }),
            other => match write_block(other, dropped) {
                Some(value) => value,
                None => continue,
            },
        };
        content.push(value);
    }
    let mut body = Object::new();
    body.insert("toolUseId".into(), result.tool_use_id.clone().into());
    body.insert("content".into(), Value::Array(content));
    if result.is_error {
        body.insert("status".into(), "error".into());
    }
    json!({ "toolResult": body })
}

/// Writes a media source as `(format, source)`. Bedrock takes inline bytes
/// and S3 locations; `data:` URLs become bytes; other URLs cannot be sent.
fn write_source(
    source: &MediaSource,
    format_of: fn(&str) -> Option<&'static str>,
    dropped: &mut Vec<Dropped>,
) -> Option<(&'static str, Value)> {
    let (media_type, wire) = match source {
        MediaSource::Base64 { media_type, data } => (media_type.clone(), json!({ "bytes": data })),
        MediaSource::Url { url, media_type } => {
            if let Some((data_type, data)) = parse_data_url(url) {
                (data_type.to_owned(), json!({ "bytes": data }))
            } else if url.starts_with("s3://") {
                let media_type = media_type
                    .clone()
                    .or_else(|| media_type_from_extension(url).map(str::to_owned))
                    .unwrap_or_default();
                (media_type, json!({ "s3Location": { "uri": url } }))
            } else {
                drop_field(dropped, Field::MediaUrl);
                return None;
            }
        }
    };
    match format_of(&media_type) {
        Some(format) => Some((format, wire)),
        None => {
            drop_field(dropped, Field::MediaType);
            None
        }
    }
}

/// A MIME type guessed from an S3 key's extension (S3 URLs carry no type).
fn media_type_from_extension(url: &str) -> Option<&'static str> {
    let extension = url.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "csv" => "text/csv",
        "txt" => "text/plain",
        "md" => "text/markdown",
        "wav" => "audio/wav",
        "mp3" => "audio/mp3",
        "flac" => "audio/flac",
        "ogg" => "audio/ogg",
        "m4a" => "audio/m4a",
        "html" | "htm" => "text/html",
        "doc" => "application/msword",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls" => "application/vnd.ms-excel",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        _ => return None,
    })
}

/// What Claude on Bedrock lets go of a past turn's reasoning
/// (`switchyard_codec::opaque::PastReasoning`): its `reasoningContent`
/// blocks.
pub(crate) static PAST_REASONING: switchyard_codec::opaque::PastReasoning =
    switchyard_codec::opaque::PastReasoning { opens_turn, signed_texts, strip: strip_reasoning };

/// A user message that is not only tool results: a turn's first.
fn opens_turn(message: &Value) -> bool {
    if message.get("role").and_then(Value::as_str) != Some("user") {
        return false;
    }
    let blocks = message.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    blocks.is_empty() || !blocks.iter().all(|b| b.get("toolResult").is_some())
}

/// The texts of an assistant message's signed reasoning.
fn signed_texts(message: &Value) -> Vec<&str> {
    let blocks = message.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    blocks
        .iter()
        .filter_map(|b| b.get("reasoningContent")?.get("reasoningText"))
        .filter(|r| r.get("signature").and_then(Value::as_str).is_some_and(|s| !s.is_empty()))
        .filter_map(|r| r.get("text").and_then(Value::as_str))
        .collect()
}

/// Takes an assistant message's reasoning blocks out; none when nothing
/// else would remain.
fn strip_reasoning(message: &mut Value) -> Vec<String> {
    let Some(blocks) = message.get_mut("content").and_then(Value::as_array_mut) else { return Vec::new() };
    let reasoning = |b: &Value| b.get("reasoningContent").is_some();
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

    fn read(value: Value) -> Result<Vec<Block>, DecodeError> {
        read_blocks(array(&value, "content")?, "content", Mode::Request)
    }

    #[test]
    fn cache_point_marks_the_block_before() {
        let blocks = read(json!([
            { "text": "a" },
            { "cachePoint": { "type": "default", "ttl": "1h" } },
            { "toolResult": { "toolUseId": "t", "content": [{ "text": "r" }] } },
            { "cachePoint": { "type": "default" } }
        ]))
        .unwrap();
        let Block::Text(text) = &blocks[0] else { panic!("text expected") };
        assert_eq!(text.cache_control, Some(CacheControl { ttl: Some("1h".into()) }));
        let Block::ToolResult(result) = &blocks[1] else { panic!("result expected") };
        let Block::Text(inner) = &result.content[0] else { panic!("text expected") };
        assert_eq!(inner.cache_control, Some(CacheControl { ttl: None }));

        let mut dropped = Vec::new();
        let written = write_blocks(&blocks, Mode::Request, None, &mut dropped);
        assert_eq!(written.len(), 4);
        assert_eq!(written[3], json!({ "cachePoint": { "type": "default" } }));
        assert!(dropped.is_empty());
    }

    /// A point after a block the IR gives no marker stays where it stood on
    /// a Bedrock lane and is reported on another, never lost unsaid.
    #[test]
    fn a_cache_point_after_reasoning_or_a_call_goes_back_or_is_reported() {
        let blocks = read(json!([
            { "reasoningContent": { "reasoningText": { "text": "hm", "signature": "c2ln" } } },
            { "cachePoint": { "type": "default" } },
            { "toolUse": { "toolUseId": "t", "name": "f", "input": {} } },
            { "cachePoint": { "type": "default", "ttl": "1h" } }
        ]))
        .unwrap();
        let mut dropped = Vec::new();
        let written = write_blocks(&blocks, Mode::Request, None, &mut dropped);
        assert_eq!(written.len(), 4, "{written:?}");
        assert_eq!(written[1], json!({ "cachePoint": { "type": "default" } }));
        assert_eq!(written[3], json!({ "cachePoint": { "type": "default", "ttl": "1h" } }));
        assert!(dropped.is_empty(), "{dropped:?}");

        let points = blocks.iter().filter(|b| matches!(b, Block::Unmodelled(_))).count();
        assert_eq!(points, 2);
        for block in &blocks {
            if let Block::Unmodelled(point) = block {
                let mut lost = Vec::new();
                assert!(point.for_target(Protocol::Anthropic, &mut lost).is_none());
                assert_eq!(lost[0].extra_path.as_deref(), Some("messages.content.cachePoint"));
            }
        }
    }

    /// A Converse block the IR does not model is carried to a Bedrock lane
    /// and reported elsewhere; one Converse does not have is refused.
    #[test]
    fn unsupported_blocks_are_named() {
        let video = json!({ "video": { "format": "mp4", "source": { "bytes": "AAAA" } } });
        let blocks = read(json!([video.clone()])).unwrap();
        let [Block::Unmodelled(block)] = blocks.as_slice() else { panic!("not carried: {blocks:?}") };
        let mut dropped = Vec::new();
        assert_eq!(write_blocks(&[Block::Unmodelled(block.clone())], Mode::Request, None, &mut dropped), [video]);
        assert!(dropped.is_empty());
        assert_eq!(block.for_target(Protocol::Gemini, &mut dropped), None);
        assert_eq!(dropped, vec![Dropped::unmodelled("messages.content.video".into())]);
        let err = read(json!([{ "hologram": {} }])).unwrap_err();
        assert_eq!(err.to_string(), "content block type `hologram` is not supported");
        let lenient = read_blocks(&[json!({ "video": {} })], "c", Mode::Response).unwrap();
        assert!(lenient.is_empty());
    }

    #[test]
    fn urls_become_bytes_s3_or_dropped() {
        let blocks = vec![
            Block::Image {
                source: MediaSource::Url { url: "data:image/png;base64,AAAA".into(), media_type: None },
                cache_control: None,
            },
            Block::Image {
                source: MediaSource::Url { url: "s3://bucket/cat.jpg".into(), media_type: None },
                cache_control: None,
            },
            Block::Image {
                source: MediaSource::Url { url: "https://example.com/cat.png".into(), media_type: None },
                cache_control: None,
            },
        ];
        let mut dropped = Vec::new();
        let written = write_blocks(&blocks, Mode::Request, None, &mut dropped);
        assert_eq!(
            written,
            vec![
                json!({ "image": { "format": "png", "source": { "bytes": "AAAA" } } }),
                json!({ "image": { "format": "jpeg", "source": { "s3Location": { "uri": "s3://bucket/cat.jpg" } } } }),
            ]
        );
        assert_eq!(dropped[0].field, Field::MediaUrl);
    }

    #[test]
    fn text_documents_become_base64() {
        let blocks = read(json!([
            { "document": { "format": "md", "name": "notes", "source": { "text": "# hi" } } }
        ]))
        .unwrap();
        assert_eq!(
            blocks[0],
            Block::Document {
                source: MediaSource::Base64 { media_type: "text/markdown".into(), data: "IyBoaQ==".into() },
                name: Some("notes".into()),
                cache_control: None,
            }
        );
    }
}
