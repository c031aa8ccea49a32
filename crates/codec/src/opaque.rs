//! Where a protocol's bodies hold strings that are not text a model reads
//! as written: inline media (base64 bytes or a base64 data URL) and
//! vendor-signed state (signatures, encrypted reasoning). Guardrails screen
//! every other string, member names included; a media string is screened
//! as the text it decodes to when that is text (a plain-text document sent
//! as base64), and signed state is never touched (its vendor checks it byte
//! for byte). A place is a path of member names from the top level, arrays
//! crossed at any index, and, where the protocol says in a sibling what a
//! member holds (Anthropic's `"type": "base64"`), that sibling's values: a
//! member of the same name anywhere else (a tool's input, a plain-text
//! document's `data`) is text.

/// What the string at a place is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holds {
    /// A vendor's signature or encrypted state: never read, never changed.
    Signed,
    /// Inline media: base64, bare or as a `data:<type>;base64,` URL.
    Media,
}

/// One place of a body that holds no text as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// Member names from the top level to the string; arrays are crossed
    /// at any index (`["messages", "content", "source", "data"]`).
    pub path: &'static [&'static str],
    /// A sibling member and the values it must have, every time the
    /// object names it (`("type", &["base64"])`); `None`: the path alone.
    pub when: Option<(&'static str, &'static [&'static str])>,
    /// What it holds.
    pub holds: Holds,
}

impl Place {
    /// A place found by its path alone.
    pub const fn at(path: &'static [&'static str], holds: Holds) -> Place {
        Place { path, when: None, holds }
    }

    /// A place whose object's `member` names one of `values`.
    pub const fn when(
        path: &'static [&'static str],
        member: &'static str,
        values: &'static [&'static str],
        holds: Holds,
    ) -> Place {
        Place { path, when: Some((member, values)), holds }
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
