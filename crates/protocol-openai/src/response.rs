//! The non-streamed `chat.completion` reply: reading one into `ir::Response`
//! and writing one back out.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_codec::ir::{Block, Choice, Dropped, Field, Protocol, Response, StopReason, TokenLogprob, ToolUse};
use switchyard_codec::{call_id, function, logprobs, DecodeError, Encoded};

use crate::wire::{
    carried_signature, finish_from_stop_reason, report, stop_reason_from_finish, ExtraContent, WireUsage,
};

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    created: Option<Value>,
    #[serde(default)]
    choices: Option<Vec<WireChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    service_tier: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct WireChoice {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    message: Option<WireMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    logprobs: Option<WireLogprobs>,
}

/// A choice's `logprobs`: its content's tokens, and a refusal's.
#[derive(Deserialize, Default)]
pub(crate) struct WireLogprobs {
    #[serde(default)]
    pub content: Option<Vec<logprobs::WireToken>>,
    #[serde(default)]
    pub refusal: Option<Vec<logprobs::WireToken>>,
}

impl WireLogprobs {
    /// The tokens of the content, then of a refusal.
    pub(crate) fn into_ir(self) -> Vec<TokenLogprob> {
        let mut tokens = logprobs::read(self.content.unwrap_or_default());
        tokens.extend(logprobs::read(self.refusal.unwrap_or_default()));
        tokens
    }
}

/// A choice's `logprobs` as written: its tokens in `content`.
#[derive(Serialize)]
pub(crate) struct OutLogprobs<'a> {
    pub content: Vec<logprobs::OutToken<'a>>,
    pub refusal: Option<()>,
}

impl<'a> OutLogprobs<'a> {
    /// `None` (written `null`) when there are no tokens.
    pub(crate) fn of(tokens: &'a [TokenLogprob]) -> Option<OutLogprobs<'a>> {
        (!tokens.is_empty()).then(|| OutLogprobs { content: logprobs::write(tokens), refusal: None })
    }
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    reasoning_content: Option<Value>,
    #[serde(default)]
    reasoning: Option<Value>,
    /// Signed and redacted reasoning (`thinking`).
    #[serde(default)]
    thinking_blocks: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
    #[serde(default)]
    function_call: Option<WireFunction>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
    /// Free-form (custom tool) calls carry `input` text instead.
    #[serde(default)]
    custom: Option<WireCustom>,
    /// A Gemini thought signature, from Google's OpenAI-compatible endpoint.
    #[serde(default)]
    extra_content: Option<Value>,
}

#[derive(Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct WireCustom {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    input: Option<String>,
}

/// Reads a `chat.completion` body: choice 0 is the response, the others
/// (`n > 1`) its `choices`, in order.
pub(crate) fn read(body: &[u8]) -> Result<Response, DecodeError> {
    let wire: WireResponse = serde_json::from_slice(body)?;
    if let (Some(error), None) = (&wire.error, &wire.choices) {
        if !error.is_null() {
            let message = error.get("message").and_then(Value::as_str).unwrap_or("the reply is an error");
            return Err(DecodeError::invalid("error", message.to_owned()));
        }
    }
    let mut response = Response {
        id: wire.id.unwrap_or_default(),
        model: wire.model.unwrap_or_default(),
        created: wire.created.as_ref().and_then(unix_seconds),
        usage: wire.usage.map(|u| u.to_ir(wire.service_tier.as_deref())).unwrap_or_default(),
        ..Response::default()
    };
    let mut choices = wire.choices.unwrap_or_default();
    if choices.len() > 1 {
        choices.sort_by_key(|c| c.index.unwrap_or(0));
    }
    // Choice 0 is read straight into the response: the usual reply has one,
    // and collecting it as a `Choice` first costs a move and a reallocation.
    let mut choices = choices.into_iter();
    if let Some(first) = choices.next() {
        response.stop_reason = read_choice(first, &mut response.content, &mut response.logprobs);
    }
    if choices.len() > 0 {
        response.choices = choices
            .map(|choice| {
                let (mut content, mut logprobs) = (Vec::new(), Vec::new());
                let stop_reason = read_choice(choice, &mut content, &mut logprobs);
                Choice { content, stop_reason, logprobs }
            })
            .collect();
    }
    Ok(response)
}

