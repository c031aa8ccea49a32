//! Bedrock errors: reading upstream error bodies and in-stream exceptions
//! into error kinds, and writing the gateway's errors the way Bedrock does
//! (`{"message": ...}` with the exception name in `x-amzn-errortype`).

use http::{HeaderName, HeaderValue};
use serde_json::{json, Value};
use switchyard_codec::ir::{ErrorInfo, ErrorKind};
use switchyard_codec::{body_excerpt, mentions_context_length, message_or_status, ErrorResponse, RawUpstreamError};

use crate::eventstream::write_frame;

/// The header that names a Bedrock error's exception type.
pub const ERROR_TYPE_HEADER: &str = "x-amzn-errortype";

/// Bedrock exception names, their HTTP status and the kind they imply.
const EXCEPTIONS: [(&str, u16, ErrorKind); 22] = [
    ("ValidationException", 400, ErrorKind::InvalidRequest),
    ("ServiceQuotaExceededException", 400, ErrorKind::QuotaExceeded),
    ("AccessDeniedException", 403, ErrorKind::PermissionDenied),
    ("UnrecognizedClientException", 403, ErrorKind::Authentication),
    ("InvalidSignatureException", 403, ErrorKind::Authentication),
    ("SignatureDoesNotMatch", 403, ErrorKind::Authentication),
    ("IncompleteSignature", 400, ErrorKind::Authentication),
    ("InvalidClientTokenId", 403, ErrorKind::Authentication),
    ("ExpiredTokenException", 403, ErrorKind::Authentication),
    ("MissingAuthenticationTokenException", 403, ErrorKind::Authentication),
    ("ResourceNotFoundException", 404, ErrorKind::NotFound),
    ("ModelTimeoutException", 408, ErrorKind::Timeout),
    ("ModelErrorException", 424, ErrorKind::Internal),
    ("ModelStreamErrorException", 424, ErrorKind::Internal),
    ("ThrottlingException", 429, ErrorKind::RateLimit),
    ("TooManyRequestsException", 429, ErrorKind::RateLimit),
    ("ModelNotReadyException", 429, ErrorKind::Unavailable),
    ("InternalServerException", 500, ErrorKind::Internal),
    ("InternalFailure", 500, ErrorKind::Internal),
    ("ServiceUnavailableException", 503, ErrorKind::Unavailable),
    ("ServiceUnavailable", 503, ErrorKind::Unavailable),
    ("ConflictException", 400, ErrorKind::InvalidRequest),
];

/// The exception Bedrock itself would answer with for an error kind, and
/// its status.
fn exception_for(kind: ErrorKind) -> (&'static str, u16) {
    match kind {
        ErrorKind::InvalidRequest | ErrorKind::ContextLength => ("ValidationException", 400),
        // Bedrock has no exception of its own for this; the status carries it.
        ErrorKind::RequestTooLarge => ("ValidationException", 413),
        ErrorKind::Authentication => ("UnrecognizedClientException", 403),
        ErrorKind::PermissionDenied => ("AccessDeniedException", 403),
        ErrorKind::NotFound => ("ResourceNotFoundException", 404),
        ErrorKind::RateLimit => ("ThrottlingException", 429),
        ErrorKind::QuotaExceeded => ("ServiceQuotaExceededException", 400),
        ErrorKind::Overloaded | ErrorKind::Unavailable => ("ServiceUnavailableException", 503),
        ErrorKind::Timeout => ("ModelTimeoutException", 408),
        ErrorKind::Internal => ("InternalServerException", 500),
    }
}

/// The exception name a bare status implies (what `x-amzn-errortype`
/// would have said; the codec does not see headers).
fn exception_for_status(status: u16) -> Option<&'static str> {
    Some(match status {
        400 => "ValidationException",
        403 => "AccessDeniedException",
        404 => "ResourceNotFoundException",
        408 => "ModelTimeoutException",
        424 => "ModelErrorException",
        429 => "ThrottlingException",
        500 => "InternalServerException",
        503 => "ServiceUnavailableException",
        _ => return None,
    })
}

/// The kind an exception name implies (any case, any namespace prefix).
fn kind_of_exception(name: &str) -> Option<ErrorKind> {
    EXCEPTIONS.iter().find(|(known, _, _)| known.eq_ignore_ascii_case(name)).map(|(_, _, kind)| *kind)
}

