//! Guardrails on the path, over real TCP with `mock://` lanes (which echo
//! the caller's last message): a request refused in the caller's own
//! protocol naming the policy and rule (never the text), a request masked
//! before any lane sees it, a reply masked whole and as a stream (a card
//! number split across four chunks never leaks), a stream refused mid-way,
//! and the decisions counted.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

mod common;

use common::*;
use switchyard_protocol::ir::Protocol;

const CONFIG: &str = "providers:\n  mock: { protocol: openai, base_url: mock:// }\n  \
    mock-claude: { protocol: anthropic, base_url: mock:// }\n\
    models:\n  gpt: { provider: mock }\n  claude: { provider: mock-claude }\n\
    policies:\n  \
      pii: { detect: [email, phone, card, iban, secrets], action: mask, direction: request }\n  \
      words: { literal: [\"forbidden-phrase\"], action: block }\n  \
      ids: { regex: { ticket: \"TCK-[0-9]{6}\" }, action: mask, direction: response }\n  \
      cards: { detect: [card], action: mask, direction: response }\n  \
      leaks: { literal: [\"top secret\"], action: block, direction: response }\n\
    pools:\n  \
      guarded: { policies: [pii, words, ids, cards, leaks], members: [{ model: gpt }] }\n  \
      guarded-claude: { policies: [pii, words, ids, cards, leaks], members: [{ model: claude }] }\n  \
      open: { members: [{ model: gpt }] }\n";

fn text(reply: &Reply) -> String {
    String::from_utf8_lossy(&reply.body).into_owned()
}

#[tokio::test]
async fn a_blocked_request_is_refused_in_the_callers_protocol_without_the_text() {
    let addr = gateway(CONFIG).await;
    for ingress in Protocol::ALL {
        let path = ingress_path(ingress, "guarded", false);
        let body = chat_body(ingress, "guarded", "please say the Forbidden-Phrase", false);
        let reply = post(addr, &path, &[], body).await;
        assert_eq!(reply.status, 400, "{ingress}: {}", text(&reply));
        let body = text(&reply);
        assert!(body.contains("policy `words`"), "{ingress}: {body}");
        assert!(!body.to_lowercase().contains("forbidden-phrase"), "{ingress}: the matched text leaked: {body}");
    }
    // The same words through a pool without the policy pass.
    let reply =
        post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "open", "the forbidden-phrase", false))
            .await;
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn a_request_is_masked_before_any_lane_sees_it() {
    let addr = gateway(CONFIG).await;
    for (pool, ingress) in
        [("guarded", Protocol::OpenAi), ("guarded-claude", Protocol::Anthropic), ("guarded", Protocol::Gemini)]
    {
        let path = ingress_path(ingress, pool, false);
        let said = "mail ann@example.com or ann@example.com, call +44 20 7946 0958, key AKIAIOSFODNN7EXAMPLE";
        let reply = post(addr, &path, &[], chat_body(ingress, pool, said, false)).await;
        assert_eq!(reply.status, 200, "{}", text(&reply));
        // The mock echoes what it was sent.
        let body = text(&reply);
        assert!(
            body.contains("mail [EMAIL_1] or [EMAIL_1], call [PHONE_1], key [SECRET_1]"),
            "{pool} {ingress}: {body}"
        );
        assert!(!body.contains("ann@example.com") && !body.contains("AKIA"), "{body}");
    }
}

#[tokio::test]
async fn a_reply_is_masked_whole_and_as_a_stream() {
    let addr = gateway(CONFIG).await;
    let said = "ticket TCK-123456 and card 4111 1111 1111 1111 end";
    let reply = post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "guarded", said, false)).await;
    assert_eq!(reply.status, 200);
    let body = text(&reply);
    assert!(body.contains("ticket [TICKET_1] and card [CARD_1] end"), "{body}");
    for (pool, ingress) in
        [("guarded", Protocol::OpenAi), ("guarded", Protocol::Anthropic), ("guarded-claude", Protocol::OpenAi)]
    {
        let path = ingress_path(ingress, pool, true);
        let reply = post(addr, &path, &[], chat_body(ingress, pool, said, true)).await;
        assert_eq!(reply.status, 200);
        let body = text(&reply);
        // The mock streams the card in four chunks: none of them leaks.
        assert!(!body.contains("4111") && !body.contains("TCK-"), "{pool} {ingress}: leaked: {body}");
        assert!(body.contains("[CARD_1]") && body.contains("[TICKET_1]"), "{pool} {ingress}: {body}");
    }
}

#[tokio::test]
async fn a_stream_refused_mid_way_ends_with_the_callers_error() {
    let addr = gateway(CONFIG).await;
    for ingress in [Protocol::OpenAi, Protocol::Anthropic] {
        let path = ingress_path(ingress, "guarded", true);
        let reply = post(addr, &path, &[], chat_body(ingress, "guarded", "this is top secret material", true)).await;
        assert_eq!(reply.status, 200);
        let body = text(&reply);
        assert!(body.contains("policy `leaks`"), "{ingress}: {body}");
        assert!(!body.contains("top secret"), "{ingress}: the matched text leaked: {body}");
        assert!(
            !body.contains("[DONE]") && !body.contains("message_stop"),
            "{ingress}: a refused stream is not complete: {body}"
        );
    }
    let metrics = get_with(admin(addr), "/metrics", &[("authorization", &format!("Bearer {ADMIN_TOKEN}"))]).await;
    let metrics = text(&metrics);
    let series = "switchyard_guardrail_decisions_total{policy=\"leaks\",rule=\"leaks\",action=\"block\",direction=\"response\"} 2";
    assert!(metrics.contains(series), "{metrics}");
}
