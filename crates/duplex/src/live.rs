//! Gemini Live relayed and governed: `GET
//! /ws/google.ai.generativelanguage.{v1beta,v1alpha}.GenerativeService.BidiGenerateContent`
//! with a WebSocket upgrade, as google-genai's `client.aio.live.connect()`
//! opens it.
//!
//! The handshake authenticates the caller as Gemini's HTTP routes do
//! (`x-goog-api-key`, or `?key=`), or by an ephemeral token the gateway
//! minted (`token`: `Authorization: Token auth_tokens/…`, as google-genai
//! sends it to `BidiGenerateContentConstrained`, or `?access_token=`),
//! and takes the socket's place
//! (`duplex.sessions_per_key`, `duplex.max_sessions`); refusals there are
//! HTTP errors in Gemini's shape. The caller's first message is `setup`:
//! its model names a pool of lanes with `operation: live` the key may use,
//! and the gateway dials the first member that answers (`upstream`: the
//! lane's own Live socket with the lane's credential, or the `mock://`
//! fake), passing `setup` on with the lane's wire model.
//!
//! Then messages pass both ways, as they came but for what the gateway
//! must govern (`message` reads them whole):
//! - every generation is admitted on the key's chain before what asks for
//!   it goes upstream: a `clientContent` that completes its turn, a
//!   `toolResponse`, and realtime input (audio, video, text: the first of
//!   each turn; the server answers it when its activity detection says
//!   so). A turn the server starts unasked is admitted when it starts.
//!   Each is settled once from its turn's `usageMetadata` (text, audio and
//!   cached tokens by modality) on one ledger row of operation `live`;
//! - guardrails (`screen`) screen the caller's text and the model's text
//!   and transcripts;
//! - Live has no error message, so whatever the gateway refuses ends the
//!   session with a close frame whose reason says why, as Google's own
//!   server does: 1008 (policy) with `RESOURCE_EXHAUSTED: …` for a spent
//!   budget or a limit, `PERMISSION_DENIED: …`, `NOT_FOUND: …`, or the
//!   policy and rule that blocked a message; 1007 for a message that
//!   cannot be read whole; 1009 for one past `duplex.max_message`.
//!   google-genai raises it from `receive()` as `APIError` with that code
//!   and reason. What was settled before stays settled. A message from the
//!   upstream that cannot be read is dropped and the session goes on.
//!
//! The socket ends when either side closes it, at `duplex.max_duration`,
//! when idle for `duplex.idle_timeout`, or when the gateway stops (a
//! `goAway` first; open turns finish within `duplex.drain`); each open
//! generation is settled once, whichever way it ends.

pub(crate) mod message;
mod screen;
pub mod token;

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;

use axum::extract::ws::{WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Request, State};
use axum::response::Response;
use switchyard_engine::settle::Estimated;
use switchyard_ir::{ErrorInfo, ErrorKind, Operation, Protocol, Usage};
use switchyard_state::governance::Caller;
use switchyard_state::Gateway;

use crate::door::{self, Opened};
use crate::generation::{self, Generation, Place};
use crate::socket::{close, Incoming, Outbox, Socket};
use crate::upstream::{Binary, Dial, Said, Upstream};
use message::Client;

const PROTOCOL: Protocol = Protocol::Gemini;

/// Base64 characters of 16 kHz PCM16 audio an admission counts as one
/// prompt token (Gemini bills 32 a second; this counts 64, so the hold
/// leans high).
const AUDIO_B64_PER_TOKEN: usize = 667;

/// The close code of a message that cannot be read (RFC 6455: "invalid
/// frame payload data"; Google's server closes so on a malformed message).
const INVALID: u16 = 1007;

/// The close code of a refusal (RFC 6455: "policy violation").
const POLICY: u16 = 1008;

/// `GET /ws/…v1beta.GenerativeService.BidiGenerateContent` (and
/// `…Constrained`, where google-genai sends an ephemeral token).
pub async fn connect_v1beta(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    connect(gateway, request, "v1beta").await
}

/// `GET /ws/…v1alpha.GenerativeService.BidiGenerateContent` (and `…Constrained`).
pub async fn connect_v1alpha(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    connect(gateway, request, "v1alpha").await
}

/// How a session's caller is read again for each generation.
enum Who {
    /// The handshake's own credential.
    Handshake,
    /// An ephemeral token's key, by id, and the model it is bound to.
    Token { key_id: String, model: Option<String> },
}

