//! TLS with client certificates for the admin listener: the server
//! certificate and key, and the CA whose signature a client certificate
//! must carry. A client without one never reaches an HTTP handler. Built
//! once at boot from PEM files; a file that is missing or wrong is a boot
//! error naming it.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use switchyard_config::AdminTls;

/// Why the admin TLS settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("admin.tls.{key}: {path}: {message}")]
    File {
        /// The config key.
        key: &'static str,
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the combination.
    #[error("admin.tls: {0}")]
    Config(String),
}

/// A TLS acceptor that requires a client certificate signed by `client_ca`.
pub fn acceptor(settings: &AdminTls) -> Result<tokio_rustls::TlsAcceptor, TlsError> {
    let file_error =
        |key: &'static str, path: &str, message: String| TlsError::File { key, path: path.to_owned(), message };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&settings.cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|err| file_error("cert", &settings.cert, err.to_string()))?;
    if certs.is_empty() {
        return Err(file_error("cert", &settings.cert, "no certificate in the file".into()));
    }
    let key =
        PrivateKeyDer::from_pem_file(&settings.key).map_err(|err| file_error("key", &settings.key, err.to_string()))?;
    let mut roots = rustls::RootCertStore::empty();
    let cas = CertificateDer::pem_file_iter(&settings.client_ca)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|err| file_error("client_ca", &settings.client_ca, err.to_string()))?;
    for ca in cas {
        roots.add(ca).map_err(|err| file_error("client_ca", &settings.client_ca, err.to_string()))?;
    }
    if roots.is_empty() {
        return Err(file_error("client_ca", &settings.client_ca, "no certificate in the file".into()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|err| TlsError::Config(err.to_string()))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| TlsError::Config(err.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|err| TlsError::Config(err.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}
