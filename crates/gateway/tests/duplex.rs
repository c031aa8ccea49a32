//! The duplex surface over real TCP: Responses over WebSocket on lanes of
//! every protocol (five chained turns with a tool call, `store: false`),
//! Codex's own request shapes, bad events answered and the socket going
//! on, a spent budget refusing the next turn only, the bounds of a socket.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code")]

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{create_key, governed, lanes_config, ledger_rows};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use switchyard_protocol::ir::Protocol;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

type Stream = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A caller's socket.
pub struct Ws(Stream);

/// Opens `ws://addr{path}` with `headers`; the handshake's HTTP refusal as
/// its status and body.
pub async fn open(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Result<Ws, (u16, String)> {
    let mut request = format!("ws://{addr}{path}").into_client_request().unwrap();
    for (name, value) in headers {
        request.headers_mut().insert(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            http::HeaderValue::from_str(value).unwrap(),
        );
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((stream, _)) => Ok(Ws(stream)),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let body = response.body().as_ref().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
            Err((response.status().as_u16(), body))
        }
        Err(other) => panic!("the handshake failed: {other}"),
    }
}

impl Ws {
    pub async fn send(&mut self, event: &Value) {
        self.0.send(Message::text(event.to_string())).await.unwrap();
    }

    pub async fn send_raw(&mut self, message: Message) {
        self.0.send(message).await.unwrap();
    }

    /// The next event (within 10 s); `None` once the socket closed.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            let message = tokio::time::timeout(Duration::from_secs(10), self.0.next()).await.expect("an event");
            match message {
                Some(Ok(Message::Text(text))) => return Some(serde_json::from_str(&text).unwrap()),
                Some(Ok(Message::Close(frame))) => {
                    eprintln!("closed: {frame:?}");
                    return None;
                }
                None => return None,
                Some(Err(err)) => {
                    eprintln!("failed: {err}");
                    return None;
                }
                Some(Ok(_)) => {}
            }
        }
    }

    /// The next event, or the close frame's code and reason (`None`:
    /// closed without one), within 10 s.
    pub async fn next_or_closed(&mut self) -> Result<Value, Option<(u16, String)>> {
        loop {
            let message = tokio::time::timeout(Duration::from_secs(10), self.0.next()).await.expect("an event");
            match message {
                Some(Ok(Message::Text(text))) => return Ok(serde_json::from_str(&text).unwrap()),
                Some(Ok(Message::Close(frame))) => return Err(frame.map(|f| (u16::from(f.code), f.reason.to_string()))),
                None | Some(Err(_)) => return Err(None),
                Some(Ok(_)) => {}
            }
        }
    }

    /// The close frame's code and reason (within 10 s), skipping events.
    pub async fn closed(&mut self) -> Option<(u16, String)> {
        loop {
            let message = tokio::time::timeout(Duration::from_secs(10), self.0.next()).await.expect("a close");
            match message {
                Some(Ok(Message::Close(frame))) => return frame.map(|f| (u16::from(f.code), f.reason.to_string())),
                None | Some(Err(_)) => return None,
                Some(Ok(_)) => {}
            }
        }
    }

    /// Sends `create` and reads its events up to its terminal one (or an error).
    pub async fn turn(&mut self, create: &Value) -> Vec<Value> {
        self.send(create).await;
        self.events().await
    }

    /// Events up to a response's terminal one, or an error event.
    pub async fn events(&mut self) -> Vec<Value> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            let kind = event["type"].as_str().unwrap_or_default().to_owned();
            events.push(event);
            if matches!(kind.as_str(), "response.completed" | "response.incomplete" | "response.failed" | "error") {
                break;
            }
        }
        events
    }
}

