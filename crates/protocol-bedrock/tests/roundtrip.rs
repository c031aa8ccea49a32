//! Round trips: IR → Converse → IR for requests, responses, streams and
//! errors built from what Converse can represent. Each normalisation the
//! protocol imposes is written next to the place it is applied.

#![allow(clippy::unwrap_used, clippy::panic, reason = "test helpers outside #[test] functions fail loudly")]

use proptest::prelude::*;
use serde_json::{Map, Value};
use switchyard_codec::ir::{
    events_from_response, Block, CacheControl, ErrorInfo, ErrorKind, Extra, MediaSource, Message, Protocol, Reasoning,
    Request, Response, ResponseFormat, Role, StopReason, StreamEvent, TextBlock, Tool, ToolChoice, ToolResult, ToolUse,
    Usage,
};
use switchyard_codec::{Codec, Framing};
use switchyard_protocol_bedrock::BedrockCodec;

fn word() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 _.:/é\"\\\\\n-]{0,12}"
}

fn name() -> impl Strategy<Value = String> {
    "[a-zA-Z][a-zA-Z0-9_-]{0,10}"
}

fn base64_data() -> impl Strategy<Value = String> {
    "([A-Za-z0-9+/]{4}){1,4}"
}

/// Temperatures and probabilities as callers write them. (Arbitrary f64
/// bit patterns are not used: serde_json's default float parser is not
/// correctly rounded for every value.)
fn knob() -> impl Strategy<Value = f64> {
    (0u32..=200).prop_map(|hundredths| f64::from(hundredths) / 100.0)
}

fn cache() -> impl Strategy<Value = Option<CacheControl>> {
    prop_oneof![Just(None), Just(Some(CacheControl { ttl: None })), Just(Some(CacheControl { ttl: Some("1h".into()) })),]
}

fn json_object() -> impl Strategy<Value = Value> {
    proptest::collection::vec(
        (
            name(),
            prop_oneof![
                word().prop_map(Value::from),
                any::<i32>().prop_map(Value::from),
                any::<bool>().prop_map(Value::from)
            ],
        ),
        0..4,
    )
    .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<String, Value>>()))
}

fn text_block() -> impl Strategy<Value = TextBlock> {
    (word(), cache(), proptest::collection::vec(json_object(), 0..2))
        .prop_map(|(text, cache_control, citations)| TextBlock { text, cache_control, citations })
}

fn image() -> impl Strategy<Value = Block> {
    let base64 =
        (prop_oneof![Just("image/png"), Just("image/jpeg"), Just("image/gif"), Just("image/webp")], base64_data())
            .prop_map(|(media_type, data)| MediaSource::Base64 { media_type: media_type.into(), data });
    // S3 locations keep their URL; the type comes back from the format.
    let s3 = name().prop_map(|key| MediaSource::Url {
        url: format!("s3://bucket/{key}.png"),
        media_type: Some("image/png".into()),
    });
    (prop_oneof![base64, s3], cache()).prop_map(|(source, cache_control)| Block::Image { source, cache_control })
}

fn document() -> impl Strategy<Value = Block> {
    // Converse requires a name, so the IR's optional one is always set here.
    (
        prop_oneof![Just("application/pdf"), Just("text/plain"), Just("text/csv"), Just("text/markdown")],
        base64_data(),
        name(),
        cache(),
    )
        .prop_map(|(media_type, data, name, cache_control)| Block::Document {
            source: MediaSource::Base64 { media_type: media_type.into(), data },
            name: Some(name),
            cache_control,
        })
}

fn audio() -> impl Strategy<Value = Block> {
    let base64 =
        (prop_oneof![Just("audio/wav"), Just("audio/mp3"), Just("audio/flac"), Just("audio/ogg")], base64_data())
            .prop_map(|(media_type, data)| MediaSource::Base64 { media_type: media_type.into(), data });
    let s3 = "s3://[a-z]{3,8}/[a-z]{1,8}\\.wav"
        .prop_map(|url| MediaSource::Url { url, media_type: Some("audio/wav".into()) });
    prop_oneof![base64, s3].prop_map(|source| Block::Audio { source })
}

