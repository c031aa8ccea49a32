//! The completions codec against OpenAI's API reference: its published
//! request, reply and stream examples (`tests/fixtures/completion_*`) read
//! into the IR and written back, what the reader keeps for a same-protocol
//! hop and reports on another, and the round trip `read(write(x)) == x`
//! over what a completion can say.

use proptest::prelude::*;
use serde_json::{json, Value};
use switchyard_codec::ir::{
    events_from_response, Block, Dropped, Field, Message, Protocol, Request, Response, Role, StopReason, StreamEvent,
    Usage,
};
use switchyard_codec::{Codec, Framing};

use super::CompletionsCodec;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|err| panic!("{path}: {err}"))
}

fn dropped_paths(dropped: &[Dropped]) -> Vec<String> {
    dropped.iter().map(|d| d.extra_path.clone().unwrap_or_else(|| d.field.as_str().to_owned())).collect()
}

#[test]
fn the_references_request_is_a_chat_request_of_one_user_message() {
    let request = CompletionsCodec.read_request(&fixture("completion_request.json")).unwrap();
    assert_eq!(request.model, "gpt-3.5-turbo-instruct");
    assert_eq!(request.messages, vec![Message::text(Role::User, "Say this is a test")]);
    assert_eq!((request.max_tokens, request.temperature), (Some(7), Some(0.0)));
    assert!(request.extra.is_empty() && !request.stream);
    // Written for another protocol, nothing is lost.
    let chat = crate::OpenAiCodec.write_request(&request);
    assert!(chat.dropped.is_empty(), "{:?}", chat.dropped);
    let chat: Value = serde_json::from_slice(&chat.body).unwrap();
    assert_eq!(chat["messages"], json!([{"role": "user", "content": "Say this is a test"}]));
    assert_eq!(chat["max_completion_tokens"], 7);
}

