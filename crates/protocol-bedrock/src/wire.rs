//! Small pieces the Bedrock reader and writer share: typed access to JSON
//! fields with errors that name the field, the media-format tables, the
//! stop-reason table, the usage mapping and the service tier.

use serde_json::{Map, Value};
use switchyard_codec::ir::{DropReason, Dropped, Field, ServiceTier, StopReason, Usage};
use switchyard_codec::DecodeError;

/// A JSON object.
pub(crate) type Object = Map<String, Value>;

/// `value` as an object, or an error naming `path`.
pub(crate) fn object<'a>(value: &'a Value, path: &str) -> Result<&'a Object, DecodeError> {
    value.as_object().ok_or_else(|| DecodeError::invalid(path, format!("{path} must be an object")))
}

/// `value` as an array, or an error naming `path`.
pub(crate) fn array<'a>(value: &'a Value, path: &str) -> Result<&'a [Value], DecodeError> {
    value.as_array().map(Vec::as_slice).ok_or_else(|| DecodeError::invalid(path, format!("{path} must be an array")))
}

/// `value` as a string, or an error naming `path`.
pub(crate) fn string<'a>(value: &'a Value, path: &str) -> Result<&'a str, DecodeError> {
    value.as_str().ok_or_else(|| DecodeError::invalid(path, format!("{path} must be a string")))
}

/// The field `key` of `obj`, treating `null` as absent.
pub(crate) fn field<'a>(obj: &'a Object, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|value| !value.is_null())
}

/// An optional string field.
pub(crate) fn opt_str<'a>(obj: &'a Object, key: &str, path: &str) -> Result<Option<&'a str>, DecodeError> {
    field(obj, key).map(|value| string(value, &format!("{path}.{key}"))).transpose()
}

/// A required string field.
pub(crate) fn req_str<'a>(obj: &'a Object, key: &str, path: &str) -> Result<&'a str, DecodeError> {
    opt_str(obj, key, path)?
        .ok_or_else(|| DecodeError::invalid(format!("{path}.{key}"), format!("{path}.{key} is required")))
}

/// A required field of any type.
pub(crate) fn req<'a>(obj: &'a Object, key: &str, path: &str) -> Result<&'a Value, DecodeError> {
    field(obj, key).ok_or_else(|| DecodeError::invalid(format!("{path}.{key}"), format!("{path}.{key} is required")))
}

/// An optional non-negative integer field.
pub(crate) fn opt_u64(obj: &Object, key: &str, path: &str) -> Result<Option<u64>, DecodeError> {
    field(obj, key)
        .map(|value| {
            value.as_u64().ok_or_else(|| {
                DecodeError::invalid(format!("{path}.{key}"), format!("{path}.{key} must be a non-negative integer"))
            })
        })
        .transpose()
}

/// An optional number field, kept exactly as received.
pub(crate) fn opt_f64(obj: &Object, key: &str, path: &str) -> Result<Option<f64>, DecodeError> {
    field(obj, key)
        .map(|value| {
            value
                .as_f64()
                .ok_or_else(|| DecodeError::invalid(format!("{path}.{key}"), format!("{path}.{key} must be a number")))
        })
        .transpose()
}

/// Records a dropped field once, however often it is met.
pub(crate) fn drop_field(dropped: &mut Vec<Dropped>, field: Field) {
    Dropped::push_once(dropped, field, DropReason::Unsupported);
}

/// The MIME type of a Bedrock image format.
pub(crate) fn image_media_type(format: &str) -> String {
    match format {
        "jpg" | "jpeg" => "image/jpeg".to_owned(),
        other => format!("image/{other}"),
    }
}

/// The Bedrock image format of a MIME type, when Bedrock takes it.
pub(crate) fn image_format(media_type: &str) -> Option<&'static str> {
    match essence(media_type).as_str() {
        "image/png" => Some("png"),
        "image/jpeg" | "image/jpg" => Some("jpeg"),
        "image/gif" => Some("gif"),
        "image/webp" => Some("webp"),
        _ => None,
    }
}

