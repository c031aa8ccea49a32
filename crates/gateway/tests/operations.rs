//! Operations beyond chat through the gateway, over real TCP: every
//! caller dialect of an operation against every lane protocol that has it,
//! through the vendor fake on its own port (a real upstream hop). Vectors
//! must come back exactly as the lane made them, in input order.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

use std::net::SocketAddr;

use common::{admin_call, create_key, gateway, get_with, governed, mock_upstream, post, Reply, ADMIN_TOKEN};
use serde_json::{json, Value};
use switchyard_protocol::ir::Protocol;
use switchyard_transport::mock_operation::{score, vector};

/// The embed lanes, each a protocol (and Bedrock body form), and whether it
/// carries `dimensions`.
const EMBED_LANES: [(&str, bool); 5] = [
    ("embed-openai", true),
    ("embed-gemini", true),
    ("embed-cohere", true),
    ("embed-titan", true),
    ("embed-bedrock-cohere", false),
];

fn embed_config(upstream: SocketAddr) -> String {
    let base = format!("http://{upstream}");
    format!(
        r#"
providers:
  up-openai: {{ protocol: openai, base_url: "{base}" }}
  up-gemini: {{ protocol: gemini, base_url: "{base}" }}
  up-cohere: {{ protocol: cohere, base_url: "{base}" }}
  up-bedrock: {{ protocol: bedrock, base_url: "{base}" }}
models:
  embed-openai: {{ provider: up-openai, model: text-embedding-3-small, operation: embed }}
  embed-gemini: {{ provider: up-gemini, model: gemini-embedding-001, operation: embed }}
  embed-cohere: {{ provider: up-cohere, model: embed-v4.0, operation: embed }}
  embed-titan: {{ provider: up-bedrock, model: "amazon.titan-embed-text-v2:0", operation: embed }}
  embed-bedrock-cohere: {{ provider: up-bedrock, model: cohere.embed-english-v3, operation: embed }}
  rerank-cohere: {{ provider: up-cohere, model: rerank-v3.5, operation: rerank }}
  rerank-bedrock: {{ provider: up-bedrock, model: "cohere.rerank-v3-5:0", operation: rerank }}
  rerank-server: {{ provider: up-openai, model: BAAI/bge-reranker-v2-m3, operation: rerank }}
  chat: {{ provider: up-openai, model: gpt-4o-mini }}
pools:
  embeddings:
    members: [{{ model: embed-cohere }}]
"#
    )
}

/// The caller dialects of embeddings.
#[derive(Debug, Clone, Copy)]
enum Caller {
    OpenAi,
    OpenAiBase64,
    GeminiBatch,
    GeminiSingle,
    Cohere,
    BedrockTitan,
    BedrockCohere,
}

const CALLERS: [Caller; 7] = [
    Caller::OpenAi,
    Caller::OpenAiBase64,
    Caller::GeminiBatch,
    Caller::GeminiSingle,
    Caller::Cohere,
    Caller::BedrockTitan,
    Caller::BedrockCohere,
];

impl Caller {
    /// One text for the forms that take one, three for the rest.
    fn texts(self) -> Vec<&'static str> {
        match self {
            Caller::GeminiSingle | Caller::BedrockTitan => vec!["the only text"],
            _ => vec!["first text", "second, longer text here", "third"],
        }
    }

    fn request(self, pool: &str, texts: &[&str]) -> (String, Value) {
        match self {
            Caller::OpenAi => ("/v1/embeddings".into(), json!({"model": pool, "input": texts, "dimensions": 4})),
            Caller::OpenAiBase64 => (
                "/v1/embeddings".into(),
                json!({"model": pool, "input": texts, "dimensions": 4, "encoding_format": "base64"}),
            ),
            Caller::GeminiBatch => {
                let requests: Vec<Value> = texts
                    .iter()
                    .map(|t| json!({"model": format!("models/{pool}"), "content": {"parts": [{"text": t}]}, "outputDimensionality": 4}))
                    .collect();
                (format!("/v1beta/models/{pool}:batchEmbedContents"), json!({"requests": requests}))
            }
            Caller::GeminiSingle => (
                format!("/v1beta/models/{pool}:embedContent"),
                json!({"content": {"parts": [{"text": texts[0]}]}, "outputDimensionality": 4}),
            ),
            Caller::Cohere => (
                "/v2/embed".into(),
                json!({"model": pool, "texts": texts, "input_type": "search_document", "embedding_types": ["float"], "output_dimension": 4}),
            ),
            Caller::BedrockTitan => (format!("/model/{pool}/invoke"), json!({"inputText": texts[0], "dimensions": 4})),
            Caller::BedrockCohere => {
                (format!("/model/{pool}/invoke"), json!({"texts": texts, "input_type": "search_document"}))
            }
        }
    }

    /// Whether the caller asked for dimensions (Bedrock's Cohere body cannot).
    fn asks_dimensions(self) -> bool {
        !matches!(self, Caller::BedrockCohere)
    }

    /// The vectors and input tokens of the caller's reply.
    fn read(self, reply: &Reply) -> (Vec<Vec<f64>>, u64) {
        let body: Value = serde_json::from_slice(&reply.body).unwrap();
        let floats = |v: &Value| -> Vec<f64> { serde_json::from_value(v.clone()).unwrap() };
        match self {
            Caller::OpenAi | Caller::OpenAiBase64 => {
                let vectors = body["data"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|item| match &item["embedding"] {
                        Value::String(text) => switchyard_codec::embed::from_base64(text).unwrap(),
                        other => floats(other),
                    })
                    .collect();
                (vectors, body["usage"]["prompt_tokens"].as_u64().unwrap())
            }
            Caller::GeminiBatch => (
                body["embeddings"].as_array().unwrap().iter().map(|e| floats(&e["values"])).collect(),
                body["usageMetadata"]["promptTokenCount"].as_u64().unwrap_or(0),
            ),
            Caller::GeminiSingle => (
                vec![floats(&body["embedding"]["values"])],
                body["usageMetadata"]["promptTokenCount"].as_u64().unwrap_or(0),
            ),
            Caller::Cohere => (
                body["embeddings"]["float"].as_array().unwrap().iter().map(floats).collect(),
                body["meta"]["billed_units"]["input_tokens"].as_u64().unwrap(),
            ),
            Caller::BedrockTitan => (vec![floats(&body["embedding"])], body["inputTextTokenCount"].as_u64().unwrap()),
            Caller::BedrockCohere => {
                let tokens = reply.headers["x-amzn-bedrock-input-token-count"].to_str().unwrap().parse().unwrap();
                (body["embeddings"].as_array().unwrap().iter().map(floats).collect(), tokens)
            }
        }
    }
}

