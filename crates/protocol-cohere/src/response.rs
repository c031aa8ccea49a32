//! The non-streamed v2 chat response, plus the finish-reason and usage
//! mappings the stream shares.

use serde_json::{Map, Value};
use switchyard_codec::ir::{Field, Response, StopReason, TokenLogprob, Usage};
use switchyard_codec::{json as codec_json, DecodeError, Encoded};

use crate::content::{self, dedup, invalid, object, optional_str, unsupported, ContentForm};

/// Reads a v2 chat response body. Cohere names no model and no creation
/// time in its response, so those stay empty.
pub(crate) fn read(body: &[u8]) -> Result<Response, DecodeError> {
    let value: Value = codec_json::parse(body)?;
    let Value::Object(fields) = &value else {
        return Err(invalid("body", "must be a json object"));
    };
    let content = match fields.get("message") {
        None | Some(Value::Null) => Vec::new(),
        Some(message) => content::read_assistant("message", object("message", message)?)?,
    };
    Ok(Response {
        id: optional_str("response", fields, "id")?.unwrap_or_default(),
        model: String::new(),
        created: None,
        content,
        stop_reason: optional_str("response", fields, "finish_reason")?.as_deref().and_then(stop_reason),
        stop_sequence: None,
        usage: read_usage(fields.get("usage"))?,
        logprobs: match fields.get("logprobs") {
            Some(Value::Array(items)) => items.iter().filter_map(read_logprob).collect(),
            _ => Vec::new(),
        },
        choices: Vec::new(),
    })
}

/// One of Cohere's `logprobs` items (`{text, token_ids, logprobs}`, a
/// chunk of text and the log probability of each token making it) as one
/// IR token: the chunk's text, the sum of its tokens' log probabilities
/// (the chunk's own), its id when it is one token.
pub(crate) fn read_logprob(item: &Value) -> Option<TokenLogprob> {
    let logprobs = item.get("logprobs").and_then(Value::as_array)?;
    let ids = item.get("token_ids").and_then(Value::as_array);
    Some(TokenLogprob {
        token: item.get("text").and_then(Value::as_str).unwrap_or_default().to_owned(),
        logprob: logprobs.iter().filter_map(Value::as_f64).sum(),
        id: ids.filter(|ids| ids.len() == 1).and_then(|ids| ids[0].as_i64()),
        ..TokenLogprob::default()
    })
}

/// An IR token as one of Cohere's `logprobs` items (its alternatives have
/// no place; the request writer reported them).
pub(crate) fn write_logprob(token: &TokenLogprob) -> Value {
    let ids: Vec<i64> = token.id.into_iter().collect();
    serde_json::json!({"text": token.token, "token_ids": ids, "logprobs": [token.logprob]})
}

/// Writes a v2 chat response body.
pub(crate) fn write(response: &Response) -> Encoded {
    let mut dropped = Vec::new();
    let message = content::write_assistant(&response.content, ContentForm::List, &mut dropped);
    let mut body = Map::new();
    body.insert("id".to_owned(), Value::from(response.id.as_str()));
    body.insert("finish_reason".to_owned(), Value::from(finish_reason(response.stop_reason)));
    body.insert("message".to_owned(), Value::Object(message));
    body.insert("usage".to_owned(), write_usage(&response.usage));
    if !response.logprobs.is_empty() {
        body.insert("logprobs".to_owned(), response.logprobs.iter().map(write_logprob).collect());
    }
    if !finish_reason_is_exact(response.stop_reason) {
        dropped.push(unsupported(Field::StopReason));
    }
    if response.stop_sequence.is_some() {
        dropped.push(unsupported(Field::StopSequence));
    }
    note_usage(&response.usage, &mut dropped);
    dedup(&mut dropped);
    Encoded { body: codec_json::to_vec(&Value::Object(body)), dropped }
}

