//! A rate card entry whole: the flat [`Price`] of its base, tiers by a
//! request's input size (long-context pricing: above a number of input
//! tokens the whole request is priced at the tier's rates), a batch
//! discount and a factor per service tier the upstream reports; and a
//! group's [`Pricing`] — a [`Markup`], which turns what a request cost
//! (what the provider bills) into what its tenant is charged, and a card
//! of its own that prices the lanes it names outright — with [`resolve`],
//! which finds what prices a request along its group's chain.
//!
//! Shares and factors are whole millionths ([`Ppm`]), so a discounted,
//! scaled or marked-up cost is integer arithmetic like a flat one: the
//! tier's pico-USD sum times the factors, rounded up to a whole nano-USD
//! once.

use serde::{Deserialize, Serialize};
use switchyard_ir::ServiceTier;

use crate::money::{nano_of_pico, NanoUsd, Price, Tokens, PICO_PER_NANO};

/// Millionths: [`ONE`] is a whole share, a factor of 1×.
pub type Ppm = u32;

/// One, in millionths.
pub const ONE: Ppm = 1_000_000;

/// The most tiers one entry may have.
pub const MAX_TIERS: usize = 8;

/// The largest factor a service tier may have (10×).
pub const MAX_FACTOR: Ppm = 10 * ONE;

/// The largest markup (10, i.e. 1,000 %).
pub const MAX_MARKUP: Ppm = 10 * ONE;

/// A share or factor as millionths, to the nearest (`None`: not finite,
/// negative or past `u32`).
pub fn ppm(value: f64) -> Option<Ppm> {
    let scaled = (value * f64::from(ONE)).round();
    (value.is_finite() && value >= 0.0 && scaled <= f64::from(Ppm::MAX)).then_some(scaled as Ppm)
}

/// A long-context tier: a request whose input tokens (its whole prompt,
/// cache reads and writes included) exceed `above_input_tokens` is priced,
/// every kind of it, at `price`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tier {
    /// The threshold, exclusive.
    pub above_input_tokens: u64,
    /// The tier's rates (config fills a kind the tier leaves out with the
    /// base's rate for it).
    pub price: Price,
}

/// A rate card entry: its base prices and what changes them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Card {
    /// The flat prices of a request under every tier's threshold.
    pub base: Price,
    /// Tiers by input size, thresholds ascending (config proves it).
    pub tiers: Vec<Tier>,
    /// The share off a line of a batch (or a request the upstream says it
    /// served at its `batch` tier).
    pub batch_discount: Ppm,
    /// The factor of each service tier the upstream may report, by
    /// [`ServiceTier::index`] (`None`: 1×; the batch tier's is the
    /// discount).
    pub service_tiers: [Option<Ppm>; ServiceTier::ALL.len()],
}

/// How a request was served, as far as its price goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Served {
    /// A line of one of the gateway's batches.
    pub batch: bool,
    /// The service tier the upstream says served it.
    pub tier: Option<ServiceTier>,
}

impl Card {
    /// A card of flat prices: no tier, no discount, no factor.
    pub fn flat(base: Price) -> Card {
        Card { base, ..Card::default() }
    }

    /// The prices of a request of `input` tokens: the highest tier whose
    /// threshold it exceeds, else the base.
    pub fn price_for(&self, input: u64) -> &Price {
        self.tiers.iter().rev().find(|tier| input > tier.above_input_tokens).map_or(&self.base, |tier| &tier.price)
    }

    /// What `tokens` cost served as `served`: the tier their input selects,
    /// then the batch discount and the service tier's factor, rounded up to
    /// a whole nano-USD once.
    pub fn cost(&self, tokens: &Tokens, served: Served) -> NanoUsd {
        let pico = self.price_for(tokens.input).pico(tokens);
        let (keep, factor) = self.factors(served);
        if keep == ONE && factor == ONE {
            return nano_of_pico(pico);
        }
        let scaled = pico.saturating_mul(u128::from(keep)).saturating_mul(u128::from(factor));
        let per_nano = PICO_PER_NANO * u128::from(ONE) * u128::from(ONE);
        u64::try_from(scaled.div_ceil(per_nano)).unwrap_or(NanoUsd::MAX)
    }

    /// The share of its price a request served as `served` keeps (after a
    /// batch discount) and its service tier's factor.
    fn factors(&self, served: Served) -> (Ppm, Ppm) {
        let batch = served.batch || served.tier == Some(ServiceTier::Batch);
        let keep = if batch { ONE - self.batch_discount.min(ONE) } else { ONE };
        let factor = served
            .tier
            .filter(|tier| *tier != ServiceTier::Batch)
            .and_then(|tier| self.service_tiers[tier.index()])
            .unwrap_or(ONE);
        (keep, factor)
    }

