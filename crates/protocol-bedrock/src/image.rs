//! Bedrock image generation through `InvokeModel` (`POST
//! /model/{id}/invoke`), in the two body forms Bedrock's image models take:
//! - Amazon Nova Canvas and Titan Image Generator v2: `{taskType:
//!   "TEXT_IMAGE", textToImageParams: {text, negativeText},
//!   imageGenerationConfig: {numberOfImages, width, height, quality,
//!   cfgScale, seed}}` replying `{images: [base64], error}`; 1 to 5 images
//!   a call, PNG only, quality `standard` or `premium`;
//! - Stability's models (Stable Image Ultra, Core, SD3.5): `{prompt,
//!   negative_prompt, aspect_ratio, output_format, seed}` replying
//!   `{images, seeds, finish_reasons}`; one image a call (a larger count
//!   is split into calls), at an aspect ratio rather than a size.
//!
//! A caller's body picks its form (`taskType` or `prompt`) and the reply
//! takes the same one; a lane's wire model picks the form it is sent
//! (`stability.*` is Stability's, every other model Nova's).

use http::HeaderMap;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use switchyard_codec::image::{format_of, mime_of, nearest_ratio, ratio_value, ImageCodec, ImageModel};
use switchyard_codec::{DecodeError, Encoded};
use switchyard_ir::{DropReason, Dropped, Field, Image, ImageFormat, ImageRequest, ImageResponse, Protocol};

/// Bedrock's image generation.
pub(crate) struct BedrockImage;

/// The reply form of a caller that sent a Nova (or Titan) body.
const NOVA: &str = "nova";
/// The reply form of a caller that sent a Stability body.
const STABILITY: &str = "stability";
/// The most images a Nova Canvas or Titan call makes.
pub(crate) const NOVA_MAX_IMAGES: u32 = 5;
/// The aspect ratios Stability's models on Bedrock take.
pub(crate) const STABILITY_RATIOS: [&str; 9] = ["16:9", "1:1", "21:9", "2:3", "3:2", "4:5", "5:4", "9:16", "9:21"];
/// The side Nova draws a ratio at when no size is given (its default, 1024
/// pixels square, in area).
const NOVA_SIDE: f64 = 1024.0;
/// Nova's smallest and largest side, and the step of its sizes.
pub(crate) const NOVA_SIDES: (u32, u32, u32) = (320, 4096, 16);

