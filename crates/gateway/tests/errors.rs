//! Bad input and upstream errors come back in the caller's own protocol,
//! with an honest status, never a 5xx for a caller's mistake.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use common::*;
use switchyard_protocol::codec;
use switchyard_protocol::ir::{ErrorKind, Protocol};

/// Reads an error body with the protocol's own error reader.
fn error_kind(protocol: Protocol, reply: &Reply) -> ErrorKind {
    let raw = codec(protocol).extract_error(reply.status.as_u16(), &reply.body);
    assert!(!raw.message.is_empty(), "{protocol}: error without message: {}", String::from_utf8_lossy(&reply.body));
    raw.kind
}

#[tokio::test]
async fn caller_mistakes_get_their_protocols_error() {
    let addr = gateway(&format!("server: {{ body_limit: 4KiB }}\n{}", lanes_config("mock://"))).await;
    for protocol in Protocol::ALL {
        let path = ingress_path(protocol, "lane-openai", false);

        let reply = post(addr, &path, &[], "{not json").await;
        assert_eq!(reply.status, 400, "{protocol} malformed json");
        assert_eq!(error_kind(protocol, &reply), ErrorKind::InvalidRequest, "{protocol}");
        if protocol == Protocol::Bedrock {
            assert_eq!(
                reply.headers["x-amzn-errortype"].to_str().unwrap().split(':').next(),
                Some("ValidationException")
            );
        }

        let reply =
            post(addr, &path, &[("content-type", "text/plain")], chat_body(protocol, "lane-openai", "hi", false)).await;
        // Bedrock has no 415 of its own: its codec answers a ValidationException (400).
        let expected = if protocol == Protocol::Bedrock { 400 } else { 415 };
        assert_eq!(reply.status, expected, "{protocol} content type");

        let big = chat_body(protocol, "lane-openai", &"x".repeat(8 << 10), false);
        let reply = post(addr, &path, &[], big).await;
        assert_eq!(reply.status, 413, "{protocol} body limit");

        let unknown = ingress_path(protocol, "no-such-pool", false);
        let reply = post(addr, &unknown, &[], chat_body(protocol, "no-such-pool", "hi", false)).await;
        assert_eq!(reply.status, 404, "{protocol} unknown pool: {}", String::from_utf8_lossy(&reply.body));
        assert_eq!(error_kind(protocol, &reply), ErrorKind::NotFound, "{protocol}");
    }
    for protocol in [Protocol::OpenAi, Protocol::Responses, Protocol::Anthropic, Protocol::Cohere] {
        let reply = post(addr, &ingress_path(protocol, "", false), &[], "{\"messages\":[]}").await;
        assert_eq!(reply.status, 400, "{protocol} missing model");
    }
}

#[tokio::test]
async fn upstream_errors_keep_their_status_across_protocols() {
    let upstream = mock_upstream().await;
    for ingress in Protocol::ALL {
        // A fresh gateway per ingress: the 429s count against the lanes'
        // breakers, and six in a row would (rightly) trip them.
        let addr = gateway(&lanes_config(&format!("http://{upstream}"))).await;
        for lane in Protocol::ALL {
            let model = format!("lane-{lane}");
            for (status, kind) in [(400, ErrorKind::InvalidRequest), (429, ErrorKind::RateLimit)] {
                let text = format!("fail please [mock:status={status}]");
                let reply =
                    post(addr, &ingress_path(ingress, &model, false), &[], chat_body(ingress, &model, &text, false))
                        .await;
                let context = format!("{ingress} -> {lane} {status}: {}", String::from_utf8_lossy(&reply.body));
                assert_eq!(reply.status.as_u16(), status, "{context}");
                assert_eq!(error_kind(ingress, &reply), kind, "{context}");
                if status == 429 {
                    assert_eq!(reply.headers.get("retry-after").map(|v| v.to_str().unwrap()), Some("1"), "{context}");
                }
            }
        }
    }
}

#[tokio::test]
async fn health_and_model_list() {
    let addr = gateway(&lanes_config("mock://")).await;
    assert_eq!(get(addr, "/healthz").await.body, "ok");
    let list: serde_json::Value = serde_json::from_slice(&get(addr, "/v1/models").await.body).unwrap();
    let ids: Vec<&str> = list["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&"lane-openai") && ids.contains(&"mixed"), "{ids:?}");
}
