//! Translation at the engine over real TCP: what a lane cannot carry is told
//! in `x-switchyard-dropped` (in the caller's own terms), strict mode
//! refuses it with a 400 in the caller's protocol, and a lane's capabilities
//! shape the request it gets.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use common::*;
use serde_json::{json, Value};

const CONFIG: &str = r#"
providers:
  claude: { protocol: anthropic, base_url: "mock://" }
  gpt: { protocol: openai, base_url: "mock://" }
models:
  sonnet: { provider: claude, model: claude-sonnet-4-5, capabilities: { temperature_with_top_p: false } }
  gpt: { provider: gpt, model: gpt-4o }
pools:
  lenient: { members: [{ model: sonnet }] }
  exact: { translation: strict, members: [{ model: sonnet }] }
"#;

fn openai_body(model: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "model": model,
        "messages": [{"role": "user", "content": "hi"}],
        "seed": 7,
        "temperature": 0.5,
        "top_p": 0.9,
        "frequency_penalty": 0.1
    }))
    .unwrap()
}

#[tokio::test]
async fn what_a_lane_cannot_carry_is_told_in_the_callers_terms() {
    let addr = gateway(CONFIG).await;
    let reply = post(addr, "/v1/chat/completions", &[], openai_body("lenient")).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    // top_p is the lane model's capability; seed and the penalty Anthropic has no field for.
    assert_eq!(reply.headers["x-switchyard-dropped"], "top_p, seed, frequency_penalty");

    // A Gemini caller's topK reaches an OpenAI lane as its own path.
    let gemini = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {"topK": 3, "temperature": 0.2}});
    let reply = post(addr, "/v1beta/models/gpt:generateContent", &[], serde_json::to_vec(&gemini).unwrap()).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.headers["x-switchyard-dropped"], "generationConfig.topK");
}

#[tokio::test]
async fn nothing_lost_means_no_header() {
    let addr = gateway(CONFIG).await;
    let body = json!({"model": "lenient", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.5});
    let reply = post(addr, "/v1/chat/completions", &[], serde_json::to_vec(&body).unwrap()).await;
    assert_eq!(reply.status, 200);
    assert!(!reply.headers.contains_key("x-switchyard-dropped"));
    // A same-protocol hop carries everything.
    let reply = post(addr, "/v1/chat/completions", &[], openai_body("gpt")).await;
    assert_eq!(reply.status, 200);
    assert!(!reply.headers.contains_key("x-switchyard-dropped"));
}

#[tokio::test]
async fn strict_translation_refuses_in_the_callers_protocol() {
    let addr = gateway(CONFIG).await;
    for (pool, headers) in [("exact", &[][..]), ("lenient", &[("x-switchyard-strict", "1")][..])] {
        let reply = post(addr, "/v1/chat/completions", headers, openai_body(pool)).await;
        assert_eq!(reply.status, 400, "{pool}");
        let error: Value = serde_json::from_slice(&reply.body).unwrap();
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains("seed") && message.contains("frequency_penalty"), "{message}");
        assert_eq!(error["error"]["type"], "invalid_request_error", "{error}");
        assert_eq!(error["error"]["param"], "top_p", "{error}");
    }
    // An Anthropic caller's top_k, which no OpenAI lane could carry (the
    // lane's model takes it: temperature with top_p it would refuse).
    let anthropic = json!({"model": "exact", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.5, "top_k": 5});
    let reply = post(addr, "/v1/messages", &[], serde_json::to_vec(&anthropic).unwrap()).await;
    // Same protocol: nothing to refuse.
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    let gemini = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {"seed": 3}});
    let reply = post(addr, "/v1beta/models/exact:generateContent", &[], serde_json::to_vec(&gemini).unwrap()).await;
    assert_eq!(reply.status, 400);
    let error: Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(error["error"]["status"], "INVALID_ARGUMENT", "{error}");
    assert!(error["error"]["message"].as_str().unwrap().contains("generationConfig.seed"), "{error}");
}

