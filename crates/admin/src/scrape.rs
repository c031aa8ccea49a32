//! The `/metrics` scrape: the request path's counters (`metrics`) plus
//! the live state read at scrape time (breakers, in-flight requests,
//! listener counters, governance's figures), written as Prometheus text.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use switchyard_health::StatusClass;
use switchyard_ir::{Field, Protocol};
use switchyard_telemetry::encode::{encode_counters, encode_gauges};
use switchyard_telemetry::metrics::*;

use switchyard_state::Gateway;

fn encode_histograms<'a>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl Iterator<Item = (Vec<(&'static str, &'a str)>, &'a Histogram)>,
) -> Result<(), std::fmt::Error> {
    let mut series = series.filter(|(_, h)| h.count.load(Ordering::Relaxed) > 0).peekable();
    if series.peek().is_none() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, histogram) in series {
        // Per-bucket counts: the encoder writes them cumulated.
        let buckets: Vec<(f64, u64)> = BUCKETS
            .iter()
            .zip(histogram.buckets.iter())
            .map(|(bound, count)| (*bound, count.load(Ordering::Relaxed)))
            .collect();
        let count = histogram.count.load(Ordering::Relaxed);
        let sum = histogram.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let mut family = metric.encode_family(&labels)?;
        family.encode_histogram::<Vec<(&str, &str)>>(sum, count, &buckets, None)?;
    }
    Ok(())
}

