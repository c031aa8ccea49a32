//! The Gemini Live relay over real TCP: a text turn and an audio turn on a
//! `mock://` lane, each turn one ledger row priced from its usage by
//! modality; a spent budget refusing the next generation only (Live has no
//! error message: a 1008 close with the reason); hostile and malformed
//! messages closing with the reason, a key that may not use the pool and
//! unknown pools refused at `setup`; against an upstream socket of the
//! test's own, the lane's key (never the caller's) and wire model on its
//! handshake and setup, its unreadable frames dropped, a usage that lies
//! bounded, and a close from either side mid-turn settled once; and
//! guardrails on what the caller sends and what the model writes and says.
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

const PATH: &str = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent";

/// The live lane's prices: per million tokens of each kind.
const CARD: &str =
    "{ input_utok: 1000, output_utok: 2000, cache_read_utok: 100, audio_input_utok: 4000, audio_output_utok: 8000 }";

/// A governed gateway with a priced live lane `lv` (on `base_url`), a chat
/// lane `chat`, and `extra` config.
fn config(base_url: &str, card: &str, extra: &str) -> String {
    format!(
        "providers:\n  g: {{ protocol: gemini, base_url: \"{base_url}\", api_key: lane-secret }}\n\
         models:\n  lv: {{ provider: g, model: gemini-live-wire, operation: live }}\n  \
         chat: {{ provider: g, model: gemini-flash }}\n\
         rate_card:\n  lv: {card}\n  chat: {{ input_utok: 1, output_utok: 1 }}\n\
         auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n{extra}"
    )
}

async fn key(addr: SocketAddr, spec: Value) -> String {
    create_key(addr, spec).await["key"].as_str().unwrap().to_owned()
}

/// A session of `model` opened with `key` in `x-goog-api-key` and set up
/// with `config` (merged into `setup`); its `setupComplete` read.
async fn session(addr: SocketAddr, key: &str, model: &str, config: Value) -> Ws {
    let mut ws = open(addr, PATH, &[("x-goog-api-key", key)]).await.unwrap();
    let mut setup = json!({"model": format!("models/{model}")});
    setup.as_object_mut().unwrap().extend(config.as_object().unwrap().clone());
    ws.send(&json!({ "setup": setup })).await;
    let complete = ws.next().await.unwrap();
    assert_eq!(complete, json!({"setupComplete": {}}));
    ws
}

/// Messages up to the turn's end.
async fn turn(ws: &mut Ws) -> Vec<Value> {
    let mut messages = Vec::new();
    while let Some(message) = ws.next().await {
        let done = message["serverContent"]["turnComplete"] == true;
        messages.push(message);
        if done {
            return messages;
        }
    }
    panic!("the session closed: {messages:#?}");
}

fn user(text: &str) -> Value {
    json!({"clientContent": {"turns": [{"role": "user", "parts": [{"text": text}]}], "turnComplete": true}})
}

fn texts(messages: &[Value]) -> String {
    messages.iter().filter_map(|m| m["serverContent"]["modelTurn"]["parts"][0]["text"].as_str()).collect()
}

fn transcript(messages: &[Value]) -> String {
    messages.iter().filter_map(|m| m["serverContent"]["outputTranscription"]["text"].as_str()).collect()
}

fn audio_parts(messages: &[Value]) -> usize {
    messages.iter().filter(|m| m["serverContent"]["modelTurn"]["parts"][0]["inlineData"].is_object()).count()
}

