//! Operations beyond chat through the gateway, over real TCP: every
//! caller dialect of an operation against every lane protocol that has it,
//! through the vendor fake on its own port (a real upstream hop). Vectors
//! must come back exactly as the lane made them, in input order.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

mod common;

use std::net::SocketAddr;

use common::{gateway, mock_upstream, post, Reply};
use serde_json::{json, Value};
use switchyard_transport::mock_operation::vector;

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
    let reply = post(addr, "/model/embed-titan/invoke", &[], json!({"prompt": "x"}).to_string()).await;
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
