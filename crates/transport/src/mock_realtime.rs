//! The in-process fake of OpenAI's Realtime API, so a `mock://` lane with
//! `operation: realtime` serves a session offline (the demo, the tests).
//! A session is a state machine: each client event in, the server events
//! it answers with out, in order, at once. It keeps the conversation's
//! text, buffers input audio (a commit makes a user item whose transcript
//! names the audio's length), and answers `response.create` with the
//! assistant's reply ("Echo: " and the last user text) as text deltas, or
//! as audio deltas with their transcript when the response asks for audio,
//! then `response.done` with usage: text, audio and cached input tokens
//! (the prompt a previous response read is cached), text and audio output
//! tokens. An event it does not know gets an `error` event.

use serde_json::{json, Value};

/// Bytes of 24 kHz 16-bit mono audio in one millisecond.
const PCM_BYTES_PER_MS: u64 = 48;

/// Milliseconds of audio one audio token stands for (OpenAI's about 100).
const MS_PER_AUDIO_TOKEN: u64 = 100;

/// The silent audio one reply word is spoken as (100 ms of PCM16), base64.
const WORD_AUDIO_B64_LEN: usize = (PCM_BYTES_PER_MS as usize * 100) / 3 * 4;

/// One fake Realtime session.
#[derive(Debug)]
pub struct FakeRealtime {
    model: String,
    session: Value,
    /// The conversation's text so far (user and assistant), for usage.
    context_chars: u64,
    /// Audio tokens the conversation holds.
    context_audio_tokens: u64,
    /// The prompt the last response read (cached for the next).
    cached: u64,
    /// The last thing the user said.
    last_user: String,
    /// Base64 characters appended and not yet committed.
    buffered_b64: u64,
    last_item: Option<String>,
    next_id: u64,
}

impl FakeRealtime {
    /// A session on `model`, and the events it opens with.
    pub fn open(model: &str) -> (FakeRealtime, Vec<String>) {
        let session = json!({
            "type": "realtime",
            "object": "realtime.session",
            "id": "sess_fake",
            "model": model,
            "output_modalities": ["audio"],
            "instructions": "",
            "tools": [],
            "tool_choice": "auto",
            "max_output_tokens": "inf",
            "audio": {
                "input": { "format": { "type": "audio/pcm", "rate": 24000 }, "turn_detection": null },
                "output": { "format": { "type": "audio/pcm", "rate": 24000 }, "voice": "alloy", "speed": 1.0 }
            }
        });
        let mut fake = FakeRealtime {
            model: model.to_owned(),
            session,
            context_chars: 0,
            context_audio_tokens: 0,
            cached: 0,
            last_user: String::new(),
            buffered_b64: 0,
            last_item: None,
            next_id: 0,
        };
        let hello = fake.event("session.created", json!({ "session": fake.session.clone() }));
        (fake, vec![hello])
    }

