//! The non-streamed Message reply and the stop-reason vocabulary shared with
//! the stream.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use switchyard_codec::ir::{Block, DropReason, Dropped, Field, Response, StopReason};
use switchyard_codec::{DecodeError, Encoded};

use crate::blocks::{read_block, write_block, Target, ToolNames, Unknown};
use crate::wire::{as_array, as_object, at, opt_str, opt_value, WireUsage, WireUsageOut};

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
    stop_reason_name(reason).map_or(Value::Null, |name| json!(name))
}

/// The same, as a name (`None`: `null`).
fn stop_reason_name(reason: Option<StopReason>) -> Option<&'static str> {
    Some(match reason {
        None | Some(StopReason::Error) => return None,
        Some(StopReason::EndTurn) => "end_turn",
        Some(StopReason::MaxTokens) => "max_tokens",
        Some(StopReason::StopSequence) => "stop_sequence",
        Some(StopReason::ToolUse) => "tool_use",
        Some(StopReason::Pause) => "pause_turn",
        Some(StopReason::Refusal | StopReason::ContentFilter) => "refusal",
        Some(StopReason::ContextLength) => "model_context_window_exceeded",
    })
}

pub(crate) fn read_response(body: &[u8]) -> Result<Response, DecodeError> {
    // The usual reply is read into its members at once (parsing it into a
    // map of values first was a fifth of a translated request's work).
    // Anything unusual (not an object, a member of another type, a key
    // given twice) is read the long way, which names what is wrong.
    match serde_json::from_slice::<WireReply<'_>>(body) {
        Ok(reply) if reply.usage.as_ref().is_none_or(Value::is_object) => reply_of(Members {
            kind: reply.kind.as_deref(),
            id: reply.id.as_deref(),
            model: reply.model.as_deref(),
            content: reply.content.as_deref(),
            stop_reason: reply.stop_reason.as_deref(),
            stop_sequence: reply.stop_sequence.as_deref(),
            usage: reply.usage.as_ref(),
        }),
        _ => read_response_slowly(body),
    }
}

/// A reply's members, borrowed (`Cow`: a string with escapes is unescaped).
#[derive(Deserialize)]
struct WireReply<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    content: Option<Vec<Value>>,
    #[serde(default, borrow)]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    stop_sequence: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<Value>,
}

/// What a reply is made of, however it was read.
struct Members<'a> {
    kind: Option<&'a str>,
    id: Option<&'a str>,
    model: Option<&'a str>,
    content: Option<&'a [Value]>,
    stop_reason: Option<&'a str>,
    stop_sequence: Option<&'a str>,
    usage: Option<&'a Value>,
}

/// The long way: the reply as a map of values, each member checked.
fn read_response_slowly(body: &[u8]) -> Result<Response, DecodeError> {
    let value: Value = serde_json::from_slice(body)?;
    let obj = value
        .as_object()
        .ok_or_else(|| DecodeError::Invalid { message: "response body must be a json object".into(), param: None })?;
    let content = match opt_value(obj, "content") {
        Some(items) => Some(as_array(items, "content")?),
        None => None,
    };
    let usage = opt_value(obj, "usage");
    if let Some(usage) = usage {
        as_object(usage, "usage")?;
    }
    reply_of(Members {
        kind: opt_str(obj, "type", "")?,
        id: opt_str(obj, "id", "")?,
        model: opt_str(obj, "model", "")?,
        content,
        stop_reason: opt_str(obj, "stop_reason", "")?,
        stop_sequence: opt_str(obj, "stop_sequence", "")?,
        usage,
    })
}

fn reply_of(members: Members<'_>) -> Result<Response, DecodeError> {
    if let Some(kind) = members.kind {
        if kind != "message" {
            return Err(DecodeError::invalid("type", format!("type must be message, not {kind}")));
        }
    }
    let mut content = Vec::new();
    if let Some(items) = members.content {
        let names = ToolNames::new();
        for (i, item) in items.iter().enumerate() {
            // Server-tool blocks have no IR form and must not fail the reply.
            if let Some(block) = read_block(item, &at("content", i), Unknown::Skip, &names)? {
                content.push(block);
            }
        }
    }
    Ok(Response {
        id: members.id.unwrap_or_default().to_owned(),
        model: members.model.unwrap_or_default().to_owned(),
        created: None,
        content,
        stop_reason: members.stop_reason.and_then(read_stop_reason),
        stop_sequence: members.stop_sequence.map(str::to_owned),
        usage: WireUsage::read(members.usage).to_ir(),
        ..Response::default()
    })
}

pub(crate) fn write_response(response: &Response) -> Encoded {
    let mut dropped = Vec::new();
    let mut content = Vec::with_capacity(response.content.len());
    for block in &response.content {
        match block {
            // A reply carries no media or tool results.
            Block::Image { .. } | Block::Audio { .. } | Block::Document { .. } | Block::ToolResult(_) => {
                Dropped::push_once(&mut dropped, Field::MisplacedBlock, DropReason::Unsupported);
            }
            _ => content.extend(write_block(block, Target::Response, &mut dropped)),
        }
    }
    if response.created.is_some() {
        Dropped::push_once(&mut dropped, Field::ReplyCreated, DropReason::Unsupported);
    }
    // Written straight from the reply, not through a map of values: the
    // top level and its usage were a tenth of a translated request's work.
    let message = WireMessage {
        id: &response.id,
        kind: "message",
        role: "assistant",
        model: &response.model,
        content: &content,
        stop_reason: stop_reason_name(response.stop_reason),
        stop_sequence: response.stop_sequence.as_deref(),
        usage: WireUsageOut::of(&response.usage),
    };
    Encoded { body: switchyard_codec::json::to_vec(&message), dropped }
}

/// A Message reply as Anthropic writes it (its members in Anthropic's order).
#[derive(Serialize)]
struct WireMessage<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    model: &'a str,
    content: &'a [Value],
    stop_reason: Option<&'static str>,
    stop_sequence: Option<&'a str>,
    usage: WireUsageOut,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quick_read_and_the_long_way_agree() {
        let bodies = [
            r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"hi \"there\"\n"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"cache_read_input_tokens":2,"output_tokens":4}}"#,
            r#"{"id":"m","content":[{"type":"tool_use","id":"t1","name":"f","input":{"a":[1,2]}},{"type":"server_tool_use","id":"s"}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":2,"output_tokens_details":{"thinking_tokens":1}}}"#,
            r#"{"type":"message","content":null,"stop_reason":"a_new_reason","stop_sequence":"END","usage":null}"#,
            r#"{}"#,
        ];
        for body in bodies {
            let quick = read_response(body.as_bytes()).unwrap();
            assert_eq!(quick, read_response_slowly(body.as_bytes()).unwrap(), "{body}");
        }
        // What the quick read does not take is read (and refused) the long way.
        let refused = [
            (r#"[1]"#, "response body must be a json object"),
            (r#"{"usage":7}"#, "usage must be an object"),
            (r#"{"id":5}"#, "id must be a string"),
            (r#"{"content":{}}"#, "content must be an array"),
        ];
        for (body, message) in refused {
            assert_eq!(read_response(body.as_bytes()).unwrap_err().to_string(), message, "{body}");
        }
        // A key given twice: the long way takes the last, as before.
        let twice = read_response(br#"{"id":"a","id":"b"}"#).unwrap();
        assert_eq!(twice.id, "b");
    }

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
