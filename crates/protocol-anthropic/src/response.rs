//! The non-streamed Message reply and the stop-reason vocabulary shared with
//! the stream.

use serde_json::{json, Map, Value};
use switchyard_codec::ir::{Block, DropReason, Dropped, Field, Response, StopReason};
use switchyard_codec::{DecodeError, Encoded};

use crate::blocks::{read_block, write_block, Target, ToolNames, Unknown};
use crate::wire::{as_array, as_object, at, opt_str, opt_value, write_usage, WireUsage};

pub(crate) fn read_stop_reason(reason: &str) -> Option<StopReason> {
    Some(match reason {
        "end_turn" => StopReason::EndTurn,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "tool_use" => StopReason::ToolUse,
        "pause_turn" => StopReason::Pause,
        "refusal" => StopReason::Refusal,
        "model_context_window_exceeded" => StopReason::ContextLength,
        // A reason added after this codec was written is not guessed at.
        _ => return None,
    })
}

/// Anthropic's reason for an IR stop reason. A safety filter is closest to
/// a refusal; an error has no stop reason (`null`).
pub(crate) fn write_stop_reason(reason: Option<StopReason>) -> Value {
    let text = match reason {
        None | Some(StopReason::Error) => return Value::Null,
        Some(StopReason::EndTurn) => "end_turn",
        Some(StopReason::MaxTokens) => "max_tokens",
        Some(StopReason::StopSequence) => "stop_sequence",
        Some(StopReason::ToolUse) => "tool_use",
        Some(StopReason::Pause) => "pause_turn",
        Some(StopReason::Refusal | StopReason::ContentFilter) => "refusal",
        Some(StopReason::ContextLength) => "model_context_window_exceeded",
    };
    json!(text)
}

pub(crate) fn read_response(body: &[u8]) -> Result<Response, DecodeError> {
    let value: Value = serde_json::from_slice(body)?;
    let obj = value
        .as_object()
        .ok_or_else(|| DecodeError::Invalid { message: "response body must be a json object".into(), param: None })?;
    if let Some(kind) = opt_str(obj, "type", "")? {
        if kind != "message" {
            return Err(DecodeError::invalid("type", format!("type must be message, not {kind}")));
        }
    }
    let mut content = Vec::new();
    if let Some(items) = opt_value(obj, "content") {
        let names = ToolNames::new();
        for (i, item) in as_array(items, "content")?.iter().enumerate() {
            // Server-tool blocks have no IR form and must not fail the reply.
            if let Some(block) = read_block(item, &at("content", i), Unknown::Skip, &names)? {
                content.push(block);
            }
        }
    }
    if let Some(usage) = opt_value(obj, "usage") {
        as_object(usage, "usage")?;
    }
    Ok(Response {
        id: opt_str(obj, "id", "")?.unwrap_or_default().to_owned(),
        model: opt_str(obj, "model", "")?.unwrap_or_default().to_owned(),
        created: None,
        content,
        stop_reason: opt_str(obj, "stop_reason", "")?.and_then(read_stop_reason),
        stop_sequence: opt_str(obj, "stop_sequence", "")?.map(str::to_owned),
        usage: WireUsage::read(opt_value(obj, "usage")).to_ir(),
    })
}

pub(crate) fn write_response(response: &Response) -> Encoded {
    let mut dropped = Vec::new();
    let mut content = Vec::with_capacity(response.content.len());
    for block in &response.content {
        match block {
            // A reply carries no media or tool results.
            Block::Image { .. } | Block::Document { .. } | Block::ToolResult(_) => {
                Dropped::push_once(&mut dropped, Field::MisplacedBlock, DropReason::Unsupported);
            }
            _ => content.extend(write_block(block, Target::Response, &mut dropped)),
        }
    }
    if response.created.is_some() {
        Dropped::push_once(&mut dropped, Field::ReplyCreated, DropReason::Unsupported);
    }
    let mut obj = Map::new();
    obj.insert("id".into(), json!(response.id));
    obj.insert("type".into(), json!("message"));
    obj.insert("role".into(), json!("assistant"));
    obj.insert("model".into(), json!(response.model));
    obj.insert("content".into(), Value::Array(content));
    obj.insert("stop_reason".into(), write_stop_reason(response.stop_reason));
    obj.insert("stop_sequence".into(), json!(response.stop_sequence));
    obj.insert("usage".into(), write_usage(&response.usage));
    Encoded { body: switchyard_codec::json::to_vec(&Value::Object(obj)), dropped }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wire_stop_reason_reads_back() {
        for reason in [
            "end_turn",
            "max_tokens",
            "stop_sequence",
            "tool_use",
            "pause_turn",
            "refusal",
            "model_context_window_exceeded",
        ] {
            let ir = read_stop_reason(reason);
            assert!(ir.is_some(), "{reason}");
            assert_eq!(write_stop_reason(ir), json!(reason));
        }
        assert_eq!(read_stop_reason("something_new"), None);
        assert_eq!(write_stop_reason(Some(StopReason::Error)), Value::Null);
    }

    #[test]
    fn server_tool_blocks_are_skipped_in_replies() {
        let body = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                {"type": "text", "text": "found", "citations": [{"type": "web_search_result_location", "url": "u"}]}
            ],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 3, "output_tokens": 4}});
        let response = read_response(&serde_json::to_vec(&body).unwrap()).unwrap();
        assert_eq!(response.content.len(), 1);
        assert_eq!(response.usage.input_tokens, 3);
    }

    #[test]
    fn an_error_body_is_not_a_reply() {
        let body = br#"{"type":"error","error":{"type":"api_error","message":"x"}}"#;
        assert_eq!(read_response(body).unwrap_err().to_string(), "type must be message, not error");
    }

    #[test]
    fn unwritable_parts_are_reported() {
        let response = Response {
            created: Some(1),
            content: vec![Block::Image {
                source: switchyard_codec::ir::MediaSource::Url { url: "https://x".into(), media_type: None },
                cache_control: None,
            }],
            ..Response::default()
        };
        let fields: Vec<Field> = write_response(&response).dropped.into_iter().map(|d| d.field).collect();
        assert_eq!(fields, [Field::MisplacedBlock, Field::ReplyCreated]);
    }
}
