//! Bedrock rerank through `InvokeModel` (`POST /model/{id}/invoke`):
//! `{query, documents, top_n}`, with `api_version: 2` for Cohere's rerank
//! models; the reply's `results[]` of `index` and `relevance_score`.

use switchyard_codec::rerank::{
    read_common_request, read_common_response, write_common_request, write_common_response, RerankCodec,
};
use switchyard_codec::{scan, DecodeError, Encoded};
use switchyard_ir::{Protocol, RerankRequest, RerankResponse};

use crate::embed::is_cohere;

/// Bedrock's rerank.
pub(crate) struct BedrockRerank;

/// The API version Cohere's rerank models on Bedrock require.
const COHERE_API_VERSION: u32 = 2;

impl RerankCodec for BedrockRerank {
    fn read_request(&self, body: &[u8]) -> Result<RerankRequest, DecodeError> {
        read_common_request(body, Protocol::Bedrock, &["api_version"])
    }

    fn write_request(&self, request: &RerankRequest) -> Encoded {
        let mut encoded = write_common_request(request, Protocol::Bedrock, None);
        if is_cohere(&request.model) {
            if let Ok(serde_json::Value::Object(mut body)) = serde_json::from_slice(&encoded.body) {
                body.insert("api_version".to_owned(), COHERE_API_VERSION.into());
                encoded.body = serde_json::to_vec(&body).unwrap_or_default();
            }
        }
        encoded
    }

    fn read_response(&self, body: &[u8]) -> Result<RerankResponse, DecodeError> {
        read_common_response(body)
    }

    fn write_response(&self, response: &RerankResponse, request: &RerankRequest) -> Vec<u8> {
        serde_json::to_vec(&write_common_response(response, request, false)).unwrap_or_default()
    }

    fn upstream_path(&self, model: &str) -> String {
        format!("/model/{}/invoke", switchyard_codec::path_segment(model))
    }

    /// A body passes as it came when it names the API version exactly
    /// when the lane's model needs one.
    fn sends_as_came(&self, body: &[u8], model: &str) -> bool {
        let versioned = scan::top_level_value(body, "api_version").ok().flatten().is_some();
        versioned == is_cohere(model) && scan::top_level_value(body, "return_documents").ok().flatten().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cohere_models_are_asked_with_their_api_version() {
        let request = RerankRequest {
            model: "cohere.rerank-v3-5:0".into(),
            query: "q".into(),
            documents: vec![switchyard_ir::Document::Text("a".into())],
            ..RerankRequest::default()
        };
        let body: serde_json::Value = serde_json::from_slice(&BedrockRerank.write_request(&request).body).unwrap();
        assert_eq!(body, serde_json::json!({"query": "q", "documents": ["a"], "api_version": 2}));
        let amazon = RerankRequest { model: "amazon.rerank-v1:0".into(), ..request };
        let body: serde_json::Value = serde_json::from_slice(&BedrockRerank.write_request(&amazon).body).unwrap();
        assert!(body.get("api_version").is_none());
    }
}
