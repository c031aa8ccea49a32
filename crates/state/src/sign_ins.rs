//! The console's sign-ins: an admin token presented once at the login form
//! becomes a random session id in an HttpOnly cookie, so the token itself
//! never reaches the browser's storage. Each session carries its own
//! anti-CSRF token. Sessions live in memory only (a restart signs everyone
//! out), are found by the SHA-256 of their id, expire after
//! [`IDLE`] without use or [`LIFETIME`] in all, and remember which admin
//! token opened them, so removing that token from the config (and
//! reloading) ends them. Time is an argument.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use switchyard_config::Scope;
use switchyard_governance::KeyHash;

/// A session unused this long ends.
pub const IDLE: Duration = Duration::from_secs(2 * 3600);
/// A session ends this long after sign-in, used or not.
pub const LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Sessions kept at most; the least recently used goes first.
pub const MAX_SESSIONS: usize = 1024;
/// Sessions one admin token, or one single sign-on account, keeps at most
/// (its least recently used goes first), so one holder cannot push
/// everyone else out: every account of a provider shares its sessions'
/// source, so the cap is per account there.
pub const MAX_PER_TOKEN: usize = 32;
/// The session cookie's name.
pub const COOKIE: &str = "switchyard_session";

/// A signed-in operator, as a request sees it.
#[derive(Debug, Clone)]
pub struct SignIn {
    /// The admin token's name.
    pub name: Arc<str>,
    /// Its scope.
    pub scope: Scope,
    /// The hash of the admin token that signed in.
    pub token: KeyHash,
    /// The anti-CSRF token every mutation must echo.
    pub csrf: Arc<str>,
    /// A single sign-on's account id at its provider (`sub`); `None` for
    /// a token's session.
    pub subject: Option<Arc<str>>,
    /// A single sign-on's ID token claims, which its role is read from
    /// again on every request (a binding lowered or removed since sign-in
    /// lowers or ends the session); `None` for a token's session.
    pub claims: Option<Arc<serde_json::Value>>,
    /// A tenant admin's reach (its token's, or its binding's: read again
    /// on every request like its scope); `None`: the whole gateway's.
    pub tenancy: Option<Arc<switchyard_config::Tenancy>>,
}

impl SignIn {
    /// Whose sessions this one counts among for [`MAX_PER_TOKEN`]: its
    /// token's, or its single sign-on account's.
    fn holder(&self) -> (KeyHash, Option<&str>) {
        (self.token, self.subject.as_deref())
    }
}

#[derive(Debug)]
struct Entry {
    sign_in: SignIn,
    opened: Instant,
    used: Instant,
}

/// The sessions of one process (shared across config reloads).
#[derive(Debug, Default)]
pub struct SignIns {
    table: Mutex<HashMap<KeyHash, Entry>>,
}

impl SignIns {
    /// Opens a session for `sign_in` with `id` (random, from the caller):
    /// the cookie value to hand the browser.
    pub fn open(&self, id: &[u8; 32], sign_in: SignIn, now: Instant) -> String {
        let cookie = hex(id);
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        table.retain(|_, e| live(e, now));
        let holder = sign_in.holder();
        let same_holder = |e: &Entry| e.sign_in.holder() == holder;
        if table.values().filter(|e| same_holder(e)).count() >= MAX_PER_TOKEN {
            let oldest = table.iter().filter(|(_, e)| same_holder(e)).min_by_key(|(_, e)| e.used);
            if let Some(key) = oldest.map(|(k, _)| *k) {
                table.remove(&key);
            }
        }
        if table.len() >= MAX_SESSIONS {
            if let Some(oldest) = table.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| *k) {
                table.remove(&oldest);
            }
        }
        table.insert(KeyHash::of(&cookie), Entry { sign_in, opened: now, used: now });
        cookie
    }

    /// The live session behind `cookie`, marked used at `now`.
    pub fn find(&self, cookie: &str, now: Instant) -> Option<SignIn> {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let key = KeyHash::of(cookie);
        let entry = table.get_mut(&key)?;
        if !live(entry, now) {
            table.remove(&key);
            return None;
        }
        entry.used = now;
        Some(entry.sign_in.clone())
    }

    /// Ends the session behind `cookie`.
    pub fn close(&self, cookie: &str) {
        self.table.lock().unwrap_or_else(PoisonError::into_inner).remove(&KeyHash::of(cookie));
    }

    /// Sessions open now.
    pub fn len(&self) -> usize {
        self.table.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// True when no session is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn live(entry: &Entry, now: Instant) -> bool {
    now.saturating_duration_since(entry.used) < IDLE && now.saturating_duration_since(entry.opened) < LIFETIME
}