/// The scrape: the request-path counters plus live state read now.
#[derive(Debug)]
struct Scrape {
    gateway: std::sync::Weak<Gateway>,
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(gateway) = self.gateway.upgrade() else { return Ok(()) };
        let m = &gateway.metrics;
        let e = &mut encoder;
        let status_label = |index: usize| STATUS_NAMES.get(index).copied().unwrap_or("other");
        // A pool serves one operation: the label is the pool's.
        let operation_of =
            |pool: &str| gateway.resolve(pool).map_or("-", |index| gateway.pools[index].operation.as_str());
        encode_counters(
            e,
            "switchyard_requests",
            "Requests answered, by ingress protocol, pool, its operation, lane and status.",
            m.requests.iter().enumerate().map(|(index, value)| {
                let status = index % STATUS_SLOTS;
                let ingress = (index / STATUS_SLOTS) % INGRESSES;
                let combo = index / STATUS_SLOTS / INGRESSES;
                let (pool, lane) = &m.combos[combo];
                (
                    vec![
                        ("ingress", Protocol::ALL[ingress].as_str()),
                        ("pool", &**pool),
                        ("operation", operation_of(pool)),
                        ("lane", &**lane),
                        ("status", status_label(status)),
                    ],
                    value.load(Ordering::Relaxed),
                )
            }),
        )?;
        let histogram_labels = |index: usize| {
            let pool = &*m.pools[index / INGRESSES];
            vec![
                ("ingress", Protocol::ALL[index % INGRESSES].as_str()),
                ("pool", pool),
                ("operation", operation_of(pool)),
            ]
        };
        encode_histograms(
            e,
            "switchyard_request_duration_seconds",
            "Time from a request's arrival to the end of its answer (streams included).",
            m.duration.iter().enumerate().map(|(index, h)| (histogram_labels(index), h)),
        )?;
        encode_histograms(
            e,
            "switchyard_time_to_first_byte_seconds",
            "Time from a request's arrival to the first byte of its answer's body.",
            m.ttfb.iter().enumerate().map(|(index, h)| (histogram_labels(index), h)),
        )?;
        encode_counters(
            e,
            "switchyard_upstream_attempts",
            "Upstream attempts by lane and outcome (ok, or the failure class).",
            m.attempts.iter().enumerate().map(|(index, value)| {
                let outcome = index % OUTCOMES;
                let label = if outcome == 0 { "ok" } else { StatusClass::ALL[outcome - 1].as_str() };
                (vec![("lane", &*m.lanes[index / OUTCOMES]), ("outcome", label)], value.load(Ordering::Relaxed))
            }),
        )?;
        encode_histograms(
            e,
            "switchyard_upstream_latency_seconds",
            "Time from sending a request to a lane to its 2xx response head, by lane.",
            m.upstream_latency.iter().enumerate().map(|(index, h)| (vec![("lane", &*m.lanes[index])], h)),
        )?;
        encode_counters(
            e,
            "switchyard_failovers",
            "Requests that moved on from a failed lane, by pool and the failure's class.",
            m.failovers.iter().enumerate().map(|(index, value)| {
                let cause = StatusClass::ALL[index % StatusClass::ALL.len()].as_str();
                (
                    vec![("pool", &*m.pools[index / StatusClass::ALL.len()]), ("cause", cause)],
                    value.load(Ordering::Relaxed),
                )
            }),
        )?;
        encode_counters(
            e,
            "switchyard_same_lane_retries",
            "Tries again on the same lane after a transient failure (failover.retries), by lane and the failure.",
            m.retries.iter().enumerate().map(|(index, value)| {
                let cause = StatusClass::ALL[index % StatusClass::ALL.len()].as_str();
                (
                    vec![("lane", &*m.lanes[index / StatusClass::ALL.len()]), ("cause", cause)],
                    value.load(Ordering::Relaxed),
                )
            }),
        )?;
        encode_counters(
            e,
            "switchyard_stream_continuations",
            "Streams that broke after their first content in pools that continue them (failover.stream_failure: continue), by what became of them.",
            m.continuations.iter().enumerate().map(|(index, value)| {
                (vec![("outcome", ContinuationOutcome::ALL[index].as_str())], value.load(Ordering::Relaxed))
            }),
        )?;
        encode_counters(
            e,
            "switchyard_guardrail_decisions",
            "Guardrail decisions, by policy, rule, action and direction (never the matched text).",
            m.guardrails.iter().enumerate().map(|(index, value)| {
                let (policy, rule, action) = &m.guardrail_rules[index / 2];
                let direction = if index % 2 == 0 { "request" } else { "response" };
                (
                    vec![("policy", &**policy), ("rule", &**rule), ("action", *action), ("direction", direction)],
                    value.load(Ordering::Relaxed),
                )
            }),
        )?;
        encode_counters(
            e,
            "switchyard_cache_lookups",
            "Response cache lookups in pools that cache (pools.<p>.cache), by pool and outcome.",
            m.cache.iter().enumerate().map(|(index, value)| {
                let outcome = CacheOutcome::ALL[index % CacheOutcome::ALL.len()].as_str();
                (
                    vec![("pool", &*m.pools[index / CacheOutcome::ALL.len()]), ("outcome", outcome)],
                    value.load(Ordering::Relaxed),
                )
            }),
        )?;
        encode_counters(
            e,
            "switchyard_cache_saved_nano_usd",
            "What response cache hits saved, by pool, in nano-USD at the serving lane's price.",
            m.cache_saved
                .iter()
                .enumerate()
                .map(|(index, value)| (vec![("pool", &*m.pools[index])], value.load(Ordering::Relaxed))),
        )?;
        encode_counters(
            e,
            "switchyard_hedges",
            "Requests whose first content was late in pools that hedge (pools.<p>.hedge), by pool and what became of them.",
            m.hedges.iter().enumerate().map(|(index, value)| {
                let outcome = HedgeOutcome::ALL[index % HedgeOutcome::ALL.len()].as_str();
                (vec![("pool", &*m.pools[index / HedgeOutcome::ALL.len()]), ("outcome", outcome)], value.load(Ordering::Relaxed))
            }),
        )?;
        encode_counters(
            e,
            "switchyard_thought_signatures",
            "Signed tool calls sent to Gemini lanes, by lane and where the signature came from (the caller's carrier, the gateway's store, or the placeholder Gemini accepts with degraded reasoning).",
            m.signatures.iter().enumerate().map(|(index, value)| {
                let source = SIGNATURE_SOURCES[index % SIGNATURE_SOURCES.len()];
                (vec![("lane", &*m.lanes[index / SIGNATURE_SOURCES.len()]), ("source", source)], value.load(Ordering::Relaxed))
            }),
        )?;
        encode_counters(
            e,
            "switchyard_breaker_trips",
            "Breakers opened, by pool, lane and what opened them.",
            m.trips.iter().enumerate().map(|(index, value)| {
                let (pool, lane) = &m.combos[index / TRIP_KINDS.len()];
                let kind = TRIP_KINDS[index % TRIP_KINDS.len()];
                (vec![("pool", &**pool), ("lane", &**lane), ("disposition", kind)], value.load(Ordering::Relaxed))
            }),
        )?;
        encode_counters(
            e,
            "switchyard_tokens",
            "Tokens served, by lane and kind (input counts cached tokens too).",
            m.tokens.iter().enumerate().map(|(index, value)| {
                let kind = TOKEN_KINDS[index % TOKEN_KINDS.len()];
                (vec![("lane", &*m.lanes[index / TOKEN_KINDS.len()]), ("kind", kind)], value.load(Ordering::Relaxed))
            }),
        )?;
        let protocols = Protocol::ALL.len();
        encode_counters(
            e,
            "switchyard_translations",
            "Requests translated between protocols.",
            m.translations.iter().enumerate().map(|(index, value)| {
                let (from, to) = (Protocol::ALL[index / protocols], Protocol::ALL[index % protocols]);
                (vec![("from", from.as_str()), ("to", to.as_str())], value.load(Ordering::Relaxed))
            }),
        )?;
        encode_counters(
            e,
            "switchyard_translation_dropped",
            "Fields a translation could not carry, by protocols and field.",
            m.dropped.iter().enumerate().map(|(index, value)| {
                let pair = index / Field::ALL.len();
                let (from, to) = (Protocol::ALL[pair / protocols], Protocol::ALL[pair % protocols]);
                let field = Field::ALL[index % Field::ALL.len()].as_str();
                (vec![("from", from.as_str()), ("to", to.as_str()), ("field", field)], value.load(Ordering::Relaxed))
            }),
        )?;
        encode_counters(
            e,
            "switchyard_hook_calls",
            "Routing hook calls, by hook and outcome.",
            m.hook_calls.iter().enumerate().map(|(index, value)| {
                let outcome = HookOutcome::ALL[index % HOOK_OUTCOMES].as_str();
                (vec![("hook", &*m.hooks[index / HOOK_OUTCOMES]), ("outcome", outcome)], value.load(Ordering::Relaxed))
            }),
        )?;
        live(&gateway, e)
    }
}

