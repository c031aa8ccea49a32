//! Governance over real TCP: virtual keys presented the way each SDK does,
//! their lifecycle (expiry, revocation, rotation, idempotent creation),
//! pool allow-lists, budgets under concurrency, rate limits, the ledger and
//! derived spend, streams metered, SigV4 for Bedrock callers, admin scopes
//! and the audit log, and SQLite across a restart.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use std::time::{Duration, SystemTime};

use common::*;
use serde_json::json;
use switchyard_protocol::codec;
use switchyard_protocol::ir::{ErrorKind, Protocol};

/// Lanes for every protocol on the fake, priced, with keys required.
fn governed_config(extra: &str) -> String {
    let mut yaml = lanes_config("mock://");
    yaml.push_str("rate_card:\n");
    for p in Protocol::ALL {
        yaml.push_str(&format!("  lane-{p}: {{ input_utok: 1000, output_utok: 2000 }}\n"));
    }
    yaml.push_str("auth: { mode: keys }\ngovernance: { ledger_flush_interval: 20ms }\n");
    yaml.push_str(extra);
    yaml
}

/// The headers a caller of `protocol` sends its key in (and the query, for Gemini's `?key=`).
fn carrier(protocol: Protocol, key: &str) -> Vec<(&'static str, String)> {
    match protocol {
        Protocol::Anthropic => vec![("x-api-key", key.to_owned())],
        Protocol::Gemini => vec![("x-goog-api-key", key.to_owned())],
        _ => vec![("authorization", format!("Bearer {key}"))],
    }
}

async fn call(addr: std::net::SocketAddr, protocol: Protocol, model: &str, key: Option<&str>) -> Reply {
    let headers = key.map(|k| carrier(protocol, k)).unwrap_or_default();
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    post(addr, &ingress_path(protocol, model, false), &headers, chat_body(protocol, model, "hi", false)).await
}

fn kind(protocol: Protocol, reply: &Reply) -> ErrorKind {
    codec(protocol).extract_error(reply.status.as_u16(), &reply.body).kind
}

/// A keyless request is told, in its own protocol, the header its SDK
/// sends a key in; and a key sent where its protocol's table says (as the
/// console's playground sends it) is read there.
#[tokio::test]
async fn a_keyless_caller_is_told_where_its_sdk_sends_a_key() {
    let (addr, _) = governed(&governed_config("")).await;
    let key = create_key(addr, json!({"name": "hint"})).await;
    let secret = key["key"].as_str().unwrap();
    for protocol in Protocol::ALL {
        let told = match protocol {
            Protocol::Anthropic => "send your Switchyard key as x-api-key",
            Protocol::Gemini => "send your Switchyard key as x-goog-api-key (or ?key=)",
            Protocol::Bedrock => "send your Switchyard key as Authorization: Bearer (as a Bedrock API key), or a SigV4",
            Protocol::OpenAi | Protocol::Responses | Protocol::Cohere => {
                "send your Switchyard key as Authorization: Bearer"
            }
        };
        let reply = call(addr, protocol, "lane-openai", None).await;
        // AWS answers a missing credential 403.
        let status = if protocol == Protocol::Bedrock { 403 } else { 401 };
        assert_eq!(reply.status, status, "{protocol}");
        assert_eq!(kind(protocol, &reply), ErrorKind::Authentication, "{protocol}");
        let body = String::from_utf8_lossy(&reply.body);
        assert!(body.contains(told), "{protocol}: {body}");

        let table = codec(protocol).ingress().key;
        let value = if table.is_bearer() { format!("Bearer {secret}") } else { secret.to_owned() };
        let path = ingress_path(protocol, "lane-openai", false);
        let reply = post(addr, &path, &[(table.header, &value)], chat_body(protocol, "lane-openai", "hi", false)).await;
        assert_eq!(reply.status, 200, "{protocol}: {}", String::from_utf8_lossy(&reply.body));
    }
}

#[tokio::test]
async fn each_caller_presents_its_key_the_way_its_sdk_does() {
    let (addr, _) = governed(&governed_config("")).await;
    let key = create_key(addr, json!({"name": "ci"})).await;
    let secret = key["key"].as_str().unwrap();
    assert!(secret.starts_with("sy-") && secret.len() >= 35, "{secret}");
    assert_eq!(key["prefix"], &secret[..8]);
    for protocol in [Protocol::OpenAi, Protocol::Responses, Protocol::Anthropic, Protocol::Gemini, Protocol::Cohere] {
        let reply = call(addr, protocol, "lane-openai", Some(secret)).await;
        assert_eq!(reply.status, 200, "{protocol}: {}", String::from_utf8_lossy(&reply.body));
        // No key, an unknown key and a vendor's key: 401 in the caller's own shape.
        for presented in [None, Some("sy-0000000000000000000000000000000000000000000"), Some("sk-proj-vendor")] {
            let reply = call(addr, protocol, "lane-openai", presented).await;
            assert_eq!(reply.status, 401, "{protocol} {presented:?}");
            assert_eq!(kind(protocol, &reply), ErrorKind::Authentication, "{protocol}");
        }
    }
    // Gemini's SDKs may also send the key in the query.
    let path = format!("/v1beta/models/lane-openai:generateContent?key={secret}");
    let reply = post(addr, &path, &[], chat_body(Protocol::Gemini, "", "hi", false)).await;
    assert_eq!(reply.status, 200);
    // A Bedrock caller without a signature: 403 with its error type header.
    let reply = call(addr, Protocol::Bedrock, "lane-openai", None).await;
    assert_eq!(reply.status, 403);
    assert!(reply.headers.contains_key("x-amzn-errortype"));
    // The secret is never shown again.
    let id = key["id"].as_str().unwrap();
    let read = admin_call(addr, "GET", &format!("/api/v1/admin/keys/{id}"), Some(ADMIN_TOKEN), None).await;
    assert!(!String::from_utf8_lossy(&read.body).contains(secret));
}