/// `aws.protocols#ValidationException` and `ValidationException:http://…`
/// both name `ValidationException`.
fn bare_exception_name(raw: &str) -> &str {
    let name = raw.rsplit_once('#').map_or(raw, |(_, name)| name);
    name.split_once(':').map_or(name, |(name, _)| name).trim()
}

/// Refines a kind by what the message says.
fn refine(kind: ErrorKind, message: &str) -> ErrorKind {
    match kind {
        ErrorKind::InvalidRequest | ErrorKind::RequestTooLarge if mentions_context_length(message) => {
            ErrorKind::ContextLength
        }
        _ => kind,
    }
}

/// Reads an upstream error body (stage 1a).
pub(crate) fn extract_error(status: u16, body: &[u8]) -> RawUpstreamError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let text = |key: &str| parsed.as_ref().and_then(|value| value.get(key)).and_then(Value::as_str).map(str::to_owned);
    let message =
        text("message").or_else(|| text("Message")).or_else(|| text("errorMessage")).unwrap_or_else(|| match parsed {
            // Not JSON (a proxy's HTML page, plain text): keep a bounded excerpt.
            None => body_excerpt(body),
            Some(_) => String::new(),
        });
    let message = message_or_status(message, status);
    let named = text("__type").or_else(|| text("code")).or_else(|| text("Code"));
    let named = named.as_deref().map(bare_exception_name).filter(|name| !name.is_empty());
    let vendor_type = named.map(str::to_owned).or_else(|| exception_for_status(status).map(str::to_owned));

    let mut kind = named.and_then(kind_of_exception).unwrap_or_else(|| {
        let lower = message.to_ascii_lowercase();
        match status {
            // A 403 is a bad signature or key as often as a missing permission.
            403 if ["security token", "signature", "credential", "api key", "expired"]
                .iter()
                .any(|needle| lower.contains(needle)) =>
            {
                ErrorKind::Authentication
            }
            400 if lower.contains("quota") => ErrorKind::QuotaExceeded,
            424 => ErrorKind::Internal,
            _ => ErrorKind::from_status(status),
        }
    });
    if status == 413 {
        kind = ErrorKind::RequestTooLarge;
    }
    RawUpstreamError { status, kind: refine(kind, &message), vendor_type, vendor_code: None, message }
}

/// Writes the gateway's error as Bedrock does. The body also names the
/// exception in `__type` (as AWS JSON protocols may), so a reader without
/// the headers still tells a quota error from a validation error.
/// A code naming a Bedrock exception of the error's own kind is kept (an
/// `InvalidSignatureException` stays one, not the kind's generic name).
pub(crate) fn error_response(error: &ErrorInfo) -> ErrorResponse {
    let named = error.code.as_deref().and_then(|code| {
        EXCEPTIONS.iter().find(|(name, _, kind)| name.eq_ignore_ascii_case(code) && *kind == error.kind)
    });
    let (exception, status) = named.map_or_else(|| exception_for(error.kind), |(name, status, _)| (*name, *status));
    let body = json!({ "message": error.message, "__type": exception });
    ErrorResponse {
        status,
        headers: vec![(HeaderName::from_static(ERROR_TYPE_HEADER), HeaderValue::from_static(exception))],
        body: switchyard_codec::json::to_vec(&body),
    }
}

/// The in-stream exception name for an error kind. ConverseStream can
/// only raise these five mid-stream.
fn stream_exception_for(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::RateLimit | ErrorKind::QuotaExceeded => "throttlingException",
        ErrorKind::InvalidRequest
        | ErrorKind::ContextLength
        | ErrorKind::RequestTooLarge
        | ErrorKind::NotFound
        | ErrorKind::Authentication
        | ErrorKind::PermissionDenied => "validationException",
        ErrorKind::Overloaded | ErrorKind::Unavailable => "serviceUnavailableException",
        ErrorKind::Timeout => "modelStreamErrorException",
        ErrorKind::Internal => "internalServerException",
    }
}

