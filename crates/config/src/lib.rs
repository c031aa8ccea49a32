//! Switchyard's configuration, from YAML text to validated types, once at boot.
//!
//! `load` runs the whole pipeline: parse YAML, substitute `${VAR}`s, decode
//! into the raw serde forms (unknown keys refused), then validate into
//! [`Config`], reporting every problem at once with its key path and the fix.
//! `switchyard check` and `switchyard serve` run this very function. The crate
//! is pure: the environment is passed in as a look-up.

pub mod card;
mod decode;
pub mod duplex;
mod egress;
pub mod facts;
mod governance;
mod guard;
mod hooks;
mod identity;
mod interpolate;
pub mod kept;
pub mod mcp;
mod operator;
pub mod passthrough;
pub mod proof;
mod raw;
mod redact;
pub mod retention;
pub mod round_trip;
mod runs;
mod server;
mod spend;
mod ssrf;
mod telemetry;
mod translation;
mod units;

pub use operator::{AlertFormat, Alerts, ConfigControl, EndUsers, Suspend};
pub use redact::{shown_url, REDACTED};
pub use retention::{Retention, RetentionStore, SealKey};
pub use round_trip::redacted;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use egress::{Egress, EgressAuth, PathTemplate, ServiceAccount};
pub use governance::{Admin, AdminTls, AdminToken, AuthMode, Governance, Group, OnRedisError, Scope, Storage, Tenancy};
pub use hooks::{Hook, OnError, PromptAccess};
pub use identity::{JwtIssuer, Members, Oidc, RoleBinding};
pub use server::{ClientIdentity, Http2, Server, ServerTls};
pub use ssrf::{check_outbound_url, is_public};
/// The AWS region of a Bedrock Runtime host: the Bedrock codec owns what its endpoints look like.
pub use switchyard_codec::aws::region_from_host;
pub use switchyard_codec::Credentials;
pub use switchyard_health::{BreakerPolicy, ErrorMap, StatusClass};
pub use switchyard_ir::{Capabilities, Operation, Protocol};
pub use switchyard_route::Strategy;
pub use telemetry::{FileSink, Otlp, RequestLog, Telemetry, WebhookSink};
pub use translation::Translation;
pub use units::{parse_duration, parse_size, MAX_DURATION};

/// The embedded demo configuration served when no config file is given.
pub const DEMO_CONFIG: &str = include_str!("demo.yaml");

/// One problem found in a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// Dotted key path (`pools.fast.members[1].model`).
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub fix: String,
}

impl Issue {
    fn new(path: &str, message: impl Into<String>, fix: impl Into<String>) -> Issue {
        Issue { path: path.to_owned(), message: message.into(), fix: fix.into() }
    }
}

impl std::fmt::Display for Issue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{} (fix: {})", self.message, self.fix)
        } else {
            write!(f, "{}: {} (fix: {})", self.path, self.message, self.fix)
        }
    }
}

/// Every problem in a configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render_issues(.0))]
pub struct ConfigError(pub Vec<Issue>);

fn render_issues(issues: &[Issue]) -> String {
    let mut out =
        format!("invalid configuration ({} problem{}):", issues.len(), if issues.len() == 1 { "" } else { "s" });
    for issue in issues {
        out.push_str("\n  - ");
        out.push_str(&issue.to_string());
    }
    out
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Data-plane listener.
    pub listen: SocketAddr,
    /// Admin listener (loopback by default).
    pub admin_listen: SocketAddr,
    /// Listener settings.
    pub server: Server,
    /// Backends, in name order.
    pub providers: Vec<Provider>,
    /// Lanes, in name order.
    pub models: Vec<Model>,
    /// Pools, in name order.
    pub pools: Vec<Pool>,
    /// Prices per model name.
    pub rate_card: HashMap<Arc<str>, Rate>,
    /// Every external gate, pool-level and global.
    pub hooks: Vec<Hook>,
    /// Gates attached to every request (indexes into `hooks`).
    pub global_hooks: Vec<usize>,
    /// How callers authenticate.
    pub auth: AuthMode,
    /// Issuers whose tokens callers may present instead of a key (`auth.jwt`).
    pub jwt: Vec<JwtIssuer>,
    /// The admin plane.
    pub admin: Admin,
    /// Where records live.
    pub storage: Storage,
    /// The budget tree declared in the file.
    pub groups: Vec<Group>,
    /// Guardrail policies, in name order (attached by pools and groups).
    pub policies: Vec<switchyard_guard::PolicySpec>,
    /// The response cache's store.
    pub cache: CacheStore,
    /// The key kept text is sealed under and how long it stays (`None`:
    /// no group keeps text).
    pub retention: Option<RetentionStore>,
    /// Admission and ledger tuning.
    pub governance: Governance,
    /// Metrics, traces, logs and sinks.
    pub telemetry: Telemetry,
    /// Where alerts go (`None`: nowhere).
    pub alerts: Option<Alerts>,
    /// Where a request's end user is read.
    pub end_users: EndUsers,
    /// How the config may change.
    pub control: ConfigControl,
    /// Files, batches and stored responses.
    pub kept: kept::Kept,
    /// The MCP tool servers `/mcp` fronts (`None`: no `mcp:`).
    pub mcp: Option<mcp::Mcp>,
    /// The bounds of long-lived sockets (`duplex:`).
    pub duplex: duplex::Duplex,
    /// The providers' usage reports compared with the ledger (`None`: no
    /// `reconcile:`).
    pub reconcile: Option<proof::Reconcile>,
    /// Receipts of settled requests (`None`: off).
    pub receipts: Option<proof::Receipts>,
    /// What is valid but risky, for the binary to log at boot.
    pub warnings: Vec<Issue>,
    /// The bundled model facts in use.
    pub model_facts: ModelFacts,
    /// The text this config was loaded from (secrets and all: show it only
    /// through [`redacted`]).
    pub source: Source,
}

/// A config file's text. It may hold literal secrets, so its `Debug` shows
/// only its length; read it through [`redacted`].
#[derive(Clone, Default)]
pub struct Source(Arc<str>);

impl std::ops::Deref for Source {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Source({} bytes)", self.0.len())
    }
}

/// Where a provider is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// The in-process deterministic vendor fake.
    Mock,
    /// An HTTP(S) base URL without a trailing slash.
    Http(Arc<str>),
}

/// Upstream timeouts of a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP + TLS connect.
    pub connect: Duration,
    /// From sending the request to the response headers.
    pub response_headers: Duration,
    /// Longest gap between two stream frames.
    pub stream_idle: Duration,
    /// The whole exchange, body included.
    pub request: Duration,
    /// From sending a streamed request to its first content (text,
    /// thinking or a tool call); a lane that misses it is left for the next
    /// candidate. Overrides the pool's `failover.first_token`.
    pub first_token: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            connect: Duration::from_secs(10),
            response_headers: Duration::from_secs(120),
            stream_idle: Duration::from_secs(60),
            request: Duration::from_secs(600),
            first_token: None,
        }
    }
}

/// A backend speaking one protocol.
#[derive(Debug, Clone)]
pub struct Provider {
    /// Config name.
    pub name: Arc<str>,
    /// Its wire protocol.
    pub protocol: Protocol,
    /// Where it is.
    pub endpoint: Endpoint,
    /// How to sign calls.
    pub auth: Credentials,
    /// Extra headers sent on every upstream call (an org or project id, a beta flag).
    pub headers: Vec<(String, String)>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Vendor error codes mapped to failure classes.
    pub error_map: ErrorMap,
    /// Interval of active probes of tripped lanes, when enabled.
    pub probe_interval: Option<Duration>,
    /// The caller's own credentials go upstream instead of the lane's.
    pub passthrough_credentials: bool,
    /// What the ad-hoc route `/{provider}/{model}/v1/messages` may reach.
    pub adhoc: Adhoc,
    /// Caller headers passed on to this provider's lanes whatever the
    /// caller's protocol (lower-case names), beside those its protocol's
    /// callers pass on by default (`anthropic-beta`, `anthropic-version`).
    pub forward_headers: Vec<String>,
    /// A fetched credential, a path template, Claude on Vertex's body.
    pub egress: Egress,
    /// Whether its models continue an assistant message last, when the
    /// operator says (`prefill:`); else the model facts and the protocol decide.
    pub prefill: Option<switchyard_ir::Prefill>,
    /// The raw route to the rest of its API (`/passthrough/{provider}/...`),
    /// when the operator opened it to some paths.
    pub passthrough: Option<passthrough::Passthrough>,
}

/// The ad-hoc route of a provider: a caller names a provider and a wire
/// model in the path. Off unless the operator opens it, because it lets a
/// caller spend the provider's key on any model.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Adhoc {
    /// Closed (the default).
    #[default]
    Off,
    /// Any wire model.
    Any,
    /// Only these wire models.
    Models(Vec<Arc<str>>),
}

impl Adhoc {
    /// True when `wire_model` may be reached ad hoc.
    pub fn allows(&self, wire_model: &str) -> bool {
        match self {
            Adhoc::Off => false,
            Adhoc::Any => true,
            Adhoc::Models(models) => models.iter().any(|m| &**m == wire_model),
        }
    }
}

/// How a lane is paid for (routing prefers subscription, then pay-as-you-go, then free).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Billing {
    /// A flat-fee plan: zero marginal cost within quota.
    Subscription,
    /// Metered per token.
    PayAsYouGo,
    /// Free tier.
    Free,
}

impl Billing {
    /// The config and header name.
    pub fn as_str(self) -> &'static str {
        match self {
            Billing::Subscription => "subscription",
            Billing::PayAsYouGo => "pay_as_you_go",
            Billing::Free => "free",
        }
    }
}

/// A lane: a provider plus the upstream's wire model.
#[derive(Debug, Clone)]
pub struct Model {
    /// Config name (what callers and pools use).
    pub name: Arc<str>,
    /// Index into `Config::providers`.
    pub provider: usize,
    /// The model sent upstream.
    pub wire_model: Arc<str>,
    /// Context window in tokens, when known.
    pub context_window: Option<u64>,
    /// Concurrency cap.
    pub max_concurrent: Option<u32>,
    /// Billing model.
    pub billing: Billing,
    /// Free-form size label.
    pub tier: Option<Arc<str>>,
    /// Free-form labels.
    pub tags: Vec<Arc<str>>,
    /// What the model takes where models of its protocol differ.
    pub capabilities: Capabilities,
    /// What the lane serves.
    pub operation: Operation,
    /// The bundled model facts' entry its wire model found, if any.
    pub fact: Option<Arc<str>>,
}

/// Which bundled model facts a config uses (boot reports it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFacts {
    /// The snapshot's date.
    pub snapshot: &'static str,
    /// Models it knows.
    pub known: usize,
    /// The config's models it gave facts to.
    pub matched: usize,
}

/// Prices: USD per million tokens, and per unit of what an operation
/// bills beyond tokens; and what changes them (tiers by input size, a
/// batch discount, service-tier factors).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rate {
    /// Uncached input.
    pub input_utok: f64,
    /// Output.
    pub output_utok: f64,
    /// Cache reads (defaults to input).
    pub cache_read_utok: f64,
    /// Cache writes that live five minutes (defaults to input).
    pub cache_write_utok: f64,
    /// Cache writes that live an hour (absent: as five-minute writes).
    pub cache_write_1h_utok: Option<f64>,
    /// Reasoning tokens (absent: as output).
    pub reasoning_utok: Option<f64>,
    /// Audio input (absent: as input).
    pub audio_input_utok: Option<f64>,
    /// Audio output (absent: as output).
    pub audio_output_utok: Option<f64>,
    /// Image input (absent: as input).
    pub image_input_utok: Option<f64>,
    /// Image output (absent: as output).
    pub image_output_utok: Option<f64>,
    /// Per request.
    pub per_request_usd: f64,
    /// Per rerank search unit.
    pub per_search_unit_usd: f64,
    /// Per generated image.
    pub per_image_usd: f64,
    /// Per million characters of speech input.
    pub per_million_chars_usd: f64,
    /// Per minute of transcribed audio.
    pub per_minute_usd: f64,
    /// Tiers, the batch discount and service-tier factors.
    pub beyond: card::Beyond,
}

impl Rate {
    /// Its flat prices (what a request under every tier's threshold, served
    /// at the standard tier and not in a batch, costs).
    pub fn flat(&self) -> switchyard_governance::Price {
        switchyard_governance::Price {
            input_utok: self.input_utok,
            output_utok: self.output_utok,
            cache_read_utok: self.cache_read_utok,
            cache_write_utok: self.cache_write_utok,
            cache_write_1h_utok: self.cache_write_1h_utok,
            reasoning_utok: self.reasoning_utok,
            audio_input_utok: self.audio_input_utok,
            audio_output_utok: self.audio_output_utok,
            image_input_utok: self.image_input_utok,
            image_output_utok: self.image_output_utok,
            per_request_usd: self.per_request_usd,
            per_unit_usd: self.per_unit_usd(),
        }
    }

    /// The whole card: its flat prices and what changes them.
    pub fn card(&self) -> switchyard_governance::card::Card {
        switchyard_governance::card::Card {
            base: self.flat(),
            tiers: self.beyond.tiers.clone(),
            batch_discount: self.beyond.batch_discount,
            service_tiers: self.beyond.service_tiers,
        }
    }

    /// USD per billed unit of the lane's operation: a search unit, an
    /// image, a character of speech, a second of audio (config proves a row
    /// sets only its own operation's unit).
    pub fn per_unit_usd(&self) -> f64 {
        self.per_search_unit_usd + self.per_image_usd + self.per_million_chars_usd / 1e6 + self.per_minute_usd / 60.0
    }
}

