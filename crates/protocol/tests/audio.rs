//! Audio input across the six protocols at the codec level: an OpenAI
//! `input_audio` part reaches Gemini as `inlineData` of its MIME type and
//! Bedrock as an `audio` block; a Gemini audio part reaches OpenAI as
//! `input_audio` where it can (inline `wav` or `mp3`), and what cannot
//! cross (a file URI, another format; any audio to Anthropic, Cohere or
//! Responses, or to a model that takes none) is reported in the caller's
//! terms, never sent for the vendor to refuse.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use serde_json::{json, Value};
use switchyard_protocol::ir::{Block, Capabilities, DropReason, Dropped, Field, Protocol, Request};
use switchyard_protocol::{codec, dropped_path};

const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=";
const MP3: &str = "SUQzBAAAAAAAI1RTU0UAAAAPAAADTGF2ZjU4Ljc2LjEwMAAAAAAAAAAAAAAA";

fn read(protocol: Protocol, body: &Value) -> Request {
    codec(protocol).read_request(&serde_json::to_vec(body).unwrap()).unwrap()
}

/// `request` written for a `protocol` lane whose model takes what
/// `capabilities` say: the body and the fields reported.
fn write(protocol: Protocol, request: &Request, capabilities: &Capabilities) -> (Value, Vec<Dropped>) {
    let encoded = codec(protocol).write_request_for(request, capabilities);
    (serde_json::from_slice(&encoded.body).unwrap(), encoded.dropped)
}

fn openai_caller() -> Request {
    read(
        Protocol::OpenAi,
        &json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is said?"},
            {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}}]}]}),
    )
}

fn gemini_caller(part: Value) -> Request {
    read(Protocol::Gemini, &json!({"contents": [{"role": "user", "parts": [{"text": "what is said?"}, part]}]}))
}

fn fields(dropped: &[Dropped]) -> Vec<Field> {
    dropped.iter().map(|d| d.field).collect()
}

#[test]
fn openai_audio_reaches_gemini_and_bedrock_in_their_shapes() {
    let request = openai_caller();
    let (gemini, dropped) = write(Protocol::Gemini, &request, &Capabilities::default());
    assert!(dropped.is_empty(), "{dropped:?}");
    assert_eq!(gemini["contents"][0]["parts"][1], json!({"inlineData": {"mimeType": "audio/wav", "data": WAV}}));
    let (bedrock, dropped) = write(Protocol::Bedrock, &request, &Capabilities::default());
    assert!(dropped.is_empty(), "{dropped:?}");
    assert_eq!(bedrock["messages"][0]["content"][1], json!({"audio": {"format": "wav", "source": {"bytes": WAV}}}));
}

#[test]
fn gemini_audio_reaches_openai_as_input_audio() {
    let request = gemini_caller(json!({"inlineData": {"mimeType": "audio/mpeg", "data": MP3}}));
    assert!(matches!(request.messages[0].content[1], Block::Audio { .. }));
    let (openai, dropped) = write(Protocol::OpenAi, &request, &Capabilities::default());
    assert!(dropped.is_empty(), "{dropped:?}");
    assert_eq!(
        openai["messages"][0]["content"][1],
        json!({"type": "input_audio", "input_audio": {"data": MP3, "format": "mp3"}})
    );
}

/// A file URI needs inline bytes on OpenAI's side, and OpenAI takes `wav`
/// and `mp3` only: both are reported, in the Gemini caller's terms for
/// what it wrote, and the rest of the request goes.
#[test]
fn what_openai_cannot_take_is_reported() {
    let by_uri = gemini_caller(json!({"fileData": {"mimeType": "audio/mp3",
        "fileUri": "https://generativelanguage.googleapis.com/v1beta/files/abc"}}));
    let (openai, dropped) = write(Protocol::OpenAi, &by_uri, &Capabilities::default());
    assert_eq!(fields(&dropped), [Field::MediaUrl]);
    assert_eq!(openai["messages"][0]["content"], "what is said?");
    let ogg = gemini_caller(json!({"inlineData": {"mimeType": "audio/ogg", "data": "T2dnUw=="}}));
    let (_, dropped) = write(Protocol::OpenAi, &ogg, &Capabilities::default());
    assert_eq!(fields(&dropped), [Field::MediaType]);
    // Bedrock takes ogg.
    let (bedrock, dropped) = write(Protocol::Bedrock, &ogg, &Capabilities::default());
    assert!(dropped.is_empty(), "{dropped:?}");
    assert_eq!(bedrock["messages"][0]["content"][1]["audio"]["format"], "ogg");
}

