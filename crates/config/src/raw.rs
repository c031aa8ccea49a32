//! The configuration file as written: serde forms that refuse unknown keys.
//! Nothing here is validated beyond its YAML shape; see `validate`. The
//! wings keep their own forms (`providers`, `models`, `pools`, `cache`,
//! and the sections in modules of their own); this holds the rest.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::cache::RawCacheStore;
use crate::models::RawModel;
use crate::pools::RawPool;
use crate::providers::RawProvider;

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
