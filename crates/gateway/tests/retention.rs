//! Retention over real TCP, on SQLite and on PostgreSQL: a group that
//! keeps `redacted` text keeps it masked, `full` keeps it as said, a group
//! that keeps nothing keeps nothing; kept text is sealed at rest (the
//! store's bytes hold neither the prompt nor the reply) and opens in the
//! request's detail; a stream is kept as one whole reply; erasing an end
//! user (named by the body's field in any protocol or by the header)
//! removes their text and no one else's, audited; the purge removes text
//! past its days. Stored Responses conversations follow the same
//! retention: kept as long as their group's retention allows (only long
//! enough to continue where it keeps nothing), sealed at rest, and erased
//! with their end user.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::json;
use switchyard_protocol::ir::Protocol;

fn config(storage: &str) -> String {
    format!(
        "auth: {{ mode: keys }}\n{storage}\ngovernance: {{ ledger_flush_interval: 20ms }}\n\
         retention: {{ key: \"{key}\", days: 7 }}\n\
         groups:\n  support: {{ retention: redacted }}\n  legal: {{ retention: full }}\n  \
         support_eu: {{ parent: support }}\n  open: {{}}\n\
         providers:\n  mock: {{ protocol: openai, base_url: mock:// }}\n\
         models:\n  gpt: {{ provider: mock }}\n",
        key = "5a".repeat(32)
    )
}

/// A chat body in `protocol` naming end user `user` the protocol's way.
fn said(protocol: Protocol, text: &str, stream: bool, user: Option<&str>) -> String {
    let mut body: serde_json::Value = serde_json::from_str(&chat_body(protocol, "gpt", text, stream)).unwrap();
    match (protocol, user) {
        (Protocol::OpenAi, Some(user)) => body["user"] = json!(user),
        (Protocol::Anthropic, Some(user)) => body["metadata"] = json!({ "user_id": user }),
        _ => {}
    }
    body.to_string()
}

