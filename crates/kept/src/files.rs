//! OpenAI's files API: `POST /v1/files` (a multipart form with `file` and
//! `purpose`, at most `files.max_bytes`, read as it arrives and written to
//! the store in chunks: an upload is never held whole), `GET /v1/files`,
//! `GET`/`DELETE /v1/files/{id}` and `GET /v1/files/{id}/content` (sent
//! chunk by chunk). A file is its uploader key's; `purpose: batch` is
//! checked to be JSONL of requests as it arrives. A batch's output and
//! error files are read from its lines when asked for (`file-out_…`,
//! `file-err_…`), never copied.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::json;
use switchyard_codec::form;
use switchyard_ir::{ErrorInfo, ErrorKind, Protocol};
use switchyard_state::Gateway;
use switchyard_store::{KeptObject, ObjectKind};

use crate::batches::openai::FileCheck;
use crate::door::{in_time, Door};
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

/// Bytes of a file's content written to the store at once.
const CHUNK: usize = 1 << 20;

/// What the form reader may hold beyond what it handed over (the parts'
/// headers and boundaries, what it read ahead): a form past it is refused,
/// so no part's headers or preamble can make an upload held whole.
const AHEAD: u64 = 16 << 20;

/// The most parts a form may have.
const MAX_PARTS: usize = switchyard_codec::form::MAX_PARTS;

/// The largest field other than `file`.
const MAX_FIELD: u64 = 64 << 10;

/// Why an upload was refused.
enum Refused {
    /// The caller's fault: a 400 naming the field.
    Invalid(String, Option<&'static str>),
    /// Another refusal in the caller's protocol.
    Info(ErrorInfo),
    /// The answer as it stands.
    Answer(Response),
}

/// `POST /v1/files`: the form read as it arrives, the file's content
/// written to the store in chunks (never held whole), within the body read
/// timeout, the key's limits and its quota.
pub async fn upload(State(gateway): State<Arc<Gateway>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let content_type = parts.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let Ok(boundary) = form::boundary(content_type).map(str::to_owned) else {
        let info =
            ErrorInfo::new(ErrorKind::InvalidRequest, "upload a multipart/form-data body with `file` and `purpose`")
                .with_status(415);
        return crate::error(&gateway, PROTOCOL, &info);
    };
    let mut door = match Door::enter(&gateway, PROTOCOL, &parts).await {
        Ok(door) => door,
        Err(refused) => return refused,
    };
    let mut upload = Upload::new(&gateway, &door.owner);
    let received = match in_time(&gateway, receive(&gateway, &mut door, &mut upload, boundary, body)).await {
        Ok(Ok(received)) => received,
        Ok(Err(Refused::Invalid(message, param))) => return invalid(&gateway, PROTOCOL, message, param),
        Ok(Err(Refused::Info(info))) | Err(info) => return crate::error(&gateway, PROTOCOL, &info),
        Ok(Err(Refused::Answer(response))) => return response,
    };
    let config = gateway.config.kept.files;
    let meta = FileMeta { filename: received.filename, purpose: received.purpose, bytes: upload.size };
    let now = now_ms();
    let expires_ms = Some(now.saturating_add(i64::try_from(config.ttl.as_millis()).unwrap_or(i64::MAX)));
    let object = KeptObject {
        kind: ObjectKind::File,
        owner: door.owner.clone(),
        id: upload.id.clone(),
        created_ms: now,
        expires_ms,
        meta: serde_json::to_string(&meta).unwrap_or_default(),
        body: Vec::new(),
        size: upload.size,
        chunks: upload.chunks,
        user_tag: None,
    };
    if let Err(err) = gateway.kept.objects.put_object(object).await {
        return unavailable(&gateway, PROTOCOL, &err);
    }
    upload.kept = true;
    json(StatusCode::OK, &file_object(&upload.id, &meta, now, expires_ms))
}

/// What a form said besides its file.
struct Received {
    filename: String,
    purpose: String,
}

/// Reads the form, writing its file through `upload`.
async fn receive(
    gateway: &Gateway,
    door: &mut Door,
    upload: &mut Upload,
    boundary: String,
    body: Body,
) -> Result<Received, Refused> {
    use futures_util::StreamExt;
    let config = gateway.config.kept.files;
    // Bytes given to the form reader, and bytes it handed over.
    let fed = Arc::new(AtomicU64::new(0));
    let handed = Arc::new(AtomicU64::new(0));
    let stream = {
        let (fed, handed) = (fed.clone(), handed.clone());
        body.into_data_stream().map(move |data| {
            let data = data.map_err(std::io::Error::other)?;
            let fed = fed.fetch_add(data.len() as u64, Ordering::Relaxed) + data.len() as u64;
            if fed.saturating_sub(handed.load(Ordering::Relaxed)) > AHEAD {
                return Err(std::io::Error::other("the form holds too much outside its fields"));
            }
            Ok::<Bytes, std::io::Error>(data)
        })
    };
    let limits = multer::SizeLimit::new()
        .whole_stream(config.max_bytes.saturating_add(AHEAD))
        .per_field(MAX_FIELD)
        .for_field("file", config.max_bytes);
    let mut form = multer::Multipart::with_constraints(stream, boundary, multer::Constraints::new().size_limit(limits));
    let too_large = |max_bytes: u64| {
        Refused::Info(ErrorInfo::new(
            ErrorKind::RequestTooLarge,
            format!("the file is larger than this gateway's {max_bytes} byte limit (files.max_bytes)"),
        ))
    };
    let form_error = |err: multer::Error| match err {
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. } => {
            too_large(config.max_bytes)
        }
        err => Refused::Invalid(format!("the multipart body is malformed: {err}"), None),
    };
    let mut purpose: Option<String> = None;
    let mut filename: Option<String> = None;
    let mut check: Option<FileCheck> =
        Some(FileCheck::new(gateway.config.kept.batches.max_lines, crate::batches::openai::max_line(gateway)));
    let mut fields = 0;
    while let Some(mut field) = form.next_field().await.map_err(form_error)? {
        fields += 1;
        if fields > MAX_PARTS {
            return Err(Refused::Invalid(format!("the form has more than {MAX_PARTS} parts"), None));
        }
        match field.name() {
            Some("file") if filename.is_none() => {
                filename = Some(field.file_name().unwrap_or("upload").chars().take(255).collect());
                // A file that is not a batch's input needs no reading.
                if purpose.as_deref().is_some_and(|p| p != "batch") {
                    check = None;
                }
                while let Some(data) = field.chunk().await.map_err(form_error)? {
                    handed.fetch_add(data.len() as u64, Ordering::Relaxed);
                    if let Some(check) = &mut check {
                        check.feed(&data);
                    }
                    upload.write(door, &data).await?;
                }
            }
            Some("file") => return Err(Refused::Invalid("the form has two `file`s".into(), Some("file"))),
            Some("purpose") => {
                let text = field.text().await.map_err(form_error)?;
                handed.fetch_add(text.len() as u64, Ordering::Relaxed);
                purpose = Some(text);
            }
            // Fields this gateway does not read (`expires_after[...]`) are passed over.
            _ => {
                while let Some(data) = field.chunk().await.map_err(form_error)? {
                    handed.fetch_add(data.len() as u64, Ordering::Relaxed);
                }
            }
        }
    }
    upload.flush().await?;
    let Some(purpose) = purpose else {
        return Err(Refused::Invalid("the form has no `purpose` (e.g. batch)".into(), Some("purpose")));
    };
    if !PURPOSES.contains(&purpose.as_str()) {
        let message = format!("`{purpose}` is not a purpose: use one of {PURPOSES:?}");
        return Err(Refused::Invalid(message, Some("purpose")));
    }
    let Some(filename) = filename else {
        return Err(Refused::Invalid("the form has no `file`".into(), Some("file")));
    };
    if purpose == "batch" {
        if let Some(check) = check {
            check.finish().map_err(|message| Refused::Invalid(message, Some("file")))?;
        }
    }
    Ok(Received { filename, purpose })
}