#[tokio::test]
async fn every_embed_caller_reaches_every_embed_lane_with_vectors_in_input_order() {
    let upstream = mock_upstream().await;
    let addr = gateway(&embed_config(upstream)).await;
    for caller in CALLERS {
        for (lane, carries_dimensions) in EMBED_LANES {
            let texts = caller.texts();
            let (path, body) = caller.request(lane, &texts);
            let reply = post(addr, &path, &[], body.to_string()).await;
            let context = format!("{caller:?} -> {lane}: {}", String::from_utf8_lossy(&reply.body));
            assert_eq!(reply.status, 200, "{context}");
            assert_eq!(reply.headers["x-switchyard-lane"], lane, "{context}");
            let dimensions = if caller.asks_dimensions() && carries_dimensions { 4 } else { 8 };
            let expected: Vec<Vec<f64>> = texts.iter().map(|t| vector(t, dimensions)).collect();
            let (vectors, tokens) = caller.read(&reply);
            assert_eq!(vectors, expected, "{context}");
            // The fake counts a token a word; every caller reads the lane's count.
            let words: u64 = texts.iter().map(|t| t.split_whitespace().count() as u64).sum();
            assert_eq!(tokens, words, "{context}");
            let dropped = reply.headers.get("x-switchyard-dropped").map(|v| v.to_str().unwrap().to_owned());
            if caller.asks_dimensions() && !carries_dimensions {
                assert!(dropped.is_some_and(|d| d.contains("imension")), "{context}");
            }
        }
    }
}

#[tokio::test]
async fn an_embed_route_naming_a_chat_pool_is_the_callers_not_found() {
    let upstream = mock_upstream().await;
    let addr = gateway(&embed_config(upstream)).await;
    let reply = post(addr, "/v1/embeddings", &[], json!({"model": "chat", "input": "x"}).to_string()).await;
    assert_eq!(reply.status, 404, "{}", String::from_utf8_lossy(&reply.body));
    let body: Value = serde_json::from_slice(&reply.body).unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("serves chat, not embed"), "{body}");
    // And a chat route naming an embed pool.
    let chat = json!({"model": "embeddings", "messages": [{"role": "user", "content": "hi"}]});
    let reply = post(addr, "/v1/chat/completions", &[], chat.to_string()).await;
    assert_eq!(reply.status, 404);
    // Bedrock says it in its own header.
    let reply = post(addr, "/model/chat/invoke", &[], json!({"inputText": "x"}).to_string()).await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.headers["x-amzn-errortype"], "ResourceNotFoundException");
}

#[tokio::test]
async fn bad_embed_input_is_the_callers_400_never_a_5xx() {
    let upstream = mock_upstream().await;
    let addr = gateway(&embed_config(upstream)).await;
    // Empty input, to a lane of another protocol (read by the gateway).
    let reply = post(addr, "/v1/embeddings", &[], json!({"model": "embed-cohere", "input": []}).to_string()).await;
    assert_eq!(reply.status, 400, "{}", String::from_utf8_lossy(&reply.body));
    // A batch over the caller's vendor limit.
    let texts: Vec<String> = (0..97).map(|n| n.to_string()).collect();
    let body = json!({"model": "embed-openai", "texts": texts, "input_type": "search_query"});
    let reply = post(addr, "/v2/embed", &[], body.to_string()).await;
    assert_eq!(reply.status, 400, "{}", String::from_utf8_lossy(&reply.body));
    assert!(String::from_utf8_lossy(&reply.body).contains("96"));
    // An InvokeModel body that is no operation's.
    // (A `prompt` alone is Stability's image body.)
    let reply = post(addr, "/model/embed-titan/invoke", &[], json!({"input": "x"}).to_string()).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.headers["x-amzn-errortype"], "ValidationException");
    // A chat body on the embed route.
    let chat = json!({"model": "embed-gemini", "messages": [{"role": "user", "content": "hi"}]});
    let reply = post(addr, "/v1/embeddings", &[], chat.to_string()).await;
    assert_eq!(reply.status, 400, "{}", String::from_utf8_lossy(&reply.body));
}

#[tokio::test]
async fn an_embed_lane_that_fails_fails_over_to_the_next() {
    let upstream = mock_upstream().await;
    let yaml = embed_config(upstream)
        .replace(
            "models:\n",
            "  up-dead: { protocol: cohere, base_url: \"http://127.0.0.1:1\" }\nmodels:\n  embed-dead: { provider: up-dead, model: embed-v4.0, operation: embed }\n",
        )
        .replace("    members: [{ model: embed-cohere }]", "    members: [{ model: embed-dead }, { model: embed-gemini }]");
    let addr = gateway(&yaml).await;
    for _ in 0..3 {
        let body = json!({"model": "embeddings", "input": ["one", "two"]});
        let reply = post(addr, "/v1/embeddings", &[], body.to_string()).await;
        assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
        assert_eq!(reply.headers["x-switchyard-lane"], "embed-gemini");
    }
    // A directive every live lane sees: the exhaustion answer is the caller's own.
    let body = json!({"model": "embeddings", "input": ["[mock:status=503] one"]});
    let reply = post(addr, "/v1/embeddings", &[], body.to_string()).await;
    assert!(matches!(reply.status.as_u16(), 502 | 503), "{}", String::from_utf8_lossy(&reply.body));
    let body: Value = serde_json::from_slice(&reply.body).unwrap();
    assert!(body["error"]["message"].is_string(), "an OpenAI-shaped error: {body}");
}

const RERANK_LANES: [&str; 3] = ["rerank-cohere", "rerank-bedrock", "rerank-server"];

