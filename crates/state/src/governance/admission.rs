//! Admission and settlement on a key's chain of buckets: the pool
//! allow-list, then budgets, rates and concurrency, in a fleet's Redis or
//! this instance's counters (with `storage.on_redis_error` deciding while
//! Redis is away); a hold settled to what the request cost, once.

use std::sync::atomic::Ordering;

use std::sync::Arc;

use switchyard_governance::{Actual, BucketId, Estimate, Refusal, RefusalKind, Reservation};
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
}

impl Governance {
    /// Admits a call from `caller` naming `pool` that may cost `estimate`:
    /// the pool allow-list, then budgets, then rate and concurrency limits.
    pub async fn admit(
        &self,
        caller: &Caller,
        pool: &str,
        estimate: Estimate,
        end_user: Option<&str>,
    ) -> Result<Hold, Denied> {
        if !caller.key.record.may_use(pool) {
            let message = format!("API key {} may not use `{pool}`", caller.key.record.prefix);
            let info = self.refuse(Refused::PoolNotAllowed, ErrorInfo::new(ErrorKind::PermissionDenied, message));
            return Err(Denied { info, retry_after: None, own: true });
        }
        self.admit_on_chain(caller, estimate, end_user).await
    }

    /// Admits a call from `caller` that may cost `estimate` on its chain's
    /// budgets, rates and concurrency, whatever it calls (an MCP tool call
    /// checks its own grants first).
    pub async fn admit_on_chain(
        &self,
        caller: &Caller,
        estimate: Estimate,
        end_user: Option<&str>,
    ) -> Result<Hold, Denied> {
        let now = now_ms();
        // A named end user under a key or group with an end-user policy is
        // held on its own bucket too (built per request only then).
        let with_user = match end_user {
            Some(user) if !caller.key.end_users.is_empty() => Some(self.end_user_chain(caller, user, now)),
            _ => None,
        };
        let (chain, fleet_keys) = match &with_user {
            Some((chain, keys)) => (chain, keys),
            None => (&caller.key.chain, &caller.key.fleet_keys),
        };
        let mut hold = 0;
        if let Some(fleet) = &self.fleet {
            let keys = fleet_keys;
            hold = fleet.new_hold();
            let buckets = self.shared_buckets(chain, now, true);
            match fleet.admit(keys, chain, &buckets, estimate, hold, now).await {
                Ok(switchyard_fleet::counters::Admitted::Held(hold)) => {
                    let reservation = Reservation { chain: chain.clone(), estimate };
                    return Ok(Hold { reservation, in_fleet: true, hold, fleet_keys: keys.clone() });
                }
                Ok(switchyard_fleet::counters::Admitted::Refused(refusal)) => return Err(self.refusal_error(&refusal)),
                // Redis away, or a script refusing this one request: the
                // operator's choice decides for this request (only an
                // outage marks Redis away for the others).
                Err(_) if fleet.on_error == switchyard_config::OnRedisError::FailClosed => {
                    let info = ErrorInfo::new(
                        ErrorKind::Unavailable,
                        "budgets and rate limits cannot be checked right now (their store is unreachable); retry shortly",
                    )
                    .with_status(503);
                    return Err(Denied { info, retry_after: Some(1), own: false });
                }
                // Fail open: this instance's own counters decide meanwhile.
                Err(_) => {
                    fleet.local_admissions.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        match self.governor().admit(chain, estimate, now) {
            Ok(reservation) => Ok(Hold { reservation, in_fleet: false, hold, fleet_keys: fleet_keys.clone() }),
            Err(refusal) => Err(self.refusal_error(&refusal)),
        }
    }

    /// `caller`'s chain with one bucket per end-user policy on it for
    /// `user`, each bucket's spec set from its policy (an override, or the
    /// default); a bucket new to this instance has its window's spend read
    /// from the ledger behind (admission never waits on a store).
    fn end_user_chain(&self, caller: &Caller, user: &str, now: u64) -> (Arc<[BucketId]>, Arc<[String]>) {
        let user: Arc<str> = Arc::from(user);
        let mut chain: Vec<BucketId> = caller.key.chain.to_vec();
        let mut unseeded = Vec::new();
        {
            let mut governor = self.governor();
            for (owner, policy) in &caller.key.end_users {
                let id = BucketId::EndUser { owner: owner.clone(), user: user.clone() };
                let spec = policy.spec_for(&user);
                match governor.spec(&id) {
                    // Known, and its policy unchanged: nothing to set.
                    Some(current) if current == spec => {}
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
                tokio::spawn(async move {
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

    /// The chain's buckets as the fleet's scripts take them: this
    /// instance's specs (from the shared store) and, for a bucket Redis has
    /// never seen, the spend the ledger holds for its window.
    /// (A settlement takes no seed: only an admission can meet a bucket
    /// Redis has never seen.)
    fn shared_buckets(
        &self,
        chain: &[BucketId],
        now: u64,
        seed: bool,
    ) -> Vec<switchyard_governance::fleet::SharedBucket> {
        let mut governor = self.governor();
        chain
            .iter()
            .map(|id| switchyard_governance::fleet::SharedBucket {
                spec: governor.spec(id),
                seed_spent: if seed { governor.spent(id, now).unwrap_or(0) } else { 0 },
            })
            .collect()
    }

    fn refusal_error(&self, refusal: &Refusal) -> Denied {
        let message = refusal.to_string();
        let (why, kind, retry_in_ms) = match refusal.kind {
            RefusalKind::Budget { retry_in_ms } => (Refused::Budget, ErrorKind::QuotaExceeded, retry_in_ms),
            RefusalKind::Requests { retry_in_ms } => (Refused::Rate, ErrorKind::RateLimit, Some(retry_in_ms)),
            RefusalKind::Tokens { retry_in_ms } => (Refused::Rate, ErrorKind::RateLimit, retry_in_ms),
            RefusalKind::Concurrency => (Refused::Concurrency, ErrorKind::RateLimit, Some(1000)),
        };
        let mut info = ErrorInfo::new(kind, message);
        if kind == ErrorKind::QuotaExceeded {
            info.code = Some("insufficient_quota".to_owned());
        }
        let own = matches!(why, Refused::Rate | Refused::Concurrency);
        Denied { info: self.refuse(why, info), retry_after: retry_in_ms.map(|ms| ms.div_ceil(1000).max(1)), own }
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
        if !hold.in_fleet {
            match hit {
                true => self.governor().settle_hit(&hold.reservation, now),
                false => self.governor().settle(&hold.reservation, Actual { tokens, cost }, now),
            }
        }
        if let Some(fleet) = &self.fleet {
            let chain = &hold.reservation.chain;
            let buckets = self.shared_buckets(chain, now, false);
            let settlement = fleet.settlement(
                &hold.fleet_keys,
                &buckets,
                hold.hold,
                hold.reservation.estimate,
                cost,
                tokens,
                (hold.in_fleet, hit),
                now,
            );
            fleet.settle(hold.hold, settlement);
        }
    }

    /// A bucket's live figures.
    pub fn bucket(&self, id: &BucketId) -> Option<switchyard_governance::admission::BucketView> {
        self.governor().view(id, now_ms())
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
