//! What a same-protocol hop needs from a JSON body without parsing it into a
//! tree: the top-level `model` and `stream` values, and a splice that
//! replaces the model while leaving every other byte untouched.
//!
//! The scanner walks the top-level object once, skipping nested values by
//! tracking strings and brackets, and borrows from the input. It validates
//! only what it walks: a body that is broken deeper down is the upstream's
//! to reject, which a passthrough relays verbatim.
//!
//! The gateway and the upstream must read the same request: keys are
//! compared with their escapes resolved (`"mod\u0065l"` is `model`), and a
//! body that names a member the gateway reads ([`WATCHED`]) twice is refused,
//! because JSON parsers disagree on which of the two wins (most upstreams
//! keep the last; a scanner that stopped at the first would route by one
//! model and bill by it while the upstream served another).

use std::borrow::Cow;
use std::ops::Range;

/// The top-level facts of a JSON object body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopLevel<'a> {
    /// The `model` string, unescaped.
    pub model: Option<Cow<'a, str>>,
    /// Byte range of the `model` value, quotes included.
    pub model_span: Option<Range<usize>>,
    /// The `stream` flag, when it is a boolean.
    pub stream: Option<bool>,
    /// Byte ranges of the members [`scan_request`] was asked to find, in
    /// the order it was given their names.
    pub found: Found,
}

/// The most member names [`scan_request`] finds besides [`WATCHED`].
pub const FOUND: usize = 4;

/// Where the values of members a scan was asked to find are: (start, end)
/// byte offsets (a body is far below 4 GiB: the body limit caps it).
pub type Found = [Option<(u32, u32)>; FOUND];

/// The top-level members the gateway itself reads from a caller's body
/// (routing, streaming, metering): each may appear at most once.
pub const WATCHED: [&str; 3] = ["model", "stream", "stream_options"];

/// Why a body cannot be scanned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    /// Not a JSON object at its top level.
    #[error("malformed json: {message} at byte {offset}")]
    Malformed {
        /// What was expected.
        message: &'static str,
        /// Where.
        offset: usize,
    },
    /// A member the gateway reads is named more than once.
    #[error("the body names `{0}` more than once; name each member once")]
    Duplicate(&'static str),
}

impl ScanError {
    fn at(message: &'static str, offset: usize) -> ScanError {
        ScanError::Malformed { message, offset }
    }
}

/// Scans the top-level object of `body`. A member of [`WATCHED`] named
/// twice (escapes resolved) is an error.
pub fn scan_top_level(body: &[u8]) -> Result<TopLevel<'_>, ScanError> {
    scan_request(body, &[])
}

/// Scans the top-level object of `body` as [`scan_top_level`] does, and
/// also finds the members named `find` (at most [`FOUND`]: those admission
/// reads), each of which may appear once too. One walk of the body.
pub fn scan_request<'a>(body: &'a [u8], find: &[&'static str]) -> Result<TopLevel<'a>, ScanError> {
    let mut top = TopLevel::default();
    let mut seen = [false; WATCHED.len()];
    walk_top_level(body, |key, value_start, value_end| {
        let Some(watched) = WATCHED.iter().position(|name| key == name.as_bytes()) else {
            if let Some(at) = find.iter().take(FOUND).position(|name| key == name.as_bytes()) {
                let span =
                    (u32::try_from(value_start).unwrap_or(u32::MAX), u32::try_from(value_end).unwrap_or(u32::MAX));
                if top.found[at].replace(span).is_some() {
                    return Err(ScanError::Duplicate(find[at]));
                }
            }
            return Ok(true);
        };
        if std::mem::replace(&mut seen[watched], true) {
            return Err(ScanError::Duplicate(WATCHED[watched]));
        }
        match WATCHED[watched] {
            "model" if body[value_start] == b'"' => {
                top.model = Some(unescape(&body[value_start + 1..value_end - 1], value_start)?);
                top.model_span = Some(value_start..value_end);
            }
            "stream" => {
                top.stream = match &body[value_start..value_end] {
                    b"true" => Some(true),
                    b"false" => Some(false),
                    _ => None,
                };
            }
            _ => {}
        }
        Ok(true)
    })?;
    Ok(top)
}

/// The raw bytes of the top-level value under `key` (the first one, for a
/// key given twice), without parsing the rest of the body. A usage tap reads
/// just `usage` from a reply this way.
pub fn top_level_value<'a>(body: &'a [u8], key: &str) -> Result<Option<&'a [u8]>, ScanError> {
    let mut found = None;
    walk_top_level(body, |name, value_start, value_end| {
        if name == key.as_bytes() {
            found = Some(&body[value_start..value_end]);
            return Ok(false);
        }
        Ok(true)
    })?;
    Ok(found)
}

