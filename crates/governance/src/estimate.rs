//! How many tokens a request's prompt will cost, before any vendor counts
//! it: an upper-leaning estimate from the body's bytes, cheap enough for
//! every request (one pass, no JSON tree). Text counts at about three bytes
//! a token (tokenizers average near four for English; the margin covers
//! code and most other scripts); a long base64 run (an inline image or
//! file) counts as a fixed, generous image cost rather than as text.
//! Settlement replaces the estimate with the vendor's own count.

/// Tokens an inline image or file is reserved at (vendors charge a few
/// hundred to a couple of thousand tokens per image).
pub const INLINE_MEDIA_TOKENS: u64 = 2_000;

/// A string longer than this made only of base64 characters is inline media.
const MEDIA_MIN_BYTES: usize = 1_024;

/// Estimated prompt tokens of a JSON request body.
pub fn input_tokens(body: &[u8]) -> u64 {
    let mut text_bytes: u64 = 0;
    let mut media: u64 = 0;
    let mut at = 0;
    while let Some(open) = memchr_quote(&body[at..]) {
        let start = at + open + 1;
        // Find the closing quote, skipping escapes.
        let mut end = start;
        let mut base64_only = true;
        while end < body.len() {
            match body[end] {
                b'"' => break,
                b'\\' => {
                    base64_only = false;
                    end += 2;
                    continue;
                }
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'+' | b'/' | b'=' | b'-' | b'_' => {}
                b':' | b';' | b',' if end - start < 64 => {} // a data-URL header
                _ => base64_only = false,
            }
            end += 1;
        }
        let len = end.min(body.len()) - start;
        if base64_only && len > MEDIA_MIN_BYTES {
            media += 1;
        } else {
            text_bytes += len as u64;
        }
        at = (end + 1).min(body.len());
    }
    text_bytes.div_ceil(3) + media * INLINE_MEDIA_TOKENS
}

fn memchr_quote(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|b| *b == b'"')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_counts_by_bytes_and_media_by_the_piece() {
        let chat = br#"{"model":"m","messages":[{"role":"user","content":"hello there, how are you today?"}]}"#;
        let estimate = input_tokens(chat);
        // About 9 tokens of content plus keys: the estimate leans high, not low.
        assert!((15..40).contains(&estimate), "{estimate}");
        let image = format!(
            r#"{{"messages":[{{"role":"user","content":[{{"type":"image_url","image_url":{{"url":"data:image/png;base64,{}"}}}}]}}]}}"#,
            "QUJD".repeat(50_000)
        );
        let estimate = input_tokens(image.as_bytes());
        assert!(estimate < INLINE_MEDIA_TOKENS + 50, "a 200 KB image is one image, not 66k tokens: {estimate}");
        assert!(estimate >= INLINE_MEDIA_TOKENS);
        assert_eq!(input_tokens(b"not json"), 0);
        assert_eq!(input_tokens(br#"{"a":"unterminated"#), 5, "13 bytes of strings");
    }
}
