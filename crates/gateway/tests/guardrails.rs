//! Guardrails on the path, over real TCP with `mock://` lanes (which echo
//! the caller's last message): a request refused in the caller's own
//! protocol naming the policy and rule (never the text), a request masked
//! before any lane sees it, a reply masked whole and as a stream (a card
//! number split across four chunks never leaks), a stream refused mid-way,
//! signed reasoning never rewritten (a mask that would change it refuses
//! the turn), and the decisions counted.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

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

/// An AWS Bedrock guardrail as the moderator: the gateway calls
/// `ApplyGuardrail` on its Bedrock provider's endpoint, SigV4-signed with
/// that provider's keys, with the request's text as INPUT; an intervention
/// refuses the request naming the policy.
#[tokio::test]
async fn a_bedrock_guardrail_moderates_with_its_providers_signature() {
    use axum::routing::post as route;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = seen.clone();
    let app = axum::Router::new().route(
        "/guardrail/gr-abc123/version/2/apply",
        route(move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let kept = kept.clone();
            async move {
                let auth = headers.get("authorization").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
                kept.lock().unwrap().push(auth.clone());
                if !auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
                    || !auth.contains("/us-east-1/bedrock/")
                {
                    return (axum::http::StatusCode::FORBIDDEN, axum::Json(serde_json::json!({"message": "unsigned"})));
                }
                let input: serde_json::Value = serde_json::from_slice(&body).unwrap();
                assert_eq!(input["source"], "INPUT");
                let text = input["content"][0]["text"]["text"].as_str().unwrap_or_default();
                let action = if text.contains("forbidden") { "GUARDRAIL_INTERVENED" } else { "NONE" };
                (
                    axum::http::StatusCode::OK,
                    axum::Json(serde_json::json!({"action": action, "outputs": [], "assessments": []})),
                )
            }
        }),
    );
    let aws = spawn(app).await;
    let config = format!(
        "providers:\n  mock: {{ protocol: openai, base_url: mock:// }}\n  \
           aws: {{ protocol: bedrock, base_url: \"http://{aws}\", aws: {{ access_key_id: AKIDEXAMPLE, secret_access_key: secret, region: us-east-1 }} }}\n\
         models:\n  gpt: {{ provider: mock }}\n\
         policies:\n  \
           aws: {{ moderator: {{ bedrock_guardrail: {{ provider: aws, id: gr-abc123, version: \"2\" }}, on_error: block }}, action: block }}\n\
         pools:\n  guarded: {{ policies: [aws], members: [{{ model: gpt }}] }}\n"
    );
    let addr = gateway(&config).await;
    for protocol in [Protocol::OpenAi, Protocol::Anthropic] {
        let path = ingress_path(protocol, "guarded", false);
        let refused = post(addr, &path, &[], chat_body(protocol, "guarded", "a forbidden topic", false)).await;
        assert_eq!(refused.status, 400, "{}", text(&refused));
        assert!(text(&refused).contains("policy `aws` (rule `moderator`)"), "{}", text(&refused));
        assert_eq!(post(addr, &path, &[], chat_body(protocol, "guarded", "a fine topic", false)).await.status, 200);
    }
    assert_eq!(seen.lock().unwrap().len(), 4, "every request was asked");
}

/// A Bedrock guardrail must name a Bedrock provider.
#[test]
fn a_bedrock_guardrail_needs_a_bedrock_provider() {
    let yaml = "providers:\n  mock: { protocol: openai, base_url: mock:// }\nmodels:\n  gpt: { provider: mock }\n\
                policies:\n  aws: { moderator: { bedrock_guardrail: { provider: mock, id: gr-1 } }, action: block }\n";
    let err = switchyard_config::load(yaml, &|_| None).unwrap_err().to_string();
    assert!(err.contains("policies.aws.moderator.bedrock_guardrail.provider"), "{err}");
    let yaml = yaml.replace(
        "bedrock_guardrail: { provider: mock, id: gr-1 }",
        "url: \"https://m.example/v1/moderations\", bedrock_guardrail: { provider: mock, id: gr-1 }",
    );
    let err = switchyard_config::load(&yaml, &|_| None).unwrap_err().to_string();
    assert!(err.contains("exactly one of url and bedrock_guardrail"), "{err}");
}

