//! What the fuzz targets drive (`fuzz/fuzz_targets/protocol_readers.rs`):
//! the Realtime and Live relays' readers of untrusted messages, a
//! caller's and an upstream's, with the invariants the relays rely on
//! checked (a generation is never read as anything else; a rewritten
//! message is still the same message; usage parts never exceed their
//! whole), and the `mock://` fakes answering whatever they are sent with
//! messages the relay reads. Not an API: built for tests and with the
//! `fuzzing` feature only.
#![allow(
    clippy::expect_used,
    clippy::panic,
    reason = "a fuzz harness: a broken invariant is the panic libFuzzer reports"
)]

use crate::live::message as live;
use crate::realtime::event::{self, Client};

/// Reads `data` as a client event and as a server event; panics where an
/// invariant breaks.
pub fn realtime_events(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok((client, _)) = event::read_client(text) {
        let is_create = matches!(client, Client::Create { .. });
        // What the relay sends on in place of a generation is the same
        // generation, under the gateway's id.
        if is_create {
            let sent = event::with_event_id(text, "event_sy0").expect("a generation takes an id");
            let (again, id) = event::read_client(&sent).expect("a rewritten generation reads");
            assert_eq!(again, client);
            assert_eq!(id.as_deref(), Some("event_sy0"));
        }
        if let (Client::SessionUpdate { .. }, Some(named)) = (&client, event::with_model(text, "wire")) {
            match event::read_client(&named) {
                Ok((Client::SessionUpdate { model, .. }, _)) => assert_eq!(model.as_deref(), Some("wire")),
                other => panic!("a session.update renamed is {other:?}"),
            }
        }
    }
    if let Some(server) = event::read_server(text) {
        if let Some(usage) = server.usage {
            assert!(usage.cache_read_tokens <= usage.input_tokens);
            assert!(usage.audio_input_tokens <= usage.input_tokens);
            assert!(usage.audio_output_tokens <= usage.output_tokens);
        }
    }
    let (mut fake, _) = switchyard_transport::mock_realtime::FakeRealtime::open("m");
    for answer in fake.on_client(text) {
        assert!(event::read_server(&answer).is_some(), "the fake answers with events: {answer}");
    }
}

/// Reads `data` as a Live client message and as a server message; panics
/// where an invariant breaks.
pub fn live_messages(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(client @ live::Client::Setup { .. }) = live::read_client(text) {
        // The setup passed on names the lane's model, and is otherwise
        // the same setup.
        let named = live::with_model(text, "wire").expect("a setup takes a model");
        match live::read_client(&named) {
            Ok(live::Client::Setup { model, max_output_tokens }) => {
                assert_eq!(model, "wire");
                assert!(matches!(client, live::Client::Setup { max_output_tokens: m, .. } if m == max_output_tokens));
            }
            other => panic!("a setup renamed is {other:?}"),
        }
    }
    if let Some(server) = live::read_server(text) {
        if let Some(usage) = server.usage {
            let input_parts = usage.cache_read_tokens + usage.audio_input_tokens + usage.image_input_tokens;
            assert!(input_parts <= usage.input_tokens, "{usage:?}");
            assert!(usage.tool_prompt_tokens <= usage.input_tokens, "{usage:?}");
            let output_parts = usage.reasoning_tokens + usage.audio_output_tokens + usage.image_output_tokens;
            assert!(output_parts <= usage.output_tokens, "{usage:?}");
        }
    }
    let (mut fake, _) = switchyard_transport::mock_live::FakeLive::open();
    for answer in fake.on_client(text) {
        assert!(live::read_server(&answer).is_some(), "the fake answers with messages: {answer}");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hostile_events_break_no_invariant() {
        for case in [
            r#"{"type":"response.create","event_id":"x","response":{"max_output_tokens":5}}"#,
            r#"{"type":"response.create","type":"response.create"}"#,
            r#"{"type":"session.update","session":{"model":"a","model":"b"}}"#,
            r#"{"type":"session.update","session":{"model":"a"}}"#,
            r#"{"type":"response.done","response":{"id":"r","usage":{"input_tokens":1,"input_token_details":{"cached_tokens":99}}}}"#,
            r#"{"type":"input_audio_buffer.append","audio":"\u0000"}"#,
            "\u{feff}{}",
            "[]",
            "",
        ] {
            super::realtime_events(case.as_bytes());
        }
    }

    #[test]
    fn hostile_live_messages_break_no_invariant() {
        for case in [
            r#"{"setup":{"model":"models/a","generationConfig":{"maxOutputTokens":9}}}"#,
            r#"{"setup":{"model":"a","model":"b"}}"#,
            r#"{"clientContent":{"turns":[{"parts":[{"text":"x"}]}],"turnComplete":true}}"#,
            r#"{"realtimeInput":{"text":"hi"}}"#,
            r#"{"realtimeInput":{"audio":{"data":"AAAA"}}}"#,
            r#"{"realtimeInput":{"audioStreamEnd":true}}"#,
            r#"{"toolResponse":{"functionResponses":[{"id":"1","response":{"a":1}}]}}"#,
            r#"{"serverContent":{"turnComplete":true},"usageMetadata":{"promptTokenCount":1,"cachedContentTokenCount":9,"promptTokensDetails":[{"modality":"AUDIO","tokenCount":9}]}}"#,
            r#"{"usageMetadata":{"responseTokenCount":1,"thoughtsTokenCount":18446744073709551615}}"#,
            "\u{feff}{}",
            "[]",
            "",
        ] {
            super::live_messages(case.as_bytes());
        }
    }
}
