//! Switchyard's configuration, from YAML text to validated types, once at boot.
//!
//! `load` runs the whole pipeline: parse YAML, substitute `${VAR}`s, decode
//! into the raw serde forms (unknown keys refused), then validate into
//! [`Config`], reporting every problem at once with its key path and the fix.
//! `switchyard check` and `switchyard serve` run this very function. The crate
//! is pure: the environment is passed in as a look-up.

pub mod agents;
mod cache;
pub mod card;
mod cross;
mod decode;
pub mod duplex;
mod egress;
pub mod facts;
mod governance;
mod guard;
mod hooks;
mod identity;
mod interpolate;
mod issue;
pub mod kept;
pub mod mcp;
mod models;
mod operator;
pub mod passthrough;
mod pools;
pub mod proof;
mod providers;
mod rates;
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

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

pub use egress::{Egress, EgressAuth, PathTemplate, ServiceAccount};
pub use governance::{
    Admin, AdminTls, AdminToken, AuthMode, Governance, Group, Lease, OnRedisError, Scope, Storage, Tenancy,
};
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

pub use cache::{CacheStore, DEFAULT_CACHE_BYTES};
pub use cross::effective_issues;
pub use issue::{ConfigError, Issue};
pub use models::{Billing, Model, ModelFacts};
pub use pools::{
    Affinity, Failover, Hedge, HedgeAfter, Member, OnDisconnect, Pool, DEFAULT_HEDGE_SHARE, MAX_CONTINUATIONS,
    MAX_RETRIES,
};
pub use providers::{Adhoc, Endpoint, Provider, Timeouts, RAW_ROUTE_PREFIX};
pub use rates::{group_rate_card, Rate};
// The sections read durations and sizes through these (one place for the
// message and the fix a bad value gets).
use units::parse_addr;
pub(crate) use units::{duration_or, size_or};

/// The embedded demo configuration served when no config file is given.
pub const DEMO_CONFIG: &str = include_str!("demo.yaml");

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
    /// The A2A agents `/a2a/{agent}` fronts (`None`: no `agents:`).
    pub agents: Option<agents::Agents>,
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