/// Moderators are asked while the request is routed: a moderator and a
/// routing gate that each take 400 ms cost about 400 ms together, not 800;
/// and a flagged request is still refused, though routing finished first.
#[tokio::test]
async fn moderators_run_while_the_request_is_routed() {
    use axum::routing::post as route;
    let gate_calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = gate_calls.clone();
    let app = axum::Router::new()
        .route(
            "/moderate",
            route(|body: axum::body::Bytes| async move {
                tokio::time::sleep(std::time::Duration::from_millis(400)).await;
                let input: serde_json::Value = serde_json::from_slice(&body).unwrap();
                let flagged = input["input"].as_str().unwrap_or_default().contains("bad");
                axum::Json(serde_json::json!({"results": [{"flagged": flagged}]}))
            }),
        )
        .route(
            "/route",
            route(move || {
                let counted = counted.clone();
                async move {
                    counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
                    axum::Json(serde_json::json!({}))
                }
            }),
        );
    let side = spawn(app).await;
    let config = format!(
        "providers:\n  mock: {{ protocol: openai, base_url: mock:// }}\nmodels:\n  gpt: {{ provider: mock }}\n\
         policies:\n  checked: {{ moderator: {{ url: \"http://{side}/moderate\" }}, action: block }}\n\
         pools:\n  both: {{ policies: [checked], hooks: [{{ module: webrequest, settings: {{ url: \"http://{side}/route\" }} }}], \
         members: [{{ model: gpt }}] }}\n"
    );
    let addr = gateway(&config).await;
    let ask =
        |said: &'static str| post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "both", said, false));
    // Warm the connections first.
    assert_eq!(ask("warm up").await.status, 200);
    let started = std::time::Instant::now();
    assert_eq!(ask("fine").await.status, 200);
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_millis(750), "moderation and routing overlap: {took:?}");
    let refused = ask("something bad").await;
    assert_eq!(refused.status, 400, "{}", text(&refused));
    assert_eq!(gate_calls.load(std::sync::atomic::Ordering::Relaxed), 3, "the gate was asked while moderating");
}

/// A moderator flags "bad" input (OpenAI's moderation shape); another
/// never answers in time. A flagged request is refused naming the policy;
/// without a verdict `on_error: allow` lets it pass and `block` refuses it.
#[tokio::test]
async fn moderators_flag_and_their_silence_follows_on_error() {
    use axum::routing::post as route;
    let app = axum::Router::new()
        .route(
            "/moderate",
            route(|body: axum::body::Bytes| async move {
                let input: serde_json::Value = serde_json::from_slice(&body).unwrap();
                let flagged = input["input"].as_str().unwrap_or_default().contains("bad");
                axum::Json(serde_json::json!({"id": "modr", "results": [{"flagged": flagged, "categories": {}}]}))
            }),
        )
        .route(
            "/slow",
            route(|| async {
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
                axum::Json(serde_json::json!({"flagged": false}))
            }),
        );
    let moderator = spawn(app).await;
    let config = format!(
        "providers:\n  mock: {{ protocol: openai, base_url: mock:// }}\nmodels:\n  gpt: {{ provider: mock }}\n\
         policies:\n  \
           checked: {{ moderator: {{ url: \"http://{moderator}/moderate\" }}, action: block }}\n  \
           lenient: {{ moderator: {{ url: \"http://{moderator}/slow\", timeout: 200ms, on_error: allow }}, action: block }}\n  \
           strict: {{ moderator: {{ url: \"http://{moderator}/slow\", timeout: 200ms, on_error: block }}, action: block }}\n\
         pools:\n  \
           checked: {{ policies: [checked], members: [{{ model: gpt }}] }}\n  \
           lenient: {{ policies: [lenient], members: [{{ model: gpt }}] }}\n  \
           strict: {{ policies: [strict], members: [{{ model: gpt }}] }}\n"
    );
    let addr = gateway(&config).await;
    let ask = |pool: &'static str, said: &'static str| {
        post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, pool, said, false))
    };
    let refused = ask("checked", "something bad").await;
    assert_eq!(refused.status, 400, "{}", text(&refused));
    assert!(text(&refused).contains("policy `checked` (rule `moderator`)"), "{}", text(&refused));
    assert_eq!(ask("checked", "something fine").await.status, 200);
    for stream in [false, true] {
        let started = std::time::Instant::now();
        let reply =
            post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "lenient", "hello", stream)).await;
        assert_eq!(reply.status, 200, "on_error: allow passes");
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "bounded by the moderator's timeout");
    }
    let refused = ask("strict", "hello").await;
    assert_eq!(refused.status, 503, "{}", text(&refused));
    assert!(text(&refused).contains("policy `strict`"), "{}", text(&refused));
}