/// The newest ledger rows' ids, newest first, once `n` are written.
async fn row_ids(addr: std::net::SocketAddr, n: usize) -> Vec<i64> {
    for _ in 0..200 {
        let reply = admin_call(addr, "GET", "/api/v1/admin/requests?limit=50", Some(ADMIN_TOKEN), None).await;
        let page: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        let ids: Vec<i64> = page["data"].as_array().unwrap().iter().map(|r| r["id"].as_i64().unwrap()).collect();
        if ids.len() >= n {
            return ids;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{n} ledger rows never came");
}

/// A row's detail once its kept text is written (`None`: nothing kept
/// after a while).
async fn kept(addr: std::net::SocketAddr, id: i64, expect: bool) -> Option<serde_json::Value> {
    for _ in 0..if expect { 200 } else { 10 } {
        let reply = admin_call(addr, "GET", &format!("/api/v1/admin/requests/{id}"), Some(ADMIN_TOKEN), None).await;
        let detail: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
        if !detail["kept"].is_null() {
            return Some(detail["kept"].clone());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

#[tokio::test]
async fn kept_text_is_read_only_by_a_scope_that_reads_text() {
    let (reader, text_reader) = ("reader-token-0123456789abcdef", "text-reader-token-0123456789ab");
    let yaml = format!(
        "{}admin: {{ tokens: [{ADMIN_TOKEN}, {{ name: dashboards, token: {reader}, scope: read }}, \
         {{ name: investigations, token: {text_reader}, scope: read_text }}] }}\n",
        config("")
    );
    let (addr, _) = governed(&yaml).await;
    let legal = create_key(addr, json!({ "name": "legal", "group": "legal" })).await;
    let auth = format!("Bearer {}", legal["key"].as_str().unwrap());
    let reply = post(
        addr,
        "/v1/chat/completions",
        &[("authorization", auth.as_str())],
        said(Protocol::OpenAi, "the merger closes friday", false, None),
    )
    .await;
    assert_eq!(reply.status, 200);
    let id = row_ids(addr, 1).await[0];
    assert!(kept(addr, id, true).await.unwrap().to_string().contains("the merger closes friday"));
    let detail = |token: &'static str| async move {
        let reply = admin_call(addr, "GET", &format!("/api/v1/admin/requests/{id}"), Some(token), None).await;
        assert_eq!(reply.status, 200);
        serde_json::from_slice::<serde_json::Value>(&reply.body).unwrap()
    };
    // `read` reads the row, never its text.
    let read = detail(reader).await;
    assert_eq!(read["id"], id);
    assert!(read.get("kept").is_none() && !read.to_string().contains("merger"), "{read}");
    // `read_text` reads it, and (like `read`) changes nothing.
    assert!(detail(text_reader).await["kept"].to_string().contains("the merger closes friday"));
    let refused = admin_call(addr, "POST", "/api/v1/admin/keys", Some(text_reader), Some(json!({"name": "x"}))).await;
    assert_eq!(refused.status, 403);
    // `full` implies it.
    assert!(detail(ADMIN_TOKEN).await["kept"].to_string().contains("the merger closes friday"));
}

async fn keeps_seals_erases_and_purges(storage: &str) {
    let (addr, gateway) = governed(&config(storage)).await;
    let key = |group: &'static str| async move {
        let key = create_key(addr, json!({ "name": group, "group": group })).await;
        format!("Bearer {}", key["key"].as_str().unwrap())
    };
    let (support, legal, eu, open) =
        (key("support").await, key("legal").await, key("support_eu").await, key("open").await);
    let ask = |auth: String, protocol: Protocol, text: &'static str, stream: bool, user: Option<&'static str>| async move {
        let auth_header = if protocol == Protocol::Anthropic { "x-api-key" } else { "authorization" };
        let auth = if protocol == Protocol::Anthropic { auth.trim_start_matches("Bearer ").to_owned() } else { auth };
        let reply = post(
            addr,
            &ingress_path(protocol, "gpt", stream),
            &[(auth_header, auth.as_str())],
            said(protocol, text, stream, user),
        )
        .await;
        assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    };
    // Oldest first: the rows come back newest first.
    ask(support.clone(), Protocol::OpenAi, "mail me at ada@example.com", false, Some("alice")).await;
    ask(support.clone(), Protocol::Anthropic, "my card is 4111 1111 1111 1111", true, Some("alice")).await;
    ask(legal.clone(), Protocol::OpenAi, "write to ada@example.com", false, Some("bob")).await;
    ask(open.clone(), Protocol::OpenAi, "nothing kept of ada@example.com", false, Some("alice")).await;
    // The header names the user when the body does not; a child group keeps as its parent.
    let reply = post(
        addr,
        "/v1/chat/completions",
        &[("authorization", eu.as_str()), ("x-switchyard-user", "carol")],
        said(Protocol::OpenAi, "call +44 20 7946 0958", false, None),
    )
    .await;
    assert_eq!(reply.status, 200);
    let ids = row_ids(addr, 5).await;
    let (carol, open_row, bob, alice_stream, alice) = (ids[0], ids[1], ids[2], ids[3], ids[4]);

    // Redacted: masked on both sides.
    let text = kept(addr, alice, true).await.unwrap();
    assert_eq!(text["retention"], "redacted");
    let shown = text.to_string();
    assert!(shown.contains("[EMAIL_1]") && !shown.contains("ada@example.com"), "{shown}");
    assert!(text["reply"]["choices"][0]["message"]["content"].as_str().unwrap().contains("[EMAIL_1]"), "{shown}");
    // A stream is kept as one whole reply in its caller's protocol.
    let text = kept(addr, alice_stream, true).await.unwrap();
    let reply = &text["reply"];
    assert_eq!(reply["type"], "message", "{text}");
    assert!(reply["content"][0]["text"].as_str().unwrap().contains("[CARD_1]"), "{text}");
    assert!(!text.to_string().contains("4111"), "{text}");
    // Full: as said.
    let text = kept(addr, bob, true).await.unwrap();
    assert_eq!(text["retention"], "full");
    assert!(text.to_string().contains("ada@example.com"));
    let text = kept(addr, carol, true).await.unwrap();
    assert!(text.to_string().contains("[PHONE_1]"), "{text}");
    // A group that keeps nothing.
    assert_eq!(kept(addr, open_row, false).await, None);

    // What the writer did is in /stats.
    let kept_text = &stats(addr).await["governance"]["kept_text"];
    assert_eq!(kept_text["written"], 4, "{kept_text}");
    assert_eq!(kept_text["dropped"], 0);
    // Sealed at rest: the store's bytes hold none of it.
    let store = gateway.governance.as_ref().unwrap().stores.content.clone();
    let ledger = gateway.governance.as_ref().unwrap().stores.ledger.clone();
    let filter = switchyard_store::RowFilter { before: Some(bob + 1), limit: 1, ..Default::default() };
    let entry = ledger.rows(filter).await.unwrap()[0].row.entry;
    let record = store.find_content(entry).await.unwrap().unwrap();
    assert!(!record.sealed.windows(7).any(|w| w == b"example"), "sealed at rest");
    assert!(record.user_tag.as_deref().is_some_and(|t| !t.contains("bob")), "the user is a tag, not the id");

    // Erase alice: her two requests' text, no one else's; audited.
    let erased = admin_call(addr, "DELETE", "/api/v1/admin/users/alice/content", Some(ADMIN_TOKEN), None).await;
    assert_eq!(erased.status, 200, "{}", String::from_utf8_lossy(&erased.body));
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&erased.body).unwrap()["erased"], 2);
    assert_eq!(kept(addr, alice, false).await, None);
    assert_eq!(kept(addr, alice_stream, false).await, None);
    assert!(kept(addr, bob, true).await.is_some());
    let audit = admin_call(addr, "GET", "/api/v1/admin/audit", Some(ADMIN_TOKEN), None).await;
    let audit = String::from_utf8_lossy(&audit.body).into_owned();
    assert!(audit.contains("DELETE /api/v1/admin/users/alice/content") && audit.contains("user_tag:"), "{audit}");

    // Groups made over the admin API keep what they say, or what their parent keeps.
    let made =
        |body: serde_json::Value| admin_call(addr, "POST", "/api/v1/admin/groups", Some(ADMIN_TOKEN), Some(body));
    assert_eq!(made(json!({"name": "api_full", "retention": "full"})).await.status, 201);
    assert_eq!(made(json!({"name": "api_child", "parent": "support"})).await.status, 201);
    let refused = made(json!({"name": "api_bad", "retention": "everything"})).await;
    assert_eq!(refused.status, 400, "{}", String::from_utf8_lossy(&refused.body));
    for (n, (group, keeps)) in [("api_full", "full"), ("api_child", "redacted")].into_iter().enumerate() {
        let key = create_key(addr, json!({ "name": group, "group": group })).await;
        let auth = format!("Bearer {}", key["key"].as_str().unwrap());
        let said = said(Protocol::OpenAi, "from ada@example.com", false, Some("dave"));
        assert_eq!(post(addr, "/v1/chat/completions", &[("authorization", auth.as_str())], said).await.status, 200);
        let id = row_ids(addr, 6 + n).await[0];
        let text = kept(addr, id, true).await.unwrap();
        assert_eq!(text["retention"], keeps, "{group}: {text}");
    }
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(
            &admin_call(addr, "DELETE", "/api/v1/admin/users/dave/content", Some(ADMIN_TOKEN), None).await.body
        )
        .unwrap()["erased"],
        2
    );

    // The purge: nothing past its days yet; everything a week and a day on.
    let now = switchyard_state::governance::now_ms();
    assert_eq!(switchyard_state::retention::purge(&*store, 7, now).await.unwrap(), 0);
    assert_eq!(switchyard_state::retention::purge(&*store, 7, now + 8 * 86_400_000).await.unwrap(), 2);
    assert_eq!(kept(addr, bob, false).await, None);
}

