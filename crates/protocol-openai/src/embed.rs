//! OpenAI embeddings (`POST /v1/embeddings`): `input` as one string or a
//! list, `dimensions`, `encoding_format` (`float` or `base64`) and `user`;
//! the reply's `data[].embedding` in input order and `usage.prompt_tokens`.
//! Token-array inputs pass through to OpenAI lanes untouched but cannot be
//! translated (no other protocol takes tokens). OpenAI has no input type,
//! no truncation choice and no title: a request that carries them here is
//! told they were dropped.

use http::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_codec::embed::{base64_of, vector_of, EmbedCodec};
use switchyard_codec::{DecodeError, Encoded};
use switchyard_ir::{DropReason, Dropped, EmbedRequest, EmbedResponse, Encoding, Field, Protocol, Vector};

/// OpenAI's embeddings.
pub(crate) struct OpenAiEmbed;

/// OpenAI takes up to 2,048 inputs a call.
const MAX_INPUTS: usize = 2048;

#[derive(Deserialize)]
struct WireRequest {
    #[serde(default)]
    model: String,
    input: Value,
    #[serde(default)]
    encoding_format: Option<String>,
    #[serde(default)]
    dimensions: Option<u32>,
    #[serde(default)]
    user: Option<String>,
    #[serde(flatten)]
    rest: serde_json::Map<String, Value>,
}

#[derive(Serialize)]
struct OutRequest<'a> {
    model: &'a str,
    input: &'a [String],
    encoding_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    extra: Option<&'a serde_json::Map<String, Value>>,
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    model: String,
    data: Vec<WireEmbedding>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireEmbedding {
    #[serde(default)]
    index: Option<usize>,
    embedding: Box<serde_json::value::RawValue>,
}

/// A reply as written for the caller: typed, so a lane's vectors are
/// copied as their bytes, never built into a tree.
#[derive(Serialize)]
struct OutResponse<'a> {
    object: &'static str,
    data: Vec<OutEmbedding<'a>>,
    model: &'a str,
    usage: WireUsage,
}

#[derive(Serialize)]
struct OutEmbedding<'a> {
    object: &'static str,
    index: usize,
    embedding: OutVector<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum OutVector<'a> {
    Floats(&'a Vector),
    Base64(String),
}

#[derive(Deserialize, Serialize)]
struct WireUsage {
    prompt_tokens: u64,
    total_tokens: u64,
}

impl EmbedCodec for OpenAiEmbed {
    fn read_request(&self, body: &[u8]) -> Result<EmbedRequest, DecodeError> {
        let wire: WireRequest = serde_json::from_slice(body)?;
        let inputs = match wire.input {
            Value::String(text) => vec![text],
            Value::Array(items) if items.is_empty() => {
                return Err(DecodeError::invalid("input", "`input` is empty: give at least one text"));
            }
            Value::Array(items) => items
                .into_iter()
                .map(|item| match item {
                    Value::String(text) => Ok(text),
                    _ => Err(DecodeError::invalid(
                        "input",
                        "token inputs can only be embedded by an OpenAI lane; send text to reach other lanes",
                    )),
                })
                .collect::<Result<_, _>>()?,
            _ => return Err(DecodeError::invalid("input", "`input` must be a string or a list of strings")),
        };
        let encoding = match wire.encoding_format.as_deref() {
            None | Some("float") => Encoding::Float,
            Some("base64") => Encoding::Base64,
            Some(other) => {
                return Err(DecodeError::invalid("encoding_format", format!("`{other}` is not float or base64")));
            }
        };
        let mut request = EmbedRequest {
            model: wire.model,
            inputs,
            dimensions: wire.dimensions,
            encoding,
            user: wire.user,
            ..EmbedRequest::default()
        };
        for (key, value) in wire.rest {
            request.extra.insert(Protocol::OpenAi, key, value);
        }
        Ok(request)
    }