/// A session, or why not.
async fn connect(gateway: Arc<Gateway>, request: Request, version: &'static str) -> Response {
    let (mut parts, _) = request.into_parts();
    let Ok(upgrade) = WebSocketUpgrade::from_request_parts(&mut parts, &()).await else {
        let info = ErrorInfo::new(
            ErrorKind::InvalidRequest,
            "BidiGenerateContent is a WebSocket: send `Upgrade: websocket` (google-genai's `client.aio.live.connect()`)",
        )
        .with_status(426);
        return door::refuse(&gateway, PROTOCOL, &parts.headers, info);
    };
    let opened = who(&gateway, &parts)
        .and_then(|(who, caller)| Ok((door::open_as(&gateway, "live", caller.as_ref(), &parts)?, who, caller)));
    match opened {
        Ok((opened, who, caller)) => crate::socket::configure(upgrade, &gateway)
            .on_upgrade(move |ws| Box::pin(run(gateway, who, caller, opened, version, ws))),
        Err(info) => door::refuse(&gateway, PROTOCOL, &parts.headers, info),
    }
}

/// Who opens the socket: an ephemeral token's key, else the handshake's
/// key as the HTTP routes read it.
fn who(gateway: &Gateway, parts: &http::request::Parts) -> Result<(Who, Option<Caller>), ErrorInfo> {
    let Some(presented) = token::presented(parts) else {
        let client = parts.extensions.get::<switchyard_state::ClientName>();
        let caller =
            switchyard_engine::authenticate::caller(gateway, PROTOCOL, &parts.uri, &parts.headers, client, &[])?;
        return Ok((Who::Handshake, caller));
    };
    let grant = gateway
        .client_secrets
        .redeem(&presented, switchyard_state::clock::now_ms())
        .map_err(|why| ErrorInfo::new(ErrorKind::Authentication, why.to_string()))?;
    let caller = match &gateway.governance {
        None => None,
        // Minted on a gateway that took no key: it names none to bill.
        Some(_) if grant.key_id.is_empty() => {
            return Err(ErrorInfo::new(ErrorKind::Authentication, "this token names no key"));
        }
        Some(governance) => Some(governance.caller_by_key_id(&grant.key_id)?),
    };
    Ok((Who::Token { key_id: grant.key_id, model: grant.model }, caller))
}

/// Why a session ends.
enum End {
    /// The caller is gone.
    CallerGone,
    /// The upstream is gone (why).
    UpstreamGone(String),
    /// The gateway closes it with a code and reason; `drain`: open turns
    /// finish first (within `duplex.drain`).
    Close { code: u16, reason: String, drain: bool },
    /// The gateway stops: a `goAway`, the drain, then 1001.
    Stopping,
}

impl End {
    fn close(code: u16, reason: impl Into<String>) -> End {
        End::Close { code, reason: reason.into(), drain: false }
    }

    /// A refusal: 1008, its reason led by the status Google would name.
    fn refused(info: &ErrorInfo) -> End {
        End::close(POLICY, format!("{}: {}", status(info.kind), info.message))
    }
}

/// The google.rpc status a refusal of `kind` is named by.
fn status(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::QuotaExceeded | ErrorKind::RateLimit => "RESOURCE_EXHAUSTED",
        ErrorKind::PermissionDenied => "PERMISSION_DENIED",
        ErrorKind::Authentication => "UNAUTHENTICATED",
        ErrorKind::NotFound => "NOT_FOUND",
        ErrorKind::InvalidRequest | ErrorKind::RequestTooLarge | ErrorKind::ContextLength => "INVALID_ARGUMENT",
        ErrorKind::Overloaded | ErrorKind::Unavailable => "UNAVAILABLE",
        ErrorKind::Timeout => "DEADLINE_EXCEEDED",
        ErrorKind::Internal => "INTERNAL",
    }
}

/// The next caller message as text, or why there is none.
fn read(incoming: Incoming, max_message: u64) -> Result<String, End> {
    match incoming {
        Incoming::Text(text) => Ok(text.as_str().to_owned()),
        // Live's JSON may come as binary frames.
        Incoming::Binary(bytes) => {
            String::from_utf8(bytes.to_vec()).map_err(|_| End::close(INVALID, "a binary message must be UTF-8 JSON"))
        }
        Incoming::TooLarge(size) => Err(End::close(
            close::TOO_BIG,
            format!("the message is {size} bytes; the most is {max_message} (duplex.max_message)"),
        )),
        Incoming::FarTooLarge => Err(End::close(close::TOO_BIG, "message too big (duplex.max_message)")),
        Incoming::Closed => Err(End::CallerGone),
        Incoming::Idle => {
            Err(End::Close { code: close::NORMAL, reason: "idle (duplex.idle_timeout)".into(), drain: true })
        }
        Incoming::Expired => Err(End::Close {
            code: close::NORMAL,
            reason: "session length limit (duplex.max_duration)".into(),
            drain: true,
        }),
        Incoming::Stopping => Err(End::Stopping),
    }
}

