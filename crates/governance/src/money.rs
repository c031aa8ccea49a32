//! Prices and costs. A rate card gives USD per million tokens, which is
//! micro-USD per token; costs are kept in integer nano-USD so that sums over
//! millions of requests never drift, and are always rounded up.

use serde::{Deserialize, Serialize};

/// An amount in nano-USD (10⁻⁹ USD).
pub type NanoUsd = u64;

/// Nano-USD per USD.
pub const PER_USD: f64 = 1e9;

/// A lane's prices, in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Price {
    /// Uncached input.
    pub input_utok: f64,
    /// Output.
    pub output_utok: f64,
    /// Cache reads.
    pub cache_read_utok: f64,
    /// Cache writes.
    pub cache_write_utok: f64,
}

/// Token counts of one request, by kind. `input` counts every prompt token,
/// cached ones included (the IR's convention).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Tokens {
    /// Prompt tokens, cached included.
    pub input: u64,
    /// Generated tokens.
    pub output: u64,
    /// Prompt tokens read from cache.
    pub cache_read: u64,
    /// Prompt tokens written to cache.
    pub cache_write: u64,
}

impl Tokens {
    /// Input plus output.
    pub fn total(&self) -> u64 {
        self.input.saturating_add(self.output)
    }
}

impl Price {
    /// The cost of `tokens`, rounded up to a whole nano-USD.
    pub fn cost(&self, tokens: &Tokens) -> NanoUsd {
        let cached = tokens.cache_read.saturating_add(tokens.cache_write).min(tokens.input);
        let uncached = tokens.input - cached;
        let micro = uncached as f64 * self.input_utok
            + tokens.output as f64 * self.output_utok
            + tokens.cache_read.min(tokens.input) as f64 * self.cache_read_utok
            + tokens.cache_write.min(tokens.input - tokens.cache_read.min(tokens.input)) as f64 * self.cache_write_utok;
        (micro * 1e3).ceil().max(0.0) as NanoUsd
    }

    /// The price that is at least each of `prices` in every kind: the rate a
    /// reservation uses when the lane is not chosen yet.
    pub fn ceiling<'a>(prices: impl IntoIterator<Item = &'a Price>) -> Price {
        prices.into_iter().fold(Price::default(), |top, p| Price {
            input_utok: top.input_utok.max(p.input_utok),
            output_utok: top.output_utok.max(p.output_utok),
            cache_read_utok: top.cache_read_utok.max(p.cache_read_utok),
            cache_write_utok: top.cache_write_utok.max(p.cache_write_utok),
        })
    }
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
        let price = Price { input_utok: 0.15, output_utok: 0.6, cache_read_utok: 0.075, cache_write_utok: 0.15 };
        let tokens = Tokens { input: 1_000, output: 100, cache_read: 400, cache_write: 0 };
        // 600 × 0.15 + 100 × 0.6 + 400 × 0.075 = 90 + 60 + 30 = 180 µUSD.
        assert_eq!(price.cost(&tokens), 180_000);
        assert_eq!(price.cost(&Tokens { input: 1, ..Tokens::default() }), 150);
        assert_eq!(usd(from_usd(12.5)), 12.5);
        let top = Price::ceiling(&[price, Price { output_utok: 2.0, ..Price::default() }]);
        assert_eq!((top.input_utok, top.output_utok), (0.15, 2.0));
    }
}
