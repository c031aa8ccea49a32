//! Prices and costs. A rate card gives USD per million tokens for every
//! kind a provider bills (uncached input, output, cache reads, cache writes
//! of five minutes and of an hour, reasoning, audio and image in and out),
//! and USD per unit (a rerank search unit, an image, a character of speech,
//! a second of audio) and per request for what an operation bills beyond
//! tokens.
//!
//! Money is integer arithmetic throughout: a rate is read as a whole number
//! of pico-USD (10⁻¹² USD) per token or per unit (USD per million tokens ×
//! 10⁶, to the nearest; a card's rate is exact to six decimals of USD per
//! million tokens), products and sums are taken in `u128`, and a cost is
//! integer nano-USD, rounded up once at the end, so that sums over millions
//! of requests never drift and no float error ever adds a nano-USD.

use serde::{Deserialize, Serialize};
use switchyard_ir::Usage;

/// An amount in nano-USD (10⁻⁹ USD).
pub type NanoUsd = u64;

/// Nano-USD per USD.
pub const PER_USD: f64 = 1e9;

/// Pico-USD per nano-USD.
pub(crate) const PICO_PER_NANO: u128 = 1_000;

/// Flat prices: USD per million tokens by kind, and USD per unit and per
/// request for what its operation bills beyond tokens. A kind left `None`
/// is priced as its side's text tokens (reasoning, audio and image output
/// as output; audio and image input as input; hour-long cache writes as
/// five-minute ones).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Price {
    /// Uncached input.
    pub input_utok: f64,
    /// Output.
    pub output_utok: f64,
    /// Cache reads.
    pub cache_read_utok: f64,
    /// Cache writes that live five minutes.
    pub cache_write_utok: f64,
    /// Cache writes that live an hour.
    #[serde(default)]
    pub cache_write_1h_utok: Option<f64>,
    /// Reasoning tokens.
    #[serde(default)]
    pub reasoning_utok: Option<f64>,
    /// Audio input.
    #[serde(default)]
    pub audio_input_utok: Option<f64>,
    /// Audio output.
    #[serde(default)]
    pub audio_output_utok: Option<f64>,
    /// Image input.
    #[serde(default)]
    pub image_input_utok: Option<f64>,
    /// Image output.
    #[serde(default)]
    pub image_output_utok: Option<f64>,
    /// Per request served.
    #[serde(default)]
    pub per_request_usd: f64,
    /// Per unit of the lane's operation (search unit, image, character,
    /// second of audio).
    #[serde(default)]
    pub per_unit_usd: f64,
}

/// What one request used, by kind, with the IR's conventions: `input`
/// counts every prompt token and `cache_read`, `cache_write` (either
/// lifetime; `cache_write_1h` is the hour-long part), `audio_input` and
/// `image_input` are parts of it; `output` counts every generated token
/// and `reasoning`, `audio_output` and `image_output` are parts of it.
/// `units` are its operation's billed units beyond tokens; `requests` is 1
/// when a lane served it (what a per-request price bills).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Tokens {
    /// Prompt tokens, cached included.
    #[serde(default)]
    pub input: u64,
    /// Generated tokens.
    #[serde(default)]
    pub output: u64,
    /// Prompt tokens read from cache.
    #[serde(default)]
    pub cache_read: u64,
    /// Prompt tokens written to cache (both lifetimes).
    #[serde(default)]
    pub cache_write: u64,
    /// Of `cache_write`, those that live an hour.
    #[serde(default)]
    pub cache_write_1h: u64,
    /// Of `output`, reasoning.
    #[serde(default)]
    pub reasoning: u64,
    /// Of `input`, audio.
    #[serde(default)]
    pub audio_input: u64,
    /// Of `output`, audio.
    #[serde(default)]
    pub audio_output: u64,
    /// Of `input`, images.
    #[serde(default)]
    pub image_input: u64,
    /// Of `output`, images.
    #[serde(default)]
    pub image_output: u64,
    /// Billed units beyond tokens.
    #[serde(default)]
    pub units: u64,
    /// Requests a lane served (what a per-request price bills).
    #[serde(default)]
    pub requests: u64,
}

