//! What a group keeps of its requests' text, and how kept text is sealed.
//! [`Retention`] is a group's choice (`none`, `redacted`, `full`);
//! [`redactor`] is the screen `redacted` passes text through (every PII
//! and secret detector, masking); [`Sealer`] seals what is kept with
//! XChaCha20-Poly1305 under the operator's key (a random 192-bit nonce per
//! record, so one key seals any number of them), bound to its row (the
//! row's entry and end-user tag are the associated data: a sealed text
//! moved to another row does not open), and tags end users with a keyed
//! hash, so the store can find one user's text to erase without holding
//! the user's id. Nonces come from the caller: nothing here draws
//! randomness or does I/O.

use std::borrow::Cow;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use switchyard_codec::opaque::Place;

use crate::{Action, PolicySpec, Screen};

/// What a group keeps of its requests' text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Retention {
    /// Nothing (the default).
    #[default]
    None,
    /// The text with every PII and secret detector's matches masked.
    Redacted,
    /// The text as the caller sent and got it.
    Full,
}

impl Retention {
    /// The config's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Retention::None => "none",
            Retention::Redacted => "redacted",
            Retention::Full => "full",
        }
    }

    /// The retention a config name stands for.
    pub fn parse(name: &str) -> Option<Retention> {
        match name {
            "none" => Some(Retention::None),
            "redacted" => Some(Retention::Redacted),
            "full" => Some(Retention::Full),
            _ => None,
        }
    }
}

/// The screen `redacted` passes kept text through: every built-in
/// detector, masking (whatever the group's own policies do).
pub fn redactor() -> Screen {
    let spec = PolicySpec {
        name: "retention".into(),
        action: Action::Mask,
        request: true,
        response: true,
        literals: Vec::new(),
        regexes: Vec::new(),
        detect: crate::detect::NAMES.iter().map(|n| (*n).to_owned()).collect(),
        first_rule: 0,
        moderator: None,
        reversible: false,
    };
    // The built-in detectors are fixed patterns this crate's tests compile.
    Screen::compile(&[spec]).unwrap_or_else(|_| unreachable!("the built-in detectors compile"))
}

/// `body` (JSON in any protocol, its media and signed state at `places`)
/// with every string redacted; a body that is not JSON is redacted as one
/// text. Borrowed when nothing changes.
pub fn redact<'a>(screen: &Screen, body: &'a [u8], places: &[Place]) -> Cow<'a, [u8]> {
    // Most bodies hold nothing to mask: one question of the whole body.
    if !screen.may_match(body, places) {
        return Cow::Borrowed(body);
    }
    let mut masks = crate::Masks::default();
    let mut decisions = Vec::new();
    // The redactor only masks, so screening never blocks. Signed text is
    // masked too: the kept copy is the gateway's own, never sent back.
    let mut mask = |text: &str, _signed: bool| {
        Ok::<_, std::convert::Infallible>(
            screen.screen(text, crate::Direction::Request, &mut masks, &mut decisions).unwrap_or(None),
        )
    };
    let json = matches!(body.iter().find(|b| !b.is_ascii_whitespace()), Some(b'{' | b'['));
    match json.then(|| crate::json::rewrite_strings(body, places, &mut mask)) {
        Some(Ok(Ok(Some(out)))) => Cow::Owned(out),
        Some(Ok(Ok(None))) => Cow::Borrowed(body),
        Some(Ok(Err(never))) => match never {},
        Some(Err(_)) | None => match mask(&String::from_utf8_lossy(body), false) {
            Ok(Some(out)) => Cow::Owned(out.into_bytes()),
            _ => Cow::Borrowed(body),
        },
    }
}

/// The first byte of a sealed record: the format (and the key's
/// generation, when keys rotate).
const FORMAT: u8 = 1;
/// XChaCha20's nonce.
pub const NONCE_BYTES: usize = 24;

/// A sealed record would not open: another key, another row, or altered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the kept text does not open under this key (another key, another row, or altered)")]
pub struct Unsealed;

/// Seals and opens kept text under the operator's key; tags end users.
pub struct Sealer {
    cipher: XChaCha20Poly1305,
    tags: Hmac<Sha256>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

impl Sealer {
    /// A sealer under `key`. The cipher's key and the tags' key are both
    /// derived from it (HMAC-SHA-256 with distinct labels), so neither use
    /// reveals the other.
    pub fn new(key: &[u8; 32]) -> Sealer {
        let derive = |label: &[u8]| -> [u8; 32] {
            let mut mac =
                <Hmac<Sha256> as hmac::KeyInit>::new_from_slice(key).unwrap_or_else(|_| unreachable!("any length"));
            mac.update(label);
            mac.finalize().into_bytes().into()
        };
        let cipher = XChaCha20Poly1305::new(&derive(b"switchyard retention seal").into());
        let tags = <Hmac<Sha256> as hmac::KeyInit>::new_from_slice(&derive(b"switchyard retention user"))
            .unwrap_or_else(|_| unreachable!("any length"));
        Sealer { cipher, tags }
    }

