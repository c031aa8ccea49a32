//! The inbound AWS Signature Version 4 check for Bedrock callers: the
//! signature over the canonical request (recomputed from what arrived), the
//! body's hash (a changed body breaks the signature; an
//! `x-amz-content-sha256` that does not match the body is refused outright),
//! and the signing time within a clock-skew window.
//!
//! Written here rather than borrowed from `aws-sigv4` because that crate
//! signs outgoing requests with the headers it chooses; a verifier must
//! rebuild exactly the canonical request the caller's SDK signed, with the
//! headers the caller listed. Tests check it against `aws-sigv4` and, in
//! the SDK suite, against boto3.

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// How far a signing time may be from the gateway's clock (AWS's own window).
pub const MAX_SKEW_SECS: i64 = 300;

const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// What arrived, as the verifier needs it.
#[derive(Debug, Clone, Copy)]
pub struct Inbound<'a> {
    /// HTTP method.
    pub method: &'a str,
    /// The path as received (still percent-encoded).
    pub path: &'a str,
    /// The raw query string, without `?`.
    pub query: Option<&'a str>,
    /// Header names (any case) and values.
    pub headers: &'a [(&'a str, &'a [u8])],
    /// The request authority, when no `host` header came (HTTP/2).
    pub authority: Option<&'a str>,
    /// The body.
    pub body: &'a [u8],
}

/// The parsed `Authorization` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization<'a> {
    /// The access key id.
    pub access_key_id: &'a str,
    /// `YYYYMMDD` of the credential scope.
    pub date: &'a str,
    /// The scope's region.
    pub region: &'a str,
    /// The scope's service.
    pub service: &'a str,
    /// Lower-case header names, `;`-separated, as signed.
    pub signed_headers: &'a str,
    /// The hex signature.
    pub signature: &'a str,
}

/// Why a signed request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SigV4Error {
    /// No SigV4 `Authorization` header.
    #[error("the request is not signed with AWS Signature Version 4")]
    Missing,
    /// The header or the signing time cannot be read.
    #[error("malformed signature: {0}")]
    Malformed(String),
    /// No minted credential has this access key id.
    #[error("the security token included in the request is invalid")]
    UnknownAccessKey,
    /// Signed too long ago or too far ahead.
    #[error("signature expired: {0} is more than five minutes from the server's time")]
    Stale(String),
    /// `x-amz-content-sha256` does not match the body.
    #[error("the body does not match its x-amz-content-sha256")]
    BodyHash,
    /// The signature does not match.
    #[error("the request signature we calculated does not match the signature you provided")]
    Signature,
}

/// Parses an `Authorization` header value.
pub fn parse_authorization(value: &str) -> Result<Authorization<'_>, SigV4Error> {
    let rest = value.strip_prefix(ALGORITHM).ok_or(SigV4Error::Missing)?.trim_start();
    let mut credential = None;
    let mut signed_headers = None;
    let mut signature = None;
    for part in rest.split(',') {
        let (name, field) = part.trim().split_once('=').ok_or_else(|| SigV4Error::Malformed(part.trim().to_owned()))?;
        match name {
            "Credential" => credential = Some(field),
            "SignedHeaders" => signed_headers = Some(field),
            "Signature" => signature = Some(field),
            _ => {}
        }
    }
    let missing = |what: &str| SigV4Error::Malformed(format!("no {what} in the authorization header"));
    let credential = credential.ok_or_else(|| missing("Credential"))?;
    let mut scope = credential.split('/');
    let (Some(access_key_id), Some(date), Some(region), Some(service), Some("aws4_request"), None) =
        (scope.next(), scope.next(), scope.next(), scope.next(), scope.next(), scope.next())
    else {
        return Err(SigV4Error::Malformed(format!("`{credential}` is not a credential scope")));
    };
    Ok(Authorization {
        access_key_id,
        date,
        region,
        service,
        signed_headers: signed_headers.ok_or_else(|| missing("SignedHeaders"))?,
        signature: signature.ok_or_else(|| missing("Signature"))?,
    })
}

fn header<'a>(inbound: &Inbound<'a>, name: &str) -> Option<&'a [u8]> {
    inbound.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| *v)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes a key of any length.
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).unwrap_or_else(|_| unreachable_hmac());
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

#[expect(clippy::panic, reason = "HMAC-SHA256 accepts keys of every length; this cannot happen")]
fn unreachable_hmac() -> Hmac<Sha256> {
    panic!("hmac rejected a key")
}

/// SigV4's URI encoding: unreserved characters kept, `/` kept when asked,
/// everything else as upper-case `%XX`.
fn uri_encode(text: &str, keep_slash: bool, out: &mut String) {
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(char::from(byte)),
            b'/' if keep_slash => out.push('/'),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
}

fn percent_decode(text: &str) -> Vec<u8> {
    let digit = |b: u8| char::from(b).to_digit(16).map(|d| d as u8);
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if let (b'%', Some(high), Some(low)) =
            (bytes[i], bytes.get(i + 1).copied().and_then(digit), bytes.get(i + 2).copied().and_then(digit))
        {
            out.push(high << 4 | low);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

fn canonical_query(query: Option<&str>) -> String {
    let Some(query) = query.filter(|q| !q.is_empty()) else {
        return String::new();
    };
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let mut encoded = (String::new(), String::new());
            uri_encode(&String::from_utf8_lossy(&percent_decode(name)), false, &mut encoded.0);
            uri_encode(&String::from_utf8_lossy(&percent_decode(value)), false, &mut encoded.1);
            encoded
        })
        .collect();
    pairs.sort();
    pairs.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join("&")
}