fn tool_use() -> impl Strategy<Value = Block> {
    // Converse carries arguments as an object: the text is canonical JSON.
    (name(), name(), json_object())
        .prop_map(|(id, name, input)| Block::ToolUse(ToolUse::new(id, name, serde_json::to_string(&input).unwrap())))
}

fn tool_result() -> impl Strategy<Value = Block> {
    // Inner blocks carry no citations, and only the last one a cache marker
    // (the one place Converse has for it: after the result).
    let inner = prop_oneof![
        word().prop_map(Block::text),
        image().prop_map(|block| match block {
            Block::Image { source, .. } => Block::Image { source, cache_control: None },
            other => other,
        }),
    ];
    (name(), proptest::collection::vec(inner, 0..3), cache(), any::<bool>()).prop_map(
        |(id, mut content, cache, is_error)| {
            if let Some(Block::Text(text)) = content.last_mut() {
                text.cache_control = cache;
            }
            Block::ToolResult(ToolResult { tool_use_id: id, name: None, content, is_error })
        },
    )
}

fn thinking() -> impl Strategy<Value = Block> {
    prop_oneof![
        (word(), proptest::option::of(base64_data())).prop_map(|(text, signature)| Block::Thinking { text, signature }),
        base64_data().prop_map(|data| Block::RedactedThinking { data }),
    ]
}

fn user_block() -> impl Strategy<Value = Block> {
    prop_oneof![text_block().prop_map(Block::Text), image(), audio(), document(), tool_result()]
}

fn assistant_block() -> impl Strategy<Value = Block> {
    prop_oneof![text_block().prop_map(Block::Text), thinking(), tool_use()]
}

fn messages() -> impl Strategy<Value = Vec<Message>> {
    // Roles alternate: Converse requires it, and the writer merges
    // consecutive messages of one role.
    proptest::collection::vec(
        (proptest::collection::vec(user_block(), 0..4), proptest::collection::vec(assistant_block(), 0..4)),
        0..3,
    )
    .prop_map(|turns| {
        turns
            .into_iter()
            .flat_map(|(user, assistant)| [Message::new(Role::User, user), Message::new(Role::Assistant, assistant)])
            .collect()
    })
}

fn tools() -> impl Strategy<Value = (Vec<Tool>, Option<ToolChoice>)> {
    proptest::collection::vec((name(), proptest::option::of(word()), json_object(), cache()), 0..3).prop_flat_map(
        |specs| {
            let tools: Vec<Tool> = specs
                .into_iter()
                .map(|(name, description, parameters, cache_control)| Tool {
                    name,
                    description,
                    parameters,
                    cache_control,
                    ..Tool::default()
                })
                .collect();
            // A policy needs tools; Converse cannot say "none".
            let choice = if tools.is_empty() {
                Just(None).boxed()
            } else {
                let first = tools[0].name.clone();
                prop_oneof![
                    Just(None),
                    Just(Some(ToolChoice::Auto)),
                    Just(Some(ToolChoice::Any)),
                    Just(Some(ToolChoice::Tool(first)))
                ]
                .boxed()
            };
            (Just(tools), choice)
        },
    )
}

fn request() -> impl Strategy<Value = Request> {
    (
        proptest::collection::vec(text_block().prop_map(|text| TextBlock { citations: Vec::new(), ..text }), 0..3),
        messages(),
        tools(),
        (
            proptest::option::of(1u64..100_000),
            proptest::option::of(knob()),
            proptest::option::of(knob()),
            proptest::option::of(0u64..500),
        ),
        proptest::collection::vec(word(), 0..3),
        proptest::option::of((name(), json_object()).prop_map(|(name, schema)| ResponseFormat::JsonSchema {
            name,
            schema,
            strict: None,
        })),
        // Budgets, or off; an effort alone is written as its budget.
        proptest::option::of(prop_oneof![(1u64..100_000).prop_map(Reasoning::with_budget), Just(Reasoning::off()),]),
        proptest::collection::vec((name(), word()), 0..3),
        proptest::option::of(json_object()),
    )
        .prop_map(
            |(
                system,
                messages,
                (tools, tool_choice),
                (max_tokens, temperature, top_p, top_k),
                stop,
                response_format,
                reasoning,
                metadata,
                guardrail,
            )| {
                let mut extra = Extra::new();
                if let Some(guardrail) = guardrail {
                    extra.insert(Protocol::Bedrock, "guardrailConfig".into(), guardrail);
                }
                Request {
                    system,
                    messages,
                    tools,
                    tool_choice,
                    max_tokens,
                    temperature,
                    top_p,
                    top_k,
                    stop,
                    response_format,
                    reasoning,
                    metadata: metadata.into_iter().map(|(key, value)| (key, Value::String(value))).collect(),
                    extra,
                    ..Request::default()
                }
            },
        )
}

