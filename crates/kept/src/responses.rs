//! Stored responses (`responses.store`): a Responses request that does not
//! say `store: false` is kept with its conversation when it ends whole,
//! under the caller's key; a later request naming it in
//! `previous_response_id` has that conversation put before its own input
//! and the field taken out, so any lane (of any protocol) continues it —
//! reasoning items and tool calls, signatures included, travel as the
//! caller saw them. In a fleet the store is PostgreSQL, so any instance
//! continues any response. `GET`/`DELETE /v1/responses/{id}` and
//! `GET /v1/responses/{id}/input_items` read and remove them.
//!
//! The caller asked to keep it (`store` is true unless it says `false`);
//! the operator's retention for the caller's group says how long and how.
//! A group that keeps text (`redacted`, `full`) keeps a stored response for
//! `responses.ttl`, at most its `retention.days`; one that keeps nothing
//! (`none`, none set, an open gateway) only long enough to continue the
//! conversation (`responses.ttl_without_retention`, an hour; 0: not at
//! all). A stored conversation is never redacted (it is given back to the
//! model as it was said), but with `retention.key` set it is sealed at rest
//! under that key, bound to its row, and tagged with its end user (the one
//! admission reads), so the end user's erase removes it too.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use bytes::Bytes;
use http_body::Frame;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use switchyard_codec::scan;
use switchyard_config::Retention as Keeps;
use switchyard_ir::{ErrorInfo, ErrorKind, Protocol};
use switchyard_state::call::Call;
use switchyard_state::retention::Retention;
use switchyard_state::Gateway;
use switchyard_store::{KeptObject, ObjectKind};

use crate::{json, not_found, now_ms, owner, owner_of, plausible_id, unavailable};

const PROTOCOL: Protocol = Protocol::Responses;

/// What is kept of one response, as written by [`stored_text`]: every
/// part is JSON as it passed (never parsed on the way in).
#[derive(Debug, Deserialize)]
struct Stored {
    /// The response as the caller got it.
    response: Box<RawValue>,
    /// The response it continued.
    previous: Option<String>,
    /// The whole conversation to continue from: the turns before, this
    /// turn's input and the response's output.
    context: Box<RawValue>,
    /// The first response of the conversation (this one's own id when it
    /// continued none): the items of its context that came without an id
    /// are named after it and their place, the same from every turn.
    /// Records kept before it was written have none.
    #[serde(default)]
    root: Option<String>,
}

/// A stored record's text, from its parts' JSON.
fn stored_text(response: &[u8], previous: Option<&str>, input: &[u8], context: &[u8], root: &str) -> Vec<u8> {
    let previous = serde_json::to_vec(&previous).unwrap_or_else(|_| b"null".to_vec());
    let root = serde_json::to_vec(root).unwrap_or_else(|_| b"null".to_vec());
    let mut out = Vec::with_capacity(response.len() + input.len() + context.len() + previous.len() + root.len() + 56);
    for (name, value) in [
        (&b"{\"response\":"[..], response),
        (b",\"previous\":", &previous),
        (b",\"input\":", input),
        (b",\"context\":", context),
        (b",\"root\":", &root),
    ] {
        out.extend_from_slice(name);
        out.extend_from_slice(value);
    }
    out.push(b'}');
    out
}

/// What a request to be kept carries to its end.
pub struct Keep {
    owner: String,
    previous: Option<String>,
    /// The conversation before this turn (a JSON array).
    history: Box<RawValue>,
    /// The conversation's first response, when this turn continues one.
    root: Option<String>,
    /// This turn's input items (a JSON array).
    input: Vec<u8>,
    stream: bool,
    /// How long it is kept, by its group's retention.
    ttl: std::time::Duration,
    /// Its end user's tag (with `retention.key`).
    user_tag: Option<String>,
}

/// How long a stored response of a group keeping `keeps` stays (`None`:
/// it is not kept): `responses.ttl` for a group that keeps text, at most
/// its `retention.days`; only long enough to continue for one that keeps
/// nothing.
fn lifetime(
    config: &switchyard_config::kept::Responses,
    keeps: Keeps,
    days: Option<u32>,
) -> Option<std::time::Duration> {
    let ttl = match (keeps, days) {
        (Keeps::None, _) => config.ttl.min(config.ttl_without_retention),
        (_, Some(days)) => config.ttl.min(std::time::Duration::from_secs(u64::from(days) * 86_400)),
        (_, None) => config.ttl,
    };
    (!ttl.is_zero()).then_some(ttl)
}

