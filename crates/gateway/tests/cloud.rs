//! Clouds reached as config rows: Gemini and Claude on Vertex AI with a
//! Google service account (an RS256 assertion exchanged for an access
//! token, RFC 7523), Azure OpenAI with Entra ID client credentials, each
//! through its provider's path template. A fake token endpoint on loopback
//! checks every assertion's signature with the key pair's public half and
//! counts the exchanges; a fake cloud checks the path, the bearer and the
//! body it was sent.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use std::sync::{Arc, Mutex};

use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use common::*;
use serde_json::{json, Value};
use switchyard_protocol::ir::Protocol;

const PRIVATE_KEY: &str = include_str!("fixtures/cloud/service-account-test-key.pem");
const PUBLIC_KEY: &str = include_str!("fixtures/cloud/service-account-test-key.pub.pem");
const ACCOUNT: &str = "switchyard-test@acme-prod.iam.gserviceaccount.com";

/// What the fakes saw.
#[derive(Default)]
struct Seen {
    /// Token exchanges answered.
    exchanges: usize,
    /// Exchanges refused (a bad assertion or secret).
    refused: Vec<String>,
    /// Cloud calls: path and query, `Authorization`, body.
    calls: Vec<(String, String, Value)>,
    /// The same calls as sent: headers and the body's bytes.
    sent: Vec<(HeaderMap, bytes::Bytes)>,
}

#[derive(Clone)]
struct Fake {
    seen: Arc<Mutex<Seen>>,
    token_url: Arc<str>,
    /// Token endpoint answers 401 to everything.
    deny: bool,
}

async fn token(State(fake): State<Fake>, Form(form): Form<Vec<(String, String)>>) -> Response {
    let field = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).unwrap_or_default();
    let mut seen = fake.seen.lock().unwrap();
    let refuse = |seen: &mut Seen, why: String| {
        seen.refused.push(why.clone());
        (StatusCode::UNAUTHORIZED, Json(json!({"error": "invalid_grant", "error_description": why}))).into_response()
    };
    if fake.deny {
        return refuse(&mut seen, "denied".into());
    }
    match field("grant_type").as_str() {
        "urn:ietf:params:oauth:grant-type:jwt-bearer" => {
            let key = jsonwebtoken::DecodingKey::from_rsa_pem(PUBLIC_KEY.as_bytes()).unwrap();
            let mut rules = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
            rules.set_audience(&[&*fake.token_url]);
            rules.set_issuer(&[ACCOUNT]);
            match jsonwebtoken::decode::<Value>(&field("assertion"), &key, &rules) {
                Ok(claims) if claims.claims["scope"] == "https://www.googleapis.com/auth/cloud-platform" => {}
                Ok(claims) => return refuse(&mut seen, format!("scope: {}", claims.claims)),
                Err(err) => return refuse(&mut seen, format!("assertion: {err}")),
            }
        }
        "client_credentials" => {
            let wanted = [
                ("client_id", "switchyard-app"),
                ("client_secret", "entra-secret-0123456789"),
                ("scope", "https://cognitiveservices.azure.com/.default"),
            ];
            if let Some((name, _)) = wanted.iter().find(|(name, value)| field(name) != *value) {
                return refuse(&mut seen, format!("{name}: {}", field(name)));
            }
        }
        other => return refuse(&mut seen, format!("grant_type {other}")),
    }
    seen.exchanges += 1;
    let token = format!("cloud-token-{}", seen.exchanges);
    Json(json!({"access_token": token, "expires_in": 3599, "token_type": "Bearer"})).into_response()
}

/// Vertex AI's publisher models: Gemini's `generateContent` and
/// `streamGenerateContent`, Claude's `rawPredict`.
async fn vertex(State(fake): State<Fake>, uri: Uri, headers: HeaderMap, raw: bytes::Bytes) -> Response {
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let path = uri.path_and_query().map(ToString::to_string).unwrap_or_default();
    let body: Value = serde_json::from_slice(&raw).unwrap_or_default();
    {
        let mut seen = fake.seen.lock().unwrap();
        seen.calls.push((path.clone(), bearer.clone(), body));
        seen.sent.push((headers.clone(), raw));
    }
    if !bearer.starts_with("Bearer cloud-token-") {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": {"code": 401, "message": "no token", "status": "UNAUTHENTICATED"}})),
        )
            .into_response();
    }
    if path.ends_with(":rawPredict") {
        return Json(json!({
            "id": "msg_vrtx_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "hello from Claude on Vertex"}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 7, "output_tokens": 5}
        }))
        .into_response();
    }
    let reply = json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "hello from Gemini on Vertex"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 6, "candidatesTokenCount": 5, "totalTokenCount": 11},
        "modelVersion": "gemini-2.0-flash"
    });
    if path.contains(":streamGenerateContent") {
        let sse = format!("data: {reply}\r\n\r\n");
        return ([("content-type", "text/event-stream")], sse).into_response();
    }
    Json(reply).into_response()
}

