//! A JSON body's strings rewritten in place, whatever the protocol: the
//! walk visits every string, member names included, unescaped, and writes
//! back only the strings that change; a body with nothing to change is not
//! copied. What is not text as written is the protocol's to say
//! ([`Place`]s, from its codec): signed state is skipped, media is read as
//! the text it decodes to when it is text (a plain-text document sent as
//! base64 is screened, and written back in base64), and text a vendor's
//! signature covers is handed over marked as such ([`screen`] reads it and
//! never changes it). A string that cannot be read (a bad escape, a lone
//! surrogate, bytes that are not UTF-8) makes the body [`Malformed`]: a
//! caller refuses it rather than pass it unread.

use std::borrow::Cow;

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use switchyard_codec::opaque::{Holds, Place};

use crate::{Blocked, Decision, Direction, Masks, Screen};

/// The body was not JSON the walk could follow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed json at byte {0}")]
pub struct Malformed(pub usize);

/// Calls `rewrite` with the text of every string of `body` (unescaped;
/// a media string at one of `places` decoded, when it is text; signed
/// state at one of `places` never) and whether a vendor's signature covers
/// it (`true` at a [`Holds::SignedText`] place: a caller that sends the
/// body on must not change it); where it returns a new text, that string
/// is replaced. `Ok(None)`: no string changed. `rewrite` may stop the walk
/// by returning `Err`.
pub fn rewrite_strings<E>(
    body: &[u8],
    places: &[Place],
    mut rewrite: impl FnMut(&str, bool) -> Result<Option<String>, E>,
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
        // Two places may name one string: the one kept furthest from text.
        let holds = match (holds, opaque.next_if(|(opened, _)| *opened == start)) {
            (Some(Holds::Signed), _) | (_, Some((_, Holds::Signed))) => Some(Holds::Signed),
            (holds, _) => holds,
        };
        let new = match holds {
            Some(Holds::Signed) => continue,
            Some(Holds::Media) => match media(&body[start..end], start, &mut rewrite)? {
                Ok(new) => new,
                Err(stop) => return Ok(Err(stop)),
            },
            Some(Holds::SignedText) | None => {
                let text = unescape(&body[start..end]).ok_or(Malformed(start))?;
                match rewrite(&text, holds == Some(Holds::SignedText)) {
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

/// `body` screened `direction` by `screen`, every string but signed state:
/// masked in place, or the rule that blocks it. Text a vendor's signature
/// covers is screened and never changed: a rule that blocks blocks it, and
/// a mask that would change it refuses the body ([`Blocked::signed`]), for
/// a rewritten signed text is one its vendor refuses.
pub fn screen(
    screen: &Screen,
    body: &[u8],
    places: &[Place],
    direction: Direction,
    masks: &mut Masks,
    decisions: &mut Vec<Decision>,
) -> Result<Result<Option<Vec<u8>>, Blocked>, Malformed> {
    rewrite_strings(body, places, |text, signed| match signed {
        false => screen.screen(text, direction, masks, decisions),
        true => screen.screen_signed(text, direction, decisions).map(|()| None),
    })
}

/// A media string (`raw`, quotes included) rewritten as the text it
/// decodes to: `None` when it is not text, or the text did not change.
/// A string that is not base64 is read as text as it is.
fn media<E>(
    raw: &[u8],
    start: usize,
    rewrite: &mut impl FnMut(&str, bool) -> Result<Option<String>, E>,
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
        Decoded::NotBase64 => Ok(rewrite(&value, false)),
        Decoded::Text(text, engine) => Ok(rewrite(&text, false).map(|new| {
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
    /// Strings whose place waits on this object's siblings: (opening
    /// quote, place).
    pending: Vec<(usize, usize)>,
    /// Each member a condition names, with its value when a string.
    siblings: Vec<(&'b [u8], Option<&'b [u8]>)>,
}

impl Frame<'_> {
    /// Whether this object's siblings satisfy `place`'s conditions: each
    /// member named, every time with an allowed value.
    fn satisfies(&self, place: &Place) -> bool {
        let holds = |member: &str, allowed: &dyn Fn(&[u8]) -> bool| {
            let mut named = self.siblings.iter().filter(|(m, _)| *m == member.as_bytes()).peekable();
            named.peek().is_some() && named.all(|(_, value)| value.is_some_and(allowed))
        };
        place.when.is_none_or(|(member, values)| holds(member, &|v| values.iter().any(|a| a.as_bytes() == v)))
            && place.with.is_none_or(|member| holds(member, &|v| !v.is_empty()))
    }
}

/// The opening quote of every string of `body` at one of `places`, with
/// what it holds, in order. A place's conditions on siblings are decided
/// when the object they are asked of closes, whatever the members' order;
/// a sibling named twice must hold an allowed value both times.
fn opaque_strings(body: &[u8], places: &[Place]) -> Vec<(usize, Holds)> {
    let is_condition = |name: &[u8]| {
        places
            .iter()
            .any(|p| p.when.is_some_and(|(m, _)| m.as_bytes() == name) || p.with.is_some_and(|m| m.as_bytes() == name))
    };
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
                        if place.when.is_none() && place.with.is_none() {
                            found.push((at, place.holds));
                        } else if let Some(asked) = asked(&stack, place) {
                            stack[asked].pending.push((at, index));
                        }
                    }
                    if let (Some(member), Some(top)) = (member, stack.last_mut()) {
                        if is_condition(member) {
                            top.siblings.push((member, Some(inner)));
                        }
                    }
                }
                at = end;
            }
            b'{' | b'[' => {
                let name = key.take();
                if let (Some(member), Some(top)) = (name, stack.last_mut()) {
                    if is_condition(member) {
                        top.siblings.push((member, None));
                    }
                }
                stack.push(Frame { name, pending: Vec::new(), siblings: Vec::new() });
                at += 1;
            }
            b'}' | b']' => {
                if let Some(frame) = stack.pop() {
                    for (opened, index) in &frame.pending {
                        if frame.satisfies(&places[*index]) {
                            found.push((*opened, places[*index].holds));
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
                        top.siblings.push((member, None));
                    }
                }
                at += 1;
            }
        }
    }
    found.sort_unstable_by_key(|(opened, _)| *opened);
    found
}

/// The index in `stack` of the object `place`'s siblings are asked of,
/// for a string at its path: the string's own object (`up` 0), or the
/// object holding the member `up` steps up the path (the frame below the
/// one that member opened).
fn asked(stack: &[Frame<'_>], place: &Place) -> Option<usize> {
    if place.up == 0 {
        return stack.len().checked_sub(1);
    }
    // The path's members, but the string's own, each opened a frame.
    let step = place.path.len().checked_sub(1 + place.up)?;
    let opened = stack.iter().enumerate().filter(|(_, frame)| frame.name.is_some()).nth(step)?.0;
    opened.checked_sub(1)
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

    /// The texts of `body` the walk says a signature covers, under `places`.
    fn signed_texts(body: &str, places: &[Place]) -> Vec<String> {
        let mut signed = Vec::new();
        let _ = rewrite_strings::<()>(body.as_bytes(), places, |text, covered| {
            if covered {
                signed.push(text.to_owned());
            }
            Ok(None)
        });
        signed
    }

    /// `body` with every "secret" replaced, under `places`, but in text a
    /// signature covers (as a caller that sends the body on must).
    fn redacted(body: &str, places: &[Place]) -> Result<Option<String>, Malformed> {
        let rewritten = rewrite_strings::<()>(body.as_bytes(), places, |text, signed| {
            Ok((text.contains("secret") && !signed).then(|| text.replace("secret", "[X]")))
        })?;
        Ok(rewritten.unwrap_or(None).map(|bytes| String::from_utf8(bytes).unwrap_or_default()))
    }

    const PLACES: &[Place] = &[
        Place::when(&["messages", "content", "source", "data"], "type", &["base64"], Holds::Media),
        Place::when(&["messages", "content", "signature"], "type", &["thinking"], Holds::Signed),
        Place::when(&["messages", "content", "thinking"], "type", &["thinking"], Holds::SignedText).with("signature"),
        Place::at(&["messages", "content", "image_url", "url"], Holds::Media),
    ];

    #[test]
    fn every_string_changes_but_signed_state_and_signed_text() {
        let body = r#"{"model":"secret-model","messages":[{"role":"user","content":"my secret is \"x\""}],"secret":1,
            "image":{"data":"secret bytes"},"n":[1,"secret"],"id":"secret",
            "messages":[{"content":[{"type":"thinking","thinking":"a secret","signature":"secret-sig"},
                {"type":"thinking","thinking":"unsigned secret"}]}]}"#;
        let out = redacted(body, PLACES).ok().flatten().unwrap_or_default();
        for expected in [
            r#""model":"[X]-model""#,
            r#""content":"my [X] is \"x\"""#,
            r#""[X]":1"#,
            r#""data":"[X] bytes""#,
            r#"[1,"[X]"]"#,
            r#""id":"[X]""#,
            // The text its signature covers is never changed, nor the signature.
            r#""thinking":"a secret","signature":"secret-sig""#,
            // A thinking block without a signature is text.
            r#""thinking":"unsigned [X]""#,
        ] {
            assert!(out.contains(expected), "{expected} in {out}");
        }
        assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok());
        assert_eq!(signed_texts(body, PLACES), ["a secret"]);
    }

    /// Each protocol's declared signed text, found by its siblings wherever
    /// they stand: a signature beside it (not empty, not null), a reasoning
    /// item's encrypted content a level up; the same member elsewhere is
    /// text.
    #[test]
    fn each_protocol_declares_the_text_its_signatures_cover() {
        use switchyard_protocol::ir::Protocol;
        let places = |protocol| switchyard_protocol::codec(protocol).opaque();
        let cases: &[(Protocol, &str, &[&str])] = &[
            (
                Protocol::Anthropic,
                r#"{"messages":[{"role":"assistant","content":[{"signature":"s","thinking":"a","type":"thinking"},
                    {"type":"thinking","thinking":"b","signature":""},{"type":"text","text":"c","signature":"s"}]}]}"#,
                &["a"],
            ),
            (
                Protocol::Bedrock,
                r#"{"messages":[{"role":"assistant","content":[
                    {"reasoningContent":{"reasoningText":{"text":"a","signature":"s"}}},
                    {"reasoningContent":{"reasoningText":{"text":"b","signature":null}}},
                    {"reasoningContent":{"reasoningText":{"text":"c"}}},{"text":"d"}]}]}"#,
                &["a"],
            ),
            (
                Protocol::Gemini,
                r#"{"contents":[{"role":"model","parts":[{"text":"a","thought":true,"thoughtSignature":"s"},
                    {"thought_signature":"s","text":"b"},{"text":"c"}]}]}"#,
                &["a", "b"],
            ),
            (
                Protocol::OpenAi,
                r#"{"messages":[{"role":"assistant","content":"c","reasoning_content":"a",
                    "thinking_blocks":[{"type":"thinking","thinking":"a","signature":"s"}]}]}"#,
                &["a"],
            ),
            (
                Protocol::Responses,
                r#"{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"q"}]},
                    {"summary":[{"type":"summary_text","text":"a"}],"type":"reasoning","encrypted_content":"s"},
                    {"type":"reasoning","summary":[{"type":"summary_text","text":"b"}]},
                    {"type":"reasoning","content":[{"type":"reasoning_text","text":"c"}],"encrypted_content":"s"}]}"#,
                &["a", "c"],
            ),
        ];
        for (protocol, body, expected) in cases {
            assert_eq!(signed_texts(body, places(*protocol).request), *expected, "{protocol} request");
        }
        let replies: &[(Protocol, &str)] = &[
            (Protocol::Anthropic, r#"{"content":[{"type":"thinking","thinking":"a","signature":"s"}]}"#),
            (
                Protocol::Bedrock,
                r#"{"output":{"message":{"content":[{"reasoningContent":{"reasoningText":{"text":"a","signature":"s"}}}]}}}"#,
            ),
            (Protocol::Gemini, r#"{"candidates":[{"content":{"parts":[{"text":"a","thoughtSignature":"s"}]}}]}"#),
            (
                Protocol::OpenAi,
                r#"{"choices":[{"message":{"thinking_blocks":[{"type":"thinking","thinking":"a","signature":"s"}]}}]}"#,
            ),
            (
                Protocol::Responses,
                r#"{"output":[{"type":"reasoning","summary":[{"type":"summary_text","text":"a"}],"encrypted_content":"s"}]}"#,
            ),
        ];
        for (protocol, body) in replies {
            assert_eq!(signed_texts(body, places(*protocol).reply), ["a"], "{protocol} reply");
        }
    }

    /// The screen reads signed text and never changes it: a block blocks,
    /// a mask refuses the body saying the text is signed, a flag passes;
    /// the rest of the body is masked around it, byte for byte.
    #[test]
    fn signed_text_is_screened_and_never_changed() {
        let pii = crate::tests::pii();
        let places = switchyard_protocol::codec(switchyard_protocol::ir::Protocol::Anthropic).opaque().request;
        let body = |thinking: &str, said: &str| {
            format!(
                r#"{{"messages":[{{"role":"assistant","content":[{{"type":"thinking","thinking":"{thinking}","signature":"sig"}}]}},
                    {{"role":"user","content":"{said}"}}]}}"#
            )
        };
        let screened = |body: &str| {
            let (mut masks, mut decisions) = (Masks::default(), Vec::new());
            let out = screen(&pii, body.as_bytes(), places, Direction::Request, &mut masks, &mut decisions);
            out.map(|out| out.map(|out| out.map(|bytes| String::from_utf8(bytes).unwrap_or_default())))
        };
        let refused = screened(&body("mail ann@example.com", "hi"));
        let Ok(Err(blocked)) = refused else { panic!("a mask would change signed text: {refused:?}") };
        assert_eq!((&*blocked.policy, &*blocked.rule, blocked.signed), ("pii", "email", true));
        let refused = screened(&body("say forbidden-phrase", "hi"));
        let Ok(Err(blocked)) = refused else { panic!("a block in signed text: {refused:?}") };
        assert_eq!((&*blocked.policy, blocked.signed), ("words", false));
        let thinking = "nothing to mask here";
        let masked = screened(&body(thinking, "mail ann@example.com")).ok().and_then(Result::ok).flatten();
        let masked = masked.unwrap_or_default();
        assert!(masked.contains(&format!(r#""thinking":"{thinking}","signature":"sig""#)), "{masked}");
        assert!(masked.contains("mail [EMAIL_1]"), "{masked}");
        // A rule only the reply looks at leaves the request's signed text be.
        assert_eq!(screened(&body("ticket TCK-123456", "hi")), Ok(Ok(None)));
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