/// Bedrock document formats and the MIME types they stand for.
const DOCUMENT_FORMATS: [(&str, &str); 9] = [
    ("pdf", "application/pdf"),
    ("csv", "text/csv"),
    ("doc", "application/msword"),
    ("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
    ("xls", "application/vnd.ms-excel"),
    ("xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    ("html", "text/html"),
    ("txt", "text/plain"),
    ("md", "text/markdown"),
];

/// The MIME type of a Bedrock document format (unknown formats keep their
/// name so nothing is invented).
pub(crate) fn document_media_type(format: &str) -> String {
    DOCUMENT_FORMATS
        .iter()
        .find(|(name, _)| *name == format)
        .map_or_else(|| format!("application/{format}"), |(_, mime)| (*mime).to_owned())
}

/// The Bedrock document format of a MIME type, when Bedrock takes it.
pub(crate) fn document_format(media_type: &str) -> Option<&'static str> {
    let essence = essence(media_type);
    let essence = match essence.as_str() {
        "text/x-markdown" => "text/markdown",
        "application/xhtml+xml" => "text/html",
        other => other,
    };
    DOCUMENT_FORMATS.iter().find(|(_, mime)| *mime == essence).map(|(name, _)| *name)
}

/// Bedrock audio formats (Converse `AudioFormat`) and the MIME types they
/// stand for.
const AUDIO_FORMATS: [(&str, &str); 15] = [
    ("wav", "audio/wav"),
    ("mp3", "audio/mp3"),
    ("mpeg", "audio/mpeg"),
    ("mpga", "audio/mpga"),
    ("aac", "audio/aac"),
    ("x-aac", "audio/x-aac"),
    ("flac", "audio/flac"),
    ("ogg", "audio/ogg"),
    ("opus", "audio/opus"),
    ("webm", "audio/webm"),
    ("mp4", "audio/mp4"),
    ("m4a", "audio/m4a"),
    ("mka", "audio/x-matroska"),
    ("mkv", "video/x-matroska"),
    ("pcm", "audio/pcm"),
];

/// The MIME type of a Bedrock audio format (an unknown one `audio/<format>`).
pub(crate) fn audio_media_type(format: &str) -> String {
    AUDIO_FORMATS
        .iter()
        .find(|(name, _)| *name == format)
        .map_or_else(|| format!("audio/{format}"), |(_, mime)| (*mime).to_owned())
}

/// The Bedrock audio format of a MIME type, when Bedrock takes it.
pub(crate) fn audio_format(media_type: &str) -> Option<&'static str> {
    let essence = essence(media_type);
    let essence = match essence.as_str() {
        "audio/x-wav" | "audio/wave" | "audio/vnd.wave" => "audio/wav",
        "audio/mpeg3" | "audio/x-mp3" => "audio/mp3",
        "audio/x-m4a" => "audio/m4a",
        "audio/l16" => "audio/pcm",
        other => other,
    };
    AUDIO_FORMATS.iter().find(|(_, mime)| *mime == essence).map(|(name, _)| *name)
}

/// A MIME type without parameters, lowercased.
fn essence(media_type: &str) -> String {
    media_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase()
}

/// The IR stop reason of a Bedrock `stopReason` (unknown values give none).
pub(crate) fn stop_reason_from_wire(reason: &str) -> Option<StopReason> {
    Some(match reason {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "guardrail_intervened" | "content_filtered" => StopReason::ContentFilter,
        "model_context_window_exceeded" => StopReason::ContextLength,
        "malformed_model_output" | "malformed_tool_use" => StopReason::Error,
        _ => return None,
    })
}

