//! Metrics over OTLP: the same series `GET /metrics` serves, read from its
//! Prometheus text and written as an `ExportMetricsServiceRequest`
//! (opentelemetry-proto's `collector/metrics/v1`) every export interval.
//! Reading the scrape's text keeps one definition of every series (the
//! scrape's, live state included) for both ways out. Counters become
//! cumulative monotonic sums, gauges gauges, histograms explicit-bucket
//! histograms; each family's help is the metric's description.

use std::time::Duration;

use super::otlp::Proto;
use super::trace::{Collector, Resource};

/// A family's kind, from its `# TYPE` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// One histogram series: its labels, per-bucket upper bounds and cumulative
/// counts, sum and count.
#[derive(Debug, Default)]
struct HistogramSeries {
    labels: Vec<(String, String)>,
    buckets: Vec<(f64, u64)>,
    sum: f64,
    count: u64,
}

#[derive(Debug)]
struct Family {
    name: String,
    help: String,
    kind: Kind,
    numbers: Vec<(Vec<(String, String)>, f64)>,
    histograms: Vec<HistogramSeries>,
}

/// A series' labels, in the order the scrape wrote them.
type Labels = Vec<(String, String)>;

/// A sample line: its name, labels and value.
fn sample(line: &str) -> Option<(&str, Labels, f64)> {
    let (name, rest) = match line.find(['{', ' ']) {
        Some(at) => line.split_at(at),
        None => return None,
    };
    let (labels, value) = match rest.strip_prefix('{') {
        Some(inner) => {
            let end = closing_brace(inner)?;
            (labels(&inner[..end])?, inner[end + 1..].trim())
        }
        None => (Vec::new(), rest.trim()),
    };
    let value = value.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        other => other.parse().ok()?,
    };
    Some((name, labels, value))
}

/// Where the label set closes (a `}` outside a quoted value).
fn closing_brace(text: &str) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (at, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(at),
            _ => {}
        }
    }
    None
}

/// `key="value",…` with the exposition format's escapes.
fn labels(text: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let mut chars = after.strip_prefix('"')?.char_indices();
        let mut value = String::new();
        let end = loop {
            let (at, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break at,
                c => value.push(c),
            }
        };
        out.push((key.trim().to_owned(), value));
        rest = after[end + 2..].trim_start_matches(',').trim();
    }
    Some(out)
}

/// The families of a Prometheus text exposition, in order.
fn families(text: &str) -> Vec<Family> {
    let mut families: Vec<Family> = Vec::new();
    let mut help = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = rest.split_once(' ').map_or("", |(_, help)| help).to_owned();
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let Some((name, kind)) = rest.split_once(' ') else { continue };
            let kind = match kind.trim() {
                "counter" => Kind::Counter,
                "gauge" => Kind::Gauge,
                "histogram" => Kind::Histogram,
                _ => continue,
            };
            let help = std::mem::take(&mut help);
            families.push(Family { name: name.to_owned(), help, kind, numbers: Vec::new(), histograms: Vec::new() });
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (Some(family), Some((name, mut labels, value))) = (families.last_mut(), sample(line)) else { continue };
        let Some(suffix) = name.strip_prefix(family.name.as_str()) else { continue };
        match (family.kind, suffix) {
            (Kind::Counter, "_total" | "") | (Kind::Gauge, "") => family.numbers.push((labels, value)),
            (Kind::Histogram, "_bucket") => {
                let Some(at) = labels.iter().position(|(key, _)| key == "le") else { continue };
                let bound = match labels.remove(at).1.as_str() {
                    "+Inf" => f64::INFINITY,
                    other => other.parse().unwrap_or(f64::INFINITY),
                };
                series(&mut family.histograms, labels).buckets.push((bound, value as u64));
            }
            (Kind::Histogram, "_sum") => series(&mut family.histograms, labels).sum = value,
            (Kind::Histogram, "_count") => series(&mut family.histograms, labels).count = value as u64,
            _ => {}
        }
    }
    families
}

fn series(histograms: &mut Vec<HistogramSeries>, labels: Vec<(String, String)>) -> &mut HistogramSeries {
    let at = match histograms.iter().position(|h| h.labels == labels) {
        Some(at) => at,
        None => {
            histograms.push(HistogramSeries { labels, ..HistogramSeries::default() });
            histograms.len() - 1
        }
    };
    &mut histograms[at]
}

/// The body of one metrics export: every family of `text` (the scrape's
/// Prometheus text), cumulative since `start_ns`, observed at `now_ns`.
pub fn encode_metrics(resource: &Resource, text: &str, start_ns: u64, now_ns: u64) -> Vec<u8> {
    let families = families(text);
    let mut p = Proto::with_capacity(text.len() / 2 + 128);
    // ExportMetricsServiceRequest.resource_metrics = 1
    p.nested(1, |p| {
        p.resource(resource);
        // ResourceMetrics.scope_metrics = 2
        p.nested(2, |p| {
            p.scope();
            for family in &families {
                // ScopeMetrics.metrics = 2
                p.nested(2, |p| metric(p, family, start_ns, now_ns));
            }
        });
    });
    p.into_bytes()
}

