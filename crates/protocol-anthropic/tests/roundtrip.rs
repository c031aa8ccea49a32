//! Property tests: IR that Anthropic can represent survives write → read,
//! for requests, replies, streams and errors. Each normalisation applied to
//! the expected value is a canonicalisation the codec documents.

// Test helpers outside #[test] fns fail loudly on bad fixtures by design.
#![allow(clippy::unwrap_used, clippy::panic)]

use base64::Engine;
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use switchyard_codec::ir::{
    events_from_response, Accumulator, Block, CacheControl, Capabilities, Delta, Effort, ErrorInfo, ErrorKind,
    MediaSource, Message, Protocol, Reasoning, Request, Response, ResponseFormat, Role, StopReason, StreamEvent,
    TextBlock, Thinking, Tool, ToolChoice, ToolResult, ToolUse, Usage,
};
use switchyard_codec::Codec;
use switchyard_protocol_anthropic::{AnthropicCodec, DEFAULT_MAX_TOKENS, SCHEMA_NAME};

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 .,!?\"\\\\\né€😀]{0,16}"
}

fn nonempty_text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 .,!?é]{1,16}"
}

fn ident() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,10}"
}

fn cache_control() -> impl Strategy<Value = Option<CacheControl>> {
    prop::option::of(
        prop::option::of(prop_oneof![Just("5m".to_owned()), Just("1h".to_owned())])
            .prop_map(|ttl| CacheControl { ttl }),
    )
}

fn citation() -> impl Strategy<Value = Value> {
    (nonempty_text(), 0u64..100).prop_map(|(cited, start)| {
        json!({"type": "char_location", "cited_text": cited, "document_index": 0,
            "start_char_index": start, "end_char_index": start + 5})
    })
}

fn text_block() -> impl Strategy<Value = TextBlock> {
    (text(), cache_control(), prop::collection::vec(citation(), 0..2))
        .prop_map(|(text, cache_control, citations)| TextBlock { text, cache_control, citations })
}

