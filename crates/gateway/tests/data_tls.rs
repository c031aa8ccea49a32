//! The data listener over TLS (`server.tls`): ALPN h2 and http/1.1, client
//! certificates when `client_ca` is set, a certificate rotated on disk
//! served to new handshakes while open connections keep theirs, the
//! handshake under the header-read deadline, and real clients (`curl
//! --cacert`, `openssl s_client`) against it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use switchyard_gateway::server::tls::LiveTls;
use switchyard_protocol::ir::Protocol;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls-data").join(name).display().to_string()
}

/// `server:` with TLS from `cert`/`key` (and `client_ca`), plus `extra`.
fn tls_config(cert: &str, key: &str, client_ca: Option<&str>, extra: &str) -> String {
    let ca = client_ca.map(|ca| format!(", client_ca: \"{ca}\"")).unwrap_or_default();
    format!(
        "server: {{ tls: {{ cert: \"{cert}\", key: \"{key}\"{ca} }}{extra} }}\n\
         providers:\n  fake: {{ protocol: openai, base_url: \"mock://\" }}\nmodels:\n  m: {{ provider: fake }}\n"
    )
}

/// A data listener for `yaml`, with its TLS read from the files it names.
async fn serve(yaml: &str) -> (std::net::SocketAddr, Arc<LiveTls>) {
    let config = switchyard_config::load(yaml, &|_| None).unwrap();
    let tls = LiveTls::data(config.server.tls.as_ref().unwrap()).unwrap();
    let gateway = Arc::new(switchyard_gateway::Gateway::new(config, switchyard_protocol::codec).unwrap());
    let mut settings = switchyard_gateway::server::data_settings(&gateway, Arc::default());
    settings.tls = Some(tls.clone());
    (common::spawn_with(switchyard_gateway::router(gateway), settings).await, tls)
}

fn client_config(alpn: &[&[u8]], client: Option<(&str, &str)>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(fixture("ca.pem")).unwrap()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match client {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_file(cert).unwrap()],
                PrivateKeyDer::from_pem_file(key).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// A TLS connection to `addr`: the stream, or the handshake's error.
async fn connect(
    addr: std::net::SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let connector = tokio_rustls::TlsConnector::from(config);
    let tls = connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await?;
    // TLS 1.3 sends the verdict on a client certificate after the
    // handshake: a refused one shows at the first read.
    Ok(tls)
}

/// The certificate the server presented on `stream`.
fn served(stream: &tokio_rustls::client::TlsStream<tokio::net::TcpStream>) -> Vec<u8> {
    stream.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_file(fixture(pem)).unwrap().to_vec()
}

fn chat() -> http::Request<Full<Bytes>> {
    http::Request::post("https://localhost/v1/chat/completions")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(common::chat_body(Protocol::OpenAi, "m", "hi", false))))
        .unwrap()
}

/// Sends a chat over HTTP/1.1 on an open TLS stream; keeps the connection.
async fn http1(
    stream: tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
) -> hyper::client::conn::http1::SendRequest<Full<Bytes>> {
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    sender
}

async fn status_of(sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>) -> u16 {
    let response = sender.send_request(chat()).await.unwrap();
    let status = response.status().as_u16();
    let _ = response.into_body().collect().await;
    status
}

#[tokio::test]
async fn the_data_listener_speaks_tls_with_h2_and_http1() {
    let (addr, _tls) = serve(&tls_config(&fixture("server-a.pem"), &fixture("server-a.key"), None, "")).await;

    // ALPN h2: HTTP/2 over TLS.
    let stream = connect(addr, client_config(&[b"h2"], None)).await.unwrap();
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let response = sender.send_request(chat()).await.unwrap();
    assert_eq!((response.status(), response.version()), (http::StatusCode::OK, http::Version::HTTP_2));
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(String::from_utf8_lossy(&body).contains("choices"));

    // ALPN http/1.1.
    let stream = connect(addr, client_config(&[b"http/1.1"], None)).await.unwrap();
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    assert_eq!(status_of(&mut http1(stream).await).await, 200);

    // Plain HTTP to the TLS port gets no HTTP answer.
    let reply = tokio::time::timeout(Duration::from_secs(5), async {
        let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
        client.get(format!("http://{addr}/healthz").parse().unwrap()).await
    })
    .await
    .unwrap();
    assert!(reply.is_err(), "plain HTTP was answered: {reply:?}");
}

