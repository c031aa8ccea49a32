//! A caller who leaves a stream, over real TCP with a governed gateway
//! (its requests billed): under `on_disconnect: cancel` (the default) the
//! upstream stream is closed at once, so its generation stops, and the row
//! is billed an estimate of what was delivered, marked estimated; an
//! answer that was whole when its caller left is read on for its usage
//! (issue 43, finding 13); under `on_disconnect: finish` the upstream is
//! read to its end and the row is exact.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::response::Response;
use common::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// When the upstream's stream was dropped (its connection closed), and how
/// many of its frames were read.
#[derive(Default)]
pub(crate) struct Watch {
    pub(crate) dropped: Mutex<Option<Instant>>,
    sent: std::sync::atomic::AtomicU64,
}

struct OnDrop(Arc<Watch>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        *self.0.dropped.lock().unwrap() = Some(Instant::now());
    }
}

fn chunk(content: &str, finish: Option<&str>) -> String {
    let finish = finish.map_or("null".to_owned(), |f| format!("\"{f}\""));
    format!(
        "data: {{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}},\"finish_reason\":{finish}}}]}}\n\n"
    )
}

const USAGE: &str = "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":40,\"total_tokens\":51}}\n\n";

/// An upstream whose `endless` model streams a frame every 20 ms forever;
/// `forty` streams 40 frames, its finish and its usage (a frame every 20
/// ms); `late-usage` sends its answer and finish at once and its usage
/// 400 ms later.
pub(crate) async fn upstream(watch: Arc<Watch>) -> std::net::SocketAddr {
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |body: Bytes| {
            let watch = watch.clone();
            async move {
                let model = switchyard_codec::scan::scan_top_level(&body).unwrap().model.unwrap().to_string();
                let guard = OnDrop(watch.clone());
                let frames = futures_util::stream::unfold((0u64, guard), move |(n, guard)| {
                    let model = model.clone();
                    async move {
                        let frame = match (model.as_str(), n) {
                            ("late-usage", 0) => format!("{}{}", chunk("all of it", None), chunk("", Some("stop"))),
                            ("late-usage", 1) => {
                                tokio::time::sleep(Duration::from_millis(400)).await;
                                USAGE.to_owned()
                            }
                            ("late-usage", 2) | ("forty", 42) => "data: [DONE]\n\n".to_owned(),
                            ("late-usage", _) | ("forty", 43..) => return None,
                            ("forty", 40) => chunk("", Some("stop")),
                            ("forty", 41) => USAGE.to_owned(),
                            _ => {
                                tokio::time::sleep(Duration::from_millis(20)).await;
                                chunk(&format!("t{n} "), None)
                            }
                        };
                        guard.0.sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        Some((Ok::<_, std::io::Error>(Bytes::from(frame)), (n + 1, guard)))
                    }
                });
                let mut response = Response::new(Body::from_stream(frames));
                response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
                response
            }
        }),
    );
    spawn(app).await
}

pub(crate) async fn gateway_for(upstream: std::net::SocketAddr, on_disconnect: &str) -> (std::net::SocketAddr, String) {
    let config = format!(
        "auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n\
         providers:\n  up: {{ protocol: openai, base_url: \"http://{upstream}\" }}\n\
         models:\n  endless: {{ provider: up }}\n  forty: {{ provider: up }}\n  late-usage: {{ provider: up }}\n\
         rate_card:\n  endless: {{ input_utok: 1, output_utok: 2 }}\n  forty: {{ input_utok: 1, output_utok: 2 }}\n  \
         late-usage: {{ input_utok: 1, output_utok: 2 }}\n\
         pools:\n  p-endless: {{ on_disconnect: {on_disconnect}, members: [{{ model: endless }}] }}\n  \
         p-forty: {{ on_disconnect: {on_disconnect}, members: [{{ model: forty }}] }}\n  \
         p-late: {{ on_disconnect: {on_disconnect}, members: [{{ model: late-usage }}] }}\n"
    );
    let (addr, _) = governed(&config).await;
    let key = create_key(addr, json!({ "name": "leaver" })).await;
    (addr, key["key"].as_str().unwrap().to_owned())
}

/// Sends a streamed chat to `pool`, reads until `until` shows, and hangs up.
async fn read_then_leave(addr: std::net::SocketAddr, secret: &str, pool: &str, until: &str) {
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = json!({ "model": pool, "stream": true, "messages": [{ "role": "user", "content": "go" }] }).to_string();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {secret}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains(until) {
        let mut buf = [0u8; 4096];
        let n = socket.read(&mut buf).await.unwrap();
        assert!(n > 0, "stream ended early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
}

#[tokio::test]
async fn a_caller_who_leaves_stops_the_upstream_at_once_and_is_billed_an_estimate() {
    let watch = Arc::new(Watch::default());
    let (addr, secret) = gateway_for(upstream(watch.clone()).await, "cancel").await;
    read_then_leave(addr, &secret, "p-endless", "t3 ").await;
    let left = Instant::now();
    for _ in 0..100 {
        if watch.dropped.lock().unwrap().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let dropped = watch.dropped.lock().unwrap().expect("the upstream stream was never closed");
    let took = dropped.saturating_duration_since(left);
    assert!(took <= Duration::from_millis(100), "the upstream was closed {took:?} after the caller left");
    let rows = ledger_rows(addr, "pool=p-endless", 1).await;
    assert_eq!(rows[0]["status"], 499, "{rows:?}");
    assert_eq!(rows[0]["estimated"], true, "{rows:?}");
    assert_eq!(rows[0]["notes"]["estimated"], "caller_left", "{rows:?}");
    assert!(rows[0]["output_tokens"].as_u64().unwrap() >= 4, "what was delivered is billed: {rows:?}");
}

/// Issue 43, finding 13: the answer was whole when its caller left, and
/// its usage was still to come: it is read on for it and billed exactly.
#[tokio::test]
async fn a_whole_answer_whose_caller_left_before_its_usage_is_billed_its_usage() {
    let watch = Arc::new(Watch::default());
    let (addr, secret) = gateway_for(upstream(watch.clone()).await, "cancel").await;
    read_then_leave(addr, &secret, "p-late", "\"finish_reason\":\"stop\"").await;
    let rows = ledger_rows(addr, "pool=p-late", 1).await;
    assert_eq!((rows[0]["input_tokens"].as_u64(), rows[0]["output_tokens"].as_u64()), (Some(11), Some(40)), "{rows:?}");
    assert_eq!(rows[0]["estimated"], false, "{rows:?}");
}

#[tokio::test]
async fn finish_reads_the_upstream_to_its_end_for_the_exact_usage() {
    let watch = Arc::new(Watch::default());
    let (addr, secret) = gateway_for(upstream(watch.clone()).await, "finish").await;
    read_then_leave(addr, &secret, "p-forty", "t3 ").await;
    let rows = ledger_rows(addr, "pool=p-forty", 1).await;
    assert_eq!(rows[0]["status"], 499, "{rows:?}");
    assert_eq!((rows[0]["input_tokens"].as_u64(), rows[0]["output_tokens"].as_u64()), (Some(11), Some(40)), "{rows:?}");
    assert_eq!(rows[0]["estimated"], false, "{rows:?}");
    assert_eq!(watch.sent.load(std::sync::atomic::Ordering::SeqCst), 43, "every frame was read");
}
