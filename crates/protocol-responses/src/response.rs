//! Response codec: the Responses `response` object to and from
//! `ir::Response`, plus the status, usage and item-id conventions the stream
//! codec shares.

use serde_json::{json, Map, Value};
use switchyard_codec::ir::{self, Block, Dropped, Field, Protocol, StopReason, Usage};
use switchyard_codec::{call_id, json as codec_json, signature, DecodeError, Encoded};

use crate::items;
use crate::wire::{as_object, count, report, text_of};

/// Wire body → IR response.
pub(crate) fn read_response(body: &[u8]) -> Result<ir::Response, DecodeError> {
    let value: Value = codec_json::parse(body)?;
    let map = as_object(&value, "response")?;
    if !map.contains_key("output") {
        // An error envelope where a response was expected.
        if let Some(error) = map.get("error").and_then(Value::as_object) {
            let message = text_of(error, "message").unwrap_or("upstream returned an error");
            return Err(DecodeError::invalid("error", message.to_owned()));
        }
    }
    let output = match map.get("output") {
        None | Some(Value::Null) => &[][..],
        Some(value) => crate::wire::as_array(value, "output")?,
    };
    let mut content = Vec::new();
    let mut signals = OutputSignals::default();
    for (index, item) in output.iter().enumerate() {
        let item = as_object(item, &format!("output[{index}]"))?;
        read_output_item(item, &mut content, &mut signals);
    }
    signature::attach_carried(&mut content);
    Ok(ir::Response {
        id: text_of(map, "id").unwrap_or_default().to_owned(),
        model: text_of(map, "model").unwrap_or_default().to_owned(),
        created: map.get("created_at").and_then(unix_seconds),
        content,
        stop_reason: stop_reason(map, signals),
        stop_sequence: None,
        usage: usage_of(map),
        logprobs: output_logprobs(output),
        choices: Vec::new(),
    })
}

/// The log probabilities of the message's `output_text` parts, in order.
fn output_logprobs(output: &[Value]) -> Vec<ir::TokenLogprob> {
    let mut tokens = Vec::new();
    let messages = output.iter().filter(|item| item.get("type").and_then(Value::as_str) == Some("message"));
    for part in messages.filter_map(|item| item.get("content")?.as_array()).flatten() {
        if let Some(Value::Array(_)) = part.get("logprobs") {
            tokens.extend(read_logprobs(part.get("logprobs")));
        }
    }
    tokens
}

/// OpenAI-shaped tokens (an `output_text` part's or a delta event's
/// `logprobs`).
pub(crate) fn read_logprobs(value: Option<&Value>) -> Vec<ir::TokenLogprob> {
    match value {
        Some(Value::Array(items)) if !items.is_empty() => {
            let tokens: Vec<switchyard_codec::logprobs::WireToken> =
                serde_json::from_value(Value::Array(items.clone())).unwrap_or_default();
            switchyard_codec::logprobs::read(tokens)
        }
        _ => Vec::new(),
    }
}

/// What the output items say about why generation stopped.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct OutputSignals {
    /// A function call was made.
    pub(crate) tool_call: bool,
    /// A message part was a refusal.
    pub(crate) refusal: bool,
}

/// Appends the IR blocks of one output item. Built-in tool items (web search,
/// file search, ...) have no IR form and are skipped.
pub(crate) fn read_output_item(item: &Map<String, Value>, content: &mut Vec<Block>, signals: &mut OutputSignals) {
    match text_of(item, "type") {
        Some("message") => {
            let parts = item.get("content").and_then(Value::as_array);
            for part in parts.into_iter().flatten().filter_map(Value::as_object) {
                if let Some((text, refusal)) = items::read_output_part(part) {
                    signals.refusal |= refusal;
                    content.push(Block::Text(text));
                }
            }
        }
        Some("function_call") => {
            signals.tool_call = true;
            content.push(Block::ToolUse(items::read_function_call(item)));
        }
        Some("reasoning") => content.push(items::read_reasoning(item)),
        _ => {}
    }
}

/// `created_at` is documented as a number of seconds (sometimes fractional).
fn unix_seconds(value: &Value) -> Option<i64> {
    value.as_i64().or_else(|| value.as_f64().map(|seconds| seconds as i64))
}

