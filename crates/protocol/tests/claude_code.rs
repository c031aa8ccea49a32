//! Claude Code's own request (captured from the CLI, 2.1.332: the fixtures
//! of the Anthropic codec's golden tests) written for a lane of every other
//! protocol: the system message it sends inside the conversation arrives as
//! that dialect says it, and everything else it sends either crosses or is
//! named in the caller's own terms, each protocol's losses pinned here.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::path::PathBuf;

use serde_json::Value;
use switchyard_protocol::codec;
use switchyard_protocol::ir::{Capabilities, DropReason, Field, Protocol, Request};

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../protocol-anthropic/tests/fixtures").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The tool loop's second request, with the betas of its headers.
fn claude_code() -> Request {
    let anthropic = codec(Protocol::Anthropic);
    let mut request = anthropic.read_request(&fixture("claude_code_tool_loop_request.json")).unwrap();
    let mut headers = http::HeaderMap::new();
    for line in String::from_utf8(fixture("claude_code_headers.txt")).unwrap().lines() {
        let (name, value) = line.split_once(": ").unwrap();
        headers.append(http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
    }
    anthropic.read_headers(&headers, &mut request);
    request
}

/// The text of Claude Code's system message (the environment it runs in).
fn system_message_text(request: &Request) -> String {
    request.messages[1]
        .content
        .iter()
        .filter_map(|block| match block {
            switchyard_protocol::ir::Block::Text(text) => Some(text.text.clone()),
            _ => None,
        })
        .collect()
}

fn lost(lane: Protocol, model: &str) -> (Value, Vec<String>, Vec<(Field, DropReason)>) {
    let mut request = claude_code();
    model.clone_into(&mut request.model);
    let written = codec(lane).write_request_for(&request, &Capabilities::ALL);
    let body: Value = serde_json::from_slice(&written.body).unwrap();
    let mut paths: Vec<String> = written
        .dropped
        .iter()
        .map(|d| switchyard_protocol::dropped_path(codec(Protocol::Anthropic), d).into_owned())
        .collect();
    paths.sort();
    let fields = written.dropped.iter().map(|d| (d.field, d.reason)).collect();
    (body, paths, fields)
}

/// Where each lane's dialect puts Claude Code's system message, and what
/// the lane cannot take of its request, named as Claude Code wrote it.
#[test]
fn claude_codes_request_crosses_to_every_protocol() {
    let request = claude_code();
    let environment = system_message_text(&request);
    assert!(environment.contains("Primary working directory"), "{environment:.200}");
    let common =
        ["context_management.edits", "messages.output_config.effort", "thinking.display", "tools.defer_loading"];
    let cases: [(Protocol, &str, &[&str]); 6] = [
        (Protocol::OpenAi, "gpt-5", &["anthropic-beta", "cache_control", "messages.content.thinking"]),
        (Protocol::Responses, "gpt-5", &["anthropic-beta"]),
        (
            Protocol::Gemini,
            "gemini-3-pro-preview",
            &["anthropic-beta", "cache_control", "messages.system", "metadata.user_id"],
        ),
        (
            Protocol::Cohere,
            "command-a",
            &[
                "anthropic-beta",
                "cache_control",
                "messages.content.thinking",
                "metadata.user_id",
                "output_config.effort",
            ],
        ),
        (Protocol::Bedrock, "anthropic.claude-opus-4-6-v1", &[]),
        (Protocol::Bedrock, "amazon.nova-pro-v1:0", &["anthropic-beta", "messages.system"]),
    ];
    for (lane, model, own) in cases {
        let (body, paths, fields) = lost(lane, model);
        let mut expected: Vec<&str> = common.iter().chain(own).copied().collect();
        expected.sort_unstable();
        assert_eq!(paths, expected, "{lane} {model}");
        let text = |value: &Value| value.to_string();
        // Where the system message went.
        match (lane, model.starts_with("anthropic.")) {
            (Protocol::OpenAi | Protocol::Cohere, _) => {
                let roles: Vec<&str> =
                    body["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
                assert_eq!(roles[..3], ["system", "user", "system"], "{lane}: {roles:?}");
                assert!(text(&body["messages"][2]).contains("Primary working directory"), "{lane}");
            }
            (Protocol::Responses, _) => {
                let input = body["input"].as_array().unwrap();
                let at = input.iter().position(|item| text(item).contains("Primary working directory")).unwrap();
                assert_eq!(input[at]["role"], "system");
                assert!(input[..at].iter().any(|item| item["role"] == "user"), "after the first user turn");
            }
            (Protocol::Gemini, _) => {
                assert!(text(&body["systemInstruction"]).contains("Primary working directory"));
                assert!(!text(&body["contents"]).contains("Primary working directory"));
                assert!(fields.contains(&(Field::SystemMessage, DropReason::Converted)));
            }
            (Protocol::Bedrock, true) => {
                assert_eq!(body["messages"][1]["role"], "system");
                assert!(text(&body["messages"][1]).contains("Primary working directory"));
                assert_eq!(body["additionalModelRequestFields"]["anthropic_beta"], serde_json::json!(request.betas));
            }
            (Protocol::Bedrock, false) => {
                assert!(text(&body["system"]).contains("Primary working directory"));
                assert!(body["messages"].as_array().unwrap().iter().all(|m| m["role"] != "system"));
                assert!(body["additionalModelRequestFields"].get("anthropic_beta").is_none());
            }
            (Protocol::Anthropic, _) => unreachable!(),
        }
    }
}