/// A pool member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// Index into `Config::models`.
    pub model: usize,
    /// Relative share of traffic.
    pub weight: u32,
}

/// Failover bounds of a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failover {
    /// Most lanes tried for one request.
    pub max_hops: u32,
    /// Budget for all tries together.
    pub timeout: Duration,
    /// Tries again on the same lane after a transient failure (a 5xx, a
    /// connection lost before headers, a 429) before failing over. Off (0)
    /// unless asked: a retry adds latency a failover would not.
    pub retries: u32,
    /// Longest wait from sending a streamed request to its first content
    /// before the next candidate takes over (unset: only `stream_idle`
    /// and the failover deadline bound it).
    pub first_token: Option<Duration>,
    /// How many times a stream that breaks after its first content may be
    /// continued by the next candidate (`stream_failure: continue`, up to
    /// `max_continuations`); 0, the default, ends it with the caller's
    /// in-stream error.
    pub continuations: u32,
    /// What a stream whose caller left does (`on_disconnect`).
    pub on_disconnect: OnDisconnect,
}

/// What a stream whose caller went away does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDisconnect {
    /// The upstream stream is closed at once, so the generation stops; a
    /// whole answer still waiting for its usage is read on for it, briefly.
    #[default]
    Cancel,
    /// The upstream stream is read to its end (bounded by the lane's
    /// request timeout) for the exact usage, with no caller.
    Finish,
}

/// Most same-lane retries a pool may ask for.
pub const MAX_RETRIES: u32 = 10;

/// Most continuations of one stream a pool may ask for.
pub const MAX_CONTINUATIONS: u32 = 3;

impl Default for Failover {
    fn default() -> Failover {
        Failover {
            max_hops: 3,
            timeout: Duration::from_secs(60),
            retries: 0,
            first_token: None,
            continuations: 0,
            on_disconnect: OnDisconnect::Cancel,
        }
    }
}

/// A named pool of lanes.
#[derive(Debug, Clone)]
pub struct Pool {
    /// Config name.
    pub name: Arc<str>,
    /// Members in config order.
    pub members: Vec<Member>,
    /// Ordering strategy.
    pub strategy: Strategy,
    /// Failover bounds.
    pub failover: Failover,
    /// A second attempt when the first content is late, when enabled.
    pub hedge: Option<Hedge>,
    /// Guardrail policies its requests pass (indexes into
    /// `Config::policies`); a caller's group's policies replace them.
    pub policies: Vec<usize>,
    /// How long its answers are cached (`None`: not cached).
    pub cache_ttl: Option<Duration>,
    /// Pools tried in order when every member failed (indexes into `Config::pools`).
    pub fallback: Vec<usize>,
    /// Circuit-breaker tuning for this pool's lanes.
    pub breaker: BreakerPolicy,
    /// How long a request waits for a permit when every lane is at its cap.
    pub queue_timeout: Duration,
    /// The pool's own gates (indexes into `Config::hooks`).
    pub gates: Vec<usize>,
    /// Session affinity, when enabled.
    pub affinity: Option<Affinity>,
    /// What a lane that cannot carry the whole request does.
    pub translation: Translation,
    /// What its members serve (all the same one).
    pub operation: Operation,
}

/// Hedging: when a request's first content is later than `after`, a
/// second attempt starts on the next candidate; the first to bring content
/// is answered and the other cancelled.
#[derive(Debug, Clone, PartialEq)]
pub struct Hedge {
    /// When the second attempt starts.
    pub after: HedgeAfter,
    /// The extra attempts as a share of the pool's hedgeable requests (0 to 1).
    pub max_extra: f64,
    /// Requests that offer tools are hedged at any temperature too (by
    /// default only those without tools, or at temperature 0: two
    /// sampled tool plans are two different answers to pay for).
    pub with_tools: bool,
}

/// When a hedge starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HedgeAfter {
    /// After a fixed wait for the first content.
    Fixed(Duration),
    /// After the pool's recent 95th percentile of time to first content
    /// (no hedge until it has been measured).
    P95,
}

/// Default share of traffic hedges may add.
pub const DEFAULT_HEDGE_SHARE: f64 = 0.1;

/// The response cache's store: its bound and whose answers share entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheStore {
    /// Most bytes held (least recently used answers go first).
    pub max_bytes: u64,
    /// Entries are shared by the callers of one group, not only one key.
    pub by_group: bool,
    /// A hit counts against requests-per-minute limits (by default it is
    /// given back: a hit costs nothing against budgets or rate limits).
    pub count_hits: bool,
}

/// Default bound of the response cache.
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;

/// The top-level `cache:` block.
fn cache_store(raw: Option<&raw::RawCacheStore>, issues: &mut Vec<Issue>) -> CacheStore {
    let Some(raw) = raw else {
        return CacheStore { max_bytes: DEFAULT_CACHE_BYTES, by_group: false, count_hits: false };
    };
    let max_bytes = size_or(raw.max_bytes.as_ref(), DEFAULT_CACHE_BYTES, 16 << 30, "cache.max_bytes", issues);
    let by_group = match raw.scope.as_deref() {
        None | Some("key") => false,
        Some("group") => true,
        Some(other) => {
            issues.push(Issue::new(
                "cache.scope",
                format!("`{other}` is not a cache scope"),
                "use key (the default: each key its own entries) or group (a group's keys share them)",
            ));
            false
        }
    };
    CacheStore { max_bytes, by_group, count_hits: raw.count_hits.unwrap_or(false) }
}

/// Session affinity: a session header pins a session to the lane that served it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Affinity {
    /// The request header carrying the session id (lowercase).
    pub header: Arc<str>,
    /// How long a pin lasts after its last use.
    pub ttl: Duration,
    /// Prompt-cache affinity: requests without a session header that share
    /// a prompt prefix (system prompt, tools, first turn) go to the lane
    /// that served it for this long, the provider's cache lifetime (an hour
    /// where the caller asked its provider for one). Off unless set.
    pub prefix: Option<Duration>,
}

impl Config {
    /// The model called `name`.
    pub fn model_index(&self, name: &str) -> Option<usize> {
        self.models.iter().position(|m| &*m.name == name)
    }

    /// The pool called `name`.
    pub fn pool_index(&self, name: &str) -> Option<usize> {
        self.pools.iter().position(|p| &*p.name == name)
    }

    /// The provider called `name`.
    pub fn provider_index(&self, name: &str) -> Option<usize> {
        self.providers.iter().position(|p| &*p.name == name)
    }

    /// The run limits of group `name`'s keys: its own `runs:`, else its
    /// nearest ancestor's (with the group that set them); `None` when no
    /// group up its chain has any.
    pub fn runs_of(&self, name: &str) -> Option<(Arc<str>, switchyard_governance::run::RunSpec)> {
        let mut at = self.groups.iter().find(|g| &*g.name == name);
        // A chain is at most as long as the groups (boot refused loops).
        for _ in 0..=self.groups.len() {
            let group = at?;
            if let Some(spec) = group.runs {
                return Some((group.name.clone(), spec));
            }
            let parent = group.parent.as_deref()?;
            at = self.groups.iter().find(|g| &*g.name == parent);
        }
        None
    }
}

/// Parses and validates a configuration. `env` looks up `${VAR}`s; no
/// value it gives comes back in an issue (each is written as its `${NAME}`),
/// so problems can be logged and shown without leaking a secret.
pub fn load(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
    let values = std::cell::RefCell::new(Vec::new());
    let recording = |name: &str| {
        let value = env(name)?;
        values.borrow_mut().push((name.to_owned(), value.clone()));
        Some(value)
    };
    let mut used = Vec::new();
    let result = load_with(text, &recording, &mut used);
    let hide = |issues: &mut Vec<Issue>| {
        for issue in issues {
            interpolate::shown_issue(issue, &values.borrow(), &used);
        }
    };
    match result {
        Ok(mut config) => {
            hide(&mut config.warnings);
            Ok(config)
        }
        Err(ConfigError(mut issues)) => {
            hide(&mut issues);
            Err(ConfigError(issues))
        }
    }
}

fn load_with(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
    used: &mut Vec<interpolate::Substituted>,
) -> Result<Config, ConfigError> {
    let mut issues = Vec::new();
    let mut tree: serde_yaml_ng::Value = serde_yaml_ng::from_str(&interpolate::protect(text)).map_err(|err| {
        ConfigError(vec![Issue::new("", format!("not valid YAML: {err}"), "fix the YAML syntax at the position given")])
    })?;
    if tree.is_null() {
        tree = serde_yaml_ng::Value::Mapping(serde_yaml_ng::Mapping::new());
    }
    interpolate::interpolate(&mut tree, "", env, &mut issues, used);
    let Some(mut raw) = decode::decode(tree, &mut issues) else {
        return Err(ConfigError(issues));
    };
    telemetry::read_otel_env(&mut raw.telemetry, env, &mut issues);
    let mut config = validate(raw, &mut issues);
    config.source = Source(Arc::from(text));
    if issues.is_empty() {
        Ok(config)
    } else {
        Err(ConfigError(issues))
    }
}

fn parse_addr(value: Option<&str>, default: &str, path: &str, issues: &mut Vec<Issue>) -> SocketAddr {
    let fallback = SocketAddr::from(([127, 0, 0, 1], 0));
    let text = value.unwrap_or(default);
    text.parse().unwrap_or_else(|_| {
        issues.push(Issue::new(
            path,
            format!("`{text}` is not a socket address"),
            "write it as host:port, e.g. 127.0.0.1:8080",
        ));
        fallback
    })
}

/// How many times a pool's broken streams may be continued: `stream_failure`
/// on the pool (the contract's place) or inside `failover` (either, not both).
fn stream_continuations(path: &str, pool: &raw::RawPool, issues: &mut Vec<Issue>) -> u32 {
    let nested = pool.failover.as_ref().and_then(|f| f.stream_failure.as_deref());
    if pool.stream_failure.is_some() && nested.is_some() {
        issues.push(Issue::new(
            &format!("{path}.failover.stream_failure"),
            "stream_failure is set twice",
            "keep the pool's stream_failure and remove the one inside failover",
        ));
    }
    let most_asked = pool.failover.as_ref().and_then(|f| f.max_continuations);
    match pool.stream_failure.as_deref().or(nested) {
        None | Some("end" | "terminate") => {
            if most_asked.is_some() {
                issues.push(Issue::new(
                    &format!("{path}.failover.max_continuations"),
                    "max_continuations applies only when streams are continued",
                    "add stream_failure: continue, or remove max_continuations",
                ));
            }
            0
        }
        Some("continue") => {
            let most = most_asked.unwrap_or(1);
            if most == 0 || most > MAX_CONTINUATIONS {
                issues.push(Issue::new(
                    &format!("{path}.failover.max_continuations"),
                    format!("{most} continuations of one stream"),
                    format!("set it from 1 to {MAX_CONTINUATIONS}"),
                ));
            }
            most.clamp(1, MAX_CONTINUATIONS)
        }
        Some(other) => {
            issues.push(Issue::new(
                &format!("{path}.stream_failure"),
                format!("`{other}` is not what to do with a stream that breaks"),
                "use terminate (the caller's in-stream error) or continue (the next lane goes on)",
            ));
            0
        }
    }
}

/// A pool's `hedge:` block.
fn validate_hedge(path: &str, raw: &raw::RawHedge, issues: &mut Vec<Issue>) -> Hedge {
    let after = match raw.after.as_deref() {
        None | Some("p95") => HedgeAfter::P95,
        Some(text) => {
            HedgeAfter::Fixed(duration_or(Some(text), Duration::from_secs(2), &format!("{path}.after"), issues))
        }
    };
    let share = match &raw.max_extra {
        None => Some(DEFAULT_HEDGE_SHARE),
        Some(serde_yaml_ng::Value::Number(n)) => n.as_f64(),
        Some(serde_yaml_ng::Value::String(text)) => {
            text.trim().strip_suffix('%').and_then(|n| n.trim().parse::<f64>().ok()).map(|pct| pct / 100.0)
        }
        Some(_) => None,
    };
    let max_extra = match share {
        Some(share) if share.is_finite() && share > 0.0 && share <= 1.0 => share,
        _ => {
            issues.push(Issue::new(
                &format!("{path}.max_extra"),
                "max_extra must be a share of traffic above 0 and at most 100%",
                "write it as a percentage (10%) or a fraction (0.1)",
            ));
            DEFAULT_HEDGE_SHARE
        }
    };
    Hedge { after, max_extra, with_tools: raw.with_tools.unwrap_or(false) }
}

fn duration_or(value: Option<&str>, default: Duration, path: &str, issues: &mut Vec<Issue>) -> Duration {
    match value.map(parse_duration) {
        None => default,
        Some(Ok(duration)) => duration,
        Some(Err(message)) => {
            issues.push(Issue::new(path, message, "write a number with a unit: 250ms, 30s, 5m"));
            default
        }
    }
}

/// A size from a YAML number or string (`32MiB`), at most `max`, above zero.
fn size_or(value: Option<&serde_yaml_ng::Value>, default: u64, max: u64, path: &str, issues: &mut Vec<Issue>) -> u64 {
    let Some(value) = value else {
        return default;
    };
    let text = match value {
        serde_yaml_ng::Value::Number(n) => n.to_string(),
        serde_yaml_ng::Value::String(s) => s.clone(),
        _ => String::from("?"),
    };
    match parse_size(&text, max) {
        Ok(0) => {
            issues.push(Issue::new(path, "a size of 0 would refuse everything", "write e.g. 32MiB"));
            default
        }
        Ok(size) => size,
        Err(message) => {
            issues.push(Issue::new(path, message, "write e.g. 32MiB, 512KiB or a byte count"));
            default
        }
    }
}