/// Parses `YYYYMMDDTHHMMSSZ` into Unix seconds.
fn parse_amz_date(text: &str) -> Option<i64> {
    let format = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    Some(time::PrimitiveDateTime::parse(text, &format).ok()?.assume_utc().unix_timestamp())
}

/// Checks a SigV4-signed request. `secret_for` finds the secret of a minted
/// access key id; `now` is Unix seconds. On success, returns the access key
/// id that signed.
pub fn verify<'a>(
    inbound: &Inbound<'a>,
    secret_for: impl FnOnce(&str) -> Option<String>,
    now: i64,
) -> Result<&'a str, SigV4Error> {
    let value = header(inbound, "authorization").ok_or(SigV4Error::Missing)?;
    let value = std::str::from_utf8(value).map_err(|_| SigV4Error::Malformed("authorization is not text".into()))?;
    let auth = parse_authorization(value)?;
    let amz_date = header(inbound, "x-amz-date")
        .and_then(|v| std::str::from_utf8(v).ok())
        .ok_or_else(|| SigV4Error::Malformed("no x-amz-date header".into()))?;
    let signed_at =
        parse_amz_date(amz_date).ok_or_else(|| SigV4Error::Malformed(format!("`{amz_date}` is not an x-amz-date")))?;
    if !amz_date.starts_with(auth.date) {
        return Err(SigV4Error::Malformed("the credential date is not the signing date".into()));
    }
    if (now - signed_at).abs() > MAX_SKEW_SECS {
        return Err(SigV4Error::Stale(amz_date.to_owned()));
    }
    let body_hash = hex(&Sha256::digest(inbound.body));
    if let Some(declared) = header(inbound, "x-amz-content-sha256") {
        if declared != body_hash.as_bytes() {
            return Err(SigV4Error::BodyHash);
        }
    }
    let names: Vec<&str> = auth.signed_headers.split(';').collect();
    if !names.contains(&"host") && !names.contains(&":authority") {
        return Err(SigV4Error::Malformed("the host header is not signed".into()));
    }
    let mut canonical = String::with_capacity(512);
    canonical.push_str(inbound.method);
    canonical.push('\n');
    uri_encode(inbound.path, true, &mut canonical);
    canonical.push('\n');
    canonical.push_str(&canonical_query(inbound.query));
    canonical.push('\n');
    for name in &names {
        let values: Vec<&[u8]> =
            inbound.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| *v).collect();
        let values = match (values.is_empty(), *name, inbound.authority) {
            (true, "host", Some(authority)) => vec![authority.as_bytes()],
            _ => values,
        };
        canonical.push_str(name);
        canonical.push(':');
        let joined: Vec<String> = values
            .iter()
            .map(|v| String::from_utf8_lossy(v).split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        canonical.push_str(&joined.join(","));
        canonical.push('\n');
    }
    canonical.push('\n');
    canonical.push_str(auth.signed_headers);
    canonical.push('\n');
    canonical.push_str(&body_hash);

    let scope = format!("{}/{}/{}/aws4_request", auth.date, auth.region, auth.service);
    let string_to_sign = format!("{ALGORITHM}\n{amz_date}\n{scope}\n{}", hex(&Sha256::digest(canonical.as_bytes())));
    let secret = secret_for(auth.access_key_id).ok_or(SigV4Error::UnknownAccessKey)?;
    let key = hmac(format!("AWS4{secret}").as_bytes(), auth.date.as_bytes());
    let key = hmac(&key, auth.region.as_bytes());
    let key = hmac(&key, auth.service.as_bytes());
    let key = hmac(&key, b"aws4_request");
    let expected = hex(&hmac(&key, string_to_sign.as_bytes()));
    if expected.as_bytes().ct_eq(auth.signature.as_bytes()).into() {
        Ok(auth.access_key_id)
    } else {
        Err(SigV4Error::Signature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_authorization_header() {
        let value = "AWS4-HMAC-SHA256 Credential=AKSYEXAMPLE/20261130/us-east-1/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=abc123";
        let auth = parse_authorization(value).unwrap();
        assert_eq!(auth.access_key_id, "AKSYEXAMPLE");
        assert_eq!((auth.date, auth.region, auth.service), ("20261130", "us-east-1", "bedrock"));
        assert_eq!(auth.signed_headers, "content-type;host;x-amz-date");
        assert_eq!(auth.signature, "abc123");
        assert_eq!(parse_authorization("Bearer sy-x"), Err(SigV4Error::Missing));
        assert!(matches!(parse_authorization("AWS4-HMAC-SHA256 Credential=a/b"), Err(SigV4Error::Malformed(_))));
    }

    #[test]
    fn canonical_query_sorts_and_encodes() {
        assert_eq!(canonical_query(Some("b=2&a=1&c=%2F x")), "a=1&b=2&c=%2F%20x");
        assert_eq!(canonical_query(None), "");
    }

    #[test]
    fn amz_dates() {
        assert_eq!(parse_amz_date("20261130T193105Z"), Some(1_796_067_065));
        assert_eq!(parse_amz_date("2026-11-30"), None);
    }
}
