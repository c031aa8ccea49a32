//! OpenAI's Realtime API relayed and governed: `GET /v1/realtime?model=`
//! with a WebSocket upgrade, and `POST /v1/realtime/client_secrets` (the
//! gateway's own short-lived secret for a browser, `secret`).
//!
//! The handshake authenticates the caller (its key as a bearer, or a
//! client secret as a bearer or in the browser's
//! `openai-insecure-api-key.` subprotocol), resolves `model` to a pool of
//! lanes with `operation: realtime` the key may use, takes the socket's
//! place (`duplex.sessions_per_key`, `duplex.max_sessions`) and opens the
//! upstream session on the pool's first member that answers
//! (`upstream`: the lane's own socket and credential, or the `mock://`
//! fake). Refusals there are HTTP errors in OpenAI's shape.
//!
//! Then events pass both ways, as they came but for what the gateway must
//! govern (`event` reads them whole):
//! - every `response.create` is a generation (`generation`): admitted on
//!   the key's chain before it is passed on — a spent budget or a limit
//!   refuses that generation with an `error` event and the socket goes on
//!   — and settled once from its `response.done` usage on one ledger row.
//!   A generation the upstream starts itself (server VAD) is admitted when
//!   it starts, and cancelled upstream when refused;
//! - a `session.update` may not move the session to another model;
//! - guardrails (`screen`) screen the text a client event carries and the
//!   text and transcripts the model writes (held back until whole);
//! - a bad event (not JSON, an unknown type, too large, binary) gets an
//!   `error` event naming it, and the socket lives on.
//!
//! The socket ends when either side closes it, at `duplex.max_duration`,
//! when idle for `duplex.idle_timeout`, or when the gateway stops (its
//! open generations finish first, within `duplex.drain`); each open
//! generation is settled once, whichever way it ends.

pub(crate) mod event;
mod screen;
pub mod secret;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use axum::extract::ws::{WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Request, State};
use axum::response::Response;
use http::request::Parts;
use http::{HeaderMap, HeaderValue};
use switchyard_engine::settle::Estimated;
use switchyard_ir::{ErrorInfo, ErrorKind, Operation, Protocol};
use switchyard_state::governance::Caller;
use switchyard_state::Gateway;

use crate::door::{self, Opened};
use crate::generation::{self, Generation, Place};
use crate::socket::{self, close, Incoming, Outbox, Socket};
use crate::upstream::{self, Binary, Dial, Said, Upstream};
use event::Client;

const PROTOCOL: Protocol = Protocol::OpenAi;

/// The subprotocol a browser names its credential in.
const KEY_PROTOCOL: &str = "openai-insecure-api-key.";

/// Base64 characters of 24 kHz PCM16 audio an admission counts as one
/// prompt token (OpenAI bills about ten a second; this counts twenty, so
/// the hold leans high).
const AUDIO_B64_PER_TOKEN: u64 = 3_200;

/// `GET /v1/realtime`: a session, or why not.
pub async fn connect(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let (mut parts, _) = request.into_parts();
    let Ok(upgrade) = WebSocketUpgrade::from_request_parts(&mut parts, &()).await else {
        let info = ErrorInfo::new(
            ErrorKind::InvalidRequest,
            "/v1/realtime is a WebSocket: send `Upgrade: websocket` (the SDKs' `client.realtime.connect()`)",
        )
        .with_status(426);
        return door::refuse(&gateway, PROTOCOL, &parts.headers, info);
    };
    // Boxed: the handshake's future is large, and only this route pays.
    match Box::pin(handshake(&gateway, &parts)).await {
        Ok(session) => socket::configure(upgrade, &gateway)
            .protocols(["realtime"])
            .on_upgrade(move |ws| Box::pin(run(session, ws))),
        Err(info) => door::refuse(&gateway, PROTOCOL, &parts.headers, info),
    }
}

/// How a socket's caller is read again for each generation.
enum Who {
    /// No keys on this gateway.
    Open,
    /// The handshake's key (its headers, the credential put where the
    /// key reader looks).
    Key(HeaderMap),
    /// A client secret's key, by id.
    Secret(String),
}

/// A session ready to run.
struct Session {
    place: Place,
    who: Who,
    opened: Opened,
    upstream: Upstream,
    screen: Option<screen::Screening>,
    /// The lane's wire model (a `session.update` naming the pool is
    /// passed on naming it).
    wire_model: Arc<str>,
}