/// Azure OpenAI's deployments.
async fn azure(
    State(fake): State<Fake>,
    Path(deployment): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    raw: bytes::Bytes,
) -> Response {
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let path = uri.path_and_query().map(ToString::to_string).unwrap_or_default();
    let body: Value = serde_json::from_slice(&raw).unwrap_or_default();
    {
        let mut seen = fake.seen.lock().unwrap();
        seen.calls.push((path, bearer.clone(), body));
        seen.sent.push((headers.clone(), raw));
    }
    if !bearer.starts_with("Bearer cloud-token-") {
        return (StatusCode::UNAUTHORIZED, Json(json!({"error": {"code": "401", "message": "Access denied"}})))
            .into_response();
    }
    Json(json!({
        "id": "chatcmpl-azure", "object": "chat.completion", "created": 1, "model": deployment,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello from Azure"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 6, "completion_tokens": 3, "total_tokens": 9}
    }))
    .into_response()
}

/// The fakes on one loopback port; `deny`: its token endpoint refuses.
async fn clouds(deny: bool) -> (std::net::SocketAddr, Arc<Mutex<Seen>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let fake = Fake { seen: seen.clone(), token_url: Arc::from(format!("http://{addr}/token")), deny };
    let router = Router::new()
        .route("/token", axum::routing::post(token))
        .route(
            "/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{call}",
            axum::routing::post(vertex),
        )
        .route("/openai/deployments/{deployment}/chat/completions", axum::routing::post(azure))
        .with_state(fake);
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (addr, seen)
}

/// A service account key file whose token endpoint is the fake's.
fn key_file(addr: std::net::SocketAddr) -> std::path::PathBuf {
    let file = std::env::temp_dir().join(format!("switchyard-sa-{}-{}.json", std::process::id(), fastrand::u32(..)));
    let key = json!({
        "type": "service_account", "project_id": "acme-prod", "private_key_id": "k1",
        "private_key": PRIVATE_KEY, "client_email": ACCOUNT, "token_uri": format!("http://{addr}/token"),
    });
    std::fs::write(&file, key.to_string()).unwrap();
    file
}

fn vertex_config(addr: std::net::SocketAddr) -> String {
    let file = key_file(addr);
    format!(
        "providers:\n  \
         vertex:\n    protocol: gemini\n    base_url: \"http://{addr}\"\n    location: us-central1\n    \
         auth: {{ google_service_account: \"{file}\" }}\n    \
         path: \"/v1/projects/{{project}}/locations/{{location}}/publishers/google/models/{{model}}:{{action}}\"\n  \
         vertex-claude:\n    protocol: anthropic\n    base_url: \"http://{addr}\"\n    location: us-central1\n    \
         anthropic_version: vertex-2023-10-16\n    auth: {{ google_service_account: \"{file}\" }}\n    \
         path: \"/v1/projects/{{project}}/locations/{{location}}/publishers/anthropic/models/{{model}}:{{action}}\"\n\
         models:\n  gemini: {{ provider: vertex, model: gemini-2.0-flash }}\n  \
         claude: {{ provider: vertex-claude, model: \"claude-sonnet-4-5@20250929\" }}\n",
        file = file.display()
    )
}

