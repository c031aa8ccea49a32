//! Every admitted request settles, however it ends, over real TCP: a
//! caller that hangs up before a whole reply is billed what the upstream
//! reported (the request runs to its end on its own task) and logged as a
//! 499, and a reply
//! whose body never comes whole is charged at its reservation.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::Response;
use common::*;
use serde_json::json;
use switchyard_protocol::ir::Protocol;
use tokio::io::AsyncWriteExt;

/// An OpenAI upstream: `slow` answers whole after 600 ms, `fast` at once; `stall` sends a
/// 200 head and then never its body; `nodone` streams a whole answer with
/// its usage and closes without `[DONE]`.
async fn upstream() -> std::net::SocketAddr {
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(|body: Bytes| async move {
            let model = switchyard_codec::scan::scan_top_level(&body).unwrap().model.unwrap().to_string();
            if model == "nodone" {
                let frames = concat!(
                    "data: {\"id\":\"n\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"done\"},\"finish_reason\":null}]}\n\n",
                    "data: {\"id\":\"n\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\": \"stop\"}]}\n\n",
                    "data: {\"id\":\"n\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[],\"usage\": {\"prompt_tokens\":7,\"completion_tokens\":3,\"total_tokens\":10}}\n\n",
                );
                let mut response = Response::new(Body::from(frames));
                response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
                return response;
            }
            if model == "stall" {
                let mut response =
                    Response::new(Body::from_stream(futures_util::stream::pending::<Result<Bytes, std::io::Error>>()));
                response.headers_mut().insert("content-type", "application/json".parse().unwrap());
                return response;
            }
            if model != "fast" {
                tokio::time::sleep(Duration::from_millis(600)).await;
            }
            let reply = switchyard_transport::mock::respond(
                switchyard_protocol::codec(Protocol::OpenAi),
                None,
                false,
                switchyard_protocol::Framing::Sse,
                &body,
            );
            let mut response = Response::new(Body::new(reply.body));
            *response.headers_mut() = reply.headers;
            response
        }),
    );
    spawn(app).await
}

fn config(upstream: std::net::SocketAddr) -> String {
    format!(
        "auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\nproviders:\n  \
         up: {{ protocol: openai, base_url: \"http://{upstream}\", timeouts: {{ request: 400ms }} }}\n\
         models:\n  slow: {{ provider: up }}\n  fast: {{ provider: up }}\n  stall: {{ provider: up }}\n  nodone: {{ provider: up }}\n\
         rate_card:\n  slow: {{ input_utok: 1000, output_utok: 1000 }}\n  stall: {{ input_utok: 1000, output_utok: 1000 }}\n  \
         nodone: {{ input_utok: 1000, output_utok: 1000 }}\n  fast: {{ input_utok: 1000, output_utok: 1000 }}\n\
         pools:\n  race: {{ hedge: {{ after: 100ms, max_extra: 100% }}, members: [{{ model: slow, weight: 100 }}, {{ model: fast, weight: 1 }}] }}\n"
    )
}

