//! Admission by leased slices (`storage.redis.lease`): this instance's
//! leases on chains' budgets and rates, taken, renewed and returned by one
//! script (`fleet_lease.lua`), so that a request whose chain has a lease
//! with room is admitted here, with no round trip. The slices' arithmetic
//! and a lease's local accounting are pure
//! (`switchyard_governance::lease`); this module keeps the table of
//! leases, sends their reports, and renews them in the background ahead of
//! running out.
//!
//! A lease is renewed a third of its `ttl` apart while it admits, and as
//! soon as one of its slices falls below half of what it was granted; the
//! request path calls Redis only when a chain has no lease or its slice is
//! empty (one call, as without leases) and, while that call or a renewal
//! is on its way, admits the chain's other requests per request. A lease
//! idle for a third of its `ttl`, or whose chain's limits changed, is
//! returned; every lease is returned at shutdown. A renewal that fails
//! drops the lease here: what it had settled goes to Redis as settlements
//! (counted at most once more: refused early, never late) and its hold
//! runs out within its `ttl`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use redis::Script;
use switchyard_governance::fleet::{read_admit, BadAnswer, Seen};
use switchyard_governance::lease::{Granted, Lease, LeaseBucket, Report, SliceLimits};
use switchyard_governance::{BucketId, Estimate, Refusal};

use crate::counters::{Fleet, FleetError};

/// Arguments per bucket of the lease script.
const ARGS_PER_BUCKET: usize = 11;

/// The lease script: the prelude, then its own.
pub(crate) const LEASE_SCRIPT: &str = concat!(include_str!("fleet_prelude.lua"), include_str!("fleet_lease.lua"));

/// How leases are taken (`storage.redis.lease`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leasing {
    /// How long a lease lives unless renewed.
    pub ttl: Duration,
    /// How big a slice may be.
    pub limits: SliceLimits,
}

/// What a chain's limits are, for a lease: read from this instance's
/// governor (the gateway's), again at every renewal so an edit reaches
/// the lease.
pub trait LeaseSpecs: Send + Sync {
    /// Each bucket's figures, or `None` when the chain cannot be leased.
    fn lease_buckets(&self, chain: &[BucketId], now_ms: u64) -> Option<Vec<LeaseBucket>>;

    /// Sends `cost`, settled on a lease that was dropped before reporting
    /// it, to Redis as the settlement of a request admitted locally.
    fn settle_unreported(&self, keys: &[String], chain: &Arc<[BucketId]>, cost: u64);
}

/// One chain's entry in the table.
enum Entry {
    /// The chain has a limit no slice holds: admitted per request (until
    /// the next renewal tick looks again).
    Unleasable,
    /// A lease, and its chain.
    Leased(Box<Leased>),
}

struct Leased {
    lease: Lease,
    chain: Arc<[BucketId]>,
    buckets: Vec<LeaseBucket>,
    /// A call for this lease is on its way: nothing else is sent for it.
    busy: bool,
}

/// What admission on a lease said.
#[derive(Debug)]
pub enum LeaseAdmit {
    /// Admitted on lease `id` (settle it with [`Fleet::settle_leased`]).
    Admitted(u64),
    /// Refused for the whole fleet (the lease script's answer).
    Refused(Refusal),
    /// No lease can admit this one: admit it per request.
    PerRequest,
}

/// This instance's leases.
pub struct Leases {
    settings: Leasing,
    script: Script,
    table: Mutex<HashMap<Arc<[String]>, Entry>>,
    specs: Mutex<Option<Weak<dyn LeaseSpecs>>>,
}

impl Leases {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<[String]>, Entry>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn specs(&self) -> Option<Arc<dyn LeaseSpecs>> {
        self.specs.lock().unwrap_or_else(PoisonError::into_inner).as_ref().and_then(Weak::upgrade)
    }

    /// The settings leases are taken with.
    pub fn settings(&self) -> Leasing {
        self.settings
    }
}

