//! The runtime form of a validated config: lanes with their concurrency
//! permits and pre-built header values, pools with their routing state,
//! breakers and counters, and the name table callers address. Built once at
//! boot. A model named directly is served through an implicit one-member
//! pool, so every request goes through the same pool machinery.
//!
//! This crate holds what every stage of the request path and the admin
//! plane read: the [`Gateway`], governance's key cache and counters
//! ([`governance`]), a framed request ([`call`]), session pins
//! ([`sessions`]), console sign-ins ([`sign_ins`]), the audit log's door
//! ([`audit`]) and the seam where a concern joins the path ([`stage`]).

pub mod audit;
pub mod call;
pub mod governance;
pub mod sessions;
pub mod sign_ins;
pub mod stage;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue};
use switchyard_codec::{Codec, Credentials};
use switchyard_config::{
    Adhoc, Affinity, Billing, BreakerPolicy, Config, Endpoint, ErrorMap, Failover, Strategy, Timeouts,
};
use switchyard_governance::money::Price;
use switchyard_health::Breaker;
use switchyard_ir::Protocol;
use switchyard_route::SmoothWeighted;
use tokio::sync::Semaphore;

use crate::sessions::{SessionTable, MAX_SESSIONS};
use switchyard_transport::{HttpTransport, Transport};

/// The address a request's connection came from: a request extension the
/// admin listener sets and the audit log reads.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub std::net::IpAddr);

/// Looks up the codec of a protocol (the registry is injected so this crate
/// depends only on the codec contract, never on the six implementations).
pub type CodecFor = fn(Protocol) -> &'static dyn Codec;

/// A lane: one model on one provider, as the engine uses it.
pub struct Lane {
    /// Config name of the model.
    pub name: Arc<str>,
    /// Config name of its provider.
    pub provider: Arc<str>,
    /// Index of the provider in `config.providers`.
    pub provider_index: usize,
    /// The provider's protocol.
    pub protocol: Protocol,
    /// The model sent upstream.
    pub wire_model: Arc<str>,
    /// Where the provider is.
    pub endpoint: Endpoint,
    /// How calls are signed.
    pub credentials: Credentials,
    /// Auth headers computed once, for schemes that do not sign per request.
    pub static_auth: Option<Vec<(HeaderName, HeaderValue)>>,
    /// The provider's configured extra headers (`providers.<p>.headers`).
    pub extra_headers: Vec<(HeaderName, HeaderValue)>,
    /// The caller's credentials go upstream instead of the lane's.
    pub passthrough_credentials: bool,
    /// Vendor error codes mapped to failure classes.
    pub error_map: ErrorMap,
    /// Concurrency cap, when configured.
    pub permits: Option<Arc<Semaphore>>,
    /// The cap, for `/stats`.
    pub max_concurrent: Option<u32>,
    /// Context window in tokens, when known.
    pub context_window: Option<u64>,
    /// Upstream timeouts.
    pub timeouts: Timeouts,
    /// Billing model.
    pub billing: Billing,
    /// Pre-built `x-switchyard-lane` value.
    pub lane_header: HeaderValue,
    /// Pre-built `x-switchyard-provider` value.
    pub provider_header: HeaderValue,
    /// Requests in flight on this lane.
    pub in_flight: AtomicU64,
    /// Rolling latency to response headers in ms, as `f64` bits (0 = none yet).
    pub latency_ewma: AtomicU64,
    /// Free-form labels.
    pub tags: Vec<Arc<str>>,
    /// Free-form size label.
    pub tier: Option<Arc<str>>,
    /// The transport that reaches this lane's provider.
    pub transport: Arc<dyn Transport>,
    /// A lane of the ad-hoc route (`provider/model` or `provider/*`).
    pub adhoc: bool,
    /// An ad-hoc lane open to any wire model: the caller's path names it.
    pub any_wire_model: bool,
    /// Its rate-card prices, when priced.
    pub price: Option<Price>,
    /// The share of its upstream rate limit left, as the upstream's own
    /// rate-limit headers last said (`f64` bits; `u64::MAX`: never said).
    pub upstream_headroom: AtomicU64,
    /// Whether anything reads the headroom (a `usage` strategy or a gate).
    pub reads_headroom: bool,
}

