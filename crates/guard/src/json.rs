//! A JSON body's strings rewritten in place, whatever the protocol: the
//! walk visits every string, member names included, unescaped, and writes
//! back only the strings that change; a body with nothing to change is not
//! copied. What is not text as written is the protocol's to say
//! ([`Place`]s, from its codec): signed state is skipped, and media is read
//! as the text it decodes to when it is text (a plain-text document sent as
//! base64 is screened, and written back in base64). A string that cannot be
//! read (a bad escape, a lone surrogate, bytes that are not UTF-8) makes
//! the body [`Malformed`]: a caller refuses it rather than pass it unread.

use std::borrow::Cow;

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use switchyard_codec::opaque::{Holds, Place};

/// The body was not JSON the walk could follow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed json at byte {0}")]
pub struct Malformed(pub usize);

/// Calls `rewrite` with the text of every string of `body` (unescaped;
/// a media string at one of `places` decoded, when it is text; signed
/// state at one of `places` never); where it returns a new text, that
/// string is replaced. `Ok(None)`: no string changed. `rewrite` may stop
/// the walk by returning `Err`.
pub fn rewrite_strings<E>(
    body: &[u8],
    places: &[Place],
    mut rewrite: impl FnMut(&str) -> Result<Option<String>, E>,
) -> Result<Result<Option<Vec<u8>>, E>, Malformed> {
    // A body naming no place's member has nothing opaque: no second pass.
    let opaque = if crate::names_any(body, places, None) { opaque_strings(body, places) } else { Vec::new() };
    let mut opaque = opaque.into_iter().peekable();
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut at = 0;
    while let Some(open) = memchr::memchr(b'"', &body[at..]) {
        let start = at + open;
        let end = string_end(body, start)?;
        at = end;
        while opaque.next_if(|(opened, _)| *opened < start).is_some() {}
        let holds = opaque.next_if(|(opened, _)| *opened == start).map(|(_, holds)| holds);
        let new = match holds {
            Some(Holds::Signed) => continue,
            Some(Holds::Media) => match media(&body[start..end], start, &mut rewrite)? {
                Ok(new) => new,
                Err(stop) => return Ok(Err(stop)),
            },
            None => {
                let text = unescape(&body[start..end]).ok_or(Malformed(start))?;
                match rewrite(&text) {
                    Ok(new) => new,
                    Err(stop) => return Ok(Err(stop)),
                }
            }
        };
        if let Some(new) = new {
            let buffer = out.get_or_insert_with(|| Vec::with_capacity(body.len() + 64));
            buffer.extend_from_slice(&body[copied..start]);
            let escaped = serde_json::to_string(&new).map_err(|_| Malformed(start))?;
            buffer.extend_from_slice(escaped.as_bytes());
            copied = end;
        }
    }
    Ok(Ok(out.map(|mut buffer| {
        buffer.extend_from_slice(&body[copied..]);
        buffer
    })))
}

/// A media string (`raw`, quotes included) rewritten as the text it
/// decodes to: `None` when it is not text, or the text did not change.
/// A string that is not base64 is read as text as it is.
fn media<E>(
    raw: &[u8],
    start: usize,
    rewrite: &mut impl FnMut(&str) -> Result<Option<String>, E>,
) -> Result<Result<Option<String>, E>, Malformed> {
    let value = unescape(raw).ok_or(Malformed(start))?;
    // A data URL's header stays; its payload is the base64.
    let header = value
        .strip_prefix("data:")
        .and_then(|url| url.find(',').map(|comma| 5 + comma + 1))
        .filter(|&comma| value[..comma - 1].ends_with(";base64"))
        .unwrap_or(0);
    let payload = &value[header..];
    match decode_text(payload) {
        Decoded::Binary => Ok(Ok(None)),
        Decoded::NotBase64 => Ok(rewrite(&value)),
        Decoded::Text(text, engine) => Ok(rewrite(&text).map(|new| {
            new.map(|new| {
                let mut encoded = String::with_capacity(header + new.len() * 4 / 3 + 4);
                encoded.push_str(&value[..header]);
                engine.encode_string(new.as_bytes(), &mut encoded);
                encoded
            })
        })),
    }
}

