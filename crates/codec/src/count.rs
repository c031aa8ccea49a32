//! Token counting in a protocol that counts natively (Anthropic's
//! `count_tokens`, Gemini's `countTokens`, Bedrock's `CountTokens`): the
//! chat request a caller's count body holds, the count request for a lane
//! made from a chat body written for it, and the count each side reads and
//! writes ([`CountCodec`]).

use std::borrow::Cow;

use crate::DecodeError;

/// A protocol's token counting.
pub trait CountCodec: Send + Sync {
    /// The chat request a caller's count `body` holds, as this protocol's
    /// chat body (borrowed when it is the body itself).
    fn chat_body<'a>(&self, body: &'a [u8]) -> Result<Cow<'a, [u8]>, DecodeError>;
    /// The count request for a lane of this protocol serving `model`, from
    /// a chat body written for it (members a count does not take left out).
    fn count_body(&self, chat: &[u8], model: &str) -> Result<Vec<u8>, DecodeError>;
    /// Path and query of the upstream count endpoint for `model`.
    fn upstream_path(&self, model: &str) -> String;
    /// The count a reply says.
    fn read_count(&self, body: &[u8]) -> Option<u64>;
    /// A count reply for a caller of this protocol.
    fn write_count(&self, tokens: u64) -> Vec<u8>;
}

/// `chat`'s members named in `keep`, as a JSON object (what a count
/// endpoint takes of a chat body).
pub fn keep_members(chat: &[u8], keep: &[&str]) -> Result<serde_json::Map<String, serde_json::Value>, DecodeError> {
    let serde_json::Value::Object(mut object) = serde_json::from_slice(chat)? else {
        return Err(DecodeError::Json("a chat request is a JSON object".into()));
    };
    object.retain(|key, _| keep.contains(&key.as_str()));
    Ok(object)
}
