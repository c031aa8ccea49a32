//! Log probabilities in OpenAI's shape (`{token, logprob, bytes,
//! top_logprobs}`), which Chat Completions' `logprobs.content` and the
//! Responses API's `output_text.logprobs` share: read into the IR's
//! [`TokenLogprob`]s and written back from them, borrowing.

use serde::{Deserialize, Serialize};
use switchyard_ir::{TokenLogprob, TopLogprob};

/// One token as OpenAI writes it.
#[derive(Debug, Deserialize)]
pub struct WireToken {
    /// The token's text.
    #[serde(default)]
    pub token: String,
    /// Its log probability.
    #[serde(default)]
    pub logprob: f64,
    /// Its UTF-8 bytes.
    #[serde(default)]
    pub bytes: Option<Vec<u8>>,
    /// The likeliest tokens at its place.
    #[serde(default)]
    pub top_logprobs: Option<Vec<WireTop>>,
}

/// An alternative as OpenAI writes it.
#[derive(Debug, Deserialize)]
pub struct WireTop {
    /// The token's text.
    #[serde(default)]
    pub token: String,
    /// Its log probability.
    #[serde(default)]
    pub logprob: f64,
    /// Its UTF-8 bytes.
    #[serde(default)]
    pub bytes: Option<Vec<u8>>,
}

/// The IR form of OpenAI's tokens.
pub fn read(tokens: Vec<WireToken>) -> Vec<TokenLogprob> {
    tokens
        .into_iter()
        .map(|token| TokenLogprob {
            token: token.token,
            logprob: token.logprob,
            bytes: token.bytes,
            id: None,
            top: token
                .top_logprobs
                .unwrap_or_default()
                .into_iter()
                .map(|top| TopLogprob { token: top.token, logprob: top.logprob, bytes: top.bytes, id: None })
                .collect(),
        })
        .collect()
}

/// A token written in OpenAI's shape (`bytes` always said: the vendor's,
/// else the text's).
#[derive(Debug, Serialize)]
pub struct OutToken<'a> {
    token: &'a str,
    logprob: f64,
    bytes: &'a [u8],
    top_logprobs: Vec<OutTop<'a>>,
}

/// An alternative written in OpenAI's shape.
#[derive(Debug, Serialize)]
pub struct OutTop<'a> {
    token: &'a str,
    logprob: f64,
    bytes: &'a [u8],
}

/// OpenAI's form of the IR's tokens.
pub fn write(tokens: &[TokenLogprob]) -> Vec<OutToken<'_>> {
    tokens
        .iter()
        .map(|token| OutToken {
            token: &token.token,
            logprob: token.logprob,
            bytes: token.bytes(),
            top_logprobs: token
                .top
                .iter()
                .map(|top| OutTop { token: &top.token, logprob: top.logprob, bytes: top.bytes() })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token of `logprobs.content` as OpenAI's API reference shows it.
    #[test]
    fn openai_tokens_read_and_write_back_alike() {
        let wire = serde_json::json!([{"token": "Hello", "logprob": -0.31725305, "bytes": [72, 101, 108, 108, 111],
            "top_logprobs": [{"token": "Hello", "logprob": -0.31725305, "bytes": [72, 101, 108, 108, 111]},
                             {"token": "Hi", "logprob": -1.3190403, "bytes": [72, 105]}]}]);
        let tokens: Vec<WireToken> = serde_json::from_value(wire.clone()).unwrap_or_default();
        let read = read(tokens);
        assert_eq!(read.len(), 1);
        assert_eq!((read[0].token.as_str(), read[0].logprob, read[0].top.len()), ("Hello", -0.31725305, 2));
        assert_eq!(serde_json::to_value(write(&read)).ok(), Some(wire));
    }
}
