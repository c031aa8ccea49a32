//! A plan's candidates as the attempt stage tries them: each pool member's
//! lane, the wire model to ask it for (an ad-hoc lane's from the caller's
//! path) and the header values that name it.

use std::sync::Arc;

use http::HeaderValue;
use switchyard_ir::{ErrorInfo, ErrorKind};
use switchyard_state::call::{Call, Slot};
use switchyard_state::{Gateway, Lane};

use crate::plan::Plan;

/// One candidate: a lane and the wire model to ask it for.
pub(crate) struct Candidate<'a> {
    pub(crate) lane: &'a Lane,
    pub(crate) lane_index: usize,
    pub(crate) wire_model: &'a str,
    pub(crate) lane_header: HeaderValue,
    pub(crate) slot: Slot,
}

impl Candidate<'_> {
    /// The wire model, shared (an ad-hoc lane's model from the path is
    /// the one copy made).
    pub(crate) fn wire_model_arc(&self) -> Arc<str> {
        if *self.lane.wire_model == *self.wire_model {
            self.lane.wire_model.clone()
        } else {
            Arc::from(self.wire_model)
        }
    }
}

/// The candidates in try order, from the routing plan.
pub(crate) fn candidates<'a>(
    gateway: &'a Gateway,
    call: &'a Call,
    plan: &Plan,
) -> Result<Vec<Candidate<'a>>, ErrorInfo> {
    plan.slots
        .iter()
        .map(|&slot| {
            let lane_index = gateway.pools[slot.pool].members[slot.member];
            let lane = &gateway.lanes[lane_index];
            match (&call.wire_model, lane.any_wire_model) {
                // An ad-hoc lane open to any model: the caller's path names it.
                (Some(wire_model), true) => {
                    let header = HeaderValue::try_from(format!("{}/{wire_model}", lane.provider))
                        .map_err(|_| ErrorInfo::new(ErrorKind::InvalidRequest, "model name is not printable ascii"))?;
                    Ok(Candidate { lane, lane_index, wire_model, lane_header: header, slot })
                }
                _ => Ok(Candidate {
                    lane,
                    lane_index,
                    wire_model: &lane.wire_model,
                    lane_header: lane.lane_header.clone(),
                    slot,
                }),
            }
        })
        .collect()
}
