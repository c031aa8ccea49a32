//! Rate limits as GCRA (the generic cell rate algorithm): one number per
//! limit, the theoretical arrival time of the next unit. A limit of N per
//! minute admits a burst of N, then one every 60/N seconds (per second
//! likewise, over a second). A request may cost more than one unit
//! (tokens per minute), and a cost can be corrected afterwards when the
//! real token count is known.

use serde::{Deserialize, Serialize};

/// The window a per-minute limit spreads over, in milliseconds.
pub const MINUTE_MS: u64 = 60_000;
/// The window a per-second limit spreads over, in milliseconds.
pub const SECOND_MS: u64 = 1_000;

/// One limit's state: N units a period.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Gcra {
    /// Units per period (a minute unless made by [`Gcra::per_second`]).
    pub per_minute: u64,
    /// The period, in milliseconds.
    #[serde(default = "minute")]
    period_ms: u64,
    /// Theoretical arrival time of the next unit, in ms on the caller's clock.
    tat: f64,
}

fn minute() -> u64 {
    MINUTE_MS
}

/// What a rate check found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RateCheck {
    /// There is room; `commit` takes it.
    Room,
    /// No room until `retry_in_ms` from now.
    Full {
        /// Milliseconds until the cost would fit.
        retry_in_ms: u64,
    },
    /// The cost alone is more than the limit allows in a minute.
    TooLarge,
}

impl Gcra {
    /// A fresh limit of `per_minute` units a minute.
    pub fn new(per_minute: u64) -> Gcra {
        Gcra { per_minute, period_ms: MINUTE_MS, tat: 0.0 }
    }

    /// A fresh limit of `per_second` units a second.
    pub fn per_second(per_second: u64) -> Gcra {
        Gcra { per_minute: per_second, period_ms: SECOND_MS, tat: 0.0 }
    }

    fn period(&self) -> f64 {
        self.period_ms as f64
    }

    fn interval(&self) -> f64 {
        self.period() / self.per_minute.max(1) as f64
    }

    /// Whether `cost` units fit at `now_ms`.
    pub fn check(&self, cost: u64, now_ms: u64) -> RateCheck {
        if cost > self.per_minute {
            return RateCheck::TooLarge;
        }
        let now = now_ms as f64;
        let next = self.tat.max(now) + cost as f64 * self.interval();
        if next - now <= self.period() {
            RateCheck::Room
        } else {
            RateCheck::Full { retry_in_ms: (next - now - self.period()).ceil() as u64 }
        }
    }

    /// Takes `cost` units at `now_ms` (after a `Room` check).
    pub fn commit(&mut self, cost: u64, now_ms: u64) {
        self.tat = self.tat.max(now_ms as f64) + cost as f64 * self.interval();
    }

    /// Corrects an earlier commit by `delta` units (negative: a refund).
    pub fn adjust(&mut self, delta: i64, now_ms: u64) {
        let shifted = self.tat + delta as f64 * self.interval();
        // A refund never lends credit beyond an idle limit's.
        self.tat = shifted.max(now_ms as f64 - self.period()).max(0.0);
    }

    /// Units left at `now_ms`, as a share of the limit (1.0: untouched).
    pub fn headroom(&self, now_ms: u64) -> f64 {
        let used = (self.tat - now_ms as f64).max(0.0) / self.period();
        (1.0 - used).clamp(0.0, 1.0)
    }

    /// A limit changed to `per_minute` units a period at `now_ms`, keeping
    /// the units in use (a raised limit has room at once; a lowered one may
    /// be full).
    pub fn resized(self, per_minute: u64, now_ms: u64) -> Gcra {
        if per_minute == self.per_minute {
            return self;
        }
        let now = now_ms as f64;
        let used = (self.tat - now).max(0.0) / self.interval();
        let resized = Gcra { per_minute, tat: 0.0, ..self };
        let tat = if self.tat > now { now + used * resized.interval() } else { self.tat };
        Gcra { tat, ..resized }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raised_limit_has_room_at_once_and_a_lowered_one_keeps_what_was_used() {
        let mut limit = Gcra::new(2);
        limit.commit(2, 1_000);
        assert!(matches!(limit.check(1, 1_000), RateCheck::Full { .. }));
        let raised = limit.resized(100, 1_000);
        assert_eq!(raised.check(1, 1_000), RateCheck::Room);
        assert!((raised.headroom(1_000) - 0.98).abs() < 0.001);
        let lowered = raised.resized(2, 1_000);
        assert!(matches!(lowered.check(1, 1_000), RateCheck::Full { .. }));
    }

    #[test]
    fn a_burst_of_n_then_one_per_interval() {
        let mut limit = Gcra::new(60);
        for _ in 0..60 {
            assert_eq!(limit.check(1, 1_000), RateCheck::Room);
            limit.commit(1, 1_000);
        }
        assert_eq!(limit.check(1, 1_000), RateCheck::Full { retry_in_ms: 1_000 });
        assert_eq!(limit.check(1, 2_000), RateCheck::Room);
        assert_eq!(limit.check(61, 2_000), RateCheck::TooLarge);
        assert!(limit.headroom(1_000) < 0.01);
        assert!((limit.headroom(31_000) - 0.5).abs() < 0.01);
    }

    #[test]
    fn a_per_second_limit_refills_within_the_second() {
        let mut limit = Gcra::per_second(10);
        for _ in 0..10 {
            assert_eq!(limit.check(1, 5_000), RateCheck::Room);
            limit.commit(1, 5_000);
        }
        assert_eq!(limit.check(1, 5_000), RateCheck::Full { retry_in_ms: 100 });
        assert_eq!(limit.check(1, 5_100), RateCheck::Room);
        assert_eq!(limit.check(11, 9_000), RateCheck::TooLarge);
        assert_eq!(limit.headroom(6_000), 1.0);
        assert_eq!(limit.resized(20, 5_000).check(1, 5_000), RateCheck::Room);
    }

    #[test]
    fn token_costs_are_corrected_after_the_fact() {
        let mut limit = Gcra::new(1_000);
        limit.commit(900, 0);
        assert!(matches!(limit.check(200, 0), RateCheck::Full { .. }));
        limit.adjust(-500, 0); // the reply was shorter than reserved
        assert_eq!(limit.check(200, 0), RateCheck::Room);
        limit.adjust(-100_000, 0);
        assert_eq!(limit.headroom(0), 1.0, "a refund never goes below an idle limit");
    }

    proptest::proptest! {
        /// Over any minute, a limit of N admits at most N units plus one
        /// burst of N (GCRA's worst case across a window boundary).
        #[test]
        fn never_more_than_two_n_in_a_minute(arrivals in proptest::collection::vec(0u64..120_000, 1..400)) {
            let mut arrivals = arrivals;
            arrivals.sort_unstable();
            let mut limit = Gcra::new(50);
            let mut admitted = Vec::new();
            for at in arrivals {
                if limit.check(1, at) == RateCheck::Room {
                    limit.commit(1, at);
                    admitted.push(at);
                }
            }
            for (i, start) in admitted.iter().enumerate() {
                let within = admitted[i..].iter().take_while(|t| **t < start + 60_000).count();
                proptest::prop_assert!(within <= 100, "{} in a minute", within);
            }
        }
    }
}
