//! Gemini's tool-call signatures for callers of other protocols: kept from
//! a Gemini lane's reply, and put back on a later request that sends the
//! calls back unsigned, before the Gemini writer would fall back to its
//! placeholder (`state::signatures` holds them; `filter::signatures` keeps
//! them).

use switchyard_ir::{ErrorInfo, Operation, Protocol};
use switchyard_state::call::Call;
use switchyard_state::{Gateway, Lane};

use crate::exchange::Progress;

/// A chat request written for a Gemini lane from another protocol: its
/// tool calls may need the signatures the caller's SDK left out.
pub(crate) fn wants(call: &Call, progress: &Progress<'_>, lane: &Lane) -> bool {
    lane.protocol == Protocol::Gemini
        && call.operation == Operation::Chat
        && !progress.sends_as_came_to(call, lane.protocol)
}

/// Puts back the signatures the gateway kept for the calls the request
/// sends back unsigned (`state::signatures`), once per request, and counts
/// where each signed call's signature came from.
pub(crate) async fn restore(
    gateway: &Gateway,
    call: &Call,
    lane_index: usize,
    progress: &mut Progress<'_>,
) -> Result<(), ErrorInfo> {
    let request = progress.ir(gateway, call)?;
    let owner = call.caller.as_ref().map(|caller| &*caller.owner);
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
/// caller of another protocol, for `owner`. Awaited before the reply's last
/// bytes leave, so the caller's next turn finds them; a store that cannot
/// take them leaves that turn to the placeholder.
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
