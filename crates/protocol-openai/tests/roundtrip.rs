//! Round-trip properties: for IR the protocol can represent,
//! `read(write(ir)) == ir` for requests and responses, encode → decode keeps
//! stream events, and written errors read back with their kind and message.
//!
//! The generators stay inside what Chat Completions can say; each place where
//! the protocol canonicalises is named in a `normalise` comment.

#![expect(clippy::unwrap_used, reason = "test helpers outside #[test] fns fail loudly")]

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use switchyard_codec::ir::{
    events_from_response, Block, Effort, ErrorInfo, ErrorKind, MediaSource, Message, Reasoning, Request, Response,
    ResponseFormat, Role, StopReason, StreamEvent, Tool, ToolChoice, ToolResult, ToolUse, Usage,
};
use switchyard_codec::Codec;
use switchyard_protocol_openai::OpenAiCodec;

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 .,!?{}\"\\\\\n\u{e9}\u{1f600}]{0,16}"
}

fn nonempty_text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 .,!?{}\"\u{e9}]{1,16}"
}

/// Knobs with few decimals, which JSON carries exactly.
fn knob() -> impl Strategy<Value = Option<f64>> {
    proptest::option::of((0u32..=200).prop_map(|n| f64::from(n) / 100.0))
}

fn tool_use() -> impl Strategy<Value = ToolUse> {
    ("call_[a-zA-Z0-9]{1,8}", "[a-z_]{1,10}", text()).prop_map(|(id, name, input)| ToolUse::new(id, name, input))
}

fn user_block() -> impl Strategy<Value = Block> {
    prop_oneof![
        text().prop_map(Block::text),
        (prop::sample::select(vec!["image/png", "image/jpeg"]), "[A-Za-z0-9+/]{0,12}").prop_map(
            |(media_type, data)| Block::Image {
                source: MediaSource::Base64 { media_type: media_type.to_owned(), data },
                cache_control: None,
            }
        ),
        "https://example\\.com/[a-z]{1,8}\\.png"
            .prop_map(|url| Block::Image { source: MediaSource::Url { url, media_type: None }, cache_control: None }),
        (
            prop::sample::select(vec!["application/pdf", "text/plain"]),
            "[A-Za-z0-9+/]{0,12}",
            proptest::option::of("[a-z]{1,8}\\.pdf")
        )
            .prop_map(|(media_type, data, name)| Block::Document {
                source: MediaSource::Base64 { media_type: media_type.to_owned(), data },
                name,
                cache_control: None,
            }),
        ("file-[a-zA-Z0-9]{1,10}", proptest::option::of("[a-z]{1,8}\\.pdf")).prop_map(|(url, name)| Block::Document {
            source: MediaSource::Url { url, media_type: None },
            name,
            cache_control: None,
        }),
        // `input_audio`: wav or mp3, named as the reader names them.
        (prop::sample::select(vec!["audio/wav", "audio/mp3"]), "[A-Za-z0-9+/]{4,16}").prop_map(|(media_type, data)| {
            Block::Audio { source: MediaSource::Base64 { media_type: media_type.to_owned(), data } }
        }),
    ]
}

fn tool_result() -> impl Strategy<Value = Block> {
    // Tool messages hold text only, and at least one block (an empty
    // content string reads back as one empty text block).
    ("call_[a-zA-Z0-9]{1,8}", proptest::collection::vec(text(), 1..3)).prop_map(|(id, texts)| {
        Block::ToolResult(ToolResult {
            tool_use_id: id,
            name: None,
            content: texts.into_iter().map(Block::text).collect(),
            is_error: false,
        })
    })
}

fn user_message() -> impl Strategy<Value = Message> {
    // Tool results come first: the writer emits tool messages before the
    // user message that holds the rest.
    prop_oneof![
        proptest::collection::vec(user_block(), 1..4),
        (proptest::collection::vec(tool_result(), 1..3), proptest::collection::vec(user_block(), 0..3)).prop_map(
            |(mut results, rest)| {
                results.extend(rest);
                results
            }
        ),
    ]
    .prop_map(|content| Message::new(Role::User, content))
}

fn assistant_message() -> impl Strategy<Value = Message> {
    // Text comes before calls: the wire keeps them in separate fields.
    (proptest::collection::vec(text(), 0..3), proptest::collection::vec(tool_use(), 0..3))
        .prop_filter("a turn says something", |(t, c)| !t.is_empty() || !c.is_empty())
        .prop_map(|(texts, calls)| {
            Message::new(
                Role::Assistant,
                texts.into_iter().map(Block::text).chain(calls.into_iter().map(Block::ToolUse)).collect(),
            )
        })
}

fn messages() -> impl Strategy<Value = Vec<Message>> {
    // Roles alternate: a user message right after a results-only one
    // would be merged into it on read.
    (proptest::collection::vec((user_message(), assistant_message()), 0..3), proptest::option::of(user_message()))
        .prop_map(|(pairs, last)| {
            pairs.into_iter().flat_map(|(user, assistant)| [user, assistant]).chain(last).collect()
        })
}

