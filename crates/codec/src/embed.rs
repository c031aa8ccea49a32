//! Embeddings in a protocol: the reader and writer pair of its embed
//! requests and replies ([`EmbedCodec`]), and the vector forms every
//! protocol shares (JSON floats, base64 of little-endian float32s).
//!
//! A vector crosses protocols as the lane produced it: a JSON array of
//! numbers is carried as its bytes (`Vector::Json`: never parsed, written
//! back byte for byte); base64 is decoded to the float32s it holds. Base64
//! the caller asks for is made by the gateway from the numbers when the
//! lane sends JSON, so the encoding is never lost.

use base64::Engine;
use http::HeaderMap;
use serde_json::value::RawValue;
use switchyard_ir::{EmbedRequest, EmbedResponse, InputType, Vector};

use crate::{DecodeError, Encoded};

/// A protocol's embeddings: its wire forms, read and written.
pub trait EmbedCodec: Send + Sync {
    /// Reads a caller's embeddings request (a model in the path is the
    /// ingress's to set).
    fn read_request(&self, body: &[u8]) -> Result<EmbedRequest, DecodeError>;
    /// Writes `request` (whose `model` is the lane's wire model) for an
    /// upstream of this protocol; what it cannot carry is reported.
    fn write_request(&self, request: &EmbedRequest) -> Encoded;
    /// Reads an upstream's reply (Bedrock counts tokens in a header).
    fn read_response(&self, body: &[u8], headers: &HeaderMap) -> Result<EmbedResponse, DecodeError>;
    /// Writes `response` for the caller that sent `request`, in the form
    /// and encoding it asked for.
    fn write_response(&self, response: &EmbedResponse, request: &EmbedRequest) -> Vec<u8>;
    /// Path and query of the upstream endpoint for `model`.
    fn upstream_path(&self, model: &str) -> String;
    /// The most inputs one upstream call may carry for `model`: a longer
    /// batch is split, and the vectors are put back in input order.
    fn max_inputs(&self, model: &str) -> usize;
    /// The most inputs a caller of this protocol may send in one request
    /// (the vendor's own limit, as the caller's SDK knows it).
    fn caller_limit(&self, request: &EmbedRequest) -> usize {
        self.max_inputs(&request.model)
    }
    /// The prompt tokens a reply reports, read cheaply (a passthrough's).
    fn read_input_tokens(&self, body: &[u8], headers: &HeaderMap) -> Option<u64> {
        self.read_response(body, headers).ok()?.input_tokens
    }
    /// Whether a caller's `body` in this protocol may go as it came to a
    /// lane of this protocol serving `model` (a body `model` is spliced by
    /// the gateway). Never so when it would need splitting: same-protocol
    /// batch limits are the vendor's own.
    fn sends_as_came(&self, body: &[u8], model: &str) -> bool {
        let _ = (body, model);
        true
    }
    /// Whether a lane's reply to a request translated from `body` is
    /// already in the form its caller reads (and so passes back as it came).
    fn replies_as_came(&self, body: &[u8], model: &str) -> bool {
        self.sends_as_came(body, model)
    }
    /// The response header that carries the input token count, in a
    /// protocol that counts there (Bedrock's).
    fn token_header(&self) -> Option<&'static str> {
        None
    }
}

/// A vector as base64 of little-endian float32s (OpenAI's and Cohere's
/// `base64`).
pub fn to_base64(vector: &[f64]) -> String {
    let mut bytes = Vec::with_capacity(vector.len() * 4);
    for value in vector {
        bytes.extend_from_slice(&(*value as f32).to_le_bytes());
    }
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The float32s a base64 vector holds.
pub fn from_base64(text: &str) -> Result<Vec<f64>, DecodeError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|err| DecodeError::Json(format!("embedding is not base64: {err}")))?;
    if bytes.len() % 4 != 0 {
        return Err(DecodeError::Json("a base64 embedding is not a whole number of float32s".into()));
    }
    Ok(bytes.chunks_exact(4).map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect())
}

/// A vector as a reply member holds it: a JSON array of numbers (kept as
/// its bytes) or a base64 string of float32s.
pub fn vector_of(raw: Box<RawValue>) -> Result<Vector, DecodeError> {
    if raw.get().starts_with('"') {
        let text: String = serde_json::from_str(raw.get())?;
        return from_base64(&text).map(Vector::Floats);
    }
    Vector::from_json(raw)
        .ok_or_else(|| DecodeError::Json("an embedding is neither a list of numbers nor base64".into()))
}

/// `vector` as base64 of float32s (empty when a lane's array held
/// something other than numbers: nothing to encode).
pub fn base64_of(vector: &Vector) -> String {
    vector.floats().map(|floats| to_base64(&floats)).unwrap_or_default()
}

/// A reply written into one buffer sized for its vectors (a reply is
/// mostly their bytes: no regrowth copies megabytes again).
pub fn write_reply(response: &EmbedResponse, body: &impl serde::Serialize) -> Vec<u8> {
    let vectors: usize = response
        .vectors
        .iter()
        .map(|v| match v {
            Vector::Json(raw) => raw.get().len(),
            // A float32 as base64 or as shortest JSON text: at most 24 bytes.
            Vector::Floats(floats) => floats.len() * 24,
        })
        .sum();
    let mut out = Vec::with_capacity(vectors + 512);
    match serde_json::to_writer(&mut out, body) {
        Ok(()) => out,
        Err(_) => Vec::new(),
    }
}

/// The input type a text is embedded as when the caller says none: a
/// document (what a RAG system embeds most).
pub fn input_type_or_document(input_type: Option<InputType>) -> InputType {
    input_type.unwrap_or(InputType::Document)
}

/// The inputs of `request` split into batches of at most `max` (at least 1).
pub fn batches(request: &EmbedRequest, max: usize) -> Vec<EmbedRequest> {
    let max = max.max(1);
    if request.inputs.len() <= max {
        return vec![request.clone()];
    }
    request.inputs.chunks(max).map(|inputs| EmbedRequest { inputs: inputs.to_vec(), ..request.clone() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_holds_the_float32s_exactly() {
        let vector = [0.1f32, -2.5, 1e-7, 3.4e38].map(f64::from);
        assert_eq!(from_base64(&to_base64(&vector)).unwrap(), vector);
        assert!(from_base64("AAA=").is_err(), "three bytes are not a float32");
    }

    #[test]
    fn a_json_vector_keeps_its_bytes_and_base64_is_decoded() {
        let raw = |text: &str| RawValue::from_string(text.to_owned()).unwrap();
        let json = vector_of(raw("[0.10000000149011612, -2.5e-3 ,1]")).unwrap();
        assert_eq!(serde_json::to_string(&json).unwrap(), "[0.10000000149011612, -2.5e-3 ,1]");
        assert_eq!(json, vec![0.10000000149011612, -2.5e-3, 1.0]);
        let encoded = base64_of(&json);
        let decoded = vector_of(raw(&format!("\"{encoded}\""))).unwrap();
        assert_eq!(decoded, vec![f64::from(0.1f32), f64::from(-2.5e-3f32), 1.0]);
        assert!(vector_of(raw("{}")).is_err());
    }

    #[test]
    fn batches_keep_input_order() {
        let request = EmbedRequest { inputs: (0..7).map(|n| n.to_string()).collect(), ..EmbedRequest::default() };
        let split = batches(&request, 3);
        let joined: Vec<String> = split.iter().flat_map(|r| r.inputs.clone()).collect();
        assert_eq!(split.len(), 3);
        assert_eq!(joined, request.inputs);
        assert_eq!(batches(&request, 0).len(), 7);
    }
}