fn usage() -> impl Strategy<Value = Usage> {
    // Bedrock has no reasoning count, and input includes the cache counts.
    (0u64..100_000, 0u64..100_000, 0u64..10_000, 0u64..10_000).prop_map(|(uncached, output, read, write)| Usage {
        input_tokens: uncached + read + write,
        output_tokens: output,
        cache_read_tokens: read,
        cache_write_tokens: write,
        ..Usage::default()
    })
}

fn response() -> impl Strategy<Value = Response> {
    (
        proptest::collection::vec(assistant_block(), 0..5),
        // Converse names no stop reason for pauses or refusals; those are
        // written as their closest kin and are not generated here.
        prop_oneof![
            Just(StopReason::EndTurn),
            Just(StopReason::ToolUse),
            Just(StopReason::MaxTokens),
            Just(StopReason::StopSequence),
            Just(StopReason::ContentFilter),
            Just(StopReason::ContextLength),
            Just(StopReason::Error),
        ],
        proptest::option::of(word()),
        usage(),
    )
        .prop_map(|(content, stop_reason, stop_sequence, usage)| Response {
            logprobs: Vec::new(),
            choices: Vec::new(),
            // Converse has no response id, model or creation time.
            id: String::new(),
            model: String::new(),
            created: None,
            content,
            stop_reason: Some(stop_reason),
            stop_sequence,
            usage,
        })
}

proptest! {
    #[test]
    fn requests_round_trip(request in request().prop_map(switchyard_codec::effort::within_claude_thinking_rules)) {
        let encoded = BedrockCodec.write_request(&request);
        prop_assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
        let read = BedrockCodec.read_request(&encoded.body).unwrap();
        prop_assert_eq!(read, request);
    }

    #[test]
    fn responses_round_trip(response in response()) {
        let encoded = BedrockCodec.write_response(&response);
        prop_assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
        prop_assert_eq!(BedrockCodec.read_response(&encoded.body).unwrap(), response);
    }

    #[test]
    fn streams_round_trip(response in response()) {
        let events = events_from_response(&response);
        let mut encoder = BedrockCodec.stream_encoder(Framing::EventStream);
        let mut bytes = Vec::new();
        for event in &events {
            encoder.encode(event, &mut bytes);
        }
        encoder.finish(&mut bytes);
        let mut decoder = BedrockCodec.stream_decoder();
        let mut decoded = Vec::new();
        decoder.feed(&bytes, &mut decoded).unwrap();
        decoder.finish(&mut decoded).unwrap();
        // Bedrock reports usage once, at the end: the start carries none.
        let expected: Vec<StreamEvent> = events
            .into_iter()
            .map(|event| match event {
                StreamEvent::MessageStart { id, model, created, .. } => {
                    StreamEvent::MessageStart { id, model, created, usage: Usage::default() }
                }
                other => other,
            })
            .collect();
        prop_assert_eq!(decoded, expected);
    }
}

