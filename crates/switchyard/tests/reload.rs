//! Live reload on the real binary: SIGHUP serves the edited file, and the
//! admin API refuses a bad one while the running config keeps serving.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

mod common;

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{free_port, http, spawn_binary};

const ADMIN_TOKEN: &str = "reload-admin-token-0123456789";

fn chat(data: SocketAddr, model: &str) -> u16 {
    let body = format!(r#"{{"model":"{model}","messages":[{{"role":"user","content":"hi"}}]}}"#);
    http(data, "POST", "/v1/chat/completions", &[], &body).0
}

fn config(data: SocketAddr, admin: SocketAddr, pools: &str) -> String {
    format!(
        "listen: {data}\nadmin_listen: {admin}\nadmin:\n  tokens: [{ADMIN_TOKEN}]\nproviders:\n  fake:\n    protocol: openai\n    base_url: mock://\nmodels:\n  a:\n    provider: fake\npools:\n{pools}"
    )
}

#[test]
fn sighup_serves_the_edited_file_and_a_bad_file_is_refused() {
    let data: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let dir = std::env::temp_dir().join(format!("switchyard-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("switchyard.yaml");
    std::fs::write(&path, config(data, admin, "  p:\n    members: [{ model: a }]\n")).unwrap();
    let mut child = spawn_binary(&path, data);
    assert_eq!(chat(data, "p"), 200);
    assert_eq!(chat(data, "q"), 404);

    std::fs::write(
        &path,
        config(data, admin, "  p:\n    members: [{ model: a }]\n  q:\n    members: [{ model: a }]\n"),
    )
    .unwrap();
    Command::new("kill").args(["-HUP", &child.id().to_string()]).status().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while chat(data, "q") != 200 {
        assert!(Instant::now() < deadline, "SIGHUP did not bring pool q");
        std::thread::sleep(Duration::from_millis(50));
    }

    std::fs::write(&path, "providers:\n  fake: { protocol: openai, base_url: mock://, colour: red }\n").unwrap();
    let auth = format!("Bearer {ADMIN_TOKEN}");
    let (status, body) = http(admin, "POST", "/api/v1/admin/config/reload", &[("authorization", &auth)], "");
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("colour") && body.contains("fix"), "{body}");
    assert_eq!(chat(data, "q"), 200, "the running config keeps serving");
    let (_, stats) = http(admin, "GET", "/stats", &[("authorization", &auth)], "");
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["config_reloads"], serde_json::json!({"done": 1, "refused": 1}));

    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_dir_all(&dir).ok();
}
