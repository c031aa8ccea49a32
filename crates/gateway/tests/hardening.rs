//! Hostile and careless clients over real TCP: bodies that disagree with
//! themselves, connections that never finish their headers or sit idle,
//! bodies that trickle, callers that stop reading a stream, too many
//! connections or requests, and HTTP/2 limits. Each ends in a clean error in
//! the caller's protocol or a closed connection, never a hang or a leak.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::response::Response;
use common::*;
use switchyard_protocol::codec;
use switchyard_protocol::ir::{ErrorKind, Protocol};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Reads until the peer closes, or `limit` passes; returns what came and
/// whether the connection closed.
async fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return (out, false),
            Ok(Ok(0)) | Ok(Err(_)) => return (out, true),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
}

fn raw_request(path: &str, body: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// The error kind a caller of `protocol` reads from a raw HTTP/1.1 reply.
fn raw_error_kind(protocol: Protocol, raw: &[u8]) -> (u16, ErrorKind) {
    let text = String::from_utf8_lossy(raw);
    let status: u16 = text.split(' ').nth(1).unwrap().parse().unwrap();
    let body = &raw[text.find("\r\n\r\n").unwrap() + 4..];
    (status, codec(protocol).extract_error(status, body).kind)
}

#[tokio::test]
async fn a_body_that_names_a_routing_member_twice_is_refused_in_the_callers_protocol() {
    let addr = gateway(&lanes_config("mock://")).await;
    let cases = [
        (
            Protocol::OpenAi,
            r#"{"model":"mixed","mod\u0065l":"lane-openai","messages":[{"role":"user","content":"hi"}]}"#,
        ),
        (Protocol::Cohere, r#"{"model":"mixed","model":"lane-cohere","messages":[{"role":"user","content":"hi"}]}"#),
        (
            Protocol::Anthropic,
            r#"{"model":"lane-openai","max_tokens":5,"stream":false,"str\u0065am":true,"messages":[{"role":"user","content":"hi"}]}"#,
        ),
        (Protocol::Responses, r#"{"model":"mixed","input":"hi","mod\u0065l":"x"}"#),
    ];
    for (protocol, body) in cases {
        let reply = post(addr, &ingress_path(protocol, "", false), &[], body).await;
        assert_eq!(reply.status, 400, "{protocol}: {}", String::from_utf8_lossy(&reply.body));
        let raw = codec(protocol).extract_error(400, &reply.body);
        assert_eq!(raw.kind, ErrorKind::InvalidRequest, "{protocol}");
        assert!(raw.message.contains("more than once"), "{protocol}: {}", raw.message);
    }
    // An escaped key that is named once is simply the member it spells.
    let reply = post(
        addr,
        "/v1/chat/completions",
        &[],
        r#"{"mod\u0065l":"lane-openai","messages":[{"role":"user","content":"hi"}]}"#,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.headers["x-switchyard-lane"], "lane-openai");
}

#[tokio::test]
async fn headers_that_never_finish_and_idle_connections_are_closed() {
    let yaml = format!("server: {{ header_read_timeout: 300ms, keepalive_idle: 400ms }}\n{}", lanes_config("mock://"));
    let addr = gateway(&yaml).await;

    // Half a request's headers, then nothing.
    let started = Instant::now();
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n").await.unwrap();
    let (_, closed) = read_until_closed(&mut slow, Duration::from_secs(5)).await;
    assert!(closed, "a half-sent head must not hold the connection");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());

    // A connection that never sends a byte.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let (_, closed) = read_until_closed(&mut silent, Duration::from_secs(5)).await;
    assert!(closed);

    // A served keep-alive connection left idle.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    let body = chat_body(Protocol::OpenAi, "lane-openai", "hi", false);
    idle.write_all(raw_request("/v1/chat/completions", &body).as_bytes()).await.unwrap();
    let started = Instant::now();
    let (reply, closed) = read_until_closed(&mut idle, Duration::from_secs(5)).await;
    assert!(String::from_utf8_lossy(&reply).starts_with("HTTP/1.1 200"));
    assert!(closed, "an idle keep-alive connection is closed");
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(350) && elapsed < Duration::from_secs(2), "{elapsed:?}");
}

#[tokio::test]
async fn a_body_that_trickles_gets_408_in_the_callers_protocol() {
    let addr = gateway(&format!("server: {{ body_read_timeout: 300ms }}\n{}", lanes_config("mock://"))).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 200\r\n\r\n{\"model\":")
        .await
        .unwrap();
    let (reply, _) = read_until_closed(&mut stream, Duration::from_secs(3)).await;
    assert_eq!(
        raw_error_kind(Protocol::Anthropic, &reply),
        (408, ErrorKind::Timeout),
        "{}",
        String::from_utf8_lossy(&reply)
    );
}

/// An OpenAI upstream that streams big chunks without end, and records
/// when the gateway drops its stream.
async fn endless_upstream() -> (std::net::SocketAddr, Arc<AtomicBool>) {
    struct Dropped(Arc<AtomicBool>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = dropped.clone();
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || {
            let guard = Dropped(flag.clone());
            async move {
                let text = "x".repeat(32 << 10);
                let frame = Bytes::from(format!(
                    "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"finish_reason\":null}}]}}\n\n"
                ));
                let frames = futures_util::stream::unfold(guard, move |guard| {
                    let frame = frame.clone();
                    async move { Some((Ok::<_, std::io::Error>(frame), guard)) }
                });
                let mut response = Response::new(Body::from_stream(frames));
                response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
                response
            }
        }),
    );
    (spawn(router).await, dropped)
}

#[tokio::test]
async fn a_caller_that_stops_reading_a_stream_releases_the_lane() {
    let (upstream, upstream_dropped) = endless_upstream().await;
    let yaml = format!(
        "server: {{ write_timeout: 500ms }}\nproviders:\n  up: {{ protocol: openai, base_url: \"http://{upstream}\" }}\nmodels:\n  endless: {{ provider: up, max_concurrent: 1 }}\n"
    );
    let addr = gateway(&yaml).await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let body = chat_body(Protocol::OpenAi, "endless", "hi", true);
    stream.write_all(raw_request("/v1/chat/completions", &body).as_bytes()).await.unwrap();
    let mut head = [0u8; 512];
    let n = stream.read(&mut head).await.unwrap();
    assert!(String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 200"));
    // Now the caller stops reading, holding the connection open.
    let lane = |stats: &serde_json::Value| {
        stats["pools"].as_array().unwrap().iter().find(|p| p["pool"] == "endless").unwrap()["lanes"][0].clone()
    };
    assert_eq!(lane(&stats(addr).await)["in_flight"], 1);
    let started = Instant::now();
    loop {
        let lane = lane(&stats(addr).await);
        if lane["in_flight"] == 0 && lane["free_permits"] == 1 && upstream_dropped.load(Ordering::SeqCst) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "still held after 10s: {lane}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(stream);
}

#[tokio::test]
async fn past_the_connection_cap_a_caller_gets_an_overload_error_not_a_hang() {
    let addr = gateway(&format!("server: {{ max_connections: 2 }}\n{}", lanes_config("mock://"))).await;
    let _first = TcpStream::connect(addr).await.unwrap();
    let _second = TcpStream::connect(addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut third = TcpStream::connect(addr).await.unwrap();
    let body = chat_body(Protocol::Anthropic, "lane-openai", "hi", false);
    third.write_all(raw_request("/v1/messages", &body).as_bytes()).await.unwrap();
    let (reply, closed) = read_until_closed(&mut third, Duration::from_secs(3)).await;
    assert!(closed, "the refused connection is closed");
    assert_eq!(
        raw_error_kind(Protocol::Anthropic, &reply),
        (503, ErrorKind::Overloaded),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    let text = String::from_utf8_lossy(&reply).to_ascii_lowercase();
    assert!(text.contains("retry-after: 1"), "{text}");
}

#[tokio::test]
async fn past_the_in_flight_cap_a_caller_gets_an_overload_error() {
    let slow = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(|body: Bytes| async move {
            tokio::time::sleep(Duration::from_millis(400)).await;
            let reply = switchyard_transport::mock::respond(
                codec(Protocol::OpenAi),
                None,
                false,
                switchyard_protocol::Framing::Sse,
                &body,
            );
            let mut response = Response::new(Body::new(reply.body));
            *response.status_mut() = reply.status;
            *response.headers_mut() = reply.headers;
            response
        }),
    );
    let upstream = spawn(slow).await;
    let yaml = format!(
        "server: {{ max_in_flight: 1 }}\nproviders:\n  up: {{ protocol: openai, base_url: \"http://{upstream}\" }}\nmodels:\n  slow: {{ provider: up }}\n"
    );
    let addr = gateway(&yaml).await;
    let first = tokio::spawn(async move {
        post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "slow", "one", false)).await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let second = post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "slow", "two", false)).await;
    assert_eq!(second.status, 503, "{}", String::from_utf8_lossy(&second.body));
    assert_eq!(codec(Protocol::OpenAi).extract_error(503, &second.body).kind, ErrorKind::Overloaded);
    assert_eq!(first.await.unwrap().status, 200);
    // The slot came back when the first response ended.
    let third = post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "slow", "three", false)).await;
    assert_eq!(third.status, 200);
}

