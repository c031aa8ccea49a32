//! Gemini errors: the Google RPC status body
//! `{"error": {"code", "message", "status", "details"}}`, read from
//! upstreams (also inside streams) and written for callers.
//!
//! Kinds come from the canonical status name, refined by the HTTP status,
//! the message and the `google.rpc.ErrorInfo` reason: a context-length
//! `INVALID_ARGUMENT` ("The input token count ... exceeds the maximum"),
//! a daily or billing `RESOURCE_EXHAUSTED` (quota rather than rate), an
//! overloaded `UNAVAILABLE`. When writing a kind that shares its status
//! name with another, the writer adds an ErrorInfo reason so that the
//! kind reads back unchanged.

use http::{HeaderName, HeaderValue};
use serde_json::{json, Value};
use switchyard_codec::ir::{ErrorInfo, ErrorKind};
use switchyard_codec::{
    body_excerpt, json, mentions_context_length, message_or_status, ErrorResponse, RawUpstreamError,
};

use crate::wire::{ErrorBody, ErrorEnvelope};

const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// Reasons the writer adds for kinds that share a status name.
const CONTEXT_LENGTH_REASON: &str = "CONTEXT_LENGTH_EXCEEDED";
const QUOTA_REASON: &str = "QUOTA_EXCEEDED";
const OVERLOADED_REASON: &str = "OVERLOADED";
const TOO_LARGE_REASON: &str = "REQUEST_TOO_LARGE";

/// Stage 1a: what the upstream said.
pub(crate) fn extract(status: u16, body: &[u8]) -> RawUpstreamError {
    let parsed = serde_json::from_slice::<Value>(body).ok().and_then(|value| {
        // streamGenerateContent without alt=sse wraps errors in an array.
        let value = match value {
            Value::Array(items) => items.into_iter().next()?,
            other => other,
        };
        serde_json::from_value::<ErrorEnvelope>(value).ok()
    });
    match parsed {
        Some(envelope) => {
            let error = envelope.error;
            let reason = error_reason(&error);
            let message = message_or_status(error.message.clone(), status);
            let kind = classify(status, error.status.as_deref(), &message, reason.as_deref(), &error.details);
            RawUpstreamError { status, kind, vendor_type: error.status.clone(), vendor_code: reason, message }
        }
        None => {
            let message = message_or_status(body_excerpt(body), status);
            let mut kind = ErrorKind::from_status(status);
            if kind == ErrorKind::InvalidRequest && mentions_context_length(&message) {
                kind = ErrorKind::ContextLength;
            }
            RawUpstreamError { status, kind, vendor_type: None, vendor_code: None, message }
        }
    }
}

/// The caller-facing error for an error object met inside a stream.
pub(crate) fn stream_error_info(error: &ErrorBody) -> ErrorInfo {
    let status = error
        .code
        .as_ref()
        .and_then(code_number)
        .or_else(|| error.status.as_deref().and_then(status_code_of))
        .unwrap_or(500);
    let reason = error_reason(error);
    let message = if error.message.is_empty() { "upstream stream failed".to_owned() } else { error.message.clone() };
    ErrorInfo {
        kind: classify(status, error.status.as_deref(), &message, reason.as_deref(), &error.details),
        status,
        message,
        code: reason.or_else(|| error.status.clone()),
        param: None,
    }
}

