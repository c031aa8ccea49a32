//! What a newcomer meets at the edges, over real TCP: a wrong method gets
//! an error in the route's own protocol, a body whose `stream` contradicts a
//! stream-by-endpoint route is refused as the vendor would, and a provider's
//! configured headers reach its upstream.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use common::{chat_body, gateway, get, ingress_path, post as post_to};
use http::StatusCode;
use switchyard_protocol::codec;
use switchyard_protocol::ir::Protocol;

const DEMO: &str = switchyard_config::DEMO_CONFIG;

#[tokio::test]
async fn a_wrong_method_is_answered_in_the_routes_protocol() {
    let addr = gateway(DEMO).await;
    for protocol in Protocol::ALL {
        let path = ingress_path(protocol, &format!("demo-{protocol}"), false);
        let reply = get(addr, &path).await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{protocol} {path}");
        assert_eq!(reply.headers["allow"], "POST", "{protocol}");
        // The protocol's own error reader finds the message: an SDK shows it.
        let error = codec(protocol).extract_error(405, &reply.body);
        assert!(error.message.contains("takes POST, not GET"), "{protocol}: {:?}", reply.body);
    }
    let reply = post_to(addr, "/v1/models", &[], "{}").await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(reply.headers["allow"], "GET");
    let body: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("takes GET"), "{body}");
    // The admin plane answers plain JSON.
    let admin = common::admin(addr);
    let reply = post_to(admin, "/stats", &[("authorization", &format!("Bearer {}", common::ADMIN_TOKEN))], "{}").await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
    let body: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert!(body["error"]["message"].is_string(), "{body}");
}

#[tokio::test]
async fn a_stream_flag_that_contradicts_the_endpoint_is_refused() {
    let addr = gateway(DEMO).await;
    let mut body: serde_json::Value = serde_json::from_str(&chat_body(Protocol::Bedrock, "", "hi", false)).unwrap();
    body["stream"] = serde_json::Value::Bool(true);
    let reply = post_to(addr, "/model/demo-bedrock/converse", &[], body.to_string()).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.headers["x-amzn-errortype"], "ValidationException");
    let error = codec(Protocol::Bedrock).extract_error(400, &reply.body);
    assert!(error.message.contains("converse-stream"), "{}", error.message);
    // Saying what the endpoint does anyway is fine.
    body["stream"] = serde_json::Value::Bool(true);
    let reply = post_to(addr, "/model/demo-bedrock/converse-stream", &[], body.to_string()).await;
    assert_eq!(reply.status, StatusCode::OK);

    let mut body: serde_json::Value = serde_json::from_str(&chat_body(Protocol::Gemini, "", "hi", false)).unwrap();
    body["stream"] = serde_json::Value::Bool(true);
    let reply = post_to(addr, "/v1beta/models/demo-gemini:generateContent", &[], body.to_string()).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let error = codec(Protocol::Gemini).extract_error(400, &reply.body);
    assert!(error.message.contains("streamGenerateContent"), "{}", error.message);
}

type Seen = Arc<Mutex<Vec<HeaderMap>>>;

async fn record(State(seen): State<Seen>, headers: HeaderMap) -> axum::response::Response {
    seen.lock().unwrap().push(headers);
    let body = serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    });
    axum::response::IntoResponse::into_response(axum::Json(body))
}

#[tokio::test]
async fn a_providers_headers_reach_its_upstream() {
    let seen: Seen = Arc::default();
    let upstream =
        common::spawn(axum::Router::new().route("/v1/chat/completions", post(record)).with_state(seen.clone())).await;
    let yaml = format!(
        "providers:\n  up:\n    protocol: openai\n    base_url: http://{upstream}\n    api_key: sk-test\n    headers:\n      OpenAI-Organization: org-42\n      User-Agent: my-team/1.0\nmodels:\n  gpt-4o-mini: {{ provider: up }}\n"
    );
    let addr = gateway(&yaml).await;
    let reply =
        post_to(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "gpt-4o-mini", "hi", false)).await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    let seen = seen.lock().unwrap();
    let headers = &seen[0];
    assert_eq!(headers["openai-organization"], "org-42");
    assert_eq!(headers["user-agent"], "my-team/1.0", "the operator's user agent replaces the gateway's");
    assert_eq!(headers["authorization"], "Bearer sk-test", "the credential is still the provider's");
    assert_eq!(headers.get_all("user-agent").iter().count(), 1);
}

/// The path grammars the protocol crates own, read by the gateway from
/// their tables: a Gemini target with no action or an unknown one is the
/// caller's 404 in Gemini's shape before anything is read, a Bedrock
/// `InvokeModel` body that says nothing it can do is Bedrock's 400, and an
/// OpenAI route that answers whole refuses `stream: true` without naming
/// another protocol's endpoints.
#[tokio::test]
async fn the_path_grammars_of_the_tables_refuse_in_their_protocol() {
    let addr = gateway(DEMO).await;
    let gemini = codec(Protocol::Gemini);
    for target in ["demo-gemini", "demo-gemini:deleteModel", "demo-gemini:", "a:b:c"] {
        for prefix in ["/v1beta/models/", "/v1/publishers/google/models/"] {
            // Not even JSON: the action is refused before the body is read.
            let reply = post_to(addr, &format!("{prefix}{target}"), &[], "\u{0}not json").await;
            assert_eq!(reply.status, StatusCode::NOT_FOUND, "{prefix}{target}");
            let error = gemini.extract_error(404, &reply.body);
            assert!(error.message.contains("action") || error.message.contains("names no action"), "{error:?}");
            assert!(reply.headers.contains_key("x-request-id"));
        }
    }
    let bedrock = codec(Protocol::Bedrock);
    for body in [r#"{"messages":[{"role":"user","content":[{"text":"hi"}]}]}"#, r#"{"query":"q"}"#, "[1,2]"] {
        let reply = post_to(addr, "/model/demo-bedrock/invoke", &[], body).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(reply.headers["x-amzn-errortype"], "ValidationException", "{body}");
        let error = bedrock.extract_error(400, &reply.body);
        assert!(error.message.contains("InvokeModel takes"), "{}", error.message);
    }
    let reply = post_to(addr, "/v1/moderations", &[], r#"{"model":"demo-openai","input":"hi","stream":true}"#).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let error = codec(Protocol::OpenAi).extract_error(400, &reply.body);
    assert!(error.message.contains("does not stream"), "{}", error.message);
    assert!(!error.message.contains("generateContent"), "{}", error.message);
}