impl Tokens {
    /// Input plus output.
    pub fn total(&self) -> u64 {
        self.input.saturating_add(self.output)
    }

    /// What a lane that served `usage` (and `units` beyond tokens) bills:
    /// one request's tokens by kind.
    pub fn served(usage: &Usage, units: u64) -> Tokens {
        Tokens {
            input: usage.input_tokens,
            output: usage.output_tokens,
            cache_read: usage.cache_read_tokens,
            cache_write: usage.cache_write_tokens,
            cache_write_1h: usage.cache_write_1h_tokens,
            reasoning: usage.reasoning_tokens,
            audio_input: usage.audio_input_tokens,
            audio_output: usage.audio_output_tokens,
            image_input: usage.image_input_tokens,
            image_output: usage.image_output_tokens,
            units,
            requests: 1,
        }
    }

    /// Each count, in the order [`Tokens::KINDS`] names them.
    pub fn counts(&self) -> [u64; 12] {
        [
            self.input,
            self.output,
            self.cache_read,
            self.cache_write,
            self.cache_write_1h,
            self.reasoning,
            self.audio_input,
            self.audio_output,
            self.image_input,
            self.image_output,
            self.units,
            self.requests,
        ]
    }

    /// The tokens of `counts` (in [`Tokens::KINDS`] order).
    pub fn of_counts(counts: [u64; 12]) -> Tokens {
        let [input, output, cache_read, cache_write, cache_write_1h, reasoning, audio_input, audio_output, image_input, image_output, units, requests] =
            counts;
        Tokens {
            input,
            output,
            cache_read,
            cache_write,
            cache_write_1h,
            reasoning,
            audio_input,
            audio_output,
            image_input,
            image_output,
            units,
            requests,
        }
    }

    /// The names of the counts (store columns and reports say them so).
    pub const KINDS: [&'static str; 12] = [
        "input",
        "output",
        "cache_read",
        "cache_write",
        "cache_write_1h",
        "reasoning",
        "audio_input",
        "audio_output",
        "image_input",
        "image_output",
        "units",
        "requests",
    ];

    /// `other` added, kind by kind.
    pub fn add(&mut self, other: &Tokens) {
        let (mine, theirs) = (self.counts(), other.counts());
        *self = Tokens::of_counts(std::array::from_fn(|i| mine[i].saturating_add(theirs[i])));
    }
}

/// How many tokens of each priced kind `tokens` holds: the prompt split
/// into cache reads, hour-long and five-minute cache writes, audio, images
/// and the rest; the output into reasoning, audio, images and the rest.
/// Each part is clamped to what its side has left, so a report whose parts
/// exceed its total is never priced above it.
struct Split {
    input: u64,
    cache_read: u64,
    cache_write_5m: u64,
    cache_write_1h: u64,
    audio_input: u64,
    image_input: u64,
    output: u64,
    reasoning: u64,
    audio_output: u64,
    image_output: u64,
}

impl Split {
    fn of(tokens: &Tokens) -> Split {
        let take = |part: u64, left: &mut u64| {
            let taken = part.min(*left);
            *left -= taken;
            taken
        };
        let mut prompt = tokens.input;
        let cache_read = take(tokens.cache_read, &mut prompt);
        let cache_write_1h = take(tokens.cache_write_1h.min(tokens.cache_write), &mut prompt);
        let cache_write_5m = take(tokens.cache_write.saturating_sub(tokens.cache_write_1h), &mut prompt);
        let audio_input = take(tokens.audio_input, &mut prompt);
        let image_input = take(tokens.image_input, &mut prompt);
        let mut generated = tokens.output;
        let reasoning = take(tokens.reasoning, &mut generated);
        let audio_output = take(tokens.audio_output, &mut generated);
        let image_output = take(tokens.image_output, &mut generated);
        Split {
            input: prompt,
            cache_read,
            cache_write_5m,
            cache_write_1h,
            audio_input,
            image_input,
            output: generated,
            reasoning,
            audio_output,
            image_output,
        }
    }
}

