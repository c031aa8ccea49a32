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
use axum::extract::{Path, Query, Request, State};
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
    /// This turn's input items.
    input: Box<RawValue>,
    /// The whole conversation to continue from: the turns before, this
    /// turn's input and the response's output.
    context: Box<RawValue>,
}

/// A stored record's text, from its parts' JSON.
fn stored_text(response: &[u8], previous: Option<&str>, input: &[u8], context: &[u8]) -> Vec<u8> {
    let previous = serde_json::to_vec(&previous).unwrap_or_else(|_| b"null".to_vec());
    let mut out = Vec::with_capacity(response.len() + input.len() + context.len() + previous.len() + 48);
    for (name, value) in [
        (&b"{\"response\":"[..], response),
        (b",\"previous\":", &previous),
        (b",\"input\":", input),
        (b",\"context\":", context),
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
    let history = match &previous {
        None => RawValue::from_string("[]".to_owned()).map_err(|err| invalid(err.to_string()))?,
        Some(id) => {
            let history = history(gateway, &owner, id).await?;
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
            history
        }
    };
    let Some(ttl) = ttl.filter(|_| store) else { return Ok(None) };
    let user_tag = gateway
        .retention
        .as_ref()
        .and_then(|retention| Some(retention.user_tag(&switchyard_engine::admit::end_user(gateway, call)?)));
    Ok(Some(Keep { owner, previous, history, input, stream: call.stream, ttl, user_tag }))
}

/// The conversation kept under `id` for `owner`, or the caller's 400.
async fn history(gateway: &Gateway, owner: &str, id: &str) -> Result<Box<RawValue>, ErrorInfo> {
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
        Some(stored) => Ok(stored.context),
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
                tokio::spawn(async move {
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
    let text = stored_text(response, keep.previous.as_deref(), &keep.input, &context);
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

/// `input_items`' query.
#[derive(Debug, Deserialize)]
pub struct ItemsQuery {
    /// `asc` or `desc` (the default: newest first).
    #[serde(default)]
    order: Option<String>,
}

/// `GET /v1/responses/{id}/input_items`: this turn's input, newest first
/// unless `order=asc`.
pub async fn input_items(
    State(gateway): State<Arc<Gateway>>,
    Path(id): Path<String>,
    Query(query): Query<ItemsQuery>,
    request: Request,
) -> Response {
    let (parts, _) = request.into_parts();
    let (_, stored) = match stored(&gateway, &parts, &id).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let ascending = query.order.as_deref() == Some("asc");
    let input: Vec<Value> = serde_json::from_str(stored.input.get()).unwrap_or_default();
    let mut items: Vec<Value> = input
        .into_iter()
        .enumerate()
        .map(|(n, mut item)| {
            if let Some(object) = item.as_object_mut() {
                object.entry("id").or_insert_with(|| Value::String(format!("msg_{id}_{n}")));
                object.entry("type").or_insert_with(|| Value::String("message".into()));
            }
            item
        })
        .collect();
    if !ascending {
        items.reverse();
    }
    let first = items.first().and_then(|i| i.get("id").cloned());
    let last = items.last().and_then(|i| i.get("id").cloned());
    json(
        StatusCode::OK,
        &json!({"object": "list", "data": items, "first_id": first, "last_id": last, "has_more": false}),
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
        assert_eq!(stored.input.get(), r#"["i"]"#);
        assert!(kept(keep(None), b"{}", None).is_none(), "no id, nothing kept");
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