#[test]
fn a_request_without_max_tokens_gets_openais_default_of_sixteen() {
    let request = CompletionsCodec.read_request(br#"{"model": "m", "prompt": ["hi"]}"#).unwrap();
    assert_eq!((request.max_tokens, request.messages[0].content[0].clone()), (Some(16), Block::text("hi")));
    let metered = CompletionsCodec.metered(br#"{"model": "m", "prompt": "hi", "n": 2, "best_of": 3}"#).unwrap();
    assert_eq!((metered.max_tokens, metered.choices), (Some(16), 3), "best_of candidates are all billed");
    let metered = CompletionsCodec.metered(br#"{"model": "m", "prompt": "hi", "max_tokens": 200}"#).unwrap();
    assert_eq!((metered.max_tokens, metered.choices), (Some(200), 1));
    assert_eq!(CompletionsCodec.end_user(br#"{"model": "m", "user": "ada"}"#, None).as_deref(), Some("ada"));
}

#[test]
fn what_chat_cannot_say_is_kept_for_openai_and_reported_elsewhere() {
    let body = json!({
        "model": "m", "prompt": "Once", "suffix": " the end.", "echo": true, "best_of": 3, "n": 2,
        "logprobs": 2, "logit_bias": {"50256": -100}, "stop": "\n", "user": "ada", "seed": 7,
        "stream": true, "stream_options": {"include_usage": true}
    });
    let request = CompletionsCodec.read_request(body.to_string().as_bytes()).unwrap();
    let kept: Vec<&str> = request.extra.fields.keys().map(String::as_str).collect();
    assert_eq!(kept, ["suffix", "echo", "best_of", "logit_bias"]);
    assert_eq!((request.n, request.logprobs), (Some(2), Some(2)), "n and logprobs are modelled");
    assert_eq!(
        (request.stop.clone(), request.user.as_deref(), request.seed),
        (vec!["\n".to_owned()], Some("ada"), Some(7))
    );
    // Written back as a completion: every one of them, as it came.
    let again: Value = serde_json::from_slice(&CompletionsCodec.write_request(&request).body).unwrap();
    for key in ["suffix", "echo", "best_of", "logprobs", "logit_bias", "seed", "user"] {
        assert_eq!(again[key], body[key], "{key}");
    }
    // A stream carries one choice back: `n` is not asked for, but reported.
    assert!(again.get("n").is_none());
    let streamed = CompletionsCodec.write_request(&request).dropped;
    assert!(streamed.iter().any(|d| d.field == switchyard_codec::ir::Field::Choices), "{streamed:?}");
    assert_eq!(again["stream_options"], json!({"include_usage": true}));
    // Written for another protocol, each is reported by the name the caller gave it.
    let mut dropped = Vec::new();
    assert!(request.extra.for_target(Protocol::Anthropic, &mut dropped).is_none());
    assert_eq!(dropped_paths(&dropped), ["suffix", "echo", "best_of", "logit_bias.50256"]);
    // OpenAI's defaults, written out, ask for nothing: nothing to report.
    let defaults = json!({"model": "m", "prompt": "x", "echo": false, "n": 1, "best_of": 1, "suffix": null,
        "logprobs": null, "logit_bias": {}, "stream_options": {"include_usage": false}});
    assert!(CompletionsCodec.read_request(defaults.to_string().as_bytes()).unwrap().extra.is_empty());
}

#[test]
fn several_prompts_or_tokens_are_refused_with_the_parameter_named() {
    for prompt in [json!(["a", "b"]), json!([1212, 318]), json!([[1212, 318]]), json!({"text": "a"})] {
        let body = json!({"model": "m", "prompt": prompt}).to_string();
        let err = CompletionsCodec.read_request(body.as_bytes()).unwrap_err().to_error_info();
        assert_eq!(err.param.as_deref(), Some("prompt"), "{prompt}");
    }
    let none = CompletionsCodec.read_request(br#"{"model": "m"}"#).unwrap();
    assert_eq!(none.messages, vec![Message::text(Role::User, "")], "no prompt: a document from its start");
    assert!(CompletionsCodec.read_request(br#"{"prompt": "x"}"#).is_err(), "model is required");
}

#[test]
fn a_conversation_written_as_a_prompt_says_its_roles_were_lost() {
    let request = Request {
        model: "m".into(),
        system: vec![switchyard_codec::ir::TextBlock::new("Be brief.")],
        messages: vec![Message::text(Role::User, "Hi"), Message::text(Role::Assistant, "Hello")],
        ..Request::default()
    };
    let encoded = CompletionsCodec.write_request(&request);
    let body: Value = serde_json::from_slice(&encoded.body).unwrap();
    assert_eq!(body["prompt"], "Be brief.\n\nHi\n\nHello");
    assert_eq!(dropped_paths(&encoded.dropped), ["messages.role"]);
}

#[test]
fn the_references_reply_reads_and_writes_back_as_it_was() {
    let body = fixture("completion_response.json");
    let response = CompletionsCodec.read_response(&body).unwrap();
    assert_eq!((response.id.as_str(), response.created), ("cmpl-uqkvlQyYK7bGYrRHQ0eXlWi7", Some(1_589_478_378)));
    assert_eq!(response.content, vec![Block::text("\n\nThis is indeed a test")]);
    assert_eq!(response.stop_reason, Some(StopReason::MaxTokens));
    assert_eq!((response.usage.input_tokens, response.usage.output_tokens), (5, 7));
    assert_eq!(CompletionsCodec.read_usage(&body), Some(response.usage));
    assert_eq!(CompletionsCodec.read_stop_reason(&body), Some(StopReason::MaxTokens));
    let encoded = CompletionsCodec.write_response(&response);
    assert!(encoded.dropped.is_empty());
    let written: Value = serde_json::from_slice(&encoded.body).unwrap();
    let reference: Value = serde_json::from_slice(&body).unwrap();
    for key in ["id", "object", "created", "model", "choices"] {
        assert_eq!(written[key], reference[key], "{key}");
    }
    assert_eq!(written["usage"]["total_tokens"], 12);
}

#[test]
fn a_reply_of_another_protocol_keeps_its_text_and_reports_the_rest() {
    let response = Response {
        id: "msg_1".into(),
        content: vec![
            Block::Thinking { text: "hmm".into(), signature: None },
            Block::text("Paris"),
            Block::ToolUse(switchyard_codec::ir::ToolUse::new("c", "f", "{}")),
        ],
        stop_reason: Some(StopReason::ToolUse),
        ..Response::default()
    };
    let encoded = CompletionsCodec.write_response(&response);
    let written: Value = serde_json::from_slice(&encoded.body).unwrap();
    assert_eq!(written["choices"], json!([{"text": "Paris", "index": 0, "logprobs": null, "finish_reason": "stop"}]));
    assert_eq!(dropped_paths(&encoded.dropped), ["thinking", "misplaced_block"]);
    let refused = CompletionsCodec.read_response(br#"{"error": {"message": "bad", "type": "invalid_request_error"}}"#);
    assert!(refused.is_err());
}

#[test]
fn the_references_stream_reads_into_one_text_block_with_usage() {
    let stream = fixture("completion_stream.sse");
    let events = CompletionsCodec.decode_stream(&[&stream]).unwrap();
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::BlockDelta { delta: switchyard_codec::ir::Delta::Text(t), .. } => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "This is indeed a test");
    assert!(matches!(&events[0], StreamEvent::MessageStart { id, created: Some(1_690_759_702), .. }
        if id == "cmpl-7iA7iJjj8V2zOkCGvWF2hAkDWBQZe"));
    let finish = events.iter().find_map(|e| match e {
        StreamEvent::MessageDelta { stop_reason, usage, .. } => {
            Some((*stop_reason, usage.input_tokens, usage.output_tokens))
        }
        _ => None,
    });
    assert_eq!(finish, Some((Some(StopReason::MaxTokens), 5, 7)));
    assert_eq!(events.last(), Some(&StreamEvent::MessageStop));
    // Cut after every byte, the same events.
    for cut in 1..stream.len() {
        assert_eq!(CompletionsCodec.decode_stream(&[&stream[..cut], &stream[cut..]]).unwrap(), events, "cut at {cut}");
    }
    // An in-stream error ends it.
    let error = CompletionsCodec
        .decode_stream(&[b"data: {\"error\": {\"message\": \"overloaded\", \"type\": \"server_error\"}}\n\n"])
        .unwrap();
    assert!(matches!(error.last(), Some(StreamEvent::Error(info)) if info.message == "overloaded"));
}

#[test]
fn a_written_stream_is_the_references_shape_and_its_usage_chunk_only_when_asked() {
    let response = Response {
        id: "cmpl-1".into(),
        model: "m".into(),
        created: Some(1),
        content: vec![Block::text("Hello there")],
        stop_reason: Some(StopReason::EndTurn),
        usage: Usage { input_tokens: 3, output_tokens: 2, ..Usage::default() },
        ..Response::default()
    };
    let events = events_from_response(&response);
    let asked = br#"{"model": "m", "prompt": "x", "stream": true, "stream_options": {"include_usage": true}}"#;
    let mut encoder = CompletionsCodec.stream_encoder_for(Framing::Sse, asked);
    let mut out = Vec::new();
    for event in &events {
        encoder.encode(event, &mut out);
    }
    let text = String::from_utf8(out).unwrap();
    let chunks: Vec<&str> = text.split("\n\n").filter(|c| !c.is_empty()).collect();
    assert_eq!(chunks.last(), Some(&"data: [DONE]"));
    let first: Value = serde_json::from_str(chunks[0].strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(
        first,
        json!({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
            "choices": [{"text": "Hello there", "index": 0, "logprobs": null, "finish_reason": null}]})
    );
    let finish: Value = serde_json::from_str(chunks[chunks.len() - 3].strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(finish["choices"], json!([{"text": "", "index": 0, "logprobs": null, "finish_reason": "stop"}]));
    let usage: Value = serde_json::from_str(chunks[chunks.len() - 2].strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!((usage["choices"].clone(), usage["usage"]["total_tokens"].clone()), (json!([]), json!(5)));
    // Read back, the same reply.
    let back = CompletionsCodec.decode_stream(&[text.as_bytes()]).unwrap();
    let mut accumulated = switchyard_codec::ir::Accumulator::default();
    for event in &back {
        accumulated.push(event);
    }
    let back = accumulated.into_response();
    assert_eq!((back.content, back.usage.total()), (response.content.clone(), 5));
    // Not asked: no usage chunk (`choices[0]` of every chunk is there).
    let mut encoder = CompletionsCodec.stream_encoder_for(Framing::Sse, br#"{"stream": true}"#);
    let mut plain = Vec::new();
    for event in &events {
        encoder.encode(event, &mut plain);
    }
    let plain = String::from_utf8(plain).unwrap();
    assert!(!plain.contains("\"choices\":[]") && plain.ends_with("data: [DONE]\n\n"), "{plain}");
}

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 .,!?{}\"\\\\\n\u{e9}\u{1f600}]{0,24}"
}

/// Knobs with few decimals, which JSON carries exactly.
fn knob() -> impl Strategy<Value = Option<f64>> {
    proptest::option::of((0u32..=200).prop_map(|n| f64::from(n) / 100.0))
}

/// A chat request a completion can say: one user message of text, the
/// knobs both have.
fn request() -> impl Strategy<Value = Request> {
    (
        (text(), 1u64..4096, knob(), knob(), proptest::option::of(-1000i64..1000)),
        (knob(), knob(), proptest::collection::vec("[a-z\n]{1,4}", 0..4), proptest::option::of("[a-z]{1,8}")),
        any::<bool>(),
    )
        .prop_map(|((prompt, max_tokens, temperature, top_p, seed), (frequency, presence, stop, user), stream)| {
            Request {
                model: "gpt-3.5-turbo-instruct".into(),
                messages: vec![Message::text(Role::User, prompt)],
                max_tokens: Some(max_tokens),
                temperature,
                top_p,
                seed,
                frequency_penalty: frequency,
                presence_penalty: presence,
                stop,
                user,
                stream,
                ..Request::default()
            }
        })
}

fn response() -> impl Strategy<Value = Response> {
    (
        "cmpl-[a-zA-Z0-9]{1,12}",
        proptest::option::of(0i64..2_000_000_000),
        "[a-z0-9.-]{1,12}",
        proptest::option::of("[a-zA-Z0-9 .,!?\"\\\\\n\u{e9}]{1,24}"),
        prop::sample::select(vec![StopReason::EndTurn, StopReason::MaxTokens, StopReason::ContentFilter]),
        (0u64..100_000, 0u64..100_000),
    )
        .prop_map(|(id, created, model, text, stop, (input, output))| Response {
            id,
            created,
            model,
            content: text.into_iter().map(Block::text).collect(),
            stop_reason: Some(stop),
            usage: Usage { input_tokens: input, output_tokens: output, ..Usage::default() },
            ..Response::default()
        })
}

proptest! {
    /// A request a completion can say reads back as itself, nothing lost.
    #[test]
    fn requests_round_trip(request in request()) {
        let encoded = CompletionsCodec.write_request(&request);
        prop_assert!(encoded.dropped.is_empty(), "{:?}", encoded.dropped);
        prop_assert_eq!(CompletionsCodec.read_request(&encoded.body).unwrap(), request);
    }

    /// A reply reads back as itself, whole and streamed (`created` 0 is
    /// what a reply without one is written with).
    #[test]
    fn replies_round_trip_whole_and_streamed(response in response()) {
        let mut expected = response.clone();
        expected.created = Some(response.created.unwrap_or(0));
        let whole = CompletionsCodec.write_response(&response);
        prop_assert!(whole.dropped.is_empty());
        prop_assert_eq!(CompletionsCodec.read_response(&whole.body).unwrap(), expected.clone());
        let streamed = CompletionsCodec.encode_stream(Framing::Sse, &events_from_response(&response));
        let mut accumulated = switchyard_codec::ir::Accumulator::default();
        for event in CompletionsCodec.decode_stream(&[&streamed]).unwrap() {
            accumulated.push(&event);
        }
        let back = accumulated.into_response();
        prop_assert_eq!((back.content, back.stop_reason, back.usage.total()),
            (expected.content, expected.stop_reason, expected.usage.total()));
    }
}

#[test]
fn the_codec_is_openais_at_its_completions_path() {
    assert_eq!(CompletionsCodec.upstream_path("gpt-3.5-turbo-instruct", true), "/v1/completions");
    assert_eq!(CompletionsCodec.path_action(false), "completions");
    assert_eq!(CompletionsCodec.protocol(), Protocol::OpenAi);
    assert_eq!(CompletionsCodec.parameter_path(Field::MaxTokens), Some("max_tokens"));
    assert!(crate::OpenAiCodec.completions().is_some());
    let asked = CompletionsCodec.request_stream_usage(br#"{"model":"m","prompt":"x","stream":true}"#).unwrap();
    assert!(CompletionsCodec.stream_reports_usage(&asked));
}

/// A completion with `logprobs` as OpenAI's API reference shows one (its
/// parallel arrays), and a second choice: read into the IR and written
/// back alike.
#[test]
fn logprobs_and_choices_of_a_completion_round_trip() {
    let body = json!({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "gpt-3.5-turbo-instruct",
        "choices": [
            {"text": " a b", "index": 0, "finish_reason": "length",
             "logprobs": {"tokens": [" a", " b"], "token_logprobs": [-0.5, -1.25],
                "top_logprobs": [{" a": -0.5, " c": -2.0}, {" b": -1.25}], "text_offset": [4, 6]}},
            {"text": " c", "index": 1, "finish_reason": "stop", "logprobs": null}
        ],
        "usage": {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}});
    let response = CompletionsCodec.read_response(body.to_string().as_bytes()).unwrap();
    assert_eq!(response.logprobs.len(), 2);
    assert_eq!((response.logprobs[0].token.as_str(), response.logprobs[0].logprob), (" a", -0.5));
    assert_eq!(response.logprobs[0].top.len(), 2);
    assert_eq!(response.choices.len(), 1);
    assert_eq!(response.choices[0].content, vec![switchyard_codec::ir::Block::text(" c")]);
    let written: Value = serde_json::from_slice(&CompletionsCodec.write_response(&response).body).unwrap();
    let logprobs = &written["choices"][0]["logprobs"];
    assert_eq!(logprobs["tokens"], json!([" a", " b"]));
    assert_eq!(logprobs["token_logprobs"], json!([-0.5, -1.25]));
    assert_eq!(logprobs["top_logprobs"], json!([{" a": -0.5, " c": -2.0}, {" b": -1.25}]));
    assert_eq!(logprobs["text_offset"], json!([0, 2]), "offsets in the text written");
    assert_eq!(written["choices"][1]["text"], " c");
    assert_eq!(written["choices"][1]["index"], 1);
}