#[tokio::test]
async fn http1_heads_over_8kib_are_refused() {
    let addr = gateway(&lanes_config("mock://")).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let big = "a".repeat(20 << 10);
    let body = chat_body(Protocol::OpenAi, "lane-openai", "hi", false);
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-big: {big}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(request.as_bytes()).await;
    let (reply, closed) = read_until_closed(&mut stream, Duration::from_secs(3)).await;
    assert!(closed);
    assert!(String::from_utf8_lossy(&reply).starts_with("HTTP/1.1 431"), "{}", String::from_utf8_lossy(&reply));
}

async fn h2_connect(addr: std::net::SocketAddr) -> h2::client::SendRequest<Bytes> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (send, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    send.ready().await.unwrap()
}

fn h2_post(path: &str) -> http::Request<()> {
    http::Request::post(format!("http://x{path}")).header("content-type", "application/json").body(()).unwrap()
}

#[tokio::test]
async fn http2_streams_headers_and_body_memory_are_bounded_per_connection() {
    let yaml = format!(
        "server: {{ body_limit: 64KiB, max_connection_body: 64KiB, http2: {{ max_concurrent_streams: 2, max_header_list_size: 8KiB }} }}\n{}",
        lanes_config("mock://")
    );
    let addr = gateway(&yaml).await;
    let mut send = h2_connect(addr).await;
    // The server's SETTINGS arrive with the first exchange.
    let (response, mut body) = send.send_request(h2_post("/v1/chat/completions"), false).unwrap();
    body.send_data(Bytes::from(chat_body(Protocol::OpenAi, "lane-openai", "hi", false)), true).unwrap();
    assert_eq!(response.await.unwrap().status(), 200);
    assert_eq!(send.current_max_send_streams(), 2);

    // Oversized header list: refused, the connection lives on.
    let mut request = h2_post("/v1/chat/completions");
    request.headers_mut().insert("x-big", "a".repeat(20 << 10).parse().unwrap());
    let refused = match send.clone().ready().await.unwrap().send_request(request, true) {
        Ok((response, _)) => response.await.map(|r| r.status().as_u16()).unwrap_or(0),
        Err(_) => 0,
    };
    assert!(refused == 0 || refused == 431, "oversized header list answered {refused}");

    // Two streams holding 40 KiB of body each exceed the 64 KiB budget: the
    // second is refused as an overload, in its protocol.
    let mut send = h2_connect(addr).await;
    let (first, mut first_body) = send.send_request(h2_post("/v1/chat/completions"), false).unwrap();
    first_body.send_data(Bytes::from(vec![b' '; 40 << 10]), false).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut send = send.ready().await.unwrap();
    let (second, mut second_body) = send.send_request(h2_post("/v1/messages"), false).unwrap();
    let mut padded = vec![b' '; 40 << 10];
    padded.extend_from_slice(chat_body(Protocol::Anthropic, "lane-openai", "hi", false).as_bytes());
    second_body.send_data(Bytes::from(padded), true).unwrap();
    let second = second.await.unwrap();
    assert_eq!(second.status(), 503);
    let mut second_body = second.into_body();
    let mut bytes = Vec::new();
    while let Some(chunk) = second_body.data().await {
        bytes.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(codec(Protocol::Anthropic).extract_error(503, &bytes).kind, ErrorKind::Overloaded);
    // The first stream finishes fine once its body is complete.
    first_body.send_data(Bytes::from(chat_body(Protocol::OpenAi, "lane-openai", "hi", false)), true).unwrap();
    // (Leading whitespace is valid JSON.)
    assert_eq!(first.await.unwrap().status(), 200);
}

#[tokio::test]
async fn session_ids_are_capped_in_length_and_in_number() {
    let yaml = format!(
        "{}  sticky: {{ members: [{{ model: lane-openai }}, {{ model: lane-anthropic }}] }}\n",
        lanes_config("mock://")
    );
    let (addr, gateway) = gateway_handle(&yaml).await;
    let body = chat_body(Protocol::OpenAi, "sticky", "hi", false);
    let long = "s".repeat(300);
    let reply = post(addr, "/v1/chat/completions", &[("x-session-id", &long)], body.clone()).await;
    assert_eq!(reply.status, 400, "{}", String::from_utf8_lossy(&reply.body));
    let reply = post(addr, "/v1/chat/completions", &[("x-session-id", "abc")], body).await;
    assert_eq!(reply.status, 200);
    let pool = gateway.resolve("sticky").unwrap();
    assert_eq!(gateway.pools[pool].sessions.len(), 1);
}

/// An OpenAI upstream that streams one SSE line of `total` bytes and
/// counts what it managed to send before the gateway hung up.
async fn one_line_upstream(total: usize) -> (std::net::SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
    let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = sent.clone();
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || {
            let counter = counter.clone();
            async move {
                let chunk = Bytes::from(vec![b'x'; 64 << 10]);
                let head = Bytes::from_static(b"data: {\"choices\":[{\"delta\":{\"content\":\"");
                let frames = futures_util::stream::unfold(0usize, move |at| {
                    let (chunk, head, counter) = (chunk.clone(), head.clone(), counter.clone());
                    async move {
                        if at >= total {
                            return None;
                        }
                        let next = if at == 0 { head } else { chunk };
                        counter.fetch_add(next.len(), Ordering::SeqCst);
                        Some((Ok::<_, std::io::Error>(next.clone()), at + next.len()))
                    }
                });
                let mut response = Response::new(Body::from_stream(frames));
                response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
                response
            }
        }),
    );
    (spawn(router).await, sent)
}

