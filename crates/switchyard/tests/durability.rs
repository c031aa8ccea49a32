//! The ledger across the ways a process ends, with the real binary on
//! SQLite: SIGTERM loses nothing; `kill -9` loses at most the rows settled
//! in the last flush interval and a write (the bound README states;
//! `fleet_faults.rs` holds a write up to measure it on PostgreSQL).
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
use std::time::{Duration, Instant};

use common::{free_port, http, spawn_binary};

const ADMIN_TOKEN: &str = "durability-admin-token-0123456789";
const FLUSH: Duration = Duration::from_millis(300);

struct Gateway {
    child: Child,
    data: SocketAddr,
    admin: SocketAddr,
}

fn start(dir: &Path, db: &Path) -> Gateway {
    start_with(dir, db, "mock://")
}

fn start_with(dir: &Path, db: &Path, upstream: &str) -> Gateway {
    let data: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let config = format!(
        "listen: {data}\nadmin_listen: {admin}\nproviders:\n  up: {{ protocol: openai, base_url: \"{upstream}\" }}\n\
         models:\n  m: {{ provider: up }}\nrate_card:\n  m: {{ input_utok: 1, output_utok: 1 }}\n\
         auth: {{ mode: keys }}\nadmin: {{ tokens: [{ADMIN_TOKEN}] }}\nstorage: {{ sqlite_path: \"{}\" }}\n\
         governance: {{ ledger_flush_interval: {}ms }}\nserver: {{ drain_timeout: 5s }}\n",
        db.display(),
        FLUSH.as_millis()
    );
    let path = dir.join(format!("switchyard-{}.yaml", data.port()));
    std::fs::write(&path, config).unwrap();
    let child = spawn_binary(&path, data);
    Gateway { child, data, admin }
}

fn workdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-durability-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn new_key(gateway: &Gateway) -> String {
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let (status, body) =
        http(gateway.admin, "POST", "/api/v1/admin/keys", &[("authorization", &auth)], r#"{"name":"load"}"#);
    assert_eq!(status, 201, "{body}");
    let value: serde_json::Value = serde_json::from_str(&body).unwrap();
    value["key"].as_str().unwrap().to_owned()
}

fn chat(gateway: &Gateway, key: &str, n: usize) -> u16 {
    let auth = format!("Bearer {key}");
    let body = format!(r#"{{"model":"m","messages":[{{"role":"user","content":"request {n}"}}]}}"#);
    http(gateway.data, "POST", "/v1/chat/completions", &[("authorization", &auth)], &body).0
}

/// Ledger rows the restarted gateway holds.
fn rows(gateway: &Gateway) -> usize {
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let (status, body) =
        http(gateway.admin, "GET", "/api/v1/admin/spend?by=lane&from=0", &[("authorization", &auth)], "");
    assert_eq!(status, 200, "{body}");
    let value: serde_json::Value = serde_json::from_str(&body).unwrap();
    value["data"].as_array().unwrap().iter().map(|l| l["requests"].as_u64().unwrap() as usize).sum()
}

fn stop(mut gateway: Gateway, signal: &str) {
    let pid = gateway.child.id().to_string();
    Command::new("kill").args([signal, &pid]).status().unwrap();
    let status = gateway.child.wait().unwrap();
    if signal == "-TERM" {
        assert!(status.success(), "SIGTERM exits cleanly: {status}");
    }
}

/// An upstream that answers one chat request after `delay`, as OpenAI
/// would; its address.
fn slow_upstream(delay: Duration) -> SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let Ok((mut socket, _)) = listener.accept() else { return };
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        // The head, then the body its content-length says.
        loop {
            let Ok(n) = socket.read(&mut buf) else { return };
            if n == 0 {
                return;
            }
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen).to_ascii_lowercase();
            let Some(end) = text.find("\r\n\r\n") else { continue };
            let length = text
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if seen.len() >= end + 4 + length {
                break;
            }
        }
        std::thread::sleep(delay);
        let body = r#"{"id":"chatcmpl-slow","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"late"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}"#;
        let head =
            format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
        let _ = socket.write_all(head.as_bytes());
        let _ = socket.write_all(body.as_bytes());
    });
    addr
}

