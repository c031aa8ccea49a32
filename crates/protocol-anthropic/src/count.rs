//! Anthropic token counting (`POST /v1/messages/count_tokens`): a Messages
//! request without its generation settings, answered `{input_tokens}`.

use std::borrow::Cow;

use switchyard_codec::count::{keep_members, CountCodec};
use switchyard_codec::{scan, DecodeError};

/// Anthropic's token counting.
pub(crate) struct AnthropicCount;

/// What `count_tokens` takes of a Messages request.
const COUNTED: [&str; 7] = ["model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers"];

impl CountCodec for AnthropicCount {
    fn chat_body<'a>(&self, body: &'a [u8]) -> Result<Cow<'a, [u8]>, DecodeError> {
        Ok(Cow::Borrowed(body))
    }

    fn count_body(&self, chat: &[u8], model: &str) -> Result<Vec<u8>, DecodeError> {
        let mut object = keep_members(chat, &COUNTED)?;
        object.insert("model".to_owned(), model.into());
        Ok(serde_json::to_vec(&object)?)
    }

    fn upstream_path(&self, _model: &str) -> String {
        "/v1/messages/count_tokens".to_owned()
    }

    fn read_count(&self, body: &[u8]) -> Option<u64> {
        scan::member_u64(body, &["input_tokens"])
    }

    fn write_count(&self, tokens: u64) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({ "input_tokens": tokens })).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_takes_no_generation_settings() {
        let chat =
            br#"{"model":"x","max_tokens":5,"stream":true,"system":"s","messages":[{"role":"user","content":"hi"}]}"#;
        let body: serde_json::Value =
            serde_json::from_slice(&AnthropicCount.count_body(chat, "claude").unwrap()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"model": "claude", "system": "s", "messages": [{"role": "user", "content": "hi"}]})
        );
        assert_eq!(AnthropicCount.read_count(br#"{"input_tokens":12}"#), Some(12));
    }
}
