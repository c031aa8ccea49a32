//! The console's history: a bounded ring of per-minute aggregates (one day)
//! and each lane's recent share of its pool's traffic. A sampler task reads
//! the request path's metric atomics every few seconds and adds what
//! changed, so the request path pays nothing for the history; what the ring
//! holds is plain arithmetic on [`Totals`], tested without a clock (the
//! minute is always an argument).
//!
//! `telemetry::sampler` feeds it.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use switchyard_governance::money::usd;
use switchyard_governance::money::Tokens;

use super::metrics::{Histogram, Metrics, BUCKETS, INGRESSES, STATUSES, STATUS_SLOTS, TOKEN_KINDS};

/// Minutes the ring keeps: one day.
pub const MINUTES_KEPT: usize = 24 * 60;
/// Minutes a lane's live share is counted over.
pub const SHARE_MINUTES: i64 = 5;
/// Histogram slots: the bounds, then everything above the last.
pub const SLOTS: usize = BUCKETS.len() + 1;

/// Counts over some span: requests by outcome, durations, tokens, spend.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    /// Requests answered.
    pub requests: u64,
    /// Of which 4xx (the caller's or a refusal).
    pub client_errors: u64,
    /// Of which 5xx or an unnamed status (the gateway's or upstream's).
    pub server_errors: u64,
    /// Total time per histogram slot.
    pub duration: [u64; SLOTS],
    /// Time to first byte per histogram slot.
    pub ttfb: [u64; SLOTS],
    /// Input tokens served.
    pub input_tokens: u64,
    /// Output tokens served.
    pub output_tokens: u64,
    /// Their price at the lanes' rates, nano-USD.
    pub nano_usd: u64,
}

impl Totals {
    fn add(&mut self, other: &Totals) {
        self.requests += other.requests;
        self.client_errors += other.client_errors;
        self.server_errors += other.server_errors;
        for (a, b) in self.duration.iter_mut().zip(other.duration) {
            *a += b;
        }
        for (a, b) in self.ttfb.iter_mut().zip(other.ttfb) {
            *a += b;
        }
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.nano_usd += other.nano_usd;
    }

    /// What grew from `before` to `self` (a counter never shrinks within
    /// one gateway; saturating keeps a torn read harmless).
    pub fn since(&self, before: &Totals) -> Totals {
        let mut delta = Totals {
            requests: self.requests.saturating_sub(before.requests),
            client_errors: self.client_errors.saturating_sub(before.client_errors),
            server_errors: self.server_errors.saturating_sub(before.server_errors),
            input_tokens: self.input_tokens.saturating_sub(before.input_tokens),
            output_tokens: self.output_tokens.saturating_sub(before.output_tokens),
            nano_usd: self.nano_usd.saturating_sub(before.nano_usd),
            ..Totals::default()
        };
        for slot in 0..SLOTS {
            delta.duration[slot] = self.duration[slot].saturating_sub(before.duration[slot]);
            delta.ttfb[slot] = self.ttfb[slot].saturating_sub(before.ttfb[slot]);
        }
        delta
    }

    fn is_empty(&self) -> bool {
        *self == Totals::default()
    }
}

/// The `q` quantile (0–1) of a histogram, in milliseconds, interpolated
/// within its bucket; `None` without observations.
pub fn quantile_ms(slots: &[u64; SLOTS], q: f64) -> Option<f64> {
    let count: u64 = slots.iter().sum();
    if count == 0 {
        return None;
    }
    let target = (q.clamp(0.0, 1.0) * count as f64).max(1.0);
    let mut seen = 0.0;
    for (slot, &n) in slots.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let lower = if slot == 0 { 0.0 } else { BUCKETS[slot - 1] };
        let Some(&upper) = BUCKETS.get(slot) else { return Some(lower * 1000.0) };
        if seen + n as f64 >= target {
            let within = (target - seen) / n as f64;
            return Some((lower + (upper - lower) * within) * 1000.0);
        }
        seen += n as f64;
    }
    BUCKETS.last().map(|b| b * 1000.0)
}