/// A Cohere `finish_reason` as an IR stop reason. `TIMEOUT` has no IR
/// counterpart and ends generation like an error; the v1-era `ERROR_TOXIC`
/// and `ERROR_LIMIT` are still understood.
pub(crate) fn stop_reason(finish_reason: &str) -> Option<StopReason> {
    match finish_reason {
        "COMPLETE" => Some(StopReason::EndTurn),
        "STOP_SEQUENCE" => Some(StopReason::StopSequence),
        "MAX_TOKENS" => Some(StopReason::MaxTokens),
        "TOOL_CALL" => Some(StopReason::ToolUse),
        "ERROR" | "TIMEOUT" | "USER_CANCEL" => Some(StopReason::Error),
        "ERROR_TOXIC" => Some(StopReason::ContentFilter),
        "ERROR_LIMIT" => Some(StopReason::ContextLength),
        _ => None,
    }
}

/// An IR stop reason as one of the v2 finish reasons (the field is required,
/// so an unknown reason is a normal completion).
pub(crate) fn finish_reason(stop_reason: Option<StopReason>) -> &'static str {
    match stop_reason {
        None | Some(StopReason::EndTurn | StopReason::Refusal | StopReason::Pause) => "COMPLETE",
        Some(StopReason::MaxTokens | StopReason::ContextLength) => "MAX_TOKENS",
        Some(StopReason::StopSequence) => "STOP_SEQUENCE",
        Some(StopReason::ToolUse) => "TOOL_CALL",
        Some(StopReason::ContentFilter | StopReason::Error) => "ERROR",
    }
}

/// False when `finish_reason` only approximates the IR reason.
fn finish_reason_is_exact(stop_reason: Option<StopReason>) -> bool {
    !matches!(
        stop_reason,
        Some(StopReason::Refusal | StopReason::Pause | StopReason::ContentFilter | StopReason::ContextLength)
    )
}

/// Cohere `usage`: `billed_units` is what Cohere bills (it leaves out e.g.
/// the safety preamble) and is preferred, the metering being of what the
/// provider bills; `tokens` (the model's own counts) is the fallback.
/// `cached_tokens` is taken as part of the input count (never more than
/// it).
pub(crate) fn read_usage(value: Option<&Value>) -> Result<Usage, DecodeError> {
    let usage = match value {
        None | Some(Value::Null) => return Ok(Usage::default()),
        Some(usage) => object("usage", usage)?,
    };
    let count = |group: &str, key: &str| usage.get(group).and_then(|group| group.get(key)).and_then(Value::as_f64);
    let input = count("billed_units", "input_tokens").or_else(|| count("tokens", "input_tokens"));
    let output = count("billed_units", "output_tokens").or_else(|| count("tokens", "output_tokens"));
    let cached = usage.get("cached_tokens").and_then(Value::as_f64);
    let input_tokens = whole(input);
    Ok(Usage {
        input_tokens,
        output_tokens: whole(output),
        cache_read_tokens: whole(cached).min(input_tokens),
        ..Usage::default()
    })
}

/// A count Cohere writes as a JSON number (often `37.0`) as a whole count.
fn whole(count: Option<f64>) -> u64 {
    match count {
        // `as` saturates, and the value is finite and non-negative here.
        Some(count) if count.is_finite() && count > 0.0 => count.round() as u64,
        _ => 0,
    }
}

/// IR usage as Cohere `usage`. The gateway knows no separate billed count,
/// so `billed_units` repeats the token counts.
pub(crate) fn write_usage(usage: &Usage) -> Value {
    let mut body = Map::new();
    let counts = serde_json::json!({
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
    });
    body.insert("billed_units".to_owned(), counts.clone());
    body.insert("tokens".to_owned(), counts);
    if usage.cache_read_tokens != 0 {
        body.insert("cached_tokens".to_owned(), Value::from(usage.cache_read_tokens));
    }
    Value::Object(body)
}

