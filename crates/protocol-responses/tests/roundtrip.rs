//! Property tests: IR → Responses wire → IR is the identity for everything
//! the protocol can represent (requests, responses, streams, errors).
//!
//! The generators leave out what Responses canonicalises, each for a reason:
//! - turns alternate user/assistant: adjacent turns of one role would be
//!   read back as one turn when the second starts after a call or result;
//! - no empty turns, empty thinking text, empty tool-result content or
//!   `created: None` (written as `""`/`0` and read back as such);
//! - thinking has one summary part (several parts are joined);
//! - cache markers carry no TTL (Responses breakpoints have none), only on
//!   user-side content; tools have no cache marker; tool results have no
//!   name and no error flag (Responses carries neither);
//! - reasoning is an effort or `disabled`, never a bare budget;
//! - no top_k, stop, seed or penalties (Responses has none of them);
//! - sampling knobs are short decimals, as callers send them: serde_json
//!   without its `float_roundtrip` feature may parse a 17-digit float one
//!   ulp off;
//! - URL media have no MIME type (the wire has none to carry it);
//! - response stop reasons agree with the content (a reply with a function
//!   call is read as `ToolUse` when completed).

#![expect(
    clippy::unwrap_used,
    reason = "helpers outside #[test] bodies fail loudly too; clippy exempts only the bodies"
)]

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use switchyard_codec::ir::{
    self, Block, CacheControl, ErrorInfo, ErrorKind, MediaSource, Message, Role, StopReason, StreamEvent, TextBlock,
};
use switchyard_codec::Codec;
use switchyard_protocol_responses::ResponsesCodec;

fn text_string() -> impl Strategy<Value = String> {
    "\\PC{0,24}"
}

fn nonempty_string() -> impl Strategy<Value = String> {
    "\\PC{1,24}"
}

fn cache() -> impl Strategy<Value = Option<CacheControl>> {
    proptest::option::of(Just(CacheControl { ttl: None }))
}

fn user_text() -> impl Strategy<Value = Block> {
    (text_string(), cache())
        .prop_map(|(text, cache_control)| Block::Text(TextBlock { text, cache_control, citations: Vec::new() }))
}

fn image() -> impl Strategy<Value = Block> {
    let source = prop_oneof![
        (prop_oneof![Just("image/png"), Just("image/jpeg")], "[A-Za-z0-9+/]{4,16}")
            .prop_map(|(media_type, data)| MediaSource::Base64 { media_type: media_type.to_owned(), data }),
        "[a-z]{1,8}"
            .prop_map(|name| MediaSource::Url { url: format!("https://example.com/{name}.png"), media_type: None }),
        "[A-Za-z0-9]{4,10}".prop_map(|id| MediaSource::Url { url: format!("file-{id}"), media_type: None }),
    ];
    (source, cache()).prop_map(|(source, cache_control)| Block::Image { source, cache_control })
}

fn document() -> impl Strategy<Value = Block> {
    let with_data = (prop_oneof![Just("application/pdf"), Just("text/plain")], "[A-Za-z0-9+/]{4,16}", "[a-z]{1,8}")
        .prop_map(|(media_type, data, name)| {
            (MediaSource::Base64 { media_type: media_type.to_owned(), data }, Some(format!("{name}.pdf")))
        });
    let by_reference = (
        prop_oneof![
            "[a-z]{1,8}".prop_map(|n| format!("https://example.com/{n}.pdf")),
            "[A-Za-z0-9]{4,10}".prop_map(|id| format!("file-{id}")),
        ],
        proptest::option::of("[a-z]{1,8}\\.pdf"),
    )
        .prop_map(|(url, name)| (MediaSource::Url { url, media_type: None }, name));
    (prop_oneof![with_data, by_reference], cache()).prop_map(|((source, name), cache_control)| Block::Document {
        source,
        name,
        cache_control,
    })
}

