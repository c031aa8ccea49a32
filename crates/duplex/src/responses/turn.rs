//! One turn of a Responses socket: a `response.create` run as the
//! Responses request it stands for, through the engine (the exchange of
//! any request: admission, filters, routing to a lane of any protocol,
//! settlement, the ledger row), its SSE stream read back into the socket's
//! events. `previous_response_id` is found on the socket first (the
//! conversation put before the input), then in the kept store; the
//! conversation the response ends with is kept on the socket for the next
//! turn, `store: false` included. A warm-up (`generate: false`) keeps its
//! input under a new id and generates nothing.

use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use http::HeaderValue;
use http_body_util::BodyExt;
use switchyard_codec::frame::{SseDecoder, SseEvent};
use switchyard_codec::{scan, Framing};
use switchyard_engine::settle::Record;
use switchyard_ir::{ErrorInfo, ErrorKind, Operation};
use switchyard_state::call::Call;

use super::event::{self, Create};
use super::{error, Shared, PROTOCOL};

/// The largest error body read back from the engine.
const MAX_ERROR_BODY: usize = 1 << 20;

/// Runs one turn to its end.
pub(crate) async fn run(shared: &Arc<Shared>, create: Create) {
    let stream_id = create.stream_id.clone();
    if let Err(info) = turn(shared, create).await {
        error(&shared.out, &info, stream_id.as_deref()).await;
    }
}

async fn turn(shared: &Arc<Shared>, create: Create) -> Result<(), ErrorInfo> {
    let Create { body, stream_id, generate, previous } = create;
    // The config serving now, and the caller as it reads now.
    let gateway = &shared.gateway.serving();
    // What is refused before the engine runs is recorded as the HTTP
    // route records it.
    let early = |info| crate::door::refused_turn(gateway, PROTOCOL, &shared.opened.headers, info);
    let caller = crate::door::again(gateway, PROTOCOL, &shared.opened).map_err(early)?;
    // The socket's own conversation first.
    let on_socket = previous.as_deref().and_then(|id| lock(shared).get(id));
    let body = match on_socket {
        Some(context) => event::continue_from(&body, &context).map_err(early)?,
        None => body,
    };
    let heads = if gateway.governance.is_some() { gateway.codec(PROTOCOL).metered_heads() } else { &[] };
    let top = scan::scan_request(&body, heads)
        .map_err(|err| early(ErrorInfo::new(ErrorKind::InvalidRequest, err.to_string())))?;
    let name = match top.model.as_deref() {
        Some(model) if !model.is_empty() => model.to_owned(),
        _ => {
            let mut info = ErrorInfo::new(
                ErrorKind::InvalidRequest,
                "`model` is required: name a model or pool (GET /v1/models lists them)",
            );
            info.param = Some("model".into());
            return Err(early(info));
        }
    };
    if !generate {
        return warm_up(shared, gateway, caller.as_ref(), &name, &body, stream_id.as_deref()).await.map_err(early);
    }
    let (model_span, metered) = (top.model_span.clone(), top.found);
    let request_id = crate::door::request_id();
    let headers = shared.opened.headers.clone();
    let session = session_of(gateway, &name, &headers);
    let mut call = Call {
        ingress: PROTOCOL,
        operation: Operation::Chat,
        route: None,
        name,
        wire_model: None,
        model_span,
        metered,
        stream: true,
        framing: Framing::Sse,
        request_id: request_id.clone(),
        session,
        caller,
        headers,
        body: Bytes::from(body),
    };
    let record = Record::begin(gateway, PROTOCOL, request_id, &call.headers);
    // Stored conversations: continued before, kept after (as over HTTP).
    let keep = if gateway.config.kept.responses.store {
        match switchyard_kept::responses::prepare(gateway, &mut call).await {
            Ok(keep) => keep,
            Err(info) => return Err(refused(record, info)),
        }
    } else {
        None
    };
    let input = match event::input_items(&call.body) {
        Ok(input) => input,
        Err(info) => return Err(refused(record, info)),
    };
    let response = switchyard_engine::forward(gateway.clone(), call, record).await.map(Body::new);
    let response = match keep {
        Some(keep) => switchyard_kept::responses::tap(gateway, keep, response),
        None => response,
    };
    let status = response.status();
    if !status.is_success() {
        let retry_after =
            response.headers().get(http::header::RETRY_AFTER).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let body =
            switchyard_transport::collect_limited(response.into_body(), MAX_ERROR_BODY).await.unwrap_or_default();
        let fallback = ErrorInfo::new(ErrorKind::Internal, "the request failed").with_status(status.as_u16());
        let object = event::error_object(&body, &fallback);
        let text = event::error_event(status.as_u16(), &object, stream_id.as_deref(), retry_after.as_deref());
        shared.out.text(text).await;
        return Ok(());
    }
    relay(shared, response.into_body(), &input, stream_id.as_deref()).await;
    Ok(())
}

