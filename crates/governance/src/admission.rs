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
//! then rates, quotas and concurrency. A budget that says so
//! (`on_exhaust.downgrade`) answers an admission that offers it with the
//! downgrade instead (see [`Governor::admit_with`]). Time is passed in
//! (milliseconds since the Unix epoch); nothing here reads a clock.

/// Maps on the admission path hash with foldhash: their keys are key
/// hashes and ids the gateway made, and SipHash cost more than the lookup.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use crate::money::NanoUsd;
use crate::rate::{Gcra, RateCheck};
use crate::spec::{Quota, Trigger};

pub use crate::spec::{BucketSpec, Budget, Limits};

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
    /// The requests inside a key or group that name one model or pool
    /// (`owner` is `key:<id>` or `group:<name>`): its `per_model` limits.
    Scoped {
        /// Whose limits: `key:<id>` or `group:<name>`.
        owner: Arc<str>,
        /// The model or pool named.
        name: Arc<str>,
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
            BucketId::Scoped { owner, name } => match owner.split_once(':') {
                Some((kind, owner)) => write!(f, "`{name}` in {kind} `{owner}`"),
                None => write!(f, "`{name}` in `{owner}`"),
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
    /// The bucket's budget downgrades rather than refuse, and why it would
    /// (only when the admission offered downgrades): with
    /// [`Trigger::Spent`] the refusal stands unless the request goes to the
    /// cheaper pool; with the others the budget still had room.
    pub downgrade: Option<Trigger>,
}

impl Refusal {
    /// A refusal by `bucket` of `kind`, offering no downgrade.
    pub fn new(kind: RefusalKind, bucket: BucketId) -> Refusal {
        Refusal { kind, bucket, downgrade: None }
    }
}

/// The span of a rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    /// A second (`rps`, `tps`).
    Second,
    /// A minute (`rpm`, `tpm`).
    Minute,
}

impl Per {
    fn as_str(self) -> &'static str {
        match self {
            Per::Second => "second",
            Per::Minute => "minute",
        }
    }
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
    /// Requests per second or minute.
    Requests {
        /// Until one more fits.
        retry_in_ms: u64,
        /// The limit's span.
        per: Per,
    },
    /// Tokens per second or minute (`None`: this request alone is larger
    /// than the limit).
    Tokens {
        /// Until the estimate fits.
        retry_in_ms: Option<u64>,
        /// The limit's span.
        per: Per,
    },
    /// A quota of its calendar window is used up (`None`: this request
    /// alone is larger than the quota).
    Quota {
        /// Which.
        quota: Quota,
        /// Until its window turns.
        retry_in_ms: Option<u64>,
    },
    /// Requests in flight.
    Concurrency,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bucket = &self.bucket;
        match self.kind {
            RefusalKind::Budget { .. } => write!(f, "the budget of {bucket} is exhausted"),
            RefusalKind::Requests { per, .. } => {
                write!(f, "{bucket} is over its requests-per-{} limit", per.as_str())
            }
            RefusalKind::Tokens { retry_in_ms: Some(_), per } => {
                write!(f, "{bucket} is over its tokens-per-{} limit", per.as_str())
            }
            RefusalKind::Tokens { retry_in_ms: None, per } => {
                write!(f, "this request alone needs more tokens than {bucket} allows in a {}", per.as_str())
            }
            RefusalKind::Quota { quota, retry_in_ms } => {
                let window = match quota.window {
                    crate::window::Window::Hour => "an hour",
                    crate::window::Window::Day => "a day",
                    _ => "a month",
                };
                let cap = match quota.metric {
                    crate::spec::Metric::Usd => format!("${}", crate::money::usd(quota.cap)),
                    metric => format!("{} {}", quota.cap, metric.as_str()),
                };
                match retry_in_ms {
                    Some(_) => write!(f, "{bucket} has used its quota of {cap} {window} (`{}`)", quota.name()),
                    None => write!(f, "this request alone needs more than {bucket}'s quota of {cap} {window}"),
                }
            }
            RefusalKind::Concurrency => write!(f, "{bucket} has as many requests in flight as it may"),
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

/// One quota's counters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QuotaState {
    pub(crate) quota: Quota,
    /// Start (Unix seconds) of the window `used` belongs to.
    pub(crate) window_start: i64,
    /// Used in that window.
    pub(crate) used: u64,
    /// Held by requests in flight.
    pub(crate) held: u64,
}

