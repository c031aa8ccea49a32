//! Prometheus metrics. Every series the request path touches is a slot in a
//! dense array of atomics, laid out at boot from the config (pools, lanes,
//! protocols) and fixed tables (statuses, failure classes, fields): the hot
//! path indexes, it never looks a label up, and no label value ever comes
//! from caller input. `admin::scrape` writes them, with the live
//! state read at scrape time, as Prometheus text.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use switchyard_health::StatusClass;
use switchyard_ir::{Field, Protocol};

/// Statuses counted by value; anything else is `other`.
pub const STATUSES: [u16; 18] =
    [200, 400, 401, 403, 404, 405, 408, 413, 415, 422, 429, 431, 499, 500, 502, 503, 504, 529];
/// Slots per status: the named ones and `other`.
pub const STATUS_SLOTS: usize = STATUSES.len() + 1;
pub const INGRESSES: usize = Protocol::ALL.len();
/// Attempt outcomes: `ok`, then the failure classes.
pub const OUTCOMES: usize = StatusClass::ALL.len() + 1;
/// Token kinds: the totals, then the parts of them billed apart.
pub const TOKEN_KINDS: [&str; 10] = [
    "input",
    "output",
    "cache_read",
    "cache_write",
    "cache_write_1h",
    "reasoning",
    "audio_input",
    "audio_output",
    "image_input",
    "image_output",
];
/// Where a Gemini lane's tool-call signature came from: the caller's own
/// carrier, the gateway's store, or the documented placeholder.
pub const SIGNATURE_SOURCES: [&str; 3] = ["carried", "restored", "placeholder"];
/// What became of a stream that broke after its first content, in a pool
/// that continues streams (`failover.stream_failure: continue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContinuationOutcome {
    /// Another lane went on.
    Recovered,
    /// It could not be continued (a tool call or reasoning had begun, no
    /// text yet, or its continuations were spent).
    NotEligible,
    /// No lane would go on: the caller got the in-stream error.
    Failed,
    /// The lane that went on continued where the answer stopped (it began
    /// with the anchor, or by prefill).
    Extended,
    /// The lane that went on started the answer again: the repeat was
    /// skipped, the rest went on.
    Restarted,
    /// The lane that went on neither continued nor repeated the answer:
    /// nothing of it reached the caller, who got the in-stream error.
    Unrelated,
}

impl ContinuationOutcome {
    /// Every outcome, in counter order.
    pub const ALL: [ContinuationOutcome; 6] = [
        ContinuationOutcome::Recovered,
        ContinuationOutcome::NotEligible,
        ContinuationOutcome::Failed,
        ContinuationOutcome::Extended,
        ContinuationOutcome::Restarted,
        ContinuationOutcome::Unrelated,
    ];

    /// The label.
    pub fn as_str(self) -> &'static str {
        match self {
            ContinuationOutcome::Recovered => "recovered",
            ContinuationOutcome::NotEligible => "not_eligible",
            ContinuationOutcome::Failed => "failed",
            ContinuationOutcome::Extended => "extended",
            ContinuationOutcome::Restarted => "restarted",
            ContinuationOutcome::Unrelated => "unrelated",
        }
    }
}
/// What became of a request whose first content was late in a pool that
/// hedges (`pools.<p>.hedge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HedgeOutcome {
    /// The first attempt brought content first; the hedge was cancelled.
    PrimaryWon,
    /// The second attempt brought content first; the first was cancelled.
    HedgeWon,
    /// Neither brought content: the request moved on.
    Failed,
    /// No second attempt started: the pool's share of extra attempts was
    /// spent, or no other lane was free.
    Denied,
}

impl HedgeOutcome {
    /// Every outcome, in counter order.
    pub const ALL: [HedgeOutcome; 4] =
        [HedgeOutcome::PrimaryWon, HedgeOutcome::HedgeWon, HedgeOutcome::Failed, HedgeOutcome::Denied];

    /// The label.
    pub fn as_str(self) -> &'static str {
        match self {
            HedgeOutcome::PrimaryWon => "primary_won",
            HedgeOutcome::HedgeWon => "hedge_won",
            HedgeOutcome::Failed => "failed",
            HedgeOutcome::Denied => "denied",
        }
    }
}
/// What a caching pool's response cache did for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Answered from the cache.
    Hit,
    /// Not there: routed, and stored if it ends whole.
    Miss,
    /// The caller asked not to use it.
    Bypass,
}