fn code_number(code: &Value) -> Option<u16> {
    match code {
        Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn status_code_of(name: &str) -> Option<u16> {
    Some(match name {
        "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE" => 400,
        "UNAUTHENTICATED" => 401,
        "PERMISSION_DENIED" => 403,
        "NOT_FOUND" => 404,
        "ALREADY_EXISTS" | "ABORTED" => 409,
        "RESOURCE_EXHAUSTED" => 429,
        "CANCELLED" => 499,
        "UNIMPLEMENTED" => 501,
        "UNAVAILABLE" => 503,
        "DEADLINE_EXCEEDED" => 504,
        "INTERNAL" | "UNKNOWN" | "DATA_LOSS" => 500,
        _ => return None,
    })
}

/// The first `google.rpc.ErrorInfo` reason in `details`.
fn error_reason(error: &ErrorBody) -> Option<String> {
    error.details.iter().find_map(|detail| {
        let is_info = detail.get("@type").and_then(Value::as_str).is_some_and(|t| t == ERROR_INFO_TYPE);
        if !is_info {
            return None;
        }
        detail.get("reason").and_then(Value::as_str).filter(|r| !r.is_empty()).map(str::to_owned)
    })
}

/// Daily quotas and billing limits do not lift with a short wait.
fn is_quota(reason: Option<&str>, details: &[Value]) -> bool {
    let reason_says = reason.is_some_and(|r| {
        let upper = r.to_ascii_uppercase();
        upper == QUOTA_REASON || upper == "INSUFFICIENT_QUOTA" || upper.contains("BILLING")
    });
    let daily = details.iter().any(|detail| {
        detail.get("violations").and_then(Value::as_array).is_some_and(|violations| {
            violations.iter().any(|v| v.get("quotaId").and_then(Value::as_str).is_some_and(|id| id.contains("PerDay")))
        })
    });
    reason_says || daily
}

fn classify(status: u16, name: Option<&str>, message: &str, reason: Option<&str>, details: &[Value]) -> ErrorKind {
    let reason_is = |wanted: &str| reason.is_some_and(|r| r.eq_ignore_ascii_case(wanted));
    let upper = name.map(str::to_ascii_uppercase);
    match upper.as_deref() {
        Some("INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE" | "PERMISSION_DENIED")
            if reason.is_some_and(|r| r.to_ascii_uppercase().starts_with("API_KEY_")) =>
        {
            api_key_kind(reason)
        }
        // Gemini reports a bad key as a 400 INVALID_ARGUMENT; it is our
        // credential that is wrong, not the caller's request.
        Some("INVALID_ARGUMENT") if message.starts_with("API key not valid") => ErrorKind::Authentication,
        Some("INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE") => {
            if reason_is(CONTEXT_LENGTH_REASON) || mentions_context_length(message) {
                ErrorKind::ContextLength
            } else if status == 413 || reason_is(TOO_LARGE_REASON) {
                ErrorKind::RequestTooLarge
            } else {
                ErrorKind::InvalidRequest
            }
        }
        Some("UNAUTHENTICATED") => ErrorKind::Authentication,
        Some("PERMISSION_DENIED") => ErrorKind::PermissionDenied,
        Some("NOT_FOUND") => ErrorKind::NotFound,
        Some("RESOURCE_EXHAUSTED") => {
            if status == 402 || is_quota(reason, details) {
                ErrorKind::QuotaExceeded
            } else {
                ErrorKind::RateLimit
            }
        }
        Some("UNAVAILABLE") => {
            if status == 529 || reason_is(OVERLOADED_REASON) || message.to_ascii_lowercase().contains("overloaded") {
                ErrorKind::Overloaded
            } else {
                ErrorKind::Unavailable
            }
        }
        Some("DEADLINE_EXCEEDED") => ErrorKind::Timeout,
        Some("UNIMPLEMENTED") => ErrorKind::InvalidRequest,
        Some("INTERNAL" | "UNKNOWN" | "DATA_LOSS" | "ABORTED" | "CANCELLED") => ErrorKind::Internal,
        _ => {
            let kind = ErrorKind::from_status(status);
            if kind == ErrorKind::InvalidRequest && mentions_context_length(message) {
                ErrorKind::ContextLength
            } else {
                kind
            }
        }
    }
}

/// `API_KEY_INVALID` / `API_KEY_EXPIRED` mean a bad key; the other
/// `API_KEY_*` reasons (service, referrer, IP blocked) a key that is valid
/// but not allowed here.
fn api_key_kind(reason: Option<&str>) -> ErrorKind {
    match reason.map(str::to_ascii_uppercase).as_deref() {
        Some("API_KEY_INVALID" | "API_KEY_EXPIRED") => ErrorKind::Authentication,
        _ => ErrorKind::PermissionDenied,
    }
}

/// The canonical status name a kind is written with.
fn status_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidRequest | ErrorKind::ContextLength | ErrorKind::RequestTooLarge => "INVALID_ARGUMENT",
        ErrorKind::Authentication => "UNAUTHENTICATED",
        ErrorKind::PermissionDenied => "PERMISSION_DENIED",
        ErrorKind::NotFound => "NOT_FOUND",
        ErrorKind::RateLimit | ErrorKind::QuotaExceeded => "RESOURCE_EXHAUSTED",
        ErrorKind::Overloaded | ErrorKind::Unavailable => "UNAVAILABLE",
        ErrorKind::Timeout => "DEADLINE_EXCEEDED",
        ErrorKind::Internal => "INTERNAL",
    }
}