/// A caller's group's policies replace its pool's: the same pool masks a
/// `legal` key's email and passes another key's.
#[tokio::test]
async fn a_groups_policies_apply_to_its_keys() {
    let config = "auth: { mode: keys }\nproviders:\n  mock: { protocol: openai, base_url: mock:// }\n\
                  models:\n  gpt: { provider: mock }\n\
                  policies:\n  pii: { detect: [email], action: mask }\n\
                  groups:\n  legal: { policies: [pii] }\n  sales: {}\n\
                  pools:\n  open: { members: [{ model: gpt }] }\n";
    let (addr, _) = governed(config).await;
    for (group, masked) in [("legal", true), ("sales", false)] {
        let key = create_key(addr, serde_json::json!({"name": group, "group": group})).await;
        let secret = key["key"].as_str().unwrap();
        let body = chat_body(Protocol::OpenAi, "open", "write to ann@example.com", false);
        let reply = post(addr, "/v1/chat/completions", &[("authorization", &format!("Bearer {secret}"))], body).await;
        assert_eq!(reply.status, 200, "{}", text(&reply));
        assert_eq!(text(&reply).contains("[EMAIL_1]"), masked, "{group}: {}", text(&reply));
        // The ledger row names the decision, never the text.
        let id = key["id"].as_str().unwrap();
        let mut found = serde_json::Value::Null;
        for _ in 0..100 {
            let rows =
                admin_call(addr, "GET", &format!("/api/v1/admin/requests?key={id}"), Some(ADMIN_TOKEN), None).await;
            found = serde_json::from_slice(&rows.body).unwrap();
            if !found["data"].as_array().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let notes = &found["data"][0]["notes"];
        let expected = if masked {
            serde_json::json!({"guardrails": ["pii/email/mask/request"]})
        } else {
            serde_json::Value::Null
        };
        assert_eq!(*notes, expected, "{group}: {found}");
        assert!(!found.to_string().contains("ann@example.com"));
    }
}

/// A reversible mask: the upstream sees only the placeholder, the caller
/// gets the value back, whole and streamed.
#[tokio::test]
async fn a_reversible_mask_hides_the_value_upstream_and_gives_it_back() {
    use std::sync::{Arc, Mutex};
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let kept = seen.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |body: axum::body::Bytes| {
            let kept = kept.clone();
            async move {
                kept.lock().unwrap().push(String::from_utf8_lossy(&body).into_owned());
                let reply = switchyard_transport::mock::respond(
                    switchyard_protocol::codec(Protocol::OpenAi),
                    None,
                    serde_json::from_slice::<serde_json::Value>(&body).unwrap()["stream"] == true,
                    switchyard_protocol::Framing::Sse,
                    &body,
                );
                let mut response = axum::response::Response::new(axum::body::Body::new(reply.body));
                *response.headers_mut() = reply.headers;
                response
            }
        }),
    );
    let upstream = spawn(app).await;
    let config = format!(
        "providers:\n  up: {{ protocol: openai, base_url: \"http://{upstream}\" }}\nmodels:\n  gpt: {{ provider: up }}\n\
         policies:\n  names: {{ detect: [email], action: mask, direction: request, reversible: true }}\n\
         pools:\n  private: {{ policies: [names], members: [{{ model: gpt }}] }}\n"
    );
    let addr = gateway(&config).await;
    for stream in [false, true] {
        let body = chat_body(Protocol::OpenAi, "private", "write to ann@example.com please", stream);
        let reply = post(addr, "/v1/chat/completions", &[], body).await;
        assert_eq!(reply.status, 200);
        let answer = text(&reply);
        assert!(answer.contains("ann@example.com"), "stream {stream}: the caller gets the value back: {answer}");
        assert!(!answer.contains("[EMAIL_1]"), "{answer}");
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    for body in seen.iter() {
        assert!(body.contains("[EMAIL_1]") && !body.contains("ann@example.com"), "the upstream saw: {body}");
    }
}

/// A key's own policies win over its group's: the key names `words` and
/// is refused, its group's `pii` no longer masks it; an unknown policy is
/// refused by the admin API.
#[tokio::test]
async fn a_keys_own_policies_win() {
    let config = "auth: { mode: keys }\nproviders:\n  mock: { protocol: openai, base_url: mock:// }\n\
                  models:\n  gpt: { provider: mock }\n\
                  policies:\n  pii: { detect: [email], action: mask }\n  words: { literal: [\"forbidden-phrase\"], action: block }\n\
                  groups:\n  legal: { policies: [pii] }\n\
                  pools:\n  open: { members: [{ model: gpt }] }\n";
    let (addr, _) = governed(config).await;
    let key = create_key(addr, serde_json::json!({"name": "own", "group": "legal", "policies": ["words"]})).await;
    assert_eq!(key["policies"], serde_json::json!(["words"]), "{key}");
    let auth = format!("Bearer {}", key["key"].as_str().unwrap());
    let headers = [("authorization", auth.as_str())];
    let ask = |said: &'static str| {
        post(addr, "/v1/chat/completions", &headers, chat_body(Protocol::OpenAi, "open", said, false))
    };
    let refused = ask("say forbidden-phrase").await;
    assert_eq!(refused.status, 400, "{}", text(&refused));
    let passed = ask("mail ann@example.com").await;
    assert!(text(&passed).contains("ann@example.com"), "the group's pii policy no longer applies: {}", text(&passed));
    let unknown = admin_call(
        addr,
        "POST",
        "/api/v1/admin/keys",
        Some(ADMIN_TOKEN),
        Some(serde_json::json!({"name": "bad", "policies": ["nope"]})),
    )
    .await;
    assert_eq!(unknown.status, 400, "{}", text(&unknown));
}

