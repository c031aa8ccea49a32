//! Carrying a tool call's vendor signature (Gemini's `thoughtSignature`)
//! through a caller of another protocol, statelessly: nothing is stored, so
//! it survives a restart and works across a fleet.
//!
//! Gemini signs the first function call of each step and refuses a later
//! turn whose call comes back unsigned; other callers send back only what
//! their own protocol has. Each caller protocol carries the signature where
//! its vendor's limits allow:
//!
//! - Anthropic and Cohere (tool-call ids with no length limit): in the id,
//!   [`fold_into_id`] → `<id>__sig<crc32>_<signature in base64url>` (a
//!   signature that is not standard base64 is carried as the base64url of
//!   its bytes, after `__sib`), `<id>` being the id minted for the caller
//!   (`crate::call_id`, whose `written` and `read` the codecs call: the
//!   one place a caller's ids are made and read back). Every
//!   caller echoes the id with the call and its result; the reader splits
//!   it back ([`split_id`]), so writers for other lanes see the plain id.
//! - OpenAI Chat (ids of at most 40 characters): the tool call's
//!   `extra_content.google.thought_signature`, Google's own field for this
//!   on its OpenAI-compatible endpoint.
//! - Responses and Bedrock (ids of at most 64 characters): the protocol's
//!   own reasoning carrier, placed right before the call: a `reasoning`
//!   item's `encrypted_content` or a `reasoningContent` block's
//!   `signature`, holding [`in_reasoning`]`(signature)`. The prefix tells it
//!   from the vendors' own encrypted reasoning, which must never reach
//!   Gemini as a signature; the reader puts it back on the call after it.
//!
//! A signature is a few hundred bytes of base64, far past a 40- or
//! 64-character id, hence the split. The checksum guards against clients
//! that cut long ids short: a damaged signature is dropped, and the Gemini
//! writer falls back to the documented placeholder, which Gemini accepts.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use switchyard_ir::{Block, Message, Role, ToolUse};

/// Marks a signature carried in a reasoning item or block.
const REASONING_PREFIX: &str = "switchyard.thought_signature:";

/// Separates the caller's id from a carried base64 signature, its alphabet
/// moved to base64url.
const MARKER: &str = "__sig";
/// Separates the caller's id from any other signature, its bytes in
/// base64url.
const BYTES_MARKER: &str = "__sib";
/// Hex digits of the CRC-32 of the signature.
const CHECKSUM_DIGITS: usize = 8;

/// `id` with `signature` folded in, in the characters every protocol's id
/// allows (`[A-Za-z0-9_-]`). `None` for an empty signature or when the id
/// would be longer than `max_len`.
pub fn fold_into_id(id: &str, signature: &str, max_len: Option<usize>) -> Option<String> {
    if signature.is_empty() {
        return None;
    }
    let checksum = crc32fast::hash(signature.as_bytes());
    let folded = if is_canonical_base64(signature) {
        let payload: String = signature
            .chars()
            .filter(|c| *c != '=')
            .map(|c| match c {
                '+' => '-',
                '/' => '_',
                other => other,
            })
            .collect();
        format!("{id}{MARKER}{checksum:08x}_{payload}")
    } else {
        format!("{id}{BYTES_MARKER}{checksum:08x}_{}", URL_SAFE_NO_PAD.encode(signature))
    };
    match max_len {
        Some(max) if folded.len() > max => None,
        _ => Some(folded),
    }
}

/// The caller's id and the signature folded into it, when one is and its
/// checksum holds; otherwise the id as it is.
pub fn split_id(id: &str) -> (&str, Option<String>) {
    for (marker, restore) in [(MARKER, restore_base64 as fn(&str) -> Option<String>), (BYTES_MARKER, restore_bytes)] {
        let mut from = 0;
        while let Some(found) = id[from..].find(marker) {
            let at = from + found;
            if let Some(signature) = checked(&id[at + marker.len()..], restore) {
                return (&id[..at], Some(signature));
            }
            from = at + marker.len();
        }
    }
    (id, None)
}

