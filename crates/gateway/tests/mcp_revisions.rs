//! The MCP gateway's two revisions over real TCP, in front of the vendor
//! fake's MCP server speaking each (`/mcp` keeps sessions, `/mcp/stateless`
//! is 2026-07-28 and refuses a request without its envelope): a stateless
//! caller and a session's caller each reach both kinds of server; the
//! handles the gateway mints (session ids, cursors) open only for the key,
//! route, servers and lifetime they were minted for, and say why not
//! otherwise; `/mcp` is an OAuth protected resource whose tokens must name
//! it as their audience (and a token naming only it opens no model route).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;
use crate::mcp::{code, McpClient};

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use common::{identity_jwks as jwks, identity_key as signing_key, unix_now as now};
use serde_json::{json, Value};

const HANDLE_REFUSED: i64 = -32004;
const INVALID_PARAMS: i64 = -32602;
const STATELESS: &str = "2026-07-28";
const SECRET: &str = "a-fleet-wide-secret-of-at-least-32-chars";

/// A governed gateway fronting the fake as `mock` (sessions) and `modern`
/// (2026-07-28); `handles` under `mcp.handles`.
async fn fronting(handles: &str) -> SocketAddr {
    let upstream = mock_upstream().await;
    let yaml = format!(
        "auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n\
         mcp:\n  handles: {{ secret: \"{SECRET}\"{handles} }}\n  servers:\n    \
         mock: {{ url: \"http://{upstream}/mcp\" }}\n    \
         modern: {{ url: \"http://{upstream}/mcp/stateless\", protocol: \"2026-07-28\" }}\n"
    );
    governed(&yaml).await.0
}

async fn key(addr: SocketAddr, spec: Value) -> String {
    create_key(addr, spec).await["key"].as_str().unwrap().to_owned()
}

/// One 2026-07-28 request on `path` as `bearer`: its status, headers and
/// answer. `tweak` changes the headers sent.
async fn stateless(
    addr: SocketAddr,
    path: &str,
    bearer: &str,
    method: &str,
    params: Value,
    tweak: impl Fn(&mut Vec<(String, String)>),
) -> (u16, http::HeaderMap, Value) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    });
    let mut headers = vec![
        ("authorization".to_owned(), format!("Bearer {bearer}")),
        ("accept".to_owned(), "application/json, text/event-stream".to_owned()),
        ("mcp-protocol-version".to_owned(), STATELESS.to_owned()),
        ("mcp-method".to_owned(), method.to_owned()),
    ];
    if let Some(name) = params.get("name").or_else(|| params.get("uri")).and_then(Value::as_str) {
        headers.push(("mcp-name".to_owned(), name.to_owned()));
    }
    tweak(&mut headers);
    let sent: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let message = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
    let reply = post(addr, path, &sent, message.to_string()).await;
    (reply.status.as_u16(), reply.headers, serde_json::from_slice(&reply.body).unwrap_or(Value::Null))
}

