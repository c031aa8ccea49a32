//! OpenAI error bodies, `{"error": {"message", "type", "param", "code"}}`:
//! classifying an upstream's into an `ErrorKind` and writing our own.

use serde::Serialize;
use serde_json::Value;
use switchyard_codec::ir::{ErrorInfo, ErrorKind};
use switchyard_codec::{body_excerpt, mentions_context_length, message_or_status, ErrorResponse, RawUpstreamError};

/// The fields of an OpenAI-style error object, wherever a server put them.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct VendorError {
    pub message: String,
    pub kind: Option<String>,
    pub code: Option<String>,
    pub param: Option<String>,
}

impl VendorError {
    /// Reads `{"error": {..}}`, `{"error": "text"}`, or the flat
    /// `{"object": "error", "message", "type", "code"}` some compatible
    /// servers send. `None` when the value holds no error.
    pub fn from_value(value: &Value) -> Option<VendorError> {
        match value.get("error") {
            Some(Value::Object(_)) => value.get("error").map(VendorError::from_fields),
            Some(Value::String(message)) => Some(VendorError { message: message.clone(), ..VendorError::default() }),
            _ if value.get("object").and_then(Value::as_str) == Some("error") => Some(VendorError::from_fields(value)),
            _ => None,
        }
    }

    fn from_fields(fields: &Value) -> VendorError {
        let text = |key: &str| match fields.get(key) {
            Some(Value::String(text)) if !text.is_empty() => Some(text.clone()),
            // Some servers put the HTTP status in `code`.
            Some(Value::Number(number)) => Some(number.to_string()),
            _ => None,
        };
        VendorError {
            message: text("message").unwrap_or_default(),
            kind: text("type"),
            code: text("code"),
            param: text("param"),
        }
    }

    /// The error's class. `status` is the HTTP status when there is one
    /// (in-stream errors have none).
    pub fn classify(&self, status: Option<u16>) -> ErrorKind {
        let code = self.code.as_deref().unwrap_or("");
        let kind = self.kind.as_deref().unwrap_or("");
        if code == "context_length_exceeded" || code == "string_above_max_length" {
            return ErrorKind::ContextLength;
        }
        if code == "insufficient_quota" || kind == "insufficient_quota" || code == "billing_hard_limit_reached" {
            return ErrorKind::QuotaExceeded;
        }
        let by_code = match code {
            "invalid_api_key" | "invalid_authentication" => Some(ErrorKind::Authentication),
            "model_not_found" => Some(ErrorKind::NotFound),
            "rate_limit_exceeded" => Some(ErrorKind::RateLimit),
            "server_is_overloaded" | "slow_down" => Some(ErrorKind::Overloaded),
            "service_unavailable" => Some(ErrorKind::Unavailable),
            "timeout" => Some(ErrorKind::Timeout),
            "request_too_large" => Some(ErrorKind::RequestTooLarge),
            _ => None,
        };
        if let Some(kind) = by_code {
            return kind;
        }
        // Compatible servers often say it only in prose.
        if mentions_context_length(&self.message) {
            return ErrorKind::ContextLength;
        }
        let from_status = status.map(ErrorKind::from_status);
        match kind {
            "authentication_error" => ErrorKind::Authentication,
            "permission_error" | "permission_denied" => ErrorKind::PermissionDenied,
            "not_found_error" => ErrorKind::NotFound,
            "rate_limit_error" | "tokens" | "requests" => ErrorKind::RateLimit,
            "service_unavailable_error" => ErrorKind::Unavailable,
            "overloaded_error" => ErrorKind::Overloaded,
            "timeout_error" => ErrorKind::Timeout,
            // OpenAI answers 401, 404 and 413 with this type too; the status
            // is the finer signal.
            "invalid_request_error" => match from_status {
                Some(kind) if status.is_some_and(|s| (400..500).contains(&s)) => kind,
                _ => ErrorKind::InvalidRequest,
            },
            "server_error" | "api_error" => match from_status {
                Some(kind) if status.is_some_and(|s| s >= 500) => kind,
                _ => ErrorKind::Internal,
            },
            _ => from_status.unwrap_or(ErrorKind::Internal),
        }
    }

    /// The caller-facing form of an in-stream error.
    pub fn to_error_info(&self) -> ErrorInfo {
        let kind = self.classify(None);
        let message =
            if self.message.is_empty() { "the upstream stream failed".to_owned() } else { self.message.clone() };
        ErrorInfo {
            kind,
            status: kind.default_status(),
            message,
            code: self.code.clone().or_else(|| self.kind.clone()),
            param: self.param.clone(),
        }
    }
}

/// Stage 1a: what an OpenAI-style upstream said went wrong.
pub(crate) fn extract(status: u16, body: &[u8]) -> RawUpstreamError {
    let vendor = serde_json::from_slice::<Value>(body).ok().and_then(|value| VendorError::from_value(&value));
    match vendor {
        Some(vendor) => RawUpstreamError {
            status,
            kind: vendor.classify(Some(status)),
            message: message_or_status(vendor.message, status),
            vendor_type: vendor.kind,
            vendor_code: vendor.code,
        },
        None => {
            let message = message_or_status(body_excerpt(body), status);
            let kind = if mentions_context_length(&message) {
                ErrorKind::ContextLength
            } else {
                ErrorKind::from_status(status)
            };
            RawUpstreamError { status, kind, vendor_type: None, vendor_code: None, message }
        }
    }
}

