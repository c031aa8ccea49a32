//! What a group keeps of its requests' text, sealed, and the writer that
//! stores it. [`Retention`] is the config's side (the sealer under
//! `retention.key`, the redactor, the days; which group keeps what is the
//! group tree's, `Governance::retention_of`); a settled request whose group keeps text hands its
//! [`Captured`] bodies over, and they are redacted (for `redacted`), a
//! stream's frames read back into one whole reply, and all of it (bound
//! to the end user admission read, as a keyed tag) sealed before it is queued. [`ContentQueue`] writes the
//! sealed records behind, in batches, off the request path; a purge task
//! removes records past `retention.days`.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use switchyard_codec::Codec;
use switchyard_config::Config;
use switchyard_guard::retention::{redact, redactor, Retention as Keeps, Sealer, Unsealed, NONCE_BYTES};
use switchyard_guard::Screen;
use switchyard_store::{ContentStore, KeptContent};
use tokio::sync::mpsc;

/// Records written in one batch at most.
const BATCH: usize = 256;
/// How often the purge runs.
const PURGE_EVERY: Duration = Duration::from_secs(3600);

/// The config's retention: the key kept text is sealed under, the
/// redactor, and how long text is kept. Which group keeps what is read from
/// the group tree (`Governance::retention_of`): config groups and groups
/// made over the admin API alike.
pub struct Retention {
    sealer: Sealer,
    redactor: Screen,
    /// Days kept.
    pub days: u32,
}

impl std::fmt::Debug for Retention {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retention").field("days", &self.days).finish_non_exhaustive()
    }
}

/// A request's bodies as the caller sent and got them, to be kept.
#[derive(Debug)]
pub struct Captured {
    /// The ledger row's entry.
    pub entry: i64,
    /// When (Unix ms).
    pub at_ms: i64,
    /// The request id.
    pub request_id: String,
    /// The key.
    pub key_id: Option<String>,
    /// The key's group.
    pub group: Option<String>,
    /// What the group keeps.
    pub keeps: Keeps,
    /// The end user (the one admission read: the operator's header, else
    /// the caller's own field, length-capped).
    pub user: Option<String>,
    /// The request body (after the request's guardrails).
    pub request: Bytes,
    /// The reply: a whole body, or a stream's frames as the caller got them.
    pub reply: Option<Bytes>,
    /// The reply is a stream's frames.
    pub stream: bool,
}

impl Retention {
    /// The retention `config` asks for (`None`: no `retention:` block).
    pub fn build(config: &Config) -> Option<Retention> {
        let store = config.retention.as_ref()?;
        Some(Retention { sealer: Sealer::new(&store.key.0), redactor: redactor(), days: store.days })
    }

    /// The end user's tag in the store.
    pub fn user_tag(&self, user: &str) -> String {
        self.sealer.user_tag(user)
    }

    /// `captured` made a sealed record: a stream read back into one whole
    /// reply in the caller's protocol, `redacted` text masked, then sealed
    /// with a fresh nonce and bound to its entry and end user's tag.
    pub fn seal(&self, codec: &dyn Codec, captured: Captured) -> Option<KeptContent> {
        let reply = captured.reply.as_ref().map(|reply| match captured.stream {
            true => whole_reply(codec, reply).unwrap_or_else(|| reply.to_vec()),
            false => reply.to_vec(),
        });
        let redacted = captured.keeps == Keeps::Redacted;
        // `{"request": …, "reply": …}` from the bodies' own bytes: a body
        // that is JSON goes in as it is (checked, not parsed into a tree),
        // any other as a string.
        let opaque = codec.opaque();
        let add = |plain: &mut Vec<u8>, body: &[u8], places| {
            let body = if redacted { redact(&self.redactor, body, places) } else { std::borrow::Cow::Borrowed(body) };
            if serde_json::from_slice::<serde::de::IgnoredAny>(&body).is_ok() {
                plain.extend_from_slice(&body);
            } else {
                let text = serde_json::to_vec(&String::from_utf8_lossy(&body)).unwrap_or_else(|_| b"null".to_vec());
                plain.extend_from_slice(&text);
            }
        };
        let mut plain = Vec::with_capacity(captured.request.len() + reply.as_ref().map_or(0, Vec::len) + 32);
        plain.extend_from_slice(b"{\"request\":");
        add(&mut plain, &captured.request, opaque.request);
        plain.extend_from_slice(b",\"reply\":");
        match reply.as_deref() {
            Some(reply) => add(&mut plain, reply, opaque.reply),
            None => plain.extend_from_slice(b"null"),
        }
        plain.push(b'}');
        let user_tag = captured.user.as_deref().map(|user| self.sealer.user_tag(user));
        let mut nonce = [0u8; NONCE_BYTES];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce).ok()?;
        let sealed = self.sealer.seal(nonce, &row_binding(captured.entry, user_tag.as_deref()), &plain);
        Some(KeptContent {
            entry: captured.entry,
            at_ms: captured.at_ms,
            request_id: captured.request_id,
            key_id: captured.key_id,
            group: captured.group,
            user_tag,
            retention: captured.keeps.as_str().to_owned(),
            sealed,
        })
    }

    /// `plain`, kept for a caller (a stored conversation, never redacted:
    /// it is given back as it was said), sealed with a fresh nonce and
    /// bound to `row` (the object's kind, owner, id and end user's tag).
    pub fn seal_kept(&self, row: &[u8], plain: &[u8]) -> Option<Vec<u8>> {
        let mut nonce = [0u8; NONCE_BYTES];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce).ok()?;
        Some(self.sealer.seal(nonce, row, plain))
    }

    /// What [`seal_kept`](Self::seal_kept) sealed for `row`.
    pub fn open_kept(&self, row: &[u8], sealed: &[u8]) -> Result<Vec<u8>, Unsealed> {
        self.sealer.open(row, sealed)
    }

    /// A kept record's text: `{request, reply}`.
    pub fn open(&self, kept: &KeptContent) -> Result<serde_json::Value, Unsealed> {
        let plain = self.sealer.open(&row_binding(kept.entry, kept.user_tag.as_deref()), &kept.sealed)?;
        serde_json::from_slice(&plain).map_err(|_| Unsealed)
    }
}