    /// The end user's tag: the same user, the same tag, under this key.
    pub fn user_tag(&self, user: &str) -> String {
        let mut mac = self.tags.clone();
        mac.update(user.as_bytes());
        let digest = mac.finalize().into_bytes();
        digest[..16].iter().map(|b| format!("{b:02x}")).collect()
    }

    /// `plain` sealed with `nonce` (random, never reused), bound to `row`
    /// (the record's entry and user tag).
    pub fn seal(&self, nonce: [u8; NONCE_BYTES], row: &[u8], plain: &[u8]) -> Vec<u8> {
        let nonce_ref = XNonce::from_slice(&nonce);
        // Encryption fails only past a length far beyond any kept text.
        let sealed = self.cipher.encrypt(nonce_ref, Payload { msg: plain, aad: row }).unwrap_or_default();
        let mut out = Vec::with_capacity(1 + NONCE_BYTES + sealed.len());
        out.push(FORMAT);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// What `sealed` holds, if it was sealed by this key for `row`.
    pub fn open(&self, row: &[u8], sealed: &[u8]) -> Result<Vec<u8>, Unsealed> {
        if sealed.len() < 1 + NONCE_BYTES || sealed[0] != FORMAT {
            return Err(Unsealed);
        }
        let nonce = XNonce::from_slice(&sealed[1..1 + NONCE_BYTES]);
        self.cipher.decrypt(nonce, Payload { msg: &sealed[1 + NONCE_BYTES..], aad: row }).map_err(|_| Unsealed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_text_opens_only_under_its_key_for_its_row() {
        let sealer = Sealer::new(&[7; 32]);
        let sealed = sealer.seal([1; NONCE_BYTES], b"row-1", b"my email is ada@example.com");
        assert!(!sealed.windows(5).any(|w| w == b"email"), "the text is not readable at rest");
        assert_eq!(sealer.open(b"row-1", &sealed).as_deref(), Ok(&b"my email is ada@example.com"[..]));
        assert_eq!(sealer.open(b"row-2", &sealed), Err(Unsealed), "moved to another row");
        assert_eq!(Sealer::new(&[8; 32]).open(b"row-1", &sealed), Err(Unsealed), "another key");
        let mut altered = sealed.clone();
        let last = altered.len() - 1;
        altered[last] ^= 1;
        assert_eq!(sealer.open(b"row-1", &altered), Err(Unsealed), "altered");
        assert_eq!(sealer.open(b"row-1", &sealed[..10]), Err(Unsealed), "cut");
        let again = sealer.seal([2; NONCE_BYTES], b"row-1", b"my email is ada@example.com");
        assert_ne!(again, sealed, "another nonce, another text at rest");
    }

    #[test]
    fn a_user_has_one_tag_per_key_and_it_is_not_the_user() {
        let sealer = Sealer::new(&[7; 32]);
        assert_eq!(sealer.user_tag("alice"), sealer.user_tag("alice"));
        assert_ne!(sealer.user_tag("alice"), sealer.user_tag("bob"));
        assert_ne!(sealer.user_tag("alice"), Sealer::new(&[9; 32]).user_tag("alice"));
        assert_eq!(sealer.user_tag("alice").len(), 32);
        assert!(!sealer.user_tag("alice").contains("alice"));
    }

    #[test]
    fn redacted_text_keeps_no_pii_or_secret_in_any_string() {
        let screen = redactor();
        let body = br#"{"model":"m","messages":[{"role":"user","content":"mail ada@example.com, card 4111 1111 1111 1111, key AKIAIOSFODNN7EXAMPLE"}],"user":"u"}"#;
        let out = String::from_utf8(redact(&screen, body, &[]).into_owned()).unwrap();
        assert!(out.contains("[EMAIL_1]") && out.contains("[CARD_1]") && out.contains("[SECRET_1]"), "{out}");
        assert!(!out.contains("ada@") && !out.contains("4111") && !out.contains("AKIA"), "{out}");
        assert!(out.contains(r#""model":"m""#), "{out}");
        let plain = b"not json: ada@example.com";
        assert_eq!(&*redact(&screen, plain, &[]), b"not json: [EMAIL_1]");
        let clean = br#"{"a":"nothing here"}"#;
        assert!(matches!(redact(&screen, clean, &[]), Cow::Borrowed(_)), "nothing to mask: not copied");
    }

    #[test]
    fn retention_names_round_trip() {
        for r in [Retention::None, Retention::Redacted, Retention::Full] {
            assert_eq!(Retention::parse(r.as_str()), Some(r));
        }
        assert_eq!(Retention::parse("all"), None);
    }
}
