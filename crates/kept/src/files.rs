//! OpenAI's files API: `POST /v1/files` (a multipart form with `file` and
//! `purpose`, at most `files.max_bytes`), `GET /v1/files`, `GET`/`DELETE
//! /v1/files/{id}` and `GET /v1/files/{id}/content`. A file is its
//! uploader key's; `purpose: batch` is checked to be JSONL of requests
//! when it arrives. A batch's output and error files are read from its
//! lines when asked for (`file-out_…`, `file-err_…`), never copied.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;
use switchyard_codec::form;
use switchyard_ir::{ErrorInfo, ErrorKind, Protocol};
use switchyard_state::Gateway;
use switchyard_store::{KeptObject, ObjectKind};

use crate::{invalid, json, new_id, not_found, now_ms, owner, plausible_id, seconds, unavailable};

const PROTOCOL: Protocol = Protocol::OpenAi;

/// The purposes a file may have.
const PURPOSES: [&str; 6] = ["batch", "assistants", "fine-tune", "vision", "user_data", "evals"];

/// What a file's metadata keeps.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FileMeta {
    pub filename: String,
    pub purpose: String,
    pub bytes: u64,
}

/// A file object in OpenAI's shape.
pub(crate) fn file_object(id: &str, meta: &FileMeta, created_ms: i64, expires_ms: Option<i64>) -> serde_json::Value {
    json!({
        "id": id,
        "object": "file",
        "bytes": meta.bytes,
        "created_at": seconds(created_ms),
        "expires_at": expires_ms.map(seconds),
        "filename": meta.filename,
        "purpose": meta.purpose,
        "status": "processed",
        "status_details": null,
    })
}

/// `POST /v1/files`.
pub async fn upload(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let owner = match owner(&gateway, PROTOCOL, &parts) {
        Ok(owner) => owner,
        Err(refused) => return refused,
    };
    let config = gateway.config.kept.files;
    let content_type = parts.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let Ok(boundary) = form::boundary(content_type).map(str::to_owned) else {
        let info =
            ErrorInfo::new(ErrorKind::InvalidRequest, "upload a multipart/form-data body with `file` and `purpose`")
                .with_status(415);
        return crate::error(&gateway, PROTOCOL, &info);
    };
    // The form's own fields are small; the file is at most `max_bytes`.
    let limit = usize::try_from(config.max_bytes).unwrap_or(usize::MAX).saturating_add(64 << 10);
    let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
        let info = ErrorInfo::new(
            ErrorKind::RequestTooLarge,
            format!("the file is larger than this gateway's {} byte limit (files.max_bytes)", config.max_bytes),
        );
        return crate::error(&gateway, PROTOCOL, &info);
    };
    let fields = match form::parts(&bytes, &boundary) {
        Ok(fields) => fields,
        Err(err) => return invalid(&gateway, PROTOCOL, err.to_string(), None),
    };
    let Some(purpose) = form::text_field(&bytes, &fields, "purpose").map(str::to_owned) else {
        return invalid(&gateway, PROTOCOL, "the form has no `purpose` (e.g. batch)", Some("purpose"));
    };
    if !PURPOSES.contains(&purpose.as_str()) {
        return invalid(
            &gateway,
            PROTOCOL,
            format!("`{purpose}` is not a purpose: use one of {PURPOSES:?}"),
            Some("purpose"),
        );
    }
    let Some(file) = fields.iter().find(|p| p.name == "file") else {
        return invalid(&gateway, PROTOCOL, "the form has no `file`", Some("file"));
    };
    let content = &bytes[file.value.clone()];
    if content.len() as u64 > config.max_bytes {
        let info = ErrorInfo::new(
            ErrorKind::RequestTooLarge,
            format!(
                "the file is {} bytes; this gateway takes at most {} (files.max_bytes)",
                content.len(),
                config.max_bytes
            ),
        );
        return crate::error(&gateway, PROTOCOL, &info);
    }
    if purpose == "batch" {
        if let Err(message) = crate::batches::openai::check_jsonl(content, gateway.config.kept.batches.max_lines) {
            return invalid(&gateway, PROTOCOL, message, Some("file"));
        }
    }
    let meta = FileMeta {
        filename: file.filename.unwrap_or("upload").chars().take(255).collect(),
        purpose,
        bytes: content.len() as u64,
    };
    let now = now_ms();
    let expires_ms = Some(now.saturating_add(i64::try_from(config.ttl.as_millis()).unwrap_or(i64::MAX)));
    let id = new_id("file-");
    let object = KeptObject {
        kind: ObjectKind::File,
        owner,
        id: id.clone(),
        created_ms: now,
        expires_ms,
        meta: serde_json::to_string(&meta).unwrap_or_default(),
        body: content.to_vec(),
    };
    if let Err(err) = gateway.kept.objects.put_object(object).await {
        return unavailable(&gateway, PROTOCOL, &err);
    }
    json(StatusCode::OK, &file_object(&id, &meta, now, expires_ms))
}

/// `GET /v1/files`' query.
#[derive(Debug, Deserialize)]
pub struct ListQuery {
    /// Only files of this purpose.
    #[serde(default)]
    purpose: Option<String>,
}

