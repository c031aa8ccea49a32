//! Every ingress protocol × every lane protocol (36 pairs), streaming and
//! not, over real TCP: through in-process `mock://` lanes and through the
//! vendor fake on its own port (the real HTTP transport).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use common::*;
use switchyard_protocol::ir::{Block, Protocol, StopReason};

async fn check_all_pairs(addr: std::net::SocketAddr) {
    for ingress in Protocol::ALL {
        for lane in Protocol::ALL {
            for stream in [false, true] {
                let model = format!("lane-{lane}");
                let text = format!("hello from {ingress} to {lane}");
                let reply =
                    post(addr, &ingress_path(ingress, &model, stream), &[], chat_body(ingress, &model, &text, stream))
                        .await;
                let context =
                    format!("{ingress} -> {lane} (stream {stream}): {}", String::from_utf8_lossy(&reply.body));
                assert_eq!(reply.status, 200, "{context}");
                assert_eq!(reply.headers["x-switchyard-lane"], model.as_str(), "{context}");
                assert_eq!(reply.headers["x-switchyard-provider"], format!("up-{lane}").as_str(), "{context}");
                assert!(reply.headers.contains_key("x-request-id"), "{context}");
                let response = decode(ingress, stream, &reply.body);
                let answer = text_of(&response);
                assert!(answer.contains(&format!("[{lane} wire-{lane}]")), "{context}: {answer}");
                assert!(answer.contains(&text), "{context}: {answer}");
                assert_eq!(response.stop_reason, Some(StopReason::EndTurn), "{context}");
                assert!(
                    response.usage.input_tokens > 0 && response.usage.output_tokens > 0,
                    "{context}: {:?}",
                    response.usage
                );
            }
        }
    }
}

async fn check_tool_calls(addr: std::net::SocketAddr) {
    for ingress in Protocol::ALL {
        for lane in Protocol::ALL {
            for stream in [false, true] {
                let model = format!("lane-{lane}");
                let reply =
                    post(addr, &ingress_path(ingress, &model, stream), &[], tool_body(ingress, &model, stream)).await;
                let context =
                    format!("{ingress} -> {lane} (stream {stream}): {}", String::from_utf8_lossy(&reply.body));
                assert_eq!(reply.status, 200, "{context}");
                let response = decode(ingress, stream, &reply.body);
                let call = response.content.iter().find_map(|b| match b {
                    Block::ToolUse(call) => Some(call),
                    _ => None,
                });
                let call = call.unwrap_or_else(|| panic!("{context}: no tool call in {response:?}"));
                assert_eq!(call.name, "get_weather", "{context}");
                let args: serde_json::Value = serde_json::from_str(&call.input).unwrap();
                assert_eq!(args, serde_json::json!({"city": "mock"}), "{context}");
                assert_eq!(response.stop_reason, Some(StopReason::ToolUse), "{context}");
            }
        }
    }
}

#[tokio::test]
async fn every_pair_through_in_process_lanes() {
    let addr = gateway(&lanes_config("mock://")).await;
    check_all_pairs(addr).await;
    check_tool_calls(addr).await;
}

#[tokio::test]
async fn every_pair_through_the_vendor_fake_over_http() {
    let upstream = mock_upstream().await;
    let addr = gateway(&lanes_config(&format!("http://{upstream}"))).await;
    check_all_pairs(addr).await;
    check_tool_calls(addr).await;
}
