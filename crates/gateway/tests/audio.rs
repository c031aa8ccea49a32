//! Audio input over real TCP, through the gateway to the vendor fake, which
//! validates like the vendor (an audio part to a model that takes none is
//! its 400; the reply names the audio the lane heard, `[audio: <type>]`):
//! an OpenAI caller's `input_audio` reaches Gemini and a Bedrock model that
//! listens; a Gemini caller's audio part reaches OpenAI's audio model as
//! `input_audio`; a lane that cannot take it (Anthropic's protocol, a model
//! the facts say is deaf) gets the rest of the request and the caller is
//! told in `x-switchyard-dropped`, or refused under strict.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use common::*;
use serde_json::{json, Value};

const CONFIG: &str = r#"
providers:
  gpt: { protocol: openai, base_url: "mock://" }
  google: { protocol: gemini, base_url: "mock://" }
  claude: { protocol: anthropic, base_url: "mock://" }
  aws: { protocol: bedrock, base_url: "mock://" }
models:
  listener: { provider: gpt, model: gpt-4o-audio-preview }
  gpt4o: { provider: gpt, model: gpt-4o }
  gpt4o-said-to-listen: { provider: gpt, model: gpt-4o, capabilities: { audio_input: true } }
  gemini: { provider: google, model: gemini-2.5-flash }
  sonnet: { provider: claude, model: claude-sonnet-4-5 }
  bedrock-claude: { provider: aws, model: us.anthropic.claude-opus-4-8 }
  voxtral: { provider: aws, model: mistral.voxtral-small-24b-2507 }
"#;

const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=";
const MP3: &str = "SUQzBAAAAAAAI1RTU0UAAAAPAAADTGF2ZjU4Ljc2LjEwMAAAAAAAAAAAAAAA";

fn openai_audio(model: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"model": model, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is said?"},
        {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}}]}]}))
    .unwrap()
}

fn gemini_audio(part: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"contents": [{"role": "user", "parts": [{"text": "what is said?"}, part]}]})).unwrap()
}

fn text(reply: &Reply) -> String {
    String::from_utf8_lossy(&reply.body).into_owned()
}

#[tokio::test]
async fn openai_audio_reaches_the_lanes_that_listen() {
    let addr = gateway(CONFIG).await;
    for model in ["gemini", "voxtral", "listener"] {
        let reply = post(addr, "/v1/chat/completions", &[], openai_audio(model)).await;
        assert_eq!(reply.status, 200, "{model}: {}", text(&reply));
        assert!(text(&reply).contains("[audio: audio/wav]"), "{model}: {}", text(&reply));
        assert!(!reply.headers.contains_key("x-switchyard-dropped"), "{model}: {:?}", reply.headers);
    }
}

#[tokio::test]
async fn gemini_audio_reaches_openais_audio_model() {
    let addr = gateway(CONFIG).await;
    let inline = gemini_audio(json!({"inlineData": {"mimeType": "audio/mp3", "data": MP3}}));
    let reply = post(addr, "/v1beta/models/listener:generateContent", &[], inline).await;
    assert_eq!(reply.status, 200, "{}", text(&reply));
    assert!(text(&reply).contains("[audio: audio/mp3]"), "{}", text(&reply));
    assert!(!reply.headers.contains_key("x-switchyard-dropped"));
    // An uploaded file's URI cannot become inline bytes: reported, the
    // text still answered.
    let by_uri = gemini_audio(json!({"fileData": {"mimeType": "audio/mp3",
        "fileUri": "https://generativelanguage.googleapis.com/v1beta/files/abc"}}));
    let reply = post(addr, "/v1beta/models/listener:generateContent", &[], by_uri).await;
    assert_eq!(reply.status, 200, "{}", text(&reply));
    assert!(!text(&reply).contains("[audio:"), "{}", text(&reply));
    assert_eq!(reply.headers["x-switchyard-dropped"], "media.url");
}

#[tokio::test]
async fn a_lane_without_audio_is_told_and_strict_refuses() {
    let addr = gateway(CONFIG).await;
    // Anthropic's Messages has no audio block; gpt-4o and Claude on
    // Bedrock take none (the model facts): the vendor's 400 is not met.
    for model in ["sonnet", "gpt4o", "bedrock-claude"] {
        let reply = post(addr, "/v1/chat/completions", &[], openai_audio(model)).await;
        assert_eq!(reply.status, 200, "{model}: {}", text(&reply));
        assert_eq!(reply.headers["x-switchyard-dropped"], "messages.content.input_audio", "{model}");
        assert!(!text(&reply).contains("[audio:"), "{model}: {}", text(&reply));
        let strict = post(addr, "/v1/chat/completions", &[("x-switchyard-strict", "1")], openai_audio(model)).await;
        assert_eq!(strict.status, 400, "{model}: {}", text(&strict));
        let error: Value = serde_json::from_slice(&strict.body).unwrap();
        assert!(error["error"]["message"].as_str().unwrap().contains("messages.content.input_audio"), "{error}");
    }
    // The fake holds the vendor's rule apart from the facts: a lane whose
    // config wrongly says gpt-4o listens gets OpenAI's 400.
    let reply = post(addr, "/v1/chat/completions", &[], openai_audio("gpt4o-said-to-listen")).await;
    assert_eq!(reply.status, 400, "{}", text(&reply));
    assert!(text(&reply).contains("does not support audio input"), "{}", text(&reply));
}