#[tokio::test]
async fn gemini_and_claude_on_vertex_with_a_service_account() {
    let (cloud, seen) = clouds(false).await;
    let addr = gateway(&vertex_config(cloud)).await;

    // An OpenAI caller to Gemini on Vertex, answered and streamed.
    for stream in [false, true] {
        let reply = post(
            addr,
            &ingress_path(Protocol::OpenAi, "gemini", stream),
            &[],
            chat_body(Protocol::OpenAi, "gemini", "hi", stream),
        )
        .await;
        assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
        assert!(text_of(&decode(Protocol::OpenAi, stream, &reply.body)).contains("Gemini on Vertex"));
    }
    // An Anthropic caller to Claude on Vertex.
    let reply = post(
        addr,
        &ingress_path(Protocol::Anthropic, "claude", false),
        &[],
        chat_body(Protocol::Anthropic, "claude", "hi", false),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert!(text_of(&decode(Protocol::Anthropic, false, &reply.body)).contains("Claude on Vertex"));

    let seen = seen.lock().unwrap();
    assert!(seen.refused.is_empty(), "{:?}", seen.refused);
    // One exchange per provider: the token is kept, not fetched per call.
    assert_eq!(seen.exchanges, 2, "{:?}", seen.calls);
    let paths: Vec<&str> = seen.calls.iter().map(|(path, _, _)| path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/v1/projects/acme-prod/locations/us-central1/publishers/google/models/gemini-2.0-flash:generateContent",
            "/v1/projects/acme-prod/locations/us-central1/publishers/google/models/gemini-2.0-flash:streamGenerateContent?alt=sse",
            "/v1/projects/acme-prod/locations/us-central1/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict",
        ]
    );
    assert!(seen.calls.iter().all(|(_, bearer, _)| bearer.starts_with("Bearer cloud-token-")));
    // Claude's body: the version in it, the model in the path only.
    let claude = &seen.calls[2].2;
    assert_eq!(claude["anthropic_version"], "vertex-2023-10-16", "{claude}");
    assert!(claude.get("model").is_none(), "{claude}");
    assert!(seen.calls[0].2.get("anthropic_version").is_none());

    // Byte for byte: each body as the vendors' references write it, the
    // headers a bearer call carries and none of another auth scheme.
    let recorded =
        |name: &str| std::fs::read(format!("{}/tests/fixtures/cloud/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let gemini = recorded("vertex-gemini-generate-content.json");
    let claude = recorded("vertex-claude-raw-predict.json");
    let trim = |bytes: &[u8]| bytes.trim_ascii().to_vec();
    assert_eq!(seen.sent.len(), 3);
    assert_eq!(trim(&seen.sent[0].1), trim(&gemini), "{}", String::from_utf8_lossy(&seen.sent[0].1));
    assert_eq!(trim(&seen.sent[1].1), trim(&gemini), "the stream asks the same, at streamGenerateContent");
    assert_eq!(trim(&seen.sent[2].1), trim(&claude), "{}", String::from_utf8_lossy(&seen.sent[2].1));
    for (headers, _) in &seen.sent {
        assert_eq!(headers["content-type"], "application/json");
        assert!(headers["authorization"].to_str().unwrap().starts_with("Bearer cloud-token-"));
        for foreign in ["x-goog-api-key", "x-api-key", "api-key"] {
            assert!(headers.get(foreign).is_none(), "{foreign} sent beside the bearer: {headers:?}");
        }
    }
}

#[tokio::test]
async fn azure_openai_with_entra_client_credentials_fetches_once_for_many() {
    let (cloud, seen) = clouds(false).await;
    let yaml = format!(
        "providers:\n  azure:\n    protocol: openai\n    base_url: \"http://{cloud}/openai\"\n    \
         auth: {{ oauth_client_credentials: {{ token_url: \"http://{cloud}/token\", client_id: switchyard-app, \
         client_secret: entra-secret-0123456789, scope: \"https://cognitiveservices.azure.com/.default\" }} }}\n    \
         path: \"/deployments/{{model}}/{{action}}?api-version=2024-10-21\"\n\
         models:\n  gpt: {{ provider: azure, model: gpt-4o-prod }}\n"
    );
    let addr = gateway(&yaml).await;
    // Eight at once: one exchange, the others wait for it.
    let calls =
        (0..8).map(|_| post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "gpt", "hi", false)));
    for reply in futures_util::future::join_all(calls).await {
        assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
        assert!(text_of(&decode(Protocol::OpenAi, false, &reply.body)).contains("Azure"));
    }
    let seen = seen.lock().unwrap();
    assert!(seen.refused.is_empty(), "{:?}", seen.refused);
    assert_eq!(seen.exchanges, 1);
    assert_eq!(seen.calls.len(), 8);
    assert!(seen.calls.iter().all(|(path, bearer, _)| {
        path == "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21"
            && bearer == "Bearer cloud-token-1"
    }));
    // Byte for byte: the body Azure's reference shows (the deployment in
    // the path names the model; the body carries the wire model as the
    // SDKs send it), and no api-key beside the bearer.
    let recorded =
        std::fs::read(format!("{}/tests/fixtures/cloud/azure-chat-completions.json", env!("CARGO_MANIFEST_DIR")))
            .unwrap();
    assert_eq!(seen.sent.len(), 8);
    for (headers, body) in &seen.sent {
        assert_eq!(body.trim_ascii(), recorded.trim_ascii(), "{}", String::from_utf8_lossy(body));
        assert_eq!(headers["content-type"], "application/json");
        assert!(headers.get("api-key").is_none(), "an Entra call carries no api-key: {headers:?}");
    }
}

