//! Session affinity's memory: which lane served a session last, per pool,
//! and how many times its lane changed. Bounded two ways: ids longer than
//! [`MAX_SESSION_ID`] are refused at ingress, and the table holds at most a
//! fixed number of sessions, evicting the least recently used in O(1)
//! (never a sweep under the lock on the request path). Expired pins are
//! dropped when read. On a single node the pins are also kept in SQLite
//! (`crate::pins`) and put back here at boot.

use std::num::NonZeroUsize;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use lru::LruCache;

/// The longest session id a caller may send.
pub const MAX_SESSION_ID: usize = 256;

/// Sessions one pool remembers at most.
pub const MAX_SESSIONS: usize = 100_000;

/// A live pin unchanged but for its last use is worth keeping again
/// (`Pinned::note`) once this share of its lifetime passed since it last
/// was: a busy session is written about every ttl/8, never per request.
const NOTE_EVERY: u32 = 8;

/// What `pin` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pinned {
    /// A live pin moved to another member (its lane failed, or affinity
    /// could not be honoured).
    pub moved: bool,
    /// How many times the session's lane changed, this move included.
    pub switches: u32,
    /// The pin is new, moved, changed its lifetime, or was last noted an
    /// eighth of its lifetime ago: a kept copy (`crate::pins`) should be
    /// written.
    pub note: bool,
}

/// One session's pin.
#[derive(Debug, Clone, Copy)]
struct Pin {
    member: usize,
    used: Instant,
    ttl: Duration,
    switches: u32,
    /// When a kept copy was last asked for.
    noted: Instant,
}

impl Pin {
    fn live(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.used) < self.ttl
    }
}

/// A pin as the admin plane lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinView {
    /// The session id (or `prefix:` and the prompt head's hash).
    pub session: String,
    /// The member it is pinned to.
    pub member: usize,
    /// How long it lasts unless used again.
    pub expires_in: Duration,
    /// How many times its lane changed.
    pub switches: u32,
}

/// One pool's session pins.
pub struct SessionTable {
    pins: Mutex<LruCache<Box<str>, Pin>>,
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
            Some(pin) if pin.live(now) => Some(pin.member),
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
    /// prompt-prefix pin lasts as long as the provider's cache). A live pin
    /// to another member moves, and its session's switch count goes up; an
    /// expired one starts afresh.
    pub fn pin_for(&self, session: &str, member: usize, now: Instant, ttl: Duration) -> Pinned {
        let mut pins = self.pins.lock().unwrap_or_else(PoisonError::into_inner);
        match pins.get_mut(session) {
            Some(pin) => {
                let live = pin.live(now);
                let moved = pin.member != member && live;
                let switches = match (moved, live) {
                    (true, _) => pin.switches.saturating_add(1),
                    (false, true) => pin.switches,
                    (false, false) => 0,
                };
                let note = !live
                    || pin.member != member
                    || pin.ttl != ttl
                    || now.saturating_duration_since(pin.noted) >= ttl / NOTE_EVERY;
                let noted = if note { now } else { pin.noted };
                *pin = Pin { member, used: now, ttl, switches, noted };
                Pinned { moved, switches, note }
            }
            None => {
                pins.push(Box::from(session), Pin { member, used: now, ttl, switches: 0, noted: now });
                Pinned { moved: false, switches: 0, note: true }
            }
        }
    }

    /// Puts back a pin kept from before a restart: `session` on `member`
    /// for `left`, with its switch count. A live pin made since wins.
    pub fn restore(&self, session: &str, member: usize, left: Duration, switches: u32, now: Instant) {
        let mut pins = self.pins.lock().unwrap_or_else(PoisonError::into_inner);
        if pins.peek(session).is_some_and(|pin| pin.live(now)) {
            return;
        }
        pins.put(Box::from(session), Pin { member, used: now, ttl: left, switches, noted: now });
    }

