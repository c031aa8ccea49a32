//! Upstream transports behind one small trait: real HTTP(S) with pooled
//! keep-alive connections over rustls (HTTP/1.1 and HTTP/2 by ALPN,
//! `TCP_NODELAY`); in [`hooks`], the SSRF-guarded client for URLs an
//! operator configured; in [`token`], credentials fetched from a token
//! endpoint; and, in [`mock`], the in-process vendor fake (and its
//! duplex sessions' fakes: [`mock_realtime`], [`mock_live`]).

pub mod hooks;
pub mod mock;
pub mod mock_a2a;
pub mod mock_live;
pub mod mock_mcp;
pub mod mock_operation;
pub mod mock_realtime;
pub mod mock_rules;
pub mod mock_session;
pub mod token;
pub mod websocket;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, Uri};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// Boxed error for bodies and transports.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A response body streamed from upstream.
pub type UpstreamBody = UnsyncBoxBody<Bytes, BoxError>;

/// A request ready to send.
#[derive(Debug)]
pub struct UpstreamRequest {
    /// Full URL.
    pub uri: Uri,
    /// Headers, auth included.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

/// A request of the raw route (`/passthrough/{provider}/...`): any method,
/// and a body that streams as the caller sends it.
pub struct RawRequest {
    /// The method.
    pub method: Method,
    /// Full URL.
    pub uri: Uri,
    /// Headers, auth included.
    pub headers: HeaderMap,
    /// The body, as it arrives.
    pub body: UpstreamBody,
}

/// The upstream's answer, body still streaming.
pub struct UpstreamResponse {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Body.
    pub body: UpstreamBody,
}

/// Why no response arrived.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// Could not connect (refused, DNS, TLS).
    #[error("connection to upstream failed: {0}")]
    Connect(String),
    /// No response headers within the timeout.
    #[error("upstream sent no response headers within {0:?}")]
    HeadersTimeout(Duration),
    /// The connection broke mid-exchange.
    #[error("upstream connection failed: {0}")]
    Io(String),
}

/// Future of a transport call.
pub type SendFuture = Pin<Box<dyn Future<Output = Result<UpstreamResponse, TransportError>> + Send>>;

/// Sends a request upstream.
pub trait Transport: Send + Sync {
    /// Sends `request`, failing if response headers take longer than `headers_timeout`.
    fn send(&self, request: UpstreamRequest, headers_timeout: Duration) -> SendFuture;

    /// Sends a raw-route request, its body streamed, failing if response
    /// headers take longer than `headers_timeout`. A transport that cannot
    /// refuses it.
    fn send_raw(&self, request: RawRequest, headers_timeout: Duration) -> SendFuture {
        let _ = (request, headers_timeout);
        Box::pin(async { Err(TransportError::Connect("this transport sends no raw-route requests".to_owned())) })
    }
}

/// Pooled HTTP(S) client.
pub struct HttpTransport {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// The raw route's client: its bodies stream. A pool of its own, so
    /// the request path's client keeps its one-buffer body type.
    raw: Client<hyper_rustls::HttpsConnector<HttpConnector>, UpstreamBody>,
}

impl HttpTransport {
    /// A client with keep-alive pooling, `TCP_NODELAY` and rustls (webpki
    /// roots), connecting within 10 seconds.
    pub fn new() -> HttpTransport {
        HttpTransport::with_connect_timeout(Duration::from_secs(10))
    }

    /// The same, with its own connect timeout (TCP plus TLS).
    pub fn with_connect_timeout(connect: Duration) -> HttpTransport {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.enforce_http(false);
        http.set_connect_timeout(Some(connect));
        http.set_keepalive(Some(Duration::from_secs(60)));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_all_versions()
            .wrap_connector(http);
        let mut builder = Client::builder(TokioExecutor::new());
        builder.pool_idle_timeout(Duration::from_secs(90)).pool_max_idle_per_host(1024);
        let raw = builder.build(https.clone());
        let client = builder.build(https);
        HttpTransport { client, raw }
    }
}

impl Default for HttpTransport {
    fn default() -> HttpTransport {
        HttpTransport::new()
    }
}

