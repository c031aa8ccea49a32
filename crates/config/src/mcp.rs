//! `mcp:`: the tool servers the gateway's `/mcp` endpoint fronts. Each is
//! reached over streamable HTTP (`url`) or spawned as a local command
//! speaking stdio (`command`, `args`, and only the `env` it names); its
//! credential is a static bearer, an OAuth client-credentials token, or the
//! caller's own (`passthrough`). `pools` puts twins behind one name, tried
//! in order. Names are what callers see before `__` in a tool's name, so
//! they are lower-case letters, digits and `-`. A stdio server's command,
//! arguments and environment run on the host, so they change only in the
//! file: [`file_only_changes`] names what a version applied over the admin
//! API may not change. [`grants`] reads the `mcp:` grant lists that keys'
//! templates carry (members', token issuers', certificates').

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::egress::{EgressAuth, RawClientCredentials};
use crate::ssrf::check_outbound_url;
use crate::{duration_or, Issue};

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// Streamable HTTP at `url`.
    Http {
        /// The endpoint (its path included).
        url: String,
    },
    /// A local command, spawned without a shell, speaking JSON-RPC lines
    /// on its stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// The only environment it gets.
        env: Vec<(String, String)>,
    },
}

/// The credential sent to a server.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum McpAuth {
    /// None.
    #[default]
    None,
    /// `Authorization: Bearer <token>`.
    Bearer(String),
    /// A token fetched with OAuth client credentials.
    Fetched(EgressAuth),
    /// The caller's own token (`x-switchyard-mcp-authorization`), when it
    /// sends one.
    Passthrough,
}

impl std::fmt::Debug for McpAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Secrets never reach logs.
        match self {
            McpAuth::None => f.write_str("None"),
            McpAuth::Bearer(_) => f.write_str("Bearer(..)"),
            McpAuth::Fetched(auth) => f.debug_tuple("Fetched").field(auth).finish(),
            McpAuth::Passthrough => f.write_str("Passthrough"),
        }
    }
}

/// `mcp.servers.<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// Its name.
    pub name: Arc<str>,
    /// How it is reached.
    pub transport: McpTransport,
    /// What it is sent as credential.
    pub auth: McpAuth,
    /// Tools (their own names) that may run twice: only these are retried
    /// on a twin after the call was sent.
    pub idempotent: Vec<String>,
    /// Nano-USD per call, when tool calls are priced.
    pub price_nano: Option<u64>,
    /// How long one call may take.
    pub timeout: Duration,
    /// The protocol revision spoken to it (HTTP only).
    pub protocol: McpProtocol,
}

/// Which revision of MCP the gateway speaks to an HTTP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum McpProtocol {
    /// The `initialize` handshake (2025-11-25 and before): a session when
    /// the server keeps one.
    #[default]
    Handshake,
    /// 2026-07-28: no handshake and no session; every request carries its
    /// protocol version, client info and capabilities.
    Stateless,
}

/// `mcp.handles`: how the handles the gateway mints for callers (session
/// ids, list cursors) are sealed.
#[derive(Clone, PartialEq, Eq)]
pub struct McpHandles {
    /// The gateway secret they are sealed with (`None`: a random one per
    /// process, so a handle opens only on the instance that minted it).
    pub secret: Option<String>,
    /// How long a handle opens after it was minted.
    pub ttl: Duration,
    /// Items per page of a listing (`None`: one page, no cursor minted).
    pub page_size: Option<usize>,
}

impl std::fmt::Debug for McpHandles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret never reaches logs.
        f.debug_struct("McpHandles")
            .field("secret", &self.secret.as_ref().map(|_| ".."))
            .field("ttl", &self.ttl)
            .field("page_size", &self.page_size)
            .finish()
    }
}

