//! Translation policy at the engine, per candidate lane: the request writer
//! gets the lane's model capabilities; a translation that loses fields is
//! refused in strict mode (`translation: strict` on the pool, or
//! `x-switchyard-strict: 1` on the request) with a 400 in the caller's
//! protocol naming them, and is otherwise told to the caller in
//! `x-switchyard-dropped` and logged with the labels of
//! `switchyard_translation_dropped_total{from,to,field}` (`field` from the
//! fixed `ir::Field` table, never from caller input).

use http::{HeaderMap, HeaderName, HeaderValue};
use switchyard_codec::{dropped_path, Codec, Encoded};
use switchyard_config::Translation;
use switchyard_ir::{Capabilities, DropReason, Dropped, ErrorInfo, ErrorKind, Field, Request};

use crate::candidate::Candidate;
use switchyard_state::call::Call;
use switchyard_state::Gateway;

/// The response header listing what translating the request dropped.
pub(crate) const DROPPED_HEADER: &str = "x-switchyard-dropped";
/// The request header asking for strict translation (`1` or `true`).
pub(crate) const STRICT_HEADER: &str = "x-switchyard-strict";
/// The longest `x-switchyard-dropped` value; a longer list is cut after a
/// whole path and ends in [`TRUNCATED`].
pub(crate) const MAX_DROPPED_HEADER: usize = 1024;
/// The end of a cut `x-switchyard-dropped` list.
pub(crate) const TRUNCATED: &str = ", ...";

/// What the candidate's model takes: its lane's `capabilities:`, or the
/// common ground for an ad-hoc lane.
pub(crate) fn capabilities(gateway: &Gateway, candidate: &Candidate<'_>) -> Capabilities {
    // Lanes are indexed like `config.models`, ad-hoc lanes after them.
    gateway.config.models.get(candidate.lane_index).map_or_else(Capabilities::default, |model| model.capabilities)
}

/// `request` written by `codec` for a model with `capabilities`, fitted to
/// what the model takes first: a cap past its most output lowered to it, a
/// reasoning field kept from a model that does not reason, the sampling
/// parameters it refuses while it reasons kept from it when it will, each
/// reported as a `capability` drop. The IR is given back as the caller sent it, for
/// the next lane.
pub(crate) fn write_for_model(codec: &dyn Codec, request: &mut Request, capabilities: &Capabilities) -> Encoded {
    let asked = request.max_tokens;
    let lowered = match (asked, capabilities.max_output) {
        (Some(cap), Some(most)) if cap > most => {
            request.max_tokens = Some(most);
            true
        }
        _ => false,
    };
    // OpenAI refuses `reasoning_effort` on a model that does not reason.
    let unreasoned = match capabilities.reasoning {
        Some(false) => request.reasoning.take(),
        _ => None,
    };
    let refused = without_refused_sampling(request, capabilities);
    let mut encoded = codec.write_request_for(request, capabilities);
    request.max_tokens = asked;
    refused.restore(request, &mut encoded.dropped);
    if lowered {
        Dropped::push_once(&mut encoded.dropped, Field::MaxTokens, DropReason::Capability);
    }
    if let Some(reasoning) = unreasoned {
        if !reasoning.is_off() {
            if reasoning.effort.is_some() {
                Dropped::push_once(&mut encoded.dropped, Field::ReasoningEffort, DropReason::Capability);
            }
            if reasoning.budget_tokens.is_some() || reasoning.effort.is_none() {
                Dropped::push_once(&mut encoded.dropped, Field::ReasoningBudget, DropReason::Capability);
            }
        }
        request.reasoning = Some(reasoning);
    }
    encoded
}

/// The sampling parameters a request goes without, to be put back for the
/// next lane.
#[derive(Default)]
struct Withheld {
    temperature: Option<f64>,
    top_p: Option<f64>,
    top_k: Option<u64>,
    frequency_penalty: Option<f64>,
    presence_penalty: Option<f64>,
    stop: Vec<String>,
    seed: Option<i64>,
    logprobs: Option<u32>,
}

