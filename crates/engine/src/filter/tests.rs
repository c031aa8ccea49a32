//! The filters against the engine's fixture gateway (`crate::testing`: its
//! lanes answered in-process, no listener): the chain's order, a trivial
//! filter added with one line, and each filter's hooks.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use switchyard_ir::{BlockStart, Delta, Protocol, Response, StreamEvent, Usage};

use super::*;
use crate::exchange::{Exchange, Shape};
use crate::testing::{self, call, openai, send};

const CONFIG: &str = "providers:\n  mock: { protocol: openai, base_url: mock:// }\n  \
    mock-gemini: { protocol: gemini, base_url: mock:// }\n  \
    mock-cohere: { protocol: cohere, base_url: mock:// }\n\
    models:\n  gpt: { provider: mock }\n  gem: { provider: mock-gemini }\n  command: { provider: mock-cohere }\n\
    retention: { key: \"5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a\", days: 7 }\n\
    policies:\n  \
      pii: { detect: [email], action: mask, direction: request }\n  \
      words: { literal: [\"forbidden-phrase\"], action: block }\n  \
      ids: { regex: { ticket: \"TCK-[0-9]{6}\" }, action: mask, direction: response }\n\
    pools:\n  \
      guarded: { policies: [pii, words, ids], members: [{ model: gpt }] }\n  \
      everything: { policies: [pii, ids], cache: { ttl: 5m }, members: [{ model: gpt }, { model: gem }], \
                    failover: { stream_failure: continue } }\n  \
      cached: { cache: { ttl: 5m }, members: [{ model: gpt }] }\n  \
      plain: { members: [{ model: gpt }] }\n  \
      cohere: { members: [{ model: command }] }\n";

fn stamped() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("x-stamp", HeaderValue::from_static("yes"));
    headers
}

#[tokio::test]
async fn the_chain_is_built_in_the_order_its_builder_states() {
    let gateway = testing::gateway(CONFIG);
    let call = call(Protocol::OpenAi, &openai("everything", "hi", true), stamped());
    let pool = gateway.resolve("everything").unwrap();
    let shape = Shape::of(&gateway, &call, pool);
    assert!(shape.continue_stream);
    let chain = build(&gateway, &call, pool, &shape);
    assert_eq!(
        chain.names(),
        ["identity", "retention", "guardrails", "signatures", "response_cache", "continuation", "stamp"],
        "outermost first (a stream's usage mark is its row's: no usage_mark)"
    );
    // A whole reply is marked, second from the outside.
    let whole = testing::call(Protocol::OpenAi, &openai("everything", "hi", false), stamped());
    let shape = Shape::of(&gateway, &whole, pool);
    assert_eq!(build(&gateway, &whole, pool, &shape).names()[..2], ["identity", "usage_mark"]);
    // A concern that does not apply is not in the chain.
    let plain = testing::call(Protocol::OpenAi, &openai("plain", "hi", false), HeaderMap::new());
    let pool = gateway.resolve("plain").unwrap();
    let chain = build(&gateway, &plain, pool, &Shape::of(&gateway, &plain, pool));
    assert_eq!(chain.names(), ["identity", "usage_mark", "retention"]);
}

#[tokio::test]
async fn a_header_stamp_is_one_file_and_one_builder_line() {
    let gateway = testing::gateway(CONFIG);
    for stream in [false, true] {
        let answer = send(&gateway, call(Protocol::OpenAi, &openai("plain", "hi", stream), stamped())).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(answer.headers["x-stamped"], "yes", "stream: {stream}");
    }
    // A refusal's head too.
    let refused =
        send(&gateway, call(Protocol::OpenAi, &openai("guarded", "a forbidden-phrase", false), stamped())).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(refused.headers["x-stamped"], "yes");
    // Only asked for.
    let unstamped = send(&gateway, call(Protocol::OpenAi, &openai("plain", "hi", false), HeaderMap::new())).await;
    assert!(!unstamped.headers.contains_key("x-stamped"));
}