#[tokio::test]
async fn every_rerank_caller_reaches_every_rerank_lane_with_scores_as_the_lane_gave_them() {
    let upstream = mock_upstream().await;
    let addr = gateway(&embed_config(upstream)).await;
    let query = "which is the capital of France";
    let texts = ["Paris is the capital of France", "Berlin is in Germany", "Madrid is in Spain", "Rome"];
    // The fake's ranking, most relevant first.
    let mut ranked: Vec<(usize, f64)> = texts.iter().enumerate().map(|(i, t)| (i, score(query, t))).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let objects: Vec<Value> = texts.iter().enumerate().map(|(i, t)| json!({"text": t, "id": i})).collect();
    for lane in RERANK_LANES {
        let callers = [
            ("/v2/rerank".to_owned(), json!({"model": lane, "query": query, "documents": texts, "top_n": 3}), false),
            (
                "/v1/rerank".to_owned(),
                json!({"model": lane, "query": query, "documents": objects, "top_n": 3, "return_documents": true}),
                true,
            ),
            (
                format!("/model/{lane}/invoke"),
                json!({"query": query, "documents": texts, "top_n": 3, "api_version": 2}),
                false,
            ),
        ];
        for (path, body, documents) in callers {
            let reply = post(addr, &path, &[], body.to_string()).await;
            let context = format!("{path} -> {lane}: {}", String::from_utf8_lossy(&reply.body));
            assert_eq!(reply.status, 200, "{context}");
            let body: Value = serde_json::from_slice(&reply.body).unwrap();
            let results = body["results"].as_array().unwrap();
            let got: Vec<(usize, f64)> = results
                .iter()
                .map(|r| (r["index"].as_u64().unwrap() as usize, r["relevance_score"].as_f64().unwrap()))
                .collect();
            assert_eq!(got, ranked[..3].to_vec(), "{context}");
            if documents {
                for result in results {
                    let index = result["index"].as_u64().unwrap() as usize;
                    assert_eq!(result["document"], objects[index], "{context}");
                }
            } else {
                assert!(results.iter().all(|r| r.get("document").is_none()), "{context}");
            }
            if !path.starts_with("/model/") {
                assert_eq!(body["meta"]["billed_units"]["search_units"], 1, "{context}");
            }
        }
    }
}

#[tokio::test]
async fn bad_rerank_input_is_the_callers_400() {
    let upstream = mock_upstream().await;
    let addr = gateway(&embed_config(upstream)).await;
    for body in [
        json!({"model": "rerank-bedrock", "query": "q", "documents": []}),
        json!({"model": "rerank-bedrock", "query": "", "documents": ["a"]}),
        json!({"model": "rerank-bedrock", "query": "q", "documents": [1, 2]}),
        json!({"model": "rerank-bedrock", "documents": ["a"]}),
    ] {
        let reply = post(addr, "/v2/rerank", &[], body.to_string()).await;
        assert_eq!(reply.status, 400, "{body}: {}", String::from_utf8_lossy(&reply.body));
    }
    // An embed body on the rerank route names the wrong pool's operation or fails to read: never a 5xx.
    let reply = post(addr, "/v2/rerank", &[], json!({"model": "embed-cohere", "texts": ["a"]}).to_string()).await;
    assert_eq!(reply.status, 404, "{}", String::from_utf8_lossy(&reply.body));
}

/// The embed config, governed: keys, a ledger, and every lane priced.
fn governed_config(upstream: SocketAddr) -> String {
    let rates = "rate_card:\n  embed-openai: { input_utok: 0.02 }\n  embed-gemini: { input_utok: 0.15 }\n  \
        embed-cohere: { input_utok: 0.1 }\n  embed-titan: { input_utok: 0.02 }\n  embed-bedrock-cohere: { input_utok: 0.1 }\n  \
        rerank-cohere: { per_search_unit_usd: 0.002 }\n  rerank-bedrock: { per_search_unit_usd: 0.002 }\n  \
        rerank-server: { per_request_usd: 0.0005 }\n  chat: { input_utok: 0.15, output_utok: 0.6 }\n";
    format!("auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n{}{rates}", embed_config(upstream))
}

