//! A caller's MCP session: the key that opened it, the protocol version
//! agreed and the session each HTTP server gave the gateway for it. In a
//! fleet it lives in Redis (read on every message, renewed for the idle
//! TTL), so one session's messages may land on any instance; otherwise in
//! this process, bounded.

use std::collections::{BTreeMap, HashMap};
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
}

/// Where sessions live.
#[derive(Default)]
pub struct Sessions {
    memory: Mutex<HashMap<String, (Session, Instant)>>,
}

impl Sessions {
    /// Session `id`, renewed for `ttl`; `None`: unknown or expired.
    pub async fn get(
        &self,
        fleet: Option<&FleetState>,
        id: &str,
        ttl: Duration,
    ) -> Result<Option<Session>, SessionError> {
        if let Some(fleet) = fleet {
            let bytes = fleet.mcp_session(id, ttl).await.map_err(|err| SessionError::Store(err.to_string()))?;
            return Ok(bytes.and_then(|bytes| serde_json::from_slice(&bytes).ok()));
        }
        let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        match memory.get_mut(id) {
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

    /// Keeps session `id` for `ttl`.
    pub async fn put(
        &self,
        fleet: Option<&FleetState>,
        id: &str,
        session: &Session,
        ttl: Duration,
    ) -> Result<(), SessionError> {
        if let Some(fleet) = fleet {
            let bytes = serde_json::to_vec(session).map_err(|err| SessionError::Store(err.to_string()))?;
            return fleet.keep_mcp_session(id, bytes, ttl).await.map_err(|err| SessionError::Store(err.to_string()));
        }
        let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if memory.len() >= MEMORY_SESSIONS && !memory.contains_key(id) {
            memory.retain(|_, (_, expires)| now < *expires);
            if memory.len() >= MEMORY_SESSIONS {
                return Err(SessionError::Full);
            }
        }
        memory.insert(id.to_owned(), (session.clone(), now + ttl));
        Ok(())
    }

    /// Forgets session `id`.
    pub async fn end(&self, fleet: Option<&FleetState>, id: &str) -> Result<(), SessionError> {
        if let Some(fleet) = fleet {
            return fleet.end_mcp_session(id).await.map_err(|err| SessionError::Store(err.to_string()));
        }
        self.memory.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
        Ok(())
    }
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

    #[tokio::test]
    async fn a_memory_session_expires_and_is_renewed() {
        let sessions = Sessions::default();
        let session = Session { key: "key_1".into(), version: "2025-11-25".into(), upstream: BTreeMap::new() };
        let ttl = Duration::from_millis(200);
        assert!(sessions.put(None, "s", &session, ttl).await.is_ok());
        tokio::time::sleep(Duration::from_millis(120)).await;
        // Read before it expires: renewed for another ttl.
        assert_eq!(sessions.get(None, "s", ttl).await.ok().flatten(), Some(session.clone()));
        tokio::time::sleep(Duration::from_millis(120)).await;
        assert!(sessions.get(None, "s", ttl).await.ok().flatten().is_some());
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(sessions.get(None, "s", ttl).await.ok().flatten().is_none());
        assert!(sessions.end(None, "s").await.is_ok());
    }
}