fn tool_result() -> impl Strategy<Value = Block> {
    (
        "call_[a-z0-9]{1,8}",
        proptest::collection::vec(prop_oneof![3 => user_text(), 1 => image(), 1 => document()], 1..3),
    )
        .prop_map(|(tool_use_id, content)| {
            Block::ToolResult(ir::ToolResult { tool_use_id, name: None, content, is_error: false })
        })
}

fn citation() -> impl Strategy<Value = Vec<Value>> {
    prop_oneof![
        Just(Vec::new()),
        "[a-z]{1,8}".prop_map(|title| vec![json!({
            "type": "url_citation", "start_index": 0, "end_index": 1,
            "title": title, "url": "https://example.com"
        })]),
    ]
}

fn assistant_text() -> impl Strategy<Value = Block> {
    (text_string(), citation())
        .prop_map(|(text, citations)| Block::Text(TextBlock { text, cache_control: None, citations }))
}

fn thinking() -> impl Strategy<Value = Block> {
    prop_oneof![
        (nonempty_string(), proptest::option::of("[A-Za-z0-9]{1,16}"))
            .prop_map(|(text, signature)| Block::Thinking { text, signature }),
        "[A-Za-z0-9]{1,16}".prop_map(|data| Block::RedactedThinking { data }),
    ]
}

fn tool_use() -> impl Strategy<Value = Block> {
    ("call_[a-z0-9]{1,8}", "[a-z_]{1,10}", text_string())
        .prop_map(|(id, name, input)| Block::ToolUse(ir::ToolUse::new(id, name, input)))
}

fn user_message() -> impl Strategy<Value = Message> {
    proptest::collection::vec(prop_oneof![4 => user_text(), 1 => image(), 1 => document(), 2 => tool_result()], 1..4)
        .prop_map(|content| Message::new(Role::User, content))
}

fn assistant_message() -> impl Strategy<Value = Message> {
    proptest::collection::vec(prop_oneof![3 => assistant_text(), 2 => tool_use(), 2 => thinking()], 1..4)
        .prop_map(|content| Message::new(Role::Assistant, content))
}

fn conversation() -> impl Strategy<Value = Vec<Message>> {
    proptest::collection::vec((user_message(), assistant_message()), 1..3).prop_flat_map(|pairs| {
        let messages: Vec<Message> = pairs.into_iter().flat_map(|(u, a)| [u, a]).collect();
        // Optionally end on a user turn, as a live request does.
        let len = messages.len();
        (Just(messages), 0..2usize).prop_map(move |(mut messages, trim)| {
            messages.truncate(len - trim);
            messages
        })
    })
}

fn system() -> impl Strategy<Value = Vec<TextBlock>> {
    proptest::collection::vec(
        (text_string(), cache()).prop_map(|(text, cache_control)| TextBlock {
            text,
            cache_control,
            citations: Vec::new(),
        }),
        0..3,
    )
}

fn tools() -> impl Strategy<Value = Vec<ir::Tool>> {
    proptest::collection::vec(
        // A function's `strict` is always written (the API's default is
        // strict), so it always reads back as said.
        ("[a-z_]{1,10}", proptest::option::of(text_string()), any::<bool>()).prop_map(|(name, description, strict)| {
            ir::Tool {
                parameters: json!({"type": "object", "properties": {name.clone(): {"type": "string"}}}),
                name,
                description,
                strict: Some(strict),
                ..ir::Tool::default()
            }
        }),
        0..3,
    )
}

fn tool_choice() -> impl Strategy<Value = Option<ir::ToolChoice>> {
    proptest::option::of(prop_oneof![
        Just(ir::ToolChoice::Auto),
        Just(ir::ToolChoice::Any),
        Just(ir::ToolChoice::None),
        "[a-z_]{1,10}".prop_map(ir::ToolChoice::Tool),
    ])
}

fn response_format() -> impl Strategy<Value = Option<ir::ResponseFormat>> {
    proptest::option::of(prop_oneof![
        Just(ir::ResponseFormat::JsonObject),
        ("[a-z_]{1,10}", proptest::option::of(any::<bool>())).prop_map(|(name, strict)| {
            ir::ResponseFormat::JsonSchema { name, schema: json!({"type": "object"}), strict }
        }),
    ])
}

