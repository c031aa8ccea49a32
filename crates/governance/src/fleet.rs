//! Admission for a fleet: the same rules as [`Governor`](crate::admission::Governor),
//! applied by two scripts to counters every instance shares (Redis). This
//! module is their pure half: the bucket names, the arguments a chain's
//! specs become, and the reading of an admission's answer. The scripts live
//! beside the gateway's Redis client, which only sends what is built here.

use crate::admission::{BucketId, BucketSpec, Estimate, Refusal, RefusalKind};
use crate::money::NanoUsd;

/// Arguments per bucket in an admission.
pub const ADMIT_ARGS_PER_BUCKET: usize = 7;
/// Arguments per bucket in a settlement.
pub const SETTLE_ARGS_PER_BUCKET: usize = 4;

/// The largest number a script is given, either sign: every sum the
/// scripts form from such numbers stays below 2⁶³, where Lua's `%d` and
/// Redis's integers end.
pub const SCRIPT_MAX: i64 = 1 << 60;

/// The names of a bucket's counters and of its holds (the reservations in
/// flight, each under a lease) in the shared store.
pub fn bucket_keys(prefix: &str, id: &BucketId) -> [String; 2] {
    let counters = match id {
        BucketId::Key(key) => format!("{prefix}:bucket:key:{key}"),
        BucketId::Group(group) => format!("{prefix}:bucket:group:{group}"),
        BucketId::EndUser { owner, user } => format!("{prefix}:bucket:user:{owner}:{user}"),
    };
    let holds = format!("{counters}:holds");
    [counters, holds]
}

/// The name of a settlement's once-only marker.
pub fn settled_key(prefix: &str, hold: u64) -> String {
    format!("{prefix}:settled:{hold:x}")
}

/// A hold's member in a bucket's holds: its id and the cost it reserves
/// (what a reclaim gives back when its lease runs out).
pub fn hold_member(hold: u64, estimate: Estimate) -> String {
    format!("{hold:x}|{}", num(estimate.cost))
}

/// One bucket of a chain as the scripts see it: its spec (none: a bucket
/// this instance does not know, which limits nothing) and the spend to seed
/// it with if the shared store has never seen it (from the ledger).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SharedBucket {
    /// What it enforces.
    pub spec: Option<BucketSpec>,
    /// Settled spend in the current window, as this instance knows it.
    pub seed_spent: NanoUsd,
}

/// A number as a script argument, clamped to [`SCRIPT_MAX`]: whatever a
/// caller, an upstream's usage or an operator's budget says, a script never
/// meets a number it cannot add or write back as an integer.
fn num(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX).min(SCRIPT_MAX)
}

fn signed(value: i64) -> i64 {
    value.clamp(-SCRIPT_MAX, SCRIPT_MAX)
}

/// The admission script's numeric arguments (after the keys; the hold's
/// member follows them) for `buckets` at `now_ms`, the hold leased until
/// `lease_end_ms`.
pub fn admit_args(buckets: &[SharedBucket], estimate: Estimate, lease_end_ms: u64, now_ms: u64) -> Vec<i64> {
    let now_s = (now_ms / 1000) as i64;
    let mut args = Vec::with_capacity(4 + buckets.len() * ADMIT_ARGS_PER_BUCKET);
    args.extend([num(now_ms), num(estimate.cost), num(estimate.tokens), num(lease_end_ms)]);
    for bucket in buckets {
        let spec = bucket.spec.unwrap_or_default();
        let (cap, window_start, retry) = match spec.budget {
            Some(budget) => {
                let retry = budget
                    .window
                    .next_start(now_s)
                    .map_or(-1, |next| signed(next.saturating_mul(1000)).saturating_sub(num(now_ms)));
                (num(budget.cap()), signed(budget.window.start(now_s)), retry)
            }
            None => (-1, 0, -1),
        };
        args.extend([
            cap,
            window_start,
            retry,
            num(spec.limits.rpm.unwrap_or(0)),
            num(spec.limits.tpm.unwrap_or(0)),
            num(spec.limits.concurrent.unwrap_or(0)),
            num(bucket.seed_spent),
        ]);
    }
    args
}

/// The settlement script's numeric arguments (after the keys; the hold's
/// member, or `-` for a request admitted on local counters, follows them):
/// the reservation is replaced by `actual_cost` and `actual_tokens`, and
/// the settlement's marker is kept `marker_ms`. With `refund_request` (a
/// response-cache hit), the request is taken off each bucket's
/// requests-per-minute count again.
pub fn settle_args(
    buckets: &[SharedBucket],
    reserved: Estimate,
    actual_cost: NanoUsd,
    actual_tokens: u64,
    refund_request: bool,
    marker_ms: u64,
    now_ms: u64,
) -> Vec<i64> {
    let now_s = (now_ms / 1000) as i64;
    let mut args = Vec::with_capacity(6 + buckets.len() * SETTLE_ARGS_PER_BUCKET);
    args.extend([
        num(now_ms),
        num(reserved.cost),
        num(reserved.tokens),
        num(actual_cost),
        num(actual_tokens),
        num(marker_ms).max(1),
    ]);
    for bucket in buckets {
        let spec = bucket.spec.unwrap_or_default();
        let (cap, window_start) = match spec.budget {
            Some(budget) => (num(budget.cap()), signed(budget.window.start(now_s))),
            None => (-1, 0),
        };
        let refund = if refund_request { spec.limits.rpm.unwrap_or(0) } else { 0 };
        args.extend([cap, window_start, num(spec.limits.tpm.unwrap_or(0)), num(refund)]);
    }
    args
}

