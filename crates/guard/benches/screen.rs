//! What screening costs the request path: bench/run.sh's guarded case (a
//! policy of 20 regexes, request and reply) on its chat body, which holds
//! no match (the common path: one question of the whole body), the same
//! body with escapes (every string walked and screened), a body in French
//! and Japanese (text already folded), one with a fullwidth match to mask
//! (folded, mapped back), a whole reply, and a reply streamed in 64 deltas.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use switchyard_codec::opaque::{Holds, Place};
use switchyard_guard::stream::StreamMask;
use switchyard_guard::{json, Action, Direction, Masks, PolicySpec, Screen};

/// The OpenAI codec's request places, as the engine passes them.
const PLACES: &[Place] = &[
    Place::at(&["messages", "content", "image_url", "url"], Holds::Media),
    Place::at(&["messages", "content", "input_audio", "data"], Holds::Media),
    Place::at(&["messages", "content", "file", "file_data"], Holds::Media),
    Place::at(&["messages", "tool_calls", "extra_content", "google", "thought_signature"], Holds::Signed),
    Place::when(&["messages", "thinking_blocks", "signature"], "type", &["thinking"], Holds::Signed),
    Place::when(&["messages", "thinking_blocks", "data"], "type", &["redacted_thinking"], Holds::Signed),
];

fn twenty() -> Screen {
    let regexes = (0..20u8)
        .map(|i| {
            let letter = char::from(b'A' + i);
            (format!("r{i:02}"), format!("{letter}{letter}{letter}-[0-9]{{6}}"))
        })
        .collect();
    let spec = PolicySpec {
        name: "twenty".into(),
        action: Action::Mask,
        request: true,
        response: true,
        literals: Vec::new(),
        regexes,
        detect: Vec::new(),
        first_rule: 0,
        moderator: None,
        reversible: false,
    };
    Screen::compile(&[spec]).unwrap_or_else(|(at, err)| unreachable!("{at}: {err}"))
}

fn body(text: &str) -> Vec<u8> {
    serde_json::json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}]})
        .to_string()
        .into_bytes()
}

/// The engine's request screen: one question, then the walk if needed.
fn screened(screen: &Screen, body: &[u8]) -> usize {
    if !screen.may_match(body, PLACES) {
        return 0;
    }
    let (mut masks, mut decisions) = (Masks::default(), Vec::new());
    let out = json::screen(screen, body, PLACES, Direction::Request, &mut masks, &mut decisions);
    match out {
        Ok(Ok(Some(out))) => out.len(),
        _ => 1,
    }
}

fn bench(c: &mut Criterion) {
    let screen = twenty();
    let plain = body("hello there, this is a small benchmark chat");
    let escaped = body("hello there,\nthis is a small \"benchmark\" chat\n".repeat(4).as_str());
    let foreign =
        body("bonjour, ceci est une petite conversation de test; これは小さなベンチマークです。".repeat(2).as_str());
    let masked = body("ticket ＡＡＡ-１２３４５６ and AAA-654321, please");
    for (name, body) in [("plain", &plain), ("escaped", &escaped), ("foreign", &foreign), ("masked", &masked)] {
        c.bench_function(&format!("request/{name}"), |b| b.iter(|| screened(&screen, std::hint::black_box(body))));
    }
    let screen = Arc::new(screen);
    let words: Vec<String> = (0..64).map(|i| format!("word{i} ")).collect();
    c.bench_function("stream/64 deltas", |b| {
        b.iter(|| {
            let mut mask = StreamMask::new(screen.clone());
            let (mut masks, mut decisions) = (Masks::default(), Vec::new());
            let mut out = 0;
            for word in &words {
                let mut text = word.clone();
                if mask.push_in_place(&mut text, &mut masks, &mut decisions).is_ok() {
                    out += text.len();
                }
            }
            out + mask.flush(&mut masks, &mut decisions).map_or(0, |rest| rest.len())
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
