//! OpenAI image generation (`POST /v1/images/generations`): `prompt`, `n`,
//! `size` (`WxH` or `auto`), `quality`, `response_format` (`url` or
//! `b64_json`, dall-e only: gpt-image models always answer base64),
//! `style` (dall-e-3), `background` and `output_format` (gpt-image) and
//! `user`; the reply's `data[]` (`b64_json` or `url`, `revised_prompt`)
//! with gpt-image's token `usage`. OpenAI has no negative prompt, seed,
//! person policy or guidance scale: a request that carries them here is
//! told they were dropped.

use http::HeaderMap;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use switchyard_codec::image::{format_of, mime_of, parse_size, ratio_value, ImageCodec, ImageModel};
use switchyard_codec::{DecodeError, Encoded};
use switchyard_ir::{DropReason, Dropped, Field, Image, ImageFormat, ImageRequest, ImageResponse, Protocol};

/// OpenAI's image generation.
pub(crate) struct OpenAiImage;

/// The most images one OpenAI request may ask for.
const MAX_IMAGES: u32 = 10;

#[derive(Deserialize)]
struct WireRequest {
    #[serde(default)]
    model: String,
    prompt: String,
    #[serde(default)]
    n: Option<u32>,
    #[serde(default)]
    size: Option<String>,
    #[serde(default)]
    quality: Option<String>,
    #[serde(default)]
    response_format: Option<String>,
    #[serde(default)]
    style: Option<String>,
    #[serde(default)]
    background: Option<String>,
    #[serde(default)]
    output_format: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// A dall-e model (its own sizes, `response_format`, `style`).
fn is_dall_e(model: &str) -> bool {
    model.rsplit('/').next().unwrap_or(model).starts_with("dall-e")
}

/// The sizes `model` takes.
fn sizes(model: &str) -> &'static [(u32, u32)] {
    let name = model.rsplit('/').next().unwrap_or(model);
    if name.starts_with("dall-e-2") {
        &[(256, 256), (512, 512), (1024, 1024)]
    } else if name.starts_with("dall-e") {
        &[(1024, 1024), (1792, 1024), (1024, 1792)]
    } else {
        &[(1024, 1024), (1536, 1024), (1024, 1536)]
    }
}

/// The size of `model`'s nearest `ratio`, and whether it is that ratio exactly.
fn size_for_ratio(model: &str, ratio: f64) -> ((u32, u32), bool) {
    let choices = sizes(model);
    let distance = |(w, h): (u32, u32)| ((f64::from(w) / f64::from(h)).ln() - ratio.ln()).abs();
    let best = choices.iter().copied().min_by(|a, b| distance(*a).total_cmp(&distance(*b))).unwrap_or((1024, 1024));
    (best, distance(best) < 1e-9)
}

/// Nova's `premium` and `standard` in `model`'s words.
fn quality_for(model: &str, quality: &str) -> Option<(&'static str, bool)> {
    let dall_e = is_dall_e(model);
    Some(match (quality, dall_e) {
        ("standard", true) => ("standard", true),
        ("hd", true) => ("hd", true),
        ("premium" | "high", true) => ("hd", false),
        ("low" | "medium", true) => ("standard", false),
        ("low" | "medium" | "high" | "auto", false) => return Some((static_quality(quality), true)),
        ("premium" | "hd", false) => ("high", false),
        ("standard", false) => ("medium", false),
        _ => return None,
    })
}

fn static_quality(quality: &str) -> &'static str {
    match quality {
        "low" => "low",
        "medium" => "medium",
        "high" => "high",
        _ => "auto",
    }
}

impl ImageCodec for OpenAiImage {
    fn read_request(&self, body: &[u8]) -> Result<ImageRequest, DecodeError> {
        let wire: WireRequest = serde_json::from_slice(body)?;
        let size = match wire.size.as_deref() {
            None | Some("auto") => None,
            Some(text) => Some(parse_size(text).ok_or_else(|| {
                DecodeError::invalid("size", format!("`{text}` is not a size: give WIDTHxHEIGHT, such as 1024x1024"))
            })?),
        };
        let response_format = match wire.response_format.as_deref() {
            // Unsaid, base64: what every lane gives (gpt-image answers nothing else).
            None => ImageFormat::B64Json,
            Some("url") => ImageFormat::Url,
            Some("b64_json") => ImageFormat::B64Json,
            Some(other) => {
                return Err(DecodeError::invalid("response_format", format!("`{other}` is not url or b64_json")))
            }
        };
        let mut request = ImageRequest {
            model: wire.model,
            prompt: wire.prompt,
            n: wire.n,
            size,
            quality: wire.quality,
            output_mime: wire.output_format.as_deref().and_then(mime_of).map(str::to_owned),
            response_format,
            style: wire.style,
            background: wire.background,
            user: wire.user,
            ..ImageRequest::default()
        };
        for (key, value) in wire.rest {
            request.extra.insert(Protocol::OpenAi, key, value);
        }
        Ok(request)
    }