#[tokio::test]
async fn the_guard_masks_the_request_before_the_lane_and_the_reply_whole_and_streamed() {
    let gateway = testing::gateway(CONFIG);
    for stream in [false, true] {
        let body = openai("guarded", "mail me at ana@example.com about TCK-123456", stream);
        let answer = send(&gateway, call(Protocol::OpenAi, &body, HeaderMap::new())).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        // The mock lane echoes what it was sent: the address never reached it.
        assert!(!answer.body.contains("ana@example.com"), "{}", answer.body);
        assert!(answer.body.contains("[EMAIL_1]"), "{}", answer.body);
        // The reply's ticket id is masked on the way back.
        assert!(!answer.body.contains("TCK-123456"), "{}", answer.body);
    }
}

#[tokio::test]
async fn a_blocked_reply_mid_stream_ends_with_the_callers_error() {
    let gateway = testing::gateway(CONFIG);
    let screen = gateway.guardrails.for_key(&["ids".to_owned(), "words".to_owned()]).unwrap();
    let mut guard = guard::Guard::over(&gateway, screen);
    let mut record = testing::record(&gateway, Protocol::OpenAi);
    let call = call(Protocol::OpenAi, &openai("plain", "hi", true), HeaderMap::new());
    let mut cx = ReplyCx { env: Env::of(&gateway), call: &call, record: &mut record, part: Usage::default() };
    // A ticket id split across three deltas is held back until it can be masked.
    let mut events = vec![
        StreamEvent::BlockStart { index: 0, block: BlockStart::Text },
        StreamEvent::BlockDelta { index: 0, delta: Delta::Text("see TCK-12".into()) },
        StreamEvent::BlockDelta { index: 0, delta: Delta::Text("34".into()) },
        StreamEvent::BlockDelta { index: 0, delta: Delta::Text("56 now".into()) },
        StreamEvent::BlockStop { index: 0 },
    ];
    guard.on_events(&mut events, &mut cx).unwrap();
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::BlockDelta { delta: Delta::Text(t), .. } => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert!(!text.contains("TCK-123456") && text.starts_with("see ") && text.ends_with(" now"), "{text}");
    let mut blocked = vec![StreamEvent::BlockDelta { index: 1, delta: Delta::Text("the forbidden-phrase".into()) }];
    blocked.push(StreamEvent::BlockStop { index: 1 });
    let refusal = guard.on_events(&mut blocked, &mut cx).unwrap_err();
    assert_eq!(refusal.code.as_deref(), Some("policy_violation"));
    assert!(!refusal.message.contains("forbidden-phrase"), "{}", refusal.message);
}