/// Reads one choice's blocks and log probabilities; gives its stop reason.
fn read_choice(choice: WireChoice, content: &mut Vec<Block>, logprobs: &mut Vec<TokenLogprob>) -> Option<StopReason> {
    if let Some(read) = choice.logprobs {
        *logprobs = read.into_ir();
    }
    let refused = choice.message.is_some_and(|message| read_message(message, content));
    match refused {
        true => Some(StopReason::Refusal),
        false => choice.finish_reason.as_deref().map(stop_reason_from_finish),
    }
}

/// Appends the message's blocks; true when the model refused.
fn read_message(message: WireMessage, content: &mut Vec<Block>) -> bool {
    // Signed blocks, when present, hold the same reasoning as the text.
    let signed = message
        .thinking_blocks
        .and_then(|blocks| crate::thinking::read_blocks(blocks, "choices[0].message.thinking_blocks").ok())
        .filter(|blocks| !blocks.is_empty());
    match signed {
        Some(blocks) => content.extend(blocks),
        None => {
            for reasoning in [&message.reasoning_content, &message.reasoning] {
                if let Some(text) = reasoning.as_ref().and_then(Value::as_str) {
                    if !text.is_empty() {
                        content.push(Block::Thinking { text: text.to_owned(), signature: None });
                    }
                }
            }
        }
    }
    match message.content {
        Some(Value::String(text)) if !text.is_empty() => content.push(Block::text(text)),
        // Some compatible servers answer with text parts.
        Some(Value::Array(parts)) => {
            for part in parts {
                if let Some(text) = part.get("text").and_then(Value::as_str) {
                    if !text.is_empty() {
                        content.push(Block::text(text));
                    }
                }
            }
        }
        _ => {}
    }
    let refused = match message.refusal {
        Some(refusal) if !refusal.is_empty() => {
            content.push(Block::text(refusal));
            true
        }
        _ => false,
    };
    for call in message.tool_calls.unwrap_or_default() {
        let (name, input) = match (call.function, call.custom) {
            (Some(function), _) => (function.name, function::arguments_text(function.arguments)),
            (None, Some(custom)) => (custom.name, custom.input.unwrap_or_default()),
            (None, None) => (None, String::new()),
        };
        content.push(Block::ToolUse(ToolUse {
            // What the writer minted reads back (`call_id`).
            id: call_id::restore(call.id.as_deref().unwrap_or_default(), Protocol::OpenAi).into_owned(),
            name: name.unwrap_or_default(),
            input,
            signature: carried_signature(call.extra_content.as_ref()),
        }));
    }
    if let Some(function) = message.function_call {
        let name = function.name.unwrap_or_default();
        content.push(Block::ToolUse(ToolUse::new(name.clone(), name, function::arguments_text(function.arguments))));
    }
    refused
}

/// `created` as integer seconds (some compatible servers send a float).
pub(crate) fn unix_seconds(value: &Value) -> Option<i64> {
    value.as_i64().or_else(|| value.as_f64().map(|seconds| seconds as i64))
}

#[derive(Serialize)]
struct OutResponse<'a> {
    id: &'a str,
    object: &'static str,
    created: i64,
    model: &'a str,
    choices: Vec<OutChoice<'a>>,
    usage: WireUsage,
    #[serde(skip_serializing_if = "Option::is_none")]
    service_tier: Option<&'static str>,
}

#[derive(Serialize)]
struct OutChoice<'a> {
    index: u32,
    message: OutMessage<'a>,
    logprobs: Option<OutLogprobs<'a>>,
    finish_reason: Option<&'static str>,
}

#[derive(Serialize)]
struct OutMessage<'a> {
    role: &'static str,
    content: Option<String>,
    refusal: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    thinking_blocks: Vec<crate::thinking::OutThinking<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<OutToolCall<'a>>,
}

#[derive(Serialize)]
struct OutToolCall<'a> {
    /// The lane's id in OpenAI's form (`call_id::mint`).
    id: std::borrow::Cow<'a, str>,
    #[serde(rename = "type")]
    kind: &'static str,
    function: OutFunction<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    extra_content: Option<ExtraContent<&'a str>>,
}

#[derive(Serialize)]
struct OutFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