/// Rate-limit headers vendors send on every answer: (remaining, limit) pairs.
const RATE_HEADERS: [(HeaderName, HeaderName); 4] = [
    (HeaderName::from_static("x-ratelimit-remaining-requests"), HeaderName::from_static("x-ratelimit-limit-requests")),
    (HeaderName::from_static("x-ratelimit-remaining-tokens"), HeaderName::from_static("x-ratelimit-limit-tokens")),
    (
        HeaderName::from_static("anthropic-ratelimit-requests-remaining"),
        HeaderName::from_static("anthropic-ratelimit-requests-limit"),
    ),
    (
        HeaderName::from_static("anthropic-ratelimit-tokens-remaining"),
        HeaderName::from_static("anthropic-ratelimit-tokens-limit"),
    ),
];

impl Lane {
    /// The share of its upstream rate limit left, when the upstream says.
    pub fn upstream_headroom(&self) -> Option<f64> {
        let bits = self.upstream_headroom.load(Ordering::Relaxed);
        (bits != u64::MAX).then(|| f64::from_bits(bits))
    }

    /// Reads the upstream's rate-limit headers (OpenAI's `x-ratelimit-*`,
    /// Anthropic's `anthropic-ratelimit-*`): the least share left.
    pub fn record_headroom(&self, headers: &http::HeaderMap) {
        if !self.reads_headroom {
            return;
        }
        let number = |name: &HeaderName| headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok();
        let least = RATE_HEADERS
            .iter()
            .filter_map(|(remaining, limit)| {
                let (remaining, limit) = (number(remaining)?, number(limit)?);
                (limit > 0.0).then(|| (remaining / limit).clamp(0.0, 1.0))
            })
            .reduce(f64::min);
        if let Some(share) = least {
            self.upstream_headroom.store(share.to_bits(), Ordering::Relaxed);
        }
    }

    /// Weight of the newest sample in the latency average.
    const EWMA_ALPHA: f64 = 0.3;

    /// The rolling latency, once measured.
    pub fn latency_ms(&self) -> Option<f64> {
        let bits = self.latency_ewma.load(Ordering::Relaxed);
        (bits != 0).then(|| f64::from_bits(bits))
    }

    /// Folds a new latency sample into the rolling average.
    pub fn record_latency(&self, sample: Duration) {
        let sample = sample.as_secs_f64() * 1000.0;
        // A lost race only drops one sample from the average: no CAS loop needed.
        let next = match self.latency_ms() {
            None => sample,
            Some(average) => average + Lane::EWMA_ALPHA * (sample - average),
        };
        self.latency_ewma.store(next.max(f64::MIN_POSITIVE).to_bits(), Ordering::Relaxed);
    }
}

/// Per (pool, lane) counters for `/stats`.
#[derive(Debug, Default)]
pub struct Counters {
    /// Successful responses.
    pub ok: AtomicU64,
    /// Failures that counted against the lane.
    pub upstream_failures: AtomicU64,
    /// Errors that were the caller's.
    pub client_faults: AtomicU64,
    /// Upstream rate limits (the lane rested; not failures).
    pub rate_limited: AtomicU64,
}

