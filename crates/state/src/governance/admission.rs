//! Admission and settlement on a key's chain of buckets: the pool
//! allow-list, then budgets, rates, quotas and concurrency, in a fleet's
//! Redis or this instance's counters (with `storage.on_redis_error`
//! deciding while Redis is away); a hold settled to what the request cost,
//! once. A request that names a model or pool with `per_model` limits on
//! its chain is held on those buckets too; a budget that downgrades rather
//! than refuse says so in the refusal ([`Denied::downgrade`]), and the
//! request is admitted again at the cheaper pool's estimate.

use std::sync::atomic::Ordering;

use std::sync::Arc;

use switchyard_fleet::lease::LeaseAdmit;
use switchyard_governance::{Actual, BucketId, Estimate, Refusal, RefusalKind, Reservation, Trigger};
use switchyard_ir::{ErrorInfo, ErrorKind};

use super::{now_ms, Caller, Governance, Hold, Refused};

/// A refusal at admission: the error, and when to retry (seconds).
#[derive(Debug, Clone)]
pub struct Denied {
    /// The error for the caller.
    pub info: ErrorInfo,
    /// `Retry-After`, when waiting helps.
    pub retry_after: Option<u64>,
    /// Refused for the key's own conduct (a rate or concurrency limit, a
    /// pool it may not use): what abuse suspension counts.
    pub own: bool,
    /// A budget on the chain downgrades rather than refuse: where to, why
    /// and whose budget (only when the admission offered downgrades). With
    /// [`Trigger::Spent`] the refusal stands unless the request goes there;
    /// otherwise the budget still had room for it.
    pub downgrade: Option<Box<DowngradeTo>>,
}

impl Denied {
    /// A refusal `info` that offers no downgrade.
    pub fn new(info: ErrorInfo, retry_after: Option<u64>, own: bool) -> Denied {
        Denied { info, retry_after, own, downgrade: None }
    }
}

/// Where a budget sends a request it will not pay for at its pool's prices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DowngradeTo {
    /// The cheaper pool.
    pub pool: String,
    /// Why.
    pub trigger: Trigger,
    /// Whose budget.
    pub bucket: BucketId,
}

impl Governance {
    /// Admits a call from `caller` naming `pool` that may cost `estimate`:
    /// the pool allow-list, then budgets, then rates, quotas and
    /// concurrency (with the `per_model` limits of `pool` on its chain).
    /// A budget that downgrades says where to in the refusal, when the
    /// caller's chain has one ([`Governance::admit_downgraded`] then
    /// admits it there).
    pub async fn admit(
        &self,
        caller: &Caller,
        pool: &str,
        estimate: Estimate,
        end_user: Option<&str>,
    ) -> Result<Hold, Denied> {
        self.admit_pool(caller, pool, estimate, end_user, caller.key.downgrades).await
    }

    /// Admits a request a budget downgraded to `pool` at that pool's
    /// `estimate`, against the same chain (and `pool`'s own `per_model`
    /// limits): no further downgrade is offered, so a budget that cannot
    /// pay even for this refuses.
    pub async fn admit_downgraded(
        &self,
        caller: &Caller,
        pool: &str,
        estimate: Estimate,
        end_user: Option<&str>,
    ) -> Result<Hold, Denied> {
        self.admit_pool(caller, pool, estimate, end_user, false).await
    }

    async fn admit_pool(
        &self,
        caller: &Caller,
        pool: &str,
        estimate: Estimate,
        end_user: Option<&str>,
        offer_downgrade: bool,
    ) -> Result<Hold, Denied> {
        if !caller.key.record.may_use(pool) {
            let message = format!("API key {} may not use `{pool}`", caller.key.record.prefix);
            let info = self.refuse(Refused::PoolNotAllowed, ErrorInfo::new(ErrorKind::PermissionDenied, message));
            return Err(Denied::new(info, None, true));
        }
        self.admit_named(caller, Some(pool), estimate, end_user, offer_downgrade).await
    }

    /// Whether `caller`'s key is granted `provider`'s raw route: a 403
    /// otherwise (counted as a pool it may not use; the key's own conduct).
    pub fn passthrough_grant(&self, caller: &Caller, provider: &str) -> Result<(), Denied> {
        if caller.key.record.may_pass_through(provider) {
            return Ok(());
        }
        let message = format!("API key {} may not use the raw route of `{provider}`", caller.key.record.prefix);
        let info = self.refuse(Refused::PoolNotAllowed, ErrorInfo::new(ErrorKind::PermissionDenied, message));
        Err(Denied::new(info, None, true))
    }