/// A streamed reasoning block's signature comes at its end: its text is
/// released while no mask would change it; from a match on it is held,
/// then the reply is refused when a signature came (a rewritten signed
/// block is one its vendor refuses), or masked when none did.
#[tokio::test]
async fn streamed_reasoning_a_mask_would_change_is_refused_when_signed_and_masked_when_not() {
    let gateway = testing::gateway(CONFIG);
    let screen = gateway.guardrails.for_key(&["ids".to_owned()]).unwrap();
    let call = call(Protocol::OpenAi, &openai("plain", "hi", true), HeaderMap::new());
    let thinking = |signature: Option<&str>| {
        let mut events = vec![
            StreamEvent::BlockStart { index: 0, block: BlockStart::Thinking },
            StreamEvent::BlockDelta { index: 0, delta: Delta::Thinking("first I look. ".into()) },
            StreamEvent::BlockDelta { index: 0, delta: Delta::Thinking("see TCK-12".into()) },
            StreamEvent::BlockDelta { index: 0, delta: Delta::Thinking("3456 now".into()) },
        ];
        events.extend(signature.map(|s| StreamEvent::BlockDelta { index: 0, delta: Delta::Signature(s.into()) }));
        events.push(StreamEvent::BlockStop { index: 0 });
        events
    };
    let thought = |events: &[StreamEvent]| -> String {
        events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::BlockDelta { delta: Delta::Thinking(t), .. } => Some(t.as_str()),
                _ => None,
            })
            .collect()
    };
    // Signed: nothing of the match is released, and the reply is refused.
    let mut guard = guard::Guard::over(&gateway, screen.clone());
    let mut record = testing::record(&gateway, Protocol::OpenAi);
    let mut cx = ReplyCx { env: Env::of(&gateway), call: &call, record: &mut record, part: Usage::default() };
    let mut events = thinking(Some("sig"))[..3].to_vec();
    guard.on_events(&mut events, &mut cx).unwrap();
    assert!(thought(&events).starts_with("first I"), "text before any match is released: {events:?}");
    let mut rest = thinking(Some("sig"))[3..].to_vec();
    let refusal = guard.on_events(&mut rest, &mut cx).unwrap_err();
    assert!(refusal.message.contains("policy `ids`") && refusal.message.contains("signed reasoning"), "{refusal:?}");
    assert!(!refusal.message.contains("TCK-"), "{}", refusal.message);
    // Unsigned: masked and released at the block's end.
    let mut guard = guard::Guard::over(&gateway, screen);
    let mut events = thinking(None);
    guard.on_events(&mut events, &mut cx).unwrap();
    assert_eq!(thought(&events), "first I look. see [TICKET_1] now");
}

/// Issue 43, finding 3: a hit passes back through the reply guardrails of
/// the caller that gets it, so a key whose policy masks replies never
/// receives another caller's reply unmasked.
#[tokio::test]
async fn a_cache_hit_passes_through_the_callers_reply_guardrails() {
    let gateway = testing::gateway(CONFIG);
    let body = openai("cached", "repeat TCK-654321 please", false);
    // A caller without reply policies fills the cache.
    let first = send(&gateway, call(Protocol::OpenAi, &body, HeaderMap::new())).await;
    assert_eq!(first.headers["x-switchyard-cache"], "miss");
    assert!(first.body.contains("TCK-654321"), "{}", first.body);
    // Another whose chain masks replies asks the same.
    for stream in [false, true] {
        let body = openai("cached", "repeat TCK-654321 please", stream);
        let caller = call(Protocol::OpenAi, &body, HeaderMap::new());
        if stream {
            // Stored once whole: a streamed ask of it is a hit by its IR.
            let warm = send(&gateway, call(Protocol::OpenAi, &body, HeaderMap::new())).await;
            assert!(warm.body.contains("TCK-654321"));
        }
        let pool = gateway.resolve("cached").unwrap();
        let screen = gateway.guardrails.for_key(&["ids".to_owned()]).unwrap();
        let mut x = Exchange::new(caller, testing::record(&gateway, Protocol::OpenAi), pool);
        x.filters = Filters::builder()
            .with(Some(guard::Guard::over(&gateway, screen)))
            .with(response_cache::ResponseCache::of(&gateway, &x.call, pool))
            .build();
        let Flow::Answer(hit) = x.request_filters(&gateway).await else { panic!("a hit was expected") };
        let answer = crate::answer::stood_in(&gateway, x, hit).await;
        assert_eq!(answer.headers()["x-switchyard-cache"], "hit");
        let body = http_body_util::BodyExt::collect(answer.into_body()).await.unwrap().to_bytes();
        let text = String::from_utf8_lossy(&body);
        assert!(!text.contains("TCK-654321"), "stream {stream}: {text}");
        assert!(text.contains("[TICKET_1]"), "stream {stream}: {text}");
    }
}