#[tokio::test]
async fn a_text_turn_and_an_audio_turn_are_relayed_and_each_turn_is_a_priced_ledger_row() {
    let (addr, _) = governed(&config("mock://", CARD, "")).await;
    let secret = key(addr, json!({"name": "voice"})).await;
    let spoken = json!({"generationConfig": {"responseModalities": ["AUDIO"]}, "outputAudioTranscription": {}, "inputAudioTranscription": {}});
    let mut ws = session(addr, &secret, "lv", spoken).await;
    // A typed turn, answered in speech with its transcript.
    ws.send(&user("hello there")).await;
    let messages = turn(&mut ws).await;
    assert_eq!(transcript(&messages), "Echo: hello there", "{messages:#?}");
    assert_eq!(audio_parts(&messages), 3);
    // 320 ms of 16 kHz PCM16 spoken, then the end of the stream (as
    // google-genai's send_realtime_input sends them, snake_case outside).
    let chunk = "A".repeat(13_656);
    ws.send(&json!({"realtime_input": {"audio": {"data": chunk, "mimeType": "audio/pcm;rate=16000"}}})).await;
    ws.send(&json!({"realtime_input": {"audioStreamEnd": true}})).await;
    let messages = turn(&mut ws).await;
    assert_eq!(messages[0]["serverContent"]["inputTranscription"]["text"], "audio of 320 ms");
    assert_eq!(transcript(&messages), "Echo: audio of 320 ms");
    assert_eq!(audio_parts(&messages), 5);
    // One row per turn: operation live, the pool, the lane's model, each
    // kind of token, priced to the nano-USD by the card.
    let mut rows = ledger_rows(addr, "pool=lv", 2).await;
    assert_eq!(rows.len(), 2, "{rows:#?}");
    rows.sort_by_key(|r| r["output_tokens"].as_u64());
    for row in &rows {
        assert_eq!((row["operation"].as_str(), row["model"].as_str()), (Some("live"), Some("gemini-live-wire")));
        assert_eq!((row["status"].as_u64(), row["estimated"].as_bool()), (Some(200), Some(false)), "{row}");
    }
    // Typed: 3 text tokens in at $1000/M, 15 audio out at $8000/M.
    let typed = &rows[0];
    assert_eq!(
        (typed["input_tokens"].as_u64(), typed["audio_output_tokens"].as_u64()),
        (Some(3), Some(15)),
        "{typed:#}"
    );
    assert_eq!(typed["cost_nano"], 123_000_000, "{typed:#}");
    // Spoken: 26 in (the first prompt's 3 text tokens cached, 23 audio:
    // the 15 the model said and the 8 heard), 25 audio out.
    let heard = &rows[1];
    assert_eq!((heard["input_tokens"].as_u64(), heard["cache_read_tokens"].as_u64()), (Some(26), Some(3)), "{heard:#}");
    assert_eq!((heard["audio_input_tokens"].as_u64(), heard["audio_output_tokens"].as_u64()), (Some(23), Some(25)));
    assert_eq!(heard["cost_nano"], 292_300_000, "{heard:#}");
}

#[tokio::test]
async fn a_spent_budget_refuses_the_next_generation_only_with_a_1008_close() {
    // Dear tokens: one turn's hold (its prompt as estimated and 100 output
    // tokens) fits the budget; what each spends (its prompt grows each
    // turn) leaves it short of the next one's hold within a few turns.
    let (addr, _) = governed(&config("mock://", "{ input_utok: 100, output_utok: 100 }", "")).await;
    let secret = key(addr, json!({"name": "thrifty", "budget": {"usd": 0.3, "window": "1d"}})).await;
    let text = json!({"generationConfig": {"responseModalities": ["TEXT"], "maxOutputTokens": 100}});
    let mut ws = session(addr, &secret, "lv", text).await;
    let mut served = 0;
    let refused = loop {
        assert!(served < 40, "the budget never ran out");
        ws.send(&user(&format!("turn {served} {}", "words ".repeat(200)))).await;
        let mut messages = Vec::new();
        let closed = loop {
            match ws.next_or_closed().await {
                Ok(message) => {
                    let ended = message["serverContent"]["turnComplete"] == true;
                    messages.push(message);
                    if ended {
                        break None;
                    }
                }
                Err(closed) => break Some(closed),
            }
        };
        if let Some(closed) = closed {
            // Nothing of the refused turn came before the close.
            assert!(messages.is_empty(), "{messages:#?}");
            break closed;
        }
        assert!(texts(&messages).starts_with(&format!("Echo: turn {served} ")));
        served += 1;
    };
    assert!(served >= 1, "the first turn fits");
    let (code, reason) = refused.unwrap_or((0, String::new()));
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.starts_with("RESOURCE_EXHAUSTED: "), "{reason}");
    // The turns before are billed, each once; the refused one is a
    // refusal's row, not a served one.
    let rows = ledger_rows(addr, "pool=lv&status=200", served).await;
    assert_eq!(rows.len(), served, "{rows:#?}");
    assert!(rows.iter().all(|r| r["operation"] == "live" && r["cost_nano"].as_u64() > Some(0)), "{rows:#?}");
}

