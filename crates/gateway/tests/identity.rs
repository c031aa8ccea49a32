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