/// The content of the reasoning item or block that carries `signature`.
pub fn in_reasoning(signature: &str) -> String {
    format!("{REASONING_PREFIX}{signature}")
}

/// The signature a reasoning item's or block's content carries, when it is
/// one written by [`in_reasoning`] (and not a vendor's own reasoning).
pub fn from_reasoning(content: &str) -> Option<&str> {
    content.strip_prefix(REASONING_PREFIX).filter(|signature| !signature.is_empty())
}

/// Moves each signature carried in a thinking block ([`from_reasoning`]) onto
/// the tool call right after it, and drops the carrier. Readers of
/// protocols that carry signatures in reasoning (Responses, Bedrock) call
/// this on each message's blocks; a carrier with no call after it is
/// dropped (it belonged to a call the caller left out).
pub fn attach_carried(blocks: &mut Vec<Block>) {
    if !blocks.iter().any(|block| carried(block).is_some()) {
        return;
    }
    let mut pending: Option<String> = None;
    let mut kept = Vec::with_capacity(blocks.len());
    for block in blocks.drain(..) {
        if let Some(signature) = carried(&block) {
            pending = Some(signature.to_owned());
            continue;
        }
        let mut block = block;
        if let Block::ToolUse(call) = &mut block {
            if let Some(signature) = pending.take() {
                call.signature = Some(signature);
            }
        } else {
            pending = None;
        }
        kept.push(block);
    }
    *blocks = kept;
}

/// `switchyard:` and a NUL: the bytes that open another vendor's signature
/// carried where only base64 may go. Twelve bytes, so their base64
/// ([`WRAPPED_BASE64`]) is a fixed prefix of the carried text.
const WRAPPED: &[u8; 12] = b"switchyard:\0";
/// The base64 of [`WRAPPED`].
const WRAPPED_BASE64: &str = "c3dpdGNoeWFyZDoA";

/// `signature` where a field holds base64 bytes (Gemini's
/// `thoughtSignature`, which its SDK decodes): as it is when it already is
/// standard base64 (Gemini's own, Claude's), else the base64 of
/// [`WRAPPED`] and its bytes (an OpenAI `encrypted_content`, which is
/// base64url), which [`from_base64`] gives back. `placeholder` passes as it
/// is (Gemini's documented sentinel is not base64).
pub fn to_base64<'a>(signature: &'a str, placeholder: &str) -> std::borrow::Cow<'a, str> {
    if signature == placeholder || is_canonical_base64(signature) {
        return std::borrow::Cow::Borrowed(signature);
    }
    let mut bytes = Vec::with_capacity(WRAPPED.len() + signature.len());
    bytes.extend_from_slice(WRAPPED);
    bytes.extend_from_slice(signature.as_bytes());
    std::borrow::Cow::Owned(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// The signature [`to_base64`] carried in `text`, or `text` as it is.
pub fn from_base64(text: &str) -> std::borrow::Cow<'_, str> {
    if text.starts_with(WRAPPED_BASE64) {
        if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(text) {
            if let Some(Ok(signature)) = bytes.strip_prefix(WRAPPED).map(|rest| String::from_utf8(rest.to_vec())) {
                return std::borrow::Cow::Owned(signature);
            }
        }
    }
    std::borrow::Cow::Borrowed(text)
}

/// The first tool call of each assistant turn when it has no signature:
/// the call Gemini wants signed, and the one a kept signature is restored
/// to (Gemini signs only the first call of a step).
pub fn unsigned_first_calls(messages: &mut [Message]) -> Vec<&mut ToolUse> {
    messages
        .iter_mut()
        .filter(|message| message.role == Role::Assistant)
        .filter_map(|message| {
            message.content.iter_mut().find_map(|block| match block {
                Block::ToolUse(call) => Some(call),
                _ => None,
            })
        })
        .filter(|call| call.signature.is_none())
        .collect()
}

