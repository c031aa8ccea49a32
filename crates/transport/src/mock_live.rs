//! The in-process fake of the Gemini Live API (`BidiGenerateContent`), so
//! a `mock://` lane with `operation: live` serves a session offline (the
//! demo, the tests). A session is a state machine: `setup` is answered
//! with `setupComplete`; a `clientContent` with `turnComplete`, a
//! `realtimeInput` text, the end of an audio stream (`audioStreamEnd` or
//! `activityEnd` after 100 ms or more of 16 kHz PCM16) and a
//! `toolResponse` are each answered with one turn: the reply ("Echo: "
//! and the last thing the user said) as text parts, or as audio parts with
//! their `outputTranscription` when the session asked for audio, then
//! `generationComplete`, then `turnComplete` with `usageMetadata`. Usage
//! counts the conversation's text (four characters a token) and audio (a
//! token per 40 ms in, five a spoken word out) by modality, and caches
//! the prompt the previous turn read. Client keys are read in either
//! spelling (`clientContent` or `client_content`), as the API reads them;
//! what it sends is camelCase, as the API sends.

use serde_json::{json, Value};

/// Bytes of 16 kHz 16-bit mono input audio in one millisecond.
const INPUT_BYTES_PER_MS: u64 = 32;

/// Milliseconds of input audio one token stands for.
const MS_PER_INPUT_TOKEN: u64 = 40;

/// Audio tokens one spoken reply word costs (200 ms of output).
const TOKENS_PER_SPOKEN_WORD: u64 = 5;

/// The silent audio one reply word is spoken as: 200 ms of 24 kHz PCM16
/// (9,600 bytes), base64.
const WORD_AUDIO_B64_LEN: usize = 9_600 / 3 * 4;

/// One fake Live session.
#[derive(Debug, Default)]
pub struct FakeLive {
    model: Option<String>,
    /// The session answers in audio (`responseModalities: ["AUDIO"]`, the
    /// API's default).
    audio: bool,
    /// Its audio replies come with their transcript.
    transcribe_out: bool,
    /// The user's audio is transcribed back.
    transcribe_in: bool,
    /// Text and audio tokens the conversation holds.
    context_text: u64,
    context_audio: u64,
    /// The prompt the previous turn read, by modality (cached for the next).
    cached_text: u64,
    cached_audio: u64,
    last_user: String,
    /// Input audio bytes since the last turn.
    buffered: u64,
}

impl FakeLive {
    /// A session, and what it opens with (nothing: the client speaks first).
    pub fn open() -> (FakeLive, Vec<String>) {
        (FakeLive { audio: true, ..FakeLive::default() }, Vec::new())
    }

    /// The model `setup` named, without its `models/`.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// The server messages answering one client message.
    pub fn on_client(&mut self, text: &str) -> Vec<String> {
        let Ok(Value::Object(message)) = serde_json::from_str::<Value>(text) else { return Vec::new() };
        let field = |camel: &str, snake: &str| message.get(camel).or_else(|| message.get(snake)).cloned();
        if let Some(setup) = field("setup", "setup") {
            return self.setup(&setup);
        }
        if let Some(content) = field("clientContent", "client_content") {
            for turn in get(&content, "turns", "turns").and_then(Value::as_array).into_iter().flatten() {
                let said = parts_text(turn);
                self.context_text += (said.len() as u64).div_ceil(4);
                if get(turn, "role", "role").and_then(Value::as_str) != Some("model") && !said.is_empty() {
                    self.last_user = said;
                }
            }
            let complete = get(&content, "turnComplete", "turn_complete").and_then(Value::as_bool).unwrap_or(false);
            return if complete { self.respond() } else { Vec::new() };
        }
        if let Some(input) = field("realtimeInput", "realtime_input") {
            return self.realtime(&input);
        }
        if let Some(response) = field("toolResponse", "tool_response") {
            let answers = get(&response, "functionResponses", "function_responses")
                .and_then(Value::as_array)
                .map(|all| all.iter().filter_map(|r| r.get("response")).map(Value::to_string).collect::<Vec<_>>())
                .unwrap_or_default();
            let said = format!("tool said {}", answers.join(" "));
            self.context_text += (said.len() as u64).div_ceil(4);
            self.last_user = said;
            return self.respond();
        }
        Vec::new()
    }

