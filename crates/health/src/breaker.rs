//! The circuit breaker of one (pool, lane): Closed → Open → HalfOpen →
//! Closed. It trips on consecutive failures or on a failure rate over a
//! rolling window with a minimum volume; cooldowns grow exponentially to a
//! cap, with jitter, and an upstream `Retry-After` is their floor; a
//! hard-down failure trips at once with the long cooldown. Half-open admits
//! exactly one trial request at a time.
//!
//! A rate limit is not a failure: the lane *rests* for the upstream's
//! `Retry-After` (capped by the maximum cooldown), beside whatever state the
//! breaker is in, and the rest never counts toward a trip.
//!
//! Time and randomness come in as arguments (`now`, `jitter` in `[0, 1)`).

use std::time::{Duration, Instant};

/// Tuning of a breaker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerPolicy {
    /// Trip after this many failures in a row.
    pub consecutive_failures: u32,
    /// Trip when at least this share of requests in the window failed...
    pub failure_rate: f64,
    /// ...and the window holds at least this many requests.
    pub min_requests: u32,
    /// Length of the rolling window.
    pub window: Duration,
    /// First cooldown; each trip in a row doubles it.
    pub base_cooldown: Duration,
    /// Cooldown cap.
    pub max_cooldown: Duration,
    /// Cooldown after a hard-down failure (credentials, billing).
    pub hard_down_cooldown: Duration,
    /// Cooldowns vary by ± this share, so lanes do not recover in lockstep.
    pub jitter: f64,
}

impl Default for BreakerPolicy {
    fn default() -> BreakerPolicy {
        BreakerPolicy {
            consecutive_failures: 5,
            failure_rate: 0.5,
            min_requests: 20,
            window: Duration::from_secs(60),
            base_cooldown: Duration::from_secs(5),
            // Short enough that a lane whose outage outlasted a few doubled
            // cooldowns is tried again within 20 s of recovering, whatever
            // the jitter (the cap holds after jitter and Retry-After).
            max_cooldown: Duration::from_secs(20),
            hard_down_cooldown: Duration::from_secs(600),
            jitter: 0.2,
        }
    }
}

/// The breaker's state, as reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Serving.
    Closed,
    /// Cooling down; no traffic.
    Open,
    /// Cooldown over: one trial request decides.
    HalfOpen,
}

impl BreakerState {
    /// The name used in `/stats`.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// Whether a request may use the lane now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Closed: go.
    Admit,
    /// Half-open: go, as the single trial; report its outcome.
    Trial,
    /// Not now.
    Reject {
        /// Time until the lane may be tried again (zero while a trial runs).
        retry_in: Duration,
        /// Why.
        cause: Unavailable,
    },
}

/// Why a breaker turned a request away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unavailable {
    /// Open after failures, cooling down.
    Cooling,
    /// Half-open with its one trial in flight.
    TrialInFlight,
    /// Resting after the upstream rate-limited us.
    RateLimited,
}

/// What `/stats` shows of a breaker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakerSnapshot {
    /// State.
    pub state: BreakerState,
    /// Why it last tripped.
    pub reason: Option<String>,
    /// Time until an open breaker goes half-open.
    pub retry_in: Option<Duration>,
    /// Trips in a row without a recovery.
    pub trips: u32,
    /// Time left resting after a rate limit.
    pub resting: Option<Duration>,
}

/// Rolling counts in ten buckets across the window.
#[derive(Debug, Clone)]
struct Window {
    buckets: [(u64, u32, u32); 10],
}

impl Window {
    fn new() -> Window {
        Window { buckets: [(u64::MAX, 0, 0); 10] }
    }

    fn record(&mut self, slot: u64, failed: bool) {
        let bucket = &mut self.buckets[(slot % 10) as usize];
        if bucket.0 != slot {
            *bucket = (slot, 0, 0);
        }
        if failed {
            bucket.2 += 1;
        } else {
            bucket.1 += 1;
        }
    }

