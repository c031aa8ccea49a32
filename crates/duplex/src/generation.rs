//! One generation of a duplex session (a Realtime response, a Live turn)
//! as an exchange: admitted on the caller's chain before it starts (the
//! pool's dearest price for its worst case: the conversation's estimated
//! prompt and its output bound), then settled once from the usage the
//! upstream reports (text, audio, image and cached tokens, priced by the
//! lane's rate card) on one ledger row of the session's operation
//! (`realtime`, `live`). A generation cut short (the caller or the
//! upstream gone, the gateway stopping) is settled at what it delivered,
//! marked estimated; one the upstream refused costs nothing.

use std::sync::Arc;

use switchyard_engine::settle::{Estimated, Record};
use switchyard_ir::{ErrorInfo, ErrorKind, Operation, Protocol, Usage};
use switchyard_state::call::Slot;
use switchyard_state::governance::Caller;
use switchyard_state::Gateway;

/// Where a session's generations run: fixed at its handshake.
pub(crate) struct Place {
    /// The gateway the socket opened on (its pool and lane indexes).
    pub(crate) gateway: Arc<Gateway>,
    /// The caller's protocol (its rows) and the session's operation.
    pub(crate) protocol: Protocol,
    pub(crate) operation: Operation,
    /// The model or pool the caller named.
    pub(crate) name: String,
    pub(crate) pool: usize,
    pub(crate) member: usize,
    pub(crate) lane: usize,
    /// The handshake's headers (the end user's header is read from them).
    pub(crate) headers: http::HeaderMap,
}

/// A generation admitted and not yet settled.
pub(crate) struct Generation {
    record: Box<Record>,
    /// Characters of text and transcript it delivered (an estimate's output).
    pub(crate) delivered: u64,
}

/// Admits one generation of `caller` (`None`: an open gateway) that may
/// read about `input` tokens and write at most `max_output` (`None`: the
/// governance default).
pub(crate) async fn admit(
    place: &Place,
    caller: Option<Caller>,
    input: u64,
    max_output: Option<u64>,
) -> Result<Generation, ErrorInfo> {
    let gateway = &place.gateway;
    let request_id = crate::door::request_id();
    let mut record = Record::begin(gateway, place.protocol, request_id, &place.headers);
    record.named(place.pool, place.operation.as_str(), true);
    let (Some(governance), Some(caller)) = (&gateway.governance, caller) else {
        record.admitted(None, None, input);
        return Ok(Generation { record: served(place, record), delivered: 0 });
    };
    let pool = &gateway.pools[place.pool];
    if let (true, Some(lane)) = (caller.key.budgeted, &pool.unpriced) {
        let message = format!(
            "`{}` can reach lane `{lane}`, which has no rate_card price, so API key {} (which has a USD budget) may not use it",
            pool.name, caller.key.record.prefix
        );
        return Err(refuse(record, caller, ErrorInfo::new(ErrorKind::PermissionDenied, message)));
    }
    let estimate = switchyard_governance::estimate::worst_case(
        input,
        max_output,
        governance.default_max_tokens,
        1,
        &pool.price_ceiling,
    );
    let end_user = end_user(gateway, &place.headers);
    match governance.admit(&caller, &place.name, estimate, end_user.as_deref()).await {
        Ok(hold) => {
            record.for_end_user(end_user);
            record.admitted(Some(caller), Some(hold), input);
            Ok(Generation { record: served(place, record), delivered: 0 })
        }
        Err(denied) => {
            if denied.own {
                switchyard_engine::admit::conduct_refused(gateway, Some(&caller));
            }
            let mut info = denied.info;
            // OpenAI's SDKs read a refused generation's class from its code
            // (a Live close names the kind in its reason instead).
            if info.code.is_none() {
                info.code = Some(
                    match info.kind {
                        ErrorKind::QuotaExceeded => "insufficient_quota",
                        ErrorKind::RateLimit => "rate_limit_exceeded",
                        _ => "generation_refused",
                    }
                    .into(),
                );
            }
            Err(refuse(record, caller, info))
        }
    }
}

