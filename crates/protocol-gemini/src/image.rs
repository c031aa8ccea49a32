//! Imagen on the Gemini API (`POST /v1beta/models/{model}:predict`):
//! `{instances: [{prompt}], parameters: {sampleCount, aspectRatio,
//! negativePrompt, personGeneration, outputOptions: {mimeType}}}`,
//! answered `{predictions: [{bytesBase64Encoded, mimeType}]}`. Imagen makes
//! 1 to 4 images a call (4 when `sampleCount` is unsaid) at the aspect
//! ratios 1:1, 3:4, 4:3, 9:16 and 16:9: a size becomes the nearest ratio,
//! reported as converted when it is not exactly one. It has no quality,
//! style, background, guidance scale or seed on the Gemini API (a seed
//! needs the watermark off, which the Gemini API cannot turn off), and
//! answers base64 only. Imagen models after imagen-3.0-generate-002 take
//! no negative prompt there: the model facts say which
//! (`negative_prompt`), and it is reported rather than sent.

use http::HeaderMap;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use switchyard_codec::image::{nearest_ratio, ratio_value, ImageCodec, ImageModel};
use switchyard_codec::{DecodeError, Encoded};
use switchyard_ir::{DropReason, Dropped, Field, Image, ImageFormat, ImageRequest, ImageResponse, Protocol};

/// Imagen on the Gemini API.
pub(crate) struct GeminiImage;

/// The most images one `:predict` call makes.
pub(crate) const MAX_IMAGES: u32 = 4;
/// The images a call makes when it does not say.
const DEFAULT_IMAGES: u32 = 4;
/// The aspect ratios Imagen takes.
pub(crate) const RATIOS: [&str; 5] = ["1:1", "3:4", "4:3", "9:16", "16:9"];
#[derive(Deserialize)]
struct WireRequest {
    instances: Vec<WireInstance>,
    #[serde(default)]
    parameters: Map<String, Value>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

#[derive(Deserialize)]
struct WireInstance {
    prompt: String,
}

impl ImageCodec for GeminiImage {
    fn read_request(&self, body: &[u8]) -> Result<ImageRequest, DecodeError> {
        let wire: WireRequest = serde_json::from_slice(body)?;
        let Some(instance) = wire.instances.into_iter().next() else {
            return Err(DecodeError::invalid("instances", "`instances` is empty: give one with a prompt"));
        };
        let mut parameters = wire.parameters;
        let text = |parameters: &mut Map<String, Value>, key: &str| match parameters.remove(key) {
            Some(Value::String(text)) => Ok(Some(text)),
            None | Some(Value::Null) => Ok(None),
            Some(_) => Err(DecodeError::invalid(key, format!("`{key}` must be a string"))),
        };
        let n = match parameters.remove("sampleCount") {
            None | Some(Value::Null) => DEFAULT_IMAGES,
            Some(value) => value
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| DecodeError::invalid("sampleCount", "`sampleCount` must be a whole number"))?,
        };
        let output_mime = match parameters.remove("outputOptions") {
            Some(Value::Object(mut options)) => {
                let mime = options.remove("mimeType").and_then(|m| m.as_str().map(str::to_owned));
                for (key, value) in options {
                    let mut extra = Map::new();
                    extra.insert(key, value);
                    parameters.insert("outputOptions".to_owned(), Value::Object(extra));
                }
                mime
            }
            _ => None,
        };
        let mut request = ImageRequest {
            prompt: instance.prompt,
            n: Some(n),
            aspect_ratio: text(&mut parameters, "aspectRatio")?,
            negative_prompt: text(&mut parameters, "negativePrompt")?,
            person_generation: text(&mut parameters, "personGeneration")?,
            output_mime,
            response_format: ImageFormat::B64Json,
            ..ImageRequest::default()
        };
        for (key, value) in parameters {
            request.extra.insert(Protocol::Gemini, format!("parameters.{key}"), value);
        }
        for (key, value) in wire.rest {
            request.extra.insert(Protocol::Gemini, key, value);
        }
        Ok(request)
    }

    fn write_request(&self, request: &ImageRequest, model: &ImageModel) -> Encoded {
        let mut dropped = Vec::new();
        let mut parameters = json!({"sampleCount": request.n.unwrap_or(1)});
        let ratio = match (&request.aspect_ratio, request.size) {
            (Some(ratio), _) if RATIOS.contains(&ratio.as_str()) => Some(ratio.clone()),
            (Some(ratio), _) => {
                dropped.push(Dropped::new(Field::ImageSize, DropReason::Converted));
                ratio_value(ratio).map(|value| nearest_ratio(value, &RATIOS).0.to_owned())
            }
            (None, Some((width, height))) => {
                // A ratio carries the shape, not the pixels: only Imagen's
                // own 1K square is carried exactly.
                if (width, height) != (1024, 1024) {
                    dropped.push(Dropped::new(Field::ImageSize, DropReason::Converted));
                }
                Some(nearest_ratio(f64::from(width) / f64::from(height.max(1)), &RATIOS).0.to_owned())
            }
            (None, None) => None,
        };
        if let Some(ratio) = ratio {
            parameters["aspectRatio"] = json!(ratio);
        }
        match (&request.negative_prompt, model.negative_prompt) {
            (Some(_), Some(false)) => dropped.push(Dropped::new(Field::NegativePrompt, DropReason::Capability)),
            (Some(text), _) => parameters["negativePrompt"] = json!(text),
            (None, _) => {}
        }
        if let Some(policy) = &request.person_generation {
            parameters["personGeneration"] = json!(policy);
        }
        match request.output_mime.as_deref() {
            Some(mime @ ("image/png" | "image/jpeg")) => parameters["outputOptions"] = json!({"mimeType": mime}),
            Some(_) => dropped.push(Dropped::new(Field::OutputFormat, DropReason::Unsupported)),
            None => {}
        }
        for (field, said) in [
            (Field::ImageQuality, request.quality.is_some()),
            (Field::ImageStyle, request.style.is_some()),
            (Field::ImageBackground, request.background.is_some()),
            (Field::Seed, request.seed.is_some()),
            (Field::CfgScale, request.cfg_scale.is_some()),
            (Field::ResponseFormat, request.response_format == ImageFormat::Url),
            (Field::User, request.user.is_some()),
        ] {
            if said {
                dropped.push(Dropped::unsupported(field));
            }
        }
        let mut body = json!({"instances": [{"prompt": request.prompt}], "parameters": parameters});
        if let Some(extra) = request.extra.for_target(Protocol::Gemini, &mut dropped) {
            for (key, value) in extra {
                match key.strip_prefix("parameters.") {
                    Some(name) => body["parameters"][name] = value.clone(),
                    None => body[key.as_str()] = value.clone(),
                }
            }
        }
        Encoded { body: serde_json::to_vec(&body).unwrap_or_default(), dropped }
    }

