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
use switchyard_ir::{Block, Request, Role};

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

/// A vendor that signs reasoning, as a protocol's readers find its
/// signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signer {
    /// Claude (Anthropic's API and Bedrock verify it).
    Claude,
    /// Gemini.
    Gemini,
    /// Encrypted reasoning a Responses caller sent back: OpenAI's, or a
    /// Claude signature the gateway gave that caller.
    OpenAiOrClaude,
}

/// What a protocol makes of signed reasoning (its ingress table says it):
/// whose signature a thinking block read from its callers carries, and
/// whose signed state a lane of it takes back.
#[derive(Debug, Clone, Copy)]
pub struct Signing {
    /// The signer of a signed (or redacted) thinking block its readers
    /// took from a caller (`None`: its readers keep no signature).
    pub reads: Option<Signer>,
    /// The signed state its lanes verify.
    pub takes: Lineage,
}

impl Signing {
    /// Signatures read as `reads`'s, none taken back.
    pub const fn reads(reads: Option<Signer>) -> Signing {
        Signing { reads, takes: Lineage::NONE }
    }

    /// The same, its lanes taking back `takes`.
    pub const fn taking(self, takes: Lineage) -> Signing {
        Signing { takes, ..self }
    }
}

/// Substrings one of which a body carrying signed state holds in every
/// protocol: a cheap test before the request is read.
pub const MARKERS: [&[u8]; 4] = [b"ignature", b"encrypted_content", b"redacted", b"__si"];

impl Lineage {
    /// Nothing signed.
    pub const NONE: Lineage = Lineage { claude: false, gemini: false, openai_or_claude: false };

    /// The signed state `request` (read from a body of a protocol whose
    /// table says `caller`) carries in its assistant turns.
    pub fn of(request: &Request, caller: &Signing) -> Lineage {
        let mut lineage = Lineage::default();
        for block in request.messages.iter().filter(|m| m.role == Role::Assistant).flat_map(|m| &m.content) {
            match block {
                Block::ToolUse(call) if call.signature.is_some() => lineage.gemini = true,
                Block::Thinking { signature: Some(_), .. } | Block::RedactedThinking { .. } => match caller.reads {
                    Some(Signer::Gemini) => lineage.gemini = true,
                    Some(Signer::OpenAiOrClaude) => lineage.openai_or_claude = true,
                    Some(Signer::Claude) => lineage.claude = true,
                    None => {}
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

    /// Whether a lane of a protocol whose table says `lane` can take every
    /// signed piece back.
    pub fn accepts(self, lane: &Signing) -> bool {
        let takes = lane.takes;
        (!self.claude || takes.claude)
            && (!self.gemini || takes.gemini)
            && (!self.openai_or_claude || takes.openai_or_claude)
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