impl QuotaState {
    pub(crate) fn roll(&mut self, now_ms: u64) {
        let start = self.quota.window.start((now_ms / 1000) as i64);
        if start != self.window_start {
            self.window_start = start;
            self.used = 0;
        }
    }

    /// Why `amount` does not fit (`None` in the refusal: never will).
    fn check(&self, amount: u64, now_ms: u64) -> Result<(), Option<u64>> {
        if amount > self.quota.cap {
            return Err(None);
        }
        if self.used.saturating_add(self.held).saturating_add(amount) > self.quota.cap {
            let retry = self.quota.window.next_start((now_ms / 1000) as i64).map(|next| next as u64 * 1000 - now_ms);
            return Err(Some(retry.unwrap_or(0)));
        }
        Ok(())
    }
}

/// One bucket's live counters.
#[derive(Debug, Clone)]
pub(crate) struct BucketState {
    pub(crate) spec: BucketSpec,
    /// Start (Unix seconds) of the budget window `spent` belongs to.
    window_start: i64,
    /// Settled spend in that window.
    pub(crate) spent: NanoUsd,
    /// Reserved by requests in flight.
    reserved: NanoUsd,
    requests: Option<Gcra>,
    tokens: Option<Gcra>,
    requests_per_second: Option<Gcra>,
    tokens_per_second: Option<Gcra>,
    pub(crate) quotas: Vec<QuotaState>,
    in_flight: u64,
    /// The bucket's forecast says its budget runs out before its window
    /// ends (set from outside, by whoever watches the burn).
    pub(crate) short: bool,
}

impl BucketState {
    fn new(spec: BucketSpec) -> BucketState {
        let mut state = BucketState {
            window_start: i64::MIN,
            spent: 0,
            reserved: 0,
            requests: None,
            tokens: None,
            requests_per_second: None,
            tokens_per_second: None,
            quotas: Vec::new(),
            in_flight: 0,
            short: false,
            spec: BucketSpec::default(),
        };
        state.respec(spec, 0);
        state
    }

    /// Takes `spec`'s limits, keeping what its rates and quotas have used.
    fn respec(&mut self, spec: BucketSpec, now_ms: u64) {
        let resize = |limit: Option<u64>, current: Option<Gcra>, fresh: fn(u64) -> Gcra| {
            limit.map(|n| current.map_or_else(|| fresh(n), |g| g.resized(n, now_ms)))
        };
        let limits = &spec.limits;
        self.requests = resize(limits.rpm, self.requests, Gcra::new);
        self.tokens = resize(limits.tpm, self.tokens, Gcra::new);
        self.requests_per_second = resize(limits.rps, self.requests_per_second, Gcra::per_second);
        self.tokens_per_second = resize(limits.tps, self.tokens_per_second, Gcra::per_second);
        let before = std::mem::take(&mut self.quotas);
        self.quotas = limits
            .quotas()
            .map(|quota| {
                let kept = before.iter().find(|q| (q.quota.metric, q.quota.window) == (quota.metric, quota.window));
                match kept {
                    Some(kept) => QuotaState { quota, ..*kept },
                    None => QuotaState { quota, window_start: i64::MIN, used: 0, held: 0 },
                }
            })
            .collect();
        self.spec = spec;
    }

    /// Moves `spent` to the window holding `now_ms`.
    pub(crate) fn roll(&mut self, now_ms: u64) {
        let Some(budget) = &self.spec.budget else { return };
        let start = budget.window.start((now_ms / 1000) as i64);
        if start != self.window_start {
            self.window_start = start;
            self.spent = 0;
        }
    }

    fn budget_left(&self) -> Option<NanoUsd> {
        let budget = self.spec.budget.as_ref()?;
        Some(budget.cap().saturating_sub(self.spent.saturating_add(self.reserved)))
    }

