//! Cohere v2 embeddings (`POST /v2/embed`): `texts`, `input_type`
//! (`search_document`, `search_query`, `classification`, `clustering`),
//! `embedding_types`, `output_dimension` and `truncate`; the reply's
//! `embeddings` by type and `meta.billed_units.input_tokens`. Lanes are
//! asked for floats (the gateway makes base64 itself) and, when no input
//! type is given, embed a document. Up to 96 texts a call. Integer and
//! binary types are Cohere's own quantisations: a lane of Cohere's models
//! (Cohere's API, Cohere on Bedrock) is asked for them and its vectors
//! carried; a lane of another protocol reports them unsent.

use http::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use switchyard_codec::embed::{input_type_or_document, vector_of, EmbedCodec};
use switchyard_codec::embed_by_type::{types_to_ask, ByType, OutByType, Read};
use switchyard_codec::{DecodeError, Encoded};
use switchyard_ir::{
    DropReason, Dropped, EmbedRequest, EmbedResponse, Encoding, Field, InputType, Protocol, Quantized, Truncate,
};

/// Cohere's embeddings.
pub(crate) struct CohereEmbed;

/// Cohere takes up to 96 texts a call.
const MAX_INPUTS: usize = 96;

#[derive(Deserialize)]
struct WireRequest {
    #[serde(default)]
    model: String,
    #[serde(default)]
    texts: Option<Vec<String>>,
    #[serde(default)]
    input_type: Option<String>,
    #[serde(default)]
    embedding_types: Option<Vec<String>>,
    #[serde(default)]
    output_dimension: Option<u32>,
    #[serde(default)]
    truncate: Option<String>,
    #[serde(flatten)]
    rest: serde_json::Map<String, Value>,
}

#[derive(Deserialize)]
struct WireResponse {
    embeddings: Box<RawValue>,
    #[serde(default)]
    meta: Option<WireMeta>,
}

#[derive(Deserialize)]
struct WireMeta {
    #[serde(default)]
    billed_units: Option<WireUnits>,
}

#[derive(Deserialize)]
struct WireUnits {
    #[serde(default)]
    input_tokens: Option<f64>,
}

/// Cohere's name of an input type.
pub(crate) fn input_type_name(input_type: InputType) -> &'static str {
    match input_type {
        InputType::Query => "search_query",
        InputType::Document | InputType::Similarity => "search_document",
        InputType::Classification => "classification",
        InputType::Clustering => "clustering",
    }
}

/// The input type Cohere calls `name`.
pub(crate) fn input_type_of(name: &str) -> Result<InputType, DecodeError> {
    Ok(match name {
        "search_query" => InputType::Query,
        "search_document" => InputType::Document,
        "classification" => InputType::Classification,
        "clustering" => InputType::Clustering,
        other => return Err(DecodeError::invalid("input_type", format!("`{other}` is not an input type for text"))),
    })
}

/// Cohere's name of a truncation.
pub(crate) fn truncate_name(truncate: Truncate) -> &'static str {
    match truncate {
        Truncate::None => "NONE",
        Truncate::Start => "START",
        Truncate::End => "END",
    }
}

/// The truncation Cohere calls `name`.
pub(crate) fn truncate_of(name: &str) -> Result<Truncate, DecodeError> {
    Ok(match name {
        "NONE" => Truncate::None,
        "START" => Truncate::Start,
        "END" => Truncate::End,
        other => return Err(DecodeError::invalid("truncate", format!("`{other}` is not NONE, START or END"))),
    })
}

/// Reads Cohere's `embeddings`: by type (`{float: [...], int8: [...]}`) or
/// a plain list; each float vector's bytes are kept as the lane wrote them.
pub(crate) fn read_vectors(embeddings: &RawValue) -> Result<Read, DecodeError> {
    let text = embeddings.get();
    if text.starts_with('[') {
        let list: Vec<Box<RawValue>> = serde_json::from_str(text)?;
        return Ok((list.into_iter().map(vector_of).collect::<Result<_, _>>()?, Vec::new()));
    }
    if !text.starts_with('{') {
        return Err(DecodeError::Json("`embeddings` is neither a list nor an object".into()));
    }
    ByType::read(text)
}

/// A reply as written for the caller: typed, so a lane's vectors are
/// copied as their bytes.
#[derive(Serialize)]
struct OutResponse<'a> {
    id: &'static str,
    embeddings: OutByType<'a>,
    texts: &'a [String],
    meta: Value,
    response_type: &'static str,
}

impl EmbedCodec for CohereEmbed {
    fn read_request(&self, body: &[u8]) -> Result<EmbedRequest, DecodeError> {
        let wire: WireRequest = serde_json::from_slice(body)?;
        let inputs = wire.texts.unwrap_or_default();
        if inputs.is_empty() {
            return Err(DecodeError::invalid("texts", "`texts` is empty: give at least one text"));
        }
        let types = wire.embedding_types.unwrap_or_else(|| vec!["float".to_owned()]);
        if let Some(other) =
            types.iter().find(|t| !matches!(t.as_str(), "float" | "base64") && Quantized::parse(t).is_none())
        {
            return Err(DecodeError::invalid(
                "embedding_types",
                format!("`{other}` is not an embedding type: float, base64, int8, uint8, binary or ubinary"),
            ));
        }
        let quantized = types.iter().filter_map(|t| Quantized::parse(t)).collect();
        let encoding = if types.iter().all(|t| t == "base64") { Encoding::Base64 } else { Encoding::Float };
        let mut request = EmbedRequest {
            model: wire.model,
            inputs,
            dimensions: wire.output_dimension,
            input_type: wire.input_type.as_deref().map(input_type_of).transpose()?,
            truncate: wire.truncate.as_deref().map(truncate_of).transpose()?,
            encoding,
            quantized,
            form: Some(types.join(",")),
            ..EmbedRequest::default()
        };
        for (key, value) in wire.rest {
            request.extra.insert(Protocol::Cohere, key, value);
        }
        Ok(request)
    }