impl CacheOutcome {
    /// Every outcome, in counter order.
    pub const ALL: [CacheOutcome; 3] = [CacheOutcome::Hit, CacheOutcome::Miss, CacheOutcome::Bypass];

    /// The label.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheOutcome::Hit => "hit",
            CacheOutcome::Miss => "miss",
            CacheOutcome::Bypass => "bypass",
        }
    }
}
/// What opened a breaker.
pub const TRIP_KINDS: [&str; 2] = ["transient", "hard_down"];
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
    /// Every outcome, in counter order.
    pub const ALL: [HookOutcome; 6] = [
        HookOutcome::Ok,
        HookOutcome::Timeout,
        HookOutcome::Transport,
        HookOutcome::Status,
        HookOutcome::TooLarge,
        HookOutcome::InvalidReply,
    ];

    /// The outcome of a call that failed with `error`.
    pub fn of(error: &switchyard_transport::hooks::HookError) -> HookOutcome {
        use switchyard_transport::hooks::HookError;
        match error {
            HookError::Timeout(_) => HookOutcome::Timeout,
            HookError::Transport(_) => HookOutcome::Transport,
            HookError::Status(_) => HookOutcome::Status,
            HookError::TooLarge => HookOutcome::TooLarge,
        }
    }

    /// The label.
    pub fn as_str(self) -> &'static str {
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

pub const HOOK_OUTCOMES: usize = HookOutcome::ALL.len();

/// Histogram bounds in seconds: sub-millisecond gateway time up to
/// ten-minute streams.
pub const BUCKETS: [f64; 20] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    600.0, 1200.0,
];

