//! The vendor fake for operations beyond chat, answering in the lane's own
//! protocol and form, derived from the request alone: an embedding is a
//! vector of float32-exact values hashed from its text (`dimensions` long,
//! 8 by default), so the same text always embeds the same and a test can
//! compare vectors exactly across protocols and encodings. The chat fake's
//! `[mock:status=N]` directive in any input answers that error.

use http::{HeaderName, HeaderValue, StatusCode};
use serde_json::{json, Value};
use switchyard_codec::Codec;
use switchyard_ir::{
    EmbedResponse, ErrorInfo, ErrorKind, Image, ImageResponse, Operation, Quantized, Ranked, RerankResponse,
};

use crate::mock::{directive_error, error, fnv1a, json_headers};
use crate::{full_body, UpstreamResponse};

/// The longest vector the fake makes.
const MAX_DIMENSIONS: u32 = 4096;

/// Answers one upstream call of `operation` in `codec`'s protocol
/// (`path_model`: the model from the URL, for path protocols;
/// `content_type`: the body's, for a multipart form).
pub fn respond(
    codec: &dyn Codec,
    operation: Operation,
    path_model: Option<&str>,
    content_type: Option<&str>,
    body: &[u8],
) -> UpstreamResponse {
    match operation {
        Operation::Embed => embed(codec, path_model, body),
        Operation::Rerank => rerank(codec, path_model, body),
        Operation::Moderation => moderation(codec, body),
        Operation::Image => image(codec, path_model, body),
        Operation::Speech => speech(codec, body),
        Operation::Transcription => transcription(codec, content_type.unwrap_or(""), body),
        Operation::CountTokens => count(codec, body),
        Operation::Chat | Operation::Completion | Operation::Realtime | Operation::Live => {
            let info = ErrorInfo::new(ErrorKind::NotFound, "chat, realtime and live are other fakes'");
            error(codec, &info.with_status(404))
        }
    }
}

/// A JSON body, or the caller's 400 in `codec`'s shape.
fn json_body(codec: &dyn Codec, body: &[u8]) -> Result<Value, UpstreamResponse> {
    serde_json::from_slice(body)
        .map_err(|err| error(codec, &ErrorInfo::new(ErrorKind::InvalidRequest, format!("malformed json: {err}"))))
}

fn ok_json(body: &Value) -> UpstreamResponse {
    UpstreamResponse { status: StatusCode::OK, headers: json_headers(), body: full_body(body.to_string()) }
}

/// Flags an input that says `[mock:flag]`.
fn moderation(codec: &dyn Codec, body: &[u8]) -> UpstreamResponse {
    let request = match json_body(codec, body) {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    let inputs: Vec<String> = match &request["input"] {
        Value::String(text) => vec![text.clone()],
        Value::Array(items) => items.iter().map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned)).collect(),
        _ => return error(codec, &ErrorInfo::new(ErrorKind::InvalidRequest, "`input` is required")),
    };
    let results: Vec<Value> = inputs
        .iter()
        .map(|text| {
            let flagged = text.contains("[mock:flag]");
            json!({"flagged": flagged, "categories": {"harassment": flagged}, "category_scores": {"harassment": if flagged { 0.9 } else { 0.001 }}})
        })
        .collect();
    ok_json(&json!({"id": format!("modr-{:016x}", fnv1a(body)), "model": request["model"], "results": results}))
}

/// A one-pixel PNG, base64.
pub const PIXEL_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/// The images asked for (a pixel each) in the lane's own protocol and
/// form, after the vendor's own checks (`mock_rules::refused_image`: the
/// members it does not know, more images than one call makes); an OpenAI
/// lane reports token usage as gpt-image-1 does, a Stability one its seeds.
fn image(codec: &dyn Codec, path_model: Option<&str>, body: &[u8]) -> UpstreamResponse {
    let Some(images) = codec.image() else {
        return error(codec, &ErrorInfo::new(ErrorKind::NotFound, "this protocol makes no images").with_status(404));
    };
    let mut request = match images.read_request(body) {
        Ok(request) => request,
        Err(err) => return error(codec, &err.to_error_info()),
    };
    if let Some(model) = path_model.filter(|m| !m.is_empty()) {
        model.clone_into(&mut request.model);
    }
    if let Some(info) = directive_error(&request.prompt) {
        return error(codec, &info);
    }
    if let Some(info) = crate::mock_rules::refused_image(codec.protocol(), &request.model, body) {
        return error(codec, &info);
    }
    let n = u64::from(request.n.unwrap_or(1).clamp(1, 10));
    let openai = codec.protocol() == switchyard_ir::Protocol::OpenAi;
    let response = ImageResponse {
        created: Some(1_700_000_000),
        images: (0..n)
            .map(|_| Image { b64: PIXEL_PNG.to_owned(), mime_type: Some("image/png".to_owned()), ..Image::default() })
            .collect(),
        input_tokens: openai.then(|| words(&request.prompt)),
        output_tokens: openai.then_some(272 * n),
        seeds: (0..n).map(|i| fnv1a(request.prompt.as_bytes()) % 4_294_967_295 + i).collect(),
    };
    ok_json_bytes(images.write_response(&response, &request))
}

