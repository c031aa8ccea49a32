//! Where a protocol's bodies hold strings that are not text a model reads
//! as written: inline media (base64 bytes or a base64 data URL),
//! vendor-signed state (signatures, encrypted reasoning), and the text a
//! vendor's signature covers (signed reasoning). Guardrails screen every
//! other string, member names included; a media string is screened as the
//! text it decodes to when that is text (a plain-text document sent as
//! base64), signed state is never touched, and signed text is screened but
//! never rewritten (its vendor checks it byte for byte: a policy that would
//! change it refuses instead). A place is a path of member names from the
//! top level, arrays crossed at any index, and, where the protocol says in
//! a sibling what a member holds (Anthropic's `"type": "base64"`) or that a
//! signature covers it (`"signature": "…"` beside a thinking block's text),
//! those siblings: a member of the same name anywhere else (a tool's
//! input, a plain-text document's `data`) is text.

/// What the string at a place is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    /// A vendor's signature or encrypted state: never read, never changed.
    Signed,
    /// Inline media: base64, bare or as a `data:<type>;base64,` URL.
    Media,
    /// Text a vendor's signature covers (a thinking block's text beside
    /// its `signature`): read, never changed.
    SignedText,
}

/// One place of a body that holds no text as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// Member names from the top level to the string; arrays are crossed
    /// at any index (`["messages", "content", "source", "data"]`).
    pub path: &'static [&'static str],
    /// A sibling member and the values it must have, every time the
    /// object names it (`("type", &["base64"])`); `None`: no such sibling.
    pub when: Option<(&'static str, &'static [&'static str])>,
    /// A sibling member that must hold a string that is not empty, every
    /// time the object names it: the signature that covers the text
    /// (`"signature"`); `None`: no such sibling.
    pub with: Option<&'static str>,
    /// Which object the siblings are asked of: 0, the string's own; `n`,
    /// the object holding the member `n` steps up the path (a Responses
    /// reasoning item, which holds `summary`, whose parts hold `text`).
    pub up: usize,
    /// What it holds.
    pub holds: Holds,
}

impl Place {
    /// A place found by its path alone.
    pub const fn at(path: &'static [&'static str], holds: Holds) -> Place {
        Place { path, when: None, with: None, up: 0, holds }
    }

    /// A place whose object's `member` names one of `values`.
    pub const fn when(
        path: &'static [&'static str],
        member: &'static str,
        values: &'static [&'static str],
        holds: Holds,
    ) -> Place {
        Place { path, when: Some((member, values)), with: None, up: 0, holds }
    }

    /// This place, only where its object also holds `member` (a string,
    /// not empty).
    pub const fn with(self, member: &'static str) -> Place {
        Place { with: Some(member), ..self }
    }

    /// This place with its siblings asked of the object holding the
    /// member `steps` up its path.
    pub const fn up(self, steps: usize) -> Place {
        Place { up: steps, ..self }
    }

    /// The member name a body holding this place must name: its sibling
    /// signature's, else its own (a cheap test before a walk).
    pub fn marker(&self) -> Option<&'static str> {
        self.with.or_else(|| self.path.last().copied())
    }
}

/// A protocol's places, in its requests and in its whole replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opaque {
    /// In a request body.
    pub request: &'static [Place],
    /// In a whole reply.
    pub reply: &'static [Place],
}

impl Opaque {
    /// Every string is text.
    pub const NONE: Opaque = Opaque { request: &[], reply: &[] };
}

/// How a protocol's conversation lets the signed reasoning of a past turn
/// go, where its vendor says it may: Anthropic's extended thinking guide,
/// "you can omit thinking and redacted_thinking blocks from prior
/// assistant role turns" (the turn in progress, its tool loop included,
/// must send its own back whole and unmodified); Claude on Bedrock is the
/// same model ("the Anthropic API automatically ignores thinking blocks
/// from previous turns"). A turn begins at a message of the caller's own
/// words (a user message that is not only tool results).
#[derive(Debug, Clone, Copy)]
pub struct PastReasoning {
    /// Whether a message begins a turn.
    pub opens_turn: fn(&serde_json::Value) -> bool,
    /// An assistant message's reasoning texts a signature covers.
    pub signed_texts: fn(&serde_json::Value) -> Vec<&str>,
    /// Takes every reasoning block out of an assistant message (a turn's
    /// reasoning goes whole or not at all); the paths of what it took, from
    /// the message. Empty: it cannot (nothing else would remain).
    pub strip: fn(&mut serde_json::Value) -> Vec<String>,
}

/// `body` (a request whose conversation is in `messages`) without the
/// reasoning of each assistant message before the last turn whose signed
/// text `omit` says must go, and the paths of the blocks taken out (from
/// the top level: `messages.1.content.0`); `None` when nothing was taken
/// out (a body that is not such a request, no such message, or one that
/// would be left empty).
pub fn omit_past_reasoning(
    body: &[u8],
    how: &PastReasoning,
    omit: &mut dyn FnMut(&str) -> bool,
) -> Option<(Vec<u8>, Vec<String>)> {
    let mut value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let messages = value.get_mut("messages")?.as_array_mut()?;
    let turn = messages.iter().rposition(how.opens_turn)?;
    let mut taken = Vec::new();
    for (at, message) in messages[..turn].iter_mut().enumerate() {
        let assistant = message.get("role").and_then(serde_json::Value::as_str) == Some("assistant");
        if !assistant || !(how.signed_texts)(message).into_iter().any(&mut *omit) {
            continue;
        }
        taken.extend((how.strip)(message).into_iter().map(|path| format!("messages.{at}.{path}")));
    }
    if taken.is_empty() {
        return None;
    }
    Some((serde_json::to_vec(&value).ok()?, taken))
}
