//! The `switchyard` binary: command line, logging, config loading and the
//! listeners. Everything else lives in the library crates.

#[cfg(not(target_env = "msvc"))]
mod alloc;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand, ValueEnum};
use switchyard_config::{Config, Server as Limits, DEMO_CONFIG};
use switchyard_gateway::reload::{ConfigSource, FileSource, LoadError, Reloader, TextSource};
use switchyard_gateway::server::tls::LiveTls;
use switchyard_gateway::server::{LiveRouter, Settings};
use switchyard_gateway::Gateway;
use switchyard_telemetry::access::{LineFormat, LineWriter};
use tracing_subscriber::fmt::MakeWriter;

#[derive(Parser)]
#[command(name = "switchyard", version, about = "An LLM API gateway that speaks six wire protocols")]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Human)]
    log_format: LogFormat,
    /// With no command: serve, as `switchyard serve` would.
    #[command(flatten)]
    serve: ServeArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

/// What `serve` (and the bare command) take.
#[derive(clap::Args, Clone, Default)]
struct ServeArgs {
    /// Config file; without one, ./switchyard.yaml or the embedded demo.
    #[arg(long, env = "SWITCHYARD_CONFIG")]
    config: Option<PathBuf>,
    /// Data-plane address, over the config's `listen` (e.g. 127.0.0.1:18080).
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// Admin-plane address, over the config's `admin_listen`.
    #[arg(long)]
    admin_listen: Option<std::net::SocketAddr>,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Human,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the gateway (the default).
    Serve(ServeArgs),
    /// Validate a config file and exit.
    Check {
        /// Config file to check.
        #[arg(long, env = "SWITCHYARD_CONFIG")]
        config: PathBuf,
    },
    /// Serve the deterministic vendor fake of all six protocols.
    MockUpstream {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:9000")]
        listen: String,
    },
    /// Print the embedded demo config (a starting point for your own).
    DemoConfig,
    /// Check or sign receipt chains (`receipts:`).
    Receipts {
        #[command(subcommand)]
        command: ReceiptsCommand,
    },
}

#[derive(Subcommand)]
enum ReceiptsCommand {
    /// Check a receipt chain offline: every hash, link and seal; the first
    /// broken link is named and the exit status is 1.
    Verify {
        /// The chain file (JSON lines, as `receipts.path` keeps it; `-` for stdin).
        file: PathBuf,
        /// The signer's public key (hex) to trust; without it (or --key),
        /// the chain's first seal names the signer, printed to compare.
        #[arg(long, conflicts_with = "key")]
        public_key: Option<String>,
        /// The receipts secret to trust (its public key is derived).
        #[arg(long, env = "SWITCHYARD_RECEIPT_KEY", hide_env_values = true)]
        key: Option<String>,
    },
    /// Print the public key of the receipts secret (what verifiers trust).
    PublicKey {
        /// The receipts secret.
        #[arg(long, env = "SWITCHYARD_RECEIPT_KEY", hide_env_values = true)]
        key: String,
    },
}

