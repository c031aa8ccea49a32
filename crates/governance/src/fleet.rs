//! Admission for a fleet: the same rules as [`Governor`](crate::admission::Governor),
//! applied by two scripts to counters every instance shares (Redis). This
//! module is their pure half: the bucket names, the arguments a chain's
//! specs become, and the reading of an admission's answer. The scripts live
//! beside the gateway's Redis client, which only sends what is built here.

use percent_encoding::{utf8_percent_encode, AsciiSet, PercentEncode, NON_ALPHANUMERIC};

use crate::admission::{BucketId, Estimate, Governor, Per, Refusal, RefusalKind};
use crate::money::NanoUsd;
use crate::spec::{Metric, Quota, Trigger};
use crate::window::Window;

/// Arguments per bucket in an admission, before its quotas.
pub const ADMIT_ARGS_PER_BUCKET: usize = 12;
/// Arguments per quota of a bucket in an admission.
pub const ADMIT_ARGS_PER_QUOTA: usize = 5;
/// Arguments per bucket in a settlement, before its quotas.
pub const SETTLE_ARGS_PER_BUCKET: usize = 8;
/// Arguments per quota of a bucket in a settlement.
pub const SETTLE_ARGS_PER_QUOTA: usize = 3;

/// The largest number a script is given, either sign: every sum the
/// scripts form from such numbers stays below 2⁶³, where Lua's `%d` and
/// Redis's integers end.
pub const SCRIPT_MAX: i64 = 1 << 60;

/// What a part of a bucket's name keeps as it is (RFC 3986's unreserved
/// characters); anything else, `:` and `%` among them, is percent-encoded,
/// so an id a caller chose (an end user's) is one part of the name, never
/// a separator and another name's tail.
const NAME_PART: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// `text` as one part of a bucket's name.
fn part(text: &str) -> PercentEncode<'_> {
    utf8_percent_encode(text, NAME_PART)
}

/// The names of a bucket's counters (`<prefix>:bucket:…`, a hash) and of
/// its holds (`<prefix>:holds:…`, the reservations in flight, each under a
/// lease, a sorted set) in the shared store. Every id in them is encoded
/// ([`NAME_PART`]) and the two kinds have prefixes of their own, so no
/// bucket's name is ever another's, whatever an end user is called.
pub fn bucket_keys(prefix: &str, id: &BucketId) -> [String; 2] {
    let name = match id {
        BucketId::Key(key) => format!("key:{}", part(key)),
        BucketId::Group(group) => format!("group:{}", part(group)),
        BucketId::EndUser { owner, user } => {
            // The owner is `key:<id>` or `group:<name>`.
            let (kind, owner) = owner.split_once(':').unwrap_or(("", owner));
            format!("user:{}:{}:{}", part(kind), part(owner), part(user))
        }
        BucketId::Scoped { owner, name } => {
            let (kind, owner) = owner.split_once(':').unwrap_or(("", owner));
            format!("scope:{}:{}:{}", part(kind), part(owner), part(name))
        }
    };
    [format!("{prefix}:bucket:{name}"), format!("{prefix}:holds:{name}")]
}

/// The name of a settlement's once-only marker.
pub fn settled_key(prefix: &str, hold: u64) -> String {
    format!("{prefix}:settled:{hold:x}")
}

