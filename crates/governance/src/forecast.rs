//! Burn and forecast: how fast a budget is being spent, and when it runs
//! out at that pace. A bucket's spend in its window is observed now and
//! then ([`Burn::observe`]); the burn is what was spent over the last hour
//! of observations, per hour, and the forecast is where that pace meets the
//! cap. Plain arithmetic with time passed in: no clock, no I/O.

use std::collections::VecDeque;

use crate::money::NanoUsd;

/// Observations kept apart at least this long (one a minute).
pub const SAMPLE_EVERY_MS: u64 = 60_000;

/// The burn is read over this much of the past.
pub const HORIZON_MS: u64 = 3_600_000;

/// The least span of observations a burn is read over: less says nothing
/// yet about a pace.
pub const MIN_SPAN_MS: u64 = 60_000;

/// A bucket's recent spend, as observed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Burn {
    /// (when, spend ever observed then), one a minute, oldest first,
    /// reaching back at most [`HORIZON_MS`] before the newest.
    samples: VecDeque<(u64, u64)>,
    /// The newest observation (when, spend ever observed then).
    latest: Option<(u64, u64)>,
    /// The last window seen and the spend in it.
    window: Option<(i64, NanoUsd)>,
    /// Spend ever observed: what each observation added, across windows.
    total: u64,
}

impl Burn {
    /// A burn that knows `spent_last_hour` was spent in the hour before
    /// `now_ms` (from the ledger, when a bucket is first watched).
    pub fn seeded(now_ms: u64, spent_last_hour: NanoUsd) -> Burn {
        let mut burn = Burn::default();
        burn.samples.push_back((now_ms.saturating_sub(HORIZON_MS), 0));
        burn.total = spent_last_hour;
        burn.latest = Some((now_ms, burn.total));
        burn
    }

    /// Notes that the bucket had spent `spent` in the window that began at
    /// `window_start` (Unix seconds), at `now_ms`. Spend that went down
    /// in one window (a re-read at other prices) adds nothing.
    pub fn observe(&mut self, now_ms: u64, window_start: i64, spent: NanoUsd) {
        let added = match self.window {
            Some((start, before)) if start == window_start => spent.saturating_sub(before),
            // A new window: what it holds was spent since it began.
            Some(_) => spent,
            // The first look says nothing about when it was spent.
            None => 0,
        };
        self.window = Some((window_start, spent));
        self.total = self.total.saturating_add(added);
        let at = (now_ms, self.total);
        self.latest = Some(at);
        if self.samples.back().is_none_or(|&(when, _)| now_ms >= when.saturating_add(SAMPLE_EVERY_MS)) {
            self.samples.push_back(at);
        }
        // Keep one sample at or before the horizon, so the hour is whole.
        while self.samples.len() > 1
            && self.samples.get(1).is_some_and(|&(when, _)| when.saturating_add(HORIZON_MS) <= now_ms)
        {
            self.samples.pop_front();
        }
    }

    /// What was spent per hour over the last hour observed (nano-USD an
    /// hour); `None` until observations span [`MIN_SPAN_MS`].
    pub fn per_hour(&self) -> Option<NanoUsd> {
        let (now, total) = self.latest?;
        let from = now.saturating_sub(HORIZON_MS);
        // The sample at the horizon (or the oldest), read at the horizon
        // when it lies before it: as if spend were even across that step.
        let (mut when, mut then) = *self.samples.front()?;
        if when < from {
            if let Some(&(next, next_total)) = self.samples.get(1).filter(|&&(next, _)| next > from) {
                let share = (from - when) as f64 / (next - when) as f64;
                then = then + ((next_total - then) as f64 * share) as u64;
                when = from;
            } else {
                let share = (from - when) as f64 / (now - when).max(1) as f64;
                then = then + ((total - then) as f64 * share) as u64;
                when = from;
            }
        }
        let span = now.checked_sub(when).filter(|&span| span >= MIN_SPAN_MS)?;
        let spent = total.saturating_sub(then) as f64;
        Some((spent * HORIZON_MS as f64 / span as f64).round() as NanoUsd)
    }
}