/// The Bedrock `stopReason` closest to an IR stop reason.
pub(crate) fn stop_reason_to_wire(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndTurn | StopReason::Pause => "end_turn",
        StopReason::ToolUse => "tool_use",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::ContentFilter | StopReason::Refusal => "content_filtered",
        StopReason::ContextLength => "model_context_window_exceeded",
        StopReason::Error => "malformed_model_output",
    }
}

/// IR usage from a Bedrock `TokenUsage`. Bedrock's `inputTokens` leaves out
/// cache reads and writes (as Anthropic's does), so they are added back;
/// `cacheDetails` splits the writes by lifetime (`5m`, `1h`).
pub(crate) fn usage_from_wire(value: &Value) -> Usage {
    let count = |key: &str| value.get(key).and_then(Value::as_u64).unwrap_or(0);
    let cache_read_tokens = count("cacheReadInputTokens");
    let details = value.get("cacheDetails").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let written = |ttl: &str| {
        let of_ttl = details.iter().filter(|d| d.get("ttl").and_then(Value::as_str) == Some(ttl));
        of_ttl.filter_map(|d| d.get("inputTokens").and_then(Value::as_u64)).fold(0, u64::saturating_add)
    };
    let cache_write_1h_tokens = written("1h");
    let cache_write_tokens = match value.get("cacheWriteInputTokens").and_then(Value::as_u64) {
        Some(total) => total,
        None => written("5m").saturating_add(cache_write_1h_tokens),
    };
    Usage {
        input_tokens: count("inputTokens").saturating_add(cache_read_tokens).saturating_add(cache_write_tokens),
        output_tokens: count("outputTokens"),
        cache_read_tokens,
        cache_write_tokens,
        cache_write_1h_tokens: cache_write_1h_tokens.min(cache_write_tokens),
        ..Usage::default()
    }
}

/// The tier a reply's `serviceTier` (a Converse response's, or a stream's
/// `metadata` event's) says served it: its `type`, `default`, `priority`
/// or `flex` (`reserved`, capacity bought ahead, is priced by no tier).
pub(crate) fn service_tier_from_wire(tier: Option<&Value>) -> Option<ServiceTier> {
    tier?.get("type")?.as_str().and_then(ServiceTier::parse)
}

/// The `serviceTier` Bedrock writes for the tier `usage` was served at
/// (the standard tier is `default`; Bedrock has no scale or batch tier).
pub(crate) fn service_tier_to_wire(usage: &Usage) -> Option<Value> {
    let name = match usage.service_tier? {
        ServiceTier::Standard => "default",
        ServiceTier::Priority => "priority",
        ServiceTier::Flex => "flex",
        ServiceTier::Scale | ServiceTier::Batch => return None,
    };
    Some(serde_json::json!({ "type": name }))
}

