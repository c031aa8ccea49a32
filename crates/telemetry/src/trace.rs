//! Traces: a server span per request and a client span per upstream
//! attempt, with the OpenTelemetry GenAI attributes, exported over
//! OTLP/HTTP (protobuf, encoded by `telemetry::otlp`, handed in) to
//! `{otlp_endpoint}/v1/traces`.
//!
//! The request path fills typed structs (no attribute lists, no strings
//! formatted); a finished request goes through a bounded queue (`try_send`:
//! a full queue drops it and counts its spans) to one exporter task that
//! batches and posts. A collector that is down costs the request path
//! nothing; failed exports are counted. An incoming W3C `traceparent` is
//! continued, and each attempt passes its own upstream.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::HeaderValue;
use http_body_util::Full;
use switchyard_config::Otlp;
use tokio::sync::mpsc;

/// Spans sent in one export at most.
const BATCH: usize = 512;
/// How long a span waits for its batch.
const FLUSH: Duration = Duration::from_secs(1);

pub(crate) fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    for byte in bytes {
        out.push(HEX[usize::from(byte >> 4)]);
        out.push(HEX[usize::from(byte & 0xf)]);
    }
}

fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != N * 2 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (index, byte) in out.iter_mut().enumerate() {
        *byte = (nibble(digits[index * 2])? << 4) | nibble(digits[index * 2 + 1])?;
    }
    Some(out)
}

/// The incoming W3C `traceparent`: (trace id, parent span id, sampled).
/// Lower-case hex only, as the W3C spec requires; an all-zero id is invalid.
pub fn parse_traceparent(value: &str) -> Option<([u8; 16], [u8; 8], bool)> {
    let mut parts = value.trim().split('-');
    let (version, trace, parent, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version.len() != 2 || version == "ff" || (version == "00" && parts.next().is_some()) {
        return None;
    }
    unhex::<1>(version)?;
    let trace_id = unhex::<16>(trace).filter(|t| t.iter().any(|b| *b != 0))?;
    let parent_id = unhex::<8>(parent).filter(|p| p.iter().any(|b| *b != 0))?;
    let flags = unhex::<1>(flags)?[0];
    Some((trace_id, parent_id, flags & 1 == 1))
}

/// `00-{trace}-{span}-01`.
fn traceparent(trace_id: &[u8; 16], span_id: &[u8; 8]) -> Option<HeaderValue> {
    let mut out = Vec::with_capacity(55);
    out.extend_from_slice(b"00-");
    push_hex(&mut out, trace_id);
    out.push(b'-');
    push_hex(&mut out, span_id);
    out.extend_from_slice(b"-01");
    HeaderValue::from_maybe_shared(Bytes::from(out)).ok()
}

fn trace_id() -> [u8; 16] {
    fastrand::u128(1..).to_le_bytes()
}

fn span_id() -> [u8; 8] {
    fastrand::u64(1..).to_le_bytes()
}

/// Span kinds, numbered as OTLP numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The request, as the gateway served it.
    Server = 2,
    /// An attempt, as the gateway called an upstream.
    Client = 3,
}

/// One upstream attempt.
#[derive(Debug)]
struct Attempt {
    span_id: [u8; 8],
    lane: Arc<str>,
    model: Arc<str>,
    provider: &'static str,
    start_ns: u64,
    end_ns: u64,
    status: u16,
    failure: Option<&'static str>,
}

/// One request's trace while it runs.
#[derive(Debug)]
pub struct Trace {
    trace_id: [u8; 16],
    span_id: [u8; 8],
    parent: Option<[u8; 8]>,
    start_ns: u64,
    attempts: Vec<Attempt>,
}

impl Trace {
    /// Starts the span of an attempt on `lane` (wire model `model`, a
    /// `provider` in GenAI's names); returns the `traceparent` to send
    /// upstream (the attempt is the upstream's parent).
    pub fn begin_attempt(&mut self, lane: &Arc<str>, model: Arc<str>, provider: &'static str) -> Option<HeaderValue> {
        let id = span_id();
        self.attempts.push(Attempt {
            span_id: id,
            lane: lane.clone(),
            model,
            provider,
            start_ns: unix_ns(),
            end_ns: 0,
            status: 0,
            failure: None,
        });
        traceparent(&self.trace_id, &id)
    }

