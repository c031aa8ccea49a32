//! The response cache over real TCP with `mock://` lanes: a hit from
//! another dialect, a streamed replay, a miss across tenants, a bypass,
//! and a hit that leaves the budget untouched.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::json;
use switchyard_protocol::ir::Protocol;

const POOLS: &str = "providers:\n  mock: { protocol: openai, base_url: mock:// }\n\
    models:\n  gpt: { provider: mock }\n\
    pools:\n  cached: { cache: { ttl: 5m }, members: [{ model: gpt }] }\n  plain: { members: [{ model: gpt }] }\n";

fn cache_header(reply: &Reply) -> &str {
    reply.headers.get("x-switchyard-cache").map_or("", |v| v.to_str().unwrap_or(""))
}

/// The same question in two dialects, with the same output cap.
fn asked(ingress: Protocol, text: &str, stream: bool) -> String {
    let mut body: serde_json::Value = serde_json::from_str(&chat_body(ingress, "cached", text, stream)).unwrap();
    body["max_tokens"] = json!(100);
    body.to_string()
}

#[tokio::test]
async fn a_hit_from_another_dialect_and_a_streamed_replay() {
    let addr = gateway(POOLS).await;
    let first = post(addr, "/v1/chat/completions", &[], asked(Protocol::OpenAi, "what is cached?", false)).await;
    assert_eq!((first.status.as_u16(), cache_header(&first)), (200, "miss"));
    let openai: serde_json::Value = serde_json::from_slice(&first.body).unwrap();
    let text = openai["choices"][0]["message"]["content"].as_str().unwrap().to_owned();
    // The same question from an Anthropic caller: answered from the cache, in its shape.
    let again = post(addr, "/v1/messages", &[], asked(Protocol::Anthropic, "what is cached?", false)).await;
    assert_eq!((again.status.as_u16(), cache_header(&again)), (200, "hit"), "{}", String::from_utf8_lossy(&again.body));
    assert!(again.headers.get("age").is_some());
    let anthropic: serde_json::Value = serde_json::from_slice(&again.body).unwrap();
    assert_eq!(anthropic["content"][0]["text"], text.as_str());
    // A stream, then its replay as a stream (and as a whole reply).
    let path = ingress_path(Protocol::OpenAi, "cached", true);
    let streamed = post(addr, &path, &[], asked(Protocol::OpenAi, "stream me", true)).await;
    assert_eq!(cache_header(&streamed), "miss");
    let replayed = post(addr, &path, &[], asked(Protocol::OpenAi, "stream me", true)).await;
    assert_eq!(cache_header(&replayed), "hit");
    let (a, b) = (String::from_utf8_lossy(&streamed.body), String::from_utf8_lossy(&replayed.body));
    let frames = |s: &str| s.matches("data: ").count();
    assert_eq!(frames(&a), frames(&b), "the replay keeps the stream's chunking:\n{a}\n{b}");
    assert!(b.contains("[DONE]"));
    // No-cache bypasses; a pool without cache says nothing.
    let bypassed = post(
        addr,
        "/v1/chat/completions",
        &[("cache-control", "no-cache")],
        asked(Protocol::OpenAi, "what is cached?", false),
    )
    .await;
    assert_eq!(cache_header(&bypassed), "bypass");
    let plain = post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "plain", "hi", false)).await;
    assert_eq!(cache_header(&plain), "");
    // A request the cache could not read says so too.
    let broken = post(addr, "/v1/chat/completions", &[], r#"{"model":"cached","messages":"nope"}"#).await;
    assert_eq!(
        (broken.status.as_u16(), cache_header(&broken)),
        (400, "bypass"),
        "{}",
        String::from_utf8_lossy(&broken.body)
    );
}

