//! The property the guardrails' proptest (`tests/encodings.rs`) and fuzz
//! target (`fuzz/fuzz_targets/guardrail_encodings.rs`) check: what a policy
//! blocks or masks in plain text is blocked or masked in any encoding a
//! protocol allows: JSON escapes, fullwidth, mathematical and zero-width
//! characters, any member (a name skipped once, or the name itself), media
//! that is text in base64, any length, and any split of a stream.
//!
//! A case is a few choices; [`check`] builds the body in the chosen
//! protocol's shape, screens it as the gateway does (the codec's places,
//! then [`Screen::screen`] on every string), and reads the result back
//! independently of the guard: the blocked phrase must block, the email
//! must be gone from every string (base64 decoded) with a placeholder in
//! its stead.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use switchyard_guard::stream::StreamMask;
use switchyard_guard::{json, Action, Direction, Masks, PolicySpec, Screen};
use switchyard_protocol::ir::Protocol;

/// The phrase a policy blocks.
pub const BLOCKED: &str = "forbidden-phrase";
/// What a policy masks.
pub const MASKED: &str = "ann@example.com";

/// Member names the screen once skipped, and a few more.
pub const MEMBERS: [&str; 18] = [
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
    "url",
    "file_data",
    "blob",
    "text",
];

/// Characters that fold to nothing.
const IGNORABLES: [char; 9] =
    ['\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{00AD}', '\u{FE0F}', '\u{FEFF}', '\u{034F}', '\u{E0020}'];

/// One case: every field is a choice, any value allowed.
#[derive(Debug, Clone, Default)]
pub struct Case {
    /// The protocol (an index into [`Protocol::ALL`]).
    pub protocol: usize,
    /// Where in its body the text goes.
    pub place: usize,
    /// The member name, where the place takes one.
    pub member: usize,
    /// Mask the email rather than block the phrase.
    pub mask: bool,
    /// How each character of the phrase is written: plain, fullwidth,
    /// mathematical bold, or followed by an ignorable.
    pub shapes: Vec<u8>,
    /// Which characters of the JSON string are written as `\u` escapes.
    pub escapes: Vec<u8>,
    /// Text around the phrase (spaces keep it a word of its own).
    pub before: String,
    /// See `before`.
    pub after: String,
    /// Filler before it, in thousands of bytes (past 64 KiB, the screen
    /// reads in windows).
    pub padding: u8,
    /// Base64 media in the URL-safe alphabet without padding.
    pub url_safe: bool,
    /// Where a stream of the text is cut.
    pub cuts: Vec<usize>,
}

/// The screen: the phrase blocked, emails masked, both ways.
pub fn screen() -> Screen {
    let spec = |name: &str, action| PolicySpec {
        name: name.into(),
        action,
        request: true,
        response: true,
        literals: Vec::new(),
        regexes: Vec::new(),
        detect: Vec::new(),
        first_rule: 0,
        moderator: None,
        reversible: false,
    };
    let mut words = spec("words", Action::Block);
    words.literals = vec![BLOCKED.to_owned()];
    let mut pii = spec("pii", Action::Mask);
    pii.detect = vec!["email".to_owned()];
    match Screen::compile(&[words, pii]) {
        Ok(screen) => screen,
        Err((at, err)) => unreachable!("{at}: {err}"),
    }
}

