//! Gemini embeddings: `:embedContent` (one `content`) and
//! `:batchEmbedContents` (`requests[]`, each with its `model`, `content`,
//! `taskType`, `title` and `outputDimensionality`); replies
//! `{embedding: {values}}` and `{embeddings: [{values}]}`. A caller gets
//! the form it sent. Lanes are always asked through `:batchEmbedContents`
//! (up to 100 requests a call). Gemini returns floats only; the gateway
//! makes base64 for callers that want it. Gemini has no truncation choice.

use http::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use switchyard_codec::embed::{input_type_or_document, vector_of, EmbedCodec};
use switchyard_codec::{DecodeError, Encoded};
use switchyard_ir::{DropReason, Dropped, EmbedRequest, EmbedResponse, Field, InputType, Vector};

/// Gemini's embeddings.
pub(crate) struct GeminiEmbed;

/// Gemini's batch endpoint takes up to 100 requests.
const MAX_INPUTS: usize = 100;

/// The reply form of a caller that sent one `content`.
const SINGLE: &str = "single";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireRequest {
    #[serde(default)]
    model: Option<String>,
    content: Option<WireContent>,
    #[serde(default, alias = "task_type")]
    task_type: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default, alias = "output_dimensionality")]
    output_dimensionality: Option<u32>,
    #[serde(default)]
    requests: Option<Vec<WireRequest>>,
}

#[derive(Deserialize)]
struct WireContent {
    #[serde(default)]
    parts: Vec<WirePart>,
}

#[derive(Deserialize)]
struct WirePart {
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireResponse {
    #[serde(default)]
    embedding: Option<WireValues>,
    #[serde(default)]
    embeddings: Option<Vec<WireValues>>,
    #[serde(default)]
    usage_metadata: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireValues {
    values: Box<RawValue>,
}

/// A reply as written for the caller: typed, so a lane's vectors are
/// copied as their bytes.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OutResponse<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    embedding: Option<OutValues<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    embeddings: Option<Vec<OutValues<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage_metadata: Option<OutUsage>,
}

#[derive(Serialize)]
struct OutValues<'a> {
    values: &'a Vector,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OutUsage {
    prompt_token_count: u64,
    total_token_count: u64,
}

/// The values of a reply that has none.
static NO_VALUES: Vector = Vector::Floats(Vec::new());

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireUsage {
    #[serde(default)]
    prompt_token_count: Option<u64>,
}

fn task_type(input_type: InputType) -> &'static str {
    match input_type {
        InputType::Query => "RETRIEVAL_QUERY",
        InputType::Document => "RETRIEVAL_DOCUMENT",
        InputType::Classification => "CLASSIFICATION",
        InputType::Clustering => "CLUSTERING",
        InputType::Similarity => "SEMANTIC_SIMILARITY",
    }
}

fn input_type(task: &str) -> Result<InputType, DecodeError> {
    Ok(match task {
        "RETRIEVAL_QUERY" | "QUESTION_ANSWERING" | "CODE_RETRIEVAL_QUERY" => InputType::Query,
        "RETRIEVAL_DOCUMENT" | "FACT_VERIFICATION" => InputType::Document,
        "CLASSIFICATION" => InputType::Classification,
        "CLUSTERING" => InputType::Clustering,
        "SEMANTIC_SIMILARITY" => InputType::Similarity,
        other => return Err(DecodeError::invalid("taskType", format!("`{other}` is not a task type"))),
    })
}

fn text_of(content: Option<WireContent>) -> Result<String, DecodeError> {
    let content = content.ok_or_else(|| DecodeError::invalid("content", "`content` is required"))?;
    let text: Vec<String> = content.parts.into_iter().filter_map(|p| p.text).collect();
    if text.is_empty() {
        return Err(DecodeError::invalid("content", "`content` holds no text to embed"));
    }
    Ok(text.join(" "))
}

impl EmbedCodec for GeminiEmbed {
    fn read_request(&self, body: &[u8]) -> Result<EmbedRequest, DecodeError> {
        let wire: WireRequest = serde_json::from_slice(body)?;
        let (single, items) = match wire.requests {
            Some(items) if items.is_empty() => {
                return Err(DecodeError::invalid("requests", "`requests` is empty: give at least one"));
            }
            Some(items) => (false, items),
            None => (true, vec![WireRequest { requests: None, ..wire }]),
        };
        let first = &items[0];
        let mut request = EmbedRequest {
            model: first.model.clone().unwrap_or_default().trim_start_matches("models/").to_owned(),
            dimensions: first.output_dimensionality,
            input_type: first.task_type.as_deref().map(input_type).transpose()?,
            title: first.title.clone(),
            form: single.then(|| SINGLE.to_owned()),
            ..EmbedRequest::default()
        };
        for item in items {
            request.inputs.push(text_of(item.content)?);
        }
        Ok(request)
    }

