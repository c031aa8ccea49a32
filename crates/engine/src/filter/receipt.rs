//! Receipt notes (`receipts:` on): what the upstream said of itself, for
//! the request's receipt — its id of the request (its request-id header,
//! else its reply's id) and the model it says served. In the chain after
//! the identity fill, so it reads the upstream's own words before any are
//! filled in. Absent when receipts are off: the request path pays nothing.
//!
//! Reads: the serving upstream's head, a translated reply or stream's
//! first event, a passthrough reply's or stream's first bytes. Writes: the
//! record's note of them.

use bytes::Bytes;
use http::HeaderMap;
use switchyard_ir::{Response, StreamEvent};
use switchyard_state::Gateway;

use super::{Ended, Filter, FilterFuture, ReplyCx, Serving};
use crate::render::Whole;

/// The upstream's request-id headers, by vendor.
const REQUEST_ID_HEADERS: [&str; 5] =
    ["x-request-id", "request-id", "x-amzn-requestid", "x-goog-request-id", "x-cohere-request-id"];

/// Passthrough stream chunks looked at for the first event's id and model.
const LOOK_CHUNKS: u8 = 4;

/// What the upstream said so far.
#[derive(Default)]
pub(crate) struct Notes {
    id: Option<String>,
    body_id: Option<String>,
    model: Option<String>,
    looked: u8,
}

impl Notes {
    /// Only when receipts are on.
    pub(crate) fn of(gateway: &Gateway) -> Option<Notes> {
        gateway.governance.as_ref()?.receipts.as_ref()?;
        Some(Notes::default())
    }

    fn told(&mut self, cx: &mut ReplyCx<'_>) {
        let id = self.id.take().or_else(|| self.body_id.take());
        cx.record.upstream_said(id, self.model.take());
    }

    fn first_event(&mut self, id: &str, model: &str) {
        if self.model.is_none() && !model.is_empty() {
            self.model = Some(model.to_owned());
        }
        if self.body_id.is_none() && !id.is_empty() {
            self.body_id = Some(id.to_owned());
        }
    }
}

/// The first JSON string after `"name"` and a colon in `bytes` (a cheap
/// look at a reply's or event's head, not a parse: ids and model names
/// hold no escapes).
fn string_after(bytes: &[u8], name: &str) -> Option<String> {
    let quoted = format!("\"{name}\"");
    let mut from = 0;
    while let Some(at) = memchr::memmem::find(&bytes[from..], quoted.as_bytes()) {
        let rest = &bytes[from + at + quoted.len()..];
        let rest = rest.trim_ascii_start();
        if let Some(value) = rest.strip_prefix(b":").map(<[u8]>::trim_ascii_start).and_then(|v| v.strip_prefix(b"\"")) {
            let end = memchr::memchr2(b'"', b'\\', value)?;
            return std::str::from_utf8(&value[..end])
                .ok()
                .filter(|s| !s.is_empty() && s.len() <= 256)
                .map(str::to_owned);
        }
        from += at + quoted.len();
    }
    None
}

impl Filter for Notes {
    fn name(&self) -> &'static str {
        "receipt"
    }

    fn on_serving(&mut self, serving: &Serving<'_>) {
        // Another lane serves now: what an earlier one said is not this one's.
        *self = Notes::default();
        self.id = serving.upstream.and_then(|headers: &HeaderMap| {
            REQUEST_ID_HEADERS
                .iter()
                .find_map(|name| headers.get(*name))
                .and_then(|value| value.to_str().ok())
                .filter(|value| value.len() <= 256)
                .map(str::to_owned)
        });
    }

    fn on_bytes(&mut self, bytes: Bytes) -> Bytes {
        if self.looked < LOOK_CHUNKS && self.model.is_none() {
            self.looked += 1;
            self.model = string_after(&bytes, "model").or_else(|| string_after(&bytes, "modelVersion"));
            if self.body_id.is_none() {
                self.body_id = string_after(&bytes, "id").or_else(|| string_after(&bytes, "responseId"));
            }
        }
        bytes
    }

    fn on_delivered(&mut self, events: &[StreamEvent]) {
        if let Some(StreamEvent::MessageStart { id, model, .. }) = events.first() {
            self.first_event(id, model);
        }
    }

    fn on_reply<'a>(
        &'a mut self,
        reply: &'a mut Response,
        _lane: switchyard_ir::Protocol,
        _cx: &mut ReplyCx<'_>,
    ) -> Option<FilterFuture<'a, ()>> {
        let (id, model) = (reply.id.clone(), reply.model.clone());
        self.first_event(&id, &model);
        None
    }

    fn on_whole(&mut self, whole: &mut Whole, cx: &mut ReplyCx<'_>) -> Result<(), switchyard_ir::ErrorInfo> {
        if self.model.is_none() {
            let head = &whole.body[..whole.body.len().min(4096)];
            self.model = string_after(head, "model").or_else(|| string_after(head, "modelVersion"));
            self.body_id = string_after(head, "id").or_else(|| string_after(head, "responseId"));
        }
        self.told(cx);
        Ok(())
    }

    fn on_end<'a>(&'a mut self, _ended: Ended, cx: &mut ReplyCx<'_>) -> Option<FilterFuture<'a, ()>> {
        self.told(cx);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::string_after;

    #[test]
    fn the_first_string_after_a_name_is_read_without_a_parse() {
        let chunk =
            br#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model" : "gpt-4o-2024-08-06","choices":[]}"#;
        assert_eq!(string_after(chunk, "model").as_deref(), Some("gpt-4o-2024-08-06"));
        assert_eq!(string_after(chunk, "id").as_deref(), Some("chatcmpl-1"));
        // A name that is a value is passed over.
        assert_eq!(string_after(br#"{"a":"model","model":"m"}"#, "model").as_deref(), Some("m"));
        assert_eq!(string_after(br#"{"modelVersion":"gemini-2.5"}"#, "model"), None);
    }
}
