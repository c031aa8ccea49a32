//! Who may call, who may administer, where records live, and the budget
//! tree: `auth:`, `admin:`, `storage:`, `groups:` and `governance:`.
//! Absent `auth:`, the data plane is open (the embedded demo).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use switchyard_governance::{Budget, Limits};

pub use crate::spend::Scope;
pub(crate) use crate::spend::{budget, limits, RawBudget, RawLimits};
use crate::{duration_or, Issue};

/// How callers are authenticated on the data plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthMode {
    /// Anyone who reaches the port (the default without `auth:`).
    #[default]
    Open,
    /// A virtual key (or, for Bedrock, a SigV4 signature by a minted pair).
    Keys,
}

/// An admin token.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken {
    /// Its name in the audit log (never the token).
    pub name: Arc<str>,
    /// The token.
    pub token: String,
    /// What it may do.
    pub scope: Scope,
    /// A tenant admin's reach: the group whose subtree it administers, and
    /// the pools and MCP grants it may hand its keys (`None`: the whole
    /// gateway's admin).
    pub tenancy: Option<Arc<Tenancy>>,
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AdminToken {{ name: {:?}, scope: {:?}, tenancy: {:?}, .. }}", self.name, self.scope, self.tenancy)
    }
}

/// What a tenant admin (`admin.tenants`, or a single sign-on binding with
/// a `group`) reaches, and what a binding gives members' self-serve keys.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tenancy {
    /// The group at the top of its subtree: a tenant admin sees and changes
    /// this group's keys and the groups, keys and budgets below it, and
    /// nothing else (the group itself it reads but does not change: its
    /// cap is the operator's). For a member, where their own group hangs.
    pub group: Option<Arc<str>>,
    /// Pools and models the keys it makes may name (`None`: every one); a
    /// key it makes without `pools` gets these.
    pub pools: Option<Vec<String>>,
    /// The MCP grants it may give a key (`None`: as the gateway allows:
    /// any for a tenant admin, the members' template for a member).
    pub mcp: Option<Vec<String>>,
}

/// TLS with client certificates on the admin listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminTls {
    /// The server certificate chain (PEM).
    pub cert: String,
    /// Its private key (PEM).
    pub key: String,
    /// The CA that signs client certificates (PEM).
    pub client_ca: String,
}

/// The admin plane's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admin {
    /// Tokens that open it.
    pub tokens: Vec<AdminToken>,
    /// Client-certificate TLS (required off loopback unless `insecure`).
    pub tls: Option<AdminTls>,
    /// The operator's waiver for an off-loopback listener without mTLS.
    pub insecure: bool,
    /// How long audit entries are kept (older ones are purged hourly).
    pub audit_retention: Duration,
    /// Changes one admin token (or console user) may make a minute: a
    /// runaway script gets 429s, not a churn of keys.
    pub mutations_per_minute: u64,
    /// Console sign-in through an OpenID Connect provider.
    pub oidc: Option<crate::identity::Oidc>,
}

impl Default for Admin {
    fn default() -> Admin {
        Admin {
            tokens: Vec::new(),
            tls: None,
            insecure: false,
            audit_retention: DEFAULT_AUDIT_RETENTION,
            mutations_per_minute: DEFAULT_MUTATIONS_PER_MINUTE,
            oidc: None,
        }
    }
}

/// Admin changes a token may make a minute unless `admin.mutations_per_minute` says.
pub const DEFAULT_MUTATIONS_PER_MINUTE: u64 = 300;

/// How long audit entries are kept unless `admin.audit_retention` says.
pub const DEFAULT_AUDIT_RETENTION: Duration = Duration::from_secs(90 * 86_400);