/// A file's content on its way to the store: written in chunks of
/// [`CHUNK`] bytes as it arrives, each taken from the key's quota first.
/// Dropped before it is `kept` (refused, cut short, timed out), what it
/// wrote is removed.
struct Upload {
    gateway: Arc<Gateway>,
    owner: String,
    id: String,
    held: Vec<u8>,
    chunks: u32,
    size: u64,
    kept: bool,
}

impl Upload {
    fn new(gateway: &Arc<Gateway>, owner: &str) -> Upload {
        Upload {
            gateway: gateway.clone(),
            owner: owner.to_owned(),
            id: new_id("file-"),
            held: Vec::with_capacity(CHUNK),
            chunks: 0,
            size: 0,
            kept: false,
        }
    }

    /// The file's next bytes.
    async fn write(&mut self, door: &mut Door, mut data: &[u8]) -> Result<(), Refused> {
        door.take(data.len() as u64).map_err(Refused::Info)?;
        self.size += data.len() as u64;
        while !data.is_empty() {
            let room = CHUNK - self.held.len();
            let (now, later) = data.split_at(room.min(data.len()));
            self.held.extend_from_slice(now);
            data = later;
            if self.held.len() == CHUNK {
                self.flush().await?;
            }
        }
        Ok(())
    }

    /// Writes what is held as the next chunk.
    async fn flush(&mut self) -> Result<(), Refused> {
        if self.held.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.held, Vec::with_capacity(CHUNK));
        let (owner, id) = (self.owner.clone(), self.id.clone());
        let written = self.gateway.kept.objects.put_chunk(ObjectKind::File, owner, id, self.chunks, now_ms(), chunk);
        match written.await {
            Ok(()) => {
                self.chunks += 1;
                Ok(())
            }
            Err(err) => Err(Refused::Answer(unavailable(&self.gateway, PROTOCOL, &err))),
        }
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        if self.kept || self.chunks == 0 {
            return;
        }
        let (objects, owner, id) = (self.gateway.kept.objects.clone(), self.owner.clone(), self.id.clone());
        switchyard_tasks::work(async move {
            if let Err(err) = objects.delete_object(ObjectKind::File, owner, id).await {
                tracing::warn!(error = %err, "an upload cut short could not be removed; the purge will");
            }
        });
    }
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
        Ok(Some(Named::Upload(object, _))) if object.chunks > 0 => return chunked(&gateway, object),
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

/// A file kept in chunks, sent chunk by chunk as the store gives them.
fn chunked(gateway: &Gateway, object: KeptObject) -> Response {
    let objects = gateway.kept.objects.clone();
    let (owner, id, chunks) = (object.owner, object.id, object.chunks);
    let stream = futures_util::stream::unfold(0u32, move |seq| {
        let (objects, owner, id) = (objects.clone(), owner.clone(), id.clone());
        async move {
            if seq >= chunks {
                return None;
            }
            let read = match objects.get_chunk(ObjectKind::File, owner, id, seq).await {
                Ok(Some(chunk)) => Ok(Bytes::from(chunk)),
                Ok(None) => Err(std::io::Error::other("the file was removed while it was read")),
                Err(err) => Err(std::io::Error::other(err.to_string())),
            };
            // After a failure the stream ends: the caller sees a cut body.
            let next = if read.is_ok() { seq + 1 } else { chunks };
            Some((read, next))
        }
    });
    let mut response = (StatusCode::OK, Body::from_stream(stream)).into_response();
    let headers = response.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(object.size));
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
