//! The Realtime API's events as the relay reads them: a client event's
//! type and the little the gateway acts on (a `response.create`'s output
//! bound, a `session.update`'s model), parsed whole so the gateway and the
//! upstream read the same event (a `type` given twice is refused: two
//! parsers may keep different ones, and a generation must never pass as
//! something unbilled); a server event's type, the response it belongs
//! to, and `response.done`'s usage; and the `error` event the gateway
//! answers with.

use std::borrow::Cow;

use serde::Deserialize;
use switchyard_ir::{ErrorInfo, ErrorKind, Usage};

/// What a client event asks of the relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Client {
    /// `response.create`: a generation, admitted first. Its output bound
    /// (`None`: `inf` or unsaid).
    Create { max_output_tokens: Option<u64> },
    /// `session.update`, and the model it names (the socket's lane is
    /// fixed at the handshake; another model is refused).
    SessionUpdate { model: Option<String>, max_output_tokens: Option<u64> },
    /// `conversation.item.create`: an item the model will read.
    Item,
    /// `input_audio_buffer.append`: its base64 audio's length.
    Audio { base64_len: usize },
    /// Another event the API takes, passed on as it came.
    Other,
}

/// The client event types the relay passes on (the API's own list).
const PASSED: [&str; 6] = [
    "input_audio_buffer.commit",
    "input_audio_buffer.clear",
    "conversation.item.retrieve",
    "conversation.item.truncate",
    "conversation.item.delete",
    "output_audio_buffer.clear",
];

#[derive(Deserialize)]
struct Head<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    event_id: Option<Cow<'a, str>>,
    #[serde(default)]
    response: Option<Bound>,
    #[serde(default)]
    session: Option<SessionHead>,
    #[serde(default, borrow)]
    audio: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Bound {
    #[serde(default)]
    max_output_tokens: Option<MaxTokens>,
}

#[derive(Deserialize)]
struct SessionHead {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    max_output_tokens: Option<MaxTokens>,
}

/// A number, or `"inf"`.
#[derive(Deserialize)]
#[serde(untagged)]
enum MaxTokens {
    Count(u64),
    Word(String),
}

impl MaxTokens {
    fn read(this: Option<MaxTokens>) -> Result<Option<u64>, ErrorInfo> {
        match this {
            None => Ok(None),
            Some(MaxTokens::Count(n)) => Ok(Some(n)),
            Some(MaxTokens::Word(word)) if word == "inf" => Ok(None),
            Some(MaxTokens::Word(_)) => {
                let info = invalid("`max_output_tokens` is a number or \"inf\"");
                Err(with_param(info, "max_output_tokens"))
            }
        }
    }
}

/// A client event, and the `event_id` it gave (for the error that answers it).
pub(crate) fn read_client(text: &str) -> Result<(Client, Option<String>), (ErrorInfo, Option<String>)> {
    let head: Head<'_> = serde_json::from_str(text).map_err(|err| {
        let message = match err.classify() {
            serde_json::error::Category::Data => format!("the event cannot be read: {err}"),
            _ => format!("the event is not JSON: {err}"),
        };
        (invalid(&message), None)
    })?;
    let event_id = head.event_id.map(Cow::into_owned);
    let fail = |info| (info, event_id.clone());
    let client = match &*head.kind {
        "response.create" => Client::Create {
            max_output_tokens: MaxTokens::read(head.response.and_then(|r| r.max_output_tokens)).map_err(fail)?,
        },
        "session.update" => {
            let session = head.session.ok_or_else(|| fail(with_param(invalid("`session` is required"), "session")))?;
            Client::SessionUpdate {
                model: session.model,
                max_output_tokens: MaxTokens::read(session.max_output_tokens).map_err(fail)?,
            }
        }
        "conversation.item.create" => Client::Item,
        "input_audio_buffer.append" => Client::Audio { base64_len: head.audio.map_or(0, |a| a.len()) },
        "response.cancel" => Client::Other,
        kind if PASSED.contains(&kind) => Client::Other,
        kind => {
            let shown: String = kind.chars().take(64).collect();
            let mut info = invalid(&format!("Invalid value: '{shown}': not a Realtime client event"));
            info.param = Some("type".into());
            info.code = Some("invalid_value".into());
            return Err(fail(info));
        }
    };
    Ok((client, event_id))
}

/// What the relay reads of a server event.
#[derive(Debug, Default)]
pub(crate) struct Server {
    /// Its type.
    pub(crate) kind: String,
    /// The response it belongs to (`response.id` or `response_id`).
    pub(crate) response_id: Option<String>,
    /// `response.done`'s usage, when it reported a readable one.
    pub(crate) usage: Option<Usage>,
    /// `response.done`'s status.
    pub(crate) status: Option<String>,
    /// An `error` event's `error.event_id`: the client event it answers.
    pub(crate) error_for: Option<String>,
    /// A text or transcript delta's text, or a done event's whole text.
    pub(crate) text: Option<String>,
}

