//! The listeners' limits (`server:`): what a slow, hostile or greedy client
//! may hold, each with a safe default. A connection or request over a limit
//! is refused in the caller's protocol, never left hanging.

use std::time::Duration;

use crate::{duration_or, raw, size_or, Issue};

/// Listener settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// Largest request body accepted.
    pub body_limit: usize,
    /// How long in-flight requests may finish after a shutdown signal.
    pub drain_timeout: Duration,
    /// From the first byte of a request to the end of its headers.
    pub header_read_timeout: Duration,
    /// How long a connection may sit idle between requests.
    pub keepalive_idle: Duration,
    /// How long reading a whole request body may take.
    pub body_read_timeout: Duration,
    /// How long a write to a caller may make no progress (a caller that
    /// stopped reading) before its connection is closed and what it held
    /// upstream is released.
    pub write_timeout: Duration,
    /// Open connections per listener; past it, new connections are answered
    /// with an overload error and closed.
    pub max_connections: usize,
    /// Requests in flight per listener; past it, an overload error.
    pub max_in_flight: usize,
    /// Request-body bytes one connection may hold at once (all its HTTP/2
    /// streams together); at least `body_limit`.
    pub max_connection_body: usize,
    /// HTTP/2 limits.
    pub http2: Http2,
    /// TLS on the data listener (`None`: plain HTTP).
    pub tls: Option<ServerTls>,
}

/// `server.tls`: the data listener speaks TLS with this certificate and
/// key (PEM files, read again on SIGHUP and when they change); with
/// `client_ca`, every client presents a certificate that CA signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTls {
    /// The certificate chain.
    pub cert: String,
    /// Its private key.
    pub key: String,
    /// The CA that signs client certificates (mTLS), when required.
    pub client_ca: Option<String>,
    /// What a client certificate's common name names, when it stands for
    /// a caller that sends no key.
    pub client_identity: Option<ClientIdentity>,
    /// The MCP grants of a caller a certificate names as a group
    /// (`client_identity.mcp`; a key's own grants apply to a key's
    /// caller). Empty: none.
    pub client_mcp: Vec<String>,
}

/// What a verified client certificate's common name names
/// (`server.tls.client_identity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientIdentity {
    /// A virtual key, by its name (a name two keys share names none).
    Key,
    /// A group: the caller draws on its budget tree as `cert:<group>`.
    Group,
}

/// HTTP/2 limits of a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Http2 {
    /// Concurrent streams per connection.
    pub max_concurrent_streams: u32,
    /// Largest header list of an HTTP/2 request (an HTTP/1.1 head is
    /// capped at 8 KiB, as nginx's header buffers are).
    pub max_header_list_size: u32,
}

impl Default for Server {
    fn default() -> Server {
        Server {
            body_limit: 32 << 20,
            drain_timeout: Duration::from_secs(30),
            header_read_timeout: Duration::from_secs(10),
            keepalive_idle: Duration::from_secs(75),
            body_read_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(60),
            max_connections: 10_000,
            max_in_flight: 10_000,
            max_connection_body: 64 << 20,
            http2: Http2 { max_concurrent_streams: 128, max_header_list_size: 16 << 10 },
            tls: None,
        }
    }
}

/// Largest `body_limit` and `max_connection_body` (a gateway holds bodies in memory).
const MAX_BODY: u64 = 1 << 30;

