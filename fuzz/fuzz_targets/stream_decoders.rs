//! Every protocol's stream decoder on arbitrary bytes split at arbitrary
//! points, with the decoded events re-encoded in every protocol.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_protocol::tap::UsageTap;
use switchyard_protocol::{codec, Protocol, StreamDecoder};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let Some((&split, body)) = rest.split_first() else { return };
    let protocol = Protocol::ALL[selector as usize % Protocol::ALL.len()];
    let mut decoder = codec(protocol).stream_decoder();
    let mut events = Vec::new();
    let cut = (split as usize).min(body.len());
    let ok = decoder.feed(&body[..cut], &mut events).is_ok() && decoder.feed(&body[cut..], &mut events).is_ok();
    if ok {
        let _ = decoder.finish(&mut events);
    }
    // The passthrough usage tap over the same split.
    let mut tap = UsageTap::new(codec(protocol).stream_decoder(), codec(protocol).default_framing());
    let mut tapped = Vec::new();
    if tap.feed(&body[..cut], &mut tapped).is_ok() && tap.feed(&body[cut..], &mut tapped).is_ok() {
        let _ = tap.finish(&mut tapped);
    }
    for target in Protocol::ALL {
        let target_codec = codec(target);
        let mut encoder = target_codec.stream_encoder(target_codec.default_framing());
        let mut out = Vec::new();
        for event in &events {
            encoder.encode(event, &mut out);
        }
        encoder.finish(&mut out);
    }
});