    fn write_request(&self, request: &ImageRequest, _model: &ImageModel) -> Encoded {
        let mut dropped = Vec::new();
        let model = request.model.as_str();
        let mut body = json!({"model": model, "prompt": request.prompt});
        if let Some(n) = request.n {
            body["n"] = json!(n);
        }
        match (request.size, request.aspect_ratio.as_deref().and_then(ratio_value)) {
            (Some((width, height)), _) => body["size"] = json!(format!("{width}x{height}")),
            (None, Some(ratio)) => {
                let ((width, height), exact) = size_for_ratio(model, ratio);
                body["size"] = json!(format!("{width}x{height}"));
                if !exact {
                    dropped.push(Dropped::new(Field::ImageSize, DropReason::Converted));
                }
            }
            (None, None) => {}
        }
        if let Some(quality) = request.quality.as_deref() {
            match quality_for(model, quality) {
                Some((word, exact)) => {
                    body["quality"] = json!(word);
                    if !exact {
                        dropped.push(Dropped::new(Field::ImageQuality, DropReason::Converted));
                    }
                }
                None => dropped.push(Dropped::new(Field::ImageQuality, DropReason::Unsupported)),
            }
        }
        if is_dall_e(model) {
            // Base64 unless the caller asked for URLs.
            let format = match request.response_format {
                ImageFormat::Url => "url",
                ImageFormat::B64Json => "b64_json",
            };
            body["response_format"] = json!(format);
            if let Some(style) = &request.style {
                body["style"] = json!(style);
            }
            if request.output_mime.is_some() {
                dropped.push(Dropped::new(Field::OutputFormat, DropReason::Unsupported));
            }
            if request.background.is_some() {
                dropped.push(Dropped::new(Field::ImageBackground, DropReason::Unsupported));
            }
        } else {
            if request.response_format == ImageFormat::Url {
                dropped.push(Dropped::new(Field::ResponseFormat, DropReason::Unsupported));
            }
            if let Some(mime) = &request.output_mime {
                body["output_format"] = json!(format_of(mime));
            }
            if let Some(background) = &request.background {
                body["background"] = json!(background);
            }
            if request.style.is_some() {
                dropped.push(Dropped::new(Field::ImageStyle, DropReason::Unsupported));
            }
        }
        if let Some(user) = &request.user {
            body["user"] = json!(user);
        }
        for (field, said) in [
            (Field::NegativePrompt, request.negative_prompt.is_some()),
            (Field::Seed, request.seed.is_some()),
            (Field::PersonGeneration, request.person_generation.is_some()),
            (Field::CfgScale, request.cfg_scale.is_some()),
        ] {
            if said {
                dropped.push(Dropped::unsupported(field));
            }
        }
        if let Some(extra) = request.extra.for_target(Protocol::OpenAi, &mut dropped) {
            for (key, value) in extra {
                body[key.as_str()] = value.clone();
            }
        }
        Encoded { body: serde_json::to_vec(&body).unwrap_or_default(), dropped }
    }

    fn read_response(&self, body: &[u8], _headers: &HeaderMap) -> Result<ImageResponse, DecodeError> {
        #[derive(Deserialize)]
        struct Wire {
            #[serde(default)]
            created: Option<u64>,
            #[serde(default)]
            data: Vec<WireImage>,
            #[serde(default)]
            output_format: Option<String>,
            #[serde(default)]
            usage: Option<WireUsage>,
        }
        #[derive(Deserialize)]
        struct WireImage {
            #[serde(default)]
            b64_json: Option<String>,
            #[serde(default)]
            url: Option<String>,
            #[serde(default)]
            revised_prompt: Option<String>,
        }
        #[derive(Deserialize)]
        struct WireUsage {
            #[serde(default)]
            input_tokens: Option<u64>,
            #[serde(default)]
            output_tokens: Option<u64>,
        }
        let wire: Wire = serde_json::from_slice(body)?;
        let mime = wire.output_format.as_deref().and_then(mime_of).map(str::to_owned);
        let images = wire
            .data
            .into_iter()
            .map(|image| Image {
                b64: image.b64_json.unwrap_or_default(),
                url: image.url,
                mime_type: mime.clone(),
                revised_prompt: image.revised_prompt,
            })
            .collect();
        let (input_tokens, output_tokens) = wire.usage.map_or((None, None), |u| (u.input_tokens, u.output_tokens));
        Ok(ImageResponse { created: wire.created, images, input_tokens, output_tokens, seeds: Vec::new() })
    }