/// The handshake: the caller, its model's pool, its place, the upstream.
async fn handshake(gateway: &Arc<Gateway>, parts: &Parts) -> Result<Session, ErrorInfo> {
    let (credential, from_protocol) = credential(&parts.headers);
    let model = query_model(parts.uri.query());
    let mut headers = parts.headers.clone();
    let (who, caller, model) = match (&gateway.governance, credential) {
        (None, _) => (Who::Open, None, model),
        (Some(governance), Some(secret)) if secret.starts_with(switchyard_state::client_secrets::PREFIX) => {
            let grant = gateway
                .client_secrets
                .redeem(&secret, switchyard_state::clock::now_ms())
                .map_err(|why| ErrorInfo::new(ErrorKind::Authentication, why.to_string()))?;
            // Minted on a gateway that took no key: it opens as the mint did.
            if grant.key_id.is_empty() {
                return Err(ErrorInfo::new(ErrorKind::Authentication, "this client secret names no key"));
            }
            let caller = governance.caller_by_key_id(&grant.key_id)?;
            let model = match (model, grant.model) {
                (Some(asked), Some(bound)) if asked != bound => {
                    let message = format!("this client secret opens sessions of `{bound}`, not `{asked}`");
                    return Err(ErrorInfo::new(ErrorKind::PermissionDenied, message));
                }
                (asked, bound) => asked.or(bound),
            };
            (Who::Secret(grant.key_id), Some(caller), model)
        }
        (Some(_), credential) => {
            // A key named in the subprotocol is read as a bearer.
            if let (Some(key), true) = (credential, from_protocol) {
                let bearer = HeaderValue::try_from(format!("Bearer {key}"))
                    .map_err(|_| ErrorInfo::new(ErrorKind::Authentication, "invalid API key"))?;
                headers.insert(http::header::AUTHORIZATION, bearer);
            }
            let client = parts.extensions.get::<switchyard_state::ClientName>();
            let caller = switchyard_engine::authenticate::caller(gateway, PROTOCOL, &parts.uri, &headers, client, &[])?;
            (Who::Key(headers.clone()), caller, model)
        }
    };
    let Some(name) = model.filter(|m| !m.is_empty()) else {
        let mut info =
            ErrorInfo::new(ErrorKind::InvalidRequest, "`model` is required: /v1/realtime?model=<model or pool>");
        info.param = Some("model".into());
        return Err(info);
    };
    let pool = generation::pool_serving(gateway, &name, Operation::Realtime)?;
    if let Some(caller) = caller.as_ref().filter(|c| !c.key.record.may_use(&name)) {
        let message = format!("API key {} may not use `{name}`", caller.key.record.prefix);
        return Err(ErrorInfo::new(ErrorKind::PermissionDenied, message));
    }
    let screen = screen::Screening::of(gateway, caller.as_ref(), pool);
    let opened = door::open_as(gateway, "realtime", caller.as_ref(), parts)?;
    let max_message = usize::try_from(gateway.config.duplex.max_message).unwrap_or(usize::MAX).saturating_mul(2);
    let codec = gateway.codec_for(Operation::Realtime, PROTOCOL);
    let mut failed = None;
    for (member, &lane) in gateway.pools[pool].members.iter().enumerate() {
        let state = &gateway.lanes[lane];
        let dial = Dial {
            path: format!("/v1/realtime?model={}", switchyard_codec::path_segment(&state.wire_model)),
            fake: |lane| {
                let (fake, said) = switchyard_transport::mock_realtime::FakeRealtime::open(&lane.wire_model);
                (Box::new(fake), said)
            },
            binary: Binary::Gone,
        };
        match upstream::Upstream::open(state, codec, &dial, max_message, gateway.config.server.write_timeout).await {
            Ok(upstream) => {
                let place = Place {
                    gateway: gateway.clone(),
                    protocol: PROTOCOL,
                    operation: Operation::Realtime,
                    name,
                    pool,
                    member,
                    lane,
                    headers: opened.headers.clone(),
                };
                let wire_model = state.wire_model.clone();
                return Ok(Session { place, who, opened, upstream, screen, wire_model });
            }
            Err(err) => {
                tracing::warn!(lane = %state.name, error = %err, "a realtime lane did not open a session");
                failed = Some(format!("lane `{}`: {err}", state.name));
            }
        }
    }
    let message = format!("no lane of `{name}` opened a realtime session ({})", failed.unwrap_or_default());
    Err(ErrorInfo::new(ErrorKind::Unavailable, message).with_status(502))
}

