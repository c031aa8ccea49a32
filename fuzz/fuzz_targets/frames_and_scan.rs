//! The shared framings (SSE, JSON array) and the passthrough JSON scanner on
//! arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_protocol::frame::{JsonArrayDecoder, SseDecoder};
use switchyard_protocol::scan;

fuzz_target!(|data: &[u8]| {
    let mut sse = SseDecoder::new();
    let mut events = Vec::new();
    let half = data.len() / 2;
    let _ = sse.feed(&data[..half], &mut events);
    let _ = sse.feed(&data[half..], &mut events);
    let _ = sse.finish(&mut events);

    let mut array = JsonArrayDecoder::new();
    let mut elements = Vec::new();
    if array.feed(data, &mut elements).is_ok() {
        let _ = array.finish();
    }

    let _ = scan::top_level_value(data, "usage");
    if let Ok(top) = scan::scan_top_level(data) {
        // The same walk, stopping early: it cannot fail where the full one passed.
        assert!(scan::top_level_value(data, "stream").is_ok());
        if let Some(span) = top.model_span {
            let spliced = scan::splice_model(data, span, "fuzz-model");
            let again = scan::scan_top_level(&spliced).expect("a spliced body scans again");
            assert_eq!(again.model.as_deref(), Some("fuzz-model"));
        }
    }
});
