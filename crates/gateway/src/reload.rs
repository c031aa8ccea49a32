//! Live config reload (SIGHUP, `POST /api/v1/admin/config/reload`).
//!
//! The new file goes through the same pipeline as `switchyard check`; a bad
//! one is refused with the same problems and the running config keeps
//! serving. A good one becomes a new [`Gateway`] that adopts what the
//! running one learned (breakers, sessions, permits, governance, telemetry;
//! see [`Gateway::adopt`]), and both listeners' routers are swapped at once.
//! A request takes the gateway current when it arrives and finishes on it,
//! so requests in flight finish on the config they started with.
//!
//! What the running process is built around cannot change under it: the
//! listeners, governance's stores and mode, and the exporters. A reload that
//! changes those keeps their running values and says which sections need a
//! restart. A version applied over the admin API (or from the fleet) never
//! adds or changes a stdio MCP server's command, args or env: those run on
//! the host, so only its file changes them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use switchyard_config::{Config, ConfigError, Issue};

use crate::server::LiveRouter;
use switchyard_state::{ApplyError, BuildError, ConfigReload, Gateway};

/// Where the config's text lives: read again on a reload, written when a
/// version is applied over the API (or by another instance of a fleet).
pub trait ConfigSource: Send + Sync {
    /// The text as it is now.
    fn read(&self) -> Result<String, LoadError>;
    /// Makes `text` the source (a restart serves it).
    fn write(&self, text: &str) -> Result<(), LoadError>;
    /// Where its `${VAR}`s are read.
    fn env(&self) -> fn(&str) -> Option<String>;
    /// `text` as a validated config (the binary's `check` pipeline).
    fn parse(&self, text: &str) -> Result<Config, LoadError> {
        Ok(switchyard_config::load(text, &self.env())?)
    }
}

/// A config file, its `${VAR}`s read from `env`.
pub struct FileSource {
    /// The file.
    pub path: std::path::PathBuf,
    /// The environment.
    pub env: fn(&str) -> Option<String>,
}

impl ConfigSource for FileSource {
    fn read(&self) -> Result<String, LoadError> {
        std::fs::read_to_string(&self.path)
            .map_err(|err| LoadError::Read { path: self.path.display().to_string(), reason: err.to_string() })
    }

    /// Written beside the file and renamed over it: a crash leaves the old
    /// file or the new one, never half of one.
    fn write(&self, text: &str) -> Result<(), LoadError> {
        let failed =
            |err: std::io::Error| LoadError::Write { path: self.path.display().to_string(), reason: err.to_string() };
        let mut staged = self.path.clone().into_os_string();
        staged.push(".switchyard-new");
        let staged = std::path::PathBuf::from(staged);
        std::fs::write(&staged, text).map_err(failed)?;
        std::fs::rename(&staged, &self.path).map_err(failed)
    }

    fn env(&self) -> fn(&str) -> Option<String> {
        self.env
    }
}

/// Text held in memory (the embedded demo config, a test's "file").
pub struct TextSource {
    /// The text; a test may change it and reload.
    pub text: Arc<std::sync::Mutex<String>>,
    /// The environment.
    pub env: fn(&str) -> Option<String>,
}

impl ConfigSource for TextSource {
    fn read(&self) -> Result<String, LoadError> {
        Ok(self.text.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone())
    }

    fn write(&self, text: &str) -> Result<(), LoadError> {
        text.clone_into(&mut self.text.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        Ok(())
    }

    fn env(&self) -> fn(&str) -> Option<String> {
        self.env
    }
}

/// Why the file could not become a config.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        reason: String,
    },
    /// An applied config could not be written to the file.
    #[error("cannot write {path}: {reason}")]
    Write {
        /// The file.
        path: String,
        /// The I/O error.
        reason: String,
    },
    /// The file is not a valid config.
    #[error("{0}")]
    Invalid(#[from] ConfigError),
}

/// Why a reload was refused (the running config keeps serving).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The file could not be read or validated.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A valid config the gateway cannot be built from.
    #[error("config is valid but cannot be served: {0}")]
    Build(#[from] BuildError),
    /// The file's groups could not be written to the store.
    #[error("the config's groups could not be stored: {0}")]
    Groups(switchyard_store::StoreError),
}

impl ReloadError {
    /// Every problem, as `switchyard check` lists them.
    pub fn problems(&self) -> Vec<Issue> {
        match self {
            ReloadError::Load(LoadError::Invalid(invalid)) => invalid.0.clone(),
            other => vec![Issue { path: String::new(), message: other.to_string(), fix: "fix the file".into() }],
        }
    }
}

