//! Tool-call ids across protocols, over real TCP: a caller of another
//! protocol is handed each call's id in its own protocol's form
//! (`codec::call_id`), never an id its pattern refuses, and sends it back to
//! a lane that gets the id it issued; a caller of the lane's own protocol
//! gets the lane's bytes untouched.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::sync::{Arc, Mutex};

use axum::response::IntoResponse;
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use switchyard_protocol::ir::Protocol;

use crate::common::{gateway, ingress_path, post, spawn, tool_body};

/// The id of an OpenAI-compatible vendor that names calls after the function
/// (Kimi's and DeepSeek's shape), with characters Anthropic's pattern and
/// Bedrock's refuse.
const LANE_ID: &str = "functions.get_weather:0";

/// What the lane was sent and what it answered.
#[derive(Default)]
struct Seen {
    /// Each request body.
    requests: Vec<Value>,
    /// Each reply body, as sent.
    replies: Vec<Bytes>,
}

/// An OpenAI-compatible lane (the vendor fake, its call ids replaced by
/// [`LANE_ID`]) that keeps what it saw.
async fn lane() -> (std::net::SocketAddr, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let keep = seen.clone();
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |body: Bytes| {
            let keep = keep.clone();
            async move {
                let request: Value = serde_json::from_slice(&body).unwrap();
                let stream = request["stream"].as_bool().unwrap_or(false);
                let reply = switchyard_transport::mock::respond(
                    switchyard_protocol::codec(Protocol::OpenAi),
                    None,
                    stream,
                    switchyard_protocol::Framing::Sse,
                    &body,
                );
                let (status, headers) = (reply.status, reply.headers);
                let bytes = reply.body.collect().await.unwrap().to_bytes();
                let bytes = Bytes::from(replace_call_ids(&String::from_utf8_lossy(&bytes)));
                let mut seen = keep.lock().unwrap();
                seen.requests.push(request);
                seen.replies.push(bytes.clone());
                let mut response = (status, bytes).into_response();
                response.headers_mut().extend(headers);
                response
            }
        }),
    );
    (spawn(router).await, seen)
}

/// `text` with the fake's call ids (`"call_…"`) replaced by [`LANE_ID`].
fn replace_call_ids(text: &str) -> String {
    let mut out = text.to_owned();
    while let Some(start) = out.find("\"call_") {
        let end = out[start + 1..].find('"').map(|end| start + 1 + end).unwrap();
        out.replace_range(start + 1..end, LANE_ID);
    }
    out
}

fn config(lane: std::net::SocketAddr) -> String {
    format!("providers:\n  kimi: {{ protocol: openai, base_url: \"http://{lane}\" }}\nmodels:\n  kimi: {{ provider: kimi }}\n")
}

/// Every string value of member `key` in `body` (a JSON body, SSE or AWS
/// event-stream frames: compact JSON either way).
fn values(body: &[u8], key: &str) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    let marker = format!("\"{key}\":\"");
    text.match_indices(&marker)
        .map(|(at, _)| {
            let rest = &text[at + marker.len()..];
            rest[..rest.find('"').unwrap()].to_owned()
        })
        .collect()
}

/// The member holding a call's id in `caller`'s replies, and the pattern
/// and length its API documents (`docs/protocols.md`, "Tool-call ids").
fn id_rule(caller: Protocol) -> (&'static str, &'static str, Option<usize>) {
    match caller {
        Protocol::Anthropic => ("id", "toolu_", None),
        Protocol::Bedrock => ("toolUseId", "tooluse_", Some(64)),
        Protocol::Responses => ("call_id", "call_", Some(64)),
        Protocol::OpenAi => ("id", "call_", Some(40)),
        Protocol::Cohere | Protocol::Gemini => ("id", "", None),
    }
}