/// The raw bytes of `key`'s value when it is the last member of the
/// top-level object, found from the end: a reply whose usage comes last
/// (an embeddings reply: megabytes of numbers, then `usage`) is read
/// without walking what comes before. `None` when the last `"key"` is not
/// followed by a value and the top-level object's closing brace alone
/// (then [`top_level_value`] walks the body).
pub fn last_top_level_value<'a>(body: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let mut needle = Vec::with_capacity(key.len() + 2);
    needle.push(b'"');
    needle.extend_from_slice(key.as_bytes());
    needle.push(b'"');
    let at = memchr::memmem::rfind(body, &needle)?;
    let after_key = at + needle.len();
    let rest = body.get(after_key..)?;
    let colon = after_key + (rest.len() - rest.trim_ascii_start().len());
    if body.get(colon) != Some(&b':') {
        return None;
    }
    let value_at = colon + 1 + (body.get(colon + 1..)?.len() - body.get(colon + 1..)?.trim_ascii_start().len());
    let end = value_end(body, value_at).ok()?;
    // Only the top-level object's `}` may follow: any other closing
    // bracket means the member was nested.
    (body.get(end..)?.trim_ascii() == b"}").then(|| &body[value_at..end])
}

/// The raw bytes of `key`'s top-level value: from the end when it is the
/// last member (the common place of a reply's usage), else by a walk.
pub fn top_level_value_from_end<'a>(body: &'a [u8], key: &str) -> Option<&'a [u8]> {
    last_top_level_value(body, key).or_else(|| top_level_value(body, key).ok().flatten())
}

/// The string value of the first member named `key` anywhere in `body`,
/// found without parsing: in valid JSON a raw `"key"` followed by `:` can
/// only be a member name (a quote inside a string is escaped, and a string
/// value is never followed by a colon). `None` when there is none, or its
/// value is not a string without escapes (no finish reason has one). For
/// replies whose member sits in an array (`choices[0].finish_reason`).
pub fn first_string_member<'a>(body: &'a [u8], key: &str) -> Option<&'a str> {
    // Each quote is tried as the key's opening one: a reply's body is a few
    // hundred bytes, where building a substring searcher costs more than
    // the search (it ran once per governed request).
    let key = key.as_bytes();
    for at in memchr::memchr_iter(b'"', body) {
        let Some(rest) = body[at + 1..].strip_prefix(key).and_then(|rest| rest.strip_prefix(b"\"")) else {
            continue;
        };
        let rest = rest.trim_ascii_start();
        let Some(after_colon) = rest.strip_prefix(b":") else { continue };
        let value = after_colon.trim_ascii_start().strip_prefix(b"\"")?;
        let end = memchr::memchr2(b'"', b'\\', value)?;
        if value[end] != b'"' {
            return None;
        }
        return std::str::from_utf8(&value[..end]).ok();
    }
    None
}

