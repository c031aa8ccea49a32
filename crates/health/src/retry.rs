//! Retries on the same lane (`failover.retries`): which failures earn one,
//! and how long to wait first. A transient failure (a 5xx, an overload, a
//! connection lost before headers, a 429) is worth a second try on the lane
//! that has the caller's prompt cache; a silent lane (a timeout) is not,
//! since waiting again would spend the caller's deadline on the same
//! silence, and a fault of the request or the account never is.

use std::time::Duration;

use crate::StatusClass;

/// First backoff; each retry doubles it.
pub const BASE_BACKOFF: Duration = Duration::from_millis(100);
/// Backoff cap (before an upstream's `Retry-After`, which wins).
pub const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Whether a failure of `class` may be retried on the lane that gave it.
pub fn retryable(class: StatusClass) -> bool {
    matches!(
        class,
        StatusClass::ServerError | StatusClass::Overloaded | StatusClass::Network | StatusClass::RateLimited
    )
}

/// The wait before retry number `retry` (0 for the first): exponential from
/// [`BASE_BACKOFF`] to [`MAX_BACKOFF`], jittered into its upper half
/// (`jitter` in `[0, 1)`), and never shorter than the upstream's
/// `Retry-After`.
pub fn backoff(retry: u32, retry_after: Option<Duration>, jitter: f64) -> Duration {
    let exponential = BASE_BACKOFF.saturating_mul(1 << retry.min(16)).min(MAX_BACKOFF);
    let jittered = exponential.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0));
    retry_after.map_or(jittered, |floor| jittered.max(floor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_transient_failures_are_retried() {
        let retried: Vec<_> = StatusClass::ALL.into_iter().filter(|c| retryable(*c)).collect();
        assert_eq!(
            retried,
            [StatusClass::RateLimited, StatusClass::Overloaded, StatusClass::ServerError, StatusClass::Network]
        );
        assert!(!retryable(StatusClass::Timeout), "a silent lane is never retried in place");
    }

    #[test]
    fn backoff_doubles_to_its_cap_and_retry_after_is_a_floor() {
        let top: Vec<_> = (0..7).map(|r| backoff(r, None, 1.0).as_millis()).collect();
        assert_eq!(top, [100, 200, 400, 800, 1600, 2000, 2000]);
        assert_eq!(backoff(0, None, 0.0), Duration::from_millis(50));
        assert_eq!(backoff(0, Some(Duration::from_secs(3)), 0.5), Duration::from_secs(3));
        assert_eq!(backoff(u32::MAX, None, 2.0), MAX_BACKOFF);
    }
}