    /// (requests, failures) in the ten slots up to `slot`.
    fn totals(&self, slot: u64) -> (u32, u32) {
        self.buckets
            .iter()
            .filter(|(s, _, _)| *s != u64::MAX && *s <= slot && slot - *s < 10)
            .fold((0, 0), |(total, failed), (_, ok, bad)| (total + ok + bad, failed + bad))
    }

    fn clear(&mut self) {
        *self = Window::new();
    }
}

#[derive(Debug, Clone, Copy)]
enum Inner {
    Closed,
    Open { until: Instant },
    HalfOpen { trial: bool },
}

/// One lane's breaker in one pool.
#[derive(Debug, Clone)]
pub struct Breaker {
    policy: BreakerPolicy,
    inner: Inner,
    consecutive: u32,
    trips: u32,
    reason: Option<String>,
    window: Window,
    epoch: Instant,
    /// Resting after a rate limit until then.
    rest_until: Option<Instant>,
}

impl Breaker {
    /// A closed breaker. `epoch` anchors the rolling window's slots.
    pub fn new(policy: BreakerPolicy, epoch: Instant) -> Breaker {
        Breaker {
            policy,
            inner: Inner::Closed,
            consecutive: 0,
            trips: 0,
            reason: None,
            window: Window::new(),
            epoch,
            rest_until: None,
        }
    }

    fn slot(&self, now: Instant) -> u64 {
        let width = (self.policy.window.as_millis() / 10).max(1);
        (now.saturating_duration_since(self.epoch).as_millis() / width) as u64
    }

    fn resting(&self, now: Instant) -> Option<Duration> {
        self.rest_until.filter(|until| now < *until).map(|until| until - now)
    }

    /// True when `admit` would not reject (does not claim the trial).
    pub fn is_usable(&self, now: Instant) -> bool {
        if self.resting(now).is_some() {
            return false;
        }
        match self.inner {
            Inner::Closed => true,
            Inner::Open { until } => now >= until,
            Inner::HalfOpen { trial } => !trial,
        }
    }

    /// Time until the lane can be tried, when it cannot now.
    pub fn retry_in(&self, now: Instant) -> Option<Duration> {
        let cooling = match self.inner {
            Inner::Open { until } if now < until => Some(until - now),
            Inner::Closed | Inner::Open { .. } | Inner::HalfOpen { .. } => None,
        };
        cooling.max(self.resting(now))
    }

    /// Asks to send a request now; half-open hands out a single trial.
    pub fn admit(&mut self, now: Instant) -> Admission {
        if let Inner::Open { until } = self.inner {
            if now < until {
                return Admission::Reject { retry_in: until - now, cause: Unavailable::Cooling };
            }
            self.inner = Inner::HalfOpen { trial: false };
        }
        if let Some(rest) = self.resting(now) {
            return Admission::Reject { retry_in: rest, cause: Unavailable::RateLimited };
        }
        match self.inner {
            Inner::Closed => Admission::Admit,
            Inner::HalfOpen { trial: false } => {
                self.inner = Inner::HalfOpen { trial: true };
                Admission::Trial
            }
            Inner::HalfOpen { trial: true } | Inner::Open { .. } => {
                Admission::Reject { retry_in: Duration::ZERO, cause: Unavailable::TrialInFlight }
            }
        }
    }

    /// The upstream rate-limited us: rest for `retry_after` (the base
    /// cooldown when it gave none), capped by the maximum cooldown. Not a
    /// failure: nothing counts toward a trip, and a half-open trial that met
    /// the limit is released for the next request after the rest.
    pub fn record_rate_limited(&mut self, now: Instant, retry_after: Option<Duration>) {
        let rest = retry_after.unwrap_or(self.policy.base_cooldown).min(self.policy.max_cooldown);
        let until = now + rest;
        self.rest_until = Some(self.rest_until.map_or(until, |current| current.max(until)));
        self.release_trial();
    }

    /// The request succeeded. True when it closed a half-open breaker
    /// (its trial passed).
    pub fn record_success(&mut self, now: Instant) -> bool {
        let slot = self.slot(now);
        self.window.record(slot, false);
        self.consecutive = 0;
        if let Inner::HalfOpen { .. } = self.inner {
            self.close();
            return true;
        }
        false
    }