/// One point of a chart: a span of minutes summed.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Point {
    /// The span's first minute (Unix seconds).
    pub at: i64,
    /// Requests per second over the span.
    pub rps: f64,
    /// Requests.
    pub requests: u64,
    /// Share of requests answered 5xx.
    pub error_rate: f64,
    /// Share of requests answered 4xx.
    pub client_error_rate: f64,
    /// Median total time (ms).
    pub p50_ms: Option<f64>,
    /// 99th percentile total time (ms).
    pub p99_ms: Option<f64>,
    /// Median time to first byte (ms).
    pub ttfb_p50_ms: Option<f64>,
    /// 99th percentile time to first byte (ms).
    pub ttfb_p99_ms: Option<f64>,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Spend at the lanes' rates (USD).
    pub usd: f64,
}

impl Point {
    fn of(at_minute: i64, minutes: i64, totals: &Totals) -> Point {
        let share = |n: u64| if totals.requests == 0 { 0.0 } else { n as f64 / totals.requests as f64 };
        Point {
            at: at_minute * 60,
            rps: totals.requests as f64 / (minutes.max(1) * 60) as f64,
            requests: totals.requests,
            error_rate: share(totals.server_errors),
            client_error_rate: share(totals.client_errors),
            p50_ms: quantile_ms(&totals.duration, 0.5),
            p99_ms: quantile_ms(&totals.duration, 0.99),
            ttfb_p50_ms: quantile_ms(&totals.ttfb, 0.5),
            ttfb_p99_ms: quantile_ms(&totals.ttfb, 0.99),
            input_tokens: totals.input_tokens,
            output_tokens: totals.output_tokens,
            usd: usd(totals.nano_usd),
        }
    }
}

/// A window of history: its points, oldest first, and the whole window.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Span {
    /// Minutes per point.
    pub step_minutes: i64,
    /// The points, oldest first; a span with no traffic is a point of zeros.
    pub points: Vec<Point>,
    /// The whole window as one point.
    pub total: Point,
}

/// One minute of the lanes' recent traffic.
#[derive(Debug, Default)]
struct LaneMinute {
    at: i64,
    /// Requests served per (pool, lane).
    served: HashMap<(Arc<str>, Arc<str>), u64>,
    /// Time to each lane's 2xx head, per histogram slot.
    latency: HashMap<Arc<str>, [u64; SLOTS]>,
}

/// A lane's recent time to its 2xx response head.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LaneLatency {
    /// Median (ms).
    pub p50_ms: Option<f64>,
    /// 99th percentile (ms).
    pub p99_ms: Option<f64>,
    /// Answers measured.
    pub answers: u64,
}

/// The ring of minutes and the lanes' recent traffic.
#[derive(Debug, Default)]
pub struct History {
    minutes: Mutex<VecDeque<(i64, Totals)>>,
    lanes: Mutex<VecDeque<LaneMinute>>,
}

impl History {
    /// Adds `delta` to minute `minute` (Unix minutes); minutes older than a
    /// day before it fall off.
    pub fn add(&self, minute: i64, delta: &Totals) {
        if delta.is_empty() {
            return;
        }
        let mut ring = self.minutes.lock().unwrap_or_else(PoisonError::into_inner);
        match ring.iter_mut().rev().find(|(at, _)| *at == minute) {
            Some((_, totals)) => totals.add(delta),
            None => {
                // Samplers add in time order, so a new minute is the newest.
                let at = ring.iter().rposition(|(at, _)| *at < minute).map_or(0, |i| i + 1);
                ring.insert(at, (minute, *delta));
            }
        }
        while ring.front().is_some_and(|(at, _)| *at <= minute - MINUTES_KEPT as i64) {
            ring.pop_front();
        }
    }