#[tokio::test]
async fn hostile_and_malformed_messages_close_with_the_reason_and_setup_is_checked() {
    let (addr, _) = governed(&config("mock://", CARD, "duplex: { max_message: 64KiB }\n")).await;
    let alice = key(addr, json!({"name": "alice"})).await;
    // No key, or a wrong one: the handshake's own 401, in Gemini's shape.
    let refused = open(addr, PATH, &[]).await.err().unwrap();
    assert_eq!(refused.0, 401, "{refused:?}");
    let refused = open(addr, &format!("{PATH}?key=sk-guess"), &[]).await.err().unwrap();
    assert_eq!(refused.0, 401, "{refused:?}");
    assert!(refused.1.contains("\"status\""), "{}", refused.1);
    // `setup` checked: the first message, a pool that serves live, one the
    // key may use (another tenant's key, limited to `chat`).
    let bob = key(addr, json!({"name": "bob", "pools": ["chat"]})).await;
    let cases: [(&str, Value, u16, &str); 5] = [
        (&alice, user("hi"), 1007, "the first message is `setup`"),
        (&alice, json!({"setup": {"model": "models/nope"}}), 1008, "NOT_FOUND: "),
        (&alice, json!({"setup": {"model": "models/chat"}}), 1008, "serves chat, not live"),
        (&bob, json!({"setup": {"model": "models/lv"}}), 1008, "PERMISSION_DENIED: "),
        (
            &alice,
            json!({"setup": {"model": "models/lv"}, "clientContent": {"turnComplete": true}}),
            1007,
            "exactly one",
        ),
    ];
    for (key, first, code, says) in cases {
        let mut ws = open(addr, &format!("{PATH}?key={key}"), &[]).await.unwrap();
        ws.send(&first).await;
        let (closed, reason) = ws.closed().await.unwrap();
        assert_eq!(closed, code, "{first}: {reason}");
        assert!(reason.contains(says), "{first}: {reason}");
    }
    // A setup sent as a binary frame (Live's JSON may come so) is read.
    let mut ws = open(addr, PATH, &[("x-goog-api-key", &alice)]).await.unwrap();
    let setup = json!({"setup": {"model": "lv", "generationConfig": {"responseModalities": ["TEXT"]}}});
    ws.send_raw(Message::binary(setup.to_string().into_bytes())).await;
    assert_eq!(ws.next().await.unwrap(), json!({"setupComplete": {}}));
    ws.send(&user("fine")).await;
    assert_eq!(texts(&turn(&mut ws).await), "Echo: fine");
    // A finished turn hidden behind a doubled field: never passed on.
    ws.send_raw(Message::text(r#"{"clientContent":{"turnComplete":false,"turn_complete":true}}"#)).await;
    let (code, reason) = ws.closed().await.unwrap();
    assert_eq!(code, 1007, "{reason}");
    assert!(reason.contains("duplicate field"), "{reason}");
    // Too large: 1009, naming the bound.
    let mut ws = session(addr, &alice, "lv", json!({})).await;
    ws.send(&json!({"realtimeInput": {"audio": {"data": "A".repeat(100 << 10)}}})).await;
    let (code, reason) = ws.closed().await.unwrap();
    assert_eq!(code, 1009, "{reason}");
    assert!(reason.contains("duplex.max_message"), "{reason}");
    // Only the one turn was a generation.
    assert_eq!(ledger_rows(addr, "pool=lv&status=200", 1).await.len(), 1);
}

/// What the test's own upstream saw.
#[derive(Default)]
struct Seen {
    api_key: Option<String>,
    authorization: Option<String>,
    path: Option<String>,
    setup: Option<Value>,
    /// The messages after `setup` it was sent.
    sent: Vec<Value>,
}

/// How the test's own upstream answers a finished turn.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Junk first (not UTF-8, not JSON, a doubled field), then four text
    /// parts and a `turnComplete` whose usage lies, as binary frames.
    Finish,
    /// Four text parts, then nothing.
    Stall,
    /// Four text parts, then it closes the session.
    Hangup,
    /// After `setup`, a turn nothing asked for (a greeting), with usage.
    Greet,
}

/// An upstream Live server answering as `mode` says.
async fn upstream(seen: Arc<Mutex<Seen>>, mode: Mode) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let seen = seen.clone();
            tokio::spawn(async move {
                #[allow(clippy::result_large_err, reason = "tungstenite's callback signature")]
                let callback = |request: &http::Request<()>, response| {
                    let mut seen = seen.lock().unwrap();
                    let header = |name: &str| request.headers().get(name).map(|v| v.to_str().unwrap().to_owned());
                    seen.api_key = header("x-goog-api-key");
                    seen.authorization = header("authorization");
                    seen.path = Some(request.uri().to_string());
                    Ok(response)
                };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(tcp, callback).await else { return };
                let send = |value: Value| Message::binary(value.to_string().into_bytes());
                while let Some(Ok(message)) = ws.next().await {
                    let text = match message {
                        Message::Text(text) => text.to_string(),
                        Message::Binary(bytes) => String::from_utf8(bytes.to_vec()).unwrap(),
                        _ => continue,
                    };
                    let message: Value = serde_json::from_str(&text).unwrap();
                    if let Some(setup) = message.get("setup") {
                        seen.lock().unwrap().setup = Some(setup.clone());
                        ws.send(send(json!({"setupComplete": {}}))).await.unwrap();
                        if mode == Mode::Greet {
                            let part = json!({"serverContent": {"modelTurn": {"parts": [{"text": "welcome"}]}}});
                            ws.send(send(part)).await.unwrap();
                            let usage = json!({"promptTokenCount": 2, "responseTokenCount": 1});
                            let done = json!({"serverContent": {"turnComplete": true}, "usageMetadata": usage});
                            ws.send(send(done)).await.unwrap();
                        }
                        continue;
                    }
                    seen.lock().unwrap().sent.push(message.clone());
                    if message["clientContent"]["turnComplete"] != true {
                        continue;
                    }
                    if mode == Mode::Finish {
                        ws.send(Message::binary(vec![0xff, 0xfe, 0x00])).await.unwrap();
                        ws.send(Message::text("not json")).await.unwrap();
                        let doubled = r#"{"serverContent":{"turnComplete":true,"turnComplete":false}}"#;
                        ws.send(Message::text(doubled)).await.unwrap();
                    }
                    for _ in 0..4 {
                        let part =
                            json!({"serverContent": {"modelTurn": {"role": "model", "parts": [{"text": "word "}]}}});
                        ws.send(send(part)).await.unwrap();
                    }
                    match mode {
                        Mode::Finish => {
                            let usage = json!({"promptTokenCount": 7, "cachedContentTokenCount": 5000, "responseTokenCount": 4,
                                "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": 900}],
                                "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": 77}]});
                            ws.send(send(json!({"serverContent": {"turnComplete": true}, "usageMetadata": usage})))
                                .await
                                .unwrap();
                        }
                        Mode::Stall | Mode::Greet => {}
                        Mode::Hangup => {
                            let _ = ws.close(None).await;
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test]
async fn the_lanes_own_upstream_gets_its_key_and_model_drops_junk_and_a_lying_usage_is_bounded() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let up = upstream(seen.clone(), Mode::Finish).await;
    let (addr, _) = governed(&config(&format!("http://{up}"), CARD, "")).await;
    let secret = key(addr, json!({"name": "k"})).await;
    // The caller's key in the query, as older SDKs send it.
    let mut ws = open(addr, &format!("{PATH}?key={secret}"), &[]).await.unwrap();
    ws.send(&json!({"setup": {"model": "models/lv", "generationConfig": {"responseModalities": ["TEXT"]}}})).await;
    assert_eq!(ws.next().await.unwrap(), json!({"setupComplete": {}}));
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.api_key.as_deref(), Some("lane-secret"), "the lane's key, never the caller's");
        assert_eq!(seen.authorization, None);
        assert_eq!(seen.path.as_deref(), Some(PATH), "no key in the upstream's URL");
        let setup = seen.setup.as_ref().unwrap();
        assert_eq!(setup["model"], "models/gemini-live-wire", "{setup}");
        assert!(!setup.to_string().contains(&secret));
    }
    ws.send(&user("hi")).await;
    // The junk never reaches the caller, and the session goes on.
    let messages = turn(&mut ws).await;
    assert_eq!(texts(&messages), "word word word word ", "{messages:#?}");
    assert_eq!(messages.len(), 5, "{messages:#?}");
    let rows = ledger_rows(addr, "pool=lv", 1).await;
    let row = &rows[0];
    // Cached cut to the 7 prompt tokens (nothing left for audio), audio
    // out to the 4.
    assert_eq!((row["input_tokens"].as_u64(), row["cache_read_tokens"].as_u64()), (Some(7), Some(7)), "{row:#}");
    assert_eq!((row["audio_input_tokens"].as_u64(), row["audio_output_tokens"].as_u64()), (Some(0), Some(4)));
    // 7 cached at $100/M and 4 audio out at $8000/M: nothing billed twice.
    assert_eq!(row["cost_nano"], (7 * 100 + 4 * 8_000) * 1_000, "{row:#}");
    assert!(row["ttfb_ms"].is_u64(), "{row:#}");
}