    /// Why this bucket's budget would downgrade a request costing `cost`,
    /// if it downgrades at all (its budget rolled to now).
    fn downgrade(&self, cost: NanoUsd) -> Option<Trigger> {
        let budget = self.spec.budget.as_ref()?;
        let downgrade = budget.on_exhaust.as_ref()?;
        let left = self.budget_left()?;
        if cost > left || left == 0 {
            Some(Trigger::Spent)
        } else if budget.downgrade_from().is_some_and(|from| self.spent.saturating_add(self.reserved) >= from) {
            Some(Trigger::Threshold)
        } else if downgrade.forecast && self.short {
            Some(Trigger::Forecast)
        } else {
            None
        }
    }
}

/// A bucket's figures, for `/stats`, the admin API and routing signals.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    /// Each quota: its name, what its window used and what is held.
    pub quotas: Vec<QuotaView>,
}

/// A quota's figures in its current window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct QuotaView {
    /// `tpd`, `rph`, `usd_per_month`, ...
    pub name: &'static str,
    /// The cap (nano-USD for a USD quota).
    pub cap: u64,
    /// Used in the current window.
    pub used: u64,
    /// Held by requests in flight.
    pub held: u64,
}

/// Every bucket's counters. The gateway keeps one behind a lock held only
/// for an admission, settlement or release, never across I/O.
#[derive(Debug, Default)]
pub struct Governor {
    pub(crate) buckets: HashMap<BucketId, BucketState>,
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
    /// ledger, for its window: [`Governor::seed_spent`],
    /// [`Governor::seed_quota`]): a new bucket with a budget or quotas, a
    /// budget whose window changed, or a new quota knows no use yet.
    pub fn set_spec(&mut self, id: BucketId, spec: BucketSpec, now_ms: u64) -> bool {
        match self.buckets.get_mut(&id) {
            Some(state) => {
                let reset = state.spec.budget.as_ref().map(|b| b.window) != spec.budget.as_ref().map(|b| b.window);
                if reset {
                    state.window_start = i64::MIN;
                    state.spent = 0;
                }
                let budgeted = spec.budget.is_some();
                state.respec(spec, now_ms);
                (reset && budgeted) || state.quotas.iter().any(|q| q.window_start == i64::MIN)
            }
            None => {
                if matches!(id, BucketId::EndUser { .. }) {
                    self.make_room_for_end_user();
                    self.end_users += 1;
                }
                let state = BucketState::new(spec);
                let unseeded = state.spec.budget.is_some() || !state.quotas.is_empty();
                self.buckets.insert(id, state);
                unseeded
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

    /// Forgets every bucket `keep` says no to (per-model buckets of limits
    /// that are gone).
    pub fn retain(&mut self, mut keep: impl FnMut(&BucketId) -> bool) {
        self.buckets.retain(|id, _| matches!(id, BucketId::EndUser { .. }) || keep(id));
    }

    /// Sets a bucket's settled spend in the window starting at
    /// `window_start` (from the ledger, at boot or after a price change).
    pub fn seed_spent(&mut self, id: &BucketId, window_start: i64, spent: NanoUsd) {
        if let Some(state) = self.buckets.get_mut(id) {
            state.window_start = window_start;
            state.spent = spent;
        }
    }

    /// Sets what a bucket's quota `name` used in the window starting at
    /// `window_start` (from the ledger, or a fleet's shared counters).
    pub fn seed_quota(&mut self, id: &BucketId, name: &str, window_start: i64, used: u64) {
        let Some(state) = self.buckets.get_mut(id) else { return };
        if let Some(quota) = state.quotas.iter_mut().find(|q| q.quota.name() == name) {
            quota.window_start = window_start;
            quota.used = used;
        }
    }

    /// Notes whether a bucket's forecast says its budget runs out before
    /// its window ends (what `on_exhaust.forecast` downgrades on).
    pub fn set_short(&mut self, id: &BucketId, short: bool) {
        if let Some(state) = self.buckets.get_mut(id) {
            state.short = short;
        }
    }

    /// The spec of a bucket.
    pub fn spec(&self, id: &BucketId) -> Option<&BucketSpec> {
        self.buckets.get(id).map(|s| &s.spec)
    }

    /// Whether a bucket's forecast says its budget runs out before its
    /// window ends.
    pub fn short(&self, id: &BucketId) -> bool {
        self.buckets.get(id).is_some_and(|s| s.short)
    }

    /// Admits a request whose chain is `chain` and that may cost `estimate`,
    /// at `now_ms`; on success every bucket holds the reservation. A
    /// downgrade is never offered: a spent budget refuses.
    pub fn admit(&mut self, chain: &Arc<[BucketId]>, estimate: Estimate, now_ms: u64) -> Result<Reservation, Refusal> {
        self.admit_with(chain, estimate, now_ms, false)
    }

    /// [`Governor::admit`], offering downgrades when `offer_downgrade`: a
    /// bucket whose budget says `on_exhaust.downgrade` and cannot pay for
    /// the request (or is past its `at`, or forecast to run out) answers a
    /// refusal naming its [`Trigger`], which the caller meets by admitting
    /// the request again at the cheaper pool's estimate, without the offer.
    /// A bucket that refuses outright (no downgrade) wins over one that
    /// would downgrade, and one that cannot pay over one that only warns.
    pub fn admit_with(
        &mut self,
        chain: &Arc<[BucketId]>,
        estimate: Estimate,
        now_ms: u64,
        offer_downgrade: bool,
    ) -> Result<Reservation, Refusal> {
        // Budgets first, anywhere on the chain: a spent budget is the answer
        // even when a rate limit is also full.
        let mut downgrade: Option<Refusal> = None;
        for id in chain.iter() {
            let Some(state) = self.buckets.get_mut(id) else { continue };
            state.roll(now_ms);
            let Some(left) = state.budget_left() else { continue };
            let trigger = if offer_downgrade { state.downgrade(estimate.cost) } else { None };
            let fits = estimate.cost <= left && left > 0;
            if fits && trigger.is_none() {
                continue;
            }
            let retry = state
                .spec
                .budget
                .as_ref()
                .and_then(|b| b.window.next_start((now_ms / 1000) as i64))
                .map(|next| (next as u64 * 1000).saturating_sub(now_ms));
            let refusal =
                Refusal { kind: RefusalKind::Budget { retry_in_ms: retry }, bucket: id.clone(), downgrade: trigger };
            match trigger {
                None => return Err(refusal),
                Some(Trigger::Spent) if !downgrade.as_ref().is_some_and(|d| d.downgrade == Some(Trigger::Spent)) => {
                    downgrade = Some(refusal);
                }
                Some(_) if downgrade.is_none() => downgrade = Some(refusal),
                Some(_) => {}
            }
        }
        if let Some(refusal) = downgrade {
            return Err(refusal);
        }
        let tokens = estimate.tokens;
        for id in chain.iter() {
            let Some(state) = self.buckets.get_mut(id) else { continue };
            let refuse = |kind| Err(Refusal::new(kind, id.clone()));
            for (limit, per) in [(state.requests_per_second, Per::Second), (state.requests, Per::Minute)] {
                if let Some(RateCheck::Full { retry_in_ms }) = limit.map(|g| g.check(1, now_ms)) {
                    return refuse(RefusalKind::Requests { retry_in_ms, per });
                }
            }
            for (limit, per) in [(state.tokens_per_second, Per::Second), (state.tokens, Per::Minute)] {
                match limit.map(|g| g.check(tokens, now_ms)) {
                    None | Some(RateCheck::Room) => {}
                    Some(RateCheck::Full { retry_in_ms }) => {
                        return refuse(RefusalKind::Tokens { retry_in_ms: Some(retry_in_ms), per });
                    }
                    Some(RateCheck::TooLarge) => return refuse(RefusalKind::Tokens { retry_in_ms: None, per }),
                }
            }
            for quota in &mut state.quotas {
                quota.roll(now_ms);
                if let Err(retry_in_ms) = quota.check(quota.quota.amount(tokens, estimate.cost), now_ms) {
                    return refuse(RefusalKind::Quota { quota: quota.quota, retry_in_ms });
                }
            }
            if state.spec.limits.concurrent.is_some_and(|cap| state.in_flight >= cap) {
                return refuse(RefusalKind::Concurrency);
            }
        }
        for id in chain.iter() {
            let Some(state) = self.buckets.get_mut(id) else { continue };
            state.reserved = state.reserved.saturating_add(estimate.cost);
            for (limit, cost) in [
                (&mut state.requests, 1),
                (&mut state.requests_per_second, 1),
                (&mut state.tokens, tokens),
                (&mut state.tokens_per_second, tokens),
            ] {
                if let Some(limit) = limit {
                    limit.commit(cost, now_ms);
                }
            }
            for quota in &mut state.quotas {
                quota.held = quota.held.saturating_add(quota.quota.amount(tokens, estimate.cost));
            }
            state.in_flight += 1;
        }
        Ok(Reservation { chain: chain.clone(), estimate })
    }

    /// The request finished: replace its reservation with what it cost.
    pub fn settle(&mut self, reservation: &Reservation, actual: Actual, now_ms: u64) {
        self.settle_as(reservation, actual, now_ms, 1);
    }

    /// Settles `reservation` to `actual`, counting `requests` (0 or 1)
    /// against its request quotas.
    fn settle_as(&mut self, reservation: &Reservation, actual: Actual, now_ms: u64, requests: u64) {
        // An upstream's usage is bounded like a caller's numbers.
        let bounded = Estimate::bounded(actual.tokens, actual.cost);
        let actual = Actual { tokens: bounded.tokens, cost: bounded.cost };
        let held = reservation.estimate;
        for id in reservation.chain.iter() {
            let Some(state) = self.buckets.get_mut(id) else { continue };
            state.reserved = state.reserved.saturating_sub(held.cost);
            state.roll(now_ms);
            state.spent = state.spent.saturating_add(actual.cost);
            let delta = actual.tokens as i64 - held.tokens as i64;
            for tokens in [&mut state.tokens, &mut state.tokens_per_second].into_iter().flatten() {
                tokens.adjust(delta, now_ms);
            }
            for quota in &mut state.quotas {
                quota.held = quota.held.saturating_sub(quota.quota.amount(held.tokens, held.cost));
                quota.roll(now_ms);
                let used = match quota.quota.metric {
                    crate::spec::Metric::Requests => requests,
                    _ => quota.quota.amount(actual.tokens, actual.cost),
                };
                quota.used = quota.used.saturating_add(used);
            }
            state.in_flight = state.in_flight.saturating_sub(1);
        }
    }

    /// The request was answered from the response cache: it costs nothing
    /// and is given back to every request limit of its chain.
    pub fn settle_hit(&mut self, reservation: &Reservation, now_ms: u64) {
        self.settle_as(reservation, Actual::default(), now_ms, 0);
        for id in reservation.chain.iter() {
            let Some(state) = self.buckets.get_mut(id) else { continue };
            for requests in [&mut state.requests, &mut state.requests_per_second].into_iter().flatten() {
                requests.adjust(-1, now_ms);
            }
        }
    }

    /// The request failed before costing anything: give the reservation
    /// back (the request still counts against its request limits).
    pub fn release(&mut self, reservation: &Reservation, now_ms: u64) {
        self.settle(reservation, Actual::default(), now_ms);
    }

    /// What a fleet's shared counters say a bucket has spent in its
    /// current window: this instance's counters take it when it is more
    /// than they know (they decide alone while the shared ones are away).
    pub fn learn_spent(&mut self, id: &BucketId, spent: NanoUsd, now_ms: u64) {
        if let Some(state) = self.buckets.get_mut(id) {
            state.roll(now_ms);
            state.spent = state.spent.max(spent);
        }
    }

    /// A request this instance admitted on a fleet's shared counters
    /// settled at `cost`: its own counters count the spend too (they hold
    /// no reservation of it).
    pub fn add_spent(&mut self, chain: &[BucketId], cost: NanoUsd, now_ms: u64) {
        let cost = cost.min(MAX_REQUEST_COST);
        for id in chain {
            if let Some(state) = self.buckets.get_mut(id) {
                state.roll(now_ms);
                state.spent = state.spent.saturating_add(cost);
            }
        }
    }

    /// A bucket's settled spend in its current window at `now_ms`.
    pub fn spent(&mut self, id: &BucketId, now_ms: u64) -> Option<NanoUsd> {
        let state = self.buckets.get_mut(id)?;
        state.roll(now_ms);
        Some(state.spent)
    }

    /// A bucket's quota `name`'s use in its current window at `now_ms`.
    pub fn quota_used(&mut self, id: &BucketId, name: &str, now_ms: u64) -> Option<u64> {
        let quota = self.buckets.get_mut(id)?.quotas.iter_mut().find(|q| q.quota.name() == name)?;
        quota.roll(now_ms);
        Some(quota.used)
    }

    /// A bucket's figures at `now_ms`.
    pub fn view(&mut self, id: &BucketId, now_ms: u64) -> Option<BucketView> {
        let state = self.buckets.get_mut(id)?;
        state.roll(now_ms);
        for quota in &mut state.quotas {
            quota.roll(now_ms);
        }
        Some(BucketView {
            spent: state.spent,
            reserved: state.reserved,
            budget_left: state.budget_left(),
            requests_headroom: state.requests.map(|g| g.headroom(now_ms)),
            tokens_headroom: state.tokens.map(|g| g.headroom(now_ms)),
            in_flight: state.in_flight,
            quotas: state
                .quotas
                .iter()
                .map(|q| QuotaView { name: q.quota.name(), cap: q.quota.cap, used: q.used, held: q.held })
                .collect(),
        })
    }

    /// The least budget left on a chain (`None`: no budget anywhere).
    pub fn budget_left(&mut self, chain: &[BucketId], now_ms: u64) -> Option<NanoUsd> {
        chain
            .iter()
            .filter_map(|id| {
                let state = self.buckets.get_mut(id)?;
                state.roll(now_ms);
                state.budget_left()
            })
            .min()
    }

    /// The least rate headroom on a chain, as a share (`None`: no limit).
    pub fn rate_headroom(&mut self, chain: &[BucketId], now_ms: u64) -> Option<f64> {
        chain
            .iter()
            .filter_map(|id| self.buckets.get(id))
            .flat_map(|s| [s.requests, s.tokens, s.requests_per_second, s.tokens_per_second])
            .flatten()
            .map(|g| g.headroom(now_ms))
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
    use crate::window::Window;

    const NOW: u64 = 1_796_067_065_000;

    fn key() -> BucketId {
        BucketId::Key(Arc::from("k1"))
    }
    fn group(name: &str) -> BucketId {
        BucketId::Group(Arc::from(name))
    }
    fn budget(usd: f64, window: Window) -> BucketSpec {
        BucketSpec { budget: Some(Budget::new(usd, window)), limits: Limits::default() }
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
            budget: Some(Budget::new(1.0, Window::Total)),
            limits: Limits { rpm: Some(1), concurrent: Some(1), ..Limits::default() },
        };
        governor.set_spec(key(), spec, 0);
        let chain: Arc<[BucketId]> = Arc::from([key()]);
        let held = governor.admit(&chain, cost(0.4), NOW).unwrap();
        assert_eq!(
            governor.admit(&chain, cost(0.4), NOW).unwrap_err().kind,
            RefusalKind::Requests { retry_in_ms: 60_000, per: Per::Minute }
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
            BucketSpec { budget: None, limits: Limits { tpm: Some(1_000), concurrent: Some(2), ..Limits::default() } },
            0,
        );
        let chain: Arc<[BucketId]> = Arc::from([group("g")]);
        let big = Estimate { tokens: 600, cost: 0 };
        let a = governor.admit(&chain, big, NOW).unwrap();
        assert!(matches!(
            governor.admit(&chain, big, NOW).unwrap_err().kind,
            RefusalKind::Tokens { retry_in_ms: Some(_), .. }
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
            RefusalKind::Tokens { retry_in_ms: None, per: Per::Minute }
        );
    }

    fn downgrading(usd: f64, at: Option<f64>, forecast: bool) -> BucketSpec {
        let on_exhaust = Some(crate::spec::Downgrade { pool: "cheap".into(), at, forecast });
        BucketSpec { budget: Some(Budget { on_exhaust, ..Budget::new(usd, Window::Day) }), limits: Limits::default() }
    }

    #[test]
    fn a_budget_that_downgrades_says_why_and_the_cheaper_request_is_held_against_the_same_cap() {
        let mut governor = Governor::new();
        governor.set_spec(key(), BucketSpec::default(), 0);
        governor.set_spec(group("acme"), downgrading(1.0, None, false), 0);
        let chain: Arc<[BucketId]> = Arc::from([key(), group("acme")]);
        let dear = governor.admit_with(&chain, cost(0.7), NOW, true).unwrap();
        governor.settle(&dear, Actual { tokens: 1, cost: from_usd(0.7) }, NOW);
        // $0.30 left: the dear pool's $0.70 no longer fits.
        let refused = governor.admit_with(&chain, cost(0.7), NOW, true).unwrap_err();
        assert_eq!((refused.bucket.clone(), refused.downgrade), (group("acme"), Some(Trigger::Spent)));
        assert!(matches!(refused.kind, RefusalKind::Budget { .. }));
        // Not offered: the plain refusal.
        assert_eq!(governor.admit(&chain, cost(0.7), NOW).unwrap_err().downgrade, None);
        // The cheaper pool's estimate is held on the same cap: three fit, the fourth does not.
        for _ in 0..3 {
            governor.admit(&chain, cost(0.1), NOW).unwrap();
        }
        assert!(governor.admit(&chain, cost(0.1), NOW).is_err(), "degrade, then refuse");
        assert_eq!(governor.view(&group("acme"), NOW).unwrap().budget_left, Some(0));
    }

    #[test]
    fn a_downgrade_at_a_share_or_on_the_forecast_and_a_refusing_bucket_wins() {
        let mut governor = Governor::new();
        governor.set_spec(group("acme"), downgrading(1.0, Some(50.0), true), 0);
        let chain: Arc<[BucketId]> = Arc::from([group("acme")]);
        let held = governor.admit_with(&chain, cost(0.5), NOW, true).unwrap();
        // Half the cap is held: past `at`, though a request still fits.
        let refused = governor.admit_with(&chain, cost(0.1), NOW, true).unwrap_err();
        assert_eq!(refused.downgrade, Some(Trigger::Threshold));
        governor.release(&held, NOW);
        assert!(governor.admit_with(&chain, cost(0.1), NOW, true).is_ok());
        governor.set_short(&group("acme"), true);
        assert_eq!(governor.admit_with(&chain, cost(0.1), NOW, true).unwrap_err().downgrade, Some(Trigger::Forecast));
        // A bucket that refuses outright is the answer, wherever it is.
        governor.set_spec(key(), budget(0.05, Window::Day), 0);
        let both: Arc<[BucketId]> = Arc::from([group("acme"), key()]);
        let refused = governor.admit_with(&both, cost(0.1), NOW, true).unwrap_err();
        assert_eq!((refused.bucket, refused.downgrade), (key(), None));
    }

    #[test]
    fn quotas_count_their_calendar_window_and_per_second_rates_their_second() {
        let mut governor = Governor::new();
        let limits = Limits { tpd: Some(1_000), rph: Some(3), rps: Some(2), ..Limits::default() };
        governor.set_spec(key(), BucketSpec { budget: None, limits }, 0);
        let chain: Arc<[BucketId]> = Arc::from([key()]);
        let tokens = |n| Estimate { tokens: n, cost: 0 };
        let a = governor.admit(&chain, tokens(600), NOW).unwrap();
        let b = governor.admit(&chain, tokens(300), NOW).unwrap();
        let refused = governor.admit(&chain, tokens(1), NOW).unwrap_err();
        assert!(matches!(refused.kind, RefusalKind::Requests { per: Per::Second, .. }), "{refused:?}");
        let later = NOW + 1_000;
        let refused = governor.admit(&chain, tokens(200), later).unwrap_err();
        let RefusalKind::Quota { quota, retry_in_ms: Some(retry) } = refused.kind else { panic!("{refused:?}") };
        assert_eq!(quota.name(), "tpd");
        assert_eq!(retry, Window::Day.next_start((later / 1000) as i64).unwrap() as u64 * 1000 - later);
        assert!(refused.to_string().contains("quota of 1000 tokens a day"), "{refused}");
        // Settled shorter than held: the difference comes back.
        governor.settle(&a, Actual { tokens: 100, cost: 0 }, later);
        governor.release(&b, later);
        let c = governor.admit(&chain, tokens(800), later).unwrap();
        governor.settle(&c, Actual { tokens: 800, cost: 0 }, later);
        // Three requests this hour (a release counts too).
        let refused = governor.admit(&chain, tokens(1), later + 2_000).unwrap_err();
        assert!(matches!(
            refused.kind,
            RefusalKind::Quota { quota: Quota { metric: crate::spec::Metric::Requests, .. }, .. }
        ));
        let view = governor.view(&key(), later).unwrap();
        assert_eq!(
            view.quotas.iter().map(|q| (q.name, q.used, q.held)).collect::<Vec<_>>(),
            [("rph", 3, 0), ("tpd", 900, 0)]
        );
        // The next day starts from nothing.
        let tomorrow = Window::Day.next_start((NOW / 1000) as i64).unwrap() as u64 * 1000 + 3_600_000;
        assert!(governor.admit(&chain, tokens(1_000), tomorrow).is_ok());
        assert!(matches!(
            governor.admit(&chain, tokens(1_001), tomorrow + 1_000).unwrap_err().kind,
            RefusalKind::Quota { retry_in_ms: None, .. }
        ));
    }

    #[test]
    fn a_per_model_bucket_refuses_only_its_own_requests() {
        let mut governor = Governor::new();
        let scoped = BucketId::Scoped { owner: "group:acme".into(), name: "gpt-4o".into() };
        governor.set_spec(group("acme"), BucketSpec::default(), 0);
        governor.set_spec(
            scoped.clone(),
            BucketSpec { budget: None, limits: Limits { tpd: Some(100), ..Limits::default() } },
            0,
        );
        let dear: Arc<[BucketId]> = Arc::from([group("acme"), scoped.clone()]);
        let other: Arc<[BucketId]> = Arc::from([group("acme")]);
        let held = governor.admit(&dear, Estimate { tokens: 100, cost: 0 }, NOW).unwrap();
        governor.settle(&held, Actual { tokens: 100, cost: 0 }, NOW);
        let refused = governor.admit(&dear, Estimate { tokens: 1, cost: 0 }, NOW).unwrap_err();
        assert_eq!(refused.bucket, scoped);
        assert!(refused.to_string().starts_with("`gpt-4o` in group `acme` has used its quota"), "{refused}");
        assert!(governor.admit(&other, Estimate { tokens: 1_000, cost: 0 }, NOW).is_ok());
    }

    #[test]
    fn counters_learn_a_fleets_spend_without_counting_it_twice() {
        let mut governor = Governor::new();
        governor.set_spec(key(), budget(1.0, Window::Day), 0);
        let chain: Arc<[BucketId]> = Arc::from([key()]);
        // Settled through the fleet: counted here too.
        governor.add_spent(&chain, from_usd(0.25), NOW);
        // The fleet says more was spent (other instances): taken.
        governor.learn_spent(&key(), from_usd(0.75), NOW);
        // It says less (an answer older than a settlement here): kept.
        governor.learn_spent(&key(), from_usd(0.5), NOW);
        assert_eq!(governor.spent(&key(), NOW), Some(from_usd(0.75)));
        assert!(governor.admit(&chain, cost(0.3), NOW).is_err(), "0.75 spent of 1: no room for 0.3");
        assert!(governor.admit(&chain, cost(0.2), NOW).is_ok());
        // A new window starts from nothing.
        let tomorrow = NOW + 86_400_000;
        governor.add_spent(&chain, u64::MAX, tomorrow);
        assert_eq!(governor.spent(&key(), tomorrow), Some(MAX_REQUEST_COST), "bounded as a settlement is");
    }

    proptest::proptest! {
        /// A quota never holds more than its cap in a window when requests
        /// settle within what they held.
        #[test]
        fn a_quota_never_passes_its_cap(
            steps in proptest::collection::vec((1u64..400, 0u64..=100, proptest::bool::ANY), 1..300),
        ) {
            let mut governor = Governor::new();
            governor.set_spec(key(), BucketSpec { budget: None, limits: Limits { tpd: Some(1_000), ..Limits::default() } }, 0);
            let chain: Arc<[BucketId]> = Arc::from([key()]);
            let mut held: Vec<Reservation> = Vec::new();
            for (tokens, used_pct, settle_one) in steps {
                if settle_one && !held.is_empty() {
                    let reservation = held.remove(0);
                    let actual = reservation.estimate.tokens * used_pct / 100;
                    governor.settle(&reservation, Actual { tokens: actual, cost: 0 }, NOW);
                } else if let Ok(reservation) = governor.admit(&chain, Estimate { tokens, cost: 0 }, NOW) {
                    held.push(reservation);
                }
                let view = governor.view(&key(), NOW).unwrap();
                proptest::prop_assert!(view.quotas[0].used + view.quotas[0].held <= 1_000);
            }
        }

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