    /// Ends the attempt in flight with its HTTP status (0: no answer) and,
    /// for a failure, what became of it.
    pub fn end_attempt(&mut self, lane: &str, status: u16, failure: Option<&'static str>) {
        // Two attempts may be open at once (a hedge): the lane names which.
        if let Some(attempt) = self.attempts.iter_mut().rev().find(|a| a.end_ns == 0 && &*a.lane == lane) {
            attempt.end_ns = unix_ns();
            attempt.status = status;
            attempt.failure = failure;
        }
    }
}

/// What the request span says besides its ids and times.
#[derive(Debug, Default)]
pub struct Summary {
    /// The caller's protocol.
    pub ingress: &'static str,
    /// What it asked for (`chat`, `embed`, ..., `count_tokens`).
    pub operation: &'static str,
    /// The name the caller used, when it named a pool.
    pub pool: Option<Arc<str>>,
    /// The lane that served (or last failed).
    pub lane: Option<Arc<str>>,
    /// That lane's provider, in GenAI's names.
    pub provider: Option<&'static str>,
    /// The wire model that answered.
    pub response_model: Option<Arc<str>>,
    /// Input and output tokens, when known.
    pub usage: Option<(u64, u64)>,
    /// Why the model stopped.
    pub finish_reason: Option<&'static str>,
    /// Lanes that failed before the one that answered.
    pub failovers: u32,
    /// The status the caller got.
    pub status: u16,
}

/// The GenAI `gen_ai.operation.name` of a request's task (`embed` is
/// `embeddings`; a token count, which the conventions do not name, is
/// `count_tokens`).
fn genai_operation(task: &str) -> &'static str {
    match switchyard_ir::Operation::from_name(task) {
        Some(operation) => operation.genai_name(),
        None if task == "count_tokens" => "count_tokens",
        None => "chat",
    }
}

/// A request's trace, ended.
#[derive(Debug)]
pub struct Finished {
    trace: Trace,
    end_ns: u64,
    summary: Summary,
}