/// The error body for `error` (also used as the in-stream error element).
pub(crate) fn body(error: &ErrorInfo) -> Value {
    let reason = match error.kind {
        ErrorKind::ContextLength => Some(CONTEXT_LENGTH_REASON.to_owned()),
        ErrorKind::QuotaExceeded => Some(QUOTA_REASON.to_owned()),
        ErrorKind::Overloaded => Some(OVERLOADED_REASON.to_owned()),
        ErrorKind::RequestTooLarge => Some(TOO_LARGE_REASON.to_owned()),
        _ => error.code.clone(),
    };
    let mut inner = json!({
        "code": error.status,
        "message": error.message,
        "status": status_name(error.kind),
    });
    if let (Some(reason), Some(map)) = (reason, inner.as_object_mut()) {
        map.insert(
            "details".to_owned(),
            json!([{ "@type": ERROR_INFO_TYPE, "reason": reason, "domain": "switchyard" }]),
        );
    }
    json!({ "error": inner })
}

/// The caller-facing error response.
pub(crate) fn response(error: &ErrorInfo) -> ErrorResponse {
    let headers: Vec<(HeaderName, HeaderValue)> = Vec::new();
    ErrorResponse { status: error.status, headers, body: json::to_vec(&body(error)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_length_is_recognised_from_the_message() {
        let body = br#"{"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}}"#;
        let raw = extract(400, body);
        assert_eq!(raw.kind, ErrorKind::ContextLength);
        assert_eq!(raw.vendor_type.as_deref(), Some("INVALID_ARGUMENT"));
    }

    #[test]
    fn array_wrapped_and_non_json_bodies_are_tolerated() {
        let raw =
            extract(429, br#"[{"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}}]"#);
        assert_eq!(raw.kind, ErrorKind::RateLimit);
        assert_eq!(raw.message, "slow down");
        let raw = extract(502, b"<html>bad gateway</html>");
        assert_eq!(raw.kind, ErrorKind::Internal);
        assert_eq!(raw.message, "<html>bad gateway</html>");
        let raw = extract(503, b"");
        assert_eq!(raw.kind, ErrorKind::Unavailable);
        assert_eq!(raw.message, "upstream returned status 503");
    }

    #[test]
    fn daily_quota_and_overload_refine_the_kind() {
        let body = br#"{"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED", "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}"#;
        assert_eq!(extract(429, body).kind, ErrorKind::QuotaExceeded);
        let body = br#"{"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}}"#;
        assert_eq!(extract(503, body).kind, ErrorKind::Overloaded);
        let body = br#"{"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}]}}"#;
        let raw = extract(400, body);
        assert_eq!(raw.kind, ErrorKind::Authentication);
        assert_eq!(raw.vendor_code.as_deref(), Some("API_KEY_INVALID"));
        let body = br#"{"error": {"code": 403, "message": "blocked", "status": "PERMISSION_DENIED", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_SERVICE_BLOCKED"}]}}"#;
        assert_eq!(extract(403, body).kind, ErrorKind::PermissionDenied);
    }

    #[test]
    fn every_kind_reads_back_from_its_own_response() {
        let kinds = [
            ErrorKind::InvalidRequest,
            ErrorKind::Authentication,
            ErrorKind::PermissionDenied,
            ErrorKind::NotFound,
            ErrorKind::RequestTooLarge,
            ErrorKind::RateLimit,
            ErrorKind::QuotaExceeded,
            ErrorKind::ContextLength,
            ErrorKind::Overloaded,
            ErrorKind::Timeout,
            ErrorKind::Unavailable,
            ErrorKind::Internal,
        ];
        for kind in kinds {
            let info = ErrorInfo::new(kind, "no pool named x");
            let written = response(&info);
            assert_eq!(written.status, kind.default_status());
            let raw = extract(written.status, &written.body);
            assert_eq!(raw.kind, kind, "{kind:?}");
            assert_eq!(raw.message, "no pool named x");
            let stream: ErrorEnvelope = serde_json::from_slice(&written.body).unwrap();
            let streamed = stream_error_info(&stream.error);
            assert_eq!(streamed.kind, kind, "{kind:?}");
            assert_eq!(streamed.status, written.status);
        }
    }
}