/// The ledger's rows of key `id`, once there are `n`.
async fn rows(addr: std::net::SocketAddr, id: &str, n: usize) -> Vec<serde_json::Value> {
    for _ in 0..300 {
        let reply = admin_call(addr, "GET", &format!("/api/v1/admin/requests?key={id}"), Some(ADMIN_TOKEN), None).await;
        let page: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        let rows = page["data"].as_array().unwrap().clone();
        if rows.len() >= n {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no ledger row for {id}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_hangs_up_is_billed_what_the_upstream_did() {
    let up = upstream().await;
    let (addr, _) = governed(&config(up)).await;
    let key = create_key(addr, json!({"name": "impatient"})).await;
    let (id, secret) = (key["id"].as_str().unwrap(), key["key"].as_str().unwrap());
    // The caller sends its request and hangs up long before the reply.
    let body = json!({"model": "slow", "max_tokens": 50, "messages": [{"role": "user", "content": "take your time"}]});
    let body = body.to_string();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nauthorization: Bearer {secret}\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(stream);
    let row = rows(addr, id, 1).await.remove(0);
    assert_eq!(row["estimated"], false, "{row}");
    assert!(row["output_tokens"].as_u64().unwrap() > 0 && row["input_tokens"].as_u64().unwrap() > 0, "{row}");
    assert_eq!(row["lane"], "slow");
    // Billed, and logged as what the caller got: nothing (499, as nginx logs it).
    assert_eq!(row["status"], 499, "{row}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_that_never_comes_whole_is_charged_at_its_reservation() {
    let up = upstream().await;
    let (addr, _) = governed(&config(up)).await;
    let key = create_key(addr, json!({"name": "stalled"})).await;
    let (id, secret) = (key["id"].as_str().unwrap(), key["key"].as_str().unwrap());
    let body = json!({"model": "stall", "max_tokens": 50, "messages": [{"role": "user", "content": "hello"}]});
    let reply =
        post(addr, "/v1/chat/completions", &[("authorization", &format!("Bearer {secret}"))], body.to_string()).await;
    assert_eq!(reply.status, 502, "{}", String::from_utf8_lossy(&reply.body));
    let row = rows(addr, id, 1).await.remove(0);
    assert_eq!(row["estimated"], true, "{row}");
    assert_eq!(row["notes"]["estimated"], "answer_broken", "{row}");
    assert!(row["output_tokens"].as_u64().unwrap() >= 50, "the reservation's output is charged: {row}");
    let spend = admin_call(addr, "GET", "/api/v1/admin/spend?by=key&from=0", Some(ADMIN_TOKEN), None).await;
    let spend: serde_json::Value = serde_json::from_slice(&spend.body).unwrap();
    assert!(spend["data"][0]["usd"].as_f64().unwrap() > 0.0, "{spend}");
}

/// A stream whose answer finished but whose `[DONE]` never came is billed
/// as the answer it was: its own usage, a 200, not an estimate. Before,
/// a translated one was settled by the relay's drop as a hung-up 499.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_answer_without_its_terminator_is_billed_as_answered() {
    let up = upstream().await;
    let (addr, _) = governed(&config(up)).await;
    let key = create_key(addr, json!({"name": "terminators"})).await;
    let (id, secret) = (key["id"].as_str().unwrap(), key["key"].as_str().unwrap());
    let auth = format!("Bearer {secret}");
    for ingress in [Protocol::OpenAi, Protocol::Anthropic] {
        let headers: &[(&str, &str)] = match ingress {
            Protocol::Anthropic => &[("x-api-key", secret)],
            _ => &[("authorization", &auth)],
        };
        let reply =
            post(addr, &ingress_path(ingress, "nodone", true), headers, chat_body(ingress, "nodone", "hi", true)).await;
        assert_eq!(reply.status, 200, "{ingress}: {}", String::from_utf8_lossy(&reply.body));
    }
    for row in rows(addr, id, 2).await {
        assert_eq!((row["status"].as_u64(), row["estimated"].as_bool()), (Some(200), Some(false)), "{row}");
        assert_eq!((row["input_tokens"].as_u64(), row["output_tokens"].as_u64()), (Some(7), Some(3)), "{row}");
    }
}

/// A hedged request is billed both attempts: the answer on its lane's row,
/// and the cancelled loser its prompt (the gateway's estimate) on a row of
/// its own, status 499, at its lane's price; the budget settles both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hedged_request_bills_its_cancelled_loser() {
    let up = upstream().await;
    let (addr, _) = governed(&config(up)).await;
    let key = create_key(addr, json!({"name": "hedged"})).await;
    let (id, secret) = (key["id"].as_str().unwrap(), key["key"].as_str().unwrap());
    let body = json!({"model": "race", "max_tokens": 50, "messages": [{"role": "user", "content": "who is first?"}]});
    let started = std::time::Instant::now();
    let reply =
        post(addr, "/v1/chat/completions", &[("authorization", &format!("Bearer {secret}"))], body.to_string()).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert!(started.elapsed() < Duration::from_millis(500), "the hedge answered: {:?}", started.elapsed());
    assert_eq!(reply.headers.get("x-switchyard-lane").unwrap(), "fast");
    let rows = rows(addr, id, 2).await;
    let answered = rows.iter().find(|r| r["status"] == 200).unwrap();
    let cancelled = rows.iter().find(|r| r["status"] == 499).unwrap();
    assert_eq!(answered["lane"], "fast", "{answered}");
    let attempts: Vec<&str> =
        answered["attempts"].as_array().unwrap().iter().map(|a| a["lane"].as_str().unwrap()).collect();
    assert_eq!(attempts, ["slow", "fast"], "{answered}");
    assert_eq!(answered["attempts"][0]["failure"], "hedge_cancelled", "{answered}");
    assert_eq!(cancelled["lane"], "slow", "{cancelled}");
    assert_eq!(cancelled["estimated"], true, "{cancelled}");
    assert_eq!(cancelled["notes"]["estimated"], "hedge_loser", "{cancelled}");
    assert!(cancelled["input_tokens"].as_u64().unwrap() > 0, "its prompt is billed: {cancelled}");
    assert_eq!(cancelled["output_tokens"], 0, "{cancelled}");
    let spend = admin_call(addr, "GET", "/api/v1/admin/spend?by=lane&from=0", Some(ADMIN_TOKEN), None).await;
    let spend: serde_json::Value = serde_json::from_slice(&spend.body).unwrap();
    let lanes: Vec<&str> = spend["data"].as_array().unwrap().iter().filter_map(|r| r["value"].as_str()).collect();
    assert!(lanes.contains(&"slow") && lanes.contains(&"fast"), "both lanes are spent on: {spend}");
}