/// A caller that hangs up while its upstream is still answering, then a
/// SIGTERM: the request runs on as work, shutdown waits for it, and its row
/// (a 499 with the upstream's usage) is in the ledger after a restart.
#[test]
fn sigterm_waits_for_a_request_whose_caller_left() {
    use std::io::Write;
    let dir = workdir("left");
    let db = dir.join("ledger.db");
    let upstream = slow_upstream(Duration::from_millis(1500));
    let gateway = start_with(&dir, &db, &format!("http://{upstream}"));
    let key = new_key(&gateway);
    let body = r#"{"model":"m","messages":[{"role":"user","content":"slow"}]}"#;
    let mut caller = std::net::TcpStream::connect(gateway.data).unwrap();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {key}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    caller.write_all(request.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(caller);
    std::thread::sleep(Duration::from_millis(100));
    stop(gateway, "-TERM");
    let gateway = start(&dir, &db);
    assert_eq!(rows(&gateway), 1, "the request whose caller left was settled before the process ended");
    stop(gateway, "-TERM");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn sigterm_loses_no_ledger_row() {
    let dir = workdir("term");
    let db = dir.join("ledger.db");
    let gateway = start(&dir, &db);
    let key = new_key(&gateway);
    for n in 0..150 {
        assert_eq!(chat(&gateway, &key, n), 200);
    }
    stop(gateway, "-TERM");
    let gateway = start(&dir, &db);
    assert_eq!(rows(&gateway), 150);
    stop(gateway, "-TERM");
    std::fs::remove_dir_all(&dir).ok();
}

/// A Responses socket open at SIGTERM: its turn's row is kept, it is
/// closed with 1001 (going away), and the process still exits cleanly.
#[test]
fn sigterm_closes_an_open_socket_with_1001_and_keeps_its_turns_row() {
    use tungstenite::client::IntoClientRequest;
    let dir = workdir("socket");
    let db = dir.join("ledger.db");
    let gateway = start(&dir, &db);
    let key = new_key(&gateway);
    let mut request = format!("ws://{}/v1/responses", gateway.data).into_client_request().unwrap();
    request.headers_mut().insert("authorization", format!("Bearer {key}").parse().unwrap());
    let stream = std::net::TcpStream::connect(gateway.data).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (mut socket, _) = tungstenite::client(request, stream).unwrap();
    let create = r#"{"type":"response.create","model":"m","input":"one turn"}"#;
    socket.send(tungstenite::Message::text(create)).unwrap();
    loop {
        let message = socket.read().unwrap();
        if message.to_text().unwrap().contains("\"response.completed\"") {
            break;
        }
    }
    let pid = gateway.child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let closed = loop {
        match socket.read() {
            Ok(tungstenite::Message::Close(frame)) => break frame.map(|f| u16::from(f.code)),
            Ok(_) => {}
            Err(err) => panic!("the socket ended without a close frame: {err}"),
        }
    };
    assert_eq!(closed, Some(1001));
    stop(gateway, "-TERM");
    let gateway = start(&dir, &db);
    assert_eq!(rows(&gateway), 1);
    stop(gateway, "-TERM");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn kill_9_under_load_loses_at_most_the_last_flush_interval() {
    let dir = workdir("kill");
    let db = dir.join("ledger.db");
    let gateway = start(&dir, &db);
    let key = new_key(&gateway);
    // Load from four threads; each records when its answers arrived.
    let started = Instant::now();
    let stop_at = started + Duration::from_millis(1500);
    let completions: Vec<Duration> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|worker| {
                let (gateway, key) = (&gateway, &key);
                scope.spawn(move || {
                    let mut done = Vec::new();
                    let mut n = worker * 1_000_000;
                    while Instant::now() < stop_at {
                        if chat(gateway, key, n) == 200 {
                            done.push(started.elapsed());
                        }
                        n += 1;
                    }
                    done
                })
            })
            .collect();
        // Kill mid-load.
        std::thread::sleep(Duration::from_millis(1000));
        let killed_at = started.elapsed();
        Command::new("kill").args(["-9", &gateway.child.id().to_string()]).status().unwrap();
        let mut all: Vec<Duration> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
        all.retain(|at| *at <= killed_at);
        all.push(killed_at);
        all
    });
    let killed_at = *completions.last().unwrap();
    let answered = completions.len() - 1;
    let mut gateway = gateway;
    let _ = gateway.child.wait();
    let restarted = start(&dir, &db);
    let kept = rows(&restarted);
    // Every request answered more than a flush interval (plus the write
    // itself) before the kill is in the ledger; nothing is counted twice (a
    // request settled as the kill came may be kept without its answer
    // having reached the caller: one per worker at most).
    let margin = FLUSH + Duration::from_millis(200);
    let must_keep = completions[..answered].iter().filter(|at| **at + margin <= killed_at).count();
    eprintln!("kill -9: {answered} answered before the kill, {kept} rows kept, {must_keep} answered over {margin:?} before it");
    assert!(answered > 50, "the load ran: {answered} answers");
    assert!(
        kept >= must_keep,
        "kept {kept} rows, but {must_keep} requests were answered over {margin:?} before the kill"
    );
    assert!(kept <= answered + 4, "kept {kept} rows for {answered} answers");
    stop(restarted, "-TERM");
    std::fs::remove_dir_all(&dir).ok();
}