/// A turn the upstream is answering.
struct Turn {
    generation: Generation,
    /// The latest usage it reported.
    usage: Option<Usage>,
    /// It stopped (a tool call, an interruption): settled at its
    /// `turnComplete`, or when the next turn starts.
    ended: bool,
    interrupted: bool,
}

/// A running session's state.
struct Live {
    place: Place,
    who: Who,
    opened: Opened,
    out: Outbox,
    screen: Option<screen::Screening>,
    /// Generations admitted and asked for (a completed `clientContent`, a
    /// `toolResponse`), not yet answered, in order.
    waiting: VecDeque<Generation>,
    /// The generation admitted for realtime input, not yet answered.
    listening: Option<Generation>,
    running: Option<Turn>,
    /// Prompt tokens the conversation holds, as estimated for admission.
    context: u64,
    /// The session's output bound (`setup`'s `maxOutputTokens`).
    max_output: Option<u64>,
}

async fn run(
    gateway: Arc<Gateway>,
    who: Who,
    caller: Option<Caller>,
    opened: Opened,
    version: &'static str,
    ws: WebSocket,
) {
    let mut socket = Socket::new(&gateway, ws);
    let out = socket.outbox();
    let max_message = gateway.config.duplex.max_message;
    let (mut live, mut upstream) = match Box::pin(start(&gateway, who, caller, opened, version, &mut socket)).await {
        Ok(started) => started,
        Err(End::Close { code, reason, .. }) => return out.close(code, &reason).await,
        Err(End::UpstreamGone(why)) => return out.close(close::INTERNAL, &why).await,
        Err(End::Stopping) => return out.close(close::GOING_AWAY, "the gateway is stopping").await,
        Err(End::CallerGone) => return,
    };
    let end = loop {
        let busy = live.running.is_some() || !live.waiting.is_empty();
        tokio::select! {
            said = upstream.next() => match said {
                Said::Text(text) => {
                    if let Err(end) = live.on_upstream(text).await {
                        break end;
                    }
                }
                Said::Gone(why) => break End::UpstreamGone(why),
            },
            incoming = socket.next(busy) => {
                let text = match read(incoming, max_message) {
                    Ok(text) => text,
                    Err(end) => break end,
                };
                if let Err(end) = live.on_caller(&mut upstream, &text).await {
                    break end;
                }
            }
        }
    };
    live.finish(end, upstream).await;
}

/// The session's start: its `setup` read, its pool and lane chosen, the
/// upstream dialled and set up.
async fn start(
    gateway: &Arc<Gateway>,
    who: Who,
    caller: Option<Caller>,
    opened: Opened,
    version: &'static str,
    socket: &mut Socket,
) -> Result<(Live, Upstream), End> {
    let first = read(socket.next(false).await, gateway.config.duplex.max_message)?;
    let read_setup = message::read_client(&first).map_err(|info| End::close(INVALID, info.message))?;
    let Client::Setup { model, max_output_tokens } = read_setup else {
        return Err(End::close(INVALID, "the first message is `setup`"));
    };
    if let Who::Token { model: Some(bound), .. } = &who {
        if *bound != model {
            let message = format!("this token opens sessions of `{bound}`, not `{model}`");
            return Err(End::refused(&ErrorInfo::new(ErrorKind::PermissionDenied, message)));
        }
    }
    let pool = generation::pool_serving(gateway, &model, Operation::Live).map_err(|info| End::refused(&info))?;
    if let Some(caller) = caller.as_ref().filter(|c| !c.key.record.may_use(&model)) {
        let message = format!("API key {} may not use `{model}`", caller.key.record.prefix);
        return Err(End::refused(&ErrorInfo::new(ErrorKind::PermissionDenied, message)));
    }
    let mut screen = crate::screen::of(gateway, caller.as_ref(), pool).map(screen::Screening::new);
    let mut setup = Cow::Borrowed(first.as_str());
    if let Some(screen) = &mut screen {
        match screen.request(&setup) {
            Ok(None) => {}
            Ok(Some(masked)) => setup = masked.into(),
            Err(info) => return Err(End::refused(&info)),
        }
    }
    let max_upstream = usize::try_from(gateway.config.duplex.max_message).unwrap_or(usize::MAX).saturating_mul(2);
    let codec = gateway.codec_for(Operation::Live, PROTOCOL);
    let dial = Dial {
        path: format!("/ws/google.ai.generativelanguage.{version}.GenerativeService.BidiGenerateContent"),
        fake: |_| {
            let (fake, said) = switchyard_transport::mock_live::FakeLive::open();
            (Box::new(fake), said)
        },
        binary: Binary::Json,
    };
    let mut failed = None;
    for (member, &lane) in gateway.pools[pool].members.iter().enumerate() {
        let state = &gateway.lanes[lane];
        match Upstream::open(state, codec, &dial, max_upstream, gateway.config.server.write_timeout).await {
            Ok(mut upstream) => {
                let Some(named) = message::with_model(&setup, &state.wire_model) else {
                    return Err(End::close(INVALID, "`setup` must be an object"));
                };
                if !upstream.send(named).await {
                    return Err(End::UpstreamGone("the upstream session failed at setup".into()));
                }
                let headers = opened.headers.clone();
                let place = Place {
                    gateway: gateway.clone(),
                    protocol: PROTOCOL,
                    operation: Operation::Live,
                    name: model,
                    pool,
                    member,
                    lane,
                    headers,
                };
                let live = Live {
                    place,
                    who,
                    opened,
                    out: socket.outbox(),
                    screen,
                    waiting: VecDeque::new(),
                    listening: None,
                    running: None,
                    // The instructions the model reads first.
                    context: (first.len() as u64).div_ceil(4),
                    max_output: max_output_tokens,
                };
                return Ok((live, upstream));
            }
            Err(err) => {
                tracing::warn!(lane = %state.name, error = %err, "a live lane did not open a session");
                failed = Some(format!("lane `{}`: {err}", state.name));
            }
        }
    }
    Err(End::UpstreamGone(format!("UNAVAILABLE: no lane of `{model}` opened ({})", failed.unwrap_or_default())))
}