/// A screened stream cut mid-answer and continued on another lane: the text
/// held back at the cut was never sent, so it is written once, by the lane
/// that went on; the caller reads the uncut answer exactly once.
#[tokio::test]
async fn a_screened_stream_continued_elsewhere_comes_once() {
    let config = "providers:\n  mock: { protocol: openai, base_url: mock:// }\n  claude: { protocol: anthropic, base_url: mock:// }\n\
                  models:\n  cut-claude: { provider: claude }\n  gpt: { provider: mock }\n\
                  policies:\n  ids: { regex: { ticket: \"TCK-[0-9]{6}\" }, action: mask, direction: response }\n\
                  pools:\n  continued: { stream_failure: continue, policies: [ids], breaker: { consecutive_failures: 1000 }, \
                  members: [{ model: cut-claude, weight: 1000000 }, { model: gpt, weight: 1 }] }\n";
    let addr = gateway(config).await;
    let answer = "one two three four five six seven eight";
    let streamed_text = |body: &[u8]| -> String {
        String::from_utf8_lossy(body)
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .filter_map(|data| serde_json::from_str::<serde_json::Value>(data).ok())
            .filter_map(|frame| frame["choices"][0]["delta"]["content"].as_str().map(str::to_owned))
            .collect()
    };
    // Cut while all the text is still held back (the next lane answers
    // afresh), and once some of it has left (the next lane goes on).
    for cut in [2, 6, 10, 20, 25, 30, 35] {
        let said = format!("[mock:plain] [mock:cut={cut}] {answer}");
        let reply =
            post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "continued", &said, true)).await;
        assert_eq!(reply.status, 200);
        assert_eq!(streamed_text(&reply.body), answer, "cut at {cut}: {}", text(&reply));
    }
}

