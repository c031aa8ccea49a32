//! A caller's MCP session: the key that opened it, the protocol version
//! agreed and the session each HTTP server gave the gateway for it; for a
//! stateless (2026-07-28) caller, the one the gateway holds per route and
//! caller ([`held_id`]), so servers that keep sessions are reached in one. In a
//! fleet it lives in Redis (read on every message, renewed for the idle
//! TTL), so one session's messages may land on any instance; otherwise in
//! this process, bounded. Either way a key holds at most
//! `mcp.sessions_per_key` sessions at once (in a fleet, across it), so one
//! key cannot fill the table the others' sessions live in.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use switchyard_fleet::shared::FleetState;

use crate::upstream::Sent;

/// Sessions one process keeps when there is no Redis.
const MEMORY_SESSIONS: usize = 100_000;

/// One caller session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The key that opened it (empty on an open gateway): another key's
    /// messages find no session.
    pub key: String,
    /// The protocol version agreed.
    pub version: String,
    /// Each HTTP server's session for it, by server name.
    #[serde(default)]
    pub upstream: BTreeMap<String, Sent>,
}

/// Why a session could not be read or kept.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Redis could not answer.
    #[error("the session store is unreachable: {0}")]
    Store(String),
    /// This process holds as many sessions as it may.
    #[error("too many open MCP sessions; close some and retry")]
    Full,
    /// The key holds as many sessions as one key may.
    #[error(
        "this key holds {0} open MCP sessions, the most one key may (mcp.sessions_per_key): end one (DELETE /mcp) or let an idle one expire"
    )]
    KeyFull(usize),
}

/// Where sessions live.
#[derive(Default)]
pub struct Sessions {
    memory: Mutex<Memory>,
}

/// This process's sessions, and each key's.
#[derive(Default)]
struct Memory {
    by_id: HashMap<String, (Session, Instant)>,
    by_key: HashMap<String, HashSet<String>>,
}

impl Memory {
    fn remove(&mut self, id: &str) {
        if let Some((session, _)) = self.by_id.remove(id) {
            if let Some(ids) = self.by_key.get_mut(&session.key) {
                ids.remove(id);
                if ids.is_empty() {
                    self.by_key.remove(&session.key);
                }
            }
        }
    }

    /// Key `key`'s live sessions, its expired ones forgotten.
    fn live_of(&mut self, key: &str, now: Instant) -> usize {
        let expired: Vec<String> = self
            .by_key
            .get(key)
            .into_iter()
            .flatten()
            .filter(|id| self.by_id.get(*id).is_none_or(|(_, expires)| *expires <= now))
            .cloned()
            .collect();
        for id in &expired {
            self.remove(id);
        }
        self.by_key.get(key).map_or(0, HashSet::len)
    }
}

impl Sessions {
    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens session `id` for `ttl`, unless its key holds `cap` already.
    pub async fn open(
        &self,
        fleet: Option<&FleetState>,
        id: &str,
        session: &Session,
        ttl: Duration,
        cap: usize,
    ) -> Result<(), SessionError> {
        if let Some(fleet) = fleet {
            let bytes = serde_json::to_vec(session).map_err(|err| SessionError::Store(err.to_string()))?;
            let opened = fleet
                .open_mcp_session(id, &session.key, bytes, ttl, cap)
                .await
                .map_err(|err| SessionError::Store(err.to_string()))?;
            return if opened { Ok(()) } else { Err(SessionError::KeyFull(cap)) };
        }
        let mut memory = self.memory();
        let now = Instant::now();
        if memory.live_of(&session.key, now) >= cap {
            return Err(SessionError::KeyFull(cap));
        }
        if memory.by_id.len() >= MEMORY_SESSIONS {
            let expired: Vec<String> =
                memory.by_id.iter().filter(|(_, (_, expires))| *expires <= now).map(|(id, _)| id.clone()).collect();
            for id in &expired {
                memory.remove(id);
            }
            if memory.by_id.len() >= MEMORY_SESSIONS {
                return Err(SessionError::Full);
            }
        }
        memory.by_id.insert(id.to_owned(), (session.clone(), now + ttl));
        memory.by_key.entry(session.key.clone()).or_default().insert(id.to_owned());
        Ok(())
    }

