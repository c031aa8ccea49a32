//! What the gateway tells operators (`telemetry:`): Prometheus metrics, the
//! per-request access log line, OpenTelemetry traces over OTLP, and the
//! request-log sinks (a rotated JSONL file, a batched webhook). Prompt and
//! reply text leave only when `request_log.include_text` is set.

use std::time::Duration;

use serde::Deserialize;

use crate::{duration_or, size_or, ssrf, Issue};

/// Telemetry settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Telemetry {
    /// Count requests, attempts, tokens... for `GET /metrics`.
    pub metrics: bool,
    /// One line per request at info (`switchyard::access`).
    pub access_log: bool,
    /// Traces over OTLP/HTTP (protobuf), when set.
    pub otlp: Option<Otlp>,
    /// Request-log sinks.
    pub request_log: RequestLog,
}

/// The OTLP trace exporter.
#[derive(Debug, Clone, PartialEq)]
pub struct Otlp {
    /// The collector's base URL (`/v1/traces` is appended).
    pub endpoint: String,
    /// Share of requests traced (an incoming sampled `traceparent` is always traced).
    pub sample_ratio: f64,
    /// `service.name` of the spans.
    pub service_name: String,
    /// Spans buffered for export; past it, spans are dropped and counted.
    pub queue: usize,
}

/// Where request records go.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestLog {
    /// A JSONL file, rotated by size.
    pub file: Option<FileSink>,
    /// A webhook receiving batches.
    pub webhook: Option<WebhookSink>,
    /// Include prompt and reply text.
    pub include_text: bool,
}

/// A rotated JSONL file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSink {
    /// The live file; rotated ones get `.1`, `.2`, ...
    pub path: String,
    /// Size at which the file is rotated.
    pub max_size: u64,
    /// Rotated files kept.
    pub keep: usize,
    /// Records buffered; past it, records are dropped and counted.
    pub queue: usize,
}

/// A webhook that receives JSON arrays of records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSink {
    /// The operator's URL (SSRF-checked like hook URLs).
    pub url: String,
    /// Records per POST at most.
    pub batch: usize,
    /// How long a record waits for its batch.
    pub interval: Duration,
    /// Records buffered; past it, records are dropped and counted.
    pub queue: usize,
}

impl Default for Telemetry {
    fn default() -> Telemetry {
        Telemetry { metrics: true, access_log: true, otlp: None, request_log: RequestLog::default() }
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTelemetry {
    pub metrics: Option<bool>,
    pub access_log: Option<bool>,
    pub otlp_endpoint: Option<String>,
    pub sample_ratio: Option<f64>,
    pub service_name: Option<String>,
    pub trace_queue: Option<usize>,
    #[serde(default)]
    pub request_log: RawRequestLog,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRequestLog {
    pub file: Option<RawFileSink>,
    pub webhook: Option<RawWebhookSink>,
    pub include_text: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFileSink {
    pub path: String,
    pub max_size: Option<serde_yaml_ng::Value>,
    pub keep: Option<usize>,
    pub queue: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWebhookSink {
    pub url: String,
    pub batch: Option<usize>,
    pub interval: Option<String>,
    pub queue: Option<usize>,
}

pub(crate) fn validate(raw: &RawTelemetry, issues: &mut Vec<Issue>) -> Telemetry {
    let otlp = raw.otlp_endpoint.as_ref().map(|endpoint| {
        if let Err(message) = ssrf::check_outbound_url(endpoint) {
            issues.push(Issue::new(
                "telemetry.otlp_endpoint",
                message,
                "use https://, or http:// to a collector on loopback (e.g. http://127.0.0.1:4318)",
            ));
        }
        let sample_ratio = raw.sample_ratio.unwrap_or(1.0);
        if !(0.0..=1.0).contains(&sample_ratio) {
            issues.push(Issue::new(
                "telemetry.sample_ratio",
                "must be between 0 and 1",
                "write e.g. 0.1 for one request in ten",
            ));
        }
        Otlp {
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            sample_ratio: sample_ratio.clamp(0.0, 1.0),
            service_name: raw.service_name.clone().unwrap_or_else(|| "switchyard".to_owned()),
            queue: raw.trace_queue.unwrap_or(4096).max(1),
        }
    });
    if otlp.is_none() && (raw.sample_ratio.is_some() || raw.service_name.is_some()) {
        issues.push(Issue::new(
            "telemetry.otlp_endpoint",
            "sample_ratio or service_name is set but there is no otlp_endpoint",
            "set telemetry.otlp_endpoint, e.g. http://127.0.0.1:4318",
        ));
    }
    let file = raw.request_log.file.as_ref().map(|file| {
        if file.path.is_empty() {
            issues.push(Issue::new("telemetry.request_log.file.path", "empty", "give the JSONL file's path"));
        }
        FileSink {
            path: file.path.clone(),
            max_size: size_or(
                file.max_size.as_ref(),
                100 << 20,
                1 << 40,
                "telemetry.request_log.file.max_size",
                issues,
            ),
            keep: file.keep.unwrap_or(5),
            queue: file.queue.unwrap_or(65_536).max(1),
        }
    });
    let webhook = raw.request_log.webhook.as_ref().map(|hook| {
        if let Err(message) = ssrf::check_outbound_url(&hook.url) {
            issues.push(Issue::new(
                "telemetry.request_log.webhook.url",
                message,
                "use https://, or http:// on loopback",
            ));
        }
        WebhookSink {
            url: hook.url.clone(),
            batch: hook.batch.unwrap_or(100).clamp(1, 10_000),
            interval: duration_or(
                hook.interval.as_deref(),
                Duration::from_secs(1),
                "telemetry.request_log.webhook.interval",
                issues,
            ),
            queue: hook.queue.unwrap_or(10_000).max(1),
        }
    });
    Telemetry {
        metrics: raw.metrics.unwrap_or(true),
        access_log: raw.access_log.unwrap_or(true),
        otlp,
        request_log: RequestLog { file, webhook, include_text: raw.request_log.include_text.unwrap_or(false) },
    }
}