    /// Prices at least any request's under this card, kind by kind: the
    /// dearest of the base and every tier, times the largest service-tier
    /// factor above 1×. What admission reserves at before it knows the
    /// prompt's size or the tier that will serve it.
    pub fn bound(&self) -> Price {
        let top = Price::ceiling(std::iter::once(&self.base).chain(self.tiers.iter().map(|tier| &tier.price)));
        let factor = self.service_tiers.iter().flatten().copied().max().unwrap_or(ONE);
        if factor <= ONE {
            return top;
        }
        let by = f64::from(factor) / f64::from(ONE);
        let scale = |rate: f64| rate * by;
        Price {
            input_utok: scale(top.input_utok),
            output_utok: scale(top.output_utok),
            cache_read_utok: scale(top.cache_read_utok),
            cache_write_utok: scale(top.cache_write_utok),
            cache_write_1h_utok: top.cache_write_1h_utok.map(scale),
            reasoning_utok: top.reasoning_utok.map(scale),
            audio_input_utok: top.audio_input_utok.map(scale),
            audio_output_utok: top.audio_output_utok.map(scale),
            image_input_utok: top.image_input_utok.map(scale),
            image_output_utok: top.image_output_utok.map(scale),
            per_request_usd: scale(top.per_request_usd),
            per_unit_usd: scale(top.per_unit_usd),
        }
    }
}

/// A group's markup over cost: what its tenant is charged is the cost and
/// this share of it more (rounded up to a whole nano-USD).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Markup(pub Ppm);

impl Markup {
    /// What a request that cost `cost` is charged.
    pub fn charge(self, cost: NanoUsd) -> NanoUsd {
        let more = (u128::from(cost) * u128::from(self.0)).div_ceil(u128::from(ONE));
        u64::try_from(u128::from(cost) + more).unwrap_or(NanoUsd::MAX)
    }
}

/// A group's own pricing for chargeback: a rate card of its own for the
/// lanes it names (its tenant's price for them, whatever they cost) and a
/// markup over cost for the rest.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pricing {
    /// Its markup (`None`: it sets none).
    pub markup: Option<Markup>,
    /// Its own card, by the lane name a `rate_card` entry names (a model,
    /// `provider/model` or `provider/*`).
    pub cards: std::collections::HashMap<std::sync::Arc<str>, Card>,
}

impl Pricing {
    /// Whether it sets nothing (its requests are priced as its parent's).
    pub fn is_empty(&self) -> bool {
        self.markup.is_none() && self.cards.is_empty()
    }

    /// Its card's entry for lane `lane` of `provider`: the lane's own name,
    /// else `provider/*` (the operator's card is looked up the same way).
    pub fn card_for(&self, lane: &str, provider: &str) -> Option<&Card> {
        if self.cards.is_empty() {
            return None;
        }
        self.cards.get(lane).or_else(|| self.cards.get(format!("{provider}/*").as_str()))
    }
}

/// What prices one request: a group's own card, a markup over cost, or
/// the cost itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Priced<'a> {
    /// The nearest card naming its lane.
    Card(&'a Card),
    /// The nearest markup.
    Markup(Markup),
    /// Nothing on the chain prices it: its tenant is charged its cost.
    Cost,
}

impl Priced<'_> {
    /// What a request of `tokens` served as `served`, that cost `cost`, is
    /// charged: its card's arithmetic (a tier, a discount and a factor as
    /// [`Card::cost`]), or its cost and the markup.
    pub fn charge(self, tokens: &Tokens, served: Served, cost: NanoUsd) -> NanoUsd {
        match self {
            Priced::Card(card) => card.cost(tokens, served),
            Priced::Markup(markup) => markup.charge(cost),
            Priced::Cost => cost,
        }
    }
}

