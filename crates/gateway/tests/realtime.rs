//! The Realtime relay over real TCP: a text turn and an audio buffer on a
//! `mock://` lane, each response one ledger row priced from its usage;
//! a spent budget refusing the next generation only; bad frames and size
//! bounds answered while the socket lives; client secrets bound to their
//! key and model, refused when expired and on any HTTP route; and, against
//! an upstream socket of the test's own, the lane's credential (never the
//! caller's) on its handshake, a usage that lies bounded, and a close
//! mid-generation settled once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code")]

use crate::common;
use crate::duplex::{open, Ws};

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{create_key, governed, ledger_rows};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

/// A governed gateway with a priced `mock://` realtime lane `rt`, a chat
/// lane `chat`, and `extra` config.
fn config(base_url: &str, extra: &str) -> String {
    priced(base_url, AUDIO_CARD, extra)
}

/// The realtime lane's prices: per million tokens of each kind.
const AUDIO_CARD: &str =
    "{ input_utok: 1000, output_utok: 2000, cache_read_utok: 100, audio_input_utok: 4000, audio_output_utok: 8000 }";

fn priced(base_url: &str, card: &str, extra: &str) -> String {
    format!(
        "providers:\n  oa: {{ protocol: openai, base_url: \"{base_url}\", api_key: sk-lane-secret }}\n\
         models:\n  rt: {{ provider: oa, model: gpt-realtime, operation: realtime }}\n  \
         chat: {{ provider: oa, model: gpt-4o }}\n\
         rate_card:\n  rt: {card}\n  \
         chat: {{ input_utok: 1, output_utok: 1 }}\n\
         auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n{extra}"
    )
}

async fn key(addr: SocketAddr, spec: Value) -> String {
    create_key(addr, spec).await["key"].as_str().unwrap().to_owned()
}

/// Events up to `response.done` or an `error`.
async fn until_done(ws: &mut Ws) -> Vec<Value> {
    let mut events = Vec::new();
    while let Some(event) = ws.next().await {
        let kind = event["type"].as_str().unwrap_or_default().to_owned();
        events.push(event);
        if kind == "response.done" || kind == "error" {
            break;
        }
    }
    events
}

/// The next event of `kind`, skipping others.
async fn next_of(ws: &mut Ws, kind: &str) -> Value {
    loop {
        let event = ws.next().await.unwrap_or_else(|| panic!("closed before {kind}"));
        if event["type"] == kind {
            return event;
        }
    }
}

