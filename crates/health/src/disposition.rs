//! Two-stage failure disposition. Stage 1 (the protocol codec's
//! `extract_error`, then [`normalize`] against the provider's `error_map`)
//! turns an upstream failure into a [`StatusClass`]; stage 2 ([`classify`])
//! turns the class into a [`Disposition`], and [`effects`] derives what
//! happens to the lane and to the request. The core property: a healthy
//! lane is never penalised for a caller's bad request.
//!
//! Matches over classes and dispositions are exhaustive on purpose: a new
//! class must be placed by hand, never swept into a catch-all.

use switchyard_ir::ErrorKind;

/// What kind of failure happened, independent of the vendor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusClass {
    /// The request was invalid (400, 404, 413, 422).
    BadRequest,
    /// The prompt does not fit the lane's context window.
    ContextLength,
    /// The lane's credentials were refused (401, 403).
    Auth,
    /// The lane's account is out of credit or quota.
    Billing,
    /// The upstream rate-limited us (429).
    RateLimited,
    /// The upstream is overloaded or unavailable (503, 529).
    Overloaded,
    /// Any other upstream server error (5xx).
    ServerError,
    /// No answer in time (408, 504, header or idle timeout).
    Timeout,
    /// The connection failed or broke.
    Network,
}

impl StatusClass {
    /// Every class, in declaration order (`ALL[c.index()] == c`).
    pub const ALL: [StatusClass; 9] = [
        StatusClass::BadRequest,
        StatusClass::ContextLength,
        StatusClass::Auth,
        StatusClass::Billing,
        StatusClass::RateLimited,
        StatusClass::Overloaded,
        StatusClass::ServerError,
        StatusClass::Timeout,
        StatusClass::Network,
    ];

    /// The class's position in [`StatusClass::ALL`] (a dense index for counters).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The config name used in `error_map`.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusClass::BadRequest => "bad_request",
            StatusClass::ContextLength => "context_length",
            StatusClass::Auth => "auth",
            StatusClass::Billing => "billing",
            StatusClass::RateLimited => "rate_limited",
            StatusClass::Overloaded => "overloaded",
            StatusClass::ServerError => "server_error",
            StatusClass::Timeout => "timeout",
            StatusClass::Network => "network",
        }
    }

    /// Parses a config name.
    pub fn from_name(name: &str) -> Option<StatusClass> {
        StatusClass::ALL.into_iter().find(|class| class.as_str() == name)
    }
}

/// A provider's overrides: vendor error type or code → class.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorMap {
    entries: Vec<(String, StatusClass)>,
}

impl ErrorMap {
    /// A map from `(vendor type or code, class)` pairs.
    pub fn new(entries: Vec<(String, StatusClass)>) -> ErrorMap {
        ErrorMap { entries }
    }

    fn get(&self, key: &str) -> Option<StatusClass> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, class)| *class)
    }
}

/// Stage 1b: the class of an upstream error. The provider's `error_map`
/// wins (finer vendor code first, then type); otherwise the codec's reading
/// of the vendor error decides, with the HTTP status behind it.
pub fn normalize(
    status: u16,
    kind: ErrorKind,
    vendor_type: Option<&str>,
    vendor_code: Option<&str>,
    map: &ErrorMap,
) -> StatusClass {
    if let Some(class) = vendor_code.and_then(|code| map.get(code)).or_else(|| vendor_type.and_then(|t| map.get(t))) {
        return class;
    }
    match kind {
        ErrorKind::ContextLength => StatusClass::ContextLength,
        ErrorKind::Authentication | ErrorKind::PermissionDenied => StatusClass::Auth,
        ErrorKind::QuotaExceeded => StatusClass::Billing,
        ErrorKind::RateLimit => StatusClass::RateLimited,
        ErrorKind::Overloaded | ErrorKind::Unavailable => StatusClass::Overloaded,
        ErrorKind::Timeout => StatusClass::Timeout,
        ErrorKind::Internal => StatusClass::ServerError,
        ErrorKind::InvalidRequest | ErrorKind::NotFound | ErrorKind::RequestTooLarge => {
            // A vendor that calls a 5xx "invalid" is still failing server-side.
            if status >= 500 {
                StatusClass::ServerError
            } else {
                StatusClass::BadRequest
            }
        }
    }
}

/// Who is at fault, and so what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Disposition {
    /// The caller's request is wrong: relay it, leave the lane alone.
    ClientFault,
    /// The upstream is failing for now: count it against the lane, fail over.
    TransientUpstream,
    /// The lane cannot serve until an operator acts (credentials, billing).
    HardDown,
    /// The lane is healthy but too small for this prompt: try a larger one.
    ContextLength,
    /// The upstream is limiting our rate: the lane is healthy but rests for
    /// its `Retry-After`, and a rate limit never counts toward a trip.
    RateLimited,
}

/// Stage 2: the disposition of a class.
pub fn classify(class: StatusClass) -> Disposition {
    match class {
        StatusClass::BadRequest => Disposition::ClientFault,
        StatusClass::ContextLength => Disposition::ContextLength,
        StatusClass::Auth | StatusClass::Billing => Disposition::HardDown,
        StatusClass::RateLimited => Disposition::RateLimited,
        StatusClass::Overloaded | StatusClass::ServerError | StatusClass::Timeout | StatusClass::Network => {
            Disposition::TransientUpstream
        }
    }
}

