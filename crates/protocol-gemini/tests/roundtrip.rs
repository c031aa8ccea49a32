//! Property tests: IR built from content Gemini can represent survives
//! write → read unchanged (requests, responses, streams in both framings),
//! and written errors read back with their kind and message.
//!
//! The generators produce the canonical form the codec reads; each
//! normalisation the codec applies, and so the generators respect, is:
//! - requests never carry tool-call ids (the generateContent request schema
//!   rejects them), so ids are the reader's synthetic `call_<n>` (ordinal
//!   in the conversation) and results name their tool;
//! - a tool result's text is not itself a JSON object (that would travel
//!   as the response object, re-serialised compactly);
//! - tool arguments are compact JSON objects (they travel as objects);
//! - texts are non-empty (empty text parts are not kept);
//! - a JSON schema is named `response` and has no `strict` (Gemini schemas
//!   are unnamed and always enforced); `stream`, `user`, `metadata`,
//!   `parallel_tool_calls` and cache markers are unset (no Gemini field);
//! - a reasoning budget is positive (0 means disabled) and `disabled`
//!   comes alone;
//! - a URL document has a non-image MIME type (a URL without one is taken
//!   for an image);
//! - in replies, neighbouring blocks differ in kind where text or thinking
//!   would merge in a stream (a stream has no boundary between two text
//!   parts), `STOP` reads as `ToolUse` exactly when calls are present, and
//!   `stop_sequence`, `cache_write_tokens` are unset;
//! - streams drop empty text and thinking deltas, and the final usage is
//!   cumulative (it includes the `MessageStart` usage).

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use switchyard_codec::ir::{
    events_from_response, Block, Delta, Effort, ErrorInfo, ErrorKind, Extra, MediaSource, Message, Protocol, Reasoning,
    Request, Response, ResponseFormat, Role, StopReason, StreamEvent, TextBlock, Tool, ToolChoice, ToolResult, ToolUse,
    Usage,
};
use switchyard_codec::{Codec, Framing};
use switchyard_protocol_gemini::GeminiCodec;

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 .,!?é☁]{1,16}"
}

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z_]{0,7}"
}

fn nice_f64(range: std::ops::Range<i32>) -> impl Strategy<Value = f64> {
    range.prop_map(|n| f64::from(n) / 100.0)
}

#[expect(clippy::unwrap_used, reason = "a string-keyed map always serialises")]
fn arguments() -> impl Strategy<Value = String> {
    let value = prop_oneof![
        any::<i32>().prop_map(Value::from),
        text().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
    ];
    proptest::collection::btree_map("[a-z]{1,5}", value, 0..3).prop_map(|map| serde_json::to_string(&map).unwrap())
}

fn signature() -> impl Strategy<Value = String> {
    "[A-Za-z0-9+/]{4,12}"
}