/// The event-stream exception frame ConverseStream sends for `error`
/// (`:message-type: exception`, `:exception-type`, `{"message": ...}`).
pub fn exception_frame(error: &ErrorInfo) -> Vec<u8> {
    let mut out = Vec::new();
    write_frame(
        &[
            (":message-type", "exception"),
            (":exception-type", stream_exception_for(error.kind)),
            (":content-type", "application/json"),
        ],
        &switchyard_codec::json::to_vec(&json!({ "message": error.message })),
        &mut out,
    );
    out
}

/// The IR error for an in-stream exception or error frame.
pub(crate) fn stream_error(exception: &str, message: String) -> ErrorInfo {
    let (kind, status) = EXCEPTIONS
        .iter()
        .find(|(known, _, _)| known.eq_ignore_ascii_case(exception))
        .map_or((ErrorKind::Internal, 500), |(_, status, kind)| (*kind, *status));
    let kind = refine(kind, &message);
    let message = if message.is_empty() { format!("bedrock stream failed with {exception}") } else { message };
    ErrorInfo { kind, status, message, code: Some(exception.to_owned()), param: None }
}

/// The message of an exception payload (`message` or `Message`), or the
/// payload itself when it is not JSON.
pub(crate) fn exception_message(payload: &[u8]) -> String {
    let parsed: Option<Value> = serde_json::from_slice(payload).ok();
    let from_json = parsed.as_ref().and_then(|value| {
        value.get("message").or_else(|| value.get("Message")).and_then(Value::as_str).map(str::to_owned)
    });
    from_json.unwrap_or_else(|| match parsed {
        Some(_) => String::new(),
        None => body_excerpt(payload),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(status: u16, body: &str) -> ErrorKind {
        extract_error(status, body.as_bytes()).kind
    }

    #[test]
    fn kinds_come_from_status_type_and_message() {
        assert_eq!(kind(400, r#"{"message":"Input is too long for requested model."}"#), ErrorKind::ContextLength);
        assert_eq!(kind(400, r#"{"message":"Malformed input request"}"#), ErrorKind::InvalidRequest);
        assert_eq!(
            kind(429, r#"{"message":"Too many tokens, please wait before trying again."}"#),
            ErrorKind::RateLimit
        );
        assert_eq!(
            kind(403, r#"{"Message":"The security token included in the request is invalid."}"#),
            ErrorKind::Authentication
        );
        assert_eq!(kind(403, r#"{"message":"You don't have access to the model"}"#), ErrorKind::PermissionDenied);
        assert_eq!(kind(400, r#"{"message":"x","__type":"ServiceQuotaExceededException"}"#), ErrorKind::QuotaExceeded);
        assert_eq!(kind(424, r#"{"message":"model failed"}"#), ErrorKind::Internal);
        assert_eq!(kind(503, "<html>busy</html>"), ErrorKind::Unavailable);
        assert_eq!(kind(408, r#"{"message":"timed out"}"#), ErrorKind::Timeout);
    }

    #[test]
    fn non_json_bodies_keep_their_text() {
        let raw = extract_error(502, b"  bad gateway \n");
        assert_eq!(raw.message, "bad gateway");
        assert_eq!(raw.kind, ErrorKind::Internal);
        assert_eq!(extract_error(500, b"").message, "upstream returned status 500");
    }

    #[test]
    fn vendor_type_is_named_or_derived() {
        let raw = extract_error(400, br#"{"message":"m","__type":"com.amazon.coral#ValidationException:http://x"}"#);
        assert_eq!(raw.vendor_type.as_deref(), Some("ValidationException"));
        assert_eq!(extract_error(429, b"{}").vendor_type.as_deref(), Some("ThrottlingException"));
    }

    #[test]
    fn quota_is_a_400_service_quota_exception() {
        let mut signature = ErrorInfo::new(ErrorKind::Authentication, "bad signature");
        signature.code = Some("InvalidSignatureException".into());
        assert_eq!(error_response(&signature).headers[0].1, "InvalidSignatureException");
        signature.code = Some("ThrottlingException".into());
        assert_eq!(
            error_response(&signature).headers[0].1,
            "UnrecognizedClientException",
            "a code of another kind is not kept"
        );
        let response = error_response(&ErrorInfo::new(ErrorKind::QuotaExceeded, "budget exhausted"));
        assert_eq!(response.status, 400);
        assert_eq!(response.headers[0].1, "ServiceQuotaExceededException");
    }
}