/// The admin API's ledger rows of key `id`, once there are `n`.
async fn rows_of(addr: SocketAddr, id: &str, n: usize) -> Vec<Value> {
    for _ in 0..300 {
        let reply = admin_call(addr, "GET", &format!("/api/v1/admin/requests?key={id}"), Some(ADMIN_TOKEN), None).await;
        let page: Value = serde_json::from_slice(&reply.body).unwrap();
        let rows = page["data"].as_array().unwrap().clone();
        if rows.len() >= n {
            return rows;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("no {n} ledger rows for {id}")
}

#[tokio::test]
async fn keys_allow_lists_limits_and_the_ledger_apply_to_every_operation() {
    let upstream = mock_upstream().await;
    let (addr, _) = governed(&governed_config(upstream)).await;
    let key =
        create_key(addr, json!({"name": "rag", "pools": ["embed-openai", "rerank-cohere", "rerank-server"]})).await;
    let (id, secret) = (key["id"].as_str().unwrap(), key["key"].as_str().unwrap());
    let bearer = format!("Bearer {secret}");
    let auth = [("authorization", bearer.as_str())];
    // No key, no embedding.
    let embed = json!({"model": "embed-openai", "input": ["alpha beta", "gamma"]}).to_string();
    assert_eq!(post(addr, "/v1/embeddings", &[], embed.clone()).await.status, 401);
    // The allow-list holds on every route.
    let reply = post(addr, "/v1/embeddings", &auth, embed.clone()).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    let elsewhere = json!({"model": "embed-gemini", "input": "x"}).to_string();
    assert_eq!(post(addr, "/v1/embeddings", &auth, elsewhere).await.status, 403);
    let rerank = json!({"model": "rerank-cohere", "query": "q", "documents": ["a", "b"]}).to_string();
    let reply = post(addr, "/v2/rerank", &[("authorization", &bearer)], rerank).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    let server = json!({"model": "rerank-server", "query": "q", "documents": ["a"]}).to_string();
    assert_eq!(post(addr, "/v2/rerank", &auth, server).await.status, 200);
    // Each is a ledger row with its operation and billed units, priced by
    // its unit (and the refusal one more: every row written is read).
    let rows = rows_of(addr, id, 4).await;
    let by_lane = |lane: &str| rows.iter().find(|r| r["lane"] == lane).unwrap().clone();
    let embedded = by_lane("embed-openai");
    assert_eq!((embedded["operation"].as_str(), embedded["input_tokens"].as_u64()), (Some("embed"), Some(3)));
    assert!((embedded["usd"].as_f64().unwrap() - 3.0 * 0.02 / 1e6).abs() < 1e-12, "{embedded}");
    let reranked = by_lane("rerank-cohere");
    assert_eq!((reranked["operation"].as_str(), reranked["units"].as_u64()), (Some("rerank"), Some(1)));
    assert!((reranked["usd"].as_f64().unwrap() - 0.002).abs() < 1e-12, "{reranked}");
    let served = by_lane("rerank-server");
    assert!((served["usd"].as_f64().unwrap() - 0.0005).abs() < 1e-12, "{served}");
    // Metrics say each pool's operation.
    let scrape =
        get_with(common::admin(addr), "/metrics", &[("authorization", &format!("Bearer {ADMIN_TOKEN}"))]).await;
    let text = String::from_utf8_lossy(&scrape.body);
    assert!(
        text.lines().any(|l| l.starts_with("switchyard_requests_total{") && l.contains("operation=\"rerank\"")),
        "{text}"
    );
    // Spend by operation.
    let report = admin_call(addr, "GET", "/api/v1/admin/spend?by=operation", Some(ADMIN_TOKEN), None).await;
    let report: Value = serde_json::from_slice(&report.body).unwrap();
    let line = |op: &str| report["data"].as_array().unwrap().iter().find(|l| l["value"] == op).cloned().unwrap();
    assert_eq!(line("embed")["requests"], 1);
    assert_eq!((line("rerank")["requests"].as_u64(), line("rerank")["units"].as_u64()), (Some(2), Some(2)));
    assert!((line("rerank")["usd"].as_f64().unwrap() - 0.0025).abs() < 1e-12, "{report}");
}

#[tokio::test]
async fn rate_limits_and_budgets_hold_for_embeddings() {
    let upstream = mock_upstream().await;
    let (addr, _) = governed(&governed_config(upstream)).await;
    let key = create_key(addr, json!({"name": "slow", "limits": {"rpm": 2}})).await;
    let bearer = format!("Bearer {}", key["key"].as_str().unwrap());
    let body = json!({"model": "embed-cohere", "texts": ["a"], "input_type": "search_query"}).to_string();
    for _ in 0..2 {
        assert_eq!(post(addr, "/v2/embed", &[("authorization", &bearer)], body.clone()).await.status, 200);
    }
    let reply = post(addr, "/v2/embed", &[("authorization", &bearer)], body.clone()).await;
    assert_eq!(reply.status, 429, "{}", String::from_utf8_lossy(&reply.body));
    assert!(reply.headers.contains_key("retry-after"));
    // A budget too small for one rerank's worst case refuses it before any lane is asked.
    let poor = create_key(addr, json!({"name": "poor", "budget": {"usd": 0.001, "window": "1d"}})).await;
    let bearer = format!("Bearer {}", poor["key"].as_str().unwrap());
    let rerank = json!({"model": "rerank-cohere", "query": "q", "documents": ["a"]}).to_string();
    let reply = post(addr, "/v2/rerank", &[("authorization", &bearer)], rerank).await;
    assert_eq!(reply.status, 429, "{}", String::from_utf8_lossy(&reply.body));
}

/// A chat request of each counting caller, and where it posts.
fn count_request(caller: Protocol, pool: &str, named_in_path: bool) -> (String, Value) {
    let system = "be brief";
    let text = "hello there general kenobi";
    match caller {
        Protocol::Anthropic if named_in_path => (
            format!("/{pool}/v1/messages/count_tokens"),
            json!({"model": "ignored", "system": system, "messages": [{"role": "user", "content": text}]}),
        ),
        Protocol::Anthropic => (
            "/v1/messages/count_tokens".into(),
            json!({"model": pool, "system": system, "messages": [{"role": "user", "content": text}]}),
        ),
        Protocol::Gemini if named_in_path => (
            format!("/v1beta/models/{pool}:countTokens"),
            json!({"contents": [{"role": "user", "parts": [{"text": format!("{system} {text}")}]}]}),
        ),
        Protocol::Gemini => (
            format!("/v1beta/models/{pool}:countTokens"),
            json!({"generateContentRequest": {"model": format!("models/{pool}"), "systemInstruction": {"parts": [{"text": system}]},
                "contents": [{"role": "user", "parts": [{"text": text}]}]}}),
        ),
        _ => (
            format!("/model/{pool}/count-tokens"),
            json!({"input": {"converse": {"system": [{"text": system}], "messages": [{"role": "user", "content": [{"text": text}]}]}}}),
        ),
    }
}

/// The count a caller's reply says.
fn count_of(caller: Protocol, body: &[u8]) -> u64 {
    let body: Value = serde_json::from_slice(body).unwrap();
    let field = match caller {
        Protocol::Anthropic => "input_tokens",
        Protocol::Gemini => "totalTokens",
        _ => "inputTokens",
    };
    body[field].as_u64().unwrap_or_else(|| panic!("no {field} in {body}"))
}

#[tokio::test]
async fn every_counting_caller_counts_on_every_chat_lane_natively_or_marked_estimated() {
    let upstream = mock_upstream().await;
    let addr = gateway(&common::lanes_config(&format!("http://{upstream}"))).await;
    for caller in [Protocol::Anthropic, Protocol::Gemini, Protocol::Bedrock] {
        for variant in [false, true] {
            for lane in Protocol::ALL {
                let pool = format!("lane-{lane}");
                let (path, body) = count_request(caller, &pool, variant);
                let reply = post(addr, &path, &[("anthropic-version", "2023-06-01")], body.to_string()).await;
                let context = format!("{caller} ({path}) -> {lane}: {}", String::from_utf8_lossy(&reply.body));
                assert_eq!(reply.status, 200, "{context}");
                assert_eq!(reply.headers["x-switchyard-lane"], pool.as_str(), "{context}");
                let native = matches!(lane, Protocol::Anthropic | Protocol::Gemini | Protocol::Bedrock);
                let counted = count_of(caller, &reply.body);
                if native {
                    // The fake counts a token a word: the lane's own count, not the gateway's.
                    assert_eq!(counted, 6, "{context}");
                    assert!(reply.headers.get("x-switchyard-estimated").is_none(), "{context}");
                } else {
                    assert_eq!(reply.headers["x-switchyard-estimated"], "true", "{context}");
                    let codec = switchyard_protocol::codec(caller);
                    let chat =
                        codec.count().unwrap().chat_body(&serde_json::to_vec(&body).unwrap()).unwrap().into_owned();
                    let request = codec.read_request(&chat).unwrap();
                    assert_eq!(
                        counted,
                        switchyard_tokenize::count_request(&request, &format!("wire-{lane}")),
                        "{context}"
                    );
                }
            }
        }
    }
}

#[tokio::test]
async fn a_count_is_rate_limited_and_recorded_but_never_billed() {
    let upstream = mock_upstream().await;
    let yaml = format!(
        "auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\nproviders:\n  \
         up: {{ protocol: anthropic, base_url: \"http://{upstream}\" }}\nmodels:\n  \
         lane-anthropic: {{ provider: up, model: claude-sonnet-4-5 }}\nrate_card:\n  \
         lane-anthropic: {{ input_utok: 3, output_utok: 15 }}\n"
    );
    let (addr, _) = governed(&yaml).await;
    let key = create_key(addr, json!({"name": "claude-code", "limits": {"rpm": 2}})).await;
    let (id, secret) = (key["id"].as_str().unwrap(), key["key"].as_str().unwrap());
    let (path, body) = count_request(Protocol::Anthropic, "lane-anthropic", false);
    let auth = [("x-api-key", secret), ("anthropic-version", "2023-06-01")];
    for _ in 0..2 {
        let reply = post(addr, &path, &auth, body.to_string()).await;
        assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    }
    assert_eq!(post(addr, &path, &auth, body.to_string()).await.status, 429);
    let rows = rows_of(addr, id, 3).await;
    for row in &rows {
        assert_eq!((row["input_tokens"].as_u64(), row["usd"].as_f64()), (Some(0), Some(0.0)), "{row}");
    }
    let counted = rows.iter().filter(|row| row["operation"] == "count_tokens").count();
    assert_eq!(counted, 2, "{rows:?}");
    // The refusal is in the request log, as what it was: never spend.
    let refused = rows.iter().find(|row| row["operation"] == "refused").expect("the refusal's row");
    assert_eq!(refused["status"], 429);
    assert_eq!(refused["notes"]["refused"], json!({"kind": "rate_limit", "operation": "count_tokens"}), "{refused}");
}

fn media_config(upstream: SocketAddr) -> String {
    format!(
        r#"
auth: {{ mode: keys }}
governance: {{ ledger_flush_interval: 20ms }}
providers:
  up: {{ protocol: openai, base_url: "http://{upstream}" }}
models:
  image: {{ provider: up, model: gpt-image-1, operation: image }}
  tts: {{ provider: up, model: gpt-4o-mini-tts, operation: speech }}
  stt: {{ provider: up, model: gpt-4o-transcribe, operation: transcription }}
  moderation: {{ provider: up, model: omni-moderation-latest, operation: moderation }}
rate_card:
  image: {{ per_image_usd: 0.04 }}
  tts: {{ per_million_chars_usd: 15 }}
  stt: {{ per_minute_usd: 0.006 }}
  moderation: {{ per_request_usd: 0 }}
"#
    )
}

/// A multipart form of `fields` and a `file`, with its content type.
fn audio_form(fields: &[(&str, &str)], file: &[u8]) -> (String, Vec<u8>) {
    let boundary = "----switchyard-test-boundary";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").as_bytes(),
        );
    }
    body.extend_from_slice(
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.mp3\"\r\nContent-Type: audio/mpeg\r\n\r\n").as_bytes(),
    );
    body.extend_from_slice(file);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

