//! Round trips: IR built from what Cohere can represent survives
//! write-then-read for requests, responses and streams, and the gateway's
//! error bodies read back with their kind and message.
//!
//! The generators produce canonical IR only; each normalisation the
//! protocol imposes is named where the generator avoids it:
//! - an assistant turn that calls tools keeps its text in `tool_plan`, so it
//!   is generated as thinking blocks, at most one non-empty text, then the
//!   calls (the order Cohere reads it back in);
//! - consecutive tool messages always share one user turn, so two user turns
//!   of tool results never follow each other;
//! - `ToolChoice::Auto` is Cohere's default and reads back as unset, and a
//!   named tool reads back as `Any`, so neither is generated;
//! - the tool result name, `is_error`, signatures, cache markers, user and
//!   metadata have no Cohere field (reported as dropped, tested elsewhere);
//! - a JSON schema's name is not on the wire and reads back as `response`;
//! - a reasoning effort is sent as a budget, so only budgets are generated;
//! - responses carry no model or creation time, and streams no model and no
//!   usage in `message-start` (Cohere reports usage once, at the end);
//! - empty stream deltas are not sent.

#![expect(clippy::unwrap_used, reason = "test helpers fail loudly")]

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use proptest::prelude::*;
use serde_json::{json, Value};
use switchyard_codec::ir::{
    events_from_response, Block, Delta, ErrorInfo, ErrorKind, Extra, MediaSource, Message, Protocol, Reasoning,
    Request, Response, ResponseFormat, Role, StopReason, StreamEvent, TextBlock, Tool, ToolChoice, ToolResult, ToolUse,
    Usage,
};
use switchyard_codec::Codec;
use switchyard_protocol_cohere::CohereCodec;

fn text() -> impl Strategy<Value = String> {
    "\\PC{0,24}"
}

fn ident() -> impl Strategy<Value = String> {
    "[a-z_][a-z0-9_]{0,10}"
}

/// Two-decimal values, which JSON carries exactly.
fn knob() -> impl Strategy<Value = f64> {
    (0u32..=200).prop_map(|n| f64::from(n) / 100.0)
}

fn image() -> impl Strategy<Value = Block> {
    prop_oneof![
        ("image/(png|jpeg|webp)", "[A-Za-z0-9+/]{0,16}={0,2}")
            .prop_map(|(media_type, data)| { MediaSource::Base64 { media_type, data } }),
        "[a-z]{1,8}"
            .prop_map(|name| MediaSource::Url { url: format!("https://example.com/{name}.png"), media_type: None }),
    ]
    .prop_map(|source| Block::Image { source, cache_control: None })
}

fn json_document() -> impl Strategy<Value = Block> {
    (proptest::collection::btree_map("[a-z]{1,6}", text(), 0..3), proptest::option::of(ident())).prop_map(
        |(fields, name)| {
            let data = serde_json::to_string(&fields).unwrap();
            Block::Document {
                source: MediaSource::Base64 { media_type: "application/json".into(), data: STANDARD.encode(data) },
                name,
                cache_control: None,
            }
        },
    )
}

fn tool_result() -> impl Strategy<Value = Block> {
    (ident(), proptest::collection::vec(prop_oneof![text().prop_map(Block::text), json_document()], 0..3)).prop_map(
        |(tool_use_id, content)| Block::ToolResult(ToolResult { tool_use_id, name: None, content, is_error: false }),
    )
}

fn user_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        proptest::collection::vec(prop_oneof![3 => text().prop_map(Block::text), 1 => image()], 1..4),
        proptest::collection::vec(tool_result(), 1..3),
    ]
    .prop_map(|content| Message::new(Role::User, content))
}

fn tool_use() -> impl Strategy<Value = Block> {
    (ident(), ident(), text()).prop_map(|(id, name, input)| Block::ToolUse(ToolUse::new(id, name, input)))
}

fn thinking() -> impl Strategy<Value = Block> {
    text().prop_map(|text| Block::Thinking { text, signature: None })
}

