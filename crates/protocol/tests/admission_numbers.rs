//! Admission's arithmetic under arbitrary numbers in every member it reads,
//! for every protocol: integers of any size, negatives, fractions, exponent
//! forms, and members named twice (see `support/admission.rs`). The fuzz
//! target `admission_numbers` drives the same checks for longer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code")]

#[path = "support/admission.rs"]
mod admission;

use proptest::prelude::*;
use switchyard_protocol::ir::Protocol;

/// A JSON number as a caller may write it.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_filter("a JSON number", |f| f.is_finite()).prop_map(|f| format!("{f:e}")),
        (0u32..400).prop_map(|e| format!("1e{e}")),
        (0u64..1_000_000).prop_map(|n| format!("{n}.5")),
        Just("18446744073709551616".to_owned()),
        Just("-0".to_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_number_admission_reads_is_bounded(
        protocol in 0..Protocol::ALL.len(),
        max in number(),
        n in number(),
        actual_cost in any::<u64>(),
        actual_tokens in any::<u64>(),
    ) {
        let protocol = Protocol::ALL[protocol];
        let body = admission::body_with_numbers(protocol, &max, &n);
        admission::drive(protocol, body.as_bytes(), (actual_cost, actual_tokens));
    }
}

#[test]
fn a_member_named_twice_is_refused_by_every_protocol_that_reads_it() {
    for protocol in Protocol::ALL {
        let body = admission::body_with_numbers(protocol, "1", "1");
        // The output cap's member, named again at the end of its object.
        let twice = match protocol {
            Protocol::Gemini => {
                body.replacen("\"maxOutputTokens\":1", "\"maxOutputTokens\":1,\"maxOutputTokens\":99", 1)
            }
            Protocol::Bedrock => body.replacen("\"maxTokens\":1", "\"maxTokens\":1,\"maxTokens\":99", 1),
            Protocol::Responses => {
                body.replacen("\"max_output_tokens\":1", "\"max_output_tokens\":1,\"max_output_tokens\":99", 1)
            }
            _ => body.replacen("\"max_tokens\":1", "\"max_tokens\":1,\"max_tokens\":99", 1),
        };
        assert_ne!(body, twice, "{protocol}");
        let codec = switchyard_protocol::codec(protocol);
        assert!(codec.metered(twice.as_bytes()).is_err(), "{protocol}: {twice}");
        assert!(codec.metered(body.as_bytes()).is_ok(), "{protocol}: {body}");
        admission::drive(protocol, twice.as_bytes(), (1, 1));
    }
}

#[test]
fn every_member_admission_reads_is_found_by_the_ingress_scan() {
    for protocol in Protocol::ALL {
        let codec = switchyard_protocol::codec(protocol);
        let mut heads: Vec<&str> =
            codec.max_tokens_members().iter().chain(codec.choices_members()).map(|path| path[0]).collect();
        heads.extend(codec.end_user_member().first());
        heads.dedup();
        let mut declared = codec.metered_heads().to_vec();
        heads.sort_unstable();
        heads.dedup();
        declared.sort_unstable();
        assert_eq!(heads, declared, "{protocol}: metered_heads must name every path's first member");
        assert!(declared.len() <= switchyard_protocol::scan::FOUND, "{protocol}");
    }
}

#[test]
fn each_protocol_names_its_end_user_where_the_ingress_scan_finds_it() {
    let cases = [
        (Protocol::OpenAi, r#"{"model":"m","user":"u\"1"}"#, Some("u\"1")),
        (Protocol::Responses, r#"{"model":"m","user":"u1"}"#, Some("u1")),
        (Protocol::Anthropic, r#"{"model":"m","metadata":{"user_id":"u1"}}"#, Some("u1")),
        (Protocol::Bedrock, r#"{"requestMetadata":{"user":"u1"}}"#, Some("u1")),
        // Not a string, or not there: no end user.
        (Protocol::OpenAi, r#"{"model":"m","user":7}"#, None),
        (Protocol::Anthropic, r#"{"model":"m","metadata":{}}"#, None),
        (Protocol::OpenAi, r#"{"model":"m"}"#, None),
        // Protocols without the field name none.
        (Protocol::Gemini, r#"{"user":"u1"}"#, None),
        (Protocol::Cohere, r#"{"model":"m","user":"u1"}"#, None),
    ];
    for (protocol, body, want) in cases {
        let codec = switchyard_protocol::codec(protocol);
        // Read from what the ingress scan found, and from the body alone.
        let top = switchyard_protocol::scan::scan_request(body.as_bytes(), codec.metered_heads()).unwrap();
        let found = codec.end_user(body.as_bytes(), Some(&top.found));
        let scanned = codec.end_user(body.as_bytes(), None);
        assert_eq!(found.as_deref(), want, "{protocol} {body}");
        assert_eq!(scanned.as_deref(), want, "{protocol} {body}");
    }
}
