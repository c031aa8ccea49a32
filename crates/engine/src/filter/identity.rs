//! Identity fill: what every answer carries that a protocol may lack. A
//! reply from a protocol without an id, a model or a creation time
//! (Bedrock, Cohere) gets the request id, the serving lane's wire model and
//! the current time in their place, so the caller's SDK finds them. Only a
//! reply that is translated is read into the IR, so only such a reply is
//! filled; a passthrough goes as it came.
//!
//! Reads: the call's request id, the record's serving lane. Writes: a
//! translated reply's (or stream's first event's) id, model and time.

use switchyard_ir::{Response, StreamEvent};
use switchyard_state::call::Call;

use super::{Filter, FilterFuture, ReplyCx};
use crate::exchange::Shape;

/// The identity fill (a unit: it holds nothing, and costs no allocation).
pub(crate) struct Identity;

impl Identity {
    /// Every chat reply may need it.
    pub(crate) fn of(call: &Call, _shape: &Shape) -> Option<Identity> {
        call.operation.is_chat().then_some(Identity)
    }
}

impl Filter for Identity {
    fn name(&self) -> &'static str {
        "identity"
    }

    fn on_events(
        &mut self,
        events: &mut Vec<StreamEvent>,
        cx: &mut ReplyCx<'_>,
    ) -> Result<(), switchyard_ir::ErrorInfo> {
        for event in events {
            if let StreamEvent::MessageStart { id, model, created, .. } = event {
                fill(id, model, created, cx);
            }
        }
        Ok(())
    }

    fn on_reply<'a>(
        &'a mut self,
        reply: &'a mut Response,
        _lane: switchyard_ir::Protocol,
        cx: &mut ReplyCx<'_>,
    ) -> Option<FilterFuture<'a, ()>> {
        fill(&mut reply.id, &mut reply.model, &mut reply.created, cx);
        None
    }
}

fn fill(id: &mut String, model: &mut String, created: &mut Option<i64>, cx: &ReplyCx<'_>) {
    let wire_model = cx.record.serving_wire_model().unwrap_or_default();
    crate::identity::fill_identity(id, model, created, &cx.call.request_id, wire_model, cx.env.now_ms());
}