/// Takes from `request` what the model refuses while it reasons, when it
/// will reason on this request (OpenAI's reasoning models refuse
/// temperature, top_p, the penalties and logprobs; xAI's the penalties and stop).
fn without_refused_sampling(request: &mut Request, capabilities: &Capabilities) -> Withheld {
    let refused = capabilities.refused_while_reasoning;
    if refused.is_empty() || !capabilities.will_reason(request.reasoning.as_ref()) {
        return Withheld::default();
    }
    let mut withheld = Withheld::default();
    if refused.has(Field::Temperature) {
        withheld.temperature = request.temperature.take();
    }
    if refused.has(Field::TopP) {
        withheld.top_p = request.top_p.take();
    }
    if refused.has(Field::TopK) {
        withheld.top_k = request.top_k.take();
    }
    if refused.has(Field::FrequencyPenalty) {
        withheld.frequency_penalty = request.frequency_penalty.take();
    }
    if refused.has(Field::PresencePenalty) {
        withheld.presence_penalty = request.presence_penalty.take();
    }
    if refused.has(Field::Stop) {
        withheld.stop = std::mem::take(&mut request.stop);
    }
    if refused.has(Field::Seed) {
        withheld.seed = request.seed.take();
    }
    if refused.has(Field::Logprobs) {
        withheld.logprobs = request.logprobs.take();
    }
    withheld
}

impl Withheld {
    /// Puts what was withheld back on `request`, reporting each.
    fn restore(self, request: &mut Request, dropped: &mut Vec<Dropped>) {
        let mut back = |field: Field, was: bool| {
            if was {
                Dropped::push_once(dropped, field, DropReason::Capability);
            }
        };
        back(Field::Temperature, self.temperature.is_some());
        back(Field::TopP, self.top_p.is_some());
        back(Field::TopK, self.top_k.is_some());
        back(Field::FrequencyPenalty, self.frequency_penalty.is_some());
        back(Field::PresencePenalty, self.presence_penalty.is_some());
        back(Field::Stop, !self.stop.is_empty());
        back(Field::Seed, self.seed.is_some());
        back(Field::Logprobs, self.logprobs.is_some());
        back(Field::TopLogprobs, self.logprobs.is_some_and(|top| top > 0));
        request.temperature = self.temperature.or(request.temperature);
        request.top_p = self.top_p.or(request.top_p);
        request.top_k = self.top_k.or(request.top_k);
        request.frequency_penalty = self.frequency_penalty.or(request.frequency_penalty);
        request.presence_penalty = self.presence_penalty.or(request.presence_penalty);
        if !self.stop.is_empty() {
            request.stop = self.stop;
        }
        request.seed = self.seed.or(request.seed);
        request.logprobs = self.logprobs.or(request.logprobs);
    }
}

/// Judges what translating the call for the candidate dropped: a strict
/// call is refused (the caller's 400, naming the fields in its own terms);
/// otherwise the `x-switchyard-dropped` value (none when nothing was lost).
pub(crate) fn check(
    gateway: &Gateway,
    call: &Call,
    candidate: &Candidate<'_>,
    dropped: &[Dropped],
) -> Result<Option<HeaderValue>, ErrorInfo> {
    if dropped.is_empty() {
        return Ok(None);
    }
    let caller = gateway.codec_for(call.operation, call.ingress);
    let mut paths: Vec<String> = Vec::with_capacity(dropped.len());
    for entry in dropped {
        let path = dropped_path(caller, entry);
        if !paths.iter().any(|seen| *seen == path) {
            paths.push(path.into_owned());
        }
    }
    let to = candidate.lane.protocol;
    let fields: Vec<&'static str> = dropped.iter().map(|entry| entry.field.as_str()).collect();
    tracing::info!(
        request_id = ?call.request_id, lane = %candidate.lane.name, from = %call.ingress, to = %to,
        fields = ?fields, paths = ?paths, "fields dropped in translation"
    );
    if is_strict(gateway, call, candidate) {
        let mut info = ErrorInfo::new(
            ErrorKind::InvalidRequest,
            format!(
                "strict translation: the {to} lane `{}` cannot carry {}; send the request without them, \
                 or to a pool whose lanes speak {}",
                candidate.lane.name,
                paths.join(", "),
                call.ingress
            ),
        );
        info.param = paths.first().cloned();
        return Err(info);
    }
    Ok(Some(header_value(&paths)))
}

/// Adds `x-switchyard-dropped` to a response.
pub(crate) fn annotate(headers: &mut HeaderMap, dropped: Option<HeaderValue>) {
    if let Some(value) = dropped {
        headers.insert(HeaderName::from_static(DROPPED_HEADER), value);
    }
}