#[test]
fn errors_round_trip_through_extract_error() {
    let cases = [
        (ErrorKind::InvalidRequest, "messages must be an array"),
        (ErrorKind::ContextLength, "input is too long for requested model"),
        (ErrorKind::Authentication, "invalid api key"),
        (ErrorKind::PermissionDenied, "pool is not allowed for this key"),
        (ErrorKind::NotFound, "unknown pool `x`"),
        (ErrorKind::RequestTooLarge, "body is over 10 mib"),
        (ErrorKind::RateLimit, "rate limit exceeded"),
        (ErrorKind::QuotaExceeded, "monthly budget exhausted"),
        (ErrorKind::Timeout, "upstream took too long"),
        (ErrorKind::Unavailable, "no lane is available"),
        (ErrorKind::Internal, "internal error"),
        // Bedrock has one "service unavailable": overload reads back as it.
        (ErrorKind::Overloaded, "upstream overloaded"),
    ];
    for (kind, message) in cases {
        let response = BedrockCodec.error_response(&ErrorInfo::new(kind, message));
        let raw = BedrockCodec.extract_error(response.status, &response.body);
        let expected = if kind == ErrorKind::Overloaded { ErrorKind::Unavailable } else { kind };
        assert_eq!((raw.kind, raw.message.as_str()), (expected, message), "{kind:?}");
        assert_eq!(response.headers[0].0, "x-amzn-errortype");
        assert_eq!(Some(response.headers[0].1.to_str().unwrap()), raw.vendor_type.as_deref());
    }
}

#[test]
fn stream_errors_round_trip_to_the_five_stream_exceptions() {
    // ConverseStream raises only throttling, validation, model-stream,
    // internal-server and service-unavailable exceptions mid-stream.
    let cases = [
        (ErrorKind::RateLimit, ErrorKind::RateLimit, 429),
        (ErrorKind::QuotaExceeded, ErrorKind::RateLimit, 429),
        (ErrorKind::InvalidRequest, ErrorKind::InvalidRequest, 400),
        (ErrorKind::NotFound, ErrorKind::InvalidRequest, 400),
        (ErrorKind::Overloaded, ErrorKind::Unavailable, 503),
        (ErrorKind::Unavailable, ErrorKind::Unavailable, 503),
        (ErrorKind::Timeout, ErrorKind::Internal, 424),
        (ErrorKind::Internal, ErrorKind::Internal, 500),
    ];
    for (kind, expected, status) in cases {
        let mut encoder = BedrockCodec.stream_encoder(Framing::EventStream);
        let mut bytes = Vec::new();
        encoder.encode(&StreamEvent::Error(ErrorInfo::new(kind, "it broke")), &mut bytes);
        let mut decoder = BedrockCodec.stream_decoder();
        let mut events = Vec::new();
        decoder.feed(&bytes, &mut events).unwrap();
        let [StreamEvent::Error(info)] = events.as_slice() else { panic!("{events:?}") };
        assert_eq!((info.kind, info.status, info.message.as_str()), (expected, status, "it broke"), "{kind:?}");
    }
}

#[test]
fn every_framing_gets_event_stream_frames() {
    let response =
        Response { content: vec![Block::text("hi")], stop_reason: Some(StopReason::EndTurn), ..Response::default() };
    let encode = |framing| {
        let mut encoder = BedrockCodec.stream_encoder(framing);
        let mut bytes = Vec::new();
        for event in events_from_response(&response) {
            encoder.encode(&event, &mut bytes);
        }
        bytes
    };
    assert_eq!(encode(Framing::Sse), encode(Framing::EventStream));
}

#[test]
fn empty_blocks_survive_the_stream() {
    // Bedrock opens text and reasoning blocks with their first delta, so
    // the encoder writes an empty one for a block that had none.
    let events = vec![
        StreamEvent::MessageStart { id: String::new(), model: String::new(), created: None, usage: Usage::default() },
        StreamEvent::BlockStart { index: 0, block: switchyard_codec::ir::BlockStart::Text },
        StreamEvent::BlockStop { index: 0 },
        StreamEvent::MessageStop,
    ];
    let mut encoder = BedrockCodec.stream_encoder(Framing::EventStream);
    let mut bytes = Vec::new();
    for event in &events {
        encoder.encode(event, &mut bytes);
    }
    let mut decoder = BedrockCodec.stream_decoder();
    let mut decoded = Vec::new();
    decoder.feed(&bytes, &mut decoded).unwrap();
    assert_eq!(decoded[1], events[1]);
    assert_eq!(
        decoded[2],
        StreamEvent::BlockDelta { index: 0, delta: switchyard_codec::ir::Delta::Text(String::new()) }
    );
    // A message without a MessageDelta ends normally on the wire.
    assert_eq!(
        decoded[4],
        StreamEvent::MessageDelta {
            stop_reason: Some(StopReason::EndTurn),
            stop_sequence: None,
            usage: Usage::default()
        }
    );
}