/// A hold's member in a bucket's holds: its id, the tokens and the cost it
/// reserves (what a reclaim gives back when its lease runs out; the cost
/// last, where scripts before quotas read it).
pub fn hold_member(hold: u64, estimate: Estimate) -> String {
    format!("{hold:x}|{}|{}", num(estimate.tokens), num(estimate.cost))
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

/// A quota's number in a script's arguments and answers.
fn quota_code(quota: Quota) -> i64 {
    let metric = match quota.metric {
        Metric::Requests => 0,
        Metric::Tokens => 1,
        Metric::Usd => 2,
    };
    let window = match quota.window {
        Window::Hour => 0,
        Window::Day => 1,
        _ => 2,
    };
    1 + metric * 3 + window
}

fn quota_of_code(code: i64, cap: i64) -> Option<Quota> {
    let code = code.checked_sub(1).filter(|c| (0..9).contains(c))?;
    let metric = [Metric::Requests, Metric::Tokens, Metric::Usd][(code / 3) as usize];
    let window = [Window::Hour, Window::Day, Window::Month][(code % 3) as usize];
    Some(Quota { metric, window, cap: u64::try_from(cap).ok()? })
}

/// Milliseconds from `now_ms` to the window after the one holding it (-1:
/// never), bounded.
fn retry(window: Window, now_ms: u64) -> i64 {
    window
        .next_start((now_ms / 1000) as i64)
        .map_or(-1, |next| signed(next.saturating_mul(1000)).saturating_sub(num(now_ms)))
}

impl Governor {
    /// The admission script's numeric arguments (after the keys; the
    /// hold's member follows them) for `chain` at `now_ms`, the hold leased
    /// until `lease_end_ms`, read from this governor: each bucket's spec,
    /// and the spend and quota use to seed a bucket Redis has never seen
    /// with (`seed`). With `offer_downgrade`, a bucket whose budget
    /// downgrades says from what spend on, and why (see
    /// [`Governor::admit_with`]).
    pub fn fleet_admit_args(
        &mut self,
        chain: &[BucketId],
        estimate: Estimate,
        lease_end_ms: u64,
        now_ms: u64,
        offer_downgrade: bool,
    ) -> Vec<i64> {
        let now_s = (now_ms / 1000) as i64;
        let mut args = Vec::with_capacity(4 + chain.len() * ADMIT_ARGS_PER_BUCKET);
        args.extend([num(now_ms), num(estimate.cost), num(estimate.tokens), num(lease_end_ms)]);
        for id in chain {
            let Some(state) = self.buckets.get_mut(id) else {
                // A bucket this instance does not know limits nothing.
                args.extend([-1, 0, -1, 0, 0, 0, 0, 0, 0, -1, 0, 0]);
                continue;
            };
            state.roll(now_ms);
            let limits = &state.spec.limits;
            let (cap, window_start, retry_ms) = match &state.spec.budget {
                Some(budget) => (num(budget.cap()), signed(budget.window.start(now_s)), retry(budget.window, now_ms)),
                None => (-1, 0, -1),
            };
            // From what spend on a downgrade is offered (-1: none), and why
            // before the budget is spent.
            let (downgrade_from, soft) = match state.spec.budget.as_ref().filter(|_| offer_downgrade) {
                Some(budget) if budget.on_exhaust.as_ref().is_some_and(|d| d.forecast) && state.short => {
                    (0, trigger_code(Some(Trigger::Forecast)))
                }
                Some(budget) if budget.on_exhaust.is_some() => match budget.downgrade_from() {
                    Some(from) => (num(from), trigger_code(Some(Trigger::Threshold))),
                    None => (SCRIPT_MAX, 0),
                },
                _ => (-1, 0),
            };
            args.extend([
                cap,
                window_start,
                retry_ms,
                num(limits.rpm.unwrap_or(0)),
                num(limits.tpm.unwrap_or(0)),
                num(limits.concurrent.unwrap_or(0)),
                num(state.spent),
                num(limits.rps.unwrap_or(0)),
                num(limits.tps.unwrap_or(0)),
                downgrade_from,
                soft,
                state.quotas.len() as i64,
            ]);
            for quota in &mut state.quotas {
                quota.roll(now_ms);
                args.extend([
                    quota_code(quota.quota),
                    num(quota.quota.cap),
                    signed(quota.window_start),
                    retry(quota.quota.window, now_ms),
                    num(quota.used),
                ]);
            }
        }
        args
    }

    /// The settlement script's numeric arguments (after the keys; the
    /// hold's member, or `-` for a request admitted on local counters,
    /// follows them): the reservation is replaced by `actual_cost` and
    /// `actual_tokens` (bounded as a local settlement bounds them: 2⁴⁶
    /// nano-USD, 2⁴¹ tokens), and the settlement's marker is kept
    /// `marker_ms`. With `refund_request` (a response-cache hit), the
    /// request is taken off each bucket's request limits again. A bucket
    /// (or quota) Redis does not know is seeded with what this governor
    /// knows first (read before this settlement counts here).
    #[expect(clippy::too_many_arguments, reason = "a settlement's every figure")]
    pub fn fleet_settle_args(
        &mut self,
        chain: &[BucketId],
        reserved: Estimate,
        actual_cost: NanoUsd,
        actual_tokens: u64,
        refund_request: bool,
        marker_ms: u64,
        now_ms: u64,
    ) -> Vec<i64> {
        let now_s = (now_ms / 1000) as i64;
        let actual = Estimate::bounded(actual_tokens, actual_cost);
        let mut args = Vec::with_capacity(7 + chain.len() * SETTLE_ARGS_PER_BUCKET);
        args.extend([
            num(now_ms),
            num(reserved.cost),
            num(reserved.tokens),
            num(actual.cost),
            num(actual.tokens),
            num(marker_ms).max(1),
            i64::from(refund_request),
        ]);
        for id in chain {
            let Some(state) = self.buckets.get_mut(id) else {
                args.extend([-1, 0, 0, 0, 0, 0, 0, 0]);
                continue;
            };
            state.roll(now_ms);
            let limits = &state.spec.limits;
            let (cap, window_start) = match &state.spec.budget {
                Some(budget) => (num(budget.cap()), signed(budget.window.start(now_s))),
                None => (-1, 0),
            };
            let refund = |limit: Option<u64>| if refund_request { num(limit.unwrap_or(0)) } else { 0 };
            args.extend([
                cap,
                window_start,
                num(limits.tpm.unwrap_or(0)),
                refund(limits.rpm),
                num(limits.tps.unwrap_or(0)),
                refund(limits.rps),
                num(state.spent),
                state.quotas.len() as i64,
            ]);
            for quota in &mut state.quotas {
                quota.roll(now_ms);
                args.extend([quota_code(quota.quota), signed(quota.quota.window.start(now_s)), num(quota.used)]);
            }
        }
        args
    }
}

fn trigger_code(trigger: Option<Trigger>) -> i64 {
    match trigger {
        None => 0,
        Some(Trigger::Spent) => 1,
        Some(Trigger::Threshold) => 2,
        Some(Trigger::Forecast) => 3,
    }
}

/// Why an admission's answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unexpected answer from the admission script: {0:?}")]
pub struct BadAnswer(pub Vec<i64>);

/// What an admission's answer says besides yes or no: what the fleet had
/// spent on each bucket, and which buckets Redis did not know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    /// Each bucket's settled spend in its window, as Redis holds it
    /// (`None`: no budget, or not read before a refusal).
    pub spent: Vec<Option<NanoUsd>>,
    /// The buckets this admission found unknown to Redis (never seen, or
    /// lost) and seeded with what the instance knew.
    pub seeded: Vec<usize>,
}