#[tokio::test]
async fn a_close_from_either_side_mid_turn_settles_it_once_at_what_was_delivered() {
    for (mode, status, code) in [(Mode::Stall, 499, None), (Mode::Hangup, 502, Some(1011))] {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let up = upstream(seen, mode).await;
        let (addr, _) = governed(&config(&format!("http://{up}"), CARD, "")).await;
        let secret = key(addr, json!({"name": "k"})).await;
        let mut ws = session(addr, &secret, "lv", json!({"generationConfig": {"responseModalities": ["TEXT"]}})).await;
        ws.send(&user("hi")).await;
        for _ in 0..4 {
            ws.next().await.unwrap();
        }
        match code {
            // The caller goes.
            None => drop(ws),
            // The upstream went: the caller is told, with the reason.
            Some(code) => {
                let (closed, reason) = ws.closed().await.unwrap();
                assert_eq!(closed, code, "{reason}");
                assert!(reason.contains("upstream"), "{reason}");
            }
        }
        let rows = ledger_rows(addr, "pool=lv", 1).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let later = ledger_rows(addr, "pool=lv", 1).await;
        assert_eq!((rows.len(), later.len()), (1, 1), "settled once: {later:#?}");
        let row = &later[0];
        assert_eq!((row["status"].as_u64(), row["estimated"].as_bool()), (Some(status), Some(true)), "{row:#}");
        // "word " four times: 20 characters, 5 tokens at four a token.
        assert_eq!(row["output_tokens"], 5, "{row:#}");
    }
}