    fn setup(&mut self, setup: &Value) -> Vec<String> {
        let model = get(setup, "model", "model").and_then(Value::as_str).unwrap_or_default();
        self.model = Some(model.strip_prefix("models/").unwrap_or(model).to_owned());
        let config = get(setup, "generationConfig", "generation_config");
        let modalities = config.and_then(|c| get(c, "responseModalities", "response_modalities"));
        if let Some(modalities) = modalities.and_then(Value::as_array) {
            self.audio = modalities.iter().any(|m| m.as_str().is_some_and(|m| m.eq_ignore_ascii_case("audio")));
        }
        self.transcribe_out = get(setup, "outputAudioTranscription", "output_audio_transcription").is_some();
        self.transcribe_in = get(setup, "inputAudioTranscription", "input_audio_transcription").is_some();
        if let Some(instruction) = get(setup, "systemInstruction", "system_instruction") {
            self.context_text += (parts_text(instruction).len() as u64).div_ceil(4);
        }
        vec![json!({ "setupComplete": {} }).to_string()]
    }

    fn realtime(&mut self, input: &Value) -> Vec<String> {
        let mut chunks: Vec<&Value> = Vec::new();
        chunks.extend(get(input, "audio", "audio"));
        chunks.extend(get(input, "mediaChunks", "media_chunks").and_then(Value::as_array).into_iter().flatten());
        for chunk in chunks {
            let data = get(chunk, "data", "data").and_then(Value::as_str).unwrap_or_default();
            self.buffered += data.len() as u64 / 4 * 3;
        }
        if let Some(said) = get(input, "text", "text").and_then(Value::as_str) {
            self.context_text += (said.len() as u64).div_ceil(4);
            self.last_user = said.to_owned();
            return self.respond();
        }
        let ended = get(input, "audioStreamEnd", "audio_stream_end").and_then(Value::as_bool) == Some(true)
            || get(input, "activityEnd", "activity_end").is_some();
        let ms = self.buffered / INPUT_BYTES_PER_MS;
        // Under 100 ms is no speech: nothing to answer.
        if !ended || ms < 100 {
            return Vec::new();
        }
        self.buffered = 0;
        self.context_audio += ms.div_ceil(MS_PER_INPUT_TOKEN);
        self.last_user = format!("audio of {ms} ms");
        let mut out = Vec::new();
        if self.transcribe_in {
            out.push(json!({ "serverContent": { "inputTranscription": { "text": self.last_user } } }).to_string());
        }
        out.extend(self.respond());
        out
    }

    /// One turn: the reply, then its usage.
    fn respond(&mut self) -> Vec<String> {
        let reply = format!("Echo: {}", self.last_user);
        let words: Vec<&str> = reply.split_inclusive(' ').collect();
        let mut out = Vec::new();
        let output = if self.audio {
            let silence = "A".repeat(WORD_AUDIO_B64_LEN);
            for word in &words {
                let part = json!({ "inlineData": { "mimeType": "audio/pcm;rate=24000", "data": silence } });
                out.push(json!({ "serverContent": { "modelTurn": { "role": "model", "parts": [part] } } }).to_string());
                if self.transcribe_out {
                    out.push(json!({ "serverContent": { "outputTranscription": { "text": word } } }).to_string());
                }
            }
            words.len() as u64 * TOKENS_PER_SPOKEN_WORD
        } else {
            for word in &words {
                let part = json!({ "text": word });
                out.push(json!({ "serverContent": { "modelTurn": { "role": "model", "parts": [part] } } }).to_string());
            }
            words.len() as u64
        };
        out.push(json!({ "serverContent": { "generationComplete": true } }).to_string());
        let (text, audio) = (self.context_text, self.context_audio);
        let (cached_text, cached_audio) = (self.cached_text.min(text), self.cached_audio.min(audio));
        let modality = if self.audio { "AUDIO" } else { "TEXT" };
        let usage = json!({
            "promptTokenCount": text + audio,
            "cachedContentTokenCount": cached_text + cached_audio,
            "responseTokenCount": output,
            "totalTokenCount": text + audio + output,
            "promptTokensDetails": by_modality(text, audio),
            "cacheTokensDetails": by_modality(cached_text, cached_audio),
            "responseTokensDetails": [{ "modality": modality, "tokenCount": output }],
        });
        out.push(json!({ "serverContent": { "turnComplete": true }, "usageMetadata": usage }).to_string());
        (self.cached_text, self.cached_audio) = (text, audio);
        if self.audio {
            self.context_audio += output;
        } else {
            self.context_text += output;
        }
        out
    }
}

impl crate::mock_session::FakeSession for FakeLive {
    fn on_client(&mut self, text: &str) -> Vec<String> {
        FakeLive::on_client(self, text)
    }
}

