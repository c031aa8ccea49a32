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
//! restart.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use switchyard_config::{Config, ConfigError, Issue};

use crate::server::LiveRouter;
use switchyard_state::{BuildError, ConfigReload, Gateway};

/// Reads and validates the config file again (the binary's `check` pipeline).
pub type Load = Box<dyn Fn() -> Result<Config, LoadError> + Send + Sync>;

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
    load: Load,
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
    /// A reloader for `gateway`, served by `data` and `admin`; `load`
    /// reads the file again.
    pub fn new(gateway: Arc<Gateway>, data: LiveRouter, admin: LiveRouter, load: Load) -> Arc<Reloader> {
        let reloader = Arc::new_cyclic(|me| Reloader {
            current: ArcSwap::new(gateway.clone()),
            data,
            admin,
            load,
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

    /// Reads the file again and, if it is valid, serves it.
    pub async fn reload(self: &Arc<Self>) -> Result<Outcome, ReloadError> {
        let _one = self.lock.lock().await;
        let result = self.swap_in().await;
        match &result {
            Ok(outcome) => {
                self.done.fetch_add(1, Ordering::Relaxed);
                tracing::info!(pools = outcome.pools, lanes = outcome.lanes, restart_required = ?outcome.restart_required, "config reloaded");
            }
            Err(err) => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("config reload refused, the running config keeps serving: {err}");
            }
        }
        result
    }

    async fn swap_in(self: &Arc<Self>) -> Result<Outcome, ReloadError> {
        let reader = self.clone();
        let config = tokio::task::spawn_blocking(move || (reader.load)())
            .await
            .map_err(|err| LoadError::Read { path: "the config".into(), reason: err.to_string() })??;
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
