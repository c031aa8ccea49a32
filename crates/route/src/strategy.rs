//! Native ordering strategies: pure functions from the request projection
//! and the candidates' live signals to a ranked preference list. A strategy
//! ranks; the breaker decides health. A candidate without the signal is
//! demoted (appended in its given order), never excluded; a strategy with no
//! signal at all abstains (`None`) and the weighted floor decides.

use std::cmp::Ordering;

/// The shape of a request, as routing sees it (never its content).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Projection {
    /// Messages in the conversation.
    pub message_count: usize,
    /// Tools were offered.
    pub has_tools: bool,
    /// Characters of text across system and messages.
    pub total_chars: usize,
    /// The caller's output cap.
    pub max_tokens: Option<u64>,
    /// The caller wants a stream.
    pub stream: bool,
}

impl Projection {
    /// Estimated prompt tokens (about four characters a token).
    pub fn estimated_input_tokens(&self) -> f64 {
        (self.total_chars as f64 / 4.0).ceil()
    }

    /// Estimated output tokens: the caller's cap, else a typical reply.
    pub fn estimated_output_tokens(&self) -> f64 {
        self.max_tokens.map_or(256.0, |cap| cap.min(4096) as f64)
    }
}

/// How a lane is paid for, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BillingRank {
    /// A subscription with quota left: zero marginal cost.
    Subscription,
    /// Metered.
    PayAsYouGo,
    /// Free tier (rate-limited, lowest priority).
    Free,
}

/// A candidate's live signals.
#[derive(Debug, Clone, PartialEq)]
pub struct Signals<'a> {
    /// Model name (the final, lexical tiebreak).
    pub model: &'a str,
    /// USD per million input tokens, when priced.
    pub input_utok: Option<f64>,
    /// USD per million output tokens, when priced.
    pub output_utok: Option<f64>,
    /// Rolling latency in milliseconds, once measured.
    pub latency_ms: Option<f64>,
    /// Free concurrency permits (`None` = no cap).
    pub available_concurrency: Option<u64>,
    /// Remaining rate-limit headroom as a share, when governance knows it.
    pub rate_headroom: Option<f64>,
    /// Billing model.
    pub billing: BillingRank,
}

impl Signals<'_> {
    /// Cost per million tokens of a typical request (input plus output).
    pub fn cost_per_mtok(&self) -> Option<f64> {
        Some(self.input_utok? + self.output_utok?)
    }

    /// Estimated cost of this request in USD.
    pub fn estimated_cost(&self, projection: &Projection) -> Option<f64> {
        let input = self.input_utok? * projection.estimated_input_tokens();
        let output = self.output_utok? * projection.estimated_output_tokens();
        Some((input + output) / 1_000_000.0)
    }
}

/// A pool's built-in ordering strategy: one enum from config name to ranking.
///
/// To add one: add a variant and its config name in [`Strategy::ALL`]; the
/// compiler then asks for its name in [`Strategy::as_str`], what it reads in
/// [`Strategy::needs`] and its order in [`rank`]. A signal no candidate
/// carries yet is a field of [`Signals`], filled in `gateway::routing::signals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Smooth weighted round-robin (the default, and the floor every other falls back to).
    Weighted,
    /// Lowest rate-card cost first.
    Cheapest,
    /// Lowest rolling latency first.
    Fastest,
    /// Most free concurrency first.
    LeastBusy,
    /// Most rate-limit headroom first.
    Usage,
    /// Subscription, then pay-as-you-go, then free; then estimated cost; then name.
    Billing,
}

/// What a strategy reads beyond the lanes' own signals, so the gateway
/// computes it only for pools that use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    /// The request's [`Projection`] (parses the body).
    pub projection: bool,
    /// Rate headroom: the caller's key chain (governance) and the lane's
    /// upstream-reported limits (rate-limit headers read from every reply).
    pub headroom: bool,
}

impl Strategy {
    /// Every strategy, in the order the docs list them.
    pub const ALL: [Strategy; 6] = [
        Strategy::Weighted,
        Strategy::Cheapest,
        Strategy::Fastest,
        Strategy::LeastBusy,
        Strategy::Usage,
        Strategy::Billing,
    ];

