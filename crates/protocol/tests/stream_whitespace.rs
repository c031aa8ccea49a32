//! Every SSE stream fixture, written again with arbitrary legal JSON
//! whitespace (as Python-served backends write it: `"finish_reason": "stop"`),
//! must decode to the same events, and the usage tap of a passthrough must
//! reach the same usage and the same verdict (finished, failed) as the full
//! decoder over the fixture as it was.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::path::PathBuf;

use proptest::prelude::*;
use serde_json::Value;
use switchyard_protocol::ir::{Accumulator, Protocol, StopReason, StreamEvent, Usage};
use switchyard_protocol::tap::UsageTap;
use switchyard_protocol::{codec, Framing, StreamDecoder};

/// The SSE fixtures of each protocol's crate.
fn fixtures() -> Vec<(Protocol, String, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    for (protocol, dir) in [
        (Protocol::OpenAi, "protocol-openai"),
        (Protocol::Responses, "protocol-responses"),
        (Protocol::Anthropic, "protocol-anthropic"),
        (Protocol::Gemini, "protocol-gemini"),
        (Protocol::Cohere, "protocol-cohere"),
    ] {
        let fixtures = root.join(dir).join("tests/fixtures");
        let Ok(entries) = std::fs::read_dir(&fixtures) else { panic!("no fixtures at {}", fixtures.display()) };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "sse") {
                let text = std::fs::read_to_string(&path).unwrap();
                found.push((protocol, path.file_name().unwrap().to_string_lossy().into_owned(), text));
            }
        }
    }
    assert!(found.len() >= 10, "found {} fixtures", found.len());
    found
}

/// Whitespace drawn from `pick`, one choice per call, cycling.
struct Spacer<'a> {
    pick: &'a [u8],
    at: usize,
}

impl Spacer<'_> {
    fn space(&mut self, out: &mut String) {
        if self.pick.is_empty() {
            return;
        }
        let choice = self.pick[self.at % self.pick.len()];
        self.at += 1;
        // Mostly nothing or one space; sometimes a run of spaces and tabs.
        match choice % 8 {
            0..=3 => {}
            4 | 5 => out.push(' '),
            6 => out.push('\t'),
            _ => out.push_str("  \t "),
        }
    }

    fn write(&mut self, value: &Value, out: &mut String) {
        self.space(out);
        match value {
            Value::Object(members) => {
                out.push('{');
                for (i, (name, member)) in members.iter().enumerate() {
                    if i > 0 {
                        self.space(out);
                        out.push(',');
                    }
                    self.space(out);
                    out.push_str(&serde_json::to_string(name).unwrap());
                    self.space(out);
                    out.push(':');
                    self.write(member, out);
                }
                self.space(out);
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.space(out);
                        out.push(',');
                    }
                    self.write(item, out);
                }
                self.space(out);
                out.push(']');
            }
            scalar => out.push_str(&serde_json::to_string(scalar).unwrap()),
        }
        self.space(out);
    }
}

/// The fixture with every JSON `data:` line written again with whitespace.
fn respace(text: &str, pick: &[u8]) -> String {
    let mut spacer = Spacer { pick, at: 0 };
    let mut out = String::with_capacity(text.len() * 2);
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        let parsed = body
            .strip_prefix("data:")
            .and_then(|data| serde_json::from_str::<Value>(data.trim_start()).ok().map(|v| (data, v)));
        match parsed {
            Some((_, value)) if value.is_object() || value.is_array() => {
                out.push_str("data: ");
                spacer.write(&value, &mut out);
            }
            _ => out.push_str(body),
        }
        out.push_str(end);
    }
    out
}

fn decode(decoder: &mut dyn StreamDecoder, bytes: &[u8]) -> Vec<StreamEvent> {
    let mut out = Vec::new();
    // Two chunks, to exercise the carry across a cut.
    let (a, b) = bytes.split_at(bytes.len() / 3);
    decoder.feed(a, &mut out).unwrap();
    decoder.feed(b, &mut out).unwrap();
    decoder.finish(&mut out).unwrap();
    out
}

/// What metering and the relay take from a stream: its usage, stop
/// reason, and whether it finished or failed (read by the IR's own
/// `Accumulator`).
#[derive(Debug, PartialEq)]
struct Verdict {
    usage: Usage,
    stop_reason: Option<StopReason>,
    finished: bool,
    failed: bool,
}

fn verdict(events: &[StreamEvent]) -> Verdict {
    let mut accumulator = Accumulator::new();
    for event in events {
        accumulator.push(event);
    }
    let (usage, finished, failed) = (*accumulator.usage(), accumulator.is_finished(), accumulator.error().is_some());
    Verdict { usage, stop_reason: accumulator.into_response().stop_reason, finished, failed }
}

#[test]
fn the_fixtures_themselves_finish_or_fail() {
    for (protocol, name, text) in fixtures() {
        let events = decode(&mut *codec(protocol).stream_decoder(), text.as_bytes());
        let v = verdict(&events);
        assert!(v.finished || v.failed, "{protocol} {name}: {v:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn any_legal_whitespace_gives_the_same_events_usage_and_verdict(pick in proptest::collection::vec(any::<u8>(), 1..64)) {
        for (protocol, name, text) in fixtures() {
            let spaced = respace(&text, &pick);
            let codec = codec(protocol);
            let original = decode(&mut *codec.stream_decoder(), text.as_bytes());
            let events = decode(&mut *codec.stream_decoder(), spaced.as_bytes());
            prop_assert_eq!(&events, &original, "{} {}: full decode of\n{}", protocol, name, spaced);
            let mut tap = UsageTap::new(codec.stream_decoder(), Framing::Sse);
            let tapped = decode(&mut tap, spaced.as_bytes());
            prop_assert_eq!(verdict(&tapped), verdict(&original), "{} {}: tapped\n{}", protocol, name, spaced);
        }
    }
}
