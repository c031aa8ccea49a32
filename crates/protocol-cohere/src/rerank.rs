//! Cohere rerank, the shape rerank servers share: callers post to
//! `/v2/rerank` or `/v1/rerank` (`query`, `documents` as strings or
//! objects, `top_n`, `return_documents`); lanes are asked at `/v2/rerank`
//! with the documents as text, and the gateway gives documents back itself.

use switchyard_codec::rerank::{
    read_common_request, read_common_response, write_common_request, write_common_response, RerankCodec,
};
use switchyard_codec::{scan, DecodeError, Encoded};
use switchyard_ir::{Protocol, RerankRequest, RerankResponse};

/// Cohere's rerank.
pub(crate) struct CohereRerank;

impl RerankCodec for CohereRerank {
    fn read_request(&self, body: &[u8]) -> Result<RerankRequest, DecodeError> {
        read_common_request(body, Protocol::Cohere, &[])
    }

    fn write_request(&self, request: &RerankRequest) -> Encoded {
        write_common_request(request, Protocol::Cohere, Some(&request.model))
    }

    fn read_response(&self, body: &[u8]) -> Result<RerankResponse, DecodeError> {
        read_common_response(body)
    }

    fn write_response(&self, response: &RerankResponse, request: &RerankRequest) -> Vec<u8> {
        serde_json::to_vec(&write_common_response(response, request, true)).unwrap_or_default()
    }

    fn upstream_path(&self, _model: &str) -> String {
        "/v2/rerank".to_owned()
    }

    fn read_search_units(&self, body: &[u8]) -> Option<u64> {
        scan::member_u64(body, &["meta", "billed_units", "search_units"])
    }

    /// v2 takes text documents only, and gives none back: a body with
    /// objects or `return_documents` is written again.
    fn sends_as_came(&self, body: &[u8], _model: &str) -> bool {
        let objects = scan::top_level_value(body, "documents").ok().flatten().is_none_or(|d| d.contains(&b'{'));
        !objects && scan::top_level_value(body, "return_documents").ok().flatten().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_v2_shaped_body_goes_as_it_came() {
        assert!(CohereRerank.sends_as_came(br#"{"model":"r","query":"q","documents":["a"]}"#, "m"));
        assert!(!CohereRerank.sends_as_came(br#"{"model":"r","query":"q","documents":[{"text":"a"}]}"#, "m"));
        assert!(!CohereRerank.sends_as_came(br#"{"query":"q","documents":["a"],"return_documents":true}"#, "m"));
    }
}
