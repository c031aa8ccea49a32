//! Image generation across protocols over TCP: OpenAI's
//! `/v1/images/generations`, Gemini's Imagen `:predict` and Bedrock's
//! `InvokeModel` image bodies (Nova Canvas, Stability) each reach a lane of
//! every image protocol through the vendor fake, which refuses what the
//! vendors refuse (more images than a call makes, members it does not
//! know), and get base64 images back in their own shape, billed per image.
#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a failed unwrap is a failed test")]

use crate::common;

use std::net::SocketAddr;

use common::{admin_call, create_key, gateway, governed, post, Reply, ADMIN_TOKEN};
use serde_json::{json, Value};
use switchyard_transport::mock_operation::PIXEL_PNG;

/// Every image lane: name, and the path its upstream is asked at.
const LANES: [(&str, &str); 4] = [
    ("image-openai", "/v1/images/generations"),
    ("image-imagen", "/v1beta/models/imagen-4.0-generate-001:predict"),
    ("image-nova", "/model/amazon.nova-canvas-v1%3A0/invoke"),
    ("image-stability", "/model/stability.stable-image-ultra-v1%3A1/invoke"),
];

fn images_config(upstream: SocketAddr) -> String {
    let base = format!("http://{upstream}");
    format!(
        r#"
providers:
  up-openai: {{ protocol: openai, base_url: "{base}" }}
  up-gemini: {{ protocol: gemini, base_url: "{base}" }}
  up-bedrock: {{ protocol: bedrock, base_url: "{base}" }}
models:
  image-openai: {{ provider: up-openai, model: gpt-image-1, operation: image }}
  image-imagen: {{ provider: up-gemini, model: imagen-4.0-generate-001, operation: image }}
  image-nova: {{ provider: up-bedrock, model: "amazon.nova-canvas-v1:0", operation: image }}
  image-stability: {{ provider: up-bedrock, model: "stability.stable-image-ultra-v1:1", operation: image }}
"#
    )
}

/// The caller dialects of image generation.
#[derive(Debug, Clone, Copy)]
enum Caller {
    OpenAi,
    Imagen,
    Nova,
    Stability,
}

impl Caller {
    const ALL: [Caller; 4] = [Caller::OpenAi, Caller::Imagen, Caller::Nova, Caller::Stability];

    /// The path and body asking `pool` for `n` images of `prompt`.
    fn request(self, pool: &str, prompt: &str, n: u32) -> (String, Value) {
        match self {
            Caller::OpenAi => (
                "/v1/images/generations".into(),
                json!({"model": pool, "prompt": prompt, "n": n, "size": "1024x1024", "response_format": "b64_json"}),
            ),
            Caller::Imagen => (
                format!("/v1beta/models/{pool}:predict"),
                json!({"instances": [{"prompt": prompt}], "parameters": {"sampleCount": n, "aspectRatio": "1:1"}}),
            ),
            Caller::Nova => (
                format!("/model/{pool}/invoke"),
                json!({"taskType": "TEXT_IMAGE", "textToImageParams": {"text": prompt},
                       "imageGenerationConfig": {"numberOfImages": n, "width": 1024, "height": 1024}}),
            ),
            // Stability's body has no count: one image a call.
            Caller::Stability => (format!("/model/{pool}/invoke"), json!({"prompt": prompt, "aspect_ratio": "1:1"})),
        }
    }

    /// The base64 images of a reply in this caller's shape.
    fn images(self, body: &[u8]) -> Vec<String> {
        let reply: Value = serde_json::from_slice(body).unwrap();
        let (list, member) = match self {
            Caller::OpenAi => (&reply["data"], Some("b64_json")),
            Caller::Imagen => (&reply["predictions"], Some("bytesBase64Encoded")),
            Caller::Nova | Caller::Stability => (&reply["images"], None),
        };
        let items = list.as_array().unwrap_or_else(|| panic!("{self:?}: {reply}"));
        items.iter().map(|item| member.map_or(item, |m| &item[m]).as_str().unwrap().to_owned()).collect()
    }

    fn asks(self, n: u32) -> u32 {
        match self {
            Caller::Stability => 1,
            _ => n,
        }
    }
}

#[tokio::test]
async fn every_image_caller_reaches_every_image_lane_and_gets_base64_images_in_its_shape() {
    let upstream = common::mock_upstream().await;
    let addr = gateway(&images_config(upstream)).await;
    for caller in Caller::ALL {
        for (lane, _) in LANES {
            let (path, body) = caller.request(lane, "a lighthouse at dusk", 2);
            let reply = post(addr, &path, &[], body.to_string()).await;
            let pair = format!("{caller:?} -> {lane}");
            assert_eq!(reply.status, 200, "{pair}: {}", String::from_utf8_lossy(&reply.body));
            let images = caller.images(&reply.body);
            assert_eq!(images.len() as u32, caller.asks(2), "{pair}");
            assert!(images.iter().all(|image| image == PIXEL_PNG), "{pair}: {images:?}");
        }
    }
}

/// The upstream's requests to `path`, in order.
fn asked(seen: &std::sync::Mutex<Vec<(String, Value)>>, path: &str) -> Vec<Value> {
    seen.lock().unwrap().iter().filter(|(p, _)| p == path).map(|(_, body)| body.clone()).collect()
}

