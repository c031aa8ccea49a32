//! A duplex session's upstream: the lane's own socket (`wss://` to the
//! lane's `base_url` and the session's path: a Realtime lane's
//! `/v1/realtime?model={wire model}` on the same base as the provider's
//! chat lanes, `https://api.openai.com` or Azure's
//! `https://<resource>.openai.azure.com/openai`; a Live lane's
//! `/ws/google.ai.generativelanguage.{version}.GenerativeService.BidiGenerateContent`
//! on `https://generativelanguage.googleapis.com`), dialled with the
//! lane's credential and headers, never the caller's; or, for a `mock://`
//! lane, the session's in-process fake. Either way: JSON messages in and
//! out, in order.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use futures_util::{SinkExt, StreamExt};
use http::{HeaderName, HeaderValue};
use switchyard_codec::Outbound;
use switchyard_config::Endpoint;
use switchyard_state::Lane;
use switchyard_transport::mock_session::FakeSession;
use switchyard_transport::websocket::Upstream as Socket;
use switchyard_transport::TransportError;
use tokio_tungstenite::tungstenite::Message;

/// An open upstream session.
pub(crate) enum Upstream {
    /// The in-process fake, and what it said not yet read.
    Fake { fake: Box<dyn FakeSession>, said: VecDeque<String> },
    /// The lane's socket.
    Socket { socket: Box<Socket>, write_timeout: Duration, binary: Binary },
}

/// What the upstream said next.
pub(crate) enum Said {
    Text(String),
    /// It closed, failed, or sent what its protocol never sends.
    Gone(String),
}

/// What a binary message from the upstream is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Binary {
    /// Nothing its protocol sends (Realtime): the session is over.
    Gone,
    /// A JSON message as UTF-8 bytes (Gemini Live sends its messages so);
    /// one that is not UTF-8 is dropped.
    Json,
}

/// A fake session on a lane, and what it opens with.
pub(crate) type Fake = (Box<dyn FakeSession>, Vec<String>);

/// How a session's upstream is reached.
pub(crate) struct Dial {
    /// The path and query after the lane's base.
    pub(crate) path: String,
    /// The fake a `mock://` lane serves, and what it opens with.
    pub(crate) fake: fn(&Lane) -> Fake,
    pub(crate) binary: Binary,
}

impl Upstream {
    /// Opens a session on `lane`, messages from it bounded by `max_message`.
    pub(crate) async fn open(
        lane: &Lane,
        codec: &dyn switchyard_codec::Codec,
        dial: &Dial,
        max_message: usize,
        write_timeout: Duration,
    ) -> Result<Upstream, TransportError> {
        let base = match &lane.endpoint {
            Endpoint::Mock => {
                let (fake, said) = (dial.fake)(lane);
                return Ok(Upstream::Fake { fake, said: said.into() });
            }
            Endpoint::Http(base) => base,
        };
        let http_url = format!("{base}{}", dial.path);
        let url = match http_url.split_once("://") {
            Some(("https", rest)) => format!("wss://{rest}"),
            Some(("http", rest)) => format!("ws://{rest}"),
            _ => return Err(TransportError::Connect("the lane's base_url is not http(s)".into())),
        };
        let headers = headers(lane, codec, &http_url).await?;
        let socket = switchyard_transport::websocket::connect(
            &url,
            &headers,
            lane.timeouts.connect,
            lane.timeouts.response_headers,
            max_message,
        )
        .await?;
        Ok(Upstream::Socket { socket: Box::new(socket), write_timeout, binary: dial.binary })
    }

    /// Sends a client event; false when the upstream is gone.
    pub(crate) async fn send(&mut self, text: String) -> bool {
        match self {
            Upstream::Fake { fake, said } => {
                said.extend(fake.on_client(&text));
                true
            }
            Upstream::Socket { socket, write_timeout, .. } => {
                matches!(tokio::time::timeout(*write_timeout, socket.send(Message::text(text))).await, Ok(Ok(())))
            }
        }
    }

    /// The next server event. Cancel-safe.
    pub(crate) async fn next(&mut self) -> Said {
        match self {
            Upstream::Fake { said, .. } => match said.pop_front() {
                Some(text) => Said::Text(text),
                // The fake says nothing unasked.
                None => std::future::pending().await,
            },
            Upstream::Socket { socket, binary, .. } => loop {
                match socket.next().await {
                    Some(Ok(Message::Text(text))) => return Said::Text(text.to_string()),
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                    Some(Ok(Message::Binary(bytes))) => match binary {
                        Binary::Gone => return Said::Gone("the upstream sent a binary message".into()),
                        Binary::Json => match String::from_utf8(bytes.to_vec()) {
                            Ok(text) => return Said::Text(text),
                            // A bad frame from a healthy session: dropped, not fatal.
                            Err(_) => tracing::debug!("a live upstream sent a binary message that is not UTF-8"),
                        },
                    },
                    Some(Ok(Message::Close(frame))) => {
                        let why = frame.map_or_else(
                            || "the upstream closed the session".into(),
                            |f| format!("the upstream closed the session ({}: {})", u16::from(f.code), f.reason),
                        );
                        return Said::Gone(why);
                    }
                    Some(Err(err)) => return Said::Gone(format!("the upstream session failed: {err}")),
                    None => return Said::Gone("the upstream closed the session".into()),
                }
            },
        }
    }

    /// Closes it (bounded by the write timeout).
    pub(crate) async fn close(self) {
        if let Upstream::Socket { mut socket, write_timeout, .. } = self {
            let _ = tokio::time::timeout(write_timeout, SinkExt::close(&mut *socket)).await;
        }
    }
}

/// The handshake's headers: the operator's, then the lane's credential
/// (a static one, the codec's scheme over its key, or a fetched token).
async fn headers(
    lane: &Lane,
    codec: &dyn switchyard_codec::Codec,
    url: &str,
) -> Result<Vec<(HeaderName, HeaderValue)>, TransportError> {
    let mut headers: Vec<(HeaderName, HeaderValue)> = lane.extra_headers.clone();
    match &lane.static_auth {
        Some(auth) => headers.extend(auth.iter().cloned()),
        None => {
            let signing = Outbound { method: "GET", url, body: &[], time: SystemTime::now() };
            let auth = codec
                .auth_headers(&lane.credentials, &signing)
                .map_err(|err| TransportError::Connect(format!("signing failed: {err}")))?;
            headers.extend(auth);
        }
    }
    if let Some(token) = &lane.token {
        let bearer = Box::pin(token.bearer()).await.map_err(|err| TransportError::Connect(err.to_string()))?;
        headers.retain(|(name, _)| name != http::header::AUTHORIZATION);
        headers.push((http::header::AUTHORIZATION, bearer));
    }
    Ok(headers)
}
