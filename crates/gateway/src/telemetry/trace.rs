//! Traces: a span per request and a child span per upstream attempt, with
//! the OpenTelemetry GenAI attributes, exported over OTLP/HTTP (protobuf,
//! the `opentelemetry-proto` messages) to `{otlp_endpoint}/v1/traces`.
//!
//! The request path only fills plain structs; finished spans go through a
//! bounded queue (`try_send`: a full queue drops the span and counts it) to
//! one exporter task that batches them. A collector that is down costs the
//! request path nothing; failed exports are counted. An incoming W3C
//! `traceparent` is continued, and each attempt passes its own upstream.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::HeaderValue;
use http_body_util::Full;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{span, status, ResourceSpans, ScopeSpans, Span, Status};
use prost::Message;
use switchyard_config::Otlp;
use tokio::sync::mpsc;

/// Spans sent in one export at most.
const BATCH: usize = 512;
/// How long a span waits for its batch.
const FLUSH: Duration = Duration::from_secs(1);

/// An attribute value.
#[derive(Debug, Clone)]
pub enum Value {
    /// Text.
    Str(Arc<str>),
    /// A whole number.
    Int(i64),
    /// Several texts.
    Strs(Vec<Arc<str>>),
}

impl From<&str> for Value {
    fn from(text: &str) -> Value {
        Value::Str(Arc::from(text))
    }
}

