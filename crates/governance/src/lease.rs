//! Admission by leased slices, its pure half: how big a slice of a
//! bucket's budget and rates an instance may lease from a fleet's shared
//! counters, what one instance's lease has left to admit on, and what it
//! reports back when it renews or returns the lease. The lease script
//! (`switchyard_fleet`'s `fleet_lease.lua`) computes the same slice from
//! the same formula ([`usd_slice`], [`rate_slice`]) on the figures it
//! holds; this module is what the proofs read.
//!
//! A lease is one hold per bucket of a chain, `L<id>|0|<usd>`, in that
//! bucket's holds (so a dead instance's lease comes back by the reclaim
//! every script already runs), its USD counted in the bucket's `reserved`
//! beside every request's hold. Each renewal moves the spend the instance
//! settled since the last one (`U`) from its hold into `spent`, and tops
//! the hold up with a fresh slice; a request admitted locally is covered
//! by the hold from the moment it is admitted to the moment its cost is
//! reported, so `spent + reserved` in Redis never falls below what the
//! fleet committed, but for what a dead instance settled and never
//! reported (at most its slice).

use crate::admission::{BucketId, Estimate, Governor};
use crate::fleet::SCRIPT_MAX;
use crate::money::NanoUsd;
use crate::spec::Limits;

/// How big a slice may be (`storage.redis.lease`), bounded when read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceLimits {
    /// The share of what is left a slice takes, in thousandths (1..=1000),
    /// divided between the instances holding a lease on the bucket.
    pub share_permille: u64,
    /// The most USD one slice holds (nano-USD).
    pub max_usd: NanoUsd,
    /// The most requests one slice of a `rpm` holds.
    pub max_requests: u64,
    /// The most tokens one slice of a `tpm` holds.
    pub max_tokens: u64,
}

impl SliceLimits {
    /// `self` with every figure bounded: a share within 1..=1000, a cap
    /// within what a script adds exactly.
    pub fn bounded(self) -> SliceLimits {
        let cap = SCRIPT_MAX as u64;
        SliceLimits {
            share_permille: self.share_permille.clamp(1, 1000),
            max_usd: self.max_usd.min(cap),
            max_requests: self.max_requests.clamp(1, cap),
            max_tokens: self.max_tokens.clamp(1, cap),
        }
    }
}

/// A fresh USD slice of a bucket whose `room` (cap less spent and
/// reserved, the lease's own kept hold included) is shared by `live`
/// leases (this one counted): `share × room / live`, at most `max_usd`,
/// at least `need` (the request waiting on it, 0 in the background), never
/// more than `room`. `None`: `need` does not fit in `room`, and the
/// request waiting is refused.
pub fn usd_slice(room: NanoUsd, live: u64, need: NanoUsd, limits: SliceLimits) -> Option<NanoUsd> {
    if need > room {
        return None;
    }
    let share = share_of(room, live, limits.share_permille);
    Some(share.min(limits.max_usd).max(need).min(room))
}

/// A fresh slice of a rate whose GCRA has room for `available` units now,
/// of a `limit` a period shared by `live` leases, for a lease that still
/// has `have` units: tops it up to `share × limit / live` (at least one
/// unit, at most `max`), or at least to `need`; never more than
/// `available`. `None`: `need` does not fit.
pub fn rate_slice(
    available: u64,
    limit: u64,
    live: u64,
    have: u64,
    need: u64,
    max: u64,
    share_permille: u64,
) -> Option<u64> {
    let missing = need.saturating_sub(have);
    if missing > available {
        return None;
    }
    let target = share_of(limit, live, share_permille).max(1).min(max);
    Some(target.saturating_sub(have).max(missing).min(available))
}

/// `share‰ × amount / live`, rounded down, without overflow.
fn share_of(amount: u64, live: u64, share_permille: u64) -> u64 {
    let share = u128::from(share_permille.clamp(1, 1000));
    let live = u128::from(live.max(1));
    (u128::from(amount) * share / 1000 / live) as u64
}

/// Units of a GCRA of `limit` a `period_ms` whose next unit is due at
/// `tat_ms` that fit at `now_ms` (the burst's room).
pub fn gcra_room(limit: u64, period_ms: u64, tat_ms: u64, now_ms: u64) -> u64 {
    if limit == 0 || period_ms == 0 {
        return 0;
    }
    let busy = tat_ms.saturating_sub(now_ms);
    let free = period_ms.saturating_sub(busy);
    (u128::from(free) * u128::from(limit) / u128::from(period_ms)) as u64
}