#[tokio::test]
async fn tenants_never_share_and_a_hit_costs_nothing() {
    let config = format!("auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n{POOLS}rate_card:\n  gpt: {{ input_utok: 1000000, output_utok: 1000000 }}\n");
    let (addr, _) = governed(&config).await;
    let one = create_key(addr, json!({"name": "one", "budget": {"usd": 1000.0, "window": "1d"}})).await;
    let two = create_key(addr, json!({"name": "two"})).await;
    let bearer = |key: &serde_json::Value| format!("Bearer {}", key["key"].as_str().unwrap());
    let ask = |auth: String| async move {
        post(
            addr,
            "/v1/chat/completions",
            &[("authorization", &auth)],
            asked(Protocol::OpenAi, "private question", false),
        )
        .await
    };
    assert_eq!(cache_header(&ask(bearer(&one)).await), "miss");
    assert_eq!(cache_header(&ask(bearer(&two)).await), "miss", "another key never reads the first key's entry");
    let spent = |addr| async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let spend = admin_call(addr, "GET", "/api/v1/admin/spend?by=key&from=0", Some(ADMIN_TOKEN), None).await;
        let spend: serde_json::Value = serde_json::from_slice(&spend.body).unwrap();
        spend["data"].as_array().unwrap().iter().map(|r| r["usd"].as_f64().unwrap()).sum::<f64>()
    };
    let before = spent(addr).await;
    assert!(before > 0.0);
    assert_eq!(cache_header(&ask(bearer(&one)).await), "hit");
    assert_eq!(spent(addr).await, before, "a hit costs nothing");
    // Its ledger row says it was a hit, what it saved and the lane it came from.
    let id = one["id"].as_str().unwrap();
    let rows = admin_call(addr, "GET", &format!("/api/v1/admin/requests?key={id}"), Some(ADMIN_TOKEN), None).await;
    let rows: serde_json::Value = serde_json::from_slice(&rows.body).unwrap();
    let hit = rows["data"].as_array().unwrap().iter().find(|r| r["notes"]["cache_saved_nano"].is_u64());
    let hit = hit.unwrap_or_else(|| panic!("no hit row: {rows}"));
    assert!(hit["notes"]["cache_saved_nano"].as_u64().unwrap() > 0, "{hit}");
    assert_eq!(hit["lane"], "gpt", "{hit}");
    assert_eq!(hit["input_tokens"], 0, "{hit}");
    // The spend report shows what hits saved, beside what was spent.
    let spend = admin_call(addr, "GET", "/api/v1/admin/spend?by=key&from=0", Some(ADMIN_TOKEN), None).await;
    let spend: serde_json::Value = serde_json::from_slice(&spend.body).unwrap();
    let line = spend["data"].as_array().unwrap().iter().find(|l| l["value"] == one["id"]).unwrap();
    let saved = hit["notes"]["cache_saved_nano"].as_u64().unwrap() as f64 / 1e9;
    assert!((line["saved_usd"].as_f64().unwrap() - saved).abs() < 1e-12, "{spend}");
    assert!((spend["saved_usd"].as_f64().unwrap() - saved).abs() < 1e-12, "{spend}");
}

/// A hit is given back to the key's requests-per-minute limit (so a key
/// of rpm 2 is answered from the cache as often as it asks), unless the
/// operator counts hits; misses always count.
#[tokio::test]
async fn hits_leave_the_rate_limit_unless_the_operator_counts_them() {
    for count_hits in [false, true] {
        let config = format!("auth: {{ mode: keys }}\ncache: {{ count_hits: {count_hits} }}\n{POOLS}");
        let (addr, _) = governed(&config).await;
        let key = create_key(addr, json!({"name": "slow", "limits": {"rpm": 2}})).await;
        let auth = format!("Bearer {}", key["key"].as_str().unwrap());
        let ask = |text: &'static str| {
            let auth = auth.clone();
            async move {
                post(addr, "/v1/chat/completions", &[("authorization", &auth)], asked(Protocol::OpenAi, text, false))
                    .await
            }
        };
        assert_eq!(cache_header(&ask("rated").await), "miss");
        let statuses: Vec<u16> = {
            let mut statuses = Vec::new();
            for _ in 0..4 {
                statuses.push(ask("rated").await.status.as_u16());
            }
            statuses
        };
        if count_hits {
            assert_eq!(statuses, [200, 429, 429, 429], "hits counted: the second request is the last of the minute");
        } else {
            assert_eq!(statuses, [200, 200, 200, 200], "hits are free of the rate limit");
            // A miss still counts: the limit's second request, then a refusal.
            assert_eq!(ask("another").await.status, 200);
            assert_eq!(ask("a third").await.status, 429);
        }
    }
}

