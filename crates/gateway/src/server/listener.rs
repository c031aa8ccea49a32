//! The accept loop, built on hyper-util's connection builders rather than
//! `axum::serve`: every connection gets the deadlines of [`ConnIo`], the
//! listener caps open connections and requests in flight (answering past
//! either with an overload error in the caller's protocol and closing,
//! never hanging), HTTP/2 gets its stream and header-list limits, and the
//! router is shared by every connection, never rebuilt per connection.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use switchyard_config::Server as Limits;
pub use switchyard_telemetry::ListenerStats;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower_service::Service;

use super::conn_io::{ActiveRequest, ConnIo, ConnState, IoTimeouts};

/// Why the listener refused a request before it reached the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Every connection slot is taken.
    Connections,
    /// Every in-flight slot is taken.
    InFlight,
}

/// Renders a refusal for a request (by its path, in the caller's protocol).
pub type Refuse = Arc<dyn Fn(&http::request::Parts, Refusal) -> Response<Body> + Send + Sync>;

/// A listener's limits, refusal renderer and counters.
#[derive(Clone)]
pub struct Settings {
    /// Timeouts and caps (`server:`).
    pub limits: Limits,
    /// How a refused request is answered.
    pub refuse: Refuse,
    /// Counters.
    pub stats: Arc<ListenerStats>,
    /// TLS in front of HTTP, when configured (swappable: SIGHUP and a
    /// changed file load a new certificate for new handshakes).
    pub tls: Option<Arc<super::tls::LiveTls>>,
    /// Each request carries its connection's [`Peer`] (the admin plane's
    /// audit reads it; the data plane does not pay for it).
    pub peer: bool,
    /// Each request carries its connection's verified client certificate's
    /// common name ([`ClientName`]; `server.tls.client_identity`).
    pub client_names: bool,
}

pub use switchyard_state::{ClientName, Peer};

impl Settings {
    /// Settings whose refusals are plain JSON (the admin plane, the vendor fake).
    pub fn plain(limits: Limits) -> Settings {
        Settings {
            limits,
            refuse: Arc::new(|_, refusal| plain_refusal(refusal)),
            stats: Arc::default(),
            tls: None,
            peer: true,
            client_names: false,
        }
    }
}

/// A refusal as a plain JSON error.
pub fn plain_refusal(refusal: Refusal) -> Response<Body> {
    let message = match refusal {
        Refusal::Connections => "too many open connections; retry shortly",
        Refusal::InFlight => "too many requests in flight; retry shortly",
    };
    let body = serde_json::json!({"error": {"message": message, "type": "overloaded"}}).to_string();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    response.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("1"));
    response
}

/// The HTTP/1 read buffer and largest request head.
pub const HTTP1_READ_BUFFER: usize = 8 << 10;

/// Connections past the cap that are still answered (with an overload
/// error); beyond these, an extra connection is closed at once.
const OVERFLOW_CONNECTIONS: usize = 1024;

/// The router a listener serves, swappable while it serves: a config
/// reload stores a new one, each request takes whichever is current when it
/// arrives (one atomic load), and requests in flight keep the one they began
/// with, state included.
#[derive(Clone)]
pub struct LiveRouter(Arc<arc_swap::ArcSwap<Router>>);

impl LiveRouter {
    /// A listener's router, before any reload.
    pub fn new(router: Router) -> LiveRouter {
        LiveRouter(Arc::new(arc_swap::ArcSwap::from_pointee(router)))
    }

    /// Serve `router` from the next request on.
    pub fn swap(&self, router: Router) {
        self.0.store(Arc::new(router));
    }

    pub(crate) fn current(&self) -> Router {
        Router::clone(&self.0.load())
    }
}

