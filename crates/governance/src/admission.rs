//! Admission: a request runs only when every bucket on its key's chain —
//! the key's own, its group's, then that group's parents — has room in its
//! budget, its rate limits and its concurrency. Admission *reserves* an
//! estimate on every bucket; completion settles the reservation to what the
//! request really cost, and failure releases it. A budget therefore never
//! overshoots by more than what requests in flight under-reserved (a
//! request's reservation is its worst case whenever its output is capped
//! and its prompt counted no lower than the vendor counts it).
//!
//! Refusals come in a fixed order: a budget anywhere on the chain first,
//! then rate and concurrency limits. Time is passed in (milliseconds since
//! the Unix epoch); nothing here reads a clock.

/// Maps on the admission path hash with foldhash: their keys are key
/// hashes and ids the gateway made, and SipHash cost more than the lookup.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::money::NanoUsd;
use crate::rate::{Gcra, RateCheck};
use crate::window::Window;

/// A spending cap over a window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// The cap, in USD.
    pub usd: f64,
    /// The window it applies to.
    pub window: Window,
}

impl Budget {
    /// The cap in nano-USD.
    pub fn cap(&self) -> NanoUsd {
        crate::money::from_usd(self.usd)
    }
}

/// Rate and concurrency limits of a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Limits {
    /// Requests per minute.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpm: Option<u64>,
    /// Tokens (input plus output) per minute.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpm: Option<u64>,
    /// Requests in flight at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrent: Option<u64>,
}

impl Limits {
    /// True when no limit is set.
    pub fn is_empty(&self) -> bool {
        self.rpm.is_none() && self.tpm.is_none() && self.concurrent.is_none()
    }
}

/// What a bucket enforces.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct BucketSpec {
    /// Spending cap.
    pub budget: Option<Budget>,
    /// Rate and concurrency limits.
    #[serde(default)]
    pub limits: Limits,
}

/// A bucket: a key's own, or a group's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BucketId {
    /// A virtual key (by id).
    Key(Arc<str>),
    /// A group (by name).
    Group(Arc<str>),
    /// One end user inside a key or group (`owner` is `key:<id>` or
    /// `group:<name>`): the owner's per-end-user budget and limits.
    EndUser {
        /// Whose end user: `key:<id>` or `group:<name>`.
        owner: Arc<str>,
        /// The end user's id, as the request named it (length-capped).
        user: Arc<str>,
    },
}

/// The most end-user buckets kept at once: past it, idle ones (nothing
/// reserved, nothing in flight) are forgotten and read again from the
/// ledger when their end user returns.
pub const MAX_END_USER_BUCKETS: usize = 100_000;

impl fmt::Display for BucketId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BucketId::Key(id) => write!(f, "key `{id}`"),
            BucketId::Group(name) => write!(f, "group `{name}`"),
            BucketId::EndUser { owner, user } => match owner.split_once(':') {
                Some((kind, name)) => write!(f, "end user `{user}` of {kind} `{name}`"),
                None => write!(f, "end user `{user}` of `{owner}`"),
            },
        }
    }
}

/// What admission expects a request to cost at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Estimate {
    /// Input plus the most output it may produce.
    pub tokens: u64,
    /// Those tokens at the dearest candidate lane's prices.
    pub cost: NanoUsd,
}

/// The most output tokens one reply is reserved for, whatever the caller
/// asks (no model writes 2³² tokens in one reply).
pub const MAX_OUTPUT_TOKENS: u64 = 1 << 32;

/// The most replies one request is reserved for (OpenAI allows 128).
pub const MAX_CHOICES: u64 = 128;

/// The most tokens one request is reserved for.
pub const MAX_REQUEST_TOKENS: u64 = 1 << 40;

/// The most one request is reserved for (nano-USD, about $70,000): below
/// 10¹⁴, so every sum a fleet's script computes from it stays an exact
/// integer that Lua prints without an exponent.
pub const MAX_REQUEST_COST: u64 = 1 << 46;

