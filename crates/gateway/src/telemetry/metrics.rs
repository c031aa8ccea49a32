//! Prometheus metrics. Every series the request path touches is a slot in a
//! dense array of atomics, laid out at boot from the config (pools, lanes,
//! protocols) and fixed tables (statuses, failure classes, fields): the hot
//! path indexes, it never looks a label up, and no label value ever comes
//! from caller input. Series still at zero are left out of a scrape.
//! Gauges of live state (breakers, in-flight requests, spend, queues) are
//! read at scrape time. `prometheus-client` writes the text format.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use switchyard_health::StatusClass;
use switchyard_ir::{Field, Protocol};

use crate::state::Gateway;

/// Statuses counted by value; anything else is `other`.
const STATUSES: [u16; 18] = [200, 400, 401, 403, 404, 405, 408, 413, 415, 422, 429, 431, 499, 500, 502, 503, 504, 529];
/// Slots per status: the named ones and `other`.
const STATUS_SLOTS: usize = STATUSES.len() + 1;
const INGRESSES: usize = Protocol::ALL.len();
/// Failure classes, for attempt outcomes and failover causes.
pub const CLASSES: [StatusClass; 9] = [
    StatusClass::BadRequest,
    StatusClass::ContextLength,
    StatusClass::Auth,
    StatusClass::Billing,
    StatusClass::RateLimited,
    StatusClass::Overloaded,
    StatusClass::ServerError,
    StatusClass::Timeout,
    StatusClass::Network,
];
/// Attempt outcomes: `ok`, then the failure classes.
const OUTCOMES: usize = CLASSES.len() + 1;
/// Token kinds.
const TOKEN_KINDS: [&str; 4] = ["input", "output", "cache_read", "cache_write"];
/// What opened a breaker.
const TRIP_KINDS: [&str; 2] = ["transient", "hard_down"];
/// What a routing hook call came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookOutcome {
    /// A reply the gate used.
    Ok,
    /// No reply in time.
    Timeout,
    /// No connection, or it failed.
    Transport,
    /// A non-2xx status.
    Status,
    /// A reply over the size cap.
    TooLarge,
    /// A reply the gate could not use.
    InvalidReply,
}

impl HookOutcome {
    const ALL: [HookOutcome; 6] = [
        HookOutcome::Ok,
        HookOutcome::Timeout,
        HookOutcome::Transport,
        HookOutcome::Status,
        HookOutcome::TooLarge,
        HookOutcome::InvalidReply,
    ];

    /// The outcome of a call that failed with `error`.
    pub fn of(error: &crate::hooks::HookError) -> HookOutcome {
        use crate::hooks::HookError;
        match error {
            HookError::Timeout(_) => HookOutcome::Timeout,
            HookError::Transport(_) => HookOutcome::Transport,
            HookError::Status(_) => HookOutcome::Status,
            HookError::TooLarge => HookOutcome::TooLarge,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            HookOutcome::Ok => "ok",
            HookOutcome::Timeout => "timeout",
            HookOutcome::Transport => "transport",
            HookOutcome::Status => "status",
            HookOutcome::TooLarge => "too_large",
            HookOutcome::InvalidReply => "invalid_reply",
        }
    }
}

const HOOK_OUTCOMES: usize = HookOutcome::ALL.len();

/// Histogram bounds in seconds: sub-millisecond gateway time up to
/// ten-minute streams.
const BUCKETS: [f64; 20] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    600.0, 1200.0,
];

/// A histogram of durations: counts per bucket, the count and the sum (µs).
#[derive(Debug, Default)]
struct Histogram {
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_us: AtomicU64,
}

impl Histogram {
    fn observe(&self, value: Duration) {
        let seconds = value.as_secs_f64();
        if let Some(bucket) = BUCKETS.iter().position(|bound| seconds <= *bound) {
            self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(value.as_micros() as u64, Ordering::Relaxed);
    }
}

/// Where a request's pool and lane sit in the label table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Place {
    /// Index of the (pool, lane) pair: 0 is (`-`, `-`).
    combo: usize,
    /// Index of the pool: 0 is `-`.
    pool: usize,
}

fn zeros(n: usize) -> Box<[AtomicU64]> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

fn histograms(n: usize) -> Box<[Histogram]> {
    (0..n).map(|_| Histogram::default()).collect()
}

