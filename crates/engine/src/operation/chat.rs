//! Chat: the request path's first operation. The request goes to a lane of
//! its own protocol as it came (but for the model, and asked for usage when
//! its stream is metered), else read once into the IR and written for the
//! lane's model; admission reserves the prompt and the output cap times the
//! replies asked for; a whole reply on a passthrough is only read for its
//! usage, else read into the IR for the filters and the caller's writer;
//! the response cache keys it by its IR normalised.

use bytes::Bytes;
use switchyard_governance::money::Price;
use switchyard_governance::Estimate;
use switchyard_ir::{ErrorInfo, ErrorKind};
use switchyard_state::call::Call;
use switchyard_state::Gateway;

use super::{Read, Reading, Spec};
use crate::candidate::Candidate;
use crate::exchange::Progress;
use crate::identity::log_done;
use crate::render::Whole;
use crate::send::{as_came, lost_headers, Prepared};
use crate::settle::Record;
use crate::translation;

/// Chat.
pub(crate) struct Chat;

impl Spec for Chat {
    fn worst_case(
        &self,
        gateway: &Gateway,
        call: &Call,
        input: u64,
        price: &Price,
        default_max_tokens: u64,
    ) -> Result<Estimate, ErrorInfo> {
        // What admission reads is read once, each member named once.
        let metered = gateway
            .codec_for(call.operation, call.ingress)
            .metered_from(&call.body, &call.metered)
            .map_err(|err| ErrorInfo::new(ErrorKind::InvalidRequest, err.to_string()))?;
        let estimate = switchyard_governance::estimate::worst_case(
            input,
            metered.max_tokens,
            default_max_tokens,
            metered.choices,
            price,
        );
        Ok(estimate)
    }

    fn prepare(
        &self,
        gateway: &Gateway,
        call: &Call,
        candidate: &Candidate<'_>,
        progress: &mut Progress<'_>,
    ) -> Result<Prepared, ErrorInfo> {
        let lane = candidate.lane;
        let capabilities = translation::capabilities(gateway, candidate);
        let lane_codec = gateway.codec_for(call.operation, lane.protocol);
        // A model that takes no audio gets a request that may hold some
        // translated, so the audio is dropped and reported (or refused
        // under strict), not sent for the vendor's 400; the body is
        // searched only for such a model.
        let same = progress.sends_as_came_to(call, lane.protocol);
        let deaf = same && capabilities.audio_input == Some(false) && lane_codec.may_hold_audio(&call.body);
        if same && !deaf {
            // Same protocol: the bytes go as they came, but for the model.
            let body = as_came(call, candidate.wire_model);
            let body = match progress.shape.hide_usage {
                true => gateway
                    .codec_for(call.operation, lane.protocol)
                    .request_stream_usage(&body)
                    .map_or(body, Bytes::from),
                false => body,
            };
            // Nothing of the body is lost; a header of the caller's account may be.
            let dropped_header = translation::check(gateway, call, candidate, &lost_headers(gateway, call, lane))?;
            return Ok(Prepared::chat(body, dropped_header));
        }
        let request = progress.ir(gateway, call)?;
        candidate.wire_model.clone_into(&mut request.model);
        let mut encoded = translation::write_for_model(lane_codec, request, &capabilities);
        encoded.dropped.extend(lost_headers(gateway, call, lane));
        if let Some(metrics) = gateway.metrics() {
            metrics.translation(call.ingress, lane.protocol, &encoded.dropped);
        }
        let dropped_header = translation::check(gateway, call, candidate, &encoded.dropped)?;
        Ok(Prepared::chat(Bytes::from(encoded.body), dropped_header))
    }

    fn read(&self, reading: Reading<'_>, record: &mut Record) -> Result<Read, String> {
        let Reading { gateway, call, candidate, body, same, started, .. } = reading;
        let lane = candidate.lane;
        let codec = gateway.codec_for(call.operation, lane.protocol);
        if !same {
            let response =
                codec.read_response(&body).map_err(|err| format!("upstream reply could not be read: {err}"))?;
            log_done(&call.request_id, &lane.name, &response.usage, started, false);
            return Ok(Read::Translated(response));
        }
        // Passthrough: the bytes go back as they came; only usage is read.
        let usage = codec.read_usage(&body).unwrap_or_default();
        log_done(&call.request_id, &lane.name, &usage, started, false);
        // No usage in the reply: its text, read only then, is the estimate.
        record.record_reported(usage, || {
            codec.read_response(&body).map_or(0, |reply| crate::settle::output_estimate(&reply))
        });
        record.first_byte();
        // Only a trace wants the finish reason.
        if record.trace.is_some() {
            if let Some(reason) = codec.read_stop_reason(&body) {
                record.stop_reason(reason.as_str());
            }
        }
        Ok(Read::Whole(Whole { body, headers: http::HeaderMap::new() }))
    }

    fn cached(&self) -> bool {
        true
    }

    fn cache_material(&self, gateway: &Gateway, call: &Call) -> Option<Vec<u8>> {
        let mut request = gateway.codec_for(call.operation, call.ingress).read_request(&call.body).ok()?;
        request.stream = false;
        request.model.clear();
        request.user = None;
        request.metadata.clear();
        serde_json::to_vec(&request).ok()
    }
}
