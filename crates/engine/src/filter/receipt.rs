//! Receipt notes (`receipts:` on): what the upstream said of itself, for
//! the request's receipt — its id of the request (its request-id header,
//! else its reply's id) and the model it says served. In the chain after
//! the identity fill, so it reads the upstream's own words before any are
//! filled in. Absent when receipts are off: the request path pays nothing.
//!
//! Reads: the serving upstream's head, a translated reply or stream's
//! first event, a passthrough reply's or stream's first bytes. Writes: the
//! record's note of them.

use std::sync::LazyLock;

use bytes::Bytes;
use http::header::HeaderName;
use http::HeaderMap;
use memchr::memmem::Finder;
use switchyard_codec::scan::first_string_member_by;
use switchyard_ir::{Response, StreamEvent};
use switchyard_state::Gateway;

use super::{Ended, Filter, FilterFuture, ReplyCx, Serving};
use crate::render::Whole;

/// The upstream's request-id headers, by vendor (names made once: a lookup
/// by `&str` parses the name first).
static REQUEST_ID_HEADERS: [HeaderName; 5] = [
    HeaderName::from_static("x-request-id"),
    HeaderName::from_static("request-id"),
    HeaderName::from_static("x-amzn-requestid"),
    HeaderName::from_static("x-goog-request-id"),
    HeaderName::from_static("x-cohere-request-id"),
];

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

/// The searchers for the members a reply's head names itself by, built
/// once (building one costs as much as a search).
struct Names {
    model: Finder<'static>,
    model_version: Finder<'static>,
    id: Finder<'static>,
    response_id: Finder<'static>,
}

static NAMES: LazyLock<Names> = LazyLock::new(|| Names {
    model: Finder::new(br#""model""#),
    model_version: Finder::new(br#""modelVersion""#),
    id: Finder::new(br#""id""#),
    response_id: Finder::new(br#""responseId""#),
});

/// The first JSON string of member `name` in `bytes` (a cheap look at a
/// reply's or event's head, not a parse: ids and model names hold no
/// escapes), when it is short enough to be one.
fn string_after(bytes: &[u8], name: &Finder<'_>) -> Option<String> {
    first_string_member_by(bytes, name).filter(|s| !s.is_empty() && s.len() <= 256).map(str::to_owned)
}

/// The model and the id a reply's head names.
fn model_and_id(head: &[u8]) -> (Option<String>, Option<String>) {
    let names = &*NAMES;
    let model = string_after(head, &names.model).or_else(|| string_after(head, &names.model_version));
    let id = string_after(head, &names.id).or_else(|| string_after(head, &names.response_id));
    (model, id)
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
                .find_map(|name| headers.get(name))
                .and_then(|value| value.to_str().ok())
                .filter(|value| value.len() <= 256)
                .map(str::to_owned)
        });
    }

    fn on_bytes(&mut self, bytes: Bytes) -> Bytes {
        if self.looked < LOOK_CHUNKS && self.model.is_none() {
            self.looked += 1;
            let (model, id) = model_and_id(&bytes);
            self.model = model;
            if self.body_id.is_none() {
                self.body_id = id;
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
            let (model, id) = model_and_id(&whole.body[..whole.body.len().min(4096)]);
            self.model = model;
            self.body_id = id;
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
    use super::model_and_id;

    #[test]
    fn the_model_and_id_of_a_head_are_read_without_a_parse() {
        let chunk =
            br#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model" : "gpt-4o-2024-08-06","choices":[]}"#;
        assert_eq!(model_and_id(chunk), (Some("gpt-4o-2024-08-06".into()), Some("chatcmpl-1".into())));
        // A name that is a value is passed over.
        assert_eq!(model_and_id(br#"{"a":"model","model":"m"}"#).0.as_deref(), Some("m"));
        // Gemini names itself by its own members.
        let gemini = br#"{"candidates":[],"modelVersion":"gemini-2.5","responseId":"r-1"}"#;
        assert_eq!(model_and_id(gemini), (Some("gemini-2.5".into()), Some("r-1".into())));
        // Nothing past 256 bytes, and nothing empty.
        let long = format!(r#"{{"model":"{}","id":""}}"#, "m".repeat(300));
        assert_eq!(model_and_id(long.as_bytes()), (None, None));
    }
}