/// One span as the encoder reads it.
#[derive(Debug)]
pub struct SpanView<'a> {
    pub trace_id: &'a [u8],
    pub span_id: &'a [u8],
    pub parent: Option<&'a [u8]>,
    /// The GenAI operation: the span's name is `{operation} {name}`.
    pub operation: &'static str,
    pub name: &'a str,
    pub kind: Kind,
    pub start_ns: u64,
    pub end_ns: u64,
    pub strings: [Option<(&'static str, &'a str)>; 7],
    pub ints: [Option<(&'static str, i64)>; 4],
    pub finish_reason: Option<&'a str>,
    pub error: Option<&'a str>,
}

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Finished {
    /// Every span of the request: its attempts, then itself.
    pub fn each_span(&self, mut visit: impl FnMut(SpanView<'_>)) {
        let trace = &self.trace;
        let operation = genai_operation(self.summary.operation);
        for attempt in &trace.attempts {
            visit(SpanView {
                trace_id: &trace.trace_id,
                span_id: &attempt.span_id,
                parent: Some(&trace.span_id),
                operation,
                name: &attempt.model,
                kind: Kind::Client,
                start_ns: attempt.start_ns,
                end_ns: if attempt.end_ns == 0 { self.end_ns } else { attempt.end_ns },
                strings: [
                    Some(("gen_ai.operation.name", operation)),
                    Some(("gen_ai.provider.name", attempt.provider)),
                    Some(("gen_ai.request.model", &attempt.model)),
                    Some(("switchyard.lane", &attempt.lane)),
                    attempt.failure.map(|f| ("switchyard.disposition", f)),
                    None,
                    None,
                ],
                ints: [
                    (attempt.status > 0).then(|| ("http.response.status_code", i64::from(attempt.status))),
                    None,
                    None,
                    None,
                ],
                finish_reason: None,
                error: attempt.failure,
            });
        }
        let s = &self.summary;
        visit(SpanView {
            trace_id: &trace.trace_id,
            span_id: &trace.span_id,
            parent: trace.parent.as_ref().map(|p| p.as_slice()),
            operation,
            name: s.pool.as_deref().unwrap_or("-"),
            kind: Kind::Server,
            start_ns: trace.start_ns,
            end_ns: self.end_ns,
            strings: [
                Some(("gen_ai.operation.name", operation)),
                s.provider.map(|p| ("gen_ai.provider.name", p)),
                s.pool.as_deref().map(|p| ("gen_ai.request.model", p)),
                s.response_model.as_deref().map(|m| ("gen_ai.response.model", m)),
                s.pool.as_deref().map(|p| ("switchyard.pool", p)),
                s.lane.as_deref().map(|l| ("switchyard.lane", l)),
                Some(("switchyard.ingress", s.ingress)),
            ],
            ints: [
                s.usage.map(|(input, _)| ("gen_ai.usage.input_tokens", int(input))),
                s.usage.map(|(_, output)| ("gen_ai.usage.output_tokens", int(output))),
                Some(("switchyard.failovers", i64::from(s.failovers))),
                Some(("http.response.status_code", i64::from(s.status))),
            ],
            finish_reason: s.finish_reason,
            error: (s.status >= 500).then_some("the gateway answered with a server error"),
        });
    }

    fn spans(&self) -> u64 {
        self.trace.attempts.len() as u64 + 1
    }

    /// A finished trace for tests: one failed attempt, then the request.
    #[cfg(test)]
    pub fn sample(pool: &str) -> Finished {
        let mut trace =
            Trace { trace_id: [1; 16], span_id: [2; 8], parent: Some([7; 8]), start_ns: 1_000, attempts: Vec::new() };
        trace.begin_attempt(&Arc::from("lane-a"), Arc::from("wire-a"), "openai");
        trace.end_attempt("lane-a", 500, Some("upstream_error"));
        let summary = Summary {
            operation: "chat",
            ingress: "openai",
            pool: Some(Arc::from(pool)),
            lane: Some(Arc::from("lane-a")),
            provider: Some("openai"),
            response_model: Some(Arc::from("wire-a")),
            usage: Some((12, 3)),
            finish_reason: Some("end_turn"),
            failovers: 0,
            status: 200,
        };
        Finished { trace, end_ns: 9_000, summary }
    }
}

/// What the exporter counts.
#[derive(Debug, Default)]
pub struct TraceStats {
    /// Spans exported.
    pub exported: AtomicU64,
    /// Spans dropped: the queue was full, or their export failed.
    pub dropped: AtomicU64,
    /// Exports that failed (their spans are dropped).
    pub failed_exports: AtomicU64,
    /// Spans queued and not yet exported or dropped.
    pub pending: AtomicU64,
}

/// Starts traces and hands finished ones to the exporter.
#[derive(Debug)]
pub struct Tracer {
    tx: mpsc::Sender<Finished>,
    sample_ratio: f64,
    follow_parent: bool,
    /// Counters.
    pub stats: Arc<TraceStats>,
}

impl Tracer {
    /// A tracer exporting to `otlp` (spawns the exporter task); `encode`
    /// writes a batch as the export body (`otlp::encode`).
    pub fn start(otlp: &Otlp, hooks: switchyard_transport::hooks::HookClient, encode: Encode) -> Tracer {
        let (tx, rx) = mpsc::channel(otlp.queue);
        let stats = Arc::new(TraceStats::default());
        let to = Collector::new(otlp.traces_url.clone(), otlp);
        switchyard_tasks::service("trace exporter", export(rx, to, Resource::of(otlp), hooks, encode, stats.clone()));
        Tracer { tx, sample_ratio: otlp.sample_ratio, follow_parent: otlp.follow_parent, stats }
    }

    /// A trace for a request with (maybe) an incoming `traceparent`: `None`
    /// when the request is not sampled.
    pub fn begin(&self, traceparent: Option<&HeaderValue>) -> Option<Trace> {
        let incoming = traceparent.and_then(|v| v.to_str().ok()).and_then(parse_traceparent);
        let sampled = match incoming {
            Some((_, _, true)) if self.follow_parent => true,
            _ => self.sample_ratio >= 1.0 || fastrand::f64() < self.sample_ratio,
        };
        if !sampled {
            return None;
        }
        Some(Trace {
            trace_id: incoming.map_or_else(trace_id, |(trace, _, _)| trace),
            span_id: span_id(),
            parent: incoming.map(|(_, parent, _)| parent),
            start_ns: unix_ns(),
            attempts: Vec::new(),
        })
    }

    /// Ends the request span and queues the trace.
    pub fn finish(&self, trace: Trace, summary: Summary) {
        let finished = Finished { trace, end_ns: unix_ns(), summary };
        let spans = finished.spans();
        self.stats.pending.fetch_add(spans, Ordering::Relaxed);
        if self.tx.try_send(finished).is_err() {
            self.stats.pending.fetch_sub(spans, Ordering::Relaxed);
            self.stats.dropped.fetch_add(spans, Ordering::Relaxed);
        }
    }
}

/// The exporter: batches queued traces and posts them; a failed post is
/// counted and its batch dropped (the collector's outage never backs up
/// into the request path).
/// Writes a batch of finished traces as an export body.
pub type Encode = fn(&Resource, &[Finished]) -> Vec<u8>;

/// What the exported telemetry says it comes from.
#[derive(Debug, Clone, Default)]
pub struct Resource {
    /// `service.name`.
    pub service: String,
    /// The other attributes (`OTEL_RESOURCE_ATTRIBUTES`, the file's).
    pub attributes: Vec<(String, String)>,
}

impl Resource {
    /// The resource `otlp` describes.
    pub fn of(otlp: &Otlp) -> Resource {
        Resource { service: otlp.service_name.clone(), attributes: otlp.resource.clone() }
    }
}

/// Where one signal is posted, with the exporter's headers.
#[derive(Debug, Clone)]
pub struct Collector {
    /// The signal's URL.
    pub url: String,
    /// Sent with every post (a collector's credential; never logged).
    pub headers: Vec<(http::HeaderName, HeaderValue)>,
}

impl Collector {
    /// `url` with `otlp`'s headers (the config refused invalid ones).
    pub fn new(url: String, otlp: &Otlp) -> Collector {
        let headers = otlp
            .headers
            .iter()
            .filter_map(|(name, value)| {
                Some((http::HeaderName::from_bytes(name.as_bytes()).ok()?, HeaderValue::from_str(value).ok()?))
            })
            .collect();
        Collector { url, headers }
    }

    /// Posts one protobuf export body; a failure comes back for counting.
    pub async fn post(
        &self,
        client: &switchyard_transport::hooks::HookClient,
        body: Vec<u8>,
    ) -> Result<(), switchyard_transport::hooks::HookError> {
        let body = Full::new(Bytes::from(body));
        client
            .post_with(&self.url, "application/x-protobuf", body, self.headers.clone(), Duration::from_secs(10))
            .await?;
        Ok(())
    }
}

async fn export(
    mut rx: mpsc::Receiver<Finished>,
    to: Collector,
    resource: Resource,
    client: switchyard_transport::hooks::HookClient,
    encode: Encode,
    stats: Arc<TraceStats>,
) {
    while let Some(first) = rx.recv().await {
        let mut spans = first.spans();
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + FLUSH;
        while (spans as usize) < BATCH {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(trace)) => {
                    spans += trace.spans();
                    batch.push(trace);
                }
                Ok(None) | Err(_) => break,
            }
        }
        let body = encode(&resource, &batch);
        drop(batch);
        match to.post(&client, body).await {
            Ok(_) => {
                stats.exported.fetch_add(spans, Ordering::Relaxed);
            }
            Err(err) => {
                stats.failed_exports.fetch_add(1, Ordering::Relaxed);
                stats.dropped.fetch_add(spans, Ordering::Relaxed);
                tracing::debug!(error = %err, spans, "trace export failed");
            }
        }
        stats.pending.fetch_sub(spans, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_task_has_its_genai_operation_name() {
        assert_eq!(genai_operation("embed"), "embeddings");
        assert_eq!(genai_operation("transcription"), "speech_to_text");
        assert_eq!(genai_operation("count_tokens"), "count_tokens");
        assert_eq!(genai_operation("chat"), "chat");
    }

    fn hex(bytes: &[u8]) -> String {
        let mut out = Vec::new();
        push_hex(&mut out, bytes);
        String::from_utf8(out).unwrap()
    }

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
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "garbage",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
        assert_eq!(
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").map(|t| t.2),
            Some(false)
        );
        // A later version may carry more fields.
        assert!(parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more").is_some());
    }

    #[test]
    fn an_attempt_sends_its_own_span_as_the_upstreams_parent() {
        let mut trace =
            Trace { trace_id: [0xab; 16], span_id: [1; 8], parent: None, start_ns: 0, attempts: Vec::new() };
        let sent = trace.begin_attempt(&Arc::from("lane"), Arc::from("model"), "openai").unwrap();
        let (trace_id, parent, sampled) = parse_traceparent(sent.to_str().unwrap()).unwrap();
        assert_eq!(trace_id, [0xab; 16]);
        assert_eq!(parent, trace.attempts[0].span_id);
        assert!(sampled);
    }
}
