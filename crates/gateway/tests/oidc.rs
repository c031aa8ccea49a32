//! Console sign-in through OpenID Connect (`admin.oidc`), against a small
//! identity provider run by the test on loopback: discovery, the
//! authorization endpoint (which signs in whoever the test says), a token
//! endpoint that checks the PKCE verifier against the challenge and the
//! client secret, and a JWKS it can rotate. The browser's part is played by
//! a client that follows the redirects by hand: the console's session
//! cookie opens the admin API with the role the bindings grant.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Form, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Json;
use base64::Engine;
use common::*;
use common::{console_session as session_of, identity_jwks as jwks, identity_key as signing_key, unix_now as now};
use serde_json::{json, Value};

/// An issued code's PKCE challenge, nonce and redirect URI.
type Issued = (String, String, String);

/// The fake identity provider's state.
#[derive(Clone, Default)]
struct Idp {
    base: Arc<Mutex<String>>,
    /// The claims of whoever signs in next.
    user: Arc<Mutex<Value>>,
    /// Issued codes: code → (challenge, nonce, redirect_uri).
    codes: Arc<Mutex<HashMap<String, Issued>>>,
    /// The key it signs with now.
    kid: Arc<Mutex<String>>,
    /// Refuses everything at the token endpoint with a wrong nonce.
    wrong_nonce: Arc<Mutex<bool>>,
}

async fn discovery(State(idp): State<Idp>) -> Json<Value> {
    let base = idp.base.lock().unwrap().clone();
    Json(json!({
        "issuer": base, "authorization_endpoint": format!("{base}/authorize"), "token_endpoint": format!("{base}/token"),
        "jwks_uri": format!("{base}/jwks"), "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
    }))
}

async fn authorize(State(idp): State<Idp>, Query(query): Query<HashMap<String, String>>) -> Response {
    assert_eq!(query["response_type"], "code");
    assert_eq!(query["client_id"], "switchyard-console");
    assert_eq!(query["code_challenge_method"], "S256");
    assert!(query["scope"].split(' ').any(|s| s == "openid"), "{query:?}");
    let code = format!("code-{}", fastrand::u64(..));
    idp.codes
        .lock()
        .unwrap()
        .insert(code.clone(), (query["code_challenge"].clone(), query["nonce"].clone(), query["redirect_uri"].clone()));
    Redirect::to(&format!("{}?code={code}&state={}", query["redirect_uri"], query["state"])).into_response()
}

async fn token(State(idp): State<Idp>, Form(form): Form<HashMap<String, String>>) -> Response {
    let Some((challenge, nonce, redirect)) = idp.codes.lock().unwrap().remove(&form["code"]) else {
        return (axum::http::StatusCode::BAD_REQUEST, Json(json!({"error": "invalid_grant"}))).into_response();
    };
    let digest = ring::digest::digest(&ring::digest::SHA256, form["code_verifier"].as_bytes());
    let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref());
    if computed != challenge
        || form["redirect_uri"] != redirect
        || form.get("client_secret").map(String::as_str) != Some("console-secret")
    {
        return (axum::http::StatusCode::BAD_REQUEST, Json(json!({"error": "invalid_grant"}))).into_response();
    }
    let base = idp.base.lock().unwrap().clone();
    let mut claims = idp.user.lock().unwrap().clone();
    let nonce = if *idp.wrong_nonce.lock().unwrap() { "not-yours".to_owned() } else { nonce };
    for (name, value) in [
        ("iss", json!(base)),
        ("aud", json!("switchyard-console")),
        ("nonce", json!(nonce)),
        ("iat", json!(now())),
        ("exp", json!(now() + 300)),
    ] {
        claims[name] = value;
    }
    let kid = idp.kid.lock().unwrap().clone();
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some(kid.clone());
    let id_token = jsonwebtoken::encode(&header, &claims, &signing_key(&kid)).unwrap();
    Json(json!({"access_token": "unused", "token_type": "Bearer", "id_token": id_token, "expires_in": 300}))
        .into_response()
}

