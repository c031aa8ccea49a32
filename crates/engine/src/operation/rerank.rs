//! Rerank on the request path. A caller's request goes to a lane of its own
//! protocol as it came (but for the model) when the lane takes that form;
//! otherwise it is read into the IR and written in the lane's protocol,
//! the documents as text. The reply passes back as it came on such a hop,
//! else it is read and written for the caller, with the documents given
//! back from the request when the caller asked. Billed in search units:
//! the lane's count, or one per hundred documents when it says none.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use switchyard_codec::rerank::{search_units_for, RerankCodec};
use switchyard_ir::{ErrorInfo, ErrorKind, RerankRequest, Usage};
use switchyard_state::call::Call;
use switchyard_state::Gateway;
use tokio::time::Instant;

use super::{Read, Reading, Spec};
use crate::candidate::Candidate;
use crate::exchange::Progress;
use crate::identity::log_done;
use crate::render::Whole;
use crate::render::X_SWITCHYARD_ESTIMATED;
use crate::send::{as_came, Prepared};
use crate::settle::Record;
use crate::translation;
use switchyard_governance::money::Price;
use switchyard_governance::Estimate;

fn codec_of(gateway: &Gateway, protocol: switchyard_ir::Protocol) -> Result<&dyn RerankCodec, ErrorInfo> {
    gateway
        .codec(protocol)
        .rerank()
        .ok_or_else(|| ErrorInfo::new(ErrorKind::NotFound, format!("{protocol} has no rerank")).with_status(404))
}

fn read_caller(gateway: &Gateway, call: &Call) -> Result<RerankRequest, ErrorInfo> {
    codec_of(gateway, call.ingress)?.read_request(&call.body).map_err(|err| err.to_error_info())
}

/// The request made for `candidate`'s lane.
fn prepare(gateway: &Gateway, call: &Call, candidate: &Candidate<'_>) -> Result<Prepared, ErrorInfo> {
    let lane = candidate.lane;
    let lane_codec = codec_of(gateway, lane.protocol)?;
    let path = Some(lane_codec.upstream_path(candidate.wire_model));
    if call.ingress == lane.protocol && lane_codec.sends_as_came(&call.body, candidate.wire_model) {
        let body = as_came(call, candidate.wire_model);
        return Ok(Prepared { body, dropped_header: None, path, content_type: None, more: Vec::new() });
    }
    let mut request = read_caller(gateway, call)?;
    candidate.wire_model.clone_into(&mut request.model);
    let encoded = lane_codec.write_request(&request);
    if let Some(metrics) = gateway.metrics() {
        metrics.translation(call.ingress, lane.protocol, &encoded.dropped);
    }
    let dropped_header = translation::check(gateway, call, candidate, &encoded.dropped)?;
    Ok(Prepared { body: Bytes::from(encoded.body), dropped_header, path, content_type: None, more: Vec::new() })
}

/// The lane's reply for the caller.
fn whole(
    gateway: &Gateway,
    call: &Call,
    candidate: &Candidate<'_>,
    body: Bytes,
    started: Instant,
    record: &mut Record,
) -> Result<Whole, String> {
    let lane = candidate.lane;
    let lane_codec = codec_of(gateway, lane.protocol).map_err(|info| info.message)?;
    let mut headers = HeaderMap::new();
    let as_came = call.ingress == lane.protocol && lane_codec.sends_as_came(&call.body, candidate.wire_model);
    let (out, units) = if as_came {
        let units = lane_codec.read_search_units(&body).unwrap_or_else(|| search_units_for(documents_in(&call.body)));
        (body, units)
    } else {
        let request = read_caller(gateway, call).map_err(|info| info.message)?;
        let mut response =
            lane_codec.read_response(&body).map_err(|err| format!("upstream reply could not be read: {err}"))?;
        if let Some(bad) = response.results.iter().find(|r| r.index >= request.documents.len()) {
            return Err(format!("the lane ranked document {} of {}", bad.index, request.documents.len()));
        }
        if response.id.is_empty() {
            response.id = format!("sy-{}", call.request_id.to_str().unwrap_or("rerank"));
        }
        if response.search_units.is_none() {
            response.search_units = Some(search_units_for(request.documents.len()));
            headers.insert(X_SWITCHYARD_ESTIMATED, HeaderValue::from_static("true"));
        }
        let caller = codec_of(gateway, call.ingress).map_err(|info| info.message)?;
        (Bytes::from(caller.write_response(&response, &request)), response.search_units.unwrap_or(1))
    };
    let usage = Usage::default();
    log_done(&call.request_id, &lane.name, &usage, started, false);
    // The units are the lane's count, or the gateway's (said in the header).
    let estimated = headers.contains_key(X_SWITCHYARD_ESTIMATED).then_some(crate::settle::Estimated::NoUsage);
    record.record_usage(usage, estimated);
    record.record_units(units);
    record.first_byte();
    Ok(Whole { body: out, headers })
}

/// How many documents a rerank body carries (0 when it cannot be read).
pub(crate) fn documents_in(body: &[u8]) -> usize {
    let Ok(Some(documents)) = switchyard_codec::scan::top_level_value(body, "documents") else { return 0 };
    serde_json::from_slice::<Vec<&serde_json::value::RawValue>>(documents).map_or(0, |list| list.len())
}

/// What the response cache keys a rerank request by: the caller's request
/// read to IR without the name it called.
pub(crate) fn cache_material(gateway: &Gateway, call: &Call) -> Option<Vec<u8>> {
    let mut request = read_caller(gateway, call).ok()?;
    request.model.clear();
    serde_json::to_vec(&request).ok()
}

/// The caller's reply read back to IR, for callers of other protocols.
pub(crate) fn read_back(gateway: &Gateway, call: &Call, whole: &Whole) -> Option<switchyard_ir::RerankResponse> {
    codec_of(gateway, call.ingress).ok()?.read_response(&whole.body).ok()
}

/// A cached ranking written for this caller.
pub(crate) fn write_cached(gateway: &Gateway, call: &Call, response: &switchyard_ir::RerankResponse) -> Option<Whole> {
    let caller = codec_of(gateway, call.ingress).ok()?;
    let request = read_caller(gateway, call).ok()?;
    Some(Whole { body: Bytes::from(caller.write_response(response, &request)), headers: HeaderMap::new() })
}

/// Rerank, billed in search units.
pub(crate) struct Rerank;

impl Spec for Rerank {
    fn worst_case(&self, _: &Gateway, call: &Call, input: u64, price: &Price, _: u64) -> Result<Estimate, ErrorInfo> {
        // A search unit per hundred documents to rank.
        let units = search_units_for(documents_in(&call.body));
        Ok(switchyard_governance::estimate::worst_case_units(input, units, price))
    }

    fn prepare(
        &self,
        gateway: &Gateway,
        call: &Call,
        candidate: &Candidate<'_>,
        _: &mut Progress<'_>,
    ) -> Result<Prepared, ErrorInfo> {
        prepare(gateway, call, candidate)
    }

    fn read(&self, reading: Reading<'_>, record: &mut Record) -> Result<Read, String> {
        let Reading { gateway, call, candidate, body, started, .. } = reading;
        whole(gateway, call, candidate, body, started, record).map(Read::Whole)
    }

    fn cached(&self) -> bool {
        true
    }

    fn cache_material(&self, gateway: &Gateway, call: &Call) -> Option<Vec<u8>> {
        cache_material(gateway, call)
    }
}