/// Issue 43 (finding 1): no encoding a protocol allows carries a blocked
/// phrase past the screen: a plain-text document's `data`, a string that
/// starts `data:`, one over a MiB, a member named like a skipped one, a
/// member name itself, text sent as base64 media, fullwidth and zero-width
/// look-alikes (finding 23), in each protocol's own shapes.
#[tokio::test]
async fn no_encoding_carries_a_blocked_phrase_past_the_screen() {
    use base64::Engine as _;
    let addr = gateway(CONFIG).await;
    let base64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let long = format!("{} the forbidden-phrase", "padding ".repeat(150_000));
    let cases: Vec<(&str, Protocol, &str, String)> = vec![
        (
            "a plain-text document's source.data",
            Protocol::Anthropic,
            "guarded-claude",
            serde_json::json!({"model": "guarded-claude", "max_tokens": 16, "messages": [{"role": "user", "content": [
                {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "the forbidden-phrase"}},
                {"type": "text", "text": "summarise"}]}]})
            .to_string(),
        ),
        (
            // In the system prompt: the mock echoes only the last message.
            "a string starting data:",
            Protocol::OpenAi,
            "guarded",
            serde_json::json!({"model": "guarded", "messages": [
                {"role": "system", "content": "data: the forbidden-phrase"}, {"role": "user", "content": "hi"}]})
            .to_string(),
        ),
        ("a string over 1 MiB", Protocol::OpenAi, "guarded", chat_body(Protocol::OpenAi, "guarded", &long, false)),
        (
            "a tool result's tool_call_id",
            Protocol::OpenAi,
            "guarded",
            serde_json::json!({"model": "guarded", "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "the-forbidden-phrase", "content": "ok"}]})
            .to_string(),
        ),
        (
            "a member name of a tool's input",
            Protocol::Anthropic,
            "guarded-claude",
            serde_json::json!({"model": "guarded-claude", "max_tokens": 16, "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"the forbidden-phrase": 1}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]})
            .to_string(),
        ),
        (
            "a text/plain part sent as inline base64",
            Protocol::Gemini,
            "guarded",
            serde_json::json!({"contents": [{"role": "user", "parts": [
                {"inlineData": {"mimeType": "text/plain", "data": base64("the forbidden-phrase")}}, {"text": "read it"}]}]})
            .to_string(),
        ),
        (
            "a text document's bytes",
            Protocol::Bedrock,
            "guarded",
            serde_json::json!({"messages": [{"role": "user", "content": [
                {"document": {"format": "txt", "name": "notes", "source": {"bytes": base64("the forbidden-phrase")}}},
                {"text": "read it"}]}]})
            .to_string(),
        ),
        ("fullwidth letters", Protocol::OpenAi, "guarded", chat_body(Protocol::OpenAi, "guarded", "the ｆｏｒｂｉｄｄｅｎ-ｐｈｒａｓｅ", false)),
        ("zero-width characters", Protocol::OpenAi, "guarded", chat_body(Protocol::OpenAi, "guarded", "the forbid\u{200B}den-phr\u{00AD}ase", false)),
        (
            "a zero-width character as an escape",
            Protocol::Cohere,
            "guarded",
            r#"{"model":"guarded","messages":[{"role":"user","content":"the forbid\u200bden-phrase"}]}"#.to_owned(),
        ),
        ("mathematical letters", Protocol::Responses, "guarded", chat_body(Protocol::Responses, "guarded", "the 𝐟𝐨𝐫𝐛𝐢𝐝𝐝𝐞𝐧-phrase", false)),
    ];
    for (what, ingress, pool, body) in cases {
        let reply = post(addr, &ingress_path(ingress, pool, false), &[], body).await;
        let text = text(&reply);
        assert_eq!(reply.status, 400, "{what}: {text}");
        assert!(text.contains("policy `words`"), "{what}: {text}");
    }
}

/// A fullwidth email is masked where it stands: the lane sees the
/// placeholder and nothing of the address.
#[tokio::test]
async fn a_look_alike_match_is_masked_in_the_original_text() {
    let addr = gateway(CONFIG).await;
    let said = "mail ａｎｎ@ｅｘａｍｐｌｅ.ｃｏｍ or a\u{200B}nn@example.com today";
    let reply = post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "guarded", said, false)).await;
    assert_eq!(reply.status, 200, "{}", text(&reply));
    let body = text(&reply);
    // The mock echoes what it was sent.
    assert!(body.contains("mail [EMAIL_1] or [EMAIL_1] today"), "{body}");
}

/// A body the screen cannot read (a lone surrogate before the message
/// that carries the phrase) is refused, not passed on unread.
#[tokio::test]
async fn a_body_the_screen_cannot_read_is_refused() {
    let addr = gateway(CONFIG).await;
    let body = r#"{"model":"guarded","messages":[{"role":"system","content":"\ud800"},{"role":"user","content":"the forbidden-phrase"}]}"#;
    let reply = post(addr, "/v1/chat/completions", &[], body).await;
    assert_eq!(reply.status, 400, "{}", text(&reply));
    assert!(text(&reply).contains("could not be read for its guardrail policies"), "{}", text(&reply));
    // Without a policy, the body goes on to be read as usual.
    let open = body.replace("\"guarded\"", "\"open\"");
    let reply = post(addr, "/v1/chat/completions", &[], open).await;
    assert!(!text(&reply).contains("guardrail"), "{}", text(&reply));
}

/// A whole reply is screened in every string: one that starts `data:` too.
#[tokio::test]
async fn a_whole_reply_starting_data_is_screened() {
    let addr = gateway(CONFIG).await;
    let said = "[mock:plain] data: this is top secret";
    let reply = post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "guarded", said, false)).await;
    assert_eq!(reply.status, 400, "{}", text(&reply));
    assert!(text(&reply).contains("policy `leaks`"), "{}", text(&reply));
}

