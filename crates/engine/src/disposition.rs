//! What a failed try leaves behind: why it failed (no answer, or the
//! upstream's error answer kept whole to relay if nothing better comes),
//! the upstream's `Retry-After`, and the caller's answer for a failure:
//! the vendor's own bytes on a same-protocol hop, else the error rendered
//! in the caller's protocol with its status and `Retry-After` kept.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use switchyard_health::StatusClass;
use switchyard_ir::{ErrorInfo, ErrorKind, Protocol};
use switchyard_state::call::Call;
use switchyard_state::Gateway;
use switchyard_transport::{full_body, TransportError};

use crate::render::{common_headers, error_response, internal_error, lane_headers, ResponseBody, X_AMZN_ERRORTYPE};

/// Why a try did not succeed.
pub(crate) enum Failure {
    /// No response arrived.
    Transport(TransportError),
    /// The upstream answered with an error.
    Upstream(Box<UpstreamFailure>),
    /// A stream's 2xx head came, then no content: it failed, ended or
    /// missed its first-token deadline (`class` says which).
    BeforeContent(StatusClass, String),
}

/// An upstream's error answer, kept to relay if nothing better comes.
pub(crate) struct UpstreamFailure {
    pub(crate) lane_protocol: Protocol,
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    pub(crate) info: ErrorInfo,
    pub(crate) lane_header: HeaderValue,
    pub(crate) provider_header: HeaderValue,
}

pub(crate) fn failure_response(gateway: &Gateway, call: &Call, failure: Failure) -> Response<ResponseBody> {
    match failure {
        Failure::Transport(err) => {
            let (kind, status) = match err {
                TransportError::HeadersTimeout(_) => (ErrorKind::Timeout, 504),
                TransportError::Connect(_) | TransportError::Io(_) => (ErrorKind::Unavailable, 502),
            };
            error_response(gateway, call, &ErrorInfo::new(kind, err.to_string()).with_status(status))
        }
        Failure::BeforeContent(class, message) => {
            let (kind, status) = match class {
                StatusClass::Timeout => (ErrorKind::Timeout, 504),
                StatusClass::RateLimited => (ErrorKind::RateLimit, 429),
                StatusClass::Overloaded => (ErrorKind::Overloaded, 503),
                _ => (ErrorKind::Unavailable, 502),
            };
            error_response(gateway, call, &ErrorInfo::new(kind, message).with_status(status))
        }
        Failure::Upstream(failure) => {
            let UpstreamFailure { lane_protocol, status, headers, body, info, lane_header, provider_header } = *failure;
            let mut response = if lane_protocol == call.ingress {
                // Same protocol: the vendor's own error bytes, status and type header.
                let mut builder = Response::builder().status(status);
                if let Some(out) = builder.headers_mut() {
                    let content_type = headers
                        .get(http::header::CONTENT_TYPE)
                        .cloned()
                        .unwrap_or(HeaderValue::from_static("application/json"));
                    out.insert(http::header::CONTENT_TYPE, content_type);
                    if let Some(kind) = headers.get("x-amzn-errortype") {
                        out.insert(X_AMZN_ERRORTYPE, kind.clone());
                    }
                }
                let mut response = builder.body(full_body(body)).unwrap_or_else(|_| internal_error());
                common_headers(response.headers_mut(), call);
                response
            } else {
                error_response(gateway, call, &info)
            };
            let out = response.headers_mut();
            lane_headers(out, &lane_header, &provider_header);
            if let Some(retry_after) = headers.get(http::header::RETRY_AFTER) {
                out.insert(http::header::RETRY_AFTER, retry_after.clone());
            }
            response
        }
    }
}

/// An upstream's `Retry-After`: delay-seconds or an HTTP-date (RFC 9110
/// 10.2.3), at most a day.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    parse_retry_after(headers.get(http::header::RETRY_AFTER)?.to_str().ok()?, SystemTime::now())
}

pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    const DAY: f64 = 86_400.0;
    let value = value.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(DAY)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO).min(Duration::from_secs_f64(DAY)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after(" 1.5 ", now), Some(Duration::from_millis(1500)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", now), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now), Some(Duration::ZERO), "in the past");
        assert_eq!(parse_retry_after("99999999", now), Some(Duration::from_secs(86_400)));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);
    }
}