/// `mcp.oauth`: `/mcp` as an OAuth 2.1 protected resource (RFC 9728): its
/// canonical URI, which callers' tokens must name as their audience (RFC
/// 8707), and the authorization servers that issue them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpOauth {
    /// The resource's canonical URI (`https://gateway.example/mcp`).
    pub resource: String,
    /// Issuers of tokens for it.
    pub authorization_servers: Vec<String>,
    /// Scopes it names (`scopes_supported`).
    pub scopes: Vec<String>,
}

/// `mcp.pools.<name>`: servers serving the same tools, tried in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPool {
    /// The name callers see.
    pub name: Arc<str>,
    /// Indexes into [`Mcp::servers`].
    pub members: Vec<usize>,
}

/// `mcp:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mcp {
    /// Every server, in name order.
    pub servers: Vec<McpServer>,
    /// Twins behind one name.
    pub pools: Vec<McpPool>,
    /// Guardrail policies applied to tool arguments and results (indexes
    /// into the config's policies).
    pub policies: Vec<usize>,
    /// How long an idle session is remembered.
    pub session_ttl: Duration,
    /// Withhold a tool until an admin approved its schema (else only a
    /// tool whose approved schema changed is withheld).
    pub require_approval: bool,
    /// Sessions one key may hold open at once (in a fleet, across it).
    pub sessions_per_key: usize,
    /// How the handles minted for callers are sealed.
    pub handles: McpHandles,
    /// `/mcp` as an OAuth protected resource, when configured.
    pub oauth: Option<McpOauth>,
}

