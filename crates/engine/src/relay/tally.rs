//! What a relayed stream must know of its events: its usage for metering,
//! how it ended, and what was delivered for an estimate when the upstream
//! never reports usage.

use switchyard_ir::{StopReason, StreamEvent, Usage};

use crate::settle::Estimated;

/// What a relayed stream must know of its events: usage for metering, and
/// whether it ended (an `Accumulator` would also copy every delta's text).
#[derive(Default)]
pub(crate) struct Tally {
    pub(super) usage: Usage,
    /// Usage of the parts before a continuation.
    pub(super) before: Usage,
    pub(super) stop_reason: Option<StopReason>,
    pub(super) finished: bool,
    pub(super) failed: bool,
    /// Content deltas decoded (translated streams), for an estimate of what
    /// was delivered when the upstream never reports usage.
    pub(super) deltas: u64,
    /// SSE events passed through verbatim (each is about one token).
    pub(super) delivered_events: u64,
}

impl Tally {
    pub(super) fn push(&mut self, event: &StreamEvent) {
        match event {
            StreamEvent::MessageStart { usage, .. } => self.usage.merge(usage),
            StreamEvent::MessageDelta { usage, stop_reason, .. } => {
                self.usage.merge(usage);
                if stop_reason.is_some() {
                    self.stop_reason = *stop_reason;
                }
            }
            StreamEvent::MessageStop => self.finished = true,
            StreamEvent::Error(_) => self.failed = true,
            StreamEvent::BlockDelta { .. } => self.deltas += 1,
            StreamEvent::BlockStart { .. } | StreamEvent::BlockStop { .. } => {}
        }
    }

    pub(super) fn ended(&self) -> bool {
        self.finished || self.failed
    }

    /// What the part streaming now delivered, for a bill without the
    /// upstream's usage: its usage, else an estimate from the prompt and
    /// the deltas, marked estimated for `why`.
    pub(super) fn delivered(&self, input_estimate: u64, why: Estimated) -> (Usage, Option<Estimated>) {
        let mut usage = self.usage;
        if usage.output_tokens != 0 {
            return (usage, None);
        }
        usage.output_tokens = self.deltas.max(self.delivered_events);
        if usage.input_tokens == 0 {
            usage.input_tokens = input_estimate;
        }
        (usage, Some(why))
    }
}
