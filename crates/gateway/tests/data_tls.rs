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
    let gateway =
        Arc::new(gateway.with_governance(governance).with_mcp(switchyard_gateway::mcp_hub()).with_telemetry());
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

/// A CA of the test's own, minted now (its key kept, so the test can sign
/// client certificates for names it learns, such as a key's id), and a
/// server certificate for localhost it signed: PEM files in a directory
/// of their own.
struct Pki {
    dir: PathBuf,
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    fn new() -> Pki {
        let dir = std::env::temp_dir().join(format!("switchyard-pki-{}-{}", std::process::id(), fastrand::u64(..)));
        std::fs::create_dir_all(&dir).unwrap();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, "Switchyard test identity CA");
        params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
        let ca = params.self_signed(&ca_key).unwrap();
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        let pki = Pki { dir, ca, ca_key };
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let server = params.signed_by(&key, &pki.ca, &pki.ca_key).unwrap();
        std::fs::write(pki.dir.join("server.pem"), server.pem()).unwrap();
        std::fs::write(pki.dir.join("server.key"), key.serialize_pem()).unwrap();
        pki
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// A client certificate of `subject`, as files `<file>.pem` and
    /// `<file>.key`: their paths.
    fn client(&self, file: &str, subject: &[(rcgen::DnType, &str)]) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        for (kind, value) in subject {
            params.distinguished_name.push(kind.clone(), *value);
        }
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let certificate = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        std::fs::write(self.dir.join(format!("{file}.pem")), certificate.pem()).unwrap();
        std::fs::write(self.dir.join(format!("{file}.key")), key.serialize_pem()).unwrap();
        (self.path(&format!("{file}.pem")), self.path(&format!("{file}.key")))
    }

    /// A governed mTLS config naming callers by `identity` (`key`, `group`).
    fn identity_config(&self, identity: &str) -> String {
        let tls = tls_config(&self.path("server.pem"), &self.path("server.key"), Some(&self.path("ca.pem")), "");
        let tls = tls.replacen("client_ca: ", &format!("client_identity: {identity}, client_ca: "), 1);
        format!(
            "{tls}auth: {{ mode: keys }}\nadmin: {{ tokens: [{}] }}\ngroups:\n  acme-batch-job: {{}}\n",
            common::ADMIN_TOKEN
        )
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Sends `request` over mTLS with the certificate `client` (paths of its
/// PEM and key), trusting `ca`: its status and body.
async fn send_as(
    addr: std::net::SocketAddr,
    ca: &str,
    client: &(String, String),
    request: http::Request<Full<Bytes>>,
) -> (u16, serde_json::Value) {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(ca).unwrap()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(
            vec![CertificateDer::from_pem_file(&client.0).unwrap()],
            PrivateKeyDer::from_pem_file(&client.1).unwrap(),
        )
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let stream = connect(addr, Arc::new(config)).await.unwrap();
    let mut sender = http1(stream).await;
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap_or_default())
}

fn get(path: &str) -> http::Request<Full<Bytes>> {
    http::Request::get(format!("https://localhost{path}")).body(Full::new(Bytes::new())).unwrap()
}

#[tokio::test]
async fn a_client_certificate_names_a_key_by_its_id_never_by_its_name() {
    let pki = Pki::new();
    let (addr, admin) = serve_governed(&pki.identity_config("key")).await;
    let auth = format!("Bearer {}", common::ADMIN_TOKEN);
    let headers = [("authorization", auth.as_str()), ("content-type", "application/json")];
    let created = common::post(admin, "/api/v1/admin/keys", &headers, r#"{"name": "batch-job"}"#).await;
    assert_eq!(created.status, 201);
    let id = serde_json::from_slice::<serde_json::Value>(&created.body).unwrap()["id"].as_str().unwrap().to_owned();
    let ca = pki.path("ca.pem");
    // A name is anyone's to give a key (and a revoked key keeps it): it names none.
    let by_name = pki.client("by-name", &[(rcgen::DnType::CommonName, "batch-job")]);
    let (status, body) = send_as(addr, &ca, &by_name, chat()).await;
    assert_eq!(status, 401, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("names no key"), "{body}");
    // The key's id names it, whatever other keys are called.
    let by_id = pki.client("by-id", &[(rcgen::DnType::CommonName, id.as_str())]);
    assert_eq!(send_as(addr, &ca, &by_id, chat()).await.0, 200);
    assert_eq!(common::post(admin, "/api/v1/admin/keys", &headers, format!(r#"{{"name": "{id}"}}"#)).await.status, 201);
    assert_eq!(send_as(addr, &ca, &by_id, chat()).await.0, 200);
    // Revoked: refused.
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let revoke = http::Request::delete(format!("http://{admin}/api/v1/admin/keys/{id}"))
        .header("authorization", auth.as_str())
        .body(Full::new(Bytes::new()))
        .unwrap();
    assert_eq!(client.request(revoke).await.unwrap().status(), 200);
    assert_eq!(send_as(addr, &ca, &by_id, chat()).await.0, 401);
}

#[tokio::test]
async fn the_certificates_of_one_group_each_own_what_they_keep() {
    let pki = Pki::new();
    let (addr, _) = serve_governed(&pki.identity_config("group")).await;
    let ca = pki.path("ca.pem");
    let team = |file: &str, unit: &'static str| {
        pki.client(file, &[(rcgen::DnType::CommonName, "acme-batch-job"), (rcgen::DnType::OrganizationName, unit)])
    };
    let (a, b) = (team("team-a", "team-a"), team("team-b", "team-b"));
    // Both draw on the group (as before), each keeps its own.
    assert_eq!(send_as(addr, &ca, &b, chat()).await.0, 200);
    let boundary = "switchyardboundary";
    let form = format!(
        "--{boundary}\r\ncontent-disposition: form-data; name=\"purpose\"\r\n\r\nuser_data\r\n--{boundary}\r\n\
         content-disposition: form-data; name=\"file\"; filename=\"notes.txt\"\r\ncontent-type: text/plain\r\n\r\n\
         team a's notes\r\n--{boundary}--\r\n"
    );
    let upload = http::Request::post("https://localhost/v1/files")
        .header("content-type", format!("multipart/form-data; boundary={boundary}"))
        .body(Full::new(Bytes::from(form)))
        .unwrap();
    let (status, file) = send_as(addr, &ca, &a, upload).await;
    assert_eq!(status, 200, "{file}");
    let id = file["id"].as_str().unwrap();
    assert_eq!(send_as(addr, &ca, &a, get(&format!("/v1/files/{id}"))).await.0, 200);
    assert_eq!(send_as(addr, &ca, &b, get(&format!("/v1/files/{id}"))).await.0, 404);
    assert_eq!(send_as(addr, &ca, &b, get(&format!("/v1/files/{id}/content"))).await.0, 404);
    assert_eq!(send_as(addr, &ca, &b, get("/v1/files")).await.1["data"], serde_json::json!([]));
}

/// One MCP message over mTLS with the client fixture's certificate and no
/// key: the answer, and the session an `initialize` opened.
async fn mcp_with_certificate(
    addr: std::net::SocketAddr,
    session: Option<&str>,
    message: serde_json::Value,
) -> (serde_json::Value, Option<String>) {
    let (cert, key) = (fixture("client.pem"), fixture("client.key"));
    let stream = connect(addr, client_config(&[b"http/1.1"], Some((&cert, &key)))).await.unwrap();
    let mut sender = http1(stream).await;
    let mut request = http::Request::post("https://localhost/mcp").header("content-type", "application/json");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let response =
        sender.send_request(request.body(Full::new(Bytes::from(message.to_string()))).unwrap()).await.unwrap();
    let opened = response.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_owned());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (serde_json::from_slice(&body).unwrap_or_default(), opened)
}

/// The tools a certificate's caller lists, with `identity` as its
/// `client_identity`.
async fn tools_of_certificate(identity: &str) -> Vec<String> {
    let upstream = common::mock_upstream().await;
    let yaml =
        identity_config(identity) + &format!("mcp:\n  servers:\n    mock: {{ url: \"http://{upstream}/mcp\" }}\n");
    let (addr, _) = serve_governed(&yaml).await;
    let hello = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}});
    let (answer, session) = mcp_with_certificate(addr, None, hello).await;
    let session = session.unwrap_or_else(|| panic!("no session: {answer}"));
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (listed, _) = mcp_with_certificate(addr, Some(&session), list).await;
    listed["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn a_certificates_group_caller_has_the_identitys_mcp_grants_and_no_more() {
    assert_eq!(tools_of_certificate("{ names: group, mcp: [mock__echo] }").await, ["mock__echo"]);
    assert!(tools_of_certificate("group").await.is_empty(), "no template: no tool");
}
