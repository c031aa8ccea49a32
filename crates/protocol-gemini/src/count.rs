//! Gemini token counting (`POST /v1beta/models/{m}:countTokens`): a body
//! of `contents` alone, or a whole `generateContentRequest` (system text
//! and tools counted too), answered `{totalTokens}`. Lanes are asked with
//! the whole request.

use std::borrow::Cow;

use switchyard_codec::count::CountCodec;
use switchyard_codec::{scan, DecodeError};

/// Gemini's token counting.
pub(crate) struct GeminiCount;

impl CountCodec for GeminiCount {
    fn chat_body<'a>(&self, body: &'a [u8]) -> Result<Cow<'a, [u8]>, DecodeError> {
        match scan::top_level_value(body, "generateContentRequest") {
            Ok(Some(inner)) => Ok(Cow::Borrowed(inner)),
            Ok(None) => Ok(Cow::Borrowed(body)),
            Err(err) => Err(DecodeError::Json(err.to_string())),
        }
    }

    fn count_body(&self, chat: &[u8], model: &str) -> Result<Vec<u8>, DecodeError> {
        let serde_json::Value::Object(mut request) = serde_json::from_slice(chat)? else {
            return Err(DecodeError::Json("a chat request is a JSON object".into()));
        };
        let id = model.trim_start_matches("models/");
        request.insert("model".to_owned(), format!("models/{id}").into());
        Ok(serde_json::to_vec(&serde_json::json!({ "generateContentRequest": request }))?)
    }

    fn upstream_path(&self, model: &str) -> String {
        let id = switchyard_codec::path_segment(model.trim_start_matches("models/"));
        format!("/v1beta/models/{id}:countTokens")
    }

    fn read_count(&self, body: &[u8]) -> Option<u64> {
        scan::member_u64(body, &["totalTokens"])
    }

    fn write_count(&self, tokens: u64) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({ "totalTokens": tokens })).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_body_forms_hold_a_chat_request() {
        let contents = br#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}"#;
        assert_eq!(&*GeminiCount.chat_body(contents).unwrap(), &contents[..]);
        let whole = br#"{"generateContentRequest":{"model":"models/x","contents":[]}}"#;
        assert_eq!(&*GeminiCount.chat_body(whole).unwrap(), br#"{"model":"models/x","contents":[]}"#);
        let lane: serde_json::Value =
            serde_json::from_slice(&GeminiCount.count_body(contents, "gemini-2.5-flash").unwrap()).unwrap();
        assert_eq!(lane["generateContentRequest"]["model"], "models/gemini-2.5-flash");
    }
}