/// A whole number at a member path (`["generationConfig", "maxOutputTokens"]`),
/// walking one object level at a time without parsing anything else.
pub fn member_u64(body: &[u8], path: &[&str]) -> Option<u64> {
    let mut value = body;
    for key in path {
        value = top_level_value(value, key).ok()??;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// The raw value at a member path, each key of the path named at most once
/// at its level (a body that names one twice is an error: parsers disagree
/// on which wins, and the gateway must read what the upstream reads).
/// `Ok(None)` when a level is missing or is not an object.
pub fn member_once<'a>(body: &'a [u8], path: &[&'static str]) -> Result<Option<&'a [u8]>, ScanError> {
    let mut value = body;
    for key in path {
        if value.first() != Some(&b'{') {
            return Ok(None);
        }
        let mut found: Option<&'a [u8]> = None;
        walk_top_level(value, |name, start, end| {
            if name == key.as_bytes() {
                if found.is_some() {
                    return Err(ScanError::Duplicate(key));
                }
                found = Some(&value[start..end]);
            }
            Ok(true)
        })?;
        match found {
            Some(inner) => value = inner,
            None => return Ok(None),
        }
    }
    Ok(Some(value))
}

/// A JSON number read as a count: integers as they are, other numbers
/// (`1e18`, `12.5`) rounded up and saturated at `u64::MAX`. `None` for
/// anything that is not a non-negative number: the upstream refuses it.
pub fn count(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(value).ok()?;
    if let Ok(whole) = text.parse::<u64>() {
        return Some(whole);
    }
    let number = text.parse::<f64>().ok()?;
    // `as` saturates: 1e300 is u64::MAX, and NaN was refused above.
    (number.is_finite() && number >= 0.0).then(|| number.ceil() as u64)
}

/// Calls `visit(key, value_start, value_end)` for each top-level member
/// until it returns `false`. Keys come with their escapes resolved.
fn walk_top_level(
    body: &[u8],
    mut visit: impl FnMut(&[u8], usize, usize) -> Result<bool, ScanError>,
) -> Result<(), ScanError> {
    walk_members(body, |key, _, value_start, value_end| visit(key, value_start, value_end))
}

/// [`walk_top_level`] with where each member's key starts.
fn walk_members(
    body: &[u8],
    mut visit: impl FnMut(&[u8], usize, usize, usize) -> Result<bool, ScanError>,
) -> Result<(), ScanError> {
    let mut at = skip_ws(body, 0);
    expect(body, at, b'{', "expected `{`")?;
    at = skip_ws(body, at + 1);
    if body.get(at) == Some(&b'}') {
        return finish(body, at + 1);
    }
    loop {
        expect(body, at, b'"', "expected a key")?;
        let key_start = at;
        let key_end = string_end(body, at)?;
        let key = unescape_key(&body[at + 1..key_end - 1], at)?;
        at = skip_ws(body, key_end);
        expect(body, at, b':', "expected `:`")?;
        at = skip_ws(body, at + 1);
        let value_start = at;
        let value_end = value_end(body, at)?;
        if !visit(&key, key_start, value_start, value_end)? {
            return Ok(());
        }
        at = skip_ws(body, value_end);
        match body.get(at) {
            Some(b',') => at = skip_ws(body, at + 1),
            Some(b'}') => return finish(body, at + 1),
            _ => return Err(ScanError::at("expected `,` or `}`", at)),
        }
    }
}

/// The bytes around the one string that changes between a stream's frames
/// of one kind (its text delta): a decoder that read such a frame in full
/// remembers what came before and after the string's body, and a later
/// frame with the same bytes around one JSON string is that frame with
/// another text, compared and checked, not parsed.
#[derive(Debug, Default, Clone)]
pub struct Around {
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl Around {
    /// Remembers `frame`, whose string body (between its quotes) is `body`.
    pub fn remember(&mut self, frame: &[u8], body: Range<usize>) {
        self.head.clear();
        self.head.extend_from_slice(&frame[..body.start]);
        self.tail.clear();
        self.tail.extend_from_slice(&frame[body.end..]);
    }

    /// The body of the one JSON string `frame` holds between the bytes
    /// remembered (`None`: other bytes around it, or not one string: no
    /// bare quote or control character, every escape complete).
    pub fn body<'a>(&self, frame: &'a [u8]) -> Option<&'a [u8]> {
        if self.head.is_empty() || frame.len() < self.head.len() + self.tail.len() {
            return None;
        }
        if !frame.starts_with(&self.head) || !frame.ends_with(&self.tail) {
            return None;
        }
        let raw = &frame[self.head.len()..frame.len() - self.tail.len()];
        let mut at = 0;
        while let Some(found) = memchr::memchr2(b'"', b'\\', &raw[at..]) {
            match raw[at + found] {
                b'"' => return None,
                _ => at += found + 2,
            }
            if at > raw.len() {
                return None;
            }
        }
        (!raw.iter().any(|&b| b < 0x20)).then_some(raw)
    }
}

/// A JSON string's text from its body (the bytes between its quotes),
/// escapes resolved (`None`: not a valid body).
pub fn string_body(raw: &[u8]) -> Option<Cow<'_, str>> {
    unescape(raw, 0).ok()
}

/// `body` with the top-level `model` value replaced by `model` (a JSON
/// string is written; every other byte is copied as is).
pub fn splice_model(body: &[u8], span: Range<usize>, model: &str) -> Vec<u8> {
    let quoted = serde_json::to_string(model).unwrap_or_else(|_| String::from("\"\""));
    splice(body, span, quoted.as_bytes())
}

/// `body` with the bytes at `span` (a value a scan found) replaced by
/// `value`; every other byte is copied as is.
pub fn splice(body: &[u8], span: Range<usize>, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() - span.len() + value.len());
    out.extend_from_slice(&body[..span.start]);
    out.extend_from_slice(value);
    out.extend_from_slice(&body[span.end..]);
    out
}