/// One call's answer: the refusal of a waiting request, what the fleet
/// had spent, and each bucket's fresh slice.
struct Answer {
    refusal: Option<Refusal>,
    seen: Seen,
    fresh: Vec<Granted>,
}

fn read_lease(answer: &[i64], chain: &[BucketId]) -> Result<Answer, BadAnswer> {
    let bad = || BadAnswer(answer.to_vec());
    let head = 6 + chain.len();
    if answer.len() != head + 3 * chain.len() {
        return Err(bad());
    }
    let (admit, grants) = answer.split_at(head);
    let (refusal, seen) = read_admit(admit, chain)?;
    let count = |n: i64| u64::try_from(n).map_err(|_| bad());
    let fresh = grants
        .chunks_exact(3)
        .map(|g| Ok(Granted { usd: count(g[0])?, requests: count(g[1])?, tokens: count(g[2])? }))
        .collect::<Result<Vec<_>, BadAnswer>>()?;
    Ok(Answer { refusal, seen, fresh })
}

/// How a call uses the lease script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Renew (or take) in the background.
    Renew = 1,
    /// Return.
    Return = 2,
    /// Take or renew for a request waiting on it.
    Waiting = 3,
}

impl Fleet {
    /// Starts admission by leased slices; `specs` reads chains' limits.
    /// Off (never called): admission is per request, as before.
    pub fn start_leasing(self: &Arc<Fleet>, settings: Leasing, specs: Weak<dyn LeaseSpecs>) {
        let leases = Leases {
            settings: Leasing { ttl: settings.ttl, limits: settings.limits.bounded() },
            script: Script::new(LEASE_SCRIPT),
            table: Mutex::new(HashMap::new()),
            specs: Mutex::new(Some(specs)),
        };
        if self.leases.set(leases).is_ok() {
            switchyard_tasks::service("fleet lease renewal", renew_leases(Arc::downgrade(self)));
        }
    }

    /// The leases, when leasing is on.
    pub fn leases(&self) -> Option<&Leases> {
        self.leases.get()
    }

    /// Admits `estimate` on `keys`' lease here, when it has room (no round
    /// trip; a slice running low is renewed in the background). `None`:
    /// it has none, or no room: [`Fleet::admit_leasing`] is next.
    pub fn admit_on_lease(self: &Arc<Fleet>, keys: &Arc<[String]>, estimate: Estimate, now_ms: u64) -> Option<u64> {
        let leases = self.leases.get()?;
        let (id, low) = {
            let mut table = leases.table();
            let Some(Entry::Leased(entry)) = table.get_mut(&**keys) else { return None };
            if !entry.lease.admit(estimate, now_ms) {
                return None;
            }
            let low = !entry.busy && entry.lease.low();
            if low {
                entry.busy = true;
            }
            (entry.lease.id, low)
        };
        if low {
            let fleet = Arc::clone(self);
            let keys = Arc::clone(keys);
            switchyard_tasks::work(async move {
                fleet.call_lease(&keys, Mode::Renew, Estimate::default()).await.ok();
            });
        }
        Some(id)
    }