impl Estimate {
    /// An estimate within the bounds every store and script can hold
    /// ([`MAX_REQUEST_TOKENS`] twice, for input and output, and
    /// [`MAX_REQUEST_COST`]).
    pub fn bounded(tokens: u64, cost: NanoUsd) -> Estimate {
        Estimate { tokens: tokens.min(2 * MAX_REQUEST_TOKENS), cost: cost.min(MAX_REQUEST_COST) }
    }
}

/// What a request really cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Actual {
    /// Input plus output tokens.
    pub tokens: u64,
    /// At the serving lane's prices.
    pub cost: NanoUsd,
}

/// Why a request was refused, and by which bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What ran out.
    pub kind: RefusalKind,
    /// Where.
    pub bucket: BucketId,
}

/// What ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// The budget of the current window (`retry_in_ms` until the window
    /// turns; `None` for a lifetime budget).
    Budget {
        /// Until the next window.
        retry_in_ms: Option<u64>,
    },
    /// Requests per minute.
    Requests {
        /// Until one more fits.
        retry_in_ms: u64,
    },
    /// Tokens per minute (`None`: this request alone is larger than the limit).
    Tokens {
        /// Until the estimate fits.
        retry_in_ms: Option<u64>,
    },
    /// Requests in flight.
    Concurrency,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            RefusalKind::Budget { .. } => write!(f, "the budget of {} is exhausted", self.bucket),
            RefusalKind::Requests { .. } => write!(f, "{} is over its requests-per-minute limit", self.bucket),
            RefusalKind::Tokens { retry_in_ms: Some(_) } => {
                write!(f, "{} is over its tokens-per-minute limit", self.bucket)
            }
            RefusalKind::Tokens { retry_in_ms: None } => {
                write!(f, "this request alone needs more tokens than {} allows in a minute", self.bucket)
            }
            RefusalKind::Concurrency => write!(f, "{} has as many requests in flight as it may", self.bucket),
        }
    }
}

/// An admitted request's hold on its chain; settle or release it once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// The buckets it holds.
    pub chain: Arc<[BucketId]>,
    /// What it reserved.
    pub estimate: Estimate,
}

/// One bucket's live counters.
#[derive(Debug, Clone)]
struct BucketState {
    spec: BucketSpec,
    /// Start (Unix seconds) of the budget window `spent` belongs to.
    window_start: i64,
    /// Settled spend in that window.
    spent: NanoUsd,
    /// Reserved by requests in flight.
    reserved: NanoUsd,
    requests: Option<Gcra>,
    tokens: Option<Gcra>,
    in_flight: u64,
}

impl BucketState {
    fn new(spec: BucketSpec) -> BucketState {
        BucketState {
            spec,
            window_start: i64::MIN,
            spent: 0,
            reserved: 0,
            requests: spec.limits.rpm.map(Gcra::new),
            tokens: spec.limits.tpm.map(Gcra::new),
            in_flight: 0,
        }
    }

    /// Moves `spent` to the window holding `now_ms`.
    fn roll(&mut self, now_ms: u64) {
        let Some(budget) = self.spec.budget else { return };
        let start = budget.window.start((now_ms / 1000) as i64);
        if start != self.window_start {
            self.window_start = start;
            self.spent = 0;
        }
    }

    fn budget_left(&self) -> Option<NanoUsd> {
        let budget = self.spec.budget?;
        Some(budget.cap().saturating_sub(self.spent.saturating_add(self.reserved)))
    }
}

/// A bucket's figures, for `/stats`, the admin API and routing signals.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BucketView {
    /// Settled spend in the current window.
    pub spent: NanoUsd,
    /// Reserved by requests in flight.
    pub reserved: NanoUsd,
    /// What is left of the budget, if it has one.
    pub budget_left: Option<NanoUsd>,
    /// Share of the requests-per-minute limit left.
    pub requests_headroom: Option<f64>,
    /// Share of the tokens-per-minute limit left.
    pub tokens_headroom: Option<f64>,
    /// Requests in flight.
    pub in_flight: u64,
}

