//! Reasoning on Chat Completions, which has no field of its own for it:
//! the text in `reasoning_content` (what OpenAI-compatible reasoning servers
//! send), and signed or redacted reasoning, which a Claude lane needs back
//! on the next turn of a tool loop, in `thinking_blocks`, the convention
//! OpenAI-compatible gateways use for Anthropic's blocks
//! (`{"type": "thinking", "thinking", "signature"}` and
//! `{"type": "redacted_thinking", "data"}`). A caller that echoes its
//! assistant message whole sends them back, and the reader puts them back
//! in order before the message's text.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_codec::ir::Block;
use switchyard_codec::DecodeError;

/// One entry of `thinking_blocks`, as read.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireThinking {
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: Option<String>,
    },
    RedactedThinking {
        data: String,
    },
}

/// One entry of `thinking_blocks`, as written.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum OutThinking<'a> {
    Thinking { thinking: &'a str, signature: &'a str },
    RedactedThinking { data: &'a str },
}

/// The blocks of a `thinking_blocks` array; `path` names it for errors.
pub(crate) fn read_blocks(value: Value, path: &str) -> Result<Vec<Block>, DecodeError> {
    let entries: Vec<WireThinking> = serde_json::from_value(value).map_err(|err| {
        DecodeError::invalid(path, format!("thinking_blocks must be thinking or redacted_thinking blocks: {err}"))
    })?;
    Ok(entries
        .into_iter()
        .map(|entry| match entry {
            WireThinking::Thinking { thinking, signature } => {
                Block::Thinking { text: thinking, signature: signature.filter(|s| !s.is_empty()) }
            }
            WireThinking::RedactedThinking { data } => Block::RedactedThinking { data },
        })
        .collect())
}

/// The reasoning text of `blocks`, joined (`reasoning_content`), if any.
pub(crate) fn reasoning_text(blocks: &[Block]) -> Option<String> {
    let mut text = String::new();
    for block in blocks {
        if let Block::Thinking { text: more, .. } = block {
            text.push_str(more);
        }
    }
    (!text.is_empty()).then_some(text)
}

/// `thinking_blocks` for `blocks`: written only when some reasoning is
/// signed or redacted (plain text needs nothing past `reasoning_content`).
pub(crate) fn out_blocks(blocks: &[Block]) -> Vec<OutThinking<'_>> {
    let needed = blocks
        .iter()
        .any(|block| matches!(block, Block::Thinking { signature: Some(_), .. } | Block::RedactedThinking { .. }));
    if !needed {
        return Vec::new();
    }
    blocks
        .iter()
        .filter_map(|block| match block {
            Block::Thinking { text, signature: Some(signature) } => {
                Some(OutThinking::Thinking { thinking: text, signature })
            }
            Block::RedactedThinking { data } => Some(OutThinking::RedactedThinking { data }),
            _ => None,
        })
        .collect()
}

/// What a Claude lane lets go of a past turn's reasoning, carried in
/// `thinking_blocks` (`switchyard_codec::opaque::PastReasoning`): the
/// message's reasoning fields.
pub(crate) static PAST_REASONING: switchyard_codec::opaque::PastReasoning =
    switchyard_codec::opaque::PastReasoning { opens_turn, signed_texts, strip: strip_reasoning };

/// A user message (tool results come as `tool` messages): a turn's first.
fn opens_turn(message: &Value) -> bool {
    message.get("role").and_then(Value::as_str) == Some("user")
}

/// The texts of an assistant message's signed thinking blocks.
fn signed_texts(message: &Value) -> Vec<&str> {
    let blocks = message.get("thinking_blocks").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("thinking"))
        .filter(|b| b.get("signature").and_then(Value::as_str).is_some_and(|s| !s.is_empty()))
        .filter_map(|b| b.get("thinking").and_then(Value::as_str))
        .collect()
}

/// Takes an assistant message's reasoning fields out (its text fields too:
/// without its blocks the reader would take them as reasoning); none when
/// it would be left with neither content nor calls.
fn strip_reasoning(message: &mut Value) -> Vec<String> {
    let Some(message) = message.as_object_mut() else { return Vec::new() };
    let content = match message.get("content") {
        None | Some(Value::Null) => false,
        Some(Value::String(text)) => !text.is_empty(),
        Some(Value::Array(parts)) => !parts.is_empty(),
        Some(_) => true,
    };
    let calls = message.get("tool_calls").and_then(Value::as_array).is_some_and(|calls| !calls.is_empty());
    if !content && !calls {
        return Vec::new();
    }
    ["thinking_blocks", "reasoning_content", "reasoning"]
        .into_iter()
        .filter(|key| message.shift_remove(*key).is_some())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn signed_and_redacted_reasoning_round_trips_through_thinking_blocks() {
        let blocks = vec![
            Block::Thinking { text: "let me see".into(), signature: Some("EqQBCkYI".into()) },
            Block::RedactedThinking { data: "EmwKAhgB".into() },
            Block::text("answer"),
        ];
        let written = serde_json::to_value(out_blocks(&blocks)).unwrap_or_default();
        assert_eq!(
            written,
            json!([
                {"type": "thinking", "thinking": "let me see", "signature": "EqQBCkYI"},
                {"type": "redacted_thinking", "data": "EmwKAhgB"}
            ])
        );
        let read = read_blocks(written, "messages[1].thinking_blocks").unwrap_or_default();
        assert_eq!(read, blocks[..2]);
        assert_eq!(reasoning_text(&blocks).as_deref(), Some("let me see"));
    }

    #[test]
    fn unsigned_reasoning_needs_no_thinking_blocks() {
        let blocks = vec![Block::Thinking { text: "plain".into(), signature: None }];
        assert!(out_blocks(&blocks).is_empty());
        assert!(read_blocks(json!([{"type": "other"}]), "p").is_err());
    }
}
