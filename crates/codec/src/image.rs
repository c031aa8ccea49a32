//! Image generation in a protocol: the reader and writer pair of its image
//! requests and replies ([`ImageCodec`]), and what the protocols share:
//! sizes as `WxH`, the nearest aspect ratio a lane takes, and what a model
//! takes where models of one protocol differ ([`ImageModel`], from the
//! model facts).

use http::HeaderMap;
use switchyard_ir::{ImageRequest, ImageResponse};

use crate::{DecodeError, Encoded};

/// What a lane's model takes, where image models of one protocol differ:
/// said by the model facts (each with its vendor's page), else the
/// protocol's own limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImageModel {
    /// The most images one call may ask for (a larger `n` is split into
    /// several calls).
    pub max_images: Option<u32>,
    /// Whether it takes a negative prompt (`None`: not said, sent).
    pub negative_prompt: Option<bool>,
}

/// A protocol's image generation: its wire forms, read and written.
pub trait ImageCodec: Send + Sync {
    /// Reads a caller's request (a model in the path is the ingress's to set).
    fn read_request(&self, body: &[u8]) -> Result<ImageRequest, DecodeError>;
    /// Writes `request` (whose `model` is the lane's wire model, and whose
    /// `n` is at most what one call takes) for an upstream of this
    /// protocol serving a model that takes `model`; what it cannot carry
    /// is reported.
    fn write_request(&self, request: &ImageRequest, model: &ImageModel) -> Encoded;
    /// Reads an upstream's reply.
    fn read_response(&self, body: &[u8], headers: &HeaderMap) -> Result<ImageResponse, DecodeError>;
    /// Writes `response` for the caller that sent `request`.
    fn write_response(&self, response: &ImageResponse, request: &ImageRequest) -> Vec<u8>;
    /// Path and query of the upstream endpoint for `model`.
    fn upstream_path(&self, model: &str) -> String;
    /// The most images one call to `model` may ask for, by the protocol's
    /// own rule (a model fact says it first).
    fn max_images(&self, model: &str) -> u32;
    /// Whether a caller's `body` in this protocol may go as it came to a
    /// lane of this protocol serving `model` (a body `model` is spliced).
    fn sends_as_came(&self, body: &[u8], model: &str) -> bool {
        let _ = (body, model);
        true
    }
}

/// A size as OpenAI writes it (`1024x1536`).
pub fn parse_size(text: &str) -> Option<(u32, u32)> {
    let (width, height) = text.split_once('x')?;
    Some((width.trim().parse().ok()?, height.trim().parse().ok()?))
}

/// `width:height` in lowest terms (`1792x1024` is `7:4`).
pub fn ratio_of((width, height): (u32, u32)) -> String {
    fn gcd(a: u32, b: u32) -> u32 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let divisor = gcd(width, height).max(1);
    format!("{}:{}", width / divisor, height / divisor)
}

/// A `W:H` ratio's value.
pub fn ratio_value(ratio: &str) -> Option<f64> {
    let (width, height) = ratio.split_once(':')?;
    let (width, height): (f64, f64) = (width.trim().parse().ok()?, height.trim().parse().ok()?);
    (width > 0.0 && height > 0.0).then(|| width / height)
}

/// The ratio of `choices` nearest `wanted` (compared as logarithms, so
/// 2:1 and 1:2 are as far from 1:1), and whether it is exactly `wanted`.
pub fn nearest_ratio(wanted: f64, choices: &[&'static str]) -> (&'static str, bool) {
    let distance = |ratio: &str| ratio_value(ratio).map_or(f64::INFINITY, |value| (value.ln() - wanted.ln()).abs());
    let best = choices.iter().copied().min_by(|a, b| distance(a).total_cmp(&distance(b))).unwrap_or("1:1");
    (best, distance(best) < 1e-9)
}

/// The image counts a call of at most `max` takes, `n` in all (at least
/// one call): 10 at 4 a call is 4, 4, 2.
pub fn counts(n: u32, max: u32) -> Vec<u32> {
    let (n, max) = (n.max(1), max.max(1));
    let mut left = n;
    let mut out = Vec::with_capacity(n.div_ceil(max) as usize);
    while left > 0 {
        let this = left.min(max);
        out.push(this);
        left -= this;
    }
    out
}

/// The MIME type of an encoding's name (`png`, `jpeg`, `jpg`, `webp`).
pub fn mime_of(name: &str) -> Option<&'static str> {
    match name.to_ascii_lowercase().as_str() {
        "png" | "image/png" => Some("image/png"),
        "jpeg" | "jpg" | "image/jpeg" => Some("image/jpeg"),
        "webp" | "image/webp" => Some("image/webp"),
        _ => None,
    }
}

/// The short name of a MIME type (`image/jpeg` is `jpeg`).
pub fn format_of(mime: &str) -> &str {
    mime.strip_prefix("image/").unwrap_or(mime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_ratios_and_counts() {
        assert_eq!(parse_size("1792x1024"), Some((1792, 1024)));
        assert_eq!(parse_size("auto"), None);
        assert_eq!(ratio_of((1792, 1024)), "7:4");
        let imagen = ["1:1", "3:4", "4:3", "9:16", "16:9"];
        assert_eq!(nearest_ratio(1792.0 / 1024.0, &imagen), ("16:9", false));
        assert_eq!(nearest_ratio(1.0, &imagen), ("1:1", true));
        assert_eq!(nearest_ratio(1024.0 / 1536.0, &imagen), ("3:4", false));
        assert_eq!(counts(10, 4), [4, 4, 2]);
        assert_eq!(counts(1, 1), [1]);
        assert_eq!(counts(0, 5), [1]);
        assert_eq!((mime_of("jpg"), format_of("image/webp")), (Some("image/jpeg"), "webp"));
    }
}