async fn published(State(idp): State<Idp>) -> Json<Value> {
    let kid = idp.kid.lock().unwrap().clone();
    Json(jwks(&kid))
}

async fn identity_provider() -> (String, Idp) {
    let idp = Idp::default();
    *idp.kid.lock().unwrap() = "k1".into();
    let router = axum::Router::new()
        .route("/.well-known/openid-configuration", axum::routing::get(discovery))
        .route("/authorize", axum::routing::get(authorize))
        .route("/token", axum::routing::post(token))
        .route("/jwks", axum::routing::get(published))
        .with_state(idp.clone());
    let addr = spawn(router).await;
    let base = format!("http://{addr}");
    *idp.base.lock().unwrap() = base.clone();
    (base, idp)
}

/// A GET without following redirects: status, Location, Set-Cookie, body.
async fn fetch(url: &str, cookie: Option<&str>) -> (u16, Option<String>, Option<String>, String) {
    let mut headers = Vec::new();
    if let Some(cookie) = cookie {
        headers.push(("cookie", cookie));
    }
    let uri: axum::http::Uri = url.parse().unwrap();
    let addr: std::net::SocketAddr = uri.authority().unwrap().as_str().parse().unwrap();
    let path = uri.path_and_query().unwrap().as_str();
    let reply = get_with(addr, path, &headers).await;
    let header = |name: &str| reply.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    (reply.status.as_u16(), header("location"), header("set-cookie"), String::from_utf8_lossy(&reply.body).into_owned())
}

/// Starts a sign-in in a browser and has the provider answer it: the
/// callback URL the provider sends the browser to, and the browser's
/// binding cookie (`name=value`) set when it started.
async fn start_sign_in(admin: std::net::SocketAddr) -> (String, String) {
    let (status, location, binding, _) = fetch(&format!("http://{admin}/ui/login/oidc"), None).await;
    assert_eq!(status, 303);
    let binding = binding.expect("the start binds the browser with a cookie");
    assert!(binding.contains("HttpOnly") && binding.contains("SameSite=Lax"), "{binding}");
    let (status, callback, _, _) = fetch(&location.unwrap(), None).await;
    assert_eq!(status, 303);
    let callback = callback.unwrap().replace("127.0.0.1:1", &admin.to_string());
    (callback, binding.split(';').next().unwrap().to_owned())
}

/// Signs in through the provider as whoever it says; the session cookie,
/// or the login page's message.
async fn sign_in(admin: std::net::SocketAddr) -> Result<String, String> {
    let (callback, binding) = start_sign_in(admin).await;
    let (status, next, set_cookie, body) = fetch(&callback, Some(&binding)).await;
    match set_cookie {
        Some(cookie) => {
            assert_eq!(status, 200, "{body}");
            // The page moves the browser on itself, so the Strict cookie rides along.
            assert!(body.contains("url=/ui/"), "{body}");
            Ok(cookie.split(';').next().unwrap().to_owned())
        }
        None => {
            let (_, _, _, page) = fetch(&format!("http://{admin}{}", next.unwrap_or_default()), None).await;
            Err(page)
        }
    }
}

/// The config: `admin` is the callback's host as the provider is told it
/// (the tests' "browser" carries the callback to the real listener).
fn config(issuer: &str, admin: &str) -> String {
    format!(
        "providers:\n  fake: {{ protocol: openai, base_url: \"mock://\" }}\nmodels:\n  m: {{ provider: fake }}\n\
         admin:\n  tokens: [{ADMIN_TOKEN}]\n  oidc:\n    issuer: \"{issuer}\"\n    client_id: switchyard-console\n    \
         client_secret: console-secret\n    redirect_url: \"http://{admin}/ui/oidc/callback\"\n    scopes: [email, groups]\n    \
         name_claim: email\n    roles:\n      - {{ claim: groups, value: platform, role: full }}\n      \
         - {{ claim: groups, value: sre, role: read_only }}\n      - {{ claim: groups, value: staff, role: member }}\n    \
         members: {{ parent: people, budget: {{ usd: 5, window: 1d }}, limits: {{ rpm: 100 }}, max_keys: 2 }}\n\
         groups:\n  people: {{ budget: {{ usd: 50, window: 1d }} }}\n\
         rate_card:\n  m: {{ input_utok: 1, output_utok: 2 }}\nauth: {{ mode: keys }}\n"
    )
}

