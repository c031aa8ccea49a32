//! The admit stage: governance's yes or no before anything is routed. The
//! key may name the pool (and, with a USD budget, only a pool whose every
//! reachable lane is priced); what admission reads of the body is read once,
//! each member named once, and bounded (`Codec::metered`,
//! `estimate::worst_case`); and every bucket of the key's chain has budget,
//! rate and concurrency room for that worst case, which is reserved on the
//! request's record until it settles.

use std::sync::Arc;

use switchyard_ir::{ErrorInfo, ErrorKind};
use switchyard_state::call::Call;
use switchyard_state::governance::{Denied, KeyChange};
use switchyard_state::Gateway;

use crate::settle::Record;

/// A refusal of the caller's own doing (a rate limit, a guardrail, a pool
/// it may not use): counted toward abuse suspension, and past
/// `governance.suspend.after` within its window the key is suspended (the
/// store written and the alert raised on a task of their own).
pub(crate) fn refused_for_conduct(gateway: &Arc<Gateway>, call: &Call) {
    conduct_refused(gateway, call.caller.as_ref());
}

/// [`refused_for_conduct`] of a request outside the exchange (the raw
/// route), by its caller.
pub fn conduct_refused(gateway: &Arc<Gateway>, caller: Option<&switchyard_state::governance::Caller>) {
    let (Some(governance), Some(caller)) = (&gateway.governance, caller) else { return };
    let now = switchyard_state::governance::now_ms();
    let Some(until) = governance.note_refusal(caller, now) else { return };
    let (gateway, id) = (gateway.clone(), caller.key.id.clone());
    switchyard_tasks::work(async move {
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
                    let ends = std::time::UNIX_EPOCH + std::time::Duration::from_secs(until.max(0) as u64);
                    let detail =
                        format!("suspended until {} after {after} refused requests", httpdate::fmt_http_date(ends));
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

/// A request a budget sent to a cheaper pool (`on_exhaust.downgrade`).
#[derive(Debug, Clone)]
pub(crate) struct Downgraded {
    /// The pool that serves it.
    pub(crate) pool: usize,
    /// What the caller is told: why, whose budget and the pool it named
    /// (`x-switchyard-downgrade`).
    pub(crate) header: Option<http::HeaderValue>,
}

/// Governance's admission of a call: its key may name the pool, and its
/// chain has room for what the request may cost, which is reserved on the
/// record. A budget that downgrades rather than refuse sends the request
/// to its cheaper pool (held at that pool's prices on the same chain):
/// `Ok(Some(_))` names it. Degrade, then refuse: a cheaper pool that is
/// unknown, serves another operation or that the key may not use leaves a
/// spent budget's refusal standing.
pub(crate) async fn admit(
    gateway: &Arc<Gateway>,
    call: &Call,
    pool: usize,
    record: &mut Record,
) -> Result<Option<Downgraded>, Denied> {
    let Some(governance) = &gateway.governance else {
        return Ok(None);
    };
    let codec = gateway.codec_for(call.operation, call.ingress);
    let spec = crate::operation::of(call.operation);
    // A token count is never billed: it reserves nothing, and only the
    // request rate limits see it.
    let input = if spec.billed() {
        switchyard_governance::estimate::input_tokens(&call.body, codec.media_members())
    } else {
        0
    };
    let mut downgraded = None;
    let reservation = match &call.caller {
        None => None,
        Some(caller) => {
            let end_user = end_user(gateway, call);
            let estimate = worst_case(gateway, call, caller, pool, input)?;
            let hold = match governance.admit(caller, &call.name, estimate, end_user.as_deref()).await {
                Err(Denied { downgrade: Some(to), info, retry_after, own }) => {
                    match cheaper(gateway, call, caller, &to.pool) {
                        Some(cheap) => {
                            let estimate = worst_case(gateway, call, caller, cheap, input)?;
                            let name = &gateway.pools[cheap].name;
                            let hold = governance.admit_downgraded(caller, name, estimate, end_user.as_deref()).await;
                            let told = format!(
                                "{}; bucket={}; from={}",
                                to.trigger.as_str(),
                                bucket_name(&to.bucket),
                                call.name
                            );
                            let header = http::HeaderValue::try_from(told).ok();
                            downgraded = Some(Downgraded { pool: cheap, header });
                            hold
                        }
                        // No cheaper pool to go to: a spent budget refuses,
                        // and one that only passed its share (or its
                        // forecast) admits where the call was going.
                        None if to.trigger == switchyard_governance::Trigger::Spent => {
                            tracing::warn!(pool = %to.pool, bucket = %to.bucket, "a budget's downgrade pool cannot serve this request");
                            governance.refused_budget();
                            Err(Denied::new(info, retry_after, own))
                        }
                        None => governance.admit_downgraded(caller, &call.name, estimate, end_user.as_deref()).await,
                    }
                }
                other => other,
            };
            record.for_end_user(end_user);
            let hold = hold?;
            // The key's chain admitted it; a stopped run refuses it still,
            // and that hold is given back.
            match crate::run::admit(gateway, call, caller, hold.reservation.estimate.cost) {
                Ok(ticket) => record.on_run(ticket),
                Err(denied) => {
                    governance.settle(&hold, 0, 0);
                    return Err(denied);
                }
            }
            Some(hold)
        }
    };
    record.admitted(call.caller.clone(), reservation, input);
    Ok(downgraded)
}

/// What a call may cost in `pool` at worst, refused when a lane of the
/// pool has no price and the key a USD budget (it would serve for free).
fn worst_case(
    gateway: &Gateway,
    call: &Call,
    caller: &switchyard_state::governance::Caller,
    pool: usize,
    input: u64,
) -> Result<switchyard_governance::Estimate, Denied> {
    let Some(governance) = &gateway.governance else { return Ok(Default::default()) };
    if let (true, Some(lane)) = (caller.key.budgeted, &gateway.pools[pool].unpriced) {
        let message = format!(
            "`{}` can reach lane `{lane}`, which has no rate_card price, so API key {} (which has a USD budget) may not use it",
            gateway.pools[pool].name, caller.key.record.prefix
        );
        let info = ErrorInfo::new(ErrorKind::PermissionDenied, message);
        return Err(Denied::new(info, None, false));
    }
    let price = &gateway.pools[pool].price_ceiling;
    crate::operation::of(call.operation)
        .worst_case(gateway, call, input, price, governance.default_max_tokens)
        .map_err(|info| Denied::new(info, None, false))
}

/// The pool a budget downgrades `call` to, when it can serve it: it
/// exists, serves the call's operation, the key may use it and (for a
/// budgeted key) every lane of it is priced.
fn cheaper(gateway: &Gateway, call: &Call, caller: &switchyard_state::governance::Caller, name: &str) -> Option<usize> {
    let pool = gateway.resolve(name)?;
    let state = &gateway.pools[pool];
    let serves = state.operation == call.operation.lane();
    let priced = !caller.key.budgeted || state.unpriced.is_none();
    (serves && priced && caller.key.record.may_use(name)).then_some(pool)
}

/// A bucket as the downgrade header names it: `key:<id>`, `group:<name>`,
/// `user:<id>`.
fn bucket_name(bucket: &switchyard_governance::BucketId) -> String {
    use switchyard_governance::BucketId;
    match bucket {
        BucketId::Key(id) => format!("key:{id}"),
        BucketId::Group(name) => format!("group:{name}"),
        BucketId::EndUser { user, .. } => format!("user:{user}"),
        BucketId::Scoped { owner, name } => format!("{owner}/{name}"),
    }
}

/// The end user a request is made for: a token caller's subject
/// (`auth.jwt`), whatever the request names (its own end-user caps are
/// then never escaped by naming someone else); else the operator's header
/// (`end_users.header`), else the caller's own field (OpenAI `user`,
/// Anthropic `metadata.user_id`, Bedrock `requestMetadata.user`); cut to
/// `end_users.max_length` bytes at a character.
pub fn end_user(gateway: &Gateway, call: &Call) -> Option<Box<str>> {
    let config = &gateway.config.end_users;
    let subject = call.caller.as_ref().and_then(|caller| caller.subject.as_deref());
    let named = match (subject, call.headers.get(&config.header).and_then(|v| v.to_str().ok())) {
        (Some(subject), _) => std::borrow::Cow::Borrowed(subject),
        (None, Some(header)) => std::borrow::Cow::Borrowed(header),
        (None, None) => {
            // The ingress scan looked for the metered members (and the end
            // user's) of a governed chat request.
            let scanned = call.operation.is_chat().then_some(&call.metered);
            gateway.codec_for(call.operation, call.ingress).end_user(&call.body, scanned)?
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