/// Every bucket's counters. The gateway keeps one behind a lock held only
/// for an admission, settlement or release, never across I/O.
#[derive(Debug, Default)]
pub struct Governor {
    buckets: HashMap<BucketId, BucketState>,
    /// How many of them are end users' (kept under [`MAX_END_USER_BUCKETS`]).
    end_users: usize,
}

impl Governor {
    /// An empty governor.
    pub fn new() -> Governor {
        Governor::default()
    }

    /// Creates a bucket or changes its spec, keeping its counters.
    /// Returns true when the bucket's spend must be read again (from the
    /// ledger, for its window: [`Governor::seed_spent`]): a new bucket with
    /// a budget, or a budget whose window changed, knows no spend yet.
    pub fn set_spec(&mut self, id: BucketId, spec: BucketSpec, now_ms: u64) -> bool {
        match self.buckets.get_mut(&id) {
            Some(state) => {
                let reset = state.spec.budget.map(|b| b.window) != spec.budget.map(|b| b.window);
                if reset {
                    state.window_start = i64::MIN;
                    state.spent = 0;
                }
                state.requests = spec.limits.rpm.map(|n| state.requests.map_or(Gcra::new(n), |g| g.resized(n, now_ms)));
                state.tokens = spec.limits.tpm.map(|n| state.tokens.map_or(Gcra::new(n), |g| g.resized(n, now_ms)));
                state.spec = spec;
                reset && spec.budget.is_some()
            }
            None => {
                if matches!(id, BucketId::EndUser { .. }) {
                    self.make_room_for_end_user();
                    self.end_users += 1;
                }
                self.buckets.insert(id, BucketState::new(spec));
                spec.budget.is_some()
            }
        }
    }

    /// Keeps end-user buckets under [`MAX_END_USER_BUCKETS`]: at the cap,
    /// the idle ones go (their spend is in the ledger).
    fn make_room_for_end_user(&mut self) {
        if self.end_users < MAX_END_USER_BUCKETS {
            return;
        }
        self.buckets
            .retain(|id, state| !matches!(id, BucketId::EndUser { .. }) || state.reserved > 0 || state.in_flight > 0);
        self.end_users = self.buckets.keys().filter(|id| matches!(id, BucketId::EndUser { .. })).count();
    }

    /// Forgets a bucket (a deleted group or key).
    pub fn remove(&mut self, id: &BucketId) {
        if self.buckets.remove(id).is_some() && matches!(id, BucketId::EndUser { .. }) {
            self.end_users -= 1;
        }
    }

    /// Sets a bucket's settled spend in the window starting at
    /// `window_start` (from the ledger, at boot or after a price change).
    pub fn seed_spent(&mut self, id: &BucketId, window_start: i64, spent: NanoUsd) {
        if let Some(state) = self.buckets.get_mut(id) {
            state.window_start = window_start;
            state.spent = spent;
        }
    }

    /// The spec of a bucket.
    pub fn spec(&self, id: &BucketId) -> Option<BucketSpec> {
        self.buckets.get(id).map(|s| s.spec)
    }