/// Anthropic's signed thinking is never rewritten (the vendor checks its
/// signature, and so does the mock): a signature is not text and reaches
/// the lane as sent (where the vendor refuses a forged one itself); the
/// thinking's text is screened like any other (a block refuses it), and a
/// mask that would change it refuses the request, naming the policy.
#[tokio::test]
async fn signed_thinking_keeps_its_signature_and_its_text_is_screened() {
    use switchyard_transport::mock::reasoning_signature;
    let addr = gateway(CONFIG).await;
    let turn = |thinking: &str, signature: &str| {
        serde_json::json!({"model": "guarded-claude", "max_tokens": 16, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": thinking, "signature": signature},
                {"type": "redacted_thinking", "data": "forbidden-phrase"},
                {"type": "text", "text": "hello"}]},
            {"role": "user", "content": "go on"}]})
        .to_string()
    };
    let passed = post(addr, "/v1/messages", &[], turn("a thought", &reasoning_signature("a thought"))).await;
    assert_eq!(passed.status, 200, "{}", text(&passed));
    // The signature is not screened: the lane got it, and refused it as forged.
    let forged = post(addr, "/v1/messages", &[], turn("a thought", "forbidden-phrase")).await;
    assert_eq!(forged.status, 400, "{}", text(&forged));
    assert!(text(&forged).contains("Invalid `signature` in `thinking` block"), "{}", text(&forged));
    let said = "a forbidden-phrase thought";
    let refused = post(addr, "/v1/messages", &[], turn(said, &reasoning_signature(said))).await;
    assert_eq!(refused.status, 400, "{}", text(&refused));
    assert!(text(&refused).contains("policy `words`"), "{}", text(&refused));
    // `pii` masks requests: in the signed thinking of a tool loop in
    // progress it would break the signature (a past turn's goes: below).
    let said = "mail ann@example.com";
    let looping = serde_json::json!({"model": "guarded-claude", "max_tokens": 16, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": said, "signature": reasoning_signature(said)},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "done"}]}]});
    let refused = post(addr, "/v1/messages", &[], looping.to_string()).await;
    assert_eq!(refused.status, 400, "{}", text(&refused));
    let body = text(&refused);
    assert!(body.contains("policy `pii`") && body.contains("would alter signed reasoning"), "{body}");
    assert!(!body.contains("ann@example.com") && !body.contains("Invalid `signature`"), "{body}");
}

/// Anthropic lets a past turn's thinking go ("you can omit thinking
/// blocks from prior assistant role turns"), never the turn in progress's:
/// a mask that would change a past turn's signed thinking leaves that
/// turn's reasoning out (named in `x-switchyard-omitted`) and the request
/// is served; in the turn in progress (a tool loop's) it refuses.
#[tokio::test]
async fn a_past_turns_signed_thinking_a_mask_would_change_is_left_out() {
    use switchyard_transport::mock::reasoning_signature;
    let addr = gateway(CONFIG).await;
    let said = "mail ann@example.com";
    let thinking = serde_json::json!({"type": "thinking", "thinking": said, "signature": reasoning_signature(said)});
    let past = serde_json::json!({"model": "guarded-claude", "max_tokens": 16, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [thinking, {"type": "text", "text": "noted"}]},
        {"role": "user", "content": "and then?"},
        {"role": "assistant", "content": "then more"},
        {"role": "user", "content": "go on"}]});
    let served = post(addr, "/v1/messages", &[], past.to_string()).await;
    assert_eq!(served.status, 200, "{}", text(&served));
    assert_eq!(served.headers["x-switchyard-omitted"], "messages.1.content.0");
    assert!(text(&served).contains("you said: go on"), "{}", text(&served));
    let in_progress = serde_json::json!({"model": "guarded-claude", "max_tokens": 16, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [thinking, {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "done"}]}]});
    let refused = post(addr, "/v1/messages", &[], in_progress.to_string()).await;
    assert_eq!(refused.status, 400, "{}", text(&refused));
    assert!(
        text(&refused).contains("policy `pii`") && text(&refused).contains("signed reasoning"),
        "{}",
        text(&refused)
    );
    assert!(!refused.headers.contains_key("x-switchyard-omitted"));
}

const THINKING: &str = "providers:\n  aws: { protocol: bedrock, base_url: mock:// }\n  \
    claude: { protocol: anthropic, base_url: mock:// }\n\
    models:\n  sonnet: { provider: aws, model: anthropic.claude-sonnet-4-5 }\n  \
    claude: { provider: claude, model: claude-sonnet-4-5 }\n\
    policies:\n  \
      pii: { detect: [email], action: mask, direction: request }\n  \
      plans: { regex: { plan: \"determin[a-z]{1,12}\" }, action: mask, direction: request }\n  \
      plans-out: { regex: { plan: \"determin[a-z]{1,12}\" }, action: mask, direction: response }\n\
    pools:\n  \
      thinks: { policies: [pii], members: [{ model: sonnet }] }\n  \
      thinks-guarded: { policies: [pii, plans], members: [{ model: sonnet }] }\n  \
      thinks-out: { policies: [plans-out], members: [{ model: sonnet }] }\n  \
      claude-out: { policies: [plans-out], members: [{ model: claude }] }\n";