#[derive(Debug, Clone)]
enum UserPiece {
    Text(String),
    ImageBase64(String),
    ImageUrl(String, Option<String>),
    DocumentBase64(String),
    DocumentUrl(String),
    AudioBase64(&'static str, String),
    AudioUrl(String),
}

#[derive(Debug, Clone)]
enum Turn {
    User(Vec<UserPiece>),
    Assistant {
        thinking: Option<(String, Option<String>)>,
        text: Option<String>,
        calls: Vec<(String, String, String, bool, bool)>,
    },
}

fn user_piece() -> impl Strategy<Value = UserPiece> {
    prop_oneof![
        text().prop_map(UserPiece::Text),
        "[A-Za-z0-9+/]{4,16}".prop_map(UserPiece::ImageBase64),
        ("https://[a-z]{1,8}\\.example/[a-z]{1,8}\\.png", proptest::option::of(Just("image/png".to_owned())))
            .prop_map(|(url, mime)| UserPiece::ImageUrl(url, mime)),
        "[A-Za-z0-9+/]{4,16}".prop_map(UserPiece::DocumentBase64),
        "https://[a-z]{1,8}\\.example/[a-z]{1,8}\\.pdf".prop_map(UserPiece::DocumentUrl),
        (prop::sample::select(vec!["audio/wav", "audio/mp3", "audio/ogg", "audio/flac"]), "[A-Za-z0-9+/]{4,16}")
            .prop_map(|(mime, data)| UserPiece::AudioBase64(mime, data)),
        "https://generativelanguage\\.googleapis\\.com/v1beta/files/[a-z0-9]{1,8}".prop_map(UserPiece::AudioUrl),
    ]
}

fn thinking() -> impl Strategy<Value = Option<(String, Option<String>)>> {
    proptest::option::of(prop_oneof![
        (text(), proptest::option::of(signature())),
        signature().prop_map(|s| (String::new(), Some(s))),
    ])
}

fn turn() -> impl Strategy<Value = Turn> {
    prop_oneof![
        proptest::collection::vec(user_piece(), 1..4).prop_map(Turn::User),
        (
            thinking(),
            proptest::option::of(text()),
            proptest::collection::vec((name(), arguments(), text(), any::<bool>(), any::<bool>()), 0..3),
        )
            .prop_map(|(thinking, text, calls)| Turn::Assistant { thinking, text, calls }),
    ]
}

fn build_messages(turns: Vec<Turn>) -> Vec<Message> {
    let mut messages = Vec::new();
    let mut ordinal = 0usize;
    for turn in turns {
        match turn {
            Turn::User(pieces) => {
                let content = pieces
                    .into_iter()
                    .map(|piece| match piece {
                        UserPiece::Text(t) => Block::text(t),
                        UserPiece::ImageBase64(data) => Block::Image {
                            source: MediaSource::Base64 { media_type: "image/png".into(), data },
                            cache_control: None,
                        },
                        UserPiece::ImageUrl(url, media_type) => {
                            Block::Image { source: MediaSource::Url { url, media_type }, cache_control: None }
                        }
                        UserPiece::DocumentBase64(data) => Block::Document {
                            source: MediaSource::Base64 { media_type: "application/pdf".into(), data },
                            name: None,
                            cache_control: None,
                        },
                        UserPiece::DocumentUrl(url) => Block::Document {
                            source: MediaSource::Url { url, media_type: Some("application/pdf".into()) },
                            name: None,
                            cache_control: None,
                        },
                        UserPiece::AudioBase64(mime, data) => {
                            Block::Audio { source: MediaSource::Base64 { media_type: mime.into(), data } }
                        }
                        UserPiece::AudioUrl(url) => {
                            Block::Audio { source: MediaSource::Url { url, media_type: Some("audio/mp3".into()) } }
                        }
                    })
                    .collect();
                messages.push(Message::new(Role::User, content));
            }
            Turn::Assistant { thinking, text, calls } => {
                let mut content = Vec::new();
                if let Some((text, signature)) = thinking {
                    content.push(Block::Thinking { text, signature });
                }
                match text {
                    Some(text) => content.push(Block::text(text)),
                    None if content.is_empty() && calls.is_empty() => content.push(Block::text("ok")),
                    None => {}
                }
                let mut results = Vec::new();
                for (name, input, result, is_error, with_image) in calls {
                    let id = format!("call_{ordinal}");
                    ordinal += 1;
                    content.push(Block::ToolUse(ToolUse::new(id.clone(), name.clone(), input)));
                    let mut result_content = vec![Block::text(result)];
                    if with_image {
                        result_content.push(Block::Image {
                            source: MediaSource::Base64 { media_type: "image/jpeg".into(), data: "AAAA".into() },
                            cache_control: None,
                        });
                    }
                    results.push(Block::ToolResult(ToolResult {
                        tool_use_id: id,
                        name: Some(name),
                        content: result_content,
                        is_error,
                    }));
                }
                messages.push(Message::new(Role::Assistant, fold_call_signatures(content)));
                if !results.is_empty() {
                    messages.push(Message::new(Role::User, results));
                }
            }
        }
    }
    messages
}

fn tool() -> impl Strategy<Value = Tool> {
    (
        name(),
        proptest::option::of(text()),
        prop_oneof![
            Just(Value::Null),
            Just(json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})),
            Just(json!({"type": "OBJECT", "properties": {"n": {"type": "INTEGER"}}})),
        ],
    )
        .prop_map(|(name, description, parameters)| Tool {
            name,
            description,
            parameters,
            cache_control: None,
            ..Tool::default()
        })
}

/// A signature-only thinking block right before a call is the call's own
/// signature: the canonical form the reader gives back.
fn fold_call_signatures(content: Vec<Block>) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::with_capacity(content.len());
    for block in content {
        match (out.last(), block) {
            (Some(Block::Thinking { text, signature: Some(_) }), Block::ToolUse(mut call)) if text.is_empty() => {
                if let Some(Block::Thinking { signature, .. }) = out.pop() {
                    call.signature = signature;
                }
                out.push(Block::ToolUse(call));
            }
            (_, block) => out.push(block),
        }
    }
    out
}

