//! The model lists, in each dialect a caller's SDK reads: OpenAI's
//! (`GET /v1/models`, every entry with its operation), Anthropic's (the
//! same path when the caller sends `anthropic-version`: chat entries,
//! paged by `limit` and `after_id`) and Gemini's (`GET /v1beta/models`, or
//! `/v1/models` with a Gemini key: chat and embed entries with the methods
//! they take, paged by `pageSize` and `pageToken`), one entry by id too.
//! Under `auth: keys` a list needs a key, and shows only what the key may
//! name; on the admin listener (behind the admin token) it shows all.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use switchyard_ir::{ErrorInfo, ErrorKind, Operation, Protocol};
use switchyard_state::governance::Caller;
use switchyard_state::Gateway;

/// One model or pool a caller may name.
struct Entry {
    id: Arc<str>,
    owned_by: Arc<str>,
    operation: Operation,
    /// The smallest context window a request to it may meet.
    context_window: Option<u64>,
}

/// The list dialect a request asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dialect {
    OpenAi,
    Anthropic,
    Gemini,
}

impl Dialect {
    /// Anthropic's SDK always sends `anthropic-version`; Gemini's a Gemini key.
    fn of(headers: &HeaderMap, query: Option<&str>) -> Dialect {
        let gemini_key = headers.contains_key("x-goog-api-key")
            || query.is_some_and(|q| q.split('&').any(|pair| pair.starts_with("key=")));
        if headers.contains_key("anthropic-version") {
            Dialect::Anthropic
        } else if gemini_key {
            Dialect::Gemini
        } else {
            Dialect::OpenAi
        }
    }

    fn protocol(self) -> Protocol {
        match self {
            Dialect::OpenAi => Protocol::OpenAi,
            Dialect::Anthropic => Protocol::Anthropic,
            Dialect::Gemini => Protocol::Gemini,
        }
    }

    /// Whether a caller of this dialect can call an entry of `operation`.
    fn lists(self, operation: Operation) -> bool {
        match self {
            Dialect::OpenAi => true,
            Dialect::Anthropic => operation == Operation::Chat,
            Dialect::Gemini => matches!(operation, Operation::Chat | Operation::Embed),
        }
    }
}

/// The entries `request`'s caller may name, in config order (models, then
/// pools), or why it may not list them.
fn entries(gateway: &Gateway, request: &Request, dialect: Dialect) -> Result<Vec<Entry>, ErrorInfo> {
    let admin = request.extensions().get::<switchyard_admin::shared::Actor>().is_some();
    let mut caller = None;
    if !admin {
        let protocol = dialect.protocol();
        caller = switchyard_engine::authenticate::caller(
            gateway,
            protocol,
            request.uri(),
            request.headers(),
            request.extensions().get::<switchyard_state::ClientName>(),
            &[],
        )?;
    }
    let may_use = |name: &str| caller.as_ref().is_none_or(|c: &Caller| c.key.record.may_use(name));
    let config = &gateway.config;
    let mut out = Vec::new();
    for model in config.models.iter().filter(|m| may_use(&m.name) && dialect.lists(m.operation)) {
        out.push(Entry {
            id: model.name.clone(),
            owned_by: config.providers[model.provider].name.clone(),
            operation: model.operation,
            context_window: model.context_window,
        });
    }
    for pool in config.pools.iter().filter(|p| may_use(&p.name) && dialect.lists(p.operation)) {
        let windows = pool.members.iter().map(|m| config.models[m.model].context_window);
        // A pool's window is its smallest member's, when every member says one.
        let context_window = windows.collect::<Option<Vec<u64>>>().and_then(|w| w.into_iter().min());
        out.push(Entry {
            id: pool.name.clone(),
            owned_by: Arc::from("switchyard-pool"),
            operation: pool.operation,
            context_window,
        });
    }
    Ok(out)
}

/// `GET /v1/models`: the list in the dialect the caller's headers say.
pub(super) async fn list(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let dialect = Dialect::of(request.headers(), request.uri().query());
    let entries = match entries(&gateway, &request, dialect) {
        Ok(entries) => entries,
        Err(info) => return refusal(&gateway, dialect, &info),
    };
    let query = request.uri().query().unwrap_or("");
    match dialect {
        Dialect::OpenAi => {
            let data: Vec<Value> = entries.iter().map(openai_entry).collect();
            json_response(&json!({"object": "list", "data": data}))
        }
        Dialect::Anthropic => anthropic_page(&entries, query),
        Dialect::Gemini => gemini_page(&entries, query),
    }
}

/// `GET /v1beta/models`: Gemini's list.
pub(super) async fn list_gemini(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    match entries(&gateway, &request, Dialect::Gemini) {
        Ok(entries) => gemini_page(&entries, request.uri().query().unwrap_or("")),
        Err(info) => refusal(&gateway, Dialect::Gemini, &info),
    }
}

/// `GET /v1/models/{id}`: one entry, in the caller's dialect.
pub(super) async fn get(State(gateway): State<Arc<Gateway>>, Path(id): Path<String>, request: Request) -> Response {
    let dialect = Dialect::of(request.headers(), request.uri().query());
    one(&gateway, &request, dialect, &id)
}

/// `GET /v1beta/models/{name}`: one Gemini entry.
pub(super) async fn get_gemini(
    State(gateway): State<Arc<Gateway>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    one(&gateway, &request, Dialect::Gemini, name.trim_start_matches("models/"))
}

