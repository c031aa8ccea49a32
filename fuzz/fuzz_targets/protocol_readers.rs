//! Every protocol's request, response and error readers (and OpenAI's legacy
//! completion readers, whole and streamed) on arbitrary bytes:
//! an error is fine, a panic is a bug. The first byte picks the protocol.
//! The same bytes are read as Realtime events and Gemini Live messages
//! too, a caller's and an upstream's (`switchyard_duplex::fuzzing`: a
//! generation never read as anything else, usage parts never past their
//! whole), and sent to the `mock://` Realtime and Live fakes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_protocol::{codec, Protocol};

fuzz_target!(|data: &[u8]| {
    switchyard_duplex::fuzzing::realtime_events(data);
    switchyard_duplex::fuzzing::live_messages(data);
    let Some((&selector, body)) = data.split_first() else { return };
    let protocol = Protocol::ALL[selector as usize % Protocol::ALL.len()];
    let codec = codec(protocol);
    if let Ok(request) = codec.read_request(body) {
        // Whatever was read must be writable in every protocol.
        for target in Protocol::ALL {
            let _ = switchyard_protocol::codec(target).write_request(&request);
        }
    }
    if let Ok(response) = codec.read_response(body) {
        for target in Protocol::ALL {
            let _ = switchyard_protocol::codec(target).write_response(&response);
        }
    }
    let _ = codec.extract_error(u16::from(selector) + 300, body);
    // The passthrough paths: usage of a reply, stream options of a request.
    let _ = codec.read_usage(body);
    let _ = codec.stream_encoder_for(codec.default_framing(), body);
    // A legacy completion's readers (OpenAI's), whole and streamed, and
    // what they read written back as a completion and as every chat.
    if let Some(completions) = codec.completions() {
        if let Ok(request) = completions.read_request(body) {
            let _ = completions.write_request(&request);
            for target in Protocol::ALL {
                let _ = switchyard_protocol::codec(target).write_request(&request);
            }
        }
        if let Ok(response) = completions.read_response(body) {
            let _ = completions.write_response(&response);
        }
        let mut decoder = completions.stream_decoder();
        let mut events = Vec::new();
        let cut = usize::from(selector) % (body.len() + 1);
        if decoder.feed(&body[..cut], &mut events).is_ok() && decoder.feed(&body[cut..], &mut events).is_ok() {
            let _ = decoder.finish(&mut events);
        }
    }
});
