//! The guardrail stage: a request's prose (every string of its body, in
//! any protocol: system, messages, tool arguments and results) screened
//! after admission against its pool's policies, or its caller's group's,
//! or its key's own (the most specific wins: `state::guardrails`); masked, or refused in the caller's protocol
//! naming the policy and rule, never the matched text. A reply is screened
//! the same way: whole (`reply`), or as a stream comes (`StreamGuard`,
//! held back no more than the longest rule's reach). Decisions go to the
//! record (metrics), never the text. A request no policy applies to costs
//! one lookup.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use switchyard_guard::stream::{Restorer, StreamMask};
use switchyard_guard::{json, Blocked, Decision, Direction, Masks, Screen};
use switchyard_ir::{Delta, ErrorInfo, ErrorKind, StreamEvent};
use switchyard_state::call::{Call, Guarding};
use switchyard_state::Gateway;

use crate::settle::Record;

/// Screens `call`'s request under the policies of `pool` (or its caller's
/// group): its body masked in place, or the refusal. Leaves the reply's
/// guard on the call when a policy looks at replies.
pub(crate) async fn request(
    gateway: &Arc<Gateway>,
    call: &mut Call,
    pool: usize,
    record: &mut Record,
) -> Result<Option<Moderation>, ErrorInfo> {
    // A config without policies pays one check.
    if gateway.config.policies.is_empty() {
        return Ok(None);
    }
    // The most specific wins: the key's own policies, its group's, its pool's.
    let key = call.caller.as_ref().map(|c| &c.key.record);
    let screen = match key.and_then(|k| k.policies.as_deref()) {
        Some(names) => gateway.guardrails.for_key(names),
        None => gateway.guardrails.screen(pool, key.and_then(|k| k.group.as_deref())).cloned(),
    };
    let Some(screen) = screen else { return Ok(None) };
    let mut masks = Masks::default();
    let mut decisions = Vec::new();
    if screen.on_request && screen.may_match(&call.body) {
        let screened = json::rewrite_strings(&call.body, |text| {
            screen.screen(text, Direction::Request, &mut masks, &mut decisions)
        });
        record.guarded(&screen, &decisions);
        match screened {
            // Not JSON the walk can follow: the codec refuses it later.
            Err(_) | Ok(Ok(None)) => {}
            Ok(Err(blocked)) => return Err(refusal(&blocked, Direction::Request)),
            Ok(Ok(Some(body))) => {
                call.body = Bytes::from(body);
                // The model's place moved with the masks before it.
                call.model_span = switchyard_codec::scan::scan_top_level(&call.body).ok().and_then(|t| t.model_span);
            }
        }
    }
    // The moderators are asked while the request is routed; their verdict
    // is awaited before anything answers it (`verdict`).
    let moderation = (!screen.moderators.is_empty()).then(|| {
        let task = moderate(gateway.clone(), call.request_id.clone(), call.body.clone(), screen.clone());
        Moderation(tokio::spawn(task))
    });
    if screen.on_response {
        call.guard = Some(Arc::new(Guarding { screen, masks: Mutex::new(masks) }));
    }
    Ok(moderation)
}

/// The moderators' verdict on a request, being asked while it is routed.
/// Dropped unawaited (the request ended first), the asking stops.
pub(crate) struct Moderation(tokio::task::JoinHandle<Verdict>);

