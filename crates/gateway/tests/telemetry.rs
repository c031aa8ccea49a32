//! Telemetry over real TCP: `/metrics` after a scripted mix of traffic,
//! parsed as Prometheus text and checked against what was sent; traces
//! exported to an OTLP receiver that decodes the protobuf; the request-log
//! sinks (a rotated file, a webhook); collectors that die mid-run; and the
//! `Server-Timing` header.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post as route_post;
use axum::Router;
use bytes::Bytes;
use common::*;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value as NumberValue;
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, status::StatusCode as SpanStatus, Span};
use prometheus_parse::{Scrape, Value};
use prost::Message;
use serde_json::json;

/// An OpenAI-speaking upstream: `healthy` answers (10 prompt tokens, 5
/// completion tokens), `fail500` fails; each request's `traceparent` is kept.
#[derive(Default)]
struct Upstream {
    traceparents: Mutex<Vec<String>>,
}

async fn upstream_handler(State(upstream): State<Arc<Upstream>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(tp) = headers.get("traceparent") {
        upstream.traceparents.lock().unwrap().push(tp.to_str().unwrap().to_owned());
    }
    let request: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let model = request["model"].as_str().unwrap_or_default().to_owned();
    if request["stream"] == true {
        let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let usage = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
                           "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}});
        let events = [
            chunk(json!({"role": "assistant", "content": "hello"}), serde_json::Value::Null),
            chunk(json!({"content": " there"}), serde_json::Value::Null),
            chunk(json!({}), json!("stop")),
            usage,
        ];
        let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
        body.push_str("data: [DONE]\n\n");
        return ([("content-type", "text/event-stream")], body).into_response();
    }
    if model == "fail500" {
        let error = json!({"error": {"message": "boom", "type": "server_error", "code": "server_error"}});
        return (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(error)).into_response();
    }
    axum::Json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello there"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    }))
    .into_response()
}

async fn upstream() -> (SocketAddr, Arc<Upstream>) {
    let state = Arc::new(Upstream::default());
    let router = Router::new().route("/v1/chat/completions", route_post(upstream_handler)).with_state(state.clone());
    (spawn(router).await, state)
}

