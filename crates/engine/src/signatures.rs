//! Gemini's tool-call signatures for callers of other protocols: kept from
//! a Gemini lane's reply, and put back on a later request that sends the
//! calls back unsigned, before the Gemini writer would fall back to its
//! placeholder (`state::signatures` holds them).

use switchyard_ir::{ErrorInfo, Operation, Protocol, Request};
use switchyard_state::call::Call;
use switchyard_state::{Gateway, Lane};

use crate::read::read_once;

/// A chat request written for a Gemini lane from another protocol: its
/// tool calls may need the signatures the caller's SDK left out.
pub(crate) fn wants(call: &Call, lane: &Lane) -> bool {
    lane.protocol == Protocol::Gemini
        && call.operation == Operation::Chat
        && !call.count_tokens
        && !call.sends_as_came_to(lane.protocol)
}

/// Puts back the signatures the gateway kept for the calls the request
/// sends back unsigned (`state::signatures`), once per request, and counts
/// where each signed call's signature came from.
pub(crate) async fn restore(
    gateway: &Gateway,
    call: &Call,
    lane_index: usize,
    translated: &mut Option<Request>,
) -> Result<(), ErrorInfo> {
    let request = read_once(gateway, call, translated)?;
    let owner = call.caller.as_ref().map(|caller| &*caller.key.id);
    let now_ms = i64::try_from(switchyard_state::clock::now_ms()).unwrap_or(i64::MAX);
    let restored = gateway.signatures.restore(owner, request, now_ms).await;
    if let Some(metrics) = gateway.metrics() {
        metrics.signatures(lane_index, [restored.carried, restored.restored, restored.placeholder]);
    }
    if restored.placeholder > 0 {
        tracing::info!(
            request_id = ?call.request_id, calls = restored.placeholder,
            "tool calls sent to Gemini with the placeholder signature (none carried or kept)"
        );
    }
    Ok(())
}

/// Keeps the signed calls (id, signature) of a Gemini lane's reply to a
/// caller of another protocol. Awaited before the reply's last bytes leave,
/// so the caller's next turn finds them; a store that cannot take them
/// leaves that turn to the placeholder.
pub(crate) async fn keep<'a>(gateway: &Gateway, call: &Call, calls: impl IntoIterator<Item = (&'a str, &'a str)>) {
    let owner = call.caller.as_ref().map(|caller| &*caller.key.id);
    keep_for(gateway, owner, calls).await;
}

/// [`keep`], for a relay that outlives its call.
pub(crate) async fn keep_for<'a>(
    gateway: &Gateway,
    owner: Option<&str>,
    calls: impl IntoIterator<Item = (&'a str, &'a str)>,
) {
    let now_ms = i64::try_from(switchyard_state::clock::now_ms()).unwrap_or(i64::MAX);
    if let Err(err) = gateway.signatures.keep(owner, calls, now_ms).await {
        tracing::warn!(error = %err, "tool-call signatures could not be kept");
    }
}