/// The second turn in `caller`'s protocol: the call handed out under `id`,
/// and its result.
fn result_body(caller: Protocol, stream: bool, id: &str) -> String {
    let args = json!({"city": "Paris"});
    let body = match caller {
        Protocol::Anthropic => json!({"model": "kimi", "stream": stream, "max_tokens": 64, "messages": [
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "get_weather", "input": args}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "sunny"}]}]}),
        Protocol::Bedrock => json!({"messages": [
            {"role": "user", "content": [{"text": "weather in Paris?"}]},
            {"role": "assistant", "content": [{"toolUse": {"toolUseId": id, "name": "get_weather", "input": args}}]},
            {"role": "user", "content": [{"toolResult": {"toolUseId": id, "content": [{"text": "sunny"}]}}]}]}),
        Protocol::Responses => json!({"model": "kimi", "stream": stream, "input": [
            {"role": "user", "content": "weather in Paris?"},
            {"type": "function_call", "call_id": id, "name": "get_weather", "arguments": args.to_string()},
            {"type": "function_call_output", "call_id": id, "output": "sunny"}]}),
        Protocol::Cohere | Protocol::OpenAi => json!({"model": "kimi", "stream": stream, "messages": [
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "tool_calls": [{"id": id, "type": "function",
                "function": {"name": "get_weather", "arguments": args.to_string()}}]},
            {"role": "tool", "tool_call_id": id, "content": "sunny"}]}),
        Protocol::Gemini => json!({"contents": [
            {"role": "user", "parts": [{"text": "weather in Paris?"}]},
            {"role": "model", "parts": [{"functionCall": {"id": id, "name": "get_weather", "args": args}}]},
            {"role": "user", "parts": [{"functionResponse": {"id": id, "name": "get_weather", "response": {"output": "sunny"}}}]}]}),
    };
    body.to_string()
}

/// The ids the lane got back in its request's history (calls, then results).
fn ids_sent_back(request: &Value) -> Vec<String> {
    let messages = request["messages"].as_array().unwrap();
    let calls = messages.iter().flat_map(|m| m["tool_calls"].as_array().into_iter().flatten()).map(|c| &c["id"]);
    let results = messages.iter().map(|m| &m["tool_call_id"]);
    calls.chain(results).filter_map(Value::as_str).map(str::to_owned).collect()
}

#[tokio::test]
async fn a_lane_id_no_caller_takes_is_minted_for_the_caller_and_reaches_the_lane_as_it_gave_it() {
    let (lane, seen) = lane().await;
    let addr = gateway(&config(lane)).await;
    let callers = [Protocol::Anthropic, Protocol::Bedrock, Protocol::Responses, Protocol::Cohere, Protocol::Gemini];
    for caller in callers {
        for stream in [false, true] {
            let path = ingress_path(caller, "kimi", stream);
            let first = post(addr, &path, &[], tool_body(caller, "kimi", stream)).await;
            assert_eq!(first.status, 200, "{caller}: {}", String::from_utf8_lossy(&first.body));
            let (key, prefix, max) = id_rule(caller);
            let ids: Vec<String> = values(&first.body, key).into_iter().filter(|id| id.starts_with(prefix)).collect();
            let id = ids.iter().find(|id| *id != "kimi" && !id.starts_with("mock-")).cloned();
            let id = id
                .unwrap_or_else(|| panic!("{caller} {stream}: no call id in {}", String::from_utf8_lossy(&first.body)));
            assert!(!String::from_utf8_lossy(&first.body).contains(LANE_ID), "{caller} {stream}: handed out as it was");
            assert!(id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'), "{caller}: {id}");
            assert!(max.is_none_or(|max| id.len() <= max), "{caller}: {id}");
            if caller == Protocol::Responses {
                let item = values(&first.body, "id").into_iter().find(|id| id.starts_with("fc_")).unwrap();
                assert!(item != id && item.len() <= 64, "{item}");
            }

            let second = post(addr, &ingress_path(caller, "kimi", stream), &[], result_body(caller, stream, &id)).await;
            assert_eq!(second.status, 200, "{caller} {stream}: {}", String::from_utf8_lossy(&second.body));
            let got = seen.lock().unwrap().requests.last().map(ids_sent_back).unwrap();
            assert_eq!(got, [LANE_ID, LANE_ID], "{caller} {stream}: the lane got back the id it gave");
            assert!(String::from_utf8_lossy(&second.body).contains("sunny"), "{caller} {stream}: answered");
        }
    }
}

#[tokio::test]
async fn a_caller_of_the_lanes_own_protocol_gets_its_bytes_untouched() {
    let (lane, seen) = lane().await;
    let addr = gateway(&config(lane)).await;
    for stream in [false, true] {
        let first = post(addr, "/v1/chat/completions", &[], tool_body(Protocol::OpenAi, "kimi", stream)).await;
        assert_eq!(first.status, 200, "{}", String::from_utf8_lossy(&first.body));
        let sent = seen.lock().unwrap().replies.last().cloned().unwrap();
        assert_eq!(first.body, sent, "passthrough is byte for byte");
        assert_eq!(values(&first.body, "id").iter().filter(|id| *id == LANE_ID).count(), 1);
        let second = post(addr, "/v1/chat/completions", &[], result_body(Protocol::OpenAi, stream, LANE_ID)).await;
        assert_eq!(second.status, 200, "{}", String::from_utf8_lossy(&second.body));
        let got = seen.lock().unwrap().requests.last().map(ids_sent_back).unwrap();
        assert_eq!(got, [LANE_ID, LANE_ID]);
    }
}