/// Embeddings are cached too: the same request again is answered from the
/// cache, byte for byte.
#[tokio::test]
async fn embeddings_are_cached() {
    let config = "providers:\n  mock: { protocol: openai, base_url: mock:// }\n\
                  models:\n  emb: { provider: mock, model: text-embedding-3-small, operation: embed }\n\
                  pools:\n  vectors: { cache: { ttl: 5m }, members: [{ model: emb }] }\n";
    let addr = gateway(config).await;
    let body = json!({"model": "vectors", "input": ["one", "two"], "dimensions": 4}).to_string();
    let first = post(addr, "/v1/embeddings", &[], body.clone()).await;
    assert_eq!(
        (first.status.as_u16(), cache_header(&first)),
        (200, "miss"),
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    let again = post(addr, "/v1/embeddings", &[], body).await;
    assert_eq!((again.status.as_u16(), cache_header(&again)), (200, "hit"));
    assert_eq!(again.body, first.body);
    let other =
        post(addr, "/v1/embeddings", &[], json!({"model": "vectors", "input": ["three"], "dimensions": 4}).to_string())
            .await;
    assert_eq!(cache_header(&other), "miss");
    // Another protocol asking the same is answered from the cache in its own shape.
    let gemini = post(
        addr,
        "/v1beta/models/vectors:embedContent",
        &[],
        json!({"content": {"parts": [{"text": "three"}]}, "outputDimensionality": 4}).to_string(),
    )
    .await;
    assert_eq!(
        (gemini.status.as_u16(), cache_header(&gemini)),
        (200, "hit"),
        "{}",
        String::from_utf8_lossy(&gemini.body)
    );
    let gemini: serde_json::Value = serde_json::from_slice(&gemini.body).unwrap();
    let openai: serde_json::Value = serde_json::from_slice(&other.body).unwrap();
    assert_eq!(gemini["embedding"]["values"], openai["data"][0]["embedding"], "the same vector, in Gemini's shape");
}

/// Rerank is cached too: the same bytes get the reply as it was sent, the
/// same request in other bytes is found by its IR and written again.
#[tokio::test]
async fn a_ranking_is_cached_across_callers() {
    let config = "providers:\n  mock: { protocol: cohere, base_url: mock:// }\n\
                  models:\n  ranker: { provider: mock, model: rerank-v3.5, operation: rerank }\n\
                  pools:\n  ranked: { cache: { ttl: 5m }, members: [{ model: ranker }] }\n";
    let addr = gateway(config).await;
    let body = json!({"model": "ranked", "query": "which?", "documents": ["alpha", "beta", "gamma"], "top_n": 2});
    let first = post(addr, "/v2/rerank", &[], body.to_string()).await;
    assert_eq!(
        (first.status.as_u16(), cache_header(&first)),
        (200, "miss"),
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    let again = post(addr, "/v2/rerank", &[], body.to_string()).await;
    assert_eq!((again.status.as_u16(), cache_header(&again)), (200, "hit"));
    assert_eq!(again.body, first.body, "the same bytes again: the reply as it was sent");
    let spaced = post(addr, "/v2/rerank", &[], serde_json::to_string_pretty(&body).unwrap()).await;
    assert_eq!(cache_header(&spaced), "hit", "other bytes, the same request");
    let a: serde_json::Value = serde_json::from_slice(&first.body).unwrap();
    let b: serde_json::Value = serde_json::from_slice(&spaced.body).unwrap();
    assert_eq!(a["results"], b["results"]);
}

/// A request pseudonymised by a reversible mask is never answered from the
/// cache: two requests with other values behind the same placeholder each
/// get their own value back.
#[tokio::test]
async fn a_pseudonymised_request_is_never_served_from_the_cache() {
    let config = "providers:\n  mock: { protocol: openai, base_url: mock:// }\nmodels:\n  gpt: { provider: mock }\n\
                  policies:\n  names: { detect: [email], action: mask, direction: request, reversible: true }\n\
                  pools:\n  private: { cache: { ttl: 5m }, policies: [names], members: [{ model: gpt }] }\n";
    let addr = gateway(config).await;
    for email in ["ann@example.com", "bob@example.com"] {
        let said = format!("mail {email}");
        let reply = post(addr, "/v1/chat/completions", &[], chat_body(Protocol::OpenAi, "private", &said, false)).await;
        assert_eq!(cache_header(&reply), "bypass");
        assert!(String::from_utf8_lossy(&reply.body).contains(email), "{}", String::from_utf8_lossy(&reply.body));
    }
}

/// With `scope: group`, the keys of one group share entries and another
/// group's keys never read them.
#[tokio::test]
async fn a_group_scope_shares_within_the_group_only() {
    let config =
        format!("auth: {{ mode: keys }}\ncache: {{ scope: group }}\ngroups:\n  red: {{}}\n  blue: {{}}\n{POOLS}");
    let (addr, _) = governed(&config).await;
    let mut keys = Vec::new();
    for (name, group) in [("r1", "red"), ("r2", "red"), ("b1", "blue")] {
        let key = create_key(addr, json!({"name": name, "group": group})).await;
        keys.push(format!("Bearer {}", key["key"].as_str().unwrap()));
    }
    let ask = |auth: &str| {
        let auth = auth.to_owned();
        async move {
            let headers = [("authorization", auth.as_str())];
            cache_header(
                &post(addr, "/v1/chat/completions", &headers, asked(Protocol::OpenAi, "team question", false)).await,
            )
            .to_owned()
        }
    };
    assert_eq!(ask(&keys[0]).await, "miss");
    assert_eq!(ask(&keys[1]).await, "hit", "the same group shares");
    assert_eq!(ask(&keys[2]).await, "miss", "another group never reads it");
}

/// A hit goes back through the caller's own reply policies: a key of the
/// group whose policy masks replies never receives, from the cache, what
/// another key of its group was answered unmasked (the review's finding:
/// the hit skipped them), whole or streamed.
#[tokio::test]
async fn a_hit_passes_through_the_callers_own_reply_policies() {
    let config = format!(
        "auth: {{ mode: keys }}\ncache: {{ scope: group }}\ngroups:\n  red: {{}}\n\
         policies:\n  ids: {{ regex: {{ ticket: \"TCK-[0-9]{{6}}\" }}, action: mask, direction: response }}\n{POOLS}"
    );
    let (addr, _) = governed(&config).await;
    let open = create_key(addr, json!({"name": "open", "group": "red"})).await;
    let masked = create_key(addr, json!({"name": "masked", "group": "red", "policies": ["ids"]})).await;
    let bearer = |key: &serde_json::Value| format!("Bearer {}", key["key"].as_str().unwrap());
    let (open, masked) = (bearer(&open), bearer(&masked));
    for (stream, ticket) in [(false, "TCK-654321"), (true, "TCK-777777")] {
        let path = ingress_path(Protocol::OpenAi, "cached", stream);
        let body = asked(Protocol::OpenAi, &format!("repeat {ticket} please"), stream);
        let first = post(addr, &path, &[("authorization", open.as_str())], body.clone()).await;
        let text = String::from_utf8_lossy(&first.body);
        assert_eq!(cache_header(&first), "miss", "stream {stream}: {text}");
        assert!(text.contains(ticket), "stream {stream}: {text}");
        let hit = post(addr, &path, &[("authorization", masked.as_str())], body).await;
        let text = String::from_utf8_lossy(&hit.body);
        assert_eq!((hit.status.as_u16(), cache_header(&hit)), (200, "hit"), "stream {stream}: {text}");
        assert!(!text.contains(ticket), "stream {stream}: the hit skipped the caller's policy: {text}");
        assert!(text.contains("[TICKET_1]"), "stream {stream}: {text}");
    }
}
