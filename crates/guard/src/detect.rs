//! The built-in detectors: PII (emails, phone numbers, card numbers that
//! pass the Luhn check, IBANs that pass the mod-97 check) and secrets
//! (cloud and API keys, bearer tokens, private key blocks). Each is a
//! bounded pattern (its longest match is known, so a stream holds back at
//! most that much) and, where digits alone would match too much, a check.

/// A built-in detector.
#[derive(Debug, Clone, Copy)]
pub struct Detector {
    /// The name a policy's `detect:` list uses.
    pub name: &'static str,
    /// The placeholder's kind (`[EMAIL_1]`).
    pub label: &'static str,
    /// The pattern.
    pub pattern: &'static str,
    /// A check a match must pass too.
    pub check: Option<fn(&str) -> bool>,
}

/// What `detect: [secrets]` expands to: each secret pattern is its own rule
/// (so a decision names which), all with the `SECRET` placeholder.
pub const SECRETS: [Detector; 7] = [
    Detector { name: "aws_access_key", label: "SECRET", pattern: r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", check: None },
    Detector {
        name: "private_key",
        label: "SECRET",
        pattern: r"-----BEGIN [A-Z]{0,16} ?PRIVATE KEY-----",
        check: None,
    },
    Detector { name: "bearer_token", label: "SECRET", pattern: r"\b[Bb]earer [A-Za-z0-9._~+/=-]{20,512}", check: None },
    Detector { name: "api_key", label: "SECRET", pattern: r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,256}", check: None },
    Detector { name: "github_token", label: "SECRET", pattern: r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b", check: None },
    Detector { name: "slack_token", label: "SECRET", pattern: r"\bxox[abposr]-[A-Za-z0-9-]{10,200}", check: None },
    Detector { name: "google_api_key", label: "SECRET", pattern: r"\bAIza[0-9A-Za-z_-]{35}\b", check: None },
];

/// The PII detectors.
pub const PII: [Detector; 4] = [
    Detector {
        name: "email",
        label: "EMAIL",
        pattern: r"\b[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){1,6}\b",
        check: None,
    },
    Detector {
        name: "phone",
        label: "PHONE",
        pattern: r"(?:\+[1-9][0-9 ().-]{6,18}[0-9]|\(?\b[2-9][0-9]{2}\)?[ .-][0-9]{3}[ .-][0-9]{4})\b",
        check: Some(phone_digits),
    },
    Detector { name: "card", label: "CARD", pattern: r"\b(?:[0-9][ -]?){12,18}[0-9]\b", check: Some(luhn) },
    Detector { name: "iban", label: "IBAN", pattern: r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){11,30}\b", check: Some(iban) },
];

/// The detector a `detect:` entry names (`secrets` names all of [`SECRETS`]).
pub fn named(name: &str) -> Option<&'static [Detector]> {
    match name {
        "secrets" => Some(&SECRETS),
        _ => PII.iter().position(|d| d.name == name).map(|at| &PII[at..=at]),
    }
}

/// Every name a `detect:` list takes.
pub const NAMES: [&str; 5] = ["email", "phone", "card", "iban", "secrets"];

/// A phone number has 8 to 15 digits (E.164).
fn phone_digits(text: &str) -> bool {
    let digits = text.bytes().filter(u8::is_ascii_digit).count();
    (8..=15).contains(&digits)
}

/// The Luhn check of a card number's 13 to 19 digits.
pub fn luhn(text: &str) -> bool {
    let digits: Vec<u32> = text.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(at, &d)| match at % 2 {
            1 if d * 2 > 9 => d * 2 - 9,
            1 => d * 2,
            _ => d,
        })
        .sum();
    sum.is_multiple_of(10)
}

/// The ISO 13616 check of an IBAN: its first four characters moved to the
/// end, letters as numbers (A = 10), mod 97 is 1.
pub fn iban(text: &str) -> bool {
    let compact: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !(15..=34).contains(&compact.len()) {
        return false;
    }
    let mut remainder: u32 = 0;
    for &b in compact[4..].iter().chain(&compact[..4]) {
        let value = match b {
            b'0'..=b'9' => u32::from(b - b'0'),
            b'A'..=b'Z' => u32::from(b - b'A') + 10,
            _ => return false,
        };
        remainder = if value >= 10 { (remainder * 100 + value) % 97 } else { (remainder * 10 + value) % 97 };
    }
    remainder == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_tell_numbers_from_identifiers() {
        assert!(luhn("4111 1111 1111 1111"));
        assert!(luhn("5500-0000-0000-0004"));
        assert!(!luhn("4111 1111 1111 1112"));
        assert!(!luhn("1234"));
        assert!(iban("GB82 WEST 1234 5698 7654 32"));
        assert!(iban("DE89370400440532013000"));
        assert!(!iban("GB82 WEST 1234 5698 7654 33"));
        assert!(phone_digits("+44 20 7946 0958"));
        assert!(!phone_digits("+1 23"));
    }

    #[test]
    fn every_name_is_known() {
        for name in NAMES {
            assert!(named(name).is_some(), "{name}");
        }
        assert!(named("ssn").is_none());
    }
}