/// Creates a key through the console session: the status.
async fn create_as(admin: std::net::SocketAddr, cookie: &str, name: &str) -> u16 {
    let csrf = session_of(admin, cookie).await["csrf"].as_str().unwrap().to_owned();
    let headers = [("cookie", cookie), ("x-csrf-token", csrf.as_str()), ("content-type", "application/json")];
    post(admin, "/api/v1/admin/keys", &headers, json!({"name": name}).to_string()).await.status.as_u16()
}

/// Signs in as `user` (their claims).
async fn sign_in_as(idp: &Idp, admin: std::net::SocketAddr, user: Value) -> Result<String, String> {
    *idp.user.lock().unwrap() = user;
    sign_in(admin).await
}

#[tokio::test]
async fn operators_sign_in_through_the_provider_with_the_roles_their_groups_grant() {
    let (issuer, idp) = identity_provider().await;
    let (addr, _) = governed(&config(&issuer, "127.0.0.1:1")).await;
    let console = admin(addr);

    // The login page offers single sign-on beside the token form.
    let (_, _, _, page) = fetch(&format!("http://{console}/ui/login"), None).await;
    assert!(page.contains("href=\"/ui/login/oidc\""), "{page}");

    // A platform engineer: full access.
    let ana = sign_in_as(&idp, console, json!({"sub": "u1", "email": "ana@acme.example", "groups": ["platform"]}))
        .await
        .unwrap();
    let session = session_of(console, &ana).await;
    assert_eq!(
        (session["name"].as_str(), session["scope"].as_str()),
        (Some("ana@acme.example"), Some("full")),
        "{session}"
    );
    assert_eq!(create_as(console, &ana, "made-by-ana").await, 201);

    // An SRE: reads everything, changes nothing.
    let sam =
        sign_in_as(&idp, console, json!({"sub": "u2", "email": "sam@acme.example", "groups": "sre"})).await.unwrap();
    assert_eq!(session_of(console, &sam).await["scope"], "read");
    assert_eq!(get_with(console, "/api/v1/admin/keys", &[("cookie", &sam)]).await.status, 200);
    assert_eq!(create_as(console, &sam, "made-by-sam").await, 403);

    // Someone no binding names: signed in at the provider, nothing here.
    let page = sign_in_as(&idp, console, json!({"sub": "u3", "email": "eve@acme.example", "groups": ["sales"]}))
        .await
        .unwrap_err();
    assert!(page.contains("no role on this console"), "{page}");

    // The provider rotates its signing key: the next sign-in fetches it.
    *idp.kid.lock().unwrap() = "k2".into();
    assert!(sign_in_as(&idp, console, json!({"sub": "u1", "email": "ana@acme.example", "groups": ["platform"]}))
        .await
        .is_ok());

    // An ID token carrying another sign-in's nonce is refused.
    *idp.wrong_nonce.lock().unwrap() = true;
    let page = sign_in_as(&idp, console, json!({"sub": "u1", "email": "ana@acme.example", "groups": ["platform"]}))
        .await
        .unwrap_err();
    assert!(page.contains("Single sign-on failed"), "{page}");
    *idp.wrong_nonce.lock().unwrap() = false;

    // Each sign-in is in the audit log, under the provider's name for it.
    let audit = admin_call(addr, "GET", "/api/v1/admin/audit?limit=100", Some(ADMIN_TOKEN), None).await;
    let audit: Value = serde_json::from_slice(&audit.body).unwrap();
    let entries = audit["data"].as_array().unwrap();
    assert!(
        entries.iter().any(|e| e["actor"] == "ana@acme.example" && e["action"] == "GET /ui/oidc/callback"),
        "{audit}"
    );
    assert!(entries
        .iter()
        .any(|e| e["actor"] == "ana@acme.example" && e["action"].as_str().unwrap().contains("/api/v1/admin/keys")));
    assert!(entries.iter().any(|e| e["actor"] == "unauthenticated" && e["outcome"] == 401));
}

