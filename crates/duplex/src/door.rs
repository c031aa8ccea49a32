//! What a socket passes before it is upgraded: the caller's key, read as
//! the HTTP route of its protocol reads it (`engine::authenticate`), and a
//! place among the key's and the instance's open sockets
//! (`duplex.sessions_per_key`, `duplex.max_sessions`). A refusal is the
//! protocol's own HTTP error, so an SDK reads it as it reads any other.

use std::sync::Arc;

use axum::body::Body;
use axum::http::request::Parts;
use axum::response::Response;
use http::{HeaderMap, HeaderValue};
use switchyard_engine::settle::Record;
use switchyard_ir::{ErrorInfo, ErrorKind, Protocol};
use switchyard_state::governance::Caller;
use switchyard_state::sockets::{Full, Held};
use switchyard_state::Gateway;

/// A socket that may open.
pub(crate) struct Opened {
    /// The handshake's path and query, and its verified client
    /// certificate's name: with `headers`, what each turn is
    /// authenticated by again.
    pub(crate) uri: http::Uri,
    pub(crate) client: Option<switchyard_state::ClientName>,
    /// Its place among the open sockets, given back when it closes (and
    /// its line in the admin API's list of open sockets).
    held: Held,
    /// The handshake's headers, but those of the upgrade itself: what each
    /// generation's call carries (sessions, end users, forwarded headers).
    pub(crate) headers: HeaderMap,
}

/// Authenticates the handshake of a `protocol` socket and takes its place.
pub(crate) fn open(gateway: &Gateway, protocol: Protocol, parts: &Parts) -> Result<Opened, ErrorInfo> {
    let client = parts.extensions.get::<switchyard_state::ClientName>();
    let caller = switchyard_engine::authenticate::caller(gateway, protocol, &parts.uri, &parts.headers, client, &[])?;
    let kind = match protocol {
        Protocol::Responses => "responses",
        _ => "socket",
    };
    open_as(gateway, kind, caller.as_ref(), parts)
}

/// Takes the place of a `kind` socket of `caller` (authenticated by its
/// route: a Realtime socket may come with a client secret).
pub(crate) fn open_as(
    gateway: &Gateway,
    kind: &'static str,
    caller: Option<&Caller>,
    parts: &Parts,
) -> Result<Opened, ErrorInfo> {
    let client = parts.extensions.get::<switchyard_state::ClientName>();
    let key = caller.map(|caller| &*caller.key.id);
    let bounds = &gateway.config.duplex;
    let now = switchyard_state::clock::now_ms();
    let held = gateway.sockets.open_as(kind, key, bounds.sessions_per_key, bounds.max_sessions, now).map_err(
        |full| match full {
            Full::Key(_) => ErrorInfo::new(ErrorKind::RateLimit, full.to_string()),
            Full::Instance | Full::Stopping => ErrorInfo::new(ErrorKind::Overloaded, full.to_string()).with_status(503),
        },
    )?;
    let mut headers = parts.headers.clone();
    for upgrade in [
        http::header::UPGRADE,
        http::header::CONNECTION,
        http::header::SEC_WEBSOCKET_KEY,
        http::header::SEC_WEBSOCKET_VERSION,
        http::header::SEC_WEBSOCKET_EXTENSIONS,
        http::header::SEC_WEBSOCKET_PROTOCOL,
    ] {
        headers.remove(upgrade);
    }
    Ok(Opened { uri: parts.uri.clone(), client: client.cloned(), held, headers })
}

impl Opened {
    /// A turn starts on this socket (counted in the list of open sockets).
    pub(crate) fn turn(&self) {
        self.held.turn(switchyard_state::clock::now_ms());
    }
}

/// Who calls a turn: the handshake's credential read again on `gateway`
/// (the one serving now), so a key revoked or changed since the socket
/// opened is refused or seen as it is now.
pub(crate) fn again(gateway: &Gateway, protocol: Protocol, opened: &Opened) -> Result<Option<Caller>, ErrorInfo> {
    switchyard_engine::authenticate::caller(
        gateway,
        protocol,
        &opened.uri,
        &opened.headers,
        opened.client.as_ref(),
        &[],
    )
}

/// An error before the upgrade, in `protocol`'s HTTP shape, recorded as
/// the HTTP route records a refusal at its door.
pub(crate) fn refuse(gateway: &Arc<Gateway>, protocol: Protocol, headers: &HeaderMap, info: ErrorInfo) -> Response {
    let request_id = request_id();
    let mut response = switchyard_engine::render_error(gateway.codec(protocol), &info).map(Body::new);
    if matches!(info.kind, ErrorKind::RateLimit | ErrorKind::Overloaded) {
        response.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response.headers_mut().insert("x-request-id", request_id.clone());
    let mut record = Record::begin(gateway, protocol, request_id, headers);
    record.refused_with(None, info.kind);
    record.finish_detached(response.status().as_u16());
    response
}

/// A turn refused before the engine ran, recorded as the HTTP route
/// records a refusal at its door; the error, for the turn's error event.
pub(crate) fn refused_turn(
    gateway: &Arc<Gateway>,
    protocol: Protocol,
    headers: &HeaderMap,
    info: ErrorInfo,
) -> ErrorInfo {
    let mut record = Record::begin(gateway, protocol, request_id(), headers);
    record.refused_with(None, info.kind);
    record.finish_detached(info.status);
    info
}

/// A request id: 32 hex digits.
pub(crate) fn request_id() -> HeaderValue {
    HeaderValue::from_str(&random_hex(32)).unwrap_or(HeaderValue::from_static("unknown"))
}

/// `digits` random hex digits.
pub(crate) fn random_hex(digits: usize) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    (0..digits).map(|_| char::from(HEX[fastrand::usize(..16)])).collect()
}

/// A plain GET where a socket is opened: the route's wrong-method answer
/// (405, `allow: POST`, in `protocol`'s shape, as every ingress route
/// answers a GET), naming the upgrade that opens a socket.
pub(crate) fn not_an_upgrade(gateway: &Gateway, protocol: Protocol, path: &str) -> Response {
    let info = ErrorInfo::new(
        ErrorKind::InvalidRequest,
        format!("{path} takes POST, not GET (a GET opens a WebSocket: send `Upgrade: websocket`)"),
    )
    .with_status(405);
    let mut response = switchyard_engine::render_error(gateway.codec(protocol), &info).map(Body::new);
    *response.status_mut() = http::StatusCode::METHOD_NOT_ALLOWED;
    response.headers_mut().insert(http::header::ALLOW, HeaderValue::from_static("POST"));
    response
}
