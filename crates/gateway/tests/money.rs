//! Exact money over real TCP: an Anthropic upstream reports every kind of
//! prompt it bills apart (cache reads, five-minute and hour-long cache
//! writes), whole and streamed; the ledger row (SQLite) keeps each kind
//! and costs exactly what the rate card says, to the nano-USD, and the
//! caller is told the usage is exact. A reply without usage is billed an
//! estimate, and both the caller and the row say so, and why.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

use axum::body::{Body, Bytes};
use axum::response::Response;
use common::*;
use serde_json::json;

/// What the fake reports: 100 uncached prompt tokens, 2,000 read from the
/// cache, 3,000 written to it (1,000 for five minutes, 2,000 for an hour),
/// and 500 generated.
fn usage() -> serde_json::Value {
    json!({
        "input_tokens": 100, "cache_read_input_tokens": 2000, "cache_creation_input_tokens": 3000,
        "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000},
        "output_tokens": 500, "server_tool_use": {"web_search_requests": 2}, "service_tier": "standard"
    })
}

/// At the card below: 100 × 3 + 2,000 × 0.3 + 1,000 × 3.75 + 2,000 × 6 +
/// 500 × 15 = 300 + 600 + 3,750 + 12,000 + 7,500 µUSD.
const COST_NANO: u64 = 24_150_000;

/// An Anthropic upstream: model `cached` reports [`usage`], whole or
/// streamed; model `silent` reports no usage at all.
async fn upstream() -> std::net::SocketAddr {
    let app = axum::Router::new().route(
        "/v1/messages",
        axum::routing::post(|body: Bytes| async move {
            let request: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let model = request["model"].as_str().unwrap().to_owned();
            let content = json!([{"type": "text", "text": "Cached and counted."}]);
            if request["stream"] == true {
                let mut start_usage = usage();
                start_usage["output_tokens"] = json!(1);
                let events = [
                    (
                        "message_start",
                        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                        "role": "assistant", "model": model, "content": [], "stop_reason": null,
                        "stop_sequence": null, "usage": start_usage}}),
                    ),
                    (
                        "content_block_start",
                        json!({"type": "content_block_start", "index": 0,
                        "content_block": {"type": "text", "text": ""}}),
                    ),
                    (
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": 0,
                        "delta": {"type": "text_delta", "text": "Cached and counted."}}),
                    ),
                    ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
                    (
                        "message_delta",
                        json!({"type": "message_delta",
                        "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 500}}),
                    ),
                    ("message_stop", json!({"type": "message_stop"})),
                ];
                let frames: String =
                    events.iter().map(|(name, data)| format!("event: {name}\ndata: {data}\n\n")).collect();
                let mut response = Response::new(Body::from(frames));
                response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
                return response;
            }
            let mut reply = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": "end_turn", "stop_sequence": null, "usage": usage()});
            if model == "silent" {
                reply.as_object_mut().unwrap().remove("usage");
            }
            let mut response = Response::new(Body::from(reply.to_string()));
            response.headers_mut().insert("content-type", "application/json".parse().unwrap());
            response
        }),
    );
    spawn(app).await
}

fn config(upstream: std::net::SocketAddr, db: &std::path::Path) -> String {
    format!(
        "auth: {{ mode: keys }}\nstorage: {{ sqlite_path: \"{}\" }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n\
         providers:\n  claude: {{ protocol: anthropic, base_url: \"http://{upstream}\" }}\n\
         models:\n  cached: {{ provider: claude }}\n  silent: {{ provider: claude }}\n\
         rate_card:\n  \
         cached: {{ input_utok: 3, output_utok: 15, cache_read_utok: 0.3, cache_write_utok: 3.75, cache_write_1h_utok: 6 }}\n  \
         silent: {{ input_utok: 3, output_utok: 15 }}\n",
        db.display()
    )
}

/// The one ledger row of request `request_id`.
async fn row_of(addr: std::net::SocketAddr, request_id: &str) -> serde_json::Value {
    ledger_rows(addr, &format!("request_id={request_id}"), 1).await.remove(0)
}