#[tokio::test]
async fn guardrails_screen_what_the_caller_sends_and_what_the_model_writes_and_says() {
    let yaml = "providers:\n  g: { protocol: gemini, base_url: mock:// }\n\
                models:\n  lv: { provider: g, model: gemini-live-wire, operation: live }\n\
                policies:\n  \
                  words: { literal: [\"forbidden-phrase\"], action: block, direction: request }\n  \
                  pii: { detect: [email], action: mask, direction: response }\n  \
                  leaks: { literal: [\"top secret\"], action: block, direction: response }\n\
                pools:\n  guarded: { policies: [words, pii, leaks], members: [{ model: lv }] }\n";
    let addr = common::gateway(yaml).await;
    let text = json!({"generationConfig": {"responseModalities": ["TEXT"]}});
    let spoken = json!({"generationConfig": {"responseModalities": ["AUDIO"]}, "outputAudioTranscription": {}});
    // What the caller sends: refused with the policy named, never passed on.
    let mut ws = session(addr, "", "guarded", text.clone()).await;
    ws.send(&user("say the forbidden-phrase")).await;
    let (code, reason) = ws.closed().await.unwrap();
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.contains("`words`") && !reason.contains("forbidden-phrase"), "{reason}");
    // What the model writes (the fake echoes): an address masked, even
    // split across parts.
    let mut ws = session(addr, "", "guarded", text.clone()).await;
    ws.send(&user("write to ada@example.com please")).await;
    let messages = turn(&mut ws).await;
    let said = texts(&messages);
    assert!(said.starts_with("Echo: write to ") && said.ends_with(" please"), "{said}");
    assert!(messages.iter().all(|m| !m.to_string().contains("ada@example.com")), "{messages:#?}");
    // Spoken: the transcript masked, and the audio that spoke the address
    // not passed on.
    let mut ws = session(addr, "", "guarded", spoken.clone()).await;
    ws.send(&user("write to ada@example.com please")).await;
    let messages = turn(&mut ws).await;
    let heard = transcript(&messages);
    assert!(heard.starts_with("Echo: write to ") && !heard.contains("ada@example.com"), "{heard}");
    assert_eq!(audio_parts(&messages), 0, "{messages:#?}");
    // Clean speech passes whole, audio and all.
    ws.send(&user("all clear")).await;
    let messages = turn(&mut ws).await;
    assert_eq!((transcript(&messages).as_str(), audio_parts(&messages)), ("Echo: all clear", 3));
    // A blocked reply: the session ends naming the policy, none of its text out.
    ws.send(&user("this is top secret material")).await;
    let mut out = Vec::new();
    while let Some(message) = ws.next().await {
        out.push(message);
    }
    assert!(out.iter().all(|m| !m.to_string().contains("top secret")), "{out:#?}");
    assert_eq!(audio_parts(&out), 0, "{out:#?}");
    let mut ws = session(addr, "", "guarded", text).await;
    ws.send(&user("this is top secret material")).await;
    let (code, reason) = ws.closed().await.unwrap();
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.contains("`leaks`") && !reason.contains("top secret"), "{reason}");
}

