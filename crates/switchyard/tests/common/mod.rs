//! What the binary's integration tests share: free ports, a one-shot
//! HTTP/1.1 client over a raw socket, the binary started on a config file.
#![allow(dead_code, reason = "each test binary uses a part of the harness")]
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One HTTP/1.1 exchange on its own connection: (status, body); status 0
/// when the gateway cannot be reached (it was killed).
pub fn http(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let (status, _, body) = exchange(addr, method, path, headers, body);
    (status, body)
}

/// The value of response header `name` (lower case) in `head`.
pub fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// [`http`] with the response's head too: (status, head, body).
pub fn exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return (0, String::new(), String::new());
    };
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n", body.len());
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    if stream.write_all(request.as_bytes()).is_err() {
        return (0, String::new(), String::new());
    }
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text.as_str(), ""));
    (status, head.to_owned(), body.to_owned())
}

/// Whether the gateway at `addr` answers its health check.
pub fn http_ok(addr: SocketAddr) -> Option<()> {
    TcpStream::connect(addr).ok()?;
    (http(addr, "GET", "/healthz", &[], "").0 == 200).then_some(())
}

/// The binary serving `config`, once `data` answers its health check.
pub fn spawn_binary(config: &Path, data: SocketAddr) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["serve", "--config"])
        .arg(config)
        .env("SWITCHYARD_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while http_ok(data).is_none() {
        assert!(Instant::now() < deadline, "the gateway did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// `switchyard check --config` on `yaml` with `env` set: whether it
/// passed, and what it printed (the verdict on stdout, problems and
/// warnings on stderr).
pub fn check(yaml: &str, env: &[(&str, &str)]) -> (bool, String) {
    static CHECKS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CHECKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("switchyard-check-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("switchyard.yaml");
    std::fs::write(&path, yaml).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    command.arg("check").arg("--config").arg(&path).env_remove("SWITCHYARD_CONFIG");
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

/// The repository's root.
pub fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A value a variable named `name` would plausibly hold.
pub fn sample_value(name: &str) -> String {
    if name.ends_with("POSTGRES_URL") {
        "postgres://switchyard:secret@127.0.0.1:5432/switchyard".into()
    } else if name.ends_with("REDIS_URL") {
        "redis://127.0.0.1:6379".into()
    } else if name.ends_with("RETENTION_KEY") {
        "0f".repeat(32)
    } else if let Some(file) =
        [("TLS_CERT_FILE", "server-a.pem"), ("TLS_KEY_FILE", "server-a.key"), ("TLS_CLIENT_CA_FILE", "ca.pem")]
            .iter()
            .find_map(|(suffix, file)| name.ends_with(suffix).then_some(file))
    {
        // TLS files that exist: check reads them (test-only material).
        root().join("crates/gateway/tests/fixtures/tls-data").join(file).display().to_string()
    } else if name.ends_with("SERVICE_ACCOUNT_FILE") {
        // A key file that exists: check reads it (a throwaway test key).
        root().join("crates/gateway/tests/fixtures/cloud/service-account.json").display().to_string()
    } else {
        format!("{}-0123456789abcdef", name.to_lowercase())
    }
}

/// The `${VAR}` names a config refers to.
pub fn variables(yaml: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = yaml;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let end = after.find('}').unwrap();
        names.push(after[..end].to_owned());
        rest = &after[end..];
    }
    names
}