    fn write_request(&self, request: &EmbedRequest) -> Encoded {
        let mut dropped = Vec::new();
        // Cohere's quantised forms: only Cohere's models make them.
        if !request.quantized.is_empty() {
            dropped.push(Dropped::new(Field::Encoding, DropReason::Unsupported));
        }
        if request.input_type.is_some() {
            dropped.push(Dropped::new(Field::InputType, DropReason::Unsupported));
        }
        if request.truncate.is_some() {
            dropped.push(Dropped::new(Field::Truncate, DropReason::Unsupported));
        }
        if request.title.is_some() {
            dropped.push(Dropped::new(Field::EmbedTitle, DropReason::Unsupported));
        }
        let extra = request.extra.for_target(Protocol::OpenAi, &mut dropped);
        let out = OutRequest {
            model: &request.model,
            input: &request.inputs,
            // Floats always: the gateway makes base64 itself when asked.
            encoding_format: "float",
            dimensions: request.dimensions,
            user: request.user.as_deref(),
            extra,
        };
        Encoded { body: serde_json::to_vec(&out).unwrap_or_default(), dropped }
    }

    fn read_response(&self, body: &[u8], _headers: &HeaderMap) -> Result<EmbedResponse, DecodeError> {
        let mut wire: WireResponse = serde_json::from_slice(body)?;
        // In input order, whatever order the list came in.
        wire.data.sort_by_key(|e| e.index.unwrap_or(usize::MAX));
        let vectors = wire.data.into_iter().map(|e| vector_of(e.embedding)).collect::<Result<_, _>>()?;
        let input_tokens = wire.usage.map(|u| u.prompt_tokens);
        Ok(EmbedResponse { model: wire.model, vectors, input_tokens, quantized: Vec::new() })
    }

    fn write_response(&self, response: &EmbedResponse, request: &EmbedRequest) -> Vec<u8> {
        let data = response
            .vectors
            .iter()
            .enumerate()
            .map(|(index, v)| OutEmbedding {
                object: "embedding",
                index,
                embedding: match request.encoding {
                    Encoding::Float => OutVector::Floats(v),
                    Encoding::Base64 => OutVector::Base64(base64_of(v)),
                },
            })
            .collect();
        let tokens = response.input_tokens.unwrap_or(0);
        let body = OutResponse {
            object: "list",
            data,
            model: &response.model,
            usage: WireUsage { prompt_tokens: tokens, total_tokens: tokens },
        };
        switchyard_codec::embed::write_reply(response, &body)
    }

    fn upstream_path(&self, _model: &str) -> String {
        "/v1/embeddings".to_owned()
    }

    fn max_inputs(&self, _model: &str) -> usize {
        MAX_INPUTS
    }

    fn read_input_tokens(&self, body: &[u8], _headers: &HeaderMap) -> Option<u64> {
        // Usage comes last, after megabytes of vectors: read from the end.
        let raw = switchyard_codec::scan::top_level_value_from_end(body, "usage")?;
        serde_json::from_slice::<WireUsage>(raw).ok().map(|u| u.prompt_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_and_writes_with_its_options() {
        let body = br#"{"model":"e","input":["a","b"],"dimensions":8,"encoding_format":"base64","user":"u"}"#;
        let request = OpenAiEmbed.read_request(body).unwrap();
        assert_eq!(request.inputs, ["a", "b"]);
        assert_eq!((request.dimensions, request.encoding), (Some(8), Encoding::Base64));
        let written: Value = serde_json::from_slice(&OpenAiEmbed.write_request(&request).body).unwrap();
        assert_eq!(written["encoding_format"], "float", "the gateway makes base64 itself");
        assert_eq!(written["dimensions"], 8);
        assert!(OpenAiEmbed.read_request(br#"{"model":"e","input":[]}"#).is_err());
        assert!(OpenAiEmbed.read_request(br#"{"model":"e","input":[[1,2]]}"#).is_err());
    }

    #[test]
    fn a_reply_comes_back_in_input_order_in_the_encoding_asked() {
        let body = br#"{"object":"list","model":"e","data":[{"index":1,"embedding":[0.5,-1.25]},{"index":0,"embedding":[0.25,2e-7]}],"usage":{"prompt_tokens":3,"total_tokens":3}}"#;
        let reply = OpenAiEmbed.read_response(body, &HeaderMap::new()).unwrap();
        assert_eq!(reply.vectors, vec![vec![0.25, 2e-7], vec![0.5, -1.25]]);
        assert_eq!(reply.input_tokens, Some(3));
        let request = EmbedRequest { encoding: Encoding::Base64, ..EmbedRequest::default() };
        let out: Value = serde_json::from_slice(&OpenAiEmbed.write_response(&reply, &request)).unwrap();
        assert_eq!(
            switchyard_codec::embed::from_base64(out["data"][1]["embedding"].as_str().unwrap()).unwrap(),
            vec![0.5, -1.25]
        );
    }
}
