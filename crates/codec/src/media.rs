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

#[cfg(test)]
mod tests {
    use super::*;

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