/// A Bedrock `TokenUsage` from IR usage (the inverse of [`usage_from_wire`]).
pub(crate) fn usage_to_wire(usage: &Usage) -> Value {
    let mut wire = Object::new();
    wire.insert("inputTokens".into(), usage.uncached_input().into());
    wire.insert("outputTokens".into(), usage.output_tokens.into());
    wire.insert("totalTokens".into(), usage.input_tokens.saturating_add(usage.output_tokens).into());
    if usage.cache_read_tokens != 0 {
        wire.insert("cacheReadInputTokens".into(), usage.cache_read_tokens.into());
    }
    if usage.cache_write_tokens != 0 {
        wire.insert("cacheWriteInputTokens".into(), usage.cache_write_tokens.into());
    }
    if usage.cache_write_1h_tokens != 0 {
        // Sorted as Bedrock sorts them: 1h before 5m.
        let details: Vec<Value> = [("1h", usage.cache_write_1h_tokens), ("5m", usage.cache_write_5m_tokens())]
            .into_iter()
            .filter(|(_, n)| *n != 0)
            .map(|(ttl, n)| serde_json::json!({"inputTokens": n, "ttl": ttl}))
            .collect();
        wire.insert("cacheDetails".into(), Value::Array(details));
    }
    Value::Object(wire)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn usage_adds_cache_tokens_to_input() {
        let usage = usage_from_wire(&json!({
            "inputTokens": 10, "outputTokens": 5, "totalTokens": 45,
            "cacheReadInputTokens": 20, "cacheWriteInputTokens": 10
        }));
        assert_eq!(usage.input_tokens, 40);
        assert_eq!(usage.uncached_input(), 10);
        assert_eq!(usage_to_wire(&usage)["inputTokens"], 10);
        assert_eq!(usage_to_wire(&usage)["totalTokens"], 45);
    }

    /// A `TokenUsage` as the Bedrock API reference defines it, with
    /// `cacheDetails` (sorted 1h before 5m) splitting the writes by TTL.
    #[test]
    fn usage_reads_cache_writes_by_lifetime() {
        let wire = json!({
            "inputTokens": 12, "outputTokens": 40, "totalTokens": 3112,
            "cacheReadInputTokens": 1024, "cacheWriteInputTokens": 2036,
            "cacheDetails": [{"inputTokens": 2000, "ttl": "1h"}, {"inputTokens": 36, "ttl": "5m"}]
        });
        let usage = usage_from_wire(&wire);
        assert_eq!((usage.input_tokens, usage.cache_read_tokens), (3072, 1024));
        assert_eq!(
            (usage.cache_write_tokens, usage.cache_write_1h_tokens, usage.cache_write_5m_tokens()),
            (2036, 2000, 36)
        );
        assert_eq!(usage_to_wire(&usage), wire, "written back as Bedrock writes it");
        // Details without the total still give it.
        let details_only =
            json!({"inputTokens": 1, "outputTokens": 1, "cacheDetails": [{"inputTokens": 7, "ttl": "1h"}]});
        let usage = usage_from_wire(&details_only);
        assert_eq!((usage.cache_write_tokens, usage.cache_write_1h_tokens, usage.input_tokens), (7, 7, 8));
    }

    /// `serviceTier` as botocore's bedrock-runtime model types it on
    /// `ConverseResponse` and `ConverseStreamMetadataEvent`.
    #[test]
    fn service_tier_is_read_and_written_as_bedrock_names_it() {
        for (name, tier) in
            [("default", ServiceTier::Standard), ("priority", ServiceTier::Priority), ("flex", ServiceTier::Flex)]
        {
            let wire = json!({ "type": name });
            assert_eq!(service_tier_from_wire(Some(&wire)), Some(tier));
            let usage = Usage { service_tier: Some(tier), ..Usage::default() };
            assert_eq!(service_tier_to_wire(&usage), Some(wire));
        }
        assert_eq!(service_tier_from_wire(Some(&json!({ "type": "reserved" }))), None);
        assert_eq!(service_tier_from_wire(None), None);
        let batch = Usage { service_tier: Some(ServiceTier::Batch), ..Usage::default() };
        assert_eq!(service_tier_to_wire(&batch), None);
        assert_eq!(service_tier_to_wire(&Usage::default()), None);
    }

    #[test]
    fn formats_map_both_ways() {
        assert_eq!(image_format(&image_media_type("jpeg")), Some("jpeg"));
        assert_eq!(image_format("image/PNG; q=1"), Some("png"));
        assert_eq!(image_format("image/bmp"), None);
        for (format, _) in DOCUMENT_FORMATS {
            assert_eq!(document_format(&document_media_type(format)), Some(format));
        }
    }

    #[test]
    fn stop_reasons_round_trip() {
        for reason in [
            StopReason::EndTurn,
            StopReason::ToolUse,
            StopReason::MaxTokens,
            StopReason::StopSequence,
            StopReason::ContentFilter,
            StopReason::ContextLength,
            StopReason::Error,
        ] {
            assert_eq!(stop_reason_from_wire(stop_reason_to_wire(reason)), Some(reason));
        }
        assert_eq!(stop_reason_from_wire("something_new"), None);
    }
}