impl Drop for Moderation {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What the moderators said: the moderators that flagged the request (by
/// catalog id), and the refusal when one blocks it.
pub(crate) struct Verdict {
    flagged: Vec<usize>,
    refusal: Option<ErrorInfo>,
}

/// Waits for the moderators' verdict (none asked: at once), records it, and
/// answers the refusal when they block the request.
pub(crate) async fn verdict(moderation: Option<Moderation>, record: &mut Record) -> Result<(), ErrorInfo> {
    let Some(mut moderation) = moderation else { return Ok(()) };
    let verdict = (&mut moderation.0).await.unwrap_or_else(|err| Verdict {
        flagged: Vec::new(),
        refusal: Some(ErrorInfo::new(ErrorKind::Internal, format!("the moderators' task failed: {err}"))),
    });
    for id in verdict.flagged {
        record.guarded_id(id, false);
    }
    verdict.refusal.map_or(Ok(()), Err)
}

/// Sends the request's prose (as masked) to the screen's moderators at
/// once, each within its timeout; a flagged verdict is its policy's
/// action, and a moderator without a verdict lets the request pass or
/// refuses it (`on_error`). Every moderator's flag is recorded, even
/// after one blocks.
async fn moderate(gateway: Arc<Gateway>, request_id: http::HeaderValue, body: Bytes, screen: Arc<Screen>) -> Verdict {
    let gateway = &*gateway;
    let mut outcome = Verdict { flagged: Vec::new(), refusal: None };
    let mut text = String::new();
    let _ = json::rewrite_strings::<()>(&body, |piece| {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(piece);
        Ok(None)
    });
    let asks = screen.moderators.iter().map(|(policy, moderator)| {
        let text = &text;
        async move {
            let reply = match &moderator.bedrock {
                None => {
                    let mut payload = serde_json::json!({ "input": text });
                    if let Some(model) = &moderator.model {
                        payload["model"] = serde_json::Value::from(&**model);
                    }
                    let body = serde_json::to_vec(&payload).unwrap_or_default();
                    gateway.hooks.call(&moderator.url, body, moderator.timeout).await
                }
                Some(guardrail) => apply_guardrail(gateway, moderator, guardrail, text).await,
            };
            (*policy, moderator, reply)
        }
    });
    for (policy, moderator, reply) in futures_util::future::join_all(asks).await {
        let name = &screen.policies[policy].name;
        let verdict = reply.as_deref().ok().and_then(switchyard_guard::flagged);
        match verdict {
            Some(false) => {}
            Some(true) => {
                outcome.flagged.push(moderator.id);
                if screen.policies[policy].action == switchyard_guard::Action::Block && outcome.refusal.is_none() {
                    let blocked = Blocked { policy: name.clone(), rule: Arc::from("moderator") };
                    outcome.refusal = Some(refusal(&blocked, Direction::Request));
                }
            }
            None => {
                let why = match &reply {
                    Err(err) => err.to_string(),
                    Ok(_) => "its reply is not a verdict".to_owned(),
                };
                tracing::warn!(request_id = ?request_id, policy = %name, %why, "a moderator gave no verdict");
                if moderator.block_on_error && outcome.refusal.is_none() {
                    let message = format!(
                        "the moderator of policy `{name}` gave no verdict ({why}), and the policy refuses unmoderated requests"
                    );
                    outcome.refusal = Some(ErrorInfo::new(ErrorKind::Unavailable, message).with_status(503));
                }
            }
        }
    }
    outcome
}

/// Asks an AWS Bedrock guardrail (`ApplyGuardrail`) about `text`, signed
/// with its provider's credentials as a Bedrock lane's calls are.
async fn apply_guardrail(
    gateway: &Gateway,
    moderator: &switchyard_guard::Moderator,
    guardrail: &switchyard_guard::BedrockGuardrail,
    text: &str,
) -> Result<bytes::Bytes, switchyard_transport::hooks::HookError> {
    use switchyard_transport::hooks::HookError;
    let provider = gateway
        .config
        .providers
        .iter()
        .find(|p| p.name == guardrail.provider)
        .ok_or_else(|| HookError::Transport(format!("provider `{}` is gone", guardrail.provider)))?;
    let body = switchyard_guard::BedrockGuardrail::body(text);
    let outbound = switchyard_codec::Outbound {
        method: "POST",
        url: &moderator.url,
        body: &body,
        time: std::time::SystemTime::now(),
    };
    let headers = gateway
        .codec(switchyard_ir::Protocol::Bedrock)
        .auth_headers(&provider.auth, &outbound)
        .map_err(|err| HookError::Transport(format!("signing the guardrail call: {err}")))?;
    let body = http_body_util::Full::new(bytes::Bytes::from(body));
    gateway.hooks.post_with(&moderator.url, "application/json", body, headers, moderator.timeout).await
}

/// The caller's refusal for a blocked request or reply.
fn refusal(blocked: &Blocked, direction: Direction) -> ErrorInfo {
    let what = match direction {
        Direction::Request => "the request",
        Direction::Response => "the reply",
    };
    let message = format!("{what} was blocked by policy `{}` (rule `{}`)", blocked.policy, blocked.rule);
    let mut info = ErrorInfo::new(ErrorKind::InvalidRequest, message).with_status(400);
    info.code = Some("policy_violation".to_owned());
    info
}

/// A whole reply (as the caller gets it) screened: masked, or the refusal.
pub(crate) fn reply(call: &Call, body: Bytes, record: &mut Option<Box<Record>>) -> Result<Bytes, ErrorInfo> {
    let Some(guarding) = &call.guard else { return Ok(body) };
    let mut masks = guarding.masks.lock().unwrap_or_else(PoisonError::into_inner);
    if !masks.restores() && !guarding.screen.may_match(&body) {
        return Ok(body);
    }
    let mut decisions = Vec::new();
    let screened = json::rewrite_strings(&body, |text| {
        guarding.screen.screen(text, Direction::Response, &mut masks, &mut decisions)
    });
    if let Some(record) = record.as_mut() {
        record.guarded(&guarding.screen, &decisions);
    }
    let body = match screened {
        Err(_) | Ok(Ok(None)) => body,
        Ok(Ok(Some(masked))) => Bytes::from(masked),
        Ok(Err(blocked)) => return Err(refusal(&blocked, Direction::Response)),
    };
    if !masks.restores() {
        return Ok(body);
    }
    // Reversible placeholders go back to what they stand for.
    match json::rewrite_strings::<()>(&body, |text| Ok(masks.restore(text))) {
        Ok(Ok(Some(restored))) => Ok(Bytes::from(restored)),
        _ => Ok(body),
    }
}

/// A stream's reply guardrails: one hold-back per content block.
pub(crate) struct StreamGuard {
    screen: Arc<Screen>,
    masks: Masks,
    /// Each open block's mask and restorer, and the kind of its deltas.
    blocks: Vec<(u32, DeltaKind, StreamMask, Restorer)>,
    decisions: Vec<Decision>,
    /// The events' buffer between calls (one allocation per stream).
    spare: Vec<StreamEvent>,
}

#[derive(Clone, Copy)]
enum DeltaKind {
    Text,
    Thinking,
    ToolInput,
}

impl DeltaKind {
    fn delta(self, text: String) -> Delta {
        match self {
            DeltaKind::Text => Delta::Text(text),
            DeltaKind::Thinking => Delta::Thinking(text),
            DeltaKind::ToolInput => Delta::ToolInput(text),
        }
    }
}

impl StreamGuard {
    /// The guard of `call`'s stream, when its reply is screened.
    pub(crate) fn of(call: &Call) -> Option<StreamGuard> {
        let guarding = call.guard.as_ref()?;
        let masks = guarding.masks.lock().unwrap_or_else(PoisonError::into_inner).clone();
        Some(StreamGuard {
            screen: guarding.screen.clone(),
            masks,
            blocks: Vec::new(),
            decisions: Vec::new(),
            spare: Vec::new(),
        })
    }

    /// Screens `events` in place: content deltas masked (text that could
    /// still become a match is held, and released at its block's end), or
    /// the caller's refusal when a blocking rule matches. Decisions made
    /// go to `record`.
    pub(crate) fn screen(
        &mut self,
        events: &mut Vec<StreamEvent>,
        record: Option<&mut Record>,
    ) -> Result<(), ErrorInfo> {
        let before = self.decisions.len();
        let result = self.apply(events);
        if let (Some(record), true) = (record, self.decisions.len() > before) {
            record.guarded(&self.screen, &self.decisions[before..]);
        }
        result.map_err(|blocked| refusal(&blocked, Direction::Response))
    }

    /// Text is held back now (not yet sent to the caller).
    pub(crate) fn holds(&self) -> bool {
        self.blocks.iter().any(|(_, _, mask, _)| mask.held() > 0)
    }

    /// The stream goes on on another lane from the text the caller has:
    /// text still held back was never sent, and the next lane writes it
    /// again, so it is dropped (kept, it would come twice).
    pub(crate) fn drop_held(&mut self) {
        self.blocks.clear();
    }

    fn apply(&mut self, events: &mut Vec<StreamEvent>) -> Result<(), Blocked> {
        let mut out = std::mem::take(&mut self.spare);
        out.clear();
        for event in events.drain(..) {
            match event {
                StreamEvent::BlockDelta { index, delta } => {
                    let (kind, text) = match delta {
                        Delta::Text(text) => (DeltaKind::Text, text),
                        Delta::Thinking(text) => (DeltaKind::Thinking, text),
                        Delta::ToolInput(text) => (DeltaKind::ToolInput, text),
                        other => {
                            out.push(StreamEvent::BlockDelta { index, delta: other });
                            continue;
                        }
                    };
                    let at = match self.blocks.iter().position(|(i, _, _, _)| *i == index) {
                        Some(at) => at,
                        None => {
                            let mask = StreamMask::new(self.screen.clone());
                            self.blocks.push((index, kind, mask, Restorer::default()));
                            self.blocks.len() - 1
                        }
                    };
                    let (_, _, mask, restorer) = &mut self.blocks[at];
                    let mut released = text;
                    mask.push_in_place(&mut released, &mut self.masks, &mut self.decisions)?;
                    // Only reversible placeholders are put back.
                    if self.masks.restores() {
                        released = restorer.push(&released, &self.masks);
                    }
                    if !released.is_empty() {
                        out.push(StreamEvent::BlockDelta { index, delta: kind.delta(released) });
                    }
                }
                StreamEvent::BlockStop { index } => {
                    if let Some(at) = self.blocks.iter().position(|(i, _, _, _)| *i == index) {
                        let (_, kind, mut mask, mut restorer) = self.blocks.swap_remove(at);
                        let rest = mask.flush(&mut self.masks, &mut self.decisions)?;
                        let mut rest = restorer.push(&rest, &self.masks);
                        rest.push_str(&restorer.flush(&self.masks));
                        if !rest.is_empty() {
                            out.push(StreamEvent::BlockDelta { index, delta: kind.delta(rest) });
                        }
                    }
                    out.push(StreamEvent::BlockStop { index });
                }
                event @ (StreamEvent::MessageDelta { .. } | StreamEvent::MessageStop) => {
                    // A block the stream never closed is released before the end.
                    for (index, kind, mut mask, mut restorer) in std::mem::take(&mut self.blocks) {
                        let rest = mask.flush(&mut self.masks, &mut self.decisions)?;
                        let mut rest = restorer.push(&rest, &self.masks);
                        rest.push_str(&restorer.flush(&self.masks));
                        if !rest.is_empty() {
                            out.push(StreamEvent::BlockDelta { index, delta: kind.delta(rest) });
                        }
                    }
                    out.push(event);
                }
                other => out.push(other),
            }
        }
        self.spare = std::mem::replace(events, out);
        Ok(())
    }
}
