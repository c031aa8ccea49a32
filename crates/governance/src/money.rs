//! Prices and costs. A rate card gives USD per million tokens, which is
//! micro-USD per token, and, for operations billed by other units (a
//! rerank search unit, an image, a character of speech, a second of
//! audio), USD per unit and per request; costs are kept in integer nano-USD
//! so that sums over millions of requests never drift, and are always
//! rounded up.

use serde::{Deserialize, Serialize};

/// An amount in nano-USD (10⁻⁹ USD).
pub type NanoUsd = u64;

/// Nano-USD per USD.
pub const PER_USD: f64 = 1e9;

/// A lane's prices: USD per million tokens, and USD per unit and per
/// request for what its operation bills beyond tokens.
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
    /// Per request served.
    #[serde(default)]
    pub per_request_usd: f64,
    /// Per unit of the lane's operation (search unit, image, character,
    /// second of audio).
    #[serde(default)]
    pub per_unit_usd: f64,
}

/// What one request used, by kind. `input` counts every prompt token,
/// cached ones included (the IR's convention); `units` are its
/// operation's billed units beyond tokens; `requests` is 1 when a lane
/// served it (what a per-request price bills).
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
    /// Billed units beyond tokens.
    #[serde(default)]
    pub units: u64,
    /// Requests served (billed per request).
    #[serde(default)]
    pub requests: u64,
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
            + tokens.cache_write.min(tokens.input - tokens.cache_read.min(tokens.input)) as f64 * self.cache_write_utok
            + tokens.units as f64 * self.per_unit_usd * 1e6
            + tokens.requests as f64 * self.per_request_usd * 1e6;
        // `as` saturates: a product past u64 is the most a cost can be.
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
            per_request_usd: top.per_request_usd.max(p.per_request_usd),
            per_unit_usd: top.per_unit_usd.max(p.per_unit_usd),
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
        assert_eq!(usd(from_usd(12.5)), 12.5);
        let top = Price::ceiling(&[price, Price { output_utok: 2.0, ..Price::default() }]);
        assert_eq!((top.input_utok, top.output_utok), (0.15, 2.0));
    }

    #[test]
    fn units_and_requests_are_priced_beside_tokens() {
        // A rerank lane at $0.002 a search unit and $0.0001 a request.
        let price = Price { per_unit_usd: 0.002, per_request_usd: 0.0001, ..Price::default() };
        let used = Tokens { units: 3, requests: 1, ..Tokens::default() };
        assert_eq!(price.cost(&used), 6_000_000 + 100_000);
        assert_eq!(price.cost(&Tokens::default()), 0, "a request nobody served costs nothing");
    }
}