/// Anthropic's Messages, Cohere's chat and OpenAI's Responses take no
/// audio: the text goes, the audio is reported under the caller's path.
#[test]
fn protocols_without_audio_report_it() {
    let request = openai_caller();
    for lane in [Protocol::Anthropic, Protocol::Cohere, Protocol::Responses] {
        let (body, dropped) = write(lane, &request, &Capabilities::ALL);
        assert_eq!(dropped, [Dropped::new(Field::Audio, DropReason::Unsupported)], "{lane}");
        assert!(!body.to_string().contains(WAV), "{lane}: {body}");
        assert!(body.to_string().contains("what is said?"), "{lane}: {body}");
    }
    let dropped = Dropped::new(Field::Audio, DropReason::Unsupported);
    assert_eq!(dropped_path(codec(Protocol::OpenAi), &dropped), "messages.content.input_audio");
    assert_eq!(dropped_path(codec(Protocol::Gemini), &dropped), "contents.parts.inlineData");
    assert_eq!(dropped_path(codec(Protocol::Bedrock), &dropped), "messages.content.audio");
}

/// A model the lane says takes no audio (gpt-4o, Claude on Bedrock) gets
/// none, whatever its protocol could say, and the loss is the model's.
#[test]
fn a_model_without_audio_input_gets_none() {
    let deaf = Capabilities { audio_input: Some(false), ..Capabilities::default() };
    let request = openai_caller();
    for lane in [Protocol::OpenAi, Protocol::Gemini, Protocol::Bedrock] {
        let (body, dropped) = write(lane, &request, &deaf);
        assert_eq!(dropped, [Dropped::new(Field::Audio, DropReason::Capability)], "{lane}");
        assert!(!body.to_string().contains(WAV), "{lane}: {body}");
    }
    // A text-only request loses nothing to the capability.
    let text = read(Protocol::OpenAi, &json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}));
    assert!(write(Protocol::OpenAi, &text, &deaf).1.is_empty());
}

/// Callers whose API has no audio input are refused as their vendor
/// refuses them: OpenAI's other formats, Responses' `input_audio`, and an
/// Anthropic block of a type Messages does not have.
#[test]
fn callers_are_held_to_their_own_api() {
    let bad_format = json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": WAV, "format": "flac"}}]}]});
    let err = codec(Protocol::OpenAi).read_request(&serde_json::to_vec(&bad_format).unwrap()).unwrap_err();
    assert!(err.to_string().contains("'wav' and 'mp3'"), "{err}");
    let responses = json!({"model": "m", "input": [{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}}]}]});
    assert!(codec(Protocol::Responses).read_request(&serde_json::to_vec(&responses).unwrap()).is_err());
    let anthropic = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}}]}]});
    let err = codec(Protocol::Anthropic).read_request(&serde_json::to_vec(&anthropic).unwrap()).unwrap_err();
    assert!(
        err.to_string().starts_with("messages.0.content.0: Input tag 'input_audio' found using 'type' does not match"),
        "{err}"
    );
}

/// A same-protocol body is searched for audio (never parsed) only where
/// the protocol has it: text-only bodies say no, an audio part yes.
#[test]
fn a_body_says_whether_it_may_hold_audio() {
    let with = |protocol: Protocol, body: Value| codec(protocol).may_hold_audio(&serde_json::to_vec(&body).unwrap());
    let openai_text = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    assert!(!with(Protocol::OpenAi, openai_text));
    assert!(with(
        Protocol::OpenAi,
        json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}}]}]})
    ));
    assert!(with(
        Protocol::Gemini,
        json!({"contents": [{"parts": [{"inlineData": {"mimeType": "audio/wav", "data": WAV}}]}]})
    ));
    assert!(!with(
        Protocol::Gemini,
        json!({"contents": [{"parts": [{"inlineData": {"mimeType": "image/png", "data": "AA"}}]}]})
    ));
    assert!(with(
        Protocol::Bedrock,
        json!({"messages": [{"role": "user", "content": [
        {"audio": {"format": "wav", "source": {"bytes": WAV}}}]}]})
    ));
    assert!(!with(Protocol::Anthropic, json!({"messages": [{"role": "user", "content": "\"input_audio\""}]})));
}