#[tokio::test]
async fn expiry_revocation_and_rotation() {
    let (addr, _) = governed(&governed_config("")).await;
    let expired = create_key(addr, json!({"name": "old", "expires_at": "2020-01-01T00:00:00Z"})).await;
    let reply = call(addr, Protocol::OpenAi, "lane-openai", expired["key"].as_str()).await;
    assert_eq!(reply.status, 401);
    assert!(String::from_utf8_lossy(&reply.body).contains("expired"));

    let key = create_key(addr, json!({"name": "rotating"})).await;
    let (id, old) = (key["id"].as_str().unwrap(), key["key"].as_str().unwrap());
    let rotated = admin_call(addr, "POST", &format!("/api/v1/admin/keys/{id}/rotate"), Some(ADMIN_TOKEN), None).await;
    assert_eq!(rotated.status, 200);
    let rotated: serde_json::Value = serde_json::from_slice(&rotated.body).unwrap();
    assert_eq!(rotated["id"], id, "rotation keeps the id");
    let new = rotated["key"].as_str().unwrap();
    assert_ne!(new, old);
    assert_eq!(
        call(addr, Protocol::OpenAi, "lane-openai", Some(old)).await.status,
        401,
        "the old secret stops at once"
    );
    assert_eq!(call(addr, Protocol::OpenAi, "lane-openai", Some(new)).await.status, 200);

    let revoked = admin_call(addr, "DELETE", &format!("/api/v1/admin/keys/{id}"), Some(ADMIN_TOKEN), None).await;
    assert_eq!(revoked.status, 200);
    let reply = call(addr, Protocol::Anthropic, "lane-openai", Some(new)).await;
    assert_eq!(reply.status, 401);
    assert!(String::from_utf8_lossy(&reply.body).contains("revoked"));
    // Revocation is final.
    let patch = admin_call(
        addr,
        "PATCH",
        &format!("/api/v1/admin/keys/{id}"),
        Some(ADMIN_TOKEN),
        Some(json!({"name": "back"})),
    )
    .await;
    assert_eq!(patch.status, 409);
    let rotate = admin_call(addr, "POST", &format!("/api/v1/admin/keys/{id}/rotate"), Some(ADMIN_TOKEN), None).await;
    assert_eq!(rotate.status, 409);
}

