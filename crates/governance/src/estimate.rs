//! How much a request may cost, before any vendor counts it: an
//! upper-leaning estimate of its prompt from the body's bytes (one pass, no
//! JSON tree), and the bounded worst case admission reserves for. Text
//! counts at about three bytes a token (tokenizers average near four for
//! English; the margin covers code and most other scripts). A string is
//! inline media (a fixed, generous image cost rather than text) only when
//! it is the value of one of the protocol's own media members
//! (`source.data`, `inlineData.data`, an `image_url` data URL): a prompt
//! that merely looks like base64 is text. Settlement replaces the estimate
//! with the vendor's own count.
//!
//! Every number a caller sends is bounded here before it reaches
//! arithmetic, a store or a script: see [`worst_case`].

use crate::admission::Estimate;
pub use crate::admission::{MAX_CHOICES, MAX_OUTPUT_TOKENS, MAX_REQUEST_COST, MAX_REQUEST_TOKENS};
use crate::money::{Price, Tokens};

/// Tokens an inline image or file is reserved at (vendors charge a few
/// hundred to a couple of thousand tokens per image).
pub const INLINE_MEDIA_TOKENS: u64 = 2_000;

/// A media member's value shorter than this is text (a URL, a file id).
const MEDIA_MIN_BYTES: usize = 1_024;

/// Estimated prompt tokens of a JSON request body whose inline media sits
/// under the member names `media` (the protocol's own).
pub fn input_tokens(body: &[u8], media: &[&str]) -> u64 {
    let mut text_bytes: u64 = 0;
    let mut pieces: u64 = 0;
    // The last string followed by a colon: the key a value belongs to.
    let mut key: &[u8] = b"";
    let mut at = 0;
    while let Some(open) = body[at..].iter().position(|b| *b == b'"') {
        let start = at + open + 1;
        // Find the closing quote, skipping escapes.
        let mut end = start;
        while end < body.len() {
            match body[end] {
                b'"' => break,
                b'\\' => end += 2,
                _ => end += 1,
            }
        }
        let end = end.min(body.len());
        let text = &body[start..end];
        at = (end + 1).min(body.len());
        let after = body[at..].iter().position(|b| !b.is_ascii_whitespace()).map(|i| body[at + i]);
        if after == Some(b':') {
            key = text;
            continue;
        }
        let is_media = text.len() > MEDIA_MIN_BYTES && media.iter().any(|m| m.as_bytes() == key) && is_inline(text);
        if is_media {
            pieces += 1;
        } else {
            text_bytes += text.len() as u64;
        }
    }
    text_bytes.div_ceil(3).saturating_add(pieces.saturating_mul(INLINE_MEDIA_TOKENS))
}

/// Base64, or a data URL of base64 (`data:image/png;base64,...`).
fn is_inline(text: &[u8]) -> bool {
    let payload = match text.strip_prefix(b"data:") {
        Some(url) => match url.iter().take(128).position(|b| *b == b',') {
            Some(comma) => &url[comma + 1..],
            None => return false,
        },
        None => text,
    };
    payload.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_'))
}

/// The most a request may cost, as admission reserves it: its prompt
/// estimate plus `max_tokens` (or `default_max_tokens`) for each of its
/// `choices`, each side at its dearest kind ([`Price::dearest`]: a prompt
/// may all be written to an hour-long cache, an answer all reasoning).
/// Every figure is clamped ([`MAX_OUTPUT_TOKENS`],
/// [`MAX_CHOICES`], [`MAX_REQUEST_TOKENS`], [`MAX_REQUEST_COST`]), so no
/// caller's number can overflow a sum or reach a store unbounded.
pub fn worst_case(
    input: u64,
    max_tokens: Option<u64>,
    default_max_tokens: u64,
    choices: u64,
    price: &Price,
) -> Estimate {
    let per_reply = max_tokens.unwrap_or(default_max_tokens).min(MAX_OUTPUT_TOKENS);
    let output = per_reply.saturating_mul(choices.clamp(1, MAX_CHOICES));
    let tokens = Tokens {
        input: input.min(MAX_REQUEST_TOKENS),
        output: output.min(MAX_REQUEST_TOKENS),
        requests: 1,
        ..Tokens::default()
    };
    Estimate::bounded(tokens.total(), price.dearest().cost(&tokens))
}

/// The most units beyond tokens one request may be reserved for.
pub const MAX_REQUEST_UNITS: u64 = 1 << 32;