impl From<Router> for LiveRouter {
    fn from(router: Router) -> LiveRouter {
        LiveRouter::new(router)
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets
/// in-flight requests and streams finish for up to `limits.drain_timeout`.
pub async fn serve(
    listener: TcpListener,
    router: impl Into<LiveRouter>,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let router = router.into();
    let limits = &settings.limits;
    let timeouts = IoTimeouts {
        header_read: limits.header_read_timeout,
        keepalive_idle: limits.keepalive_idle,
        write: limits.write_timeout,
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // hyper's HTTP/1 read buffer, which also bounds a request head (a larger
    // one is a 431, as nginx's 8k header buffers would). Left adaptive it
    // grows to 16 KiB on most connections and a long stream holds it for its
    // whole life: 8 KiB saves 5 KiB per open stream, measured.
    builder.http1().max_buf_size(HTTP1_READ_BUFFER);
    builder
        .http2()
        .max_concurrent_streams(limits.http2.max_concurrent_streams)
        .max_header_list_size(limits.http2.max_header_list_size);
    let builder = Arc::new(builder);
    let mut overflow_builder = auto::Builder::new(TokioExecutor::new()).http1_only();
    overflow_builder.http1().keep_alive(false);
    let overflow_builder = Arc::new(overflow_builder);

    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let overflow = Arc::new(Semaphore::new(OVERFLOW_CONNECTIONS));
    let in_flight = Arc::new(Semaphore::new(limits.max_in_flight));
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of descriptors or a connection reset before accept:
                    // back off a moment rather than spin.
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Nagle plus delayed ACK would add ~40 ms to every streamed frame.
        let _ = tcp.set_nodelay(true);
        settings.stats.accepted.fetch_add(1, Ordering::Relaxed);
        let state = ConnState::new(limits.max_connection_body);
        match connections.clone().try_acquire_owned() {
            Ok(slot) => {
                let service = ConnService {
                    router: router.clone(),
                    state: state.clone(),
                    in_flight: in_flight.clone(),
                    settings: settings.clone(),
                    peer: settings.peer.then_some(Peer(peer.ip())),
                    client: None,
                };
                let connection = Connection { tcp, state, timeouts, service, slot };
                settings.stats.open.fetch_add(1, Ordering::Relaxed);
                switchyard_tasks::service(
                    "connection",
                    connection.serve(builder.clone(), graceful.watcher(), settings.clone()),
                );
            }
            Err(_) => {
                settings.stats.refused_connections.fetch_add(1, Ordering::Relaxed);
                // Over TLS there is no HTTP to answer before a handshake: close.
                if settings.tls.is_some() {
                    continue;
                }
                let Ok(slot) = overflow.clone().try_acquire_owned() else {
                    continue;
                };
                let io = TokioIo::new(ConnIo::new(tcp, state, timeouts));
                switchyard_tasks::service(
                    "refused connection",
                    refuse_connection(io, overflow_builder.clone(), settings.refuse.clone(), slot),
                );
            }
        }
    }
    drop(listener);
    if tokio::time::timeout(settings.limits.drain_timeout, graceful.shutdown()).await.is_err() {
        tracing::warn!(drain = ?settings.limits.drain_timeout, "drain timeout reached; closing remaining connections");
    }
    Ok(())
}

/// An accepted connection within the cap, to be served.
struct Connection {
    tcp: tokio::net::TcpStream,
    state: Arc<ConnState>,
    timeouts: IoTimeouts,
    service: ConnService,
    slot: OwnedSemaphorePermit,
}

impl Connection {
    /// Serves HTTP on it (counted open until it closes; after the TLS handshake, when the listener has
    /// TLS: a client that cannot finish one with a certificate the CA
    /// signed is closed before HTTP), watched for a graceful drain.
    async fn serve(self, builder: Arc<auto::Builder<TokioExecutor>>, watcher: Watcher, settings: Settings) {
        let Connection { tcp, state, timeouts, service, slot } = self;
        match settings.tls {
            None => {
                let io = TokioIo::new(ConnIo::new(tcp, state, timeouts));
                let _ = watcher.watch(builder.serve_connection_with_upgrades(io, service)).await;
            }
            Some(tls) => {
                let acceptor = tls.current();
                if let Ok(Ok(stream)) = tokio::time::timeout(timeouts.header_read, acceptor.accept(tcp)).await {
                    let mut service = service;
                    if settings.client_names {
                        service.client =
                            stream.get_ref().1.peer_certificates().and_then(|chain| client_name(chain.first()?));
                    }
                    let io = TokioIo::new(ConnIo::new(stream, state, timeouts));
                    let _ = watcher.watch(builder.serve_connection_with_upgrades(io, service)).await;
                }
            }
        }
        settings.stats.open.fetch_sub(1, Ordering::Relaxed);
        drop(slot);
    }
}

/// A connection past the cap: each request on it answered with an overload
/// error in its protocol, then closed.
async fn refuse_connection<I>(
    io: I,
    builder: Arc<auto::Builder<TokioExecutor>>,
    refuse: Refuse,
    slot: OwnedSemaphorePermit,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let (parts, _) = request.into_parts();
        let mut response = refuse(&parts, Refusal::Connections);
        response.headers_mut().insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
        std::future::ready(Ok::<_, std::convert::Infallible>(response))
    });
    let _ = builder.serve_connection(io, service).await;
    drop(slot);
}

/// One connection's service: the shared router, behind the in-flight cap,
/// with each response body holding what marks its request active.
#[derive(Clone)]
struct ConnService {
    router: LiveRouter,
    state: Arc<ConnState>,
    in_flight: Arc<Semaphore>,
    settings: Settings,
    peer: Option<Peer>,
    client: Option<ClientName>,
}