/// Whether `model` takes Stability's body (else Nova's).
pub(crate) fn is_stability(model: &str) -> bool {
    model.split(['.', ':', '/']).any(|part| part == "stability")
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NovaRequest {
    task_type: String,
    text_to_image_params: NovaText,
    #[serde(default)]
    image_generation_config: Map<String, Value>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NovaText {
    text: String,
    #[serde(default)]
    negative_text: Option<String>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

#[derive(Deserialize)]
struct StabilityRequest {
    prompt: String,
    #[serde(default)]
    negative_prompt: Option<String>,
    #[serde(default)]
    aspect_ratio: Option<String>,
    #[serde(default)]
    output_format: Option<String>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

fn number<T: TryFrom<u64>>(config: &mut Map<String, Value>, key: &str) -> Result<Option<T>, DecodeError> {
    match config.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .and_then(|n| T::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| DecodeError::invalid(key, format!("`{key}` must be a whole number"))),
    }
}

/// A Nova size for `ratio`: about Nova's default area, each side a step
/// of 16 within its bounds.
fn nova_size_for(ratio: f64) -> (u32, u32) {
    let (least, most, step) = NOVA_SIDES;
    let side = |value: f64| {
        let stepped = ((value / f64::from(step)).round() as u32) * step;
        stepped.clamp(least, most)
    };
    (side(NOVA_SIDE * ratio.sqrt()), side(NOVA_SIDE / ratio.sqrt()))
}

/// A size Nova takes nearest `(width, height)`, and whether it is that size.
fn nova_size(width: u32, height: u32) -> ((u32, u32), bool) {
    let (least, most, step) = NOVA_SIDES;
    let fit = |side: u32| (side.div_ceil(step) * step).clamp(least, most);
    let fitted = (fit(width), fit(height));
    (fitted, fitted == (width, height))
}

impl BedrockImage {
    fn read_nova(value: Value) -> Result<ImageRequest, DecodeError> {
        let wire: NovaRequest = serde_json::from_value(value)?;
        if wire.task_type != "TEXT_IMAGE" {
            return Err(DecodeError::invalid(
                "taskType",
                format!("`{}` is not translated: only TEXT_IMAGE crosses protocols", wire.task_type),
            ));
        }
        let mut config = wire.image_generation_config;
        let width: Option<u32> = number(&mut config, "width")?;
        let height: Option<u32> = number(&mut config, "height")?;
        let mut request = ImageRequest {
            prompt: wire.text_to_image_params.text,
            negative_prompt: wire.text_to_image_params.negative_text,
            n: Some(number(&mut config, "numberOfImages")?.unwrap_or(1)),
            size: width.zip(height),
            seed: number(&mut config, "seed")?,
            quality: config.remove("quality").and_then(|q| q.as_str().map(str::to_owned)),
            cfg_scale: config.remove("cfgScale").and_then(|c| c.as_f64()),
            response_format: ImageFormat::B64Json,
            form: Some(NOVA.to_owned()),
            ..ImageRequest::default()
        };
        for (key, value) in config {
            request.extra.insert(Protocol::Bedrock, format!("imageGenerationConfig.{key}"), value);
        }
        for (key, value) in wire.text_to_image_params.rest {
            request.extra.insert(Protocol::Bedrock, format!("textToImageParams.{key}"), value);
        }
        for (key, value) in wire.rest {
            request.extra.insert(Protocol::Bedrock, key, value);
        }
        Ok(request)
    }

    fn read_stability(value: Value) -> Result<ImageRequest, DecodeError> {
        let wire: StabilityRequest = serde_json::from_value(value)?;
        let mut request = ImageRequest {
            prompt: wire.prompt,
            negative_prompt: wire.negative_prompt,
            n: Some(1),
            aspect_ratio: wire.aspect_ratio,
            output_mime: wire.output_format.as_deref().and_then(mime_of).map(str::to_owned),
            seed: wire.seed,
            response_format: ImageFormat::B64Json,
            form: Some(STABILITY.to_owned()),
            ..ImageRequest::default()
        };
        for (key, value) in wire.rest {
            request.extra.insert(Protocol::Bedrock, key, value);
        }
        Ok(request)
    }

    fn write_nova(request: &ImageRequest, model: &ImageModel, dropped: &mut Vec<Dropped>) -> Value {
        let mut text = json!({"text": request.prompt});
        match (&request.negative_prompt, model.negative_prompt) {
            (Some(_), Some(false)) => dropped.push(Dropped::new(Field::NegativePrompt, DropReason::Capability)),
            (Some(negative), _) => text["negativeText"] = json!(negative),
            (None, _) => {}
        }
        let mut config = json!({"numberOfImages": request.n.unwrap_or(1)});
        let size = match (request.size, request.aspect_ratio.as_deref().and_then(ratio_value)) {
            (Some((width, height)), _) => {
                let (size, exact) = nova_size(width, height);
                if !exact {
                    dropped.push(Dropped::new(Field::ImageSize, DropReason::Converted));
                }
                Some(size)
            }
            (None, Some(ratio)) => Some(nova_size_for(ratio)),
            (None, None) => None,
        };
        if let Some((width, height)) = size {
            config["width"] = json!(width);
            config["height"] = json!(height);
        }
        if let Some(quality) = request.quality.as_deref() {
            let (word, exact) = match quality {
                "standard" | "premium" => (quality, true),
                "hd" | "high" => ("premium", false),
                _ => ("standard", false),
            };
            config["quality"] = json!(word);
            if !exact {
                dropped.push(Dropped::new(Field::ImageQuality, DropReason::Converted));
            }
        }
        if let Some(cfg_scale) = request.cfg_scale {
            config["cfgScale"] = json!(cfg_scale);
        }
        if let Some(seed) = request.seed {
            config["seed"] = json!(seed);
        }
        if request.output_mime.as_deref().is_some_and(|mime| mime != "image/png") {
            dropped.push(Dropped::new(Field::OutputFormat, DropReason::Unsupported));
        }
        for (field, said) in [
            (Field::ImageStyle, request.style.is_some()),
            (Field::PersonGeneration, request.person_generation.is_some()),
        ] {
            if said {
                dropped.push(Dropped::unsupported(field));
            }
        }
        json!({"taskType": "TEXT_IMAGE", "textToImageParams": text, "imageGenerationConfig": config})
    }

    fn write_stability(request: &ImageRequest, model: &ImageModel, dropped: &mut Vec<Dropped>) -> Value {
        let mut body = json!({"prompt": request.prompt});
        match (&request.negative_prompt, model.negative_prompt) {
            (Some(_), Some(false)) => dropped.push(Dropped::new(Field::NegativePrompt, DropReason::Capability)),
            (Some(negative), _) => body["negative_prompt"] = json!(negative),
            (None, _) => {}
        }
        let wanted = match (&request.aspect_ratio, request.size) {
            (Some(ratio), _) if STABILITY_RATIOS.contains(&ratio.as_str()) => Some((ratio.clone(), true)),
            (Some(ratio), _) => ratio_value(ratio).map(|v| (nearest_ratio(v, &STABILITY_RATIOS).0.to_owned(), false)),
            // A ratio carries the shape, never the pixels.
            (None, Some((width, height))) => Some((
                nearest_ratio(f64::from(width) / f64::from(height.max(1)), &STABILITY_RATIOS).0.to_owned(),
                false,
            )),
            (None, None) => None,
        };
        if let Some((ratio, exact)) = wanted {
            body["aspect_ratio"] = json!(ratio);
            if !exact {
                dropped.push(Dropped::new(Field::ImageSize, DropReason::Converted));
            }
        }
        match request.output_mime.as_deref() {
            Some(mime @ ("image/png" | "image/jpeg")) => body["output_format"] = json!(format_of(mime)),
            Some(_) => dropped.push(Dropped::new(Field::OutputFormat, DropReason::Unsupported)),
            None => {}
        }
        if let Some(seed) = request.seed {
            body["seed"] = json!(seed);
        }
        for (field, said) in [
            (Field::ImageQuality, request.quality.is_some()),
            (Field::ImageStyle, request.style.is_some()),
            (Field::CfgScale, request.cfg_scale.is_some()),
            (Field::PersonGeneration, request.person_generation.is_some()),
        ] {
            if said {
                dropped.push(Dropped::unsupported(field));
            }
        }
        body
    }
}

impl ImageCodec for BedrockImage {
    fn read_request(&self, body: &[u8]) -> Result<ImageRequest, DecodeError> {
        let value: Value = serde_json::from_slice(body)?;
        if value.get("taskType").is_some() {
            return BedrockImage::read_nova(value);
        }
        BedrockImage::read_stability(value)
    }

    fn write_request(&self, request: &ImageRequest, model: &ImageModel) -> Encoded {
        let mut dropped = Vec::new();
        let mut body = if is_stability(&request.model) {
            BedrockImage::write_stability(request, model, &mut dropped)
        } else {
            BedrockImage::write_nova(request, model, &mut dropped)
        };
        for (field, said) in [
            (Field::ImageBackground, request.background.is_some()),
            (Field::ResponseFormat, request.response_format == ImageFormat::Url),
            (Field::User, request.user.is_some()),
        ] {
            if said {
                dropped.push(Dropped::unsupported(field));
            }
        }
        // A same-protocol caller's own members go back where they were,
        // when the lane takes the form they came in.
        let same_form = request.form.as_deref() == Some(if is_stability(&request.model) { STABILITY } else { NOVA });
        match request.extra.for_target(Protocol::Bedrock, &mut dropped) {
            Some(extra) if same_form => {
                for (key, value) in extra {
                    match key.split_once('.') {
                        Some((parent, name)) if body.get(parent).is_some() => body[parent][name] = value.clone(),
                        _ => body[key.as_str()] = value.clone(),
                    }
                }
            }
            Some(extra) => dropped.extend(extra.keys().map(|key| Dropped::unmodelled(key.clone()))),
            None => {}
        }
        Encoded { body: serde_json::to_vec(&body).unwrap_or_default(), dropped }
    }

    fn read_response(&self, body: &[u8], _headers: &HeaderMap) -> Result<ImageResponse, DecodeError> {
        #[derive(Deserialize)]
        struct Wire {
            #[serde(default)]
            images: Vec<String>,
            #[serde(default)]
            seeds: Vec<u64>,
            #[serde(default)]
            error: Option<String>,
        }
        let wire: Wire = serde_json::from_slice(body)?;
        if wire.images.is_empty() {
            if let Some(error) = wire.error {
                return Err(DecodeError::Json(format!("the model made no image: {error}")));
            }
        }
        let images = wire
            .images
            .into_iter()
            .map(|b64| Image { mime_type: Some(sniff(&b64).to_owned()), b64, ..Image::default() })
            .collect();
        Ok(ImageResponse { images, seeds: wire.seeds, ..ImageResponse::default() })
    }

    fn write_response(&self, response: &ImageResponse, request: &ImageRequest) -> Vec<u8> {
        let images: Vec<&str> = response.images.iter().map(|image| image.b64.as_str()).collect();
        let body = if request.form.as_deref() == Some(STABILITY) {
            let seeds: Vec<u64> = match response.seeds.len() == images.len() {
                true => response.seeds.clone(),
                false => vec![0; images.len()],
            };
            json!({"seeds": seeds, "finish_reasons": vec![Value::Null; images.len()], "images": images})
        } else {
            json!({"images": images, "error": null})
        };
        serde_json::to_vec(&body).unwrap_or_default()
    }

    fn upstream_path(&self, model: &str) -> String {
        format!("/model/{}/invoke", switchyard_codec::path_segment(model))
    }

    fn max_images(&self, model: &str) -> u32 {
        if is_stability(model) {
            1
        } else {
            NOVA_MAX_IMAGES
        }
    }

    /// A body passes as it came only in the form the lane's model takes.
    fn sends_as_came(&self, body: &[u8], model: &str) -> bool {
        let nova_body = switchyard_codec::scan::top_level_value(body, "taskType").ok().flatten().is_some();
        nova_body != is_stability(model)
    }
}

/// The MIME type base64 image bytes begin with (PNG, JPEG or WebP).
fn sniff(b64: &str) -> &'static str {
    if b64.starts_with("/9j/") {
        "image/jpeg"
    } else if b64.starts_with("UklGR") {
        "image/webp"
    } else {
        "image/png"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_picks_the_form_and_the_reply_takes_it() {
        let nova = br#"{"taskType":"TEXT_IMAGE","textToImageParams":{"text":"a fox","negativeText":"rain"},"imageGenerationConfig":{"numberOfImages":2,"width":1280,"height":720,"quality":"premium","cfgScale":6.5,"seed":42}}"#;
        let request = BedrockImage.read_request(nova).unwrap();
        assert_eq!((request.n, request.size, request.seed), (Some(2), Some((1280, 720)), Some(42)));
        assert_eq!((request.negative_prompt.as_deref(), request.cfg_scale), (Some("rain"), Some(6.5)));
        let reply =
            ImageResponse { images: vec![Image { b64: "AAA".into(), ..Image::default() }], ..ImageResponse::default() };
        let out: Value = serde_json::from_slice(&BedrockImage.write_response(&reply, &request)).unwrap();
        assert_eq!(out, json!({"images": ["AAA"], "error": null}));
        let stability = BedrockImage.read_request(br#"{"prompt":"a fox","aspect_ratio":"21:9","seed":3}"#).unwrap();
        let out: Value = serde_json::from_slice(&BedrockImage.write_response(&reply, &stability)).unwrap();
        assert_eq!(out, json!({"seeds": [0], "finish_reasons": [null], "images": ["AAA"]}));
        assert!(BedrockImage.read_request(br#"{"taskType":"INPAINTING","textToImageParams":{"text":"x"}}"#).is_err());
    }

    /// OpenAI's request on each body: a size Nova takes is sent as is, a
    /// ratio Stability takes instead (converted); what neither has is reported.
    #[test]
    fn an_openai_request_is_written_for_each_model_family() {
        let request = ImageRequest {
            model: "amazon.nova-canvas-v1:0".into(),
            prompt: "a fox".into(),
            n: Some(3),
            size: Some((1792, 1024)),
            quality: Some("hd".into()),
            style: Some("vivid".into()),
            response_format: ImageFormat::Url,
            ..ImageRequest::default()
        };
        let encoded = BedrockImage.write_request(&request, &ImageModel::default());
        let written: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(
            written["imageGenerationConfig"],
            json!({"numberOfImages": 3, "width": 1792, "height": 1024, "quality": "premium"})
        );
        let fields: Vec<(Field, DropReason)> = encoded.dropped.iter().map(|d| (d.field, d.reason)).collect();
        assert_eq!(
            fields,
            [
                (Field::ImageQuality, DropReason::Converted),
                (Field::ImageStyle, DropReason::Unsupported),
                (Field::ResponseFormat, DropReason::Unsupported),
            ]
        );
        let stability = ImageRequest { model: "stability.stable-image-ultra-v1:1".into(), n: Some(1), ..request };
        let encoded = BedrockImage.write_request(&stability, &ImageModel::default());
        let written: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(written, json!({"prompt": "a fox", "aspect_ratio": "16:9"}));
        assert_eq!(encoded.dropped[0], Dropped::new(Field::ImageSize, DropReason::Converted));
        assert_eq!(
            (
                BedrockImage.max_images("stability.sd3-5-large-v1:0"),
                BedrockImage.max_images("amazon.titan-image-generator-v2:0")
            ),
            (1, 5)
        );
        assert_eq!(nova_size(1000, 1000), ((1008, 1008), false));
        assert_eq!(nova_size_for(16.0 / 9.0), (1360, 768));
    }
}