#[tokio::test]
async fn a_rotated_certificate_serves_new_handshakes_while_open_connections_stay() {
    let dir = std::env::temp_dir().join(format!("switchyard-tls-{}-{}", std::process::id(), fastrand::u32(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::copy(fixture("server-a.pem"), &cert).unwrap();
    std::fs::copy(fixture("server-a.key"), &key).unwrap();
    let (addr, tls) = serve(&tls_config(&cert.display().to_string(), &key.display().to_string(), None, "")).await;
    tls.watch(Duration::from_millis(50));

    let before = connect(addr, client_config(&[b"http/1.1"], None)).await.unwrap();
    assert_eq!(served(&before), der("server-a.pem"));
    let mut open = http1(before).await;
    assert_eq!(status_of(&mut open).await, 200);

    // The files are replaced (as a secret mount or certbot would).
    std::fs::copy(fixture("server-b.key"), &key).unwrap();
    std::fs::copy(fixture("server-b.pem"), &cert).unwrap();
    let mut rotated = false;
    for _ in 0..100 {
        let stream = connect(addr, client_config(&[b"http/1.1"], None)).await.unwrap();
        if served(&stream) == der("server-b.pem") {
            rotated = true;
            assert_eq!(status_of(&mut http1(stream).await).await, 200);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(rotated, "new handshakes get the new certificate");
    // The connection opened before keeps serving.
    assert_eq!(status_of(&mut open).await, 200);

    // A broken file is refused; the certificate that served keeps serving.
    std::fs::write(&cert, "not a certificate").unwrap();
    let err = tls.reload().unwrap_err().to_string();
    assert!(err.starts_with("server.tls.cert"), "{err}");
    let stream = connect(addr, client_config(&[b"http/1.1"], None)).await.unwrap();
    assert_eq!(served(&stream), der("server-b.pem"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn client_certificates_are_required_when_client_ca_is_set() {
    let yaml = tls_config(&fixture("server-a.pem"), &fixture("server-a.key"), Some(&fixture("ca.pem")), "");
    let (addr, _tls) = serve(&yaml).await;
    // With a certificate the CA signed: served.
    let client = Some((fixture("client.pem"), fixture("client.key")));
    let client = client.as_ref().map(|(c, k)| (c.as_str(), k.as_str()));
    let stream = connect(addr, client_config(&[b"http/1.1"], client)).await.unwrap();
    assert_eq!(status_of(&mut http1(stream).await).await, 200);

    // Without one, or with one another CA signed: never an HTTP answer.
    let stranger = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls");
    let (cert, key) =
        (stranger.join("stranger.pem").display().to_string(), stranger.join("stranger.key").display().to_string());
    for client in [None, Some((cert.as_str(), key.as_str()))] {
        let refused = async {
            let stream = connect(addr, client_config(&[b"http/1.1"], client)).await?;
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(std::io::Error::other)?;
            tokio::spawn(connection);
            sender.send_request(chat()).await.map_err(std::io::Error::other)
        };
        let outcome = tokio::time::timeout(Duration::from_secs(5), refused).await.unwrap();
        assert!(outcome.is_err(), "served without a certificate the CA signed");
    }
}

#[tokio::test]
async fn a_client_that_never_finishes_its_handshake_is_closed() {
    let yaml = tls_config(&fixture("server-a.pem"), &fixture("server-a.key"), None, ", header_read_timeout: 300ms");
    let (addr, _tls) = serve(&yaml).await;
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    let started = std::time::Instant::now();
    let mut buffer = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(5), tokio::io::AsyncReadExt::read(&mut silent, &mut buffer))
        .await
        .expect("closed within the deadline");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}

#[tokio::test]
async fn curl_and_openssl_reach_it_with_the_ca_bundle() {
    let (addr, _tls) = serve(&tls_config(&fixture("server-a.pem"), &fixture("server-a.key"), None, "")).await;
    let port = addr.port();
    let body = common::chat_body(Protocol::OpenAi, "m", "hi", false);
    let ca = fixture("ca.pem");
    let curl = tokio::process::Command::new("curl")
        .args([
            "-sS",
            "--http2",
            "--cacert",
            &ca,
            "-w",
            "\n%{http_version} %{http_code}",
            "-H",
            "content-type: application/json",
        ])
        .args(["-d", &body, &format!("https://localhost:{port}/v1/chat/completions")])
        .output()
        .await
        .expect("curl is installed (scripts/services.sh installs it)");
    let out = String::from_utf8_lossy(&curl.stdout);
    assert!(curl.status.success(), "{out} {}", String::from_utf8_lossy(&curl.stderr));
    assert!(out.ends_with("\n2 200") && out.contains("choices"), "{out}");
    // curl refuses a server its bundle does not vouch for.
    let other_ca = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls/ca.pem");
    let refused = tokio::process::Command::new("curl")
        .args(["-sS", "--cacert", &other_ca.display().to_string(), &format!("https://localhost:{port}/healthz")])
        .output()
        .await
        .unwrap();
    assert!(!refused.status.success());

    let s_client = tokio::process::Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}"), "-alpn", "h2,http/1.1", "-CAfile", &ca])
        .args(["-servername", "localhost", "-verify_return_error"])
        .stdin(std::process::Stdio::null())
        .output();
    let s_client = tokio::time::timeout(Duration::from_secs(20), s_client).await.unwrap().unwrap();
    let out = String::from_utf8_lossy(&s_client.stdout);
    assert!(out.contains("ALPN protocol: h2"), "{out}");
    assert!(out.contains("Verify return code: 0 (ok)"), "{out}");
    assert!(out.contains("switchyard server-a"), "{out}");
}

/// A governed data listener over TLS for `yaml` (mTLS and its client
/// identities), and its admin listener.
async fn serve_governed(yaml: &str) -> (std::net::SocketAddr, std::net::SocketAddr) {
    let config = switchyard_config::load(yaml, &|_| None).unwrap();
    let tls = LiveTls::data(config.server.tls.as_ref().unwrap()).unwrap();
    let gateway = switchyard_gateway::Gateway::new(config, switchyard_protocol::codec).unwrap();
    let (governance, writer) =
        switchyard_state::governance::from_config(&gateway.config, gateway.prices()).await.unwrap().unwrap();
    std::mem::forget(writer);
    let gateway = Arc::new(gateway.with_governance(governance).with_telemetry());
    let mut settings = switchyard_gateway::server::data_settings(&gateway, Arc::default());
    settings.tls = Some(tls);
    let data = common::spawn_with(switchyard_gateway::router(gateway.clone()), settings).await;
    let admin = common::spawn(switchyard_gateway::admin_router(gateway)).await;
    (data, admin)
}

fn identity_config(identity: &str) -> String {
    let tls = tls_config(&fixture("server-a.pem"), &fixture("server-a.key"), Some(&fixture("ca.pem")), "");
    let tls = tls.replacen("client_ca: ", &format!("client_identity: {identity}, client_ca: "), 1);
    format!(
        "{tls}auth: {{ mode: keys }}\nadmin: {{ tokens: [{}] }}\n\
         groups:\n  acme-batch-job: {{ limits: {{ rpm: 2 }} }}\n",
        common::ADMIN_TOKEN
    )
}

/// A chat over mTLS with the client fixture's certificate (CN
/// `acme-batch-job`) and no key: its status and error message.
async fn chat_with_certificate(addr: std::net::SocketAddr) -> (u16, String) {
    let (cert, key) = (fixture("client.pem"), fixture("client.key"));
    let stream = connect(addr, client_config(&[b"http/1.1"], Some((&cert, &key)))).await.unwrap();
    let mut sender = http1(stream).await;
    let response = sender.send_request(chat()).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let message = serde_json::from_slice::<serde_json::Value>(&body).unwrap_or_default()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (status, message)
}

#[tokio::test]
async fn a_client_certificate_names_the_group_a_caller_draws_on() {
    let (addr, _) = serve_governed(&identity_config("group")).await;
    // No key: the certificate's name is the group, and its limits apply.
    assert_eq!(chat_with_certificate(addr).await.0, 200);
    assert_eq!(chat_with_certificate(addr).await.0, 200);
    assert_eq!(chat_with_certificate(addr).await.0, 429, "the group's two a minute are spent");
}

#[tokio::test]
async fn a_client_certificate_names_a_key_when_exactly_one_has_its_name() {
    let (addr, admin) = serve_governed(&identity_config("key")).await;
    let (status, message) = chat_with_certificate(addr).await;
    assert_eq!(status, 401);
    assert!(message.contains("names no key"), "{message}");
    let auth = format!("Bearer {}", common::ADMIN_TOKEN);
    let create = |name: &'static str| {
        let auth = auth.clone();
        async move {
            let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
            common::post(admin, "/api/v1/admin/keys", &headers, format!("{{\"name\": \"{name}\"}}")).await.status
        }
    };
    assert_eq!(create("acme-batch-job").await, 201);
    assert_eq!(chat_with_certificate(addr).await.0, 200);
    // A second key of that name: the name names neither.
    assert_eq!(create("acme-batch-job").await, 201);
    assert_eq!(chat_with_certificate(addr).await.0, 401);
}