fn validate(raw: raw::RawConfig, issues: &mut Vec<Issue>) -> Config {
    let mut warnings = Vec::new();
    let listen = parse_addr(raw.listen.as_deref(), "127.0.0.1:8080", "listen", issues);
    let admin_listen = parse_addr(raw.admin_listen.as_deref(), "127.0.0.1:8081", "admin_listen", issues);
    let admin = governance::admin(&raw.admin, issues);
    let auth = governance::auth_mode(raw.auth.as_ref(), issues);
    let jwt = identity::jwt_issuers(raw.auth.as_ref().map_or(&[][..], |a| &a.jwt), auth == AuthMode::Keys, issues);
    let storage = governance::storage(&raw.storage, issues);
    let policies = guard::policies(&raw.policies, issues);
    let cache = cache_store(raw.cache.as_ref(), issues);
    let retention = retention::store(raw.retention.as_ref(), issues);
    let mut groups = governance::groups(&raw.groups, issues);
    if let Some(parent) = admin.oidc.as_ref().and_then(|o| o.members.as_ref()).map(|m| &m.parent) {
        if !groups.iter().any(|g| *g.name == **parent) {
            issues.push(Issue::new(
                "admin.oidc.members.parent",
                format!("group `{parent}` is not defined in the config"),
                "define it under groups: (members' own groups hang under it)",
            ));
        }
    }
    // A tenant admin's group made over the API is fine; one that is
    // nowhere yet leaves the tenant an empty subtree.
    let bound = admin.oidc.iter().flat_map(|o| o.roles.iter().filter_map(|r| r.tenancy.as_ref()));
    for tenancy in admin.tokens.iter().filter_map(|t| t.tenancy.as_ref()).chain(bound) {
        if let Some(group) = tenancy.group.as_deref().filter(|g| !groups.iter().any(|c| &*c.name == *g)) {
            warnings.push(Issue::new(
                "admin.tenants",
                format!("group `{group}` of a tenant admin is not in the config"),
                "define it under groups: (or make it over the API before the tenant signs in)",
            ));
        }
    }
    for group in &mut groups {
        if let Some(raw_group) = raw.groups.get(&*group.name) {
            let path = format!("groups.{}.policies", group.name);
            group.policies = guard::attached(&path, &raw_group.policies, &policies, issues);
            group.retention = retention::group(&group.name, raw_group.retention.as_deref(), retention.as_ref(), issues);
        }
    }
    let governance = governance::governance(&raw.governance, issues);
    let telemetry = telemetry::validate(&raw.telemetry, issues);
    let alerts = operator::alerts(raw.alerts.as_ref(), issues);
    let end_users = operator::end_users(raw.end_users.as_ref(), issues);
    let control = operator::config_control(&raw.config);
    let kept = kept::validate(raw.files.as_ref(), raw.batches.as_ref(), raw.responses.as_ref(), issues);
    let mcp = mcp::validate(raw.mcp.as_ref(), &policies, issues);
    let duplex = duplex::validate(raw.duplex.as_ref(), issues);
    if mcp.as_ref().is_some_and(|mcp| !mcp.servers.is_empty()) && auth == AuthMode::Open {
        warnings.push(Issue::new(
            "mcp",
            "auth is open, so anyone who reaches the data port may use every MCP tool, prompt and resource",
            "set auth.mode: keys and grant each key its `mcp` list",
        ));
    }
    if mcp.as_ref().is_some_and(|mcp| mcp.handles.secret.is_none()) && raw.storage.redis_url.is_some() {
        warnings.push(Issue::new(
            "mcp.handles.secret",
            "unset in a fleet: each instance seals MCP session ids and cursors with a secret of its own, so one minted by one instance does not open on another",
            "set mcp.handles.secret to one random secret shared by the fleet",
        ));
    }

    let server = server::validate(&raw.server, issues);
    if server.tls.as_ref().is_some_and(|tls| tls.client_identity.is_some()) && auth != AuthMode::Keys {
        issues.push(Issue::new(
            "server.tls.client_identity",
            "client certificates name callers only when callers must prove who they are",
            "set auth.mode: keys",
        ));
    }

    let providers: Vec<Provider> =
        raw.providers.iter().map(|(name, provider)| validate_provider(name, provider, issues, &mut warnings)).collect();
    let mut policies = policies;
    guard::bedrock_moderators(&mut policies, &providers, issues);
    let provider_names: Vec<&str> = raw.providers.keys().map(String::as_str).collect();
    passthrough_grants(&providers, &jwt, auth, issues);

    let models: Vec<Model> = raw
        .models
        .iter()
        .map(|(name, model)| {
            let path = format!("models.{name}");
            let provider = provider_names.iter().position(|p| *p == model.provider).unwrap_or_else(|| {
                issues.push(Issue::new(
                    &format!("{path}.provider"),
                    format!("provider `{}` is not defined", model.provider),
                    format!("define providers.{} or use one of: {}", model.provider, list(&provider_names)),
                ));
                0
            });
            let billing = match model.billing.as_deref() {
                None | Some("pay_as_you_go") => Billing::PayAsYouGo,
                Some("subscription") => Billing::Subscription,
                Some("free") => Billing::Free,
                Some(other) => {
                    issues.push(Issue::new(
                        &format!("{path}.billing"),
                        format!("`{other}` is not a billing model"),
                        "use subscription, pay_as_you_go or free",
                    ));
                    Billing::PayAsYouGo
                }
            };
            if model.max_concurrent == Some(0) {
                issues.push(Issue::new(
                    &format!("{path}.max_concurrent"),
                    "max_concurrent is 0, so the lane could never serve",
                    "remove it (unlimited) or set it to 1 or more",
                ));
            }
            if model.context_window == Some(0) {
                issues.push(Issue::new(
                    &format!("{path}.context_window"),
                    "context_window is 0",
                    "remove it or give the model's window in tokens",
                ));
            }
            let operation = match model.operation.as_deref() {
                None => Operation::Chat,
                Some(text) => Operation::from_name(text).filter(|op| op.lane() == *op).unwrap_or_else(|| {
                    issues.push(Issue::new(
                        &format!("{path}.operation"),
                        format!("`{text}` is not an operation a lane serves"),
                        "use chat, embed, rerank, moderation, image, speech or transcription (chat lanes count tokens)",
                    ));
                    Operation::Chat
                }),
            };
            if let Some(protocol) = providers.get(provider).map(|p| p.protocol) {
                if !operation.served_by(protocol) {
                    issues.push(Issue::new(
                        &format!("{path}.operation"),
                        format!("a {protocol} provider does not serve {operation}"),
                        format!("serve {operation} from a provider of a protocol that has it, or change the operation"),
                    ));
                }
            }
            if model.capabilities.as_ref().is_some_and(|c| c.max_output == Some(0)) {
                issues.push(Issue::new(
                    &format!("{path}.capabilities.max_output"),
                    "max_output is 0",
                    "remove it or give the most output tokens the model allows",
                ));
            }
            let wire_model = model.model.as_deref().unwrap_or(name);
            let fact = facts::lookup(wire_model);
            let prefill = providers.get(provider).map_or(switchyard_ir::Prefill::No, |p| {
                let own = model.capabilities.as_ref().and_then(|c| c.prefill.as_ref());
                let own = translation::read_prefill(own, p.protocol, &format!("{path}.capabilities.prefill"), issues);
                translation::prefill(own, p.prefill, fact, p.protocol)
            });
            Model {
                name: Arc::from(name.as_str()),
                provider,
                wire_model: Arc::from(wire_model),
                context_window: model.context_window.or(fact.and_then(|f| f.context_window)),
                max_concurrent: model.max_concurrent,
                billing,
                tier: model.tier.as_deref().map(Arc::from),
                tags: model.tags.iter().map(|t| Arc::from(t.as_str())).collect(),
                capabilities: translation::capabilities(
                    model.capabilities.as_ref(),
                    fact,
                    prefill,
                    translation::reasoning_rules(
                        model.capabilities.as_ref(),
                        fact,
                        &format!("{path}.capabilities"),
                        issues,
                    ),
                ),
                fact: fact.map(|f| Arc::from(f.id.as_str())),
                operation,
            }
        })
        .collect();
    let model_names: Vec<&str> = raw.models.keys().map(String::as_str).collect();
    // A name is also the first segment of `/{name}/v1/...`; the raw route
    // owns `/passthrough/...`, so a model or pool of that name could never
    // be reached that way.
    for (section, name) in raw.models.keys().map(|n| ("models", n)).chain(raw.pools.keys().map(|n| ("pools", n))) {
        if name == RAW_ROUTE_PREFIX {
            issues.push(Issue::new(
                &format!("{section}.{name}"),
                format!("`{name}` is the raw route's prefix (`/{name}/{{provider}}/...`)"),
                "rename it: a caller could not reach it by its name in the path",
            ));
        }
    }

    let mut rate_card = HashMap::new();
    for (name, rate) in &raw.rate_card {
        let entry = rate_entry(name, rate, &format!("rate_card.{name}"), &models, &providers, issues);
        rate_card.insert(Arc::from(name.as_str()), entry);
    }
    // A group's own card: its tenant's price for the lanes it names,
    // checked like the operator's.
    for group in &mut groups {
        let Some(entries) = raw.groups.get(&*group.name).and_then(|g| g.rate_card.as_ref()) else { continue };
        for (name, rate) in entries {
            let path = format!("groups.{}.rate_card.{name}", group.name);
            let entry = rate_entry(name, rate, &path, &models, &providers, issues);
            group.rate_card.insert(Arc::from(name.as_str()), entry);
        }
    }

    let pool_names: Vec<&str> = raw.pools.keys().map(String::as_str).collect();
    let mut all_hooks = Vec::new();
    let mut pending = Vec::new();
    let (_, global_hooks) =
        hooks::parse_list("global_hooks", &raw.global_hooks, true, &mut all_hooks, &mut pending, issues);
    let mut pools = Vec::new();
    for (name, pool) in &raw.pools {
        let path = format!("pools.{name}");
        if model_names.contains(&name.as_str()) {
            issues.push(Issue::new(
                &path,
                format!("`{name}` is both a model and a pool"),
                "rename the pool or the model: callers name either",
            ));
        }
        if pool.members.is_empty() {
            issues.push(Issue::new(
                &format!("{path}.members"),
                "a pool needs at least one member",
                "list members: [{ model: NAME }]",
            ));
        }
        let mut members = Vec::new();
        for (index, member) in pool.members.iter().enumerate() {
            let member_path = format!("{path}.members[{index}]");
            let Some(model) = model_names.iter().position(|m| *m == member.model) else {
                issues.push(Issue::new(
                    &format!("{member_path}.model"),
                    format!("model `{}` is not defined", member.model),
                    format!("define models.{} or use one of: {}", member.model, list(&model_names)),
                ));
                continue;
            };
            let weight = member.weight.unwrap_or(1);
            if weight == 0 {
                issues.push(Issue::new(
                    &format!("{member_path}.weight"),
                    "weight 0 would never be chosen",
                    "remove the member or give it a weight of 1 or more",
                ));
            }
            if members.iter().any(|m: &Member| m.model == model) {
                issues.push(Issue::new(
                    &member_path,
                    format!("model `{}` is listed twice", member.model),
                    "list each model once and raise its weight instead",
                ));
            }
            members.push(Member { model, weight });
        }
        let (strategy, gates) =
            hooks::parse_list(&format!("{path}.hooks"), &pool.hooks, false, &mut all_hooks, &mut pending, issues);
        let affinity = match &pool.affinity {
            Some(raw::RawAffinity { enabled: Some(false), .. }) => None,
            raw_affinity => {
                let header =
                    raw_affinity.as_ref().and_then(|a| a.header.clone()).unwrap_or_else(|| "x-session-id".to_owned());
                if header.is_empty() || !header.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
                    issues.push(Issue::new(
                        &format!("{path}.affinity.header"),
                        format!("`{header}` is not a header name"),
                        "use e.g. x-session-id",
                    ));
                }
                let ttl = duration_or(
                    raw_affinity.as_ref().and_then(|a| a.ttl.as_deref()),
                    Duration::from_secs(1800),
                    &format!("{path}.affinity.ttl"),
                    issues,
                );
                let prefix = raw_affinity.as_ref().and_then(|a| a.prefix.as_deref()).map(|text| {
                    duration_or(Some(text), Duration::from_secs(300), &format!("{path}.affinity.prefix"), issues)
                });
                Some(Affinity { header: Arc::from(header.to_ascii_lowercase().as_str()), ttl, prefix })
            }
        };
        let failover = match &pool.failover {
            None => Failover::default(),
            Some(raw_failover) => {
                let max_hops = raw_failover.max_hops.unwrap_or(3);
                if max_hops == 0 {
                    issues.push(Issue::new(
                        &format!("{path}.failover.max_hops"),
                        "max_hops 0 would never try a lane",
                        "set it to 1 or more",
                    ));
                }
                let timeout = duration_or(
                    raw_failover.timeout.as_deref(),
                    Duration::from_secs(60),
                    &format!("{path}.failover.timeout"),
                    issues,
                );
                let retries = raw_failover.retries.unwrap_or(0);
                if retries > MAX_RETRIES {
                    issues.push(Issue::new(
                        &format!("{path}.failover.retries"),
                        format!("{retries} retries on one lane would hold a caller through a long outage"),
                        format!("set it to {MAX_RETRIES} or fewer; failover to another lane is the remedy beyond that"),
                    ));
                }
                let first_token = raw_failover
                    .first_token
                    .as_deref()
                    .map(|text| duration_or(Some(text), timeout, &format!("{path}.failover.first_token"), issues));
                Failover { max_hops, timeout, retries, first_token, ..Failover::default() }
            }
        };
        let on_disconnect = match pool.on_disconnect.as_deref() {
            None | Some("cancel") => OnDisconnect::Cancel,
            Some("finish") => OnDisconnect::Finish,
            Some(other) => {
                issues.push(Issue::new(
                    &format!("{path}.on_disconnect"),
                    format!("`{other}` is not what a stream whose caller left does"),
                    "use cancel (stop the upstream at once) or finish (read it to its end for exact usage)",
                ));
                OnDisconnect::Cancel
            }
        };
        let continuations = stream_continuations(&path, pool, issues);
        let failover = Failover { continuations, on_disconnect, ..failover };
        let hedge = pool.hedge.as_ref().map(|raw| validate_hedge(&format!("{path}.hedge"), raw, issues));
        let mut fallback = Vec::new();
        for (index, target) in pool.fallback.iter().enumerate() {
            match pool_names.iter().position(|p| p == target) {
                Some(found) => fallback.push(found),
                None => issues.push(Issue::new(
                    &format!("{path}.fallback[{index}]"),
                    format!("pool `{target}` is not defined"),
                    format!("name a defined pool: {}", list(&pool_names)),
                )),
            }
        }
        let breaker = validate_breaker(&format!("{path}.breaker"), pool.breaker.as_ref(), issues);
        let queue_timeout = duration_or(
            pool.queue_timeout.as_deref(),
            Duration::from_secs(30),
            &format!("{path}.queue_timeout"),
            issues,
        );
        let operation =
            members.first().and_then(|m: &Member| models.get(m.model)).map_or(Operation::Chat, |m| m.operation);
        let attached = guard::attached(&format!("{path}.policies"), &pool.policies, &policies, issues);
        let cache_ttl = pool
            .cache
            .as_ref()
            .map(|c| duration_or(c.ttl.as_deref(), Duration::from_secs(300), &format!("{path}.cache.ttl"), issues));
        pools.push(Pool {
            cache_ttl,
            policies: attached,
            name: Arc::from(name.as_str()),
            operation,
            members,
            strategy,
            failover,
            hedge,
            fallback,
            breaker,
            queue_timeout,
            gates,
            affinity,
            translation: translation::translation(pool.translation.as_deref(), &format!("{path}.translation"), issues),
        });
        kept::pool_batch(pool.batch.as_deref(), &format!("{path}.batch"), issues);
    }
    check_fallback_cycles(&pools, issues);
    check_pool_operations(&pools, &models, issues);
    for group in &groups {
        let path = format!("groups.{}", group.name);
        for (path, name) in spend::named_pools(&path, group.budget.as_ref(), &group.limits) {
            if !model_names.contains(&name) && !pool_names.contains(&name) {
                issues.push(Issue::new(
                    &path,
                    format!("`{name}` is neither a pool nor a model"),
                    format!(
                        "name one of: {}",
                        list(&pool_names.iter().chain(&model_names).copied().collect::<Vec<_>>())
                    ),
                ));
            }
        }
    }
    // A kind of price the model's vendor bills that its entry leaves out
    // is billed at another kind's rate (a long prompt at the short one's).
    for model in &models {
        let (Some(entry), Some(bills)) = (
            raw.rate_card.get(&*model.name),
            model.fact.as_deref().and_then(|id| facts::snapshot().models.iter().find(|f| f.id == id)?.bills.as_ref()),
        ) else {
            continue;
        };
        for kind in card::unpriced_kinds(entry, bills) {
            warnings.push(Issue::new(
                &format!("rate_card.{}", model.name),
                format!(
                    "its model's vendor bills {kind} at a price of its own ({}'s pricing page), which the entry leaves out",
                    model.fact.as_deref().unwrap_or_default()
                ),
                format!("add {} from the vendor's pricing page", card::key_of(kind)),
            ));
        }
    }
    if auth == AuthMode::Keys {
        for model in &models {
            if !rate_card.contains_key(&model.name) {
                warnings.push(Issue::new(
                    &format!("models.{}", model.name),
                    "the lane has no rate_card entry, so what it serves costs nothing against budgets",
                    format!("add rate_card.{} with input_utok and output_utok", model.name),
                ));
            }
        }
    }
    for provider in &providers {
        let adhoc_names: Vec<String> = match &provider.adhoc {
            Adhoc::Off => Vec::new(),
            Adhoc::Any => vec![format!("{}/*", provider.name)],
            Adhoc::Models(models) => models.iter().map(|m| format!("{}/{m}", provider.name)).collect(),
        };
        for name in adhoc_names {
            if model_names.contains(&name.as_str()) || pool_names.contains(&name.as_str()) {
                issues.push(Issue::new(
                    &format!("providers.{}.adhoc", provider.name),
                    format!("the ad-hoc route's name `{name}` is also a model or pool"),
                    "rename the model or pool, or leave that wire model off the ad-hoc list",
                ));
            }
        }
    }
    hooks::resolve_fallbacks(&mut all_hooks, pending, issues);

    let reconcile = proof::reconcile(raw.reconcile.as_ref(), &providers, issues, &mut warnings);
    let receipts = proof::receipts(raw.receipts.as_ref(), issues);
    let model_facts = ModelFacts {
        snapshot: facts::snapshot().snapshot.as_str(),
        known: facts::snapshot().models.len(),
        matched: models.iter().filter(|model| model.fact.is_some()).count(),
    };
    let config = Config {
        listen,
        admin_listen,
        server,
        providers,
        models,
        pools,
        rate_card,
        hooks: all_hooks,
        global_hooks,
        auth,
        jwt,
        admin,
        storage,
        groups,
        policies,
        cache,
        retention,
        governance,
        telemetry,
        alerts,
        end_users,
        control,
        kept,
        duplex,
        mcp,
        reconcile,
        receipts,
        warnings,
        model_facts,
        source: Source::default(),
    };
    issues.extend(effective_issues(&config));
    config
}