#[tokio::test]
async fn a_strict_request_that_loses_nothing_is_served() {
    let addr = gateway(CONFIG).await;
    let body = json!({"model": "exact", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 20});
    let reply =
        post(addr, "/v1/chat/completions", &[("x-switchyard-strict", "true")], serde_json::to_vec(&body).unwrap())
            .await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
}

/// A Gemini lane's call signature comes back to it whatever the caller's
/// SDK echoed: its own carrier, or the gateway's memory when the caller
/// rebuilt the call from id, name and arguments; the placeholder only for a
/// call the gateway never saw. `/metrics` counts each source.
#[tokio::test]
async fn gemini_call_signatures_survive_callers_that_drop_them() {
    let yaml = "providers:\n  g: { protocol: gemini, base_url: \"mock://\" }\n\
                models:\n  flash: { provider: g, model: gemini-3-flash }\n";
    let addr = gateway(yaml).await;
    let tools = json!([{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]);
    let ask = json!({"role": "user", "content": "look it up"});
    let first = json!({"model": "flash", "messages": [ask], "tools": tools, "stream": true});
    let reply = post(addr, "/v1/chat/completions", &[], serde_json::to_vec(&first).unwrap()).await;
    assert_eq!(reply.status, 200);
    let text = String::from_utf8_lossy(&reply.body).into_owned();
    let id = text.split("\"id\":\"call_").nth(1).and_then(|rest| rest.split('"').next()).unwrap();
    let id = format!("call_{id}");
    assert!(text.contains("thought_signature"), "{text}");

    let turn = |call: Value| {
        let result = json!({"role": "tool", "tool_call_id": call["id"], "content": "found"});
        let assistant = json!({"role": "assistant", "content": null, "tool_calls": [call]});
        serde_json::to_vec(&json!({"model": "flash", "messages": [ask, assistant, result], "tools": tools})).unwrap()
    };
    let rebuilt =
        json!({"id": id, "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"mock\"}"}});
    let reply = post(addr, "/v1/chat/completions", &[], turn(rebuilt)).await;
    assert!(String::from_utf8_lossy(&reply.body).contains("(signed)"), "{}", String::from_utf8_lossy(&reply.body));

    let unknown =
        json!({"id": "call_never_seen", "type": "function", "function": {"name": "lookup", "arguments": "{}"}});
    let reply = post(addr, "/v1/chat/completions", &[], turn(unknown)).await;
    assert!(String::from_utf8_lossy(&reply.body).contains("(unsigned)"), "{}", String::from_utf8_lossy(&reply.body));

    let metrics = get_with(admin(addr), "/metrics", &[("authorization", &format!("Bearer {ADMIN_TOKEN}"))]).await;
    let metrics = String::from_utf8_lossy(&metrics.body);
    for source in ["restored", "placeholder"] {
        let series = format!("switchyard_thought_signatures_total{{lane=\"flash\",source=\"{source}\"}} 1");
        assert!(metrics.contains(&series), "{series} in\n{metrics}");
    }
}

/// An Anthropic upstream that answers with the headers it was sent.
async fn header_echo() -> std::net::SocketAddr {
    async fn answer(headers: http::HeaderMap) -> axum::Json<Value> {
        let seen = |name: &str| {
            headers.get_all(name).iter().map(|v| v.to_str().unwrap_or("?").to_owned()).collect::<Vec<_>>().join("|")
        };
        let text = format!(
            "beta={} version={} org={} cookie={} workspace={} profile={}",
            seen("anthropic-beta"),
            seen("anthropic-version"),
            seen("openai-organization"),
            seen("cookie"),
            seen("anthropic-workspace-id"),
            seen("anthropic-user-profile-id")
        );
        axum::Json(json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1}}))
    }
    spawn(axum::Router::new().route("/v1/messages", axum::routing::post(answer))).await
}

