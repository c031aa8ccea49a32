//! Guardrails as a filter: a request's prose (every string of its body, in
//! any protocol: system, messages, tool arguments and results) screened
//! against the policies that apply (the key's own, else its group's, else
//! its pool's: `state::guardrails`), masked in place or refused in the
//! caller's protocol naming the policy and rule, never the matched text;
//! its moderators asked while the request is routed, their verdict awaited
//! before anything answers it. A reply is screened the same way: whole, or
//! as a stream comes (`stream::StreamGuard`, held back no more than the
//! longest rule's reach), including an answer the response cache gives.
//!
//! Reads: the call's body and key, the reply. Writes: the body (masked),
//! the reply (masked), the record's guardrail decisions, and
//! `Marks::pseudonymised` when a mask is reversible.

mod moderate;
mod stream;

use std::sync::Arc;

use bytes::Bytes;
use switchyard_codec::{opaque, Codec};
use switchyard_guard::{json, Blocked, Direction, Masks, Screen};
use switchyard_ir::{ErrorInfo, ErrorKind, StreamEvent};
use switchyard_state::call::Call;
use switchyard_state::Gateway;

use super::{Filter, FilterFuture, Flow, Refusal, ReplyCx, RequestCx};
use crate::settle::Record;

pub(crate) use moderate::Moderation;

/// A request's guardrails.
pub(crate) struct Guard {
    gateway: Arc<Gateway>,
    screen: Arc<Screen>,
    /// The request's placeholders (a reply masks on from them).
    masks: Masks,
    moderation: Option<Moderation>,
    stream: Option<stream::StreamGuard>,
    /// Past turns' signed reasoning left out of the request, by path
    /// (told to the caller in [`OMITTED_HEADER`]).
    omitted: Vec<String>,
}

/// The response header naming the blocks of past turns' signed reasoning
/// a mask would have changed, which the request went without.
const OMITTED_HEADER: &str = "x-switchyard-omitted";

/// The longest [`OMITTED_HEADER`] value: a longer list is cut after a path.
const MAX_OMITTED_HEADER: usize = 1024;

impl Guard {
    /// The guardrails of `call` in `pool`, when a policy applies to it (a
    /// config without policies pays one check).
    pub(crate) fn of(gateway: &Arc<Gateway>, call: &Call, pool: usize) -> Option<Guard> {
        if gateway.config.policies.is_empty() {
            return None;
        }
        // The most specific wins: the key's own policies, its group's, its pool's.
        let key = call.caller.as_ref().map(|c| &c.key.record);
        let screen = match key.and_then(|k| k.policies.as_deref()) {
            Some(names) => gateway.guardrails.for_key(names),
            None => gateway.guardrails.screen(pool, key.and_then(|k| k.group.as_deref())).cloned(),
        }?;
        Some(Guard::over(gateway, screen))
    }

    /// A guard over `screen` alone.
    pub(crate) fn over(gateway: &Arc<Gateway>, screen: Arc<Screen>) -> Guard {
        let masks = Masks::default();
        Guard { gateway: gateway.clone(), screen, masks, moderation: None, stream: None, omitted: Vec::new() }
    }

    /// Screens the request body in place (every string but where the
    /// caller's protocol keeps media and signed state, `codec`'s places);
    /// the refusal when a rule blocks or the body cannot be read. Signed
    /// reasoning is never rewritten: a mask that would change a past
    /// turn's leaves that turn's reasoning out, where its vendor lets it
    /// go (`Codec::past_reasoning`), and otherwise refuses the request.
    fn screen_request(&mut self, call: &mut Call, codec: &dyn Codec, record: &mut Record) -> Result<(), ErrorInfo> {
        let places = codec.opaque().request;
        // A form (audio to transcribe) is no JSON.
        let json = call.operation != switchyard_ir::Operation::Transcription;
        if !self.screen.on_request || !json || !self.screen.may_match(&call.body, places) {
            return Ok(());
        }
        let mut decisions = Vec::new();
        let mut screened =
            json::screen(&self.screen, &call.body, places, Direction::Request, &mut self.masks, &mut decisions);
        if matches!(&screened, Ok(Err(blocked)) if blocked.signed) {
            if let Some((body, omitted)) = self.without_past_reasoning(&call.body, codec) {
                self.masks = Masks::default();
                let screen = &self.screen;
                screened = json::screen(screen, &body, places, Direction::Request, &mut self.masks, &mut decisions)
                    .map(|outcome| outcome.map(|masked| Some(masked.unwrap_or(body))));
                self.omitted = omitted;
            }
        }
        record.guarded(&self.screen, &decisions);
        match screened {
            // A body the screen cannot read is not passed on unread.
            Err(malformed) => Err(unreadable(&malformed, Direction::Request)),
            Ok(Ok(None)) => Ok(()),
            Ok(Err(blocked)) => Err(refusal(&blocked, Direction::Request)),
            Ok(Ok(Some(body))) => {
                call.body = Bytes::from(body);
                // The model's place moved with the masks before it.
                call.model_span = switchyard_codec::scan::scan_top_level(&call.body).ok().and_then(|t| t.model_span);
                Ok(())
            }
        }
    }
}

