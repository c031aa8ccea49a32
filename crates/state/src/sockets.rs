//! The long-lived sockets this process holds open (Responses over
//! WebSocket, Realtime, Gemini Live): counted per key and in all, within
//! `duplex.sessions_per_key` and `duplex.max_sessions`, and told when the
//! process stops so each finishes its open generations and closes. Kept
//! across reloads: a socket counts against its key whichever config it was
//! opened under (and its next turn runs on the config serving then).
//! Each open socket is listed too (its kind, key, age and turns) for the
//! admin API's `GET /api/v1/admin/sockets`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// The open sockets.
#[derive(Debug)]
pub struct Sockets {
    counts: Mutex<Counts>,
    /// Whether the process stops (every socket then finishes its turns
    /// and closes); also rung when a socket closes.
    stopping: watch::Sender<bool>,
}

#[derive(Debug, Default)]
struct Counts {
    /// Open sockets in all.
    total: u32,
    /// Open sockets by key id (a caller without a key, on an open
    /// gateway, counts only in the total).
    by_key: HashMap<Arc<str>, u32>,
    /// Each open socket, by the id it was given when it opened.
    open: BTreeMap<u64, OpenSocket>,
    /// The id the next socket is given.
    next_id: u64,
}

/// One open socket, as the admin API lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenSocket {
    /// Its id on this instance (from 1, in the order they opened).
    pub id: u64,
    /// What runs on it: `responses` (Responses over WebSocket), or the
    /// kind its door names.
    pub kind: &'static str,
    /// The key it was opened with (none: a caller without one).
    pub key: Option<Arc<str>>,
    /// When it opened (Unix ms).
    pub opened_at_ms: u64,
    /// The turns (generations) started on it.
    pub turns: u64,
    /// When its last turn started (Unix ms).
    pub last_turn_at_ms: Option<u64>,
}

impl Default for Sockets {
    fn default() -> Sockets {
        Sockets { counts: Mutex::default(), stopping: watch::channel(false).0 }
    }
}

/// Why a socket may not open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Full {
    /// The key holds its most.
    #[error("this key holds {0} open sockets, the most one key may (duplex.sessions_per_key): close one first")]
    Key(u32),
    /// The instance holds its most.
    #[error("the gateway holds its most open sockets (duplex.max_sessions); retry shortly")]
    Instance,
    /// The process is stopping.
    #[error("the gateway is shutting down; reconnect shortly")]
    Stopping,
}

/// One open socket's place: given back when dropped.
#[derive(Debug)]
pub struct Held {
    sockets: Arc<Sockets>,
    key: Option<Arc<str>>,
    id: u64,
}

impl Held {
    /// A turn starts on this socket at `now_ms`.
    pub fn turn(&self, now_ms: u64) {
        if let Some(open) = self.sockets.lock().open.get_mut(&self.id) {
            open.turns += 1;
            open.last_turn_at_ms = Some(now_ms);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut counts = self.sockets.lock();
        counts.total = counts.total.saturating_sub(1);
        counts.open.remove(&self.id);
        if let Some(key) = &self.key {
            if let Some(count) = counts.by_key.get_mut(key) {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    counts.by_key.remove(key);
                }
            }
        }
        drop(counts);
        // Wakes `closed`.
        self.sockets.stopping.send_modify(|_| {});
    }
}

impl Sockets {
    /// Opens a socket for `key` (none: a caller without one) within
    /// `per_key` of the key's own and `most` in all.
    pub fn open(self: &Arc<Self>, key: Option<&str>, per_key: u32, most: u32) -> Result<Held, Full> {
        self.open_as("socket", key, per_key, most, crate::clock::now_ms())
    }