    /// Admits a raw-route request (its grant checked first,
    /// [`Governance::passthrough_grant`]) on `caller`'s chain: budgets (a
    /// spent one refuses), rates, quotas and concurrency. It holds nothing
    /// against a budget: the route has no pool to take a worst case from,
    /// and settles at what the reply states.
    pub async fn admit_passthrough(&self, caller: &Caller, end_user: Option<&str>) -> Result<Hold, Denied> {
        self.admit_named(caller, None, Estimate::default(), end_user, false).await
    }

    /// Admits a call from `caller` that may cost `estimate` on its chain's
    /// budgets, rates, quotas and concurrency, whatever it calls (an MCP
    /// tool call checks its own grants first).
    pub async fn admit_on_chain(
        &self,
        caller: &Caller,
        estimate: Estimate,
        end_user: Option<&str>,
    ) -> Result<Hold, Denied> {
        self.admit_named(caller, None, estimate, end_user, false).await
    }

    async fn admit_named(
        &self,
        caller: &Caller,
        name: Option<&str>,
        estimate: Estimate,
        end_user: Option<&str>,
        offer_downgrade: bool,
    ) -> Result<Hold, Denied> {
        let now = now_ms();
        let (base, base_keys) = caller.key.chain_for(name);
        // A named end user under a key or group with an end-user policy is
        // held on its own bucket too (built per request only then).
        let with_user = match end_user {
            Some(user) if !caller.key.end_users.is_empty() => Some(self.end_user_chain(caller, base, user, now)),
            _ => None,
        };
        let (chain, fleet_keys) = match &with_user {
            Some((chain, keys)) => (chain, keys),
            None => (base, base_keys),
        };
        let mut hold = 0;
        if let Some(fleet) = &self.fleet {
            let keys = fleet_keys;
            // Leasing (`storage.redis.lease`): admitted here on the chain's
            // slice when it has room; one call when it has none.
            if fleet.leases().is_some() {
                if let Some(id) = fleet.admit_on_lease(keys, estimate, now) {
                    return Ok(Hold::leased(chain, estimate, id, keys));
                }
                match fleet.admit_leasing(keys, chain, estimate, now).await {
                    Ok((LeaseAdmit::Admitted(id), seen)) => {
                        if let Some(seen) = &seen {
                            self.learn(chain, seen, now);
                        }
                        return Ok(Hold::leased(chain, estimate, id, keys));
                    }
                    Ok((LeaseAdmit::Refused(refusal), seen)) => {
                        if let Some(seen) = &seen {
                            self.learn(chain, seen, now);
                        }
                        return Err(self.refusal_error(&refusal));
                    }
                    // Not leasable, or its lease busy: per request, below.
                    // (Redis away: the per-request call below says so, and
                    // storage.on_redis_error decides.)
                    Ok((LeaseAdmit::PerRequest, _)) | Err(_) => {}
                }
            }
            hold = fleet.new_hold();
            // A bucket Redis does not know (never seen, or lost in a
            // restart) is seeded with what this instance knows for its
            // window: the ledger's when it read it, the fleet's in its last
            // answer, and what it settled since.
            let args = self.governor().fleet_admit_args(chain, estimate, fleet.lease_end(now), now, offer_downgrade);
            let answer = fleet.admit_seeing(keys, chain, args, estimate, hold).await;
            if let Ok((_, seen)) = &answer {
                self.learn(chain, seen, now);
            }
            match answer {
                Ok((switchyard_fleet::counters::Admitted::Held(hold), _)) => {
                    let reservation = Reservation { chain: chain.clone(), estimate };
                    return Ok(Hold { reservation, in_fleet: true, hold, fleet_keys: keys.clone(), leased: false });
                }
                Ok((switchyard_fleet::counters::Admitted::Refused(refusal), _)) => {
                    return Err(self.refusal_error(&refusal))
                }
                // Redis away, or a script refusing this one request: the
                // operator's choice decides for this request (only an
                // outage marks Redis away for the others).
                Err(_) if fleet.on_error == switchyard_config::OnRedisError::FailClosed => {
                    let info = ErrorInfo::new(
                        ErrorKind::Unavailable,
                        "budgets and rate limits cannot be checked right now (their store is unreachable); retry shortly",
                    )
                    .with_status(503);
                    return Err(Denied::new(info, Some(1), false));
                }
                // Fail open: this instance's own counters decide meanwhile.
                Err(_) => {
                    fleet.local_admissions.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        let admitted = self.governor().admit_with(chain, estimate, now, offer_downgrade);
        match admitted {
            Ok(reservation) => {
                Ok(Hold { reservation, in_fleet: false, hold, fleet_keys: fleet_keys.clone(), leased: false })
            }
            Err(refusal) => Err(self.refusal_error(&refusal)),
        }
    }

    /// `caller`'s chain with one bucket per end-user policy on it for
    /// `user`, each bucket's spec set from its policy (an override, or the
    /// default); a bucket new to this instance has its window's spend read
    /// from the ledger behind (admission never waits on a store).
    fn end_user_chain(
        &self,
        caller: &Caller,
        base: &Arc<[BucketId]>,
        user: &str,
        now: u64,
    ) -> (Arc<[BucketId]>, Arc<[String]>) {
        let user: Arc<str> = Arc::from(user);
        let mut chain: Vec<BucketId> = base.to_vec();
        let mut unseeded = Vec::new();
        {
            let mut governor = self.governor();
            for (owner, policy) in &caller.key.end_users {
                let id = BucketId::EndUser { owner: owner.clone(), user: user.clone() };
                let spec = policy.spec_for(&user);
                match governor.spec(&id).map(|current| *current == spec) {
                    // Known, and its policy unchanged: nothing to set.
                    Some(true) => {}
                    known => {
                        if governor.set_spec(id.clone(), spec, now) || known.is_none() {
                            unseeded.push(id.clone());
                        }
                    }
                }
                chain.push(id);
            }
        }
        if !unseeded.is_empty() {
            if let Some(me) = self.me.get().and_then(std::sync::Weak::upgrade) {
                switchyard_tasks::work(async move {
                    if let Err(err) = me.seed(&unseeded, now).await {
                        tracing::warn!(error = %err, "an end user's spend could not be read from the ledger");
                    }
                });
            }
        }
        let chain: Arc<[BucketId]> = chain.into();
        // Bucket names are a fleet's Redis keys: none without one.
        let keys = match self.fleet {
            Some(_) => switchyard_fleet::counters::bucket_names(&chain),
            None => caller.key.fleet_keys.clone(),
        };
        (chain, keys)
    }

    /// This instance's counters learn what the fleet had spent on each
    /// bucket of `chain` (they admit alone while Redis is away).
    fn learn(&self, chain: &[BucketId], seen: &switchyard_governance::fleet::Seen, now: u64) {
        let mut governor = self.governor();
        for (id, spent) in chain.iter().zip(&seen.spent) {
            if let Some(spent) = spent {
                governor.learn_spent(id, *spent, now);
            }
        }
    }

    fn refusal_error(&self, refusal: &Refusal) -> Denied {
        let message = refusal.to_string();
        let (why, kind, retry_in_ms) = match refusal.kind {
            RefusalKind::Budget { retry_in_ms } => (Refused::Budget, ErrorKind::QuotaExceeded, retry_in_ms),
            RefusalKind::Requests { retry_in_ms, .. } => (Refused::Rate, ErrorKind::RateLimit, Some(retry_in_ms)),
            RefusalKind::Tokens { retry_in_ms, .. } => (Refused::Rate, ErrorKind::RateLimit, retry_in_ms),
            RefusalKind::Quota { retry_in_ms, .. } => (Refused::Quota, ErrorKind::QuotaExceeded, retry_in_ms),
            RefusalKind::Concurrency => (Refused::Concurrency, ErrorKind::RateLimit, Some(1000)),
        };
        // A downgrade is an answer, not yet a refusal: counted once it is
        // one (by the caller, which knows whether it could go there).
        let downgrade = refusal.downgrade.and_then(|trigger| {
            let pool = self.governor().spec(&refusal.bucket)?.budget.as_ref()?.on_exhaust.as_ref()?.pool.clone();
            Some(Box::new(DowngradeTo { pool, trigger, bucket: refusal.bucket.clone() }))
        });
        let mut info = ErrorInfo::new(kind, message);
        if kind == ErrorKind::QuotaExceeded {
            info.code = Some("insufficient_quota".to_owned());
        }
        let info = if downgrade.is_some() { info } else { self.refuse(why, info) };
        let own = matches!(why, Refused::Rate | Refused::Concurrency);
        let retry_after = retry_in_ms.map(|ms| ms.div_ceil(1000).max(1));
        Denied { info, retry_after, own, downgrade }
    }

    /// Counts a budget refusal that offered a downgrade the caller could
    /// not take.
    pub fn refused_budget(&self) {
        self.stats.refused[Refused::Budget.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Settles a hold to what the request cost (nothing: a release). In a
    /// fleet the shared counters are settled in the background, and what a
    /// request admitted locally while Redis was away cost is added there too.
    pub fn settle(&self, hold: &Hold, tokens: u64, cost: u64) {
        self.settle_as(hold, tokens, cost, false);
    }

    /// Settles a response-cache hit: nothing spent, and the request given
    /// back to its chain's requests-per-minute limits.
    pub fn settle_hit(&self, hold: &Hold) {
        self.settle_as(hold, 0, 0, true);
    }

    fn settle_as(&self, hold: &Hold, tokens: u64, cost: u64, hit: bool) {
        let now = now_ms();
        let chain = &hold.reservation.chain;
        if hold.leased {
            if let Some(fleet) = &self.fleet {
                // Into its lease (reported at the next renewal), or, when
                // that lease was dropped, to Redis as a request admitted
                // locally. A cache hit keeps its request counted: a slice
                // gives back no rate (it refuses early, never late).
                let estimate = hold.reservation.estimate;
                if !fleet.settle_leased(&hold.fleet_keys, hold.hold, estimate, cost, tokens) {
                    let fresh = fleet.new_hold();
                    let mut settlement = fleet.settlement(
                        &hold.fleet_keys,
                        (&mut self.governor(), chain),
                        fresh,
                        estimate,
                        cost,
                        tokens,
                        (false, false),
                        now,
                    );
                    settlement.chain = Some(chain.clone());
                    fleet.settle(fresh, settlement);
                }
                // This instance's counters count the spend too (what they
                // admit on should Redis go away).
                self.governor().add_spent(chain, cost, now);
            }
            return;
        }
        // Read before this cost counts here: what this instance knew is the
        // seed of a bucket Redis lost meanwhile, to which the script adds it.
        let settlement = self.fleet.as_ref().map(|fleet| {
            let mut settlement = fleet.settlement(
                &hold.fleet_keys,
                (&mut self.governor(), chain),
                hold.hold,
                hold.reservation.estimate,
                cost,
                tokens,
                (hold.in_fleet, hit),
                now,
            );
            settlement.chain = Some(chain.clone());
            settlement
        });
        match (hold.in_fleet, hit) {
            (false, true) => self.governor().settle_hit(&hold.reservation, now),
            (false, false) => self.governor().settle(&hold.reservation, Actual { tokens, cost }, now),
            // Held in Redis: this instance's counters count the spend too,
            // so that, should Redis go away, they know what was spent.
            (true, _) => self.governor().add_spent(chain, cost, now),
        }
        if let (Some(fleet), Some(settlement)) = (&self.fleet, settlement) {
            fleet.settle(hold.hold, settlement);
        }
    }

    /// A bucket's live figures, as this instance counts them.
    pub fn bucket(&self, id: &BucketId) -> Option<switchyard_governance::admission::BucketView> {
        self.governor().view(id, now_ms())
    }

    /// A bucket's live figures for the whole fleet: in a fleet whose Redis
    /// answers, its spend, reservations and requests in flight as Redis
    /// holds them (every instance's); else this instance's.
    pub async fn fleet_bucket(&self, id: &BucketId) -> Option<switchyard_governance::admission::BucketView> {
        let now = now_ms();
        let local = self.bucket(id)?;
        let Some(fleet) = &self.fleet else { return Some(local) };
        let names = switchyard_fleet::counters::bucket_names(std::slice::from_ref(id));
        let Some(counters) = names.first() else { return Some(local) };
        let figures = match fleet.figures(counters).await {
            Ok(Some(figures)) => figures,
            // Redis does not know it: nothing admitted through it yet.
            Ok(None) => return Some(local),
            Err(_) => return Some(local),
        };
        let budget = self.governor().spec(id).and_then(|s| s.budget.clone());
        let window_start = budget.as_ref().map(|b| b.window.start((now / 1000) as i64));
        // Spend of another window is no spend of this one.
        let spent = match window_start {
            Some(start) if start == figures.window_start => figures.spent,
            Some(_) => 0,
            None => local.spent,
        };
        let budget_left = budget.map(|budget| budget.cap().saturating_sub(spent.saturating_add(figures.reserved)));
        Some(switchyard_governance::admission::BucketView {
            spent,
            reserved: figures.reserved,
            budget_left,
            in_flight: figures.in_flight,
            ..local
        })
    }

    /// The least budget left on a caller's chain (USD), and the least rate
    /// headroom (a share), for routing signals.
    pub fn headroom(&self, caller: &Caller) -> (Option<f64>, Option<f64>) {
        let now = now_ms();
        let mut governor = self.governor();
        let budget = governor.budget_left(&caller.key.chain, now).map(switchyard_governance::money::usd);
        (budget, governor.rate_headroom(&caller.key.chain, now))
    }

    /// Reservations outstanding, in USD.
    pub fn reserved_usd(&self) -> f64 {
        switchyard_governance::money::usd(self.governor().reserved_total())
    }
}