    /// The model the session was opened on.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The server events answering one client event.
    pub fn on_client(&mut self, text: &str) -> Vec<String> {
        let Ok(event) = serde_json::from_str::<Value>(text) else {
            return vec![self.error("invalid_request_error", "invalid_json", "the event is not JSON", None)];
        };
        let client_id = event.get("event_id").and_then(Value::as_str).map(str::to_owned);
        let kind = event.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
        match kind.as_str() {
            "session.update" => {
                if let (Some(update), Some(session)) =
                    (event.get("session").and_then(Value::as_object), self.session.as_object_mut())
                {
                    for (name, value) in update {
                        session.insert(name.clone(), value.clone());
                    }
                }
                vec![self.event("session.updated", json!({ "session": self.session.clone() }))]
            }
            "conversation.item.create" => {
                let mut item = event.get("item").cloned().unwrap_or(Value::Null);
                if !item.is_object() {
                    return vec![self.error("invalid_request_error", "missing_item", "`item` is required", client_id)];
                }
                let text = item_text(&item);
                self.context_chars += text.len() as u64;
                if item.get("role").and_then(Value::as_str) == Some("user") && !text.is_empty() {
                    self.last_user = text;
                }
                let id = match item.get("id").and_then(Value::as_str) {
                    Some(id) => id.to_owned(),
                    None => self.id("item"),
                };
                item["id"] = json!(id);
                item["object"] = json!("realtime.item");
                item["status"] = json!("completed");
                let previous = self.last_item.replace(id);
                vec![
                    self.event(
                        "conversation.item.added",
                        json!({ "previous_item_id": previous, "item": item.clone() }),
                    ),
                    self.event("conversation.item.done", json!({ "previous_item_id": previous, "item": item })),
                ]
            }
            "input_audio_buffer.append" => {
                let audio = event.get("audio").and_then(Value::as_str).unwrap_or_default();
                if !audio.bytes().all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b)) {
                    let message = "`audio` is not base64";
                    return vec![self.error("invalid_request_error", "invalid_audio", message, client_id)];
                }
                self.buffered_b64 += audio.len() as u64;
                Vec::new()
            }
            "input_audio_buffer.clear" => {
                self.buffered_b64 = 0;
                vec![self.event("input_audio_buffer.cleared", json!({}))]
            }
            "input_audio_buffer.commit" => self.commit(client_id),
            "response.create" => self.respond(&event),
            "response.cancel" => {
                let message = "Cancellation failed: no active response found";
                vec![self.error("invalid_request_error", "response_cancel_not_active", message, client_id)]
            }
            "output_audio_buffer.clear" | "conversation.item.truncate" | "conversation.item.delete" => {
                let message = format!("the fake does not keep audio playback ({kind})");
                vec![self.error("invalid_request_error", "unsupported", &message, client_id)]
            }
            _ => {
                let message = format!("Invalid value: '{kind}'");
                vec![self.error("invalid_request_error", "invalid_value", &message, client_id)]
            }
        }
    }

    /// A commit: the buffered audio as a user item with its transcript.
    fn commit(&mut self, client_id: Option<String>) -> Vec<String> {
        // Under 100 ms of audio is refused, as OpenAI refuses it.
        let bytes = self.buffered_b64 / 4 * 3;
        let ms = bytes / PCM_BYTES_PER_MS;
        if ms < 100 {
            let message = format!("buffer too small: expected at least 100ms of audio, but buffer only has {ms}ms");
            return vec![self.error("invalid_request_error", "input_audio_buffer_commit_empty", &message, client_id)];
        }
        self.buffered_b64 = 0;
        self.context_audio_tokens += ms.div_ceil(MS_PER_AUDIO_TOKEN);
        let transcript = format!("audio of {ms} ms");
        self.last_user.clone_from(&transcript);
        let id = self.id("item");
        let previous = self.last_item.replace(id.clone());
        let item = json!({
            "id": id, "object": "realtime.item", "type": "message", "role": "user", "status": "completed",
            "content": [{ "type": "input_audio", "transcript": null }]
        });
        vec![
            self.event("input_audio_buffer.committed", json!({ "previous_item_id": previous, "item_id": id })),
            self.event("conversation.item.added", json!({ "previous_item_id": previous, "item": item.clone() })),
            self.event("conversation.item.done", json!({ "previous_item_id": previous, "item": item })),
            self.event(
                "conversation.item.input_audio_transcription.completed",
                json!({ "item_id": id, "content_index": 0, "transcript": transcript, "usage": { "type": "duration", "seconds": ms as f64 / 1000.0 } }),
            ),
        ]
    }

    /// One response: the reply as text or audio, then its usage.
    fn respond(&mut self, event: &Value) -> Vec<String> {
        let asked = event.get("response");
        let modalities = asked
            .and_then(|r| r.get("output_modalities"))
            .or_else(|| self.session.get("output_modalities"))
            .cloned()
            .unwrap_or(json!(["audio"]));
        let audio = modalities.as_array().is_some_and(|m| m.iter().any(|m| m == "audio"));
        let reply = format!("Echo: {}", self.last_user);
        let response_id = self.id("resp");
        let item_id = self.id("item");
        let (part_kind, content_kind) = if audio { ("audio", "output_audio") } else { ("text", "output_text") };
        let mut out = Vec::new();
        let base = json!({
            "id": response_id, "object": "realtime.response", "status": "in_progress", "status_details": null,
            "output": [], "conversation_id": "conv_fake", "output_modalities": modalities, "usage": null
        });
        out.push(self.event("response.created", json!({ "response": base.clone() })));
        let pending = json!({ "id": item_id, "object": "realtime.item", "type": "message", "role": "assistant", "status": "in_progress", "content": [] });
        let at = json!({ "response_id": response_id, "output_index": 0 });
        out.push(self.event("response.output_item.added", merge(&at, json!({ "item": pending.clone() }))));
        let previous = self.last_item.replace(item_id.clone());
        out.push(self.event("conversation.item.added", json!({ "previous_item_id": previous, "item": pending })));
        let part_at = merge(&at, json!({ "item_id": item_id, "content_index": 0 }));
        let empty_part =
            if audio { json!({ "type": "audio", "transcript": "" }) } else { json!({ "type": "text", "text": "" }) };
        out.push(self.event("response.content_part.added", merge(&part_at, json!({ "part": empty_part }))));
        let words: Vec<&str> = reply.split_inclusive(' ').collect();
        for word in &words {
            if audio {
                let silence = "A".repeat(WORD_AUDIO_B64_LEN);
                out.push(self.event("response.output_audio.delta", merge(&part_at, json!({ "delta": silence }))));
                out.push(
                    self.event("response.output_audio_transcript.delta", merge(&part_at, json!({ "delta": word }))),
                );
            } else {
                out.push(self.event("response.output_text.delta", merge(&part_at, json!({ "delta": word }))));
            }
        }
        let (part, content) = if audio {
            out.push(self.event("response.output_audio.done", part_at.clone()));
            out.push(
                self.event("response.output_audio_transcript.done", merge(&part_at, json!({ "transcript": reply }))),
            );
            (json!({ "type": part_kind, "transcript": reply }), json!({ "type": content_kind, "transcript": reply }))
        } else {
            out.push(self.event("response.output_text.done", merge(&part_at, json!({ "text": reply }))));
            (json!({ "type": part_kind, "text": reply }), json!({ "type": content_kind, "text": reply }))
        };
        out.push(self.event("response.content_part.done", merge(&part_at, json!({ "part": part }))));
        let item = json!({ "id": item_id, "object": "realtime.item", "type": "message", "role": "assistant", "status": "completed", "content": [content] });
        out.push(self.event("response.output_item.done", merge(&at, json!({ "item": item.clone() }))));
        out.push(self.event("conversation.item.done", json!({ "previous_item_id": previous, "item": item.clone() })));
        // Usage: the conversation so far is the prompt; what the last
        // response read of it is cached.
        let text_in = self.context_chars.div_ceil(4).max(1);
        let audio_in = self.context_audio_tokens;
        let input = text_in + audio_in;
        let cached = self.cached.min(input);
        let text_out = words.len() as u64;
        let audio_out = if audio { words.len() as u64 } else { 0 };
        self.cached = input;
        self.context_chars += reply.len() as u64;
        let usage = json!({
            "total_tokens": input + text_out + audio_out,
            "input_tokens": input,
            "output_tokens": text_out + audio_out,
            "input_token_details": {
                "text_tokens": text_in, "audio_tokens": audio_in, "image_tokens": 0, "cached_tokens": cached,
                "cached_tokens_details": { "text_tokens": cached.min(text_in), "audio_tokens": cached.saturating_sub(text_in), "image_tokens": 0 }
            },
            "output_token_details": { "text_tokens": text_out, "audio_tokens": audio_out }
        });
        let mut done = base;
        done["status"] = json!("completed");
        done["output"] = json!([item]);
        done["usage"] = usage;
        out.push(self.event("response.done", json!({ "response": done })));
        out
    }

    fn id(&mut self, kind: &str) -> String {
        self.next_id += 1;
        format!("{kind}_fake{:06}", self.next_id)
    }

    /// A server event of `kind` with `fields`.
    fn event(&mut self, kind: &str, fields: Value) -> String {
        let id = self.id("event");
        let mut event = json!({ "type": kind, "event_id": id });
        if let (Some(event), Value::Object(fields)) = (event.as_object_mut(), fields) {
            event.extend(fields);
        }
        event.to_string()
    }

    fn error(&mut self, kind: &str, code: &str, message: &str, client_id: Option<String>) -> String {
        let error = json!({ "type": kind, "code": code, "message": message, "param": null, "event_id": client_id });
        self.event("error", json!({ "error": error }))
    }
}