    fn write_response(&self, response: &ImageResponse, _request: &ImageRequest) -> Vec<u8> {
        let data: Vec<Value> = response
            .images
            .iter()
            .map(|image| {
                let mut item = match &image.url {
                    Some(url) if image.b64.is_empty() => json!({"url": url}),
                    _ => json!({"b64_json": image.b64}),
                };
                if let Some(revised) = &image.revised_prompt {
                    item["revised_prompt"] = json!(revised);
                }
                item
            })
            .collect();
        let mut body = json!({"created": response.created.unwrap_or(0), "data": data});
        if let Some(mime) = response.images.first().and_then(|i| i.mime_type.as_deref()) {
            body["output_format"] = json!(format_of(mime));
        }
        if let (Some(input), Some(output)) = (response.input_tokens, response.output_tokens) {
            body["usage"] = json!({"input_tokens": input, "output_tokens": output, "total_tokens": input + output});
        }
        serde_json::to_vec(&body).unwrap_or_default()
    }

    fn upstream_path(&self, _model: &str) -> String {
        "/v1/images/generations".to_owned()
    }

    fn max_images(&self, model: &str) -> u32 {
        if model.rsplit('/').next().unwrap_or(model).starts_with("dall-e-3") {
            1
        } else {
            MAX_IMAGES
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_openai_request_reads_and_a_cross_protocol_one_is_written_with_its_losses() {
        let body = br#"{"model":"m","prompt":"a fox","n":2,"size":"1792x1024","quality":"hd","response_format":"url","style":"vivid","moderation":"low"}"#;
        let request = OpenAiImage.read_request(body).unwrap();
        assert_eq!((request.n, request.size, request.response_format), (Some(2), Some((1792, 1024)), ImageFormat::Url));
        assert_eq!(request.extra.fields.len(), 1, "moderation is unmodelled");
        let from_nova = ImageRequest {
            model: "gpt-image-1".into(),
            prompt: "a fox".into(),
            negative_prompt: Some("rain".into()),
            seed: Some(7),
            quality: Some("premium".into()),
            aspect_ratio: Some("16:9".into()),
            ..ImageRequest::default()
        };
        let encoded = OpenAiImage.write_request(&from_nova, &ImageModel::default());
        let written: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!((written["size"].clone(), written["quality"].clone()), (json!("1536x1024"), json!("high")));
        let fields: Vec<Field> = encoded.dropped.iter().map(|d| d.field).collect();
        for field in [Field::ImageSize, Field::ImageQuality, Field::NegativePrompt, Field::Seed] {
            assert!(fields.contains(&field), "{field:?}: {fields:?}");
        }
        assert!(written.get("response_format").is_none(), "gpt-image takes no response_format");
        let dall_e = ImageRequest { model: "dall-e-3".into(), ..from_nova };
        let written: Value =
            serde_json::from_slice(&OpenAiImage.write_request(&dall_e, &ImageModel::default()).body).unwrap();
        assert_eq!(written["response_format"], "b64_json", "a cross-protocol caller reads base64");
        assert_eq!(OpenAiImage.max_images("dall-e-3"), 1);
    }

    #[test]
    fn a_reply_reads_and_writes_back() {
        let reply = OpenAiImage
            .read_response(
                br#"{"created":1,"data":[{"b64_json":"AAA"},{"b64_json":"BBB"}],"usage":{"input_tokens":3,"output_tokens":544}}"#,
                &HeaderMap::new(),
            )
            .unwrap();
        assert_eq!((reply.images.len(), reply.output_tokens), (2, Some(544)));
        let out: Value = serde_json::from_slice(&OpenAiImage.write_response(&reply, &ImageRequest::default())).unwrap();
        assert_eq!(out["data"][1]["b64_json"], "BBB");
    }
}