    fn write_request(&self, request: &EmbedRequest) -> Encoded {
        let mut dropped = Vec::new();
        // Cohere's quantised forms: only Cohere's models make them.
        if !request.quantized.is_empty() {
            dropped.push(Dropped::new(Field::Encoding, DropReason::Unsupported));
        }
        if request.truncate.is_some() {
            dropped.push(Dropped::new(Field::Truncate, DropReason::Unsupported));
        }
        let model = format!("models/{}", request.model.trim_start_matches("models/"));
        let task = task_type(input_type_or_document(request.input_type));
        let requests: Vec<Value> = request
            .inputs
            .iter()
            .map(|text| {
                let mut item = json!({"model": model, "content": {"parts": [{"text": text}]}, "taskType": task});
                if let Some(dimensions) = request.dimensions {
                    item["outputDimensionality"] = json!(dimensions);
                }
                if let Some(title) = &request.title {
                    item["title"] = json!(title);
                }
                item
            })
            .collect();
        Encoded { body: serde_json::to_vec(&json!({"requests": requests})).unwrap_or_default(), dropped }
    }

    fn read_response(&self, body: &[u8], _headers: &HeaderMap) -> Result<EmbedResponse, DecodeError> {
        let wire: WireResponse = serde_json::from_slice(body)?;
        let vectors = match (wire.embeddings, wire.embedding) {
            (Some(many), _) => many.into_iter().map(|v| vector_of(v.values)).collect::<Result<_, _>>()?,
            (None, Some(one)) => vec![vector_of(one.values)?],
            (None, None) => return Err(DecodeError::Json("the reply holds no embedding".into())),
        };
        let input_tokens = wire.usage_metadata.and_then(|u| u.prompt_token_count);
        Ok(EmbedResponse { model: String::new(), vectors, input_tokens, quantized: Vec::new() })
    }

    fn write_response(&self, response: &EmbedResponse, request: &EmbedRequest) -> Vec<u8> {
        let single = request.form.as_deref() == Some(SINGLE);
        let body = OutResponse {
            embedding: single.then(|| OutValues { values: response.vectors.first().unwrap_or(&NO_VALUES) }),
            embeddings: (!single).then(|| response.vectors.iter().map(|values| OutValues { values }).collect()),
            usage_metadata: response
                .input_tokens
                .map(|tokens| OutUsage { prompt_token_count: tokens, total_token_count: tokens }),
        };
        switchyard_codec::embed::write_reply(response, &body)
    }

    fn upstream_path(&self, model: &str) -> String {
        let id = switchyard_codec::path_segment(model.trim_start_matches("models/"));
        format!("/v1beta/models/{id}:batchEmbedContents")
    }

    fn max_inputs(&self, _model: &str) -> usize {
        MAX_INPUTS
    }

    fn read_input_tokens(&self, body: &[u8], _headers: &HeaderMap) -> Option<u64> {
        let usage = switchyard_codec::scan::top_level_value_from_end(body, "usageMetadata")?;
        switchyard_codec::scan::member_u64(usage, &["promptTokenCount"])
    }

    /// Each of a batch's requests names its model, which must be the
    /// lane's: the body is always written again.
    fn sends_as_came(&self, _body: &[u8], _model: &str) -> bool {
        false
    }

    /// A batch caller reads the lane's batch reply as it came; a single
    /// `content` caller reads another form.
    fn replies_as_came(&self, body: &[u8], _model: &str) -> bool {
        switchyard_codec::scan::top_level_value(body, "requests").ok().flatten().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_request_forms_read_and_the_reply_takes_the_callers_form() {
        let batch = br#"{"requests":[{"model":"models/e","content":{"parts":[{"text":"a"}]},"taskType":"RETRIEVAL_QUERY","outputDimensionality":4},{"model":"models/e","content":{"parts":[{"text":"b"}]}}]}"#;
        let request = GeminiEmbed.read_request(batch).unwrap();
        assert_eq!((request.model.as_str(), request.inputs.len()), ("e", 2));
        assert_eq!((request.input_type, request.dimensions), (Some(InputType::Query), Some(4)));
        let single = GeminiEmbed.read_request(br#"{"content":{"parts":[{"text":"one"}]}}"#).unwrap();
        assert_eq!(single.form.as_deref(), Some(SINGLE));
        let reply = EmbedResponse { vectors: vec![vec![0.5].into()], ..EmbedResponse::default() };
        let out: Value = serde_json::from_slice(&GeminiEmbed.write_response(&reply, &single)).unwrap();
        assert_eq!(out, json!({"embedding": {"values": [0.5]}}));
        assert!(GeminiEmbed.read_request(br#"{"requests":[]}"#).is_err());
    }

    #[test]
    fn a_lane_is_asked_in_batch_with_a_document_task_by_default() {
        let request = EmbedRequest { model: "e".into(), inputs: vec!["x".into()], ..EmbedRequest::default() };
        let written: Value = serde_json::from_slice(&GeminiEmbed.write_request(&request).body).unwrap();
        assert_eq!(written["requests"][0]["taskType"], "RETRIEVAL_DOCUMENT");
        assert_eq!(written["requests"][0]["model"], "models/e");
        assert_eq!(GeminiEmbed.upstream_path("e"), "/v1beta/models/e:batchEmbedContents");
    }
}