#[tokio::test]
async fn the_demo_serves_a_live_session_offline() {
    let addr = common::gateway(switchyard_config::DEMO_CONFIG).await;
    let mut ws = session(addr, "", "demo-live", json!({"generationConfig": {"responseModalities": ["TEXT"]}})).await;
    ws.send(&user("hello demo")).await;
    let messages = turn(&mut ws).await;
    assert_eq!(texts(&messages), "Echo: hello demo", "{messages:#?}");
    assert_eq!(messages.last().unwrap()["usageMetadata"]["responseTokenCount"], 3);
}

#[tokio::test]
async fn a_key_revoked_mid_session_is_refused_at_its_next_turn() {
    let (addr, _) = governed(&config("mock://", CARD, "")).await;
    let created = create_key(addr, json!({"name": "soon-gone"})).await;
    let (secret, id) = (created["key"].as_str().unwrap(), created["id"].as_str().unwrap());
    let mut ws = session(addr, secret, "lv", json!({"generationConfig": {"responseModalities": ["TEXT"]}})).await;
    ws.send(&user("first")).await;
    assert_eq!(texts(&turn(&mut ws).await), "Echo: first");
    let revoked =
        common::admin_call(addr, "DELETE", &format!("/api/v1/admin/keys/{id}"), Some(common::ADMIN_TOKEN), None).await;
    assert_eq!(revoked.status, 200);
    ws.send(&user("still?")).await;
    let (code, reason) = ws.next_or_closed().await.unwrap_err().unwrap();
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.starts_with("UNAUTHENTICATED: "), "{reason}");
    assert_eq!(ledger_rows(addr, "pool=lv&status=200", 1).await.len(), 1);
}