/// What a sealed record is bound to: its entry and its user tag.
fn row_binding(entry: i64, user_tag: Option<&str>) -> Vec<u8> {
    let mut row = entry.to_be_bytes().to_vec();
    row.extend_from_slice(user_tag.unwrap_or_default().as_bytes());
    row
}

/// A stream's frames read back into one whole reply, in the same protocol.
fn whole_reply(codec: &dyn Codec, frames: &[u8]) -> Option<Vec<u8>> {
    let mut decoder = codec.stream_decoder();
    let mut events = Vec::new();
    decoder.feed(frames, &mut events).ok()?;
    decoder.finish(&mut events).ok()?;
    let mut whole = switchyard_ir::Accumulator::new();
    for event in &events {
        whole.push(event);
    }
    Some(codec.write_response(&whole.into_response()).body)
}

/// What the content writer counts.
#[derive(Debug, Default)]
pub struct ContentStats {
    /// Records written.
    pub written: AtomicU64,
    /// Records dropped because the queue was full or the store failed.
    pub dropped: AtomicU64,
}

/// A request's text on its way to the store: sealed by the writer, off
/// the request path, under the retention of the config that served it.
pub struct Pending {
    /// The serving config's retention.
    pub retention: Arc<Retention>,
    /// The caller's protocol's codec (a stream is read back with it).
    pub codec: &'static dyn Codec,
    /// The bodies.
    pub captured: Captured,
}

/// The sending side of the content writer.
#[derive(Clone)]
pub struct ContentQueue {
    tx: mpsc::Sender<Pending>,
    /// Counters.
    pub stats: Arc<ContentStats>,
    /// Days kept (a reload's `retention.days`).
    pub days: Arc<AtomicU32>,
}

impl std::fmt::Debug for ContentQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContentQueue").field("stats", &self.stats).finish_non_exhaustive()
    }
}

impl ContentQueue {
    /// Starts the writer (a batch every `flush` at most) and the purge over `store`.
    pub fn start(store: Arc<dyn ContentStore>, capacity: usize, days: u32, flush: Duration) -> ContentQueue {
        let (tx, rx) = mpsc::channel(capacity);
        let stats = Arc::new(ContentStats::default());
        let days = Arc::new(AtomicU32::new(days));
        switchyard_tasks::service("content writer", write_behind(store.clone(), rx, stats.clone(), flush));
        spawn_purge(Arc::downgrade(&store), days.clone());
        ContentQueue { tx, stats, days }
    }

    /// Queues a request's text; a full queue drops it, counted (kept text
    /// is a record of what was said, never money: the request never waits).
    pub fn push(&self, pending: Pending) {
        if self.tx.try_send(pending).is_err() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("kept text dropped: the content writer's queue is full");
        }
    }
}

async fn write_behind(
    store: Arc<dyn ContentStore>,
    mut rx: mpsc::Receiver<Pending>,
    stats: Arc<ContentStats>,
    flush: Duration,
) {
    let mut pending = Vec::with_capacity(BATCH);
    while rx.recv_many(&mut pending, BATCH).await > 0 {
        // What else comes within the flush interval is written with it:
        // one transaction for many requests' text.
        if pending.len() < BATCH {
            tokio::time::sleep(flush).await;
            while pending.len() < BATCH {
                match rx.try_recv() {
                    Ok(more) => pending.push(more),
                    Err(_) => break,
                }
            }
        }
        let rows: Vec<KeptContent> = pending.drain(..).filter_map(|p| p.retention.seal(p.codec, p.captured)).collect();
        let n = rows.len() as u64;
        // One retry after a short pause, then the batch is dropped, counted.
        let mut written = store.keep_content(rows.clone()).await;
        if written.is_err() {
            tokio::time::sleep(Duration::from_secs(1)).await;
            written = store.keep_content(rows).await;
        }
        match written {
            Ok(()) => stats.written.fetch_add(n, Ordering::Relaxed),
            Err(err) => {
                tracing::warn!(error = %err, records = n, "kept text could not be written; dropped");
                stats.dropped.fetch_add(n, Ordering::Relaxed)
            }
        };
    }
}

/// Purges kept text older than the days kept, now and every hour, for as
/// long as the store lives.
fn spawn_purge(store: Weak<dyn ContentStore>, days: Arc<AtomicU32>) {
    switchyard_tasks::service("content purge", async move {
        let mut ticker = tokio::time::interval(PURGE_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let Some(store) = store.upgrade() else { return };
            match purge(&*store, days.load(Ordering::Relaxed), crate::clock::now_ms()).await {
                Ok(0) => {}
                Ok(removed) => tracing::info!(removed, "kept text past its retention purged"),
                Err(err) => tracing::warn!(error = %err, "kept text purge failed; retried in an hour"),
            }
        }
    });
}

/// Removes what `store` kept more than `days` days before `now_ms`.
pub async fn purge(store: &dyn ContentStore, days: u32, now_ms: u64) -> Result<u64, switchyard_store::StoreError> {
    let before = now_ms.saturating_sub(u64::from(days) * 86_400_000) as i64;
    store.purge_content(before).await
}
