//! Anthropic error bodies, `{"type":"error","error":{"type","message"}}`:
//! classifying an upstream's and writing the gateway's own.

use serde_json::{json, Value};
use switchyard_codec::ir::{ErrorInfo, ErrorKind};
use switchyard_codec::{body_excerpt, mentions_context_length, ErrorResponse, RawUpstreamError};

/// Every error type the Messages API documents.
const VENDOR_TYPES: [&str; 11] = [
    "invalid_request_error",
    "authentication_error",
    "billing_error",
    "permission_error",
    "not_found_error",
    "conflict_error",
    "request_too_large",
    "rate_limit_error",
    "api_error",
    "timeout_error",
    "overloaded_error",
];

/// The kind an Anthropic error type implies. `api_error` is generic, so the
/// status refines it; an invalid request is refined by its message, the
/// only place Anthropic says the prompt was too long or credit ran out.
pub(crate) fn kind_for_type(vendor_type: &str, status: u16, message: &str) -> ErrorKind {
    let kind = match vendor_type {
        "invalid_request_error" | "conflict_error" => ErrorKind::InvalidRequest,
        "authentication_error" => ErrorKind::Authentication,
        "billing_error" => ErrorKind::QuotaExceeded,
        "permission_error" => ErrorKind::PermissionDenied,
        "not_found_error" => ErrorKind::NotFound,
        "request_too_large" => ErrorKind::RequestTooLarge,
        "rate_limit_error" => ErrorKind::RateLimit,
        "timeout_error" => ErrorKind::Timeout,
        "overloaded_error" => ErrorKind::Overloaded,
        "api_error" => match ErrorKind::from_status(status) {
            kind @ (ErrorKind::Timeout | ErrorKind::Unavailable | ErrorKind::Overloaded) => kind,
            _ => ErrorKind::Internal,
        },
        _ => ErrorKind::from_status(status),
    };
    refine(kind, message)
}

fn refine(kind: ErrorKind, message: &str) -> ErrorKind {
    if kind != ErrorKind::InvalidRequest {
        return kind;
    }
    if mentions_context_length(message) {
        return ErrorKind::ContextLength;
    }
    let lower = message.to_ascii_lowercase();
    // Anthropic answers 400 when credit or a spend limit runs out.
    if ["credit balance", "usage limit", "spend limit"].iter().any(|needle| lower.contains(needle)) {
        return ErrorKind::QuotaExceeded;
    }
    kind
}

pub(crate) fn extract_error(status: u16, body: &[u8]) -> RawUpstreamError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    let (vendor_type, message) = match error {
        Some(Value::Object(error)) => (
            error.get("type").and_then(Value::as_str).map(str::to_owned),
            error.get("message").and_then(Value::as_str).unwrap_or_default().to_owned(),
        ),
        // Some proxies put a bare string under `error`.
        Some(Value::String(message)) => (None, message.clone()),
        _ => {
            let message = parsed
                .as_ref()
                .and_then(|v| v.get("message"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| body_excerpt(body));
            (None, message)
        }
    };
    let kind = match &vendor_type {
        Some(t) => kind_for_type(t, status, &message),
        None => refine(ErrorKind::from_status(status), &message),
    };
    RawUpstreamError { status, kind, vendor_type, vendor_code: None, message }
}

/// The Anthropic error type for an error: a relayed Anthropic type is kept,
/// anything else follows from the kind.
pub(crate) fn type_for_error(error: &ErrorInfo) -> &str {
    if let Some(code) = error.code.as_deref() {
        if let Some(known) = VENDOR_TYPES.iter().find(|t| **t == code) {
            return known;
        }
    }
    match error.kind {
        ErrorKind::InvalidRequest | ErrorKind::ContextLength => "invalid_request_error",
        ErrorKind::Authentication => "authentication_error",
        ErrorKind::PermissionDenied => "permission_error",
        ErrorKind::NotFound => "not_found_error",
        ErrorKind::RequestTooLarge => "request_too_large",
        ErrorKind::RateLimit => "rate_limit_error",
        ErrorKind::QuotaExceeded => "billing_error",
        ErrorKind::Overloaded => "overloaded_error",
        ErrorKind::Timeout => "timeout_error",
        // Anthropic has no "unavailable"; the 503 status says it.
        ErrorKind::Unavailable | ErrorKind::Internal => "api_error",
    }
}

pub(crate) fn error_response(error: &ErrorInfo) -> ErrorResponse {
    let body = json!({
        "type": "error",
        "error": {"type": type_for_error(error), "message": error.message},
    });
    ErrorResponse { status: error.status, headers: Vec::new(), body: switchyard_codec::json::to_vec(&body) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_types_map_to_kinds() {
        let cases = [
            (400, "invalid_request_error", ErrorKind::InvalidRequest),
            (401, "authentication_error", ErrorKind::Authentication),
            (402, "billing_error", ErrorKind::QuotaExceeded),
            (403, "permission_error", ErrorKind::PermissionDenied),
            (404, "not_found_error", ErrorKind::NotFound),
            (413, "request_too_large", ErrorKind::RequestTooLarge),
            (429, "rate_limit_error", ErrorKind::RateLimit),
            (500, "api_error", ErrorKind::Internal),
            (504, "timeout_error", ErrorKind::Timeout),
            (529, "overloaded_error", ErrorKind::Overloaded),
        ];
        for (status, vendor_type, kind) in cases {
            let body = json!({"type": "error", "error": {"type": vendor_type, "message": "m"}});
            let raw = extract_error(status, &serde_json::to_vec(&body).unwrap());
            assert_eq!(raw.kind, kind, "{vendor_type}");
            assert_eq!(raw.vendor_type.as_deref(), Some(vendor_type));
            assert_eq!(raw.message, "m");
        }
    }

    #[test]
    fn prompt_too_long_is_context_length_and_low_credit_is_quota() {
        let body = br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#;
        assert_eq!(extract_error(400, body).kind, ErrorKind::ContextLength);
        let body = br#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}"#;
        assert_eq!(extract_error(400, body).kind, ErrorKind::QuotaExceeded);
    }

    #[test]
    fn non_json_bodies_fall_back_to_the_status() {
        let raw = extract_error(502, b"<html>bad gateway</html>\n");
        assert_eq!(raw.kind, ErrorKind::Internal);
        assert_eq!(raw.message, "<html>bad gateway</html>");
        assert_eq!(raw.vendor_type, None);
        let raw = extract_error(429, &[b'x'; 5000]);
        assert_eq!(raw.kind, ErrorKind::RateLimit);
        assert_eq!(raw.message.len(), switchyard_codec::MAX_ERROR_EXCERPT);
        let raw = extract_error(503, br#"{"error":"upstream connect error"}"#);
        assert_eq!(raw.kind, ErrorKind::Unavailable);
        assert_eq!(raw.message, "upstream connect error");
    }

    #[test]
    fn relayed_vendor_types_are_kept() {
        let mut info = ErrorInfo::new(ErrorKind::InvalidRequest, "x");
        info.code = Some("conflict_error".into());
        assert_eq!(type_for_error(&info), "conflict_error");
        info.code = Some("context_length_exceeded".into());
        assert_eq!(type_for_error(&info), "invalid_request_error");
    }
}
