//! Request-log sinks: every finished request as one JSON record, to a JSONL
//! file rotated by size and/or to a webhook in batches, and as one OTLP
//! log record to the collector when OTLP is on. Each sink has a
//! bounded queue the request path only `try_send`s to: a full queue drops
//! the record and counts it, never blocking a request. A webhook batch that
//! fails is retried a few times, then dropped and counted.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use serde::Serialize;
use switchyard_config::{FileSink, Otlp, RequestLog, WebhookSink};
use tokio::sync::mpsc;

use switchyard_transport::hooks::HookClient;

/// One request, as the sinks write it.
#[derive(Debug, Clone, Serialize)]
pub struct SinkRecord {
    /// When it finished (Unix ms).
    pub at_ms: u64,
    /// Its request id.
    pub request_id: String,
    /// The virtual key, when one was used (never the secret).
    pub key_id: Option<String>,
    /// The caller's protocol.
    pub ingress: &'static str,
    /// The pool named (a configured name, or none).
    pub pool: Option<String>,
    /// The lane that served or last failed.
    pub lane: Option<String>,
    /// The wire model.
    pub model: Option<String>,
    /// The status the caller got.
    pub status: u16,
    /// Streamed.
    pub stream: bool,
    /// Prompt tokens (cached included).
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cache reads.
    pub cache_read_tokens: u64,
    /// Cache writes.
    pub cache_write_tokens: u64,
    /// USD at today's prices.
    pub usd: f64,
    /// Time to first byte (ms).
    pub ttfb_ms: Option<f64>,
    /// Total time (ms).
    pub total_ms: f64,
    /// Lanes that failed before the one that answered.
    pub failovers: u32,
    /// Tokens are the gateway's estimate.
    pub estimated: bool,
    /// The request body, only with `include_text`.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "as_text")]
    pub request_body: Option<Bytes>,
    /// A whole reply's body, only with `include_text` (streams: none).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "as_text")]
    pub response_body: Option<Bytes>,
}

fn as_text<S: serde::Serializer>(body: &Option<Bytes>, serializer: S) -> Result<S::Ok, S::Error> {
    match body {
        Some(bytes) => serializer.serialize_str(&String::from_utf8_lossy(bytes)),
        None => serializer.serialize_none(),
    }
}

/// Writes a batch of records as an OTLP logs export body.
pub type EncodeLogs = fn(&crate::trace::Resource, &[SinkRecord]) -> Vec<u8>;

/// What the sinks count.
#[derive(Debug, Default)]
pub struct SinkStats {
    /// Records written to the file.
    pub file_written: AtomicU64,
    /// Records the file sink dropped (queue full, or a write error).
    pub file_dropped: AtomicU64,
    /// Records delivered to the webhook.
    pub webhook_delivered: AtomicU64,
    /// Records the webhook sink dropped (queue full, or retries spent).
    pub webhook_dropped: AtomicU64,
    /// Records exported to the OTLP collector as logs.
    pub otlp_exported: AtomicU64,
    /// Records the OTLP log exporter dropped (queue full, or the post failed).
    pub otlp_dropped: AtomicU64,
    /// Records queued in any sink and not yet written, delivered or dropped.
    pub pending: AtomicU64,
}

/// The configured sinks.
pub struct Sinks {
    file: Option<mpsc::Sender<SinkRecord>>,
    webhook: Option<mpsc::Sender<SinkRecord>>,
    otlp: Option<mpsc::Sender<SinkRecord>>,
    /// Counters.
    pub stats: Arc<SinkStats>,
}

impl Sinks {
    /// Starts the writer of each configured sink; `None` when none is.
    /// `otlp` exports the records as logs, written by its `EncodeLogs`
    /// (`otlp::encode_logs`).
    pub fn start(config: &RequestLog, otlp: Option<(&Otlp, EncodeLogs)>, client: &HookClient) -> Option<Sinks> {
        if config.file.is_none() && config.webhook.is_none() && otlp.is_none() {
            return None;
        }
        let stats = Arc::new(SinkStats::default());
        let file = config.file.as_ref().map(|file| {
            let (tx, rx) = mpsc::channel(file.queue);
            let (file, stats) = (file.clone(), stats.clone());
            std::thread::Builder::new()
                .name("switchyard-request-log".into())
                .spawn(move || write_file(file, rx, stats))
                .map(|_| tx)
        });
        let file = match file {
            Some(Ok(tx)) => Some(tx),
            Some(Err(err)) => {
                tracing::error!(error = %err, "the request-log file writer could not start");
                None
            }
            None => None,
        };
        let webhook = config.webhook.as_ref().map(|hook| {
            let (tx, rx) = mpsc::channel(hook.queue);
            switchyard_tasks::service(
                "request log webhook",
                post_batches(hook.clone(), rx, client.clone(), stats.clone()),
            );
            tx
        });
        let otlp = otlp.map(|(otlp, encode)| {
            let (tx, rx) = mpsc::channel(otlp.queue);
            let to = crate::trace::Collector::new(otlp.logs_url.clone(), otlp);
            let resource = crate::trace::Resource::of(otlp);
            switchyard_tasks::service(
                "request log otlp",
                export_logs(to, resource, encode, rx, client.clone(), stats.clone()),
            );
            tx
        });
        Some(Sinks { file, webhook, otlp, stats })
    }