/// Strict by the pool's config or the caller's header (which can make a
/// lenient pool strict, never the reverse).
fn is_strict(gateway: &Gateway, call: &Call, candidate: &Candidate<'_>) -> bool {
    let asked = call
        .headers
        .get(STRICT_HEADER)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim() == "1" || value.trim().eq_ignore_ascii_case("true"));
    // Configured pools come first in the gateway's pools, indexed as in config.
    let configured =
        gateway.config.pools.get(candidate.slot.pool).is_some_and(|pool| pool.translation == Translation::Strict);
    asked || configured
}

/// The paths, comma-separated, in printable ASCII (an unmodelled field's
/// path is caller input), at most [`MAX_DROPPED_HEADER`] bytes.
fn header_value(paths: &[String]) -> HeaderValue {
    let mut value = String::new();
    for path in paths {
        let clean: String =
            path.chars().map(|c| if c.is_ascii_graphic() && c != ',' && c != '"' { c } else { '?' }).collect();
        let separator = if value.is_empty() { "" } else { ", " };
        if value.len() + separator.len() + clean.len() > MAX_DROPPED_HEADER - TRUNCATED.len() {
            value.push_str(TRUNCATED);
            break;
        }
        value.push_str(separator);
        value.push_str(&clean);
    }
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// o4-mini reasons whatever it is asked: the sampling it refuses goes,
    /// reported, and comes back for the next lane; a model that is not
    /// reasoning on this request keeps it.
    #[test]
    fn sampling_a_reasoning_model_refuses_is_withheld_and_restored() {
        use switchyard_ir::{Effort, Efforts, Fields, Reasoning};
        let o_series = Capabilities {
            reasoning: Some(true),
            thinks_by_default: true,
            efforts: Some(Efforts::of(&[Effort::Low, Effort::Medium, Effort::High])),
            refused_while_reasoning: Fields::of(&[Field::Temperature, Field::TopP, Field::PresencePenalty]),
            ..Capabilities::default()
        };
        let codec = switchyard_protocol::codec(switchyard_ir::Protocol::OpenAi);
        let mut request = Request {
            model: "o4-mini".into(),
            temperature: Some(0.3),
            top_p: Some(0.9),
            presence_penalty: Some(0.5),
            seed: Some(7),
            reasoning: Some(Reasoning::with_budget(1024)),
            ..Request::default()
        };
        let before = request.clone();
        let encoded = write_for_model(codec, &mut request, &o_series);
        let body: serde_json::Value = serde_json::from_slice(&encoded.body).unwrap_or_default();
        for gone in ["temperature", "top_p", "presence_penalty"] {
            assert!(body.get(gone).is_none(), "{gone}: {body}");
        }
        assert_eq!((body["seed"].clone(), body["reasoning_effort"].clone()), (serde_json::json!(7), "low".into()));
        let fields: Vec<Field> = encoded.dropped.iter().map(|d| d.field).collect();
        for field in [Field::Temperature, Field::TopP, Field::PresencePenalty, Field::ReasoningBudget] {
            assert!(fields.contains(&field), "{field:?}: {fields:?}");
        }
        assert_eq!(request, before, "the next lane gets the caller's request");
        let not_thinking = Capabilities { thinks_by_default: false, ..o_series };
        request.reasoning = None;
        let encoded = write_for_model(codec, &mut request, &not_thinking);
        let body: serde_json::Value = serde_json::from_slice(&encoded.body).unwrap_or_default();
        assert_eq!(body["temperature"], 0.3, "a model not reasoning takes its sampling");
    }

    #[test]
    fn the_header_lists_paths_and_is_capped_after_a_whole_path() {
        let value = header_value(&["generationConfig.topK".into(), "output_config.effort".into()]);
        assert_eq!(value, "generationConfig.topK, output_config.effort");
        let many: Vec<String> = (0..200).map(|i| format!("generationConfig.field{i}")).collect();
        let value = header_value(&many);
        let text = value.to_str().unwrap_or_default();
        assert!(text.len() <= MAX_DROPPED_HEADER, "{}", text.len());
        assert!(text.ends_with(TRUNCATED), "{text}");
        assert!(text.trim_end_matches(TRUNCATED).split(", ").all(|p| many.iter().any(|m| m == p)));
    }

    #[test]
    fn caller_chosen_keys_cannot_break_the_header() {
        let value = header_value(&["weird\nkey,\"é\"".into()]);
        assert_eq!(value, "weird?key????");
    }
}
