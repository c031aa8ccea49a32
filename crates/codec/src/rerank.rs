//! Rerank in a protocol: the reader and writer pair of its rerank requests
//! and replies ([`RerankCodec`]). Documents are sent to every lane as text
//! (a structured document's `text`, else its JSON); a caller that asks for
//! its documents back gets them from the gateway, which holds them, so
//! `return_documents` is carried whatever the lane.

use serde::Deserialize;
use serde_json::{json, Map, Value};
use switchyard_ir::{Document, Protocol, Ranked, RerankRequest, RerankResponse};

use crate::{DecodeError, Encoded};

/// The most documents one rerank request may carry.
pub const MAX_DOCUMENTS: usize = 10_000;

/// Documents a search unit covers (Cohere's unit: one query over up to 100
/// documents), for a lane that bills none itself.
pub const DOCUMENTS_PER_SEARCH_UNIT: u64 = 100;

/// A protocol's rerank: its wire forms, read and written.
pub trait RerankCodec: Send + Sync {
    /// Reads a caller's rerank request.
    fn read_request(&self, body: &[u8]) -> Result<RerankRequest, DecodeError>;
    /// Writes `request` (whose `model` is the lane's wire model) for an
    /// upstream of this protocol; what it cannot carry is reported.
    fn write_request(&self, request: &RerankRequest) -> Encoded;
    /// Reads an upstream's reply.
    fn read_response(&self, body: &[u8]) -> Result<RerankResponse, DecodeError>;
    /// Writes `response` for the caller that sent `request`.
    fn write_response(&self, response: &RerankResponse, request: &RerankRequest) -> Vec<u8>;
    /// Path and query of the upstream endpoint for `model`.
    fn upstream_path(&self, model: &str) -> String;
    /// The search units a reply bills, read cheaply (a passthrough's).
    fn read_search_units(&self, body: &[u8]) -> Option<u64> {
        self.read_response(body).ok()?.search_units
    }
    /// Whether a caller's `body` in this protocol may go as it came to a
    /// lane of this protocol serving `model` (a body `model` is spliced),
    /// and its reply come back as it came.
    fn sends_as_came(&self, body: &[u8], model: &str) -> bool {
        let _ = (body, model);
        true
    }
}

/// The search units `documents` documents take, for a lane that says none.
pub fn search_units_for(documents: usize) -> u64 {
    (documents as u64).div_ceil(DOCUMENTS_PER_SEARCH_UNIT).max(1)
}

/// Reads a `documents` list: strings, or objects (kept whole to be given back).
pub fn read_documents(value: serde_json::Value) -> Result<Vec<Document>, DecodeError> {
    let serde_json::Value::Array(items) = value else {
        return Err(DecodeError::invalid("documents", "`documents` must be a list"));
    };
    if items.is_empty() {
        return Err(DecodeError::invalid("documents", "`documents` is empty: give at least one"));
    }
    if items.len() > MAX_DOCUMENTS {
        return Err(DecodeError::invalid(
            "documents",
            format!("{} documents is more than the {MAX_DOCUMENTS} one request may carry", items.len()),
        ));
    }
    items
        .into_iter()
        .map(|item| match item {
            serde_json::Value::String(text) => Ok(Document::Text(text)),
            serde_json::Value::Object(object) => Ok(Document::Object(object)),
            _ => Err(DecodeError::invalid("documents", "each document is a string or an object")),
        })
        .collect()
}

/// The document at `index` as a reply gives it back: `{"text": ...}` for
/// text, the caller's own object for an object.
pub fn returned_document(request: &RerankRequest, index: usize) -> Option<serde_json::Value> {
    Some(match request.documents.get(index)? {
        Document::Text(text) => serde_json::json!({ "text": text }),
        Document::Object(object) => serde_json::Value::Object(object.clone()),
    })
}

/// The documents as the texts a lane ranks.
pub fn document_texts(request: &RerankRequest) -> Vec<String> {
    request.documents.iter().map(Document::text).collect()
}