/// Every kind the fake reported, and the cost the card gives them, exactly.
fn assert_priced_exactly(row: &serde_json::Value) {
    let kinds = [
        ("input_tokens", 5_100),
        ("cache_read_tokens", 2_000),
        ("cache_write_tokens", 3_000),
        ("cache_write_1h_tokens", 2_000),
        ("output_tokens", 500),
    ];
    for (kind, count) in kinds {
        assert_eq!(row[kind], count, "{kind} in {row}");
    }
    assert_eq!(row["cost_nano"], COST_NANO, "{row}");
    assert_eq!(row["estimated"], false, "{row}");
    assert!(row["notes"].get("estimated").is_none(), "{row}");
    // What the card does not price yet is kept beside: the tier, the searches.
    assert_eq!(row["notes"]["service_tier"], "standard", "{row}");
    assert_eq!(row["notes"]["web_searches"], 2, "{row}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_a_provider_bills_is_kept_and_priced_to_the_nano_usd() {
    let up = upstream().await;
    let dir = std::env::temp_dir().join(format!("switchyard-money-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("ledger.db");
    let _ = std::fs::remove_file(&db);
    let (addr, _) = governed(&config(up, &db)).await;
    let key = create_key(addr, json!({"name": "metered"})).await;
    let bearer = format!("Bearer {}", key["key"].as_str().unwrap());
    let anthropic = |stream: bool| {
        json!({"model": "cached", "max_tokens": 600, "stream": stream,
               "messages": [{"role": "user", "content": "Use the cached context."}]})
        .to_string()
    };
    // Passthrough, whole: an hour-long write is priced at its own rate.
    let whole = post(addr, "/v1/messages", &[("x-api-key", key["key"].as_str().unwrap())], anthropic(false)).await;
    assert_eq!(whole.status, 200, "{:?}", whole.body);
    assert_eq!(whole.headers["x-switchyard-usage"], "exact");
    let id = whole.headers["x-request-id"].to_str().unwrap().to_owned();
    assert_priced_exactly(&row_of(addr, &id).await);
    // Passthrough, streamed: the same row; nothing follows the last event.
    let streamed = post(addr, "/v1/messages", &[("x-api-key", key["key"].as_str().unwrap())], anthropic(true)).await;
    let text = String::from_utf8(streamed.body.to_vec()).unwrap();
    assert!(text.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"), "{text}");
    let id = streamed.headers["x-request-id"].to_str().unwrap().to_owned();
    assert_priced_exactly(&row_of(addr, &id).await);
    // Translated for an OpenAI caller: the row is the same; the caller gets
    // the kinds its protocol can say (cached reads).
    let openai = json!({"model": "cached", "max_tokens": 600,
                        "messages": [{"role": "user", "content": "Use the cached context."}]});
    let translated = post(addr, "/v1/chat/completions", &[("authorization", &bearer)], openai.to_string()).await;
    assert_eq!(translated.status, 200, "{:?}", translated.body);
    assert_eq!(translated.headers["x-switchyard-usage"], "exact");
    let reply: serde_json::Value = serde_json::from_slice(&translated.body).unwrap();
    assert_eq!(reply["usage"]["prompt_tokens"], 5_100);
    assert_eq!(reply["usage"]["prompt_tokens_details"]["cached_tokens"], 2_000);
    let id = translated.headers["x-request-id"].to_str().unwrap().to_owned();
    assert_priced_exactly(&row_of(addr, &id).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_without_usage_is_billed_an_estimate_and_says_so() {
    let up = upstream().await;
    let dir = std::env::temp_dir().join(format!("switchyard-money-silent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("ledger.db");
    let _ = std::fs::remove_file(&db);
    let (addr, _) = governed(&config(up, &db)).await;
    let key = create_key(addr, json!({"name": "silent"})).await;
    let body = json!({"model": "silent", "max_tokens": 50,
                      "messages": [{"role": "user", "content": "Say something without counting it."}]});
    for (path, auth) in [
        ("/v1/messages", ("x-api-key", key["key"].as_str().unwrap().to_owned())),
        ("/v1/chat/completions", ("authorization", format!("Bearer {}", key["key"].as_str().unwrap()))),
    ] {
        let reply = post(addr, path, &[(auth.0, &auth.1)], body.to_string()).await;
        assert_eq!(reply.status, 200, "{path}: {:?}", reply.body);
        assert_eq!(reply.headers["x-switchyard-usage"], "estimated", "{path}");
        let row = row_of(addr, reply.headers["x-request-id"].to_str().unwrap()).await;
        assert_eq!(row["estimated"], true, "{path}: {row}");
        assert_eq!(row["notes"]["estimated"], "no_usage", "{path}: {row}");
        // Never a $0 row: the prompt as counted and the text delivered.
        let (input, output) = (row["input_tokens"].as_u64().unwrap(), row["output_tokens"].as_u64().unwrap());
        assert!(input > 0 && output > 0, "{path}: {row}");
        assert_eq!(row["cost_nano"], input * 3_000 + output * 15_000, "{path}: {row}");
    }
}