fn names(answer: &Value) -> Vec<String> {
    let tools = answer["result"]["tools"].as_array().unwrap_or_else(|| panic!("{answer}"));
    tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn each_era_of_caller_reaches_each_kind_of_server() {
    let addr = fronting("").await;
    let everything = key(addr, json!({"name": "everything", "mcp": ["*"]})).await;
    let same = |_: &mut Vec<(String, String)>| {};

    // A stateless caller: the probe names both revisions, no session is
    // minted, results carry what 2026-07-28 asks for.
    let (status, headers, discovered) = stateless(addr, "/mcp", &everything, "server/discover", json!({}), same).await;
    assert_eq!(status, 200, "{discovered}");
    let versions = discovered["result"]["supportedVersions"].as_array().unwrap();
    assert!(versions.contains(&json!(STATELESS)) && versions.contains(&json!("2025-11-25")), "{discovered}");
    assert_eq!(discovered["result"]["resultType"], "complete");
    assert!(!headers.contains_key("mcp-session-id"));
    let (status, headers, listed) = stateless(addr, "/mcp", &everything, "tools/list", json!({}), same).await;
    assert_eq!(status, 200, "{listed}");
    assert!(!headers.contains_key("mcp-session-id"), "a stateless caller is handed no session");
    let mut listed_names = names(&listed);
    listed_names.sort();
    assert_eq!(listed_names, ["mock__delete_everything", "mock__echo", "modern__delete_everything", "modern__echo"]);
    assert_eq!(listed["result"]["cacheScope"], "private", "one key's listing is never shared");
    assert_eq!(listed["result"]["ttlMs"], 0);
    assert_eq!(listed["result"]["resultType"], "complete");
    for tool in ["modern__echo", "mock__echo"] {
        let params = json!({"name": tool, "arguments": {"text": format!("via {tool}")}});
        let (status, _, called) = stateless(addr, "/mcp", &everything, "tools/call", params, same).await;
        assert_eq!(status, 200, "{called}");
        assert_eq!(called["result"]["content"][0]["text"], format!("via {tool}"), "{called}");
        assert_eq!(called["result"]["resultType"], "complete");
    }

    // A session's caller (2025-11-25) reaches the stateless server too.
    let mut session = McpClient::open(addr, Some(&everything)).await.unwrap();
    let called =
        session.request("tools/call", json!({"name": "modern__echo", "arguments": {"text": "old caller"}})).await;
    assert_eq!(called["result"]["content"][0]["text"], "old caller", "{called}");
    let prompt = session.request("prompts/get", json!({"name": "modern__greet", "arguments": {"who": "Ada"}})).await;
    assert_eq!(prompt["result"]["messages"][0]["content"]["text"], "Hello, Ada!", "{prompt}");

    // The revision's envelope, checked as its servers check it.
    let unmeta = |h: &mut Vec<(String, String)>| h.retain(|(n, _)| n != "mcp-method");
    let (status, _, refused) = stateless(addr, "/mcp", &everything, "tools/list", json!({}), unmeta).await;
    assert_eq!((status, code(&refused)), (400, -32020), "{refused}");
    let other_name = |h: &mut Vec<(String, String)>| {
        h.retain(|(n, _)| n != "mcp-name");
        h.push(("mcp-name".into(), "mock__delete_everything".into()));
    };
    let params = json!({"name": "mock__echo", "arguments": {"text": "x"}});
    let (status, _, refused) = stateless(addr, "/mcp", &everything, "tools/call", params, other_name).await;
    assert_eq!((status, code(&refused)), (400, -32020), "a name header that disagrees with the body: {refused}");
    let future = |h: &mut Vec<(String, String)>| {
        h.retain(|(n, _)| n != "mcp-protocol-version");
        h.push(("mcp-protocol-version".into(), "2099-01-01".into()));
    };
    let (status, _, refused) = stateless(addr, "/mcp", &everything, "tools/list", json!({}), future).await;
    assert_eq!((status, code(&refused)), (400, -32020), "the header disagrees with _meta: {refused}");
    let bare = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let auth = format!("Bearer {everything}");
    let sent = [("authorization", auth.as_str()), ("mcp-protocol-version", STATELESS), ("mcp-method", "tools/list")];
    let reply = post(addr, "/mcp", &sent, bare).await;
    let refused: Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!((reply.status.as_u16(), code(&refused)), (400, INVALID_PARAMS), "no envelope: {refused}");

    // Every call is a ledger row, whichever era called.
    let rows = ledger_rows(addr, "operation=mcp&status=200", 3).await;
    let lanes: Vec<&str> = rows.iter().map(|r| r["lane"].as_str().unwrap()).collect();
    assert!(lanes.contains(&"mcp:modern") && lanes.contains(&"mcp:mock"), "{lanes:?}");
}

/// `handle` with one character changed.
fn altered(handle: &str) -> String {
    let mut bytes = handle.as_bytes().to_vec();
    let at = bytes.len() / 2;
    bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
    String::from_utf8(bytes).unwrap()
}

/// A message naming session `session` on `path` as `bearer`.
async fn in_session(addr: SocketAddr, path: &str, bearer: &str, session: &str) -> (u16, Value) {
    let auth = format!("Bearer {bearer}");
    let sent = [("authorization", auth.as_str()), ("mcp-session-id", session), ("accept", "application/json")];
    let message = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}).to_string();
    let reply = post(addr, path, &sent, message).await;
    (reply.status.as_u16(), serde_json::from_slice(&reply.body).unwrap_or(Value::Null))
}

