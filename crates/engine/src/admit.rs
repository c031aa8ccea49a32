//! The admit stage: governance's yes or no before anything is routed. The
//! key may name the pool (and, with a USD budget, only a pool whose every
//! reachable lane is priced); what admission reads of the body is read once,
//! each member named once, and bounded (`Codec::metered`,
//! `estimate::worst_case`); and every bucket of the key's chain has budget,
//! rate and concurrency room for that worst case, which is reserved on the
//! request's record until it settles.

use std::sync::Arc;

use switchyard_ir::{ErrorInfo, ErrorKind, Operation};
use switchyard_state::call::Call;
use switchyard_state::governance::{Denied, KeyChange};
use switchyard_state::Gateway;

use crate::settle::Record;

/// A refusal of the caller's own doing (a rate limit, a guardrail, a pool
/// it may not use): counted toward abuse suspension, and past
/// `governance.suspend.after` within its window the key is suspended (the
/// store written and the alert raised on a task of their own).
pub(crate) fn refused_for_conduct(gateway: &Arc<Gateway>, call: &Call) {
    let (Some(governance), Some(caller)) = (&gateway.governance, &call.caller) else { return };
    let now = switchyard_state::governance::now_ms();
    let Some(until) = governance.note_refusal(caller, now) else { return };
    let (gateway, id) = (gateway.clone(), caller.key.id.clone());
    tokio::spawn(async move {
        let Some(governance) = &gateway.governance else { return };
        let suspend = |record: &mut switchyard_governance::KeyRecord| {
            record.suspended_until = Some(until);
            Ok::<(), std::convert::Infallible>(())
        };
        match governance.change_key(&id, suspend).await {
            Ok(record) => {
                let after = governance.suspend.map_or(0, |s| s.after);
                tracing::warn!(key = %record.id, until, after, "key suspended after repeated refusals");
                if let Some(alerts) = &gateway.telemetry.alerts {
                    let subject = switchyard_state::governance::suspension_subject(&record);
                    let detail = format!("suspended until Unix time {until} after {after} refused requests");
                    alerts.raise(switchyard_telemetry::alert::AlertKind::KeySuspended, &subject, detail, now);
                }
            }
            // Gone or revoked meanwhile: nothing to suspend.
            Err(KeyChange::Missing | KeyChange::Revoked) => {}
            Err(KeyChange::Refused(never)) => match never {},
            Err(KeyChange::Store(err)) => {
                tracing::error!(key = %id, error = %err, "a key's suspension could not be written");
            }
        }
    });
}

/// Governance's admission of a call: its key may name the pool, and its
/// chain has room for what the request may cost, which is reserved on the
/// record.
pub(crate) async fn admit(gateway: &Arc<Gateway>, call: &Call, pool: usize, record: &mut Record) -> Result<(), Denied> {
    let Some(governance) = &gateway.governance else {
        return Ok(());
    };
    let codec = gateway.codec(call.ingress);
    // A token count is never billed: it reserves nothing, and only the
    // request rate limits see it.
    let input = if call.count_tokens {
        0
    } else {
        switchyard_governance::estimate::input_tokens(&call.body, codec.media_members())
    };
    let reservation = match &call.caller {
        None => None,
        Some(caller) => {
            let end_user = end_user(gateway, call);
            // A lane without a price would serve a budgeted key for free.
            if let (true, Some(lane)) = (caller.key.budgeted, &gateway.pools[pool].unpriced) {
                let message = format!(
                    "`{}` can reach lane `{lane}`, which has no rate_card price, so API key {} (which has a USD budget) may not use it",
                    call.name, caller.key.record.prefix
                );
                let info = ErrorInfo::new(ErrorKind::PermissionDenied, message);
                return Err(Denied { info, retry_after: None, own: false });
            }
            let price = &gateway.pools[pool].price_ceiling;
            let estimate = if call.operation == Operation::Chat && !call.count_tokens {
                // What admission reads is read once, each member named once.
                let metered = codec.metered_from(&call.body, &call.metered).map_err(|err| Denied {
                    info: ErrorInfo::new(ErrorKind::InvalidRequest, err.to_string()),
                    retry_after: None,
                    own: false,
                })?;
                let default = governance.default_max_tokens;
                switchyard_governance::estimate::worst_case(input, metered.max_tokens, default, metered.choices, price)
            } else {
                // Another operation generates no tokens; it may bill units
                // (a token count bills nothing: its reservation is empty).
                let units = crate::operation::worst_units(call);
                switchyard_governance::estimate::worst_case_units(input, units, price)
            };
            let hold = governance.admit(caller, &call.name, estimate, end_user.as_deref()).await;
            record.for_end_user(end_user);
            Some(hold?)
        }
    };
    record.admitted(call.caller.clone(), reservation, input);
    Ok(())
}

/// The end user a request is made for: the operator's header
/// (`end_users.header`), else the caller's own field (OpenAI `user`,
/// Anthropic `metadata.user_id`, Bedrock `requestMetadata.user`), else a
/// token caller's subject (`auth.jwt`), cut to
/// `end_users.max_length` bytes at a character.
fn end_user(gateway: &Gateway, call: &Call) -> Option<Box<str>> {
    let config = &gateway.config.end_users;
    let named = match call.headers.get(&config.header).and_then(|v| v.to_str().ok()) {
        Some(header) => std::borrow::Cow::Borrowed(header),
        None => {
            // The ingress scan looked for the metered members (and the end
            // user's) of a governed chat request.
            let scanned = (call.operation == Operation::Chat && !call.count_tokens).then_some(&call.metered);
            match gateway.codec(call.ingress).end_user(&call.body, scanned) {
                Some(named) => named,
                // A token's caller: its subject.
                None => std::borrow::Cow::Borrowed(call.caller.as_ref()?.subject.as_deref()?),
            }
        }
    };
    let named = named.trim();
    if named.is_empty() {
        return None;
    }
    let mut end = named.len().min(config.max_length);
    while !named.is_char_boundary(end) {
        end -= 1;
    }
    Some(Box::from(&named[..end]))
}