/// The raw config validated wing by wing, then the checks that span them;
/// the order is the order problems are reported in.
fn validate(raw: raw::RawConfig, issues: &mut Vec<Issue>) -> Config {
    let mut warnings = Vec::new();
    let listen = parse_addr(raw.listen.as_deref(), "127.0.0.1:8080", "listen", issues);
    let admin_listen = parse_addr(raw.admin_listen.as_deref(), "127.0.0.1:8081", "admin_listen", issues);
    let admin = governance::admin(&raw.admin, issues);
    let auth = governance::auth_mode(raw.auth.as_ref(), issues);
    let jwt = identity::jwt_issuers(raw.auth.as_ref().map_or(&[][..], |a| &a.jwt), auth == AuthMode::Keys, issues);
    let storage = governance::storage(&raw.storage, issues);
    let policies = guard::policies(&raw.policies, issues);
    let cache = cache::store(raw.cache.as_ref(), issues);
    let retention = retention::store(raw.retention.as_ref(), issues);
    let mut groups = governance::groups(&raw.groups, issues);
    cross::admin_groups(&admin, &groups, issues, &mut warnings);
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
    let agents = agents::validate(raw.agents.as_ref(), &policies, issues);
    cross::agents(agents.as_ref(), auth, &mut warnings);
    cross::mcp(mcp.as_ref(), auth, raw.storage.redis_url.is_some(), &mut warnings);

    let server = server::validate(&raw.server, issues);
    cross::client_identity(&server, auth, issues);

    let providers = providers::validate(&raw.providers, issues, &mut warnings);
    let mut policies = policies;
    guard::bedrock_moderators(&mut policies, &providers, issues);
    providers::passthrough_grants(&providers, &jwt, auth, issues);
    let models = models::validate(&raw.models, &providers, issues);
    let model_names: Vec<&str> = raw.models.keys().map(String::as_str).collect();
    let pool_names: Vec<&str> = raw.pools.keys().map(String::as_str).collect();
    cross::route_names(&model_names, &pool_names, issues);
    let rate_card = rates::card(&raw.rate_card, &models, &providers, issues);
    rates::group_cards(&mut groups, &raw.groups, &models, &providers, issues);

    let mut all_hooks = Vec::new();
    let mut pending = Vec::new();
    let (_, global_hooks) =
        hooks::parse_list("global_hooks", &raw.global_hooks, true, &mut all_hooks, &mut pending, issues);
    let pools = pools::validate(&raw.pools, &models, &policies, &mut all_hooks, &mut pending, issues);
    cross::group_pools(&groups, &model_names, &pool_names, issues);
    rates::unpriced(&raw.rate_card, &rate_card, &models, auth, &mut warnings);
    providers::check_adhoc_names(&providers, &model_names, &pool_names, issues);
    hooks::resolve_fallbacks(&mut all_hooks, pending, issues);

    let reconcile = proof::reconcile(raw.reconcile.as_ref(), &providers, issues, &mut warnings);
    let receipts = proof::receipts(raw.receipts.as_ref(), issues);
    let model_facts = ModelFacts::of(&models);
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
        agents,
        reconcile,
        receipts,
        warnings,
        model_facts,
        source: Source::default(),
    };
    issues.extend(effective_issues(&config));
    config
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
    use std::collections::BTreeMap;
    use std::time::Duration;

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
            // A Realtime session is relayed to an OpenAI-protocol socket only.
            (format!("{base}models:\n  r: {{ provider: a, model: x, operation: realtime }}\n"), "does not serve realtime"),
            // A Live session is relayed to a Gemini-protocol socket only.
            (format!("{base}models:\n  l: {{ provider: o, model: x, operation: live }}\n"), "does not serve live"),
            (
                format!(
                    "{base}  g: {{ protocol: gemini, base_url: mock:// }}\nmodels:\n  l: {{ provider: g, model: x, operation: live }}\n  \
                     c: {{ provider: g, model: y }}\npools:\n  p: {{ members: [{{ model: l }}, {{ model: c }}] }}\n"
                ),
                "mixes in c (chat)",
            ),
            (
                format!(
                    "{base}models:\n  r: {{ provider: o, model: x, operation: realtime }}\n  c: {{ provider: o, model: y }}\n\
                     pools:\n  p: {{ members: [{{ model: r }}, {{ model: c }}] }}\n"
                ),
                "mixes in c (chat)",
            ),
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
        // A Gemini Live session offline, on the in-process fake.
        let live = config.model_index("demo-live").unwrap();
        assert_eq!(config.models[live].operation, Operation::Live);
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
    fn a_redis_lease_block_reads_its_defaults_and_bounds() {
        let base = "auth: { mode: keys }\nproviders: { p: { protocol: openai, base_url: \"mock://\" } }\nmodels: { m: { provider: p } }\n";
        let fleet = |lease: &str| {
            format!("{base}storage: {{ postgres_url: \"postgres://u@h/d\", redis_url: \"redis://h:6379\"{lease} }}\n")
        };
        // Absent: off (every admission asks Redis, as before).
        assert_eq!(load(&fleet(""), &no_env).unwrap().storage.lease, None);
        // Present and empty: the defaults.
        let on = load(&fleet(", redis: { lease: {} }"), &no_env).unwrap();
        assert_eq!(on.storage.lease, Some(Lease::default()));
        let set = load(&fleet(", redis: { lease: { ttl: 30s, share: 25%, max_usd: 0.5, max_requests: 9 } }"), &no_env)
            .unwrap()
            .storage
            .lease
            .unwrap();
        assert_eq!(
            (set.ttl, set.share_permille, set.max_usd_nano, set.max_requests),
            (Duration::from_secs(30), 250, 500_000_000, 9)
        );
        // Out of range, each named; and no lease without Redis.
        let bad = fleet(", redis: { lease: { ttl: 1s, share: 0%, max_usd: -1, max_tokens: 0 } }");
        let messages: Vec<String> = load(&bad, &no_env).unwrap_err().0.iter().map(ToString::to_string).collect();
        for path in ["lease.ttl", "lease.share", "lease.max_usd", "lease.max_tokens"] {
            assert!(messages.iter().any(|m| m.contains(path)), "{path}: {messages:#?}");
        }
        let alone = format!("{base}storage: {{ sqlite_path: x.db, redis: {{ lease: {{}} }} }}\n");
        let messages: Vec<String> = load(&alone, &no_env).unwrap_err().0.iter().map(ToString::to_string).collect();
        assert!(messages.iter().any(|m| m.contains("no redis_url")), "{messages:#?}");
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