impl Case {
    fn target(&self) -> &'static str {
        if self.mask {
            MASKED
        } else {
            BLOCKED
        }
    }

    /// The target as written: each character in its chosen shape.
    pub fn shaped(&self) -> String {
        let mut out = String::new();
        for (at, c) in self.target().chars().enumerate() {
            let shape = self.shapes.get(at).copied().unwrap_or(0) % 5;
            match shape {
                1 => out.push(char::from_u32(c as u32 + 0xFEE0).unwrap_or(c)),
                2 if c.is_ascii_lowercase() => out.push(char::from_u32(0x1D41A + (c as u32 - 'a' as u32)).unwrap_or(c)),
                3 => {
                    out.push(c);
                    out.push(IGNORABLES[at % IGNORABLES.len()]);
                }
                _ => out.push(c),
            }
        }
        out
    }

    /// The whole text: filler, the surrounding text, the shaped target.
    pub fn text(&self) -> String {
        let filler = "lorem ipsum ".repeat(usize::from(self.padding) * 1000 / 12);
        format!("{filler}{} {} {}", clean(&self.before), self.shaped(), clean(&self.after))
    }

    /// `text` as a JSON string literal, some characters as `\u` escapes.
    fn literal(&self, text: &str) -> String {
        let mut out = String::from("\"");
        for (at, c) in text.chars().enumerate() {
            let escape = self.escapes.get(at % self.escapes.len().max(1)).copied().unwrap_or(0) % 3 == 1;
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '/' if escape => out.push_str("\\/"),
                c if (c as u32) < 0x20 || escape => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    /// The body, in the protocol's shape, with the text at the place.
    pub fn body(&self, text: &str) -> (Protocol, String) {
        let protocol = Protocol::ALL[self.protocol % Protocol::ALL.len()];
        let templates = templates(protocol);
        let template = templates[self.place % templates.len()];
        let media = match self.url_safe {
            true => URL_SAFE_NO_PAD.encode(text),
            false => STANDARD.encode(text),
        };
        let body = template
            .replace("@K@", &self.literal(MEMBERS[self.member % MEMBERS.len()]))
            .replace("@B@", &self.literal(&media))
            .replace("@U@", &self.literal(&format!("data:text/plain;base64,{media}")))
            .replace("@S@", &self.literal(text));
        (protocol, body)
    }
}

/// Surrounding text without the targets' characters' look-alikes mattering:
/// printable, and never the target itself.
fn clean(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(64).collect()
}

/// Where each protocol's requests carry text: `@S@` the text, `@K@` a
/// member name, `@B@` the text in base64, `@U@` it in a data URL.
fn templates(protocol: Protocol) -> &'static [&'static str] {
    match protocol {
        Protocol::OpenAi => &[
            r#"{"model":"m","messages":[{"role":"user","content":@S@}]}"#,
            r#"{"model":"m","messages":[{"role":"system","content":@S@},{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#,
            r#"{"model":"m","messages":[{"role":"tool","tool_call_id":@S@,"content":"ok"}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{@S@:{"type":"string"}}}}}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_data":@U@}}]}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":@B@,"format":"wav"}}]}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":@S@}}]}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"x"}],"metadata":{@K@:@S@}}"#,
            r#"{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":@S@}}]}]}"#,
        ],
        Protocol::Responses => &[
            r#"{"model":"m","input":@S@}"#,
            r#"{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":@S@}]}]}"#,
            r#"{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_file","file_data":@U@}]}]}"#,
            r#"{"model":"m","input":[{"type":"reasoning","summary":[{"type":"summary_text","text":@S@}],"encrypted_content":"x"}]}"#,
            r#"{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":@S@}]}"#,
        ],
        Protocol::Anthropic => &[
            r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":@S@}]}"#,
            r#"{"model":"m","max_tokens":1,"system":@S@,"messages":[{"role":"user","content":"hi"}]}"#,
            r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":@S@}}]}]}"#,
            r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"document","source":{"data":@B@,"type":"base64","media_type":"text/plain"}}]}]}"#,
            r#"{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{@K@:@S@}}]}]}"#,
            r#"{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{@S@:1}}]}]}"#,
            r#"{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":@S@,"signature":"sig"}]}]}"#,
            r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":@S@}]}]}]}"#,
        ],
        Protocol::Gemini => &[
            r#"{"contents":[{"role":"user","parts":[{"text":@S@}]}]}"#,
            r#"{"systemInstruction":{"parts":[{"text":@S@}]},"contents":[{"role":"user","parts":[{"text":"hi"}]}]}"#,
            r#"{"contents":[{"role":"user","parts":[{"inlineData":{"mimeType":"text/plain","data":@B@}}]}]}"#,
            r#"{"contents":[{"role":"user","parts":[{"inline_data":{"mime_type":"text/plain","data":@B@}}]}]}"#,
            r#"{"contents":[{"role":"model","parts":[{"functionCall":{"name":"f","args":{@K@:@S@}}}]}]}"#,
        ],
        Protocol::Cohere => &[
            r#"{"model":"m","messages":[{"role":"user","content":@S@}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"x"}],"documents":[{"id":"d","data":{@K@:@S@}}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":@U@}}]}]}"#,
        ],
        Protocol::Bedrock => &[
            r#"{"messages":[{"role":"user","content":[{"text":@S@}]}]}"#,
            r#"{"messages":[{"role":"user","content":[{"document":{"format":"txt","name":"n","source":{"bytes":@B@}}}]}]}"#,
            r#"{"messages":[{"role":"assistant","content":[{"toolUse":{"toolUseId":"t","name":"f","input":{@K@:@S@}}}]}]}"#,
            r#"{"messages":[{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":@S@,"signature":"s"}}}]}]}"#,
            r#"{"system":[{"text":@S@}],"messages":[{"role":"user","content":[{"text":"hi"}]}]}"#,
        ],
    }
}

