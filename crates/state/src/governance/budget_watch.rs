//! Budgets watched: every [`WATCH_EVERY`] each key's and group's budget is
//! observed (its spend in its window, as this instance's counters know
//! it: in a fleet they learn the fleet's spend from every admission), its
//! burn over the last hour and the forecast of when it runs out are made
//! again (`governance::forecast::Watch`, a burn first seeded from the
//! ledger's last hour), the governor is told which budgets are forecast
//! to run out (what `on_exhaust.forecast` downgrades on), and the
//! warnings and forecasts not yet told this window wait for the alerts
//! watcher ([`Governance::take_budget_signals`]). Off the request path.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use switchyard_governance::forecast::{Burn, Forecast, Observed, Signal, Watch};
use switchyard_governance::{BucketId, Budget};

use super::{now_ms, Governance};

/// How often budgets are observed.
pub const WATCH_EVERY: Duration = Duration::from_secs(2);

/// Budgets first watched in one look at most: each reads the ledger once
/// (a boot with many budgeted keys spreads its reads over several looks).
const MAX_NEW_PER_LOOK: usize = 64;

/// Signals kept for the alerts watcher at most (a gateway without alerts
/// never takes them: the oldest go).
const MAX_SIGNALS: usize = 1024;

/// A warning or forecast to tell.
#[derive(Debug, Clone)]
pub struct BudgetSignal {
    /// Whose budget: `key `name` (id)` or `group `name``.
    pub who: String,
    /// The window it belongs to (Unix s).
    pub window_start: i64,
    /// What.
    pub signal: Signal,
    /// The spend and cap when it was made (nano-USD).
    pub spent: u64,
    /// The cap.
    pub cap: u64,
}

/// A budget's burn and forecast, for the spend read and `/metrics`.
#[derive(Debug, Clone)]
pub struct BudgetOutlook {
    /// `key:<id>` or `group:<name>`.
    pub bucket: String,
    /// Whose, for people.
    pub who: String,
    /// Settled spend in the window (nano-USD).
    pub spent: u64,
    /// The cap (nano-USD).
    pub cap: u64,
    /// The forecast last made (`None`: not watched yet).
    pub forecast: Option<Forecast>,
    /// Its window (`1d`, `1mo`, ...).
    pub window: &'static str,
    /// When the window running now ends (Unix s; none: a total budget).
    pub window_end: Option<i64>,
    /// The shares of the cap that warn (percent; empty: the alerts'
    /// thresholds).
    pub warn: Vec<f64>,
}

/// The watches, by bucket.
#[derive(Debug, Default)]
pub(crate) struct Watches {
    by_bucket: HashMap<BucketId, Watch>,
    signals: std::collections::VecDeque<BudgetSignal>,
}

/// Starts the watch of `governance`'s budgets; it ends with it.
pub(crate) fn spawn(governance: std::sync::Weak<Governance>) {
    switchyard_tasks::service("budget watch", async move {
        let mut ticker = tokio::time::interval(WATCH_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let Some(governance) = governance.upgrade() else { return };
            governance.observe_budgets(now_ms()).await;
        }
    });
}

impl Governance {
    /// Each budgeted key and group, with its bucket and budget.
    fn budgeted(&self) -> Vec<(BucketId, String, Budget)> {
        let keys = self.keys.load();
        let groups = self.groups.load();
        let keyed = keys.by_id.values().filter(|k| k.record.revoked_at.is_none()).filter_map(|key| {
            let who = format!("key `{}` ({})", key.record.name, key.record.id);
            Some((BucketId::Key(key.id.clone()), who, key.record.budget.clone()?))
        });
        let grouped = groups.values().filter_map(|group| {
            let who = format!("group `{}`", group.name);
            Some((BucketId::Group(Arc::from(group.name.as_str())), who, group.budget.clone()?))
        });
        keyed.chain(grouped).collect()
    }

