//! Coding agents through the gateway, over real TCP, replaying the request
//! shapes they send (headers included), as their documented base-URL
//! settings point them: Claude Code (`ANTHROPIC_BASE_URL`: Messages with
//! `anthropic-beta`, `?beta=true`, cache breakpoints, thinking, many tools;
//! `count_tokens`; the model list) and Codex (`OPENAI_BASE_URL` or a
//! `model_providers` entry: streamed Responses with `store: false`,
//! encrypted reasoning asked back, function tools and tool outputs in the
//! input). Each reaches a lane of its own protocol and of another.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

use common::{decode, gateway, get_with, lanes_config, post, text_of};
use serde_json::{json, Value};
use switchyard_protocol::ir::Protocol;

/// The headers Claude Code sends with every Messages call.
const CLAUDE_CODE_HEADERS: [(&str, &str); 6] = [
    ("anthropic-version", "2023-06-01"),
    ("anthropic-beta", "claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14"),
    ("x-api-key", "sk-ant-placeholder"),
    ("x-app", "cli"),
    ("user-agent", "claude-cli/2.0.14 (external, cli)"),
    ("anthropic-dangerous-direct-browser-access", "true"),
];

fn claude_code_tools() -> Value {
    let tool = |name: &str, description: &str, properties: Value, required: Value| {
        json!({"name": name, "description": description, "input_schema": {
            "type": "object", "properties": properties, "required": required,
            "additionalProperties": false, "$schema": "http://json-schema.org/draft-07/schema#"}})
    };
    json!([
        tool(
            "Bash",
            "Executes a given bash command",
            json!({"command": {"type": "string"}, "timeout": {"type": "number"}}),
            json!(["command"])
        ),
        tool(
            "Read",
            "Reads a file from the local filesystem",
            json!({"file_path": {"type": "string"}, "offset": {"type": "number"}}),
            json!(["file_path"])
        ),
        tool(
            "Edit",
            "Performs exact string replacements in files",
            json!({"file_path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}}),
            json!(["file_path", "old_string", "new_string"])
        ),
        tool(
            "TodoWrite",
            "Use this tool to create and manage a structured task list",
            json!({"todos": {"type": "array", "items": {"type": "object", "properties": {"content": {"type": "string"}, "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}}, "required": ["content", "status"]}}}),
            json!(["todos"])
        ),
    ])
}

/// A turn of a Claude Code session: system blocks with cache breakpoints,
/// a tool call and its result in the history, thinking on, streamed.
fn claude_code_turn(model: &str) -> Value {
    json!({
        "model": model,
        "max_tokens": 32000,
        "stream": true,
        "temperature": 1,
        "thinking": {"type": "enabled", "budget_tokens": 31999},
        "metadata": {"user_id": "user_0a1b2c3d_account__session_9f8e7d6c"},
        "system": [
            {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "You are an interactive CLI tool that helps users with software engineering tasks.", "cache_control": {"type": "ephemeral"}}
        ],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>As you answer the user's questions, you can use the following context.</system-reminder>"},
                {"type": "text", "text": "what is in README.md?", "cache_control": {"type": "ephemeral"}}
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me read it."},
                {"type": "tool_use", "id": "toolu_01ABCDEF", "name": "Read", "input": {"file_path": "/repo/README.md"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01ABCDEF", "content": "     1\t# Project\n     2\tA demo."},
                {"type": "text", "text": "summarise it", "cache_control": {"type": "ephemeral"}}
            ]}
        ],
        "tools": claude_code_tools(),
    })
}

#[tokio::test]
async fn claude_code_works_through_the_gateway() {
    let addr = gateway(&lanes_config("mock://")).await;
    for lane in [Protocol::Anthropic, Protocol::OpenAi, Protocol::Bedrock] {
        let model = format!("lane-{lane}");
        // ANTHROPIC_BASE_URL=http://gateway: the SDK appends /v1/messages?beta=true.
        let reply =
            post(addr, "/v1/messages?beta=true", &CLAUDE_CODE_HEADERS, claude_code_turn(&model).to_string()).await;
        assert_eq!(reply.status, 200, "{lane}: {}", String::from_utf8_lossy(&reply.body));
        assert_eq!(reply.headers["content-type"], "text/event-stream", "{lane}");
        let answer = decode(Protocol::Anthropic, true, &reply.body);
        // The fake answers a turn that carries a tool result by quoting it.
        assert!(text_of(&answer).contains("# Project"), "{lane}: {}", text_of(&answer));
        // ANTHROPIC_BASE_URL=http://gateway/{pool}: the pool in the path.
        let path = format!("/{model}/v1/messages?beta=true");
        let reply = post(addr, &path, &CLAUDE_CODE_HEADERS, claude_code_turn("claude-sonnet-4-5").to_string()).await;
        assert_eq!(reply.status, 200, "{lane}: {}", String::from_utf8_lossy(&reply.body));
        // Claude Code counts tokens before it compacts a long session.
        let mut count = claude_code_turn(&model);
        for member in ["max_tokens", "stream", "temperature", "metadata"] {
            count.as_object_mut().unwrap().remove(member);
        }
        let reply = post(addr, "/v1/messages/count_tokens?beta=true", &CLAUDE_CODE_HEADERS, count.to_string()).await;
        assert_eq!(reply.status, 200, "{lane}: {}", String::from_utf8_lossy(&reply.body));
        let counted: Value = serde_json::from_slice(&reply.body).unwrap();
        assert!(counted["input_tokens"].as_u64().unwrap() > 0, "{counted}");
        assert_eq!(reply.headers.get("x-switchyard-estimated").is_some(), lane == Protocol::OpenAi, "{lane}");
        let reply = post(
            addr,
            &format!("/{model}/v1/messages/count_tokens?beta=true"),
            &CLAUDE_CODE_HEADERS,
            count.to_string(),
        )
        .await;
        assert_eq!(reply.status, 200, "{lane}: {}", String::from_utf8_lossy(&reply.body));
    }
    // The model picker lists in Anthropic's shape.
    let models = get_with(addr, "/v1/models?limit=1000", &CLAUDE_CODE_HEADERS[..3]).await;
    let models: Value = serde_json::from_slice(&models.body).unwrap();
    assert!(models["data"].as_array().unwrap().iter().all(|m| m["type"] == "model"), "{models}");
}

/// The headers Codex sends with every Responses call.
const CODEX_HEADERS: [(&str, &str); 7] = [
    ("authorization", "Bearer sk-placeholder"),
    ("openai-beta", "responses=experimental"),
    ("originator", "codex_cli_rs"),
    ("version", "0.46.0"),
    ("session_id", "0199d2f1-7c3e-7a10-9a55-3f1e2d4c5b6a"),
    ("conversation_id", "0199d2f1-7c3e-7a10-9a55-3f1e2d4c5b6a"),
    ("accept", "text/event-stream"),
];

/// A turn of a Codex session: instructions, a shell call and its output
/// in the input, encrypted reasoning asked back, nothing stored.
fn codex_turn(model: &str) -> Value {
    json!({
        "model": model,
        "instructions": "You are Codex, based on GPT-5. You are running as a coding agent in the Codex CLI on a user's computer.",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list the files"}]},
            {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_Xy12"},
            {"type": "function_call_output", "call_id": "call_Xy12", "output": "{\"output\":\"README.md\\nsrc\\n\",\"metadata\":{\"exit_code\":0}}"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "now describe them"}]}
        ],
        "tools": [
            {"type": "function", "name": "shell", "description": "Runs a shell command and returns its output.", "strict": false,
             "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}, "workdir": {"type": "string"}}, "required": ["command"], "additionalProperties": false}},
            {"type": "function", "name": "update_plan", "description": "Updates the task plan.", "strict": false,
             "parameters": {"type": "object", "properties": {"plan": {"type": "array", "items": {"type": "object", "properties": {"step": {"type": "string"}, "status": {"type": "string"}}, "required": ["step", "status"]}}}, "required": ["plan"], "additionalProperties": false}}
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": false,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": false,
        "stream": true,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "0199d2f1-7c3e-7a10-9a55-3f1e2d4c5b6a"
    })
}

#[tokio::test]
async fn codex_works_through_the_gateway() {
    let addr = gateway(&lanes_config("mock://")).await;
    for lane in [Protocol::Responses, Protocol::Anthropic, Protocol::Gemini] {
        // OPENAI_BASE_URL=http://gateway/v1: Codex posts /v1/responses.
        let reply = post(addr, "/v1/responses", &CODEX_HEADERS, codex_turn(&format!("lane-{lane}")).to_string()).await;
        assert_eq!(reply.status, 200, "{lane}: {}", String::from_utf8_lossy(&reply.body));
        assert_eq!(reply.headers["content-type"], "text/event-stream", "{lane}");
        let answer = decode(Protocol::Responses, true, &reply.body);
        assert!(text_of(&answer).contains("README.md"), "{lane}: {}", text_of(&answer));
    }
}
