//! Callers who present an identity provider's token instead of a virtual
//! key (`auth.jwt`), against a fake identity provider on loopback that
//! publishes its keys as a JWKS and can rotate them. A token's signature,
//! issuer, audience, expiry and not-before are checked; its group claim
//! picks the group whose limits apply; its subject is the end user in the
//! ledger; a rotated key is learned without a restart; virtual keys keep
//! working beside tokens.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::Json;
use common::*;
use common::{identity_jwks as jwks, identity_key as key, unix_now as now};
use serde_json::{json, Value};
use switchyard_protocol::ir::Protocol;

const ISSUER: &str = "https://idp.acme.example";

/// A token signed with `kid` carrying `claims` over the defaults.
fn token(kid: &str, claims: Value) -> String {
    let mut all = json!({"iss": ISSUER, "aud": "switchyard", "sub": "svc-batch", "team": "research", "iat": now(), "exp": now() + 600});
    for (name, value) in claims.as_object().unwrap() {
        if value.is_null() {
            all.as_object_mut().unwrap().remove(name);
        } else {
            all[name] = value.clone();
        }
    }
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, &all, &key(kid)).unwrap()
}

#[derive(Clone)]
struct Idp {
    published: Arc<Mutex<Value>>,
    fetches: Arc<AtomicUsize>,
}

async fn published(State(idp): State<Idp>) -> Json<Value> {
    idp.fetches.fetch_add(1, Ordering::Relaxed);
    Json(idp.published.lock().unwrap().clone())
}

async fn identity_provider() -> (String, Idp) {
    let idp = Idp { published: Arc::new(Mutex::new(jwks("k1"))), fetches: Arc::default() };
    let router = axum::Router::new().route("/jwks", axum::routing::get(published)).with_state(idp.clone());
    let addr = spawn(router).await;
    (format!("http://{addr}/jwks"), idp)
}

fn config(jwks_url: &str) -> String {
    format!(
        "providers:\n  fake: {{ protocol: openai, base_url: \"mock://\" }}\nmodels:\n  m: {{ provider: fake }}\n\
         rate_card:\n  m: {{ input_utok: 1, output_utok: 2 }}\n\
         groups:\n  research: {{ budget: {{ usd: 100, window: 1d }} }}\n  capped: {{ limits: {{ rpm: 2 }} }}\n\
         governance: {{ ledger_flush_interval: 20ms }}\n\
         auth:\n  mode: keys\n  jwt:\n    - name: acme\n      issuer: \"{ISSUER}\"\n      jwks_url: \"{jwks_url}\"\n      \
         audience: [switchyard, switchyard-staging]\n      group_claim: team\n      leeway: 30s\n"
    )
}

async fn chat(addr: std::net::SocketAddr, bearer: &str) -> Reply {
    let auth = format!("Bearer {bearer}");
    post(addr, "/v1/chat/completions", &[("authorization", &auth)], chat_body(Protocol::OpenAi, "m", "hi", false)).await
}

