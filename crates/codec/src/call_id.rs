//! Tool-call ids in each caller protocol's own form, minted from the lane's
//! ids and read back, statelessly: nothing is stored, so a conversation
//! survives a restart and moves across a fleet.
//!
//! A translated reply hands its caller the lane's calls; each vendor's ids
//! have their own shape (Anthropic `toolu_…`, OpenAI `call_…`, Bedrock
//! `tooluse_…`), and clients check the shape of what they echo back
//! (Anthropic refuses an id outside `^[a-zA-Z0-9_-]+$`, OpenAI Chat one
//! longer than 40 characters, Responses and Bedrock one longer than 64). So
//! the caller's writer hands out [`mint`]`(lane id, caller protocol)`: the
//! lane's id itself when it already has the caller's [`Form`], else
//!
//! ```text
//! <caller's prefix><tag><lane id, its known prefix shortened to the tag><check>
//! ```
//!
//! where the tag names the lane's own prefix (`a` for `toolu_`, `u` for
//! `tooluse_`, `c` for `call_`, …; `x` for none, `e` for an id holding
//! characters no id may hold, each of their bytes escaped as `-` and two
//! base64url characters, and `-` as `--`) and
//! `check` is four base64url characters of its CRC-32. The caller's reader
//! calls [`restore`] on every id the caller sends back (the call in the
//! assistant turn and its result), so the lane sees the ids it issued. A
//! caller's own ids (another lane's, or ones it made up) do not decode with
//! a valid check and pass as they are.
//!
//! An id too long for its caller once minted (past 40 characters for OpenAI
//! Chat: a lane id of more than about 30) cannot be carried back in 40
//! characters: it is handed out as a hashed stand-in (tag `h`), which reads
//! back as itself, so the lane gets one consistent id for the call and its
//! result, but not its own. No vendor's own ids are that long.
//!
//! Every id this module writes keeps to `[A-Za-z0-9_-]` (the alphabet every
//! protocol's ids allow), so a Gemini signature can still be folded after it
//! ([`written`], [`read`]: the one pair the codecs call, which also folds
//! and splits the signature where the caller's protocol carries it in the
//! id; see `crate::signature`).

use std::borrow::Cow;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use switchyard_ir::Protocol;

use crate::signature;

/// How a protocol's tool-call ids look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Form {
    /// What the protocol's ids begin with by convention (`""`: nothing
    /// in particular).
    pub prefix: &'static str,
    /// What an id minted for the protocol begins with.
    pub minted: &'static str,
    /// The longest id the protocol's API takes, when it documents one.
    pub max_len: Option<usize>,
}

/// The form of `protocol`'s tool-call ids (`docs/protocols.md`, "Tool-call
/// ids", cites each vendor's pattern and limit).
pub const fn form(protocol: Protocol) -> Form {
    match protocol {
        // `call_` + 24; "Expected a string with maximum length 40".
        Protocol::OpenAi => Form { prefix: "call_", minted: "call_", max_len: Some(40) },
        // `call_id` of at most 64 (the item's own id is `fc_…`).
        Protocol::Responses => Form { prefix: "call_", minted: "call_", max_len: Some(64) },
        // `^[a-zA-Z0-9_-]+$`, no documented length.
        Protocol::Anthropic => Form { prefix: "toolu_", minted: "toolu_", max_len: None },
        // `[a-zA-Z0-9_-]+`, 1 to 64 characters.
        Protocol::Bedrock => Form { prefix: "tooluse_", minted: "tooluse_", max_len: Some(64) },
        // An optional string, no documented shape.
        Protocol::Gemini => Form { prefix: "", minted: "call_", max_len: None },
        // A string (the model's are `<tool>_<random>`), no documented shape.
        Protocol::Cohere => Form { prefix: "", minted: "call_", max_len: None },
    }
}

/// Lanes' own prefixes, each shortened to one tag character in a minted id
/// (longest first: the first that opens an id is its tag).
const LANE_PREFIXES: [(u8, &str); 6] = [
    (b'v', "toolu_vrtx_"),
    (b'k', "toolu_bdrk_"),
    (b'u', "tooluse_"),
    (b'a', "toolu_"),
    (b'c', "call_"),
    (b'f', "fc_"),
];
/// The lane id follows as it is (no known prefix).
const VERBATIM: u8 = b'x';
/// The lane id follows escaped (it holds characters no id may).
const ESCAPED: u8 = b'e';
/// Opens an escape in an [`ESCAPED`] id: `--` is `-`, else two base64url
/// characters hold a byte.
const ESCAPE: u8 = b'-';
/// The base64url alphabet, for escaped bytes.
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
/// A hash of the lane id follows: too long to carry, not read back.
const HASHED: u8 = b'h';
/// Base64url characters of the check (24 bits of the lane id's CRC-32).
const CHECK_LEN: usize = 4;