#[derive(Deserialize)]
struct ServerHead<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    response: Option<ServerResponse>,
    #[serde(default)]
    response_id: Option<String>,
    #[serde(default)]
    error: Option<ServerError>,
    #[serde(default)]
    delta: Option<serde_json::Value>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    transcript: Option<String>,
}

#[derive(Deserialize)]
struct ServerResponse {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    usage: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ServerError {
    #[serde(default)]
    event_id: Option<String>,
}

/// Reads a server event; `None` when it is not one (not JSON, no type).
pub(crate) fn read_server(text: &str) -> Option<Server> {
    let head: ServerHead<'_> = serde_json::from_str(text).ok()?;
    let kind = head.kind.into_owned();
    let (id, status, usage) = match head.response {
        Some(response) => (response.id, response.status, response.usage),
        None => (None, None, None),
    };
    let usage = match kind.as_str() {
        "response.done" => usage.and_then(|usage| read_usage(&usage)),
        _ => None,
    };
    let text = match kind.as_str() {
        "response.output_text.delta" | "response.output_audio_transcript.delta" => {
            head.delta.and_then(|d| d.as_str().map(str::to_owned))
        }
        "response.output_text.done" => head.text,
        "response.output_audio_transcript.done" => head.transcript,
        _ => None,
    };
    Some(Server {
        kind,
        response_id: id.or(head.response_id),
        usage,
        status,
        error_for: head.error.and_then(|e| e.event_id),
        text,
    })
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RealtimeUsage {
    input_tokens: u64,
    output_tokens: u64,
    input_token_details: InputDetails,
    output_token_details: OutputDetails,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct InputDetails {
    audio_tokens: u64,
    image_tokens: u64,
    cached_tokens: u64,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct OutputDetails {
    audio_tokens: u64,
}

/// `response.done`'s usage as the ledger's: text, audio, image and cached
/// input; text and audio output. A part larger than its whole (an
/// upstream that miscounts) is cut to the whole, so nothing is billed
/// twice; a usage that is not counts (negative, fractional, a string) is
/// no usage.
pub(crate) fn read_usage(usage: &serde_json::Value) -> Option<Usage> {
    let read = RealtimeUsage::deserialize(usage).ok()?;
    let input = read.input_tokens;
    let output = read.output_tokens;
    let usage = Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: read.input_token_details.cached_tokens.min(input),
        audio_input_tokens: read.input_token_details.audio_tokens.min(input),
        image_input_tokens: read.input_token_details.image_tokens.min(input),
        audio_output_tokens: read.output_token_details.audio_tokens.min(output),
        ..Usage::default()
    };
    Some(usage)
}

/// The Realtime `error` event for `info`, answering the client event
/// `event_id` when it gave one.
pub(crate) fn error_event(info: &ErrorInfo, event_id: Option<&str>) -> String {
    let kind = crate::responses::event::error_type(info.code.as_deref(), info.kind);
    serde_json::json!({
        "type": "error",
        "event_id": format!("event_sy{}", crate::door::random_hex(20)),
        "error": {
            "type": kind,
            "code": info.code,
            "message": info.message,
            "param": info.param,
            "event_id": event_id,
        }
    })
    .to_string()
}

/// `text` (a `response.create`) with an `event_id`, so the upstream's
/// error about it can be matched to its admission; as it came when it
/// has one.
pub(crate) fn with_event_id(text: &str, event_id: &str) -> Option<String> {
    let mut value: serde_json::Value = serde_json::from_str(text).ok()?;
    value.as_object_mut()?.insert("event_id".into(), serde_json::Value::String(event_id.into()));
    Some(value.to_string())
}

/// A `session.update` with its `session.model` replaced by `model` (the
/// lane's wire model: the caller named the gateway's pool).
pub(crate) fn with_model(text: &str, model: &str) -> Option<String> {
    let mut value: serde_json::Value = serde_json::from_str(text).ok()?;
    let session = value.get_mut("session")?.as_object_mut()?;
    session.insert("model".into(), serde_json::Value::String(model.into()));
    Some(value.to_string())
}

fn invalid(message: &str) -> ErrorInfo {
    ErrorInfo::new(ErrorKind::InvalidRequest, message.to_owned())
}

fn with_param(mut info: ErrorInfo, param: &str) -> ErrorInfo {
    info.param = Some(param.into());
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_events_are_read_whole() {
        let (event, id) =
            read_client(r#"{"type":"response.create","event_id":"e1","response":{"max_output_tokens":64}}"#).unwrap();
        assert_eq!(event, Client::Create { max_output_tokens: Some(64) });
        assert_eq!(id.as_deref(), Some("e1"));
        let (event, _) = read_client(r#"{"type":"response.create","response":{"max_output_tokens":"inf"}}"#).unwrap();
        assert_eq!(event, Client::Create { max_output_tokens: None });
        let (event, _) = read_client(r#"{"type":"session.update","session":{"type":"realtime","model":"x"}}"#).unwrap();
        assert_eq!(event, Client::SessionUpdate { model: Some("x".into()), max_output_tokens: None });
        let (event, _) = read_client(r#"{"type":"input_audio_buffer.append","audio":"AAAA"}"#).unwrap();
        assert_eq!(event, Client::Audio { base64_len: 4 });
        assert_eq!(read_client(r#"{"type":"input_audio_buffer.commit"}"#).unwrap().0, Client::Other);
    }

    #[test]
    fn a_generation_never_passes_as_something_else() {
        // `type` twice: a parser keeping the last would see a generation.
        let (err, _) = read_client(r#"{"type":"conversation.item.retrieve","type":"response.create"}"#).unwrap_err();
        assert!(err.message.contains("duplicate field"), "{}", err.message);
        // Escaped, it is the same name, and read as the generation it is.
        let (event, _) = read_client(r#"{"type":"response.cre\u0061te"}"#).unwrap();
        assert!(matches!(event, Client::Create { .. }));
        // Broken deeper down is broken: never passed on.
        assert!(read_client(r#"{"type":"conversation.item.create","item":{"content":[}}"#).is_err());
    }

    #[test]
    fn bad_events_are_named_with_their_id() {
        let (err, id) = read_client(r#"{"type":"response.steer","event_id":"e9"}"#).unwrap_err();
        assert_eq!(id.as_deref(), Some("e9"));
        assert_eq!(err.code.as_deref(), Some("invalid_value"));
        assert!(read_client("not json").is_err());
        assert!(read_client(r#"{"event_id":"e1"}"#).is_err());
        let (err, _) =
            read_client(r#"{"type":"response.create","response":{"max_output_tokens":"lots"}}"#).unwrap_err();
        assert_eq!(err.param.as_deref(), Some("max_output_tokens"));
        assert!(read_client(r#"{"type":"session.update"}"#).is_err());
        let event: serde_json::Value = serde_json::from_str(&error_event(&err, Some("e2"))).unwrap();
        assert_eq!(event["type"], "error");
        assert_eq!(event["error"]["type"], "invalid_request_error");
        assert_eq!(event["error"]["event_id"], "e2");
    }

    #[test]
    fn usage_is_read_with_audio_and_cache_and_bounded_by_its_totals() {
        let done = r#"{"type":"response.done","response":{"id":"resp_1","status":"completed","usage":{"total_tokens":70,"input_tokens":50,"output_tokens":20,"input_token_details":{"text_tokens":30,"audio_tokens":20,"cached_tokens":10},"output_token_details":{"text_tokens":5,"audio_tokens":15}}}}"#;
        let server = read_server(done).unwrap();
        assert_eq!(server.response_id.as_deref(), Some("resp_1"));
        let usage = server.usage.unwrap();
        assert_eq!((usage.input_tokens, usage.output_tokens), (50, 20));
        assert_eq!((usage.cache_read_tokens, usage.audio_input_tokens, usage.audio_output_tokens), (10, 20, 15));
        // An upstream that lies: parts past the whole are cut to it.
        let lying = serde_json::json!({"input_tokens": 5, "output_tokens": 1, "input_token_details": {"cached_tokens": 900, "audio_tokens": 900}, "output_token_details": {"audio_tokens": 99}});
        let usage = read_usage(&lying).unwrap();
        assert_eq!((usage.cache_read_tokens, usage.audio_input_tokens, usage.audio_output_tokens), (5, 5, 1));
        // Not counts: no usage (the relay then estimates and says so).
        assert!(read_usage(&serde_json::json!({"input_tokens": -5})).is_none());
        assert!(read_usage(&serde_json::json!({"input_tokens": "5"})).is_none());
        let delta =
            read_server(r#"{"type":"response.output_text.delta","response_id":"resp_1","delta":"hi"}"#).unwrap();
        assert_eq!((delta.response_id.as_deref(), delta.text.as_deref()), (Some("resp_1"), Some("hi")));
        let error = read_server(r#"{"type":"error","error":{"message":"busy","event_id":"sy_1"}}"#).unwrap();
        assert_eq!(error.error_for.as_deref(), Some("sy_1"));
        assert!(read_server("[1]").is_none());
    }
}
