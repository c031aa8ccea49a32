//! A provider's reported amount, read exactly: the decimal text of a cost
//! report (`"123.78912"` cents from Anthropic, `0.06` or `3e-06` dollars
//! from OpenAI) as whole pico-USD (10⁻¹² USD), with no float on the way.
//! An amount that is not a plain non-negative decimal in USD within
//! bounds is refused with the reason ([`Skip`]), for the reader to count
//! and leave out.

use serde::Serialize;

/// Pico-USD: what one reported row is read as, and its rows summed in.
pub type PicoUsd = u128;

/// Pico-USD per nano-USD.
const PICO_PER_NANO: u128 = 1_000;

/// The longest amount text read (a float's shortest form is 24 bytes).
const MAX_LEN: usize = 64;

/// The most significant digits read (10³⁶ and its scaling stay in `u128`).
const MAX_DIGITS: usize = 36;

/// The largest amount one row may state: a billion USD.
pub const MAX_ROW: PicoUsd = 1_000_000_000 * 1_000_000_000_000;

/// What a reported amount is stated in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Dollars (OpenAI's `amount.value`).
    Usd,
    /// Cents, "the lowest currency unit" (Anthropic's `amount`).
    Cents,
}

impl Unit {
    /// Powers of ten from the unit to pico-USD.
    fn scale(self) -> i32 {
        match self {
            Unit::Usd => 12,
            Unit::Cents => 10,
        }
    }
}

/// Why a reported row was left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Below zero (a credit or refund is not a model's cost).
    Negative,
    /// Not a decimal number (`NaN`, `Infinity`, empty, text, too long).
    Malformed,
    /// Past [`MAX_ROW`].
    Huge,
    /// Not in USD.
    Currency,
}

/// The rows a run left out, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// Negative amounts.
    pub negative: u64,
    /// Amounts that are not decimal numbers.
    pub malformed: u64,
    /// Amounts past a billion USD.
    pub huge: u64,
    /// Amounts in another currency.
    pub currency: u64,
}

impl Skipped {
    /// Counts one row left out for `skip`.
    pub fn count(&mut self, skip: Skip) {
        let slot = match skip {
            Skip::Negative => &mut self.negative,
            Skip::Malformed => &mut self.malformed,
            Skip::Huge => &mut self.huge,
            Skip::Currency => &mut self.currency,
        };
        *slot = slot.saturating_add(1);
    }

    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Skipped) {
        self.negative = self.negative.saturating_add(other.negative);
        self.malformed = self.malformed.saturating_add(other.malformed);
        self.huge = self.huge.saturating_add(other.huge);
        self.currency = self.currency.saturating_add(other.currency);
    }

    /// Every row left out.
    pub fn total(&self) -> u64 {
        self.negative.saturating_add(self.malformed).saturating_add(self.huge).saturating_add(self.currency)
    }

    /// Each reason with its count (for metrics).
    pub fn by_reason(&self) -> [(&'static str, u64); 4] {
        [("negative", self.negative), ("malformed", self.malformed), ("huge", self.huge), ("currency", self.currency)]
    }
}

/// Whether `currency` names US dollars (OpenAI writes `usd`, Anthropic `USD`).
pub fn is_usd(currency: &str) -> bool {
    currency.eq_ignore_ascii_case("usd")
}

/// `text`, a JSON number's or a decimal string's text (`123.45`, `0.06`,
/// `3e-06`), in `unit`, as pico-USD: exact to the 12th decimal of a
/// dollar, rounded half up past it.
pub fn parse(text: &str, unit: Unit) -> Result<PicoUsd, Skip> {
    if text.is_empty() || text.len() > MAX_LEN {
        return Err(Skip::Malformed);
    }
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((whole, fraction)) if !fraction.is_empty() => (whole, fraction),
        Some(_) => return Err(Skip::Malformed),
        None => (mantissa, ""),
    };
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) {
        return Err(Skip::Malformed);
    }
    let exponent: i32 = match exponent {
        None => 0,
        Some(text) => {
            let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
            if unsigned.is_empty() || unsigned.len() > 4 || !digits(unsigned) {
                return Err(Skip::Malformed);
            }
            text.parse().map_err(|_| Skip::Malformed)?
        }
    };
    // The significant digits: whole and fraction, without the zeros that
    // lead or trail them (they say nothing of the value).
    let fraction = fraction.trim_end_matches('0');
    let joined = format!("{whole}{fraction}");
    let significant = joined.trim_start_matches('0');
    if significant.is_empty() {
        return Ok(0);
    }
    if significant.len() > MAX_DIGITS {
        return Err(Skip::Malformed);
    }
    let value: u128 = significant.parse().map_err(|_| Skip::Malformed)?;
    let fraction_len = i32::try_from(fraction.len()).map_err(|_| Skip::Malformed)?;
    let shift = exponent - fraction_len + unit.scale();
    let pico = if shift >= 0 {
        let factor = 10u128.checked_pow(u32::try_from(shift).map_err(|_| Skip::Huge)?).ok_or(Skip::Huge)?;
        value.checked_mul(factor).ok_or(Skip::Huge)?
    } else {
        // At most 10³⁶ here, so adding half of any divisor up to 10³⁸
        // stays in `u128`; smaller than half a pico-USD past that.
        match 10u128.checked_pow(shift.unsigned_abs()) {
            Some(divisor) => (value + divisor / 2) / divisor,
            None => 0,
        }
    };
    if negative && pico > 0 {
        Err(Skip::Negative)
    } else if pico > MAX_ROW {
        Err(Skip::Huge)
    } else {
        Ok(pico)
    }
}