    fn read_response(&self, body: &[u8], _headers: &HeaderMap) -> Result<ImageResponse, DecodeError> {
        #[derive(Deserialize)]
        struct Wire {
            #[serde(default)]
            predictions: Vec<Prediction>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Prediction {
            #[serde(default)]
            bytes_base64_encoded: Option<String>,
            #[serde(default)]
            mime_type: Option<String>,
        }
        let wire: Wire = serde_json::from_slice(body)?;
        // A prediction without bytes is one the safety filter held back.
        let images = wire
            .predictions
            .into_iter()
            .filter_map(|p| p.bytes_base64_encoded.map(|b64| Image { b64, mime_type: p.mime_type, ..Image::default() }))
            .collect();
        Ok(ImageResponse { images, ..ImageResponse::default() })
    }

    fn write_response(&self, response: &ImageResponse, _request: &ImageRequest) -> Vec<u8> {
        let predictions: Vec<Value> = response
            .images
            .iter()
            .map(|image| {
                json!({"bytesBase64Encoded": image.b64, "mimeType": image.mime_type.as_deref().unwrap_or("image/png")})
            })
            .collect();
        serde_json::to_vec(&json!({"predictions": predictions})).unwrap_or_default()
    }

    fn upstream_path(&self, model: &str) -> String {
        let id = switchyard_codec::path_segment(model.trim_start_matches("models/"));
        format!("/v1beta/models/{id}:predict")
    }

    fn max_images(&self, _model: &str) -> u32 {
        MAX_IMAGES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_predict_body_reads_with_imagens_default_count() {
        let request = GeminiImage
            .read_request(br#"{"instances":[{"prompt":"a fox"}],"parameters":{"aspectRatio":"16:9","personGeneration":"dont_allow","enhancePrompt":true}}"#)
            .unwrap();
        assert_eq!((request.n, request.aspect_ratio.as_deref()), (Some(4), Some("16:9")));
        assert_eq!(request.extra.fields.keys().collect::<Vec<_>>(), ["parameters.enhancePrompt"]);
        assert!(GeminiImage.read_request(br#"{"instances":[]}"#).is_err());
    }

    /// OpenAI's size becomes the nearest ratio (converted), its quality,
    /// style and URLs are reported; a negative prompt goes only to a model
    /// not said to refuse it.
    #[test]
    fn an_openai_request_is_written_as_imagen_takes_it() {
        let request = ImageRequest {
            model: "imagen-4.0-generate-001".into(),
            prompt: "a fox".into(),
            n: Some(3),
            size: Some((1792, 1024)),
            quality: Some("hd".into()),
            style: Some("vivid".into()),
            response_format: ImageFormat::Url,
            negative_prompt: Some("rain".into()),
            ..ImageRequest::default()
        };
        let refuses = ImageModel { max_images: Some(4), negative_prompt: Some(false) };
        let encoded = GeminiImage.write_request(&request, &refuses);
        let written: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(written["parameters"], json!({"sampleCount": 3, "aspectRatio": "16:9"}));
        let fields: Vec<(Field, DropReason)> = encoded.dropped.iter().map(|d| (d.field, d.reason)).collect();
        assert_eq!(
            fields,
            [
                (Field::ImageSize, DropReason::Converted),
                (Field::NegativePrompt, DropReason::Capability),
                (Field::ImageQuality, DropReason::Unsupported),
                (Field::ImageStyle, DropReason::Unsupported),
                (Field::ResponseFormat, DropReason::Unsupported),
            ]
        );
        let encoded = GeminiImage.write_request(&request, &ImageModel::default());
        let written: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(written["parameters"]["negativePrompt"], "rain");
        assert_eq!(
            GeminiImage.upstream_path("imagen-4.0-generate-001"),
            "/v1beta/models/imagen-4.0-generate-001:predict"
        );
    }

    #[test]
    fn predictions_read_and_write_back() {
        let reply = GeminiImage
            .read_response(
                br#"{"predictions":[{"bytesBase64Encoded":"AAA","mimeType":"image/png"},{"raiFilteredReason":"x"}]}"#,
                &HeaderMap::new(),
            )
            .unwrap();
        assert_eq!(reply.images.len(), 1, "a filtered prediction is no image");
        let out: Value = serde_json::from_slice(&GeminiImage.write_response(&reply, &ImageRequest::default())).unwrap();
        assert_eq!(out, json!({"predictions": [{"bytesBase64Encoded": "AAA", "mimeType": "image/png"}]}));
    }
}