/// Writes a `chat.completion` body: the response is choice 0, its
/// `choices` the ones after it.
pub(crate) fn write(response: &Response) -> Encoded {
    let mut dropped = Vec::new();
    if response.stop_sequence.is_some() {
        report(&mut dropped, Field::StopSequence);
    }
    let mut choices = Vec::with_capacity(1 + response.choices.len());
    choices.push(out_choice(0, &response.content, response.stop_reason, &response.logprobs, &mut dropped));
    for (index, choice) in (1..).zip(&response.choices) {
        choices.push(out_choice(index, &choice.content, choice.stop_reason, &choice.logprobs, &mut dropped));
    }
    let out = OutResponse {
        id: &response.id,
        object: "chat.completion",
        created: response.created.unwrap_or(0),
        model: &response.model,
        choices,
        usage: WireUsage::from_ir(&response.usage),
        service_tier: crate::wire::service_tier_name(&response.usage),
    };
    Encoded { body: switchyard_codec::json::to_vec(&out), dropped }
}

/// One choice: text blocks join into the one `content` string; a
/// refusal's text goes in `refusal`.
fn out_choice<'a>(
    index: u32,
    blocks: &'a [Block],
    stop_reason: Option<StopReason>,
    tokens: &'a [TokenLogprob],
    dropped: &mut Vec<Dropped>,
) -> OutChoice<'a> {
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in blocks {
        match block {
            Block::Text(block) => {
                if block.cache_control.is_some() {
                    report(dropped, Field::CacheControl);
                }
                if !block.citations.is_empty() {
                    report(dropped, Field::Citations);
                }
                text.push_str(&block.text);
            }
            Block::ToolUse(call) => tool_calls.push(OutToolCall {
                id: call_id::mint(&call.id, Protocol::OpenAi),
                kind: "function",
                function: OutFunction { name: &call.name, arguments: &call.input },
                extra_content: ExtraContent::of(call.signature.as_deref()),
            }),
            // Written below, in `reasoning_content` and `thinking_blocks`.
            Block::Thinking { .. } | Block::RedactedThinking { .. } => {}
            Block::Image { .. }
            | Block::Audio { .. }
            | Block::Document { .. }
            | Block::ToolResult(_)
            | Block::Unmodelled(_) => report(dropped, Field::MisplacedBlock),
        }
    }
    let (content, refusal) = if stop_reason == Some(StopReason::Refusal) && !text.is_empty() {
        (None, Some(text))
    } else if text.is_empty() && !tool_calls.is_empty() {
        (None, None)
    } else {
        (Some(text), None)
    };
    OutChoice {
        index,
        message: OutMessage {
            role: "assistant",
            content,
            refusal,
            reasoning_content: crate::thinking::reasoning_text(blocks),
            thinking_blocks: crate::thinking::out_blocks(blocks),
            tool_calls,
        },
        logprobs: OutLogprobs::of(tokens),
        finish_reason: stop_reason.map(finish_from_stop_reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use switchyard_codec::ir::Usage;

    #[test]
    fn reads_refusal_reasoning_and_usage() {
        let body = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                "refusal": "I can't help with that.", "reasoning_content": "thinking..."},
                "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
                "prompt_tokens_details": {"cached_tokens": 4},
                "completion_tokens_details": {"reasoning_tokens": 2}}
        });
        let response = read(body.to_string().as_bytes()).unwrap();
        assert_eq!(response.stop_reason, Some(StopReason::Refusal));
        assert_eq!(response.created, Some(1_700_000_000));
        assert!(matches!(&response.content[0], Block::Thinking { text, .. } if text == "thinking..."));
        assert!(matches!(&response.content[1], Block::Text(t) if t.text == "I can't help with that."));
        assert_eq!(
            response.usage,
            Usage {
                input_tokens: 10,
                output_tokens: 5,
                cache_read_tokens: 4,
                cache_write_tokens: 0,
                reasoning_tokens: 2,
                ..Usage::default()
            }
        );
        let encoded = write(&response);
        assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
        let written: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(written["choices"][0]["message"]["reasoning_content"], "thinking...");
        assert!(written["choices"][0]["message"].get("thinking_blocks").is_none(), "unsigned needs none");
        assert_eq!(written["choices"][0]["message"]["refusal"], "I can't help with that.");
        assert_eq!(written["choices"][0]["message"]["content"], Value::Null);
        assert_eq!(written["choices"][0]["finish_reason"], "stop");
        assert_eq!(written["usage"]["total_tokens"], 15);
    }

    #[test]
    fn signed_reasoning_travels_in_thinking_blocks_both_ways() {
        let response = Response {
            content: vec![
                Block::Thinking { text: "step one".into(), signature: Some("EqQBCkYI".into()) },
                Block::text("done"),
            ],
            ..Response::default()
        };
        let written: Value = serde_json::from_slice(&write(&response).body).unwrap();
        let message = &written["choices"][0]["message"];
        assert_eq!(message["reasoning_content"], "step one");
        assert_eq!(
            message["thinking_blocks"],
            json!([{"type": "thinking", "thinking": "step one", "signature": "EqQBCkYI"}])
        );
        let read_back = read(written.to_string().as_bytes()).unwrap();
        assert_eq!(read_back.content, response.content);
    }

    #[test]
    fn a_call_signature_travels_in_extra_content_both_ways() {
        let mut call = ToolUse::new("call_1", "f", "{}");
        call.signature = Some("c2ln".into());
        let response = Response { content: vec![Block::ToolUse(call.clone())], ..Response::default() };
        let written: Value = serde_json::from_slice(&write(&response).body).unwrap();
        let wire_call = &written["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(wire_call["id"], "call_1");
        assert_eq!(wire_call["extra_content"], json!({"google": {"thought_signature": "c2ln"}}));
        let back = read(&serde_json::to_vec(&written).unwrap()).unwrap();
        assert_eq!(back.content, vec![Block::ToolUse(call)]);
        let plain = Response { content: vec![Block::ToolUse(ToolUse::new("c", "f", "{}"))], ..Response::default() };
        let written: Value = serde_json::from_slice(&write(&plain).body).unwrap();
        assert!(written["choices"][0]["message"]["tool_calls"][0].get("extra_content").is_none());
    }

    #[test]
    fn error_bodies_and_garbage_are_decode_errors() {
        assert!(matches!(
            read(br#"{"error": {"message": "bad key", "type": "invalid_request_error"}}"#),
            Err(DecodeError::Invalid { .. })
        ));
        assert!(matches!(read(b"<html>"), Err(DecodeError::Json(_))));
        assert!(matches!(read(br#"{"choices": "x"}"#), Err(DecodeError::Json(_))));
    }

    #[test]
    fn empty_reply_writes_an_empty_string() {
        let encoded = write(&Response { stop_reason: Some(StopReason::EndTurn), ..Response::default() });
        let written: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(written["choices"][0]["message"]["content"], "");
        assert_eq!(written["object"], "chat.completion");
        assert_eq!(written["created"], 0);
    }

    /// Two choices with `logprobs`, shaped as OpenAI's API reference shows
    /// a `chat.completion` with `logprobs: true, top_logprobs: 2`.
    #[test]
    fn choices_and_logprobs_read_and_write_back() {
        let token = |t: &str, lp: f64| {
            json!({"token": t, "logprob": lp, "bytes": t.as_bytes(),
            "top_logprobs": [{"token": t, "logprob": lp, "bytes": t.as_bytes()}]})
        };
        let body = json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
            "choices": [
                {"index": 1, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop",
                 "logprobs": {"content": [token("Hi", -0.25)], "refusal": null}},
                {"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "length",
                 "logprobs": {"content": [token("Hello", -0.31725305)], "refusal": null}}
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}});
        let response = read(body.to_string().as_bytes()).unwrap();
        assert_eq!(response.content, vec![Block::text("Hello")]);
        assert_eq!(response.stop_reason, Some(StopReason::MaxTokens));
        assert_eq!(response.logprobs[0].logprob, -0.31725305);
        assert_eq!(response.choices.len(), 1);
        assert_eq!(response.choices[0].content, vec![Block::text("Hi")]);
        assert_eq!(response.choices[0].logprobs[0].top[0].token, "Hi");
        let written: Value = serde_json::from_slice(&write(&response).body).unwrap();
        assert_eq!(written["choices"][0]["logprobs"], body["choices"][1]["logprobs"]);
        assert_eq!(written["choices"][1]["index"], 1);
        assert_eq!(written["choices"][1]["logprobs"], body["choices"][0]["logprobs"]);
        // Without them, `logprobs` is null and there is one choice.
        let plain: Value = serde_json::from_slice(&write(&Response::default()).body).unwrap();
        assert_eq!(plain["choices"].as_array().map(Vec::len), Some(1));
        assert_eq!(plain["choices"][0]["logprobs"], Value::Null);
    }
}