/// `initialize` on `path` as `bearer`: the session id minted.
async fn open(addr: SocketAddr, path: &str, bearer: &str) -> String {
    let auth = format!("Bearer {bearer}");
    let hello = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let reply = post(addr, path, &[("authorization", auth.as_str())], hello.to_string()).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    reply.headers["mcp-session-id"].to_str().unwrap().to_owned()
}

fn refused_for(answer: &Value, reason: &str) {
    assert_eq!(code(answer), HANDLE_REFUSED, "{answer}");
    assert_eq!(answer["error"]["data"]["reason"], reason, "{answer}");
}

#[tokio::test]
async fn a_session_id_opens_only_for_its_key_its_route_and_its_lifetime() {
    let addr = fronting(", ttl: 2s").await;
    let alice = key(addr, json!({"name": "alice", "mcp": ["*"]})).await;
    let mallory = key(addr, json!({"name": "mallory", "mcp": ["*"]})).await;
    let session = open(addr, "/mcp", &alice).await;
    let (status, answer) = in_session(addr, "/mcp", &alice, &session).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(names(&answer).len(), 4);

    // Another key replays it: refused, and nothing of it is listed.
    let (status, answer) = in_session(addr, "/mcp", &mallory, &session).await;
    assert_eq!(status, 404);
    refused_for(&answer, "other_caller");
    assert!(answer.get("result").is_none());
    // Its own key on another route (one server of the two).
    let (status, answer) = in_session(addr, "/mcp/mock", &alice, &session).await;
    assert_eq!(status, 404);
    refused_for(&answer, "other_route");
    // A session opened on that route lists that route's server alone, and
    // does not open on `/mcp`.
    let narrow = open(addr, "/mcp/mock", &alice).await;
    let (_, answer) = in_session(addr, "/mcp/mock", &alice, &narrow).await;
    assert_eq!(names(&answer), ["mock__echo", "mock__delete_everything"]);
    refused_for(&in_session(addr, "/mcp", &alice, &narrow).await.1, "other_route");
    // A call on the narrow route naming the other server's tool: unknown there.
    let auth = format!("Bearer {alice}");
    let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "modern__echo", "arguments": {"text": "x"}}});
    let reply =
        post(addr, "/mcp/mock", &[("authorization", &auth), ("mcp-session-id", &narrow)], call.to_string()).await;
    assert_eq!(code(&serde_json::from_slice(&reply.body).unwrap()), INVALID_PARAMS);
    // Altered by one character, or made up.
    refused_for(&in_session(addr, "/mcp", &alice, &altered(&session)).await.1, "forged");
    refused_for(&in_session(addr, "/mcp", &alice, "0123456789abcdef0123456789abcdef").await.1, "forged");
    // Minted by a gateway with another secret.
    let other = {
        let upstream = mock_upstream().await;
        let yaml = format!(
            "auth: {{ mode: keys }}\nmcp:\n  handles: {{ secret: another-secret-of-at-least-32-characters }}\n  \
             servers:\n    mock: {{ url: \"http://{upstream}/mcp\" }}\n"
        );
        governed(&yaml).await.0
    };
    let theirs = key(other, json!({"name": "alice", "mcp": ["*"]})).await;
    let foreign = open(other, "/mcp", &theirs).await;
    refused_for(&in_session(addr, "/mcp", &alice, &foreign).await.1, "forged");
    // A route that does not exist.
    assert_eq!(in_session(addr, "/mcp/nowhere", &alice, &session).await.0, 404);
    // Past its lifetime (2 s), though used all along.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let (status, answer) = in_session(addr, "/mcp", &alice, &session).await;
    assert_eq!(status, 404);
    refused_for(&answer, "expired");
}

