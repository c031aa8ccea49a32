//! Bedrock token counting (`POST /model/{id}/count-tokens`): `{input:
//! {converse: {messages, system, toolConfig}}}`, answered
//! `{inputTokens}`. An `invokeModel` input (a model-native body) is counted
//! only by a Bedrock lane, where it goes as it came.

use std::borrow::Cow;

use switchyard_codec::count::{keep_members, CountCodec};
use switchyard_codec::{scan, DecodeError};

/// Bedrock's token counting.
pub(crate) struct BedrockCount;

/// What `CountTokens` takes of a Converse request.
const COUNTED: [&str; 4] = ["messages", "system", "toolConfig", "additionalModelRequestFields"];

impl CountCodec for BedrockCount {
    fn chat_body<'a>(&self, body: &'a [u8]) -> Result<Cow<'a, [u8]>, DecodeError> {
        match scan::member_once(body, &["input", "converse"]) {
            Ok(Some(converse)) => Ok(Cow::Borrowed(converse)),
            Ok(None) => Err(DecodeError::invalid(
                "input",
                "give `input.converse` (a Converse request): an `invokeModel` input is counted only by a Bedrock lane",
            )),
            Err(err) => Err(DecodeError::Json(err.to_string())),
        }
    }

    fn count_body(&self, chat: &[u8], _model: &str) -> Result<Vec<u8>, DecodeError> {
        let converse = keep_members(chat, &COUNTED)?;
        Ok(serde_json::to_vec(&serde_json::json!({ "input": { "converse": converse } }))?)
    }

    fn upstream_path(&self, model: &str) -> String {
        format!("/model/{}/count-tokens", switchyard_codec::path_segment(model))
    }

    fn read_count(&self, body: &[u8]) -> Option<u64> {
        scan::member_u64(body, &["inputTokens"])
    }

    fn write_count(&self, tokens: u64) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({ "inputTokens": tokens })).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_converse_input_is_the_chat_request() {
        let body = br#"{"input":{"converse":{"messages":[{"role":"user","content":[{"text":"hi"}]}]}}}"#;
        assert_eq!(
            &*BedrockCount.chat_body(body).unwrap(),
            br#"{"messages":[{"role":"user","content":[{"text":"hi"}]}]}"#
        );
        assert!(BedrockCount.chat_body(br#"{"input":{"invokeModel":{"body":"{}"}}}"#).is_err());
        let chat = br#"{"messages":[],"inferenceConfig":{"maxTokens":5}}"#;
        let lane: serde_json::Value = serde_json::from_slice(&BedrockCount.count_body(chat, "m").unwrap()).unwrap();
        assert_eq!(lane, serde_json::json!({"input": {"converse": {"messages": []}}}));
    }
}