/// Reads the admission script's answer for `chain`,
/// `{why, bucket index, retry ms, detail, detail, seeded, spent...}`:
/// `Ok((None, _))` admitted, `Ok((Some(refusal), _))` refused by the named
/// bucket, with what the fleet had spent on each bucket. The details are a
/// budget's downgrade trigger, a rate's span, or a quota's code and cap.
pub fn read_admit(answer: &[i64], chain: &[BucketId]) -> Result<(Option<Refusal>, Seen), BadAnswer> {
    let bad = || BadAnswer(answer.to_vec());
    let [why, index, retry, first, second, seeded, spent @ ..] = answer else { return Err(bad()) };
    if spent.len() != chain.len() {
        return Err(bad());
    }
    let seen = Seen {
        spent: spent.iter().map(|&n| u64::try_from(n).ok()).collect(),
        seeded: (0..chain.len().min(63)).filter(|i| seeded >> i & 1 == 1).collect(),
    };
    if *why == 0 {
        return Ok((None, seen));
    }
    let bucket = usize::try_from(*index).ok().and_then(|i| i.checked_sub(1)).and_then(|i| chain.get(i));
    let bucket = bucket.ok_or_else(bad)?.clone();
    let retry_in_ms = u64::try_from(*retry).ok();
    let per = if *first == 1 { Per::Second } else { Per::Minute };
    let mut downgrade = None;
    let kind = match why {
        1 => {
            downgrade = match first {
                1 => Some(Trigger::Spent),
                2 => Some(Trigger::Threshold),
                3 => Some(Trigger::Forecast),
                _ => None,
            };
            RefusalKind::Budget { retry_in_ms }
        }
        2 => RefusalKind::Requests { retry_in_ms: retry_in_ms.unwrap_or(1000), per },
        3 => RefusalKind::Tokens { retry_in_ms, per },
        4 => RefusalKind::Concurrency,
        5 => RefusalKind::Quota { quota: quota_of_code(*first, *second).ok_or_else(bad)?, retry_in_ms },
        _ => return Err(bad()),
    };
    Ok((Some(Refusal { kind, bucket, downgrade }), seen))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::admission::{BucketSpec, Budget, Limits};
    use crate::money::from_usd;
    use crate::spec::Downgrade;
    use crate::window::Window;

    const NOW: u64 = 1_796_067_065_000;

    #[test]
    fn a_chain_becomes_one_argument_row_per_bucket() {
        let mut governor = Governor::new();
        let key = BucketId::Key(Arc::from("k"));
        let spec = BucketSpec {
            budget: Some(Budget {
                on_exhaust: Some(Downgrade { pool: "cheap".into(), at: Some(50.0), forecast: false }),
                ..Budget::new(2.0, Window::Day)
            }),
            limits: Limits {
                rpm: Some(60),
                tpm: Some(1000),
                concurrent: Some(3),
                rps: Some(5),
                tpd: Some(9000),
                ..Limits::default()
            },
        };
        governor.set_spec(key.clone(), spec, 0);
        let day = Window::Day.start((NOW / 1000) as i64);
        governor.seed_spent(&key, day, 7);
        governor.seed_quota(&key, "tpd", day, 11);
        let unknown = BucketId::Group(Arc::from("elsewhere"));
        let chain = [key.clone(), unknown];
        let estimate = Estimate { tokens: 10, cost: 20 };
        let args = governor.fleet_admit_args(&chain, estimate, NOW + 60_000, NOW, true);
        assert_eq!(args.len(), 4 + 2 * ADMIT_ARGS_PER_BUCKET + ADMIT_ARGS_PER_QUOTA);
        assert_eq!(&args[..4], [1_796_067_065_000, 20, 10, 1_796_067_125_000]);
        let next = Window::Day.next_start((NOW / 1000) as i64).unwrap();
        let cap = i64::try_from(from_usd(2.0)).unwrap();
        let retry = next * 1000 - NOW as i64;
        assert_eq!(&args[4..16], [cap, day, retry, 60, 1000, 3, 7, 5, 0, cap / 2, 2, 1]);
        assert_eq!(&args[16..21], [5, 9000, day, retry, 11], "tpd: code, cap, window, retry, seed");
        assert_eq!(&args[21..], [-1, 0, -1, 0, 0, 0, 0, 0, 0, -1, 0, 0]);
        let plain = governor.fleet_admit_args(&chain, estimate, NOW + 60_000, NOW, false);
        assert_eq!(&plain[13..15], [-1, 0], "no downgrade unless offered");
        let settle = governor.fleet_settle_args(&chain[..1], estimate, 5, 4, false, 3_600_000, NOW);
        // The seeds: the spend (7) and the quota's use (11) this instance knows.
        assert_eq!(settle, [1_796_067_065_000, 20, 10, 5, 4, 3_600_000, 0, cap, day, 1000, 0, 0, 0, 7, 1, 5, day, 11]);
        let hit = governor.fleet_settle_args(&chain[..1], estimate, 0, 0, true, 3_600_000, NOW);
        assert_eq!(hit[6..13], [1, cap, day, 1000, 60, 0, 5], "a hit gives its request back to rpm and rps");
        // An upstream's usage is clamped to what one request may cost, as
        // the local governor clamps it, not merely to what a script can add.
        let huge = governor.fleet_settle_args(&chain[..1], estimate, u64::MAX, u64::MAX, false, 1, NOW);
        assert_eq!(
            huge[3..5],
            [crate::admission::MAX_REQUEST_COST as i64, 2 * crate::admission::MAX_REQUEST_TOKENS as i64]
        );
        assert_eq!(hold_member(0xab, estimate), "ab|10|20");
        assert_eq!(bucket_keys("sy", &key), ["sy:bucket:key:k", "sy:holds:key:k"]);
        let scoped = BucketId::Scoped { owner: "group:acme".into(), name: "gpt-4o".into() };
        assert_eq!(bucket_keys("sy", &scoped)[0], "sy:bucket:scope:group:acme:gpt-4o");
    }

    #[test]
    fn no_end_user_names_another_bucket() {
        let user =
            |owner: &str, user: &str| bucket_keys("sy", &BucketId::EndUser { owner: owner.into(), user: user.into() });
        assert_eq!(
            user("group:acme", "ana@example.com"),
            ["sy:bucket:user:group:acme:ana%40example.com", "sy:holds:user:group:acme:ana%40example.com"]
        );
        // `alice:holds`'s counters are not `alice`'s holds.
        let alice = user("key:k1", "alice");
        let named_like_holds = user("key:k1", "alice:holds");
        assert_ne!(named_like_holds[0], alice[1]);
        // An owner and a user cut differently are different buckets.
        assert_ne!(user("group:a:b", "c"), user("group:a", "b:c"));
        // Every name of every bucket below is distinct.
        let ids = [
            BucketId::Key("k1".into()),
            BucketId::Group("k1".into()),
            BucketId::EndUser { owner: "key:k1".into(), user: "holds".into() },
            BucketId::EndUser { owner: "key:k1".into(), user: "x:holds".into() },
            BucketId::EndUser { owner: "key:k1:x".into(), user: "holds".into() },
            BucketId::EndUser { owner: "key:k1".into(), user: "x%3Aholds".into() },
        ];
        let names: Vec<String> = ids.iter().flat_map(|id| bucket_keys("sy", id)).collect();
        let distinct: std::collections::HashSet<&String> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "{names:?}");
    }

    #[test]
    fn no_number_reaches_a_script_unbounded() {
        // Whatever a caller, an upstream or an operator says, every argument
        // stays an integer a script can add and write back.
        let mut governor = Governor::new();
        let huge = Limits {
            rpm: Some(u64::MAX),
            tpm: Some(u64::MAX),
            concurrent: Some(u64::MAX),
            rps: Some(u64::MAX),
            tps: Some(u64::MAX),
            tpd: Some(u64::MAX),
            usd_per_month: Some(1e300),
            ..Limits::default()
        };
        let on_exhaust = Some(Downgrade { pool: "p".into(), at: Some(1e300), forecast: true });
        let spec =
            BucketSpec { budget: Some(Budget { on_exhaust, ..Budget::new(1e300, Window::Total) }), limits: huge };
        let id = BucketId::Key(Arc::from("k"));
        governor.set_spec(id.clone(), spec, 0);
        governor.seed_spent(&id, 0, u64::MAX);
        governor.seed_quota(&id, "tpd", i64::MAX, u64::MAX);
        let estimate = Estimate { tokens: u64::MAX, cost: u64::MAX };
        let chain = [id.clone(), id];
        for args in [
            governor.fleet_admit_args(&chain, estimate, u64::MAX, u64::MAX, true),
            governor.fleet_settle_args(&chain, estimate, u64::MAX, u64::MAX, true, u64::MAX, u64::MAX),
        ] {
            assert!(args.iter().all(|n| (-SCRIPT_MAX..=SCRIPT_MAX).contains(n)), "{args:?}");
        }
    }

    #[test]
    fn an_answer_names_the_refusing_bucket_and_what_the_fleet_spent() {
        let chain = [BucketId::Key(Arc::from("k")), BucketId::Group(Arc::from("team"))];
        let (admitted, seen) = read_admit(&[0, 0, -1, 0, 0, 0b10, 40, -1], &chain).unwrap();
        assert_eq!(admitted, None);
        assert_eq!(seen, Seen { spent: vec![Some(40), None], seeded: vec![1] });
        let (refused, seen) = read_admit(&[1, 2, 5000, 0, 0, 0, 3, 9], &chain).unwrap();
        let refused = refused.unwrap();
        assert_eq!(refused.bucket, chain[1]);
        assert_eq!(refused.kind, RefusalKind::Budget { retry_in_ms: Some(5000) });
        assert_eq!(refused.downgrade, None);
        assert_eq!(seen.spent, [Some(3), Some(9)], "a refusal tells what was spent too");
        let refusal = |answer: &[i64]| read_admit(answer, &chain).unwrap().0.unwrap();
        assert_eq!(refusal(&[1, 2, 5000, 2, 0, 0, -1, -1]).downgrade, Some(Trigger::Threshold));
        assert_eq!(
            refusal(&[3, 1, -1, 0, 0, 0, -1, -1]).kind,
            RefusalKind::Tokens { retry_in_ms: None, per: Per::Minute }
        );
        assert_eq!(
            refusal(&[2, 1, 40, 1, 0, 0, -1, -1]).kind,
            RefusalKind::Requests { retry_in_ms: 40, per: Per::Second }
        );
        assert_eq!(refusal(&[4, 1, -1, 0, 0, 0, -1, -1]).kind, RefusalKind::Concurrency);
        let quota = refusal(&[5, 1, 7000, 5, 9000, 0, -1, -1]);
        let RefusalKind::Quota { quota, retry_in_ms: Some(7000) } = quota.kind else { panic!("{quota:?}") };
        assert_eq!((quota.name(), quota.cap), ("tpd", 9000));
        assert!(read_admit(&[5, 1, 7000, 10, 9000, 0, -1, -1], &chain).is_err(), "no tenth quota");
        assert!(read_admit(&[1, 3, 0, 0, 0, 0, -1, -1], &chain).is_err(), "no third bucket");
        assert!(read_admit(&[9, 1, 0, 0, 0, 0, -1, -1], &chain).is_err());
        assert!(read_admit(&[0, 0, -1, 0, 0, 0, -1], &chain).is_err(), "one spend per bucket");
        assert!(read_admit(&[], &chain).is_err());
    }

    #[test]
    fn every_quota_code_reads_back() {
        let limits = Limits {
            rph: Some(1),
            rpd: Some(2),
            rpmo: Some(3),
            tph: Some(4),
            tpd: Some(5),
            tpmo: Some(6),
            usd_per_hour: Some(7.0),
            usd_per_day: Some(8.0),
            usd_per_month: Some(9.0),
            ..Limits::default()
        };
        let quotas: Vec<Quota> = limits.quotas().collect();
        assert_eq!(quotas.len(), 9);
        for quota in quotas {
            assert_eq!(quota_of_code(quota_code(quota), quota.cap as i64), Some(quota));
        }
    }
}