#[tokio::test]
async fn an_upstream_streaming_one_100mb_line_ends_in_a_clean_error() {
    for caller in [Protocol::Anthropic, Protocol::OpenAi] {
        let (upstream, sent) = one_line_upstream(100 << 20).await;
        let yaml = format!(
            "providers:\n  up: {{ protocol: openai, base_url: \"http://{upstream}\" }}\nmodels:\n  huge: {{ provider: up }}\n"
        );
        let addr = gateway(&yaml).await;
        let reply = post(addr, &ingress_path(caller, "huge", true), &[], chat_body(caller, "huge", "hi", true)).await;
        assert_eq!(reply.status, 200);
        // The caller's stream ends with its protocol's in-stream error...
        let tail = String::from_utf8_lossy(&reply.body[reply.body.len().saturating_sub(600)..]).to_string();
        assert!(tail.contains("could not be read"), "{caller}: {tail}");
        // ...long before the upstream got its 100 MB out: the gateway held at
        // most one capped event, then hung up.
        let sent = sent.load(Ordering::SeqCst);
        assert!(sent < 60 << 20, "{caller}: the upstream sent {sent} bytes before the gateway stopped reading");
        let stats = stats(addr).await;
        let lane = &stats["pools"].as_array().unwrap().iter().find(|p| p["pool"] == "huge").unwrap()["lanes"][0];
        assert_eq!(lane["upstream_failures"], 1, "{caller}: {lane}");
    }
}