/// Each signed tool call in `blocks`: (id, signature).
pub fn signed_calls(blocks: &[Block]) -> impl Iterator<Item = (&str, &str)> {
    blocks.iter().filter_map(|block| match block {
        Block::ToolUse(ToolUse { id, signature: Some(signature), .. }) if !signature.is_empty() => {
            Some((id.as_str(), signature.as_str()))
        }
        _ => None,
    })
}

/// The signature a thinking block carries for the call after it.
fn carried(block: &Block) -> Option<&str> {
    match block {
        Block::Thinking { text, signature: Some(signature) } if text.is_empty() => from_reasoning(signature),
        _ => None,
    }
}

/// `<crc32 hex>_<payload>` → the signature `restore` makes of the payload,
/// if the checksum holds.
fn checked(rest: &str, restore: fn(&str) -> Option<String>) -> Option<String> {
    let checksum = u32::from_str_radix(rest.get(..CHECKSUM_DIGITS)?, 16).ok()?;
    let signature = restore(rest.get(CHECKSUM_DIGITS..)?.strip_prefix('_')?)?;
    (crc32fast::hash(signature.as_bytes()) == checksum).then_some(signature)
}

/// A base64url payload back in the standard alphabet, padded.
fn restore_base64(payload: &str) -> Option<String> {
    let mut signature: String = payload
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            other => other,
        })
        .collect();
    while !signature.len().is_multiple_of(4) {
        signature.push('=');
    }
    Some(signature)
}

/// A base64url payload of a signature's bytes.
fn restore_bytes(payload: &str) -> Option<String> {
    String::from_utf8(URL_SAFE_NO_PAD.decode(payload).ok()?).ok()
}