/// A rate in whole pico-USD: `per_million` USD per million tokens (or
/// `per_unit` USD per unit) × 10⁶ (× 10¹²), to the nearest. A negative or
/// non-finite rate is none; one past `u64` is the most a rate can be
/// (config bounds every rate long before).
fn pico(usd_per_million: f64) -> u128 {
    // `as` saturates and maps NaN to 0.
    (usd_per_million * 1e6).round().max(0.0) as u64 as u128
}

impl Price {
    /// Nothing for anything (`..Price::ZERO` completes a const price).
    pub const ZERO: Price = Price {
        input_utok: 0.0,
        output_utok: 0.0,
        cache_read_utok: 0.0,
        cache_write_utok: 0.0,
        cache_write_1h_utok: None,
        reasoning_utok: None,
        audio_input_utok: None,
        audio_output_utok: None,
        image_input_utok: None,
        image_output_utok: None,
        per_request_usd: 0.0,
        per_unit_usd: 0.0,
    };

    /// The cost of `tokens`, rounded up to a whole nano-USD (integer
    /// arithmetic; a cost past `u64` nano-USD is the most one can be).
    pub fn cost(&self, tokens: &Tokens) -> NanoUsd {
        nano_of_pico(self.pico(tokens))
    }

    /// The cost of `tokens` in whole pico-USD, not yet rounded (what a
    /// discount or a factor scales before the one rounding up).
    pub(crate) fn pico(&self, tokens: &Tokens) -> u128 {
        let split = Split::of(tokens);
        let (input, output) = (self.input_utok, self.output_utok);
        let priced = [
            (split.input, input),
            (split.cache_read, self.cache_read_utok),
            (split.cache_write_5m, self.cache_write_utok),
            (split.cache_write_1h, self.cache_write_1h_utok.unwrap_or(self.cache_write_utok)),
            (split.audio_input, self.audio_input_utok.unwrap_or(input)),
            (split.image_input, self.image_input_utok.unwrap_or(input)),
            (split.output, output),
            (split.reasoning, self.reasoning_utok.unwrap_or(output)),
            (split.audio_output, self.audio_output_utok.unwrap_or(output)),
            (split.image_output, self.image_output_utok.unwrap_or(output)),
            // USD per unit is 10⁶ × USD per million units.
            (tokens.units, self.per_unit_usd * 1e6),
            (tokens.requests, self.per_request_usd * 1e6),
        ];
        // Most kinds are none of a request's tokens: no rate is read for them.
        priced
            .into_iter()
            .filter(|&(count, _)| count != 0)
            .fold(0u128, |sum, (count, rate)| sum.saturating_add(u128::from(count).saturating_mul(pico(rate))))
    }

    /// Each side at its dearest kind: a prompt token at the most any kind
    /// of input costs (uncached, a cache write of either lifetime, audio,
    /// an image), a generated one at the most any kind of output costs
    /// (reasoning, audio, an image). What admission reserves at, before it
    /// knows which kinds a request will use.
    pub fn dearest(&self) -> Price {
        let input = [
            Some(self.input_utok),
            Some(self.cache_read_utok),
            Some(self.cache_write_utok),
            self.cache_write_1h_utok,
            self.audio_input_utok,
            self.image_input_utok,
        ];
        let output = [Some(self.output_utok), self.reasoning_utok, self.audio_output_utok, self.image_output_utok];
        Price {
            input_utok: input.into_iter().flatten().fold(0.0, f64::max),
            output_utok: output.into_iter().flatten().fold(0.0, f64::max),
            per_request_usd: self.per_request_usd,
            per_unit_usd: self.per_unit_usd,
            ..Price::default()
        }
    }

    /// The price that is at least each of `prices` in every kind: the rate a
    /// reservation uses when the lane is not chosen yet.
    pub fn ceiling<'a>(prices: impl IntoIterator<Item = &'a Price>) -> Price {
        let most = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        prices.into_iter().fold(Price::default(), |top, p| Price {
            input_utok: top.input_utok.max(p.input_utok),
            output_utok: top.output_utok.max(p.output_utok),
            cache_read_utok: top.cache_read_utok.max(p.cache_read_utok),
            cache_write_utok: top.cache_write_utok.max(p.cache_write_utok),
            cache_write_1h_utok: most(top.cache_write_1h_utok, p.cache_write_1h_utok),
            reasoning_utok: most(top.reasoning_utok, p.reasoning_utok),
            audio_input_utok: most(top.audio_input_utok, p.audio_input_utok),
            audio_output_utok: most(top.audio_output_utok, p.audio_output_utok),
            image_input_utok: most(top.image_input_utok, p.image_input_utok),
            image_output_utok: most(top.image_output_utok, p.image_output_utok),
            per_request_usd: top.per_request_usd.max(p.per_request_usd),
            per_unit_usd: top.per_unit_usd.max(p.per_unit_usd),
        })
    }
}