/// One bucket's part of a lease, as the instance holding it counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Slice {
    /// The bucket has a budget the lease holds USD of.
    pub budgeted: bool,
    /// What Redis holds for this lease (nano-USD).
    pub granted: NanoUsd,
    /// Of it, what requests in flight hold and what settled but is not yet
    /// reported (nano-USD; above `granted` when requests under-reserved).
    pub used: NanoUsd,
    /// Settled and not yet reported: the next renewal adds it to `spent`.
    pub unreported: NanoUsd,
    /// The bucket has an `rpm` the lease holds requests of.
    pub rpm: bool,
    /// Requests left to admit.
    pub requests: u64,
    /// The bucket has a `tpm` the lease holds tokens of.
    pub tpm: bool,
    /// Tokens left to admit (below zero: requests used more than they
    /// reserved, owed to the fleet's rate at the next renewal).
    pub tokens: i64,
    /// The most this slice was granted at once (for renewing ahead).
    pub high: Granted,
}

/// What one renewal granted a slice (or the most it ever was).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Granted {
    /// Nano-USD.
    pub usd: NanoUsd,
    /// Requests.
    pub requests: u64,
    /// Tokens.
    pub tokens: u64,
}

/// What a slice tells the lease script: the spend to move into `spent`,
/// the hold to keep, and the rate units it has (or owes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Report {
    /// The hold Redis has for this lease now (nano-USD).
    pub held: NanoUsd,
    /// Settled since the last report (nano-USD): added to `spent`.
    pub spent: NanoUsd,
    /// What the hold keeps: `held − spent`, at least zero.
    pub keep: NanoUsd,
    /// Requests the slice has left.
    pub requests: u64,
    /// Tokens the slice has left (below zero: owed).
    pub tokens: i64,
}

impl Slice {
    /// Whether `estimate` fits what this slice has left.
    fn fits(&self, estimate: Estimate) -> bool {
        (!self.budgeted || self.used.saturating_add(estimate.cost) <= self.granted)
            && (!self.rpm || self.requests >= 1)
            && (!self.tpm || self.tokens >= i64::try_from(estimate.tokens).unwrap_or(i64::MAX))
    }

    fn take(&mut self, estimate: Estimate) {
        if self.budgeted {
            self.used = self.used.saturating_add(estimate.cost);
        }
        if self.rpm {
            self.requests = self.requests.saturating_sub(1);
        }
        if self.tpm {
            self.tokens = self.tokens.saturating_sub(signed(estimate.tokens));
        }
    }

    /// Settles a request this slice admitted: its reservation becomes what
    /// it cost (counted until reported), its unused tokens come back.
    fn settle(&mut self, estimate: Estimate, cost: NanoUsd, tokens: u64) {
        if self.budgeted {
            self.used = self.used.saturating_sub(estimate.cost).saturating_add(cost);
            self.unreported = self.unreported.saturating_add(cost);
        }
        if self.tpm {
            self.tokens = self.tokens.saturating_add(signed(estimate.tokens)).saturating_sub(signed(tokens));
        }
    }

    /// What the next renewal sends.
    pub fn report(&self) -> Report {
        Report {
            held: self.granted,
            spent: self.unreported,
            keep: self.granted.saturating_sub(self.unreported),
            requests: self.requests,
            tokens: self.tokens,
        }
    }

    /// What a return sends: the spend, and a hold kept only for what the
    /// requests still in flight reserve.
    pub fn return_report(&self) -> Report {
        let in_flight = self.used.saturating_sub(self.unreported);
        Report { keep: in_flight.min(self.granted.saturating_sub(self.unreported)), ..self.report() }
    }

    /// Applies a renewal's answer to the report `sent`: the spend reported
    /// then is `spent` now, the hold is what was kept plus `fresh`.
    /// Requests admitted or settled while the renewal was on its way stay
    /// counted.
    pub fn renewed(&mut self, sent: Report, fresh: Granted) {
        self.used = self.used.saturating_sub(sent.spent);
        self.unreported = self.unreported.saturating_sub(sent.spent);
        self.granted = sent.keep.saturating_add(fresh.usd);
        // An owed token debt was paid by the script.
        if sent.tokens < 0 {
            self.tokens = self.tokens.saturating_sub(sent.tokens);
        }
        self.requests = self.requests.saturating_add(fresh.requests);
        self.tokens = self.tokens.saturating_add(signed(fresh.tokens));
        self.high = Granted {
            usd: self.high.usd.max(self.granted.saturating_sub(self.used)),
            requests: self.high.requests.max(self.requests),
            tokens: self.high.tokens.max(u64::try_from(self.tokens).unwrap_or(0)),
        };
    }

