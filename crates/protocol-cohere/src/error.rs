//! Cohere error bodies (`{"id"?, "message"}`): classifying an upstream's,
//! and writing the gateway's own.

use serde_json::Value;
use switchyard_codec::ir::{ErrorInfo, ErrorKind};
use switchyard_codec::{
    body_excerpt, json as codec_json, mentions_context_length, message_or_status, ErrorResponse, RawUpstreamError,
};

/// What a Cohere error response says went wrong. The body has no type or
/// code, so the class comes from the status and, for context length and
/// exhausted trial quotas, from the message.
pub(crate) fn extract(status: u16, body: &[u8]) -> RawUpstreamError {
    let message = match serde_json::from_slice::<Value>(body) {
        Ok(value) => {
            value.get("message").and_then(Value::as_str).map(str::to_owned).unwrap_or_else(|| body_excerpt(body))
        }
        Err(_) => body_excerpt(body),
    };
    let message = message_or_status(message, status);
    RawUpstreamError { status, kind: classify(status, &message), vendor_type: None, vendor_code: None, message }
}

fn classify(status: u16, message: &str) -> ErrorKind {
    let kind = ErrorKind::from_status(status);
    if kind == ErrorKind::InvalidRequest && mentions_context_length(message) {
        return ErrorKind::ContextLength;
    }
    if status == 429 {
        // Trial keys answer 429 once their monthly allowance is spent; that
        // is a quota, not a burst limit that retrying later fixes.
        let lower = message.to_ascii_lowercase();
        if ["quota", "billing", "payment", "per month", "/ month", "budget"].iter().any(|needle| lower.contains(needle))
        {
            return ErrorKind::QuotaExceeded;
        }
    }
    kind
}

/// The gateway's error in Cohere's shape, with the error's own status: a
/// quota error is a 429 (the SDK's `TooManyRequestsError`), never a 402,
/// which no client treats as retryable-later and which would tell a caller a
/// gateway stands in the way.
pub(crate) fn response(error: &ErrorInfo) -> ErrorResponse {
    ErrorResponse {
        status: error.status,
        headers: Vec::new(),
        body: codec_json::to_vec(&serde_json::json!({ "message": error.message })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_by_status_and_message() {
        let cases: [(u16, &[u8], ErrorKind); 10] = [
            (
                400,
                br#"{"message":"invalid request: message must be at least 1 token long"}"#,
                ErrorKind::InvalidRequest,
            ),
            (
                400,
                br#"{"id":"x","message":"too many tokens: total number of tokens in the prompt cannot exceed 128000"}"#,
                ErrorKind::ContextLength,
            ),
            (401, br#"{"message":"invalid api token"}"#, ErrorKind::Authentication),
            (402, br#"{"message":"please add a payment method"}"#, ErrorKind::QuotaExceeded),
            (404, br#"{"message":"model 'x' not found"}"#, ErrorKind::NotFound),
            (422, br#"{"message":"unprocessable"}"#, ErrorKind::InvalidRequest),
            (429, br#"{"message":"You are past the per minute request limit"}"#, ErrorKind::RateLimit),
            (
                429,
                br#"{"message":"You are using a Trial key, which is limited to 1000 API calls / month."}"#,
                ErrorKind::QuotaExceeded,
            ),
            (503, b"<html>unavailable</html>", ErrorKind::Unavailable),
            (504, b"", ErrorKind::Timeout),
        ];
        for (status, body, kind) in cases {
            let error = extract(status, body);
            assert_eq!(error.kind, kind, "{status} {:?}", String::from_utf8_lossy(body));
            assert!(!error.message.is_empty());
        }
        assert_eq!(extract(503, b"  <html>unavailable</html>\n").message, "<html>unavailable</html>");
        assert_eq!(extract(504, b"").message, "upstream returned status 504");
        assert_eq!(extract(500, &[b'x'; 2000]).message.len(), switchyard_codec::MAX_ERROR_EXCERPT);
    }

    #[test]
    fn quota_errors_are_429_never_402() {
        let written = response(&ErrorInfo::new(ErrorKind::QuotaExceeded, "budget exhausted"));
        assert_eq!(written.status, 429);
        assert_eq!(written.body, br#"{"message":"budget exhausted"}"#);
        // The message still tells a quota from a rate limit.
        assert_eq!(extract(402, br#"{"message":"budget exhausted"}"#).kind, ErrorKind::QuotaExceeded);
    }
}
