//! TLS for the listeners. The admin listener requires client certificates
//! (`admin.tls`); the data listener speaks TLS when `server.tls` names a
//! certificate and key, and requires client certificates when it also names
//! a `client_ca`. Both offer ALPN h2 and http/1.1. A client that cannot
//! finish the handshake never reaches an HTTP handler.
//!
//! The files are read at boot (a file that is missing or wrong is a boot
//! error naming its key) and again on [`LiveTls::reload`] (SIGHUP) or when
//! [`LiveTls::watch`] sees them change: a new handshake takes the new
//! certificate, connections already open keep theirs, and a bad file is
//! logged while the old certificate keeps serving.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use switchyard_config::{AdminTls, ServerTls};
use tokio_rustls::TlsAcceptor;

/// Why TLS settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("{section}.tls.{key}: {path}: {message}")]
    File {
        /// `admin` or `server`.
        section: &'static str,
        /// The config key.
        key: &'static str,
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the combination.
    #[error("{section}.tls: {message}")]
    Config {
        /// `admin` or `server`.
        section: &'static str,
        /// What rustls said.
        message: String,
    },
}

/// What the files looked like when last read: modified time and length
/// each (`None`: unreadable), to tell a change.
type Stamp = Vec<Option<(SystemTime, u64)>>;

/// Where a listener's TLS material lives.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Files {
    section: &'static str,
    cert: String,
    key: String,
    client_ca: Option<String>,
}

impl Files {
    fn paths(&self) -> impl Iterator<Item = &str> {
        [Some(self.cert.as_str()), Some(self.key.as_str()), self.client_ca.as_deref()].into_iter().flatten()
    }

    /// What the files look like now (modified time and length each), to
    /// tell a change.
    fn stamp(&self) -> Stamp {
        self.paths()
            .map(|path| std::fs::metadata(path).ok().and_then(|m| Some((m.modified().ok()?, m.len()))))
            .collect()
    }

    fn acceptor(&self) -> Result<TlsAcceptor, TlsError> {
        let section = self.section;
        let file_error = |key: &'static str, path: &str, message: String| TlsError::File {
            section,
            key,
            path: path.to_owned(),
            message,
        };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&self.cert)
            .and_then(|certs| certs.collect::<Result<_, _>>())
            .map_err(|err| file_error("cert", &self.cert, err.to_string()))?;
        if certs.is_empty() {
            return Err(file_error("cert", &self.cert, "no certificate in the file".into()));
        }
        let key =
            PrivateKeyDer::from_pem_file(&self.key).map_err(|err| file_error("key", &self.key, err.to_string()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let rustls_error = |err: rustls::Error| TlsError::Config { section, message: err.to_string() };
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(rustls_error)?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(client_ca) => {
                let mut roots = rustls::RootCertStore::empty();
                let cas = CertificateDer::pem_file_iter(client_ca)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .map_err(|err| file_error("client_ca", client_ca, err.to_string()))?;
                for ca in cas {
                    roots.add(ca).map_err(|err| file_error("client_ca", client_ca, err.to_string()))?;
                }
                if roots.is_empty() {
                    return Err(file_error("client_ca", client_ca, "no certificate in the file".into()));
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|err| TlsError::Config { section, message: err.to_string() })?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_single_cert(certs, key).map_err(rustls_error)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

/// A listener's TLS, swappable while it serves: each handshake takes the
/// acceptor current when it starts.
pub struct LiveTls {
    current: ArcSwap<TlsAcceptor>,
    /// The files it was read from and their stamp (`None`: fixed, never
    /// read again).
    files: Option<(Files, Mutex<Stamp>)>,
}

impl LiveTls {
    /// An acceptor that is never read again (tests).
    pub fn fixed(acceptor: TlsAcceptor) -> Arc<LiveTls> {
        Arc::new(LiveTls { current: ArcSwap::from_pointee(acceptor), files: None })
    }

    fn from_files(files: Files) -> Result<Arc<LiveTls>, TlsError> {
        let stamp = files.stamp();
        let acceptor = files.acceptor()?;
        Ok(Arc::new(LiveTls { current: ArcSwap::from_pointee(acceptor), files: Some((files, Mutex::new(stamp))) }))
    }

    /// The data listener's TLS (`server.tls`).
    pub fn data(settings: &ServerTls) -> Result<Arc<LiveTls>, TlsError> {
        LiveTls::from_files(Files {
            section: "server",
            cert: settings.cert.clone(),
            key: settings.key.clone(),
            client_ca: settings.client_ca.clone(),
        })
    }

    /// The admin listener's TLS (`admin.tls`): client certificates required.
    pub fn admin(settings: &AdminTls) -> Result<Arc<LiveTls>, TlsError> {
        LiveTls::from_files(Files {
            section: "admin",
            cert: settings.cert.clone(),
            key: settings.key.clone(),
            client_ca: Some(settings.client_ca.clone()),
        })
    }

    /// The acceptor for a handshake starting now.
    pub fn current(&self) -> Arc<TlsAcceptor> {
        self.current.load_full()
    }

    /// Reads the files again and serves what they hold from the next
    /// handshake on. A file that is missing or wrong keeps the current
    /// certificate serving, and is the error returned.
    pub fn reload(&self) -> Result<(), TlsError> {
        let Some((files, stamp)) = &self.files else { return Ok(()) };
        let seen = files.stamp();
        let acceptor = files.acceptor()?;
        self.current.store(Arc::new(acceptor));
        *stamp.lock().unwrap_or_else(PoisonError::into_inner) = seen;
        tracing::info!(listener = files.section, cert = %files.cert, "TLS certificate loaded");
        Ok(())
    }

    /// Whether the files changed since they were last read.
    fn changed(&self) -> bool {
        let Some((files, stamp)) = &self.files else { return false };
        *stamp.lock().unwrap_or_else(PoisonError::into_inner) != files.stamp()
    }

    /// Looks at the files every `every` and reads them again when they
    /// changed, for as long as the listener's TLS is held elsewhere.
    pub fn watch(self: &Arc<LiveTls>, every: Duration) {
        let weak = Arc::downgrade(self);
        switchyard_tasks::service("tls watch", async move {
            let mut ticker = tokio::time::interval(every);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let Some(tls) = weak.upgrade() else { return };
                if tls.changed() {
                    if let Err(err) = tls.reload() {
                        // Often a half-written file: it changes again when
                        // whole, and is read then.
                        tracing::warn!(error = %err, "TLS files changed but cannot be used; the current certificate keeps serving");
                        if let Some((files, stamp)) = &tls.files {
                            *stamp.lock().unwrap_or_else(PoisonError::into_inner) = files.stamp();
                        }
                    }
                }
            }
        });
    }
}

/// A TLS acceptor that requires a client certificate signed by `client_ca`
/// (the admin listener's; read once).
pub fn acceptor(settings: &AdminTls) -> Result<TlsAcceptor, TlsError> {
    Files {
        section: "admin",
        cert: settings.cert.clone(),
        key: settings.key.clone(),
        client_ca: Some(settings.client_ca.clone()),
    }
    .acceptor()
}
