//! The hot pure functions: model extraction on the passthrough path, a
//! typical 2 KB chat request translated across protocols, and a 200-event
//! stream re-framed from one protocol to another.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use switchyard_protocol::ir::{events_from_response, Block, Protocol, Response, StopReason, Usage};
use switchyard_protocol::{codec, scan};

/// A realistic ~2 KB OpenAI chat request: system prompt, a few turns, one tool.
fn chat_request() -> Vec<u8> {
    let filler = "The quick brown fox jumps over the lazy dog. ".repeat(6);
    serde_json::json!({
        "model": "gpt-4o-mini",
        "temperature": 0.3,
        "max_tokens": 512,
        "messages": [
            {"role": "system", "content": format!("You are a helpful assistant. {filler}")},
            {"role": "user", "content": format!("Summarise this: {filler}")},
            {"role": "assistant", "content": format!("Here is a summary. {filler}")},
            {"role": "user", "content": format!("Now the weather in Paris, please. {filler}")},
        ],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}],
    })
    .to_string()
    .into_bytes()
}

fn bench_scan(c: &mut Criterion) {
    let body = chat_request();
    let mut group = c.benchmark_group("passthrough");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("scan_top_level_2kb", |b| b.iter(|| scan::scan_top_level(std::hint::black_box(&body))));
    // What a text-only request pays on its way, as it came, to a model
    // that takes no audio: one search for the protocol's audio marker.
    let openai = codec(Protocol::OpenAi);
    group.bench_function("may_hold_audio_2kb", |b| b.iter(|| openai.may_hold_audio(std::hint::black_box(&body))));
    group.bench_function("serde_value_parse_2kb_baseline", |b| {
        b.iter(|| serde_json::from_slice::<serde_json::Value>(std::hint::black_box(&body)))
    });
    group.finish();
}

fn bench_requests(c: &mut Criterion) {
    let body = chat_request();
    let mut group = c.benchmark_group("request_2kb");
    for (from, to) in [
        (Protocol::OpenAi, Protocol::Anthropic),
        (Protocol::Anthropic, Protocol::OpenAi),
        (Protocol::OpenAi, Protocol::Bedrock),
        (Protocol::OpenAi, Protocol::Gemini),
    ] {
        let source = if from == Protocol::OpenAi {
            body.clone()
        } else {
            let ir = codec(Protocol::OpenAi).read_request(&body).unwrap_or_default();
            codec(from).write_request(&ir).body
        };
        group.bench_function(format!("{from}_to_{to}"), |b| {
            b.iter(|| {
                let ir = codec(from).read_request(std::hint::black_box(&source)).unwrap_or_default();
                codec(to).write_request(&ir)
            })
        });
    }
    group.finish();
}

fn bench_streams(c: &mut Criterion) {
    // 198 text deltas plus framing events: a 200-event stream.
    let text: String = (0..198).map(|i| format!("tok{i} ")).collect();
    let response = Response {
        id: "msg_1".into(),
        model: "m".into(),
        content: vec![Block::text(text)],
        stop_reason: Some(StopReason::EndTurn),
        usage: Usage { input_tokens: 100, output_tokens: 198, ..Usage::default() },
        ..Response::default()
    };
    let mut events = Vec::new();
    for event in events_from_response(&response) {
        match event {
            switchyard_protocol::ir::StreamEvent::BlockDelta {
                index,
                delta: switchyard_protocol::ir::Delta::Text(t),
            } => {
                for piece in t.split_inclusive(' ') {
                    events.push(switchyard_protocol::ir::StreamEvent::BlockDelta {
                        index,
                        delta: switchyard_protocol::ir::Delta::Text(piece.to_owned()),
                    });
                }
            }
            other => events.push(other),
        }
    }
    let mut group = c.benchmark_group("stream_200_events");
    group.throughput(Throughput::Elements(events.len() as u64));
    for (from, to) in [
        (Protocol::Anthropic, Protocol::OpenAi),
        (Protocol::OpenAi, Protocol::Anthropic),
        (Protocol::OpenAi, Protocol::Bedrock),
    ] {
        let upstream_codec = codec(from);
        let mut encoder = upstream_codec.stream_encoder(upstream_codec.default_framing());
        let mut frames = Vec::new();
        for event in &events {
            let mut out = Vec::new();
            encoder.encode(event, &mut out);
            frames.push(out);
        }
        group.bench_function(format!("{from}_to_{to}"), |b| {
            b.iter(|| {
                let mut decoder = upstream_codec.stream_decoder();
                let downstream = codec(to);
                let mut encoder = downstream.stream_encoder(downstream.default_framing());
                let mut decoded = Vec::new();
                let mut out = Vec::new();
                for frame in &frames {
                    decoded.clear();
                    let _ = decoder.feed(frame, &mut decoded);
                    for event in &decoded {
                        encoder.encode(event, &mut out);
                    }
                }
                out
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_scan, bench_requests, bench_streams);
criterion_main!(benches);