#[tokio::test]
async fn a_cursor_opens_only_for_its_key_its_route_and_its_list() {
    let addr = fronting(", page_size: 3").await;
    let alice = key(addr, json!({"name": "alice", "mcp": ["*"]})).await;
    let mallory = key(addr, json!({"name": "mallory", "mcp": ["*"]})).await;
    let same = |_: &mut Vec<(String, String)>| {};
    let (_, _, first) = stateless(addr, "/mcp", &alice, "tools/list", json!({}), same).await;
    assert_eq!(names(&first).len(), 3, "{first}");
    let cursor = first["result"]["nextCursor"].as_str().unwrap().to_owned();
    let (_, _, second) = stateless(addr, "/mcp", &alice, "tools/list", json!({"cursor": cursor}), same).await;
    assert_eq!(names(&second).len(), 1, "{second}");
    assert!(second["result"].get("nextCursor").is_none(), "the last page");
    let mut all = names(&first);
    all.extend(names(&second));
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 4, "every tool once: {all:?}");

    let refused = |answer: &Value, reason: &str| {
        assert_eq!(code(answer), INVALID_PARAMS, "{answer}");
        assert_eq!(answer["error"]["data"]["reason"], reason, "{answer}");
        assert!(answer.get("result").is_none());
    };
    let replay = json!({"cursor": cursor});
    refused(&stateless(addr, "/mcp", &mallory, "tools/list", replay.clone(), same).await.2, "other_caller");
    refused(&stateless(addr, "/mcp/modern", &alice, "tools/list", replay.clone(), same).await.2, "other_route");
    refused(&stateless(addr, "/mcp", &alice, "prompts/list", replay.clone(), same).await.2, "other_kind");
    let forged = json!({"cursor": altered(&cursor)});
    refused(&stateless(addr, "/mcp", &alice, "tools/list", forged, same).await.2, "forged");
    // A session id is no cursor, and a cursor no session id.
    let session = open(addr, "/mcp", &alice).await;
    refused(&stateless(addr, "/mcp", &alice, "tools/list", json!({"cursor": session}), same).await.2, "other_kind");
    refused_for(&in_session(addr, "/mcp", &alice, &cursor).await.1, "other_kind");
}

const ISSUER: &str = "https://idp.acme.example";
const RESOURCE: &str = "https://gateway.acme.example/mcp";

fn token(aud: Value) -> String {
    let claims =
        json!({"iss": ISSUER, "aud": aud, "sub": "agent-7", "team": "research", "iat": now(), "exp": now() + 600});
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some("k1".to_owned());
    jsonwebtoken::encode(&header, &claims, &signing_key("k1")).unwrap()
}