#[tokio::test]
async fn a_refused_token_exchange_fails_the_lane_and_never_reaches_the_cloud() {
    let (cloud, seen) = clouds(true).await;
    let addr = gateway(&vertex_config(cloud)).await;
    let reply = post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "gemini", "hi", false)).await;
    assert!(reply.status.is_server_error(), "{} {}", reply.status, String::from_utf8_lossy(&reply.body));
    let seen = seen.lock().unwrap();
    assert!(!seen.refused.is_empty());
    assert!(seen.calls.is_empty(), "nothing is sent without a token");
}

#[tokio::test]
async fn a_failed_token_fetch_tells_the_caller_nothing_of_the_token_url() {
    let (cloud, seen) = clouds(true).await;
    // A token URL whose query carries what a caller must never see.
    let yaml = format!(
        "providers:\n  azure:\n    protocol: openai\n    base_url: \"http://{cloud}/openai\"\n    \
         auth: {{ oauth_client_credentials: {{ token_url: \"http://{cloud}/token?tenant=acme-internal&sig=url-secret-42\", \
         client_id: switchyard-app, client_secret: entra-secret-0123456789 }} }}\n\
         models:\n  gpt: {{ provider: azure, model: gpt-4o-prod }}\n"
    );
    let addr = gateway(&yaml).await;
    for stream in [false, true] {
        let reply = post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "gpt", "hi", stream)).await;
        assert!(reply.status.is_server_error(), "{} {}", reply.status, String::from_utf8_lossy(&reply.body));
        let body = String::from_utf8_lossy(&reply.body);
        for secret in ["url-secret-42", "acme-internal", "/token", &cloud.to_string(), "127.0.0.1"] {
            assert!(!body.contains(secret), "the caller was told `{secret}`: {body}");
        }
        assert!(body.contains("token"), "the caller is told a token could not be had: {body}");
    }
    assert!(!seen.lock().unwrap().refused.is_empty(), "the endpoint was asked");
}

#[test]
fn check_names_what_a_cloud_row_lacks() {
    let no_env = |_: &str| None;
    let problems = |yaml: &str| -> Vec<String> {
        match switchyard_config::load(yaml, &no_env) {
            Ok(_) => Vec::new(),
            Err(err) => {
                err.0.iter().map(|issue| format!("{}: {} ({})", issue.path, issue.message, issue.fix)).collect()
            }
        }
    };
    // No project anywhere: the template says which placeholder and how to fix it.
    let got = problems(
        "providers:\n  v: { protocol: gemini, base_url: \"https://us-central1-aiplatform.googleapis.com\", api_key: k, \
         path: \"/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:{action}\" }\n",
    );
    assert!(got.iter().any(|p| p.starts_with("providers.v.path") && p.contains("{project}")), "{got:?}");
    // A key file that is not there.
    let got = problems("providers:\n  v: { protocol: gemini, base_url: \"https://x.example\", auth: { google_service_account: /nonexistent/sa.json } }\n");
    assert!(
        got.iter().any(|p| p.starts_with("providers.v.auth.google_service_account") && p.contains("cannot be read")),
        "{got:?}"
    );
    // A token endpoint inside the network.
    let got = problems(
        "providers:\n  a: { protocol: openai, base_url: \"https://x.example\", auth: { oauth_client_credentials: \
         { token_url: \"https://169.254.169.254/token\", client_id: a, client_secret: b } } }\n",
    );
    assert!(got.iter().any(|p| p.contains("token_url") && p.contains("metadata")), "{got:?}");
    // A static key and a fetched one together.
    let got = problems(
        "providers:\n  a: { protocol: openai, base_url: \"https://x.example\", api_key: k, auth: { oauth_client_credentials: \
         { token_url: \"https://login.example/token\", client_id: a, client_secret: b } } }\n",
    );
    assert!(got.iter().any(|p| p.starts_with("providers.a.auth") && p.contains("both")), "{got:?}");
}
