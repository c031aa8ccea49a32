//! What the gateway tells operators (`telemetry:`): Prometheus metrics, the
//! per-request access log line, OpenTelemetry traces over OTLP, and the
//! request-log sinks (a rotated JSONL file, a batched webhook). Prompt and
//! reply text leave only when `request_log.include_text` is set.

use std::collections::BTreeMap;
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

/// The OTLP exporter of traces and logs.
#[derive(Debug, Clone, PartialEq)]
pub struct Otlp {
    /// The collector's base URL.
    pub endpoint: String,
    /// Where traces are posted (`{endpoint}/v1/traces`, or
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as given).
    pub traces_url: String,
    /// Where the request log's records are posted as OTLP logs
    /// (`{endpoint}/v1/logs`, or `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`).
    pub logs_url: String,
    /// Where the metrics are posted (`{endpoint}/v1/metrics`, or
    /// `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`).
    pub metrics_url: String,
    /// How often the metrics are posted (`OTEL_METRIC_EXPORT_INTERVAL`).
    pub metrics_interval: Duration,
    /// Headers sent with every export (a collector's credential).
    pub headers: Vec<(String, String)>,
    /// The resource's attributes beside `service.name`.
    pub resource: Vec<(String, String)>,
    /// Share of requests traced.
    pub sample_ratio: f64,
    /// An incoming `traceparent`'s sampled flag is followed (it is traced).
    pub follow_parent: bool,
    /// `service.name` of the resource.
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
    /// Headers on every export (`name: value`).
    pub otlp_headers: Option<BTreeMap<String, String>>,
    /// The resource's attributes beside `service.name`.
    pub resource_attributes: Option<BTreeMap<String, String>>,
    /// How often metrics are posted over OTLP.
    pub otlp_metrics_interval: Option<String>,
    #[serde(default)]
    pub request_log: RawRequestLog,
    /// What the `OTEL_*` variables said that has no config key.
    #[serde(skip)]
    pub(crate) otel: OtelEnv,
}

