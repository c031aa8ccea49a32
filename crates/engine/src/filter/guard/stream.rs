//! A stream's reply guardrails: each content block's text screened as it
//! comes, held back at most the longest rule's reach (`StreamMask`), and
//! reversible placeholders put back (`Restorer`). A reasoning block's
//! signature comes at its end, so its text is screened as signed text may
//! be: released while no rule would mask it; from a match a mask would
//! change on, held to the block's end, then refused if the block turned
//! out signed (its vendor refuses signed reasoning rewritten), or masked
//! and released if not. Reasoning keeps the placeholders the model saw.

use std::sync::Arc;

use switchyard_guard::stream::{Restorer, StreamMask};
use switchyard_guard::{Blocked, Decision, Masks, Screen};
use switchyard_ir::{Delta, StreamEvent};

/// A stream's reply guardrails: one hold-back per content block.
pub(crate) struct StreamGuard {
    screen: Arc<Screen>,
    /// Each open block.
    blocks: Vec<Open>,
    decisions: Vec<Decision>,
    /// Decisions already told to the record.
    told: usize,
    /// The events' buffer between calls (one allocation per stream).
    spare: Vec<StreamEvent>,
}

/// An open content block: its mask and restorer, the kind of its deltas,
/// and for reasoning whether a signature came and what a mask withholds.
struct Open {
    index: u32,
    kind: DeltaKind,
    mask: StreamMask,
    restorer: Restorer,
    /// A signature came for it.
    signed: bool,
    /// Reasoning a mask would change, held to the block's end (not yet
    /// known signed), and the refusal if it turns out signed.
    withheld: Option<(String, Blocked)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
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

impl Open {
    /// Takes `text` (the block's next delta, replaced by what may be
    /// released now), or the refusal.
    fn push(&mut self, text: &mut String, masks: &mut Masks, decisions: &mut Vec<Decision>) -> Result<(), Blocked> {
        if let Some((held, _)) = self.withheld.as_mut() {
            held.push_str(text);
            text.clear();
            return Ok(());
        }
        let pushed = self.mask.push_in_place(text, masks, decisions);
        self.settle(pushed)?;
        // Only reversible placeholders are put back, never in reasoning.
        if masks.restores() && self.kind != DeltaKind::Thinking {
            *text = self.restorer.push(text, masks);
        }
        Ok(())
    }

    /// A reasoning block's mask stopped where it would change the text:
    /// refused when the block is known signed, else held to its end.
    fn settle(&mut self, outcome: Result<(), Blocked>) -> Result<(), Blocked> {
        match outcome {
            Err(blocked) if blocked.signed && !self.signed => {
                self.withheld = Some((self.mask.take_held(), blocked));
                Ok(())
            }
            other => other,
        }
    }

    /// A signature came for the block: what it withholds is refused.
    fn sign(&mut self) -> Result<(), Blocked> {
        self.signed = true;
        match self.withheld.take() {
            Some((_, blocked)) => Err(blocked),
            None => Ok(()),
        }
    }

    /// The block ended: the rest of its text, decided.
    fn finish(
        mut self,
        screen: &Arc<Screen>,
        masks: &mut Masks,
        decisions: &mut Vec<Decision>,
    ) -> Result<String, Blocked> {
        if self.withheld.is_none() {
            let flushed = self.mask.flush(masks, decisions);
            let rest = match flushed {
                Ok(rest) => rest,
                Err(blocked) => {
                    self.settle(Err(blocked))?;
                    String::new()
                }
            };
            if self.withheld.is_none() {
                if self.kind == DeltaKind::Thinking {
                    return Ok(rest);
                }
                let mut rest = self.restorer.push(&rest, masks);
                rest.push_str(&self.restorer.flush(masks));
                return Ok(rest);
            }
        }
        // Unsigned reasoning: masked like any text.
        let held = self.withheld.take().map(|(held, _)| held).unwrap_or_default();
        let mut mask = StreamMask::new(screen.clone());
        let mut rest = mask.push(&held, masks, decisions)?;
        rest.push_str(&mask.flush(masks, decisions)?);
        Ok(rest)
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
        self.blocks.iter().any(|open| open.mask.held() > 0 || open.withheld.is_some())
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
                StreamEvent::BlockDelta { index, delta: Delta::Signature(signature) } => {
                    match self.blocks.iter_mut().find(|open| open.index == index) {
                        Some(open) => open.sign()?,
                        // Signed before its text came (or with none).
                        None => self.blocks.push(Open {
                            index,
                            kind: DeltaKind::Thinking,
                            mask: StreamMask::signed(self.screen.clone()),
                            restorer: Restorer::default(),
                            signed: true,
                            withheld: None,
                        }),
                    }
                    out.push(StreamEvent::BlockDelta { index, delta: Delta::Signature(signature) });
                }
                StreamEvent::BlockDelta { index, delta } => {
                    let (kind, mut text) = match delta {
                        Delta::Text(text) => (DeltaKind::Text, text),
                        Delta::Thinking(text) => (DeltaKind::Thinking, text),
                        Delta::ToolInput(text) => (DeltaKind::ToolInput, text),
                        // The tokens spell the text as it was, unscreened:
                        // a screened stream goes without them.
                        Delta::Logprobs(_) => continue,
                        other => {
                            out.push(StreamEvent::BlockDelta { index, delta: other });
                            continue;
                        }
                    };
                    let at = match self.blocks.iter().position(|open| open.index == index) {
                        Some(at) => at,
                        None => {
                            let mask = match kind {
                                DeltaKind::Thinking => StreamMask::signed(self.screen.clone()),
                                _ => StreamMask::new(self.screen.clone()),
                            };
                            let restorer = Restorer::default();
                            self.blocks.push(Open { index, kind, mask, restorer, signed: false, withheld: None });
                            self.blocks.len() - 1
                        }
                    };
                    self.blocks[at].push(&mut text, masks, &mut self.decisions)?;
                    if !text.is_empty() {
                        out.push(StreamEvent::BlockDelta { index, delta: kind.delta(text) });
                    }
                }
                StreamEvent::BlockStop { index } => {
                    if let Some(at) = self.blocks.iter().position(|open| open.index == index) {
                        let open = self.blocks.swap_remove(at);
                        let kind = open.kind;
                        let rest = open.finish(&self.screen, masks, &mut self.decisions)?;
                        if !rest.is_empty() {
                            out.push(StreamEvent::BlockDelta { index, delta: kind.delta(rest) });
                        }
                    }
                    out.push(StreamEvent::BlockStop { index });
                }
                event @ (StreamEvent::MessageDelta { .. } | StreamEvent::MessageStop) => {
                    // A block the stream never closed is released before the end.
                    for open in std::mem::take(&mut self.blocks) {
                        let (index, kind) = (open.index, open.kind);
                        let rest = open.finish(&self.screen, masks, &mut self.decisions)?;
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