/// The IR stop reason of a response object.
pub(crate) fn stop_reason(map: &Map<String, Value>, signals: OutputSignals) -> Option<StopReason> {
    let reason =
        map.get("incomplete_details").and_then(Value::as_object).and_then(|details| text_of(details, "reason"));
    stop_from_status(text_of(map, "status"), reason, signals)
}

/// Status and incomplete reason → IR stop reason.
pub(crate) fn stop_from_status(
    status: Option<&str>,
    incomplete_reason: Option<&str>,
    signals: OutputSignals,
) -> Option<StopReason> {
    match status {
        Some("completed") | None if signals.tool_call => Some(StopReason::ToolUse),
        Some("completed") if signals.refusal => Some(StopReason::Refusal),
        Some("completed") => Some(StopReason::EndTurn),
        Some("incomplete") => match incomplete_reason {
            Some("max_output_tokens") => Some(StopReason::MaxTokens),
            Some("content_filter") => Some(StopReason::ContentFilter),
            _ => None,
        },
        Some("failed") => Some(StopReason::Error),
        _ => None,
    }
}

/// IR stop reason → (status, incomplete reason). Reasons Responses cannot
/// name fold into the nearest status: a stop sequence, pause or refusal is
/// `completed`, an exhausted context window is `incomplete` for lack of
/// output room.
pub(crate) fn status_for(stop: Option<StopReason>) -> (&'static str, Option<&'static str>) {
    match stop {
        Some(StopReason::MaxTokens | StopReason::ContextLength) => ("incomplete", Some("max_output_tokens")),
        Some(StopReason::ContentFilter) => ("incomplete", Some("content_filter")),
        Some(StopReason::Error) => ("failed", None),
        _ => ("completed", None),
    }
}

/// A response object's usage in the IR: its `usage` (the conventions
/// match: input includes cached tokens, output includes reasoning tokens)
/// and the `service_tier` it was served at.
pub(crate) fn usage_of(response: &Map<String, Value>) -> Usage {
    let mut usage = response.get("usage").and_then(Value::as_object).map(read_usage).unwrap_or_default();
    usage.service_tier = text_of(response, "service_tier").and_then(ir::ServiceTier::parse);
    usage
}

/// Responses usage → IR usage. Audio and image details are not
/// OpenAI's for Responses, but servers of its dialect send them.
pub(crate) fn read_usage(usage: &Map<String, Value>) -> Usage {
    let input_details = usage.get("input_tokens_details").and_then(Value::as_object);
    let output_details = usage.get("output_tokens_details").and_then(Value::as_object);
    Usage {
        input_tokens: count(Some(usage), "input_tokens"),
        output_tokens: count(Some(usage), "output_tokens"),
        cache_read_tokens: count(input_details, "cached_tokens"),
        cache_write_tokens: count(input_details, "cache_write_tokens"),
        audio_input_tokens: count(input_details, "audio_tokens"),
        image_input_tokens: count(input_details, "image_tokens"),
        reasoning_tokens: count(output_details, "reasoning_tokens"),
        audio_output_tokens: count(output_details, "audio_tokens"),
        ..Usage::default()
    }
}

/// IR usage → Responses usage (audio counts only when there are some: the
/// dialect's own replies carry none).
pub(crate) fn write_usage(usage: &Usage) -> Value {
    let mut input_details = json!({
        "cached_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
    });
    let mut output_details = json!({"reasoning_tokens": usage.reasoning_tokens});
    if usage.audio_input_tokens != 0 {
        input_details["audio_tokens"] = usage.audio_input_tokens.into();
    }
    if usage.audio_output_tokens != 0 {
        output_details["audio_tokens"] = usage.audio_output_tokens.into();
    }
    json!({
        "input_tokens": usage.input_tokens,
        "input_tokens_details": input_details,
        "output_tokens": usage.output_tokens,
        "output_tokens_details": output_details,
        "total_tokens": usage.total(),
    })
}

/// The top-level `service_tier` a reply names (OpenAI's names; a batch has
/// none).
fn service_tier_name(usage: &Usage) -> Option<&'static str> {
    match usage.service_tier? {
        ir::ServiceTier::Standard => Some("default"),
        ir::ServiceTier::Batch => None,
        tier => Some(tier.as_str()),
    }
}

/// An output item id derived from the response id, so that ids are stable
/// for one reply and distinct across replies (`msg_<resp>_<n>`).
pub(crate) fn item_id(prefix: &str, response_id: &str, output_index: usize) -> String {
    let base = response_id.strip_prefix("resp_").unwrap_or(response_id);
    format!("{prefix}_{base}_{output_index}")
}

