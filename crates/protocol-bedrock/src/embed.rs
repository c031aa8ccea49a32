//! Bedrock embeddings through `InvokeModel` (`POST /model/{id}/invoke`),
//! in the two body forms Bedrock's embedding models take:
//! - Amazon Titan text v2: `{inputText, dimensions, normalize}` replying
//!   `{embedding, inputTextTokenCount}`, one text a call (a batch is split);
//! - Cohere embed: `{texts, input_type, truncate, embedding_types,
//!   output_dimension}` (`output_dimension` only to Embed v4: v3 refuses
//!   the key) replying `{embeddings}`, a list (`embeddings_floats`) or, when
//!   the request named its `embedding_types`, by type
//!   (`embeddings_by_type`), with the token count in the
//!   `X-Amzn-Bedrock-Input-Token-Count` header; up to 96 texts a call.
//!
//! A caller's body picks its form (`inputText` or `texts`, and whether it
//! named its embedding types) and the reply takes the same one; a lane's
//! wire model picks the form it is sent (`cohere.embed-*` is Cohere's,
//! every other model Titan's).

use http::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use switchyard_codec::embed::{input_type_or_document, vector_of, EmbedCodec};
use switchyard_codec::embed_by_type::{types_to_ask, ByType, OutByType};
use switchyard_codec::{DecodeError, Encoded};
use switchyard_ir::{DropReason, Dropped, EmbedRequest, EmbedResponse, Field, InputType, Quantized, Truncate, Vector};

/// Bedrock's embeddings.
pub(crate) struct BedrockEmbed;

/// The reply form of a caller that sent a Titan body.
const TITAN: &str = "titan";
/// The reply form of a caller that sent a Cohere body without
/// `embedding_types` (a list of vectors, `embeddings_floats`).
const COHERE: &str = "cohere";
/// The reply form of a caller that sent a Cohere body naming its
/// `embedding_types` (vectors by type, `embeddings_by_type`), followed by
/// the types it named: `cohere:float,int8`.
const COHERE_BY_TYPE: &str = "cohere:";

/// Whether a caller's form is one of Cohere's.
fn is_cohere_form(form: Option<&str>) -> bool {
    form.is_some_and(|form| form == COHERE || form.starts_with(COHERE_BY_TYPE))
}

/// The header Bedrock counts a Cohere body's input tokens in.
const TOKEN_COUNT: &str = "x-amzn-bedrock-input-token-count";

/// Whether `model` takes Cohere's body (else Titan's).
pub(crate) fn is_cohere(model: &str) -> bool {
    model.split(['.', ':', '/']).any(|part| part == "cohere")
}