fn add(slots: &[AtomicU64], index: usize, by: u64) {
    if let Some(slot) = slots.get(index) {
        slot.fetch_add(by, Ordering::Relaxed);
    }
}

/// Every counter and histogram of the request path.
#[derive(Debug)]
pub struct Metrics {
    /// (pool, lane) label pairs; 0 is (`-`, `-`).
    combos: Vec<(Arc<str>, Arc<str>)>,
    /// Pool labels; 0 is `-`.
    pools: Vec<Arc<str>>,
    /// Per gateway pool: the index of its (pool, `-`) combo; its members follow.
    pool_base: Vec<usize>,
    /// Lane labels, indexed like `Gateway::lanes`.
    lanes: Vec<Arc<str>>,
    requests: Box<[AtomicU64]>,
    duration: Box<[Histogram]>,
    ttfb: Box<[Histogram]>,
    attempts: Box<[AtomicU64]>,
    failovers: Box<[AtomicU64]>,
    trips: Box<[AtomicU64]>,
    tokens: Box<[AtomicU64]>,
    translations: Box<[AtomicU64]>,
    dropped: Box<[AtomicU64]>,
    hooks: Vec<Arc<str>>,
    hook_calls: Box<[AtomicU64]>,
}

impl Metrics {
    /// The label table of `gateway`'s pools, lanes and hooks.
    pub fn new(pools: &[(Arc<str>, Vec<usize>)], lanes: &[Arc<str>], hooks: &[Arc<str>]) -> Metrics {
        let dash: Arc<str> = Arc::from("-");
        let mut combos = vec![(dash.clone(), dash.clone())];
        let mut pool_labels = vec![dash.clone()];
        let mut pool_base = Vec::with_capacity(pools.len());
        for (name, members) in pools {
            pool_base.push(combos.len());
            pool_labels.push(name.clone());
            combos.push((name.clone(), dash.clone()));
            for &lane in members {
                combos.push((name.clone(), lanes.get(lane).cloned().unwrap_or_else(|| dash.clone())));
            }
        }
        let protocols = Protocol::ALL.len();
        Metrics {
            requests: zeros(combos.len() * INGRESSES * STATUS_SLOTS),
            duration: histograms(pool_labels.len() * INGRESSES),
            ttfb: histograms(pool_labels.len() * INGRESSES),
            attempts: zeros(lanes.len() * OUTCOMES),
            failovers: zeros(pool_labels.len() * CLASSES.len()),
            trips: zeros(combos.len() * TRIP_KINDS.len()),
            tokens: zeros(lanes.len() * TOKEN_KINDS.len()),
            translations: zeros(protocols * protocols),
            dropped: zeros(protocols * protocols * Field::ALL.len()),
            hook_calls: zeros(hooks.len() * HOOK_OUTCOMES),
            hooks: hooks.to_vec(),
            lanes: lanes.to_vec(),
            combos,
            pools: pool_labels,
            pool_base,
        }
    }

    /// The labels of a request that named gateway pool `pool` and was
    /// served (or last tried) by its member `member`.
    pub fn place(&self, pool: Option<usize>, member: Option<usize>) -> Place {
        match pool.and_then(|p| self.pool_base.get(p).map(|base| (p, *base))) {
            None => Place::default(),
            Some((p, base)) => Place { combo: base + member.map_or(0, |m| m + 1), pool: p + 1 },
        }
    }

    /// One request answered.
    pub fn request(&self, place: Place, ingress: Protocol, status: u16, total: Duration, ttfb: Option<Duration>) {
        let status = STATUSES.iter().position(|s| *s == status).unwrap_or(STATUSES.len());
        add(&self.requests, (place.combo * INGRESSES + ingress.index()) * STATUS_SLOTS + status, 1);
        let histogram = place.pool * INGRESSES + ingress.index();
        if let Some(h) = self.duration.get(histogram) {
            h.observe(total);
        }
        if let (Some(ttfb), Some(h)) = (ttfb, self.ttfb.get(histogram)) {
            h.observe(ttfb);
        }
    }

    /// One upstream attempt on lane `lane`: `None` for a success.
    pub fn attempt(&self, lane: usize, failure: Option<StatusClass>) {
        let outcome = failure.map_or(0, |class| 1 + CLASSES.iter().position(|c| *c == class).unwrap_or(0));
        add(&self.attempts, lane * OUTCOMES + outcome, 1);
    }