    fn close(&mut self) {
        self.inner = Inner::Closed;
        self.trips = 0;
        self.reason = None;
        self.window.clear();
    }

    /// Another instance of the fleet tripped this lane: open until `until`
    /// too (a later opening of our own stands), so no instance sends it
    /// traffic during the cooldown.
    pub fn open_remotely(&mut self, until: Instant, reason: &str) {
        match self.inner {
            Inner::Open { until: own } if own >= until => {}
            _ => {
                self.inner = Inner::Open { until };
                self.reason = Some(reason.to_owned());
            }
        }
    }

    /// Another instance's trial passed: the lane is closed fleet-wide.
    pub fn close_remotely(&mut self) {
        if !matches!(self.inner, Inner::Closed) {
            self.close();
        }
    }

    /// The request failed in a way that counts against the lane.
    /// `retry_after` is the upstream's floor for the cooldown. True when
    /// this failure opened the breaker.
    pub fn record_failure(&mut self, now: Instant, reason: &str, retry_after: Option<Duration>, jitter: f64) -> bool {
        let slot = self.slot(now);
        self.window.record(slot, true);
        self.consecutive += 1;
        let trip = match self.inner {
            Inner::HalfOpen { .. } => true,
            Inner::Open { .. } => false,
            Inner::Closed => {
                let (total, failed) = self.window.totals(slot);
                self.consecutive >= self.policy.consecutive_failures
                    || (total >= self.policy.min_requests
                        && f64::from(failed) >= self.policy.failure_rate * f64::from(total))
            }
        };
        if trip {
            self.trips += 1;
            let exponent = self.trips.saturating_sub(1).min(20);
            let base = self.policy.base_cooldown.saturating_mul(1 << exponent).min(self.policy.max_cooldown);
            self.open(now, base, retry_after, self.policy.max_cooldown, reason, jitter);
        }
        trip
    }

    /// The lane cannot serve until an operator acts: trip now, long cooldown.
    pub fn record_hard_down(&mut self, now: Instant, reason: &str, jitter: f64) {
        self.trips += 1;
        self.open(now, self.policy.hard_down_cooldown, None, Duration::MAX, reason, jitter);
    }

    /// A trial ended without telling anything about the lane (the caller's
    /// own mistake, or the caller left): let another request be the trial.
    pub fn release_trial(&mut self) {
        if let Inner::HalfOpen { trial: true } = self.inner {
            self.inner = Inner::HalfOpen { trial: false };
        }
    }

    /// A reloaded config's tuning for a breaker that keeps its state: its
    /// trip, cooldown and rest stand; a window of another length starts
    /// empty, since its slots would be misread.
    pub fn adopt_policy(&mut self, policy: BreakerPolicy) {
        if policy.window != self.policy.window {
            self.window.clear();
        }
        self.policy = policy;
    }

    /// An operator closed the breaker by hand: closed, no trips, no rest.
    pub fn reset(&mut self) {
        self.inner = Inner::Closed;
        self.consecutive = 0;
        self.trips = 0;
        self.reason = None;
        self.window.clear();
        self.rest_until = None;
    }

    /// An active probe succeeded: cut the cooldown short. The next real
    /// request is the half-open trial, so a probe never competes with it.
    pub fn record_probe_success(&mut self) {
        if let Inner::Open { .. } = self.inner {
            self.inner = Inner::HalfOpen { trial: false };
        }
    }

    /// True while the breaker is open (what probes look for).
    pub fn is_open(&self) -> bool {
        matches!(self.inner, Inner::Open { .. })
    }

    /// The state for `/stats`.
    pub fn snapshot(&self, now: Instant) -> BreakerSnapshot {
        let state = match self.inner {
            Inner::Closed => BreakerState::Closed,
            Inner::Open { until } if now >= until => BreakerState::HalfOpen,
            Inner::Open { .. } => BreakerState::Open,
            Inner::HalfOpen { .. } => BreakerState::HalfOpen,
        };
        BreakerSnapshot {
            state,
            reason: self.reason.clone(),
            retry_in: self.retry_in(now),
            trips: self.trips,
            resting: self.resting(now),
        }
    }