/// Where an admitted generation waits for its answer.
enum Asks {
    /// A completed turn or a tool response: answered in order.
    Turn,
    /// Realtime input: answered when the server hears the turn's end.
    Listening,
}

impl Live {
    /// One client message: checked, its generation admitted, screened,
    /// passed on.
    async fn on_caller(&mut self, upstream: &mut Upstream, text: &str) -> Result<(), End> {
        let client = message::read_client(text).map_err(|info| End::close(INVALID, info.message))?;
        let asks = match client {
            Client::Setup { .. } => return Err(End::close(INVALID, "`setup` is sent once, first")),
            Client::Content { turn_complete } => {
                self.context += (text.len() as u64).div_ceil(4);
                turn_complete.then_some(Asks::Turn)
            }
            Client::ToolResponse => {
                self.context += (text.len() as u64).div_ceil(4);
                Some(Asks::Turn)
            }
            Client::Realtime { media_b64, speaks } => {
                let media = media_b64.div_ceil(AUDIO_B64_PER_TOKEN);
                let rest = text.len().saturating_sub(media_b64).div_ceil(4);
                self.context += media.saturating_add(rest) as u64;
                (speaks && self.listening.is_none()).then_some(Asks::Listening)
            }
        };
        let mut text = Cow::Borrowed(text);
        if let Some(screen) = &mut self.screen {
            match screen.request(&text) {
                Ok(None) => {}
                Ok(Some(masked)) => text = masked.into(),
                Err(info) => return Err(End::refused(&info)),
            }
        }
        if let Some(asks) = asks {
            let caller = self.caller().map_err(|info| End::refused(&info))?;
            let generation = generation::admit(&self.place, caller, self.context, self.max_output)
                .await
                .map_err(|info| End::refused(&info))?;
            self.opened.turn();
            match asks {
                Asks::Turn => self.waiting.push_back(generation),
                Asks::Listening => self.listening = Some(generation),
            }
        }
        if upstream.send(text.into_owned()).await {
            Ok(())
        } else {
            Err(End::UpstreamGone("the upstream session failed".into()))
        }
    }