#[tokio::test]
async fn a_retried_create_with_the_same_idempotency_key_mints_once() {
    let (addr, _) = governed(&governed_config("")).await;
    let send = || async {
        let client: hyper_util::client::legacy::Client<_, http_body_util::Full<bytes::Bytes>> =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
        let request = http::Request::post(format!("http://{}/api/v1/admin/keys", admin(addr)))
            .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
            .header("idempotency-key", "create-ci-1")
            .body(http_body_util::Full::new(bytes::Bytes::from(json!({"name": "ci"}).to_string())))
            .unwrap();
        let response = client.request(request).await.unwrap();
        let status = response.status();
        let replayed = response.headers().contains_key("idempotent-replayed");
        let body = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
        (status, replayed, serde_json::from_slice::<serde_json::Value>(&body).unwrap())
    };
    let (first_status, first_replayed, first) = send().await;
    let (second_status, second_replayed, second) = send().await;
    assert_eq!((first_status.as_u16(), first_replayed), (201, false));
    assert_eq!((second_status.as_u16(), second_replayed), (200, true));
    assert_eq!(first["id"], second["id"]);
    assert_eq!(first["key"], second["key"], "the retry gets the secret it missed");
    let list = admin_call(addr, "GET", "/api/v1/admin/keys", Some(ADMIN_TOKEN), None).await;
    let list: serde_json::Value = serde_json::from_slice(&list.body).unwrap();
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_key_may_name_only_its_pools() {
    let (addr, _) = governed(&governed_config("")).await;
    let key = create_key(addr, json!({"name": "narrow", "pools": ["lane-openai"]})).await;
    let secret = key["key"].as_str().unwrap();
    assert_eq!(call(addr, Protocol::Cohere, "lane-openai", Some(secret)).await.status, 200);
    for protocol in [Protocol::OpenAi, Protocol::Anthropic, Protocol::Gemini] {
        let reply = call(addr, protocol, "lane-cohere", Some(secret)).await;
        assert_eq!(reply.status, 403, "{protocol}");
        assert_eq!(kind(protocol, &reply), ErrorKind::PermissionDenied, "{protocol}");
    }
    let bad = admin_call(
        addr,
        "POST",
        "/api/v1/admin/keys",
        Some(ADMIN_TOKEN),
        Some(json!({"name": "x", "pools": ["nope"]})),
    )
    .await;
    assert_eq!(bad.status, 400);
}

#[tokio::test]
async fn concurrent_requests_never_overshoot_a_budget() {
    let groups = "groups:\n  team: { budget: { usd: 1.0, window: 1d } }\n";
    let (addr, gateway) = governed(&governed_config(groups)).await;
    let key = create_key(addr, json!({"name": "spender", "group": "team"})).await;
    let secret = key["key"].as_str().unwrap().to_owned();
    // Each request reserves its worst case (max_tokens 100 at these prices
    // is about 0.2 USD plus the prompt): the budget fits only a few.
    let body = json!({"model": "lane-openai", "max_tokens": 100, "messages": [{"role": "user", "content": "spend"}]})
        .to_string();
    let replies =
        futures_util::future::join_all(
            (0..200).map(|_| {
                let (secret, body) = (secret.clone(), body.clone());
                async move {
                    post(addr, "/v1/chat/completions", &[("authorization", &format!("Bearer {secret}"))], body).await
                }
            }),
        )
        .await;
    let served = replies.iter().filter(|r| r.status == 200).count();
    assert!(served >= 3, "{served} served");
    for refused in replies.iter().filter(|r| r.status != 200) {
        assert_eq!(refused.status, 429, "{}", String::from_utf8_lossy(&refused.body));
        let raw = codec(Protocol::OpenAi).extract_error(429, &refused.body);
        assert_eq!(raw.kind, ErrorKind::QuotaExceeded, "every refusal is the quota error: {}", raw.message);
        assert!(raw.message.contains("group `team`"), "{}", raw.message);
    }
    let rows = ledger_rows(addr, "status=200", served).await;
    assert_eq!(rows.len(), served);
    let spent: f64 = rows.iter().map(|r| r["usd"].as_f64().unwrap()).sum();
    assert!(spent > 0.0 && spent <= 1.0, "recorded spend {spent} within the 1 USD cap");
    let governance = gateway.governance.as_ref().unwrap();
    assert_eq!(governance.reserved_usd(), 0.0, "every reservation settled");
    // Spend by group agrees with the ledger.
    let report = admin_call(addr, "GET", "/api/v1/admin/spend?by=group", Some(ADMIN_TOKEN), None).await;
    let report: serde_json::Value = serde_json::from_slice(&report.body).unwrap();
    let team = report["data"].as_array().unwrap().iter().find(|l| l["value"] == "team").unwrap();
    assert!((team["usd"].as_f64().unwrap() - spent).abs() < 1e-9, "{team}");
}

#[tokio::test]
async fn rate_limits_answer_429_with_retry_after() {
    let (addr, _) = governed(&governed_config("")).await;
    let key = create_key(addr, json!({"name": "slow", "limits": {"rpm": 2}})).await;
    let secret = key["key"].as_str().unwrap();
    for _ in 0..2 {
        assert_eq!(call(addr, Protocol::OpenAi, "lane-openai", Some(secret)).await.status, 200);
    }
    for protocol in [Protocol::OpenAi, Protocol::Anthropic, Protocol::Gemini] {
        let reply = call(addr, protocol, "lane-openai", Some(secret)).await;
        assert_eq!(reply.status, 429, "{protocol}");
        assert_eq!(kind(protocol, &reply), ErrorKind::RateLimit, "{protocol}");
        let retry: u64 = reply.headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((1..=60).contains(&retry), "{retry}");
    }
}

#[tokio::test]
async fn streams_are_metered_even_when_the_caller_did_not_ask_for_usage() {
    let (addr, _) = governed(&governed_config("")).await;
    let key = create_key(addr, json!({"name": "streamer"})).await;
    let secret = key["key"].as_str().unwrap();
    let body =
        json!({"model": "lane-openai", "stream": true, "messages": [{"role": "user", "content": "count these words"}]});
    let reply =
        post(addr, "/v1/chat/completions", &[("authorization", &format!("Bearer {secret}"))], body.to_string()).await;
    assert_eq!(reply.status, 200);
    let text = String::from_utf8_lossy(&reply.body);
    assert!(!text.contains("\"usage\""), "the caller did not ask for the usage chunk: {text}");
    let rows = ledger_rows(addr, &format!("key={}", key["id"].as_str().unwrap()), 1).await;
    assert!(rows[0]["output_tokens"].as_u64().unwrap() > 0, "{}", rows[0]);
    assert_eq!(rows[0]["estimated"], false);
}

#[tokio::test]
async fn a_signature_by_an_unknown_access_key_is_refused_before_its_body_is_read() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (addr, _) = governed(&governed_config("server: { body_read_timeout: 30s }\n")).await;
    // The head of a 32 MiB signed request, and none of its body.
    let head = "POST /model/lane-openai/converse HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
                content-length: 33554432\r\nx-amz-date: 20260101T000000Z\r\n\
                authorization: AWS4-HMAC-SHA256 Credential=AKIANOBODYISSUEDTHIS/20260101/us-east-1/bedrock/aws4_request, \
                SignedHeaders=host;x-amz-date, Signature=0000000000000000000000000000000000000000000000000000000000000000\r\n\r\n";
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut reply = vec![0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut reply))
        .await
        .expect("no answer while the body was awaited: the key was looked up after reading it")
        .unwrap();
    let reply = String::from_utf8_lossy(&reply[..read]).to_lowercase();
    assert!(reply.starts_with("http/1.1 403"), "{reply}");
    assert!(reply.contains("x-amzn-errortype: unrecognizedclientexception"), "{reply}");
}

