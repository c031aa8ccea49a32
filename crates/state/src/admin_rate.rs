//! Limits on admin mutations: a GCRA per admin token (or console user), so
//! a runaway script gets 429s with `Retry-After` instead of churning keys.
//! Kept across reloads; the rate is the running config's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use switchyard_governance::rate::{Gcra, RateCheck};

/// The most token names remembered (tokens come from the config, so this
/// only bounds what a config with very many tokens keeps).
const MAX_ACTORS: usize = 4096;

/// Each actor's mutation limit.
#[derive(Debug, Default)]
pub struct AdminRate(Mutex<HashMap<Arc<str>, Gcra>>);

impl AdminRate {
    /// Takes one mutation for `actor` at `now_ms` under `per_minute`: `Err`
    /// with the seconds to wait when it has none left.
    pub fn take(&self, actor: &Arc<str>, per_minute: u64, now_ms: u64) -> Result<(), u64> {
        let mut limits = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if limits.len() >= MAX_ACTORS && !limits.contains_key(actor) {
            limits.clear();
        }
        let limit = limits.entry(actor.clone()).or_insert_with(|| Gcra::new(per_minute));
        if limit.per_minute != per_minute {
            *limit = limit.resized(per_minute, now_ms);
        }
        match limit.check(1, now_ms) {
            RateCheck::Room => {
                limit.commit(1, now_ms);
                Ok(())
            }
            RateCheck::Full { retry_in_ms } => Err(retry_in_ms.div_ceil(1000).max(1)),
            RateCheck::TooLarge => Err(60),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_past_the_limit_waits_and_others_are_untouched() {
        let rate = AdminRate::default();
        let (ci, person): (Arc<str>, Arc<str>) = (Arc::from("ci"), Arc::from("person"));
        for _ in 0..3 {
            assert_eq!(rate.take(&ci, 3, 1_000), Ok(()));
        }
        assert_eq!(rate.take(&ci, 3, 1_000), Err(20));
        assert_eq!(rate.take(&person, 3, 1_000), Ok(()));
        assert_eq!(rate.take(&ci, 3, 21_000), Ok(()));
    }
}