    fn write_request(&self, request: &EmbedRequest) -> Encoded {
        let mut dropped = Vec::new();
        if request.title.is_some() {
            dropped.push(Dropped::new(Field::EmbedTitle, DropReason::Unsupported));
        }
        let mut body = json!({
            "model": request.model,
            "texts": request.inputs,
            "input_type": input_type_name(input_type_or_document(request.input_type)),
            "embedding_types": types_to_ask(&request.quantized),
        });
        if let Some(dimensions) = request.dimensions {
            body["output_dimension"] = json!(dimensions);
        }
        if let Some(truncate) = request.truncate {
            body["truncate"] = json!(truncate_name(truncate));
        }
        if let (Some(extra), Value::Object(out)) = (request.extra.for_target(Protocol::Cohere, &mut dropped), &mut body)
        {
            out.extend(extra.clone());
        }
        Encoded { body: serde_json::to_vec(&body).unwrap_or_default(), dropped }
    }

    fn read_response(&self, body: &[u8], _headers: &HeaderMap) -> Result<EmbedResponse, DecodeError> {
        let wire: WireResponse = serde_json::from_slice(body)?;
        let input_tokens = wire.meta.and_then(|m| m.billed_units).and_then(|u| u.input_tokens).map(|n| n as u64);
        let (vectors, quantized) = read_vectors(&wire.embeddings)?;
        Ok(EmbedResponse { model: String::new(), vectors, input_tokens, quantized })
    }

    fn write_response(&self, response: &EmbedResponse, request: &EmbedRequest) -> Vec<u8> {
        let types = request.form.as_deref().unwrap_or("float");
        let embeddings = OutByType::of(response, types.split(','));
        let body = OutResponse {
            id: "",
            embeddings,
            texts: &request.inputs,
            meta: json!({"api_version": {"version": "2"}, "billed_units": {"input_tokens": response.input_tokens.unwrap_or(0)}}),
            response_type: "embeddings_by_type",
        };
        switchyard_codec::embed::write_reply(response, &body)
    }

    fn upstream_path(&self, _model: &str) -> String {
        "/v2/embed".to_owned()
    }

    fn read_input_tokens(&self, body: &[u8], _headers: &HeaderMap) -> Option<u64> {
        let meta = switchyard_codec::scan::top_level_value_from_end(body, "meta")?;
        switchyard_codec::scan::member_u64(meta, &["billed_units", "input_tokens"])
    }

    fn max_inputs(&self, _model: &str) -> usize {
        MAX_INPUTS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_its_options_and_a_lane_is_asked_for_floats() {
        let body = br#"{"model":"e","texts":["a"],"input_type":"search_query","embedding_types":["base64"],"output_dimension":256,"truncate":"END"}"#;
        let request = CohereEmbed.read_request(body).unwrap();
        assert_eq!(request.input_type, Some(InputType::Query));
        assert_eq!((request.encoding, request.truncate), (Encoding::Base64, Some(Truncate::End)));
        let written: Value = serde_json::from_slice(&CohereEmbed.write_request(&request).body).unwrap();
        assert_eq!(written["embedding_types"], json!(["float"]));
        assert_eq!(written["input_type"], "search_query");
        assert!(CohereEmbed.read_request(br#"{"model":"e","texts":["a"],"embedding_types":["int4"]}"#).is_err());
        // Cohere's quantised forms are asked of the lane beside floats.
        let int8 = CohereEmbed.read_request(br#"{"model":"e","texts":["a"],"embedding_types":["int8"]}"#).unwrap();
        assert_eq!(int8.quantized, vec![Quantized::Int8]);
        let written: Value = serde_json::from_slice(&CohereEmbed.write_request(&int8).body).unwrap();
        assert_eq!(written["embedding_types"], json!(["float", "int8"]));
        assert!(CohereEmbed.read_request(br#"{"model":"e","texts":[]}"#).is_err());
    }

    #[test]
    fn a_reply_reads_by_type_and_writes_each_type_asked() {
        let body = br#"{"id":"x","embeddings":{"float":[[0.5,0.25]]},"meta":{"billed_units":{"input_tokens":2}}}"#;
        let reply = CohereEmbed.read_response(body, &HeaderMap::new()).unwrap();
        assert_eq!(reply.vectors, vec![vec![0.5, 0.25]]);
        assert_eq!(reply.input_tokens, Some(2));
        let request = EmbedRequest { form: Some("float,base64".into()), ..EmbedRequest::default() };
        let out: Value = serde_json::from_slice(&CohereEmbed.write_response(&reply, &request)).unwrap();
        assert_eq!(out["embeddings"]["float"], json!([[0.5, 0.25]]));
        assert_eq!(
            switchyard_codec::embed::from_base64(out["embeddings"]["base64"][0].as_str().unwrap()).unwrap(),
            vec![0.5, 0.25]
        );
    }
}