#[tokio::test]
async fn openai_media_operations_pass_through_and_bill_their_units() {
    let upstream = mock_upstream().await;
    let (addr, _) = governed(&media_config(upstream)).await;
    let key = create_key(addr, json!({"name": "media"})).await;
    let (id, secret) = (key["id"].as_str().unwrap(), key["key"].as_str().unwrap());
    let bearer = format!("Bearer {secret}");
    let auth = [("authorization", bearer.as_str())];
    // Images: two made, two billed.
    let reply =
        post(addr, "/v1/images/generations", &auth, json!({"model": "image", "prompt": "a cat", "n": 2}).to_string())
            .await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    let images: Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(images["data"].as_array().unwrap().len(), 2);
    // Speech: binary audio, its content type kept.
    let reply =
        post(addr, "/v1/audio/speech", &auth, json!({"model": "tts", "input": "héllo", "voice": "alloy"}).to_string())
            .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["content-type"], "audio/mpeg");
    assert_eq!(&reply.body[..], &[&b"ID3\x04"[..], "héllo".as_bytes()].concat()[..]);
    // Transcription: the form goes up with the lane's model in it.
    let audio = vec![7u8; 48_000];
    let (content_type, form) = audio_form(&[("model", "stt")], &audio);
    let reply =
        post(addr, "/v1/audio/transcriptions", &[("authorization", &bearer), ("content-type", &content_type)], form)
            .await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    let text: Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(text["text"], "48000 bytes of audio for gpt-4o-transcribe");
    let (content_type, form) = audio_form(&[("model", "stt"), ("response_format", "text")], &audio);
    let reply =
        post(addr, "/v1/audio/translations", &[("authorization", &bearer), ("content-type", &content_type)], form)
            .await;
    assert_eq!(
        (reply.status.as_u16(), reply.headers["content-type"].to_str().unwrap()),
        (200, "text/plain; charset=utf-8")
    );
    // Moderation.
    let reply = post(
        addr,
        "/v1/moderations",
        &auth,
        json!({"model": "moderation", "input": ["fine", "[mock:flag]"]}).to_string(),
    )
    .await;
    let moderated: Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(
        (moderated["results"][0]["flagged"].as_bool(), moderated["results"][1]["flagged"].as_bool()),
        (Some(false), Some(true))
    );
    // The ledger bills each in its units.
    let rows = rows_of(addr, id, 5).await;
    let row = |operation: &str| rows.iter().find(|r| r["operation"] == operation).cloned().unwrap();
    assert_eq!(row("image")["units"], 2);
    assert!((row("image")["usd"].as_f64().unwrap() - 0.08).abs() < 1e-12);
    assert_eq!(row("speech")["units"], 5, "characters, not bytes");
    assert!((row("speech")["usd"].as_f64().unwrap() - 5.0 * 15.0 / 1e6).abs() < 1e-12);
    let heard = rows.iter().filter(|r| r["operation"] == "transcription").collect::<Vec<_>>();
    assert_eq!(heard.len(), 2);
    // The lane said 3 seconds (JSON); the text reply said none: 48,000 bytes at 16 kbit/s bound it at 24.
    let mut seconds: Vec<u64> = heard.iter().map(|r| r["units"].as_u64().unwrap()).collect();
    seconds.sort_unstable();
    assert_eq!(seconds, vec![3, 24]);
}