#[tokio::test]
async fn a_callback_is_used_once_and_only_for_a_sign_in_started_here() {
    let (issuer, idp) = identity_provider().await;
    let (addr, _) = governed(&config(&issuer, "127.0.0.1:1")).await;
    let console = admin(addr);
    *idp.user.lock().unwrap() = json!({"sub": "u1", "email": "ana@acme.example", "groups": ["platform"]});
    let (_, location, binding, _) = fetch(&format!("http://{console}/ui/login/oidc"), None).await;
    let location = location.unwrap();
    let binding = binding.unwrap().split(';').next().unwrap().to_owned();
    // PKCE and the state ride in the request to the provider.
    for part in ["code_challenge=", "code_challenge_method=S256", "state=", "nonce=", "scope=openid+email+groups"] {
        assert!(location.contains(part), "{part}: {location}");
    }
    let (_, callback, _, _) = fetch(&location, None).await;
    let callback = callback.unwrap().replace("127.0.0.1:1", &console.to_string());
    let (status, _, cookie, _) = fetch(&callback, Some(&binding)).await;
    assert!(status == 200 && cookie.is_some());
    // The same answer again: refused, no session.
    let (status, next, cookie, _) = fetch(&callback, Some(&binding)).await;
    assert_eq!((status, next.as_deref(), cookie), (303, Some("/ui/login?sso=expired"), None));
    // A state this gateway never started.
    let forged = format!("http://{console}/ui/oidc/callback?code=anything&state=made-up");
    assert_eq!(fetch(&forged, None).await.1.as_deref(), Some("/ui/login?sso=expired"));
    // The provider's own refusal.
    let refused = format!("http://{console}/ui/oidc/callback?error=access_denied&state=x");
    assert_eq!(fetch(&refused, None).await.1.as_deref(), Some("/ui/login?sso=refused"));
}

#[tokio::test]
async fn an_answer_carried_to_another_browser_signs_nobody_in_there() {
    let (issuer, idp) = identity_provider().await;
    let (addr, _) = governed(&config(&issuer, "127.0.0.1:1")).await;
    let console = admin(addr);
    // The attacker signs in at the provider as themself, in their own
    // browser, and stops before the callback.
    *idp.user.lock().unwrap() = json!({"sub": "u66", "email": "mallory@acme.example", "groups": ["platform"]});
    // The victim's browser is sent the callback: it has no binding, or its own.
    let (_, victims_binding) = start_sign_in(console).await;
    for cookie in [None, Some(victims_binding.as_str()), Some("switchyard_sso=made-up")] {
        let (callback, _attackers_binding) = start_sign_in(console).await;
        let (status, next, session, _) = fetch(&callback, cookie).await;
        assert_eq!((status, next.as_deref(), session), (303, Some("/ui/login?sso=browser"), None), "{cookie:?}");
    }
    let (_, _, _, page) = fetch(&format!("http://{console}/ui/login?sso=browser"), None).await;
    assert!(page.contains("started in another browser"), "{page}");
}

#[tokio::test]
async fn members_signing_in_never_sign_an_admin_out() {
    let (issuer, idp) = identity_provider().await;
    let (addr, _) = governed(&config(&issuer, "127.0.0.1:1")).await;
    let console = admin(addr);
    let ana = sign_in_as(&idp, console, json!({"sub": "u1", "email": "ana@acme.example", "groups": ["platform"]}))
        .await
        .unwrap();
    // More members sign in than one holder may keep sessions (32).
    for i in 0..40 {
        let member = json!({"sub": format!("m{i}"), "email": format!("m{i}@acme.example"), "groups": ["staff"]});
        sign_in_as(&idp, console, member).await.unwrap();
    }
    assert_eq!(session_of(console, &ana).await["scope"], "full", "the admin's session ended");
}

