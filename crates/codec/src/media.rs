//! Data URLs (`data:<type>[;params];base64,<data>`): the one reader and
//! writer of them for every codec. Protocols that carry images as URLs
//! (OpenAI, Responses, Cohere) put inline bytes in one; protocols that carry
//! bytes (Anthropic, Gemini, Bedrock) take them out of one.

use std::borrow::Cow;

use switchyard_ir::MediaSource;

/// Splits a base64 data URL into its media type (parameters such as
/// `charset` left out) and its data. Anything else (another URL, a
/// percent-encoded data URL, one without a media type) is `None`.
pub fn parse_data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (header, data) = rest.split_once(',')?;
    let header = header.strip_suffix(";base64")?;
    let media_type = header.split(';').next().unwrap_or(header);
    if media_type.is_empty() {
        return None;
    }
    Some((media_type, data))
}

/// The data URL of inline base64 bytes.
pub fn data_url(media_type: &str, data: &str) -> String {
    format!("data:{media_type};base64,{data}")
}

/// The media source a URL stands for: a data URL is inline bytes, any other
/// URL stays a URL.
pub fn source_from_url(url: String) -> MediaSource {
    match parse_data_url(&url) {
        Some((media_type, data)) => MediaSource::Base64 { media_type: media_type.to_owned(), data: data.to_owned() },
        None => MediaSource::Url { url, media_type: None },
    }
}

/// The URL of a media source: inline bytes become a data URL.
pub fn url_of(source: &MediaSource) -> Cow<'_, str> {
    match source {
        MediaSource::Base64 { media_type, data } => Cow::Owned(data_url(media_type, data)),
        MediaSource::Url { url, .. } => Cow::Borrowed(url),
    }
}

/// An audio MIME type's essence, lowercased and without parameters
/// (`audio/wav; codecs=1` → `audio/wav`).
fn audio_essence(media_type: &str) -> String {
    media_type.split(';').next().unwrap_or(media_type).trim().to_ascii_lowercase()
}

/// The `input_audio.format` OpenAI's Chat Completions names an audio MIME
/// type by: it takes `wav` and `mp3` only (API reference, "input_audio"),
/// so any other type has none.
pub fn openai_audio_format(media_type: &str) -> Option<&'static str> {
    match audio_essence(media_type).as_str() {
        "audio/wav" | "audio/x-wav" | "audio/wave" | "audio/vnd.wave" => Some("wav"),
        "audio/mp3" | "audio/mpeg" | "audio/mpeg3" | "audio/x-mp3" => Some("mp3"),
        _ => None,
    }
}

/// The MIME type of an OpenAI `input_audio.format` (`wav`, `mp3`), as
/// Gemini's audio guide lists them (`audio/wav`, `audio/mp3`).
pub fn openai_audio_media_type(format: &str) -> Option<&'static str> {
    match format {
        "wav" => Some("audio/wav"),
        "mp3" => Some("audio/mp3"),
        _ => None,
    }
}

/// A byte string bodies are searched for, its searcher built once (a
/// searcher built per call costs more than the search of a small body).
pub type Marker = std::sync::LazyLock<memchr::memmem::Finder<'static>>;

/// The searcher of `bytes`, for a [`Marker`]'s initialiser.
pub fn marker(bytes: &'static [u8]) -> memchr::memmem::Finder<'static> {
    memchr::memmem::Finder::new(bytes)
}

/// Whether `body` holds `marker` anywhere (`Codec::may_hold_audio`).
pub fn holds(body: &[u8], marker: &Marker) -> bool {
    marker.find(body).is_some()
}

/// Whether a MIME type is audio (`audio/*`).
pub fn is_audio(media_type: &str) -> bool {
    media_type.get(..6).is_some_and(|head| head.eq_ignore_ascii_case("audio/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audio_types_map_to_openais_formats_and_back() {
        assert_eq!(openai_audio_format("audio/wav"), Some("wav"));
        assert_eq!(openai_audio_format("Audio/X-WAV; codecs=1"), Some("wav"));
        assert_eq!(openai_audio_format("audio/mpeg"), Some("mp3"));
        assert_eq!(openai_audio_format("audio/mp3"), Some("mp3"));
        assert_eq!(openai_audio_format("audio/ogg"), None, "Chat Completions takes wav and mp3 only");
        assert_eq!(openai_audio_media_type("wav"), Some("audio/wav"));
        assert_eq!(openai_audio_media_type("mp3"), Some("audio/mp3"));
        assert_eq!(openai_audio_media_type("flac"), None);
        assert!(is_audio("audio/flac") && is_audio("AUDIO/wav") && !is_audio("image/png") && !is_audio("aud"));
    }

    #[test]
    fn base64_data_urls_split_and_others_do_not() {
        assert_eq!(parse_data_url("data:image/png;base64,iVBOR"), Some(("image/png", "iVBOR")));
        assert_eq!(parse_data_url("data:text/plain;charset=utf-8;base64,aGk="), Some(("text/plain", "aGk=")));
        assert_eq!(parse_data_url("data:,hello"), None);
        assert_eq!(parse_data_url("data:text/plain,hello"), None);
        assert_eq!(parse_data_url("data:;base64,abc"), None);
        assert_eq!(parse_data_url("https://x/y.png"), None);
    }

    #[test]
    fn sources_and_urls_convert_both_ways() {
        let inline = source_from_url("data:image/png;base64,AAAA".to_owned());
        assert_eq!(inline, MediaSource::Base64 { media_type: "image/png".into(), data: "AAAA".into() });
        assert_eq!(url_of(&inline), "data:image/png;base64,AAAA");
        let web = source_from_url("https://x/y.png".to_owned());
        assert_eq!(web, MediaSource::Url { url: "https://x/y.png".into(), media_type: None });
        assert_eq!(url_of(&web), "https://x/y.png");
    }
}
