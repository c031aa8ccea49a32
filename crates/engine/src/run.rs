//! A model call's agent run: found only when the caller's groups configure
//! `runs:` (else nothing here runs), admitted after the key's own chain
//! (a run's refusal gives that hold back), and settled with the request.
//! The run id is read from the headers (`state::runs::RUN_HEADERS`), then,
//! for an Anthropic caller, from Claude Code's session inside
//! `metadata.user_id`. The loop breaker's fingerprint of a model turn is
//! its body without the members that change between identical turns.

use std::sync::Arc;

use switchyard_governance::run::{fingerprint, CallKind};
use switchyard_ir::Protocol;
use switchyard_state::call::Call;
use switchyard_state::governance::{Caller, Denied};
use switchyard_state::runs::RunTicket;
use switchyard_state::Gateway;

/// Top-level members a client changes between otherwise identical turns
/// (ids, metadata, transport switches): left out of a turn's fingerprint.
const VOLATILE: [&str; 9] = [
    "metadata",
    "user",
    "stream",
    "stream_options",
    "store",
    "prompt_cache_key",
    "safety_identifier",
    "client_metadata",
    "previous_response_id",
];

/// Admits `call` of `caller` on its run, reserving `reserve` (nano-USD):
/// `Ok(None)` when the caller's groups track no runs or the request names
/// none; a 400 for a run id out of bounds; the caller's quota error when
/// the run is stopped.
pub(crate) fn admit(
    gateway: &Arc<Gateway>,
    call: &Call,
    caller: &Caller,
    reserve: u64,
) -> Result<Option<Box<RunTicket>>, Denied> {
    let (Some(specs), Some(governance)) = (&gateway.runs, &gateway.governance) else { return Ok(None) };
    // The headers first: a request naming no run (the usual one) costs
    // their lookups and nothing more.
    let from_body;
    let named = match switchyard_state::runs::run_id(&call.headers) {
        Ok(Some(id)) => Ok(id),
        Ok(None) => {
            from_body = claude_session(gateway, call);
            match from_body.as_deref() {
                Some(session) => match switchyard_state::runs::checked_run_id(session, "metadata.user_id") {
                    Ok(Some(id)) => Ok(id),
                    Ok(None) => return Ok(None),
                    Err(bad) => Err(bad),
                },
                None => return Ok(None),
            }
        }
        Err(bad) => Err(bad),
    };
    // A caller whose groups track no runs is never refused for its run id.
    let Some(spec) = specs.for_caller(governance, caller) else { return Ok(None) };
    let id = named.map_err(|bad| Denied::new(bad.info(), None, false))?;
    let print = spec.loop_repeats.and_then(|_| turn_fingerprint(&call.body));
    let ticket = governance.admit_run(caller, spec, id, CallKind::Model, print, reserve)?;
    Ok(Some(Box::new(ticket)))
}

/// Claude Code's session id: `metadata.user_id` is JSON text whose
/// `session_id` names the CLI's session (an Anthropic caller only).
fn claude_session(gateway: &Gateway, call: &Call) -> Option<String> {
    if call.ingress != Protocol::Anthropic {
        return None;
    }
    let scanned = call.operation.is_chat().then_some(&call.metered);
    let user = gateway.codec_for(call.operation, call.ingress).end_user(&call.body, scanned)?;
    let value: serde_json::Value = serde_json::from_str(&user).ok()?;
    value.get("session_id")?.as_str().map(str::to_owned)
}

/// A model turn's fingerprint: its JSON without the [`VOLATILE`] members
/// (`None` for a body that is not a JSON object: nothing to compare).
pub(crate) fn turn_fingerprint(body: &[u8]) -> Option<u64> {
    let mut value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let object = value.as_object_mut()?;
    for member in VOLATILE {
        object.remove(member);
    }
    let mut canonical = Vec::with_capacity(body.len());
    canonical_json(&value, &mut canonical);
    Some(fingerprint([canonical.as_slice()]))
}

/// `value` written with every object's members in name order (a client
/// may order them differently from one turn to the next).
fn canonical_json(value: &serde_json::Value, out: &mut Vec<u8>) {
    match value {
        serde_json::Value::Object(map) => {
            let mut members: Vec<(&String, &serde_json::Value)> = map.iter().collect();
            members.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (name, member) in members {
                canonical_json(&serde_json::Value::String(name.clone()), out);
                out.push(b':');
                canonical_json(member, out);
                out.push(b',');
            }
            out.push(b'}');
        }
        serde_json::Value::Array(items) => {
            out.push(b'[');
            for item in items {
                canonical_json(item, out);
                out.push(b',');
            }
            out.push(b']');
        }
        // A scalar writes the same whatever surrounds it.
        scalar => out.extend_from_slice(scalar.to_string().as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_the_same_turn_whatever_its_volatile_members_say() {
        let one = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"user":"a","stream":true}"#;
        let two = br#"{"messages":[{"role":"user","content":"hi"}],"model":"m","metadata":{"id":"x"}}"#;
        let other = br#"{"model":"m","messages":[{"role":"user","content":"hello"}]}"#;
        assert_eq!(turn_fingerprint(one), turn_fingerprint(two));
        assert_ne!(turn_fingerprint(one), turn_fingerprint(other));
        assert_eq!(turn_fingerprint(b"[1]"), None);
        assert_eq!(turn_fingerprint(b"not json"), None);
    }
}