/// The request members rerank dialects share.
#[derive(Deserialize)]
struct WireRequest {
    #[serde(default)]
    model: String,
    query: String,
    documents: Value,
    #[serde(default)]
    top_n: Option<u32>,
    #[serde(default)]
    return_documents: Option<bool>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// Reads the shape rerank dialects share (`model`, `query`, `documents`,
/// `top_n`, `return_documents`); every other member is kept for a lane of
/// `protocol`, except those in `known`, which the dialect owns.
pub fn read_common_request(body: &[u8], protocol: Protocol, known: &[&str]) -> Result<RerankRequest, DecodeError> {
    let wire: WireRequest = serde_json::from_slice(body)?;
    if wire.query.is_empty() {
        return Err(DecodeError::invalid("query", "`query` is empty"));
    }
    let mut request = RerankRequest {
        model: wire.model,
        query: wire.query,
        documents: read_documents(wire.documents)?,
        top_n: wire.top_n,
        return_documents: wire.return_documents.unwrap_or(false),
        ..RerankRequest::default()
    };
    for (key, value) in wire.rest {
        if !known.contains(&key.as_str()) {
            request.extra.insert(protocol, key, value);
        }
    }
    Ok(request)
}

/// The request body rerank servers share, for a lane of `protocol`:
/// `model` (unless `None`), `query`, the documents as text, `top_n`.
pub fn write_common_request(request: &RerankRequest, protocol: Protocol, model: Option<&str>) -> Encoded {
    let mut dropped = Vec::new();
    let mut body = json!({"query": request.query, "documents": document_texts(request)});
    if let Some(model) = model {
        body["model"] = json!(model);
    }
    if let Some(top_n) = request.top_n {
        body["top_n"] = json!(top_n);
    }
    if let (Some(extra), Value::Object(object)) = (request.extra.for_target(protocol, &mut dropped), &mut body) {
        for (key, value) in extra {
            object.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    Encoded { body: serde_json::to_vec(&body).unwrap_or_default(), dropped }
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    results: Vec<WireResult>,
    #[serde(default)]
    meta: Option<Value>,
}

#[derive(Deserialize)]
struct WireResult {
    index: usize,
    relevance_score: f64,
}

/// Reads the reply rerank servers share: `results[]` of `index` and
/// `relevance_score`, most relevant first, and Cohere's
/// `meta.billed_units.search_units` when present.
pub fn read_common_response(body: &[u8]) -> Result<RerankResponse, DecodeError> {
    let wire: WireResponse = serde_json::from_slice(body)?;
    let search_units = wire.meta.as_ref().and_then(|m| m.pointer("/billed_units/search_units")).and_then(Value::as_f64);
    Ok(RerankResponse {
        id: wire.id.unwrap_or_default(),
        model: wire.model.unwrap_or_default(),
        results: wire.results.into_iter().map(|r| Ranked { index: r.index, score: r.relevance_score }).collect(),
        search_units: search_units.map(|units| units.max(0.0).ceil() as u64),
    })
}

/// The reply rerank servers share: `{id, results: [{index,
/// relevance_score, document?}]}`, documents given back when the caller
/// asked, and with `meta` (Cohere's) `meta: {billed_units: {search_units}}`.
pub fn write_common_response(response: &RerankResponse, request: &RerankRequest, meta: bool) -> Value {
    let results: Vec<Value> = response
        .results
        .iter()
        .map(|ranked| {
            let mut result = json!({"index": ranked.index, "relevance_score": ranked.score});
            if request.return_documents {
                if let Some(document) = returned_document(request, ranked.index) {
                    result["document"] = document;
                }
            }
            result
        })
        .collect();
    let mut body = json!({"id": response.id, "results": results});
    if meta {
        let units = response.search_units.unwrap_or_else(|| search_units_for(request.documents.len()));
        body["meta"] = json!({"api_version": {"version": "2"}, "billed_units": {"search_units": units}});
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_read_as_text_or_objects_and_are_bounded() {
        let read = read_documents(serde_json::json!(["a", {"text": "b", "id": 7}])).unwrap();
        assert_eq!(read[0], Document::Text("a".into()));
        assert_eq!(read[1].text(), "b");
        assert!(read_documents(serde_json::json!([])).is_err());
        assert!(read_documents(serde_json::json!([1])).is_err());
        assert!(read_documents(serde_json::json!(vec!["x"; MAX_DOCUMENTS + 1])).is_err());
        assert_eq!((search_units_for(1), search_units_for(100), search_units_for(101)), (1, 1, 2));
    }

    #[test]
    fn the_common_shape_reads_and_writes_with_documents_given_back() {
        let body = br#"{"model":"r","query":"q","documents":["a",{"text":"b","id":7}],"top_n":1,"return_documents":true,"max_tokens_per_doc":512}"#;
        let request = read_common_request(body, Protocol::Cohere, &[]).unwrap();
        assert_eq!((request.top_n, request.return_documents, request.documents.len()), (Some(1), true, 2));
        let lane: Value =
            serde_json::from_slice(&write_common_request(&request, Protocol::Cohere, Some("m")).body).unwrap();
        assert_eq!(
            lane,
            json!({"model": "m", "query": "q", "documents": ["a", "b"], "top_n": 1, "max_tokens_per_doc": 512})
        );
        let other = write_common_request(&request, Protocol::Bedrock, None);
        assert_eq!(other.dropped.len(), 1, "a Cohere member is dropped for another protocol");
        let reply = read_common_response(
            br#"{"id":"x","results":[{"index":1,"relevance_score":0.75}],"meta":{"billed_units":{"search_units":1}}}"#,
        )
        .unwrap();
        assert_eq!((reply.results[0].index, reply.results[0].score, reply.search_units), (1, 0.75, Some(1)));
        let out = write_common_response(&reply, &request, true);
        assert_eq!(out["results"][0]["document"], json!({"text": "b", "id": 7}));
        assert_eq!(out["meta"]["billed_units"]["search_units"], 1);
    }
}
