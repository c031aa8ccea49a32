//! Hedging (`pools.<p>.hedge`): when a request's first content is late
//! (past the pool's fixed `after`, or its recent p95), a second attempt
//! starts on the next candidate that passes its lane gate. The first to
//! bring content is answered; the other is cancelled (its connection
//! dropped, its trial released, no verdict on its lane) and billed its
//! prompt as a cancelled attempt (`Record::cancelled`). An attempt that
//! fails meanwhile is judged as any try is, and the race goes on with the
//! other. The extra attempts are capped at the pool's `max_extra` share of
//! its hedgeable requests (`switchyard_health::hedge::Allowance`); by
//! default only requests without tools, or at temperature 0, are hedged.
//! A pool without `hedge` never reaches this module.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use switchyard_codec::scan;
use switchyard_ir::Field;
use switchyard_state::call::Call;
use switchyard_state::{Gateway, Hedging};
use switchyard_telemetry::metrics::HedgeOutcome;
use tokio::time::Instant;

use super::{conclude, launch, ready, Attempting, Launched, Tried, Tries};
use crate::candidate::Candidate;
use crate::exchange::Progress;
use crate::exhausted::Exhaustion;
use crate::lane_gate::{self, Entry};
use crate::settle::Record;

/// The pool's hedging, when this try may be hedged: the pool hedges, the
/// request is a chat and eligible, and it has not been hedged yet.
pub(super) fn wanted<'g>(
    gateway: &'g Gateway,
    call: &Call,
    candidate: &Candidate<'_>,
    tries: &Tries,
) -> Option<&'g Hedging> {
    let hedging = gateway.pools[candidate.slot.pool].hedge.as_ref()?;
    let chat = call.operation.is_chat();
    (chat && !tries.hedged && eligible(gateway, call, hedging.settings.with_tools)).then_some(hedging)
}

/// Whether a request may be answered twice: it offers no tools, or it
/// samples at temperature 0 (or the pool hedges tool requests too).
fn eligible(gateway: &Gateway, call: &Call, with_tools: bool) -> bool {
    if with_tools || !offers_tools(&call.body) {
        return true;
    }
    let codec = gateway.codec_for(call.operation, call.ingress);
    let Some(path) = codec.parameter_path(Field::Temperature) else { return false };
    let path: Vec<&'static str> = path.split('.').collect();
    matches!(scan::member_once(&call.body, &path), Ok(Some(value)) if value.iter().all(|b| matches!(b, b'0' | b'.')))
}

/// Whether a request body offers tools, in any protocol's words (one walk
/// of its top level).
fn offers_tools(body: &[u8]) -> bool {
    let Ok(top) = scan::scan_request(body, &["tools", "toolConfig", "functions"]) else { return false };
    top.found.iter().flatten().any(|&(start, end)| {
        let value = body.get(start as usize..end as usize).unwrap_or_default();
        !matches!(value, b"[]" | b"null" | b"{}")
    })
}

/// Tries `candidate`, hedged: a second attempt on the next free candidate
/// in `rest` starts when the first content is late.
pub(super) async fn race(
    request: &Attempting<'_>,
    candidate: &Candidate<'_>,
    entry: Entry,
    rest: &[Candidate<'_>],
    hedging: &Hedging,
    progress: &mut Progress<'_>,
    tries: &mut Tries,
) -> Tried {
    tries.hedged = true;
    let Some(after) = hedging.trigger() else {
        // The pool's p95 is still being learned: an unhedged try teaches it.
        return taught(request, candidate, entry, hedging, progress, tries).await;
    };
    let gateway = request.gateway;
    let first = match ready(request, candidate, request.call.stream, progress, tries).await {
        Ok(ready) => ready,
        Err(answer) => return answer,
    };
    // Boxed, so the race's loser can be dropped (its connection closed) the
    // moment the winner is known.
    let mut first_launch = Box::pin(launch(request, candidate, first, tries.deadline));
    let launched = tokio::select! {
        launched = &mut first_launch => Some(launched),
        () = tokio::time::sleep(after) => None,
    };
    let hedge = match launched {
        None => second_try(request, candidate, rest, hedging, progress, tries, after).await,
        Some(_) => None,
    };
    let Some((other, other_entry, second_ready)) = hedge else {
        let launched = match launched {
            Some(launched) => launched,
            None => first_launch.await,
        };
        learn(hedging, &launched);
        return conclude(request, candidate, entry, launched, progress, tries).await;
    };
    let started = Instant::now();
    let mut launches = [Some(first_launch), Some(Box::pin(launch(request, other, second_ready, tries.deadline)))];
    // Each side's candidate and gate entry, until it is concluded.
    let mut sides = [Some((candidate, entry)), Some((other, other_entry))];
    loop {
        let (side, launched) = {
            let [first, second] = &mut launches;
            tokio::select! {
                launched = racing(first) => (0, launched),
                launched = racing(second) => (1, launched),
            }
        };
        launches[side] = None;
        let Some((this, this_entry)) = sides[side].take() else { continue };
        let reached = launched.reached_content();
        if reached {
            learn(hedging, &launched);
            let outcome = if side == 0 { HedgeOutcome::PrimaryWon } else { HedgeOutcome::HedgeWon };
            count(gateway, request, outcome);
        }
        if reached {
            // The winner is known: the other side's attempt, still in
            // flight, is cancelled now, before the answer is read.
            cancel(&mut launches[1 - side], sides[1 - side].take(), started, progress.record);
        }
        match conclude(request, this, this_entry, launched, progress, tries).await {
            Tried::Next if sides.iter().any(Option::is_some) => {}
            Tried::Next => {
                count(gateway, request, HedgeOutcome::Failed);
                return Tried::Next;
            }
            // An answer (the winner's, or a caller's fault), or the deadline.
            other => {
                cancel(&mut launches[1 - side], sides[1 - side].take(), started, progress.record);
                return other;
            }
        }
    }
}

/// The second attempt, when the first is late: the request may be answered
/// twice, the pool's share allows one and a lane is free (its request
/// ready to send); else `None`, and the first goes on alone.
async fn second_try<'c, 'a>(
    request: &Attempting<'_>,
    candidate: &Candidate<'_>,
    rest: &'c [Candidate<'a>],
    hedging: &Hedging,
    progress: &mut Progress<'_>,
    tries: &mut Tries,
    after: std::time::Duration,
) -> Option<(&'c Candidate<'a>, Entry, super::Ready<'a>)> {
    let (gateway, call) = (request.gateway, request.call);
    if !eligible(gateway, call, hedging.settings.with_tools) {
        // A sampled answer with tools is not asked for twice.
        return None;
    }
    let second = if hedging.allow() { second_lane(gateway, rest, tries).await } else { None };
    let Some((other, other_entry)) = second else {
        count(gateway, request, HedgeOutcome::Denied);
        return None;
    };
    tries.start(gateway, other, request.plan.pool);
    tracing::info!(
        request_id = ?call.request_id, lane = %candidate.lane.name, hedge = %other.lane.name,
        after_ms = after.as_millis() as u64, "first content late: hedging"
    );
    // A lane that cannot take the request leaves the first to go on alone.
    ready(request, other, call.stream, progress, tries).await.ok().map(|r| (other, other_entry, r))
}