impl Guard {
    /// `body` without the signed reasoning of its past turns that a mask
    /// would change and no rule blocks, where `codec`'s vendor lets a past
    /// turn's go; the paths left out.
    fn without_past_reasoning(&self, body: &[u8], codec: &dyn Codec) -> Option<(Vec<u8>, Vec<String>)> {
        let past = codec.past_reasoning()?;
        let screen = &self.screen;
        let mut omit =
            |text: &str| screen.screen_signed(text, Direction::Request, &mut Vec::new()).is_err_and(|b| b.signed);
        opaque::omit_past_reasoning(body, past, &mut omit)
    }
}

impl Filter for Guard {
    fn name(&self) -> &'static str {
        "guardrails"
    }

    fn on_request<'a>(&'a mut self, cx: &'a mut RequestCx<'_>) -> Option<FilterFuture<'a, Flow>> {
        // Where the caller's protocol keeps media and signed state; every
        // other string is screened.
        let codec = cx.env.codec_for(cx.call.operation, cx.call.ingress);
        let places = codec.opaque().request;
        if let Err(info) = self.screen_request(cx.call, codec, cx.record) {
            return Some(Box::pin(async move { Flow::Refuse(Refusal { info, own: true }) }));
        }
        cx.marks.pseudonymised |= self.masks.restores();
        // The moderators are asked while the request is routed; their
        // verdict is awaited before anything answers it (`before_send`).
        if !self.screen.moderators.is_empty() {
            let (gateway, screen) = (self.gateway.clone(), self.screen.clone());
            let (request_id, body) = (cx.call.request_id.clone(), cx.call.body.clone());
            let task = moderate::moderate(gateway, request_id, body, places, screen);
            self.moderation = Some(Moderation::spawn(task));
        }
        None
    }

    fn before_send<'a>(
        &'a mut self,
        _call: &'a Call,
        record: &'a mut Record,
    ) -> Option<FilterFuture<'a, Result<(), ErrorInfo>>> {
        let moderation = self.moderation.take()?;
        Some(Box::pin(moderation.verdict(record)))
    }

    fn reads_events(&self) -> bool {
        self.screen.on_response
    }

    fn on_events(&mut self, events: &mut Vec<StreamEvent>, cx: &mut ReplyCx<'_>) -> Result<(), ErrorInfo> {
        if !self.screen.on_response {
            return Ok(());
        }
        let guard = self.stream.get_or_insert_with(|| stream::StreamGuard::new(self.screen.clone()));
        let outcome = guard.screen(events, &mut self.masks);
        if guard.decided() {
            cx.record.guarded(&self.screen, guard.take_decisions());
        }
        outcome.map_err(|blocked| {
            tracing::info!(request_id = ?cx.call.request_id, "a guardrail refused the reply mid-stream");
            refusal(&blocked, Direction::Response)
        })
    }

    fn on_whole(&mut self, whole: &mut crate::render::Whole, cx: &mut ReplyCx<'_>) -> Result<(), ErrorInfo> {
        // Only chat replies are prose; an operation's are vectors, rankings, audio.
        if !self.screen.on_response || !cx.call.operation.is_chat() {
            return Ok(());
        }
        let places = cx.env.codec_for(cx.call.operation, cx.call.ingress).opaque().reply;
        let body = without_logprobs(std::mem::take(&mut whole.body));
        whole.body = self.screen_reply(body, places, cx.record)?;
        Ok(())
    }

    fn on_head(&mut self, headers: &mut http::HeaderMap) {
        if self.omitted.is_empty() {
            return;
        }
        let mut value = String::new();
        for path in &self.omitted {
            if value.len() + path.len() + 2 > MAX_OMITTED_HEADER {
                value.push_str(", ...");
                break;
            }
            if !value.is_empty() {
                value.push_str(", ");
            }
            value.push_str(path);
        }
        if let Ok(value) = http::HeaderValue::from_str(&value) {
            headers.insert(OMITTED_HEADER, value);
        }
    }

    fn withholds(&self) -> bool {
        self.stream.as_ref().is_some_and(stream::StreamGuard::holds)
    }

    fn on_restart(&mut self, _part: &switchyard_ir::Usage) {
        if let Some(stream) = self.stream.as_mut() {
            stream.drop_held();
        }
    }
}

