//! Errors in the Responses protocol: the OpenAI error envelope
//! (`{"error":{"message","type","param","code"}}`) read from upstreams and
//! written to callers, and the error codes of in-stream `error` events.

use serde_json::{json, Value};
use switchyard_codec::ir::{ErrorInfo, ErrorKind};
use switchyard_codec::{
    body_excerpt, json as codec_json, mentions_context_length, message_or_status, ErrorResponse, RawUpstreamError,
};

/// The error `type` written for each kind, and the `code` written when the
/// error carries none. The codes are OpenAI's own where it has one.
fn wire_names(kind: ErrorKind) -> (&'static str, &'static str) {
    match kind {
        ErrorKind::InvalidRequest => ("invalid_request_error", "invalid_request_error"),
        ErrorKind::ContextLength => ("invalid_request_error", "context_length_exceeded"),
        ErrorKind::Authentication => ("authentication_error", "invalid_api_key"),
        ErrorKind::PermissionDenied => ("permission_error", "permission_denied"),
        ErrorKind::NotFound => ("not_found_error", "not_found"),
        ErrorKind::RequestTooLarge => ("invalid_request_error", "request_too_large"),
        ErrorKind::RateLimit => ("rate_limit_error", "rate_limit_exceeded"),
        ErrorKind::QuotaExceeded => ("insufficient_quota", "insufficient_quota"),
        ErrorKind::Overloaded => ("overloaded_error", "overloaded"),
        ErrorKind::Timeout => ("timeout_error", "timeout"),
        ErrorKind::Unavailable => ("service_unavailable_error", "service_unavailable"),
        ErrorKind::Internal => ("server_error", "server_error"),
    }
}

/// The kind a vendor `code` names, for the codes that name one.
fn kind_from_code(code: &str) -> Option<ErrorKind> {
    Some(match code {
        "context_length_exceeded" => ErrorKind::ContextLength,
        "rate_limit_exceeded" => ErrorKind::RateLimit,
        "insufficient_quota" | "billing_hard_limit_reached" => ErrorKind::QuotaExceeded,
        "invalid_api_key" => ErrorKind::Authentication,
        "permission_denied" | "unsupported_country_region_territory" => ErrorKind::PermissionDenied,
        "model_not_found" | "not_found" => ErrorKind::NotFound,
        "request_too_large" => ErrorKind::RequestTooLarge,
        "overloaded" => ErrorKind::Overloaded,
        "timeout" => ErrorKind::Timeout,
        "service_unavailable" => ErrorKind::Unavailable,
        "server_error" => ErrorKind::Internal,
        "invalid_request_error" | "invalid_prompt" => ErrorKind::InvalidRequest,
        _ => return None,
    })
}

/// The kind a specific vendor `type` names (the generic
/// `invalid_request_error` and `server_error` defer to the status).
fn kind_from_type(kind: &str) -> Option<ErrorKind> {
    Some(match kind {
        "authentication_error" => ErrorKind::Authentication,
        "permission_error" => ErrorKind::PermissionDenied,
        "not_found_error" => ErrorKind::NotFound,
        "rate_limit_error" | "requests" | "tokens" => ErrorKind::RateLimit,
        "insufficient_quota" => ErrorKind::QuotaExceeded,
        "overloaded_error" => ErrorKind::Overloaded,
        "timeout_error" => ErrorKind::Timeout,
        "service_unavailable_error" => ErrorKind::Unavailable,
        _ => return None,
    })
}

/// Classifies an error from its code, type, status and message, in that
/// order; a context-length complaint is looked for only in what would
/// otherwise be an invalid request (a 429 saying "too many tokens" is a
/// rate limit).
fn classify(status: u16, vendor_type: Option<&str>, code: Option<&str>, message: &str) -> ErrorKind {
    let kind = code
        .and_then(kind_from_code)
        .or_else(|| vendor_type.and_then(kind_from_type))
        .unwrap_or_else(|| ErrorKind::from_status(status));
    if kind == ErrorKind::InvalidRequest && mentions_context_length(message) {
        return ErrorKind::ContextLength;
    }
    kind
}