/// Reports the usage parts Cohere has no field for.
fn note_usage(usage: &Usage, dropped: &mut Vec<switchyard_codec::ir::Dropped>) {
    if usage.cache_write_tokens != 0 {
        dropped.push(unsupported(Field::CacheWriteTokens));
    }
    if usage.reasoning_tokens != 0 {
        dropped.push(unsupported(Field::ReasoningTokens));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use switchyard_codec::ir::{Block, ToolUse};

    #[test]
    fn usage_is_what_cohere_bills() {
        let usage = read_usage(Some(&json!({
            "billed_units": {"input_tokens": 737.0, "output_tokens": 28.0},
            "tokens": {"input_tokens": 913.0, "output_tokens": 83.0},
            "cached_tokens": 512.0
        })))
        .unwrap();
        assert_eq!(usage, Usage { input_tokens: 737, output_tokens: 28, cache_read_tokens: 512, ..Usage::default() });
        let tokens_only = read_usage(Some(&json!({
            "tokens": {"input_tokens": 5, "output_tokens": 7}, "cached_tokens": 9
        })))
        .unwrap();
        assert_eq!((tokens_only.input_tokens, tokens_only.output_tokens, tokens_only.cache_read_tokens), (5, 7, 5));
        assert_eq!(read_usage(None).unwrap(), Usage::default());
        assert!(read_usage(Some(&json!(3))).is_err());
    }

    #[test]
    fn finish_reasons_map_both_ways() {
        for reason in [
            StopReason::EndTurn,
            StopReason::MaxTokens,
            StopReason::StopSequence,
            StopReason::ToolUse,
            StopReason::Error,
        ] {
            assert_eq!(stop_reason(finish_reason(Some(reason))), Some(reason));
        }
        assert_eq!(stop_reason("TIMEOUT"), Some(StopReason::Error));
        assert_eq!(stop_reason("SOMETHING_NEW"), None);
        assert_eq!(finish_reason(None), "COMPLETE");
    }

    #[test]
    fn writes_tool_calls_with_plan_and_reports_losses() {
        let response = Response {
            logprobs: Vec::new(),
            choices: Vec::new(),
            id: "r1".into(),
            model: "command-a".into(),
            created: Some(1),
            content: vec![
                Block::text("I will check."),
                Block::ToolUse(ToolUse::new("c1", "get_weather", "{\"location\":\"Madrid\"}")),
            ],
            stop_reason: Some(StopReason::Refusal),
            stop_sequence: Some("END".into()),
            usage: Usage { input_tokens: 10, output_tokens: 5, reasoning_tokens: 2, ..Usage::default() },
        };
        let encoded = write(&response);
        let body: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(
            body,
            json!({
                "id": "r1",
                "finish_reason": "COMPLETE",
                "message": {
                    "role": "assistant",
                    "tool_plan": "I will check.",
                    "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"location\":\"Madrid\"}"}}]
                },
                "usage": {
                    "billed_units": {"input_tokens": 10, "output_tokens": 5},
                    "tokens": {"input_tokens": 10, "output_tokens": 5}
                }
            })
        );
        let fields: Vec<_> = encoded.dropped.iter().map(|d| d.field.as_str()).collect();
        assert_eq!(fields, vec!["stop_reason", "stop_sequence", "usage.reasoning_tokens"]);
    }

    #[test]
    fn a_call_signature_rides_in_the_reply_id_and_reads_back_off_it() {
        let mut call = ToolUse::new("c1", "f", "{}");
        call.signature = Some("CiQB0e2Kb7LlVw==".into());
        let response = Response { content: vec![Block::ToolUse(call.clone())], ..Response::default() };
        let body: Value = serde_json::from_slice(&write(&response).body).unwrap();
        let id = body["message"]["tool_calls"][0]["id"].as_str().unwrap().to_owned();
        assert!(id.starts_with("c1") && id.len() > 2, "{id}");
        assert_eq!(read(&serde_json::to_vec(&body).unwrap()).unwrap().content, vec![Block::ToolUse(call)]);
    }

    #[test]
    fn rejects_non_objects() {
        assert!(read(b"[]").is_err());
        assert!(read(b"{\"message\": 3}").is_err());
        assert!(read(b"nope").is_err());
    }
}