impl Mcp {
    /// The names callers see (pools, then servers no pool holds), each
    /// with its servers in the order they are tried.
    pub fn routes(&self) -> Vec<(Arc<str>, Vec<usize>)> {
        let mut routes: Vec<(Arc<str>, Vec<usize>)> =
            self.pools.iter().map(|pool| (pool.name.clone(), pool.members.clone())).collect();
        for (index, server) in self.servers.iter().enumerate() {
            if !self.pools.iter().any(|pool| pool.members.contains(&index)) {
                routes.push((server.name.clone(), vec![index]));
            }
        }
        routes
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMcp {
    #[serde(default)]
    pub servers: BTreeMap<String, RawMcpServer>,
    #[serde(default)]
    pub pools: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub policies: Vec<String>,
    pub session_ttl: Option<String>,
    #[serde(default)]
    pub require_approval: bool,
    pub sessions_per_key: Option<u64>,
    pub handles: Option<RawMcpHandles>,
    pub oauth: Option<RawMcpOauth>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMcpHandles {
    pub secret: Option<String>,
    pub ttl: Option<String>,
    pub page_size: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMcpOauth {
    pub resource: String,
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    #[serde(default)]
    pub scopes: Vec<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMcpServer {
    pub url: Option<String>,
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub auth: Option<RawMcpAuth>,
    #[serde(default)]
    pub idempotent: Vec<String>,
    pub price_per_call: Option<f64>,
    pub timeout: Option<String>,
    pub protocol: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMcpAuth {
    pub bearer: Option<String>,
    pub oauth_client_credentials: Option<RawClientCredentials>,
    #[serde(default)]
    pub passthrough: bool,
}

/// A name callers may see before `__`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
}

pub(crate) fn validate(
    raw: Option<&RawMcp>,
    policies: &[switchyard_guard::PolicySpec],
    issues: &mut Vec<Issue>,
) -> Option<Mcp> {
    let raw = raw?;
    let named = |path: &str, name: &str, issues: &mut Vec<Issue>| {
        if !valid_name(name) {
            issues.push(Issue::new(
                path,
                format!("`{name}` cannot name MCP tools (`<name>__<tool>`)"),
                "use lower-case letters, digits and `-` (at most 64)",
            ));
        }
    };
    let mut servers = Vec::new();
    for (name, server) in &raw.servers {
        let at = format!("mcp.servers.{name}");
        named(&at, name, issues);
        let transport = match (&server.url, &server.command) {
            (Some(url), None) => {
                if let Err(message) = check_outbound_url(url) {
                    issues.push(Issue::new(
                        &format!("{at}.url"),
                        message,
                        "name the server's streamable HTTP endpoint",
                    ));
                }
                if !server.args.is_empty() || !server.env.is_empty() {
                    issues.push(Issue::new(&at, "args and env are for a command", "remove them, or use command:"));
                }
                McpTransport::Http { url: url.clone() }
            }
            (None, Some(command)) => {
                if command.trim().is_empty() {
                    issues.push(Issue::new(&format!("{at}.command"), "is empty", "name the program to run"));
                }
                McpTransport::Stdio {
                    command: command.clone(),
                    args: server.args.clone(),
                    env: server.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                }
            }
            _ => {
                issues.push(Issue::new(
                    &at,
                    "a server has exactly one of url and command",
                    "write `url:` for streamable HTTP, or `command:` for a local stdio server",
                ));
                continue;
            }
        };
        let auth = server.auth.as_ref().map_or(McpAuth::None, |auth| mcp_auth(&at, auth, &transport, issues));
        let price_nano = server.price_per_call.and_then(|usd| {
            if !(0.0..=1000.0).contains(&usd) || !usd.is_finite() {
                issues.push(Issue::new(&format!("{at}.price_per_call"), "must be 0 to 1000 (USD)", "write e.g. 0.001"));
                return None;
            }
            Some((usd * 1e9).round() as u64)
        });
        let timeout = duration_or(server.timeout.as_deref(), Duration::from_secs(60), &format!("{at}.timeout"), issues);
        let protocol = match (server.protocol.as_deref(), &transport) {
            (None | Some("2025-11-25"), _) => McpProtocol::Handshake,
            (Some("2026-07-28"), McpTransport::Http { .. }) => McpProtocol::Stateless,
            (Some("2026-07-28"), McpTransport::Stdio { .. }) => {
                issues.push(Issue::new(
                    &format!("{at}.protocol"),
                    "a stdio server is spoken to with the handshake",
                    "remove protocol:, or reach the server over HTTP",
                ));
                McpProtocol::Handshake
            }
            (Some(other), _) => {
                issues.push(Issue::new(
                    &format!("{at}.protocol"),
                    format!("`{other}` is not a revision spoken upstream"),
                    "write 2025-11-25 (the initialize handshake, the default) or 2026-07-28 (stateless)",
                ));
                McpProtocol::Handshake
            }
        };
        servers.push(McpServer {
            name: Arc::from(name.as_str()),
            transport,
            auth,
            idempotent: server.idempotent.clone(),
            price_nano,
            timeout: timeout.clamp(Duration::from_millis(100), Duration::from_secs(3600)),
            protocol,
        });
    }
    let mut pools = Vec::new();
    for (name, members) in &raw.pools {
        let at = format!("mcp.pools.{name}");
        named(&at, name, issues);
        if raw.servers.contains_key(name) {
            issues.push(Issue::new(&at, "a pool and a server share the name", "name the pool apart from its servers"));
        }
        let mut indexes = Vec::new();
        for member in members {
            match servers.iter().position(|s| &*s.name == member.as_str()) {
                Some(index) if pools.iter().any(|p: &McpPool| p.members.contains(&index)) => {
                    issues.push(Issue::new(&at, format!("`{member}` is in two pools"), "put each server in one pool"))
                }
                Some(index) => indexes.push(index),
                None => issues.push(Issue::new(
                    &at,
                    format!("`{member}` is not in mcp.servers"),
                    "list servers defined under mcp.servers",
                )),
            }
        }
        if members.len() < 2 {
            issues.push(Issue::new(&at, "a pool needs two servers or more", "list the server and its twin"));
        }
        pools.push(McpPool { name: Arc::from(name.as_str()), members: indexes });
    }
    let policies = crate::guard::attached("mcp.policies", &raw.policies, policies, issues);
    let session_ttl = duration_or(raw.session_ttl.as_deref(), Duration::from_secs(3600), "mcp.session_ttl", issues)
        .clamp(Duration::from_secs(10), Duration::from_secs(7 * 86_400));
    let sessions_per_key = match raw.sessions_per_key {
        None => DEFAULT_SESSIONS_PER_KEY,
        Some(n @ 1..=100_000) => n as usize,
        Some(n) => {
            issues.push(Issue::new("mcp.sessions_per_key", format!("{n} is out of range"), "write 1 to 100000"));
            DEFAULT_SESSIONS_PER_KEY
        }
    };
    let handles = handles(raw.handles.as_ref(), issues);
    let oauth = raw.oauth.as_ref().map(|oauth| {
        // RFC 8707: an absolute URI without a fragment.
        let absolute = oauth.resource.starts_with("https://") || oauth.resource.starts_with("http://");
        if !absolute || oauth.resource.contains('#') {
            issues.push(Issue::new(
                "mcp.oauth.resource",
                "must be an absolute http(s) URI without a fragment",
                "name /mcp as callers reach it, e.g. https://gateway.example/mcp",
            ));
        }
        McpOauth {
            resource: oauth.resource.clone(),
            authorization_servers: oauth.authorization_servers.clone(),
            scopes: oauth.scopes.clone(),
        }
    });
    Some(Mcp {
        servers,
        pools,
        policies,
        session_ttl,
        require_approval: raw.require_approval,
        sessions_per_key,
        handles,
        oauth,
    })
}

/// The shortest gateway secret taken: 256 bits as hex or base64 are
/// longer than this.
const MIN_SECRET: usize = 32;

fn handles(raw: Option<&RawMcpHandles>, issues: &mut Vec<Issue>) -> McpHandles {
    let default = McpHandles { secret: None, ttl: Duration::from_secs(86_400), page_size: None };
    let Some(raw) = raw else { return default };
    let secret = raw.secret.clone().filter(|s| !s.is_empty());
    if secret.as_ref().is_some_and(|s| s.len() < MIN_SECRET) {
        issues.push(Issue::new(
            "mcp.handles.secret",
            format!("shorter than {MIN_SECRET} characters"),
            "use a random secret of 32 bytes or more, e.g. `openssl rand -hex 32`",
        ));
    }
    let ttl = duration_or(raw.ttl.as_deref(), default.ttl, "mcp.handles.ttl", issues)
        .clamp(Duration::from_secs(1), Duration::from_secs(30 * 86_400));
    let page_size = match raw.page_size {
        None => None,
        Some(n @ 1..=10_000) => Some(n as usize),
        Some(n) => {
            issues.push(Issue::new("mcp.handles.page_size", format!("{n} is out of range"), "write 1 to 10000"));
            None
        }
    };
    McpHandles { secret, ttl, page_size }
}

/// Sessions one key holds open at once unless `mcp.sessions_per_key` says.
pub const DEFAULT_SESSIONS_PER_KEY: usize = 1_000;

/// A grant list of a keys' template at `path` (`auth.jwt[0].mcp`): each
/// grant checked as the admin API checks a key's.
pub(crate) fn grants(raw: &[String], path: &str, issues: &mut Vec<Issue>) -> Vec<String> {
    use switchyard_governance::mcp_grant::{check, MAX_GRANTS};
    if raw.len() > MAX_GRANTS {
        issues.push(Issue::new(
            path,
            format!("at most {MAX_GRANTS} grants"),
            "grant whole servers (`tickets`) or globs",
        ));
    }
    for (index, grant) in raw.iter().enumerate() {
        if let Err(message) = check(grant) {
            issues.push(Issue::new(
                &format!("{path}[{index}]"),
                message,
                "write the grant in one of the shapes named, or remove it",
            ));
        }
    }
    raw.to_vec()
}

/// What `candidate` adds or changes of the stdio servers `running` has:
/// a command, its arguments or its environment runs on this host, so it
/// comes from the file on it, never from a version applied over the admin
/// API (or one another instance recorded). Removing a stdio server, or
/// changing anything else of one, is not named.
pub fn file_only_changes(running: Option<&Mcp>, candidate: Option<&Mcp>) -> Vec<Issue> {
    let stdio = |server: &McpServer| match &server.transport {
        McpTransport::Stdio { command, args, env } => Some((command.clone(), args.clone(), env.clone())),
        McpTransport::Http { .. } => None,
    };
    let mut issues = Vec::new();
    for server in candidate.map_or(&[][..], |mcp| &mcp.servers[..]) {
        let Some(wanted) = stdio(server) else { continue };
        let before = running.and_then(|mcp| mcp.servers.iter().find(|s| s.name == server.name)).and_then(stdio);
        let what = match &before {
            None => "adds a stdio server",
            Some(before) if *before == wanted => continue,
            Some(_) => "changes a stdio server's command, args or env",
        };
        issues.push(Issue::new(
            &format!("mcp.servers.{}", server.name),
            format!(
                "this config {what}; a command runs on the gateway's host, so it changes only in the config file there"
            ),
            "edit the config file on each host and reload it (SIGHUP or POST /api/v1/admin/config/reload)",
        ));
    }
    issues
}

fn mcp_auth(at: &str, auth: &RawMcpAuth, transport: &McpTransport, issues: &mut Vec<Issue>) -> McpAuth {
    let at = format!("{at}.auth");
    if matches!(transport, McpTransport::Stdio { .. }) {
        issues.push(Issue::new(&at, "a stdio server is not sent credentials", "pass them in its env"));
    }
    match (&auth.bearer, &auth.oauth_client_credentials, auth.passthrough) {
        (Some(token), None, false) => {
            if token.trim().is_empty() {
                issues.push(Issue::new(
                    &format!("{at}.bearer"),
                    "is empty (a `${VAR}` set to nothing?)",
                    "set the token",
                ));
            }
            McpAuth::Bearer(token.clone())
        }
        (None, Some(client), false) => {
            if let Err(message) = check_outbound_url(&client.token_url) {
                issues.push(Issue::new(
                    &format!("{at}.oauth_client_credentials.token_url"),
                    message,
                    "use the token endpoint",
                ));
            }
            McpAuth::Fetched(EgressAuth::ClientCredentials {
                token_url: client.token_url.clone(),
                client_id: client.client_id.clone(),
                client_secret: client.client_secret.clone(),
                scope: client.scope.clone(),
            })
        }
        (None, None, true) => McpAuth::Passthrough,
        _ => {
            issues.push(Issue::new(
                &at,
                "auth is one of bearer, oauth_client_credentials and passthrough",
                "keep one way to authenticate",
            ));
            McpAuth::None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(yaml: &str) -> (Option<Mcp>, Vec<Issue>) {
        let raw: RawMcp = serde_yaml_ng::from_str(yaml).unwrap_or_default();
        let mut issues = Vec::new();
        (validate(Some(&raw), &[], &mut issues), issues)
    }

    #[test]
    fn servers_pools_and_routes() {
        let (mcp, issues) = load(
            "servers:\n  files: { command: /bin/files, env: { HOME: /tmp } }\n  t-a: { url: http://127.0.0.1:7000/mcp, idempotent: [read], price_per_call: 0.002 }\n  t-b: { url: http://127.0.0.1:7001/mcp }\npools:\n  tickets: [t-a, t-b]\n",
        );
        assert!(issues.is_empty(), "{issues:?}");
        let mcp = mcp.unwrap_or_else(|| unreachable!());
        assert_eq!(mcp.servers[1].price_nano, Some(2_000_000));
        let routes: Vec<_> = mcp.routes().into_iter().map(|(name, members)| (name.to_string(), members)).collect();
        assert_eq!(routes, vec![("tickets".to_owned(), vec![1, 2]), ("files".to_owned(), vec![0])]);
    }

    #[test]
    fn mistakes_are_named() {
        let (_, issues) = load(
            "servers:\n  Bad_Name: { url: http://127.0.0.1:1/mcp }\n  both: { url: http://127.0.0.1:1/mcp, command: x }\n  io: { command: x, auth: { bearer: t } }\npools:\n  p: [io, ghost]\n",
        );
        let paths: Vec<_> = issues.iter().map(|i| i.path.as_str()).collect();
        assert!(paths.contains(&"mcp.servers.Bad_Name"), "{paths:?}");
        assert!(paths.contains(&"mcp.servers.both"), "{paths:?}");
        assert!(paths.contains(&"mcp.servers.io.auth"), "{paths:?}");
        assert!(paths.contains(&"mcp.pools.p"), "{paths:?}");
    }

    #[test]
    fn a_key_holds_a_bounded_number_of_sessions() {
        let (mcp, _) = load("servers:\n  t: { url: http://127.0.0.1:7000/mcp }\n");
        assert_eq!(mcp.map(|m| m.sessions_per_key), Some(DEFAULT_SESSIONS_PER_KEY));
        let (mcp, _) = load("sessions_per_key: 3\n");
        assert_eq!(mcp.map(|m| m.sessions_per_key), Some(3));
        let (_, issues) = load("sessions_per_key: 0\n");
        assert_eq!(issues.iter().map(|i| i.path.as_str()).collect::<Vec<_>>(), ["mcp.sessions_per_key"]);
    }

    #[test]
    fn a_stdio_command_changes_only_in_the_file() {
        let servers = |text: &str| load(text).0;
        let running = servers(
            "servers:\n  files: { command: /bin/files, args: [-v], env: { ROOT: /srv } }\n  t: { url: http://127.0.0.1:7000/mcp }\n",
        );
        let changed = |text: &str| {
            file_only_changes(running.as_ref(), servers(text).as_ref()).into_iter().map(|i| i.path).collect::<Vec<_>>()
        };
        // The same command, with anything else changed, or a server removed: fine.
        assert!(changed("servers:\n  files: { command: /bin/files, args: [-v], env: { ROOT: /srv }, timeout: 5s }\n")
            .is_empty());
        assert!(changed("servers:\n  t: { url: http://127.0.0.1:7001/mcp }\n").is_empty());
        // Added, or its command, args or env changed: named.
        for text in [
            "servers:\n  files: { command: /bin/sh, args: [-v], env: { ROOT: /srv } }\n",
            "servers:\n  files: { command: /bin/files, args: [-c, x], env: { ROOT: /srv } }\n",
            "servers:\n  files: { command: /bin/files, args: [-v], env: { ROOT: /, LD_PRELOAD: /tmp/x.so } }\n",
            "servers:\n  files: { command: /bin/files, args: [-v], env: { ROOT: /srv } }\n  t: { command: /bin/sh }\n",
        ] {
            assert!(!changed(text).is_empty(), "{text}");
        }
        let issues = file_only_changes(None, servers("servers:\n  new: { command: /bin/sh }\n").as_ref());
        assert_eq!(issues[0].path, "mcp.servers.new");
        assert!(issues[0].message.contains("adds a stdio server"), "{}", issues[0]);
        assert!(issues[0].fix.contains("config file"), "{}", issues[0]);
    }

    #[test]
    fn template_grants_are_checked() {
        let mut issues = Vec::new();
        let kept =
            grants(&["files__*".into(), "Files".into(), "resource:files".into()], "auth.jwt[0].mcp", &mut issues);
        assert_eq!(kept.len(), 3);
        let paths: Vec<_> = issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(paths, ["auth.jwt[0].mcp[1]", "auth.jwt[0].mcp[2]"]);
    }
}
