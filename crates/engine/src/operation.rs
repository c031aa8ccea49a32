//! Operations beyond chat on the request path. Every operation goes
//! through the same stages as chat (keys, admission, routing, breakers,
//! failover, settlement); only two steps differ, and they are dispatched
//! here: the request made for a lane ([`prepare`]) and the whole reply
//! read back for the caller ([`whole`]). None of them streams. Token
//! counting (a chat pool's) is dispatched here too.

use bytes::Bytes;
use http::HeaderMap;
use switchyard_ir::{ErrorInfo, ErrorKind, Operation};
use switchyard_state::call::Call;
use switchyard_state::Gateway;
use tokio::time::Instant;

use crate::candidate::Candidate;
use crate::send::Prepared;
use crate::settle::Record;

/// The most units `call` may bill (what admission reserves for): a search
/// unit per hundred documents to rerank; none for what bills only tokens.
pub(crate) fn worst_units(call: &Call) -> u64 {
    if call.count_tokens {
        return 0;
    }
    match call.operation {
        Operation::Rerank => switchyard_codec::rerank::search_units_for(crate::rerank::documents_in(&call.body)),
        Operation::Image | Operation::Speech | Operation::Transcription => crate::media::worst_units(call),
        Operation::Chat | Operation::Embed | Operation::Moderation => 0,
    }
}

/// The request for `candidate`'s lane.
pub(crate) fn prepare(gateway: &Gateway, call: &Call, candidate: &Candidate<'_>) -> Result<Prepared, ErrorInfo> {
    if call.count_tokens {
        return crate::count::prepare(gateway, call, candidate);
    }
    match call.operation {
        Operation::Embed => crate::embed::prepare(gateway, call, candidate),
        Operation::Rerank => crate::rerank::prepare(gateway, call, candidate),
        Operation::Moderation | Operation::Image | Operation::Speech | Operation::Transcription => {
            crate::media::prepare(gateway, call, candidate)
        }
        other => Err(ErrorInfo::new(ErrorKind::NotFound, format!("{other} is not served on this route"))),
    }
}

/// The lane's reply (`body` and the bodies of a split request's other
/// parts, in order), for the caller. `Err`: the lane's reply could not be
/// read (its fault, answered as a 502).
pub(crate) fn whole(
    gateway: &Gateway,
    call: &Call,
    candidate: &Candidate<'_>,
    reply: (&HeaderMap, Bytes),
    more: Vec<(HeaderMap, Bytes)>,
    started: Instant,
    record: &mut Option<Box<Record>>,
) -> Result<crate::render::Whole, String> {
    if call.count_tokens {
        return crate::count::whole(gateway, call, candidate, reply.1, record);
    }
    match call.operation {
        Operation::Embed => crate::embed::whole(gateway, call, candidate, reply, more, started, record),
        Operation::Rerank => crate::rerank::whole(gateway, call, candidate, reply.1, started, record),
        Operation::Moderation | Operation::Image | Operation::Speech | Operation::Transcription => {
            crate::media::whole(call, candidate, reply, started, record)
        }
        other => Err(format!("{other} replies are not read on this route")),
    }
}