/// Status codes as label values.
const STATUS_NAMES: [&str; 18] = [
    "200", "400", "401", "403", "404", "405", "408", "413", "415", "422", "429", "431", "499", "500", "502", "503",
    "504", "529",
];

/// Gauges and counters of live state, read at scrape time.
fn live(gateway: &Gateway, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let now = tokio::time::Instant::now().into_std();
    let mut breakers = Vec::new();
    for pool in &gateway.pools {
        for (member, &lane) in pool.members.iter().enumerate() {
            let open = !pool.breaker(member).is_usable(now);
            breakers.push((
                vec![("pool", &*pool.name), ("lane", &*gateway.lanes[lane].name)],
                if open { 1.0 } else { 0.0 },
            ));
        }
    }
    encode_gauges(
        e,
        "switchyard_breaker_open",
        "1 while a lane's breaker in a pool keeps traffic away (open, trial in flight, or resting after a rate limit).",
        breakers.into_iter(),
    )?;
    // Session affinity: pins held and pins that moved lane, per pool with affinity.
    let affine = || gateway.pools.iter().filter(|pool| pool.affinity.is_some() && !pool.implicit);
    encode_gauges(
        e,
        "switchyard_session_pins",
        "Sessions (and prompt prefixes) remembered with their lane, per pool (an expired pin goes when next read or evicted).",
        affine().map(|pool| (vec![("pool", &*pool.name)], pool.sessions.len() as f64)),
    )?;
    encode_counters(
        e,
        "switchyard_session_moves",
        "Pinned sessions whose lane changed (the sum of every session's switch count), per pool.",
        affine().map(|pool| (vec![("pool", &*pool.name)], pool.session_moves.load(Ordering::Relaxed))),
    )?;
    encode_gauges(
        e,
        "switchyard_in_flight",
        "Requests in flight per lane.",
        gateway.lanes.iter().map(|lane| (vec![("lane", &*lane.name)], lane.in_flight.load(Ordering::Relaxed) as f64)),
    )?;
    if let Some(listener) = gateway.listener_stats.get() {
        encode_gauges(
            e,
            "switchyard_listener_connections",
            "Connections open on the data listener.",
            std::iter::once((Vec::new(), listener.open.load(Ordering::Relaxed) as f64)),
        )?;
        encode_counters(
            e,
            "switchyard_listener_accepted",
            "Connections accepted on the data listener.",
            std::iter::once((Vec::new(), listener.accepted.load(Ordering::Relaxed))),
        )?;
        encode_counters(
            e,
            "switchyard_listener_refused",
            "Connections and requests refused as overload on the data listener, by what was full.",
            [
                (vec![("limit", "connections")], listener.refused_connections.load(Ordering::Relaxed)),
                (vec![("limit", "in_flight")], listener.refused_requests.load(Ordering::Relaxed)),
            ]
            .into_iter(),
        )?;
    }
    if let Some(tracer) = &gateway.telemetry.tracer {
        let stats = &tracer.stats;
        encode_counters(
            e,
            "switchyard_trace_spans",
            "Spans handed to the OTLP exporter, by what became of them.",
            [
                (vec![("result", "exported")], stats.exported.load(Ordering::Relaxed)),
                (vec![("result", "dropped")], stats.dropped.load(Ordering::Relaxed)),
            ]
            .into_iter(),
        )?;
        encode_counters(
            e,
            "switchyard_trace_export_failures",
            "OTLP exports that failed (their spans are dropped).",
            std::iter::once((Vec::new(), stats.failed_exports.load(Ordering::Relaxed))),
        )?;
    }
    if let Some(sinks) = &gateway.telemetry.sinks {
        let stats = &sinks.stats;
        encode_counters(
            e,
            "switchyard_request_log_records",
            "Request-log records, by sink and what became of them.",
            [
                (vec![("sink", "file"), ("result", "written")], stats.file_written.load(Ordering::Relaxed)),
                (vec![("sink", "file"), ("result", "dropped")], stats.file_dropped.load(Ordering::Relaxed)),
                (vec![("sink", "webhook"), ("result", "written")], stats.webhook_delivered.load(Ordering::Relaxed)),
                (vec![("sink", "webhook"), ("result", "dropped")], stats.webhook_dropped.load(Ordering::Relaxed)),
            ]
            .into_iter(),
        )?;
    }
    if let Some(alerts) = &gateway.telemetry.alerts {
        use switchyard_telemetry::alert::AlertKind;
        let stats = &alerts.stats;
        let outcomes = [
            ("sent", &stats.sent),
            ("deduplicated", &stats.deduplicated),
            ("dropped", &stats.dropped),
            ("failed", &stats.failed),
            ("silenced", &stats.silenced),
        ];
        encode_counters(
            e,
            "switchyard_alerts",
            "Alerts raised, by kind and what became of them.",
            outcomes.into_iter().flat_map(|(outcome, counts)| {
                AlertKind::ALL.iter().zip(counts.iter()).map(move |(kind, n)| {
                    (vec![("kind", kind.as_str()), ("outcome", outcome)], n.load(Ordering::Relaxed))
                })
            }),
        )?;
        encode_gauges(
            e,
            "switchyard_alerts_open",
            "Alerts firing now.",
            std::iter::once((Vec::new(), alerts.open().len() as f64)),
        )?;
    }
    crate::reconcile::encode_metrics(gateway, e)?;
    if let Some(governance) = &gateway.governance {
        switchyard_state::governance::encode_metrics(governance, e)?;
        if let Some(receipts) = &governance.receipts {
            let stats = &receipts.stats;
            encode_counters(
                e,
                "switchyard_receipts",
                "Receipts of settled requests, by what became of them.",
                [
                    (vec![("result", "written")], stats.written.load(Ordering::Relaxed)),
                    (vec![("result", "dropped")], stats.dropped.load(Ordering::Relaxed)),
                    (vec![("result", "failed")], stats.errors.load(Ordering::Relaxed)),
                ]
                .into_iter(),
            )?;
        }
    }
    Ok(())
}

