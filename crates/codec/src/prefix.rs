//! The stable head of a conversation, for prompt-cache affinity: the system
//! prompt, the tools and the first turn are what a provider's prompt cache
//! keys on, and what every later request of the same conversation repeats
//! byte for byte. Requests that share it are sent to the lane that served
//! it while that lane still holds it in its cache.
//!
//! Read from the raw body without parsing it (the members' raw bytes are
//! hashed as they came), so a passthrough stays a passthrough.

use crate::scan;

/// Where a protocol keeps the head of a conversation.
#[derive(Debug, Clone, Copy)]
pub struct PrefixShape {
    /// Top-level members that are part of the head as a whole (system
    /// prompt, instructions, tools).
    pub whole: &'static [&'static str],
    /// The top-level array of turns: its first element is part of the head.
    pub turns: &'static str,
}

/// A conversation's head hashed, with how long the caller asked the
/// provider to cache it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// The hash of the head's bytes.
    pub hash: u64,
    /// The caller asked for a one-hour cache (Anthropic's `"ttl": "1h"`).
    pub long: bool,
}

/// The head of `body` in `shape`, hashed; `None` when the body has no
/// first turn (nothing a cache would hold across requests).
pub fn prefix(body: &[u8], shape: &PrefixShape) -> Option<Prefix> {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let turns = scan::top_level_value(body, shape.turns).ok()??;
    let first = first_element(turns)?;
    for name in shape.whole {
        if let Ok(Some(raw)) = scan::top_level_value(body, name) {
            hasher.update(name.as_bytes());
            hasher.update(raw);
        }
    }
    hasher.update(shape.turns.as_bytes());
    hasher.update(first);
    let long = LONG_TTL.iter().any(|marker| memchr::memmem::find(body, marker).is_some());
    Some(Prefix { hash: hasher.digest(), long })
}

/// How a one-hour cache is asked for (Anthropic's `cache_control`).
const LONG_TTL: [&[u8]; 2] = [b"\"ttl\":\"1h\"", b"\"ttl\": \"1h\""];

/// The raw bytes of the first element of a JSON array.
fn first_element(array: &[u8]) -> Option<&[u8]> {
    let inner = array.trim_ascii().strip_prefix(b"[")?.trim_ascii_start();
    if inner.starts_with(b"]") || inner.is_empty() {
        return None;
    }
    let offset = array.len() - inner.len();
    let end = scan::value_end(array, offset).ok()?;
    Some(&array[offset..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANTHROPIC: PrefixShape = PrefixShape { whole: &["system", "tools"], turns: "messages" };

    #[test]
    fn later_turns_of_a_conversation_share_its_head() {
        let first = br#"{"model":"m","system":"be brief","messages":[{"role":"user","content":"hi"}],"max_tokens":9}"#;
        let later = br#"{"max_tokens":50,"model":"m","system":"be brief","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"},{"role":"user","content":"more"}]}"#;
        let a = prefix(first, &ANTHROPIC).unwrap();
        assert_eq!(Some(a), prefix(later, &ANTHROPIC));
        assert!(!a.long);
        // Another system prompt or first turn is another conversation.
        let other = br#"{"system":"be long","messages":[{"role":"user","content":"hi"}]}"#;
        assert_ne!(prefix(other, &ANTHROPIC).map(|p| p.hash), Some(a.hash));
        let other = br#"{"system":"be brief","messages":[{"role":"user","content":"ho"}]}"#;
        assert_ne!(prefix(other, &ANTHROPIC).map(|p| p.hash), Some(a.hash));
    }

    #[test]
    fn no_turns_no_prefix_and_a_long_ttl_is_seen() {
        assert_eq!(prefix(br#"{"messages":[]}"#, &ANTHROPIC), None);
        assert_eq!(prefix(br#"{"system":"x"}"#, &ANTHROPIC), None);
        assert_eq!(prefix(b"not json", &ANTHROPIC), None);
        let long = br#"{"system":[{"type":"text","text":"x","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":"a"}]}"#;
        assert!(prefix(long, &ANTHROPIC).unwrap().long);
    }
}