/// Why an admission's answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unexpected answer from the admission script: {0:?}")]
pub struct BadAnswer(pub Vec<i64>);

/// Reads the admission script's answer for `chain`: `Ok(None)` admitted,
/// `Ok(Some(refusal))` refused by the named bucket.
pub fn read_admit(answer: &[i64], chain: &[BucketId]) -> Result<Option<Refusal>, BadAnswer> {
    let bad = || BadAnswer(answer.to_vec());
    match answer {
        [0] => Ok(None),
        [why, index, retry] => {
            let bucket = usize::try_from(*index).ok().and_then(|i| i.checked_sub(1)).and_then(|i| chain.get(i));
            let bucket = bucket.ok_or_else(bad)?.clone();
            let retry_in_ms = u64::try_from(*retry).ok();
            let kind = match why {
                1 => RefusalKind::Budget { retry_in_ms },
                2 => RefusalKind::Requests { retry_in_ms: retry_in_ms.unwrap_or(1000) },
                3 => RefusalKind::Tokens { retry_in_ms },
                4 => RefusalKind::Concurrency,
                _ => return Err(bad()),
            };
            Ok(Some(Refusal { kind, bucket }))
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::admission::{Budget, Limits};
    use crate::money::from_usd;
    use crate::window::Window;

    const NOW: u64 = 1_796_067_065_000;

    #[test]
    fn a_chain_becomes_one_argument_row_per_bucket() {
        let key = SharedBucket {
            spec: Some(BucketSpec {
                budget: Some(Budget { usd: 2.0, window: Window::Day }),
                limits: Limits { rpm: Some(60), tpm: Some(1000), concurrent: Some(3) },
            }),
            seed_spent: 7,
        };
        let unknown = SharedBucket { spec: None, seed_spent: 0 };
        let args = admit_args(&[key, unknown], Estimate { tokens: 10, cost: 20 }, NOW + 60_000, NOW);
        assert_eq!(args.len(), 4 + 2 * ADMIT_ARGS_PER_BUCKET);
        assert_eq!(&args[..4], [1_796_067_065_000, 20, 10, 1_796_067_125_000]);
        let day = Window::Day.start((NOW / 1000) as i64);
        let next = Window::Day.next_start((NOW / 1000) as i64).unwrap();
        let cap = i64::try_from(from_usd(2.0)).unwrap();
        assert_eq!(&args[4..11], [cap, day, next * 1000 - NOW as i64, 60, 1000, 3, 7]);
        assert_eq!(&args[11..], [-1, 0, -1, 0, 0, 0, 0]);
        let settle = settle_args(&[key], Estimate { tokens: 10, cost: 20 }, 5, 4, false, 3_600_000, NOW);
        assert_eq!(settle, [1_796_067_065_000, 20, 10, 5, 4, 3_600_000, cap, day, 1000, 0]);
        let hit = settle_args(&[key], Estimate { tokens: 10, cost: 20 }, 0, 0, true, 3_600_000, NOW);
        assert_eq!(hit[6..], [cap, day, 1000, 60], "a hit gives its request back to the rpm limit");
        assert_eq!(hold_member(0xab, Estimate { tokens: 10, cost: 20 }), "ab|20");
        assert_eq!(bucket_keys("sy", &BucketId::Key(Arc::from("k1")))[1], "sy:bucket:key:k1:holds");
    }

    #[test]
    fn no_number_reaches_a_script_unbounded() {
        // Whatever a caller, an upstream or an operator says, every argument
        // stays an integer a script can add and write back.
        let huge = SharedBucket {
            spec: Some(BucketSpec {
                budget: Some(Budget { usd: 1e300, window: Window::Total }),
                limits: Limits { rpm: Some(u64::MAX), tpm: Some(u64::MAX), concurrent: Some(u64::MAX) },
            }),
            seed_spent: u64::MAX,
        };
        let estimate = Estimate { tokens: u64::MAX, cost: u64::MAX };
        for args in [
            admit_args(&[huge, huge], estimate, u64::MAX, u64::MAX),
            settle_args(&[huge], estimate, u64::MAX, u64::MAX, true, u64::MAX, u64::MAX),
        ] {
            assert!(args.iter().all(|n| (-SCRIPT_MAX..=SCRIPT_MAX).contains(n)), "{args:?}");
        }
    }

    #[test]
    fn an_answer_names_the_refusing_bucket() {
        let chain = [BucketId::Key(Arc::from("k")), BucketId::Group(Arc::from("team"))];
        assert_eq!(read_admit(&[0], &chain), Ok(None));
        let refused = read_admit(&[1, 2, 5000], &chain).unwrap().unwrap();
        assert_eq!(refused.bucket, chain[1]);
        assert_eq!(refused.kind, RefusalKind::Budget { retry_in_ms: Some(5000) });
        assert_eq!(read_admit(&[3, 1, -1], &chain).unwrap().unwrap().kind, RefusalKind::Tokens { retry_in_ms: None });
        assert_eq!(read_admit(&[4, 1, -1], &chain).unwrap().unwrap().kind, RefusalKind::Concurrency);
        assert!(read_admit(&[1, 3, 0], &chain).is_err(), "no third bucket");
        assert!(read_admit(&[9, 1, 0], &chain).is_err());
        assert!(read_admit(&[], &chain).is_err());
    }
}
