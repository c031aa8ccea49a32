//! The configuration file as written: serde forms that refuse unknown keys.
//! Nothing here is validated beyond its YAML shape; see `validate`.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The whole file.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub listen: Option<String>,
    pub admin_listen: Option<String>,
    #[serde(default)]
    pub server: RawServer,
    #[serde(default)]
    pub providers: BTreeMap<String, RawProvider>,
    #[serde(default)]
    pub models: BTreeMap<String, RawModel>,
    #[serde(default)]
    pub rate_card: BTreeMap<String, RawRate>,
    #[serde(default)]
    pub pools: BTreeMap<String, RawPool>,
    /// Gates attached to every request.
    #[serde(default)]
    pub global_hooks: Vec<serde_yaml_ng::Value>,
    pub auth: Option<crate::governance::RawAuth>,
    #[serde(default)]
    pub admin: crate::governance::RawAdmin,
    #[serde(default)]
    pub storage: crate::governance::RawStorage,
    #[serde(default)]
    pub groups: BTreeMap<String, crate::governance::RawGroup>,
    /// Guardrails, attached by pools and groups.
    #[serde(default)]
    pub policies: BTreeMap<String, crate::guard::RawPolicy>,
    /// The response cache's store (pools turn it on with their `cache`).
    pub cache: Option<RawCacheStore>,
    /// What kept text is sealed under, and for how long.
    pub retention: Option<crate::retention::RawRetention>,
    #[serde(default)]
    pub governance: crate::governance::RawGovernance,
    #[serde(default)]
    pub telemetry: crate::telemetry::RawTelemetry,
    /// The webhook told when something needs a person.
    pub alerts: Option<crate::operator::RawAlerts>,
    /// Where a request's end user is read.
    pub end_users: Option<crate::operator::RawEndUsers>,
    /// How the config may change (`locked`: only through the file).
    #[serde(default)]
    pub config: crate::operator::RawConfigControl,
    /// Uploads.
    pub files: Option<crate::kept::RawFiles>,
    /// Batch jobs.
    pub batches: Option<crate::kept::RawBatches>,
    /// Stored Responses replies.
    pub responses: Option<crate::kept::RawResponses>,
    /// Tool servers behind `/mcp`.
    pub mcp: Option<crate::mcp::RawMcp>,
    /// A2A agents behind `/a2a/{agent}`.
    pub agents: Option<std::collections::BTreeMap<String, crate::agents::RawAgent>>,
    /// Bounds of long-lived sockets.
    pub duplex: Option<crate::duplex::RawDuplex>,
    /// The providers' usage reports compared with the ledger.
    pub reconcile: Option<crate::proof::RawReconcile>,
    /// Signed, hash-chained receipts of settled requests.
    pub receipts: Option<crate::proof::RawReceipts>,
}

/// Listener settings.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    /// Largest request body accepted, e.g. `32MiB`, `512KiB` or a byte count.
    pub body_limit: Option<serde_yaml_ng::Value>,
    /// How long in-flight requests may run after a shutdown signal.
    pub drain_timeout: Option<String>,
    pub header_read_timeout: Option<String>,
    pub keepalive_idle: Option<String>,
    pub body_read_timeout: Option<String>,
    pub write_timeout: Option<String>,
    pub max_connections: Option<u64>,
    pub max_in_flight: Option<u64>,
    pub max_connection_body: Option<serde_yaml_ng::Value>,
    pub http2: Option<RawHttp2>,
    /// TLS on the data listener.
    pub tls: Option<RawServerTls>,
}

/// `server.tls`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServerTls {
    pub cert: String,
    pub key: String,
    pub client_ca: Option<String>,
    /// `key` or `group`, or `{ names: group, mcp: [...] }` (read in
    /// `server`, so a mistake in either form is named as such).
    pub client_identity: Option<serde_yaml_ng::Value>,
}