    /// Hands a record to every sink (cloned for all but the last); a full
    /// queue drops it (counted).
    pub fn push(&self, record: SinkRecord) {
        let queues = [
            (&self.file, &self.stats.file_dropped),
            (&self.webhook, &self.stats.webhook_dropped),
            (&self.otlp, &self.stats.otlp_dropped),
        ];
        let mut open = queues.into_iter().filter_map(|(queue, dropped)| Some((queue.as_ref()?, dropped))).peekable();
        while let Some((queue, dropped)) = open.next() {
            if open.peek().is_none() {
                self.offer(queue, record, dropped);
                break;
            }
            self.offer(queue, record.clone(), dropped);
        }
    }

    fn offer(&self, queue: &mpsc::Sender<SinkRecord>, record: SinkRecord, dropped: &AtomicU64) {
        self.stats.pending.fetch_add(1, Ordering::Relaxed);
        if queue.try_send(record).is_err() {
            self.stats.pending.fetch_sub(1, Ordering::Relaxed);
            dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The file writer, on its own thread (file I/O blocks): appends lines,
/// and at `max_size` renames `path` to `path.1` (shifting older ones, the
/// oldest past `keep` removed) and starts a new file.
fn write_file(sink: FileSink, mut rx: mpsc::Receiver<SinkRecord>, stats: Arc<SinkStats>) {
    let open = |path: &str| std::fs::OpenOptions::new().create(true).append(true).open(path);
    let mut file = match open(&sink.path) {
        Ok(file) => std::io::BufWriter::new(file),
        Err(err) => {
            tracing::error!(path = %sink.path, error = %err, "the request-log file cannot be opened");
            while rx.blocking_recv().is_some() {
                stats.file_dropped.fetch_add(1, Ordering::Relaxed);
                stats.pending.fetch_sub(1, Ordering::Relaxed);
            }
            return;
        }
    };
    let mut size = std::fs::metadata(&sink.path).map_or(0, |m| m.len());
    while let Some(record) = rx.blocking_recv() {
        let mut batch = vec![record];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
        }
        let count = batch.len() as u64;
        for record in batch {
            let Ok(mut line) = serde_json::to_vec(&record) else { continue };
            line.push(b'\n');
            if file.write_all(&line).is_err() {
                stats.file_dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            stats.file_written.fetch_add(1, Ordering::Relaxed);
            size += line.len() as u64;
            if size >= sink.max_size {
                let _ = file.flush();
                for index in (1..=sink.keep).rev() {
                    let from = if index == 1 { sink.path.clone() } else { format!("{}.{}", sink.path, index - 1) };
                    let _ = std::fs::rename(&from, format!("{}.{index}", sink.path));
                }
                if sink.keep == 0 {
                    let _ = std::fs::remove_file(&sink.path);
                }
                match open(&sink.path) {
                    Ok(new) => {
                        file = std::io::BufWriter::new(new);
                        size = 0;
                    }
                    Err(err) => {
                        tracing::error!(path = %sink.path, error = %err, "the request-log file cannot be reopened")
                    }
                }
            }
        }
        let _ = file.flush();
        stats.pending.fetch_sub(count, Ordering::Relaxed);
    }
}

/// The webhook poster: batches of up to `batch` records, at least every
/// `interval`, three tries each.
async fn post_batches(
    hook: WebhookSink,
    mut rx: mpsc::Receiver<SinkRecord>,
    client: HookClient,
    stats: Arc<SinkStats>,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + hook.interval;
        while batch.len() < hook.batch {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(record)) => batch.push(record),
                Ok(None) | Err(_) => break,
            }
        }
        let count = batch.len() as u64;
        let Ok(body) = serde_json::to_vec(&batch) else {
            stats.pending.fetch_sub(count, Ordering::Relaxed);
            continue;
        };
        let body = Bytes::from(body);
        let mut delivered = false;
        for attempt in 0..3u32 {
            let sent =
                client.post(&hook.url, "application/json", Full::new(body.clone()), Duration::from_secs(10)).await;
            if sent.is_ok() {
                delivered = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
        }
        if delivered {
            stats.webhook_delivered.fetch_add(count, Ordering::Relaxed);
        } else {
            stats.webhook_dropped.fetch_add(count, Ordering::Relaxed);
            let url = switchyard_config::shown_url(&hook.url);
            tracing::warn!(%url, records = count, "request-log webhook unreachable; batch dropped");
        }
        stats.pending.fetch_sub(count, Ordering::Relaxed);
    }
}

/// The OTLP log exporter: batches of up to 512 records, at least every
/// second; a failed post is counted and its batch dropped (a collector's
/// outage never backs up into the request path).
async fn export_logs(
    to: crate::trace::Collector,
    resource: crate::trace::Resource,
    encode: EncodeLogs,
    mut rx: mpsc::Receiver<SinkRecord>,
    client: HookClient,
    stats: Arc<SinkStats>,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        while batch.len() < 512 {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(record)) => batch.push(record),
                Ok(None) | Err(_) => break,
            }
        }
        let count = batch.len() as u64;
        let body = encode(&resource, &batch);
        drop(batch);
        match to.post(&client, body).await {
            Ok(()) => stats.otlp_exported.fetch_add(count, Ordering::Relaxed),
            Err(err) => {
                tracing::debug!(error = %err, records = count, "log export failed");
                stats.otlp_dropped.fetch_add(count, Ordering::Relaxed)
            }
        };
        stats.pending.fetch_sub(count, Ordering::Relaxed);
    }
}
