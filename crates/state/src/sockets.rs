//! The long-lived sockets this process holds open (Responses over
//! WebSocket, Realtime, Gemini Live): counted per key and in all, within
//! `duplex.sessions_per_key` and `duplex.max_sessions`, and told when the
//! process stops so each finishes its open generations and closes. Kept
//! across reloads: a socket counts against its key whichever config it was
//! opened under (and its next turn runs on the config serving then).

use std::collections::HashMap;
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
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut counts = self.sockets.lock();
        counts.total = counts.total.saturating_sub(1);
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
        drop(counts);
        Ok(Held { sockets: self.clone(), key })
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
        sockets.stop();
        assert_eq!(sockets.open(Some("x"), 2, 9).unwrap_err(), Full::Stopping);
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
