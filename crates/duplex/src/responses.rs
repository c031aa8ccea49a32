//! The Responses API over WebSocket (`GET /v1/responses` with an upgrade,
//! Codex's first choice and `client.responses.connect()` in the SDKs).
//! The handshake is authenticated as `POST /v1/responses` is; then each
//! `response.create` is one Responses request (`turn`): through the pool
//! its `model` names, to a lane of any protocol, admitted, filtered,
//! settled and logged like an HTTP request, its stream written back as the
//! socket's events. Each turn runs on the config serving when it starts
//! (a reload does not end the socket). Turns of one `stream_id` (or none)
//! run in order, one after another; turns of different ones run side by
//! side (at most [`MAX_LANES`] lanes). A turn that fails answers an
//! `error` event and the socket goes on; an event the socket does not
//! take is named in one. The socket ends when the caller closes it, at
//! `duplex.max_duration` (with Codex's `websocket_connection_limit_reached`,
//! which it answers by reconnecting), when idle, or when the process stops
//! (after its turns finish, within `duplex.drain`).

mod conversations;
pub(crate) mod event;
mod turn;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::extract::ws::{WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Request, State};
use axum::response::Response;
use switchyard_ir::{ErrorInfo, ErrorKind, Protocol};
use switchyard_state::Gateway;
use tokio::task::JoinSet;

use crate::door::{self, Opened};
use crate::socket::{self, close, Incoming, Outbox, Socket};
use conversations::Conversations;
use event::Kind;

const PROTOCOL: Protocol = Protocol::Responses;

/// The most `stream_id` lanes one socket runs at once.
pub const MAX_LANES: usize = 8;

/// The most turns waiting behind a lane's running one; past it a turn is
/// refused with an error event.
const LANE_QUEUE: usize = 16;

/// OpenAI's code for a socket past its life (Codex reconnects on it).
const LIMIT_REACHED: &str = "websocket_connection_limit_reached";

/// `GET /v1/responses`: a socket, or the route's 405 for a plain GET.
pub async fn connect(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let (mut parts, _) = request.into_parts();
    let Ok(upgrade) = WebSocketUpgrade::from_request_parts(&mut parts, &()).await else {
        return door::not_an_upgrade(&gateway, PROTOCOL, "/v1/responses");
    };
    let opened = match door::open(&gateway, PROTOCOL, &parts) {
        Ok(opened) => opened,
        Err(info) => return door::refuse(&gateway, PROTOCOL, &parts.headers, info),
    };
    socket::configure(upgrade, &gateway).on_upgrade(move |ws| session(gateway, opened, ws))
}

/// What every turn of a socket shares.
pub(crate) struct Shared {
    /// The gateway the socket opened on (each turn runs on the one
    /// serving when it starts: [`Gateway::serving`]).
    pub(crate) gateway: Arc<Gateway>,
    pub(crate) opened: Opened,
    pub(crate) out: Outbox,
    pub(crate) conversations: Mutex<Conversations>,
}

/// The turns of a socket: one running per `stream_id` lane, the rest
/// waiting behind it in order.
#[derive(Default)]
struct Lanes {
    /// Lanes with a turn running, and the turns waiting on each.
    waiting: HashMap<Option<String>, VecDeque<event::Create>>,
    /// The running turns, by task.
    running: JoinSet<()>,
    /// Which lane each running task is.
    lane_of: HashMap<tokio::task::Id, Option<String>>,
}

impl Lanes {
    /// Runs `create` now or after the turns of its lane; the error to
    /// answer when the socket holds its most.
    fn take(&mut self, shared: &Arc<Shared>, create: event::Create) -> Result<(), ErrorInfo> {
        let lane = create.stream_id.clone();
        if let Some(waiting) = self.waiting.get_mut(&lane) {
            if waiting.len() >= LANE_QUEUE {
                return Err(ErrorInfo::new(
                    ErrorKind::RateLimit,
                    format!("{LANE_QUEUE} turns already wait on this stream_id; wait for one to finish"),
                ));
            }
            waiting.push_back(create);
            return Ok(());
        }
        if self.waiting.len() >= MAX_LANES {
            return Err(ErrorInfo::new(
                ErrorKind::RateLimit,
                format!("this socket runs {MAX_LANES} stream_id lanes at once; wait for one to finish"),
            ));
        }
        self.waiting.insert(lane.clone(), VecDeque::new());
        self.start(shared, lane, create);
        Ok(())
    }

