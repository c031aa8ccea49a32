//! Message content shared by requests and responses: assistant turns (content,
//! `tool_plan`, `tool_calls`, citations), images, documents, and the small
//! JSON readers that name the offending field in their errors.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Map, Value};
use switchyard_codec::ir::{Block, Dropped, Field, MediaSource, Protocol, TextBlock, ToolUse};
use switchyard_codec::media::source_from_url;
use switchyard_codec::{call_id, function, DecodeError};

/// The media type of a Cohere document (`{data, id}`) held as an IR document.
pub(crate) const JSON_MEDIA_TYPE: &str = "application/json";

/// An invalid-request error whose message starts with the field's path.
pub(crate) fn invalid(path: impl Into<String>, problem: &str) -> DecodeError {
    let path = path.into();
    let message = format!("{path} {problem}");
    DecodeError::invalid(path, message)
}

/// The object at `path`, or an error naming it.
pub(crate) fn object<'a>(path: &str, value: &'a Value) -> Result<&'a Map<String, Value>, DecodeError> {
    value.as_object().ok_or_else(|| invalid(path, "must be an object"))
}

/// A required string field.
pub(crate) fn required_str(path: &str, object: &Map<String, Value>, key: &str) -> Result<String, DecodeError> {
    match object.get(key) {
        Some(Value::String(text)) => Ok(text.clone()),
        None | Some(Value::Null) => Err(invalid(format!("{path}.{key}"), "is required")),
        Some(_) => Err(invalid(format!("{path}.{key}"), "must be a string")),
    }
}

/// An optional string field (`null` counts as absent).
pub(crate) fn optional_str(path: &str, object: &Map<String, Value>, key: &str) -> Result<Option<String>, DecodeError> {
    match object.get(key) {
        Some(Value::String(text)) => Ok(Some(text.clone())),
        None | Some(Value::Null) => Ok(None),
        Some(_) => Err(invalid(format!("{path}.{key}"), "must be a string")),
    }
}

/// The `type` of a content part.
fn part_type<'a>(path: &str, part: &'a Map<String, Value>) -> Result<&'a str, DecodeError> {
    match part.get("type") {
        Some(Value::String(kind)) => Ok(kind),
        None | Some(Value::Null) => Err(invalid(format!("{path}.type"), "is required")),
        Some(_) => Err(invalid(format!("{path}.type"), "must be a string")),
    }
}

/// Content that is a string (one text) or a list of typed parts. `part`
/// reads one part given its path, type and fields; `None` means the type is
/// not allowed here, and the error lists `allowed`.
fn read_parts<T>(
    path: &str,
    content: Option<&Value>,
    text: impl Fn(String) -> T,
    allowed: &str,
    mut part: impl FnMut(&str, &str, &Map<String, Value>) -> Option<Result<T, DecodeError>>,
) -> Result<Vec<T>, DecodeError> {
    match content {
        Some(Value::String(string)) => Ok(vec![text(string.clone())]),
        Some(Value::Array(parts)) => {
            let mut out = Vec::with_capacity(parts.len());
            for (i, value) in parts.iter().enumerate() {
                let part_path = format!("{path}.content[{i}]");
                let fields = object(&part_path, value)?;
                let kind = part_type(&part_path, fields)?;
                let read = match kind {
                    "text" => Ok(text(required_str(&part_path, fields, "text")?)),
                    other => part(&part_path, other, fields).unwrap_or_else(|| {
                        Err(invalid(
                            format!("{part_path}.type"),
                            &format!("{other:?} is not allowed here (expected {allowed})"),
                        ))
                    }),
                };
                out.push(read?);
            }
            Ok(out)
        }
        None | Some(Value::Null) => Err(invalid(format!("{path}.content"), "is required")),
        Some(_) => Err(invalid(format!("{path}.content"), "must be a string or an array")),
    }
}

/// A required object member of a part (`image_url`, `document`).
fn member<'a>(path: &str, fields: &'a Map<String, Value>, key: &str) -> Result<&'a Value, DecodeError> {
    fields.get(key).ok_or_else(|| invalid(format!("{path}.{key}"), "is required"))
}

