//! The `text_completion` object: a whole reply, read into the IR and
//! written from it. Stream chunks are the same object (`stream`).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_codec::ir::{Block, Field, Response, StopReason};
use switchyard_codec::{DecodeError, Encoded};

use crate::response::unix_seconds;
use crate::wire::{report, stop_reason_from_finish, WireUsage};

/// `object` of a completion and of its stream's chunks.
pub(crate) const OBJECT: &str = "text_completion";

#[derive(Deserialize)]
pub(crate) struct WireCompletion {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub created: Option<Value>,
    #[serde(default)]
    pub choices: Option<Vec<WireChoice>>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    #[serde(default)]
    pub service_tier: Option<String>,
    #[serde(default)]
    pub error: Option<Value>,
}

#[derive(Deserialize)]
pub(crate) struct WireChoice {
    #[serde(default)]
    pub index: Option<u32>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// Reads a `text_completion` body. Only the first choice is kept (the IR
/// models one reply).
pub(crate) fn read(body: &[u8]) -> Result<Response, DecodeError> {
    let wire: WireCompletion = serde_json::from_slice(body)?;
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
    let choice = wire.choices.unwrap_or_default().into_iter().find(|c| c.index.unwrap_or(0) == 0);
    if let Some(choice) = choice {
        response.stop_reason = choice.finish_reason.as_deref().map(stop_reason_from_finish);
        if let Some(text) = choice.text.filter(|text| !text.is_empty()) {
            response.content.push(Block::text(text));
        }
    }
    Ok(response)
}

#[derive(Serialize)]
struct OutCompletion<'a> {
    id: &'a str,
    object: &'static str,
    created: i64,
    model: &'a str,
    choices: [OutChoice; 1],
    usage: WireUsage,
}

#[derive(Serialize)]
pub(crate) struct OutChoice {
    pub text: String,
    pub index: u32,
    pub logprobs: Option<()>,
    pub finish_reason: Option<&'static str>,
}

/// A completion's `finish_reason`: it has only `stop`, `length` and
/// `content_filter` (a tool call, a refusal or a pause stopped it).
pub(crate) fn finish_of(reason: StopReason) -> &'static str {
    match reason {
        StopReason::MaxTokens | StopReason::ContextLength => "length",
        StopReason::ContentFilter => "content_filter",
        StopReason::EndTurn
        | StopReason::StopSequence
        | StopReason::ToolUse
        | StopReason::Refusal
        | StopReason::Pause
        | StopReason::Error => "stop",
    }
}

/// Writes a `text_completion` body: the reply's text blocks joined into
/// its one choice's `text`; what a completion has no place for (reasoning,
/// tool calls) is reported.
pub(crate) fn write(response: &Response) -> Encoded {
    let mut dropped = Vec::new();
    let mut text = String::new();
    for block in &response.content {
        match block {
            Block::Text(block) => {
                if !block.citations.is_empty() {
                    report(&mut dropped, Field::Citations);
                }
                text.push_str(&block.text);
            }
            Block::Thinking { .. } => report(&mut dropped, Field::Thinking),
            Block::RedactedThinking { .. } => report(&mut dropped, Field::RedactedThinking),
            Block::ToolUse(_)
            | Block::Image { .. }
            | Block::Audio { .. }
            | Block::Document { .. }
            | Block::ToolResult(_)
            | Block::Unmodelled(_) => report(&mut dropped, Field::MisplacedBlock),
        }
    }
    if response.stop_sequence.is_some() {
        report(&mut dropped, Field::StopSequence);
    }
    let out = OutCompletion {
        id: &response.id,
        object: OBJECT,
        created: response.created.unwrap_or(0),
        model: &response.model,
        choices: [OutChoice { text, index: 0, logprobs: None, finish_reason: response.stop_reason.map(finish_of) }],
        usage: WireUsage::from_ir(&response.usage),
    };
    Encoded { body: switchyard_codec::json::to_vec(&out), dropped }
}