#[tokio::test]
async fn at_shutdown_the_caller_is_told_to_go_away_and_an_open_turn_has_the_drain_then_is_settled_once() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let up = upstream(seen, Mode::Stall).await;
    let (addr, gateway) = governed(&config(&format!("http://{up}"), CARD, "duplex: { drain: 300ms }\n")).await;
    let secret = key(addr, json!({"name": "k"})).await;
    let mut ws = session(addr, &secret, "lv", json!({"generationConfig": {"responseModalities": ["TEXT"]}})).await;
    ws.send(&user("hi")).await;
    for _ in 0..4 {
        ws.next().await.unwrap();
    }
    let stopped = std::time::Instant::now();
    gateway.sockets.stop();
    let away = ws.next_or_closed().await.unwrap();
    assert_eq!(away["goAway"]["timeLeft"], "0.300s", "{away}");
    let (code, _) = ws.next_or_closed().await.unwrap_err().unwrap();
    assert_eq!(code, 1001);
    // It waited for the turn, within the drain.
    let waited = stopped.elapsed();
    assert!(waited >= Duration::from_millis(250) && waited < Duration::from_secs(3), "{waited:?}");
    let rows = ledger_rows(addr, "pool=lv", 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let later = ledger_rows(addr, "pool=lv", 1).await;
    assert_eq!((rows.len(), later.len()), (1, 1), "settled once: {later:#?}");
    assert_eq!((later[0]["status"].as_u64(), later[0]["estimated"].as_bool()), (Some(499), Some(true)));
    // The place is given back.
    tokio::time::timeout(Duration::from_secs(2), gateway.sockets.closed()).await.unwrap();
}

#[tokio::test]
async fn realtime_input_is_admitted_before_it_goes_upstream_and_an_unasked_turn_when_it_starts() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let up = upstream(seen.clone(), Mode::Greet).await;
    let (addr, _) = governed(&config(&format!("http://{up}"), CARD, "")).await;
    // A healthy key: the greeting nothing asked for is admitted when it
    // starts, passed on, and billed from its usage.
    let secret = key(addr, json!({"name": "rich"})).await;
    let mut ws = session(addr, &secret, "lv", json!({})).await;
    let greeting = turn(&mut ws).await;
    assert_eq!(texts(&greeting), "welcome");
    let rows = ledger_rows(addr, "pool=lv", 1).await;
    assert_eq!((rows[0]["input_tokens"].as_u64(), rows[0]["status"].as_u64()), (Some(2), Some(200)), "{rows:#?}");
    // A spent key: the greeting is refused when it starts and never reaches
    // the caller; the session ends with the reason.
    let broke = key(addr, json!({"name": "broke", "budget": {"usd": 0.000001, "window": "1d"}})).await;
    let mut ws = open(addr, PATH, &[("x-goog-api-key", &broke)]).await.unwrap();
    ws.send(&json!({"setup": {"model": "models/lv"}})).await;
    assert_eq!(ws.next_or_closed().await.unwrap(), json!({"setupComplete": {}}));
    let (code, reason) = ws.next_or_closed().await.unwrap_err().unwrap();
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.starts_with("RESOURCE_EXHAUSTED: "), "{reason}");
    // Spoken input from a spent key is refused before any of it goes up.
    let seen = Arc::new(Mutex::new(Seen::default()));
    let up = upstream(seen.clone(), Mode::Finish).await;
    let (addr, _) = governed(&config(&format!("http://{up}"), CARD, "")).await;
    let broke = key(addr, json!({"name": "broke", "budget": {"usd": 0.000001, "window": "1d"}})).await;
    let mut ws = session(addr, &broke, "lv", json!({})).await;
    ws.send(&json!({"realtimeInput": {"activityStart": {}}})).await;
    ws.send(&json!({"realtimeInput": {"audio": {"data": "A".repeat(4_000), "mimeType": "audio/pcm;rate=16000"}}}))
        .await;
    let (code, reason) = ws.next_or_closed().await.unwrap_err().unwrap();
    assert_eq!(code, 1008, "{reason}");
    let sent = seen.lock().unwrap().sent.clone();
    assert_eq!(sent, vec![json!({"realtimeInput": {"activityStart": {}}})], "no audio went upstream");
}

/// Mints an ephemeral token with `key`; the reply's status and body.
async fn mint(addr: SocketAddr, key: &str, body: Value) -> (u16, Value, Option<String>) {
    let reply = common::post(addr, "/v1alpha/auth_tokens", &[("x-goog-api-key", key)], body.to_string()).await;
    let cache = reply.headers.get("cache-control").map(|v| v.to_str().unwrap().to_owned());
    (reply.status.as_u16(), serde_json::from_slice(&reply.body).unwrap_or(Value::Null), cache)
}

