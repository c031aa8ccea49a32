//! Gemini Live's messages as the relay reads them. A client message is
//! read whole and must name exactly one of `setup`, `clientContent`,
//! `realtimeInput` and `toolResponse` (in either spelling, camelCase or
//! snake_case, as the API reads them): a field given twice, or two kinds
//! in one message, is refused, since the upstream might act on one the
//! gateway did not bill. A server message gives what the relay acts on:
//! where a model turn starts, stops or is cut, the text and transcript
//! it carries, and its `usageMetadata`, read by modality and bounded by
//! its totals.

use serde::de::IgnoredAny;
use serde::Deserialize;
use switchyard_ir::{ErrorInfo, ErrorKind, Usage};

/// What a client message asks of the relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Client {
    /// `setup`: the model named (without `models/`), and the output bound
    /// (`generationConfig.maxOutputTokens`).
    Setup { model: String, max_output_tokens: Option<u64> },
    /// `clientContent`: turns the model reads; a generation when it
    /// completes the turn.
    Content { turn_complete: bool },
    /// `realtimeInput`: the base64 length of its audio and video, and
    /// whether it carries anything the model answers (audio, video, text).
    Realtime { media_b64: usize, speaks: bool },
    /// `toolResponse`: the model goes on (a generation).
    ToolResponse,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientHead {
    #[serde(default)]
    setup: Option<SetupHead>,
    #[serde(default, rename = "clientContent", alias = "client_content")]
    client_content: Option<ContentHead>,
    #[serde(default, rename = "realtimeInput", alias = "realtime_input")]
    realtime_input: Option<RealtimeHead>,
    #[serde(default, rename = "toolResponse", alias = "tool_response")]
    tool_response: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct SetupHead {
    model: String,
    #[serde(default, rename = "generationConfig", alias = "generation_config")]
    generation_config: Option<GenerationHead>,
}

#[derive(Deserialize)]
struct GenerationHead {
    #[serde(default, rename = "maxOutputTokens", alias = "max_output_tokens")]
    max_output_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct ContentHead {
    #[serde(default, rename = "turnComplete", alias = "turn_complete")]
    turn_complete: Option<bool>,
}

#[derive(Deserialize)]
struct RealtimeHead {
    #[serde(default)]
    audio: Option<Blob>,
    #[serde(default)]
    video: Option<Blob>,
    #[serde(default, rename = "mediaChunks", alias = "media_chunks")]
    media_chunks: Option<Vec<Blob>>,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct Blob {
    #[serde(default)]
    data: Option<String>,
}

impl Blob {
    fn len(blob: Option<&Blob>) -> usize {
        blob.and_then(|b| b.data.as_ref()).map_or(0, String::len)
    }
}

/// Reads a client message.
pub(crate) fn read_client(text: &str) -> Result<Client, ErrorInfo> {
    let head: ClientHead = serde_json::from_str(text).map_err(|err| {
        let message = match err.classify() {
            serde_json::error::Category::Data => format!("the message cannot be read: {err}"),
            _ => format!("the message is not JSON: {err}"),
        };
        invalid(message)
    })?;
    let named = [
        head.setup.is_some(),
        head.client_content.is_some(),
        head.realtime_input.is_some(),
        head.tool_response.is_some(),
    ];
    if named.iter().filter(|n| **n).count() != 1 {
        return Err(invalid(
            "a message names exactly one of setup, clientContent, realtimeInput and toolResponse".into(),
        ));
    }
    if let Some(setup) = head.setup {
        let model = setup.model.strip_prefix("models/").unwrap_or(&setup.model).to_owned();
        let max_output_tokens = setup.generation_config.and_then(|g| g.max_output_tokens);
        return Ok(Client::Setup { model, max_output_tokens });
    }
    if let Some(content) = head.client_content {
        return Ok(Client::Content { turn_complete: content.turn_complete.unwrap_or(false) });
    }
    if let Some(input) = head.realtime_input {
        let chunks = input.media_chunks.unwrap_or_default();
        let media_b64 = chunks
            .iter()
            .fold(Blob::len(input.audio.as_ref()).saturating_add(Blob::len(input.video.as_ref())), |sum, chunk| {
                sum.saturating_add(Blob::len(Some(chunk)))
            });
        let speaks = media_b64 > 0 || input.text.is_some_and(|t| !t.is_empty());
        return Ok(Client::Realtime { media_b64, speaks });
    }
    Ok(Client::ToolResponse)
}

/// A `setup` with its model replaced by `models/{model}` (the lane's
/// wire model: the caller named the gateway's pool).
pub(crate) fn with_model(text: &str, model: &str) -> Option<String> {
    let mut value: serde_json::Value = serde_json::from_str(text).ok()?;
    let setup = value.get_mut("setup")?.as_object_mut()?;
    setup.insert("model".into(), serde_json::Value::String(format!("models/{model}")));
    Some(value.to_string())
}

/// What the relay reads of a server message.
#[derive(Debug, Default)]
pub(crate) struct Server {
    /// The model's turn starts or goes on in it (its content, a tool
    /// call). A transcript alone never starts one: it may trail its turn.
    pub(crate) content: bool,
    /// A tool call: the turn waits for the caller's answer.
    pub(crate) tool_call: bool,
    /// The caller cut the turn short.
    pub(crate) interrupted: bool,
    /// The turn is over.
    pub(crate) turn_complete: bool,
    /// Its `usageMetadata`, when it reported a readable one.
    pub(crate) usage: Option<Usage>,
    /// Characters of text and transcript it carries.
    pub(crate) delivered: u64,
}

#[derive(Deserialize)]
struct ServerHead {
    #[serde(default, rename = "serverContent")]
    server_content: Option<ServerContent>,
    #[serde(default, rename = "toolCall")]
    tool_call: Option<IgnoredAny>,
    #[serde(default, rename = "usageMetadata")]
    usage_metadata: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ServerContent {
    #[serde(default, rename = "modelTurn")]
    model_turn: Option<ModelTurn>,
    #[serde(default, rename = "outputTranscription")]
    output_transcription: Option<Transcription>,
    #[serde(default, rename = "turnComplete")]
    turn_complete: Option<bool>,
    #[serde(default)]
    interrupted: Option<bool>,
}

#[derive(Deserialize)]
struct ModelTurn {
    #[serde(default)]
    parts: Vec<Part>,
}

#[derive(Deserialize)]
struct Part {
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct Transcription {
    #[serde(default)]
    text: Option<String>,
}

/// Reads a server message; `None` when it is not one the relay can read
/// whole (not JSON, a field given twice): such a message is not passed on.
pub(crate) fn read_server(text: &str) -> Option<Server> {
    let head: ServerHead = serde_json::from_str(text).ok()?;
    let mut server = Server { tool_call: head.tool_call.is_some(), ..Server::default() };
    if let Some(content) = head.server_content {
        let texts = content.model_turn.iter().flat_map(|turn| turn.parts.iter()).filter_map(|p| p.text.as_deref());
        let transcript = content.output_transcription.as_ref().and_then(|t| t.text.as_deref());
        server.delivered = texts.chain(transcript).map(|t| t.len() as u64).sum();
        server.content = content.model_turn.is_some();
        server.turn_complete = content.turn_complete == Some(true);
        server.interrupted = content.interrupted == Some(true);
    }
    server.content |= server.tool_call;
    server.usage = head.usage_metadata.as_ref().and_then(read_usage);
    Some(server)
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct LiveUsage {
    prompt_token_count: u64,
    cached_content_token_count: u64,
    response_token_count: u64,
    tool_use_prompt_token_count: u64,
    thoughts_token_count: u64,
    prompt_tokens_details: Vec<ModalityCount>,
    cache_tokens_details: Vec<ModalityCount>,
    response_tokens_details: Vec<ModalityCount>,
    tool_use_prompt_tokens_details: Vec<ModalityCount>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ModalityCount {
    modality: String,
    token_count: u64,
}

/// The tokens of `modality` in `counts` (a modality listed twice counts twice).
fn of(counts: &[ModalityCount], modality: &str) -> u64 {
    counts.iter().filter(|c| c.modality == modality).fold(0, |sum, c| sum.saturating_add(c.token_count))
}

/// `usageMetadata` as the ledger's: the prompt (tool-use prompts included)
/// split into cached, audio and image tokens, cached ones by modality (a
/// cached audio token is priced as a cache read, not audio as well); the
/// output (thoughts included) into reasoning and audio. Parts are cut so
/// that together they never exceed their whole, so a miscounting upstream
/// is never billed twice for a token; a usage that is not counts
/// (negative, fractional, a string) is no usage.
pub(crate) fn read_usage(usage: &serde_json::Value) -> Option<Usage> {
    // Only an object (serde would read a struct from an array too).
    if !usage.is_object() {
        return None;
    }
    let read = LiveUsage::deserialize(usage).ok()?;
    let input = read.prompt_token_count.saturating_add(read.tool_use_prompt_token_count);
    let output = read.response_token_count.saturating_add(read.thoughts_token_count);
    let mut prompt_left = input;
    let mut take = |part: u64| {
        let taken = part.min(prompt_left);
        prompt_left -= taken;
        taken
    };
    let cached = take(read.cached_content_token_count);
    let modality = |name: &str| {
        let said = of(&read.prompt_tokens_details, name).saturating_add(of(&read.tool_use_prompt_tokens_details, name));
        said.saturating_sub(of(&read.cache_tokens_details, name).min(cached))
    };
    let audio_input = take(modality("AUDIO"));
    let image_input = take(modality("IMAGE"));
    let reasoning = read.thoughts_token_count.min(output);
    let mut output_left = output - reasoning;
    let mut take_output = |part: u64| {
        let taken = part.min(output_left);
        output_left -= taken;
        taken
    };
    let audio_output = take_output(of(&read.response_tokens_details, "AUDIO"));
    let image_output = take_output(of(&read.response_tokens_details, "IMAGE"));
    Some(Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: cached,
        reasoning_tokens: reasoning,
        audio_input_tokens: audio_input,
        image_input_tokens: image_input,
        audio_output_tokens: audio_output,
        image_output_tokens: image_output,
        tool_prompt_tokens: read.tool_use_prompt_token_count.min(input),
        ..Usage::default()
    })
}

fn invalid(message: String) -> ErrorInfo {
    ErrorInfo::new(ErrorKind::InvalidRequest, message)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use super::*;
    use serde_json::json;

    #[test]
    fn client_messages_are_read_whole_in_either_spelling() {
        let setup = r#"{"setup":{"model":"models/live","generationConfig":{"maxOutputTokens":64}}}"#;
        assert_eq!(read_client(setup).unwrap(), Client::Setup { model: "live".into(), max_output_tokens: Some(64) });
        let turn = r#"{"client_content":{"turns":[{"role":"user","parts":[{"text":"hi"}]}],"turnComplete":true}}"#;
        assert_eq!(read_client(turn).unwrap(), Client::Content { turn_complete: true });
        assert_eq!(read_client(r#"{"clientContent":{"turns":[]}}"#).unwrap(), Client::Content { turn_complete: false });
        let audio = r#"{"realtime_input":{"audio":{"data":"AAAA","mimeType":"audio/pcm"},"mediaChunks":[{"data":"BBBBBBBB"}]}}"#;
        assert_eq!(read_client(audio).unwrap(), Client::Realtime { media_b64: 12, speaks: true });
        let end = r#"{"realtimeInput":{"audioStreamEnd":true}}"#;
        assert_eq!(read_client(end).unwrap(), Client::Realtime { media_b64: 0, speaks: false });
        assert_eq!(
            read_client(r#"{"realtimeInput":{"text":"yo"}}"#).unwrap(),
            Client::Realtime { media_b64: 0, speaks: true }
        );
        assert_eq!(read_client(r#"{"tool_response":{"functionResponses":[]}}"#).unwrap(), Client::ToolResponse);
        let named = with_model(setup, "gemini-wire").unwrap();
        assert_eq!(
            read_client(&named).unwrap(),
            Client::Setup { model: "gemini-wire".into(), max_output_tokens: Some(64) }
        );
        assert!(named.contains("models/gemini-wire"));
    }

    #[test]
    fn a_generation_never_passes_as_something_else() {
        for hostile in [
            // The same field twice, in one spelling or both: a parser keeping
            // the other one would see a finished turn the gateway did not bill.
            r#"{"clientContent":{"turnComplete":false,"turnComplete":true}}"#,
            r#"{"clientContent":{"turnComplete":false,"turn_complete":true}}"#,
            r#"{"clientContent":{"turns":[]},"client_content":{"turnComplete":true}}"#,
            // Two kinds in one message.
            r#"{"realtimeInput":{"audioStreamEnd":true},"clientContent":{"turnComplete":true}}"#,
            r#"{"setup":{"model":"a"},"toolResponse":{}}"#,
            // None, an unknown one, not an object, not a flag.
            r#"{}"#,
            r#"{"clientContentX":{"turnComplete":true}}"#,
            r#"[{"clientContent":{"turnComplete":true}}]"#,
            r#"{"clientContent":{"turnComplete":"true"}}"#,
            r#"{"setup":{}}"#,
            "{not json",
        ] {
            assert!(read_client(hostile).is_err(), "{hostile}");
        }
        // Escaped, a name is the same name.
        assert_eq!(
            read_client(r#"{"clientContent":{"turn\u0043omplete":true}}"#).unwrap(),
            Client::Content { turn_complete: true }
        );
    }

    #[test]
    fn usage_is_read_by_modality_and_bounded_by_its_totals() {
        let usage = json!({"promptTokenCount": 100, "cachedContentTokenCount": 40, "responseTokenCount": 30,
            "thoughtsTokenCount": 10, "toolUsePromptTokenCount": 20,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 50}, {"modality": "AUDIO", "tokenCount": 50}],
            "cacheTokensDetails": [{"modality": "AUDIO", "tokenCount": 30}, {"modality": "TEXT", "tokenCount": 10}],
            "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": 25}, {"modality": "TEXT", "tokenCount": 5}]});
        let read = read_usage(&usage).unwrap();
        assert_eq!((read.input_tokens, read.output_tokens), (120, 40));
        // 30 of the 50 audio tokens were cached: priced as cache reads once.
        assert_eq!((read.cache_read_tokens, read.audio_input_tokens), (40, 20));
        assert_eq!((read.reasoning_tokens, read.audio_output_tokens, read.tool_prompt_tokens), (10, 25, 20));
        // An upstream that lies: parts past the whole are cut to what is left.
        let lying = json!({"promptTokenCount": 5, "cachedContentTokenCount": 900, "responseTokenCount": 2,
            "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": 900}, {"modality": "AUDIO", "tokenCount": 900}],
            "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": 99}, {"modality": "IMAGE", "tokenCount": 99}]});
        let read = read_usage(&lying).unwrap();
        assert_eq!((read.input_tokens, read.cache_read_tokens, read.audio_input_tokens), (5, 5, 0));
        assert_eq!((read.output_tokens, read.audio_output_tokens, read.image_output_tokens), (2, 2, 0));
        let lying = json!({"promptTokenCount": 5, "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": 9}, {"modality": "IMAGE", "tokenCount": 9}]});
        let read = read_usage(&lying).unwrap();
        assert_eq!((read.audio_input_tokens, read.image_input_tokens), (5, 0));
        // Not counts: no usage (the relay then estimates and says so).
        for bad in [
            json!({"promptTokenCount": -5}),
            json!({"promptTokenCount": "5"}),
            json!({"promptTokenCount": 1.5}),
            json!([]),
        ] {
            assert!(read_usage(&bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn server_messages_say_where_a_turn_goes() {
        let text =
            read_server(r#"{"serverContent":{"modelTurn":{"parts":[{"text":"hi "},{"inlineData":{"data":"AA"}}]}}}"#)
                .unwrap();
        assert!(text.content && !text.turn_complete);
        assert_eq!(text.delivered, 3);
        let said = read_server(r#"{"serverContent":{"outputTranscription":{"text":"four"}}}"#).unwrap();
        assert_eq!((said.content, said.delivered), (false, 4));
        let done = read_server(
            r#"{"serverContent":{"turnComplete":true},"usageMetadata":{"promptTokenCount":3,"responseTokenCount":2}}"#,
        )
        .unwrap();
        assert!(done.turn_complete && !done.content);
        assert_eq!(done.usage.unwrap().input_tokens, 3);
        assert!(read_server(r#"{"toolCall":{"functionCalls":[]}}"#).unwrap().tool_call);
        assert!(read_server(r#"{"serverContent":{"interrupted":true}}"#).unwrap().interrupted);
        // Doubled, it cannot be read whole: never passed on.
        assert!(read_server(r#"{"serverContent":{"turnComplete":true,"turnComplete":false}}"#).is_none());
        assert!(read_server("not json").is_none());
        // Unknown messages pass (the API adds kinds).
        assert!(read_server(r#"{"goAway":{"timeLeft":"10s"}}"#).is_some());
    }
}
