//! What the duplex relays' guardrails share: the policies a session's
//! text passes, chosen as the HTTP path chooses them (the key's own, else
//! its group's, else its pool's); a client message screened whole (media
//! and signed places skipped); and the refusal that names the policy and
//! rule that blocked something (never the matched text).

use std::sync::Arc;

use switchyard_codec::opaque::Place;
use switchyard_guard::{Blocked, Direction, Masks, Screen};
use switchyard_ir::{ErrorInfo, ErrorKind};
use switchyard_state::governance::Caller;
use switchyard_state::Gateway;

/// The screen of `caller`'s session on `pool`; `None` (and nothing
/// looked up) when the gateway has no policy.
pub(crate) fn of(gateway: &Gateway, caller: Option<&Caller>, pool: usize) -> Option<Arc<Screen>> {
    if gateway.config.policies.is_empty() {
        return None;
    }
    let key = caller.map(|c| &c.key.record);
    match key.and_then(|k| k.policies.as_deref()) {
        Some(names) => gateway.guardrails.for_key(names),
        None => gateway.guardrails.screen(pool, key.and_then(|k| k.group.as_deref())).cloned(),
    }
}

/// A client message (`what`: "the event", "the message") screened whole
/// by the request rules: `None` unchanged, the masked message, or the
/// refusal.
pub(crate) fn whole(
    screen: &Screen,
    masks: &mut Masks,
    places: &[Place],
    text: &str,
    what: &str,
) -> Result<Option<String>, ErrorInfo> {
    if !screen.on_request || !screen.may_match(text.as_bytes(), places) {
        return Ok(None);
    }
    let mut decisions = Vec::new();
    let screened =
        switchyard_guard::json::screen(screen, text.as_bytes(), places, Direction::Request, masks, &mut decisions);
    let unreadable = || ErrorInfo::new(ErrorKind::InvalidRequest, format!("{what} could not be screened"));
    match screened {
        Err(_) => {
            Err(ErrorInfo::new(ErrorKind::InvalidRequest, format!("{what} could not be screened (malformed JSON)")))
        }
        Ok(Err(blocked)) => Err(refusal(&blocked, what)),
        Ok(Ok(None)) => Ok(None),
        Ok(Ok(Some(masked))) => String::from_utf8(masked).map(Some).map_err(|_| unreadable()),
    }
}

/// The error for what `blocked` stopped (`what`: the event, the reply).
pub(crate) fn refusal(blocked: &Blocked, what: &str) -> ErrorInfo {
    let message = format!("{what} was blocked by policy `{}` (rule `{}`)", blocked.policy, blocked.rule);
    let mut info = ErrorInfo::new(ErrorKind::InvalidRequest, message).with_status(400);
    info.code = Some("policy_violation".to_owned());
    info
}
