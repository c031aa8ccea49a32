//! Hedging's arithmetic: when a request's first content is late enough
//! that a second attempt on another lane should start (`Latencies`, the
//! pool's recent times to first content and their 95th percentile), and how
//! many extra attempts the pool's traffic allows (`Allowance`, a credit each
//! hedgeable request earns and each hedge spends). Pure: the engine passes
//! the samples in.

use std::time::Duration;

/// Samples kept for the percentile: the most recent ones.
const WINDOW: usize = 128;

/// Fewest samples before a percentile is trusted: until then a pool that
/// hedges at its p95 does not hedge.
pub const MIN_SAMPLES: usize = 20;

/// The recent times to first content of a pool's requests (ms), for the
/// `after: p95` trigger.
#[derive(Debug, Clone)]
pub struct Latencies {
    samples: [u32; WINDOW],
    /// Where the next sample goes.
    next: usize,
    /// Samples held (at most `WINDOW`).
    len: usize,
    /// The percentile as last computed, and samples added since.
    p95: Option<u32>,
    stale: usize,
}

impl Default for Latencies {
    fn default() -> Latencies {
        Latencies { samples: [0; WINDOW], next: 0, len: 0, p95: None, stale: 0 }
    }
}

impl Latencies {
    /// Recomputing after this many new samples keeps the sort off most
    /// requests while the percentile follows the traffic.
    const REFRESH: usize = 8;

    /// Adds one time to first content.
    pub fn record(&mut self, took: Duration) {
        self.samples[self.next] = u32::try_from(took.as_millis()).unwrap_or(u32::MAX);
        self.next = (self.next + 1) % WINDOW;
        self.len = (self.len + 1).min(WINDOW);
        self.stale += 1;
    }

    /// The 95th percentile of the window (nearest rank), once it holds
    /// `MIN_SAMPLES`.
    pub fn p95(&mut self) -> Option<Duration> {
        if self.len < MIN_SAMPLES {
            return None;
        }
        if self.p95.is_none() || self.stale >= Latencies::REFRESH {
            let mut sorted = self.samples;
            let held = &mut sorted[..self.len];
            held.sort_unstable();
            // Nearest rank: the smallest sample at or above 95 % of them.
            let rank = (self.len * 95).div_ceil(100).max(1);
            self.p95 = Some(held[rank - 1]);
            self.stale = 0;
        }
        self.p95.map(|ms| Duration::from_millis(u64::from(ms)))
    }
}

/// The extra attempts a pool may start: each hedgeable request earns
/// `max_extra` of one, a hedge spends a whole one, and at most `BURST`
/// are saved up. Over any run of `n` hedgeable requests the hedges number
/// at most `BURST + n × max_extra`.
#[derive(Debug, Clone, Default)]
pub struct Allowance {
    /// Millionths of a hedge: whole numbers, so ten tenths make one.
    credit: u64,
}

impl Allowance {
    /// Most hedges saved up for a burst of late answers.
    pub const BURST: f64 = 10.0;

    /// One hedge, in the credit's unit.
    const ONE: u64 = 1_000_000;

    /// A hedgeable request came: it earns `max_extra` (a share, 0 to 1).
    pub fn earn(&mut self, max_extra: f64) {
        let share = if max_extra.is_finite() { max_extra.clamp(0.0, 1.0) } else { 0.0 };
        let earned = (share * Allowance::ONE as f64).round() as u64;
        self.credit = (self.credit + earned).min(Allowance::BURST as u64 * Allowance::ONE);
    }

    /// Spends one hedge, if the credit holds one.
    pub fn spend(&mut self) -> bool {
        if self.credit >= Allowance::ONE {
            self.credit -= Allowance::ONE;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn no_percentile_until_the_window_holds_enough() {
        let mut latencies = Latencies::default();
        for _ in 0..MIN_SAMPLES - 1 {
            latencies.record(ms(100));
        }
        assert_eq!(latencies.p95(), None);
        latencies.record(ms(100));
        assert_eq!(latencies.p95(), Some(ms(100)));
    }

    #[test]
    fn the_percentile_is_the_nearest_rank_of_the_recent_window() {
        let mut latencies = Latencies::default();
        // 1..=100 ms: the 95th by nearest rank is 95 ms.
        for n in 1..=100 {
            latencies.record(ms(n));
        }
        assert_eq!(latencies.p95(), Some(ms(95)));
        // The window forgets: after 128 slow samples only they count.
        for _ in 0..WINDOW {
            latencies.record(ms(2000));
        }
        assert_eq!(latencies.p95(), Some(ms(2000)));
    }

    #[test]
    fn a_heavy_tail_sets_the_trigger_above_the_body() {
        let mut latencies = Latencies::default();
        for n in 0..100 {
            latencies.record(ms(if n % 10 == 0 { 3000 } else { 50 }));
        }
        // One in ten is slow: the p95 lands in the tail.
        assert_eq!(latencies.p95(), Some(ms(3000)));
        let mut latencies = Latencies::default();
        for n in 0..100 {
            latencies.record(ms(if n % 50 == 0 { 3000 } else { 50 }));
        }
        // One in fifty: the p95 is the body's.
        assert_eq!(latencies.p95(), Some(ms(50)));
    }

    #[test]
    fn nothing_is_spent_without_credit() {
        let mut allowance = Allowance::default();
        assert!(!allowance.spend());
        for _ in 0..9 {
            allowance.earn(0.1);
        }
        assert!(!allowance.spend(), "0.9 of a hedge is none");
        allowance.earn(0.1);
        assert!(allowance.spend());
        assert!(!allowance.spend());
    }

    #[test]
    fn odd_shares_earn_nothing_or_at_most_one() {
        let mut allowance = Allowance::default();
        allowance.earn(f64::NAN);
        allowance.earn(-3.0);
        assert!(!allowance.spend());
        allowance.earn(7.0);
        assert!(allowance.spend());
        assert!(!allowance.spend());
    }

    proptest! {
        /// Hedges never pass `BURST + n × share` over any run of requests,
        /// however the late answers fall among them.
        #[test]
        fn hedges_stay_within_their_share(share in 0.0f64..=1.0, late in proptest::collection::vec(any::<bool>(), 0..2000)) {
            let mut allowance = Allowance::default();
            let mut hedges = 0u32;
            for (n, late) in late.iter().enumerate() {
                allowance.earn(share);
                if *late && allowance.spend() {
                    hedges += 1;
                }
                // The share is kept to a millionth.
                let bound = Allowance::BURST + (n + 1) as f64 * (share + 1e-6);
                prop_assert!(f64::from(hedges) <= bound + 1e-9, "{hedges} hedges after {} requests", n + 1);
            }
        }
    }
}