/// Assistant content in the order Cohere reads it back.
fn assistant_content() -> impl Strategy<Value = Vec<Block>> {
    prop_oneof![
        proptest::collection::vec(prop_oneof![text().prop_map(Block::text), thinking()], 1..4),
        (
            proptest::collection::vec(thinking(), 0..2),
            proptest::option::of("\\PC{1,24}"),
            proptest::collection::vec(tool_use(), 1..3),
        )
            .prop_map(|(mut blocks, plan, calls)| {
                blocks.extend(plan.map(Block::text));
                blocks.extend(calls);
                blocks
            }),
    ]
}

fn is_tool_results(message: &Message) -> bool {
    message.role == Role::User && message.content.iter().all(|block| matches!(block, Block::ToolResult(_)))
}

fn messages() -> impl Strategy<Value = Vec<Message>> {
    proptest::collection::vec(
        prop_oneof![user_message(), assistant_content().prop_map(|content| Message::new(Role::Assistant, content)),],
        0..6,
    )
    .prop_map(|mut messages| {
        messages.dedup_by(|later, earlier| is_tool_results(later) && is_tool_results(earlier));
        messages
    })
}

fn tools() -> impl Strategy<Value = Vec<Tool>> {
    proptest::collection::vec(
        (ident(), proptest::option::of(text())).prop_map(|(name, description)| Tool {
            name,
            description,
            parameters: json!({"type": "object", "properties": {"x": {"type": "string"}}}),
            cache_control: None,
            ..Tool::default()
        }),
        0..3,
    )
}

prop_compose! {
    fn sampling()(
        max_tokens in proptest::option::of(1u64..100_000),
        temperature in proptest::option::of(knob()),
        top_p in proptest::option::of(knob()),
        top_k in proptest::option::of(0u64..500),
        stop in proptest::collection::vec(text(), 0..3),
        seed in proptest::option::of(any::<i64>()),
        frequency_penalty in proptest::option::of(knob()),
        presence_penalty in proptest::option::of(knob()),
    ) -> Request {
        Request {
            max_tokens, temperature, top_p, top_k, stop, seed, frequency_penalty, presence_penalty,
            ..Request::default()
        }
    }
}

prop_compose! {
    fn request()(
        model in "[a-z0-9-]{1,16}",
        system in proptest::collection::vec(text().prop_map(TextBlock::new), 0..3),
        messages in messages(),
        tools in tools(),
        tool_choice in prop_oneof![Just(None), Just(Some(ToolChoice::Any)), Just(Some(ToolChoice::None))],
        knobs in sampling(),
        response_format in prop_oneof![
            Just(None),
            Just(Some(ResponseFormat::JsonObject)),
            Just(Some(ResponseFormat::JsonSchema {
                name: "response".into(),
                schema: json!({"type": "object", "required": ["a"]}),
                strict: None,
            })),
        ],
        reasoning in prop_oneof![
            Just(None),
            (1u64..32_000).prop_map(|budget| Some(Reasoning::with_budget(budget))),
            Just(Some(Reasoning::off())),
            Just(Some(Reasoning::on())),
        ],
        stream in any::<bool>(),
        safety_mode in proptest::option::of(prop_oneof![Just("CONTEXTUAL"), Just("STRICT")]),
    ) -> Request {
        let mut extra = Extra::new();
        if let Some(mode) = safety_mode {
            extra.insert(Protocol::Cohere, "safety_mode".into(), Value::from(mode));
        }
        Request {
            model, system, messages, tools, tool_choice, response_format, reasoning, stream, extra,
            ..knobs
        }
    }
}

fn stop_reason() -> impl Strategy<Value = StopReason> {
    prop_oneof![
        Just(StopReason::EndTurn),
        Just(StopReason::MaxTokens),
        Just(StopReason::StopSequence),
        Just(StopReason::ToolUse),
        Just(StopReason::Error),
    ]
}

prop_compose! {
    fn usage()(input in 0u64..1_000_000, output in 0u64..100_000, cached in 0u64..1_000_000) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: cached.min(input),
            ..Usage::default()
        }
    }
}