    /// Adds requests served per (pool, lane), and the lanes' new latency
    /// observations per histogram slot, to minute `minute`.
    pub fn add_lanes(
        &self,
        minute: i64,
        served: impl IntoIterator<Item = ((Arc<str>, Arc<str>), u64)>,
        latency: impl IntoIterator<Item = (Arc<str>, [u64; SLOTS])>,
    ) {
        let mut ring = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        if ring.back().is_none_or(|m| m.at < minute) {
            ring.push_back(LaneMinute { at: minute, ..LaneMinute::default() });
        }
        let Some(slot) = ring.iter_mut().rev().find(|m| m.at <= minute) else { return };
        for (key, n) in served {
            if n > 0 {
                *slot.served.entry(key).or_default() += n;
            }
        }
        for (lane, observed) in latency {
            if observed.iter().any(|n| *n > 0) {
                let into = slot.latency.entry(lane).or_insert([0; SLOTS]);
                for (a, b) in into.iter_mut().zip(observed) {
                    *a += b;
                }
            }
        }
        while ring.front().is_some_and(|m| m.at <= minute - SHARE_MINUTES) {
            ring.pop_front();
        }
    }

    /// The minutes of the lanes' ring within [`SHARE_MINUTES`] before and
    /// including `now_minute`, each seen by `visit`.
    fn recent_lanes(&self, now_minute: i64, mut visit: impl FnMut(&LaneMinute)) {
        let ring = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        for minute in ring.iter().filter(|m| m.at > now_minute - SHARE_MINUTES && m.at <= now_minute) {
            visit(minute);
        }
    }

    /// Requests each (pool, lane) served in the last [`SHARE_MINUTES`]
    /// before and including `now_minute`.
    pub fn lane_counts(&self, now_minute: i64) -> HashMap<(Arc<str>, Arc<str>), u64> {
        let mut out: HashMap<(Arc<str>, Arc<str>), u64> = HashMap::new();
        self.recent_lanes(now_minute, |minute| {
            for (key, n) in &minute.served {
                *out.entry(key.clone()).or_default() += n;
            }
        });
        out
    }

    /// Each lane's time to its 2xx head over the last [`SHARE_MINUTES`]
    /// before and including `now_minute`.
    pub fn lane_latency(&self, now_minute: i64) -> HashMap<Arc<str>, LaneLatency> {
        let mut sums: HashMap<Arc<str>, [u64; SLOTS]> = HashMap::new();
        self.recent_lanes(now_minute, |minute| {
            for (lane, slots) in &minute.latency {
                let into = sums.entry(lane.clone()).or_insert([0; SLOTS]);
                for (a, b) in into.iter_mut().zip(slots) {
                    *a += b;
                }
            }
        });
        sums.into_iter()
            .map(|(lane, slots)| {
                let latency = LaneLatency {
                    p50_ms: quantile_ms(&slots, 0.5),
                    p99_ms: quantile_ms(&slots, 0.99),
                    answers: slots.iter().sum(),
                };
                (lane, latency)
            })
            .collect()
    }

    /// The last `minutes` minutes up to and including `now_minute`, in
    /// points of `step` minutes.
    pub fn span(&self, now_minute: i64, minutes: i64, step: i64) -> Span {
        let step = step.clamp(1, minutes.max(1));
        let points_len = (minutes + step - 1) / step;
        let first = now_minute - points_len * step + 1;
        let mut sums = vec![Totals::default(); points_len as usize];
        let mut whole = Totals::default();
        let ring = self.minutes.lock().unwrap_or_else(PoisonError::into_inner);
        for (at, totals) in ring.iter().filter(|(at, _)| *at >= first && *at <= now_minute) {
            if let Some(sum) = sums.get_mut(((at - first) / step) as usize) {
                sum.add(totals);
            }
            whole.add(totals);
        }
        drop(ring);
        let points = sums.iter().enumerate().map(|(i, t)| Point::of(first + i as i64 * step, step, t)).collect();
        Span { step_minutes: step, points, total: Point::of(first, points_len * step, &whole) }
    }
}

fn histogram_slots(into: &mut [u64; SLOTS], histogram: &Histogram) {
    let mut bucketed = 0;
    for (slot, bucket) in histogram.buckets.iter().enumerate() {
        let n = bucket.load(Ordering::Relaxed);
        into[slot] += n;
        bucketed += n;
    }
    into[SLOTS - 1] += histogram.count.load(Ordering::Relaxed).saturating_sub(bucketed);
}