#[tokio::test]
async fn bedrock_callers_sign_with_the_minted_pair() {
    let (addr, _) = governed(&governed_config("")).await;
    let key = create_key(addr, json!({"name": "aws", "issue_aws_credential": true})).await;
    let access_key_id = key["aws_access_key_id"].as_str().unwrap().to_owned();
    let secret_access_key = key["aws_secret_access_key"].as_str().unwrap().to_owned();
    let path = "/model/lane-openai/converse";
    let body = chat_body(Protocol::Bedrock, "", "hi", false);
    let signed = |access_key_id: &str, secret: &str, body: &str, at: SystemTime| {
        let credentials = switchyard_protocol::Credentials::Aws {
            access_key_id: access_key_id.to_owned(),
            secret_access_key: secret.to_owned(),
            session_token: None,
            region: "us-east-1".into(),
        };
        let url = format!("http://{addr}{path}");
        let outbound = switchyard_protocol::Outbound { method: "POST", url: &url, body: body.as_bytes(), time: at };
        codec(Protocol::Bedrock).auth_headers(&credentials, &outbound).unwrap()
    };
    let send = |headers: Vec<(http::HeaderName, http::HeaderValue)>, body: String| async move {
        let headers: Vec<(String, String)> =
            headers.iter().map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned())).collect();
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        post(addr, path, &headers, body).await
    };
    let reply = send(signed(&access_key_id, &secret_access_key, &body, SystemTime::now()), body.clone()).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));

    let wrong = send(
        signed(&access_key_id, "not-the-secret-0000000000000000000000000", &body, SystemTime::now()),
        body.clone(),
    )
    .await;
    let changed =
        send(signed(&access_key_id, &secret_access_key, &body, SystemTime::now()), body.replace("hi", "ho")).await;
    let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
    let stale = send(signed(&access_key_id, &secret_access_key, &body, an_hour_ago), body.clone()).await;
    for (what, reply) in [("wrong secret", wrong), ("changed body", changed), ("stale date", stale)] {
        assert_eq!(reply.status, 403, "{what}: {}", String::from_utf8_lossy(&reply.body));
        assert_eq!(
            reply.headers["x-amzn-errortype"].to_str().unwrap().split(':').next(),
            Some("InvalidSignatureException"),
            "{what}"
        );
    }

    // A rotation replaces every credential the key has: the old pair stops.
    let id = key["id"].as_str().unwrap();
    let rotate = |body: Option<serde_json::Value>| async move {
        let reply = admin_call(addr, "POST", &format!("/api/v1/admin/keys/{id}/rotate"), Some(ADMIN_TOKEN), body).await;
        assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
        serde_json::from_slice::<serde_json::Value>(&reply.body).unwrap()
    };
    let both = rotate(None).await;
    let (new_id, new_secret) =
        (both["aws_access_key_id"].as_str().unwrap(), both["aws_secret_access_key"].as_str().unwrap());
    assert_ne!(new_id, access_key_id);
    let old = send(signed(&access_key_id, &secret_access_key, &body, SystemTime::now()), body.clone()).await;
    assert_eq!(old.status, 403, "the rotated-out pair must stop: {}", String::from_utf8_lossy(&old.body));
    let new = send(signed(new_id, new_secret, &body, SystemTime::now()), body.clone()).await;
    assert_eq!(new.status, 200, "{}", String::from_utf8_lossy(&new.body));
    // Each credential can be rotated on its own.
    let virtual_key = both["key"].as_str().unwrap().to_owned();
    let aws_only = rotate(Some(json!({"rotate": "aws"}))).await;
    assert!(aws_only["key"].is_null() && aws_only["aws_secret_access_key"].is_string(), "{aws_only}");
    assert_eq!(call(addr, Protocol::OpenAi, "lane-openai", Some(&virtual_key)).await.status, 200);
    let key_only = rotate(Some(json!({"rotate": "key"}))).await;
    assert!(key_only["aws_secret_access_key"].is_null() && key_only["key"].is_string(), "{key_only}");
    assert_eq!(key_only["aws_access_key_id"], aws_only["aws_access_key_id"]);
    assert_eq!(call(addr, Protocol::OpenAi, "lane-openai", Some(&virtual_key)).await.status, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_is_never_undone_by_a_concurrent_change() {
    let (addr, _) = governed(&governed_config("")).await;
    for round in 0..10 {
        let key = create_key(addr, json!({"name": format!("raced-{round}")})).await;
        let id = key["id"].as_str().unwrap().to_owned();
        let mut changes = Vec::new();
        for n in 0..8 {
            let path = format!("/api/v1/admin/keys/{id}");
            changes.push(tokio::spawn(async move {
                admin_call(addr, "PATCH", &path, Some(ADMIN_TOKEN), Some(json!({"name": format!("n{n}")}))).await.status
            }));
        }
        let revoked = admin_call(addr, "DELETE", &format!("/api/v1/admin/keys/{id}"), Some(ADMIN_TOKEN), None).await;
        assert_eq!(revoked.status, 200);
        for change in changes {
            let status = change.await.unwrap();
            assert!(status == 200 || status == 409, "{status}");
        }
        let now = admin_call(addr, "GET", &format!("/api/v1/admin/keys/{id}"), Some(ADMIN_TOKEN), None).await;
        let now: serde_json::Value = serde_json::from_slice(&now.body).unwrap();
        assert_eq!(now["state"], "revoked", "round {round}: {now}");
        assert_eq!(call(addr, Protocol::OpenAi, "lane-openai", key["key"].as_str()).await.status, 401);
    }
}

#[tokio::test]
async fn refused_attempts_cannot_grow_the_audit_log_without_bound() {
    let (addr, _) = governed(&governed_config("")).await;
    let long = "x".repeat(6_000);
    for _ in 0..200 {
        let path = format!("/api/v1/admin/keys/{long}");
        let reply = admin_call(addr, "PATCH", &path, Some("not-a-token-000000"), Some(json!({}))).await;
        assert_eq!(reply.status, 401);
    }
    let audit = admin_call(addr, "GET", "/api/v1/admin/audit?limit=1000", Some(ADMIN_TOKEN), None).await;
    let audit: serde_json::Value = serde_json::from_slice(&audit.body).unwrap();
    let entries = audit["data"].as_array().unwrap();
    let bytes: usize = entries.iter().map(|e| e.to_string().len()).sum();
    assert!(entries.len() <= switchyard_state::audit::REFUSED_PER_MINUTE as usize + 1, "{} rows", entries.len());
    assert!(entries.iter().all(|e| e["action"].as_str().unwrap().len() <= 256), "a row keeps a bounded path");
    assert!(bytes < 20_000, "200 refused attempts stored {bytes} bytes");
}

#[tokio::test]
async fn a_valid_tokens_refused_attempts_cannot_grow_the_audit_log_without_bound() {
    let reader = "reader-token-0123456789abcdef";
    let yaml = format!(
        "{}admin: {{ tokens: [{ADMIN_TOKEN}, {{ name: dashboards, token: {reader}, scope: read }}], mutations_per_minute: 5 }}\n",
        governed_config("")
    );
    let (addr, _) = governed(&yaml).await;
    // A read-only token's mutations, and a full one's past its rate.
    for _ in 0..100 {
        let refused = admin_call(addr, "POST", "/api/v1/admin/groups", Some(reader), Some(json!({"name": "g"}))).await;
        assert_eq!(refused.status, 403);
    }
    let mut limited = 0;
    for i in 0..100 {
        let reply =
            admin_call(addr, "POST", "/api/v1/admin/groups", Some(ADMIN_TOKEN), Some(json!({"name": format!("g{i}")})))
                .await;
        limited += usize::from(reply.status == 429);
    }
    assert!(limited >= 90, "{limited} refused for their rate");
    let audit = admin_call(addr, "GET", "/api/v1/admin/audit?limit=1000", Some(ADMIN_TOKEN), None).await;
    let audit: serde_json::Value = serde_json::from_slice(&audit.body).unwrap();
    let entries = audit["data"].as_array().unwrap();
    let count =
        |actor: &str, outcome: u64| entries.iter().filter(|e| e["actor"] == actor && e["outcome"] == outcome).count();
    // One source's refusals share one budget a minute; what passed is all there.
    let refused = count("dashboards", 403) + count("token-1", 429);
    assert!(refused >= 1 && refused <= switchyard_state::audit::REFUSED_PER_MINUTE as usize, "{refused} refused rows");
    assert_eq!(count("token-1", 201), 100 - limited, "every change made is audited");
}

#[tokio::test]
async fn admin_scopes_and_the_audit_log() {
    let reader = "reader-token-0123456789abcdef";
    let yaml = format!(
        "{}admin: {{ tokens: [{ADMIN_TOKEN}, {{ name: dashboards, token: {reader}, scope: read }}] }}\n",
        governed_config("")
    );
    let (addr, _) = governed(&yaml).await;
    assert_eq!(admin_call(addr, "GET", "/api/v1/admin/keys", None, None).await.status, 401);
    assert_eq!(admin_call(addr, "GET", "/api/v1/admin/keys", Some("wrong-token-00000000"), None).await.status, 401);
    assert_eq!(admin_call(addr, "GET", "/api/v1/admin/keys", Some(reader), None).await.status, 200);
    assert_eq!(admin_call(addr, "GET", "/stats", Some(reader), None).await.status, 200);
    let refused = admin_call(addr, "POST", "/api/v1/admin/keys", Some(reader), Some(json!({"name": "x"}))).await;
    assert_eq!(refused.status, 403);
    let created = create_key(addr, json!({"name": "audited"})).await;
    let audit = admin_call(addr, "GET", "/api/v1/admin/audit", Some(reader), None).await;
    let text = String::from_utf8_lossy(&audit.body).to_string();
    let audit: serde_json::Value = serde_json::from_slice(&audit.body).unwrap();
    let entries = audit["data"].as_array().unwrap();
    assert_eq!(entries[0]["actor"], "token-1");
    assert_eq!(entries[0]["outcome"], 201);
    assert_eq!(entries[0]["target"], created["id"]);
    assert_eq!(entries[1]["actor"], "dashboards");
    assert_eq!(entries[1]["outcome"], 403);
    assert!(!text.contains(created["key"].as_str().unwrap()), "no secret in the audit log");
    assert!(!text.contains(ADMIN_TOKEN) && !text.contains(reader), "no token in the audit log");
    // The OpenAPI document is served and describes the routes.
    let doc = admin_call(addr, "GET", "/api/v1/admin/openapi.json", Some(reader), None).await;
    assert!(String::from_utf8_lossy(&doc.body).contains("/api/v1/admin/keys/{id}/rotate"));
    // Admin 404s are JSON, never empty.
    let missing = admin_call(addr, "GET", "/nope", Some(reader), None).await;
    assert_eq!(missing.status, 404);
    assert!(serde_json::from_slice::<serde_json::Value>(&missing.body).is_ok());
}

#[tokio::test]
async fn sqlite_keeps_keys_groups_and_spend_across_a_restart() {
    let dir = std::env::temp_dir().join(format!("switchyard-governance-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("restart.db");
    let _ = std::fs::remove_file(&path);
    let yaml = governed_config(&format!("storage: {{ sqlite_path: \"{}\" }}\n", path.display()));
    let (id, secret, spent) = {
        let (addr, _) = governed(&yaml).await;
        let group = admin_call(
            addr,
            "POST",
            "/api/v1/admin/groups",
            Some(ADMIN_TOKEN),
            Some(json!({"name": "eng", "budget": {"usd": 50, "window": "1mo"}})),
        )
        .await;
        assert_eq!(group.status, 201, "{}", String::from_utf8_lossy(&group.body));
        let key = create_key(addr, json!({"name": "durable", "group": "eng"})).await;
        let secret = key["key"].as_str().unwrap().to_owned();
        for _ in 0..3 {
            assert_eq!(call(addr, Protocol::OpenAi, "lane-openai", Some(&secret)).await.status, 200);
        }
        let rows = ledger_rows(addr, "", 3).await;
        let spent: f64 = rows.iter().map(|r| r["usd"].as_f64().unwrap()).sum();
        (key["id"].as_str().unwrap().to_owned(), secret, spent)
    };
    // A Gemini lane's signed call, kept for the key that asked: the next
    // turn comes after a restart, rebuilt from id, name and arguments.
    let (call_id, arguments) = {
        let (addr, _) = governed(&yaml).await;
        let first = chat_as(addr, &secret, gemini_tool_turn(None)).await;
        assert_eq!(first.status, 200, "{}", String::from_utf8_lossy(&first.body));
        let first: serde_json::Value = serde_json::from_slice(&first.body).unwrap();
        let call = &first["choices"][0]["message"]["tool_calls"][0];
        assert!(call["extra_content"]["google"]["thought_signature"].is_string(), "{call}");
        (call["id"].as_str().unwrap().to_owned(), call["function"]["arguments"].as_str().unwrap().to_owned())
    };
    let (addr, gateway) = governed(&yaml).await;
    // The budget's spend was seeded from the ledger at boot.
    let governance = gateway.governance.as_ref().unwrap();
    let bucket = governance.bucket(&switchyard_governance::BucketId::Group("eng".into())).unwrap();
    assert!((switchyard_governance::money::usd(bucket.spent) - spent).abs() < 1e-6, "{bucket:?} vs {spent}");
    assert_eq!(call(addr, Protocol::OpenAi, "lane-openai", Some(&secret)).await.status, 200, "the key survived");
    let groups = admin_call(addr, "GET", "/api/v1/admin/groups/eng", Some(ADMIN_TOKEN), None).await;
    assert_eq!(groups.status, 200);
    let key = admin_call(addr, "GET", &format!("/api/v1/admin/keys/{id}"), Some(ADMIN_TOKEN), None).await;
    assert_eq!(key.status, 200);
    let second = gemini_tool_turn(Some((&call_id, &arguments)));
    let reply = chat_as(addr, &secret, second.clone()).await;
    assert!(String::from_utf8_lossy(&reply.body).contains("(signed)"), "{}", String::from_utf8_lossy(&reply.body));
    // Another key sending the same call id gets nothing of the first key's.
    let other = create_key(addr, json!({"name": "other"})).await;
    let other = other["key"].as_str().unwrap();
    let reply = chat_as(addr, other, second).await;
    assert!(String::from_utf8_lossy(&reply.body).contains("(unsigned)"), "{}", String::from_utf8_lossy(&reply.body));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An OpenAI Chat call made with `key`.
async fn chat_as(addr: std::net::SocketAddr, key: &str, body: Vec<u8>) -> Reply {
    post(addr, "/v1/chat/completions", &[("authorization", &format!("Bearer {key}"))], body).await
}

/// An OpenAI Chat request to the Gemini lane with a tool: the first turn,
/// or (given the call's id and arguments) the second, rebuilt as SDK users
/// do from id, name and arguments only.
fn gemini_tool_turn(answered: Option<(&str, &str)>) -> Vec<u8> {
    let tools = json!([{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}]);
    let mut messages = vec![json!({"role": "user", "content": "look it up"})];
    if let Some((id, arguments)) = answered {
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "lookup", "arguments": arguments}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": "found"}));
    }
    serde_json::to_vec(&json!({"model": "lane-gemini", "messages": messages, "tools": tools})).unwrap()
}

/// An OpenAI upstream that streams one word every 20 ms and never ends.
async fn trickling_upstream() -> std::net::SocketAddr {
    spawn(axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(|| async {
            let frames = futures_util::stream::unfold(0u64, |n| async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let frame = format!(
                    "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"w{n} \"}},\"finish_reason\":null}}]}}\n\n"
                );
                Some((Ok::<_, std::io::Error>(bytes::Bytes::from(frame)), n + 1))
            });
            let mut response = axum::response::Response::new(axum::body::Body::from_stream(frames));
            response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
            response
        }),
    ))
    .await
}

#[tokio::test]
async fn a_caller_that_hangs_up_mid_stream_is_billed_for_what_was_delivered() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let upstream = trickling_upstream().await;
    let yaml = format!(
        "providers:\n  up: {{ protocol: openai, base_url: \"http://{upstream}\" }}\nmodels:\n  m: {{ provider: up }}\n\
         rate_card:\n  m: {{ input_utok: 1000, output_utok: 1000 }}\nauth: {{ mode: keys }}\n\
         governance: {{ ledger_flush_interval: 20ms }}\n"
    );
    let (addr, gateway) = governed(&yaml).await;
    let key = create_key(addr, json!({"name": "leaver"})).await;
    let secret = key["key"].as_str().unwrap();
    // One caller translated (Anthropic), one passed through (OpenAI asking for usage).
    let bodies = [
        (
            "/v1/messages",
            format!("x-api-key: {secret}"),
            json!({"model": "m", "max_tokens": 500, "stream": true, "messages": [{"role": "user", "content": "talk"}]}),
        ),
        (
            "/v1/chat/completions",
            format!("authorization: Bearer {secret}"),
            json!({"model": "m", "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "talk"}]}),
        ),
    ];
    for (path, auth, body) in &bodies {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let body = body.to_string();
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\n{auth}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        // Read for a while (about ten words), then hang up.
        let mut received = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(250);
        let mut buf = [0u8; 4096];
        while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            if n == 0 {
                break;
            }
            received.extend_from_slice(&buf[..n]);
        }
        assert!(String::from_utf8_lossy(&received).starts_with("HTTP/1.1 200"), "{path}");
        drop(stream);
    }
    let rows = ledger_rows(addr, &format!("key={}", key["id"].as_str().unwrap()), 2).await;
    for row in &rows {
        assert_eq!(row["status"], 499, "{row}");
        assert_eq!(row["estimated"], true, "{row}");
        assert_eq!(row["notes"]["estimated"], "caller_left", "{row}");
        let output = row["output_tokens"].as_u64().unwrap();
        assert!((3..=40).contains(&output), "billed for the words delivered, about ten: {row}");
        assert!(row["input_tokens"].as_u64().unwrap() > 0, "{row}");
        assert!(row["usd"].as_f64().unwrap() > 0.0, "{row}");
    }
    assert_eq!(gateway.governance.as_ref().unwrap().reserved_usd(), 0.0, "the reservations settled");
}

#[tokio::test]
async fn a_key_without_a_valid_credential_is_refused_before_its_body_arrives() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (addr, _) = governed(&governed_config("")).await;
    for (path, header) in [
        ("/v1/chat/completions", "authorization: Bearer sy-0000000000000000000000000000000000000000000"),
        ("/v1/messages", "x-api-key: sy-0000000000000000000000000000000000000000000"),
        ("/v2/chat", "content-language: en"),
    ] {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        // A body of 10 MB is announced and never sent.
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 10000000\r\n{header}\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = vec![0u8; 4096];
        let read = tokio::time::timeout(Duration::from_secs(2), stream.read(&mut answer)).await;
        let read = read.unwrap_or_else(|_| panic!("{path}: no answer before the body: the body was awaited first"));
        let text = String::from_utf8_lossy(&answer[..read.unwrap()]).to_string();
        assert!(text.starts_with("HTTP/1.1 401"), "{path}: {text}");
    }
}

