//! All 36 ordered protocol pairs at the codec level: a conversation written
//! by one protocol's writer, read back, and written by another's, keeps its
//! text, system prompt, image, tool call and tool result; a reply keeps its
//! text, tool call, usage and stop reason, whole and streamed.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use switchyard_protocol::ir::{
    events_from_response, Accumulator, Block, MediaSource, Message, Protocol, Request, Response, Role, StopReason,
    TextBlock, Tool, ToolResult, ToolUse, Usage,
};
use switchyard_protocol::{codec, Framing};

const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

fn conversation() -> Request {
    Request {
        model: "m".into(),
        system: vec![TextBlock::new("you are terse")],
        messages: vec![
            Message::new(
                Role::User,
                vec![
                    Block::text("what is in this picture, and what is the weather?"),
                    Block::Image {
                        source: MediaSource::Base64 { media_type: "image/png".into(), data: PNG.into() },
                        cache_control: None,
                    },
                ],
            ),
            Message::new(
                Role::Assistant,
                vec![Block::ToolUse(ToolUse::new("call_1", "get_weather", r#"{"city":"Paris"}"#))],
            ),
            Message::new(
                Role::User,
                vec![Block::ToolResult(ToolResult {
                    tool_use_id: "call_1".into(),
                    name: Some("get_weather".into()),
                    content: vec![Block::text("sunny")],
                    is_error: false,
                })],
            ),
        ],
        tools: vec![Tool {
            name: "get_weather".into(),
            description: Some("current weather".into()),
            parameters: serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
            cache_control: None,
            ..Tool::default()
        }],
        max_tokens: Some(300),
        temperature: Some(0.25),
        ..Request::default()
    }
}

fn hop(request: &Request, from: Protocol, to: Protocol) -> Request {
    let wire = codec(from).write_request(request);
    let mut read =
        codec(from).read_request(&wire.body).unwrap_or_else(|e| panic!("{from} cannot read its own request: {e}"));
    read.model = request.model.clone();
    let wire = codec(to).write_request(&read);
    let mut back = codec(to)
        .read_request(&wire.body)
        .unwrap_or_else(|e| panic!("{to} cannot read what it wrote from {from}: {e}"));
    back.model = request.model.clone();
    back
}

fn texts(message: &Message) -> Vec<&str> {
    message.content.iter().filter_map(|b| if let Block::Text(t) = b { Some(t.text.as_str()) } else { None }).collect()
}

#[test]
fn requests_survive_every_pair() {
    let original = conversation();
    for from in Protocol::ALL {
        for to in Protocol::ALL {
            let got = hop(&original, from, to);
            let pair = format!("{from} -> {to}");
            let system: String = got.system.iter().map(|b| b.text.as_str()).collect();
            assert_eq!(system, "you are terse", "{pair}");
            assert_eq!(got.max_tokens, Some(300), "{pair}");
            assert_eq!(got.temperature, Some(0.25), "{pair}");
            assert_eq!(got.tools.len(), 1, "{pair}");
            assert_eq!(got.tools[0].name, "get_weather", "{pair}");
            assert_eq!(got.tools[0].parameters["properties"]["city"]["type"], "string", "{pair}");
            assert_eq!(got.messages.len(), 3, "{pair}: {:?}", got.messages);
            let first = &got.messages[0];
            assert_eq!(first.role, Role::User, "{pair}");
            assert_eq!(texts(first), vec!["what is in this picture, and what is the weather?"], "{pair}");
            let image =
                first
                    .content
                    .iter()
                    .find_map(|b| if let Block::Image { source, .. } = b { Some(source) } else { None });
            match image {
                Some(MediaSource::Base64 { media_type, data }) => {
                    assert_eq!(media_type, "image/png", "{pair}");
                    assert_eq!(data, PNG, "{pair}");
                }
                other => panic!("{pair}: image lost: {other:?}"),
            }
            let call =
                got.messages[1].content.iter().find_map(|b| if let Block::ToolUse(c) = b { Some(c) } else { None });
            let call = call.unwrap_or_else(|| panic!("{pair}: tool call lost"));
            assert_eq!(call.name, "get_weather", "{pair}");
            let args: serde_json::Value = serde_json::from_str(&call.input).unwrap();
            assert_eq!(args, serde_json::json!({"city": "Paris"}), "{pair}");
            let result =
                got.messages[2].content.iter().find_map(|b| if let Block::ToolResult(r) = b { Some(r) } else { None });
            let result = result.unwrap_or_else(|| panic!("{pair}: tool result lost"));
            assert_eq!(result.tool_use_id, call.id, "{pair}: result no longer answers the call");
            assert!(result.joined_text().contains("sunny"), "{pair}: {result:?}");
        }
    }
}

fn replies() -> Vec<Response> {
    let usage = Usage { input_tokens: 120, output_tokens: 30, ..Usage::default() };
    vec![
        Response {
            id: "r1".into(),
            model: "m".into(),
            content: vec![Block::text("the sky is clear")],
            stop_reason: Some(StopReason::EndTurn),
            usage,
            ..Response::default()
        },
        Response {
            id: "r2".into(),
            model: "m".into(),
            content: vec![
                Block::text("let me check"),
                Block::ToolUse(ToolUse::new("call_9", "get_weather", r#"{"city":"Oslo"}"#)),
            ],
            stop_reason: Some(StopReason::ToolUse),
            usage,
            ..Response::default()
        },
        Response {
            id: "r3".into(),
            model: "m".into(),
            content: vec![Block::text("and then")],
            stop_reason: Some(StopReason::MaxTokens),
            usage,
            ..Response::default()
        },
    ]
}

fn assert_reply_kept(pair: &str, original: &Response, got: &Response) {
    let text = |r: &Response| -> String {
        r.content.iter().filter_map(|b| if let Block::Text(t) = b { Some(t.text.clone()) } else { None }).collect()
    };
    assert_eq!(text(got), text(original), "{pair}");
    let call = |r: &Response| {
        r.content.iter().find_map(|b| {
            if let Block::ToolUse(c) = b {
                Some((c.name.clone(), serde_json::from_str::<serde_json::Value>(&c.input).ok()))
            } else {
                None
            }
        })
    };
    assert_eq!(call(got), call(original), "{pair}");
    assert_eq!(got.stop_reason, original.stop_reason, "{pair}");
    assert_eq!(got.usage.input_tokens, original.usage.input_tokens, "{pair}");
    assert_eq!(got.usage.output_tokens, original.usage.output_tokens, "{pair}");
}

#[test]
fn replies_survive_every_pair() {
    for original in replies() {
        for from in Protocol::ALL {
            for to in Protocol::ALL {
                let pair = format!("{from} -> {to} ({})", original.id);
                let wire = codec(from).write_response(&original);
                let read = codec(from).read_response(&wire.body).unwrap_or_else(|e| panic!("{pair}: {e}"));
                let wire = codec(to).write_response(&read);
                let got = codec(to).read_response(&wire.body).unwrap_or_else(|e| panic!("{pair}: {e}"));
                assert_reply_kept(&pair, &original, &got);
            }
        }
    }
}

fn through_stream(
    protocol: Protocol,
    events: &[switchyard_protocol::ir::StreamEvent],
) -> Vec<switchyard_protocol::ir::StreamEvent> {
    let codec = codec(protocol);
    let wire = codec.encode_stream(codec.default_framing(), events);
    // Byte by byte: the hardest split.
    let bytes: Vec<&[u8]> = wire.chunks(1).collect();
    codec.decode_stream(&bytes).unwrap_or_else(|e| panic!("{protocol}: {e}"))
}

#[test]
fn streamed_replies_survive_every_pair() {
    for original in replies() {
        for from in Protocol::ALL {
            for to in Protocol::ALL {
                let pair = format!("{from} -> {to} stream ({})", original.id);
                let upstream = through_stream(from, &events_from_response(&original));
                let downstream = through_stream(to, &upstream);
                let mut accumulator = Accumulator::new();
                for event in &downstream {
                    accumulator.push(event);
                }
                assert!(accumulator.is_finished(), "{pair}: {downstream:?}");
                assert_reply_kept(&pair, &original, &accumulator.into_response());
            }
        }
    }
}

#[test]
fn errors_keep_their_kind_across_every_pair() {
    use switchyard_protocol::ir::{ErrorInfo, ErrorKind};
    for kind in [
        ErrorKind::InvalidRequest,
        ErrorKind::Authentication,
        ErrorKind::NotFound,
        ErrorKind::RateLimit,
        ErrorKind::Internal,
    ] {
        for from in Protocol::ALL {
            let info = ErrorInfo::new(kind, "something went wrong");
            let rendered = codec(from).error_response(&info);
            let raw = codec(from).extract_error(rendered.status, &rendered.body);
            assert_eq!(raw.kind, kind, "{from}: {}", String::from_utf8_lossy(&rendered.body));
            assert!(raw.message.contains("something went wrong"), "{from}");
            for to in Protocol::ALL {
                if kind == ErrorKind::Authentication && Protocol::Bedrock == from {
                    // AWS has no 401: Bedrock's 403 carries on as a 403, which a
                    // protocol without typed errors (Cohere) reads as permission denied.
                    continue;
                }
                let again = codec(to).error_response(&raw.to_error_info());
                let back = codec(to).extract_error(again.status, &again.body);
                assert_eq!(back.kind, kind, "{from} -> {to}: {}", String::from_utf8_lossy(&again.body));
                // AWS has no 401: Bedrock answers auth failures with 403, its native shape.
                if !(to == Protocol::Bedrock && kind == ErrorKind::Authentication) {
                    assert_eq!(again.status, rendered.status, "{from} -> {to} {kind:?}");
                }
            }
        }
    }
}

#[test]
fn the_passthrough_usage_tap_agrees_with_the_full_decoder() {
    use switchyard_protocol::tap::UsageTap;
    use switchyard_protocol::StreamDecoder;
    // Text that looks like the markers the tap searches for.
    let tricky = "usage \"usage\": [DONE] data: [DONE] message_stop \"error\": finish_reason error ";
    let response = Response {
        id: "r".into(),
        model: "m".into(),
        content: vec![Block::text(tricky.repeat(3)), Block::ToolUse(ToolUse::new("t", "f", "{\"usage\":1}"))],
        stop_reason: Some(StopReason::ToolUse),
        usage: Usage { input_tokens: 77, output_tokens: 33, ..Usage::default() },
        ..Response::default()
    };
    for protocol in Protocol::ALL {
        let codec = codec(protocol);
        let mut encoder = codec.stream_encoder(codec.default_framing());
        let mut frames = Vec::new();
        let mut events = events_from_response(&response);
        // One delta per word, as real streams arrive.
        events = events
            .into_iter()
            .flat_map(|event| match event {
                switchyard_protocol::ir::StreamEvent::BlockDelta {
                    index,
                    delta: switchyard_protocol::ir::Delta::Text(text),
                } => text
                    .split_inclusive(' ')
                    .map(|w| switchyard_protocol::ir::StreamEvent::BlockDelta {
                        index,
                        delta: switchyard_protocol::ir::Delta::Text(w.to_owned()),
                    })
                    .collect::<Vec<_>>(),
                other => vec![other],
            })
            .collect();
        for event in &events {
            let mut out = Vec::new();
            encoder.encode(event, &mut out);
            frames.push(out);
        }
        let mut tail = Vec::new();
        encoder.finish(&mut tail);
        frames.push(tail);
        let run = |decoder: &mut dyn StreamDecoder| {
            let mut accumulator = Accumulator::new();
            let mut out = Vec::new();
            for frame in &frames {
                // Split each frame in two to exercise the carry.
                let (a, b) = frame.split_at(frame.len() / 2);
                decoder.feed(a, &mut out).unwrap();
                decoder.feed(b, &mut out).unwrap();
            }
            decoder.finish(&mut out).unwrap();
            for event in &out {
                accumulator.push(event);
            }
            (*accumulator.usage(), accumulator.is_finished())
        };
        let full = run(&mut *codec.stream_decoder());
        let mut tap = UsageTap::new(codec.stream_decoder(), codec.default_framing());
        let tapped = run(&mut tap);
        assert_eq!(tapped, full, "{protocol}");
        assert!(full.1, "{protocol}: stream finished");
        assert_eq!(full.0.output_tokens, 33, "{protocol}");
    }
}

#[test]
fn usage_reads_agree_with_whole_reads() {
    for original in replies() {
        for protocol in Protocol::ALL {
            let wire = codec(protocol).write_response(&original);
            let whole = codec(protocol).read_response(&wire.body).unwrap().usage;
            assert_eq!(codec(protocol).read_usage(&wire.body), Some(whole), "{protocol}");
        }
    }
}

#[test]
fn stop_reason_reads_agree_with_whole_reads() {
    for mut original in replies() {
        for reason in [StopReason::EndTurn, StopReason::MaxTokens, StopReason::ToolUse, StopReason::StopSequence] {
            original.stop_reason = Some(reason);
            for protocol in Protocol::ALL {
                let wire = codec(protocol).write_response(&original);
                let whole = codec(protocol).read_response(&wire.body).unwrap().stop_reason;
                assert_eq!(codec(protocol).read_stop_reason(&wire.body), whole, "{protocol} {reason:?}");
            }
        }
    }
}

/// A Gemini reply with parallel calls: Gemini signs the first call of a
/// step only.
const SIGNATURE: &str = "CiQB0e2Kb7LlVwq8H5F9lHqS1o2Y0zW8rX2vJ4p0QmK3dZs/aGVsbG8gd29ybGQ+";

fn gemini_reply_with_parallel_calls() -> serde_json::Value {
    serde_json::json!({
        "candidates": [{
            "content": {"role": "model", "parts": [
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": SIGNATURE},
                {"functionCall": {"name": "get_time", "args": {"zone": "CET"}}}
            ]},
            "finishReason": "STOP"
        }],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5},
        "responseId": "resp-1",
        "modelVersion": "gemini-3-pro-preview"
    })
}

/// The next request a caller of `protocol` sends after `reply` (its own
/// wire reply, echoed the way its SDK keeps history), with a result for
/// every call.
fn next_turn(protocol: Protocol, reply: &serde_json::Value) -> serde_json::Value {
    use serde_json::json;
    let question = "weather and time?";
    match protocol {
        Protocol::OpenAi => {
            let message = reply["choices"][0]["message"].clone();
            let mut messages = vec![json!({"role": "user", "content": question}), message.clone()];
            for call in message["tool_calls"].as_array().unwrap() {
                messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": "ok"}));
            }
            json!({"model": "m", "messages": messages})
        }
        Protocol::Responses => {
            let mut input = vec![json!({"role": "user", "content": question})];
            for item in reply["output"].as_array().unwrap() {
                input.push(item.clone());
            }
            for item in reply["output"].as_array().unwrap() {
                if item["type"] == "function_call" {
                    input.push(json!({"type": "function_call_output", "call_id": item["call_id"], "output": "ok"}));
                }
            }
            json!({"model": "m", "input": input})
        }
        Protocol::Anthropic => {
            let content = reply["content"].clone();
            let results: Vec<_> = content
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| json!({"type": "tool_result", "tool_use_id": b["id"], "content": "ok"}))
                .collect();
            json!({"model": "m", "max_tokens": 100, "messages": [
                {"role": "user", "content": question},
                {"role": "assistant", "content": content},
                {"role": "user", "content": results}
            ]})
        }
        Protocol::Gemini => {
            let content = reply["candidates"][0]["content"].clone();
            let results: Vec<_> = content["parts"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|p| p.get("functionCall"))
                .map(|c| json!({"functionResponse": {"name": c["name"], "response": {"output": "ok"}}}))
                .collect();
            json!({"contents": [
                {"role": "user", "parts": [{"text": question}]},
                content,
                {"role": "user", "parts": results}
            ]})
        }
        Protocol::Cohere => {
            let mut message = reply["message"].clone();
            message["role"] = json!("assistant");
            let mut messages = vec![json!({"role": "user", "content": question}), message.clone()];
            for call in message["tool_calls"].as_array().unwrap() {
                messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": "ok"}));
            }
            json!({"model": "m", "messages": messages})
        }
        Protocol::Bedrock => {
            let message = reply["output"]["message"].clone();
            let results: Vec<_> = message["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|b| b.get("toolUse"))
                .map(|t| json!({"toolResult": {"toolUseId": t["toolUseId"], "content": [{"text": "ok"}]}}))
                .collect();
            json!({"messages": [
                {"role": "user", "content": [{"text": question}]},
                message,
                {"role": "user", "content": results}
            ]})
        }
    }
}

/// The Gemini request written from `caller`'s next turn: its model turn
/// must carry the first call's signature and nothing else.
fn assert_signature_reaches_gemini(caller: Protocol, reply_body: &[u8], how: &str) {
    let reply: serde_json::Value = serde_json::from_slice(reply_body).unwrap();
    let request = next_turn(caller, &reply);
    let mut read = codec(caller)
        .read_request(&serde_json::to_vec(&request).unwrap())
        .unwrap_or_else(|e| panic!("{caller} {how}: {e}: {request}"));
    read.model = "gemini-3-pro-preview".into();
    let written = codec(Protocol::Gemini).write_request(&read);
    let body: serde_json::Value = serde_json::from_slice(&written.body).unwrap();
    let model_turn = body["contents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["role"] == "model")
        .unwrap_or_else(|| panic!("{caller} {how}: no model turn in {body}"));
    let parts = model_turn["parts"].as_array().unwrap();
    let calls: Vec<(&str, Option<&str>)> = parts
        .iter()
        .filter(|p| p.get("functionCall").is_some())
        .map(|p| (p["functionCall"]["name"].as_str().unwrap(), p["thoughtSignature"].as_str()))
        .collect();
    assert_eq!(calls, [("get_weather", Some(SIGNATURE)), ("get_time", None)], "{caller} {how}: {model_turn}");
    assert!(parts.iter().all(|p| p.get("functionCall").is_some()), "{caller} {how}: stray parts {model_turn}");
    // Results answer the calls they were given for.
    let results: Vec<&str> = body["contents"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["parts"].as_array().unwrap())
        .filter_map(|p| p["functionResponse"]["name"].as_str())
        .collect();
    assert_eq!(results, ["get_weather", "get_time"], "{caller} {how}");
}

#[test]
fn gemini_thought_signatures_come_back_through_every_caller_protocol() {
    let upstream = serde_json::to_vec(&gemini_reply_with_parallel_calls()).unwrap();
    let reply = codec(Protocol::Gemini).read_response(&upstream).unwrap();
    for caller in Protocol::ALL {
        let wire = codec(caller).write_response(&reply);
        assert_signature_reaches_gemini(caller, &wire.body, "whole");
    }
}

#[test]
fn gemini_thought_signatures_come_back_through_every_caller_protocol_streamed() {
    let gemini = codec(Protocol::Gemini);
    let upstream = gemini.encode_stream(
        Framing::Sse,
        &events_from_response(
            &gemini.read_response(&serde_json::to_vec(&gemini_reply_with_parallel_calls()).unwrap()).unwrap(),
        ),
    );
    let events = gemini.decode_stream(&[&upstream]).unwrap();
    for caller in Protocol::ALL {
        let caller_codec = codec(caller);
        let wire = caller_codec.encode_stream(caller_codec.default_framing(), &events);
        // Byte by byte: the carriers must survive any split.
        let chunks: Vec<&[u8]> = wire.chunks(1).collect();
        let mut accumulator = Accumulator::new();
        for event in caller_codec.decode_stream(&chunks).unwrap() {
            accumulator.push(&event);
        }
        let response = accumulator.into_response();
        // What the caller's SDK assembles from the stream, echoed as its wire reply.
        let assembled = caller_codec.write_response(&response);
        assert_signature_reaches_gemini(caller, &assembled.body, "streamed");
    }
}

#[test]
fn carried_signatures_keep_every_callers_id_alphabet() {
    let upstream = serde_json::to_vec(&gemini_reply_with_parallel_calls()).unwrap();
    let reply = codec(Protocol::Gemini).read_response(&upstream).unwrap();
    let id_ok = |id: &str| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    let anthropic: serde_json::Value =
        serde_json::from_slice(&codec(Protocol::Anthropic).write_response(&reply).body).unwrap();
    for block in anthropic["content"].as_array().unwrap() {
        assert!(id_ok(block["id"].as_str().unwrap()), "{block}");
    }
    // Where ids are short (OpenAI 40, Responses and Bedrock 64), they stay short.
    let openai: serde_json::Value =
        serde_json::from_slice(&codec(Protocol::OpenAi).write_response(&reply).body).unwrap();
    for call in openai["choices"][0]["message"]["tool_calls"].as_array().unwrap() {
        assert!(call["id"].as_str().unwrap().len() <= 40, "{call}");
    }
    let bedrock: serde_json::Value =
        serde_json::from_slice(&codec(Protocol::Bedrock).write_response(&reply).body).unwrap();
    for block in bedrock["output"]["message"]["content"].as_array().unwrap() {
        if let Some(id) = block["toolUse"]["toolUseId"].as_str() {
            assert!(id.len() <= 64 && id_ok(id), "{block}");
        }
    }
    let responses: serde_json::Value =
        serde_json::from_slice(&codec(Protocol::Responses).write_response(&reply).body).unwrap();
    for item in responses["output"].as_array().unwrap() {
        if let Some(id) = item["call_id"].as_str() {
            assert!(id.len() <= 64, "{item}");
        }
    }
}