/// Whether every character of `id` is one every protocol's ids allow.
pub fn is_safe(id: &str) -> bool {
    id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Whether `id` already has `form`: its prefix, its alphabet, its length.
pub fn fits(id: &str, form: &Form) -> bool {
    !id.is_empty() && id.starts_with(form.prefix) && is_safe(id) && form.max_len.is_none_or(|max| id.len() <= max)
}

/// The id a caller of `protocol` is handed for the lane's call `id`: `id`
/// itself when it has the caller's form (and does not read as minted),
/// else one minted in it that [`restore`] reads back (or, past the
/// protocol's length, a hashed stand-in).
pub fn mint(id: &str, protocol: Protocol) -> Cow<'_, str> {
    let form = form(protocol);
    if fits(id, &form) && decode(id, &form).is_none() {
        return Cow::Borrowed(id);
    }
    let minted = encode(id, &form);
    match form.max_len {
        Some(max) if minted.len() > max => Cow::Owned(hashed(id, &form, max)),
        _ => Cow::Owned(minted),
    }
}

/// The lane's id for an id a caller of `protocol` sent back: what [`mint`]
/// folded into it, or the id as it is (the caller's own, or a stand-in).
pub fn restore(id: &str, protocol: Protocol) -> Cow<'_, str> {
    match decode(id, &form(protocol)) {
        Some(lane) => Cow::Owned(lane),
        None => Cow::Borrowed(id),
    }
}

/// The id written in a reply to a caller of `protocol` for the lane's call
/// `id`: [`mint`]ed, and with the call's Gemini `signature` folded in when
/// the protocol carries signatures in ids (Anthropic, Cohere).
pub fn written<'a>(id: &'a str, signature: Option<&str>, protocol: Protocol) -> Cow<'a, str> {
    let minted = mint(id, protocol);
    match signature.filter(|_| carries_signatures(protocol)) {
        Some(signature) => match signature::fold_into_id(&minted, signature, None) {
            Some(folded) => Cow::Owned(folded),
            None => minted,
        },
        None => minted,
    }
}

/// An id a caller of `protocol` sent back, read: the lane's id and the
/// signature folded into it ([`written`]).
pub fn read(raw: &str, protocol: Protocol) -> (String, Option<String>) {
    let (id, signature) = match carries_signatures(protocol) {
        true => signature::split_id(raw),
        false => (raw, None),
    };
    (restore(id, protocol).into_owned(), signature)
}

/// Protocols whose callers get a call's signature in its id.
fn carries_signatures(protocol: Protocol) -> bool {
    matches!(protocol, Protocol::Anthropic | Protocol::Cohere)
}

fn encode(id: &str, form: &Form) -> String {
    let known = LANE_PREFIXES.iter().find(|(_, prefix)| id.starts_with(prefix) && is_safe(&id[prefix.len()..]));
    let (tag, body) = match known {
        Some((tag, prefix)) => (*tag, Cow::Borrowed(&id[prefix.len()..])),
        None if is_safe(id) => (VERBATIM, Cow::Borrowed(id)),
        None => (ESCAPED, Cow::Owned(escape(id))),
    };
    let mut out = String::with_capacity(form.minted.len() + 1 + body.len() + CHECK_LEN);
    out.push_str(form.minted);
    out.push(char::from(tag));
    out.push_str(&body);
    out.push_str(&check(id));
    out
}

/// The lane id `id` was minted from, when it is a minted id of `form`
/// whose check holds.
fn decode(id: &str, form: &Form) -> Option<String> {
    let rest = id.strip_prefix(form.minted)?;
    if !rest.is_ascii() || rest.len() < 1 + CHECK_LEN {
        return None;
    }
    let (body, sum) = rest[1..].split_at(rest.len() - 1 - CHECK_LEN);
    let lane = match rest.as_bytes()[0] {
        VERBATIM => body.to_owned(),
        ESCAPED => unescape(body)?,
        tag => {
            let (_, prefix) = LANE_PREFIXES.iter().find(|(known, _)| *known == tag)?;
            format!("{prefix}{body}")
        }
    };
    (check(&lane) == sum).then_some(lane)
}

/// `id` in the id alphabet: a byte outside it as `-` and two base64url
/// characters (its top two bits, its low six), `-` as `--`.
fn escape(id: &str) -> String {
    let mut out = String::with_capacity(id.len() + 8);
    for byte in id.bytes() {
        match byte {
            ESCAPE => out.push_str("--"),
            b if b.is_ascii_alphanumeric() || b == b'_' => out.push(char::from(b)),
            b => {
                out.push(char::from(ESCAPE));
                out.push(char::from(ALPHABET[usize::from(b >> 6)]));
                out.push(char::from(ALPHABET[usize::from(b & 63)]));
            }
        }
    }
    out
}