/// Pico-USD as nano-USD, rounded up (a cost past `u64` nano-USD is the
/// most one can be).
pub(crate) fn nano_of_pico(pico_usd: u128) -> NanoUsd {
    u64::try_from(pico_usd.div_ceil(PICO_PER_NANO)).unwrap_or(NanoUsd::MAX)
}

/// Nano-USD as USD, for reports.
pub fn usd(nano: NanoUsd) -> f64 {
    nano as f64 / PER_USD
}

/// USD as nano-USD, rounded up.
pub fn from_usd(usd: f64) -> NanoUsd {
    (usd * PER_USD).ceil().max(0.0) as NanoUsd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_by_kind_rounded_up() {
        let price = Price {
            input_utok: 0.15,
            output_utok: 0.6,
            cache_read_utok: 0.075,
            cache_write_utok: 0.15,
            ..Price::default()
        };
        let tokens = Tokens { input: 1_000, output: 100, cache_read: 400, ..Tokens::default() };
        // 600 × 0.15 + 100 × 0.6 + 400 × 0.075 = 90 + 60 + 30 = 180 µUSD.
        assert_eq!(price.cost(&tokens), 180_000);
        assert_eq!(price.cost(&Tokens { input: 1, ..Tokens::default() }), 150);
        // A fraction of a nano-USD is rounded up once, at the end.
        let tenth = Price { input_utok: 0.0001, ..Price::default() };
        assert_eq!(tenth.cost(&Tokens { input: 10_001, ..Tokens::default() }), 1_001);
        assert_eq!(usd(from_usd(12.5)), 12.5);
        let top = Price::ceiling(&[price, Price { output_utok: 2.0, ..Price::default() }]);
        assert_eq!((top.input_utok, top.output_utok), (0.15, 2.0));
    }

    #[test]
    fn money_is_exact_where_floats_are_not() {
        // 3 × 0.1 is 0.30000000000000004 in floats: a float cost rounded up
        // billed 301 nano-USD for 300.
        let price = Price { input_utok: 0.1, ..Price::default() };
        assert_eq!(price.cost(&Tokens { input: 3, ..Tokens::default() }), 300);
        // Summing a million one-token rows' tokens costs exactly a million
        // times one row's (spend is read from summed tokens).
        let sonnet = Price { input_utok: 3.0, cache_read_utok: 0.3, ..Price::default() };
        let one = Tokens { input: 7, cache_read: 3, ..Tokens::default() };
        let many = Tokens { input: 7_000_000, cache_read: 3_000_000, ..Tokens::default() };
        // 4 × 3 + 3 × 0.3 = 12.9 µUSD.
        assert_eq!(sonnet.cost(&one), 12_900);
        assert_eq!(sonnet.cost(&many), 12_900 * 1_000_000);
    }

    #[test]
    fn units_and_requests_are_priced_beside_tokens() {
        // A rerank lane at $0.002 a search unit and $0.0001 a request.
        let price = Price { per_unit_usd: 0.002, per_request_usd: 0.0001, ..Price::default() };
        let used = Tokens { units: 3, requests: 1, ..Tokens::default() };
        assert_eq!(price.cost(&used), 6_000_000 + 100_000);
        assert_eq!(price.cost(&Tokens::default()), 0, "a request nobody served costs nothing");
    }

    #[test]
    fn every_kind_is_priced_at_its_own_rate() {
        // Claude Sonnet's card, as the contract writes it.
        let card = Price {
            input_utok: 3.0,
            output_utok: 15.0,
            cache_read_utok: 0.3,
            cache_write_utok: 3.75,
            cache_write_1h_utok: Some(6.0),
            reasoning_utok: Some(15.0),
            audio_input_utok: Some(0.0),
            ..Price::default()
        };
        let tokens = Tokens {
            input: 10_000,
            cache_read: 2_000,
            cache_write: 3_000,
            cache_write_1h: 1_000,
            audio_input: 500,
            output: 1_000,
            reasoning: 400,
            ..Tokens::default()
        };
        // Input: 4,500 uncached × 3 + 2,000 × 0.3 + 2,000 (5 min) × 3.75 + 1,000 (1 h) × 6 + 500 audio × 0
        //      = 13,500 + 600 + 7,500 + 6,000 = 27,600 µUSD; output: 600 × 15 + 400 × 15 = 15,000.
        assert_eq!(card.cost(&tokens), (27_600 + 15_000) * 1_000);
        // An hour-long write costs more than a five-minute one.
        let five = Tokens { input: 1_000, cache_write: 1_000, ..Tokens::default() };
        let hour = Tokens { cache_write_1h: 1_000, ..five };
        assert_eq!((card.cost(&five), card.cost(&hour)), (3_750_000, 6_000_000));
        // A kind without a rate of its own is its side's text rate.
        let plain = Price { input_utok: 1.0, output_utok: 2.0, ..Price::default() };
        let odd = Tokens { input: 10, image_input: 10, output: 10, audio_output: 5, reasoning: 5, ..Tokens::default() };
        assert_eq!(plain.cost(&odd), (10 + 20) * 1_000);
        // Reasoning at a rate of its own; parts past their total are clamped.
        let thinking = Price { output_utok: 10.0, reasoning_utok: Some(20.0), ..Price::default() };
        let over = Tokens { output: 100, reasoning: 500, ..Tokens::default() };
        assert_eq!(thinking.cost(&over), 2_000_000);
    }

    #[test]
    fn rates_past_any_bound_saturate_instead_of_wrapping() {
        let absurd =
            Price { input_utok: 1e300, per_request_usd: f64::INFINITY, output_utok: f64::NAN, ..Price::default() };
        let used = Tokens { input: u64::MAX, output: u64::MAX, requests: 1, ..Tokens::default() };
        assert_eq!(absurd.cost(&used), NanoUsd::MAX);
        assert_eq!(absurd.cost(&Tokens { output: 5, ..Tokens::default() }), 0, "NaN is no rate");
    }

    #[test]
    fn the_dearest_kind_of_each_side_bounds_any_mix() {
        let card = Price {
            input_utok: 3.0,
            output_utok: 15.0,
            cache_read_utok: 0.3,
            cache_write_utok: 3.75,
            cache_write_1h_utok: Some(6.0),
            reasoning_utok: Some(20.0),
            ..Price::default()
        };
        let top = card.dearest();
        assert_eq!((top.input_utok, top.output_utok), (6.0, 20.0));
        let reserved = top.cost(&Tokens { input: 1_000, output: 100, ..Tokens::default() });
        let written = Tokens {
            input: 1_000,
            cache_write: 1_000,
            cache_write_1h: 1_000,
            output: 100,
            reasoning: 100,
            ..Tokens::default()
        };
        assert_eq!(card.cost(&written), reserved, "all at the dearest kinds is what was reserved");
        assert!(card.cost(&Tokens { input: 1_000, output: 100, ..Tokens::default() }) < reserved);
    }

    #[test]
    fn served_usage_keeps_every_kind() {
        let usage = Usage {
            input_tokens: 10,
            output_tokens: 9,
            cache_read_tokens: 1,
            cache_write_tokens: 2,
            cache_write_1h_tokens: 1,
            reasoning_tokens: 3,
            audio_input_tokens: 4,
            audio_output_tokens: 5,
            image_input_tokens: 6,
            image_output_tokens: 1,
            ..Usage::default()
        };
        let tokens = Tokens::served(&usage, 2);
        assert_eq!(tokens.counts(), [10, 9, 1, 2, 1, 3, 4, 5, 6, 1, 2, 1]);
        assert_eq!(Tokens::of_counts(tokens.counts()), tokens);
        let mut twice = tokens;
        twice.add(&tokens);
        assert_eq!(twice.counts(), tokens.counts().map(|n| n * 2));
    }
}