    /// Applies a return's answer: the hold keeps only what requests in
    /// flight reserve, and the rates' unused units went back.
    pub fn returned(&mut self, sent: Report) {
        self.used = self.used.saturating_sub(sent.spent);
        self.unreported = self.unreported.saturating_sub(sent.spent);
        self.granted = sent.keep;
        self.requests = 0;
        self.tokens = 0;
    }

    /// Below half of the most it was granted: renew ahead of running out.
    fn low(&self) -> bool {
        (self.budgeted && self.granted.saturating_sub(self.used) < self.high.usd / 2)
            || (self.rpm && self.requests < self.high.requests.div_ceil(2))
            || (self.tpm && self.tokens < signed(self.high.tokens / 2))
    }
}

fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX).min(SCRIPT_MAX)
}

/// One instance's lease on a chain: a slice per bucket, under one id and
/// one expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Its id (the holds' members name it).
    pub id: u64,
    /// Its slices, one per bucket of the chain.
    pub slices: Vec<Slice>,
    /// When Redis reclaims it unless renewed (Unix ms).
    pub expires_ms: u64,
    /// Requests it admitted still unsettled.
    pub in_flight: u64,
    /// When it last admitted (Unix ms): an idle lease is returned.
    pub used_ms: u64,
    /// It admits no more (its lease ended, or its chain's limits changed):
    /// its requests in flight settle into it, then it is returned.
    pub retired: bool,
}

/// Margin before a lease's expiry after which it admits nothing more: the
/// requests it admits must be covered by a hold that is still there when
/// they settle and are reported.
pub const EXPIRY_MARGIN_MS: u64 = 1_000;

impl Lease {
    /// A new lease `id` on a chain of `buckets` (what each has: a budget,
    /// an `rpm`, a `tpm`), with nothing granted yet.
    pub fn new(id: u64, buckets: &[LeaseBucket], now_ms: u64) -> Lease {
        let slices = buckets
            .iter()
            .map(|b| Slice { budgeted: b.cap.is_some(), rpm: b.rpm > 0, tpm: b.tpm > 0, ..Slice::default() })
            .collect();
        Lease { id, slices, expires_ms: now_ms, in_flight: 0, used_ms: now_ms, retired: false }
    }

    /// Admits `estimate` on every slice at `now_ms`, or nothing: `false`
    /// when one has no room, the lease ends too soon, or it is retired.
    pub fn admit(&mut self, estimate: Estimate, now_ms: u64) -> bool {
        if self.retired
            || now_ms.saturating_add(EXPIRY_MARGIN_MS) >= self.expires_ms
            || !self.slices.iter().all(|s| s.fits(estimate))
        {
            return false;
        }
        self.slices.iter_mut().for_each(|s| s.take(estimate));
        self.in_flight += 1;
        self.used_ms = now_ms;
        true
    }

    /// Settles a request this lease admitted at `estimate`, which cost
    /// `cost` and `tokens` (bounded as every settlement is).
    pub fn settle(&mut self, estimate: Estimate, cost: NanoUsd, tokens: u64) {
        let actual = Estimate::bounded(tokens, cost);
        self.slices.iter_mut().for_each(|s| s.settle(estimate, actual.cost, actual.tokens));
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// Whether a slice runs low: renew it in the background now.
    pub fn low(&self) -> bool {
        !self.retired && self.slices.iter().any(Slice::low)
    }

    /// What each slice reports.
    pub fn reports(&self) -> Vec<Report> {
        self.slices.iter().map(Slice::report).collect()
    }

    /// What each slice reports when the lease is returned.
    pub fn return_reports(&self) -> Vec<Report> {
        self.slices.iter().map(Slice::return_report).collect()
    }

    /// Whether it can be forgotten once returned: nothing in flight and
    /// nothing unreported.
    pub fn settled(&self) -> bool {
        self.in_flight == 0 && self.slices.iter().all(|s| s.unreported == 0 && s.used == 0)
    }
}

/// What a lease needs of one bucket: its budget cap, window and the time
/// to its next window, its rates, and the spend to seed it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseBucket {
    /// Budget cap (nano-USD); `None`: no budget.
    pub cap: Option<NanoUsd>,
    /// Its window's start (Unix s).
    pub window_start: i64,
    /// Ms until the next window (-1: never).
    pub retry_ms: i64,
    /// Requests a minute (0: none).
    pub rpm: u64,
    /// Tokens a minute (0: none).
    pub tpm: u64,
    /// The spend this instance knows, to seed a bucket Redis lost.
    pub seed: NanoUsd,
}