    /// The config name.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Weighted => "weighted",
            Strategy::Cheapest => "cheapest",
            Strategy::Fastest => "fastest",
            Strategy::LeastBusy => "least_busy",
            Strategy::Usage => "usage",
            Strategy::Billing => "billing",
        }
    }

    /// The strategy a config name means.
    pub fn from_name(name: &str) -> Option<Strategy> {
        Strategy::ALL.into_iter().find(|strategy| strategy.as_str() == name)
    }

    /// What ranking by this strategy reads.
    pub fn needs(self) -> Needs {
        match self {
            Strategy::Weighted | Strategy::Cheapest | Strategy::Fastest | Strategy::LeastBusy => Needs::default(),
            Strategy::Usage => Needs { projection: false, headroom: true },
            Strategy::Billing => Needs { projection: true, headroom: false },
        }
    }
}

/// Ranks `candidates` (indexes into the slice), or abstains with `None`
/// (the weighted floor decides): `Weighted` always abstains.
pub fn rank(strategy: Strategy, projection: &Projection, candidates: &[Signals<'_>]) -> Option<Vec<usize>> {
    match strategy {
        Strategy::Weighted => None,
        Strategy::Cheapest => by_signal(candidates, |c| c.cost_per_mtok(), Order::Ascending),
        Strategy::Fastest => by_signal(candidates, |c| c.latency_ms, Order::Ascending),
        Strategy::LeastBusy => {
            // Concurrency is always known: an uncapped lane has unlimited room.
            by_signal(
                candidates,
                |c| Some(c.available_concurrency.map_or(f64::INFINITY, |n| n as f64)),
                Order::Descending,
            )
        }
        Strategy::Usage => by_signal(candidates, |c| c.rate_headroom, Order::Descending),
        Strategy::Billing => {
            let mut order: Vec<usize> = (0..candidates.len()).collect();
            order.sort_by(|&a, &b| {
                let (x, y) = (&candidates[a], &candidates[b]);
                x.billing
                    .cmp(&y.billing)
                    .then_with(|| compare_optional(x.estimated_cost(projection), y.estimated_cost(projection)))
                    .then_with(|| x.model.cmp(y.model))
                    .then(a.cmp(&b))
            });
            Some(order)
        }
    }
}

#[derive(Clone, Copy)]
enum Order {
    Ascending,
    Descending,
}

/// Sorts by a signal; candidates without it keep their order at the end.
fn by_signal(
    candidates: &[Signals<'_>],
    signal: impl Fn(&Signals<'_>) -> Option<f64>,
    order: Order,
) -> Option<Vec<usize>> {
    let values: Vec<Option<f64>> = candidates.iter().map(|c| signal(c).filter(|v| !v.is_nan())).collect();
    if values.iter().all(Option::is_none) {
        return None;
    }
    let mut ranked: Vec<usize> = (0..candidates.len()).filter(|&i| values[i].is_some()).collect();
    ranked.sort_by(|&a, &b| {
        let (x, y) = (values[a].unwrap_or(0.0), values[b].unwrap_or(0.0));
        let primary = match order {
            Order::Ascending => x.total_cmp(&y),
            Order::Descending => y.total_cmp(&x),
        };
        primary.then(a.cmp(&b))
    });
    ranked.extend((0..candidates.len()).filter(|&i| values[i].is_none()));
    Some(ranked)
}

/// Known values before unknown ones, then ascending.
fn compare_optional(a: Option<f64>, b: Option<f64>) -> Ordering {
    match (a, b) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

/// Applies a hook's ranked preference to `base`: unknown indexes are
/// dropped, duplicates keep their first place, and every candidate the
/// preference omits follows in `base` order, so none is ever stranded.
pub fn apply_preference(base: &[usize], preference: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(base.len());
    for &index in preference {
        if base.contains(&index) && !out.contains(&index) {
            out.push(index);
        }
    }
    for &index in base {
        if !out.contains(&index) {
            out.push(index);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Strategy;
    use super::*;
    use proptest::prelude::*;

    fn signals(model: &str) -> Signals<'_> {
        Signals {
            model,
            input_utok: None,
            output_utok: None,
            latency_ms: None,
            available_concurrency: None,
            rate_headroom: None,
            billing: BillingRank::PayAsYouGo,
        }
    }

    #[test]
    fn cheapest_prefers_low_cost_and_demotes_unpriced() {
        let mut a = signals("sonnet");
        (a.input_utok, a.output_utok) = (Some(3.0), Some(15.0));
        let b = signals("unpriced");
        let mut c = signals("mini");
        (c.input_utok, c.output_utok) = (Some(0.15), Some(0.6));
        assert_eq!(rank(Strategy::Cheapest, &Projection::default(), &[a, b, c]), Some(vec![2, 0, 1]));
        assert_eq!(rank(Strategy::Cheapest, &Projection::default(), &[signals("x"), signals("y")]), None);
    }

    #[test]
    fn fastest_least_busy_and_usage() {
        let mut a = signals("a");
        a.latency_ms = Some(300.0);
        a.available_concurrency = Some(2);
        let mut b = signals("b");
        b.latency_ms = Some(90.0);
        b.available_concurrency = Some(10);
        let c = signals("c");
        let list = [a, b, c];
        assert_eq!(rank(Strategy::Fastest, &Projection::default(), &list), Some(vec![1, 0, 2]));
        assert_eq!(rank(Strategy::LeastBusy, &Projection::default(), &list), Some(vec![2, 1, 0]));
        assert_eq!(rank(Strategy::Usage, &Projection::default(), &list), None, "no governance, no signal");
    }

    #[test]
    fn billing_ranks_plan_then_request_cost_then_name() {
        let projection = Projection { total_chars: 40_000, max_tokens: Some(1000), ..Projection::default() };
        let mut free = signals("free-model");
        free.billing = BillingRank::Free;
        let mut sub = signals("sub-model");
        sub.billing = BillingRank::Subscription;
        let mut pricey = signals("pricey");
        (pricey.input_utok, pricey.output_utok) = (Some(15.0), Some(75.0));
        let mut cheap = signals("cheap");
        (cheap.input_utok, cheap.output_utok) = (Some(0.15), Some(0.6));
        let unpriced = signals("a-unpriced");
        let order = rank(Strategy::Billing, &projection, &[free, pricey, unpriced, sub, cheap]);
        assert_eq!(order, Some(vec![3, 4, 1, 2, 0]));
    }

    #[test]
    fn preferences_drop_unknowns_dedupe_and_append_the_omitted() {
        assert_eq!(apply_preference(&[0, 1, 2, 3], &[2, 9, 2, 0]), vec![2, 0, 1, 3]);
        assert_eq!(apply_preference(&[3, 1], &[]), vec![3, 1]);
    }

    fn arb_signals(
    ) -> impl proptest::strategy::Strategy<Value = (Option<f64>, Option<f64>, Option<f64>, Option<u64>, u8)> {
        (
            proptest::option::of(0.0f64..20.0),
            proptest::option::of(0.0f64..80.0),
            proptest::option::of(1.0f64..500.0),
            proptest::option::of(0u64..32),
            0u8..3,
        )
    }

    proptest! {
        #[test]
        fn rankings_are_deterministic_permutations(raw in proptest::collection::vec(arb_signals(), 1..8), chars in 0usize..100_000) {
            let names: Vec<String> = (0..raw.len()).map(|i| format!("m{}", (i * 7) % 5)).collect();
            let list: Vec<Signals<'_>> = raw.iter().zip(&names).map(|((i, o, l, a, b), name)| Signals {
                model: name,
                input_utok: *i,
                output_utok: *o,
                latency_ms: *l,
                available_concurrency: *a,
                rate_headroom: None,
                billing: match b { 0 => BillingRank::Subscription, 1 => BillingRank::PayAsYouGo, _ => BillingRank::Free },
            }).collect();
            let projection = Projection { total_chars: chars, ..Projection::default() };
            for ranking in Strategy::ALL {
                let first = rank(ranking, &projection, &list);
                prop_assert_eq!(&first, &rank(ranking, &projection, &list));
                if let Some(order) = first {
                    let mut sorted = order.clone();
                    sorted.sort_unstable();
                    prop_assert_eq!(sorted, (0..list.len()).collect::<Vec<_>>());
                }
            }
        }

        #[test]
        fn omitted_candidates_stay_reachable(base in proptest::collection::vec(0usize..10, 0..10), pref in proptest::collection::vec(0usize..12, 0..12)) {
            let mut base = base;
            base.sort_unstable();
            base.dedup();
            let out = apply_preference(&base, &pref);
            let mut sorted = out.clone();
            sorted.sort_unstable();
            prop_assert_eq!(sorted, base);
        }
    }
}
