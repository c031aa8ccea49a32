//! `multipart/form-data` (RFC 7578) as OpenAI's audio endpoints take it:
//! a borrowing scan that finds each part's name, file name, content type
//! and value span without copying a byte of the upload, and a splice that
//! replaces one text field's value (the `model`) the way the JSON scanner
//! splices a JSON body's `model`. The bytes are the caller's (untrusted):
//! every length and offset is checked, and `fuzz/fuzz_targets/operation_readers.rs`
//! holds the scan to never panicking.

use std::ops::Range;

use memchr::memmem;

/// Why a body is not a form this gateway can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormError {
    /// The content type names no boundary.
    #[error("content-type must be multipart/form-data with a boundary")]
    NoBoundary,
    /// The body does not hold the boundary's delimiters as RFC 7578 lays them out.
    #[error("the multipart body is malformed: {0}")]
    Malformed(&'static str),
}

/// One part of a form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part<'a> {
    /// Its field name (`Content-Disposition: form-data; name="..."`).
    pub name: &'a str,
    /// The file name, for a file.
    pub filename: Option<&'a str>,
    /// Its `Content-Type`, when given.
    pub content_type: Option<&'a str>,
    /// Where its value is in the body.
    pub value: Range<usize>,
}

/// The longest boundary RFC 2046 allows.
const MAX_BOUNDARY: usize = 70;
/// The most parts a form may hold (OpenAI's audio forms hold about ten).
pub const MAX_PARTS: usize = 256;
/// The longest header block of a part.
const MAX_PART_HEADERS: usize = 8 << 10;

/// The boundary a `multipart/form-data` content type names.
pub fn boundary(content_type: &str) -> Result<&str, FormError> {
    let mut params = content_type.split(';');
    let essence = params.next().unwrap_or_default().trim();
    if !essence.eq_ignore_ascii_case("multipart/form-data") {
        return Err(FormError::NoBoundary);
    }
    for param in params {
        let Some((key, value)) = param.split_once('=') else { continue };
        if key.trim().eq_ignore_ascii_case("boundary") {
            let value = value.trim();
            let value = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(value);
            if value.is_empty() || value.len() > MAX_BOUNDARY {
                return Err(FormError::NoBoundary);
            }
            return Ok(value);
        }
    }
    Err(FormError::NoBoundary)
}

/// Every part of `body`, in order.
pub fn parts<'a>(body: &'a [u8], boundary: &str) -> Result<Vec<Part<'a>>, FormError> {
    let delimiter = [b"--", boundary.as_bytes()].concat();
    // The first delimiter opens the body (a preamble before it is ignored).
    let first = memmem::find(body, &delimiter).ok_or(FormError::Malformed("no opening boundary"))?;
    let separator = [b"\r\n--", boundary.as_bytes()].concat();
    let finder = memmem::Finder::new(&separator);
    let mut at = first + delimiter.len();
    let mut found = Vec::new();
    loop {
        let rest = body.get(at..).ok_or(FormError::Malformed("truncated"))?;
        if rest.starts_with(b"--") {
            return Ok(found);
        }
        // Transport padding, then the line break that ends the delimiter line.
        let line_end = memmem::find(rest, b"\r\n").ok_or(FormError::Malformed("a boundary line does not end"))?;
        if rest[..line_end].iter().any(|b| !matches!(b, b' ' | b'\t')) {
            return Err(FormError::Malformed("text after a boundary"));
        }
        let headers_start = at + line_end + 2;
        let headers = body.get(headers_start..).ok_or(FormError::Malformed("truncated"))?;
        let headers_len =
            memmem::find(headers, b"\r\n\r\n").ok_or(FormError::Malformed("a part's headers do not end"))?;
        if headers_len > MAX_PART_HEADERS {
            return Err(FormError::Malformed("a part's headers are too long"));
        }
        let value_start = headers_start + headers_len + 4;
        let value_len = finder
            .find(body.get(value_start..).ok_or(FormError::Malformed("truncated"))?)
            .ok_or(FormError::Malformed("a part does not end in a boundary"))?;
        let head =
            std::str::from_utf8(&headers[..headers_len]).map_err(|_| FormError::Malformed("headers are not UTF-8"))?;
        found.push(part(head, value_start..value_start + value_len)?);
        if found.len() > MAX_PARTS {
            return Err(FormError::Malformed("too many parts"));
        }
        at = value_start + value_len + separator.len();
    }
}

fn part(head: &str, value: Range<usize>) -> Result<Part<'_>, FormError> {
    let mut name = None;
    let mut filename = None;
    let mut content_type = None;
    for line in head.split("\r\n") {
        let Some((key, rest)) = line.split_once(':') else { continue };
        let key = key.trim();
        if key.eq_ignore_ascii_case("content-type") {
            content_type = Some(rest.trim());
        } else if key.eq_ignore_ascii_case("content-disposition") {
            for param in rest.split(';').skip(1) {
                let Some((key, value)) = param.split_once('=') else { continue };
                let value = value.trim();
                let value = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(value);
                match key.trim() {
                    "name" => name = Some(value),
                    "filename" => filename = Some(value),
                    _ => {}
                }
            }
        }
    }
    let name = name.ok_or(FormError::Malformed("a part has no name"))?;
    Ok(Part { name, filename, content_type, value })
}

/// The text value of the field `name`, when the form has one.
pub fn text_field<'a>(body: &'a [u8], parts: &[Part<'_>], name: &str) -> Option<&'a str> {
    let part = parts.iter().find(|p| p.name == name && p.filename.is_none())?;
    std::str::from_utf8(body.get(part.value.clone())?).ok()
}

/// `body` with the value at `span` replaced by `value`.
pub fn splice(body: &[u8], span: Range<usize>, value: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + value.len());
    out.extend_from_slice(&body[..span.start.min(body.len())]);
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(&body[span.end.min(body.len())..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORM: &[u8] = b"--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--XyZ\r\n\
Content-Disposition: form-data; name=\"file\"; filename=\"a.mp3\"\r\nContent-Type: audio/mpeg\r\n\r\nID3\x00\r\n\x01\r\n--XyZ--\r\n";

    #[test]
    fn parts_are_found_without_copying_and_the_model_spliced() {
        assert_eq!(boundary("multipart/form-data; boundary=XyZ"), Ok("XyZ"));
        assert_eq!(boundary("Multipart/Form-Data; charset=x; boundary=\"XyZ\""), Ok("XyZ"));
        assert!(boundary("application/json").is_err());
        let parts = parts(FORM, "XyZ").unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(text_field(FORM, &parts, "model"), Some("whisper-1"));
        assert_eq!((parts[1].filename, parts[1].content_type), (Some("a.mp3"), Some("audio/mpeg")));
        assert_eq!(&FORM[parts[1].value.clone()], b"ID3\x00\r\n\x01", "a CRLF inside a file is data");
        let spliced = splice(FORM, parts[0].value.clone(), "gpt-4o-transcribe");
        let again = super::parts(&spliced, "XyZ").unwrap();
        assert_eq!(text_field(&spliced, &again, "model"), Some("gpt-4o-transcribe"));
        assert_eq!(&spliced[again[1].value.clone()], b"ID3\x00\r\n\x01");
    }

    #[test]
    fn malformed_forms_are_errors() {
        for body in
            [&b""[..], b"--XyZ", b"--XyZ\r\nContent-Disposition: form-data\r\n\r\nx\r\n--XyZ--", b"--XyZ\r\nno end"]
        {
            assert!(parts(body, "XyZ").is_err(), "{:?}", String::from_utf8_lossy(body));
        }
    }
}