    /// Opens for `base` spread by the jitter and at most `cap`, or for the
    /// upstream's `Retry-After` (`floor`) when that is longer: its own word
    /// on when it will serve again.
    fn open(
        &mut self,
        now: Instant,
        base: Duration,
        floor: Option<Duration>,
        cap: Duration,
        reason: &str,
        jitter: f64,
    ) {
        let spread = self.policy.jitter.clamp(0.0, 1.0) * (2.0 * jitter.clamp(0.0, 1.0) - 1.0);
        let cooldown = base.mul_f64((1.0 + spread).max(0.0));
        let cooldown = cooldown.min(cap);
        let cooldown = floor.map_or(cooldown, |floor| cooldown.max(floor));
        self.inner = Inner::Open { until: now + cooldown };
        self.consecutive = 0;
        self.reason = Some(reason.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> BreakerPolicy {
        BreakerPolicy { jitter: 0.0, ..BreakerPolicy::default() }
    }

    #[test]
    fn trips_after_consecutive_failures_and_recovers_through_one_trial() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(policy(), t0);
        for _ in 0..4 {
            breaker.record_failure(t0, "500", None, 0.5);
            assert_eq!(breaker.admit(t0), Admission::Admit);
        }
        breaker.record_failure(t0, "500", None, 0.5);
        assert_eq!(
            breaker.admit(t0),
            Admission::Reject { retry_in: Duration::from_secs(5), cause: Unavailable::Cooling }
        );
        let later = t0 + Duration::from_secs(5);
        assert_eq!(breaker.admit(later), Admission::Trial);
        // Single flight: nobody else while the trial runs.
        assert_eq!(
            breaker.admit(later),
            Admission::Reject { retry_in: Duration::ZERO, cause: Unavailable::TrialInFlight }
        );
        breaker.record_success(later);
        assert_eq!(breaker.admit(later), Admission::Admit);
        assert_eq!(breaker.snapshot(later).state, BreakerState::Closed);
    }

    #[test]
    fn a_new_policy_keeps_the_trip_and_restarts_a_resized_window() {
        let t0 = Instant::now();
        let mut tripped = Breaker::new(policy(), t0);
        for _ in 0..5 {
            tripped.record_failure(t0, "500", None, 0.5);
        }
        tripped.adopt_policy(BreakerPolicy { consecutive_failures: 2, ..policy() });
        assert!(!tripped.is_usable(t0), "a reload does not close an open breaker");
        assert_eq!(tripped.snapshot(t0).state, BreakerState::Open);

        let mut counting = Breaker::new(policy(), t0);
        counting.record_failure(t0, "500", None, 0.5);
        counting.record_success(t0);
        counting.adopt_policy(BreakerPolicy { window: Duration::from_secs(10), ..policy() });
        assert_eq!(counting.window.buckets, Window::new().buckets, "slots of another width are not reread");
    }

    #[test]
    fn another_instances_trip_and_trial_apply_here() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(policy(), t0);
        breaker.open_remotely(t0 + Duration::from_secs(7), "500 (another instance)");
        assert!(!breaker.is_usable(t0));
        assert_eq!(breaker.retry_in(t0), Some(Duration::from_secs(7)));
        // An earlier remote opening never shortens ours.
        breaker.open_remotely(t0 + Duration::from_secs(1), "x");
        assert_eq!(breaker.retry_in(t0), Some(Duration::from_secs(7)));
        let later = t0 + Duration::from_secs(7);
        assert_eq!(breaker.admit(later), Admission::Trial);
        breaker.close_remotely();
        assert_eq!(breaker.admit(later), Admission::Admit);
        // A trial that passes here reports it, for the fleet.
        for _ in 0..5 {
            breaker.record_failure(later, "500", None, 0.5);
        }
        let after = later + Duration::from_secs(60);
        assert_eq!(breaker.admit(after), Admission::Trial);
        assert!(breaker.record_success(after));
        assert!(!breaker.record_success(after));
    }