/// `body` without its top-level member `key` (the first one named so) and
/// the comma that joined it to its neighbour; `None` when it has no such
/// member. Every other byte is copied as is.
pub fn without_member(body: &[u8], key: &str) -> Result<Option<Vec<u8>>, ScanError> {
    let mut previous_end = None;
    let mut found = None;
    walk_members(body, |name, key_start, _, value_end| {
        if name == key.as_bytes() {
            found = Some((previous_end, key_start, value_end));
            return Ok(false);
        }
        previous_end = Some(value_end);
        Ok(true)
    })?;
    let Some((previous_end, key_start, value_end)) = found else { return Ok(None) };
    let after = skip_ws(body, value_end);
    let cut = match (body.get(after), previous_end) {
        // Not the last member: it goes with the comma after it.
        (Some(b','), _) => key_start..skip_ws(body, after + 1),
        // The last of several: with the comma before it.
        (_, Some(previous_end)) => previous_end..value_end,
        // The only one.
        (_, None) => key_start..value_end,
    };
    Ok(Some(splice(body, cut, b"")))
}

/// One JSON array of the items of `arrays`, in order (each a JSON array's
/// text, as a scan found it or a store kept it): joined as bytes, never
/// parsed. Text that is not an array adds nothing.
pub fn join_arrays(arrays: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(arrays.iter().map(|a| a.len()).sum::<usize>() + 2);
    out.push(b'[');
    for array in arrays {
        let Some(inner) = array.trim_ascii().strip_prefix(b"[").and_then(|a| a.strip_suffix(b"]")) else { continue };
        let inner = inner.trim_ascii();
        if inner.is_empty() {
            continue;
        }
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(inner);
    }
    out.push(b']');
    out
}

fn finish(body: &[u8], at: usize) -> Result<(), ScanError> {
    let at = skip_ws(body, at);
    if at != body.len() {
        return Err(ScanError::at("trailing bytes after the object", at));
    }
    Ok(())
}

fn expect(body: &[u8], at: usize, byte: u8, message: &'static str) -> Result<(), ScanError> {
    if body.get(at) == Some(&byte) {
        Ok(())
    } else {
        Err(ScanError::at(message, at))
    }
}

