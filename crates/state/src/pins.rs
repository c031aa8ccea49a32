//! Session and prompt-prefix pins kept across restarts on a single node.
//!
//! A pool's pins live in its [`SessionTable`](crate::sessions::SessionTable)
//! (in memory); a fleet shares them through Redis. On one node with
//! SQLite they are also kept in governance's store, so a restart keeps
//! each session (and each prompt prefix, with the vendor's prompt cache
//! behind it) on its lane. Writes are behind the request path: a request
//! that made, moved or renewed a pin enough to matter (`Pinned::note`: a
//! busy session's unchanged pin about every eighth of its lifetime, so a
//! kept pin may end that much early) hands it to a bounded channel (a
//! full one drops the note and counts it: a pin is a preference, never a
//! record), and one task
//! writes what gathered a second after the first note, one row per
//! session (the last note wins), dropping expired rows in the same
//! transaction. At boot the live pins are read back into the tables
//! ([`restore`]); expired ones are dropped. At shutdown [`KeptPins::finish`]
//! writes what is queued; after `kill -9` at most the last second's
//! changes are lost (the pins from before stay).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use switchyard_store::{KeptPin, PinStore, StoreError};
use tokio::sync::{mpsc, oneshot};

use crate::clock::now_ms;
use crate::Gateway;

/// How long notes gather before they are written.
pub const FLUSH: Duration = Duration::from_secs(1);

/// Notes that may wait for the writer (a full channel drops the newest).
const QUEUE: usize = 8192;

/// Distinct pins written in one transaction at most.
const BATCH: usize = 4096;

/// How long [`KeptPins::finish`] waits for the last write.
const FINISH: Duration = Duration::from_secs(5);

/// One served request's pin.
struct Note {
    pool: Arc<str>,
    session: Box<str>,
    lane: Arc<str>,
    ttl: Duration,
    switches: u32,
}

enum Message {
    Pin(Note),
    /// Write what is gathered now, then answer.
    Flush(oneshot::Sender<()>),
}

/// What the writer counts, for `/stats`.
#[derive(Debug, Default)]
pub struct PinStats {
    /// Pins written (a session's pin once per batch).
    pub written: AtomicU64,
    /// Notes dropped because the queue was full.
    pub dropped: AtomicU64,
    /// Batches the store refused (their pins stay in memory only).
    pub write_errors: AtomicU64,
}

/// The sending side, held by the gateway (kept across reloads).
pub struct KeptPins {
    tx: mpsc::Sender<Message>,
    /// Counters.
    pub stats: Arc<PinStats>,
}

impl KeptPins {
    /// Starts the writer over `store` (on the current tokio runtime).
    pub fn start(store: Arc<dyn PinStore>) -> KeptPins {
        let (tx, rx) = mpsc::channel(QUEUE);
        let stats = Arc::new(PinStats::default());
        switchyard_tasks::service("pin writer", write_behind(store, rx, stats.clone()));
        KeptPins { tx, stats }
    }