/// `server.tls.client_identity: { names, mcp }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawClientIdentityDetailed {
    pub names: String,
    #[serde(default)]
    pub mcp: Vec<String>,
}

/// HTTP/2 limits.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawHttp2 {
    pub max_concurrent_streams: Option<u32>,
    pub max_header_list_size: Option<serde_yaml_ng::Value>,
}

/// A backend speaking one protocol.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProvider {
    pub protocol: String,
    pub base_url: String,
    pub api_key: Option<String>,
    pub aws: Option<RawAws>,
    /// Extra headers on every upstream call.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub timeouts: RawTimeouts,
    /// Vendor error type or code → failure class.
    #[serde(default)]
    pub error_map: BTreeMap<String, String>,
    /// Opt-in active health probes of tripped lanes.
    pub health_probe: Option<RawProbe>,
    /// `own` (default): the lane's key goes upstream; `passthrough`: the caller's.
    pub upstream_credentials: Option<String>,
    /// The ad-hoc route `/{provider}/{model}/v1/messages`: `true` for any
    /// wire model, or a list of the wire models it may reach. Off by default.
    pub adhoc: Option<serde_yaml_ng::Value>,
    /// Caller headers passed on to this provider (beside the protocol's own).
    #[serde(default)]
    pub forward_headers: Vec<String>,
    /// A credential fetched from a token endpoint.
    pub auth: Option<crate::egress::RawEgressAuth>,
    /// The upstream path's template (`{model}`, `{action}`, `{project}`, `{location}`).
    pub path: Option<String>,
    /// A path template's `{project}`.
    pub project: Option<String>,
    /// A path template's `{location}`.
    pub location: Option<String>,
    /// Claude on Vertex: the `anthropic_version` the body carries.
    pub anthropic_version: Option<String>,
    /// Whether its models continue an assistant message last: `true`,
    /// `false`, or how (`continue_final_message`, `prefix`).
    pub prefill: Option<serde_yaml_ng::Value>,
    /// The raw route to the rest of its API: the paths and methods it opens.
    pub passthrough: Option<crate::passthrough::RawPassthrough>,
}

/// Active health probing.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProbe {
    pub interval: Option<String>,
}

/// AWS credentials for SigV4.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAws {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
    pub region: Option<String>,
}

/// Upstream timeouts.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawTimeouts {
    pub connect: Option<String>,
    pub response_headers: Option<String>,
    pub stream_idle: Option<String>,
    pub request: Option<String>,
    pub first_token: Option<String>,
}

/// A lane: a provider plus the upstream's wire model.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    pub provider: String,
    pub model: Option<String>,
    pub context_window: Option<u64>,
    pub max_concurrent: Option<u32>,
    pub billing: Option<String>,
    pub tier: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// What the model takes where models of its protocol differ.
    pub capabilities: Option<RawCapabilities>,
    /// What it serves: chat (the default), embed, rerank, moderation,
    /// image, speech or transcription.
    pub operation: Option<String>,
}

/// A model's capabilities; a key left out is the common ground.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawCapabilities {
    pub adaptive_thinking: Option<bool>,
    pub effort: Option<bool>,
    pub temperature_with_top_p: Option<bool>,
    pub max_output: Option<u64>,
    pub reasoning: Option<bool>,
    pub prefill: Option<serde_yaml_ng::Value>,
    pub system_messages: Option<bool>,
    pub bedrock_betas: Option<bool>,
    pub efforts: Option<Vec<String>>,
    pub refused_while_reasoning: Option<Vec<String>>,
    pub thinks_by_default: Option<bool>,
    pub audio_input: Option<bool>,
}