    /// A request moved on from a failed lane of `pool` because of `cause`.
    pub fn failover(&self, place: Place, cause: StatusClass) {
        let cause = CLASSES.iter().position(|c| *c == cause).unwrap_or(0);
        add(&self.failovers, place.pool * CLASSES.len() + cause, 1);
    }

    /// A breaker opened (`hard_down`: at once, for credentials or billing).
    pub fn trip(&self, place: Place, hard_down: bool) {
        add(&self.trips, place.combo * TRIP_KINDS.len() + usize::from(hard_down), 1);
    }

    /// Tokens a lane served.
    pub fn tokens(&self, lane: usize, usage: &switchyard_ir::Usage) {
        let kinds = [usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens];
        for (kind, count) in kinds.into_iter().enumerate() {
            if count > 0 {
                add(&self.tokens, lane * TOKEN_KINDS.len() + kind, count);
            }
        }
    }

    /// A request translated from `from` to `to`, dropping `dropped`.
    pub fn translation(&self, from: Protocol, to: Protocol, dropped: &[switchyard_ir::Dropped]) {
        let pair = from.index() * Protocol::ALL.len() + to.index();
        add(&self.translations, pair, 1);
        for entry in dropped {
            add(&self.dropped, pair * Field::ALL.len() + entry.field.index(), 1);
        }
    }

    /// A hook call (`hook` indexes `config.hooks`) came to `outcome`.
    pub fn hook_call(&self, hook: usize, outcome: HookOutcome) {
        add(&self.hook_calls, hook * HOOK_OUTCOMES + outcome as usize, 1);
    }
}

/// Writes counter `name` with the series that are not zero.
pub(crate) fn encode_counters<'a>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl Iterator<Item = (Vec<(&'static str, &'a str)>, u64)>,
) -> Result<(), std::fmt::Error> {
    let mut series = series.filter(|(_, value)| *value > 0).peekable();
    if series.peek().is_none() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in series {
        let family = metric.encode_family(&labels)?;
        ConstCounter::new(value).encode(family)?;
    }
    Ok(())
}

/// Writes gauge `name` with every series.
pub(crate) fn encode_gauges<'a>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl Iterator<Item = (Vec<(&'static str, &'a str)>, f64)>,
) -> Result<(), std::fmt::Error> {
    let mut series = series.peekable();
    if series.peek().is_none() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        let family = metric.encode_family(&labels)?;
        ConstGauge::new(value).encode(family)?;
    }
    Ok(())
}

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
        encode_counters(
            e,
            "switchyard_requests",
            "Requests answered, by ingress protocol, pool, lane and status.",
            m.requests.iter().enumerate().map(|(index, value)| {
                let status = index % STATUS_SLOTS;
                let ingress = (index / STATUS_SLOTS) % INGRESSES;
                let combo = index / STATUS_SLOTS / INGRESSES;
                let (pool, lane) = &m.combos[combo];
                (
                    vec![
                        ("ingress", Protocol::ALL[ingress].as_str()),
                        ("pool", &**pool),
                        ("lane", &**lane),
                        ("status", status_label(status)),
                    ],
                    value.load(Ordering::Relaxed),
                )
            }),
        )?;
        let histogram_labels = |index: usize| {
            vec![("ingress", Protocol::ALL[index % INGRESSES].as_str()), ("pool", &*m.pools[index / INGRESSES])]
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
                let label = if outcome == 0 { "ok" } else { CLASSES[outcome - 1].as_str() };
                (vec![("lane", &*m.lanes[index / OUTCOMES]), ("outcome", label)], value.load(Ordering::Relaxed))
            }),
        )?;
        encode_counters(
            e,
            "switchyard_failovers",
            "Requests that moved on from a failed lane, by pool and the failure's class.",
            m.failovers.iter().enumerate().map(|(index, value)| {
                let cause = CLASSES[index % CLASSES.len()].as_str();
                (vec![("pool", &*m.pools[index / CLASSES.len()]), ("cause", cause)], value.load(Ordering::Relaxed))
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
    if let Some(governance) = &gateway.governance {
        crate::governance::encode_metrics(governance, e)?;
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