/// Whether a Cohere model takes `output_dimension` (Embed v4 does; v3
/// embeds at its one size and refuses the key).
pub(crate) fn takes_output_dimension(model: &str) -> bool {
    model.contains("embed-v4")
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
    #[serde(default)]
    embedding_types: Option<Vec<String>>,
    #[serde(default)]
    output_dimension: Option<u32>,
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
        // Integer and binary types are Cohere's own quantisations of its
        // vectors: asked of a lane of Cohere's models, reported by others.
        let types = cohere.embedding_types.unwrap_or_default();
        if let Some(other) = types.iter().find(|t| t.as_str() != "float" && Quantized::parse(t).is_none()) {
            return Err(DecodeError::invalid(
                "embedding_types",
                format!("`{other}` is not an embedding type: float, int8, uint8, binary or ubinary"),
            ));
        }
        let form = match types.is_empty() {
            true => COHERE.to_owned(),
            false => format!("{COHERE_BY_TYPE}{}", types.join(",")),
        };
        Ok(EmbedRequest {
            quantized: types.iter().filter_map(|t| Quantized::parse(t)).collect(),
            inputs: cohere.texts,
            dimensions: cohere.output_dimension,
            input_type: cohere.input_type.as_deref().map(cohere_input_type).transpose()?,
            truncate,
            form: Some(form),
            ..EmbedRequest::default()
        })
    }

    fn write_request(&self, request: &EmbedRequest) -> Encoded {
        let mut dropped = Vec::new();
        if request.title.is_some() {
            dropped.push(Dropped::new(Field::EmbedTitle, DropReason::Unsupported));
        }
        let body = if is_cohere(&request.model) {
            let mut body = json!({
                "texts": request.inputs,
                "input_type": cohere_input_type_name(input_type_or_document(request.input_type)),
                "embedding_types": types_to_ask(&request.quantized),
            });
            match request.dimensions {
                Some(dimensions) if takes_output_dimension(&request.model) => {
                    body["output_dimension"] = json!(dimensions);
                }
                Some(_) => dropped.push(Dropped::new(Field::Dimensions, DropReason::Capability)),
                None => {}
            }
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
            if !request.quantized.is_empty() {
                dropped.push(Dropped::new(Field::Encoding, DropReason::Unsupported));
            }
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
        let wire: Wire = serde_json::from_slice(body)?;
        let header_tokens = headers.get(TOKEN_COUNT).and_then(|v| v.to_str().ok()?.trim().parse().ok());
        if let Some(embedding) = wire.embedding {
            let tokens = wire.input_text_token_count.or(header_tokens);
            return Ok(EmbedResponse {
                model: String::new(),
                vectors: vec![vector_of(embedding)?],
                input_tokens: tokens,
                quantized: Vec::new(),
            });
        }
        let embeddings = wire.embeddings.ok_or_else(|| DecodeError::Json("the reply holds no embedding".into()))?;
        let (vectors, quantized) = if embeddings.get().starts_with('{') {
            ByType::read(embeddings.get())?
        } else {
            let list: Vec<Box<RawValue>> = serde_json::from_str(embeddings.get())?;
            (list.into_iter().map(vector_of).collect::<Result<_, _>>()?, Vec::new())
        };
        Ok(EmbedResponse { model: String::new(), vectors, input_tokens: header_tokens, quantized })
    }

    fn write_response(&self, response: &EmbedResponse, request: &EmbedRequest) -> Vec<u8> {
        /// Cohere's body on Bedrock: its vectors a list, or by type.
        #[derive(Serialize)]
        struct OutCohere<'a, E: Serialize> {
            id: &'static str,
            embeddings: E,
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
        if let Some(types) = request.form.as_deref().and_then(|form| form.strip_prefix(COHERE_BY_TYPE)) {
            let body = OutCohere {
                id: "",
                embeddings: OutByType::of(response, types.split(',')),
                texts: &request.inputs,
                response_type: "embeddings_by_type",
            };
            return switchyard_codec::embed::write_reply(response, &body);
        }
        if request.form.as_deref() == Some(COHERE) {
            let body = OutCohere {
                id: "",
                embeddings: response.vectors.as_slice(),
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

    /// A body passes as it came only in the form the lane's model takes,
    /// and without a key the model refuses (`output_dimension` to Embed v3:
    /// it is written again, left out and reported).
    fn sends_as_came(&self, body: &[u8], model: &str) -> bool {
        let has = |key: &str| switchyard_codec::scan::top_level_value(body, key).ok().flatten().is_some();
        let cohere_body = has("texts");
        cohere_body == is_cohere(model) && !(cohere_body && !takes_output_dimension(model) && has("output_dimension"))
    }

    fn caller_limit(&self, request: &EmbedRequest) -> usize {
        if is_cohere_form(request.form.as_deref()) {
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
            quantized: Vec::new(),
        };
        let out: Value = serde_json::from_slice(&BedrockEmbed.write_response(&reply, &cohere)).unwrap();
        assert_eq!(out["embeddings"], json!([[0.5], [0.25]]));
        let out: Value = serde_json::from_slice(&BedrockEmbed.write_response(&reply, &titan)).unwrap();
        assert_eq!((out["embedding"].clone(), out["inputTextTokenCount"].clone()), (json!([0.5]), json!(4)));
    }

    /// A Cohere body naming its types is answered by type, as Bedrock's
    /// Cohere models answer it; its `output_dimension` is read, and sent
    /// on to Embed v4 (v3 refuses the key: reported instead); a quantised
    /// type is refused, since only floats are served.
    #[test]
    fn cohere_types_and_dimensions_are_carried() {
        let body = br#"{"texts":["a"],"input_type":"search_query","embedding_types":["float"],"output_dimension":256}"#;
        let request = BedrockEmbed.read_request(body).unwrap();
        assert_eq!((request.dimensions, request.form.as_deref()), (Some(256), Some("cohere:float")));
        let reply = EmbedResponse { vectors: vec![vec![0.5].into()], ..EmbedResponse::default() };
        let out: Value = serde_json::from_slice(&BedrockEmbed.write_response(&reply, &request)).unwrap();
        assert_eq!(
            (out["embeddings"].clone(), out["response_type"].clone()),
            (json!({"float": [[0.5]]}), json!("embeddings_by_type"))
        );
        let v4 = EmbedRequest { model: "cohere.embed-v4:0".into(), ..request.clone() };
        let encoded = BedrockEmbed.write_request(&v4);
        let written: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!((written["output_dimension"].clone(), encoded.dropped.len()), (json!(256), 0));
        let v3 = EmbedRequest { model: "cohere.embed-english-v3".into(), ..request };
        let encoded = BedrockEmbed.write_request(&v3);
        let written: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert!(written.get("output_dimension").is_none(), "{written}");
        assert_eq!(encoded.dropped, vec![Dropped::new(Field::Dimensions, DropReason::Capability)]);
        assert!(BedrockEmbed.read_request(br#"{"texts":["a"],"embedding_types":["base64"]}"#).is_err());
        assert!(BedrockEmbed.sends_as_came(body, "cohere.embed-v4:0"));
        assert!(!BedrockEmbed.sends_as_came(body, "cohere.embed-english-v3"), "v3 refuses output_dimension");
        assert!(BedrockEmbed.sends_as_came(br#"{"texts":["a"]}"#, "cohere.embed-english-v3"));
    }

    /// Cohere's quantised forms: asked of a Cohere model beside floats,
    /// read from its reply by type and written for the caller who named
    /// them; a Titan model cannot make them, reported.
    #[test]
    fn quantised_forms_reach_cohere_models_only() {
        let request = BedrockEmbed.read_request(br#"{"texts":["a"],"embedding_types":["int8"]}"#).unwrap();
        assert_eq!(request.quantized, vec![Quantized::Int8]);
        let cohere = EmbedRequest { model: "cohere.embed-english-v3".into(), ..request.clone() };
        let written: Value = serde_json::from_slice(&BedrockEmbed.write_request(&cohere).body).unwrap();
        assert_eq!(written["embedding_types"], json!(["float", "int8"]));
        let titan = EmbedRequest { model: "amazon.titan-embed-text-v2:0".into(), ..request.clone() };
        assert_eq!(
            BedrockEmbed.write_request(&titan).dropped,
            vec![Dropped::new(Field::Encoding, DropReason::Unsupported)]
        );
        let reply = BedrockEmbed
            .read_response(
                br#"{"embeddings":{"float":[[0.5]],"int8":[[64]]},"response_type":"embeddings_by_type"}"#,
                &HeaderMap::new(),
            )
            .unwrap();
        assert_eq!(reply.quantized, vec![(Quantized::Int8, vec![vec![64]])]);
        let out: Value = serde_json::from_slice(&BedrockEmbed.write_response(&reply, &request)).unwrap();
        assert_eq!(out["embeddings"], json!({"int8": [[64]]}), "only the types named");
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
