//! The readers of operations beyond chat under whatever a caller sends:
//! the multipart scan (and its model splice, which must scan again to the
//! same parts), every protocol's embeddings, image, rerank and token-count
//! readers (an image request written back for a lane, and split by what
//! one call makes), and the vendor-fake replies they read back. None may
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_protocol::form;
use switchyard_protocol::ir::Protocol;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    if selector & 0x80 != 0 {
        if let Ok(parts) = form::parts(rest, "b0und") {
            if let Some(model) = parts.iter().find(|p| p.name == "model") {
                let spliced = form::splice(rest, model.value.clone(), "wire-model");
                let again = form::parts(&spliced, "b0und").map(|p| p.len());
                assert_eq!(again, Ok(parts.len()), "a splice keeps every part");
            }
        }
        return;
    }
    let codec = switchyard_protocol::codec(Protocol::ALL[usize::from(selector) % Protocol::ALL.len()]);
    if let Some(embed) = codec.embed() {
        if let Ok(request) = embed.read_request(rest) {
            let _ = embed.write_request(&request);
        }
        let _ = embed.read_response(rest, &http::HeaderMap::new());
        let _ = embed.read_input_tokens(rest, &http::HeaderMap::new());
        let _ = embed.sends_as_came(rest, "cohere.embed-english-v3");
    }
    if let Some(image) = codec.image() {
        if let Ok(request) = image.read_request(rest) {
            let model = switchyard_protocol::image::ImageModel { max_images: Some(4), negative_prompt: Some(false) };
            let _ = image.write_request(&request, &model);
            if let Ok(reply) = image.read_response(rest, &http::HeaderMap::new()) {
                let _ = image.write_response(&reply, &request);
            }
        }
        let _ = image.read_response(rest, &http::HeaderMap::new());
        let _ = image.sends_as_came(rest, "nova-canvas");
    }
    if let Some(rerank) = codec.rerank() {
        if let Ok(request) = rerank.read_request(rest) {
            let _ = rerank.write_request(&request);
        }
        let _ = rerank.read_response(rest);
        let _ = rerank.sends_as_came(rest, "m");
    }
    if let Some(count) = codec.count() {
        if let Ok(chat) = count.chat_body(rest) {
            let _ = count.count_body(&chat, "m");
        }
        let _ = count.read_count(rest);
    }
});