fn tool_choice() -> impl Strategy<Value = Option<ToolChoice>> {
    proptest::option::of(prop_oneof![
        Just(ToolChoice::Auto),
        Just(ToolChoice::Any),
        Just(ToolChoice::None),
        name().prop_map(ToolChoice::Tool),
    ])
}

fn reasoning() -> impl Strategy<Value = Option<Reasoning>> {
    proptest::option::of(prop_oneof![
        prop::sample::select(vec![Effort::Minimal, Effort::Low, Effort::Medium, Effort::High])
            .prop_map(Reasoning::with_effort),
        (1u64..32_768).prop_map(Reasoning::with_budget),
        Just(Reasoning::off()),
        Just(Reasoning::on()),
    ])
}

fn response_format() -> impl Strategy<Value = Option<ResponseFormat>> {
    proptest::option::of(prop_oneof![
        Just(ResponseFormat::JsonObject),
        Just(ResponseFormat::JsonSchema {
            name: "response".into(),
            schema: json!({"type": "object", "properties": {"answer": {"type": "string"}}}),
            strict: None,
        }),
    ])
}

fn extra() -> impl Strategy<Value = Extra> {
    (any::<bool>(), any::<bool>()).prop_map(|(cached, candidates)| {
        let mut extra = Extra::new();
        if cached {
            extra.insert(Protocol::Gemini, "cachedContent".into(), json!("cachedContents/x1"));
        }
        if candidates {
            extra.insert(Protocol::Gemini, "generationConfig".into(), json!({"responseModalities": ["TEXT"]}));
        }
        extra
    })
}

fn request() -> impl Strategy<Value = Request> {
    let body = (
        proptest::collection::vec(text(), 0..3),
        proptest::collection::vec(turn(), 0..5),
        proptest::collection::vec(tool(), 0..3),
        tool_choice(),
    );
    let knobs = (
        proptest::option::of(1u64..100_000),
        proptest::option::of(nice_f64(0..200)),
        proptest::option::of(nice_f64(0..100)),
        proptest::option::of(1u64..100),
        proptest::collection::vec(text(), 0..3),
        proptest::option::of(any::<i32>()),
        proptest::option::of(nice_f64(-200..200)),
        proptest::option::of(nice_f64(-200..200)),
    );
    (body, knobs, response_format(), reasoning(), extra()).prop_map(
        |(
            (system, turns, tools, tool_choice),
            (max_tokens, temperature, top_p, top_k, stop, seed, frequency, presence),
            response_format,
            reasoning,
            extra,
        )| Request {
            system: system.into_iter().map(TextBlock::new).collect(),
            messages: build_messages(turns),
            tools,
            tool_choice,
            max_tokens,
            temperature,
            top_p,
            top_k,
            stop,
            seed: seed.map(i64::from),
            frequency_penalty: frequency,
            presence_penalty: presence,
            response_format,
            reasoning,
            extra,
            ..Request::default()
        },
    )
}

#[derive(Debug, Clone)]
enum Piece {
    Text(String),
    Thinking(String, Option<String>),
    Call(String, String),
}

fn kind(piece: &Piece) -> u8 {
    match piece {
        Piece::Text(_) => 0,
        Piece::Thinking(..) => 1,
        Piece::Call(..) => 2,
    }
}