/// Where records live.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Storage {
    /// SQLite file for keys, groups and the ledger.
    pub sqlite_path: Option<String>,
    /// PostgreSQL for a fleet.
    pub postgres_url: Option<String>,
    /// Redis for a fleet's shared counters.
    pub redis_url: Option<String>,
    /// What admission does while Redis cannot be reached.
    pub on_redis_error: OnRedisError,
    /// Where ledger rows wait on local disk while PostgreSQL is away.
    pub ledger_spool: Option<String>,
    /// Admission by leased slices of the fleet's budgets and rates
    /// (`storage.redis.lease`); `None`: every admission asks Redis.
    pub lease: Option<Lease>,
}

/// How an instance leases slices of a chain's budget and rates from Redis
/// (`storage.redis.lease`), every figure bounded when read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// How long a lease lives unless renewed: a dead instance's slice comes
    /// back after at most this, and a budget edit reaches every lease
    /// within a third of it (each renewal reads the bucket again).
    pub ttl: Duration,
    /// The share of what is left one slice takes, in thousandths, divided
    /// between the instances holding a lease on the bucket.
    pub share_permille: u64,
    /// The most USD one slice holds (nano-USD).
    pub max_usd_nano: u64,
    /// The most requests one slice of an `rpm` holds.
    pub max_requests: u64,
    /// The most tokens one slice of a `tpm` holds.
    pub max_tokens: u64,
}

impl Default for Lease {
    fn default() -> Lease {
        Lease {
            ttl: Duration::from_secs(15),
            share_permille: 100,
            // $1, or a tenth of what is left when less: the most one
            // instance can spend past a lowered cap before it renews.
            max_usd_nano: 1_000_000_000,
            // Far above most rates: a slice is a tenth of the rate anyway;
            // these bound only the largest (units strand on an idle slice
            // until it is returned, a third of the ttl).
            max_requests: 10_000,
            max_tokens: 100_000_000,
        }
    }
}

/// What admission does while Redis cannot be reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnRedisError {
    /// Admit against this instance's own counters and add what they
    /// settled to Redis when it returns (the default: serving goes on, and
    /// a fleet may overshoot by what instances admit alone meanwhile).
    #[default]
    FailOpen,
    /// Refuse with a 503 until Redis answers again.
    FailClosed,
}

/// A group of the budget tree, as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Unique name.
    pub name: Arc<str>,
    /// The group above.
    pub parent: Option<Arc<str>>,
    /// Spending cap.
    pub budget: Option<Budget>,
    /// Limits.
    pub limits: Limits,
    /// Guardrail policies its keys' requests pass (indexes into
    /// `Config::policies`), in place of their pool's.
    pub policies: Vec<usize>,
    /// What its requests keep of their text (`None`: as its parent's).
    pub retention: Option<crate::Retention>,
    /// Each end user's budget and limits inside it (overrides come over the API).
    pub end_users: Option<switchyard_governance::key::EndUserPolicy>,
    /// What its requests are charged above their cost (`None`: as its
    /// parent's; none anywhere up: charged their cost).
    pub markup: Option<switchyard_governance::card::Markup>,
    /// Its own rate card: what its requests on the lanes it names are
    /// charged, whatever they cost (a lane it does not name: its markup,
    /// else its parent's pricing).
    pub rate_card: BTreeMap<Arc<str>, crate::Rate>,
    /// What one agent run of its keys may use (`runs:`; `None`: as its
    /// parent's, none anywhere up: runs are not tracked).
    pub runs: Option<switchyard_governance::run::RunSpec>,
}

/// Tuning of admission and the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Governance {
    /// Output tokens reserved for a request that names no maximum.
    pub default_max_tokens: u64,
    /// How long a ledger batch gathers after its first row (with two
    /// writes, the most a `kill -9` loses).
    pub ledger_flush_interval: Duration,
    /// How long one ledger write may take before it counts as failed (a
    /// database hung on a lock, or frozen): a fleet's rows go to the spool.
    pub ledger_write_timeout: Duration,
    /// Ledger rows buffered before settlement waits (backpressure).
    pub ledger_queue: usize,
    /// How long a fleet's reservation outlives the instance holding it:
    /// renewed while its request lives, given back this long after its
    /// instance died (`kill -9`, a lost host).
    pub hold_lease: Duration,
    /// Abuse suspension (`None`: off).
    pub suspend: Option<crate::operator::Suspend>,
}