fn b64() -> impl Strategy<Value = String> {
    prop::collection::vec(any::<u8>(), 1..24).prop_map(|bytes| base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn image() -> impl Strategy<Value = Block> {
    let source = prop_oneof![
        (prop_oneof![Just("image/png"), Just("image/jpeg"), Just("image/webp")], b64())
            .prop_map(|(mt, data)| MediaSource::Base64 { media_type: mt.to_owned(), data }),
        ident().prop_map(|p| MediaSource::Url { url: format!("https://example.com/{p}.png"), media_type: None }),
        "[A-Za-z0-9]{8,16}".prop_map(|id| MediaSource::Url { url: format!("file_{id}"), media_type: None }),
    ];
    (source, cache_control()).prop_map(|(source, cache_control)| Block::Image { source, cache_control })
}

fn document() -> impl Strategy<Value = Block> {
    let source = prop_oneof![
        b64().prop_map(|data| MediaSource::Base64 { media_type: "application/pdf".into(), data }),
        // Plain text travels as text; canonical base64 of UTF-8 reads back
        // identically.
        text().prop_map(|t| MediaSource::Base64 {
            media_type: "text/plain".into(),
            data: base64::engine::general_purpose::STANDARD.encode(t)
        }),
        ident().prop_map(|p| MediaSource::Url { url: format!("https://example.com/{p}.pdf"), media_type: None }),
    ];
    (source, prop::option::of(text()), cache_control()).prop_map(|(source, name, cache_control)| Block::Document {
        source,
        name,
        cache_control,
    })
}

fn json_args() -> impl Strategy<Value = String> {
    prop::collection::btree_map(
        ident(),
        prop_oneof![
            any::<i32>().prop_map(|n| json!(n)),
            text().prop_map(|s| json!(s)),
            any::<bool>().prop_map(|b| json!(b)),
        ],
        0..4,
    )
    .prop_map(|map| {
        let obj: Map<String, Value> = map.into_iter().collect();
        // Tool input is an object on the wire: compact JSON text is the
        // canonical IR form it reads back as.
        serde_json::to_string(&Value::Object(obj)).unwrap()
    })
}

fn tool_use() -> impl Strategy<Value = ToolUse> {
    ("toolu_[a-zA-Z0-9]{6}", ident(), json_args()).prop_map(|(id, name, input)| ToolUse::new(id, name, input))
}

fn thinking() -> impl Strategy<Value = Block> {
    (text(), "[A-Za-z0-9+/]{8,40}").prop_map(|(text, sig)| Block::Thinking { text, signature: Some(sig) })
}

fn tool_result() -> impl Strategy<Value = Block> {
    // A part that is an empty plain text reads back as no part at all, so
    // result texts are non-empty.
    let part = prop_oneof![
        (nonempty_text(), cache_control()).prop_map(|(t, cc)| Block::Text(TextBlock {
            text: t,
            cache_control: cc,
            citations: Vec::new()
        })),
        image(),
        document(),
    ];
    (
        // Ids no tool_use in the conversation has, so no name is learnt.
        "res_[a-z0-9]{6}",
        prop::collection::vec(part, 0..3),
        any::<bool>(),
    )
        .prop_map(|(tool_use_id, content, is_error)| {
            Block::ToolResult(ToolResult { tool_use_id, name: None, content, is_error })
        })
}

fn request_block() -> impl Strategy<Value = Block> {
    prop_oneof![
        text_block().prop_map(Block::Text),
        image(),
        document(),
        thinking(),
        "[A-Za-z0-9+/]{8,40}".prop_map(|data| Block::RedactedThinking { data }),
        tool_use().prop_map(Block::ToolUse),
        tool_result(),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    (prop_oneof![Just(Role::User), Just(Role::Assistant)], prop::collection::vec(request_block(), 0..4))
        .prop_map(|(role, content)| Message::new(role, content))
}

fn tool() -> impl Strategy<Value = Tool> {
    (ident(), prop::option::of(text()), cache_control()).prop_map(|(name, description, cc)| Tool {
        name,
        description,
        parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        cache_control: cc,
        ..Tool::default()
    })
}

fn tool_choice() -> impl Strategy<Value = Option<ToolChoice>> {
    prop::option::of(prop_oneof![
        Just(ToolChoice::Auto),
        Just(ToolChoice::Any),
        Just(ToolChoice::None),
        ident().prop_map(ToolChoice::Tool),
    ])
}

fn reasoning() -> impl Strategy<Value = Option<Reasoning>> {
    prop::option::of(
        (
            prop::option::of(prop::sample::select(vec![
                Effort::Low,
                Effort::Medium,
                Effort::High,
                Effort::XHigh,
                Effort::Max,
            ])),
            prop::option::of(1024u64..64_000),
            prop::sample::select(vec![Thinking::Unset, Thinking::On, Thinking::Off]),
        )
            .prop_map(|(effort, budget_tokens, thinking)| Reasoning { thinking, effort, budget_tokens }),
    )
}

fn extra() -> impl Strategy<Value = Vec<(&'static str, Value)>> {
    prop::collection::vec(
        prop_oneof![
            Just(("service_tier", json!("standard_only"))),
            Just(("inference_geo", json!("us"))),
            Just(("container", json!("container_011CN"))),
        ],
        0..3,
    )
}

prop_compose! {
    fn request()(
        model in "[a-z0-9.-]{1,16}",
        system in prop::collection::vec(
            (nonempty_text(), cache_control()).prop_map(|(t, cc)| TextBlock { text: t, cache_control: cc, citations: Vec::new() }),
            0..3,
        ),
        messages in prop::collection::vec(message(), 0..4),
        tools in prop::collection::vec(tool(), 0..3),
        tool_choice in tool_choice(),
        parallel_tool_calls in prop::option::of(any::<bool>()),
        max_tokens in prop::option::of(0u64..200_000),
        temperature in prop::option::of(0.0f64..2.0),
        top_p in prop::option::of(0.0f64..=1.0),
        top_k in prop::option::of(any::<u64>()),
        stop in prop::collection::vec(text(), 0..3),
        schema in prop::option::of(Just(json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false}))),
        reasoning in reasoning(),
        stream in any::<bool>(),
        user in prop::option::of(text()),
        extra in extra(),
    ) -> Request {
        let mut request = Request {
            model,
            system,
            messages,
            tools,
            tool_choice,
            parallel_tool_calls,
            max_tokens,
            temperature,
            top_p,
            top_k,
            stop,
            response_format: schema.map(|schema| ResponseFormat::JsonSchema {
                name: SCHEMA_NAME.to_owned(),
                schema,
                strict: None,
            }),
            reasoning,
            stream,
            user,
            ..Request::default()
        };
        for (key, value) in extra {
            request.extra.insert(Protocol::Anthropic, key.to_owned(), value);
        }
        request
    }
}

/// What a written request reads back as.
fn normalise_request(mut expected: Request) -> Request {
    // The cap is required on the wire: a missing one is written as the
    // default (plus the thinking budget).
    if expected.max_tokens.is_none() {
        let budget = expected.reasoning.as_ref().filter(|r| !r.is_off()).and_then(|r| r.budget_tokens).unwrap_or(0);
        expected.max_tokens = Some(DEFAULT_MAX_TOKENS + budget);
    }
    // Disabled thinking has no budget on the wire; a budget is thinking on;
    // nothing at all is no reasoning.
    if let Some(r) = expected.reasoning.as_mut() {
        if r.is_off() {
            r.budget_tokens = None;
        }
        if r.budget_tokens.is_some() {
            r.thinking = Thinking::On;
        }
    }
    if expected.reasoning.as_ref().is_some_and(|r| r.thinking == Thinking::Unset && r.effort.is_none()) {
        expected.reasoning = None;
    }
    // Parallelism rides on tool_choice: alone it is written as `auto`, and
    // it is not written at all for `none` or when there are no tools.
    match expected.tool_choice {
        Some(ToolChoice::None) => expected.parallel_tool_calls = None,
        None if expected.parallel_tool_calls.is_some() => {
            if expected.tools.is_empty() {
                expected.parallel_tool_calls = None;
            } else {
                expected.tool_choice = Some(ToolChoice::Auto);
            }
        }
        _ => {}
    }
    expected
}

fn response_block() -> impl Strategy<Value = Block> {
    prop_oneof![
        (text(), prop::collection::vec(citation(), 0..2))
            .prop_map(|(text, citations)| { Block::Text(TextBlock { text, cache_control: None, citations }) }),
        // A reply may carry thinking without a signature (another vendor's
        // reasoning); it is written with an empty one and reads back as none.
        (text(), prop::option::of("[A-Za-z0-9+/]{8,40}"))
            .prop_map(|(text, signature)| Block::Thinking { text, signature }),
        "[A-Za-z0-9+/]{8,40}".prop_map(|data| Block::RedactedThinking { data }),
        tool_use().prop_map(Block::ToolUse),
    ]
}

fn stop_reason() -> impl Strategy<Value = Option<StopReason>> {
    prop::option::of(prop_oneof![
        Just(StopReason::EndTurn),
        Just(StopReason::MaxTokens),
        Just(StopReason::StopSequence),
        Just(StopReason::ToolUse),
        Just(StopReason::Refusal),
        Just(StopReason::Pause),
        Just(StopReason::ContextLength),
    ])
}

prop_compose! {
    fn response()(
        id in "msg_[A-Za-z0-9]{8}",
        model in "[a-z0-9.-]{1,16}",
        content in prop::collection::vec(response_block(), 0..5),
        stop_reason in stop_reason(),
        stop_sequence in prop::option::of(text()),
        uncached in 0u64..100_000,
        cache_read in 0u64..100_000,
        cache_write in 0u64..100_000,
        output in 0u64..100_000,
        reasoning_share in 0u64..=100,
    ) -> Response {
        Response { logprobs: Vec::new(), choices: Vec::new(),
            id,
            model,
            created: None,
            content,
            stop_reason,
            stop_sequence,
            usage: Usage {
                input_tokens: uncached + cache_read + cache_write,
                output_tokens: output,
                cache_read_tokens: cache_read,
                cache_write_tokens: cache_write,
                reasoning_tokens: output * reasoning_share / 100,
                ..Usage::default()
            },
        }
    }
}

fn encode_events(events: &[StreamEvent]) -> Vec<u8> {
    AnthropicCodec.encode_stream(AnthropicCodec.default_framing(), events)
}

fn decode_events(bytes: &[u8]) -> Vec<StreamEvent> {
    AnthropicCodec.decode_stream(&[bytes]).unwrap()
}

proptest! {
    #[test]
    fn request_round_trips(ir in request().prop_map(switchyard_codec::effort::within_claude_thinking_rules)) {
        let encoded = AnthropicCodec.write_request_for(&ir, &Capabilities::ALL);
        prop_assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
        let back = AnthropicCodec.read_request(&encoded.body).unwrap();
        prop_assert_eq!(back, normalise_request(ir));
    }

    #[test]
    fn response_round_trips(ir in response()) {
        let encoded = AnthropicCodec.write_response(&ir);
        prop_assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
        let back = AnthropicCodec.read_response(&encoded.body).unwrap();
        prop_assert_eq!(back, ir);
    }

    #[test]
    fn stream_round_trips(ir in response()) {
        let events = events_from_response(&ir);
        let back = decode_events(&encode_events(&events));
        // Empty deltas carry nothing and are not decoded.
        let expected: Vec<StreamEvent> = events
            .into_iter()
            .filter(|e| !matches!(e, StreamEvent::BlockDelta { delta:
                Delta::Text(s) | Delta::Thinking(s) | Delta::Signature(s) | Delta::ToolInput(s), .. } if s.is_empty()))
            .collect();
        prop_assert_eq!(&back, &expected);
        // And the stream folds back into the reply.
        let mut acc = Accumulator::new();
        for event in &back {
            acc.push(event);
        }
        prop_assert!(acc.is_finished());
        // IR stream events have no citation delta, so citations do not
        // travel in a stream.
        let mut expected = ir;
        for block in &mut expected.content {
            if let Block::Text(t) = block {
                t.citations.clear();
            }
        }
        prop_assert_eq!(acc.into_response(), expected);
    }

    #[test]
    fn errors_round_trip(
        kind in prop::sample::select(vec![
            ErrorKind::InvalidRequest, ErrorKind::Authentication, ErrorKind::PermissionDenied,
            ErrorKind::NotFound, ErrorKind::RequestTooLarge, ErrorKind::RateLimit,
            ErrorKind::QuotaExceeded, ErrorKind::Overloaded, ErrorKind::Timeout,
            ErrorKind::Unavailable, ErrorKind::Internal,
        ]),
        message in "[a-z]{1,10}( [a-z]{1,10}){0,3}",
    ) {
        let info = ErrorInfo::new(kind, message.clone());
        let response = AnthropicCodec.error_response(&info);
        prop_assert_eq!(response.status, kind.default_status());
        let raw = AnthropicCodec.extract_error(response.status, &response.body);
        prop_assert_eq!(raw.kind, kind);
        prop_assert_eq!(raw.message, message);
    }

    #[test]
    fn arbitrary_bodies_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = AnthropicCodec.read_request(&bytes);
        let _ = AnthropicCodec.read_response(&bytes);
        let _ = AnthropicCodec.extract_error(500, &bytes);
    }
}

#[test]
fn context_length_errors_round_trip_when_the_message_says_so() {
    // Anthropic has no context-length type; its message is the signal.
    let info = ErrorInfo::new(ErrorKind::ContextLength, "prompt is too long: 210000 tokens > 200000 maximum");
    let response = AnthropicCodec.error_response(&info);
    let raw = AnthropicCodec.extract_error(response.status, &response.body);
    assert_eq!(raw.kind, ErrorKind::ContextLength);
    assert_eq!(raw.to_error_info().message, info.message);
}

#[test]
fn stream_error_events_round_trip() {
    let mut info = ErrorInfo::new(ErrorKind::RateLimit, "slow down");
    info.code = Some("rate_limit_error".into());
    let events = vec![
        StreamEvent::MessageStart { id: "msg_1".into(), model: "m".into(), created: None, usage: Usage::default() },
        StreamEvent::Error(info),
    ];
    assert_eq!(decode_events(&encode_events(&events)), events);
}