#[tokio::test]
async fn bad_media_input_is_the_callers_4xx() {
    let upstream = mock_upstream().await;
    let addr =
        gateway(&embed_config(upstream).replace(
            "  chat: {",
            "  stt: { provider: up-openai, model: whisper-1, operation: transcription }\n  chat: {",
        ))
        .await;
    // JSON to the form route.
    let reply = post(addr, "/v1/audio/transcriptions", &[], json!({"model": "stt"}).to_string()).await;
    assert_eq!(reply.status, 415, "{}", String::from_utf8_lossy(&reply.body));
    // A form without its file.
    let boundary = "b0";
    let form =
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nstt\r\n--{boundary}--\r\n");
    let content_type = format!("multipart/form-data; boundary={boundary}");
    let reply = post(addr, "/v1/audio/transcriptions", &[("content-type", &content_type)], form).await;
    assert_eq!(reply.status, 400, "{}", String::from_utf8_lossy(&reply.body));
    // An audio file over OpenAI's 25 MB.
    let (content_type, form) = audio_form(&[("model", "stt")], &vec![0u8; 25_000_001]);
    let reply = post(addr, "/v1/audio/transcriptions", &[("content-type", &content_type)], form).await;
    assert_eq!(reply.status, 413, "{}", String::from_utf8_lossy(&reply.body));
    // A pool of another operation.
    let (content_type, form) = audio_form(&[("model", "embed-openai")], b"x");
    let reply = post(addr, "/v1/audio/transcriptions", &[("content-type", &content_type)], form).await;
    assert_eq!(reply.status, 404);
}

#[tokio::test]
async fn model_lists_speak_each_dialect_and_say_each_operation() {
    let upstream = mock_upstream().await;
    let addr = gateway(&embed_config(upstream).replace(
        "  chat: { provider: up-openai, model: gpt-4o-mini }",
        "  chat: { provider: up-openai, model: gpt-4o-mini, context_window: 128000 }",
    ))
    .await;
    let openai: Value = serde_json::from_slice(&get_with(addr, "/v1/models", &[]).await.body).unwrap();
    let entry = |id: &str| openai["data"].as_array().unwrap().iter().find(|e| e["id"] == id).cloned().unwrap();
    assert_eq!(
        (entry("embed-titan")["operation"].as_str(), entry("chat")["operation"].as_str()),
        (Some("embed"), Some("chat"))
    );
    assert_eq!(entry("rerank-cohere")["operation"], "rerank");
    assert_eq!(entry("chat")["context_window"], 128000);
    assert_eq!(entry("embeddings")["owned_by"], "switchyard-pool");
    // Anthropic's: chat entries only, paged.
    let headers = [("anthropic-version", "2023-06-01")];
    let anthropic: Value = serde_json::from_slice(&get_with(addr, "/v1/models?limit=1", &headers).await.body).unwrap();
    assert_eq!(
        anthropic["data"],
        json!([{"type": "model", "id": "chat", "display_name": "chat", "created_at": "1970-01-01T00:00:00Z"}])
    );
    assert_eq!((anthropic["has_more"].as_bool(), anthropic["last_id"].as_str()), (Some(false), Some("chat")));
    // Gemini's: chat and embed entries with their methods, paged by token.
    let mut names = Vec::new();
    let mut token = String::new();
    loop {
        let page = get_with(addr, &format!("/v1beta/models?pageSize=2&pageToken={token}"), &[]).await;
        let page: Value = serde_json::from_slice(&page.body).unwrap();
        for model in page["models"].as_array().unwrap() {
            names.push(model["name"].as_str().unwrap().to_owned());
            let methods = model["supportedGenerationMethods"].as_array().unwrap();
            assert!(!methods.is_empty(), "{model}");
        }
        match page["nextPageToken"].as_str() {
            Some(next) => token = next.to_owned(),
            None => break,
        }
    }
    assert!(
        names.contains(&"models/embed-gemini".to_owned()) && names.contains(&"models/chat".to_owned()),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.contains("rerank")), "a Gemini caller cannot rerank: {names:?}");
    let one: Value = serde_json::from_slice(&get_with(addr, "/v1beta/models/embed-gemini", &[]).await.body).unwrap();
    assert_eq!(one["supportedGenerationMethods"], json!(["embedContent", "batchEmbedContents"]));
    // A Gemini key on /v1/models asks for Gemini's shape.
    let keyed: Value = serde_json::from_slice(&get_with(addr, "/v1/models?key=x", &[]).await.body).unwrap();
    assert!(keyed["models"].is_array(), "{keyed}");
}