#[derive(Serialize)]
pub(crate) struct ErrorBody<'a> {
    error: ErrorObject<'a>,
}

#[derive(Serialize)]
struct ErrorObject<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    param: Option<&'a str>,
    code: Option<&'a str>,
}

/// The OpenAI error object for `error`, as a body and as a stream event.
pub(crate) fn body(error: &ErrorInfo) -> ErrorBody<'_> {
    // Kinds that share a type carry a code that tells them apart, so that
    // `extract` reads back the same kind.
    let (kind, code): (&str, Option<&str>) = match error.kind {
        ErrorKind::InvalidRequest => ("invalid_request_error", None),
        ErrorKind::Authentication => ("authentication_error", None),
        ErrorKind::PermissionDenied => ("permission_error", None),
        ErrorKind::NotFound => ("not_found_error", None),
        ErrorKind::RequestTooLarge => ("invalid_request_error", Some("request_too_large")),
        ErrorKind::RateLimit => ("rate_limit_error", Some("rate_limit_exceeded")),
        ErrorKind::QuotaExceeded => ("insufficient_quota", Some("insufficient_quota")),
        ErrorKind::ContextLength => ("invalid_request_error", Some("context_length_exceeded")),
        ErrorKind::Overloaded => ("server_error", Some("server_is_overloaded")),
        ErrorKind::Timeout => ("server_error", Some("timeout")),
        ErrorKind::Unavailable => ("server_error", Some("service_unavailable")),
        ErrorKind::Internal => ("server_error", None),
    };
    ErrorBody {
        error: ErrorObject {
            message: &error.message,
            kind,
            param: error.param.as_deref(),
            code: code.or(error.code.as_deref()),
        },
    }
}

/// The protocol's own error response for `error`.
pub(crate) fn response(error: &ErrorInfo) -> ErrorResponse {
    ErrorResponse { status: error.status, headers: Vec::new(), body: switchyard_codec::json::to_vec(&body(error)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind_of(status: u16, body: &str) -> ErrorKind {
        extract(status, body.as_bytes()).kind
    }

    #[test]
    fn classifies_openai_errors() {
        let quota = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
        assert_eq!(kind_of(429, quota), ErrorKind::QuotaExceeded);
        let rate = r#"{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;
        assert_eq!(kind_of(429, rate), ErrorKind::RateLimit);
        let key = r#"{"error":{"message":"Incorrect API key provided: sk-abc.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;
        assert_eq!(kind_of(401, key), ErrorKind::Authentication);
        let model = r#"{"error":{"message":"The model `gpt-9` does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#;
        assert_eq!(kind_of(404, model), ErrorKind::NotFound);
        let context = r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        let raw = extract(400, context.as_bytes());
        assert_eq!(raw.kind, ErrorKind::ContextLength);
        assert_eq!(raw.vendor_type.as_deref(), Some("invalid_request_error"));
        assert_eq!(raw.vendor_code.as_deref(), Some("context_length_exceeded"));
        let server =
            r#"{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}"#;
        assert_eq!(kind_of(500, server), ErrorKind::Internal);
        assert_eq!(kind_of(503, server), ErrorKind::Unavailable);
        let vllm = r#"{"object":"error","message":"bad","type":"BadRequestError","param":null,"code":400}"#;
        let raw = extract(400, vllm.as_bytes());
        assert_eq!(raw.kind, ErrorKind::InvalidRequest);
        assert_eq!(raw.vendor_code.as_deref(), Some("400"));
    }

    #[test]
    fn tolerates_non_json_bodies() {
        let raw = extract(502, b"<html>bad gateway</html>");
        assert_eq!(raw.kind, ErrorKind::Internal);
        assert_eq!(raw.message, "<html>bad gateway</html>");
        let raw = extract(503, b"");
        assert_eq!(raw.kind, ErrorKind::Unavailable);
        assert_eq!(raw.message, "upstream returned status 503");
        let long = "é".repeat(1500);
        assert_eq!(extract(500, long.as_bytes()).message.chars().count(), switchyard_codec::MAX_ERROR_EXCERPT);
    }

    #[test]
    fn written_errors_read_back() {
        for kind in [
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
        ] {
            let mut info = ErrorInfo::new(kind, "something went wrong");
            info.param = Some("messages".into());
            let written = response(&info);
            assert_eq!(written.status, kind.default_status());
            let raw = extract(written.status, &written.body);
            assert_eq!(raw.kind, kind, "{kind:?}");
            assert_eq!(raw.message, "something went wrong");
            // In-stream errors have no status and still read back.
            let value: Value = serde_json::from_slice(&written.body).unwrap();
            let vendor = VendorError::from_value(&value).unwrap();
            assert_eq!(vendor.to_error_info().kind, kind, "{kind:?} in stream");
            assert_eq!(vendor.param.as_deref(), Some("messages"));
        }
    }
}
