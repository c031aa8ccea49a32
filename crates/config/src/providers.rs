//! The `providers:` wing: where each backend is, which protocol it
//! speaks, how calls to it are signed, its timeouts, headers, ad-hoc and
//! raw routes; raw → validated here, checked against the other sections
//! by the pipeline.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::issue::{list, Issue};
use crate::units::duration_or;
use crate::{
    egress, passthrough, region_from_host, translation, AuthMode, Credentials, Egress, ErrorMap, JwtIssuer, Protocol,
    StatusClass,
};

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
    provider: &RawProvider,
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
    let endpoint = self::endpoint(&path, &provider.base_url, issues);
    let auth = self::credentials(&path, provider, protocol, issues);
    let timeouts = self::timeouts(&path, &provider.timeouts, issues);
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
    let adhoc = self::adhoc(&path, provider.adhoc.as_ref(), issues);
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

/// Where a provider is: an http(s) base URL without its trailing slash, or
/// the built-in fake.
fn endpoint(path: &str, base_url: &str, issues: &mut Vec<Issue>) -> Endpoint {
    if base_url == "mock://" || base_url.starts_with("mock://") {
        Endpoint::Mock
    } else if base_url.starts_with("http://") || base_url.starts_with("https://") {
        Endpoint::Http(Arc::from(base_url.trim_end_matches('/')))
    } else {
        issues.push(Issue::new(
            &format!("{path}.base_url"),
            format!("`{}` is not an http(s) or mock:// URL", base_url),
            "write e.g. https://api.openai.com or mock:// for the built-in fake",
        ));
        Endpoint::Mock
    }
}

/// How calls to a provider are signed: its key, AWS SigV4 (Bedrock only,
/// the region from the host when not given), or not at all.
fn credentials(path: &str, provider: &RawProvider, protocol: Protocol, issues: &mut Vec<Issue>) -> Credentials {
    match (&provider.api_key, &provider.aws) {
        (Some(_), Some(_)) => {
            issues.push(Issue::new(
                path,
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
    }
}

/// A provider's upstream timeouts, each defaulted.
fn timeouts(path: &str, t: &RawTimeouts, issues: &mut Vec<Issue>) -> Timeouts {
    let defaults = Timeouts::default();
    Timeouts {
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
    }
}

/// A provider's ad-hoc route: closed, open to any wire model, or to these.
fn adhoc(path: &str, adhoc: Option<&serde_yaml_ng::Value>, issues: &mut Vec<Issue>) -> Adhoc {
    match adhoc {
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
    }
}

/// The raw route is for keys the operator granted it: it needs callers who
/// prove who they are, and a token issuer's grants must name providers
/// that open it.
pub(crate) fn passthrough_grants(providers: &[Provider], jwt: &[JwtIssuer], auth: AuthMode, issues: &mut Vec<Issue>) {
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

/// Every `providers:` entry, in name order: a provider's index is its
/// place here.
pub(crate) fn validate(
    raw: &BTreeMap<String, RawProvider>,
    issues: &mut Vec<Issue>,
    warnings: &mut Vec<Issue>,
) -> Vec<Provider> {
    raw.iter().map(|(name, provider)| validate_provider(name, provider, issues, warnings)).collect()
}

/// An open ad-hoc route's names (`provider/model`, `provider/*`) are no
/// model's or pool's: a caller naming one would not know which it gets.
pub(crate) fn check_adhoc_names(
    providers: &[Provider],
    model_names: &[&str],
    pool_names: &[&str],
    issues: &mut Vec<Issue>,
) {
    for provider in providers {
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
}