#[tokio::test]
async fn under_keys_a_list_needs_a_key_and_shows_what_it_may_use() {
    let upstream = mock_upstream().await;
    let (addr, _) = governed(&governed_config(upstream)).await;
    let key = create_key(addr, json!({"name": "narrow", "pools": ["embed-gemini", "chat"]})).await;
    let secret = key["key"].as_str().unwrap();
    assert_eq!(get_with(addr, "/v1/models", &[]).await.status, 401);
    let anonymous = get_with(addr, "/v1beta/models", &[]).await;
    assert_eq!(anonymous.status, 401);
    let bearer = format!("Bearer {secret}");
    let listed: Value =
        serde_json::from_slice(&get_with(addr, "/v1/models", &[("authorization", &bearer)]).await.body).unwrap();
    let ids: Vec<&str> = listed["data"].as_array().unwrap().iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["chat", "embed-gemini"]);
    let gemini = get_with(addr, "/v1beta/models", &[("x-goog-api-key", secret)]).await;
    let gemini: Value = serde_json::from_slice(&gemini.body).unwrap();
    assert_eq!(gemini["models"].as_array().unwrap().len(), 2, "{gemini}");
    let anthropic = get_with(addr, "/v1/models", &[("x-api-key", secret), ("anthropic-version", "2023-06-01")]).await;
    let anthropic: Value = serde_json::from_slice(&anthropic.body).unwrap();
    assert_eq!(anthropic["data"].as_array().unwrap().len(), 1, "chat only: {anthropic}");
}

/// The vendor fake behind a door that writes down each request's path and
/// body.
pub(crate) async fn recording_upstream() -> (SocketAddr, std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>) {
    use tower_service::Service;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mock = switchyard_gateway::server::mock_router(switchyard_protocol::codec);
    let kept = seen.clone();
    let router = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let (seen, mut mock) = (kept.clone(), mock.clone());
        async move {
            let (parts, body) = request.into_parts();
            let bytes = axum::body::to_bytes(body, 1 << 24).await.unwrap();
            let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            seen.lock().unwrap().push((parts.uri.path().to_owned(), json));
            mock.call(axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes))).await.unwrap()
        }
    });
    (common::spawn(router).await, seen)
}

fn completions_config(upstream: SocketAddr) -> String {
    format!(
        "auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\nproviders:\n  \
         up-openai: {{ protocol: openai, base_url: \"http://{upstream}\" }}\n  \
         up-anthropic: {{ protocol: anthropic, base_url: \"http://{upstream}\" }}\nmodels:\n  \
         instruct: {{ provider: up-openai, model: gpt-3.5-turbo-instruct }}\n  \
         claude: {{ provider: up-anthropic, model: claude-sonnet-4-5 }}\npools:\n  \
         strict-claude: {{ translation: strict, members: [{{ model: claude }}] }}\nrate_card:\n  \
         instruct: {{ input_utok: 1.5, output_utok: 2 }}\n  claude: {{ input_utok: 3, output_utok: 15 }}\n"
    )
}

/// The text of a completion's stream, its finish reason, whether it showed
/// a usage chunk, and whether it ended with `[DONE]`.
fn completion_stream(body: &[u8]) -> (String, Option<String>, Option<Value>, bool) {
    let text = String::from_utf8_lossy(body);
    let data: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    let done = data.last() == Some(&"[DONE]");
    let (mut said, mut finish, mut usage) = (String::new(), None, None);
    for chunk in data.iter().filter(|d| **d != "[DONE]") {
        let chunk: Value = serde_json::from_str(chunk).unwrap();
        assert_eq!(chunk["object"], "text_completion", "{chunk}");
        match chunk["choices"].as_array().unwrap().as_slice() {
            [] => usage = Some(chunk["usage"].clone()),
            [choice] => {
                said.push_str(choice["text"].as_str().unwrap());
                if let Some(reason) = choice["finish_reason"].as_str() {
                    finish = Some(reason.to_owned());
                }
            }
            more => panic!("one choice a chunk: {more:?}"),
        }
    }
    (said, finish, usage, done)
}