/// The function-call item id written for a call: `fc_` + the call id (the
/// IR keeps only the call id), within the 64 characters an item id may
/// have. Distinct from the `call_id`, as the API's own are.
pub(crate) fn function_call_item_id(call_id: &str) -> String {
    let mut id = format!("fc_{call_id}");
    id.truncate(ITEM_ID_MAX);
    id
}

/// The longest item id the Responses API takes.
const ITEM_ID_MAX: usize = 64;

/// Everything a response object is built from.
pub(crate) struct ResponseParts<'a> {
    pub(crate) id: &'a str,
    pub(crate) model: &'a str,
    pub(crate) created: Option<i64>,
    pub(crate) status: &'a str,
    pub(crate) incomplete_reason: Option<&'a str>,
    pub(crate) error: Option<Value>,
    pub(crate) output: Vec<Value>,
    pub(crate) usage: Option<&'a Usage>,
}

/// A full `response` object. Request echo fields the IR does not keep are
/// written with their defaults, because the SDK's `Response` model requires
/// them.
pub(crate) fn response_object(parts: ResponseParts<'_>) -> Value {
    let incomplete_details = match parts.incomplete_reason {
        Some(reason) => json!({"reason": reason}),
        None => Value::Null,
    };
    let mut object = json!({
        "id": parts.id,
        "object": "response",
        "created_at": parts.created.unwrap_or(0),
        "status": parts.status,
        "error": parts.error.unwrap_or(Value::Null),
        "incomplete_details": incomplete_details,
        "instructions": null,
        "max_output_tokens": null,
        "model": parts.model,
        "output": parts.output,
        "parallel_tool_calls": true,
        "previous_response_id": null,
        "reasoning": {"effort": null, "summary": null},
        "temperature": null,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": null,
        "truncation": "disabled",
        "usage": parts.usage.map_or(Value::Null, write_usage),
        "user": null,
        "metadata": {},
    });
    if let Some(tier) = parts.usage.and_then(service_tier_name) {
        object["service_tier"] = tier.into();
    }
    object
}

/// IR response → wire body.
pub(crate) fn write_response(response: &ir::Response) -> Encoded {
    let mut dropped = Vec::new();
    let mut output = write_output(&response.id, &response.content, &mut dropped);
    if !response.logprobs.is_empty() {
        // The reply's log probabilities ride on its first `output_text`.
        let first_text = output
            .iter_mut()
            .filter(|item| item.get("type").and_then(Value::as_str) == Some("message"))
            .filter_map(|item| item.get_mut("content")?.as_array_mut())
            .flatten()
            .find(|part| part.get("type").and_then(Value::as_str) == Some("output_text"));
        if let Some(Value::Object(part)) = first_text {
            part.insert("logprobs".into(), json!(switchyard_codec::logprobs::write(&response.logprobs)));
        }
    }
    if response.stop_sequence.is_some() {
        report(&mut dropped, Field::StopSequence);
    }
    let (status, incomplete_reason) = status_for(response.stop_reason);
    let error = (status == "failed")
        .then(|| json!({"code": "server_error", "message": "the model failed to generate a response"}));
    let body = response_object(ResponseParts {
        id: &response.id,
        model: &response.model,
        created: response.created,
        status,
        incomplete_reason,
        error,
        output,
        usage: Some(&response.usage),
    });
    Encoded { body: codec_json::to_vec(&body), dropped }
}