fn reasoning() -> impl Strategy<Value = Option<ir::Reasoning>> {
    proptest::option::of(prop_oneof![
        prop::sample::select(vec![
            ir::Effort::Minimal,
            ir::Effort::Low,
            ir::Effort::Medium,
            ir::Effort::High,
            ir::Effort::XHigh
        ])
        .prop_map(ir::Reasoning::with_effort),
        Just(ir::Reasoning::off()),
    ])
}

fn metadata() -> impl Strategy<Value = Map<String, Value>> {
    proptest::collection::btree_map("[a-z]{1,6}", "[a-z0-9]{0,6}", 0..3)
        .prop_map(|entries| entries.into_iter().map(|(k, v)| (k, Value::String(v))).collect())
}

prop_compose! {
    fn request()(
        model in "[a-z0-9-]{1,12}",
        system in system(),
        messages in conversation(),
        tools in tools(),
        tool_choice in tool_choice(),
        parallel_tool_calls in proptest::option::of(any::<bool>()),
        max_tokens in proptest::option::of(0u64..1_000_000),
        temperature in proptest::option::of(0u32..=200),
        top_p in proptest::option::of(0u32..=100),
        response_format in response_format(),
        reasoning in reasoning(),
        stream in any::<bool>(),
        user in proptest::option::of("[a-z0-9]{1,10}"),
        metadata in metadata(),
    ) -> ir::Request {
        ir::Request {
            model, system, messages, tools, tool_choice, parallel_tool_calls, max_tokens,
            temperature: temperature.map(|t| f64::from(t) / 100.0),
            top_p: top_p.map(|p| f64::from(p) / 100.0),
            response_format, reasoning, stream, user, metadata,
            ..ir::Request::default()
        }
    }
}

fn usage() -> impl Strategy<Value = ir::Usage> {
    (0u64..100_000, 0u64..100_000, 0u64..1000, 0u64..1000, 0u64..1000).prop_map(
        |(input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens)| ir::Usage {
            input_tokens,
            output_tokens,
            cache_read_tokens,
            cache_write_tokens,
            reasoning_tokens,
            ..ir::Usage::default()
        },
    )
}

prop_compose! {
    fn response()(
        id in "resp_[a-z0-9]{1,10}",
        model in "[a-z0-9-]{1,12}",
        created in 0i64..2_000_000_000,
        content in proptest::collection::vec(
            prop_oneof![3 => assistant_text(), 2 => tool_use(), 2 => thinking()], 0..5),
        capped in any::<bool>(),
        filtered in any::<bool>(),
        usage in usage(),
    ) -> ir::Response {
        let has_call = content.iter().any(|b| matches!(b, Block::ToolUse(_)));
        let stop_reason = Some(match (capped, filtered, has_call) {
            (true, _, _) => StopReason::MaxTokens,
            (false, true, _) => StopReason::ContentFilter,
            (false, false, true) => StopReason::ToolUse,
            (false, false, false) => StopReason::EndTurn,
        });
        ir::Response { logprobs: Vec::new(), choices: Vec::new(), id, model, created: Some(created), content, stop_reason, stop_sequence: None, usage }
    }
}

fn error_kind() -> impl Strategy<Value = ErrorKind> {
    prop_oneof![
        Just(ErrorKind::InvalidRequest),
        Just(ErrorKind::Authentication),
        Just(ErrorKind::PermissionDenied),
        Just(ErrorKind::NotFound),
        Just(ErrorKind::RequestTooLarge),
        Just(ErrorKind::RateLimit),
        Just(ErrorKind::QuotaExceeded),
        Just(ErrorKind::ContextLength),
        Just(ErrorKind::Overloaded),
        Just(ErrorKind::Timeout),
        Just(ErrorKind::Unavailable),
        Just(ErrorKind::Internal),
    ]
}