#[tokio::test]
async fn a_session_follows_its_role_binding_when_it_is_lowered_or_removed() {
    let (issuer, idp) = identity_provider().await;
    let yaml = config(&issuer, "127.0.0.1:1");
    let (addr, reloader, file) = reloadable(&yaml).await;
    let console = admin(addr);
    let ana = sign_in_as(&idp, console, json!({"sub": "u1", "email": "ana@acme.example", "groups": ["platform"]}))
        .await
        .unwrap();
    let sam =
        sign_in_as(&idp, console, json!({"sub": "u2", "email": "sam@acme.example", "groups": "sre"})).await.unwrap();
    assert_eq!(create_as(console, &ana, "before").await, 201);

    // `platform` lowered to read-only, `sre` bound no more.
    *file.lock().unwrap() = yaml
        .replace("value: platform, role: full", "value: platform, role: read_only")
        .replace("      - { claim: groups, value: sre, role: read_only }\n", "");
    reloader.reload().await.unwrap();
    assert_eq!(session_of(console, &ana).await["scope"], "read");
    assert_eq!(create_as(console, &ana, "after").await, 403);
    assert_eq!(get_with(console, "/api/v1/admin/keys", &[("cookie", &sam)]).await.status, 401, "sam's session ended");

    // `max_role` lowered: held to it, whatever the binding says.
    *file.lock().unwrap() = yaml.replace("    members:", "    max_role: read_only\n    members:");
    reloader.reload().await.unwrap();
    assert_eq!(session_of(console, &ana).await["scope"], "read");
    assert_eq!(create_as(console, &ana, "after").await, 403);

    // Restored: the session is what its sign-in was again, and never more
    // (a member bound higher later stays a member until signing in anew).
    *file.lock().unwrap() = yaml.clone();
    reloader.reload().await.unwrap();
    assert_eq!(session_of(console, &ana).await["scope"], "full");
    let lee = sign_in_as(&idp, console, json!({"sub": "u7", "email": "lee@acme.example", "groups": ["staff"]}))
        .await
        .unwrap();
    *file.lock().unwrap() = yaml.replace("value: staff, role: member", "value: staff, role: full");
    reloader.reload().await.unwrap();
    assert_eq!(session_of(console, &lee).await["scope"], "member");
}

#[test]
fn check_names_what_a_sign_in_provider_lacks() {
    let got = match switchyard_config::load(
        "admin:\n  oidc: { issuer: \"https://169.254.169.254\", client_id: \"\", redirect_url: \"https://gw.example/somewhere\", \
         roles: [{ claim: groups, value: x, role: owner }], members: { parent: nowhere } }\n",
        &|_| None,
    ) {
        Ok(_) => Vec::new(),
        Err(err) => err.0.iter().map(|issue| issue.path.clone()).collect(),
    };
    for wanted in [
        "admin.oidc.issuer",
        "admin.oidc.client_id",
        "admin.oidc.redirect_url",
        "admin.oidc.roles[0].role",
        "admin.oidc.members.parent",
    ] {
        assert!(got.iter().any(|p| p == wanted), "{wanted} in {got:?}");
    }
}

/// A self-serve call through the console session: status and JSON body.
async fn own(admin: std::net::SocketAddr, cookie: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let csrf = session_of(admin, cookie).await["csrf"].as_str().unwrap().to_owned();
    let headers = [("cookie", cookie), ("x-csrf-token", csrf.as_str()), ("content-type", "application/json")];
    let reply = match method {
        "GET" => get_with(admin, path, &headers).await,
        "POST" => post(admin, path, &headers, body.unwrap_or(json!({})).to_string()).await,
        _ => {
            let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<http_body_util::Full<bytes::Bytes>>();
            let mut request = axum::http::Request::builder().method(method).uri(format!("http://{admin}{path}"));
            for (name, value) in headers {
                request = request.header(name, value);
            }
            let response =
                client.request(request.body(http_body_util::Full::new(bytes::Bytes::new())).unwrap()).await.unwrap();
            let status = response.status();
            let body = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
            Reply { status, headers: axum::http::HeaderMap::new(), body }
        }
    };
    (reply.status.as_u16(), serde_json::from_slice(&reply.body).unwrap_or(Value::Null))
}