    /// Observes every budget at `now` (Unix ms): see the module's doc.
    pub async fn observe_budgets(&self, now: u64) {
        let budgeted = self.budgeted();
        let now_s = (now / 1000) as i64;
        // A budget first watched starts from what the ledger holds of its
        // last hour (its pace at once, not after an hour of watching).
        let new: Vec<BucketId> = {
            let watches = self.watches.lock().unwrap_or_else(PoisonError::into_inner);
            budgeted
                .iter()
                .map(|(id, _, _)| id)
                .filter(|id| !watches.by_bucket.contains_key(id))
                .take(MAX_NEW_PER_LOOK)
                .cloned()
                .collect()
        };
        let mut seeded = Vec::with_capacity(new.len());
        for id in new {
            let last_hour = match self.ledger_used(&id, now_s.saturating_sub(3600)).await {
                Ok(used) => used.map_or(0, |used| used.spent),
                Err(err) => {
                    tracing::warn!(error = %err, bucket = %id, "a budget's last hour could not be read from the ledger");
                    0
                }
            };
            seeded.push((id, Watch::new(Burn::seeded(now, last_hour))));
        }
        let spent: Vec<Option<u64>> = {
            let mut governor = self.governor();
            budgeted.iter().map(|(id, _, _)| governor.spent(id, now)).collect()
        };
        let mut short = Vec::with_capacity(budgeted.len());
        {
            let mut watches = self.watches.lock().unwrap_or_else(PoisonError::into_inner);
            watches.by_bucket.extend(seeded);
            let watched: std::collections::HashSet<&BucketId> = budgeted.iter().map(|(id, _, _)| id).collect();
            watches.by_bucket.retain(|id, _| watched.contains(id));
            for ((id, who, budget), spent) in budgeted.iter().zip(spent) {
                let (Some(spent), Some(watch)) = (spent, watches.by_bucket.get_mut(id)) else { continue };
                let window_start = budget.window.start(now_s);
                let cap = budget.cap();
                let observed = Observed {
                    window_start,
                    window_end: budget.window.next_start(now_s),
                    spent,
                    cap,
                    warn: &budget.warn,
                };
                let signals = watch.observe(now, observed);
                short.push((id.clone(), watch.short()));
                for signal in signals {
                    if watches.signals.len() >= MAX_SIGNALS {
                        watches.signals.pop_front();
                    }
                    watches.signals.push_back(BudgetSignal { who: who.clone(), window_start, signal, spent, cap });
                }
            }
        }
        let mut governor = self.governor();
        for (id, short) in short {
            governor.set_short(&id, short);
        }
    }

    /// The warnings and forecasts made since the last call, oldest first.
    pub fn take_budget_signals(&self) -> Vec<BudgetSignal> {
        self.watches.lock().unwrap_or_else(PoisonError::into_inner).signals.drain(..).collect()
    }

    /// Each budget's spend, cap and forecast as last observed.
    pub fn budget_outlooks(&self, now: u64) -> Vec<BudgetOutlook> {
        let budgeted = self.budgeted();
        let spent: Vec<Option<u64>> = {
            let mut governor = self.governor();
            budgeted.iter().map(|(id, _, _)| governor.spent(id, now)).collect()
        };
        let watches = self.watches.lock().unwrap_or_else(PoisonError::into_inner);
        budgeted
            .into_iter()
            .zip(spent)
            .filter_map(|((id, who, budget), spent)| {
                let bucket = match &id {
                    BucketId::Key(key) => format!("key:{key}"),
                    BucketId::Group(group) => format!("group:{group}"),
                    _ => return None,
                };
                let forecast = watches.by_bucket.get(&id).and_then(|w| w.forecast);
                Some(BudgetOutlook {
                    bucket,
                    who,
                    spent: spent?,
                    cap: budget.cap(),
                    forecast,
                    window: budget.window.as_str(),
                    window_end: budget.window.next_start((now / 1000) as i64),
                    warn: budget.warn.clone(),
                })
            })
            .collect()
    }
}