/// Each lane's upstream latency observations so far, per histogram slot,
/// indexed like `metrics.lanes`.
pub fn lane_latencies(metrics: &Metrics) -> Vec<[u64; SLOTS]> {
    metrics
        .upstream_latency
        .iter()
        .map(|histogram| {
            let mut slots = [0; SLOTS];
            histogram_slots(&mut slots, histogram);
            slots
        })
        .collect()
}

/// What grew from `before` to `now`, slot by slot.
pub fn slots_since(now: &[u64; SLOTS], before: &[u64; SLOTS]) -> [u64; SLOTS] {
    let mut delta = [0; SLOTS];
    for (slot, d) in delta.iter_mut().enumerate() {
        *d = now[slot].saturating_sub(before[slot]);
    }
    delta
}

/// What `metrics` have counted so far, priced by `price` (per lane index),
/// and the requests each (pool, lane) combination served.
pub fn read(metrics: &Metrics, price: impl Fn(usize) -> Option<switchyard_governance::Price>) -> (Totals, Vec<u64>) {
    let mut totals = Totals::default();
    let mut per_combo = vec![0u64; metrics.combos.len()];
    for (index, slot) in metrics.requests.iter().enumerate() {
        let n = slot.load(Ordering::Relaxed);
        if n == 0 {
            continue;
        }
        totals.requests += n;
        match STATUSES.get(index % STATUS_SLOTS) {
            Some(status) if (400..500).contains(status) => totals.client_errors += n,
            Some(status) if *status < 400 => {}
            _ => totals.server_errors += n,
        }
        if let Some(combo) = per_combo.get_mut(index / (STATUS_SLOTS * INGRESSES)) {
            *combo += n;
        }
    }
    for histogram in metrics.duration.iter() {
        histogram_slots(&mut totals.duration, histogram);
    }
    for histogram in metrics.ttfb.iter() {
        histogram_slots(&mut totals.ttfb, histogram);
    }
    for lane in 0..metrics.lanes.len() {
        let kind = |k: usize| metrics.tokens.get(lane * TOKEN_KINDS.len() + k).map_or(0, |a| a.load(Ordering::Relaxed));
        // The kinds in `TOKEN_KINDS` order, priced each at its own rate.
        let tokens = Tokens {
            input: kind(0),
            output: kind(1),
            cache_read: kind(2),
            cache_write: kind(3),
            cache_write_1h: kind(4),
            reasoning: kind(5),
            audio_input: kind(6),
            audio_output: kind(7),
            image_input: kind(8),
            image_output: kind(9),
            ..Tokens::default()
        };
        totals.input_tokens += tokens.input;
        totals.output_tokens += tokens.output;
        if let Some(price) = price(lane) {
            totals.nano_usd += price.cost(&tokens);
        }
    }
    (totals, per_combo)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requests(n: u64, errors: u64, slot: usize) -> Totals {
        let mut totals = Totals { requests: n, server_errors: errors, nano_usd: n * 1000, ..Totals::default() };
        totals.duration[slot] = n;
        totals
    }

    #[test]
    fn quantiles_interpolate_within_their_bucket() {
        let mut slots = [0u64; SLOTS];
        assert_eq!(quantile_ms(&slots, 0.5), None);
        // 100 observations in (5 ms, 10 ms]: the median is half way.
        slots[4] = 100;
        let p50 = quantile_ms(&slots, 0.5).unwrap_or_default();
        assert!((p50 - 7.5).abs() < 1e-9, "{p50}");
        // One slow one above every bound: p99 stays in the fast bucket, p100 is the top bound.
        slots[SLOTS - 1] = 1;
        assert!(quantile_ms(&slots, 0.99).unwrap_or_default() <= 10.0);
        assert_eq!(quantile_ms(&slots, 1.0), Some(1_200_000.0));
    }

    #[test]
    fn minutes_sum_into_points_and_fall_off_after_a_day() {
        let history = History::default();
        history.add(1000, &requests(60, 6, 4));
        history.add(1000, &requests(60, 0, 4));
        history.add(1001, &requests(30, 0, 10));
        let span = history.span(1001, 60, 1);
        assert_eq!(span.points.len(), 60);
        let last = &span.points[59];
        assert_eq!((last.at, last.requests), (1001 * 60, 30));
        assert_eq!(span.points[58].requests, 120);
        assert!((span.points[58].rps - 2.0).abs() < 1e-9);
        assert!((span.points[58].error_rate - 0.05).abs() < 1e-9);
        assert_eq!(span.total.requests, 150);
        assert!((span.total.usd - 150.0 * 1e-6).abs() < 1e-12);
        // Steps of 15 minutes: one point holds both minutes.
        let coarse = history.span(1001, 60, 15);
        assert_eq!(coarse.points.len(), 4);
        assert_eq!(coarse.points.iter().map(|p| p.requests).sum::<u64>(), 150);
        // A day later the first minutes are gone.
        history.add(1000 + MINUTES_KEPT as i64, &requests(1, 0, 0));
        assert_eq!(history.span(1000 + MINUTES_KEPT as i64, MINUTES_KEPT as i64, 1).total.requests, 31);
        // Empty deltas add no minute.
        history.add(5000, &Totals::default());
        assert_eq!(history.minutes.lock().map(|r| r.len()).unwrap_or_default(), 2);
    }

    #[test]
    fn deltas_of_counters_never_go_negative() {
        let before = requests(10, 1, 3);
        let after = requests(15, 1, 3);
        assert_eq!(after.since(&before).requests, 5);
        assert_eq!(before.since(&after), Totals::default());
    }

    #[test]
    fn lane_shares_cover_the_last_minutes_only() {
        let history = History::default();
        let key = |lane: &str| (Arc::<str>::from("pool"), Arc::<str>::from(lane));
        history.add_lanes(100, [(key("a"), 3), (key("b"), 1)], []);
        history.add_lanes(103, [(key("a"), 1)], []);
        let counts = history.lane_counts(103);
        assert_eq!((counts[&key("a")], counts[&key("b")]), (4, 1));
        history.add_lanes(105, [(key("b"), 2)], []);
        let counts = history.lane_counts(105);
        assert_eq!((counts.get(&key("a")).copied(), counts[&key("b")]), (Some(1), 2));
    }

    #[test]
    fn lane_latency_is_the_last_minutes_quantiles() {
        let history = History::default();
        let lane = Arc::<str>::from("a");
        // 99 answers in (5 ms, 10 ms] at minute 100, one in (1 s, 2.5 s] at 103.
        let mut fast = [0; SLOTS];
        fast[4] = 99;
        let mut slow = [0; SLOTS];
        slow[11] = 1;
        history.add_lanes(100, [], [(lane.clone(), fast)]);
        history.add_lanes(103, [], [(lane.clone(), slow)]);
        let seen = history.lane_latency(103)[&lane];
        assert_eq!(seen.answers, 100);
        let (p50, p99) = (seen.p50_ms.unwrap_or_default(), seen.p99_ms.unwrap_or_default());
        assert!((5.0..=10.0).contains(&p50), "{p50}");
        assert!((5.0..=10.0).contains(&p99), "{p99}: the 99th of 100 is still a fast one");
        // Minute 100 falls out of the window: only the slow answer is left.
        let seen = history.lane_latency(105)[&lane];
        assert_eq!(seen.answers, 1);
        assert!(seen.p50_ms.unwrap_or_default() > 1000.0);
        assert!(history.lane_latency(120).is_empty());
    }

    #[test]
    fn slot_deltas_never_go_negative() {
        let mut before = [0; SLOTS];
        before[2] = 5;
        let mut now = before;
        now[2] = 7;
        now[3] = 1;
        let delta = slots_since(&now, &before);
        assert_eq!((delta[2], delta[3]), (2, 1));
        assert_eq!(slots_since(&before, &now), [0; SLOTS]);
    }
}
