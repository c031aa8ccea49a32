//! The HTTP client for URLs an operator configured: routing gates
//! (`module: webrequest`), the OTLP collector and request-log webhooks.
//! These URLs come from operator config only, never from a request. Every name is
//! resolved through a guard that refuses private, link-local, CGNAT and
//! metadata addresses (loopback only for `localhost`), so DNS cannot point
//! a hook inside the network; replies are read under a size cap and within
//! the hook's timeout.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request};
use http_body_util::Full;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use switchyard_config::is_public;
use switchyard_route::hook::MAX_REPLY_BYTES;

use crate::{collect_limited, CollectError};

/// Resolves host names, keeping only addresses a hook may reach.
#[derive(Clone, Default)]
pub struct GuardedResolver;

impl tower_service::Service<Name> for GuardedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let loopback_name = host.eq_ignore_ascii_case("localhost");
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|addr| if loopback_name { addr.ip().is_loopback() } else { is_public(addr.ip()) })
                .collect();
            if allowed.is_empty() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!("hook host `{host}` resolves only to addresses hooks may not reach"),
                ));
            }
            Ok(allowed.into_iter())
        })
    }
}

/// Why a hook call failed (its `on_error` applies).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// No reply within the hook's timeout.
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    /// Could not connect, or the connection failed.
    #[error("{0}")]
    Transport(String),
    /// A non-2xx status.
    #[error("answered {0}")]
    Status(u16),
    /// The reply was too large.
    #[error("reply larger than {MAX_REPLY_BYTES} bytes")]
    TooLarge,
}

/// Pooled client for hook sidecars.
#[derive(Clone)]
pub struct HookClient {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector<GuardedResolver>>, Full<Bytes>>,
}

impl HookClient {
    /// A client with the guarded resolver, `TCP_NODELAY` and rustls.
    pub fn new() -> HookClient {
        let mut http = HttpConnector::new_with_resolver(GuardedResolver);
        http.set_nodelay(true);
        http.enforce_http(false);
        http.set_connect_timeout(Some(Duration::from_secs(5)));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        HookClient { client: Client::builder(TokioExecutor::new()).build(https) }
    }

    /// POSTs a JSON `payload` to a hook at `url` and returns the reply body.
    pub async fn call(&self, url: &str, payload: Vec<u8>, timeout: Duration) -> Result<Bytes, HookError> {
        self.post(url, "application/json", Full::new(Bytes::from(payload)), timeout).await
    }

    /// POSTs `body` of `content_type` to `url` within `timeout`; a 2xx
    /// answer's body (at most the hook reply cap) comes back.
    pub async fn post(
        &self,
        url: &str,
        content_type: &'static str,
        body: Full<Bytes>,
        timeout: Duration,
    ) -> Result<Bytes, HookError> {
        self.post_with(url, content_type, body, Vec::new(), timeout).await
    }

    /// [`post`](Self::post) with `headers` too (a signed call's).
    pub async fn post_with(
        &self,
        url: &str,
        content_type: &'static str,
        body: Full<Bytes>,
        headers: Vec<(http::HeaderName, HeaderValue)>,
        timeout: Duration,
    ) -> Result<Bytes, HookError> {
        let mut request = Request::post(url)
            .header(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type))
            .header(
                http::header::USER_AGENT,
                HeaderValue::from_static(concat!("switchyard/", env!("CARGO_PKG_VERSION"))),
            )
            .body(body)
            .map_err(|err| HookError::Transport(err.to_string()))?;
        request.headers_mut().extend(headers);
        self.exchange(request, timeout).await
    }

    /// GETs `url` within `timeout`; a 2xx answer's body (at most the hook
    /// reply cap) comes back (a published document: a JWKS, an OpenID
    /// configuration).
    pub async fn get(&self, url: &str, timeout: Duration) -> Result<Bytes, HookError> {
        let request = Request::get(url)
            .header(http::header::ACCEPT, HeaderValue::from_static("application/json"))
            .header(
                http::header::USER_AGENT,
                HeaderValue::from_static(concat!("switchyard/", env!("CARGO_PKG_VERSION"))),
            )
            .body(Full::new(Bytes::new()))
            .map_err(|err| HookError::Transport(err.to_string()))?;
        self.exchange(request, timeout).await
    }

    /// [`get`](Self::get) with `headers` too (an admin key a report is
    /// read with).
    pub async fn get_with(
        &self,
        url: &str,
        headers: Vec<(http::HeaderName, HeaderValue)>,
        timeout: Duration,
    ) -> Result<Bytes, HookError> {
        let mut request = Request::get(url)
            .header(http::header::ACCEPT, HeaderValue::from_static("application/json"))
            .header(
                http::header::USER_AGENT,
                HeaderValue::from_static(concat!("switchyard/", env!("CARGO_PKG_VERSION"))),
            )
            .body(Full::new(Bytes::new()))
            .map_err(|err| HookError::Transport(err.to_string()))?;
        request.headers_mut().extend(headers);
        self.exchange(request, timeout).await
    }

    /// Sends `request` and returns the answer's head once it comes within
    /// `timeout`, its body unread (a reply streamed as events, as an MCP
    /// server's may be). Any status comes back.
    pub async fn send(
        &self,
        request: Request<Full<Bytes>>,
        timeout: Duration,
    ) -> Result<http::Response<hyper::body::Incoming>, HookError> {
        let response = tokio::time::timeout(timeout, self.client.request(request))
            .await
            .map_err(|_| HookError::Timeout(timeout))?;
        // "connect: …": the request never reached the server.
        response.map_err(|err| match err.is_connect() {
            true => HookError::Transport(format!("connect: {err}")),
            false => HookError::Transport(err.to_string()),
        })
    }

    /// Sends `request` and reads a 2xx answer's body (at most the hook
    /// reply cap), all within `timeout`.
    async fn exchange(&self, request: Request<Full<Bytes>>, timeout: Duration) -> Result<Bytes, HookError> {
        let exchange = async {
            let response = self.client.request(request).await.map_err(|err| HookError::Transport(err.to_string()))?;
            if !response.status().is_success() {
                return Err(HookError::Status(response.status().as_u16()));
            }
            collect_limited(response.into_body(), MAX_REPLY_BYTES).await.map_err(|err| match err {
                CollectError::TooLarge(_) => HookError::TooLarge,
                CollectError::Read(message) => HookError::Transport(message),
            })
        };
        tokio::time::timeout(timeout, exchange).await.map_err(|_| HookError::Timeout(timeout))?
    }
}

impl Default for HookClient {
    fn default() -> HookClient {
        HookClient::new()
    }
}