impl Transport for HttpTransport {
    fn send(&self, request: UpstreamRequest, headers_timeout: Duration) -> SendFuture {
        let mut builder = Request::builder().method(Method::POST).uri(request.uri);
        if let Some(headers) = builder.headers_mut() {
            *headers = request.headers;
        }
        let built = builder.body(Full::new(request.body));
        let client = self.client.clone();
        Box::pin(async move {
            let request = built.map_err(|err| TransportError::Connect(err.to_string()))?;
            answer(tokio::time::timeout(headers_timeout, client.request(request)).await, headers_timeout)
        })
    }

    fn send_raw(&self, request: RawRequest, headers_timeout: Duration) -> SendFuture {
        let mut builder = Request::builder().method(request.method).uri(request.uri);
        if let Some(headers) = builder.headers_mut() {
            *headers = request.headers;
        }
        let built = builder.body(request.body);
        let client = self.raw.clone();
        Box::pin(async move {
            let request = built.map_err(|err| TransportError::Connect(err.to_string()))?;
            answer(tokio::time::timeout(headers_timeout, client.request(request)).await, headers_timeout)
        })
    }
}

/// The upstream's head, or why none came within `headers_timeout`.
fn answer(
    sent: Result<
        Result<http::Response<hyper::body::Incoming>, hyper_util::client::legacy::Error>,
        tokio::time::error::Elapsed,
    >,
    headers_timeout: Duration,
) -> Result<UpstreamResponse, TransportError> {
    let response = match sent {
        Err(_) => return Err(TransportError::HeadersTimeout(headers_timeout)),
        Ok(Err(err)) if err.is_connect() => return Err(TransportError::Connect(error_chain(&err))),
        Ok(Err(err)) => return Err(TransportError::Io(error_chain(&err))),
        Ok(Ok(response)) => response,
    };
    let (parts, body) = response.into_parts();
    Ok(UpstreamResponse {
        status: parts.status,
        headers: parts.headers,
        body: body.map_err(|err| -> BoxError { Box::new(err) }).boxed_unsync(),
    })
}

/// The error and its sources on one line (hyper's top-level message alone
/// says little).
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        out.push_str(": ");
        out.push_str(&inner.to_string());
        source = inner.source();
    }
    out
}

/// A body of one complete buffer.
pub fn full_body(bytes: impl Into<Bytes>) -> UpstreamBody {
    Full::new(bytes.into()).map_err(|never| match never {}).boxed_unsync()
}

/// A body yielding `chunks` one by one (each becomes its own frame).
pub fn chunked_body(chunks: Vec<Bytes>) -> UpstreamBody {
    let frames = futures_util::stream::iter(chunks.into_iter().map(|c| Ok::<_, BoxError>(http_body::Frame::data(c))));
    http_body_util::StreamBody::new(frames).boxed_unsync()
}

/// Why a body could not be read whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CollectError {
    /// It is longer than the limit.
    #[error("body is larger than {0} bytes")]
    TooLarge(usize),
    /// The connection failed while reading it.
    #[error("{0}")]
    Read(String),
}

/// Reads a body whole, refusing more than `limit` bytes.
pub async fn collect_limited<B>(body: B, limit: usize) -> Result<Bytes, CollectError>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut body = body;
    let mut first: Option<Bytes> = None;
    let mut rest: Vec<u8> = Vec::new();
    // A body that says its length (`content-length`) is gathered into one
    // buffer of that size: no regrowth copies a large reply again.
    let expected = body.size_hint().exact().and_then(|n| usize::try_from(n).ok()).filter(|&n| n <= limit);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|err| CollectError::Read(err.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let so_far = first.as_ref().map_or(0, Bytes::len) + rest.len();
        if so_far + data.len() > limit {
            return Err(CollectError::TooLarge(limit));
        }
        // One frame (the common case) is returned without a copy.
        match &first {
            None => first = Some(data),
            Some(head) => {
                if rest.is_empty() {
                    rest.reserve_exact(expected.unwrap_or(0).max(head.len() + data.len()));
                    rest.extend_from_slice(head);
                }
                rest.extend_from_slice(&data);
            }
        }
    }
    Ok(if rest.is_empty() { first.unwrap_or_default() } else { Bytes::from(rest) })
}