/// Reads an upstream error body (JSON envelope or not).
pub(crate) fn extract_error(status: u16, body: &[u8]) -> RawUpstreamError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error")).filter(|e| e.is_object());
    let field = |key: &str| -> Option<String> {
        let value = error?.get(key)?;
        match value {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let vendor_type = field("type");
    let vendor_code = field("code");
    let message = field("message")
        .or_else(|| {
            // `{"error": "text"}` and other shapes some compatible servers use.
            parsed
                .as_ref()
                .and_then(|v| v.get("error").or_else(|| v.get("message")))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| message_or_status(body_excerpt(body), status));
    RawUpstreamError {
        status,
        kind: classify(status, vendor_type.as_deref(), vendor_code.as_deref(), &message),
        vendor_type,
        vendor_code,
        message,
    }
}

/// The caller-facing error envelope. The error's own code is kept when the
/// envelope still reads back as the same kind; otherwise the kind's code is
/// written (OpenAI clients detect e.g. `context_length_exceeded` by code).
pub(crate) fn error_response(error: &ErrorInfo) -> ErrorResponse {
    let (kind_type, default_code) = wire_names(error.kind);
    let code = match error.code.as_deref() {
        Some(code) if classify(error.status, Some(kind_type), Some(code), &error.message) == error.kind => code,
        _ => default_code,
    };
    let body = json!({
        "error": {
            "message": error.message,
            "type": kind_type,
            "param": error.param,
            "code": code,
        }
    });
    ErrorResponse { status: error.status, headers: Vec::new(), body: codec_json::to_vec(&body) }
}

/// The `code` of an in-stream `error` event: the error's own code when it
/// reads back as the same kind, else the kind's code (the event has no
/// `type`, so the code alone must carry the kind).
pub(crate) fn stream_code(error: &ErrorInfo) -> &str {
    match error.code.as_deref() {
        Some(code) if stream_kind(Some(code), &error.message) == error.kind => code,
        _ => wire_names(error.kind).1,
    }
}

/// The kind of an in-stream error, from its code and message.
fn stream_kind(code: Option<&str>, message: &str) -> ErrorKind {
    code.and_then(kind_from_code).unwrap_or_else(|| {
        if mentions_context_length(message) {
            ErrorKind::ContextLength
        } else if code.is_some_and(|c| c.starts_with("invalid") || c.starts_with("image")) {
            ErrorKind::InvalidRequest
        } else {
            ErrorKind::Internal
        }
    })
}

/// An in-stream error (`error` event or failed response) → IR error.
pub(crate) fn stream_error(code: Option<&str>, message: Option<&str>, param: Option<&str>) -> ErrorInfo {
    let message = message.unwrap_or("the upstream stream failed").to_owned();
    let kind = stream_kind(code, &message);
    ErrorInfo {
        kind,
        status: kind.default_status(),
        message,
        code: code.map(str::to_owned),
        param: param.map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_context_length_error_is_classified() {
        let body = br#"{"error":{"message":"Your input exceeds the context window of this model.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}"#;
        let raw = extract_error(400, body);
        assert_eq!(raw.kind, ErrorKind::ContextLength);
        assert_eq!(raw.vendor_code.as_deref(), Some("context_length_exceeded"));
        assert_eq!(raw.vendor_type.as_deref(), Some("invalid_request_error"));
    }

    #[test]
    fn context_length_is_found_in_prose_but_not_in_rate_limits() {
        let prose = br#"{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":null}}"#;
        assert_eq!(extract_error(400, prose).kind, ErrorKind::ContextLength);
        let limit = br#"{"error":{"message":"Rate limit reached: too many tokens per min","type":"tokens","code":"rate_limit_exceeded"}}"#;
        assert_eq!(extract_error(429, limit).kind, ErrorKind::RateLimit);
        let quota = br#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
        assert_eq!(extract_error(429, quota).kind, ErrorKind::QuotaExceeded);
    }

    #[test]
    fn non_json_bodies_are_tolerated() {
        let raw = extract_error(502, b"<html>bad gateway</html>");
        assert_eq!(raw.kind, ErrorKind::Internal);
        assert_eq!(raw.message, "<html>bad gateway</html>");
        assert_eq!(extract_error(503, b"").kind, ErrorKind::Unavailable);
        assert_eq!(extract_error(503, b"").message, "upstream returned status 503");
    }

    #[test]
    fn stream_codes_carry_the_kind() {
        let mut info = ErrorInfo::new(ErrorKind::Overloaded, "busy");
        info.code = Some("overloaded_error".into());
        let code = stream_code(&info).to_owned();
        assert_eq!(stream_error(Some(&code), Some("busy"), None).kind, ErrorKind::Overloaded);
    }
}