/// The most an operation billed by units may cost (rerank, images, speech,
/// transcription): its prompt estimate, its worst-case `units` (clamped to
/// [`MAX_REQUEST_UNITS`]) and one request, at `price`; no output tokens.
pub fn worst_case_units(input: u64, units: u64, price: &Price) -> Estimate {
    let tokens = Tokens {
        input: input.min(MAX_REQUEST_TOKENS),
        units: units.min(MAX_REQUEST_UNITS),
        requests: 1,
        ..Tokens::default()
    };
    Estimate::bounded(tokens.total(), price.cost(&tokens))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENAI_MEDIA: &[&str] = &["url", "file_data", "data"];

    #[test]
    fn text_counts_by_bytes_and_media_by_the_piece() {
        let chat = br#"{"model":"m","messages":[{"role":"user","content":"hello there, how are you today?"}]}"#;
        let estimate = input_tokens(chat, OPENAI_MEDIA);
        // About 9 tokens of content plus values: the estimate leans high, not low.
        assert!((10..40).contains(&estimate), "{estimate}");
        let image = format!(
            r#"{{"messages":[{{"role":"user","content":[{{"type":"image_url","image_url":{{"url":"data:image/png;base64,{}"}}}}]}}]}}"#,
            "QUJD".repeat(50_000)
        );
        let estimate = input_tokens(image.as_bytes(), OPENAI_MEDIA);
        assert!(estimate < INLINE_MEDIA_TOKENS + 50, "a 200 KB image is one image, not 66k tokens: {estimate}");
        assert!(estimate >= INLINE_MEDIA_TOKENS);
        assert_eq!(input_tokens(b"not json", OPENAI_MEDIA), 0);
        assert_eq!(input_tokens(br#"{"a":"unterminated"#, OPENAI_MEDIA), 4, "12 bytes of value");
    }

    #[test]
    fn text_that_looks_like_base64_is_text() {
        // A 300 KB prompt of words joined with `-`: every character is
        // base64url, but it is the message's content, not a media member.
        let words = vec!["lorem"; 50_000].join("-");
        let body = format!(r#"{{"messages":[{{"role":"user","content":"{words}"}}]}}"#);
        let estimate = input_tokens(body.as_bytes(), OPENAI_MEDIA);
        assert!(estimate >= words.len() as u64 / 3, "{estimate} for {} bytes of text", words.len());
        // A long link under a media member is text too.
        let link = format!(r#"{{"image_url":{{"url":"https://example.com/{words}"}}}}"#);
        assert!(input_tokens(link.as_bytes(), OPENAI_MEDIA) >= words.len() as u64 / 3);
        // And a real base64 payload under a member of another protocol is text.
        let anthropic = format!(r#"{{"source":{{"type":"base64","data":"{}"}}}}"#, "QUJD".repeat(1000));
        assert!(input_tokens(anthropic.as_bytes(), &["bytes"]) > 1000);
        assert_eq!(input_tokens(anthropic.as_bytes(), &["data"]), INLINE_MEDIA_TOKENS + 2);
    }

    #[test]
    fn the_worst_case_is_bounded_whatever_the_caller_sends() {
        let price = Price { input_utok: 1e9, output_utok: 1e9, ..Price::default() };
        let huge = worst_case(u64::MAX, Some(u64::MAX), 4096, u64::MAX, &price);
        assert!(huge.tokens <= 2 * MAX_REQUEST_TOKENS);
        assert_eq!(huge.cost, MAX_REQUEST_COST);
        let free = worst_case(10, Some(1_000_000_000_000_000_000), 4096, 1, &Price::default());
        assert_eq!(free.tokens, 10 + MAX_OUTPUT_TOKENS);
        assert_eq!(free.cost, 0);
        // Each reply is reserved for: `n` multiplies the output, not the prompt.
        let cheap = Price { input_utok: 1.0, output_utok: 1.0, ..Price::default() };
        let one = worst_case(100, Some(50), 4096, 1, &cheap);
        let hundred = worst_case(100, Some(50), 4096, 100, &cheap);
        assert_eq!((one.tokens, hundred.tokens), (150, 5_100));
        assert_eq!(hundred.cost, 5_100_000);
        assert_eq!(worst_case(0, None, 4096, 0, &cheap).tokens, 4096, "no n is one reply");
        // Units are bounded as tokens are, and a unit price is reserved for.
        let per_unit = Price { per_unit_usd: 1e9, per_request_usd: 1e9, ..Price::default() };
        assert_eq!(worst_case_units(u64::MAX, u64::MAX, &per_unit).cost, MAX_REQUEST_COST);
        let rerank = Price { per_unit_usd: 0.002, ..Price::default() };
        assert_eq!(worst_case_units(0, 3, &rerank).cost, 6_000_000);
    }
}
