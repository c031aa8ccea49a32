//! Image generation on the request path. A caller's request goes to a lane
//! of its own protocol as it came (but for the model) when the lane takes
//! that form; otherwise it is read into the IR once and written in the
//! lane's protocol, split into calls of at most what the lane's model makes
//! at once (the model facts' `max_images`, else the protocol's own limit),
//! what it cannot carry reported like a dropped chat field (a negative
//! prompt a model is said not to take is a `capability` drop). The reply
//! passes back as it came when the request did, else every part's images
//! are read, joined and written for the caller. Billed per image, counted
//! from the reply.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use switchyard_codec::image::{counts, ImageCodec, ImageModel};
use switchyard_ir::{ErrorInfo, ErrorKind, ImageRequest, ImageResponse, Usage};
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

/// The most images one request may ask for (OpenAI's limit).
pub const MAX_IMAGES: u32 = 10;

/// A protocol's image codec; config proved at boot that every image
/// lane's protocol has one, and an ingress only routes image callers whose
/// protocol has one.
fn codec_of(gateway: &Gateway, protocol: switchyard_ir::Protocol) -> Result<&dyn ImageCodec, ErrorInfo> {
    gateway.codec(protocol).image().ok_or_else(|| {
        ErrorInfo::new(ErrorKind::NotFound, format!("{protocol} has no image generation")).with_status(404)
    })
}

/// What the model facts say `wire_model` takes.
pub(crate) fn image_model(wire_model: &str) -> ImageModel {
    let fact = switchyard_config::facts::lookup(wire_model);
    ImageModel { max_images: fact.and_then(|f| f.max_images), negative_prompt: fact.and_then(|f| f.negative_prompt) }
}

/// The caller's request, read (its model left to the lane's).
fn read_caller(gateway: &Gateway, call: &Call) -> Result<ImageRequest, ErrorInfo> {
    let caller = codec_of(gateway, call.ingress)?;
    let request = caller.read_request(&call.body).map_err(|err| err.to_error_info())?;
    if request.prompt.trim().is_empty() {
        let mut info = ErrorInfo::new(ErrorKind::InvalidRequest, "the request has no prompt to draw");
        info.param = Some("prompt".to_owned());
        return Err(info);
    }
    match request.n {
        Some(n) if n == 0 || n > MAX_IMAGES => {
            let mut info = ErrorInfo::new(
                ErrorKind::InvalidRequest,
                format!("{n} images is not between 1 and the {MAX_IMAGES} one request may ask for"),
            );
            info.param = Some("n".to_owned());
            Err(info)
        }
        _ => Ok(request),
    }
}

/// Whether the call goes to `candidate`'s lane as it came.
fn goes_as_came(gateway: &Gateway, call: &Call, candidate: &Candidate<'_>) -> Result<bool, ErrorInfo> {
    let lane_codec = codec_of(gateway, candidate.lane.protocol)?;
    Ok(call.ingress == candidate.lane.protocol && lane_codec.sends_as_came(&call.body, candidate.wire_model))
}

/// The request made for `candidate`'s lane.
fn prepare(gateway: &Gateway, call: &Call, candidate: &Candidate<'_>) -> Result<Prepared, ErrorInfo> {
    let lane = candidate.lane;
    let lane_codec = codec_of(gateway, lane.protocol)?;
    let path = Some(lane_codec.upstream_path(candidate.wire_model));
    if goes_as_came(gateway, call, candidate)? {
        let body = as_came(call, candidate.wire_model);
        return Ok(Prepared { body, dropped_header: None, path, content_type: None, more: Vec::new() });
    }
    let mut request = read_caller(gateway, call)?;
    candidate.wire_model.clone_into(&mut request.model);
    let model = image_model(candidate.wire_model);
    let most = model.max_images.unwrap_or_else(|| lane_codec.max_images(candidate.wire_model));
    let parts = counts(request.n.unwrap_or(1), most).into_iter().map(|count| {
        let part = ImageRequest { n: request.n.map(|_| count), ..request.clone() };
        lane_codec.write_request(&part, &model)
    });
    super::in_parts(gateway, call, candidate, path, parts)
}