/// System content: a string or a list of text parts.
pub(crate) fn read_system(path: &str, content: Option<&Value>) -> Result<Vec<TextBlock>, DecodeError> {
    read_parts(path, content, TextBlock::new, "\"text\"", |_, _, _| None)
}

/// User content: a string or a list of text and `image_url` parts.
pub(crate) fn read_user(path: &str, content: Option<&Value>) -> Result<Vec<Block>, DecodeError> {
    read_parts(path, content, Block::text, "\"text\" or \"image_url\"", |part_path, kind, fields| {
        (kind == "image_url").then(|| {
            let image_path = format!("{part_path}.image_url");
            let image = object(&image_path, member(part_path, fields, "image_url")?)?;
            let url = required_str(&image_path, image, "url")?;
            // `detail` has no place in the IR; it is not carried.
            Ok(Block::Image { source: source_from_url(url), cache_control: None })
        })
    })
}

/// Tool-message content: a string or a list of text and document parts.
pub(crate) fn read_tool_content(path: &str, content: Option<&Value>) -> Result<Vec<Block>, DecodeError> {
    read_parts(path, content, Block::text, "\"text\" or \"document\"", |part_path, kind, fields| {
        (kind == "document")
            .then(|| read_document(&format!("{part_path}.document"), member(part_path, fields, "document")?))
    })
}

/// Tool content written back: one string for a lone text, parts otherwise.
pub(crate) fn write_tool_content(blocks: &[Block], dropped: &mut Vec<Dropped>) -> Value {
    let mut parts = Vec::with_capacity(blocks.len());
    for block in blocks {
        match block {
            Block::Text(text) => {
                note_text_markers(text, dropped);
                parts.push(json!({"type": "text", "text": text.text}));
            }
            Block::Document { source, name, cache_control } => {
                if cache_control.is_some() {
                    dropped.push(unsupported(Field::CacheControl));
                }
                match cohere_document(source, name.as_deref()) {
                    Some(document) => parts.push(json!({"type": "document", "document": document})),
                    None => dropped.push(unsupported(Field::ToolResultMedia)),
                }
            }
            Block::Image { .. } | Block::Audio { .. } => dropped.push(unsupported(Field::ToolResultMedia)),
            Block::Thinking { .. } | Block::RedactedThinking { .. } | Block::ToolUse(_) | Block::ToolResult(_) => {
                dropped.push(unsupported(Field::MisplacedBlock))
            }
            Block::Unmodelled(block) => {
                block.for_target(Protocol::Cohere, dropped);
            }
        }
    }
    match parts.as_slice() {
        [only] if only.get("type") == Some(&Value::from("text")) => only.get("text").cloned().unwrap_or_default(),
        _ => Value::Array(parts),
    }
}

/// A Cohere document (`{data, id}`) as an IR document: the `data` JSON, as
/// base64 of its text, with the id as the name.
fn read_document(path: &str, document: &Value) -> Result<Block, DecodeError> {
    let document = object(path, document)?;
    let data = match document.get("data") {
        Some(data) if !data.is_null() => data,
        _ => return Err(invalid(format!("{path}.data"), "is required")),
    };
    let id = optional_str(path, document, "id")?;
    let text = serde_json::to_string(data)?;
    Ok(Block::Document {
        source: MediaSource::Base64 { media_type: JSON_MEDIA_TYPE.to_owned(), data: STANDARD.encode(text) },
        name: id,
        cache_control: None,
    })
}

/// An IR document as a Cohere document, when its bytes are JSON or text.
/// JSON is sent as the document's `data`; text becomes `{"text": ...}`.
/// PDFs, other binaries and URLs have no Cohere form.
pub(crate) fn cohere_document(source: &MediaSource, name: Option<&str>) -> Option<Value> {
    let MediaSource::Base64 { media_type, data } = source else {
        return None;
    };
    let is_json = media_type.starts_with(JSON_MEDIA_TYPE);
    if !is_json && !media_type.starts_with("text/") {
        return None;
    }
    let text = String::from_utf8(STANDARD.decode(data).ok()?).ok()?;
    let data = if is_json {
        serde_json::from_str::<Value>(&text).unwrap_or_else(|_| json!({ "text": text }))
    } else {
        json!({ "text": text })
    };
    let mut document = Map::new();
    document.insert("data".to_owned(), data);
    if let Some(name) = name {
        document.insert("id".to_owned(), Value::from(name));
    }
    Some(Value::Object(document))
}

