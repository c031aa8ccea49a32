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
//! ([`audit`]).

pub mod admin_rate;
pub mod audit;
pub mod call;
pub mod client_secrets;
pub mod clock;
pub mod governance;
pub mod guardrails;
pub mod kept;
mod lane;
pub mod lifecycle;
pub mod mcp;
pub mod oidc;
pub mod pins;
mod pool;
pub mod receipts;
pub mod response_cache;
pub mod retention;
pub mod runs;
pub mod sessions;
pub mod sign_ins;
pub mod signatures;
pub mod sockets;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard_codec::Codec;
use switchyard_config::{Adhoc, BreakerPolicy, Config, Failover};
use switchyard_governance::money::Price;
use switchyard_ir::Protocol;
use tokio::sync::Semaphore;

use crate::sessions::{SessionTable, MAX_SESSIONS};
use switchyard_transport::{HttpTransport, Transport};

/// The address a request's connection came from: a request extension the
/// admin listener sets and the audit log reads.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub std::net::IpAddr);

/// Who the client certificate a request's connection presented (and the
/// CA verified) names: a request extension the data listener sets when
/// `server.tls.client_identity` asks for it.
#[derive(Debug, Clone)]
pub struct ClientName {
    /// Its subject's common name: a key's id or a group's name.
    pub common_name: Arc<str>,
    /// Its whole subject, every attribute in order (`CN=…,O=…`, special
    /// characters escaped): what tells apart the certificates of one
    /// group, each of which owns what it keeps.
    pub subject: Arc<str>,
}

/// Looks up the codec of a protocol (the registry is injected so this crate
/// depends only on the codec contract, never on the six implementations).
pub type CodecFor = fn(Protocol) -> &'static dyn Codec;

/// [`Gateway::codec_for`] over a registry.
pub fn codec_for(codecs: CodecFor, operation: switchyard_ir::Operation, protocol: Protocol) -> &'static dyn Codec {
    let codec = codecs(protocol);
    match operation {
        switchyard_ir::Operation::Completion => codec.completions().unwrap_or(codec),
        _ => codec,
    }
}

use lane::build_lane;
pub use lane::{Counters, Lane, UpstreamUrl};
pub use pool::{Hedging, MemberControl, PoolState, RouteCounters};

/// Everything the request path reads, built once.
pub struct Gateway {
    /// The validated config.
    pub config: Config,
    /// The codec registry.
    pub codecs: CodecFor,
    /// Lanes: indexed like `config.models`, then the ad-hoc lanes.
    pub lanes: Vec<Lane>,
    /// Each provider's raw route (`providers.<p>.passthrough`), indexed like
    /// `config.providers`: a lane of its own (`passthrough:<provider>`, in
    /// no pool) holding what its requests are sent with, as the provider's
    /// lanes send theirs (credentials, the operator's headers, a fetched
    /// token, the transport, the timeouts).
    pub passthrough: Vec<Option<Box<Lane>>>,
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
    /// Console sign-in through `admin.oidc` (kept across reloads that
    /// leave it as it is, with its sign-ins in progress).
    pub oidc: Option<Arc<crate::oidc::OidcClient>>,
    /// Tool-call signatures kept for callers that drop them (kept across
    /// reloads; in governance's store or the fleet's Redis when there is one).
    pub signatures: crate::signatures::Signatures,
    /// Sections the file (`config.source`) changes that keep their running
    /// values until a restart (set by a reload).
    pub restart_pending: Vec<&'static str>,
    /// The groups' run limits (`groups.<g>.runs`); `None` when no group
    /// configures any, and then no request looks for its run.
    pub runs: Option<Arc<runs::RunSpecs>>,
    /// The guardrail screens of pools and groups.
    pub guardrails: guardrails::Guardrails,
    /// The response cache's store, when some pool caches.
    pub response_cache: Option<Arc<response_cache::ResponseCache>>,
    /// What groups keep of their requests' text (`retention:`).
    pub retention: Option<Arc<retention::Retention>>,
    /// The process's phase for `/readyz` (kept across reloads).
    pub lifecycle: Arc<lifecycle::Lifecycle>,
    /// Each admin token's mutation limit (kept across reloads).
    pub admin_rate: Arc<admin_rate::AdminRate>,
    /// Files, stored responses and batch jobs (kept across reloads).
    pub kept: kept::KeptStores,
    /// The MCP gateway behind `/mcp`, when the process runs one (kept
    /// across reloads).
    pub mcp: Option<Arc<dyn mcp::McpHub>>,
    /// The A2A gateway's process state behind `/a2a/{agent}` (agent cards
    /// read, task owners), made by `switchyard-a2a` on the first call to
    /// an agent (never, with no `agents:`) and kept across reloads.
    pub a2a: Arc<std::sync::OnceLock<Box<dyn std::any::Any + Send + Sync>>>,
    /// The long-lived sockets open (kept across reloads).
    pub sockets: Arc<sockets::Sockets>,
    /// The Realtime client secrets minted and alive (kept across reloads).
    pub client_secrets: Arc<client_secrets::ClientSecrets>,
    /// Session pins written behind to a single node's SQLite, so they
    /// outlive a restart (kept across reloads; `None` in a fleet, where
    /// Redis shares them, and without a store).
    pub pins: Option<Arc<pins::KeptPins>>,
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
    /// The gateway serving now (a long-lived socket's next turn runs on
    /// it, as a keep-alive connection's next request does).
    fn serving(&self) -> Arc<Gateway>;
    /// Applies a new version of the config over the API: `text`
    /// validated, recorded as the version after `after` by `author`
    /// (saying `message`) unless another came first, and served. What was
    /// done, and the version made.
    fn apply(
        &self,
        text: String,
        after: i64,
        author: String,
        message: String,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<serde_json::Value, ApplyError>> + Send + '_>>;
}

/// Why a version of the config could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// `config.locked`: the file is the source.
    #[error("the config is locked (config.locked: true): change the file, and reload")]
    Locked,
    /// The text is not a config this gateway can serve.
    #[error("the config is not valid")]
    Invalid(Vec<switchyard_config::Issue>),
    /// The text changes what only the file may (a stdio MCP server's
    /// command, args or env: they run on the host).
    #[error("the config changes what only the config file may")]
    FileOnly(Vec<switchyard_config::Issue>),
    /// Another version came after the one the change was made from.
    #[error("version {newest} came after the one this change was made from; read it and retry")]
    Stale {
        /// The newest version now.
        newest: i64,
    },
    /// The versions' store failed, or there is none (no governance).
    #[error("{0}")]
    Store(String),
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

