//! The handles `/mcp` mints for a caller, and the route they are bound
//! to. A message comes on `/mcp` (every name the config has) or on
//! `/mcp/<name>` (that name's servers only): its [`Scope`]. A session id or
//! a list cursor minted there is sealed (`switchyard_mcp_wire::handle`)
//! with the gateway secret (`mcp.handles.secret`; without one, a random
//! secret of this process) and bound to that route, the caller (its
//! owner: key, and a token's subject), the servers behind the route and
//! an expiry (`mcp.handles.ttl`), so it opens nowhere else.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{json, Value};
use switchyard_config::mcp::{Mcp, McpTransport};
use switchyard_mcp_wire::handle::{self, Binding, Kind, Refused, Sealer};
use switchyard_state::governance::{now_ms, Caller};

use crate::hub::{Failure, Route};
use crate::rpc;

/// The sealers of this process: the one of the configured secret (built
/// again when it changes) and the random one used without it.
pub struct Handles {
    /// The secret and its sealer.
    configured: Mutex<Option<(String, Arc<Sealer>)>>,
    /// This process's own, for a config without a secret.
    own: Option<Arc<Sealer>>,
}

impl Default for Handles {
    fn default() -> Handles {
        let mut secret = [0u8; 32];
        let own = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut secret)
            .ok()
            .and_then(|()| Sealer::new(&secret))
            .map(Arc::new);
        Handles { configured: Mutex::default(), own }
    }
}

impl Handles {
    /// The sealer `mcp` asks for.
    fn sealer(&self, mcp: &Mcp) -> Option<Arc<Sealer>> {
        let Some(secret) = &mcp.handles.secret else { return self.own.clone() };
        let mut configured = self.configured.lock().unwrap_or_else(PoisonError::into_inner);
        match &*configured {
            // The key is derived once per secret, not per message.
            Some((seen, sealer)) if seen == secret => Some(sealer.clone()),
            _ => {
                let sealer = Arc::new(Sealer::new(secret.as_bytes())?);
                *configured = Some((secret.clone(), sealer.clone()));
                Some(sealer)
            }
        }
    }

    /// What a message on `scope` by `caller` mints and opens handles
    /// against.
    pub(crate) fn bound(&self, mcp: &Mcp, scope: &Scope, caller: Option<&Caller>) -> Result<Bound, Failure> {
        let sealer =
            self.sealer(mcp).ok_or_else(|| Failure::new(rpc::INTERNAL_ERROR, "no key to seal MCP handles with"))?;
        let servers = scope.servers_digest(mcp);
        let caller = caller.map(|c| c.owner.to_string()).unwrap_or_default();
        Ok(Bound { sealer, route: scope.path.clone(), caller, servers, ttl_ms: mcp.handles.ttl.as_millis() as u64 })
    }
}

/// The route a message came on: its path and the one name it is limited
/// to (`None`: every name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// `/mcp` or `/mcp/<name>`.
    pub path: String,
    /// The name of `/mcp/<name>`.
    pub only: Option<Arc<str>>,
}

impl Scope {
    /// `/mcp`.
    pub fn all() -> Scope {
        Scope { path: "/mcp".into(), only: None }
    }

    /// `/mcp/<name>`.
    pub fn named(name: &str) -> Scope {
        Scope { path: format!("/mcp/{name}"), only: Some(Arc::from(name)) }
    }

    /// The names (with their servers) reachable on this route.
    pub(crate) fn routes(&self, mcp: &Mcp) -> Vec<Route> {
        let mut routes = mcp.routes();
        if let Some(only) = &self.only {
            routes.retain(|(name, _)| name == only);
        }
        routes
    }

    /// Whether the config has this route (`/mcp` always).
    pub(crate) fn exists(&self, mcp: &Mcp) -> bool {
        self.only.as_ref().is_none_or(|only| mcp.routes().iter().any(|(name, _)| name == only))
    }

    /// The digest of the servers behind this route: their names and where
    /// each is reached, so a handle stops opening once they change.
    fn servers_digest(&self, mcp: &Mcp) -> [u8; 32] {
        let routes = self.routes(mcp);
        let servers = routes.iter().flat_map(|(_, members)| members.iter().map(|&index| &mcp.servers[index]));
        handle::servers_digest(servers.map(|server| {
            let target = match &server.transport {
                McpTransport::Http { url } => url.as_str(),
                McpTransport::Stdio { command, .. } => command.as_str(),
            };
            (&*server.name, target)
        }))
    }
}

/// One message's sealer and binding.
pub(crate) struct Bound {
    sealer: Arc<Sealer>,
    route: String,
    caller: String,
    servers: [u8; 32],
    ttl_ms: u64,
}

impl Bound {
    fn binding(&self) -> Binding<'_> {
        Binding { route: &self.route, caller: &self.caller, servers: &self.servers }
    }

    /// A new handle of `kind` carrying `payload`; `None` when the OS gave
    /// no randomness for its nonce.
    pub(crate) fn mint(&self, kind: Kind, payload: &[u8]) -> Option<String> {
        let mut nonce = [0u8; 12];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce).ok()?;
        Some(self.sealer.seal(kind, self.binding(), now_ms().saturating_add(self.ttl_ms), payload, nonce))
    }

    /// The payload of `handle`, a `kind` minted for this binding.
    pub(crate) fn open(&self, kind: Kind, handle: &str) -> Result<Vec<u8>, Refused> {
        self.sealer.open(kind, handle, self.binding(), now_ms())
    }
}

/// A refused handle's reason, for the error's `data`.
pub(crate) fn reason(refused: Refused) -> Value {
    let reason = match refused {
        Refused::Forged => "forged",
        Refused::OtherKind => "other_kind",
        Refused::OtherCaller => "other_caller",
        Refused::OtherRoute => "other_route",
        Refused::OtherServers => "other_servers",
        Refused::Expired => "expired",
    };
    json!({ "reason": reason })
}

/// A list's cursor: which list, and where its next page starts.
pub(crate) fn cursor_payload(list: u8, offset: usize) -> Vec<u8> {
    let mut payload = vec![list];
    payload.extend_from_slice(&(offset as u32).to_be_bytes());
    payload
}

/// The offset a cursor of list `list` carries.
pub(crate) fn cursor_offset(list: u8, payload: &[u8]) -> Option<usize> {
    match payload {
        [tag, a, b, c, d] if *tag == list => Some(u32::from_be_bytes([*a, *b, *c, *d]) as usize),
        _ => None,
    }
}
