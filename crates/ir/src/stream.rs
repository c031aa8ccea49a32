//! Stream events: the protocol-neutral shape of a streamed reply.
//!
//! The event grammar is Anthropic's, the richest of the six:
//! `MessageStart (BlockStart BlockDelta* BlockStop)* MessageDelta? MessageStop`,
//! with `Error` allowed anywhere and ending the stream. Block indexes are
//! dense, start at 0 and grow by one per block. Readers of flat protocols
//! (OpenAI Chat, Cohere, Gemini) synthesise the block events; writers of flat
//! protocols fold them back.

use serde::{Deserialize, Serialize};

use crate::{ErrorInfo, StopReason, TokenLogprob, Usage};

/// One event of a streamed reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StreamEvent {
    /// The reply begins.
    MessageStart {
        /// The vendor's response id.
        id: String,
        /// The model that serves it.
        model: String,
        /// Unix seconds, when known.
        created: Option<i64>,
        /// Usage known at the start (input tokens on some protocols).
        usage: Usage,
    },
    /// A content block opens.
    BlockStart {
        /// Dense block index.
        index: u32,
        /// What kind of block.
        block: BlockStart,
    },
    /// A piece of the open block.
    BlockDelta {
        /// Dense block index.
        index: u32,
        /// The piece.
        delta: Delta,
    },
    /// A content block closes.
    BlockStop {
        /// Dense block index.
        index: u32,
    },
    /// End-of-message facts: stop reason and cumulative usage.
    MessageDelta {
        /// Why generation stopped.
        stop_reason: Option<StopReason>,
        /// The stop sequence that matched.
        stop_sequence: Option<String>,
        /// Cumulative usage so far (counts that are zero are unknown).
        usage: Usage,
    },
    /// The reply is complete.
    MessageStop,
    /// The stream failed; nothing follows.
    Error(ErrorInfo),
}

/// The kind of a block that opens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BlockStart {
    /// Text follows as `Delta::Text`.
    Text,
    /// Reasoning follows as `Delta::Thinking` and `Delta::Signature`.
    Thinking,
    /// Encrypted reasoning, complete in the start event.
    RedactedThinking {
        /// Opaque data.
        data: String,
    },
    /// A tool call; arguments follow as `Delta::ToolInput`.
    ToolUse {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// The vendor's signature of the call (`ToolUse::signature`), known
        /// when the call starts so a caller's encoder can fold it into the id.
        signature: Option<String>,
    },
}

/// A piece of an open block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Delta {
    /// More text.
    Text(String),
    /// More reasoning.
    Thinking(String),
    /// The reasoning block's signature.
    Signature(String),
    /// More tool-call argument JSON text.
    ToolInput(String),
    /// The log probabilities of the text block's next tokens (after or
    /// beside the `Text` they cover), when the request asked for them.
    Logprobs(Vec<TokenLogprob>),
}

/// Replays a complete response as the canonical event sequence (used to
/// stream a reply that arrived whole, and by the vendor fake).
pub fn events_from_response(response: &crate::Response) -> Vec<StreamEvent> {
    use crate::Block;
    let mut events = vec![StreamEvent::MessageStart {
        id: response.id.clone(),
        model: response.model.clone(),
        created: response.created,
        usage: response.usage.prompt_side(),
    }];
    let mut index = 0u32;
    let mut logprobs = (!response.logprobs.is_empty()).then(|| response.logprobs.clone());
    for block in &response.content {
        let (start, deltas) = match block {
            Block::Text(text) => {
                let mut deltas = vec![Delta::Text(text.text.clone())];
                // The reply's log probabilities ride with its first text.
                deltas.extend(logprobs.take().map(Delta::Logprobs));
                (BlockStart::Text, deltas)
            }
            Block::Thinking { text, signature } => {
                let mut deltas = vec![Delta::Thinking(text.clone())];
                if let Some(signature) = signature {
                    deltas.push(Delta::Signature(signature.clone()));
                }
                (BlockStart::Thinking, deltas)
            }
            Block::RedactedThinking { data } => (BlockStart::RedactedThinking { data: data.clone() }, Vec::new()),
            Block::ToolUse(call) => (
                BlockStart::ToolUse { id: call.id.clone(), name: call.name.clone(), signature: call.signature.clone() },
                vec![Delta::ToolInput(call.input.clone())],
            ),
            // Media, tool results and blocks of a caller's own never
            // appear in a model's reply.
            Block::Image { .. }
            | Block::Audio { .. }
            | Block::Document { .. }
            | Block::ToolResult(_)
            | Block::Unmodelled(_) => continue,
        };
        events.push(StreamEvent::BlockStart { index, block: start });
        events.extend(deltas.into_iter().map(|delta| StreamEvent::BlockDelta { index, delta }));
        events.push(StreamEvent::BlockStop { index });
        index += 1;
    }
    events.push(StreamEvent::MessageDelta {
        stop_reason: response.stop_reason,
        stop_sequence: response.stop_sequence.clone(),
        usage: response.usage,
    });
    events.push(StreamEvent::MessageStop);
    events
}