fn skip_ws(body: &[u8], mut at: usize) -> usize {
    while matches!(body.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// End (exclusive, after the closing quote) of the string starting at `at`.
fn string_end(body: &[u8], at: usize) -> Result<usize, ScanError> {
    let mut i = at + 1;
    loop {
        match memchr::memchr2(b'"', b'\\', &body[i.min(body.len())..]) {
            None => return Err(ScanError::at("unterminated string", at)),
            Some(rel) => {
                let found = i + rel;
                if body[found] == b'\\' {
                    i = found + 2;
                    if i > body.len() {
                        return Err(ScanError::at("unterminated string", at));
                    }
                } else {
                    return Ok(found + 1);
                }
            }
        }
    }
}

/// End (exclusive) of the value starting at `at`.
pub(crate) fn value_end(body: &[u8], at: usize) -> Result<usize, ScanError> {
    match body.get(at) {
        Some(b'"') => string_end(body, at),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut i = at;
            while i < body.len() {
                match body[i] {
                    b'"' => {
                        i = string_end(body, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Ok(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            Err(ScanError::at("unterminated object or array", at))
        }
        Some(_) => {
            let len = body[at..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(body.len() - at);
            if len == 0 {
                return Err(ScanError::at("expected a value", at));
            }
            Ok(at + len)
        }
        None => Err(ScanError::at("expected a value", at)),
    }
}

/// A member name's bytes, escapes resolved. Names are only compared with
/// the ASCII names the gateway reads, so one without escapes is used as it
/// is, unvalidated (the common case, on every member of every body scanned).
fn unescape_key(raw: &[u8], offset: usize) -> Result<Cow<'_, [u8]>, ScanError> {
    if memchr::memchr(b'\\', raw).is_none() {
        return Ok(Cow::Borrowed(raw));
    }
    unescape(raw, offset).map(|name| Cow::Owned(name.into_owned().into_bytes()))
}

fn unescape(raw: &[u8], offset: usize) -> Result<Cow<'_, str>, ScanError> {
    if memchr::memchr(b'\\', raw).is_none() {
        return std::str::from_utf8(raw).map(Cow::Borrowed).map_err(|_| ScanError::at("invalid utf-8", offset));
    }
    let mut quoted = Vec::with_capacity(raw.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(raw);
    quoted.push(b'"');
    serde_json::from_slice::<String>(&quoted)
        .map(Cow::Owned)
        .map_err(|_| ScanError::at("invalid string escape", offset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_member_is_cut_with_one_comma_wherever_it_stands() {
        let cut = |body: &str| without_member(body.as_bytes(), "p").unwrap().map(|b| String::from_utf8(b).unwrap());
        assert_eq!(cut(r#"{"p":"x", "a":1}"#).as_deref(), Some(r#"{"a":1}"#));
        assert_eq!(cut(r#"{"a":1, "p" : [1,{"q":2}] }"#).as_deref(), Some(r#"{"a":1 }"#));
        assert_eq!(cut(r#"{"a":1,"p":null,"b":2}"#).as_deref(), Some(r#"{"a":1,"b":2}"#));
        assert_eq!(cut(r#"{ "p":1 }"#).as_deref(), Some(r#"{  }"#));
        assert_eq!(cut(r#"{"a":{"p":1}}"#), None, "a nested member is not the top level's");
        for body in [r#"{"p":"x", "a":1}"#, r#"{"a":1, "p" : [1,{"q":2}] }"#, r#"{"a":1,"p":null,"b":2}"#] {
            let value: serde_json::Value = serde_json::from_str(&cut(body).unwrap()).unwrap();
            assert!(value.get("p").is_none() && value.get("a").is_some());
        }
    }

    #[test]
    fn arrays_join_as_bytes() {
        assert_eq!(join_arrays(&[b"[1, 2]", b" [] ", b"[{\"a\":[3]}]"]), b"[1, 2,{\"a\":[3]}]");
        assert_eq!(join_arrays(&[b"[]", b"{}"]), b"[]");
        assert_eq!(splice(b"{\"a\":1}", 5..6, b"[2]"), b"{\"a\":[2]}");
    }

    #[test]
    fn a_frame_with_the_same_bytes_around_one_string_is_read_without_a_parse() {
        let first = br#"{"a":1,"text":"Hi \"you\"","b":[2]}"#;
        let start = first.windows(8).position(|w| w == br#""text":""#).unwrap() + 8;
        let end = start + br#"Hi \"you\""#.len();
        let mut around = Around::default();
        assert_eq!(around.body(first), None, "nothing remembered yet");
        around.remember(first, start..end);
        assert_eq!(around.body(first), Some(&br#"Hi \"you\""#[..]));
        let next = br#"{"a":1,"text":"a\\b \u00e9","b":[2]}"#;
        let body = around.body(next).unwrap();
        assert_eq!(string_body(body).as_deref(), Some("a\\b é"));
        assert_eq!(around.body(br#"{"a":1,"text":"x","y":"z","b":[2]}"#), None, "a bare quote: two strings");
        assert_eq!(around.body(br#"{"a":1,"text":"x\","b":[2]}"#), None, "an escape cut at the end");
        assert_eq!(around.body(br#"{"a":2,"text":"x","b":[2]}"#), None, "other bytes around it");
        assert_eq!(around.body(b"{\"a\":1,\"text\":\"x\ny\",\"b\":[2]}"), None, "a raw control character");
        assert_eq!(around.body(br#"{"a":1,"text":"","b":[2]}"#), Some(&b""[..]));
    }

    #[test]
    fn finds_model_and_stream_at_top_level_only() {
        let body = br#" {"messages":[{"model":"inner","x":"}\"]"}],"model":"gpt-4o","stream":true,"n":1.5e3} "#;
        let top = scan_top_level(body).unwrap();
        assert_eq!(top.model.as_deref(), Some("gpt-4o"));
        assert_eq!(top.stream, Some(true));
        let spliced = splice_model(body, top.model_span.unwrap(), "m\"2");
        let value: serde_json::Value = serde_json::from_slice(&spliced).unwrap();
        assert_eq!(value["model"], "m\"2");
        assert_eq!(value["messages"][0]["model"], "inner");
    }

    #[test]
    fn finds_the_first_string_member_and_never_one_inside_a_string() {
        let body =
            br#"{"choices":[{"message":{"content":"say \"finish_reason\": \"evil\""},"finish_reason" : "stop"}]}"#;
        assert_eq!(first_string_member(body, "finish_reason"), Some("stop"));
        assert_eq!(first_string_member(br#"{"finish_reason":null}"#, "finish_reason"), None);
        assert_eq!(first_string_member(br#"{"finish_reason":"a\"b"}"#, "finish_reason"), None);
        assert_eq!(
            first_string_member(br#"{"x":"finish_reason","finish_reason":"length"}"#, "finish_reason"),
            Some("length")
        );
        assert_eq!(first_string_member(br#"{"other":"stop"}"#, "finish_reason"), None);
    }

    proptest! {
        /// Whatever text a reply carries, the member found is the member
        /// serde sees.
        #[test]
        fn the_member_found_is_the_member_parsed(text in ".*", reason in "[a-z_]{1,12}") {
            let body = serde_json::json!({"choices": [{"message": {"content": text}, "finish_reason": reason}]}).to_string();
            prop_assert_eq!(first_string_member(body.as_bytes(), "finish_reason"), Some(reason.as_str()));
        }
    }

    #[test]
    fn a_last_member_is_found_from_the_end_and_only_at_the_top_level() {
        let body = br#"{"data":[{"usage":{"x":1}}],"model":"m","usage" : {"prompt_tokens":3} }"#;
        assert_eq!(last_top_level_value(body, "usage"), Some(&br#"{"prompt_tokens":3}"#[..]));
        // Nested last: not the top level's.
        assert_eq!(last_top_level_value(br#"{"a":{"usage":{"p":1}}}"#, "usage"), None);
        // Not last: the walk finds it.
        let first = br#"{"usage":{"p":2},"data":[1,2]}"#;
        assert_eq!(last_top_level_value(first, "usage"), None);
        assert_eq!(top_level_value_from_end(first, "usage"), Some(&br#"{"p":2}"#[..]));
        // A quoted name inside a string is never a member.
        assert_eq!(last_top_level_value(br#"{"a":""usage":{}"}"#, "usage"), None);
        assert_eq!(last_top_level_value(b"{\"usage\":", "usage"), None);
    }

    #[test]
    fn finds_one_top_level_value() {
        let body = br#"{"choices":[{"usage":1}],"usage":{"prompt_tokens":3},"id":"x"}"#;
        assert_eq!(top_level_value(body, "usage").unwrap(), Some(&br#"{"prompt_tokens":3}"#[..]));
        assert_eq!(top_level_value(body, "missing").unwrap(), None);
        assert!(top_level_value(b"[1]", "usage").is_err());
    }

    #[test]
    fn whole_numbers_at_member_paths() {
        let body = br#"{"generationConfig":{"temperature":0.2,"maxOutputTokens":512},"max_tokens":7}"#;
        assert_eq!(member_u64(body, &["generationConfig", "maxOutputTokens"]), Some(512));
        assert_eq!(member_u64(body, &["max_tokens"]), Some(7));
        assert_eq!(member_u64(body, &["generationConfig", "temperature"]), None);
        assert_eq!(member_u64(body, &["missing", "x"]), None);
    }

    #[test]
    fn unescapes_the_model() {
        let top = scan_top_level(br#"{"model":"a\u00e9\/b"}"#).unwrap();
        assert_eq!(top.model.as_deref(), Some("aé/b"));
    }

    #[test]
    fn escaped_keys_are_the_members_they_spell() {
        let top = scan_top_level(br#"{"mod\u0065l":"m","\u0073tream":true}"#).unwrap();
        assert_eq!(top.model.as_deref(), Some("m"));
        assert_eq!(top.stream, Some(true));
        assert_eq!(top_level_value(br#"{"us\u0061ge":{"a":1}}"#, "usage").unwrap(), Some(&br#"{"a":1}"#[..]));
    }

    #[test]
    fn a_watched_member_named_twice_is_refused() {
        for body in [
            &br#"{"model":"pool","mod\u0065l":"gpt-4o"}"#[..],
            br#"{"model":"a","model":"b"}"#,
            br#"{"stream":false,"messages":[],"str\u0065am":true}"#,
            br#"{"stream_options":{},"stream_options":{"include_usage":true}}"#,
        ] {
            let err = scan_top_level(body).unwrap_err();
            assert!(matches!(err, ScanError::Duplicate(_)), "{err}");
        }
        // Members the gateway does not read may repeat: the upstream decides.
        assert!(scan_top_level(br#"{"model":"m","n":1,"n":2}"#).is_ok());
    }

    #[test]
    fn rejects_non_objects_and_truncation() {
        for bad in [&b""[..], b"[]", b"{", b"{\"model\"", b"{\"model\":\"x}", b"{\"a\":1,}", b"{} x"] {
            assert!(scan_top_level(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(scan_top_level(b"{}").unwrap(), TopLevel::default());
    }

    proptest! {
        #[test]
        fn agrees_with_serde_on_valid_objects(model in "[a-zA-Z0-9\"\\\\/é:.-]{0,20}", stream in any::<Option<bool>>(), other in any::<i32>()) {
            let mut value = serde_json::json!({"messages": [{"role": "user", "content": "{\"model\":1}"}], "model": model, "x": other});
            if let Some(stream) = stream {
                value["stream"] = serde_json::Value::Bool(stream);
            }
            let body = serde_json::to_vec(&value).unwrap();
            let top = scan_top_level(&body).unwrap();
            prop_assert_eq!(top.model.as_deref(), Some(model.as_str()));
            prop_assert_eq!(top.stream, stream);
            let spliced = splice_model(&body, top.model_span.unwrap(), "new");
            let mut expected = value.clone();
            expected["model"] = serde_json::Value::from("new");
            prop_assert_eq!(serde_json::from_slice::<serde_json::Value>(&spliced).unwrap(), expected);
        }

        /// The gateway reads what an upstream's JSON parser reads: for bodies
        /// with escaped keys and repeated members, either the scanner refuses a
        /// repeated watched member, or its `model` and `stream` are serde_json's
        /// (which, like most parsers, keeps the last of a repeated member).
        #[test]
        fn agrees_with_serde_on_escaped_and_repeated_keys(
            members in proptest::collection::vec((0usize..5, any::<bool>(), 0usize..4), 0..8),
        ) {
            const KEYS: [&str; 5] = ["model", "stream", "stream_options", "messages", "n"];
            let mut body = String::from("{");
            let mut names = Vec::new();
            for (index, (key, escape, value)) in members.iter().enumerate() {
                if index > 0 {
                    body.push(',');
                }
                let name = KEYS[*key];
                names.push(name);
                let written: String = if *escape {
                    name.chars().map(|c| format!("\\u{:04x}", c as u32)).collect()
                } else {
                    name.to_owned()
                };
                let value = match value {
                    0 => format!("\"m{index}\""),
                    1 => "true".to_owned(),
                    2 => "false".to_owned(),
                    _ => format!("{{\"model\":\"inner{index}\"}}"),
                };
                body.push_str(&format!("\"{written}\":{value}"));
            }
            body.push('}');
            let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
            let repeated = WATCHED.iter().any(|w| names.iter().filter(|n| *n == w).count() > 1);
            match scan_top_level(body.as_bytes()) {
                Err(ScanError::Duplicate(_)) => prop_assert!(repeated, "{}", body),
                Err(err) => prop_assert!(false, "{} on {}", err, body),
                Ok(top) => {
                    prop_assert!(!repeated, "{}", body);
                    prop_assert_eq!(top.model.as_deref(), parsed.get("model").and_then(|m| m.as_str()));
                    prop_assert_eq!(top.stream, parsed.get("stream").and_then(serde_json::Value::as_bool));
                }
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = scan_top_level(&bytes);
        }
    }
}