fn refusal(reply: &Reply) -> String {
    let body: Value = serde_json::from_slice(&reply.body).unwrap_or_default();
    body["error"]["message"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_workload_token_is_admitted_as_its_group_with_its_subject_as_end_user() {
    let (jwks_url, _idp) = identity_provider().await;
    let (addr, _) = governed(&config(&jwks_url)).await;

    let served = chat(addr, &token("k1", json!({}))).await;
    assert_eq!(served.status, 200, "{}", String::from_utf8_lossy(&served.body));
    let rows = ledger_rows(addr, "key=jwt:acme:research", 1).await;
    assert_eq!(rows[0]["end_user"], "svc-batch", "{}", rows[0]);
    assert_eq!(rows[0]["group"], "research");

    // Another audience the issuer accepts, and a list-valued group claim.
    let other = token("k1", json!({"aud": "switchyard-staging", "team": ["sales", "research"]}));
    assert_eq!(chat(addr, &other).await.status, 200);

    // What a token cannot be.
    let cases = [
        (token("k1", json!({"exp": now() - 120})), "Expired"),
        (token("k1", json!({"aud": "someone-else"})), "Audience"),
        (token("k1", json!({"nbf": now() + 600})), "Immature"),
        (token("k1", json!({"iss": "https://evil.example"})), "not trusted"),
        (token("k1", json!({"team": "nobody"})), "does not have"),
        (token("k1", json!({"team": null})), "names no group"),
        (token("k1", json!({"exp": null})), "exp"),
        (token("k1", json!({"sub": null})), "must name its subject"),
    ];
    for (bad, why) in cases {
        let refused = chat(addr, &bad).await;
        assert_eq!(refused.status, 401, "{why}: {}", String::from_utf8_lossy(&refused.body));
        assert!(refusal(&refused).contains(why), "{why}: {}", refusal(&refused));
    }
    // A signature that does not verify: the payload swapped under a valid header and signature.
    let good = token("k1", json!({}));
    let forged_payload = token("k1", json!({"team": "capped"}));
    let parts: Vec<&str> = good.split('.').collect();
    let forged = format!("{}.{}.{}", parts[0], forged_payload.split('.').nth(1).unwrap(), parts[2]);
    let refused = chat(addr, &forged).await;
    assert_eq!(refused.status, 401);
    assert!(refusal(&refused).contains("InvalidSignature"), "{}", refusal(&refused));
    // A shared-secret token is never accepted, whatever it says.
    let hs = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"iss": ISSUER, "aud": "switchyard", "team": "research", "exp": now() + 600}),
        &jsonwebtoken::EncodingKey::from_secret(b"guessable"),
    )
    .unwrap();
    assert!(refusal(&chat(addr, &hs).await).contains("not accepted"));

    // A virtual key works beside tokens, as before.
    let virtual_key = create_key(addr, json!({"name": "classic"})).await;
    assert_eq!(chat(addr, virtual_key["key"].as_str().unwrap()).await.status, 200);
}

#[tokio::test]
async fn a_token_caller_draws_on_its_groups_limits() {
    let (jwks_url, _idp) = identity_provider().await;
    let (addr, _) = governed(&config(&jwks_url)).await;
    let capped = token("k1", json!({"team": "capped", "sub": "svc-a"}));
    assert_eq!(chat(addr, &capped).await.status, 200);
    assert_eq!(chat(addr, &capped).await.status, 200);
    // The group's two a minute are spent, by any of its workloads.
    let other = token("k1", json!({"team": "capped", "sub": "svc-b"}));
    assert_eq!(chat(addr, &other).await.status, 429);
}

#[tokio::test]
async fn a_rotated_signing_key_is_learned_without_a_restart() {
    let (jwks_url, idp) = identity_provider().await;
    let (addr, _) = governed(&config(&jwks_url)).await;
    assert_eq!(chat(addr, &token("k1", json!({}))).await.status, 200);
    let fetched = idp.fetches.load(Ordering::Relaxed);

    // The identity provider rotates to k2.
    *idp.published.lock().unwrap() = jwks("k2");
    let rotated = token("k2", json!({"sub": "svc-new"}));
    let first = chat(addr, &rotated).await;
    assert_eq!(first.status, 401);
    assert!(refusal(&first).contains("has not published"), "{}", refusal(&first));
    // The unknown key id fetches the keys again (at most every 5 s).
    let mut served = false;
    for _ in 0..80 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if chat(addr, &rotated).await.status == 200 {
            served = true;
            break;
        }
    }
    assert!(served, "the rotated key was never learned");
    assert!(idp.fetches.load(Ordering::Relaxed) > fetched);
    // A flood of made-up key ids costs the identity provider next to nothing.
    let before = idp.fetches.load(Ordering::Relaxed);
    for i in 0..20 {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(format!("made-up-{i}"));
        let claims = json!({"iss": ISSUER, "aud": "switchyard", "team": "research", "exp": now() + 600});
        let made_up = jsonwebtoken::encode(&header, &claims, &key("k2")).unwrap();
        assert_eq!(chat(addr, &made_up).await.status, 401);
    }
    assert!(idp.fetches.load(Ordering::Relaxed) <= before + 1);
}

