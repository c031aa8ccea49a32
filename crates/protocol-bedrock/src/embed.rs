//! Bedrock embeddings through `InvokeModel` (`POST /model/{id}/invoke`),
//! in the two body forms Bedrock's embedding models take:
//! - Amazon Titan text v2: `{inputText, dimensions, normalize}` replying
//!   `{embedding, inputTextTokenCount}`, one text a call (a batch is split);
//! - Cohere embed: `{texts, input_type, truncate, embedding_types}`
//!   replying `{embeddings}`, with the token count in the
//!   `X-Amzn-Bedrock-Input-Token-Count` header; up to 96 texts a call.
//!
//! A caller's body picks its form (`inputText` or `texts`) and the reply
//! takes the same one; a lane's wire model picks the form it is sent
//! (`cohere.embed-*` is Cohere's, every other model Titan's).

use http::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use switchyard_codec::embed::{input_type_or_document, vector_of, EmbedCodec};
use switchyard_codec::{DecodeError, Encoded};
use switchyard_ir::{DropReason, Dropped, EmbedRequest, EmbedResponse, Field, InputType, Truncate, Vector};

/// Bedrock's embeddings.
pub(crate) struct BedrockEmbed;

/// The reply form of a caller that sent a Titan body.
const TITAN: &str = "titan";
/// The reply form of a caller that sent a Cohere body.
const COHERE: &str = "cohere";

/// The header Bedrock counts a Cohere body's input tokens in.
const TOKEN_COUNT: &str = "x-amzn-bedrock-input-token-count";

/// Whether `model` takes Cohere's body (else Titan's).
pub(crate) fn is_cohere(model: &str) -> bool {
    model.split(['.', ':', '/']).any(|part| part == "cohere")
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TitanRequest {
    input_text: String,
    #[serde(default)]
    dimensions: Option<u32>,
}

#[derive(Deserialize)]
struct CohereRequest {
    texts: Vec<String>,
    #[serde(default)]
    input_type: Option<String>,
    #[serde(default)]
    truncate: Option<String>,
}

fn cohere_input_type(name: &str) -> Result<InputType, DecodeError> {
    Ok(match name {
        "search_query" => InputType::Query,
        "search_document" => InputType::Document,
        "classification" => InputType::Classification,
        "clustering" => InputType::Clustering,
        other => return Err(DecodeError::invalid("input_type", format!("`{other}` is not an input type"))),
    })
}

fn cohere_input_type_name(input_type: InputType) -> &'static str {
    match input_type {
        InputType::Query => "search_query",
        InputType::Document | InputType::Similarity => "search_document",
        InputType::Classification => "classification",
        InputType::Clustering => "clustering",
    }
}

impl EmbedCodec for BedrockEmbed {
    fn read_request(&self, body: &[u8]) -> Result<EmbedRequest, DecodeError> {
        let value: Value = serde_json::from_slice(body)?;
        if value.get("inputText").is_some() {
            let titan: TitanRequest = serde_json::from_value(value)?;
            return Ok(EmbedRequest {
                inputs: vec![titan.input_text],
                dimensions: titan.dimensions,
                form: Some(TITAN.to_owned()),
                ..EmbedRequest::default()
            });
        }
        let cohere: CohereRequest = serde_json::from_value(value)?;
        if cohere.texts.is_empty() {
            return Err(DecodeError::invalid("texts", "`texts` is empty: give at least one text"));
        }
        let truncate = match cohere.truncate.as_deref() {
            None => None,
            Some("NONE") => Some(Truncate::None),
            Some("START") => Some(Truncate::Start),
            Some("END") => Some(Truncate::End),
            Some(other) => {
                return Err(DecodeError::invalid("truncate", format!("`{other}` is not NONE, START or END")))
            }
        };
        Ok(EmbedRequest {
            inputs: cohere.texts,
            input_type: cohere.input_type.as_deref().map(cohere_input_type).transpose()?,
            truncate,
            form: Some(COHERE.to_owned()),
            ..EmbedRequest::default()
        })
    }

    fn write_request(&self, request: &EmbedRequest) -> Encoded {
        let mut dropped = Vec::new();
        if request.title.is_some() {
            dropped.push(Dropped::new(Field::EmbedTitle, DropReason::Unsupported));
        }
        let body = if is_cohere(&request.model) {
            if request.dimensions.is_some() {
                dropped.push(Dropped::new(Field::Dimensions, DropReason::Capability));
            }
            let mut body = json!({
                "texts": request.inputs,
                "input_type": cohere_input_type_name(input_type_or_document(request.input_type)),
                "embedding_types": ["float"],
            });
            if let Some(truncate) = request.truncate {
                let name = match truncate {
                    Truncate::None => "NONE",
                    Truncate::Start => "START",
                    Truncate::End => "END",
                };
                body["truncate"] = json!(name);
            }
            body
        } else {
            if request.input_type.is_some() {
                dropped.push(Dropped::new(Field::InputType, DropReason::Unsupported));
            }
            if request.truncate.is_some() {
                dropped.push(Dropped::new(Field::Truncate, DropReason::Unsupported));
            }
            let mut body = json!({"inputText": request.inputs.first().cloned().unwrap_or_default()});
            if let Some(dimensions) = request.dimensions {
                body["dimensions"] = json!(dimensions);
            }
            body
        };
        Encoded { body: serde_json::to_vec(&body).unwrap_or_default(), dropped }
    }