/// What a reload did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    /// Pools now served.
    pub pools: usize,
    /// Lanes now served.
    pub lanes: usize,
    /// Sections that changed but keep their running values until a restart.
    pub restart_required: Vec<&'static str>,
    /// What is valid but risky in the new file.
    pub warnings: Vec<String>,
}

/// Swaps configs under two running listeners.
pub struct Reloader {
    current: ArcSwap<Gateway>,
    data: LiveRouter,
    admin: LiveRouter,
    source: Arc<dyn ConfigSource>,
    /// One reload at a time.
    lock: tokio::sync::Mutex<()>,
    /// Reloads done and refused, for `/stats`.
    pub done: AtomicU64,
    /// Reloads refused.
    pub refused: AtomicU64,
    /// Itself, for the gateways it builds to reach it.
    me: std::sync::Weak<Reloader>,
}

impl Reloader {
    /// A reloader for `gateway`, served by `data` and `admin`, whose
    /// config lives in `source`.
    pub fn new(
        gateway: Arc<Gateway>,
        data: LiveRouter,
        admin: LiveRouter,
        source: Arc<dyn ConfigSource>,
    ) -> Arc<Reloader> {
        let reloader = Arc::new_cyclic(|me| Reloader {
            current: ArcSwap::new(gateway.clone()),
            data,
            admin,
            source,
            lock: tokio::sync::Mutex::new(()),
            done: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            me: me.clone(),
        });
        let _ = gateway.reloader.set(reloader.me.clone() as std::sync::Weak<dyn ConfigReload>);
        reloader
    }

    /// The gateway serving now.
    pub fn current(&self) -> Arc<Gateway> {
        self.current.load_full()
    }

    /// Reads the file again and, if it is valid, serves it (and records
    /// it as the config's next version when its text changed).
    pub async fn reload(self: &Arc<Self>) -> Result<Outcome, ReloadError> {
        let _one = self.lock.lock().await;
        let result = async {
            let reader = self.clone();
            let text = tokio::task::spawn_blocking(move || reader.source.read())
                .await
                .map_err(|err| LoadError::Read { path: "the config".into(), reason: err.to_string() })??;
            let outcome = self.swap_in(&text).await?;
            crate::versions::record_if_changed(&self.current(), &text, "file", "read from the file").await;
            Ok(outcome)
        }
        .await;
        self.count(&result);
        result
    }