/// An assistant turn (request message or response `message`) as IR blocks:
/// the content parts in order, then `tool_plan` as text, then the calls.
pub(crate) fn read_assistant(path: &str, message: &Map<String, Value>) -> Result<Vec<Block>, DecodeError> {
    let mut blocks = Vec::new();
    match message.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => blocks.push(Block::text(text.clone())),
        Some(Value::Array(parts)) => {
            for (i, part) in parts.iter().enumerate() {
                let part_path = format!("{path}.content[{i}]");
                let part = object(&part_path, part)?;
                match part_type(&part_path, part)? {
                    "text" => blocks.push(Block::text(required_str(&part_path, part, "text")?)),
                    "thinking" => blocks
                        .push(Block::Thinking { text: required_str(&part_path, part, "thinking")?, signature: None }),
                    other => {
                        return Err(invalid(
                            format!("{part_path}.type"),
                            &format!("{other:?} is not an assistant content type (expected \"text\" or \"thinking\")"),
                        ))
                    }
                }
            }
        }
        Some(_) => return Err(invalid(format!("{path}.content"), "must be a string or an array")),
    }
    let content_len = blocks.len();
    let mut plan_index = None;
    if let Some(plan) = optional_str(path, message, "tool_plan")? {
        if !plan.is_empty() {
            plan_index = Some(blocks.len());
            blocks.push(Block::text(plan));
        }
    }
    match message.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for (i, call) in calls.iter().enumerate() {
                let call_path = format!("{path}.tool_calls[{i}]");
                blocks.push(Block::ToolUse(read_tool_call(&call_path, call)?));
            }
        }
        Some(_) => return Err(invalid(format!("{path}.tool_calls"), "must be an array")),
    }
    match message.get("citations") {
        None | Some(Value::Null) => {}
        Some(Value::Array(citations)) => {
            for citation in citations {
                let target = citation_target(citation, &blocks, content_len, plan_index);
                if let Some(Block::Text(text)) = target.and_then(|i| blocks.get_mut(i)) {
                    text.citations.push(citation.clone());
                }
            }
        }
        Some(_) => return Err(invalid(format!("{path}.citations"), "must be an array")),
    }
    Ok(blocks)
}

/// The text block a citation belongs to: the plan for `PLAN` citations, the
/// content part at `content_index`, else the first text block.
fn citation_target(citation: &Value, blocks: &[Block], content_len: usize, plan_index: Option<usize>) -> Option<usize> {
    if citation.get("type").and_then(Value::as_str) == Some("PLAN") && plan_index.is_some() {
        return plan_index;
    }
    if let Some(index) = citation.get("content_index").and_then(Value::as_u64) {
        let index = usize::try_from(index).ok()?;
        if index < content_len && matches!(blocks.get(index), Some(Block::Text(_))) {
            return Some(index);
        }
    }
    blocks.iter().position(|block| matches!(block, Block::Text(_)))
}

fn read_tool_call(path: &str, call: &Value) -> Result<ToolUse, DecodeError> {
    // Cohere requires the id and the name.
    required_str(path, object(path, call)?, "id")?;
    let mut read = function::read_call(call.clone(), path)?;
    if read.name.is_empty() {
        return Err(invalid(format!("{path}.function.name"), "is required"));
    }
    // The id the caller was handed: the lane's, and a call's thought
    // signature riding in it (see `write_assistant`).
    let (id, signature) = call_id::read(&read.id, Protocol::Cohere);
    read.id = id;
    if signature.is_some() {
        read.signature = signature;
    }
    Ok(read)
}

/// How an assistant turn's content is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContentForm {
    /// Request history: a lone text part becomes a plain string.
    Flexible,
    /// A response `message`: always a list of parts, omitted when empty.
    List,
}