async fn chat_as(addr: std::net::SocketAddr, key: &str) -> u16 {
    let auth = format!("Bearer {key}");
    let body = chat_body(switchyard_protocol::ir::Protocol::OpenAi, "m", "hi", false);
    post(addr, "/v1/chat/completions", &[("authorization", &auth)], body).await.status.as_u16()
}

#[tokio::test]
async fn members_mint_and_manage_their_own_keys_and_only_theirs() {
    let (issuer, idp) = identity_provider().await;
    let (addr, gateway) = governed(&config(&issuer, "127.0.0.1:1")).await;
    let console = admin(addr);
    let lee = sign_in_as(&idp, console, json!({"sub": "u7", "email": "lee@acme.example", "groups": ["staff"]}))
        .await
        .unwrap();
    assert_eq!(session_of(console, &lee).await["scope"], "member");

    // Nothing yet; a key minted, used on the data plane, listed.
    assert_eq!(own(console, &lee, "GET", "/api/v1/self/keys", None).await, (200, json!([])));
    let (status, minted) = own(console, &lee, "POST", "/api/v1/self/keys", Some(json!({"name": "laptop"}))).await;
    assert_eq!(status, 201, "{minted}");
    let secret = minted["key"].as_str().unwrap().to_owned();
    let id = minted["id"].as_str().unwrap().to_owned();
    assert_eq!(chat_as(addr, &secret).await, 200);
    let (_, listed) = own(console, &lee, "GET", "/api/v1/self/keys", None).await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert!(listed[0].get("key").is_none(), "a listed key never carries its secret: {listed}");
    // Its group is the member's own, under `people`, from the template.
    let group = minted["group"].as_str().unwrap().to_owned();
    // Named by the account (`sub`), not by an email that may change hands.
    assert!(group.starts_with("people-u7-"), "{minted}");
    let record = gateway.governance.as_ref().unwrap().groups().into_iter().find(|g| g.name == group).unwrap();
    assert_eq!(record.parent.as_deref(), Some("people"));
    assert_eq!(record.limits.rpm, Some(100));

    // A cap on keys per member.
    assert_eq!(own(console, &lee, "POST", "/api/v1/self/keys", Some(json!({"name": "ci"}))).await.0, 201);
    assert_eq!(own(console, &lee, "POST", "/api/v1/self/keys", Some(json!({"name": "third"}))).await.0, 409);

    // Another member sees none of them, and cannot touch them.
    let kim = sign_in_as(&idp, console, json!({"sub": "u8", "email": "kim@acme.example", "groups": ["staff"]}))
        .await
        .unwrap();
    assert_eq!(own(console, &kim, "GET", "/api/v1/self/keys", None).await, (200, json!([])));
    assert_eq!(own(console, &kim, "POST", &format!("/api/v1/self/keys/{id}/rotate"), None).await.0, 404);
    assert_eq!(own(console, &kim, "DELETE", &format!("/api/v1/self/keys/{id}"), None).await.0, 404);
    assert_eq!(chat_as(addr, &secret).await, 200);

    // Another account that claims lee's email gets none of lee's keys: keys
    // hang on the account (`sub`), not on a name.
    let imposter = sign_in_as(&idp, console, json!({"sub": "u9", "email": "lee@acme.example", "groups": ["staff"]}))
        .await
        .unwrap();
    assert_eq!(own(console, &imposter, "GET", "/api/v1/self/keys", None).await, (200, json!([])));

    // A member reaches nothing of the admin API; an admin has no own keys.
    assert_eq!(get_with(console, "/api/v1/admin/keys", &[("cookie", &lee)]).await.status, 403);
    let admin_reply = admin_call(addr, "GET", "/api/v1/self/keys", Some(ADMIN_TOKEN), None).await;
    assert_eq!(admin_reply.status, 403);

    // Rotated: the old secret stops, the new one works. Revoked: refused.
    let (status, rotated) = own(console, &lee, "POST", &format!("/api/v1/self/keys/{id}/rotate"), None).await;
    assert_eq!(status, 200, "{rotated}");
    assert_eq!(chat_as(addr, &secret).await, 401);
    let fresh = rotated["key"].as_str().unwrap().to_owned();
    assert_eq!(chat_as(addr, &fresh).await, 200);
    assert_eq!(own(console, &lee, "DELETE", &format!("/api/v1/self/keys/{id}"), None).await.0, 200);
    assert_eq!(chat_as(addr, &fresh).await, 401);

    // Every change is audited under the member's name.
    let audit = admin_call(addr, "GET", "/api/v1/admin/audit?limit=200", Some(ADMIN_TOKEN), None).await;
    let audit: Value = serde_json::from_slice(&audit.body).unwrap();
    let mine: Vec<&Value> =
        audit["data"].as_array().unwrap().iter().filter(|e| e["actor"] == "lee@acme.example").collect();
    for action in [
        "POST /api/v1/self/keys",
        &format!("POST /api/v1/self/keys/{id}/rotate"),
        &format!("DELETE /api/v1/self/keys/{id}"),
    ] {
        assert!(mine.iter().any(|e| e["action"] == *action), "{action}: {mine:?}");
    }
}