/// The async runtime: on one core (an affinity mask, a one-CPU container),
/// tokio's current-thread scheduler, which has no work stealing, no
/// cross-thread wake-ups and no per-poll timing to tune them (measured
/// cheaper per request than a one-worker multi-thread runtime); on more,
/// one worker per core.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    if cores == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().enable_all().build()
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // Dropping the guard flushes the log lines still queued.
    let (log_writer, log_lines) = init_logging(cli.log_format);
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command.unwrap_or(Command::Serve(cli.serve)) {
            Command::Serve(args) => serve(args, log_lines).await,
            Command::Check { config } => check(&config),
            Command::MockUpstream { listen } => mock_upstream(&listen).await,
            Command::Receipts { command } => receipts(command),
            Command::DemoConfig => {
                use std::io::Write;
                std::io::stdout().write_all(DEMO_CONFIG.as_bytes()).context("cannot write to stdout")
            }
        }
    });
    // The last log lines first, then the verdict.
    drop(runtime);
    drop(log_writer);
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `switchyard receipts …`.
fn receipts(command: ReceiptsCommand) -> anyhow::Result<()> {
    use std::io::Write;
    use switchyard_governance::receipt::{verify, Signer};
    let signer = |key: &str| Signer::from_secret(key).context("the receipts secret cannot make a signing key");
    let mut out = std::io::stdout();
    match command {
        ReceiptsCommand::PublicKey { key } => {
            writeln!(out, "{}", signer(&key)?.public_key()).context("cannot write to stdout")
        }
        ReceiptsCommand::Verify { file, public_key, key } => {
            let trusted = match (public_key, key) {
                (Some(public), _) => Some(public),
                (None, Some(key)) => Some(signer(&key)?.public_key().to_owned()),
                (None, None) => None,
            };
            let text = match file.as_os_str() == "-" {
                true => std::io::read_to_string(std::io::stdin()).context("cannot read stdin")?,
                false => std::fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?,
            };
            let verified = match verify(text.lines(), trusted.as_deref()) {
                Ok(verified) => verified,
                Err(broken) => bail!("the receipt chain is broken at {broken}"),
            };
            let signer = verified.signer.as_deref().unwrap_or("-");
            let chain = verified.chain.as_deref().unwrap_or("-");
            let trust = match trusted.is_some() {
                true => "the trusted key",
                false => "the key its first seal names (pass --public-key to trust one)",
            };
            writeln!(
                out,
                "ok: {} receipts of chain `{chain}`, linked; sealed up to link {} by {trust}: {signer}",
                verified.links, verified.sealed
            )
            .context("cannot write to stdout")?;
            if verified.sealed < verified.links {
                writeln!(
                    out,
                    "note: links {} to {} are not sealed yet (the writer seals its head once a second)",
                    verified.sealed + 1,
                    verified.links
                )
                .context("cannot write to stdout")?;
            }
            Ok(())
        }
    }
}

/// Log lines queued for stderr at most; past it lines are dropped rather
/// than blocking requests.
const LOG_QUEUE_LINES: usize = 8192;

/// Logs go to stderr from a writer thread: a request formats its access
/// line but never waits on a slow stderr (a pipe to a log collector).
fn init_logging(format: LogFormat) -> (tracing_appender::non_blocking::WorkerGuard, AccessLines) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SWITCHYARD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // The queue's slots are allocated up front: 8k lines (a burst of access
    // lines) costs 256 KiB where the default 128k would cost 4 MiB of RSS.
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_QUEUE_LINES)
        .lossy(true)
        .finish(std::io::stderr());
    let lines = AccessLines { writer: writer.clone(), format };
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).with_ansi(ansi);
    match format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    (guard, lines)
}

/// The access log's way into the log writer: lines the gateway formats
/// itself (see `telemetry::access`) join every other line's queue.
#[derive(Clone)]
struct AccessLines {
    writer: tracing_appender::non_blocking::NonBlocking,
    format: LogFormat,
}

impl LineWriter for AccessLines {
    fn write_line(&self, line: &[u8]) {
        use std::io::Write;
        // A full queue drops the line (the writer is lossy by design).
        let _ = self.writer.make_writer().write_all(line);
    }
}

fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Loads the config the way `serve` does: the given file, else
/// `./switchyard.yaml`, else the embedded demo.
fn load_config(path: Option<PathBuf>) -> anyhow::Result<(Config, String)> {
    let path = config_path(path);
    let config = read_config(path.as_deref())?;
    Ok((config, path.map_or_else(|| "embedded demo config".to_owned(), |p| p.display().to_string())))
}

