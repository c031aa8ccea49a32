//! The seam where a concern joins the request path (`Stage`), over real
//! TCP. Adding a concern touches one file: this test adds three stages (a
//! header stamp, a refusal, a stored answer) without editing the engine.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{chat_body, ingress_path, post, spawn_with};
use http::HeaderValue;
use switchyard_protocol::codec;
use switchyard_protocol::ir::{ErrorInfo, ErrorKind, Protocol};
use switchyard_state::call::Call;
use switchyard_state::stage::{Stage, StageFuture, Stored, Verdict};
use switchyard_state::Gateway;

/// Stamps every answer's head.
struct Stamp;

impl Stage for Stamp {
    fn name(&self) -> &'static str {
        "stamp"
    }

    fn on_response(&self, call: &Call, head: &mut http::response::Parts) {
        head.headers.insert("x-stamped", HeaderValue::from_static("yes"));
        head.headers.insert("x-stamped-for", HeaderValue::from_static(call.ingress.as_str()));
    }
}

/// Ends requests that mention a word, in the caller's protocol.
struct Refuse;

impl Stage for Refuse {
    fn name(&self) -> &'static str {
        "refuse"
    }

    fn on_request<'a>(&'a self, call: &'a mut Call) -> Option<StageFuture<'a, Verdict>> {
        let mentions = memchr_in(&call.body, b"forbidden");
        Some(Box::pin(async move {
            match mentions {
                true => Verdict::Answer(ErrorInfo::new(ErrorKind::InvalidRequest, "refused by policy `words`")),
                false => Verdict::Continue,
            }
        }))
    }
}

fn memchr_in(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Answers requests that mention `stored` from what it keeps, and counts
/// the whole replies it is offered.
#[derive(Default)]
struct Keeper {
    offered: AtomicUsize,
}

impl Stage for Keeper {
    fn name(&self) -> &'static str {
        "keeper"
    }

    fn lookup<'a>(&'a self, call: &'a Call) -> Option<StageFuture<'a, Option<Stored>>> {
        if !memchr_in(&call.body, b"stored") {
            return None;
        }
        let reply = http::Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .header("x-from", "keeper")
            .body(bytes::Bytes::from_static(br#"{"kept":true}"#))
            .unwrap();
        Some(Box::pin(async move { Some(reply) }))
    }

    fn store(&self, _call: &Call, reply: &bytes::Bytes) {
        assert!(!reply.is_empty());
        self.offered.fetch_add(1, Ordering::Relaxed);
    }
}

#[tokio::test]
async fn a_concern_joins_the_path_through_the_seam() {
    let yaml =
        "providers:\n  p: { protocol: openai, base_url: mock:// }\n  c: { protocol: anthropic, base_url: mock:// }\n\
                models:\n  m: { provider: p }\n  claude: { provider: c }\n";
    let config = switchyard_config::load(yaml, &|_| None).unwrap();
    let keeper = Arc::new(Keeper::default());
    let gateway = Gateway::new(config, codec)
        .unwrap()
        .with_stage(Arc::new(Stamp))
        .with_stage(Arc::new(Refuse))
        .with_stage(keeper.clone());
    let gateway = Arc::new(gateway.with_telemetry());
    let settings = switchyard_gateway::server::data_settings(&gateway, Arc::default());
    let addr = spawn_with(switchyard_gateway::router(gateway.clone()), settings).await;

    // The stamp is on every answer: served, translated, refused, unknown.
    for (protocol, model) in [(Protocol::OpenAi, "m"), (Protocol::Anthropic, "m"), (Protocol::OpenAi, "nope")] {
        let reply =
            post(addr, &ingress_path(protocol, model, false), &[], chat_body(protocol, model, "hello", false)).await;
        assert_eq!(reply.headers["x-stamped"], "yes", "{protocol} {model}: {}", reply.status);
        assert_eq!(reply.headers["x-stamped-for"], protocol.as_str());
    }
    assert_eq!(keeper.offered.load(Ordering::Relaxed), 2, "each whole reply is offered to the stages");

    // A refusal in the caller's own protocol, before anything is routed.
    let refused = post(
        addr,
        &ingress_path(Protocol::Anthropic, "claude", false),
        &[],
        chat_body(Protocol::Anthropic, "claude", "a forbidden word", false),
    )
    .await;
    assert_eq!(refused.status, 400);
    assert_eq!(codec(Protocol::Anthropic).extract_error(400, &refused.body).kind, ErrorKind::InvalidRequest);
    assert_eq!(refused.headers["x-stamped"], "yes");

    // A stored answer stands in for routing.
    let stored =
        post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "m", "stored please", false)).await;
    assert_eq!((stored.status.as_u16(), &stored.body[..]), (200, &br#"{"kept":true}"#[..]));
    assert_eq!(stored.headers["x-from"], "keeper");
    assert!(stored.headers.contains_key("x-request-id"));
    assert!(!stored.headers.contains_key("x-switchyard-lane"), "no lane served it");
}
