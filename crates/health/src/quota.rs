//! What an upstream's rate-limit headers say on a success, read before it
//! ever answers 429: the least share of its limits left, and, when one is
//! spent, how long until it resets. Each vendor has its own parser; a
//! header that is missing or unreadable means unknown, never zero.
//!
//! - OpenAI (and the servers that copy it): `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`,
//!   the reset as a Go duration (`1s`, `6m0s`, `17ms`).
//! - Anthropic: `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`,
//!   the reset as an RFC 3339 time.
//! - `retry-after` on a success: the upstream asks for a pause outright.

use std::time::{Duration, SystemTime};

/// Below this share left, a lane is ranked after every lane with more.
pub const NEAR_ZERO: f64 = 0.05;

/// Longest rest a header can impose (a day): a reset far away is a
/// misreading more likely than a plan.
pub const MAX_REST: Duration = Duration::from_secs(86_400);

/// What the headers of one answer say.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Quota {
    /// The least share left over the limits the answer reported.
    pub share: Option<f64>,
    /// A limit is spent (or the upstream asked for a pause): rest this long.
    pub rest: Option<Duration>,
    /// How long `share` holds: until the reset of the limit it came from
    /// (unread: [`DEFAULT_FRESH`]). After it the share is unknown again.
    pub fresh_for: Option<Duration>,
}

/// How long a share holds when its limit's reset cannot be read.
pub const DEFAULT_FRESH: Duration = Duration::from_secs(60);

/// OpenAI's (limit, remaining, reset) header names.
const OPENAI: [(&str, &str, &str); 2] = [
    ("x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
    ("x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
];

/// Anthropic's (limit, remaining, reset) header names.
const ANTHROPIC: [(&str, &str, &str); 4] = [
    (
        "anthropic-ratelimit-requests-limit",
        "anthropic-ratelimit-requests-remaining",
        "anthropic-ratelimit-requests-reset",
    ),
    ("anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"),
    (
        "anthropic-ratelimit-input-tokens-limit",
        "anthropic-ratelimit-input-tokens-remaining",
        "anthropic-ratelimit-input-tokens-reset",
    ),
    (
        "anthropic-ratelimit-output-tokens-limit",
        "anthropic-ratelimit-output-tokens-remaining",
        "anthropic-ratelimit-output-tokens-reset",
    ),
];

/// Whether a header name is one [`read`] looks at: a caller scans an
/// answer's names with this first, and reads nothing when none is there.
pub fn is_quota_header(name: &str) -> bool {
    name.starts_with("x-ratelimit-") || name.starts_with("anthropic-ratelimit-") || name == "retry-after"
}

/// Reads the quota from an answer's headers (`get` gives a header's value
/// by lower-case name), at wall-clock time `now`.
pub fn read<'a>(get: impl Fn(&str) -> Option<&'a str>, now: SystemTime) -> Quota {
    let mut quota = Quota::default();
    let number = |name: &str| get(name).and_then(|v| v.trim().parse::<f64>().ok()).filter(|n| n.is_finite());
    let mut limit = |limit: &str, remaining: &str, reset: &str, parse: &dyn Fn(&str) -> Option<Duration>| {
        let (Some(limit), Some(remaining)) = (number(limit), number(remaining)) else { return };
        if limit <= 0.0 {
            return;
        }
        let share = (remaining / limit).clamp(0.0, 1.0);
        let resets_in = get(reset).and_then(parse);
        if quota.share.is_none_or(|least| share < least) {
            quota.share = Some(share);
            quota.fresh_for = Some(resets_in.unwrap_or(DEFAULT_FRESH).min(MAX_REST));
        }
        if remaining < 1.0 {
            if let Some(wait) = resets_in {
                quota.rest = Some(quota.rest.map_or(wait, |r: Duration| r.max(wait)).min(MAX_REST));
            }
        }
    };
    for (l, r, reset) in OPENAI {
        limit(l, r, reset, &go_duration);
    }
    for (l, r, reset) in ANTHROPIC {
        limit(l, r, reset, &|text| until(text, now));
    }
    if let Some(seconds) = number("retry-after").filter(|s| *s > 0.0) {
        let wait = Duration::from_secs_f64(seconds.min(MAX_REST.as_secs_f64()));
        quota.rest = Some(quota.rest.map_or(wait, |r| r.max(wait)));
    }
    quota
}

/// A Go duration as OpenAI writes it: `1s`, `6m0s`, `1h2m3.5s`, `17ms`.
pub fn go_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = 0.0_f64;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit..];
        total += value * scale;
    }
    (total.is_finite() && total >= 0.0).then(|| Duration::from_secs_f64(total.min(MAX_REST.as_secs_f64())))
}