/// A receiver that can be killed: its listener and every connection close.
struct Receiver<T> {
    addr: SocketAddr,
    got: Arc<Mutex<Vec<T>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl<T> Receiver<T> {
    fn kill(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    fn len(&self) -> usize {
        self.got.lock().unwrap().len()
    }
}

async fn receiver<T: Send + 'static>(path: &str, decode: fn(&Bytes) -> Vec<T>) -> Receiver<T> {
    let got: Arc<Mutex<Vec<T>>> = Arc::default();
    let sink = got.clone();
    let router = Router::new().route(
        path,
        route_post(move |body: Bytes| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().extend(decode(&body));
                StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let limits = switchyard_config::Server { drain_timeout: Duration::from_millis(10), ..Default::default() };
    tokio::spawn(switchyard_gateway::server::serve(
        listener,
        router,
        switchyard_gateway::server::Settings::plain(limits),
        async move {
            let _ = stopped.await;
        },
    ));
    Receiver { addr, got, stop: Some(stop) }
}

fn spans_of(body: &Bytes) -> Vec<Span> {
    let export = ExportTraceServiceRequest::decode(body.as_ref()).unwrap();
    let resource = export.resource_spans[0].resource.as_ref().unwrap();
    assert_eq!(attr(&resource.attributes, "service.name"), Some(Attr::Str("switchyard-test".into())));
    export.resource_spans.into_iter().flat_map(|r| r.scope_spans).flat_map(|s| s.spans).collect()
}

fn records_of(body: &Bytes) -> Vec<serde_json::Value> {
    serde_json::from_slice::<Vec<serde_json::Value>>(body).unwrap()
}

#[derive(Debug, PartialEq)]
enum Attr {
    Str(String),
    Int(i64),
    Strs(Vec<String>),
}

fn attr(attributes: &[opentelemetry_proto::tonic::common::v1::KeyValue], key: &str) -> Option<Attr> {
    let value = attributes.iter().find(|kv| kv.key == key)?.value.as_ref()?.value.as_ref()?;
    Some(match value {
        any_value::Value::StringValue(s) => Attr::Str(s.clone()),
        any_value::Value::IntValue(n) => Attr::Int(*n),
        any_value::Value::ArrayValue(array) => Attr::Strs(
            array
                .values
                .iter()
                .filter_map(|v| match &v.value {
                    Some(any_value::Value::StringValue(s)) => Some(s.clone()),
                    _ => None,
                })
                .collect(),
        ),
        other => panic!("unexpected attribute value {other:?}"),
    })
}

/// Pools over the OpenAI upstream: `steady` (one healthy lane), `flaky`
/// (the failing lane is the cheapest, so it is tried first until it trips),
/// and `hooked` (a routing gate nobody listens on, failing open).
fn config(upstream: SocketAddr, telemetry: &str) -> String {
    format!(
        "providers:\n  up: {{ protocol: openai, base_url: \"http://{upstream}\" }}\n\
         models:\n  healthy: {{ provider: up, model: healthy }}\n  fail500: {{ provider: up, model: fail500 }}\n\
         rate_card:\n  healthy: {{ input_utok: 2000000, output_utok: 4000000 }}\n  fail500: {{ input_utok: 1, output_utok: 1 }}\n\
         pools:\n  steady: {{ members: [{{ model: healthy }}] }}\n\
         \x20 flaky: {{ hooks: [cheapest], breaker: {{ consecutive_failures: 2, base_cooldown: 1h, max_cooldown: 1h }}, failover: {{ max_hops: 2 }}, members: [{{ model: fail500 }}, {{ model: healthy }}] }}\n\
         \x20 hooked: {{ hooks: [{{ name: gone, module: webrequest, settings: {{ url: \"http://127.0.0.1:1/route\" }}, on_error: nothing, timeout_ms: 200 }}], members: [{{ model: healthy }}] }}\n\
         {telemetry}"
    )
}

async fn scrape(addr: SocketAddr) -> Scrape {
    let reply = get_with(admin(addr), "/metrics", &[("authorization", &format!("Bearer {ADMIN_TOKEN}"))]).await;
    assert_eq!(reply.status, 200);
    assert!(reply.headers["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4"));
    let text = String::from_utf8(reply.body.to_vec()).unwrap();
    Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap()
}

/// The value of the sample `metric` whose labels include `labels` (0 when absent).
fn value(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<f64> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match &s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            other => panic!("{metric} is not a plain value: {other:?}"),
        })
        .collect();
    assert!(found.len() <= 1, "{metric} {labels:?} matches {} series", found.len());
    found.first().copied().unwrap_or(0.0)
}

/// A histogram's cumulative count at `+Inf` and its `_count`.
fn histogram_count(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> (f64, f64) {
    let sample = scrape
        .samples
        .iter()
        .find(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .unwrap_or_else(|| panic!("no {metric} {labels:?}"));
    let Value::Histogram(buckets) = &sample.value else { panic!("{metric} is not a histogram") };
    let infinite = buckets.iter().find(|b| b.less_than.is_infinite()).map_or(0.0, |b| b.count);
    let count = value(scrape, &format!("{metric}_count"), labels);
    // Buckets are cumulative.
    assert!(buckets.windows(2).all(|w| w[0].count <= w[1].count), "{buckets:?}");
    (infinite, count)
}

fn openai(model: &str, extra: &str) -> String {
    format!(r#"{{"model":"{model}","messages":[{{"role":"user","content":"hi"}}]{extra}}}"#)
}

fn anthropic(model: &str, extra: &str) -> String {
    format!(r#"{{"model":"{model}","max_tokens":50,"messages":[{{"role":"user","content":"hi"}}]{extra}}}"#)
}

#[tokio::test]
async fn metrics_count_what_was_sent() {
    let (up, _) = upstream().await;
    let (addr, _) =
        governed(&format!("{}auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n", config(up, "")))
            .await;
    let key = create_key(addr, json!({"name": "metered"})).await;
    let bearer = format!("Bearer {}", key["key"].as_str().unwrap());
    let openai_headers = [("authorization", bearer.as_str())];
    let anthropic_headers = [("x-api-key", key["key"].as_str().unwrap())];

    for _ in 0..7 {
        let reply = post(addr, "/v1/chat/completions", &openai_headers, openai("steady", "")).await;
        assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    }
    // Translated (Anthropic caller, OpenAI lane); `top_k` has no OpenAI field.
    for _ in 0..3 {
        let reply = post(addr, "/v1/messages", &anthropic_headers, anthropic("steady", r#","top_k":5"#)).await;
        assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    }
    // The cheap lane fails twice (trips), each time failing over; then it is skipped.
    for _ in 0..4 {
        let reply = post(addr, "/v1/chat/completions", &openai_headers, openai("flaky", "")).await;
        assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    }
    // A gate nobody listens on: its call fails, the pool serves anyway.
    let reply = post(addr, "/v1/chat/completions", &openai_headers, openai("hooked", "")).await;
    assert_eq!(reply.status, 200);
    // Refusals: no key; a name nobody serves.
    assert_eq!(post(addr, "/v1/chat/completions", &[], openai("steady", "")).await.status, 401);
    assert_eq!(post(addr, "/v1/chat/completions", &openai_headers, openai("nobody", "")).await.status, 404);

    let m = scrape(addr).await;
    let requests = "switchyard_requests_total";
    let ok = |ingress, pool, lane| [("ingress", ingress), ("pool", pool), ("lane", lane), ("status", "200")];
    assert_eq!(value(&m, requests, &ok("openai", "steady", "healthy")), 7.0);
    assert_eq!(value(&m, requests, &ok("anthropic", "steady", "healthy")), 3.0);
    assert_eq!(value(&m, requests, &ok("openai", "flaky", "healthy")), 4.0);
    assert_eq!(value(&m, requests, &ok("openai", "flaky", "fail500")), 0.0);
    assert_eq!(value(&m, requests, &ok("openai", "hooked", "healthy")), 1.0);
    assert_eq!(value(&m, requests, &[("pool", "-"), ("status", "401")]), 1.0);
    assert_eq!(value(&m, requests, &[("status", "404")]), 1.0);
    let all: f64 = m
        .samples
        .iter()
        .filter(|s| s.metric == requests)
        .map(|s| match s.value {
            Value::Counter(v) => v,
            _ => 0.0,
        })
        .sum();
    assert_eq!(all, 17.0, "every request is counted once");

    let attempts = "switchyard_upstream_attempts_total";
    assert_eq!(value(&m, attempts, &[("lane", "healthy"), ("outcome", "ok")]), 15.0);
    assert_eq!(value(&m, attempts, &[("lane", "fail500"), ("outcome", "server_error")]), 2.0);
    assert_eq!(value(&m, "switchyard_failovers_total", &[("pool", "flaky"), ("cause", "server_error")]), 2.0);
    let trips = [("pool", "flaky"), ("lane", "fail500"), ("disposition", "transient")];
    assert_eq!(value(&m, "switchyard_breaker_trips_total", &trips), 1.0);
    assert_eq!(value(&m, "switchyard_breaker_open", &[("pool", "flaky"), ("lane", "fail500")]), 1.0);
    assert_eq!(value(&m, "switchyard_breaker_open", &[("pool", "flaky"), ("lane", "healthy")]), 0.0);
    assert_eq!(value(&m, "switchyard_tokens_total", &[("lane", "healthy"), ("kind", "input")]), 150.0);
    assert_eq!(value(&m, "switchyard_tokens_total", &[("lane", "healthy"), ("kind", "output")]), 75.0);
    assert_eq!(value(&m, "switchyard_in_flight", &[("lane", "healthy")]), 0.0);
    assert_eq!(value(&m, "switchyard_translations_total", &[("from", "anthropic"), ("to", "openai")]), 3.0);
    let dropped = [("from", "anthropic"), ("to", "openai"), ("field", "top_k")];
    assert_eq!(value(&m, "switchyard_translation_dropped_total", &dropped), 3.0);
    assert_eq!(value(&m, "switchyard_hook_calls_total", &[("hook", "gone"), ("outcome", "transport")]), 1.0);
    assert_eq!(value(&m, "switchyard_governance_refusals_total", &[("reason", "missing_key")]), 1.0);
    assert!(value(&m, "switchyard_listener_accepted_total", &[]) >= 1.0);
    // 15 answered requests at $2 + $4 per token pair: 150 * 2 + 75 * 4 = $600.
    let spend = value(&m, "switchyard_key_spend_usd", &[("key", key["id"].as_str().unwrap())]);
    assert!((spend - 600.0).abs() < 1e-6, "{spend}");
    assert_eq!(value(&m, "switchyard_reservations_usd", &[]), 0.0);

    let steady = [("ingress", "openai"), ("pool", "steady")];
    assert_eq!(histogram_count(&m, "switchyard_request_duration_seconds", &steady), (7.0, 7.0));
    assert_eq!(histogram_count(&m, "switchyard_time_to_first_byte_seconds", &steady), (7.0, 7.0));
    // No label value comes from the caller: the unknown name is `-`.
    assert!(m.samples.iter().all(|s| s.labels.get("pool") != Some("nobody")));
}

#[tokio::test]
async fn traces_reach_the_collector_with_the_genai_attributes() {
    let (up, seen) = upstream().await;
    let collector = receiver("/v1/traces", spans_of).await;
    let telemetry = format!(
        "telemetry: {{ otlp_endpoint: \"http://127.0.0.1:{}\", service_name: switchyard-test }}\n",
        collector.addr.port()
    );
    let addr = gateway(&config(up, &telemetry)).await;

    // A caller's trace is continued; the failing lane and the one that served are its children.
    let incoming_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let incoming_parent = "00f067aa0ba902b7";
    let traceparent = format!("00-{incoming_trace}-{incoming_parent}-01");
    let reply = post(addr, "/v1/chat/completions", &[("traceparent", &traceparent)], openai("flaky", "")).await;
    assert_eq!(reply.status, 200);
    // A caller without one starts a trace.
    let reply = post(addr, "/v1/messages", &[], anthropic("steady", "")).await;
    assert_eq!(reply.status, 200);

    let mut spans = Vec::new();
    for _ in 0..200 {
        spans = collector.got.lock().unwrap().clone();
        if spans.len() >= 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(spans.len(), 5, "{spans:#?}");
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();

    let request =
        spans.iter().find(|s| attr(&s.attributes, "switchyard.pool") == Some(Attr::Str("flaky".into()))).unwrap();
    assert_eq!(hex(&request.trace_id), incoming_trace);
    assert_eq!(hex(&request.parent_span_id), incoming_parent);
    assert_eq!(request.kind, SpanKind::Server as i32);
    assert_eq!(request.name, "chat flaky");
    let a = |key| attr(&request.attributes, key);
    assert_eq!(a("gen_ai.operation.name"), Some(Attr::Str("chat".into())));
    assert_eq!(a("gen_ai.provider.name"), Some(Attr::Str("openai".into())));
    assert_eq!(a("gen_ai.request.model"), Some(Attr::Str("flaky".into())));
    assert_eq!(a("gen_ai.response.model"), Some(Attr::Str("healthy".into())));
    assert_eq!(a("gen_ai.usage.input_tokens"), Some(Attr::Int(10)));
    assert_eq!(a("gen_ai.usage.output_tokens"), Some(Attr::Int(5)));
    assert_eq!(a("gen_ai.response.finish_reasons"), Some(Attr::Strs(vec!["end_turn".into()])));
    assert_eq!(a("switchyard.lane"), Some(Attr::Str("healthy".into())));
    assert_eq!(a("switchyard.failovers"), Some(Attr::Int(1)));
    assert_eq!(a("http.response.status_code"), Some(Attr::Int(200)));

    let mut attempts: Vec<&Span> = spans.iter().filter(|s| s.parent_span_id == request.span_id).collect();
    attempts.sort_by_key(|s| s.start_time_unix_nano);
    assert_eq!(attempts.len(), 2);
    assert!(attempts.iter().all(|s| s.trace_id == request.trace_id && s.kind == SpanKind::Client as i32));
    assert_eq!(attr(&attempts[0].attributes, "switchyard.lane"), Some(Attr::Str("fail500".into())));
    assert_eq!(attr(&attempts[0].attributes, "http.response.status_code"), Some(Attr::Int(500)));
    assert_eq!(attempts[0].status.as_ref().unwrap().code, SpanStatus::Error as i32);
    assert_eq!(attr(&attempts[1].attributes, "switchyard.lane"), Some(Attr::Str("healthy".into())));
    assert!(attempts[0].end_time_unix_nano <= attempts[1].start_time_unix_nano);
    assert!(request.start_time_unix_nano <= attempts[0].start_time_unix_nano);
    assert!(attempts[1].end_time_unix_nano <= request.end_time_unix_nano);

    // Each attempt was the upstream's parent: the trace continues upstream.
    let sent = seen.traceparents.lock().unwrap().clone();
    let expected: Vec<String> =
        attempts.iter().map(|s| format!("00-{incoming_trace}-{}-01", hex(&s.span_id))).collect();
    assert_eq!(sent[..2], expected[..]);

    let fresh =
        spans.iter().find(|s| attr(&s.attributes, "switchyard.pool") == Some(Attr::Str("steady".into()))).unwrap();
    assert!(fresh.parent_span_id.is_empty(), "a new trace has no parent");
    assert_ne!(hex(&fresh.trace_id), incoming_trace);
    assert_eq!(attr(&fresh.attributes, "switchyard.ingress"), Some(Attr::Str("anthropic".into())));
    assert_eq!(
        sent[2],
        format!(
            "00-{}-{}-01",
            hex(&fresh.trace_id),
            hex(&spans.iter().find(|s| s.parent_span_id == fresh.span_id).unwrap().span_id)
        )
    );
}

#[tokio::test]
async fn a_sampled_out_request_is_not_traced_unless_its_caller_sampled_it() {
    let (up, seen) = upstream().await;
    let collector = receiver("/v1/traces", spans_of).await;
    let telemetry = format!(
        "telemetry: {{ otlp_endpoint: \"http://127.0.0.1:{}\", service_name: switchyard-test, sample_ratio: 0 }}\n",
        collector.addr.port()
    );
    let addr = gateway(&config(up, &telemetry)).await;
    for _ in 0..5 {
        assert_eq!(post(addr, "/v1/chat/completions", &[], openai("steady", "")).await.status, 200);
    }
    let sampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert_eq!(post(addr, "/v1/chat/completions", &[("traceparent", sampled)], openai("steady", "")).await.status, 200);
    for _ in 0..200 {
        if collector.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(collector.len(), 2, "only the caller-sampled request and its attempt");
    assert_eq!(seen.traceparents.lock().unwrap().len(), 1, "untraced requests send no traceparent");
}

#[tokio::test]
async fn sinks_record_every_request_and_a_dead_target_costs_requests_nothing() {
    let (up, _) = upstream().await;
    let mut collector = receiver("/v1/traces", spans_of).await;
    let mut webhook = receiver("/records", records_of).await;
    let dir = std::env::temp_dir().join(format!("switchyard-sink-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("requests.jsonl");
    let telemetry = format!(
        "telemetry:\n  otlp_endpoint: \"http://127.0.0.1:{}\"\n  service_name: switchyard-test\n  request_log:\n    \
         file: {{ path: \"{}\", max_size: 2KiB, keep: 2 }}\n    \
         webhook: {{ url: \"http://127.0.0.1:{}/records\", batch: 10, interval: 20ms }}\n",
        collector.addr.port(),
        path.display(),
        webhook.addr.port()
    );
    let addr = gateway(&config(up, &telemetry)).await;
    for index in 0..30 {
        let reply =
            post(addr, "/v1/chat/completions", &[("x-request-id", &format!("req-{index}"))], openai("steady", ""))
                .await;
        assert_eq!(reply.status, 200);
    }
    for _ in 0..200 {
        if webhook.len() >= 30 && collector.len() >= 60 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let records = webhook.got.lock().unwrap().clone();
    assert_eq!(records.len(), 30);
    let record = records.iter().find(|r| r["request_id"] == "req-7").unwrap();
    assert_eq!(record["pool"], "steady");
    assert_eq!(record["lane"], "healthy");
    assert_eq!(record["status"], 200);
    assert_eq!(record["input_tokens"], 10);
    assert!(record.get("request_body").is_none(), "no text unless the operator asks: {record}");

    // The file rotated at 2 KiB and kept two old files.
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    let rotated = |n: u32| dir.join(format!("requests.jsonl.{n}"));
    for _ in 0..200 {
        if read(&path).lines().count() + read(&rotated(1)).lines().count() + read(&rotated(2)).lines().count() > 0
            && rotated(2).exists()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(rotated(1).exists() && rotated(2).exists(), "rotation keeps .1 and .2");
    assert!(!rotated(3).exists(), "and no more");
    for file in [path.clone(), rotated(1), rotated(2)] {
        let text = read(&file);
        assert!(text.len() <= 2048 + 512, "{} is {} bytes", file.display(), text.len());
        for line in text.lines() {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(record["request_id"].as_str().unwrap().starts_with("req-"));
        }
    }

    // Both targets die mid-run: requests do not notice, the drops are counted.
    collector.kill();
    webhook.kill();
    tokio::time::sleep(Duration::from_millis(50)).await;
    for _ in 0..10 {
        let started = std::time::Instant::now();
        assert_eq!(post(addr, "/v1/chat/completions", &[], openai("steady", "")).await.status, 200);
        assert!(started.elapsed() < Duration::from_secs(1), "a dead collector must not slow a request");
    }
    let mut m = scrape(addr).await;
    for _ in 0..300 {
        let spans_dropped = value(&m, "switchyard_trace_spans_total", &[("result", "dropped")]);
        let records_dropped =
            value(&m, "switchyard_request_log_records_total", &[("sink", "webhook"), ("result", "dropped")]);
        if spans_dropped >= 20.0 && records_dropped >= 10.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        m = scrape(addr).await;
    }
    assert_eq!(value(&m, "switchyard_trace_spans_total", &[("result", "exported")]), 60.0);
    assert_eq!(value(&m, "switchyard_trace_spans_total", &[("result", "dropped")]), 20.0);
    assert!(value(&m, "switchyard_trace_export_failures_total", &[]) >= 1.0);
    assert_eq!(value(&m, "switchyard_request_log_records_total", &[("sink", "webhook"), ("result", "written")]), 30.0);
    assert_eq!(value(&m, "switchyard_request_log_records_total", &[("sink", "webhook"), ("result", "dropped")]), 10.0);
    assert_eq!(value(&m, "switchyard_request_log_records_total", &[("sink", "file"), ("result", "written")]), 40.0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_request_log_keeps_text_only_when_asked() {
    let (up, _) = upstream().await;
    let webhook = receiver("/records", records_of).await;
    let telemetry = format!(
        "telemetry: {{ request_log: {{ include_text: true, webhook: {{ url: \"http://127.0.0.1:{}/records\", interval: 10ms }} }} }}\n",
        webhook.addr.port()
    );
    let addr = gateway(&config(up, &telemetry)).await;
    let body = r#"{"model":"steady","messages":[{"role":"user","content":"the secret plan"}]}"#;
    assert_eq!(post(addr, "/v1/chat/completions", &[], body).await.status, 200);
    for _ in 0..200 {
        if webhook.len() >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let record = webhook.got.lock().unwrap()[0].clone();
    assert!(record["request_body"].as_str().unwrap().contains("the secret plan"), "{record}");
    assert!(record["response_body"].as_str().unwrap().contains("hello there"), "{record}");
}

#[tokio::test]
async fn server_timing_tells_the_gateway_from_the_upstream() {
    let (up, _) = upstream().await;
    let addr = gateway(&config(up, "")).await;
    for (path, body) in
        [("/v1/chat/completions", openai("steady", "")), ("/v1/messages", anthropic("steady", r#","stream":true"#))]
    {
        let reply = post(addr, path, &[], body).await;
        assert_eq!(reply.status, 200);
        let timing = reply.headers["server-timing"].to_str().unwrap().to_owned();
        let parts: Vec<(&str, f64)> = timing
            .split(", ")
            .map(|part| {
                let (name, dur) = part.split_once(";dur=").unwrap();
                (name, dur.parse().unwrap())
            })
            .collect();
        assert_eq!(parts.iter().map(|(n, _)| *n).collect::<Vec<_>>(), ["gateway", "upstream"], "{timing}");
        assert!(parts.iter().all(|(_, d)| *d >= 0.0 && *d < 5000.0), "{timing}");
        assert!(parts[1].1 > 0.0, "the upstream took some time: {timing}");
    }
    // Metrics off: no series from the request path.
    let addr = gateway(&config(up, "telemetry: { metrics: false }\n")).await;
    assert_eq!(post(addr, "/v1/chat/completions", &[], openai("steady", "")).await.status, 200);
    let m = scrape(addr).await;
    assert_eq!(value(&m, "switchyard_requests_total", &[]), 0.0);
    assert!(m.samples.iter().any(|s| s.metric == "switchyard_in_flight"), "live gauges stay");
}

/// What a collector was sent on one path: each post's headers and body.
type Posts = Arc<Mutex<Vec<(String, HeaderMap, Bytes)>>>;

async fn collector() -> (SocketAddr, Posts) {
    let posts: Posts = Arc::default();
    let sink = posts.clone();
    let router = Router::new().route(
        "/{*path}",
        route_post(move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().push((uri.path().to_owned(), headers, body));
                StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (addr, posts)
}

#[tokio::test]
async fn the_otel_variables_alone_export_traces_metrics_and_logs_to_the_collector() {
    let (up, _) = upstream().await;
    let (collector, posts) = collector().await;
    let endpoint = format!("http://127.0.0.1:{}", collector.port());
    let vars = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_SERVICE_NAME", "from-env"),
        ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging,service.namespace=llm"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20collector-secret"),
        ("OTEL_TRACES_SAMPLER", "always_on"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "200"),
    ];
    let env = |name: &str| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned());
    // No telemetry key in the file at all.
    let (addr, _) = gateway_with_env(&config(up, ""), &env).await;
    let reply = post(addr, "/v1/chat/completions", &[], openai("steady", "")).await;
    assert_eq!(reply.status, 200);

    let (mut traces, mut logs, mut metrics) = (Vec::new(), Vec::new(), Vec::new());
    let counted = |body: &Bytes| {
        let export = ExportMetricsServiceRequest::decode(body.as_ref()).unwrap();
        export.resource_metrics[0].scope_metrics[0].metrics.iter().any(|m| m.name == "switchyard_requests_total")
    };
    for _ in 0..200 {
        let got = posts.lock().unwrap().clone();
        let on = |path: &str| got.iter().filter(|(p, _, _)| p == path).cloned().collect::<Vec<_>>();
        (traces, logs, metrics) = (on("/v1/traces"), on("/v1/logs"), on("/v1/metrics"));
        if !traces.is_empty() && !logs.is_empty() && metrics.iter().any(|(_, _, body)| counted(body)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(!traces.is_empty() && !logs.is_empty(), "traces {} and logs {} posted", traces.len(), logs.len());
    let Some((_, _, body)) = metrics.iter().rev().find(|(_, _, body)| counted(body)) else {
        panic!("no metrics export counted the request ({} posted)", metrics.len())
    };
    let export = ExportMetricsServiceRequest::decode(body.as_ref()).unwrap();
    let resource = export.resource_metrics[0].resource.as_ref().unwrap();
    assert_eq!(resource.attributes[0].key, "service.name");
    let requests =
        export.resource_metrics[0].scope_metrics[0].metrics.iter().find(|m| m.name == "switchyard_requests_total");
    let Some(Data::Sum(sum)) = requests.and_then(|m| m.data.clone()) else { panic!("{requests:?}") };
    assert!(sum.is_monotonic && sum.data_points.iter().any(|point| point.value == Some(NumberValue::AsDouble(1.0))));
    for (path, headers, _) in traces.iter().chain(&logs).chain(&metrics) {
        assert_eq!(headers["authorization"], "Bearer collector-secret", "{path}");
        assert_eq!(headers["content-type"], "application/x-protobuf", "{path}");
    }
    let resource_attrs = |attrs: &[opentelemetry_proto::tonic::common::v1::KeyValue]| {
        attrs
            .iter()
            .map(|kv| {
                let value = match kv.value.as_ref().and_then(|v| v.value.clone()) {
                    Some(any_value::Value::StringValue(s)) => s,
                    other => format!("{other:?}"),
                };
                (kv.key.clone(), value)
            })
            .collect::<Vec<_>>()
    };
    let expected = vec![
        ("service.name".to_owned(), "from-env".to_owned()),
        ("deployment.environment".to_owned(), "staging".to_owned()),
        ("service.namespace".to_owned(), "llm".to_owned()),
    ];
    let spans = ExportTraceServiceRequest::decode(traces[0].2.as_ref()).unwrap();
    let resource = spans.resource_spans[0].resource.as_ref().unwrap();
    assert_eq!(resource_attrs(&resource.attributes), expected);
    let request = spans.resource_spans[0].scope_spans[0].spans.iter().find(|s| s.kind == SpanKind::Server as i32);
    assert!(request.is_some_and(|span| span.name.starts_with("chat")), "{spans:?}");

    let export = ExportLogsServiceRequest::decode(logs[0].2.as_ref()).unwrap();
    let resource = export.resource_logs[0].resource.as_ref().unwrap();
    assert_eq!(resource_attrs(&resource.attributes), expected);
    let record = &export.resource_logs[0].scope_logs[0].log_records[0];
    let attrs = resource_attrs(&record.attributes);
    assert!(attrs.contains(&("gen_ai.request.model".to_owned(), "steady".to_owned())), "{attrs:?}");
    assert!(
        attrs.iter().any(|(key, value)| key == "gen_ai.usage.output_tokens" && value.contains("IntValue")),
        "{attrs:?}"
    );
    assert_eq!(record.event_name, "switchyard.request");
}

/// A collector that is down, or that stalls without answering, never slows
/// a request: the exports drop what they cannot post and count it.
#[tokio::test]
async fn a_collector_that_is_down_or_stalls_never_slows_a_request() {
    let (up, _) = upstream().await;
    // One that accepts connections and never answers.
    let stalled = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let stalled_addr = stalled.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = stalled.accept().await {
            held.push(socket);
        }
    });
    for endpoint in ["http://127.0.0.1:1".to_owned(), format!("http://{stalled_addr}")] {
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_TRACES_SAMPLER", "always_on"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "100"),
        ];
        let env = |name: &str| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned());
        let (addr, _) = gateway_with_env(&config(up, ""), &env).await;
        let started = std::time::Instant::now();
        for _ in 0..30 {
            let reply = post(addr, "/v1/chat/completions", &[], openai("steady", "")).await;
            assert_eq!(reply.status, 200, "{endpoint}");
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{endpoint}: 30 requests took {:?}", started.elapsed());
    }
}