/// IR assistant blocks as a Cohere assistant message (without `role`).
/// When the turn calls tools, its text is the `tool_plan`. In a response to
/// the caller, a call's thought signature (a Gemini upstream's) is folded
/// into its id, which the caller echoes with the call and its result
/// (`switchyard_codec::signature`).
pub(crate) fn write_assistant(blocks: &[Block], form: ContentForm, dropped: &mut Vec<Dropped>) -> Map<String, Value> {
    let calls_tools = blocks.iter().any(|block| matches!(block, Block::ToolUse(_)));
    let mut parts = Vec::new();
    let mut plan = String::new();
    let mut tool_calls = Vec::new();
    let mut citations = Vec::new();
    for block in blocks {
        match block {
            Block::Text(text) => {
                if text.cache_control.is_some() {
                    dropped.push(unsupported(Field::CacheControl));
                }
                for citation in &text.citations {
                    if is_cohere_citation(citation) {
                        citations.push(citation.clone());
                    } else {
                        dropped.push(unsupported(Field::Citations));
                    }
                }
                if calls_tools {
                    plan.push_str(&text.text);
                } else {
                    parts.push(json!({"type": "text", "text": text.text}));
                }
            }
            Block::Thinking { text, signature } => {
                if signature.is_some() {
                    dropped.push(unsupported(Field::Thinking));
                }
                parts.push(json!({"type": "thinking", "thinking": text}));
            }
            Block::RedactedThinking { .. } => dropped.push(unsupported(Field::RedactedThinking)),
            Block::ToolUse(call) => {
                // A caller gets the id in its own form, the call's signature
                // riding in it; a lane gets its own id back.
                let id = match form {
                    ContentForm::List => call_id::written(&call.id, call.signature.as_deref(), Protocol::Cohere),
                    ContentForm::Flexible => std::borrow::Cow::Borrowed(call.id.as_str()),
                };
                tool_calls.push(function::call_value(&id, call));
            }
            Block::Image { .. } => dropped.push(unsupported(Field::MisplacedBlock)),
            Block::Audio { .. } => dropped.push(unsupported(Field::MisplacedBlock)),
            Block::Document { .. } => dropped.push(unsupported(Field::MisplacedBlock)),
            Block::ToolResult(_) => dropped.push(unsupported(Field::MisplacedBlock)),
            Block::Unmodelled(block) => {
                block.for_target(Protocol::Cohere, dropped);
            }
        }
    }
    let content = match (form, parts.as_slice()) {
        (ContentForm::List, []) => None,
        (ContentForm::Flexible, []) if !tool_calls.is_empty() => None,
        (ContentForm::Flexible, [only]) if only.get("type") == Some(&Value::from("text")) => only.get("text").cloned(),
        _ => Some(Value::Array(parts)),
    };
    let mut message = Map::new();
    message.insert("role".to_owned(), Value::from("assistant"));
    if let Some(content) = content {
        message.insert("content".to_owned(), content);
    }
    if !tool_calls.is_empty() {
        if !plan.is_empty() {
            message.insert("tool_plan".to_owned(), Value::from(plan));
        }
        message.insert("tool_calls".to_owned(), Value::Array(tool_calls));
    }
    if !citations.is_empty() {
        message.insert("citations".to_owned(), Value::Array(citations));
    }
    message
}

/// True when an opaque citation has Cohere's shape; other protocols'
/// citations would be rejected by Cohere, so they are not written.
pub(crate) fn is_cohere_citation(citation: &Value) -> bool {
    const KEYS: [&str; 6] = ["start", "end", "text", "sources", "content_index", "type"];
    let Some(object) = citation.as_object() else {
        return false;
    };
    object.keys().all(|key| KEYS.contains(&key.as_str()))
        && match object.get("type") {
            None | Some(Value::Null) => true,
            Some(Value::String(kind)) => {
                matches!(kind.as_str(), "TEXT_CONTENT" | "THINKING_CONTENT" | "PLAN")
            }
            Some(_) => false,
        }
}

/// Reports the markers a Cohere text part cannot carry.
pub(crate) fn note_text_markers(text: &TextBlock, dropped: &mut Vec<Dropped>) {
    if text.cache_control.is_some() {
        dropped.push(unsupported(Field::CacheControl));
    }
    if !text.citations.is_empty() {
        dropped.push(unsupported(Field::Citations));
    }
}

