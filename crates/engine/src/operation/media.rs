//! OpenAI's own operations on the request path: moderation, speech and
//! transcription go to OpenAI-protocol lanes (config proves it) at the
//! caller's own route, as they came but for the model (a JSON body's
//! `model`, or a multipart form's `model` field), and come back as the lane
//! sent them, its content type kept (speech is binary audio; a
//! transcription may be plain text). Each is billed in its own units:
//! characters spoken, seconds heard (the lane's figure, or a bound from the
//! file's size, said to be an estimate). Image generation crosses
//! protocols: `image`.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use switchyard_codec::{form, scan};
use switchyard_ir::{ErrorInfo, ErrorKind, Operation, Usage};
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

/// The slowest audio a reservation assumes (16 kbit/s, below any speech
/// codec's usual rate): a file's bytes bound its seconds.
pub const MIN_AUDIO_BYTES_PER_SECOND: u64 = 2_000;

/// The caller's form and the span of its `model` field's value.
fn model_field(call: &Call) -> Result<std::ops::Range<usize>, ErrorInfo> {
    let parts = form_parts(call)?;
    parts
        .iter()
        .find(|p| p.name == "model" && p.filename.is_none())
        .map(|p| p.value.clone())
        .ok_or_else(|| ErrorInfo::new(ErrorKind::InvalidRequest, "the form has no `model` field"))
}

fn form_parts(call: &Call) -> Result<Vec<form::Part<'_>>, ErrorInfo> {
    let boundary = content_type(call).and_then(|ct| form::boundary(ct).ok()).ok_or_else(|| {
        ErrorInfo::new(ErrorKind::InvalidRequest, "content-type must be multipart/form-data").with_status(415)
    })?;
    form::parts(&call.body, boundary).map_err(|err| ErrorInfo::new(ErrorKind::InvalidRequest, err.to_string()))
}

fn content_type(call: &Call) -> Option<&str> {
    call.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok())
}

/// The request for `candidate`'s lane: the caller's, but for the model.
fn prepare(_gateway: &Gateway, call: &Call, candidate: &Candidate<'_>) -> Result<Prepared, ErrorInfo> {
    let path = call.route.map(str::to_owned);
    if call.operation != Operation::Transcription {
        let body = as_came(call, candidate.wire_model);
        return Ok(Prepared { body, dropped_header: None, path, content_type: None, more: Vec::new() });
    }
    let span = model_field(call)?;
    let body = if call.body.get(span.clone()) == Some(candidate.wire_model.as_bytes()) {
        call.body.clone()
    } else {
        Bytes::from(form::splice(&call.body, span, candidate.wire_model))
    };
    let content_type = content_type(call).and_then(|ct| HeaderValue::from_str(ct).ok());
    Ok(Prepared { body, dropped_header: None, path, content_type, more: Vec::new() })
}

/// The lane's reply as it came, with its content type, billed in its units.
fn whole(
    call: &Call,
    candidate: &Candidate<'_>,
    (upstream, body): (&HeaderMap, Bytes),
    started: Instant,
    record: &mut Record,
) -> Result<Whole, String> {
    let mut headers = HeaderMap::new();
    if let Some(content_type) = upstream.get(http::header::CONTENT_TYPE) {
        headers.insert(http::header::CONTENT_TYPE, content_type.clone());
    }
    let (usage, units, estimated) = billed(call, &body);
    if estimated {
        headers.insert(X_SWITCHYARD_ESTIMATED, HeaderValue::from_static("true"));
    }
    log_done(&call.request_id, &candidate.lane.name, &usage, started, false);
    record.record_usage(usage, estimated.then_some(crate::settle::Estimated::NoUsage));
    record.record_units(units);
    record.first_byte();
    Ok(Whole { body, headers })
}

/// What a reply bills: its tokens (where the lane reports them), its units,
/// and whether the units are the gateway's estimate.
fn billed(call: &Call, body: &[u8]) -> (Usage, u64, bool) {
    let usage = Usage {
        input_tokens: scan::member_u64(body, &["usage", "input_tokens"]).unwrap_or(0),
        output_tokens: scan::member_u64(body, &["usage", "output_tokens"]).unwrap_or(0),
        ..Usage::default()
    };
    match call.operation {
        Operation::Speech => (usage, worst_units(call), false),
        Operation::Transcription => {
            let reported = scan::member_u64(body, &["usage", "seconds"]).or_else(|| seconds(body));
            (usage, reported.unwrap_or_else(|| worst_units(call)), reported.is_none())
        }
        _ => (usage, 0, false),
    }
}

/// A verbose transcription's `duration` (seconds, rounded up).
fn seconds(body: &[u8]) -> Option<u64> {
    let raw = scan::top_level_value(body, "duration").ok()??;
    scan::count(raw)
}

/// The most units `call` may bill: the characters
/// it would have spoken, the seconds its audio file may hold.
fn worst_units(call: &Call) -> u64 {
    match call.operation {
        Operation::Speech => {
            let input = scan::top_level_value(&call.body, "input").ok().flatten();
            input
                .and_then(|raw| serde_json::from_slice::<String>(raw).ok())
                .map_or(0, |text| text.chars().count() as u64)
        }
        Operation::Transcription => {
            let file = form_parts(call).ok().and_then(|parts| parts.into_iter().find(|p| p.name == "file"));
            file.map_or(0, |part| (part.value.len() as u64).div_ceil(MIN_AUDIO_BYTES_PER_SECOND))
        }
        _ => 0,
    }
}

/// OpenAI's own operations: moderation, speech, transcription.
pub(crate) struct Media;

impl Spec for Media {
    fn worst_case(&self, _: &Gateway, call: &Call, input: u64, price: &Price, _: u64) -> Result<Estimate, ErrorInfo> {
        Ok(switchyard_governance::estimate::worst_case_units(input, worst_units(call), price))
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
        let Reading { call, candidate, headers, body, started, .. } = reading;
        whole(call, candidate, (headers, body), started, record).map(Read::Whole)
    }
}