/// What a stored response's sealed text is bound to: its kind, owner, id
/// and end user's tag (moved to another row, it does not open).
fn row(owner: &str, id: &str, user_tag: Option<&str>) -> Vec<u8> {
    [b"response".as_slice(), owner.as_bytes(), id.as_bytes(), user_tag.unwrap_or_default().as_bytes()].join(&0u8)
}

/// A stored object's text: opened under the retention key when sealed
/// (`None` when it no longer opens: another key, altered).
fn opened(retention: Option<&Retention>, object: KeptObject) -> Option<Vec<u8>> {
    if !object.meta.contains("\"sealed\":true") {
        return Some(object.body);
    }
    let at = row(&object.owner, &object.id, object.user_tag.as_deref());
    match retention?.open_kept(&at, &object.body) {
        Ok(text) => Some(text),
        Err(err) => {
            tracing::warn!(id = %object.id, error = %err, "a stored response does not open; treated as gone");
            None
        }
    }
}

/// Reads a Responses request's `store` and `previous_response_id`: the
/// conversation named is put before the input (and the field removed, as
/// bytes: the rest of the body passes as it came); what to keep when the
/// answer ends, unless the caller said `store: false`. An unknown previous
/// response is the caller's 400.
pub async fn prepare(gateway: &Gateway, call: &mut Call) -> Result<Option<Keep>, ErrorInfo> {
    let invalid = |message: String| ErrorInfo::new(ErrorKind::InvalidRequest, message);
    let top = scan::scan_request(&call.body, &["store", "previous_response_id", "input"])
        .map_err(|e| invalid(e.to_string()))?;
    let span = |at: usize| top.found[at].map(|(start, end)| start as usize..end as usize);
    let store = span(0).map(|at| &call.body[at]) != Some(b"false".as_slice());
    let previous = match span(1).map(|at| &call.body[at]) {
        None | Some(b"null") => None,
        Some(raw) => match serde_json::from_slice::<String>(raw) {
            Ok(id) => Some(id),
            Err(_) => {
                let mut info = invalid("previous_response_id must be a string".into());
                info.param = Some("previous_response_id".into());
                return Err(info);
            }
        },
    };
    if !store && previous.is_none() {
        return Ok(None);
    }
    // This turn's items: a string input is the user message it stands for.
    let input = match span(2).map(|at| &call.body[at]) {
        Some(raw) if raw.first() == Some(&b'"') => {
            let text: String = serde_json::from_slice(raw).map_err(|err| invalid(format!("input: {err}")))?;
            let item = json!([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}]);
            serde_json::to_vec(&item).unwrap_or_default()
        }
        Some(raw) if raw.first() == Some(&b'[') => raw.to_vec(),
        _ => b"[]".to_vec(),
    };
    let owner = owner_of(call.caller.as_ref());
    // What the caller's group keeps decides how long this one is kept.
    let keeps = match (&gateway.governance, call.caller.as_ref().and_then(|c| c.key.record.group.as_deref())) {
        (Some(governance), Some(group)) => governance.retention_of(group).unwrap_or_default(),
        _ => Keeps::None,
    };
    let ttl = lifetime(&gateway.config.kept.responses, keeps, gateway.retention.as_ref().map(|r| r.days));
    let (history, root) = match &previous {
        None => (RawValue::from_string("[]".to_owned()).map_err(|err| invalid(err.to_string()))?, None),
        Some(id) => {
            let (history, root) = history(gateway, &owner, id).await?;
            let whole = scan::join_arrays(&[history.get().as_bytes(), &input]);
            let body = match span(2) {
                Some(at) => scan::splice(&call.body, at, &whole),
                None => return Err(invalid("input is required".into())),
            };
            let body = scan::without_member(&body, "previous_response_id")
                .map_err(|err| invalid(err.to_string()))?
                .unwrap_or(body);
            // What the ingress scan found moved with the rewrite: found again.
            let heads = if gateway.governance.is_some() { gateway.codec(PROTOCOL).metered_heads() } else { &[] };
            let top = scan::scan_request(&body, heads).map_err(|err| invalid(err.to_string()))?;
            call.model_span = top.model_span;
            call.metered = top.found;
            call.body = Bytes::from(body);
            (history, Some(root))
        }
    };
    let Some(ttl) = ttl.filter(|_| store) else { return Ok(None) };
    let user_tag = gateway
        .retention
        .as_ref()
        .and_then(|retention| Some(retention.user_tag(&switchyard_engine::admit::end_user(gateway, call)?)));
    Ok(Some(Keep { owner, previous, history, root, input, stream: call.stream, ttl, user_tag }))
}