    /// The request path's one call when `keys`' chain has no lease or its
    /// slice is empty: takes (or renews) its lease for this request and
    /// admits it there, or refuses it for the fleet. `PerRequest`: the
    /// chain cannot be leased, or a call for its lease is already on its
    /// way (this request is admitted per request meanwhile).
    pub async fn admit_leasing(
        self: &Arc<Fleet>,
        keys: &Arc<[String]>,
        chain: &Arc<[BucketId]>,
        estimate: Estimate,
        now_ms: u64,
    ) -> Result<(LeaseAdmit, Option<Seen>), FleetError> {
        let Some(leases) = self.leases.get() else { return Ok((LeaseAdmit::PerRequest, None)) };
        let known = match leases.table().get(&**keys) {
            // Retired (returned, its chain's limits changed): admitted per
            // request until its requests settle and it is forgotten.
            Some(Entry::Leased(entry)) if entry.lease.retired => return Ok((LeaseAdmit::PerRequest, None)),
            Some(Entry::Leased(_)) => true,
            Some(Entry::Unleasable) => return Ok((LeaseAdmit::PerRequest, None)),
            None => false,
        };
        if !known {
            let buckets = leases.specs().and_then(|specs| specs.lease_buckets(chain, now_ms));
            let mut table = leases.table();
            match buckets {
                None => {
                    table.insert(Arc::clone(keys), Entry::Unleasable);
                    return Ok((LeaseAdmit::PerRequest, None));
                }
                Some(buckets) => {
                    if !table.contains_key(&**keys) {
                        let lease = Lease::new(self.new_hold(), &buckets, now_ms);
                        let entry = Leased { lease, chain: Arc::clone(chain), buckets, busy: false };
                        table.insert(Arc::clone(keys), Entry::Leased(Box::new(entry)));
                    }
                }
            }
        }
        let answer = self.call_lease(keys, Mode::Waiting, estimate).await?;
        let Some(answer) = answer else { return Ok((LeaseAdmit::PerRequest, None)) };
        if let Some(refusal) = answer.refusal {
            return Ok((LeaseAdmit::Refused(refusal), Some(answer.seen)));
        }
        let mut table = leases.table();
        let admitted = match table.get_mut(&**keys) {
            Some(Entry::Leased(entry)) => match entry.lease.admit(estimate, now_ms) {
                true => LeaseAdmit::Admitted(entry.lease.id),
                // Requests admitted while the call was away took the room.
                false => LeaseAdmit::PerRequest,
            },
            _ => LeaseAdmit::PerRequest,
        };
        Ok((admitted, Some(answer.seen)))
    }

    /// Settles a request admitted on lease `id` of `keys` at `estimate`:
    /// `false` when that lease is gone (dropped after a failed call): the
    /// caller settles it as a request admitted locally.
    pub fn settle_leased(&self, keys: &[String], id: u64, estimate: Estimate, cost: u64, tokens: u64) -> bool {
        let Some(leases) = self.leases.get() else { return false };
        match leases.table().get_mut(keys) {
            Some(Entry::Leased(entry)) if entry.lease.id == id => {
                entry.lease.settle(estimate, cost, tokens);
                true
            }
            _ => false,
        }
    }

    /// Returns every lease (shutdown, after requests drained): what each
    /// spent is reported, its hold given back.
    pub async fn return_leases(self: &Arc<Fleet>) {
        let Some(leases) = self.leases.get() else { return };
        let keys: Vec<Arc<[String]>> = leases.table().keys().cloned().collect();
        for keys in keys {
            if let Some(Entry::Leased(entry)) = leases.table().get_mut(&*keys) {
                entry.lease.retired = true;
            }
            let _ = self.call_lease(&keys, Mode::Return, Estimate::default()).await;
        }
    }

    /// Leases this instance holds (returned ones still settling included).
    pub fn live_leases(&self) -> usize {
        self.leases.get().map_or(0, |l| l.table().values().filter(|e| matches!(e, Entry::Leased(_))).count())
    }

