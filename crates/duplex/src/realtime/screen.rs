//! Guardrails on a Realtime session, the policies that apply chosen as
//! the HTTP path chooses them (the key's own, else its group's, else its
//! pool's). A client event that carries text the model reads (an item, a
//! session's instructions, a response's) is screened whole, masked in
//! place or refused with an `error` event. The model's text and
//! transcripts are screened as they stream (`guard::stream::StreamMask`,
//! one per content part: held back no more than the longest rule's
//! reach, a match split across deltas masked as in one piece); the audio
//! of a part is held until its transcript is screened whole, and dropped
//! when the transcript was masked or blocked (the words were spoken in
//! it). A blocked part's text stops, and the caller gets an `error`
//! event naming the policy and rule. Later events that repeat a part's
//! whole text (`content_part.done`, `output_item.done`,
//! `conversation.item.done`, `response.done`) carry it as released.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;
use switchyard_guard::stream::StreamMask;
use switchyard_guard::{Masks, Screen};
use switchyard_ir::ErrorInfo;
use switchyard_state::governance::Caller;
use switchyard_state::Gateway;

use super::event::Server;

/// The most settled parts whose text later events are checked against.
const REMEMBERED: usize = 16;

/// A session's screening.
pub(crate) struct Screening {
    screen: Arc<Screen>,
    masks: Masks,
    /// Places in a client event that hold media or signed state.
    places: &'static [switchyard_codec::opaque::Place],
    /// Parts streaming, by (response, item, content index).
    parts: HashMap<(String, String, u64), Part>,
    /// Parts ended whose released text differs: (as written, as released).
    changed: VecDeque<(String, String)>,
}

/// One content part as it streams.
struct Part {
    mask: StreamMask,
    /// Audio deltas held until the transcript is whole.
    audio: Vec<String>,
    /// The text released so far.
    released: String,
    /// A rule blocked it: nothing more of it passes.
    blocked: bool,
}

impl Screening {
    /// The screening of `caller`'s session on `pool`, when a policy applies.
    pub(crate) fn of(gateway: &Gateway, caller: Option<&Caller>, pool: usize) -> Option<Screening> {
        let screen = crate::screen::of(gateway, caller, pool)?;
        let places = gateway.codec(switchyard_ir::Protocol::OpenAi).opaque().request;
        Some(Screening { screen, masks: Masks::default(), places, parts: HashMap::new(), changed: VecDeque::new() })
    }

    /// A client event screened whole: `None` unchanged, the masked event,
    /// or the refusal.
    pub(crate) fn request(&mut self, text: &str) -> Result<Option<String>, ErrorInfo> {
        crate::screen::whole(&self.screen, &mut self.masks, self.places, text, "the event")
    }

    /// A server event as the caller gets it: none (held), itself, or
    /// others (released text, an error in a blocked part's place).
    pub(crate) fn response(&mut self, server: &Server, text: String) -> Vec<String> {
        if !self.screen.on_response {
            return vec![text];
        }
        let kind = server.kind.as_str();
        let streaming = matches!(
            kind,
            "response.output_text.delta"
                | "response.output_audio_transcript.delta"
                | "response.output_audio.delta"
                | "response.output_text.done"
                | "response.output_audio_transcript.done"
        );
        if !streaming {
            return vec![self.as_released(text)];
        }
        let Ok(mut event) = serde_json::from_str::<Value>(&text) else { return vec![text] };
        let Some(at) = part_of(&event) else { return vec![text] };
        let part = self.parts.entry(at.clone()).or_insert_with(|| Part {
            mask: StreamMask::new(self.screen.clone()),
            audio: Vec::new(),
            released: String::new(),
            blocked: false,
        });
        let mut decisions = Vec::new();
        match kind {
            "response.output_audio.delta" => {
                if !part.blocked {
                    part.audio.push(text);
                }
                Vec::new()
            }
            "response.output_text.delta" | "response.output_audio_transcript.delta" => {
                if part.blocked {
                    return Vec::new();
                }
                let delta = server.text.as_deref().unwrap_or_default();
                match part.mask.push(delta, &mut self.masks, &mut decisions) {
                    Ok(released) if released.is_empty() => Vec::new(),
                    Ok(released) => {
                        part.released.push_str(&released);
                        event["delta"] = Value::String(released);
                        vec![event.to_string()]
                    }
                    Err(blocked) => {
                        part.blocked = true;
                        part.audio.clear();
                        vec![super::event::error_event(&crate::screen::refusal(&blocked, "the reply"), None)]
                    }
                }
            }
            // The part is whole: what is held is decided and released.
            _ => {
                let Some(mut part) = self.parts.remove(&at) else { return Vec::new() };
                let whole = server.text.clone().unwrap_or_default();
                let field = if kind == "response.output_text.done" { "text" } else { "transcript" };
                let delta_kind = kind.replace(".done", ".delta");
                let mut out = Vec::new();
                let mut blocked = part.blocked;
                if !blocked {
                    match part.mask.flush(&mut self.masks, &mut decisions) {
                        Ok(rest) => {
                            if !rest.is_empty() {
                                part.released.push_str(&rest);
                                let mut delta = event.clone();
                                delta["type"] = Value::String(delta_kind);
                                delta["delta"] = Value::String(rest);
                                if let Some(delta) = delta.as_object_mut() {
                                    delta.remove(field);
                                }
                                out.push(delta.to_string());
                            }
                        }
                        Err(found) => {
                            blocked = true;
                            out.push(super::event::error_event(&crate::screen::refusal(&found, "the reply"), None));
                        }
                    }
                }
                // Its audio speaks the words as written: it passes only
                // when they pass unchanged.
                let unchanged = !blocked && part.released == whole;
                if unchanged {
                    out.splice(0..0, part.audio.drain(..));
                    out.push(text);
                    return out;
                }
                event[field] = Value::String(part.released.clone());
                out.push(event.to_string());
                if self.changed.len() == REMEMBERED {
                    self.changed.pop_front();
                }
                self.changed.push_back((whole, part.released));
                out
            }
        }
    }

    /// `text` with every string that is a changed part's whole text
    /// replaced by what was released of it.
    fn as_released(&self, text: String) -> String {
        if self.changed.is_empty()
            || !self.changed.iter().any(|(whole, _)| !whole.is_empty() && text.contains(whole.as_str()))
        {
            return text;
        }
        let rewritten =
            switchyard_guard::json::rewrite_strings::<std::convert::Infallible>(text.as_bytes(), &[], |s, _| {
                Ok(self.changed.iter().find(|(whole, _)| whole == s).map(|(_, released)| released.clone()))
            });
        match rewritten {
            Ok(Ok(Some(bytes))) => String::from_utf8(bytes).unwrap_or(text),
            _ => text,
        }
    }
}

/// The part an event belongs to.
fn part_of(event: &Value) -> Option<(String, String, u64)> {
    let response = event.get("response_id")?.as_str()?.to_owned();
    let item = event.get("item_id")?.as_str()?.to_owned();
    let index = event.get("content_index").and_then(Value::as_u64).unwrap_or(0);
    Some((response, item, index))
}