fn ok_json_bytes(body: Vec<u8>) -> UpstreamResponse {
    UpstreamResponse { status: StatusCode::OK, headers: json_headers(), body: full_body(body) }
}

/// Audio bytes: an MP3 frame header, then the text spoken.
fn speech(codec: &dyn Codec, body: &[u8]) -> UpstreamResponse {
    let request = match json_body(codec, body) {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    let Some(input) = request["input"].as_str() else {
        return error(codec, &ErrorInfo::new(ErrorKind::InvalidRequest, "`input` is required"));
    };
    let (content_type, head): (&'static str, &[u8]) = match request["response_format"].as_str() {
        Some("wav") => ("audio/wav", b"RIFF"),
        Some("opus") => ("audio/ogg", b"OggS"),
        _ => ("audio/mpeg", b"ID3\x04"),
    };
    let mut headers = http::HeaderMap::new();
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    UpstreamResponse { status: StatusCode::OK, headers, body: full_body([head, input.as_bytes()].concat()) }
}

/// What a transcription of the form's file says: its size and the model
/// asked, and a second
/// of audio per 16,000 bytes; `response_format: text` answers plain text.
fn transcription(codec: &dyn Codec, content_type: &str, body: &[u8]) -> UpstreamResponse {
    let invalid = |message: String| error(codec, &ErrorInfo::new(ErrorKind::InvalidRequest, message));
    let Ok(boundary) = switchyard_codec::form::boundary(content_type) else {
        return invalid("content-type must be multipart/form-data".into());
    };
    let parts = match switchyard_codec::form::parts(body, boundary) {
        Ok(parts) => parts,
        Err(err) => return invalid(err.to_string()),
    };
    let Some(file) = parts.iter().find(|p| p.name == "file") else { return invalid("`file` is required".into()) };
    let bytes = file.value.len() as u64;
    let model = switchyard_codec::form::text_field(body, &parts, "model").unwrap_or("");
    let text = format!("{bytes} bytes of audio for {model}");
    if switchyard_codec::form::text_field(body, &parts, "response_format") == Some("text") {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
        return UpstreamResponse { status: StatusCode::OK, headers, body: full_body(text) };
    }
    ok_json(&json!({"text": text, "usage": {"type": "duration", "seconds": bytes.div_ceil(16_000)}}))
}

fn embed(codec: &dyn Codec, path_model: Option<&str>, body: &[u8]) -> UpstreamResponse {
    let Some(embed) = codec.embed() else {
        return error(codec, &ErrorInfo::new(ErrorKind::NotFound, "this protocol has no embeddings").with_status(404));
    };
    let mut request = match embed.read_request(body) {
        Ok(request) => request,
        Err(err) => return error(codec, &err.to_error_info()),
    };
    if let Some(model) = path_model.filter(|m| !m.is_empty()) {
        model.clone_into(&mut request.model);
    }
    if let Some(info) = request.inputs.iter().find_map(|text| directive_error(text)) {
        return error(codec, &info);
    }
    if let Some(info) = crate::mock_rules::refused_embed(codec.protocol(), &request.model, body) {
        return error(codec, &info);
    }
    let dimensions = request.dimensions.unwrap_or(8).clamp(1, MAX_DIMENSIONS);
    let response = EmbedResponse {
        model: request.model.clone(),
        vectors: request.inputs.iter().map(|text| vector(text, dimensions).into()).collect(),
        input_tokens: Some(request.inputs.iter().map(|text| words(text)).sum()),
        quantized: request
            .quantized
            .iter()
            .map(|form| (*form, request.inputs.iter().map(|text| quantize(&vector(text, dimensions), *form)).collect()))
            .collect(),
    };
    let mut headers = json_headers();
    if let (Some(name), Some(tokens)) = (embed.token_header(), response.input_tokens) {
        headers.insert(HeaderName::from_static(name), HeaderValue::from(tokens));
    }
    UpstreamResponse { status: StatusCode::OK, headers, body: full_body(embed.write_response(&response, &request)) }
}

fn rerank(codec: &dyn Codec, path_model: Option<&str>, body: &[u8]) -> UpstreamResponse {
    let Some(rerank) = codec.rerank() else {
        return error(codec, &ErrorInfo::new(ErrorKind::NotFound, "this protocol has no rerank").with_status(404));
    };
    let mut request = match rerank.read_request(body) {
        Ok(request) => request,
        Err(err) => return error(codec, &err.to_error_info()),
    };
    if let Some(model) = path_model.filter(|m| !m.is_empty()) {
        model.clone_into(&mut request.model);
    }
    if let Some(info) = directive_error(&request.query) {
        return error(codec, &info);
    }
    let mut results: Vec<Ranked> = request
        .documents
        .iter()
        .enumerate()
        .map(|(index, document)| Ranked { index, score: score(&request.query, &document.text()) })
        .collect();
    // Most relevant first; equal scores in document order.
    results.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.index.cmp(&b.index)));
    if let Some(top_n) = request.top_n {
        results.truncate(top_n as usize);
    }
    let response = RerankResponse {
        id: format!("rerank-{:016x}", fnv1a(body)),
        model: request.model.clone(),
        results,
        search_units: Some(switchyard_codec::rerank::search_units_for(request.documents.len())),
    };
    UpstreamResponse {
        status: StatusCode::OK,
        headers: json_headers(),
        body: full_body(rerank.write_response(&response, &request)),
    }
}