    fn start(&mut self, shared: &Arc<Shared>, lane: Option<String>, create: event::Create) {
        shared.opened.turn();
        let shared = shared.clone();
        let task = self.running.spawn(async move { turn::run(&shared, create).await });
        self.lane_of.insert(task.id(), lane);
    }

    /// Waits for a running turn to end and starts the next of its lane;
    /// `None` when none runs.
    async fn one_ended(&mut self, shared: &Arc<Shared>) -> Option<()> {
        let ended = self.running.join_next_with_id().await?;
        let id = match ended {
            Ok((id, ())) => id,
            Err(err) => err.id(),
        };
        if let Some(lane) = self.lane_of.remove(&id) {
            match self.waiting.get_mut(&lane).and_then(VecDeque::pop_front) {
                Some(next) => self.start(shared, lane, next),
                None => {
                    self.waiting.remove(&lane);
                }
            }
        }
        Some(())
    }
}

/// One socket's session, from the upgrade to its close.
async fn session(gateway: Arc<Gateway>, opened: Opened, ws: WebSocket) {
    let mut socket = Socket::new(&gateway, ws);
    let max_bytes = usize::try_from(gateway.config.kept.responses.max_bytes).unwrap_or(usize::MAX);
    let shared = Arc::new(Shared {
        gateway: gateway.clone(),
        opened,
        out: socket.outbox(),
        conversations: Mutex::new(Conversations::new(max_bytes.saturating_mul(2))),
    });
    let mut lanes = Lanes::default();
    // Why the socket ends, when the gateway ends it.
    let ending = loop {
        let busy = !lanes.running.is_empty();
        let incoming = tokio::select! {
            Some(()) = lanes.one_ended(&shared), if busy => continue,
            incoming = socket.next(busy) => incoming,
        };
        let text = match incoming {
            Incoming::Text(text) => text,
            Incoming::Binary(_) => {
                let info = ErrorInfo::new(ErrorKind::InvalidRequest, "send events as JSON text, not binary");
                error(&shared.out, &info, None).await;
                continue;
            }
            Incoming::TooLarge(size) => {
                let most = gateway.config.duplex.max_message;
                let info = ErrorInfo::new(
                    ErrorKind::RequestTooLarge,
                    format!("the event is {size} bytes; the most is {most} (duplex.max_message)"),
                );
                error(&shared.out, &info, None).await;
                continue;
            }
            Incoming::FarTooLarge => break Some((close::TOO_BIG, "message too big (duplex.max_message)", None)),
            Incoming::Closed => break None,
            Incoming::Idle => break Some((close::NORMAL, "idle (duplex.idle_timeout)", None)),
            Incoming::Expired => {
                let message = "the socket reached its longest life (duplex.max_duration); open a new one to go on";
                break Some((close::NORMAL, "session length limit (duplex.max_duration)", Some(message)));
            }
            Incoming::Stopping => break Some((close::GOING_AWAY, "the gateway is stopping", None)),
        };
        let create = match event::kind(text.as_bytes()) {
            Ok(Kind::Create) => event::read_create(text.as_bytes()),
            Ok(Kind::Processed) => continue,
            Ok(Kind::Other(name)) => Err(event::unsupported(&name)),
            Err(info) => Err(info),
        };
        let stream_id = match &create {
            Ok(create) => create.stream_id.clone(),
            Err(_) => None,
        };
        if let Err(info) = create.and_then(|create| lanes.take(&shared, create)) {
            error(&shared.out, &info, stream_id.as_deref()).await;
        }
    };
    match ending {
        // The turns running and waiting finish (within `duplex.drain`),
        // then the socket closes with its code.
        Some((code, reason, message)) => {
            let drain = gateway.config.duplex.drain;
            let _ = tokio::time::timeout(drain, async { while lanes.one_ended(&shared).await.is_some() {} }).await;
            lanes.running.abort_all();
            if let Some(message) = message {
                let mut info = ErrorInfo::new(ErrorKind::InvalidRequest, message);
                info.code = Some(LIMIT_REACHED.into());
                error(&shared.out, &info, None).await;
            }
            shared.out.close(code, reason).await;
        }
        // The caller is gone: its turns stop, and the engine settles what
        // each used, as it does for an HTTP caller that hangs up.
        None => lanes.running.abort_all(),
    }
}

/// Sends the socket's `error` event for `info` (on lane `stream_id`).
pub(crate) async fn error(out: &Outbox, info: &ErrorInfo, stream_id: Option<&str>) -> bool {
    out.text(event::error_event(info.status, &event::object_of(info), stream_id, None)).await
}
