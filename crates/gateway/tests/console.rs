//! The console's server side over real TCP: the login form and its
//! session cookie, anti-CSRF on every mutation, scopes through the console,
//! the security headers, and the admin API the pages draw from (history,
//! lane shares, request detail, spend as CSV, the redacted config and
//! candidate validation). The pages themselves are driven in a real
//! browser by `tests/console/console.test.mjs`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use std::time::Duration;

use common::console_session as session_of;
use common::*;
use serde_json::json;

const READER: &str = "reader-token-0123456789abcdef";

fn console_config() -> String {
    let mut yaml = lanes_config("mock://");
    yaml.push_str("  solo: { members: [{ model: lane-openai }] }\n");
    // A lane whose port refuses, first in its pool: every request fails over.
    yaml.push_str("  shaky: { hooks: [cheapest], members: [{ model: lane-refusing }, { model: lane-openai }] }\n");
    yaml = yaml.replace("models:\n", "models:\n  lane-refusing: { provider: refusing, model: wire-refusing }\n");
    yaml = yaml
        .replace("providers:\n", "providers:\n  refusing: { protocol: openai, base_url: \"http://127.0.0.1:1\" }\n");
    yaml.push_str("rate_card:\n  lane-openai: { input_utok: 1000, output_utok: 2000 }\n  lane-refusing: { input_utok: 1, output_utok: 1 }\n");
    yaml.push_str("telemetry: { request_log: { include_text: true } }\n");
    yaml.push_str("auth: { mode: keys }\ngovernance: { ledger_flush_interval: 20ms }\n");
    yaml.push_str(&format!(
        "admin: {{ tokens: [{{ name: ops, token: {ADMIN_TOKEN}, scope: full }}, {{ name: viewer, token: {READER}, scope: read }}] }}\n"
    ));
    yaml
}

/// Signs in through the form; the cookie pair to send back.
async fn sign_in(admin: std::net::SocketAddr, token: &str) -> String {
    let form = [("content-type", "application/x-www-form-urlencoded"), ("sec-fetch-site", "same-origin")];
    let reply = post(admin, "/ui/login", &form, format!("token={token}")).await;
    assert_eq!(reply.status, 303);
    assert_eq!(reply.headers["location"], "/ui/");
    let cookie = reply.headers["set-cookie"].to_str().unwrap().to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(!cookie.contains(token), "the cookie is a session id, never the token");
    cookie.split(';').next().unwrap().to_owned()
}