/// The conversation kept under `id` for `owner` and its first response
/// (`id` itself for a record kept before roots were), or the caller's 400.
async fn history(gateway: &Gateway, owner: &str, id: &str) -> Result<(Box<RawValue>, String), ErrorInfo> {
    let found = if plausible_id(id) {
        gateway.kept.objects.get_object(ObjectKind::Response, owner.to_owned(), id.to_owned(), now_ms()).await.map_err(
            |err| {
                ErrorInfo::new(ErrorKind::Overloaded, format!("stored responses are unavailable: {err}"))
                    .with_status(503)
            },
        )?
    } else {
        None
    };
    let text = found.and_then(|object| opened(gateway.retention.as_deref(), object));
    match text.and_then(|text| serde_json::from_slice::<Stored>(&text).ok()) {
        Some(stored) => Ok((stored.context, stored.root.unwrap_or_else(|| id.to_owned()))),
        None => {
            let mut info =
                ErrorInfo::new(ErrorKind::InvalidRequest, format!("Previous response with id '{id}' not found."));
            info.param = Some("previous_response_id".into());
            info.code = Some("previous_response_not_found".into());
            Err(info)
        }
    }
}

/// The caller's answer, passed through as it goes and kept when it ends
/// whole with a 2xx (a stream by its `response.completed` event).
pub fn tap(gateway: &Arc<Gateway>, keep: Keep, response: Response) -> Response {
    if !response.status().is_success() {
        return response;
    }
    let limit = usize::try_from(gateway.config.kept.responses.max_bytes).unwrap_or(usize::MAX);
    let objects = gateway.kept.objects.clone();
    let retention = gateway.retention.clone();
    response.map(|body| {
        Body::new(Tap {
            inner: body,
            seen: Vec::new(),
            limit,
            keep: Some(Box::new(move |bytes: Vec<u8>| {
                switchyard_tasks::work(async move {
                    let Some(object) = kept(keep, &bytes, retention.as_deref()) else { return };
                    if object.body.len() > limit {
                        tracing::warn!(id = %object.id, "a stored response is larger than responses.max_bytes; not kept");
                        return;
                    }
                    if let Err(err) = objects.put_object(object).await {
                        tracing::warn!(error = %err, "a response could not be stored");
                    }
                });
            })),
        })
    })
}

/// The object to store for an answer that ended: its parts found by the
/// scanner, joined as bytes, sealed under `retention`'s key when there is
/// one.
fn kept(keep: Keep, bytes: &[u8], retention: Option<&Retention>) -> Option<KeptObject> {
    let response = if keep.stream { completed_response(bytes)? } else { bytes };
    let id: String = serde_json::from_slice(scan::top_level_value(response, "id").ok()??).ok()?;
    let output = scan::top_level_value(response, "output").ok().flatten().unwrap_or(b"[]");
    let context = scan::join_arrays(&[keep.history.get().as_bytes(), &keep.input, output]);
    let root = keep.root.as_deref().unwrap_or(&id);
    let text = stored_text(response, keep.previous.as_deref(), &keep.input, &context, root);
    let size = text.len() as u64;
    let (meta, body) = match retention {
        Some(retention) => {
            let at = row(&keep.owner, &id, keep.user_tag.as_deref());
            ("{\"sealed\":true}".to_owned(), retention.seal_kept(&at, &text)?)
        }
        None => (String::new(), text),
    };
    let now = now_ms();
    Some(KeptObject {
        kind: ObjectKind::Response,
        owner: keep.owner,
        id,
        created_ms: now,
        expires_ms: Some(now.saturating_add(i64::try_from(keep.ttl.as_millis()).unwrap_or(i64::MAX))),
        meta,
        body,
        size,
        chunks: 0,
        user_tag: keep.user_tag,
    })
}

/// The `response` of a stream's `response.completed` event.
fn completed_response(stream: &[u8]) -> Option<&[u8]> {
    stream.split(|&b| b == b'\n').rev().filter_map(|line| line.strip_prefix(b"data:")).find_map(|data| {
        let data = data.trim_ascii();
        let kind = scan::top_level_value(data, "type").ok()??;
        (kind == b"\"response.completed\"").then(|| scan::top_level_value(data, "response").ok().flatten())?
    })
}