    /// What another instance read of `lane`'s upstream quota: the share
    /// ranks it here too, and a spent limit rests it in every pool.
    fn quota_remotely(&self, lane: &str, share: f64, fresh_for: Duration, rest_for: Option<Duration>) {
        let Some(index) = self.lanes.iter().position(|l| *l.name == *lane) else { return };
        self.lanes[index].store_headroom(share, fresh_for, std::time::SystemTime::now());
        let Some(rest_for) = rest_for else { return };
        let now = Instant::now();
        for pool in &self.pools {
            for (member, _) in pool.members.iter().enumerate().filter(|(_, &l)| l == index) {
                pool.breaker(member).record_rate_limited(now, Some(rest_for));
            }
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
    /// A guardrail rule the config accepted did not compile.
    #[error("{0}")]
    Guardrail(String),
}

impl Gateway {
    /// The pools a caller names: the configured ones, or (a config without
    /// pools) the models' own, with their indexes.
    pub fn named_pools(&self) -> impl Iterator<Item = (usize, &PoolState)> {
        let configured = self.pools.iter().any(|p| !p.implicit);
        self.pools.iter().enumerate().filter(move |(_, p)| p.implicit != configured)
    }

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
        // One fetched credential per provider that asks for one, shared by its lanes.
        let tokens: Vec<Option<Arc<switchyard_transport::token::TokenSource>>> = config
            .providers
            .iter()
            .map(|p| p.egress.auth.clone().map(|auth| Arc::new(switchyard_transport::token::TokenSource::new(auth))))
            .collect();
        let mut lanes = Vec::with_capacity(config.models.len());
        for model in &config.models {
            let mut lane = build_lane(&config, model.provider, &model.name, codecs, transport_for(model.provider))?;
            lane.token = tokens.get(model.provider).cloned().flatten();
            lane.wire_model = model.wire_model.clone();
            lane.permits = model.max_concurrent.map(|n| Arc::new(Semaphore::new(n as usize)));
            lane.max_concurrent = model.max_concurrent;
            lane.context_window = model.context_window;
            lane.billing = model.billing;
            lane.tags.clone_from(&model.tags);
            lane.tier.clone_from(&model.tier);
            lane.operation = model.operation;
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
                lane.token = tokens.get(provider).cloned().flatten();
                lane.adhoc = true;
                match wire_model {
                    Some(wire_model) => lane.wire_model = wire_model,
                    None => lane.any_wire_model = true,
                }
                lanes.push(lane);
            }
        }
        let mut passthrough = Vec::with_capacity(config.providers.len());
        for (provider, config_provider) in config.providers.iter().enumerate() {
            let lane = match &config_provider.passthrough {
                None => None,
                Some(_) => {
                    let name = Arc::from(format!("passthrough:{}", config_provider.name));
                    let mut lane = build_lane(&config, provider, &name, codecs, transport_for(provider))?;
                    lane.token = tokens.get(provider).cloned().flatten();
                    Some(Box::new(lane))
                }
            };
            passthrough.push(lane);
        }
        let mut pools: Vec<PoolState> =
            config
                .pools
                .iter()
                .map(|pool| PoolState {
                    operation: pool.operation,
                    strategy: pool.strategy,
                    gates: gate_chain(&config, &pool.gates),
                    affinity: pool.affinity.clone(),
                    hedge: pool.hedge.clone().map(crate::pool::Hedging::new),
                    cache_ttl: pool.cache_ttl,
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
                operation: lane.operation,
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
            // Each lane at its card's bound: its dearest tier, times its
            // dearest service-tier factor.
            let prices: Vec<Price> = reachable
                .iter()
                .flat_map(|&pool| pools[pool].members.iter().filter_map(|&lane| lanes[lane].card.as_ref()))
                .map(switchyard_governance::card::Card::bound)
                .collect();
            pools[index].price_ceiling = Price::ceiling(&prices);
            pools[index].unpriced = reachable
                .iter()
                .flat_map(|&pool| pools[pool].members.iter())
                .find(|&&lane| lanes[lane].price.is_none())
                .map(|&lane| lanes[lane].name.clone());
        }
        let guardrails = guardrails::Guardrails::build(&config)?;
        let response_cache = config.pools.iter().any(|p| p.cache_ttl.is_some()).then(|| {
            Arc::new(response_cache::ResponseCache::new(usize::try_from(config.cache.max_bytes).unwrap_or(usize::MAX)))
        });
        let metrics = switchyard_telemetry::metrics::Metrics::new(
            &pools.iter().map(|p| (p.name.clone(), p.members.clone())).collect::<Vec<_>>(),
            &lanes.iter().map(|l| l.name.clone()).collect::<Vec<_>>(),
            &config.hooks.iter().map(|h| h.name.clone()).collect::<Vec<_>>(),
        )
        .with_guardrails(guardrails.catalog.clone());
        let telemetry = Arc::new(switchyard_telemetry::Telemetry::local(&config));
        let retention = retention::Retention::build(&config).map(Arc::new);
        let oidc = config.admin.oidc.clone().map(|oidc| Arc::new(crate::oidc::OidcClient::new(oidc)));
        let runs = runs::RunSpecs::of_config(&config).map(Arc::new);
        Ok(Gateway {
            runs,
            config,
            codecs,
            lanes,
            passthrough,
            pools,
            names,
            hooks: switchyard_transport::hooks::HookClient::new(),
            governance: None,
            metrics,
            telemetry,
            listener_stats: std::sync::OnceLock::new(),
            reloader: std::sync::OnceLock::new(),
            lifecycle: Arc::default(),
            sockets: Arc::default(),
            client_secrets: Arc::default(),
            admin_rate: Arc::default(),
            fleet_state: None,
            sign_ins: Arc::default(),
            oidc,
            signatures: crate::signatures::Signatures::in_process(),
            restart_pending: Vec::new(),
            guardrails,
            response_cache,
            retention,
            kept: kept::KeptStores::in_process(),
            mcp: None,
            a2a: Arc::default(),
            pins: None,
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
        self.share_retention_days();
        self.fleet_state.clone_from(&old.fleet_state);
        self.telemetry = old.telemetry.clone();
        self.sign_ins = old.sign_ins.clone();
        if let (Some(now), Some(then)) = (&self.oidc, &old.oidc) {
            if now.config() == then.config() {
                self.oidc = Some(then.clone());
            }
        }
        self.signatures = old.signatures.clone();
        self.kept = old.kept.clone();
        self.mcp.clone_from(&old.mcp);
        self.a2a = old.a2a.clone();
        self.pins.clone_from(&old.pins);
        self.lifecycle = old.lifecycle.clone();
        self.sockets = old.sockets.clone();
        self.client_secrets = old.client_secrets.clone();
        self.admin_rate = old.admin_rate.clone();
        if let Some(stats) = old.listener_stats.get() {
            let _ = self.listener_stats.set(stats.clone());
        }
        // A raw route that dials the same way keeps its warm connections and token.
        for (lane, before) in self.passthrough.iter_mut().flatten().filter_map(|lane| {
            let before = old.passthrough.iter().flatten().find(|l| l.name == lane.name)?;
            Some((lane, before))
        }) {
            if before.endpoint == lane.endpoint && before.timeouts.connect == lane.timeouts.connect {
                lane.transport = before.transport.clone();
            }
            if let (Some(now), Some(then)) = (&lane.token, &before.token) {
                if now.auth() == then.auth() {
                    lane.token = Some(then.clone());
                }
            }
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
            // A token fetched for the same credential stays good.
            if let (Some(now), Some(then)) = (&lane.token, &before.token) {
                if now.auth() == then.auth() {
                    lane.token = Some(then.clone());
                }
            }
            lane.latency_ewma.store(before.latency_ewma.load(Ordering::Relaxed), Ordering::Relaxed);
            lane.upstream_headroom.store(before.upstream_headroom.load(Ordering::Relaxed), Ordering::Relaxed);
            lane.headroom_until_ms.store(before.headroom_until_ms.load(Ordering::Relaxed), Ordering::Relaxed);
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
                pool.controls[member].copy_from(&before.controls[previous]);
            }
            if now == then && pool.affinity == before.affinity {
                pool.sessions = before.sessions.clone();
            }
        }
        self
    }

    /// Shares breaker changes with the fleet (attach it once the gateway is shared).
    pub fn with_fleet_state(mut self, shared: Arc<switchyard_fleet::shared::FleetState>) -> Gateway {
        self.signatures =
            crate::signatures::Signatures::new(Arc::new(crate::signatures::FleetSignatures(shared.clone())));
        self.fleet_state = Some(shared);
        self
    }

    /// Serves `/mcp` with `hub` (once per process; reloads keep it).
    pub fn with_mcp(mut self, hub: Arc<dyn mcp::McpHub>) -> Gateway {
        self.mcp = Some(hub);
        self
    }

    /// Attaches governance (built after the gateway, since it reads the stores).
    pub fn with_governance(mut self, governance: Arc<crate::governance::Governance>) -> Gateway {
        if self.fleet_state.is_none() {
            self.signatures = crate::signatures::Signatures::new(governance.stores.signatures.clone());
        }
        self.kept = kept::KeptStores::over(governance.stores.objects.clone(), governance.stores.batches.clone());
        // A single node's pins are kept in its store (a fleet's in Redis).
        if let (None, Some(store), Ok(_)) =
            (&self.fleet_state, &governance.stores.pins, tokio::runtime::Handle::try_current())
        {
            self.pins = Some(Arc::new(pins::KeptPins::start(store.clone())));
        }
        self.governance = Some(governance);
        self.share_retention_days();
        self
    }

    /// Puts back the session pins a single node kept before it stopped
    /// (at boot, before traffic): how many, or why none could be read.
    pub async fn restore_pins(&self) -> Result<usize, switchyard_store::StoreError> {
        match (&self.pins, self.governance.as_ref().and_then(|g| g.stores.pins.as_ref())) {
            (Some(_), Some(store)) => pins::restore(self, store.as_ref()).await,
            _ => Ok(0),
        }
    }

    /// Tells governance's purge how many days this config keeps text.
    fn share_retention_days(&self) {
        if let (Some(governance), Some(retention)) = (&self.governance, &self.retention) {
            governance.content.days.store(retention.days, Ordering::Relaxed);
        }
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
        let lanes = self.lanes.iter().filter_map(|lane| Some((lane.name.clone(), lane.price?)));
        lanes.chain(self.tool_prices()).collect()
    }

    /// The price of lane `name`, for pricing ledger totals.
    pub fn price_of(&self, name: &str) -> Option<Price> {
        self.lanes
            .iter()
            .find(|lane| &*lane.name == name)
            .and_then(|lane| lane.price)
            .or_else(|| self.tool_prices().find(|(lane, _)| &**lane == name).map(|(_, price)| price))
    }

    /// Each priced MCP server's price per call, under its ledger lane
    /// (`mcp:<server>`).
    fn tool_prices(&self) -> impl Iterator<Item = (Arc<str>, Price)> + '_ {
        let servers = self.config.mcp.iter().flat_map(|mcp| mcp.servers.iter());
        servers.filter_map(|server| {
            let per_request_usd = server.price_nano? as f64 / 1e9;
            Some((Arc::from(format!("mcp:{}", server.name)), Price { per_request_usd, ..Price::default() }))
        })
    }

    /// The codec of `protocol`.
    pub fn codec(&self, protocol: Protocol) -> &'static dyn Codec {
        (self.codecs)(protocol)
    }

    /// The codec that reads and writes `operation`'s bodies in `protocol`:
    /// the protocol's own, but for a legacy completion, whose caller and
    /// whose lanes of a protocol that has them (OpenAI) speak the
    /// completions shapes (`Codec::completions`).
    pub fn codec_for(&self, operation: switchyard_ir::Operation, protocol: Protocol) -> &'static dyn Codec {
        codec_for(self.codecs, operation, protocol)
    }

    /// The gateway serving now: this one, or the one a reload put in its
    /// place (what a long-lived socket's next turn runs on).
    pub fn serving(self: &Arc<Self>) -> Arc<Gateway> {
        self.reloader
            .get()
            .and_then(std::sync::Weak::upgrade)
            .map_or_else(|| self.clone(), |reloader| reloader.serving())
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