impl Counters {
    /// Adds one to `counter`.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Carries `before`'s counts over (a config reload).
    fn copy_from(&self, before: &Counters) {
        for (to, from) in [
            (&self.ok, &before.ok),
            (&self.upstream_failures, &before.upstream_failures),
            (&self.client_faults, &before.client_faults),
            (&self.rate_limited, &before.rate_limited),
        ] {
            to.store(from.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }
}

/// A pool's routing state.
pub struct PoolState {
    /// Config name (a model's name for implicit pools).
    pub name: Arc<str>,
    /// True for the one-member pool of a model named directly.
    pub implicit: bool,
    /// Lane index of each member.
    pub members: Vec<usize>,
    /// Weight of each member.
    pub weights: Vec<u32>,
    /// Failover bounds.
    pub failover: Failover,
    /// Fallback pools (indexes).
    pub fallback: Vec<usize>,
    /// How long to wait for a permit when every member is at its cap.
    pub queue_timeout: Duration,
    /// One breaker per member; locks are held briefly, never across `.await`.
    pub breakers: Vec<Mutex<Breaker>>,
    /// The breakers' tuning.
    pub policy: BreakerPolicy,
    /// One set of counters per member.
    pub counters: Vec<Counters>,
    /// SWRR state; the lock is held only for the pick.
    pub weighted: Mutex<SmoothWeighted>,
    /// Ordering strategy.
    pub strategy: Strategy,
    /// The pool's own gates (indexes into `config.hooks`).
    pub gates: Vec<usize>,
    /// Session affinity settings.
    pub affinity: Option<Affinity>,
    /// Session pins (empty without affinity).
    pub sessions: Arc<SessionTable>,
    /// Routing counters per policy.
    pub routing: Mutex<HashMap<Arc<str>, RouteCounters>>,
    /// Sessions moved off their pinned lane.
    pub affinity_switches: AtomicU64,
    /// The dearest prices among the lanes a request may reach through this
    /// pool (fallbacks included): what admission reserves at.
    pub price_ceiling: Price,
    /// A lane the pool may reach that has no price: a key with a USD
    /// budget cannot use the pool (what that lane serves would cost nothing).
    pub unpriced: Option<Arc<str>>,
}

/// Per-policy routing counters of a pool.
#[derive(Debug, Default, Clone, Copy)]
pub struct RouteCounters {
    /// Requests ordered by this policy.
    pub selections: u64,
    /// Requests the policy rejected.
    pub rejections: u64,
}

impl PoolState {
    /// A pool with the weighted floor, no gates and default affinity.
    #[expect(clippy::too_many_arguments, reason = "one constructor for configured and implicit pools")]
    fn new(
        name: Arc<str>,
        implicit: bool,
        members: Vec<(usize, u32)>,
        failover: Failover,
        fallback: Vec<usize>,
        policy: BreakerPolicy,
        queue_timeout: Duration,
        epoch: Instant,
    ) -> PoolState {
        PoolState {
            name,
            implicit,
            weights: members.iter().map(|m| m.1).collect(),
            breakers: members.iter().map(|_| Mutex::new(Breaker::new(policy, epoch))).collect(),
            policy,
            counters: members.iter().map(|_| Counters::default()).collect(),
            weighted: Mutex::new(SmoothWeighted::new(members.len())),
            members: members.iter().map(|m| m.0).collect(),
            failover,
            fallback,
            queue_timeout,
            strategy: Strategy::Weighted,
            gates: Vec::new(),
            affinity: None,
            sessions: Arc::new(SessionTable::new(Duration::ZERO, 1)),
            routing: Mutex::new(HashMap::new()),
            affinity_switches: AtomicU64::new(0),
            price_ceiling: Price::default(),
            unpriced: None,
        }
    }

    /// The breaker of member `member`.
    pub fn breaker(&self, member: usize) -> MutexGuard<'_, Breaker> {
        self.breakers[member].lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Everything the request path reads, built once.
pub struct Gateway {
    /// The validated config.
    pub config: Config,
    /// The codec registry.
    pub codecs: CodecFor,
    /// Lanes: indexed like `config.models`, then the ad-hoc lanes.
    pub lanes: Vec<Lane>,
    /// Configured pools (indexed like `config.pools`), then one implicit
    /// pool per lane (models, then ad-hoc lanes).
    pub pools: Vec<PoolState>,
    /// Caller-visible names → pool index.
    pub names: HashMap<Arc<str>, usize>,
    /// The client for external routing hooks (SSRF-guarded).
    pub hooks: switchyard_transport::hooks::HookClient,
    /// Keys, budgets, limits and the ledger (`None`: an open gateway with
    /// nothing to account).
    pub governance: Option<Arc<crate::governance::Governance>>,
    /// The request path's counters, laid out for this config.
    pub metrics: switchyard_telemetry::metrics::Metrics,
    /// Metrics switch, access log, traces and sinks (shared with the
    /// gateway a reload replaces: its exporters keep running).
    pub telemetry: Arc<switchyard_telemetry::Telemetry>,
    /// The data listener's counters, once it runs (for `/metrics`).
    pub listener_stats: std::sync::OnceLock<Arc<switchyard_telemetry::ListenerStats>>,
    /// What reloads this gateway's config, when the binary runs one.
    pub reloader: std::sync::OnceLock<std::sync::Weak<dyn ConfigReload>>,
    /// The fleet's breaker channel (`storage.redis_url`).
    pub fleet_state: Option<Arc<switchyard_fleet::shared::FleetState>>,
    /// The console's signed-in sessions (kept across reloads).
    pub sign_ins: Arc<crate::sign_ins::SignIns>,
    /// Sections the file (`config.source`) changes that keep their running
    /// values until a restart (set by a reload).
    pub restart_pending: Vec<&'static str>,
    /// The concerns that join the request path ([`stage::Stage`]), in order.
    pub stages: Vec<std::sync::Arc<dyn stage::Stage>>,
}

/// Reloads the config of the process this gateway serves (the binary's
/// reloader, `reload::Reloader`): the admin API and `/stats` reach it
/// through this, so they need not know how a reload is done.
pub trait ConfigReload: Send + Sync {
    /// Reads the file again and serves it: what was done, or every problem
    /// (the running config keeps serving).
    fn reload(
        &self,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<serde_json::Value, Vec<switchyard_config::Issue>>> + Send + '_>,
    >;
    /// Reloads done and refused.
    fn counts(&self) -> (u64, u64);
}

impl switchyard_fleet::shared::Breakers for Gateway {
    fn open_remotely(&self, pool: &str, lane: &str, until: Instant, reason: &str) {
        if let Some((pool, member)) = self.member(pool, lane) {
            self.pools[pool].breaker(member).open_remotely(until, reason);
        }
    }

    fn close_remotely(&self, pool: &str, lane: &str) {
        if let Some((pool, member)) = self.member(pool, lane) {
            self.pools[pool].breaker(member).close_remotely();
        }
    }
}

/// Why a gateway could not be built from a config.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A lane's credentials cannot be used by its protocol.
    #[error("model `{model}`: {source}")]
    Credentials {
        /// The lane.
        model: String,
        /// Why.
        source: switchyard_codec::AuthError,
    },
    /// A config name cannot go in a header.
    #[error("name `{0}` cannot be sent in a response header; use printable ASCII")]
    HeaderName(String),
}

impl Gateway {
    /// Builds the runtime state with pooled HTTP transports, one per
    /// distinct provider connect timeout (connections are pooled per host
    /// within each).
    pub fn new(config: Config, codecs: CodecFor) -> Result<Gateway, BuildError> {
        let mut transports: Vec<(Duration, Arc<dyn Transport>)> = Vec::new();
        for provider in &config.providers {
            if !transports.iter().any(|(connect, _)| *connect == provider.timeouts.connect) {
                let transport: Arc<dyn Transport> =
                    Arc::new(HttpTransport::with_connect_timeout(provider.timeouts.connect));
                transports.push((provider.timeouts.connect, transport));
            }
        }
        let connects: Vec<Duration> = config.providers.iter().map(|p| p.timeouts.connect).collect();
        Gateway::build(config, codecs, |provider| {
            transports
                .iter()
                .find(|(connect, _)| Some(connect) == connects.get(provider))
                .map_or_else(|| Arc::new(HttpTransport::new()) as Arc<dyn Transport>, |(_, t)| t.clone())
        })
    }

    /// Builds the runtime state with every lane over `transport` (tests).
    pub fn with_transport(
        config: Config,
        codecs: CodecFor,
        transport: Arc<dyn Transport>,
    ) -> Result<Gateway, BuildError> {
        Gateway::build(config, codecs, |_| transport.clone())
    }

    fn build(
        config: Config,
        codecs: CodecFor,
        transport_for: impl Fn(usize) -> Arc<dyn Transport>,
    ) -> Result<Gateway, BuildError> {
        let epoch = Instant::now();
        let mut lanes = Vec::with_capacity(config.models.len());
        for model in &config.models {
            let mut lane = build_lane(&config, model.provider, &model.name, codecs, transport_for(model.provider))?;
            lane.wire_model = model.wire_model.clone();
            lane.permits = model.max_concurrent.map(|n| Arc::new(Semaphore::new(n as usize)));
            lane.max_concurrent = model.max_concurrent;
            lane.context_window = model.context_window;
            lane.billing = model.billing;
            lane.tags.clone_from(&model.tags);
            lane.tier.clone_from(&model.tier);
            lanes.push(lane);
        }
        // The ad-hoc route, where a provider opened it: one lane per allowed
        // wire model (`provider/model`), or one lane for any model
        // (`provider/*`, the wire model from the caller's path). Each goes
        // through the same pool machinery as a configured model.
        for (provider, config_provider) in config.providers.iter().enumerate() {
            let names: Vec<(Arc<str>, Option<Arc<str>>)> = match &config_provider.adhoc {
                Adhoc::Off => Vec::new(),
                Adhoc::Any => vec![(Arc::from(format!("{}/*", config_provider.name)), None)],
                Adhoc::Models(models) => models
                    .iter()
                    .map(|wire| (Arc::from(format!("{}/{wire}", config_provider.name)), Some(wire.clone())))
                    .collect(),
            };
            for (name, wire_model) in names {
                let mut lane = build_lane(&config, provider, &name, codecs, transport_for(provider))?;
                lane.adhoc = true;
                match wire_model {
                    Some(wire_model) => lane.wire_model = wire_model,
                    None => lane.any_wire_model = true,
                }
                lanes.push(lane);
            }
        }
        let mut pools: Vec<PoolState> =
            config
                .pools
                .iter()
                .map(|pool| PoolState {
                    strategy: pool.strategy,
                    gates: gate_chain(&config, &pool.gates),
                    affinity: pool.affinity.clone(),
                    sessions: Arc::new(pool.affinity.as_ref().map_or_else(
                        || SessionTable::new(Duration::ZERO, 1),
                        |a| SessionTable::new(a.ttl, MAX_SESSIONS),
                    )),
                    ..PoolState::new(
                        pool.name.clone(),
                        false,
                        pool.members.iter().map(|m| (m.model, m.weight)).collect(),
                        pool.failover,
                        pool.fallback.clone(),
                        pool.breaker,
                        pool.queue_timeout,
                        epoch,
                    )
                })
                .collect();
        let mut names = HashMap::new();
        for (index, pool) in config.pools.iter().enumerate() {
            names.insert(pool.name.clone(), index);
        }
        for (index, lane) in lanes.iter().enumerate() {
            names.insert(lane.name.clone(), pools.len());
            let single = Failover { max_hops: 1, ..Failover::default() };
            pools.push(PoolState {
                // Global gates see every request, models named directly included.
                gates: gate_chain(&config, &[]),
                affinity: None,
                ..PoolState::new(
                    lane.name.clone(),
                    true,
                    vec![(index, 1)],
                    single,
                    Vec::new(),
                    BreakerPolicy::default(),
                    Duration::from_secs(30),
                    epoch,
                )
            });
        }
        for index in 0..pools.len() {
            let mut reachable: Vec<usize> = vec![index];
            let mut at = 0;
            while at < reachable.len() {
                let next: Vec<usize> =
                    pools[reachable[at]].fallback.iter().copied().filter(|f| !reachable.contains(f)).collect();
                reachable.extend(next);
                at += 1;
            }
            let prices: Vec<Price> = reachable
                .iter()
                .flat_map(|&pool| pools[pool].members.iter().filter_map(|&lane| lanes[lane].price))
                .collect();
            pools[index].price_ceiling = Price::ceiling(&prices);
            pools[index].unpriced = reachable
                .iter()
                .flat_map(|&pool| pools[pool].members.iter())
                .find(|&&lane| lanes[lane].price.is_none())
                .map(|&lane| lanes[lane].name.clone());
        }
        // Rate headroom is read from replies only where a strategy or a
        // gate uses it (four header lookups per reply otherwise).
        let every_lane = !config.global_hooks.is_empty();
        for pool in &pools {
            if every_lane || pool.strategy.needs().headroom || !pool.gates.is_empty() {
                for &lane in &pool.members {
                    lanes[lane].reads_headroom = true;
                }
            }
        }
        let metrics = switchyard_telemetry::metrics::Metrics::new(
            &pools.iter().map(|p| (p.name.clone(), p.members.clone())).collect::<Vec<_>>(),
            &lanes.iter().map(|l| l.name.clone()).collect::<Vec<_>>(),
            &config.hooks.iter().map(|h| h.name.clone()).collect::<Vec<_>>(),
        );
        let telemetry = Arc::new(switchyard_telemetry::Telemetry::local(&config));
        Ok(Gateway {
            config,
            codecs,
            lanes,
            pools,
            names,
            hooks: switchyard_transport::hooks::HookClient::new(),
            governance: None,
            metrics,
            telemetry,
            listener_stats: std::sync::OnceLock::new(),
            reloader: std::sync::OnceLock::new(),
            fleet_state: None,
            sign_ins: Arc::default(),
            restart_pending: Vec::new(),
            stages: Vec::new(),
        })
    }

    /// The request path's counters, when metrics are on.
    pub fn metrics(&self) -> Option<&switchyard_telemetry::metrics::Metrics> {
        self.telemetry.metrics_on.then_some(&self.metrics)
    }

    /// Starts the exporters and writers the config asks for (traces, sinks).
    pub fn with_telemetry(mut self) -> Gateway {
        self.telemetry = Arc::new(switchyard_telemetry::Telemetry::start(&self.config, &self.hooks));
        self
    }

    /// Writes the access line through `writer` (the binary's log writer),
    /// when the config and the log filter want it. Before the gateway is
    /// shared: later it is a no-op.
    pub fn with_access_lines(
        mut self,
        format: switchyard_telemetry::access::LineFormat,
        writer: Arc<dyn switchyard_telemetry::access::LineWriter>,
    ) -> Gateway {
        if let Some(telemetry) = Arc::get_mut(&mut self.telemetry) {
            telemetry.write_access_lines(format, writer);
        }
        self
    }

    /// Takes over what the running gateway `old` learned and keeps, for a
    /// config reload: governance (keys, counters, the ledger queue),
    /// telemetry and the listener's counters are shared; a lane that still
    /// exists keeps its latency, rate headroom, (same cap) its permits and
    /// (same endpoint and connect timeout) its warm upstream connections; a
    /// pool member that still exists keeps its breaker (under the new
    /// tuning) and counters; a pool whose members are unchanged keeps its
    /// session pins. Metrics are laid out anew for the new config.
    pub fn adopt(mut self, old: &Gateway) -> Gateway {
        self.governance.clone_from(&old.governance);
        self.fleet_state.clone_from(&old.fleet_state);
        self.telemetry = old.telemetry.clone();
        self.sign_ins = old.sign_ins.clone();
        if let Some(stats) = old.listener_stats.get() {
            let _ = self.listener_stats.set(stats.clone());
        }
        for lane in &mut self.lanes {
            let Some(before) = old.lanes.iter().find(|l| l.name == lane.name) else { continue };
            if before.max_concurrent == lane.max_concurrent {
                lane.permits.clone_from(&before.permits);
            }
            // Its warm upstream connections too, when it dials the same way.
            if before.endpoint == lane.endpoint && before.timeouts.connect == lane.timeouts.connect {
                lane.transport = before.transport.clone();
            }
            lane.latency_ewma.store(before.latency_ewma.load(Ordering::Relaxed), Ordering::Relaxed);
            lane.upstream_headroom.store(before.upstream_headroom.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        let lanes = &self.lanes;
        for pool in &mut self.pools {
            let Some(before) = old.pools.iter().find(|p| p.name == pool.name && p.implicit == pool.implicit) else {
                continue;
            };
            let names = |members: &[usize], lanes: &[Lane]| -> Vec<Arc<str>> {
                members.iter().map(|&lane| lanes[lane].name.clone()).collect()
            };
            let now = names(&pool.members, lanes);
            let then = names(&before.members, &old.lanes);
            for (member, name) in now.iter().enumerate() {
                let Some(previous) = then.iter().position(|n| n == name) else { continue };
                let mut breaker = before.breaker(previous).clone();
                breaker.adopt_policy(pool.policy);
                *pool.breaker(member) = breaker;
                pool.counters[member].copy_from(&before.counters[previous]);
            }
            if now == then && pool.affinity == before.affinity {
                pool.sessions = before.sessions.clone();
            }
        }
        self
    }

    /// Shares breaker changes with the fleet (attach it once the gateway is shared).
    pub fn with_fleet_state(mut self, shared: Arc<switchyard_fleet::shared::FleetState>) -> Gateway {
        self.fleet_state = Some(shared);
        self
    }

    /// Adds a concern to the request path, after the ones already there.
    pub fn with_stage(mut self, stage: Arc<dyn stage::Stage>) -> Gateway {
        self.stages.push(stage);
        self
    }

    /// Attaches governance (built after the gateway, since it reads the stores).
    pub fn with_governance(mut self, governance: Arc<crate::governance::Governance>) -> Gateway {
        self.governance = Some(governance);
        self
    }

    /// The pool called `pool` and the position of lane `lane` in it.
    fn member(&self, pool: &str, lane: &str) -> Option<(usize, usize)> {
        let index = self.pools.iter().position(|p| *p.name == *pool)?;
        let member = self.pools[index].members.iter().position(|&l| *self.lanes[l].name == *lane)?;
        Some((index, member))
    }

    /// Every priced lane's price, by name (what governance prices the
    /// ledger's spend with).
    pub fn prices(&self) -> crate::governance::Prices {
        self.lanes.iter().filter_map(|lane| Some((lane.name.clone(), lane.price?))).collect()
    }

    /// The price of lane `name`, for pricing ledger totals.
    pub fn price_of(&self, name: &str) -> Option<Price> {
        self.lanes.iter().find(|lane| &*lane.name == name).and_then(|lane| lane.price)
    }

    /// The codec of `protocol`.
    pub fn codec(&self, protocol: Protocol) -> &'static dyn Codec {
        (self.codecs)(protocol)
    }

    /// Resolves a caller's model or pool name to a pool index.
    pub fn resolve(&self, name: &str) -> Option<usize> {
        self.names.get(name).copied()
    }

    /// Resolves the ad-hoc route `/{provider}/{model}/v1/messages` to the
    /// name of its pool: the allowed `provider/model` lane's, or the
    /// provider's any-model lane's (`provider/*`, sent the wire model the
    /// caller named). `None` when the provider did not open the route to
    /// that model.
    pub fn resolve_adhoc(&self, provider: &str, wire_model: &str) -> Option<Arc<str>> {
        [format!("{provider}/{wire_model}"), format!("{provider}/*")].into_iter().find_map(|name| {
            let pool = self.resolve(&name)?;
            let state = &self.pools[pool];
            state.members.first().filter(|&&lane| state.implicit && self.lanes[lane].adhoc)?;
            Some(self.pools[pool].name.clone())
        })
    }
}

/// A pool's gates in reconcile order: global hooks and the pool's own,
/// by ascending priority, globals first on ties, then config order.
fn gate_chain(config: &Config, own: &[usize]) -> Vec<usize> {
    let mut chain: Vec<usize> = config.global_hooks.iter().chain(own).copied().collect();
    chain.sort_by_key(|&hook| (config.hooks[hook].priority, !config.hooks[hook].global));
    chain
}

/// A lane on provider `provider` named `name`, with no model-specific settings yet.
fn build_lane(
    config: &Config,
    provider_index: usize,
    name: &Arc<str>,
    codecs: CodecFor,
    transport: Arc<dyn Transport>,
) -> Result<Lane, BuildError> {
    let provider = &config.providers[provider_index];
    let credentials = provider.auth.clone();
    let mut extra_headers = Vec::with_capacity(provider.headers.len());
    for (name, value) in &provider.headers {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| BuildError::HeaderName(name.clone()))?;
        let value = HeaderValue::from_str(value).map_err(|_| BuildError::HeaderName(name.to_string()))?;
        extra_headers.push((name, value));
    }
    // Static schemes are computed once; SigV4 and caller keys sign every request.
    let static_auth = if matches!(credentials, Credentials::Aws { .. }) || provider.passthrough_credentials {
        None
    } else {
        let outbound = switchyard_codec::Outbound { method: "POST", url: "", body: &[], time: std::time::UNIX_EPOCH };
        Some(
            codecs(provider.protocol)
                .auth_headers(&credentials, &outbound)
                .map_err(|source| BuildError::Credentials { model: name.to_string(), source })?,
        )
    };
    let header = |text: &str| HeaderValue::from_str(text).map_err(|_| BuildError::HeaderName(text.to_owned()));
    Ok(Lane {
        name: name.clone(),
        provider: provider.name.clone(),
        provider_index,
        protocol: provider.protocol,
        wire_model: name.clone(),
        endpoint: provider.endpoint.clone(),
        credentials,
        static_auth,
        extra_headers,
        passthrough_credentials: provider.passthrough_credentials,
        error_map: provider.error_map.clone(),
        permits: None,
        max_concurrent: None,
        context_window: None,
        timeouts: provider.timeouts,
        billing: Billing::PayAsYouGo,
        lane_header: header(name)?,
        provider_header: header(&provider.name)?,
        in_flight: AtomicU64::new(0),
        latency_ewma: AtomicU64::new(0),
        tags: Vec::new(),
        tier: None,
        transport,
        adhoc: false,
        any_wire_model: false,
        upstream_headroom: AtomicU64::new(u64::MAX),
        reads_headroom: false,
        // An ad-hoc lane is priced as itself, else by its provider's `provider/*` row.
        price: config.rate_card.get(name).or_else(|| config.rate_card.get(&*format!("{}/*", provider.name))).map(
            |rate| Price {
                input_utok: rate.input_utok,
                output_utok: rate.output_utok,
                cache_read_utok: rate.cache_read_utok,
                cache_write_utok: rate.cache_write_utok,
            },
        ),
    })
}