    /// One call of the lease script for `keys`' lease: its reports sent,
    /// its answer applied. `None`: a call for it is already on its way, or
    /// it is gone.
    async fn call_lease(
        self: &Arc<Fleet>,
        keys: &Arc<[String]>,
        mode: Mode,
        estimate: Estimate,
    ) -> Result<Option<Answer>, FleetError> {
        let Some(leases) = self.leases.get() else { return Ok(None) };
        let now = crate::counters::unix_ms();
        let ttl_ms = leases.settings.ttl.as_millis() as u64;
        let lease_end = now.saturating_add(ttl_ms);
        // The request: built under the lock, sent without it.
        let (command, chain, reports, id) = {
            let mut table = leases.table();
            let Some(Entry::Leased(entry)) = table.get_mut(&**keys) else { return Ok(None) };
            // A waiting request never waits on another call: the background
            // one sets `busy` before it is spawned.
            if mode == Mode::Waiting && entry.busy {
                return Ok(None);
            }
            entry.busy = true;
            let reports = match mode {
                Mode::Return => entry.lease.return_reports(),
                Mode::Renew | Mode::Waiting => entry.lease.reports(),
            };
            let limits = leases.settings.limits;
            let mut args = Vec::with_capacity(10 + entry.buckets.len() * ARGS_PER_BUCKET);
            args.extend([
                num(now),
                num(lease_end),
                mode as i64,
                num(estimate.cost),
                num(estimate.tokens),
                num(limits.share_permille),
                num(limits.max_usd),
                num(limits.max_requests),
                num(limits.max_tokens),
            ]);
            let mut command = redis::cmd("EVALSHA");
            command.arg(leases.script.get_hash()).arg(keys.len()).arg(&**keys).arg(&args);
            command.arg(format!("{:x}", entry.lease.id));
            for (bucket, report) in entry.buckets.iter().zip(&reports) {
                command.arg(&bucket.args()[..]).arg(&report_args(report)[..]);
            }
            (command, Arc::clone(&entry.chain), reports, entry.lease.id)
        };
        let answer = self.run_lease(&command).await;
        let answer = answer.and_then(|answer| Ok(read_lease(&answer, &chain)?));
        let answer = self.noted(answer);
        let mut table = leases.table();
        let Some(Entry::Leased(entry)) = table.get_mut(&**keys) else { return Ok(None) };
        if entry.lease.id != id {
            return Ok(None);
        }
        entry.busy = false;
        let answer = match answer {
            Ok(answer) => answer,
            Err(err) => {
                // Whether Redis applied the report is unknown: the lease is
                // dropped here and what it settled is sent as settlements
                // (at most counted twice: refused early, never late); its
                // hold runs out within the ttl.
                if let Some(Entry::Leased(entry)) = table.remove(&**keys) {
                    self.settle_dropped(keys, &entry);
                }
                return Err(err);
            }
        };
        if !answer.seen.seeded.is_empty() {
            self.report_seeded(answer.seen.seeded.iter().filter_map(|&i| chain.get(i).cloned()).collect());
        }
        for ((slice, sent), fresh) in entry.lease.slices.iter_mut().zip(reports).zip(&answer.fresh) {
            match mode {
                Mode::Return => slice.returned(sent),
                Mode::Renew | Mode::Waiting => slice.renewed(sent, *fresh),
            }
        }
        match mode {
            Mode::Return => {
                // Forgotten once nothing of it is left; otherwise its
                // requests settle into it and the next tick returns it again.
                if entry.lease.settled() {
                    table.remove(&**keys);
                }
            }
            Mode::Renew | Mode::Waiting => entry.lease.expires_ms = lease_end,
        }
        Ok(Some(answer))
    }

    /// Runs the lease script; a server that lost it is sent it again.
    async fn run_lease(&self, command: &redis::Cmd) -> Result<Vec<i64>, FleetError> {
        if !self.up.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(FleetError::Away);
        }
        let mut redis = self.redis.clone();
        match command.query_async::<Vec<i64>>(&mut redis).await {
            Err(err) if crate::counters::lost_scripts(&err) => {
                let _: String = redis::cmd("SCRIPT").arg("LOAD").arg(LEASE_SCRIPT).query_async(&mut redis).await?;
                Ok(command.query_async::<Vec<i64>>(&mut redis).await?)
            }
            other => Ok(other?),
        }
    }

    /// What a dropped lease had settled goes to Redis as a settlement of a
    /// request admitted locally (cost added, no hold).
    fn settle_dropped(&self, keys: &[String], entry: &Leased) {
        let spent = entry.lease.slices.iter().map(|s| s.unreported).max().unwrap_or(0);
        if spent == 0 {
            return;
        }
        let Some(specs) = self.leases.get().and_then(Leases::specs) else { return };
        specs.settle_unreported(keys, &entry.chain, spent);
    }
}