/// `value[camel]`, else `value[snake]`.
fn get<'v>(value: &'v Value, camel: &str, snake: &str) -> Option<&'v Value> {
    value.get(camel).or_else(|| value.get(snake))
}

/// The text of a content's parts, joined.
fn parts_text(content: &Value) -> String {
    let parts = get(content, "parts", "parts").and_then(Value::as_array);
    parts.into_iter().flatten().filter_map(|p| p.get("text").and_then(Value::as_str)).collect()
}

/// Token counts by modality, the empty ones left out.
fn by_modality(text: u64, audio: u64) -> Vec<Value> {
    [("TEXT", text), ("AUDIO", audio)]
        .into_iter()
        .filter(|(_, n)| *n != 0)
        .map(|(modality, n)| json!({ "modality": modality, "tokenCount": n }))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use super::*;

    fn said(fake: &mut FakeLive, message: Value) -> Vec<Value> {
        fake.on_client(&message.to_string()).iter().map(|m| serde_json::from_str(m).unwrap()).collect()
    }

    #[test]
    fn a_text_turn_and_an_audio_turn_are_answered_with_usage_by_modality() {
        let (mut fake, hello) = FakeLive::open();
        assert!(hello.is_empty());
        let setup =
            json!({"setup": {"model": "models/gemini-live", "generationConfig": {"responseModalities": ["TEXT"]}}});
        assert_eq!(said(&mut fake, setup), vec![json!({"setupComplete": {}})]);
        assert_eq!(fake.model(), Some("gemini-live"));
        let turn = json!({"client_content": {"turns": [{"role": "user", "parts": [{"text": "hello there"}]}], "turn_complete": true}});
        let out = said(&mut fake, turn);
        let text: String =
            out.iter().filter_map(|m| m["serverContent"]["modelTurn"]["parts"][0]["text"].as_str()).collect();
        assert_eq!(text, "Echo: hello there");
        let last = out.last().unwrap();
        assert_eq!(last["serverContent"]["turnComplete"], true);
        assert_eq!(
            (last["usageMetadata"]["promptTokenCount"].as_u64(), last["usageMetadata"]["responseTokenCount"].as_u64()),
            (Some(3), Some(3))
        );
        // Not complete: nothing yet.
        assert!(said(&mut fake, json!({"clientContent": {"turns": [{"role": "user", "parts": [{"text": "x"}]}]}}))
            .is_empty());
        // A second turn reads the first's prompt from cache.
        let out = said(&mut fake, json!({"realtimeInput": {"text": "again"}}));
        let usage = &out.last().unwrap()["usageMetadata"];
        assert_eq!((usage["promptTokenCount"].as_u64(), usage["cachedContentTokenCount"].as_u64()), (Some(9), Some(3)));
    }

    #[test]
    fn an_audio_stream_is_answered_in_audio_with_its_transcripts() {
        let (mut fake, _) = FakeLive::open();
        let setup = json!({"setup": {"model": "m", "outputAudioTranscription": {}, "inputAudioTranscription": {}}});
        said(&mut fake, setup);
        // 320 ms of 16 kHz PCM16 in, then the end of the stream.
        let chunk = "A".repeat(13_656);
        assert!(said(
            &mut fake,
            json!({"realtimeInput": {"audio": {"data": chunk, "mimeType": "audio/pcm;rate=16000"}}})
        )
        .is_empty());
        let out = said(&mut fake, json!({"realtimeInput": {"audioStreamEnd": true}}));
        assert_eq!(out[0]["serverContent"]["inputTranscription"]["text"], "audio of 320 ms");
        let audio =
            out.iter().filter(|m| m["serverContent"]["modelTurn"]["parts"][0]["inlineData"].is_object()).count();
        let transcript: String =
            out.iter().filter_map(|m| m["serverContent"]["outputTranscription"]["text"].as_str()).collect();
        assert_eq!((audio, transcript.as_str()), (5, "Echo: audio of 320 ms"));
        let usage = &out.last().unwrap()["usageMetadata"];
        assert_eq!(usage["promptTokensDetails"], json!([{"modality": "AUDIO", "tokenCount": 8}]));
        assert_eq!(usage["responseTokensDetails"], json!([{"modality": "AUDIO", "tokenCount": 25}]));
        // Junk is not answered.
        assert!(fake.on_client("[1]").is_empty());
        assert!(fake.on_client("{nope").is_empty());
    }
}
