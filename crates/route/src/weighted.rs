//! Nginx-style smooth weighted round-robin (SWRR). Over every cycle of
//! `sum(weights)` picks each member is chosen exactly `weight` times, and the
//! picks are interleaved rather than bunched.

/// Per-pool SWRR state: one running "current weight" per member.
#[derive(Debug, Clone, Default)]
pub struct SmoothWeighted {
    current: Vec<i64>,
}

impl SmoothWeighted {
    /// State for a pool of `members` members.
    pub fn new(members: usize) -> SmoothWeighted {
        SmoothWeighted { current: vec![0; members] }
    }

    /// Picks the next member among the usable ones. Unusable members are
    /// skipped this round and their share goes to the others.
    pub fn pick(&mut self, weights: &[u32], usable: impl Fn(usize) -> bool) -> Option<usize> {
        self.pick_by(weights.len(), |i| weights[i], usable)
    }

    /// [`pick`](Self::pick) over `members` members whose weights `weight`
    /// reads (an operator may change them at run time; 0 is never chosen).
    pub fn pick_by(
        &mut self,
        members: usize,
        weight: impl Fn(usize) -> u32,
        usable: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        if self.current.len() != members {
            self.current = vec![0; members];
        }
        let mut total: i64 = 0;
        let mut best: Option<usize> = None;
        for index in 0..members {
            let weight = weight(index);
            if weight == 0 || !usable(index) {
                continue;
            }
            let weight = i64::from(weight);
            self.current[index] += weight;
            total += weight;
            if best.is_none_or(|b| self.current[index] > self.current[b]) {
                best = Some(index);
            }
        }
        let chosen = best?;
        self.current[chosen] -= total;
        Some(chosen)
    }

    /// The full try order: the SWRR pick first, then the other usable members
    /// by descending current weight (who would have been picked next), then
    /// config order on ties.
    pub fn order(&mut self, weights: &[u32], usable: impl Fn(usize) -> bool) -> Vec<usize> {
        self.order_by(weights.len(), |i| weights[i], usable)
    }

    /// [`order`](Self::order) over weights read by `weight`.
    pub fn order_by(
        &mut self,
        members: usize,
        weight: impl Fn(usize) -> u32,
        usable: impl Fn(usize) -> bool,
    ) -> Vec<usize> {
        let Some(first) = self.pick_by(members, &weight, &usable) else {
            return Vec::new();
        };
        let mut rest: Vec<usize> = (0..members).filter(|&i| i != first && weight(i) > 0 && usable(i)).collect();
        rest.sort_by(|&a, &b| self.current[b].cmp(&self.current[a]).then(a.cmp(&b)));
        let mut order = Vec::with_capacity(rest.len() + 1);
        order.push(first);
        order.extend(rest);
        order
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn nginx_reference_sequence() {
        // The sequence from nginx's own description of the algorithm for {5, 1, 1}.
        let mut state = SmoothWeighted::new(3);
        let picks: Vec<usize> = (0..7).filter_map(|_| state.pick(&[5, 1, 1], |_| true)).collect();
        assert_eq!(picks, vec![0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn unusable_members_are_skipped_and_order_lists_the_rest() {
        let mut state = SmoothWeighted::new(3);
        for _ in 0..10 {
            assert_ne!(state.pick(&[1, 1, 1], |i| i != 1), Some(1));
        }
        let order = state.order(&[1, 1, 1], |_| true);
        assert_eq!(order.len(), 3);
        assert!(state.order(&[1, 1], |_| false).is_empty());
    }

    proptest! {
        #[test]
        fn every_cycle_gives_exact_shares(weights in proptest::collection::vec(1u32..6, 1..6), cycles in 1usize..4) {
            let total: u32 = weights.iter().sum();
            let mut state = SmoothWeighted::new(weights.len());
            for _ in 0..cycles {
                let mut counts = vec![0u32; weights.len()];
                for _ in 0..total {
                    let pick = state.pick(&weights, |_| true).unwrap();
                    counts[pick] += 1;
                }
                prop_assert_eq!(&counts, &weights);
            }
        }

        #[test]
        fn smooth_no_repeat_when_weights_allow(weights in proptest::collection::vec(1u32..4, 2..6)) {
            // When no member holds more than half the total, SWRR never picks
            // the same member twice in a row within a cycle (a cycle boundary
            // may repeat: the state returns to all-zero there).
            let total: u32 = weights.iter().sum();
            let max = *weights.iter().max().unwrap();
            prop_assume!(2 * max <= total);
            let mut state = SmoothWeighted::new(weights.len());
            for _ in 0..3 {
                let mut last = None;
                for _ in 0..total {
                    let pick = state.pick(&weights, |_| true);
                    prop_assert_ne!(pick, last);
                    last = pick;
                }
            }
        }

        #[test]
        fn order_is_a_permutation_of_usable(weights in proptest::collection::vec(1u32..6, 1..8), mask in any::<u8>()) {
            let mut state = SmoothWeighted::new(weights.len());
            let usable = |i: usize| mask & (1 << (i % 8)) != 0;
            let mut order = state.order(&weights, usable);
            order.sort_unstable();
            let expected: Vec<usize> = (0..weights.len()).filter(|&i| usable(i)).collect();
            prop_assert_eq!(order, expected);
        }
    }
}