/// Polls a racing launch; a side already done never completes again.
fn racing<F: Future + Unpin>(slot: &mut Option<F>) -> impl Future<Output = F::Output> + '_ {
    std::future::poll_fn(move |cx| match slot.as_mut() {
        Some(launch) => Pin::new(launch).poll(cx),
        None => Poll::Pending,
    })
}

/// Cancels a side still racing: its attempt is dropped (the upstream
/// connection closes, its permit and any trial are released with no
/// verdict on the lane) and noted as cancelled.
fn cancel<F>(launch: &mut Option<F>, side: Option<(&Candidate<'_>, Entry)>, started: Instant, record: &mut Record) {
    let Some(running) = launch.take() else { return };
    drop(running);
    if let Some((loser, _entry)) = side {
        record.cancelled(loser.lane_index, loser.wire_model_arc(), started.elapsed());
    }
}

/// An unhedged try in a hedging pool, whose time to first content the
/// pool learns from.
async fn taught(
    request: &Attempting<'_>,
    candidate: &Candidate<'_>,
    entry: Entry,
    hedging: &Hedging,
    progress: &mut Progress<'_>,
    tries: &mut Tries,
) -> Tried {
    let ready = match ready(request, candidate, request.call.stream, progress, tries).await {
        Ok(ready) => ready,
        Err(answer) => return answer,
    };
    let launched = launch(request, candidate, ready, tries.deadline).await;
    learn(hedging, &launched);
    conclude(request, candidate, entry, launched, progress, tries).await
}

/// The pool learns an attempt's time to first content, when it got there.
fn learn(hedging: &Hedging, launched: &Launched) {
    if launched.reached_content() {
        hedging.record(launched.sent.elapsed());
    }
}

/// The first candidate in `rest` that is in bounds and passes its lane
/// gate now (one at its cap is skipped, not waited for).
async fn second_lane<'c, 'a>(
    gateway: &Arc<Gateway>,
    rest: &'c [Candidate<'a>],
    tries: &Tries,
) -> Option<(&'c Candidate<'a>, Entry)> {
    for candidate in rest {
        if tries.skips(gateway, candidate) {
            continue;
        }
        let mut unused = Exhaustion::default();
        if let Some(entry) = lane_gate::enter(gateway, candidate, tries.deadline, &mut unused, true).await {
            return Some((candidate, entry));
        }
    }
    None
}

fn count(gateway: &Gateway, request: &Attempting<'_>, outcome: HedgeOutcome) {
    if let Some(metrics) = gateway.metrics() {
        metrics.hedge(metrics.place(Some(request.plan.pool), None), outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_seen_in_every_protocols_words() {
        assert!(offers_tools(br#"{"model":"m","tools":[{"type":"function"}]}"#));
        assert!(offers_tools(br#"{"toolConfig":{"tools":[{"toolSpec":{}}]}}"#));
        assert!(offers_tools(br#"{"functions":[{"name":"f"}]}"#));
        assert!(!offers_tools(br#"{"model":"m","tools":[]}"#));
        assert!(!offers_tools(br#"{"model":"m","tools": null}"#));
        assert!(!offers_tools(br#"{"model":"m","messages":[{"content":"tools"}]}"#));
    }
}