/// The credential a handshake carries: a bearer, else a browser's
/// subprotocol (`true`).
fn credential(headers: &HeaderMap) -> (Option<String>, bool) {
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(|v| v.trim().to_owned());
    if bearer.is_some() {
        return (bearer, false);
    }
    let named = headers
        .get_all(http::header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .find_map(|p| p.trim().strip_prefix(KEY_PROTOCOL).map(str::to_owned));
    (named, true)
}

/// `?model=` of a handshake's query.
fn query_model(query: Option<&str>) -> Option<String> {
    form_urlencoded::parse(query?.as_bytes()).find(|(name, _)| name == "model").map(|(_, value)| value.into_owned())
}

/// A running session's state.
struct Live {
    place: Place,
    who: Who,
    opened: Opened,
    out: Outbox,
    screen: Option<screen::Screening>,
    wire_model: Arc<str>,
    /// Generations admitted and passed on, not yet started upstream, by
    /// the `event_id` they were sent with.
    waiting: VecDeque<(String, Generation)>,
    /// Generations started, by response id.
    running: HashMap<String, Generation>,
    /// Responses the upstream started that the caller's chain refused:
    /// cancelled, their events not passed on.
    silenced: HashMap<String, Generation>,
    /// Prompt tokens the conversation holds, as estimated for admission.
    context: u64,
    /// The session's output bound (`session.update`'s `max_output_tokens`).
    max_output: Option<u64>,
}

/// Why a session ends.
enum End {
    /// The caller is gone.
    CallerGone,
    /// The upstream is gone (why).
    UpstreamGone(String),
    /// The gateway ends it: a close code and reason.
    Gateway(u16, &'static str),
}

async fn run(session: Session, ws: WebSocket) {
    let Session { place, who, opened, mut upstream, screen, wire_model } = session;
    let gateway = place.gateway.clone();
    let mut socket = Socket::new(&gateway, ws);
    let mut live = Live {
        place,
        who,
        opened,
        out: socket.outbox(),
        screen,
        wire_model,
        waiting: VecDeque::new(),
        running: HashMap::new(),
        silenced: HashMap::new(),
        context: 0,
        max_output: None,
    };
    let end = loop {
        let busy = !live.waiting.is_empty() || !live.running.is_empty();
        tokio::select! {
            said = upstream.next() => match said {
                Said::Text(text) => {
                    if !live.on_upstream_event(&mut upstream, text).await {
                        break End::CallerGone;
                    }
                }
                Said::Gone(why) => break End::UpstreamGone(why),
            },
            incoming = socket.next(busy) => {
                let text = match incoming {
                    Incoming::Text(text) => text,
                    Incoming::Binary(_) => {
                        let info = ErrorInfo::new(ErrorKind::InvalidRequest, "send events as JSON text, not binary");
                        live.error(&info, None).await;
                        continue;
                    }
                    Incoming::TooLarge(size) => {
                        let most = gateway.config.duplex.max_message;
                        let info = ErrorInfo::new(
                            ErrorKind::RequestTooLarge,
                            format!("the event is {size} bytes; the most is {most} (duplex.max_message)"),
                        );
                        live.error(&info, None).await;
                        continue;
                    }
                    Incoming::FarTooLarge => break End::Gateway(close::TOO_BIG, "message too big (duplex.max_message)"),
                    Incoming::Closed => break End::CallerGone,
                    Incoming::Idle => break End::Gateway(close::NORMAL, "idle (duplex.idle_timeout)"),
                    Incoming::Expired => break End::Gateway(close::NORMAL, "session length limit (duplex.max_duration)"),
                    Incoming::Stopping => break End::Gateway(close::GOING_AWAY, "the gateway is stopping"),
                };
                if !live.on_caller_event(&mut upstream, text.as_str()).await {
                    break End::UpstreamGone("the upstream session failed".into());
                }
            }
        }
    };
    match end {
        End::CallerGone => {
            live.cut_all(Estimated::CallerLeft, 499);
            upstream.close().await;
        }
        End::UpstreamGone(why) => {
            live.cut_all(Estimated::AnswerBroken, 502);
            let info = ErrorInfo::new(ErrorKind::Unavailable, why).with_status(502);
            live.error(&info, None).await;
            live.out.close(close::INTERNAL, "the upstream session ended").await;
        }
        End::Gateway(code, reason) => {
            // Open generations finish (within `duplex.drain`), their
            // events still passed on; no new event is read.
            let drain = gateway.config.duplex.drain;
            let _ = tokio::time::timeout(drain, async {
                while !live.waiting.is_empty() || !live.running.is_empty() {
                    match upstream.next().await {
                        Said::Text(text) => {
                            if !live.on_upstream_event(&mut upstream, text).await {
                                return;
                            }
                        }
                        Said::Gone(_) => return,
                    }
                }
            })
            .await;
            live.cut_all(Estimated::CallerLeft, 499);
            if code == close::NORMAL && reason.starts_with("session length") {
                let mut info = ErrorInfo::new(
                    ErrorKind::InvalidRequest,
                    "the session reached its longest life (duplex.max_duration); open a new one to go on",
                );
                info.code = Some("session_expired".into());
                live.error(&info, None).await;
            }
            live.out.close(code, reason).await;
            upstream.close().await;
        }
    }
}

impl Live {
    /// One client event: checked, admitted when it is a generation,
    /// screened, passed on. False when the upstream is gone.
    async fn on_caller_event(&mut self, upstream: &mut Upstream, text: &str) -> bool {
        let (event, event_id) = match event::read_client(text) {
            Ok(read) => read,
            Err((info, event_id)) => {
                self.error(&info, event_id.as_deref()).await;
                return true;
            }
        };
        let mut text = std::borrow::Cow::Borrowed(text);
        match &event {
            Client::SessionUpdate { model, max_output_tokens } => {
                if let Some(model) = model {
                    if *model != self.place.name && **model != *self.wire_model {
                        let mut info = ErrorInfo::new(
                            ErrorKind::InvalidRequest,
                            format!("this session runs on `{}`; open another socket for `{model}`", self.place.name),
                        );
                        info.param = Some("session.model".into());
                        self.error(&info, event_id.as_deref()).await;
                        return true;
                    }
                    match event::with_model(&text, &self.wire_model) {
                        Some(named) => text = named.into(),
                        None => return true,
                    }
                }
                self.max_output = *max_output_tokens;
            }
            Client::Item => self.context += (text.len() as u64).div_ceil(4),
            Client::Audio { base64_len } => self.context += (*base64_len as u64).div_ceil(AUDIO_B64_PER_TOKEN),
            Client::Create { .. } | Client::Other => {}
        }
        // Text the model will read is screened first.
        if let Some(screen) = &mut self.screen {
            if matches!(event, Client::Item | Client::SessionUpdate { .. } | Client::Create { .. }) {
                match screen.request(&text) {
                    Ok(None) => {}
                    Ok(Some(masked)) => text = masked.into(),
                    Err(info) => {
                        self.error(&info, event_id.as_deref()).await;
                        return true;
                    }
                }
            }
        }
        if let Client::Create { max_output_tokens } = event {
            let caller = match self.caller() {
                Ok(caller) => caller,
                Err(info) => {
                    self.error(&info, event_id.as_deref()).await;
                    return true;
                }
            };
            let bound = max_output_tokens.or(self.max_output);
            let generation = match generation::admit(&self.place, caller, self.context, bound).await {
                Ok(generation) => generation,
                Err(info) => {
                    self.error(&info, event_id.as_deref()).await;
                    return true;
                }
            };
            self.opened.turn();
            // Sent under an id of the gateway's, so the upstream's error
            // about it finds its admission.
            let id = format!("event_sy{}", crate::door::random_hex(20));
            let Some(sent) = event::with_event_id(&text, &id) else { return true };
            self.waiting.push_back((id, generation));
            return upstream.send(sent).await;
        }
        upstream.send(text.into_owned()).await
    }

    /// One server event: its generation admitted, tracked or settled,
    /// its text screened, then passed on. False when the caller is gone.
    async fn on_upstream_event(&mut self, upstream: &mut Upstream, text: String) -> bool {
        let Some(server) = event::read_server(&text) else {
            // Not an event: nothing a caller's SDK could read.
            tracing::debug!("a realtime upstream sent what is not an event");
            return true;
        };
        let response = server.response_id.clone();
        // A silenced response's events never reach the caller (its
        // `response.done` included, which ends its silence).
        let silenced = |live: &Live| response.as_ref().is_some_and(|id| live.silenced.contains_key(id));
        let was_silenced = silenced(self);
        match server.kind.as_str() {
            "response.created" => {
                if let Some(id) = response.clone() {
                    self.started(upstream, id).await;
                }
            }
            "response.done" => {
                if let Some(id) = &response {
                    if let Some(generation) = self.running.remove(id).or_else(|| self.silenced.remove(id)) {
                        if let Some(usage) = &server.usage {
                            // The next prompt holds this one and its answer.
                            self.context = usage.input_tokens.saturating_add(usage.output_tokens);
                        }
                        let completed = server.status.as_deref() == Some("completed");
                        generation.done(server.usage, completed).await;
                    }
                }
            }
            "error" => {
                // The upstream refused a generation before it started.
                if let Some(at) = server.error_for.as_deref() {
                    if let Some(index) = self.waiting.iter().position(|(id, _)| id == at) {
                        if let Some((_, generation)) = self.waiting.remove(index) {
                            generation.refused_upstream();
                        }
                    }
                }
            }
            _ => {}
        }
        if was_silenced || silenced(self) {
            return true;
        }
        if let Some(id) = &response {
            if let Some(generation) = self.running.get_mut(id) {
                generation.first_byte();
                if let (Some(piece), true) = (&server.text, server.kind.ends_with(".delta")) {
                    generation.delivered = generation.delivered.saturating_add(piece.len() as u64);
                }
            }
        }
        let texts = match &mut self.screen {
            Some(screen) => screen.response(&server, text),
            None => vec![text],
        };
        for text in texts {
            if !self.out.text(text).await {
                return false;
            }
        }
        true
    }

    /// A response started upstream: the generation admitted for it, or
    /// (one the upstream started itself) admitted now, and cancelled
    /// upstream when refused.
    async fn started(&mut self, upstream: &mut Upstream, id: String) {
        if let Some((_, generation)) = self.waiting.pop_front() {
            self.running.insert(id, generation);
            return;
        }
        let admitted = match self.caller() {
            Ok(caller) => generation::admit(&self.place, caller, self.context, self.max_output).await,
            Err(info) => Err(info),
        };
        match admitted {
            Ok(generation) => {
                self.opened.turn();
                self.running.insert(id, generation);
            }
            Err(info) => {
                let cancel = serde_json::json!({ "type": "response.cancel", "response_id": id }).to_string();
                upstream.send(cancel).await;
                self.error(&info, None).await;
                // What it did before the cancel landed is still billed:
                // admitted without a hold, settled from its usage.
                let caller = self.caller().ok().flatten();
                self.silenced.insert(id, generation::unheld(&self.place, caller, self.context));
            }
        }
    }

    /// The caller of the next generation, read again now (a key revoked
    /// since the handshake is refused).
    fn caller(&self) -> Result<Option<Caller>, ErrorInfo> {
        let gateway = self.place.gateway.serving();
        match &self.who {
            Who::Open => Ok(None),
            Who::Key(headers) => {
                let client = self.opened.client.as_ref();
                switchyard_engine::authenticate::caller(&gateway, PROTOCOL, &self.opened.uri, headers, client, &[])
            }
            Who::Secret(key_id) => match &gateway.governance {
                Some(governance) => governance.caller_by_key_id(key_id).map(Some),
                None => Ok(None),
            },
        }
    }

    /// Settles every open generation once, cut short.
    fn cut_all(&mut self, why: Estimated, status: u16) {
        for (_, generation) in self.waiting.drain(..) {
            // Never started upstream: nothing to bill.
            generation.refused_upstream();
        }
        for (_, generation) in self.running.drain().chain(self.silenced.drain()) {
            generation.cut(why, status);
        }
    }

    /// Sends the `error` event for `info`, answering `event_id`.
    async fn error(&self, info: &ErrorInfo, event_id: Option<&str>) -> bool {
        self.out.text(event::error_event(info, event_id)).await
    }
}