/// A document's relevance to a query: a multiple of 1/1024 in [0, 1],
/// hashed from both (exact in every encoding).
pub fn score(query: &str, document: &str) -> f64 {
    let hash = fnv1a(&[query.as_bytes(), &[0], document.as_bytes()].concat());
    (hash % 1025) as f64 / 1024.0
}

/// Answers a count request in `codec`'s protocol: one token a word of
/// every text the chat request holds, at least one.
pub fn count(codec: &dyn Codec, body: &[u8]) -> UpstreamResponse {
    let Some(counter) = codec.count() else {
        return error(codec, &ErrorInfo::new(ErrorKind::NotFound, "this protocol counts no tokens").with_status(404));
    };
    let request = match counter.chat_body(body).and_then(|chat| codec.read_request(&chat)) {
        Ok(request) => request,
        Err(err) => return error(codec, &err.to_error_info()),
    };
    UpstreamResponse {
        status: StatusCode::OK,
        headers: json_headers(),
        body: full_body(counter.write_count(count_words(&request))),
    }
}

/// The fake's count of a chat request: a token a word of its system text
/// and of every text block (at least one).
pub fn count_words(request: &switchyard_ir::Request) -> u64 {
    let system: u64 = request.system.iter().map(|b| words(&b.text)).sum();
    let messages: u64 = request
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .map(|block| match block {
            switchyard_ir::Block::Text(text) => words(&text.text),
            _ => 0,
        })
        .sum();
    (system + messages).max(1)
}

/// A text's vector: each value a multiple of 1/1024 in [-1, 1], exact in
/// float32 and so in every encoding.
pub fn vector(text: &str, dimensions: u32) -> Vec<f64> {
    let seed = fnv1a(text.as_bytes());
    (0..u64::from(dimensions))
        .map(|i| {
            let hash = fnv1a(&(seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_le_bytes());
            ((hash % 2049) as f64 - 1024.0) / 1024.0
        })
        .collect()
}

/// A vector in one of Cohere's quantised forms, as the fake makes it: int8
/// `round(v * 127)`, uint8 `round((v + 1) * 127.5)`, ubinary the signs
/// (`v > 0` a 1) packed eight to a byte from the high bit, binary the
/// same less 128.
pub fn quantize(vector: &[f64], form: Quantized) -> Vec<i64> {
    let bits = || {
        vector.chunks(8).map(|chunk| {
            chunk.iter().enumerate().fold(0_i64, |byte, (i, v)| if *v > 0.0 { byte | 1 << (7 - i) } else { byte })
        })
    };
    match form {
        Quantized::Int8 => vector.iter().map(|v| (v * 127.0).round() as i64).collect(),
        Quantized::Uint8 => vector.iter().map(|v| ((v + 1.0) * 127.5).round() as i64).collect(),
        Quantized::Ubinary => bits().collect(),
        Quantized::Binary => bits().map(|byte| byte - 128).collect(),
    }
}

/// The fake's token count: one per word, at least one per text.
fn words(text: &str) -> u64 {
    (text.split_whitespace().count() as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_stable_exact_in_float32_and_differ_by_text() {
        let a = vector("hello", 16);
        assert_eq!(a, vector("hello", 16));
        assert_ne!(a, vector("world", 16));
        assert!(a.iter().all(|v| f64::from(*v as f32) == *v && (-1.0..=1.0).contains(v)));
    }

    #[test]
    fn quantised_forms_stay_in_their_ranges() {
        let v = [1.0, -1.0, 0.5, 0.0, -0.25, 0.75, 0.1, -0.9, 0.3];
        assert_eq!(quantize(&v, Quantized::Int8), [127, -127, 64, 0, -32, 95, 13, -114, 38]);
        assert_eq!(quantize(&v, Quantized::Uint8)[..2], [255, 0]);
        assert_eq!(quantize(&v, Quantized::Ubinary), [0b1010_0110, 0b1000_0000]);
        assert_eq!(quantize(&v, Quantized::Binary), [0b1010_0110 - 128, 0]);
    }
}
