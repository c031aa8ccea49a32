//! Image generation as the IR carries it between protocols: OpenAI's
//! `images/generations`, Gemini's Imagen `:predict` and Bedrock's
//! `InvokeModel` image bodies (Amazon Nova Canvas and Titan Image
//! Generator, Stability's models) each read into an [`ImageRequest`] and
//! written from it; every lane answers base64 images, read into an
//! [`ImageResponse`] and written in the caller's shape.

use serde::{Deserialize, Serialize};

use crate::Extra;

/// How the caller wants its images: base64 in the body (every lane's
/// form), or URLs (OpenAI's `url`, which only an OpenAI lane can give).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageFormat {
    /// Base64 in the reply (OpenAI `b64_json`; the only form elsewhere).
    #[default]
    B64Json,
    /// URLs to fetch the images from.
    Url,
}

/// An image generation request.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ImageRequest {
    /// The model or pool the caller named (the lane's wire model once written).
    pub model: String,
    /// What to draw.
    pub prompt: String,
    /// What not to draw (Imagen `negativePrompt`, Nova `negativeText`,
    /// Stability `negative_prompt`).
    pub negative_prompt: Option<String>,
    /// How many images (OpenAI `n`, Imagen `sampleCount`, Nova `numberOfImages`).
    pub n: Option<u32>,
    /// Width and height in pixels (OpenAI `size`, Nova `width`/`height`).
    pub size: Option<(u32, u32)>,
    /// An aspect ratio, `W:H` (Imagen `aspectRatio`, Stability `aspect_ratio`).
    pub aspect_ratio: Option<String>,
    /// Quality as the caller's protocol names it (OpenAI `standard`, `hd`,
    /// `low`..`high`; Nova `standard`, `premium`).
    pub quality: Option<String>,
    /// The sampling seed.
    pub seed: Option<u64>,
    /// How closely to follow the prompt (Nova `cfgScale`).
    pub cfg_scale: Option<f64>,
    /// The encoded form of each image, as a MIME type (`image/png`).
    pub output_mime: Option<String>,
    /// Whether people may be drawn (Imagen `personGeneration`).
    pub person_generation: Option<String>,
    /// How the images come back.
    pub response_format: ImageFormat,
    /// OpenAI's `style` (dall-e-3: `vivid`, `natural`).
    pub style: Option<String>,
    /// OpenAI's `background` (gpt-image: `transparent`, `opaque`, `auto`).
    pub background: Option<String>,
    /// The end user.
    pub user: Option<String>,
    /// Which of its protocol's request forms the caller used (Bedrock's
    /// Nova or Stability body), so the reply takes the same form.
    pub form: Option<String>,
    /// Fields outside the model, by protocol.
    pub extra: Extra,
}

/// One image made.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Image {
    /// The image, base64 (empty when the lane gave a URL).
    pub b64: String,
    /// A URL to fetch it from (an OpenAI lane asked for `url`).
    pub url: Option<String>,
    /// Its MIME type, when the lane says.
    pub mime_type: Option<String>,
    /// The prompt the model drew from, when it rewrote the caller's.
    pub revised_prompt: Option<String>,
}

/// An image generation reply.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ImageResponse {
    /// When it was made (Unix seconds), when the lane says.
    pub created: Option<u64>,
    /// The images, in order.
    pub images: Vec<Image>,
    /// Prompt tokens, when the lane counts them (gpt-image).
    pub input_tokens: Option<u64>,
    /// Output tokens, when the lane counts them (gpt-image).
    pub output_tokens: Option<u64>,
    /// The seed of each image, when the lane says (Stability).
    pub seeds: Vec<u64>,
}

impl ImageResponse {
    /// `other` appended after this one (a request split into several calls).
    pub fn extend(&mut self, other: ImageResponse) {
        self.created = self.created.or(other.created);
        self.images.extend(other.images);
        self.seeds.extend(other.seeds);
        let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.saturating_add(b)),
            (a, b) => a.or(b),
        };
        self.input_tokens = add(self.input_tokens, other.input_tokens);
        self.output_tokens = add(self.output_tokens, other.output_tokens);
    }
}