prop_compose! {
    fn error_info()(
        kind in error_kind(),
        message in "[a-z ]{0,30}",
        code in proptest::option::of("x_[a-z_]{1,10}"),
        param in proptest::option::of("[a-z_]{1,10}"),
    ) -> ErrorInfo {
        ErrorInfo { kind, status: kind.default_status(), message, code, param }
    }
}

fn encode(events: &[StreamEvent]) -> Vec<u8> {
    ResponsesCodec.encode_stream(ResponsesCodec.default_framing(), events)
}

fn decode(bytes: &[u8]) -> Vec<StreamEvent> {
    ResponsesCodec.decode_stream(&[bytes]).unwrap()
}

proptest! {
    #[test]
    fn requests_round_trip(request in request()) {
        let encoded = ResponsesCodec.write_request(&request);
        prop_assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
        let back = ResponsesCodec.read_request(&encoded.body).unwrap();
        prop_assert_eq!(back, request);
    }

    #[test]
    fn responses_round_trip(response in response()) {
        let encoded = ResponsesCodec.write_response(&response);
        prop_assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
        let back = ResponsesCodec.read_response(&encoded.body).unwrap();
        prop_assert_eq!(back, response);
    }

    #[test]
    fn streams_round_trip(response in response()) {
        let events = ir::events_from_response(&response);
        prop_assert_eq!(decode(&encode(&events)), events);
    }

    /// A stream cut after a message start or a finished block, then failed:
    /// the prefix decodes as sent and the error keeps its kind, message and
    /// parameter (status and code are the kind's defaults on the wire).
    #[test]
    fn stream_errors_round_trip(response in response(), cut in 0usize..64, error in error_info()) {
        let events = ir::events_from_response(&response);
        let cuts: Vec<usize> = (1..events.len())
            .filter(|&i| matches!(events[i - 1], StreamEvent::MessageStart { .. } | StreamEvent::BlockStop { .. }))
            .collect();
        let at = cuts[cut % cuts.len()];
        let mut sent = events[..at].to_vec();
        sent.push(StreamEvent::Error(error.clone()));
        let mut decoded = decode(&encode(&sent));
        let Some(StreamEvent::Error(got)) = decoded.pop() else {
            return Err(TestCaseError::fail("no error event"));
        };
        prop_assert_eq!(decoded, events[..at].to_vec());
        prop_assert_eq!(got.kind, error.kind);
        prop_assert_eq!(got.message, error.message);
        prop_assert_eq!(got.param, error.param);
    }

    #[test]
    fn errors_round_trip(error in error_info()) {
        let written = ResponsesCodec.error_response(&error);
        let raw = ResponsesCodec.extract_error(written.status, &written.body);
        prop_assert_eq!(raw.kind, error.kind);
        prop_assert_eq!(raw.message, error.message);
        prop_assert_eq!(raw.status, error.status);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = ResponsesCodec.read_request(&bytes);
        let _ = ResponsesCodec.read_response(&bytes);
        let mut decoder = ResponsesCodec.stream_decoder();
        let mut events = Vec::new();
        let _ = decoder.feed(&bytes, &mut events);
        let _ = decoder.finish(&mut events);
        let _ = ResponsesCodec.extract_error(500, &bytes);
    }
}

#[test]
fn arbitrary_events_never_panic_the_encoder() {
    // Deltas and stops for blocks that were never started, twice-started
    // messages and events after the end are ignored, not fatal.
    let events = vec![
        StreamEvent::BlockDelta { index: 3, delta: ir::Delta::Text("x".into()) },
        StreamEvent::BlockStop { index: 9 },
        StreamEvent::BlockStart { index: 0, block: ir::BlockStart::Text },
        StreamEvent::BlockStart { index: 1, block: ir::BlockStart::Text },
        StreamEvent::MessageStop,
        StreamEvent::MessageStop,
    ];
    let decoded = decode(&encode(&events));
    assert!(matches!(decoded.last(), Some(StreamEvent::MessageStop)));
}