fn tool() -> impl Strategy<Value = Tool> {
    (
        "[a-z_]{1,10}",
        proptest::option::of(text()),
        prop_oneof![Just(Value::Null), Just(json!({"type": "object", "properties": {"q": {"type": "string"}}}))],
    )
        .prop_map(|(name, description, parameters)| Tool {
            name,
            description,
            parameters,
            cache_control: None,
            ..Tool::default()
        })
}

fn tool_choice() -> impl Strategy<Value = Option<ToolChoice>> {
    proptest::option::of(prop_oneof![
        Just(ToolChoice::Auto),
        Just(ToolChoice::Any),
        Just(ToolChoice::None),
        "[a-z_]{1,10}".prop_map(ToolChoice::Tool),
    ])
}

fn response_format() -> impl Strategy<Value = Option<ResponseFormat>> {
    proptest::option::of(prop_oneof![
        Just(ResponseFormat::JsonObject),
        ("[a-z_]{1,10}", proptest::option::of(any::<bool>())).prop_map(|(name, strict)| {
            ResponseFormat::JsonSchema {
                name,
                schema: json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
                strict,
            }
        }),
    ])
}

fn reasoning() -> impl Strategy<Value = Option<Reasoning>> {
    // Only a level Chat Completions has: a budget is written as the level it
    // stands for, thinking off not at all.
    let levels = vec![Effort::Minimal, Effort::Low, Effort::Medium, Effort::High, Effort::XHigh];
    proptest::option::of(prop::sample::select(levels).prop_map(Reasoning::with_effort))
}

fn metadata() -> impl Strategy<Value = Map<String, Value>> {
    proptest::collection::btree_map("[a-z]{1,5}", "[a-z0-9]{0,5}", 0..3)
        .prop_map(|entries| entries.into_iter().map(|(k, v)| (k, Value::String(v))).collect())
}

fn request() -> impl Strategy<Value = Request> {
    (
        (
            "[a-z0-9.-]{1,12}",
            proptest::collection::vec(text(), 0..3),
            messages(),
            proptest::collection::vec(tool(), 0..3),
            tool_choice(),
            proptest::option::of(any::<bool>()),
        ),
        (
            proptest::option::of(any::<u64>()),
            knob(),
            knob(),
            proptest::collection::vec(nonempty_text(), 0..3),
            proptest::option::of(any::<i64>()),
            knob(),
            knob(),
        ),
        (response_format(), reasoning(), any::<bool>(), proptest::option::of("[a-z0-9-]{1,10}"), metadata()),
    )
        .prop_map(
            |(
                (model, system, messages, tools, tool_choice, parallel_tool_calls),
                (max_tokens, temperature, top_p, stop, seed, frequency_penalty, presence_penalty),
                (response_format, reasoning, stream, user, metadata),
            )| Request {
                logprobs: None,
                n: None,
                model,
                system: system.into_iter().map(switchyard_codec::ir::TextBlock::new).collect(),
                messages,
                tools,
                tool_choice,
                parallel_tool_calls,
                max_tokens,
                temperature,
                top_p,
                top_k: None,
                stop,
                seed,
                frequency_penalty,
                presence_penalty,
                response_format,
                reasoning,
                stream,
                user,
                metadata,
                betas: Vec::new(),
                extra: Default::default(),
            },
        )
}

fn usage() -> impl Strategy<Value = Usage> {
    (0u64..100_000, 0u64..100_000, 0u64..=100, 0u64..=100).prop_map(|(input, output, cached_pct, reasoning_pct)| {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: input * cached_pct / 100,
            // OpenAI has no cache-write count.
            cache_write_tokens: 0,
            reasoning_tokens: output * reasoning_pct / 100,
            ..Usage::default()
        }
    })
}

fn response() -> impl Strategy<Value = Response> {
    (
        "chatcmpl-[a-zA-Z0-9]{1,12}",
        "[a-z0-9.-]{1,12}",
        0i64..2_000_000_000,
        proptest::option::of(nonempty_text()),
        proptest::collection::vec(tool_use(), 0..3),
        proptest::option::of(prop::sample::select(vec![
            StopReason::EndTurn,
            StopReason::MaxTokens,
            StopReason::ToolUse,
            StopReason::ContentFilter,
            StopReason::Refusal,
        ])),
        usage(),
    )
        .prop_map(|(id, model, created, text, calls, stop_reason, usage)| Response {
            logprobs: Vec::new(),
            choices: Vec::new(),
            id,
            model,
            created: Some(created),
            // One text block at most: the wire content is one string.
            content: text.map(Block::text).into_iter().chain(calls.into_iter().map(Block::ToolUse)).collect(),
            stop_reason,
            stop_sequence: None,
            usage,
        })
}