    /// Admits a request whose chain is `chain` and that may cost `estimate`,
    /// at `now_ms`; on success every bucket holds the reservation.
    pub fn admit(&mut self, chain: &Arc<[BucketId]>, estimate: Estimate, now_ms: u64) -> Result<Reservation, Refusal> {
        // Budgets first, anywhere on the chain: a spent budget is the answer
        // even when a rate limit is also full.
        for id in chain.iter() {
            let Some(state) = self.buckets.get_mut(id) else { continue };
            state.roll(now_ms);
            if let Some(left) = state.budget_left() {
                if estimate.cost > left || left == 0 {
                    let retry = state
                        .spec
                        .budget
                        .and_then(|b| b.window.next_start((now_ms / 1000) as i64))
                        .map(|next| (next as u64 * 1000).saturating_sub(now_ms));
                    return Err(Refusal { kind: RefusalKind::Budget { retry_in_ms: retry }, bucket: id.clone() });
                }
            }
        }
        for id in chain.iter() {
            let Some(state) = self.buckets.get(id) else { continue };
            if let Some(requests) = &state.requests {
                if let RateCheck::Full { retry_in_ms } = requests.check(1, now_ms) {
                    return Err(Refusal { kind: RefusalKind::Requests { retry_in_ms }, bucket: id.clone() });
                }
            }
            if let Some(tokens) = &state.tokens {
                match tokens.check(estimate.tokens, now_ms) {
                    RateCheck::Room => {}
                    RateCheck::Full { retry_in_ms } => {
                        let kind = RefusalKind::Tokens { retry_in_ms: Some(retry_in_ms) };
                        return Err(Refusal { kind, bucket: id.clone() });
                    }
                    RateCheck::TooLarge => {
                        return Err(Refusal { kind: RefusalKind::Tokens { retry_in_ms: None }, bucket: id.clone() });
                    }
                }
            }
            if state.spec.limits.concurrent.is_some_and(|cap| state.in_flight >= cap) {
                return Err(Refusal { kind: RefusalKind::Concurrency, bucket: id.clone() });
            }
        }
        for id in chain.iter() {
            let Some(state) = self.buckets.get_mut(id) else { continue };
            state.reserved = state.reserved.saturating_add(estimate.cost);
            if let Some(requests) = &mut state.requests {
                requests.commit(1, now_ms);
            }
            if let Some(tokens) = &mut state.tokens {
                tokens.commit(estimate.tokens, now_ms);
            }
            state.in_flight += 1;
        }
        Ok(Reservation { chain: chain.clone(), estimate })
    }

    /// The request finished: replace its reservation with what it cost.
    pub fn settle(&mut self, reservation: &Reservation, actual: Actual, now_ms: u64) {
        // An upstream's usage is bounded like a caller's numbers.
        let bounded = Estimate::bounded(actual.tokens, actual.cost);
        let actual = Actual { tokens: bounded.tokens, cost: bounded.cost };
        for id in reservation.chain.iter() {
            let Some(state) = self.buckets.get_mut(id) else { continue };
            state.reserved = state.reserved.saturating_sub(reservation.estimate.cost);
            state.roll(now_ms);
            state.spent = state.spent.saturating_add(actual.cost);
            if let Some(tokens) = &mut state.tokens {
                let delta = actual.tokens as i64 - reservation.estimate.tokens as i64;
                tokens.adjust(delta, now_ms);
            }
            state.in_flight = state.in_flight.saturating_sub(1);
        }
    }

    /// The request was answered from the response cache: it costs nothing
    /// and is given back to every requests-per-minute limit of its chain.
    pub fn settle_hit(&mut self, reservation: &Reservation, now_ms: u64) {
        self.settle(reservation, Actual::default(), now_ms);
        for id in reservation.chain.iter() {
            if let Some(requests) = self.buckets.get_mut(id).and_then(|state| state.requests.as_mut()) {
                requests.adjust(-1, now_ms);
            }
        }
    }

    /// The request failed before costing anything: give the reservation
    /// back (the request still counts against requests per minute).
    pub fn release(&mut self, reservation: &Reservation, now_ms: u64) {
        self.settle(reservation, Actual::default(), now_ms);
    }

    /// A bucket's settled spend in its current window at `now_ms`.
    pub fn spent(&mut self, id: &BucketId, now_ms: u64) -> Option<NanoUsd> {
        let state = self.buckets.get_mut(id)?;
        state.roll(now_ms);
        Some(state.spent)
    }

