//! Guardrails cannot be bypassed by encoding (issue 43): the fuzzer picks
//! a protocol, a place in its body (a member skipped once, a member name,
//! base64 media), the characters' shapes (fullwidth, mathematical,
//! zero-width), JSON escapes, the text around, a length and a stream's
//! cuts; what a policy blocks or masks in plain text must be blocked or
//! masked there. The property is shared with the guard crate's proptest.
#![no_main]

#[path = "../../crates/guard/tests/encodings/property.rs"]
mod property;

use libfuzzer_sys::fuzz_target;
use property::{check, screen, Case};

static SCREEN: std::sync::OnceLock<switchyard_guard::Screen> = std::sync::OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let byte = |at: usize| data.get(at).copied().unwrap_or(0);
    let rest = data.get(8..).unwrap_or(&[]);
    let (shapes, rest) = rest.split_at(rest.len().min(20));
    let text = String::from_utf8_lossy(rest);
    let middle = text.char_indices().nth(text.chars().count() / 2).map_or(text.len(), |(at, _)| at);
    let case = Case {
        protocol: usize::from(byte(0)),
        place: usize::from(byte(1)),
        member: usize::from(byte(2)),
        mask: byte(3) & 1 == 1,
        url_safe: byte(3) & 2 == 2,
        // Now and then past the 64 KiB window.
        padding: if byte(4) >= 250 { 70 } else { byte(4) % 3 },
        escapes: vec![byte(5), byte(6), byte(7)],
        shapes: shapes.to_vec(),
        before: text[..middle].to_owned(),
        after: text[middle..].to_owned(),
        cuts: [5, 6, 7, 4].iter().map(|&at| usize::from(byte(at)) * 7).collect(),
    };
    if let Err(bypass) = check(SCREEN.get_or_init(screen), &case) {
        panic!("{bypass}\n{case:?}");
    }
});