/// The id [`escape`] wrote as `body`.
fn unescape(body: &str) -> Option<String> {
    let digit = |c: u8| ALPHABET.iter().position(|&a| a == c).and_then(|d| u8::try_from(d).ok());
    let mut bytes = Vec::with_capacity(body.len());
    let mut rest = body.bytes();
    while let Some(byte) = rest.next() {
        if byte != ESCAPE {
            bytes.push(byte);
            continue;
        }
        match rest.next()? {
            ESCAPE => bytes.push(ESCAPE),
            high => {
                let (high, low) = (digit(high)?, digit(rest.next()?)?);
                bytes.push(high.checked_mul(64)?.checked_add(low)?);
            }
        }
    }
    String::from_utf8(bytes).ok()
}

/// Four base64url characters of `id`'s CRC-32.
fn check(id: &str) -> String {
    let sum = crc32fast::hash(id.as_bytes()).to_be_bytes();
    URL_SAFE_NO_PAD.encode(&sum[1..])
}

/// A stand-in for a lane id too long to carry: the form's prefix, the tag
/// and 128 bits of its hash, within `max`.
fn hashed(id: &str, form: &Form, max: usize) -> String {
    let hash = xxhash_rust::xxh3::xxh3_128(id.as_bytes()).to_be_bytes();
    let mut out = format!("{}{}{}", form.minted, char::from(HASHED), URL_SAFE_NO_PAD.encode(hash));
    out.truncate(max);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Each vendor's own ids (their documented examples).
    const LANE_IDS: [(Protocol, &str); 6] = [
        (Protocol::Anthropic, "toolu_01A09q90qw90lq917835lq9"),
        (Protocol::OpenAi, "call_abc123XYZdefGHI456jklMNO"),
        (Protocol::Responses, "call_wdzaQlITiXLNAgYToS2LX6WS"),
        (Protocol::Bedrock, "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"),
        (Protocol::Cohere, "get_weather_1byjy32y4hvq"),
        (Protocol::Gemini, "call_ZHt2aPHoJ4qW1dkPmuGo6Ac_0"),
    ];

    /// The documented shape of each caller protocol's ids, checked without
    /// this module's own helpers.
    fn documented(id: &str, protocol: Protocol) -> bool {
        let alphabet = !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        alphabet
            && match protocol {
                Protocol::OpenAi => id.starts_with("call_") && id.len() <= 40,
                Protocol::Responses => id.starts_with("call_") && id.len() <= 64,
                Protocol::Anthropic => id.starts_with("toolu_"),
                Protocol::Bedrock => id.starts_with("tooluse_") && id.len() <= 64,
                Protocol::Gemini | Protocol::Cohere => true,
            }
    }

    #[test]
    fn every_vendors_own_ids_reach_every_caller_in_its_form_and_come_back() {
        for (lane, id) in LANE_IDS {
            for caller in Protocol::ALL {
                let minted = mint(id, caller);
                assert!(documented(&minted, caller), "{lane} id {id} for a {caller} caller: {minted}");
                assert_eq!(restore(&minted, caller), id, "{lane} → {caller}: {minted}");
                if lane == caller || (caller == Protocol::Responses && lane == Protocol::OpenAi) {
                    assert_eq!(minted, id, "an id already in its caller's form passes as it is");
                }
            }
        }
    }

    #[test]
    fn a_minted_id_reads_as_the_callers_own_convention() {
        assert_eq!(mint("toolu_01A09q90qw90lq917835lq9", Protocol::OpenAi).len(), 5 + 1 + 23 + 4);
        assert!(mint("toolu_01A09q90qw90lq917835lq9", Protocol::OpenAi).starts_with("call_a01A09q"));
        assert!(mint("call_abc", Protocol::Anthropic).starts_with("toolu_cabc"));
        assert!(mint("call_abc", Protocol::Bedrock).starts_with("tooluse_cabc"));
        assert!(mint("tooluse_k", Protocol::Anthropic).starts_with("toolu_uk"));
        // Gemini and Cohere callers take any id of the common alphabet.
        assert_eq!(mint("toolu_01A", Protocol::Gemini), "toolu_01A");
        assert_eq!(mint("call_1", Protocol::Cohere), "call_1");
    }

    #[test]
    fn an_id_holding_characters_no_caller_takes_is_never_handed_out() {
        for id in ["functions.get_weather:0", "a b", "é", "call_x/y", ""] {
            for caller in Protocol::ALL {
                let minted = mint(id, caller);
                assert!(documented(&minted, caller), "{id:?} for {caller}: {minted}");
                assert_eq!(restore(&minted, caller), id, "{id:?} for {caller}");
            }
        }
    }

    #[test]
    fn the_callers_own_ids_pass_the_reader_as_they_are() {
        for (caller, id) in [
            (Protocol::OpenAi, "call_Xy12"),
            (Protocol::Anthropic, "toolu_01ABCDEF"),
            (Protocol::Bedrock, "tooluse_c0000"),
            (Protocol::Responses, "call_"),
            (Protocol::OpenAi, "call_é0000"),
        ] {
            assert_eq!(restore(id, caller), id);
        }
        // A minted id that was cut or altered is not read back as another.
        let minted = mint("toolu_01A09q90qw90lq917835lq9", Protocol::OpenAi).into_owned();
        assert_eq!(restore(&minted[..minted.len() - 1], Protocol::OpenAi), &minted[..minted.len() - 1]);
        let altered = minted.replacen("A09", "A08", 1);
        assert_eq!(restore(&altered, Protocol::OpenAi), altered);
    }

    #[test]
    fn an_id_that_would_read_as_minted_is_minted_itself() {
        let lane = mint("toolu_01A09q90qw90lq917835lq9", Protocol::OpenAi).into_owned();
        // A lane whose own id happens to look minted (an OpenAI lane
        // handing back an id this gateway gave another caller).
        let again = mint(&lane, Protocol::OpenAi);
        assert_ne!(again, lane);
        assert_eq!(restore(&again, Protocol::OpenAi), lane);
    }

    #[test]
    fn an_id_too_long_to_carry_gets_a_stand_in_that_reads_as_itself() {
        let long = format!("get_current_weather_for_a_location_{}", "q".repeat(20));
        let minted = mint(&long, Protocol::OpenAi).into_owned();
        assert!(documented(&minted, Protocol::OpenAi), "{minted}");
        assert_eq!(restore(&minted, Protocol::OpenAi), minted);
        assert_eq!(mint(&long, Protocol::OpenAi), minted, "deterministic");
        assert_ne!(mint(&format!("{long}r"), Protocol::OpenAi), minted);
        // Callers with room carry it whole.
        assert_eq!(restore(&mint(&long, Protocol::Anthropic), Protocol::Anthropic), long);
    }

    #[test]
    fn a_signature_rides_after_the_minted_id_where_the_caller_carries_it_there() {
        let signature = "CiQB0e2Kb+7/Lx3n0Qe4H5F9lHqS1o2Y0zW8rX2vJ4p0QmK3dZsaGVsbG8=";
        for caller in [Protocol::Anthropic, Protocol::Cohere] {
            let id = written("call_ZHt2aPHoJ4qW1dkPmuGo6Ac_0", Some(signature), caller);
            assert!(is_safe(&id), "{id}");
            assert_eq!(read(&id, caller), ("call_ZHt2aPHoJ4qW1dkPmuGo6Ac_0".to_owned(), Some(signature.to_owned())));
        }
        let id = written("toolu_01A", Some(signature), Protocol::OpenAi);
        assert_eq!(read(&id, Protocol::OpenAi), ("toolu_01A".to_owned(), None), "OpenAI carries it elsewhere");
        assert!(id.len() <= 40);
    }

    /// The longest lane id each caller carries back exactly: its limit less
    /// the minted prefix, the tag and the check (a known lane prefix is
    /// shortened to its tag, so vendors' ids have more room).
    fn carried(caller: Protocol) -> usize {
        let form = form(caller);
        form.max_len.map_or(usize::MAX, |max| max - form.minted.len() - 1 - CHECK_LEN)
    }

    proptest! {
        #[test]
        fn any_lane_id_is_handed_out_in_form_and_read_back(
            id in prop_oneof![
                "[A-Za-z0-9_-]{0,80}",
                "(toolu_|toolu_vrtx_|tooluse_|call_|fc_)[A-Za-z0-9_-]{0,60}",
                "\\PC{0,40}",
                any::<String>(),
            ]
        ) {
            for caller in Protocol::ALL {
                let minted = mint(&id, caller);
                prop_assert!(documented(&minted, caller), "{:?} for {}: {}", id, caller, minted);
                let back = restore(&minted, caller);
                let room = carried(caller);
                let fits_as_is = fits(&id, &form(caller));
                if fits_as_is || (is_safe(&id) && id.len() <= room) {
                    prop_assert_eq!(back, id.as_str(), "{} → {}", caller, minted);
                } else if back != id.as_str() {
                    // Only a stand-in may not come back: too long to carry.
                    prop_assert_eq!(back, minted.as_ref(), "{} → {}", caller, minted);
                    prop_assert!(encode(&id, &form(caller)).len() > form(caller).max_len.unwrap_or(usize::MAX));
                }
            }
        }
    }
}