fn one(gateway: &Gateway, request: &Request, dialect: Dialect, id: &str) -> Response {
    if id.contains(':') {
        // An action (`m:generateContent`) shares the path: it takes POST.
        let path = request.uri().path();
        let info = ErrorInfo::new(ErrorKind::InvalidRequest, format!("{path} takes POST, not GET")).with_status(405);
        let mut response = switchyard_engine::render_error(gateway.codec(Protocol::Gemini), &info).map(Body::new);
        *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        response.headers_mut().insert(axum::http::header::ALLOW, axum::http::HeaderValue::from_static("POST"));
        return response;
    }
    let entries = match entries(gateway, request, dialect) {
        Ok(entries) => entries,
        Err(info) => return refusal(gateway, dialect, &info),
    };
    let Some(entry) = entries.iter().find(|e| &*e.id == id) else {
        let info = ErrorInfo::new(ErrorKind::NotFound, format!("model `{id}` does not exist (list them to see)"));
        return refusal(gateway, dialect, &info);
    };
    json_response(&match dialect {
        Dialect::OpenAi => openai_entry(entry),
        Dialect::Anthropic => anthropic_entry(entry),
        Dialect::Gemini => gemini_entry(entry),
    })
}

/// `info` in the dialect's own error shape.
fn refusal(gateway: &Gateway, dialect: Dialect, info: &ErrorInfo) -> Response {
    switchyard_engine::render_error(gateway.codec(dialect.protocol()), info).map(Body::new)
}

fn json_response(body: &Value) -> Response {
    (StatusCode::OK, [(axum::http::header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

fn openai_entry(entry: &Entry) -> Value {
    let mut value = json!({
        "id": &*entry.id,
        "object": "model",
        "created": 0,
        "owned_by": &*entry.owned_by,
        "operation": entry.operation.as_str(),
    });
    if let Some(window) = entry.context_window {
        value["context_window"] = json!(window);
    }
    value
}

fn anthropic_entry(entry: &Entry) -> Value {
    json!({"type": "model", "id": &*entry.id, "display_name": &*entry.id, "created_at": "1970-01-01T00:00:00Z"})
}

fn gemini_entry(entry: &Entry) -> Value {
    let methods: &[&str] = match entry.operation {
        Operation::Chat => &["generateContent", "streamGenerateContent", "countTokens"],
        Operation::Embed => &["embedContent", "batchEmbedContents"],
        _ => &[],
    };
    let mut value = json!({
        "name": format!("models/{}", entry.id),
        "version": "001",
        "displayName": &*entry.id,
        "description": format!("{} through Switchyard ({})", entry.operation, entry.owned_by),
        "supportedGenerationMethods": methods,
    });
    if let Some(window) = entry.context_window {
        value["inputTokenLimit"] = json!(window);
    }
    value
}

/// A query parameter's value.
fn param<'q>(query: &'q str, name: &str) -> Option<&'q str> {
    query.split('&').find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
}

/// A page size within `1..=max` (`default` when absent or not a number).
fn page_size(query: &str, name: &str, default: usize, max: usize) -> usize {
    param(query, name).and_then(|v| v.parse().ok()).unwrap_or(default).clamp(1, max)
}

/// Anthropic's page: `limit` entries after `after_id`.
fn anthropic_page(entries: &[Entry], query: &str) -> Response {
    let limit = page_size(query, "limit", 20, 1000);
    let start =
        param(query, "after_id").and_then(|after| entries.iter().position(|e| &*e.id == after)).map_or(0, |at| at + 1);
    let page: Vec<&Entry> = entries.iter().skip(start).take(limit).collect();
    let data: Vec<Value> = page.iter().map(|e| anthropic_entry(e)).collect();
    json_response(&json!({
        "data": data,
        "has_more": start + page.len() < entries.len(),
        "first_id": page.first().map(|e| &*e.id),
        "last_id": page.last().map(|e| &*e.id),
    }))
}

/// Gemini's page: `pageSize` entries from `pageToken` (an offset).
fn gemini_page(entries: &[Entry], query: &str) -> Response {
    let size = page_size(query, "pageSize", 50, 1000);
    let start = param(query, "pageToken").and_then(|t| t.parse::<usize>().ok()).unwrap_or(0).min(entries.len());
    let end = (start + size).min(entries.len());
    let models: Vec<Value> = entries[start..end].iter().map(gemini_entry).collect();
    let mut body = json!({ "models": models });
    if end < entries.len() {
        body["nextPageToken"] = json!(end.to_string());
    }
    json_response(&body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dialect_follows_the_headers_its_sdk_sends() {
        let mut headers = HeaderMap::new();
        assert!(Dialect::of(&headers, None) == Dialect::OpenAi);
        assert!(Dialect::of(&headers, Some("key=abc")) == Dialect::Gemini);
        headers.insert("x-goog-api-key", "k".parse().unwrap_or_else(|_| unreachable!()));
        assert!(Dialect::of(&headers, None) == Dialect::Gemini);
        headers.insert("anthropic-version", "2023-06-01".parse().unwrap_or_else(|_| unreachable!()));
        assert!(Dialect::of(&headers, None) == Dialect::Anthropic);
        assert_eq!(param("pageSize=2&pageToken=4", "pageToken"), Some("4"));
        assert_eq!(page_size("limit=0", "limit", 20, 1000), 1);
    }
}