#[tokio::test]
async fn mcp_is_a_protected_resource_whose_tokens_must_name_it() {
    let idp = spawn(axum::Router::new().route("/jwks", axum::routing::get(|| async { axum::Json(jwks("k1")) }))).await;
    let upstream = mock_upstream().await;
    let yaml = format!(
        "auth:\n  mode: keys\n  jwt:\n    - name: acme\n      issuer: \"{ISSUER}\"\n      jwks_url: \"http://{idp}/jwks\"\n      \
         audience: [switchyard, \"{RESOURCE}\", \"{RESOURCE}/mock\"]\n      group_claim: team\n      mcp: [\"*\"]\n\
         groups:\n  research: {{}}\n\
         providers:\n  vendor: {{ protocol: openai, base_url: \"http://{upstream}\" }}\n\
         models:\n  gpt-4o-mini: {{ provider: vendor }}\n\
         mcp:\n  oauth: {{ resource: \"{RESOURCE}\", authorization_servers: [\"{ISSUER}\"], scopes: [mcp] }}\n  \
         servers:\n    mock: {{ url: \"http://{upstream}/mcp\" }}\n"
    );
    let addr = governed(&yaml).await.0;

    // RFC 9728 metadata, for `/mcp` and for a route of one name.
    let metadata = get(addr, "/.well-known/oauth-protected-resource/mcp").await;
    assert_eq!(metadata.status, 200);
    let metadata: Value = serde_json::from_slice(&metadata.body).unwrap();
    assert_eq!(metadata["resource"], RESOURCE);
    assert_eq!(metadata["authorization_servers"], json!([ISSUER]));
    assert_eq!(metadata["scopes_supported"], json!(["mcp"]));
    let named: Value =
        serde_json::from_slice(&get(addr, "/.well-known/oauth-protected-resource/mcp/mock").await.body).unwrap();
    assert_eq!(named["resource"], format!("{RESOURCE}/mock"));
    assert_eq!(get(addr, "/.well-known/oauth-protected-resource/mcp/nowhere").await.status, 404);

    // No credential: 401 pointing at the metadata.
    let discover = |bearer: Option<String>, path: &'static str| async move {
        let (status, headers, answer) = match bearer {
            Some(bearer) => stateless(addr, path, &bearer, "server/discover", json!({}), |_| {}).await,
            None => {
                let reply =
                    post(addr, path, &[], json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string()).await;
                (reply.status.as_u16(), reply.headers, serde_json::from_slice(&reply.body).unwrap_or(Value::Null))
            }
        };
        let challenge = headers.get("www-authenticate").map(|v| v.to_str().unwrap().to_owned());
        (status, challenge, answer)
    };
    let (status, challenge, _) = discover(None, "/mcp").await;
    assert_eq!(status, 401);
    let challenge = challenge.unwrap();
    assert!(
        challenge
            .contains("resource_metadata=\"https://gateway.acme.example/.well-known/oauth-protected-resource/mcp\""),
        "{challenge}"
    );
    // A valid token for the gateway's model routes, not for this resource.
    let (status, challenge, answer) = discover(Some(token(json!("switchyard"))), "/mcp").await;
    assert_eq!(status, 401, "{answer}");
    let challenge = challenge.unwrap();
    assert!(challenge.contains("error=\"invalid_token\"") && challenge.contains("resource_metadata="), "{challenge}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("audience"), "{answer}");
    // A token naming it opens it (one of several audiences is enough).
    let (status, _, answer) = discover(Some(token(json!(["switchyard", RESOURCE]))), "/mcp").await;
    assert_eq!(status, 200, "{answer}");
    let (status, _, answer) = discover(Some(token(json!(RESOURCE))), "/mcp/mock").await;
    assert_eq!(status, 200, "/mcp's token opens its routes: {answer}");
    // A token for one route opens that route only.
    let narrow = token(json!(format!("{RESOURCE}/mock")));
    assert_eq!(discover(Some(narrow.clone()), "/mcp/mock").await.0, 200);
    assert_eq!(discover(Some(narrow), "/mcp").await.0, 401);
    // A virtual key is the gateway's own credential: no audience to name.
    let key = key(addr, json!({"name": "k", "mcp": ["*"]})).await;
    assert_eq!(discover(Some(key), "/mcp").await.0, 200);

    // RFC 8707 the other way: a token minted for `/mcp` (or a route under
    // it) alone does not open the model routes; one naming the gateway's
    // own audience does, with or without the MCP resource beside it.
    let chat = |aud: Value| async move {
        let auth = format!("Bearer {}", token(aud));
        let body = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]});
        let reply = post(addr, "/v1/chat/completions", &[("authorization", auth.as_str())], body.to_string()).await;
        (reply.status.as_u16(), String::from_utf8_lossy(&reply.body).into_owned())
    };
    for aud in [json!(RESOURCE), json!(format!("{RESOURCE}/mock")), json!([RESOURCE, format!("{RESOURCE}/mock")])] {
        let (status, body) = chat(aud.clone()).await;
        assert_eq!(status, 401, "{aud}: {body}");
        assert!(body.contains("audience names only the MCP resource"), "{body}");
    }
    for aud in [json!("switchyard"), json!([RESOURCE, "switchyard"])] {
        let (status, body) = chat(aud.clone()).await;
        assert_eq!(status, 200, "{aud}: {body}");
    }
}

