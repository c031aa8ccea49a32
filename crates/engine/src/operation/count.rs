//! Token counting on the request path: a chat pool answers it, through
//! the same keys, rate limits, breakers and failover as chat, and it is
//! never billed. A lane whose protocol counts natively (Anthropic, Gemini,
//! Bedrock) is asked, with the caller's chat request written for it (as it
//! came on a same-protocol hop); for any other lane the gateway counts
//! locally with the model family's tokenizer (`switchyard_tokenize`) and
//! says so with `x-switchyard-estimated: true`.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use switchyard_codec::count::CountCodec;
use switchyard_ir::{ErrorInfo, ErrorKind, Request, Usage};
use switchyard_state::call::Call;
use switchyard_state::Gateway;
use switchyard_transport::full_body;

use super::{Read, Reading, Spec};
use crate::candidate::Candidate;
use crate::exchange::Progress;
use crate::render::Whole;
use crate::render::{common_headers, error_response, lane_headers, ResponseBody, X_SWITCHYARD_ESTIMATED};
use crate::send::{as_came, Prepared};
use crate::settle::Record;
use crate::translation;
use switchyard_governance::money::Price;
use switchyard_governance::Estimate;

/// The caller's count codec: an ingress routes counts only from protocols
/// that have one.
fn caller_codec<'a>(gateway: &'a Gateway, call: &Call) -> Result<&'a dyn CountCodec, ErrorInfo> {
    gateway.codec(call.ingress).count().ok_or_else(|| {
        ErrorInfo::new(ErrorKind::NotFound, format!("{} callers have no token counting", call.ingress)).with_status(404)
    })
}

/// The chat request the caller's count body holds, read into the IR.
fn read_chat(gateway: &Gateway, call: &Call) -> Result<Request, ErrorInfo> {
    let chat = caller_codec(gateway, call)?.chat_body(&call.body).map_err(|err| err.to_error_info())?;
    gateway.codec(call.ingress).read_request(&chat).map_err(|err| err.to_error_info())
}

/// Whether `candidate`'s lane counts natively.
fn lane_counts(gateway: &Gateway, candidate: &Candidate<'_>) -> bool {
    gateway.codec(candidate.lane.protocol).count().is_some()
}

/// The count request for `candidate`'s lane (one that counts natively).
fn prepare(gateway: &Gateway, call: &Call, candidate: &Candidate<'_>) -> Result<Prepared, ErrorInfo> {
    let lane = candidate.lane;
    let lane_codec = gateway
        .codec(lane.protocol)
        .count()
        .ok_or_else(|| ErrorInfo::new(ErrorKind::Internal, "the lane does not count tokens"))?;
    let path = Some(lane_codec.upstream_path(candidate.wire_model));
    if call.ingress == lane.protocol {
        let body = as_came(call, candidate.wire_model);
        return Ok(Prepared { body, dropped_header: None, path, content_type: None, more: Vec::new() });
    }
    let mut request = read_chat(gateway, call)?;
    candidate.wire_model.clone_into(&mut request.model);
    let encoded =
        gateway.codec(lane.protocol).write_request_for(&request, &translation::capabilities(gateway, candidate));
    let dropped_header = translation::check(gateway, call, candidate, &encoded.dropped)?;
    let body = lane_codec.count_body(&encoded.body, candidate.wire_model).map_err(|err| err.to_error_info())?;
    Ok(Prepared { body: Bytes::from(body), dropped_header, path, content_type: None, more: Vec::new() })
}

/// The lane's count, for the caller.
fn whole(
    gateway: &Gateway,
    call: &Call,
    candidate: &Candidate<'_>,
    body: Bytes,
    record: &mut Record,
) -> Result<Whole, String> {
    let lane_codec = gateway.codec(candidate.lane.protocol).count().ok_or("the lane does not count tokens")?;
    let tokens = lane_codec.read_count(&body).ok_or("the lane's count could not be read")?;
    let out = if call.ingress == candidate.lane.protocol {
        body
    } else {
        Bytes::from(caller_codec(gateway, call).map_err(|info| info.message)?.write_count(tokens))
    };
    record.record_usage(Usage::default(), None);
    record.first_byte();
    Ok(Whole { body: out, headers: HeaderMap::new() })
}

/// A count answered by the gateway itself, with the tokenizer of the
/// candidate's model family (its lane's protocol does not count).
fn local(gateway: &Gateway, call: &Call, candidate: &Candidate<'_>, record: &mut Record) -> Response<ResponseBody> {
    let counted = read_chat(gateway, call).and_then(|request| {
        let tokens = switchyard_tokenize::count_request(&request, candidate.wire_model);
        Ok(caller_codec(gateway, call)?.write_count(tokens))
    });
    let body = match counted {
        Ok(body) => Bytes::from(body),
        Err(info) => return error_response(gateway, call, &info),
    };
    record.serving(candidate.slot, candidate.lane_index, candidate.wire_model_arc(), 0);
    settle_count(record, &body);
    let mut response = Response::new(full_body(body));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    common_headers(headers, call);
    lane_headers(headers, &candidate.lane_header, &candidate.lane.provider_header);
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(X_SWITCHYARD_ESTIMATED, HeaderValue::from_static("true"));
    response
}

/// A count is never billed: its row says it was served, with no usage.
fn settle_count(record: &mut Record, body: &Bytes) {
    record.record_usage(Usage::default(), None);
    record.first_byte();
    record.keep_response(body);
}

/// Token counting (a chat pool's; never billed).
pub(crate) struct Count;

impl Spec for Count {
    fn billed(&self) -> bool {
        false
    }

    fn worst_case(&self, _: &Gateway, _: &Call, _: u64, price: &Price, _: u64) -> Result<Estimate, ErrorInfo> {
        // Nothing: only the request rate limits see a count.
        Ok(switchyard_governance::estimate::worst_case_units(0, 0, price))
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
        whole(reading.gateway, reading.call, reading.candidate, reading.body, record).map(Read::Whole)
    }

    fn local(
        &self,
        gateway: &Gateway,
        call: &Call,
        candidate: &Candidate<'_>,
        record: &mut Record,
    ) -> Option<Response<ResponseBody>> {
        // A lane that cannot count is not asked: the gateway counts for it.
        (!lane_counts(gateway, candidate)).then(|| local(gateway, call, candidate, record))
    }
}