/// The terminal response of a turn's events.
fn completed(events: &[Value]) -> &Value {
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.completed", "{events:#?}");
    &last["response"]
}

/// The text a turn's response said.
fn said(response: &Value) -> String {
    response["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "message")
        .flat_map(|item| item["content"].as_array().unwrap().iter())
        .filter_map(|part| part["text"].as_str())
        .collect()
}

fn tools() -> Value {
    json!([{"type": "function", "name": "lookup", "description": "find a thing",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}])
}

#[tokio::test]
async fn five_chained_turns_with_a_tool_run_on_a_lane_of_every_protocol() {
    let addr = common::gateway(&lanes_config("mock://")).await;
    for protocol in Protocol::ALL {
        let lane = format!("lane-{protocol}");
        let mut ws = open(addr, "/v1/responses", &[]).await.unwrap();
        // 1: a tool call.
        let events = ws
            .turn(&json!({"type": "response.create", "model": lane, "store": false, "tools": tools(),
                          "input": "[mock:tool=lookup {\"q\":\"tides\"}]"}))
            .await;
        assert_eq!(events[0]["type"], "response.created", "{protocol}: {events:#?}");
        let first = completed(&events);
        let call = first["output"].as_array().unwrap().iter().find(|i| i["type"] == "function_call").unwrap();
        assert_eq!(call["name"], "lookup", "{protocol}");
        let deltas = events.iter().filter(|e| e["type"] == "response.function_call_arguments.delta").count();
        assert!(deltas >= 1, "{protocol}: arguments stream as deltas");
        // 2: its result, on the socket's own conversation (store: false).
        let events = ws
            .turn(&json!({"type": "response.create", "model": lane, "store": false, "tools": tools(),
                          "previous_response_id": first["id"],
                          "input": [{"type": "function_call_output", "call_id": call["call_id"], "output": "high at noon"}]}))
            .await;
        let second = completed(&events);
        let text = said(second);
        // The tool's name is only in the conversation before: the lane had it.
        assert!(text.contains("tool lookup returned: high at noon"), "{protocol}: {text}");
        // 3-5: text turns, each going on from the one before.
        let mut previous = second.clone();
        for n in 3..=5 {
            let events = ws
                .turn(&json!({"type": "response.create", "model": lane, "store": false,
                              "previous_response_id": previous["id"], "input": format!("turn {n}")}))
                .await;
            let response = completed(&events).clone();
            assert!(said(&response).contains(&format!("you said: turn {n}")), "{protocol}: {response}");
            let grew = response["usage"]["input_tokens"].as_u64().unwrap();
            assert!(grew > previous["usage"]["input_tokens"].as_u64().unwrap(), "{protocol}: the history went along");
            previous = response;
        }
        // Deltas came before the end, in order.
        let kinds: Vec<&str> = ws
            .turn(&json!({"type": "response.create", "model": lane, "input": "last"}))
            .await
            .iter()
            .map(|e| e["type"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
            .leak()
            .iter()
            .map(String::as_str)
            .collect();
        let delta = kinds.iter().position(|k| *k == "response.output_text.delta").unwrap();
        assert!(delta > 0 && delta < kinds.len() - 1, "{protocol}: {kinds:?}");
    }
}

#[tokio::test]
async fn a_bad_event_is_answered_and_the_socket_goes_on() {
    let addr = common::gateway(&lanes_config("mock://")).await;
    let mut ws = open(addr, "/v1/responses", &[]).await.unwrap();
    ws.send_raw(Message::text("{not json")).await;
    let error = ws.next().await.unwrap();
    assert_eq!((error["type"].as_str(), error["status"].as_u64()), (Some("error"), Some(400)), "{error}");
    ws.send(&json!({"type": "response.steer", "input": "faster"})).await;
    let error = ws.next().await.unwrap();
    assert_eq!(error["error"]["code"], "unsupported_event", "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("`response.steer` is not supported"));
    ws.send_raw(Message::binary(vec![1, 2, 3])).await;
    assert_eq!(ws.next().await.unwrap()["type"], "error");
    // Codex's acknowledgement is taken without a word.
    ws.send(&json!({"type": "response.processed", "response_id": "resp_x"})).await;
    // A previous response the socket never saw (and nothing stored).
    let events = ws
        .turn(&json!({"type": "response.create", "model": "lane-openai", "store": false,
                      "previous_response_id": "resp_unknown", "input": "hi"}))
        .await;
    assert_eq!(events[0]["error"]["code"], "previous_response_not_found", "{events:#?}");
    // A pool that does not exist: its own error, and the socket lives.
    let events = ws.turn(&json!({"type": "response.create", "model": "nope", "input": "hi"})).await;
    assert_eq!((events[0]["type"].as_str(), events[0]["status"].as_u64()), (Some("error"), Some(404)));
    let events = ws.turn(&json!({"type": "response.create", "model": "lane-anthropic", "input": "still here"})).await;
    assert!(said(completed(&events)).contains("you said: still here"));
}

#[tokio::test]
async fn turns_of_a_stream_id_keep_their_order_and_echo_it() {
    let addr = common::gateway(&lanes_config("mock://")).await;
    let mut ws = open(addr, "/v1/responses", &[]).await.unwrap();
    for n in 0..3 {
        ws.send(&json!({"type": "response.create", "model": "lane-gemini", "input": format!("in order {n}"), "stream_id": "a"}))
            .await;
    }
    ws.send(&json!({"type": "response.create", "model": "lane-openai", "input": "beside", "stream_id": "b"})).await;
    let mut on_a = Vec::new();
    let mut ended = 0;
    while ended < 4 {
        let event = ws.next().await.unwrap();
        assert!(event["stream_id"] == "a" || event["stream_id"] == "b", "{event}");
        if event["type"] == "response.completed" {
            ended += 1;
            if event["stream_id"] == "a" {
                on_a.push(said(&event["response"]));
            }
        }
    }
    let expected: Vec<String> = (0..3).map(|n| format!("in order {n}")).collect();
    assert_eq!(on_a.len(), 3);
    for (got, want) in on_a.iter().zip(&expected) {
        assert!(got.ends_with(want.as_str()), "{on_a:?}");
    }
}

#[tokio::test]
async fn a_plain_get_is_told_of_the_upgrade_and_a_socket_needs_its_key() {
    let yaml = format!("{}rate_card:\n  lane-openai: {{ input_utok: 1, output_utok: 1 }}\nauth: {{ mode: keys }}\nduplex: {{ sessions_per_key: 1 }}\n", lanes_config("mock://"));
    let (addr, _) = governed(&yaml).await;
    let plain = common::get(addr, "/v1/responses").await;
    assert_eq!(plain.status, 405, "{}", String::from_utf8_lossy(&plain.body));
    assert!(String::from_utf8_lossy(&plain.body).contains("Upgrade: websocket"));
    let (status, body) = open(addr, "/v1/responses", &[]).await.err().unwrap();
    assert_eq!(status, 401, "{body}");
    let (status, _) = open(addr, "/v1/responses", &[("authorization", "Bearer sy-nope")]).await.err().unwrap();
    assert_eq!(status, 401);
    // Each refusal at the door is a ledger row, as over HTTP.
    let refused = ledger_rows(addr, "status=401", 2).await;
    assert!(refused.iter().all(|row| row["operation"] == "refused"), "{refused:#?}");
    let key = create_key(addr, json!({"name": "one-socket"})).await;
    let bearer = format!("Bearer {}", key["key"].as_str().unwrap());
    let mut first = open(addr, "/v1/responses", &[("authorization", &bearer)]).await.unwrap();
    let (status, body) = open(addr, "/v1/responses", &[("authorization", &bearer)]).await.err().unwrap();
    assert_eq!(status, 429, "a key holds one socket: {body}");
    assert!(body.contains("duplex.sessions_per_key"), "{body}");
    let events = first.turn(&json!({"type": "response.create", "model": "lane-openai", "input": "hello"})).await;
    assert!(said(completed(&events)).contains("you said: hello"));
    drop(first);
    // Its place comes back once it closes.
    let mut again = None;
    for _ in 0..100 {
        if let Ok(ws) = open(addr, "/v1/responses", &[("authorization", &bearer)]).await {
            again = Some(ws);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(again.is_some(), "the closed socket gave its place back");
}

#[tokio::test]
async fn a_spent_budget_refuses_the_next_turn_and_the_socket_lives() {
    let yaml = format!(
        "{}rate_card:\n  lane-openai: {{ input_utok: 1000, output_utok: 2000 }}\nauth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n",
        lanes_config("mock://")
    );
    let (addr, _) = governed(&yaml).await;
    // About one turn's worth: the first fits, and spends the rest.
    let key = create_key(addr, json!({"name": "thrifty", "budget": {"usd": 0.25, "window": "1d"}})).await;
    let bearer = format!("Bearer {}", key["key"].as_str().unwrap());
    let mut ws = open(addr, "/v1/responses", &[("authorization", &bearer)]).await.unwrap();
    let turn = |text: &str| json!({"type": "response.create", "model": "lane-openai", "max_output_tokens": 100, "input": text});
    let events = ws.turn(&turn("spend it")).await;
    assert!(said(completed(&events)).contains("you said: spend it"), "{events:#?}");
    let mut refused = None;
    for n in 0..20 {
        let events = ws.turn(&turn(&format!("more {n}"))).await;
        if events.last().unwrap()["type"] == "error" {
            let mut error = events.last().unwrap().clone();
            error["n"] = json!(n);
            refused = Some(error);
            break;
        }
    }
    let refused = refused.expect("the budget ran out");
    let served = 1 + refused_after(&refused);
    assert_eq!(refused["status"], 429, "{refused}");
    assert_eq!(refused["error"]["code"], "insufficient_quota", "{refused}");
    // The socket lives: a warm-up (nothing billed) still answers.
    let events =
        ws.turn(&json!({"type": "response.create", "model": "lane-openai", "generate": false, "input": "x"})).await;
    assert_eq!(completed(&events)["output"], json!([]));
    // Each served turn is a ledger row of its own, streamed (the warm-up
    // none), and the refusal one of operation `refused`.
    let rows = ledger_rows(addr, "status=200", served).await;
    assert_eq!(rows.len(), served, "{rows:#?}");
    let refusals = ledger_rows(addr, "status=429", 1).await;
    assert!(refusals.iter().any(|row| row["operation"] == "refused"), "{refusals:#?}");
    assert!(
        rows.iter().all(|r| r["stream"] == true && r["operation"] == "chat" && r["pool"] == "lane-openai"),
        "{rows:#?}"
    );
}

/// How many turns were served before `refused` (its `more N` is the Nth
/// after the first).
fn refused_after(refused: &Value) -> usize {
    refused["n"].as_u64().unwrap_or_default() as usize
}

/// Codex's shapes of older releases (`session_id` on the handshake): a
/// warm-up, then turns with tools, reasoning kept encrypted, `store:
/// false` and the incremental input it sends after `previous_response_id`.
#[tokio::test]
async fn codex_request_shapes_run_through_the_socket() {
    let addr = common::gateway(&lanes_config("mock://")).await;
    let headers = [
        ("openai-beta", "responses_websockets=2026-02-06"),
        ("originator", "codex_cli_rs"),
        ("user-agent", "codex_cli_rs/0.129.0 (Debian 13; x86_64) xterm"),
        ("session_id", "0199a0b3-6f7e-7c31-8e5c-3b0f1a2d4c55"),
        ("x-codex-turn-metadata", "{\"turn_id\":\"1\"}"),
        ("version", "0.129.0"),
    ];
    let codex_tools = json!([
        {"type": "function", "name": "shell", "description": "Runs a shell command and returns its output.", "strict": false,
         "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}},
                        "workdir": {"type": "string"}, "timeout_ms": {"type": "number"}}, "required": ["command"], "additionalProperties": false}},
        {"type": "function", "name": "update_plan", "description": "Updates the task plan.", "strict": false,
         "parameters": {"type": "object", "properties": {"plan": {"type": "array", "items": {"type": "object"}}}, "required": ["plan"], "additionalProperties": false}}
    ]);
    for lane in ["lane-responses", "lane-anthropic", "lane-openai"] {
        let mut ws = open(addr, "/v1/responses", &headers).await.unwrap();
        let base = |input: Value, previous: Option<&Value>, generate: Option<bool>| {
            let mut create = json!({
                "type": "response.create", "model": lane, "instructions": "You are Codex, a coding agent.",
                "input": input, "tools": codex_tools, "tool_choice": "auto", "parallel_tool_calls": false,
                "reasoning": {"effort": "medium", "summary": "auto"}, "store": false, "stream": true,
                "include": ["reasoning.encrypted_content"], "prompt_cache_key": "0199a0b3-6f7e-7c31-8e5c-3b0f1a2d4c55",
                "client_metadata": {"x-codex-installation-id": "inst-1"},
            });
            if let Some(previous) = previous {
                create["previous_response_id"] = previous.clone();
            }
            if let Some(generate) = generate {
                create["generate"] = json!(generate);
            }
            create
        };
        let user =
            |text: &str| json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]});
        // The prewarm: nothing generated.
        let warm = ws.turn(&base(json!([]), None, Some(false))).await;
        let warm_id = completed(&warm)["id"].clone();
        assert_eq!(warm[0]["type"], "response.created");
        // The first turn goes on from the prewarm, and calls a tool.
        let events = ws
            .turn(&base(json!([user("[mock:tool=shell {\"command\":[\"ls\"]}] list the files")]), Some(&warm_id), None))
            .await;
        let first = completed(&events).clone();
        let output = first["output"].as_array().unwrap();
        let call = output.iter().find(|i| i["type"] == "function_call").unwrap_or_else(|| panic!("{lane}: {first}"));
        assert_eq!(call["name"], "shell", "{lane}");
        ws.send(&json!({"type": "response.processed", "response_id": first["id"]})).await;
        // Codex sends the tool's output alone after the id, its reasoning
        // item (encrypted) as the lane gave it.
        let events = ws
            .turn(&base(
                json!([{"type": "function_call_output", "call_id": call["call_id"], "output": "Cargo.toml\nsrc"}]),
                Some(&first["id"]),
                None,
            ))
            .await;
        let second = completed(&events);
        assert!(said(second).contains("tool shell returned: Cargo.toml"), "{lane}: {second}");
        // A whole input again (Codex's fallback after a lost id) works too.
        let mut replay: Vec<Value> = vec![user("list the files")];
        replay.extend(output.iter().cloned());
        replay.push(json!({"type": "function_call_output", "call_id": call["call_id"], "output": "Cargo.toml"}));
        replay.push(
            json!({"type": "reasoning", "summary": [], "encrypted_content": "gAAAAB-opaque-from-an-earlier-turn"}),
        );
        // Tools are still offered: the fake answers in text when told to.
        replay.push(user("[mock:tool=none] thanks"));
        let events = ws.turn(&base(Value::Array(replay), None, None)).await;
        assert!(said(completed(&events)).ends_with("thanks"), "{lane}: {events:#?}");
    }
}

/// What Codex 0.171.0 sends on its socket's handshake with an API key
/// (captured from `codex exec` with `supports_websockets = true`): its
/// beta, its originator, its session and thread as `session-id` and
/// `thread-id` (the same UUID, also its `x-client-request-id`), its turn
/// metadata, and no `chatgpt-account-id` (that is for ChatGPT sign-in).
const CODEX_SESSION: &str = "01a25346-034d-7c13-9cf1-54348d00f54f";

fn codex_handshake(bearer: &str) -> Vec<(&str, String)> {
    vec![
        ("authorization", bearer.to_owned()),
        ("user-agent", "codex_exec/0.171.0 (Debian 12.0.0; x86_64) unknown (codex_exec; 0.171.0)".into()),
        ("originator", "codex_exec".into()),
        ("openai-beta", "responses_websockets=2026-02-06".into()),
        (
            "x-codex-turn-metadata",
            json!({"installation_id": "4d64ac75-59cb-4ce9-87ca-8d7b0a65f1ae", "session_id": CODEX_SESSION,
                   "thread_id": CODEX_SESSION, "request_kind": "prewarm", "sandbox_mode": "read-only"})
            .to_string(),
        ),
        ("x-codex-beta-features", "remote_compaction_v2".into()),
        ("x-client-request-id", CODEX_SESSION.into()),
        ("session-id", CODEX_SESSION.into()),
        ("thread-id", CODEX_SESSION.into()),
        ("x-codex-window-id", format!("{CODEX_SESSION}:0")),
    ]
}

/// Codex's tools as it offers them: plain functions (its shell), a
/// namespace of sub-agent functions, and a freeform (`custom`) tool with a
/// grammar, as `apply_patch` is offered to the models that take it.
fn codex_tools() -> Value {
    json!([
        {"type": "function", "name": "exec_command", "strict": false,
         "description": "Runs a command in a PTY, returning output or a session ID for ongoing interaction.",
         "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}, "workdir": {"type": "string"},
                        "yield_time_ms": {"type": "number"}}, "required": ["cmd"], "additionalProperties": false}},
        {"type": "namespace", "name": "multi_agent_v1", "description": "Tools for spawning and managing sub-agents.",
         "tools": [{"type": "function", "name": "close_agent", "strict": false, "description": "Close an agent.",
                    "parameters": {"type": "object", "properties": {"target": {"type": "string"}},
                                   "required": ["target"], "additionalProperties": false}}]},
        {"type": "custom", "name": "apply_patch", "description": "Edits files with a patch.",
         "format": {"type": "grammar", "syntax": "lark",
                    "definition": "start: begin_patch hunk+ end_patch\nbegin_patch: \"*** Begin Patch\" LF\nend_patch: \"*** End Patch\" LF?\nhunk: /[^\\n]+/ LF\n%import common.LF"}}
    ])
}

