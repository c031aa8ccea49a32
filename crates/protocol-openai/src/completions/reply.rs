//! The `text_completion` object: a whole reply, read into the IR and
//! written from it. Stream chunks are the same object (`stream`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use switchyard_codec::ir::{Block, Choice, Dropped, Field, Response, StopReason, TokenLogprob, TopLogprob};
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
    #[serde(default)]
    pub logprobs: Option<CompletionLogprobs>,
}

/// A completion choice's `logprobs`: parallel arrays of its tokens, their
/// log probabilities, the likeliest tokens at each place (a map of token
/// to log probability) and where each token starts in the text.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct CompletionLogprobs {
    #[serde(default)]
    pub tokens: Vec<String>,
    #[serde(default)]
    pub token_logprobs: Vec<Option<f64>>,
    #[serde(default)]
    pub top_logprobs: Option<Vec<Option<Map<String, Value>>>>,
    #[serde(default)]
    pub text_offset: Vec<u64>,
}

impl CompletionLogprobs {
    /// The IR's tokens (a missing log probability, the echoed prompt's
    /// first, reads as 0).
    pub(crate) fn into_ir(self) -> Vec<TokenLogprob> {
        let mut tops = self.top_logprobs.unwrap_or_default().into_iter();
        let mut logprobs = self.token_logprobs.into_iter();
        self.tokens
            .into_iter()
            .map(|token| TokenLogprob {
                token,
                logprob: logprobs.next().flatten().unwrap_or(0.0),
                top: tops
                    .next()
                    .flatten()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(token, logprob)| TopLogprob {
                        token,
                        logprob: logprob.as_f64().unwrap_or(0.0),
                        ..TopLogprob::default()
                    })
                    .collect(),
                ..TokenLogprob::default()
            })
            .collect()
    }

    /// The IR's tokens as a completion says them, the first starting at
    /// `offset` in the text; `None` when there are none.
    pub(crate) fn from_ir(tokens: &[TokenLogprob], mut offset: u64) -> Option<CompletionLogprobs> {
        if tokens.is_empty() {
            return None;
        }
        let mut out = CompletionLogprobs {
            tokens: Vec::with_capacity(tokens.len()),
            token_logprobs: Vec::with_capacity(tokens.len()),
            top_logprobs: None,
            text_offset: Vec::with_capacity(tokens.len()),
        };
        let any_top = tokens.iter().any(|token| !token.top.is_empty());
        let mut tops = Vec::new();
        for token in tokens {
            out.tokens.push(token.token.clone());
            out.token_logprobs.push(Some(token.logprob));
            out.text_offset.push(offset);
            offset += token.token.len() as u64;
            if any_top {
                let map: Map<String, Value> = token
                    .top
                    .iter()
                    .map(|top| {
                        (
                            top.token.clone(),
                            serde_json::Number::from_f64(top.logprob).map_or(Value::Null, Value::Number),
                        )
                    })
                    .collect();
                tops.push(Some(map));
            }
        }
        out.top_logprobs = any_top.then_some(tops);
        Some(out)
    }
}

/// Reads a `text_completion` body: choice 0 is the response, the others
/// (`n > 1`) its `choices`.
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
    let mut choices = wire.choices.unwrap_or_default();
    if choices.len() > 1 {
        choices.sort_by_key(|c| c.index.unwrap_or(0));
    }
    let mut choices = choices.into_iter().map(|choice| Choice {
        stop_reason: choice.finish_reason.as_deref().map(stop_reason_from_finish),
        content: choice.text.filter(|text| !text.is_empty()).map(Block::text).into_iter().collect(),
        logprobs: choice.logprobs.map(CompletionLogprobs::into_ir).unwrap_or_default(),
    });
    if let Some(first) = choices.next() {
        response.stop_reason = first.stop_reason;
        response.content = first.content;
        response.logprobs = first.logprobs;
    }
    response.choices = choices.collect();
    Ok(response)
}

#[derive(Serialize)]
struct OutCompletion<'a> {
    id: &'a str,
    object: &'static str,
    created: i64,
    model: &'a str,
    choices: Vec<OutChoice>,
    usage: WireUsage,
}

#[derive(Serialize)]
pub(crate) struct OutChoice {
    pub text: String,
    pub index: u32,
    pub logprobs: Option<CompletionLogprobs>,
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

/// Writes a `text_completion` body: each reply's text blocks joined into
/// its choice's `text`; what a completion has no place for (reasoning,
/// tool calls) is reported.
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
    let out = OutCompletion {
        id: &response.id,
        object: OBJECT,
        created: response.created.unwrap_or(0),
        model: &response.model,
        choices,
        usage: WireUsage::from_ir(&response.usage),
    };
    Encoded { body: switchyard_codec::json::to_vec(&out), dropped }
}

fn out_choice(
    index: u32,
    blocks: &[Block],
    stop_reason: Option<StopReason>,
    tokens: &[TokenLogprob],
    dropped: &mut Vec<Dropped>,
) -> OutChoice {
    let mut text = String::new();
    for block in blocks {
        match block {
            Block::Text(block) => {
                if !block.citations.is_empty() {
                    report(dropped, Field::Citations);
                }
                text.push_str(&block.text);
            }
            Block::Thinking { .. } => report(dropped, Field::Thinking),
            Block::RedactedThinking { .. } => report(dropped, Field::RedactedThinking),
            Block::ToolUse(_)
            | Block::Image { .. }
            | Block::Audio { .. }
            | Block::Document { .. }
            | Block::ToolResult(_)
            | Block::Unmodelled(_) => report(dropped, Field::MisplacedBlock),
        }
    }
    OutChoice {
        text,
        index,
        logprobs: CompletionLogprobs::from_ir(tokens, 0),
        finish_reason: stop_reason.map(finish_of),
    }
}