/// Folds stream events back into a complete response (the inverse of
/// [`events_from_response`]; also how a stream's usage is metered).
#[derive(Debug, Default)]
pub struct Accumulator {
    response: crate::Response,
    /// Block index → position in `response.content`.
    open: Vec<(u32, usize)>,
    finished: bool,
    error: Option<ErrorInfo>,
}

impl Accumulator {
    /// An empty accumulator.
    pub fn new() -> Accumulator {
        Accumulator::default()
    }

    /// Applies one event.
    pub fn push(&mut self, event: &StreamEvent) {
        use crate::{Block, TextBlock, ToolUse};
        match event {
            StreamEvent::MessageStart { id, model, created, usage } => {
                self.response.id.clone_from(id);
                self.response.model.clone_from(model);
                self.response.created = *created;
                self.response.usage.merge(usage);
            }
            StreamEvent::BlockStart { index, block } => {
                let block = match block {
                    BlockStart::Text => Block::Text(TextBlock::default()),
                    BlockStart::Thinking => Block::Thinking { text: String::new(), signature: None },
                    BlockStart::RedactedThinking { data } => Block::RedactedThinking { data: data.clone() },
                    BlockStart::ToolUse { id, name, signature } => Block::ToolUse(ToolUse {
                        id: id.clone(),
                        name: name.clone(),
                        input: String::new(),
                        signature: signature.clone(),
                    }),
                };
                self.open.push((*index, self.response.content.len()));
                self.response.content.push(block);
            }
            StreamEvent::BlockDelta { delta: Delta::Logprobs(more), .. } => {
                self.response.logprobs.extend(more.iter().cloned());
            }
            StreamEvent::BlockDelta { index, delta } => {
                let Some(&(_, position)) = self.open.iter().rev().find(|(i, _)| i == index) else {
                    return;
                };
                let Some(block) = self.response.content.get_mut(position) else {
                    return;
                };
                match (block, delta) {
                    (Block::Text(text), Delta::Text(more)) => text.text.push_str(more),
                    (Block::Thinking { text, .. }, Delta::Thinking(more)) => text.push_str(more),
                    (Block::Thinking { signature, .. }, Delta::Signature(more)) => {
                        signature.get_or_insert_with(String::new).push_str(more);
                    }
                    (Block::ToolUse(call), Delta::ToolInput(more)) => call.input.push_str(more),
                    _ => {}
                }
            }
            StreamEvent::BlockStop { .. } => {}
            StreamEvent::MessageDelta { stop_reason, stop_sequence, usage } => {
                if stop_reason.is_some() {
                    self.response.stop_reason = *stop_reason;
                }
                if stop_sequence.is_some() {
                    self.response.stop_sequence.clone_from(stop_sequence);
                }
                self.response.usage.merge(usage);
            }
            StreamEvent::MessageStop => self.finished = true,
            StreamEvent::Error(error) => self.error = Some(error.clone()),
        }
    }

    /// Usage seen so far.
    pub fn usage(&self) -> &Usage {
        &self.response.usage
    }

    /// True once `MessageStop` arrived.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The in-stream error, if one arrived.
    pub fn error(&self) -> Option<&ErrorInfo> {
        self.error.as_ref()
    }

    /// The response assembled so far.
    pub fn into_response(self) -> crate::Response {
        self.response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Block, Response, StopReason, ToolUse};

    #[test]
    fn replay_then_accumulate_is_identity() {
        let response = Response {
            id: "msg_1".into(),
            model: "m".into(),
            created: Some(7),
            content: vec![
                Block::Thinking { text: "hmm".into(), signature: Some("sig".into()) },
                Block::text("hello"),
                Block::ToolUse(ToolUse {
                    id: "t1".into(),
                    name: "f".into(),
                    input: "{\"a\":1}".into(),
                    signature: Some("c2ln".into()),
                }),
            ],
            stop_reason: Some(StopReason::ToolUse),
            stop_sequence: None,
            usage: Usage { input_tokens: 10, output_tokens: 5, ..Usage::default() },
            logprobs: vec![crate::TokenLogprob {
                token: "hello".into(),
                logprob: -0.25,
                top: vec![crate::TopLogprob { token: "hi".into(), logprob: -1.5, ..Default::default() }],
                ..Default::default()
            }],
            choices: Vec::new(),
        };
        let mut acc = Accumulator::new();
        for event in events_from_response(&response) {
            acc.push(&event);
        }
        assert!(acc.is_finished());
        assert_eq!(acc.into_response(), response);
    }
}