type Finish = Box<dyn FnOnce(Vec<u8>) + Send>;

/// A body that copies what passes (up to `limit`) and hands it over at its
/// end; one cut short, or longer than the limit, hands nothing.
struct Tap {
    inner: Body,
    seen: Vec<u8>,
    limit: usize,
    keep: Option<Finish>,
}

impl http_body::Body for Tap {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), true) = (frame.data_ref(), this.keep.is_some()) {
                    if this.seen.len() + data.len() > this.limit {
                        this.keep = None;
                        this.seen = Vec::new();
                    } else {
                        this.seen.extend_from_slice(data);
                    }
                }
                // A whole body's last frame: the server may not poll again.
                if this.inner.is_end_stream() {
                    if let Some(keep) = this.keep.take() {
                        keep(std::mem::take(&mut this.seen));
                    }
                }
            }
            Poll::Ready(None) => {
                if let Some(keep) = this.keep.take() {
                    keep(std::mem::take(&mut this.seen));
                }
            }
            Poll::Ready(Some(Err(_))) => this.keep = None,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

async fn stored(gateway: &Gateway, parts: &axum::http::request::Parts, id: &str) -> Result<(String, Stored), Response> {
    let owner = owner(gateway, PROTOCOL, parts)?;
    let missing = || {
        let info = ErrorInfo::new(ErrorKind::NotFound, format!("Response with id '{id}' not found."));
        crate::error(gateway, PROTOCOL, &info)
    };
    if !plausible_id(id) {
        return Err(missing());
    }
    match gateway.kept.objects.get_object(ObjectKind::Response, owner.clone(), id.to_owned(), now_ms()).await {
        Ok(Some(object)) => match opened(gateway.retention.as_deref(), object) {
            Some(text) => serde_json::from_slice(&text).map(|s| (owner, s)).map_err(|_| missing()),
            None => Err(missing()),
        },
        Ok(None) => Err(missing()),
        Err(err) => Err(unavailable(gateway, PROTOCOL, &err)),
    }
}

/// `GET /v1/responses/{id}`.
pub async fn get(State(gateway): State<Arc<Gateway>>, Path(id): Path<String>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    match stored(&gateway, &parts, &id).await {
        Ok((_, stored)) => {
            // Sent upstream without it: the response names what it continued here.
            let mut response: Value = serde_json::from_str(stored.response.get()).unwrap_or(Value::Null);
            if let (Some(previous), Some(object)) = (stored.previous, response.as_object_mut()) {
                object.insert("previous_response_id".into(), Value::String(previous));
            }
            json(StatusCode::OK, &response)
        }
        Err(response) => response,
    }
}

/// `DELETE /v1/responses/{id}`.
pub async fn delete(State(gateway): State<Arc<Gateway>>, Path(id): Path<String>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let owner = match owner(&gateway, PROTOCOL, &parts) {
        Ok(owner) => owner,
        Err(refused) => return refused,
    };
    if !plausible_id(&id) {
        return not_found(&gateway, PROTOCOL, &format!("response `{id}`"));
    }
    match gateway.kept.objects.delete_object(ObjectKind::Response, owner, id.clone()).await {
        Ok(true) => json(StatusCode::OK, &json!({"id": id, "object": "response", "deleted": true})),
        Ok(false) => not_found(&gateway, PROTOCOL, &format!("response `{id}`")),
        Err(err) => unavailable(&gateway, PROTOCOL, &err),
    }
}

/// The most items `input_items` lists a page, and the number when the
/// caller names none (OpenAI's bounds).
const MOST_ITEMS: usize = 100;
const DEFAULT_ITEMS: usize = 20;

/// `input_items`' query, as OpenAI's reference reads it: `limit` (1 to
/// 100, 20 by default), `order` (`asc`, or `desc`: newest first, the
/// default), `after` (the id of the item the page follows) and `include`
/// (named once or more, `include` or `include[]`).
#[derive(Debug, PartialEq)]
struct ItemsQuery {
    limit: usize,
    descending: bool,
    after: Option<String>,
}