    /// The live pins, those whose lane changed most first (then the most
    /// recently used), at most `limit`. A read for the admin plane: it
    /// walks the table once under its lock without reordering it.
    pub fn snapshot(&self, now: Instant, limit: usize) -> Vec<PinView> {
        let pins = self.pins.lock().unwrap_or_else(PoisonError::into_inner);
        // Most recently used first, so a stable sort keeps recency within a count.
        let mut views: Vec<PinView> = pins
            .iter()
            .filter(|(_, pin)| pin.live(now))
            .map(|(session, pin)| PinView {
                session: session.to_string(),
                member: pin.member,
                expires_in: pin.ttl.saturating_sub(now.saturating_duration_since(pin.used)),
                switches: pin.switches,
            })
            .collect();
        drop(pins);
        views.sort_by_key(|view| std::cmp::Reverse(view.switches));
        views.truncate(limit);
        views
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
        assert_eq!(table.pin("a", 1, t0), Pinned { moved: false, switches: 0, note: true });
        assert_eq!(table.get("a", t0), Some(1));
        assert_eq!(table.pin("a", 2, t0), Pinned { moved: true, switches: 1, note: true });
        assert_eq!(
            table.pin("a", 2, t0),
            Pinned { moved: false, switches: 1, note: false },
            "a count stays with its pin"
        );
        assert_eq!(table.pin("a", 1, t0), Pinned { moved: true, switches: 2, note: true });
        assert_eq!(table.get("a", t0 + Duration::from_secs(61)), None, "expired");
        // An expired pin starts afresh: no move, no count.
        table.pin("z", 1, t0);
        table.pin("z", 2, t0);
        assert_eq!(table.pin("z", 3, t0 + Duration::from_secs(61)), Pinned { moved: false, switches: 0, note: true });
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
    fn a_busy_pin_asks_to_be_kept_again_every_eighth_of_its_lifetime() {
        let t0 = Instant::now();
        let table = SessionTable::new(Duration::from_secs(80), 10);
        assert!(table.pin("s", 0, t0).note, "new");
        let later = |s: u64| t0 + Duration::from_secs(s);
        assert!(!table.pin("s", 0, later(5)).note);
        assert!(!table.pin("s", 0, later(9)).note);
        assert!(table.pin("s", 0, later(10)).note, "ttl/8 after the last note");
        assert!(!table.pin("s", 0, later(19)).note);
        assert!(table.pin_for("s", 0, later(19), Duration::from_secs(3600)).note, "a new lifetime");
        assert!(table.pin_for("s", 1, later(20), Duration::from_secs(3600)).note, "moved");
    }

    #[test]
    fn restored_pins_keep_their_time_left_and_count_and_never_override_a_newer_pin() {
        let t0 = Instant::now();
        let table = SessionTable::new(Duration::from_secs(60), 10);
        table.restore("kept", 1, Duration::from_secs(5), 3, t0);
        assert_eq!(table.get("kept", t0 + Duration::from_secs(4)), Some(1));
        assert_eq!(table.get("kept", t0 + Duration::from_secs(5)), None, "its time left, not the pool's ttl");
        table.pin("new", 0, t0);
        table.restore("new", 1, Duration::from_secs(600), 7, t0);
        assert_eq!(table.get("new", t0), Some(0), "the pin made since wins");
        table.restore("kept", 1, Duration::from_secs(5), 3, t0);
        table.pin("kept", 0, t0);
        table.pin("other", 0, t0);
        let views = table.snapshot(t0 + Duration::from_secs(1), 10);
        assert_eq!(
            views[0],
            PinView { session: "kept".into(), member: 0, expires_in: Duration::from_secs(59), switches: 4 }
        );
        assert_eq!(views.len(), 3);
        assert_eq!(views[1].session, "other", "then the most recently used");
        assert_eq!(table.snapshot(t0, 1).len(), 1);
        assert!(table.snapshot(t0 + Duration::from_secs(600), 10).is_empty(), "expired pins are not listed");
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