/// A registry that scrapes `gateway`.
pub fn registry(gateway: &Arc<Gateway>) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape { gateway: Arc::downgrade(gateway) }));
    registry
}

/// The Prometheus text of `registry`.
pub fn render(registry: &Registry) -> String {
    let mut out = String::with_capacity(16 << 10);
    if prometheus_client::encoding::prometheus_text::encode(&mut out, registry).is_err() {
        out.clear();
    }
    out
}

/// Starts posting the scrape's series over OTLP when the config exports
/// there (and metrics are on): it ends with the gateway, and a reload
/// starts the next one.
pub fn spawn_export(gateway: &Arc<Gateway>) {
    let Some(otlp) = gateway.config.telemetry.otlp.as_ref().filter(|_| gateway.metrics().is_some()) else { return };
    let to = switchyard_telemetry::trace::Collector::new(otlp.metrics_url.clone(), otlp);
    let resource = switchyard_telemetry::trace::Resource::of(otlp);
    let weak = Arc::downgrade(gateway);
    let render_now = move || weak.upgrade().map(|gateway| render(&registry(&gateway)));
    let client = gateway.hooks.clone();
    switchyard_tasks::service(
        "otlp metrics",
        switchyard_telemetry::otlp_metrics::export(to, resource, otlp.metrics_interval, client, render_now),
    );
}