#[tokio::test]
async fn identity_fills_what_a_protocol_lacks_from_the_request_and_the_lane() {
    let gateway = testing::gateway(CONFIG);
    let call = call(Protocol::OpenAi, &openai("cohere", "hi", false), HeaderMap::new());
    let mut record = testing::record(&gateway, Protocol::OpenAi);
    let slot = switchyard_state::call::Slot { pool: gateway.resolve("cohere").unwrap(), member: 0 };
    record.serving(slot, 2, Arc::from("command-r"), 0);
    let env = Env::of(&gateway).at(|| 1_700_000_123_456);
    let mut cx = ReplyCx { env, call: &call, record: &mut record, part: Usage::default() };
    let mut reply = Response::default();
    assert!(identity::Identity.on_reply(&mut reply, Protocol::Cohere, &mut cx).is_none());
    assert_eq!(
        (reply.id.as_str(), reply.model.as_str(), reply.created),
        ("sy-req-test", "command-r", Some(1_700_000_123))
    );
    // What the lane said stays.
    let mut said = Response { id: "r-1".into(), model: "m".into(), created: Some(5), ..Response::default() };
    identity::Identity.on_reply(&mut said, Protocol::Cohere, &mut cx);
    assert_eq!((said.id.as_str(), said.model.as_str(), said.created), ("r-1", "m", Some(5)));
    // A stream's first event alike.
    let mut events = vec![StreamEvent::MessageStart {
        id: String::new(),
        model: String::new(),
        created: None,
        usage: Usage::default(),
    }];
    identity::Identity.on_events(&mut events, &mut cx).unwrap();
    let StreamEvent::MessageStart { id, model, .. } = &events[0] else { panic!() };
    assert_eq!((id.as_str(), model.as_str()), ("sy-req-test", "command-r"));
}

#[tokio::test]
async fn usage_asked_for_metering_is_hidden_from_a_passthrough() {
    let gateway = testing::governed(&format!("auth: {{ mode: keys }}\n{CONFIG}")).await;
    let call = call(Protocol::OpenAi, &openai("plain", "hi", true), HeaderMap::new());
    let pool = gateway.resolve("plain").unwrap();
    let shape = Shape::of(&gateway, &call, pool);
    assert!(shape.hide_usage && !shape.meter_stream, "{shape:?}");
    let mut hide = metering::HideUsage::of(&gateway, &call, &shape).unwrap();
    let chunk = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n\
                 data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n";
    let mut out = hide.on_bytes(Bytes::from(chunk)).to_vec();
    out.extend_from_slice(&hide.finish_bytes());
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("\"content\":\"hi\"") && !out.contains("usage"), "{out}");
}

#[tokio::test]
async fn a_gemini_lanes_signed_calls_are_kept_for_the_callers_next_turn() {
    let gateway = testing::gateway(CONFIG);
    let call = call(Protocol::OpenAi, &openai("everything", "hi", true), HeaderMap::new());
    let pool = gateway.resolve("everything").unwrap();
    let mut keep = signatures::Signatures::of(&gateway, &call, pool).unwrap();
    let mut record = testing::record(&gateway, Protocol::OpenAi);
    let gem = gateway.lanes.iter().position(|lane| &*lane.name == "gem").unwrap();
    record.serving(switchyard_state::call::Slot { pool, member: 1 }, gem, Arc::from("gem"), 0);
    let mut cx = ReplyCx { env: Env::of(&gateway), call: &call, record: &mut record, part: Usage::default() };
    let signed = BlockStart::ToolUse { id: "call_1".into(), name: "f".into(), signature: Some("sig-1".into()) };
    let mut events = vec![StreamEvent::BlockStart { index: 0, block: signed }];
    keep.on_events(&mut events, &mut cx).unwrap();
    for hook in [keep.on_end(Ended::Whole, &mut cx)].into_iter().flatten() {
        hook.await;
    }
    // The next turn sends the call back unsigned: it is put back.
    let unsigned =
        switchyard_ir::ToolUse { id: "call_1".into(), name: "f".into(), input: "{}".into(), signature: None };
    let mut next = switchyard_ir::Request::default();
    next.messages.push(switchyard_ir::Message::new(
        switchyard_ir::Role::Assistant,
        vec![switchyard_ir::Block::ToolUse(unsigned)],
    ));
    let restored = gateway.signatures.restore(None, &mut next, 0).await;
    assert_eq!(restored.restored, 1, "{restored:?}");
}