impl LeaseBucket {
    /// The script's arguments for this bucket (before the slice's report).
    pub fn args(&self) -> [i64; 6] {
        [
            self.cap.map_or(-1, signed),
            self.window_start.clamp(-SCRIPT_MAX, SCRIPT_MAX),
            self.retry_ms.clamp(-1, SCRIPT_MAX),
            signed(self.rpm),
            signed(self.tpm),
            signed(self.seed),
        ]
    }
}

/// Whether a bucket's limits can all be leased: a budget that refuses
/// (no downgrade, which needs the fleet's figure at every admission),
/// and `rpm` and `tpm`. A bucket with anything else (a second's rate, a
/// quota, a concurrency cap) is admitted per request, as without leases.
fn leasable(limits: &Limits) -> bool {
    let rest = Limits { rpm: None, tpm: None, per_model: Default::default(), ..limits.clone() };
    rest == Limits::default()
}

impl Governor {
    /// What a lease needs of each bucket of `chain` at `now_ms`, or `None`
    /// when a bucket has a limit no slice can hold (the chain is admitted
    /// per request). A bucket this instance does not know limits nothing.
    pub fn lease_buckets(&mut self, chain: &[BucketId], now_ms: u64) -> Option<Vec<LeaseBucket>> {
        let now_s = (now_ms / 1000) as i64;
        let mut buckets = Vec::with_capacity(chain.len());
        for id in chain {
            let Some(state) = self.buckets.get_mut(id) else {
                buckets.push(LeaseBucket { cap: None, window_start: 0, retry_ms: -1, rpm: 0, tpm: 0, seed: 0 });
                continue;
            };
            state.roll(now_ms);
            let spec = &state.spec;
            if !leasable(&spec.limits) || spec.budget.as_ref().is_some_and(|b| b.on_exhaust.is_some()) {
                return None;
            }
            let (cap, window_start, retry_ms) = match &spec.budget {
                Some(budget) => {
                    let retry = budget
                        .window
                        .next_start(now_s)
                        .map_or(-1, |next| next.saturating_mul(1000).saturating_sub(signed(now_ms)));
                    (Some(budget.cap()), budget.window.start(now_s), retry)
                }
                None => (None, 0, -1),
            };
            buckets.push(LeaseBucket {
                cap,
                window_start,
                retry_ms,
                rpm: spec.limits.rpm.unwrap_or(0),
                tpm: spec.limits.tpm.unwrap_or(0),
                seed: state.spent,
            });
        }
        Some(buckets)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const LIMITS: SliceLimits =
        SliceLimits { share_permille: 500, max_usd: 1_000_000_000, max_requests: 100, max_tokens: 100_000 };

    #[test]
    fn a_slice_is_a_share_of_what_is_left_divided_between_live_leases() {
        // Half of $1 left, between two leases: $0.25 each.
        assert_eq!(usd_slice(1_000_000_000, 2, 0, LIMITS), Some(250_000_000));
        // Capped by max_usd.
        let small = SliceLimits { max_usd: 10, ..LIMITS };
        assert_eq!(usd_slice(1_000_000_000, 1, 0, small), Some(10));
        // A waiting request's estimate is granted whole when it fits...
        assert_eq!(usd_slice(100, 4, 90, LIMITS), Some(90));
        // ...and refused when it does not.
        assert_eq!(usd_slice(100, 1, 101, LIMITS), None);
        assert_eq!(usd_slice(0, 1, 0, LIMITS), Some(0));
    }

    #[test]
    fn a_rate_slice_tops_up_to_its_share_within_the_room_now() {
        // 60 rpm, half between two: 15 each; 4 left, 11 more.
        assert_eq!(rate_slice(60, 60, 2, 4, 1, 100, 500), Some(11));
        // Never more than the burst has room for.
        assert_eq!(rate_slice(3, 60, 1, 0, 1, 100, 500), Some(3));
        // A request that cannot fit is refused.
        assert_eq!(rate_slice(0, 60, 1, 0, 1, 100, 500), None);
        // Tokens: a request needing more than the share gets what it needs.
        assert_eq!(rate_slice(1000, 1000, 4, 0, 600, 100_000, 500), Some(600));
        // A limit of 1 a minute is still leasable one at a time.
        assert_eq!(rate_slice(1, 1, 3, 0, 1, 100, 500), Some(1));
    }

    #[test]
    fn the_gcra_room_is_the_burst_left() {
        assert_eq!(gcra_room(60, 60_000, 0, 1_000), 60);
        assert_eq!(gcra_room(60, 60_000, 31_000, 1_000), 30);
        assert_eq!(gcra_room(60, 60_000, 70_000, 1_000), 0);
        assert_eq!(gcra_room(0, 60_000, 0, 0), 0);
    }

    fn bucket() -> LeaseBucket {
        LeaseBucket { cap: Some(1_000), window_start: 0, retry_ms: -1, rpm: 10, tpm: 100, seed: 0 }
    }

    #[test]
    fn a_lease_admits_until_a_slice_is_spent_and_settles_back_into_it() {
        let mut lease = Lease::new(1, &[bucket()], 0);
        let sent = lease.slices[0].report();
        lease.slices[0].renewed(sent, Granted { usd: 300, requests: 2, tokens: 50 });
        lease.expires_ms = 60_000;
        let e = Estimate { tokens: 20, cost: 100 };
        assert!(lease.admit(e, 1));
        assert!(lease.admit(e, 1));
        assert!(!lease.admit(e, 1), "two requests of the rpm slice");
        lease.settle(e, 40, 5);
        assert_eq!(lease.slices[0].used, 140);
        assert_eq!(lease.slices[0].unreported, 40);
        assert_eq!(lease.slices[0].tokens, 50 - 40 + 15);
        // Renewal: the 40 spent move to `spent`; the hold keeps 260 and
        // gets 100 more.
        let sent = lease.slices[0].report();
        assert_eq!(sent, Report { held: 300, spent: 40, keep: 260, requests: 0, tokens: 25 });
        lease.slices[0].renewed(sent, Granted { usd: 100, requests: 3, tokens: 0 });
        assert_eq!((lease.slices[0].granted, lease.slices[0].used, lease.slices[0].unreported), (360, 100, 0));
        // Near its expiry a lease admits nothing.
        assert!(!lease.admit(e, 59_500));
    }

    #[test]
    fn an_overdrawn_token_slice_owes_its_debt_to_the_next_renewal() {
        let mut lease = Lease::new(1, &[bucket()], 0);
        let sent = lease.slices[0].report();
        lease.slices[0].renewed(sent, Granted { usd: 300, requests: 2, tokens: 10 });
        lease.expires_ms = 60_000;
        let e = Estimate { tokens: 10, cost: 0 };
        assert!(lease.admit(e, 1));
        lease.settle(e, 0, 30);
        assert_eq!(lease.slices[0].tokens, -20);
        let sent = lease.slices[0].report();
        lease.slices[0].renewed(sent, Granted { usd: 0, requests: 0, tokens: 10 });
        assert_eq!(lease.slices[0].tokens, 10, "the 20 owed were paid apart");
    }

    /// The lease script's arithmetic on one bucket, as the proof reads it:
    /// `spent` and `reserved` in Redis, the holds of each lease.
    #[derive(Debug, Default)]
    struct Shared {
        cap: NanoUsd,
        spent: NanoUsd,
        reserved: NanoUsd,
        holds: Vec<Option<NanoUsd>>,
    }

    impl Shared {
        /// A renewal (or a first lease) of lease `i` reporting `sent`,
        /// asking at least `need`; the fresh USD, or a refusal.
        fn renew(&mut self, i: usize, sent: Report, need: NanoUsd) -> Option<NanoUsd> {
            if let Some(held) = self.holds[i].take() {
                self.reserved -= held;
            }
            self.spent += sent.spent;
            let live = self.holds.iter().filter(|h| h.is_some()).count() as u64 + 1;
            let room = self.cap.saturating_sub(self.spent + self.reserved + sent.keep);
            let fresh = usd_slice(room, live, need, LIMITS);
            let hold = sent.keep + fresh.unwrap_or(0);
            self.reserved += hold;
            self.holds[i] = Some(hold);
            fresh
        }

        fn give_back(&mut self, i: usize, sent: Report) {
            if let Some(held) = self.holds[i].take() {
                self.reserved -= held;
            }
            self.spent += sent.spent;
            if sent.keep > 0 {
                self.reserved += sent.keep;
                self.holds[i] = Some(sent.keep);
            }
        }

        /// A dead instance's lease runs out: its hold comes back.
        fn reclaim(&mut self, i: usize) {
            if let Some(held) = self.holds[i].take() {
                self.reserved -= held;
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Step {
        Admit(usize, NanoUsd),
        Settle(usize, u8),
        Renew(usize),
        Return(usize),
        Crash(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0..3usize, 0..400u64).prop_map(|(i, e)| Step::Admit(i, e)),
            4 => (0..3usize, 0..=100u8).prop_map(|(i, p)| Step::Settle(i, p)),
            2 => (0..3usize).prop_map(Step::Renew),
            1 => (0..3usize).prop_map(Step::Return),
            1 => (0..3usize).prop_map(Step::Crash),
        ]
    }

    proptest! {
        /// Three instances lease, admit, settle (never above what they
        /// reserved), renew, return and die in any order on one bucket: at
        /// every step what the fleet really spent, plus what Redis holds,
        /// never exceeds the cap, but for what dead instances spent and
        /// never reported (their slices' spend, the stated bound). Redis's
        /// own figures never pass the cap either.
        #[test]
        fn leased_returned_and_spent_never_exceed_the_budget(
            cap in 0..5_000u64,
            steps in proptest::collection::vec(step(), 1..200),
        ) {
            let mut shared = Shared { cap, holds: vec![None; 3], ..Shared::default() };
            let buckets = [LeaseBucket { cap: Some(cap), window_start: 0, retry_ms: -1, rpm: 0, tpm: 0, seed: 0 }];
            let mut leases: Vec<Lease> = (0..3).map(|i| Lease::new(i, &buckets, 0)).collect();
            // Each instance's requests in flight (their estimates).
            let mut flying: Vec<Vec<NanoUsd>> = vec![Vec::new(); 3];
            let mut truly_spent = 0u64;
            let mut lost = 0u64;
            for step in steps {
                match step {
                    Step::Admit(i, e) => {
                        let estimate = Estimate { tokens: 0, cost: e };
                        if leases[i].admit(estimate, 0) {
                            flying[i].push(e);
                        } else if let Some(fresh) = shared.renew(i, leases[i].reports()[0], e) {
                            // The request path's one call when the slice is empty.
                            let sent = leases[i].reports()[0];
                            leases[i].slices[0].renewed(sent, Granted { usd: fresh, ..Granted::default() });
                            leases[i].expires_ms = 10_000;
                            prop_assert!(leases[i].admit(estimate, 0), "a granted need is admitted");
                            flying[i].push(e);
                        } else {
                            let sent = leases[i].reports()[0];
                            leases[i].slices[0].renewed(sent, Granted::default());
                        }
                    }
                    Step::Settle(i, percent) => {
                        if let Some(e) = flying[i].pop() {
                            let cost = e * u64::from(percent) / 100;
                            leases[i].settle(Estimate { tokens: 0, cost: e }, cost, 0);
                            truly_spent += cost;
                        }
                    }
                    Step::Renew(i) => {
                        let sent = leases[i].reports()[0];
                        // In the background: nothing waits on it.
                        let fresh = shared.renew(i, sent, 0).unwrap_or(0);
                        leases[i].slices[0].renewed(sent, Granted { usd: fresh, ..Granted::default() });
                        leases[i].expires_ms = 10_000;
                    }
                    Step::Return(i) => {
                        let sent = leases[i].return_reports()[0];
                        shared.give_back(i, sent);
                        leases[i].slices[0].returned(sent);
                    }
                    Step::Crash(i) => {
                        // Its requests in flight still cost what they cost
                        // (their upstream calls ran), and nobody reports it.
                        let unreported: u64 = leases[i].slices[0].unreported;
                        let flying_cost: u64 = flying[i].drain(..).sum();
                        truly_spent += flying_cost;
                        lost += unreported + flying_cost;
                        shared.reclaim(i);
                        leases[i] = Lease::new(i as u64 + 10, &buckets, 0);
                    }
                }
                // Every lease's commitments are covered by its hold.
                for (i, lease) in leases.iter().enumerate() {
                    let held = shared.holds[i].unwrap_or(0);
                    prop_assert!(lease.slices[0].used <= held, "lease {i}: {} used, {held} held", lease.slices[0].used);
                    prop_assert_eq!(lease.slices[0].granted, held);
                }
                prop_assert!(shared.spent + shared.reserved <= cap, "redis: {} + {} > {cap}", shared.spent, shared.reserved);
                prop_assert!(truly_spent <= cap + lost, "spent {truly_spent} > {cap} + lost {lost}");
            }
        }
    }
}