/// Summed pico-USD as nano-USD, rounded half up (past `u64`: the most).
pub fn nano(pico: PicoUsd) -> u64 {
    u64::try_from(pico.saturating_add(PICO_PER_NANO / 2) / PICO_PER_NANO).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PICO_PER_USD: u128 = 1_000_000_000_000;

    #[test]
    fn decimals_are_read_exactly_in_their_unit() {
        // Anthropic's documented example: "123.45" in USD is $1.23 (and .45 of a cent).
        assert_eq!(parse("123.45", Unit::Cents), Ok(1_234_500_000_000));
        assert_eq!(parse("123.78912", Unit::Cents), Ok(1_237_891_200_000));
        assert_eq!(parse("0", Unit::Cents), Ok(0));
        assert_eq!(parse("0.06", Unit::Usd), Ok(60_000_000_000));
        assert_eq!(parse("7", Unit::Usd), Ok(7 * PICO_PER_USD));
        // A float's exponent form, as JSON writers print small values.
        assert_eq!(parse("3e-06", Unit::Usd), Ok(3_000_000));
        assert_eq!(parse("2.5E+2", Unit::Usd), Ok(250 * PICO_PER_USD));
        assert_eq!(parse("0.1000000000000000000000000000000000000000000", Unit::Usd), Ok(PICO_PER_USD / 10));
        assert_eq!(parse("-0", Unit::Usd), Ok(0));
        // Past the 12th decimal of a dollar: rounded half up.
        assert_eq!(parse("0.0000000000015", Unit::Usd), Ok(2));
        assert_eq!(parse("0.0000000000014", Unit::Usd), Ok(1));
        assert_eq!(parse("1e-300", Unit::Usd), Ok(0));
        assert_eq!(parse("0e9999", Unit::Usd), Ok(0));
    }

    #[test]
    fn a_sum_of_tenths_stays_exact_where_floats_drift() {
        // 0.1 + 0.2 is 0.30000000000000004 in f64; here it is 0.3.
        let sum = parse("0.1", Unit::Usd).unwrap() + parse("0.2", Unit::Usd).unwrap();
        assert_eq!(sum, parse("0.3", Unit::Usd).unwrap());
        let many: PicoUsd = (0..1_000_000).map(|_| parse("0.000001", Unit::Usd).unwrap()).sum();
        assert_eq!(nano(many), 1_000_000_000);
        assert_eq!(nano(1_499), 1);
        assert_eq!(nano(1_500), 2);
        assert_eq!(nano(u128::MAX), u64::MAX);
    }

    #[test]
    fn hostile_amounts_are_refused_with_their_reason() {
        for text in ["-0.5", "-1e3", "-0.0000001"] {
            assert_eq!(parse(text, Unit::Usd), Err(Skip::Negative), "{text}");
        }
        for text in [
            "",
            "NaN",
            "nan",
            "Infinity",
            "-Infinity",
            "inf",
            "1.",
            ".5",
            "1..2",
            "1.2.3",
            "0x10",
            "1e",
            "1e+",
            "1e99999",
            "+1",
            " 1",
            "1 ",
            "1,5",
            "١٢",
            "12abc",
            "\"1\"",
            "null",
        ] {
            assert_eq!(parse(text, Unit::Usd), Err(Skip::Malformed), "{text:?}");
        }
        assert_eq!(parse(&"9".repeat(65), Unit::Usd), Err(Skip::Malformed));
        assert_eq!(parse(&"1".repeat(37), Unit::Usd), Err(Skip::Malformed));
        for text in ["1000000001", "1e10", "1e38", "1e100", "999999999999999999999999999999999999"] {
            assert_eq!(parse(text, Unit::Usd), Err(Skip::Huge), "{text}");
        }
        // The bound itself is read; a cent past it is not.
        assert_eq!(parse("1000000000", Unit::Usd), Ok(MAX_ROW));
        assert_eq!(parse("100000000001", Unit::Cents), Err(Skip::Huge));
        let mut skipped = Skipped::default();
        for skip in [Skip::Negative, Skip::Malformed, Skip::Malformed, Skip::Huge, Skip::Currency] {
            skipped.count(skip);
        }
        assert_eq!((skipped.malformed, skipped.total()), (2, 5));
        assert!(is_usd("usd") && is_usd("USD") && !is_usd("eur") && !is_usd(""));
    }
}