/// What prices a request of lane `lane` (of `provider`; `None`: no lane,
/// an MCP tool call) for a group whose pricing, then its ancestors' nearest
/// first, is `chain`: the first group that either names the lane in its
/// card or sets a markup decides (its card for a lane it names, else its
/// markup); nothing on the chain: the cost. A group above the one that
/// decides never changes the price.
pub fn resolve<'a>(chain: impl IntoIterator<Item = &'a Pricing>, lane: Option<(&str, &str)>) -> Priced<'a> {
    for pricing in chain {
        if let Some(card) = lane.and_then(|(lane, provider)| pricing.card_for(lane, provider)) {
            return Priced::Card(card);
        }
        if let Some(markup) = pricing.markup {
            return Priced::Markup(markup);
        }
    }
    Priced::Cost
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Claude Sonnet's card with its long-context tier (the contract's).
    fn sonnet() -> Card {
        let base = Price {
            input_utok: 3.0,
            output_utok: 15.0,
            cache_read_utok: 0.3,
            cache_write_utok: 3.75,
            cache_write_1h_utok: Some(6.0),
            ..Price::default()
        };
        let long = Price {
            input_utok: 6.0,
            output_utok: 22.5,
            cache_read_utok: 0.6,
            cache_write_utok: 7.5,
            cache_write_1h_utok: Some(12.0),
            ..Price::default()
        };
        Card {
            base,
            tiers: vec![Tier { above_input_tokens: 200_000, price: long }],
            batch_discount: ONE / 2,
            service_tiers: [None, Some(1_800_000), Some(500_000), None, None],
        }
    }

    #[test]
    fn the_whole_request_is_priced_at_the_tier_its_input_exceeds() {
        let card = sonnet();
        let at = |input: u64| Tokens { input, output: 1_000, ..Tokens::default() };
        // 200,000 is not above 200,000: the base.
        assert_eq!(card.cost(&at(200_000), Served::default()), 600_000_000 + 15_000_000);
        // 250,000 is: every token at the tier's rates, the first 200,000 too.
        assert_eq!(card.cost(&at(250_000), Served::default()), 1_500_000_000 + 22_500_000);
        // Cache reads of a long prompt at the tier's cache rate.
        let cached = Tokens { input: 250_000, cache_read: 200_000, ..Tokens::default() };
        assert_eq!(card.cost(&cached, Served::default()), 50_000 * 6_000 + 200_000 * 600);
    }

    #[test]
    fn a_batch_line_is_discounted_and_a_service_tier_scales() {
        let card = sonnet();
        let tokens = Tokens { input: 1_000, output: 100, ..Tokens::default() };
        let full = card.cost(&tokens, Served::default());
        assert_eq!(full, 3_000_000 + 1_500_000);
        assert_eq!(card.cost(&tokens, Served { batch: true, tier: None }), full / 2);
        // The upstream saying `batch` is the same discount, never twice.
        let reported = Served { batch: true, tier: Some(ServiceTier::Batch) };
        assert_eq!(card.cost(&tokens, reported), full / 2);
        assert_eq!(card.cost(&tokens, Served { batch: false, tier: Some(ServiceTier::Priority) }), full * 9 / 5);
        assert_eq!(card.cost(&tokens, Served { batch: false, tier: Some(ServiceTier::Flex) }), full / 2);
        assert_eq!(card.cost(&tokens, Served { batch: false, tier: Some(ServiceTier::Standard) }), full);
        // A third off a cost of one pico-USD short of whole nano-USD: one rounding, up.
        let odd = Card { batch_discount: ONE / 3, ..Card::flat(Price { input_utok: 0.001, ..Price::default() }) };
        // 7 tokens × 1,000 pico = 7,000 pico; kept 2/3 (666,667 ppm) = 4,666.669 pico → 5 nano.
        assert_eq!(odd.cost(&Tokens { input: 7, ..Tokens::default() }, Served { batch: true, tier: None }), 5);
    }

    #[test]
    fn the_bound_is_the_dearest_tier_times_the_dearest_factor() {
        let bound = sonnet().bound();
        assert!((bound.input_utok - 6.0 * 1.8).abs() < 1e-9, "{bound:?}");
        assert!((bound.output_utok - 22.5 * 1.8).abs() < 1e-9, "{bound:?}");
        let worst = Tokens { input: 300_000, cache_write: 300_000, cache_write_1h: 300_000, ..Tokens::default() };
        let priority = Served { batch: false, tier: Some(ServiceTier::Priority) };
        // Admission prices a prompt's tokens as plain input at the dearest kind.
        let prompt = Tokens { input: 300_000, ..Tokens::default() };
        let (cost, reserved) = (sonnet().cost(&worst, priority), bound.dearest().cost(&prompt));
        assert!(cost <= reserved, "{cost} > {reserved}");
        assert_eq!(Card::flat(sonnet().base).bound(), sonnet().base);
    }

    #[test]
    fn a_markup_charges_its_share_more_rounded_up() {
        assert_eq!(Markup(150_000).charge(1_000_000), 1_150_000);
        assert_eq!(Markup(150_000).charge(1), 2, "a fraction of a nano-USD more is one more");
        assert_eq!(Markup(0).charge(12_345), 12_345);
        assert_eq!(Markup(MAX_MARKUP).charge(u64::MAX), u64::MAX);
        assert_eq!((ppm(0.15), ppm(-0.1), ppm(f64::NAN), ppm(1e9)), (Some(150_000), None, None, None));
    }

    fn pricing(markup: Option<Ppm>, lanes: &[(&str, Card)]) -> Pricing {
        Pricing {
            markup: markup.map(Markup),
            cards: lanes.iter().map(|(lane, card)| (std::sync::Arc::from(*lane), card.clone())).collect(),
        }
    }

    #[test]
    fn the_nearest_group_that_names_the_lane_or_sets_a_markup_prices_it() {
        let card = Card::flat(Price { input_utok: 5.0, output_utok: 20.0, ..Price::default() });
        let tokens = Tokens { input: 1_000, output: 100, ..Tokens::default() };
        let own = pricing(Some(100_000), &[("sonnet", card.clone())]);
        let parent = pricing(Some(150_000), &[("gpt", card.clone())]);
        let lane = |name| Some((name, "claude"));
        // Its own card for the lane it names: the card's arithmetic, never a markup.
        assert_eq!(resolve([&own, &parent], lane("sonnet")), Priced::Card(&card));
        assert_eq!(
            resolve([&own, &parent], lane("sonnet")).charge(&tokens, Served::default(), 1),
            5_000_000 + 2_000_000
        );
        // A lane it does not name: its own markup, before the parent's card.
        assert_eq!(resolve([&own, &parent], lane("gpt")), Priced::Markup(Markup(100_000)));
        // A group that sets nothing passes to its parent; a card without a
        // markup passes a lane it does not name up.
        let bare = Pricing::default();
        let card_only = pricing(None, &[("sonnet", card.clone())]);
        assert_eq!(resolve([&bare, &card_only, &parent], lane("gpt")), Priced::Card(&card));
        assert_eq!(resolve([&bare, &card_only], lane("gpt")), Priced::Cost);
        assert_eq!(resolve([&bare, &card_only], lane("gpt")).charge(&tokens, Served::default(), 42), 42);
        // `provider/*` names every lane of the provider; an MCP tool call
        // (no lane) takes the markup.
        let any = pricing(None, &[("claude/*", card.clone())]);
        assert_eq!(resolve([&any], lane("claude/opus")), Priced::Card(&card));
        assert_eq!(resolve([&any, &parent], None), Priced::Markup(Markup(150_000)));
    }

    fn tokens() -> impl Strategy<Value = Tokens> {
        (0u64..2_000_000, 0u64..200_000, 0u64..2_000_000, 0u64..2_000_000, 0u64..100_000).prop_map(
            |(input, output, cache_read, cache_write, reasoning)| Tokens {
                input,
                output,
                cache_read: cache_read.min(input),
                cache_write: cache_write.min(input),
                reasoning: reasoning.min(output),
                ..Tokens::default()
            },
        )
    }

    /// A card whose tiers ascend in threshold and in every rate (each at
    /// least the one below it).
    fn rising() -> impl Strategy<Value = Card> {
        (prop::collection::vec((1u64..500_000, 0u32..3_000_000), 0..MAX_TIERS), 1u32..5_000_000).prop_map(
            |(steps, input_rate)| {
                let base = Price {
                    input_utok: f64::from(input_rate) / 1e6,
                    output_utok: f64::from(input_rate) / 2e5,
                    cache_read_utok: f64::from(input_rate) / 1e7,
                    cache_write_utok: f64::from(input_rate) / 8e5,
                    ..Price::default()
                };
                let (mut above, mut price, mut tiers) = (0u64, base, Vec::new());
                for (gap, raise) in steps {
                    above += gap;
                    let up = 1.0 + f64::from(raise) / 1e6;
                    price = Price {
                        input_utok: price.input_utok * up,
                        output_utok: price.output_utok * up,
                        cache_read_utok: price.cache_read_utok * up,
                        cache_write_utok: price.cache_write_utok * up,
                        ..price
                    };
                    tiers.push(Tier { above_input_tokens: above, price });
                }
                Card { base, tiers, ..Card::default() }
            },
        )
    }

    /// A chain of groups' pricing (nearest first), each naming lane `a`,
    /// lane `b` or neither in its card, with or without a markup.
    fn chain() -> impl Strategy<Value = Vec<Pricing>> {
        let one = (prop::option::of(0u32..MAX_MARKUP), 0u8..3, 1u32..20_000_000).prop_map(|(markup, names, rate)| {
            let card = Card::flat(Price {
                input_utok: f64::from(rate) / 1e6,
                output_utok: f64::from(rate) / 2e5,
                ..Price::default()
            });
            match names {
                0 => pricing(markup, &[]),
                1 => pricing(markup, &[("a", card)]),
                _ => pricing(markup, &[("b", card)]),
            }
        });
        prop::collection::vec(one, 0..8)
    }

    proptest! {
        #[test]
        fn only_the_nearest_group_that_prices_a_lane_decides_its_price(
            chain in chain(),
            above in chain(),
            used in tokens(),
            cost in 0u64..1_000_000_000_000,
        ) {
            let lane = Some(("a", "p"));
            let decides = chain.iter().position(|p| p.markup.is_some() || p.cards.contains_key("a"));
            let price = resolve(&chain, lane).charge(&used, Served::default(), cost);
            match decides {
                None => prop_assert_eq!(price, cost),
                Some(at) => {
                    // Its own card prices a lane it names exactly, whatever
                    // markup it or any group above sets.
                    if let Some(card) = chain[at].cards.get("a") {
                        prop_assert_eq!(price, card.cost(&used, Served::default()));
                    } else {
                        prop_assert_eq!(Some(price), chain[at].markup.map(|m| m.charge(cost)));
                    }
                    // Whatever the groups above it set, the price holds.
                    let mut changed = chain[..=at].to_vec();
                    changed.extend(above.iter().cloned());
                    prop_assert_eq!(resolve(&changed, lane).charge(&used, Served::default(), cost), price);
                }
            }
        }

        #[test]
        fn tier_selection_is_monotone_in_input(card in rising(), a in 0u64..5_000_000, b in 0u64..5_000_000) {
            let (low, high) = (a.min(b), a.max(b));
            let place = |input: u64| card.tiers.iter().filter(|t| input > t.above_input_tokens).count();
            prop_assert!(place(low) <= place(high));
            let chosen = card.price_for(high);
            match place(high) {
                0 => prop_assert_eq!(chosen, &card.base),
                n => prop_assert_eq!(chosen, &card.tiers[n - 1].price),
            }
        }

        #[test]
        fn a_higher_tier_never_costs_less_than_the_base(card in rising(), used in tokens()) {
            let flat = card.base.cost(&used);
            prop_assert!(card.cost(&used, Served::default()) >= flat);
            // And more input never lands on a cheaper tier's rates.
            let more = Tokens { input: used.input + 300_000, ..used };
            prop_assert!(card.cost(&more, Served::default()) >= card.price_for(used.input).cost(&more));
        }

        #[test]
        fn discounts_factors_and_markups_are_exact_integers(
            used in tokens(),
            discount in 0u32..=ONE,
            factor in 1u32..MAX_FACTOR,
            markup in 0u32..MAX_MARKUP,
        ) {
            let base = Price { input_utok: 3.0, output_utok: 15.0, cache_read_utok: 0.3, cache_write_utok: 3.75, ..Price::default() };
            let mut service_tiers = [None; ServiceTier::ALL.len()];
            service_tiers[ServiceTier::Priority.index()] = Some(factor);
            let card = Card { base, tiers: Vec::new(), batch_discount: discount, service_tiers };
            let pico = base.pico(&used);
            // The discounted cost is the exact product, rounded up once.
            let batch = card.cost(&used, Served { batch: true, tier: None });
            let exact = pico * u128::from(ONE - discount) * u128::from(ONE);
            let per_nano = PICO_PER_NANO * u128::from(ONE) * u128::from(ONE);
            prop_assert_eq!(u128::from(batch), exact.div_ceil(per_nano));
            prop_assert!(batch <= base.cost(&used));
            let scaled = card.cost(&used, Served { batch: false, tier: Some(ServiceTier::Priority) });
            prop_assert_eq!(u128::from(scaled), (pico * u128::from(factor) * u128::from(ONE)).div_ceil(per_nano));
            // A markup adds its share of the cost, rounded up, to the nano-USD.
            let cost = base.cost(&used);
            let charged = Markup(markup).charge(cost);
            prop_assert_eq!(u128::from(charged - cost), (u128::from(cost) * u128::from(markup)).div_ceil(u128::from(ONE)));
        }
    }
}