    /// The cooldowns of nine trips in a row, each trial failing at once.
    fn cooldowns(policy: BreakerPolicy) -> Vec<u64> {
        let mut now = Instant::now();
        let mut breaker = Breaker::new(BreakerPolicy { consecutive_failures: 1, ..policy }, now);
        (0..9)
            .map(|_| {
                breaker.record_failure(now, "503", None, 0.5);
                let retry = breaker.retry_in(now).unwrap();
                now += retry;
                assert_eq!(breaker.admit(now), Admission::Trial);
                retry.as_secs()
            })
            .collect()
    }

    #[test]
    fn cooldown_doubles_per_trip_up_to_the_cap() {
        assert_eq!(cooldowns(policy()), vec![5, 10, 20, 20, 20, 20, 20, 20, 20]);
        let wide = BreakerPolicy { max_cooldown: Duration::from_secs(300), ..policy() };
        assert_eq!(cooldowns(wide), vec![5, 10, 20, 40, 80, 160, 300, 300, 300]);
    }

    /// A lane down for a while (7 s to 95 s), asked every 100 ms: whatever
    /// the jitter draws, it serves again within the cooldown cap (20 s) of
    /// recovering, plus the tick to the next request: its last trip came
    /// before it recovered, and no jittered cooldown exceeds the cap (before
    /// the cap, a cooldown that had doubled to 80-160 s stranded it for
    /// minutes). The recovery bound docs/guarantees.md states.
    #[test]
    fn a_lane_down_for_a_while_serves_within_the_cooldown_cap_of_recovering_under_any_jitter() {
        let tick = Duration::from_millis(100);
        let policy = BreakerPolicy::default();
        for outage_ms in [7_000u64, 23_500, 60_000, 95_300] {
            for seed in 0..250u64 {
                let t0 = Instant::now();
                let mut breaker = Breaker::new(policy, t0);
                // A small LCG: the jitter draws of one run.
                let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let mut draw = || {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    (state >> 11) as f64 / (1u64 << 53) as f64
                };
                let outage = Duration::from_millis(outage_ms);
                let mut served = None;
                for n in 0..3000u32 {
                    let now = t0 + tick * n;
                    match breaker.admit(now) {
                        Admission::Admit | Admission::Trial if now < t0 + outage => {
                            breaker.record_failure(now, "503", None, draw());
                        }
                        Admission::Admit | Admission::Trial => {
                            breaker.record_success(now);
                            served = Some(now);
                            break;
                        }
                        Admission::Reject { .. } => {}
                    }
                }
                let served = served.unwrap_or_else(|| panic!("seed {seed}: never served again"));
                let back = served - (t0 + outage);
                assert!(back <= policy.max_cooldown + tick, "outage {outage_ms} ms, seed {seed}: back after {back:?}");
            }
        }
    }

    #[test]
    fn retry_after_is_a_floor_and_jitter_spreads() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(BreakerPolicy { consecutive_failures: 1, ..policy() }, t0);
        breaker.record_failure(t0, "429", Some(Duration::from_secs(42)), 0.5);
        // The upstream's own word holds past the cap.
        assert_eq!(breaker.retry_in(t0), Some(Duration::from_secs(42)));