prop_compose! {
    fn response()(
        id in "[a-f0-9-]{0,36}",
        content in prop_oneof![Just(Vec::new()), assistant_content()],
        stop_reason in stop_reason(),
        usage in usage(),
    ) -> Response {
        Response { logprobs: Vec::new(), choices: Vec::new(), id, model: String::new(), created: None, content, stop_reason: Some(stop_reason), stop_sequence: None, usage }
    }
}

fn decode(bytes: &[u8]) -> Vec<StreamEvent> {
    CohereCodec.decode_stream(&[bytes]).unwrap()
}

fn encode(events: &[StreamEvent]) -> Vec<u8> {
    CohereCodec.encode_stream(CohereCodec.default_framing(), events)
}

/// What a Cohere stream can say of these events (see the module docs).
fn normalise(events: Vec<StreamEvent>) -> Vec<StreamEvent> {
    events
        .into_iter()
        .filter(|event| {
            !matches!(event, StreamEvent::BlockDelta { delta: Delta::Text(piece) | Delta::Thinking(piece) | Delta::ToolInput(piece), .. } if piece.is_empty())
        })
        .map(|event| match event {
            StreamEvent::MessageStart { id, .. } => StreamEvent::MessageStart {
                id,
                model: String::new(),
                created: None,
                usage: Usage::default(),
            },
            other => other,
        })
        .collect()
}

proptest! {
    #[test]
    fn requests_survive_write_then_read(request in request()) {
        let written = CohereCodec.write_request(&request);
        prop_assert!(written.dropped.is_empty(), "{:?}", written.dropped);
        let read = CohereCodec.read_request(&written.body).unwrap();
        prop_assert_eq!(read, request);
    }

    #[test]
    fn responses_survive_write_then_read(response in response()) {
        let written = CohereCodec.write_response(&response);
        prop_assert!(written.dropped.is_empty(), "{:?}", written.dropped);
        prop_assert_eq!(CohereCodec.read_response(&written.body).unwrap(), response);
    }

    #[test]
    fn streams_survive_encode_then_decode(response in response()) {
        let events = events_from_response(&response);
        let decoded = decode(&encode(&events));
        prop_assert_eq!(decoded, normalise(events));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = CohereCodec.read_request(&bytes);
        let _ = CohereCodec.read_response(&bytes);
        let mut decoder = CohereCodec.stream_decoder();
        let _ = decoder.feed(&bytes, &mut Vec::new());
        let _ = CohereCodec.extract_error(500, &bytes);
    }
}

#[test]
fn stream_errors_survive_encode_then_decode() {
    let error = ErrorInfo::new(ErrorKind::Internal, "the backend failed mid-stream");
    let events = vec![
        StreamEvent::MessageStart { id: "m1".into(), model: String::new(), created: None, usage: Usage::default() },
        StreamEvent::Error(error),
    ];
    assert_eq!(decode(&encode(&events)), events);
}

#[test]
fn error_responses_read_back_with_kind_and_message() {
    let kinds = [
        ErrorKind::InvalidRequest,
        ErrorKind::Authentication,
        ErrorKind::PermissionDenied,
        ErrorKind::NotFound,
        ErrorKind::RequestTooLarge,
        ErrorKind::RateLimit,
        ErrorKind::QuotaExceeded,
        ErrorKind::ContextLength,
        ErrorKind::Overloaded,
        ErrorKind::Timeout,
        ErrorKind::Unavailable,
        ErrorKind::Internal,
    ];
    for kind in kinds {
        // Cohere's body has no error type, so context length is told by its
        // message, as Cohere's own errors do.
        let message = match kind {
            ErrorKind::ContextLength => "too many tokens: the prompt exceeds the context window",
            // A quota and a rate limit share the 429: the message tells them apart.
            ErrorKind::QuotaExceeded => "the monthly quota is spent",
            _ => "something went wrong",
        };
        let error = ErrorInfo::new(kind, message);
        let written = CohereCodec.error_response(&error);
        let body: Value = serde_json::from_slice(&written.body).unwrap();
        assert_eq!(body, json!({"message": message}));
        let read = CohereCodec.extract_error(written.status, &written.body);
        assert_eq!(read.kind, kind, "{kind:?}");
        assert_eq!(read.message, message);
    }
}