/// The checks that span sections of a config, run on the config as it
/// will really serve: at load, and again wherever it changes after load
/// (command-line overrides of the listeners, a reload that keeps the
/// sections the process is built around at their running values). A
/// combination each part of which is valid alone is refused here, whichever
/// way it came about.
pub fn effective_issues(config: &Config) -> Vec<Issue> {
    let mut issues = Vec::new();
    let admin_listen = config.admin_listen;
    if !admin_listen.ip().is_loopback() && config.admin.tls.is_none() && !config.admin.insecure {
        issues.push(Issue::new(
            "admin_listen",
            format!("the admin plane is off loopback ({admin_listen}) without client-certificate TLS"),
            "use 127.0.0.1:PORT, or set admin.tls { cert, key, client_ca }, or (behind your own mesh) admin.insecure: true",
        ));
    }
    if config.listen.port() != 0 && config.listen == admin_listen {
        issues.push(Issue::new(
            "admin_listen",
            "admin_listen is the same socket as listen",
            "give the admin plane its own port",
        ));
    }
    if config.auth == AuthMode::Keys {
        for provider in config.providers.iter().filter(|p| p.passthrough_credentials) {
            issues.push(Issue::new(
                &format!("providers.{}.upstream_credentials", provider.name),
                "with auth.mode: keys a caller's credential is its virtual key, so it cannot go upstream",
                "use upstream_credentials: own (the provider's api_key), or leave auth open",
            ));
        }
    }
    issues
}

/// True when an `http://host[:port]/...` URL names a loopback host.
fn host_is_loopback(url: &str) -> bool {
    let rest = url.split("://").nth(1).unwrap_or("");
    let authority = rest.split('/').next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.rsplit_once(':').map_or(authority, |(host, _)| host),
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn validate_provider(
    name: &str,
    provider: &raw::RawProvider,
    issues: &mut Vec<Issue>,
    warnings: &mut Vec<Issue>,
) -> Provider {
    let path = format!("providers.{name}");
    let protocol = Protocol::from_name(&provider.protocol).unwrap_or_else(|| {
        issues.push(Issue::new(
            &format!("{path}.protocol"),
            format!("`{}` is not a known protocol", provider.protocol),
            "use one of: openai, responses, anthropic, gemini, cohere, bedrock",
        ));
        Protocol::OpenAi
    });
    let endpoint = if provider.base_url == "mock://" || provider.base_url.starts_with("mock://") {
        Endpoint::Mock
    } else if provider.base_url.starts_with("http://") || provider.base_url.starts_with("https://") {
        Endpoint::Http(Arc::from(provider.base_url.trim_end_matches('/')))
    } else {
        issues.push(Issue::new(
            &format!("{path}.base_url"),
            format!("`{}` is not an http(s) or mock:// URL", provider.base_url),
            "write e.g. https://api.openai.com or mock:// for the built-in fake",
        ));
        Endpoint::Mock
    };
    let auth = match (&provider.api_key, &provider.aws) {
        (Some(_), Some(_)) => {
            issues.push(Issue::new(
                &path,
                "both api_key and aws are set",
                "keep one: aws for SigV4, api_key for everything else",
            ));
            Credentials::None
        }
        (Some(key), None) => {
            if key.trim().is_empty() {
                issues.push(Issue::new(
                    &format!("{path}.api_key"),
                    "api_key is empty (a `${VAR}` set to an empty string?)",
                    "set the variable to the provider's key, or remove api_key for a backend without auth",
                ));
            }
            Credentials::ApiKey(key.clone())
        }
        (None, Some(aws)) => {
            if protocol != Protocol::Bedrock {
                issues.push(Issue::new(
                    &format!("{path}.aws"),
                    "aws credentials only sign bedrock providers",
                    "use api_key, or set protocol: bedrock",
                ));
            }
            let host = provider.base_url.split("://").nth(1).unwrap_or("").split(['/', ':']).next().unwrap_or("");
            let region = aws.region.clone().or_else(|| region_from_host(host)).unwrap_or_else(|| {
                issues.push(Issue::new(
                    &format!("{path}.aws.region"),
                    format!("no region in host `{host}`"),
                    "add region: us-east-1 (or use a bedrock-runtime.REGION.amazonaws.com base_url)",
                ));
                String::new()
            });
            Credentials::Aws {
                access_key_id: aws.access_key_id.clone(),
                secret_access_key: aws.secret_access_key.clone(),
                session_token: aws.session_token.clone(),
                region,
            }
        }
        (None, None) => Credentials::None,
    };
    let defaults = Timeouts::default();
    let t = &provider.timeouts;
    let timeouts = Timeouts {
        connect: duration_or(t.connect.as_deref(), defaults.connect, &format!("{path}.timeouts.connect"), issues),
        response_headers: duration_or(
            t.response_headers.as_deref(),
            defaults.response_headers,
            &format!("{path}.timeouts.response_headers"),
            issues,
        ),
        stream_idle: duration_or(
            t.stream_idle.as_deref(),
            defaults.stream_idle,
            &format!("{path}.timeouts.stream_idle"),
            issues,
        ),
        request: duration_or(t.request.as_deref(), defaults.request, &format!("{path}.timeouts.request"), issues),
        first_token: t
            .first_token
            .as_deref()
            .map(|text| duration_or(Some(text), defaults.request, &format!("{path}.timeouts.first_token"), issues)),
    };
    let mut error_map = Vec::new();
    for (code, class) in &provider.error_map {
        match StatusClass::from_name(class) {
            Some(class) => error_map.push((code.clone(), class)),
            None => issues.push(Issue::new(
                &format!("{path}.error_map.{code}"),
                format!("`{class}` is not a failure class"),
                "use bad_request, context_length, auth, billing, rate_limited, overloaded, server_error, timeout or network",
            )),
        }
    }
    let probe_interval = provider.health_probe.as_ref().map(|probe| {
        let interval = duration_or(
            probe.interval.as_deref(),
            Duration::from_secs(10),
            &format!("{path}.health_probe.interval"),
            issues,
        );
        if interval < Duration::from_millis(100) {
            issues.push(Issue::new(
                &format!("{path}.health_probe.interval"),
                "probes more often than every 100ms would hammer the upstream",
                "use 1s or more",
            ));
        }
        interval
    });
    let passthrough_credentials = match provider.upstream_credentials.as_deref() {
        None | Some("own") => false,
        Some("passthrough") => true,
        Some(other) => {
            issues.push(Issue::new(
                &format!("{path}.upstream_credentials"),
                format!("`{other}` is not a credentials mode"),
                "use own (the lane's key) or passthrough (the caller's)",
            ));
            false
        }
    };
    let adhoc = match &provider.adhoc {
        None | Some(serde_yaml_ng::Value::Bool(false)) => Adhoc::Off,
        Some(serde_yaml_ng::Value::Bool(true)) => Adhoc::Any,
        Some(serde_yaml_ng::Value::Sequence(models)) => {
            let names: Vec<Arc<str>> = models.iter().filter_map(|m| m.as_str().map(Arc::from)).collect();
            if names.len() != models.len() || names.iter().any(|n| n.is_empty()) {
                issues.push(Issue::new(
                    &format!("{path}.adhoc"),
                    "the ad-hoc allow-list holds something that is not a wire model name",
                    "list wire model names as strings, e.g. adhoc: [claude-sonnet-4-5]",
                ));
            }
            Adhoc::Models(names)
        }
        Some(_) => {
            issues.push(Issue::new(
                &format!("{path}.adhoc"),
                "adhoc is neither true, false nor a list of wire models",
                "write adhoc: true (any model) or adhoc: [MODEL, ...]",
            ));
            Adhoc::Off
        }
    };
    if let (Endpoint::Http(base), false) = (&endpoint, matches!(auth, Credentials::None)) {
        if base.starts_with("http://") && !host_is_loopback(base) {
            warnings.push(Issue::new(
                &format!("{path}.base_url"),
                format!("`{base}` is plain http, so this provider's credential crosses the network unencrypted"),
                "use https://, or reach the provider through a local proxy on loopback",
            ));
        }
    }
    let headers = validate_headers(&path, &provider.headers, !matches!(auth, Credentials::None), issues);
    let forward_headers = validate_forwarded(&path, &provider.forward_headers, issues);
    let egress = egress::egress(
        name,
        &egress::RawEgress {
            auth: provider.auth.as_ref(),
            path: provider.path.as_deref(),
            project: provider.project.as_deref(),
            location: provider.location.as_deref(),
            anthropic_version: provider.anthropic_version.as_deref(),
            base_url: &provider.base_url,
            anthropic: protocol == Protocol::Anthropic,
            has_static_key: !matches!(auth, Credentials::None),
        },
        issues,
    );
    let passthrough = provider.passthrough.as_ref().map(|raw| {
        let mock = matches!(endpoint, Endpoint::Mock);
        passthrough::read(raw, &format!("{path}.passthrough"), mock, passthrough_credentials, issues, warnings)
    });
    Provider {
        name: Arc::from(name),
        protocol,
        endpoint,
        auth,
        headers,
        timeouts,
        error_map: ErrorMap::new(error_map),
        probe_interval,
        passthrough_credentials,
        adhoc,
        forward_headers,
        egress,
        prefill: translation::read_prefill(provider.prefill.as_ref(), protocol, &format!("{path}.prefill"), issues),
        passthrough,
    }
}

/// The raw route is for keys the operator granted it: it needs callers who
/// prove who they are, and a token issuer's grants must name providers
/// that open it.
fn passthrough_grants(providers: &[Provider], jwt: &[JwtIssuer], auth: AuthMode, issues: &mut Vec<Issue>) {
    if auth != AuthMode::Keys {
        for provider in providers.iter().filter(|p| p.passthrough.is_some()) {
            issues.push(Issue::new(
                &format!("providers.{}.passthrough", provider.name),
                "the raw route spends the provider's key for callers it was granted to, and an open gateway \
                 knows no callers",
                "set auth.mode: keys and grant keys `passthrough: [PROVIDER]`",
            ));
        }
    }
    for (index, issuer) in jwt.iter().enumerate() {
        for (grant, name) in issuer.passthrough.iter().enumerate() {
            if !providers.iter().any(|p| *p.name == **name && p.passthrough.is_some()) {
                let open: Vec<&str> = providers.iter().filter(|p| p.passthrough.is_some()).map(|p| &*p.name).collect();
                issues.push(Issue::new(
                    &format!("auth.jwt[{index}].passthrough[{grant}]"),
                    format!("provider `{name}` does not open a raw route"),
                    format!("name a provider with `passthrough:` ({})", list(&open)),
                ));
            }
        }
    }
}

/// Whether `name` is an HTTP header name (a token).
fn is_header_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
}