impl Guard {
    /// A whole reply (as the caller gets it, in the caller's protocol)
    /// screened: masked, or the refusal.
    fn screen_reply(&mut self, body: Bytes, places: Places, record: &mut Record) -> Result<Bytes, ErrorInfo> {
        if !self.masks.restores() && !self.screen.may_match(&body, places) {
            return Ok(body);
        }
        let mut decisions = Vec::new();
        let screened = json::screen(&self.screen, &body, places, Direction::Response, &mut self.masks, &mut decisions);
        record.guarded(&self.screen, &decisions);
        let body = match screened {
            Err(malformed) => return Err(unreadable(&malformed, Direction::Response)),
            Ok(Ok(None)) => body,
            Ok(Ok(Some(masked))) => Bytes::from(masked),
            Ok(Err(blocked)) => return Err(refusal(&blocked, Direction::Response)),
        };
        if !self.masks.restores() {
            return Ok(body);
        }
        // Reversible placeholders go back to what they stand for, but in
        // signed text: the caller gets it as its vendor signed it.
        let masks = &self.masks;
        match json::rewrite_strings::<()>(&body, places, |text, signed| Ok(masks.restore(text).filter(|_| !signed))) {
            Ok(Ok(Some(restored))) => Ok(Bytes::from(restored)),
            _ => Ok(body),
        }
    }
}

/// A whole reply without its tokens' log probabilities. They spell the
/// reply's text a token at a time, where a rule split across tokens never
/// matches, so a screened reply goes without them (a screened stream drops
/// them likewise). Only a body that holds some is parsed.
fn without_logprobs(body: Bytes) -> Bytes {
    fn strip(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(members) => {
                members.retain(|name, _| !matches!(name.as_str(), "logprobs" | "logprobsResult" | "top_logprobs"));
                members.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    if memchr::memmem::find(&body, b"logprob").is_none() {
        return body;
    }
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&body) else { return body };
    strip(&mut value);
    serde_json::to_vec(&value).map_or(body, Bytes::from)
}

/// The caller's refusal for a body the screen could not read.
fn unreadable(malformed: &json::Malformed, direction: Direction) -> ErrorInfo {
    match direction {
        Direction::Request => {
            let message = format!("the request body could not be read for its guardrail policies ({malformed})");
            ErrorInfo::new(ErrorKind::InvalidRequest, message).with_status(400)
        }
        Direction::Response => {
            let message = format!("the upstream reply could not be read for its guardrail policies ({malformed})");
            ErrorInfo::new(ErrorKind::Internal, message).with_status(502)
        }
    }
}

/// Where a protocol keeps media and signed state (`Codec::opaque`).
type Places = &'static [switchyard_codec::opaque::Place];

/// The caller's refusal for a blocked request or reply: naming the policy
/// and rule, and, when it would have masked signed reasoning, saying so.
pub(crate) fn refusal(blocked: &Blocked, direction: Direction) -> ErrorInfo {
    let what = match direction {
        Direction::Request => "the request",
        Direction::Response => "the reply",
    };
    let message = match blocked.signed {
        false => format!("{what} was blocked by policy `{}` (rule `{}`)", blocked.policy, blocked.rule),
        true => format!(
            "{what} was refused: policy `{}` (rule `{}`) would alter signed reasoning (text its vendor's \
             signature covers), which is never rewritten: its vendor refuses it changed",
            blocked.policy, blocked.rule
        ),
    };
    let mut info = ErrorInfo::new(ErrorKind::InvalidRequest, message).with_status(400);
    info.code = Some("policy_violation".to_owned());
    info
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code: a failed unwrap is a failed test")]
    use super::*;

    #[test]
    fn a_screened_reply_goes_without_its_tokens_log_probabilities() {
        // "secret" split over two tokens: no rule reads the pieces whole.
        let chat = br#"{"choices":[{"index":0,"message":{"content":"a secret"},"logprobs":{"content":[{"token":"a se","logprob":-0.1,"top_logprobs":[]},{"token":"cret","logprob":-0.2,"top_logprobs":[]}]}}]}"#;
        let stripped = without_logprobs(Bytes::from_static(chat));
        let value: serde_json::Value = serde_json::from_slice(&stripped).unwrap();
        assert!(value["choices"][0].get("logprobs").is_none());
        assert_eq!(value["choices"][0]["message"]["content"], "a secret");
        let gemini =
            br#"{"candidates":[{"content":{"parts":[{"text":"x"}]},"logprobsResult":{"chosenCandidates":[]}}]}"#;
        let stripped = without_logprobs(Bytes::from_static(gemini));
        assert!(!String::from_utf8_lossy(&stripped).contains("logprobsResult"));
        // A body without any is passed on as it came.
        let plain = Bytes::from_static(br#"{"choices":[{"message":{"content":"hi"}}]}"#);
        assert_eq!(without_logprobs(plain.clone()).as_ptr(), plain.as_ptr());
    }
}