/// `N` bytes from the OS random source (`None`: it failed).
pub fn random<const N: usize>() -> Option<[u8; N]> {
    let mut bytes = [0u8; N];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).ok()?;
    Some(bytes)
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').filter_map(|pair| pair.trim().split_once('=')).find(|(k, _)| *k == name).map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign_in(name: &str) -> SignIn {
        SignIn {
            tenancy: None,
            name: name.into(),
            scope: Scope::Read,
            token: KeyHash::of("t"),
            csrf: "c".into(),
            subject: None,
            claims: None,
        }
    }

    #[test]
    fn a_session_is_found_by_its_cookie_until_it_idles_or_ages_out() {
        let sessions = SignIns::default();
        let t0 = Instant::now();
        let cookie = sessions.open(&[7; 32], sign_in("ops"), t0);
        assert_eq!(cookie.len(), 64);
        assert_eq!(sessions.find(&cookie, t0).map(|s| s.name), Some("ops".into()));
        assert!(sessions.find("0".repeat(64).as_str(), t0).is_none());
        // Used every hour it lives until its lifetime is over.
        let mut at = t0;
        while at < t0 + LIFETIME - Duration::from_secs(3600) {
            at += Duration::from_secs(3600);
            assert!(sessions.find(&cookie, at).is_some());
        }
        assert!(sessions.find(&cookie, t0 + LIFETIME).is_none());
        // Idle too long.
        let idle = sessions.open(&[8; 32], sign_in("ops"), t0);
        assert!(sessions.find(&idle, t0 + IDLE).is_none());
        // Closed.
        let closed = sessions.open(&[9; 32], sign_in("ops"), t0);
        sessions.close(&closed);
        assert!(sessions.find(&closed, t0).is_none());
    }

    #[test]
    fn the_table_is_bounded_in_all_and_per_token() {
        let sessions = SignIns::default();
        let t0 = Instant::now();
        let first = sessions.open(&[0; 32], sign_in("first"), t0);
        for i in 1..=MAX_SESSIONS {
            let mut id = [0u8; 32];
            id[..8].copy_from_slice(&(i as u64).to_le_bytes());
            // Each from a token of its own.
            let mut one = sign_in("n");
            one.token = KeyHash::of(&format!("token-{i}"));
            sessions.open(&id, one, t0 + Duration::from_millis(i as u64));
        }
        assert_eq!(sessions.len(), MAX_SESSIONS);
        assert!(sessions.find(&first, t0 + Duration::from_secs(1)).is_none());

        // One token's holder signing in again and again pushes out only its own sessions.
        let sessions = SignIns::default();
        let mut other = sign_in("other");
        other.token = KeyHash::of("other-token");
        let bystander = sessions.open(&[1; 32], other, t0);
        for i in 0..(MAX_PER_TOKEN * 3) {
            let mut id = [2u8; 32];
            id[..8].copy_from_slice(&(i as u64).to_le_bytes());
            sessions.open(&id, sign_in("greedy"), t0 + Duration::from_millis(i as u64 + 1));
        }
        assert_eq!(sessions.len(), MAX_PER_TOKEN + 1);
        assert!(sessions.find(&bystander, t0 + Duration::from_secs(1)).is_some());
    }

    #[test]
    fn single_sign_on_accounts_each_have_their_own_cap() {
        // Every account of one provider shares the sessions' source.
        let account = |subject: &str| SignIn { subject: Some(subject.into()), ..sign_in(subject) };
        let sessions = SignIns::default();
        let t0 = Instant::now();
        let admin = sessions.open(&[1; 32], account("admin"), t0);
        for i in 0..(MAX_PER_TOKEN * 2) {
            let mut id = [2u8; 32];
            id[..8].copy_from_slice(&(i as u64).to_le_bytes());
            sessions.open(&id, account(&format!("member-{i}")), t0 + Duration::from_millis(i as u64 + 1));
        }
        assert!(sessions.find(&admin, t0 + Duration::from_secs(1)).is_some(), "others' sign-ins ended the admin's");
        // One account signing in again and again pushes out only its own.
        for i in 0..(MAX_PER_TOKEN * 2) {
            let mut id = [3u8; 32];
            id[..8].copy_from_slice(&(i as u64).to_le_bytes());
            sessions.open(&id, account("greedy"), t0 + Duration::from_secs(2) + Duration::from_millis(i as u64));
        }
        assert!(sessions.find(&admin, t0 + Duration::from_secs(3)).is_some());
        assert_eq!(sessions.len(), 1 + MAX_PER_TOKEN * 2 + MAX_PER_TOKEN);
    }

    #[test]
    fn cookies_are_read_by_name() {
        assert_eq!(cookie_value("a=1; switchyard_session=abc; b=2", COOKIE), Some("abc"));
        assert_eq!(cookie_value("xswitchyard_session=abc", COOKIE), None);
    }
}
