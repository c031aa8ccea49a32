//! The admin listener off loopback: TLS with client certificates. A client
//! whose certificate the configured CA signed reaches the admin API (still
//! behind its token); one without a certificate, or with one the CA never
//! signed, is closed during the handshake.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use common::ADMIN_TOKEN;
use http_body_util::{BodyExt, Full};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls").join(name).display().to_string()
}

async fn admin_over_tls() -> std::net::SocketAddr {
    let yaml = format!(
        "admin: {{ tokens: [{ADMIN_TOKEN}], tls: {{ cert: \"{}\", key: \"{}\", client_ca: \"{}\" }} }}\n",
        fixture("server.pem"),
        fixture("server.key"),
        fixture("ca.pem")
    );
    let config = switchyard_config::load(&yaml, &|_| None).unwrap();
    let tls = switchyard_gateway::server::tls::acceptor(config.admin.tls.as_ref().unwrap()).unwrap();
    let gateway = Arc::new(switchyard_gateway::Gateway::new(config, switchyard_protocol::codec).unwrap());
    let mut settings = switchyard_gateway::server::Settings::plain(switchyard_config::Server::default());
    settings.tls = Some(switchyard_gateway::server::tls::LiveTls::fixed(tls));
    common::spawn_with(switchyard_gateway::admin_router(gateway), settings).await
}

/// GETs `/stats` over TLS presenting `client` (certificate, key), if any.
async fn get_stats(addr: std::net::SocketAddr, client: Option<(&str, &str)>) -> Result<u16, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(fixture("ca.pem")).unwrap()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_file(fixture(cert)).unwrap()],
                PrivateKeyDer::from_pem_file(fixture(key)).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let https = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(config).https_only().enable_http1().build();
    let client: hyper_util::client::legacy::Client<_, Full<Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(https);
    let request = http::Request::get(format!("https://localhost:{}/stats", addr.port()))
        .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = client.request(request).await.map_err(|err| format!("{err:?}"))?;
    let status = response.status().as_u16();
    let _ = response.into_body().collect().await;
    Ok(status)
}

#[tokio::test]
async fn only_clients_with_a_certificate_the_ca_signed_reach_the_admin_api() {
    let addr = admin_over_tls().await;
    assert_eq!(get_stats(addr, Some(("client.pem", "client.key"))).await, Ok(200));
    assert!(get_stats(addr, None).await.is_err(), "no client certificate");
    assert!(
        get_stats(addr, Some(("stranger.pem", "stranger.key"))).await.is_err(),
        "a certificate the CA did not sign"
    );
}

#[test]
fn off_loopback_needs_client_certificates_or_the_waiver() {
    let err = switchyard_config::load("admin_listen: 0.0.0.0:8081\n", &|_| None).unwrap_err();
    assert_eq!(err.0[0].path, "admin_listen");
    let waived = switchyard_config::load("admin_listen: 0.0.0.0:8081\nadmin: { insecure: true }\n", &|_| None);
    assert!(waived.is_ok());
    let yaml = format!(
        "admin_listen: 0.0.0.0:8081\nadmin: {{ tls: {{ cert: \"{}\", key: \"{}\", client_ca: \"{}\" }} }}\n",
        fixture("server.pem"),
        fixture("server.key"),
        fixture("ca.pem")
    );
    assert!(switchyard_config::load(&yaml, &|_| None).is_ok());
    let missing = switchyard_config::AdminTls {
        cert: "/nonexistent.pem".into(),
        key: fixture("server.key"),
        client_ca: fixture("ca.pem"),
    };
    let err = switchyard_gateway::server::tls::acceptor(&missing).err().unwrap();
    assert!(err.to_string().starts_with("admin.tls.cert: /nonexistent.pem"), "{err}");
}