/// What a media string's payload is.
enum Decoded {
    /// Not base64 at all: text as written.
    NotBase64,
    /// Bytes that are not UTF-8 text (an image, a PDF's binary).
    Binary,
    /// Text, and the engine that writes it back in the same alphabet and
    /// padding.
    Text(String, &'static GeneralPurpose),
}

/// Decodes padded or unpadded, and writes back as the payload was.
const fn lenient(alphabet: &alphabet::Alphabet, padded: bool) -> GeneralPurpose {
    GeneralPurpose::new(
        alphabet,
        GeneralPurposeConfig::new()
            .with_encode_padding(padded)
            .with_decode_padding_mode(DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    )
}
static STANDARD_PADDED: GeneralPurpose = lenient(&alphabet::STANDARD, true);
static STANDARD_BARE: GeneralPurpose = lenient(&alphabet::STANDARD, false);
static URL_SAFE_PADDED: GeneralPurpose = lenient(&alphabet::URL_SAFE, true);
static URL_SAFE_BARE: GeneralPurpose = lenient(&alphabet::URL_SAFE, false);

/// How much of a payload is decoded before deciding it is binary: an
/// image's header says so in its first bytes, so a large one is never
/// decoded whole.
const SNIFF: usize = 4096;

fn decode_text(payload: &str) -> Decoded {
    let url_safe = payload.bytes().any(|b| b == b'-' || b == b'_');
    // Whole quads without `=` say nothing of padding: standard base64 pads.
    let padded = payload.ends_with('=') || (!url_safe && payload.len().is_multiple_of(4));
    let engine = match (url_safe, padded) {
        (false, true) => &STANDARD_PADDED,
        (false, false) => &STANDARD_BARE,
        (true, true) => &URL_SAFE_PADDED,
        (true, false) => &URL_SAFE_BARE,
    };
    if payload.len() > SNIFF {
        let Ok(head) = engine.decode(&payload[..SNIFF]) else { return Decoded::NotBase64 };
        // A character cut at the sniff's end is not yet an error.
        if std::str::from_utf8(&head).is_err_and(|err| err.error_len().is_some()) {
            return Decoded::Binary;
        }
    }
    match engine.decode(payload) {
        Err(_) => Decoded::NotBase64,
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => Decoded::Text(text, engine),
            Err(_) => Decoded::Binary,
        },
    }
}

/// An object or array being walked for [`opaque_strings`].
struct Frame<'b> {
    /// The member it is the value of (`None` in an array).
    name: Option<&'b [u8]>,
    /// Strings whose place waits on a sibling: (opening quote, place).
    pending: Vec<(usize, usize)>,
    /// Each sibling a condition names, and whether its value was allowed.
    siblings: Vec<(&'b [u8], bool)>,
}

/// The opening quote of every string of `body` at one of `places`, with
/// what it holds, in order. A place's condition on a sibling is decided
/// when its object closes, whatever the members' order; a sibling named
/// twice must hold an allowed value both times.
fn opaque_strings(body: &[u8], places: &[Place]) -> Vec<(usize, Holds)> {
    let is_condition = |name: &[u8]| places.iter().any(|p| p.when.is_some_and(|(m, _)| m.as_bytes() == name));
    let mut stack: Vec<Frame<'_>> = Vec::new();
    let mut found = Vec::new();
    // The member whose value comes next, in the object on top.
    let mut key: Option<&[u8]> = None;
    let mut at = 0;
    while at < body.len() {
        match body[at] {
            b'"' => {
                let Ok(end) = string_end(body, at) else { break };
                let inner = &body[at + 1..end - 1];
                if body[end..].iter().find(|b| !b.is_ascii_whitespace()) == Some(&b':') {
                    key = Some(inner);
                } else {
                    let member = key.take();
                    for (index, place) in places.iter().enumerate() {
                        if !on_path(&stack, member, place.path) {
                            continue;
                        }
                        match (place.when, stack.last_mut()) {
                            (None, _) => found.push((at, place.holds)),
                            (Some(_), Some(top)) => top.pending.push((at, index)),
                            (Some(_), None) => {}
                        }
                    }
                    if let (Some(member), Some(top)) = (member, stack.last_mut()) {
                        if is_condition(member) {
                            let allowed = places.iter().any(|p| {
                                p.when.is_some_and(|(m, values)| {
                                    m.as_bytes() == member && values.iter().any(|v| v.as_bytes() == inner)
                                })
                            });
                            top.siblings.push((member, allowed));
                        }
                    }
                }
                at = end;
            }
            b'{' | b'[' => {
                let name = key.take();
                if let (Some(member), Some(top)) = (name, stack.last_mut()) {
                    if is_condition(member) {
                        top.siblings.push((member, false));
                    }
                }
                stack.push(Frame { name, pending: Vec::new(), siblings: Vec::new() });
                at += 1;
            }
            b'}' | b']' => {
                if let Some(frame) = stack.pop() {
                    for (opened, index) in frame.pending {
                        let Some((member, _)) = places[index].when else { continue };
                        let mut named = frame.siblings.iter().filter(|(m, _)| *m == member.as_bytes()).peekable();
                        if named.peek().is_some() && named.all(|(_, allowed)| *allowed) {
                            found.push((opened, places[index].holds));
                        }
                    }
                }
                key = None;
                at += 1;
            }
            byte if byte.is_ascii_whitespace() || byte == b',' || byte == b':' => at += 1,
            _ => {
                // A number, `true`, `false` or `null`: a sibling a condition
                // names holds no allowed value.
                if let (Some(member), Some(top)) = (key.take(), stack.last_mut()) {
                    if is_condition(member) {
                        top.siblings.push((member, false));
                    }
                }
                at += 1;
            }
        }
    }
    found.sort_unstable_by_key(|(opened, _)| *opened);
    found
}

/// Whether a string that is the value of `member` (`None`: an array's
/// element) inside the objects and arrays of `stack` is at `path`.
fn on_path(stack: &[Frame<'_>], member: Option<&[u8]>, path: &[&str]) -> bool {
    let names = stack.iter().filter_map(|frame| frame.name).chain(member);
    let mut expected = path.iter();
    for name in names {
        match expected.next() {
            Some(step) if step.as_bytes() == name => {}
            _ => return false,
        }
    }
    expected.next().is_none()
}

/// The index just past the string that opens at `start`.
fn string_end(body: &[u8], start: usize) -> Result<usize, Malformed> {
    let mut at = start + 1;
    while let Some(next) = memchr::memchr2(b'"', b'\\', &body[at.min(body.len())..]) {
        at += next;
        if body[at] == b'"' {
            return Ok(at + 1);
        }
        at += 2;
    }
    Err(Malformed(start))
}

/// A JSON string literal's text (quotes included in `raw`); `None` when it
/// cannot be read.
fn unescape(raw: &[u8]) -> Option<Cow<'_, str>> {
    let inner = &raw[1..raw.len() - 1];
    if memchr::memchr(b'\\', inner).is_none() {
        return std::str::from_utf8(inner).ok().map(Cow::Borrowed);
    }
    serde_json::from_slice::<String>(raw).ok().map(Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `body` with every "secret" replaced, under `places`.
    fn redacted(body: &str, places: &[Place]) -> Result<Option<String>, Malformed> {
        let rewritten = rewrite_strings::<()>(body.as_bytes(), places, |text| {
            Ok(text.contains("secret").then(|| text.replace("secret", "[X]")))
        })?;
        Ok(rewritten.unwrap_or(None).map(|bytes| String::from_utf8(bytes).unwrap_or_default()))
    }

    const PLACES: &[Place] = &[
        Place::when(&["messages", "content", "source", "data"], "type", &["base64"], Holds::Media),
        Place::when(&["messages", "content", "signature"], "type", &["thinking"], Holds::Signed),
        Place::at(&["messages", "content", "image_url", "url"], Holds::Media),
    ];

    #[test]
    fn every_string_changes_but_signed_state() {
        let body = r#"{"model":"secret-model","messages":[{"role":"user","content":"my secret is \"x\""}],"secret":1,
            "image":{"data":"secret bytes"},"n":[1,"secret"],"id":"secret",
            "messages":[{"content":[{"type":"thinking","thinking":"a secret","signature":"secret-sig"}]}]}"#;
        let out = redacted(body, PLACES).ok().flatten().unwrap_or_default();
        for expected in [
            r#""model":"[X]-model""#,
            r#""content":"my [X] is \"x\"""#,
            r#""[X]":1"#,
            r#""data":"[X] bytes""#,
            r#"[1,"[X]"]"#,
            r#""id":"[X]""#,
            r#""thinking":"a [X]","signature":"secret-sig""#,
        ] {
            assert!(out.contains(expected), "{expected} in {out}");
        }
        assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok());
    }