/// `providers.<p>.forward_headers`: header names (kept lower-case) a
/// caller may pass on. Never the framing, a credential (the caller's key is
/// for the gateway; `upstream_credentials: passthrough` is how a caller's
/// own key goes upstream), cookies, or the gateway's own headers.
fn validate_forwarded(path: &str, raw: &[String], issues: &mut Vec<Issue>) -> Vec<String> {
    let mut names = Vec::with_capacity(raw.len());
    for (index, name) in raw.iter().enumerate() {
        let at = format!("{path}.forward_headers[{index}]");
        let lower = name.to_ascii_lowercase();
        if !is_header_name(name) {
            issues.push(Issue::new(&at, format!("`{name}` is not a header name"), "use letters, digits and -"));
        } else if RESERVED_HEADERS.contains(&lower.as_str()) || lower.starts_with("x-switchyard-") {
            issues.push(Issue::new(&at, format!("`{name}` is set by the gateway itself"), "remove it"));
        } else if CREDENTIAL_HEADERS.contains(&lower.as_str())
            || lower.starts_with("x-amz-")
            || ["cookie", "proxy-authorization"].contains(&lower.as_str())
        {
            issues.push(Issue::new(
                &at,
                format!("`{name}` carries a credential, which a caller gives the gateway, not the provider"),
                "remove it (upstream_credentials: passthrough sends a caller's own key upstream)",
            ));
        } else if !names.contains(&lower) {
            names.push(lower);
        }
    }
    names
}

/// Headers the gateway or its transport own on every upstream call.
/// The first path segment of the raw passthrough route.
pub const RAW_ROUTE_PREFIX: &str = "passthrough";

const RESERVED_HEADERS: [&str; 9] = [
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
];

/// Headers that carry a provider's credential; an operator may set one only
/// on a provider without `api_key` or `aws` (a scheme of their own).
const CREDENTIAL_HEADERS: [&str; 4] = ["authorization", "x-api-key", "x-goog-api-key", "x-amz-security-token"];

/// `providers.<p>.headers`: names are HTTP tokens (kept lower-case), values
/// visible ASCII, and none replaces what framing or the credential owns.
fn validate_headers(
    path: &str,
    raw: &BTreeMap<String, String>,
    has_credential: bool,
    issues: &mut Vec<Issue>,
) -> Vec<(String, String)> {
    let mut headers = Vec::with_capacity(raw.len());
    for (name, value) in raw {
        let at = format!("{path}.headers.{name}");
        let lower = name.to_ascii_lowercase();
        if !is_header_name(name) {
            issues.push(Issue::new(&at, format!("`{name}` is not a header name"), "use letters, digits and -"));
            continue;
        }
        if RESERVED_HEADERS.contains(&lower.as_str()) {
            issues.push(Issue::new(&at, format!("`{name}` is set by the gateway itself"), "remove it"));
            continue;
        }
        if has_credential && (CREDENTIAL_HEADERS.contains(&lower.as_str()) || lower.starts_with("x-amz-")) {
            issues.push(Issue::new(
                &at,
                format!("`{name}` would clash with the credential this provider already sends"),
                "remove the header, or remove api_key/aws and send your own credential here",
            ));
            continue;
        }
        if value.chars().any(|c| !(c == ' ' || c == '\t' || c.is_ascii_graphic())) {
            issues.push(Issue::new(
                &at,
                "the value holds a character a header cannot carry",
                "use visible ASCII (no line breaks)",
            ));
            continue;
        }
        if value.trim().is_empty() {
            issues.push(Issue::new(&at, "the value is empty (a `${VAR}` set to nothing?)", "give it a value"));
            continue;
        }
        headers.push((lower, value.clone()));
    }
    headers
}

fn validate_breaker(path: &str, raw: Option<&raw::RawBreaker>, issues: &mut Vec<Issue>) -> BreakerPolicy {
    let defaults = BreakerPolicy::default();
    let Some(raw) = raw else {
        return defaults;
    };
    let duration = |value: Option<&str>, default: Duration, key: &str, issues: &mut Vec<Issue>| {
        duration_or(value, default, &format!("{path}.{key}"), issues)
    };
    let base_cooldown = duration(raw.base_cooldown.as_deref(), defaults.base_cooldown, "base_cooldown", issues);
    let policy = BreakerPolicy {
        consecutive_failures: raw.consecutive_failures.unwrap_or(defaults.consecutive_failures),
        failure_rate: raw.failure_rate.unwrap_or(defaults.failure_rate),
        min_requests: raw.min_requests.unwrap_or(defaults.min_requests),
        window: duration(raw.window.as_deref(), defaults.window, "window", issues),
        base_cooldown,
        // Unsaid, the cap is never below the cooldown the operator chose.
        max_cooldown: duration(
            raw.max_cooldown.as_deref(),
            defaults.max_cooldown.max(base_cooldown),
            "max_cooldown",
            issues,
        ),
        hard_down_cooldown: duration(
            raw.hard_down_cooldown.as_deref(),
            defaults.hard_down_cooldown,
            "hard_down_cooldown",
            issues,
        ),
        jitter: raw.jitter.unwrap_or(defaults.jitter),
    };
    let mut problem =
        |key: &str, message: &str, fix: &str| issues.push(Issue::new(&format!("{path}.{key}"), message, fix));
    if policy.consecutive_failures == 0 {
        problem("consecutive_failures", "0 would trip without a failure", "set it to 1 or more");
    }
    if !(policy.failure_rate > 0.0 && policy.failure_rate <= 1.0) {
        problem("failure_rate", "failure_rate must be in (0, 1]", "write a share such as 0.5");
    }
    if !(0.0..=1.0).contains(&policy.jitter) {
        problem("jitter", "jitter must be in [0, 1]", "write a share such as 0.2");
    }
    if policy.window.is_zero() {
        problem("window", "the window must be longer than zero", "write e.g. 60s");
    }
    if policy.base_cooldown > policy.max_cooldown {
        problem(
            "base_cooldown",
            "base_cooldown is longer than max_cooldown",
            "raise max_cooldown or lower base_cooldown",
        );
    }
    policy
}