/// USD per million tokens.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRate {
    pub input_utok: Option<f64>,
    pub output_utok: Option<f64>,
    pub cache_read_utok: Option<f64>,
    pub cache_write_utok: Option<f64>,
    pub cache_write_1h_utok: Option<f64>,
    pub reasoning_utok: Option<f64>,
    pub audio_input_utok: Option<f64>,
    pub audio_output_utok: Option<f64>,
    pub image_input_utok: Option<f64>,
    pub image_output_utok: Option<f64>,
    pub per_request_usd: Option<f64>,
    pub per_search_unit_usd: Option<f64>,
    pub per_image_usd: Option<f64>,
    pub per_million_chars_usd: Option<f64>,
    pub per_minute_usd: Option<f64>,
    /// Other rates above an input size (long-context pricing).
    pub tiers: Option<Vec<crate::card::RawTier>>,
    /// The share off a line of a batch.
    pub batch_discount: Option<crate::card::RawFraction>,
    /// A factor per service tier the upstream reports.
    pub service_tiers: Option<BTreeMap<String, crate::card::RawFraction>>,
}

/// A named pool of lanes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPool {
    #[serde(default)]
    pub hooks: Vec<serde_yaml_ng::Value>,
    pub failover: Option<RawFailover>,
    /// `terminate`/`end` (default) or `continue`; also accepted inside `failover`.
    pub stream_failure: Option<String>,
    /// `cancel` (default) or `finish`: what a stream whose caller left does.
    pub on_disconnect: Option<String>,
    pub hedge: Option<RawHedge>,
    #[serde(default)]
    pub policies: Vec<String>,
    pub cache: Option<RawPoolCache>,
    #[serde(default)]
    pub fallback: Vec<String>,
    pub breaker: Option<RawBreaker>,
    pub affinity: Option<RawAffinity>,
    /// How long a request waits for a permit when every lane is at its cap.
    pub queue_timeout: Option<String>,
    /// `lenient` (default) or `strict`.
    pub translation: Option<String>,
    /// How batch lines for this pool run: `gateway` (Switchyard runs them).
    pub batch: Option<String>,
    pub members: Vec<RawMember>,
}

/// Circuit-breaker tuning.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBreaker {
    pub consecutive_failures: Option<u32>,
    pub failure_rate: Option<f64>,
    pub min_requests: Option<u32>,
    pub window: Option<String>,
    pub base_cooldown: Option<String>,
    pub max_cooldown: Option<String>,
    pub hard_down_cooldown: Option<String>,
    pub jitter: Option<f64>,
}

/// Failover bounds.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFailover {
    pub max_hops: Option<u32>,
    pub timeout: Option<String>,
    pub retries: Option<u32>,
    pub first_token: Option<String>,
    pub stream_failure: Option<String>,
    pub max_continuations: Option<u32>,
}

/// The response cache's store.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCacheStore {
    pub max_bytes: Option<serde_yaml_ng::Value>,
    /// `key` (default) or `group`.
    pub scope: Option<String>,
    /// Hits count against requests-per-minute limits.
    pub count_hits: Option<bool>,
}

/// A pool's response cache.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPoolCache {
    pub ttl: Option<String>,
}

/// Hedging of a pool's late first tokens.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHedge {
    /// `p95` or a duration.
    pub after: Option<String>,
    /// A share of traffic: `10%` or `0.1`.
    pub max_extra: Option<serde_yaml_ng::Value>,
    /// Hedge requests that offer tools at any temperature too.
    pub with_tools: Option<bool>,
}

/// A pool member.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMember {
    pub model: String,
    pub weight: Option<u32>,
}

/// Session affinity of a pool.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAffinity {
    pub enabled: Option<bool>,
    pub header: Option<String>,
    pub ttl: Option<String>,
    pub prefix: Option<String>,
}

/// An external hook reference in a `hooks:` list.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHookRef {
    pub module: String,
    pub name: Option<String>,
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    pub kind: Option<String>,
    pub timeout_ms: Option<u64>,
    pub on_error: Option<String>,
    pub prompt: Option<String>,
    pub user: Option<String>,
    pub priority: Option<i32>,
    /// The hook may answer with the `rewrite` arm (needs `prompt: rw`).
    pub rewrite: Option<bool>,
}