/// The anti-CSRF token the console document carries for this session.
async fn csrf_of(admin: std::net::SocketAddr, cookie: &str) -> String {
    session_of(admin, cookie).await["csrf"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn the_login_form_opens_a_session_and_every_mutation_needs_its_csrf_token() {
    let (addr, _) = governed(&console_config()).await;
    let admin = admin(addr);

    // Anonymous: sent to the form; every answer carries the policy.
    let anonymous = get(admin, "/ui/").await;
    assert_eq!(anonymous.status, 303);
    assert_eq!(anonymous.headers["location"], "/ui/login");
    let csp = anonymous.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'") && !csp.contains("unsafe"));
    let form = get(admin, "/ui/login").await;
    assert_eq!(form.status, 200);
    assert!(String::from_utf8_lossy(&form.body).contains("name=\"token\""));
    let asset = get(admin, "/ui/assets/app.js").await;
    assert_eq!(asset.status, 200);
    assert!(asset.headers["content-type"].to_str().unwrap().starts_with("text/javascript"));
    assert_eq!(get(admin, "/ui/assets/../../etc/passwd").await.status, 404);

    // A wrong token, or a post from another site, opens nothing.
    let urlencoded = ("content-type", "application/x-www-form-urlencoded");
    let wrong = post(admin, "/ui/login", &[urlencoded], "token=nope").await;
    assert_eq!((wrong.status.as_u16(), wrong.headers["location"].to_str().unwrap()), (303, "/ui/login?failed=1"));
    assert!(wrong.headers.get("set-cookie").is_none());
    let token = format!("token={ADMIN_TOKEN}");
    let cross = post(admin, "/ui/login", &[urlencoded, ("sec-fetch-site", "cross-site")], token.clone()).await;
    assert_eq!(cross.status, 403);
    let foreign = post(admin, "/ui/login", &[urlencoded, ("origin", "http://evil.example")], token).await;
    assert_eq!(foreign.status, 403);

    // Signed in: the pages and the API answer to the cookie.
    let cookie = sign_in(admin, ADMIN_TOKEN).await;
    assert_eq!(get_with(admin, "/ui/", &[("cookie", &cookie)]).await.status, 200);
    assert_eq!(get_with(admin, "/ui/nope", &[("cookie", &cookie)]).await.status, 404);
    assert_eq!(get_with(admin, "/api/v1/admin/keys", &[("cookie", &cookie)]).await.status, 200);
    let session = session_of(admin, &cookie).await;
    assert_eq!((session["name"].as_str(), session["scope"].as_str()), (Some("ops"), Some("full")));
    let csrf = csrf_of(admin, &cookie).await;
    assert_eq!(csrf.len(), 64);

    // A mutation without the token, with a wrong one, or from another site is refused.
    let body = json!({"name": "from-the-console"}).to_string();
    let no_csrf = post(admin, "/api/v1/admin/keys", &[("cookie", &cookie)], body.clone()).await;
    assert_eq!(no_csrf.status, 403);
    assert!(String::from_utf8_lossy(&no_csrf.body).contains("anti-CSRF"));
    let wrong_csrf = [("cookie", cookie.as_str()), ("x-csrf-token", "0000")];
    assert_eq!(post(admin, "/api/v1/admin/keys", &wrong_csrf, body.clone()).await.status, 403);
    let cross_site = [("cookie", cookie.as_str()), ("x-csrf-token", csrf.as_str()), ("sec-fetch-site", "cross-site")];
    assert_eq!(post(admin, "/api/v1/admin/keys", &cross_site, body.clone()).await.status, 403);
    let good = [("cookie", cookie.as_str()), ("x-csrf-token", csrf.as_str()), ("sec-fetch-site", "same-origin")];
    assert_eq!(post(admin, "/api/v1/admin/keys", &good, body.clone()).await.status, 201);

    // A read-only session reads and changes nothing.
    let viewer = sign_in(admin, READER).await;
    let viewer_csrf = csrf_of(admin, &viewer).await;
    assert_eq!(get_with(admin, "/api/v1/admin/keys", &[("cookie", &viewer)]).await.status, 200);
    let attempt = [("cookie", viewer.as_str()), ("x-csrf-token", viewer_csrf.as_str())];
    assert_eq!(post(admin, "/api/v1/admin/keys", &attempt, body).await.status, 403);

    // The audit log names who did what through the console.
    let audit = admin_call(addr, "GET", "/api/v1/admin/audit?limit=100", Some(ADMIN_TOKEN), None).await;
    let audit: serde_json::Value = serde_json::from_slice(&audit.body).unwrap();
    let entries = audit["data"].as_array().unwrap();
    let seen = |actor: &str, action: &str, outcome: u64| {
        entries.iter().any(|e| e["actor"] == actor && e["action"] == action && e["outcome"] == outcome)
    };
    assert!(seen("ops", "POST /api/v1/admin/keys", 201));
    assert!(seen("ops", "POST /api/v1/admin/keys", 403));
    assert!(seen("viewer", "POST /api/v1/admin/keys", 403));
    assert!(seen("unauthenticated", "POST /ui/login", 401));
    assert!(seen("ops", "POST /ui/login", 303));

    // Signing out ends the session.
    assert_eq!(post(admin, "/ui/logout", &[("cookie", &cookie)], "").await.status, 403);
    let out = post(admin, "/ui/logout", &[("cookie", &cookie), ("x-csrf-token", &csrf)], "").await;
    assert_eq!(out.status, 204);
    assert!(out.headers["set-cookie"].to_str().unwrap().contains("Max-Age=0"));
    assert_eq!(get_with(admin, "/api/v1/admin/keys", &[("cookie", &cookie)]).await.status, 401);
    assert_eq!(get_with(admin, "/ui/", &[("cookie", &cookie)]).await.status, 303);
}

/// The ledger page for `query`, once the writer stored a row.
async fn ledger_page(addr: std::net::SocketAddr, query: &str) -> serde_json::Value {
    for _ in 0..200 {
        let reply = admin_call(addr, "GET", &format!("/api/v1/admin/requests?{query}"), Some(ADMIN_TOKEN), None).await;
        let page: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        if !page["data"].as_array().unwrap().is_empty() {
            return page;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no ledger row for {query}");
}

#[tokio::test]
async fn the_api_the_pages_draw_from() {
    let (addr, gateway) = governed(&console_config()).await;
    switchyard_admin::sampler::spawn(&gateway);
    let key = create_key(addr, json!({"name": "charted"})).await;
    let secret = key["key"].as_str().unwrap();
    let auth = format!("Bearer {secret}");
    for _ in 0..5 {
        let body = chat_body(switchyard_protocol::ir::Protocol::OpenAi, "solo", "hi", false);
        let reply = post(addr, "/v1/chat/completions", &[("authorization", &auth)], body).await;
        assert_eq!(reply.status, 200);
    }
    let read_as = |token: &'static str, path: String| async move {
        let reply = admin_call(addr, "GET", &path, Some(token), None).await;
        assert_eq!(reply.status, 200, "{path}: {}", String::from_utf8_lossy(&reply.body));
        serde_json::from_slice::<serde_json::Value>(&reply.body).unwrap()
    };
    let read = |path: String| read_as(READER, path);

    // The sampler moves what the counters saw into the history.
    let mut hour = json!(null);
    for _ in 0..100 {
        hour = read("/api/v1/admin/history?window=1h".into()).await;
        if hour["total"]["requests"] == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(hour["total"]["requests"], 5, "{hour}");
    assert_eq!(hour["points"].as_array().unwrap().len(), 60);
    assert_eq!(hour["total"]["error_rate"], 0.0);
    assert!(hour["total"]["p50_ms"].as_f64().unwrap() > 0.0);
    assert!(hour["total"]["usd"].as_f64().unwrap() > 0.0);
    let day = read("/api/v1/admin/history?window=1d".into()).await;
    assert_eq!((day["step_minutes"].as_i64(), day["points"].as_array().unwrap().len()), (Some(15), 96));
    assert_eq!(admin_call(addr, "GET", "/api/v1/admin/history?window=1y", Some(READER), None).await.status, 400);

    // Each lane's share of its pool's recent traffic.
    let lanes = read("/api/v1/admin/lanes".into()).await;
    let solo = lanes.as_array().unwrap().iter().find(|p| p["pool"] == "solo").unwrap();
    assert_eq!(
        (solo["lanes"][0]["share"].as_f64(), solo["lanes"][0]["recent_requests"].as_u64()),
        (Some(1.0), Some(5))
    );
    // And its recent time to a 2xx head, from the same minutes.
    let (p50, p99) = (solo["lanes"][0]["p50_ms"].as_f64(), solo["lanes"][0]["p99_ms"].as_f64());
    assert!(p50.is_some_and(|p| p > 0.0) && p99 >= p50, "{solo}");

    // One request's row, by id.
    let page = read(format!("/api/v1/admin/requests?key={}&limit=5", key["id"].as_str().unwrap())).await;
    let first = &page["data"][0];
    // A read-only token reads the row and never its text; a scope that
    // reads text (full here) reads that too.
    assert_eq!(&read(format!("/api/v1/admin/requests/{}", first["id"])).await, first);
    let mut detail = read_as(ADMIN_TOKEN, format!("/api/v1/admin/requests/{}", first["id"])).await;
    assert!(detail["text"]["request"].as_str().unwrap().contains("\"hi\""), "{detail}");
    detail.as_object_mut().unwrap().remove("text");
    assert_eq!(&detail, first);
    assert_eq!(admin_call(addr, "GET", "/api/v1/admin/requests/987654", Some(READER), None).await.status, 404);

    // A request that failed over keeps its attempts; its text is kept
    // while include_text is on.
    let body = chat_body(switchyard_protocol::ir::Protocol::OpenAi, "shaky", "tell the console", false);
    let reply = post(addr, "/v1/chat/completions", &[("authorization", &auth)], body).await;
    assert_eq!(reply.status, 200);
    let page = ledger_page(addr, "pool=shaky").await;
    let detail = read_as(ADMIN_TOKEN, format!("/api/v1/admin/requests/{}", page["data"][0]["id"])).await;
    let attempts = detail["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{detail}");
    assert_eq!(
        (attempts[0]["lane"].as_str(), attempts[0]["failure"].as_str()),
        (Some("lane-refusing"), Some("unreachable"))
    );
    assert_eq!((attempts[1]["lane"].as_str(), attempts[1]["status"].as_u64()), (Some("lane-openai"), Some(200)));
    assert!(attempts[1]["failure"].is_null());
    assert!(detail["text"]["request"].as_str().unwrap().contains("tell the console"), "{detail}");
    assert!(detail["text"]["response"].as_str().is_some());
    assert!(first.get("attempts").is_none(), "a single attempt is the row itself");

    // Spend by key names each key.
    let spend = read("/api/v1/admin/spend?by=key".into()).await;
    let line = spend["data"].as_array().unwrap().iter().find(|l| l["value"] == key["id"]).unwrap();
    assert_eq!(line["name"], "charted", "{spend}");

    // Spend as CSV.
    let csv = admin_call(addr, "GET", "/api/v1/admin/spend?by=key&format=csv", Some(READER), None).await;
    assert_eq!(csv.status, 200);
    assert!(csv.headers["content-type"].to_str().unwrap().starts_with("text/csv"));
    assert!(csv.headers["content-disposition"].to_str().unwrap().starts_with("attachment"));
    let text = String::from_utf8_lossy(&csv.body).to_string();
    assert!(text.starts_with("key,name,requests,input_tokens,"), "{text}");
    assert!(text.contains(&format!("\"{}\",\"charted\",6,", key["id"].as_str().unwrap())), "{text}");

    // The running config, redacted.
    let config = read("/api/v1/admin/config".into()).await;
    let yaml = config["yaml"].as_str().unwrap();
    assert!(!yaml.contains(ADMIN_TOKEN) && !yaml.contains(READER) && yaml.contains("<redacted>"), "{yaml}");
    assert!(yaml.contains("lane-openai"));

    // A candidate is checked, never applied (and a read-only token may not).
    let validate = |text: &'static str| async move {
        let headers = [("authorization", format!("Bearer {ADMIN_TOKEN}")), ("content-type", "application/yaml".into())];
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let reply = post(admin(addr), "/api/v1/admin/config/validate", &headers, text).await;
        assert_eq!(reply.status, 200);
        serde_json::from_slice::<serde_json::Value>(&reply.body).unwrap()
    };
    let bad = validate("pools:\n  p: { members: [{ model: nowhere }] }\n").await;
    assert_eq!(bad["valid"], false);
    assert!(bad["problems"].to_string().contains("nowhere"), "{bad}");
    let good =
        validate("providers:\n  p: { protocol: openai, base_url: \"mock://\" }\nmodels:\n  m: { provider: p }\n").await;
    assert_eq!(good["valid"], true, "{good}");
    // Nothing was applied: the running config is what it was.
    assert_eq!(read("/api/v1/admin/config".into()).await["yaml"], config["yaml"]);
    // A value from the environment never comes back in a message.
    // (PATH stands for a secret: every process has one, so nothing is set here.)
    let path = std::env::var("PATH").unwrap();
    let leaky = validate("listen: ${PATH}\n").await;
    assert_eq!(leaky["valid"], false);
    assert!(!leaky.to_string().contains(&path), "{leaky}");
    assert!(leaky.to_string().contains("${PATH}"), "{leaky}");
    let refused = admin_call(addr, "POST", "/api/v1/admin/config/validate", Some(READER), None).await;
    assert_eq!(refused.status, 403);
}

#[tokio::test]
async fn the_playground_speaks_all_six_dialects_as_a_key() {
    let (addr, _gateway) = governed(&console_config()).await;
    let key = create_key(addr, json!({"name": "player"})).await;
    let secret = key["key"].as_str().unwrap();
    for dialect in ["openai", "responses", "anthropic", "gemini", "cohere", "bedrock"] {
        let body = json!({"dialect": dialect, "pool": "solo", "prompt": "say hi", "key": secret, "max_tokens": 32});
        let reply = admin_call(addr, "POST", "/api/v1/admin/playground", Some(ADMIN_TOKEN), Some(body)).await;
        assert_eq!(reply.status, 200, "{dialect}: {}", String::from_utf8_lossy(&reply.body));
        let answer: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        assert_eq!(answer["status"], 200, "{dialect}: {answer}");
        assert_eq!(answer["lane"], "lane-openai", "{dialect}: {answer}");
        assert!(!answer["text"].as_str().unwrap_or_default().is_empty(), "{dialect}: {answer}");
        assert!(answer["usd"].as_f64().is_some_and(|usd| usd > 0.0), "{dialect}: {answer}");
        assert!(answer["request"].as_str().unwrap().contains("say hi"), "{dialect}: {answer}");
    }
    // Without the key: the data plane's own refusal, in the dialect's shape
    // (AWS answers a missing credential 403).
    let body = json!({"dialect": "bedrock", "pool": "solo", "prompt": "say hi"});
    let reply = admin_call(addr, "POST", "/api/v1/admin/playground", Some(ADMIN_TOKEN), Some(body)).await;
    let answer: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(answer["status"], 403, "{answer}");
    assert!(answer["error"].as_str().unwrap().contains("Bearer"), "{answer}");
    let body = json!({"dialect": "smoke-signals", "pool": "solo", "prompt": "hi"});
    let reply = admin_call(addr, "POST", "/api/v1/admin/playground", Some(ADMIN_TOKEN), Some(body)).await;
    assert_eq!(reply.status, 400);
    let told = String::from_utf8_lossy(&reply.body);
    assert!(told.contains("use openai, responses, anthropic, gemini, cohere or bedrock"), "{told}");
}

/// A hostile playground call: a key that would smuggle a header, in the
/// dialects that send it bare and as a bearer token, is refused before
/// anything is sent; a pool name that would rewrite the path stays one
/// segment (the data plane finds no such pool).
#[tokio::test]
async fn the_playground_sends_no_smuggled_header_nor_path() {
    let (addr, _gateway) = governed(&console_config()).await;
    for dialect in ["anthropic", "gemini", "openai"] {
        let body = json!({"dialect": dialect, "pool": "solo", "prompt": "hi", "key": "sy-x\r\nx-evil: 1"});
        let reply = admin_call(addr, "POST", "/api/v1/admin/playground", Some(ADMIN_TOKEN), Some(body)).await;
        assert_eq!(reply.status, 400, "{dialect}: {}", String::from_utf8_lossy(&reply.body));
        assert!(String::from_utf8_lossy(&reply.body).contains("key: not a key"), "{dialect}");
    }
    let key = create_key(addr, json!({"name": "player"})).await;
    let secret = key["key"].as_str().unwrap();
    for pool in ["../v1/messages", "solo:generateContent?alt=sse&x={model}", "solo/converse-stream"] {
        for dialect in ["gemini", "bedrock"] {
            let body = json!({"dialect": dialect, "pool": pool, "prompt": "hi", "key": secret});
            let reply = admin_call(addr, "POST", "/api/v1/admin/playground", Some(ADMIN_TOKEN), Some(body)).await;
            assert_eq!(reply.status, 200, "{dialect} {pool}: {}", String::from_utf8_lossy(&reply.body));
            let answer: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
            assert_ne!(answer["status"], 200, "{dialect} {pool}: {answer}");
            assert!(answer["lane"].is_null(), "{dialect} {pool}: {answer}");
        }
    }
}