/// Codex 0.171.0's socket, turn by turn, on lanes of three protocols: its
/// prewarm (`generate: false`), a turn going on from it with its tools,
/// reasoning with `include: ["reasoning.encrypted_content"]`, `store:
/// false` and `client_metadata`; what Codex reads back (`response.created`
/// first, a call's `output_item.added` before its arguments' deltas and its
/// `output_item.done`, `response.completed` with usage that adds up); the
/// shell's output sent alone after `previous_response_id`; and
/// `response.steer` sent while a turn runs, answered with an error event
/// while that turn finishes. The handshake's `session-id` is the run every
/// turn counts in (the prewarms none), on whichever socket it came.
#[tokio::test]
async fn codex_socket_turns_as_codex_sends_and_reads_them_and_its_session_is_the_run() {
    let yaml =
        format!("{}auth: {{ mode: keys }}\ngroups:\n  coders: {{ runs: {{ calls: 100 }} }}\n", lanes_config("mock://"));
    let (addr, _) = governed(&yaml).await;
    let key = create_key(addr, json!({"name": "codex", "group": "coders"})).await;
    let bearer = format!("Bearer {}", key["key"].as_str().unwrap());
    let handshake = codex_handshake(&bearer);
    let headers: Vec<(&str, &str)> = handshake.iter().map(|(name, value)| (*name, value.as_str())).collect();
    let lanes = ["lane-responses", "lane-anthropic", "lane-gemini"];
    for lane in lanes {
        let mut ws = open(addr, "/v1/responses", &headers).await.unwrap();
        let create = |input: Value, previous: Option<&Value>| {
            let mut create = json!({
                "type": "response.create", "model": lane, "stream": true, "input": input, "tools": codex_tools(),
                "tool_choice": "auto", "parallel_tool_calls": true, "reasoning": {"effort": "medium", "summary": "auto"},
                "store": false, "include": ["reasoning.encrypted_content"], "prompt_cache_key": CODEX_SESSION,
                "client_metadata": {"session_id": CODEX_SESSION, "thread_id": CODEX_SESSION,
                                    "x-codex-window-id": format!("{CODEX_SESSION}:0")},
            });
            if let Some(previous) = previous {
                create["previous_response_id"] = previous.clone();
            }
            create
        };
        let developer = json!({"type": "message", "role": "developer",
                               "content": [{"type": "input_text", "text": "You are a coding agent running in the Codex CLI."}]});
        // The prewarm: created and completed, nothing generated.
        let mut warm = create(json!([developer]), None);
        warm["generate"] = json!(false);
        let events = ws.turn(&warm).await;
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["response.created", "response.completed"], "{lane}: {events:#?}");
        let warm_id = completed(&events)["id"].clone();
        assert_eq!(completed(&events)["output"], json!([]), "{lane}");
        // The turn: the developer message is in the prewarm's conversation,
        // Codex sends the user's messages after its id.
        let user = json!({"type": "message", "role": "user",
                          "content": [{"type": "input_text", "text": "[mock:tool=exec_command {\"cmd\":\"ls\"}] list the files"}]});
        let events = ws.turn(&create(json!([user]), Some(&warm_id))).await;
        assert_eq!(events[0]["type"], "response.created", "{lane}: {events:#?}");
        assert_eq!(events[0]["response"]["status"], "in_progress", "{lane}");
        let at = |kind: &str| events.iter().position(|e| e["type"] == kind);
        let added = events
            .iter()
            .position(|e| e["type"] == "response.output_item.added" && e["item"]["type"] == "function_call")
            .unwrap_or_else(|| panic!("{lane}: {events:#?}"));
        let delta = at("response.function_call_arguments.delta").unwrap();
        let done = events
            .iter()
            .position(|e| e["type"] == "response.output_item.done" && e["item"]["type"] == "function_call")
            .unwrap();
        assert!(added < delta && delta < done && done < events.len() - 1, "{lane}: {events:#?}");
        let first = completed(&events).clone();
        let call = &events[done]["item"];
        assert_eq!(call["name"], "exec_command", "{lane}: {call}");
        let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(arguments, json!({"cmd": "ls"}), "{lane}");
        let streamed: String = events
            .iter()
            .filter(|e| e["type"] == "response.function_call_arguments.delta")
            .map(|e| e["delta"].as_str().unwrap())
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&streamed).unwrap(),
            arguments,
            "{lane}: the deltas make the arguments"
        );
        assert_eq!(first["output"].as_array().unwrap().iter().filter(|i| i["type"] == "function_call").count(), 1);
        let usage = &first["usage"];
        let (input, output) = (usage["input_tokens"].as_u64().unwrap(), usage["output_tokens"].as_u64().unwrap());
        assert!(input > 0 && output > 0 && usage["total_tokens"] == input + output, "{lane}: {usage}");
        ws.send(&json!({"type": "response.processed", "response_id": first["id"]})).await;
        // The shell's output alone after the id; `response.steer` (which the
        // gateway does not take) sent while it runs.
        let output = json!([{"type": "function_call_output", "call_id": call["call_id"], "output": "Cargo.toml\nsrc"}]);
        ws.send(&create(output, Some(&first["id"]))).await;
        ws.send(&json!({"type": "response.steer", "previous_response_id": first["id"],
                        "input": [{"type": "message", "role": "user", "content": "also the tests"}]}))
            .await;
        let (mut refused, mut answer) = (None, None);
        while refused.is_none() || answer.is_none() {
            let event = ws.next().await.expect("the socket lives");
            match event["type"].as_str().unwrap() {
                "error" => refused = Some(event),
                "response.completed" => answer = Some(event),
                "response.failed" | "response.incomplete" => panic!("{lane}: {event}"),
                _ => {}
            }
        }
        let refused = refused.unwrap();
        assert_eq!(refused["error"]["code"], "unsupported_event", "{lane}: {refused}");
        assert!(refused["error"]["message"].as_str().unwrap().contains("`response.steer`"), "{refused}");
        let answer = &answer.unwrap()["response"];
        assert!(said(answer).contains("tool exec_command returned: Cargo.toml"), "{lane}: {answer}");
        assert!(answer["usage"]["input_tokens"].as_u64().unwrap() > input, "{lane}: the history went along");
    }
    // One run, by the handshake's session-id, of this key: two turns on
    // each socket, the prewarms none.
    let reply = common::admin_call(addr, "GET", "/api/v1/admin/runs", Some(common::ADMIN_TOKEN), None).await;
    let runs: Value = serde_json::from_slice(&reply.body).unwrap();
    let runs: Vec<&Value> = runs["runs"].as_array().unwrap().iter().filter(|r| r["key"] == key["id"]).collect();
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert_eq!(runs[0]["id"], CODEX_SESSION, "{runs:#?}");
    assert_eq!(runs[0]["calls"], 2 * lanes.len(), "{runs:#?}");
}