/// The file a config comes from: the one named, else `./switchyard.yaml`
/// when it exists, else none (the embedded demo).
fn config_path(path: Option<PathBuf>) -> Option<PathBuf> {
    path.or_else(|| {
        let local = PathBuf::from("switchyard.yaml");
        local.exists().then_some(local)
    })
}

/// Reads and validates the config (`check`, `serve` and every reload).
fn read_config(path: Option<&std::path::Path>) -> Result<Config, LoadError> {
    let text = match path {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|err| LoadError::Read { path: path.display().to_string(), reason: err.to_string() })?,
        None => DEMO_CONFIG.to_owned(),
    };
    Ok(switchyard_config::load(&text, &env_lookup)?)
}

fn check(path: &std::path::Path) -> anyhow::Result<()> {
    let (config, source) = load_config(Some(path.to_path_buf()))?;
    Gateway::new(config.clone(), switchyard_protocol::codec).context("config is valid YAML but cannot be served")?;
    if let Some(tls) = &config.admin.tls {
        switchyard_gateway::server::tls::acceptor(tls).context("the admin TLS settings cannot be used")?;
    }
    if let Some(tls) = &config.server.tls {
        LiveTls::data(tls).context("the data listener's TLS settings (server.tls) cannot be used")?;
    }
    for warning in &config.warnings {
        eprintln!("warning: {warning}");
    }
    use std::io::Write;
    writeln!(
        std::io::stdout(),
        "{source}: ok ({} providers, {} models, {} pools)",
        config.providers.len(),
        config.models.len(),
        config.pools.len()
    )
    .context("cannot write to stdout")
}