/// Where a bucket's pace takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forecast {
    /// Spend per hour (nano-USD).
    pub per_hour: NanoUsd,
    /// When the cap is reached at this pace (Unix ms), if that is before
    /// the window ends (a budget whose window turns first never runs out);
    /// now when it is spent already.
    pub exhausts_at_ms: Option<u64>,
}

/// The forecast of a budget of `cap` with `spent` in a window that ends at
/// `window_end` (Unix seconds; `None`: never), spending `per_hour`, at
/// `now_ms`.
pub fn forecast(per_hour: NanoUsd, spent: NanoUsd, cap: NanoUsd, window_end: Option<i64>, now_ms: u64) -> Forecast {
    let left = cap.saturating_sub(spent);
    let at = if left == 0 {
        Some(now_ms)
    } else if per_hour == 0 {
        None
    } else {
        let ms = (left as f64 / per_hour as f64 * HORIZON_MS as f64).ceil();
        // Past the year 2⁶³ ms is never.
        (ms < (u64::MAX - now_ms) as f64).then(|| now_ms + ms as u64)
    };
    let within = |at: u64| window_end.is_none_or(|end| i64::try_from(at / 1000).is_ok_and(|at| at < end));
    Forecast { per_hour, exhausts_at_ms: at.filter(|&at| within(at)) }
}

/// The warning shares (percent) of `warn` that `spent` of `cap` has
/// reached, lowest first.
pub fn warnings_reached(warn: &[f64], spent: NanoUsd, cap: NanoUsd) -> Vec<f64> {
    let percent = if cap == 0 { 100.0 } else { spent as f64 * 100.0 / cap as f64 };
    let mut reached: Vec<f64> = warn.iter().copied().filter(|&share| percent >= share).collect();
    reached.sort_by(f64::total_cmp);
    reached
}

/// A budget's watch: its burn, the forecast last made, and the signals
/// already given in the current window (each warning share once, the
/// forecast once).
#[derive(Debug, Clone, Default)]
pub struct Watch {
    burn: Burn,
    /// The window the signals below belong to.
    window: Option<i64>,
    warned: Vec<f64>,
    forecast_given: bool,
    /// The forecast at the last observation.
    pub forecast: Option<Forecast>,
}

/// What a watch tells, once per window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Signal {
    /// Spend reached this share of the cap (percent).
    Warning(f64),
    /// At its pace the budget runs out at this time (Unix ms), before its
    /// window ends.
    Forecast(u64),
}

/// A budget as a watch observes it.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// Start of its current window (Unix s).
    pub window_start: i64,
    /// Start of the next (Unix s; `None`: never).
    pub window_end: Option<i64>,
    /// Settled spend in the window.
    pub spent: NanoUsd,
    /// The cap.
    pub cap: NanoUsd,
    /// Shares of the cap that warn (percent).
    pub warn: &'a [f64],
}

impl Watch {
    /// A watch whose burn starts from `burn` (seeded from the ledger).
    pub fn new(burn: Burn) -> Watch {
        Watch { burn, ..Watch::default() }
    }

    /// Observes the budget at `now_ms`: the burn learns its spend, the
    /// forecast is made again, and what was not yet told in this window is.
    pub fn observe(&mut self, now_ms: u64, budget: Observed<'_>) -> Vec<Signal> {
        self.burn.observe(now_ms, budget.window_start, budget.spent);
        let per_hour = self.burn.per_hour().unwrap_or(0);
        let forecast = forecast(per_hour, budget.spent, budget.cap, budget.window_end, now_ms);
        self.forecast = Some(forecast);
        if self.window != Some(budget.window_start) {
            self.window = Some(budget.window_start);
            self.warned.clear();
            self.forecast_given = false;
        }
        let mut signals = Vec::new();
        for share in warnings_reached(budget.warn, budget.spent, budget.cap) {
            if !self.warned.contains(&share) {
                self.warned.push(share);
                signals.push(Signal::Warning(share));
            }
        }
        // A forecast is news only while the budget still has room.
        if let (false, Some(at)) = (self.forecast_given, forecast.exhausts_at_ms.filter(|&at| at > now_ms)) {
            self.forecast_given = true;
            signals.push(Signal::Forecast(at));
        }
        signals
    }