    /// One server message: its turn started, tracked or settled, its text
    /// screened, then passed on.
    async fn on_upstream(&mut self, text: String) -> Result<(), End> {
        let Some(server) = message::read_server(&text) else {
            // Nothing the gateway can read whole: not passed on.
            tracing::debug!("a live upstream sent a message that cannot be read");
            return Ok(());
        };
        if server.content {
            if self.running.as_ref().is_some_and(|turn| turn.ended) {
                self.settle_running().await;
            }
            if self.running.is_none() {
                let generation = match self.waiting.pop_front().or_else(|| self.listening.take()) {
                    Some(generation) => generation,
                    None => self.unasked().await?,
                };
                self.running = Some(Turn { generation, usage: None, ended: false, interrupted: false });
            }
        }
        let usage = server.usage;
        if let Some(turn) = &mut self.running {
            if usage.is_some() {
                turn.usage = usage;
            }
            turn.generation.first_byte();
            turn.generation.delivered = turn.generation.delivered.saturating_add(server.delivered);
            turn.ended |= server.tool_call || server.interrupted;
            turn.interrupted |= server.interrupted;
        }
        if server.turn_complete {
            if self.running.is_some() {
                self.settle_running().await;
            } else if let (Some(usage), Some(generation)) = (usage, self.waiting.pop_front()) {
                // A turn answered with nothing but its end.
                self.context = usage.input_tokens.saturating_add(usage.output_tokens);
                generation.done(Some(usage), true).await;
            }
        }
        let texts = match &mut self.screen {
            Some(screen) => screen.response(text).map_err(|info| End::refused(&info))?,
            None => vec![text],
        };
        for text in texts {
            if !self.out.text(text).await {
                return Err(End::CallerGone);
            }
        }
        Ok(())
    }

    /// A turn the upstream started that nothing asked for (proactive
    /// audio): admitted now. Refused, the session ends and what the turn
    /// did is billed at the prompt as estimated.
    async fn unasked(&mut self) -> Result<Generation, End> {
        let caller = self.caller().map_err(|info| End::refused(&info))?;
        match generation::admit(&self.place, caller, self.context, self.max_output).await {
            Ok(generation) => {
                self.opened.turn();
                Ok(generation)
            }
            Err(info) => {
                let caller = self.caller().ok().flatten();
                generation::unheld(&self.place, caller, self.context).cut(Estimated::CallerLeft, 499);
                Err(End::refused(&info))
            }
        }
    }

    /// Settles the running turn from its latest usage.
    async fn settle_running(&mut self) {
        if let Some(turn) = self.running.take() {
            if let Some(usage) = &turn.usage {
                // The next prompt holds this one and its answer.
                self.context = usage.input_tokens.saturating_add(usage.output_tokens);
            }
            turn.generation.done(turn.usage, !turn.interrupted).await;
        }
    }

    /// The caller of the next generation, read again now (a key revoked
    /// since the handshake is refused).
    fn caller(&self) -> Result<Option<Caller>, ErrorInfo> {
        let gateway = self.place.gateway.serving();
        match (&self.who, &gateway.governance) {
            (Who::Handshake, _) => door::again(&gateway, PROTOCOL, &self.opened),
            (Who::Token { key_id, .. }, Some(governance)) => governance.caller_by_key_id(key_id).map(Some),
            (Who::Token { .. }, None) => Ok(None),
        }
    }

    /// Ends the session as `end` says, settling every open generation once.
    async fn finish(mut self, end: End, mut upstream: Upstream) {
        match end {
            End::CallerGone => {
                self.cut_all(Estimated::CallerLeft, 499);
                upstream.close().await;
            }
            End::UpstreamGone(why) => {
                self.cut_all(Estimated::AnswerBroken, 502);
                self.out.close(close::INTERNAL, &why).await;
            }
            End::Close { code, reason, drain } => {
                if drain {
                    self.drain(&mut upstream).await;
                }
                self.cut_all(Estimated::CallerLeft, 499);
                self.out.close(code, &reason).await;
                upstream.close().await;
            }
            End::Stopping => {
                let drain = self.place.gateway.config.duplex.drain;
                let away = serde_json::json!({ "goAway": { "timeLeft": format!("{:.3}s", drain.as_secs_f64()) } });
                self.out.text(away.to_string()).await;
                self.drain(&mut upstream).await;
                self.cut_all(Estimated::CallerLeft, 499);
                self.out.close(close::GOING_AWAY, "the gateway is stopping").await;
                upstream.close().await;
            }
        }
    }

    /// Open turns finish, within `duplex.drain`, their messages still
    /// passed on; no caller message is read.
    async fn drain(&mut self, upstream: &mut Upstream) {
        let drain = self.place.gateway.config.duplex.drain;
        let _ = tokio::time::timeout(drain, async {
            while self.running.is_some() || !self.waiting.is_empty() {
                match upstream.next().await {
                    Said::Text(text) => {
                        if self.on_upstream(text).await.is_err() {
                            return;
                        }
                    }
                    Said::Gone(_) => return,
                }
            }
        })
        .await;
    }

    /// Settles every open generation once, cut short.
    fn cut_all(&mut self, why: Estimated, status: u16) {
        // Never answered: nothing to bill.
        for generation in self.waiting.drain(..).chain(self.listening.take()) {
            generation.unanswered();
        }
        if let Some(turn) = self.running.take() {
            turn.generation.cut(why, status);
        }
    }
}
