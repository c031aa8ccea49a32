//! Admission's arithmetic under whatever a caller sends: the first byte
//! picks the protocol; the rest is either a whole body, or (first byte's
//! high bit set) the number texts placed in every member admission reads.
//! The checks are the property test's (`crates/protocol/tests/support/admission.rs`).
#![no_main]

#[path = "../../crates/protocol/tests/support/admission.rs"]
mod admission;

use libfuzzer_sys::fuzz_target;
use switchyard_protocol::ir::Protocol;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let protocol = Protocol::ALL[usize::from(selector & 0x7f) % Protocol::ALL.len()];
    if selector & 0x80 == 0 {
        admission::drive(protocol, rest, (u64::MAX, u64::MAX));
        return;
    }
    let text = String::from_utf8_lossy(rest);
    let mut parts = text.splitn(2, ',');
    let (max, n) = (parts.next().unwrap_or("1"), parts.next().unwrap_or("1"));
    admission::drive(protocol, admission::body_with_numbers(protocol, max, n).as_bytes(), (7, 7));
});
