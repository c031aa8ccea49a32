//! Session pins across a restart of a single node on SQLite: a session
//! and a prompt prefix pinned to the pool's less weighted lane stay there
//! when the process is stopped (SIGTERM) and started again on the same
//! database, with the session's switch count, while a new session still
//! goes where the weights send it. Real binary, over TCP, two lanes on the
//! vendor fake.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use common::{exchange, free_port, header, http, spawn_binary};

const ADMIN_TOKEN: &str = "pins-admin-token-0123456789abcdef";

struct Gateway {
    child: Child,
    data: SocketAddr,
    admin: SocketAddr,
}

/// The gateway on `db`: pool `chat` of lane `heavy` (weight 1000) and
/// lane `light` (weight 1), with session and prompt-prefix affinity.
fn start(dir: &Path, db: &Path) -> Gateway {
    let data: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = format!(
        "listen: {data}\nadmin_listen: {admin}\nadmin: {{ tokens: [{ADMIN_TOKEN}] }}\n\
         storage: {{ sqlite_path: \"{}\" }}\nserver: {{ drain_timeout: 5s }}\n\
         providers:\n  one: {{ protocol: openai, base_url: \"mock://\" }}\n  two: {{ protocol: anthropic, base_url: \"mock://\" }}\n\
         models:\n  heavy: {{ provider: one, model: gpt-4o-mini }}\n  light: {{ provider: two, model: claude-haiku-4-5 }}\n\
         pools:\n  chat:\n    affinity: {{ header: x-session-id, ttl: 30m, prefix: 5m }}\n\
         \x20   members: [{{ model: heavy, weight: 1000 }}, {{ model: light, weight: 1 }}]\n",
        db.display()
    );
    let path = dir.join(format!("switchyard-{}.yaml", data.port()));
    std::fs::write(&path, config).unwrap();
    Gateway { child: spawn_binary(&path, data), data, admin }
}

fn workdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-pins-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The lane that answered a chat request in `session` (or, without one,
/// pinned by its conversation's head: `system`).
fn lane(gateway: &Gateway, session: Option<&str>, system: &str, turn: &str) -> String {
    let body = format!(
        r#"{{"model":"chat","messages":[{{"role":"system","content":"{system}"}},{{"role":"user","content":"{turn}"}}]}}"#
    );
    let headers: Vec<(&str, &str)> = session.map(|s| ("x-session-id", s)).into_iter().collect();
    let (status, head, body) = exchange(gateway.data, "POST", "/v1/chat/completions", &headers, &body);
    assert_eq!(status, 200, "{head}\n{body}");
    header(&head, "x-switchyard-lane").unwrap().to_owned()
}

fn admin(gateway: &Gateway, method: &str, path: &str, body: &str) -> serde_json::Value {
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let (status, body) = http(gateway.admin, method, path, &[("authorization", &auth)], body);
    assert_eq!(status, 200, "{method} {path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// `session`'s pin in pool `chat` as the admin API lists it: (lane, switches).
fn pinned(gateway: &Gateway, session: &str) -> Option<(String, u64)> {
    let pools = admin(gateway, "GET", "/api/v1/admin/sessions?pool=chat", "");
    let sessions = pools[0]["sessions"].as_array().unwrap();
    sessions.iter().find(|s| s["session"] == session).map(|s| {
        assert!(s["expires_in_ms"].as_u64().unwrap() > 0, "{s}");
        (s["lane"].as_str().unwrap().to_owned(), s["switches"].as_u64().unwrap())
    })
}

fn stop(mut gateway: Gateway) {
    Command::new("kill").args(["-TERM", &gateway.child.id().to_string()]).status().unwrap();
    let status = gateway.child.wait().unwrap();
    assert!(status.success(), "SIGTERM exits cleanly: {status}");
}

const SYSTEM: &str = "You answer questions about the warehouse inventory.";

#[test]
fn pins_and_their_switch_counts_survive_a_restart_on_sqlite() {
    let dir = workdir("restart");
    let db = dir.join("switchyard.db");
    let first = start(&dir, &db);
    // The weights send a new session to `heavy`.
    assert_eq!(lane(&first, Some("s1"), "other prompt", "hello"), "heavy");
    // `heavy` drained: s1 moves to `light` (its first switch), and a new
    // conversation's head is pinned to `light` too.
    admin(&first, "PATCH", "/api/v1/admin/lanes/chat/heavy", r#"{"drained":true}"#);
    assert_eq!(lane(&first, Some("s1"), "other prompt", "again"), "light");
    assert_eq!(lane(&first, None, SYSTEM, "how many pallets?"), "light");
    admin(&first, "PATCH", "/api/v1/admin/lanes/chat/heavy", r#"{"drained":false}"#);
    // `heavy` is back, but the pins hold.
    assert_eq!(lane(&first, Some("s1"), "other prompt", "still there?"), "light");
    assert_eq!(pinned(&first, "s1"), Some(("light".into(), 1)));
    let stats = admin(&first, "GET", "/stats", "");
    let pool = stats["pools"].as_array().unwrap().iter().find(|p| p["pool"] == "chat").unwrap();
    assert_eq!(pool["sessions"]["moves"], 1, "{pool}");
    // Stopped within the writer's second: the last pins go at shutdown.
    stop(first);

    let second = start(&dir, &db);
    // Back before any request, with the count.
    assert_eq!(pinned(&second, "s1"), Some(("light".into(), 1)));
    let pools = admin(&second, "GET", "/api/v1/admin/sessions", "");
    let prefixes = pools[0]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["session"].as_str().unwrap().starts_with("prefix:") && s["lane"] == "light");
    assert_eq!(prefixes.count(), 1, "{pools}");
    // The session and the conversation stay on their lane...
    assert_eq!(lane(&second, Some("s1"), "other prompt", "after the restart"), "light");
    assert_eq!(lane(&second, None, SYSTEM, "and how many boxes?"), "light");
    // ...where a new session and a new conversation go by the weights.
    assert_eq!(lane(&second, Some("s2"), "other prompt", "hello"), "heavy");
    assert_eq!(lane(&second, None, "A new system prompt.", "hi"), "heavy");
    let metrics = {
        let auth = format!("Bearer {ADMIN_TOKEN}");
        http(second.admin, "GET", "/metrics", &[("authorization", &auth)], "").1
    };
    assert!(metrics.contains("switchyard_session_pins{pool=\"chat\"} 4"), "{metrics}");
    stop(second);
    std::fs::remove_dir_all(&dir).ok();
}
