//! Retention as a filter: what the caller's group keeps of its requests'
//! text (`retention:`; `state::retention` seals and writes it behind). The
//! request is kept as it goes upstream (after its guardrails), the reply as
//! the caller got it: a whole reply's bytes, or a stream's frames up to
//! [`KEPT_STREAM_BYTES`]. The record hands them to the content writer
//! under its ledger entry when it settles.
//!
//! Reads: the call's body, the bytes the caller is sent. Writes: the
//! record's kept text.

use switchyard_ir::ErrorInfo;
use switchyard_state::call::Call;
use switchyard_state::Gateway;

use super::{Ended, Filter, FilterFuture, ReplyCx};
use crate::render::Whole;
use crate::settle::Record;

/// The most of a stream's frames a group's retention keeps.
pub(crate) const KEPT_STREAM_BYTES: usize = 1 << 20;

/// A request's retention.
pub(crate) struct Retention {
    /// The caller's group keeps text (known once admitted).
    keeps: bool,
    /// A stream's frames so far.
    frames: Vec<u8>,
}

impl Retention {
    /// Retention, when the config keeps any group's text.
    pub(crate) fn of(gateway: &Gateway) -> Option<Retention> {
        gateway.retention.as_ref()?;
        Some(Retention { keeps: false, frames: Vec::new() })
    }
}

impl Filter for Retention {
    fn name(&self) -> &'static str {
        "retention"
    }

    fn before_send<'a>(
        &'a mut self,
        call: &'a Call,
        record: &'a mut Record,
    ) -> Option<FilterFuture<'a, Result<(), ErrorInfo>>> {
        self.keeps = record.retains();
        if self.keeps {
            record.retain_request(&call.body);
        }
        None
    }

    fn on_sent(&mut self, bytes: &[u8]) {
        if self.keeps && self.frames.len() + bytes.len() <= KEPT_STREAM_BYTES {
            self.frames.extend_from_slice(bytes);
        }
    }

    fn on_whole(&mut self, whole: &mut Whole, cx: &mut ReplyCx<'_>) -> Result<(), ErrorInfo> {
        if self.keeps {
            cx.record.retain_reply(&whole.body);
        }
        Ok(())
    }

    fn on_end<'a>(&'a mut self, _ended: Ended, cx: &mut ReplyCx<'_>) -> Option<FilterFuture<'a, ()>> {
        if self.keeps {
            cx.record.retain_stream(bytes::Bytes::from(std::mem::take(&mut self.frames)));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streams_frames_are_kept_only_for_a_group_that_keeps_text_and_only_so_many() {
        let mut off = Retention { keeps: false, frames: Vec::new() };
        off.on_sent(b"data: hi\n\n");
        assert!(off.frames.is_empty(), "a group that keeps nothing keeps no frames");
        let mut on = Retention { keeps: true, frames: Vec::new() };
        on.on_sent(b"data: hi\n\n");
        let big = vec![b'x'; KEPT_STREAM_BYTES];
        on.on_sent(&big);
        on.on_sent(b"data: bye\n\n");
        assert_eq!(on.frames, b"data: hi\n\ndata: bye\n\n", "a frame past the cap is left out whole");
    }
}