/// Content blocks → output items: consecutive text blocks share one message
/// item (one `output_text` part each); calls and reasoning are items of
/// their own. Media and tool results never appear in a reply.
fn write_output(response_id: &str, content: &[Block], dropped: &mut Vec<Dropped>) -> Vec<Value> {
    let mut output: Vec<Value> = Vec::new();
    let mut parts: Vec<Value> = Vec::new();
    let flush = |output: &mut Vec<Value>, parts: &mut Vec<Value>| {
        if !parts.is_empty() {
            output.push(json!({
                "id": item_id("msg", response_id, output.len()),
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": std::mem::take(parts),
            }));
        }
    };
    for block in content {
        match block {
            Block::Text(text) => parts.push(items::write_output_text(text, dropped)),
            Block::ToolUse(call) => {
                flush(&mut output, &mut parts);
                if let Some(signature) = &call.signature {
                    let mut carrier = Map::new();
                    carrier.insert("id".into(), json!(item_id("rs", response_id, output.len())));
                    carrier.extend(items::signature_carrier(signature));
                    output.push(Value::Object(carrier));
                }
                // The caller gets the id in its own form (`call_id::mint`).
                let minted = call_id::mint(&call.id, Protocol::Responses);
                let mut item = Map::new();
                item.insert("id".into(), json!(function_call_item_id(&minted)));
                item.extend(items::write_function_call(call, &minted));
                item.insert("status".into(), json!("completed"));
                output.push(Value::Object(item));
            }
            Block::Thinking { .. } | Block::RedactedThinking { .. } => {
                flush(&mut output, &mut parts);
                if let Some(reasoning) = items::write_reasoning(block) {
                    let mut item = Map::new();
                    item.insert("id".into(), json!(item_id("rs", response_id, output.len())));
                    item.extend(reasoning);
                    output.push(Value::Object(item));
                }
            }
            Block::Image { .. }
            | Block::Audio { .. }
            | Block::Document { .. }
            | Block::ToolResult(_)
            | Block::Unmodelled(_) => {
                report(dropped, Field::MisplacedBlock);
            }
        }
    }
    flush(&mut output, &mut parts);
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `output_text` part's `logprobs`, as the Responses reference
    /// shows them, read into the IR and written back on the first part.
    #[test]
    fn output_text_logprobs_read_and_write_back() {
        let logprobs = json!([{"token": "Hi", "logprob": -0.25, "bytes": [72, 105],
            "top_logprobs": [{"token": "Hi", "logprob": -0.25, "bytes": [72, 105]}]}]);
        let body = json!({"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-4o",
            "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "Hi", "annotations": [], "logprobs": logprobs}]}]});
        let response = read_response(body.to_string().as_bytes()).unwrap();
        assert_eq!(response.logprobs.len(), 1);
        assert_eq!(response.logprobs[0].top[0].logprob, -0.25);
        let written: Value = serde_json::from_slice(&write_response(&response).body).unwrap();
        assert_eq!(written["output"][0]["content"][0]["logprobs"], logprobs);
    }

    #[test]
    fn status_and_stop_reason_agree_both_ways() {
        let none = OutputSignals::default();
        let tool = OutputSignals { tool_call: true, refusal: false };
        for stop in [StopReason::EndTurn, StopReason::MaxTokens, StopReason::ContentFilter, StopReason::Error] {
            let (status, reason) = status_for(Some(stop));
            assert_eq!(stop_from_status(Some(status), reason, none), Some(stop));
        }
        let (status, reason) = status_for(Some(StopReason::ToolUse));
        assert_eq!(stop_from_status(Some(status), reason, tool), Some(StopReason::ToolUse));
    }

    #[test]
    fn an_error_envelope_is_not_a_response() {
        let body = br#"{"error":{"message":"bad key","type":"invalid_request_error"}}"#;
        assert!(read_response(body).is_err());
    }

    /// A response object's usage as the Responses API reference shows it,
    /// with the tier that served it.
    #[test]
    fn usage_reads_every_kind_and_the_tier_served() {
        let body = br#"{"id": "resp_1", "object": "response", "created_at": 1741476542, "status": "completed",
            "model": "gpt-5", "output": [], "service_tier": "priority",
            "usage": {"input_tokens": 2048, "input_tokens_details": {"cached_tokens": 1024},
                      "output_tokens": 900, "output_tokens_details": {"reasoning_tokens": 640}, "total_tokens": 2948}}"#;
        let usage = read_response(body).unwrap().usage;
        assert_eq!((usage.input_tokens, usage.cache_read_tokens), (2048, 1024));
        assert_eq!((usage.output_tokens, usage.reasoning_tokens), (900, 640));
        assert_eq!(usage.service_tier, Some(ir::ServiceTier::Priority));
        assert_eq!(service_tier_name(&usage), Some("priority"));
        let written = write_usage(&usage);
        assert_eq!(written["output_tokens_details"], json!({"reasoning_tokens": 640}));
        assert_eq!(read_usage(written.as_object().unwrap()), Usage { service_tier: None, ..usage });
    }

    #[test]
    fn item_ids_derive_from_the_response_id() {
        assert_eq!(item_id("msg", "resp_abc", 2), "msg_abc_2");
        assert_eq!(function_call_item_id("call_1"), "fc_call_1");
    }
}