/// Caller headers reach a lane only by allow-list: an Anthropic caller's
/// betas and version on an Anthropic lane, what the operator lists from any
/// caller; a lane of another protocol reports the betas it lost.
#[tokio::test]
async fn caller_headers_pass_on_by_allow_list_only() {
    let upstream = header_echo().await;
    let yaml = format!(
        "providers:\n  claude: {{ protocol: anthropic, base_url: \"http://{upstream}\", forward_headers: [OpenAI-Organization] }}\n  \
         gpt: {{ protocol: openai, base_url: \"mock://\" }}\n\
         models:\n  sonnet: {{ provider: claude, model: claude-sonnet-4-5 }}\n  gpt: {{ provider: gpt, model: gpt-4o }}\n"
    );
    let addr = gateway(&yaml).await;
    let anthropic = |model: &str| {
        serde_json::to_vec(&json!({"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}))
            .unwrap()
    };
    let headers = [
        ("anthropic-beta", "interleaved-thinking-2025-05-14,context-1m-2025-08-07"),
        ("anthropic-version", "2023-06-01"),
        ("openai-organization", "org-7"),
        ("cookie", "session=secret"),
    ];
    let reply = post(addr, "/v1/messages", &headers, anthropic("sonnet")).await;
    let text = String::from_utf8_lossy(&reply.body).into_owned();
    assert!(
        text.contains(
            "beta=interleaved-thinking-2025-05-14,context-1m-2025-08-07 version=2023-06-01 org=org-7 cookie= workspace= profile=\""
        ),
        "{text}"
    );

    // An OpenAI caller's anthropic-beta means nothing to the gateway: it stays.
    let openai = json!({"model": "sonnet", "messages": [{"role": "user", "content": "hi"}]});
    let reply = post(addr, "/v1/chat/completions", &headers, serde_json::to_vec(&openai).unwrap()).await;
    let text = String::from_utf8_lossy(&reply.body).into_owned();
    assert!(text.contains("beta= version=2023-06-01 org=org-7"), "the lane's own version, the listed org: {text}");

    // An Anthropic caller's betas on an OpenAI lane are lost, and said so.
    let reply = post(addr, "/v1/messages", &headers, anthropic("gpt")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["x-switchyard-dropped"], "anthropic-beta");
}

/// The Anthropic SDKs' `workspace_id` and `user_profile_id` (headers of the
/// caller's own account) go only to a lane sending the caller's own key,
/// or one whose operator lists them; every other lane, of the caller's
/// protocol or not, says it lost them (they were dropped in silence).
#[tokio::test]
async fn headers_of_the_callers_account_go_only_with_the_callers_key() {
    let upstream = header_echo().await;
    let yaml = format!(
        "providers:\n  claude: {{ protocol: anthropic, base_url: \"http://{upstream}\" }}\n  \
         own: {{ protocol: anthropic, base_url: \"http://{upstream}\", upstream_credentials: passthrough }}\n  \
         listed: {{ protocol: anthropic, base_url: \"http://{upstream}\", forward_headers: [anthropic-workspace-id] }}\n  \
         gpt: {{ protocol: openai, base_url: \"mock://\" }}\n\
         models:\n  sonnet: {{ provider: claude, model: claude-sonnet-4-5 }}\n  \
         own: {{ provider: own, model: claude-sonnet-4-5 }}\n  listed: {{ provider: listed, model: claude-sonnet-4-5 }}\n  \
         gpt: {{ provider: gpt, model: gpt-4o }}\n"
    );
    let addr = gateway(&yaml).await;
    let anthropic = |model: &str| {
        serde_json::to_vec(&json!({"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}))
            .unwrap()
    };
    let headers = [
        ("x-api-key", "sk-ant-callers-own"),
        ("anthropic-version", "2023-06-01"),
        ("anthropic-workspace-id", "wrkspc_caller"),
        ("anthropic-user-profile-id", "prof_caller"),
    ];
    let text = |reply: &common::Reply| String::from_utf8_lossy(&reply.body).into_owned();

    let reply = post(addr, "/v1/messages", &headers, anthropic("sonnet")).await;
    assert_eq!(reply.status, 200);
    assert!(text(&reply).contains("workspace= profile="), "the operator's key is the lane's: {}", text(&reply));
    assert_eq!(reply.headers["x-switchyard-dropped"], "anthropic-workspace-id, anthropic-user-profile-id");

    let reply = post(addr, "/v1/messages", &headers, anthropic("own")).await;
    assert!(text(&reply).contains("workspace=wrkspc_caller profile=prof_caller"), "{}", text(&reply));
    assert!(!reply.headers.contains_key("x-switchyard-dropped"));

    let reply = post(addr, "/v1/messages", &headers, anthropic("listed")).await;
    assert!(text(&reply).contains("workspace=wrkspc_caller profile="), "{}", text(&reply));
    assert_eq!(reply.headers["x-switchyard-dropped"], "anthropic-user-profile-id");

    let reply = post(addr, "/v1/messages", &headers, anthropic("gpt")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["x-switchyard-dropped"], "anthropic-workspace-id, anthropic-user-profile-id");
}

/// A conversation carrying Claude's signed thinking stays with the lanes
/// that can verify it (Anthropic, Bedrock), failing over among them and
/// never to a lane of another vendor; without signed state it goes anywhere.
#[tokio::test]
async fn signed_thinking_keeps_a_conversation_on_its_vendors_lanes() {
    let yaml = "providers:\n  dead: { protocol: anthropic, base_url: \"http://127.0.0.1:1\" }\n  \
                gpt: { protocol: openai, base_url: \"mock://\" }\n  aws: { protocol: bedrock, base_url: \"mock://\" }\n\
                models:\n  claude: { provider: dead, model: claude-sonnet-4-5 }\n  gpt: { provider: gpt, model: gpt-4o }\n  \
                nova: { provider: aws, model: anthropic.claude-sonnet-4-5 }\n\
                pools:\n  p: { members: [{ model: claude }, { model: gpt }, { model: nova }] }\n";
    let addr = gateway(yaml).await;
    let body = |signed: bool| {
        let thinking = if signed {
            // Signed as the mock signs (it refuses a signature not its text's).
            let signature = switchyard_transport::mock::reasoning_signature("let me see");
            json!({"type": "thinking", "thinking": "let me see", "signature": signature})
        } else {
            json!({"type": "text", "text": "let me see"})
        };
        serde_json::to_vec(&json!({"model": "p", "max_tokens": 64, "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [thinking, {"type": "text", "text": "a"}]},
            {"role": "user", "content": "more"}]}))
        .unwrap()
    };
    let mut unsigned_lanes = std::collections::BTreeSet::new();
    for _ in 0..6 {
        let reply = post(addr, "/v1/messages", &[], body(true)).await;
        assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
        assert_eq!(reply.headers["x-switchyard-lane"], "nova", "signed thinking left its vendor's lanes");
        let reply = post(addr, "/v1/messages", &[], body(false)).await;
        unsigned_lanes.insert(reply.headers["x-switchyard-lane"].to_str().unwrap().to_owned());
    }
    assert!(unsigned_lanes.contains("gpt"), "an unsigned conversation may go anywhere: {unsigned_lanes:?}");
}

/// The bundled model facts serve a lane the config says nothing about: a
/// cap past the model's most output is lowered to it and reported, where
/// the vendor would refuse it.
#[tokio::test]
async fn model_facts_lower_a_cap_past_the_models_most_output() {
    let yaml = "providers:\n  claude: { protocol: anthropic, base_url: \"mock://\" }\n\
                models:\n  haiku: { provider: claude, model: claude-3-5-haiku-20241022 }\n  \
                mine: { provider: claude, model: claude-3-5-haiku-20241022, capabilities: { max_output: 200000 } }\n";
    let addr = gateway(yaml).await;
    let body = |model: &str, max_tokens: u64| {
        serde_json::to_vec(
            &json!({"model": model, "max_tokens": max_tokens, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .unwrap()
    };
    let reply = post(addr, "/v1/chat/completions", &[], body("haiku", 100_000)).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.headers["x-switchyard-dropped"], "max_completion_tokens");
    // Within the model's most output: nothing to say.
    let reply = post(addr, "/v1/chat/completions", &[], body("haiku", 8_000)).await;
    assert!(!reply.headers.contains_key("x-switchyard-dropped"));
    // The config's own value overrides the snapshot's.
    let reply = post(addr, "/v1/chat/completions", &[], body("mine", 100_000)).await;
    assert!(!reply.headers.contains_key("x-switchyard-dropped"));
}

/// A model the facts know does not reason gets no reasoning field, and the
/// caller hears what was not sent; a reasoning model gets it.
#[tokio::test]
async fn model_facts_keep_reasoning_from_a_model_that_does_not_reason() {
    let yaml = "providers:\n  gpt: { protocol: openai, base_url: \"mock://\" }\n\
                models:\n  old: { provider: gpt, model: gpt-4o }\n  thinker: { provider: gpt, model: o4-mini }\n";
    let addr = gateway(yaml).await;
    let body = |model: &str| {
        serde_json::to_vec(
            &json!({"model": model, "max_tokens": 64, "thinking": {"type": "enabled", "budget_tokens": 2048},
            "messages": [{"role": "user", "content": "hi"}]}),
        )
        .unwrap()
    };
    let reply = post(addr, "/v1/messages", &[], body("old")).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.headers["x-switchyard-dropped"], "thinking.budget_tokens");
    let text = String::from_utf8_lossy(&reply.body);
    assert!(!text.contains("\"thinking\""), "the mock thought, so it was asked to: {text}");
    let reply = post(addr, "/v1/messages", &[], body("thinker")).await;
    assert!(String::from_utf8_lossy(&reply.body).contains("\"thinking\""), "a reasoning model thinks");
}

/// Claude Code's shape from an Anthropic caller: its betas reach Claude on
/// Bedrock in the body (the fake names the betas it got) and its system
/// message inside the conversation is carried to Opus 4.8, which the model
/// facts say takes both (the fake refuses a system message a model does
/// not take), with nothing reported; a
/// Gemini lane takes the system message's text in its system instruction
/// and says what moved and what it lost, as does an Anthropic lane whose
/// model takes no system message inside the conversation.
#[tokio::test]
async fn system_messages_and_betas_reach_every_lane_as_its_dialect_says_them() {
    let yaml = "providers:\n  aws: { protocol: bedrock, base_url: \"mock://\" }\n  \
                google: { protocol: gemini, base_url: \"mock://\" }\n  claude: { protocol: anthropic, base_url: \"mock://\" }\n\
                models:\n  bedrock-claude: { provider: aws, model: us.anthropic.claude-opus-4-8 }\n  \
                gemini: { provider: google, model: gemini-3-pro-preview }\n  sonnet: { provider: claude, model: claude-sonnet-4-5 }\n";
    let addr = gateway(yaml).await;
    let body = |model: &str| {
        serde_json::to_vec(&json!({"model": model, "max_tokens": 64, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "answer in french"}]}))
        .unwrap()
    };
    let betas = [("anthropic-beta", "context-management-2025-06-27,mid-conversation-tool-changes-2026-07-01")];
    let reply = post(addr, "/v1/messages", &betas, body("bedrock-claude")).await;
    let text = String::from_utf8_lossy(&reply.body).into_owned();
    assert_eq!(reply.status, 200, "{text}");
    assert!(reply.headers.get("x-switchyard-dropped").is_none(), "{:?}", reply.headers);
    assert!(
        text.contains("[anthropic-beta: context-management-2025-06-27,mid-conversation-tool-changes-2026-07-01]"),
        "{text}"
    );

    let reply = post(addr, "/v1/messages", &betas, body("gemini")).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.headers["x-switchyard-dropped"], "messages.system, anthropic-beta");
    let strict = [betas[0], ("x-switchyard-strict", "1")];
    let refused = post(addr, "/v1/messages", &strict, body("gemini")).await;
    assert_eq!(refused.status, 400);

    // Claude Sonnet 4.5 takes no system message inside the conversation:
    // an OpenAI caller's `developer` message after a turn joins its system
    // prompt, and the move is said.
    let openai = json!({"model": "sonnet", "messages": [
        {"role": "user", "content": "hi"}, {"role": "developer", "content": "answer in french"}]});
    let reply = post(addr, "/v1/chat/completions", &[], serde_json::to_vec(&openai).unwrap()).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.headers["x-switchyard-dropped"], "messages.system");
}