/// A Bedrock tool loop whose turn in progress carries Claude's signed
/// reasoning (the mock's text, "…a deterministic answer", signed as the
/// mock signs: a keyed hash of the text). A request policy masking a word
/// of that reasoning refuses the turn in Bedrock's shape, naming the
/// policy (never a vendor's 400 for a broken signature). Without it, the
/// tool result's email is masked and the turn served, the reasoning
/// reaching the lane byte for byte (the mock verifies it, and says it kept
/// it; a changed text is its 400). A turn later that reasoning is a past
/// turn's: left out, named in `x-switchyard-omitted`, the turn served. A
/// reply policy that would mask signed reasoning refuses the reply, whole
/// or streamed, rather than hand over a block its vendor would refuse.
#[tokio::test]
async fn a_mask_that_would_change_signed_reasoning_refuses_the_turn_in_the_callers_shape() {
    let addr = gateway(THINKING).await;
    let thinking = serde_json::json!({"thinking": {"type": "enabled", "budget_tokens": 1024}});
    let schema = serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}});
    let tools = serde_json::json!({"tools": [{"toolSpec": {"name": "lookup", "inputSchema": {"json": schema}}}]});
    let question = serde_json::json!({"role": "user", "content": [{"text": "what now?"}]});
    let turn = |messages: serde_json::Value| {
        serde_json::json!({"messages": messages, "toolConfig": tools, "inferenceConfig": {"maxTokens": 4096},
            "additionalModelRequestFields": thinking})
        .to_string()
    };
    let reply = post(addr, "/model/thinks/converse", &[], turn(serde_json::json!([question]))).await;
    assert_eq!(reply.status, 200, "{}", text(&reply));
    let answered: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    let assistant = answered["output"]["message"].clone();
    let reasoning = &assistant["content"][0]["reasoningContent"]["reasoningText"];
    assert!(reasoning["text"].as_str().unwrap().contains("deterministic"), "{assistant}");
    assert!(reasoning["signature"].is_string(), "{assistant}");
    let call = assistant["content"][1]["toolUse"]["toolUseId"].clone();
    let result = |assistant: &serde_json::Value| {
        let returned = serde_json::json!({"role": "user", "content": [{"toolResult": {"toolUseId": call,
            "content": [{"text": "mail ann@example.com"}]}}]});
        turn(serde_json::json!([question, assistant, returned]))
    };

    let refused = post(addr, "/model/thinks-guarded/converse", &[], result(&assistant)).await;
    assert_eq!(refused.status, 400, "{}", text(&refused));
    assert_eq!(refused.headers["x-amzn-errortype"], "ValidationException");
    let body = text(&refused);
    assert!(body.contains("policy `plans`") && body.contains("would alter signed reasoning"), "{body}");
    assert!(!body.contains("Invalid `signature`") && !body.contains("ann@example.com"), "{body}");

    let served = post(addr, "/model/thinks/converse", &[], result(&assistant)).await;
    assert_eq!(served.status, 200, "{}", text(&served));
    let body = text(&served);
    assert!(body.contains("returned: mail [EMAIL_1] (reasoning kept)"), "{body}");
    assert!(!body.contains("ann@example.com"), "{body}");

    // What the gateway no longer does: the reasoning's text masked under
    // its signature is refused by the lane.
    let mut tampered = assistant.clone();
    let text_at = &mut tampered["content"][0]["reasoningContent"]["reasoningText"]["text"];
    *text_at = serde_json::Value::from(text_at.as_str().unwrap().replace("deterministic", "[PLAN_1]"));
    let forged = post(addr, "/model/thinks/converse", &[], result(&tampered)).await;
    assert_eq!(forged.status, 400, "{}", text(&forged));
    assert!(text(&forged).contains("Invalid `signature` in `thinking` block"), "{}", text(&forged));

    // A turn later that reasoning is a past turn's: left out, the turn
    // served (Claude on Bedrock takes a past turn's reasoning or not).
    let done: serde_json::Value = serde_json::from_slice(&served.body).unwrap();
    let later = turn(serde_json::json!([question, assistant,
        serde_json::from_str::<serde_json::Value>(&result(&assistant)).unwrap()["messages"][2],
        done["output"]["message"], {"role": "user", "content": [{"text": "mail ann@example.com [mock:tool=none]"}]}]));
    let served = post(addr, "/model/thinks-guarded/converse", &[], later).await;
    assert_eq!(served.status, 200, "{}", text(&served));
    // Both past assistant messages thought (the mock thinks each time asked).
    assert_eq!(served.headers["x-switchyard-omitted"], "messages.1.content.0, messages.3.content.0");
    assert!(text(&served).contains("mail [EMAIL_1]"), "{}", text(&served));

    // A reply policy: the reply's signed reasoning would be masked.
    let refused = post(addr, "/model/thinks-out/converse", &[], turn(serde_json::json!([question]))).await;
    assert_eq!(refused.status, 400, "{}", text(&refused));
    assert!(text(&refused).contains("policy `plans-out`"), "{}", text(&refused));
    assert!(text(&refused).contains("would alter signed reasoning"), "{}", text(&refused));
    let streamed = serde_json::json!({"model": "claude-out", "max_tokens": 4096, "stream": true,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "messages": [{"role": "user", "content": "what now?"}]});
    let reply = post(addr, "/v1/messages", &[], streamed.to_string()).await;
    let body = text(&reply);
    assert!(body.contains("event: error") && body.contains("would alter signed reasoning"), "{body}");
    assert!(!body.contains("deterministic") && !body.contains("signature_delta"), "{body}");
}