/// A gateway whose `research` group's workloads keep files, batches,
/// stored responses, cached replies and call signatures; its batch worker
/// runs.
async fn workloads_gateway(jwks_url: &str) -> std::net::SocketAddr {
    let yaml = format!(
        "providers:\n  fake: {{ protocol: openai, base_url: \"mock://\" }}\n  resp: {{ protocol: responses, base_url: \"mock://\" }}\n  \
         g: {{ protocol: gemini, base_url: \"mock://\" }}\n\
         models:\n  m: {{ provider: fake }}\n  r: {{ provider: resp }}\n  flash: {{ provider: g, model: gemini-3-flash }}\n\
         pools:\n  cached: {{ cache: {{ ttl: 5m }}, members: [{{ model: m }}] }}\n\
         rate_card:\n  m: {{ input_utok: 1, output_utok: 2 }}\n  r: {{ input_utok: 1, output_utok: 2 }}\n  flash: {{ input_utok: 1, output_utok: 2 }}\n\
         groups:\n  research: {{ end_users: {{ limits: {{ rpm: 1000 }} }} }}\n\
         governance: {{ ledger_flush_interval: 20ms }}\n\
         auth:\n  mode: keys\n  jwt:\n    - name: acme\n      issuer: \"{ISSUER}\"\n      jwks_url: \"{jwks_url}\"\n      \
         audience: [switchyard]\n      group_claim: team\n"
    );
    let (addr, gateway) = governed(&yaml).await;
    let data = switchyard_gateway::server::LiveRouter::new(switchyard_gateway::router(gateway.clone()));
    switchyard_gateway::batches::start(&gateway, data);
    addr
}

/// Uploads a batch file of one chat line as `auth`: its id.
async fn upload(addr: std::net::SocketAddr, auth: &str) -> String {
    let boundary = "switchyardboundary";
    let line = json!({"custom_id": "one", "method": "POST", "url": "/v1/chat/completions",
        "body": {"model": "m", "max_tokens": 20, "messages": [{"role": "user", "content": "from a batch"}]}});
    let form = format!(
        "--{boundary}\r\ncontent-disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--{boundary}\r\n\
         content-disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\ncontent-type: application/jsonl\r\n\r\n\
         {line}\r\n--{boundary}--\r\n"
    );
    let content_type = format!("multipart/form-data; boundary={boundary}");
    let file = post(addr, "/v1/files", &[("authorization", auth), ("content-type", &content_type)], form).await;
    assert_eq!(file.status, 200, "{}", String::from_utf8_lossy(&file.body));
    serde_json::from_slice::<Value>(&file.body).unwrap()["id"].as_str().unwrap().to_owned()
}

/// A chat as `auth` on `pool`: its status and `x-switchyard-cache`.
async fn cached_chat(addr: std::net::SocketAddr, auth: &str) -> (u16, String) {
    let reply = post(
        addr,
        "/v1/chat/completions",
        &[("authorization", auth)],
        chat_body(Protocol::OpenAi, "cached", "same question", false),
    )
    .await;
    let cache = reply.headers.get("x-switchyard-cache").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    (reply.status.as_u16(), cache)
}