async fn serve(args: ServeArgs, access_lines: AccessLines) -> anyhow::Result<()> {
    let path = config_path(args.config);
    let source = path.as_ref().map_or_else(|| "embedded demo config".to_owned(), |p| p.display().to_string());
    let mut config = read_config(path.as_deref()).with_context(|| format!("config {source}"))?;
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if let Some(admin_listen) = args.admin_listen {
        config.admin_listen = admin_listen;
    }
    // The overrides pass the same checks the file's own values did.
    let problems = switchyard_config::effective_issues(&config);
    if !problems.is_empty() {
        return Err(switchyard_config::ConfigError(problems))
            .with_context(|| format!("config {source} with the command line's listeners"));
    }
    for warning in &config.warnings {
        tracing::warn!(config = %source, "{warning}");
    }
    let listen = config.listen;
    let admin_listen = config.admin_listen;
    let limits = config.server.clone();
    let drain_timeout = limits.drain_timeout;
    let facts = config.model_facts.clone();
    let example_model =
        config.pools.first().map(|p| p.name.to_string()).or_else(|| config.models.first().map(|m| m.name.to_string()));
    let mut gateway = Gateway::new(config, switchyard_protocol::codec)?;
    let governance = switchyard_state::governance::from_config(&gateway.config, gateway.prices())
        .await
        .context("governance could not start")?;
    let ledger_writer = match governance {
        Some((governance, writer)) => {
            gateway = gateway.with_governance(governance);
            Some(writer)
        }
        None => None,
    };
    if let Some(url) = &gateway.config.storage.redis_url {
        let shared = switchyard_fleet::shared::FleetState::connect(url)
            .await
            .context("storage.redis_url: the fleet's breaker channel could not start")?;
        gateway = gateway.with_fleet_state(shared);
    }
    // A single node's session pins from before the restart, back on their lanes.
    match gateway.restore_pins().await {
        Ok(0) => {}
        Ok(restored) => tracing::info!(restored, "session pins kept from before the restart are back"),
        Err(err) => tracing::warn!(error = %err, "kept session pins could not be read; sessions start unpinned"),
    }
    // `/mcp`'s hub: idle until a caller sends a message.
    gateway = gateway.with_mcp(switchyard_gateway::mcp_hub());
    let format = match access_lines.format {
        LogFormat::Human => LineFormat::Human,
        LogFormat::Json => LineFormat::Json,
    };
    let gateway = Arc::new(gateway.with_telemetry().with_access_lines(format, Arc::new(access_lines)));
    switchyard_gateway::reload::start_tasks(&gateway);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen} (set `listen:` to a free address)"))?;
    let admin = tokio::net::TcpListener::bind(admin_listen)
        .await
        .with_context(|| format!("cannot listen on {admin_listen} (set `admin_listen:` to a free loopback address)"))?;
    let bound = listener.local_addr()?;
    tracing::info!(config = %source, listen = %bound, admin = %admin.local_addr()?, "switchyard is listening");
    tracing::info!(
        snapshot = facts.snapshot,
        known = facts.known,
        matched = facts.matched,
        "model facts: the bundled snapshot fills what the config's models leave out"
    );
    // TLS on the data listener: read now (a bad file stops the boot), again
    // on SIGHUP and whenever the files change.
    let data_tls = match &gateway.config.server.tls {
        Some(tls) => Some(LiveTls::data(tls).context("the data listener's TLS (server.tls) cannot start")?),
        None => None,
    };
    if let Some(model) = example_model {
        let scheme = if data_tls.is_some() { "https" } else { "http" };
        let example = format!(
            "curl -s {scheme}://{bound}/v1/chat/completions -H 'content-type: application/json' -d '{{\"model\":\"{model}\",\"messages\":[{{\"role\":\"user\",\"content\":\"hello\"}}]}}'"
        );
        tracing::info!(%example, "try it");
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let lifecycle = gateway.lifecycle.clone();
    let sockets = gateway.sockets.clone();
    switchyard_tasks::service("shutdown signal", async move {
        shutdown_signal().await;
        // `/readyz` answers 503 from here on, on connections still open.
        lifecycle.draining();
        // Open sockets finish their turns (within `duplex.drain`) and close.
        sockets.stop();
        tracing::info!(drain = ?drain_timeout, "shutting down: no new connections, draining in-flight requests");
        let _ = stop_tx.send(true);
    });
    // Both listeners serve swappable routers: SIGHUP and the admin API reload the file.
    let data_router = LiveRouter::new(switchyard_gateway::router(gateway.clone()));
    let admin_router = LiveRouter::new(switchyard_gateway::admin_router(gateway.clone()));
    // Batch lines run through the data router, as their keys.
    switchyard_gateway::batches::start(&gateway, data_router.clone());
    let source: Arc<dyn ConfigSource> = match &path {
        Some(path) => Arc::new(FileSource { path: path.clone(), env: env_lookup }),
        None => Arc::new(TextSource { text: Arc::new(std::sync::Mutex::new(DEMO_CONFIG.to_owned())), env: env_lookup }),
    };
    let reloader = Reloader::new(gateway.clone(), data_router.clone(), admin_router.clone(), source);
    // The running text is a version of the config (or, in a fleet, the
    // fleet's newest version serves here).
    switchyard_gateway::reload::follow_versions(&reloader).await;
    let admin_tls = match &gateway.config.admin.tls {
        Some(tls) => Some(LiveTls::admin(tls).context("admin TLS cannot start")?),
        None => None,
    };
    let certificates: Vec<Arc<LiveTls>> = data_tls.iter().chain(&admin_tls).cloned().collect();
    for tls in &certificates {
        tls.watch(TLS_WATCH);
    }
    switchyard_tasks::service("sighup reload", reload_on_sighup(reloader.clone(), certificates));
    let mut admin_stop = stop_rx.clone();
    let admin_limits = Limits { drain_timeout: Duration::from_secs(1), ..limits.clone() };
    let mut admin_settings = Settings::plain(admin_limits);
    admin_settings.tls = admin_tls;
    let admin_task = switchyard_tasks::service(
        "admin listener",
        switchyard_gateway::server::serve(admin, admin_router, admin_settings, async move {
            let _ = admin_stop.wait_for(|stop| *stop).await;
        }),
    );
    let mut data_stop = stop_rx;
    let mut settings = switchyard_gateway::server::data_settings(&gateway, Arc::default());
    settings.tls = data_tls;
    // Stores, caches, tasks and both listeners are up: ready for traffic.
    gateway.lifecycle.serving();
    switchyard_gateway::server::serve(listener, data_router, settings, async move {
        let _ = data_stop.wait_for(|stop| *stop).await;
    })
    .await?;
    let _ = admin_task.await;
    // Upgraded sockets are not the listener's: wait for them apart.
    let socket_drain = gateway.config.duplex.drain + gateway.config.server.write_timeout;
    let _ = tokio::time::timeout(socket_drain, gateway.sockets.closed()).await;
    // Work still running (a request whose caller left, a cache or key
    // write) ends and settles before the last flush.
    let left = switchyard_tasks::drain(WORK_DRAIN).await;
    if left > 0 {
        tracing::warn!(tasks = left, "shutting down with work still running; its ledger rows may be lost");
    }
    // Every request has settled: this instance's leases give back what
    // they did not spend (the other instances see it at once), before the
    // settlements they queued are flushed below.
    if let Some(fleet) = gateway.governance.as_ref().and_then(|g| g.fleet.clone()) {
        let _ = tokio::time::timeout(Duration::from_secs(2), fleet.return_leases()).await;
        let _ = tokio::time::timeout(Duration::from_secs(2), fleet.flush()).await;
    }
    // Every request has settled: let the ledger writer flush the last rows.
    if let Some(writer) = ledger_writer {
        writer.finish().await;
    }
    // And the last session pins (a single node's, kept for the next start).
    if let Some(pins) = &gateway.pins {
        pins.finish().await;
    }
    // And the last spans and request-log records leave.
    reloader.current().telemetry.flush(Duration::from_secs(5)).await;
    Ok(())
}