/// A generation the upstream started that the caller's chain refused: it
/// is cancelled, and what it did before the cancel landed is settled from
/// its usage all the same, held against nothing.
pub(crate) fn unheld(place: &Place, caller: Option<Caller>, input: u64) -> Generation {
    let request_id = crate::door::request_id();
    let mut record = Record::begin(&place.gateway, place.protocol, request_id, &place.headers);
    record.named(place.pool, place.operation.as_str(), true);
    record.admitted(caller, None, input);
    Generation { record: served(place, record), delivered: 0 }
}

impl Generation {
    /// Its first event reached the caller (the row's time to first byte).
    pub(crate) fn first_byte(&mut self) {
        self.record.first_byte();
    }

    /// Settles it from its reported usage, else (none readable)
    /// the prompt as estimated and what it delivered, marked estimated.
    pub(crate) async fn done(mut self, usage: Option<Usage>, completed: bool) {
        let delivered = self.delivered;
        self.record.record_reported(usage.unwrap_or_default(), || delivered.div_ceil(4));
        self.record.finish(if completed { 200 } else { 499 }).await;
    }

    /// Settles one cut short (`why`) at what it delivered.
    pub(crate) fn cut(mut self, why: Estimated, status: u16) {
        let usage = Usage {
            input_tokens: self.record.input_estimate(),
            output_tokens: self.delivered.div_ceil(4),
            ..Usage::default()
        };
        self.record.record_usage(usage, Some(why));
        self.record.finish_detached(status);
    }

    /// Settles one the upstream refused before it started: nothing billed.
    pub(crate) fn refused_upstream(mut self) {
        self.record.finish_detached(400);
    }

    /// Settles one the upstream never answered before the session ended
    /// (realtime input the server heard no turn in): nothing billed.
    pub(crate) fn unanswered(mut self) {
        self.record.finish_detached(499);
    }
}

/// The pool `name` resolves to, when it serves `operation` (a pool of
/// lanes with `operation: realtime` or `live`).
pub(crate) fn pool_serving(gateway: &Gateway, name: &str, operation: Operation) -> Result<usize, ErrorInfo> {
    let pool = gateway.resolve(name).ok_or_else(|| {
        ErrorInfo::new(
            ErrorKind::NotFound,
            format!("model or pool `{name}` does not exist (GET /v1/models lists them)"),
        )
    })?;
    let serves = gateway.pools[pool].operation;
    if serves != operation {
        let mut info = ErrorInfo::new(
            ErrorKind::InvalidRequest,
            format!("`{name}` serves {serves}, not {operation}: name a pool of lanes with `operation: {operation}`"),
        );
        info.param = Some("model".into());
        return Err(info);
    }
    Ok(pool)
}

/// The record's serving lane: the socket's.
fn served(place: &Place, mut record: Box<Record>) -> Box<Record> {
    let wire = place.gateway.lanes[place.lane].wire_model.clone();
    record.serving(Slot { pool: place.pool, member: place.member }, place.lane, wire, 0);
    record
}

fn refuse(mut record: Box<Record>, caller: Caller, info: ErrorInfo) -> ErrorInfo {
    record.refused_with(Some(caller), info.kind);
    record.finish_detached(info.status);
    info
}

/// The end user a generation is made for: the operator's header on the
/// handshake (`end_users.header`), bounded.
fn end_user(gateway: &Gateway, headers: &http::HeaderMap) -> Option<Box<str>> {
    let config = &gateway.config.end_users;
    let named = headers.get(&config.header).and_then(|v| v.to_str().ok())?.trim();
    if named.is_empty() {
        return None;
    }
    let mut end = named.len().min(config.max_length);
    while !named.is_char_boundary(end) {
        end -= 1;
    }
    Some(Box::from(&named[..end]))
}