fn metric(p: &mut Proto, family: &Family, start_ns: u64, now_ns: u64) {
    p.bytes(1, family.name.as_bytes());
    p.bytes(2, family.help.as_bytes());
    let number_points = |p: &mut Proto| {
        for (labels, value) in &family.numbers {
            // NumberDataPoint: attributes 7, start 2, time 3, as_double 4.
            p.nested(1, |p| {
                for (key, value) in labels {
                    p.attr_str(7, key, value);
                }
                p.fixed64(2, start_ns);
                p.fixed64(3, now_ns);
                p.fixed64(4, value.to_bits());
            });
        }
    };
    match family.kind {
        // Gauge = 5 { data_points = 1 }
        Kind::Gauge => p.nested(5, number_points),
        // Sum = 7 { data_points = 1, aggregation_temporality = 2 (CUMULATIVE), is_monotonic = 3 }
        Kind::Counter => p.nested(7, |p| {
            number_points(p);
            p.uint(2, 2);
            p.uint(3, 1);
        }),
        // Histogram = 9 { data_points = 1, aggregation_temporality = 2 }
        Kind::Histogram => p.nested(9, |p| {
            for series in &family.histograms {
                p.nested(1, |p| histogram_point(p, series, start_ns, now_ns));
            }
            p.uint(2, 2);
        }),
    }
}

/// A `HistogramDataPoint`: attributes 9, start 2, time 3, count 4, sum 5,
/// bucket_counts 6 (per bucket, packed), explicit_bounds 7 (packed).
fn histogram_point(p: &mut Proto, series: &HistogramSeries, start_ns: u64, now_ns: u64) {
    for (key, value) in &series.labels {
        p.attr_str(9, key, value);
    }
    p.fixed64(2, start_ns);
    p.fixed64(3, now_ns);
    p.fixed64(4, series.count);
    p.fixed64(5, series.sum.to_bits());
    let mut previous = 0u64;
    let counts: Vec<u64> = series
        .buckets
        .iter()
        .map(|(_, cumulative)| {
            let count = cumulative.saturating_sub(previous);
            previous = *cumulative;
            count
        })
        .collect();
    let bounds: Vec<u64> =
        series.buckets.iter().filter(|(bound, _)| bound.is_finite()).map(|(b, _)| b.to_bits()).collect();
    p.packed_fixed64(6, &counts);
    p.packed_fixed64(7, &bounds);
}

/// Posts the scrape's series every `interval` until the gateway goes
/// (`render` gives `None`); a failed post is counted in the log at debug
/// and the next export carries the cumulative figures anyway.
pub async fn export(
    to: Collector,
    resource: Resource,
    interval: Duration,
    client: switchyard_transport::hooks::HookClient,
    render: impl Fn() -> Option<String> + Send + 'static,
) {
    let start_ns = super::trace::unix_ns();
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let Some(text) = render() else { return };
        let body = encode_metrics(&resource, &text, start_ns, super::trace::unix_ns());
        if let Err(err) = to.post(&client, body).await {
            tracing::debug!(error = %err, "metrics export failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value;
    use prost::Message;

    const TEXT: &str = r#"# HELP switchyard_requests_total Requests answered.
# TYPE switchyard_requests_total counter
switchyard_requests_total{ingress="openai",pool="a \"quoted\" {pool}",status="200"} 3
switchyard_requests_total{ingress="anthropic",pool="b",status="502"} 1
# HELP switchyard_in_flight Requests in flight.
# TYPE switchyard_in_flight gauge
switchyard_in_flight{lane="x"} 2
# HELP switchyard_request_duration_seconds Time to the end.
# TYPE switchyard_request_duration_seconds histogram
switchyard_request_duration_seconds_bucket{pool="a",le="0.1"} 1
switchyard_request_duration_seconds_bucket{pool="a",le="1"} 3
switchyard_request_duration_seconds_bucket{pool="a",le="+Inf"} 4
switchyard_request_duration_seconds_sum{pool="a"} 2.5
switchyard_request_duration_seconds_count{pool="a"} 4
# EOF
"#;

    #[test]
    fn the_scrapes_families_decode_as_otlp_metrics_with_the_official_definitions() {
        let resource = Resource { service: "svc".into(), attributes: Vec::new() };
        let body = encode_metrics(&resource, TEXT, 10, 20);
        let export = ExportMetricsServiceRequest::decode(body.as_slice()).unwrap();
        let metrics = &export.resource_metrics[0].scope_metrics[0].metrics;
        assert_eq!(metrics.len(), 3);

        assert_eq!(metrics[0].name, "switchyard_requests_total");
        assert_eq!(metrics[0].description, "Requests answered.");
        let Some(Data::Sum(sum)) = &metrics[0].data else { panic!("{:?}", metrics[0]) };
        assert!(sum.is_monotonic);
        assert_eq!(sum.aggregation_temporality, 2);
        assert_eq!(sum.data_points.len(), 2);
        let first = &sum.data_points[0];
        assert_eq!(first.value, Some(Value::AsDouble(3.0)));
        assert_eq!((first.start_time_unix_nano, first.time_unix_nano), (10, 20));
        let pool = first.attributes.iter().find(|kv| kv.key == "pool").unwrap();
        assert_eq!(
            pool.value.as_ref().unwrap().value,
            Some(opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue("a \"quoted\" {pool}".into()))
        );

        let Some(Data::Gauge(gauge)) = &metrics[1].data else { panic!() };
        assert_eq!(gauge.data_points[0].value, Some(Value::AsDouble(2.0)));

        let Some(Data::Histogram(histogram)) = &metrics[2].data else { panic!() };
        let point = &histogram.data_points[0];
        assert_eq!(point.attributes.len(), 1, "le is the bucket's bound, not a label");
        assert_eq!(point.explicit_bounds, vec![0.1, 1.0]);
        assert_eq!(point.bucket_counts, vec![1, 2, 1]);
        assert_eq!((point.count, point.sum), (4, Some(2.5)));
    }

    #[test]
    fn lines_that_are_not_samples_are_skipped() {
        let families = families("# TYPE x counter\nx_total{a=\"unterminated} 1\nx_total 2\ngarbage\n");
        assert_eq!(families[0].numbers, vec![(Vec::new(), 2.0)]);
    }
}