#[tokio::test]
async fn a_legacy_completion_passes_to_an_openai_lane_as_it_came_and_crosses_to_others_through_chat() {
    let (upstream, seen) = recording_upstream().await;
    let (addr, _) = governed(&completions_config(upstream)).await;
    let key = create_key(addr, json!({"name": "legacy"})).await;
    let (id, secret) = (key["id"].as_str().unwrap(), key["key"].as_str().unwrap());
    let bearer = format!("Bearer {secret}");
    let auth = [("authorization", bearer.as_str())];
    let ask = |model: &str, extra: Value| {
        let mut body = json!({"model": model, "prompt": "Say this is a test", "echo": true, "user": "ada"});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body.to_string()
    };
    // An OpenAI lane: the caller's bytes to its /v1/completions, but for the
    // model; its answer back as it came (the fake echoes the prompt, as OpenAI does).
    let sent = ask("instruct", json!({"max_tokens": 7, "logit_bias": {"50256": -100}}));
    let reply = post(addr, "/v1/completions", &auth, sent.clone()).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert!(!reply.headers.contains_key("x-switchyard-dropped"));
    let whole: Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(whole["object"], "text_completion");
    assert!(whole["id"].as_str().unwrap().starts_with("cmpl-"), "{whole}");
    let text = whole["choices"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("Say this is a test[openai gpt-3.5-turbo-instruct] you said"), "{whole}");
    assert_eq!(whole["choices"][0]["finish_reason"], "stop");
    assert!(
        whole["usage"]["prompt_tokens"].as_u64().unwrap() > 0
            && whole["usage"]["completion_tokens"].as_u64().unwrap() > 0
    );
    let (path, body) = seen.lock().unwrap().last().cloned().unwrap();
    let mut expected: Value = serde_json::from_str(&sent).unwrap();
    expected["model"] = json!("gpt-3.5-turbo-instruct");
    assert_eq!((path.as_str(), body), ("/v1/completions", expected));
    // Another protocol's lane: a chat request of one user message, 16 tokens
    // when the caller named none; `echo` cannot cross and is reported.
    let reply = post(addr, "/v1/completions", &auth, ask("claude", json!({}))).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.headers["x-switchyard-dropped"], "echo");
    let whole: Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(whole["object"], "text_completion");
    assert_eq!(whole["choices"][0]["text"], "[anthropic claude-sonnet-4-5] you said: Say this is a test");
    assert_eq!(
        (whole["choices"][0]["finish_reason"].as_str(), whole["choices"][0]["index"].as_u64()),
        (Some("stop"), Some(0))
    );
    let (path, body) = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(path, "/v1/messages");
    assert_eq!(body["messages"], json!([{"role": "user", "content": "Say this is a test"}]), "{body}");
    assert_eq!((body["max_tokens"].as_u64(), body["metadata"]["user_id"].as_str()), (Some(16), Some("ada")));
    // Strict: refused in OpenAI's shape, naming what would be lost; no lane asked.
    let asked = seen.lock().unwrap().len();
    let reply = post(addr, "/v1/completions", &auth, ask("strict-claude", json!({}))).await;
    assert_eq!(reply.status, 400);
    let refused: Value = serde_json::from_slice(&reply.body).unwrap();
    assert!(refused["error"]["message"].as_str().unwrap().contains("echo"), "{refused}");
    let strict = [("authorization", bearer.as_str()), ("x-switchyard-strict", "1")];
    assert_eq!(post(addr, "/v1/completions", &strict, ask("claude", json!({}))).await.status, 400);
    // A prompt of several strings has no chat form: the caller's 400.
    let several = json!({"model": "claude", "prompt": ["a", "b"]}).to_string();
    let reply = post(addr, "/v1/completions", &auth, several).await;
    assert_eq!(reply.status, 400);
    assert_eq!(serde_json::from_slice::<Value>(&reply.body).unwrap()["error"]["param"], "prompt");
    assert_eq!(seen.lock().unwrap().len(), asked);
    // Streamed to the OpenAI lane: asked for usage (metered), which the
    // caller, who did not ask, never sees; chunks and [DONE] as they came.
    let reply = post(addr, "/v1/completions", &auth, ask("instruct", json!({"stream": true, "echo": false}))).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    let (said, finish, usage, done) = completion_stream(&reply.body);
    assert_eq!(
        (said.as_str(), finish.as_deref(), usage, done),
        ("[openai gpt-3.5-turbo-instruct] you said: Say this is a test", Some("stop"), None, true)
    );
    let (_, body) = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(body["stream_options"], json!({"include_usage": true}), "asked upstream for usage");
    // Streamed across, with the usage chunk the caller asked for.
    let options = json!({"stream": true, "stream_options": {"include_usage": true}});
    let reply = post(addr, "/v1/completions", &auth, ask("claude", options)).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.headers["x-switchyard-dropped"], "echo");
    let (said, finish, usage, done) = completion_stream(&reply.body);
    assert_eq!(
        (said.as_str(), finish.as_deref(), done),
        ("[anthropic claude-sonnet-4-5] you said: Say this is a test", Some("stop"), true)
    );
    let usage = usage.expect("the usage chunk asked for");
    assert!(usage["total_tokens"].as_u64().unwrap() > 0, "{usage}");
    // Each is a ledger row of operation `completion`, billed its lane's price.
    let rows = rows_of(addr, id, 7).await;
    let served: Vec<&Value> = rows.iter().filter(|r| r["operation"] == "completion" && r["status"] == 200).collect();
    assert_eq!(served.len(), 4, "{rows:?}");
    assert_eq!(served.iter().filter(|r| r["stream"] == true).count(), 2);
    for row in served {
        assert!(row["input_tokens"].as_u64().unwrap() > 0 && row["output_tokens"].as_u64().unwrap() > 0, "{row}");
        assert!(row["usd"].as_f64().unwrap() > 0.0, "{row}");
        assert!(matches!(row["lane"].as_str(), Some("instruct" | "claude")), "{row}");
    }
}

#[tokio::test]
async fn a_cached_completion_is_answered_as_a_completion_and_never_to_a_chat() {
    let upstream = mock_upstream().await;
    let yaml = format!(
        "providers:\n  up: {{ protocol: openai, base_url: \"http://{upstream}\" }}\nmodels:\n  \
         instruct: {{ provider: up, model: gpt-3.5-turbo-instruct }}\npools:\n  \
         cached: {{ cache: {{ ttl: 5m }}, members: [{{ model: instruct }}] }}\n"
    );
    let addr = common::gateway(&yaml).await;
    let body = json!({"model": "cached", "prompt": "Say this is a test"}).to_string();
    let first = post(addr, "/v1/completions", &[], body.clone()).await;
    assert_eq!(first.status, 200, "{}", String::from_utf8_lossy(&first.body));
    let mut hit = post(addr, "/v1/completions", &[], body.clone()).await;
    for _ in 0..50 {
        if hit.headers.get("x-switchyard-cache").is_some_and(|v| v == "hit") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        hit = post(addr, "/v1/completions", &[], body.clone()).await;
    }
    assert_eq!(hit.headers["x-switchyard-cache"], "hit");
    let (first, hit): (Value, Value) =
        (serde_json::from_slice(&first.body).unwrap(), serde_json::from_slice(&hit.body).unwrap());
    assert_eq!(
        (hit["object"].clone(), hit["choices"][0]["text"].clone()),
        (json!("text_completion"), first["choices"][0]["text"].clone())
    );
    // Streamed from the cache: completion chunks.
    let streamed = json!({"model": "cached", "prompt": "Say this is a test", "stream": true}).to_string();
    let reply = post(addr, "/v1/completions", &[], streamed).await;
    assert_eq!(reply.headers["x-switchyard-cache"], "hit");
    let (said, finish, _, done) = completion_stream(&reply.body);
    assert_eq!(
        (said, finish.as_deref(), done),
        (first["choices"][0]["text"].as_str().unwrap().to_owned(), Some("stop"), true)
    );
    // The same words as a chat are another request: never the completion's answer.
    let chat = json!({"model": "cached", "messages": [{"role": "user", "content": "Say this is a test"}]}).to_string();
    let reply = post(addr, "/v1/chat/completions", &[], chat).await;
    assert_eq!(reply.status, 200);
    assert_ne!(reply.headers.get("x-switchyard-cache").map(|v| v.to_str().unwrap()), Some("hit"));
    assert_eq!(serde_json::from_slice::<Value>(&reply.body).unwrap()["object"], "chat.completion");
}
