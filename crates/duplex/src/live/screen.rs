//! Guardrails on a Live session. A client message that carries text the
//! model reads (`setup`'s instructions, `clientContent`'s turns, a
//! `realtimeInput` text, a `toolResponse`) is screened whole: masked in
//! place, or refused. The model's text parts and its `outputTranscription`
//! are screened as they stream, each with its own hold-back
//! (`guard::stream::StreamMask`: held no more than the longest rule's
//! reach, a match split across messages masked as in one piece), released
//! when the turn ends (`generationComplete`, `turnComplete`, `interrupted`).
//! A turn's audio is held until then and passes only when its transcript
//! passed unchanged (the words were spoken in it); a blocked turn ends the
//! session (Live has no error message), and the refusal names the policy
//! and rule.

use std::sync::Arc;

use serde_json::{json, Map, Value};
use switchyard_codec::opaque::{Holds, Place};
use switchyard_guard::stream::StreamMask;
use switchyard_guard::{Masks, Screen};
use switchyard_ir::ErrorInfo;

/// Places in a client message that hold media or signed state, in either
/// spelling: never screened as text.
const PLACES: &[Place] = &[
    Place::at(&["clientContent", "turns", "parts", "inlineData", "data"], Holds::Media),
    Place::at(&["client_content", "turns", "parts", "inlineData", "data"], Holds::Media),
    Place::at(&["clientContent", "turns", "parts", "inline_data", "data"], Holds::Media),
    Place::at(&["client_content", "turns", "parts", "inline_data", "data"], Holds::Media),
    Place::at(&["clientContent", "turns", "parts", "thoughtSignature"], Holds::Signed),
    Place::at(&["client_content", "turns", "parts", "thoughtSignature"], Holds::Signed),
    Place::at(&["realtimeInput", "audio", "data"], Holds::Media),
    Place::at(&["realtime_input", "audio", "data"], Holds::Media),
    Place::at(&["realtimeInput", "video", "data"], Holds::Media),
    Place::at(&["realtime_input", "video", "data"], Holds::Media),
    Place::at(&["realtimeInput", "mediaChunks", "data"], Holds::Media),
    Place::at(&["realtime_input", "mediaChunks", "data"], Holds::Media),
    Place::at(&["realtime_input", "media_chunks", "data"], Holds::Media),
];

/// A session's screening.
pub(crate) struct Screening {
    screen: Arc<Screen>,
    masks: Masks,
    /// The turn's text and transcript as they stream.
    text: Option<StreamMask>,
    transcript: Option<StreamMask>,
    /// The transcript as written and as released this turn.
    said: String,
    released: String,
    /// The turn's audio, held until its transcript is decided.
    audio: Vec<String>,
}

impl Screening {
    /// The screening of a session under `screen`.
    pub(crate) fn new(screen: Arc<Screen>) -> Screening {
        Screening {
            screen,
            masks: Masks::default(),
            text: None,
            transcript: None,
            said: String::new(),
            released: String::new(),
            audio: Vec::new(),
        }
    }

    /// A client message screened whole: `None` unchanged, the masked
    /// message, or the refusal.
    pub(crate) fn request(&mut self, text: &str) -> Result<Option<String>, ErrorInfo> {
        crate::screen::whole(&self.screen, &mut self.masks, PLACES, text, "the message")
    }

    /// A server message as the caller gets it: none (held), itself
    /// rewritten, and what the turn's end releases before it; or the
    /// refusal of a blocked turn.
    pub(crate) fn response(&mut self, text: String) -> Result<Vec<String>, ErrorInfo> {
        if !self.screen.on_response {
            return Ok(vec![text]);
        }
        let Ok(Value::Object(mut message)) = serde_json::from_str::<Value>(&text) else { return Ok(vec![text]) };
        let Some(Value::Object(content)) = message.get_mut("serverContent") else { return Ok(vec![text]) };
        let mut decisions = Vec::new();
        // The model's parts: text screened, audio held.
        if let Some(Value::Array(parts)) = content.get_mut("modelTurn").and_then(|t| t.get_mut("parts")) {
            let mut kept = Vec::with_capacity(parts.len());
            for mut part in std::mem::take(parts) {
                if let Some(piece) = part.get("text").and_then(Value::as_str).map(str::to_owned) {
                    let mask = self.text.get_or_insert_with(|| StreamMask::new(self.screen.clone()));
                    let released = mask
                        .push(&piece, &mut self.masks, &mut decisions)
                        .map_err(|blocked| crate::screen::refusal(&blocked, "the reply"))?;
                    if released.is_empty() {
                        continue;
                    }
                    part["text"] = Value::String(released);
                } else if part.get("inlineData").is_some() {
                    self.audio.push(
                        json!({ "serverContent": { "modelTurn": { "role": "model", "parts": [part] } } }).to_string(),
                    );
                    continue;
                }
                kept.push(part);
            }
            if kept.is_empty() {
                content.remove("modelTurn");
            } else {
                *parts = kept;
            }
        }
        // The transcript of its audio.
        let transcript = content.get("outputTranscription").and_then(|t| t.get("text")).and_then(Value::as_str);
        if let Some(piece) = transcript.map(str::to_owned) {
            self.said.push_str(&piece);
            let mask = self.transcript.get_or_insert_with(|| StreamMask::new(self.screen.clone()));
            let released = mask
                .push(&piece, &mut self.masks, &mut decisions)
                .map_err(|blocked| crate::screen::refusal(&blocked, "the reply"))?;
            self.released.push_str(&released);
            if released.is_empty() {
                content.remove("outputTranscription");
            } else {
                content.insert("outputTranscription".into(), json!({ "text": released }));
            }
        }
        let ends = ["generationComplete", "turnComplete", "interrupted"]
            .iter()
            .any(|flag| content.get(*flag).and_then(Value::as_bool) == Some(true));
        let mut out = if ends { self.end_turn()? } else { Vec::new() };
        if !is_empty(&message) {
            out.push(Value::Object(message).to_string());
        }
        Ok(out)
    }

    /// The turn ends: what its masks held, decided and released, and its
    /// audio when its transcript passed unchanged.
    fn end_turn(&mut self) -> Result<Vec<String>, ErrorInfo> {
        let mut decisions = Vec::new();
        let mut out = Vec::new();
        if let Some(mut mask) = self.text.take() {
            let rest =
                mask.flush(&mut self.masks, &mut decisions).map_err(|b| crate::screen::refusal(&b, "the reply"))?;
            if !rest.is_empty() {
                out.push(
                    json!({ "serverContent": { "modelTurn": { "role": "model", "parts": [{ "text": rest }] } } })
                        .to_string(),
                );
            }
        }
        let mut transcript_rest = None;
        if let Some(mut mask) = self.transcript.take() {
            let rest =
                mask.flush(&mut self.masks, &mut decisions).map_err(|b| crate::screen::refusal(&b, "the reply"))?;
            self.released.push_str(&rest);
            if !rest.is_empty() {
                transcript_rest =
                    Some(json!({ "serverContent": { "outputTranscription": { "text": rest } } }).to_string());
            }
        }
        let audio = std::mem::take(&mut self.audio);
        if self.released == self.said {
            out.extend(audio);
        }
        out.extend(transcript_rest);
        self.said.clear();
        self.released.clear();
        Ok(out)
    }
}

/// Whether a rewritten message has nothing left to say.
fn is_empty(message: &Map<String, Value>) -> bool {
    message.iter().all(|(name, value)| name == "serverContent" && value.as_object().is_some_and(Map::is_empty))
}