#[tokio::test]
async fn the_model_list_needs_a_key_and_shows_what_it_may_use() {
    let (addr, _) = governed(&governed_config("")).await;
    assert_eq!(get(addr, "/v1/models").await.status, 401);
    let anthropic = get_with(addr, "/v1/models", &[("anthropic-version", "2023-06-01")]).await;
    assert_eq!(kind(Protocol::Anthropic, &anthropic), ErrorKind::Authentication);
    let key = create_key(addr, json!({"name": "narrow", "pools": ["lane-openai", "mixed"]})).await;
    let auth = format!("Bearer {}", key["key"].as_str().unwrap());
    let list = get_with(addr, "/v1/models", &[("authorization", &auth)]).await;
    assert_eq!(list.status, 200);
    let list: serde_json::Value = serde_json::from_slice(&list.body).unwrap();
    let mut ids: Vec<&str> = list["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["lane-openai", "mixed"]);
}

#[tokio::test]
async fn a_budget_added_to_a_key_counts_what_the_key_already_spent() {
    let (addr, _) = governed(&governed_config("")).await;
    let key = create_key(addr, json!({"name": "grown"})).await;
    let (id, secret) = (key["id"].as_str().unwrap(), key["key"].as_str().unwrap());
    for _ in 0..5 {
        assert_eq!(call(addr, Protocol::OpenAi, "lane-openai", Some(secret)).await.status, 200);
    }
    let rows = ledger_rows(addr, &format!("key={id}"), 5).await;
    assert_eq!(rows.len(), 5);
    // A budget smaller than today's spend: the key is out of budget at once,
    // not after spending the budget again.
    let patch = json!({"budget": {"usd": 0.000001, "window": "1d"}});
    let reply = admin_call(addr, "PATCH", &format!("/api/v1/admin/keys/{id}"), Some(ADMIN_TOKEN), Some(patch)).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    let view: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert!(view["usage"]["spent_usd"].as_f64().unwrap() > 0.0, "{view}");
    let refused = call(addr, Protocol::OpenAi, "lane-openai", Some(secret)).await;
    assert_eq!(
        kind(Protocol::OpenAi, &refused),
        ErrorKind::QuotaExceeded,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    // And a changed window reads that window's spend again.
    let patch = json!({"budget": {"usd": 0.000001, "window": "1mo"}});
    let reply = admin_call(addr, "PATCH", &format!("/api/v1/admin/keys/{id}"), Some(ADMIN_TOKEN), Some(patch)).await;
    let view: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert!(view["usage"]["spent_usd"].as_f64().unwrap() > 0.0, "{view}");
}

#[tokio::test]
async fn the_adhoc_route_is_priced_or_closed_to_budgeted_keys() {
    let adhoc = |rate_card: &str| {
        format!(
            "auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\nproviders:\n  \
             claude: {{ protocol: anthropic, base_url: \"mock://\", adhoc: true }}\n{rate_card}"
        )
    };
    let ask = |addr: std::net::SocketAddr, key: String| async move {
        let body = chat_body(Protocol::Anthropic, "claude-x", "hi", false);
        post(addr, "/claude/claude-x/v1/messages", &[("x-api-key", &key)], body).await
    };
    // Unpriced: a key with a USD budget may not use it (it would be free);
    // a key without one may.
    let (addr, _) = governed(&adhoc("")).await;
    let budgeted = create_key(addr, json!({"name": "b", "budget": {"usd": 1.0, "window": "1d"}})).await;
    let refused = ask(addr, budgeted["key"].as_str().unwrap().to_owned()).await;
    assert_eq!(refused.status, 403, "{}", String::from_utf8_lossy(&refused.body));
    assert!(String::from_utf8_lossy(&refused.body).contains("rate_card"));
    let free = create_key(addr, json!({"name": "f"})).await;
    assert_eq!(ask(addr, free["key"].as_str().unwrap().to_owned()).await.status, 200);

    // Priced by the provider's `claude/*` row: served, billed, and its budget holds.
    let (addr, _) = governed(&adhoc("rate_card:\n  claude/*: { input_utok: 1000000, output_utok: 1000000 }\n")).await;
    let key = create_key(addr, json!({"name": "p", "budget": {"usd": 1000.0, "window": "1d"}})).await;
    let (id, secret) = (key["id"].as_str().unwrap().to_owned(), key["key"].as_str().unwrap().to_owned());
    assert_eq!(ask(addr, secret.clone()).await.status, 200);
    ledger_rows(addr, &format!("key={id}"), 1).await;
    let spend = admin_call(addr, "GET", "/api/v1/admin/spend?by=key&from=0", Some(ADMIN_TOKEN), None).await;
    let spend: serde_json::Value = serde_json::from_slice(&spend.body).unwrap();
    let usd: f64 = spend["data"].as_array().unwrap().iter().map(|r| r["usd"].as_f64().unwrap()).sum();
    assert!(usd > 1.0, "the ad-hoc lane is priced: {spend}");
}

/// A stream continued on another lane bills each part at its own lane's
/// price: the part before the break on a row of its own (status 206), the
/// rest on the request's row, whose attempts name both lanes (the one that
/// broke mid-answer, the one that went on).
#[tokio::test]
async fn a_continued_stream_bills_each_part_at_its_lane() {
    let yaml = governed_config("")
        .replacen("models:\n", "models:\n  cut-claude: { provider: up-anthropic }\n", 1)
        .replacen(
            "pools:\n",
            "pools:\n  continued:\n    failover: { stream_failure: continue }\n    \
             members: [{ model: cut-claude, weight: 1000000 }, { model: lane-openai, weight: 1 }]\n",
            1,
        )
        .replacen("rate_card:\n", "rate_card:\n  cut-claude: { input_utok: 1000, output_utok: 2000 }\n", 1);
    let (addr, _) = governed(&yaml).await;
    let key = create_key(addr, json!({"name": "cont"})).await;
    let secret = key["key"].as_str().unwrap();
    let body = chat_body(Protocol::OpenAi, "continued", "[mock:plain] [mock:cut=9] one two three four five", true);
    let reply = post(addr, "/v1/chat/completions", &[("authorization", &format!("Bearer {secret}"))], body).await;
    assert_eq!(reply.status, 200);
    assert!(String::from_utf8_lossy(&reply.body).contains("[DONE]"));
    let rows = ledger_rows(addr, "", 2).await;
    let part = rows.iter().find(|r| r["status"] == 206).unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(part["lane"], "cut-claude", "{part}");
    assert!(part["output_tokens"].as_u64().unwrap() > 0, "the part before the break is billed: {part}");
    let row = rows.iter().find(|r| r["status"] == 200).unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(row["lane"], "lane-openai", "{row}");
    let detail =
        admin_call(addr, "GET", &format!("/api/v1/admin/requests/{}", row["id"]), Some(ADMIN_TOKEN), None).await;
    let detail: serde_json::Value = serde_json::from_slice(&detail.body).unwrap();
    let attempts = detail["attempts"].as_array().unwrap_or_else(|| panic!("{detail}"));
    let lanes: Vec<&str> = attempts.iter().map(|a| a["lane"].as_str().unwrap()).collect();
    assert_eq!(lanes, ["cut-claude", "lane-openai"], "{detail}");
    assert_eq!(attempts[0]["failure"], "cut_mid_answer");
    assert_eq!(detail["status"], 200, "{detail}");
    assert!(detail["output_tokens"].as_u64().unwrap() > 0, "{detail}");
}