    fn read_response(&self, body: &[u8], headers: &HeaderMap) -> Result<EmbedResponse, DecodeError> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire {
            embedding: Option<Box<RawValue>>,
            input_text_token_count: Option<u64>,
            embeddings: Option<Box<RawValue>>,
        }
        #[derive(Deserialize)]
        struct ByType {
            float: Option<Vec<Box<RawValue>>>,
        }
        let wire: Wire = serde_json::from_slice(body)?;
        let header_tokens = headers.get(TOKEN_COUNT).and_then(|v| v.to_str().ok()?.trim().parse().ok());
        if let Some(embedding) = wire.embedding {
            let tokens = wire.input_text_token_count.or(header_tokens);
            return Ok(EmbedResponse {
                model: String::new(),
                vectors: vec![vector_of(embedding)?],
                input_tokens: tokens,
            });
        }
        let embeddings = wire.embeddings.ok_or_else(|| DecodeError::Json("the reply holds no embedding".into()))?;
        let list: Vec<Box<RawValue>> = if embeddings.get().starts_with('{') {
            serde_json::from_str::<ByType>(embeddings.get())?.float.unwrap_or_default()
        } else {
            serde_json::from_str(embeddings.get())?
        };
        let vectors = list.into_iter().map(vector_of).collect::<Result<_, _>>()?;
        Ok(EmbedResponse { model: String::new(), vectors, input_tokens: header_tokens })
    }

    fn write_response(&self, response: &EmbedResponse, request: &EmbedRequest) -> Vec<u8> {
        /// Cohere's body on Bedrock.
        #[derive(Serialize)]
        struct OutCohere<'a> {
            id: &'static str,
            embeddings: &'a [Vector],
            texts: &'a [String],
            response_type: &'static str,
        }
        /// Titan's body.
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct OutTitan<'a> {
            embedding: &'a Vector,
            embeddings_by_type: OutFloat<'a>,
            input_text_token_count: u64,
        }
        #[derive(Serialize)]
        struct OutFloat<'a> {
            float: &'a Vector,
        }
        static NO_VALUES: Vector = Vector::Floats(Vec::new());
        if request.form.as_deref() == Some(COHERE) {
            let body = OutCohere {
                id: "",
                embeddings: &response.vectors,
                texts: &request.inputs,
                response_type: "embeddings_floats",
            };
            return switchyard_codec::embed::write_reply(response, &body);
        }
        let vector = response.vectors.first().unwrap_or(&NO_VALUES);
        let body = OutTitan {
            embedding: vector,
            embeddings_by_type: OutFloat { float: vector },
            input_text_token_count: response.input_tokens.unwrap_or(0),
        };
        switchyard_codec::embed::write_reply(response, &body)
    }

    fn upstream_path(&self, model: &str) -> String {
        format!("/model/{}/invoke", switchyard_codec::path_segment(model))
    }

    /// A body passes as it came only in the form the lane's model takes.
    fn sends_as_came(&self, body: &[u8], model: &str) -> bool {
        let cohere_body = switchyard_codec::scan::top_level_value(body, "texts").ok().flatten().is_some();
        cohere_body == is_cohere(model)
    }

    fn caller_limit(&self, request: &EmbedRequest) -> usize {
        if request.form.as_deref() == Some(COHERE) {
            96
        } else {
            1
        }
    }

    fn token_header(&self) -> Option<&'static str> {
        Some(TOKEN_COUNT)
    }

    fn read_input_tokens(&self, body: &[u8], headers: &HeaderMap) -> Option<u64> {
        let header = headers.get(TOKEN_COUNT).and_then(|v| v.to_str().ok()?.trim().parse().ok());
        header.or_else(|| switchyard_codec::scan::member_u64(body, &["inputTextTokenCount"]))
    }

    fn max_inputs(&self, model: &str) -> usize {
        if is_cohere(model) {
            96
        } else {
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_picks_the_form_and_the_reply_takes_it() {
        let titan = BedrockEmbed.read_request(br#"{"inputText":"hello","dimensions":256}"#).unwrap();
        assert_eq!((titan.inputs.len(), titan.dimensions, titan.form.as_deref()), (1, Some(256), Some(TITAN)));
        let cohere = BedrockEmbed.read_request(br#"{"texts":["a","b"],"input_type":"search_query"}"#).unwrap();
        assert_eq!((cohere.inputs.len(), cohere.input_type), (2, Some(InputType::Query)));
        let reply = EmbedResponse {
            model: String::new(),
            vectors: vec![vec![0.5].into(), vec![0.25].into()],
            input_tokens: Some(4),
        };
        let out: Value = serde_json::from_slice(&BedrockEmbed.write_response(&reply, &cohere)).unwrap();
        assert_eq!(out["embeddings"], json!([[0.5], [0.25]]));
        let out: Value = serde_json::from_slice(&BedrockEmbed.write_response(&reply, &titan)).unwrap();
        assert_eq!((out["embedding"].clone(), out["inputTextTokenCount"].clone()), (json!([0.5]), json!(4)));
    }

    #[test]
    fn the_wire_model_picks_the_body_and_the_batch_size() {
        assert_eq!(BedrockEmbed.max_inputs("amazon.titan-embed-text-v2:0"), 1);
        assert_eq!(BedrockEmbed.max_inputs("cohere.embed-english-v3"), 96);
        let request = EmbedRequest {
            model: "cohere.embed-english-v3".into(),
            inputs: vec!["x".into()],
            dimensions: Some(8),
            ..EmbedRequest::default()
        };
        let encoded = BedrockEmbed.write_request(&request);
        let written: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(written["input_type"], "search_document");
        assert_eq!(encoded.dropped[0].field, Field::Dimensions, "cohere embed v3 takes no dimensions");
        let mut headers = HeaderMap::new();
        headers.insert(TOKEN_COUNT, "7".parse().unwrap());
        let reply = BedrockEmbed.read_response(br#"{"embeddings":{"float":[[1.0]]}}"#, &headers).unwrap();
        assert_eq!(reply.input_tokens, Some(7));
    }
}
