//! Conversions of the item kinds shared by requests (assistant history),
//! responses and streams: assistant text parts, function calls, reasoning.

use serde_json::{json, Map, Value};
use switchyard_codec::ir::{self, Block, Dropped, Field, Protocol};
use switchyard_codec::{call_id, signature};

use crate::wire::text_of;

/// Joins the summary parts of one reasoning item into one IR thinking text
/// (the IR has one text per thinking block).
pub(crate) const SUMMARY_SEPARATOR: &str = "\n\n";

/// A reasoning item → a thinking block: summaries (then raw reasoning text)
/// become the text, `encrypted_content` the signature; an item with only
/// encrypted content is redacted thinking, unless it is the carrier of the
/// next call's thought signature (`switchyard_codec::signature`), which
/// reads as a signature-only thinking block for `attach_carried`.
pub(crate) fn read_reasoning(item: &Map<String, Value>) -> Block {
    let parts = reasoning_texts(item);
    let encrypted = text_of(item, "encrypted_content").map(str::to_owned);
    match encrypted {
        Some(data) if parts.is_empty() && signature::from_reasoning(&data).is_none() => {
            Block::RedactedThinking { data }
        }
        signature => Block::Thinking { text: parts.join(SUMMARY_SEPARATOR), signature },
    }
}

/// The reasoning item that carries a call's thought signature to a
/// Responses caller, whose 64-character call ids cannot hold one.
pub(crate) fn signature_carrier(signature: &str) -> Map<String, Value> {
    let mut item = Map::new();
    item.insert("type".into(), json!("reasoning"));
    item.insert("summary".into(), json!([]));
    item.insert("encrypted_content".into(), json!(signature::in_reasoning(signature)));
    item
}

/// The texts of a reasoning item's summary parts, then of its raw
/// `reasoning_text` content parts.
pub(crate) fn reasoning_texts(item: &Map<String, Value>) -> Vec<String> {
    ["summary", "content"]
        .iter()
        .filter_map(|key| item.get(*key).and_then(Value::as_array))
        .flatten()
        .filter_map(|part| part.get("text").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

/// A thinking or redacted-thinking block → a reasoning item (without `id`:
/// the API takes reasoning back by its encrypted content).
pub(crate) fn write_reasoning(block: &Block) -> Option<Map<String, Value>> {
    let mut item = Map::new();
    item.insert("type".into(), json!("reasoning"));
    match block {
        Block::Thinking { text, signature } => {
            let summary =
                if text.is_empty() { Vec::new() } else { vec![json!({"type": "summary_text", "text": text})] };
            item.insert("summary".into(), Value::Array(summary));
            if let Some(signature) = signature {
                item.insert("encrypted_content".into(), json!(signature));
            }
        }
        Block::RedactedThinking { data } => {
            item.insert("summary".into(), json!([]));
            item.insert("encrypted_content".into(), json!(data));
        }
        _ => return None,
    }
    Some(item)
}

/// A function-call item → a tool use (`call_id` is the IR id, the lane's
/// when a caller sends back one it was handed: `call_id::restore`; the
/// item's own `id` is not kept).
pub(crate) fn read_function_call(item: &Map<String, Value>) -> ir::ToolUse {
    ir::ToolUse::new(
        call_id::restore(text_of(item, "call_id").unwrap_or_default(), Protocol::Responses),
        text_of(item, "name").unwrap_or_default(),
        text_of(item, "arguments").unwrap_or_default(),
    )
}

/// A tool use → a function-call item body under `call_id` (the call's own
/// for a lane, minted for a caller) with no `id` (callers add one where the
/// wire requires it).
pub(crate) fn write_function_call(call: &ir::ToolUse, call_id: &str) -> Map<String, Value> {
    let mut item = Map::new();
    item.insert("type".into(), json!("function_call"));
    item.insert("call_id".into(), json!(call_id));
    item.insert("name".into(), json!(call.name));
    item.insert("arguments".into(), json!(call.input));
    item
}

/// An assistant content part (`output_text` or `refusal`) → a text block.
/// Returns the block and whether it was a refusal.
pub(crate) fn read_output_part(part: &Map<String, Value>) -> Option<(ir::TextBlock, bool)> {
    match text_of(part, "type") {
        Some("output_text") | Some("text") | Some("input_text") => {
            let mut block = ir::TextBlock::new(text_of(part, "text").unwrap_or_default());
            if let Some(annotations) = part.get("annotations").and_then(Value::as_array) {
                block.citations.clone_from(annotations);
            }
            Some((block, false))
        }
        Some("refusal") => Some((ir::TextBlock::new(text_of(part, "refusal").unwrap_or_default()), true)),
        _ => None,
    }
}

/// A text block → an `output_text` part. Citations become annotations only
/// when they are Responses annotations; another protocol's citations would
/// not validate here.
pub(crate) fn write_output_text(text: &ir::TextBlock, dropped: &mut Vec<Dropped>) -> Value {
    let annotations = if text.citations.iter().all(is_annotation) {
        text.citations.clone()
    } else {
        Dropped::push_once(dropped, Field::Citations, ir::DropReason::Unsupported);
        Vec::new()
    };
    json!({"type": "output_text", "text": text.text, "annotations": annotations})
}

/// True for a Responses `output_text` annotation.
fn is_annotation(value: &Value) -> bool {
    matches!(
        value.get("type").and_then(Value::as_str),
        Some("file_citation" | "url_citation" | "container_file_citation" | "file_path")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn reasoning_with_only_encrypted_content_is_redacted() {
        let item = object(json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"}));
        assert_eq!(read_reasoning(&item), Block::RedactedThinking { data: "enc".into() });
    }

    #[test]
    fn reasoning_summaries_join_and_keep_the_signature() {
        let item = object(json!({
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}],
            "encrypted_content": "enc"
        }));
        assert_eq!(read_reasoning(&item), Block::Thinking { text: "a\n\nb".into(), signature: Some("enc".into()) });
    }

    #[test]
    fn foreign_citations_are_dropped_and_reported() {
        let mut text = ir::TextBlock::new("t");
        text.citations = vec![json!({"type": "char_location", "cited_text": "x"})];
        let mut dropped = Vec::new();
        let part = write_output_text(&text, &mut dropped);
        assert_eq!(part["annotations"], json!([]));
        assert_eq!(dropped.len(), 1);
    }
}
