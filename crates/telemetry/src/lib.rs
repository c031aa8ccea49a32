//! What the gateway tells operators: Prometheus metrics ([`metrics`]),
//! OpenTelemetry traces over OTLP ([`trace`]) and request-log sinks
//! ([`sink`]), alerts to the operator's webhook ([`alert`]), plus the
//! access line the settle stage writes. The request
//! path only fills counters and plain records; every export happens off it.

pub mod access;
pub mod alert;
pub mod connections;
pub mod encode;
pub mod history;
pub mod metrics;
pub mod otlp;
pub mod otlp_metrics;
pub mod recent_text;
pub mod reconcile;
pub mod sink;
pub mod trace;

use switchyard_config::Config;

pub use connections::ListenerStats;

/// The telemetry a gateway runs with.
pub struct Telemetry {
    /// Count requests for `/metrics`.
    pub metrics_on: bool,
    /// One access line per request at info, when on.
    pub access: Option<access::AccessLog>,
    /// Traces, when an OTLP endpoint is configured.
    pub tracer: Option<trace::Tracer>,
    /// Request-log sinks, when configured.
    pub sinks: Option<sink::Sinks>,
    /// Per-minute aggregates for the console (fed by `sampler`).
    pub history: history::History,
    /// The newest requests' text, only with `request_log.include_text`.
    pub recent_text: Option<recent_text::RecentText>,
    /// Alerts: sent to `alerts:`'s receiver, and kept for the console
    /// without one (none only in a gateway built without telemetry).
    pub alerts: Option<alert::Alerts>,
    /// What reconciliation found (`reconcile:`), kept across reloads.
    pub reconciliation: reconcile::Reconciliation,
    include_text: bool,
}

impl Telemetry {
    /// What `config` asks for that needs no task of its own (metrics and
    /// the access line): the default until [`Telemetry::start`] runs.
    pub fn local(config: &Config) -> Telemetry {
        Telemetry {
            metrics_on: config.telemetry.metrics,
            access: config
                .telemetry
                .access_log
                .then(|| access::AccessLog::new(access::LineFormat::Human, std::sync::Arc::new(access::TracingLines))),
            tracer: None,
            sinks: None,
            history: history::History::default(),
            recent_text: config.telemetry.request_log.include_text.then(recent_text::RecentText::default),
            alerts: None,
            reconciliation: reconcile::Reconciliation::default(),
            include_text: config.telemetry.request_log.include_text,
        }
    }

    /// Everything `config` asks for, exporters and writers started.
    pub fn start(config: &Config, client: &switchyard_transport::hooks::HookClient) -> Telemetry {
        Telemetry {
            tracer: config
                .telemetry
                .otlp
                .as_ref()
                .map(|otlp| trace::Tracer::start(otlp, client.clone(), crate::otlp::encode)),
            sinks: sink::Sinks::start(
                &config.telemetry.request_log,
                config.telemetry.otlp.as_ref().map(|otlp| (otlp, crate::otlp::encode_logs as sink::EncodeLogs)),
                client,
            ),
            // Alerts are kept for the console even without a receiver.
            alerts: Some(match config.alerts.as_ref() {
                Some(alerts) => alert::Alerts::start(alerts, client),
                None => alert::Alerts::unsent(),
            }),
            reconciliation: reconcile::Reconciliation::default(),
            ..Telemetry::local(config)
        }
    }

    /// Sends access lines in `format` to `writer` (the binary's
    /// non-blocking log writer) when the config and the log filter want them.
    pub fn write_access_lines(&mut self, format: access::LineFormat, writer: std::sync::Arc<dyn access::LineWriter>) {
        let wanted = tracing::enabled!(target: access::TARGET, tracing::Level::INFO);
        self.access = self.access.take().filter(|_| wanted).map(|_| access::AccessLog::new(format, writer));
    }

    /// Waits (at most `limit`) until the spans and records of finished
    /// requests have left: called at shutdown, after the listeners drained.
    pub async fn flush(&self, limit: std::time::Duration) {
        use std::sync::atomic::Ordering;
        let pending = || {
            self.tracer.as_ref().map_or(0, |t| t.stats.pending.load(Ordering::Relaxed))
                + self.sinks.as_ref().map_or(0, |s| s.stats.pending.load(Ordering::Relaxed))
        };
        let deadline = tokio::time::Instant::now() + limit;
        while pending() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// True when prompt and reply text are kept (for the request-log
    /// sinks and the console's recent requests).
    pub fn keeps_text(&self) -> bool {
        self.include_text
    }
}