#[tokio::test]
async fn a_continuation_tells_the_caller_every_parts_usage_added() {
    let gateway = testing::gateway(CONFIG);
    let call = call(Protocol::OpenAi, &openai("everything", "hi", true), HeaderMap::new());
    let pool = gateway.resolve("everything").unwrap();
    let shape = Shape::of(&gateway, &call, pool);
    let mut carry = continuation::Carry::of(&gateway, &call, &shape).unwrap();
    let slots = [switchyard_state::call::Slot { pool, member: 0 }, switchyard_state::call::Slot { pool, member: 1 }];
    let request = switchyard_ir::Request::default();
    carry.on_serving(&Serving { call: &call, ir: Some(&request), slots: &slots, lane: 0, upstream: None });
    carry.on_restart(&Usage { input_tokens: 10, output_tokens: 4, ..Usage::default() });
    let mut record = testing::record(&gateway, Protocol::OpenAi);
    let part = Usage { input_tokens: 12, output_tokens: 6, ..Usage::default() };
    let mut cx = ReplyCx { env: Env::of(&gateway), call: &call, record: &mut record, part };
    let mut events = vec![StreamEvent::MessageDelta { stop_reason: None, usage: part, stop_sequence: None }];
    carry.on_events(&mut events, &mut cx).unwrap();
    let StreamEvent::MessageDelta { usage, .. } = &events[0] else { panic!() };
    assert_eq!((usage.input_tokens, usage.output_tokens), (22, 10));
}

#[tokio::test]
async fn a_whole_reply_says_whether_its_usage_is_what_the_upstream_reported() {
    let gateway = testing::gateway(CONFIG);
    let call = call(Protocol::OpenAi, &openai("plain", "hi", false), HeaderMap::new());
    let mut mark = usage_mark::MarkUsage::of(&call).expect("a whole reply is marked");
    let mut mark_of = |record: &mut crate::settle::Record| {
        let mut whole = crate::render::Whole { body: Bytes::new(), headers: HeaderMap::new() };
        let mut cx = ReplyCx { env: Env::of(&gateway), call: &call, record, part: Usage::default() };
        mark.on_whole(&mut whole, &mut cx).unwrap();
        whole.headers[crate::render::X_SWITCHYARD_USAGE].to_str().unwrap().to_owned()
    };
    let reported = Usage { input_tokens: 3, output_tokens: 2, ..Usage::default() };
    let mut record = testing::record(&gateway, Protocol::OpenAi);
    record.record_reported(reported, || 7);
    assert_eq!(mark_of(&mut record), "exact");
    // The upstream reported nothing: the gateway's count, said so.
    let mut record = testing::record(&gateway, Protocol::OpenAi);
    record.record_reported(Usage::default(), || 7);
    assert_eq!(record.usage().output_tokens, 7);
    assert_eq!(mark_of(&mut record), "estimated");
    // Each other reason alike.
    for why in [switchyard_store::Estimated::CallerLeft, switchyard_store::Estimated::HedgeLoser] {
        let mut record = testing::record(&gateway, Protocol::OpenAi);
        record.record_usage(reported, Some(why));
        assert_eq!(mark_of(&mut record), "estimated", "{why:?}");
    }
    // A stream's mark is its ledger row's: no filter on its head.
    let streamed = testing::call(Protocol::OpenAi, &openai("plain", "hi", true), HeaderMap::new());
    assert!(usage_mark::MarkUsage::of(&streamed).is_none());
}