pub(crate) fn validate(raw: &raw::RawServer, issues: &mut Vec<Issue>) -> Server {
    let defaults = Server::default();
    let duration = |value: &Option<String>, default: Duration, key: &str, issues: &mut Vec<Issue>| {
        let path = format!("server.{key}");
        let duration = duration_or(value.as_deref(), default, &path, issues);
        if duration.is_zero() {
            issues.push(Issue::new(&path, "a zero timeout would refuse every client", "write e.g. 30s"));
            return default;
        }
        duration
    };
    let count = |value: Option<u64>, default: usize, key: &str, issues: &mut Vec<Issue>| match value {
        None => default,
        Some(0) => {
            issues.push(Issue::new(&format!("server.{key}"), "0 would refuse everything", "set it to 1 or more"));
            default
        }
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
    };
    let body_limit =
        size_or(raw.body_limit.as_ref(), defaults.body_limit as u64, MAX_BODY, "server.body_limit", issues);
    let max_connection_body = match raw.max_connection_body {
        Some(_) => size_or(raw.max_connection_body.as_ref(), 0, MAX_BODY, "server.max_connection_body", issues),
        None => body_limit.max(defaults.max_connection_body as u64),
    };
    if max_connection_body < body_limit {
        issues.push(Issue::new(
            "server.max_connection_body",
            "max_connection_body is smaller than body_limit, so a largest body could never be read",
            "raise max_connection_body to at least body_limit",
        ));
    }
    let http2 = raw.http2.as_ref();
    let streams = http2.and_then(|h| h.max_concurrent_streams).unwrap_or(defaults.http2.max_concurrent_streams);
    if streams == 0 {
        issues.push(Issue::new(
            "server.http2.max_concurrent_streams",
            "0 streams would refuse every request",
            "set it to 1 or more",
        ));
    }
    let header_list = size_or(
        http2.and_then(|h| h.max_header_list_size.as_ref()),
        u64::from(defaults.http2.max_header_list_size),
        16 << 20,
        "server.http2.max_header_list_size",
        issues,
    );
    if header_list < 8 << 10 {
        issues.push(Issue::new(
            "server.http2.max_header_list_size",
            "less than 8KiB would refuse ordinary SDK requests",
            "write 8KiB or more",
        ));
    }
    Server {
        body_limit: body_limit as usize,
        drain_timeout: duration_or(
            raw.drain_timeout.as_deref(),
            defaults.drain_timeout,
            "server.drain_timeout",
            issues,
        ),
        header_read_timeout: duration(
            &raw.header_read_timeout,
            defaults.header_read_timeout,
            "header_read_timeout",
            issues,
        ),
        keepalive_idle: duration(&raw.keepalive_idle, defaults.keepalive_idle, "keepalive_idle", issues),
        body_read_timeout: duration(&raw.body_read_timeout, defaults.body_read_timeout, "body_read_timeout", issues),
        write_timeout: duration(&raw.write_timeout, defaults.write_timeout, "write_timeout", issues),
        max_connections: count(raw.max_connections, defaults.max_connections, "max_connections", issues),
        max_in_flight: count(raw.max_in_flight, defaults.max_in_flight, "max_in_flight", issues),
        max_connection_body: max_connection_body as usize,
        http2: Http2 { max_concurrent_streams: streams.max(1), max_header_list_size: header_list as u32 },
        tls: raw.tls.as_ref().map(|tls| server_tls(tls, issues)),
    }
}

fn server_tls(tls: &raw::RawServerTls, issues: &mut Vec<Issue>) -> ServerTls {
    const AT: &str = "server.tls.client_identity";
    let detailed = match &tls.client_identity {
        None => None,
        Some(serde_yaml_ng::Value::String(names)) => {
            Some(raw::RawClientIdentityDetailed { names: names.clone(), mcp: Vec::new() })
        }
        Some(value) => match serde_yaml_ng::from_value::<raw::RawClientIdentityDetailed>(value.clone()) {
            Ok(detailed) => Some(detailed),
            Err(err) => {
                issues.push(Issue::new(
                    AT,
                    err.to_string(),
                    "write key, group, or { names: group, mcp: [GRANT, ...] }",
                ));
                None
            }
        },
    };
    let (names, mcp) = match &detailed {
        None => (None, &[][..]),
        Some(detailed) => (Some(detailed.names.as_str()), &detailed.mcp[..]),
    };
    let client_identity = match names {
        None => None,
        Some(_) if tls.client_ca.is_none() => {
            issues.push(Issue::new(
                AT,
                "client certificates name callers only when they are required",
                "set server.tls.client_ca",
            ));
            None
        }
        Some("key") => Some(ClientIdentity::Key),
        Some("group") => Some(ClientIdentity::Group),
        Some(other) => {
            issues.push(Issue::new(
                AT,
                format!("`{other}` is not key or group"),
                "write key (the common name is a key's name) or group",
            ));
            None
        }
    };
    if client_identity == Some(ClientIdentity::Key) && !mcp.is_empty() {
        issues.push(Issue::new(
            &format!("{AT}.mcp"),
            "a certificate that names a key is that key's caller, with that key's own grants",
            "remove mcp here and grant the key its mcp list, or write names: group",
        ));
    }
    ServerTls {
        cert: tls.cert.clone(),
        key: tls.key.clone(),
        client_ca: tls.client_ca.clone(),
        client_identity,
        client_mcp: crate::mcp::grants(mcp, &format!("{AT}.mcp"), issues),
    }
}