/// A histogram of durations: counts per bucket, the count and the sum (µs).
#[derive(Debug, Default)]
pub struct Histogram {
    pub buckets: [AtomicU64; BUCKETS.len()],
    pub count: AtomicU64,
    pub sum_us: AtomicU64,
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
    pub combo: usize,
    /// Index of the pool: 0 is `-`.
    pub pool: usize,
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
    pub combos: Vec<(Arc<str>, Arc<str>)>,
    /// Pool labels; 0 is `-`.
    pub pools: Vec<Arc<str>>,
    /// Per gateway pool: the index of its (pool, `-`) combo; its members follow.
    pub pool_base: Vec<usize>,
    /// Lane labels, indexed like `Gateway::lanes`.
    pub lanes: Vec<Arc<str>>,
    pub requests: Box<[AtomicU64]>,
    pub duration: Box<[Histogram]>,
    pub ttfb: Box<[Histogram]>,
    pub attempts: Box<[AtomicU64]>,
    /// Time from sending to a lane's 2xx response head, by lane.
    pub upstream_latency: Box<[Histogram]>,
    pub failovers: Box<[AtomicU64]>,
    /// Same-lane retries, by lane and the failure retried.
    pub retries: Box<[AtomicU64]>,
    /// Signed calls sent to Gemini lanes, by lane and [`SIGNATURE_SOURCES`].
    pub signatures: Box<[AtomicU64]>,
    /// Streams that broke mid-answer in pools that continue them, by
    /// [`ContinuationOutcome`].
    pub continuations: Box<[AtomicU64]>,
    /// Late first tokens in hedging pools, by pool and [`HedgeOutcome`].
    pub hedges: Box<[AtomicU64]>,
    /// Response cache lookups, by pool and [`CacheOutcome`].
    pub cache: Box<[AtomicU64]>,
    /// What cache hits saved, by pool (nano-USD).
    pub cache_saved: Box<[AtomicU64]>,
    pub trips: Box<[AtomicU64]>,
    pub tokens: Box<[AtomicU64]>,
    pub translations: Box<[AtomicU64]>,
    pub dropped: Box<[AtomicU64]>,
    pub hooks: Vec<Arc<str>>,
    pub hook_calls: Box<[AtomicU64]>,
    /// Every guardrail rule: (policy, rule, action).
    pub guardrail_rules: Vec<(Arc<str>, Arc<str>, &'static str)>,
    /// Guardrail decisions, by rule and direction (request, response).
    pub guardrails: Box<[AtomicU64]>,
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
            upstream_latency: histograms(lanes.len()),
            failovers: zeros(pool_labels.len() * StatusClass::ALL.len()),
            retries: zeros(lanes.len() * StatusClass::ALL.len()),
            signatures: zeros(lanes.len() * SIGNATURE_SOURCES.len()),
            continuations: zeros(ContinuationOutcome::ALL.len()),
            hedges: zeros(pool_labels.len() * HedgeOutcome::ALL.len()),
            cache: zeros(pool_labels.len() * CacheOutcome::ALL.len()),
            cache_saved: zeros(pool_labels.len()),
            trips: zeros(combos.len() * TRIP_KINDS.len()),
            tokens: zeros(lanes.len() * TOKEN_KINDS.len()),
            translations: zeros(protocols * protocols),
            dropped: zeros(protocols * protocols * Field::ALL.len()),
            hook_calls: zeros(hooks.len() * HOOK_OUTCOMES),
            hooks: hooks.to_vec(),
            guardrail_rules: Vec::new(),
            guardrails: zeros(0),
            lanes: lanes.to_vec(),
            combos,
            pools: pool_labels,
            pool_base,
        }
    }

    /// The same, with counters for every guardrail rule of `catalog`.
    pub fn with_guardrails(mut self, catalog: Vec<(Arc<str>, Arc<str>, &'static str)>) -> Metrics {
        self.guardrails = zeros(catalog.len() * 2);
        self.guardrail_rules = catalog;
        self
    }

    /// A guardrail rule (`rule`: its catalog id) decided on a request
    /// (`response`: false) or a reply.
    pub fn guardrail(&self, rule: usize, response: bool) {
        add(&self.guardrails, rule * 2 + usize::from(response), 1);
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
        let outcome = failure.map_or(0, |class| 1 + class.index());
        add(&self.attempts, lane * OUTCOMES + outcome, 1);
    }

    /// Lane `lane` answered 2xx `took` after the request was sent.
    pub fn upstream_latency(&self, lane: usize, took: Duration) {
        if let Some(h) = self.upstream_latency.get(lane) {
            h.observe(took);
        }
    }

    /// A request moved on from a failed lane of `pool` because of `cause`.
    pub fn failover(&self, place: Place, cause: StatusClass) {
        let cause = cause.index();
        add(&self.failovers, place.pool * StatusClass::ALL.len() + cause, 1);
    }

    /// A request tried `lane` again after a transient failure of `cause`.
    pub fn retry(&self, lane: usize, cause: StatusClass) {
        add(&self.retries, lane * StatusClass::ALL.len() + cause.index(), 1);
    }

    /// The signed calls of a request sent to Gemini lane `lane`, counted by
    /// where each signature came from ([`SIGNATURE_SOURCES`]' order).
    pub fn signatures(&self, lane: usize, by_source: [u32; 3]) {
        for (source, count) in by_source.into_iter().enumerate() {
            if count > 0 {
                add(&self.signatures, lane * SIGNATURE_SOURCES.len() + source, u64::from(count));
            }
        }
    }

    /// A stream that broke mid-answer came to `outcome`.
    pub fn continuation(&self, outcome: ContinuationOutcome) {
        add(&self.continuations, outcome as usize, 1);
    }

    /// A late first token in a hedging pool came to `outcome`.
    pub fn hedge(&self, place: Place, outcome: HedgeOutcome) {
        add(&self.hedges, place.pool * HedgeOutcome::ALL.len() + outcome as usize, 1);
    }

    /// A caching pool's lookup came to `outcome`.
    pub fn cache(&self, place: Place, outcome: CacheOutcome) {
        add(&self.cache, place.pool * CacheOutcome::ALL.len() + outcome as usize, 1);
    }

    /// A cache hit saved `nano_usd`.
    pub fn cache_saved(&self, place: Place, nano_usd: u64) {
        add(&self.cache_saved, place.pool, nano_usd);
    }

    /// A breaker opened (`hard_down`: at once, for credentials or billing).
    pub fn trip(&self, place: Place, hard_down: bool) {
        add(&self.trips, place.combo * TRIP_KINDS.len() + usize::from(hard_down), 1);
    }

    /// Tokens a lane served.
    pub fn tokens(&self, lane: usize, usage: &switchyard_ir::Usage) {
        let kinds = [
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.cache_write_1h_tokens,
            usage.reasoning_tokens,
            usage.audio_input_tokens,
            usage.audio_output_tokens,
            usage.image_input_tokens,
            usage.image_output_tokens,
        ];
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