    fn count(&self, result: &Result<Outcome, ReloadError>) {
        match result {
            Ok(outcome) => {
                self.done.fetch_add(1, Ordering::Relaxed);
                tracing::info!(pools = outcome.pools, lanes = outcome.lanes, restart_required = ?outcome.restart_required, "config reloaded");
            }
            Err(err) => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("config reload refused, the running config keeps serving: {err}");
            }
        }
    }

    /// Applies a version of the config: `text` validated as a reload
    /// would, recorded as the version after `after` (by `author`, saying
    /// `message`) unless another came first, written to the source and
    /// served. `record: false` serves a version another instance recorded.
    pub async fn apply(
        self: &Arc<Self>,
        text: &str,
        record: Option<(i64, &str, &str)>,
    ) -> Result<(Outcome, Option<switchyard_store::ConfigVersion>), ApplyError> {
        let _one = self.lock.lock().await;
        let current = self.current();
        if record.is_some() && current.config.control.locked {
            return Err(ApplyError::Locked);
        }
        // A version this instance made and already serves comes back on
        // the change feed: nothing to do.
        if record.is_none() && *current.config.source == *text {
            let outcome = Outcome {
                pools: current.config.pools.len(),
                lanes: current.lanes.len(),
                restart_required: current.restart_pending.clone(),
                warnings: Vec::new(),
            };
            return Ok((outcome, None));
        }
        let config = self.source.parse(text).map_err(|err| ApplyError::Invalid(ReloadError::from(err).problems()))?;
        // A stdio server's command runs on this host: it comes from this
        // host's file, never from a version (posted, rolled back to, or
        // recorded by another instance).
        let file_only = switchyard_config::mcp::file_only_changes(current.config.mcp.as_ref(), config.mcp.as_ref());
        if !file_only.is_empty() {
            return Err(ApplyError::FileOnly(file_only));
        }
        let prepared = self.prepare(config).map_err(|err| ApplyError::Invalid(err.problems()))?;
        let version = match record {
            Some((after, author, message)) => {
                Some(crate::versions::append(&self.current(), after, text, author, message).await?)
            }
            None => None,
        };
        if let Err(err) = self.source.write(text) {
            tracing::warn!("the applied config could not be written to its file (a restart serves the old one): {err}");
        }
        let result = self.install(prepared).await;
        self.count(&result);
        Ok((result.map_err(|err| ApplyError::Invalid(err.problems()))?, version))
    }

    async fn swap_in(self: &Arc<Self>, text: &str) -> Result<Outcome, ReloadError> {
        let config = self.source.parse(text)?;
        let prepared = self.prepare(config)?;
        self.install(prepared).await
    }

    /// A gateway for `config` that adopts the running one, not yet serving.
    fn prepare(&self, config: Config) -> Result<Prepared, ReloadError> {
        let old = self.current();
        let (config, restart_required) = keep_running(&old.config, config);
        // The file was checked alone; what will serve is the file with the
        // running sections kept, and it passes the same checks a boot does.
        let problems = switchyard_config::effective_issues(&config);
        if !problems.is_empty() {
            return Err(LoadError::Invalid(ConfigError(problems)).into());
        }
        let warnings = config.warnings.iter().map(ToString::to_string).collect();
        let mut gateway = Gateway::new(config, old.codecs)?.adopt(&old);
        gateway.restart_pending.clone_from(&restart_required);
        Ok(Prepared { gateway, restart_required, warnings })
    }

    /// Serves a prepared gateway: both routers swapped at once.
    async fn install(&self, prepared: Prepared) -> Result<Outcome, ReloadError> {
        let Prepared { gateway, restart_required, warnings } = prepared;
        let old = self.current();
        // Spend read back from the ledger is priced by the new rate card.
        if let (Some(governance), true) = (&gateway.governance, gateway.config.rate_card != old.config.rate_card) {
            governance.set_prices(gateway.prices());
        }
        // The file's budget tree changes with it (keys and counters stay).
        if let (Some(governance), true) = (&gateway.governance, gateway.config.groups != old.config.groups) {
            governance.reload_groups(&gateway.config.groups).await.map_err(ReloadError::Groups)?;
        }
        let gateway = Arc::new(gateway);
        let _ = gateway.reloader.set(self.me.clone() as std::sync::Weak<dyn ConfigReload>);
        start_tasks(&gateway);
        self.data.swap(crate::server::router(gateway.clone()));
        self.admin.swap(crate::server::admin_router(gateway.clone()));
        self.current.store(gateway.clone());
        Ok(Outcome { pools: gateway.config.pools.len(), lanes: gateway.lanes.len(), restart_required, warnings })
    }
}

