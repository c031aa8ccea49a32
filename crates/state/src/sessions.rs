//! Session affinity's memory: which lane served a session last, per pool.
//! Bounded two ways: ids longer than [`MAX_SESSION_ID`] are refused at
//! ingress, and the table holds at most a fixed number of sessions,
//! evicting the least recently used in O(1) (never a sweep under the
//! lock). Expired pins are dropped when read.

use std::num::NonZeroUsize;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use lru::LruCache;

/// The longest session id a caller may send.
pub const MAX_SESSION_ID: usize = 256;

/// Sessions one pool remembers at most.
pub const MAX_SESSIONS: usize = 100_000;

/// What `pin` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pinned {
    /// A new or unchanged pin.
    Kept,
    /// A live pin moved to another member (its lane failed).
    Moved,
}

/// One pool's session pins.
pub struct SessionTable {
    /// Member, last use, and how long the pin lasts after it.
    pins: Mutex<LruCache<Box<str>, (usize, Instant, Duration)>>,
    ttl: Duration,
}

impl SessionTable {
    /// A table whose pins last `ttl` after their last use.
    pub fn new(ttl: Duration, capacity: usize) -> SessionTable {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        SessionTable { pins: Mutex::new(LruCache::new(capacity)), ttl }
    }

    /// The member `session` is pinned to, if the pin is live at `now`.
    pub fn get(&self, session: &str, now: Instant) -> Option<usize> {
        let mut pins = self.pins.lock().unwrap_or_else(PoisonError::into_inner);
        match pins.get(session) {
            Some(&(member, used, ttl)) if now.saturating_duration_since(used) < ttl => Some(member),
            Some(_) => {
                pins.pop(session);
                None
            }
            None => None,
        }
    }

    /// Pins `session` to `member` at `now` (evicting the least recently used
    /// session when full).
    pub fn pin(&self, session: &str, member: usize, now: Instant) -> Pinned {
        self.pin_for(session, member, now, self.ttl)
    }

    /// Pins `session` to `member` at `now` for `ttl` after its last use (a
    /// prompt-prefix pin lasts as long as the provider's cache).
    pub fn pin_for(&self, session: &str, member: usize, now: Instant, ttl: Duration) -> Pinned {
        let mut pins = self.pins.lock().unwrap_or_else(PoisonError::into_inner);
        match pins.get_mut(session) {
            Some(pin) => {
                let moved = pin.0 != member && now.saturating_duration_since(pin.1) < pin.2;
                *pin = (member, now, ttl);
                if moved {
                    Pinned::Moved
                } else {
                    Pinned::Kept
                }
            }
            None => {
                pins.push(Box::from(session), (member, now, ttl));
                Pinned::Kept
            }
        }
    }

    /// Sessions remembered now.
    pub fn len(&self) -> usize {
        self.pins.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// True when no session is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_expire_move_and_stay_bounded() {
        let t0 = Instant::now();
        let table = SessionTable::new(Duration::from_secs(60), 3);
        assert_eq!(table.pin("a", 1, t0), Pinned::Kept);
        assert_eq!(table.get("a", t0), Some(1));
        assert_eq!(table.pin("a", 2, t0), Pinned::Moved);
        assert_eq!(table.get("a", t0 + Duration::from_secs(61)), None, "expired");
        for (i, id) in ["b", "c", "d", "e"].iter().enumerate() {
            table.pin(id, i, t0);
        }
        assert_eq!(table.len(), 3);
        assert_eq!(table.get("b", t0), None, "least recently used went first");
        assert_eq!(table.get("e", t0), Some(3));
        // A pin of its own lifetime.
        table.pin_for("p", 0, t0, Duration::from_secs(3600));
        assert_eq!(table.get("p", t0 + Duration::from_secs(600)), Some(0));
    }

    #[test]
    fn a_million_distinct_sessions_stay_within_capacity() {
        let t0 = Instant::now();
        let table = SessionTable::new(Duration::from_secs(60), MAX_SESSIONS);
        let started = Instant::now();
        for i in 0..1_000_000u32 {
            table.pin(&format!("session-{i}"), (i % 4) as usize, t0);
        }
        assert_eq!(table.len(), MAX_SESSIONS);
        assert_eq!(table.get("session-999999", t0), Some(3));
        assert_eq!(table.get("session-0", t0), None);
        // O(1) eviction: a million pins take well under a few seconds even
        // unoptimised (a sweep per insert once full would take hours).
        assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    }
}