/// The time from `now` until an RFC 3339 instant (zero once past).
fn until(text: &str, now: SystemTime) -> Option<Duration> {
    let at = time::OffsetDateTime::parse(text.trim(), &time::format_description::well_known::Rfc3339).ok()?;
    let at = SystemTime::from(at);
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(headers: &[(&str, &str)], now: SystemTime) -> Quota {
        read(|name| headers.iter().find(|(n, _)| *n == name).map(|(_, v)| *v), now)
    }

    #[test]
    fn go_durations_as_openai_writes_them() {
        assert_eq!(go_duration("1s"), Some(Duration::from_secs(1)));
        assert_eq!(go_duration("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(go_duration("17ms"), Some(Duration::from_millis(17)));
        assert_eq!(go_duration("1h2m3.5s"), Some(Duration::from_secs_f64(3723.5)));
        for bad in ["", "s", "5", "5x", "-1s", "1s2"] {
            assert_eq!(go_duration(bad), None, "{bad}");
        }
        assert_eq!(go_duration("100000h"), Some(MAX_REST));
    }

    #[test]
    fn openai_headers_give_the_least_share_and_the_reset_of_a_spent_limit() {
        let now = SystemTime::UNIX_EPOCH;
        let q = quota(
            &[
                ("x-ratelimit-limit-requests", "100"),
                ("x-ratelimit-remaining-requests", "40"),
                ("x-ratelimit-limit-tokens", "1000"),
                ("x-ratelimit-remaining-tokens", "100"),
                ("x-ratelimit-reset-tokens", "6m0s"),
            ],
            now,
        );
        assert_eq!(q, Quota { share: Some(0.1), rest: None, fresh_for: Some(Duration::from_secs(360)) });
        let spent = quota(
            &[
                ("x-ratelimit-limit-requests", "100"),
                ("x-ratelimit-remaining-requests", "0"),
                ("x-ratelimit-reset-requests", "2s"),
            ],
            now,
        );
        assert_eq!(
            spent,
            Quota { share: Some(0.0), rest: Some(Duration::from_secs(2)), fresh_for: Some(Duration::from_secs(2)) }
        );
    }

    #[test]
    fn anthropic_resets_are_instants() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_750_000);
        let q = quota(
            &[
                ("anthropic-ratelimit-requests-limit", "50"),
                ("anthropic-ratelimit-requests-remaining", "0"),
                ("anthropic-ratelimit-requests-reset", "2025-12-03T08:20:30Z"),
            ],
            now,
        );
        assert_eq!(q.share, Some(0.0));
        assert_eq!(q.rest, Some(Duration::from_secs(30)));
    }

    #[test]
    fn unknown_means_unknown() {
        let now = SystemTime::UNIX_EPOCH;
        assert_eq!(quota(&[], now), Quota::default());
        // A limit without its remaining, garbage, or a zero limit say nothing.
        let q = quota(
            &[
                ("x-ratelimit-limit-requests", "100"),
                ("x-ratelimit-limit-tokens", "0"),
                ("x-ratelimit-remaining-tokens", "0"),
                ("anthropic-ratelimit-tokens-limit", "lots"),
                ("anthropic-ratelimit-tokens-remaining", "NaN"),
            ],
            now,
        );
        assert_eq!(q, Quota::default());
        // A spent limit whose reset cannot be read: ranked last, no rest.
        let q = quota(&[("x-ratelimit-limit-requests", "10"), ("x-ratelimit-remaining-requests", "0")], now);
        assert_eq!(q, Quota { share: Some(0.0), rest: None, fresh_for: Some(DEFAULT_FRESH) });
    }

    #[test]
    fn retry_after_on_a_success_asks_for_a_pause() {
        let q = quota(&[("retry-after", "3")], SystemTime::UNIX_EPOCH);
        assert_eq!(q.rest, Some(Duration::from_secs(3)));
        assert!(is_quota_header("retry-after") && is_quota_header("x-ratelimit-limit-tokens"));
        assert!(!is_quota_header("content-type"));
    }
}