    /// Session `id`, renewed for `ttl`; `None`: unknown or expired. `key`
    /// is the reader's (whose count a renewal keeps it in).
    pub async fn get(
        &self,
        fleet: Option<&FleetState>,
        id: &str,
        key: &str,
        ttl: Duration,
    ) -> Result<Option<Session>, SessionError> {
        if let Some(fleet) = fleet {
            let bytes = fleet.mcp_session(id, key, ttl).await.map_err(|err| SessionError::Store(err.to_string()))?;
            return Ok(bytes.and_then(|bytes| serde_json::from_slice(&bytes).ok()));
        }
        let mut memory = self.memory();
        let now = Instant::now();
        match memory.by_id.get_mut(id) {
            Some((session, expires)) if now < *expires => {
                *expires = now + ttl;
                Ok(Some(session.clone()))
            }
            Some(_) => {
                memory.remove(id);
                Ok(None)
            }
            None => Ok(None),
        }
    }

    /// Writes session `id` again (its server sessions changed), if it
    /// still lives.
    pub async fn keep(&self, fleet: Option<&FleetState>, id: &str, session: &Session) -> Result<(), SessionError> {
        if let Some(fleet) = fleet {
            let bytes = serde_json::to_vec(session).map_err(|err| SessionError::Store(err.to_string()))?;
            return fleet.keep_mcp_session(id, bytes).await.map_err(|err| SessionError::Store(err.to_string()));
        }
        if let Some((kept, _)) = self.memory().by_id.get_mut(id) {
            kept.clone_from(session);
        }
        Ok(())
    }

    /// Forgets key `key`'s session `id`.
    pub async fn end(&self, fleet: Option<&FleetState>, id: &str, key: &str) -> Result<(), SessionError> {
        if let Some(fleet) = fleet {
            return fleet.end_mcp_session(id, key).await.map_err(|err| SessionError::Store(err.to_string()));
        }
        self.memory().remove(id);
        Ok(())
    }
}

/// The id of the session the gateway holds for a stateless caller
/// `owner` on route `route` (never handed out: the caller has no session
/// to name, so the route and caller find it).
pub fn held_id(route: &str, owner: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in [route, owner] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let digest: [u8; 32] = hasher.finalize().into();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("held-{hex}")
}

/// A new session id: 128 bits from the OS's generator as hex (visible
/// ASCII, as the protocol asks); `None` when the OS could not give them.
pub fn new_id() -> Option<String> {
    let mut bytes = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(key: &str) -> Session {
        Session { key: key.into(), version: "2025-11-25".into(), upstream: BTreeMap::new() }
    }

    #[tokio::test]
    async fn a_memory_session_expires_and_is_renewed() {
        let sessions = Sessions::default();
        let session = session("key_1");
        let ttl = Duration::from_millis(200);
        assert!(sessions.open(None, "s", &session, ttl, 10).await.is_ok());
        tokio::time::sleep(Duration::from_millis(120)).await;
        // Read before it expires: renewed for another ttl.
        assert_eq!(sessions.get(None, "s", "key_1", ttl).await.ok().flatten(), Some(session.clone()));
        tokio::time::sleep(Duration::from_millis(120)).await;
        assert!(sessions.get(None, "s", "key_1", ttl).await.ok().flatten().is_some());
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(sessions.get(None, "s", "key_1", ttl).await.ok().flatten().is_none());
        assert!(sessions.end(None, "s", "key_1").await.is_ok());
    }

    #[tokio::test]
    async fn a_key_holds_at_most_its_cap_and_the_others_keep_theirs() {
        let sessions = Sessions::default();
        let ttl = Duration::from_secs(60);
        for n in 0..3 {
            assert!(sessions.open(None, &format!("a{n}"), &session("key_a"), ttl, 3).await.is_ok());
        }
        let full = sessions.open(None, "a3", &session("key_a"), ttl, 3).await;
        assert!(matches!(full, Err(SessionError::KeyFull(3))), "{full:?}");
        assert!(sessions.open(None, "b0", &session("key_b"), ttl, 3).await.is_ok(), "another key is not held back");
        // One ended (or expired): room again.
        assert!(sessions.end(None, "a1", "key_a").await.is_ok());
        assert!(sessions.open(None, "a3", &session("key_a"), ttl, 3).await.is_ok());
        let short = Duration::from_millis(20);
        assert!(sessions.open(None, "c0", &session("key_c"), short, 1).await.is_ok());
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert!(sessions.open(None, "c1", &session("key_c"), short, 1).await.is_ok(), "an expired one does not count");
    }
}