    /// A bucket's figures at `now_ms`.
    pub fn view(&mut self, id: &BucketId, now_ms: u64) -> Option<BucketView> {
        let state = self.buckets.get_mut(id)?;
        state.roll(now_ms);
        Some(BucketView {
            spent: state.spent,
            reserved: state.reserved,
            budget_left: state.budget_left(),
            requests_headroom: state.requests.map(|g| g.headroom(now_ms)),
            tokens_headroom: state.tokens.map(|g| g.headroom(now_ms)),
            in_flight: state.in_flight,
        })
    }

    /// The least budget left on a chain (`None`: no budget anywhere).
    pub fn budget_left(&mut self, chain: &[BucketId], now_ms: u64) -> Option<NanoUsd> {
        chain.iter().filter_map(|id| self.view(id, now_ms)?.budget_left).min()
    }

    /// The least rate headroom on a chain, as a share (`None`: no limit).
    pub fn rate_headroom(&mut self, chain: &[BucketId], now_ms: u64) -> Option<f64> {
        chain
            .iter()
            .filter_map(|id| self.view(id, now_ms))
            .flat_map(|v| [v.requests_headroom, v.tokens_headroom])
            .flatten()
            .reduce(f64::min)
    }

    /// Reservations outstanding, summed over every bucket.
    pub fn reserved_total(&self) -> NanoUsd {
        self.buckets.values().map(|s| s.reserved).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::money::from_usd;

    const NOW: u64 = 1_796_067_065_000;

    fn key() -> BucketId {
        BucketId::Key(Arc::from("k1"))
    }
    fn group(name: &str) -> BucketId {
        BucketId::Group(Arc::from(name))
    }
    fn budget(usd: f64, window: Window) -> BucketSpec {
        BucketSpec { budget: Some(Budget { usd, window }), limits: Limits::default() }
    }
    fn cost(usd: f64) -> Estimate {
        Estimate { tokens: 100, cost: from_usd(usd) }
    }

    #[test]
    fn every_bucket_on_the_chain_must_have_room_and_the_refusal_names_it() {
        let mut governor = Governor::new();
        governor.set_spec(key(), budget(10.0, Window::Day), 0);
        governor.set_spec(group("team"), budget(5.0, Window::Month), 0);
        governor.set_spec(group("org"), budget(100.0, Window::Total), 0);
        let chain: Arc<[BucketId]> = Arc::from([key(), group("team"), group("org")]);
        let first = governor.admit(&chain, cost(3.0), NOW).unwrap();
        let refused = governor.admit(&chain, cost(3.0), NOW).unwrap_err();
        assert_eq!(refused.bucket, group("team"), "the team's 5 USD hold only one 3-USD reservation");
        assert!(matches!(refused.kind, RefusalKind::Budget { retry_in_ms: Some(_) }));
        assert_eq!(refused.to_string(), "the budget of group `team` is exhausted");
        // Settling to a smaller actual cost frees the difference.
        governor.settle(&first, Actual { tokens: 10, cost: from_usd(1.0) }, NOW);
        assert!(governor.admit(&chain, cost(3.0), NOW).is_ok());
        assert_eq!(governor.view(&group("team"), NOW).unwrap().spent, from_usd(1.0));
    }

    #[test]
    fn a_new_window_starts_with_nothing_spent() {
        let mut governor = Governor::new();
        governor.set_spec(key(), budget(1.0, Window::Minute), 0);
        let chain: Arc<[BucketId]> = Arc::from([key()]);
        let held = governor.admit(&chain, cost(1.0), NOW).unwrap();
        governor.settle(&held, Actual { tokens: 1, cost: from_usd(1.0) }, NOW);
        let refused = governor.admit(&chain, cost(0.5), NOW).unwrap_err();
        let RefusalKind::Budget { retry_in_ms: Some(retry) } = refused.kind else { panic!("{refused:?}") };
        assert!(retry <= 60_000);
        assert!(governor.admit(&chain, cost(0.5), NOW + retry).is_ok());
    }

    #[test]
    fn budget_refusals_come_before_rate_and_concurrency() {
        let mut governor = Governor::new();
        let spec = BucketSpec {
            budget: Some(Budget { usd: 1.0, window: Window::Total }),
            limits: Limits { rpm: Some(1), tpm: None, concurrent: Some(1) },
        };
        governor.set_spec(key(), spec, 0);
        let chain: Arc<[BucketId]> = Arc::from([key()]);
        let held = governor.admit(&chain, cost(0.4), NOW).unwrap();
        assert_eq!(
            governor.admit(&chain, cost(0.4), NOW).unwrap_err().kind,
            RefusalKind::Requests { retry_in_ms: 60_000 }
        );
        assert!(matches!(
            governor.admit(&chain, cost(0.9), NOW).unwrap_err().kind,
            RefusalKind::Budget { retry_in_ms: None }
        ));
        governor.release(&held, NOW);
        assert_eq!(governor.view(&key(), NOW).unwrap().reserved, 0);
    }

    #[test]
    fn concurrency_and_tokens_per_minute() {
        let mut governor = Governor::new();
        governor.set_spec(
            group("g"),
            BucketSpec { budget: None, limits: Limits { rpm: None, tpm: Some(1_000), concurrent: Some(2) } },
            0,
        );
        let chain: Arc<[BucketId]> = Arc::from([group("g")]);
        let big = Estimate { tokens: 600, cost: 0 };
        let a = governor.admit(&chain, big, NOW).unwrap();
        assert!(matches!(
            governor.admit(&chain, big, NOW).unwrap_err().kind,
            RefusalKind::Tokens { retry_in_ms: Some(_) }
        ));
        // The reply was short: the tokens come back at settlement.
        governor.settle(&a, Actual { tokens: 100, cost: 0 }, NOW);
        let b = governor.admit(&chain, big, NOW).unwrap();
        let c = governor.admit(&chain, Estimate { tokens: 10, cost: 0 }, NOW).unwrap();
        assert_eq!(
            governor.admit(&chain, Estimate { tokens: 1, cost: 0 }, NOW).unwrap_err().kind,
            RefusalKind::Concurrency
        );
        governor.release(&b, NOW);
        governor.release(&c, NOW);
        assert_eq!(
            governor.admit(&chain, Estimate { tokens: 5_000, cost: 0 }, NOW).unwrap_err().kind,
            RefusalKind::Tokens { retry_in_ms: None }
        );
    }

    proptest::proptest! {
        /// Whatever the interleaving of admissions and settlements, settled
        /// spend never passes the cap when no request costs more than it
        /// reserved: the overshoot bound.
        #[test]
        fn spend_never_passes_the_cap_when_requests_stay_within_their_reservations(
            steps in proptest::collection::vec((1u64..300, 0u64..=100, proptest::bool::ANY), 1..300),
        ) {
            let mut governor = Governor::new();
            governor.set_spec(key(), budget(1.0, Window::Total), 0);
            governor.set_spec(group("g"), budget(0.7, Window::Total), 0);
            let chain: Arc<[BucketId]> = Arc::from([key(), group("g")]);
            let mut held: Vec<Reservation> = Vec::new();
            for (reserve_micro, used_pct, settle_one) in steps {
                if settle_one && !held.is_empty() {
                    let reservation = held.remove(0);
                    let actual = reservation.estimate.cost * used_pct / 100;
                    governor.settle(&reservation, Actual { tokens: 1, cost: actual }, NOW);
                } else if let Ok(reservation) = governor.admit(&chain, Estimate { tokens: 1, cost: reserve_micro * 1_000_000 }, NOW) {
                    held.push(reservation);
                }
                let spent = governor.view(&group("g"), NOW).unwrap().spent;
                proptest::prop_assert!(spent <= from_usd(0.7), "spent {}", spent);
            }
        }
    }
}
