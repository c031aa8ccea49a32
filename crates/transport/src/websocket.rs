//! The upstream WebSocket client a Realtime session dials its lane with:
//! `ws://` over TCP or `wss://` over rustls (webpki roots, as the HTTP
//! transport trusts), the lane's credential and headers on the handshake,
//! the connect and handshake bounded by the lane's `connect` and
//! `response_headers` timeouts, and the upstream's messages bounded in
//! size like the caller's. The URL is the operator's (the lane's
//! `base_url`), never the caller's.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::WebSocketStream;

use crate::TransportError;

/// A byte stream a socket runs over (TCP, or TLS over TCP).
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// An upstream socket.
pub type Upstream = WebSocketStream<Box<dyn Io>>;

/// The TLS client every upstream socket shares.
static TLS: LazyLock<Option<Arc<rustls::ClientConfig>>> = LazyLock::new(|| {
    let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Some(Arc::new(config))
});

/// Opens `url` (`ws://` or `wss://`) with `headers` on the handshake;
/// messages and frames from it larger than `max_message` are refused by
/// the transport (the session ends).
pub async fn connect(
    url: &str,
    headers: &[(HeaderName, HeaderValue)],
    connect_timeout: Duration,
    handshake_timeout: Duration,
    max_message: usize,
) -> Result<Upstream, TransportError> {
    let mut request =
        url.into_client_request().map_err(|err| TransportError::Connect(format!("bad upstream url: {err}")))?;
    let uri = request.uri().clone();
    let tls = match uri.scheme_str() {
        Some("wss") => true,
        Some("ws") => false,
        _ => return Err(TransportError::Connect("an upstream socket is ws:// or wss://".into())),
    };
    let host = uri.host().ok_or_else(|| TransportError::Connect("the upstream url has no host".into()))?;
    let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    for (name, value) in headers {
        request.headers_mut().insert(name.clone(), value.clone());
    }
    let tcp = tokio::time::timeout(connect_timeout, TcpStream::connect((host.as_str(), port)))
        .await
        .map_err(|_| TransportError::Connect(format!("no connection within {connect_timeout:?}")))?
        .map_err(|err| TransportError::Connect(err.to_string()))?;
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Io> = if tls {
        let config = TLS.clone().ok_or_else(|| TransportError::Connect("no TLS configuration".into()))?;
        let name = rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(|err| TransportError::Connect(format!("bad TLS name: {err}")))?;
        let connector = tokio_rustls::TlsConnector::from(config);
        let tls = tokio::time::timeout(connect_timeout, connector.connect(name, tcp))
            .await
            .map_err(|_| TransportError::Connect(format!("no TLS within {connect_timeout:?}")))?
            .map_err(|err| TransportError::Connect(err.to_string()))?;
        Box::new(tls)
    } else {
        Box::new(tcp)
    };
    let config = WebSocketConfig::default().max_message_size(Some(max_message)).max_frame_size(Some(max_message));
    let (socket, _) = tokio::time::timeout(
        handshake_timeout,
        tokio_tungstenite::client_async_with_config(request, stream, Some(config)),
    )
    .await
    .map_err(|_| TransportError::HeadersTimeout(handshake_timeout))?
    .map_err(|err| match err {
        tokio_tungstenite::tungstenite::Error::Http(response) => {
            TransportError::Io(format!("upstream refused the socket: {}", response.status()))
        }
        other => TransportError::Io(other.to_string()),
    })?;
    Ok(socket)
}