/// Standard-alphabet base64 with its padding, the form Gemini sends.
fn is_canonical_base64(text: &str) -> bool {
    let body = text.trim_end_matches('=');
    !text.is_empty()
        && text.len().is_multiple_of(4)
        && text.len() - body.len() <= 2
        && body.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SIGNATURE: &str = "CiQB0e2Kb+7/Lx3n0Qe4H5F9lHqS1o2Y0zW8rX2vJ4p0QmK3dZsaGVsbG8=";

    #[test]
    fn a_folded_id_keeps_to_every_protocols_id_alphabet_and_splits_back() {
        let folded = fold_into_id("call_0", SIGNATURE, None).unwrap_or_default();
        assert!(folded.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'), "{folded}");
        assert_eq!(split_id(&folded), ("call_0", Some(SIGNATURE.to_owned())));
        assert_eq!(split_id("toolu_01A09q90qw90lq917835lq9"), ("toolu_01A09q90qw90lq917835lq9", None));
    }

    #[test]
    fn a_cut_or_damaged_id_gives_no_signature() {
        let folded = fold_into_id("call_0", SIGNATURE, None).unwrap_or_default();
        for cut in [folded.len() - 1, folded.len() - 4, 20, 12] {
            assert_eq!(split_id(&folded[..cut]).1, None, "cut at {cut}");
        }
        let damaged = folded.replacen('K', "L", 1);
        assert_eq!(split_id(&damaged).1, None);
    }

    #[test]
    fn ids_that_would_be_too_long_are_refused() {
        assert_eq!(fold_into_id("call_0", SIGNATURE, Some(40)), None);
        assert_eq!(fold_into_id("call_0", "", None), None);
    }

    #[test]
    fn a_signature_that_is_not_standard_base64_rides_as_its_bytes() {
        for signature in ["not base64!", "CiQB0e2Kb7LlVw", "é/+_-=="] {
            let folded = fold_into_id("call_0", signature, None).unwrap_or_default();
            assert!(folded.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'), "{folded}");
            assert_eq!(split_id(&folded), ("call_0", Some(signature.to_owned())), "{signature}");
        }
    }

    #[test]
    fn a_marker_inside_the_callers_id_does_not_confuse_the_split() {
        let folded = fold_into_id("my__sig_call", SIGNATURE, None).unwrap_or_default();
        assert_eq!(split_id(&folded), ("my__sig_call", Some(SIGNATURE.to_owned())));
    }

    #[test]
    fn reasoning_carriers_are_told_from_vendor_reasoning() {
        assert_eq!(from_reasoning(&in_reasoning(SIGNATURE)), Some(SIGNATURE));
        assert_eq!(from_reasoning("gAAAAABo-encrypted-by-openai"), None);
        assert_eq!(from_reasoning(&in_reasoning("")), None);
    }

    #[test]
    fn carried_signatures_move_onto_the_next_call() {
        use switchyard_ir::ToolUse;
        let carrier = |sig: &str| Block::Thinking { text: String::new(), signature: Some(in_reasoning(sig)) };
        let vendor = Block::Thinking { text: String::new(), signature: Some("gAAAA".into()) };
        let mut blocks = vec![
            carrier("c2ln"),
            Block::ToolUse(ToolUse::new("a", "f", "{}")),
            Block::ToolUse(ToolUse::new("b", "f", "{}")),
            vendor.clone(),
            carrier("bG9zdA=="),
            Block::text("no call follows"),
        ];
        attach_carried(&mut blocks);
        let mut signed = ToolUse::new("a", "f", "{}");
        signed.signature = Some("c2ln".into());
        assert_eq!(
            blocks,
            vec![
                Block::ToolUse(signed),
                Block::ToolUse(ToolUse::new("b", "f", "{}")),
                vendor,
                Block::text("no call follows")
            ]
        );
    }

    proptest! {
        #[test]
        fn any_base64_signature_round_trips(bytes in proptest::collection::vec(any::<u8>(), 1..600), id in "[a-zA-Z0-9_-]{1,30}") {
            let signature = base64_of(&bytes);
            let folded = fold_into_id(&id, &signature, None).unwrap_or_default();
            prop_assert_eq!(split_id(&folded), (id.as_str(), Some(signature)));
        }
    }

    /// Standard base64 with padding (test helper; the codec never encodes).
    fn base64_of(bytes: &[u8]) -> String {
        const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk.iter().enumerate().fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    #[test]
    fn a_signature_that_is_not_base64_rides_a_base64_field_and_comes_back() {
        let gemini = "EqQBCkYIBRABGAIiQL+/c2lnbmF0dXJl";
        assert_eq!(to_base64(gemini, "skip"), gemini, "base64 passes as it is");
        assert_eq!(to_base64("skip", "skip"), "skip", "the placeholder passes as it is");
        for foreign in ["gAAAAABo-x_y", "mock-signature", "é"] {
            let carried = to_base64(foreign, "skip");
            assert!(is_canonical_base64(&carried), "{carried}");
            assert_eq!(from_base64(&carried), foreign);
        }
        assert_eq!(from_base64(gemini), gemini);
    }

    #[test]
    fn the_first_unsigned_call_of_each_assistant_turn_is_the_one_to_restore() {
        let call = |id: &str, signature: Option<&str>| {
            let mut call = ToolUse::new(id, "f", "{}");
            call.signature = signature.map(str::to_owned);
            Block::ToolUse(call)
        };
        let mut messages = vec![
            Message::new(Role::User, vec![call("user_side", None)]),
            Message::new(
                Role::Assistant,
                vec![Block::Text(switchyard_ir::TextBlock::new("x")), call("a", None), call("b", None)],
            ),
            Message::new(Role::Assistant, vec![call("c", Some("sig")), call("d", None)]),
            Message::new(Role::Assistant, vec![call("e", None)]),
        ];
        let ids: Vec<String> = unsigned_first_calls(&mut messages).iter().map(|call| call.id.clone()).collect();
        assert_eq!(ids, ["a", "e"]);
        let signed: Vec<(&str, &str)> = signed_calls(&messages[2].content).collect();
        assert_eq!(signed, [("c", "sig")]);
    }
}