#[tokio::test]
async fn an_ephemeral_token_opens_its_keys_sessions_of_its_model_and_nothing_else() {
    let (addr, gateway) = governed(&config("mock://", CARD, "")).await;
    let created = create_key(addr, json!({"name": "alice"})).await;
    let (alice, alice_id) = (created["key"].as_str().unwrap().to_owned(), created["id"].as_str().unwrap().to_owned());
    let (status, minted, cache) =
        mint(addr, &alice, json!({"uses": 1, "bidiGenerateContentSetup": {"model": "models/lv"}})).await;
    assert_eq!((status, cache.as_deref()), (200, Some("no-store")), "{minted}");
    let name = minted["name"].as_str().unwrap().to_owned();
    assert!(
        name.starts_with("auth_tokens/sy-ek-") && !name.contains(&alice) && !name.contains("lane-secret"),
        "{name}"
    );
    // As google-genai sends it: `Token` on the constrained method; and in
    // `access_token=`. Each session's turns are alice's.
    let constrained = PATH.replace("BidiGenerateContent", "BidiGenerateContentConstrained");
    let text = json!({"setup": {"model": "models/lv", "generationConfig": {"responseModalities": ["TEXT"]}}});
    for (path, headers) in [
        (constrained.clone(), vec![("authorization", format!("Token {name}"))]),
        (format!("{PATH}?access_token={name}"), vec![]),
    ] {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let mut ws = open(addr, &path, &headers).await.unwrap();
        ws.send(&text).await;
        assert_eq!(ws.next().await.unwrap(), json!({"setupComplete": {}}));
        ws.send(&user("from a browser")).await;
        assert_eq!(texts(&turn(&mut ws).await), "Echo: from a browser");
    }
    let rows = ledger_rows(addr, "pool=lv", 2).await;
    assert!(rows.len() == 2 && rows.iter().all(|r| r["key_id"] == alice_id.as_str()), "{rows:#?}");
    // Bound to its model: not another pool's session.
    let mut ws = open(addr, &constrained, &[("authorization", &format!("Token {name}"))]).await.unwrap();
    ws.send(&json!({"setup": {"model": "models/chat"}})).await;
    let (code, reason) = ws.closed().await.unwrap();
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.contains("PERMISSION_DENIED") && reason.contains("`lv`"), "{reason}");
    // Never an API key: no HTTP route takes it, and it mints no token.
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}).to_string();
    let reply = common::post(addr, "/v1beta/models/chat:generateContent", &[("x-goog-api-key", &name)], body).await;
    assert_eq!(reply.status, 401, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(mint(addr, &name, json!({})).await.0, 401, "a token mints no token");
    // A guess, or one past its window, opens nothing.
    let guess = format!("auth_tokens/sy-ek-{}", "0".repeat(64));
    assert_eq!(open(addr, &constrained, &[("authorization", &format!("Token {guess}"))]).await.err().unwrap().0, 401);
    let grant = switchyard_state::client_secrets::Grant { key_id: alice_id.clone(), model: None, expires_at_ms: 1 };
    let expired = gateway.client_secrets.mint(grant, 2).unwrap();
    let refused = open(addr, &format!("{PATH}?access_token={expired}"), &[]).await.err().unwrap();
    assert_eq!(refused.0, 401);
    assert!(refused.1.contains("expired"), "{}", refused.1);
    // What the gateway would not enforce is refused at the mint, and a
    // key limited to `chat` mints no token for `lv`.
    let soon = "2099-01-01T00:00:00Z";
    for body in [
        json!({"uses": 3}),
        json!({"fieldMask": "generationConfig.temperature"}),
        json!({"expireTime": soon}),
        json!({"newSessionExpireTime": soon}),
        json!({"newSessionExpireTime": "tomorrow"}),
        json!({"bidiGenerateContentSetup": {"model": "models/lv", "systemInstruction": {"parts": [{"text": "x"}]}}}),
        json!({"bidiGenerateContentSetup": {"model": "models/chat"}}),
    ] {
        let (status, answer, _) = mint(addr, &alice, body.clone()).await;
        assert_eq!(status, 400, "{body}: {answer}");
    }
    let bob = key(addr, json!({"name": "bob", "pools": ["chat"]})).await;
    assert_eq!(mint(addr, &bob, json!({"bidiGenerateContentSetup": {"model": "models/lv"}})).await.0, 403);
}