fn response() -> impl Strategy<Value = Response> {
    let piece = prop_oneof![
        text().prop_map(Piece::Text),
        (text(), proptest::option::of(signature())).prop_map(|(t, s)| Piece::Thinking(t, s)),
        signature().prop_map(|s| Piece::Thinking(String::new(), Some(s))),
        (name(), arguments()).prop_map(|(n, a)| Piece::Call(n, a)),
    ];
    (
        "[A-Za-z0-9]{1,12}",
        "gemini-[0-9]\\.[0-9]-[a-z]{3,5}",
        proptest::option::of(0i64..4_000_000_000),
        proptest::collection::vec(piece, 0..6),
        0usize..4,
        (0u64..100_000, 0u64..100_000, 0u64..100_000, 0u64..100_000),
    )
        .prop_map(|(id, model, created, pieces, stop, (input, cached, output, reasoning))| {
            let mut content = Vec::new();
            let mut last_kind = None;
            let mut calls = 0;
            for piece in pieces {
                let piece_kind = kind(&piece);
                if piece_kind != 2 && last_kind == Some(piece_kind) {
                    continue;
                }
                last_kind = Some(piece_kind);
                content.push(match piece {
                    Piece::Text(t) => Block::text(t),
                    Piece::Thinking(text, signature) => Block::Thinking { text, signature },
                    Piece::Call(name, input) => {
                        calls += 1;
                        Block::ToolUse(ToolUse::new(format!("toolu_{calls}"), name, input))
                    }
                });
            }
            let content = fold_call_signatures(content);
            let stop_reason = if calls > 0 {
                [StopReason::ToolUse, StopReason::MaxTokens][stop % 2]
            } else {
                [StopReason::EndTurn, StopReason::MaxTokens, StopReason::ContentFilter, StopReason::Error][stop]
            };
            Response {
                logprobs: Vec::new(),
                choices: Vec::new(),
                id,
                model,
                created,
                content,
                stop_reason: Some(stop_reason),
                stop_sequence: None,
                usage: Usage {
                    input_tokens: input + cached,
                    output_tokens: output + reasoning,
                    cache_read_tokens: cached,
                    cache_write_tokens: 0,
                    reasoning_tokens: reasoning,
                    ..Usage::default()
                },
            }
        })
}

fn encode(events: &[StreamEvent], framing: Framing) -> Vec<u8> {
    GeminiCodec.encode_stream(framing, events)
}

#[expect(clippy::unwrap_used, reason = "the encoder's output must decode")]
fn decode(bytes: &[u8]) -> Vec<StreamEvent> {
    GeminiCodec.decode_stream(&[bytes]).unwrap()
}

/// Empty text and thinking deltas carry nothing on the wire.
fn without_empty_deltas(events: Vec<StreamEvent>) -> Vec<StreamEvent> {
    events
        .into_iter()
        .filter(|event| {
            !matches!(
                event,
                StreamEvent::BlockDelta {
                    delta: Delta::Text(t) | Delta::Thinking(t),
                    ..
                } if t.is_empty()
            )
        })
        .collect()
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

proptest! {
    #[test]
    fn requests_round_trip(request in request()) {
        let encoded = GeminiCodec.write_request(&request);
        prop_assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
        let body: Map<String, Value> = serde_json::from_slice(&encoded.body).unwrap();
        prop_assert!(!body.contains_key("model"));
        let read = GeminiCodec.read_request(&encoded.body).unwrap();
        prop_assert_eq!(read, request);
    }

    #[test]
    fn responses_round_trip(response in response()) {
        let encoded = GeminiCodec.write_response(&response);
        prop_assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
        prop_assert_eq!(GeminiCodec.read_response(&encoded.body).unwrap(), response);
    }

    #[test]
    fn streams_round_trip_in_both_framings(response in response(), array in any::<bool>()) {
        let events = events_from_response(&response);
        let framing = if array { Framing::JsonArray } else { Framing::Sse };
        let decoded = decode(&encode(&events, framing));
        prop_assert_eq!(decoded, without_empty_deltas(events));
    }

    #[test]
    fn stream_errors_round_trip(kind in error_kind(), message in "[a-z]{1,12}( [a-z]{1,12}){0,3}", array in any::<bool>()) {
        let info = ErrorInfo::new(kind, message.clone());
        let events = vec![
            StreamEvent::MessageStart { id: "r".into(), model: "m".into(), created: None, usage: Usage::default() },
            StreamEvent::Error(info.clone()),
        ];
        let framing = if array { Framing::JsonArray } else { Framing::Sse };
        let decoded = decode(&encode(&events, framing));
        prop_assert_eq!(decoded.len(), 1);
        match &decoded[0] {
            StreamEvent::Error(read) => {
                prop_assert_eq!(read.kind, kind);
                prop_assert_eq!(&read.message, &message);
                prop_assert_eq!(read.status, info.status);
            }
            other => prop_assert!(false, "unexpected {:?}", other),
        }
    }

    #[test]
    fn written_errors_keep_kind_and_message(kind in error_kind(), message in "[a-z]{1,12}( [a-z]{1,12}){0,3}") {
        let written = GeminiCodec.error_response(&ErrorInfo::new(kind, message.clone()));
        let raw = GeminiCodec.extract_error(written.status, &written.body);
        prop_assert_eq!(raw.kind, kind);
        prop_assert_eq!(raw.message, message);
    }
}