    /// Whether the last forecast says the budget runs out before its
    /// window ends.
    pub fn short(&self) -> bool {
        self.forecast.is_some_and(|f| f.exhausts_at_ms.is_some())
    }
}

/// "6 h 10 m", "3 d 4 h", "45 m", "under a minute": a wait in words.
pub fn in_words(ms: u64) -> String {
    let minutes = ms / 60_000;
    let (days, hours, minutes) = (minutes / 1440, minutes / 60 % 24, minutes % 60);
    match (days, hours, minutes) {
        (0, 0, 0) => "under a minute".to_owned(),
        (0, 0, m) => format!("{m} m"),
        (0, h, m) => format!("{h} h {m} m"),
        (d, h, _) => format!("{d} d {h} h"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::money::from_usd;
    use crate::window::Window;

    /// 2026-11-30 (a Monday) 19:31:05 UTC.
    const NOW: u64 = 1_796_067_065_000;

    #[test]
    fn a_synthetic_burn_names_the_hour_the_budget_runs_out() {
        // $100 a month; $10 an hour spent, observed every 10 s for three
        // hours, starting with $20 already spent.
        let window = Window::Month;
        let start = window.start((NOW / 1000) as i64);
        let end = window.next_start((NOW / 1000) as i64);
        let mut burn = Burn::default();
        let mut spent = from_usd(20.0);
        let mut at = NOW - 3 * 3_600_000;
        while at <= NOW {
            burn.observe(at, start, spent);
            at += 10_000;
            spent += from_usd(10.0) / 360;
        }
        spent -= from_usd(10.0) / 360;
        assert_eq!(burn.per_hour().map(|n| (n as f64 / 1e9 * 100.0).round() / 100.0), Some(10.0));
        let forecast = forecast(burn.per_hour().unwrap(), spent, from_usd(100.0), end, NOW);
        // $50 spent, $50 left at $10 an hour: 5 hours from 19:31, so 00:31
        // on the 1st: past the month's end (00:00), the budget never runs out.
        assert_eq!(forecast.exhausts_at_ms, None);
        // The same pace on a $80 budget runs out at 22:31 the same day.
        let tighter = super::forecast(burn.per_hour().unwrap(), spent, from_usd(80.0), end, NOW);
        let at = tighter.exhausts_at_ms.unwrap();
        let hour = time::OffsetDateTime::from_unix_timestamp((at / 1000) as i64).unwrap();
        assert_eq!((hour.day(), hour.hour()), (30, 22), "{hour}");
        assert_eq!(in_words(at - NOW), "3 h 0 m");
    }

    #[test]
    fn a_new_window_a_seed_and_too_little_history() {
        let mut burn = Burn::default();
        burn.observe(NOW, 100, from_usd(5.0));
        assert_eq!(burn.per_hour(), None, "one look says nothing about a pace");
        burn.observe(NOW + 30_000, 100, from_usd(6.0));
        assert_eq!(burn.per_hour(), None, "half a minute is too little");
        // The window turns: its $1 was spent since.
        burn.observe(NOW + 120_000, 200, from_usd(1.0));
        assert_eq!(burn.per_hour(), Some(from_usd(60.0)), "$2 in two minutes");
        // Seeded from the ledger: $3 in the last hour is $3 an hour at once.
        assert_eq!(Burn::seeded(NOW, from_usd(3.0)).per_hour(), Some(from_usd(3.0)));
        // Old samples leave: after two idle hours the pace is nothing.
        burn.observe(NOW + 2 * 3_600_000 + 120_000, 200, from_usd(1.0));
        assert_eq!(burn.per_hour(), Some(0));
        assert!(burn.samples.len() <= 62);
    }

    #[test]
    fn a_spent_budget_runs_out_now_and_an_idle_one_never() {
        assert_eq!(forecast(0, 10, 10, None, NOW).exhausts_at_ms, Some(NOW));
        assert_eq!(forecast(0, 5, 10, None, NOW).exhausts_at_ms, None);
        assert_eq!(forecast(u64::MAX, 0, u64::MAX, None, NOW).exhausts_at_ms, Some(NOW + 3_600_000));
        assert_eq!(forecast(1, 0, u64::MAX, None, NOW).exhausts_at_ms, None, "past the end of time");
        assert_eq!(in_words(59_000), "under a minute");
        assert_eq!(in_words(6 * 3_600_000 + 10 * 60_000), "6 h 10 m");
        assert_eq!(in_words(50 * 3_600_000), "2 d 2 h");
    }

    #[test]
    fn thresholds_fire_once_each_and_the_forecast_once_a_window() {
        let window = Window::Day;
        let start = window.start((NOW / 1000) as i64);
        let end = window.next_start((NOW / 1000) as i64);
        let cap = from_usd(100.0);
        let mut watch = Watch::default();
        let at = |spent: f64, now: u64| {
            (Observed { window_start: start, window_end: end, spent: from_usd(spent), cap, warn: &[80.0, 95.0] }, now)
        };
        // $1 a minute from $10 at 19:31: $60 an hour.
        let mut signals = Vec::new();
        for minute in 0..=90u64 {
            let (budget, now) = at(10.0 + minute as f64, NOW + minute * 60_000);
            signals.extend(watch.observe(now, budget));
        }
        // At 21:01, $100 spent: 80% at 20:41, 95% at 20:56, and the
        // forecast (made once a minute of pace was seen) for 21:01.
        let exhausted_at = NOW + 90 * 60_000;
        assert_eq!(signals.len(), 3, "{signals:?}");
        assert_eq!(signals[1..], [Signal::Warning(80.0), Signal::Warning(95.0)]);
        let Signal::Forecast(when) = signals[0] else { panic!("{signals:?}") };
        let hour = time::OffsetDateTime::from_unix_timestamp((when / 1000) as i64).unwrap();
        assert_eq!((hour.hour(), hour.minute()), (21, 1), "the hour the synthetic burn runs out: {hour}");
        assert!(when.abs_diff(exhausted_at) < 60_000);
        assert!(watch.short());
        // The same window again: nothing new.
        let (budget, now) = at(100.0, NOW + 91 * 60_000);
        assert!(watch.observe(now, budget).is_empty());
        // The next window tells again ($81 in its first minute: a warning,
        // and a forecast that it runs out within the hour).
        let tomorrow = end.unwrap();
        let next_end = window.next_start(tomorrow);
        let next = Observed { window_start: tomorrow, window_end: next_end, spent: from_usd(81.0), cap, warn: &[80.0] };
        let signals = watch.observe(tomorrow as u64 * 1000 + 60_000, next);
        assert_eq!(signals[0], Signal::Warning(80.0), "{signals:?}");
        assert!(matches!(signals[1..], [Signal::Forecast(_)]), "{signals:?}");
    }

    proptest::proptest! {
        /// Whatever is observed, the burn is a number and samples stay few.
        #[test]
        fn any_observations_keep_the_burn_bounded(
            steps in proptest::collection::vec((0u64..600_000, 0i64..3, 0u64..u64::MAX / 4), 1..400),
        ) {
            let mut burn = Burn::default();
            let mut at = NOW;
            for (gap, window, spent) in steps {
                at += gap;
                burn.observe(at, window, spent);
                proptest::prop_assert!(burn.samples.len() <= 62);
                let _ = burn.per_hour();
            }
        }
    }
}