async fn mock_upstream(listen: &str) -> anyhow::Result<()> {
    let Ok(addr) = listen.parse::<std::net::SocketAddr>() else {
        bail!("`{listen}` is not a socket address; write it as host:port, e.g. 127.0.0.1:9000");
    };
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    tracing::info!(listen = %listener.local_addr()?, "vendor fake is listening (all six protocols)");
    // The fake stands in for vendors under load tests: no caps of its own.
    let limits = Limits {
        drain_timeout: Duration::from_secs(5),
        max_connections: 1 << 20,
        max_in_flight: 1 << 20,
        ..Limits::default()
    };
    switchyard_gateway::server::serve(
        listener,
        switchyard_gateway::server::mock_router(switchyard_protocol::codec),
        Settings::plain(limits),
        shutdown_signal(),
    )
    .await?;
    Ok(())
}

/// How long shutdown waits for work still running once the listeners have
/// drained (within the 15 s the deployment manifests leave for flushes).
const WORK_DRAIN: Duration = Duration::from_secs(5);

/// How often the listeners' TLS files are looked at for a change.
const TLS_WATCH: Duration = Duration::from_secs(5);

/// Reloads the config, and the listeners' TLS files, on every SIGHUP (a
/// bad file is logged and refused; what served keeps serving).
async fn reload_on_sighup(reloader: Arc<Reloader>, certificates: Vec<Arc<LiveTls>>) {
    #[cfg(unix)]
    {
        let Ok(mut hangups) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
            tracing::warn!("SIGHUP cannot be watched; reload with POST /api/v1/admin/config/reload");
            return;
        };
        while hangups.recv().await.is_some() {
            // The outcome is logged by the reloader.
            let _ = reloader.reload().await;
            for tls in &certificates {
                if let Err(err) = tls.reload() {
                    tracing::warn!(error = %err, "TLS files cannot be used; the current certificate keeps serving");
                }
            }
        }
    }
    #[cfg(not(unix))]
    drop((reloader, certificates));
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