/// `GET /v1/files`.
pub async fn list(State(gateway): State<Arc<Gateway>>, Query(query): Query<ListQuery>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let owner = match owner(&gateway, PROTOCOL, &parts) {
        Ok(owner) => owner,
        Err(refused) => return refused,
    };
    let purpose = query.purpose;
    let found = match gateway.kept.objects.list_objects(ObjectKind::File, owner, now_ms(), 10_000).await {
        Ok(found) => found,
        Err(err) => return unavailable(&gateway, PROTOCOL, &err),
    };
    let data: Vec<serde_json::Value> = found
        .iter()
        .filter_map(|o| Some((o, serde_json::from_str::<FileMeta>(&o.meta).ok()?)))
        .filter(|(_, meta)| purpose.as_deref().is_none_or(|p| p == meta.purpose))
        .map(|(o, meta)| file_object(&o.id, &meta, o.created_ms, o.expires_ms))
        .collect();
    let first = data.first().and_then(|f| f["id"].as_str().map(str::to_owned));
    let last = data.last().and_then(|f| f["id"].as_str().map(str::to_owned));
    json(
        StatusCode::OK,
        &json!({"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": false}),
    )
}

/// What a file id names: an upload, or a batch's output or error file.
enum Named {
    Upload(KeptObject, FileMeta),
    Batch { batch: String, errors: bool },
}

async fn find(gateway: &Gateway, owner: &str, id: &str) -> Result<Option<Named>, Response> {
    if !plausible_id(id) {
        return Ok(None);
    }
    if let Some((batch, errors)) = crate::batches::openai::result_file(id) {
        return Ok(Some(Named::Batch { batch, errors }));
    }
    match gateway.kept.objects.get_object(ObjectKind::File, owner.to_owned(), id.to_owned(), now_ms()).await {
        Ok(Some(object)) => match serde_json::from_str::<FileMeta>(&object.meta) {
            Ok(meta) => Ok(Some(Named::Upload(object, meta))),
            Err(_) => Ok(None),
        },
        Ok(None) => Ok(None),
        Err(err) => Err(unavailable(gateway, PROTOCOL, &err)),
    }
}

/// `GET /v1/files/{id}`.
pub async fn get(State(gateway): State<Arc<Gateway>>, Path(id): Path<String>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let owner = match owner(&gateway, PROTOCOL, &parts) {
        Ok(owner) => owner,
        Err(refused) => return refused,
    };
    match find(&gateway, &owner, &id).await {
        Err(response) => response,
        Ok(None) => not_found(&gateway, PROTOCOL, &format!("file `{id}`")),
        Ok(Some(Named::Upload(object, meta))) => {
            json(StatusCode::OK, &file_object(&object.id, &meta, object.created_ms, object.expires_ms))
        }
        Ok(Some(Named::Batch { batch, errors })) => {
            match crate::batches::openai::result_lines(&gateway, &owner, &batch, errors).await {
                Err(response) => response,
                Ok(None) => not_found(&gateway, PROTOCOL, &format!("file `{id}`")),
                Ok(Some((content, created_ms))) => {
                    let meta = FileMeta {
                        filename: format!("{batch}_{}.jsonl", if errors { "error" } else { "output" }),
                        purpose: "batch_output".into(),
                        bytes: content.len() as u64,
                    };
                    json(StatusCode::OK, &file_object(&id, &meta, created_ms, None))
                }
            }
        }
    }
}

/// `GET /v1/files/{id}/content`.
pub async fn content(State(gateway): State<Arc<Gateway>>, Path(id): Path<String>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let owner = match owner(&gateway, PROTOCOL, &parts) {
        Ok(owner) => owner,
        Err(refused) => return refused,
    };
    let content = match find(&gateway, &owner, &id).await {
        Err(response) => return response,
        Ok(None) => return not_found(&gateway, PROTOCOL, &format!("file `{id}`")),
        Ok(Some(Named::Upload(object, _))) => object.body,
        Ok(Some(Named::Batch { batch, errors })) => {
            match crate::batches::openai::result_lines(&gateway, &owner, &batch, errors).await {
                Err(response) => return response,
                Ok(None) => return not_found(&gateway, PROTOCOL, &format!("file `{id}`")),
                Ok(Some((content, _))) => content,
            }
        }
    };
    let mut response = (StatusCode::OK, Body::from(content)).into_response();
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    response
}

/// `DELETE /v1/files/{id}`.
pub async fn delete(State(gateway): State<Arc<Gateway>>, Path(id): Path<String>, request: Request) -> Response {
    let (parts, _) = request.into_parts();
    let owner = match owner(&gateway, PROTOCOL, &parts) {
        Ok(owner) => owner,
        Err(refused) => return refused,
    };
    if !plausible_id(&id) {
        return not_found(&gateway, PROTOCOL, &format!("file `{id}`"));
    }
    match gateway.kept.objects.delete_object(ObjectKind::File, owner, id.clone()).await {
        Ok(true) => json(StatusCode::OK, &json!({"id": id, "object": "file", "deleted": true})),
        Ok(false) => not_found(&gateway, PROTOCOL, &format!("file `{id}`")),
        Err(err) => unavailable(&gateway, PROTOCOL, &err),
    }
}