/// MCP tool calls under `mcp.policies`: arguments are screened in every
/// string, a member named `data` included; a result's resource blob that
/// is text in base64 is screened as that text.
#[tokio::test]
async fn mcp_arguments_and_results_are_screened_in_every_encoding() {
    use axum::routing::post as route;
    use base64::Engine as _;
    let seen: std::sync::Arc<std::sync::Mutex<Vec<String>>> = std::sync::Arc::default();
    let kept = seen.clone();
    let app = axum::Router::new().route(
        "/mcp",
        route(move |body: axum::body::Bytes| {
            let kept = kept.clone();
            async move {
                let message: serde_json::Value = serde_json::from_slice(&body).unwrap();
                let Some(id) = message.get("id").cloned() else {
                    return axum::http::StatusCode::ACCEPTED.into_response();
                };
                let result = match message["method"].as_str().unwrap_or_default() {
                    "initialize" => serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                        "serverInfo": {"name": "up", "version": "1"}}),
                    "tools/list" => serde_json::json!({"tools": [
                        {"name": "note", "inputSchema": {"type": "object"}},
                        {"name": "file", "inputSchema": {"type": "object"}}]}),
                    _ => {
                        kept.lock().unwrap().push(message["params"]["arguments"].to_string());
                        let blob = base64::engine::general_purpose::STANDARD.encode("the forbidden-phrase");
                        match message["params"]["name"].as_str() {
                            Some("file") => serde_json::json!({"content": [{"type": "resource",
                                "resource": {"uri": "file:///n.txt", "mimeType": "text/plain", "blob": blob}}]}),
                            _ => serde_json::json!({"content": [{"type": "text", "text": "noted"}]}),
                        }
                    }
                };
                axum::Json(serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
            }
        }),
    );
    use axum::response::IntoResponse as _;
    let upstream = spawn(app).await;
    let config = format!(
        "providers:\n  mock: {{ protocol: openai, base_url: mock:// }}\nmodels:\n  gpt: {{ provider: mock }}\n\
         policies:\n  words: {{ literal: [\"forbidden-phrase\"], action: block }}\n\
         mcp:\n  policies: [words]\n  servers:\n    up: {{ url: \"http://{upstream}/mcp\" }}\n"
    );
    let config = switchyard_config::load(&config, &|_| None).unwrap();
    let hub = switchyard_gateway::mcp_hub();
    let gateway = std::sync::Arc::new(
        switchyard_gateway::Gateway::new(config, switchyard_protocol::codec).unwrap().with_mcp(hub),
    );
    let settings = switchyard_gateway::server::data_settings(&gateway, std::sync::Arc::default());
    let addr = spawn_with(switchyard_gateway::router(gateway), settings).await;
    let rpc = |session: Option<String>, id: u32, method: &'static str, params: serde_json::Value| async move {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        let mut headers = vec![("accept", "application/json, text/event-stream".to_owned())];
        if let Some(session) = session {
            headers.push(("mcp-session-id", session));
        }
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        post(addr, "/mcp", &headers, body).await
    };
    let opened = rpc(None, 1, "initialize", serde_json::json!({"protocolVersion": "2025-06-18"})).await;
    assert_eq!(opened.status, 200, "{}", text(&opened));
    let session = opened.headers["mcp-session-id"].to_str().unwrap().to_owned();
    let call = |name: &'static str, arguments: serde_json::Value| {
        rpc(Some(session.clone()), 2, "tools/call", serde_json::json!({"name": name, "arguments": arguments}))
    };
    let refused = call("up__note", serde_json::json!({"data": "the forbidden-phrase"})).await;
    assert!(text(&refused).contains("`words`"), "arguments: {}", text(&refused));
    assert!(seen.lock().unwrap().is_empty(), "the server saw the arguments: {:?}", seen.lock().unwrap());
    let passed = call("up__note", serde_json::json!({"data": "fine"})).await;
    assert!(text(&passed).contains("noted"), "{}", text(&passed));
    let refused = call("up__file", serde_json::json!({})).await;
    assert!(text(&refused).contains("`words`"), "result: {}", text(&refused));
}