/// The lane's reply for the caller, billed per image it holds.
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
    let mut out_headers = HeaderMap::new();
    let as_came = more.is_empty() && goes_as_came(gateway, call, candidate).unwrap_or(false);
    let (out, response) = if as_came {
        if let Some(content_type) = headers.get(http::header::CONTENT_TYPE) {
            out_headers.insert(http::header::CONTENT_TYPE, content_type.clone());
        }
        (body.clone(), lane_codec.read_response(&body, headers).ok())
    } else {
        let caller_codec = codec_of(gateway, call.ingress).map_err(|info| info.message)?;
        let request = read_caller(gateway, call).map_err(|info| info.message)?;
        let response = read_parts(lane_codec, (headers, &body), &more)?;
        if response.images.is_empty() {
            return Err("the lane returned no image".to_owned());
        }
        out_headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        (Bytes::from(caller_codec.write_response(&response, &request)), Some(response))
    };
    let made = response.as_ref().map(|r| r.images.len() as u64).filter(|made| *made > 0);
    let estimated = made.is_none();
    if estimated {
        out_headers.insert(X_SWITCHYARD_ESTIMATED, HeaderValue::from_static("true"));
    }
    let usage = Usage {
        input_tokens: response.as_ref().and_then(|r| r.input_tokens).unwrap_or(0),
        output_tokens: response.as_ref().and_then(|r| r.output_tokens).unwrap_or(0),
        ..Usage::default()
    };
    log_done(&call.request_id, &lane.name, &usage, started, false);
    record.record_usage(usage, estimated.then_some(crate::settle::Estimated::NoUsage));
    record.record_units(made.unwrap_or_else(|| worst_units(gateway, call)));
    record.first_byte();
    Ok(Whole { body: out, headers: out_headers })
}

/// Every part's images, in order.
fn read_parts(
    codec: &dyn ImageCodec,
    (headers, body): (&HeaderMap, &Bytes),
    more: &[(HeaderMap, Bytes)],
) -> Result<ImageResponse, String> {
    let read = |headers: &HeaderMap, body: &[u8]| {
        codec.read_response(body, headers).map_err(|err| format!("upstream reply could not be read: {err}"))
    };
    let mut response = read(headers, body)?;
    for (headers, body) in more {
        response.extend(read(headers, body)?);
    }
    Ok(response)
}

/// The most images `call` may bill: what it asks for.
fn worst_units(gateway: &Gateway, call: &Call) -> u64 {
    read_caller(gateway, call).map_or(1, |request| u64::from(request.n.unwrap_or(1).clamp(1, MAX_IMAGES)))
}

/// Image generation.
pub(crate) struct Images;

impl Spec for Images {
    fn worst_case(
        &self,
        gateway: &Gateway,
        call: &Call,
        input: u64,
        price: &Price,
        _: u64,
    ) -> Result<Estimate, ErrorInfo> {
        // A request no lane could read is refused here, before it is billed.
        let request = read_caller(gateway, call)?;
        let units = u64::from(request.n.unwrap_or(1).clamp(1, MAX_IMAGES));
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
        let Reading { gateway, call, candidate, headers, body, more, started, .. } = reading;
        whole(gateway, call, candidate, (headers, body), more, started, record).map(Read::Whole)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The facts name what an image model takes: Imagen 4 no negative
    /// prompt, Nova Canvas five images a call, Stability's models one.
    #[test]
    fn the_facts_say_what_image_models_take() {
        let imagen = image_model("imagen-4.0-generate-001");
        assert_eq!((imagen.max_images, imagen.negative_prompt), (Some(4), Some(false)));
        assert_eq!(image_model("amazon.nova-canvas-v1:0").max_images, Some(5));
        assert_eq!(image_model("stability.stable-image-ultra-v1:1").max_images, Some(1));
        assert_eq!(image_model("gpt-4o"), ImageModel::default());
    }
}
