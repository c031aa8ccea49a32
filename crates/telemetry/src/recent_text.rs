//! Prompt and reply text of the most recent requests, for the console's
//! request detail, found by the ledger row's entry (an id the gateway
//! draws, so a caller's chosen request id cannot reach another's text). Kept only when the operator turned on
//! `telemetry.request_log.include_text`, in memory only, bounded in count
//! ([`KEPT`]) and in size per body ([`BODY_BYTES`]): it is never written to
//! the ledger.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;

/// Requests whose text is kept.
pub const KEPT: usize = 256;
/// Bytes kept of each body (the rest is cut off, marked as such).
pub const BODY_BYTES: usize = 32 * 1024;

/// One request's text.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Text {
    /// The request body, as sent.
    pub request: Option<String>,
    /// A whole reply's body (streams keep none).
    pub response: Option<String>,
}

/// A body as kept: its first [`BODY_BYTES`] (copied, so the request's
/// buffer is not held) and whether there was more.
type Body = (Bytes, bool);
/// A ledger entry with its request and reply bodies.
type Kept = (i64, Option<Body>, Option<Body>);

/// The ring of recent texts.
#[derive(Debug, Default)]
pub struct RecentText {
    ring: Mutex<VecDeque<Kept>>,
}

impl RecentText {
    /// Keeps entry `entry`'s bodies, forgetting the oldest past [`KEPT`].
    pub fn keep(&self, entry: i64, request: Option<&Bytes>, response: Option<&Bytes>) {
        if request.is_none() && response.is_none() {
            return;
        }
        let cut = |body: &Bytes| (Bytes::copy_from_slice(&body[..body.len().min(BODY_BYTES)]), body.len() > BODY_BYTES);
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        if ring.len() == KEPT {
            ring.pop_front();
        }
        ring.push_back((entry, request.map(cut), response.map(cut)));
    }

    /// The text kept for entry `entry`.
    pub fn find(&self, entry: i64) -> Option<Text> {
        let ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let (_, request, response) = ring.iter().rev().find(|(id, _, _)| *id == entry)?;
        let text = |body: &Option<Body>| {
            body.as_ref().map(|(b, cut)| {
                let mut text = String::from_utf8_lossy(b).into_owned();
                if *cut {
                    text.push_str("\n… (cut at 32 KiB)");
                }
                text
            })
        };
        Some(Text { request: text(request), response: text(response) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_the_newest_and_cuts_long_bodies() {
        let recent = RecentText::default();
        for i in 0..=KEPT {
            recent.keep(i as i64, Some(&Bytes::from(format!("prompt {i}"))), None);
        }
        assert!(recent.find(0).is_none());
        assert_eq!(
            recent.find(KEPT as i64).and_then(|t| t.request).as_deref(),
            Some(format!("prompt {KEPT}").as_str())
        );
        let exact = Bytes::from(vec![b'b'; BODY_BYTES]);
        recent.keep(-3, Some(&exact), None);
        assert!(recent.find(-3).and_then(|t| t.request).is_some_and(|t| t.len() == BODY_BYTES), "not cut");
        let long = Bytes::from(vec![b'a'; BODY_BYTES * 2]);
        recent.keep(-1, Some(&long), Some(&Bytes::from_static(b"reply")));
        let text = recent.find(-1).unwrap_or(Text { request: None, response: None });
        assert!(text.request.is_some_and(|t| t.len() < BODY_BYTES + 40 && t.ends_with("(cut at 32 KiB)")));
        assert_eq!(text.response.as_deref(), Some("reply"));
        recent.keep(-2, None, None);
        assert!(recent.find(-2).is_none());
    }
}