        let jittery = BreakerPolicy { consecutive_failures: 1, jitter: 0.2, ..BreakerPolicy::default() };
        let mut low = Breaker::new(jittery, t0);
        low.record_failure(t0, "500", None, 0.0);
        let mut high = Breaker::new(jittery, t0);
        high.record_failure(t0, "500", None, 0.999);
        assert_eq!(low.retry_in(t0), Some(Duration::from_secs(4)));
        assert!(high.retry_in(t0).unwrap() > Duration::from_millis(5990));
    }

    #[test]
    fn failure_rate_trips_only_with_volume() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(BreakerPolicy { consecutive_failures: 100, ..policy() }, t0);
        for i in 0..19 {
            if i % 2 == 0 {
                breaker.record_failure(t0, "500", None, 0.5);
            } else {
                breaker.record_success(t0);
            }
        }
        assert_eq!(breaker.admit(t0), Admission::Admit, "below minimum volume");
        breaker.record_failure(t0, "500", None, 0.5);
        assert!(matches!(breaker.admit(t0), Admission::Reject { .. }), "11 of 20 failed");
    }

    #[test]
    fn old_failures_leave_the_window() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(BreakerPolicy { consecutive_failures: 100, ..policy() }, t0);
        for _ in 0..15 {
            breaker.record_failure(t0, "500", None, 0.5);
        }
        let later = t0 + Duration::from_secs(61);
        for _ in 0..10 {
            breaker.record_success(later);
        }
        assert_eq!(breaker.admit(later), Admission::Admit);
    }

    #[test]
    fn hard_down_trips_at_once_and_a_failed_trial_reopens_longer() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(policy(), t0);
        breaker.record_hard_down(t0, "401", 0.5);
        assert_eq!(breaker.retry_in(t0), Some(Duration::from_secs(600)));
        let later = t0 + Duration::from_secs(600);
        assert_eq!(breaker.admit(later), Admission::Trial);
        breaker.record_failure(later, "401", None, 0.5);
        assert_eq!(breaker.retry_in(later), Some(Duration::from_secs(10)));
    }

    #[test]
    fn a_rate_limit_rests_the_lane_and_never_trips_it() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(BreakerPolicy { consecutive_failures: 1, ..policy() }, t0);
        for _ in 0..50 {
            breaker.record_rate_limited(t0, Some(Duration::from_secs(7)));
        }
        assert_eq!(
            breaker.admit(t0 + Duration::from_secs(1)),
            Admission::Reject { retry_in: Duration::from_secs(6), cause: Unavailable::RateLimited }
        );
        let after = t0 + Duration::from_secs(7);
        assert_eq!(breaker.admit(after), Admission::Admit, "rested, not tripped");
        assert_eq!(breaker.snapshot(after).trips, 0);
        // No Retry-After: the base cooldown; a huge one: the maximum cooldown.
        breaker.record_rate_limited(after, None);
        assert_eq!(breaker.retry_in(after), Some(Duration::from_secs(5)));
        breaker.record_rate_limited(after, Some(Duration::from_secs(86_400)));
        assert_eq!(breaker.retry_in(after), Some(Duration::from_secs(20)));
    }

    #[test]
    fn a_rate_limited_trial_is_released_not_failed() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(BreakerPolicy { consecutive_failures: 1, ..policy() }, t0);
        breaker.record_failure(t0, "500", None, 0.5);
        let later = t0 + Duration::from_secs(5);
        assert_eq!(breaker.admit(later), Admission::Trial);
        breaker.record_rate_limited(later, Some(Duration::from_secs(1)));
        assert!(!breaker.is_usable(later));
        let rested = later + Duration::from_secs(1);
        assert_eq!(breaker.admit(rested), Admission::Trial, "the next request is the trial");
        assert_eq!(breaker.snapshot(rested).trips, 1, "the rate limit added no trip");
    }

    #[test]
    fn an_operator_reset_closes_at_once() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(policy(), t0);
        breaker.record_hard_down(t0, "401", 0.5);
        breaker.record_rate_limited(t0, None);
        breaker.reset();
        assert_eq!(breaker.admit(t0), Admission::Admit);
        assert_eq!(
            breaker.snapshot(t0),
            BreakerSnapshot { state: BreakerState::Closed, reason: None, retry_in: None, trips: 0, resting: None }
        );
    }

    #[test]
    fn released_trials_and_probes() {
        let t0 = Instant::now();
        let mut breaker = Breaker::new(BreakerPolicy { consecutive_failures: 1, ..policy() }, t0);
        breaker.record_failure(t0, "500", None, 0.5);
        assert!(breaker.is_open());
        breaker.record_probe_success();
        assert_eq!(breaker.admit(t0), Admission::Trial);
        breaker.release_trial();
        assert_eq!(breaker.admit(t0), Admission::Trial);
        breaker.record_success(t0);
        assert_eq!(breaker.snapshot(t0).trips, 0);
    }
}