/// The `OTEL_*` settings without a key of their own in the file.
#[derive(Debug, Default)]
pub(crate) struct OtelEnv {
    traces_url: Option<String>,
    logs_url: Option<String>,
    metrics_url: Option<String>,
    follow_parent: Option<bool>,
    disabled: bool,
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
        let endpoint = endpoint.trim_end_matches('/').to_owned();
        for url in [&raw.otel.traces_url, &raw.otel.logs_url, &raw.otel.metrics_url].into_iter().flatten() {
            if let Err(message) = ssrf::check_outbound_url(url) {
                issues.push(Issue::new(
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    message,
                    "use https://, or http:// to a collector on loopback",
                ));
            }
        }
        Otlp {
            traces_url: raw.otel.traces_url.clone().unwrap_or_else(|| format!("{endpoint}/v1/traces")),
            logs_url: raw.otel.logs_url.clone().unwrap_or_else(|| format!("{endpoint}/v1/logs")),
            metrics_url: raw.otel.metrics_url.clone().unwrap_or_else(|| format!("{endpoint}/v1/metrics")),
            metrics_interval: metrics_interval(raw.otlp_metrics_interval.as_deref(), issues),
            endpoint,
            headers: pairs(raw.otlp_headers.as_ref(), "telemetry.otlp_headers", true, issues),
            resource: pairs(raw.resource_attributes.as_ref(), "telemetry.resource_attributes", false, issues),
            sample_ratio: sample_ratio.clamp(0.0, 1.0),
            follow_parent: raw.otel.follow_parent.unwrap_or(true),
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
    let otlp = otlp.filter(|_| !raw.otel.disabled);
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

/// The metrics' export interval: 60 s unless set, from 100 ms to an hour.
fn metrics_interval(text: Option<&str>, issues: &mut Vec<Issue>) -> Duration {
    let path = "telemetry.otlp_metrics_interval";
    let interval = duration_or(text, Duration::from_secs(60), path, issues);
    if !(Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&interval) {
        issues.push(Issue::new(path, "outside 100ms..1h", "set OTEL_METRIC_EXPORT_INTERVAL (ms) or the key, e.g. 60s"));
        return Duration::from_secs(60);
    }
    interval
}

/// A map of the file as ordered pairs; header names and values must be
/// what HTTP allows.
fn pairs(
    map: Option<&BTreeMap<String, String>>,
    path: &str,
    headers: bool,
    issues: &mut Vec<Issue>,
) -> Vec<(String, String)> {
    let Some(map) = map else { return Vec::new() };
    for (name, value) in map {
        let bad_name = name.is_empty() || (headers && http::HeaderName::from_bytes(name.as_bytes()).is_err());
        let bad_value = headers && http::HeaderValue::from_str(value).is_err();
        if bad_name || bad_value {
            issues.push(Issue::new(
                &format!("{path}.{name}"),
                if bad_name { "not a valid name" } else { "not a valid header value" },
                "use a token name (letters, digits, `-`) and a visible ASCII value",
            ));
        }
    }
    map.iter().map(|(name, value)| (name.clone(), value.clone())).collect()
}

/// Reads the OpenTelemetry SDK's environment variables over the file's
/// keys (the standard's knobs win where both are set, as collectors and
/// operators expect): `OTEL_SDK_DISABLED`, `OTEL_EXPORTER_OTLP_ENDPOINT`
/// and its `_TRACES_`/`_LOGS_` forms, `OTEL_EXPORTER_OTLP_HEADERS` (and
/// `_TRACES_`), `OTEL_EXPORTER_OTLP_PROTOCOL` (only `http/protobuf`),
/// `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`
/// and `OTEL_TRACES_SAMPLER_ARG`.
pub(crate) fn read_otel_env(raw: &mut RawTelemetry, env: &dyn Fn(&str) -> Option<String>, issues: &mut Vec<Issue>) {
    let var = |name: &str| env(name).map(|value| value.trim().to_owned()).filter(|value| !value.is_empty());
    // Variables set for other programs of the host say nothing to a
    // gateway that exports nowhere.
    let file = (raw.service_name.clone(), raw.sample_ratio);
    raw.otel.disabled = var("OTEL_SDK_DISABLED").is_some_and(|value| value.eq_ignore_ascii_case("true"));
    for name in
        ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"]
    {
        if let Some(protocol) = var(name).filter(|protocol| protocol != "http/protobuf") {
            issues.push(Issue::new(
                name,
                format!("`{protocol}` is not an OTLP protocol Switchyard exports"),
                "use http/protobuf (the collector's port 4318), or unset it",
            ));
        }
    }
    if let Some(endpoint) = var("OTEL_EXPORTER_OTLP_ENDPOINT") {
        raw.otlp_endpoint = Some(endpoint);
    }
    raw.otel.traces_url = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    raw.otel.logs_url = var("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT");
    raw.otel.metrics_url = var("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
    if raw.otlp_endpoint.is_none() {
        // A signal's own endpoint alone turns the exporter on.
        raw.otlp_endpoint =
            [&raw.otel.traces_url, &raw.otel.logs_url, &raw.otel.metrics_url].into_iter().flatten().next().cloned();
    }
    if let Some(ms) = var("OTEL_METRIC_EXPORT_INTERVAL") {
        // The variable is in milliseconds; the file's key is a duration.
        raw.otlp_metrics_interval = Some(format!("{ms}ms"));
    }
    let mut resource = match var("OTEL_RESOURCE_ATTRIBUTES") {
        Some(list) => listed(&list, "OTEL_RESOURCE_ATTRIBUTES", issues),
        None => Vec::new(),
    };
    let named = resource.iter().position(|(key, _)| key == "service.name").map(|at| resource.remove(at).1);
    if let Some(service) = var("OTEL_SERVICE_NAME").or(named) {
        raw.service_name = Some(service);
    }
    if !resource.is_empty() {
        raw.resource_attributes.get_or_insert_with(BTreeMap::new).extend(resource);
    }
    for name in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] {
        if let Some(list) = var(name) {
            raw.otlp_headers.get_or_insert_with(BTreeMap::new).extend(listed(&list, name, issues));
        }
    }
    if let Some(sampler) = var("OTEL_TRACES_SAMPLER") {
        let ratio = || match var("OTEL_TRACES_SAMPLER_ARG") {
            None => Some(1.0),
            Some(arg) => arg.parse::<f64>().ok().filter(|ratio| (0.0..=1.0).contains(ratio)),
        };
        let (ratio, follow_parent) = match sampler.as_str() {
            "always_on" => (Some(1.0), false),
            "always_off" => (Some(0.0), false),
            "traceidratio" => (ratio(), false),
            "parentbased_always_on" => (Some(1.0), true),
            "parentbased_always_off" => (Some(0.0), true),
            "parentbased_traceidratio" => (ratio(), true),
            other => {
                issues.push(Issue::new(
                    "OTEL_TRACES_SAMPLER",
                    format!("`{other}` is not a sampler Switchyard has"),
                    "use always_on, always_off, traceidratio or their parentbased_ forms",
                ));
                (None, true)
            }
        };
        match ratio {
            Some(ratio) => raw.sample_ratio = Some(ratio),
            None if sampler.ends_with("traceidratio") => issues.push(Issue::new(
                "OTEL_TRACES_SAMPLER_ARG",
                "not a ratio from 0 to 1",
                "write e.g. 0.1 for one request in ten",
            )),
            None => {}
        }
        raw.otel.follow_parent = Some(follow_parent);
    }
    if raw.otlp_endpoint.is_none() {
        (raw.service_name, raw.sample_ratio) = file;
    }
}

/// `key=value,key=value` as the OpenTelemetry variables write lists,
/// values percent-decoded.
fn listed(list: &str, name: &str, issues: &mut Vec<Issue>) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for item in list.split(',').map(str::trim).filter(|item| !item.is_empty()) {
        let decoded = item.split_once('=').map(|(key, value)| {
            (
                percent_encoding::percent_decode_str(key.trim()).decode_utf8(),
                percent_encoding::percent_decode_str(value.trim()).decode_utf8(),
            )
        });
        match decoded {
            Some((Ok(key), Ok(value))) if !key.is_empty() => pairs.push((key.into_owned(), value.into_owned())),
            _ => issues.push(Issue::new(
                name,
                "an item is not key=value (percent-encoded UTF-8)",
                "write it as key1=value1,key2=value2",
            )),
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(file: &str, vars: &[(&str, &str)]) -> Result<Telemetry, Vec<Issue>> {
        let mut raw: RawTelemetry = serde_yaml_ng::from_str(file).unwrap();
        let env = |name: &str| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned());
        let mut issues = Vec::new();
        read_otel_env(&mut raw, &env, &mut issues);
        let telemetry = validate(&raw, &mut issues);
        if issues.is_empty() {
            Ok(telemetry)
        } else {
            Err(issues)
        }
    }

    #[test]
    fn the_otel_variables_alone_turn_the_exporter_on_and_win_over_the_file() {
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/"),
            ("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs,deployment.environment=prod%20eu"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20abc,x-tenant=t1"),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
        ];
        let otlp = read("{}", &vars).unwrap().otlp.unwrap();
        assert_eq!(otlp.traces_url, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(otlp.logs_url, "http://127.0.0.1:4318/v1/logs");
        assert_eq!(otlp.metrics_url, "http://127.0.0.1:4318/v1/metrics");
        assert_eq!(otlp.metrics_interval, Duration::from_secs(60));
        assert_eq!(otlp.service_name, "from-attrs");
        assert_eq!(otlp.resource, vec![("deployment.environment".to_owned(), "prod eu".to_owned())]);
        assert_eq!(otlp.headers.len(), 2);
        assert!(otlp.headers.contains(&("authorization".to_owned(), "Bearer abc".to_owned())));
        assert_eq!((otlp.sample_ratio, otlp.follow_parent), (0.25, true));

        // OTEL_SERVICE_NAME beats the attribute, the variables beat the file.
        let file = "{ otlp_endpoint: 'http://127.0.0.1:9/', service_name: file, sample_ratio: 1 }";
        let vars = [
            ("OTEL_SERVICE_NAME", "env"),
            ("OTEL_RESOURCE_ATTRIBUTES", "service.name=attrs"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/custom/traces"),
            ("OTEL_TRACES_SAMPLER", "always_off"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "250"),
        ];
        let otlp = read(file, &vars).unwrap().otlp.unwrap();
        assert_eq!(otlp.service_name, "env");
        assert_eq!(otlp.traces_url, "http://127.0.0.1:4318/custom/traces");
        assert_eq!(otlp.logs_url, "http://127.0.0.1:9/v1/logs");
        assert_eq!((otlp.sample_ratio, otlp.follow_parent), (0.0, false));
        assert_eq!(otlp.metrics_interval, Duration::from_millis(250));

        assert!(read(file, &[("OTEL_SDK_DISABLED", "true")]).unwrap().otlp.is_none());
        // Variables meant for other programs do nothing without an endpoint.
        assert!(read("{}", &[("OTEL_SERVICE_NAME", "x"), ("OTEL_TRACES_SAMPLER", "always_on")])
            .unwrap()
            .otlp
            .is_none());
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_with_the_variable_named() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        for (var, value) in [
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_TRACES_SAMPLER", "jaeger_remote"),
            ("OTEL_TRACES_SAMPLER_ARG", "2"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "no-equals-sign"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "bad header=x"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "5"),
        ] {
            let sampler = ("OTEL_TRACES_SAMPLER", "traceidratio");
            let vars = if var == "OTEL_TRACES_SAMPLER_ARG" {
                vec![endpoint, sampler, (var, value)]
            } else {
                vec![endpoint, (var, value)]
            };
            let issues = read("{}", &vars).unwrap_err();
            assert!(
                issues.iter().any(|issue| issue.path.starts_with(var) || issue.path.starts_with("telemetry.otlp_")),
                "{var}={value}: {issues:?}"
            );
        }
        // A collector off loopback over plain http is refused like the file's.
        let issues = read("{}", &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://10.0.0.5:4318")]).unwrap_err();
        assert!(issues.iter().any(|issue| issue.path == "telemetry.otlp_endpoint"), "{issues:?}");
    }
}
