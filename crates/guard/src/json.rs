//! A JSON body's string values rewritten in place, whatever the protocol:
//! the walk visits every string that is a value (never a key), unescaped,
//! with the key it belongs to, and writes back only the strings that
//! change; a body with nothing to change is not copied. Values of members
//! that carry no prose (media bytes, signatures, ids) are skipped.

use std::borrow::Cow;

/// Members whose string values are never prose: encoded media, signed
/// reasoning, identifiers, roles and types.
const SKIPPED: [&str; 14] = [
    "data",
    "bytes",
    "b64_json",
    "image_url",
    "signature",
    "thoughtSignature",
    "thought_signature",
    "encrypted_content",
    "id",
    "tool_call_id",
    "tool_use_id",
    "model",
    "role",
    "type",
];

/// Strings longer than this are not prose either (encoded media).
const MAX_STRING: usize = 1 << 20;

/// The body was not JSON the walk could follow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed json at byte {0}")]
pub struct Malformed(pub usize);

/// Calls `rewrite` with every prose string value of `body` (unescaped);
/// where it returns a new text, that string is replaced. `Ok(None)`: no
/// string changed. `rewrite` may stop the walk by returning `Err`.
pub fn rewrite_strings<E>(
    body: &[u8],
    mut rewrite: impl FnMut(&str) -> Result<Option<String>, E>,
) -> Result<Result<Option<Vec<u8>>, E>, Malformed> {
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut at = 0;
    // The key the next value belongs to, when it is one to skip.
    let mut skip_next = false;
    while at < body.len() {
        match body[at] {
            b'"' => {
                let end = string_end(body, at)?;
                let is_key = body[end..].iter().find(|b| !b.is_ascii_whitespace()) == Some(&b':');
                if is_key {
                    let key = &body[at + 1..end - 1];
                    skip_next = SKIPPED.iter().any(|s| s.as_bytes() == key);
                } else if !std::mem::take(&mut skip_next) && end - at <= MAX_STRING {
                    let raw = &body[at..end];
                    let text = unescape(raw).ok_or(Malformed(at))?;
                    if !text.starts_with("data:") {
                        match rewrite(&text) {
                            Err(stop) => return Ok(Err(stop)),
                            Ok(Some(new)) => {
                                let buffer = out.get_or_insert_with(|| Vec::with_capacity(body.len() + 64));
                                buffer.extend_from_slice(&body[copied..at]);
                                let escaped = serde_json::to_string(&new).map_err(|_| Malformed(at))?;
                                buffer.extend_from_slice(escaped.as_bytes());
                                copied = end;
                            }
                            Ok(None) => {}
                        }
                    }
                }
                at = end;
            }
            b'{' | b'[' => {
                // A value that is not a string clears a pending skip.
                skip_next = false;
                at += 1;
            }
            _ => at += 1,
        }
    }
    Ok(Ok(out.map(|mut buffer| {
        buffer.extend_from_slice(&body[copied..]);
        buffer
    })))
}

/// The index just past the string that opens at `start`.
fn string_end(body: &[u8], start: usize) -> Result<usize, Malformed> {
    let mut at = start + 1;
    while at < body.len() {
        match body[at] {
            b'\\' => at += 2,
            b'"' => return Ok(at + 1),
            _ => at += 1,
        }
    }
    Err(Malformed(start))
}

/// A JSON string literal's text (quotes included in `raw`).
fn unescape(raw: &[u8]) -> Option<Cow<'_, str>> {
    let inner = &raw[1..raw.len() - 1];
    if !inner.contains(&b'\\') {
        return std::str::from_utf8(inner).ok().map(Cow::Borrowed);
    }
    serde_json::from_slice::<String>(raw).ok().map(Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upper_secret(body: &str) -> Option<String> {
        let rewritten = rewrite_strings::<()>(body.as_bytes(), |text| {
            Ok(text.contains("secret").then(|| text.replace("secret", "[X]")))
        });
        rewritten.ok()?.ok()?.map(|bytes| String::from_utf8(bytes).unwrap_or_default())
    }

    #[test]
    fn values_change_keys_and_skipped_members_do_not() {
        let body = r#"{"model":"secret-model","messages":[{"role":"user","content":"my secret is \"x\""}],"secret":1,
            "image":{"data":"secret bytes"},"n":[1,"secret"]}"#;
        let out = upper_secret(body).unwrap_or_default();
        assert!(out.contains(r#""model":"secret-model""#), "{out}");
        assert!(out.contains(r#""content":"my [X] is \"x\"""#), "{out}");
        assert!(out.contains(r#""secret":1"#), "{out}");
        assert!(out.contains(r#""data":"secret bytes""#), "{out}");
        assert!(out.contains(r#"[1,"[X]"]"#), "{out}");
        assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok());
    }

    #[test]
    fn nothing_to_change_copies_nothing_and_escapes_are_read() {
        assert_eq!(upper_secret(r#"{"content":"nothing here"}"#), None);
        let out = upper_secret(r#"{"content":"s\u0065cret"}"#).unwrap_or_default();
        assert_eq!(out, r#"{"content":"[X]"}"#);
        assert!(rewrite_strings::<()>(br#"{"content":"open"#, |_| Ok(None)).is_err());
    }
}