    #[test]
    fn a_place_is_its_whole_path_and_its_siblings_whatever_their_order() {
        let image = |source: &str| format!(r#"{{"messages":[{{"content":[{{"type":"image","source":{source}}}]}}]}}"#);
        // Base64 that decodes to binary is media: skipped.
        let binary = image(r#"{"data":"/9j/secret","type":"base64"}"#);
        assert_eq!(redacted(&binary, PLACES), Ok(None));
        // A plain-text document's data, a type named twice, a tool's input
        // of the same shape: text.
        for text in [
            image(r#"{"type":"text","data":"a secret"}"#),
            image(r#"{"type":"base64","data":"a secret","type":"text"}"#),
            image(r#"{"type":["base64"],"data":"a secret"}"#),
            r#"{"messages":[{"content":[{"type":"tool_use","input":{"source":{"type":"base64","data":"a secret"}}}]}]}"#
                .to_owned(),
            r#"{"messages":[{"content":[{"type":"text","signature":"a secret"}]}]}"#.to_owned(),
        ] {
            let out = redacted(&text, PLACES).ok().flatten().unwrap_or_default();
            assert!(out.contains("a [X]"), "{text}: {out}");
        }
    }

    #[test]
    fn media_that_is_text_is_screened_and_written_back_as_it_came() {
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        let source = |data: &str| {
            format!(
                r#"{{"messages":[{{"content":[{{"type":"document","source":{{"type":"base64","data":"{data}"}}}}]}}]}}"#
            )
        };
        let out = redacted(&source(&STANDARD.encode("my secret note")), PLACES).ok().flatten().unwrap_or_default();
        assert!(out.contains(&STANDARD.encode("my [X] note")), "{out}");
        let out = redacted(&source(&URL_SAFE_NO_PAD.encode("?>secret")), PLACES).ok().flatten().unwrap_or_default();
        assert!(out.contains(&format!(r#""data":"{}""#, URL_SAFE_NO_PAD.encode("?>[X]"))), "{out}");
        let url = |url: &str| format!(r#"{{"messages":[{{"content":[{{"image_url":{{"url":"{url}"}}}}]}}]}}"#);
        let out = redacted(&url(&format!("data:text/plain;base64,{}", STANDARD.encode("a secret"))), PLACES);
        let expected = format!("data:text/plain;base64,{}", STANDARD.encode("a [X]"));
        assert!(out.ok().flatten().unwrap_or_default().contains(&expected));
        // A web URL in a media member is text.
        let out = redacted(&url("https://x.test/secret.png"), PLACES).ok().flatten().unwrap_or_default();
        assert!(out.contains("https://x.test/[X].png"), "{out}");
        let out = redacted(&url("data:text/plain,secret"), PLACES).ok().flatten().unwrap_or_default();
        assert!(out.contains("data:text/plain,[X]"), "{out}");
    }

    #[test]
    fn nothing_to_change_copies_nothing_and_what_cannot_be_read_is_malformed() {
        assert_eq!(redacted(r#"{"content":"nothing here"}"#, &[]), Ok(None));
        assert_eq!(redacted(r#"{"content":"s\u0065cret"}"#, &[]), Ok(Some(r#"{"content":"[X]"}"#.to_owned())));
        assert_eq!(redacted(r#"{"content":"open"#, &[]), Err(Malformed(11)));
        // A lone surrogate before the string that carries the word.
        assert_eq!(redacted(r#"{"a":"\ud800","content":"secret"}"#, &[]), Err(Malformed(5)));
        assert_eq!(redacted(r#"{"a":"\q"}"#, &[]), Err(Malformed(5)));
    }
}