#[tokio::test]
async fn workloads_of_one_group_never_read_each_others_files_conversations_cache_or_signatures() {
    let (jwks_url, _idp) = identity_provider().await;
    let addr = workloads_gateway(&jwks_url).await;
    let a = format!("Bearer {}", token("k1", json!({"sub": "svc-a"})));
    let b = format!("Bearer {}", token("k1", json!({"sub": "svc-b"})));
    let status = |reply: Reply| reply.status.as_u16();

    // Files: A's upload is A's alone.
    let file = upload(addr, &a).await;
    assert_eq!(status(get_with(addr, &format!("/v1/files/{file}"), &[("authorization", &a)]).await), 200);
    for path in [format!("/v1/files/{file}"), format!("/v1/files/{file}/content")] {
        assert_eq!(status(get_with(addr, &path, &[("authorization", &b)]).await), 404, "{path}");
    }
    let listed: Value =
        serde_json::from_slice(&get_with(addr, "/v1/files", &[("authorization", &b)]).await.body).unwrap();
    assert_eq!(listed["data"], json!([]), "{listed}");

    // Batches: B cannot start one from A's file nor read A's; A's runs as A.
    let batch = json!({"input_file_id": file, "endpoint": "/v1/chat/completions", "completion_window": "24h"});
    assert_eq!(status(post(addr, "/v1/batches", &[("authorization", &b)], batch.to_string()).await), 404);
    let started = post(addr, "/v1/batches", &[("authorization", &a)], batch.to_string()).await;
    assert_eq!(started.status, 200, "{}", String::from_utf8_lossy(&started.body));
    let id = serde_json::from_slice::<Value>(&started.body).unwrap()["id"].as_str().unwrap().to_owned();
    assert_eq!(status(get_with(addr, &format!("/v1/batches/{id}"), &[("authorization", &b)]).await), 404);
    let mut done = Value::Null;
    for _ in 0..200 {
        done =
            serde_json::from_slice(&get_with(addr, &format!("/v1/batches/{id}"), &[("authorization", &a)]).await.body)
                .unwrap();
        if done["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        (done["status"].as_str(), done["request_counts"]["completed"].as_u64()),
        (Some("completed"), Some(1)),
        "{done}"
    );
    let rows = ledger_rows(addr, "key=jwt:acme:research", 1).await;
    assert!(
        rows.iter()
            .any(|r| r["end_user"] == "svc-a" && r["request_id"].as_str().is_some_and(|id| id.contains("batch"))),
        "{rows:?}"
    );

    // Stored responses: A's conversation is A's alone.
    let kept = post(
        addr,
        "/v1/responses",
        &[("authorization", &a)],
        json!({"model": "r", "input": "remember 42", "store": true}).to_string(),
    )
    .await;
    assert_eq!(kept.status, 200, "{}", String::from_utf8_lossy(&kept.body));
    let response = serde_json::from_slice::<Value>(&kept.body).unwrap()["id"].as_str().unwrap().to_owned();
    let mut found = false;
    for _ in 0..100 {
        if status(get_with(addr, &format!("/v1/responses/{response}"), &[("authorization", &a)]).await) == 200 {
            found = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(found, "A's response was never kept");
    assert_eq!(status(get_with(addr, &format!("/v1/responses/{response}"), &[("authorization", &b)]).await), 404);
    let continued = json!({"model": "r", "input": "what was it?", "previous_response_id": response});
    let reply = post(addr, "/v1/responses", &[("authorization", &b)], continued.to_string()).await;
    assert!(reply.status.is_client_error(), "B continued A's conversation: {}", String::from_utf8_lossy(&reply.body));

    // The response cache: A's answer is never B's hit.
    assert_eq!(cached_chat(addr, &a).await, (200, "miss".to_owned()));
    assert_eq!(cached_chat(addr, &b).await, (200, "miss".to_owned()), "B was answered from A's cache");
    assert_eq!(cached_chat(addr, &a).await, (200, "hit".to_owned()));

    // Call signatures: a Gemini lane's signature of A's call is restored for A only.
    let tools = json!([{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]);
    let ask = json!({"role": "user", "content": "look it up"});
    let first = json!({"model": "flash", "messages": [ask], "tools": tools, "stream": true});
    let reply = post(addr, "/v1/chat/completions", &[("authorization", &a)], first.to_string()).await;
    assert_eq!(reply.status, 200);
    let text = String::from_utf8_lossy(&reply.body).into_owned();
    let call = format!("call_{}", text.split("\"id\":\"call_").nth(1).and_then(|rest| rest.split('"').next()).unwrap());
    let turn = json!({"model": "flash", "tools": tools, "messages": [ask,
        {"role": "assistant", "content": null, "tool_calls": [{"id": call, "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"mock\"}"}}]},
        {"role": "tool", "tool_call_id": call, "content": "found"}]});
    let as_b = post(addr, "/v1/chat/completions", &[("authorization", &b)], turn.to_string()).await;
    assert!(
        String::from_utf8_lossy(&as_b.body).contains("(unsigned)"),
        "B got A's signature: {}",
        String::from_utf8_lossy(&as_b.body)
    );
    let as_a = post(addr, "/v1/chat/completions", &[("authorization", &a)], turn.to_string()).await;
    assert!(String::from_utf8_lossy(&as_a.body).contains("(signed)"), "{}", String::from_utf8_lossy(&as_a.body));
}

#[tokio::test]
async fn a_token_callers_end_user_is_its_subject_whatever_the_request_names() {
    let (jwks_url, _idp) = identity_provider().await;
    let yaml = config(&jwks_url).replace(
        "  capped: { limits: { rpm: 2 } }\n",
        "  capped: { limits: { rpm: 2 } }\n  per-workload: { end_users: { limits: { rpm: 2 } } }\n",
    );
    let (addr, _) = governed(&yaml).await;
    let a = format!("Bearer {}", token("k1", json!({"team": "per-workload", "sub": "svc-a"})));
    let named =
        |user: &str| json!({"model": "m", "user": user, "messages": [{"role": "user", "content": "hi"}]}).to_string();
    assert_eq!(post(addr, "/v1/chat/completions", &[("authorization", &a)], named("u1")).await.status, 200);
    assert_eq!(post(addr, "/v1/chat/completions", &[("authorization", &a)], named("u2")).await.status, 200);
    // Past its two a minute: a fresh `user`, another workload's subject, or the header changes nothing.
    for (user, header) in [("u3", None), ("svc-b", None), ("u4", Some("svc-c"))] {
        let mut headers = vec![("authorization", a.as_str())];
        if let Some(header) = header {
            headers.push(("x-switchyard-user", header));
        }
        let reply = post(addr, "/v1/chat/completions", &headers, named(user)).await;
        assert_eq!(reply.status, 429, "as {user}: {}", String::from_utf8_lossy(&reply.body));
    }
    // Another workload has its own two.
    let b = format!("Bearer {}", token("k1", json!({"team": "per-workload", "sub": "svc-b"})));
    assert_eq!(post(addr, "/v1/chat/completions", &[("authorization", &b)], named("u1")).await.status, 200);
    let rows = ledger_rows(addr, "key=jwt:acme:per-workload", 3).await;
    assert!(rows.iter().all(|r| r["end_user"] == "svc-a" || r["end_user"] == "svc-b"), "{rows:?}");
}

#[test]
fn check_names_what_an_issuer_lacks() {
    let no_env = |_: &str| None;
    let problems = |yaml: &str| -> Vec<String> {
        match switchyard_config::load(yaml, &no_env) {
            Ok(_) => Vec::new(),
            Err(err) => err.0.iter().map(|issue| format!("{}: {}", issue.path, issue.message)).collect(),
        }
    };
    let got = problems(
        "auth:\n  jwt:\n    - { name: a, issuer: x, jwks_url: \"https://169.254.169.254/jwks\", audience: [], group_claim: team, leeway: 1h }\n",
    );
    for wanted in ["auth.jwt: ", "auth.jwt[0].jwks_url", "auth.jwt[0].audience", "auth.jwt[0].leeway"] {
        assert!(got.iter().any(|p| p.starts_with(wanted)), "{wanted} in {got:?}");
    }
}

#[tokio::test]
async fn a_token_caller_has_its_issuers_mcp_grants_and_no_more() {
    use crate::mcp::{code, McpClient, FORBIDDEN};
    let upstream = mock_upstream().await;
    let servers = format!("mcp:\n  servers:\n    mock: {{ url: \"http://{upstream}/mcp\" }}\n");
    let (jwks_url, _idp) = identity_provider().await;
    let granted = config(&jwks_url).replace("leeway: 30s\n", "leeway: 30s\n      mcp: [mock__echo]\n") + &servers;
    let (addr, _) = governed(&granted).await;
    let mut client = McpClient::open(addr, Some(&token("k1", json!({})))).await.unwrap();
    assert_eq!(client.names("tools/list", "tools", "name").await, ["mock__echo"]);
    let deleted = client.request("tools/call", json!({"name": "mock__delete_everything", "arguments": {}})).await;
    assert_eq!(code(&deleted), FORBIDDEN, "{deleted}");

    // An issuer without `mcp`: its callers reach nothing.
    let (addr, _) = governed(&(config(&jwks_url) + &servers)).await;
    let mut client = McpClient::open(addr, Some(&token("k1", json!({})))).await.unwrap();
    assert!(client.names("tools/list", "tools", "name").await.is_empty());
    let deleted = client.request("tools/call", json!({"name": "mock__delete_everything", "arguments": {}})).await;
    assert_eq!(code(&deleted), FORBIDDEN, "{deleted}");
}
