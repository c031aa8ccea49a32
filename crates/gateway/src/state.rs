//! The runtime form of a validated config: lanes with their concurrency
//! permits and pre-built header values, pools with their routing state, and
//! the name table callers address. Built once at boot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use http::{HeaderName, HeaderValue};
use switchyard_codec::{Codec, Credentials};
use switchyard_config::{Auth, Billing, Config, Endpoint, Failover, Timeouts};
use switchyard_ir::Protocol;
use switchyard_route::SmoothWeighted;
use tokio::sync::Semaphore;

use crate::transport::{HttpTransport, Transport};

/// Looks up the codec of a protocol (the registry is injected so this crate
/// depends only on the codec contract, never on the six implementations).
pub type CodecFor = fn(Protocol) -> &'static dyn Codec;

/// A lane: one model on one provider, as the engine uses it.
pub struct Lane {
    /// Config name of the model.
    pub name: Arc<str>,
    /// Config name of its provider.
    pub provider: Arc<str>,
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
    /// Concurrency cap, when configured.
    pub permits: Option<Arc<Semaphore>>,
    /// Upstream timeouts.
    pub timeouts: Timeouts,
    /// Billing model.
    pub billing: Billing,
    /// Pre-built `x-switchyard-lane` value.
    pub lane_header: HeaderValue,
    /// Pre-built `x-switchyard-provider` value.
    pub provider_header: HeaderValue,
}

/// A pool's routing state.
pub struct PoolState {
    /// Config name.
    pub name: Arc<str>,
    /// Lane index of each member.
    pub members: Vec<usize>,
    /// Weight of each member.
    pub weights: Vec<u32>,
    /// Failover bounds.
    pub failover: Failover,
    /// Fallback pools (indexes).
    pub fallback: Vec<usize>,
    /// SWRR state; the lock is held only for the pick, never across `.await`.
    pub weighted: Mutex<SmoothWeighted>,
}

/// What a caller's name resolves to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A pool.
    Pool(usize),
    /// A model, used as a one-member pool.
    Lane(usize),
}

/// Everything the request path reads, built once.
pub struct Gateway {
    /// The validated config.
    pub config: Config,
    /// The codec registry.
    pub codecs: CodecFor,
    /// Lanes, indexed like `config.models`.
    pub lanes: Vec<Lane>,
    /// One lane per provider for ad-hoc routes (`/{provider}/{model}/v1/messages`),
    /// indexed like `config.providers`; the wire model comes from the path.
    pub direct_lanes: Vec<Lane>,
    /// Pools, indexed like `config.pools`.
    pub pools: Vec<PoolState>,
    /// Caller-visible names.
    pub names: HashMap<Arc<str>, Target>,
    /// The HTTP transport for non-mock lanes.
    pub transport: Arc<dyn Transport>,
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
    /// Builds the runtime state with the default HTTP transport.
    pub fn new(config: Config, codecs: CodecFor) -> Result<Gateway, BuildError> {
        Gateway::with_transport(config, codecs, Arc::new(HttpTransport::new()))
    }

    /// Builds the runtime state over a given transport.
    pub fn with_transport(
        config: Config,
        codecs: CodecFor,
        transport: Arc<dyn Transport>,
    ) -> Result<Gateway, BuildError> {
        let mut lanes = Vec::with_capacity(config.models.len());
        for model in &config.models {
            let provider = &config.providers[model.provider];
            let mut lane = build_lane(provider, &model.name, codecs)?;
            lane.wire_model = model.wire_model.clone();
            lane.permits = model
                .max_concurrent
                .map(|n| Arc::new(Semaphore::new(n as usize)));
            lane.billing = model.billing;
            lanes.push(lane);
        }
        let direct_lanes = config
            .providers
            .iter()
            .map(|provider| build_lane(provider, &provider.name, codecs))
            .collect::<Result<Vec<_>, _>>()?;
        let pools = config
            .pools
            .iter()
            .map(|pool| PoolState {
                name: pool.name.clone(),
                members: pool.members.iter().map(|m| m.model).collect(),
                weights: pool.members.iter().map(|m| m.weight).collect(),
                failover: pool.failover,
                fallback: pool.fallback.clone(),
                weighted: Mutex::new(SmoothWeighted::new(pool.members.len())),
            })
            .collect();
        let mut names = HashMap::new();
        for (index, model) in config.models.iter().enumerate() {
            names.insert(model.name.clone(), Target::Lane(index));
        }
        for (index, pool) in config.pools.iter().enumerate() {
            names.insert(pool.name.clone(), Target::Pool(index));
        }
        Ok(Gateway {
            config,
            codecs,
            lanes,
            direct_lanes,
            pools,
            names,
            transport,
        })
    }

    /// The codec of `protocol`.
    pub fn codec(&self, protocol: Protocol) -> &'static dyn Codec {
        (self.codecs)(protocol)
    }

    /// Resolves a caller's model or pool name.
    pub fn resolve(&self, name: &str) -> Option<Target> {
        self.names.get(name).copied()
    }

    /// The provider called `name`.
    pub fn provider_index(&self, name: &str) -> Option<usize> {
        self.config.provider_index(name)
    }
}

/// A lane on `provider` named `name`, with no model-specific settings yet.
fn build_lane(
    provider: &switchyard_config::Provider,
    name: &Arc<str>,
    codecs: CodecFor,
) -> Result<Lane, BuildError> {
    let credentials = match &provider.auth {
        Auth::None => Credentials::None,
        Auth::ApiKey(key) => Credentials::ApiKey(key.clone()),
        Auth::Aws {
            access_key_id,
            secret_access_key,
            session_token,
            region,
        } => Credentials::Aws {
            access_key_id: access_key_id.clone(),
            secret_access_key: secret_access_key.clone(),
            session_token: session_token.clone(),
            region: region.clone(),
        },
    };
    // Static schemes are computed once; SigV4 signs every request.
    let static_auth = if matches!(credentials, Credentials::Aws { .. }) {
        None
    } else {
        let outbound = switchyard_codec::Outbound {
            method: "POST",
            url: "",
            body: &[],
            time: std::time::UNIX_EPOCH,
        };
        Some(
            codecs(provider.protocol)
                .auth_headers(&credentials, &outbound)
                .map_err(|source| BuildError::Credentials {
                    model: name.to_string(),
                    source,
                })?,
        )
    };
    let header = |text: &str| {
        HeaderValue::from_str(text).map_err(|_| BuildError::HeaderName(text.to_owned()))
    };
    Ok(Lane {
        name: name.clone(),
        provider: provider.name.clone(),
        protocol: provider.protocol,
        wire_model: name.clone(),
        endpoint: provider.endpoint.clone(),
        credentials,
        static_auth,
        permits: None,
        timeouts: provider.timeouts,
        billing: Billing::PayAsYouGo,
        lane_header: header(name)?,
        provider_header: header(&provider.name)?,
    })
}