fn check_fallback_cycles(pools: &[Pool], issues: &mut Vec<Issue>) {
    // Depth-first search from each pool; a path that comes back to a pool on
    // the current stack is a cycle.
    fn visit(pools: &[Pool], at: usize, stack: &mut Vec<usize>) -> Option<Vec<usize>> {
        if let Some(start) = stack.iter().position(|&p| p == at) {
            let mut cycle = stack[start..].to_vec();
            cycle.push(at);
            return Some(cycle);
        }
        stack.push(at);
        for &next in &pools[at].fallback {
            if let Some(cycle) = visit(pools, next, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        None
    }
    let mut reported: BTreeMap<Vec<usize>, ()> = BTreeMap::new();
    for start in 0..pools.len() {
        if let Some(cycle) = visit(pools, start, &mut Vec::new()) {
            let mut key = cycle.clone();
            key.sort_unstable();
            key.dedup();
            if reported.insert(key, ()).is_none() {
                let names: Vec<&str> = cycle.iter().map(|&p| &*pools[p].name).collect();
                issues.push(Issue::new(
                    &format!("pools.{}.fallback", names[0]),
                    format!("fallback cycle: {}", names.join(" -> ")),
                    "remove one fallback so the chain ends",
                ));
            }
        }
    }
}

/// Whether `name` is what a `rate_card` entry may price: a defined model,
/// or an ad-hoc lane (`provider/model` for one wire model, `provider/*`
/// for every one) a provider opened.
fn priceable(name: &str, models: &[Model], providers: &[Provider]) -> bool {
    models.iter().any(|m| &*m.name == name)
        || name.split_once('/').is_some_and(|(provider, wire)| {
            providers.iter().find(|p| &*p.name == provider).is_some_and(|p| match &p.adhoc {
                Adhoc::Off => false,
                Adhoc::Any => true,
                Adhoc::Models(models) => wire == "*" || models.iter().any(|m| &**m == wire),
            })
        })
}

/// One rate card entry (the operator's `rate_card.<name>`, or a group's)
/// at `path`: it names a lane there is, prices in its operation's units,
/// and its figures hold ([`card::entry`]).
fn rate_entry(
    name: &str,
    rate: &raw::RawRate,
    path: &str,
    models: &[Model],
    providers: &[Provider],
    issues: &mut Vec<Issue>,
) -> Rate {
    if !priceable(name, models, providers) {
        let model_names: Vec<&str> = models.iter().map(|m| &*m.name).collect();
        issues.push(Issue::new(
            path,
            format!("model `{name}` is not defined"),
            format!(
                "price a defined model ({}), or an ad-hoc lane as provider/model or provider/*",
                list(&model_names)
            ),
        ));
    }
    let operation = models.iter().find(|m| &*m.name == name).map_or(Operation::Chat, |m| m.operation);
    check_unit_prices(path, rate, operation, issues);
    card::entry(rate, path, issues)
}

/// A group's own rate card sent over the admin API (`path` its key in the
/// body): each entry checked against `config` (the running one) as the
/// config file's would be, or every problem with its fix.
pub fn group_rate_card(
    config: &Config,
    entries: &BTreeMap<String, serde_json::Value>,
    path: &str,
) -> Result<BTreeMap<Arc<str>, Rate>, Vec<Issue>> {
    let mut issues = Vec::new();
    let mut card = BTreeMap::new();
    for (name, value) in entries {
        let at = format!("{path}.{name}");
        match serde_json::from_value::<raw::RawRate>(value.clone()) {
            Ok(rate) => {
                let entry = rate_entry(name, &rate, &at, &config.models, &config.providers, &mut issues);
                card.insert(Arc::from(name.as_str()), entry);
            }
            Err(err) => issues.push(Issue::new(
                &at,
                format!("not a rate card entry: {err}"),
                "write the fields of a rate_card entry, e.g. {\"input_utok\": 3, \"output_utok\": 15}",
            )),
        }
    }
    if issues.is_empty() {
        Ok(card)
    } else {
        Err(issues)
    }
}

/// A row's unit prices are those its operation bills: a search unit for
/// rerank, an image, a million characters of speech, a minute of audio.
fn check_unit_prices(path: &str, rate: &raw::RawRate, operation: Operation, issues: &mut Vec<Issue>) {
    let units = [
        ("per_search_unit_usd", rate.per_search_unit_usd, Operation::Rerank),
        ("per_image_usd", rate.per_image_usd, Operation::Image),
        ("per_million_chars_usd", rate.per_million_chars_usd, Operation::Speech),
        ("per_minute_usd", rate.per_minute_usd, Operation::Transcription),
    ];
    for (key, value, bills) in units {
        if value.is_some() && bills != operation {
            issues.push(Issue::new(
                &format!("{path}.{key}"),
                format!("a {operation} lane bills no {key}; it prices {bills}"),
                "price the lane in the units its operation bills (tokens, per_request_usd, or its own unit)",
            ));
        }
    }
}

/// A pool's members, and its fallback pools', all serve one operation: a
/// caller on an embed route never lands on a chat lane.
fn check_pool_operations(pools: &[Pool], models: &[Model], issues: &mut Vec<Issue>) {
    for pool in pools {
        let mixed: Vec<String> = pool
            .members
            .iter()
            .filter_map(|m| models.get(m.model))
            .filter(|m| m.operation != pool.operation)
            .map(|m| format!("{} ({})", m.name, m.operation))
            .collect();
        if !mixed.is_empty() {
            issues.push(Issue::new(
                &format!("pools.{}.members", pool.name),
                format!("the pool serves {} but mixes in {}", pool.operation, mixed.join(", ")),
                "put lanes of one operation in a pool (a pool per operation)",
            ));
        }
        for &fallback in &pool.fallback {
            if let Some(other) = pools.get(fallback).filter(|other| other.operation != pool.operation) {
                issues.push(Issue::new(
                    &format!("pools.{}.fallback", pool.name),
                    format!("fallback `{}` serves {}, not {}", other.name, other.operation, pool.operation),
                    "fall back to a pool of the same operation",
                ));
            }
        }
    }
}

fn list(names: &[&str]) -> String {
    if names.is_empty() {
        "(none defined)".to_owned()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_issue_never_echoes_a_value_from_the_environment() {
        let env = |name: &str| (name == "SECRET").then(|| "sk-super-secret-value".to_owned());
        let Err(err) = load("listen: ${SECRET}\nadmin_listen: 127.0.0.1:1\n", &env) else {
            panic!("a secret is not a socket address")
        };
        let text = format!("{err:?}");
        assert!(!text.contains("sk-super-secret-value"), "{text}");
        assert!(text.contains("${SECRET}"), "{text}");
    }

    #[test]
    fn an_issue_never_echoes_a_value_that_formatting_would_escape() {
        // JSON credentials and PEM keys hold quotes, backslashes and newlines:
        // a message that quotes them escapes them, and no search for the raw
        // value finds the escaped form. Every shape of message is tried: a
        // decode error (a string where a number goes), a validation error
        // (not a socket address), and one about a name another key uses.
        let secret = "{\"private_key\": \"-----BEGIN KEY-----\\nMIIsecretpart\\n\"}\nline-two-of-it";
        let env = |name: &str| (name == "CREDS").then(|| secret.to_owned());
        for yaml in [
            "governance: { ledger_queue: \"${CREDS}\" }\n",
            "listen: \"${CREDS}\"\n",
            "providers:\n  p: { protocol: \"${CREDS}\", base_url: mock:// }\n",
            "providers:\n  p: { protocol: openai, base_url: mock:// }\nmodels:\n  m: { provider: \"${CREDS}\" }\n",
        ] {
            let Err(err) = load(yaml, &env) else { panic!("{yaml} loads") };
            let text = format!("{err:?} {err}");
            for part in ["MIIsecretpart", "line-two-of-it", "private_key"] {
                assert!(!text.contains(part), "{yaml}: {text}");
            }
            assert!(text.contains("${CREDS}"), "{yaml}: {text}");
        }
    }

    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn operations_are_known_at_boot() {
        let base = "providers:\n  o: { protocol: openai, base_url: mock:// }\n  a: { protocol: anthropic, base_url: mock:// }\n";
        let ok = format!(
            "{base}models:\n  e: {{ provider: o, model: text-embedding-3-small, operation: embed }}\n  \
             c: {{ provider: o, model: gpt-4o-mini }}\nrate_card:\n  e: {{ input_utok: 0.02 }}\n  \
             c: {{ input_utok: 0.15, output_utok: 0.6 }}\npools:\n  vectors: {{ members: [{{ model: e }}] }}\n"
        );
        let config = load(&ok, &no_env).unwrap();
        let embed = config.model_index("e").unwrap();
        assert_eq!(config.models[embed].operation, Operation::Embed);
        assert_eq!(config.pools[0].operation, Operation::Embed);
        assert_eq!(config.rate_card["e"].output_utok, 0.0, "an embed row needs no output price");
        for (yaml, says) in [
            (format!("{base}models:\n  e: {{ provider: a, model: x, operation: embed }}\n"), "does not serve embed"),
            (format!("{base}models:\n  e: {{ provider: o, model: x, operation: translate }}\n"), "not an operation"),
            (
                format!(
                    "{base}models:\n  e: {{ provider: o, model: x, operation: embed }}\n  c: {{ provider: o, model: y }}\n\
                     pools:\n  p: {{ members: [{{ model: e }}, {{ model: c }}] }}\n"
                ),
                "mixes in c (chat)",
            ),
            (
                format!(
                    "{base}models:\n  e: {{ provider: o, model: x, operation: embed }}\n  c: {{ provider: o, model: y }}\n\
                     pools:\n  p: {{ members: [{{ model: e }}], fallback: [q] }}\n  q: {{ members: [{{ model: c }}] }}\n"
                ),
                "serves chat, not embed",
            ),
            (format!("{base}models:\n  e: {{ provider: o, model: x }}\nrate_card:\n  e: {{}}\n"), "prices nothing"),
        ] {
            let Err(err) = load(&yaml, &no_env) else { panic!("{yaml} loads") };
            assert!(err.to_string().contains(says), "{yaml}: {err}");
        }
    }

    #[test]
    fn demo_config_is_valid() {
        let config = load(DEMO_CONFIG, &no_env).unwrap();
        for protocol in Protocol::ALL {
            let name = format!("demo-{protocol}");
            let model = config.model_index(&name).expect("demo lane per protocol");
            assert_eq!(config.providers[config.models[model].provider].protocol, protocol);
        }
        assert!(config.pool_index("demo").is_some());
        let embed = config.pool_index("demo-embed").unwrap();
        assert_eq!(config.pools[embed].operation, Operation::Embed);
    }

    #[test]
    fn the_raw_routes_prefix_is_no_model_or_pool_name() {
        let text = r#"
providers:
  p: { protocol: openai, base_url: "mock://" }
models:
  passthrough: { provider: p, model: m }
pools:
  passthrough-pool: { members: [{ model: passthrough }] }
"#;
        let err = load(text, &no_env).unwrap_err();
        let issue = err.0.iter().find(|i| i.path == "models.passthrough").expect("the reserved name is reported");
        assert!(issue.message.contains("raw route"), "{issue:?}");
        assert_eq!(err.0.len(), 1, "{err:?}");
    }

    #[test]
    fn reports_every_problem_with_path_and_fix() {
        let text = r#"
providers:
  p: { protocol: klingon, base_url: "ftp://x" }
models:
  m: { provider: nope, max_concurrent: 0 }
pools:
  a: { members: [{ model: ghost }, { model: m, weight: 0 }], hooks: [cheapest, fastest], fallback: [b] }
  b: { members: [{ model: m }], fallback: [a] }
"#;
        let err = load(text, &no_env).unwrap_err();
        let paths: Vec<&str> = err.0.iter().map(|i| i.path.as_str()).collect();
        for expected in [
            "providers.p.protocol",
            "providers.p.base_url",
            "models.m.provider",
            "models.m.max_concurrent",
            "pools.a.members[0].model",
            "pools.a.members[1].weight",
            "pools.a.hooks[1]",
            "pools.a.fallback",
        ] {
            assert!(paths.contains(&expected), "missing {expected} in {paths:?}");
        }
        assert!(err.0.iter().all(|i| !i.fix.is_empty()));
    }

    #[test]
    fn unknown_keys_are_refused_with_their_path() {
        let err = load("providers:\n  p: { protocol: openai, base_url: mock://, colour: red }\n", &no_env).unwrap_err();
        assert_eq!(err.0.len(), 1);
        assert!(err.0[0].message.contains("colour"), "{}", err.0[0]);
        assert!(err.0[0].path.starts_with("providers.p"), "{}", err.0[0]);
    }

    #[test]
    fn every_problem_in_one_run_unknown_keys_included() {
        let text = "colour: red\nproviders:\n  p: { protocol: openai, base_url: mock://, flavour: x }\nmodels:\n  m: { provider: ghost }\n";
        let err = load(text, &no_env).unwrap_err();
        let paths: Vec<&str> = err.0.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(err.0.len(), 3, "{err}");
        assert!(err.0.iter().any(|i| i.message.contains("colour")), "{err}");
        assert!(err.0.iter().any(|i| i.message.contains("flavour") && i.path.starts_with("providers.p")), "{err}");
        assert!(paths.contains(&"models.m.provider"), "{err}");
    }

    #[test]
    fn retries_and_first_token_deadlines_parse_and_are_bounded() {
        let text = "providers:\n  p: { protocol: openai, base_url: mock://, timeouts: { first_token: 3s } }\n\
                    models:\n  m: { provider: p }\n\
                    pools:\n  fast: { failover: { retries: 2, first_token: 15s }, members: [{ model: m }] }\n  \
                    plain: { members: [{ model: m }] }\n";
        let config = load(text, &no_env).unwrap();
        let fast = &config.pools[config.pool_index("fast").unwrap()].failover;
        assert_eq!((fast.retries, fast.first_token), (2, Some(Duration::from_secs(15))));
        let plain = &config.pools[config.pool_index("plain").unwrap()].failover;
        assert_eq!((plain.retries, plain.first_token), (0, None), "both off unless asked");
        assert_eq!(config.providers[0].timeouts.first_token, Some(Duration::from_secs(3)));
        let err = load(&text.replace("retries: 2", "retries: 11"), &no_env).unwrap_err();
        assert_eq!(err.0[0].path, "pools.fast.failover.retries", "{err}");
        // An unset cap never refuses an operator's longer base cooldown.
        let long = text.replace(
            "members: [{ model: m }] }\n  plain",
            "breaker: { base_cooldown: 60s }, members: [{ model: m }] }\n  plain",
        );
        let config = load(&long, &no_env).unwrap();
        assert_eq!(config.pools[config.pool_index("fast").unwrap()].breaker.max_cooldown, Duration::from_secs(60));
    }

    #[test]
    fn hedging_and_the_contracts_stream_failure_parse_and_are_bounded() {
        let text = "providers:\n  p: { protocol: openai, base_url: mock:// }\nmodels:\n  m: { provider: p }\n\
                    pools:\n  a: { hedge: { after: 2s, max_extra: 10% }, stream_failure: continue, members: [{ model: m }] }\n  \
                    b: { hedge: { max_extra: 0.25, with_tools: true }, members: [{ model: m }] }\n  \
                    c: { members: [{ model: m }] }\n";
        let config = load(text, &no_env).unwrap();
        let pool = |name: &str| &config.pools[config.pool_index(name).unwrap()];
        let a = pool("a").hedge.clone().unwrap();
        assert_eq!((a.after, a.max_extra, a.with_tools), (HedgeAfter::Fixed(Duration::from_secs(2)), 0.1, false));
        assert_eq!(pool("a").failover.continuations, 1, "the pool's stream_failure: continue");
        let b = pool("b").hedge.clone().unwrap();
        assert_eq!((b.after, b.max_extra, b.with_tools), (HedgeAfter::P95, 0.25, true), "p95 unless a wait is given");
        assert!(pool("c").hedge.is_none(), "off unless asked");
        for (bad, path) in [("max_extra: 10%", "pools.a.hedge.max_extra"), ("after: 2s", "pools.a.hedge.after")] {
            let broken = text.replacen(bad, if bad.starts_with("max") { "max_extra: 150%" } else { "after: soon" }, 1);
            let err = load(&broken, &no_env).unwrap_err();
            assert_eq!(err.0[0].path, path, "{err}");
        }
        let twice = text
            .replace("stream_failure: continue,", "stream_failure: continue, failover: { stream_failure: continue },");
        let err = load(&twice, &no_env).unwrap_err();
        assert!(err.0[0].message.contains("twice"), "{err}");
    }

    #[test]
    fn policies_are_compiled_at_boot_and_every_fault_is_named() {
        let text = "providers:\n  p: { protocol: openai, base_url: mock:// }\nmodels:\n  m: { provider: p }\n\
                    policies:\n  pii: { detect: [email, card], action: mask }\n  \
                    ids: { regex: { ticket: \"TCK-[0-9]{6}\" }, action: mask, direction: response }\n  \
                    mod: { moderator: { url: \"http://127.0.0.1:9/moderate\", on_error: block }, action: flag }\n\
                    groups:\n  legal: { policies: [pii] }\n\
                    pools:\n  support: { policies: [pii, ids, mod], members: [{ model: m }] }\n";
        let config = load(text, &no_env).unwrap();
        assert_eq!(config.policies.len(), 3);
        let support = &config.pools[config.pool_index("support").unwrap()];
        assert_eq!(support.policies.len(), 3);
        assert_eq!(config.groups[0].policies.len(), 1);
        let moderated = config.policies.iter().find(|p| &*p.name == "mod").unwrap();
        assert!(moderated.moderator.as_ref().unwrap().block_on_error);
        assert!(!moderated.response, "a moderator alone never holds a reply back");
        for (bad, good_path) in [
            ("TCK-[0-9]{6}", "policies.ids.regex.ticket"),
            ("[email, card]", "policies.pii.detect[1]"),
            ("action: flag", "policies.mod.action"),
            ("policies: [pii, ids, mod]", "pools.support.policies[2]"),
        ] {
            let broken = match bad {
                "TCK-[0-9]{6}" => text.replace(bad, "TCK-[0-9]+"),
                "[email, card]" => text.replace(bad, "[email, ssn]"),
                "action: flag" => text.replace(bad, "action: mask"),
                _ => text.replace(bad, "policies: [pii, ids, nope]"),
            };
            let err = load(&broken, &no_env).unwrap_err();
            assert!(err.0.iter().any(|issue| issue.path == good_path), "{good_path}: {err}");
        }
    }

    #[test]
    fn a_missing_required_key_says_what_to_write() {
        let err = load("pools:\n  fast:\n    failover: { max_hops: 2 }\n", &no_env).unwrap_err();
        assert_eq!(err.0.len(), 1, "{err}");
        let issue = &err.0[0];
        assert_eq!(issue.path, "pools.fast");
        assert!(issue.message.contains("`members` is required"), "{issue}");
        assert!(issue.fix.contains("members: [{ model:"), "{issue}");
    }

    #[test]
    fn a_wrong_type_is_reported_once_with_the_rest() {
        let text = "providers:\n  p: { protocol: openai, base_url: mock://, timeouts: 5 }\nmodels:\n  m: { provider: ghost }\n";
        let err = load(text, &no_env).unwrap_err();
        assert_eq!(err.0.len(), 2, "{err}");
        assert!(err.0.iter().any(|i| i.path == "providers.p.timeouts"), "{err}");
        assert!(err.0.iter().any(|i| i.path == "models.m.provider"), "{err}");
    }

    #[test]
    fn a_bad_list_item_is_taken_out_and_the_rest_still_checked() {
        let text = "providers:\n  p: { protocol: openai, base_url: mock:// }\nmodels:\n  m: { provider: p }\n  n: { provider: ghost }\n\
                    pools:\n  a:\n    members: [{ model: m, weight: heavy }, { model: n }]\n";
        let err = load(text, &no_env).unwrap_err();
        let paths: Vec<&str> = err.0.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(paths, ["pools.a.members[0].weight", "models.n.provider"], "{err}");
    }

    #[test]
    fn an_empty_key_variable_is_an_error() {
        let lookup = |name: &str| (name == "OPENAI_KEY").then(String::new);
        let err =
            load("providers:\n  p: { protocol: openai, base_url: mock://, api_key: \"${OPENAI_KEY}\" }\n", &lookup)
                .unwrap_err();
        assert_eq!(err.0[0].path, "providers.p.api_key", "{err}");
        assert!(err.0[0].message.contains("empty"), "{err}");
    }

    #[test]
    fn provider_headers_are_checked_and_kept() {
        let ok = "providers:\n  p:\n    protocol: openai\n    base_url: mock://\n    api_key: sk-1\n    headers:\n      OpenAI-Organization: org-1\n      User-Agent: mine/1\n";
        let config = load(ok, &no_env).unwrap();
        assert_eq!(
            config.providers[0].headers,
            vec![
                ("openai-organization".to_owned(), "org-1".to_owned()),
                ("user-agent".to_owned(), "mine/1".to_owned())
            ]
        );
        let bad = "providers:\n  p:\n    protocol: openai\n    base_url: mock://\n    api_key: sk-1\n    headers: { Authorization: x, host: y, \"bad name\": z }\n";
        let err = load(bad, &no_env).unwrap_err();
        let paths: Vec<&str> = err.0.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            paths,
            ["providers.p.headers.Authorization", "providers.p.headers.bad name", "providers.p.headers.host"],
            "{err}"
        );
        // Without a key of its own, a provider may carry its own credential.
        let own = "providers:\n  p:\n    protocol: openai\n    base_url: mock://\n    headers: { Authorization: Token abc }\n";
        assert_eq!(load(own, &no_env).unwrap().providers[0].headers[0].0, "authorization");
    }

    #[test]
    fn forwarded_caller_headers_never_carry_credentials_or_framing() {
        let ok = "providers:\n  p: { protocol: openai, base_url: mock://, forward_headers: [OpenAI-Organization, openai-project, OpenAI-Project] }\n";
        assert_eq!(load(ok, &no_env).unwrap().providers[0].forward_headers, ["openai-organization", "openai-project"]);
        let bad = "providers:\n  p: { protocol: openai, base_url: mock://, forward_headers: [Authorization, Cookie, host, x-switchyard-strict, x-amz-date, \"a b\"] }\n";
        let err = load(bad, &no_env).unwrap_err();
        assert_eq!(err.0.len(), 6, "{err}");
        assert!(err.0.iter().all(|issue| issue.path.starts_with("providers.p.forward_headers[")), "{err}");
    }

    #[test]
    fn missing_variables_are_named() {
        let err =
            load("providers:\n  p: { protocol: openai, base_url: mock://, api_key: \"${OPENAI_KEY}\" }\n", &no_env)
                .unwrap_err();
        assert!(err.to_string().contains("OPENAI_KEY"));
        let lookup = |name: &str| (name == "OPENAI_KEY").then(|| "sk-1".to_owned());
        let config =
            load("providers:\n  p: { protocol: openai, base_url: mock://, api_key: \"${OPENAI_KEY}\" }\n", &lookup)
                .unwrap();
        assert_eq!(config.providers[0].auth, Credentials::ApiKey("sk-1".into()));
    }

    #[test]
    fn bedrock_region_comes_from_the_host() {
        assert_eq!(region_from_host("bedrock-runtime.us-east-1.amazonaws.com").as_deref(), Some("us-east-1"));
        assert_eq!(region_from_host("bedrock-runtime-fips.eu-west-3.amazonaws.com").as_deref(), Some("eu-west-3"));
        assert_eq!(region_from_host("127.0.0.1"), None);
        let text = "providers:\n  aws: { protocol: bedrock, base_url: \"https://bedrock-runtime.eu-central-1.amazonaws.com\", aws: { access_key_id: a, secret_access_key: b } }\n";
        let config = load(text, &no_env).unwrap();
        assert!(matches!(&config.providers[0].auth, Credentials::Aws { region, .. } if region == "eu-central-1"));
    }

    #[test]
    fn hook_misconfiguration_fails_the_boot() {
        let text = r#"
providers: { p: { protocol: openai, base_url: "mock://" } }
models: { m: { provider: p } }
global_hooks:
  - { module: webrequest, name: a, settings: { url: "http://127.0.0.1:1/a" }, on_error: b }
pools:
  x:
    hooks:
      - cheapest
      - { module: webrequest, name: b, settings: { url: "http://127.0.0.1:1/b" }, on_error: a }
      - { module: webrequest, settings: { url: "https://169.254.169.254/" }, rewrite: true }
      - { module: plugin-x, settings: { url: "http://127.0.0.1:1/" } }
      - { module: webrequest, kind: tap, settings: { url: "http://127.0.0.1:1/" }, on_error: ghost }
    members: [{ model: m }]
"#;
        let err = load(text, &no_env).unwrap_err();
        let messages: Vec<String> = err.0.iter().map(ToString::to_string).collect();
        let has = |needle: &str| messages.iter().any(|m| m.contains(needle));
        assert!(has("on_error chain never ends: a -> b -> a"), "{messages:#?}");
        assert!(has("pools.x.hooks[2].settings.url"), "{messages:#?}");
        assert!(has("pools.x.hooks[2].rewrite"), "{messages:#?}");
        assert!(has("`plugin-x` is not a hook module"), "{messages:#?}");
        assert!(has("pools.x.hooks[4].kind"), "{messages:#?}");
        assert!(has("`ghost` is neither"), "{messages:#?}");
    }

    #[test]
    fn hooks_and_affinity_parse() {
        let text = r#"
providers: { p: { protocol: openai, base_url: "mock://" } }
models: { m: { provider: p } }
pools:
  x:
    affinity: { header: X-Conversation, ttl: 5m }
    hooks: [least_busy, { module: webrequest, name: guard, settings: { url: "http://127.0.0.1:1/" }, prompt: ro, user: ro, on_error: reject, priority: 2, timeout_ms: 50 }]
    members: [{ model: m }]
  y: { affinity: { enabled: false }, members: [{ model: m }] }
"#;
        let config = load(text, &no_env).unwrap();
        let x = &config.pools[config.pool_index("x").unwrap()];
        assert_eq!(x.strategy, Strategy::LeastBusy);
        assert_eq!(
            x.affinity.as_ref().map(|a| (&*a.header, a.ttl)),
            Some(("x-conversation", Duration::from_secs(300)))
        );
        let guard = &config.hooks[x.gates[0]];
        assert_eq!(
            (guard.on_error, guard.prompt, guard.user, guard.priority),
            (OnError::Reject, PromptAccess::ReadOnly, true, 2)
        );
        assert_eq!(guard.timeout, Duration::from_millis(50));
        assert!(config.pools[config.pool_index("y").unwrap()].affinity.is_none());
    }

    #[test]
    fn huge_durations_and_sizes_are_config_errors() {
        let text = r#"
server: { body_limit: "99999999999999999999", drain_timeout: 99999999999999999999s, write_timeout: 400000000h }
providers: { p: { protocol: openai, base_url: "mock://", timeouts: { request: 1e30s } } }
models: { m: { provider: p } }
pools: { x: { failover: { timeout: 100000000000000h }, members: [{ model: m }], breaker: { max_cooldown: 99999999d } } }
"#;
        let err = load(text, &no_env).unwrap_err();
        let paths: Vec<&str> = err.0.iter().map(|i| i.path.as_str()).collect();
        for expected in [
            "server.body_limit",
            "server.drain_timeout",
            "server.write_timeout",
            "providers.p.timeouts.request",
            "pools.x.failover.timeout",
            "pools.x.breaker.max_cooldown",
        ] {
            assert!(paths.contains(&expected), "missing {expected} in {err}");
        }
    }

    #[test]
    fn server_limits_parse_with_safe_defaults() {
        let config = load("server: { header_read_timeout: 5s, max_connections: 10, http2: { max_concurrent_streams: 8, max_header_list_size: 32KiB } }\n", &no_env).unwrap();
        assert_eq!(config.server.header_read_timeout, Duration::from_secs(5));
        assert_eq!(config.server.max_connections, 10);
        assert_eq!(config.server.http2, Http2 { max_concurrent_streams: 8, max_header_list_size: 32 << 10 });
        assert_eq!(config.server.keepalive_idle, Server::default().keepalive_idle);
        let err = load("server: { body_limit: 128MiB, max_connection_body: 64MiB, max_in_flight: 0 }\n", &no_env)
            .unwrap_err();
        let paths: Vec<&str> = err.0.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(paths, ["server.max_connection_body", "server.max_in_flight"]);
        // A larger body limit raises the connection's default budget with it.
        let config = load("server: { body_limit: 128MiB }\n", &no_env).unwrap();
        assert_eq!(config.server.max_connection_body, 128 << 20);
    }

    #[test]
    fn a_ledger_write_has_a_timeout_within_bounds() {
        let config = load("governance: { ledger_write_timeout: 750ms }\n", &no_env).unwrap();
        assert_eq!(config.governance.ledger_write_timeout, Duration::from_millis(750));
        assert_eq!(load("{}\n", &no_env).unwrap().governance.ledger_write_timeout, Duration::from_secs(2));
        for wrong in ["5ms", "2m"] {
            let err = load(&format!("governance: {{ ledger_write_timeout: {wrong} }}\n"), &no_env).unwrap_err();
            let paths: Vec<&str> = err.0.iter().map(|i| i.path.as_str()).collect();
            assert_eq!(paths, ["governance.ledger_write_timeout"], "{wrong}");
        }
    }

    #[test]
    fn the_adhoc_route_is_opt_in() {
        let text = r#"
providers:
  closed: { protocol: anthropic, base_url: "mock://" }
  open: { protocol: anthropic, base_url: "mock://", adhoc: true }
  listed: { protocol: anthropic, base_url: "mock://", adhoc: [claude-a, claude-b] }
"#;
        let config = load(text, &no_env).unwrap();
        let adhoc = |name: &str| config.providers[config.provider_index(name).unwrap()].adhoc.clone();
        assert!(!adhoc("closed").allows("anything"));
        assert!(adhoc("open").allows("anything"));
        assert!(adhoc("listed").allows("claude-b") && !adhoc("listed").allows("claude-c"));
        let err = load("providers: { p: { protocol: openai, base_url: \"mock://\", adhoc: yes-please } }\n", &no_env);
        assert_eq!(err.unwrap_err().0[0].path, "providers.p.adhoc");
    }

    #[test]
    fn a_credential_over_plain_http_warns() {
        let text = r#"
providers:
  remote: { protocol: openai, base_url: "http://api.example.com", api_key: sk-1 }
  local: { protocol: openai, base_url: "http://127.0.0.1:9000", api_key: sk-1 }
  open: { protocol: openai, base_url: "http://api.example.com" }
"#;
        let config = load(text, &no_env).unwrap();
        let paths: Vec<&str> = config.warnings.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(paths, ["providers.remote.base_url"]);
    }

    #[test]
    fn admin_plane_must_stay_on_loopback() {
        let err = load("admin_listen: 0.0.0.0:8081\n", &no_env).unwrap_err();
        assert_eq!(err.0[0].path, "admin_listen");
    }

    #[test]
    fn tenant_admins_are_admin_tokens_and_bindings_scoped_to_a_group() {
        let text = r#"
admin:
  tokens: [ops-token-0123456789, { name: lead, token: lead-token-0123456789, group: acme }]
  tenants:
    - { token: acme-token-0123456789, group: acme }
    - { name: globex-lead, token: globex-token-0123456789, group: globex, scope: read, pools: [m], mcp: ["tickets__read_*"] }
  oidc:
    issuer: "https://idp.example"
    client_id: console
    redirect_url: "https://gw.example:8081/ui/oidc/callback"
    roles:
      - { claim: groups, value: acme-leads, role: full, group: acme }
      - { claim: groups, value: staff, role: member, group: acme, pools: [m] }
    members: { parent: people }
groups: { people: {}, acme: {}, globex: {} }
"#;
        let config = load(text, &no_env).unwrap();
        let tokens = &config.admin.tokens;
        let reach =
            |i: usize| tokens[i].tenancy.as_ref().map(|t| (t.group.as_deref().map(str::to_owned), t.pools.clone()));
        assert_eq!(reach(0), None, "the gateway's admin");
        assert_eq!(reach(1), Some((Some("acme".into()), None)));
        assert_eq!(
            (&*tokens[2].name, tokens[2].scope, reach(2)),
            ("acme-admin-1", Scope::Full, Some((Some("acme".into()), None)))
        );
        assert_eq!((&*tokens[3].name, tokens[3].scope), ("globex-lead", Scope::Read));
        assert_eq!(tokens[3].tenancy.as_ref().unwrap().mcp.as_deref(), Some(&["tickets__read_*".to_owned()][..]));
        let oidc = config.admin.oidc.unwrap();
        let bound = |groups: serde_json::Value| oidc.binding_of(&serde_json::json!({ "groups": groups })).cloned();
        let lead = bound(serde_json::json!(["acme-leads"])).unwrap();
        assert_eq!((lead.role, lead.tenancy.unwrap().group.as_deref()), (Scope::Full, Some("acme")));
        let staff = bound(serde_json::json!("staff")).unwrap().tenancy.unwrap();
        assert_eq!(staff.pools.as_deref(), Some(&["m".to_owned()][..]));
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
        // A tenant's group nowhere in the file is a warning (it may be made over the API).
        let elsewhere = load(&text.replace("globex: {}", "initech: {}"), &no_env).unwrap();
        assert!(elsewhere.warnings.iter().any(|w| w.message.contains("`globex`")), "{:?}", elsewhere.warnings);
        // A binding's pools without a group on an admin role are a mistake named where written;
        // a tenant's token as short as any admin token's is refused.
        let wrong =
            text.replace("role: full, group: acme", "role: full, pools: [m]").replace("acme-token-0123456789", "short");
        let mut paths: Vec<String> = load(&wrong, &no_env).unwrap_err().0.into_iter().map(|i| i.path).collect();
        paths.sort();
        assert_eq!(paths, ["admin.oidc.roles[0]", "admin.tokens"], "{paths:?}");
    }

    #[test]
    fn mcp_grant_templates_are_read_for_members_tokens_and_certificates() {
        let text = r#"
auth:
  mode: keys
  jwt:
    - { name: corp, issuer: "https://idp.example", jwks_url: "https://idp.example/jwks", audience: sy, group_claim: team, mcp: ["tickets__read_*", "prompt:tickets__*"] }
server:
  tls: { cert: c.pem, key: k.pem, client_ca: ca.pem, client_identity: { names: group, mcp: [files] } }
admin:
  oidc:
    issuer: "https://idp.example"
    client_id: console
    redirect_url: "https://gw.example:8081/ui/oidc/callback"
    roles: [{ claim: groups, value: staff, role: member }]
    members: { parent: people, mcp: ["resource:wiki+*"] }
groups: { people: {} }
mcp: { servers: { files: { url: "http://127.0.0.1:7000/mcp" } } }
"#;
        let config = load(text, &no_env).unwrap();
        assert_eq!(config.jwt[0].mcp, ["tickets__read_*", "prompt:tickets__*"]);
        let tls = config.server.tls.as_ref().unwrap();
        assert_eq!(
            (tls.client_identity, &tls.client_mcp[..]),
            (Some(ClientIdentity::Group), &["files".to_owned()][..])
        );
        assert_eq!(config.admin.oidc.unwrap().members.unwrap().mcp, ["resource:wiki+*"]);
        // A mistake in the long form is named where it is.
        let typo = text.replace("mcp: [files] }", "mpc: [files] }");
        let issues = load(&typo, &no_env).unwrap_err().0;
        assert_eq!(issues[0].path, "server.tls.client_identity");
        assert!(issues[0].message.contains("mpc"), "{}", issues[0]);
        // Written as before, a certificate's callers get no grants.
        let plain = text.replace("client_identity: { names: group, mcp: [files] }", "client_identity: group");
        assert!(load(&plain, &no_env).unwrap().server.tls.unwrap().client_mcp.is_empty());
        // A key's caller has the key's own grants; a grant is checked where it is written.
        let wrong = text.replace("names: group", "names: key").replace("\"prompt:tickets__*\"", "\"prompt:tickets\"");
        let paths: Vec<String> = load(&wrong, &no_env).unwrap_err().0.into_iter().map(|i| i.path).collect();
        assert_eq!(paths, ["auth.jwt[0].mcp[1]", "server.tls.client_identity.mcp"]);
    }

    #[test]
    fn a_rate_cards_tiers_discount_factors_and_a_groups_markup_are_checked_with_their_fixes() {
        let base = "providers: { a: { protocol: anthropic, base_url: \"https://api.anthropic.com\" } }\n\
                    models: { sonnet: { provider: a, model: claude-sonnet-4-5 } }\n";
        let good = format!(
            "{base}rate_card:\n  sonnet: {{ input_utok: 3, output_utok: 15, cache_read_utok: 0.3, cache_write_utok: 3.75, \
             cache_write_1h_utok: 6, tiers: [ {{ above_input_tokens: 200000, input_utok: 6, output_utok: 22.5 }} ], \
             batch_discount: 50%, service_tiers: {{ priority: 1.8, flex: 0.5 }} }}\n\
             groups: {{ acme: {{ markup: 15% }}, beta: {{ markup: 0.2 }} }}\n"
        );
        let config = load(&good, &no_env).unwrap();
        let rate = &config.rate_card["sonnet"];
        assert_eq!(rate.beyond.batch_discount, 500_000);
        assert_eq!(rate.beyond.service_tiers[switchyard_ir::ServiceTier::Priority.index()], Some(1_800_000));
        let tier = rate.beyond.tiers[0];
        assert_eq!(tier.above_input_tokens, 200_000);
        // A kind the tier leaves out keeps the base's rate.
        assert_eq!(
            (tier.price.input_utok, tier.price.cache_read_utok, tier.price.cache_write_1h_utok),
            (6.0, 0.3, Some(6.0))
        );
        let markups: Vec<_> = config.groups.iter().map(|g| g.markup.map(|m| m.0)).collect();
        assert_eq!(markups, [Some(150_000), Some(200_000)]);
        // Every kind its vendor bills is priced: no warning of the card.
        assert!(config.warnings.iter().all(|w| !w.path.starts_with("rate_card")), "{:?}", config.warnings);

        let bad = format!(
            "{base}rate_card:\n  sonnet: {{ input_utok: 3, output_utok: 15, tiers: [ \
             {{ above_input_tokens: 500000, input_utok: 7 }}, {{ above_input_tokens: 200000, input_utok: 6 }}, \
             {{ input_utok: 1 }}, {{ above_input_tokens: 900000, input_utok: -1 }} ], batch_discount: 100%, \
             service_tiers: {{ batch: 0.5, turbo: 2, priority: 0 }} }}\n\
             groups: {{ acme: {{ markup: 2000% }} }}\n"
        );
        let issues = load(&bad, &no_env).unwrap_err().0;
        let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "groups.acme.markup",
                "rate_card.sonnet.tiers[1].above_input_tokens",
                "rate_card.sonnet.tiers[2]",
                "rate_card.sonnet.tiers[3]",
                "rate_card.sonnet.batch_discount",
                "rate_card.sonnet.service_tiers.batch",
                "rate_card.sonnet.service_tiers.priority",
                "rate_card.sonnet.service_tiers.turbo",
            ],
            "{issues:?}"
        );
        assert!(issues[1].fix.contains("lowest above_input_tokens up"), "{}", issues[1]);

        // A card that leaves out what the vendor bills is warned of, kind by kind.
        let thin = format!("{base}rate_card:\n  sonnet: {{ input_utok: 3, output_utok: 15 }}\n");
        let warned: Vec<String> = load(&thin, &no_env)
            .unwrap()
            .warnings
            .iter()
            .filter(|w| w.path == "rate_card.sonnet")
            .map(|w| w.fix.clone())
            .collect();
        assert_eq!(warned.len(), 5, "{warned:?}");
        assert!(warned.iter().any(|fix| fix.contains("cache_write_1h_utok")), "{warned:?}");
        assert!(warned.iter().any(|fix| fix.contains("tiers:")), "{warned:?}");
        assert!(warned.iter().any(|fix| fix.contains("batch_discount")), "{warned:?}");
    }

    #[test]
    fn a_groups_own_rate_card_is_checked_like_the_operators_and_kept_in_a_form_that_reads_back() {
        let base =
            "providers: { a: { protocol: anthropic, base_url: \"https://api.anthropic.com\", adhoc: [opus] } }\n\
                    models: { sonnet: { provider: a, model: claude-sonnet-4-5 }, haiku: { provider: a } }\n\
                    rate_card: { sonnet: { input_utok: 3, output_utok: 15 } }\n";
        let good = format!(
            "{base}groups:\n  acme:\n    markup: 10%\n    rate_card:\n      \
             sonnet: {{ input_utok: 4, output_utok: 20, cache_write_1h_utok: 8, tiers: [ {{ above_input_tokens: 200000, \
             input_utok: 8 }} ], batch_discount: 40%, service_tiers: {{ priority: 2 }} }}\n      \
             a/opus: {{ input_utok: 20, output_utok: 90, per_request_usd: 0.001 }}\n  acme-eu: {{ parent: acme }}\n"
        );
        let config = load(&good, &no_env).unwrap();
        let acme = config.groups.iter().find(|g| &*g.name == "acme").unwrap();
        let sonnet = &acme.rate_card["sonnet"];
        assert_eq!((sonnet.input_utok, sonnet.output_utok, sonnet.cache_read_utok), (4.0, 20.0, 4.0));
        assert_eq!((sonnet.beyond.batch_discount, sonnet.beyond.tiers[0].price.output_utok), (400_000, 20.0));
        assert_eq!(acme.rate_card.len(), 2, "an ad-hoc lane the provider opened is priceable");
        assert!(config.groups.iter().find(|g| &*g.name == "acme-eu").unwrap().rate_card.is_empty());
        // The form a record keeps reads back to the same entry, every kind,
        // tier, discount and factor.
        for rate in acme.rate_card.values() {
            assert_eq!(&card::stored_entry(&card::entry_json(rate)).unwrap(), rate, "{}", card::entry_json(rate));
        }
        assert_eq!(card::entry_json(sonnet)["service_tiers"], serde_json::json!({"priority": 2.0}));

        // What is wrong in a group's card is reported at its path, with the
        // fix, as the operator's would be.
        let bad = format!(
            "{base}groups:\n  acme:\n    rate_card:\n      gpt-4o: {{ input_utok: 1, output_utok: 2 }}\n      \
             sonnet: {{ input_utok: -4, batch_discount: 150%, per_image_usd: 0.04 }}\n      haiku: {{ }}\n      \
             b/opus: {{ input_utok: 1 }}\n"
        );
        let issues = load(&bad, &no_env).unwrap_err().0;
        let found: Vec<(&str, &str)> = issues.iter().map(|i| (i.path.as_str(), i.message.as_str())).collect();
        let expected = [
            ("groups.acme.rate_card.b/opus", "model `b/opus` is not defined"),
            ("groups.acme.rate_card.gpt-4o", "model `gpt-4o` is not defined"),
            ("groups.acme.rate_card.haiku", "the row prices nothing"),
            ("groups.acme.rate_card.sonnet.per_image_usd", "a chat lane bills no per_image_usd; it prices image"),
            ("groups.acme.rate_card.sonnet", "prices must be finite and not negative"),
            ("groups.acme.rate_card.sonnet.batch_discount", "not a share off"),
        ];
        for (path, message) in expected {
            assert!(found.contains(&(path, message)), "{path}: {message} in {found:?}");
        }
        assert_eq!(found.len(), expected.len(), "{found:?}");
        assert!(issues[1].fix.contains("price a defined model (haiku, sonnet)"), "{}", issues[1]);
        // An unknown key in an entry is named too.
        let typo = format!("{base}groups: {{ acme: {{ rate_card: {{ sonnet: {{ input_utk: 4 }} }} }} }}\n");
        let issues = load(&typo, &no_env).unwrap_err().0;
        assert!(issues.iter().any(|i| i.path.contains("groups.acme.rate_card.sonnet")), "{issues:?}");

        // The admin API's body is checked against the running config the same way.
        let entries: BTreeMap<String, serde_json::Value> = serde_json::from_value(serde_json::json!({
            "sonnet": {"input_utok": 4, "output_utok": 20},
            "nosuch": {"input_utok": 1},
            "haiku": {"input_utok": "cheap"},
        }))
        .unwrap();
        let issues = group_rate_card(&config, &entries, "rate_card").unwrap_err();
        let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(paths, ["rate_card.haiku", "rate_card.nosuch"], "{issues:?}");
        let entries = BTreeMap::from([("sonnet".to_owned(), serde_json::json!({"input_utok": 4, "output_utok": 20}))]);
        assert_eq!(group_rate_card(&config, &entries, "rate_card").unwrap()["sonnet"].output_utok, 20.0);
    }

    #[test]
    fn mcp_on_an_open_gateway_warns() {
        let text = "mcp: { servers: { files: { command: /bin/files } } }\n";
        let warned = load(text, &no_env).unwrap().warnings;
        assert_eq!(warned.iter().map(|w| w.path.as_str()).collect::<Vec<_>>(), ["mcp"]);
        assert!(load(&format!("auth: {{ mode: keys }}\n{text}"), &no_env).unwrap().warnings.is_empty());
    }
}
