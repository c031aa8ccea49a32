//! A stream's reply guardrails: each content block's text screened as it
//! comes, held back at most the longest rule's reach (`StreamMask`), and
//! reversible placeholders put back (`Restorer`).

use std::sync::Arc;

use switchyard_guard::stream::{Restorer, StreamMask};
use switchyard_guard::{Blocked, Decision, Masks, Screen};
use switchyard_ir::{Delta, StreamEvent};

/// A stream's reply guardrails: one hold-back per content block.
pub(crate) struct StreamGuard {
    screen: Arc<Screen>,
    /// Each open block's mask and restorer, and the kind of its deltas.
    blocks: Vec<(u32, DeltaKind, StreamMask, Restorer)>,
    decisions: Vec<Decision>,
    /// Decisions already told to the record.
    told: usize,
    /// The events' buffer between calls (one allocation per stream).
    spare: Vec<StreamEvent>,
}

#[derive(Clone, Copy)]
enum DeltaKind {
    Text,
    Thinking,
    ToolInput,
}

impl DeltaKind {
    fn delta(self, text: String) -> Delta {
        match self {
            DeltaKind::Text => Delta::Text(text),
            DeltaKind::Thinking => Delta::Thinking(text),
            DeltaKind::ToolInput => Delta::ToolInput(text),
        }
    }
}

impl StreamGuard {
    pub(crate) fn new(screen: Arc<Screen>) -> StreamGuard {
        StreamGuard { screen, blocks: Vec::new(), decisions: Vec::new(), told: 0, spare: Vec::new() }
    }

    /// Screens `events` in place: content deltas masked (text that could
    /// still become a match is held, and released at its block's end), or
    /// the rule that blocks the reply.
    pub(crate) fn screen(&mut self, events: &mut Vec<StreamEvent>, masks: &mut Masks) -> Result<(), Blocked> {
        self.apply(events, masks)
    }

    /// Decisions made since the record was last told.
    pub(crate) fn decided(&self) -> bool {
        self.decisions.len() > self.told
    }

    /// The decisions the record has not been told yet.
    pub(crate) fn take_decisions(&mut self) -> &[Decision] {
        let new = &self.decisions[self.told..];
        self.told = self.decisions.len();
        new
    }

    /// Text is held back now (not yet sent to the caller).
    pub(crate) fn holds(&self) -> bool {
        self.blocks.iter().any(|(_, _, mask, _)| mask.held() > 0)
    }

    /// The stream goes on on another lane from the text the caller has:
    /// text still held back was never sent, and the next lane writes it
    /// again, so it is dropped (kept, it would come twice).
    pub(crate) fn drop_held(&mut self) {
        self.blocks.clear();
    }

    fn apply(&mut self, events: &mut Vec<StreamEvent>, masks: &mut Masks) -> Result<(), Blocked> {
        let mut out = std::mem::take(&mut self.spare);
        out.clear();
        for event in events.drain(..) {
            match event {
                StreamEvent::BlockDelta { index, delta } => {
                    let (kind, text) = match delta {
                        Delta::Text(text) => (DeltaKind::Text, text),
                        Delta::Thinking(text) => (DeltaKind::Thinking, text),
                        Delta::ToolInput(text) => (DeltaKind::ToolInput, text),
                        other => {
                            out.push(StreamEvent::BlockDelta { index, delta: other });
                            continue;
                        }
                    };
                    let at = match self.blocks.iter().position(|(i, _, _, _)| *i == index) {
                        Some(at) => at,
                        None => {
                            let mask = StreamMask::new(self.screen.clone());
                            self.blocks.push((index, kind, mask, Restorer::default()));
                            self.blocks.len() - 1
                        }
                    };
                    let (_, _, mask, restorer) = &mut self.blocks[at];
                    let mut released = text;
                    mask.push_in_place(&mut released, masks, &mut self.decisions)?;
                    // Only reversible placeholders are put back.
                    if masks.restores() {
                        released = restorer.push(&released, masks);
                    }
                    if !released.is_empty() {
                        out.push(StreamEvent::BlockDelta { index, delta: kind.delta(released) });
                    }
                }
                StreamEvent::BlockStop { index } => {
                    if let Some(at) = self.blocks.iter().position(|(i, _, _, _)| *i == index) {
                        let (_, kind, mut mask, mut restorer) = self.blocks.swap_remove(at);
                        let rest = mask.flush(masks, &mut self.decisions)?;
                        let mut rest = restorer.push(&rest, masks);
                        rest.push_str(&restorer.flush(masks));
                        if !rest.is_empty() {
                            out.push(StreamEvent::BlockDelta { index, delta: kind.delta(rest) });
                        }
                    }
                    out.push(StreamEvent::BlockStop { index });
                }
                event @ (StreamEvent::MessageDelta { .. } | StreamEvent::MessageStop) => {
                    // A block the stream never closed is released before the end.
                    for (index, kind, mut mask, mut restorer) in std::mem::take(&mut self.blocks) {
                        let rest = mask.flush(masks, &mut self.decisions)?;
                        let mut rest = restorer.push(&rest, masks);
                        rest.push_str(&restorer.flush(masks));
                        if !rest.is_empty() {
                            out.push(StreamEvent::BlockDelta { index, delta: kind.delta(rest) });
                        }
                    }
                    out.push(event);
                }
                other => out.push(other),
            }
        }
        self.spare = std::mem::replace(events, out);
        Ok(())
    }
}
