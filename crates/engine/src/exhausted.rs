//! The answer when no candidate served, with the honest status for why: an
//! upstream's rate limit first (the caller should back off), then the last
//! upstream error, then the failover deadline, then lanes resting or
//! cooling down (with `Retry-After` at the earliest recovery), then lanes
//! at their concurrency cap.

use std::time::Duration;

use http::{HeaderValue, Response};
use switchyard_health::Unavailable;
use switchyard_ir::{ErrorInfo, ErrorKind};
use switchyard_state::call::Call;
use switchyard_state::Gateway;

use crate::disposition::{failure_response, Failure};
use crate::render::{error_response, ResponseBody};

/// What the failed tries add up to, for the exhaustion answer.
#[derive(Default)]
pub(crate) struct Exhaustion {
    pub(crate) last: Option<Failure>,
    pub(crate) rate_limited: Option<Failure>,
    /// Earliest recovery of a candidate skipped because it is down for faults.
    pub(crate) cooling: Option<Duration>,
    /// Earliest end of rest of a candidate skipped after a rate limit.
    pub(crate) resting: Option<Duration>,
    pub(crate) at_cap: bool,
    /// The pool's failover deadline passed.
    pub(crate) deadline: bool,
}

impl Exhaustion {
    pub(crate) fn skipped(&mut self, retry_in: Duration, cause: Unavailable) {
        let earliest = |current: Option<Duration>| Some(current.map_or(retry_in, |c| c.min(retry_in)));
        match cause {
            Unavailable::RateLimited => self.resting = earliest(self.resting),
            Unavailable::Cooling | Unavailable::TrialInFlight => self.cooling = earliest(self.cooling),
        }
    }
}

/// The answer when no candidate served: the honest status for why.
pub(crate) fn exhausted(gateway: &Gateway, call: &Call, exhaustion: Exhaustion) -> Response<ResponseBody> {
    // A rate limit is the most useful thing to tell: the caller should back off.
    if let Some(failure) = exhaustion.rate_limited {
        return failure_response(gateway, call, failure);
    }
    if let Some(failure) = exhaustion.last {
        return failure_response(gateway, call, failure);
    }
    if exhaustion.deadline {
        let info = ErrorInfo::new(
            ErrorKind::Timeout,
            format!("no lane of `{}` answered within the pool's failover timeout", call.name),
        );
        return error_response(gateway, call, &info);
    }
    // Every lane left is resting after rate limits: that is a rate limit for
    // the caller too (SDKs back off on a 429; a 503 reads as an outage).
    // A lane down for faults makes it a 503.
    let unavailable = match (exhaustion.cooling, exhaustion.resting) {
        (None, Some(resting)) => Some((
            ErrorKind::RateLimit,
            resting,
            format!("every lane of `{}` is rate-limited upstream; retry in {}s", call.name, whole_seconds(resting)),
        )),
        (Some(cooling), resting) => {
            let wait = resting.map_or(cooling, |r| r.min(cooling));
            Some((
                ErrorKind::Unavailable,
                wait,
                format!(
                    "every lane of `{}` is cooling down after failures; retry in {}s",
                    call.name,
                    whole_seconds(wait)
                ),
            ))
        }
        (None, None) => None,
    };
    if let Some((kind, wait, message)) = unavailable {
        let mut response = error_response(gateway, call, &ErrorInfo::new(kind, message));
        if let Ok(value) = HeaderValue::try_from(whole_seconds(wait).to_string()) {
            response.headers_mut().insert(http::header::RETRY_AFTER, value);
        }
        return response;
    }
    let message = if exhaustion.at_cap {
        format!("every lane of `{}` is at its concurrency limit", call.name)
    } else {
        format!("no lane of `{}` could take the request", call.name)
    };
    let mut response = error_response(gateway, call, &ErrorInfo::new(ErrorKind::Unavailable, message));
    response.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// A wait as the whole seconds a `Retry-After` carries, at least one.
pub(crate) fn whole_seconds(wait: Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
}
