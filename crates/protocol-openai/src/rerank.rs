//! Rerank on OpenAI-compatible servers (vLLM, TEI, Jina and others serve
//! `POST /v1/rerank`): the shape rerank servers share, as a lane.

use switchyard_codec::rerank::{
    read_common_request, read_common_response, write_common_request, write_common_response, RerankCodec,
};
use switchyard_codec::{scan, DecodeError, Encoded};
use switchyard_ir::{Protocol, RerankRequest, RerankResponse};

/// OpenAI-compatible rerank.
pub(crate) struct OpenAiRerank;

impl RerankCodec for OpenAiRerank {
    fn read_request(&self, body: &[u8]) -> Result<RerankRequest, DecodeError> {
        read_common_request(body, Protocol::OpenAi, &[])
    }

    fn write_request(&self, request: &RerankRequest) -> Encoded {
        write_common_request(request, Protocol::OpenAi, Some(&request.model))
    }

    fn read_response(&self, body: &[u8]) -> Result<RerankResponse, DecodeError> {
        read_common_response(body)
    }

    fn write_response(&self, response: &RerankResponse, request: &RerankRequest) -> Vec<u8> {
        serde_json::to_vec(&write_common_response(response, request, false)).unwrap_or_default()
    }

    fn upstream_path(&self, _model: &str) -> String {
        "/v1/rerank".to_owned()
    }

    fn read_search_units(&self, body: &[u8]) -> Option<u64> {
        scan::member_u64(body, &["meta", "billed_units", "search_units"])
    }
}