/// `base`'s members with `more`'s.
fn merge(base: &Value, more: Value) -> Value {
    let mut out = base.clone();
    if let (Some(out), Value::Object(more)) = (out.as_object_mut(), more) {
        out.extend(more);
    }
    out
}

/// The text of a message item's parts (`input_text`, `text`, `output_text`).
fn item_text(item: &Value) -> String {
    let mut text = String::new();
    for part in item.get("content").and_then(Value::as_array).into_iter().flatten() {
        if let Some(piece) = part.get("text").and_then(Value::as_str) {
            text.push_str(piece);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(events: &[String]) -> Vec<String> {
        events.iter().map(|e| serde_json::from_str::<Value>(e).unwrap()["type"].as_str().unwrap().to_owned()).collect()
    }

    #[test]
    fn a_text_turn_echoes_and_reports_cached_usage_on_the_next() {
        let (mut fake, hello) = FakeRealtime::open("gpt-realtime");
        assert_eq!(types(&hello), ["session.created"]);
        let item = r#"{"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"hello there"}]}}"#;
        assert_eq!(types(&fake.on_client(item)), ["conversation.item.added", "conversation.item.done"]);
        let out = fake.on_client(r#"{"type":"response.create","response":{"output_modalities":["text"]}}"#);
        let kinds = types(&out);
        assert_eq!(kinds.first().map(String::as_str), Some("response.created"));
        assert_eq!(kinds.last().map(String::as_str), Some("response.done"));
        let text: String = out
            .iter()
            .map(|e| serde_json::from_str::<Value>(e).unwrap())
            .filter(|e| e["type"] == "response.output_text.delta")
            .map(|e| e["delta"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(text, "Echo: hello there");
        let done: Value = serde_json::from_str(out.last().unwrap()).unwrap();
        assert_eq!(done["response"]["usage"]["input_token_details"]["cached_tokens"], 0);
        assert_eq!(done["response"]["usage"]["output_tokens"], 3);
        let again = fake.on_client(r#"{"type":"response.create","response":{"output_modalities":["text"]}}"#);
        let done: Value = serde_json::from_str(again.last().unwrap()).unwrap();
        assert_eq!(done["response"]["usage"]["input_token_details"]["cached_tokens"], 3, "{done}");
    }

    #[test]
    fn committed_audio_is_transcribed_and_answered_in_audio() {
        let (mut fake, _) = FakeRealtime::open("gpt-realtime");
        // 50 ms is too little.
        let short = format!(r#"{{"type":"input_audio_buffer.append","audio":"{}"}}"#, "A".repeat(3200));
        assert!(fake.on_client(&short).is_empty());
        assert_eq!(types(&fake.on_client(r#"{"type":"input_audio_buffer.commit"}"#)), ["error"]);
        let long = format!(r#"{{"type":"input_audio_buffer.append","audio":"{}"}}"#, "A".repeat(6400 * 3));
        fake.on_client(&long);
        let committed = fake.on_client(r#"{"type":"input_audio_buffer.commit"}"#);
        // The 50 ms refused stays buffered, as OpenAI keeps it.
        assert!(committed.last().unwrap().contains("audio of 350 ms"), "{committed:?}");
        let out = fake.on_client(r#"{"type":"response.create"}"#);
        let kinds = types(&out);
        assert!(kinds.iter().any(|k| k == "response.output_audio.delta"));
        assert!(kinds.iter().any(|k| k == "response.output_audio_transcript.delta"));
        let done: Value = serde_json::from_str(out.last().unwrap()).unwrap();
        assert_eq!(done["response"]["usage"]["input_token_details"]["audio_tokens"], 4);
        assert!(done["response"]["usage"]["output_token_details"]["audio_tokens"].as_u64().unwrap() > 0);
    }

    #[test]
    fn what_it_does_not_know_is_an_error_event() {
        let (mut fake, _) = FakeRealtime::open("m");
        assert_eq!(types(&fake.on_client("{not json")), ["error"]);
        assert_eq!(types(&fake.on_client(r#"{"type":"nope","event_id":"e1"}"#)), ["error"]);
        let bad = fake.on_client(r#"{"type":"input_audio_buffer.append","audio":"<script>"}"#);
        assert!(bad[0].contains("not base64"));
    }
}