impl ItemsQuery {
    /// Reads a query string; `Err`: the caller's 400 (the parameter, the message).
    fn parse(query: &str) -> Result<ItemsQuery, (&'static str, String)> {
        let mut read = ItemsQuery { limit: DEFAULT_ITEMS, descending: true, after: None };
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
            .map_err(|err| ("query", format!("the query could not be read: {err}")))?;
        for (name, value) in pairs {
            match name.as_str() {
                "limit" => {
                    read.limit = match value.parse::<i64>() {
                        Ok(limit) if (1..=MOST_ITEMS as i64).contains(&limit) => limit as usize,
                        Ok(limit) => {
                            return Err(("limit", format!("Invalid 'limit': expected 1 to {MOST_ITEMS}, got {limit}.")))
                        }
                        Err(_) => return Err(("limit", format!("Invalid 'limit': `{value}` is not an integer."))),
                    }
                }
                "order" => {
                    read.descending = match value.as_str() {
                        "asc" => false,
                        "desc" => true,
                        other => {
                            return Err(("order", format!("Invalid 'order': expected `asc` or `desc`, got `{other}`.")))
                        }
                    }
                }
                "after" => read.after = Some(value),
                // Items are kept whole as they came: every field `include`
                // can name is already in them.
                _ => {}
            }
        }
        Ok(read)
    }
}

/// The items used to generate a stored response, OpenAI's way: the
/// earlier turns' inputs and outputs and this turn's input, oldest first.
/// An item kept without an id is given one from the conversation's first
/// response and its place (the same from every later turn), a message
/// without a type is a `message`, and a message's text content is its
/// one text part.
fn items_of(stored: &Stored, id: &str) -> Vec<Value> {
    let context: Vec<Value> = serde_json::from_str(stored.context.get()).unwrap_or_default();
    let output = scan::top_level_value(stored.response.get().as_bytes(), "output")
        .ok()
        .flatten()
        .and_then(|raw| serde_json::from_slice::<Vec<&RawValue>>(raw).ok())
        .map_or(0, |output| output.len());
    let root = stored.root.as_deref().unwrap_or(id);
    let used = context.len().saturating_sub(output);
    context
        .into_iter()
        .take(used)
        .enumerate()
        .map(|(n, mut item)| {
            if let Some(object) = item.as_object_mut() {
                object.entry("id").or_insert_with(|| Value::String(item_id(root, n)));
                object.entry("type").or_insert_with(|| Value::String("message".into()));
                let part = if object.get("role").and_then(Value::as_str) == Some("assistant") {
                    "output_text"
                } else {
                    "input_text"
                };
                if let Some(Value::String(text)) = object.get("content") {
                    let content = json!([{"type": part, "text": text}]);
                    object.insert("content".into(), content);
                }
            }
            item
        })
        .collect()
}