    /// [`Sockets::open`] for a socket of `kind` opened at `now_ms`.
    pub fn open_as(
        self: &Arc<Self>,
        kind: &'static str,
        key: Option<&str>,
        per_key: u32,
        most: u32,
        now_ms: u64,
    ) -> Result<Held, Full> {
        if *self.stopping.borrow() {
            return Err(Full::Stopping);
        }
        let mut counts = self.lock();
        if counts.total >= most {
            return Err(Full::Instance);
        }
        let key = match key {
            Some(key) => {
                let key: Arc<str> = Arc::from(key);
                let count = counts.by_key.entry(key.clone()).or_insert(0);
                if *count >= per_key {
                    return Err(Full::Key(per_key));
                }
                *count += 1;
                Some(key)
            }
            None => None,
        };
        counts.total += 1;
        counts.next_id += 1;
        let id = counts.next_id;
        let listed = OpenSocket { id, kind, key: key.clone(), opened_at_ms: now_ms, turns: 0, last_turn_at_ms: None };
        counts.open.insert(id, listed);
        drop(counts);
        Ok(Held { sockets: self.clone(), key, id })
    }

    /// The sockets open now, oldest first.
    pub fn list(&self) -> Vec<OpenSocket> {
        self.lock().open.values().cloned().collect()
    }

    /// Sockets open now (all keys).
    pub fn open_now(&self) -> u32 {
        self.lock().total
    }

    /// Whether the process stops, to watch (`true` once it does).
    pub fn watch(&self) -> watch::Receiver<bool> {
        self.stopping.subscribe()
    }

    /// The process stops: every socket finishes and closes, none opens.
    pub fn stop(&self) {
        self.stopping.send_replace(true);
    }

    /// Waits until no socket is open.
    pub async fn closed(&self) {
        let mut watch = self.stopping.subscribe();
        while self.open_now() > 0 {
            if watch.changed().await.is_err() {
                return;
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods, reason = "a test spawns its own tasks")]
    #![allow(clippy::unwrap_used, reason = "test code: a failed unwrap is a failed test")]

    use super::*;

    #[test]
    fn a_key_holds_its_most_and_a_closed_socket_gives_its_place_back() {
        let sockets = Arc::new(Sockets::default());
        let first = sockets.open(Some("k"), 2, 4).unwrap();
        let _second = sockets.open(Some("k"), 2, 4).unwrap();
        assert_eq!(sockets.open(Some("k"), 2, 4).unwrap_err(), Full::Key(2));
        let _other = sockets.open(Some("j"), 2, 4).unwrap();
        // Callers without a key count only in the total.
        let _anonymous = sockets.open(None, 2, 4).unwrap();
        assert_eq!(sockets.open(None, 2, 4).unwrap_err(), Full::Instance);
        assert_eq!(sockets.open_now(), 4);
        drop(first);
        assert!(sockets.open(Some("k"), 2, 4).is_ok());
        assert_eq!(sockets.list().len(), 3, "the one closed is no longer listed");
        sockets.stop();
        assert_eq!(sockets.open(Some("x"), 2, 9).unwrap_err(), Full::Stopping);
    }

    #[test]
    fn each_open_socket_is_listed_with_its_key_age_and_turns() {
        let sockets = Arc::new(Sockets::default());
        let first = sockets.open_as("responses", Some("k"), 2, 4, 1_000).unwrap();
        let second = sockets.open_as("responses", None, 2, 4, 2_000).unwrap();
        first.turn(1_500);
        first.turn(1_700);
        let listed = sockets.list();
        assert_eq!(listed.len(), 2);
        assert_eq!(
            listed[0],
            OpenSocket {
                id: 1,
                kind: "responses",
                key: Some(Arc::from("k")),
                opened_at_ms: 1_000,
                turns: 2,
                last_turn_at_ms: Some(1_700)
            }
        );
        assert_eq!((listed[1].id, listed[1].key.as_deref(), listed[1].turns), (2, None, 0));
        drop(first);
        assert_eq!(sockets.list().iter().map(|s| s.id).collect::<Vec<_>>(), [2]);
        drop(second);
        assert!(sockets.list().is_empty());
    }

    #[tokio::test]
    async fn closed_waits_for_the_last_socket() {
        let sockets = Arc::new(Sockets::default());
        let held = sockets.open(Some("k"), 1, 1).unwrap();
        let waiting = tokio::spawn({
            let sockets = sockets.clone();
            async move { sockets.closed().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(held);
        waiting.await.unwrap();
    }
}
