//! Converse response body ↔ `ir::Response`. Converse names neither the
//! response nor the model, so the IR's id and model stay empty on read.

use serde_json::{json, Value};
use switchyard_codec::ir::{Field, Response};
use switchyard_codec::{json as codec_json, DecodeError, Encoded};

use crate::content::{read_blocks, write_blocks, Mode};
use crate::wire::{
    array, drop_field, field, object, opt_str, req, service_tier_from_wire, service_tier_to_wire,
    stop_reason_from_wire, stop_reason_to_wire, usage_from_wire, usage_to_wire, Object,
};

/// Reads a Converse response body.
pub(crate) fn read_response(body: &[u8]) -> Result<Response, DecodeError> {
    let root: Value = codec_json::parse(body)?;
    let root = object(&root, "body")?;
    let output = object(req(root, "output", "body")?, "output")?;
    let message = object(req(output, "message", "output")?, "output.message")?;
    let content_path = "output.message.content";
    let content = array(req(message, "content", "output.message")?, content_path)?;
    let stop_sequence = field(root, "additionalModelResponseFields")
        .and_then(|fields| fields.get("stop_sequence"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut usage = field(root, "usage").map(usage_from_wire).unwrap_or_default();
    usage.service_tier = service_tier_from_wire(field(root, "serviceTier"));
    Ok(Response {
        id: String::new(),
        model: String::new(),
        created: None,
        content: read_blocks(content, content_path, Mode::Response)?,
        stop_reason: opt_str(root, "stopReason", "body")?.and_then(stop_reason_from_wire),
        stop_sequence,
        usage,
        ..Response::default()
    })
}

/// Writes a Converse response body.
pub(crate) fn write_response(response: &Response) -> Encoded {
    let mut dropped = Vec::new();
    if !response.id.is_empty() {
        drop_field(&mut dropped, Field::ReplyId);
    }
    if !response.model.is_empty() {
        drop_field(&mut dropped, Field::ReplyModel);
    }
    if response.created.is_some() {
        drop_field(&mut dropped, Field::ReplyCreated);
    }
    if response.usage.reasoning_tokens != 0 {
        drop_field(&mut dropped, Field::ReasoningTokens);
    }
    let content = write_blocks(&response.content, Mode::Response, None, &mut dropped);
    let mut root = Object::new();
    root.insert("output".into(), json!({ "message": { "role": "assistant", "content": content } }));
    // `stopReason` is required; a reply without one ended normally.
    let stop_reason = response.stop_reason.map_or("end_turn", stop_reason_to_wire);
    root.insert("stopReason".into(), stop_reason.into());
    root.insert("usage".into(), usage_to_wire(&response.usage));
    root.insert("metrics".into(), json!({ "latencyMs": 0 }));
    if let Some(tier) = service_tier_to_wire(&response.usage) {
        root.insert("serviceTier".into(), tier);
    }
    if let Some(sequence) = &response.stop_sequence {
        // Anthropic models on Bedrock report the matched sequence here.
        root.insert("additionalModelResponseFields".into(), json!({ "stop_sequence": sequence }));
    }
    Encoded { body: codec_json::to_vec(&Value::Object(root)), dropped }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_codec::ir::{Block, StopReason, Usage};

    #[test]
    fn minimal_reply_reads() {
        let body = br#"{"output":{"message":{"role":"assistant","content":[{"text":"hi"}]}},
            "stopReason":"stop_sequence","usage":{"inputTokens":3,"outputTokens":1,"totalTokens":4},
            "metrics":{"latencyMs":12},"additionalModelResponseFields":{"stop_sequence":"END"}}"#;
        let response = read_response(body).unwrap();
        assert_eq!(response.content, vec![Block::text("hi")]);
        assert_eq!(response.stop_reason, Some(StopReason::StopSequence));
        assert_eq!(response.stop_sequence.as_deref(), Some("END"));
        assert_eq!(response.usage, Usage { input_tokens: 3, output_tokens: 1, ..Usage::default() });
        assert_eq!(read_response(&write_response(&response).body).unwrap(), response);
    }

    /// A Converse response's `serviceTier` (botocore's `ConverseResponse`)
    /// says which tier served it, which prices it: kept in the usage.
    #[test]
    fn the_service_tier_served_is_read_and_written() {
        let body = br#"{"output":{"message":{"role":"assistant","content":[{"text":"hi"}]}},
            "stopReason":"end_turn","usage":{"inputTokens":3,"outputTokens":1,"totalTokens":4},
            "metrics":{"latencyMs":12},"performanceConfig":{"latency":"standard"},"serviceTier":{"type":"flex"}}"#;
        let response = read_response(body).unwrap();
        assert_eq!(response.usage.service_tier, Some(switchyard_codec::ir::ServiceTier::Flex));
        let written: Value = serde_json::from_slice(&write_response(&response).body).unwrap();
        assert_eq!(written["serviceTier"], json!({"type": "flex"}));
        assert_eq!(read_response(&write_response(&response).body).unwrap(), response);
    }

    #[test]
    fn missing_output_is_named() {
        let err = read_response(br#"{"stopReason":"end_turn"}"#).unwrap_err();
        assert_eq!(err.to_string(), "body.output is required");
    }

    #[test]
    fn ids_are_reported_as_dropped() {
        let response = Response { id: "msg_1".into(), model: "m".into(), ..Response::default() };
        let fields: Vec<Field> = write_response(&response).dropped.into_iter().map(|d| d.field).collect();
        assert_eq!(fields, [Field::ReplyId, Field::ReplyModel]);
    }
}