    /// Queues the pin a served request made or renewed: `session` of
    /// `pool` on `lane`, for `ttl` from now, its lane changed `switches`
    /// times. Never waits.
    pub fn note(&self, pool: &Arc<str>, session: &str, lane: &Arc<str>, ttl: Duration, switches: u32) {
        let note = Note { pool: pool.clone(), session: Box::from(session), lane: lane.clone(), ttl, switches };
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(Message::Pin(note)) {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Writes every pin queued so far (at shutdown, once requests have
    /// drained), waiting at most a few seconds.
    pub async fn finish(&self) {
        let (ack, done) = oneshot::channel();
        if self.tx.send(Message::Flush(ack)).await.is_ok() {
            let _ = tokio::time::timeout(FINISH, done).await;
        }
    }
}

/// The writer: gathers notes for [`FLUSH`] after the first (or until
/// [`BATCH`] distinct pins, or a flush is asked), then writes them.
async fn write_behind(store: Arc<dyn PinStore>, mut rx: mpsc::Receiver<Message>, stats: Arc<PinStats>) {
    let mut batch: HashMap<(Arc<str>, Box<str>), KeptPin> = HashMap::new();
    while let Some(first) = rx.recv().await {
        let mut ack = gather(&mut batch, first);
        let deadline = tokio::time::Instant::now() + FLUSH;
        while ack.is_none() && batch.len() < BATCH {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(message)) => ack = gather(&mut batch, message),
                Ok(None) | Err(_) => break,
            }
        }
        if !batch.is_empty() {
            let pins: Vec<KeptPin> = batch.drain().map(|(_, pin)| pin).collect();
            let count = pins.len() as u64;
            match store.keep_pins(pins, now_ms() as i64).await {
                Ok(()) => {
                    stats.written.fetch_add(count, Ordering::Relaxed);
                }
                Err(err) => {
                    stats.write_errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(error = %err, pins = count, "session pins could not be kept; they stay in memory");
                }
            }
        }
        if let Some(ack) = ack {
            let _ = ack.send(());
        }
    }
}

/// Adds a note to the batch (its expiry read from the clock now, off the
/// request path); a flush request is handed back.
fn gather(batch: &mut HashMap<(Arc<str>, Box<str>), KeptPin>, message: Message) -> Option<oneshot::Sender<()>> {
    match message {
        Message::Pin(note) => {
            let ttl_ms = i64::try_from(note.ttl.as_millis()).unwrap_or(i64::MAX);
            let pin = KeptPin {
                pool: note.pool.to_string(),
                session: note.session.to_string(),
                lane: note.lane.to_string(),
                expires_ms: (now_ms() as i64).saturating_add(ttl_ms),
                switches: note.switches,
            };
            batch.insert((note.pool, note.session), pin);
            None
        }
        Message::Flush(ack) => Some(ack),
    }
}

/// Puts the pins kept in `store` back into `gateway`'s session tables:
/// each on the member of its pool whose lane it names, for the time it had
/// left. A pool that is gone or has no affinity now, or a lane no longer
/// in its pool, drops the pin. Returns how many were put back.
pub async fn restore(gateway: &Gateway, store: &dyn PinStore) -> Result<usize, StoreError> {
    let now = now_ms() as i64;
    let at = std::time::Instant::now();
    let pins = store.live_pins(now, crate::sessions::MAX_SESSIONS).await?;
    let mut restored = 0;
    for pin in pins {
        let Some(pool) = gateway.pools.iter().find(|p| !p.implicit && *p.name == *pin.pool && p.affinity.is_some())
        else {
            continue;
        };
        let Some(member) = pool.members.iter().position(|&lane| *gateway.lanes[lane].name == *pin.lane) else {
            continue;
        };
        let left = Duration::from_millis(u64::try_from(pin.expires_ms.saturating_sub(now)).unwrap_or(0));
        pool.sessions.restore(&pin.session, member, left, pin.switches, at);
        restored += 1;
    }
    Ok(restored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_store::sqlite::SqliteStore;

    #[tokio::test]
    async fn notes_are_written_behind_once_per_session_and_flushed_on_finish() {
        let store = SqliteStore::in_memory().unwrap();
        let kept = KeptPins::start(Arc::new(store.clone()));
        let (pool, a, b): (Arc<str>, Arc<str>, Arc<str>) = (Arc::from("chat"), Arc::from("a"), Arc::from("b"));
        kept.note(&pool, "s1", &a, Duration::from_secs(60), 0);
        kept.note(&pool, "s1", &b, Duration::from_secs(60), 1);
        kept.note(&pool, "s2", &a, Duration::from_secs(60), 0);
        kept.finish().await;
        let mut live = store.live_pins(now_ms() as i64, 10).await.unwrap();
        live.sort_by(|x, y| x.session.cmp(&y.session));
        assert_eq!(live.len(), 2, "{live:?}");
        assert_eq!(
            (live[0].session.as_str(), live[0].lane.as_str(), live[0].switches),
            ("s1", "b", 1),
            "the last note wins"
        );
        assert_eq!(kept.stats.written.load(Ordering::Relaxed), 2);
        let left = live[1].expires_ms - now_ms() as i64;
        assert!((55_000..=60_000).contains(&left), "{left}");
    }
}