#[tokio::test]
async fn a_members_key_gets_the_templates_mcp_grants_and_no_more() {
    use crate::mcp::{code, McpClient, FORBIDDEN};
    let (issuer, idp) = identity_provider().await;
    let upstream = mock_upstream().await;
    let yaml = config(&issuer, "127.0.0.1:1").replace("max_keys: 2 }", "max_keys: 2, mcp: [mock__echo] }")
        + &format!("mcp:\n  servers:\n    mock: {{ url: \"http://{upstream}/mcp\" }}\n");
    let (addr, _) = governed(&yaml).await;
    let console = admin(addr);
    let lee = sign_in_as(&idp, console, json!({"sub": "u9", "email": "lee@acme.example", "groups": ["staff"]}))
        .await
        .unwrap();
    let (status, minted) = own(console, &lee, "POST", "/api/v1/self/keys", Some(json!({"name": "agent"}))).await;
    assert_eq!(status, 201, "{minted}");
    let mut client = McpClient::open(addr, minted["key"].as_str()).await.unwrap();
    assert_eq!(client.names("tools/list", "tools", "name").await, ["mock__echo"]);
    let deleted = client.request("tools/call", json!({"name": "mock__delete_everything", "arguments": {}})).await;
    assert_eq!(code(&deleted), FORBIDDEN, "{deleted}");
    let echoed = client.request("tools/call", json!({"name": "mock__echo", "arguments": {"text": "hi"}})).await;
    assert_eq!(echoed["result"]["content"][0]["text"], "hi", "{echoed}");

    // Without a template, a member's key reaches nothing.
    let (issuer, idp) = identity_provider().await;
    let yaml =
        config(&issuer, "127.0.0.1:1") + &format!("mcp:\n  servers:\n    mock: {{ url: \"http://{upstream}/mcp\" }}\n");
    let (addr, _) = governed(&yaml).await;
    let kim = sign_in_as(&idp, admin(addr), json!({"sub": "u10", "email": "kim@acme.example", "groups": ["staff"]}))
        .await
        .unwrap();
    let (_, minted) = own(admin(addr), &kim, "POST", "/api/v1/self/keys", Some(json!({"name": "agent"}))).await;
    let mut client = McpClient::open(addr, minted["key"].as_str()).await.unwrap();
    assert!(client.names("tools/list", "tools", "name").await.is_empty());
}