/// At boot: the running text recorded, or (a fleet, unlocked) the store's
/// newest version served instead; then, in a fleet, every new version
/// another instance records is served here too.
pub async fn follow_versions(reloader: &Arc<Reloader>) {
    let gateway = reloader.current();
    let Some(governance) = gateway.governance.clone() else { return };
    let fleet = governance.stores.changes.is_some();
    let locked = gateway.config.control.locked;
    let running = gateway.config.source.to_string();
    match crate::versions::newest(&gateway).await {
        Ok(Some(newest)) if fleet && !locked && newest.text != running => follow(reloader, &newest).await,
        Ok(_) => crate::versions::record_if_changed(&gateway, &running, "file", "the file at boot").await,
        Err(err) => tracing::warn!(error = %err, "the config's versions cannot be read at boot"),
    }
    let (Some(feed), false) = (&governance.stores.changes, locked) else { return };
    let mut changes = feed.subscribe();
    let weak = Arc::downgrade(reloader);
    switchyard_tasks::service("config versions", async move {
        loop {
            let change = changes.recv().await;
            let Some(reloader) = weak.upgrade() else { return };
            match change {
                Ok(switchyard_store::Change::Config(_) | switchyard_store::Change::Resync)
                | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    let current = reloader.current();
                    if let Ok(Some(newest)) = crate::versions::newest(&current).await {
                        if newest.text != *current.config.source {
                            follow(&reloader, &newest).await;
                        }
                    }
                }
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    });
}

/// Serves a version another instance recorded.
async fn follow(reloader: &Arc<Reloader>, version: &switchyard_store::ConfigVersion) {
    match reloader.apply(&version.text, None).await {
        Ok(_) => {
            tracing::info!(version = version.version, author = %version.author, "config version applied from the fleet")
        }
        Err(err) => {
            tracing::error!(version = version.version, error = %err, "a config version from the fleet cannot be served here; the running config stays")
        }
    }
}

/// A gateway built for a new config, not yet serving.
struct Prepared {
    gateway: Gateway,
    restart_required: Vec<&'static str>,
    warnings: Vec<String>,
}

/// What a serving gateway runs beside its requests: the fleet's breaker
/// channel pointed at it, its probes and the console's sampler. Each task
/// ends with its gateway, so the binary calls this at boot and a reload
/// for each gateway it builds.
pub fn start_tasks(gateway: &Arc<Gateway>) {
    if let Some(shared) = &gateway.fleet_state {
        shared.attach(Arc::downgrade(gateway) as std::sync::Weak<dyn switchyard_fleet::shared::Breakers>);
    }
    switchyard_engine::probe::spawn_probes(gateway);
    switchyard_admin::sampler::spawn(gateway);
    switchyard_admin::watch::spawn(gateway);
    switchyard_admin::reconcile::spawn(gateway);
    switchyard_admin::scrape::spawn_export(gateway);
}

impl ConfigReload for Reloader {
    fn reload(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<serde_json::Value, Vec<Issue>>> + Send + '_>> {
        Box::pin(async move {
            let Some(me) = self.me.upgrade() else {
                return Err(vec![Issue { path: String::new(), message: "shutting down".into(), fix: "retry".into() }]);
            };
            match Reloader::reload(&me).await {
                Ok(outcome) => Ok(serde_json::to_value(outcome).unwrap_or_default()),
                Err(err) => Err(err.problems()),
            }
        })
    }

    fn counts(&self) -> (u64, u64) {
        (self.done.load(Ordering::Relaxed), self.refused.load(Ordering::Relaxed))
    }

    fn serving(&self) -> Arc<Gateway> {
        self.current()
    }

    fn apply(
        &self,
        text: String,
        after: i64,
        author: String,
        message: String,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<serde_json::Value, ApplyError>> + Send + '_>> {
        Box::pin(async move {
            let Some(me) = self.me.upgrade() else { return Err(ApplyError::Store("shutting down".into())) };
            let (outcome, version) = me.apply(&text, Some((after, &author, &message))).await?;
            let mut answer = serde_json::to_value(outcome).unwrap_or_default();
            if let (Some(object), Some(version)) = (answer.as_object_mut(), version) {
                object.insert("version".into(), version.version.into());
            }
            Ok(answer)
        })
    }
}

/// `new` with the sections the process is built around set back to their
/// running values, and the names of those that differed.
fn keep_running(running: &Config, mut new: Config) -> (Config, Vec<&'static str>) {
    let mut differ = Vec::new();
    macro_rules! keep {
        ($($field:ident).+, $name:literal) => {
            if new.$($field).+ != running.$($field).+ {
                differ.push($name);
                new.$($field).+ = running.$($field).+.clone();
            }
        };
    }
    keep!(listen, "listen");
    keep!(admin_listen, "admin_listen");
    keep!(server, "server");
    keep!(auth, "auth");
    keep!(storage, "storage");
    keep!(governance, "governance");
    keep!(admin.tls, "admin.tls");
    keep!(admin.insecure, "admin.insecure");
    keep!(telemetry, "telemetry");
    keep!(alerts, "alerts");
    keep!(receipts, "receipts");
    (new, differ)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        switchyard_config::load(text, &|_| None).unwrap_or_else(|err| panic!("{err}"))
    }

    #[test]
    fn what_the_process_is_built_around_keeps_its_running_value() {
        let running = config("listen: 127.0.0.1:8080\nserver: { body_limit: 1MiB }\n");
        let new = config(
            "listen: 127.0.0.1:9090\nserver: { body_limit: 2MiB }\nadmin: { tokens: [tok-0123456789abcdef] }\nproviders:\n  p: { protocol: openai, base_url: mock:// }\n",
        );
        let (kept, differ) = keep_running(&running, new);
        assert_eq!(differ, ["listen", "server"]);
        assert_eq!(kept.listen, running.listen);
        assert_eq!(kept.server, running.server);
        // What a reload is for takes effect: lanes, and admin tokens.
        assert_eq!(kept.providers.len(), 1);
        assert_eq!(kept.admin.tokens.len(), 1);
    }
}
