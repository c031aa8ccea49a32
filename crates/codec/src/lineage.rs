//! Which lanes can take a conversation's signed state back: a stateless pin
//! derived from the request itself, so it holds across restarts and a
//! fleet.
//!
//! Signed reasoning is verified by the vendor that signed it: Claude's
//! thinking signatures by Anthropic (its API and Bedrock alike), Gemini's
//! thought signatures by Gemini, OpenAI's encrypted reasoning by OpenAI's
//! Responses API. A conversation carrying them must not fail over to a lane
//! that would reject them, or read them as its own. Who signed a block is
//! told by where the caller carried it: each protocol's readers already
//! took the gateway's own carriers off (`signature`), so what remains is
//! the vendor's.

use std::sync::LazyLock;

use memchr::memmem::Finder;
use switchyard_ir::{Block, Protocol, Request, Role};

/// The vendors whose signed state a conversation carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lineage {
    /// Claude's thinking signatures (or redacted thinking).
    pub claude: bool,
    /// Gemini's thought signatures (on calls or thinking).
    pub gemini: bool,
    /// Encrypted reasoning a Responses caller sent back: OpenAI's, or a
    /// Claude signature the gateway gave that caller (the two cannot be
    /// told apart), so either vendor's lanes take it.
    pub openai_or_claude: bool,
}

/// Substrings one of which a body carrying signed state holds in every
/// protocol: a cheap test before the request is read.
pub const MARKERS: [&[u8]; 4] = [b"ignature", b"encrypted_content", b"redacted", b"__si"];

impl Lineage {
    /// The signed state `request` (read from a `caller` body) carries in
    /// its assistant turns.
    pub fn of(request: &Request, caller: Protocol) -> Lineage {
        let mut lineage = Lineage::default();
        for block in request.messages.iter().filter(|m| m.role == Role::Assistant).flat_map(|m| &m.content) {
            match block {
                Block::ToolUse(call) if call.signature.is_some() => lineage.gemini = true,
                Block::Thinking { signature: Some(_), .. } | Block::RedactedThinking { .. } => match caller {
                    Protocol::Gemini => lineage.gemini = true,
                    Protocol::Responses => lineage.openai_or_claude = true,
                    Protocol::Anthropic | Protocol::Bedrock | Protocol::OpenAi => lineage.claude = true,
                    // Cohere's readers keep no signature.
                    Protocol::Cohere => {}
                },
                _ => {}
            }
        }
        lineage
    }

    /// Whether it carries anything signed.
    pub fn is_signed(self) -> bool {
        self.claude || self.gemini || self.openai_or_claude
    }

    /// Whether a lane of `protocol` can take every signed piece back.
    pub fn accepts(self, protocol: Protocol) -> bool {
        let claude = matches!(protocol, Protocol::Anthropic | Protocol::Bedrock);
        (!self.claude || claude)
            && (!self.gemini || protocol == Protocol::Gemini)
            && (!self.openai_or_claude || claude || protocol == Protocol::Responses)
    }
}

/// Whether `body` may carry signed state (one of [`MARKERS`] is in it).
/// The searchers are built once: building one costs more than searching
/// a chat body with it.
pub fn may_be_signed(body: &[u8]) -> bool {
    static FINDERS: LazyLock<[Finder<'static>; MARKERS.len()]> = LazyLock::new(|| MARKERS.map(Finder::new));
    FINDERS.iter().any(|finder| finder.find(body).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_ir::{Message, ToolUse};

    fn turn(block: Block) -> Request {
        Request { messages: vec![Message::new(Role::Assistant, vec![block])], ..Request::default() }
    }

    #[test]
    fn signed_thinking_pins_to_the_vendor_that_signed_it() {
        let thinking = Block::Thinking { text: "t".into(), signature: Some("EqQB".into()) };
        let claude = Lineage::of(&turn(thinking.clone()), Protocol::Anthropic);
        assert!(claude.accepts(Protocol::Anthropic) && claude.accepts(Protocol::Bedrock));
        assert!(!claude.accepts(Protocol::Gemini) && !claude.accepts(Protocol::OpenAi));
        let gemini = Lineage::of(&turn(thinking.clone()), Protocol::Gemini);
        assert!(gemini.accepts(Protocol::Gemini) && !gemini.accepts(Protocol::Anthropic));
        let either = Lineage::of(&turn(thinking), Protocol::Responses);
        assert!(either.accepts(Protocol::Responses) && either.accepts(Protocol::Bedrock));
        assert!(!either.accepts(Protocol::OpenAi) && !either.accepts(Protocol::Cohere));
    }

    #[test]
    fn a_signed_call_pins_to_gemini_and_plain_history_pins_nothing() {
        let mut call = ToolUse::new("call_1", "f", "{}");
        call.signature = Some("c2ln".into());
        let lineage = Lineage::of(&turn(Block::ToolUse(call)), Protocol::OpenAi);
        assert_eq!(lineage, Lineage { gemini: true, ..Lineage::default() });
        let plain = Lineage::of(&turn(Block::text("hi")), Protocol::Anthropic);
        assert!(!plain.is_signed() && plain.accepts(Protocol::Cohere));
        // Claude's and Gemini's both: no lane takes them all.
        let both = Lineage { claude: true, gemini: true, ..Lineage::default() };
        assert!(Protocol::ALL.iter().all(|p| !both.accepts(*p)));
    }

    #[test]
    fn the_marker_test_finds_every_protocols_carrier() {
        for body in [
            &br#"{"thinking_blocks":[{"signature":"x"}]}"#[..],
            br#"{"thoughtSignature":"x"}"#,
            br#"{"encrypted_content":"x"}"#,
            br#"{"type":"redacted_thinking"}"#,
            br#"{"id":"call_1__sig0badf00d_x"}"#,
        ] {
            assert!(may_be_signed(body), "{}", String::from_utf8_lossy(body));
        }
        assert!(!may_be_signed(br#"{"messages":[{"role":"user","content":"hi"}]}"#));
    }
}