impl Default for Governance {
    fn default() -> Governance {
        Governance {
            default_max_tokens: 4096,
            ledger_flush_interval: Duration::from_secs(1),
            ledger_write_timeout: Duration::from_secs(2),
            ledger_queue: 65_536,
            hold_lease: Duration::from_secs(60),
            suspend: None,
        }
    }
}

/// The raw sections.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAuth {
    pub mode: Option<String>,
    /// Issuers whose tokens callers may present instead of a key.
    #[serde(default)]
    pub jwt: Vec<crate::identity::RawJwtIssuer>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawToken {
    Plain(String),
    Named {
        name: String,
        token: String,
        #[serde(default)]
        scope: Option<String>,
        /// A tenant admin's group (as `admin.tenants` writes it).
        #[serde(default)]
        group: Option<String>,
    },
}

/// `admin.tenants[i]`: an admin token scoped to a group's subtree.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTenant {
    pub token: String,
    pub group: String,
    pub name: Option<String>,
    pub scope: Option<String>,
    pub pools: Option<Vec<String>>,
    pub mcp: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAdmin {
    #[serde(default)]
    pub tokens: Vec<RawToken>,
    #[serde(default)]
    pub read_only_tokens: Vec<String>,
    /// Tenant admins: tokens scoped to a group's subtree.
    #[serde(default)]
    pub tenants: Vec<RawTenant>,
    pub tls: Option<RawAdminTls>,
    pub insecure: Option<bool>,
    pub audit_retention: Option<String>,
    pub mutations_per_minute: Option<u64>,
    /// Console sign-in through an OpenID Connect provider.
    pub oidc: Option<crate::identity::RawOidc>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAdminTls {
    pub cert: String,
    pub key: String,
    pub client_ca: String,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStorage {
    pub sqlite_path: Option<String>,
    pub postgres_url: Option<String>,
    pub redis_url: Option<String>,
    pub on_redis_error: Option<String>,
    pub ledger_spool: Option<String>,
    pub redis: Option<RawRedis>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRedis {
    pub lease: Option<RawLease>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLease {
    pub ttl: Option<String>,
    /// A percentage (`10%`) or a fraction (`0.1`).
    pub share: Option<serde_yaml_ng::Value>,
    pub max_usd: Option<f64>,
    pub max_requests: Option<u64>,
    pub max_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGroup {
    pub parent: Option<String>,
    #[serde(default)]
    pub policies: Vec<String>,
    pub retention: Option<String>,
    pub budget: Option<RawBudget>,
    #[serde(default)]
    pub limits: RawLimits,
    pub end_users: Option<RawEndUserLimits>,
    /// What its requests are charged above their cost (chargeback).
    pub markup: Option<crate::card::RawFraction>,
    /// Its own price for the lanes it names (chargeback), as `rate_card:`.
    pub rate_card: Option<BTreeMap<String, crate::raw::RawRate>>,
    /// What one agent run of its keys may use.
    pub runs: Option<crate::runs::RawRuns>,
}

/// Each end user's budget and limits inside a group.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEndUserLimits {
    pub budget: Option<RawBudget>,
    #[serde(default)]
    pub limits: RawLimits,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGovernance {
    pub default_max_tokens: Option<u64>,
    pub ledger_flush_interval: Option<String>,
    pub ledger_write_timeout: Option<String>,
    pub ledger_queue: Option<usize>,
    pub hold_lease: Option<String>,
    pub suspend: Option<crate::operator::RawSuspend>,
}

pub(crate) fn auth_mode(raw: Option<&RawAuth>, issues: &mut Vec<Issue>) -> AuthMode {
    match raw.and_then(|a| a.mode.as_deref()) {
        None | Some("open") => AuthMode::Open,
        Some("keys") => AuthMode::Keys,
        Some(other) => {
            issues.push(Issue::new("auth.mode", format!("`{other}` is not an auth mode"), "use open or keys"));
            AuthMode::Open
        }
    }
}

/// An admin token's scope by its config name (`member` is a sign-on role only).
fn token_scope(text: Option<&str>, path: &str, issues: &mut Vec<Issue>) -> Scope {
    match text {
        None | Some("full") => Scope::Full,
        Some("read") => Scope::Read,
        Some("read_text") => Scope::ReadText,
        Some(other) => {
            issues.push(Issue::new(
                &format!("{path}.scope"),
                format!("`{other}` is not a scope"),
                "use read, read_text (read, and kept conversation text) or full",
            ));
            Scope::Read
        }
    }
}

/// A tenant's group name (a group of the config or one made over the API).
pub(crate) fn tenant_group(group: &str, path: &str, issues: &mut Vec<Issue>) -> Arc<str> {
    if group.trim().is_empty() {
        issues.push(Issue::new(path, "the group is empty", "name the group whose subtree it administers"));
    }
    Arc::from(group)
}

pub(crate) fn admin(raw: &RawAdmin, issues: &mut Vec<Issue>) -> Admin {
    let mut tokens = Vec::new();
    for (index, token) in raw.tokens.iter().enumerate() {
        let path = format!("admin.tokens[{index}]");
        let (name, token, scope, tenancy) = match token {
            RawToken::Plain(token) => (format!("token-{}", index + 1), token.clone(), Scope::Full, None),
            RawToken::Named { name, token, scope, group } => {
                let scope = token_scope(scope.as_deref(), &path, issues);
                let tenancy = group.as_deref().map(|group| {
                    let group = tenant_group(group, &format!("{path}.group"), issues);
                    Arc::new(Tenancy { group: Some(group), pools: None, mcp: None })
                });
                (name.clone(), token.clone(), scope, tenancy)
            }
        };
        tokens.push(AdminToken { name: Arc::from(name.as_str()), token, scope, tenancy });
    }
    for (index, token) in raw.read_only_tokens.iter().enumerate() {
        tokens.push(AdminToken {
            name: Arc::from(format!("read-{}", index + 1).as_str()),
            token: token.clone(),
            scope: Scope::Read,
            tenancy: None,
        });
    }
    for (index, tenant) in raw.tenants.iter().enumerate() {
        let path = format!("admin.tenants[{index}]");
        let group = tenant_group(&tenant.group, &format!("{path}.group"), issues);
        let name = tenant.name.clone().unwrap_or_else(|| format!("{}-admin-{}", tenant.group, index + 1));
        let mcp = tenant.mcp.as_ref().map(|grants| crate::mcp::grants(grants, &format!("{path}.mcp"), issues));
        tokens.push(AdminToken {
            name: Arc::from(name.as_str()),
            token: tenant.token.clone(),
            scope: token_scope(tenant.scope.as_deref(), &path, issues),
            tenancy: Some(Arc::new(Tenancy { group: Some(group), pools: tenant.pools.clone(), mcp })),
        });
    }
    for (index, token) in tokens.iter().enumerate() {
        if token.token.len() < 16 {
            issues.push(Issue::new(
                "admin.tokens",
                format!("admin token `{}` is shorter than 16 characters", token.name),
                "use a long random token, e.g. `openssl rand -hex 32`",
            ));
        }
        if tokens[..index].iter().any(|t| t.token == token.token) {
            issues.push(Issue::new(
                "admin.tokens",
                "the same admin token is listed twice",
                "give each token its own value",
            ));
        }
    }
    let audit_retention =
        duration_or(raw.audit_retention.as_deref(), DEFAULT_AUDIT_RETENTION, "admin.audit_retention", issues);
    if audit_retention < Duration::from_secs(3600) {
        issues.push(Issue::new("admin.audit_retention", "must be at least 1h", "write e.g. 90d"));
    }
    Admin {
        tokens,
        tls: raw.tls.as_ref().map(|t| AdminTls {
            cert: t.cert.clone(),
            key: t.key.clone(),
            client_ca: t.client_ca.clone(),
        }),
        insecure: raw.insecure.unwrap_or(false),
        audit_retention,
        mutations_per_minute: mutations_per_minute(raw.mutations_per_minute, issues),
        oidc: raw.oidc.as_ref().map(|oidc| crate::identity::oidc(oidc, issues)),
    }
}

fn mutations_per_minute(raw: Option<u64>, issues: &mut Vec<Issue>) -> u64 {
    match raw {
        None => DEFAULT_MUTATIONS_PER_MINUTE,
        Some(n @ 1..=1_000_000) => n,
        Some(n) => {
            issues.push(Issue::new(
                "admin.mutations_per_minute",
                format!("{n} is out of range"),
                "write a number from 1 to 1000000",
            ));
            DEFAULT_MUTATIONS_PER_MINUTE
        }
    }
}

pub(crate) fn storage(raw: &RawStorage, issues: &mut Vec<Issue>) -> Storage {
    for (key, value) in
        [("sqlite_path", &raw.sqlite_path), ("postgres_url", &raw.postgres_url), ("redis_url", &raw.redis_url)]
    {
        if value.as_deref() == Some("") {
            issues.push(Issue::new(&format!("storage.{key}"), "empty", "remove the key or give it a value"));
        }
    }
    if raw.sqlite_path.is_some() && raw.postgres_url.is_some() {
        issues.push(Issue::new(
            "storage",
            "both sqlite_path and postgres_url are set",
            "keep postgres_url for a fleet, or sqlite_path for a single node",
        ));
    }
    if raw.redis_url.is_some() && raw.postgres_url.is_none() {
        issues.push(Issue::new(
            "storage.redis_url",
            "redis holds a fleet's counters, but the fleet's records have no postgres_url",
            "add storage.postgres_url, or remove redis_url for a single node",
        ));
    }
    let on_redis_error = match raw.on_redis_error.as_deref() {
        None | Some("fail_open") => OnRedisError::FailOpen,
        Some("fail_closed") => OnRedisError::FailClosed,
        Some(other) => {
            issues.push(Issue::new(
                "storage.on_redis_error",
                format!("`{other}` is not a choice"),
                "use fail_open (admit on local counters) or fail_closed (refuse with 503)",
            ));
            OnRedisError::FailOpen
        }
    };
    if raw.on_redis_error.is_some() && raw.redis_url.is_none() {
        issues.push(Issue::new(
            "storage.on_redis_error",
            "there is no redis_url for it to apply to",
            "add storage.redis_url, or remove on_redis_error",
        ));
    }
    if let Some(url) = &raw.redis_url {
        if !(url.starts_with("redis://") || url.starts_with("unix://") || url.starts_with("redis+unix://")) {
            issues.push(Issue::new(
                "storage.redis_url",
                format!("`{url}` is not a redis:// URL"),
                "write redis://host:port/db (TLS to Redis is not in this build)",
            ));
        }
    }
    if let Some(url) = &raw.postgres_url {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            issues.push(Issue::new(
                "storage.postgres_url",
                format!("`{url}` is not a postgres:// URL"),
                "write postgres://user:password@host:port/database",
            ));
        }
    }
    if raw.ledger_spool.is_some() && raw.postgres_url.is_none() {
        issues.push(Issue::new(
            "storage.ledger_spool",
            "a spool keeps ledger rows while PostgreSQL is away, but there is no postgres_url",
            "add storage.postgres_url, or remove ledger_spool",
        ));
    }
    // A fleet's ledger waits on local disk during an outage, by default
    // beside the process.
    let ledger_spool = raw
        .ledger_spool
        .clone()
        .or_else(|| raw.postgres_url.as_ref().map(|_| String::from("switchyard-ledger-spool.db")));
    let lease = raw.redis.as_ref().and_then(|redis| redis.lease.as_ref()).map(|lease| {
        if raw.redis_url.is_none() {
            issues.push(Issue::new(
                "storage.redis.lease",
                "leases are slices of a fleet's counters in redis, but there is no redis_url",
                "add storage.redis_url, or remove storage.redis.lease",
            ));
        }
        lease_of(lease, issues)
    });
    Storage {
        lease,
        sqlite_path: raw.sqlite_path.clone(),
        postgres_url: raw.postgres_url.clone(),
        redis_url: raw.redis_url.clone(),
        on_redis_error,
        ledger_spool,
    }
}

/// `storage.redis.lease`, its defaults filled in and every figure within
/// its range (a slice of nothing, or of more than a script adds exactly,
/// is refused).
fn lease_of(raw: &RawLease, issues: &mut Vec<Issue>) -> Lease {
    let default = Lease::default();
    let ttl = duration_or(raw.ttl.as_deref(), default.ttl, "storage.redis.lease.ttl", issues);
    let ttl = if (Duration::from_secs(3)..=Duration::from_secs(600)).contains(&ttl) {
        ttl
    } else {
        issues.push(Issue::new(
            "storage.redis.lease.ttl",
            format!("{ttl:?} is out of range"),
            "write a duration from 3s to 10m (renewed every third of it)",
        ));
        default.ttl
    };
    let share_permille = match &raw.share {
        None => default.share_permille,
        Some(value) => match share(value) {
            Some(permille) => permille,
            None => {
                issues.push(Issue::new(
                    "storage.redis.lease.share",
                    format!("{value:?} is not a share"),
                    "write a percentage from 0.1% to 100% (or a fraction from 0.001 to 1)",
                ));
                default.share_permille
            }
        },
    };
    let max_usd_nano = match raw.max_usd {
        None => default.max_usd_nano,
        // Within what one request may reserve (2⁴⁶ nano-USD, about $70,000).
        Some(usd) if usd.is_finite() && usd > 0.0 && usd <= 70_000.0 => (usd * 1e9).round() as u64,
        Some(usd) => {
            issues.push(Issue::new(
                "storage.redis.lease.max_usd",
                format!("{usd} is out of range"),
                "write a USD amount above 0 and at most 70000",
            ));
            default.max_usd_nano
        }
    };
    let count = |value: Option<u64>, fallback: u64, path: &str, issues: &mut Vec<Issue>| match value {
        None => fallback,
        Some(n @ 1..=1_000_000_000) => n,
        Some(n) => {
            issues.push(Issue::new(path, format!("{n} is out of range"), "write a number from 1 to 1000000000"));
            fallback
        }
    };
    Lease {
        ttl,
        share_permille,
        max_usd_nano,
        max_requests: count(raw.max_requests, default.max_requests, "storage.redis.lease.max_requests", issues),
        max_tokens: count(raw.max_tokens, default.max_tokens, "storage.redis.lease.max_tokens", issues),
    }
}

/// A share in thousandths from `10%` or `0.1`, within 1..=1000.
fn share(value: &serde_yaml_ng::Value) -> Option<u64> {
    let fraction = match value {
        serde_yaml_ng::Value::String(text) => text.trim().strip_suffix('%')?.trim().parse::<f64>().ok()? / 100.0,
        serde_yaml_ng::Value::Number(n) => n.as_f64()?,
        _ => return None,
    };
    let permille = (fraction * 1000.0).round();
    (fraction.is_finite() && (1.0..=1000.0).contains(&permille)).then_some(permille as u64)
}

pub(crate) fn groups(raw: &BTreeMap<String, RawGroup>, issues: &mut Vec<Issue>) -> Vec<Group> {
    let groups: Vec<Group> = raw
        .iter()
        .map(|(name, group)| {
            let path = format!("groups.{name}");
            if let Some(parent) = &group.parent {
                if !raw.contains_key(parent) {
                    issues.push(Issue::new(
                        &format!("{path}.parent"),
                        format!("group `{parent}` is not defined"),
                        "define it under groups:, or remove parent",
                    ));
                }
            }
            Group {
                name: Arc::from(name.as_str()),
                parent: group.parent.as_deref().map(Arc::from),
                budget: group.budget.as_ref().and_then(|b| budget(b, &format!("{path}.budget"), issues)),
                limits: limits(&group.limits, &format!("{path}.limits"), issues),
                policies: Vec::new(),
                retention: None,
                end_users: group.end_users.as_ref().map(|each| switchyard_governance::key::EndUserPolicy {
                    budget: each.budget.as_ref().and_then(|b| budget(b, &format!("{path}.end_users.budget"), issues)),
                    limits: limits(&each.limits, &format!("{path}.end_users.limits"), issues),
                    overrides: Default::default(),
                }),
                markup: group.markup.as_ref().and_then(|m| crate::card::markup(m, &format!("{path}.markup"), issues)),
                // Read once the models it may name are known.
                rate_card: BTreeMap::new(),
                runs: group.runs.as_ref().map(|r| crate::runs::runs(r, &format!("{path}.runs"), issues)),
            }
        })
        .collect();
    // A parent chain must end.
    for group in &groups {
        let mut seen = vec![group.name.clone()];
        let mut at = group.parent.clone();
        while let Some(parent) = at {
            if seen.contains(&parent) {
                issues.push(Issue::new(
                    &format!("groups.{}.parent", group.name),
                    format!(
                        "the parent chain loops: {} -> {parent}",
                        seen.iter().map(|s| &**s).collect::<Vec<_>>().join(" -> ")
                    ),
                    "remove one parent so the chain ends",
                ));
                break;
            }
            seen.push(parent.clone());
            at = groups.iter().find(|g| g.name == parent).and_then(|g| g.parent.clone());
        }
    }
    groups
}

pub(crate) fn governance(raw: &RawGovernance, issues: &mut Vec<Issue>) -> Governance {
    let defaults = Governance::default();
    let flush = duration_or(
        raw.ledger_flush_interval.as_deref(),
        defaults.ledger_flush_interval,
        "governance.ledger_flush_interval",
        issues,
    );
    if flush.is_zero() || flush > Duration::from_secs(60) {
        issues.push(Issue::new("governance.ledger_flush_interval", "must be between 1ms and 60s", "write e.g. 1s"));
    }
    let write_timeout = duration_or(
        raw.ledger_write_timeout.as_deref(),
        defaults.ledger_write_timeout,
        "governance.ledger_write_timeout",
        issues,
    );
    if write_timeout < Duration::from_millis(10) || write_timeout > Duration::from_secs(60) {
        issues.push(Issue::new("governance.ledger_write_timeout", "must be between 10ms and 60s", "write e.g. 2s"));
    }
    if raw.ledger_queue == Some(0) {
        issues.push(Issue::new("governance.ledger_queue", "a queue of 0 rows", "set it to 1024 or more"));
    }
    if raw.default_max_tokens == Some(0) {
        issues.push(Issue::new(
            "governance.default_max_tokens",
            "0 reserves nothing for output",
            "set it to e.g. 4096",
        ));
    }
    let hold_lease = duration_or(raw.hold_lease.as_deref(), defaults.hold_lease, "governance.hold_lease", issues);
    if hold_lease < Duration::from_secs(1) || hold_lease > Duration::from_secs(3600) {
        issues.push(Issue::new("governance.hold_lease", "must be between 1s and 1h", "write e.g. 60s"));
    }
    Governance {
        default_max_tokens: raw.default_max_tokens.unwrap_or(defaults.default_max_tokens),
        ledger_flush_interval: flush,
        ledger_write_timeout: write_timeout,
        ledger_queue: raw.ledger_queue.unwrap_or(defaults.ledger_queue).max(1),
        hold_lease,
        suspend: crate::operator::suspend(raw.suspend.as_ref(), issues),
    }
}