/// What a failure does to the lane's breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneEffect {
    /// Nothing: the lane is healthy.
    None,
    /// A failure for the breaker to count.
    Failure,
    /// Trip at once with the long cooldown.
    Trip,
    /// Rest the lane for the upstream's `Retry-After` (not a failure).
    Rest,
}

/// What a failure does to the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestEffect {
    /// Give the caller the upstream's error.
    Relay,
    /// Try the next candidate.
    Failover,
    /// Try the next candidate whose context window is larger.
    FailoverLarger,
}

/// The lane and request effects of a failure. With `caller_credentials`
/// (the caller's own key went upstream) an auth, quota or rate-limit failure
/// is the caller's own: relayed, and it says nothing about the lane.
pub fn effects(class: StatusClass, caller_credentials: bool) -> (LaneEffect, RequestEffect) {
    match classify(class) {
        Disposition::ClientFault => (LaneEffect::None, RequestEffect::Relay),
        Disposition::ContextLength => (LaneEffect::None, RequestEffect::FailoverLarger),
        Disposition::TransientUpstream => (LaneEffect::Failure, RequestEffect::Failover),
        Disposition::RateLimited if caller_credentials => (LaneEffect::None, RequestEffect::Relay),
        Disposition::RateLimited => (LaneEffect::Rest, RequestEffect::Failover),
        Disposition::HardDown if caller_credentials => (LaneEffect::None, RequestEffect::Relay),
        Disposition::HardDown => match class {
            // Our own key or account failing is the lane's problem, not the
            // caller's: take the lane out and let another one answer.
            StatusClass::Auth | StatusClass::Billing => (LaneEffect::Trip, RequestEffect::Failover),
            StatusClass::BadRequest
            | StatusClass::ContextLength
            | StatusClass::RateLimited
            | StatusClass::Overloaded
            | StatusClass::ServerError
            | StatusClass::Timeout
            | StatusClass::Network => (LaneEffect::Failure, RequestEffect::Failover),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_is_listed_once_and_named_back() {
        for (index, class) in StatusClass::ALL.into_iter().enumerate() {
            assert_eq!(class.index(), index);
            assert_eq!(StatusClass::from_name(class.as_str()), Some(class));
        }
    }

    #[test]
    fn every_class_has_its_disposition_and_effect() {
        let table = [
            (StatusClass::BadRequest, Disposition::ClientFault, LaneEffect::None, RequestEffect::Relay),
            (StatusClass::ContextLength, Disposition::ContextLength, LaneEffect::None, RequestEffect::FailoverLarger),
            (StatusClass::Auth, Disposition::HardDown, LaneEffect::Trip, RequestEffect::Failover),
            (StatusClass::Billing, Disposition::HardDown, LaneEffect::Trip, RequestEffect::Failover),
            (StatusClass::RateLimited, Disposition::RateLimited, LaneEffect::Rest, RequestEffect::Failover),
            (StatusClass::Overloaded, Disposition::TransientUpstream, LaneEffect::Failure, RequestEffect::Failover),
            (StatusClass::ServerError, Disposition::TransientUpstream, LaneEffect::Failure, RequestEffect::Failover),
            (StatusClass::Timeout, Disposition::TransientUpstream, LaneEffect::Failure, RequestEffect::Failover),
            (StatusClass::Network, Disposition::TransientUpstream, LaneEffect::Failure, RequestEffect::Failover),
        ];
        for (class, disposition, lane, request) in table {
            assert_eq!(classify(class), disposition, "{class:?}");
            assert_eq!(effects(class, false), (lane, request), "{class:?}");
            assert_eq!(StatusClass::from_name(class.as_str()), Some(class));
        }
    }

    #[test]
    fn caller_credentials_make_auth_quota_and_rate_failures_the_callers() {
        for class in [StatusClass::Auth, StatusClass::Billing, StatusClass::RateLimited] {
            assert_eq!(effects(class, true), (LaneEffect::None, RequestEffect::Relay), "{class:?}");
        }
        // A server fault is the lane's whoever's key went upstream.
        assert_eq!(effects(StatusClass::ServerError, true), (LaneEffect::Failure, RequestEffect::Failover));
    }

    #[test]
    fn normalisation_prefers_the_error_map_then_the_codec_then_status() {
        let map = ErrorMap::new(vec![
            ("insufficient_quota".into(), StatusClass::Billing),
            ("weird_error".into(), StatusClass::Overloaded),
        ]);
        assert_eq!(
            normalize(429, ErrorKind::RateLimit, Some("rate_limit_error"), Some("insufficient_quota"), &map),
            StatusClass::Billing
        );
        assert_eq!(normalize(400, ErrorKind::InvalidRequest, Some("weird_error"), None, &map), StatusClass::Overloaded);
        assert_eq!(normalize(400, ErrorKind::InvalidRequest, None, None, &map), StatusClass::BadRequest);
        assert_eq!(normalize(500, ErrorKind::InvalidRequest, None, None, &map), StatusClass::ServerError);
        assert_eq!(normalize(400, ErrorKind::ContextLength, None, None, &map), StatusClass::ContextLength);
        assert_eq!(normalize(529, ErrorKind::Overloaded, None, None, &map), StatusClass::Overloaded);
        assert_eq!(normalize(403, ErrorKind::PermissionDenied, None, None, &map), StatusClass::Auth);
    }
}
