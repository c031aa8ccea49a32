//! Session affinity as the operator sees it: per pool, the sessions (and
//! prompt prefixes) pinned now, each with its lane, the time its pin has
//! left and how many times its lane changed (a session that keeps moving
//! loses its vendor's prompt cache each time). Per instance: in a fleet
//! the pins are shared through Redis, the counts are each instance's.
//! And the long-lived sockets open on this instance (Responses over
//! WebSocket): each with its key, age and turns.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::shared::*;

/// `GET /api/v1/admin/sessions` query.
#[derive(Debug, Deserialize, ToSchema)]
pub struct SessionsQuery {
    /// Only this pool's.
    pub pool: Option<String>,
    /// At most this many sessions a pool (default 100, at most 1000).
    pub limit: Option<usize>,
}

/// One pinned session.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionView {
    /// The session id the caller sent, or `prefix:` and the hash of a
    /// prompt's head (prompt-cache affinity).
    pub session: String,
    /// The lane it is pinned to.
    pub lane: String,
    /// How many times its lane changed.
    pub switches: u32,
    /// How long its pin lasts unless used again (ms).
    pub expires_in_ms: u64,
}

/// One pool's pins.
#[derive(Debug, Serialize, ToSchema)]
pub struct PoolSessions {
    /// The pool.
    pub pool: String,
    /// Sessions remembered (expired ones go when next read or evicted).
    pub pinned: usize,
    /// Pins that moved lane since boot (the sum of the switch counts).
    pub moves: u64,
    /// The sessions whose lane changed most first, then the most recent.
    pub sessions: Vec<SessionView>,
}

#[utoipa::path(get, path = "/api/v1/admin/sessions",
    params(("pool" = Option<String>, Query), ("limit" = Option<usize>, Query, description = "sessions a pool, default 100, at most 1000")),
    responses((status = 200, body = [PoolSessions], description = "every pool with session affinity: its pinned sessions with lane, switch count and time left (a single node keeps them across restarts in its SQLite)"),
        (status = 404, description = "no pool of that name, or it has no affinity")))]
pub(crate) async fn sessions(
    State(admin): State<Admin>,
    Query(query): Query<SessionsQuery>,
) -> ApiResult<Json<Vec<PoolSessions>>> {
    let gateway = &admin.gateway;
    let limit = query.limit.unwrap_or(100).clamp(1, 1000);
    let now = std::time::Instant::now();
    let pools: Vec<PoolSessions> = gateway
        .pools
        .iter()
        .filter(|pool| !pool.implicit && pool.affinity.is_some())
        .filter(|pool| query.pool.as_deref().is_none_or(|name| *pool.name == *name))
        .map(|pool| PoolSessions {
            pool: pool.name.to_string(),
            pinned: pool.sessions.len(),
            moves: pool.session_moves.load(std::sync::atomic::Ordering::Relaxed),
            sessions: pool
                .sessions
                .snapshot(now, limit)
                .into_iter()
                .map(|pin| SessionView {
                    session: pin.session,
                    lane: gateway.lanes[pool.members[pin.member]].name.to_string(),
                    switches: pin.switches,
                    expires_in_ms: u64::try_from(pin.expires_in.as_millis()).unwrap_or(u64::MAX),
                })
                .collect(),
        })
        .collect();
    if let (Some(name), true) = (&query.pool, pools.is_empty()) {
        return Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("pool `{name}` does not exist or has no session affinity"),
        ));
    }
    Ok(Json(pools))
}

/// One open socket.
#[derive(Debug, Serialize, ToSchema)]
pub struct SocketView {
    /// Its id on this instance.
    pub id: u64,
    /// What runs on it: `responses` (the Responses API over WebSocket).
    pub kind: &'static str,
    /// The key it was opened with (none: an open gateway's caller).
    pub key_id: Option<String>,
    /// That key's name and group, as the key is now (none: revoked since,
    /// or no key).
    pub key_name: Option<String>,
    /// The key's group.
    pub group: Option<String>,
    /// When it opened (Unix ms).
    pub opened_at_ms: u64,
    /// The turns (generations) started on it.
    pub turns: u64,
    /// When its last turn started (Unix ms).
    pub last_turn_at_ms: Option<u64>,
}

/// `GET /api/v1/admin/sockets`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SocketsView {
    /// Open now on this instance.
    pub open: usize,
    /// The most this instance holds (`duplex.max_sessions`).
    pub max_sessions: u32,
    /// The most one key holds (`duplex.sessions_per_key`).
    pub sessions_per_key: u32,
    /// Each open socket, oldest first.
    pub data: Vec<SocketView>,
}

#[utoipa::path(get, path = "/api/v1/admin/sockets",
    responses((status = 200, body = SocketsView, description = "the long-lived sockets open on this instance (Responses over WebSocket), each with its key, age and turns")))]
pub(crate) async fn sockets(State(admin): State<Admin>) -> Json<SocketsView> {
    let gateway = &admin.gateway;
    let data: Vec<SocketView> = gateway
        .sockets
        .list()
        .into_iter()
        .map(|open| {
            let key = open.key.as_deref().and_then(|id| gateway.governance.as_ref()?.key(id));
            SocketView {
                id: open.id,
                kind: open.kind,
                key_id: open.key.as_deref().map(str::to_owned),
                key_name: key.as_ref().map(|key| key.record.name.clone()),
                group: key.as_ref().and_then(|key| key.record.group.clone()),
                opened_at_ms: open.opened_at_ms,
                turns: open.turns,
                last_turn_at_ms: open.last_turn_at_ms,
            }
        })
        .collect();
    let bounds = &gateway.config.duplex;
    Json(SocketsView {
        open: data.len(),
        max_sessions: bounds.max_sessions,
        sessions_per_key: bounds.sessions_per_key,
        data,
    })
}