/// `DELETE /mcp` naming `session` as `bearer`: its status and answer.
async fn end(addr: SocketAddr, bearer: &str, session: &str) -> (u16, Value) {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let request = http::Request::delete(format!("http://{addr}/mcp"))
        .header("authorization", format!("Bearer {bearer}"))
        .header("mcp-session-id", session)
        .body(http_body_util::Full::default())
        .unwrap();
    let response = client.request(request).await.unwrap();
    let status = response.status().as_u16();
    let body = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn hostile_handles_and_headers_are_refused_and_end_nothing() {
    let addr = fronting("").await;
    let alice = key(addr, json!({"name": "alice", "mcp": ["*"]})).await;
    let mallory = key(addr, json!({"name": "mallory", "mcp": ["*"]})).await;
    let session = open(addr, "/mcp", &alice).await;
    // Another key cannot end it; its own key can, once.
    let (status, answer) = end(addr, &mallory, &session).await;
    assert_eq!(status, 404);
    refused_for(&answer, "other_caller");
    assert_eq!(in_session(addr, "/mcp", &alice, &session).await.0, 200, "still open");
    assert_eq!(end(addr, &alice, &session).await.0, 200);
    // Ended: the handle still opens, but the gateway has no such session.
    let (status, answer) = in_session(addr, "/mcp", &alice, &session).await;
    assert_eq!(status, 404, "{answer}");
    assert_eq!(answer["error"]["message"], "Session not found");

    let same = |_: &mut Vec<(String, String)>| {};
    // A cursor far longer than any minted, and one that is not base64.
    for cursor in ["A".repeat(100_000), "!!not a cursor!!".to_owned()] {
        let (status, _, answer) = stateless(addr, "/mcp", &alice, "tools/list", json!({"cursor": cursor}), same).await;
        assert_eq!((status, code(&answer)), (200, INVALID_PARAMS), "{answer}");
        assert_eq!(answer["error"]["data"]["reason"], "forged");
    }
    // A name header wrapped as the revision allows is read; a corrupt
    // wrapping never matches.
    let wrapped = |value: &'static str| {
        move |h: &mut Vec<(String, String)>| {
            h.retain(|(n, _)| n != "mcp-name");
            h.push(("mcp-name".into(), value.into()));
        }
    };
    let params = json!({"name": "mock__echo", "arguments": {"text": "wrapped"}});
    let (status, _, answer) =
        stateless(addr, "/mcp", &alice, "tools/call", params.clone(), wrapped("=?base64?bW9ja19fZWNobw==?=")).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "wrapped");
    let (status, _, answer) =
        stateless(addr, "/mcp", &alice, "tools/call", params, wrapped("=?base64?bW9ja19fZWNobw=?=")).await;
    assert_eq!((status, code(&answer)), (400, -32020), "{answer}");
    // A stateless caller is handed nothing to replay: no session id, and
    // no cursor without paging.
    let (_, headers, listed) = stateless(addr, "/mcp", &alice, "tools/list", json!({}), same).await;
    assert!(!headers.contains_key("mcp-session-id") && listed["result"].get("nextCursor").is_none(), "{listed}");
}