/// Who a certificate names: its subject's common name (the first one),
/// when it has one that is text, and its whole subject.
fn client_name(der: &[u8]) -> Option<ClientName> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    let name = certificate.subject().iter_common_name().next()?.as_str().ok()?;
    Some(ClientName { common_name: Arc::from(name), subject: Arc::from(subject_text(certificate.subject())) })
}

/// A subject as text, every attribute in order (`CN=a,O=b`, several in
/// one RDN joined by `+`), with the characters that separate them escaped
/// (`\,`) and a value that is not text as `#` and its hex: two subjects
/// are one text only when they are one subject.
fn subject_text(subject: &x509_parser::x509::X509Name<'_>) -> String {
    use std::fmt::Write;
    let registry = x509_parser::objects::oid_registry();
    let mut text = String::new();
    for (index, rdn) in subject.iter().enumerate() {
        if index > 0 {
            text.push(',');
        }
        for (at, attribute) in rdn.iter().enumerate() {
            if at > 0 {
                text.push('+');
            }
            let kind = attribute.attr_type();
            match x509_parser::objects::oid2abbrev(kind, registry) {
                Ok(abbreviation) => text.push_str(abbreviation),
                Err(_) => text.push_str(&kind.to_id_string()),
            }
            text.push('=');
            match attribute.as_str() {
                Ok(value) => {
                    for (i, c) in value.chars().enumerate() {
                        if matches!(c, ',' | '+' | '=' | '\\' | '"' | '<' | '>' | ';') || (i == 0 && c == '#') {
                            text.push('\\');
                        }
                        text.push(c);
                    }
                }
                Err(_) => {
                    text.push('#');
                    for byte in attribute.as_slice() {
                        let _ = write!(text, "{byte:02x}");
                    }
                }
            }
        }
    }
    text
}

impl hyper::service::Service<Request<Incoming>> for ConnService {
    type Response = Response<Guarded>;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Guarded>, std::convert::Infallible>> + Send>>;

    fn call(&self, mut request: Request<Incoming>) -> Self::Future {
        let active = self.state.begin_request();
        let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
            self.settings.stats.refused_requests.fetch_add(1, Ordering::Relaxed);
            let (parts, _) = request.into_parts();
            let response = (self.settings.refuse)(&parts, Refusal::InFlight);
            return Box::pin(std::future::ready(Ok(response.map(|body| Guarded { body, _held: (active, None) }))));
        };
        // An HTTP/1 connection carries one request at a time: its budget only
        // binds when one body may be larger than the whole connection's.
        let limits = &self.settings.limits;
        if request.version() == http::Version::HTTP_2 || limits.body_limit > limits.max_connection_body {
            request.extensions_mut().insert(ConnBudget(self.state.clone()));
        }
        if let Some(peer) = self.peer {
            request.extensions_mut().insert(peer);
        }
        if let Some(client) = &self.client {
            request.extensions_mut().insert(client.clone());
        }
        let mut router = self.router.current();
        let state = self.state.clone();
        Box::pin(async move {
            let response = match router.call(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            // A socket upgraded (WebSocket): its session keeps its own
            // deadlines, and it holds no request's in-flight slot.
            if response.status() == http::StatusCode::SWITCHING_PROTOCOLS {
                state.upgraded();
                return Ok(response.map(|body| Guarded { body, _held: (active, None) }));
            }
            Ok(response.map(|body| Guarded { body, _held: (active, Some(permit)) }))
        })
    }
}

/// The connection a request arrived on, for its body budget.
#[derive(Clone)]
pub struct ConnBudget(pub Arc<ConnState>);

/// A response body that keeps its request active and its in-flight slot
/// taken until the body is finished or dropped.
pub struct Guarded {
    body: Body,
    _held: (ActiveRequest, Option<OwnedSemaphorePermit>),
}

impl http_body::Body for Guarded {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code: a failed unwrap is a failed test")]

    use super::*;

    /// A certificate's DER with `subject`.
    fn certificate(subject: &[(rcgen::DnType, &str)]) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (kind, value) in subject {
            params.distinguished_name.push(kind.clone(), *value);
        }
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn a_certificate_names_its_common_name_and_its_whole_subject() {
        use rcgen::DnType::{CommonName, OrganizationName};
        let team = client_name(&certificate(&[(CommonName, "batch"), (OrganizationName, "team-a")])).unwrap();
        assert_eq!((&*team.common_name, &*team.subject), ("batch", "CN=batch,O=team-a"));
        // A value holding what separates attributes is one value, never two.
        let forged = client_name(&certificate(&[(CommonName, "batch,O=team-a")])).unwrap();
        assert_eq!(&*forged.subject, "CN=batch\\,O\\=team-a");
        assert_ne!(forged.subject, team.subject);
        assert!(client_name(&certificate(&[(OrganizationName, "no common name")])).is_none());
    }
}