/// normalise: a refusal without text has nothing to put in `refusal`, so it
/// reads back as a plain stop.
fn normalise_response(mut response: Response) -> Response {
    let has_text = response.content.iter().any(|b| matches!(b, Block::Text(_)));
    if response.stop_reason == Some(StopReason::Refusal) && !has_text {
        response.stop_reason = Some(StopReason::EndTurn);
    }
    response
}

/// normalise, for streams: usage arrives only at the end (so `MessageStart`
/// carries none); a finish reason is always written (`None` becomes
/// `EndTurn`); a streamed refusal travels as content (`EndTurn`); empty
/// deltas are not written.
fn normalise_events(events: Vec<StreamEvent>) -> Vec<StreamEvent> {
    events
        .into_iter()
        .filter_map(|event| match event {
            StreamEvent::MessageStart { id, model, created, .. } => {
                Some(StreamEvent::MessageStart { id, model, created, usage: Usage::default() })
            }
            StreamEvent::BlockDelta { delta: switchyard_codec::ir::Delta::ToolInput(input), .. }
                if input.is_empty() =>
            {
                None
            }
            StreamEvent::MessageDelta { stop_reason, usage, .. } => Some(StreamEvent::MessageDelta {
                stop_reason: match stop_reason {
                    None | Some(StopReason::Refusal) => Some(StopReason::EndTurn),
                    other => other,
                },
                stop_sequence: None,
                usage,
            }),
            other => Some(other),
        })
        .collect()
}

fn encode(events: &[StreamEvent]) -> Vec<u8> {
    OpenAiCodec.encode_stream(OpenAiCodec.default_framing(), events)
}

fn decode(bytes: &[u8]) -> Vec<StreamEvent> {
    OpenAiCodec.decode_stream(&[bytes]).unwrap()
}

proptest! {
    #[test]
    fn request_round_trips(request in request()) {
        let encoded = OpenAiCodec.write_request(&request);
        prop_assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
        let read = OpenAiCodec.read_request(&encoded.body).unwrap();
        prop_assert_eq!(read, request);
    }

    #[test]
    fn response_round_trips(response in response()) {
        let encoded = OpenAiCodec.write_response(&response);
        prop_assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
        let read = OpenAiCodec.read_response(&encoded.body).unwrap();
        prop_assert_eq!(read, normalise_response(response));
    }

    #[test]
    fn stream_round_trips(response in response()) {
        let events = events_from_response(&response);
        let decoded = decode(&encode(&events));
        prop_assert_eq!(decoded, normalise_events(events));
    }

    #[test]
    fn errors_read_back(
        kind in prop::sample::select(vec![
            ErrorKind::InvalidRequest, ErrorKind::Authentication, ErrorKind::PermissionDenied,
            ErrorKind::NotFound, ErrorKind::RequestTooLarge, ErrorKind::RateLimit,
            ErrorKind::QuotaExceeded, ErrorKind::ContextLength, ErrorKind::Overloaded,
            ErrorKind::Timeout, ErrorKind::Unavailable, ErrorKind::Internal,
        ]),
        message in "[a-z0-9 ]{1,40}",
    ) {
        let written = OpenAiCodec.error_response(&ErrorInfo::new(kind, message.clone()));
        let raw = OpenAiCodec.extract_error(written.status, &written.body);
        prop_assert_eq!(raw.kind, kind);
        prop_assert_eq!(raw.message, message);
    }
}

#[test]
fn fixture_stream_survives_re_encoding() {
    let path = format!("{}/tests/fixtures/stream_text_tool_usage.sse", env!("CARGO_MANIFEST_DIR"));
    let events = decode(&std::fs::read(path).unwrap());
    assert_eq!(decode(&encode(&events)), events);
}

#[test]
fn encoded_stream_has_the_openai_shape() {
    let response = Response {
        logprobs: Vec::new(),
        choices: Vec::new(),
        id: "chatcmpl-1".into(),
        model: "gpt-4o".into(),
        created: None,
        content: vec![Block::text("Hi"), Block::ToolUse(ToolUse::new("call_1", "f", "{}"))],
        stop_reason: Some(StopReason::ToolUse),
        stop_sequence: None,
        usage: Usage { input_tokens: 5, output_tokens: 2, ..Usage::default() },
    };
    let text = String::from_utf8(encode(&events_from_response(&response))).unwrap();
    let frames: Vec<&str> = text.split("\n\n").filter(|f| !f.is_empty()).collect();
    assert_eq!(frames.last(), Some(&"data: [DONE]"));
    let chunks: Vec<Value> = frames[..frames.len() - 1]
        .iter()
        .map(|f| serde_json::from_str(f.strip_prefix("data: ").unwrap()).unwrap())
        .collect();
    for chunk in &chunks {
        assert_eq!(chunk["id"], "chatcmpl-1");
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["created"], 0);
        assert_eq!(chunk["model"], "gpt-4o");
    }
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(
        chunks[2]["choices"][0]["delta"]["tool_calls"][0],
        json!({"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}})
    );
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
    let usage = &chunks[chunks.len() - 1];
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], 5);
    assert_eq!(usage["usage"]["total_tokens"], 7);
}
