//! Embeddings on the request path. A caller's request goes to a lane of
//! its own protocol as it came (but for the model) when the lane takes
//! that form; otherwise it is read into the IR once, split into the lane's
//! batch size (vectors come back in input order), and written in the
//! lane's protocol, what it cannot carry reported like a dropped chat
//! field. The reply passes back as it came when it is in the caller's
//! form, else the parts are read, joined and written for the caller, with
//! its usage in the caller's own fields (estimated, and marked so, when the
//! lane counts none).

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use switchyard_codec::embed::{batches, EmbedCodec};
use switchyard_ir::{EmbedRequest, EmbedResponse, ErrorInfo, ErrorKind, Usage};
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
use switchyard_governance::money::Price;
use switchyard_governance::Estimate;

/// A protocol's embeddings codec; config proved at boot that every embed
/// lane's protocol has one, and an ingress only routes embed callers whose
/// protocol has one.
fn codec_of(gateway: &Gateway, protocol: switchyard_ir::Protocol) -> Result<&dyn EmbedCodec, ErrorInfo> {
    gateway
        .codec(protocol)
        .embed()
        .ok_or_else(|| ErrorInfo::new(ErrorKind::NotFound, format!("{protocol} has no embeddings")).with_status(404))
}

/// The caller's request, read (its model left to the lane's).
fn read_caller(gateway: &Gateway, call: &Call) -> Result<EmbedRequest, ErrorInfo> {
    let caller = codec_of(gateway, call.ingress)?;
    let request = caller.read_request(&call.body).map_err(|err| err.to_error_info())?;
    if request.inputs.is_empty() {
        let mut info = ErrorInfo::new(ErrorKind::InvalidRequest, "the request has no input to embed");
        info.param = Some("input".to_owned());
        return Err(info);
    }
    let limit = caller.caller_limit(&request);
    if request.inputs.len() > limit {
        let info = ErrorInfo::new(
            ErrorKind::InvalidRequest,
            format!(
                "{} inputs is more than the {limit} one request may carry; send them in batches",
                request.inputs.len()
            ),
        );
        return Err(info);
    }
    Ok(request)
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
    let parts = batches(&request, lane_codec.max_inputs(candidate.wire_model));
    super::in_parts(gateway, call, candidate, path, parts.iter().map(|part| lane_codec.write_request(part)))
}

/// The lane's reply for the caller.
fn whole(
    gateway: &Gateway,
    call: &Call,
    candidate: &Candidate<'_>,
    (headers, body): (&HeaderMap, Bytes),
    more: Vec<(HeaderMap, Bytes)>,
    started: Instant,
    record: &mut Record,
) -> Result<Whole, String> {
    let lane = candidate.lane;
    let lane_codec = codec_of(gateway, lane.protocol).map_err(|info| info.message)?;
    let caller_codec = codec_of(gateway, call.ingress).map_err(|info| info.message)?;
    let as_came = call.ingress == lane.protocol
        && more.is_empty()
        && lane_codec.replies_as_came(&call.body, candidate.wire_model);
    let mut out_headers = HeaderMap::new();
    let (out, tokens) = if as_came {
        (body.clone(), lane_codec.read_input_tokens(&body, headers))
    } else {
        let request = read_caller(gateway, call).map_err(|info| info.message)?;
        let mut response = read_parts(lane_codec, (headers, &body), &more)?;
        if response.vectors.len() != request.inputs.len() {
            return Err(format!(
                "the lane returned {} vectors for {} inputs",
                response.vectors.len(),
                request.inputs.len()
            ));
        }
        if response.model.is_empty() {
            candidate.wire_model.clone_into(&mut response.model);
        }
        if response.input_tokens.is_none() {
            // The lane counts none: the caller's fields carry the estimate, said so.
            response.input_tokens = Some(estimate(&request));
            out_headers.insert(X_SWITCHYARD_ESTIMATED, HeaderValue::from_static("true"));
        }
        (Bytes::from(caller_codec.write_response(&response, &request)), response.input_tokens)
    };
    let estimated = tokens.is_none();
    let input_tokens = tokens.unwrap_or_else(|| record.input_estimate());
    if let Some(name) = caller_codec.token_header() {
        out_headers.insert(HeaderName::from_static(name), HeaderValue::from(input_tokens));
    }
    let usage = Usage { input_tokens, ..Usage::default() };
    log_done(&call.request_id, &lane.name, &usage, started, false);
    record.record_usage(usage, estimated.then_some(crate::settle::Estimated::NoUsage));
    record.first_byte();
    Ok(Whole { body: out, headers: out_headers })
}

/// Every part's vectors, in order.
fn read_parts(
    codec: &dyn EmbedCodec,
    (headers, body): (&HeaderMap, &Bytes),
    more: &[(HeaderMap, Bytes)],
) -> Result<EmbedResponse, String> {
    let read = |headers: &HeaderMap, body: &[u8]| {
        codec.read_response(body, headers).map_err(|err| format!("upstream reply could not be read: {err}"))
    };
    let mut response = read(headers, body)?;
    for (headers, body) in more {
        response.extend(read(headers, body)?);
    }
    Ok(response)
}

/// About four bytes a token, rounded up, at least one a text.
fn estimate(request: &EmbedRequest) -> u64 {
    request.inputs.iter().map(|text| (text.len() as u64).div_ceil(4).max(1)).sum()
}

/// What the response cache keys an embeddings request by: the caller's
/// request read to IR without what does not change the vectors (the name
/// it called, its end user, the form its reply takes).
pub(crate) fn cache_material(gateway: &Gateway, call: &Call) -> Option<Vec<u8>> {
    let mut request = read_caller(gateway, call).ok()?;
    request.model.clear();
    request.user = None;
    request.form = None;
    serde_json::to_vec(&request).ok()
}

/// The caller's reply read back to IR, for callers of other protocols.
pub(crate) fn read_back(gateway: &Gateway, call: &Call, whole: &Whole) -> Option<EmbedResponse> {
    codec_of(gateway, call.ingress).ok()?.read_response(&whole.body, &whole.headers).ok()
}

/// A cached reply written for this caller, with its token header.
pub(crate) fn write_cached(gateway: &Gateway, call: &Call, response: &EmbedResponse) -> Option<Whole> {
    let caller = codec_of(gateway, call.ingress).ok()?;
    let request = read_caller(gateway, call).ok()?;
    let mut headers = HeaderMap::new();
    if let (Some(name), Some(tokens)) = (caller.token_header(), response.input_tokens) {
        headers.insert(HeaderName::from_static(name), HeaderValue::from(tokens));
    }
    Some(Whole { body: Bytes::from(caller.write_response(response, &request)), headers })
}

/// Embeddings.
pub(crate) struct Embed;

impl Spec for Embed {
    fn worst_case(&self, _: &Gateway, _: &Call, input: u64, price: &Price, _: u64) -> Result<Estimate, ErrorInfo> {
        Ok(switchyard_governance::estimate::worst_case_units(input, 0, price))
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
        let Reading { gateway, call, candidate, headers, body, more, started, .. } = reading;
        whole(gateway, call, candidate, (headers, body), more, started, record).map(Read::Whole)
    }

    fn cached(&self) -> bool {
        true
    }

    fn cache_material(&self, gateway: &Gateway, call: &Call) -> Option<Vec<u8>> {
        cache_material(gateway, call)
    }
}