/// A field Cohere has no way to say.
pub(crate) fn unsupported(field: Field) -> Dropped {
    Dropped::unsupported(field)
}

/// Drops repeated reports of the same field, keeping the first.
pub(crate) fn dedup(dropped: &mut Vec<Dropped>) {
    let mut seen: Vec<Dropped> = Vec::with_capacity(dropped.len());
    dropped.retain(|entry| {
        if seen.contains(entry) {
            false
        } else {
            seen.push(entry.clone());
            true
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_read_by_where_they_may_stand() {
        let user =
            json!([{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]);
        assert_eq!(read_user("messages[0]", Some(&user)).map(|b| b.len()), Ok(2));
        let err = read_system("messages[0]", Some(&user)).unwrap_err();
        assert!(err.to_string().contains("messages[0].content[1].type"), "{err}");
        let missing = json!([{"type": "image_url"}]);
        let err = read_user("messages[1]", Some(&missing)).unwrap_err();
        assert!(err.to_string().contains("messages[1].content[0].image_url is required"), "{err}");
        let tool = json!([{"type": "document", "document": {"data": {"a": 1}, "id": "d"}}]);
        assert_eq!(read_tool_content("messages[2]", Some(&tool)).map(|b| b.len()), Ok(1));
        assert!(read_tool_content("messages[2]", Some(&json!(7))).is_err());
        assert_eq!(read_system("m", Some(&json!("plain"))), Ok(vec![TextBlock::new("plain")]));
    }

    #[test]
    fn documents_round_trip_through_base64_json() {
        let block = read_document("d", &json!({"data": {"temperature": {"madrid": "24°C"}}, "id": "w1"})).unwrap();
        let Block::Document { source, name, .. } = &block else { panic!("not a document: {block:?}") };
        assert_eq!(source.media_type(), Some(JSON_MEDIA_TYPE));
        assert_eq!(
            cohere_document(source, name.as_deref()),
            Some(json!({"data": {"temperature": {"madrid": "24°C"}}, "id": "w1"}))
        );
        let text = MediaSource::Base64 { media_type: "text/plain".into(), data: STANDARD.encode("plain words") };
        assert_eq!(cohere_document(&text, None), Some(json!({"data": {"text": "plain words"}})));
        let pdf = MediaSource::Base64 { media_type: "application/pdf".into(), data: STANDARD.encode("%PDF") };
        assert_eq!(cohere_document(&pdf, None), None);
        assert!(read_document("d", &json!({"id": "x"})).is_err());
    }

    #[test]
    fn citation_shape() {
        assert!(is_cohere_citation(
            &json!({"start": 1, "end": 4, "text": "24°C", "sources": [], "type": "TEXT_CONTENT"})
        ));
        assert!(!is_cohere_citation(&json!({"type": "char_location", "cited_text": "x"})));
        assert!(!is_cohere_citation(&json!("text")));
    }

    #[test]
    fn assistant_with_plan_and_calls() {
        let message = json!({
            "role": "assistant",
            "tool_plan": "I will look it up.",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}],
            "citations": [{"start": 0, "end": 1, "text": "I", "type": "PLAN"}]
        });
        let blocks = read_assistant("m", message.as_object().unwrap()).unwrap();
        assert_eq!(blocks.len(), 2);
        let Block::Text(plan) = &blocks[0] else { panic!("plan is not text") };
        assert_eq!(plan.text, "I will look it up.");
        assert_eq!(plan.citations.len(), 1);
        let mut dropped = Vec::new();
        let written = write_assistant(&blocks, ContentForm::Flexible, &mut dropped);
        assert_eq!(Value::Object(written), message);
        assert!(dropped.is_empty());
    }

    #[test]
    fn assistant_errors_name_the_field() {
        let message = json!({"role": "assistant", "tool_calls": [{"id": "c1"}]});
        let error = read_assistant("messages[1]", message.as_object().unwrap()).unwrap_err();
        assert_eq!(
            error,
            DecodeError::invalid(
                "messages[1].tool_calls[0].function",
                "messages[1].tool_calls[0].function is required"
            )
        );
    }
}