fn item(text: &str) -> Value {
    json!({"type": "conversation.item.create",
           "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}})
}

fn deltas(events: &[Value], kind: &str) -> String {
    events.iter().filter(|e| e["type"] == kind).filter_map(|e| e["delta"].as_str()).collect()
}

#[tokio::test]
async fn a_text_turn_and_an_audio_buffer_are_relayed_and_each_response_is_a_priced_ledger_row() {
    let (addr, _) = governed(&config("mock://", "")).await;
    let secret = key(addr, json!({"name": "voice"})).await;
    let bearer = format!("Bearer {secret}");
    let mut ws = open(addr, "/v1/realtime?model=rt", &[("authorization", &bearer)]).await.unwrap();
    let created = ws.next().await.unwrap();
    assert_eq!(created["type"], "session.created", "{created}");
    // The caller named the pool; the upstream was asked for the lane's model.
    assert_eq!(created["session"]["model"], "gpt-realtime");
    ws.send(&item("hello there")).await;
    assert_eq!(next_of(&mut ws, "conversation.item.done").await["item"]["role"], "user");
    ws.send(&json!({"type": "response.create", "response": {"output_modalities": ["text"]}})).await;
    let events = until_done(&mut ws).await;
    assert_eq!(deltas(&events, "response.output_text.delta"), "Echo: hello there", "{events:#?}");
    let done = events.last().unwrap();
    assert_eq!(done["response"]["usage"]["output_tokens"], 3, "{done}");
    // 300 ms of 24 kHz PCM16, committed: transcribed, answered in audio.
    let audio = "A".repeat(19_200);
    ws.send(&json!({"type": "input_audio_buffer.append", "audio": audio})).await;
    ws.send(&json!({"type": "input_audio_buffer.commit"})).await;
    let transcript = next_of(&mut ws, "conversation.item.input_audio_transcription.completed").await;
    assert_eq!(transcript["transcript"], "audio of 300 ms");
    ws.send(&json!({"type": "response.create"})).await;
    let events = until_done(&mut ws).await;
    assert_eq!(deltas(&events, "response.output_audio_transcript.delta"), "Echo: audio of 300 ms");
    assert!(events.iter().filter(|e| e["type"] == "response.output_audio.delta").count() == 5, "{events:#?}");
    // One row per response: operation realtime, the pool, the lane's
    // model, each kind of token, priced to the nano-USD by the card.
    let rows = ledger_rows(addr, "pool=rt", 2).await;
    assert_eq!(rows.len(), 2, "{rows:#?}");
    let mut rows = rows;
    rows.sort_by_key(|r| r["output_tokens"].as_u64());
    for row in &rows {
        assert_eq!((row["operation"].as_str(), row["model"].as_str()), (Some("realtime"), Some("gpt-realtime")));
        assert_eq!((row["status"].as_u64(), row["estimated"].as_bool()), (Some(200), Some(false)), "{row}");
    }
    // Text: 3 in, 3 out at $1000 and $2000 per million.
    assert_eq!((rows[0]["input_tokens"].as_u64(), rows[0]["output_tokens"].as_u64()), (Some(3), Some(3)));
    assert_eq!(rows[0]["cost_nano"], 9_000_000, "{:#}", rows[0]);
    // Audio: 10 in (3 cached, 3 audio, 4 text), 10 out (5 audio, 5 text).
    let audio = &rows[1];
    assert_eq!((audio["input_tokens"].as_u64(), audio["output_tokens"].as_u64()), (Some(10), Some(10)), "{audio:#}");
    assert_eq!(audio["cache_read_tokens"], 3, "{audio:#}");
    assert_eq!(audio["cost_nano"], 66_300_000, "{audio:#}");
}

#[tokio::test]
async fn a_spent_budget_refuses_the_next_generation_only_and_the_socket_lives() {
    // Dear tokens: the hold of one generation (its prompt as estimated and
    // 100 output tokens) fits the budget; what each spends (its prompt
    // grows each turn) leaves it short of the next one's hold within a
    // few turns.
    let (addr, _) = governed(&priced("mock://", "{ input_utok: 100, output_utok: 100 }", "")).await;
    let secret = key(addr, json!({"name": "thrifty", "budget": {"usd": 0.3, "window": "1d"}})).await;
    let bearer = format!("Bearer {secret}");
    let mut ws = open(addr, "/v1/realtime?model=rt", &[("authorization", &bearer)]).await.unwrap();
    next_of(&mut ws, "session.created").await;
    let mut served = 0;
    let mut refused = None;
    for n in 0..40 {
        ws.send(&item(&format!("turn {n} {}", "words ".repeat(200)))).await;
        next_of(&mut ws, "conversation.item.done").await;
        ws.send(&json!({"type": "response.create", "event_id": format!("create-{n}"),
                        "response": {"output_modalities": ["text"], "max_output_tokens": 100}}))
            .await;
        let events = until_done(&mut ws).await;
        let last = events.last().unwrap();
        if last["type"] == "error" {
            refused = Some(last.clone());
            break;
        }
        assert!(events.iter().all(|e| e["type"] != "error"), "{events:#?}");
        served += 1;
    }
    let refused = refused.expect("the budget ran out");
    assert!(served >= 1, "the first generation fits: {refused}");
    assert_eq!(refused["error"]["code"], "insufficient_quota", "{refused}");
    assert_eq!(refused["error"]["event_id"], format!("create-{served}"), "{refused}");
    // Refused, it never reached the upstream: no response started.
    ws.send(&item("still here")).await;
    let next = ws.next().await.unwrap();
    assert_eq!(next["type"], "conversation.item.added", "the socket lives, nothing else came: {next}");
    let rows = ledger_rows(addr, "pool=rt&status=200", served).await;
    assert_eq!(rows.len(), served, "{rows:#?}");
}

#[tokio::test]
async fn bad_frames_are_answered_and_the_socket_lives_and_a_far_larger_one_closes_it() {
    let (addr, _) = governed(&config("mock://", "duplex: { max_message: 64KiB }\n")).await;
    let secret = key(addr, json!({"name": "fuzzy"})).await;
    let bearer = format!("Bearer {secret}");
    let mut ws = open(addr, "/v1/realtime?model=rt", &[("authorization", &bearer)]).await.unwrap();
    next_of(&mut ws, "session.created").await;
    let bad: [(Message, &str); 5] = [
        (Message::text("{not json"), "not JSON"),
        (Message::text(r#"{"type":"response.steer","event_id":"e1"}"#), "response.steer"),
        // Two types: the gateway and the upstream might read different ones.
        (Message::text(r#"{"type":"conversation.item.retrieve","type":"response.create"}"#), "duplicate field"),
        (Message::binary(vec![0u8, 159, 146, 150]), "not binary"),
        (
            Message::text(format!(r#"{{"type":"input_audio_buffer.append","audio":"{}"}}"#, "A".repeat(100 << 10))),
            "duplex.max_message",
        ),
    ];
    for (message, said) in bad {
        ws.send_raw(message).await;
        let error = ws.next().await.unwrap();
        assert_eq!(error["type"], "error", "{error}");
        assert!(error["error"]["message"].as_str().unwrap().contains(said), "{said}: {error}");
    }
    // A session may not be moved to another model.
    ws.send(&json!({"type": "session.update", "event_id": "u1", "session": {"type": "realtime", "model": "gpt-4o"}}))
        .await;
    let error = ws.next().await.unwrap();
    assert_eq!((error["type"].as_str(), error["error"]["event_id"].as_str()), (Some("error"), Some("u1")), "{error}");
    // The socket goes on: a turn answers.
    ws.send(&item("still fine")).await;
    ws.send(&json!({"type": "response.create", "response": {"output_modalities": ["text"]}})).await;
    let events = until_done(&mut ws).await;
    assert_eq!(deltas(&events, "response.output_text.delta"), "Echo: still fine");
    ws.send_raw(Message::text("x".repeat(200 << 10))).await;
    assert_eq!(ws.closed().await.map(|(code, _)| code), Some(1009));
    // None of it was a generation: one row.
    assert_eq!(ledger_rows(addr, "pool=rt", 1).await.len(), 1);
}

/// Mints a client secret with `bearer`; the reply's status and body.
async fn mint(addr: SocketAddr, bearer: &str, body: Value) -> (u16, Value) {
    let reply = common::post(addr, "/v1/realtime/client_secrets", &[("authorization", bearer)], body.to_string()).await;
    (reply.status.as_u16(), serde_json::from_slice(&reply.body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_client_secret_opens_its_keys_sessions_only_and_nothing_else() {
    let (addr, gateway) = governed(&config("mock://", "")).await;
    let created = create_key(addr, json!({"name": "alice"})).await;
    let (alice, alice_id) = (created["key"].as_str().unwrap().to_owned(), created["id"].as_str().unwrap().to_owned());
    let (status, minted) = mint(addr, &format!("Bearer {alice}"), json!({"expires_after": {"anchor": "created_at", "seconds": 60}, "session": {"type": "realtime", "model": "rt"}})).await;
    assert_eq!(status, 200, "{minted}");
    let secret = minted["value"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("sy-ek-") && !secret.contains(&alice) && !secret.contains("sk-lane"), "{secret}");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert!((now + 55..=now + 61).contains(&minted["expires_at"].as_u64().unwrap()), "{minted}");
    // A browser names it in the subprotocol; its generation is alice's.
    let protocols = format!("realtime, openai-insecure-api-key.{secret}");
    let mut ws = open(addr, "/v1/realtime", &[("sec-websocket-protocol", &protocols)]).await.unwrap();
    next_of(&mut ws, "session.created").await;
    ws.send(&item("from a browser")).await;
    ws.send(&json!({"type": "response.create", "response": {"output_modalities": ["text"]}})).await;
    assert_eq!(until_done(&mut ws).await.last().unwrap()["type"], "response.done");
    let rows = ledger_rows(addr, "pool=rt", 1).await;
    assert_eq!(rows[0]["key_id"], alice_id, "{rows:#?}");
    // Bound to its model: not another pool's socket.
    let refused =
        open(addr, "/v1/realtime?model=chat", &[("authorization", &format!("Bearer {secret}"))]).await.err().unwrap();
    assert_eq!(refused.0, 403, "{refused:?}");
    // Never an API key: no HTTP route takes it.
    let reply = common::post(
        addr,
        "/v1/chat/completions",
        &[("authorization", &format!("Bearer {secret}"))],
        json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]}).to_string(),
    )
    .await;
    assert_eq!(reply.status, 401, "{}", String::from_utf8_lossy(&reply.body));
    let (status, _) = mint(addr, &format!("Bearer {secret}"), json!({})).await;
    assert_eq!(status, 401, "a secret mints no secret");
    // A guessed one opens nothing; an expired one is refused, by the
    // store's clock (minted here already past its life).
    let guess = format!("sy-ek-{}", "0".repeat(64));
    let refused =
        open(addr, "/v1/realtime?model=rt", &[("authorization", &format!("Bearer {guess}"))]).await.err().unwrap();
    assert_eq!(refused.0, 401);
    let grant = switchyard_state::client_secrets::Grant { key_id: alice_id.clone(), model: None, expires_at_ms: 1 };
    let expired = gateway.client_secrets.mint(grant, 2).unwrap();
    let refused =
        open(addr, "/v1/realtime?model=rt", &[("authorization", &format!("Bearer {expired}"))]).await.err().unwrap();
    assert_eq!(refused.0, 401);
    assert!(refused.1.contains("expired"), "{}", refused.1);
    // Another key's secret carries that key's limits, not the caller's:
    // bob may use only `chat`, so bob's secret opens no `rt` session,
    // and minting one for `rt` is refused outright.
    let bob = key(addr, json!({"name": "bob", "pools": ["chat"]})).await;
    let (status, body) =
        mint(addr, &format!("Bearer {bob}"), json!({"session": {"type": "realtime", "model": "rt"}})).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = mint(addr, &format!("Bearer {bob}"), json!({})).await;
    assert_eq!(status, 200, "{body}");
    let bobs = body["value"].as_str().unwrap();
    let refused =
        open(addr, "/v1/realtime?model=rt", &[("authorization", &format!("Bearer {bobs}"))]).await.err().unwrap();
    assert_eq!(refused.0, 403, "{refused:?}");
    // Out-of-range lives are refused.
    let (status, _) =
        mint(addr, &format!("Bearer {alice}"), json!({"expires_after": {"anchor": "created_at", "seconds": 99999}}))
            .await;
    assert_eq!(status, 400);
    // A chat pool serves no realtime session.
    let refused =
        open(addr, "/v1/realtime?model=chat", &[("authorization", &format!("Bearer {alice}"))]).await.err().unwrap();
    assert_eq!(refused.0, 400, "{refused:?}");
}

/// What the test's own upstream saw.
#[derive(Default)]
struct Seen {
    authorization: Option<String>,
    path: Option<String>,
    /// The `response.cancel` events it was sent.
    cancels: Vec<Value>,
}

/// How the test's own upstream answers.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// `response.create`: four deltas and a `response.done` whose usage lies.
    Finish,
    /// `response.create`: four deltas, then nothing.
    Stall,
    /// `response.create`: refused with an `error` naming its `event_id`.
    Refuse,
    /// `input_audio_buffer.commit`: a response it starts itself (server VAD).
    Spontaneous,
}

/// An upstream Realtime server answering as `mode` says.
async fn upstream(seen: Arc<Mutex<Seen>>, mode: Mode) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let seen = seen.clone();
            tokio::spawn(async move {
                // The handshake API's own error type is large; it is never built here.
                #[allow(clippy::result_large_err, reason = "tungstenite's callback signature")]
                let callback = |request: &http::Request<()>, response| {
                    let mut seen = seen.lock().unwrap();
                    seen.authorization = request.headers().get("authorization").map(|v| v.to_str().unwrap().to_owned());
                    seen.path = Some(request.uri().to_string());
                    Ok(response)
                };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(tcp, callback).await else { return };
                let hello = json!({"type": "session.created", "event_id": "ev0", "session": {"model": "gpt-realtime"}});
                ws.send(Message::text(hello.to_string())).await.unwrap();
                while let Some(Ok(message)) = ws.next().await {
                    let Message::Text(text) = message else { continue };
                    let event: Value = serde_json::from_str(&text).unwrap();
                    if event["type"] == "response.cancel" {
                        seen.lock().unwrap().cancels.push(event);
                        continue;
                    }
                    if event["type"] == "conversation.item.create" {
                        let added =
                            json!({"type": "conversation.item.added", "event_id": "ack", "item": event["item"]});
                        ws.send(Message::text(added.to_string())).await.unwrap();
                        continue;
                    }
                    let starts = match mode {
                        Mode::Spontaneous => event["type"] == "input_audio_buffer.commit",
                        _ => event["type"] == "response.create",
                    };
                    if !starts {
                        continue;
                    }
                    if mode == Mode::Refuse {
                        let error = json!({"type": "error", "event_id": "e", "error": {"type": "invalid_request_error",
                            "code": "conversation_already_has_active_response", "message": "busy", "event_id": event["event_id"]}});
                        ws.send(Message::text(error.to_string())).await.unwrap();
                        continue;
                    }
                    let created = json!({"type": "response.created", "event_id": "ev1", "response": {"id": "resp_up", "status": "in_progress"}});
                    ws.send(Message::text(created.to_string())).await.unwrap();
                    for n in 0..4 {
                        let delta = json!({"type": "response.output_text.delta", "event_id": format!("d{n}"),
                                           "response_id": "resp_up", "item_id": "it", "output_index": 0, "content_index": 0, "delta": "word "});
                        ws.send(Message::text(delta.to_string())).await.unwrap();
                    }
                    if mode != Mode::Stall {
                        let done = json!({"type": "response.done", "event_id": "ev9", "response": {"id": "resp_up", "status": "completed",
                            "usage": {"input_tokens": 7, "output_tokens": 4, "input_token_details": {"cached_tokens": 5000, "audio_tokens": 900},
                                      "output_token_details": {"audio_tokens": 77}}}});
                        ws.send(Message::text(done.to_string())).await.unwrap();
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test]
async fn the_lanes_own_upstream_gets_its_credential_and_a_lying_usage_is_bounded() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let up = upstream(seen.clone(), Mode::Finish).await;
    let (addr, _) = governed(&config(&format!("http://{up}"), "")).await;
    let secret = key(addr, json!({"name": "k"})).await;
    let mut ws = open(addr, "/v1/realtime?model=rt", &[("authorization", &format!("Bearer {secret}"))]).await.unwrap();
    next_of(&mut ws, "session.created").await;
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.authorization.as_deref(), Some("Bearer sk-lane-secret"), "the lane's key, never the caller's");
        assert_eq!(seen.path.as_deref(), Some("/v1/realtime?model=gpt-realtime"));
    }
    ws.send(&json!({"type": "response.create"})).await;
    let events = until_done(&mut ws).await;
    assert_eq!(deltas(&events, "response.output_text.delta"), "word word word word ");
    let rows = ledger_rows(addr, "pool=rt", 1).await;
    let row = &rows[0];
    // Cached and audio cut to the 7 prompt tokens, audio out to the 4.
    assert_eq!((row["input_tokens"].as_u64(), row["cache_read_tokens"].as_u64()), (Some(7), Some(7)), "{row:#}");
    // 7 cached at $100/M and 4 audio out at $8000/M: nothing billed twice.
    assert_eq!(row["cost_nano"], (7 * 100 + 4 * 8_000) * 1_000, "{row:#}");
    assert!(row["ttfb_ms"].is_u64(), "{row:#}");
}

#[tokio::test]
async fn a_close_mid_generation_settles_it_once_at_what_was_delivered() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let up = upstream(seen, Mode::Stall).await;
    let (addr, _) = governed(&config(&format!("http://{up}"), "")).await;
    let secret = key(addr, json!({"name": "k"})).await;
    let mut ws = open(addr, "/v1/realtime?model=rt", &[("authorization", &format!("Bearer {secret}"))]).await.unwrap();
    next_of(&mut ws, "session.created").await;
    ws.send(&json!({"type": "response.create"})).await;
    for _ in 0..4 {
        next_of(&mut ws, "response.output_text.delta").await;
    }
    drop(ws);
    let rows = ledger_rows(addr, "pool=rt", 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let later = ledger_rows(addr, "pool=rt", 1).await;
    assert_eq!((rows.len(), later.len()), (1, 1), "settled once: {later:#?}");
    let row = &later[0];
    assert_eq!((row["status"].as_u64(), row["estimated"].as_bool()), (Some(499), Some(true)), "{row:#}");
    // "word " four times: 20 characters, 5 tokens at four a token.
    assert_eq!(row["output_tokens"], 5, "{row:#}");
}

#[tokio::test]
async fn guardrails_screen_what_the_caller_sends_and_what_the_model_writes_and_the_socket_goes_on() {
    let yaml = "providers:\n  oa: { protocol: openai, base_url: mock:// }\n\
                models:\n  rt: { provider: oa, model: gpt-realtime, operation: realtime }\n\
                policies:\n  \
                  words: { literal: [\"forbidden-phrase\"], action: block, direction: request }\n  \
                  pii: { detect: [email], action: mask, direction: response }\n  \
                  leaks: { literal: [\"top secret\"], action: block, direction: response }\n\
                pools:\n  guarded: { policies: [words, pii, leaks], members: [{ model: rt }] }\n";
    let addr = common::gateway(yaml).await;
    let mut ws = open(addr, "/v1/realtime?model=guarded", &[]).await.unwrap();
    next_of(&mut ws, "session.created").await;
    // What the caller sends: refused with the policy named, never passed on.
    ws.send(&json!({"event_id": "i1", "type": "conversation.item.create",
                    "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "say the forbidden-phrase"}]}}))
        .await;
    let error = ws.next().await.unwrap();
    assert_eq!((error["type"].as_str(), error["error"]["event_id"].as_str()), (Some("error"), Some("i1")), "{error}");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("`words`") && !message.contains("forbidden-phrase"), "{message}");
    // What the model writes (the fake echoes): an address masked in every
    // event that carries it, the deltas and the whole texts after.
    ws.send(&item("write to ada@example.com please")).await;
    next_of(&mut ws, "conversation.item.done").await;
    ws.send(&json!({"type": "response.create", "response": {"output_modalities": ["text"]}})).await;
    let events = until_done(&mut ws).await;
    let text = deltas(&events, "response.output_text.delta");
    assert!(text.starts_with("Echo: write to ") && !text.contains("ada@example.com"), "{text}");
    assert!(events.iter().all(|e| !e.to_string().contains("ada@example.com")), "{events:#?}");
    let done = events.last().unwrap();
    assert_eq!(done["response"]["output"][0]["content"][0]["text"], text.as_str(), "{done}");
    // Spoken, the masked words' audio is not passed on; the transcript is masked.
    ws.send(&json!({"type": "response.create"})).await;
    let events = until_done(&mut ws).await;
    assert!(events.iter().all(|e| e["type"] != "response.output_audio.delta"), "{events:#?}");
    assert!(events.iter().all(|e| !e.to_string().contains("ada@example.com")));
    // A blocked reply: an error naming the policy, none of its text.
    ws.send(&item("this is top secret material")).await;
    next_of(&mut ws, "conversation.item.done").await;
    ws.send(&json!({"type": "response.create", "response": {"output_modalities": ["text"]}})).await;
    let mut events = until_done(&mut ws).await;
    assert_eq!(events.last().unwrap()["type"], "error", "{events:#?}");
    assert!(events.last().unwrap()["error"]["message"].as_str().unwrap().contains("`leaks`"));
    events.extend(until_done(&mut ws).await);
    assert!(events.iter().all(|e| !e.to_string().contains("top secret")), "{events:#?}");
    // Clean text passes as it came, audio and all.
    ws.send(&item("all clear")).await;
    ws.send(&json!({"type": "response.create"})).await;
    let events = until_done(&mut ws).await;
    assert_eq!(deltas(&events, "response.output_audio_transcript.delta"), "Echo: all clear");
    assert!(events.iter().any(|e| e["type"] == "response.output_audio.delta"));
}

#[tokio::test]
async fn a_generation_the_upstream_refuses_costs_nothing_and_gives_its_hold_back() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let up = upstream(seen, Mode::Refuse).await;
    let (addr, _) = governed(&config(&format!("http://{up}"), "")).await;
    // One generation at a time: a hold not given back would refuse the next.
    let secret = key(addr, json!({"name": "one", "limits": {"concurrent": 1}})).await;
    let mut ws = open(addr, "/v1/realtime?model=rt", &[("authorization", &format!("Bearer {secret}"))]).await.unwrap();
    next_of(&mut ws, "session.created").await;
    for n in 0..3 {
        ws.send(&json!({"type": "response.create", "event_id": format!("c{n}")})).await;
        let error = ws.next().await.unwrap();
        // The upstream's own refusal, passed on: never the gateway's limit.
        assert_eq!(error["error"]["code"], "conversation_already_has_active_response", "{n}: {error}");
    }
    ws.send(&item("x")).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let rows =
        common::admin_call(addr, "GET", "/api/v1/admin/requests?limit=100&pool=rt", Some(common::ADMIN_TOKEN), None)
            .await;
    let page: Value = serde_json::from_slice(&rows.body).unwrap();
    assert!(page["data"].as_array().unwrap().iter().all(|r| r["cost_nano"] == 0), "nothing billed: {page:#}");
}

#[tokio::test]
async fn a_response_the_upstream_starts_itself_is_admitted_and_cancelled_when_refused() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let up = upstream(seen.clone(), Mode::Spontaneous).await;
    let (addr, _) = governed(&config(&format!("http://{up}"), "")).await;
    // A budget no hold fits: server VAD's response is refused when it starts.
    let secret = key(addr, json!({"name": "broke", "budget": {"usd": 0.000001, "window": "1d"}})).await;
    let mut ws = open(addr, "/v1/realtime?model=rt", &[("authorization", &format!("Bearer {secret}"))]).await.unwrap();
    next_of(&mut ws, "session.created").await;
    ws.send(&json!({"type": "input_audio_buffer.commit"})).await;
    let error = ws.next().await.unwrap();
    assert_eq!(
        (error["type"].as_str(), error["error"]["code"].as_str()),
        (Some("error"), Some("insufficient_quota")),
        "{error}"
    );
    // Cancelled upstream; none of its events reach the caller (the next
    // one is the answer to an item sent after: the upstream sent its
    // response's events before it); what it did before the cancel landed
    // is still settled from its usage.
    ws.send(&item("after")).await;
    let next = ws.next().await.unwrap();
    assert_eq!(next["type"], "conversation.item.added", "{next}");
    let cancels = seen.lock().unwrap().cancels.clone();
    assert_eq!(cancels, vec![json!({"type": "response.cancel", "response_id": "resp_up"})]);
    let rows = ledger_rows(addr, "pool=rt", 2).await;
    let served: Vec<&Value> = rows.iter().filter(|r| r["operation"] == "realtime").collect();
    assert_eq!(served.len(), 1, "{rows:#?}");
    assert_eq!((served[0]["input_tokens"].as_u64(), served[0]["status"].as_u64()), (Some(7), Some(200)), "{rows:#?}");
    // The refusal is a row of its own, as an HTTP refusal is.
    assert!(rows.iter().any(|r| r["operation"] == "refused" && r["status"] == 429), "{rows:#?}");
}

#[tokio::test]
async fn at_shutdown_an_open_generation_has_the_drain_to_finish_then_is_settled_once_and_the_socket_closes_1001() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let up = upstream(seen, Mode::Stall).await;
    let (addr, gateway) = governed(&config(&format!("http://{up}"), "duplex: { drain: 300ms }\n")).await;
    let secret = key(addr, json!({"name": "k"})).await;
    let mut ws = open(addr, "/v1/realtime?model=rt", &[("authorization", &format!("Bearer {secret}"))]).await.unwrap();
    next_of(&mut ws, "session.created").await;
    ws.send(&json!({"type": "response.create"})).await;
    for _ in 0..4 {
        next_of(&mut ws, "response.output_text.delta").await;
    }
    let stopped = std::time::Instant::now();
    gateway.sockets.stop();
    assert_eq!(ws.closed().await.map(|(code, _)| code), Some(1001));
    // It waited for the generation, within the drain.
    let waited = stopped.elapsed();
    assert!(waited >= Duration::from_millis(250) && waited < Duration::from_secs(3), "{waited:?}");
    let rows = ledger_rows(addr, "pool=rt", 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let later = ledger_rows(addr, "pool=rt", 1).await;
    assert_eq!((rows.len(), later.len()), (1, 1), "settled once: {later:#?}");
    assert_eq!((later[0]["status"].as_u64(), later[0]["estimated"].as_bool()), (Some(499), Some(true)));
    // The place is given back.
    tokio::time::timeout(Duration::from_secs(2), gateway.sockets.closed()).await.unwrap();
}