/// Bindings that name a group: a team lead signs in as a tenant admin of
/// `acme` (that subtree only, audited with its group), and a member of the
/// team gets self-serve keys under `acme` with the binding's pools and MCP
/// grants.
#[tokio::test]
async fn a_binding_with_a_group_makes_a_tenant_admin_and_places_members_keys_there() {
    let (issuer, idp) = identity_provider().await;
    let yaml = format!(
        "providers:\n  fake: {{ protocol: openai, base_url: \"mock://\" }}\nmodels:\n  m: {{ provider: fake }}\n  n: {{ provider: fake }}\n\
         admin:\n  tokens: [{ADMIN_TOKEN}]\n  oidc:\n    issuer: \"{issuer}\"\n    client_id: switchyard-console\n    \
         client_secret: console-secret\n    redirect_url: \"http://127.0.0.1:1/ui/oidc/callback\"\n    scopes: [email, groups]\n    \
         name_claim: email\n    roles:\n      - {{ claim: groups, value: acme-leads, role: full, group: acme }}\n      \
         - {{ claim: groups, value: acme-staff, role: member, group: acme, pools: [m], mcp: [\"tickets__read_*\"] }}\n    \
         members: {{ parent: people, max_keys: 2 }}\n\
         groups:\n  people: {{}}\n  acme: {{ budget: {{ usd: 10, window: 1d }} }}\n  globex: {{}}\n\
         rate_card:\n  m: {{ input_utok: 1, output_utok: 2 }}\nauth: {{ mode: keys }}\n"
    );
    let (addr, _) = governed(&yaml).await;
    let console = admin(addr);
    let globex = create_key(addr, json!({"name": "globex-key", "group": "globex"})).await;
    let globex_id = globex["id"].as_str().unwrap();

    let lead = sign_in_as(&idp, console, json!({"sub": "u9", "email": "lead@acme.example", "groups": ["acme-leads"]}))
        .await
        .unwrap();
    let session = session_of(console, &lead).await;
    assert_eq!((session["scope"].as_str(), session["tenant"].as_str()), (Some("full"), Some("acme")), "{session}");
    // A key made through the session lands in acme; globex's is not there to read.
    assert_eq!(create_as(console, &lead, "made-by-lead").await, 201);
    let keys = get_with(console, "/api/v1/admin/keys", &[("cookie", &lead)]).await;
    let keys: Value = serde_json::from_slice(&keys.body).unwrap();
    let names: Vec<&str> = keys["data"].as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["made-by-lead"], "{keys}");
    assert_eq!(keys["data"][0]["group"], "acme");
    let read = get_with(console, &format!("/api/v1/admin/keys/{globex_id}"), &[("cookie", &lead)]).await;
    assert_eq!(read.status, 404);
    assert_eq!(get_with(console, "/api/v1/admin/config", &[("cookie", &lead)]).await.status, 403);

    // A member of the team: their keys' group hangs under acme, with the
    // binding's pools and grants.
    let staff = sign_in_as(&idp, console, json!({"sub": "u10", "email": "dev@acme.example", "groups": "acme-staff"}))
        .await
        .unwrap();
    let csrf = session_of(console, &staff).await["csrf"].as_str().unwrap().to_owned();
    let headers = [("cookie", staff.as_str()), ("x-csrf-token", csrf.as_str()), ("content-type", "application/json")];
    let made = post(console, "/api/v1/self/keys", &headers, json!({"name": "laptop"}).to_string()).await;
    assert_eq!(made.status, 201, "{}", String::from_utf8_lossy(&made.body));
    let made: Value = serde_json::from_slice(&made.body).unwrap();
    assert!(made["group"].as_str().unwrap().starts_with("acme-u10-"), "{made}");
    assert_eq!((&made["pools"], &made["mcp"]), (&json!(["m"]), &json!(["tickets__read_*"])), "{made}");
    let groups = get_with(console, "/api/v1/admin/groups", &[("cookie", &lead)]).await;
    let groups: Value = serde_json::from_slice(&groups.body).unwrap();
    let groups: Vec<&str> = groups.as_array().unwrap().iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert_eq!(groups.len(), 2, "acme and the member's own group under it: {groups:?}");
    assert!(!groups.contains(&"globex") && !groups.contains(&"people"), "{groups:?}");

    // The lead's change is audited under its name and group.
    let audit = admin_call(addr, "GET", "/api/v1/admin/audit?limit=100", Some(ADMIN_TOKEN), None).await;
    let audit: Value = serde_json::from_slice(&audit.body).unwrap();
    assert!(
        audit["data"].as_array().unwrap().iter().any(|e| e["actor"] == "lead@acme.example (tenant admin of acme)"
            && e["action"] == "POST /api/v1/admin/keys"
            && e["outcome"] == 201),
        "{audit}"
    );
}