/// The turn's stream as the socket's events, each as it comes; the
/// conversation a response ends with kept for the next turn.
async fn relay(shared: &Shared, mut body: Body, input: &[u8], stream_id: Option<&str>) {
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    loop {
        let finished = match body.frame().await {
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else { continue };
                decoder.feed(&data, &mut events).is_err()
            }
            Some(Err(_)) | None => {
                let _ = decoder.finish(&mut events);
                true
            }
        };
        for event in events.drain(..) {
            // A caller gone: the body is dropped, and the engine settles
            // what it used.
            if !forward(shared, event, input, stream_id).await {
                return;
            }
        }
        if finished {
            return;
        }
    }
}

/// One SSE event as the socket's event; false when the caller is gone.
async fn forward(shared: &Shared, event: SseEvent, input: &[u8], stream_id: Option<&str>) -> bool {
    let SseEvent { event: name, data } = event;
    if data == "[DONE]" {
        return true;
    }
    let kind = match name.as_deref() {
        Some(name) => std::borrow::Cow::Borrowed(name),
        None => scan::first_string_member(data.as_bytes(), "type")
            .map_or(std::borrow::Cow::Borrowed(""), |t| std::borrow::Cow::Owned(t.to_owned())),
    };
    let data = match &*kind {
        "error" => event::nested_error(&data).unwrap_or(data),
        "response.completed" | "response.incomplete" => {
            keep_conversation(shared, data.as_bytes(), input);
            data
        }
        _ => data,
    };
    shared.out.text(event::with_stream_id(data, stream_id)).await
}

/// Keeps the conversation a response ended with (`data`: its terminal
/// event) for a later turn's `previous_response_id`.
fn keep_conversation(shared: &Shared, data: &[u8], input: &[u8]) {
    let Some(response) = scan::top_level_value(data, "response").ok().flatten() else { return };
    let Some(id) = scan::first_string_member(response, "id") else { return };
    let output = scan::top_level_value(response, "output").ok().flatten().unwrap_or(b"[]");
    let context = scan::join_arrays(&[input, output]);
    lock(shared).keep(id, Bytes::from(context));
}

/// A warm-up: nothing generated, nothing billed; its input kept under a
/// new response id for the turn that goes on from it.
async fn warm_up(
    shared: &Shared,
    gateway: &switchyard_state::Gateway,
    caller: Option<&switchyard_state::governance::Caller>,
    name: &str,
    body: &[u8],
    stream_id: Option<&str>,
) -> Result<(), ErrorInfo> {
    if gateway.resolve(name).is_none() {
        return Err(ErrorInfo::new(
            ErrorKind::NotFound,
            format!("model or pool `{name}` does not exist (GET /v1/models lists them)"),
        ));
    }
    if let Some(caller) = caller.filter(|c| !c.key.record.may_use(name)) {
        let message = format!("API key {} may not use `{name}`", caller.key.record.prefix);
        return Err(ErrorInfo::new(ErrorKind::PermissionDenied, message));
    }
    let input = event::input_items(body)?;
    let id = format!("resp_{}", crate::door::random_hex(24));
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    lock(shared).keep(&id, Bytes::from(input));
    for event in event::warmup(&id, name, created) {
        if !shared.out.text(event::with_stream_id(event, stream_id)).await {
            break;
        }
    }
    Ok(())
}

/// A refusal before the engine ran, recorded as the HTTP route records one.
fn refused(mut record: Box<Record>, info: ErrorInfo) -> ErrorInfo {
    record.refused_with(None, info.kind);
    record.finish_detached(info.status);
    info
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, super::Conversations> {
    shared.conversations.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The session id the turn carries: the handshake's, in the header its
/// pool's affinity reads (`x-session-id` unless configured otherwise).
fn session_of(gateway: &switchyard_state::Gateway, name: &str, headers: &http::HeaderMap) -> Option<HeaderValue> {
    let header = gateway
        .resolve(name)
        .and_then(|pool| gateway.pools[pool].affinity.as_ref())
        .map_or("x-session-id", |affinity| &*affinity.header);
    headers.get(header).filter(|id| id.len() <= switchyard_state::sessions::MAX_SESSION_ID).cloned()
}
