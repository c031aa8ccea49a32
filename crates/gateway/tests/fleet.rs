//! Two gateway instances sharing one real PostgreSQL (the server
//! `scripts/services.sh` starts): a key made on one works on the other, a
//! revocation on one is refused by the other within a second, and both
//! write one ledger.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{admin_call, chat_body, create_key, governed, post, ADMIN_TOKEN};
use http::StatusCode;
use switchyard_protocol::ir::Protocol;

/// A new database on the test server, or `None` outside the test command.
async fn fresh_database() -> Option<String> {
    let Ok(url) = std::env::var("SWITCHYARD_TEST_POSTGRES_URL") else {
        assert!(std::env::var("CI").is_err(), "CI runs PostgreSQL: run the tests through scripts/test.sh");
        eprintln!("SWITCHYARD_TEST_POSTGRES_URL is not set: fleet cases skipped (scripts/test.sh starts a server)");
        return None;
    };
    let name = format!("fleet_{}_{}", std::process::id(), fastrand::u32(..));
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
    Some(format!("{}/{name}", url.rsplit_once('/').unwrap().0))
}

fn config(database: &str) -> String {
    format!(
        "auth: {{ mode: keys }}\nadmin: {{ tokens: [{ADMIN_TOKEN}] }}\nstorage: {{ postgres_url: \"{database}\" }}\n\
         governance: {{ ledger_flush_interval: 100ms }}\n\
         providers:\n  fake: {{ protocol: openai, base_url: mock:// }}\nmodels:\n  m: {{ provider: fake }}\n\
         rate_card:\n  m: {{ input_utok: 1, output_utok: 1 }}\n"
    )
}

async fn chat(addr: SocketAddr, key: &str) -> StatusCode {
    let auth = format!("Bearer {key}");
    post(addr, "/v1/chat/completions", &[("authorization", &auth)], chat_body(Protocol::OpenAi, "m", "hi", false))
        .await
        .status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_keys_revocations_and_the_ledger() {
    let Some(database) = fresh_database().await else { return };
    let (one, _) = governed(&config(&database)).await;
    let (two, _) = governed(&config(&database)).await;

    let created = create_key(one, serde_json::json!({"name": "shared"})).await;
    let (id, key) = (created["id"].as_str().unwrap(), created["key"].as_str().unwrap());
    let deadline = Instant::now() + Duration::from_secs(1);
    while chat(two, key).await != StatusCode::OK {
        assert!(Instant::now() < deadline, "a key made on one instance did not reach the other within 1 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(chat(one, key).await, StatusCode::OK);

    let revoked = admin_call(one, "DELETE", &format!("/api/v1/admin/keys/{id}"), Some(ADMIN_TOKEN), None).await;
    assert_eq!(revoked.status, StatusCode::OK);
    let at = Instant::now();
    while chat(two, key).await != StatusCode::UNAUTHORIZED {
        assert!(
            at.elapsed() < Duration::from_secs(1),
            "a revocation on one instance was not refused by the other within 1 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Both instances' requests are in the one ledger.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let spend = admin_call(two, "GET", "/api/v1/admin/spend?by=key&from=0", Some(ADMIN_TOKEN), None).await;
        let body: serde_json::Value = serde_json::from_slice(&spend.body).unwrap();
        let requests: u64 = body["data"].as_array().unwrap().iter().map(|row| row["requests"].as_u64().unwrap()).sum();
        if requests == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "ledger rows: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