#[tokio::test]
async fn a_count_past_what_a_model_makes_a_call_is_split_and_losses_are_reported() {
    let (upstream, seen) = super::operations::recording_upstream().await;
    let addr = gateway(&images_config(upstream)).await;
    let ask = |lane: &str, n: u32| {
        json!({"model": lane, "prompt": "a fox", "n": n, "size": "1792x1024", "quality": "hd",
               "style": "vivid", "response_format": "url"})
        .to_string()
    };
    // Imagen makes 4 a call (the facts say so; the fake refuses 5): 6 is 4 and 2.
    let reply = post(addr, "/v1/images/generations", &[], ask("image-imagen", 6)).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(Caller::OpenAi.images(&reply.body).len(), 6);
    let calls = asked(&seen, LANES[1].1);
    let counts: Vec<&Value> = calls.iter().map(|body| &body["parameters"]["sampleCount"]).collect();
    assert_eq!(counts, [&json!(4), &json!(2)]);
    assert_eq!(calls[0]["parameters"]["aspectRatio"], "16:9", "the nearest ratio Imagen takes");
    // A URL cannot come from a base64-only lane: base64 comes back, said so.
    let dropped = reply.headers["x-switchyard-dropped"].to_str().unwrap();
    assert_eq!(dropped, "size, quality, style, response_format");
    // Nova makes 5 a call at the size asked; Stability one, at a ratio.
    let reply = post(addr, "/v1/images/generations", &[], ask("image-nova", 7)).await;
    assert_eq!(Caller::OpenAi.images(&reply.body).len(), 7, "{}", String::from_utf8_lossy(&reply.body));
    let calls = asked(&seen, LANES[2].1);
    let config: Vec<&Value> = calls.iter().map(|body| &body["imageGenerationConfig"]).collect();
    assert_eq!(config[0], &json!({"numberOfImages": 5, "width": 1792, "height": 1024, "quality": "premium"}));
    assert_eq!(config[1]["numberOfImages"], 2);
    let reply = post(addr, "/v1/images/generations", &[], ask("image-stability", 3)).await;
    assert_eq!(Caller::OpenAi.images(&reply.body).len(), 3);
    let calls = asked(&seen, LANES[3].1);
    assert_eq!(calls.len(), 3);
    assert!(calls.iter().all(|body| *body == json!({"prompt": "a fox", "aspect_ratio": "16:9"})), "{calls:?}");
    // Strict: the lost URL (and the rest) refuse instead, naming them.
    let reply = post(addr, "/v1/images/generations", &[("x-switchyard-strict", "1")], ask("image-imagen", 1)).await;
    assert_eq!(reply.status, 400);
    let error: Value = serde_json::from_slice(&reply.body).unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("response_format"), "{error}");
    // A negative prompt to Imagen 4, which the facts say takes none: not
    // sent (the fake would refuse it), reported.
    let nova = json!({"taskType": "TEXT_IMAGE", "textToImageParams": {"text": "a fox", "negativeText": "rain"},
                      "imageGenerationConfig": {"numberOfImages": 1, "seed": 9}});
    let reply = post(addr, "/model/image-imagen/invoke", &[], nova.to_string()).await;
    assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.headers["x-switchyard-dropped"], "negative_prompt, seed");
    assert!(asked(&seen, LANES[1].1).last().unwrap()["parameters"].get("negativePrompt").is_none());
    // The caller's own vendor limits are its vendor's: a same-protocol
    // request past them is the vendor's 400.
    let (path, body) = Caller::Imagen.request("image-imagen", "a fox", 5);
    let reply: Reply = post(addr, &path, &[], body.to_string()).await;
    assert_eq!(reply.status, 400, "{}", String::from_utf8_lossy(&reply.body));
}

#[tokio::test]
async fn translated_images_are_billed_per_image_the_lane_made() {
    let upstream = common::mock_upstream().await;
    let yaml = format!(
        "auth: {{ mode: keys }}\ngovernance: {{ ledger_flush_interval: 20ms }}\n{}rate_card:\n  \
         image-imagen: {{ per_image_usd: 0.04 }}\n  image-nova: {{ per_image_usd: 0.08 }}\n",
        images_config(upstream).replace("  image-openai:", "  image-openai-unused:")
    );
    let (addr, _) = governed(&yaml).await;
    let key = create_key(addr, json!({"name": "images"})).await;
    let (id, secret) = (key["id"].as_str().unwrap(), key["key"].as_str().unwrap());
    let bearer = format!("Bearer {secret}");
    let auth = [("authorization", bearer.as_str())];
    for (lane, n) in [("image-imagen", 6), ("image-nova", 2)] {
        let body = json!({"model": lane, "prompt": "a cat", "n": n}).to_string();
        let reply = post(addr, "/v1/images/generations", &auth, body).await;
        assert_eq!(reply.status, 200, "{}", String::from_utf8_lossy(&reply.body));
    }
    let rows = loop {
        let reply = admin_call(addr, "GET", &format!("/api/v1/admin/requests?key={id}"), Some(ADMIN_TOKEN), None).await;
        let page: Value = serde_json::from_slice(&reply.body).unwrap();
        let rows = page["data"].as_array().unwrap().clone();
        if rows.len() >= 2 {
            break rows;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    // A row names its lane and the model it asked.
    let row = |lane: &str| {
        rows.iter().find(|r| r["lane"] == lane || r["model"] == lane).cloned().unwrap_or_else(|| panic!("{rows:?}"))
    };
    let imagen = row("image-imagen");
    assert_eq!((imagen["operation"].as_str(), imagen["units"].as_u64()), (Some("image"), Some(6)));
    assert!((imagen["usd"].as_f64().unwrap() - 0.24).abs() < 1e-12, "{imagen}");
    let nova = row("image-nova");
    assert!((nova["usd"].as_f64().unwrap() - 0.16).abs() < 1e-12, "{nova}");
}