/// Another tenant's key: a response stored by one key is not found by
/// another's socket (nor over HTTP), a pool the key may not use is a 403
/// event on a socket that lives on, and a key revoked while its socket is
/// open is refused at its next turn.
#[tokio::test]
async fn another_tenants_key_reaches_nothing_of_the_first_and_a_revoked_key_stops_at_its_next_turn() {
    let yaml = format!("{}auth: {{ mode: keys }}\n", lanes_config("mock://"));
    let (addr, _) = governed(&yaml).await;
    let owner = create_key(addr, json!({"name": "tenant-a"})).await;
    let owner_bearer = format!("Bearer {}", owner["key"].as_str().unwrap());
    let other = create_key(addr, json!({"name": "tenant-b", "pools": ["lane-openai"]})).await;
    let other_bearer = format!("Bearer {}", other["key"].as_str().unwrap());
    let mut first = open(addr, "/v1/responses", &[("authorization", &owner_bearer)]).await.unwrap();
    let events =
        first.turn(&json!({"type": "response.create", "model": "lane-openai", "input": "a secret plan"})).await;
    let id = completed(&events)["id"].as_str().unwrap().to_owned();
    // Stored behind the answer: readable by its owner.
    let mut stored = false;
    for _ in 0..100 {
        if common::get_with(addr, &format!("/v1/responses/{id}"), &[("authorization", &owner_bearer)]).await.status
            == 200
        {
            stored = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(stored, "the owner's response was stored");
    let mut second = open(addr, "/v1/responses", &[("authorization", &other_bearer)]).await.unwrap();
    let events = second
        .turn(&json!({"type": "response.create", "model": "lane-openai", "previous_response_id": id, "input": "and?"}))
        .await;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["error"]["code"], "previous_response_not_found", "{events:#?}");
    assert!(!events[0].to_string().contains("secret plan"));
    let reply = common::get_with(addr, &format!("/v1/responses/{id}"), &[("authorization", &other_bearer)]).await;
    assert_eq!(reply.status, 404);
    // A pool outside the key's grant: refused, the socket goes on.
    let events = second.turn(&json!({"type": "response.create", "model": "lane-anthropic", "input": "hi"})).await;
    assert_eq!((events[0]["type"].as_str(), events[0]["status"].as_u64()), (Some("error"), Some(403)), "{events:#?}");
    let events = second.turn(&json!({"type": "response.create", "model": "lane-openai", "input": "mine"})).await;
    assert!(said(completed(&events)).ends_with("you said: mine"));
    // Revoked while its socket is open: the next turn is refused.
    let id = other["id"].as_str().unwrap();
    let revoked =
        common::admin_call(addr, "DELETE", &format!("/api/v1/admin/keys/{id}"), Some(common::ADMIN_TOKEN), None).await;
    assert_eq!(revoked.status, 200);
    let events = second.turn(&json!({"type": "response.create", "model": "lane-openai", "input": "still?"})).await;
    assert_eq!((events[0]["type"].as_str(), events[0]["status"].as_u64()), (Some("error"), Some(401)), "{events:#?}");
    let refused = ledger_rows(addr, "status=401", 1).await;
    assert!(refused.iter().any(|row| row["operation"] == "refused"), "the revoked turn was recorded: {refused:#?}");
    // The first tenant's socket is untouched.
    let events = first.turn(&json!({"type": "response.create", "model": "lane-openai", "input": "go on"})).await;
    assert!(said(completed(&events)).ends_with("you said: go on"));
}

/// A message over `duplex.max_message` is refused with an error event and
/// the socket goes on; one past twice that (the transport's limit) closes
/// the socket with 1009 before it is read whole.
#[tokio::test]
async fn an_oversized_message_is_refused_and_a_far_larger_one_closes_with_1009() {
    let yaml = format!("{}duplex: {{ max_message: 64KiB }}\n", lanes_config("mock://"));
    let addr = common::gateway(&yaml).await;
    let mut ws = open(addr, "/v1/responses", &[]).await.unwrap();
    let big = "x".repeat(100 << 10);
    ws.send(&json!({"type": "response.create", "model": "lane-openai", "input": big})).await;
    let error = ws.next().await.unwrap();
    assert_eq!(error["type"], "error", "{error}");
    assert_eq!(error["status"], 413, "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("duplex.max_message"), "{error}");
    let events = ws.turn(&json!({"type": "response.create", "model": "lane-openai", "input": "small"})).await;
    assert!(said(completed(&events)).ends_with("you said: small"));
    let huge = "x".repeat(200 << 10);
    ws.send_raw(Message::text(huge)).await;
    assert_eq!(ws.closed().await.map(|(code, _)| code), Some(1009));
}

/// A socket with nothing either way for `duplex.idle_timeout` is closed
/// with 1000, and gives its place back.
#[tokio::test]
async fn an_idle_socket_is_closed_and_gives_its_place_back() {
    let yaml = format!("{}duplex: {{ idle_timeout: 1s, max_sessions: 1 }}\n", lanes_config("mock://"));
    let addr = common::gateway(&yaml).await;
    let mut ws = open(addr, "/v1/responses", &[]).await.unwrap();
    let events = ws.turn(&json!({"type": "response.create", "model": "lane-gemini", "input": "then nothing"})).await;
    completed(&events);
    assert_eq!(common::stats(addr).await["sockets"]["open"], 1);
    let started = std::time::Instant::now();
    let (code, reason) = ws.closed().await.unwrap();
    assert_eq!(code, 1000);
    assert!(reason.contains("idle"), "{reason}");
    assert!(started.elapsed() >= Duration::from_millis(900), "{:?}", started.elapsed());
    open(addr, "/v1/responses", &[]).await.unwrap();
}

/// A caller that sends turns and never reads: the gateway's writes stall,
/// the socket is closed after `server.write_timeout`, and its place (the
/// instance's one) comes back, so the next socket opens.
#[tokio::test]
async fn a_caller_that_never_reads_is_closed_and_gives_its_place_back() {
    let yaml = format!("{}server: {{ write_timeout: 1s }}\nduplex: {{ max_sessions: 1 }}\n", lanes_config("mock://"));
    let addr = common::gateway(&yaml).await;
    let mut ws = open(addr, "/v1/responses", &[]).await.unwrap();
    // Each turn's answer is about five times its megabyte of input (the
    // deltas, the item, the part, the completed response).
    let echo = "y".repeat(1 << 20);
    let create = json!({"type": "response.create", "model": "lane-openai", "input": echo}).to_string();
    let (status, _) = open(addr, "/v1/responses", &[]).await.err().unwrap();
    assert_eq!(status, 503, "the socket holds the instance's one place");
    // Sent until the gateway gives up on it (the sends then fail).
    for _ in 0..12 {
        if ws.0.send(Message::text(create.clone())).await.is_err() {
            break;
        }
    }
    let started = std::time::Instant::now();
    let mut reopened = None;
    while started.elapsed() < Duration::from_secs(20) {
        if let Ok(ws) = open(addr, "/v1/responses", &[]).await {
            reopened = Some(ws);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut reopened = reopened.expect("the stalled socket was closed");
    let events = reopened.turn(&json!({"type": "response.create", "model": "lane-openai", "input": "fresh"})).await;
    assert!(said(completed(&events)).ends_with("you said: fresh"));
    drop(ws);
}

/// A reload does not end a socket: its next turn runs on the config
/// serving then (a model added by the reload is there).
#[tokio::test]
async fn a_sockets_next_turn_runs_on_the_reloaded_config() {
    let yaml =
        format!("{}auth: {{ mode: keys }}\nadmin: {{ tokens: [{}] }}\n", lanes_config("mock://"), common::ADMIN_TOKEN);
    let (addr, reloader, text) = common::reloadable(&yaml).await;
    let key = create_key(addr, json!({"name": "across"})).await;
    let bearer = format!("Bearer {}", key["key"].as_str().unwrap());
    let mut ws = open(addr, "/v1/responses", &[("authorization", &bearer)]).await.unwrap();
    let events = ws.turn(&json!({"type": "response.create", "model": "late", "input": "hi"})).await;
    assert_eq!(events[0]["status"], 404, "{events:#?}");
    *text.lock().unwrap() = yaml.replace("models:\n", "models:\n  late: { provider: up-cohere, model: wire-late }\n");
    reloader.reload().await.unwrap();
    let events = ws.turn(&json!({"type": "response.create", "model": "late", "input": "hi again"})).await;
    assert!(said(completed(&events)).contains("[cohere wire-late] you said: hi again"), "{events:#?}");
}

/// A socket past `duplex.max_duration` is told with Codex's
/// `websocket_connection_limit_reached` (Codex reconnects on it) and
/// closed with 1000, its turns finished first.
#[tokio::test]
async fn a_socket_past_its_longest_life_is_told_so_and_closed() {
    let yaml = format!("{}duplex: {{ max_duration: 1s }}\n", lanes_config("mock://"));
    let addr = common::gateway(&yaml).await;
    let mut ws = open(addr, "/v1/responses", &[]).await.unwrap();
    let events = ws.turn(&json!({"type": "response.create", "model": "lane-bedrock", "input": "brief"})).await;
    completed(&events);
    let told = ws.next().await.unwrap();
    assert_eq!(told["error"]["code"], "websocket_connection_limit_reached", "{told}");
    let (code, reason) = ws.closed().await.unwrap();
    assert_eq!(code, 1000);
    assert!(reason.contains("duplex.max_duration"), "{reason}");
}

/// Guardrails hold on a socket as over HTTP: a blocked input is an error
/// event naming the policy (never the text), an e-mail address is masked
/// before the lane sees it, a reply that turns forbidden is cut with an
/// error event before the words leave, and the socket goes on each time.
#[tokio::test]
async fn guardrails_hold_on_every_turn_and_the_socket_goes_on() {
    let yaml = "providers:\n  mock: { protocol: anthropic, base_url: mock:// }\n\
                models:\n  claude: { provider: mock }\n\
                policies:\n  \
                  pii: { detect: [email], action: mask, direction: request }\n  \
                  words: { literal: [\"forbidden-phrase\"], action: block }\n  \
                  leaks: { literal: [\"top secret\"], action: block, direction: response }\n\
                pools:\n  guarded: { policies: [pii, words, leaks], members: [{ model: claude }] }\n";
    let addr = common::gateway(yaml).await;
    let mut ws = open(addr, "/v1/responses", &[]).await.unwrap();
    let create = |text: &str| json!({"type": "response.create", "model": "guarded", "input": text});
    let events = ws.turn(&create("say the forbidden-phrase")).await;
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!((events[0]["type"].as_str(), events[0]["status"].as_u64()), (Some("error"), Some(400)));
    let message = events[0]["error"]["message"].as_str().unwrap();
    assert!(message.contains("`words`") && !message.contains("forbidden-phrase"), "{message}");
    let events = ws.turn(&create("write to ada@example.com")).await;
    let text = said(completed(&events));
    assert!(text.contains("you said: write to") && !text.contains("ada@example.com"), "{text}");
    // Cut as the HTTP stream is: an `error` event, then `response.failed`.
    let mut events = ws.turn(&create("this is top secret material")).await;
    assert_eq!(events.last().unwrap()["type"], "error", "{events:#?}");
    events.push(ws.next().await.unwrap());
    assert_eq!(events.last().unwrap()["type"], "response.failed", "{events:#?}");
    assert!(events.iter().all(|e| !e.to_string().contains("top secret")), "{events:#?}");
    let events = ws.turn(&create("all clear")).await;
    assert!(said(completed(&events)).ends_with("you said: all clear"));
}

/// A caller that closes its socket mid-turn: the turn's upstream stream is
/// closed at once and the turn settles once, as an HTTP caller who hangs
/// up does (499, billed an estimate of what was delivered), on a lane of
/// another protocol.
#[tokio::test]
async fn a_socket_closed_mid_turn_settles_the_turn_once() {
    use crate::disconnect::{gateway_for, upstream, Watch};
    let watch = std::sync::Arc::new(Watch::default());
    let (addr, secret) = gateway_for(upstream(watch.clone()).await, "cancel").await;
    let bearer = format!("Bearer {secret}");
    let mut ws = open(addr, "/v1/responses", &[("authorization", &bearer)]).await.unwrap();
    ws.send(&json!({"type": "response.create", "model": "p-endless", "input": "go"})).await;
    loop {
        let event = ws.next().await.unwrap();
        if event["type"] == "response.output_text.delta" && event["delta"] == "t3 " {
            break;
        }
    }
    ws.0.close(None).await.unwrap();
    let left = std::time::Instant::now();
    for _ in 0..100 {
        if watch.dropped.lock().unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let dropped = watch.dropped.lock().unwrap().expect("the upstream stream was never closed");
    assert!(dropped.saturating_duration_since(left) <= Duration::from_millis(200));
    let rows = ledger_rows(addr, "pool=p-endless", 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let rows_later = ledger_rows(addr, "pool=p-endless", 1).await;
    assert_eq!((rows.len(), rows_later.len()), (1, 1), "settled once: {rows_later:?}");
    assert_eq!((rows[0]["status"].as_u64(), rows[0]["estimated"].as_bool()), (Some(499), Some(true)), "{rows:?}");
    assert!(rows[0]["output_tokens"].as_u64().unwrap() >= 4, "what was delivered is billed: {rows:?}");
}

/// A socket runs at most eight `stream_id` lanes and queues at most 16
/// turns behind a lane's running one; past either, the turn gets an error
/// event and the socket goes on. Closed with eight turns running, each
/// settles once (the queued ones never ran: no row).
#[tokio::test]
async fn a_socket_runs_eight_lanes_and_queues_sixteen_and_a_close_settles_each_running_turn() {
    use crate::disconnect::{gateway_for, upstream, Watch};
    let (addr, secret) = gateway_for(upstream(std::sync::Arc::new(Watch::default())).await, "cancel").await;
    let bearer = format!("Bearer {secret}");
    let mut ws = open(addr, "/v1/responses", &[("authorization", &bearer)]).await.unwrap();
    // Endless turns: each lane's first runs until the socket closes.
    let endless =
        |lane: &str| json!({"type": "response.create", "model": "p-endless", "input": "go", "stream_id": lane});
    for lane in 0..8 {
        ws.send(&endless(&format!("lane-{lane}"))).await;
    }
    for _ in 0..16 {
        ws.send(&endless("lane-0")).await;
    }
    ws.send(&endless("lane-0")).await;
    ws.send(&endless("lane-8")).await;
    let mut refused = Vec::new();
    while refused.len() < 2 {
        let event = ws.next().await.unwrap();
        if event["type"] == "error" {
            refused.push(event);
        }
    }
    assert_eq!(refused[0]["stream_id"], "lane-0", "{refused:#?}");
    assert!(refused[0]["error"]["message"].as_str().unwrap().contains("16 turns already wait"), "{refused:#?}");
    assert_eq!(refused[1]["stream_id"], "lane-8", "{refused:#?}");
    assert!(refused[1]["error"]["message"].as_str().unwrap().contains("8 stream_id lanes"), "{refused:#?}");
    ws.0.close(None).await.unwrap();
    let rows = ledger_rows(addr, "pool=p-endless", 8).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rows_later = ledger_rows(addr, "pool=p-endless", 8).await;
    assert_eq!((rows.len(), rows_later.len()), (8, 8), "{rows_later:#?}");
    assert!(rows.iter().all(|row| row["status"] == 499), "{rows:#?}");
}

/// The admin API lists each open socket with its key, its age and the
/// turns started on it; a closed socket leaves the list.
#[tokio::test]
async fn the_admin_api_lists_each_open_socket_with_its_key_and_turns() {
    let yaml = format!("{}auth: {{ mode: keys }}\n", lanes_config("mock://"));
    let (addr, _) = governed(&yaml).await;
    let owner = create_key(addr, json!({"name": "socket-owner"})).await;
    let bearer = format!("Bearer {}", owner["key"].as_str().unwrap());
    let before = common::admin_call(addr, "GET", "/api/v1/admin/sockets", Some(common::ADMIN_TOKEN), None).await;
    assert_eq!(before.status, 200);
    let listed: Value = serde_json::from_slice(&before.body).unwrap();
    assert_eq!((listed["open"].as_u64(), listed["data"].as_array().map(Vec::len)), (Some(0), Some(0)), "{listed}");
    let mut ws = open(addr, "/v1/responses", &[("authorization", &bearer)]).await.unwrap();
    for input in ["one", "two"] {
        let events = ws.turn(&json!({"type": "response.create", "model": "lane-openai", "input": input})).await;
        completed(&events);
    }
    let reply = common::admin_call(addr, "GET", "/api/v1/admin/sockets", Some(common::ADMIN_TOKEN), None).await;
    let listed: Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(listed["open"], 1, "{listed}");
    let socket = &listed["data"][0];
    assert_eq!(socket["kind"], "responses", "{listed}");
    assert_eq!(socket["key_id"], owner["id"], "{listed}");
    assert_eq!(socket["key_name"], "socket-owner", "{listed}");
    assert_eq!(socket["turns"], 2, "{listed}");
    let now = switchyard_state::clock::now_ms();
    let opened = socket["opened_at_ms"].as_u64().unwrap();
    let last = socket["last_turn_at_ms"].as_u64().unwrap();
    assert!(opened <= last && last <= now && now - opened < 60_000, "{listed}");
    assert!(listed["max_sessions"].as_u64().unwrap() >= 1, "{listed}");
    // Closed: gone from the list.
    ws.send_raw(Message::Close(None)).await;
    let mut gone = false;
    for _ in 0..200 {
        let reply = common::admin_call(addr, "GET", "/api/v1/admin/sockets", Some(common::ADMIN_TOKEN), None).await;
        let listed: Value = serde_json::from_slice(&reply.body).unwrap();
        if listed["data"].as_array().is_some_and(Vec::is_empty) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "a closed socket leaves the list");
}