/// Every string of a JSON value, member names included, and each base64
/// string's text (bare or in a data URL) beside it.
fn strings(value: &serde_json::Value, out: &mut Vec<String>) {
    fn add(text: &str, out: &mut Vec<String>) {
        let payload = text.split_once(";base64,").map_or(text, |(_, data)| data);
        for engine in [&STANDARD, &URL_SAFE_NO_PAD] {
            if let Some(decoded) = engine.decode(payload).ok().and_then(|bytes| String::from_utf8(bytes).ok()) {
                out.push(decoded);
            }
        }
        out.push(text.to_owned());
    }
    match value {
        serde_json::Value::String(text) => add(text, out),
        serde_json::Value::Array(items) => items.iter().for_each(|item| strings(item, out)),
        serde_json::Value::Object(members) => {
            for (name, item) in members {
                add(name, out);
                strings(item, out);
            }
        }
        _ => {}
    }
}

/// Checks `case`: `Err` says how the screen was bypassed.
pub fn check(screen: &Screen, case: &Case) -> Result<(), String> {
    let text = case.text();
    let shaped = case.shaped();
    let (protocol, body) = case.body(&text);
    let places = switchyard_protocol::codec(protocol).opaque().request;
    let (mut masks, mut decisions) = (Masks::default(), Vec::new());
    let screened = json::screen(screen, body.as_bytes(), places, Direction::Request, &mut masks, &mut decisions);
    let short = |body: &str| body.chars().take(600).collect::<String>();
    match screened {
        Err(malformed) => return Err(format!("{protocol}: {malformed} in {}", short(&body))),
        Ok(Err(_blocked)) if !case.mask => {}
        // The text around it may hold the phrase too.
        Ok(Err(_blocked)) => {}
        Ok(Ok(_)) if !case.mask => return Err(format!("{protocol}: not blocked: {}", short(&body))),
        Ok(Ok(None)) => return Err(format!("{protocol}: not masked: {}", short(&body))),
        Ok(Ok(Some(out))) => {
            let value: serde_json::Value =
                serde_json::from_slice(&out).map_err(|err| format!("{protocol}: masked body unreadable: {err}"))?;
            let mut found = Vec::new();
            strings(&value, &mut found);
            if found.iter().any(|s| s.contains(&shaped)) {
                return Err(format!("{protocol}: {shaped:?} left in {}", short(&String::from_utf8_lossy(&out))));
            }
            if !found.iter().any(|s| s.contains("[EMAIL_1]")) {
                return Err(format!("{protocol}: no placeholder in {}", short(&String::from_utf8_lossy(&out))));
            }
        }
    }
    check_stream(screen, case, &text, &shaped)
}

/// The text as a stream's reply, cut at the case's points.
fn check_stream(screen: &Screen, case: &Case, text: &str, shaped: &str) -> Result<(), String> {
    let mut mask = StreamMask::new(std::sync::Arc::new(screen.clone()));
    let (mut masks, mut decisions) = (Masks::default(), Vec::new());
    let mut points: Vec<usize> =
        case.cuts.iter().map(|c| c % (text.len() + 1)).filter(|&c| text.is_char_boundary(c)).collect();
    points.sort_unstable();
    points.dedup();
    let mut out = String::new();
    let mut from = 0;
    for point in points.into_iter().chain([text.len()]) {
        match mask.push(&text[from..point], &mut masks, &mut decisions) {
            Ok(released) => out.push_str(&released),
            Err(_) => return Ok(()),
        }
        from = point;
    }
    match mask.flush(&mut masks, &mut decisions) {
        Ok(released) => out.push_str(&released),
        Err(_) => return Ok(()),
    }
    if !case.mask {
        return Err(format!("stream not blocked: {:?}", text.chars().take(300).collect::<String>()));
    }
    if out.contains(shaped) || !out.contains("[EMAIL_1]") {
        return Err(format!("stream not masked: {:?}", out.chars().take(300).collect::<String>()));
    }
    Ok(())
}