/// The id of the item at `place` in the conversation begun by `root`
/// (for one kept without an id): `msg_` and 24 hex digits, FNV-1a of both.
fn item_id(root: &str, place: usize) -> String {
    let fnv = |seed: u64, bytes: &[u8]| {
        bytes.iter().fold(seed, |hash, &byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
    };
    let hash = fnv(0xcbf2_9ce4_8422_2325, root.as_bytes());
    format!("msg_{hash:016x}{:08x}", fnv(hash, &place.to_le_bytes()) as u32)
}

/// One page of `items` (oldest first) for `query`: the page, and whether
/// more follow it. `Err`: `after` names no item.
fn page(mut items: Vec<Value>, query: &ItemsQuery) -> Result<(Vec<Value>, bool), String> {
    if query.descending {
        items.reverse();
    }
    let start = match &query.after {
        None => 0,
        Some(after) => match items.iter().position(|item| item.get("id").and_then(Value::as_str) == Some(after)) {
            Some(at) => at + 1,
            None => return Err(format!("No input item with id '{after}' in this response.")),
        },
    };
    let more = items.len() > start + query.limit;
    let page = items.into_iter().skip(start).take(query.limit).collect();
    Ok((page, more))
}

/// `GET /v1/responses/{id}/input_items`: the items used to generate the
/// response, the earlier turns' included, paged as OpenAI pages them.
pub async fn input_items(State(gateway): State<Arc<Gateway>>, Path(id): Path<String>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let query = match ItemsQuery::parse(parts.uri.query().unwrap_or_default()) {
        Ok(query) => query,
        Err((param, message)) => return crate::invalid(&gateway, PROTOCOL, message, Some(param)),
    };
    let (_, stored) = match stored(&gateway, &parts, &id).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let (items, has_more) = match page(items_of(&stored, &id), &query) {
        Ok(page) => page,
        Err(message) => return crate::invalid(&gateway, PROTOCOL, message, Some("after")),
    };
    let first = items.first().and_then(|i| i.get("id").cloned());
    let last = items.last().and_then(|i| i.get("id").cloned());
    json(
        StatusCode::OK,
        &json!({"object": "list", "data": items, "first_id": first, "last_id": last, "has_more": has_more}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streams_response_is_its_completed_event() {
        let stream = b"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\"}}\n\n\
            event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"output\":[1]}}\n\n";
        assert_eq!(completed_response(stream), Some(&b"{\"id\":\"r\",\"output\":[1]}"[..]));
        assert_eq!(completed_response(b"data: {\"type\":\"response.created\"}\n\n"), None);
    }

    fn keep(user_tag: Option<&str>) -> Keep {
        Keep {
            owner: "k".into(),
            previous: Some("r0".into()),
            history: RawValue::from_string(r#"["h"]"#.into()).unwrap(),
            root: Some("r0".into()),
            input: br#"["i"]"#.to_vec(),
            stream: false,
            ttl: std::time::Duration::from_secs(60),
            user_tag: user_tag.map(str::to_owned),
        }
    }

    #[test]
    fn the_kept_conversation_is_the_history_this_input_and_the_output() {
        let reply = br#"{"id":"r1","output":["o"],"previous_response_id":null}"#;
        let object = kept(keep(None), reply, None).unwrap();
        assert_eq!((object.id.as_str(), object.owner.as_str(), object.size), ("r1", "k", object.body.len() as u64));
        let stored: Stored = serde_json::from_slice(&object.body).unwrap();
        assert_eq!(stored.context.get(), r#"["h","i","o"]"#);
        assert_eq!((stored.response.get().as_bytes(), stored.previous.as_deref()), (&reply[..], Some("r0")));
        let record: Value = serde_json::from_slice(&object.body).unwrap();
        assert_eq!(record["input"], json!(["i"]), "this turn's input, kept apart");
        assert_eq!(stored.root.as_deref(), Some("r0"), "the conversation's first response");
        assert!(kept(keep(None), b"{}", None).is_none(), "no id, nothing kept");
        // A first turn is its own root.
        let first = kept(Keep { previous: None, root: None, ..keep(None) }, reply, None).unwrap();
        let stored: Stored = serde_json::from_slice(&first.body).unwrap();
        assert_eq!(stored.root.as_deref(), Some("r1"));
    }

    /// A third turn's record: two earlier turns (each an input and an
    /// output), then this turn's input and output.
    fn third_turn() -> Stored {
        let text = stored_text(
            br#"{"id":"r3","output":[{"id":"msg_out3","type":"message","role":"assistant"}]}"#,
            Some("r2"),
            br#"[{"role":"user","content":"three"}]"#,
            br#"[{"type":"message","role":"user","content":[{"type":"input_text","text":"one"}]},
                {"id":"msg_out1","type":"message","role":"assistant","content":[{"type":"output_text","text":"1"}]},
                {"role":"user","content":"two"},
                {"id":"msg_out2","type":"message","role":"assistant","content":"2"},
                {"role":"user","content":"three"},
                {"id":"msg_out3","type":"message","role":"assistant"}]"#,
            "r1",
        );
        serde_json::from_slice(&text).unwrap()
    }

    #[test]
    fn a_continued_responses_items_are_every_turns_input_and_output_but_its_own_output() {
        let items = items_of(&third_turn(), "r3");
        let texts: Vec<&str> = items.iter().map(|i| i["content"][0]["text"].as_str().unwrap()).collect();
        assert_eq!(texts, ["one", "1", "two", "2", "three"], "oldest first, this turn's output left out");
        assert!(items.iter().all(|i| i["type"] == "message" && i["id"].as_str().is_some()), "{items:?}");
        assert_eq!(items[3]["content"][0]["type"], "output_text", "an assistant's text is output text");
        assert_eq!(items[4]["content"][0]["type"], "input_text");
        assert_eq!(items[1]["id"], "msg_out1", "an item's own id is kept");
        // An item without one is named by the conversation's first response
        // and its place: the same from every turn that lists it.
        assert_eq!(items[0]["id"], item_id("r1", 0));
        let ids: std::collections::HashSet<&str> = items.iter().map(|i| i["id"].as_str().unwrap()).collect();
        assert_eq!(ids.len(), 5, "ids are unique");
        assert!(item_id("r1", 0).starts_with("msg_") && item_id("r1", 0).len() == 28);
        assert_ne!(item_id("r1", 0), item_id("r9", 0));
    }

    #[test]
    fn input_items_page_as_openai_pages_them() {
        let query = |q: &str| ItemsQuery::parse(q);
        assert_eq!(query(""), Ok(ItemsQuery { limit: 20, descending: true, after: None }), "20, newest first");
        assert_eq!(
            query("limit=2&order=asc&after=msg_x&include=message.input_image.image_url&include[]=x"),
            Ok(ItemsQuery { limit: 2, descending: false, after: Some("msg_x".into()) })
        );
        for (bad, param) in
            [("limit=0", "limit"), ("limit=101", "limit"), ("limit=two", "limit"), ("order=up", "order")]
        {
            assert_eq!(query(bad).unwrap_err().0, param, "{bad}");
        }
        let items = items_of(&third_turn(), "r3");
        let ids: Vec<String> = items.iter().map(|i| i["id"].as_str().unwrap().to_owned()).collect();
        // Newest first, two at a time, each page after the last one's last id.
        let mut after = None;
        let mut walked = Vec::new();
        loop {
            let q = ItemsQuery { limit: 2, descending: true, after: after.clone() };
            let (page, more) = page(items.clone(), &q).unwrap();
            walked.extend(page.iter().map(|i| i["id"].as_str().unwrap().to_owned()));
            if !more {
                break;
            }
            after = page.last().map(|i| i["id"].as_str().unwrap().to_owned());
        }
        assert_eq!(walked, ids.iter().rev().cloned().collect::<Vec<_>>());
        let (all, more) = page(items.clone(), &ItemsQuery { limit: 5, descending: false, after: None }).unwrap();
        assert_eq!((all.len(), more), (5, false), "exactly a page: no more");
        let last = ItemsQuery { limit: 5, descending: false, after: Some(ids[4].clone()) };
        assert_eq!(page(items.clone(), &last).unwrap(), (Vec::new(), false));
        assert!(page(items, &ItemsQuery { after: Some("msg_nope".into()), ..last }).is_err());
    }

    #[test]
    fn a_kept_conversation_is_sealed_to_its_row_under_the_retention_key() {
        let config =
            switchyard_config::load(&format!("retention: {{ key: \"{}\", days: 2 }}\n", "ab".repeat(32)), &|_| None)
                .unwrap();
        let retention = Retention::build(&config).unwrap();
        let reply = br#"{"id":"r1","output":[{"text":"ada@example.com"}]}"#;
        let object = kept(keep(Some("tag-1")), reply, Some(&retention)).unwrap();
        assert!(!object.body.windows(7).any(|w| w == b"example"), "sealed at rest");
        assert_eq!(object.user_tag.as_deref(), Some("tag-1"));
        let text = opened(Some(&retention), object.clone()).unwrap();
        assert!(serde_json::from_slice::<Stored>(&text).unwrap().context.get().contains("ada@example.com"));
        // Moved to another row, or opened without the key, it is gone.
        assert!(opened(Some(&retention), KeptObject { owner: "k2".into(), ..object.clone() }).is_none());
        assert!(opened(Some(&retention), KeptObject { user_tag: None, ..object.clone() }).is_none());
        assert!(opened(None, object).is_none());
        // Text kept before sealing (no meta) still reads.
        let plain = kept(keep(None), reply, None).unwrap();
        assert!(opened(Some(&retention), plain).is_some());
    }

    #[test]
    fn a_groups_retention_says_how_long_a_conversation_stays() {
        let config = switchyard_config::kept::Kept::default().responses;
        let hour = std::time::Duration::from_secs(3_600);
        assert_eq!(lifetime(&config, Keeps::None, Some(30)), Some(hour), "keeps nothing: only to continue");
        assert_eq!(lifetime(&config, Keeps::Full, Some(2)), Some(2 * 24 * hour), "at most retention.days");
        assert_eq!(lifetime(&config, Keeps::Redacted, Some(90)), Some(config.ttl), "at most responses.ttl");
        let never = switchyard_config::kept::Responses { ttl_without_retention: std::time::Duration::ZERO, ..config };
        assert_eq!(lifetime(&never, Keeps::None, None), None);
    }
}