/// A slice's report as the script reads it (after the bucket's own six):
/// the hold Redis has (0 for a lease not yet taken: no member by that
/// name), the spend, the hold to keep, the requests and tokens left.
fn report_args(report: &Report) -> [i64; 5] {
    [
        num(report.held),
        num(report.spent),
        num(report.keep),
        num(report.requests),
        report.tokens.clamp(-switchyard_governance::fleet::SCRIPT_MAX, switchyard_governance::fleet::SCRIPT_MAX),
    ]
}

fn num(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX).min(switchyard_governance::fleet::SCRIPT_MAX)
}

/// Every third of a lease's ttl: renews the leases that admit, returns
/// the idle and the retired ones (and those whose chain's limits changed),
/// and looks again at chains found unleasable.
async fn renew_leases(fleet: Weak<Fleet>) {
    let Some(every) = fleet.upgrade().and_then(|f| f.leases.get().map(|l| l.settings.ttl / 3)) else { return };
    let mut ticker = tokio::time::interval(every.max(Duration::from_millis(100)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Some(fleet) = fleet.upgrade() else { return };
        let Some(leases) = fleet.leases.get() else { return };
        let now = crate::counters::unix_ms();
        let idle_ms = every.as_millis() as u64;
        let specs = leases.specs();
        let mut calls = Vec::new();
        {
            let mut table = leases.table();
            table.retain(|_, entry| matches!(entry, Entry::Leased(_)));
            for (keys, entry) in table.iter_mut() {
                let Entry::Leased(entry) = entry else { continue };
                if entry.busy {
                    continue;
                }
                // An edit (a budget, a rate, a reload) reaches the lease here.
                let now_buckets = specs.as_ref().and_then(|s| s.lease_buckets(&entry.chain, now));
                let same = now_buckets.as_ref().is_some_and(|b| same_limits(b, &entry.buckets));
                match now_buckets {
                    Some(buckets) if same => entry.buckets = buckets,
                    _ => entry.lease.retired = true,
                }
                let idle = entry.lease.used_ms.saturating_add(idle_ms) <= now;
                if entry.lease.retired || idle {
                    entry.lease.retired = true;
                    calls.push((Arc::clone(keys), Mode::Return));
                } else {
                    calls.push((Arc::clone(keys), Mode::Renew));
                }
            }
        }
        for (keys, mode) in calls {
            let _ = fleet.call_lease(&keys, mode, Estimate::default()).await;
        }
    }
}

/// Whether a chain's limits are still those its lease was taken on (the
/// seeds and windows may move; caps and rates may not).
fn same_limits(now: &[LeaseBucket], then: &[LeaseBucket]) -> bool {
    now.len() == then.len() && now.iter().zip(then).all(|(a, b)| a.cap == b.cap && a.rpm == b.rpm && a.tpm == b.tpm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_the_admission_answer_then_three_grants_a_bucket() {
        let chain = [BucketId::Key(Arc::from("k")), BucketId::Group(Arc::from("g"))];
        let answer = read_lease(&[0, 0, -1, 0, 0, 0, 5, -1, 100, 2, 30, 0, 0, 0], &chain).unwrap();
        assert!(answer.refusal.is_none());
        assert_eq!(answer.fresh[0], Granted { usd: 100, requests: 2, tokens: 30 });
        assert_eq!(answer.seen.spent, vec![Some(5), None]);
        // A refusal names its bucket.
        let refused = read_lease(&[1, 2, 900, 0, 0, 0, 5, 7, 0, 0, 0, 0, 0, 0], &chain).unwrap();
        assert_eq!(refused.refusal.unwrap().bucket, chain[1]);
        // A short or negative answer is a bad answer, not a panic.
        assert!(read_lease(&[0, 0, -1, 0, 0, 0, 5, -1, 100, 2], &chain).is_err());
        assert!(read_lease(&[0, 0, -1, 0, 0, 0, 5, -1, -100, 2, 30, 0, 0, 0], &chain).is_err());
    }
}