#[tokio::test]
async fn sqlite_keeps_seals_erases_and_purges() {
    let path = std::env::temp_dir().join(format!("switchyard-retention-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    keeps_seals_erases_and_purges(&format!("storage: {{ sqlite_path: \"{}\" }}", path.display())).await;
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn postgres_keeps_seals_erases_and_purges() {
    let Ok(url) = std::env::var("SWITCHYARD_TEST_POSTGRES_URL") else {
        assert!(std::env::var("CI").is_err(), "CI runs PostgreSQL: run the tests through scripts/test.sh");
        eprintln!("SWITCHYARD_TEST_POSTGRES_URL is not set: the PostgreSQL case is skipped");
        return;
    };
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let name = format!("retention_{}", std::process::id());
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    let base = url.rsplit_once('/').map_or(url.as_str(), |(base, _)| base);
    keeps_seals_erases_and_purges(&format!("storage: {{ postgres_url: \"{base}/{name}\" }}")).await;
}

/// A Responses turn by `auth` for end user `user`: the stored response's id.
async fn respond(addr: std::net::SocketAddr, auth: &str, text: &str, previous: Option<&str>) -> Reply {
    let mut body = json!({"model": "gpt", "input": text, "user": "alice", "max_output_tokens": 16});
    if let Some(previous) = previous {
        body["previous_response_id"] = json!(previous);
    }
    post(addr, "/v1/responses", &[("authorization", auth)], body.to_string()).await
}

/// The stored object of response `id` of key `owner`, once kept.
async fn stored_object(gateway: &switchyard_gateway::Gateway, owner: &str, id: &str) -> switchyard_store::KeptObject {
    for _ in 0..200 {
        let now = switchyard_state::governance::now_ms() as i64;
        let found =
            gateway.kept.objects.get_object(switchyard_store::ObjectKind::Response, owner.into(), id.into(), now);
        if let Some(object) = found.await.unwrap() {
            return object;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("response {id} was never stored");
}

async fn stored_responses_follow_retention(storage: &str) {
    let (addr, gateway) = governed(&config(storage)).await;
    let key = |group: &'static str| async move {
        let key = create_key(addr, json!({ "name": group, "group": group })).await;
        (key["id"].as_str().unwrap().to_owned(), format!("Bearer {}", key["key"].as_str().unwrap()))
    };
    let ((legal_id, legal), (open_id, open)) = (key("legal").await, key("open").await);
    let id_of = |reply: &Reply| {
        assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
        serde_json::from_slice::<serde_json::Value>(&reply.body).unwrap()["id"].as_str().unwrap().to_owned()
    };
    let kept_full = id_of(&respond(addr, &legal, "my mail is ada@example.com", None).await);
    let kept_none = id_of(&respond(addr, &open, "my mail is ada@example.com", None).await);
    let now = switchyard_state::governance::now_ms() as i64;
    let day = 86_400_000;
    // Kept as long as the group's retention says: `full` keeps 7 days here
    // (not responses.ttl's 30); a group that keeps nothing an hour.
    let full = stored_object(&gateway, &legal_id, &kept_full).await;
    let expires = full.expires_ms.unwrap() - now;
    assert!((7 * day - 60_000..=7 * day + 60_000).contains(&expires), "{expires} ms");
    let none = stored_object(&gateway, &open_id, &kept_none).await;
    let expires = none.expires_ms.unwrap() - now;
    assert!((3_600_000 - 60_000..=3_600_000 + 60_000).contains(&expires), "{expires} ms");
    // Sealed at rest, both: the store's bytes hold none of the conversation.
    for object in [&full, &none] {
        assert!(!object.body.windows(7).any(|w| w == b"example"), "sealed at rest");
        assert!(!object.body.windows(8).any(|w| w == b"you said"), "the reply too");
        assert!(object.user_tag.as_deref().is_some_and(|t| !t.contains("alice")), "{:?}", object.user_tag);
    }
    // And still read and continued by their key.
    let got = get_with(addr, &format!("/v1/responses/{kept_full}"), &[("authorization", legal.as_str())]).await;
    assert_eq!(got.status, 200);
    assert!(String::from_utf8_lossy(&got.body).contains("you said"), "{}", String::from_utf8_lossy(&got.body));
    let next = respond(addr, &open, "and my name?", Some(&kept_none)).await;
    assert_eq!(next.status, 200, "{}", String::from_utf8_lossy(&next.body));
    let continued = id_of(&next);
    stored_object(&gateway, &open_id, &continued).await;

    // Erasing alice removes her stored conversations, of every group.
    let erased = admin_call(addr, "DELETE", "/api/v1/admin/users/alice/content", Some(ADMIN_TOKEN), None).await;
    assert_eq!(erased.status, 200, "{}", String::from_utf8_lossy(&erased.body));
    let erased: serde_json::Value = serde_json::from_slice(&erased.body).unwrap();
    assert_eq!(erased["responses"], 3, "{erased}");
    for (auth, id) in [(&legal, &kept_full), (&open, &kept_none), (&open, &continued)] {
        let gone = get_with(addr, &format!("/v1/responses/{id}"), &[("authorization", auth.as_str())]).await;
        assert_eq!(gone.status, 404, "{id}");
    }
    let after = respond(addr, &legal, "go on", Some(&kept_full)).await;
    assert_eq!(after.status, 400, "{}", String::from_utf8_lossy(&after.body));
}

#[tokio::test]
async fn sqlite_stored_responses_follow_retention() {
    let path = std::env::temp_dir().join(format!("switchyard-retention-responses-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    stored_responses_follow_retention(&format!("storage: {{ sqlite_path: \"{}\" }}", path.display())).await;
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn postgres_stored_responses_follow_retention() {
    let Ok(url) = std::env::var("SWITCHYARD_TEST_POSTGRES_URL") else {
        assert!(std::env::var("CI").is_err(), "CI runs PostgreSQL: run the tests through scripts/test.sh");
        eprintln!("SWITCHYARD_TEST_POSTGRES_URL is not set: the PostgreSQL case is skipped");
        return;
    };
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let name = format!("retention_responses_{}", std::process::id());
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    let base = url.rsplit_once('/').map_or(url.as_str(), |(base, _)| base);
    stored_responses_follow_retention(&format!("storage: {{ postgres_url: \"{base}/{name}\" }}")).await;
}

#[test]
fn a_group_that_keeps_text_without_a_key_is_refused_at_boot() {
    let yaml = "groups:\n  support: { retention: full }\n\
                providers:\n  mock: { protocol: openai, base_url: mock:// }\nmodels:\n  gpt: { provider: mock }\n";
    let err = switchyard_config::load(yaml, &|_| None).unwrap_err().to_string();
    assert!(err.contains("groups.support.retention") && err.contains("openssl rand -hex 32"), "{err}");
}
