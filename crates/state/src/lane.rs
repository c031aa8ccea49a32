//! A lane: one model on one provider, as the request path uses it (its
//! endpoint, credentials and headers built once, its concurrency permits,
//! what it learned of its latency and its upstream's rate headroom), and
//! the counters each pool member keeps.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use switchyard_codec::Credentials;
use switchyard_config::{Billing, Config, Endpoint, ErrorMap, Timeouts};
use switchyard_governance::card::Card;
use switchyard_governance::money::Price;
use switchyard_ir::Protocol;
use tokio::sync::Semaphore;

use crate::BuildError;
use crate::CodecFor;
use switchyard_transport::Transport;

/// An upstream URL, parsed (for the transport) and as text (what a
/// signature covers).
#[derive(Debug)]
pub struct UpstreamUrl {
    /// Parsed.
    pub uri: http::Uri,
    /// As written.
    pub text: Box<str>,
}

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
    /// Caller headers passed on whatever the caller's protocol
    /// (`providers.<p>.forward_headers`).
    pub forward_headers: Vec<HeaderName>,
    /// The caller's credentials go upstream instead of the lane's.
    pub passthrough_credentials: bool,
    /// A credential fetched from a token endpoint (`providers.<p>.auth`),
    /// one per provider, shared by its lanes.
    pub token: Option<Arc<switchyard_transport::token::TokenSource>>,
    /// The provider's path template (`providers.<p>.path`).
    pub path_template: Option<switchyard_config::PathTemplate>,
    /// Claude on Vertex: the `anthropic_version` the body carries (and the
    /// model leaves it).
    pub anthropic_version: Option<Arc<str>>,
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
    /// The upstream URL of the lane's own model, without and with
    /// streaming, built on first use (a request would otherwise format and
    /// parse it each time).
    pub upstream_url: [std::sync::OnceLock<UpstreamUrl>; 2],
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
    /// Its rate-card prices, when priced: the flat ones (what its tokens
    /// cost under every tier's threshold, standard tier, not a batch line).
    pub price: Option<Price>,
    /// Its whole rate card entry, when priced: the flat prices, its tiers by
    /// input size, batch discount and service-tier factors (what a settled
    /// request costs).
    pub card: Option<Card>,
    /// The share of its upstream rate limit left, as the upstream's own
    /// rate-limit headers last said (`f64` bits; `u64::MAX`: never said).
    pub upstream_headroom: AtomicU64,
    /// Until when (Unix ms) that share holds: its limit's reset.
    pub headroom_until_ms: AtomicU64,
    /// When (Unix ms) this instance last told the fleet the lane's quota.
    pub quota_shared_ms: AtomicU64,
    /// What the lane serves.
    pub operation: switchyard_ir::Operation,
    /// Its model refused an assistant prefill once: a continuation asks
    /// it by instruction from then on.
    pub refuses_prefill: std::sync::atomic::AtomicBool,
}

impl Lane {
    /// The share of its upstream rate limit left, when the upstream says.
    pub fn upstream_headroom(&self) -> Option<f64> {
        let bits = self.upstream_headroom.load(Ordering::Relaxed);
        // Past its limit's reset, the share says nothing any more.
        (bits != u64::MAX && crate::clock::now_ms() < self.headroom_until_ms.load(Ordering::Relaxed))
            .then(|| f64::from_bits(bits))
    }

    /// Reads what the upstream's rate-limit headers say on an answer
    /// (`switchyard_health::quota`): the least share left is kept for
    /// routing (a lane near zero goes last; the `usage` strategy and hooks
    /// see it), and a spent limit's reset, or a `retry-after`, comes back
    /// for the lane to rest before it ever answers 429. An answer without
    /// such headers costs one scan of its header names.
    pub fn record_quota(
        &self,
        headers: &http::HeaderMap,
        now: std::time::SystemTime,
    ) -> Option<switchyard_health::quota::Quota> {
        if !headers.keys().any(|name| switchyard_health::quota::is_quota_header(name.as_str())) {
            return None;
        }
        let quota = switchyard_health::quota::read(|name| headers.get(name)?.to_str().ok(), now);
        if let (Some(share), Some(fresh_for)) = (quota.share, quota.fresh_for) {
            self.store_headroom(share, fresh_for, now);
        }
        Some(quota)
    }

    /// Keeps `share` as the lane's upstream headroom for `fresh_for` from `now`.
    pub fn store_headroom(&self, share: f64, fresh_for: Duration, now: std::time::SystemTime) {
        let until = now.duration_since(std::time::UNIX_EPOCH).unwrap_or_default() + fresh_for;
        self.headroom_until_ms.store(until.as_millis() as u64, Ordering::Relaxed);
        self.upstream_headroom.store(share.to_bits(), Ordering::Relaxed);
    }

    /// Whether a quota read now may be told to the fleet: at most once a
    /// second per lane (`now_ms`: Unix ms).
    pub fn may_share_quota(&self, now_ms: u64) -> bool {
        let last = self.quota_shared_ms.load(Ordering::Relaxed);
        now_ms.saturating_sub(last) >= 1000
            && self.quota_shared_ms.compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }

    /// Whether the upstream last said it has next to nothing left.
    pub fn nearly_spent(&self) -> bool {
        self.upstream_headroom().is_some_and(|share| share < switchyard_health::quota::NEAR_ZERO)
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
    pub(crate) fn copy_from(&self, before: &Counters) {
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

/// A lane on provider `provider` named `name`, with no model-specific settings yet.
pub(crate) fn build_lane(
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
    let forward_headers = provider
        .forward_headers
        .iter()
        .map(|name| HeaderName::from_bytes(name.as_bytes()).map_err(|_| BuildError::HeaderName(name.clone())))
        .collect::<Result<Vec<_>, _>>()?;
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
    // An ad-hoc lane is priced as itself, else by its provider's `provider/*` row.
    let rate = config.rate_card.get(name).or_else(|| config.rate_card.get(&*format!("{}/*", provider.name)));
    let card = rate.map(switchyard_config::Rate::card);
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
        forward_headers,
        passthrough_credentials: provider.passthrough_credentials,
        token: None,
        path_template: provider.egress.path.clone(),
        anthropic_version: provider.egress.anthropic_version.clone(),
        error_map: provider.error_map.clone(),
        permits: None,
        max_concurrent: None,
        upstream_url: Default::default(),
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
        headroom_until_ms: AtomicU64::new(0),
        quota_shared_ms: AtomicU64::new(0),
        refuses_prefill: std::sync::atomic::AtomicBool::new(false),
        operation: switchyard_ir::Operation::Chat,
        price: card.as_ref().map(|card| card.base),
        card,
    })
}