impl From<Arc<str>> for Value {
    fn from(text: Arc<str>) -> Value {
        Value::Str(text)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Value {
        Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

/// A finished span, as the request path records it.
#[derive(Debug, Clone)]
pub struct SpanRecord {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    parent: Option<[u8; 8]>,
    name: String,
    client: bool,
    start_ns: u64,
    end_ns: u64,
    error: Option<String>,
    attributes: Vec<(&'static str, Value)>,
}

fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != N * 2 {
        return None;
    }
    let mut out = [0u8; N];
    for (index, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(index * 2..index * 2 + 2)?, 16).ok()?;
    }
    Some(out)
}

/// The incoming W3C `traceparent`: (trace id, parent span id, sampled).
pub fn parse_traceparent(value: &str) -> Option<([u8; 16], [u8; 8], bool)> {
    let mut parts = value.trim().split('-');
    let (version, trace, parent, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version.len() != 2 || version == "ff" || (version == "00" && parts.next().is_some()) {
        return None;
    }
    let trace_id = unhex::<16>(trace).filter(|t| t.iter().any(|b| *b != 0))?;
    let parent_id = unhex::<8>(parent).filter(|p| p.iter().any(|b| *b != 0))?;
    let flags = unhex::<1>(flags)?[0];
    Some((trace_id, parent_id, flags & 1 == 1))
}

/// One request's trace while it runs.
#[derive(Debug)]
pub struct Trace {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    parent: Option<[u8; 8]>,
    start_ns: u64,
    /// Finished attempt spans, and the one in flight.
    attempts: Vec<SpanRecord>,
    /// Attributes of the request span.
    pub attributes: Vec<(&'static str, Value)>,
}

impl Trace {
    /// Starts the span of an attempt on `lane`; returns the `traceparent`
    /// to send upstream (the attempt is the upstream's parent).
    pub fn begin_attempt(&mut self, lane: &str) -> Option<HeaderValue> {
        let span_id = random_id::<8>();
        let traceparent = format!("00-{}-{}-01", hex(&self.trace_id), hex(&span_id));
        self.attempts.push(SpanRecord {
            trace_id: self.trace_id,
            span_id,
            parent: Some(self.span_id),
            name: format!("attempt {lane}"),
            client: true,
            start_ns: unix_ns(),
            end_ns: 0,
            error: None,
            attributes: vec![("switchyard.lane", Value::from(lane))],
        });
        HeaderValue::from_str(&traceparent).ok()
    }

    /// Ends the attempt in flight with its HTTP status (0: no answer) and,
    /// for a failure, its class.
    pub fn end_attempt(&mut self, status: u16, failure: Option<&'static str>) {
        if let Some(attempt) = self.attempts.last_mut().filter(|a| a.end_ns == 0) {
            attempt.end_ns = unix_ns();
            if status > 0 {
                attempt.attributes.push(("http.response.status_code", Value::Int(i64::from(status))));
            }
            if let Some(class) = failure {
                attempt.attributes.push(("switchyard.disposition", Value::from(class)));
                attempt.error = Some(class.to_owned());
            }
        }
    }
}

fn random_id<const N: usize>() -> [u8; N] {
    let mut id = [0u8; N];
    loop {
        for byte in id.iter_mut() {
            *byte = fastrand::u8(..);
        }
        if id.iter().any(|b| *b != 0) {
            return id;
        }
    }
}

/// What the exporter counts.
#[derive(Debug, Default)]
pub struct TraceStats {
    /// Spans exported.
    pub exported: AtomicU64,
    /// Spans dropped because the queue was full.
    pub dropped: AtomicU64,
    /// Exports that failed (their spans are dropped).
    pub failed_exports: AtomicU64,
    /// Spans queued and not yet exported or dropped.
    pub pending: AtomicU64,
}

/// Starts traces and hands finished ones to the exporter.
#[derive(Debug)]
pub struct Tracer {
    tx: mpsc::Sender<SpanRecord>,
    sample_ratio: f64,
    /// Counters.
    pub stats: Arc<TraceStats>,
}

impl Tracer {
    /// A tracer exporting to `otlp` (spawns the exporter task).
    pub fn start(otlp: &Otlp, hooks: crate::hooks::HookClient) -> Tracer {
        let (tx, rx) = mpsc::channel(otlp.queue);
        let stats = Arc::new(TraceStats::default());
        let url = format!("{}/v1/traces", otlp.endpoint);
        tokio::spawn(export(rx, url, otlp.service_name.clone(), hooks, stats.clone()));
        Tracer { tx, sample_ratio: otlp.sample_ratio, stats }
    }

    /// A trace for a request with (maybe) an incoming `traceparent`: `None`
    /// when the request is not sampled.
    pub fn begin(&self, traceparent: Option<&HeaderValue>) -> Option<Trace> {
        let incoming = traceparent.and_then(|v| v.to_str().ok()).and_then(parse_traceparent);
        let sampled = match incoming {
            Some((_, _, sampled)) => sampled || fastrand::f64() < self.sample_ratio,
            None => self.sample_ratio >= 1.0 || fastrand::f64() < self.sample_ratio,
        };
        if !sampled {
            return None;
        }
        Some(Trace {
            trace_id: incoming.map_or_else(random_id::<16>, |(trace, _, _)| trace),
            span_id: random_id::<8>(),
            parent: incoming.map(|(_, parent, _)| parent),
            start_ns: unix_ns(),
            attempts: Vec::new(),
            attributes: Vec::with_capacity(16),
        })
    }

    /// Ends the request span and queues it with its attempts.
    pub fn finish(&self, trace: Trace, name: String, error: Option<String>) {
        let end_ns = unix_ns();
        let request = SpanRecord {
            trace_id: trace.trace_id,
            span_id: trace.span_id,
            parent: trace.parent,
            name,
            client: false,
            start_ns: trace.start_ns,
            end_ns,
            error,
            attributes: trace.attributes,
        };
        for mut span in trace.attempts.into_iter().chain(std::iter::once(request)) {
            if span.end_ns == 0 {
                span.end_ns = end_ns;
            }
            self.stats.pending.fetch_add(1, Ordering::Relaxed);
            if self.tx.try_send(span).is_err() {
                self.stats.pending.fetch_sub(1, Ordering::Relaxed);
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

fn key_value(key: &str, value: &Value) -> KeyValue {
    let value = match value {
        Value::Str(text) => any_value::Value::StringValue(text.to_string()),
        Value::Int(n) => any_value::Value::IntValue(*n),
        Value::Strs(texts) => any_value::Value::ArrayValue(opentelemetry_proto::tonic::common::v1::ArrayValue {
            values: texts
                .iter()
                .map(|t| AnyValue { value: Some(any_value::Value::StringValue(t.to_string())) })
                .collect(),
        }),
    };
    KeyValue { key: key.to_owned(), value: Some(AnyValue { value: Some(value) }), ..KeyValue::default() }
}

fn to_proto(record: SpanRecord) -> Span {
    Span {
        trace_id: record.trace_id.to_vec(),
        span_id: record.span_id.to_vec(),
        parent_span_id: record.parent.map(|p| p.to_vec()).unwrap_or_default(),
        name: record.name,
        kind: if record.client { span::SpanKind::Client as i32 } else { span::SpanKind::Server as i32 },
        start_time_unix_nano: record.start_ns,
        end_time_unix_nano: record.end_ns,
        attributes: record.attributes.iter().map(|(k, v)| key_value(k, v)).collect(),
        status: Some(match record.error {
            Some(message) => Status { message, code: status::StatusCode::Error as i32 },
            None => Status { message: String::new(), code: status::StatusCode::Unset as i32 },
        }),
        ..Span::default()
    }
}

/// The exporter: batches queued spans and posts them; a failed post is
/// counted and its batch dropped (the collector's outage never backs up
/// into the request path).
async fn export(
    mut rx: mpsc::Receiver<SpanRecord>,
    url: String,
    service: String,
    client: crate::hooks::HookClient,
    stats: Arc<TraceStats>,
) {
    let resource =
        Resource { attributes: vec![key_value("service.name", &Value::from(service.as_str()))], ..Resource::default() };
    let scope = InstrumentationScope {
        name: "switchyard".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        ..InstrumentationScope::default()
    };
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + FLUSH;
        while batch.len() < BATCH {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(span)) => batch.push(span),
                Ok(None) | Err(_) => break,
            }
        }
        let count = batch.len() as u64;
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(resource.clone()),
                scope_spans: vec![ScopeSpans {
                    scope: Some(scope.clone()),
                    spans: batch.into_iter().map(to_proto).collect(),
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            }],
        };
        let body = Bytes::from(request.encode_to_vec());
        match client.post(&url, "application/x-protobuf", Full::new(body), Duration::from_secs(10)).await {
            Ok(_) => {
                stats.exported.fetch_add(count, Ordering::Relaxed);
            }
            Err(err) => {
                stats.failed_exports.fetch_add(1, Ordering::Relaxed);
                stats.dropped.fetch_add(count, Ordering::Relaxed);
                tracing::debug!(error = %err, spans = count, "trace export failed");
            }
        }
        stats.pending.fetch_sub(count, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_read_as_w3c_defines_it() {
        let (trace, parent, sampled) =
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(hex(&trace), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex(&parent), "00f067aa0ba902b7");
        assert!(sampled);
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "garbage",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
        assert_eq!(
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").map(|t| t.2),
            Some(false)
        );
    }
}
