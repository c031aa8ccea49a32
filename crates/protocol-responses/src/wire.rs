//! Field accessors over untyped Responses JSON, with decode errors that name
//! the field at fault, plus the media helpers (data URLs, file ids) the
//! request and response codecs share.

use serde_json::{Map, Value};
use switchyard_codec::ir::{DropReason, Dropped, Effort, Field};
use switchyard_codec::DecodeError;

/// A JSON object, or an error naming `field`.
pub(crate) fn as_object<'a>(value: &'a Value, field: &str) -> Result<&'a Map<String, Value>, DecodeError> {
    value.as_object().ok_or_else(|| DecodeError::invalid(field, format!("{field} must be an object")))
}

/// A JSON array, or an error naming `field`.
pub(crate) fn as_array<'a>(value: &'a Value, field: &str) -> Result<&'a [Value], DecodeError> {
    value.as_array().map(Vec::as_slice).ok_or_else(|| DecodeError::invalid(field, format!("{field} must be an array")))
}

/// An optional string member (`null` counts as absent).
pub(crate) fn opt_str(map: &Map<String, Value>, key: &str, field: &str) -> Result<Option<String>, DecodeError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(DecodeError::invalid(field, format!("{field} must be a string"))),
    }
}

/// A required string member.
pub(crate) fn req_str(map: &Map<String, Value>, key: &str, field: &str) -> Result<String, DecodeError> {
    opt_str(map, key, field)?.ok_or_else(|| DecodeError::invalid(field, format!("{field} is required")))
}

/// An optional number member, exactly as parsed.
pub(crate) fn opt_f64(map: &Map<String, Value>, key: &str, field: &str) -> Result<Option<f64>, DecodeError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            n.as_f64().map(Some).ok_or_else(|| DecodeError::invalid(field, format!("{field} must be a number")))
        }
        Some(_) => Err(DecodeError::invalid(field, format!("{field} must be a number"))),
    }
}

/// An optional non-negative integer member.
pub(crate) fn opt_u64(map: &Map<String, Value>, key: &str, field: &str) -> Result<Option<u64>, DecodeError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .map(Some)
            .ok_or_else(|| DecodeError::invalid(field, format!("{field} must be a non-negative integer"))),
    }
}

/// An optional boolean member.
pub(crate) fn opt_bool(map: &Map<String, Value>, key: &str, field: &str) -> Result<Option<bool>, DecodeError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(DecodeError::invalid(field, format!("{field} must be a boolean"))),
    }
}

/// A lenient count from a response body (missing or odd values count as 0:
/// usage is informative and must never fail a reply).
pub(crate) fn count(map: Option<&Map<String, Value>>, key: &str) -> u64 {
    map.and_then(|m| m.get(key)).and_then(Value::as_u64).unwrap_or(0)
}

/// A lenient string from a response body.
pub(crate) fn text_of<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key).and_then(Value::as_str)
}

/// True for a bare OpenAI file id (`file-abc`): the IR keeps uploaded-file
/// references as a scheme-less `MediaSource::Url`, which no real URL is.
pub(crate) fn is_file_id(url: &str) -> bool {
    !url.is_empty() && !url.contains(':') && !url.contains('/')
}

/// A MIME type guessed from a file name, for `file_data` sent without a
/// data-URL prefix.
pub(crate) fn media_type_for_filename(filename: Option<&str>) -> String {
    let extension = filename.and_then(|name| name.rsplit_once('.')).map(|(_, ext)| ext.to_ascii_lowercase());
    match extension.as_deref() {
        Some("txt") => "text/plain",
        Some("md") => "text/markdown",
        Some("csv") => "text/csv",
        Some("json") => "application/json",
        Some("html" | "htm") => "text/html",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        _ => "application/pdf",
    }
    .to_owned()
}

/// A file name for a document written without one (the API requires
/// `filename` alongside `file_data`).
pub(crate) fn filename_for_media_type(media_type: &str) -> String {
    let extension = match media_type {
        "text/plain" => "txt",
        "text/markdown" => "md",
        "text/csv" => "csv",
        "text/html" => "html",
        "application/json" => "json",
        "image/png" => "png",
        "image/jpeg" => "jpg",
        _ => "pdf",
    };
    format!("document.{extension}")
}

/// Records that `field` could not be written, once per field.
pub(crate) fn report(dropped: &mut Vec<Dropped>, field: Field) {
    Dropped::push_once(dropped, field, DropReason::Unsupported);
}

/// The levels `reasoning.effort` takes (`none` is thinking off).
pub(crate) const EFFORTS: [Effort; 5] = [Effort::Minimal, Effort::Low, Effort::Medium, Effort::High, Effort::XHigh];

/// Where Responses requests carry each parameter.
pub(crate) fn parameter_path(field: Field) -> Option<&'static str> {
    Some(match field {
        Field::MaxTokens => "max_output_tokens",
        Field::Logprobs => "include",
        Field::TopLogprobs => "top_logprobs",
        Field::Temperature => "temperature",
        Field::TopP => "top_p",
        Field::JsonMode => "text.format",
        Field::JsonSchema => "text.format.schema",
        Field::JsonSchemaName => "text.format.name",
        Field::JsonSchemaStrict => "text.format.strict",
        Field::ReasoningEffort => "reasoning.effort",
        Field::ReasoningOff => "reasoning.effort",
        Field::ToolChoice => "tool_choice",
        Field::ParallelToolCalls => "parallel_tool_calls",
        Field::User => "user",
        Field::Metadata => "metadata",
        Field::Thinking => "input.reasoning",
        Field::SystemMessage => "input.system",
        Field::ToolStrict => "tools.strict",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_ids_are_told_from_urls() {
        assert!(is_file_id("file-abc123"));
        assert!(!is_file_id("https://example.com/a.pdf"));
        assert!(!is_file_id(""));
    }

    #[test]
    fn filenames_and_media_types_pair_up() {
        assert_eq!(media_type_for_filename(Some("a.TXT")), "text/plain");
        assert_eq!(media_type_for_filename(None), "application/pdf");
        assert_eq!(filename_for_media_type("application/pdf"), "document.pdf");
    }
}
