//! Keeping a Gemini lane's tool-call signatures for callers of other
//! protocols: a translated reply's signed calls are kept (by the caller's
//! key and call id; `state::signatures`) before the reply's last bytes
//! leave, so the caller's next turn, which its SDK sends back unsigned,
//! finds them (`crate::signatures::restore` puts them back).
//!
//! Reads: the reply's tool calls, the record's serving lane. Writes: the
//! signature store.

use std::sync::Arc;

use switchyard_ir::{BlockStart, ErrorInfo, Protocol, Response, StreamEvent};
use switchyard_state::call::Call;
use switchyard_state::Gateway;

use super::{Ended, Filter, FilterFuture, ReplyCx};

/// A request's signature keeping.
pub(crate) struct Signatures {
    gateway: Arc<Gateway>,
    owner: Option<Arc<str>>,
    /// A stream's signed calls: (id, signature).
    calls: Vec<(String, String)>,
}

impl Signatures {
    /// Keeping, for a chat request whose pool can reach a Gemini lane.
    pub(crate) fn of(gateway: &Arc<Gateway>, call: &Call, pool: usize) -> Option<Signatures> {
        if call.operation != switchyard_ir::Operation::Chat || !reaches_gemini(gateway, pool) {
            return None;
        }
        let owner = call.caller.as_ref().map(|caller| caller.owner.clone());
        Some(Signatures { gateway: gateway.clone(), owner, calls: Vec::new() })
    }
}

/// Whether `pool` or one of its fallbacks has a Gemini lane.
fn reaches_gemini(gateway: &Gateway, pool: usize) -> bool {
    let state = &gateway.pools[pool];
    std::iter::once(pool)
        .chain(state.fallback.iter().copied())
        .flat_map(|pool| gateway.pools[pool].members.iter())
        .any(|&lane| gateway.lanes[lane].protocol == Protocol::Gemini)
}

/// Whether the lane serving now speaks Gemini.
fn from_gemini(cx: &ReplyCx<'_>) -> bool {
    cx.record.serving_lane().and_then(|lane| cx.env.lane(lane)).is_some_and(|lane| lane.protocol == Protocol::Gemini)
}

impl Filter for Signatures {
    fn name(&self) -> &'static str {
        "signatures"
    }

    fn on_events(&mut self, events: &mut Vec<StreamEvent>, cx: &mut ReplyCx<'_>) -> Result<(), ErrorInfo> {
        if !from_gemini(cx) {
            return Ok(());
        }
        for event in events.iter() {
            if let StreamEvent::BlockStart {
                block: BlockStart::ToolUse { id, signature: Some(signature), .. }, ..
            } = event
            {
                self.calls.push((id.clone(), signature.clone()));
            }
        }
        Ok(())
    }

    fn on_reply<'a>(
        &'a mut self,
        reply: &'a mut Response,
        lane: Protocol,
        _cx: &mut ReplyCx<'_>,
    ) -> Option<FilterFuture<'a, ()>> {
        if lane != Protocol::Gemini {
            return None;
        }
        let calls = switchyard_codec::signature::signed_calls(&reply.content);
        Some(Box::pin(crate::signatures::keep_for(&self.gateway, self.owner.as_deref(), calls)))
    }

    fn on_end<'a>(&'a mut self, ended: Ended, _cx: &mut ReplyCx<'_>) -> Option<FilterFuture<'a, ()>> {
        // Boxed: only a Gemini lane's translated stream gets here.
        if self.calls.is_empty() || ended == Ended::Abandoned {
            return None;
        }
        let calls = self.calls.iter().map(|(id, signature)| (id.as_str(), signature.as_str()));
        Some(Box::pin(crate::signatures::keep_for(&self.gateway, self.owner.as_deref(), calls)))
    }
}
